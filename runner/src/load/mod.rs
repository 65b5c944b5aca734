//! The workload engine: jobs of queued I/O running at once on one controller, every
//! block written tagged and every block read judged as it completes, with latency
//! figures per job and operation (DESIGN.md, "Load, time and claims").
//!
//! - [`job`]: what a job is (namespace range, operation mix, pattern, block sizes,
//!   queue depth and priority, FUA share, rate limit, end, warm-up).
//! - [`engine`]: runs jobs on a [`nvme::queued::QueuedIo`] (the same code on every
//!   target: nvtest's driver queues on sim and QEMU, io_uring passthrough on Linux),
//!   judging reads against the host map with writes in flight taken into account, and
//!   stops at any instant with what was in flight reported.
//! - [`journal`]: the hook every write and flush passes, submitted and completed (what
//!   the power-fail work judges blocks from after a cut).
//! - [`figures`]: IOPS, MB/s and latency percentiles with sample counts (hdrhistogram),
//!   as the console, JUnit properties and the JSON record show them.

pub mod engine;
#[cfg(test)]
mod fake;
pub mod figures;
pub mod job;
pub mod journal;

pub use engine::{run, Outcome, Stop};
pub use figures::{Figure, JobFigures, OpFigures};
pub use job::{End, Job, Mix, Op, Pattern, Rate, Workload};
pub use journal::{Change, Journal, NoJournal, WriteRecord};
