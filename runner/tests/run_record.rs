//! The runner as CI pipelines and labs use it (issue 9): several targets in one run with
//! per-target reports equal to the console, the JSON run record checked against its
//! published schema by a real validator (the `jsonschema` crate), run metadata in
//! JUnit, seeds that replay, repeats, interruption by SIGINT / SIGTERM / `--timeout`
//! with the reports of what ran, report paths checked before anything opens, a closed
//! console, and the libtest habits (positional filter, `--list --format json`,
//! suggestions for mistyped flags).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use quick_junit::Report;
use serde_json::Value;

fn nvtest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvtest"))
        .args(args)
        .env_remove("NVTEST_REQUIRE_TARGET")
        .env_remove("NVTEST_SUITES_DIR")
        .output()
        .expect("the nvtest binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// The record schema as `nvtest schema --record` publishes it, compiled by the validator.
fn validator() -> jsonschema::Validator {
    let out = nvtest(&["schema", "--record"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let schema: Value = serde_json::from_slice(&out.stdout).expect("the record schema is JSON");
    jsonschema::validator_for(&schema).expect("the record schema is a valid JSON Schema")
}

/// Reads a record and checks it against the published schema.
fn record(path: &Path) -> Value {
    let record: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("the record is written")).unwrap();
    let validator = validator();
    let errors: Vec<String> = validator.iter_errors(&record).map(|e| format!("{} at {}", e, e.instance_path)).collect();
    assert!(errors.is_empty(), "the record does not follow its schema: {errors:#?}");
    record
}

/// Per target: (total, passed, failed, errors, skipped, expected failures) from the record.
fn record_counts(record: &Value) -> BTreeMap<String, [u64; 6]> {
    record["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let c = &t["counts"];
            let n = |k: &str| c[k].as_u64().unwrap();
            (
                t["identity"]["target"].as_str().unwrap().to_string(),
                [n("total"), n("passed"), n("failed"), n("errors"), n("skipped"), n("expected_failures")],
            )
        })
        .collect()
}

/// Per target, the same counts from the JUnit report (its testsuites carry the target
/// property; expected failures are successes whose verdict property says so).
fn junit_counts(path: &Path) -> BTreeMap<String, [u64; 6]> {
    let xml = std::fs::read_to_string(path).expect("the JUnit report is written");
    let report = Report::deserialize_from_str(&xml).expect("the JUnit report parses");
    let mut out: BTreeMap<String, [u64; 6]> = BTreeMap::new();
    for suite in &report.test_suites {
        let target = suite.properties.iter().find(|p| p.name.as_str() == "target").unwrap().value.to_string();
        let counts = out.entry(target).or_default();
        for case in &suite.test_cases {
            let verdict =
                case.properties.iter().find(|p| p.name.as_str() == "verdict").map(|p| p.value.to_string()).unwrap();
            counts[0] += 1;
            match verdict.as_str() {
                "pass" | "warning" => counts[1] += 1,
                "fail" | "unexpected-pass" => counts[2] += 1,
                "error" => counts[3] += 1,
                "skip" => counts[4] += 1,
                "expected-failure" => counts[5] += 1,
                other => panic!("unknown verdict {other}"),
            }
        }
    }
    out
}

/// Per target, the counts of the console's "TARGET: N cases: …" lines (or the report
/// line on a run of one target).
fn console_counts(console: &str) -> BTreeMap<String, [u64; 6]> {
    let mut out = BTreeMap::new();
    for line in console.lines() {
        let Some((target, rest)) = line.split_once(": ") else { continue };
        if !rest.contains(" cases: ") || target.starts_with("JUnit") || target.starts_with("JSON") {
            continue;
        }
        let numbers: Vec<u64> =
            rest.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
        // "N cases: P passed[ (W warnings)], F failed, E errors, S skipped, X expected failures"
        let (total, passed) = (numbers[0], numbers[1]);
        let rest = if rest.contains(" warnings)") { &numbers[3..] } else { &numbers[2..] };
        out.insert(target.to_string(), [total, passed, rest[0], rest[1], rest[2], rest[3]]);
    }
    out
}

/// `nvtest --suite namespaces --suite trim --json DIR/r.json --junit DIR/r.xml ARGS…`.
fn both_suites_on(dir: &Path, args: &[&str]) -> (Output, PathBuf, PathBuf) {
    let (json, junit) = (dir.join("r.json"), dir.join("r.xml"));
    let (j, x) = (path(&json), path(&junit));
    let mut all = vec!["--suite", "namespaces", "--suite", "trim", "--json", &j, "--junit", &x];
    all.extend_from_slice(args);
    (nvtest(&all), json, junit)
}

#[test]
fn two_simulated_drives_in_one_run_have_per_target_reports_equal_to_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let (out, json, junit) = both_suites_on(dir.path(), &["sim", "sim:enterprise-1.2a"]);
    let console = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{console}\n{}", text(&out.stderr));
    let record = record(&json);
    let from_console = console_counts(&console);
    assert_eq!(from_console.len(), 2, "{console}");
    assert_eq!(record_counts(&record), from_console);
    assert_eq!(junit_counts(&junit), from_console);
    assert_eq!(from_console["sim:enterprise-1.2a"][4], 6, "the 1.2a drive skips what 1.2a lacks");
    assert!(console.contains("test sim:enterprise-1.2a::trim::"), "cases are named by target: {console}");
    let report = Report::deserialize_from_str(&std::fs::read_to_string(&junit).unwrap()).unwrap();
    let names: Vec<&str> = report.test_suites.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "namespaces @ sim:enterprise-1.4",
            "trim @ sim:enterprise-1.4",
            "namespaces @ sim:enterprise-1.2a",
            "trim @ sim:enterprise-1.2a"
        ]
    );
}

#[test]
fn qemu_and_simulated_drives_run_at_once_with_findings_for_the_qemu_target_only() {
    let dir = tempfile::tempdir().unwrap();
    let expect = path(&repo().join("fixtures/qemu/expected.yaml"));
    let (out, json, junit) =
        both_suites_on(dir.path(), &["sim", "sim:enterprise-1.2a", "qemu:ns32", "--expect", &expect]);
    let console = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{console}\n{}", text(&out.stderr));
    let from_console = console_counts(&console);
    assert_eq!(from_console.len(), 3, "{console}");
    let record = record(&json);
    assert_eq!(record_counts(&record), from_console);
    assert_eq!(junit_counts(&junit), from_console);
    assert!(from_console["qemu:ns32"][5] > 0, "QEMU's known deviations are expected failures there");
    assert_eq!(from_console["sim:enterprise-1.4"][5], 0, "and apply to no simulated drive");
    assert_eq!(record["run"]["expect"][0]["sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn a_findings_file_that_does_not_say_its_targets_is_refused_on_a_run_of_several() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.yaml");
    std::fs::write(&file, "target: x\nexpected:\n  - {case: trim::a, reason: r, rule: x}\n").unwrap();
    let out = nvtest(&["--suite", "trim", "--expect", &path(&file), "sim", "sim:enterprise-1.2a"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("add `applies_to: [qemu]`"), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("running "), "nothing ran");
    let twice = nvtest(&["--suite", "trim", "sim", "sim:enterprise-1.4"]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(text(&twice.stderr).contains("is given twice"), "{}", text(&twice.stderr));
}

#[test]
fn the_record_traces_the_run_and_junit_carries_the_same_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let (json, junit) = (dir.path().join("r.json"), dir.path().join("r.xml"));
    let out = nvtest(&["--suite", "trim", "--seed", "1234", "--json", &path(&json), "--junit", &path(&junit), "sim"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("seed      1234 (replay with --seed 1234)"));
    let record = record(&json);
    let run = &record["run"];
    assert_eq!(record["schema_version"], 1);
    assert_eq!(run["seed"], 1234);
    assert_eq!(run["nvtest_version"], env!("CARGO_PKG_VERSION"));
    assert!(run["git_commit"].as_str().unwrap().len() >= 7, "{run}");
    assert!(!run["kernel"].as_str().unwrap().is_empty() && !run["host"].as_str().unwrap().is_empty());
    assert!(run["command_line"].as_array().unwrap().iter().any(|a| a == "--seed"));
    let suite = &run["suites"][0];
    assert!(suite["path"].as_str().unwrap().ends_with("suites/trim.yaml"));
    assert_eq!(suite["sha256"].as_str().unwrap().len(), 64);
    let identity = &record["targets"][0]["identity"];
    for field in ["model", "serial", "firmware", "version", "vid", "nn", "mdts_bytes", "oacs", "oncs", "tnvmcap"] {
        assert!(!identity[field].is_null(), "the identity has {field}: {identity}");
    }
    let case = &record["targets"][0]["cases"][0];
    assert!(case["rule"].as_str().unwrap().contains("NVMe"), "{case}");
    assert!(!case["log"].as_array().unwrap().is_empty(), "{case}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    let report = Report::deserialize_from_str(&xml).unwrap();
    let properties: BTreeMap<String, String> =
        report.test_suites[0].properties.iter().map(|p| (p.name.to_string(), p.value.to_string())).collect();
    assert_eq!(properties["nvtest.seed"], "1234");
    assert_eq!(properties["nvtest.git_commit"], run["git_commit"].as_str().unwrap());
    assert!(properties["nvtest.suite.1"].contains(suite["sha256"].as_str().unwrap()));
    assert_eq!(properties["nn"], identity["nn"].to_string());
}

#[test]
fn a_seed_replays_the_data_of_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = |name: &str, seed: &str| {
        let json = dir.path().join(name);
        let out = nvtest(&["--suite", "trim", "--seed", seed, "--json", &path(&json), "sim"]);
        assert_eq!(out.status.code(), Some(0));
        let record = record(&json);
        record["targets"][0]["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["seed"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    let first = seeds("a.json", "77");
    assert_eq!(first, seeds("b.json", "77"), "the same run seed writes the same data");
    assert_ne!(first, seeds("c.json", "78"));
    let distinct: std::collections::BTreeSet<_> = first.iter().collect();
    assert_eq!(distinct.len(), first.len(), "every case has data of its own");
}

#[test]
fn repeat_runs_every_case_again_and_reports_each_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (json, junit) = (dir.path().join("r.json"), dir.path().join("r.xml"));
    let out = nvtest(&[
        "--suite",
        "trim",
        "--filter",
        "deallocate",
        "--repeat",
        "3",
        "--json",
        &path(&json),
        "--junit",
        &path(&junit),
        "sim",
    ]);
    let console = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{console}");
    assert!(console.contains("pass 3 of 3"), "{console}");
    let record = record(&json);
    let cases = record["targets"][0]["cases"].as_array().unwrap();
    let per_pass = cases.iter().filter(|c| c["iteration"] == 1).count();
    assert!(per_pass > 0);
    assert_eq!(cases.len(), 3 * per_pass);
    let report = Report::deserialize_from_str(&std::fs::read_to_string(&junit).unwrap()).unwrap();
    assert!(report.test_suites[0].test_cases.iter().any(|c| c.name.as_str().ends_with(" #3")));
    assert_eq!(nvtest(&["--repeat", "0", "sim"]).status.code(), Some(2));
}

/// Starts a run that never ends by itself (`--repeat until-failure` on a compliant drive),
/// and waits until it has printed `lines` case lines.
fn endless_run(dir: &Path, extra: &[&str], lines: usize) -> Child {
    let (json, junit) = (dir.join("r.json"), dir.join("r.xml"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvtest"))
        .args(["--suite", "trim", "--repeat", "until-failure", "--json", &path(&json), "--junit", &path(&junit)])
        .args(extra)
        .arg("sim")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut seen = 0;
    let mut line = String::new();
    while seen < lines {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if line.starts_with("test ") {
            seen += 1;
        }
    }
    // Keep reading so the run never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    child
}

fn interrupted_reports(dir: &Path, why: &str) {
    let record = record(&dir.join("r.json"));
    assert!(record["interrupted"].as_str().unwrap().contains(why), "{}", record["interrupted"]);
    let cases = record["targets"][0]["cases"].as_array().unwrap();
    assert!(cases.len() > 41, "more than one pass of trim ran: {}", cases.len());
    let report = Report::deserialize_from_str(&std::fs::read_to_string(dir.join("r.xml")).unwrap()).unwrap();
    assert_eq!(report.tests, cases.len(), "the JUnit report holds the same cases");
    let properties: Vec<String> =
        report.test_suites[0].properties.iter().map(|p| format!("{}={}", p.name.as_str(), p.value.as_str())).collect();
    assert!(properties.iter().any(|p| p.starts_with("nvtest.interrupted=") && p.contains(why)), "{properties:?}");
}

#[test]
fn sigint_and_sigterm_write_the_reports_of_what_ran_and_exit_130_and_143() {
    for (signal, name, status) in [(libc::SIGINT, "SIGINT", 130), (libc::SIGTERM, "SIGTERM", 143)] {
        let dir = tempfile::tempdir().unwrap();
        let child = endless_run(dir.path(), &[], 100);
        // SAFETY: plain syscall on our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(status), "{name}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(&format!("run interrupted by {name}")), "{}", text(&out.stderr));
        interrupted_reports(dir.path(), name);
    }
}

#[test]
fn the_run_timeout_writes_the_reports_and_exits_124() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let child = endless_run(dir.path(), &["--timeout", "2s"], 1);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    assert!(started.elapsed() < Duration::from_secs(60));
    interrupted_reports(dir.path(), "--timeout");
    assert_eq!(nvtest(&["--timeout", "soon", "sim"]).status.code(), Some(2));
}

#[test]
fn a_case_past_the_case_timeout_is_an_error_and_the_next_case_runs() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = nvtest(&[
        "--suite",
        "namespaces",
        "--filter",
        "create-32-namespaces",
        "--filter",
        "identify-controller",
        "--case-timeout",
        "1ms",
        "--json",
        &path(&json),
        "sim",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let record = record(&json);
    let cases = record["targets"][0]["cases"].as_array().unwrap();
    let create = cases.iter().find(|c| c["case"] == "create-32-namespaces").unwrap();
    assert_eq!(create["verdict"], "error");
    assert!(create["reason"].as_str().unwrap().contains("ran past --case-timeout (0.0 s)"), "{create}");
    assert!(create["log"].as_array().unwrap().iter().any(|l| l.as_str().unwrap().contains("target recovered")));
}

#[test]
fn report_paths_are_checked_before_the_target_opens() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    for flag in ["--json", "--junit"] {
        let out = nvtest(&["--suite", "trim", flag, &path(&blocker.join("r")), "sim"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(text(&out.stderr).contains("cannot write the "), "{}", text(&out.stderr));
        assert!(!text(&out.stdout).contains("model"), "the target was not opened");
    }
}

#[test]
fn a_console_closed_mid_run_ends_it_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvtest"))
        .args(["--suite", "trim", "--repeat", "20", "--json", &path(&json), "sim"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // As `nvtest … | head -5`: five lines read, then the pipe closes.
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..5 {
        reader.read_line(&mut String::new()).unwrap();
    }
    drop(reader);
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the console stopped taking output"), "{err}");
    record(&json);
    // And a closed stderr: the run's own notes go nowhere, nothing panics.
    let out = Command::new(env!("CARGO_BIN_EXE_nvtest"))
        .args(["--suite", "trim", "sim", "sim:enterprise-1.2a"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn libtest_habits_a_positional_filter_a_json_list_and_suggestions() {
    let out = nvtest(&["--suite", "trim", "--list", "trim::inactive-namespace"]);
    assert_eq!(text(&out.stdout), "trim::inactive-namespace: test\n");
    let out = nvtest(&["--suite", "trim", "--list", "--format", "json", "sim", "trim::inactive"]);
    let line: Value = serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(line["case"], "inactive-namespace");
    assert_eq!(line["destructive"], true);
    let out = nvtest(&["--suite", "trim", "--filtr", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--filter"), "the nearest flag is suggested: {}", text(&out.stderr));
    let out = nvtest(&["--suite", "trim", "-q", "--test-threads", "4", "sim"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = nvtest(&["--suite", "trim", "--show-output", "--filter", "inactive-namespace", "sim"]);
    assert!(text(&out.stdout).contains("---- trim::inactive-namespace log ----"), "{}", text(&out.stdout));
    let two = nvtest(&["--suite", "trim", "--list", "a", "b"]);
    assert_eq!(two.status.code(), Some(2), "two positional filters are ambiguous");
}

#[test]
fn targets_lists_profiles_and_topologies_and_suites_dir_adds_suites() {
    let out = nvtest(&["targets"]);
    let listed = text(&out.stdout);
    for name in ["sim:enterprise-1.4", "sim:enterprise-1.2a", "qemu:ns32", "qemu:dual", "/dev/nvmeN"] {
        assert!(listed.contains(name), "{listed}");
    }
    let dir = tempfile::tempdir().unwrap();
    let own = std::fs::read_to_string(repo().join("runner/tests/suites/basics.yaml")).unwrap();
    std::fs::write(dir.path().join("basics.yaml"), own).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nvtest"))
        .args(["--suite", "basics", "--suite", "trim", "--list"])
        .env("NVTEST_SUITES_DIR", dir.path())
        .output()
        .unwrap();
    let listed = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(listed.contains("basics::") && listed.contains("trim::"), "{listed}");
}
