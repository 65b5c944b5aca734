//! Records the git commit nvtest is built from (NVTEST_GIT_COMMIT) for the run record;
//! a build outside a git checkout, or without git, records none ("unknown").

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string());
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| !o.stdout.is_empty());
    if let Some(commit) = commit.filter(|c| !c.is_empty()) {
        let suffix = if dirty { "-dirty" } else { "" };
        println!("cargo:rustc-env=NVTEST_GIT_COMMIT={commit}{suffix}");
    }
    // Rebuilt when HEAD moves (a commit, a checkout); the dirty mark follows source edits.
    for path in ["../.git/HEAD", "../.git/index"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
