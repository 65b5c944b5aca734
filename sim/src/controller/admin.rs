//! The admin commands the engine answers itself: Create / Delete I/O Completion and
//! Submission Queue (NVMe 1.4 §5.3–§5.6), Abort (§5.1) and Asynchronous Event Request
//! (§5.2), with every status the spec assigns them, and the delivery of asynchronous
//! events to outstanding requests.
//!
//! Event masking (§5.2): once an event of a type is reported, further events of that
//! type wait until the host reads the log page the completion named (Get Log Page with
//! that Log Page Identifier and Retain Asynchronous Event cleared, completed
//! successfully by the command set). The engine watches for that read itself, so the
//! command set only queues events in `ControllerContext::events`.

use nvme::spec::queue::{
    Abort, AsyncEventCompletion, CreateIoCompletionQueue, CreateIoSubmissionQueue, DeleteIoCompletionQueue,
    DeleteIoSubmissionQueue,
};
use nvme::spec::{AdminOpcode, Command, Status};
use nvme::transport::DmaRegion;

use super::queues::{CompletionQueue, Posting, QueueMemory, SubmissionQueue};
use super::Controller;
use crate::exec::Done;

/// Get Log Page CDW10: Log Page Identifier (07:00) and Retain Asynchronous Event (bit 15, 1.3+).
const GET_LOG_PAGE_LID_MASK: u32 = 0xff;
const GET_LOG_PAGE_RAE: u32 = 1 << 15;
/// Set Features Feature Identifier (CDW10 bits 7:0) Arbitration: the engine keeps its own
/// copy of the accepted value, which its arbiter runs on.
const SET_FEATURES_ARBITRATION: u32 = 0x01;

impl Controller {
    /// The engine's own admin commands. `None`: not one of them (the command set's);
    /// `Some(None)`: no completion now (an Asynchronous Event Request waiting).
    pub(super) fn engine_admin(&mut self, cmd: &Command, dma: &DmaRegion) -> Option<Option<Done>> {
        let done = match AdminOpcode::from_u8(cmd.opcode)? {
            AdminOpcode::CreateIoCompletionQueue => self.create_io_cq(cmd, dma),
            AdminOpcode::CreateIoSubmissionQueue => self.create_io_sq(cmd, dma),
            AdminOpcode::DeleteIoCompletionQueue => self.delete_io_cq(cmd),
            AdminOpcode::DeleteIoSubmissionQueue => self.delete_io_sq(cmd, dma),
            AdminOpcode::Abort => self.abort(cmd),
            AdminOpcode::AsynchronousEventRequest => return Some(self.async_event_request(cmd)),
            _ => return None,
        };
        Some(Some(done))
    }

    /// A queue identifier the host may use for a new queue: not 0, within the doorbells,
    /// and within the number of queues allocated (Set Features Number of Queues, 0's based).
    fn qid_allowed(&self, qid: u16, allocated: u16) -> bool {
        qid != 0 && qid <= self.max_qid && qid as u32 <= allocated as u32 + 1
    }

    /// §5.3 Create I/O Completion Queue.
    fn create_io_cq(&mut self, cmd: &Command, dma: &DmaRegion) -> Done {
        let c = CreateIoCompletionQueue::from_command(cmd);
        if !self.qid_allowed(c.qid, self.ctx.ncqa) || self.cqs[c.qid as usize].is_some() {
            return Done::err(Status::INVALID_QUEUE_IDENTIFIER);
        }
        if c.qsize == 0 || c.qsize > self.cap.mqes() {
            return Done::err(Status::INVALID_QUEUE_SIZE);
        }
        if !c.pc && self.cap.cqr() {
            return Done::err(Status::INVALID_FIELD);
        }
        if c.ien && c.iv >= self.config.vectors() {
            return Done::err(Status::INVALID_INTERRUPT_VECTOR);
        }
        let memory = match self.queue_memory(c.pc, c.prp1, c.entries() as usize * 16, dma) {
            Ok(m) => m,
            Err(status) => return Done::err(status),
        };
        let mut cq = CompletionQueue::contiguous(0, c.entries(), c.ien, c.iv);
        cq.memory = memory;
        self.cqs[c.qid as usize] = Some(cq);
        Done::ok()
    }

    /// §5.4 Create I/O Submission Queue.
    fn create_io_sq(&mut self, cmd: &Command, dma: &DmaRegion) -> Done {
        let s = CreateIoSubmissionQueue::from_command(cmd);
        if !self.qid_allowed(s.qid, self.ctx.nsqa) || self.sqs[s.qid as usize].is_some() {
            return Done::err(Status::INVALID_QUEUE_IDENTIFIER);
        }
        if s.cqid == 0 || self.cqs.get(s.cqid as usize).is_none_or(|q| q.is_none()) {
            return Done::err(Status::COMPLETION_QUEUE_INVALID);
        }
        if s.qsize == 0 || s.qsize > self.cap.mqes() {
            return Done::err(Status::INVALID_QUEUE_SIZE);
        }
        if !s.pc && self.cap.cqr() {
            return Done::err(Status::INVALID_FIELD);
        }
        let memory = match self.queue_memory(s.pc, s.prp1, s.entries() as usize * 64, dma) {
            Ok(m) => m,
            Err(status) => return Done::err(status),
        };
        let mut sq = SubmissionQueue::contiguous(0, s.entries(), s.cqid, s.qprio as u8);
        sq.memory = memory;
        self.sqs[s.qid as usize] = Some(sq);
        self.arbiter.add(s.qid, s.qprio as u8);
        if let Some(cq) = self.cqs[s.cqid as usize].as_mut() {
            cq.sqs.push(s.qid);
        }
        Done::ok()
    }

    /// The memory of a new queue: PRP Entry 1 is its page-aligned base (PC = 1) or a
    /// page-aligned PRP List of its pages (PC = 0), lists chaining as for data (§4.3).
    fn queue_memory(&self, pc: bool, prp1: u64, bytes: usize, dma: &DmaRegion) -> Result<QueueMemory, Status> {
        let page = self.page_size as u64;
        if prp1 & (page - 1) != 0 {
            return Err(Status::PRP_OFFSET_INVALID);
        }
        if pc {
            return Ok(QueueMemory::Contiguous(prp1));
        }
        let count = bytes.div_ceil(self.page_size);
        let mut pages = Vec::with_capacity(count);
        let mut at = prp1;
        while pages.len() < count {
            let mut b = [0u8; 8];
            dma.read(at, &mut b).map_err(|_| Status::DATA_TRANSFER_ERROR)?;
            let entry = u64::from_le_bytes(b);
            if entry & (page - 1) != 0 {
                return Err(Status::PRP_OFFSET_INVALID);
            }
            let last_in_page = at & (page - 1) == page - 8;
            if last_in_page && count - pages.len() > 1 {
                at = entry;
                continue;
            }
            pages.push(entry);
            at += 8;
        }
        Ok(QueueMemory::Pages { pages, page_size: self.page_size })
    }

    /// §5.5 Delete I/O Completion Queue.
    fn delete_io_cq(&mut self, cmd: &Command) -> Done {
        let qid = DeleteIoCompletionQueue::from_command(cmd).qid;
        let Some(cq) = self.cqs.get(qid as usize).and_then(|q| q.as_ref()).filter(|_| qid != 0) else {
            return Done::err(Status::INVALID_QUEUE_IDENTIFIER);
        };
        if !cq.sqs.is_empty() {
            return Done::err(Status::INVALID_QUEUE_DELETION);
        }
        self.cqs[qid as usize] = None;
        self.deferred.retain(|p| p.cqid != qid);
        Done::ok()
    }

    /// §5.6 Delete I/O Submission Queue. Commands of the queue still outstanding are
    /// completed first with Command Aborted due to SQ Deletion.
    fn delete_io_sq(&mut self, cmd: &Command, dma: &DmaRegion) -> Done {
        let qid = DeleteIoSubmissionQueue::from_command(cmd).qid;
        let Some(cqid) = self.sqs.get(qid as usize).and_then(|q| q.as_ref()).filter(|_| qid != 0).map(|sq| sq.cqid)
        else {
            return Done::err(Status::INVALID_QUEUE_IDENTIFIER);
        };
        self.complete_in_service(qid, dma);
        self.arbiter.remove(qid);
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].sqid == qid {
                let h = self.held.remove(i);
                let aborted = Done { status: Status::ABORTED_SQ_DELETION, dw0: 0 };
                // A full CQ cannot take it; the command is gone with its queue either way.
                self.post(Posting { cqid, sqid: qid, cid: h.cid, done: aborted, change: None }, dma);
            } else {
                i += 1;
            }
        }
        self.sqs[qid as usize] = None;
        if let Some(cq) = self.cqs[cqid as usize].as_mut() {
            cq.sqs.retain(|&s| s != qid);
        }
        Done::ok()
    }

    /// §5.1 Abort: a command still outstanding (one the command set held) is completed
    /// with Command Abort Requested; any other has completed already and is not aborted.
    fn abort(&mut self, cmd: &Command) -> Done {
        let a = Abort::from_command(cmd);
        let Some(i) = self.held.iter().position(|h| h.sqid == a.sqid && h.cid == a.cid) else {
            return Done::ok_with(Abort::completion_dw0(false));
        };
        let h = self.held.remove(i);
        if let Some(cqid) = self.sqs.get(h.sqid as usize).and_then(|q| q.as_ref()).map(|sq| sq.cqid) {
            let aborted = Done { status: Status::ABORT_REQUESTED, dw0: 0 };
            self.deferred.push(Posting { cqid, sqid: h.sqid, cid: h.cid, done: aborted, change: None });
        }
        Done::ok_with(Abort::completion_dw0(true))
    }

    /// §5.2 Asynchronous Event Request: kept outstanding, up to AERL + 1 of them.
    fn async_event_request(&mut self, cmd: &Command) -> Option<Done> {
        if self.aers.len() > self.config.aerl as usize {
            return Some(Done::err(Status::ASYNC_EVENT_REQUEST_LIMIT_EXCEEDED));
        }
        self.aers.push(cmd.cid);
        // Events other controllers' commands raised while no AER was outstanding: this
        // one may report them (delivered after the command, with this controller's own).
        self.take_raised_events();
        None
    }

    /// Completes outstanding Asynchronous Event Requests with queued events whose type is
    /// not masked, oldest request and oldest event first, then masks each reported type.
    pub(super) fn deliver_events(&mut self, dma: &DmaRegion) {
        if !self.csts.rdy() || !self.bus_master {
            return;
        }
        while !self.aers.is_empty() {
            let masked = self.masked_events;
            let Some(i) = self.ctx.events.iter().position(|e| masked & (1 << (e.event_type & 7)) == 0) else {
                return;
            };
            if self.cqs[0].as_ref().is_none_or(|cq| cq.is_full()) {
                return;
            }
            let event = self.ctx.events.remove(i);
            let cid = self.aers.remove(0);
            let dw0 =
                AsyncEventCompletion { event_type: event.event_type & 7, info: event.info, log_page: event.log_page }
                    .to_dw0();
            self.post(Posting { cqid: 0, sqid: 0, cid, done: Done::ok_with(dw0), change: None }, dma);
            let t = (event.event_type & 7) as usize;
            self.masked_events |= 1 << t;
            self.masked_log_page[t] = event.log_page;
        }
    }

    /// Bookkeeping after the command set completed an admin command successfully: a Get
    /// Log Page without Retain Asynchronous Event unmasks the event types it clears.
    pub(super) fn command_set_admin_done(&mut self, cmd: &Command) {
        if cmd.opcode == AdminOpcode::SetFeatures as u8 && cmd.cdw10 & 0xff == SET_FEATURES_ARBITRATION {
            self.arbiter.set_feature(cmd.cdw11);
        }
        if cmd.opcode != AdminOpcode::GetLogPage as u8 || cmd.cdw10 & GET_LOG_PAGE_RAE != 0 {
            return;
        }
        let lid = (cmd.cdw10 & GET_LOG_PAGE_LID_MASK) as u8;
        for t in 0..8 {
            if self.masked_events & (1 << t) != 0 && self.masked_log_page[t] == lid {
                self.masked_events &= !(1 << t);
            }
        }
    }
}
