//! JUnit XML for CI (quick-junit). With claims, every testsuite of a target carries
//! each promise's verdict (`claim.KEY`), and a case that judged a claim says what it
//! concluded (`claim.KEY` on the testcase).
//!
//! One `<testsuite>` per (target, suite) — named as the
//! suite on a run of one target, `SUITE @ TARGET` on a run of several — with the run's
//! metadata (nvtest version and commit, command line, host, kernel, seed, input files and
//! their SHA-256), the device identity, the suite's spec references and its counts
//! (warnings and expected failures too) as properties, and one `<testcase>` per case that
//! ran (classname = the testsuite's name, name = case, `CASE #N` for pass N of
//! `--repeat`). Fail and unexpected pass are `<failure>` (type = the rule's spec
//! section), error verdicts `<error>`, skips `<skipped>` with the reason. An expected
//! failure and a warning are successes that show what they are: a `verdict` property
//! on the testcase and the failure in its system-err. Every case's log is its
//! system-out. A run cut short says so in a property of every testsuite. Written as
//! [`super::output`] says: a regular file atomically, a device or FIFO in place.

use std::path::Path;
use std::time::UNIX_EPOCH;

use chrono::{DateTime, FixedOffset};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::{CaseResult, RunRecord, RunResults};
use crate::verdict::{CaseOutcome, Verdict};

/// Builds the report; its counts equal [`RunRecord::counts`].
pub fn report(run: &RunRecord) -> Report {
    let mut report = Report::new("nvtest");
    let first = run.targets.first();
    let started = first.and_then(timestamp);
    if let Some(started) = started {
        report.set_timestamp(started);
    }
    report.set_time(run.targets.iter().map(RunResults::duration).sum());
    let several = run.targets.len() > 1;
    let repeated = run.repeated();
    for results in &run.targets {
        for info in &results.suites {
            let name = if several { format!("{} @ {}", info.name, results.identity.target) } else { info.name.clone() };
            let mut suite = TestSuite::new(name.as_str());
            if let Some(started) = timestamp(results) {
                suite.set_timestamp(started);
            }
            suite.add_properties(run.meta.properties().into_iter().map(|(k, v)| Property::new(k, v)));
            if let Some(why) = &run.interrupted {
                suite.add_property(Property::new("nvtest.interrupted", why.as_str()));
            }
            suite.add_properties(results.identity.properties().into_iter().map(|(k, v)| Property::new(k, v)));
            suite.add_properties([
                Property::new("title", info.title.as_str()),
                Property::new("destructive", info.destructive.to_string()),
            ]);
            for (i, spec) in info.spec.iter().enumerate() {
                suite.add_property(Property::new(format!("spec.{}", i + 1), spec.as_str()));
            }
            if let Some(claims) = &results.claims {
                suite.add_properties(claims_properties(claims).into_iter().map(|(k, v)| Property::new(k, v)));
            }
            let cases: Vec<&CaseResult> = results.cases_of(&info.name).collect();
            let warnings = cases.iter().filter(|c| matches!(c.outcome.verdict, Verdict::Warning(_))).count();
            let expected =
                cases.iter().filter(|c| matches!(c.outcome.verdict, Verdict::ExpectedFailure { .. })).count();
            suite.add_properties([
                Property::new("warnings", warnings.to_string()),
                Property::new("expected_failures", expected.to_string()),
            ]);
            suite.set_time(cases.iter().map(|c| c.outcome.duration).sum());
            suite.add_test_cases(cases.into_iter().map(|c| test_case(c, &name, repeated)));
            report.add_test_suite(suite);
        }
    }
    report
}

/// Writes the report to `path` as [`super::output`] says (a regular file atomically, its
/// directory created; a device or FIFO in place; `-` standard output). The error is one line.
pub fn write(path: &Path, run: &RunRecord) -> Result<(), String> {
    let xml = report(run).to_string().map_err(|e| format!("cannot serialize the JUnit report: {e}"))?;
    super::output::write(path, "JUnit report", xml.as_bytes())
}

fn timestamp(results: &RunResults) -> Option<DateTime<FixedOffset>> {
    let since_epoch = results.started.duration_since(UNIX_EPOCH).ok()?;
    let seconds = i64::try_from(since_epoch.as_secs()).ok()?;
    DateTime::from_timestamp(seconds, since_epoch.subsec_nanos()).map(|t| t.fixed_offset())
}

fn test_case(result: &CaseResult, classname: &str, repeated: bool) -> TestCase {
    let outcome = &result.outcome;
    let status = match &outcome.verdict {
        Verdict::Pass | Verdict::Warning(_) | Verdict::ExpectedFailure { .. } => TestCaseStatus::success(),
        Verdict::Fail(failure) => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status
                .set_message(format!(
                    "{}: observed {}; expected {}",
                    failure.rule.text, failure.observed, failure.expected
                ))
                .set_type(failure.rule.section.as_str())
                .set_description(failure.to_string());
            status
        }
        Verdict::UnexpectedPass { reason } => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status
                .set_message(format!("passed, but this target's expected findings list it as failing: {reason}"))
                .set_type("unexpected pass");
            status
        }
        Verdict::Error(message) => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
            status.set_message(message.as_str()).set_type("nvtest error");
            status
        }
        Verdict::Skipped(reason) => {
            let mut status = TestCaseStatus::skipped();
            status.set_message(reason.as_str());
            status
        }
    };
    let mut case = TestCase::new(result.name(repeated), status);
    case.set_classname(classname).set_time(outcome.duration);
    case.add_property(Property::new("verdict", super::json::VerdictName::of(&outcome.verdict).as_str()));
    if result.seed != 0 {
        case.add_property(Property::new("seed", result.seed.to_string()));
    }
    for figure in outcome.figures.iter().flat_map(|j| j.figures()) {
        case.add_property(Property::new(format!("figure.{}", figure.name), figure.value_text()));
    }
    for j in &outcome.claims {
        let verdict = if j.met { "met" } else { "breached" };
        case.add_property(Property::new(format!("claim.{}", j.key), format!("{verdict}: {}", j.observed)));
    }
    if let Some(err) = system_err(outcome) {
        case.set_system_err(err);
    }
    let out = system_out(outcome);
    if !out.is_empty() {
        case.set_system_out(out);
    }
    case
}

/// The target's claims judged whole, as properties: `claims.file`, `claims.warning.N`,
/// and `claim.KEY` = `VERDICT: FILE:LINE:COL (what): observed` per promise.
fn claims_properties(summary: &crate::claims::verdicts::Summary) -> Vec<(String, String)> {
    let mut out = vec![("claims.file".to_string(), summary.origin.clone())];
    for (i, w) in summary.warnings.iter().enumerate() {
        out.push((format!("claims.warning.{}", i + 1), w.clone()));
    }
    for v in &summary.verdicts {
        let detail = match &v.reason {
            Some(reason) => reason.clone(),
            None => v.observed.join("; "),
        };
        out.push((
            format!("claim.{}", v.promise.key),
            format!("{}: {}: {detail}", v.outcome.as_str(), v.promise.citation),
        ));
    }
    out
}

/// For an expected failure or a warning (successes to JUnit): what failed, so a
/// consumer that shows system-err shows it.
fn system_err(outcome: &CaseOutcome) -> Option<String> {
    match &outcome.verdict {
        Verdict::ExpectedFailure { failure, reason } => Some(format!(
            "EXPECTED FAILURE (a deviation this target is known for, counted as passed: {reason})\n{failure}\n"
        )),
        Verdict::Warning(failure) => Some(format!(
            "WARNING (counted as passed: an advisory case, where the specification may not require this, or a verdict that proves less than the case asks; the rule and expectation say which)\n{failure}\n"
        )),
        _ => None,
    }
}

/// The case's log.
fn system_out(outcome: &CaseOutcome) -> String {
    let mut out = String::new();
    for line in &outcome.log {
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::DeviceIdentity;
    use crate::report::meta::RunMeta;
    use crate::report::Counts;
    use crate::suite::SuiteInfo;
    use crate::verdict::{Failure, Rule};
    use std::time::Duration;

    pub(crate) fn failure() -> Failure {
        Failure {
            rule: Rule { section: "NVMe 1.4 Figure 128".into(), text: "a range past NSZE is LBA Out of Range".into() },
            sent: "Read NSID 1 SLBA 0x10000 NLB 0".into(),
            observed: "Successful Completion".into(),
            expected: "LBA Out of Range".into(),
        }
    }

    fn results() -> RunRecord {
        let outcome = |verdict, log: &[&str]| CaseOutcome {
            figures: Vec::new(),
            claims: Vec::new(),
            verdict,
            log: log.iter().map(|l| l.to_string()).collect(),
            duration: Duration::from_millis(250),
        };
        let case = |suite: &str, case: &str, outcome| CaseResult::new(suite, case, outcome);
        let results = RunResults {
            identity: DeviceIdentity {
                target: "sim:enterprise-1.4".into(),
                model: "NVTEST SIM".into(),
                serial: "S123".into(),
                firmware: "1.0".into(),
                version: "1.4".into(),
                ..Default::default()
            },
            claims: None,
            started: UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            suites: vec![
                SuiteInfo {
                    name: "trim".into(),
                    title: "Trim".into(),
                    spec: vec!["NVMe 1.4 DSM".into()],
                    destructive: true,
                },
                SuiteInfo { name: "empty".into(), title: "E".into(), spec: vec![], destructive: false },
            ],
            cases: vec![
                case("trim", "a", outcome(Verdict::Pass, &["Write NSID 1 -> Successful Completion"])),
                case(
                    "trim",
                    "b/lbads=512",
                    outcome(Verdict::Fail(failure()), &["Read NSID 1 -> Successful Completion"]),
                ),
                case("trim", "c", outcome(Verdict::Skipped("ONCS bit 2 (Dataset Management) is 0".into()), &[])),
                case("trim", "d", outcome(Verdict::Error("transport: queue timed out".into()), &[])),
                case(
                    "trim",
                    "e",
                    outcome(Verdict::ExpectedFailure { failure: failure(), reason: "known quirk".into() }, &[]),
                ),
                case("trim", "f", outcome(Verdict::UnexpectedPass { reason: "listed as stale".into() }, &[])),
            ],
        };
        RunRecord {
            meta: RunMeta::now(vec!["nvtest".into()], 7, "1".into()),
            targets: vec![results],
            interrupted: None,
        }
    }

    #[test]
    fn counts_agree_with_the_verdicts() {
        let results = results();
        let report = report(&results);
        assert_eq!(
            results.counts(),
            Counts { passed: 1, failed: 2, errors: 1, skipped: 1, expected_failures: 1, warnings: 0 }
        );
        assert_eq!((report.tests, report.failures, report.errors, report.skipped), (6, 2, 1, 1));
        assert_eq!(report.test_suites[1].tests, 0);
    }

    #[test]
    fn a_failure_carries_its_rule_evidence_and_log() {
        let report = report(&results());
        let case = &report.test_suites[0].test_cases[1];
        assert_eq!(case.name.as_str(), "b/lbads=512");
        assert_eq!(case.classname.as_ref().map(|c| c.as_str()), Some("trim"));
        let TestCaseStatus::NonSuccess { kind, message, ty, description, .. } = &case.status else {
            panic!("not a failure: {:?}", case.status)
        };
        assert_eq!(*kind, NonSuccessKind::Failure);
        assert_eq!(ty.as_ref().map(|t| t.as_str()), Some("NVMe 1.4 Figure 128"));
        assert!(message
            .as_ref()
            .unwrap()
            .as_str()
            .contains("observed Successful Completion; expected LBA Out of Range"));
        assert!(description.as_ref().unwrap().as_str().contains("sent:     Read NSID 1 SLBA 0x10000 NLB 0"));
        assert_eq!(case.system_out.as_ref().map(|s| s.as_str()), Some("Read NSID 1 -> Successful Completion\n"));
    }

    #[test]
    fn properties_name_the_device_and_the_spec() {
        let report = report(&results());
        let properties: Vec<(&str, &str)> =
            report.test_suites[0].properties.iter().map(|p| (p.name.as_str(), p.value.as_str())).collect();
        for expected in [
            ("target", "sim:enterprise-1.4"),
            ("model", "NVTEST SIM"),
            ("serial", "S123"),
            ("firmware", "1.0"),
            ("nvme_version", "1.4"),
            ("spec.1", "NVMe 1.4 DSM"),
        ] {
            assert!(properties.contains(&expected), "{expected:?} missing from {properties:?}");
        }
    }

    #[test]
    fn the_file_is_written_whole_and_its_directory_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reports/deep/junit.xml");
        write(&path, &results()).unwrap();
        let xml = std::fs::read_to_string(&path).unwrap();
        let parsed = Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(parsed.tests, 6);
        let leftovers: Vec<_> =
            std::fs::read_dir(path.parent().unwrap()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(leftovers, [std::ffi::OsString::from("junit.xml")]);
    }

    #[test]
    fn an_unwritable_path_is_an_error_line() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let error = write(&blocker.join("junit.xml"), &results()).unwrap_err();
        assert!(error.starts_with("cannot write the JUnit report "), "{error}");
    }
}
