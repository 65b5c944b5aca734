//! The arbitration checks (NVMe 1.4 §4.13 "Command Arbitration"): CAP.AMS and CC.AMS,
//! the Arbitration feature (01h), and, under saturation, the share of commands each
//! submission queue is served by its priority class. The shares are measured with the
//! workload engine: every queue is kept full (far deeper than the drive takes commands
//! at once), the first completions are a warm-up, and the load is stopped at an instant
//! rather than drained, so only commands the drive chose between are counted. The
//! measurement is by count, not by a time window ([`Stop::AfterCommands`]): it runs
//! until enough commands were counted, within a generous bound on the target's clock; a
//! target too slow for that bound (a busy host, QEMU) is skipped saying so, never blamed.
//!
//! A host sees completions, not the order the controller fetched commands in: a drive
//! that takes every queued command in at once and lets them wait inside serves all
//! queues alike under any mechanism. So shares off the weighted proportion are a warning
//! (the urgent and round robin cases are advisory; the weighted case warns itself). What
//! no such drive does is serve a class with a smaller weight more than one with a larger
//! weight: that order, judged beyond counting noise, is a failure of §4.13.2.
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
/// Completions not counted at the start: more than the three queues hold together
/// (3 × [`DEPTH`] = 1533), so the commands a drive took in before every queue was full
/// (and the first it completed while the others filled) are not counted.
const WARMUP_COMMANDS: u64 = 2_000;
/// Commands counted (completed after the warm-up, before the stop). A share is a
/// fraction of these, and two things move it off the share of service the arbiter gave:
/// a drive holds commands it fetched before completing them, at most a queue's depth,
/// so at each edge of the count a queue may be ahead or behind by up to [`DEPTH`]
/// (2 × 511 / 30,000 ≈ 0.034 at worst, for a drive that holds whole queues), and the
/// drive completing in an order of its own, which behaves like sampling noise of
/// standard deviation at most √(p(1 − p)/n) ≤ 0.5/√30,000 ≈ 0.003. Both stay within
/// [`TOLERANCE`] (0.05). With the 300 commands the check once took, the noise alone
/// was 0.029 and the edges could move a share by more than the whole tolerance.
const MEASURED_COMMANDS: u64 = 30_000;
/// How long the measurement may take at most, on the target's clock (simulated on the
/// sim, where it takes milliseconds; monotonic on QEMU and real drives): 32,000
/// completions in all need 1,600 per second, a tenth of what QEMU gives on a loaded host.
const BOUND: Duration = Duration::from_secs(20);

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
            warmup: Duration::ZERO,
        })
        .collect();
    let work = Workload::new(jobs, ctx.seed, false);
    let specs: Vec<QueueSpec> =
        work.jobs.iter().map(|j| QueueSpec { depth, priority: j.priority, port: j.port }).collect();
    let load = format!(
        "{} queues of {depth} random 1-block reads kept full until {MEASURED_COMMANDS} commands completed after a \
         warm-up of {WARMUP_COMMANDS} completions (at most {} s on the target's clock)",
        specs.len(),
        BOUND.as_secs()
    );
    ctx.log.push(load.clone());
    let mut map = std::mem::take(&mut ctx.map);
    let stop =
        Stop::AfterCommands { warmup: WARMUP_COMMANDS, measured: MEASURED_COMMANDS, bound_ns: BOUND.as_nanos() as u64 };
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
    let clock = if outcome.simulated_clock { "simulated" } else { "monotonic" };
    let warmed = match outcome.warmup_done_ns {
        Some(at) => format!("the warm-up ended at {:.3} s", at as f64 / 1e9),
        None => "the warm-up did not end".into(),
    };
    ctx.log.push(format!(
        "{} commands counted; {warmed}; {:.3} s in all on the {clock} clock",
        outcome.measured,
        outcome.elapsed_ns as f64 / 1e9
    ));
    let counts: Vec<u64> = outcome.jobs.iter().map(|j| j.op(crate::load::Op::Read).map_or(0, |o| o.commands)).collect();
    let total: u64 = counts.iter().sum();
    if total < MEASURED_COMMANDS {
        return Err(StepError::Skip(format!(
            "only {total} of the {MEASURED_COMMANDS} commands needed completed within {} s on the {clock} clock \
             ({warmed}): the host or drive is too slow to judge shares",
            BOUND.as_secs()
        )));
    }
    let observed: Vec<String> = plan
        .iter()
        .zip(&counts)
        .map(|((name, _, _), &n)| format!("{name} {:.3} ({n})", n as f64 / total as f64))
        .collect();
    let expected: Vec<String> = plan.iter().map(|(name, _, share)| format!("{name} {share:.3}")).collect();
    ctx.log.push(format!("shares of {total} commands: {}", observed.join(", ")));
    if check == Check::WeightedShares {
        if let Some(failure) = out_of_order(&plan, &counts, depth as u64) {
            return Err(ctx.fail_rule(
                rules::weighted_round_robin_order(),
                load,
                format!("shares {}: {failure}", observed.join(", ")),
                "each class served at least as many commands as a class with a smaller weight (within two queue \
                 depths and 3·√n of the two classes' n commands)",
            ));
        }
    }
    let off = plan.iter().zip(&counts).any(|((_, _, share), &n)| {
        let got = n as f64 / total as f64;
        match check {
            Check::UrgentFirst => (*share == 1.0 && got < 1.0 - URGENT_LEAK) || (*share == 0.0 && got > URGENT_LEAK),
            _ => (got - share).abs() > TOLERANCE,
        }
    });
    if !off {
        return Ok(());
    }
    let tolerance = if check == Check::UrgentFirst { URGENT_LEAK } else { TOLERANCE };
    let (rule, reading) = match check {
        // Not an advisory case (its order is a failure): the proportion warns here.
        Check::WeightedShares => (
            rules::weighted_round_robin(),
            " — nvtest's reading: a host sees completions, not the fetch order, so shares off the weighted \
             proportion (in the weights' order) are a warning, not a failure",
        ),
        Check::UrgentFirst => (rules::urgent_first(), ""),
        _ => (rules::round_robin_fair(), ""),
    };
    let failure = crate::verdict::Failure {
        rule,
        sent: load,
        observed: format!("shares {}", observed.join(", ")),
        expected: format!("shares {} (within {tolerance:.2}){reading}", expected.join(", ")),
    };
    match check {
        Check::WeightedShares => Err(StepError::Warning(failure)),
        _ => Err(StepError::Fail(failure)),
    }
}

/// Whether a class with a smaller weight was served more than one with a larger weight,
/// beyond what counting allows: which, in words. Two allowances, for a drive that served
/// the two alike (the most a host may see of a drive that takes every queued command in
/// at once): each queue's count may be off its service by up to its `depth` (commands
/// the drive held at the count's edges), so their difference by up to 2 × `depth`; and
/// each of their n = a + b commands is as likely the one's as the other's, so the
/// difference has a standard deviation of √n, of which 3·√n (three standard deviations:
/// about 1 in 700 by chance) is allowed.
fn out_of_order(plan: &[(&'static str, QueuePriority, f64)], counts: &[u64], depth: u64) -> Option<String> {
    for (i, ((heavy, _, heavy_share), &a)) in plan.iter().zip(counts).enumerate() {
        for ((light, _, light_share), &b) in plan.iter().zip(counts).skip(i + 1) {
            if heavy_share <= light_share || b <= a {
                continue;
            }
            let margin = 2.0 * depth as f64 + 3.0 * ((a + b) as f64).sqrt();
            if (b - a) as f64 > margin {
                return Some(format!(
                    "{light} (the smaller weight) was served {b} commands, {heavy} (the larger) {a}: {} more, \
                     beyond the {margin:.0} (2 × {depth} + 3·√{}) counting allows",
                    b - a,
                    a + b
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lighter_class_served_more_beyond_noise_is_out_of_order() {
        let plan = plan(Check::WeightedShares);
        // The weighted proportion, and the classes served alike: in order.
        assert_eq!(out_of_order(&plan, &[17143, 8571, 4286], 511), None);
        assert_eq!(out_of_order(&plan, &[10000, 10000, 10000], 511), None);
        // Alike, a queue's depth apart at the edges (a drive holding whole queues inside).
        assert_eq!(out_of_order(&plan, &[9500, 10000, 10500], 511), None);
        // Inverted weights: Low served by HPW, High by LPW.
        let inverted = out_of_order(&plan, &[4286, 8571, 17143], 511).unwrap();
        assert!(inverted.starts_with("medium (the smaller weight) was served 8571 commands, high (the larger) 4286"));
        assert!(out_of_order(&plan, &[11000, 6000, 13000], 511).unwrap().starts_with("low (the smaller weight)"));
    }
}
