//! Targets: what the TARGET argument names and how it is opened.
//!
//! `sim` (the default profile, also when TARGET is omitted), `sim:NAME`
//! (`fixtures/sim/NAME.yaml`, embedded in the binary) and `sim:PATH.yaml`.

use std::path::PathBuf;

use nvme::device::Device;
use nvme::driver::{Controller, Options};
use nvme_sim::Profile;

/// A parsed TARGET argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetSpec {
    /// The simulated drive with a shipped profile.
    SimProfile(String),
    /// The simulated drive with a profile file.
    SimFile(PathBuf),
}

/// The profile used by `sim` and when TARGET is omitted.
pub const DEFAULT_SIM_PROFILE: &str = "enterprise-1.4";

impl TargetSpec {
    /// Parses a TARGET argument; the error is one line saying what is allowed.
    pub fn parse(text: &str) -> Result<TargetSpec, String> {
        let text = text.trim();
        if text.is_empty() || text == "sim" {
            return Ok(TargetSpec::SimProfile(DEFAULT_SIM_PROFILE.to_string()));
        }
        if let Some(rest) = text.strip_prefix("sim:") {
            if rest.ends_with(".yaml") || rest.ends_with(".yml") || rest.contains('/') {
                return Ok(TargetSpec::SimFile(PathBuf::from(rest)));
            }
            if !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                return Ok(TargetSpec::SimProfile(rest.to_string()));
            }
        }
        Err(format!(
            "unknown target `{text}`: expected `sim`, `sim:PROFILE` (a name in fixtures/sim) or `sim:PATH.yaml`"
        ))
    }

    /// The target as written for reports.
    pub fn describe(&self) -> String {
        match self {
            TargetSpec::SimProfile(name) => format!("sim:{name}"),
            TargetSpec::SimFile(path) => format!("sim:{}", path.display()),
        }
    }
}

/// Opens a target and brings its controller up. The error is one line for the console
/// (a profile error carries file:line:column).
pub fn open(spec: &TargetSpec) -> Result<Box<dyn Device>, String> {
    match spec {
        TargetSpec::SimProfile(name) => {
            let profile = Profile::builtin(name).map_err(|e| e.to_string())?;
            open_sim(profile)
        }
        TargetSpec::SimFile(path) => {
            let profile = Profile::from_path(path).map_err(|e| e.to_string())?;
            open_sim(profile)
        }
    }
}

/// The simulated drive of `profile`, behind nvtest's own host driver.
pub fn open_sim(profile: Profile) -> Result<Box<dyn Device>, String> {
    let name = profile.name.clone();
    let transport = nvme_sim::open(profile).map_err(|e| format!("sim:{name}: {e}"))?;
    let controller =
        Controller::new(Box::new(transport), Options::default()).map_err(|e| format!("sim:{name}: bring-up: {e}"))?;
    Ok(Box::new(controller))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_arguments() {
        assert_eq!(TargetSpec::parse("sim").unwrap(), TargetSpec::SimProfile(DEFAULT_SIM_PROFILE.into()));
        assert_eq!(TargetSpec::parse("sim:enterprise-1.2a").unwrap(), TargetSpec::SimProfile("enterprise-1.2a".into()));
        assert_eq!(TargetSpec::parse("sim:x/y.yaml").unwrap(), TargetSpec::SimFile("x/y.yaml".into()));
        assert!(TargetSpec::parse("tcp:1.2.3.4").unwrap_err().contains("expected `sim`"));
    }
}
