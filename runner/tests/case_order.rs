//! A verdict does not depend on the cases run before it: every case of both suites gets
//! the same verdict run alone (a fresh session, as `--exact` runs it) as in the full run,
//! on the simulated drive and on QEMU, whose namespaces nvtest cannot re-create (a case
//! that reformats or detaches one leaves the next case to restore it).

use std::path::{Path, PathBuf};

use nvtest::exec::Session;
use nvtest::suite::{load_file, ExpandedCase};
use nvtest::targets::expected::load_expected;
use nvtest::targets::TargetSpec;
use nvtest::verdict::Verdict;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn cases() -> Vec<ExpandedCase> {
    ["namespaces", "trim"]
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
fn kind(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Pass => "pass".into(),
        Verdict::Fail(f) => format!("fail ({})", f.rule.section),
        Verdict::Skipped(reason) => format!("skipped ({reason})"),
        Verdict::Error(e) => format!("error ({e})"),
        Verdict::Warning(f) => format!("warning ({})", f.rule.section),
        Verdict::ExpectedFailure { failure, .. } => format!("expected failure ({})", failure.rule.section),
        Verdict::UnexpectedPass { .. } => "unexpected pass".into(),
    }
}

fn same_alone_as_in_the_full_run(target: &str) {
    let cases = cases();
    let mut full = open(target);
    let in_order: Vec<String> =
        cases.iter().map(|c| kind(&full.run_case(c, nvtest::exec::fresh_run_seed()).verdict)).collect();
    drop(full);
    let mut differ = Vec::new();
    for (case, ordered) in cases.iter().zip(&in_order) {
        let alone = kind(&open(target).run_case(case, nvtest::exec::fresh_run_seed()).verdict);
        if &alone != ordered {
            differ.push(format!("{}::{}: in the full run {ordered}; alone {alone}", case.suite, case.name));
        }
    }
    assert!(differ.is_empty(), "{target}: {} cases depend on the order:\n{}", differ.len(), differ.join("\n"));
}

#[test]
fn every_case_gets_the_same_verdict_alone_on_the_simulated_drive() {
    same_alone_as_in_the_full_run("sim:enterprise-1.4");
    same_alone_as_in_the_full_run("sim:enterprise-1.2a");
}

#[test]
fn every_case_gets_the_same_verdict_alone_on_qemu() {
    nvme::transport::qemu::require_binary(Path::new("qemu-system-x86_64"))
        .unwrap_or_else(|e| panic!("this test needs QEMU: {e}"));
    same_alone_as_in_the_full_run("qemu:ns32");
    // Its namespaces have metadata and two data sizes: a case that formats one to
    // another size leaves too few of the first for later cases, unless it is restored.
    same_alone_as_in_the_full_run("qemu:metadata");
}
