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
    // The git directory as git names it: in a worktree `.git` is a file, and a path
    // that does not exist would make cargo run this script (and rebuild nvtest) always.
    let git_dir = Command::new("git")
        .args(["rev-parse", "--absolute-git-dir"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|d| !d.is_empty());
    match git_dir {
        Some(dir) => {
            for file in ["HEAD", "index"] {
                println!("cargo:rerun-if-changed={dir}/{file}");
            }
        }
        None => println!("cargo:rerun-if-changed=build.rs"),
    }
}
