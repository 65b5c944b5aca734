//! QEMU as a target (`qemu:TOPOLOGY`, `qemu:PATH.yaml`): the machine started with a
//! topology, its first controller behind nvtest's own host driver, and the device that
//! owns the machine (so dropping it stops QEMU and removes its files).

use nvme::device::{Access, Data, Device, DeviceError, HostFault, Registers};
use nvme::driver::{Controller, Options};
use nvme::spec::{Command, Completion};
use nvme::transport::qemu::{PciAddress, QemuMachine, QemuTransport};

use super::topology::Topology;

/// Starts QEMU with `topology` and brings its first controller up behind nvtest's own
/// host driver. The device owns the machine: dropping it shuts the controller down,
/// stops QEMU and removes its files.
pub fn open_qemu(topology: &Topology) -> Result<Box<dyn Device>, String> {
    Ok(Box::new(start_qemu(topology)?))
}

/// [`open_qemu`] with the concrete type, for callers that also need the machine
/// (QMP, hot-plug, the process and files to check after a run).
pub fn start_qemu(topology: &Topology) -> Result<QemuDevice, String> {
    let name = &topology.name;
    let machine = QemuMachine::start(topology.qemu_config()).map_err(|e| format!("qemu:{name}: {e}"))?;
    let addresses = topology.controller_addresses(&machine).map_err(|e| format!("qemu:{name}: {e}"))?;
    let (id, address) =
        addresses.first().cloned().ok_or_else(|| format!("qemu:{name}: the topology has no controller"))?;
    if !machine.controllers().contains(&address) {
        let found: Vec<String> = machine.controllers().iter().map(ToString::to_string).collect();
        return Err(format!(
            "qemu:{name}: controller {id} is not at {address}; NVMe functions found: {}",
            if found.is_empty() { "none".to_string() } else { found.join(", ") }
        ));
    }
    let bring_up = |id: &str, address, transport: QemuTransport| {
        Controller::new(Box::new(transport), Options::default())
            .map_err(|e| format!("qemu:{name}: controller {id} at {address}: bring-up: {e}"))
    };
    let transport =
        |id: &str, address| machine.transport(address).map_err(|e| format!("qemu:{name}: controller {id}: {e}"));
    // The first controller in a hot-plug slot can be pulled from it and put back.
    let first = match (topology.hotplug_port_of(&id), topology.device_add(&id)) {
        (Some((port, port_address)), Some(device_add)) => machine
            .transport_in_slot(address, port_address, device_add)
            .map_err(|e| format!("qemu:{name}: controller {id} in the slot of root port {}: {e}", port.id))?,
        _ => transport(&id, address)?,
    };
    let mut controller = bring_up(&id, address, first)?;
    for (id, address) in ports(topology, &addresses) {
        controller.add_port(bring_up(&id, address, transport(&id, address)?)?);
    }
    Ok(QemuDevice { controller, machine, stderr_seen: 0 })
}

/// The other ports of the first controller's NVM subsystem that nvtest brings up beside
/// it: every controller of the same `nvme-subsys`, on `pcie.0` or behind a root port, as
/// the port cases need every controller the subsystem exposes.
fn ports(topology: &Topology, addresses: &[(String, PciAddress)]) -> Vec<(String, PciAddress)> {
    let Some(first) = topology.controllers.first() else { return Vec::new() };
    let Some(subsystem) = &first.subsystem else { return Vec::new() };
    topology.controllers[1..]
        .iter()
        .filter(|c| c.subsystem.as_ref() == Some(subsystem))
        .filter_map(|c| addresses.iter().find(|(id, _)| *id == c.id).cloned())
        .collect()
}

/// A controller of a QEMU machine, owning the machine. Fields drop in order: the
/// controller is shut down while QEMU still runs, then QEMU is stopped.
pub struct QemuDevice {
    controller: Controller,
    machine: QemuMachine,
    /// Lines of QEMU's stderr already handed out by `take_diagnostics`.
    stderr_seen: u64,
}

impl QemuDevice {
    /// The running machine (QMP, configuration space, hot-plug).
    pub fn machine(&self) -> &QemuMachine {
        &self.machine
    }
}

impl Device for QemuDevice {
    fn describe(&self) -> String {
        self.controller.describe()
    }

    fn access(&self) -> Access {
        self.controller.access()
    }

    fn dma_free_bytes(&self) -> Option<usize> {
        self.controller.dma_free_bytes()
    }

    fn admin(&mut self, cmd: Command, data: Data<'_>) -> Result<Completion, DeviceError> {
        self.controller.admin(cmd, data)
    }

    fn io(&mut self, qid: u16, cmd: Command, data: Data<'_>, metadata: Data<'_>) -> Result<Completion, DeviceError> {
        self.controller.io(qid, cmd, data, metadata)
    }

    fn io_queues(&self) -> Vec<u16> {
        self.controller.io_queues()
    }

    fn arm_async_events(&mut self, count: u16) -> Result<(), DeviceError> {
        self.controller.arm_async_events(count)
    }

    fn take_async_events(&mut self) -> Result<Vec<Completion>, DeviceError> {
        self.controller.take_async_events()
    }

    fn namespaces_changed(&mut self) -> Result<(), DeviceError> {
        self.controller.namespaces_changed()
    }

    fn command_timeout_ms(&self) -> u64 {
        self.controller.command_timeout_ms()
    }

    fn registers(&mut self) -> Option<&mut dyn Registers> {
        self.controller.registers()
    }

    fn recover(&mut self) -> Result<(), DeviceError> {
        self.controller.recover()
    }

    fn controller_reset(&mut self) -> Result<(), DeviceError> {
        self.controller.controller_reset()
    }

    fn queued_io(
        &mut self,
        queues: &[nvme::queued::QueueSpec],
    ) -> Result<Box<dyn nvme::queued::QueuedIo + '_>, DeviceError> {
        self.controller.queued_io(queues)
    }

    fn select_arbitration(&mut self, mechanism: nvme::driver::ArbitrationMechanism) -> Result<(), DeviceError> {
        self.controller.select_arbitration(mechanism)
    }

    fn power_method(&mut self) -> Option<nvme::transport::PowerMethod> {
        self.controller.power_method()
    }

    fn power_off(&mut self, seed: u64) -> Result<(), DeviceError> {
        self.controller.power_off(seed)
    }

    fn shutdown_then_power_off(&mut self, seed: u64) -> Result<nvme::driver::Shutdown, DeviceError> {
        self.controller.shutdown_then_power_off(seed)
    }

    fn power_on(&mut self, grace: std::time::Duration) -> Result<nvme::driver::PowerOn, DeviceError> {
        self.controller.power_on(grace)
    }

    fn reinsert(&mut self, grace: std::time::Duration) -> Result<nvme::driver::PowerOn, DeviceError> {
        self.controller.reinsert(grace)
    }

    fn remove_orderly(&mut self, seed: u64) -> Result<nvme::driver::Shutdown, DeviceError> {
        self.controller.remove_orderly(seed)
    }

    fn set_link(&mut self, up: bool) -> Result<Option<u64>, DeviceError> {
        self.controller.set_link(up)
    }

    fn port_count(&self) -> usize {
        self.controller.port_count()
    }

    fn io_queue_limit(&self, port: usize) -> Option<usize> {
        self.controller.io_queue_limit(port)
    }

    fn port(&mut self, index: usize) -> Option<&mut dyn Device> {
        self.controller.port(index)
    }

    /// What QEMU wrote to its stderr since the last call (warnings, assertion failures,
    /// failed I/O on its images).
    fn take_diagnostics(&mut self) -> Vec<String> {
        let lines = self.machine.stderr_since(&mut self.stderr_seen);
        lines.into_iter().filter(|l| !l.trim().is_empty()).map(|l| format!("QEMU: {l}")).collect()
    }

    /// QEMU's I/O errors on its disk images and images gone since the last call
    /// ([`QemuMachine::host_faults`], which reads stderr with a cursor of its own).
    fn host_faults(&mut self) -> Vec<HostFault> {
        self.machine.host_faults()
    }
}
