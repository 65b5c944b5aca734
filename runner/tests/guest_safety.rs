//! The safety gate where it matters, on a drive of the Linux driver: inside the guest of
//! `qemu-linux:ns32`, where /dev/nvme0 is QEMU's controller (nothing of this machine).
//!
//! - with a filesystem mounted on namespace 1, the destructive suites are refused (exit
//!   2, the mount named) even with every opt-in, and the namespace's data is provably
//!   unchanged (sha256 of the block device before and after, and the file on it);
//! - with `--preserve`, the non-destructive cases run and pass on the mounted drive, the
//!   destructive ones are skipped, and the data is unchanged;
//! - a serial that is not the controller's is refused, and nothing is written;
//! - bad targets (missing, not NVMe, a directory, a namespace's block or generic device,
//!   no privilege) each get exit status 2 and one line, on the real kernel;
//! - what no descriptor or holder shows is refused too, the chain named, the data
//!   unchanged: a loop device on a namespace, a filesystem mounted on such a loop device,
//!   a loop device backed by a file on a namespace's (lazily unmounted) filesystem, a
//!   process that memory-mapped a namespace and closed its descriptor;
//! - a namespace held only as an io_uring fixed file (its descriptor closed), and one
//!   exported by the kernel's NVMe target (nvmet in configfs, no process holding it),
//!   are refused the same way;
//! - a loop device set up after the gate passed stops the next suite's destructive cases;
//! - a writer that appears after the gate turns the data case it spoils into an error
//!   naming the writer, never a failure of the drive;
//! - the checksums (O_DIRECT) see a raw passthrough write on a mounted namespace, so the
//!   "data unchanged" checks above can fail.
//!
//! QEMU and the recipe's Debian packages must be available: where they are not, these
//! tests fail with the reason, never skip. Guests run one at a time (two cores here).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nvtest::targets::guest::{self, Checksum, GuestOutcome, GuestRequest, SetupStep};
use nvtest::targets::TopologyRef;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The serial fixtures/qemu/ns32.yaml gives the controller.
const SERIAL: &str = "NVTQ32000001";

fn suite_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("suites").join(format!("{name}.yaml"))
}

fn run(setup: Vec<SetupStep>, configure: impl FnOnce(&mut GuestRequest)) -> GuestOutcome {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let target = TopologyRef::Builtin("ns32".into());
    let mut request = GuestRequest::new(&target, vec![suite_path("namespaces"), suite_path("trim")]).unwrap();
    request.echo = false;
    request.setup = setup;
    configure(&mut request);
    let outcome = guest::execute(&request).unwrap_or_else(|e| panic!("the guest lane failed: {e}"));
    println!("guest nvtest exited {}; console:\n{}", outcome.exit_status, outcome.console.join("\n"));
    outcome
}

/// The one device checksummed, unchanged: (before, after).
fn unchanged(checksums: &[Checksum]) -> (String, String) {
    let find = |when: &str| {
        checksums
            .iter()
            .find(|c| c.when == when)
            .unwrap_or_else(|| panic!("no checksum {when} nvtest: {checksums:?}"))
            .clone()
    };
    let (before, after) = (find("before"), find("after"));
    assert_eq!(before.device, after.device);
    assert_eq!(before.sha256.len(), 64, "{before:?}");
    assert_eq!(before.sha256, after.sha256, "the data of {} changed", before.device);
    (before.sha256, after.sha256)
}

#[test]
fn a_mounted_namespace_refuses_destructive_suites_and_keeps_its_data() {
    let outcome = run(vec![SetupStep::Mount(1), SetupStep::Checksum(1)], |r| {
        r.safety.allow_destructive = true;
        r.safety.confirm_serial = Some(SERIAL.into());
    });
    assert_eq!(outcome.exit_status, 2, "a refusal is exit status 2");
    let console = outcome.console.join("\n");
    assert!(console.contains("refusing to run destructive cases on /dev/nvme0"), "{console}");
    assert!(console.contains("mounted") || console.contains("mount"), "the refusal names the mount: {console}");
    assert!(outcome.junit.is_none(), "nothing ran, so no report");
    unchanged(&outcome.checksums);
    assert!(
        outcome.stages.iter().any(|s| s.ends_with("keep.txt: nvtest guest: data that must survive")),
        "the file on the filesystem is still there: {:?}",
        outcome.stages
    );
}

/// Every opt-in given: only the gate stands between the suites and the drive.
fn with_every_opt_in(r: &mut GuestRequest) {
    r.safety.allow_destructive = true;
    r.safety.confirm_serial = Some(SERIAL.into());
}

/// A refusal (exit 2, nothing run) naming every piece of `chain`, the data unchanged.
fn refused_naming(outcome: &GuestOutcome, chain: &[&str]) {
    let console = outcome.console.join("\n");
    assert_eq!(outcome.exit_status, 2, "a refusal is exit status 2: {console}");
    assert!(console.contains("refusing to run destructive cases on /dev/nvme0"), "{console}");
    for piece in chain {
        assert!(console.contains(piece), "the refusal should name `{piece}`: {console}");
    }
    assert!(outcome.junit.is_none(), "nothing ran, so no report");
    unchanged(&outcome.checksums);
}

#[test]
fn a_loop_device_on_a_namespace_is_refused() {
    // Odd NSIDs of ns32 are its 128 MiB namespaces: checksummed twice under TCG in
    // seconds, where an even (1 GiB) one takes minutes.
    let outcome = run(vec![SetupStep::Loop(3), SetupStep::Checksum(3)], with_every_opt_in);
    refused_naming(&outcome, &["(namespace 3 of nvme0) backs /dev/loop0 (a loop device)", "losetup -d /dev/loop0"]);
}

#[test]
fn a_filesystem_on_a_loop_device_over_a_namespace_is_refused() {
    let outcome = run(vec![SetupStep::LoopMount(1), SetupStep::Checksum(1)], with_every_opt_in);
    refused_naming(
        &outcome,
        &["/dev/loop0 (loop device on /dev/nvme0n1 (namespace 1 of nvme0)) is mounted at /mnt/loop1 (ext4)"],
    );
    assert!(
        outcome.stages.iter().any(|s| s.ends_with("/mnt/loop1/keep.txt: nvtest guest: data that must survive")),
        "the file on the loop device's filesystem is still there: {:?}",
        outcome.stages
    );
}

#[test]
fn a_loop_device_backed_by_a_file_on_a_namespace_is_refused() {
    let outcome = run(vec![SetupStep::LoopFile(1), SetupStep::Checksum(1)], with_every_opt_in);
    // The filesystem is detached, so the kernel's path for the file is `/disk.img`.
    refused_naming(
        &outcome,
        &[
            "/dev/nvme0n1 (namespace 1 of nvme0) holds a file the loop driver calls `/disk.img`",
            "the backing file of /dev/loop0",
        ],
    );
}

#[test]
fn a_process_that_memory_mapped_a_namespace_is_refused() {
    let outcome = run(vec![SetupStep::Map(5), SetupStep::Checksum(5)], with_every_opt_in);
    refused_naming(&outcome, &["(nvtest-guest-he) has /dev/nvme0n5 (namespace 5 of nvme0) memory-mapped"]);
}

#[test]
fn the_checksums_see_a_raw_write_on_a_mounted_namespace() {
    // A mounted namespace, checksummed, then written through the passthrough ioctl: the
    // page cache holds the old block, the device the new one; the checksums must differ.
    let setup = vec![SetupStep::Mount(1), SetupStep::Checksum(1), SetupStep::RawWrite(1)];
    let outcome = run(setup, |r| {
        r.safety.preserve = true;
        r.filters = vec!["identify-controller".into()];
    });
    assert!(outcome.stages.iter().any(|s| s.starts_with("wrote LBA 0 of NSID 1")), "{:?}", outcome.stages);
    let before = outcome.checksums.iter().find(|c| c.when == "before").expect("a before checksum");
    let after = outcome.checksums.iter().find(|c| c.when == "after").expect("an after checksum");
    assert_eq!(before.device, after.device);
    assert_ne!(before.sha256, after.sha256, "the checksum step missed a write to {}", before.device);
}

#[test]
fn a_loop_device_set_up_during_the_run_stops_the_destructive_cases_that_follow() {
    // Bound to namespace 32 once nvtest has passed the gate: the check before each
    // destructive case finds it (the next one after it appeared, in whichever case that
    // is), and every destructive case from there on, trim's too, is an error naming it.
    let outcome = run(vec![SetupStep::LateLoop(32)], |r| {
        with_every_opt_in(r);
        r.expect = Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/guest/expected.yaml"));
    });
    let console = outcome.console.join("\n");
    assert!(
        outcome.stages.iter().any(|s| s.starts_with("late loop device /dev/loop0 bound to ")),
        "{:?}",
        outcome.stages
    );
    assert_eq!(outcome.exit_status, 1, "the cases after it are errors: {console}");
    assert!(
        console.contains("destructive case not run: before case `")
            && console.contains("the drive gained another user since the safety gate's check")
            && console.contains("(namespace 32 of nvme0) backs /dev/loop0 (a loop device)"),
        "{console}"
    );
    let junit = outcome.junit.as_deref().expect("a JUnit report");
    assert!(!junit.contains("<failure"), "nothing blames the drive:\n{junit}");
    let trim_errors =
        junit.split("<testcase").filter(|c| c.contains("classname=\"trim\"") && c.contains("<error")).count();
    assert!(trim_errors > 0, "trim's destructive cases are errors:\n{junit}");
}

#[test]
fn preserve_runs_the_non_destructive_cases_on_a_mounted_namespace() {
    let outcome = run(vec![SetupStep::Mount(1), SetupStep::Checksum(1)], |r| r.safety.preserve = true);
    let console = outcome.console.join("\n");
    assert_eq!(outcome.exit_status, 0, "{console}");
    let junit = outcome.junit.as_deref().expect("a JUnit report");
    assert!(console.contains("test namespaces::identify-controller") && console.contains("... ok"), "{console}");
    assert!(console.contains("--preserve keeps the drive's data"), "destructive cases say why they are skipped");
    let ran = junit.matches("<testcase").count();
    let skipped = junit.matches("<skipped").count();
    assert!(ran > skipped && skipped > 0, "{ran} cases, {skipped} skipped:\n{junit}");
    assert!(!junit.contains("<failure") && !junit.contains("<error"), "{junit}");
    unchanged(&outcome.checksums);
}

#[test]
fn a_serial_that_is_not_the_controllers_is_refused() {
    let outcome = run(vec![SetupStep::Checksum(1)], |r| {
        r.safety.allow_destructive = true;
        r.safety.confirm_serial = Some("NOT-THIS-DRIVE".into());
    });
    let console = outcome.console.join("\n");
    assert_eq!(outcome.exit_status, 2, "{console}");
    assert!(
        console.contains("NOT-THIS-DRIVE") && console.contains(SERIAL),
        "the refusal names both serials: {console}"
    );
    unchanged(&outcome.checksums);
}

/// Bad targets on a real kernel: nvtest in the guest pointed at a path that does not
/// exist, a device that is not NVMe, a directory, a namespace's block device and its
/// generic character device where the controller is expected, and run without the
/// privilege the passthrough needs. Each is refused with exit status 2 and one line
/// naming the problem and the fix; the drive's data is unchanged.
#[test]
fn bad_targets_on_a_real_kernel_get_one_line_and_exit_2() {
    let bad: [(SetupStep, &str); 6] = [
        (SetupStep::Target("/dev/nvme9".into()), "no such file or device"),
        (SetupStep::Target("/dev/null".into()), "is not an NVMe controller"),
        (SetupStep::Target("/tmp".into()), "not a device"),
        (
            SetupStep::Target("/dev/nvme0n1".into()),
            "is the block device of namespace nvme0n1, not a controller; give its controller /dev/nvme0",
        ),
        (
            SetupStep::Target("/dev/ng0n1".into()),
            "is the generic device of namespace ng0n1, not a controller; give its controller /dev/nvme0",
        ),
        (SetupStep::Unprivileged("/dev/nvme0".into()), "permission denied; run nvtest as root"),
    ];
    let mut setup: Vec<SetupStep> = bad.iter().map(|(step, _)| step.clone()).collect();
    setup.push(SetupStep::Checksum(1));
    // The run itself only needs to happen: one read-only case.
    let outcome = run(setup, |r| {
        r.safety.preserve = true;
        r.filters = vec!["identify-controller".into()];
    });
    unchanged(&outcome.checksums);
    for (step, names) in &bad {
        let (verb, path) = match step {
            SetupStep::Target(p) => ("target", p),
            SetupStep::Unprivileged(p) => ("unprivileged", p),
            _ => unreachable!("only bad-target steps are listed"),
        };
        let prefix = format!("{verb} {path} exit ");
        let stage = outcome
            .stages
            .iter()
            .find_map(|s| s.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no stage for {verb} {path}: {:?}", outcome.stages));
        println!("{verb} {path}: exit {stage}");
        assert!(stage.starts_with("2 lines 1: error: "), "{verb} {path}: expected exit 2 and one error line: {stage}");
        assert!(stage.contains(names), "{verb} {path}: the error should say `{names}`: {stage}");
    }
}

#[test]
fn a_namespace_held_only_as_an_io_uring_fixed_file_is_refused() {
    let outcome = run(vec![SetupStep::UringFixed(3), SetupStep::Checksum(3)], with_every_opt_in);
    refused_naming(
        &outcome,
        &["(nvtest-guest-he) has /dev/nvme0n3 (namespace 3 of nvme0) registered as a fixed file of its io_uring ring"],
    );
}

#[test]
fn a_namespace_exported_by_the_kernels_nvme_target_is_refused() {
    let outcome = run(vec![SetupStep::Nvmet(5), SetupStep::Checksum(5)], with_every_opt_in);
    refused_naming(
        &outcome,
        &[
            "/dev/nvme0n5 (namespace 5 of nvme0) is exported by the kernel's NVMe target: nvmet subsystem \
             `nqn.2026-12.io.nvtest:export5` namespace 1",
            "enabled): take it out first",
        ],
    );
}

#[test]
fn a_writer_that_appears_after_the_gate_is_an_error_naming_it_not_a_failure() {
    // Namespace 1's first 4 KiB overwritten every 10 ms once nvtest passed the gate (the
    // guest holds nvtest until the writer's first write is done): the next destructive
    // case is not sent, or the one running reads back what another process wrote there.
    let outcome = run(vec![SetupStep::LateWriter(1)], |r| {
        with_every_opt_in(r);
        r.filters = vec!["isolation".into(), "last-lba".into(), "flush-keeps-data".into()];
        r.expect = Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/guest/expected.yaml"));
    });
    let console = outcome.console.join("\n");
    assert!(
        outcome.stages.iter().any(|s| s.starts_with("late writer (process ") && s.contains(": wrote the first 4 KiB")),
        "{:?}",
        outcome.stages
    );
    assert_eq!(outcome.exit_status, 1, "an error, not a failure: {console}");
    assert!(
        (console.contains("the drive gained another user during the case")
            || console.contains("the drive gained another user since the safety gate's check"))
            && console.contains("(nvtest-guest-he) has /dev/nvme0n1 (namespace 1 of nvme0) open"),
        "the error names the writer: {console}"
    );
    let junit = outcome.junit.as_deref().expect("a JUnit report");
    assert!(!junit.contains("<failure"), "nothing blames the drive:\n{junit}");
}
