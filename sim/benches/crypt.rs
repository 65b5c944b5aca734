//! The cost of the simulated drive's media encryption: 4 KiB random reads and writes
//! through nvtest's host driver against the enterprise-1.4 subsystem with its data
//! stored AES-256-XTS encrypted (the profile's `erase.encryption: true`), next to the
//! same subsystem storing plaintext, measured in the same run (runs alternate, so a
//! busy machine slows both). Goal: the encrypted path at least 0.5× the plaintext one.
//!
//! One I/O queue at queue depth 32 over a 64 MiB namespace of 4096-byte blocks; the
//! profile's service model is removed, so commands complete at once and the figures are
//! the host and simulator's own cost per command. Reads check each block's LBA stamp.
//!
//!     cargo bench -p nvme-sim --bench crypt
//!
//! `NVTEST_BENCH_SECS` sets the measuring time of each run (default 2 s).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use nvme::driver::{Controller, IoQueuePair, Options, Transfer};
use nvme::spec::{Command, NvmOpcode};
use nvme_sim::bench::{stamp_blocks, ReadLoop};
use nvme_sim::pci::SimTransport;
use nvme_sim::profile::{InitialNamespace, Profile};
use nvme_sim::subsystem::Subsystem;

const QUEUE_DEPTH: usize = 32;
const BLOCKS: u64 = 16 * 1024;

fn controller(encrypted: bool) -> Result<Controller, String> {
    let mut p = Profile::builtin("enterprise-1.4").map_err(|e| e.to_string())?;
    p.service = None;
    p.erase.encryption = encrypted;
    p.capacity_bytes = 1 << 30;
    p.namespaces = vec![InitialNamespace { lbads: 4096, ms: 0, extended: false, blocks: BLOCKS, attached: true }];
    let config = p.controller_config();
    let sub = Subsystem::new(p).map_err(|e| e.to_string())?;
    if sub.namespace(1).and_then(|ns| ns.key()).is_some() != encrypted {
        return Err("the namespace's encryption is not what the bench asked for".into());
    }
    let transport = SimTransport::new(config, Box::new(sub));
    let options = Options { io_queues: 1, io_queue_depth: 256, ..Default::default() };
    Controller::new(Box::new(transport), options).map_err(|e| e.to_string())
}

/// Random 4 KiB writes at QUEUE_DEPTH for `secs`: writes completed.
fn write_loop(q: &mut IoQueuePair<'_>, secs: Duration) -> Result<u64, String> {
    let block = vec![0x5Au8; 4096];
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut done = 0u64;
    let mut failed = 0u64;
    let start = Instant::now();
    let mut to_submit = QUEUE_DEPTH;
    loop {
        for _ in 0..to_submit {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let cmd = Command::nvm(NvmOpcode::Write, 1).with_slba(rng % BLOCKS);
            q.submit(cmd, Transfer::ToDevice(&block)).map_err(|e| e.to_string())?;
        }
        q.ring().map_err(|e| e.to_string())?;
        let reaped =
            q.wait(1, |r| failed += u64::from(!r.completion.status().is_success())).map_err(|e| e.to_string())?;
        done += reaped as u64;
        to_submit = reaped;
        if start.elapsed() >= secs {
            let left = q.outstanding();
            done += q.wait(left, |_| {}).map_err(|e| e.to_string())? as u64;
            break;
        }
    }
    match failed {
        0 => Ok(done),
        n => Err(format!("{n} writes failed")),
    }
}

/// (read IOPS, write IOPS) of one subsystem.
fn measure(encrypted: bool, secs: Duration) -> Result<(f64, f64), String> {
    let mut ctrl = controller(encrypted)?;
    let figures = run_queue(&mut ctrl, secs)?;
    ctrl.shutdown().map_err(|e| e.to_string())?;
    Ok(figures)
}

/// The reads, then the writes, on I/O queue 1 of `ctrl`.
fn run_queue(ctrl: &mut Controller, secs: Duration) -> Result<(f64, f64), String> {
    let mut q = ctrl.queue(1).map_err(|e| e.to_string())?;
    stamp_blocks(&mut q, BLOCKS, QUEUE_DEPTH)?;
    let mut reads = ReadLoop::new(BLOCKS, QUEUE_DEPTH);
    reads.run(&mut q, Duration::from_millis(200))?;
    let start = Instant::now();
    let read = reads.run(&mut q, secs)?;
    let read_iops = read as f64 / start.elapsed().as_secs_f64();
    if reads.bad > 0 {
        return Err(format!("{} reads completed with an error or the wrong block", reads.bad));
    }
    let start = Instant::now();
    let written = write_loop(&mut q, secs)?;
    let write_iops = written as f64 / start.elapsed().as_secs_f64();
    Ok((read_iops, write_iops))
}

fn main() -> ExitCode {
    let secs = std::env::var("NVTEST_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2u64);
    let secs = Duration::from_secs(secs.max(1));
    println!(
        "4 KiB random reads, then writes, queue depth {QUEUE_DEPTH}, 64 MiB namespace, {} s each; plaintext and \
         AES-256-XTS runs alternate",
        secs.as_secs()
    );
    let mut runs: Vec<(bool, f64, f64)> = Vec::new();
    for encrypted in [false, true, false, true] {
        match measure(encrypted, secs) {
            Ok((r, w)) => {
                let label = if encrypted { "AES-256-XTS" } else { "plaintext  " };
                println!("  {label}: {r:>10.0} read IOPS  {w:>10.0} write IOPS");
                runs.push((encrypted, r, w));
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let mean = |enc: bool, pick: fn(&(bool, f64, f64)) -> f64| {
        let v: Vec<f64> = runs.iter().filter(|r| r.0 == enc).map(pick).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    for (what, pick) in [("reads", (|r: &(bool, f64, f64)| r.1) as fn(&_) -> f64), ("writes", |r| r.2)] {
        let (plain, enc) = (mean(false, pick), mean(true, pick));
        let ratio = enc / plain;
        let verdict = if ratio >= 0.5 { "met" } else { "NOT met" };
        println!("{what}: encrypted {enc:.0} vs plaintext {plain:.0} IOPS: {ratio:.2}x (goal >= 0.5x: {verdict})");
    }
    ExitCode::SUCCESS
}
