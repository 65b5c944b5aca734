//! How a run was run, for its records: which nvtest (version, git commit), the command
//! line, the host and its kernel, when, the run's seed and repeat, and every input file
//! (suites, expected findings, claims) with its SHA-256, so a report can be traced to exactly
//! what produced it.

use std::path::Path;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

/// The git commit nvtest was built from (`build.rs`), or "unknown" outside a checkout.
pub const GIT_COMMIT: &str = match option_env!("NVTEST_GIT_COMMIT") {
    Some(commit) => commit,
    None => "unknown",
};

/// An input file of the run and its digest.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct InputFile {
    /// The path as the run used it.
    pub path: String,
    /// SHA-256 of its bytes, lowercase hex; empty when it could not be read again.
    pub sha256: String,
}

impl InputFile {
    /// Reads and digests `path`; a file that cannot be read has an empty digest (it was
    /// read once already to load it, so this is not the run's error to report).
    pub fn of(path: &Path) -> InputFile {
        let sha256 = std::fs::read(path).map(|bytes| hex(&Sha256::digest(&bytes))).unwrap_or_default();
        InputFile { path: path.display().to_string(), sha256 }
    }
}

/// What was asked of the run and where it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunMeta {
    pub nvtest_version: String,
    pub git_commit: String,
    /// The arguments as given, the program first.
    pub command_line: Vec<String>,
    pub host: String,
    /// `uname -r` and `uname -v` of the host running nvtest.
    pub kernel: String,
    pub started: SystemTime,
    /// Set when the record is written at the end (or at an interruption).
    pub ended: Option<SystemTime>,
    /// The run seed (`--seed` replays it).
    pub seed: u64,
    /// `--repeat`: a count, or "until-failure".
    pub repeat: String,
    pub suites: Vec<InputFile>,
    /// `--expect` files.
    pub expect: Vec<InputFile>,
    /// The `--claims` file.
    pub claims: Option<InputFile>,
}

impl RunMeta {
    /// The metadata of a run starting now.
    pub fn now(command_line: Vec<String>, seed: u64, repeat: String) -> RunMeta {
        RunMeta {
            nvtest_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: GIT_COMMIT.to_string(),
            command_line,
            host: nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default(),
            kernel: nix::sys::utsname::uname()
                .map(|u| format!("{} {}", u.release().to_string_lossy(), u.version().to_string_lossy()))
                .unwrap_or_default(),
            started: SystemTime::now(),
            ended: None,
            seed,
            repeat,
            suites: Vec::new(),
            expect: Vec::new(),
            claims: None,
        }
    }

    /// The metadata as `name = value` pairs, for JUnit properties.
    pub fn properties(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("nvtest.version".to_string(), self.nvtest_version.clone()),
            ("nvtest.git_commit".into(), self.git_commit.clone()),
            ("nvtest.command_line".into(), shell_words(&self.command_line)),
            ("nvtest.host".into(), self.host.clone()),
            ("nvtest.kernel".into(), self.kernel.clone()),
            ("nvtest.started".into(), rfc3339(self.started)),
            ("nvtest.seed".into(), self.seed.to_string()),
            ("nvtest.repeat".into(), self.repeat.clone()),
        ];
        if let Some(ended) = self.ended {
            out.push(("nvtest.ended".into(), rfc3339(ended)));
        }
        for (kind, files) in [("suite", &self.suites), ("expect", &self.expect)] {
            for (i, f) in files.iter().enumerate() {
                out.push((format!("nvtest.{kind}.{}", i + 1), format!("{} sha256:{}", f.path, f.sha256)));
            }
        }
        if let Some(f) = &self.claims {
            out.push(("nvtest.claims".into(), format!("{} sha256:{}", f.path, f.sha256)));
        }
        out
    }
}

/// A time as RFC 3339 in UTC with milliseconds ("2026-12-02T03:04:16.123Z").
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    chrono::DateTime::from_timestamp(since.as_secs() as i64, since.subsec_nanos())
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

/// The arguments joined as a shell would read them back (quoted where needed).
pub fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_digest_is_its_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("abc");
        std::fs::write(&path, "abc").unwrap();
        assert_eq!(InputFile::of(&path).sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(InputFile::of(&dir.path().join("none")).sha256, "");
    }

    #[test]
    fn the_command_line_reads_back_in_a_shell() {
        let args = ["nvtest", "--filter", "a b", "it's", ""].map(String::from);
        assert_eq!(shell_words(&args), r"nvtest --filter 'a b' 'it'\''s' ''");
    }
}
