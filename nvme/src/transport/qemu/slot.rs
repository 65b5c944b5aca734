//! QEMU's hot-plug slots: a [`QemuTransport`] whose function sits behind a PCIe root
//! port with a Power Controller, emptied and filled with no guest, as a guest's
//! hot-plug driver and an operator together would (PCI Express Base Specification,
//! "Hot-Plug"; register names as the PCI Express Capability structure names them).
//!
//! What QEMU 10 does, learned on 10.0.2 (read for behaviour, never copied):
//! - Surprise removal: Slot Control written with Power Controller Control = 1 (and the
//!   Power Indicator off) while the slot holds a device that was never `device_del`ed:
//!   QEMU destroys the device inside that configuration write (its in-flight I/O
//!   drained) and sends `DEVICE_DELETED` shortly after. From then on the function's
//!   configuration space reads all ones, but its old BAR reads 0 (unassigned memory),
//!   not all ones: the driver must ask configuration space whether it is gone.
//! - Orderly removal: `device_del` (QEMU sets Attention Button Pressed), then the power
//!   off, then the device awaited (bounded) off `/machine/peripheral` (see
//!   `Machine::wait_deleted`: its `DEVICE_DELETED` can come seconds late). `device_del` is never sent twice: with
//!   the vCPU stopped QEMU's own 5 s attention-button timer never fires, and a second
//!   `device_del` fails for good.
//! - Insertion: `device_add` with the properties the command line gave the device (the
//!   namespaces live on the `nvme-subsys` and are attached to the new controller), then
//!   Power Controller Control = 0 and the Power Indicator on, then a rescan assigns the
//!   BARs. The root port keeps its bus numbers and window; a rescan while the slot was
//!   empty frees the window, so the function is placed where it was.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::pci::PciAddress;
use super::{lock, Machine, QemuMachine, QemuTransport};
use crate::transport::{Insertion, Slot, Transport, TransportError};

/// PCI Express Capability (Capability ID 10h) register offsets from the capability.
const LINK_CAPABILITIES: u16 = 0x0C;
/// Link Control (bits 15:0) and Link Status (bits 31:16).
const LINK_CONTROL_STATUS: u16 = 0x10;
const SLOT_CAPABILITIES: u16 = 0x14;
/// Slot Control (bits 15:0) and Slot Status (bits 31:16, RW1C: written as 0).
const SLOT_CONTROL_STATUS: u16 = 0x18;

/// Link Capabilities: Data Link Layer Link Active Reporting Capable.
const DLL_LINK_ACTIVE_REPORTING_CAPABLE: u32 = 1 << 20;
/// Link Status (in the dword at [`LINK_CONTROL_STATUS`]): Data Link Layer Link Active.
const DLL_LINK_ACTIVE: u32 = 1 << (16 + 13);
/// Slot Capabilities: Power Controller Present.
const POWER_CONTROLLER_PRESENT: u32 = 1 << 1;
/// Slot Capabilities: Hot-Plug Capable.
const HOT_PLUG_CAPABLE: u32 = 1 << 6;
/// Slot Control: Power Indicator Control (bits 9:8; 01b on, 11b off).
const POWER_INDICATOR_CONTROL: u32 = 0b11 << 8;
const POWER_INDICATOR_ON: u32 = 0b01 << 8;
const POWER_INDICATOR_OFF: u32 = 0b11 << 8;
/// Slot Control: Power Controller Control (bit 10; 0 power on, 1 power off).
const POWER_CONTROLLER_CONTROL: u32 = 1 << 10;

/// How long a removed device may stay listed under `/machine/peripheral`.
const REMOVAL_BOUND: Duration = Duration::from_secs(5);
/// How long the link may take to come up after power-on.
const LINK_UP_BOUND: Duration = Duration::from_secs(1);

/// Whether the slot holds the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Occupancy {
    Occupied,
    /// Powered off (removed); QEMU may still list the device under `/machine/peripheral`.
    Leaving,
    Empty,
}

/// A root port's slot as a transport uses it.
pub(super) struct HotplugSlot {
    root_port: PciAddress,
    /// The root port's PCI Express Capability offset.
    pcie: u16,
    link_reporting: bool,
    /// `device_add`'s arguments, `id` among them.
    device_add: Value,
    id: String,
    occupancy: Occupancy,
}

impl HotplugSlot {
    /// The machine started again (a power cycle) from its command line: the device is
    /// back in its slot.
    pub(super) fn restarted(&mut self) {
        self.occupancy = Occupancy::Occupied;
    }
}

/// The offset of the PCI Express Capability (ID 10h) in `port`'s configuration space,
/// through the capability list; `None` when the function has none.
pub(super) fn pcie_capability(machine: &Machine, port: PciAddress) -> Result<Option<u16>, TransportError> {
    let mut at = (machine.config_read(port, 0x34)? & 0xFC) as u16;
    // At most 48 capabilities fit between 40h and FFh: a longer chain is a loop.
    for _ in 0..48 {
        if at == 0 {
            break;
        }
        let header = machine.config_read(port, at)?;
        if header & 0xFF == 0x10 {
            return Ok(Some(at));
        }
        at = ((header >> 8) & 0xFC) as u16;
    }
    Ok(None)
}

/// Writes Slot Control: power on (Power Controller Control 0, Power Indicator on) or off
/// (1, indicator off), the other fields as they are, Slot Status written as 0.
pub(super) fn set_slot_power(machine: &Machine, port: PciAddress, pcie: u16, on: bool) -> Result<(), TransportError> {
    let at = pcie + SLOT_CONTROL_STATUS;
    let control = machine.config_read(port, at)? & 0xFFFF & !(POWER_CONTROLLER_CONTROL | POWER_INDICATOR_CONTROL);
    let value =
        if on { control | POWER_INDICATOR_ON } else { control | POWER_CONTROLLER_CONTROL | POWER_INDICATOR_OFF };
    machine.config_write(port, at, value)?;
    // Carried out before anything that follows (QEMU removes the device inside this write).
    machine.with_bus("writing Slot Control", |bus| bus.qtest.settle())
}

impl Machine {
    fn qmp(&self, command: &str, arguments: Value) -> Result<Value, TransportError> {
        let result = lock(&self.qmp).execute(command, Some(arguments));
        result.map_err(|failure| self.qmp_error(command, failure).into())
    }

    /// Waits (bounded) until the device `id` has left the machine: it is no longer a
    /// child of `/machine/peripheral` (QMP `qom-list`). QEMU takes it off there when it
    /// unplugs it; its `DEVICE_DELETED` comes only once the last reference to it is
    /// dropped, which QEMU 10.0.2 was seen to put off beyond 5 s (4 cycles of 13), or,
    /// from an earlier cycle, late. So the events are only a cue to look again.
    fn wait_deleted(&self, id: &str, bound: Duration) -> Result<(), TransportError> {
        let deadline = Instant::now() + bound;
        loop {
            if !self.peripheral_present(id)? {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TransportError::Other(format!(
                    "QEMU still lists {id} under /machine/peripheral {} ms after its slot's power went off",
                    bound.as_millis()
                )));
            }
            let result = lock(&self.qmp).wait_event("DEVICE_DELETED", left.min(Duration::from_millis(20)));
            match result {
                Ok(_) | Err(super::qmp::QmpFailure::Timeout) => {}
                Err(failure) => return Err(self.qmp_error("waiting for DEVICE_DELETED", failure).into()),
            }
        }
    }

    /// Whether `/machine/peripheral` has a child named `id` (a device added with that id
    /// and not yet unplugged).
    fn peripheral_present(&self, id: &str) -> Result<bool, TransportError> {
        let list = self.qmp("qom-list", serde_json::json!({ "path": "/machine/peripheral" }))?;
        let children = list.as_array().ok_or_else(|| {
            TransportError::Other(format!("QMP qom-list /machine/peripheral answered {list}, not a list"))
        })?;
        Ok(children.iter().any(|c| c.get("name").and_then(Value::as_str) == Some(id)))
    }
}

impl QemuMachine {
    /// A transport for the NVMe function at `address` that sits in the hot-plug slot of
    /// the root port `root_port` ([`QemuTransport`]'s [`Slot`]). `device_add` is what
    /// QMP `device_add` is given to put the device back: the properties the command line
    /// gave it, `id` and `bus` (the root port's id) among them. Refused when the port is
    /// not hot-plug capable with a Power Controller (Slot Capabilities), or the function
    /// is not on its secondary bus.
    pub fn transport_in_slot(
        &self,
        address: PciAddress,
        root_port: PciAddress,
        device_add: Value,
    ) -> Result<QemuTransport, TransportError> {
        let machine = &self.machine;
        let pcie = pcie_capability(machine, root_port)?
            .ok_or_else(|| TransportError::Other(format!("{root_port} has no PCI Express capability")))?;
        let slot_capabilities = machine.config_read(root_port, pcie + SLOT_CAPABILITIES)?;
        if slot_capabilities & (HOT_PLUG_CAPABLE | POWER_CONTROLLER_PRESENT)
            != HOT_PLUG_CAPABLE | POWER_CONTROLLER_PRESENT
        {
            return Err(TransportError::Other(format!(
                "root port {root_port}: Slot Capabilities {slot_capabilities:#x} lacks Hot-Plug Capable or Power \
                 Controller Present"
            )));
        }
        let secondary = (machine.config_read(root_port, 0x18)? >> 8) as u8;
        if secondary != address.bus || address.device != 0 {
            return Err(TransportError::Other(format!(
                "{address} is not in the slot of root port {root_port} (its secondary bus is {secondary:02x})"
            )));
        }
        let id = match device_add.get("id").and_then(Value::as_str) {
            Some(id) if device_add.get("driver").is_some() && device_add.get("bus").is_some() => id.to_owned(),
            _ => {
                return Err(TransportError::Other(format!("device_add arguments {device_add} need driver, id and bus")))
            }
        };
        let link = machine.config_read(root_port, pcie + LINK_CAPABILITIES)?;
        let mut transport = self.transport(address)?;
        transport.hotplug = Some(HotplugSlot {
            root_port,
            pcie,
            link_reporting: link & DLL_LINK_ACTIVE_REPORTING_CAPABLE != 0,
            device_add,
            id,
            occupancy: Occupancy::Occupied,
        });
        Ok(transport)
    }
}

impl QemuTransport {
    fn hotplug_slot(&mut self) -> Result<&mut HotplugSlot, TransportError> {
        self.hotplug.as_mut().ok_or_else(|| TransportError::Other("the function is in no hot-plug slot".into()))
    }

    fn occupied(&mut self, what: &str) -> Result<(), TransportError> {
        let slot = self.hotplug_slot()?;
        match slot.occupancy {
            Occupancy::Occupied => Ok(()),
            other => Err(TransportError::Other(format!("{what}: the slot of {} is {other:?}", slot.id))),
        }
    }
}

impl Slot for QemuTransport {
    fn surprise_removal(&mut self) -> Result<(), TransportError> {
        self.occupied("surprise removal")?;
        let machine = self.machine.clone();
        let slot = self.hotplug_slot()?;
        set_slot_power(&machine, slot.root_port, slot.pcie, false)?;
        slot.occupancy = Occupancy::Leaving;
        Ok(())
    }

    fn orderly_removal(&mut self) -> Result<(), TransportError> {
        self.occupied("orderly removal")?;
        let machine = self.machine.clone();
        let slot = self.hotplug_slot()?;
        // Sent once, whatever follows: QEMU refuses a second one for good.
        slot.occupancy = Occupancy::Leaving;
        machine.qmp("device_del", serde_json::json!({ "id": slot.id }))?;
        set_slot_power(&machine, slot.root_port, slot.pcie, false)?;
        machine.wait_deleted(&slot.id, REMOVAL_BOUND)?;
        slot.occupancy = Occupancy::Empty;
        Ok(())
    }

    fn insert(&mut self) -> Result<Insertion, TransportError> {
        let machine = self.machine.clone();
        let address = self.address;
        let slot = self.hotplug_slot()?;
        match slot.occupancy {
            Occupancy::Occupied => return Err(TransportError::Other(format!("the slot of {} is not empty", slot.id))),
            Occupancy::Leaving => {
                machine.wait_deleted(&slot.id, REMOVAL_BOUND)?;
                slot.occupancy = Occupancy::Empty;
            }
            Occupancy::Empty => {}
        }
        // The empty slot scanned: the function forgotten, its port's window free again.
        machine.scan()?;
        machine.qmp("device_add", slot.device_add.clone())?;
        let (root_port, pcie, link_reporting) = (slot.root_port, slot.pcie, slot.link_reporting);
        slot.occupancy = Occupancy::Occupied;
        let powered_on_at_ns = self.now_ns();
        set_slot_power(&machine, root_port, pcie, true)?;
        let link_up_ns = if link_reporting {
            let deadline = Instant::now() + LINK_UP_BOUND;
            loop {
                if machine.config_read(root_port, pcie + LINK_CONTROL_STATUS)? & DLL_LINK_ACTIVE != 0 {
                    break Some(self.now_ns().saturating_sub(powered_on_at_ns));
                }
                if Instant::now() >= deadline {
                    return Err(TransportError::Other(format!(
                        "root port {root_port}: Link Status never reported Data Link Layer Link Active within {} ms \
                         of the slot's power on",
                        LINK_UP_BOUND.as_millis()
                    )));
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        } else {
            None
        };
        machine.scan()?;
        let bar0 = lock(&machine.bus).pci.function(address).and_then(|f| f.bar(0));
        let Some(bar0) = bar0 else {
            return Err(TransportError::Other(format!(
                "{}: no NVMe function with a BAR0 at {address} after the insertion",
                self.describe()
            )));
        };
        self.bar0 = bar0;
        Ok(Insertion { powered_on_at_ns, link_up_ns, enumerated_ns: self.now_ns().saturating_sub(powered_on_at_ns) })
    }
}
