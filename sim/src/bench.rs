//! For benchmarks: the bare host driver's read loop against a simulated drive, and a
//! RAM command set to run it on. `cargo bench -p nvme-sim --bench iops` and nvtest's
//! engine benchmark (`cargo bench -p nvtest --bench engine`) both measure with these,
//! so the engine is compared with exactly the loop the driver figure comes from.
//!
//! The loop keeps a fixed number of 4 KiB random reads in flight on one I/O queue:
//! submit, ring, wait for at least one completion, submit as many again. Every
//! completion is checked: its status, and the block's LBA stamp (the block's first
//! 8 bytes hold its LBA, little-endian; [`RamSet`] is built so, [`stamp_blocks`] writes
//! them on any other drive).

use std::time::{Duration, Instant};

use nvme::driver::{IoQueuePair, Transfer};
use nvme::spec::{AdminOpcode, Command, NvmOpcode, Status};

use crate::exec::{CommandSet, ControllerContext, DataPointer, Done};

/// Bytes of a block of the loop (and of [`RamSet`]).
pub const BLOCK: usize = 4096;

/// A RAM namespace (NSID 1) of 4 KiB blocks, each stamped with its LBA in its first
/// 8 bytes. It answers Read and Write, and of the admin commands only Set Features
/// Number of Queues (what the driver's bring-up needs); there is no service model
/// behind it, so every command completes at its doorbell write.
pub struct RamSet {
    blocks: Vec<u8>,
    count: u64,
}

impl RamSet {
    pub fn new(count: u64) -> Self {
        let mut blocks = vec![0u8; count as usize * BLOCK];
        for (lba, block) in blocks.chunks_mut(BLOCK).enumerate() {
            block[..8].copy_from_slice(&(lba as u64).to_le_bytes());
        }
        RamSet { blocks, count }
    }
}

impl CommandSet for RamSet {
    fn admin(&mut self, ctx: &mut ControllerContext, cmd: &Command, _: &dyn DataPointer) -> Done {
        if cmd.opcode == AdminOpcode::SetFeatures as u8 && cmd.cdw10 & 0xff == 0x07 {
            ctx.nsqa = cmd.cdw11 as u16;
            ctx.ncqa = (cmd.cdw11 >> 16) as u16;
            return Done::ok_with(cmd.cdw11);
        }
        Done::err(Status::INVALID_COMMAND_OPCODE)
    }

    fn io(&mut self, _: &mut ControllerContext, cmd: &Command, data: &dyn DataPointer) -> Done {
        let (slba, count) = (cmd.slba(), cmd.nlb() as u64 + 1);
        if cmd.nsid != 1 || slba + count > self.count {
            return Done::err(Status::LBA_OUT_OF_RANGE);
        }
        let range = slba as usize * BLOCK..(slba + count) as usize * BLOCK;
        let moved = match NvmOpcode::from_u8(cmd.opcode) {
            Some(NvmOpcode::Read) => data.copy_to_host(&self.blocks[range]),
            Some(NvmOpcode::Write) => data.copy_from_host(range.len()).map(|b| self.blocks[range].copy_from_slice(&b)),
            _ => return Done::err(Status::INVALID_COMMAND_OPCODE),
        };
        match moved {
            Ok(()) => Done::ok(),
            Err(status) => Done::err(status),
        }
    }
}

/// Writes every block of NSID 1's `0 .. blocks` (4 KiB each) with its LBA stamp,
/// `depth` commands at a time, so that [`ReadLoop`] can check what it reads.
pub fn stamp_blocks(q: &mut IoQueuePair<'_>, blocks: u64, depth: usize) -> Result<(), String> {
    let mut block = vec![0u8; BLOCK];
    let mut failed = 0u64;
    let mut lba = 0;
    while lba < blocks {
        let batch = (blocks - lba).min(depth as u64);
        for l in lba..lba + batch {
            block[..8].copy_from_slice(&l.to_le_bytes());
            let cmd = Command::nvm(NvmOpcode::Write, 1).with_slba(l);
            q.submit(cmd, Transfer::ToDevice(&block)).map_err(|e| e.to_string())?;
        }
        q.ring().map_err(|e| e.to_string())?;
        q.wait(batch as usize, |r| failed += u64::from(!r.completion.status().is_success()))
            .map_err(|e| e.to_string())?;
        lba += batch;
    }
    match failed {
        0 => Ok(()),
        n => Err(format!("{n} writes of the LBA stamps failed")),
    }
}

/// The bare driver's read loop: `depth` 4 KiB random reads in flight over NSID 1's
/// `0 .. blocks`, each completion checked. Keeps its random state and its count of bad
/// completions across runs (a warm-up, then the measured run).
pub struct ReadLoop {
    blocks: u64,
    depth: usize,
    rng: crate::rng::Rng,
    lba_of_cid: Vec<u64>,
    /// Reads that completed with an error status or returned another block.
    pub bad: u64,
}

impl ReadLoop {
    pub fn new(blocks: u64, depth: usize) -> Self {
        ReadLoop { blocks, depth, rng: crate::rng::Rng::new(0x9e37_79b9_7f4a_7c15), lba_of_cid: vec![0; 65536], bad: 0 }
    }

    /// xorshift64*: cheap random LBAs.
    fn next_lba(&mut self) -> u64 {
        self.rng.next_u64() % self.blocks
    }

    /// Reads for at least `until` (wall time), then drains what is still in flight so
    /// the queue ends empty. Returns the reads completed.
    pub fn run(&mut self, q: &mut IoQueuePair<'_>, until: Duration) -> Result<u64, String> {
        let mut done = 0u64;
        let start = Instant::now();
        let mut to_submit = self.depth;
        loop {
            for _ in 0..to_submit {
                let lba = self.next_lba();
                let cmd = Command::nvm(NvmOpcode::Read, 1).with_slba(lba);
                let cid = q.submit(cmd, Transfer::FromDevice(BLOCK)).map_err(|e| e.to_string())?;
                self.lba_of_cid[cid as usize] = lba;
            }
            q.ring().map_err(|e| e.to_string())?;
            let (lba_of_cid, bad) = (&self.lba_of_cid, &mut self.bad);
            let reaped = q
                .wait(1, |r| {
                    let stamp = u64::from_le_bytes(r.data[..8].try_into().unwrap_or([0xff; 8]));
                    if !r.completion.status().is_success() || stamp != lba_of_cid[r.completion.cid as usize] {
                        *bad += 1;
                    }
                })
                .map_err(|e| e.to_string())?;
            done += reaped as u64;
            to_submit = reaped;
            if done % 4096 < reaped as u64 && start.elapsed() >= until {
                let left = q.outstanding();
                if left > 0 {
                    done += q.wait(left, |_| {}).map_err(|e| e.to_string())? as u64;
                }
                return Ok(done);
            }
        }
    }
}
