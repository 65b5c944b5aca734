//! The command-level interface every target offers to the runner.
//!
//! A step in a suite sends admin and I/O commands through a [`Device`] and judges the
//! [`Completion`]. Userspace-driver targets (sim, QEMU, vfio) also expose their host
//! driver for register- and queue-level cases; the Linux kernel target does not, and
//! such cases are skipped there.

use crate::spec::{Command, Completion};
use crate::transport::TransportError;

/// A command's data buffer, as the host sees it. The driver (or the kernel) builds the
/// PRPs; a step only says which way the data moves.
pub enum Data<'a> {
    None,
    /// Host to controller (Write, Set Features with a buffer, Namespace Management …).
    ToDevice(&'a [u8]),
    /// Controller to host (Read, Identify, Get Log Page …).
    FromDevice(&'a mut [u8]),
}

impl Data<'_> {
    pub fn len(&self) -> usize {
        match self {
            Data::None => 0,
            Data::ToDevice(b) => b.len(),
            Data::FromDevice(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How a target reaches the controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// nvtest's own host driver owns the controller: registers and queues are reachable.
    Userspace,
    /// The operating system's driver owns it; only commands pass through.
    Kernel,
}

/// Why a command produced no completion. Drive misbehaviour is judged from
/// completions; these errors are the `error` verdict (or a timeout, which a case may
/// judge as a failure of the drive).
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("{what}: no completion within {after_ms} ms")]
    Timeout { what: String, after_ms: u64 },
    /// The controller set CSTS.CFS (Controller Fatal Status) while the command was
    /// outstanding: it will not complete it.
    #[error("{what}: no completion; the controller set CSTS.CFS (Controller Fatal Status) after {after_ms} ms")]
    ControllerFatal { what: String, after_ms: u64 },
    /// The controller is no longer there while the command was outstanding (the drive
    /// was removed, or its port's link went down): CSTS read all ones (FFFFFFFFh: CSTS's
    /// reserved bits are 0 on a present controller, so no present controller reads that
    /// way), or CSTS read with RDY clear and the function's Vendor ID in configuration
    /// space read FFFFh (a removed function's BAR may read 0, as behind QEMU's emptied
    /// hot-plug slot).
    #[error("{what}: no completion; the controller is gone (CSTS reads FFFFFFFFh, or RDY clear and its configuration space all ones: removed, or its link is down) after {after_ms} ms")]
    Removed { what: String, after_ms: u64 },
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("{0}")]
    Driver(String),
    #[error("not possible on this target: {0}")]
    Unsupported(String),
}

impl DeviceError {
    /// Whether the controller stopped answering during the command: it posted no
    /// completion in time, set CSTS.CFS, or the target under it went away (QEMU ended on
    /// an assertion of its own). The drive's failure, not nvtest's — unless the host
    /// failed under the target, which [`Device::host_faults`] reports.
    pub fn controller_stopped(&self) -> bool {
        match self {
            DeviceError::Timeout { .. } | DeviceError::ControllerFatal { .. } | DeviceError::Removed { .. } => true,
            DeviceError::Transport(TransportError::Timeout(_) | TransportError::Gone(_)) => true,
            DeviceError::Transport(_) | DeviceError::Driver(_) | DeviceError::Unsupported(_) => false,
        }
    }
}

/// A fault of the machine under the target, not of the drive: the host failed the
/// files or memory the target stands on (QEMU's disk images on a full filesystem, an
/// image that was deleted). The case during which it shows is an error, whatever the
/// drive answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFault {
    /// What failed, where, and what to do about it, in one line.
    pub message: String,
    /// The host cannot serve later cases either (its disk is full): the runner sends
    /// no more cases.
    pub ends_run: bool,
}

/// A controller as the runner sees it.
pub trait Device {
    /// Which target this is ("sim:enterprise-1.4", "qemu:ns32", "/dev/nvme0").
    fn describe(&self) -> String;

    fn access(&self) -> Access;

    /// Sends an admin command and waits (bounded) for its completion. The CID and the
    /// data pointer are filled in by the driver.
    fn admin(&mut self, cmd: Command, data: Data<'_>) -> Result<Completion, DeviceError>;

    /// Sends an I/O command on I/O submission queue `qid` (1-based) and waits for it.
    /// `metadata` is the separate metadata buffer (MPTR) for formats that have one.
    fn io(&mut self, qid: u16, cmd: Command, data: Data<'_>, metadata: Data<'_>) -> Result<Completion, DeviceError>;

    /// The I/O queue identifiers ready for [`Device::io`].
    fn io_queues(&self) -> Vec<u16>;

    /// Keeps `count` Asynchronous Event Request commands outstanding.
    fn arm_async_events(&mut self, count: u16) -> Result<(), DeviceError>;

    /// Completions of Asynchronous Event Requests that arrived since the last call
    /// (their AERs are re-armed). Polls the admin queue; never waits.
    fn take_async_events(&mut self) -> Result<Vec<Completion>, DeviceError>;

    /// Tells the target that namespaces were created, deleted, attached, detached or
    /// formatted, so it can refresh what it caches (the kernel target rescans).
    fn namespaces_changed(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }

    /// The per-command timeout in milliseconds.
    fn command_timeout_ms(&self) -> u64;

    /// Lets `ms` milliseconds pass on the target's clock (a background operation, such
    /// as a sanitize, runs meanwhile). The default sleeps; a simulated clock moves on.
    fn wait(&mut self, ms: u64) -> Result<(), DeviceError> {
        std::thread::sleep(std::time::Duration::from_millis(ms));
        Ok(())
    }

    /// Brings the controller back to a known state after a case ended in an error (a
    /// command timed out, the queues may be out of step): a Controller Reset and queue
    /// set-up on userspace targets. The default does nothing.
    fn recover(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }

    /// A Controller Reset (NVMe 1.4 §7.3.2) as a case step: CC.EN 1 → 0 → 1 and queue
    /// set-up on userspace targets, the driver's reset (NVME_IOCTL_RESET) on kernel
    /// targets. The default: the target cannot reset its controller.
    fn controller_reset(&mut self) -> Result<(), DeviceError> {
        Err(DeviceError::Unsupported("this target cannot reset its controller".into()))
    }

    /// What the target printed about itself since the last call (QEMU's stderr), added
    /// to the log of a case that failed or errored. The default has nothing to say.
    fn take_diagnostics(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Bytes of the host driver's DMA memory not allocated (queues, PRP lists, data
    /// buffers), every port's together: what a leak check compares across removals and
    /// power cycles. `None` where the kernel owns that memory.
    fn dma_free_bytes(&self) -> Option<usize> {
        None
    }

    /// Faults of the host under the target seen since the last call ([`HostFault`]).
    /// The default reports none: the target's medium is not a file of this machine.
    fn host_faults(&mut self) -> Vec<HostFault> {
        Vec::new()
    }

    /// The controller's BAR0 registers, on targets where nvtest's own driver owns the
    /// controller; `None` on kernel targets.
    fn registers(&mut self) -> Option<&mut dyn Registers> {
        None
    }

    /// Queues for a workload, one per `queues` entry, with many commands in flight
    /// ([`crate::queued::QueuedIo`]). The default: the target cannot queue commands.
    fn queued_io(
        &mut self,
        queues: &[crate::queued::QueueSpec],
    ) -> Result<Box<dyn crate::queued::QueuedIo + '_>, DeviceError> {
        let _ = queues;
        Err(DeviceError::Unsupported("this target cannot keep commands queued".into()))
    }

    /// Selects the arbitration mechanism (CC.AMS, §4.13) with a Controller Reset, on
    /// targets where nvtest's driver owns the controller. Fails, changing nothing, when
    /// CAP.AMS does not report it. The default: the target cannot.
    fn select_arbitration(&mut self, mechanism: crate::driver::ArbitrationMechanism) -> Result<(), DeviceError> {
        let _ = mechanism;
        Err(DeviceError::Unsupported("the operating system's driver selects the arbitration mechanism".into()))
    }

    /// Whether the target can switch the drive's power, and how (the power-fail work).
    /// The default: it cannot.
    fn power_method(&mut self) -> Option<crate::transport::PowerMethod> {
        None
    }

    /// Cuts the drive's power now (no command in flight: a workload cuts through
    /// [`crate::queued::QueuedIo::power_cut`]). `seed` draws what a simulated drive loses.
    fn power_off(&mut self, seed: u64) -> Result<(), DeviceError> {
        let _ = seed;
        Err(DeviceError::Unsupported("the target has no power switch".into()))
    }

    /// A normal shutdown (CC.SHN = 01b, §7.6.2), then the power cut: what the controller
    /// reported before the power went.
    fn shutdown_then_power_off(&mut self, seed: u64) -> Result<crate::driver::Shutdown, DeviceError> {
        let _ = seed;
        Err(DeviceError::Unsupported("the target has no power switch".into()))
    }

    /// Powers the drive on and brings the controller up again, waiting for CSTS.RDY up
    /// to `grace` beyond CAP.TO so that a late drive is measured.
    fn power_on(&mut self, grace: std::time::Duration) -> Result<crate::driver::PowerOn, DeviceError> {
        let _ = grace;
        Err(DeviceError::Unsupported("the target has no power switch".into()))
    }

    /// Puts the drive back in its slot after a removal ([`crate::queued::QueuedIo::pull_drive`],
    /// [`Self::remove_orderly`]) and brings the controller up again, as [`Self::power_on`]
    /// does (CSTS.RDY awaited up to `grace` beyond CAP.TO). Where the target has a
    /// hot-plug slot, [`crate::driver::PowerOn`] also says how long the link and the
    /// enumeration took. The default: [`Self::power_on`].
    fn reinsert(&mut self, grace: std::time::Duration) -> Result<crate::driver::PowerOn, DeviceError> {
        self.power_on(grace)
    }

    /// An orderly removal: every port's controller shut down normally (CC.SHN = 01b,
    /// §7.6.2), then the drive taken out of its slot (attention button, power off); what
    /// the controller reported before it went. The default:
    /// [`Self::shutdown_then_power_off`].
    fn remove_orderly(&mut self, seed: u64) -> Result<crate::driver::Shutdown, DeviceError> {
        self.shutdown_then_power_off(seed)
    }

    /// Takes this controller's port link down (`up` false: the function stops answering
    /// and completes nothing; the drive and its other ports run on), or brings it back
    /// and the controller up again, returning the nanoseconds from CC.EN to CSTS.RDY.
    /// The default: the target cannot.
    fn set_link(&mut self, up: bool) -> Result<Option<u64>, DeviceError> {
        let _ = up;
        Err(DeviceError::Unsupported("the target cannot take a port's link down".into()))
    }

    /// Puts ANA group `anagrpid` into `state` as this controller sees it (NVMe 1.4
    /// §8.20.3): a test hook of the simulated drive, standing for the failover a real
    /// drive carries out on its own. Other targets cannot: Unsupported.
    fn set_ana_state(&mut self, anagrpid: u32, state: crate::spec::ana::AnaState) -> Result<(), DeviceError> {
        let _ = (anagrpid, state);
        Err(DeviceError::Unsupported(
            "the target has no way to change an ANA group's state (a drive changes it itself; only the simulated \
             drive has a test hook)"
                .into(),
        ))
    }

    /// The largest data transfer one command can move through this target, where the
    /// host imposes a limit below the drive's MDTS (the Linux driver's queue limits:
    /// max_hw_sectors_kb and max_segments). `None`: only MDTS limits it.
    fn max_transfer_bytes(&self) -> Option<u64> {
        None
    }

    /// How many I/O queues a workload can have at once on port `port` (0: this
    /// controller, `n`: [`Device::port`] `n - 1`): the queues the controller allocated
    /// (Set Features Number of Queues, NVMe 1.4 §5.21.1.7, NSQA and NCQA). `None`: no
    /// limit the target knows of (the kernel's io_uring queues are logical).
    fn io_queue_limit(&self, port: usize) -> Option<usize> {
        let _ = port;
        None
    }

    /// How many other controllers of the drive's NVM subsystem (the other ports of a
    /// dual-port drive, NVMe 1.4 §2.4.1 "Multi-Path I/O and Namespace Sharing") the
    /// target brought up beside this one, each reachable through [`Device::port`]. The
    /// default: none (a single-port drive, or a target that reaches one controller).
    fn port_count(&self) -> usize {
        0
    }

    /// Why the target brought up fewer of the subsystem's controllers than it has, when
    /// it knows (the kernel's native multipath, a controller not live): for the skips of
    /// cases that need more ports. The default: nothing to say.
    fn ports_note(&self) -> Option<String> {
        None
    }

    /// The `index`-th other controller (0-based), a device of its own: its own CNTLID,
    /// admin and I/O queues, the subsystem's namespaces as attached to it.
    fn port(&mut self, index: usize) -> Option<&mut dyn Device> {
        let _ = index;
        None
    }
}

/// Access to a controller's registers ("Figure 78: Controller Registers"), for cases
/// that check registers and for facts only registers give (VS, CAP.MPSMIN).
pub trait Registers {
    fn read32(&mut self, offset: u64) -> Result<u32, TransportError>;
    fn read64(&mut self, offset: u64) -> Result<u64, TransportError>;
    fn write32(&mut self, offset: u64, value: u32) -> Result<(), TransportError>;
}
