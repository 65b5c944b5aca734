//! Named checks (`check: NAME` in a suite) and the `identify` step: rules about what a
//! controller reports, each failing with its own rule, section and evidence.

use std::collections::BTreeMap;

use nvme::device::Data;
use nvme::spec::identify::{
    identify as identify_cmd, parse_descriptor_list, Cns, ControllerList, IdentifyController, IdentifyNamespace,
    NsDescriptor,
};
use nvme::spec::Version;
use zerocopy::{FromZeros, IntoBytes};

use super::namespaces::{identify_namespace, NsEntry};
use super::resolve::{self, NsTarget};
use super::{CaseContext, StepResult};
use crate::rules;
use crate::suite::model::{CheckName, Expect, NsRef};

/// Runs a named check.
pub fn run(ctx: &mut CaseContext<'_>, name: CheckName) -> StepResult {
    match name {
        CheckName::IdentifyController => identify_controller(ctx),
        CheckName::ActiveNamespaceList => active_namespace_list(ctx),
        CheckName::NamespaceSizes => namespace_sizes(ctx),
        CheckName::LbaFormats => lba_formats(ctx),
        CheckName::UniqueIdentifiers => unique_identifiers(ctx),
        CheckName::IdentifiersPresent => identifiers_present(ctx),
        CheckName::DescriptorLists => descriptor_lists(ctx),
        CheckName::AllocatedNamespaceList => allocated_namespace_list(ctx),
        CheckName::ControllerLists => controller_lists(ctx),
        CheckName::PortIdentity => super::ports::port_identity(ctx),
        CheckName::AnaGroups => super::ana::ana_groups(ctx),
        CheckName::AttachmentsPersist => attachments_persist(ctx),
        CheckName::NamespaceUtilization => namespace_utilization(ctx),
        CheckName::SmartCountsHostTraffic => super::smart::counts_host_traffic(ctx),
        CheckName::ArbitrationSelectable => super::arbitration::run(ctx, super::arbitration::Check::Selectable),
        CheckName::ArbitrationFeature => super::arbitration::run(ctx, super::arbitration::Check::Feature),
        CheckName::WeightedRoundRobinShares => super::arbitration::run(ctx, super::arbitration::Check::WeightedShares),
        CheckName::UrgentPriorityFirst => super::arbitration::run(ctx, super::arbitration::Check::UrgentFirst),
        CheckName::RoundRobinShares => super::arbitration::run(ctx, super::arbitration::Check::RoundRobinShares),
        CheckName::ClaimedCapabilities => super::claimed::claimed_capabilities(ctx),
    }
}

fn identify_controller(ctx: &mut CaseContext<'_>) -> StepResult {
    let mut id = IdentifyController::new_zeroed();
    let what = "Identify Controller (CNS 01h)";
    let c = ctx.admin(what, identify_cmd(Cns::Controller, 0, 0), Data::FromDevice(id.as_mut_bytes()))?;
    ctx.require_success(what, &c)?;
    for (field, value) in [("SN", id.serial()), ("MN", id.model()), ("FR", id.firmware())] {
        if let Some((offset, byte)) = value.non_printable.first() {
            return Err(ctx.fail_rule(
                rules::identify_ascii(),
                what,
                format!("{field} \"{value}\" holds byte {byte:#04x} at offset {offset}"),
                format!("{field} in printable ASCII (20h–7Eh)"),
            ));
        }
    }
    let ver = id.version();
    if let Some(vs) = ctx.facts.vs {
        if id.ver != 0 && ver != vs {
            return Err(ctx.fail_rule(
                rules::ver_matches_vs(),
                what,
                format!("VER {ver}, VS register {vs}"),
                format!("VER {vs}"),
            ));
        }
    }
    if id.mnan != 0 && id.mnan > id.nn {
        return Err(ctx.fail_rule(
            rules::mnan_within_nn(),
            what,
            format!("MNAN {}, NN {}", id.mnan, id.nn),
            "MNAN ≤ NN".to_string(),
        ));
    }
    if ctx.facts.version >= Version::V1_2_1 {
        let end = id.subnqn.iter().position(|&b| b == 0);
        let text = String::from_utf8_lossy(&id.subnqn[..end.unwrap_or(id.subnqn.len())]).to_string();
        if end.is_none() || !text.starts_with("nqn.") {
            return Err(ctx.fail_rule(
                rules::subnqn_present(),
                what,
                format!(
                    "SUBNQN \"{}\"{}",
                    text.escape_debug(),
                    if end.is_none() { " without a NUL terminator" } else { "" }
                ),
                "a NUL-terminated NQN starting with \"nqn.\"".to_string(),
            ));
        }
    }
    Ok(())
}

fn active_namespace_list(ctx: &mut CaseContext<'_>) -> StepResult {
    let list = resolve::namespace_list(ctx, Cns::ActiveNamespaceList)?;
    let sent = "Identify Active Namespace ID list (CNS 02h)";
    let rule = rules::active_list;
    if let Some(w) = list.windows(2).find(|w| w[0] >= w[1]) {
        return Err(ctx.fail_rule(
            rule(),
            sent,
            format!("NSID {:#x} listed before {:#x}", w[0], w[1]),
            "increasing NSIDs",
        ));
    }
    if let Some(&bad) = list.iter().find(|&&id| id == 0 || id > ctx.facts.nn) {
        return Err(ctx.fail_rule(
            rule(),
            sent,
            format!("NSID {bad:#x} listed, NN is {}", ctx.facts.nn),
            format!("NSIDs in 1..={}", ctx.facts.nn),
        ));
    }
    if let Some((observed, expected)) = attachment_disagreement(&ctx.set, &list) {
        return Err(ctx.fail_rule(rule(), sent, observed, expected));
    }
    for nsid in list {
        let ns = identify_namespace(ctx, nsid)?;
        if ns.nsze == 0 {
            return Err(ctx.fail_rule(
                rule(),
                format!("Identify Namespace NSID {nsid}"),
                "NSZE 0 for a listed (active) NSID",
                "an active namespace with NSZE > 0",
            ));
        }
    }
    Ok(())
}

/// The first namespace of the set whose presence in the active `list` disagrees with
/// whether the set says it is attached: (observed, expected).
fn attachment_disagreement(set: &[NsEntry], list: &[u32]) -> Option<(String, String)> {
    let e = set.iter().find(|e| e.attached != list.contains(&e.nsid))?;
    let state = if e.attached { "attached (active)" } else { "not attached (inactive)" };
    Some((
        format!("NSID {} {} in the list of {} NSIDs", e.nsid, if e.attached { "is missing" } else { "is" }, list.len()),
        format!("NSID {} {} the list: it is {state}", e.nsid, if e.attached { "in" } else { "absent from" }),
    ))
}

/// After a reset: every namespace is attached or detached as before it.
fn attachments_persist(ctx: &mut CaseContext<'_>) -> StepResult {
    let list = resolve::namespace_list(ctx, Cns::ActiveNamespaceList)?;
    match attachment_disagreement(&ctx.set, &list) {
        Some((observed, expected)) => Err(ctx.fail_rule(
            rules::attachment_persists(),
            "Identify Active Namespace ID list (CNS 02h) after the Controller Reset",
            observed,
            expected,
        )),
        None => Ok(()),
    }
}

fn attached_members(ctx: &CaseContext<'_>) -> Vec<u32> {
    ctx.set.iter().filter(|e| e.attached).map(|e| e.nsid).collect()
}

fn namespace_sizes(ctx: &mut CaseContext<'_>) -> StepResult {
    for nsid in attached_members(ctx) {
        let ns = identify_namespace(ctx, nsid)?;
        sizes_consistent(ctx, format!("Identify Namespace NSID {nsid}"), &ns)?;
    }
    Ok(())
}

/// NCAP ≤ NSZE and NUSE ≤ NCAP in one Identify Namespace structure.
pub fn sizes_consistent(ctx: &CaseContext<'_>, sent: String, ns: &IdentifyNamespace) -> StepResult {
    if ns.ncap > ns.nsze || ns.nuse > ns.ncap {
        return Err(ctx.fail_rule(
            rules::namespace_sizes(),
            sent,
            format!("NSZE {}, NCAP {}, NUSE {}", ns.nsze, ns.ncap, ns.nuse),
            "NSZE ≥ NCAP ≥ NUSE",
        ));
    }
    Ok(())
}

fn lba_formats(ctx: &mut CaseContext<'_>) -> StepResult {
    for e in ctx.set.clone().into_iter().filter(|e| e.attached) {
        let ns = identify_namespace(ctx, e.nsid)?;
        let sent = format!("Identify Namespace NSID {}", e.nsid);
        let Some(format) = ns.lba_format_in_use() else {
            return Err(ctx.fail_rule(
                rules::lba_format(),
                sent,
                format!(
                    "FLBAS selects format {} but NLBAF is {} ({} formats)",
                    ns.flbas_index(),
                    ns.nlbaf,
                    ns.nlbaf as u32 + 1
                ),
                format!("an FLBAS index ≤ NLBAF ({})", ns.nlbaf),
            ));
        };
        let Some(size) = format.data_size() else {
            return Err(ctx.fail_rule(
                rules::lba_format(),
                sent,
                format!("LBAF{} has LBADS {}", ns.flbas_index(), format.lbads),
                "LBADS ≥ 9 (512 bytes or more)",
            ));
        };
        if e.requested_block_size != 0 && size != e.requested_block_size {
            return Err(ctx.fail_rule(
                rules::requested_format(),
                sent,
                format!("the format in use (LBAF{}) has {size}-byte LBAs", ns.flbas_index()),
                format!("{}-byte LBAs, as requested", e.requested_block_size),
            ));
        }
        // Every format the table lists, not only the one in use: a listed format without
        // a data size is one the drive offers and cannot be told how to use.
        if let Some((index, f)) = ns.lba_formats().iter().enumerate().find(|(_, f)| f.data_size().is_none()) {
            return Err(ctx.fail_rule(
                rules::lba_format(),
                sent,
                format!("LBAF{index} (listed: NLBAF is {}) has LBADS {}", ns.nlbaf, f.lbads),
                "LBADS ≥ 9 (512 bytes or more) for every listed format",
            ));
        }
    }
    Ok(())
}

fn unique_identifiers(ctx: &mut CaseContext<'_>) -> StepResult {
    let mut nguids: BTreeMap<[u8; 16], u32> = BTreeMap::new();
    let mut euis: BTreeMap<[u8; 8], u32> = BTreeMap::new();
    for nsid in attached_members(ctx) {
        let ns = identify_namespace(ctx, nsid)?;
        let sent = format!("Identify Namespace NSID {nsid}");
        if ns.nguid != [0; 16] {
            if let Some(other) = nguids.insert(ns.nguid, nsid) {
                return Err(ctx.fail_rule(
                    rules::unique_identifiers(),
                    sent,
                    format!("NGUID {} is also NSID {other}'s", hex(&ns.nguid)),
                    "a different NGUID for every namespace",
                ));
            }
        }
        if ns.eui64 != [0; 8] {
            if let Some(other) = euis.insert(ns.eui64, nsid) {
                return Err(ctx.fail_rule(
                    rules::unique_identifiers(),
                    sent,
                    format!("EUI64 {} is also NSID {other}'s", hex(&ns.eui64)),
                    "a different EUI64 for every namespace",
                ));
            }
        }
    }
    Ok(())
}

/// Each namespace reports at least one globally unique identifier: NGUID or EUI64 in
/// Identify Namespace, or an EUI64, NGUID or UUID descriptor in CNS 03h.
fn identifiers_present(ctx: &mut CaseContext<'_>) -> StepResult {
    for nsid in attached_members(ctx) {
        let ns = identify_namespace(ctx, nsid)?;
        if ns.nguid != [0; 16] || ns.eui64 != [0; 8] {
            continue;
        }
        let mut buf = [0u8; 4096];
        let sent = format!("Identify Namespace Identification Descriptor list (CNS 03h) NSID {nsid}");
        let c = ctx.admin(&sent, identify_cmd(Cns::NamespaceDescriptorList, nsid, 0), Data::FromDevice(&mut buf))?;
        let descriptors =
            if c.status().is_success() { parse_descriptor_list(&buf).unwrap_or_default() } else { vec![] };
        let identified = descriptors.iter().any(|d| {
            matches!(d, NsDescriptor::Eui64(_) | NsDescriptor::Nguid(_) | NsDescriptor::Uuid(_))
                && d.nid().iter().any(|&b| b != 0)
        });
        if !identified {
            return Err(ctx.fail_rule(
                rules::identifiers_present(),
                format!("Identify Namespace NSID {nsid}; {sent}"),
                format!(
                    "NGUID and EUI64 are zero and the descriptor list ({}) holds no EUI64, NGUID or UUID",
                    if c.status().is_success() {
                        format!("{} descriptors", descriptors.len())
                    } else {
                        c.status().to_string()
                    }
                ),
                "a non-zero NGUID or EUI64, or a UUID descriptor",
            ));
        }
    }
    Ok(())
}

fn descriptor_lists(ctx: &mut CaseContext<'_>) -> StepResult {
    for nsid in attached_members(ctx) {
        let ns = identify_namespace(ctx, nsid)?;
        let mut buf = [0u8; 4096];
        let sent = format!("Identify Namespace Identification Descriptor list (CNS 03h) NSID {nsid}");
        let c = ctx.admin(&sent, identify_cmd(Cns::NamespaceDescriptorList, nsid, 0), Data::FromDevice(&mut buf))?;
        if !c.status().is_success() {
            return Err(ctx.fail_rule(rules::descriptor_list(), sent, c.status().to_string(), "Successful Completion"));
        }
        let list = match parse_descriptor_list(&buf) {
            Ok(list) => list,
            Err(e) => return Err(ctx.fail_rule(rules::descriptor_list(), sent, e.to_string(), "a well-formed list")),
        };
        let mut seen = Vec::new();
        for d in &list {
            if seen.contains(&d.nidt()) {
                return Err(ctx.fail_rule(
                    rules::descriptor_list(),
                    sent,
                    format!("two descriptors of type {}", d.nidt()),
                    "at most one descriptor of each type",
                ));
            }
            seen.push(d.nidt());
            let (name, reported): (&str, &[u8]) = match d {
                NsDescriptor::Eui64(_) => ("EUI64", &ns.eui64),
                NsDescriptor::Nguid(_) => ("NGUID", &ns.nguid),
                _ => continue,
            };
            if reported.iter().any(|&b| b != 0) && d.nid() != reported {
                return Err(ctx.fail_rule(
                    rules::descriptor_list(),
                    sent,
                    format!("{name} descriptor {}, Identify Namespace {name} {}", hex(d.nid()), hex(reported)),
                    format!("the {name} descriptor equal to Identify Namespace {name}"),
                ));
            }
        }
    }
    Ok(())
}

fn allocated_namespace_list(ctx: &mut CaseContext<'_>) -> StepResult {
    let list = resolve::namespace_list(ctx, Cns::AllocatedNamespaceList)?;
    let sent = "Identify Allocated Namespace ID list (CNS 10h)";
    for e in ctx.set.clone() {
        if e.allocated != list.contains(&e.nsid) {
            let attached = if e.attached { "attached" } else { "not attached" };
            return Err(ctx.fail_rule(
                rules::allocated_list(),
                sent,
                format!(
                    "NSID {} ({}, {attached}) {} the list {:?}",
                    e.nsid,
                    if e.allocated { "allocated" } else { "deleted" },
                    if e.allocated { "is missing from" } else { "is in" },
                    list
                ),
                format!(
                    "every allocated NSID listed, attached or not; NSID {} {}",
                    e.nsid,
                    if e.allocated { "listed" } else { "absent" }
                ),
            ));
        }
    }
    // CNS 11h: each allocated namespace's data, attached or not, as the set knows it.
    for e in ctx.set.clone().into_iter().filter(|e| e.allocated) {
        let mut id = IdentifyNamespace::new_zeroed();
        let sent = format!("Identify Namespace for an Allocated NSID (CNS 11h) NSID {}", e.nsid);
        let c =
            ctx.admin(&sent, identify_cmd(Cns::AllocatedNamespace, e.nsid, 0), Data::FromDevice(id.as_mut_bytes()))?;
        ctx.require_success(&sent, &c)?;
        let size = id.lba_data_size().unwrap_or(0);
        if id.nsze != e.nsze || size != e.block_size {
            let attached = if e.attached { "attached" } else { "not attached" };
            return Err(ctx.fail_rule(
                rules::allocated_identify(),
                sent,
                format!("NSZE {:#x}, {size}-byte LBAs for NSID {} ({attached})", id.nsze, e.nsid),
                format!(
                    "NSZE {:#x}, {}-byte LBAs (what Identify CNS 00h reported while attached)",
                    e.nsze, e.block_size
                ),
            ));
        }
    }
    Ok(())
}

fn controller_lists(ctx: &mut CaseContext<'_>) -> StepResult {
    let cntlid = ctx.facts.cntlid;
    for e in ctx.set.clone().into_iter().filter(|e| e.allocated) {
        let mut list = ControllerList::new_zeroed();
        let sent = format!("Identify Namespace Attached Controller list (CNS 12h) NSID {}", e.nsid);
        let c = ctx.admin(
            &sent,
            identify_cmd(Cns::NamespaceAttachedControllers, e.nsid, 0),
            Data::FromDevice(list.as_mut_bytes()),
        )?;
        ctx.require_success(&sent, &c)?;
        let ids: Vec<u16> = list.ids().collect();
        if ids.contains(&cntlid) != e.attached {
            return Err(ctx.fail_rule(
                rules::controller_list(),
                sent,
                format!("controller list {ids:?}"),
                format!(
                    "CNTLID {cntlid} {} (the namespace is {}attached to it)",
                    if e.attached { "listed" } else { "absent" },
                    if e.attached { "" } else { "not " }
                ),
            ));
        }
    }
    Ok(())
}

/// The `identify` step: one Identify with an expected status, and optionally zero-filled data.
pub fn identify(
    ctx: &mut CaseContext<'_>,
    cns: u8,
    ns: &NsRef,
    expect: Option<&Expect>,
    zero_filled: bool,
) -> StepResult {
    let target = resolve::ns_one(ctx, ns)?;
    let nsid = target.nsid(ctx);
    let mut buf = [0u8; 4096];
    let sent = format!("Identify CNS {cns:02X}h NSID {nsid:#x}");
    let c = ctx.admin(&sent, identify_cmd(cns, nsid, 0), Data::FromDevice(&mut buf))?;
    ctx.expect(&sent, &c, expect)?;
    if zero_filled && c.status().is_success() {
        if let Some(at) = buf.iter().position(|&b| b != 0) {
            let state = match target {
                NsTarget::Member(i) if !ctx.set[i].attached => "an inactive (detached) NSID",
                _ => "this NSID",
            };
            return Err(ctx.fail_rule(
                rules::identify_inactive_zero(),
                sent,
                format!("non-zero data for {state}: byte {at} is {:#04x}", buf[at]),
                "a zero-filled data structure",
            ));
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `namespace_utilization`: NUSE (Figure 245: the logical blocks currently allocated)
/// is at least the number of blocks nvtest wrote to the namespace in this case and did
/// not deallocate or zero since: a block written with Write is allocated (§6.7.1.1).
fn namespace_utilization(ctx: &mut CaseContext<'_>) -> StepResult {
    for e in ctx.set.clone().into_iter().filter(|e| e.attached) {
        let written: u64 = ctx
            .map
            .namespace(e.nsid)
            .map(|map| {
                map.known()
                    .filter(|s| matches!(s.state, crate::data::Expectation::Written { .. }))
                    .map(|s| s.count)
                    .sum()
            })
            .unwrap_or(0);
        if written == 0 {
            continue;
        }
        let ns = identify_namespace(ctx, e.nsid)?;
        if ns.nuse < written {
            return Err(ctx.fail_rule(
                rules::utilization(),
                format!("Identify Namespace NSID {} after writing {written} blocks", e.nsid),
                format!("NUSE {}", ns.nuse),
                format!("NUSE at least {written}: every block written is allocated"),
            ));
        }
    }
    Ok(())
}
