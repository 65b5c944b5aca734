//! Claims judged whole: every promise of a claims file ([`Promise`]), what the cases of a
//! run concluded about each ([`ClaimJudgement`], recorded by the step that judged it),
//! and at the end of a target's run one verdict per promise ([`PromiseVerdict`]): met,
//! breached (every breach, with what was observed) or not measured by the suites run,
//! naming the suite and case that measure it.
//!
//! | promise                                   | judged by (suite, case)                       |
//! |-------------------------------------------|-----------------------------------------------|
//! | each `read_qos` entry                     | `qos`, `mixed` (one measured run per promise) |
//! | `ready_time`                              | `power-fail` (every campaign), `hot-plug`     |
//! | `power_loss_protection: true`             | `power-fail`, `cut-under-load`                |
//! | `crypto_erase`, `namespaces`, `firmware_activation_without_reset`, `dual_port`, `arbitration` | `claims`, `capabilities-reported` |
//! | `hot_plug: true`                          | `hot-plug` (every removal campaign)           |
//!
//! A claim of `false` (and arbitration with neither flag) promises nothing: it has no
//! verdict.

use super::{Claimed, Claims};

/// What one case concluded about one promise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimJudgement {
    /// The promise's key ([`Promise::key`]), e.g. `read_qos[1]`, `ready_time`.
    pub key: String,
    /// Whether the drive kept it.
    pub met: bool,
    /// What was measured or read, e.g. `p99.9 read latency 98.20 µs over 49880 samples`.
    pub observed: String,
}

impl ClaimJudgement {
    pub fn met(key: impl Into<String>, observed: impl Into<String>) -> Self {
        ClaimJudgement { key: key.into(), met: true, observed: observed.into() }
    }

    pub fn breached(key: impl Into<String>, observed: impl Into<String>) -> Self {
        ClaimJudgement { key: key.into(), met: false, observed: observed.into() }
    }
}

/// Where a promise is measured: a suite, and the case of it when one case does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeasuredBy {
    pub suite: &'static str,
    pub case: Option<&'static str>,
}

impl MeasuredBy {
    const fn case(suite: &'static str, case: &'static str) -> Self {
        MeasuredBy { suite, case: Some(case) }
    }

    const fn suite(suite: &'static str) -> Self {
        MeasuredBy { suite, case: None }
    }

    /// `suite qos, case mixed` or `suite power-fail`.
    pub fn describe(&self) -> String {
        match self.case {
            Some(case) => format!("suite {}, case {case}", self.suite),
            None => format!("suite {}", self.suite),
        }
    }

    fn covers(&self, suite: &str, case: &str) -> bool {
        self.suite == suite && self.case.is_none_or(|c| case == c || case.starts_with(&format!("{c}/")))
    }
}

/// One promise of a claims file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Promise {
    /// Its key: the claim's name in the file, `read_qos[N]` (from 0, file order) for a
    /// read QoS entry.
    pub key: String,
    /// The claim cited: `FILE:LINE:COL (what)`.
    pub citation: String,
    /// The suites (and cases) that measure it.
    pub measured_by: Vec<MeasuredBy>,
}

/// How a promise fared in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Met,
    Breached,
    NotMeasured,
}

impl Outcome {
    /// As the record writes it: `met`, `breached`, `not-measured`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Met => "met",
            Outcome::Breached => "breached",
            Outcome::NotMeasured => "not-measured",
        }
    }
}

/// A promise's verdict at the end of a target's run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromiseVerdict {
    pub promise: Promise,
    pub outcome: Outcome,
    /// What each judging case saw, `SUITE::CASE: observed` (the breaches only, when
    /// breached).
    pub observed: Vec<String>,
    /// The cases that judged it, `SUITE::CASE`.
    pub judged_by: Vec<String>,
    /// Why it is not measured (which suite and case measure it, and whether they ran).
    pub reason: Option<String>,
}

impl PromiseVerdict {
    /// One console line: `met       FILE:L:C (what): observed (qos::mixed)`.
    pub fn line(&self) -> String {
        match self.outcome {
            Outcome::Met | Outcome::Breached => {
                let word = if self.outcome == Outcome::Met { "met" } else { "BREACHED" };
                format!("{word:<13} {}: {}", self.promise.citation, self.observed.join("; "))
            }
            Outcome::NotMeasured => format!(
                "{:<13} {}: {}",
                "not measured",
                self.promise.citation,
                self.reason.as_deref().unwrap_or_default()
            ),
        }
    }
}

/// What a case of a target's run left for the claims: its suite, case name, verdict
/// (one word) and judgements.
pub struct CaseJudged<'a> {
    pub suite: &'a str,
    pub case: &'a str,
    pub verdict: &'a str,
    pub judgements: &'a [ClaimJudgement],
}

impl Claims {
    /// Every promise of the file, in file order.
    pub fn promises(&self) -> Vec<Promise> {
        let mut out = Vec::new();
        let mut add = |key: String, citation: String, measured_by: Vec<MeasuredBy>| {
            out.push(Promise { key, citation, measured_by })
        };
        let capability = || vec![MeasuredBy::case("claims", "capabilities-reported")];
        for (i, q) in self.read_qos.iter().enumerate() {
            add(format!("read_qos[{i}]"), self.cite_read_qos(q), vec![MeasuredBy::case("qos", "mixed")]);
        }
        if let Some(c) = &self.ready_time {
            add(
                "ready_time".into(),
                self.cite(c, &format!("ready_time: {}", super::show_duration(c.value))),
                vec![MeasuredBy::suite("power-fail"), MeasuredBy::suite("hot-plug")],
            );
        }
        if let Some(c) = flag(&self.power_loss_protection) {
            add(
                "power_loss_protection".into(),
                self.cite(c, "power_loss_protection: true"),
                vec![MeasuredBy::case("power-fail", "cut-under-load")],
            );
        }
        if let Some(c) = flag(&self.crypto_erase) {
            add("crypto_erase".into(), self.cite(c, "crypto_erase: true"), capability());
        }
        if let Some(c) = &self.namespaces {
            add("namespaces".into(), self.cite(c, &format!("namespaces: up to {}", c.value.max)), capability());
        }
        if let Some(c) = flag(&self.firmware_activation_without_reset) {
            add(
                "firmware_activation_without_reset".into(),
                self.cite(c, "firmware_activation_without_reset: true"),
                capability(),
            );
        }
        if let Some(c) = flag(&self.dual_port) {
            add("dual_port".into(), self.cite(c, "dual_port: true"), capability());
        }
        if let Some(c) = flag(&self.hot_plug) {
            add("hot_plug".into(), self.cite(c, "hot_plug: true"), vec![MeasuredBy::suite("hot-plug")]);
        }
        if let Some(c) = self.arbitration.as_ref().filter(|c| c.value.weighted_round_robin || c.value.urgent) {
            add("arbitration".into(), self.cite(c, super::identify::arbitration_what(&c.value)), capability());
        }
        out
    }

    /// The verdict of every promise from what the cases of a target's run judged.
    pub fn verdicts(&self, cases: &[CaseJudged<'_>]) -> Vec<PromiseVerdict> {
        self.promises().into_iter().map(|p| verdict(p, cases)).collect()
    }
}

/// The claims of one target's run, judged whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The file the claims were read from.
    pub origin: String,
    /// `drive:` and `model:` as written.
    pub drive: String,
    pub model: Option<String>,
    /// The claims are not of the drive tested ([`Claims::model_mismatch`]): every verdict
    /// is still given, with this warning.
    pub warnings: Vec<String>,
    /// One per promise, in file order.
    pub verdicts: Vec<PromiseVerdict>,
}

impl Summary {
    /// The claims of a target's run whose drive's Identify Controller MN is `drive_model`,
    /// judged from its cases.
    pub fn of(claims: &Claims, drive_model: &str, cases: &[CaseJudged<'_>]) -> Summary {
        Summary {
            origin: claims.origin.clone(),
            drive: claims.drive.clone(),
            model: claims.model.clone(),
            warnings: claims.model_mismatch(drive_model).into_iter().collect(),
            verdicts: claims.verdicts(cases),
        }
    }

    /// How many promises ended `outcome`.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.verdicts.iter().filter(|v| v.outcome == outcome).count()
    }

    /// The console's lines: a heading with the counts, then one line per promise.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "claims of {} ({}): {} promises, {} met, {} breached, {} not measured",
            self.origin,
            self.drive,
            self.verdicts.len(),
            self.count(Outcome::Met),
            self.count(Outcome::Breached),
            self.count(Outcome::NotMeasured)
        )];
        out.extend(self.warnings.iter().map(|w| format!("  warning: {w}")));
        out.extend(self.verdicts.iter().map(|v| format!("  {}", v.line())));
        out
    }
}

/// A capability claimed (`true`), not disclaimed.
fn flag(claim: &Option<Claimed<bool>>) -> Option<&Claimed<bool>> {
    claim.as_ref().filter(|c| c.value)
}

fn verdict(promise: Promise, cases: &[CaseJudged<'_>]) -> PromiseVerdict {
    let mut met = Vec::new();
    let mut breached = Vec::new();
    let mut judged_by = Vec::new();
    for c in cases {
        let name = format!("{}::{}", c.suite, c.case);
        let mine: Vec<&ClaimJudgement> = c.judgements.iter().filter(|j| j.key == promise.key).collect();
        if !mine.is_empty() && !judged_by.contains(&name) {
            judged_by.push(name.clone());
        }
        for j in mine {
            let line = format!("{name}: {}", j.observed);
            if j.met {
                met.push(line);
            } else {
                breached.push(line);
            }
        }
    }
    let (outcome, observed, reason) = if !breached.is_empty() {
        (Outcome::Breached, breached, None)
    } else if !met.is_empty() {
        (Outcome::Met, met, None)
    } else {
        (Outcome::NotMeasured, Vec::new(), Some(not_measured(&promise, cases)))
    };
    PromiseVerdict { promise, outcome, observed, judged_by, reason }
}

/// Why nothing judged `promise`: the measuring cases did not run, or ran without
/// judging it (skipped, an error, or a target where it cannot be seen).
fn not_measured(promise: &Promise, cases: &[CaseJudged<'_>]) -> String {
    let by: Vec<String> = promise.measured_by.iter().map(MeasuredBy::describe).collect();
    let ran: Vec<String> = cases
        .iter()
        .filter(|c| promise.measured_by.iter().any(|m| m.covers(c.suite, c.case)))
        .map(|c| format!("{}::{} ({})", c.suite, c.case, c.verdict))
        .collect();
    if ran.is_empty() {
        format!("not measured by the suites run ({} measures it)", by.join("; "))
    } else {
        format!("not measured: {} ran without judging it ({} measures it)", ran.join(", "), by.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::parse_claims;

    fn claims() -> Claims {
        parse_claims(
            "drive: d\nread_qos:\n  - {read_iops: 10, percentile: 99, latency: 1 ms}\n  - {name: b, read_iops: 20, \
             percentile: 50, latency: 2 ms}\nready_time: 5 s\ncrypto_erase: false\ndual_port: true\n\
             arbitration: {weighted_round_robin: false}\nhot_plug: true\n",
            "c.yaml",
        )
        .unwrap()
    }

    #[test]
    fn every_promise_but_a_false_one_is_listed_with_where_it_is_measured() {
        let keys: Vec<(String, String)> = claims()
            .promises()
            .into_iter()
            .map(|p| (p.key, p.measured_by.iter().map(MeasuredBy::describe).collect::<Vec<_>>().join("; ")))
            .collect();
        let want = [
            ("read_qos[0]", "suite qos, case mixed"),
            ("read_qos[1]", "suite qos, case mixed"),
            ("ready_time", "suite power-fail; suite hot-plug"),
            ("dual_port", "suite claims, case capabilities-reported"),
            ("hot_plug", "suite hot-plug"),
        ];
        assert_eq!(keys, want.map(|(k, m)| (k.to_string(), m.to_string())));
        assert_eq!(claims().promises()[2].citation, "c.yaml:5:13 (ready_time: 5 s)");
    }

    #[test]
    fn each_promise_is_met_breached_or_not_measured_with_every_breach_listed() {
        let qos =
            [ClaimJudgement::met("read_qos[0]", "p99 0.5 ms"), ClaimJudgement::breached("read_qos[1]", "p50 3 ms")];
        let caps = [ClaimJudgement::breached("dual_port", "CMIC 00h")];
        let cases = [
            CaseJudged { suite: "qos", case: "mixed", verdict: "fail", judgements: &qos },
            CaseJudged { suite: "qos", case: "mixed", verdict: "fail", judgements: &qos[1..] },
            CaseJudged { suite: "claims", case: "capabilities-reported", verdict: "fail", judgements: &caps },
            CaseJudged { suite: "hot-plug", case: "orderly-removal", verdict: "skip", judgements: &[] },
        ];
        let v = claims().verdicts(&cases);
        let got: Vec<(&str, Outcome, usize)> =
            v.iter().map(|v| (v.promise.key.as_str(), v.outcome, v.observed.len())).collect();
        assert_eq!(
            got,
            [
                ("read_qos[0]", Outcome::Met, 1),
                ("read_qos[1]", Outcome::Breached, 2),
                ("ready_time", Outcome::NotMeasured, 0),
                ("dual_port", Outcome::Breached, 1),
                ("hot_plug", Outcome::NotMeasured, 0),
            ]
        );
        assert_eq!(v[1].observed[0], "qos::mixed: p50 3 ms");
        assert_eq!(v[1].judged_by, ["qos::mixed"]);
        assert_eq!(
            v[2].reason.as_deref(),
            Some(
                "not measured: hot-plug::orderly-removal (skip) ran without judging it (suite power-fail; suite \
                 hot-plug measures it)"
            )
        );
        assert_eq!(
            v[4].reason.as_deref(),
            Some("not measured: hot-plug::orderly-removal (skip) ran without judging it (suite hot-plug measures it)")
        );
        assert!(v[3].line().starts_with("BREACHED      c.yaml:"), "{}", v[3].line());
    }

    #[test]
    fn a_model_mismatch_is_a_warning_and_a_drive_text_naming_the_model_is_not() {
        let with_model = parse_claims("drive: PBlaze5 916 (2019)\nmodel: ' P5 916 '\n", "c.yaml").unwrap();
        assert_eq!(with_model.model.as_deref(), Some("P5 916"));
        assert_eq!(with_model.model_mismatch("P5 916  "), None);
        assert_eq!(
            with_model.model_mismatch("QEMU NVMe Ctrl"),
            Some("claims file c.yaml is for model P5 916, the drive is model QEMU NVMe Ctrl".into())
        );
        let by_drive = parse_claims("drive: nvtest simulated enterprise NVMe 1.4 (spirit)\n", "c.yaml").unwrap();
        assert_eq!(by_drive.model_mismatch("nvtest simulated enterprise NVMe 1.4"), None);
        assert!(by_drive.model_mismatch("QEMU NVMe Ctrl").is_some());
        assert_eq!(by_drive.model_mismatch("  "), None);
        let empty = parse_claims("drive: d\nmodel: ' '\n", "c.yaml").unwrap_err().to_string();
        assert!(empty.starts_with("c.yaml:2:8: model is empty"), "{empty}");
    }
}
