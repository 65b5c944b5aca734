//! Reports: what a run produced ([`RunRecord`]: how it was run, [`meta::RunMeta`]; per
//! target who was tested and every case that ran with its outcome, [`RunResults`]) and
//! the files written from it ([`junit`], [`json`]), and where they go ([`output`]).

pub mod json;
pub mod junit;
pub mod meta;
pub mod output;

use std::time::{Duration, SystemTime};

use crate::identity::DeviceIdentity;
use crate::suite::{LoadedSuite, SuiteInfo};
use crate::verdict::{CaseOutcome, Verdict};

/// One case that ran.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The suite's short name.
    pub suite: String,
    /// The expanded case name (`read-at-nsze/lbads=512`).
    pub case: String,
    pub outcome: CaseOutcome,
    /// The case's own rule as the suite states it ("NVMe 1.4 §6.7: …").
    pub rule: String,
    /// Which pass of `--repeat` (1 for a run without it).
    pub iteration: u32,
    /// The seed of the case's data ([`crate::exec::case_seed`]).
    pub seed: u64,
}

impl CaseResult {
    /// A result for a case of `suite` (rule, iteration and seed left empty: 1 and 0).
    pub fn new(suite: impl Into<String>, case: impl Into<String>, outcome: CaseOutcome) -> CaseResult {
        CaseResult { suite: suite.into(), case: case.into(), outcome, rule: String::new(), iteration: 1, seed: 0 }
    }

    /// The case's name in reports: `CASE`, or `CASE #N` for pass N of a repeated run.
    pub fn name(&self, repeated: bool) -> String {
        if repeated {
            format!("{} #{}", self.case, self.iteration)
        } else {
            self.case.clone()
        }
    }
}

/// A whole run: how it was run, and what each target did.
#[derive(Clone, Debug)]
pub struct RunRecord {
    pub meta: meta::RunMeta,
    /// One per TARGET, in command-line order.
    pub targets: Vec<RunResults>,
    /// The run ended before its last case: why (a signal, `--timeout`), with the case
    /// that was cut short reported as an error.
    pub interrupted: Option<String>,
}

impl RunRecord {
    /// Whether cases repeat (`--repeat`): names then carry their iteration.
    pub fn repeated(&self) -> bool {
        self.meta.repeat != "1" || self.targets.iter().any(|t| t.cases.iter().any(|c| c.iteration > 1))
    }

    /// The counts over every target.
    pub fn counts(&self) -> Counts {
        let mut all = Counts::default();
        for t in &self.targets {
            let c = t.counts();
            all.passed += c.passed;
            all.failed += c.failed;
            all.errors += c.errors;
            all.skipped += c.skipped;
            all.expected_failures += c.expected_failures;
            all.warnings += c.warnings;
        }
        all
    }
}

/// Everything a run produced, in the order cases ran.
#[derive(Clone, Debug)]
pub struct RunResults {
    pub identity: DeviceIdentity,
    /// When the first case started.
    pub started: SystemTime,
    /// Every suite of the run, in order, also those whose cases were all filtered out.
    pub suites: Vec<SuiteInfo>,
    pub cases: Vec<CaseResult>,
    /// The claims the cases judged (`--claims`, or a simulated drive's profile), one
    /// verdict per promise; `None` without claims.
    pub claims: Option<crate::claims::verdicts::Summary>,
}

/// How many cases ended how. The console's `failed` is `failed + errors`, its `ignored`
/// is `skipped`, its `passed` is `passed + expected_failures`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub passed: usize,
    /// The drive broke a rule, or passed where a failure was expected.
    pub failed: usize,
    /// nvtest or the transport broke.
    pub errors: usize,
    pub skipped: usize,
    pub expected_failures: usize,
    /// Of `passed`, those of advisory cases that found a violation (warnings).
    pub warnings: usize,
}

impl Counts {
    pub fn total(&self) -> usize {
        self.passed + self.failed + self.errors + self.skipped + self.expected_failures
    }

    /// One line: "96 cases: 90 passed (2 warnings), 0 failed, 0 errors, 6 skipped, 0 expected failures".
    pub fn line(&self) -> String {
        let warnings = if self.warnings > 0 { format!(" ({} warnings)", self.warnings) } else { String::new() };
        format!(
            "{} cases: {} passed{warnings}, {} failed, {} errors, {} skipped, {} expected failures",
            self.total(),
            self.passed,
            self.failed,
            self.errors,
            self.skipped,
            self.expected_failures
        )
    }
}

impl RunResults {
    /// A run of `suites` on the device `identity`, with no case run yet.
    pub fn new(identity: DeviceIdentity, suites: &[LoadedSuite]) -> RunResults {
        RunResults {
            identity,
            started: SystemTime::now(),
            suites: suites.iter().map(|s| s.suite.clone()).collect(),
            cases: Vec::new(),
            claims: None,
        }
    }

    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for case in &self.cases {
            match case.outcome.verdict {
                Verdict::Pass => counts.passed += 1,
                Verdict::Warning(_) => {
                    counts.passed += 1;
                    counts.warnings += 1;
                }
                Verdict::Fail(_) | Verdict::UnexpectedPass { .. } => counts.failed += 1,
                Verdict::Error(_) => counts.errors += 1,
                Verdict::Skipped(_) => counts.skipped += 1,
                Verdict::ExpectedFailure { .. } => counts.expected_failures += 1,
            }
        }
        counts
    }

    /// The cases of one suite, in the order they ran.
    pub fn cases_of<'a>(&'a self, suite: &'a str) -> impl Iterator<Item = &'a CaseResult> + 'a {
        self.cases.iter().filter(move |c| c.suite == suite)
    }

    /// The claims judged whole from this target's cases: one verdict per promise of
    /// `claims`.
    pub fn judge_claims(&self, claims: &crate::claims::Claims) -> crate::claims::verdicts::Summary {
        let cases: Vec<crate::claims::verdicts::CaseJudged<'_>> = self
            .cases
            .iter()
            .map(|c| crate::claims::verdicts::CaseJudged {
                suite: &c.suite,
                case: &c.case,
                verdict: json::VerdictName::of(&c.outcome.verdict).as_str(),
                judgements: &c.outcome.claims,
            })
            .collect();
        crate::claims::verdicts::Summary::of(claims, &self.identity.model, &cases)
    }

    /// The time all cases took.
    pub fn duration(&self) -> Duration {
        self.cases.iter().map(|c| c.outcome.duration).sum()
    }
}
