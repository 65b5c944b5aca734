//! Runs a [`Workload`] on a [`QueuedIo`]: job `i` on queue `i`, all jobs multiplexed in
//! one loop (submit what is due, ring, reap, judge), on the target's clock.
//!
//! - **Writes** carry tagged blocks ([`crate::data::block`]); the host map learns them
//!   when they complete. Two commands that change data (Write, deallocate) never overlap
//!   while in flight: NVMe does not order commands (§6.3 "Command Ordering
//!   Requirements"), so the result of overlapping writes would be unknowable. A random
//!   draw that overlaps one in flight is drawn again; a sequential job waits.
//! - **Reads** are judged as they complete against the map. A block that a write or
//!   deallocate touched while the read was in flight may hold either what it held before
//!   or what that command put there: those blocks are judged against each possibility.
//!   A block torn between them (each byte the old data's or the new's) is allowed when
//!   the write was not atomic (larger than AWUN/NAWUN or across an atomic boundary, or a
//!   deallocate: NVMe 1.4 §6.4.1 guarantees nothing then); after an atomic write it is
//!   counted apart ([`Outcome::torn_reads`]), for the case to judge.
//! - **Rates** are open loop: command `n` of a job is due at `start + n / rate` (or by
//!   bytes), submitted as soon as it is due and the queue has room.
//! - **Stopping**: at [`Stop::At`] the engine stops at once and reports the commands in
//!   flight (the power-fail work cuts power there); their blocks are forgotten in the map
//!   (old or new: a later read accepts either). [`Stop::AfterCommands`] stops the same
//!   way once enough commands completed (a measurement by count, not by a time window),
//!   or at its bound, saying which ([`Outcome::measured`]).
//! - Latency is measured from the clock read just before the command's batch was rung
//!   to the clock read before the poll that found its completion; on a simulated clock
//!   both are exact.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;

use nvme::device::DeviceError;
use nvme::queued::{QueuedIo, Reaped, Transfer};
use nvme::spec::nvm::{self, DsmAttributes, DsmRange};
use nvme::spec::Status;

use super::figures::{new_histogram, JobFigures, Latency, OpFigures};
use super::job::{Draws, End, Job, Op, Pattern, Rate, Workload};
use super::journal::{Change, Journal, WriteRecord};
use crate::data::judge::{judge_block, judge_range, JudgeError, Mismatch};
use crate::data::Expectation;
use crate::data::{fill_blocks, BlockSize, BlockTag, HostMap, Segment};

/// The most wrong reads and failed commands kept with their details.
const KEPT: usize = 8;
/// How often (loop turns) the cancel callback is asked.
const CANCEL_EVERY: u32 = 256;
/// After the drive was removed, how far the engine lets the target's clock run between
/// polls (the driver reads CSTS every 100 ms of it).
const REMOVAL_LOOK_NS: u64 = 10_000_000;

/// When the engine stops before the jobs end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Only when every job has ended (and, with `drain`, its commands completed).
    AtEnd,
    /// At this time after the start on the target's clock, whatever is in flight.
    At(u64),
    /// By count: the first `warmup` completions (of every job together) are a warm-up,
    /// and the completions after it are counted in the jobs' figures (the jobs' own time
    /// warm-ups do not apply). Completions, not submissions after the warm-up: with the
    /// queues kept full, a queue's completions are its share of service, while counting
    /// commands submitted after an instant would lose each queue's depth to its latency.
    /// The engine stops at once, whatever is in flight, when `measured` commands were
    /// counted, or at `bound_ns` after the start on the target's clock if that comes
    /// first ([`Outcome::measured`] then falls short).
    AfterCommands { warmup: u64, measured: u64, bound_ns: u64 },
}

impl Stop {
    /// The instant (after the start, on the target's clock) the engine stops at latest.
    fn at(self) -> Option<u64> {
        match self {
            Stop::AtEnd => None,
            Stop::At(after) => Some(after),
            Stop::AfterCommands { bound_ns, .. } => Some(bound_ns),
        }
    }
}

/// A command in flight when the engine stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlight {
    pub job: String,
    pub op: Op,
    pub nsid: u32,
    pub first_lba: u64,
    pub blocks: u64,
    pub generation: u64,
    pub submitted_ns: u64,
}

/// A read whose data was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrongRead {
    pub job: String,
    /// The command, as the log names it.
    pub what: String,
    pub mismatch: Mismatch,
    /// Whether a write or deallocate of those blocks was in flight during the read (the
    /// older data was then accepted too).
    pub raced: bool,
}

/// A command that completed with an error status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedCommand {
    pub job: String,
    pub what: String,
    pub status: Status,
}

/// What a workload did.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub jobs: Vec<JobFigures>,
    /// Reads judged wrong: the first few, and how many in all.
    pub wrong_reads: Vec<WrongRead>,
    pub wrong_read_count: u64,
    /// Reads that came back torn (a mix of old and new data) while an atomic write of
    /// their blocks (NVMe 1.4 §6.4.1) was in flight: the first few, and how many.
    pub torn_reads: Vec<WrongRead>,
    pub torn_read_count: u64,
    /// Reads that came back torn while a write beyond the atomic write unit (or a
    /// deallocate) raced them: allowed, counted.
    pub torn_reads_allowed: u64,
    /// Commands that completed with an error status: the first few, and how many.
    pub failed: Vec<FailedCommand>,
    pub failed_count: u64,
    /// Commands in flight when the engine stopped early ([`Stop::At`]).
    pub in_flight_at_stop: Vec<InFlight>,
    pub stopped_early: bool,
    /// From the start to the end of the run on the target's clock.
    pub elapsed_ns: u64,
    pub simulated_clock: bool,
    /// Reads judged, and blocks in them.
    pub reads_judged: u64,
    pub blocks_judged: u64,
    /// The longest any command took (warm-up included), and that command.
    pub longest: Option<Longest>,
    /// When the [`During`] action ran: from and to, after the start on the target's clock.
    pub during_ns: Option<(u64, u64)>,
    /// Commands counted in the jobs' figures (completed, after the warm-up), and, under
    /// [`Stop::AfterCommands`], when its warm-up count was reached (after the start on
    /// the target's clock).
    pub measured: u64,
    pub warmup_done_ns: Option<u64>,
    /// After a [`During`] action that removed the drive: from its end to the driver
    /// finding the controller gone, on the target's clock.
    pub removal_seen_ns: Option<u64>,
}

/// The command that took longest, from its batch's doorbell to its completion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Longest {
    pub latency_ns: u64,
    pub job: String,
    pub what: String,
    pub submitted_ns: u64,
}

/// Something done once while the jobs keep their commands queued: `after_ns` into the
/// run, `action` gets the target's queues (a Firmware Commit under load, NVMe 1.4 §5.12,
/// sent with [`QueuedIo::admin`]). The jobs' commands already queued stay queued; the
/// engine submits, reaps and judges again as soon as the action returns.
pub struct During<'a> {
    pub after_ns: u64,
    pub action: &'a mut dyn FnMut(&mut dyn QueuedIo) -> Result<(), EngineError>,
    /// The action takes the drive away ([`QueuedIo::pull_drive`]): nothing more is
    /// submitted, and the run ends when the driver finds the controller gone
    /// ([`DeviceError::Removed`]), the commands then in flight reported as at a stop
    /// ([`Outcome::in_flight_at_stop`]) and the time it took in [`Outcome::removal_seen_ns`].
    pub removes_drive: bool,
}

/// Why the engine could not run the workload to an outcome.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The target failed under the workload (a command timed out, the transport broke).
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The workload cannot run as given (nvtest's or the suite's mistake).
    #[error("{0}")]
    Setup(String),
    /// Stopped from outside (the case ran past --case-timeout, the run was interrupted).
    #[error("{0}")]
    Cancelled(String),
}

/// Progress for a display, handed over every few thousand completions.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub elapsed_ns: u64,
    pub completed: u64,
}

#[derive(Debug)]
struct Pending {
    /// The job that submitted it.
    job: usize,
    op: Op,
    nsid: u32,
    lba: u64,
    blocks: u64,
    generation: u64,
    fua: bool,
    submitted_ns: u64,
    /// Other contents blocks of a read may legally have (a write raced it).
    alternatives: Vec<Segment>,
    /// Blocks of a read (first, count) that a non-atomic change raced: they may come
    /// back torn between the contents above.
    tearable: Vec<(u64, u64)>,
    /// A Write within the namespace's atomic write unit (§6.4.1).
    atomic: bool,
    /// What a deallocate leaves in its blocks (from the map when it was submitted).
    new_states: Vec<Segment>,
}

impl Pending {
    fn record(&self) -> WriteRecord {
        WriteRecord {
            nsid: self.nsid,
            first_lba: self.lba,
            blocks: self.blocks,
            generation: self.generation,
            change: match self.op {
                Op::Deallocate => Change::Deallocate,
                Op::Flush => Change::Flush,
                _ => Change::Write,
            },
            fua: self.fua,
            submitted_ns: self.submitted_ns,
        }
    }

    fn overlap(&self, nsid: u32, first: u64, count: u64) -> Option<(u64, u64)> {
        overlap((self.nsid, self.lba, self.blocks), (nsid, first, count))
    }

    fn what(&self) -> String {
        match self.op {
            Op::Read => format!("Read NSID {} SLBA {:#x} NLB {}", self.nsid, self.lba, self.blocks - 1),
            Op::Write => format!(
                "Write NSID {} SLBA {:#x} NLB {} (generation {}{})",
                self.nsid,
                self.lba,
                self.blocks - 1,
                self.generation,
                if self.fua { ", FUA" } else { "" }
            ),
            Op::Deallocate => {
                format!(
                    "Dataset Management (deallocate) NSID {} SLBA {:#x} {} blocks",
                    self.nsid, self.lba, self.blocks
                )
            }
            Op::Flush => format!("Flush NSID {}", self.nsid),
        }
    }
}

fn overlap(a: (u32, u64, u64), b: (u32, u64, u64)) -> Option<(u64, u64)> {
    if a.0 != b.0 {
        return None;
    }
    let first = a.1.max(b.1);
    let end = (a.1 + a.2).min(b.1 + b.2);
    if first < end {
        Some((first, end - first))
    } else {
        None
    }
}

/// Per-operation tallies of one job.
struct Tally {
    commands: u64,
    bytes: u64,
    histogram: Histogram<u64>,
    min_ns: u64,
    max_ns: u64,
}

struct JobState {
    draws: Draws,
    submitted: u64,
    /// Commands or bytes submitted, for the rate.
    units: u64,
    next_sequential: u64,
    warmup_end_ns: u64,
    end_ns: Option<u64>,
    ended: bool,
    last_counted_ns: u64,
    tallies: BTreeMap<Op, Tally>,
    /// Data of the next write, reused.
    scratch: Vec<u8>,
}

/// Everything the loop mutates besides the target.
struct Run<'m> {
    jobs: Vec<Job>,
    states: Vec<JobState>,
    /// The queue of each job ([`Workload::queue_of`]).
    queue_of: Vec<usize>,
    /// Commands of each job submitted and not completed: a job keeps at most its depth
    /// in flight, whichever queue it shares.
    in_flight: Vec<usize>,
    /// Per queue, per CID.
    pending: Vec<Vec<Option<Pending>>>,
    /// Data-changing commands in flight: per NSID, first LBA → (end, queue, CID).
    changing: BTreeMap<u32, BTreeMap<u64, (u64, usize, u16)>>,
    map: &'m mut HostMap,
    seed: u64,
    outcome: Outcome,
    completed: u64,
    /// The completions that end the count warm-up, until they came ([`Stop::AfterCommands`]).
    warmup_commands: Option<u64>,
    /// Counting completions after the count warm-up rather than commands submitted after
    /// the jobs' time warm-ups ([`Stop::AfterCommands`]).
    by_completion: bool,
    /// The run's start on the target's clock.
    start: u64,
}

/// Runs `work` on `io` (each job on its queue, [`Workload::queue_of`]), judging against and updating `map`,
/// telling `journal` of every write. `cancel` is asked now and then whether to stop
/// (its reason ends the run as [`EngineError::Cancelled`]).
pub fn run(
    io: &mut dyn QueuedIo,
    work: &Workload,
    map: &mut HostMap,
    journal: &mut dyn Journal,
    stop: Stop,
    cancel: &dyn Fn() -> Option<String>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Outcome, EngineError> {
    run_during(io, work, map, journal, stop, cancel, progress, None)
}

/// [`run`], doing `during` once at its time while the jobs run.
#[allow(clippy::too_many_arguments)]
pub fn run_during(
    io: &mut dyn QueuedIo,
    work: &Workload,
    map: &mut HostMap,
    journal: &mut dyn Journal,
    stop: Stop,
    cancel: &dyn Fn() -> Option<String>,
    progress: &mut dyn FnMut(Progress),
    mut during: Option<During<'_>>,
) -> Result<Outcome, EngineError> {
    check(io, work)?;
    let start = io.now_ns();
    let mut run = Run::new(io, work, map, start);
    if let Stop::AfterCommands { warmup, .. } = stop {
        run.warmup_commands = Some(warmup);
        run.end_warmup(start);
    }
    let mut turns = 0u32;
    // When the drive was taken away (a [`During`] action that removes it).
    let mut removed_at: Option<u64> = None;
    let result = loop {
        let now = io.now_ns();
        if let Stop::AfterCommands { measured, .. } = stop {
            if run.outcome.measured >= measured {
                run.outcome.stopped_early = true;
                break Ok(());
            }
        }
        if let Some(after) = stop.at() {
            if now >= start.saturating_add(after) {
                run.outcome.stopped_early = true;
                break Ok(());
            }
        }
        turns = turns.wrapping_add(1);
        if turns.is_multiple_of(CANCEL_EVERY) {
            if let Some(reason) = cancel() {
                break Err(EngineError::Cancelled(reason));
            }
        }
        // After a removal the host, not told, goes on only while it has nothing in
        // flight: a command it sends then is what it finds the drive gone with (QEMU
        // completes everything in flight as the function leaves).
        let idle_host = removed_at.is_some() && (0..run.pending.len()).all(|q| io.outstanding(q) == 0);
        if removed_at.is_none() || idle_host {
            if let Err(e) = run.submit_due(io, now, journal) {
                break Err(e);
            }
        }
        if let Some(d) = during.take_if(|d| now >= start.saturating_add(d.after_ns)) {
            let from = io.now_ns();
            if let Err(e) = (d.action)(io) {
                break Err(e);
            }
            let to = io.now_ns();
            run.outcome.during_ns = Some((from - start, to - start));
            if d.removes_drive {
                removed_at = Some(to);
            }
        }
        let now = io.now_ns();
        let mut reaped = 0;
        let mut failed = None;
        for q in 0..run.pending.len() {
            let mut handle = |r: Reaped<'_>| run.complete(q, r, now, journal);
            match io.poll(q, &mut handle) {
                Ok(n) => reaped += n,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
            if let Some(e) = io.expired(q) {
                failed = Some(e);
                break;
            }
        }
        match (failed, removed_at) {
            (Some(DeviceError::Removed { .. }), Some(at)) => {
                run.outcome.stopped_early = true;
                run.outcome.removal_seen_ns = Some(io.now_ns().saturating_sub(at));
                break Ok(());
            }
            (Some(e), _) => break Err(e.into()),
            (None, _) => {}
        }
        if reaped > 0 && run.completed / 4096 != (run.completed - reaped as u64) / 4096 {
            progress(Progress { elapsed_ns: now - start, completed: run.completed });
        }
        let outstanding: usize = (0..run.pending.len()).map(|q| io.outstanding(q)).sum();
        if run.states.iter().all(|s| s.ended) && (outstanding == 0 || !work.drain) {
            break Ok(());
        }
        if reaped == 0 {
            let mut deadline = run.next_due(now);
            if let Some(after) = stop.at() {
                deadline = deadline.min(start.saturating_add(after));
            }
            if let Some(d) = &during {
                deadline = deadline.min(start.saturating_add(d.after_ns));
            }
            if removed_at.is_some() {
                // Nothing will complete: the driver's look at CSTS is what ends the run.
                deadline = deadline.min(now.saturating_add(REMOVAL_LOOK_NS));
            }
            if let Err(e) = io.idle_until(deadline) {
                break Err(e.into());
            }
        }
    };
    let end = io.now_ns();
    result?;
    Ok(run.finish(start, end))
}

fn check(io: &dyn QueuedIo, work: &Workload) -> Result<(), EngineError> {
    if !work.queues.is_empty() && work.queues.len() != work.jobs.len() {
        return Err(EngineError::Setup(format!(
            "{} jobs but a queue given for {}",
            work.jobs.len(),
            work.queues.len()
        )));
    }
    let queues = work.queue_count();
    if io.queue_count() != queues {
        return Err(EngineError::Setup(format!(
            "{} jobs need {queues} queues; the target gave {}",
            work.jobs.len(),
            io.queue_count()
        )));
    }
    for q in 0..queues {
        let jobs: Vec<&Job> = (0..work.jobs.len()).filter(|&j| work.queue_of(j) == q).map(|j| &work.jobs[j]).collect();
        let depth: usize = jobs.iter().map(|j| j.queue_depth as usize).sum();
        if jobs.is_empty() {
            return Err(EngineError::Setup(format!("queue {q} has no job")));
        }
        if io.capacity(q) < depth {
            let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
            return Err(EngineError::Setup(format!(
                "job {}: queue depth {depth} but its queue holds {}",
                names.join(" + "),
                io.capacity(q)
            )));
        }
    }
    for job in &work.jobs {
        let ns = &job.namespace;
        if job.blocks == 0 || job.first_lba.checked_add(job.blocks).is_none_or(|end| end > ns.nsze) {
            return Err(EngineError::Setup(format!(
                "job {}: LBAs {:#x} + {} do not fit NSID {} (NSZE {:#x})",
                job.name, job.first_lba, job.blocks, ns.nsid, ns.nsze
            )));
        }
        if job.blocks_per_command.is_empty() || job.blocks_per_command.iter().any(|&n| n == 0 || n as u64 > job.blocks)
        {
            return Err(EngineError::Setup(format!(
                "job {}: blocks per command {:?} must be 1 ..= the {} blocks of its range",
                job.name, job.blocks_per_command, job.blocks
            )));
        }
        if job.mix.total() != 100 {
            return Err(EngineError::Setup(format!(
                "job {}: the mix adds up to {}%, not 100%",
                job.name,
                job.mix.total()
            )));
        }
        if job.queue_depth == 0 {
            return Err(EngineError::Setup(format!("job {}: queue depth 0", job.name)));
        }
        BlockSize::new(ns.block_size as u32).map_err(|e| EngineError::Setup(format!("job {}: {e}", job.name)))?;
    }
    Ok(())
}

impl<'m> Run<'m> {
    fn new(io: &dyn QueuedIo, work: &Workload, map: &'m mut HostMap, start: u64) -> Self {
        let states = work
            .jobs
            .iter()
            .enumerate()
            .map(|(i, job)| JobState {
                draws: Draws::new(work.seed ^ (i as u64).wrapping_mul(0x9e37_79b9)),
                submitted: 0,
                units: 0,
                next_sequential: job.first_lba,
                warmup_end_ns: start.saturating_add(job.warmup.as_nanos() as u64),
                end_ns: match job.end {
                    End::Time(d) => Some(start.saturating_add(d.as_nanos() as u64)),
                    End::Commands(_) => None,
                },
                ended: false,
                last_counted_ns: 0,
                tallies: BTreeMap::new(),
                scratch: Vec::new(),
            })
            .collect();
        let pending = (0..work.queue_count()).map(|q| (0..io.capacity(q) + 1).map(|_| None).collect()).collect();
        Run {
            jobs: work.jobs.clone(),
            states,
            queue_of: (0..work.jobs.len()).map(|j| work.queue_of(j)).collect(),
            in_flight: vec![0; work.jobs.len()],
            pending,
            changing: BTreeMap::new(),
            map,
            seed: work.seed,
            outcome: Outcome {
                jobs: Vec::new(),
                wrong_reads: Vec::new(),
                wrong_read_count: 0,
                torn_reads: Vec::new(),
                torn_read_count: 0,
                torn_reads_allowed: 0,
                failed: Vec::new(),
                failed_count: 0,
                in_flight_at_stop: Vec::new(),
                stopped_early: false,
                elapsed_ns: 0,
                simulated_clock: io.simulated_clock(),
                reads_judged: 0,
                blocks_judged: 0,
                longest: None,
                during_ns: None,
                removal_seen_ns: None,
                measured: 0,
                warmup_done_ns: None,
            },
            completed: 0,
            warmup_commands: None,
            by_completion: false,
            start,
        }
    }

    /// Under a count warm-up: once `completed` reaches it (at `now`), the completions
    /// from then on are counted; before, none is.
    fn end_warmup(&mut self, now: u64) {
        let Some(warmup) = self.warmup_commands else {
            return;
        };
        self.by_completion = true;
        let done = self.completed >= warmup;
        for state in &mut self.states {
            state.warmup_end_ns = if done { now } else { u64::MAX };
        }
        if done {
            self.warmup_commands = None;
            self.outcome.warmup_done_ns = Some(now.saturating_sub(self.start));
        }
    }

    /// When job `j`'s next command is due by its rate (`None`: no rate, due now).
    fn due(&self, j: usize, start_of: u64) -> Option<u64> {
        let job = &self.jobs[j];
        let units = self.states[j].units as u128;
        let per_second = match job.rate? {
            Rate::Iops(n) => n,
            Rate::BytesPerSecond(n) => n,
        } as u128;
        Some(start_of.saturating_add((units * 1_000_000_000 / per_second.max(1)) as u64))
    }

    /// The earliest time something is due: a rate-limited job's next command or a job's
    /// end; `u64::MAX` when only completions can move things on.
    fn next_due(&self, now: u64) -> u64 {
        let mut at = u64::MAX;
        for (j, s) in self.states.iter().enumerate() {
            if s.ended {
                continue;
            }
            // An end already past is no deadline: the job ends at its next free slot,
            // which only a completion brings.
            if let Some(end) = s.end_ns.filter(|&end| end > now) {
                at = at.min(end);
            }
            if self.in_flight[j] < self.jobs[j].queue_depth as usize {
                if let Some(due) = self.due(j, self.start_ns(j)) {
                    at = at.min(due.max(now));
                }
            }
        }
        at
    }

    /// When job `j` started (every job starts with the run).
    fn start_ns(&self, _j: usize) -> u64 {
        self.start
    }

    fn submit_due(&mut self, io: &mut dyn QueuedIo, now: u64, journal: &mut dyn Journal) -> Result<(), EngineError> {
        for j in 0..self.jobs.len() {
            let mut rung = false;
            while !self.states[j].ended && self.in_flight[j] < self.jobs[j].queue_depth as usize {
                let ended = match (self.jobs[j].end, self.states[j].end_ns) {
                    (End::Commands(n), _) => self.states[j].submitted >= n,
                    (_, Some(end)) => now >= end,
                    _ => false,
                };
                if ended {
                    self.states[j].ended = true;
                    break;
                }
                if self.due(j, self.start_ns(j)).is_some_and(|due| due > now) {
                    break;
                }
                if !self.submit_one(io, j, now, journal)? {
                    break;
                }
                rung = true;
            }
            if rung {
                io.ring(self.queue_of[j])?;
            }
        }
        Ok(())
    }

    /// Draws and submits job `j`'s next command; `false` when it has to wait (a write
    /// whose blocks a write in flight holds).
    fn submit_one(
        &mut self,
        io: &mut dyn QueuedIo,
        j: usize,
        now: u64,
        journal: &mut dyn Journal,
    ) -> Result<bool, EngineError> {
        let q = self.queue_of[j];
        let job = &self.jobs[j];
        let (ns, rate) = (job.namespace, job.rate);
        let state = &mut self.states[j];
        let op = job.mix.pick(state.draws.below(100) as u32);
        let n = job.blocks_per_command[state.draws.below(job.blocks_per_command.len() as u64) as usize] as u64;
        let fua = op == Op::Write && job.fua_percent > 0 && state.draws.below(100) < job.fua_percent as u64;
        let mut lba = 0;
        let mut found = false;
        for _ in 0..8 {
            lba = match job.pattern {
                Pattern::Random => job.first_lba + state.draws.below(job.blocks / n) * n,
                Pattern::Sequential => {
                    if state.next_sequential + n > job.first_lba + job.blocks {
                        job.first_lba
                    } else {
                        state.next_sequential
                    }
                }
            };
            if op == Op::Flush || !op.changes_data() || !overlaps(&self.changing, ns.nsid, lba, n) {
                found = true;
                break;
            }
            if job.pattern == Pattern::Sequential {
                break;
            }
        }
        if !found {
            return Ok(false);
        }
        if job.pattern == Pattern::Sequential {
            state.next_sequential = lba + n;
        }
        let bytes = n * ns.block_size;
        let mut pending = Pending {
            job: j,
            op,
            nsid: ns.nsid,
            lba,
            blocks: if op == Op::Flush { 0 } else { n },
            generation: 0,
            fua,
            submitted_ns: now,
            alternatives: Vec::new(),
            tearable: Vec::new(),
            atomic: op == Op::Write && ns.atomic.covers(lba, n),
            new_states: Vec::new(),
        };
        let cid = match op {
            Op::Read => {
                // Blocks a data-changing command in flight holds may come back as it leaves them.
                for (first, count, q, cid) in in_flight_over(&self.changing, ns.nsid, lba, n) {
                    if let Some(Some(w)) = self.pending.get(q).and_then(|p| p.get(cid as usize)) {
                        pending.alternatives.extend(leaves(w, self.seed, first, count));
                        if !w.atomic {
                            pending.tearable.push((first, count));
                        }
                    }
                }
                io.submit(
                    q,
                    nvm::read(ns.nsid, lba, (n - 1) as u16),
                    Transfer::FromDevice(bytes as usize),
                    Transfer::None,
                )?
            }
            Op::Write => {
                let generation = self.map.next_generation();
                pending.generation = generation;
                let block_size = BlockSize::new(ns.block_size as u32).map_err(|e| EngineError::Setup(e.to_string()))?;
                let tag = BlockTag { nsid: ns.nsid, lba, generation, seed: self.seed, block_size };
                state.scratch.resize(bytes as usize, 0);
                fill_blocks(&mut state.scratch, &tag).map_err(|e| EngineError::Setup(e.to_string()))?;
                let cmd = nvm::write(ns.nsid, lba, (n - 1) as u16, fua);
                let cid = io.submit(q, cmd, Transfer::ToDevice(&state.scratch), Transfer::None)?;
                self.raced_by(&pending, Expectation::Written { generation, seed: self.seed });
                cid
            }
            Op::Deallocate => {
                pending.new_states = match self.map.namespace(ns.nsid) {
                    Some(m) => m.segments(lba, n).map(|s| Segment { state: s.state.deallocated(), ..s }).collect(),
                    None => vec![Segment { first: lba, count: n, state: Expectation::Unknown.deallocated() }],
                };
                let range = DsmRange::encode_list(&[DsmRange::new(lba, n as u32)]);
                let cmd = nvm::dataset_management(ns.nsid, 1, DsmAttributes::new().with_ad(true))
                    .map_err(|e| EngineError::Setup(e.to_string()))?;
                let cid = io.submit(q, cmd, Transfer::ToDevice(&range), Transfer::None)?;
                let states = pending.new_states.clone();
                for s in states {
                    self.raced_by_segment(&pending, s);
                }
                cid
            }
            Op::Flush => io.submit(q, nvm::flush(ns.nsid), Transfer::None, Transfer::None)?,
        };
        let state = &mut self.states[j];
        state.submitted += 1;
        state.units += match rate {
            Some(Rate::BytesPerSecond(_)) => bytes,
            _ => 1,
        };
        if op == Op::Flush {
            journal.submitted(&pending.record());
        }
        if op.changes_data() {
            journal.submitted(&pending.record());
            self.changing.entry(ns.nsid).or_default().insert(lba, (lba + n, q, cid));
        }
        let slot = self.pending[q].get_mut(cid as usize).ok_or_else(|| {
            EngineError::Device(DeviceError::Driver(format!("queue {q} handed out CID {cid} beyond its capacity")))
        })?;
        *slot = Some(pending);
        self.in_flight[j] += 1;
        Ok(true)
    }

    /// A data-changing command was submitted: reads in flight over its blocks may see
    /// `state` there.
    fn raced_by(&mut self, cmd: &Pending, state: Expectation) {
        self.raced_by_segment(cmd, Segment { first: cmd.lba, count: cmd.blocks, state });
    }

    fn raced_by_segment(&mut self, cmd: &Pending, s: Segment) {
        for slots in &mut self.pending {
            for read in slots.iter_mut().flatten().filter(|p| p.op == Op::Read) {
                if let Some((first, count)) = read.overlap(cmd.nsid, s.first, s.count) {
                    read.alternatives.push(Segment { first, count, state: s.state });
                    if !cmd.atomic {
                        read.tearable.push((first, count));
                    }
                }
            }
        }
    }

    fn complete(&mut self, q: usize, r: Reaped<'_>, now: u64, journal: &mut dyn Journal) {
        let cid = r.completion.cid as usize;
        let Some(p) = self.pending.get_mut(q).and_then(|s| s.get_mut(cid)).and_then(Option::take) else {
            return;
        };
        let j = p.job;
        self.in_flight[j] = self.in_flight[j].saturating_sub(1);
        self.completed += 1;
        let status = r.completion.status();
        let block_size = self.jobs[j].namespace.block_size;
        if !status.is_success() {
            self.outcome.failed_count += 1;
            if self.outcome.failed.len() < KEPT {
                self.outcome.failed.push(FailedCommand { job: self.jobs[j].name.clone(), what: p.what(), status });
            }
        }
        match p.op {
            Op::Read if status.is_success() => self.judge_read(j, &p, r.data),
            Op::Write | Op::Deallocate => {
                self.before_change(&p);
                if let Some(m) = self.changing.get_mut(&p.nsid) {
                    m.remove(&p.lba);
                }
                match (p.op, status.is_success()) {
                    (Op::Write, true) => self.map.record_write(p.nsid, p.lba, p.blocks, p.generation, self.seed),
                    // A failed write leaves its blocks unknown; a deallocate, failed or not,
                    // leaves them as before or deallocated, which the map's deallocated
                    // expectation accepts alike.
                    (Op::Write, false) => self.map.forget(p.nsid, p.lba, p.blocks),
                    _ => self.map.record_deallocate(p.nsid, p.lba, p.blocks),
                }
                journal.completed(&p.record(), now, status.is_success());
            }
            Op::Flush => journal.completed(&p.record(), now, status.is_success()),
            _ => {}
        }
        let latency = now.saturating_sub(p.submitted_ns);
        if self.outcome.longest.as_ref().is_none_or(|l| latency > l.latency_ns) {
            self.outcome.longest = Some(Longest {
                latency_ns: latency,
                job: self.jobs[j].name.clone(),
                what: p.what(),
                submitted_ns: p.submitted_ns - self.start,
            });
        }
        let state = &mut self.states[j];
        let counted =
            if self.by_completion { self.warmup_commands.is_none() } else { p.submitted_ns >= state.warmup_end_ns };
        if counted {
            let tally = state.tallies.entry(p.op).or_insert_with(|| Tally {
                commands: 0,
                bytes: 0,
                histogram: new_histogram(),
                min_ns: u64::MAX,
                max_ns: 0,
            });
            tally.commands += 1;
            tally.bytes += p.blocks * block_size;
            let latency = now.saturating_sub(p.submitted_ns).clamp(1, 3_600_000_000_000);
            // Recording cannot fail within the bounds (1 ns .. 1 h); longer is clamped.
            let _ = tally.histogram.record(latency);
            tally.min_ns = tally.min_ns.min(latency);
            tally.max_ns = tally.max_ns.max(latency);
            state.last_counted_ns = state.last_counted_ns.max(now);
            self.outcome.measured += 1;
        }
        if self.warmup_commands.is_some() {
            self.end_warmup(now);
        }
    }

    /// Before the map takes a completed write or deallocate: reads in flight over its
    /// blocks may still have been served the old contents.
    fn before_change(&mut self, cmd: &Pending) {
        let Some(ns) = self.map.namespace(cmd.nsid) else {
            return;
        };
        for slots in &mut self.pending {
            for read in slots.iter_mut().flatten().filter(|p| p.op == Op::Read) {
                if let Some((first, count)) = read.overlap(cmd.nsid, cmd.lba, cmd.blocks) {
                    read.alternatives.extend(ns.segments(first, count));
                }
            }
        }
    }

    /// Judges a read of job `j`.
    fn judge_read(&mut self, j: usize, p: &Pending, data: &[u8]) {
        let ns = self.jobs[j].namespace;
        let Ok(size) = BlockSize::new(ns.block_size as u32) else {
            return;
        };
        self.outcome.reads_judged += 1;
        self.outcome.blocks_judged += p.blocks;
        let raced = match judge_range(data, ns.nsid, p.lba, size, self.map, ns.dealloc_read) {
            Ok(_) => return,
            Err(JudgeError::Layout(_)) => return,
            Err(JudgeError::Mismatch(m)) if p.alternatives.is_empty() => Raced { wrong: Some(*m), ..Raced::default() },
            Err(JudgeError::Mismatch(_)) => self.judge_raced(p, data, size),
        };
        self.outcome.torn_reads_allowed += u64::from(raced.torn_allowed > 0);
        if let Some(mismatch) = raced.torn_atomic.filter(|_| raced.wrong.is_none()) {
            self.outcome.torn_read_count += 1;
            if self.outcome.torn_reads.len() < KEPT {
                self.outcome.torn_reads.push(WrongRead {
                    job: self.jobs[j].name.clone(),
                    what: p.what(),
                    mismatch,
                    raced: true,
                });
            }
        }
        if let Some(mismatch) = raced.wrong {
            self.outcome.wrong_read_count += 1;
            if self.outcome.wrong_reads.len() < KEPT {
                self.outcome.wrong_reads.push(WrongRead {
                    job: self.jobs[j].name.clone(),
                    what: p.what(),
                    mismatch,
                    raced: !p.alternatives.is_empty(),
                });
            }
        }
    }

    /// Judges a raced read block by block: each block may hold what the map says or any
    /// alternative over it, or, torn, each byte from one of them. The first block that
    /// holds none of them is wrong; a torn block is allowed where a non-atomic change raced
    /// it, else noted as torn under an atomic write.
    fn judge_raced(&self, p: &Pending, data: &[u8], size: BlockSize) -> Raced {
        let Some(dealloc) = self.jobs.iter().find(|j| j.namespace.nsid == p.nsid).map(|j| j.namespace.dealloc_read)
        else {
            return Raced::default();
        };
        let mut raced = Raced::default();
        let mut wrong = 0;
        let mut torn = 0;
        for (i, block) in data.chunks_exact(size.bytes()).enumerate() {
            let lba = p.lba + i as u64;
            let now = self.map.state_at(p.nsid, lba);
            let Err(JudgeError::Mismatch(m)) = judge_block(block, p.nsid, lba, now, dealloc) else {
                continue;
            };
            let over = |s: &&Segment| (s.first..s.first + s.count).contains(&lba);
            if p.alternatives.iter().filter(over).any(|s| judge_block(block, p.nsid, lba, s.state, dealloc).is_ok()) {
                continue;
            }
            let states: Vec<Expectation> =
                std::iter::once(now).chain(p.alternatives.iter().filter(over).map(|s| s.state)).collect();
            if !torn_between(block, p.nsid, lba, size, &states) {
                wrong += 1;
                raced.wrong.get_or_insert(*m);
            } else if p.tearable.iter().any(|&(first, count)| (first..first + count).contains(&lba)) {
                raced.torn_allowed += 1;
            } else {
                torn += 1;
                raced.torn_atomic.get_or_insert(*m);
            }
        }
        raced.wrong = raced.wrong.map(|m| Mismatch { wrong_blocks: wrong, blocks_judged: p.blocks, ..m });
        raced.torn_atomic = raced.torn_atomic.map(|m| Mismatch { wrong_blocks: torn, blocks_judged: p.blocks, ..m });
        raced
    }

    fn finish(mut self, start: u64, end: u64) -> Outcome {
        // What was in flight: reported, and its blocks forgotten (old or new, unknown).
        for slots in &mut self.pending {
            for p in slots.iter_mut().filter_map(Option::take) {
                if p.op.changes_data() {
                    match p.op {
                        Op::Write => self.map.forget(p.nsid, p.lba, p.blocks),
                        _ => self.map.record_deallocate(p.nsid, p.lba, p.blocks),
                    }
                }
                self.outcome.in_flight_at_stop.push(InFlight {
                    job: self.jobs[p.job].name.clone(),
                    op: p.op,
                    nsid: p.nsid,
                    first_lba: p.lba,
                    blocks: p.blocks,
                    generation: p.generation,
                    submitted_ns: p.submitted_ns,
                });
            }
        }
        self.outcome.elapsed_ns = end.saturating_sub(start);
        for (job, state) in self.jobs.iter().zip(&self.states) {
            let window = state.last_counted_ns.saturating_sub(state.warmup_end_ns);
            let seconds = window as f64 / 1e9;
            let ops = state
                .tallies
                .iter()
                .map(|(&op, t)| OpFigures {
                    op,
                    commands: t.commands,
                    bytes: t.bytes,
                    iops: if seconds > 0.0 { t.commands as f64 / seconds } else { 0.0 },
                    mb_per_s: if seconds > 0.0 { t.bytes as f64 / seconds / 1e6 } else { 0.0 },
                    latency: Latency::of(&t.histogram, t.min_ns, t.max_ns),
                    histogram: t.histogram.clone(),
                })
                .collect();
            self.outcome.jobs.push(JobFigures {
                job: job.name.clone(),
                window_ns: window,
                simulated_clock: self.outcome.simulated_clock,
                ops,
                extra: Vec::new(),
            });
        }
        self.outcome
    }
}

/// What a data-changing command in flight leaves in `first .. first + count`.
fn leaves(cmd: &Pending, seed: u64, first: u64, count: u64) -> Vec<Segment> {
    match cmd.op {
        Op::Write => vec![Segment { first, count, state: Expectation::Written { generation: cmd.generation, seed } }],
        _ => cmd
            .new_states
            .iter()
            .filter_map(|s| {
                let (f, c) = overlap((0, s.first, s.count), (0, first, count))?;
                Some(Segment { first: f, count: c, state: s.state })
            })
            .collect(),
    }
}

/// How a raced read's blocks came back: the first wrong one (with how many), the first
/// torn under an atomic write (with how many), and how many torn where tearing is allowed.
#[derive(Default)]
struct Raced {
    wrong: Option<Mismatch>,
    torn_atomic: Option<Mismatch>,
    torn_allowed: u64,
}

/// Whether `block` is a mix of two or more of the written contents `states` allows, each
/// byte one of theirs (a read served while a write was copying its data in).
fn torn_between(block: &[u8], nsid: u32, lba: u64, block_size: BlockSize, states: &[Expectation]) -> bool {
    let written: Vec<Vec<u8>> = states
        .iter()
        .filter_map(|s| match *s {
            Expectation::Written { generation, seed } => {
                let mut expected = vec![0u8; block.len()];
                let tag = BlockTag { nsid, lba, generation, seed, block_size };
                fill_blocks(&mut expected, &tag).ok().map(|()| expected)
            }
            _ => None,
        })
        .collect();
    written.len() >= 2 && block.iter().enumerate().all(|(i, b)| written.iter().any(|w| w[i] == *b))
}

fn overlaps(changing: &BTreeMap<u32, BTreeMap<u64, (u64, usize, u16)>>, nsid: u32, first: u64, count: u64) -> bool {
    !in_flight_over(changing, nsid, first, count).is_empty()
}

/// The data-changing commands in flight over `first .. first + count` of `nsid`, as
/// `(overlap first, overlap count, queue, CID)`. They never overlap each other, so
/// walking back from the range's end stops at the first that ends before it.
fn in_flight_over(
    changing: &BTreeMap<u32, BTreeMap<u64, (u64, usize, u16)>>,
    nsid: u32,
    first: u64,
    count: u64,
) -> Vec<(u64, u64, usize, u16)> {
    let Some(m) = changing.get(&nsid) else {
        return Vec::new();
    };
    let end = first + count;
    let mut out = Vec::new();
    for (&start, &(stop, q, cid)) in m.range(..end).rev() {
        if stop <= first {
            break;
        }
        let f = start.max(first);
        out.push((f, stop.min(end) - f, q, cid));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nvme::spec::queue::QueuePriority;

    use super::*;
    use crate::data::judge::DeallocatedRead;
    use crate::load::fake::FakeIo;
    use crate::load::job::{Mix, Namespace};
    use crate::load::journal::MemoryJournal;

    const NS: Namespace = Namespace {
        nsid: 1,
        block_size: 512,
        nsze: 4096,
        dealloc_read: DeallocatedRead::Zeroes,
        atomic: nvme::spec::identify::AtomicWrite::ONE_BLOCK,
    };

    fn job(name: &str, mix: Mix, pattern: Pattern, blocks: u64, end: End) -> Job {
        Job {
            name: name.into(),
            namespace: NS,
            first_lba: 0,
            blocks,
            mix,
            pattern,
            blocks_per_command: vec![1, 4, 8],
            queue_depth: 16,
            priority: QueuePriority::Medium,
            port: 0,
            fua_percent: 10,
            rate: None,
            end,
            warmup: Duration::ZERO,
        }
    }

    fn run_on(io: &mut FakeIo, work: &Workload, map: &mut HostMap, journal: &mut dyn Journal) -> Outcome {
        run(io, work, map, journal, Stop::AtEnd, &|| None, &mut |_| {}).unwrap()
    }

    /// Reads, writes and deallocates over a small range, so that reads race writes all
    /// the time, on a target that completes in any order: nothing is wrong.
    #[test]
    fn reads_racing_writes_in_any_completion_order_are_judged_right() {
        let mix = Mix { read: 50, write: 40, deallocate: 5, flush: 5 };
        let work = Workload {
            jobs: vec![
                job("a", mix, Pattern::Random, 64, End::Commands(4000)),
                job("b", mix, Pattern::Sequential, 64, End::Commands(4000)),
            ],
            seed: 3,
            drain: true,
            queues: Vec::new(),
        };
        let mut io = FakeIo::new(512, &[16, 16], 9);
        let (mut map, mut journal) = (HostMap::default(), MemoryJournal::default());
        let out = run_on(&mut io, &work, &mut map, &mut journal);
        assert_eq!(out.wrong_read_count, 0, "{:?}", out.wrong_reads);
        assert_eq!(out.failed_count, 0);
        assert!(out.reads_judged > 2000, "{}", out.reads_judged);
        let figures: u64 = out.jobs.iter().flat_map(|j| &j.ops).map(|o| o.commands).sum();
        assert_eq!(figures, 8000);
        assert!(journal.records.len() > 2000 && journal.records.iter().all(|(_, done)| done.is_some()));
        assert!(out.in_flight_at_stop.is_empty() && !out.stopped_early);
    }

    /// Three jobs on two queues (a drive that allocated fewer queues than the jobs):
    /// each job keeps its own depth in flight on the queue it shares, every completion
    /// is counted for the job that submitted it, and the racing reads are judged right.
    #[test]
    fn jobs_sharing_a_queue_each_keep_their_depth_and_their_own_figures() {
        let mix = Mix { read: 50, write: 40, deallocate: 5, flush: 5 };
        let mut work = Workload::new(
            vec![
                job("a", mix, Pattern::Random, 64, End::Commands(3000)),
                job("b", mix, Pattern::Sequential, 64, End::Commands(2000)),
                job("c", Mix::READ, Pattern::Random, 64, End::Commands(1000)),
            ],
            5,
            true,
        );
        work.queues = vec![0, 0, 1];
        // Queue 0 holds a's and b's 16 each; 1 holds c's.
        let mut io = FakeIo::new(512, &[32, 16], 9);
        let (mut map, mut journal) = (HostMap::default(), MemoryJournal::default());
        let out = run_on(&mut io, &work, &mut map, &mut journal);
        assert_eq!(out.wrong_read_count, 0, "{:?}", out.wrong_reads);
        assert_eq!(out.failed_count, 0);
        let counted: Vec<(String, u64)> =
            out.jobs.iter().map(|j| (j.job.clone(), j.ops.iter().map(|o| o.commands).sum())).collect();
        assert_eq!(counted, [("a".into(), 3000), ("b".into(), 2000), ("c".into(), 1000)]);
        assert!(out.in_flight_at_stop.is_empty() && !out.stopped_early);

        // Two jobs of depth 16 do not fit a shared queue of 16.
        let mut io = FakeIo::new(512, &[16, 16], 9);
        let e = run(&mut io, &work, &mut HostMap::default(), &mut journal, Stop::AtEnd, &|| None, &mut |_| {});
        assert!(
            matches!(&e, Err(EngineError::Setup(m)) if m == "job a + b: queue depth 32 but its queue holds 16"),
            "{e:?}"
        );
    }

    /// A write that lands after its completion was posted: a read sent after the
    /// completion returns the old generation, and the engine says so.
    #[test]
    fn a_read_of_the_previous_generation_after_the_write_completed_is_wrong() {
        let mix = Mix { read: 50, write: 50, deallocate: 0, flush: 0 };
        let work = Workload::new(vec![job("a", mix, Pattern::Random, 32, End::Commands(2000))], 5, true);
        let mut io = FakeIo::new(512, &[16], 1);
        io.late_writes_ns = 500_000;
        let mut map = HostMap::default();
        let out = run_on(&mut io, &work, &mut map, &mut crate::load::NoJournal);
        assert!(out.wrong_read_count > 0, "{out:?}");
        let wrong = &out.wrong_reads[0];
        assert!(wrong.what.starts_with("Read NSID 1"), "{}", wrong.what);
    }

    /// A job ending on time whose queue is full at its end waits for completions (the
    /// end is no deadline to idle towards once it has passed).
    #[test]
    fn a_time_end_passing_while_the_queue_is_full_waits_for_completions() {
        let mix = Mix { read: 70, write: 30, deallocate: 0, flush: 0 };
        let j = job("t", mix, Pattern::Random, 4096, End::Time(Duration::from_micros(50)));
        let work = Workload::new(vec![j], 3, true);
        let mut io = FakeIo::new(512, &[16], 4);
        let out = run_on(&mut io, &work, &mut HostMap::default(), &mut crate::load::NoJournal);
        assert!(!out.stopped_early && out.jobs[0].ops.iter().map(|o| o.commands).sum::<u64>() >= 16, "{out:?}");
    }

    /// The action runs once, at its time, with the jobs' commands still queued; the
    /// run goes on to its end and says when the action ran.
    #[test]
    fn an_action_during_the_run_happens_once_with_commands_in_flight() {
        let mix = Mix { read: 50, write: 50, deallocate: 0, flush: 0 };
        let work = Workload::new(vec![job("a", mix, Pattern::Random, 1024, End::Commands(5000))], 9, true);
        let mut io = FakeIo::new(512, &[16], 3);
        let mut seen = Vec::new();
        let mut action = |io: &mut dyn QueuedIo| {
            seen.push((io.now_ns(), io.outstanding(0)));
            Ok(())
        };
        let during = During { after_ns: 2_000_000, action: &mut action, removes_drive: false };
        let out = run_during(
            &mut io,
            &work,
            &mut HostMap::default(),
            &mut crate::load::NoJournal,
            Stop::AtEnd,
            &|| None,
            &mut |_| {},
            Some(during),
        )
        .unwrap();
        assert_eq!(seen.len(), 1);
        assert!(seen[0].0 >= 2_000_000 && seen[0].1 > 0, "{seen:?}");
        let (from, _) = out.during_ns.unwrap();
        assert!(from >= 2_000_000 && out.wrong_read_count == 0 && out.failed_count == 0);
        let longest = out.longest.unwrap();
        assert!(longest.latency_ns >= 1_000 && longest.latency_ns <= 101_000, "{longest:?}");
        assert_eq!(out.jobs[0].ops.iter().map(|o| o.commands).sum::<u64>(), 5000);
    }

    #[test]
    fn the_same_seed_gives_the_same_figures() {
        let mix = Mix { read: 70, write: 30, deallocate: 0, flush: 0 };
        let work = Workload::new(vec![job("a", mix, Pattern::Random, 4096, End::Commands(3000))], 11, true);
        let once = || {
            let mut io = FakeIo::new(512, &[16], 2);
            run_on(&mut io, &work, &mut HostMap::default(), &mut crate::load::NoJournal).jobs
        };
        assert_eq!(once(), once());
    }

    #[test]
    fn a_rate_limit_is_kept_on_the_clock_and_a_time_end_ends_the_job() {
        let mut j = job("r", Mix::READ, Pattern::Random, 4096, End::Time(Duration::from_millis(100)));
        j.rate = Some(Rate::Iops(10_000));
        let work = Workload::new(vec![j], 1, true);
        let mut io = FakeIo::new(512, &[16], 2);
        let out = run_on(&mut io, &work, &mut HostMap::default(), &mut crate::load::NoJournal);
        let read = out.jobs[0].op(Op::Read).unwrap();
        assert_eq!(read.commands, 1000, "10,000 IOPS for 100 ms");
        assert!((read.iops - 10_000.0).abs() < 200.0, "{}", read.iops);
    }

    #[test]
    fn stopping_at_an_instant_reports_what_was_in_flight() {
        let work = Workload {
            jobs: vec![job("w", Mix::WRITE, Pattern::Sequential, 4096, End::Commands(u64::MAX))],
            seed: 1,
            drain: true,
            queues: Vec::new(),
        };
        let mut io = FakeIo::new(512, &[16], 2);
        let mut journal = MemoryJournal::default();
        let out =
            run(&mut io, &work, &mut HostMap::default(), &mut journal, Stop::At(1_000_000), &|| None, &mut |_| {})
                .unwrap();
        assert!(out.stopped_early);
        assert!(!out.in_flight_at_stop.is_empty() && out.in_flight_at_stop.len() <= 16);
        let open = journal.records.iter().filter(|(_, done)| done.is_none()).count();
        assert_eq!(open, out.in_flight_at_stop.len(), "the journal's open writes are those in flight");
    }

    /// A measurement by count: nothing submitted before the warm-up count is counted, the
    /// engine stops at once (not drained) when the measured count is reached, and at its
    /// bound, short of the count, when the target is too slow for it.
    #[test]
    fn stopping_after_a_count_counts_after_the_warm_up_and_stops_at_once() {
        let endless = || Workload {
            jobs: vec![
                job("a", Mix::READ, Pattern::Random, 4096, End::Commands(u64::MAX)),
                job("b", Mix::READ, Pattern::Random, 4096, End::Commands(u64::MAX)),
            ],
            seed: 4,
            drain: false,
            queues: Vec::new(),
        };
        let stop = Stop::AfterCommands { warmup: 500, measured: 3000, bound_ns: 10_000_000_000 };
        let mut io = FakeIo::new(512, &[16, 16], 6);
        let out =
            run(&mut io, &endless(), &mut HostMap::default(), &mut crate::load::NoJournal, stop, &|| None, &mut |_| {})
                .unwrap();
        let counted: u64 = out.jobs.iter().flat_map(|j| &j.ops).map(|o| o.commands).sum();
        assert!(out.stopped_early && out.measured == counted, "{out:?}");
        // One poll may reap a few more than needed; no more than the queues hold.
        assert!((3000..3000 + 32).contains(&counted), "{counted}");
        assert!(out.warmup_done_ns.is_some_and(|at| at > 0) && !out.in_flight_at_stop.is_empty());
        assert!(out.reads_judged >= 3500, "the warm-up's reads are judged too: {}", out.reads_judged);
        // A bound the count cannot be reached within: stopped there, short of it.
        let stop = Stop::AfterCommands { warmup: 500, measured: 1_000_000, bound_ns: 2_000_000 };
        let mut io = FakeIo::new(512, &[16, 16], 6);
        let out =
            run(&mut io, &endless(), &mut HostMap::default(), &mut crate::load::NoJournal, stop, &|| None, &mut |_| {})
                .unwrap();
        assert!(out.stopped_early && out.measured < 1_000_000 && out.elapsed_ns >= 2_000_000, "{out:?}");
    }

    fn refused(io: &mut FakeIo, work: &Workload) -> EngineError {
        run(io, work, &mut HostMap::default(), &mut crate::load::NoJournal, Stop::AtEnd, &|| None, &mut |_| {})
            .unwrap_err()
    }

    #[test]
    fn a_workload_that_does_not_fit_is_refused_before_anything_is_sent() {
        let mut j = job("x", Mix::READ, Pattern::Random, 8192, End::Commands(1));
        let mut io = FakeIo::new(512, &[16], 2);
        let work = Workload::new(vec![j.clone()], 1, true);
        let e = refused(&mut io, &work);
        assert!(e.to_string().contains("do not fit NSID 1"), "{e}");
        j.blocks = 64;
        j.mix = Mix { read: 50, write: 0, deallocate: 0, flush: 0 };
        let work = Workload::new(vec![j], 1, true);
        let e = refused(&mut io, &work);
        assert!(e.to_string().contains("adds up to 50%"), "{e}");
    }

    #[test]
    fn a_block_is_torn_only_when_every_byte_is_one_of_two_contents() {
        let size = BlockSize::new(512).unwrap();
        let states = [Expectation::Written { generation: 1, seed: 9 }, Expectation::Written { generation: 2, seed: 9 }];
        let mut old = vec![0u8; 512];
        let mut new = vec![0u8; 512];
        fill_blocks(&mut old, &BlockTag { nsid: 1, lba: 5, generation: 1, seed: 9, block_size: size }).unwrap();
        fill_blocks(&mut new, &BlockTag { nsid: 1, lba: 5, generation: 2, seed: 9, block_size: size }).unwrap();
        let mut torn = old.clone();
        torn[0xa0..].copy_from_slice(&new[0xa0..]);
        assert!(torn_between(&torn, 1, 5, size, &states));
        // One content alone is no mix of two; neither is a block with a byte of neither.
        assert!(!torn_between(&torn, 1, 5, size, &states[..1]));
        torn[0x1f0] = !(old[0x1f0] | new[0x1f0]);
        assert!(!torn_between(&torn, 1, 5, size, &states));
    }
}
