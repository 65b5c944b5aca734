//! The workload engine on the simulated drive, next to references measured in the same
//! run (issue 10, benchmarks (a) and (b)).
//!
//! (a) Wall-clock IOPS of 4 KiB random reads at queue depth 32 on one queue, every read
//! judged against the host map, through the engine ([`nvtest::load::engine::run`] on
//! the queues [`Device::queued_io`] gives), next to the bare driver loop of
//! `cargo bench -p nvme-sim --bench iops` ([`nvme_sim::bench::ReadLoop`]: submit, ring,
//! reap, check the LBA stamp) on the same simulated controller configuration, each on
//! its own drive built alike:
//!
//! - `ram`: the configuration of the `iops` bench (default controller, no service
//!   model, [`RamSet`]: every command completes at its doorbell write).
//! - `sim`: the `sim:enterprise-1.4` profile, service model included, with its one
//!   namespace made of 4 KiB blocks; the engine's drive is opened as the `sim` target
//!   is ([`nvtest::targets::open_sim`]), the bare loop's with the same driver options.
//!   Reads take ~80 µs of simulated time there; both sides let the clock jump to the
//!   next completion when they wait, so wall IOPS is host + simulator CPU per command.
//!
//! Both sides read only blocks written before: the bare loop's drive holds LBA stamps
//! (the RAM set is built so; on the profile [`stamp_blocks`] writes them), the engine
//! writes the whole range through itself first (so the host map knows every block and
//! each read is compared with the data written, not judged as unwritten).
//!
//! (c) Wall-clock IOPS of 4 KiB random writes (a flush in fifty) through the engine with
//! the power-fail journal on — the cycle's [`Ledger`] and the [`FileJournal`] on the host,
//! batched and synced — next to the same writes with no journal (goal ≥ 0.8×, floor 0.5×).
//!
//! (b) Simulated seconds per wall second of the `mixed` case of `suites/qos.yaml` on the
//! default `sim` target: the case is loaded from the suite file and run by a
//! [`Session`] as `nvtest run` runs it (its claims from the profile), and the workload's
//! queues are timed: the simulated clock ([`QueuedIo::now_ns`]) and the wall clock from
//! the queues' opening to their closing. The thread's CPU time is printed beside (the
//! machine may be busy: wall time then runs ahead of it).
//!
//! The sides take turns (reference, engine, reference, engine, …) so both see the same
//! machine; min and median of the rounds are printed.
//!
//!     cargo bench -p nvtest --bench engine
//!
//! `NVTEST_BENCH_SECS` sets the measuring time of each run in (a) (default 3 s);
//! `NVTEST_BENCH_ROUNDS` the rounds of each side (default 3).

use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nvme::device::{Access, Data, Device, DeviceError, HostFault, Registers};
use nvme::driver::{ArbitrationMechanism, Controller, Options, Reaped, Transfer};
use nvme::queued::{QueueSpec, QueuedIo};
use nvme::spec::identify::AtomicWrite;
use nvme::spec::queue::QueuePriority;
use nvme::spec::{Command, Completion};
use nvme_sim::bench::{stamp_blocks, RamSet, ReadLoop, BLOCK};
use nvme_sim::pci::{ControllerConfig, SimTransport};
use nvme_sim::profile::InitialNamespace;
use nvme_sim::Profile;
use nvtest::data::{DeallocatedRead, Expectation, HostMap};
use nvtest::exec::{case_seed, Session};
use nvtest::load::job::Namespace;
use nvtest::load::{engine, End, Job, Journal, Mix, NoJournal, Pattern, Stop, Workload};
use nvtest::power::journal_file::{Both, FileJournal, Header, SYNC_AFTER, SYNC_EVERY};
use nvtest::power::Ledger;
use nvtest::targets::{self, TargetSpec, DEFAULT_SIM_PROFILE};
use nvtest::verdict::Verdict;

const QUEUE_DEPTH: usize = 32;
const WARMUP: Duration = Duration::from_millis(300);
const SEED: u64 = 0x0062_656e_6368;

/// Where a side of (a) runs.
#[derive(Clone, Copy)]
enum Drive {
    Ram,
    Profile,
}

impl Drive {
    fn describe(self) -> &'static str {
        match self {
            Drive::Ram => "ram (iops bench's controller, RamSet, no service model)",
            Drive::Profile => "sim (enterprise-1.4 profile, service model, 4 KiB-block namespace)",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Drive::Ram => "ram",
            Drive::Profile => "sim",
        }
    }

    /// The profile with its namespace replaced by one of `blocks` 4 KiB blocks.
    fn profile(blocks: u64) -> Result<Profile, String> {
        let mut profile = Profile::builtin(DEFAULT_SIM_PROFILE).map_err(|e| e.to_string())?;
        profile.namespaces =
            vec![InitialNamespace { lbads: BLOCK as u32, ms: 0, extended: false, blocks, attached: true }];
        Ok(profile)
    }

    /// A controller for the bare loop, brought up as the target's is.
    fn controller(self, blocks: u64) -> Result<Controller, String> {
        let transport = match self {
            Drive::Ram => SimTransport::new(ControllerConfig::default(), Box::new(RamSet::new(blocks))),
            Drive::Profile => nvme_sim::open(Self::profile(blocks)?)?,
        };
        Controller::new(Box::new(transport), Options::default()).map_err(|e| e.to_string())
    }

    /// A device for the engine, opened as the target is.
    fn device(self, blocks: u64) -> Result<(Box<dyn Device>, Namespace), String> {
        let (device, dealloc_read): (Box<dyn Device>, _) = match self {
            Drive::Ram => (Box::new(self.controller(blocks)?), DeallocatedRead::NotReported),
            Drive::Profile => {
                let profile = Self::profile(blocks)?;
                let dealloc_read = profile.dlfeat.read_behavior();
                (targets::open_sim(profile)?, dealloc_read)
            }
        };
        Ok((
            device,
            Namespace { nsid: 1, block_size: BLOCK as u64, nsze: blocks, dealloc_read, atomic: AtomicWrite::ONE_BLOCK },
        ))
    }
}

/// The bare driver loop on its own drive.
struct Bare {
    ctrl: Controller,
    reads: ReadLoop,
}

impl Bare {
    fn new(drive: Drive, blocks: u64) -> Result<Bare, String> {
        let mut ctrl = drive.controller(blocks)?;
        let mut reads = ReadLoop::new(blocks, QUEUE_DEPTH);
        {
            let mut q = ctrl.queue(1).map_err(|e| e.to_string())?;
            if let Drive::Profile = drive {
                stamp_blocks(&mut q, blocks, QUEUE_DEPTH)?;
            }
            reads.run(&mut q, WARMUP)?;
        }
        Ok(Bare { ctrl, reads })
    }

    /// IOPS of one run of `secs`.
    fn measure(&mut self, secs: Duration) -> Result<f64, String> {
        let mut q = self.ctrl.queue(1).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let done = self.reads.run(&mut q, secs)?;
        let elapsed = start.elapsed().as_secs_f64();
        if self.reads.bad > 0 {
            return Err(format!("{} reads completed with an error or the wrong block", self.reads.bad));
        }
        Ok(done as f64 / elapsed)
    }
}

/// The engine on its own drive, the range written through it first.
struct Engine {
    device: Box<dyn Device>,
    map: HostMap,
    namespace: Namespace,
    /// IOPS of the last run: how many reads the next run of a given time needs.
    rate: f64,
}

impl Engine {
    fn new(drive: Drive, blocks: u64) -> Result<Engine, String> {
        let (device, namespace) = drive.device(blocks)?;
        let mut engine = Engine { device, map: HostMap::default(), namespace, rate: 0.0 };
        let write = engine.job(Mix::WRITE, Pattern::Sequential, blocks);
        let outcome = engine.run(write)?;
        if outcome.failed_count > 0 {
            return Err(format!("{} of the preconditioning writes failed", outcome.failed_count));
        }
        let written: u64 = engine
            .map
            .namespace(1)
            .map(|m| m.known().filter(|s| matches!(s.state, Expectation::Written { .. })).map(|s| s.count).sum())
            .unwrap_or(0);
        if written != blocks {
            return Err(format!("the host map knows {written} of the {blocks} blocks written"));
        }
        engine.reads(2_000)?;
        engine.reads((engine.rate * WARMUP.as_secs_f64()) as u64)?;
        Ok(engine)
    }

    fn job(&self, mix: Mix, pattern: Pattern, commands: u64) -> Job {
        Job {
            name: "reads".into(),
            namespace: self.namespace,
            first_lba: 0,
            blocks: self.namespace.nsze,
            mix,
            pattern,
            blocks_per_command: vec![1],
            queue_depth: QUEUE_DEPTH as u32,
            priority: QueuePriority::Medium,
            port: 0,
            fua_percent: 0,
            rate: None,
            end: End::Commands(commands),
            warmup: Duration::ZERO,
        }
    }

    fn run(&mut self, job: Job) -> Result<engine::Outcome, String> {
        self.run_with(job, &mut NoJournal)
    }

    fn run_with(&mut self, job: Job, journal: &mut dyn Journal) -> Result<engine::Outcome, String> {
        let work = Workload::new(vec![job], SEED, true);
        let specs = [QueueSpec { depth: QUEUE_DEPTH as u32, priority: QueuePriority::Medium, port: 0 }];
        let mut io = self.device.queued_io(&specs).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let outcome = engine::run(io.as_mut(), &work, &mut self.map, journal, Stop::AtEnd, &|| None, &mut |_| {});
        let elapsed = start.elapsed().as_secs_f64();
        io.close().map_err(|e| e.to_string())?;
        let outcome = outcome.map_err(|e| e.to_string())?;
        let commands: u64 = outcome.jobs.iter().flat_map(|j| &j.ops).map(|o| o.commands).sum();
        self.rate = commands as f64 / elapsed;
        Ok(outcome)
    }

    /// `commands` random reads, every one judged right.
    fn reads(&mut self, commands: u64) -> Result<(), String> {
        let outcome = self.run(self.job(Mix::READ, Pattern::Random, commands.max(1_000)))?;
        if outcome.wrong_read_count > 0 || outcome.failed_count > 0 {
            return Err(format!(
                "{} wrong reads, {} failed commands; first: {:?} {:?}",
                outcome.wrong_read_count,
                outcome.failed_count,
                outcome.wrong_reads.first(),
                outcome.failed.first()
            ));
        }
        if outcome.reads_judged != commands.max(1_000) {
            return Err(format!("{} reads judged of {commands}", outcome.reads_judged));
        }
        Ok(())
    }

    /// IOPS of one run of about `secs`.
    fn measure(&mut self, secs: Duration) -> Result<f64, String> {
        self.reads((self.rate * secs.as_secs_f64()) as u64)?;
        Ok(self.rate)
    }

    /// IOPS of about `secs` of random writes with a flush in fifty, journalled as the
    /// power-fail step journals them (the cycle's ledger and the file on the host) or not.
    fn measure_writes(&mut self, secs: Duration, file: Option<&Path>) -> Result<f64, String> {
        let commands = ((self.rate * secs.as_secs_f64()) as u64).max(1_000);
        let mix = Mix { read: 0, write: 98, deallocate: 0, flush: 2 };
        let job = self.job(mix, Pattern::Random, commands);
        let outcome = match file {
            None => self.run_with(job, &mut NoJournal)?,
            Some(path) => {
                let header = Header {
                    format: 1,
                    target: "bench".into(),
                    case: "journal".into(),
                    seed: SEED,
                    ..Header::default()
                };
                let mut journal = FileJournal::create(path, &header)?;
                let mut ledger = Ledger::default();
                let outcome = self.run_with(job, &mut Both(&mut ledger, &mut journal))?;
                journal.sync()?;
                if ledger.writes.is_empty() {
                    return Err("the journalled run wrote nothing".into());
                }
                outcome
            }
        };
        if outcome.failed_count > 0 {
            return Err(format!("{} writes failed: {:?}", outcome.failed_count, outcome.failed.first()));
        }
        Ok(self.rate)
    }
}

/// (c) the engine with the power-fail journal on, next to the same writes with it off.
fn journal_row(secs: Duration, rounds: usize) -> Result<Row, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("journal");
    let mut eng = Engine::new(Drive::Profile, 16 * 1024)?;
    let (mut reference, mut figure) = (Runs::default(), Runs::default());
    eng.measure_writes(secs, None)?;
    for _ in 0..rounds {
        reference.0.push(eng.measure_writes(secs, None)?);
        figure.0.push(eng.measure_writes(secs, Some(&path))?);
    }
    Ok(Row {
        name: "(c) sim 64 MiB writes: journal on / off".into(),
        figure,
        reference,
        unit: "IOPS",
        measured: true,
        goal: 0.8,
        floor: Some(0.5),
    })
}

/// Figures of one side over the rounds.
#[derive(Default)]
struct Runs(Vec<f64>);

impl Runs {
    fn sorted(&self) -> Vec<f64> {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        v
    }

    fn min(&self) -> f64 {
        self.sorted().first().copied().unwrap_or(0.0)
    }

    fn median(&self) -> f64 {
        let v = self.sorted();
        match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }
}

/// One line of the table.
struct Row {
    name: String,
    figure: Runs,
    reference: Runs,
    unit: &'static str,
    /// Whether the reference was measured round by round (else it is a constant).
    measured: bool,
    /// Goal and the floor under which the work is not done, as ratios.
    goal: f64,
    floor: Option<f64>,
}

impl Row {
    fn ratio(&self) -> f64 {
        self.figure.median() / self.reference.median()
    }

    fn verdict(&self) -> &'static str {
        let r = self.ratio();
        match self.floor {
            _ if r >= self.goal => "met",
            Some(floor) if r < floor => "NOT met, under the floor",
            _ => "NOT met",
        }
    }
}

/// (a) on one drive configuration: the sides alternately, `rounds` times each.
fn iops_row(drive: Drive, label: &str, blocks: u64, secs: Duration, rounds: usize) -> Result<Row, String> {
    let mut bare = Bare::new(drive, blocks).map_err(|e| format!("bare driver on {}: {e}", drive.short()))?;
    let mut eng = Engine::new(drive, blocks).map_err(|e| format!("engine on {}: {e}", drive.short()))?;
    let (mut reference, mut figure) = (Runs::default(), Runs::default());
    for _ in 0..rounds {
        reference.0.push(bare.measure(secs).map_err(|e| format!("bare driver on {}: {e}", drive.short()))?);
        figure.0.push(eng.measure(secs).map_err(|e| format!("engine on {}: {e}", drive.short()))?);
    }
    bare.ctrl.shutdown().map_err(|e| e.to_string())?;
    Ok(Row {
        name: format!("(a) {} {label}: engine / bare driver", drive.short()),
        figure,
        reference,
        unit: "IOPS",
        measured: true,
        goal: 0.5,
        floor: Some(0.25),
    })
}

/// When a workload's queues were open: on the simulated clock, the wall clock, and the
/// thread's CPU time (what a quiet machine's wall time would be).
#[derive(Clone, Copy, Debug)]
struct Span {
    simulated_ns: u64,
    wall: Duration,
    cpu: Option<Duration>,
}

/// This thread's time on a CPU (`/proc/thread-self/schedstat`, in ns), where Linux says.
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(text.split_whitespace().next()?.parse().ok()?))
}

/// A device whose workload queues are timed; everything else passes through.
struct Clocked {
    inner: Box<dyn Device>,
    spans: Arc<Mutex<Vec<Span>>>,
}

struct ClockedIo<'a> {
    inner: Box<dyn QueuedIo + 'a>,
    spans: Arc<Mutex<Vec<Span>>>,
    sim_start: u64,
    wall_start: Instant,
    cpu_start: Option<Duration>,
}

impl Device for Clocked {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn access(&self) -> Access {
        self.inner.access()
    }
    fn admin(&mut self, cmd: Command, data: Data<'_>) -> Result<Completion, DeviceError> {
        self.inner.admin(cmd, data)
    }
    fn io(&mut self, qid: u16, cmd: Command, data: Data<'_>, metadata: Data<'_>) -> Result<Completion, DeviceError> {
        self.inner.io(qid, cmd, data, metadata)
    }
    fn io_queues(&self) -> Vec<u16> {
        self.inner.io_queues()
    }
    fn arm_async_events(&mut self, count: u16) -> Result<(), DeviceError> {
        self.inner.arm_async_events(count)
    }
    fn take_async_events(&mut self) -> Result<Vec<Completion>, DeviceError> {
        self.inner.take_async_events()
    }
    fn namespaces_changed(&mut self) -> Result<(), DeviceError> {
        self.inner.namespaces_changed()
    }
    fn command_timeout_ms(&self) -> u64 {
        self.inner.command_timeout_ms()
    }
    fn recover(&mut self) -> Result<(), DeviceError> {
        self.inner.recover()
    }
    fn controller_reset(&mut self) -> Result<(), DeviceError> {
        self.inner.controller_reset()
    }
    fn take_diagnostics(&mut self) -> Vec<String> {
        self.inner.take_diagnostics()
    }
    fn host_faults(&mut self) -> Vec<HostFault> {
        self.inner.host_faults()
    }
    fn registers(&mut self) -> Option<&mut dyn Registers> {
        self.inner.registers()
    }
    fn queued_io(&mut self, queues: &[QueueSpec]) -> Result<Box<dyn QueuedIo + '_>, DeviceError> {
        let (wall_start, cpu_start) = (Instant::now(), thread_cpu());
        let mut inner = self.inner.queued_io(queues)?;
        let sim_start = inner.now_ns();
        Ok(Box::new(ClockedIo { inner, spans: self.spans.clone(), sim_start, wall_start, cpu_start }))
    }
    fn select_arbitration(&mut self, mechanism: ArbitrationMechanism) -> Result<(), DeviceError> {
        self.inner.select_arbitration(mechanism)
    }
}

impl QueuedIo for ClockedIo<'_> {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn queue_count(&self) -> usize {
        self.inner.queue_count()
    }
    fn qid(&self, queue: usize) -> u16 {
        self.inner.qid(queue)
    }
    fn capacity(&self, queue: usize) -> usize {
        self.inner.capacity(queue)
    }
    fn outstanding(&self, queue: usize) -> usize {
        self.inner.outstanding(queue)
    }
    fn submit(
        &mut self,
        queue: usize,
        cmd: Command,
        data: Transfer<'_>,
        metadata: Transfer<'_>,
    ) -> Result<u16, DeviceError> {
        self.inner.submit(queue, cmd, data, metadata)
    }
    fn ring(&mut self, queue: usize) -> Result<(), DeviceError> {
        self.inner.ring(queue)
    }
    fn poll(&mut self, queue: usize, f: &mut dyn FnMut(Reaped<'_>)) -> Result<usize, DeviceError> {
        self.inner.poll(queue, f)
    }
    fn expired(&mut self, queue: usize) -> Option<DeviceError> {
        self.inner.expired(queue)
    }
    fn now_ns(&mut self) -> u64 {
        self.inner.now_ns()
    }
    fn idle_until(&mut self, deadline_ns: u64) -> Result<(), DeviceError> {
        self.inner.idle_until(deadline_ns)
    }
    fn simulated_clock(&self) -> bool {
        self.inner.simulated_clock()
    }
    fn close(mut self: Box<Self>) -> Result<(), DeviceError> {
        let simulated_ns = self.inner.now_ns() - self.sim_start;
        let cpu = self.cpu_start.zip(thread_cpu()).map(|(start, end)| end.saturating_sub(start));
        let span = Span { simulated_ns, wall: self.wall_start.elapsed(), cpu };
        self.spans.lock().unwrap_or_else(|p| p.into_inner()).push(span);
        self.inner.close()
    }
}

/// (b): the qos suite's `mixed` case on the default `sim` target, `rounds` times.
fn qos_row(rounds: usize) -> Result<Row, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/qos.yaml");
    let suite = nvtest::suite::load_file(&path, None).map_err(|e| e.render())?;
    let case = suite
        .cases
        .iter()
        .find(|c| c.name == "mixed")
        .ok_or_else(|| format!("{} has no case `mixed`", path.display()))?;
    let spec = TargetSpec::SimProfile(DEFAULT_SIM_PROFILE.into());
    let spans = Arc::new(Mutex::new(Vec::new()));
    let device = Clocked { inner: targets::open(&spec)?, spans: spans.clone() };
    let mut session = Session::with_device(spec.describe(), Box::new(device))?;
    session.set_claims(targets::profile_claims(&spec)?.map(Arc::new));
    let mut figure = Runs::default();
    for round in 0..rounds {
        let outcome = session.run_case(case, case_seed(SEED, &case.suite, &case.name, round as u32 + 1));
        if !matches!(outcome.verdict, Verdict::Pass) {
            return Err(format!("qos::mixed: {}\n{}", outcome.verdict.summary(), outcome.log.join("\n")));
        }
        let taken: Vec<Span> = std::mem::take(&mut *spans.lock().unwrap_or_else(|p| p.into_inner()));
        let [span] = taken[..] else {
            return Err(format!("qos::mixed opened queued I/O {} times, not once", taken.len()));
        };
        let cpu = span.cpu.map_or(String::new(), |c| {
            format!(
                ", {:.3} CPU s: {:.2} simulated s per CPU s",
                c.as_secs_f64(),
                span.simulated_ns as f64 / 1e9 / c.as_secs_f64()
            )
        });
        println!(
            "    qos::mixed round {}: workload {:.3} simulated s in {:.3} wall s{cpu} (whole case {:.3} wall s)",
            round + 1,
            span.simulated_ns as f64 / 1e9,
            span.wall.as_secs_f64(),
            outcome.duration.as_secs_f64()
        );
        figure.0.push(span.simulated_ns as f64 / 1e9 / span.wall.as_secs_f64());
    }
    Ok(Row {
        name: "(b) qos::mixed: simulated s / wall s".into(),
        figure,
        reference: Runs(vec![1.0]),
        unit: "s/s",
        measured: false,
        goal: 5.0,
        floor: None,
    })
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn main() -> ExitCode {
    let secs = Duration::from_secs(env_number("NVTEST_BENCH_SECS", 3).max(1));
    let rounds = env_number("NVTEST_BENCH_ROUNDS", 3).max(1) as usize;
    println!(
        "(a) 4 KiB random reads, queue depth {QUEUE_DEPTH}, one I/O queue, every read checked; {} s per run, \
         {rounds} rounds per side, taking turns (reference first)",
        secs.as_secs()
    );
    // `cargo bench --bench engine -- WORD` runs the rows whose name holds WORD.
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    let mut rows = Vec::new();
    let cases = [
        (Drive::Ram, "64 MiB", 16 * 1024u64),
        (Drive::Ram, "1 MiB", 256),
        (Drive::Profile, "64 MiB", 16 * 1024),
        (Drive::Profile, "1 MiB", 256),
    ];
    for (drive, label, blocks) in cases {
        if !wanted(&format!("{} {label}", drive.short())) {
            continue;
        }
        println!("  {label} namespace on {}", drive.describe());
        match iops_row(drive, label, blocks, secs, rounds) {
            Ok(row) => rows.push(row),
            Err(e) => {
                eprintln!("error: (a) {} {label}: {e}", drive.short());
                return ExitCode::FAILURE;
            }
        }
    }
    if wanted("journal") {
        println!(
            "(c) 4 KiB random writes (a flush in fifty), queue depth {QUEUE_DEPTH}, on sim:{DEFAULT_SIM_PROFILE}: the \
             power-fail journal (ledger and file, synced every {SYNC_EVERY} records or {} ms) on, next to off; {rounds} rounds",
            SYNC_AFTER.as_millis()
        );
        match journal_row(secs, rounds) {
            Ok(row) => rows.push(row),
            Err(e) => {
                eprintln!("error: (c): {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if wanted("qos") {
        println!("(b) suites/qos.yaml case `mixed` on sim:{DEFAULT_SIM_PROFILE} through a Session, {rounds} rounds");
        match qos_row(rounds) {
            Ok(row) => rows.push(row),
            Err(e) => {
                eprintln!("error: (b): {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!();
    println!("{:<38} {:>26} {:>26} {:>7}  goal", "name", "figure (median / min)", "reference (median / min)", "ratio");
    for row in &rows {
        let shown = |r: &Runs| match row.unit {
            "IOPS" => format!("{:.0} / {:.0} {}", r.median(), r.min(), row.unit),
            _ => format!("{:.2} / {:.2} {}", r.median(), r.min(), row.unit),
        };
        let goal = match row.floor {
            Some(floor) => format!(">= {}x (floor {}x)", row.goal, floor),
            None => format!(">= {}x real time", row.goal),
        };
        println!(
            "{:<38} {:>26} {:>26} {:>6.2}x  {goal}: {}",
            row.name,
            shown(&row.figure),
            shown(&row.reference),
            row.ratio(),
            row.verdict()
        );
    }
    println!();
    println!("runs in order (reference, figure per round):");
    for row in &rows {
        let pairs: Vec<String> = row
            .figure
            .0
            .iter()
            .enumerate()
            .map(|(i, f)| match row.reference.0.get(i) {
                Some(r) if row.measured => format!("{r:.0} / {f:.0}"),
                _ => format!("{f:.2}"),
            })
            .collect();
        println!("  {}: {}", row.name, pairs.join(", "));
    }
    ExitCode::SUCCESS
}
