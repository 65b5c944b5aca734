//! Asymmetric Namespace Access (NVMe 1.4 §8.20 "Asymmetric Namespace Access
//! Reporting"): the ANA groups a drive reports, and what each ANA state does to the
//! commands through the controller that reports it.
//!
//! - `check: ana_groups`: read only, for any drive that reports ANA (CMIC bit 3): every
//!   active namespace's ANAGRPID (Identify Namespace) is not 0h and at most ANAGRPMAX,
//!   and its NSID is listed in exactly one descriptor of the Asymmetric Namespace Access
//!   log page (0Ch), that group's; every descriptor has a defined state
//!   ([`ana_groups`]).
//! - `ana_states`: on a target that can change a group's state (the simulated drive's
//!   test hook, standing for a failover a real drive carries out itself), the group of a
//!   shared namespace is walked through every state ANACAP reports on port 2 while
//!   port 1 stays ANA Optimized: the ANA Change notice on port 2, the log page of both
//!   ports, the state's effect on a Read and an Identify through port 2, and a Read
//!   through port 1 ([`ana_states`]).
//!
//! What ANA Change state does to I/O is judged as a warning only: nvtest could not
//! confirm that NVMe 1.4 requires Asymmetric Access Transition there rather than
//! allowing the command to be processed.

use std::collections::BTreeMap;

use nvme::device::Data;
use nvme::spec::ana::{get_ana_log, AnaLog, AnaState, Anacap, ANA_CHANGE_NOTICE};
use nvme::spec::features::{get_features, set_features, AsyncEventConfiguration, FeatureId, Select};
use nvme::spec::identify::{identify, Cns, IdentifyNamespace};
use nvme::spec::log::LogPageId;
use nvme::spec::nvm;
use nvme::spec::queue::{event_type, AsyncEventCompletion};
use nvme::spec::Status;
use zerocopy::{FromZeros, IntoBytes};

use super::resolve::{self, NsTarget};
use super::{CaseContext, StepError, StepResult};
use crate::rules;
use crate::suite::model::NsRef;
use crate::verdict::Failure;

/// The most bytes of log page 0Ch nvtest reads.
const LOG_MAX: u32 = 256 * 1024;

/// Skips the case unless Identify Controller CMIC bit 3 is set.
fn require_ana(ctx: &CaseContext<'_>) -> StepResult {
    let cmic = ctx.facts.identify.cmic;
    if cmic.ana_reporting() {
        return Ok(());
    }
    Err(StepError::Skip(format!(
        "Identify Controller CMIC {:02X}h: bit 3 (Asymmetric Namespace Access Reporting) is clear",
        cmic.into_bits()
    )))
}

/// Reads the whole log page 0Ch through the port in use (RAE as given; RGO as
/// `groups_only`): 4 KiB first, then as much as its header says it holds.
fn read_log(ctx: &mut CaseContext<'_>, groups_only: bool, rae: bool) -> StepResult<AnaLog> {
    let mut size = 4096u32;
    loop {
        let mut buf = vec![0u8; size as usize];
        let what = format!(
            "Get Log Page 0Ch (Asymmetric Namespace Access), {size} bytes, RGO {}, RAE {}",
            groups_only as u8, rae as u8
        );
        let cmd = get_ana_log(size, 0, groups_only, rae).map_err(|e| StepError::Error(e.to_string()))?;
        let c = ctx.admin(&what, cmd, Data::FromDevice(&mut buf))?;
        ctx.require_success(&what, &c)?;
        match AnaLog::parse(&buf) {
            Ok(log) => return Ok(log),
            Err(e) => {
                // A page longer than the transfer: its descriptors and at most NN NSIDs.
                let hint = AnaLog::length_hint(&buf).unwrap_or(0) as u64 + 4 * ctx.facts.nn as u64;
                let wanted = (hint.div_ceil(4) * 4).min(LOG_MAX as u64) as u32;
                if wanted <= size {
                    return Err(ctx.fail_rule(
                        rules::ana_groups(),
                        what,
                        format!("the page does not hold what its header says: {e}"),
                        "a header, then NGRPS ANA Group Descriptors each followed by its NNSID NSIDs",
                    ));
                }
                size = wanted;
            }
        }
    }
}

/// `check: ana_groups`.
pub fn ana_groups(ctx: &mut CaseContext<'_>) -> StepResult {
    require_ana(ctx)?;
    let anagrpmax = ctx.facts.identify.anagrpmax;
    let mut list = [0u8; 4096];
    let what = "Identify CNS 02h (Active Namespace ID list)";
    let c = ctx.admin(what, identify(Cns::ActiveNamespaceList, 0, 0), Data::FromDevice(&mut list))?;
    ctx.require_success(what, &c)?;
    let active: Vec<u32> =
        list.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).take_while(|n| *n != 0).collect();
    let mut groups = BTreeMap::new();
    for nsid in &active {
        let mut id = IdentifyNamespace::new_zeroed();
        let what = format!("Identify Namespace NSID {nsid}");
        let c = ctx.admin(&what, identify(Cns::Namespace, *nsid, 0), Data::FromDevice(id.as_mut_bytes()))?;
        ctx.require_success(&what, &c)?;
        if id.anagrpid == 0 || id.anagrpid > anagrpmax {
            return Err(ctx.fail_rule(
                rules::ana_groups(),
                what,
                format!("ANAGRPID {:#x}", id.anagrpid),
                format!("an ANAGRPID from 1 to ANAGRPMAX ({anagrpmax:#x})"),
            ));
        }
        groups.insert(*nsid, id.anagrpid);
    }
    // RAE set: an ANA Change notice the host has not seen stays for it.
    let log = read_log(ctx, false, true)?;
    let sent = "Get Log Page 0Ch (Asymmetric Namespace Access)";
    let mut seen = std::collections::BTreeSet::new();
    for g in &log.groups {
        if g.anagrpid == 0 || g.anagrpid > anagrpmax || !seen.insert(g.anagrpid) {
            return Err(ctx.fail_rule(
                rules::ana_groups(),
                sent,
                format!("a descriptor of ANAGRPID {:#x} (groups described: {:?})", g.anagrpid, log.groups.len()),
                format!("one descriptor per group, ANAGRPIDs 1 to ANAGRPMAX ({anagrpmax:#x})"),
            ));
        }
        if g.ana_state().is_none() {
            return Err(ctx.fail_rule(
                rules::ana_groups(),
                sent,
                format!("group {:#x} in ANA state {:X}h", g.anagrpid, g.state),
                "an ANA state of 01h, 02h, 03h, 04h or 0Fh",
            ));
        }
        if let Some(stranger) = g.nsids.iter().find(|n| groups.get(n) != Some(&g.anagrpid)) {
            return Err(ctx.fail_rule(
                rules::ana_groups(),
                sent,
                format!(
                    "group {:#x} lists NSID {stranger:#x}, whose ANAGRPID is {}",
                    g.anagrpid,
                    groups.get(stranger).map_or("none (not an active namespace)".to_string(), |a| format!("{a:#x}"))
                ),
                "a group lists the active namespaces whose ANAGRPID it is",
            ));
        }
    }
    for (nsid, anagrpid) in &groups {
        let listing = log.groups_listing(*nsid);
        if listing.len() != 1 || listing[0].anagrpid != *anagrpid {
            let found: Vec<String> = listing.iter().map(|g| format!("{:#x}", g.anagrpid)).collect();
            return Err(ctx.fail_rule(
                rules::ana_groups(),
                sent,
                format!("NSID {nsid:#x} listed by the descriptors of groups [{}]", found.join(", ")),
                format!("NSID {nsid:#x} listed once, by group {anagrpid:#x} (its Identify Namespace ANAGRPID)"),
            ));
        }
    }
    ctx.log.push(format!(
        "{} active namespaces in {} ANA groups, as the log page lists them",
        groups.len(),
        seen.len()
    ));
    Ok(())
}

/// The namespace `ana_states` walks and its group.
struct Target {
    nsid: u32,
    block_size: usize,
    anagrpid: u32,
}

/// `ana_states`.
pub fn ana_states(ctx: &mut CaseContext<'_>, ns: &NsRef) -> StepResult {
    require_ana(ctx)?;
    if ctx.device.port_count() < 1 {
        return Err(StepError::Skip(format!(
            "ANA states through two paths need two controllers of one NVM subsystem; the target brought up {}",
            super::ports::reached(&*ctx.device)
        )));
    }
    let t = target(ctx, ns)?;
    // The hook first: a target without one skips before anything is changed.
    ctx.through_port(1, |ctx| Ok(ctx.target()?.set_ana_state(t.anagrpid, AnaState::Optimized)?))?;
    ctx.log.push(format!("[port 2] ANA group {} set ANA Optimized (the target's test hook)", t.anagrpid));
    ctx.through_port(1, arm_notices)?;
    let result = walk(ctx, &t);
    // Whatever was judged, the group is left Optimized and its notice read.
    let restored = ctx.through_port(1, |ctx| {
        ctx.target()?.set_ana_state(t.anagrpid, AnaState::Optimized)?;
        read_log(ctx, false, false).map(|_| ())
    });
    result.and(restored)
}

fn target(ctx: &mut CaseContext<'_>, ns: &NsRef) -> StepResult<Target> {
    let i = match resolve::ns_one(ctx, ns)? {
        NsTarget::Member(i) => i,
        NsTarget::Raw(nsid) => {
            return Err(StepError::Error(format!("ana_states runs on a namespace of the set, not NSID {nsid:#x}")))
        }
    };
    let e = &ctx.set[i];
    if e.metadata_size > 0 || e.protection != 0 {
        return Err(StepError::Skip(format!(
            "NSID {} uses a format with metadata or protection information: the ANA checks move plain blocks",
            e.nsid
        )));
    }
    let (nsid, block_size) = (e.nsid, e.block_size as usize);
    let mut id = IdentifyNamespace::new_zeroed();
    let what = format!("Identify Namespace NSID {nsid}");
    let c = ctx.admin(&what, identify(Cns::Namespace, nsid, 0), Data::FromDevice(id.as_mut_bytes()))?;
    ctx.require_success(&what, &c)?;
    if !id.nmic.shared() {
        return Err(StepError::Error(format!(
            "NSID {nsid} is private (NMIC bit 0 clear): ANA across two paths needs a shared namespace (use_namespaces \
             with shared: true)"
        )));
    }
    let anagrpmax = ctx.facts.identify.anagrpmax;
    if id.anagrpid == 0 || id.anagrpid > anagrpmax {
        return Err(ctx.fail_rule(
            rules::ana_groups(),
            what,
            format!("ANAGRPID {:#x}", id.anagrpid),
            format!("an ANAGRPID from 1 to ANAGRPMAX ({anagrpmax:#x})"),
        ));
    }
    Ok(Target { nsid, block_size, anagrpid: id.anagrpid })
}

/// On the port in use: ANA Change Notices enabled (Asynchronous Event Configuration bit
/// 11), an Asynchronous Event Request outstanding, and no notice pending (the events
/// waiting taken, log 0Ch read without RAE).
fn arm_notices(ctx: &mut CaseContext<'_>) -> StepResult {
    let what = "Get Features 0Bh (Asynchronous Event Configuration), current";
    let c = ctx.admin(what, get_features(FeatureId::AsyncEventConfiguration, Select::Current, 0, 0), Data::None)?;
    ctx.require_success(what, &c)?;
    let config = AsyncEventConfiguration::from_bits(c.dw0).with_ana_change_notices(true);
    let what = format!("Set Features 0Bh (Asynchronous Event Configuration) {:#x}", config.into_bits());
    let c =
        ctx.admin(&what, set_features(FeatureId::AsyncEventConfiguration, false, 0, config.into_bits()), Data::None)?;
    ctx.require_success(&what, &c)?;
    read_log(ctx, false, false)?;
    ctx.target()?.arm_async_events(1)?;
    for c in ctx.target()?.take_async_events()? {
        ctx.log.push(format!("Asynchronous Event (before the change) DW0 {:#x}", c.dw0));
    }
    read_log(ctx, false, false)?;
    Ok(())
}

/// Waits about a second on the port in use for the ANA Change notice; `Err` holds what
/// came instead.
fn await_notice(ctx: &mut CaseContext<'_>) -> StepResult<Result<(), Vec<String>>> {
    let mut seen = Vec::new();
    for _ in 0..20 {
        for c in ctx.target()?.take_async_events()? {
            ctx.log.push(format!("[port {}] Asynchronous Event DW0 {:#x}", ctx.port + 1, c.dw0));
            let e = AsyncEventCompletion::from_dw0(c.dw0);
            if e.event_type == event_type::NOTICE
                && e.info == ANA_CHANGE_NOTICE
                && e.log_page == LogPageId::AsymmetricNamespaceAccess as u8
            {
                return Ok(Ok(()));
            }
            seen.push(format!("{:#x}", c.dw0));
        }
        ctx.target()?.wait(50)?;
    }
    Ok(Err(seen))
}

/// Every state ANACAP reports, ANA Optimized last, on port 2; the first failure ends
/// the walk, warnings are collected and the first returned at the end.
fn walk(ctx: &mut CaseContext<'_>, t: &Target) -> StepResult {
    let anacap = Anacap::from_bits(ctx.facts.identify.anacap);
    let states: Vec<AnaState> = [
        AnaState::NonOptimized,
        AnaState::Inaccessible,
        AnaState::PersistentLoss,
        AnaState::Change,
        AnaState::Optimized,
    ]
    .into_iter()
    .filter(|s| *s == AnaState::Optimized || anacap.reports(*s))
    .collect();
    ctx.log.push(format!(
        "ANACAP {:02X}h: walking ANA group {} (NSID {}) through {} on port 2",
        anacap.into_bits(),
        t.anagrpid,
        t.nsid,
        states.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
    ));
    let mut chgcnt = ctx.through_port(1, |ctx| read_log(ctx, false, false))?.chgcnt;
    let mut warnings = Vec::new();
    for state in states {
        chgcnt = one_state(ctx, t, state, chgcnt, &mut warnings)?;
    }
    match warnings.into_iter().next() {
        Some(w) => Err(StepError::Warning(w)),
        None => Ok(()),
    }
}

fn one_state(
    ctx: &mut CaseContext<'_>,
    t: &Target,
    state: AnaState,
    chgcnt: u64,
    warnings: &mut Vec<Failure>,
) -> StepResult<u64> {
    let name = state.name();
    let change = format!("ANA group {} put in {name} state through port 2", t.anagrpid);
    ctx.through_port(1, |ctx| Ok(ctx.target()?.set_ana_state(t.anagrpid, state)?))?;
    ctx.log.push(format!("[port 2] {change} (the target's test hook)"));
    let told = ctx.through_port(1, await_notice)?;
    if let Err(seen) = told {
        return Err(ctx.fail_rule(
            rules::ana_change_notice(),
            format!("{change}, an Asynchronous Event Request outstanding on port 2, AEC bit 11 set"),
            if seen.is_empty() {
                "no Asynchronous Event within a second".to_string()
            } else {
                format!("other events only ({})", seen.join(", "))
            },
            "a Notice (type 010b), information 03h (Asymmetric Namespace Access Change), log page 0Ch",
        ));
    }
    // The log of port 2: the new state, the Change Count moved, and with RGO no NSIDs.
    let log = ctx.through_port(1, |ctx| read_log(ctx, false, false))?;
    let sent = format!("{change}, then Get Log Page 0Ch on port 2");
    let group = log.group(t.anagrpid);
    let reported = group.map(|g| g.state);
    if reported != Some(state as u8) || log.chgcnt == chgcnt {
        return Err(ctx.fail_rule(
            rules::ana_log(),
            sent,
            format!(
                "group {}: {}; Change Count {} (before the change {chgcnt})",
                t.anagrpid,
                reported.map_or("no descriptor".to_string(), |s| format!("ANA state {s:X}h")),
                log.chgcnt
            ),
            format!("ANA state {:X}h ({name}) and a Change Count other than {chgcnt}", state as u8),
        ));
    }
    let groups_only = ctx.through_port(1, |ctx| read_log(ctx, true, true))?;
    if groups_only.groups.iter().any(|g| !g.nsids.is_empty()) || groups_only.group(t.anagrpid).is_none() {
        return Err(ctx.fail_rule(
            rules::ana_log(),
            "Get Log Page 0Ch on port 2 with RGO (LSP bit 0) set",
            format!(
                "{} descriptors, NSIDs listed: {}",
                groups_only.groups.len(),
                groups_only.groups.iter().map(|g| g.nsids.len()).sum::<usize>()
            ),
            format!("the descriptor of group {} among them, each with NNSID 0h and no NSID list", t.anagrpid),
        ));
    }
    // Port 1's log: its path to the group is unchanged.
    let port1 = read_log(ctx, false, true)?;
    let on_port1 = port1.group(t.anagrpid).map(|g| g.state);
    if on_port1 != Some(AnaState::Optimized as u8) {
        return Err(ctx.fail_rule(
            rules::ana_log(),
            format!("{change}, then Get Log Page 0Ch on port 1"),
            format!(
                "group {} on port 1: {}",
                t.anagrpid,
                on_port1.map_or("no descriptor".to_string(), |s| format!("ANA state {s:X}h"))
            ),
            "ANA Optimized (01h): the state through port 1 did not change",
        ));
    }
    judge_io(ctx, t, state, warnings)?;
    Ok(log.chgcnt)
}

/// A Read of LBA 0 and an Identify Namespace through port 2, judged by the state; a Read
/// through port 1, which must be served.
fn judge_io(ctx: &mut CaseContext<'_>, t: &Target, state: AnaState, warnings: &mut Vec<Failure>) -> StepResult {
    let name = state.name();
    let mut block = vec![0u8; t.block_size];
    let what = format!("Read NSID {} LBA 0 through port 2, its group in {name} state there", t.nsid);
    let c = ctx.through_port(1, |ctx| ctx.io(&what, nvm::read(t.nsid, 0, 0), Data::FromDevice(&mut block)))?;
    let got = c.status();
    match state.refusal() {
        None if !got.is_success() => {
            return Err(ctx.fail_rule(rules::ana_command_processing(), what, got.to_string(), "Successful Completion"))
        }
        None => {}
        Some(wanted) if state == AnaState::Change && !got.same_code(&wanted) => {
            warnings.push(Failure {
                rule: rules::ana_transition(),
                sent: what,
                observed: got.to_string(),
                expected: format!("{wanted} (nvtest could not confirm NVMe 1.4 requires it: a warning)"),
            });
        }
        Some(_) if state == AnaState::Change => {}
        Some(wanted) if got.is_success() => {
            return Err(ctx.fail_rule(
                rules::ana_command_processing(),
                what,
                "Successful Completion: the command was processed",
                format!("not processed: {wanted}"),
            ))
        }
        Some(wanted) if !got.same_code(&wanted) => {
            return Err(ctx.fail_rule(rules::ana_path_status(), what, got.to_string(), wanted.to_string()))
        }
        Some(_) => {}
    }
    let mut id = IdentifyNamespace::new_zeroed();
    let what = format!("Identify Namespace NSID {} through port 2, its group in {name} state there", t.nsid);
    let c = ctx.through_port(1, |ctx| {
        ctx.admin(&what, identify(Cns::Namespace, t.nsid, 0), Data::FromDevice(id.as_mut_bytes()))
    })?;
    if !c.status().is_success() {
        return Err(ctx.fail_rule(
            rules::ana_command_processing(),
            what,
            c.status().to_string(),
            "Successful Completion: Identify is processed in every ANA state",
        ));
    }
    let what = format!("Read NSID {} LBA 0 through port 1, the group in {name} state on port 2 only", t.nsid);
    let c = ctx.io(&what, nvm::read(t.nsid, 0, 0), Data::FromDevice(&mut block))?;
    if !c.status().is_success() {
        return Err(ctx.fail_rule(
            rules::ana_command_processing(),
            what,
            c.status().to_string(),
            format!("{}: port 1 reports the group ANA Optimized", Status::SUCCESS),
        ));
    }
    Ok(())
}
