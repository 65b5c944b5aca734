//! The controller as nvtest's host driver runs it: bring-up (NVMe 1.4 §7.6.1
//! "Initialization"), I/O queue creation, orderly shutdown (§7.6.2), controller reset
//! (§7.3.2), the admin queue's Asynchronous Event Requests, and the [`Device`]
//! implementation the runner uses.

use std::time::Duration;

use crate::device::{Access, Data, Device, DeviceError, Registers};
use crate::driver::memory::{DmaBuf, PageAllocator, PAGE_SIZE};
use crate::driver::queue::{IoQueuePair, QueuePair, SlotSizes};
use crate::spec::features::{set_features, FeatureId, NumberOfQueues};
use crate::spec::queue::{
    CreateIoCompletionQueue, CreateIoSubmissionQueue, DeleteIoCompletionQueue, DeleteIoSubmissionQueue, QueuePriority,
};
use crate::spec::registers::{offset, Aqa, Cap, Cc, Csts};
use crate::spec::{Command, Completion, Version};
use crate::transport::{DmaRegion, Transport};

/// PCI Command register (configuration space offset 04h): Memory Space Enable (bit 1)
/// and Bus Master Enable (bit 2).
const PCI_COMMAND: u16 = 0x04;
const PCI_COMMAND_MEMORY_SPACE: u32 = 1 << 1;
const PCI_COMMAND_BUS_MASTER: u32 = 1 << 2;

/// How the driver sets the controller up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Entries of the admin submission and completion queues (2 ..= 4096).
    pub admin_queue_depth: u16,
    /// I/O queue pairs to create (fewer if the controller allocates fewer).
    pub io_queues: u16,
    /// I/O queues asked for in Set Features Number of Queues (at least `io_queues`):
    /// the room workloads have for queues of their own ([`Controller::open_queues`]).
    /// The feature can be set only once per Controller Reset, so it is asked for once.
    pub io_queues_requested: u16,
    /// The arbitration mechanism to select in CC.AMS (§4.13).
    pub arbitration: ArbitrationMechanism,
    /// Entries of each I/O queue (capped at CAP.MQES + 1).
    pub io_queue_depth: u32,
    /// Deadline of every command, in milliseconds.
    pub command_timeout_ms: u64,
    /// Data buffer allocated per command slot when a queue is created, in bytes.
    pub slot_buffer_bytes: usize,
    /// Largest data buffer a slot keeps for the next command; larger transfers use a
    /// buffer allocated and freed around the command.
    pub slot_buffer_keep_max: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            admin_queue_depth: 32,
            io_queues: 1,
            io_queues_requested: 16,
            arbitration: ArbitrationMechanism::RoundRobin,
            io_queue_depth: 256,
            command_timeout_ms: 10_000,
            slot_buffer_bytes: 4096,
            slot_buffer_keep_max: 128 * 1024,
        }
    }
}

/// CC.AMS: Arbitration Mechanism Selected (Figure 78, CC bits 13:11; §4.13 "Command
/// Arbitration").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArbitrationMechanism {
    /// 000b: round robin, every controller supports it.
    RoundRobin,
    /// 001b: weighted round robin with urgent priority class, when CAP.AMS bit 0 is set.
    WeightedRoundRobinUrgent,
}

impl ArbitrationMechanism {
    /// The CC.AMS value.
    pub fn ams(self) -> u8 {
        match self {
            ArbitrationMechanism::RoundRobin => 0b000,
            ArbitrationMechanism::WeightedRoundRobinUrgent => 0b001,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// CC.EN = 1, queues set up.
    Enabled,
    /// CC.EN = 0 (after [`Controller::disable`] or a failed bring-up).
    Disabled,
    /// Shutdown processing complete (CSTS.SHST = 10b).
    ShutDown,
}

/// An NVMe controller driven by nvtest through a [`Transport`].
pub struct Controller {
    pub(super) transport: Box<dyn Transport>,
    options: Options,
    cap: Cap,
    version: Version,
    pub(super) pages: PageAllocator,
    admin: Option<QueuePair>,
    pub(super) io: Vec<QueuePair>,
    /// NSQA and NCQA (1-based) from the last Set Features Number of Queues.
    queues_allocated: (u16, u16),
    /// Asynchronous Event Requests the caller asked to keep outstanding.
    aer_target: u16,
    state: State,
    /// Nanoseconds from the CC.EN write to CSTS.RDY at the last bring-up.
    last_ready_ns: Option<u64>,
    /// How long a bring-up waits for CSTS.RDY beyond CAP.TO (after power-on, so that a
    /// late drive is measured rather than given up on).
    ready_grace: Duration,
    /// The other controllers of the NVM subsystem brought up beside this one (the other
    /// ports of a multi-port drive), each with its own queues and host memory.
    ports: Vec<Controller>,
}

/// What a power-on took, on the target's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PowerOn {
    /// From the CC.EN write to CSTS.RDY: what CAP.TO bounds (Figure 79). `None` where
    /// nvtest does not enable the controller (the kernel's driver does, on a kernel target).
    pub ready_ns: Option<u64>,
    /// From power-on to the controller brought up (CSTS.RDY, I/O queues created).
    pub since_power_on_ns: u64,
    /// The switch used.
    pub method: crate::transport::PowerMethod,
    /// A reinsertion into a hot-plug slot ([`Controller::reinsert`]): from the slot's
    /// power on to the link up (Data Link Layer Link Active), where the port reports it.
    pub link_up_ns: Option<u64>,
    /// A reinsertion into a hot-plug slot: from the slot's power on to the function
    /// enumerated (configuration space answering, BARs assigned). `None` otherwise.
    pub enumerated_ns: Option<u64>,
}

/// What a normal shutdown before a power cut saw (§7.6.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shutdown {
    /// From the CC.SHN write to CSTS.SHST = 10b (shutdown processing complete), or why
    /// it was not seen within CAP.TO (at least 1 s).
    pub complete: Result<u64, String>,
    /// Why CSTS.SHST could not be watched, when it could not (the kernel's driver shut the
    /// controller down): `complete` is then the time the driver took, not a verdict.
    pub unseen: Option<String>,
}

impl Controller {
    /// Brings the controller up (§7.6.1) and creates `options.io_queues` I/O queue pairs.
    pub fn new(transport: Box<dyn Transport>, options: Options) -> Result<Controller, DeviceError> {
        if !(2..=4096).contains(&options.admin_queue_depth) {
            return Err(DeviceError::Driver(format!(
                "admin queue depth {} is not 2 ..= 4096 (AQA holds 12-bit 0's based sizes)",
                options.admin_queue_depth
            )));
        }
        let dma = transport.dma();
        let pages = PageAllocator::new(dma.base(), dma.len());
        let mut ctrl = Controller {
            transport,
            options,
            cap: Cap::new(),
            version: Version::new(0, 0, 0),
            pages,
            admin: None,
            io: Vec::new(),
            queues_allocated: (0, 0),
            aer_target: 0,
            state: State::Disabled,
            last_ready_ns: None,
            ready_grace: Duration::ZERO,
            ports: Vec::new(),
        };
        ctrl.enable()?;
        Ok(ctrl)
    }

    /// Adds another controller of the same NVM subsystem (a port), brought up already:
    /// [`Device::port`] reaches it. It is shut down with this one.
    pub fn add_port(&mut self, port: Controller) {
        self.ports.push(port);
    }

    /// This controller (`port` 0) or its `port`-th other port's.
    pub(super) fn port_mut(&mut self, port: usize) -> Option<&mut Controller> {
        match port {
            0 => Some(self),
            n => self.ports.get_mut(n - 1),
        }
    }

    /// [`Self::port_mut`], to look at.
    pub(super) fn port_ref(&self, port: usize) -> Option<&Controller> {
        match port {
            0 => Some(self),
            n => self.ports.get(n - 1),
        }
    }

    /// How many other ports' controllers were brought up beside this one.
    pub(super) fn other_ports(&self) -> usize {
        self.ports.len()
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// CAP as read at the last bring-up.
    pub fn cap(&self) -> Cap {
        self.cap
    }

    /// VS as read at the last bring-up.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Doorbell stride in bytes (`4 << CAP.DSTRD`).
    pub fn doorbell_stride(&self) -> u64 {
        4 << self.cap.dstrd()
    }

    /// The memory page size selected in CC.MPS.
    pub fn memory_page_size(&self) -> usize {
        PAGE_SIZE
    }

    /// The Maximum Data Transfer Size in bytes for Identify Controller's MDTS value:
    /// `2 ^ MDTS` units of the minimum memory page size (CAP.MPSMIN); `None` when MDTS is
    /// 0 (no limit). The driver itself never limits a transfer; callers that want to stay
    /// within MDTS split their transfers at this size.
    pub fn max_transfer_bytes(&self, mdts: u8) -> Option<usize> {
        if mdts == 0 {
            return None;
        }
        let min_page = 1usize << (12 + self.cap.mpsmin() as u32);
        1usize.checked_shl(mdts as u32).and_then(|units| units.checked_mul(min_page)).or(Some(usize::MAX))
    }

    /// Number of I/O Submission and Completion Queues the controller allocated (NSQA + 1,
    /// NCQA + 1) in answer to Set Features Number of Queues.
    pub fn queues_allocated(&self) -> (u16, u16) {
        self.queues_allocated
    }

    /// Reads a 32-bit BAR0 register.
    pub fn read_register(&mut self, offset: u64) -> Result<u32, DeviceError> {
        Ok(self.transport.mmio_read32(offset)?)
    }

    /// Reads a 64-bit BAR0 register (CAP, ASQ, ACQ).
    pub fn read_register64(&mut self, offset: u64) -> Result<u64, DeviceError> {
        Ok(self.transport.mmio_read64(offset)?)
    }

    /// Writes a 32-bit BAR0 register. The driver's view of the controller is not updated:
    /// after changing CC, call [`Self::disable`] / [`Self::enable`] / [`Self::reset`].
    pub fn write_register(&mut self, offset: u64, value: u32) -> Result<(), DeviceError> {
        Ok(self.transport.mmio_write32(offset, value)?)
    }

    pub fn transport(&self) -> &dyn Transport {
        &*self.transport
    }

    /// The transport itself, for register- and configuration-level cases.
    pub fn transport_mut(&mut self) -> &mut dyn Transport {
        &mut *self.transport
    }

    /// Host memory the controller reaches.
    pub fn dma(&self) -> &DmaRegion {
        self.transport.dma()
    }

    /// Allocates host memory for a case's own queues, PRP lists or buffers.
    pub fn alloc_dma(&mut self, bytes: usize) -> Result<DmaBuf, DeviceError> {
        self.pages.alloc(bytes)
    }

    /// Returns memory from [`Self::alloc_dma`].
    pub fn free_dma(&mut self, buf: DmaBuf) -> Result<(), DeviceError> {
        self.pages.free(buf)
    }

    /// A queue pair: 0 is the admin queue, 1.. the I/O queues.
    pub fn queue(&mut self, qid: u16) -> Result<IoQueuePair<'_>, DeviceError> {
        let timeout = self.timeout();
        let index = self.io.iter().position(|q| q.qid == qid);
        let exists = if qid == 0 { self.admin.is_some() } else { index.is_some() };
        if !exists {
            return Err(DeviceError::Driver(match self.state {
                State::Enabled => format!("queue {qid} does not exist (I/O queues: {:?})", self.io_queues()),
                State::Disabled => "the controller is disabled (CC.EN = 0)".to_string(),
                State::ShutDown => "the controller has been shut down".to_string(),
            }));
        }
        let queue = match (self.admin.as_mut(), index) {
            (Some(admin), _) if qid == 0 => admin,
            (_, Some(i)) => &mut self.io[i],
            _ => return Err(DeviceError::Driver(format!("queue {qid} does not exist"))),
        };
        Ok(IoQueuePair { queue, transport: &mut *self.transport, pages: &mut self.pages, timeout })
    }

    /// Sends an admin command exactly as given (PRPs untouched, CID assigned) and waits.
    pub fn admin_raw(&mut self, cmd: Command) -> Result<Completion, DeviceError> {
        self.queue(0)?.execute_raw(cmd)
    }

    /// Completions that matched no outstanding command, per queue, since the last call.
    pub fn take_unexpected_completions(&mut self) -> Vec<(u16, Completion)> {
        let mut out = Vec::new();
        for q in self.admin.iter_mut().chain(self.io.iter_mut()) {
            out.extend(q.unexpected.drain(..).map(|c| (q.qid, c)));
        }
        out
    }

    fn wait_csts(&mut self, what: &str, bound: Duration, done: impl Fn(Csts) -> bool) -> Result<Csts, DeviceError> {
        let start = self.transport.now_ns();
        let mut spins = 0u32;
        loop {
            let csts = Csts::from_bits(self.transport.mmio_read32(offset::CSTS)?);
            if done(csts) {
                return Ok(csts);
            }
            let deadline = start.saturating_add(bound.as_nanos() as u64);
            if self.transport.now_ns() > deadline {
                return Err(DeviceError::Driver(format!(
                    "{what}: not within {} ms (CAP.TO {}); CSTS = {:#x}",
                    bound.as_millis(),
                    self.cap.to(),
                    csts.into_bits()
                )));
            }
            // Never past the deadline: a simulated clock would jump over it to the event.
            self.transport.idle_until(deadline.saturating_add(1))?;
            spins += 1;
            if spins > 100 && !self.transport.simulated_clock() {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }

    /// CAP.TO as a bound, never less than 500 ms.
    fn ready_bound(&self) -> Duration {
        Duration::from_millis(self.cap.timeout_ms().max(500))
    }

    fn forget_queues(&mut self) {
        for q in self.io.drain(..) {
            q.release(&mut self.pages);
        }
        if let Some(admin) = self.admin.take() {
            admin.release(&mut self.pages);
        }
    }

    /// Clears CC.EN and waits for CSTS.RDY = 0 (a Controller Reset, §7.3.2): every queue
    /// and outstanding command is gone afterwards.
    pub fn disable(&mut self) -> Result<(), DeviceError> {
        let cc = Cc::from_bits(self.transport.mmio_read32(offset::CC)?);
        if cc.en() {
            self.transport.mmio_write32(offset::CC, cc.with_en(false).with_shn(0).into_bits())?;
        }
        self.state = State::Disabled;
        let result = self.wait_csts("CSTS.RDY to clear after CC.EN = 0", self.ready_bound(), |c| !c.rdy());
        self.forget_queues();
        result.map(|_| ())
    }

    /// Brings the controller up from any state: §7.6.1 steps, Set Features Number of
    /// Queues, the I/O queue pairs, and the Asynchronous Event Requests asked for.
    pub fn enable(&mut self) -> Result<(), DeviceError> {
        self.state = State::Disabled;
        self.forget_queues();

        let command = self.transport.config_read32(PCI_COMMAND)?;
        let id = self.transport.config_read32(0x00)?;
        if id & 0xffff == 0xffff {
            return Err(DeviceError::Driver(format!("no PCI function answers (ID register {id:#x})")));
        }
        let enables = PCI_COMMAND_MEMORY_SPACE | PCI_COMMAND_BUS_MASTER;
        self.transport.config_write32(PCI_COMMAND, (command & 0xffff) | enables)?;

        self.cap = Cap::from_bits(self.transport.mmio_read64(offset::CAP)?);
        self.version = Version::from_register(self.transport.mmio_read32(offset::VS)?);
        if self.cap.mpsmin() > 0 {
            return Err(DeviceError::Unsupported(format!(
                "CAP.MPSMIN is {} (smallest memory page {} KiB); nvtest's driver uses 4 KiB pages",
                self.cap.mpsmin(),
                4u32 << self.cap.mpsmin()
            )));
        }
        if self.cap.css() & 1 == 0 {
            return Err(DeviceError::Unsupported(format!(
                "CAP.CSS {:#x} does not include the NVM command set",
                self.cap.css()
            )));
        }

        let cc = Cc::from_bits(self.transport.mmio_read32(offset::CC)?);
        if cc.en() {
            self.transport.mmio_write32(offset::CC, cc.with_en(false).with_shn(0).into_bits())?;
        }
        self.wait_csts("CSTS.RDY to clear before enabling", self.ready_bound(), |c| !c.rdy())?;

        let depth = self.options.admin_queue_depth as u32;
        let sizes =
            SlotSizes { preallocated: self.options.slot_buffer_bytes, keep_max: self.options.slot_buffer_keep_max };
        let admin = QueuePair::new(0, depth, self.cap.dstrd(), self.transport.dma(), &mut self.pages, sizes)?;
        let aqa = Aqa::new().with_asqs(depth as u16 - 1).with_acqs(depth as u16 - 1);
        self.transport.mmio_write32(offset::AQA, aqa.into_bits())?;
        self.transport.mmio_write64(offset::ASQ, admin.sq_base())?;
        self.transport.mmio_write64(offset::ACQ, admin.cq_base())?;
        self.admin = Some(admin);

        let ams = self.options.arbitration;
        if ams != ArbitrationMechanism::RoundRobin && self.cap.ams() & 1 == 0 {
            return Err(DeviceError::Unsupported(format!(
                "CAP.AMS is {:02b}b: bit 0 (weighted round robin with urgent priority class) is not set",
                self.cap.ams()
            )));
        }
        // CSS = NVM (000b), MPS = 0 (4 KiB), AMS as asked, IOSQES = 6, IOCQES = 4.
        let cc = Cc::new().with_css(0).with_mps(0).with_ams(ams.ams()).with_iosqes(6).with_iocqes(4).with_en(true);
        self.transport.mmio_write32(offset::CC, cc.into_bits())?;
        let enabled_at = self.transport.now_ns();
        let bound = self.ready_bound() + self.ready_grace;
        let csts = self.wait_csts("CSTS.RDY to set after CC.EN = 1", bound, |c| c.rdy() || c.cfs())?;
        self.last_ready_ns = Some(self.transport.now_ns().saturating_sub(enabled_at));
        if csts.cfs() {
            return Err(DeviceError::Driver(format!(
                "controller fatal status (CSTS.CFS) after enabling; CSTS = {:#x}",
                csts.into_bits()
            )));
        }
        self.state = State::Enabled;

        self.create_io_queues()?;
        let target = self.aer_target;
        self.aer_target = 0;
        self.arm_async_events(target)
    }

    fn create_io_queues(&mut self) -> Result<(), DeviceError> {
        let wanted = self.options.io_queues;
        if wanted == 0 {
            return Ok(());
        }
        // Number of Queues (§5.21.1.7): NSQR / NCQR in CDW11, NSQA / NCQA in DW0.
        let asked = wanted.max(self.options.io_queues_requested) as u32;
        let request = NumberOfQueues::request(asked, asked);
        let set = set_features(FeatureId::NumberOfQueues, false, 0, request.into_bits());
        let done = self.admin(set, Data::None)?;
        if !done.status().is_success() {
            return Err(DeviceError::Driver(format!("Set Features Number of Queues failed: {}", done.status())));
        }
        let allocated = NumberOfQueues::from_bits(done.dw0);
        let nsqa = allocated.nsqr().saturating_add(1);
        let ncqa = allocated.ncqr().saturating_add(1);
        self.queues_allocated = (nsqa, ncqa);
        let count = wanted.min(nsqa).min(ncqa);
        for qid in 1..=count {
            self.create_own_queue(qid)?;
        }
        Ok(())
    }

    /// Creates I/O queue pair `qid` as the driver keeps it for its own commands
    /// ([`Device::io`]): `io_queue_depth` entries, urgent priority.
    pub(super) fn create_own_queue(&mut self, qid: u16) -> Result<(), DeviceError> {
        self.create_queue_pair(qid, self.options.io_queue_depth, QueuePriority::Urgent)
    }

    /// Creates I/O queue pair `qid` (its CQ, then its SQ posting to it, with QPRIO
    /// `priority`) of `entries` entries, capped at CAP.MQES + 1.
    pub(super) fn create_queue_pair(
        &mut self,
        qid: u16,
        entries: u32,
        priority: QueuePriority,
    ) -> Result<(), DeviceError> {
        // MQES is 0's based; a drive reporting 0 (one entry) gets the smallest legal queue.
        let entries = entries.clamp(2, (self.cap.mqes() as u32 + 1).max(2));
        let sizes =
            SlotSizes { preallocated: self.options.slot_buffer_bytes, keep_max: self.options.slot_buffer_keep_max };
        let pair = QueuePair::new(qid, entries, self.cap.dstrd(), self.transport.dma(), &mut self.pages, sizes)?;
        let qsize = (entries - 1) as u16;
        let cq = CreateIoCompletionQueue { qid, qsize, prp1: pair.cq_base(), pc: true, ien: false, iv: 0 };
        let sq = CreateIoSubmissionQueue {
            qid,
            qsize,
            prp1: pair.sq_base(),
            pc: true,
            qprio: priority,
            cqid: qid,
            nvmsetid: 0,
        };
        let cq_done = match self.admin(cq.to_command(), Data::None) {
            Ok(done) => done,
            Err(e) => {
                pair.release(&mut self.pages);
                return Err(e);
            }
        };
        if !cq_done.status().is_success() {
            pair.release(&mut self.pages);
            return Err(DeviceError::Driver(format!(
                "Create I/O Completion Queue {qid} ({entries} entries) failed: {}",
                cq_done.status()
            )));
        }
        let sq_done = match self.admin(sq.to_command(), Data::None) {
            Ok(done) => done,
            Err(e) => {
                pair.release(&mut self.pages);
                return Err(e);
            }
        };
        if !sq_done.status().is_success() {
            pair.release(&mut self.pages);
            let _ = self.admin(DeleteIoCompletionQueue { qid }.to_command(), Data::None);
            return Err(DeviceError::Driver(format!(
                "Create I/O Submission Queue {qid} ({entries} entries, {priority:?} priority) failed: {}",
                sq_done.status()
            )));
        }
        self.io.push(pair);
        Ok(())
    }

    /// Deletes I/O queue pair `qid` (its SQ, then its CQ) and frees its memory. Commands
    /// still in it are aborted by the controller (Command Aborted due to SQ Deletion).
    pub(super) fn delete_queue_pair(&mut self, qid: u16) -> Result<(), DeviceError> {
        let Some(index) = self.io.iter().position(|q| q.qid == qid) else {
            return Err(DeviceError::Driver(format!("I/O queue {qid} does not exist")));
        };
        let sq = self.admin(DeleteIoSubmissionQueue { qid }.to_command(), Data::None);
        let cq = self.admin(DeleteIoCompletionQueue { qid }.to_command(), Data::None);
        let pair = self.io.remove(index);
        pair.release(&mut self.pages);
        for (what, done) in [("Submission", sq?), ("Completion", cq?)] {
            if !done.status().is_success() {
                return Err(DeviceError::Driver(format!("Delete I/O {what} Queue {qid} failed: {}", done.status())));
            }
        }
        Ok(())
    }

    /// Queues of the workload's own, one per `specs` entry, numbered after the I/O
    /// queues the controller already has ([`crate::driver::QueueSet`]). They are deleted
    /// when the set is closed or dropped.
    pub fn open_queues(&mut self, specs: &[crate::queued::QueueSpec]) -> Result<super::QueueSet<'_>, DeviceError> {
        super::QueueSet::open(self, specs)
    }

    /// The command timeout as a duration.
    pub(super) fn timeout(&self) -> Duration {
        Duration::from_millis(self.options.command_timeout_ms)
    }

    /// Selects `mechanism` in CC.AMS: a Controller Reset with the new setting (CC.AMS
    /// may only change while CC.EN is 0). Fails, changing nothing, when CAP.AMS does not
    /// report it.
    pub fn set_arbitration(&mut self, mechanism: ArbitrationMechanism) -> Result<(), DeviceError> {
        let before = self.options.arbitration;
        self.options.arbitration = mechanism;
        let result = self.reset();
        if result.is_err() && before != mechanism {
            self.options.arbitration = before;
            let _ = self.reset();
        }
        result
    }

    /// A Controller Reset (CC.EN 1 → 0, §7.3.2) followed by a full bring-up.
    pub fn reset(&mut self) -> Result<(), DeviceError> {
        self.disable()?;
        self.enable()
    }

    /// Orderly shutdown (§7.6.2): delete the I/O submission queues, then the completion
    /// queues, set CC.SHN to normal shutdown and wait (bounded) for CSTS.SHST complete.
    pub fn shutdown(&mut self) -> Result<(), DeviceError> {
        if self.state != State::Enabled {
            return Ok(());
        }
        // Tried once: a failure here is not retried on drop.
        self.state = State::ShutDown;
        let qids: Vec<u16> = self.io.iter().map(|q| q.qid).collect();
        let deletes = qids
            .iter()
            .map(|&qid| DeleteIoSubmissionQueue { qid }.to_command())
            .chain(qids.iter().map(|&qid| DeleteIoCompletionQueue { qid }.to_command()));
        let mut first_error = None;
        for cmd in deletes {
            match self.admin(cmd, Data::None) {
                Ok(_) => {}
                // A controller that does not answer gets no more commands: straight to CC.SHN.
                Err(e @ DeviceError::Timeout { .. }) => {
                    first_error.get_or_insert(e);
                    break;
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let notified = self.notify_shutdown();
        self.forget_queues();
        notified?;
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// CC.SHN = 01b (normal shutdown), then CSTS.SHST = 10b within CAP.TO (at least 1 s).
    fn notify_shutdown(&mut self) -> Result<(), DeviceError> {
        let cc = Cc::from_bits(self.transport.mmio_read32(offset::CC)?);
        self.transport.mmio_write32(offset::CC, cc.with_shn(0b01).into_bits())?;
        let bound = Duration::from_millis(self.cap.timeout_ms().max(1000));
        self.wait_csts("CSTS.SHST to report shutdown complete", bound, |c| c.shst() == 0b10)?;
        Ok(())
    }

    /// Nanoseconds from the CC.EN write to CSTS.RDY at the last bring-up.
    pub fn last_ready_ns(&self) -> Option<u64> {
        self.last_ready_ns
    }

    /// Whether the target can switch the drive's power, and how.
    pub fn power_method(&mut self) -> Option<crate::transport::PowerMethod> {
        self.transport.power().map(|p| p.method())
    }

    /// Cuts the drive's power now, whatever is in flight: every queue is forgotten (its
    /// commands never complete), on every port. `seed` draws what a simulated drive loses.
    pub fn power_off(&mut self, seed: u64) -> Result<(), DeviceError> {
        self.cut_power(seed)?;
        self.lost();
        for port in &mut self.ports {
            port.lost();
        }
        Ok(())
    }

    /// The drive pulled from its slot now (surprise removal): its power goes, and with it
    /// the link of every port. The driver is not told: what it has queued stays until it
    /// finds the controller gone ([`DeviceError::Removed`]) and is told ([`Self::lost`]).
    /// Through the transport's hot-plug slot where it has one ([`Transport::slot`]);
    /// else only where the function can leave the bus as a pulled drive's does (its
    /// reads then return all ones): a target whose power switch ends the machine cannot.
    pub fn pull_drive(&mut self, seed: u64) -> Result<(), DeviceError> {
        // Out of its hot-plug slot: only this function leaves (other ports' functions sit
        // in slots of their own).
        if let Some(slot) = self.transport.slot() {
            return Ok(slot.surprise_removal()?);
        }
        self.pullable_without_slot()?;
        self.cut_power(seed)
    }

    /// Whether a drive in no hot-plug slot can still be pulled: its function leaves the
    /// bus as a pulled drive's does (a link switch) and its power can go (a power switch),
    /// as on the simulated drive. A target whose power switch ends the machine cannot.
    fn pullable_without_slot(&mut self) -> Result<(), DeviceError> {
        if !self.transport.has_link_switch() || self.transport.power().is_none() {
            return Err(DeviceError::Unsupported(
                "the target cannot pull the drive from its slot (its function cannot leave the bus)".into(),
            ));
        }
        Ok(())
    }

    /// The drive's power off, and the link of every other port down with it.
    fn cut_power(&mut self, seed: u64) -> Result<(), DeviceError> {
        let Some(switch) = self.transport.power() else {
            return Err(DeviceError::Unsupported("the target has no power switch".into()));
        };
        switch.off(seed)?;
        for port in &mut self.ports {
            if port.transport.has_link_switch() {
                port.transport.set_link(false)?;
            }
        }
        Ok(())
    }

    /// The controller is gone (its power or its link): every queue is forgotten, none
    /// deleted, until it is brought up again.
    pub fn lost(&mut self) {
        self.state = State::Disabled;
        self.forget_queues();
    }

    /// Deletes the I/O queues, shuts the controller down normally (CC.SHN = 01b) and
    /// cuts the power, whether or not CSTS.SHST reported the shutdown complete.
    pub fn shutdown_then_power_off(&mut self, seed: u64) -> Result<Shutdown, DeviceError> {
        if self.transport.power().is_none() {
            return Err(DeviceError::Unsupported("the target has no power switch".into()));
        }
        let complete = self.shut_down_every_port()?;
        self.power_off(seed)?;
        Ok(Shutdown { complete, unseen: None })
    }

    /// Every port's controller shut down normally (§7.6.2), this one last: its shutdown
    /// is the verdict, its time to CSTS.SHST = 10b in nanoseconds or the driver's reason
    /// it did not complete. A port's failure shows when it is brought up again.
    fn shut_down_every_port(&mut self) -> Result<Result<u64, String>, DeviceError> {
        for port in &mut self.ports {
            let _ = port.shutdown();
        }
        let start = self.transport.now_ns();
        match self.shutdown() {
            Ok(()) => Ok(Ok(self.transport.now_ns().saturating_sub(start))),
            Err(DeviceError::Driver(reason)) => Ok(Err(reason)),
            Err(e) => Err(e),
        }
    }

    /// Enables the controller, waiting for CSTS.RDY up to `grace` beyond CAP.TO.
    fn enable_with_grace(&mut self, grace: Duration) -> Result<(), DeviceError> {
        self.ready_grace = grace;
        let result = self.enable();
        self.ready_grace = Duration::ZERO;
        result
    }

    /// Powers the drive on and brings the controller up again, waiting for CSTS.RDY up to
    /// `grace` beyond CAP.TO so that a late drive is measured, not given up on.
    pub fn power_on(&mut self, grace: Duration) -> Result<PowerOn, DeviceError> {
        let Some(switch) = self.transport.power() else {
            return Err(DeviceError::Unsupported("the target has no power switch".into()));
        };
        let method = switch.method();
        switch.on()?;
        let on_at = self.transport.now_ns();
        self.enable_with_grace(grace)?;
        let ready_ns = self.last_ready_ns.unwrap_or(0);
        // The other ports' links come up with the power.
        for port in &mut self.ports {
            if port.transport.has_link_switch() {
                Device::set_link(port, true)?;
            }
        }
        Ok(PowerOn {
            ready_ns: Some(ready_ns),
            since_power_on_ns: self.transport.now_ns().saturating_sub(on_at),
            method,
            link_up_ns: None,
            enumerated_ns: None,
        })
    }

    /// Puts the drive back after a removal and brings the controller up, waiting for
    /// CSTS.RDY up to `grace` beyond CAP.TO. Through the transport's hot-plug slot where
    /// it has one (the function enumerated again, perhaps with BAR0 elsewhere; the other
    /// ports' controllers, never pulled, are brought up again only where an orderly
    /// removal shut them down); otherwise the power switch ([`Self::power_on`]).
    pub fn reinsert(&mut self, grace: Duration) -> Result<PowerOn, DeviceError> {
        let Some(slot) = self.transport.slot() else { return self.power_on(grace) };
        let inserted = slot.insert()?;
        self.lost();
        self.enable_with_grace(grace)?;
        let ready_ns = self.last_ready_ns.unwrap_or(0);
        for port in &mut self.ports {
            if port.state != State::Enabled {
                port.enable()?;
            }
        }
        let method = self.transport.power().map_or(crate::transport::PowerMethod::Cut, |p| p.method());
        Ok(PowerOn {
            ready_ns: Some(ready_ns),
            since_power_on_ns: self.transport.now_ns().saturating_sub(inserted.powered_on_at_ns),
            method,
            link_up_ns: inserted.link_up_ns,
            enumerated_ns: Some(inserted.enumerated_ns),
        })
    }

    /// An orderly removal: every port's controller shut down normally (§7.6.2), this
    /// one last (its shutdown is the verdict), then the drive out of its hot-plug slot;
    /// only this controller's function leaves. Without a slot, where the drive can be
    /// pulled (a power switch and port links: the simulated drive),
    /// [`Self::shutdown_then_power_off`]; elsewhere the target cannot remove the drive.
    pub fn remove_orderly(&mut self, seed: u64) -> Result<Shutdown, DeviceError> {
        if self.transport.slot().is_none() {
            self.pullable_without_slot()?;
            return self.shutdown_then_power_off(seed);
        }
        let complete = self.shut_down_every_port()?;
        let removed = match self.transport.slot() {
            Some(slot) => slot.orderly_removal(),
            None => Err(crate::transport::TransportError::Other("the hot-plug slot went away".into())),
        };
        self.lost();
        removed?;
        Ok(Shutdown { complete, unseen: None })
    }

    /// Shuts the controller down and gives the transport back.
    pub fn close(mut self) -> Result<Box<dyn Transport>, DeviceError> {
        let result = self.shutdown();
        // Whatever happened, do not try again on drop.
        self.state = State::ShutDown;
        let transport = std::mem::replace(&mut self.transport, Box::new(Detached));
        result.map(|_| transport)
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// What a closed controller holds instead of its transport.
struct Detached;

impl Transport for Detached {
    fn describe(&self) -> String {
        "detached".into()
    }
    fn config_read32(&mut self, _: u16) -> Result<u32, crate::transport::TransportError> {
        Err(crate::transport::TransportError::Gone("the controller was closed".into()))
    }
    fn config_write32(&mut self, _: u16, _: u32) -> Result<(), crate::transport::TransportError> {
        Err(crate::transport::TransportError::Gone("the controller was closed".into()))
    }
    fn mmio_read32(&mut self, _: u64) -> Result<u32, crate::transport::TransportError> {
        Err(crate::transport::TransportError::Gone("the controller was closed".into()))
    }
    fn mmio_write32(&mut self, _: u64, _: u32) -> Result<(), crate::transport::TransportError> {
        Err(crate::transport::TransportError::Gone("the controller was closed".into()))
    }
    fn dma(&self) -> &DmaRegion {
        static EMPTY: std::sync::OnceLock<DmaRegion> = std::sync::OnceLock::new();
        EMPTY.get_or_init(|| DmaRegion::heap(PAGE_SIZE, 0))
    }
}

impl Device for Controller {
    fn describe(&self) -> String {
        self.transport.describe()
    }

    fn dma_free_bytes(&self) -> Option<usize> {
        let ports: usize = self.ports.iter().filter_map(Device::dma_free_bytes).sum();
        Some(self.pages.free_bytes() + ports)
    }

    fn access(&self) -> Access {
        Access::Userspace
    }

    fn admin(&mut self, cmd: Command, data: Data<'_>) -> Result<Completion, DeviceError> {
        self.queue(0)?.execute(cmd, data, Data::None)
    }

    fn io(&mut self, qid: u16, cmd: Command, data: Data<'_>, metadata: Data<'_>) -> Result<Completion, DeviceError> {
        if qid == 0 {
            return Err(DeviceError::Driver("I/O commands go to I/O queues (1 and up), not the admin queue".into()));
        }
        self.queue(qid)?.execute(cmd, data, metadata)
    }

    fn io_queues(&self) -> Vec<u16> {
        self.io.iter().map(|q| q.qid).collect()
    }

    fn arm_async_events(&mut self, count: u16) -> Result<(), DeviceError> {
        let limit = self.options.admin_queue_depth.saturating_sub(2);
        if count > limit {
            return Err(DeviceError::Driver(format!(
                "{count} Asynchronous Event Requests would leave no admin queue slot free (depth {})",
                self.options.admin_queue_depth
            )));
        }
        self.aer_target = count;
        let mut queue = self.queue(0)?;
        while queue.queue.aers_outstanding < count {
            queue.submit_async_event_request()?;
        }
        queue.ring()
    }

    /// AER completions since the last call. Each successful one is re-armed; one that
    /// completed with an error (e.g. Asynchronous Event Request Limit Exceeded) is not,
    /// so the number kept outstanding drops by one for each.
    fn take_async_events(&mut self) -> Result<Vec<Completion>, DeviceError> {
        let mut queue = self.queue(0)?;
        queue.reap()?;
        let events = std::mem::take(&mut queue.queue.async_events);
        let failed = events.iter().filter(|c| !c.status().is_success()).count() as u16;
        let target = self.aer_target.saturating_sub(failed);
        self.arm_async_events(target)?;
        Ok(events)
    }

    fn wait(&mut self, ms: u64) -> Result<(), DeviceError> {
        if !self.transport.simulated_clock() {
            std::thread::sleep(Duration::from_millis(ms));
            return Ok(());
        }
        let until = self.transport.now_ns().saturating_add(ms.saturating_mul(1_000_000));
        while self.transport.now_ns() < until {
            self.transport.idle_until(until)?;
        }
        Ok(())
    }

    fn command_timeout_ms(&self) -> u64 {
        self.options.command_timeout_ms
    }

    fn registers(&mut self) -> Option<&mut dyn Registers> {
        Some(self)
    }

    /// A Controller Reset; `enable` re-creates the I/O queues and re-arms the AERs.
    fn recover(&mut self) -> Result<(), DeviceError> {
        self.reset()
    }

    fn controller_reset(&mut self) -> Result<(), DeviceError> {
        self.reset()
    }

    fn queued_io(
        &mut self,
        queues: &[crate::queued::QueueSpec],
    ) -> Result<Box<dyn crate::queued::QueuedIo + '_>, DeviceError> {
        Ok(Box::new(self.open_queues(queues)?))
    }

    fn power_method(&mut self) -> Option<crate::transport::PowerMethod> {
        Controller::power_method(self)
    }

    fn power_off(&mut self, seed: u64) -> Result<(), DeviceError> {
        Controller::power_off(self, seed)
    }

    fn shutdown_then_power_off(&mut self, seed: u64) -> Result<Shutdown, DeviceError> {
        Controller::shutdown_then_power_off(self, seed)
    }

    fn power_on(&mut self, grace: Duration) -> Result<PowerOn, DeviceError> {
        Controller::power_on(self, grace)
    }

    fn reinsert(&mut self, grace: Duration) -> Result<PowerOn, DeviceError> {
        Controller::reinsert(self, grace)
    }

    fn remove_orderly(&mut self, seed: u64) -> Result<Shutdown, DeviceError> {
        Controller::remove_orderly(self, seed)
    }

    fn select_arbitration(&mut self, mechanism: ArbitrationMechanism) -> Result<(), DeviceError> {
        self.set_arbitration(mechanism)
    }

    fn set_link(&mut self, up: bool) -> Result<Option<u64>, DeviceError> {
        if !self.transport.has_link_switch() {
            return Err(DeviceError::Unsupported("the target cannot take a port's link down".into()));
        }
        // Down, the driver is not told: it finds out as a host does, from its commands
        // (CSTS reading all ones). Up, the function enumerates afresh and is brought up.
        self.transport.set_link(up)?;
        if !up {
            return Ok(None);
        }
        self.state = State::Disabled;
        self.forget_queues();
        self.enable()?;
        Ok(self.last_ready_ns)
    }

    fn port_count(&self) -> usize {
        self.ports.len()
    }

    fn io_queue_limit(&self, port: usize) -> Option<usize> {
        let (nsqa, ncqa) = self.port_ref(port)?.queues_allocated();
        Some(usize::from(nsqa.min(ncqa)))
    }

    fn set_ana_state(&mut self, anagrpid: u32, state: crate::spec::ana::AnaState) -> Result<(), DeviceError> {
        if !self.transport.has_ana_hook() {
            return Err(DeviceError::Unsupported(
                "the target has no way to change an ANA group's state (a drive changes it itself; only the \
                 simulated drive has a test hook)"
                    .into(),
            ));
        }
        self.transport.set_ana_state(anagrpid, state as u8)?;
        Ok(())
    }

    fn port(&mut self, index: usize) -> Option<&mut dyn Device> {
        self.ports.get_mut(index).map(|p| p as &mut dyn Device)
    }
}

/// BAR0 through the transport. Writes do not update the driver's view of the controller
/// (see [`Controller::write_register`]).
impl Registers for Controller {
    fn read32(&mut self, offset: u64) -> Result<u32, crate::transport::TransportError> {
        self.transport.mmio_read32(offset)
    }

    fn read64(&mut self, offset: u64) -> Result<u64, crate::transport::TransportError> {
        self.transport.mmio_read64(offset)
    }

    fn write32(&mut self, offset: u64, value: u32) -> Result<(), crate::transport::TransportError> {
        self.transport.mmio_write32(offset, value)
    }
}
