//! A small command set for exercising the queue engine through nvtest's driver.
//!
//! - Identify (06h) answers 4 KiB of a fixed pattern ([`identify_pattern`]).
//! - Set Features Number of Queues (07h) allocates what is asked, up to 16 pairs.
//! - Get Log Page (02h) answers zeros of the length asked.
//! - Vendor specific admin C0h raises an asynchronous event: CDW10 type, CDW11 info,
//!   CDW12 log page.
//! - Read / Write move 512-byte blocks of an 8 MiB RAM namespace (NSID 1), with 8 bytes
//!   of separate metadata per block through MPTR when MPTR is not 0.
//! - While [`Controls::hang`] is set, NVM commands never complete (the engine holds them).
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use nvme::driver::{Controller, Options};
use nvme::spec::{AdminOpcode, Command, NvmOpcode, Status};
use nvme_sim::exec::{AsyncEvent, CommandSet, ControllerContext, DataPointer, Done};
use nvme_sim::pci::{ControllerConfig, SimTransport};

pub const BLOCK: usize = 512;
pub const BLOCKS: usize = 16 * 1024;
pub const META: usize = 8;
pub const RAISE_EVENT: u8 = 0xC0;

/// Switches a test flips while the command set runs inside the drive.
#[derive(Default)]
pub struct Controls {
    pub hang: AtomicBool,
    /// NVM commands executed.
    pub io_commands: AtomicU32,
}

pub struct TestSet {
    controls: Arc<Controls>,
    blocks: Vec<u8>,
    metadata: Vec<u8>,
}

pub fn identify_pattern() -> Vec<u8> {
    (0..4096u32).map(|i| (i.wrapping_mul(31) ^ 0x5a) as u8).collect()
}

impl TestSet {
    pub fn new(controls: Arc<Controls>) -> Self {
        TestSet { controls, blocks: vec![0; BLOCKS * BLOCK], metadata: vec![0; BLOCKS * META] }
    }

    fn rw(&mut self, cmd: &Command, data: &dyn DataPointer, write: bool) -> Done {
        let slba = cmd.slba() as usize;
        let count = cmd.nlb() as usize + 1;
        if slba + count > BLOCKS {
            return Done::err(Status::LBA_OUT_OF_RANGE);
        }
        let range = slba * BLOCK..(slba + count) * BLOCK;
        let meta = slba * META..(slba + count) * META;
        if write {
            match data.copy_from_host(range.len()) {
                Ok(bytes) => self.blocks[range].copy_from_slice(&bytes),
                Err(status) => return Done::err(status),
            }
            if cmd.mptr != 0 {
                let mut m = vec![0; meta.len()];
                if data.dma().read(cmd.mptr, &mut m).is_err() {
                    return Done::err(Status::DATA_TRANSFER_ERROR);
                }
                self.metadata[meta].copy_from_slice(&m);
            }
        } else {
            if let Err(status) = data.copy_to_host(&self.blocks[range]) {
                return Done::err(status);
            }
            if cmd.mptr != 0 && data.dma().write(cmd.mptr, &self.metadata[meta]).is_err() {
                return Done::err(Status::DATA_TRANSFER_ERROR);
            }
        }
        Done::ok()
    }
}

impl CommandSet for TestSet {
    fn admin(&mut self, ctx: &mut ControllerContext, cmd: &Command, data: &dyn DataPointer) -> Done {
        match AdminOpcode::from_u8(cmd.opcode) {
            Some(AdminOpcode::Identify) => match data.copy_to_host(&identify_pattern()) {
                Ok(()) => Done::ok(),
                Err(status) => Done::err(status),
            },
            Some(AdminOpcode::SetFeatures) if cmd.cdw10 & 0xff == 0x07 => {
                let nsqr = (cmd.cdw11 as u16).min(15);
                let ncqr = ((cmd.cdw11 >> 16) as u16).min(15);
                ctx.nsqa = nsqr;
                ctx.ncqa = ncqr;
                Done::ok_with(nsqr as u32 | (ncqr as u32) << 16)
            }
            Some(AdminOpcode::GetLogPage) => {
                let dwords = ((cmd.cdw10 >> 16) & 0xffff) as usize + 1;
                match data.copy_to_host(&vec![0; dwords * 4]) {
                    Ok(()) => Done::ok(),
                    Err(status) => Done::err(status),
                }
            }
            _ if cmd.opcode == RAISE_EVENT => {
                ctx.events.push(AsyncEvent {
                    event_type: cmd.cdw10 as u8,
                    info: cmd.cdw11 as u8,
                    log_page: cmd.cdw12 as u8,
                });
                Done::ok()
            }
            _ => Done::err(Status::INVALID_COMMAND_OPCODE),
        }
    }

    fn io(&mut self, ctx: &mut ControllerContext, cmd: &Command, data: &dyn DataPointer) -> Done {
        self.controls.io_commands.fetch_add(1, Ordering::Relaxed);
        if self.controls.hang.load(Ordering::Relaxed) {
            ctx.hold_completion = true;
            return Done::ok();
        }
        if cmd.nsid != 1 {
            return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT);
        }
        match NvmOpcode::from_u8(cmd.opcode) {
            Some(NvmOpcode::Read) => self.rw(cmd, data, false),
            Some(NvmOpcode::Write) => self.rw(cmd, data, true),
            Some(NvmOpcode::Flush) => Done::ok(),
            _ => Done::err(Status::INVALID_COMMAND_OPCODE),
        }
    }
}

/// A simulated drive with the test command set, and the controls to steer it.
pub fn sim(config: ControllerConfig) -> (SimTransport, Arc<Controls>) {
    let controls = Arc::new(Controls::default());
    (SimTransport::new(config, Box::new(TestSet::new(controls.clone()))), controls)
}

/// The driver brought up on a simulated drive.
pub fn driver(config: ControllerConfig, options: Options) -> (Controller, Arc<Controls>) {
    let (transport, controls) = sim(config);
    let ctrl = match Controller::new(Box::new(transport), options) {
        Ok(c) => c,
        Err(e) => panic!("bring-up failed: {e}"),
    };
    (ctrl, controls)
}

/// Default drive, default driver options.
pub fn default_driver() -> (Controller, Arc<Controls>) {
    driver(ControllerConfig::default(), Options::default())
}

/// Read or Write of `blocks` 512-byte blocks at `slba` on NSID 1.
pub fn rw(opcode: NvmOpcode, slba: u64, blocks: usize) -> Command {
    Command { cdw12: blocks as u32 - 1, ..Command::nvm(opcode, 1).with_slba(slba) }
}

/// Bytes that say where they came from.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// A queue pair a test drives by hand (its own memory, doorbells and Phase Tag), next
/// to the driver's queues on the same controller.
pub struct RawQueue {
    pub qid: u16,
    pub sq: u64,
    pub cq: u64,
    pub sq_entries: u32,
    pub cq_entries: u32,
    pub tail: u32,
    pub head: u32,
    pub phase: bool,
}

impl RawQueue {
    /// Memory for a pair of contiguous queues; nothing is created on the controller.
    pub fn allocate(ctrl: &mut Controller, qid: u16, sq_entries: u32, cq_entries: u32) -> RawQueue {
        let sq = ctrl.alloc_dma(sq_entries as usize * 64).unwrap();
        let cq = ctrl.alloc_dma(cq_entries as usize * 16).unwrap();
        ctrl.dma().fill(cq.addr, cq.len, 0).unwrap();
        RawQueue { qid, sq: sq.addr, cq: cq.addr, sq_entries, cq_entries, tail: 0, head: 0, phase: true }
    }

    /// Creates the completion queue then the submission queue (PC = 1, no interrupts).
    pub fn create(ctrl: &mut Controller, qid: u16, sq_entries: u32, cq_entries: u32) -> RawQueue {
        let q = Self::allocate(ctrl, qid, sq_entries, cq_entries);
        let cq = nvme::spec::queue::CreateIoCompletionQueue {
            qid,
            qsize: (cq_entries - 1) as u16,
            prp1: q.cq,
            pc: true,
            ien: false,
            iv: 0,
        };
        assert!(ctrl.admin_raw(cq.to_command()).unwrap().status().is_success());
        let sq = nvme::spec::queue::CreateIoSubmissionQueue {
            qid,
            qsize: (sq_entries - 1) as u16,
            prp1: q.sq,
            pc: true,
            qprio: nvme::spec::queue::QueuePriority::Urgent,
            cqid: qid,
            nvmsetid: 0,
        };
        assert!(ctrl.admin_raw(sq.to_command()).unwrap().status().is_success());
        q
    }

    pub fn sq_entry(&self, index: u32) -> u64 {
        self.sq + index as u64 * 64
    }

    pub fn cq_entry(&self, index: u32) -> u64 {
        self.cq + index as u64 * 16
    }

    /// Writes `cmd` with `cid` at the tail (not rung).
    pub fn push(&mut self, ctrl: &Controller, cid: u16, cmd: Command) {
        let cmd = Command { cid, ..cmd };
        ctrl.dma().write_obj(self.sq_entry(self.tail), &cmd).unwrap();
        self.tail = (self.tail + 1) % self.sq_entries;
    }

    pub fn ring(&self, ctrl: &mut Controller) {
        let stride = ctrl.cap().dstrd();
        ctrl.write_register(nvme::spec::registers::doorbell(self.qid, false, stride), self.tail).unwrap();
    }

    /// The next completion if its Phase Tag says it is new (the CQ head doorbell is not written).
    pub fn pop(&mut self, ctrl: &Controller) -> Option<nvme::spec::Completion> {
        let cqe: nvme::spec::Completion = ctrl.dma().read_obj(self.cq_entry(self.head)).unwrap();
        if cqe.phase() != self.phase {
            return None;
        }
        self.head += 1;
        if self.head == self.cq_entries {
            self.head = 0;
            self.phase = !self.phase;
        }
        Some(cqe)
    }

    /// Tells the controller the entries popped so far are free.
    pub fn release(&self, ctrl: &mut Controller) {
        let stride = ctrl.cap().dstrd();
        ctrl.write_register(nvme::spec::registers::doorbell(self.qid, true, stride), self.head).unwrap();
    }
}

/// Asks for `pairs` I/O queue pairs with Set Features Number of Queues (the test command
/// set accepts it at any time), so raw queues may use identifiers beyond the driver's.
pub fn allow_queues(ctrl: &mut Controller, pairs: u16) {
    let n = pairs as u32 - 1;
    let set = Command { cdw10: 0x07, cdw11: n | n << 16, ..Command::admin(AdminOpcode::SetFeatures) };
    assert!(ctrl.admin_raw(set).unwrap().status().is_success());
}

/// A Flush of NSID 1: a command without data.
pub fn flush() -> Command {
    Command::nvm(NvmOpcode::Flush, 1)
}
