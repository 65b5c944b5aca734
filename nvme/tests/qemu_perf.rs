//! What the QEMU transport alone achieves: 4 KiB writes then reads at queue depth 32
//! through the hand-built queue of `qemu_support` (one SQ doorbell and one CQ doorbell
//! per batch of 32, as the reference probe does), next to the Python reference probe
//! (`shared/reference/qtest_shm_probe.py`) run in the same test on the same machine.
//! Prints both, and the qtest requests per command. Asserts only that the I/O works:
//! throughput on a shared machine is reported, not judged.
//!
//! `cargo test -p nvme --release --test qemu_perf -- --nocapture`

mod qemu_support;

use std::path::PathBuf;
use std::time::Instant;

use nvme::spec::registers::offset;
use nvme::spec::NvmOpcode;
use nvme::transport::qemu::{Disk, QemuMachine};
use nvme::transport::Transport;
use qemu_support::{one_controller, Hand};

const IOS: u64 = 8192;
const QD: u16 = 32;

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
fn run_probe() -> Result<(f64, f64), String> {
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
    Ok((field("write_iops=")?, field("read_iops=")?))
}

#[test]
fn four_kib_at_qd32_through_the_transport_versus_the_python_probe() {
    let mut config = one_controller("PERF0001");
    config.disks = vec![Disk { node_name: "ns1".into(), size_bytes: 256 << 20 }];
    let machine = QemuMachine::start(config).unwrap();
    let mut t = machine.transport(machine.controllers()[0]).unwrap();

    // One synchronous round trip (a register read) through QEMU's main loop.
    let n = 2000;
    let start = Instant::now();
    for _ in 0..n {
        t.mmio_read32(offset::VS).unwrap();
    }
    let round_trip = start.elapsed() / n;

    let mut hand = Hand::bring_up(&mut t, 32).unwrap();
    hand.create_io_queue(&mut t, 64).unwrap();
    let mut iops = Vec::new();
    for opcode in [NvmOpcode::Write, NvmOpcode::Read] {
        let before = machine.qtest_stats();
        let start = Instant::now();
        hand.io_batch(&mut t, opcode, IOS, QD).unwrap();
        let elapsed = start.elapsed();
        let after = machine.qtest_stats();
        let per_cmd = |x: u64| x as f64 / IOS as f64;
        iops.push(IOS as f64 / elapsed.as_secs_f64());
        println!(
            "transport {opcode:?}: {IOS} x 4 KiB at QD {QD}: {:.0} IOPS ({:.1} us/command; per command {:.3} round trips, \
             {:.3} posted writes)",
            IOS as f64 / elapsed.as_secs_f64(),
            elapsed.as_secs_f64() * 1e6 / IOS as f64,
            per_cmd(after.round_trips - before.round_trips),
            per_cmd(after.posted_writes - before.posted_writes),
        );
    }
    println!("transport: one qtest round trip (readl of VS) takes {:.1} us", round_trip.as_secs_f64() * 1e6);
    drop(t);
    drop(machine);

    match run_probe() {
        Ok((write, read)) => println!(
            "python probe: write {write:.0} IOPS, read {read:.0} IOPS; transport/probe: write {:.2}x, read {:.2}x",
            iops[0] / write,
            iops[1] / read
        ),
        Err(why) => println!("python probe not run: {why}"),
    }
    assert!(iops.iter().all(|&x| x > 0.0));
}
