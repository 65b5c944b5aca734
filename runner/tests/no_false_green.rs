//! No false green for a pipeline: an empty TARGET is a usage error; a run without TARGET
//! says on the console and in the JUnit report that it tested the built-in simulated
//! drive, and `CI` (as every CI system sets it) or `NVTEST_REQUIRE_TARGET` forbids it; a
//! positional word that is neither a target nor part of a case name is refused with the
//! nearest of each; a run whose filters select no case
//! exits 4 (unless `--no-cases` says otherwise) without opening anything; a run in which
//! every case was skipped says so in its last line.

use std::path::PathBuf;
use std::process::{Command, Output};

fn nvtest(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvtest"));
    // These tests set the variables that forbid the default target themselves.
    cmd.args(args).env_remove("NVTEST_REQUIRE_TARGET").env_remove("CI");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the nvtest binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn basics() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/suites/basics.yaml").display().to_string()
}

#[test]
fn an_empty_target_is_a_usage_error_not_a_run_on_the_simulated_drive() {
    for empty in ["", "  "] {
        let out = nvtest(&["--suite", "trim", empty], &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
        let err = text(&out.stderr);
        assert!(err.contains("TARGET is empty"), "{err}");
        assert!(!text(&out.stdout).contains("running "), "nothing ran");
    }
}

#[test]
fn without_target_the_run_and_its_report_say_they_used_the_simulated_drive() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("r.xml");
    let out = nvtest(&["--suite", &basics(), "--junit", &junit.display().to_string()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let console = text(&out.stdout);
    assert!(console.contains("nvtest's built-in simulated drive: no TARGET was given"), "{console}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("no TARGET was given"), "the JUnit target property says so:\n{xml}");
}

#[test]
fn a_pipeline_can_forbid_the_default_target() {
    let out = nvtest(&["--suite", &basics()], &[("NVTEST_REQUIRE_TARGET", "1")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("NVTEST_REQUIRE_TARGET is set"), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("running "), "nothing ran");
    // Given explicitly, the simulated drive is still allowed; `0` does not forbid.
    assert_eq!(nvtest(&["--suite", &basics(), "sim"], &[("NVTEST_REQUIRE_TARGET", "1")]).status.code(), Some(0));
    assert_eq!(nvtest(&["--suite", &basics()], &[("NVTEST_REQUIRE_TARGET", "0")]).status.code(), Some(0));
}

#[test]
fn in_ci_a_run_without_target_is_a_usage_error_unless_the_simulated_drive_is_named() {
    for ci in ["true", "1", "yes"] {
        let out = nvtest(&["--suite", "trim"], &[("CI", ci)]);
        assert_eq!(out.status.code(), Some(2), "CI={ci}: {}", text(&out.stdout));
        let err = text(&out.stderr);
        assert!(err.contains("no TARGET given, and CI is set"), "{err}");
        assert!(!text(&out.stdout).contains("running "), "nothing ran");
    }
    // `$NVME_DEVICE` unset: the word is gone, and CI still refuses.
    let out = nvtest(&["--suite", &basics(), "--junit", "/dev/null"], &[("CI", "true")]);
    assert_eq!(out.status.code(), Some(2));
    // Named, the simulated drive runs in CI; CI=false (or 0, or empty) is no CI.
    assert_eq!(nvtest(&["--suite", &basics(), "sim"], &[("CI", "true")]).status.code(), Some(0));
    for off in ["false", "0", ""] {
        assert_eq!(nvtest(&["--suite", &basics()], &[("CI", off)]).status.code(), Some(0), "CI={off:?}");
    }
}

#[test]
fn a_word_that_is_neither_a_target_nor_a_case_is_refused_naming_the_nearest_of_each() {
    let out = nvtest(&["--suite", "trim", "sim", "enterprise-1.2"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("`enterprise-1.2` is neither a target nor part of a case name"), "{err}");
    assert!(err.contains("the nearest target is `sim:enterprise-1.2a`"), "{err}");
    assert!(err.contains("the nearest case `trim::"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(!text(&out.stdout).contains("running "), "nothing ran");
    // A word that is part of a case name is a filter, as before.
    let out = nvtest(&["--suite", "trim", "sim", "inactive-namespace"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // --filter takes any text: selecting nothing is exit 4, as before.
    let out = nvtest(&["--suite", "trim", "--filter", "enterprise-1.2", "sim"], &[]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
}

#[test]
fn a_filter_that_selects_nothing_exits_4_before_opening_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("r.xml");
    let out =
        nvtest(&["--suite", &basics(), "--filter", "isolaton", "--junit", &junit.display().to_string(), "sim"], &[]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("no case to run: --filter `isolaton` matches none of the"), "{err}");
    assert!(!text(&out.stdout).contains("target sim"), "the target was not opened");
    assert!(!junit.exists(), "no report of a run that did not happen");
    let warn = nvtest(&["--suite", &basics(), "--filter", "isolaton", "--no-cases", "warn", "sim"], &[]);
    assert_eq!(warn.status.code(), Some(0));
    assert!(text(&warn.stderr).contains("warning: no case to run"));
    let pass = nvtest(&["--suite", &basics(), "--filter", "isolaton", "--no-cases", "pass", "sim"], &[]);
    assert_eq!(pass.status.code(), Some(0));
    // Listing selects nothing without being an error.
    assert_eq!(nvtest(&["--suite", &basics(), "--filter", "isolaton", "--list"], &[]).status.code(), Some(0));
}

#[test]
fn a_run_in_which_every_case_was_skipped_says_so_last() {
    // The 1.2a profile has no Write Zeroes with Deallocate: every case of the filter skips.
    let out = nvtest(&["--suite", "trim", "--filter", "write-zeroes-deallocate", "sim:enterprise-1.2a"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let console = text(&out.stdout);
    let last = console.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
    assert!(last.starts_with("every one of the 4 cases was skipped: nothing on the drive was checked"), "{console}");
}

#[test]
fn skip_leaves_cases_out_and_repeats() {
    let out = nvtest(&["--suite", "trim", "--skip", "write-zeroes", "--skip", "many-ranges", "--list"], &[]);
    let listed = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(!listed.contains("write-zeroes") && !listed.contains("many-ranges"), "{listed}");
    assert!(listed.contains("trim::inactive-namespace: test"), "{listed}");
    let exact = nvtest(&["--suite", "trim", "--skip", "trim::inactive-namespace", "--exact", "--list"], &[]);
    assert_eq!(text(&exact.stdout).lines().count(), 40, "one case left out exactly");
    let all = nvtest(&["--suite", &basics(), "--skip", "basics", "sim"], &[]);
    assert_eq!(all.status.code(), Some(4));
    assert!(text(&all.stderr).contains("--skip `basics` leaves out all"), "{}", text(&all.stderr));
}
