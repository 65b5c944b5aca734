//! What the TARGET argument names ([`TargetSpec`]) and the catalogue `nvtest targets`
//! prints. Opening a target is [`super::open`].
//!
//! `sim` (the default profile, also when TARGET is omitted), `sim:NAME`
//! (`fixtures/sim/NAME.yaml`, embedded in the binary) and `sim:PATH.yaml`; `qemu` (the
//! default topology), `qemu:NAME` (`fixtures/qemu/NAME.yaml`, embedded) and
//! `qemu:PATH.yaml`: QEMU started with that topology, its first controller driven by
//! nvtest's own host driver. `qemu-linux` (the default topology), `qemu-linux:NAME` and
//! `qemu-linux:PATH.yaml`: QEMU with that topology booting a Linux guest, in which
//! nvtest runs against the first controller through the Linux NVMe driver
//! ([`super::guest`]; a different execution model, not opened here).
//!
//! A controller of the Linux driver on this machine (`/dev/nvmeN`) is
//! [`crate::run::RunTarget::Kernel`], not a [`TargetSpec`]: it is opened only behind
//! the safety gate ([`crate::safety`]).

use std::path::PathBuf;

use nvme_sim::Profile;

use super::topology::{Topology, DEFAULT_TOPOLOGY};

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
    /// controller through the Linux NVMe driver ([`crate::targets::guest`]).
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

/// What `nvtest targets` prints: every built-in simulated drive profile and QEMU
/// topology with its description, and the other target forms.
/// Every target this machine offers by name: `sim` and each shipped profile, `qemu`
/// and each shipped topology (also as `qemu-linux:`), and each `/dev/nvmeN` controller
/// present. For suggestions when a word names none of them.
pub fn target_names() -> Vec<String> {
    let mut names = vec!["sim".to_string(), "qemu".to_string()];
    names.extend(Profile::builtin_names().map(|n| format!("sim:{n}")));
    for topology in Topology::builtin_names() {
        names.push(format!("qemu:{topology}"));
        names.push(format!("qemu-linux:{topology}"));
    }
    let mut controllers: Vec<String> = std::fs::read_dir("/dev")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.strip_prefix("nvme").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())))
        .map(|n| format!("/dev/{n}"))
        .collect();
    controllers.sort();
    names.extend(controllers);
    names
}

pub fn catalogue() -> String {
    let mut out = String::from("simulated drives (sim:PROFILE, or sim:PATH.yaml for a profile of your own):\n");
    for name in Profile::builtin_names() {
        let what = Profile::builtin(name).map(|p| p.description).unwrap_or_else(|e| format!("(does not load: {e})"));
        let default = if name == DEFAULT_SIM_PROFILE { " [default: `sim`, and no TARGET]" } else { "" };
        out.push_str(&format!("  sim:{name}{default}\n      {what}\n"));
    }
    out.push_str("QEMU topologies (qemu:TOPOLOGY, qemu-linux:TOPOLOGY through the Linux driver in a guest, or qemu:PATH.yaml):\n");
    for name in Topology::builtin_names() {
        let what = Topology::builtin(name).map(|t| t.description).unwrap_or_else(|e| format!("(does not load: {e})"));
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
}
