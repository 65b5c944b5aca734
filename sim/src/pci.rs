//! The simulated drive as a PCIe function: [`SimTransport`] implements
//! `nvme::transport::Transport` over a type 0 configuration space and BAR0.
//!
//! Configuration space (PCI Local Bus 3.0 §6.1, PCIe Base 4.0 §7.5, NVMe 1.4 §2.1):
//! Vendor/Device ID from the configuration, class code 010802h (mass storage, NVM,
//! NVM Express), the Command register (Memory Space and Bus Master Enable honoured),
//! BAR0/1 a 64-bit non-prefetchable memory BAR with sizing semantics (writing all ones
//! reads back the size mask), BAR4 a 32-bit memory BAR for the MSI-X table and PBA, and
//! a capabilities list: PCI Power Management (01h), MSI-X (11h) and PCI Express (10h),
//! whose Initiate Function Level Reset resets the function.
//!
//! BAR0 holds the controller's registers and doorbells (see [`crate::controller`]).
//! With Memory Space Enable clear, BAR0 reads return all ones and writes are dropped, as
//! an unclaimed access looks to software; so do configuration reads and every access
//! while the drive is powered off ([`SimTransport::power_cut`] to
//! [`SimTransport::power_on`]).

use std::sync::{Arc, Mutex};

use nvme::transport::{DmaRegion, PowerMethod, PowerSwitch, Transport, TransportError};

use crate::controller::Controller;
pub use crate::controller::{ControllerConfig, FetchTrace, SharedCommandSet};
use crate::exec::CommandSet;
use crate::service::{SimClock, IDLE_STEP_NS};
use crate::subsystem::Quirk;

/// Configuration space offsets (type 0 header and our capabilities).
mod cfg {
    pub const COMMAND: usize = 0x04;
    pub const REVISION_CLASS: usize = 0x08;
    pub const HEADER: usize = 0x0c;
    pub const BAR0: usize = 0x10;
    pub const BAR1: usize = 0x14;
    pub const BAR4: usize = 0x20;
    pub const SUBSYSTEM: usize = 0x2c;
    pub const CAPABILITIES_POINTER: usize = 0x34;
    pub const INTERRUPT: usize = 0x3c;
    /// PCI Power Management capability.
    pub const PM: usize = 0x40;
    /// MSI-X capability.
    pub const MSIX: usize = 0x50;
    /// PCI Express capability.
    pub const PCIE: usize = 0x60;
    /// Device Control (16 bits) / Device Status (16 bits) in the PCI Express capability.
    pub const PCIE_DEVICE_CONTROL: usize = PCIE + 0x08;
    /// Size of configuration space (PCIe extended space included; no extended capability).
    pub const SIZE: usize = 4096;
}

/// PCI Command register bits.
const COMMAND_MEMORY_SPACE: u32 = 1 << 1;
const COMMAND_BUS_MASTER: u32 = 1 << 2;
/// Device Control: Initiate Function Level Reset (bit 15).
const DEVICE_CONTROL_INITIATE_FLR: u32 = 1 << 15;

/// Configuration space as bytes, with per-bit write masks: writable bits take the
/// written value, RW1C bits are cleared by writing 1, everything else is read-only.
struct ConfigSpace {
    bytes: [u8; cfg::SIZE],
    writable: [u8; cfg::SIZE],
    write_one_clear: [u8; cfg::SIZE],
}

impl ConfigSpace {
    fn new(config: &ControllerConfig) -> Self {
        let mut c = ConfigSpace { bytes: [0; cfg::SIZE], writable: [0; cfg::SIZE], write_one_clear: [0; cfg::SIZE] };
        let bar0_size = config.bar0_size();
        let vectors = config.vectors() as u32;
        let msix_table_bytes = vectors * 16;
        let pba_offset = msix_table_bytes.next_multiple_of(8);
        let bar4_size = (pba_offset + vectors.div_ceil(64) * 8).next_power_of_two().max(4096);

        c.init(0x00, config.vendor_id as u32 | (config.device_id as u32) << 16, 0, 0);
        // Command: I/O, Memory, Bus Master, Parity, SERR#, Interrupt Disable writable.
        // Status: Capabilities List (bit 4); error bits 15:11 and 8 are RW1C.
        c.init(cfg::COMMAND, 1 << 20, 0x0000_0547, 0xf900_0000);
        c.init(cfg::REVISION_CLASS, 0x0108_0200 | config.revision_id as u32, 0, 0);
        // Cache Line Size writable; header type 0, single function.
        c.init(cfg::HEADER, 0, 0x0000_00ff, 0);
        // BAR0: memory, 64-bit (type 10b), non-prefetchable; address bits above the size.
        c.init(cfg::BAR0, 0b100, !(bar0_size as u32 - 1) & !0xf, 0);
        c.init(cfg::BAR1, 0, (!(bar0_size - 1) >> 32) as u32, 0);
        // BAR4: memory, 32-bit, for the MSI-X table and PBA.
        c.init(cfg::BAR4, 0, !(bar4_size - 1) & !0xf, 0);
        c.init(cfg::SUBSYSTEM, config.subsystem_vendor_id as u32 | (config.subsystem_id as u32) << 16, 0, 0);
        c.init(cfg::CAPABILITIES_POINTER, cfg::PM as u32, 0, 0);
        // Interrupt Line writable, Interrupt Pin INTA#.
        c.init(cfg::INTERRUPT, 0x0100, 0xff, 0);
        // Power Management: version 3 (PMC bits 18:16), next MSI-X.
        c.init(cfg::PM, 0x01 | (cfg::MSIX as u32) << 8 | 0b011 << 16, 0, 0);
        // PMCSR: PowerState (1:0) writable, No_Soft_Reset (bit 3) set.
        c.init(cfg::PM + 4, 1 << 3, 0b11, 0);
        // MSI-X: Table Size (10:0, N - 1), Function Mask (14) and Enable (15) writable.
        c.init(cfg::MSIX, 0x11 | (cfg::PCIE as u32) << 8 | (vectors - 1) << 16, 0xc000_0000, 0);
        c.init(cfg::MSIX + 4, 4, 0, 0); // table at offset 0 of BAR4
        c.init(cfg::MSIX + 8, pba_offset | 4, 0, 0); // PBA after it, BAR4
                                                     // PCI Express capability, version 2, Endpoint; end of the list.
        c.init(cfg::PCIE, 0x10 | 0x0002 << 16, 0, 0);
        // Device Capabilities: Max_Payload_Size Supported 256 bytes, Function Level Reset Capability.
        c.init(cfg::PCIE + 0x04, 0b001 | 1 << 28, 0, 0);
        // Device Control (MRRS 512 bytes, Relaxed Ordering, No Snoop) writable bits 14:0;
        // Device Status error bits 3:0 RW1C.
        c.init(cfg::PCIE_DEVICE_CONTROL, 0x2810, 0x0000_7fff, 0x000f_0000);
        // Link Capabilities: 8.0 GT/s, x4. Link Status: 8.0 GT/s, x4.
        c.init(cfg::PCIE + 0x0c, 0x3 | 4 << 4, 0, 0);
        c.init(cfg::PCIE + 0x10, (0x3 | 4 << 4) << 16, 0x0000_0fff, 0);
        // Link Capabilities 2: Supported Link Speeds 2.5, 5.0, 8.0 GT/s.
        c.init(cfg::PCIE + 0x2c, 0b1110, 0, 0);
        // Link Control 2: Target Link Speed 8.0 GT/s (writable).
        c.init(cfg::PCIE + 0x30, 0x3, 0x0000_000f, 0);
        c
    }

    fn init(&mut self, at: usize, value: u32, writable: u32, write_one_clear: u32) {
        self.bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
        self.writable[at..at + 4].copy_from_slice(&writable.to_le_bytes());
        self.write_one_clear[at..at + 4].copy_from_slice(&write_one_clear.to_le_bytes());
    }

    fn dword(table: &[u8; cfg::SIZE], at: usize) -> u32 {
        u32::from_le_bytes([table[at], table[at + 1], table[at + 2], table[at + 3]])
    }

    fn read(&self, at: usize) -> u32 {
        Self::dword(&self.bytes, at)
    }

    fn write(&mut self, at: usize, value: u32) {
        let old = self.read(at);
        let writable = Self::dword(&self.writable, at);
        let w1c = Self::dword(&self.write_one_clear, at);
        let new = (old & !writable) | (value & writable);
        let new = new & !(value & w1c);
        self.bytes[at..at + 4].copy_from_slice(&new.to_le_bytes());
    }
}

/// The simulated NVMe drive as a PCIe function: configuration space, BAR0 (registers
/// and doorbells) and the host memory it reaches by DMA.
pub struct SimTransport {
    name: String,
    config_space: ConfigSpace,
    controller: Controller,
    dma: DmaRegion,
    bar0_size: u64,
    /// Between a power cut and power-on.
    off: bool,
    /// The port's link is down ([`Transport::set_link`]): the function is gone from the
    /// host's view; the subsystem behind it runs on for the other ports.
    link_down: bool,
}

impl SimTransport {
    /// A drive with its own command set and its own host memory
    /// (`config.host_memory_bytes` at `config.host_memory_base`).
    pub fn new(config: ControllerConfig, command_set: Box<dyn CommandSet + Send>) -> SimTransport {
        Self::with_shared(config, Arc::new(Mutex::new(command_set)))
    }

    /// A controller over a command set other controllers (ports) may share, with a clock
    /// of its own carrying `config.service` (see [`Self::another_port`] for a port on the
    /// same clock).
    pub fn with_shared(config: ControllerConfig, command_set: SharedCommandSet) -> SimTransport {
        let clock = SimClock::new(config.service.clone(), config.quirks.has(Quirk::ReadsQueuedBehindWrites));
        Self::with_clock(config, command_set, clock)
    }

    /// Another controller (port) of this drive's subsystem: the same command set, clock
    /// and media, its own registers, queues and host memory.
    pub fn another_port(&self, config: ControllerConfig) -> SimTransport {
        Self::with_clock(config, self.controller.command_set().clone(), self.controller.clock().clone())
    }

    /// A controller on a clock (and media model) shared with other controllers; the
    /// clock's model governs, `config.service` is not used.
    pub fn with_clock(config: ControllerConfig, command_set: SharedCommandSet, clock: Arc<SimClock>) -> SimTransport {
        let bytes = config.host_memory_bytes.max(4096).next_multiple_of(4096);
        let base = match config.host_memory_base {
            0 => 0x1_0000_0000,
            b => b,
        };
        let dma = DmaRegion::heap(bytes, base);
        let config_space = ConfigSpace::new(&config);
        let bar0_size = config.bar0_size();
        let name = format!("sim:{}", config.name);
        let controller = Controller::with_clock(config, command_set, clock);
        SimTransport { name, config_space, controller, dma, bar0_size, off: false, link_down: false }
    }

    /// The subsystem's clock.
    pub fn clock(&self) -> &Arc<SimClock> {
        self.controller.clock()
    }

    /// Starts recording the I/O SQ each command is fetched from (timed mode), for tests.
    pub fn trace_fetches(&mut self) -> FetchTrace {
        self.controller.trace_fetches()
    }

    /// Lets simulated time reach `target` (never back), running what falls due.
    fn advance_to(&mut self, target: u64) {
        let clock = self.controller.clock().clone();
        clock.advance(target);
        self.controller.run_until(clock.now(), &self.dma);
    }

    /// Cuts the drive's power at this instant of the simulated clock: the controller's
    /// state and everything in flight gone, the command set losing what was not durable
    /// (random choices drawn from `seed`), every access reading all ones until
    /// [`Self::power_on`]. One port's cut is the whole subsystem's: a drive with other
    /// ports is cut through each of them.
    pub fn power_cut(&mut self, seed: u64) {
        self.controller.catch_up(&self.dma);
        self.controller.power_cut(seed);
        self.off = true;
    }

    /// Power back: configuration space at its initial values, the controller reset and
    /// ready (after CC.EN) once the profile's ready time has passed on the clock.
    pub fn power_on(&mut self) {
        if !std::mem::take(&mut self.off) {
            return;
        }
        self.config_space = ConfigSpace::new(self.controller.config());
        self.controller.power_on();
    }

    /// Whether the drive is powered.
    pub fn powered(&self) -> bool {
        !self.off
    }

    /// The controller behind BAR0 (its context, counters and command set).
    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    pub fn controller_mut(&mut self) -> &mut Controller {
        &mut self.controller
    }

    /// Raises an asynchronous event on this controller (see [`Controller::raise_event`]).
    pub fn raise_event(&mut self, event: crate::exec::AsyncEvent) {
        self.controller.raise_event(event, &self.dma);
    }

    fn config_offset(offset: u16) -> Result<usize, TransportError> {
        let at = offset as usize;
        if !at.is_multiple_of(4) || at + 4 > cfg::SIZE {
            return Err(TransportError::Other(format!(
                "configuration access at {offset:#x}: not a dword inside the 4 KiB configuration space"
            )));
        }
        Ok(at)
    }

    fn bar0_offset(&self, offset: u64) -> Result<(), TransportError> {
        if !offset.is_multiple_of(4) || offset.checked_add(4).is_none_or(|end| end > self.bar0_size) {
            return Err(TransportError::Other(format!(
                "BAR0 access at {offset:#x}: not a dword inside BAR0 ({:#x} bytes)",
                self.bar0_size
            )));
        }
        Ok(())
    }

    /// Powered off, or the port's link down: accesses reach no function.
    fn unreachable(&self) -> bool {
        self.off || self.link_down
    }

    fn memory_space_enabled(&self) -> bool {
        self.config_space.read(cfg::COMMAND) & COMMAND_MEMORY_SPACE != 0
    }

    /// Function Level Reset: configuration space back to its initial values and a
    /// conventional reset of the controller.
    fn function_level_reset(&mut self) {
        self.config_space = ConfigSpace::new(self.controller.config());
        self.controller.reset_registers();
        self.controller.set_bus_master(false, &self.dma);
    }
}

impl Transport for SimTransport {
    fn describe(&self) -> String {
        self.name.clone()
    }

    fn config_read32(&mut self, offset: u16) -> Result<u32, TransportError> {
        let at = Self::config_offset(offset)?;
        if self.off && self.controller.config().quirks.has(Quirk::RemovedFunctionAnswers) {
            // Quirk `removed-function-answers`: powered off, its configuration space still answers.
            return Ok(self.config_space.read(at));
        }
        if self.unreachable() {
            return Ok(u32::MAX);
        }
        Ok(self.config_space.read(at))
    }

    fn config_write32(&mut self, offset: u16, value: u32) -> Result<(), TransportError> {
        let at = Self::config_offset(offset)?;
        if self.unreachable() {
            return Ok(());
        }
        if at == cfg::PCIE_DEVICE_CONTROL && value & DEVICE_CONTROL_INITIATE_FLR != 0 {
            self.function_level_reset();
            return Ok(());
        }
        self.config_space.write(at, value);
        if at == cfg::COMMAND {
            let bus_master = self.config_space.read(cfg::COMMAND) & COMMAND_BUS_MASTER != 0;
            self.controller.set_bus_master(bus_master, &self.dma);
        }
        Ok(())
    }

    fn mmio_read32(&mut self, offset: u64) -> Result<u32, TransportError> {
        self.bar0_offset(offset)?;
        self.controller.catch_up(&self.dma);
        if self.off && self.controller.config().quirks.has(Quirk::RemovedFunctionAnswers) {
            // Quirk `removed-function-answers`: powered off, the registers still answer.
            return Ok(self.controller.mmio_read(offset));
        }
        if self.unreachable() || !self.memory_space_enabled() {
            return Ok(u32::MAX);
        }
        Ok(self.controller.mmio_read(offset))
    }

    fn mmio_write32(&mut self, offset: u64, value: u32) -> Result<(), TransportError> {
        self.bar0_offset(offset)?;
        self.controller.catch_up(&self.dma);
        if !self.unreachable() && self.memory_space_enabled() {
            self.controller.mmio_write(offset, value, &self.dma);
        }
        Ok(())
    }

    fn dma(&self) -> &DmaRegion {
        &self.dma
    }

    /// The port's link: down, the controller loses its queues and everything in flight
    /// (commands it fetched may have taken effect; their completions never arrive) and
    /// the function stops answering; up, it enumerates afresh, configuration space at its
    /// reset values. The subsystem (namespaces, data, the other ports) is untouched.
    fn has_link_switch(&self) -> bool {
        true
    }

    fn set_link(&mut self, up: bool) -> Result<(), TransportError> {
        match (up, self.link_down) {
            (false, false) => {
                self.controller.catch_up(&self.dma);
                self.controller.reset_registers();
                self.controller.set_bus_master(false, &self.dma);
                self.controller.port_link(false);
                self.link_down = true;
            }
            (true, true) => {
                self.link_down = false;
                self.config_space = ConfigSpace::new(self.controller.config());
                self.controller.port_link(true);
            }
            _ => {}
        }
        Ok(())
    }

    fn has_ana_hook(&self) -> bool {
        true
    }

    fn set_ana_state(&mut self, anagrpid: u32, state: u8) -> Result<(), TransportError> {
        self.controller.catch_up(&self.dma);
        self.controller.set_ana_state(anagrpid, state).map_err(TransportError::Other)
    }

    /// Simulated time in ns since the drive was built, shared by the subsystem's ports.
    fn now_ns(&mut self) -> u64 {
        self.controller.catch_up(&self.dma);
        self.controller.clock().now()
    }

    /// To the next event of the subsystem, or 1 ms on when nothing is scheduled.
    fn idle(&mut self) -> Result<(), TransportError> {
        self.controller.catch_up(&self.dma);
        let now = self.controller.clock().now();
        let next = self.controller.clock().next_event_after(now).unwrap_or(now + IDLE_STEP_NS);
        self.advance_to(next);
        Ok(())
    }

    /// To the next event if it is due by `deadline_ns`, else to the deadline.
    fn idle_until(&mut self, deadline_ns: u64) -> Result<(), TransportError> {
        self.controller.catch_up(&self.dma);
        let now = self.controller.clock().now();
        if deadline_ns <= now {
            return Ok(());
        }
        let next = self.controller.clock().next_event_after(now).filter(|&t| t <= deadline_ns);
        self.advance_to(next.unwrap_or(deadline_ns));
        Ok(())
    }

    fn simulated_clock(&self) -> bool {
        true
    }

    fn power(&mut self) -> Option<&mut dyn PowerSwitch> {
        Some(self)
    }
}

/// The simulated drive's power: an instant cut on its clock ([`SimTransport::power_cut`]).
impl PowerSwitch for SimTransport {
    fn method(&self) -> PowerMethod {
        PowerMethod::Cut
    }

    fn off(&mut self, seed: u64) -> Result<(), TransportError> {
        self.power_cut(seed);
        Ok(())
    }

    fn on(&mut self) -> Result<(), TransportError> {
        self.power_on();
        Ok(())
    }
}
