//! A session with one device: opens the target, learns its identity, and runs cases
//! one at a time, turning each case's steps into a [`CaseOutcome`].

use crate::suite::ExpandedCase;
use crate::target::TargetSpec;
use crate::verdict::{CaseOutcome, Verdict};

/// Who the device under test is: printed on every report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// The target as given ("sim:enterprise-1.4", "qemu:ns32", "/dev/nvme0").
    pub target: String,
    /// Identify Controller MN, SN, FR (trimmed), and the NVMe version (VER, or VS).
    pub model: String,
    pub serial: String,
    pub firmware: String,
    pub version: String,
}

/// One open device and everything nvtest remembers about it across cases.
pub struct Session {
    identity: DeviceIdentity,
}

impl Session {
    /// Opens the target and reads its identity. Errors are one line, for the console.
    pub fn open(target: &TargetSpec) -> Result<Session, String> {
        Err(format!("{}: targets cannot be opened yet", target.describe()))
    }

    pub fn identity(&self) -> &DeviceIdentity {
        &self.identity
    }

    /// Runs one expanded case: requirements, then its steps; never panics on device answers.
    pub fn run_case(&mut self, case: &ExpandedCase) -> CaseOutcome {
        CaseOutcome {
            verdict: Verdict::Error(format!("{}: steps cannot run yet", case.name)),
            log: Vec::new(),
            duration: Default::default(),
        }
    }
}
