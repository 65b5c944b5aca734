//! Targets: what the TARGET argument names, and what opens and drives each kind.
//!
//! - [`spec`]: [`TargetSpec`], the TARGET argument parsed (`sim…`, `qemu…`,
//!   `qemu-linux…`), and the catalogue `nvtest targets` prints.
//! - [`sim`]: the simulated drive of a profile, and the claims its profile carries.
//! - [`topology`]: QEMU topologies (what a `qemu` target starts); [`qemu`]: QEMU started
//!   with one, its first controller driven by nvtest's own host driver.
//! - [`expected`]: the findings expected of a target (QEMU's known deviations).
//! - [`guest`]: `qemu-linux` targets, QEMU booting a Linux guest in which nvtest runs
//!   against the controller through the Linux NVMe driver (a run of its own).
//! - [`kmsg`]: the kernel log of a controller of this machine's Linux driver
//!   (`/dev/nvmeN`, [`nvme::linux::LinuxDevice`]), which only the safety gate opens
//!   ([`crate::safety::open_linux_target`]: opening it and passing the gate are one act).
//!
//! Dependencies run one way: `spec` uses `topology`; `expected`, `qemu`, `sim` and
//! `guest` use `spec` and `topology`; nothing here uses the command line
//! ([`crate::cli`]) or the run ([`crate::run`]), which use this room.

pub mod expected;
pub mod guest;
pub mod kmsg;
pub mod qemu;
pub mod sim;
pub mod spec;
pub mod topology;

use nvme::device::Device;
use nvme_sim::Profile;

pub use qemu::{open_qemu, start_qemu, QemuDevice};
pub use sim::{open_sim, profile_claims};
pub use spec::{catalogue, TargetSpec, TopologyRef, DEFAULT_SIM_PROFILE};
use topology::Topology;

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
             nvtest's command line runs it (nvtest::cli::run_in_guest)",
            spec.describe()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qemu_linux_target_is_not_opened_in_this_process() {
        let spec = TargetSpec::QemuLinux(TopologyRef::Builtin("ns32".into()));
        let e = open(&spec).err().unwrap();
        assert!(e.starts_with("qemu-linux:ns32: nvtest runs inside the Linux guest"), "{e}");
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
