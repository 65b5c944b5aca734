//! The JSON run record (`--json PATH`): everything a run knew, for machines and for a
//! lab's archive. Its shape is [`Record`], versioned by [`SCHEMA_VERSION`]; `nvtest
//! schema --record` prints its JSON Schema (generated from these types). Written
//! atomically, as the JUnit report.

use std::path::Path;

use schemars::JsonSchema;
use serde::Serialize;

use super::meta::{rfc3339, InputFile};
use super::{CaseResult, Counts, RunRecord, RunResults};
use crate::identity::DeviceIdentity;
use crate::verdict::{Failure, Verdict};

/// The record's schema version: raised when a field changes meaning or goes away (new
/// fields keep it).
pub const SCHEMA_VERSION: u32 = 1;

/// A run record.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "nvtest run record", extend("additionalProperties" = false))]
pub struct Record {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    pub run: Run,
    /// One entry per TARGET, in command-line order.
    pub targets: Vec<Target>,
    /// The counts over every target.
    pub totals: Totals,
    /// Why the run ended before its last case (SIGINT, SIGTERM, `--timeout`); null when
    /// it ran to its end.
    pub interrupted: Option<String>,
}

/// How the run was run.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Run {
    pub nvtest_version: String,
    /// The git commit nvtest was built from ("-dirty" when the tree had changes), or "unknown".
    pub git_commit: String,
    pub command_line: Vec<String>,
    pub host: String,
    /// The release and version of the kernel nvtest ran on.
    pub kernel: String,
    /// RFC 3339, UTC.
    pub started: String,
    pub ended: String,
    pub seed: u64,
    /// `--repeat`: a count or "until-failure".
    pub repeat: String,
    pub suites: Vec<InputFile>,
    pub expect: Vec<InputFile>,
    /// The `--claims` file and its SHA-256; null without one (a simulated drive's profile
    /// may carry its own claims: each target's `claims` says which it judged).
    pub claims: Option<InputFile>,
}

/// One target: who it is, and what each case concluded.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Target {
    pub identity: DeviceIdentity,
    pub counts: Totals,
    pub cases: Vec<Case>,
    /// The claims the cases judged, one verdict per promise; null without claims.
    pub claims: Option<ClaimsRecord>,
}

/// A target's claims judged whole.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct ClaimsRecord {
    /// The file the claims were read from (a `--claims` file, or a simulated drive's
    /// profile).
    pub file: String,
    /// `drive:` as written.
    pub drive: String,
    /// `model:` (the Identify Controller MN the claims are of), null when not given.
    pub model: Option<String>,
    /// E.g. "claims file X is for model A, the drive is model B": every verdict is still
    /// given.
    pub warnings: Vec<String>,
    pub met: usize,
    pub breached: usize,
    pub not_measured: usize,
    /// One per promise, in file order.
    pub promises: Vec<PromiseRecord>,
}

/// One promise of the claims file and how it fared.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct PromiseRecord {
    /// The claim's key: `read_qos[N]` (from 0, file order), `ready_time`,
    /// `power_loss_protection`, `crypto_erase`, `namespaces`,
    /// `firmware_activation_without_reset`, `dual_port`, `hot_plug`, `arbitration`.
    pub promise: String,
    /// `FILE:LINE:COL (what)`.
    pub claim: String,
    pub verdict: PromiseVerdictName,
    /// What each judging case saw, `SUITE::CASE: observed` (only the breaches when
    /// breached); empty when not measured.
    pub observed: Vec<String>,
    /// The cases that judged it, `SUITE::CASE`.
    pub judged_by: Vec<String>,
    /// The suites (and cases) that measure it, e.g. `suite qos, case mixed`.
    pub measured_by: Vec<String>,
    /// Why it is not measured; null otherwise.
    pub reason: Option<String>,
}

/// How a promise fared.
#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
pub enum PromiseVerdictName {
    Met,
    Breached,
    NotMeasured,
}

/// Counts as the console's summary gives them; `passed` includes warnings.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Totals {
    pub total: usize,
    pub passed: usize,
    pub warnings: usize,
    pub failed: usize,
    pub errors: usize,
    pub skipped: usize,
    pub expected_failures: usize,
}

/// One case that ran.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Case {
    pub suite: String,
    /// The expanded case name.
    pub case: String,
    /// Which pass of `--repeat`.
    pub iteration: u32,
    pub verdict: VerdictName,
    /// The case's rule as its suite states it.
    pub rule: String,
    /// The suite's spec references.
    pub spec: Vec<String>,
    /// Why: the skip reason, the error, the expected failure's or unexpected pass's reason.
    pub reason: Option<String>,
    /// The rule broken and the evidence, for fail, warning and expected failure.
    pub failure: Option<Evidence>,
    pub duration_ms: f64,
    pub seed: u64,
    /// Commands sent and what came back, one line each.
    pub log: Vec<String>,
    /// What the case's workloads measured, `JOB.OP.METRIC` (empty for most cases).
    pub figures: Vec<FigureRecord>,
}

/// One figure a workload measured.
#[derive(Debug, Serialize, JsonSchema, PartialEq, Clone)]
pub struct FigureRecord {
    /// `JOB.OP.METRIC`, e.g. `reads.read.latency.p99.9_us`.
    pub name: String,
    pub value: f64,
    pub unit: String,
}

/// A verdict's name.
#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictName {
    Pass,
    Fail,
    Skip,
    Error,
    Warning,
    ExpectedFailure,
    UnexpectedPass,
}

/// What a failure broke and what was seen.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Evidence {
    /// Where the spec states the rule ("NVMe 1.4 §6.7, Figure 372").
    pub section: String,
    pub rule: String,
    pub sent: String,
    pub observed: String,
    pub expected: String,
}

impl VerdictName {
    /// The name of a verdict.
    pub fn of(verdict: &Verdict) -> VerdictName {
        match verdict {
            Verdict::Pass => VerdictName::Pass,
            Verdict::Fail(_) => VerdictName::Fail,
            Verdict::Skipped(_) => VerdictName::Skip,
            Verdict::Error(_) => VerdictName::Error,
            Verdict::Warning(_) => VerdictName::Warning,
            Verdict::ExpectedFailure { .. } => VerdictName::ExpectedFailure,
            Verdict::UnexpectedPass { .. } => VerdictName::UnexpectedPass,
        }
    }

    /// As the record writes it (`expected-failure`), also the JUnit `verdict` property.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictName::Pass => "pass",
            VerdictName::Fail => "fail",
            VerdictName::Skip => "skip",
            VerdictName::Error => "error",
            VerdictName::Warning => "warning",
            VerdictName::ExpectedFailure => "expected-failure",
            VerdictName::UnexpectedPass => "unexpected-pass",
        }
    }
}

impl From<&Failure> for Evidence {
    fn from(f: &Failure) -> Evidence {
        Evidence {
            section: f.rule.section.clone(),
            rule: f.rule.text.clone(),
            sent: f.sent.clone(),
            observed: f.observed.clone(),
            expected: f.expected.clone(),
        }
    }
}

impl From<Counts> for Totals {
    fn from(c: Counts) -> Totals {
        Totals {
            total: c.total(),
            passed: c.passed,
            warnings: c.warnings,
            failed: c.failed,
            errors: c.errors,
            skipped: c.skipped,
            expected_failures: c.expected_failures,
        }
    }
}

/// The record of a run.
pub fn record(run: &RunRecord) -> Record {
    let meta = &run.meta;
    Record {
        schema_version: SCHEMA_VERSION,
        run: Run {
            nvtest_version: meta.nvtest_version.clone(),
            git_commit: meta.git_commit.clone(),
            command_line: meta.command_line.clone(),
            host: meta.host.clone(),
            kernel: meta.kernel.clone(),
            started: rfc3339(meta.started),
            ended: rfc3339(meta.ended.unwrap_or_else(std::time::SystemTime::now)),
            seed: meta.seed,
            repeat: meta.repeat.clone(),
            suites: meta.suites.clone(),
            expect: meta.expect.clone(),
            claims: meta.claims.clone(),
        },
        targets: run.targets.iter().map(target).collect(),
        totals: run.counts().into(),
        interrupted: run.interrupted.clone(),
    }
}

fn target(results: &RunResults) -> Target {
    Target {
        identity: results.identity.clone(),
        counts: results.counts().into(),
        cases: results.cases.iter().map(|c| case(results, c)).collect(),
        claims: results.claims.as_ref().map(claims),
    }
}

fn claims(summary: &crate::claims::verdicts::Summary) -> ClaimsRecord {
    use crate::claims::verdicts::Outcome;
    ClaimsRecord {
        file: summary.origin.clone(),
        drive: summary.drive.clone(),
        model: summary.model.clone(),
        warnings: summary.warnings.clone(),
        met: summary.count(Outcome::Met),
        breached: summary.count(Outcome::Breached),
        not_measured: summary.count(Outcome::NotMeasured),
        promises: summary
            .verdicts
            .iter()
            .map(|v| PromiseRecord {
                promise: v.promise.key.clone(),
                claim: v.promise.citation.clone(),
                verdict: match v.outcome {
                    Outcome::Met => PromiseVerdictName::Met,
                    Outcome::Breached => PromiseVerdictName::Breached,
                    Outcome::NotMeasured => PromiseVerdictName::NotMeasured,
                },
                observed: v.observed.clone(),
                judged_by: v.judged_by.clone(),
                measured_by: v.promise.measured_by.iter().map(|m| m.describe()).collect(),
                reason: v.reason.clone(),
            })
            .collect(),
    }
}

fn case(results: &RunResults, result: &CaseResult) -> Case {
    let (reason, failure): (Option<String>, Option<Evidence>) = match &result.outcome.verdict {
        Verdict::Pass => (None, None),
        Verdict::Fail(f) | Verdict::Warning(f) => (None, Some(f.into())),
        Verdict::Skipped(r) | Verdict::Error(r) | Verdict::UnexpectedPass { reason: r } => (Some(r.clone()), None),
        Verdict::ExpectedFailure { failure, reason } => (Some(reason.clone()), Some(failure.into())),
    };
    let verdict = VerdictName::of(&result.outcome.verdict);
    let spec = results.suites.iter().find(|s| s.name == result.suite).map(|s| s.spec.clone()).unwrap_or_default();
    Case {
        suite: result.suite.clone(),
        case: result.case.clone(),
        iteration: result.iteration,
        verdict,
        rule: result.rule.clone(),
        spec,
        reason,
        failure,
        duration_ms: result.outcome.duration.as_secs_f64() * 1000.0,
        seed: result.seed,
        log: result.outcome.log.clone(),
        figures: result
            .outcome
            .figures
            .iter()
            .flat_map(|j| j.figures())
            .map(|f| FigureRecord { name: f.name, value: f.value, unit: f.unit.to_string() })
            .collect(),
    }
}

/// The JSON Schema of the record, as `nvtest schema --record` prints it.
pub fn schema() -> String {
    let schema = schemars::schema_for!(Record);
    serde_json::to_string_pretty(&schema).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Writes the record to `path` as [`super::output`] says; the error is one line.
pub fn write(path: &Path, run: &RunRecord) -> Result<(), String> {
    let text =
        serde_json::to_string_pretty(&record(run)).map_err(|e| format!("cannot serialize the JSON record: {e}"))?;
    super::output::write(path, "JSON record", format!("{text}\n").as_bytes())
}
