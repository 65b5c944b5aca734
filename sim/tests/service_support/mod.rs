//! Timed loads against the simulated drive through nvtest's driver, on the drive's
//! simulated clock: submissions at exact times (`idle_until` to the next one), latencies
//! from the clock at submission and at reaping. Shared by the service tests and the
//! `service` bench.
#![allow(dead_code)]

use nvme::device::{Data, Device};
use nvme::driver::{ArbitrationMechanism, Controller, Options, Transfer};
use nvme::queued::{QueueSpec, QueuedIo};
use nvme::spec::features::{set_features, FeatureId};
use nvme::spec::queue::QueuePriority;
use nvme::spec::{nvm, Command};
use nvme_sim::pci::SimTransport;
use nvme_sim::profile::{InitialNamespace, Profile};
use nvme_sim::subsystem::Subsystem;

pub const BLOCK: u64 = 4096;
/// Reads fall uniformly in the first 256 MiB; the background write wraps in the next.
pub const READ_BLOCKS: u64 = (256 << 20) / BLOCK;
pub const WRITE_BASE: u64 = READ_BLOCKS;
pub const WRITE_BLOCKS: u64 = (256 << 20) / BLOCK;

/// A profile with one 1 GiB namespace of 4 KiB blocks.
pub fn small(mut profile: Profile) -> Profile {
    profile.capacity_bytes = 1 << 30;
    profile.namespaces =
        vec![InitialNamespace { lbads: 4096, ms: 0, extended: false, blocks: (1 << 30) / BLOCK, attached: true }];
    profile
}

/// The simulated drive of `profile` (shrunk by [`small`]) as a transport.
pub fn transport(profile: Profile) -> SimTransport {
    let profile = small(profile);
    let config = profile.controller_config();
    SimTransport::new(config, Box::new(Subsystem::new(profile).unwrap()))
}

/// The driver over `transport`, with `arbitration` selected in CC.AMS.
pub fn driver(transport: SimTransport, arbitration: ArbitrationMechanism) -> Controller {
    let options = Options { io_queues: 1, arbitration, command_timeout_ms: 10_000, ..Options::default() };
    Controller::new(Box::new(transport), options).unwrap()
}

/// Set Features Arbitration: AB, LPW, MPW, HPW (Figure "Arbitration – Command Dword 11").
pub fn set_arbitration(ctrl: &mut Controller, ab: u8, lpw: u8, mpw: u8, hpw: u8) {
    let cdw11 = ab as u32 | (lpw as u32) << 8 | (mpw as u32) << 16 | (hpw as u32) << 24;
    let done = ctrl.admin(set_features(FeatureId::Arbitration, false, 0, cdw11), Data::None).unwrap();
    assert!(done.status().is_success(), "{}", done.status());
}

/// xorshift64*.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// The mixed load of the datasheet's QoS claim.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    pub read_iops: u64,
    /// Background sequential 128 KiB write, MB/s (10^6 bytes); 0: none.
    pub write_mb_s: u64,
    pub read_depth: u32,
    pub seconds: f64,
}

impl Load {
    pub const CLAIM: Load = Load { read_iops: 50_000, write_mb_s: 500, read_depth: 32, seconds: 1.0 };
}

/// What a load measured: read latencies (sorted, ns), reads that found their queue full.
#[derive(Debug, PartialEq, Eq)]
pub struct Figures {
    pub reads: Vec<u64>,
    pub writes: Vec<u64>,
    pub delayed_reads: u64,
    pub simulated_ns: u64,
}

impl Figures {
    /// The `p`-th percentile of read latency in µs.
    pub fn read_us(&self, p: f64) -> f64 {
        percentile(&self.reads, p) as f64 / 1000.0
    }
}

pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

const WRITE_BYTES: usize = 128 * 1024;

/// Runs `load` on a read queue and a write queue of the workload's own.
pub fn run(ctrl: &mut Controller, load: Load) -> Figures {
    let specs = [
        QueueSpec { depth: load.read_depth, priority: QueuePriority::High, port: 0 },
        QueueSpec { depth: 8, priority: QueuePriority::Low, port: 0 },
    ];
    let mut q = ctrl.open_queues(&specs).unwrap();
    let end = (load.seconds * 1e9) as u64;
    let start = q.now_ns();
    let read_every = 1_000_000_000 / load.read_iops.max(1);
    let write_every = (WRITE_BYTES as u64 * 1000).checked_div(load.write_mb_s).unwrap_or(u64::MAX);
    let (mut next_read, mut next_write) = (start, if load.write_mb_s == 0 { u64::MAX } else { start });
    let mut submitted = [vec![0u64; 65536], vec![0u64; 65536]];
    let mut figures = Figures { reads: Vec::new(), writes: Vec::new(), delayed_reads: 0, simulated_ns: 0 };
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut write_lba = 0u64;
    let payload = vec![0x5au8; WRITE_BYTES];
    let blocks = (WRITE_BYTES as u64 / BLOCK) as u16;
    loop {
        let now = q.now_ns();
        for (queue, out) in [(0usize, &mut figures.reads), (1, &mut figures.writes)] {
            let times = &submitted[queue];
            q.poll(queue, &mut |r| {
                assert!(r.completion.status().is_success(), "{}", r.completion.status());
                out.push(now - times[r.completion.cid as usize]);
            })
            .unwrap();
        }
        if now >= start + end {
            break;
        }
        if now >= next_read {
            if q.outstanding(0) < q.capacity(0) {
                let cmd = nvm::read(1, rng.below(READ_BLOCKS), 0);
                let cid = q.submit(0, cmd, Transfer::FromDevice(BLOCK as usize), Transfer::None).unwrap();
                submitted[0][cid as usize] = now;
                q.ring(0).unwrap();
                next_read += read_every;
            } else {
                figures.delayed_reads += 1;
            }
        }
        if now >= next_write && q.outstanding(1) < q.capacity(1) {
            let cmd: Command = nvm::write(1, WRITE_BASE + write_lba, blocks - 1, false);
            write_lba = (write_lba + blocks as u64) % WRITE_BLOCKS;
            let cid = q.submit(1, cmd, Transfer::ToDevice(&payload), Transfer::None).unwrap();
            submitted[1][cid as usize] = now;
            q.ring(1).unwrap();
            next_write += write_every;
        }
        let due = next_read.min(next_write).min(start + end);
        // Something due that found its queue full waits for a completion.
        q.idle_until(if due > now { due } else { now + 1_000_000 }).unwrap();
    }
    figures.simulated_ns = q.now_ns() - start;
    drop(q);
    figures.reads.sort_unstable();
    figures.writes.sort_unstable();
    figures
}
