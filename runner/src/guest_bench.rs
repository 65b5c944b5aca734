//! The io_uring passthrough benchmark that runs inside the Linux guest
//! (`nvtest-guest-helper bench`, the guest init's `bench NSID` setup step): nvtest's
//! workload engine ([`crate::load`]) on [`nvme::linux::LinuxDevice`]'s io_uring queues
//! against fio's `io_uring_cmd` engine, on the same generic namespace device, 4 KiB
//! random reads at queue depth 32, one job each, run alternately.
//!
//! The region read (the first [`REGION_BYTES`] of the namespace) is first written by
//! the engine with tagged blocks, so every read nvtest makes is verified against what
//! it wrote (a wrong block or a failed command fails the benchmark); fio reads the same
//! region (`--size`) and checks status only, as fio does. Each round prints one line;
//! the last line gives the mean IOPS of each and their ratio.

use std::path::Path;
use std::process::Command as Process;
use std::time::Duration;

use nvme::device::{Data, Device};
use nvme::linux::LinuxDevice;
use nvme::spec::identify::{identify, Cns, IdentifyNamespace};
use nvme::spec::queue::QueuePriority;
use zerocopy::{FromZeros, IntoBytes};

use crate::data::HostMap;
use crate::load::job::Namespace;
use crate::load::{self, End, Job, Mix, NoJournal, Op, Pattern, Stop, Workload};

/// The part of the namespace both read: 64 MiB from LBA 0 (half of ns32's NSID 1).
pub const REGION_BYTES: u64 = 64 << 20;
/// Bytes per read.
pub const READ_BYTES: u64 = 4096;
/// Queue depth of both.
pub const QUEUE_DEPTH: u32 = 32;

/// How long and how often.
#[derive(Clone, Copy, Debug)]
pub struct BenchPlan {
    /// Seconds of each round.
    pub seconds: u64,
    /// Rounds of each (fio first, then nvtest, alternately).
    pub rounds: usize,
}

/// Runs the benchmark on namespace `nsid` of `controller`, telling `say` each round.
pub fn run(controller: &Path, nsid: u32, plan: BenchPlan, say: &mut dyn FnMut(&str)) -> Result<(), String> {
    let mut device = LinuxDevice::open(controller).map_err(|e| e.to_string())?;
    let generic = device
        .namespaces()
        .iter()
        .find(|n| n.nsid == nsid)
        .and_then(|n| n.generic.as_ref().and_then(|g| g.node.clone()))
        .ok_or_else(|| format!("namespace {nsid} of {} has no generic device /dev/ngXnY", controller.display()))?;
    let mut id = IdentifyNamespace::new_zeroed();
    let c = device
        .admin(identify(Cns::Namespace, nsid, 0), Data::FromDevice(id.as_mut_bytes()))
        .map_err(|e| format!("Identify Namespace {nsid}: {e}"))?;
    if !c.status().is_success() {
        return Err(format!("Identify Namespace {nsid}: {}", c.status()));
    }
    let block_size = id.lba_data_size().ok_or_else(|| format!("namespace {nsid}: no LBA format in use"))?;
    if block_size == 0 || !READ_BYTES.is_multiple_of(block_size) || id.nsze * block_size < REGION_BYTES {
        return Err(format!(
            "namespace {nsid}: {} blocks of {block_size} bytes; the benchmark reads 4 KiB blocks of its first {} MiB",
            id.nsze,
            REGION_BYTES >> 20
        ));
    }
    let namespace = Namespace {
        nsid,
        block_size,
        nsze: id.nsze,
        dealloc_read: nvme::spec::identify::DeallocatedRead::NotReported,
        atomic: nvme::spec::identify::AtomicWrite::ONE_BLOCK,
    };
    let region = REGION_BYTES / block_size;
    let mut map = HostMap::new();
    let job = |name: &str, mix: Mix, pattern: Pattern, blocks: u32, depth: u32, end: End| Job {
        name: name.into(),
        namespace,
        first_lba: 0,
        blocks: region,
        mix,
        pattern,
        blocks_per_command: vec![blocks],
        queue_depth: depth,
        priority: QueuePriority::Medium,
        port: 0,
        fua_percent: 0,
        rate: None,
        end,
        warmup: Duration::ZERO,
    };
    // The region written once, 128 KiB per command, so every read is judged.
    let per_write = ((128 << 10) / block_size) as u32;
    let fill = Workload {
        jobs: vec![job(
            "fill",
            Mix { read: 0, write: 100, deallocate: 0, flush: 0 },
            Pattern::Sequential,
            per_write,
            8,
            End::Commands(region / per_write as u64),
        )],
        seed: 0x6e76_7465_7374,
        drain: true,
        queues: Vec::new(),
    };
    let filled = engine(&mut device, &fill, &mut map)?;
    say(&format!(
        "bench: wrote the first {} MiB of {} with tagged blocks in {:.1} s",
        REGION_BYTES >> 20,
        generic.display(),
        filled.elapsed_ns as f64 / 1e9
    ));
    let reads = Workload {
        jobs: vec![job(
            "randread",
            Mix { read: 100, write: 0, deallocate: 0, flush: 0 },
            Pattern::Random,
            (READ_BYTES / block_size) as u32,
            QUEUE_DEPTH,
            End::Time(Duration::from_secs(plan.seconds)),
        )],
        seed: 0x6e76_7465_7374,
        drain: true,
        queues: Vec::new(),
    };
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 1..=plan.rounds {
        let fio = fio(&generic, plan.seconds)?;
        say(&format!("bench: round {round} fio    {fio:>10.0} IOPS (4 KiB random reads, QD {QUEUE_DEPTH}, 1 job)"));
        theirs.push(fio);
        let outcome = engine(&mut device, &reads, &mut map)?;
        let figures = outcome.jobs.first().and_then(|j| j.op(Op::Read)).ok_or("the engine counted no reads")?;
        say(&format!(
            "bench: round {round} nvtest {:>10.0} IOPS (4 KiB random reads, QD {QUEUE_DEPTH}, 1 job; {} reads verified, \
             p50 {:.1} us, p99 {:.1} us)",
            figures.iops,
            outcome.reads_judged,
            figures.latency_at(50.0) as f64 / 1e3,
            figures.latency_at(99.0) as f64 / 1e3
        ));
        ours.push(figures.iops);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (n, f) = (mean(&ours), mean(&theirs));
    say(&format!(
        "bench: RESULT nvtest {n:.0} IOPS, fio {f:.0} IOPS, ratio {:.2} (mean of {} rounds of {} s each, alternating)",
        if f > 0.0 { n / f } else { 0.0 },
        plan.rounds,
        plan.seconds
    ));
    Ok(())
}

/// Runs `work` on the device's io_uring queues; an error unless every command
/// succeeded and every read held what was written.
fn engine(device: &mut LinuxDevice, work: &Workload, map: &mut HostMap) -> Result<load::Outcome, String> {
    let specs: Vec<nvme::queued::QueueSpec> = work.jobs.iter().map(|j| j.queue_spec()).collect();
    let mut io = device.queued_io(&specs).map_err(|e| format!("io_uring queues: {e}"))?;
    let outcome = load::run(&mut *io, work, map, &mut NoJournal, Stop::AtEnd, &|| None, &mut |_| {})
        .map_err(|e| format!("the workload engine: {e}"))?;
    io.close().map_err(|e| e.to_string())?;
    if outcome.failed_count > 0 || outcome.wrong_read_count > 0 {
        return Err(format!(
            "{} commands failed ({:?}), {} reads were wrong ({:?})",
            outcome.failed_count, outcome.failed, outcome.wrong_read_count, outcome.wrong_reads
        ));
    }
    Ok(outcome)
}

/// fio's read IOPS on `node` for `seconds`.
fn fio(node: &Path, seconds: u64) -> Result<f64, String> {
    let out = Process::new("fio")
        .args([
            "--name=randread",
            "--ioengine=io_uring_cmd",
            "--cmd_type=nvme",
            &format!("--filename={}", node.display()),
            "--rw=randread",
            "--bs=4k",
            "--iodepth=32",
            "--numjobs=1",
            "--time_based",
            &format!("--runtime={seconds}"),
            &format!("--size={}", REGION_BYTES),
            "--norandommap",
            "--output-format=json",
        ])
        .output()
        .map_err(|e| format!("cannot run fio: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("fio failed ({}): {}{}", out.status, String::from_utf8_lossy(&out.stderr), text));
    }
    let json = text.find('{').map(|i| &text[i..]).unwrap_or(&text);
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("fio's JSON output: {e}: {}", text.trim()))?;
    let job = &value["jobs"][0];
    if job["error"].as_i64().unwrap_or(0) != 0 {
        return Err(format!("fio's job failed with error {}", job["error"]));
    }
    job["read"]["iops"].as_f64().ok_or_else(|| format!("fio's JSON has no read IOPS: {}", text.trim()))
}
