//! The contract between the queue engine (`controller`) and the command set
//! (`subsystem`): the engine fetches a command, resolves its data pointer, and hands it
//! to a [`CommandSet`]; the command set answers with a [`Done`] and may raise
//! asynchronous events for the controller.

use nvme::spec::{Command, Status};
use nvme::transport::DmaRegion;

pub use crate::service::Work;

/// What a command completed with: the status and CQE Dword 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    pub status: Status,
    pub dw0: u32,
}

impl Done {
    pub const fn ok() -> Done {
        Done { status: Status::SUCCESS, dw0: 0 }
    }

    pub const fn ok_with(dw0: u32) -> Done {
        Done { status: Status::SUCCESS, dw0 }
    }

    /// A failed command. Errors that a retry cannot fix carry DNR, as controllers set it.
    pub const fn err(status: Status) -> Done {
        Done { status: status.dnr(), dw0: 0 }
    }

    /// A failed command that a retry may carry out (later, or on another path): DNR clear,
    /// as the ANA path related statuses need for a host to fail over (§8.20.3).
    pub const fn retryable(status: Status) -> Done {
        Done { status, dw0: 0 }
    }
}

impl From<Status> for Done {
    fn from(status: Status) -> Done {
        Done::err(status)
    }
}

/// An Asynchronous Event the command set raises ("Figure 146: Asynchronous Event Request
/// – Completion Queue Entry Dword 0"): completed to the host when an AER is outstanding
/// and the event type is not masked until its log page is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    /// Asynchronous Event Type (0 error, 1 SMART/health, 2 notice, 6 I/O command set, 7 vendor).
    pub event_type: u8,
    /// Asynchronous Event Information (for notices: 0 Namespace Attribute Changed, 1 Firmware Activation Starting …).
    pub info: u8,
    /// Log Page Identifier the host reads to clear the event.
    pub log_page: u8,
}

/// A command's data pointer (PRP Entry 1 and 2) resolved against host memory, with the
/// controller's memory page size (CC.MPS). Every access follows §4.3 "Physical Region
/// Page Entry and List" and fails with the status the spec assigns (PRP Offset Invalid,
/// Data Transfer Error) instead of touching memory it should not.
pub trait DataPointer {
    /// Host memory.
    fn dma(&self) -> &DmaRegion;

    /// Visits the host memory segments covering `len` bytes of data, in order:
    /// `(bus address, length)`. Fails before visiting anything if the PRPs are invalid.
    fn segments(&self, len: usize, visit: &mut dyn FnMut(u64, usize)) -> Result<(), Status>;

    /// Controller → host: copies `data` into the buffer the PRPs describe.
    fn copy_to_host(&self, data: &[u8]) -> Result<(), Status> {
        let mut ranges = Vec::new();
        self.segments(data.len(), &mut |a, l| ranges.push((a, l)))?;
        let mut at = 0;
        for (addr, len) in ranges {
            self.dma().write(addr, &data[at..at + len]).map_err(|_| Status::DATA_TRANSFER_ERROR)?;
            at += len;
        }
        Ok(())
    }

    /// Host → controller: the `len` bytes the PRPs describe.
    fn copy_from_host(&self, len: usize) -> Result<Vec<u8>, Status> {
        let mut ranges = Vec::new();
        self.segments(len, &mut |a, l| ranges.push((a, l)))?;
        let mut out = vec![0u8; len];
        let mut at = 0;
        for (addr, seg) in ranges {
            self.dma().read(addr, &mut out[at..at + seg]).map_err(|_| Status::DATA_TRANSFER_ERROR)?;
            at += seg;
        }
        Ok(out)
    }
}

/// What the command set knows of the controller a command arrived on.
#[derive(Debug, Default)]
pub struct ControllerContext {
    /// CNTLID of this controller.
    pub cntlid: u16,
    /// The subsystem's clock when the command started ([`crate::service::SimClock`]):
    /// what background operations (a sanitize) are measured against.
    pub now_ns: u64,
    /// Events raised for this controller, taken by the engine for outstanding AERs.
    pub events: Vec<AsyncEvent>,
    /// Number of I/O Submission / Completion Queues allocated (Set Features 07h), 0's
    /// based as the feature reports them; the engine refuses queue ids beyond them.
    pub nsqa: u16,
    pub ncqa: u16,
    /// Set by the command set while executing a command to say that command never
    /// completes (a hung command: for quirks, and to prove a host's timeout path). The
    /// engine clears it, posts no completion and keeps the command outstanding until an
    /// Abort names it (completed with Command Abort Requested), its SQ is deleted
    /// (Command Aborted due to SQ Deletion) or the controller is reset (dropped).
    pub hold_completion: bool,
    /// Set by the command set to pause processing for this long after the command
    /// completes (a firmware activation without reset): the engine sets CSTS.PP and
    /// fetches nothing until the time has passed on the clock.
    pub pause_ns: u64,
    /// With `pause_ns`: the command's own completion is posted when the pause ends, not
    /// before it starts (a Firmware Commit that completes once the new image runs).
    pub complete_after_pause: bool,
    /// Set by the command set to say the controller hit a fatal error on this command
    /// (for quirks): the engine sets CSTS.CFS and posts no completion, until a reset.
    pub fatal: bool,
    /// Set by the command set when the command changed blocks a power loss could still
    /// take back: the engine hands it to [`CommandSet::change_completed`] when it posts
    /// the command's completion (never, if it does not).
    pub change: Option<u64>,
    /// Set by the command set on every I/O command: the speed of the firmware running, in
    /// percent of the service model's (a profile's `firmware.performance`); `None`: the
    /// model's own. The engine stretches the command's service time by 100 / percent.
    pub service_percent: Option<u32>,
}

/// The admin and NVM command set of the subsystem. Queue-management commands (Create /
/// Delete I/O SQ and CQ), Abort and Asynchronous Event Request are the engine's own and
/// never reach it.
pub trait CommandSet {
    fn admin(&mut self, ctx: &mut ControllerContext, cmd: &Command, data: &dyn DataPointer) -> Done;

    /// An NVM command. A format with separate metadata finds its buffer at `cmd.mptr`
    /// (contiguous, §4.5 "Metadata Region").
    fn io(&mut self, ctx: &mut ControllerContext, cmd: &Command, data: &dyn DataPointer) -> Done;

    /// What an NVM command will ask of the media, for the service model (asked just before
    /// [`Self::io`] runs it, only when the drive has one). The default reads the command
    /// as 512-byte blocks of namespace `nsid`.
    fn work(&self, cmd: &Command) -> Work {
        Work::of_blocks(cmd, 512)
    }

    /// The controller `cntlid` became ready (CC.EN 0 → 1 accepted, CSTS.RDY set): at
    /// power-on and after every Controller Reset. A compliant command set has nothing to
    /// do (attachments, formats and data persist across resets, §5.19, §7.3.2).
    fn controller_enabled(&mut self, _cntlid: u16) {}

    /// Events raised for controller `cntlid` by commands that ran on other controllers
    /// of the subsystem (a namespace attached, detached, deleted or formatted through
    /// another port), taken once: the queue engine of `cntlid` polls this and delivers
    /// them to its outstanding AERs as it does [`ControllerContext::events`]. A command
    /// set with one controller has none.
    fn take_events(&mut self, _cntlid: u16) -> Vec<AsyncEvent> {
        Vec::new()
    }

    /// The completion of the command whose [`ControllerContext::change`] was `token` was
    /// posted: the host may now count on it as the command set's power model says.
    fn change_completed(&mut self, _token: u64) {}

    /// The host requested a shutdown (CC.SHN 01b or 10b, §7.6.2). True when shutdown
    /// processing completes (CSTS.SHST 10b); a command set with nothing cached has
    /// nothing to do.
    fn shutdown(&mut self, _cntlid: u16) -> bool {
        true
    }

    /// The PCIe link of controller `cntlid`'s port went down (`up` false) or came back.
    /// A compliant subsystem goes on serving its other ports unchanged (§2.4.1); only a
    /// quirk looks at this.
    fn port_link(&mut self, _cntlid: u16, _up: bool) {}

    /// A test hook: ANA group `anagrpid` goes into ANA state `state` (raw, §8.20.3) as
    /// controller `cntlid` sees it, as a real drive's failover does on its own. `Err`
    /// says why not (no ANA reporting, no such group, a reserved state).
    fn set_ana_state(&mut self, _cntlid: u16, _anagrpid: u32, _state: u8) -> Result<(), String> {
        Err("the drive does not report Asymmetric Namespace Access".into())
    }

    /// The power went: what was not durable is lost (random choices drawn from `seed`).
    fn power_cut(&mut self, _seed: u64) {}

    /// The power came back. Returns the milliseconds from now until a controller may
    /// become ready (CSTS.RDY after CC.EN).
    fn power_on(&mut self) -> u64 {
        0
    }
}
