//! nvtest's exit statuses, shared by the command line ([`crate::cli`]), the run's
//! watch ([`crate::run::live`]) and the Linux guest ([`crate::targets::guest`]), whose
//! nvtest's status becomes the host's.

/// Nothing failed.
pub const EXIT_OK: i32 = 0;
/// A case failed or errored.
pub const EXIT_FAILED: i32 = 1;
/// Usage, suite, profile or target-open error, or a fault of the host under the
/// target: nvtest could not do its job.
pub const EXIT_USAGE: i32 = 2;
/// The filters selected no case: nothing ran (as nextest's "no tests to run").
pub const EXIT_NO_CASES: i32 = 4;
/// `--timeout` expired (the reports hold the cases that ran).
pub const EXIT_TIMEOUT: i32 = 124;
