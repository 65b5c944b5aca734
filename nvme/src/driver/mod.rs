//! The userspace host driver: controller bring-up, queues, PRPs and completions over
//! any [`crate::transport::Transport`] (the simulated drive, QEMU, later vfio).
//!
//! - [`Controller`] brings a controller up (NVMe 1.4 §7.6.1), creates I/O queue pairs,
//!   shuts it down in order (§7.6.2) and implements [`crate::device::Device`]. It also
//!   gives register-level cases the registers and the transport.
//! - [`IoQueuePair`] is a queue with many commands in flight: `submit`, `ring`, `poll`,
//!   `wait`, or one command at a time with `execute`.
//! - [`QueueSet`] is several queue pairs created for a workload, with their priorities
//!   ([`crate::queued::QueuedIo`]).
//! - [`memory`] allocates host memory pages; [`prp`] builds PRP entries and lists for
//!   a transfer of any length (MDTS is not applied: nvtest checks drives reject
//!   over-MDTS transfers; [`Controller::max_transfer_bytes`] tells callers how to split).
//!
//! Polling only: completion queues are created with interrupts disabled.

mod controller;
pub mod memory;
pub mod prp;
mod queue;
mod queue_set;

pub use controller::{ArbitrationMechanism, Controller, Options, PowerOn, Shutdown};
pub use memory::{DmaBuf, PageAllocator, PAGE_SIZE};
pub use queue::{IoQueuePair, Reaped, Transfer, CQE_BYTES, SQE_BYTES};
pub use queue_set::QueueSet;
