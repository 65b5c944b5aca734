//! The `nvtest` binary's command line: exit statuses, usage errors, listing, the schema,
//! and malformed suites rejected before any device is opened, each located as
//! `file:line:column`. Runs that need a device are in `cli_run.rs`.

use std::path::PathBuf;
use std::process::{Command, Output};

#[path = "common/fixtures.rs"]
mod fixtures;
use fixtures::{expectation, yaml_files};

/// A target that cannot open: if nvtest ever tried, its error would name this path.
const NEVER_OPENED: &str = "sim:/nonexistent/never-opened.yaml";

fn nvtest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvtest")).args(args).output().expect("the nvtest binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn test_suite(name: &str) -> String {
    manifest_dir().join("tests/suites").join(name).display().to_string()
}

/// The malformed fixtures: those the JSON Schema also rejects (`tests/malformed/`), then
/// those only the loader can see (`tests/malformed-semantic/`). Each says on its second
/// line `# expect: LINE:COL: message`.
fn malformed_fixtures() -> Vec<PathBuf> {
    let mut all = Vec::new();
    for dir in ["tests/malformed", "tests/malformed-semantic"] {
        all.extend(yaml_files(&manifest_dir().join(dir)));
    }
    all
}

#[test]
fn every_malformed_suite_is_rejected_with_file_line_column_before_the_device_opens() {
    let fixtures = malformed_fixtures();
    assert!(!fixtures.is_empty());
    for fixture in fixtures {
        let path = fixture.display().to_string();
        let output = nvtest(&["--suite", &path, NEVER_OPENED]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{path}: exit status; stderr:\n{err}");
        let first = err.lines().next().unwrap_or_default();
        let expected = format!("{path}:{}", expectation(&fixture));
        assert!(first.starts_with(&expected), "{path}:\n  first line: {first}\n  expected:   {expected}…");
        assert!(!err.contains("never-opened"), "{path}: the target was opened:\n{err}");
        assert!(stdout(&output).is_empty(), "{path}: printed to stdout:\n{}", stdout(&output));
    }
}

#[test]
fn the_malformed_fixtures_cover_every_kind_of_mistake() {
    let names: Vec<String> =
        malformed_fixtures().iter().map(|p| p.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    for kind in [
        "unknown-key",
        "unknown-step",
        "wrong-type",
        "duplicate-key",
        "matrix-undeclared",
        "matrix-empty",
        "matrix-wrong-type",
        "matrix-unused",
        "unknown-requirement",
        "unknown-status",
        "unknown-check",
        "duplicate-case",
        "bad-version",
        "ns-beyond-set",
        "count-zero",
        "u32-overflow",
        "quoted-number",
        "quoted-boolean",
    ] {
        assert!(names.iter().any(|n| n == kind), "no fixture tests/malformed/{kind}.yaml");
    }
}

#[test]
fn a_malformed_suite_among_good_ones_stops_the_run() {
    let bad = manifest_dir().join("tests/malformed/unknown-step.yaml").display().to_string();
    let output = nvtest(&["--suite", &test_suite("basics.yaml"), "--suite", &bad, "--list"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stdout(&output).is_empty(), "listed despite a malformed suite:\n{}", stdout(&output));
    assert!(stderr(&output).starts_with(&format!("{bad}:12:9: unknown name `read`")), "{}", stderr(&output));
}

#[test]
fn list_names_every_expanded_case_without_opening_the_target() {
    let output = nvtest(&[
        "--suite",
        &test_suite("basics.yaml"),
        "--suite",
        &test_suite("wrong-expectation.yaml"),
        "--list",
        NEVER_OPENED,
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "basics::identify-controller: test\n\
         basics::read-at-nsze/lbads=512: test\n\
         basics::read-at-nsze/lbads=4096: test\n\
         basics::io-to-nsid-zero: test\n\
         basics::future-version: test\n\
         wrong-expectation::read-inside-expects-out-of-range: test\n"
    );
}

#[test]
fn list_filters_by_substring_and_exactly() {
    let basics = test_suite("basics.yaml");
    let output = nvtest(&["--suite", &basics, "--list", "--filter", "nsze"]);
    assert_eq!(stdout(&output), "basics::read-at-nsze/lbads=512: test\nbasics::read-at-nsze/lbads=4096: test\n");
    let output = nvtest(&["--suite", &basics, "--list", "--filter", "basics::read-at-nsze/lbads=512", "--exact"]);
    assert_eq!(stdout(&output), "basics::read-at-nsze/lbads=512: test\n");
    let output = nvtest(&["--suite", &basics, "--list", "--filter", "read-at-nsze", "--exact"]);
    assert_eq!(stdout(&output), "");
}

#[test]
fn without_suite_every_suite_in_the_suites_directory_is_loaded() {
    let repo = manifest_dir().join("..");
    let output = Command::new(env!("CARGO_BIN_EXE_nvtest")).args(["--list"]).current_dir(&repo).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "the shipped suites must load:\n{}", stderr(&output));
    let listed = stdout(&output);
    for suite in std::fs::read_dir(repo.join("suites")).unwrap().flatten() {
        let path = suite.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            assert!(
                listed.contains(&format!("\n{name}::")) || listed.starts_with(&format!("{name}::")),
                "{name} not listed"
            );
        }
    }
}

#[test]
fn a_suite_name_that_does_not_exist_lists_the_available_ones() {
    let output = nvtest(&["--suite", "no-such-suite", "--list"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no suite `no-such-suite` in "), "{err}");
    assert!(err.contains("(available: ") && err.contains("namespaces") && err.contains("trim"), "{err}");
}

#[test]
fn a_suite_file_that_does_not_exist_is_an_error_line() {
    let output = nvtest(&["--suite", "/nonexistent/mine.yaml", "--list"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).starts_with("/nonexistent/mine.yaml: cannot read the suite"), "{}", stderr(&output));
}

/// Every file argument is read with a bound: an endless device, random bytes or a
/// directory given as a suite, profile, topology or expected findings is one error line
/// and exit 2, not a process that reads until memory runs out.
#[test]
fn an_endless_binary_or_directory_input_is_one_error_line() {
    let cases: [(&[&str], &str); 6] = [
        (&["--suite", "/dev/zero"], "/dev/zero: cannot read the suite: it holds more than 4 MiB"),
        (&["--suite", "namespaces", "sim:/dev/zero"], "/dev/zero: cannot read the profile: it holds more than 4 MiB"),
        (&["--suite", "namespaces", "sim:/dev/urandom"], "/dev/urandom: cannot read the profile"),
        (&["--suite", "namespaces", "qemu:/dev/zero"], "/dev/zero: cannot read the topology: it holds more than"),
        (&["--suite", "namespaces", "--expect", "/dev/zero", "sim"], "/dev/zero: cannot read the expected findings"),
        (&["--suite", "/tmp"], "/tmp: cannot read the suite: it is a directory"),
    ];
    for (args, says) in cases {
        let output = nvtest(args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "nvtest {args:?}:\n{err}");
        assert!(err.contains(says), "nvtest {args:?} should say `{says}`:\n{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "nvtest {args:?}: one line:\n{err}");
    }
}

/// `--rig` is read and checked before anything is opened: a bad rig is one line with
/// FILE:LINE:COL; a rig for a target with a power switch of its own is a usage error.
#[test]
fn a_bad_rig_or_a_rig_for_a_simulated_drive_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "power_off: pdu off\npower_of: pdu on\n").unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "pci_remove_rescan: true\n").unwrap();
    let (bad, good) = (bad.display().to_string(), good.display().to_string());
    let cases: [(Vec<&str>, String); 3] = [
        (vec!["--suite", "power-fail", "--rig", &bad, "/dev/nvme9"], format!("{bad}:2:1:")),
        (
            vec!["--suite", "power-fail", "--rig", &good, "sim"],
            "--rig switches the power of a drive of the Linux".into(),
        ),
        (
            vec!["--suite", "power-fail", "--rig", "/nonexistent/rig.yaml", "/dev/nvme9"],
            "/nonexistent/rig.yaml: cannot read the rig".into(),
        ),
    ];
    for (args, says) in cases {
        let output = nvtest(&args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "nvtest {args:?}:\n{err}");
        assert!(err.contains(&says), "nvtest {args:?} should say `{says}`:\n{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "nvtest {args:?}: one line:\n{err}");
    }
}

#[test]
fn usage_errors_exit_2() {
    for args in
        [&["--no-such-flag"][..], &["--exact"], &["--suite"], &["tcp:10.0.0.1"], &["sim", "sim"], &["schema", "--list"]]
    {
        let output = nvtest(args);
        assert_eq!(output.status.code(), Some(2), "nvtest {args:?}:\n{}", stderr(&output));
        assert!(!stderr(&output).is_empty(), "nvtest {args:?} said nothing");
    }
    let output = nvtest(&["tcp:10.0.0.1"]);
    assert!(stderr(&output).contains("expected `sim`"), "{}", stderr(&output));
}

#[test]
fn help_and_version_exit_0() {
    let help = nvtest(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    for word in ["--suite", "--junit", "--list", "--filter", "--exact", "TARGET", "schema"] {
        assert!(stdout(&help).contains(word), "help lacks {word}");
    }
    let version = nvtest(&["--version"]);
    assert_eq!(version.status.code(), Some(0));
    assert_eq!(stdout(&version), format!("nvtest {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn schema_prints_the_suite_json_schema() {
    let output = nvtest(&["schema"]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    assert!(text.trim_start().starts_with('{') && text.contains("\"title\": \"Suite\""), "{text}");
    for word in ["\"cases\"", "use_namespaces", "io_beyond_mdts", "namespace_management", "from_end"] {
        assert!(text.contains(word), "schema lacks {word}");
    }
}

#[test]
fn a_target_that_cannot_open_exits_2_after_the_suites_load() {
    let output = nvtest(&["--suite", &test_suite("basics.yaml"), NEVER_OPENED]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).starts_with("error: "), "{}", stderr(&output));
}

/// The names a suite may use, from the schema: steps, checks, requirements, and the named
/// values of `ns`, `lba`, `blocks` and `op`.
fn vocabulary(schema: &serde_json::Value) -> Vec<String> {
    let mut names = Vec::new();
    for definition in ["Step", "CheckName", "Requirement", "NsName", "LbaName", "BlocksName", "IoOp"] {
        let definition_schema = &schema["$defs"][definition];
        assert!(definition_schema.is_object(), "the schema has no {definition}");
        let variants =
            definition_schema["oneOf"].as_array().cloned().unwrap_or_else(|| vec![definition_schema.clone()]);
        for variant in variants {
            if let Some(name) = variant["const"].as_str() {
                names.push(name.to_string());
            }
            if let Some(values) = variant["enum"].as_array() {
                names.extend(values.iter().filter_map(|v| v.as_str().map(str::to_string)));
            }
            if let Some(properties) = variant["properties"].as_object() {
                names.extend(properties.keys().cloned());
            }
        }
    }
    names
}

#[test]
fn the_suite_format_readme_describes_every_name_of_the_vocabulary() {
    let schema: serde_json::Value = serde_json::from_slice(&nvtest(&["schema"]).stdout).unwrap();
    let readme = std::fs::read_to_string(manifest_dir().join("../suites/README.md")).unwrap();
    let missing: Vec<String> =
        vocabulary(&schema).into_iter().filter(|name| !readme.contains(&format!("`{name}`"))).collect();
    assert!(missing.is_empty(), "suites/README.md does not describe: {missing:?}");
}

/// Runs nvtest with its stdout closed from the start, as `nvtest … | head -0` would.
fn with_closed_stdout(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvtest"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the nvtest binary runs");
    drop(child.stdout.take());
    child.wait_with_output().expect("nvtest ends")
}

#[test]
fn a_closed_stdout_ends_a_list_quietly() {
    let output = with_closed_stdout(&["--suite", &test_suite("basics.yaml"), "--list"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).is_empty(), "{}", stderr(&output));
}

#[test]
fn a_closed_stdout_cuts_a_run_short_with_one_error_line_and_the_junit_written() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("cut.xml");
    let output =
        with_closed_stdout(&["--suite", &test_suite("basics.yaml"), "--junit", &junit.display().to_string(), "sim"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: the console stopped taking output"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(junit.is_file(), "the cases that ran are reported");
}

/// `--firmware` is read and checked before anything is opened: an unreadable file, an
/// empty one, or one that is not whole dwords is one line and exit 2.
#[test]
fn a_firmware_image_that_cannot_be_downloaded_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let (empty, odd) = (dir.path().join("empty.bin"), dir.path().join("odd.bin"));
    std::fs::write(&empty, b"").unwrap();
    std::fs::write(&odd, [0u8; 4099]).unwrap();
    let (empty, odd) = (empty.display().to_string(), odd.display().to_string());
    let cases: [(&str, &str); 3] = [
        ("/nonexistent/fw.bin", "--firmware /nonexistent/fw.bin: cannot read it"),
        (&empty, "the file is empty"),
        (&odd, "4099 bytes, not whole dwords"),
    ];
    for (file, says) in cases {
        let args = ["--suite", "firmware", "--firmware", file, NEVER_OPENED];
        let output = nvtest(&args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "nvtest {args:?}:\n{err}");
        assert!(err.contains(says), "nvtest {args:?} should say `{says}`:\n{err}");
        assert!(!err.contains("never-opened"), "nothing is opened: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "nvtest {args:?}: one line:\n{err}");
    }
}
