//! Runs of the `nvtest` binary against the simulated drive: the console (identity before
//! the cases, verdicts, where the JUnit file went), exit statuses 0 and 1, and a JUnit file
//! whose counts match the console.

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
    let output =
        nvtest(&["--suite", &test_suite("basics.yaml"), "--filter", "basics::read-at-nsze/lbads=4096", "--exact"]);
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
