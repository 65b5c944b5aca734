//! JUnit XML for CI (quick-junit): one `<testsuite>` per suite with the device identity and
//! the suite's spec references as properties, one `<testcase>` per case that ran
//! (classname = suite, name = case). Fail and unexpected pass are `<failure>` (type = the
//! rule's spec section), error verdicts `<error>`, skips `<skipped>` with the reason; an
//! expected failure is a success whose system-out says so. Every case's log is its
//! system-out. Written atomically: a temporary file beside the target, then a rename.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use chrono::{DateTime, FixedOffset};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::{CaseResult, RunResults};
use crate::verdict::{CaseOutcome, Verdict};

/// Builds the report; its counts equal [`RunResults::counts`].
pub fn report(results: &RunResults) -> Report {
    let mut report = Report::new("nvtest");
    let started = timestamp(results);
    if let Some(started) = started {
        report.set_timestamp(started);
    }
    report.set_time(results.duration());
    for info in &results.suites {
        let mut suite = TestSuite::new(info.name.as_str());
        if let Some(started) = started {
            suite.set_timestamp(started);
        }
        let identity = &results.identity;
        suite.add_properties([
            Property::new("target", identity.target.as_str()),
            Property::new("model", identity.model.as_str()),
            Property::new("serial", identity.serial.as_str()),
            Property::new("firmware", identity.firmware.as_str()),
            Property::new("nvme_version", identity.version.as_str()),
            Property::new("title", info.title.as_str()),
            Property::new("destructive", info.destructive.to_string()),
        ]);
        for (i, spec) in info.spec.iter().enumerate() {
            suite.add_property(Property::new(format!("spec.{}", i + 1), spec.as_str()));
        }
        let cases: Vec<&CaseResult> = results.cases_of(&info.name).collect();
        suite.set_time(cases.iter().map(|c| c.outcome.duration).sum());
        suite.add_test_cases(cases.into_iter().map(test_case));
        report.add_test_suite(suite);
    }
    report
}

/// Writes the report to `path`, creating its directory; atomically, so a reader never
/// sees half a file. The error is one line.
pub fn write(path: &Path, results: &RunResults) -> Result<(), String> {
    let xml = report(results).to_string().map_err(|e| format!("cannot serialize the JUnit report: {e}"))?;
    write_atomically(path, xml.as_bytes()).map_err(|e| format!("cannot write the JUnit report {}: {e}", path.display()))
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let file_name = path.file_name().ok_or_else(|| std::io::Error::other("the path names no file"))?;
    let temp = dir.join(format!(".{}.{}.tmp", file_name.to_string_lossy(), std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

fn timestamp(results: &RunResults) -> Option<DateTime<FixedOffset>> {
    let since_epoch = results.started.duration_since(UNIX_EPOCH).ok()?;
    let seconds = i64::try_from(since_epoch.as_secs()).ok()?;
    DateTime::from_timestamp(seconds, since_epoch.subsec_nanos()).map(|t| t.fixed_offset())
}

fn test_case(result: &CaseResult) -> TestCase {
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
    let mut case = TestCase::new(result.case.as_str(), status);
    case.set_classname(result.suite.as_str()).set_time(outcome.duration);
    let out = system_out(outcome);
    if !out.is_empty() {
        case.set_system_out(out);
    }
    case
}

/// The case's log, preceded for an expected failure by what failed and why it is expected.
fn system_out(outcome: &CaseOutcome) -> String {
    let mut out = String::new();
    if let Verdict::ExpectedFailure { failure, reason } = &outcome.verdict {
        out.push_str(&format!("expected failure ({reason})\n{failure}\n"));
    }
    if let Verdict::Warning(failure) = &outcome.verdict {
        out.push_str(&format!("warning (the specification may not require this)\n{failure}\n"));
    }
    for line in &outcome.log {
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::DeviceIdentity;
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

    fn results() -> RunResults {
        let outcome = |verdict, log: &[&str]| CaseOutcome {
            verdict,
            log: log.iter().map(|l| l.to_string()).collect(),
            duration: Duration::from_millis(250),
        };
        let case = |suite: &str, case: &str, outcome| CaseResult { suite: suite.into(), case: case.into(), outcome };
        RunResults {
            identity: DeviceIdentity {
                target: "sim:enterprise-1.4".into(),
                model: "NVTEST SIM".into(),
                serial: "S123".into(),
                firmware: "1.0".into(),
                version: "1.4".into(),
            },
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
        }
    }

    #[test]
    fn counts_agree_with_the_verdicts() {
        let results = results();
        let report = report(&results);
        assert_eq!(results.counts(), Counts { passed: 1, failed: 2, errors: 1, skipped: 1, expected_failures: 1 });
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
