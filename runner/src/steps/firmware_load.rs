//! `firmware_update` with `jobs`: commit action 011b (activate without reset, NVMe 1.4
//! §5.12) sent while the workload engine keeps I/O queued on the target
//! ([`crate::load::engine::During`]), and the same load run once before and once after
//! the activation, so that the report shows each revision's performance side by side.
//!
//! Across the activation every command must complete successfully and every read must
//! return what the host map says (the engine judges them as they complete); the longest
//! any command took must stay within MTFA beyond what the load's longest command took
//! before the activation (and the time the host spent waiting for the commit itself,
//! when it could not reap meanwhile): processing pauses for at most MTFA (Figure 247).
//! Where the drive completes the commit only once the new image runs, the commit's own
//! time holds the pause and is bounded the same way.

use nvme::device::{Data, DeviceError};
use nvme::queued::{QueueSpec, QueuedIo};
use nvme::spec::firmware::{firmware_commit, max_activation_ms, CommitAction};
use nvme::spec::Status;

use super::{workload, CaseContext, StepError, StepResult};
use crate::load::engine::{During, EngineError, Outcome, Stop};
use crate::load::{Figure, JobFigures, Op, Workload};
use crate::rules;
use crate::suite::model::FirmwareUpdate;

/// The commit's place in the load when the suite gives none.
const DEFAULT_COMMIT_AFTER_MS: u64 = 100;

/// The load of a `firmware_update` step and where the commit falls in it.
pub(super) struct ActivationLoad {
    work: Workload,
    specs: Vec<QueueSpec>,
    commit_after_ns: u64,
}

/// The step's load, `None` when it has no jobs.
pub(super) fn build(ctx: &mut CaseContext<'_>, f: &FirmwareUpdate) -> StepResult<Option<ActivationLoad>> {
    if f.jobs.is_empty() {
        return Ok(None);
    }
    let mut jobs = Vec::with_capacity(f.jobs.len());
    for job in &f.jobs {
        jobs.push(workload::build(ctx, job)?);
    }
    let after = match &f.commit_after_ms {
        None => DEFAULT_COMMIT_AFTER_MS,
        Some(p) => super::resolve::param(p)?,
    };
    let mut work = Workload::new(jobs, ctx.seed, true);
    let specs = workload::fit_queues(ctx, &mut work);
    ctx.log.push(format!("load: {}; the commit {after} ms into it", workload::describe(&work)));
    Ok(Some(ActivationLoad { work, specs, commit_after_ns: after.saturating_mul(1_000_000) }))
}

/// Runs the load with nothing else going on (`label`: "before" or "after" the
/// activation), judging it like any workload; its figures go to the report as
/// `LABEL_activation.JOB.…`.
pub(super) fn measure(ctx: &mut CaseContext<'_>, load: &ActivationLoad, label: &str) -> StepResult<Outcome> {
    let mut map = std::mem::take(&mut ctx.map);
    let result = workload::run(ctx, &load.work, &load.specs, &mut map, ctx.deadline, Stop::AtEnd);
    ctx.map = map;
    let outcome = workload::outcome_of(ctx, &load.work, result)?;
    let outcome = renamed(outcome, &format!("{label}_activation"));
    workload::summarize(ctx, &format!("load {label} the activation"), &outcome);
    ctx.figures.extend(outcome.jobs.iter().cloned());
    workload::verdict(ctx, &load.work, &outcome)?;
    Ok(outcome)
}

fn renamed(mut outcome: Outcome, prefix: &str) -> Outcome {
    for j in &mut outcome.jobs {
        j.job = format!("{prefix}.{}", j.job);
    }
    outcome
}

/// Sends Firmware Commit (`slot`, `action`) `commit_after_ms` into the load and lets the
/// load run to its end: the commit's status and what the load saw. A target that
/// cannot send an admin command beside its queued I/O skips, saying so.
pub(super) fn commit_under_load(
    ctx: &mut CaseContext<'_>,
    load: &ActivationLoad,
    slot: u8,
    action: CommitAction,
) -> StepResult<(Status, Outcome)> {
    let mut status = None;
    let mut commit = |io: &mut dyn QueuedIo| -> Result<(), EngineError> {
        let c = io.admin(firmware_commit(slot, action), Data::None)?;
        status = Some(c.status());
        Ok(())
    };
    let during = During { after_ns: load.commit_after_ns, action: &mut commit, removes_drive: false };
    let mut map = std::mem::take(&mut ctx.map);
    let result = workload::run_during(ctx, &load.work, &load.specs, &mut map, ctx.deadline, Stop::AtEnd, Some(during));
    ctx.map = map;
    if let Err(EngineError::Device(DeviceError::Unsupported(reason))) = &result {
        return Err(StepError::Skip(format!("a commit under load needs admin commands beside queued I/O: {reason}")));
    }
    let outcome = renamed(workload::outcome_of(ctx, &load.work, result)?, "across_activation");
    let Some(status) = status else {
        return Err(StepError::Error(format!(
            "the load ended ({:.3} s) before the commit was due {} ms into it: make its jobs longer",
            outcome.elapsed_ns as f64 / 1e9,
            load.commit_after_ns / 1_000_000
        )));
    };
    let (from, to) = outcome.during_ns.unwrap_or_default();
    ctx.log.push(format!(
        "Firmware Commit FS {slot} CA {:03b}b sent {:.3} ms into the load -> {status} ({:.3} ms)",
        action.into_bits(),
        from as f64 / 1e6,
        (to - from) as f64 / 1e6
    ));
    workload::summarize(ctx, "load across the activation", &outcome);
    ctx.figures.extend(outcome.jobs.iter().cloned());
    Ok((status, outcome))
}

/// The load across the activation: no command failed, no read wrong, and no command
/// held up longer than MTFA beyond the load's own longest before.
pub(super) fn judge_across(
    ctx: &mut CaseContext<'_>,
    load: &ActivationLoad,
    what: &str,
    before: &Outcome,
    across: &Outcome,
) -> StepResult {
    let sent =
        format!("{what}, {} ms into the load {}", load.commit_after_ns / 1_000_000, workload::describe(&load.work));
    if let Some(failed) = across.failed.first() {
        return Err(ctx.fail_rule(
            rules::firmware_activation_io(),
            format!("{sent}; {} in job `{}`, one of {} failed commands", failed.what, failed.job, across.failed_count),
            failed.status.to_string(),
            "Successful Completion: commands wait out the activation and are then carried out by the new image",
        ));
    }
    workload::wrong_read_failure(ctx, &load.work, across, &format!("{sent}; "))?;
    let longest_before = before.longest.as_ref().map_or(0, |l| l.latency_ns);
    let Some(longest) = across.longest.clone() else {
        return Err(StepError::Error("the load across the activation completed no command".into()));
    };
    // The host reaps nothing while it waits for the commit: the commands' latencies may
    // hold that wait beside any pause.
    let (from, to) = across.during_ns.unwrap_or_default();
    let commit_ns = to - from;
    let shown = |ns: u64| format!("{:.3} ms", ns as f64 / 1e6);
    ctx.log.push(format!(
        "longest command across the activation: {} ({} in job `{}`, submitted {} into the load); before: {}",
        shown(longest.latency_ns),
        longest.what,
        longest.job,
        shown(longest.submitted_ns),
        shown(longest_before)
    ));
    ctx.figures.push(JobFigures {
        job: "activation".into(),
        window_ns: 0,
        simulated_clock: across.simulated_clock,
        ops: Vec::new(),
        extra: vec![
            Figure { name: "activation.longest_command_ms".into(), value: ms3(longest.latency_ns), unit: "ms" },
            Figure { name: "activation.longest_command_before_ms".into(), value: ms3(longest_before), unit: "ms" },
            Figure { name: "activation.commit_ms".into(), value: ms3(to - from), unit: "ms" },
        ],
    });
    let Some(mtfa) = max_activation_ms(ctx.facts.identify.mtfa) else {
        ctx.log.push("MTFA 0: no maximum activation time reported, the pause is not judged".into());
        return Ok(());
    };
    // A drive may complete the commit once the new image runs: then its own time holds
    // the pause, and must keep within MTFA as the commands must.
    if commit_ns > mtfa * 1_000_000 + longest_before {
        return Err(ctx.fail_rule(
            rules::firmware_mtfa(),
            sent,
            format!("the Firmware Commit itself took {}", shown(commit_ns)),
            format!(
                "at most MTFA ({mtfa} ms) beyond the load's longest command before the activation ({}): a commit \
                 that completes after the activation shows its pause",
                shown(longest_before)
            ),
        ));
    }
    let bound = mtfa * 1_000_000 + longest_before + commit_ns;
    if longest.latency_ns > bound {
        return Err(ctx.fail_rule(
            rules::firmware_mtfa(),
            sent,
            format!(
                "{} in job `{}`, submitted {} into the load, took {}",
                longest.what,
                longest.job,
                shown(longest.submitted_ns),
                shown(longest.latency_ns)
            ),
            format!(
                "at most MTFA ({mtfa} ms) beyond the load's longest command before the activation ({}){}: processing \
                 pauses for at most MTFA",
                shown(longest_before),
                if commit_ns > 0 { format!(" and the commit's own {}", shown(commit_ns)) } else { String::new() }
            ),
        ));
    }
    Ok(())
}

fn ms3(ns: u64) -> f64 {
    (ns as f64 / 1e3).round() / 1e3
}

/// The figures of the load before and after, side by side in the log, with each
/// revision named: reported, not judged (no rule or claim bounds a revision's speed).
pub(super) fn compare(ctx: &mut CaseContext<'_>, before: &Outcome, after: &Outcome, old_fr: &str, new_fr: &str) {
    for (b, a) in before.jobs.iter().zip(&after.jobs) {
        let job = b.job.split_once('.').map_or(b.job.as_str(), |(_, j)| j);
        for op in [Op::Read, Op::Write] {
            let (Some(x), Some(y)) = (b.op(op), a.op(op)) else { continue };
            let ratio = if x.iops > 0.0 { y.iops / x.iops } else { 0.0 };
            ctx.log.push(format!(
                "firmware performance, job `{job}` {}: {:.0} IOPS, p99 {:.1} µs with FR {old_fr}; {:.0} IOPS, p99 {:.1} \
                 µs with FR {new_fr} ({ratio:.2}×)",
                op.name(),
                x.iops,
                x.latency_at(99.0) as f64 / 1e3,
                y.iops,
                y.latency_at(99.0) as f64 / 1e3,
            ));
        }
    }
}
