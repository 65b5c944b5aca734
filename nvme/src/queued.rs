//! Many commands in flight on several queues at once: what a workload needs of a target.
//!
//! [`QueuedIo`] is the whole contract between nvtest's workload engine and a target:
//! submit to a queue, ring it, reap what completed (with the data read), and the
//! target's clock. nvtest's own driver offers it over I/O queue pairs it creates for the
//! workload ([`crate::driver::QueueSet`], sim and QEMU); the Linux target over io_uring
//! NVMe passthrough. A [`crate::device::Device`] hands one out with
//! [`crate::device::Device::queued_io`].

use crate::device::{Data, DeviceError};
pub use crate::driver::{Reaped, Transfer};
use crate::spec::queue::QueuePriority;
use crate::spec::{Command, Completion};

/// One queue a workload asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSpec {
    /// Commands the queue must hold in flight at once (its entries are one more).
    pub depth: u32,
    /// QPRIO of its submission queue (Create I/O Submission Queue CDW11 bits 2:1): used
    /// by the controller only when CC.AMS selects weighted round robin (§4.13).
    pub priority: QueuePriority,
    /// The controller the queue is created on: 0 the one the queues are opened on, `n`
    /// its `n`-th other port ([`crate::device::Device::port`] `n - 1`): a workload can
    /// load several ports of a multi-port drive at once.
    pub port: usize,
}

/// Queues of one controller with many commands in flight, and the clock they run on.
/// Queues are numbered `0 .. queue_count()` in the order they were asked for.
pub trait QueuedIo {
    /// The target and the queues ("sim:enterprise-1.4, I/O queues 2, 3").
    fn describe(&self) -> String;

    fn queue_count(&self) -> usize;

    /// The queue identifier the controller knows queue `queue` by (for reports).
    fn qid(&self, queue: usize) -> u16;

    /// How many commands `queue` can have in flight.
    fn capacity(&self, queue: usize) -> usize;

    /// Commands submitted to `queue` and not yet handed back by [`Self::poll`].
    fn outstanding(&self, queue: usize) -> usize;

    /// Places a command in `queue` with a free CID and a buffer holding (or receiving)
    /// its data; the controller sees it after [`Self::ring`]. Returns the CID.
    fn submit(
        &mut self,
        queue: usize,
        cmd: Command,
        data: Transfer<'_>,
        metadata: Transfer<'_>,
    ) -> Result<u16, DeviceError>;

    /// Tells the controller about what was submitted to `queue` (the SQ Tail Doorbell).
    fn ring(&mut self, queue: usize) -> Result<(), DeviceError>;

    /// Hands every completion `queue` has to `f` with its data, never waiting.
    fn poll(&mut self, queue: usize, f: &mut dyn FnMut(Reaped<'_>)) -> Result<usize, DeviceError>;

    /// The first command of `queue` past the command timeout, given up on (it no
    /// longer counts as outstanding), as the error that names it.
    fn expired(&mut self, queue: usize) -> Option<DeviceError>;

    /// The target's clock in nanoseconds ([`crate::transport::Transport::now_ns`]).
    fn now_ns(&mut self) -> u64;

    /// Lets time pass up to `deadline_ns`, returning earlier when something may have
    /// completed ([`crate::transport::Transport::idle_until`]).
    fn idle_until(&mut self, deadline_ns: u64) -> Result<(), DeviceError>;

    /// Whether the clock is simulated (figures are exact and repeatable).
    fn simulated_clock(&self) -> bool;

    /// Ends the workload's use of the queues: commands still in flight are given up on
    /// and the queues removed. Dropping the handle does the same, ignoring errors.
    fn close(self: Box<Self>) -> Result<(), DeviceError>;

    /// Sends an admin command and waits for its completion while the workload's commands
    /// stay queued (a Firmware Commit under load, §5.12): their completions wait in their
    /// queues for the next [`Self::poll`]. The default: the target cannot.
    fn admin(&mut self, cmd: Command, data: Data<'_>) -> Result<Completion, DeviceError> {
        let _ = (cmd, data);
        Err(DeviceError::Unsupported("the target cannot send admin commands while a workload runs".into()))
    }

    /// Takes the link of port `port` (0-based among the other ports,
    /// [`crate::device::Device::port`]) down or brings it back while this workload's
    /// commands stay queued ([`crate::device::Device::set_link`]). The default: the target
    /// cannot.
    fn set_port_link(&mut self, port: usize, up: bool) -> Result<Option<u64>, DeviceError> {
        let _ = (port, up);
        Err(DeviceError::Unsupported("the target cannot take a port's link down beside queued I/O".into()))
    }

    /// Cuts the drive's power now, with whatever is in flight (the power-fail work):
    /// the queues are gone with the power, their commands never complete. `seed` draws
    /// what a simulated drive loses. The default: the target has no power switch.
    fn power_cut(self: Box<Self>, seed: u64) -> Result<(), DeviceError> {
        let _ = seed;
        Err(DeviceError::Unsupported("the target has no power switch".into()))
    }

    /// Pulls the drive out of its slot now, with whatever is in flight (surprise
    /// removal): its power goes, and every port's link with it. The driver is not told:
    /// it finds out from its commands as a host does (CSTS reading all ones,
    /// [`DeviceError::Removed`], from [`Self::expired`]), and the queues stay as they
    /// are until [`Self::abandon`]. `seed` draws what a simulated drive loses. The
    /// default: the target cannot remove the drive.
    fn pull_drive(&mut self, seed: u64) -> Result<(), DeviceError> {
        let _ = seed;
        Err(DeviceError::Unsupported("the target cannot remove the drive".into()))
    }

    /// Lets the queues go without a command: the drive they were on is gone
    /// ([`Self::pull_drive`]), nothing of them is left to delete. The default: dropped.
    fn abandon(self: Box<Self>) {}
}
