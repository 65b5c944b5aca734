//! Queues as the controller sees them: where their entries live in host memory, the
//! doorbells that move their tail and head (§3.1.16, §3.1.17), fetching commands and
//! posting completions with the Phase Tag (§4.6), and the full-queue stall (§4.1.2).
//!
//! Invalid doorbell writes (a queue that does not exist, a value beyond the queue, a CQ
//! head that consumes entries not yet posted) are ignored and reported as Asynchronous
//! Events of type Error Status (§5.2.1), never acted upon.

use nvme::spec::queue::{error_status_info, event_type};
use nvme::spec::{Command, Completion, Status};
use nvme::transport::DmaRegion;
use zerocopy::IntoBytes;

use super::prp::PrpPointer;
use super::{Controller, Event};
use crate::exec::{AsyncEvent, Done};
use crate::service::Work;
use std::cmp::Reverse;

/// Error Information log page (01h), which clears Error Status events.
pub(super) const ERROR_INFORMATION_LOG: u8 = 0x01;

/// Where a queue's entries are: one contiguous run, or pages named by a PRP list.
#[derive(Clone, Debug)]
pub(super) enum QueueMemory {
    Contiguous(u64),
    Pages { pages: Vec<u64>, page_size: usize },
}

impl QueueMemory {
    fn entry(&self, index: u32, entry_bytes: usize) -> u64 {
        let at = index as usize * entry_bytes;
        match self {
            QueueMemory::Contiguous(base) => base + at as u64,
            QueueMemory::Pages { pages, page_size } => {
                // Entry sizes divide the page size, so an entry never straddles pages.
                pages.get(at / page_size).copied().unwrap_or(0) + (at % page_size) as u64
            }
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct SubmissionQueue {
    pub memory: QueueMemory,
    pub entries: u32,
    pub head: u32,
    pub tail: u32,
    pub cqid: u16,
    /// QPRIO as created (the arbiter keeps the class it puts the queue in).
    #[allow(dead_code)]
    pub qprio: u8,
}

impl SubmissionQueue {
    pub fn contiguous(base: u64, entries: u32, cqid: u16, qprio: u8) -> Self {
        SubmissionQueue { memory: QueueMemory::Contiguous(base), entries, head: 0, tail: 0, cqid, qprio }
    }

    pub fn has_work(&self) -> bool {
        self.head != self.tail
    }
}

#[derive(Clone, Debug)]
pub(super) struct CompletionQueue {
    pub memory: QueueMemory,
    pub entries: u32,
    pub head: u32,
    pub tail: u32,
    pub phase: bool,
    #[allow(dead_code)]
    pub ien: bool,
    #[allow(dead_code)]
    pub iv: u16,
    /// Submission queues that post here.
    pub sqs: Vec<u16>,
    /// An SQ stopped because this queue was full.
    pub stalled: bool,
}

impl CompletionQueue {
    pub fn contiguous(base: u64, entries: u32, ien: bool, iv: u16) -> Self {
        CompletionQueue {
            memory: QueueMemory::Contiguous(base),
            entries,
            head: 0,
            tail: 0,
            phase: true,
            ien,
            iv,
            sqs: Vec::new(),
            stalled: false,
        }
    }

    /// A queue with `entries` slots holds at most `entries - 1` completions (§4.1.2).
    pub fn is_full(&self) -> bool {
        (self.tail + 1) % self.entries == self.head
    }

    fn posted(&self) -> u32 {
        (self.tail + self.entries - self.head) % self.entries
    }
}

/// A command the command set left uncompleted.
#[derive(Clone, Copy, Debug)]
pub(super) struct Held {
    pub sqid: u16,
    pub cid: u16,
    /// Completed successfully when the processing pause ends, rather than never.
    pub at_resume: bool,
}

/// A completion to post.
#[derive(Clone, Copy, Debug)]
pub(super) struct Posting {
    pub cqid: u16,
    pub sqid: u16,
    pub cid: u16,
    pub done: Done,
    /// The command's change the command set is told of when this is posted
    /// ([`crate::exec::ControllerContext::change`]).
    pub change: Option<u64>,
}

impl Controller {
    pub(super) fn doorbell(&mut self, offset: u64, value: u32, dma: &DmaRegion) {
        if !self.csts.rdy() {
            return;
        }
        let stride = 4u64 << self.cap.dstrd();
        let rel = offset - nvme::spec::registers::offset::DOORBELLS;
        if !rel.is_multiple_of(stride) {
            // Between doorbells when the stride is wider than a doorbell: reserved.
            return;
        }
        let index = rel / stride;
        let qid = (index / 2) as usize;
        if index.is_multiple_of(2) {
            self.sq_tail_doorbell(qid, value, dma);
        } else {
            self.cq_head_doorbell(qid, value, dma);
        }
    }

    fn sq_tail_doorbell(&mut self, qid: usize, value: u32, dma: &DmaRegion) {
        let Some(sq) = self.sqs.get_mut(qid).and_then(|q| q.as_mut()) else {
            return self.invalid_doorbell(error_status_info::WRITE_TO_INVALID_DOORBELL_REGISTER, dma);
        };
        if value >= sq.entries {
            return self.invalid_doorbell(error_status_info::INVALID_DOORBELL_WRITE_VALUE, dma);
        }
        sq.tail = value;
        if self.timed.is_some() {
            if qid == 0 {
                self.process_sq(0, dma);
            } else {
                self.fetch_pass(self.clock.now(), dma);
            }
            self.publish();
        } else {
            self.process_sq(qid as u16, dma);
        }
    }

    fn cq_head_doorbell(&mut self, qid: usize, value: u32, dma: &DmaRegion) {
        let Some(cq) = self.cqs.get_mut(qid).and_then(|q| q.as_mut()) else {
            return self.invalid_doorbell(error_status_info::WRITE_TO_INVALID_DOORBELL_REGISTER, dma);
        };
        if value >= cq.entries || (value + cq.entries - cq.head) % cq.entries > cq.posted() {
            return self.invalid_doorbell(error_status_info::INVALID_DOORBELL_WRITE_VALUE, dma);
        }
        cq.head = value;
        if self.timed.is_some() {
            cq.stalled = false;
            self.fetch_pass(self.clock.now(), dma);
            self.publish();
        } else if std::mem::take(&mut cq.stalled) {
            let sqs = cq.sqs.clone();
            for sqid in sqs {
                self.process_sq(sqid, dma);
            }
        }
        self.after_command(dma);
    }

    fn invalid_doorbell(&mut self, info: u8, dma: &DmaRegion) {
        self.stats.invalid_doorbell_writes += 1;
        self.ctx.events.push(AsyncEvent {
            event_type: event_type::ERROR_STATUS,
            info,
            log_page: ERROR_INFORMATION_LOG,
        });
        self.deliver_events(dma);
    }

    /// Fetches and executes the entries between the SQ's head and tail, stopping when the
    /// completion queue is full.
    pub(super) fn process_sq(&mut self, qid: u16, dma: &DmaRegion) {
        if !self.bus_master || !self.csts.rdy() || self.csts.cfs() || self.paused() {
            return;
        }
        while let Some((cqid, cmd)) = self.fetch(qid, dma) {
            if let Some(done) = self.execute(qid, &cmd, dma) {
                let change = self.ctx.change.take();
                let posting = Posting { cqid, sqid: qid, cid: cmd.cid, done, change };
                if !self.post(posting, dma) {
                    self.deferred.push(posting);
                }
            }
            self.after_command(dma);
        }
    }

    /// Takes the entry at the SQ's head: `None` when the queue is empty or gone, or its
    /// completion queue is full (then marked stalled).
    fn fetch(&mut self, qid: u16, dma: &DmaRegion) -> Option<(u16, Command)> {
        let sq = self.sqs.get_mut(qid as usize).and_then(|q| q.as_mut())?;
        if sq.head == sq.tail {
            return None;
        }
        let cqid = sq.cqid;
        let cq = self.cqs.get_mut(cqid as usize).and_then(|q| q.as_mut())?;
        if cq.is_full() {
            cq.stalled = true;
            self.stats.cq_full_stalls += 1;
            return None;
        }
        let at = sq.memory.entry(sq.head, 64);
        let Ok(cmd) = dma.read_obj::<Command>(at) else {
            // The controller cannot reach its own queue: nothing to complete to.
            self.csts.set_cfs(true);
            return None;
        };
        sq.head = (sq.head + 1) % sq.entries;
        self.stats.fetched += 1;
        Some((cqid, cmd))
    }

    /// Timed mode: the admin queue first, then I/O commands into free slots in the order
    /// arbitration gives, each completing at the time the media model says, from `now`.
    pub(super) fn fetch_pass(&mut self, now: u64, dma: &DmaRegion) {
        if !self.bus_master || !self.csts.rdy() || self.csts.cfs() || self.paused() {
            return;
        }
        self.process_sq(0, dma);
        while self.timed.as_ref().is_some_and(|t| t.free > 0) {
            let (sqs, cqs) = (&self.sqs, &self.cqs);
            let mut ready = |qid: u16| {
                sqs.get(qid as usize).and_then(|q| q.as_ref()).is_some_and(|sq| {
                    sq.has_work() && cqs.get(sq.cqid as usize).and_then(|q| q.as_ref()).is_some_and(|cq| !cq.is_full())
                })
            };
            let Some(qid) = self.arbiter.pick(&mut ready) else { break };
            let Some((cqid, cmd)) = self.fetch(qid, dma) else { break };
            if let Some(trace) = &self.trace {
                trace.lock().unwrap_or_else(|p| p.into_inner()).push(qid);
            }
            let Some(done) = self.execute(qid, &cmd, dma) else { continue };
            let change = self.ctx.change.take();
            let work = if done.status.is_success() { self.work } else { Work::Fixed(crate::service::OTHER_US) };
            let at = {
                let mut guard = self.clock.media();
                guard.media().map_or(now, |m| m.serve(now, work))
            };
            // The firmware running serves slower or faster than the model (firmware.performance).
            let at = match self.ctx.service_percent {
                Some(p) if p > 0 && p != 100 => now + (at - now).saturating_mul(100) / p as u64,
                _ => at,
            };
            let posting = Posting { cqid, sqid: qid, cid: cmd.cid, done, change };
            if let Some(t) = self.timed.as_mut() {
                t.free -= 1;
                t.seq += 1;
                t.events.push(Reverse(Event { at, seq: t.seq, posting }));
            }
        }
    }

    /// Completes now, with their own status, the commands in service from SQ `sqid`
    /// (before the SQ is deleted, §5.6), freeing their slots.
    pub(super) fn complete_in_service(&mut self, sqid: u16, dma: &DmaRegion) {
        let Some(t) = self.timed.as_mut() else { return };
        let mut mine: Vec<Event> = Vec::new();
        t.events.retain(|Reverse(e)| {
            let keep = e.posting.sqid != sqid;
            if !keep {
                mine.push(*e);
            }
            keep
        });
        t.free += mine.len() as u32;
        mine.sort();
        for e in mine {
            self.post(e.posting, dma);
        }
    }

    /// Completions that had to wait, and events waiting for an AER.
    pub(super) fn after_command(&mut self, dma: &DmaRegion) {
        if !self.deferred.is_empty() {
            self.flush_deferred(dma);
        }
        if !self.aers.is_empty() && !self.ctx.events.is_empty() {
            self.deliver_events(dma);
        }
    }

    pub(super) fn flush_deferred(&mut self, dma: &DmaRegion) {
        let mut i = 0;
        while i < self.deferred.len() {
            let posting = self.deferred[i];
            if self.post(posting, dma) {
                self.deferred.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Writes a completion queue entry at the CQ tail with the current Phase Tag and the
    /// SQ's head. False if the queue is full; a queue that no longer exists takes nothing.
    pub(super) fn post(&mut self, p: Posting, dma: &DmaRegion) -> bool {
        let sq_head = self.sqs.get(p.sqid as usize).and_then(|q| q.as_ref()).map_or(0, |sq| sq.head);
        let Some(cq) = self.cqs.get_mut(p.cqid as usize).and_then(|q| q.as_mut()) else { return true };
        if cq.is_full() {
            return false;
        }
        let entry = Completion {
            dw0: p.done.dw0,
            dw1: 0,
            sq_head: sq_head as u16,
            sq_id: p.sqid,
            cid: p.cid,
            status: p.done.status.to_field() << 1 | cq.phase as u16,
        };
        let at = cq.memory.entry(cq.tail, 16);
        let bytes = entry.as_bytes();
        // The status word, with the Phase Tag, lands last.
        if dma.write(at, &bytes[..14]).is_err() || dma.write(at + 14, &bytes[14..]).is_err() {
            self.csts.set_cfs(true);
            return true;
        }
        cq.tail += 1;
        if cq.tail == cq.entries {
            cq.tail = 0;
            cq.phase = !cq.phase;
        }
        self.stats.posted += 1;
        if let Some(token) = p.change {
            let mut set = self.command_set.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            set.change_completed(token);
        }
        true
    }

    /// Runs one fetched command: the engine's own admin commands here, everything else
    /// in the command set. `None` means no completion is posted now.
    fn execute(&mut self, sqid: u16, cmd: &Command, dma: &DmaRegion) -> Option<Done> {
        // PSDT (CDW0 bits 15:14): this controller supports PRPs only.
        if cmd.flags & 0xc0 != 0 {
            return Some(Done::err(Status::INVALID_FIELD));
        }
        if sqid == 0 {
            if let Some(result) = self.engine_admin(cmd, dma) {
                return result;
            }
        }
        let data = PrpPointer::new(dma, cmd.prp1, cmd.prp2, self.page_size);
        self.ctx.now_ns = self.clock.now();
        let done = {
            // A command set that panicked mid-command is still the best state we have.
            let mut set = self.command_set.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if sqid == 0 {
                set.admin(&mut self.ctx, cmd, &data)
            } else {
                if self.timed.is_some() {
                    // Asked before the command runs: its namespace as the command found it.
                    self.work = set.work(cmd);
                }
                set.io(&mut self.ctx, cmd, &data)
            }
        };
        if std::mem::take(&mut self.ctx.fatal) {
            // A command never completed leaves its change in flight for good.
            self.ctx.change = None;
            self.csts.set_cfs(true);
            return None;
        }
        let pause = std::mem::take(&mut self.ctx.pause_ns);
        let after_pause = std::mem::take(&mut self.ctx.complete_after_pause);
        if pause > 0 {
            // Processing pauses once this command has completed (CSTS.PP, §3.1.6), or
            // with the command outstanding until the pause ends.
            self.paused_until = self.clock.now().saturating_add(pause);
            self.csts.set_pp(true);
            self.clock.publish(self.port, self.next_event().unwrap_or(u64::MAX));
            if after_pause && done.status.is_success() {
                self.held.push(Held { sqid, cid: cmd.cid, at_resume: true });
                return None;
            }
        }
        if std::mem::take(&mut self.ctx.hold_completion) {
            self.ctx.change = None;
            self.held.push(Held { sqid, cid: cmd.cid, at_resume: false });
            return None;
        }
        if sqid == 0 && done.status.is_success() {
            self.command_set_admin_done(cmd);
        }
        Some(done)
    }
}
