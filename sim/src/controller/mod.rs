//! The simulated controller's queue engine: BAR0 registers ("Figure 78: Controller
//! Registers", NVMe 1.4 §3.1), CC/CSTS state (enable, Controller Reset §7.3.2, shutdown
//! §7.6.2, NVM Subsystem Reset §7.3.1), doorbells, submission and completion queues,
//! and the commands that are the engine's own: Create/Delete I/O Submission and
//! Completion Queue, Abort and Asynchronous Event Request. Every other command goes to
//! the [`CommandSet`] with a [`prp::PrpPointer`] over its PRPs.
//!
//! Without a service model commands run synchronously: a write to an SQ Tail Doorbell
//! fetches, executes and completes the new entries before the write returns, unless the
//! completion queue is full, in which case processing stalls until the host frees CQ
//! slots through the CQ Head Doorbell, as hardware would.
//!
//! With a service model ([`crate::service`]) the controller has a number of internal
//! slots: I/O commands are fetched only into a free slot, in the order [`arbitration`]
//! decides (§4.13), whenever a doorbell is written or a completion frees a slot. A
//! command's data moves at fetch; its completion is an event on the subsystem's
//! [`SimClock`] at the time the media model gives, posted when the host lets time reach
//! it (`idle`, `idle_until`). Admin commands are still served at once.
//!
//! - [`queues`]: queue memory, doorbells, fetching and posting.
//! - [`admin`]: queue management, Abort, Asynchronous Event Requests and their delivery.
//! - [`prp`]: the PRP walker behind the command set's data pointer.

mod admin;
mod arbitration;
pub mod prp;
mod queues;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};

use nvme::spec::registers::{offset, Aqa, Cap, Cc, Csts, NSSR_RESET_VALUE};
use nvme::spec::Version;
use nvme::transport::DmaRegion;

use crate::exec::{CommandSet, ControllerContext, Done};
use crate::service::{ServiceModel, SimClock, Work};
use crate::subsystem::{Quirk, Quirks};
use arbitration::Arbiter;
use queues::{CompletionQueue, Held, Posting, SubmissionQueue};

/// The I/O SQ of every command fetched, in order, once recording is on (for tests).
pub type FetchTrace = Arc<Mutex<Vec<u16>>>;

/// A command set that several controllers (ports of one subsystem) can share.
pub type SharedCommandSet = Arc<Mutex<Box<dyn CommandSet + Send>>>;

/// What the simulated controller reports and how much it supports. Values wider than
/// their register field are truncated to the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerConfig {
    /// Target name in reports ("sim:" is prefixed).
    pub name: String,
    /// CAP.MQES: Maximum Queue Entries Supported (0's based).
    pub mqes: u16,
    /// CAP.CQR: Contiguous Queues Required.
    pub cqr: bool,
    /// CAP.AMS: Arbitration Mechanism Supported (bit 0 WRR with urgent, bit 1 vendor).
    pub ams: u8,
    /// CAP.TO: worst-case time for CSTS.RDY to follow CC.EN, in 500 ms units.
    pub to: u8,
    /// CAP.DSTRD: doorbell stride `4 << dstrd` bytes.
    pub dstrd: u8,
    /// CAP.NSSRS: NVM Subsystem Reset Supported.
    pub nssrs: bool,
    /// CAP.MPSMIN / CAP.MPSMAX: memory page sizes `2 ^ (12 + n)`.
    pub mpsmin: u8,
    pub mpsmax: u8,
    /// VS: the version the controller reports.
    pub version: Version,
    /// AERL: Asynchronous Event Request Limit (0's based), as Identify Controller reports it.
    pub aerl: u8,
    /// CNTLID of this controller.
    pub cntlid: u16,
    /// PCI Vendor ID, Device ID, Subsystem Vendor ID, Subsystem ID, Revision ID.
    pub vendor_id: u16,
    pub device_id: u16,
    pub subsystem_vendor_id: u16,
    pub subsystem_id: u16,
    pub revision_id: u8,
    /// MSI-X vectors (the MSI-X capability's Table Size + 1, 1 ..= 2048); an I/O
    /// completion queue with interrupts enabled must name one of them.
    pub interrupt_vectors: u16,
    /// BAR0 size in bytes (a power of two, at least 8 KiB); it bounds the doorbells and
    /// so the highest queue identifier.
    pub bar0_bytes: u64,
    /// Host memory the simulated drive reaches by DMA: size and bus address of its first
    /// byte (never 0, so a zero pointer is always invalid).
    pub host_memory_bytes: usize,
    pub host_memory_base: u64,
    /// How long commands take; `None`: every command completes at its doorbell write.
    /// (The clock a controller is built with carries the model; this one builds it.)
    pub service: Option<ServiceModel>,
    /// The profile's quirks; the engine acts on those of arbitration and the media.
    pub quirks: Quirks,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            name: "default".into(),
            mqes: 1023,
            cqr: true,
            ams: 0,
            to: 20,
            dstrd: 0,
            nssrs: true,
            mpsmin: 0,
            mpsmax: 4,
            version: Version::V1_4,
            aerl: 3,
            cntlid: 1,
            vendor_id: 0x4e56,
            device_id: 0x7473,
            subsystem_vendor_id: 0x4e56,
            subsystem_id: 0x0001,
            revision_id: 0,
            interrupt_vectors: 64,
            bar0_bytes: 16 * 1024,
            host_memory_bytes: 64 << 20,
            host_memory_base: 0x1_0000_0000,
            service: None,
            quirks: Quirks::default(),
        }
    }
}

impl ControllerConfig {
    /// CAP as this configuration reports it (NVM command set only).
    pub fn cap(&self) -> Cap {
        Cap::new()
            .with_mqes(self.mqes)
            .with_cqr(self.cqr)
            .with_ams(self.ams & 3)
            .with_to(self.to)
            .with_dstrd(self.dstrd & 0xf)
            .with_nssrs(self.nssrs)
            .with_css(1)
            .with_mpsmin(self.mpsmin & 0xf)
            .with_mpsmax(self.mpsmax & 0xf)
    }

    /// BAR0 size actually used: a power of two, at least 8 KiB (registers and the admin
    /// queue's doorbells).
    pub fn bar0_size(&self) -> u64 {
        self.bar0_bytes.clamp(0x2000, 1 << 40).next_power_of_two()
    }

    /// MSI-X vectors actually offered (1 ..= 2048).
    pub fn vectors(&self) -> u16 {
        self.interrupt_vectors.clamp(1, 2048)
    }
}

/// The engine's counters, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Commands fetched from submission queues.
    pub fetched: u64,
    /// Completion queue entries posted.
    pub posted: u64,
    /// Times SQ processing stopped because its completion queue was full.
    pub cq_full_stalls: u64,
    /// Doorbell writes refused (no such queue, or an invalid value).
    pub invalid_doorbell_writes: u64,
}

/// A completion due at a time on the clock; ordered by (time, sequence) so that equal
/// times keep the order they were scheduled in.
#[derive(Clone, Copy, Debug)]
struct Event {
    at: u64,
    seq: u64,
    posting: Posting,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Event {}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Event {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The service side of a controller with a service model: slots and pending completions.
#[derive(Debug)]
struct Timed {
    slots: u32,
    free: u32,
    events: BinaryHeap<Reverse<Event>>,
    seq: u64,
}

/// One simulated NVMe controller.
pub struct Controller {
    config: ControllerConfig,
    cap: Cap,
    cc: Cc,
    csts: Csts,
    aqa: Aqa,
    asq: u64,
    acq: u64,
    /// Interrupt mask (INTMS / INTMC).
    intm: u32,
    /// Memory page size latched when the controller was enabled (CC.MPS).
    page_size: usize,
    /// Whether the PCI function may master the bus (PCI Command register bit 2).
    bus_master: bool,
    /// Highest queue identifier that has doorbells in BAR0.
    max_qid: u16,
    sqs: Vec<Option<SubmissionQueue>>,
    cqs: Vec<Option<CompletionQueue>>,
    /// CIDs of outstanding Asynchronous Event Requests, oldest first.
    aers: Vec<u16>,
    /// Event types (bit per Asynchronous Event Type) masked until their log page is read.
    masked_events: u8,
    /// For each masked type, the log page whose reading unmasks it.
    masked_log_page: [u8; 8],
    /// Commands the command set left uncompleted.
    held: Vec<Held>,
    /// Completions waiting for room in their completion queue.
    deferred: Vec<Posting>,
    ctx: ControllerContext,
    command_set: SharedCommandSet,
    stats: EngineStats,
    /// Why the last CC.EN 0 → 1 set CSTS.CFS, if it did.
    enable_refusal: Option<&'static str>,
    clock: Arc<SimClock>,
    /// This controller's index among the clock's ports.
    port: usize,
    timed: Option<Timed>,
    arbiter: Arbiter,
    /// The work of the command being executed (timed mode).
    work: Work,
    trace: Option<FetchTrace>,
    /// When, on the clock, the controller may first become ready after power-on (0: the
    /// drive was powered long before the host came).
    ready_at: u64,
    /// CC.EN was set before `ready_at`: CSTS.RDY follows at `ready_at`.
    enabling: bool,
    /// Processing is paused (CSTS.PP) until this time on the clock (0: not paused).
    paused_until: u64,
}

impl Controller {
    /// A controller with a clock of its own (and the media of `config.service`).
    pub fn new(config: ControllerConfig, command_set: SharedCommandSet) -> Controller {
        let clock = SimClock::new(config.service.clone(), config.quirks.has(Quirk::ReadsQueuedBehindWrites));
        Controller::with_clock(config, command_set, clock)
    }

    /// A controller on a clock (and media) other controllers of the subsystem share.
    pub fn with_clock(config: ControllerConfig, command_set: SharedCommandSet, clock: Arc<SimClock>) -> Controller {
        let slots = clock.media().media().map(|m| m.model().slots.max(1));
        let timed = slots.map(|slots| Timed { slots, free: slots, events: BinaryHeap::new(), seq: 0 });
        let port = clock.register_port();
        let stride = 4u64 << (config.dstrd & 0xf);
        let doorbell_pairs = (config.bar0_size() - nvme::spec::registers::offset::DOORBELLS) / (2 * stride);
        let max_qid = doorbell_pairs.saturating_sub(1).min(u16::MAX as u64) as u16;
        let ctx = ControllerContext { cntlid: config.cntlid, ..Default::default() };
        Controller {
            cap: config.cap(),
            cc: Cc::new(),
            csts: Csts::new(),
            aqa: Aqa::new(),
            asq: 0,
            acq: 0,
            intm: 0,
            page_size: 4096,
            bus_master: false,
            max_qid,
            sqs: (0..=max_qid).map(|_| None).collect(),
            cqs: (0..=max_qid).map(|_| None).collect(),
            aers: Vec::new(),
            masked_events: 0,
            masked_log_page: [0; 8],
            held: Vec::new(),
            deferred: Vec::new(),
            ctx,
            command_set,
            stats: EngineStats::default(),
            enable_refusal: None,
            arbiter: Arbiter::new(config.quirks.clone()),
            clock,
            port,
            timed,
            work: Work::Fixed(0),
            trace: None,
            ready_at: 0,
            enabling: false,
            paused_until: 0,
            config,
        }
    }

    /// The subsystem's clock.
    pub fn clock(&self) -> &Arc<SimClock> {
        &self.clock
    }

    /// Starts recording the I/O SQ of every command fetched (timed mode).
    pub fn trace_fetches(&mut self) -> FetchTrace {
        self.trace.get_or_insert_with(Default::default).clone()
    }

    /// Whether commands take time on the clock (a service model is present).
    pub fn is_timed(&self) -> bool {
        self.timed.is_some()
    }

    /// I/O commands in service now (fetched, completion not yet due).
    pub fn in_service(&self) -> u32 {
        self.timed.as_ref().map_or(0, |t| t.slots - t.free)
    }

    /// Runs every completion due by the clock's present time (another port may have
    /// moved it), and delivers the events commands on other ports raised for this
    /// controller to its outstanding Asynchronous Event Requests.
    pub fn catch_up(&mut self, dma: &DmaRegion) {
        let now = self.clock.now();
        if self.next_event().is_some_and(|t| t <= now) {
            self.run_until(now, dma);
        }
        if !self.aers.is_empty() {
            self.poll_events(dma);
        }
    }

    /// Takes the events the command set holds for this controller (raised by commands of
    /// other controllers, [`CommandSet::take_events`]) and completes outstanding AERs with
    /// them as with its own.
    pub fn poll_events(&mut self, dma: &DmaRegion) {
        if self.take_raised_events() {
            self.deliver_events(dma);
        }
    }

    /// Queues the events the command set holds for this controller with its own; true if
    /// there were any. (Polled when a host touches the controller with AERs outstanding,
    /// and when an AER arrives: not per command, to keep the I/O path free of it.)
    fn take_raised_events(&mut self) -> bool {
        let raised = {
            let mut set = self.command_set.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            set.take_events(self.ctx.cntlid)
        };
        let any = !raised.is_empty();
        self.ctx.events.extend(raised);
        any
    }

    /// This controller's next scheduled event: a completion, becoming ready, or the end
    /// of a processing pause.
    pub fn next_event(&self) -> Option<u64> {
        let completion = self.timed.as_ref().and_then(|t| t.events.peek().map(|Reverse(e)| e.at));
        let ready = self.enabling.then_some(self.ready_at);
        let resume = (self.paused_until > 0).then_some(self.paused_until);
        completion.into_iter().chain(ready).chain(resume).min()
    }

    /// Whether processing is paused now (CSTS.PP).
    fn paused(&self) -> bool {
        self.paused_until > 0 && self.clock.now() < self.paused_until
    }

    /// Posts the completions due at or before `t`, oldest first, each freeing a slot and
    /// letting the controller fetch more at that time.
    pub fn run_until(&mut self, t: u64, dma: &DmaRegion) {
        if self.paused_until > 0 && self.paused_until <= t {
            // The pause is over: CSTS.PP clears, the command that started it completes
            // if it waited for it, and the queues are served again.
            self.paused_until = 0;
            self.csts.set_pp(false);
            let resumed: Vec<Held> = self.held.iter().filter(|h| h.at_resume).copied().collect();
            self.held.retain(|h| !h.at_resume);
            for h in resumed {
                let cqid = self.sqs.get(h.sqid as usize).and_then(|q| q.as_ref()).map(|sq| sq.cqid);
                if let Some(cqid) = cqid {
                    self.post(Posting { cqid, sqid: h.sqid, cid: h.cid, done: Done::ok(), change: None }, dma);
                }
            }
            self.clock.publish(self.port, self.next_event().unwrap_or(u64::MAX));
            self.run_all(dma);
        }
        if self.enabling && self.ready_at <= t {
            self.enabling = false;
            self.become_ready();
            self.clock.publish(self.port, self.next_event().unwrap_or(u64::MAX));
            self.run_all(dma);
        }
        loop {
            let Some(timed) = self.timed.as_mut() else { return };
            let Some(&Reverse(event)) = timed.events.peek() else { break };
            if event.at > t {
                break;
            }
            timed.events.pop();
            timed.free += 1;
            if !self.post(event.posting, dma) {
                self.deferred.push(event.posting);
            }
            self.fetch_pass(event.at, dma);
        }
        self.after_command(dma);
        self.publish();
    }

    /// Tells the clock when this controller's next event is.
    fn publish(&self) {
        if self.timed.is_some() || self.enabling || self.paused_until > 0 {
            self.clock.publish(self.port, self.next_event().unwrap_or(u64::MAX));
        }
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// The command set behind this controller.
    pub fn command_set(&self) -> &SharedCommandSet {
        &self.command_set
    }

    /// What the command set knows of this controller (raise events here from tests).
    pub fn context_mut(&mut self) -> &mut ControllerContext {
        &mut self.ctx
    }

    pub fn context(&self) -> &ControllerContext {
        &self.ctx
    }

    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// Why the last CC.EN 0 → 1 was refused with CSTS.CFS, if it was.
    pub fn enable_refusal(&self) -> Option<&'static str> {
        self.enable_refusal
    }

    /// The highest queue identifier with doorbells in BAR0.
    pub fn max_qid(&self) -> u16 {
        self.max_qid
    }

    /// Queues an asynchronous event as the command set would, and completes an outstanding
    /// Asynchronous Event Request with it now if one is waiting and its type is not masked.
    pub fn raise_event(&mut self, event: crate::exec::AsyncEvent, dma: &DmaRegion) {
        self.ctx.events.push(event);
        self.deliver_events(dma);
    }

    /// Outstanding Asynchronous Event Requests.
    pub fn outstanding_async_event_requests(&self) -> usize {
        self.aers.len()
    }

    /// Reads a BAR0 register. `offset` is dword aligned and inside BAR0 (the PCI layer
    /// checks). Reserved registers and doorbells read as 0.
    pub fn mmio_read(&self, offset: u64) -> u32 {
        match offset {
            offset::CAP => self.cap.into_bits() as u32,
            o if o == offset::CAP + 4 => (self.cap.into_bits() >> 32) as u32,
            offset::VS => self.config.version.to_register(),
            offset::INTMS | offset::INTMC => self.intm,
            offset::CC => self.cc.into_bits(),
            offset::CSTS => self.csts.into_bits(),
            offset::AQA => self.aqa.into_bits(),
            offset::ASQ => self.asq as u32,
            o if o == offset::ASQ + 4 => (self.asq >> 32) as u32,
            offset::ACQ => self.acq as u32,
            o if o == offset::ACQ + 4 => (self.acq >> 32) as u32,
            _ => 0,
        }
    }

    /// Writes a BAR0 register or doorbell. Read-only and reserved registers ignore writes.
    pub fn mmio_write(&mut self, offset: u64, value: u32, dma: &DmaRegion) {
        match offset {
            offset::INTMS => self.intm |= value,
            offset::INTMC => self.intm &= !value,
            offset::CC => self.write_cc(Cc::from_bits(value), dma),
            // NSSRO is RW1C; every other CSTS bit is read-only.
            offset::CSTS if Csts::from_bits(value).nssro() => self.csts.set_nssro(false),
            offset::NSSR if self.cap.nssrs() && value == NSSR_RESET_VALUE => self.nvm_subsystem_reset(),
            // ASQB and ACQB are bits 63:12; bits 11:00 are reserved.
            offset::AQA => self.aqa = Aqa::from_bits(value & 0x0fff_0fff),
            offset::ASQ => self.asq = (self.asq & !0xffff_ffff) | (value & !0xfff) as u64,
            o if o == offset::ASQ + 4 => self.asq = (self.asq & 0xffff_ffff) | (value as u64) << 32,
            offset::ACQ => self.acq = (self.acq & !0xffff_ffff) | (value & !0xfff) as u64,
            o if o == offset::ACQ + 4 => self.acq = (self.acq & 0xffff_ffff) | (value as u64) << 32,
            o if o >= offset::DOORBELLS => self.doorbell(o, value, dma),
            _ => {}
        }
    }

    /// The PCI function's Bus Master Enable changed. Work the host queued meanwhile runs
    /// once it is set.
    pub fn set_bus_master(&mut self, enabled: bool, dma: &DmaRegion) {
        let was = self.bus_master;
        self.bus_master = enabled;
        if enabled && !was {
            self.run_all(dma);
        }
    }

    fn write_cc(&mut self, new: Cc, dma: &DmaRegion) {
        let old = self.cc;
        // Reserved bits (03:01, 31:24) read as 0.
        self.cc = Cc::from_bits(new.into_bits() & 0x00ff_fff1);
        // Quirk `cc-ams-not-kept`: CC.AMS is not stored (reads back, and is latched, as 000b).
        if self.config.quirks.has(Quirk::CcAmsNotKept) {
            self.cc = self.cc.with_ams(0);
        }
        match (old.en(), new.en()) {
            (false, true) => self.enable(),
            (true, false) => self.controller_reset(),
            _ => {}
        }
        if new.shn() != 0 && old.shn() == 0 {
            // Shutdown processing (§7.6.2) is immediate: the command set writes its cache
            // back and says whether it completed.
            self.csts.set_shst(0b01);
            let mut set = self.command_set.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if set.shutdown(self.ctx.cntlid) {
                self.csts.set_shst(0b10);
            }
        }
        if self.csts.rdy() {
            self.run_all(dma);
        }
    }

    /// CC.EN 0 → 1: checks the configuration (§3.1.5, §7.6.1) and sets CSTS.RDY, or
    /// CSTS.CFS when the host asked for something this controller cannot do.
    fn enable(&mut self) {
        self.csts.set_cfs(false);
        if let Err(why) = self.check_enable() {
            self.csts.set_cfs(true);
            self.csts.set_rdy(false);
            self.enable_refusal = Some(why);
            return;
        }
        self.enable_refusal = None;
        self.page_size = 1 << (12 + self.cc.mps() as u32);
        let page_mask = self.page_size as u64 - 1;
        let sq_entries = self.aqa.asqs() as u32 + 1;
        let cq_entries = self.aqa.acqs() as u32 + 1;
        self.cqs[0] = Some(CompletionQueue::contiguous(self.acq & !page_mask, cq_entries, false, 0));
        self.sqs[0] = Some(SubmissionQueue::contiguous(self.asq & !page_mask, sq_entries, 0, 0));
        if let Some(cq) = self.cqs[0].as_mut() {
            cq.sqs.push(0);
        }
        // CC.AMS is latched here: a change while CC.EN = 1 reads back but is not used
        // until the next enable (Figure 78: AMS shall only be changed while EN is 0).
        self.arbiter.enable(self.cc.ams());
        if self.clock.now() < self.ready_at {
            // Still coming back from power-on: CSTS.RDY at `ready_at` (run_until).
            self.enabling = true;
            self.publish();
            return;
        }
        self.become_ready();
    }

    /// CSTS.RDY set: the command set is told.
    fn become_ready(&mut self) {
        self.csts.set_rdy(true);
        self.csts.set_shst(0);
        let mut set = self.command_set.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        set.controller_enabled(self.ctx.cntlid);
    }

    fn check_enable(&self) -> Result<(), &'static str> {
        let cc = self.cc;
        if cc.css() != 0 || self.cap.css() & 1 == 0 {
            return Err("CC.CSS selects a command set CAP.CSS does not offer");
        }
        if cc.mps() < self.cap.mpsmin() || cc.mps() > self.cap.mpsmax() {
            return Err("CC.MPS outside CAP.MPSMIN ..= CAP.MPSMAX");
        }
        // Figure 78 CC.AMS: host software shall only select a mechanism CAP.AMS reports,
        // and the behaviour otherwise is undefined; this controller refuses the enable
        // with CSTS.CFS rather than run an arbitration it does not have.
        let ams_ok = match cc.ams() {
            0 => true,
            1 => self.cap.ams() & 1 != 0,
            7 => self.cap.ams() & 2 != 0,
            _ => false,
        };
        if !ams_ok {
            return Err("CC.AMS selects an arbitration mechanism CAP.AMS does not offer");
        }
        // IOSQES / IOCQES may still be 0 at enable (set before creating I/O queues, §7.6.1);
        // any other value must be the one entry size supported.
        if cc.iosqes() != 0 && cc.iosqes() != 6 {
            return Err("CC.IOSQES is not 6 (64-byte entries)");
        }
        if cc.iocqes() != 0 && cc.iocqes() != 4 {
            return Err("CC.IOCQES is not 4 (16-byte entries)");
        }
        if self.aqa.asqs() == 0 || self.aqa.acqs() == 0 {
            return Err("AQA: an admin queue of one entry (the minimum is two)");
        }
        let page_mask = (1u64 << (12 + cc.mps() as u32)) - 1;
        if self.asq == 0 || self.acq == 0 {
            return Err("ASQ or ACQ is 0");
        }
        if self.asq & page_mask != 0 || self.acq & page_mask != 0 {
            return Err("ASQ or ACQ is not aligned to the memory page size (CC.MPS)");
        }
        Ok(())
    }

    /// Controller Reset (§7.3.2): every queue deleted, outstanding AERs and held commands
    /// dropped, admin queue state reset, CSTS.RDY cleared. CC, AQA, ASQ and ACQ keep their
    /// values; events not yet reported stay queued.
    fn controller_reset(&mut self) {
        for q in self.sqs.iter_mut() {
            *q = None;
        }
        for q in self.cqs.iter_mut() {
            *q = None;
        }
        self.aers.clear();
        self.held.clear();
        self.deferred.clear();
        if let Some(t) = self.timed.as_mut() {
            t.events.clear();
            t.free = t.slots;
        }
        self.publish();
        // The Arbitration feature returns to its default with the reset.
        self.arbiter.set_feature(0);
        self.masked_events = 0;
        self.csts.set_rdy(false);
        self.csts.set_cfs(false);
        self.csts.set_shst(0);
        self.csts.set_pp(false);
        self.paused_until = 0;
        if std::mem::take(&mut self.enabling) {
            self.clock.publish(self.port, self.next_event().unwrap_or(u64::MAX));
        }
    }

    /// A conventional reset of the controller's registers (Function Level Reset, or the
    /// register side of an NVM Subsystem Reset): a Controller Reset, then CC, AQA, ASQ,
    /// ACQ and the interrupt mask back to 0.
    pub fn reset_registers(&mut self) {
        self.controller_reset();
        self.cc = Cc::new();
        self.aqa = Aqa::new();
        self.asq = 0;
        self.acq = 0;
        self.intm = 0;
    }

    /// NVM Subsystem Reset (§7.3.1): every register to its default and CSTS.NSSRO set.
    /// (The PCIe link going down is not modelled: configuration space is kept.)
    pub fn nvm_subsystem_reset(&mut self) {
        self.reset_registers();
        self.csts.set_nssro(true);
    }

    /// The power went (the PCI function's side is [`crate::pci::SimTransport::power_cut`]):
    /// every register to its default, every queue and command in flight gone, and the
    /// command set told (what was not durable lost as draws from `seed` say).
    pub fn power_cut(&mut self, seed: u64) {
        self.reset_registers();
        self.csts.set_nssro(false);
        self.bus_master = false;
        let mut set = self.command_set.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        set.power_cut(seed);
    }

    /// The port's PCIe link went down or came back ([`crate::pci::SimTransport`]'s
    /// `set_link`): the command set is told, for the quirks that look at it.
    pub fn port_link(&mut self, up: bool) {
        let mut set = self.command_set.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        set.port_link(self.ctx.cntlid, up);
    }

    /// The test hook behind [`crate::pci::SimTransport`]'s `set_ana_state`: the command
    /// set changes the group's state as this controller sees it.
    pub fn set_ana_state(&mut self, anagrpid: u32, state: u8) -> Result<(), String> {
        let mut set = self.command_set.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        set.set_ana_state(self.ctx.cntlid, anagrpid, state)
    }

    /// The power came back: the controller may become ready once the command set's
    /// ready time has passed on the clock.
    pub fn power_on(&mut self) {
        let ms = {
            let mut set = self.command_set.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            set.power_on()
        };
        self.ready_at = self.clock.now().saturating_add(ms.saturating_mul(1_000_000));
    }

    /// Runs every submission queue that has entries waiting.
    fn run_all(&mut self, dma: &DmaRegion) {
        if self.timed.is_some() {
            self.fetch_pass(self.clock.now(), dma);
            self.after_command(dma);
            self.publish();
            return;
        }
        for qid in 0..self.sqs.len() {
            if self.sqs[qid].as_ref().is_some_and(|sq| sq.has_work()) {
                self.process_sq(qid as u16, dma);
            }
        }
        self.flush_deferred(dma);
        self.deliver_events(dma);
    }
}
