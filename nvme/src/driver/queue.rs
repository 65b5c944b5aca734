//! Queue pairs as the host drives them (NVMe 1.4 §4.1 "Submission Queue & Completion
//! Queue Definition", §7.2 "Command Submission and Completion Mechanism").
//!
//! A [`QueuePair`] owns one submission queue and the completion queue it posts to, both
//! physically contiguous in host memory, and one slot per command identifier. A slot
//! keeps its data buffer, PRP list and metadata buffer between commands, so a steady
//! workload allocates nothing per command. Submitting writes the 64-byte entry at the
//! SQ tail; [`IoQueuePair::ring`] writes the SQ Tail Doorbell. Completions are found by
//! their Phase Tag, the SQ head is taken from each entry's SQHD, and the CQ Head
//! Doorbell is written once per batch reaped. Every command has a deadline; a command
//! past it is abandoned (its slot stays reserved until the controller completes it or
//! the queue is torn down, so a late completion can never land in a reused buffer).
//!
//! [`IoQueuePair`] is the handle callers get from the controller: the queue-level API
//! (many commands in flight: submit, ring, poll, wait) and the one-command-at-a-time
//! path (`execute`) used by the `Device` implementation.

use std::collections::VecDeque;
use std::time::Duration;

use crate::device::{Data, DeviceError};
use crate::driver::memory::{DmaBuf, PageAllocator, PAGE_SIZE};
use crate::driver::prp;
use crate::spec::registers::{offset, Csts};
use crate::spec::{AdminOpcode, Command, Completion, NvmOpcode};

/// How often a command that is taking long looks at CSTS.CFS.
const CFS_CHECK_EVERY: Duration = Duration::from_millis(100);
use crate::transport::{DmaRegion, Transport};

/// Bytes of a submission queue entry (CC.IOSQES = 6) and a completion queue entry
/// (CC.IOCQES = 4).
pub const SQE_BYTES: usize = 64;
pub const CQE_BYTES: usize = 16;

/// Completions kept for inspection that matched no outstanding command.
const UNEXPECTED_KEPT: usize = 64;

/// Which way a queued command's data moves, and how much.
#[derive(Clone, Copy, Debug)]
pub enum Transfer<'a> {
    None,
    /// Host to controller: these bytes are copied into the command's buffer.
    ToDevice(&'a [u8]),
    /// Controller to host: this many bytes, handed back when the command completes.
    FromDevice(usize),
}

impl Transfer<'_> {
    pub fn len(&self) -> usize {
        match self {
            Transfer::None => 0,
            Transfer::ToDevice(b) => b.len(),
            Transfer::FromDevice(n) => *n,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn reads_from_device(&self) -> bool {
        matches!(self, Transfer::FromDevice(n) if *n > 0)
    }
}

impl<'a> Transfer<'a> {
    /// The transfer a command-level [`Data`] asks for.
    pub fn of(data: &'a Data<'_>) -> Transfer<'a> {
        match data {
            Data::None => Transfer::None,
            Data::ToDevice(b) => Transfer::ToDevice(b),
            Data::FromDevice(b) => Transfer::FromDevice(b.len()),
        }
    }
}

/// A completion handed back by [`IoQueuePair::poll`], with the data the command read.
#[derive(Debug)]
pub struct Reaped<'a> {
    pub completion: Completion,
    /// What the controller wrote for a [`Transfer::FromDevice`] command (else empty).
    pub data: &'a [u8],
    /// The separate metadata buffer (MPTR), when one was read.
    pub metadata: &'a [u8],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Free,
    InFlight,
    /// Completed, waiting to be handed to the caller.
    Completed,
    /// Past its deadline; freed when (if) its completion arrives.
    Abandoned,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotKind {
    Command,
    /// An Asynchronous Event Request: its completion goes to `async_events`.
    AsyncEvent,
}

/// One role of memory in a slot (data, PRP list or metadata): a buffer kept between
/// commands, and the buffer of the command in flight (the kept one, or a temporary one
/// for an unusually large transfer).
#[derive(Debug, Default)]
struct SlotMemory {
    kept: Option<DmaBuf>,
    current: Option<DmaBuf>,
}

impl SlotMemory {
    fn take(
        &mut self,
        pages: &mut PageAllocator,
        bytes: usize,
        keep_max: usize,
    ) -> Result<Option<DmaBuf>, DeviceError> {
        if bytes == 0 {
            return Ok(None);
        }
        if let Some(kept) = self.kept.filter(|k| k.len >= bytes) {
            self.current = Some(kept);
            return Ok(Some(kept));
        }
        let buf = pages.alloc(bytes)?;
        if bytes <= keep_max {
            if let Some(old) = self.kept.take() {
                pages.free(old)?;
            }
            self.kept = Some(buf);
        }
        self.current = Some(buf);
        Ok(Some(buf))
    }

    fn finish(&mut self, pages: &mut PageAllocator) {
        if let Some(cur) = self.current.take() {
            if Some(cur) != self.kept {
                // A buffer this slot allocated itself; freeing it cannot be refused.
                let _ = pages.free(cur);
            }
        }
    }

    fn release(&mut self, pages: &mut PageAllocator) {
        self.finish(pages);
        if let Some(kept) = self.kept.take() {
            let _ = pages.free(kept);
        }
    }
}

#[derive(Debug)]
struct Slot {
    state: SlotState,
    kind: SlotKind,
    opcode: u8,
    /// When the command was submitted, on the transport's clock (ns).
    submitted: u64,
    data: SlotMemory,
    data_len: usize,
    data_from_device: bool,
    list: SlotMemory,
    meta: SlotMemory,
    meta_len: usize,
    meta_from_device: bool,
    completion: Completion,
}

impl Slot {
    fn new() -> Self {
        Slot {
            state: SlotState::Free,
            kind: SlotKind::Command,
            opcode: 0,
            submitted: 0,
            data: SlotMemory::default(),
            data_len: 0,
            data_from_device: false,
            list: SlotMemory::default(),
            meta: SlotMemory::default(),
            meta_len: 0,
            meta_from_device: false,
            completion: Completion::default(),
        }
    }

    fn finish(&mut self, pages: &mut PageAllocator) {
        self.data.finish(pages);
        self.list.finish(pages);
        self.meta.finish(pages);
        self.data_len = 0;
        self.meta_len = 0;
        self.data_from_device = false;
        self.meta_from_device = false;
        self.state = SlotState::Free;
        self.kind = SlotKind::Command;
    }
}

/// Sizes of the memory a queue pair keeps per slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotSizes {
    /// Data buffer allocated for every slot when the queue is created.
    pub preallocated: usize,
    /// Largest data buffer a slot keeps after a command; larger ones are temporary.
    pub keep_max: usize,
}

/// A submission queue and its completion queue, as the host sees them.
#[derive(Debug)]
pub(crate) struct QueuePair {
    pub qid: u16,
    sq: DmaBuf,
    cq: DmaBuf,
    entries: u32,
    sq_tail: u32,
    /// SQ head as last reported by the controller (CQE SQHD).
    sq_head: u32,
    rung_tail: u32,
    /// When the first command since the last SQ Tail Doorbell write was submitted, on
    /// the transport's clock (ns).
    batch_started: u64,
    cq_head: u32,
    phase: bool,
    cq_head_unwritten: bool,
    sq_doorbell: u64,
    cq_doorbell: u64,
    slots: Vec<Slot>,
    free: Vec<u16>,
    ready: VecDeque<u16>,
    keep_max: usize,
    /// Completions of Asynchronous Event Requests not yet taken.
    pub async_events: Vec<Completion>,
    /// Asynchronous Event Requests in flight.
    pub aers_outstanding: u16,
    /// Commands (not AERs) in flight or completed and not yet handed back.
    commands_outstanding: usize,
    /// Completions that matched no outstanding command (wrong SQID, unknown or free CID).
    pub unexpected: Vec<Completion>,
    /// When CSTS was last read for a workload's [`IoQueuePair::expired`] (transport clock, ns).
    status_checked_ns: u64,
}

impl QueuePair {
    /// Allocates a queue pair of `entries` entries (2 ..= 65536) with its slots' buffers.
    /// The completion queue is zeroed so no stale Phase Tag is mistaken for a completion.
    pub fn new(
        qid: u16,
        entries: u32,
        dstrd: u8,
        dma: &DmaRegion,
        pages: &mut PageAllocator,
        sizes: SlotSizes,
    ) -> Result<QueuePair, DeviceError> {
        if !(2..=65536).contains(&entries) {
            return Err(DeviceError::Driver(format!("queue {qid}: {entries} entries is not 2 ..= 65536")));
        }
        let mut allocated = Vec::new();
        let result = Self::allocate(qid, entries, dstrd, dma, pages, sizes, &mut allocated);
        if result.is_err() {
            for buf in allocated {
                let _ = pages.free(buf);
            }
        }
        result
    }

    fn allocate(
        qid: u16,
        entries: u32,
        dstrd: u8,
        dma: &DmaRegion,
        pages: &mut PageAllocator,
        sizes: SlotSizes,
        allocated: &mut Vec<DmaBuf>,
    ) -> Result<QueuePair, DeviceError> {
        let sq = pages.alloc(entries as usize * SQE_BYTES)?;
        allocated.push(sq);
        let cq = pages.alloc(entries as usize * CQE_BYTES)?;
        allocated.push(cq);
        dma.fill(cq.addr, cq.len, 0).map_err(crate::transport::TransportError::from)?;
        dma.fill(sq.addr, sq.len, 0).map_err(crate::transport::TransportError::from)?;
        let commands = entries as usize - 1;
        let mut slots = Vec::with_capacity(commands);
        for _ in 0..commands {
            let mut slot = Slot::new();
            if sizes.preallocated > 0 {
                let buf = pages.alloc(sizes.preallocated)?;
                allocated.push(buf);
                slot.data.kept = Some(buf);
            }
            slots.push(slot);
        }
        Ok(QueuePair {
            qid,
            sq,
            cq,
            entries,
            sq_tail: 0,
            sq_head: 0,
            rung_tail: 0,
            batch_started: 0,
            cq_head: 0,
            phase: true,
            cq_head_unwritten: false,
            sq_doorbell: crate::spec::registers::doorbell(qid, false, dstrd),
            cq_doorbell: crate::spec::registers::doorbell(qid, true, dstrd),
            free: (0..commands as u16).rev().collect(),
            ready: VecDeque::with_capacity(commands),
            slots,
            keep_max: sizes.keep_max.max(PAGE_SIZE),
            async_events: Vec::new(),
            aers_outstanding: 0,
            commands_outstanding: 0,
            unexpected: Vec::new(),
            status_checked_ns: 0,
        })
    }

    /// Frees all memory of this queue pair. The controller must no longer use it.
    pub fn release(mut self, pages: &mut PageAllocator) {
        for slot in &mut self.slots {
            slot.data.release(pages);
            slot.list.release(pages);
            slot.meta.release(pages);
        }
        let _ = pages.free(self.sq);
        let _ = pages.free(self.cq);
    }

    pub fn sq_base(&self) -> u64 {
        self.sq.addr
    }

    pub fn cq_base(&self) -> u64 {
        self.cq.addr
    }

    fn queue_name(&self) -> String {
        if self.qid == 0 {
            "the admin queue".to_string()
        } else {
            format!("I/O queue {}", self.qid)
        }
    }

    fn describe_command(&self, cid: u16) -> String {
        let opcode = self.slots[cid as usize].opcode;
        let name = if self.qid == 0 {
            AdminOpcode::from_u8(opcode).map(|o| format!("{o:?}"))
        } else {
            NvmOpcode::from_u8(opcode).map(|o| format!("{o:?}"))
        };
        format!("{} ({opcode:02X}h) CID {cid} on {}", name.unwrap_or_else(|| "command".into()), self.queue_name())
    }

    /// Whether the next command starts a batch (nothing submitted since the last SQ Tail
    /// Doorbell write): then its submission time is read from the clock.
    pub fn starts_batch(&self) -> bool {
        self.sq_tail == self.rung_tail
    }

    /// Writes `cmd` at the SQ tail with a free CID and, unless `raw`, the data pointer
    /// (PRP Entry 1/2, PSDT = PRPs) and metadata pointer of freshly staged buffers.
    /// `now_ns` is the clock when [`Self::starts_batch`] (otherwise unused).
    #[allow(clippy::too_many_arguments)]
    pub fn submit(
        &mut self,
        now_ns: u64,
        dma: &DmaRegion,
        pages: &mut PageAllocator,
        mut cmd: Command,
        data: Transfer<'_>,
        metadata: Transfer<'_>,
        kind: SlotKind,
        raw: bool,
    ) -> Result<u16, DeviceError> {
        if (self.sq_tail + 1) % self.entries == self.sq_head {
            return Err(DeviceError::Driver(format!(
                "{} is full: the controller reports SQ head {} with tail {}",
                self.queue_name(),
                self.sq_head,
                self.sq_tail
            )));
        }
        let Some(cid) = self.free.pop() else {
            return Err(DeviceError::Driver(format!(
                "{} has all {} commands outstanding",
                self.queue_name(),
                self.slots.len()
            )));
        };
        let slot = &mut self.slots[cid as usize];
        if !raw {
            if let Err(e) = stage(slot, dma, pages, &mut cmd, data, metadata, self.keep_max) {
                slot.finish(pages);
                self.free.push(cid);
                return Err(e);
            }
        }
        cmd.cid = cid;
        let at = self.sq.addr + (self.sq_tail as usize * SQE_BYTES) as u64;
        if let Err(e) = dma.write_obj(at, &cmd) {
            slot.finish(pages);
            self.free.push(cid);
            return Err(crate::transport::TransportError::from(e).into());
        }
        // One clock read per batch: the commands put in before one doorbell write share
        // the time the first was (a clock read per command cost ~9% of a QD 32 loop).
        if self.sq_tail == self.rung_tail {
            self.batch_started = now_ns;
        }
        self.sq_tail = (self.sq_tail + 1) % self.entries;
        slot.state = SlotState::InFlight;
        slot.kind = kind;
        slot.opcode = cmd.opcode;
        slot.submitted = self.batch_started;
        match kind {
            SlotKind::AsyncEvent => self.aers_outstanding += 1,
            SlotKind::Command => self.commands_outstanding += 1,
        }
        Ok(cid)
    }

    /// Writes the SQ Tail Doorbell if entries were added since it was last written.
    pub fn ring(&mut self, transport: &mut dyn Transport) -> Result<(), DeviceError> {
        if self.sq_tail != self.rung_tail {
            transport.mmio_write32(self.sq_doorbell, self.sq_tail)?;
            self.rung_tail = self.sq_tail;
        }
        Ok(())
    }

    /// Consumes the completion entries the controller has posted (at most one queue's
    /// worth per call), then writes the CQ Head Doorbell once. Returns how many.
    pub fn reap(&mut self, transport: &mut dyn Transport, pages: &mut PageAllocator) -> Result<usize, DeviceError> {
        let mut n = 0;
        {
            let dma = transport.dma();
            while n < self.entries as usize {
                let at = self.cq.addr + (self.cq_head as usize * CQE_BYTES) as u64;
                let status = dma.load_u16_acquire(at + 14).map_err(crate::transport::TransportError::from)?;
                if (status & 1 != 0) != self.phase {
                    break;
                }
                let cqe: Completion = dma.read_obj(at).map_err(crate::transport::TransportError::from)?;
                self.cq_head += 1;
                if self.cq_head == self.entries {
                    self.cq_head = 0;
                    self.phase = !self.phase;
                }
                self.cq_head_unwritten = true;
                n += 1;
                // An SQ Head Pointer beyond the queue is not believed (the completion still
                // reaches the caller, who may judge it).
                if cqe.sq_id == self.qid && (cqe.sq_head as u32) < self.entries {
                    self.sq_head = cqe.sq_head as u32;
                }
                self.dispatch(cqe, pages);
            }
        }
        if self.cq_head_unwritten {
            transport.mmio_write32(self.cq_doorbell, self.cq_head)?;
            self.cq_head_unwritten = false;
        }
        Ok(n)
    }

    fn dispatch(&mut self, cqe: Completion, pages: &mut PageAllocator) {
        let cid = cqe.cid as usize;
        let state = self.slots.get(cid).map(|s| s.state);
        match state {
            Some(SlotState::InFlight) if cqe.sq_id == self.qid => {
                let slot = &mut self.slots[cid];
                if slot.kind == SlotKind::AsyncEvent {
                    self.aers_outstanding = self.aers_outstanding.saturating_sub(1);
                    self.async_events.push(cqe);
                    slot.finish(pages);
                    self.free.push(cid as u16);
                } else {
                    slot.completion = cqe;
                    slot.state = SlotState::Completed;
                    self.ready.push_back(cid as u16);
                }
            }
            Some(SlotState::Abandoned) if cqe.sq_id == self.qid => {
                self.slots[cid].finish(pages);
                self.free.push(cid as u16);
            }
            _ => {
                if self.unexpected.len() < UNEXPECTED_KEPT {
                    self.unexpected.push(cqe);
                }
            }
        }
    }

    /// Hands completed command `cid` to `f` with its data, then frees its slot.
    fn deliver<R>(
        &mut self,
        dma: &DmaRegion,
        pages: &mut PageAllocator,
        cid: u16,
        f: impl FnOnce(Reaped<'_>) -> R,
    ) -> Result<R, DeviceError> {
        self.commands_outstanding -= 1;
        let slot = &mut self.slots[cid as usize];
        let completion = slot.completion;
        let data = slot.data.current.filter(|_| slot.data_from_device).map(|b| (b.addr, slot.data_len));
        let meta = slot.meta.current.filter(|_| slot.meta_from_device).map(|b| (b.addr, slot.meta_len));
        let result =
            with_bytes(dma, data, |data| with_bytes(dma, meta, |metadata| f(Reaped { completion, data, metadata })));
        slot.finish(pages);
        self.free.push(cid);
        result.and_then(|r| r).map_err(|e| crate::transport::TransportError::from(e).into())
    }

    /// Hands every completed command to `f`, in completion order. Returns how many.
    fn deliver_ready(
        &mut self,
        dma: &DmaRegion,
        pages: &mut PageAllocator,
        f: &mut impl FnMut(Reaped<'_>),
    ) -> Result<usize, DeviceError> {
        let mut n = 0;
        while let Some(cid) = self.ready.pop_front() {
            self.deliver(dma, pages, cid, &mut *f)?;
            n += 1;
        }
        Ok(n)
    }

    /// The first in-flight command past its deadline, marked abandoned.
    fn expire(&mut self, timeout: Duration, now_ns: u64) -> Option<u16> {
        let timeout = timeout.as_nanos() as u64;
        let cid = self.slots.iter().position(|s| {
            s.state == SlotState::InFlight
                && s.kind == SlotKind::Command
                && now_ns.saturating_sub(s.submitted) > timeout
        })?;
        self.abandon(cid as u16);
        Some(cid as u16)
    }

    /// The in-flight command submitted first (not an AER).
    fn oldest_in_flight(&self) -> Option<u16> {
        let in_flight = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == SlotState::InFlight && s.kind == SlotKind::Command);
        in_flight.min_by_key(|(_, s)| s.submitted).map(|(cid, _)| cid as u16)
    }

    /// Gives up on every in-flight command (the controller is gone).
    fn abandon_all(&mut self) {
        for cid in 0..self.slots.len() {
            let slot = &self.slots[cid];
            if slot.state == SlotState::InFlight && slot.kind == SlotKind::Command {
                self.abandon(cid as u16);
            }
        }
    }

    /// Gives up on an in-flight command: it no longer counts as outstanding, and its slot
    /// is freed only when (if) the controller completes it.
    fn abandon(&mut self, cid: u16) {
        self.slots[cid as usize].state = SlotState::Abandoned;
        self.commands_outstanding -= 1;
    }

    fn timeout_error(&self, cid: u16, timeout: Duration) -> DeviceError {
        DeviceError::Timeout { what: self.describe_command(cid), after_ms: timeout.as_millis() as u64 }
    }

    /// Commands submitted and not yet handed back (in flight, or completed and waiting).
    pub fn outstanding(&self) -> usize {
        self.commands_outstanding
    }

    /// Commands that can be in flight at once (entries − 1).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

/// Stages `cmd`'s buffers in `slot` and fills in its data and metadata pointers.
fn stage(
    slot: &mut Slot,
    dma: &DmaRegion,
    pages: &mut PageAllocator,
    cmd: &mut Command,
    data: Transfer<'_>,
    metadata: Transfer<'_>,
    keep_max: usize,
) -> Result<(), DeviceError> {
    let dma_err = |e| DeviceError::from(crate::transport::TransportError::from(e));
    slot.data_len = data.len();
    slot.data_from_device = data.reads_from_device();
    // Without data there is no data pointer to fill: PRP Entry 1 / 2 stay as the caller
    // gave them (Create I/O queue commands carry the queue's base address there).
    if let Some(buf) = slot.data.take(pages, data.len(), keep_max)? {
        // PSDT = 00b: PRPs are used for this transfer (Figure 105).
        cmd.flags &= !0xC0;
        if let Transfer::ToDevice(bytes) = data {
            dma.write(buf.addr, bytes).map_err(dma_err)?;
        }
        let list_pages = prp::list_pages_needed(buf.addr, data.len());
        let list = slot.list.take(pages, list_pages * PAGE_SIZE, PAGE_SIZE)?;
        let (prp1, prp2) = prp::build(dma, buf.addr, data.len(), list.map_or(0, |l| l.addr))?;
        cmd.prp1 = prp1;
        cmd.prp2 = prp2;
    }
    slot.meta_len = metadata.len();
    slot.meta_from_device = metadata.reads_from_device();
    if let Some(buf) = slot.meta.take(pages, metadata.len(), keep_max)? {
        if let Transfer::ToDevice(bytes) = metadata {
            dma.write(buf.addr, bytes).map_err(dma_err)?;
        }
        // MPTR: one contiguous buffer (§4.5 "Metadata Region").
        cmd.mptr = buf.addr;
    }
    Ok(())
}

fn with_bytes<R>(
    dma: &DmaRegion,
    range: Option<(u64, usize)>,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R, crate::transport::DmaError> {
    match range {
        Some((addr, len)) => dma.with_slice(addr, len, f),
        None => Ok(f(&[])),
    }
}

/// Waits politely: spins, then sleeps a little, always letting the transport progress
/// (a simulated clock moves on in `idle`; sleeping would only slow it down).
struct Waiter {
    spins: u32,
}

impl Waiter {
    fn new() -> Self {
        Waiter { spins: 0 }
    }

    fn idle(&mut self, transport: &mut dyn Transport) -> Result<(), DeviceError> {
        transport.idle()?;
        self.spins = self.spins.saturating_add(1);
        if self.spins > 2000 && !transport.simulated_clock() {
            std::thread::sleep(Duration::from_micros(20));
        }
        Ok(())
    }
}

/// A queue pair with what it needs to run: the transport and the host memory allocator.
/// Obtained from [`crate::driver::Controller::queue`].
pub struct IoQueuePair<'a> {
    pub(crate) queue: &'a mut QueuePair,
    pub(crate) transport: &'a mut dyn Transport,
    pub(crate) pages: &'a mut PageAllocator,
    pub(crate) timeout: Duration,
}

impl IoQueuePair<'_> {
    /// The queue identifier (SQ and CQ have the same one).
    pub fn qid(&self) -> u16 {
        self.queue.qid
    }

    /// Entries of the submission (and completion) queue.
    pub fn entries(&self) -> u32 {
        self.queue.entries
    }

    /// How many commands can be in flight at once (entries − 1: a full queue keeps one
    /// entry empty, §4.1.2).
    pub fn capacity(&self) -> usize {
        self.queue.slots.len()
    }

    /// Commands submitted and not yet handed back.
    pub fn outstanding(&self) -> usize {
        self.queue.outstanding()
    }

    /// Bus addresses of the submission and completion queue memory.
    pub fn base_addresses(&self) -> (u64, u64) {
        (self.queue.sq.addr, self.queue.cq.addr)
    }

    /// BAR0 offsets of the SQ Tail Doorbell and the CQ Head Doorbell.
    pub fn doorbells(&self) -> (u64, u64) {
        (self.queue.sq_doorbell, self.queue.cq_doorbell)
    }

    /// Places `cmd` in the submission queue with a free CID and a data pointer to a
    /// buffer holding (or receiving) `data`. The controller sees it after [`Self::ring`].
    /// Returns the CID.
    pub fn submit(&mut self, cmd: Command, data: Transfer<'_>) -> Result<u16, DeviceError> {
        self.submit_with_metadata(cmd, data, Transfer::None)
    }

    /// As [`Self::submit`], with a separate metadata buffer through MPTR.
    pub fn submit_with_metadata(
        &mut self,
        cmd: Command,
        data: Transfer<'_>,
        metadata: Transfer<'_>,
    ) -> Result<u16, DeviceError> {
        let now = self.batch_time();
        let dma = self.transport.dma();
        self.queue.submit(now, dma, self.pages, cmd, data, metadata, SlotKind::Command, false)
    }

    /// The clock, read only when the next command starts a batch.
    fn batch_time(&mut self) -> u64 {
        if self.queue.starts_batch() {
            self.transport.now_ns()
        } else {
            0
        }
    }

    /// Places `cmd` exactly as given (PRP entries, MPTR and PSDT untouched) except for its
    /// CID: for cases that build their own data pointers.
    pub fn submit_raw(&mut self, cmd: Command) -> Result<u16, DeviceError> {
        let now = self.batch_time();
        let dma = self.transport.dma();
        self.queue.submit(now, dma, self.pages, cmd, Transfer::None, Transfer::None, SlotKind::Command, true)
    }

    /// Writes the SQ Tail Doorbell so the controller fetches what was submitted.
    pub fn ring(&mut self) -> Result<(), DeviceError> {
        self.queue.ring(self.transport)
    }

    /// Hands every completion already posted to `f` (data included), never waiting.
    /// Returns how many were handed over.
    pub fn poll(&mut self, mut f: impl FnMut(Reaped<'_>)) -> Result<usize, DeviceError> {
        let mut n = self.queue.deliver_ready(self.transport.dma(), self.pages, &mut f)?;
        if self.queue.reap(self.transport, self.pages)? > 0 {
            n += self.queue.deliver_ready(self.transport.dma(), self.pages, &mut f)?;
        }
        Ok(n)
    }

    /// Hands completions to `f` until at least `n` have been handed over. Fails with
    /// [`DeviceError::Timeout`] naming the first command found past its deadline, or as
    /// [`Self::expired`] says when the controller is gone.
    pub fn wait(&mut self, n: usize, mut f: impl FnMut(Reaped<'_>)) -> Result<usize, DeviceError> {
        let outstanding = self.queue.outstanding();
        if n > outstanding {
            return Err(DeviceError::Driver(format!(
                "asked to wait for {n} completions on {} with {outstanding} commands outstanding",
                self.queue.queue_name()
            )));
        }
        let mut done = 0;
        let mut waiter = Waiter::new();
        loop {
            let got = self.poll(&mut f)?;
            done += got;
            if done >= n {
                return Ok(done);
            }
            if got == 0 {
                if let Some(e) = self.expired() {
                    return Err(e);
                }
                waiter.idle(self.transport)?;
            }
        }
    }

    /// The first in-flight command past the command timeout, given up on, as the error
    /// naming it; or, when commands are in flight and CSTS (read at most every
    /// [`CFS_CHECK_EVERY`]) says the controller is gone or hit a fatal error, that error,
    /// every in-flight command given up on. `None` when every command is within its time.
    pub fn expired(&mut self) -> Option<DeviceError> {
        let now = self.transport.now_ns();
        if let Some(cid) = self.queue.expire(self.timeout, now) {
            return Some(self.queue.timeout_error(cid, self.timeout));
        }
        if now.saturating_sub(self.queue.status_checked_ns) < CFS_CHECK_EVERY.as_nanos() as u64 {
            return None;
        }
        let oldest = self.queue.oldest_in_flight()?;
        self.queue.status_checked_ns = now;
        let elapsed = Duration::from_nanos(now.saturating_sub(self.queue.slots[oldest as usize].submitted));
        match self.controller_stopped(oldest, elapsed) {
            Ok(Some(e)) => {
                self.queue.abandon_all();
                Some(e)
            }
            Ok(None) => None,
            Err(e) => Some(e),
        }
    }

    /// Whether CSTS says the controller will complete nothing more: it reads all ones
    /// (gone) or sets CFS. Then command `cid` is given up on and the error names it.
    ///
    /// A register read that reaches no function need not read all ones: behind a root
    /// port whose slot was emptied, QEMU's unassigned memory reads 0. So a CSTS with RDY
    /// clear (the controller was enabled: commands are outstanding) is checked in
    /// configuration space, which reads all ones for a function that is not there: a
    /// Vendor ID of FFFFh means gone. A present controller that dropped RDY (a quirk, a
    /// reset) still has its Vendor ID and is not reported gone.
    fn controller_stopped(&mut self, cid: u16, elapsed: Duration) -> Result<Option<DeviceError>, DeviceError> {
        let raw = self.transport.mmio_read32(offset::CSTS)?;
        let after_ms = elapsed.as_millis() as u64;
        let error = match raw {
            u32::MAX => DeviceError::Removed { what: self.queue.describe_command(cid), after_ms },
            raw if Csts::from_bits(raw).cfs() => {
                DeviceError::ControllerFatal { what: self.queue.describe_command(cid), after_ms }
            }
            raw if !Csts::from_bits(raw).rdy() && self.function_gone()? => {
                DeviceError::Removed { what: self.queue.describe_command(cid), after_ms }
            }
            _ => return Ok(None),
        };
        if self.queue.slots[cid as usize].state == SlotState::InFlight {
            self.queue.abandon(cid);
        }
        Ok(Some(error))
    }

    /// Whether the function no longer answers configuration reads: its Vendor ID (offset
    /// 00h) reads FFFFh, which no function has (PCI Local Bus: the value returned when no
    /// function responds).
    fn function_gone(&mut self) -> Result<bool, DeviceError> {
        Ok(self.transport.config_read32(0x00)? & 0xFFFF == 0xFFFF)
    }

    /// Sends one command and waits (bounded) for its completion; data the controller
    /// wrote is copied into `data` / `metadata` when they are [`Data::FromDevice`].
    /// Completions of other commands that arrive meanwhile are kept for [`Self::poll`].
    pub fn execute(
        &mut self,
        cmd: Command,
        mut data: Data<'_>,
        mut metadata: Data<'_>,
    ) -> Result<Completion, DeviceError> {
        let now = self.batch_time();
        let dma = self.transport.dma();
        let cid = self.queue.submit(
            now,
            dma,
            self.pages,
            cmd,
            Transfer::of(&data),
            Transfer::of(&metadata),
            SlotKind::Command,
            false,
        )?;
        self.ring()?;
        self.wait_for(cid, |r| {
            if let Data::FromDevice(out) = &mut data {
                out.copy_from_slice(r.data);
            }
            if let Data::FromDevice(out) = &mut metadata {
                out.copy_from_slice(r.metadata);
            }
            r.completion
        })
    }

    /// Sends `cmd` exactly as given (see [`Self::submit_raw`]) and waits for it.
    pub fn execute_raw(&mut self, cmd: Command) -> Result<Completion, DeviceError> {
        let cid = self.submit_raw(cmd)?;
        self.ring()?;
        self.wait_for(cid, |r| r.completion)
    }

    pub(crate) fn submit_async_event_request(&mut self) -> Result<u16, DeviceError> {
        let now = self.batch_time();
        let dma = self.transport.dma();
        let cmd = crate::spec::queue::asynchronous_event_request();
        self.queue.submit(now, dma, self.pages, cmd, Transfer::None, Transfer::None, SlotKind::AsyncEvent, false)
    }

    /// Reaps what is posted without waiting, keeping completions for later.
    pub(crate) fn reap(&mut self) -> Result<usize, DeviceError> {
        self.queue.reap(self.transport, self.pages)
    }

    fn wait_for<R>(&mut self, cid: u16, f: impl FnOnce(Reaped<'_>) -> R) -> Result<R, DeviceError> {
        let mut waiter = Waiter::new();
        let mut next_status_check = CFS_CHECK_EVERY;
        loop {
            if self.queue.slots[cid as usize].state == SlotState::Completed {
                if let Some(at) = self.queue.ready.iter().position(|&c| c == cid) {
                    self.queue.ready.remove(at);
                }
                return self.queue.deliver(self.transport.dma(), self.pages, cid, f);
            }
            if self.queue.reap(self.transport, self.pages)? > 0 {
                continue;
            }
            let now = self.transport.now_ns();
            let elapsed = Duration::from_nanos(now.saturating_sub(self.queue.slots[cid as usize].submitted));
            if elapsed > self.timeout {
                self.queue.abandon(cid);
                return Err(self.queue.timeout_error(cid, self.timeout));
            }
            // A controller that hit a fatal error says so in CSTS.CFS, and one that is gone
            // reads all ones; neither completes anything: looked at now and then rather than
            // waiting out the whole timeout.
            if elapsed > next_status_check {
                next_status_check = elapsed + CFS_CHECK_EVERY;
                if let Some(e) = self.controller_stopped(cid, elapsed)? {
                    return Err(e);
                }
            }
            waiter.idle(self.transport)?;
        }
    }
}
