//! What the QEMU transport achieves: 4 KiB writes then reads at queue depth 32, next to
//! the Python reference probe (`shared/reference/qtest_shm_probe.py`) run in the same
//! test on the same machine. Measured two ways:
//! - the hand-built queue of `qemu_support` (one SQ doorbell and one CQ doorbell per
//!   batch of 32, as the probe does) on a disk with `aio=io_uring`, on one with
//!   `aio=threads` (the probe's backend), and on QEMU's `null-co` driver, which does no
//!   I/O at all: that is the transport plus QEMU's NVMe emulation alone;
//! - nvtest's host driver on an `aio=io_uring` disk (what nvtest's topologies use) and on
//!   an `aio=threads` disk, each in the probe's pattern (batches of `QD`, drained
//!   between batches) and with `QD` outstanding at all times; alternating with the probe
//!   for `ROUNDS` rounds of `IOS` commands each, the medians compared.
//!
//! Also prints the qtest requests per command and one synchronous round trip. Asserts
//! only that all I/O succeeds: throughput on a shared machine is reported, not judged.
//!
//! `cargo bench -p nvme --bench qemu_iops` (a benchmark, not a test: figures are
//! printed side by side, never judged against a clock).

#[path = "../tests/qemu_support/mod.rs"]
mod qemu_support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nvme::device::Device;
use nvme::driver::{Controller, Options, Transfer};
use nvme::spec::registers::offset;
use nvme::spec::{Command, NvmOpcode};
use nvme::transport::qemu::{Disk, DiskAio, QemuConfig, QemuMachine, QtestStats};
use nvme::transport::Transport;
use qemu_support::{args, one_controller, qemu_binary, Hand};

const IOS: u64 = 32768;
const QD: u16 = 32;
/// Alternating runs of the driver and the probe.
const ROUNDS: usize = 5;

/// Writes then reads, IOPS of each.
type Iops = [f64; 2];

fn disk_config(aio: DiskAio) -> QemuConfig {
    let mut config = one_controller("PERF0001");
    config.disks = vec![Disk { node_name: "ns1".into(), size_bytes: 256 << 20 }];
    config.disk_aio = aio;
    config
}

/// A namespace on QEMU's `null-co` block driver: reads return zeroes, writes vanish.
fn null_config() -> QemuConfig {
    QemuConfig {
        binary: qemu_binary(),
        extra_args: args(&[
            "-blockdev",
            "driver=null-co,node-name=null0,size=268435456,read-zeroes=on",
            "-device",
            "nvme,serial=PERF0002,id=nvme0",
            "-device",
            "nvme-ns,drive=null0,nsid=1,logical_block_size=4096,physical_block_size=4096",
        ]),
        ..QemuConfig::default()
    }
}

fn report(who: &str, opcode: NvmOpcode, elapsed: Duration, before: QtestStats, after: QtestStats) -> f64 {
    let iops = IOS as f64 / elapsed.as_secs_f64();
    let per_command = |x: u64| x as f64 / IOS as f64;
    println!(
        "{who} {opcode:?}: {IOS} x 4 KiB at QD {QD}: {iops:.0} IOPS ({:.1} us/command; per command {:.3} round \
         trips, {:.3} posted writes)",
        elapsed.as_secs_f64() * 1e6 / IOS as f64,
        per_command(after.round_trips - before.round_trips),
        per_command(after.posted_writes - before.posted_writes),
    );
    iops
}

/// The hand-built queue pair, `QD` commands per doorbell.
fn through_the_transport(who: &str, config: QemuConfig) -> Iops {
    let machine = QemuMachine::start(config).unwrap();
    let mut t = machine.transport(machine.controllers()[0]).unwrap();
    let mut hand = Hand::bring_up(&mut t, 32).unwrap();
    hand.create_io_queue(&mut t, 64).unwrap();
    let mut iops = [0.0; 2];
    for (i, opcode) in [NvmOpcode::Write, NvmOpcode::Read].into_iter().enumerate() {
        let before = machine.qtest_stats();
        let start = Instant::now();
        hand.io_batch(&mut t, opcode, IOS, QD).unwrap();
        iops[i] = report(who, opcode, start.elapsed(), before, machine.qtest_stats());
    }
    iops
}

/// How the driver keeps `QD` commands in flight.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pattern {
    /// As the probe does: `QD` commands, one ring, wait for all of them, repeat (the
    /// queue drains to empty between batches).
    Batches,
    /// `QD` outstanding at all times: every completion reaped is replaced at once, one
    /// ring per refill (what fio's iodepth means).
    Sustained,
}

/// nvtest's host driver, `IOS` commands at queue depth `QD` in `pattern`.
fn through_the_driver(who: &str, config: QemuConfig, pattern: Pattern) -> Iops {
    let machine = QemuMachine::start(config).unwrap();
    let transport = machine.transport(machine.controllers()[0]).unwrap();
    let options = Options { io_queue_depth: 64, ..Options::default() };
    let mut ctrl = Controller::new(Box::new(transport), options).unwrap();
    let qid = ctrl.io_queues()[0];
    let payload = vec![0xA5u8; 4096];
    let mut iops = [0.0; 2];
    for (i, opcode) in [NvmOpcode::Write, NvmOpcode::Read].into_iter().enumerate() {
        let before = machine.qtest_stats();
        let start = Instant::now();
        let mut queue = ctrl.queue(qid).unwrap();
        let (mut submitted, mut done, mut failed) = (0u64, 0u64, 0usize);
        while done < IOS {
            let room = match pattern {
                Pattern::Batches if queue.outstanding() == 0 => QD as u64,
                Pattern::Batches => 0,
                Pattern::Sustained => QD as u64 - queue.outstanding() as u64,
            };
            for _ in 0..room.min(IOS - submitted) {
                let cmd = Command::nvm(opcode, 1).with_slba(submitted);
                let data =
                    if opcode == NvmOpcode::Write { Transfer::ToDevice(&payload) } else { Transfer::FromDevice(4096) };
                queue.submit(cmd, data).unwrap();
                submitted += 1;
            }
            queue.ring().unwrap();
            let wanted = match pattern {
                Pattern::Batches => queue.outstanding(),
                Pattern::Sustained => 1,
            };
            done += queue.wait(wanted, |r| failed += !r.completion.status().is_success() as usize).unwrap() as u64;
        }
        assert_eq!(failed, 0, "{opcode:?} commands failed");
        iops[i] = report(who, opcode, start.elapsed(), before, machine.qtest_stats());
    }
    ctrl.shutdown().unwrap();
    iops
}

/// One synchronous qtest round trip through QEMU's main loop (a register read), and
/// one posted write (to VS, which is read-only: QEMU ignores the value), including
/// collecting its `OK` later.
fn register_access_costs() -> (Duration, Duration) {
    let machine = QemuMachine::start(null_config()).unwrap();
    let mut t = machine.transport(machine.controllers()[0]).unwrap();
    let n = 2000;
    let start = Instant::now();
    for _ in 0..n {
        t.mmio_read32(offset::VS).unwrap();
    }
    let read = start.elapsed() / n;
    let start = Instant::now();
    for _ in 0..n {
        t.mmio_write32(offset::VS, 0).unwrap();
    }
    assert_eq!(t.mmio_read32(offset::VS).unwrap(), 0x0001_0400);
    (read, start.elapsed() / n)
}

/// The median of each column (writes, reads).
fn median(runs: &[Iops]) -> Iops {
    let column = |i: usize| {
        let mut v: Vec<f64> = runs.iter().map(|r| r[i]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    [column(0), column(1)]
}

fn probe_path() -> Option<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        manifest.join("../../shared/reference/qtest_shm_probe.py"),
        manifest.join("../shared/reference/qtest_shm_probe.py"),
    ]
    .into_iter()
    .find(|p| p.exists())
}

/// The probe's `RESULT write_iops=N read_iops=N` line.
fn run_probe() -> Result<Iops, String> {
    let path = probe_path().ok_or("the reference probe shared/reference/qtest_shm_probe.py is not beside the repo")?;
    let out = std::process::Command::new("python3")
        .arg(&path)
        .args(["--ios", &IOS.to_string(), "--qd", &QD.to_string()])
        .output()
        .map_err(|e| format!("python3 {}: {e}", path.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line =
        stdout.lines().find(|l| l.starts_with("RESULT")).ok_or_else(|| format!("probe printed no RESULT: {stdout}"))?;
    let field = |name: &str| -> Result<f64, String> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no {name} in {line:?}"))
    };
    Ok([field("write_iops=")?, field("read_iops=")?])
}

fn main() {
    let (read, write) = register_access_costs();
    println!(
        "register read (one qtest round trip): {:.1} us; posted register write: {:.1} us",
        read.as_secs_f64() * 1e6,
        write.as_secs_f64() * 1e6
    );
    let null = through_the_transport("transport, null-co", null_config());
    let uring = through_the_transport("transport, io_uring", disk_config(DiskAio::IoUring));
    let threads = through_the_transport("transport, threads", disk_config(DiskAio::Threads));
    // The driver and the probe take turns, ROUNDS times, so a burst of load on this
    // shared machine hits both sides alike; the medians are compared.
    let mut runs: [Vec<Iops>; 4] = Default::default();
    let mut probe = Vec::new();
    let kinds = [
        ("driver, io_uring", DiskAio::IoUring, Pattern::Batches),
        ("driver, threads", DiskAio::Threads, Pattern::Batches),
        ("driver, io_uring, sustained QD", DiskAio::IoUring, Pattern::Sustained),
        ("driver, threads, sustained QD", DiskAio::Threads, Pattern::Sustained),
    ];
    for round in 1..=ROUNDS {
        println!("round {round} of {ROUNDS}");
        for ((who, aio, pattern), runs) in kinds.iter().zip(runs.iter_mut()) {
            runs.push(through_the_driver(who, disk_config(*aio), *pattern));
        }
        match run_probe() {
            Ok(iops) => {
                println!("python probe (threads): write {:.0} IOPS, read {:.0} IOPS", iops[0], iops[1]);
                probe.push(iops);
            }
            Err(why) => println!("python probe not run: {why}"),
        }
    }
    let medians: Vec<Iops> = runs.iter().map(|r| median(r)).collect();
    println!("medians of {ROUNDS} rounds, IOPS:          write     read");
    for ((who, _, _), m) in kinds.iter().zip(&medians) {
        println!("  {who:<32} {:>9.0} {:>8.0}", m[0], m[1]);
    }
    if probe.len() == ROUNDS {
        let probe = median(&probe);
        println!("  {:<32} {:>9.0} {:>8.0}", "python probe (threads)", probe[0], probe[1]);
        let one_round = [("transport, threads (one round)", threads), ("transport, io_uring (one round)", uring)];
        let rows = kinds.iter().map(|(who, _, _)| *who).zip(medians.iter().copied());
        for (who, iops) in one_round.into_iter().chain(rows) {
            println!("{who} / probe: write {:.2}x, read {:.2}x", iops[0] / probe[0], iops[1] / probe[1]);
        }
    }
    let driver: Vec<f64> = medians.iter().flatten().copied().collect();
    assert!([null, uring, threads].iter().flatten().chain(&driver).all(|&x| x > 0.0), "some I/O failed");
}
