//! No wall-clock window in a verdict (issue 29): `nvtest --suite arbitration qemu:ns32`
//! alone gives the verdicts the arbitration cases get in the full lane run (the suites
//! scripts/test-all.sh runs on QEMU), with two busy-looping processes beside it taking
//! the CPU. The share cases measure by count within a bound: a host too slow for the
//! bound is a skip saying so, never an error, and never what decides alone vs in the lane.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Busy-looping shells, killed (and reaped) when dropped, a panic included.
struct CpuHogs(Vec<Child>);

impl CpuHogs {
    fn start(n: usize) -> CpuHogs {
        let mut hogs = CpuHogs(Vec::new());
        for _ in 0..n {
            let child = Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("sh runs");
            hogs.0.push(child);
        }
        hogs
    }
}

impl Drop for CpuHogs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs nvtest on `target` (always named: no default target) with `suites`, QEMU's
/// expected findings and a JSON record; the verdict of each case, with the failure's
/// section or the skip's reason, and each case's log.
fn run(suites: &[&str], target: &str) -> (BTreeMap<String, String>, BTreeMap<String, Vec<String>>, f64) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("record.json");
    let mut args: Vec<String> = suites.iter().flat_map(|s| ["--suite".to_string(), s.to_string()]).collect();
    let expected = repo().join("fixtures/qemu/expected.yaml");
    args.extend(["--expect".into(), expected.display().to_string()]);
    args.extend(["--json".into(), json.display().to_string(), target.into()]);
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_nvtest")).args(&args).current_dir(repo()).output().expect("nvtest runs");
    let took = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "nvtest {}:\n{stdout}\n{}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let (mut verdicts, mut logs) = (BTreeMap::new(), BTreeMap::new());
    for case in record["targets"][0]["cases"].as_array().unwrap() {
        let name = format!("{}::{}", case["suite"].as_str().unwrap(), case["case"].as_str().unwrap());
        let verdict = case["verdict"].as_str().unwrap();
        // The rule of a failure or warning; a skip's or error's reason goes to the log
        // (a skip for a slow host carries its figures, which differ run to run).
        let section = case["failure"]["section"].as_str().unwrap_or("");
        // An advisory case's warning is its pass: round robin shares on QEMU, whose
        // queues host threads serve, move with the load (both count as ok).
        let advisory = case["rule"].as_str().is_some_and(|r| r.contains("— advisory:"));
        let verdict = if advisory && verdict == "warning" { "pass" } else { verdict };
        let section = if verdict == "pass" { "" } else { section };
        verdicts.insert(name.clone(), format!("{verdict} {section}").trim_end().to_string());
        let mut log: Vec<String> =
            case["log"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_string()).collect();
        log.extend(case["reason"].as_str().map(|r| format!("reason: {r}")));
        logs.insert(name, log);
    }
    (verdicts, logs, took)
}

#[test]
fn arbitration_alone_on_a_busy_host_gets_the_verdicts_of_the_full_lane() {
    nvme::transport::qemu::require_binary(Path::new("qemu-system-x86_64"))
        .unwrap_or_else(|e| panic!("this test needs QEMU: {e}"));
    let _hogs = CpuHogs::start(2);
    let (alone, logs, took) = run(&["arbitration"], "qemu:ns32");
    println!("arbitration alone on qemu:ns32 beside 2 CPU hogs: {took:.1} s");
    for (name, verdict) in &alone {
        println!("  {name}: {verdict}");
        for line in logs[name]
            .iter()
            .filter(|l| l.contains("commands counted") || l.starts_with("shares of ") || l.starts_with("reason: "))
        {
            println!("    {line}");
        }
        assert!(!verdict.starts_with("error") && !verdict.starts_with("fail"), "{name}: {verdict}");
    }
    let lane = ["namespaces", "trim", "qos", "arbitration", "claims", "power-fail"];
    let (full, _, took) = run(&lane, "qemu:ns32");
    println!("the lane ({}) on qemu:ns32 beside 2 CPU hogs: {took:.1} s", lane.join(", "));
    let in_lane: BTreeMap<&String, &String> = full.iter().filter(|(n, _)| n.starts_with("arbitration::")).collect();
    let alone: BTreeMap<&String, &String> = alone.iter().collect();
    assert_eq!(alone, in_lane, "arbitration alone (left) and in the lane (right)");
}
