//! Matrix expansion: a case with `matrix: {a: [1, 2], b: [x]}` becomes one case per
//! combination (cartesian product, parameters in key order, values in list order), named
//! `case/a=1,b=x`, with every `$name` parameter replaced by its value. A case without a
//! matrix is one case under its own name. Runs on validated suites only.

use super::model::{Case, MatrixValue, Suite};
use super::params::step_parts;
use super::spans::{key, Seg};
use super::ExpandedCase;

/// A value that could not be put where its `$name` stands (validation prevents this).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpandError {
    /// Where, in the suite file's tree.
    pub path: Vec<Seg>,
    pub message: String,
}

/// Expands every case of a validated suite, in file order.
pub fn expand(suite: &Suite) -> Result<Vec<ExpandedCase>, ExpandError> {
    let mut cases = Vec::new();
    for (i, case) in suite.cases.iter().enumerate() {
        for combination in combinations(case) {
            cases.push(expand_one(suite, case, i, combination)?);
        }
    }
    Ok(cases)
}

/// Every combination of the case's matrix values, in key order; one empty combination
/// when there is no matrix.
pub fn combinations(case: &Case) -> Vec<Vec<(String, MatrixValue)>> {
    let mut all: Vec<Vec<(String, MatrixValue)>> = vec![Vec::new()];
    for (name, values) in &case.matrix {
        all = all
            .into_iter()
            .flat_map(|prefix| {
                values.iter().map(move |value| {
                    let mut combination = prefix.clone();
                    combination.push((name.clone(), value.clone()));
                    combination
                })
            })
            .collect();
    }
    all
}

/// `case` or `case/a=1,b=x`.
pub fn case_name(base: &str, combination: &[(String, MatrixValue)]) -> String {
    if combination.is_empty() {
        return base.to_string();
    }
    let values: Vec<String> = combination.iter().map(|(name, value)| format!("{name}={}", value_text(value))).collect();
    format!("{base}/{}", values.join(","))
}

fn value_text(value: &MatrixValue) -> String {
    match value {
        MatrixValue::Int(n) => n.to_string(),
        MatrixValue::Bool(b) => b.to_string(),
        MatrixValue::Text(t) => t.clone(),
    }
}

fn expand_one(
    suite: &Suite,
    case: &Case,
    index: usize,
    combination: Vec<(String, MatrixValue)>,
) -> Result<ExpandedCase, ExpandError> {
    let mut steps = case.steps.clone();
    for (j, step) in steps.iter_mut().enumerate() {
        for mut field in step_parts(step).params {
            let Some(var) = field.slot.var().map(str::to_string) else { continue };
            let path = || {
                [vec![key("cases"), Seg::Index(index), key("steps"), Seg::Index(j), Seg::Sole], field.path.clone()]
                    .concat()
            };
            let name = var.trim_start_matches('$');
            let value = combination.iter().find(|(n, _)| n == name).map(|(_, v)| v);
            let result = match value {
                Some(MatrixValue::Int(n)) => field.slot.set(*n),
                Some(other) => Err(format!("{} is not a whole number", value_text(other))),
                None => Err(format!("`{var}` is not a matrix parameter of `{}`", case.name)),
            };
            result.map_err(|message| ExpandError { path: path(), message })?;
        }
    }
    let mut requires = suite.requires.clone();
    requires.extend(case.requires.iter().cloned());
    Ok(ExpandedCase {
        suite: suite.suite.clone(),
        name: case_name(&case.name, &combination),
        title: case.title.clone(),
        rule: case.rule.clone(),
        requires,
        destructive: case.destructive.unwrap_or(suite.destructive),
        advisory: case.advisory,
        steps,
        params: combination,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::model::{Lba, NsRef, Param, Requirement, Step};
    use crate::suite::yaml_options;

    fn suite(text: &str) -> Suite {
        serde_saphyr::from_str_with_options(text, yaml_options()).unwrap()
    }

    const TWO_BY_THREE: &str = "suite: s\ntitle: t\nspec: []\nrequires: [dataset_management]\ncases:
  - name: c
    title: t
    rule: r
    requires: [{lbads: 4096}]
    matrix: {lbads: [512, 4096], blocks: [1, 8, 256]}
    steps:
      - use_namespaces: {count: 1, lbads: [$lbads], blocks: 65536}
      - write_zeroes: {ns: 1, lba: 100, blocks: $blocks}
";

    #[test]
    fn the_cartesian_product_in_key_order_names_each_case() {
        let cases = expand(&suite(TWO_BY_THREE)).unwrap();
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "c/blocks=1,lbads=512",
                "c/blocks=1,lbads=4096",
                "c/blocks=8,lbads=512",
                "c/blocks=8,lbads=4096",
                "c/blocks=256,lbads=512",
                "c/blocks=256,lbads=4096",
            ]
        );
    }

    #[test]
    fn every_variable_is_replaced_by_its_value() {
        let cases = expand(&suite(TWO_BY_THREE)).unwrap();
        let case = &cases[3];
        assert_eq!(
            case.params,
            [("blocks".to_string(), MatrixValue::Int(8)), ("lbads".to_string(), MatrixValue::Int(4096))]
        );
        assert_eq!(
            case.steps,
            [
                Step::UseNamespaces {
                    count: Param::Value(1),
                    lbads: vec![Param::Value(4096)],
                    blocks: Param::Value(65536),
                    create: false,
                    shared: false,
                },
                Step::WriteZeroes {
                    ns: NsRef::Index(Param::Value(1)),
                    lba: Lba::At(Param::Value(100)),
                    blocks: Param::Value(8),
                    deac: false,
                    expect: None,
                },
            ]
        );
    }

    #[test]
    fn suite_requirements_come_first() {
        let cases = expand(&suite(TWO_BY_THREE)).unwrap();
        assert_eq!(cases[0].requires, [Requirement::DatasetManagement, Requirement::Lbads(4096)]);
        assert_eq!(cases[0].suite, "s");
    }

    #[test]
    fn a_case_without_matrix_keeps_its_name() {
        let text = "suite: s\ntitle: t\nspec: []\ncases:\n  - name: plain\n    title: t\n    rule: r\n    steps:\n      - flush: {ns: last}\n";
        let cases = expand(&suite(text)).unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(cases[0].name, "plain");
        assert!(cases[0].params.is_empty());
    }

    #[test]
    fn an_unvalidated_bad_value_is_an_error_not_a_panic() {
        let text = "suite: s\ntitle: t\nspec: []\ncases:\n  - name: c\n    title: t\n    rule: r\n    matrix: {f: [300]}\n    steps:\n      - format: {ns: 1, lbaf: $f}\n";
        let error = expand(&suite(text)).unwrap_err();
        assert_eq!(error.message, "300 does not fit a u8");
        assert_eq!(error.path, [key("cases"), Seg::Index(0), key("steps"), Seg::Index(0), Seg::Sole, key("lbaf")]);
    }
}
