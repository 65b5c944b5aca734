//! `power_fail`: a campaign of power cycles under load (issue 11). Each cycle runs the
//! jobs through the engine with the [`Ledger`] as its journal, cuts the power at a seeded
//! random instant (or after a normal shutdown), powers the drive on and judges:
//! - CSTS.RDY within CAP.TO (rule f) and within the claimed ready time (a claim), with
//!   "media ready" (the first successful read) measured beside it;
//! - SMART / Health Power Cycles + 1 and Unsafe Shutdowns + 1, or + 0 after a normal
//!   shutdown (rule e, g);
//! - a normal shutdown reported complete (CSTS.SHST = 10b, rule g);
//! - every block of the jobs' ranges ([`crate::power::verify`]: rules a–d).
//!
//! With `removal` the power goes because the drive leaves its slot (hot-plug, issue 13):
//! a surprise removal pulls it under load without telling the driver, which must find the
//! controller gone (CSTS reading all ones) and end every outstanding command in an error
//! within the command timeout (the time it took and the commands so ended are figures);
//! an orderly removal shuts every controller down first. After each reinsertion the drive
//! must be the same (SN, MN, SUBNQN, the namespaces' NGUID and EUI64) besides the rules
//! above.
//!
//! The cycle's seed (and so its load, cut instant and a simulated drive's losses) comes
//! from the case's seed: `--seed` replays a campaign.

use std::time::{Duration, Instant};

use nvme::device::{Data, DeviceError};
use nvme::queued::{QueueSpec, QueuedIo, Transfer};
use nvme::spec::features::{get_features, set_features, FeatureId, Select, VolatileWriteCache};
use nvme::spec::identify::{identify, Cns, IdentifyController, IdentifyNamespace};
use nvme::spec::log::SmartHealthLog;
use nvme::spec::nvm;
use nvme::spec::queue::QueuePriority;
use nvme::spec::registers::{offset, Cap};
use nvme::transport::PowerMethod;
use zerocopy::{FromZeros, IntoBytes};

use super::smart::smart_log;
use super::{CaseContext, StepError, StepResult};
use crate::data::BlockSize;
use crate::load::engine::{self, During, EngineError, Stop};
use crate::load::job::Draws;
use crate::load::{Figure, JobFigures, Workload};
use crate::power::journal_file::{write_floor, Both, FileJournal, Header, JournalRange, Record, FORMAT};
use crate::power::verify::copied;
use crate::power::{verify, Broken, Durable, Finding, Ledger, Range, Survival};
use crate::rules;
use crate::suite::model::{PowerFail, Removal, WriteCacheSetting};
use crate::verdict::{Failure, Rule};

/// How long a power-on waits for CSTS.RDY beyond CAP.TO, so that a late drive is
/// measured rather than given up on.
const READY_GRACE: Duration = Duration::from_secs(30);
/// Blocks read per command when verifying (within MDTS).
const VERIFY_BLOCKS: u64 = 256;
/// Findings listed in the case's log (all are counted).
const LISTED: usize = 16;

/// What the campaign measured, for the figures.
#[derive(Default)]
struct Tally {
    cycles: u64,
    in_flight: Vec<u64>,
    blocks_judged: u64,
    bytes_judged: u64,
    ready_ns: Vec<u64>,
    /// Power-on to the controller up (ready, queues or the kernel's device back).
    back_ns: Vec<u64>,
    /// Reinsertion into a hot-plug slot: the slot's power on to the link up.
    link_up_ns: Vec<u64>,
    /// Reinsertion into a hot-plug slot: the slot's power on to the function enumerated.
    enumerated_ns: Vec<u64>,
    media_ready_ns: Vec<u64>,
    /// Surprise removal: from the drive pulled to the driver finding it gone.
    removal_seen_ns: Vec<u64>,
    /// Surprise removal: commands outstanding when it was found gone, each ended in an
    /// error.
    ended_in_error: Vec<u64>,
    survived: u64,
    rolled_back: u64,
    verify_wall: Duration,
}

pub fn power_fail(ctx: &mut CaseContext<'_>, p: &PowerFail) -> StepResult {
    let Some(method) = ctx.device.power_method() else {
        return Err(StepError::Skip(super::facts::NO_POWER_SWITCH.into()));
    };
    let cycles = super::resolve::param(&p.cycles)?;
    if cycles == 0 || p.jobs.is_empty() {
        return Err(StepError::Error(format!(
            "power_fail needs at least one cycle and one job (has {cycles} cycles, {} jobs)",
            p.jobs.len()
        )));
    }
    let cut_within_ns = super::resolve::param(&p.cut_within_ms)?.max(1).saturating_mul(1_000_000);
    let mut jobs = Vec::with_capacity(p.jobs.len());
    for job in &p.jobs {
        let built = super::workload::build(ctx, job)?;
        if built.mix.deallocate > 0 {
            return Err(StepError::Error(format!(
                "job {}: a power-fail load has no deallocates (what a cut leaves of one is not judged)",
                built.name
            )));
        }
        jobs.push(built);
    }
    let id = super::ports::identify_controller(ctx)?;
    if method == PowerMethod::RemoveRescan && p.smart_counters {
        return Err(StepError::Skip(
            "the case judges SMART / Health's Power Cycles and Unsafe Shutdowns; the rig's PCI remove/rescan loses \
             no power, so they have nothing to count (looked at the rig's switch)"
                .into(),
        ));
    }
    // An orderly removal is a normal shutdown, then the power gone with the drive; a
    // surprise removal a cut the driver is not told of.
    let shutdown = p.shutdown || p.removal == Some(Removal::Orderly);
    let surprise = p.removal == Some(Removal::Surprise);
    let cap = read_cap(ctx);
    let ranges = ranges(ctx, &jobs, &id)?;
    let write_cache = p.write_cache.unwrap_or(WriteCacheSetting::AsFound);
    set_write_cache(ctx, &id, write_cache)?;
    let survival = if method == PowerMethod::RemoveRescan {
        Survival::Completed(
            "the Linux driver shut the controller down normally when the function was removed (§7.6.2)".into(),
        )
    } else {
        survival(ctx, &id, shutdown)?
    };
    if cap.is_none() {
        ctx.log.push(
            "power_fail: CSTS.RDY is not visible (the kernel's driver enables the controller): CAP.TO is not judged; \
             the time back is power-on to the controller live with its namespaces (enumeration and probe included)"
                .into(),
        );
    }
    ctx.log.push(format!(
        "power_fail: {cycles} cycles by {}, cut within {} ms of the load's start{}; durable: {}",
        match p.removal {
            Some(Removal::Surprise) => "surprise removal (the drive pulled under load, the driver not told)".into(),
            Some(Removal::Orderly) => "orderly removal (I/O stopped, every controller shut down, then pulled)".into(),
            None => format!("{method:?}"),
        },
        cut_within_ns / 1_000_000,
        if shutdown { ", after a normal shutdown" } else { "" },
        match &survival {
            Survival::Flushed => "what FUA and Flush made durable".to_string(),
            Survival::Completed(why) => format!("every completed write ({why})"),
        }
    ));
    // The queues are planned once: every cycle's workload runs on the same plan.
    let mut plan = Workload::new(jobs, ctx.seed, true);
    let specs: Vec<QueueSpec> = super::workload::fit_queues(ctx, &mut plan);
    let (jobs, queues) = (plan.jobs, plan.queues);
    let mut floor = std::mem::take(&mut ctx.map);
    let mut tally = Tally::default();
    let bar = progress_bar(cycles);
    let ctx_seed = ctx.seed;
    let mut draws = Draws::new(ctx_seed ^ 0x706f_7765_725f_6661);
    let mut journal = open_journal(ctx, &ranges, &survival, shutdown)?;
    // What a removal must give back: read only for removal campaigns.
    let before = match p.removal {
        Some(_) => Some(identities(ctx, &ranges)?),
        None => None,
    };
    let mut late: Option<Failure> = None;
    let result = (|| {
        establish_floor(ctx, &ranges, cap.as_ref(), &id, write_cache, &mut floor, ctx_seed)?;
        for cycle in 1..=cycles as u64 {
            let cycle_seed = draws.next_u64();
            let cut_at = 1 + Draws::new(cycle_seed).below(cut_within_ns);
            let mut work = Workload::new(jobs.clone(), cycle_seed, shutdown || surprise);
            work.queues = queues.clone();
            let mut map = floor.clone();
            let mut ledger = Ledger::default();
            let smart_before = smart_log(ctx, "before the cut")?;
            let stop = if shutdown || surprise { Stop::AtEnd } else { Stop::At(cut_at) };
            if let Some(j) = journal.as_mut() {
                write_floor(j.path(), &floor).map_err(StepError::Error)?;
                j.push(&Record::Cycle { cycle, seed: cycle_seed });
                j.sync().map_err(StepError::Error)?;
            }
            let mut io = ctx.device.queued_io(&specs)?;
            let mut pull = |io: &mut dyn QueuedIo| -> Result<(), EngineError> { Ok(io.pull_drive(cycle_seed)?) };
            let during = surprise.then_some(During { after_ns: cut_at, action: &mut pull, removes_drive: true });
            let ran = match journal.as_mut() {
                Some(file) => {
                    let mut both = Both(&mut ledger, file);
                    engine::run_during(io.as_mut(), &work, &mut map, &mut both, stop, &|| None, &mut |_| {}, during)
                }
                None => {
                    engine::run_during(io.as_mut(), &work, &mut map, &mut ledger, stop, &|| None, &mut |_| {}, during)
                }
            };
            // What the journal knows reaches the file before the power goes.
            if let Some(j) = journal.as_mut() {
                j.sync().map_err(StepError::Error)?;
            }
            let outcome = match ran {
                Ok(o) => o,
                Err(EngineError::Device(e)) => {
                    if surprise && e.controller_stopped() {
                        // Pulled, and the driver did not find the controller gone.
                        io.abandon();
                        let failure = removal_failure(ctx, &work, cycle, e);
                        reinsert_after_failure(ctx);
                        return Err(failure);
                    }
                    drop(io);
                    return Err(engine_failure(ctx, &work, e));
                }
                Err(e) => return Err(StepError::Error(e.to_string())),
            };
            tally.in_flight.push(ledger.in_flight() as u64);
            if surprise {
                let Some(seen_ns) = outcome.removal_seen_ns else {
                    drop(io);
                    return Err(StepError::Error(format!(
                        "cycle {cycle}: the load ended ({:.3} s) before the drive was due to be pulled {:.3} ms into \
                         it: make its jobs longer",
                        outcome.elapsed_ns as f64 / 1e9,
                        cut_at as f64 / 1e6
                    )));
                };
                tally.removal_seen_ns.push(seen_ns);
                tally.ended_in_error.push(outcome.in_flight_at_stop.len() as u64);
            }
            // Whatever is judged of the load or the shutdown, the drive is powered on again
            // before the case ends.
            let judged = if surprise {
                io.abandon();
                super::workload::verdict(ctx, &work, &outcome)
            } else if shutdown {
                io.close()?;
                let mut judged = super::workload::verdict(ctx, &work, &outcome);
                let shutdown = if p.removal == Some(Removal::Orderly) {
                    ctx.device.remove_orderly(cycle_seed)?
                } else {
                    ctx.device.shutdown_then_power_off(cycle_seed)?
                };
                if let (Ok(()), Err(reason), None) = (&judged, shutdown.complete, &shutdown.unseen) {
                    judged = Err(ctx.fail_rule(
                        rules::normal_shutdown(),
                        format!("cycle {cycle}: CC.SHN = 01b (normal shutdown) with no command in flight"),
                        reason,
                        "CSTS.SHST = 10b (shutdown processing complete) within CAP.TO",
                    ));
                }
                judged
            } else {
                io.power_cut(cycle_seed)?;
                super::workload::verdict(ctx, &work, &outcome)
            };
            // Synced with the next cycle's first record (or at the end): a reader that
            // lacks it judges the cycle as one whose cut nvtest did not live to record.
            if let Some(j) = journal.as_mut() {
                j.push(&Record::Cut { cycle });
            }
            let on = power_on(ctx, cycle, cap.as_ref(), p.removal.is_some())?;
            judged?;
            if let Some(before) = &before {
                same_drive(ctx, cycle, before, &ranges)?;
            }
            // A warning (a claim judged through the kernel) does not end the campaign.
            match judge_ready(ctx, cycle, &on, cap.as_ref()) {
                Err(StepError::Warning(f)) => {
                    late.get_or_insert(f);
                }
                other => other?,
            }
            let media = media_ready(ctx, &ranges[0])?;
            tally.ready_ns.extend(on.ready_ns);
            tally.back_ns.push(on.since_power_on_ns);
            tally.link_up_ns.extend(on.link_up_ns);
            tally.enumerated_ns.extend(on.enumerated_ns);
            tally.media_ready_ns.push(on.since_power_on_ns + media);
            set_write_cache(ctx, &id, write_cache)?;
            let smart_after = smart_log(ctx, "after power-on")?;
            if p.smart_counters && method == PowerMethod::Cut {
                judge_counters(ctx, cycle, &smart_before, &smart_after, shutdown)?;
            }
            let started = Instant::now();
            let qid = io_queue(ctx)?;
            let device = &mut *ctx.device;
            let verified = verify(
                Broken::Integrity,
                &ranges,
                &ledger,
                &survival,
                &floor,
                &mut map,
                cycle_seed,
                VERIFY_BLOCKS.min(max_blocks(ctx.facts.transfer_bytes, &ranges)),
                &mut copied(|nsid, lba, n, buf: &mut [u8]| read(device, qid, nsid, lba, n, buf)),
            )?;
            tally.verify_wall += started.elapsed();
            tally.cycles = cycle;
            tally.blocks_judged += verified.blocks_judged;
            tally.bytes_judged += verified.bytes_judged;
            tally.survived += verified.survived;
            tally.rolled_back += verified.rolled_back;
            bar.set_position(cycle);
            bar.set_message(format!(
                "{} blocks verified, {:.0} MB/s",
                tally.blocks_judged,
                tally.bytes_judged as f64 / tally.verify_wall.as_secs_f64().max(1e-9) / 1e6
            ));
            if !verified.findings.is_empty() {
                return Err(findings_failure(ctx, cycle, &ledger, &verified.findings, &survival, shutdown));
            }
            // Synced with the next cycle's first record, after the floor it begins from
            // is in place: a reader that lacks it judges this cycle again, against that
            // floor (what was read back now), with the same verdict.
            if let Some(j) = journal.as_mut() {
                j.push(&Record::Verified { cycle });
            }
            floor = map;
        }
        if let Some(j) = journal.as_mut() {
            j.sync().map_err(StepError::Error)?;
        }
        match late.take() {
            Some(f) => Err(StepError::Warning(f)),
            None => Ok(()),
        }
    })();
    bar.finish_and_clear();
    ctx.map = floor;
    record_figures(ctx, &tally);
    judge_claims(ctx, &result, &tally, &survival, p.removal);
    if method == PowerMethod::RemoveRescan {
        return remove_rescan_verdict(result, &tally);
    }
    result
}

/// What identifies the drive and the namespaces of the load, compared after every
/// reinsertion.
#[derive(PartialEq)]
struct Identities {
    sn: [u8; 20],
    mn: [u8; 40],
    subnqn: [u8; 256],
    /// (NSID, NGUID, EUI64) of each namespace of the load.
    namespaces: Vec<(u32, [u8; 16], [u8; 8])>,
}

fn identities(ctx: &mut CaseContext<'_>, ranges: &[Range]) -> StepResult<Identities> {
    let id = super::ports::identify_controller(ctx)?;
    let mut namespaces = Vec::new();
    for nsid in ranges.iter().map(|r| r.nsid) {
        if namespaces.iter().any(|(n, _, _)| *n == nsid) {
            continue;
        }
        let mut ns = IdentifyNamespace::new_zeroed();
        let what = format!("Identify Namespace NSID {nsid}");
        let c = ctx.admin(&what, identify(Cns::Namespace, nsid, 0), Data::FromDevice(ns.as_mut_bytes()))?;
        ctx.require_success(&what, &c)?;
        namespaces.push((nsid, ns.nguid, ns.eui64));
    }
    Ok(Identities { sn: id.sn, mn: id.mn, subnqn: id.subnqn, namespaces })
}

/// The drive reinserted is the drive pulled: the subsystem's and the namespaces'
/// identifiers as before the campaign.
fn same_drive(ctx: &mut CaseContext<'_>, cycle: u64, before: &Identities, ranges: &[Range]) -> StepResult {
    let after = identities(ctx, ranges)?;
    if after == *before {
        return Ok(());
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim_end_matches([' ', '\0']).to_string();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut changed = Vec::new();
    for (name, was, now) in [("SN", &before.sn[..], &after.sn[..]), ("MN", &before.mn, &after.mn)] {
        if was != now {
            changed.push(format!("{name} `{}` became `{}`", text(was), text(now)));
        }
    }
    if before.subnqn != after.subnqn {
        changed.push(format!("SUBNQN `{}` became `{}`", text(&before.subnqn), text(&after.subnqn)));
    }
    for ((nsid, nguid, eui64), (_, nguid2, eui642)) in before.namespaces.iter().zip(&after.namespaces) {
        if nguid != nguid2 {
            changed.push(format!("NSID {nsid} NGUID {} became {}", hex(nguid), hex(nguid2)));
        }
        if eui64 != eui642 {
            changed.push(format!("NSID {nsid} EUI64 {} became {}", hex(eui64), hex(eui642)));
        }
    }
    Err(ctx.fail_rule(
        rules::same_drive_after_reinsertion(),
        format!("cycle {cycle}: Identify Controller and Identify Namespace after the drive was reinserted"),
        changed.join("; "),
        "the identifiers the drive reported before it was pulled",
    ))
}

/// A surprise removal the driver did not see: its commands ran into their timeout (the
/// function still answering) or the transport broke.
fn removal_failure(ctx: &mut CaseContext<'_>, work: &Workload, cycle: u64, e: DeviceError) -> StepError {
    ctx.fail_rule(
        rules::removed_drive_answers_nothing(),
        format!(
            "cycle {cycle}: the drive pulled from its slot under load ({}), the driver left to find out",
            super::workload::describe(work)
        ),
        e.to_string(),
        "CSTS reading all ones (the function gone) and every outstanding command ended in an error within the \
         command timeout",
    )
}

/// After a failed surprise removal, the drive back in its slot for the cases after.
fn reinsert_after_failure(ctx: &mut CaseContext<'_>) {
    if let Err(e) = ctx.device.reinsert(READY_GRACE) {
        ctx.controller_lost = true;
        ctx.log.push(format!("reinserting the drive after the failed removal: {e}"));
    }
}

/// What the rig's PCI remove/rescan fallback said: every verdict says the power was never
/// lost. A campaign without findings is a warning, not a pass: it shows that the data
/// survived the driver's normal shutdown and a re-enumeration, not a power loss.
fn remove_rescan_verdict(result: StepResult, tally: &Tally) -> StepResult {
    const LABEL: &str = "by PCI remove/rescan, the rig's fallback: no power was lost (the Linux driver shut the \
                         controller down normally before the function was removed)";
    match result {
        Ok(()) => Err(StepError::Warning(Failure {
            rule: rules::power_fail_integrity(),
            sent: format!("{} power cycles {LABEL}", tally.cycles),
            observed: format!("no finding: {} blocks judged, each held what it had to", tally.blocks_judged),
            expected: "the same after power losses: give --rig power_off / power_on commands that cut the power".into(),
        })),
        Err(StepError::Fail(mut f)) => {
            f.sent = format!("{LABEL}; {}", f.sent);
            Err(StepError::Fail(f))
        }
        other => other,
    }
}

/// The campaign's journal file when the run keeps journals (`--journal DIR`):
/// `DIR/SUITE--CASE.nvtj`, its header naming the target, the case, the ranges and what
/// had to survive, so that `nvtest resume` can judge a cycle nvtest did not live to.
fn open_journal(
    ctx: &mut CaseContext<'_>,
    ranges: &[Range],
    survival: &Survival,
    shutdown: bool,
) -> StepResult<Option<FileJournal>> {
    let Some(setup) = ctx.journal.clone() else { return Ok(None) };
    std::fs::create_dir_all(&setup.dir)
        .map_err(|e| StepError::Error(format!("journal directory {}: {e}", setup.dir.display())))?;
    let name: String = ctx
        .case_name
        .replace("::", "--")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "-_.=".contains(c) { c } else { '_' })
        .collect();
    let path = setup.dir.join(format!("{name}.nvtj"));
    let metadata_size = |nsid: u32| ctx.set.iter().rev().find(|e| e.nsid == nsid).map_or(0, |e| e.metadata_size);
    let header = Header {
        format: FORMAT,
        target: setup.target,
        case: ctx.case_name.clone(),
        seed: ctx.seed,
        ranges: ranges
            .iter()
            .map(|r| JournalRange {
                nsid: r.nsid,
                first_lba: r.first_lba,
                blocks: r.blocks,
                block_size: r.block_size.bytes() as u64,
                metadata_size: metadata_size(r.nsid),
            })
            .collect(),
        every_completed_write: match survival {
            Survival::Flushed => None,
            Survival::Completed(why) => Some(why.clone()),
        },
        shutdown,
    };
    let file = FileJournal::create(&path, &header).map_err(StepError::Error)?;
    ctx.log.push(format!("power_fail: journal {} (nvtest resume reads it)", path.display()));
    Ok(Some(file))
}

/// The floor the first cycle starts from: what the case wrote before the campaign, made
/// durable by a normal shutdown and a power cycle (nothing may be lost, §7.6.2), then read
/// back. From then on every floor is what was read back after a power-on: on the media.
fn establish_floor(
    ctx: &mut CaseContext<'_>,
    ranges: &[Range],
    cap: Option<&Cap>,
    id: &IdentifyController,
    write_cache: WriteCacheSetting,
    floor: &mut crate::data::HostMap,
    seed: u64,
) -> StepResult {
    let shutdown = ctx.device.shutdown_then_power_off(seed)?;
    let on = power_on(ctx, 0, cap, false)?;
    if let (Err(reason), None) = (shutdown.complete, &shutdown.unseen) {
        return Err(ctx.fail_rule(
            rules::normal_shutdown(),
            "before the campaign: CC.SHN = 01b (normal shutdown) with no command in flight",
            reason,
            "CSTS.SHST = 10b (shutdown processing complete) within CAP.TO",
        ));
    }
    ctx.log.push(format!(
        "power_fail: before the campaign a normal shutdown and a power cycle ({} after {:.1} ms){}",
        if on.ready_ns.is_some() { "ready" } else { "the controller live" },
        on.ready_ns.unwrap_or(on.since_power_on_ns) as f64 / 1e6,
        shutdown.unseen.as_ref().map(|why| format!("; shutdown status not judged: {why}")).unwrap_or_default()
    ));
    set_write_cache(ctx, id, write_cache)?;
    let qid = io_queue(ctx)?;
    let per_read = VERIFY_BLOCKS.min(max_blocks(ctx.facts.transfer_bytes, ranges));
    let device = &mut *ctx.device;
    let mut map = floor.clone();
    let survival = Survival::Completed("a normal shutdown completed before the power went (§7.6.2)".into());
    let verified = verify(
        Broken::Durability(Durable::Completion),
        ranges,
        &Ledger::default(),
        &survival,
        floor,
        &mut map,
        seed,
        per_read,
        &mut copied(|nsid, lba, n, buf: &mut [u8]| read(device, qid, nsid, lba, n, buf)),
    )?;
    if !verified.findings.is_empty() {
        return Err(findings_failure(ctx, 0, &Ledger::default(), &verified.findings, &survival, true));
    }
    *floor = map;
    Ok(())
}

/// Powers the drive on, or puts it back in its slot after a removal (`reinsert`): a
/// controller not ready even after the grace fails CAP.TO's rule.
fn power_on(
    ctx: &mut CaseContext<'_>,
    cycle: u64,
    cap: Option<&Cap>,
    reinsert: bool,
) -> StepResult<nvme::driver::PowerOn> {
    let on = if reinsert { ctx.device.reinsert(READY_GRACE) } else { ctx.device.power_on(READY_GRACE) };
    on.map_err(|e| match e {
        e @ DeviceError::Driver(_) => ctx.fail_rule(
            rules::ready_within_cap_to(),
            format!("cycle {cycle}: power on, CC.EN = 1"),
            e.to_string(),
            match cap {
                Some(cap) => format!("CSTS.RDY = 1 within CAP.TO ({} ms)", cap.timeout_ms()),
                None => "CSTS.RDY = 1 within CAP.TO".to_string(),
            },
        ),
        e => StepError::from(e),
    })
}

/// The failure of the engine's device error: a controller that stopped answering fails
/// the command-completion rule; anything else is nvtest's error.
fn engine_failure(ctx: &mut CaseContext<'_>, work: &Workload, e: DeviceError) -> StepError {
    if e.controller_stopped() {
        ctx.controller_lost = true;
        return ctx.fail_rule(
            rules::command_completes(),
            format!("the power-fail load's commands ({})", super::workload::describe(work)),
            e.to_string(),
            "a completion queue entry for every command",
        );
    }
    StepError::from(e)
}

fn progress_bar(cycles: u32) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(Some(cycles as u64), indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template("power_fail: cycle {pos}/{len} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// CAP, where nvtest's driver owns the registers; `None` on a kernel target.
fn read_cap(ctx: &mut CaseContext<'_>) -> Option<Cap> {
    let regs = ctx.device.registers()?;
    regs.read64(offset::CAP).ok().map(Cap::from_bits)
}

/// What `nvtest resume` judged of the cycle a campaign did not live to verify.
#[derive(Debug, Default)]
pub struct Resumed {
    pub cycle: u64,
    /// The cycle had been verified before nvtest stopped: nothing was left to judge.
    pub verified_before: bool,
    /// The journal holds every record of the cycle up to its cut.
    pub complete: bool,
    pub blocks_judged: u64,
    pub survived: u64,
    pub rolled_back: u64,
}

/// Judges the last cycle of a journalled campaign on the drive as it is now (powered on
/// again after nvtest, the host or the drive lost power): every block of the journal's
/// ranges against the floor its cycle began from and the writes the journal knows, by
/// the rules of an uninterrupted cycle. A block holding a write of the cycle newer than
/// the journal's last record (records not yet in the file when nvtest died) is not
/// judged; everything else is.
pub fn resume(
    ctx: &mut CaseContext<'_>,
    replay: &crate::power::journal_file::Replay,
    floor: &crate::data::HostMap,
) -> StepResult<Resumed> {
    let Some(last) = replay.last_cycle() else {
        return Err(StepError::Skip(
            "the journal holds no cycle: the campaign stopped before its first cut (looked at every record)".into(),
        ));
    };
    let mut resumed =
        Resumed { cycle: last.cycle, verified_before: last.verified, complete: last.cut, ..Resumed::default() };
    if last.verified {
        return Ok(resumed);
    }
    let header = &replay.header;
    let id = super::ports::identify_controller(ctx)?;
    let mut ranges = Vec::new();
    for r in &header.ranges {
        let nsid = r.nsid;
        super::namespaces::take_active(ctx, nsid, 0)?;
        let e = ctx.set.last().cloned().ok_or_else(|| StepError::Error(format!("NSID {nsid} is not active")))?;
        // A namespace formatted otherwise since the campaign holds none of its blocks:
        // judging it would blame the drive for the reformat.
        if (e.block_size, e.metadata_size) != (r.block_size, r.metadata_size) {
            return Err(StepError::Error(format!(
                "NSID {nsid} is now formatted {} + {} bytes of metadata per block, the campaign ran on {} + {}: \
                 it was formatted since, nothing of the journal's range is on it",
                e.block_size, e.metadata_size, r.block_size, r.metadata_size
            )));
        }
        if r.first_lba.saturating_add(r.blocks) > e.nsze || e.block_size == 0 {
            return Err(StepError::Error(format!(
                "NSID {nsid} is now {} blocks of {} bytes: the journal's range {}+{} is not on it",
                e.nsze, e.block_size, r.first_lba, r.blocks
            )));
        }
        ranges.push(range_for(ctx, &id, nsid, r.first_lba, r.blocks, e.block_size, e.dealloc_read)?);
    }
    let survival = match &header.every_completed_write {
        Some(why) => Survival::Completed(why.clone()),
        None => Survival::Flushed,
    };
    ctx.log.push(format!(
        "resume: cycle {} of {} ({} records{}), {} ranges",
        last.cycle,
        header.case,
        replay.records.len(),
        if last.cut { ", complete up to the cut" } else { "; nvtest stopped before the cut" },
        ranges.len()
    ));
    let qid = io_queue(ctx)?;
    let per_read = VERIFY_BLOCKS.min(max_blocks(ctx.facts.transfer_bytes, &ranges));
    let device = &mut *ctx.device;
    let mut map = floor.clone();
    let verified = verify(
        Broken::Integrity,
        &ranges,
        &last.ledger,
        &survival,
        floor,
        &mut map,
        last.seed,
        per_read,
        &mut copied(|nsid, lba, n, buf: &mut [u8]| read(device, qid, nsid, lba, n, buf)),
    )?;
    resumed.blocks_judged = verified.blocks_judged;
    resumed.survived = verified.survived;
    resumed.rolled_back = verified.rolled_back;
    if !verified.findings.is_empty() {
        let mut failure =
            findings_failure(ctx, last.cycle, &last.ledger, &verified.findings, &survival, header.shutdown);
        if let StepError::Fail(f) = &mut failure {
            f.sent = format!(
                "nvtest resume: the campaign stopped in cycle {} ({}), the journal's writes judged on the drive as \
                 it is now; {}",
                last.cycle,
                if last.cut { "after its cut" } else { "before nvtest recorded a cut" },
                f.sent
            );
        }
        return Err(failure);
    }
    Ok(resumed)
}

/// One range of the load with the namespace's atomic unit (NAWUPF where NSFEAT bit 1
/// defines it and it is not 0, else the controller's AWUPF, NVMe 1.4 Figure 245).
#[allow(clippy::too_many_arguments)]
fn range_for(
    ctx: &mut CaseContext<'_>,
    id: &IdentifyController,
    nsid: u32,
    first_lba: u64,
    blocks: u64,
    block_size: u64,
    dealloc: crate::data::DeallocatedRead,
) -> StepResult<Range> {
    let mut ns = IdentifyNamespace::new_zeroed();
    let what = format!("Identify Namespace NSID {nsid}");
    let c = ctx.admin(&what, identify(Cns::Namespace, nsid, 0), Data::FromDevice(ns.as_mut_bytes()))?;
    ctx.require_success(&what, &c)?;
    let unit = if ns.nsfeat.nsabp() && ns.nawupf != 0 { ns.nawupf } else { id.awupf };
    let block_size = BlockSize::new(block_size as u32).map_err(|e| StepError::Error(e.to_string()))?;
    Ok(Range { nsid, first_lba, blocks, block_size, dealloc, atomic_blocks: unit as u64 + 1 })
}

/// Each job's range, with the namespace's atomic unit; two jobs on overlapping ranges
/// of one namespace are read once.
fn ranges(ctx: &mut CaseContext<'_>, jobs: &[crate::load::Job], id: &IdentifyController) -> StepResult<Vec<Range>> {
    let mut out: Vec<Range> = Vec::new();
    for j in jobs {
        let nsid = j.namespace.nsid;
        let range = range_for(ctx, id, nsid, j.first_lba, j.blocks, j.namespace.block_size, j.namespace.dealloc_read)?;
        match out.iter_mut().find(|r| r.nsid == nsid) {
            Some(r) => {
                let end = (r.first_lba + r.blocks).max(range.first_lba + range.blocks);
                r.first_lba = r.first_lba.min(range.first_lba);
                r.blocks = end - r.first_lba;
            }
            None => out.push(range),
        }
    }
    Ok(out)
}

/// Sets the volatile write cache as the campaign asks (Set Features 06h, not saved).
fn set_write_cache(ctx: &mut CaseContext<'_>, id: &IdentifyController, setting: WriteCacheSetting) -> StepResult {
    let wce = match setting {
        WriteCacheSetting::AsFound => return Ok(()),
        WriteCacheSetting::On => true,
        WriteCacheSetting::Off => false,
    };
    if !id.vwc.present() {
        if wce {
            return Err(StepError::Skip(
                "the case runs with the volatile write cache on; Identify Controller VWC bit 0 reports none".into(),
            ));
        }
        return Ok(());
    }
    let what = format!("Set Features Volatile Write Cache (06h) WCE={}", wce as u8);
    let cmd = set_features(FeatureId::VolatileWriteCache, false, 0, VolatileWriteCache::new().with_wce(wce).into());
    let c = ctx.admin(&what, cmd, Data::None)?;
    ctx.require_success(&what, &c)
}

/// Whether every completed write must survive, and why.
fn survival(ctx: &mut CaseContext<'_>, id: &IdentifyController, shutdown: bool) -> StepResult<Survival> {
    if shutdown {
        return Ok(Survival::Completed("a normal shutdown completed before the power went (§7.6.2)".into()));
    }
    if let Some(claims) = ctx.claims.clone() {
        if let Some(c) = claims.power_loss_protection.as_ref().filter(|c| c.value) {
            return Ok(Survival::Completed(format!(
                "claim {}",
                claims.cite(c, "power_loss_protection: every completed write survives a power loss")
            )));
        }
    }
    if !id.vwc.present() {
        return Ok(Survival::Completed("Identify Controller VWC bit 0 cleared: no volatile write cache".into()));
    }
    let what = "Get Features Volatile Write Cache (06h), current";
    let c = ctx.admin(what, get_features(FeatureId::VolatileWriteCache, Select::Current, 0, 0), Data::None)?;
    ctx.require_success(what, &c)?;
    if !VolatileWriteCache::from_bits(c.dw0).wce() {
        return Ok(Survival::Completed("the volatile write cache is disabled (Feature 06h WCE cleared)".into()));
    }
    Ok(Survival::Flushed)
}

fn judge_counters(
    ctx: &CaseContext<'_>,
    cycle: u64,
    before: &SmartHealthLog,
    after: &SmartHealthLog,
    shutdown: bool,
) -> StepResult {
    let cycles = after.power_cycles.get().wrapping_sub(before.power_cycles.get());
    let unsafe_ = after.unsafe_shutdowns.get().wrapping_sub(before.unsafe_shutdowns.get());
    let wanted_unsafe = if shutdown { 0 } else { 1 };
    if cycles == 1 && unsafe_ == wanted_unsafe {
        return Ok(());
    }
    let rule = if shutdown && cycles == 1 { rules::normal_shutdown() } else { rules::smart_power_counters() };
    Err(ctx.fail_rule(
        rule,
        format!(
            "cycle {cycle}: {}, then Get Log Page 02h before and after",
            if shutdown { "a normal shutdown and a power cycle" } else { "a power loss under load" }
        ),
        format!(
            "Power Cycles {} -> {} (+{cycles}), Unsafe Shutdowns {} -> {} (+{unsafe_})",
            before.power_cycles.get(),
            after.power_cycles.get(),
            before.unsafe_shutdowns.get(),
            after.unsafe_shutdowns.get()
        ),
        format!("Power Cycles +1, Unsafe Shutdowns +{wanted_unsafe}"),
    ))
}

/// CSTS.RDY within CAP.TO where nvtest enabled the controller, and within the claimed
/// ready time: CSTS.RDY's time, or on a kernel target power-on to the controller live.
fn judge_ready(ctx: &CaseContext<'_>, cycle: u64, on: &nvme::driver::PowerOn, cap: Option<&Cap>) -> StepResult {
    let ms = |ns: u64| ns as f64 / 1e6;
    if let (Some(ready_ns), Some(cap)) = (on.ready_ns, cap) {
        if ready_ns > cap.timeout_ms() * 1_000_000 {
            return Err(ctx.fail_rule(
                rules::ready_within_cap_to(),
                format!("cycle {cycle}: power on, CC.EN = 1"),
                format!("CSTS.RDY = 1 after {:.1} ms", ms(ready_ns)),
                format!("CSTS.RDY = 1 within CAP.TO = {} ({} ms)", cap.to(), cap.timeout_ms()),
            ));
        }
    }
    let Some(claims) = ctx.claims.as_ref() else { return Ok(()) };
    let Some(claim) = claims.ready_time.as_ref() else { return Ok(()) };
    let claimed = claim.value.as_nanos() as u64;
    let (sent, observed, took) = match on.ready_ns {
        Some(ns) => ("power on after a power loss, CC.EN = 1", format!("CSTS.RDY = 1 after {:.1} ms", ms(ns)), ns),
        None => (
            "power on after a power loss (the kernel's driver enables the controller)",
            format!("the controller live after {:.1} ms", ms(on.since_power_on_ns)),
            on.since_power_on_ns,
        ),
    };
    if took > claimed {
        let failure = Failure {
            rule: Rule {
                section: format!("claim {}", claims.cite(claim, "ready_time")),
                text: "the drive's datasheet ready time after power-on (a claim, not a rule of the specification)"
                    .into(),
            },
            sent: format!("cycle {cycle}: {sent}"),
            observed,
            expected: format!("ready within {:.1} ms", ms(claimed)),
        };
        // Through the kernel the time includes the rig's settle, the bus rescan and the
        // driver's probe, none of them the drive's: a warning, not the drive's failure.
        return Err(if on.ready_ns.is_some() { StepError::Fail(failure) } else { StepError::Warning(failure) });
    }
    Ok(())
}

/// From the controller ready to the first successful read of the first range (ns on
/// the target's clock): when the media serves data again.
fn media_ready(ctx: &mut CaseContext<'_>, range: &Range) -> StepResult<u64> {
    let mut io = ctx.device.queued_io(&[QueueSpec { depth: 1, priority: QueuePriority::Medium, port: 0 }])?;
    let start = io.now_ns();
    let bytes = range.block_size.bytes();
    let mut result = None;
    io.submit(0, nvm::read(range.nsid, range.first_lba, 0), Transfer::FromDevice(bytes), Transfer::None)?;
    io.ring(0)?;
    while result.is_none() {
        io.poll(0, &mut |r| result = Some(r.completion.status()))?;
        if result.is_some() {
            break;
        }
        if let Some(e) = io.expired(0) {
            return Err(StepError::from(e));
        }
        let now = io.now_ns();
        io.idle_until(now + 100_000)?;
    }
    let took = io.now_ns().saturating_sub(start);
    io.close()?;
    match result {
        Some(s) if s.is_success() => Ok(took),
        Some(s) => Err(ctx.fail_rule(
            rules::io_within_namespace(),
            format!("the first Read after power-on: NSID {} SLBA {:#x}", range.nsid, range.first_lba),
            s.to_string(),
            "Successful Completion once CSTS.RDY is 1",
        )),
        None => Err(StepError::Error("the first read after power-on completed without a status".into())),
    }
}

fn io_queue(ctx: &CaseContext<'_>) -> StepResult<u16> {
    ctx.device.io_queues().first().copied().ok_or_else(|| StepError::Error("no I/O queue after power-on".into()))
}

fn max_blocks(mdts: Option<u64>, ranges: &[Range]) -> u64 {
    let largest = ranges.iter().map(|r| r.block_size.bytes() as u64).max().unwrap_or(512);
    mdts.map_or(u64::MAX, |m| (m / largest).max(1))
}

fn read(
    device: &mut dyn nvme::device::Device,
    qid: u16,
    nsid: u32,
    lba: u64,
    n: u64,
    buf: &mut [u8],
) -> StepResult<()> {
    let c = device.io(qid, nvm::read(nsid, lba, (n - 1) as u16), Data::FromDevice(buf), Data::None)?;
    if !c.status().is_success() {
        return Err(StepError::Fail(Failure {
            rule: rules::io_within_namespace(),
            sent: format!("verification after the cut: Read NSID {nsid} SLBA {lba:#x} NLB {}", n - 1),
            observed: c.status().to_string(),
            expected: "Successful Completion (a read inside the namespace, within MDTS)".into(),
        }));
    }
    Ok(())
}

/// The rule a finding breaks.
fn rule_of(broken: &Broken, survival: &Survival, shutdown: bool) -> Rule {
    match broken {
        Broken::Durability(Durable::Fua | Durable::Flush(_)) => rules::flush_fua_durable(),
        Broken::Durability(Durable::Completion) if shutdown => rules::normal_shutdown(),
        Broken::Durability(Durable::Completion) => match survival {
            Survival::Completed(why) if why.starts_with("claim ") => Rule {
                section: why.split(" (").next().unwrap_or(why).to_string(),
                text: "the drive's datasheet power-loss protection: every completed write survives a power loss \
                       (a claim, not a rule of the specification)"
                    .into(),
            },
            _ => rules::no_volatile_cache_durable(),
        },
        Broken::Integrity => rules::power_fail_integrity(),
        Broken::Atomicity => rules::atomic_write_unit_power_fail(),
    }
}

/// The case's failure from a cycle's findings: the first finding's rule (data never
/// written first, then durability, then atomicity), every finding listed in the log.
fn findings_failure(
    ctx: &mut CaseContext<'_>,
    cycle: u64,
    ledger: &Ledger,
    findings: &[Finding],
    survival: &Survival,
    shutdown: bool,
) -> StepError {
    let rank = |f: &Finding| match f.broken {
        Broken::Integrity => 0,
        Broken::Durability(_) => 1,
        Broken::Atomicity => 2,
    };
    let mut sorted: Vec<&Finding> = findings.iter().collect();
    sorted.sort_by_key(|f| rank(f));
    let line = |f: &Finding| {
        let by = f.write.map(|w| format!(" ({})", ledger.writes[w].describe())).unwrap_or_default();
        let why = match &f.broken {
            Broken::Durability(Durable::Fua) => " — completed with FUA",
            Broken::Durability(Durable::Flush(_)) => " — completed before a Flush that completed",
            Broken::Durability(Durable::Completion) => " — completed",
            _ => "",
        };
        let lbas = match f.lbas.as_slice() {
            [one] => format!("LBA {one:#x}"),
            many => format!("LBAs {}", crate::power::verify::ranges_text(many)),
        };
        format!("NSID {} {lbas}{by}{why}: expected {}, found {}", f.nsid, f.expected, f.found)
    };
    ctx.log.push(format!("power_fail: cycle {cycle}: {} findings", findings.len()));
    for f in sorted.iter().take(LISTED) {
        ctx.log.push(format!("  {}", line(f)));
    }
    let first = sorted[0];
    let blocks: usize = findings.iter().map(|f| f.lbas.len()).sum();
    let how = match survival {
        Survival::Flushed => "a power loss under load".to_string(),
        Survival::Completed(why) => format!("a power loss under load; {why}"),
    };
    StepError::Fail(Failure {
        rule: rule_of(&first.broken, survival, shutdown),
        sent: format!("cycle {cycle}: {how}; every block of the load's ranges read back"),
        observed: format!("{} ({} findings, {blocks} blocks in all)", line(first), findings.len()),
        expected: "each block holds the newest write that had to survive, or a newer write of the cycle".into(),
    })
}

/// What the campaign showed of the claims it judges, for the run's claims summary: the
/// ready time (every power-on measured by CSTS.RDY), power-loss protection (when it is
/// what made every completed write one that must survive) and hot-plug (a removal
/// campaign: breached by a rule of the specification the campaign broke). A claim the
/// campaign failed on is breached with what was seen; one it measured without failing is
/// met.
fn judge_claims(
    ctx: &mut CaseContext<'_>,
    result: &StepResult,
    t: &Tally,
    survival: &Survival,
    removal: Option<Removal>,
) {
    use crate::claims::ClaimJudgement;
    let Some(claims) = ctx.claims.clone() else { return };
    let failure = match result {
        Err(StepError::Fail(f)) => Some(f),
        _ => None,
    };
    let ms = |ns: u64| ns as f64 / 1e6;
    if let Some(claim) = &claims.ready_time {
        let section = format!("claim {}", claims.cite(claim, "ready_time"));
        match failure {
            Some(f) if f.rule.section == section => {
                ctx.claim_judgements.push(ClaimJudgement::breached("ready_time", format!("{}: {}", f.sent, f.observed)))
            }
            _ if !t.ready_ns.is_empty() => ctx.claim_judgements.push(ClaimJudgement::met(
                "ready_time",
                format!(
                    "CSTS.RDY within {:.1} ms at most over {} power-ons",
                    ms(t.ready_ns.iter().copied().max().unwrap_or_default()),
                    t.ready_ns.len()
                ),
            )),
            _ => {}
        }
    }
    if matches!(survival, Survival::Completed(why) if why.starts_with("claim ")) {
        match failure {
            Some(f) if f.rule.text.contains("power-loss protection") => ctx
                .claim_judgements
                .push(ClaimJudgement::breached("power_loss_protection", format!("{}: {}", f.sent, f.observed))),
            _ if t.cycles > 0 => ctx.claim_judgements.push(ClaimJudgement::met(
                "power_loss_protection",
                format!(
                    "every completed write survived {} power losses under load ({} blocks judged)",
                    t.cycles, t.blocks_judged
                ),
            )),
            _ => {}
        }
    }
    if let (Some(how), Some(_)) = (removal, claims.hot_plug.as_ref().filter(|c| c.value)) {
        let how = match how {
            Removal::Surprise => "surprise",
            Removal::Orderly => "orderly",
        };
        match failure {
            // A rule of the specification broken in a removal campaign; another claim's
            // breach (the ready time) ended the campaign before hot-plug was judged.
            Some(f) if f.rule.section.starts_with("claim ") => {}
            Some(f) => ctx.claim_judgements.push(ClaimJudgement::breached(
                "hot_plug",
                format!("{how} removal: {} — {}: {}", f.rule.section, f.sent, f.observed),
            )),
            None if result.is_ok() && t.cycles > 0 => ctx.claim_judgements.push(ClaimJudgement::met(
                "hot_plug",
                format!(
                    "{} {how} removals and reinsertions, the drive the same and its data judged after each",
                    t.cycles
                ),
            )),
            None => {}
        }
    }
}

/// Campaign figures: cycles, writes in flight at each cut, blocks judged, ready times.
fn record_figures(ctx: &mut CaseContext<'_>, t: &Tally) {
    if t.cycles == 0 {
        return;
    }
    let mut figures = vec![
        Figure { name: "power_fail.cycles".into(), value: t.cycles as f64, unit: "cycles" },
        Figure { name: "power_fail.blocks_judged".into(), value: t.blocks_judged as f64, unit: "blocks" },
        Figure { name: "power_fail.blocks_survived".into(), value: t.survived as f64, unit: "blocks" },
        Figure { name: "power_fail.blocks_rolled_back".into(), value: t.rolled_back as f64, unit: "blocks" },
        Figure {
            name: "power_fail.verify_mb_per_s".into(),
            value: round3(t.bytes_judged as f64 / t.verify_wall.as_secs_f64().max(1e-9) / 1e6),
            unit: "MB/s",
        },
    ];
    let mut spread = |name: &str, values: &[u64], scale: f64, unit: &'static str| {
        let mut v = values.to_vec();
        v.sort_unstable();
        if v.is_empty() {
            return;
        }
        for (label, x) in [("min", v[0]), ("median", v[v.len() / 2]), ("max", v[v.len() - 1])] {
            figures.push(Figure { name: format!("power_fail.{name}.{label}"), value: round3(x as f64 / scale), unit });
        }
    };
    spread("writes_in_flight_at_cut", &t.in_flight, 1.0, "writes");
    spread("ready_ms", &t.ready_ns, 1e6, "ms");
    spread("power_on_to_up_ms", &t.back_ns, 1e6, "ms");
    spread("media_ready_ms", &t.media_ready_ns, 1e6, "ms");
    spread("slot_power_on_to_link_up_ms", &t.link_up_ns, 1e6, "ms");
    spread("slot_power_on_to_enumerated_ms", &t.enumerated_ns, 1e6, "ms");
    spread("removal_found_ms", &t.removal_seen_ns, 1e6, "ms");
    spread("commands_ended_by_removal", &t.ended_in_error, 1.0, "commands");
    ctx.figures.push(JobFigures {
        job: "power_fail".into(),
        window_ns: 0,
        simulated_clock: false,
        ops: Vec::new(),
        extra: figures,
    });
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
