//! Targets: what the TARGET argument names and how it is opened.
//!
//! `sim` (the default profile, also when TARGET is omitted), `sim:NAME`
//! (`fixtures/sim/NAME.yaml`, embedded in the binary) and `sim:PATH.yaml`; `qemu` (the
//! default topology), `qemu:NAME` (`fixtures/qemu/NAME.yaml`, embedded) and
//! `qemu:PATH.yaml`: QEMU started with that topology, its first controller driven by
//! nvtest's own host driver. `qemu-linux` (the default topology), `qemu-linux:NAME` and
//! `qemu-linux:PATH.yaml`: QEMU with that topology booting a Linux guest, in which
//! nvtest runs against the first controller through the Linux NVMe driver
//! ([`crate::guest`]; a different execution model, not opened here).
//!
//! A controller of the Linux driver on this machine (`/dev/nvmeN`) is
//! [`crate::run::RunTarget::Kernel`], not a [`TargetSpec`]: it is opened only behind
//! the safety gate ([`crate::safety`]).

use std::path::PathBuf;

use nvme::device::{Access, Data, Device, DeviceError, HostFault, Registers};
use nvme::driver::{Controller, Options};
use nvme::spec::{Command, Completion};
use nvme::transport::qemu::QemuMachine;
use nvme_sim::Profile;

use crate::topology::{Topology, DEFAULT_TOPOLOGY};

/// A parsed TARGET argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetSpec {
    /// The simulated drive with a shipped profile.
    SimProfile(String),
    /// The simulated drive with a profile file.
    SimFile(PathBuf),
    /// QEMU with a shipped topology.
    QemuTopology(String),
    /// QEMU with a topology file.
    QemuFile(PathBuf),
    /// QEMU with a topology, booting a Linux guest that runs nvtest against the first
    /// controller through the Linux NVMe driver ([`crate::guest`]).
    QemuLinux(TopologyRef),
}

/// Which topology a `qemu-linux` target names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyRef {
    /// A shipped topology (`fixtures/qemu/NAME.yaml`, embedded).
    Builtin(String),
    /// A topology file.
    File(PathBuf),
}

impl TopologyRef {
    /// Loads the topology; the error is one line (with file:line:column).
    pub fn load(&self) -> Result<Topology, String> {
        match self {
            TopologyRef::Builtin(name) => Topology::builtin(name).map_err(|e| e.to_string()),
            TopologyRef::File(path) => Topology::from_path(path).map_err(|e| e.to_string()),
        }
    }

    /// As written after `qemu-linux:`.
    pub fn describe(&self) -> String {
        match self {
            TopologyRef::Builtin(name) => name.clone(),
            TopologyRef::File(path) => path.display().to_string(),
        }
    }
}

/// The profile used by `sim` and when TARGET is omitted.
pub const DEFAULT_SIM_PROFILE: &str = "enterprise-1.4";

impl TargetSpec {
    /// Parses a TARGET argument; the error is one line saying what is allowed.
    pub fn parse(text: &str) -> Result<TargetSpec, String> {
        let text = text.trim();
        if text.is_empty() || text == "sim" {
            return Ok(TargetSpec::SimProfile(DEFAULT_SIM_PROFILE.to_string()));
        }
        if text == "qemu" {
            return Ok(TargetSpec::QemuTopology(DEFAULT_TOPOLOGY.to_string()));
        }
        if text == "qemu-linux" {
            return Ok(TargetSpec::QemuLinux(TopologyRef::Builtin(DEFAULT_TOPOLOGY.to_string())));
        }
        let is_file = |rest: &str| rest.ends_with(".yaml") || rest.ends_with(".yml") || rest.contains('/');
        let is_name =
            |rest: &str| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if let Some(rest) = text.strip_prefix("sim:") {
            if is_file(rest) {
                return Ok(TargetSpec::SimFile(PathBuf::from(rest)));
            }
            if is_name(rest) {
                return Ok(TargetSpec::SimProfile(rest.to_string()));
            }
        }
        if let Some(rest) = text.strip_prefix("qemu:") {
            if is_file(rest) {
                return Ok(TargetSpec::QemuFile(PathBuf::from(rest)));
            }
            if is_name(rest) {
                return Ok(TargetSpec::QemuTopology(rest.to_string()));
            }
        }
        if let Some(rest) = text.strip_prefix("qemu-linux:") {
            if is_file(rest) {
                return Ok(TargetSpec::QemuLinux(TopologyRef::File(PathBuf::from(rest))));
            }
            if is_name(rest) {
                return Ok(TargetSpec::QemuLinux(TopologyRef::Builtin(rest.to_string())));
            }
        }
        Err(format!(
            "unknown target `{text}`: expected `sim`, `sim:PROFILE` (a name in fixtures/sim), `sim:PATH.yaml`, \
             `qemu` (topology {DEFAULT_TOPOLOGY}), `qemu:TOPOLOGY` (a name in fixtures/qemu), `qemu:PATH.yaml`, \
             `qemu-linux`, `qemu-linux:TOPOLOGY` or `qemu-linux:PATH.yaml` (a Linux guest on QEMU)"
        ))
    }

    /// The target as written for reports.
    pub fn describe(&self) -> String {
        match self {
            TargetSpec::SimProfile(name) => format!("sim:{name}"),
            TargetSpec::SimFile(path) => format!("sim:{}", path.display()),
            TargetSpec::QemuTopology(name) => format!("qemu:{name}"),
            TargetSpec::QemuFile(path) => format!("qemu:{}", path.display()),
            TargetSpec::QemuLinux(topology) => format!("qemu-linux:{}", topology.describe()),
        }
    }
}

/// Opens a target and brings its controller up. The error is one line for the console
/// (a profile error carries file:line:column).
pub fn open(spec: &TargetSpec) -> Result<Box<dyn Device>, String> {
    match spec {
        TargetSpec::SimProfile(name) => {
            let profile = Profile::builtin(name).map_err(|e| e.to_string())?;
            open_sim(profile)
        }
        TargetSpec::SimFile(path) => {
            let profile = Profile::from_path(path).map_err(|e| e.to_string())?;
            open_sim(profile)
        }
        TargetSpec::QemuTopology(name) => {
            let topology = Topology::builtin(name).map_err(|e| e.to_string())?;
            open_qemu(&topology)
        }
        TargetSpec::QemuFile(path) => {
            let topology = Topology::from_path(path).map_err(|e| e.to_string())?;
            open_qemu(&topology)
        }
        TargetSpec::QemuLinux(_) => Err(format!(
            "{}: nvtest runs inside the Linux guest there, so the target is not opened in this process; \
             nvtest's command line runs it (nvtest::guest::run)",
            spec.describe()
        )),
    }
}

/// The claims a simulated drive's profile carries (`claims:`), read from the profile's own
/// text so a failure cites the profile file's line; `None` for other targets and for
/// profiles without claims.
pub fn profile_claims(spec: &TargetSpec) -> Result<Option<crate::claims::Claims>, String> {
    let (origin, text) = match spec {
        TargetSpec::SimProfile(name) => match Profile::builtin_source(name) {
            Some((origin, text)) => (origin, text.to_string()),
            None => return Ok(None),
        },
        TargetSpec::SimFile(path) => {
            let text = nvme::input::read_text_file(path)
                .map_err(|e| format!("{}: cannot read the profile: {e}", path.display()))?;
            (path.display().to_string(), text)
        }
        _ => return Ok(None),
    };
    crate::claims::claims_of_profile(&text, &origin).map_err(|e| e.to_string())
}

/// The simulated drive of `profile`, behind nvtest's own host driver.
pub fn open_sim(profile: Profile) -> Result<Box<dyn Device>, String> {
    let name = profile.name.clone();
    let transport = nvme_sim::open(profile).map_err(|e| format!("sim:{name}: {e}"))?;
    let controller =
        Controller::new(Box::new(transport), Options::default()).map_err(|e| format!("sim:{name}: bring-up: {e}"))?;
    Ok(Box::new(controller))
}

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
    let transport = machine.transport(address).map_err(|e| format!("qemu:{name}: controller {id}: {e}"))?;
    let controller = Controller::new(Box::new(transport), Options::default())
        .map_err(|e| format!("qemu:{name}: controller {id} at {address}: bring-up: {e}"))?;
    Ok(QemuDevice { controller, machine, stderr_seen: 0 })
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

/// What `nvtest targets` prints: every built-in simulated drive profile and QEMU
/// topology with its description, and the other target forms.
pub fn catalogue() -> String {
    let mut out = String::from("simulated drives (sim:PROFILE, or sim:PATH.yaml for a profile of your own):\n");
    for name in Profile::builtin_names() {
        let what = Profile::builtin(name).map(|p| p.description).unwrap_or_else(|e| format!("(does not load: {e})"));
        let default = if name == DEFAULT_SIM_PROFILE { " [default: `sim`, and no TARGET]" } else { "" };
        out.push_str(&format!("  sim:{name}{default}\n      {what}\n"));
    }
    out.push_str("QEMU topologies (qemu:TOPOLOGY, qemu-linux:TOPOLOGY through the Linux driver in a guest, or qemu:PATH.yaml):\n");
    for name in crate::topology::Topology::builtin_names() {
        let what = crate::topology::Topology::builtin(name)
            .map(|t| t.description)
            .unwrap_or_else(|e| format!("(does not load: {e})"));
        let default = if name == DEFAULT_TOPOLOGY { " [default: `qemu`]" } else { "" };
        out.push_str(&format!("  qemu:{name}{default}\n      {what}\n"));
    }
    out.push_str("drives of the Linux NVMe driver:\n  /dev/nvmeN (destructive suites need --allow-destructive and --confirm-serial SN)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_arguments() {
        assert_eq!(TargetSpec::parse("sim").unwrap(), TargetSpec::SimProfile(DEFAULT_SIM_PROFILE.into()));
        assert_eq!(TargetSpec::parse("sim:enterprise-1.2a").unwrap(), TargetSpec::SimProfile("enterprise-1.2a".into()));
        assert_eq!(TargetSpec::parse("sim:x/y.yaml").unwrap(), TargetSpec::SimFile("x/y.yaml".into()));
        assert_eq!(TargetSpec::parse("qemu").unwrap(), TargetSpec::QemuTopology(DEFAULT_TOPOLOGY.into()));
        assert_eq!(TargetSpec::parse("qemu:dual").unwrap(), TargetSpec::QemuTopology("dual".into()));
        assert_eq!(TargetSpec::parse("qemu:lab/t.yaml").unwrap(), TargetSpec::QemuFile("lab/t.yaml".into()));
        assert_eq!(TargetSpec::parse("qemu:t.yml").unwrap(), TargetSpec::QemuFile("t.yml".into()));
        let e = TargetSpec::parse("tcp:1.2.3.4").unwrap_err();
        assert!(e.contains("expected `sim`") && e.contains("`qemu:TOPOLOGY`") && e.contains("`qemu:PATH.yaml`"), "{e}");
        assert!(TargetSpec::parse("qemu:").is_err());
        assert!(TargetSpec::parse("qemu:a b").is_err());
    }

    #[test]
    fn qemu_linux_targets() {
        let builtin = |n: &str| TargetSpec::QemuLinux(TopologyRef::Builtin(n.into()));
        assert_eq!(TargetSpec::parse("qemu-linux").unwrap(), builtin(DEFAULT_TOPOLOGY));
        assert_eq!(TargetSpec::parse("qemu-linux:ns32").unwrap(), builtin("ns32"));
        assert_eq!(
            TargetSpec::parse("qemu-linux:lab/t.yaml").unwrap(),
            TargetSpec::QemuLinux(TopologyRef::File("lab/t.yaml".into()))
        );
        assert!(TargetSpec::parse("qemu-linux:").is_err());
        let e = TargetSpec::parse("qemu-linux:a b").unwrap_err();
        assert!(e.contains("`qemu-linux:TOPOLOGY`"), "{e}");
        for text in ["qemu-linux:ns32", "qemu-linux:x/y.yaml"] {
            assert_eq!(TargetSpec::parse(text).unwrap().describe(), text);
        }
        assert_eq!(TargetSpec::parse("qemu-linux").unwrap().describe(), "qemu-linux:ns32");
        let e = open(&builtin("ns32")).err().unwrap();
        assert!(e.starts_with("qemu-linux:ns32: nvtest runs inside the Linux guest"), "{e}");
        let e = TopologyRef::Builtin("nope".into()).load().unwrap_err();
        assert!(e.contains("unknown QEMU topology `nope`"), "{e}");
    }

    #[test]
    fn targets_describe_themselves_as_written() {
        for text in ["sim:enterprise-1.4", "qemu:ns32", "qemu:dual", "qemu:x/y.yaml"] {
            assert_eq!(TargetSpec::parse(text).unwrap().describe(), text);
        }
        assert_eq!(TargetSpec::parse("qemu").unwrap().describe(), "qemu:ns32");
    }

    #[test]
    fn a_malformed_topology_file_says_where_before_qemu_starts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.yaml");
        std::fs::write(&path, "name: lab\ncontrollers:\n  - {id: c0, serial: S1, mdts: many}\n").unwrap();
        let spec = TargetSpec::parse(&format!("qemu:{}", path.display())).unwrap();
        let e = open(&spec).err().unwrap();
        assert!(e.starts_with(&format!("{}:3:", path.display())), "{e}");
    }

    #[test]
    fn unknown_topologies_and_files_are_errors_not_panics() {
        let e = open(&TargetSpec::QemuTopology("nope".into())).err().unwrap();
        assert!(e.contains("unknown QEMU topology `nope`") && e.contains("ns32"), "{e}");
        let e = open(&TargetSpec::QemuFile("/nonexistent/t.yaml".into())).err().unwrap();
        assert!(e.contains("/nonexistent/t.yaml: cannot read the topology"), "{e}");
    }
}
