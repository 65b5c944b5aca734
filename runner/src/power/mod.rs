//! Power-fail data integrity (issue 11): what a power cut may take back and what it may
//! not, judged block by block after the drive comes back.
//!
//! - [`ledger`]: the writes and flushes of one power cycle as the engine journals them,
//!   and which writes had to survive (FUA, Flush, or every completed write).
//! - [`journal_file`]: the same events in a file on the host, batched and synced, read
//!   back with a torn tail tolerated (what a verification after nvtest died starts from).
//! - [`resume`]: `nvtest resume JOURNAL`, the last cycle judged after nvtest died.
//! - [`verify`]: every block of the load's ranges read back and judged: durable data
//!   lost, foreign or garbage data, atomic writes torn; findings as LBA ranges per command.
//!
//! The campaign itself (load, cut, power-on, SMART, ready time) is the `power_fail` step
//! ([`crate::steps::power_fail`]).

pub mod journal_file;
pub mod ledger;
pub mod resume;
pub mod verify;

pub use ledger::{Durable, Ledger, Survival};

/// Where a run keeps its power-fail journals (`--journal DIR`) and the target they are
/// of, as given on the command line (what `nvtest resume` opens again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalSetup {
    pub dir: std::path::PathBuf,
    pub target: String,
}
pub use verify::{verify, Broken, Finding, Range, Verified};
