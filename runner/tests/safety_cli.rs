//! The real binary on bad kernel targets (paths that are safe to name on any machine:
//! /dev/null, a missing path, a regular file, a directory), `--help`, `--preserve`, and
//! the serial check on the simulated drive.

use std::path::PathBuf;
use std::process::{Command, Output};

fn nvtest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvtest")).args(args).output().expect("the nvtest binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn test_suite(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/suites").join(name).display().to_string()
}

/// A bad target: exit 2, nothing on stdout (no device identity), one error line.
fn bad_target(target: &str) -> String {
    let out = nvtest(&["--suite", "namespaces", target]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{target}: {stderr}");
    assert!(text(&out.stdout).is_empty(), "{target}: {}", text(&out.stdout));
    assert_eq!(stderr.trim_end().lines().count(), 1, "{target}: {stderr}");
    stderr
}

#[test]
fn dev_null_is_not_an_nvme_controller() {
    let e = bad_target("/dev/null");
    assert!(e.starts_with("error: /dev/null is not an NVMe controller (character device 1:3"), "{e}");
    assert!(e.contains("give the controller's character device /dev/nvmeN"), "{e}");
}

#[test]
fn a_missing_path_says_so_and_what_exists() {
    let e = bad_target("/nonexistent/nvme9");
    assert!(
        e.starts_with("error: /nonexistent/nvme9: no such file or device; give the controller's character device"),
        "{e}"
    );
    assert!(e.contains("controllers here:") || e.contains("no controller on this machine"), "{e}");
}

#[test]
fn a_regular_file_or_directory_is_not_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nvme0");
    std::fs::write(&file, "").unwrap();
    let e = bad_target(&file.display().to_string());
    assert!(e.contains("is a regular file, not a device"), "{e}");
    let e = bad_target(&dir.path().display().to_string());
    assert!(e.contains("is a directory, not a device"), "{e}");
}

#[test]
fn a_yaml_path_as_target_points_to_sim_and_qemu() {
    let out = nvtest(&["--list", "/tmp/lab.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out.stderr);
    assert!(e.contains("write `sim:/tmp/lab.yaml` for a drive profile or `qemu:/tmp/lab.yaml`"), "{e}");
    let out = nvtest(&["--list", "nvme0"]);
    assert!(text(&out.stderr).contains("or `/dev/nvmeN` (a controller of the Linux NVMe driver)"));
}

#[test]
fn help_explains_the_gate_and_that_sim_and_qemu_need_no_opt_in() {
    let out = nvtest(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for needle in [
        "--allow-destructive",
        "--confirm-serial <SN>",
        "--preserve",
        "/dev/nvmeN",
        "the simulated drive and QEMU are disposable",
        "refuses while anything uses the drive",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}

#[test]
fn preserve_skips_destructive_cases_with_the_reason_and_runs_the_rest() {
    let out = nvtest(&[
        "--suite",
        "namespaces",
        "--suite",
        &test_suite("basics.yaml"),
        "--filter",
        "controller",
        "--preserve",
        "sim",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("namespaces::controller-lists    ... ignored (destructive case, not run: --preserve"),
        "{stdout}"
    );
    // identify-controller is `destructive: false` in the namespaces suite: it runs.
    assert!(stdout.contains("namespaces::identify-controller ... ok"), "{stdout}");
    assert!(stdout.contains("basics::identify-controller     ... ok"), "{stdout}");
}

#[test]
fn destructive_suites_run_on_the_simulated_drive_without_opt_in() {
    let out = nvtest(&["--suite", "namespaces", "--filter", "namespaces::identify-controller", "--exact", "sim"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("namespaces::identify-controller ... ok"), "{stdout}");
}

#[test]
fn a_confirmed_serial_that_is_not_the_drives_refuses_destructive_cases() {
    let out = nvtest(&[
        "--suite",
        "namespaces",
        "--filter",
        "namespaces::controller-lists",
        "--exact",
        "--confirm-serial",
        "NOT-THIS-DRIVE",
        "sim",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--confirm-serial `NOT-THIS-DRIVE` does not match Identify Controller SN"), "{stderr}");
    assert!(!text(&out.stdout).contains("... ok"), "no case ran");
}
