//! Validation of a typed suite beyond what serde checks, each problem located through the
//! positioned tree ([`super::spans`]): names, requirements' versions and data sizes, status
//! names in `expect`, steps that need exactly one of two fields, keys of maps serde does not
//! close, and the matrix rules (every `$name` declared, every parameter used, no empty or
//! repeated values, every value of the type its uses need).

use std::collections::BTreeMap;

use nvme::spec::{Status, Version};

use super::model::{Expect, MatrixValue, Param, Requirement, Suite};
use super::params::{step_parts, SetRef};
use super::spans::{key, Node, Pos, Seg};

/// The most cases one case's matrix may expand into.
pub const MAX_EXPANSION: usize = 4096;

/// One problem found, located.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub pos: Pos,
    pub message: String,
}

/// Checks `suite` (read from the file `tree` was read from); no problems means it expands.
/// Whether a step only reads from the drive (allowed in a `destructive: false` case).
fn reads_only(step: &super::model::Step) -> bool {
    use super::model::{IoOp, Step};
    match step {
        Step::ExistingNamespaces {}
        | Step::Port { .. }
        | Step::Identify { .. }
        | Step::Check(_)
        | Step::Verify { .. }
        | Step::Compare { .. } => true,
        Step::Io { op, .. } => matches!(op, IoOp::Read | IoOp::Compare | IoOp::Flush),
        _ => false,
    }
}

pub fn validate(suite: &Suite, tree: &Node, expected_name: Option<&str>) -> Vec<Problem> {
    let mut v = Validator { tree, problems: Vec::new() };
    v.suite(suite, expected_name);
    v.problems
}

/// A use of `$name` in a step.
struct Use {
    pos: Pos,
    type_name: &'static str,
    max: u64,
    data_size: bool,
}

struct Validator<'a> {
    tree: &'a Node,
    problems: Vec<Problem>,
}

impl Validator<'_> {
    fn problem(&mut self, pos: Pos, message: String) {
        self.problems.push(Problem { pos, message });
    }

    fn at(&mut self, path: &[Seg], message: String) {
        let pos = self.tree.pos(path);
        self.problem(pos, message);
    }

    fn suite(&mut self, suite: &Suite, expected_name: Option<&str>) {
        let name_path = [key("suite")];
        if !is_kebab(&suite.suite) {
            self.at(&name_path, format!("suite name `{}` is not kebab-case; use a-z, 0-9 and single `-`", suite.suite));
        }
        if let Some(expected) = expected_name.filter(|e| *e != suite.suite) {
            self.at(
                &name_path,
                format!(
                    "the file {expected}.yaml names its suite `{}`; a suite's name must be its file name (`{expected}`)",
                    suite.suite
                ),
            );
        }
        self.requirements(&suite.requires, &[key("requires")]);
        if suite.cases.is_empty() {
            self.at(&[key("cases")], "a suite needs at least one case".to_string());
        }
        let mut first_seen: BTreeMap<&str, Pos> = BTreeMap::new();
        for (i, case) in suite.cases.iter().enumerate() {
            let case_path = vec![key("cases"), Seg::Index(i)];
            let name_path = [case_path.clone(), vec![key("name")]].concat();
            let name_pos = self.tree.pos(&name_path);
            if !is_kebab(&case.name) {
                self.problem(
                    name_pos,
                    format!("case name `{}` is not kebab-case; use a-z, 0-9 and single `-`", case.name),
                );
            }
            if let Some(first) = first_seen.get(case.name.as_str()) {
                self.problem(
                    name_pos,
                    format!(
                        "duplicate case name `{}` (first at line {}); case names are unique in a suite",
                        case.name, first.line
                    ),
                );
            } else {
                first_seen.insert(&case.name, name_pos);
            }
            if case.rule.trim().is_empty() {
                self.at(
                    &[case_path.clone(), vec![key("rule")]].concat(),
                    "the rule is empty; say the rule the case checks, with its spec section".to_string(),
                );
            }
            self.requirements(&case.requires, &[case_path.clone(), vec![key("requires")]].concat());
            self.case(case, &case_path);
        }
    }

    fn requirements(&mut self, requires: &[Requirement], path: &[Seg]) {
        for (k, requirement) in requires.iter().enumerate() {
            let at = |field: &str| [path, &[Seg::Index(k), key(field)]].concat();
            match requirement {
                Requirement::Version(text) => {
                    if let Err(e) = text.parse::<Version>() {
                        self.at(&at("version"), format!("{e}; write the version quoted, like \"1.3\" or \"1.2.1\""));
                    }
                }
                Requirement::Lbads(size) => {
                    if let Some(message) = data_size_problem(u64::from(*size)) {
                        self.at(&at("lbads"), message);
                    }
                }
                _ => {}
            }
        }
    }

    fn case(&mut self, case: &super::model::Case, case_path: &[Seg]) {
        if case.destructive == Some(false) {
            if let Some(k) = case.steps.iter().position(|s| !reads_only(s)) {
                self.at(
                    &[case_path, &[key("steps"), Seg::Index(k)]].concat(),
                    "this step changes the drive, so the case cannot be `destructive: false`; \
                     only identify, check, verify, compare and io read/compare/flush steps may be"
                        .to_string(),
                );
            }
        }
        let matrix_path = [case_path, &[key("matrix")]].concat();
        for (name, values) in &case.matrix {
            let key_path = [matrix_path.clone(), vec![key(name)]].concat();
            if !is_param_name(name) {
                let pos = self.tree.key_pos(&key_path);
                self.problem(
                    pos,
                    format!("matrix parameter `{name}` is not a name; use a-z, 0-9 and `_`, starting with a letter"),
                );
            }
            if values.is_empty() {
                self.at(&key_path, format!("matrix parameter `{name}` has no values; give at least one"));
            }
            for (k, value) in values.iter().enumerate() {
                if let Some(first) = values[..k].iter().position(|v| v == value) {
                    let pos = self.tree.pos(&[key_path.clone(), vec![Seg::Index(k)]].concat());
                    self.problem(
                        pos,
                        format!(
                            "matrix parameter `{name}` lists {} twice (values {} and {}); each value once",
                            show(value),
                            first + 1,
                            k + 1
                        ),
                    );
                }
            }
        }
        let combinations = case.matrix.values().try_fold(1usize, |n, values| n.checked_mul(values.len().max(1)));
        if combinations.is_none_or(|n| n > MAX_EXPANSION) {
            self.at(
                &matrix_path,
                format!("the matrix of `{}` expands into too many cases; at most {MAX_EXPANSION}", case.name),
            );
        }

        let steps_path = [case_path, &[key("steps")]].concat();
        if case.steps.is_empty() {
            self.at(&steps_path, "a case needs at least one step".to_string());
        }
        let mut uses: BTreeMap<String, Vec<Use>> = BTreeMap::new();
        // The most members the case's namespace set can have before each step: references
        // past it are found here, before a run deletes anything on a drive.
        let mut set_size: Option<u32> = Some(0);
        for (j, step) in case.steps.iter().enumerate() {
            let step_path = [steps_path.clone(), vec![Seg::Index(j), Seg::Sole]].concat();
            let step_name = self.step_name(&steps_path, j);
            let original = step;
            let mut step = step.clone();
            let parts = step_parts(&mut step);
            for (path, reference) in &parts.set_refs {
                if let Some(message) = set_problem(*reference, set_size) {
                    self.at(&[step_path.clone(), path.clone()].concat(), message);
                }
            }
            set_size = match original {
                super::model::Step::UseNamespaces { count: Param::Value(0), .. } => {
                    self.at(
                        &[step_path.clone(), vec![key("count")]].concat(),
                        "`count: 0` builds an empty namespace set; give at least 1".to_string(),
                    );
                    None
                }
                super::model::Step::UseNamespaces { count: Param::Value(n), .. } => Some(*n),
                super::model::Step::UseNamespaces { .. }
                | super::model::Step::ExistingNamespaces {}
                | super::model::Step::CreateUntilFull { .. } => None,
                super::model::Step::CreateNamespace { .. } => set_size.map(|n| n.saturating_add(1)),
                _ => set_size,
            };

            let given: Vec<&str> = parts.exactly_one.iter().filter(|(_, g)| *g).map(|(f, _)| *f).collect();
            if !parts.exactly_one.is_empty() && given.len() != 1 {
                let names: Vec<String> = parts.exactly_one.iter().map(|(f, _)| format!("`{f}`")).collect();
                let has = if given.is_empty() { "none".to_string() } else { given.join(" and ") };
                self.at(&step_path, format!("`{step_name}` needs exactly one of {}; it has {has}", names.join(", ")));
            }
            for (path, allowed) in &parts.closed_maps {
                let map_path = [step_path.clone(), path.clone()].concat();
                for (k, pos) in self.tree.keys(&map_path) {
                    if !allowed.contains(&k) {
                        self.problem(
                            pos,
                            format!("unknown key `{k}` in `{step_name}`; allowed here: {}", allowed.join(", ")),
                        );
                    }
                }
            }
            for (path, message) in &parts.misuses {
                self.at(&[step_path.clone(), path.clone()].concat(), message.clone());
            }
            if let Some(expect) = parts.expect {
                let expect_path = [step_path.clone(), vec![key("expect")]].concat();
                match expect {
                    Expect::One(name) => self.status(name, &expect_path),
                    Expect::AnyOf(names) if names.is_empty() => {
                        self.at(&expect_path, "`expect: []` lists no status; name at least one".to_string())
                    }
                    Expect::AnyOf(names) => {
                        for (k, name) in names.iter().enumerate() {
                            self.status(name, &[expect_path.clone(), vec![Seg::Index(k)]].concat());
                        }
                    }
                }
            }
            for field in &parts.params {
                let path = [step_path.clone(), field.path.clone()].concat();
                let pos = self.tree.pos(&path);
                match (field.slot.var(), field.slot.literal()) {
                    (Some(var), _) => {
                        let name = var.trim_start_matches('$');
                        if case.matrix.contains_key(name) {
                            let type_name = field.slot.type_name();
                            let max = field.slot.max();
                            let data_size = field.data_size;
                            uses.entry(name.to_string()).or_default().push(Use { pos, type_name, max, data_size });
                        } else {
                            let declared: Vec<&str> = case.matrix.keys().map(String::as_str).collect();
                            let declared = if declared.is_empty() {
                                "the case has no matrix".to_string()
                            } else {
                                format!("its matrix has: {}", declared.join(", "))
                            };
                            self.problem(
                                pos,
                                format!("`{var}` is not a matrix parameter of `{}`; {declared}", case.name),
                            );
                        }
                    }
                    (None, Some(value)) if field.data_size => {
                        if let Some(message) = data_size_problem(value) {
                            self.problem(pos, message);
                        }
                    }
                    _ => {}
                }
            }
        }

        for (name, values) in &case.matrix {
            let key_path = [matrix_path.clone(), vec![key(name)]].concat();
            let Some(name_uses) = uses.get(name) else {
                let pos = self.tree.key_pos(&key_path);
                self.problem(
                    pos,
                    format!("matrix parameter `{name}` is never used; use it as `${name}` in a step, or remove it"),
                );
                continue;
            };
            for (k, value) in values.iter().enumerate() {
                let problem = name_uses.iter().find_map(|u| value_problem(name, value, u));
                if let Some(message) = problem {
                    self.at(&[key_path.clone(), vec![Seg::Index(k)]].concat(), message);
                }
            }
        }
    }

    /// The step's name as written (`io`), for messages.
    fn step_name(&self, steps_path: &[Seg], j: usize) -> String {
        self.tree
            .keys(&[steps_path, &[Seg::Index(j)]].concat())
            .first()
            .map(|(k, _)| k.to_string())
            .unwrap_or_else(|| "step".to_string())
    }

    fn status(&mut self, name: &str, path: &[Seg]) {
        if is_success(name) || Status::from_name(name).is_some() {
            return;
        }
        let hint = closest_status(name).map(|n| format!("did you mean `{n}`? ")).unwrap_or_default();
        self.at(
            path,
            format!(
                "unknown status `{name}` in expect; {hint}expected `success` or an NVMe status name such as \
                 `LBA Out of Range` (suites/README.md lists them)"
            ),
        );
    }
}

/// Whether `name` is the spelling for a successful completion in `expect`.
/// What is wrong with a reference to the namespace set, given the most members the
/// steps before it can have built (`None`: not known before the run).
fn set_problem(reference: SetRef, most: Option<u32>) -> Option<String> {
    match (reference, most) {
        (SetRef::Index(0), _) => {
            Some("`ns: 0`: members of the namespace set are numbered from 1 (`ns: zero` names NSID 0)".into())
        }
        (SetRef::Index(i), Some(n)) if i > n => Some(format!(
            "`ns: {i}` refers past the namespace set: the steps before this one build at most {n} namespace{} \
             (use_namespaces `count`, or create_namespace)",
            if n == 1 { "" } else { "s" }
        )),
        (SetRef::Some, Some(0)) => Some(
            "this step works on the namespace set, but no step before it builds one (use_namespaces, \
             existing_namespaces or create_namespace)"
                .into(),
        ),
        _ => None,
    }
}

pub fn is_success(name: &str) -> bool {
    name.trim().eq_ignore_ascii_case("success")
}

/// Why `value` of matrix parameter `name` cannot stand where `u` uses it, if it cannot.
fn value_problem(name: &str, value: &MatrixValue, u: &Use) -> Option<String> {
    let at = format!("`${name}` at {}", u.pos);
    match value {
        MatrixValue::Int(n) if *n > u.max => {
            Some(format!("matrix value {n} of `{name}` is too big for {at}: a {} holds 0 to {}", u.type_name, u.max))
        }
        MatrixValue::Int(n) if u.data_size => {
            data_size_problem(*n).map(|p| format!("matrix value {n} of `{name}`, used as {at}: {p}"))
        }
        MatrixValue::Int(_) => None,
        MatrixValue::Bool(_) | MatrixValue::Text(_) => Some(format!(
            "matrix value {} of `{name}` is {}, but {at} needs a whole number ({})",
            show(value),
            if matches!(value, MatrixValue::Bool(_)) { "a boolean" } else { "text" },
            u.type_name
        )),
    }
}

/// Why `size` is not an LBA data size in bytes, if it is not.
fn data_size_problem(size: u64) -> Option<String> {
    if size >= 512 && size.is_power_of_two() {
        None
    } else {
        Some(format!(
            "{size} is not an LBA data size; give the size in bytes, a power of two of at least 512 (512, 4096)"
        ))
    }
}

fn show(value: &MatrixValue) -> String {
    match value {
        MatrixValue::Int(n) => n.to_string(),
        MatrixValue::Bool(b) => b.to_string(),
        MatrixValue::Text(t) => format!("`{t}`"),
    }
}

/// kebab-case: a-z and 0-9 words joined by single `-`.
pub fn is_kebab(name: &str) -> bool {
    !name.is_empty()
        && name
            .split('-')
            .all(|word| !word.is_empty() && word.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
}

/// A matrix parameter name: a lowercase letter or `_`, then a-z, 0-9, `_`.
fn is_param_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The status name (or `success`) nearest to a misspelt one, when one is near enough.
fn closest_status(name: &str) -> Option<String> {
    let wanted = name.trim().to_ascii_lowercase();
    let candidates = Status::all_named().filter_map(|s| s.name()).chain(["success"]);
    let (distance, best) =
        candidates.map(|c| (edit_distance(&wanted, &c.to_ascii_lowercase()), c)).min_by_key(|(d, _)| *d)?;
    (distance <= (wanted.len() / 4).max(2)).then(|| best.to_string())
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(previous + 1).min(row[j] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::yaml_options;

    /// Validates a suite whose single case has these matrix and steps lines.
    fn all_problems(case_body: &str) -> Vec<String> {
        let text = format!("suite: s\ntitle: t\nspec: []\ncases:\n  - name: c\n    title: t\n    rule: r\n{case_body}");
        let suite: Suite = serde_saphyr::from_str_with_options(&text, yaml_options()).unwrap();
        let tree = Node::parse(&text, yaml_options()).unwrap();
        validate(&suite, &tree, None).into_iter().map(|p| format!("{}: {}", p.pos, p.message)).collect()
    }

    /// [`all_problems`] without those of the namespace set (most cases here name `ns: 1`
    /// without building a set, to keep them short).
    fn problems(case_body: &str) -> Vec<String> {
        all_problems(case_body).into_iter().filter(|p| !p.contains("namespace set")).collect()
    }

    #[test]
    fn references_past_the_namespace_set_are_found_before_the_run() {
        let found = all_problems(
            "    steps:\n      - verify: {ns: 1}\n      - use_namespaces: {count: 2, lbads: [512], blocks: 8}\n      - write: {ns: 2, lba: 0, blocks: 1}\n      - verify: {ns: 3}\n      - create_namespace: {lbads: 512, blocks: 8}\n      - attach: {ns: 3}\n      - detach: {ns: 0}\n      - use_namespaces: {count: 0, lbads: [512], blocks: 8}\n",
        );
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(found[0]
            .starts_with("9:22: `ns: 1` refers past the namespace set: the steps before this one build at most 0"));
        assert!(found[1]
            .starts_with("12:22: `ns: 3` refers past the namespace set: the steps before this one build at most 2"));
        assert!(found[2].starts_with("15:22: `ns: 0`: members of the namespace set are numbered from 1"));
        assert!(found[3].starts_with("16:33: `count: 0` builds an empty namespace set"));
        let last = all_problems("    steps:\n      - flush: {ns: last}\n");
        assert!(last[0].contains("no step before it builds one"), "{last:?}");
        // After a set whose size is known only at run time, nothing is judged.
        assert!(all_problems("    steps:\n      - existing_namespaces: {}\n      - verify: {ns: 7}\n").is_empty());
    }

    #[test]
    fn a_clean_case_has_no_problems() {
        let found = problems(
            "    matrix: {lbads: [512, 4096]}\n    steps:\n      - use_namespaces: {count: 1, lbads: [$lbads], blocks: 8}\n      - io: {ns: last, op: read, lba: end, blocks: 1, expect: LBA Out of Range}\n",
        );
        assert_eq!(found, Vec::<String>::new());
    }

    #[test]
    fn an_undeclared_variable_is_located_at_its_use() {
        let found = problems("    steps:\n      - io: {ns: 1, op: read, lba: $at, blocks: 1}\n");
        assert_eq!(found, ["9:36: `$at` is not a matrix parameter of `c`; the case has no matrix"]);
    }

    #[test]
    fn an_unused_parameter_is_located_at_its_key() {
        let found = problems("    matrix: {n: [1]}\n    steps:\n      - flush: {ns: 1}\n");
        assert_eq!(found, ["8:14: matrix parameter `n` is never used; use it as `$n` in a step, or remove it"]);
    }

    #[test]
    fn a_value_of_the_wrong_type_is_located_at_the_value() {
        let found = problems("    matrix: {f: [1, 300]}\n    steps:\n      - format: {ns: 1, lbaf: $f}\n");
        assert_eq!(found, ["8:21: matrix value 300 of `f` is too big for `$f` at 10:31: a u8 holds 0 to 255"]);
        let found = problems("    matrix: {b: [1, big]}\n    steps:\n      - flush: {ns: $b}\n");
        assert_eq!(found, ["8:21: matrix value `big` of `b` is text, but `$b` at 10:21 needs a whole number (u32)"]);
    }

    #[test]
    fn data_sizes_are_powers_of_two_of_at_least_512() {
        let found =
            problems("    matrix: {l: [512, 9]}\n    steps:\n      - create_until_full: {lbads: $l, blocks: 1}\n");
        assert_eq!(
            found,
            ["8:23: matrix value 9 of `l`, used as `$l` at 10:36: 9 is not an LBA data size; give the size in bytes, a power of two of at least 512 (512, 4096)"]
        );
    }

    #[test]
    fn one_of_lbads_and_lbaf() {
        let found = problems("    steps:\n      - create_namespace: {lbads: 512, lbaf: 1, blocks: 8}\n");
        assert_eq!(found, ["9:27: `create_namespace` needs exactly one of `lbads`, `lbaf`; it has lbads and lbaf"]);
    }

    #[test]
    fn keys_of_generated_ranges_are_checked() {
        let found =
            problems("    steps:\n      - deallocate: {ns: 1, ranges: {count: 2, blocks: 1, stride: 4, strat: 1}}\n");
        assert_eq!(found, ["9:70: unknown key `strat` in `deallocate`; allowed here: count, blocks, stride, start"]);
    }

    #[test]
    fn names_a_step_cannot_take_are_rejected() {
        let found = problems(
            "    steps:\n      - flush: {ns: all}\n      - verify: {ns: zero, blocks: remaining}\n      - create_namespace: {lbads: 512, blocks: whole}\n",
        );
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(found[0].starts_with("9:21: `ns: all` names every namespace of the set; this step takes one"));
        assert!(found[1].starts_with("10:22: `ns: zero` is not a namespace of the set"));
        assert!(found[2].starts_with("10:36: `blocks: remaining` only sizes a new namespace"));
        assert!(found[3].starts_with("11:48: `blocks: whole` is a range over a namespace"));
    }

    #[test]
    fn a_misspelt_status_gets_a_suggestion() {
        let found = problems(
            "    steps:\n      - io: {ns: 1, op: read, lba: 0, blocks: 1, expect: [success, LBA Out of Rang]}\n",
        );
        assert_eq!(found.len(), 1);
        assert!(
            found[0].starts_with("9:68: unknown status `LBA Out of Rang` in expect; did you mean `LBA Out of Range`?"),
            "{found:?}"
        );
    }

    #[test]
    fn names_and_distances() {
        assert!(is_kebab("create-32-namespaces") && !is_kebab("Create") && !is_kebab("a--b") && !is_kebab("a/b"));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(closest_status("sucess").as_deref(), Some("success"));
        assert_eq!(closest_status("completely different"), None);
    }
}
