//! IOPS of the whole host path against the simulated drive, next to fio's null engine.
//!
//! 4 KiB random reads at queue depth 32 on one I/O queue: nvtest's driver builds each
//! SQE and PRP, rings the doorbell, the simulated controller fetches the command, the
//! in-bench RAM command set copies 4 KiB into host memory, the CQE is posted and reaped
//! by Phase Tag. Every completion is checked (status, and the block's LBA stamp).
//! `fio --ioengine=null` with the same block size and depth runs before and after, for
//! scale (its mean is the reference; the machine may be busy).
//!
//! Two namespace sizes: 64 MiB, where every read copies a block from DRAM (the cost a
//! RAM-backed drive pays), and 1 MiB, which stays in cache and so shows the driver's
//! and the engine's own cost per command. fio's null engine moves no data at all.
//!
//!     cargo bench -p nvme-sim --bench iops
//!
//! `NVTEST_BENCH_SECS` sets the measuring time of each side (default 3 s).

use std::process::{Command as Process, ExitCode};
use std::time::{Duration, Instant};

use nvme::driver::{Controller, Options, Transfer};
use nvme::spec::{AdminOpcode, Command, NvmOpcode, Status};
use nvme_sim::exec::{CommandSet, ControllerContext, DataPointer, Done};
use nvme_sim::pci::{ControllerConfig, SimTransport};

const BLOCK: usize = 4096;
const QUEUE_DEPTH: usize = 32;

/// A RAM namespace of 4 KiB blocks, each stamped with its LBA in its first 8 bytes.
struct RamSet {
    blocks: Vec<u8>,
    count: u64,
}

impl RamSet {
    fn new(count: u64) -> Self {
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

/// xorshift64*: cheap random LBAs.
struct Rng(u64);

impl Rng {
    fn next_lba(&mut self, blocks: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % blocks
    }
}

fn read(lba: u64) -> Command {
    Command::nvm(NvmOpcode::Read, 1).with_slba(lba)
}

/// Runs random reads over `blocks` blocks at QUEUE_DEPTH for `secs`; returns (IOPS, commands).
fn driver_iops(secs: Duration, blocks: u64) -> Result<(f64, u64), String> {
    let transport = SimTransport::new(ControllerConfig::default(), Box::new(RamSet::new(blocks)));
    let options = Options { io_queues: 1, io_queue_depth: 256, ..Default::default() };
    let mut ctrl = Controller::new(Box::new(transport), options).map_err(|e| e.to_string())?;
    let mut q = ctrl.queue(1).map_err(|e| e.to_string())?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut lba_of_cid = vec![0u64; 65536];
    let mut bad = 0u64;

    let mut run = |until: Duration, q: &mut nvme::driver::IoQueuePair<'_>| -> Result<u64, String> {
        let mut done = 0u64;
        let start = Instant::now();
        let mut to_submit = QUEUE_DEPTH;
        loop {
            for _ in 0..to_submit {
                let lba = rng.next_lba(blocks);
                let cid = q.submit(read(lba), Transfer::FromDevice(BLOCK)).map_err(|e| e.to_string())?;
                lba_of_cid[cid as usize] = lba;
            }
            q.ring().map_err(|e| e.to_string())?;
            let reaped = q
                .wait(1, |r| {
                    let stamp = u64::from_le_bytes(r.data[..8].try_into().unwrap_or([0xff; 8]));
                    if !r.completion.status().is_success() || stamp != lba_of_cid[r.completion.cid as usize] {
                        bad += 1;
                    }
                })
                .map_err(|e| e.to_string())?;
            done += reaped as u64;
            to_submit = reaped;
            if done % 4096 < reaped as u64 && start.elapsed() >= until {
                // Drain what is still in flight so the queue ends empty.
                let left = q.outstanding();
                if left > 0 {
                    done += q.wait(left, |_| {}).map_err(|e| e.to_string())? as u64;
                }
                return Ok(done);
            }
        }
    };
    run(Duration::from_millis(300), &mut q)?; // warm-up
    let start = Instant::now();
    let done = run(secs, &mut q)?;
    let elapsed = start.elapsed().as_secs_f64();
    if bad > 0 {
        return Err(format!("{bad} reads completed with an error or the wrong block"));
    }
    ctrl.shutdown().map_err(|e| e.to_string())?;
    Ok((done as f64 / elapsed, done))
}

fn fio_iops(secs: Duration) -> Result<f64, String> {
    let output = Process::new("fio")
        .args([
            "--name=null",
            "--ioengine=null",
            "--rw=randread",
            "--bs=4k",
            &format!("--iodepth={QUEUE_DEPTH}"),
            "--size=1g",
            &format!("--runtime={}", secs.as_secs().max(1)),
            "--time_based",
            "--output-format=json",
        ])
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "fio is not installed: the comparison needs it (`apt-get install -y fio`)".to_string()
            }
            _ => format!("could not run fio: {e}"),
        })?;
    if !output.status.success() {
        return Err(format!("fio failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr)));
    }
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("fio's JSON output did not parse: {e}"))?;
    json["jobs"][0]["read"]["iops"].as_f64().ok_or_else(|| "fio's JSON has no jobs[0].read.iops".to_string())
}

fn main() -> ExitCode {
    let secs = std::env::var("NVTEST_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3u64);
    let secs = Duration::from_secs(secs.max(1));
    println!("4 KiB random reads, queue depth {QUEUE_DEPTH}, one I/O queue, {} s per run", secs.as_secs());
    let fio_before = match fio_iops(secs) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut ours = Vec::new();
    for (label, blocks) in [("64 MiB namespace (DRAM)", 16 * 1024u64), ("1 MiB namespace (cache)", 256)] {
        match driver_iops(secs, blocks) {
            Ok((iops, commands)) => ours.push((label, iops, commands)),
            Err(e) => {
                eprintln!("error: nvtest driver against the simulated drive, {label}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let fio_after = match fio_iops(secs) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let fio = (fio_before + fio_after) / 2.0;
    println!("fio, null engine:                {fio:>12.0} IOPS (runs: {fio_before:.0} before, {fio_after:.0} after)");
    for (label, iops, commands) in &ours {
        println!("nvtest driver + simulated drive, {label}: {iops:>10.0} IOPS ({commands} reads verified)");
    }
    for (label, iops, _) in &ours {
        let ratio = iops / fio;
        let verdict = if ratio >= 0.5 { "met" } else { "NOT met" };
        println!("ratio, {label}: {ratio:.2}x fio (goal >= 0.5x: {verdict})");
    }
    ExitCode::SUCCESS
}
