//! Power-fail data integrity (issue 11): what a power cut may take back and what it may
//! not, judged block by block after the drive comes back.
//!
//! - [`ledger`]: the writes and flushes of one power cycle as the engine journals them,
//!   and which writes had to survive (FUA, Flush, or every completed write).
//! - [`journal_file`]: the same events in a file on the host, batched and synced, read
//!   back with a torn tail tolerated (what a verification after nvtest died starts from).
//! - [`verify`]: every block of the load's ranges read back and judged: durable data
//!   lost, foreign or garbage data, atomic writes torn; findings as LBA ranges per command.
//!
//! The campaign itself (load, cut, power-on, SMART, ready time) is the `power_fail` step
//! ([`crate::steps::power_fail`]).

pub mod journal_file;
pub mod ledger;
pub mod verify;

pub use ledger::{Durable, Ledger, Survival};
pub use verify::{verify, Broken, Finding, Range, Verified};
