//! `port_outage`: one port of a multi-port drive goes down under load and comes back
//! (NVMe 1.4 §2.4.1 Multi-Path I/O and Namespace Sharing; UNH-IOL Interoperability
//! Test 1.6, dual-port devices).
//!
//! The load runs through port 1 ([`crate::load::engine`]); `down_after_ms` into it the
//! target takes the other port's link down ([`nvme::queued::QueuedIo::set_port_link`]):
//! the driver of that port is not told, as no host is. Then:
//! - port 1's load: every command succeeds and every read returns the data last written
//!   (the engine judges each as it completes);
//! - a command through the downed port ends in an error, not a hang: nvtest's driver must
//!   find the controller gone (CSTS reads all ones) within the command timeout, and the
//!   time it took on the target's clock is reported (`outage.detected_ms`);
//! - brought back, the port's controller is ready within CAP.TO (`outage.ready_ms`), its
//!   subsystem identity unchanged, and it reads back every block port 1 wrote.

use nvme::device::{Data, DeviceError};
use nvme::queued::{QueueSpec, QueuedIo};
use nvme::spec::identify::{identify, Cns, IdentifyController};
use nvme::spec::registers::{offset, Cap};
use zerocopy::{FromZeros, IntoBytes};

use super::{io, workload, CaseContext, StepError, StepResult};
use crate::load::engine::{During, EngineError, Stop};
use crate::load::{Figure, JobFigures, Workload};
use crate::rules;
use crate::suite::model::{NsName, NsRef, PortOutage};

/// `port_outage`.
pub fn port_outage(ctx: &mut CaseContext<'_>, o: &PortOutage) -> StepResult {
    let port = o.port as usize;
    if port < 2 {
        return Err(StepError::Error("port_outage takes down port 2 or a later one: port 1 carries the load".into()));
    }
    if ctx.device.port_count() + 1 < port {
        return Err(StepError::Skip(format!(
            "a port outage needs port {port}; the target brought up {}",
            super::ports::reached(&*ctx.device)
        )));
    }
    ctx.port = 0;
    let before = identify_port(ctx, port)?;
    let mut jobs = Vec::with_capacity(o.jobs.len());
    for job in &o.jobs {
        jobs.push(workload::build(ctx, job)?);
    }
    let mut work = Workload::new(jobs, ctx.seed, true);
    let specs: Vec<QueueSpec> = workload::fit_queues(ctx, &mut work);
    let down_after = super::resolve::param(&o.down_after_ms)?;
    ctx.log.push(format!(
        "load through port 1: {}; port {port} (CNTLID {}) goes down {down_after} ms into it",
        workload::describe(&work),
        before.cntlid
    ));
    let mut went_down = false;
    let mut take_down = |io: &mut dyn QueuedIo| -> Result<(), EngineError> {
        io.set_port_link(port - 2, false)?;
        went_down = true;
        Ok(())
    };
    let during =
        During { after_ns: down_after.saturating_mul(1_000_000), action: &mut take_down, removes_drive: false };
    let mut map = std::mem::take(&mut ctx.map);
    let result = workload::run_during(ctx, &work, &specs, &mut map, ctx.deadline, Stop::AtEnd, Some(during));
    ctx.map = map;
    if let Err(EngineError::Device(DeviceError::Unsupported(reason))) = &result {
        bring_back(ctx, port, went_down);
        return Err(StepError::Skip(format!("a port outage under load: {reason}")));
    }
    let outcome = match workload::outcome_of(ctx, &work, result) {
        Ok(outcome) => outcome,
        Err(e) => {
            bring_back(ctx, port, went_down);
            return Err(e);
        }
    };
    workload::summarize(ctx, &format!("load through port 1 while port {port} went down"), &outcome);
    ctx.figures.extend(outcome.jobs.iter().cloned());
    if !went_down {
        return Err(StepError::Error(format!(
            "the load ended ({:.3} s) before port {port} was due to go down {down_after} ms into it: make its jobs \
             longer",
            outcome.elapsed_ns as f64 / 1e9
        )));
    }
    let judged = judge_load(ctx, &work, &outcome, port);
    let detected = judged.and_then(|()| detect(ctx, port));
    let back = come_back(ctx, port, &before);
    let detected_ms = detected?;
    let ready_ms = back?;
    ctx.figures.push(JobFigures {
        job: "outage".into(),
        window_ns: 0,
        simulated_clock: outcome.simulated_clock,
        ops: Vec::new(),
        extra: vec![
            Figure { name: "outage.detected_ms".into(), value: round3(detected_ms), unit: "ms" },
            Figure { name: "outage.ready_ms".into(), value: round3(ready_ms), unit: "ms" },
        ],
    });
    // Every block port 1 wrote, through the port that was down.
    ctx.through_port(port - 1, |ctx| io::verify(ctx, &NsRef::Named(NsName::All), None, None))
}

/// Identify Controller through port `port` (1-based).
fn identify_port(ctx: &mut CaseContext<'_>, port: usize) -> StepResult<IdentifyController> {
    ctx.through_port(port - 1, super::ports::identify_controller)
}

/// Port 1's load while the other port was down: nothing failed, nothing read wrong.
fn judge_load(
    ctx: &mut CaseContext<'_>,
    work: &Workload,
    outcome: &crate::load::engine::Outcome,
    port: usize,
) -> StepResult {
    let context = format!("port {port} down during the load; ");
    if let Some(failed) = outcome.failed.first() {
        return Err(ctx.fail_rule(
            rules::other_ports_serve(),
            format!(
                "{context}{} in job `{}`, one of {} failed commands",
                failed.what, failed.job, outcome.failed_count
            ),
            failed.status.to_string(),
            "Successful Completion: the controllers of the other ports carry on",
        ));
    }
    workload::wrong_read_failure(ctx, work, outcome, &context)
}

/// A command through the downed port: it must end in an error naming the controller
/// gone, within the command timeout. Returns how long the driver took to find out (ms).
fn detect(ctx: &mut CaseContext<'_>, port: usize) -> StepResult<f64> {
    let Some(device) = ctx.device.port(port - 2) else {
        return Err(StepError::Error(format!("port {port} is not there")));
    };
    let mut id = IdentifyController::new_zeroed();
    let result = device.admin(identify(Cns::Controller, 0, 0), Data::FromDevice(id.as_mut_bytes()));
    let what = format!("[port {port}] Identify Controller while its link is down");
    match result {
        Err(e @ DeviceError::Removed { after_ms, .. }) => {
            ctx.log.push(format!("{what} -> {e}"));
            Ok(after_ms as f64)
        }
        Ok(c) => Err(StepError::Error(format!(
            "{what} completed ({}) though the port's link is down: the target did not take it down",
            c.status()
        ))),
        Err(e) if e.controller_stopped() => Err(ctx.fail_rule(
            rules::command_completes(),
            what,
            e.to_string(),
            "either a completion, or a controller found gone (CSTS reading all ones) before the command timeout",
        )),
        Err(e) => Err(StepError::Error(format!("{what}: {e}"))),
    }
}

/// Brings port `port` back and judges it: ready within CAP.TO, the same subsystem.
/// Returns the ready time (ms, CC.EN to CSTS.RDY).
fn come_back(ctx: &mut CaseContext<'_>, port: usize, before: &IdentifyController) -> StepResult<f64> {
    let Some(device) = ctx.device.port(port - 2) else {
        return Err(StepError::Error(format!("port {port} is not there")));
    };
    let timeout_ms = read_cap(device).map(|c| c.timeout_ms());
    let what = format!("port {port}'s link back up, its controller enabled (CC.EN = 1, CSTS.RDY awaited)");
    let ready_ns = match device.set_link(true) {
        Ok(ready) => ready.unwrap_or(0),
        Err(e) if e.controller_stopped() => {
            return Err(ctx.fail_rule(
                rules::ready_within_cap_to(),
                what,
                e.to_string(),
                match timeout_ms {
                    Some(ms) => format!("CSTS.RDY = 1 within CAP.TO ({ms} ms)"),
                    None => "CSTS.RDY = 1 within CAP.TO".to_string(),
                },
            ))
        }
        Err(e) => return Err(StepError::Error(format!("{what}: {e}"))),
    };
    let ready_ms = ready_ns as f64 / 1e6;
    ctx.log.push(format!("{what} -> ready after {ready_ms:.3} ms"));
    let after = identify_port(ctx, port)?;
    let same = before.sn == after.sn && before.mn == after.mn && before.subnqn == after.subnqn;
    if !same {
        return Err(ctx.fail_rule(
            rules::ports_one_subsystem(),
            format!("[port {port}] Identify Controller after the outage"),
            "another Serial Number, Model Number or SUBNQN than before the outage",
            "the same NVM subsystem as before",
        ));
    }
    if before.cntlid != after.cntlid {
        ctx.log.push(format!("note: port {port} came back as CNTLID {} (it was {})", after.cntlid, before.cntlid));
    }
    Ok(ready_ms)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// CAP of a controller whose registers nvtest's driver reaches.
fn read_cap(device: &mut dyn nvme::device::Device) -> Option<Cap> {
    let regs = device.registers()?;
    regs.read64(offset::CAP).ok().map(Cap::from_bits)
}

/// After a failure: the port back up, so that later cases find it (errors ignored: the
/// case already ends with what went wrong).
fn bring_back(ctx: &mut CaseContext<'_>, port: usize, went_down: bool) {
    if let (true, Some(device)) = (went_down, ctx.device.port(port - 2)) {
        let _ = device.set_link(true);
    }
}
