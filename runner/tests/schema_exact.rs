//! The suite JSON Schema (`nvtest schema`) says what the loader says: every malformed
//! fixture of `tests/malformed/` is rejected by both, every shipped and fixture suite is
//! accepted by both, checked with a real validator (the `jsonschema` crate). The mistakes no
//! JSON Schema can see are in `tests/malformed-semantic/`, which only the loader rejects.

use std::path::{Path, PathBuf};

use nvtest::suite::{json_schema, load_str, yaml_options};

#[path = "common/fixtures.rs"]
mod fixtures;
use fixtures::yaml_files;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(&json_schema()).expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema")
}

/// The file as the JSON instance a schema validates: YAML read with the loader's options.
fn instance(text: &str) -> Result<serde_json::Value, String> {
    serde_saphyr::from_str_with_options(text, yaml_options()).map_err(|e| e.to_string())
}

/// What the schema says about `text`: `Ok` or the first error with its instance path.
fn schema_verdict(validator: &jsonschema::Validator, text: &str) -> Result<(), String> {
    let value = instance(text).map_err(|e| format!("not a JSON instance: {e}"))?;
    let first = validator.iter_errors(&value).next().map(|error| format!("{error} at {}", error.instance_path));
    first.map_or(Ok(()), Err)
}

fn loader_verdict(text: &str, path: &Path) -> Result<(), String> {
    load_str(text, path, None).map(|_| ()).map_err(|e| e.to_string())
}

#[test]
fn every_malformed_suite_is_rejected_by_the_loader_and_by_the_schema() {
    let validator = validator();
    let mut accepted = Vec::new();
    for file in yaml_files(&manifest_dir().join("tests/malformed")) {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(loader_verdict(&text, &file).is_err(), "the loader accepts {}", file.display());
        let value = instance(&text).unwrap_or_else(|e| panic!("{} is not a JSON instance: {e}", file.display()));
        if validator.is_valid(&value) {
            accepted.push(file.display().to_string());
        }
    }
    assert!(accepted.is_empty(), "the schema accepts malformed suites: {accepted:#?}");
}

#[test]
fn every_semantic_mistake_is_rejected_by_the_loader_though_no_schema_sees_it() {
    let validator = validator();
    for file in yaml_files(&manifest_dir().join("tests/malformed-semantic")) {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(loader_verdict(&text, &file).is_err(), "the loader accepts {}", file.display());
        // The README says why the schema cannot see it; this keeps that honest: were the
        // schema to reject the file, the file belongs in tests/malformed/.
        assert!(
            schema_verdict(&validator, &text).is_ok() || instance(&text).is_err(),
            "the schema rejects {}; move it to tests/malformed/",
            file.display()
        );
        let readme = std::fs::read_to_string(manifest_dir().join("tests/malformed-semantic/README.md")).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(readme.contains(&format!("`{name}`")), "tests/malformed-semantic/README.md does not explain {name}");
    }
}

#[test]
fn every_shipped_and_fixture_suite_is_accepted_by_the_loader_and_by_the_schema() {
    let validator = validator();
    let mut files = yaml_files(&manifest_dir().join("../suites"));
    files.extend(yaml_files(&manifest_dir().join("tests/suites")));
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        loader_verdict(&text, &file).unwrap_or_else(|e| panic!("the loader rejects {}: {e}", file.display()));
        schema_verdict(&validator, &text).unwrap_or_else(|e| panic!("the schema rejects {}: {e}", file.display()));
    }
}

/// A one-case suite whose case has these `requires` and steps lines.
fn suite(requires: &str, steps: &str) -> String {
    format!(
        "suite: s\ntitle: t\nspec: []\ncases:\n  - name: c\n    title: t\n    rule: r\n    requires: {requires}\n    steps:\n{steps}"
    )
}

/// Asserts the loader and the schema agree on `text`, and that they say `accepted`.
fn both(validator: &jsonschema::Validator, text: &str, accepted: bool) {
    let loader = loader_verdict(text, Path::new("inline.yaml"));
    let schema = schema_verdict(validator, text);
    assert_eq!(loader.is_ok(), accepted, "loader: {loader:?}\n{text}");
    assert_eq!(schema.is_ok(), accepted, "schema: {schema:?}\n{text}");
}

#[test]
fn a_version_written_as_a_yaml_number_is_accepted_by_both() {
    let validator = validator();
    let check = "      - check: identify_controller\n";
    for version in ["1.4", "\"1.4\"", "1", "\"1.2.1\"", "1.2.1", "\"+01.004\""] {
        both(&validator, &suite(&format!("[{{version: {version}}}]"), check), true);
    }
    for version in ["\"1.x\"", "\"1.256\"", "\"65536.0\"", "\"1.2.3.4\"", "\"\"", "\"1.\""] {
        both(&validator, &suite(&format!("[{{version: {version}}}]"), check), false);
    }
}

#[test]
fn both_agree_on_the_rules_around_each_step() {
    let validator = validator();
    let set = "      - use_namespaces: {count: 2, lbads: [512, 4096], blocks: 4096}\n";
    let accepted = [
        "      - io: {ns: last, op: read, lba: {from_end: 1}, blocks: 1, expect: [success, lba out of range]}\n",
        "      - create_namespace: {lbaf: 0, lbads: null, blocks: remaining, expect: '  Success '}\n",
        "      - deallocate: {ns: 1, ranges: {count: 2, blocks: 1, stride: 4, start: 8}}\n",
        "      - write: {ns: all, lba: 0, blocks: whole, reverse: true}\n",
        "      - identify: {cns: 255, ns: beyond_nn, zero_filled: true}\n",
    ];
    for step in accepted {
        both(&validator, &suite("[]", &format!("{set}{step}")), true);
    }
    let rejected = [
        "      - io: {ns: 1, op: read, lba: 0, blocks: 4294967296}\n",
        "      - io: {ns: 1, op: read, lba: 0, blocks: 1, expect: []}\n",
        "      - io: {ns: 1, op: read, lba: {from_end: 1, by: 2}, blocks: 1}\n",
        "      - create_namespace: {blocks: 8}\n",
        "      - create_namespace: {lbads: 520, blocks: 8}\n",
        "      - create_namespace: {lbads: 512, blocks: whole}\n",
        "      - verify: {ns: zero, blocks: remaining}\n",
        "      - verify: {ns: unallocated}\n",
        "      - detach: {ns: 0}\n",
        "      - identify: {cns: 256, ns: 1}\n",
    ];
    for step in rejected {
        both(&validator, &suite("[]", &format!("{set}{step}")), false);
    }
    both(&validator, &suite("[{lbads: 4096}, {namespaces: 4294967295}]", set), true);
    both(&validator, &suite("[{lbads: 4097}]", set), false);
    both(&validator, &suite("[{namespaces: 4294967296}]", set), false);
}

#[test]
fn both_agree_on_matrices_names_and_read_only_cases() {
    let validator = validator();
    let body = |matrix: &str| {
        format!(
            "suite: s\ntitle: t\nspec: []\ncases:\n  - name: c\n    title: t\n    rule: r\n    matrix: {matrix}\n    steps:\n      - use_namespaces: {{count: 1, lbads: [$l], blocks: 8}}\n"
        )
    };
    both(&validator, &body("{l: [512, 4096]}"), true);
    for matrix in ["{l: [512, 512]}", "{l: [512, true]}", "{l: []}", "{L: [512]}"] {
        both(&validator, &body(matrix), false);
    }
    let named = |suite: &str, case: &str, rule: &str| {
        format!(
            "suite: {suite}\ntitle: t\nspec: []\ncases:\n  - name: {case}\n    title: t\n    rule: '{rule}'\n    steps:\n      - check: identify_controller\n"
        )
    };
    both(&validator, &named("a-1", "b-2", "r"), true);
    both(&validator, &named("A", "b", "r"), false);
    both(&validator, &named("a", "b--c", "r"), false);
    both(&validator, &named("a", "b", "  "), false);
    let read_only = |step: &str| {
        format!(
            "suite: s\ntitle: t\nspec: []\ndestructive: true\ncases:\n  - name: c\n    title: t\n    rule: r\n    destructive: false\n    steps:\n      - existing_namespaces: {{}}\n{step}"
        )
    };
    both(&validator, &read_only("      - io: {ns: 1, op: flush, lba: 0, blocks: 1}\n"), true);
    both(&validator, &read_only("      - io: {ns: 1, op: write, lba: 0, blocks: 1}\n"), false);
    both(&validator, &read_only("      - flush: {ns: 1}\n"), false);
    both(&validator, "suite: s\ntitle: t\nspec: []\ncases: []\n", false);
}
