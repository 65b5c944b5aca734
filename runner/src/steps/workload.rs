//! `workload`: jobs of queued I/O through the engine ([`crate::load`]), on the target's
//! own queues ([`nvme::device::Device::queued_io`]). The step resolves each job against
//! the case's namespace set, runs them together, and turns what the engine saw into the
//! case's verdict: a wrong read fails the case's rule (with the block's evidence), an
//! error status fails the rule of I/O inside the namespace, a command that never
//! completes fails the command-completion rule. Figures go to the case's outcome.
//!
//! With a `qos` judgement and claims, every `read_qos` promise (or the one named) is
//! measured by a run of its own with the load it states, each judged and recorded for the
//! run's claims summary ([`crate::claims::verdicts`]); the case fails listing every
//! breached promise, as claims.

use std::time::{Duration, Instant};

use nvme::device::DeviceError;
use nvme::queued::QueueSpec;
use nvme::spec::queue::QueuePriority;

use super::resolve::{self, NsTarget};
use super::{CaseContext, StepError, StepResult};
use crate::data::judge::DeallocatedRead;
use crate::load::engine::{self, EngineError, Outcome, Stop};
use crate::load::{End, Job, Mix, NoJournal, Pattern, Rate, Workload};
use crate::rules;
use crate::suite::model::{AccessPattern, QosJudgement, QueuePriorityName, WorkloadJob};
use crate::verdict::Failure;

/// A job with neither `commands` nor `duration_ms` runs this many commands.
const DEFAULT_COMMANDS: u64 = 10_000;
/// Progress is drawn on stderr once a workload has run this long (wall time).
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

pub fn workload(ctx: &mut CaseContext<'_>, jobs: &[WorkloadJob], qos: Option<&QosJudgement>) -> StepResult {
    let Some(q) = qos else {
        run_jobs(ctx, jobs, None, None)?;
        return Ok(());
    };
    for name in std::iter::once(&q.read_job).chain(q.write_job.iter()) {
        if !jobs.iter().any(|j| &j.name == name) {
            return Err(StepError::Error(format!("qos names job `{name}`, which the workload does not have")));
        }
    }
    let promises = qos_claims(ctx, q)?;
    if promises.is_empty() {
        run_jobs(ctx, jobs, None, None)?;
        ctx.log.push(format!(
            "qos: no read-QoS claim given (--claims, or the simulated drive's profile): the figures of job `{}` are \
             reported, not judged",
            q.read_job
        ));
        return Ok(());
    }
    // One measured run per promise, each with the load it states; a wrong read ends the
    // case at once (a rule of the specification), a breach is kept and the next promise
    // is measured.
    let several = promises.len() > 1;
    let mut breaches = Vec::new();
    for p in &promises {
        if several {
            ctx.log.push(format!("qos: measuring {}", p.cite));
        }
        let label = several.then_some(p.label.as_str());
        let outcome = run_jobs(ctx, jobs, Some((q, &p.claim.value)), label)?;
        if let Some(breach) = judge_claim(ctx, q, &outcome, p)? {
            breaches.push(breach);
        }
    }
    if breaches.is_empty() {
        return Ok(());
    }
    Err(StepError::Fail(breaches_failure(&breaches)))
}

/// Builds the jobs (with the load of `claim`, when given), runs them and judges their
/// data; the figures go to the case, each job's named `JOB[label]` when `label` is given
/// (several promises measured in one case).
fn run_jobs(
    ctx: &mut CaseContext<'_>,
    jobs: &[WorkloadJob],
    claim: Option<(&QosJudgement, &crate::claims::ReadQos)>,
    label: Option<&str>,
) -> StepResult<Outcome> {
    let mut built = Vec::with_capacity(jobs.len());
    for job in jobs {
        built.push(build(ctx, job)?);
    }
    if let Some((q, c)) = claim {
        apply_claim(ctx, &mut built, q, c)?;
    }
    let mut work = Workload::new(built, ctx.seed, true);
    let specs = fit_queues(ctx, &mut work);
    ctx.log.push(format!("workload: {}", describe(&work)));
    let deadline = ctx.deadline;
    let mut map = std::mem::take(&mut ctx.map);
    let result = run(ctx, &work, &specs, &mut map, deadline, Stop::AtEnd);
    ctx.map = map;
    let outcome = outcome_of(ctx, &work, result)?;
    summarize(ctx, "workload", &outcome);
    ctx.figures.extend(outcome.jobs.iter().cloned().map(|mut j| {
        if let Some(label) = label {
            j.job = format!("{}[{label}]", j.job);
        }
        j
    }));
    verdict(ctx, &work, &outcome)?;
    Ok(outcome)
}

/// A read-QoS promise a `qos` judgement measures.
struct QosPromise {
    /// Its key in the run's claims summary, `read_qos[N]`.
    key: String,
    /// Its name, or its key when it has none: what its figures are labelled with.
    label: String,
    /// The claim cited ([`crate::claims::Claims::cite_read_qos`]).
    cite: String,
    claim: crate::claims::Claimed<crate::claims::ReadQos>,
}

/// A promise's breach: the claim cited and what was measured.
struct QosBreach {
    cite: String,
    sent: String,
    observed: String,
    expected: String,
}

/// The read-QoS promises a `qos` judgement measures: the one named, or every one, in
/// file order; none without claims.
fn qos_claims(ctx: &CaseContext<'_>, q: &QosJudgement) -> StepResult<Vec<QosPromise>> {
    let Some(claims) = ctx.claims.as_ref() else {
        return Ok(Vec::new());
    };
    let promise = |(i, c): (usize, &crate::claims::Claimed<crate::claims::ReadQos>)| QosPromise {
        key: format!("read_qos[{i}]"),
        label: c.value.name.clone().unwrap_or_else(|| format!("read_qos[{i}]")),
        cite: claims.cite_read_qos(c),
        claim: c.clone(),
    };
    match &q.claim {
        None => Ok(claims.read_qos.iter().enumerate().map(promise).collect()),
        Some(name) => match claims.read_qos.iter().enumerate().find(|(_, c)| c.value.name.as_deref() == Some(name)) {
            Some(found) => Ok(vec![promise(found)]),
            None => Err(StepError::Error(format!(
                "qos names read_qos claim `{name}`, which {} does not have",
                claims.origin
            ))),
        },
    }
}

/// The load a read-QoS claim states: the read job's rate, block size and depth, the
/// write job's rate (no background write: the job is left out).
fn apply_claim(
    ctx: &mut CaseContext<'_>,
    jobs: &mut Vec<Job>,
    q: &QosJudgement,
    c: &crate::claims::ReadQos,
) -> StepResult {
    let Some(read) = jobs.iter_mut().find(|j| j.name == q.read_job) else {
        return Ok(());
    };
    let bs = read.namespace.block_size;
    if !(c.block_bytes as u64).is_multiple_of(bs) {
        return Err(StepError::Skip(format!(
            "the claim's {}-byte reads are not a whole number of NSID {}'s {bs}-byte blocks",
            c.block_bytes, read.namespace.nsid
        )));
    }
    read.rate = Some(Rate::Iops(c.read_iops));
    read.blocks_per_command = vec![(c.block_bytes as u64 / bs) as u32];
    if let Some(depth) = c.queue_depth {
        read.queue_depth = depth;
    }
    if let Some(name) = &q.write_job {
        if c.background_write_bytes_per_s == 0 {
            jobs.retain(|j| &j.name != name);
        } else if let Some(write) = jobs.iter_mut().find(|j| &j.name == name) {
            write.rate = Some(Rate::BytesPerSecond(c.background_write_bytes_per_s));
        }
    }
    ctx.log.push(format!("qos: the load follows the claim {}", c.describe()));
    Ok(())
}

/// The promise's percentile of the read job's latency against its bound, recorded for
/// the run's claims summary; the breach, if it is one.
fn judge_claim(
    ctx: &mut CaseContext<'_>,
    q: &QosJudgement,
    outcome: &Outcome,
    p: &QosPromise,
) -> StepResult<Option<QosBreach>> {
    let c = &p.claim.value;
    let read = outcome.jobs.iter().find(|j| j.job == q.read_job).and_then(|j| j.op(crate::load::Op::Read));
    let Some(read) = read.filter(|r| r.latency.samples > 0) else {
        return Err(StepError::Error(format!("qos: job `{}` completed no counted reads to judge", q.read_job)));
    };
    let at = read.latency_at(c.percentile);
    let bound = c.latency.as_nanos() as u64;
    let shown = |ns: u64| format!("{:.2} µs", ns as f64 / 1000.0);
    ctx.log.push(format!(
        "qos: p{} of {} reads = {} (bound {}), at {:.0} read IOPS",
        c.percentile,
        read.latency.samples,
        shown(at),
        shown(bound),
        read.iops
    ));
    let observed = format!(
        "p{} read latency {} over {} samples at {:.0} read IOPS",
        c.percentile,
        shown(at),
        read.latency.samples,
        read.iops
    );
    if at <= bound {
        ctx.claim_judgements.push(crate::claims::ClaimJudgement::met(&p.key, observed));
        return Ok(None);
    }
    ctx.claim_judgements.push(crate::claims::ClaimJudgement::breached(&p.key, observed.clone()));
    Ok(Some(QosBreach {
        cite: p.cite.clone(),
        sent: format!("the workload of the claim: {}", c.describe()),
        observed,
        expected: format!("p{} read latency at most {}", c.percentile, shown(bound)),
    }))
}

/// The failure of every breached read-QoS promise, each cited and numbered.
fn breaches_failure(breaches: &[QosBreach]) -> Failure {
    let text = match breaches.len() {
        1 => "the drive's datasheet read-QoS promise (a claim, not a rule of the specification)".to_string(),
        n => format!(
            "the drive's datasheet read-QoS promises, {n} of them breached (claims, not rules of the specification)"
        ),
    };
    let each = |f: &dyn Fn(&QosBreach) -> String| match breaches {
        [one] => f(one),
        many => many.iter().enumerate().map(|(i, b)| format!("{}. {}", i + 1, f(b))).collect::<Vec<_>>().join("; "),
    };
    Failure {
        rule: crate::verdict::Rule {
            section: format!("claim {}", breaches.iter().map(|b| b.cite.as_str()).collect::<Vec<_>>().join("; claim ")),
            text,
        },
        sent: each(&|b| b.sent.clone()),
        observed: each(&|b| b.observed.clone()),
        expected: each(&|b| b.expected.clone()),
    }
}

/// What the engine's result means for the case: the outcome, or the skip (no queued
/// I/O on this target), failure (the controller stopped answering) or error it is.
pub(super) fn outcome_of(
    ctx: &mut CaseContext<'_>,
    work: &Workload,
    result: Result<Outcome, EngineError>,
) -> StepResult<Outcome> {
    match result {
        Ok(outcome) => Ok(outcome),
        Err(EngineError::Device(DeviceError::Unsupported(reason))) => {
            Err(StepError::Skip(format!("the workload needs queued I/O: {reason}")))
        }
        Err(EngineError::Device(e)) if e.controller_stopped() => {
            ctx.controller_lost = true;
            Err(ctx.fail_rule(
                rules::command_completes(),
                format!("the workload's commands ({})", describe(work)),
                e.to_string(),
                "a completion queue entry for every command (with an error status if it cannot be carried out)",
            ))
        }
        Err(EngineError::Device(e)) => Err(e.into()),
        Err(e) => Err(StepError::Error(e.to_string())),
    }
}

/// What limits a command's transfer, for the log: "MDTS (N bytes)", or the host
/// driver's limit where it is smaller.
fn transfer_limit(facts: &super::facts::Facts) -> String {
    match (facts.mdts_bytes, facts.transfer_bytes) {
        (Some(m), Some(t)) if t < m => format!("the host driver's limit ({t} bytes, below MDTS {m} bytes)"),
        (None, Some(t)) => format!("the host driver's limit ({t} bytes)"),
        (_, t) => format!("MDTS ({} bytes)", t.unwrap_or(0)),
    }
}

/// The queues for `work`'s jobs, each job's queue set in `work.queues`: a queue per job
/// where the drive allocated enough (Set Features Number of Queues, NVMe 1.4 §5.21.1.7;
/// [`nvme::device::Device::io_queue_limit`]). Where it allocated fewer on a port, the
/// port's jobs share its queues in turn, when they all ask for one priority (QPRIO only
/// matters between queues, §4.13); a shared queue holds the depths of its jobs added up,
/// each job cut in proportion where that exceeds CAP.MQES. The log says what was used.
/// Jobs of several priorities keep a queue each (the target then refuses, naming why).
pub(super) fn fit_queues(ctx: &mut CaseContext<'_>, work: &mut Workload) -> Vec<QueueSpec> {
    work.queues.clear();
    // Per job, (port, its queue among the port's).
    let mut placed: Vec<(usize, usize)> = Vec::with_capacity(work.jobs.len());
    let mut shared = false;
    for (j, job) in work.jobs.iter().enumerate() {
        let on_port: Vec<usize> = (0..work.jobs.len()).filter(|&k| work.jobs[k].port == job.port).collect();
        let rank = on_port.iter().position(|&k| k == j).unwrap_or(0);
        let limit = ctx.device.io_queue_limit(job.port).filter(|&l| l > 0);
        let one_priority = on_port.iter().all(|&k| work.jobs[k].priority == job.priority);
        match limit {
            Some(limit) if on_port.len() > limit && one_priority => {
                shared = true;
                placed.push((job.port, rank % limit));
            }
            _ => placed.push((job.port, rank)),
        }
    }
    if !shared {
        return work.jobs.iter().map(|j| j.queue_spec()).collect();
    }
    // Queues numbered in the order their first job comes.
    let mut queues: Vec<(usize, usize)> = Vec::new();
    for p in &placed {
        if !queues.contains(p) {
            queues.push(*p);
        }
    }
    work.queues = placed.iter().map(|p| queues.iter().position(|q| q == p).unwrap_or(0)).collect();
    let mqes = ctx.facts.mqes.filter(|&m| m > 0).map(u32::from);
    let mut specs = Vec::with_capacity(queues.len());
    for (q, &(port, _)) in queues.iter().enumerate() {
        let members: Vec<usize> = (0..work.jobs.len()).filter(|&j| work.queues[j] == q).collect();
        let wanted: u32 = members.iter().map(|&j| work.jobs[j].queue_depth).sum();
        if let Some(mqes) = mqes.filter(|&m| wanted > m) {
            for &j in &members {
                let job = &mut work.jobs[j];
                job.queue_depth = (u64::from(job.queue_depth) * u64::from(mqes) / u64::from(wanted)).max(1) as u32;
            }
        }
        let depth: u32 = members.iter().map(|&j| work.jobs[j].queue_depth).sum();
        let names: Vec<String> =
            members.iter().map(|&j| format!("{} (depth {})", work.jobs[j].name, work.jobs[j].queue_depth)).collect();
        let limit = ctx.device.io_queue_limit(port).unwrap_or(0);
        ctx.log.push(format!(
            "queues: port {} allocated {limit} I/O queue(s) (Number of Queues) for {} jobs: queue {} shared by {}{}",
            port + 1,
            work.jobs.iter().filter(|j| j.port == port).count(),
            q + 1,
            names.join(", "),
            match mqes {
                Some(m) if wanted > m => format!(" (depths cut to fit CAP.MQES {m}: {wanted} asked)"),
                _ => String::new(),
            }
        ));
        specs.push(QueueSpec { depth, priority: work.jobs[members[0]].priority, port });
    }
    specs
}

/// The outcome's figures and tallies in the case's log, each line led by `label`.
pub(super) fn summarize(ctx: &mut CaseContext<'_>, label: &str, outcome: &Outcome) {
    for figures in &outcome.jobs {
        ctx.log.extend(figures.summary());
    }
    ctx.log.push(format!(
        "{label}: {} reads judged ({} blocks), {} wrong, {} torn under an atomic write, {} torn under a larger \
         write (allowed), {} commands failed, {:.3} s on the {} clock",
        outcome.reads_judged,
        outcome.blocks_judged,
        outcome.wrong_read_count,
        outcome.torn_read_count,
        outcome.torn_reads_allowed,
        outcome.failed_count,
        outcome.elapsed_ns as f64 / 1e9,
        if outcome.simulated_clock { "simulated" } else { "monotonic" }
    ));
}

/// Opens the target's queues for `work`, runs it until `stop`, closes them again.
pub(super) fn run(
    ctx: &mut CaseContext<'_>,
    work: &Workload,
    specs: &[QueueSpec],
    map: &mut crate::data::HostMap,
    deadline: Option<(Instant, Duration)>,
    stop: Stop,
) -> Result<Outcome, EngineError> {
    run_during(ctx, work, specs, map, deadline, stop, None)
}

/// [`run`], with `during` done once while the jobs run ([`engine::During`]).
pub(super) fn run_during(
    ctx: &mut CaseContext<'_>,
    work: &Workload,
    specs: &[QueueSpec],
    map: &mut crate::data::HostMap,
    deadline: Option<(Instant, Duration)>,
    stop: Stop,
    during: Option<engine::During<'_>>,
) -> Result<Outcome, EngineError> {
    let mut io = ctx.device.queued_io(specs)?;
    let cancel = || match deadline {
        Some((at, limit)) if Instant::now() >= at => {
            Some(format!("the case ran past --case-timeout ({:.1} s): the workload was stopped", limit.as_secs_f64()))
        }
        _ => None,
    };
    let started = Instant::now();
    let bar = indicatif::ProgressBar::hidden();
    let mut shown = false;
    let mut progress = |p: engine::Progress| {
        if !shown && started.elapsed() >= PROGRESS_AFTER {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            shown = true;
        }
        bar.set_message(format!(
            "workload: {} commands, {:.2} s on the target's clock",
            p.completed,
            p.elapsed_ns as f64 / 1e9
        ));
        bar.tick();
    };
    let result = engine::run_during(io.as_mut(), work, map, &mut NoJournal, stop, &cancel, &mut progress, during);
    bar.finish_and_clear();
    let closed = io.close();
    let outcome = result?;
    closed?;
    Ok(outcome)
}

/// The case's verdict from what the engine saw.
pub(super) fn verdict(ctx: &mut CaseContext<'_>, work: &Workload, outcome: &Outcome) -> StepResult {
    wrong_read_failure(ctx, work, outcome, "")?;
    if let Some(failed) = outcome.failed.first() {
        return Err(ctx.fail_rule(
            rules::io_within_namespace(),
            format!("{} in job `{}`, one of {} failed commands", failed.what, failed.job, outcome.failed_count),
            failed.status.to_string(),
            "Successful Completion (the workload's commands stay inside the namespace and within MDTS)",
        ));
    }
    Ok(())
}

/// The failure of the outcome's first wrong read, if any (`context`: what leads the
/// description, e.g. what was going on during the load).
///
/// Without one, a read torn under an atomic write becomes the case's warning: NVMe 1.4
/// §6.4.1 says such a write is atomic "with respect to other read or write commands",
/// which nvtest reads as a racing read seeing old or new data only; the text may mean
/// the data on the media only, so not a failure.
pub(super) fn wrong_read_failure(
    ctx: &mut CaseContext<'_>,
    work: &Workload,
    outcome: &Outcome,
    context: &str,
) -> StepResult {
    let Some(wrong) = outcome.wrong_reads.first() else {
        if let Some(torn) = outcome.torn_reads.first() {
            ctx.warnings.push(Failure {
                rule: rules::atomic_write_normal(),
                sent: format!(
                    "{context}{} in job `{}`, one of {} reads of {} torn while a write of at most AWUN + 1 blocks \
                     over them was in flight",
                    torn.what, torn.job, outcome.torn_read_count, outcome.reads_judged
                ),
                observed: torn.mismatch.to_string(),
                expected: "each block the old data or the new data whole — nvtest's reading of \"atomic with respect \
                           to other read or write commands\", so a warning, not a failure"
                    .into(),
            });
        }
        return Ok(());
    };
    let dealloc = work.jobs.iter().find(|j| j.name == wrong.job).map(|j| j.namespace.dealloc_read);
    let raced = if wrong.raced { " (a write of these blocks was in flight: its data was accepted too)" } else { "" };
    let what = format!(
        "{context}{} in job `{}`, one of {} wrong reads of {}{raced}",
        wrong.what, wrong.job, outcome.wrong_read_count, outcome.reads_judged
    );
    Err(super::io::mismatch_failure(ctx, what, &wrong.mismatch, dealloc.unwrap_or(DeallocatedRead::NotReported)))
}

pub(super) fn describe(work: &Workload) -> String {
    let jobs: Vec<String> = work
        .jobs
        .iter()
        .map(|j| {
            let rate = match j.rate {
                Some(Rate::Iops(n)) => format!(", {n} IOPS"),
                Some(Rate::BytesPerSecond(b)) => format!(", {} MB/s", b / 1_000_000),
                None => String::new(),
            };
            let end = match j.end {
                End::Commands(n) => format!("{n} commands"),
                End::Time(d) => format!("{} ms", d.as_millis()),
            };
            format!(
                "{} (NSID {} LBA {:#x}+{}, read {}% write {}% deallocate {}% flush {}%, {:?}, {} blocks/command, QD {}{rate}, {end})",
                j.name,
                j.namespace.nsid,
                j.first_lba,
                j.blocks,
                j.mix.read,
                j.mix.write,
                j.mix.deallocate,
                j.mix.flush,
                j.pattern,
                j.blocks_per_command.iter().map(u32::to_string).collect::<Vec<_>>().join("/"),
                j.queue_depth
            )
        })
        .collect();
    jobs.join("; ")
}

/// One suite job as the engine runs it, on the case's namespace.
pub(super) fn build(ctx: &mut CaseContext<'_>, job: &WorkloadJob) -> StepResult<Job> {
    let i = match resolve::ns_one(ctx, &job.ns)? {
        NsTarget::Member(i) => i,
        NsTarget::Raw(nsid) => {
            return Err(StepError::Error(format!(
                "job {}: a workload runs on a namespace of the set, not NSID {nsid:#x}",
                job.name
            )))
        }
    };
    let e = &ctx.set[i];
    if e.block_size == 0 {
        return Err(StepError::Error(format!("NSID {} has no usable LBA format", e.nsid)));
    }
    if e.metadata_size > 0 || e.protection != 0 {
        return Err(StepError::Skip(format!(
            "NSID {} uses a format with {} bytes of metadata per block (protection type {}): the workload engine \
             moves data of formats without metadata only",
            e.nsid, e.metadata_size, e.protection
        )));
    }
    let namespace = crate::load::job::Namespace {
        nsid: e.nsid,
        block_size: e.block_size,
        nsze: e.nsze,
        dealloc_read: e.dealloc_read,
        atomic: e.atomic,
    };
    let first_lba = match &job.lba {
        Some(l) => resolve::lba(l, e.nsze)?,
        None => 0,
    };
    let blocks = match &job.blocks {
        Some(b) => resolve::blocks(b, e.nsze)?,
        None => e.nsze.saturating_sub(first_lba),
    };
    if blocks == 0 || first_lba.checked_add(blocks).is_none_or(|end| end > e.nsze) {
        return Err(StepError::Skip(format!(
            "job {}: LBAs {first_lba:#x} + {blocks} do not fit NSID {} (NSZE {:#x})",
            job.name, e.nsid, e.nsze
        )));
    }
    let share = |p: &Option<crate::suite::model::Param<u32>>| p.as_ref().map_or(Ok(0), resolve::param);
    let mix = Mix {
        read: share(&job.read)?,
        write: share(&job.write)?,
        deallocate: share(&job.deallocate)?,
        flush: share(&job.flush)?,
    };
    let mut blocks_per_command = Vec::new();
    let mut above_mdts = Vec::new();
    for size in &job.sizes {
        let bytes = resolve::param(size)? as u64;
        if bytes == 0 || !bytes.is_multiple_of(e.block_size) {
            return Err(StepError::Skip(format!(
                "job {}: {bytes}-byte commands are not a whole number of NSID {}'s {}-byte blocks",
                job.name, e.nsid, e.block_size
            )));
        }
        let n = bytes / e.block_size;
        if ctx.facts.transfer_bytes.is_some_and(|mdts| bytes > mdts) {
            above_mdts.push(bytes);
            continue;
        }
        blocks_per_command.push(
            u32::try_from(n).map_err(|_| StepError::Error(format!("job {}: {bytes} bytes is too large", job.name)))?,
        );
    }
    // Sizes the drive cannot take in one command (MDTS, or the host driver's smaller
    // limit) are left out; when none is left, the largest whole number of blocks allowed
    // stands in for them. The load is about the data under it, not the command size:
    // the log says what was used.
    if let (false, Some(mdts)) = (above_mdts.is_empty(), ctx.facts.transfer_bytes) {
        if blocks_per_command.is_empty() {
            let n = mdts / e.block_size;
            if n == 0 {
                return Err(StepError::Skip(format!(
                    "job {}: MDTS ({mdts} bytes) is smaller than one of NSID {}'s {}-byte blocks",
                    job.name, e.nsid, e.block_size
                )));
            }
            blocks_per_command.push(u32::try_from(n).unwrap_or(u32::MAX));
        }
        let used: Vec<String> = blocks_per_command.iter().map(|&n| (n as u64 * e.block_size).to_string()).collect();
        let left: Vec<String> = above_mdts.iter().map(u64::to_string).collect();
        ctx.log.push(format!(
            "job {}: {}-byte commands exceed {}: sizes used {} bytes",
            job.name,
            left.join(", "),
            transfer_limit(ctx.facts),
            used.join(", ")
        ));
    }
    if blocks_per_command.is_empty() {
        blocks_per_command.push(1);
    }
    let mut depth = resolve::param(&job.queue_depth)?;
    // A queue holds at most CAP.MQES commands in flight (MQES + 1 entries, one kept
    // empty): a deeper job runs at that depth, and the log says so.
    if let Some(mqes) = ctx.facts.mqes.filter(|&m| m > 0 && depth > u32::from(m)) {
        ctx.log.push(format!(
            "job {}: queue depth {depth} exceeds what one I/O queue holds (CAP.MQES {mqes}: {mqes} commands in \
             flight): depth {mqes} used",
            job.name
        ));
        depth = u32::from(mqes);
    }
    let rate = match (&job.iops, &job.mb_per_s) {
        (Some(n), None) => Some(Rate::Iops(resolve::param(n)?)),
        (None, Some(m)) => Some(Rate::BytesPerSecond(resolve::param(m)?.saturating_mul(1_000_000))),
        (None, None) => None,
        (Some(_), Some(_)) => {
            return Err(StepError::Error(format!("job {}: give iops or mb_per_s, not both", job.name)))
        }
    };
    let port = match &job.port {
        None => 0,
        Some(p) => {
            let number = resolve::param(p)? as usize;
            let reached = ctx.device.port_count() + 1;
            if number == 0 {
                return Err(StepError::Error(format!("job {}: ports are numbered from 1", job.name)));
            }
            if number > reached {
                return Err(StepError::Skip(format!(
                    "job {} runs on port {number}; the target brought up {}",
                    job.name,
                    super::ports::reached(&*ctx.device)
                )));
            }
            number - 1
        }
    };
    let end = match (&job.commands, &job.duration_ms) {
        (Some(n), None) => End::Commands(resolve::param(n)?),
        (None, Some(ms)) => End::Time(Duration::from_millis(resolve::param(ms)?)),
        (None, None) => End::Commands(DEFAULT_COMMANDS),
        (Some(_), Some(_)) => {
            return Err(StepError::Error(format!("job {}: give commands or duration_ms, not both", job.name)))
        }
    };
    Ok(Job {
        name: job.name.clone(),
        namespace,
        first_lba,
        blocks,
        mix,
        pattern: match job.pattern {
            Some(AccessPattern::Sequential) => Pattern::Sequential,
            _ => Pattern::Random,
        },
        blocks_per_command,
        queue_depth: depth,
        priority: match job.priority {
            Some(QueuePriorityName::Urgent) => QueuePriority::Urgent,
            Some(QueuePriorityName::High) => QueuePriority::High,
            Some(QueuePriorityName::Low) => QueuePriority::Low,
            Some(QueuePriorityName::Medium) | None => QueuePriority::Medium,
        },
        port,
        fua_percent: share(&job.fua)?,
        rate,
        end,
        warmup: Duration::from_millis(job.warmup_ms.as_ref().map_or(Ok(0), resolve::param)?),
    })
}
