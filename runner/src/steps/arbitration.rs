//! The arbitration checks (NVMe 1.4 §4.13 "Command Arbitration"): CAP.AMS and CC.AMS,
//! the Arbitration feature (01h), and, under saturation, the share of commands each
//! submission queue is served by its priority class. The shares are measured with the
//! workload engine: every queue is kept full (far deeper than the drive takes commands
//! at once), the first commands are a warm-up, and the load is stopped at an instant
//! rather than drained, so only commands the drive chose between are counted.
//!
//! A host sees completions, not the order the controller fetched commands in: a drive
//! that takes every queued command in at once and lets them wait inside serves all
//! queues alike under any mechanism. So the share cases are advisory (a warning).
//!
//! Every check that selects weighted round robin selects round robin again before it
//! ends, whatever its verdict. Kernel targets are skipped: the operating system's driver
//! owns CC and the queues.

use std::time::Duration;

use nvme::device::{Access, Data, DeviceError};
use nvme::driver::ArbitrationMechanism;
use nvme::queued::QueueSpec;
use nvme::spec::features::{get_features, set_features, Arbitration, FeatureId, Select};
use nvme::spec::queue::QueuePriority;
use nvme::spec::registers::{offset, Cap, Cc};

use super::{CaseContext, StepError, StepResult};
use crate::load::engine::{EngineError, Stop};
use crate::load::job::Namespace;
use crate::load::{End, Job, Mix, Pattern, Workload};
use crate::rules;

/// The weights set for the share checks: HPW 7, MPW 3, LPW 1 (8 : 4 : 2), burst 1.
const WEIGHTS: Arbitration = Arbitration::new().with_ab(0).with_lpw(1).with_mpw(3).with_hpw(7);
/// Commands each queue keeps outstanding (capped at CAP.MQES).
const DEPTH: u32 = 511;
/// How far a class's share may be from its weighted share (absolute).
const TOLERANCE: f64 = 0.05;
/// Share the weighted classes may still get while an urgent queue is full (the drive
/// may have taken commands before the urgent queue filled).
const URGENT_LEAK: f64 = 0.05;
const WARMUP: Duration = Duration::from_millis(10);
const MEASURE: Duration = Duration::from_millis(60);

/// Which arbitration check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    Selectable,
    Feature,
    WeightedShares,
    UrgentFirst,
    RoundRobinShares,
}

pub fn run(ctx: &mut CaseContext<'_>, check: Check) -> StepResult {
    if ctx.facts.access == Access::Kernel {
        return Err(StepError::Skip(
            "the operating system's driver owns CC and the I/O queues: arbitration is checked where nvtest's own \
             driver runs the controller"
                .into(),
        ));
    }
    let cap = read_cap(ctx)?;
    let needs_wrr = check != Check::RoundRobinShares;
    if needs_wrr && cap.ams() & 1 == 0 {
        return Err(StepError::Skip(format!(
            "CAP.AMS is {:02b}b: bit 0 (weighted round robin with urgent priority class) is not set",
            cap.ams()
        )));
    }
    if !needs_wrr {
        return shares(ctx, check);
    }
    select(ctx, ArbitrationMechanism::WeightedRoundRobinUrgent)?;
    let result = match check {
        Check::Selectable => selectable(ctx),
        Check::Feature => feature(ctx),
        _ => set_weights(ctx).and_then(|_| shares(ctx, check)),
    };
    let restored = select(ctx, ArbitrationMechanism::RoundRobin);
    result?;
    restored
}

fn read_cap(ctx: &mut CaseContext<'_>) -> StepResult<Cap> {
    let regs =
        ctx.device.registers().ok_or_else(|| StepError::Skip("the target's registers are not reachable".into()))?;
    let cap = regs.read64(offset::CAP).map_err(|e| StepError::Error(format!("reading CAP: {e}")))?;
    Ok(Cap::from_bits(cap))
}

fn select(ctx: &mut CaseContext<'_>, mechanism: ArbitrationMechanism) -> StepResult {
    ctx.log.push(format!("Controller Reset with CC.AMS = {:03b}b ({mechanism:?})", mechanism.ams()));
    match ctx.device.select_arbitration(mechanism) {
        Ok(()) => Ok(()),
        Err(DeviceError::Unsupported(reason)) => Err(StepError::Skip(reason)),
        Err(e) if e.controller_stopped() => {
            ctx.controller_lost = true;
            Err(ctx.fail_rule(
                rules::arbitration_selectable(),
                format!("CC.EN = 1 with CC.AMS = {:03b}b", mechanism.ams()),
                e.to_string(),
                "CSTS.RDY = 1 and the controller answering",
            ))
        }
        Err(e) => Err(ctx.fail_rule(
            rules::arbitration_selectable(),
            format!("CC.EN = 1 with CC.AMS = {:03b}b", mechanism.ams()),
            e.to_string(),
            "the controller ready with the arbitration mechanism selected",
        )),
    }
}

fn selectable(ctx: &mut CaseContext<'_>) -> StepResult {
    let regs =
        ctx.device.registers().ok_or_else(|| StepError::Skip("the target's registers are not reachable".into()))?;
    let cc = Cc::from_bits(regs.read32(offset::CC).map_err(|e| StepError::Error(format!("reading CC: {e}")))?);
    ctx.log.push(format!("CC = {:#010x}: AMS {:03b}b, EN {}", cc.into_bits(), cc.ams(), cc.en() as u8));
    if cc.ams() != 0b001 || !cc.en() {
        return Err(ctx.fail_rule(
            rules::arbitration_selectable(),
            "CC.EN = 1 with CC.AMS = 001b, then a read of CC",
            format!("CC.AMS {:03b}b, CC.EN {}", cc.ams(), cc.en() as u8),
            "CC.AMS 001b, CC.EN 1",
        ));
    }
    Ok(())
}

fn set_weights(ctx: &mut CaseContext<'_>) -> StepResult<Arbitration> {
    let what = format!(
        "Set Features Arbitration (01h): AB {}, LPW {}, MPW {}, HPW {}",
        WEIGHTS.ab(),
        WEIGHTS.lpw(),
        WEIGHTS.mpw(),
        WEIGHTS.hpw()
    );
    let c = ctx.admin(&what, set_features(FeatureId::Arbitration, false, 0, WEIGHTS.into_bits()), Data::None)?;
    ctx.require_success(&what, &c)?;
    Ok(WEIGHTS)
}

fn feature(ctx: &mut CaseContext<'_>) -> StepResult {
    let set = set_weights(ctx)?;
    let what = "Get Features Arbitration (01h), current";
    let c = ctx.admin(what, get_features(FeatureId::Arbitration, Select::Current, 0, 0), Data::None)?;
    ctx.require_success(what, &c)?;
    let got = Arbitration::from_bits(c.dw0);
    if (got.ab(), got.lpw(), got.mpw(), got.hpw()) != (set.ab(), set.lpw(), set.mpw(), set.hpw()) {
        return Err(ctx.fail_rule(
            rules::arbitration_feature(),
            what,
            format!("AB {}, LPW {}, MPW {}, HPW {} (DW0 {:#010x})", got.ab(), got.lpw(), got.mpw(), got.hpw(), c.dw0),
            format!("AB {}, LPW {}, MPW {}, HPW {}", set.ab(), set.lpw(), set.mpw(), set.hpw()),
        ));
    }
    Ok(())
}

/// The queues of a share check, and the share each should get.
fn plan(check: Check) -> Vec<(&'static str, QueuePriority, f64)> {
    let w = |v: u8| v as f64 + 1.0;
    let total = w(WEIGHTS.hpw()) + w(WEIGHTS.mpw()) + w(WEIGHTS.lpw());
    match check {
        Check::WeightedShares => vec![
            ("high", QueuePriority::High, w(WEIGHTS.hpw()) / total),
            ("medium", QueuePriority::Medium, w(WEIGHTS.mpw()) / total),
            ("low", QueuePriority::Low, w(WEIGHTS.lpw()) / total),
        ],
        Check::UrgentFirst => {
            vec![
                ("urgent", QueuePriority::Urgent, 1.0),
                ("high", QueuePriority::High, 0.0),
                ("low", QueuePriority::Low, 0.0),
            ]
        }
        _ => vec![
            ("queue-a", QueuePriority::Medium, 1.0 / 3.0),
            ("queue-b", QueuePriority::Medium, 1.0 / 3.0),
            ("queue-c", QueuePriority::Medium, 1.0 / 3.0),
        ],
    }
}

fn shares(ctx: &mut CaseContext<'_>, check: Check) -> StepResult {
    let Some(member) = ctx.set.first() else {
        return Err(StepError::Error(
            "the arbitration checks read from the case's first namespace; the set is empty".into(),
        ));
    };
    let namespace = Namespace {
        nsid: member.nsid,
        block_size: member.block_size,
        nsze: member.nsze,
        dealloc_read: member.dealloc_read,
        atomic: member.atomic,
    };
    let cap = read_cap(ctx)?;
    let depth = DEPTH.min(cap.mqes() as u32).max(1);
    let plan = plan(check);
    let jobs: Vec<Job> = plan
        .iter()
        .map(|(name, priority, _)| Job {
            name: name.to_string(),
            namespace,
            first_lba: 0,
            blocks: namespace.nsze.min(1 << 20),
            mix: Mix::READ,
            pattern: Pattern::Random,
            blocks_per_command: vec![1],
            queue_depth: depth,
            priority: *priority,
            port: 0,
            fua_percent: 0,
            rate: None,
            end: End::Commands(u64::MAX),
            warmup: WARMUP,
        })
        .collect();
    let work = Workload { jobs, seed: ctx.seed, drain: false };
    let specs: Vec<QueueSpec> =
        work.jobs.iter().map(|j| QueueSpec { depth, priority: j.priority, port: j.port }).collect();
    ctx.log.push(format!(
        "{} queues of {depth} random 1-block reads kept full for {} ms (the first {} ms not counted)",
        specs.len(),
        (WARMUP + MEASURE).as_millis(),
        WARMUP.as_millis()
    ));
    let mut map = std::mem::take(&mut ctx.map);
    let stop = Stop::At((WARMUP + MEASURE).as_nanos() as u64);
    let deadline = ctx.deadline;
    let result = super::workload::run(ctx, &work, &specs, &mut map, deadline, stop);
    ctx.map = map;
    let outcome = match result {
        Ok(o) => o,
        Err(EngineError::Device(DeviceError::Unsupported(r))) => return Err(StepError::Skip(r)),
        Err(e) => return Err(StepError::Error(e.to_string())),
    };
    for figures in &outcome.jobs {
        ctx.log.extend(figures.summary());
    }
    ctx.figures.extend(outcome.jobs.iter().cloned());
    let counts: Vec<u64> = outcome.jobs.iter().map(|j| j.op(crate::load::Op::Read).map_or(0, |o| o.commands)).collect();
    let total: u64 = counts.iter().sum();
    if total < 300 {
        return Err(StepError::Error(format!(
            "only {total} commands completed in the measured {} ms: too few to judge shares",
            MEASURE.as_millis()
        )));
    }
    let observed: Vec<String> = plan
        .iter()
        .zip(&counts)
        .map(|((name, _, _), &n)| format!("{name} {:.3} ({n})", n as f64 / total as f64))
        .collect();
    let expected: Vec<String> = plan.iter().map(|(name, _, share)| format!("{name} {share:.3}")).collect();
    ctx.log.push(format!("shares of {total} commands: {}", observed.join(", ")));
    let off = plan.iter().zip(&counts).any(|((_, _, share), &n)| {
        let got = n as f64 / total as f64;
        match check {
            Check::UrgentFirst => (*share == 1.0 && got < 1.0 - URGENT_LEAK) || (*share == 0.0 && got > URGENT_LEAK),
            _ => (got - share).abs() > TOLERANCE,
        }
    });
    if off {
        let rule = match check {
            Check::WeightedShares => rules::weighted_round_robin(),
            Check::UrgentFirst => rules::urgent_first(),
            _ => rules::round_robin_fair(),
        };
        let tolerance = if check == Check::UrgentFirst { URGENT_LEAK } else { TOLERANCE };
        return Err(ctx.fail_rule(
            rule,
            format!(
                "{} queues of {depth} random 1-block reads kept full, {} ms counted after a {} ms warm-up",
                plan.len(),
                MEASURE.as_millis(),
                WARMUP.as_millis()
            ),
            format!("shares {}", observed.join(", ")),
            format!("shares {} (within {tolerance:.2})", expected.join(", ")),
        ));
    }
    Ok(())
}
