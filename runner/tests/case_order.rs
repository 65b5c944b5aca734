//! A verdict does not depend on the cases run before it: every case of every suite in
//! `suites/` gets the same verdict run alone (a fresh session, as `--exact` runs it) as in
//! the full run, on both simulated drives and on QEMU (`qemu:ns32`), whose namespaces
//! nvtest cannot re-create (a case that reformats or detaches one leaves the next case to
//! restore it); on `qemu:metadata` for the namespaces and trim suites. Each QEMU session
//! is a QEMU of its own, gone when the session is dropped: the QEMU test checks that none
//! is left running and no file of theirs is left in /dev/shm.

use std::path::{Path, PathBuf};
use std::time::Instant;

use nvtest::exec::Session;
use nvtest::suite::{load_file, ExpandedCase};
use nvtest::targets::expected::load_expected;
use nvtest::targets::TargetSpec;
use nvtest::verdict::Verdict;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every suite in `suites/`, in the order of the main lane (scripts/test-all.sh) and then
/// the others.
const EVERY_SUITE: [&str; 10] =
    ["namespaces", "trim", "qos", "arbitration", "claims", "power-fail", "erase", "firmware", "dual-port", "hot-plug"];

#[test]
fn every_suite_is_listed() {
    let mut found: Vec<String> = std::fs::read_dir(repo().join("suites"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".yaml").map(str::to_owned))
        .collect();
    found.sort();
    let mut listed: Vec<String> = EVERY_SUITE.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(found, listed);
}

fn cases(suites: &[&str]) -> Vec<ExpandedCase> {
    suites
        .iter()
        .flat_map(|name| {
            let path = repo().join("suites").join(format!("{name}.yaml"));
            load_file(&path, Some(name)).unwrap_or_else(|e| panic!("{e}")).cases
        })
        .collect()
}

fn open(target: &str) -> Session {
    let spec = TargetSpec::parse(target).unwrap();
    let mut session = Session::open(&spec).unwrap_or_else(|e| panic!("{target}: {e}"));
    if target.starts_with("qemu") {
        let findings = load_expected(repo().join("fixtures/qemu/expected.yaml")).unwrap();
        session.expect_findings(findings);
    }
    session
}

/// The verdict's kind and, for a failure, the rule: what must not depend on order.
///
/// An advisory case's warning counts as its pass: what it measures (round robin shares on
/// QEMU, whose queues are served by host threads) moves with the host's load, not with
/// the cases run before, and a warning is counted as ok in every report.
fn kind(verdict: &Verdict, advisory: bool) -> String {
    match verdict {
        Verdict::Pass => "pass".into(),
        Verdict::Warning(_) if advisory => "pass".into(),
        Verdict::Fail(f) => format!("fail ({})", f.rule.section),
        Verdict::Skipped(reason) => format!("skipped ({reason})"),
        Verdict::Error(e) => format!("error ({e})"),
        Verdict::Warning(f) => format!("warning ({})", f.rule.section),
        Verdict::ExpectedFailure { failure, .. } => format!("expected failure ({})", failure.rule.section),
        Verdict::UnexpectedPass { .. } => "unexpected pass".into(),
    }
}

fn same_alone_as_in_the_full_run(target: &str, suites: &[&str]) {
    let cases = cases(suites);
    let started = Instant::now();
    let mut full = open(target);
    let in_order: Vec<String> =
        cases.iter().map(|c| kind(&full.run_case(c, nvtest::exec::fresh_run_seed()).verdict, c.advisory)).collect();
    drop(full);
    let full_run = started.elapsed();
    let mut differ = Vec::new();
    for (case, ordered) in cases.iter().zip(&in_order) {
        let alone = kind(&open(target).run_case(case, nvtest::exec::fresh_run_seed()).verdict, case.advisory);
        if &alone != ordered {
            differ.push(format!("{}::{}: in the full run {ordered}; alone {alone}", case.suite, case.name));
        }
    }
    let mut tally = std::collections::BTreeMap::<&str, usize>::new();
    for verdict in &in_order {
        *tally.entry(verdict.split(" (").next().unwrap_or(verdict)).or_default() += 1;
    }
    println!(
        "{target}: {} cases of {}: {:.1} s in order, {:.1} s alone; {tally:?}",
        cases.len(),
        suites.join(", "),
        full_run.as_secs_f64(),
        (started.elapsed() - full_run).as_secs_f64()
    );
    for (case, verdict) in cases.iter().zip(&in_order).filter(|(c, _)| c.suite == "arbitration") {
        println!("  {}::{}: {verdict}", case.suite, case.name);
    }
    assert!(differ.is_empty(), "{target}: {} cases depend on the order:\n{}", differ.len(), differ.join("\n"));
}

#[test]
fn every_case_gets_the_same_verdict_alone_on_the_simulated_drive() {
    same_alone_as_in_the_full_run("sim:enterprise-1.4", &EVERY_SUITE);
    same_alone_as_in_the_full_run("sim:enterprise-1.2a", &EVERY_SUITE);
}

#[test]
fn every_case_gets_the_same_verdict_alone_on_qemu() {
    nvme::transport::qemu::require_binary(Path::new("qemu-system-x86_64"))
        .unwrap_or_else(|e| panic!("this test needs QEMU: {e}"));
    same_alone_as_in_the_full_run("qemu:ns32", &EVERY_SUITE);
    // Its namespaces have metadata and two data sizes: a case that formats one to
    // another size leaves too few of the first for later cases, unless it is restored.
    same_alone_as_in_the_full_run("qemu:metadata", &["namespaces", "trim"]);
    let left = our_shm_files();
    assert!(left.is_empty(), "files left in /dev/shm by the sessions: {left:?}");
    let ours = our_qemus();
    assert!(ours.is_empty(), "QEMU processes of this test still running: {ours:?}");
}

/// This process's files in /dev/shm (QEMU's guest RAM is named `nvtest-qemu-<pid>-…`).
fn our_shm_files() -> Vec<String> {
    let ours = format!("nvtest-qemu-{}-", std::process::id());
    std::fs::read_dir("/dev/shm")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| n.starts_with(&ours)).collect())
        .unwrap_or_default()
}

/// QEMU processes whose parent is this test process.
fn our_qemus() -> Vec<String> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid = e.ok()?.file_name().into_string().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
        let (head, rest) = stat.rsplit_once(')')?;
        let ppid = rest.split_whitespace().nth(1)?;
        (head.contains("qemu") && ppid == me).then(|| format!("{pid} {head})"))
    })
    .collect()
}
