//! A session with one device: opens the target, learns its identity, and runs cases
//! one at a time, turning each case's steps into a [`CaseOutcome`].

use std::time::Instant;

use nvme::device::Device;

use crate::steps::{self, CaseContext, Facts, StepError};
use crate::suite::ExpandedCase;
use crate::target::TargetSpec;
use crate::topology::{ExpectedFinding, ExpectedVerdict};
use crate::verdict::{CaseOutcome, Failure, Rule, Verdict};

/// Who the device under test is: printed on every report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// The target as given ("sim:enterprise-1.4", "qemu:ns32", "/dev/nvme0").
    pub target: String,
    /// Identify Controller MN, SN, FR (trimmed), and the NVMe version (VER, or VS).
    pub model: String,
    pub serial: String,
    pub firmware: String,
    pub version: String,
}

/// One open device and everything nvtest remembers about it across cases.
pub struct Session {
    /// How to open the device again if it goes away (QEMU died); `None` for devices
    /// opened elsewhere.
    spec: Option<TargetSpec>,
    device: Box<dyn Device>,
    facts: Facts,
    identity: DeviceIdentity,
    cases_run: u64,
    /// Known deviations of this target (`--expect`), keyed by `suite::case`.
    expected: Vec<ExpectedFinding>,
}

impl Session {
    /// Opens the target and reads its identity. Errors are one line, for the console.
    pub fn open(target: &TargetSpec) -> Result<Session, String> {
        let device = crate::target::open(target)?;
        let mut session = Session::with_device(target.describe(), device)?;
        session.spec = Some(target.clone());
        Ok(session)
    }

    /// A session on a device opened elsewhere (tests build their own simulated drives).
    pub fn with_device(target: String, mut device: Box<dyn Device>) -> Result<Session, String> {
        let facts = Facts::read(device.as_mut()).map_err(|e| format!("{target}: {e}"))?;
        let identity = DeviceIdentity {
            target,
            model: facts.identify.model().to_string(),
            serial: facts.identify.serial().to_string(),
            firmware: facts.identify.firmware().to_string(),
            version: facts.version.to_string(),
        };
        Ok(Session { spec: None, device, facts, identity, cases_run: 0, expected: Vec::new() })
    }

    pub fn identity(&self) -> &DeviceIdentity {
        &self.identity
    }

    pub fn facts(&self) -> &Facts {
        &self.facts
    }

    /// Known deviations of this target (`--expect FILE`): a listed case that fails as
    /// listed is an expected failure; one that passes is an unexpected pass (a failure of
    /// the run, so the list stays honest). Findings for other targets are ignored.
    pub fn expect_findings(&mut self, findings: Vec<ExpectedFinding>) {
        self.expected = findings.into_iter().filter(|f| f.applies_to(&self.identity.target)).collect();
    }

    fn apply_expected(&self, case: &ExpandedCase, verdict: Verdict) -> Verdict {
        let key = format!("{}::{}", case.suite, case.name);
        let Some(finding) = self.expected.iter().find(|f| f.case == key) else {
            return verdict;
        };
        let reason = finding.reason.clone();
        match (verdict, finding.verdict) {
            (Verdict::Fail(failure), ExpectedVerdict::Fail) => Verdict::ExpectedFailure { failure, reason },
            (Verdict::Error(message), ExpectedVerdict::Error) => Verdict::ExpectedFailure {
                failure: Failure {
                    rule: parse_rule(&finding.rule),
                    sent: String::new(),
                    observed: message,
                    expected: "an answer from the controller".into(),
                },
                reason,
            },
            (Verdict::Pass, _) => Verdict::UnexpectedPass { reason },
            (other, _) => other,
        }
    }

    /// Runs one expanded case: requirements, then its steps; never panics on device answers.
    pub fn run_case(&mut self, case: &ExpandedCase) -> CaseOutcome {
        let start = Instant::now();
        if let Some(reason) = case.requires.iter().find_map(|r| self.facts.missing(r)) {
            return CaseOutcome { verdict: Verdict::Skipped(reason), log: Vec::new(), duration: start.elapsed() };
        }
        self.cases_run += 1;
        let seed = seed_for(&case.suite, &case.name, self.cases_run);
        let mut ctx = CaseContext::new(self.device.as_mut(), &self.facts, parse_rule(&case.rule), seed);
        let mut verdict = Verdict::Pass;
        for (n, step) in case.steps.iter().enumerate() {
            if let Err(e) = steps::run_step(&mut ctx, step) {
                verdict = match e {
                    StepError::Fail(f) => Verdict::Fail(f),
                    StepError::Skip(reason) => Verdict::Skipped(reason),
                    StepError::Error(msg) => Verdict::Error(format!("step {} ({}): {msg}", n + 1, step_name(step))),
                };
                break;
            }
        }
        let mut log = ctx.log;
        if !matches!(verdict, Verdict::Pass | Verdict::Skipped(_)) {
            log.extend(self.device.take_diagnostics().into_iter().map(|line| format!("target: {line}")));
        } else {
            self.device.take_diagnostics();
        }
        if let Verdict::Error(_) = verdict {
            // The case may have left the controller mid-command: start the next one clean.
            match self.device.recover() {
                Ok(()) => {
                    log.push("target recovered after the error (a controller reset where nvtest drives it)".into())
                }
                Err(e) => {
                    log.push(format!("controller reset after the error failed: {e}"));
                    log.push(self.reopen());
                }
            }
        }
        let verdict = match verdict {
            Verdict::Fail(failure) if case.advisory => Verdict::Warning(failure),
            other => self.apply_expected(case, other),
        };
        CaseOutcome { verdict, log, duration: start.elapsed() }
    }
}

impl Session {
    /// Opens the target again after it went away (QEMU died under a case), so one lost
    /// device does not turn every later case into an error. Says what happened.
    fn reopen(&mut self) -> String {
        let Some(spec) = self.spec.clone() else {
            return "the device cannot be reopened: it was not opened from a target".into();
        };
        let reopened = crate::target::open(&spec).and_then(|mut device| {
            let facts = Facts::read(device.as_mut())?;
            Ok((device, facts))
        });
        match reopened {
            Ok((device, facts)) => {
                self.device = device;
                self.facts = facts;
                format!("{}: reopened for the next case", spec.describe())
            }
            Err(e) => format!("{}: reopening failed: {e}", spec.describe()),
        }
    }
}

/// Splits a suite's rule text "SECTION: RULE" at the first ": ".
pub fn parse_rule(text: &str) -> Rule {
    match text.split_once(": ") {
        Some((section, rule)) => Rule { section: section.trim().to_string(), text: rule.trim().to_string() },
        None => Rule { section: String::new(), text: text.trim().to_string() },
    }
}

/// The YAML name of a step, for messages.
fn step_name(step: &crate::suite::model::Step) -> String {
    serde_json::to_value(step)
        .ok()
        .and_then(|v| match v {
            serde_json::Value::Object(m) => m.keys().next().cloned(),
            serde_json::Value::String(s) => Some(s),
            _ => None,
        })
        .unwrap_or_else(|| "step".into())
}

/// A seed that differs per case and per run, so data from an earlier case or run is never
/// taken for this one's.
fn seed_for(suite: &str, case: &str, n: u64) -> u64 {
    let clock =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let mut h = xxhash_rust::xxh3::xxh3_64(format!("{suite}::{case}").as_bytes());
    h ^= clock.rotate_left(17) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_split_into_section_and_text() {
        let r = parse_rule("NVMe 1.4 §5.23 Format NVM: the namespace is formatted");
        assert_eq!(r.section, "NVMe 1.4 §5.23 Format NVM");
        assert_eq!(r.text, "the namespace is formatted");
    }
}
