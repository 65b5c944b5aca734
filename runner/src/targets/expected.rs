//! Expected findings: the cases a target (QEMU, the Linux guest) is known to fail,
//! each with its reason and the rule it breaks (`fixtures/qemu/expected.yaml`,
//! `fixtures/guest/expected.yaml`, or a file given with `--expect`). A failure of a
//! listed case is reported as expected, not as the drive's; a listed case that passes
//! is reported too, so a fixed deviation does not hide. Loading never panics: a
//! malformed file says `file:line:column: what is wrong; what is allowed`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

use super::spec::TargetSpec;
use super::topology::{yaml_error, TopologyError};

/// A case a target is known to fail, with why and the rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedFinding {
    /// `suite::case` as expanded (`namespaces::read-at-nsze/lbads=512`).
    pub case: String,
    pub reason: String,
    /// Spec section and figure.
    pub rule: String,
    /// The targets (`qemu:ns32`, `qemu:dual`) it applies to; empty: every target the file is used with.
    pub targets: Vec<String>,
    /// The verdict the case gets there: a failure, or an error when the target itself
    /// dies on it (QEMU aborting on a command).
    pub verdict: ExpectedVerdict,
    /// The file's `applies_to`: the targets the whole file describes (a kind, `sim`,
    /// `qemu`, `qemu-linux`, or a target as written); empty: every target of the run,
    /// which a run of several targets refuses.
    pub file_scope: Vec<String>,
}

/// The verdict an expected finding has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpectedVerdict {
    #[default]
    Fail,
    Error,
}

impl ExpectedFinding {
    /// Whether this finding is expected of `target` (as [`TargetSpec::describe`] writes it).
    pub fn applies_to(&self, target: &str) -> bool {
        let in_scope = self.file_scope.is_empty() || self.file_scope.iter().any(|p| scope_matches(p, target));
        in_scope && (self.targets.is_empty() || self.targets.iter().any(|t| t == target))
    }
}

/// Whether an `applies_to` entry names `target`: the same target, or its kind (`qemu`
/// names every `qemu:…` target, `sim` every `sim:…`, `qemu-linux` every `qemu-linux:…`).
pub fn scope_matches(pattern: &str, target: &str) -> bool {
    pattern == target
        || (matches!(pattern, "sim" | "qemu" | "qemu-linux")
            && target.strip_prefix(pattern).is_some_and(|rest| rest.starts_with(':')))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedFile {
    target: Spanned<String>,
    #[serde(default)]
    applies_to: Vec<Spanned<String>>,
    expected: Vec<Spanned<ExpectedEntry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedEntry {
    case: Spanned<String>,
    reason: Spanned<String>,
    rule: Spanned<String>,
    #[serde(default)]
    targets: Vec<Spanned<String>>,
    #[serde(default)]
    verdict: ExpectedVerdict,
}

/// Loads an expected-findings file. Errors are one line: `file:line:col: what is wrong; what is allowed`.
pub fn load_expected(path: impl AsRef<Path>) -> Result<Vec<ExpectedFinding>, String> {
    let path = path.as_ref();
    let origin = path.display().to_string();
    let text =
        nvme::input::read_text_file(path).map_err(|e| format!("{origin}: cannot read the expected findings: {e}"))?;
    parse_expected(&text, &origin)
}

/// Parses expected-findings text; `origin` names it in errors.
pub fn parse_expected(text: &str, origin: &str) -> Result<Vec<ExpectedFinding>, String> {
    let nvme::input::strict::Strict(file): nvme::input::strict::Strict<ExpectedFile> =
        serde_saphyr::from_str_with_options(text, crate::suite::yaml_options())
            .map_err(|e| yaml_error(origin, &e).to_string())?;
    let err = |at: &Location, message: String| -> String {
        TopologyError::Invalid {
            origin: origin.to_string(),
            line: at.line().max(1),
            column: at.column().max(1),
            message,
        }
        .to_string()
    };
    if file.target.value.trim().is_empty() {
        return Err(err(
            &file.target.referenced,
            "target is empty; say which target and version the findings are of".into(),
        ));
    }
    let mut file_scope = Vec::new();
    for pattern in &file.applies_to {
        let text = pattern.value.trim();
        let kind = matches!(text, "sim" | "qemu" | "qemu-linux");
        if !kind && (text.is_empty() || (TargetSpec::parse(text).is_err() && !text.starts_with('/'))) {
            return Err(err(
                &pattern.referenced,
                format!(
                    "applies_to `{text}` is not a target: write a kind (`sim`, `qemu`, `qemu-linux`) or a target as \
                     on the command line, e.g. `qemu:ns32`, `/dev/nvme0`"
                ),
            ));
        }
        file_scope.push(text.to_string());
    }
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut out = Vec::new();
    for entry in &file.expected {
        let e = &entry.value;
        let case = e.case.value.trim();
        let valid_case = case
            .split_once("::")
            .is_some_and(|(suite, name)| !suite.is_empty() && !name.is_empty() && !case.contains(char::is_whitespace));
        if !valid_case {
            return Err(err(
                &e.case.referenced,
                format!("case `{case}` is not a case name; write `suite::case` as expanded, e.g. `namespaces::read-at-nsze/lbads=512`"),
            ));
        }
        for (field, value) in [("reason", &e.reason), ("rule", &e.rule)] {
            if value.value.trim().is_empty() {
                return Err(err(
                    &value.referenced,
                    format!("{field} is empty; every expected failure says its {field}"),
                ));
            }
        }
        let mut targets = Vec::new();
        for t in &e.targets {
            let text = t.value.trim();
            if TargetSpec::parse(text).is_err() || text.is_empty() {
                return Err(err(
                    &t.referenced,
                    format!("target `{text}` is not a target; write it as on the command line, e.g. `qemu:ns32`"),
                ));
            }
            targets.push(text.to_string());
        }
        let previous = seen.entry(case.to_string()).or_default();
        let overlaps = previous.iter().any(|p| p == "*" || targets.is_empty() || targets.contains(p));
        if overlaps {
            return Err(err(
                &e.case.referenced,
                format!("case `{case}` is listed twice for the same target; list each case once per target"),
            ));
        }
        if targets.is_empty() {
            previous.push("*".into());
        } else {
            previous.extend(targets.iter().cloned());
        }
        out.push(ExpectedFinding {
            case: case.to_string(),
            reason: e.reason.value.trim().to_string(),
            rule: e.rule.value.trim().to_string(),
            targets,
            verdict: e.verdict,
            file_scope: file_scope.clone(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_expected_findings_load() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/qemu/expected.yaml");
        let findings = load_expected(path).unwrap_or_else(|e| panic!("{e}"));
        for f in &findings {
            assert!(f.case.contains("::") && !f.reason.is_empty() && !f.rule.is_empty());
        }
    }

    #[test]
    fn malformed_expected_findings_say_where() {
        let cases: &[(&str, &str)] = &[
            (
                "target: q\nexpected:\n  - {case: nope, reason: r, rule: x}\n",
                "e.yaml:3:12: case `nope` is not a case name",
            ),
            ("target: q\nexpected:\n  - {case: a::b, reason: \"\", rule: x}\n", "e.yaml:3:26: reason is empty"),
            ("target: q\nexpected:\n  - {case: a::b, reason: r, rule: x, why: y}\n", "e.yaml:3:"),
            (
                "target: q\nexpected:\n  - {case: a::b, reason: r, rule: x}\n  - {case: a::b, reason: r, rule: x}\n",
                "e.yaml:4:12: case `a::b` is listed twice",
            ),
            (
                "target: q\nexpected:\n  - {case: a::b, reason: r, rule: x, targets: [\"tcp:x\"]}\n",
                "e.yaml:3:48: target `tcp:x`",
            ),
            ("expected: []\n", "e.yaml:1:1: missing key"),
        ];
        let mut wrong = Vec::new();
        for (text, want) in cases {
            let got = parse_expected(text, "e.yaml").unwrap_err();
            if !got.contains(want) {
                wrong.push(format!("for\n{text}wanted `{want}` in\n{got}\n"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        let ok = parse_expected(
            "target: q\nexpected:\n  - {case: a::b, reason: r, rule: x, targets: [qemu:dual]}\n  - {case: a::b, reason: r, rule: x, targets: [qemu:ns32]}\n",
            "e.yaml",
        )
        .unwrap();
        assert!(ok[0].applies_to("qemu:dual") && !ok[0].applies_to("qemu:ns32"));
        assert_eq!(ok[0].verdict, ExpectedVerdict::Fail);
        let crash =
            parse_expected("target: q\nexpected:\n  - {case: a::b, reason: r, rule: x, verdict: error}\n", "e.yaml")
                .unwrap();
        assert_eq!(crash[0].verdict, ExpectedVerdict::Error);
        let e = parse_expected("target: q\nexpected:\n  - {case: a::b, reason: r, rule: x, verdict: pass}\n", "e.yaml")
            .unwrap_err();
        assert!(e.starts_with("e.yaml:3:") && e.contains("`pass`") && e.contains("fail") && e.contains("error"), "{e}");
    }
}
