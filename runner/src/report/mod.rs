//! Reports: what a run produced ([`RunResults`]: who was tested, every case that ran with
//! its outcome) and the files written from it ([`junit`]).

pub mod junit;

use std::time::{Duration, SystemTime};

use crate::exec::DeviceIdentity;
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
}

impl Counts {
    pub fn total(&self) -> usize {
        self.passed + self.failed + self.errors + self.skipped + self.expected_failures
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
        }
    }

    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for case in &self.cases {
            match case.outcome.verdict {
                Verdict::Pass | Verdict::Warning(_) => counts.passed += 1,
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

    /// The time all cases took.
    pub fn duration(&self) -> Duration {
        self.cases.iter().map(|c| c.outcome.duration).sum()
    }
}
