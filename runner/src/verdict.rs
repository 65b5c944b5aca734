//! Verdicts: what a case concluded about the drive, and why.
//!
//! pass · fail (the rule, its spec section, what was sent, observed vs expected) ·
//! skipped (the exact capability bit or version that is missing) · error (nvtest or the
//! transport broke, not the drive) · expected failure (a deviation listed for the target).

use std::time::Duration;

/// A rule of the specification a check enforces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Where the spec states it: "NVMe 1.4 §6.7.1.1, Figure 372".
    pub section: String,
    /// The rule in one sentence.
    pub text: String,
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.section, self.text)
    }
}

/// Why a case failed: the rule broken and the evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub rule: Rule,
    /// What was sent ("Read NSID 3 SLBA 0x800 NLB 0").
    pub sent: String,
    /// What the drive did.
    pub observed: String,
    /// What the rule requires.
    pub expected: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rule {}\n  sent:     {}\n  observed: {}\n  expected: {}",
            self.rule, self.sent, self.observed, self.expected
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail(Failure),
    /// The device lacks a requirement: the exact bit or version.
    Skipped(String),
    /// nvtest or the transport broke; says nothing about the drive.
    Error(String),
    /// A violation of a rule the specification may not require (an advisory case):
    /// reported, but does not fail the run.
    Warning(Failure),
    /// A failure the target's expected-findings file lists, with its reason.
    ExpectedFailure {
        failure: Failure,
        reason: String,
    },
    /// Passed where the expected-findings file says it should fail: reported as a failure.
    UnexpectedPass {
        reason: String,
    },
}

impl Verdict {
    /// The verdict in one line, with its evidence: "fail: rule …; sent …; observed …".
    pub fn summary(&self) -> String {
        let evidence =
            |f: &Failure| format!("rule {}; sent {}; observed {}; expected {}", f.rule, f.sent, f.observed, f.expected);
        match self {
            Verdict::Pass => "pass".to_owned(),
            Verdict::Fail(failure) => format!("fail: {}", evidence(failure)),
            Verdict::Skipped(reason) => format!("skipped: {reason}"),
            Verdict::Error(message) => format!("error: {message}"),
            Verdict::Warning(failure) => format!("warning: {}", evidence(failure)),
            Verdict::ExpectedFailure { failure, reason } => {
                format!("expected failure ({reason}): {}", evidence(failure))
            }
            Verdict::UnexpectedPass { reason } => format!("unexpected pass ({reason})"),
        }
    }

    /// Whether this verdict makes the run exit non-zero.
    pub fn is_failure(&self) -> bool {
        matches!(self, Verdict::Fail(_) | Verdict::Error(_) | Verdict::UnexpectedPass { .. })
    }
}

/// A case's outcome with its evidence.
#[derive(Clone, Debug)]
pub struct CaseOutcome {
    pub verdict: Verdict,
    /// Commands sent and what came back, one line each: the case's log.
    pub log: Vec<String>,
    pub duration: Duration,
    /// What the case's workloads measured ([`crate::load`]); empty for most cases.
    pub figures: Vec<crate::load::JobFigures>,
    /// What the case concluded about each claim it judged; empty for most cases.
    pub claims: Vec<crate::claims::ClaimJudgement>,
}
