//! Many commands in flight on a controller of the Linux NVMe driver: [`UringQueues`],
//! the Linux target's [`QueuedIo`], through io_uring NVMe passthrough
//! (`IORING_OP_URING_CMD` with `NVME_URING_CMD_IO` on the namespace's generic character
//! device `/dev/ngXnY`, Linux 5.19 and later).
//!
//! This module owns the command structure ([`UringCmd`]), the ring, and the mapping of
//! what the kernel completes to a [`Completion`] or a [`DeviceError`]; the slots and
//! their buffers are [`super::slots`].
//!
//! - **One ring, logical queues.** The kernel owns the controller's real queues and
//!   picks one per submitting CPU, so a workload's queues cannot be the controller's.
//!   Each [`QueueSpec`] becomes a logical queue of one ring (`IORING_SETUP_SQE128 |
//!   IORING_SETUP_CQE32`, entries: the depths added up) with its own slots (capacity =
//!   depth). One ring keeps one wait for every queue ([`QueuedIo::idle_until`]) and one
//!   `io_uring_enter` per submission batch, whichever queue it is for.
//! - **Priorities are not honoured.** QPRIO is a property of the driver's submission
//!   queues, which nvtest does not create here; it only matters under weighted round
//!   robin arbitration, which a kernel target cannot select
//!   ([`crate::device::Device::select_arbitration`] is Unsupported). A workload asking
//!   for a priority therefore runs, its priority noted in [`QueuedIo::describe`].
//! - **CIDs.** The driver assigns the real command identifiers. The queue hands out a
//!   tag, the index of the command's slot (below the queue's depth), and the
//!   [`Completion`] it hands back carries that tag as its CID; SQID is the logical queue
//!   number (1 and up). SQHD is 0: the kernel does not pass it on.
//! - **Status.** The completion's `res` is the NVMe status field (as the passthrough
//!   ioctl returns it) or a negative errno, `big_cqe[0]` the 64-bit result (DW0, DW1).
//!   An errno and a status the driver made up itself (370h, 371h) are errors, as on the
//!   ioctl path ([`super::completion`], [`super::errno_error`]): a poll that reaches
//!   one returns it.
//! - **Time-outs.** Each command carries the target's command timeout (`timeout_ms`),
//!   after which the driver aborts it; [`QueuedIo::expired`] gives up on a command past
//!   that timeout on nvtest's clock. Its slot is not reused until its completion came.
//! - **Closing.** The driver offers no way to withdraw a passthrough command it has
//!   issued, so closing (or dropping) waits for every command the kernel holds, bounded
//!   by the command timeout plus a margin; what is still held then keeps its buffers
//!   allocated (leaked, never freed while the kernel may DMA into them), and closing
//!   says so.
//! - Only the namespace's own node is used: a command whose NSID has no node is
//!   Unsupported, as in [`crate::device::Device::io`]. A queue of another port
//!   ([`QueueSpec::port`]) uses that controller's node of the namespace
//!   ([`LinuxDevice`]'s ports).

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use nix::errno::Errno;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::passthru::{PassthruCmd64, NVME_IOCTL_TYPE};
use super::slots::{Outcome, Slots};
use super::{check_direction, command_name, completion, errno_error, passthru_command, transfer_len, LinuxDevice};
use crate::device::{Device, DeviceError};
use crate::queued::{QueueSpec, QueuedIo, Reaped, Transfer};
use crate::spec::queue::QueuePriority;
use crate::spec::Command;
use crate::transport::monotonic_ns;

/// `struct nvme_uring_cmd` (72 bytes), the command of `NVME_URING_CMD_IO` in the cmd
/// area of a 128-byte SQE. Mirrors the kernel ABI of Linux
/// `include/uapi/linux/nvme_ioctl.h` as of 5.19 (laid out here from that layout only):
/// as `nvme_passthru_cmd64` without its result, which comes back in the 32-byte CQE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct UringCmd {
    pub opcode: u8,
    /// Must be 0: the driver rejects any flag (FUSE, PSDT) with EINVAL.
    pub flags: u8,
    pub rsvd1: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    /// Address of the separate metadata buffer in this process.
    pub metadata: u64,
    /// Address of the data buffer in this process.
    pub addr: u64,
    pub metadata_len: u32,
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    /// 0 means the driver's default (io_timeout).
    pub timeout_ms: u32,
    pub rsvd2: u32,
}
crate::assert_size!(UringCmd, 72);

impl UringCmd {
    /// The command of an ioctl structure: `nvme_uring_cmd` is `nvme_passthru_cmd64`
    /// without its trailing result, the same fields at the same offsets (tested).
    pub fn of(pt: &PassthruCmd64) -> UringCmd {
        let (cmd, _result) = UringCmd::read_from_prefix(pt.as_bytes()).expect("80 bytes hold the 72 of UringCmd");
        cmd
    }
}

/// The request number of an I/O command through io_uring: `_IOWR('N', 0x80, struct
/// nvme_uring_cmd)`.
pub const NVME_URING_CMD_IO: u32 =
    nix::request_code_readwrite!(NVME_IOCTL_TYPE, 0x80, std::mem::size_of::<UringCmd>()) as u32;

/// Entries a ring may have (the kernel's IORING_MAX_ENTRIES).
const MAX_RING_ENTRIES: usize = 32768;
/// Longest single wait in [`QueuedIo::idle_until`], so time-outs are looked at.
const LONGEST_WAIT: Duration = Duration::from_millis(200);
/// How much longer than the command timeout closing waits for the kernel.
const CLOSE_MARGIN: Duration = Duration::from_secs(5);

/// The completion (or error) a `res` and `result` of a passthrough CQE stand for, with
/// `tag` as its CID and `qid` as its SQID. `what` names the command (built only for an
/// error).
pub fn outcome(res: i32, result: u64, qid: u16, tag: u16, timeout_ms: u64, what: impl Fn() -> String) -> Outcome {
    if res < 0 {
        return Err(errno_error(Errno::from_raw(-res), &what(), timeout_ms));
    }
    let mut c = completion(res, result, qid, "").or_else(|_| completion(res, result, qid, &what()))?;
    c.cid = tag;
    Ok(c)
}

/// An open generic namespace device.
struct Node {
    file: File,
    path: PathBuf,
    max_transfer: Option<u64>,
}

/// Logical queues on one io_uring of NVMe passthrough commands (see the module).
pub struct UringQueues<'a> {
    device: &'a mut LinuxDevice,
    ring: IoUring<squeue::Entry128, cqueue::Entry32>,
    slots: Slots,
    priorities: Vec<QueuePriority>,
    /// The port of each logical queue (0: the device opened, `n`: its `n`-th other port).
    ports: Vec<usize>,
    /// Open generic devices by port and NSID.
    nodes: HashMap<(usize, u32), Node>,
    timeout_ms: u64,
    closed: bool,
}

impl<'a> UringQueues<'a> {
    /// A ring with one logical queue per spec.
    pub fn open(device: &'a mut LinuxDevice, specs: &[QueueSpec]) -> Result<UringQueues<'a>, DeviceError> {
        if specs.is_empty() {
            return Err(DeviceError::Driver("a workload needs at least one queue".into()));
        }
        let mut depths = Vec::with_capacity(specs.len());
        for (q, spec) in specs.iter().enumerate() {
            if spec.depth == 0 || spec.depth > u16::MAX as u32 {
                return Err(DeviceError::Unsupported(format!(
                    "queue {q}: depth {}; an io_uring passthrough queue holds 1 ..= 65535 commands",
                    spec.depth
                )));
            }
            if spec.port > device.ports.len() {
                return Err(DeviceError::Unsupported(format!(
                    "queue {q} goes through port {}; {} has {} other controller(s) of its NVM subsystem",
                    spec.port + 1,
                    device.controller.name,
                    device.ports.len()
                )));
            }
            depths.push(spec.depth as usize);
        }
        let total: usize = depths.iter().sum();
        if total > MAX_RING_ENTRIES || specs.len() > u16::MAX as usize {
            return Err(DeviceError::Unsupported(format!(
                "{} queues of {total} commands in all; one io_uring holds at most {MAX_RING_ENTRIES}",
                specs.len()
            )));
        }
        let ring = IoUring::<squeue::Entry128, cqueue::Entry32>::builder().build(total as u32).map_err(|e| match e
            .raw_os_error()
            .map(Errno::from_raw)
        {
            Some(Errno::ENOSYS | Errno::EPERM) => DeviceError::Unsupported(format!(
                "io_uring is not available ({e}): the kernel was built without it, or it is disabled \
                     (sysctl kernel.io_uring_disabled, a seccomp filter)"
            )),
            Some(Errno::EINVAL) => DeviceError::Unsupported(format!(
                "the kernel refused an io_uring with 128-byte submission and 32-byte completion entries \
                     ({e}): NVMe passthrough through io_uring needs Linux 5.19 or later"
            )),
            _ => DeviceError::Driver(format!("cannot create an io_uring of {total} entries: {e}")),
        })?;
        let timeout_ms = device.options.command_timeout_ms;
        Ok(UringQueues {
            device,
            ring,
            slots: Slots::new(&depths),
            priorities: specs.iter().map(|s| s.priority).collect(),
            ports: specs.iter().map(|s| s.port).collect(),
            nodes: HashMap::new(),
            timeout_ms,
            closed: false,
        })
    }

    /// The open generic device of `nsid` on logical queue `queue`'s port (opened on
    /// first use): a port's commands go on that controller's own device of the namespace.
    fn node(&mut self, queue: usize, nsid: u32) -> Result<&Node, DeviceError> {
        let key = (self.ports[queue], nsid);
        if !self.nodes.contains_key(&key) {
            let device: &mut LinuxDevice = match key.0 {
                0 => self.device,
                n => &mut self.device.ports[n - 1],
            };
            let (path, max_transfer) = device.generic_node(nsid)?;
            let file = device.host.open_rw(&path).map_err(|e| {
                DeviceError::Driver(format!("cannot open {} for io_uring passthrough: {e}", path.display()))
            })?;
            self.nodes.insert(key, Node { file, path, max_transfer });
        }
        Ok(&self.nodes[&key])
    }

    fn what(&self, queue: usize, tag: u16) -> String {
        let slot = self.slots.slot(queue, tag);
        let cmd = Command { opcode: slot.opcode, nsid: slot.nsid, ..Default::default() };
        let node = self.nodes.get(&(self.ports[queue], slot.nsid)).map(|n| n.path.as_path());
        format!("{}, logical queue {} tag {tag}", command_name(false, &cmd, node), queue + 1)
    }

    /// Hands the ring what was submitted (`io_uring_enter`).
    fn flush(&mut self) -> Result<(), DeviceError> {
        loop {
            match self.ring.submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(DeviceError::Driver(format!("io_uring_enter (submitting commands): {e}"))),
            }
        }
    }

    /// Takes every completion the ring has into the slots.
    fn reap(&mut self) {
        let timeout_ms = self.timeout_ms;
        let mut cq = self.ring.completion();
        cq.sync();
        for cqe in &mut cq {
            let user_data = cqe.user_data();
            let (queue, tag, _) = super::slots::split_user_data(user_data);
            let (res, result) = (cqe.result(), cqe.big_cqe()[0]);
            let slots = &self.slots;
            let nodes = &self.nodes;
            let ports = &self.ports;
            let what = || {
                if tag as usize >= slots.capacity(queue) {
                    return format!("a command of logical queue {}", queue + 1);
                }
                let slot = slots.slot(queue, tag);
                let cmd = Command { opcode: slot.opcode, nsid: slot.nsid, ..Default::default() };
                let node = ports.get(queue).and_then(|p| nodes.get(&(*p, slot.nsid))).map(|n| n.path.as_path());
                format!("{}, logical queue {} tag {tag}", command_name(false, &cmd, node), queue + 1)
            };
            let out = outcome(res, result, queue as u16 + 1, tag, timeout_ms, what);
            self.slots.complete(user_data, out);
        }
    }

    /// Waits (at most `wait`) for one completion, submitting what is pending.
    fn wait_one(&mut self, wait: Duration) -> Result<(), DeviceError> {
        let ts = types::Timespec::new().sec(wait.as_secs()).nsec(wait.subsec_nanos());
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) => Err(DeviceError::Driver(format!("io_uring_enter (waiting for completions): {e}"))),
        }
    }

    /// Submits what is pending and waits, bounded, until the kernel holds no command.
    fn shut_down(&mut self) -> Result<(), DeviceError> {
        self.closed = true;
        let submitted = self.flush();
        let bound = Duration::from_millis(self.timeout_ms) + CLOSE_MARGIN;
        let deadline = monotonic_ns().saturating_add(bound.as_nanos() as u64);
        loop {
            self.reap();
            if self.slots.held_by_kernel() == 0 {
                return submitted;
            }
            let now = monotonic_ns();
            if now >= deadline {
                break;
            }
            self.wait_one(Duration::from_nanos(deadline - now).min(LONGEST_WAIT))?;
        }
        let held = self.slots.leak_held();
        Err(DeviceError::Driver(format!(
            "closing the io_uring queues: the kernel still holds {held} commands after {} ms; their buffers are \
             left allocated so that nothing it writes lands in reused memory",
            bound.as_millis()
        )))
    }
}

impl QueuedIo for UringQueues<'_> {
    fn describe(&self) -> String {
        let depths: Vec<String> = (0..self.slots.queue_count()).map(|q| self.slots.capacity(q).to_string()).collect();
        let priorities = if self.priorities.iter().all(|p| *p == QueuePriority::Medium) {
            String::new()
        } else {
            format!("; priorities {:?} not applied (the driver owns QPRIO)", self.priorities)
        };
        format!(
            "{}, io_uring NVMe passthrough: {} logical queues of depth {} (the driver picks the hardware queues){priorities}",
            self.device.describe(),
            depths.len(),
            depths.join(", ")
        )
    }

    fn queue_count(&self) -> usize {
        self.slots.queue_count()
    }

    fn qid(&self, queue: usize) -> u16 {
        queue as u16 + 1
    }

    fn capacity(&self, queue: usize) -> usize {
        self.slots.capacity(queue)
    }

    fn outstanding(&self, queue: usize) -> usize {
        self.slots.outstanding(queue)
    }

    fn submit(
        &mut self,
        queue: usize,
        cmd: Command,
        data: Transfer<'_>,
        metadata: Transfer<'_>,
    ) -> Result<u16, DeviceError> {
        if queue >= self.slots.queue_count() {
            return Err(DeviceError::Driver(format!("the workload has no queue {queue}")));
        }
        let timeout_ms = self.timeout_ms;
        let node = self.node(queue, cmd.nsid)?;
        let (fd, max_transfer) = (node.file.as_raw_fd(), node.max_transfer);
        let key = (self.ports[queue], cmd.nsid);
        let what = || command_name(false, &cmd, self.nodes.get(&key).map(|n| n.path.as_path()));
        if cmd.flags != 0 {
            return Err(DeviceError::Unsupported(format!(
                "{}: FUSE/PSDT flags {:#04x}; the Linux driver passes no command flags",
                what(),
                cmd.flags
            )));
        }
        if let Some(max) = max_transfer.filter(|&max| data.len() as u64 > max) {
            return Err(DeviceError::Unsupported(format!(
                "{}: a {}-byte transfer; the Linux driver refuses (EINVAL) any longer than the namespace's \
                 queue/max_hw_sectors_kb ({max} bytes) before the drive sees it; needs a userspace-driver target \
                 (sim, qemu)",
                what(),
                data.len()
            )));
        }
        for (t, role) in [(&data, ""), (&metadata, ", metadata")] {
            if !t.is_empty() {
                check_direction(cmd.opcode, matches!(t, Transfer::ToDevice(_)), &format!("{}{role}", what()))?;
            }
        }
        let data_len = transfer_len(data.len(), &what())?;
        let metadata_len = transfer_len(metadata.len(), &what())?;
        let tag = self.slots.take(queue)?;
        let slot = self.slots.slot_mut(queue, tag);
        let staged =
            slot.data.stage(data.len(), bytes_of(&data), matches!(data, Transfer::FromDevice(_))).and_then(|addr| {
                let meta = slot.metadata.stage(
                    metadata.len(),
                    bytes_of(&metadata),
                    matches!(metadata, Transfer::FromDevice(_)),
                )?;
                Ok((addr, meta))
            });
        let (addr, meta_addr) = match staged {
            Ok(a) => a,
            Err(e) => {
                self.slots.untake(queue, tag);
                return Err(e);
            }
        };
        let mut pt = passthru_command(&cmd, timeout_ms);
        (pt.addr, pt.data_len, pt.metadata, pt.metadata_len) = (addr, data_len, meta_addr, metadata_len);
        let uring_cmd = UringCmd::of(&pt);
        let mut area = [0u8; 80];
        area[..std::mem::size_of::<UringCmd>()].copy_from_slice(uring_cmd.as_bytes());
        if self.ring.submission().is_full() {
            if let Err(e) = self.flush() {
                self.slots.untake(queue, tag);
                return Err(e);
            }
        }
        let user_data = self.slots.start(queue, tag, cmd.opcode, cmd.nsid, monotonic_ns());
        let entry = opcode::UringCmd80::new(types::Fd(fd), NVME_URING_CMD_IO).cmd(area).build().user_data(user_data);
        // SAFETY: the entry points at the slot's buffers, which stay allocated (and are
        // not reused) until the kernel completed the command: a slot is freed only by
        // its completion, and closing waits for every command the kernel holds (or
        // leaks their buffers). The node's descriptor lives as long as the ring.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_err() {
            self.slots.release(queue, tag);
            return Err(DeviceError::Driver(format!(
                "{}: the io_uring submission queue is full after submitting",
                command_name(false, &cmd, None)
            )));
        }
        Ok(tag)
    }

    fn ring(&mut self, _queue: usize) -> Result<(), DeviceError> {
        self.flush()
    }

    fn poll(&mut self, queue: usize, f: &mut dyn FnMut(Reaped<'_>)) -> Result<usize, DeviceError> {
        self.reap();
        let mut n = 0;
        while let Some((tag, outcome)) = self.slots.next_ready(queue) {
            match outcome {
                Ok(completion) => {
                    let slot = self.slots.slot(queue, tag);
                    f(Reaped { completion, data: slot.data.read_back(), metadata: slot.metadata.read_back() });
                    self.slots.release(queue, tag);
                    n += 1;
                }
                Err(e) => {
                    self.slots.release(queue, tag);
                    return Err(e);
                }
            }
        }
        Ok(n)
    }

    fn expired(&mut self, queue: usize) -> Option<DeviceError> {
        let tag = self.slots.expire(queue, monotonic_ns(), self.timeout_ms.saturating_mul(1_000_000))?;
        Some(DeviceError::Timeout { what: self.what(queue, tag), after_ms: self.timeout_ms })
    }

    fn now_ns(&mut self) -> u64 {
        monotonic_ns()
    }

    fn idle_until(&mut self, deadline_ns: u64) -> Result<(), DeviceError> {
        let now = monotonic_ns();
        if deadline_ns <= now {
            return Ok(());
        }
        let wait = Duration::from_nanos(deadline_ns - now).min(LONGEST_WAIT);
        if self.slots.held_by_kernel() == 0 {
            std::thread::sleep(wait);
            return Ok(());
        }
        if !self.ring.completion().is_empty() {
            return Ok(());
        }
        self.wait_one(wait)
    }

    fn simulated_clock(&self) -> bool {
        false
    }

    fn close(mut self: Box<Self>) -> Result<(), DeviceError> {
        self.shut_down()
    }

    /// The controller node's admin passthrough ioctl, beside the ring: the kernel sends
    /// it on its admin queue while the ring's commands stay on the I/O queues.
    fn admin(&mut self, cmd: Command, data: crate::device::Data<'_>) -> Result<crate::spec::Completion, DeviceError> {
        Device::admin(&mut *self.device, cmd, data)
    }

    /// The rig cuts the power with the commands in flight; the driver ends them when the
    /// function goes, and their completions are reaped here, never reported (they came
    /// after the cut).
    fn power_cut(mut self: Box<Self>, seed: u64) -> Result<(), DeviceError> {
        Device::power_off(&mut *self.device, seed)?;
        self.shut_down()
    }
}

impl Drop for UringQueues<'_> {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.shut_down();
        }
    }
}

/// The bytes a transfer copies into its buffer.
fn bytes_of<'t>(t: &Transfer<'t>) -> Option<&'t [u8]> {
    match t {
        Transfer::ToDevice(b) => Some(b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Status, StatusCodeType};
    use std::mem::offset_of;

    #[test]
    fn nvme_uring_cmd_has_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<UringCmd>(), 72);
        let offsets = [
            (offset_of!(UringCmd, opcode), 0),
            (offset_of!(UringCmd, flags), 1),
            (offset_of!(UringCmd, rsvd1), 2),
            (offset_of!(UringCmd, nsid), 4),
            (offset_of!(UringCmd, cdw2), 8),
            (offset_of!(UringCmd, cdw3), 12),
            (offset_of!(UringCmd, metadata), 16),
            (offset_of!(UringCmd, addr), 24),
            (offset_of!(UringCmd, metadata_len), 32),
            (offset_of!(UringCmd, data_len), 36),
            (offset_of!(UringCmd, cdw10), 40),
            (offset_of!(UringCmd, cdw11), 44),
            (offset_of!(UringCmd, cdw12), 48),
            (offset_of!(UringCmd, cdw13), 52),
            (offset_of!(UringCmd, cdw14), 56),
            (offset_of!(UringCmd, cdw15), 60),
            (offset_of!(UringCmd, timeout_ms), 64),
            (offset_of!(UringCmd, rsvd2), 68),
        ];
        for (i, (got, want)) in offsets.iter().enumerate() {
            assert_eq!(got, want, "field {i}");
        }
        // The same fields as the ioctl structure, which ends with the result.
        let pt = PassthruCmd64 {
            opcode: 0x02,
            flags: 0,
            rsvd1: 0,
            nsid: 1,
            cdw2: 2,
            cdw3: 3,
            metadata: 0x1000,
            addr: 0x2000,
            metadata_len: 8,
            data_len: 4096,
            cdw10: 10,
            cdw11: 11,
            cdw12: 12,
            cdw13: 13,
            cdw14: 14,
            cdw15: 15,
            timeout_ms: 500,
            rsvd2: 0,
            result: u64::MAX,
        };
        let c = UringCmd::of(&pt);
        assert_eq!((c.opcode, c.nsid, c.cdw2, c.cdw3), (0x02, 1, 2, 3));
        assert_eq!((c.metadata, c.addr, c.metadata_len, c.data_len), (0x1000, 0x2000, 8, 4096));
        assert_eq!([c.cdw10, c.cdw11, c.cdw12, c.cdw13, c.cdw14, c.cdw15], [10, 11, 12, 13, 14, 15]);
        assert_eq!((c.timeout_ms, c.rsvd2), (500, 0));
        // _IOWR('N', 0x80, 72): direction 3 (bits 31:30), size 72 (29:16), 'N', 0x80.
        assert_eq!(NVME_URING_CMD_IO, 0xC048_4E80);
    }

    #[test]
    fn a_status_becomes_a_completion_tagged_with_the_slot() {
        // Success, result DW0 0x1234 and DW1 0x5.
        let c = outcome(0, 0x5_0000_1234, 2, 7, 1000, || "cmd".into()).unwrap();
        assert_eq!((c.dw0, c.dw1, c.sq_id, c.cid), (0x1234, 5, 2, 7));
        assert!(c.status().is_success());
        // LBA Out of Range (generic 80h) with DNR: the drive's answer, a completion.
        let c = outcome(0x4080, 0, 1, 3, 1000, || "cmd".into()).unwrap();
        let s: Status = c.status();
        assert_eq!((s.sct, s.sc), (StatusCodeType::Generic, 0x80));
        assert_eq!(c.cid, 3);
    }

    #[test]
    fn an_errno_or_a_status_the_driver_made_up_is_an_error() {
        let e = outcome(-libc::EINTR, 0, 1, 0, 1500, || "Read on /dev/ng0n1".into()).unwrap_err();
        assert!(matches!(e, DeviceError::Timeout { after_ms: 1500, .. }), "{e:?}");
        assert!(e.to_string().contains("Read on /dev/ng0n1"), "{e}");
        let e = outcome(-libc::EINVAL, 0, 1, 0, 1, || "cmd".into()).unwrap_err();
        assert!(e.to_string().contains("EINVAL"), "{e}");
        // 371h: Path Related Status, Command Aborted By Host.
        let e = outcome(0x371, 0, 1, 0, 1, || "Write NSID 1".into()).unwrap_err();
        assert!(e.to_string().contains("completed it itself") && e.to_string().contains("Write NSID 1"), "{e}");
    }
}
