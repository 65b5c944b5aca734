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

use nvme::driver::{Controller, Options};
use nvme_sim::bench::{RamSet, ReadLoop};
use nvme_sim::pci::{ControllerConfig, SimTransport};

const QUEUE_DEPTH: usize = 32;

/// Runs random reads over `blocks` blocks at QUEUE_DEPTH for `secs`; returns (IOPS, commands).
fn driver_iops(secs: Duration, blocks: u64) -> Result<(f64, u64), String> {
    let transport = SimTransport::new(ControllerConfig::default(), Box::new(RamSet::new(blocks)));
    let options = Options { io_queues: 1, io_queue_depth: 256, ..Default::default() };
    let mut ctrl = Controller::new(Box::new(transport), options).map_err(|e| e.to_string())?;
    let mut q = ctrl.queue(1).map_err(|e| e.to_string())?;
    let mut reads = ReadLoop::new(blocks, QUEUE_DEPTH);
    reads.run(&mut q, Duration::from_millis(300))?; // warm-up
    let start = Instant::now();
    let done = reads.run(&mut q, secs)?;
    let elapsed = start.elapsed().as_secs_f64();
    if reads.bad > 0 {
        return Err(format!("{} reads completed with an error or the wrong block", reads.bad));
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
