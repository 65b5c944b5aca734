//! Read-back of what the host's own namespace commands determine. After every Namespace
//! Management create and delete, Namespace Attachment attach and detach, and Format NVM
//! that completed successfully — whether a case's step under test or setup it depends
//! on — the drive's lists and Identify data must show what the host did: a drive that
//! reports success and does something else is caught at the command that did it, under
//! the rule of the field or list that disagrees.

use nvme::device::Data;
use nvme::spec::identify::{identify, Cns, ControllerList, IdentifyNamespace};
use zerocopy::{FromZeros, IntoBytes};

use super::resolve;
use super::{CaseContext, StepResult};
use crate::rules;

/// After a create of `nsid` with NSZE = NCAP = `nsze` and FLBAS format `index`: the NSID
/// is allocated (CNS 10h), not active (a new namespace is attached to no controller,
/// §5.20), and its Identify Namespace data for an Allocated NSID (CNS 11h) has the size
/// and format the host specified.
pub fn after_create(ctx: &mut CaseContext<'_>, what: &str, nsid: u32, nsze: u64, index: u8) -> StepResult {
    let allocated = resolve::namespace_list(ctx, Cns::AllocatedNamespaceList)?;
    if !allocated.contains(&nsid) {
        return Err(ctx.fail_rule(
            rules::allocated_list(),
            format!("Identify CNS 10h after {what}"),
            format!("NSID {nsid} (created) is not in the Allocated Namespace ID list {allocated:?}"),
            format!("NSID {nsid} listed"),
        ));
    }
    let active = resolve::namespace_list(ctx, Cns::ActiveNamespaceList)?;
    if active.contains(&nsid) {
        return Err(ctx.fail_rule(
            rules::created_unattached(),
            format!("Identify CNS 02h after {what}"),
            format!("NSID {nsid} is active before it was attached (list {active:?})"),
            format!("NSID {nsid} absent until attached"),
        ));
    }
    let sent = format!("Identify Namespace for an Allocated NSID (CNS 11h) NSID {nsid} after {what}");
    let mut ns = IdentifyNamespace::new_zeroed();
    let c = ctx.admin(&sent, identify(Cns::AllocatedNamespace, nsid, 0), Data::FromDevice(ns.as_mut_bytes()))?;
    ctx.require_success(&sent, &c)?;
    if ns.as_bytes().iter().all(|&b| b == 0) {
        return Err(ctx.fail_rule(
            rules::allocated_identify(),
            sent,
            "a zero-filled data structure for a namespace just created",
            "the namespace's Identify Namespace data",
        ));
    }
    // A structure inconsistent in itself breaks the rule of its own fields first.
    super::checks::sizes_consistent(ctx, sent.clone(), &ns)?;
    if ns.flbas.format() > ns.nlbaf {
        return Err(ctx.fail_rule(
            rules::lba_format(),
            sent,
            format!("FLBAS selects LBA format {}, NLBAF is {}", ns.flbas.format(), ns.nlbaf),
            "a format index of at most NLBAF",
        ));
    }
    if ns.nsze != nsze || ns.ncap != nsze {
        return Err(ctx.fail_rule(
            rules::created_as_requested(),
            sent,
            format!("NSZE {} and NCAP {}", ns.nsze, ns.ncap),
            format!("NSZE {nsze} and NCAP {nsze}, as the host specified"),
        ));
    }
    if ns.flbas.format() != index {
        return Err(ctx.fail_rule(
            rules::requested_format(),
            sent,
            format!("FLBAS selects LBA format {}", ns.flbas.format()),
            format!("LBA format {index}, as the host specified"),
        ));
    }
    Ok(())
}

/// After an attach (`attached`) or detach of `nsid` to or from this controller: the
/// Active Namespace ID list (CNS 02h) and the namespace's Attached Controller list
/// (CNS 12h) say so, and a namespace just attached identifies (CNS 00h) as itself.
pub fn after_attachment(ctx: &mut CaseContext<'_>, what: &str, nsid: u32, attached: bool) -> StepResult {
    if attached {
        let sent = format!("Identify Namespace (CNS 00h) NSID {nsid} after {what}");
        let mut ns = IdentifyNamespace::new_zeroed();
        let c = ctx.admin(&sent, identify(Cns::Namespace, nsid, 0), Data::FromDevice(ns.as_mut_bytes()))?;
        ctx.require_success(&sent, &c)?;
        if ns.nsze == 0 {
            return Err(ctx.fail_rule(
                rules::identify_active(),
                sent,
                "NSZE 0 (the data structure of an inactive NSID) for a namespace just attached",
                "the namespace's Identify Namespace data, NSZE > 0",
            ));
        }
    }
    let active = resolve::namespace_list(ctx, Cns::ActiveNamespaceList)?;
    if active.contains(&nsid) != attached {
        return Err(ctx.fail_rule(
            rules::active_list(),
            format!("Identify CNS 02h after {what}"),
            format!(
                "NSID {nsid} {} the Active Namespace ID list {active:?}",
                if attached { "absent from" } else { "still in" }
            ),
            format!("NSID {nsid} {}", if attached { "listed (attached)" } else { "absent (detached)" }),
        ));
    }
    let cntlid = ctx.facts.cntlid;
    let sent = format!("Identify Namespace Attached Controller list (CNS 12h) NSID {nsid} after {what}");
    let mut list = ControllerList::new_zeroed();
    let c =
        ctx.admin(&sent, identify(Cns::NamespaceAttachedControllers, nsid, 0), Data::FromDevice(list.as_mut_bytes()))?;
    ctx.require_success(&sent, &c)?;
    let ids: Vec<u16> = list.ids().collect();
    if ids.contains(&cntlid) != attached {
        return Err(ctx.fail_rule(
            rules::controller_list(),
            sent,
            format!("controller list {ids:?}"),
            format!("CNTLID {cntlid} {}", if attached { "listed (just attached)" } else { "absent (just detached)" }),
        ));
    }
    Ok(())
}

/// After a delete of `nsid`: it is neither allocated (CNS 10h) nor active (CNS 02h).
pub fn after_delete(ctx: &mut CaseContext<'_>, what: &str, nsid: u32) -> StepResult {
    for cns in [Cns::AllocatedNamespaceList, Cns::ActiveNamespaceList] {
        let list = resolve::namespace_list(ctx, cns)?;
        if list.contains(&nsid) {
            return Err(ctx.fail_rule(
                rules::deleted_namespace_gone(),
                format!("Identify CNS {:02X}h after {what}", cns as u8),
                format!("NSID {nsid} still listed ({list:?})"),
                format!("NSID {nsid} absent: it was deleted"),
            ));
        }
    }
    Ok(())
}

/// After a Format NVM of `nsid` to LBA format `index`: Identify Namespace reports it.
pub fn after_format(ctx: &mut CaseContext<'_>, what: &str, ns: &IdentifyNamespace, nsid: u32, index: u8) -> StepResult {
    if ns.flbas.format() != index {
        return Err(ctx.fail_rule(
            rules::requested_format(),
            format!("Identify Namespace NSID {nsid} after {what}"),
            format!("FLBAS selects LBA format {}", ns.flbas.format()),
            format!("LBA format {index}, as Format NVM selected"),
        ));
    }
    Ok(())
}
