//! Runs of the `nvtest` binary against the simulated drive: the console (identity before
//! the cases, verdicts, where the JUnit file went), exit statuses 0 and 1, a JUnit file
//! whose counts match the console, and report paths that are not regular files (a
//! character device and a FIFO written in place, `-`, a block device refused).

use std::path::PathBuf;
use std::process::{Command, Output};

use quick_junit::{NonSuccessKind, Report, TestCaseStatus};

fn nvtest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvtest")).args(args).output().expect("the nvtest binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn test_suite(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/suites").join(name).display().to_string()
}

/// The numbers of libtest's closing line: (passed, failed, ignored, filtered out).
fn console_counts(out: &str) -> (usize, usize, usize, usize) {
    let line = out.lines().find(|l| l.starts_with("test result: ")).unwrap_or_else(|| panic!("no result line:\n{out}"));
    let number = |word: &str| -> usize {
        let before = line.split(&format!(" {word}")).next().unwrap_or_default();
        before.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no `{word}` in {line}"))
    };
    (number("passed"), number("failed"), number("ignored"), number("filtered out"))
}

#[test]
fn a_clean_drive_passes_the_basics_and_the_junit_counts_match_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("reports/basics.xml");
    let output = nvtest(&["--suite", &test_suite("basics.yaml"), "--junit", &junit.display().to_string(), "sim"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{}", String::from_utf8_lossy(&output.stderr));

    let identity = out.find("target sim:").expect("the identity names the target");
    let running = out.find("running ").expect("libtest's header");
    assert!(identity < running, "identity must come before the cases:\n{out}");
    for label in ["model", "serial", "firmware", "NVMe"] {
        assert!(out[..running].lines().any(|l| l.trim_start().starts_with(label)), "no {label} line:\n{out}");
    }
    let skip = out.lines().find(|l| l.starts_with("test basics::future-version ")).unwrap_or_default();
    assert!(skip.contains(" ... ignored (") && skip.contains("9.9"), "the skip shows its reason:\n{out}");
    assert!(out.contains(&format!("JUnit report: {}", junit.display())), "{out}");

    let (passed, failed, ignored, _) = console_counts(&out);
    let report = Report::deserialize_from_str(&std::fs::read_to_string(&junit).unwrap()).unwrap();
    assert_eq!(report.tests, passed + failed + ignored);
    assert_eq!(report.failures + report.errors, failed);
    assert_eq!(report.skipped, ignored);
    assert_eq!((passed, failed, ignored), (4, 0, 1));
}

#[test]
fn a_failed_case_exits_1_with_its_rule_and_is_a_junit_failure() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("wrong.xml");
    let output =
        nvtest(&["--suite", &test_suite("wrong-expectation.yaml"), "--junit", &junit.display().to_string(), "sim"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    let line = out.lines().find(|l| l.starts_with("test wrong-expectation::read-inside-expects-out-of-range "));
    assert!(line.is_some_and(|l| l.ends_with("... FAILED")), "{out}");
    assert!(out.contains("rule nvtest self-test"), "the failure shows its rule:\n{out}");
    let report = Report::deserialize_from_str(&std::fs::read_to_string(&junit).unwrap()).unwrap();
    let case = &report.test_suites[0].test_cases[0];
    assert!(
        matches!(case.status, TestCaseStatus::NonSuccess { kind: NonSuccessKind::Failure, .. }),
        "{:?}",
        case.status
    );
}

#[test]
fn the_filter_runs_only_matching_cases() {
    let output = nvtest(&[
        "--suite",
        &test_suite("basics.yaml"),
        "--filter",
        "basics::read-at-nsze/lbads=4096",
        "--exact",
        "sim",
    ]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert_eq!(console_counts(&out), (1, 0, 0, 4));
    assert!(out.contains("JUnit report: not written"), "{out}");
}

/// `--firmware FILE`: the firmware cases download the image given instead of nvtest's
/// test image, and judge the revision the slot then reports (VEND0001 here, an image the
/// simulated drive accepts): every case passes, and FR names it after each activation.
#[test]
fn the_firmware_suite_downloads_the_image_given_and_judges_its_revision() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("vendor.bin");
    std::fs::write(&image, nvme::fw_image::build("VEND0001", 32 * 1024)).unwrap();
    let image = image.display().to_string();
    let args = ["--suite", "firmware", "--firmware", &image, "--show-output", "sim:enterprise-1.4"];
    let output = nvtest(&args);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{}", String::from_utf8_lossy(&output.stderr));
    let (passed, failed, _, _) = console_counts(&out);
    assert_eq!((passed, failed), (6, 0), "{out}");
    assert!(out.contains(&format!("image: {image}")), "{out}");
    assert!(out.contains("VEND0001: the revision of the image given"), "{out}");
    assert!(!out.contains("NVTF"), "nvtest's own image is never sent when one is given:\n{out}");
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// As root, `--junit /dev/full` once replaced the device node with a regular file (the
/// report was renamed over it). A character device is written in place: the node stays,
/// and the device's write error is the run's error.
#[test]
fn a_report_to_dev_full_keeps_the_device_node_and_reports_the_write_error() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let before = std::fs::metadata("/dev/full").expect("/dev/full exists");
    let output = nvtest(&["--suite", &test_suite("basics.yaml"), "--junit", "/dev/full", "sim"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let err = stderr(&output);
    assert!(err.contains("cannot write the JUnit report /dev/full: No space left on device"), "{err}");
    let after = std::fs::symlink_metadata("/dev/full").unwrap();
    assert!(after.file_type().is_char_device(), "/dev/full is still a character device");
    assert_eq!((after.rdev(), after.ino()), (before.rdev(), before.ino()), "the same node");
}

#[test]
fn a_report_to_a_fifo_is_written_into_it() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("junit.pipe");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let output = nvtest(&["--suite", &test_suite("basics.yaml"), "--junit", &fifo.display().to_string(), "sim"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let xml = reader.join().unwrap();
    let report = Report::deserialize_from_str(&xml).unwrap();
    assert_eq!(report.tests, 5);
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "still a FIFO");
}

#[test]
fn a_report_to_dash_is_standard_output_alone_and_the_console_goes_to_stderr() {
    let output = nvtest(&["--suite", &test_suite("basics.yaml"), "--junit", "-", "sim"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = Report::deserialize_from_str(&stdout(&output)).expect("standard output is the JUnit XML alone");
    assert_eq!(report.tests, 5);
    assert!(stderr(&output).contains("test result: ok"), "the console is on stderr: {}", stderr(&output));
}

#[test]
fn a_block_device_as_report_path_is_refused_before_the_target_opens() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("disk");
    // A block device node of the loop driver's numbers (7, 0), made here as root.
    let made = Command::new("mknod").arg(&node).args(["b", "7", "0"]).status().unwrap();
    assert!(made.success(), "mknod (this test runs as root, as CI does)");
    let output = nvtest(&["--suite", &test_suite("basics.yaml"), "--json", &node.display().to_string(), "sim"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("it is a block device"), "{}", stderr(&output));
    assert!(!stdout(&output).contains("running "), "nothing ran: {}", stdout(&output));
    assert!(std::fs::symlink_metadata(&node).unwrap().file_type().is_block_device());
}

/// One check of the report paths for both lanes: `--junit` and `--json` naming the same
/// file is a usage error before any target opens, and before a guest boots.
#[test]
fn the_same_file_for_both_reports_is_refused_in_both_lanes() {
    let dir = tempfile::tempdir().unwrap();
    let same = dir.path().join("report");
    let same = same.to_str().unwrap();
    for target in ["sim", "qemu-linux:ns32"] {
        let output = nvtest(&["--suite", "trim", "--junit", same, "--json", same, target]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{target}: {stderr}");
        assert!(stderr.contains(&format!("--junit and --json name the same file {same}")), "{target}: {stderr}");
        assert!(!stderr.contains("booting Linux"), "{target}: refused before the guest boots: {stderr}");
    }
}
