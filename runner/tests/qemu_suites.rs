//! The `namespaces`, `trim`, `erase` and `firmware` suites against QEMU's NVMe controller, through the
//! library as the binary runs them: `qemu:ns32`, `qemu:dual`, and `qemu:metadata`, whose
//! namespaces all carry metadata (extended LBAs and separate buffers).
//!
//! Every case that does not pass must be either skipped (with its reason) or listed for
//! that target in `fixtures/qemu/expected.yaml`, and every listed case must really fail
//! (with the verdict Fail, not Error): CI stays green and honest. QEMU must be installed;
//! where it is missing these tests fail with the install hint, never skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nvtest::exec::Session;
use nvtest::suite::load_file;
use nvtest::targets::expected::{load_expected, ExpectedFinding, ExpectedVerdict};
use nvtest::targets::TargetSpec;
use nvtest::verdict::Verdict;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn require_qemu() {
    let binary = Path::new("qemu-system-x86_64");
    nvme::transport::qemu::require_binary(binary).unwrap_or_else(|e| panic!("these tests need QEMU: {e}"));
}

/// The suites [`check`] runs.
const SUITES: [&str; 5] = ["namespaces", "trim", "erase", "firmware", "dual-port"];

/// What each case concluded, by `suite::case`.
fn run_suites(target: &str) -> BTreeMap<String, Verdict> {
    require_qemu();
    let spec = TargetSpec::parse(target).unwrap();
    let mut session = Session::open(&spec).unwrap_or_else(|e| panic!("{e}"));
    let mut verdicts = BTreeMap::new();
    for suite in SUITES {
        let path = repo().join("suites").join(format!("{suite}.yaml"));
        let loaded = load_file(&path, Some(suite)).unwrap_or_else(|e| panic!("{e}"));
        for case in &loaded.cases {
            let name = format!("{}::{}", case.suite, case.name);
            let outcome = session.run_case(case, nvtest::exec::fresh_run_seed());
            match &outcome.verdict {
                Verdict::Pass => println!("{target} {name}: pass"),
                v => {
                    println!("{target} {name}: {v:?}");
                    for line in &outcome.log {
                        println!("    {line}");
                    }
                }
            }
            verdicts.insert(name, outcome.verdict);
        }
    }
    verdicts
}

fn expected_for(target: &str) -> Vec<ExpectedFinding> {
    let path = repo().join("fixtures/qemu/expected.yaml");
    let all = load_expected(&path).unwrap_or_else(|e| panic!("{e}"));
    all.into_iter().filter(|f| f.applies_to(target)).collect()
}

/// Every non-pass is a skip or an expected failure; every expected failure fails.
fn check(target: &str) {
    let verdicts = run_suites(target);
    let expected = expected_for(target);
    let mut problems = Vec::new();
    for (name, verdict) in &verdicts {
        let listed = expected.iter().find(|f| &f.case == name);
        match (verdict, listed) {
            // A warning (an advisory case) does not fail the run: not listed, never expected.
            (Verdict::Pass, None) | (Verdict::Skipped(_), None) | (Verdict::Warning(_), None) => {}
            // A deviation of QEMU's the topology gives the case no namespaces to show.
            (Verdict::Skipped(_), Some(_)) => {}
            (Verdict::Fail(_), Some(f)) if f.verdict == ExpectedVerdict::Fail => {}
            (Verdict::Error(_), Some(f)) if f.verdict == ExpectedVerdict::Error => {}
            (Verdict::Pass, Some(f)) => {
                problems.push(format!("{name}: passes, but expected.yaml lists it ({})", f.reason))
            }
            (v, Some(f)) => problems.push(format!("{name}: expected.yaml says {:?}, but {v:?}", f.verdict)),
            (v, None) => problems.push(format!("{name}: {v:?}, not listed in expected.yaml")),
        }
    }
    // Entries of the suites run here; power-fail's are checked by its own test below.
    let ran_suite = |case: &str| SUITES.iter().any(|s| case.starts_with(&format!("{s}::")));
    for f in expected.iter().filter(|f| ran_suite(&f.case)) {
        if !verdicts.contains_key(&f.case) {
            problems.push(format!("{}: listed in expected.yaml but no such case ran", f.case));
        }
    }
    assert!(problems.is_empty(), "{target}:\n{}", problems.join("\n"));
}

#[test]
fn suites_on_qemu_ns32() {
    check("qemu:ns32");
}

#[test]
fn suites_on_qemu_dual() {
    check("qemu:dual");
}

/// Namespaces with metadata, which nvtest cannot re-create on QEMU: nothing fails for
/// carrying metadata, and the I/O cases run on them (they failed, blaming the drive, when
/// nvtest moved data only).
#[test]
fn suites_on_qemu_metadata() {
    check("qemu:metadata");
    let verdicts = run_suites("qemu:metadata");
    let passed = verdicts.iter().filter(|(_, v)| matches!(v, Verdict::Pass)).count();
    for case in ["trim::deallocated-reads/blocks=8,lbads=4096", "namespaces::transfer-follows-format/lbads=512"] {
        assert_eq!(verdicts.get(case), Some(&Verdict::Pass), "{case}");
    }
    assert!(passed >= 60, "only {passed} cases passed on qemu:metadata");
}

/// A drive whose namespaces are all detached: the LBA formats it supports are learnt from
/// the allocated namespaces (CNS 10h, 11h), so no case is skipped for a format the drive
/// offers; what the cases lack is an active namespace, and their skips say so.
#[test]
fn a_drive_with_no_active_namespace_is_skipped_for_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.yaml");
    std::fs::write(
        &path,
        "name: none\nsubsystems:\n  - {id: subsys0, nqn: nvtest-none}\ncontrollers:\n  - {id: nvme0, serial: NVTQNONE0001, \
         subsystem: subsys0}\nnamespaces:\n  - {nsid: 1, controller: nvme0, lbads: 512, blocks: 65536, detached: true}\n  \
         - {nsid: 2, controller: nvme0, lbads: 4096, blocks: 65536, detached: true}\n",
    )
    .unwrap();
    let verdicts = run_suites(&format!("qemu:{}", path.display()));
    let deviations = load_expected(repo().join("fixtures/qemu/expected.yaml")).unwrap();
    for (name, verdict) in &verdicts {
        match verdict {
            Verdict::Pass => {}
            // A QEMU deviation the findings list (for some topology).
            Verdict::Fail(_) if deviations.iter().any(|f| &f.case == name) => {}
            Verdict::Skipped(reason) => {
                assert!(!reason.contains("no LBA format with"), "{name}: the drive offers the format: {reason}");
                assert!(
                    reason.contains("active namespaces: none")
                        || reason.contains("active namespaces and no Namespace Management")
                        || reason.contains("is empty")
                        || reason.contains("OACS bit")
                        || reason.contains("SANICAP")
                        || reason.contains("the target brought up 1 (the controller nvtest opened)")
                        || reason.contains("bit 3 (Asymmetric Namespace Access Reporting) is clear"),
                    "{name}: {reason}"
                );
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// A drive whose namespaces are small (8192 blocks, where the suites would create 65536):
/// a case takes an existing namespace that holds every block its steps address, so the
/// cases run rather than skip for a size they do not need; none errors, and every failure
/// is a QEMU deviation the findings list.
#[test]
fn small_namespaces_run_every_case_that_fits_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.yaml");
    let mut text = String::from(
        "name: small\nsubsystems:\n  - {id: subsys0, nqn: nvtest-small}\ncontrollers:\n  - {id: nvme0, serial: NVTQSMALL001, \
         subsystem: subsys0}\nnamespaces:\n",
    );
    for (nsid, lbads) in [(1, 512), (2, 4096), (3, 512), (4, 4096)] {
        text.push_str(&format!("  - {{nsid: {nsid}, controller: nvme0, lbads: {lbads}, blocks: 8192}}\n"));
    }
    std::fs::write(&path, text).unwrap();
    let verdicts = run_suites(&format!("qemu:{}", path.display()));
    let deviations = load_expected(repo().join("fixtures/qemu/expected.yaml")).unwrap();
    let mut passed = 0;
    for (name, verdict) in &verdicts {
        match verdict {
            Verdict::Pass => passed += 1,
            Verdict::Fail(_) if deviations.iter().any(|f| &f.case == name) => {}
            // An advisory case's finding (these namespaces have no identifiers).
            Verdict::Warning(_) => {}
            Verdict::Skipped(reason) => {
                assert!(
                    !reason.contains("at least 65536 blocks"),
                    "{name}: skipped for a size its steps do not need: {reason}"
                )
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    assert!(passed >= 65, "only {passed} cases passed on small namespaces");
}

/// QEMU's power is cut by killing it and it starts again on the same images: the
/// power-fail suite runs to a verdict with QEMU's write cache on (`ns32`) and off
/// (`nocache`), every case passes or is an expected finding (D6, the SMART counters), and
/// the log shows which survival rule each topology was judged by.
#[test]
fn power_fail_runs_on_qemu_with_the_write_cache_on_and_off() {
    require_qemu();
    let path = repo().join("suites").join("power-fail.yaml");
    let loaded = load_file(&path, Some("power-fail")).unwrap_or_else(|e| panic!("{e}"));
    for (target, durable) in
        [("qemu:ns32", "durable: what FUA and Flush made durable"), ("qemu:nocache", "durable: every completed write")]
    {
        let spec = TargetSpec::parse(target).unwrap();
        let mut session = Session::open(&spec).unwrap_or_else(|e| panic!("{e}"));
        let expected = expected_for(target);
        for case in &loaded.cases {
            let name = format!("{}::{}", case.suite, case.name);
            let outcome = session.run_case(case, nvtest::exec::fresh_run_seed());
            let listed = expected.iter().any(|f| f.case == name);
            match (&outcome.verdict, listed) {
                (Verdict::Pass, false) | (Verdict::Fail(_), true) => {}
                (v, _) => {
                    panic!("{target} {name}: {v:?} (listed in expected.yaml: {listed})\n{}", outcome.log.join("\n"))
                }
            }
            if case.name == "cut-under-load" {
                assert!(outcome.log.iter().any(|l| l.contains(durable)), "{target}: {:?}", outcome.log);
            }
        }
    }
}
