//! Every word of the suite vocabulary earns its place: each step and each named check the
//! vocabulary offers is used by at least one case of the shipped suites (every file of suites/), so nothing nvtest
//! can do goes unexercised against the drives it runs on (and the twins of those cases
//! prove it can fail). The vocabulary's words are read from the JSON Schema nvtest
//! generates from it, so a step added without a case fails here.

use std::collections::BTreeSet;
use std::path::PathBuf;

use nvtest::suite::load_file;
use nvtest::suite::model::{CheckName, Step};

fn shipped_steps() -> Vec<Step> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../suites");
    let mut steps = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("suites/")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "shipped suites: {files:?}");
    for path in files {
        let name = path.file_stem().and_then(|s| s.to_str()).expect("a suite file name");
        let suite = load_file(&path, Some(name)).unwrap_or_else(|e| panic!("{e}"));
        steps.extend(suite.cases.into_iter().flat_map(|c| c.steps));
    }
    steps
}

/// The name a step is written with in a suite (its one key).
fn step_name(step: &Step) -> String {
    match serde_json::to_value(step).expect("a step serialises") {
        serde_json::Value::Object(m) => m.keys().next().cloned().expect("one key"),
        serde_json::Value::String(s) => s,
        other => panic!("unexpected step form {other}"),
    }
}

/// Every step name the schema of `Step` allows: the one required key of each variant.
fn vocabulary() -> BTreeSet<String> {
    let schema = serde_json::to_value(schemars::schema_for!(Step)).expect("schema");
    let variants = schema.get("oneOf").or_else(|| schema.get("anyOf")).and_then(|v| v.as_array()).expect("variants");
    variants
        .iter()
        .flat_map(|v| {
            let required = v.get("required").and_then(|r| r.as_array()).cloned().unwrap_or_default();
            let names = v.get("enum").and_then(|e| e.as_array()).cloned().unwrap_or_default();
            required.into_iter().chain(names).filter_map(|n| n.as_str().map(str::to_string))
        })
        .collect()
}

#[test]
fn every_step_of_the_vocabulary_is_used_by_some_case() {
    let words = vocabulary();
    assert!(words.len() >= 20, "the schema lists only {words:?}");
    let used: BTreeSet<String> = shipped_steps().iter().map(step_name).collect();
    let unused: Vec<&String> = words.iter().filter(|w| !used.contains(*w)).collect();
    assert!(unused.is_empty(), "steps no shipped case uses: {unused:?}");
}

#[test]
fn every_named_check_is_used_by_some_case() {
    let schema = serde_json::to_value(schemars::schema_for!(CheckName)).expect("schema");
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut collect = |v: &serde_json::Value| {
        for n in v.get("enum").and_then(|e| e.as_array()).into_iter().flatten() {
            names.extend(n.as_str().map(str::to_string));
        }
        if let Some(c) = v.get("const").and_then(|c| c.as_str()) {
            names.insert(c.to_string());
        }
    };
    collect(&schema);
    for v in schema.get("oneOf").and_then(|v| v.as_array()).into_iter().flatten() {
        collect(v);
    }
    assert!(names.len() >= 10, "the schema lists only {names:?}");
    let used: BTreeSet<String> = shipped_steps()
        .iter()
        .filter_map(|s| match s {
            Step::Check(c) => serde_json::to_value(c).ok().and_then(|v| v.as_str().map(str::to_string)),
            _ => None,
        })
        .collect();
    let unused: Vec<&String> = names.iter().filter(|n| !used.contains(*n)).collect();
    assert!(unused.is_empty(), "named checks no shipped case uses: {unused:?}");
}
