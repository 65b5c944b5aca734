//! Suites: the vocabulary ([`model`]), and everything between a YAML file and the cases
//! the runner executes: reading with positions kept ([`spans`]), validation that locates
//! every error as `file:line:column` ([`validate`]), matrix expansion ([`expand`]), finding
//! suites by name ([`locate`]) and the JSON Schema of the format ([`json_schema`], its
//! rules beyond the types' shapes in [`schema`]).
//!
//! Every check happens here, before any device is opened: a suite that loads is one the
//! runner can execute without meeting a `$name` or an unknown status name.

pub mod expand;
pub mod locate;
pub mod model;
pub mod params;
pub mod schema;
pub mod spans;
pub mod validate;

use std::fmt;
use std::path::{Path, PathBuf};

use model::{MatrixValue, Requirement, Step, Suite};
use nvme::input::strict::Strict;
use spans::{Node, Pos};

/// A case after matrix expansion: every `$name` parameter resolved, suite-level
/// requirements merged in. What the runner executes.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpandedCase {
    /// The suite's short name.
    pub suite: String,
    /// The case name with its matrix values: `boundaries/lbads=512`.
    pub name: String,
    pub title: String,
    pub rule: String,
    /// The suite's requirements, then the case's.
    pub requires: Vec<Requirement>,
    pub destructive: bool,
    /// A violation is a warning, not a failure (see `model::Case::advisory`).
    pub advisory: bool,
    pub steps: Vec<Step>,
    /// The matrix values this case was expanded with, in key order (empty without a matrix).
    pub params: Vec<(String, MatrixValue)>,
}

impl ExpandedCase {
    /// A case with a name and nothing else: no rule, no requirement, no step (for tests
    /// of what runs cases).
    pub fn named(suite: &str, name: &str) -> ExpandedCase {
        ExpandedCase {
            suite: suite.into(),
            name: name.into(),
            title: String::new(),
            rule: String::new(),
            requires: vec![],
            destructive: false,
            advisory: false,
            steps: vec![],
            params: vec![],
        }
    }
}

/// What a suite says about itself, for reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuiteInfo {
    pub name: String,
    pub title: String,
    /// The parts of the specification the suite checks.
    pub spec: Vec<String>,
    pub destructive: bool,
}

/// A validated, expanded suite.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedSuite {
    pub path: PathBuf,
    pub suite: SuiteInfo,
    pub cases: Vec<ExpandedCase>,
}

/// One thing wrong with a suite file, located.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuiteError {
    pub file: PathBuf,
    /// Where in the file; `None` when the file could not be read at all.
    pub pos: Option<Pos>,
    /// What is wrong; what is allowed. One line.
    pub message: String,
    /// The offending line of the file, for [`SuiteError::render`].
    pub source_line: Option<String>,
}

impl SuiteError {
    fn at(file: &Path, text: &str, pos: Pos, message: impl Into<String>) -> SuiteError {
        SuiteError {
            file: file.to_path_buf(),
            pos: Some(pos),
            message: nvme::input::one_line(&message.into()),
            source_line: text.lines().nth(pos.line.saturating_sub(1)).map(str::to_string),
        }
    }

    /// The error line, then the offending source line with a caret under the column.
    pub fn render(&self) -> String {
        let mut out = self.to_string();
        if let (Some(pos), Some(line)) = (self.pos, &self.source_line) {
            let number = pos.line.to_string();
            let pad = " ".repeat(number.len());
            let indent: String =
                line.chars().take(pos.column.saturating_sub(1)).map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
            out.push_str(&format!("\n {pad} |\n {number} | {line}\n {pad} | {indent}^"));
        }
        out
    }
}

impl fmt::Display for SuiteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pos {
            Some(pos) => write!(f, "{}:{}:{}: {}", self.file.display(), pos.line, pos.column, self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// Why a suite did not load: every error found, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    pub errors: Vec<SuiteError>,
}

impl LoadError {
    fn single(error: SuiteError) -> LoadError {
        LoadError { errors: vec![error] }
    }

    /// Each error with its source line, separated by blank lines.
    pub fn render(&self) -> String {
        self.errors.iter().map(SuiteError::render).collect::<Vec<_>>().join("\n\n")
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for LoadError {}

/// How suites, topologies and expected findings are read: duplicate keys are errors,
/// booleans are only `true` / `false`.
pub fn yaml_options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
    options.strict_booleans = true;
    options
}

/// Reads, validates and expands the suite at `path`. With `expected_name` (the NAME of
/// `--suite NAME`), the file's `suite:` must say the same.
pub fn load_file(path: &Path, expected_name: Option<&str>) -> Result<LoadedSuite, LoadError> {
    let text = nvme::input::read_text_file(path).map_err(|e| {
        LoadError::single(SuiteError {
            file: path.to_path_buf(),
            pos: None,
            message: format!("cannot read the suite: {e}"),
            source_line: None,
        })
    })?;
    load_str(&text, path, expected_name)
}

/// Validates and expands suite text; `path` is only used in messages and reports.
pub fn load_str(text: &str, path: &Path, expected_name: Option<&str>) -> Result<LoadedSuite, LoadError> {
    let Strict(suite): Strict<Suite> = serde_saphyr::from_str_with_options(text, yaml_options())
        .map_err(|e| LoadError::single(yaml_error(path, text, &e)))?;
    let tree = Node::parse(text, yaml_options()).map_err(|e| LoadError::single(yaml_error(path, text, &e)))?;
    let mut problems = validate::validate(&suite, &tree, expected_name);
    if !problems.is_empty() {
        problems.sort_by_key(|p| p.pos);
        let errors = problems.into_iter().map(|p| SuiteError::at(path, text, p.pos, p.message)).collect();
        return Err(LoadError { errors });
    }
    let cases = expand::expand(&suite)
        .map_err(|p| LoadError::single(SuiteError::at(path, text, tree.pos(&p.path), p.message)))?;
    Ok(LoadedSuite {
        path: path.to_path_buf(),
        suite: SuiteInfo {
            name: suite.suite.clone(),
            title: suite.title.clone(),
            spec: suite.spec.clone(),
            destructive: suite.destructive,
        },
        cases,
    })
}

/// The JSON Schema of a suite file, generated from [`model::Suite`]: it accepts exactly the
/// files the loader accepts, but for the mistakes no JSON Schema can see (see [`schema`]).
pub fn json_schema() -> String {
    let mut schema = schemars::schema_for!(Suite).to_value();
    schema::integer_widths(&mut schema);
    serde_json::to_string_pretty(&schema).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// A serde-saphyr error as a located [`SuiteError`], its message made to say what is allowed.
fn yaml_error(path: &Path, text: &str, error: &serde_saphyr::Error) -> SuiteError {
    use serde_saphyr::MessageFormatter;
    let pos = error.location().map(|l| Pos::from_location(&l)).unwrap_or(Pos::START);
    let message = serde_saphyr::UserMessageFormatter.format_message(error.without_snippet());
    SuiteError::at(path, text, pos, clarify(&message))
}

/// Rewrites the terse messages of the YAML reader into "what is wrong; what is allowed":
/// those of any nvtest file (crate::yaml_message), then those of suites.
fn clarify(message: &str) -> String {
    let message = message.trim();
    if let Some(text) = crate::yaml_message::clarify(message) {
        return text;
    }
    let known = match message {
        "expected end of mapping after enum variant value" => {
            "a step or requirement is a mapping with a single key, its name; give each its own `- ` item"
        }
        "unexpected value for unit enum variant" => {
            "this name takes no value; write it alone (`- check: NAME`, `requires: [namespace_management]`)"
        }
        "unexpected end of file" | "unexpected end of input" => {
            "the file is empty or ends early; a suite needs `suite`, `title`, `spec` and `cases`"
        }
        _ if message.starts_with("expected ") => return format!("this value does not fit here; {message}"),
        _ => return message.to_string(),
    };
    known.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_file_line_column_then_message() {
        let error = load_str("suite: x\ntitle: t\nspec: []\ncases: 5\n", Path::new("s.yaml"), None).unwrap_err();
        assert_eq!(error.errors.len(), 1);
        assert_eq!(error.to_string(), "s.yaml:4:8: expected a list here (`[a, b]` or lines starting with `- `)");
        assert_eq!(
            error.render(),
            "s.yaml:4:8: expected a list here (`[a, b]` or lines starting with `- `)\n   |\n 4 | cases: 5\n   |        ^"
        );
    }

    #[test]
    fn an_empty_file_is_located_at_its_start() {
        let error = load_str("", Path::new("e.yaml"), None).unwrap_err();
        assert!(error.to_string().starts_with("e.yaml:1:1: "), "{error}");
    }

    #[test]
    fn an_unreadable_file_names_the_file() {
        let error = load_file(Path::new("/nonexistent/x.yaml"), None).unwrap_err();
        assert!(error.to_string().starts_with("/nonexistent/x.yaml: cannot read the suite"), "{error}");
    }

    #[test]
    fn the_schema_describes_suites_and_steps() {
        let schema: serde_json::Value = serde_json::from_str(&json_schema()).unwrap();
        assert_eq!(schema["title"], "Suite");
        let text = schema.to_string();
        for word in ["use_namespaces", "deallocate", "identify_controller", "from_end", "namespace_management"] {
            assert!(text.contains(word), "schema lacks {word}");
        }
    }
}
