//! What the host driver talks through: a PCI function's configuration space, its BAR0
//! registers, and host memory the controller reaches by DMA.
//!
//! Implementations: the simulated drive (crate `nvme-sim`, in-process), QEMU (qtest
//! socket plus shared guest RAM), later vfio. The driver never knows which one it has.

mod dma;
pub mod qemu;
mod slot;

pub use dma::{DmaError, DmaRegion};
pub use slot::{Insertion, Slot};

/// Why a transport could not do what was asked. These are nvtest or target-plumbing
/// failures (an `error` verdict), never drive misbehaviour.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("{0}")]
    Dma(#[from] DmaError),
    #[error("the target went away: {0}")]
    Gone(String),
    #[error("the target did not answer within {0} ms")]
    Timeout(u64),
    #[error("{0}")]
    Other(String),
}

/// A PCIe NVMe function as a host sees it. Offsets of `mmio_*` are within BAR0.
pub trait Transport: Send {
    /// A short name for reports ("sim:enterprise-1.4", "qemu:ns32").
    fn describe(&self) -> String;

    fn config_read32(&mut self, offset: u16) -> Result<u32, TransportError>;
    fn config_write32(&mut self, offset: u16, value: u32) -> Result<(), TransportError>;

    fn mmio_read32(&mut self, offset: u64) -> Result<u32, TransportError>;
    fn mmio_write32(&mut self, offset: u64, value: u32) -> Result<(), TransportError>;

    /// A 64-bit register read. The default reads the low then the high dword, which
    /// NVMe permits for CAP, ASQ and ACQ.
    fn mmio_read64(&mut self, offset: u64) -> Result<u64, TransportError> {
        let lo = self.mmio_read32(offset)? as u64;
        let hi = self.mmio_read32(offset + 4)? as u64;
        Ok(hi << 32 | lo)
    }

    fn mmio_write64(&mut self, offset: u64, value: u64) -> Result<(), TransportError> {
        self.mmio_write32(offset, value as u32)?;
        self.mmio_write32(offset + 4, (value >> 32) as u32)
    }

    /// Host memory the controller can reach, with its bus addresses.
    fn dma(&self) -> &DmaRegion;

    /// Called while the driver waits for a completion or a register to change, so a
    /// target that needs a nudge (a virtual clock, an event loop) can make progress. A
    /// target with a simulated clock lets time pass to its next event here.
    fn idle(&mut self) -> Result<(), TransportError> {
        std::hint::spin_loop();
        Ok(())
    }

    /// The target's clock, in nanoseconds: the time every deadline, latency and rate of
    /// the host is measured in. Monotonic wall time (from the first reading in this
    /// process) unless the target runs on a simulated clock of its own.
    fn now_ns(&mut self) -> u64 {
        monotonic_ns()
    }

    /// Lets time pass until `deadline_ns` on [`Self::now_ns`]'s clock at most, returning
    /// earlier when the controller may have something new (a completion). A simulated
    /// clock jumps to its next event or to the deadline, whichever is first; a wall
    /// clock only waits a moment (the host polls its queues again), so callers loop.
    fn idle_until(&mut self, deadline_ns: u64) -> Result<(), TransportError> {
        if self.now_ns() < deadline_ns {
            self.idle()?;
        }
        Ok(())
    }

    /// Whether [`Self::now_ns`] is a simulated clock (time passes only in
    /// [`Self::idle`] and [`Self::idle_until`]), so figures on it are exact and repeatable.
    fn simulated_clock(&self) -> bool {
        false
    }

    /// Takes this function's link down (`up` false) or brings it back, when the target
    /// can: a port of a multi-port drive failing while the drive, and its other ports,
    /// run on. While the link is down the function does not answer (configuration space
    /// and BAR0 read all ones, writes are lost) and completes nothing; when it comes back
    /// it enumerates afresh (configuration space at its reset values, the controller
    /// disabled, its queues gone). The default: the target cannot.
    fn set_link(&mut self, up: bool) -> Result<(), TransportError> {
        let _ = up;
        Err(TransportError::Other("this target cannot take a port's link down".into()))
    }

    /// Whether [`Self::set_link`] works here.
    fn has_link_switch(&self) -> bool {
        false
    }

    /// A test hook of the simulated drive only: puts ANA group `anagrpid` into ANA state
    /// `state` (§8.20.3, raw value) as this function's controller sees it, as a real
    /// drive does on its own (a failover inside the NVM subsystem). The default: the
    /// target has no such hook.
    fn set_ana_state(&mut self, anagrpid: u32, state: u8) -> Result<(), TransportError> {
        let _ = (anagrpid, state);
        Err(TransportError::Other("this target has no hook to change an ANA group's state".into()))
    }

    /// Whether [`Self::set_ana_state`] works here.
    fn has_ana_hook(&self) -> bool {
        false
    }

    /// The drive's power switch, when the target has one (the simulated drive; QEMU, by
    /// killing and restarting it; a rig on a hardware runner).
    fn power(&mut self) -> Option<&mut dyn PowerSwitch> {
        None
    }

    /// The hot-plug slot the function sits in, when the host can empty and fill it
    /// (QEMU's function behind a hot-plug-capable root port). The simulated drive has
    /// none: it is pulled by its power switch with every port's link ([`Self::set_link`]).
    fn slot(&mut self) -> Option<&mut dyn Slot> {
        None
    }
}

/// How a target switches a drive's power off and on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerMethod {
    /// The drive loses power at once: its volatile state is gone.
    Cut,
    /// The function is removed from the bus and found again (PCI remove / rescan): the
    /// drive may keep power, so it proves less than a cut; verdicts say so.
    RemoveRescan,
}

/// A target's power switch: off at an instant, on again. Between the two the function
/// does not answer (configuration and BAR0 read all ones).
pub trait PowerSwitch {
    fn method(&self) -> PowerMethod;

    /// Power off now. `seed` draws what a simulated drive loses (others ignore it).
    fn off(&mut self, seed: u64) -> Result<(), TransportError>;

    /// Power on; the controller is to be brought up again from its reset state.
    fn on(&mut self) -> Result<(), TransportError>;
}

/// Nanoseconds of monotonic wall time since the first call in this process.
pub fn monotonic_ns() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}
