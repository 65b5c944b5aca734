//! Fixture files shared by the tests of what nvtest loads (suites, claims): the YAML files
//! of a folder, and what a malformed fixture expects.

use std::path::{Path, PathBuf};

/// The `.yaml` files of `dir`, sorted; at least one.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no YAML files in {}", dir.display());
    files
}

/// What a malformed fixture says its error is: `LINE:COL: message` from its
/// `# expect: LINE:COL: message` line.
#[allow(dead_code)]
pub fn expectation(fixture: &Path) -> String {
    let text = std::fs::read_to_string(fixture).unwrap();
    let line = text.lines().find_map(|l| l.strip_prefix("# expect: "));
    line.unwrap_or_else(|| panic!("{} has no `# expect: LINE:COL: message` line", fixture.display())).to_string()
}
