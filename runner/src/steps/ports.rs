//! Ports: the other controllers of a multi-port drive's NVM subsystem (NVMe 1.4 §2.4.1
//! "Multi-Path I/O and Namespace Sharing"; Figure 247 CMIC and CNTLID; Figure 245 NMIC).
//!
//! - `port`: which controller the case's commands go through ([`select`]).
//! - `check: port_identity`: what every port reports alike (the subsystem's identity) and
//!   apart (its CNTLID) ([`port_identity`]).
//! - `private_namespace`: a namespace that only one controller may have attached
//!   ([`private_namespace`]).
//!
//! The ports are the controllers the target brought up beside the one nvtest opened
//! ([`nvme::device::Device::port`]); a case needing more skips, saying what was reached.

use nvme::device::{Data, Device};
use nvme::spec::identify::{identify, Cns, ControllerList, IdentifyController, IdentifyNamespace, Nmic};
use nvme::spec::namespace::{created_nsid, namespace_attach, namespace_create, namespace_delete, namespace_detach};
use nvme::spec::{Status, Version};
use zerocopy::{FromZeros, IntoBytes};

use super::resolve;
use super::{CaseContext, StepError, StepResult};
use crate::rules;

/// What the target reached, for skips and errors: "1 controller of the NVM subsystem".
pub fn reached(device: &dyn Device) -> String {
    let count = match device.port_count() + 1 {
        1 => "1 (the controller nvtest opened)".to_string(),
        n => format!("{n} controllers of the NVM subsystem"),
    };
    match device.ports_note() {
        Some(note) => format!("{count}: {note}"),
        None => count,
    }
}

/// Skips the case unless the target reached at least `needed` controllers.
fn require_ports(ctx: &CaseContext<'_>, needed: usize, what: &str) -> StepResult {
    if ctx.device.port_count() + 1 >= needed {
        return Ok(());
    }
    Err(StepError::Skip(format!(
        "{what} needs {needed} controllers of one NVM subsystem; the target brought up {}; port 1 reports CMIC \
         {:02X}h (bit 0: two or more ports, bit 1: two or more controllers)",
        reached(&*ctx.device),
        ctx.facts.identify.cmic.into_bits()
    )))
}

/// `port`: the commands of the steps that follow go through port `number`.
pub fn select(ctx: &mut CaseContext<'_>, number: u16) -> StepResult {
    if number == 0 {
        return Err(StepError::Error(
            "ports are numbered from 1 (1 is the controller nvtest opened); fix the suite".into(),
        ));
    }
    require_ports(ctx, number as usize, &format!("the case's port {number}"))?;
    ctx.port = number as usize - 1;
    let id = identify_controller(ctx)?;
    ctx.log.push(format!("port {number}: the commands that follow go through CNTLID {}", id.cntlid));
    Ok(())
}

/// Identify Controller through the port in use (the one helper every step uses).
pub(crate) fn identify_controller(ctx: &mut CaseContext<'_>) -> StepResult<IdentifyController> {
    let mut id = IdentifyController::new_zeroed();
    let what = "Identify Controller";
    let c = ctx.admin(what, identify(Cns::Controller, 0, 0), Data::FromDevice(id.as_mut_bytes()))?;
    ctx.require_success(what, &c)?;
    Ok(id)
}

/// Identify Controller of every port, port 1 first.
fn identify_ports(ctx: &mut CaseContext<'_>) -> StepResult<Vec<IdentifyController>> {
    (1..=ctx.device.port_count() + 1).map(|n| ctx.through_port(n - 1, identify_controller)).collect()
}

/// The CNTLID of every port, port 1 first; skips unless there are two.
pub fn cntlids(ctx: &mut CaseContext<'_>, what: &str) -> StepResult<Vec<u16>> {
    require_ports(ctx, 2, what)?;
    let ids: Vec<u16> = identify_ports(ctx)?.iter().map(|id| id.cntlid).collect();
    // A controller list naming one CNTLID twice is refused (Controller List Invalid):
    // what the drive got wrong is the CNTLID, not the command that would then fail.
    for (k, id) in ids.iter().enumerate() {
        if let Some(j) = ids[..k].iter().position(|other| other == id) {
            return Err(ctx.fail_rule(
                rules::cntlid_unique(),
                format!("Identify Controller on port {} and on port {}", j + 1, k + 1),
                format!("CNTLID {id} on both"),
                "a CNTLID of its own on every controller of the NVM subsystem",
            ));
        }
    }
    Ok(ids)
}

/// The NSIDs active on every port (each port's Active Namespace ID list, CNS 02h).
pub fn active_on_every_port(ctx: &mut CaseContext<'_>) -> StepResult<Vec<u32>> {
    let mut common = ctx.through_port(0, |ctx| resolve::namespace_list(ctx, Cns::ActiveNamespaceList))?;
    for n in 2..=ctx.device.port_count() + 1 {
        let active = ctx.through_port(n - 1, |ctx| resolve::namespace_list(ctx, Cns::ActiveNamespaceList))?;
        common.retain(|nsid| active.contains(nsid));
    }
    Ok(common)
}

/// A string field of Identify Controller as text, for messages.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim_end_matches(['\0', ' ']).to_string()
}

/// `check: port_identity`.
pub fn port_identity(ctx: &mut CaseContext<'_>) -> StepResult {
    require_ports(ctx, 2, "the identity of the ports")?;
    let ids = identify_ports(ctx)?;
    for (k, id) in ids.iter().enumerate() {
        ctx.log.push(format!(
            "port {}: CNTLID {}, CMIC {:#04x}, SN '{}', SUBNQN '{}'",
            k + 1,
            id.cntlid,
            id.cmic.into_bits(),
            text(&id.sn),
            text(&id.subnqn)
        ));
    }
    let first = &ids[0];
    for (k, id) in ids.iter().enumerate().skip(1) {
        let port = k + 1;
        let fields = [
            ("PCI Vendor ID (VID)", format!("{:#06x}", first.vid), format!("{:#06x}", id.vid)),
            ("PCI Subsystem Vendor ID (SSVID)", format!("{:#06x}", first.ssvid), format!("{:#06x}", id.ssvid)),
            ("Serial Number (SN)", text(&first.sn), text(&id.sn)),
            ("Model Number (MN)", text(&first.mn), text(&id.mn)),
        ];
        for (field, one, other) in fields {
            if one != other {
                return Err(ctx.fail_rule(
                    rules::ports_one_subsystem(),
                    format!("Identify Controller on port 1 and on port {port}"),
                    format!("{field} '{other}' on port {port}, '{one}' on port 1"),
                    format!("the same {field} on every controller of the NVM subsystem"),
                ));
            }
        }
        let has_nqn = ctx.facts.version >= Version::new(1, 2, 1) && first.subnqn[0] != 0;
        if has_nqn && first.subnqn != id.subnqn {
            return Err(ctx.fail_rule(
                rules::ports_one_subsystem(),
                format!("Identify Controller on port 1 and on port {port}"),
                format!("SUBNQN '{}' on port {port}, '{}' on port 1", text(&id.subnqn), text(&first.subnqn)),
                "the same NVM Subsystem NQN (SUBNQN) on every controller of the NVM subsystem",
            ));
        }
    }
    for (k, id) in ids.iter().enumerate() {
        if let Some(j) = ids[..k].iter().position(|other| other.cntlid == id.cntlid) {
            return Err(ctx.fail_rule(
                rules::cntlid_unique(),
                format!("Identify Controller on port {} and on port {}", j + 1, k + 1),
                format!("CNTLID {} on both", id.cntlid),
                "a CNTLID of its own on every controller of the NVM subsystem",
            ));
        }
        if !id.cmic.multiple_controllers() {
            return Err(ctx.fail_rule(
                rules::cmic_multiple_controllers(),
                format!("Identify Controller on port {}", k + 1),
                format!("CMIC {:#04x} (bit 1 clear) with {} reached", id.cmic.into_bits(), reached(&*ctx.device)),
                "CMIC bit 1 set: the NVM subsystem may contain two or more controllers",
            ));
        }
    }
    if ctx.facts.namespace_management() {
        let all: Vec<u16> = ids.iter().map(|id| id.cntlid).collect();
        for n in 1..=ids.len() {
            let listed = ctx.through_port(n - 1, |ctx| controller_list(ctx, Cns::ControllerList, 0))?;
            if let Some(missing) = all.iter().find(|c| !listed.contains(c)) {
                return Err(ctx.fail_rule(
                    rules::subsystem_controller_list(),
                    format!("Identify CNS 13h (controllers in the NVM subsystem) on port {n}"),
                    format!("controller list {listed:?}: CNTLID {missing} missing"),
                    format!("every controller of the NVM subsystem listed, at least CNTLIDs {all:?}"),
                ));
            }
        }
    }
    Ok(())
}

/// An Identify controller list (CNS 12h of `nsid`, or 13h) as the port in use returns it.
fn controller_list(ctx: &mut CaseContext<'_>, cns: Cns, nsid: u32) -> StepResult<Vec<u16>> {
    let mut list = ControllerList::new_zeroed();
    let what = format!("Identify CNS {:02X}h NSID {nsid:#x}", cns as u8);
    let c = ctx.admin(&what, identify(cns, nsid, 0), Data::FromDevice(list.as_mut_bytes()))?;
    ctx.require_success(&what, &c)?;
    Ok(list.ids().collect())
}

/// What `private_namespace` set up, to undo.
enum Undo {
    /// A namespace it created: deleted.
    Delete(u32),
    /// A namespace found detached that it attached to port 1: detached again.
    Detach(u32, u16),
    Nothing,
}

/// `private_namespace`.
pub fn private_namespace(ctx: &mut CaseContext<'_>) -> StepResult {
    let ids = cntlids(ctx, "a namespace private to one controller")?;
    if !ctx.facts.namespace_management() {
        return Err(StepError::Skip(
            "OACS bit 3 (Namespace Management and Attachment) is 0: no namespace can be attached to one port and \
             not the other"
                .into(),
        ));
    }
    ctx.port = 0;
    let (nsid, undo) = find_or_make_private(ctx, ids[0])?;
    let judged = judge_private(ctx, nsid, &ids);
    let undone = match undo {
        Undo::Delete(nsid) => {
            let what = format!("Namespace Management delete NSID {nsid} (the private namespace the step created)");
            let c = ctx.admin(&what, namespace_delete(nsid), Data::None)?;
            ctx.require_success(&what, &c)
        }
        Undo::Detach(nsid, cntlid) => {
            let what = format!("Namespace Attachment detach NSID {nsid} from CNTLID {cntlid} (as it was found)");
            let c = attachment(ctx, &what, nsid, cntlid, false)?;
            ctx.require_success(&what, &c)
        }
        Undo::Nothing => Ok(()),
    };
    ctx.device.namespaces_changed()?;
    judged.and(undone)
}

fn attachment(
    ctx: &mut CaseContext<'_>,
    what: &str,
    nsid: u32,
    cntlid: u16,
    attach: bool,
) -> StepResult<nvme::spec::Completion> {
    let list = ControllerList::from_ids(&[cntlid]).map_err(|e| StepError::Error(e.to_string()))?;
    let cmd = if attach { namespace_attach(nsid) } else { namespace_detach(nsid) };
    ctx.admin(what, cmd, Data::ToDevice(list.as_bytes()))
}

/// A private namespace attached to port 1 (CNTLID `first`) alone: an allocated one with
/// NMIC bit 0 clear, attached to no controller or to port 1 only, or else a new one.
fn find_or_make_private(ctx: &mut CaseContext<'_>, first: u16) -> StepResult<(u32, Undo)> {
    let allocated = resolve::namespace_list(ctx, Cns::AllocatedNamespaceList)?;
    let mut looked_at = Vec::new();
    for nsid in allocated {
        let mut ns = IdentifyNamespace::new_zeroed();
        let what = format!("Identify CNS 11h (allocated namespace) NSID {nsid}");
        let c = ctx.admin(&what, identify(Cns::AllocatedNamespace, nsid, 0), Data::FromDevice(ns.as_mut_bytes()))?;
        ctx.require_success(&what, &c)?;
        let attached = controller_list(ctx, Cns::NamespaceAttachedControllers, nsid)?;
        looked_at.push(format!("NSID {nsid} NMIC {:#04x} attached to {attached:?}", ns.nmic.into_bits()));
        if ns.nmic.shared() || attached.iter().any(|c| *c != first) {
            continue;
        }
        if attached.is_empty() {
            let what = format!("Namespace Attachment attach NSID {nsid} to CNTLID {first} (port 1)");
            let c = attachment(ctx, &what, nsid, first, true)?;
            ctx.require_success(&what, &c)?;
            ctx.device.namespaces_changed()?;
            return Ok((nsid, Undo::Detach(nsid, first)));
        }
        return Ok((nsid, Undo::Nothing));
    }
    if !ctx.facts.can_create_namespaces() {
        return Err(StepError::Skip(format!(
            "no private namespace (NMIC bit 0 clear) is allocated and free for port 1, and namespaces cannot be \
             created here; allocated namespaces: {}",
            if looked_at.is_empty() { "none".to_string() } else { looked_at.join(", ") }
        )));
    }
    // As `use_namespaces` does on a drive that can create namespaces: every namespace
    // deleted first, so that the capacity a drive ships fully allocated is free.
    super::namespaces::delete_all(ctx)?;
    let index = ctx.facts.formats.iter().position(|f| f.ms == 0).unwrap_or(0) as u8;
    let nsze = 1024;
    let data = IdentifyNamespace::for_create(
        nsze,
        nsze,
        nvme::spec::identify::Flbas::new().with_format(index),
        nvme::spec::identify::Dps::new(),
        Nmic::new(),
    );
    let what = format!("Namespace Management create NSZE=NCAP={nsze} FLBAS {index} NMIC 0 (private)");
    let c = ctx.admin(&what, namespace_create(), Data::ToDevice(data.as_bytes()))?;
    ctx.require_success(&what, &c)?;
    let nsid = created_nsid(&c);
    let what = format!("Namespace Attachment attach NSID {nsid} to CNTLID {first} (port 1)");
    let c = attachment(ctx, &what, nsid, first, true)?;
    if let Err(e) = ctx.require_success(&what, &c) {
        let _ = ctx.admin("Namespace Management delete (undoing the create)", namespace_delete(nsid), Data::None);
        return Err(e);
    }
    ctx.device.namespaces_changed()?;
    Ok((nsid, Undo::Delete(nsid)))
}

/// The rules of a private namespace attached to port 1 (CNTLID `ids[0]`) alone.
fn judge_private(ctx: &mut CaseContext<'_>, nsid: u32, ids: &[u16]) -> StepResult {
    let (first, second) = (ids[0], ids[1]);
    let active = ctx.through_port(1, |ctx| resolve::namespace_list(ctx, Cns::ActiveNamespaceList))?;
    if active.contains(&nsid) {
        return Err(ctx.fail_rule(
            rules::attached_controllers_only(),
            "Identify CNS 02h (Active Namespace ID list) on port 2",
            format!("NSID {nsid} listed, though it is attached to CNTLID {first} (port 1) only"),
            format!("NSID {nsid} absent: it is not attached to CNTLID {second}"),
        ));
    }
    let what = format!("Namespace Attachment attach private NSID {nsid} to CNTLID {second} (port 2)");
    let c = attachment(ctx, &what, nsid, second, true)?;
    let status = c.status();
    if status.is_success() {
        let undo = format!("Namespace Attachment detach NSID {nsid} from CNTLID {second} (undoing the attach)");
        let _ = attachment(ctx, &undo, nsid, second, false);
    }
    if !status.same_code(&Status::NAMESPACE_IS_PRIVATE) {
        return Err(ctx.fail_rule(
            rules::namespace_is_private(),
            what,
            status.to_string(),
            "Namespace Is Private: the namespace is private and already attached to one controller",
        ));
    }
    let listed = controller_list(ctx, Cns::NamespaceAttachedControllers, nsid)?;
    if listed != [first] {
        return Err(ctx.fail_rule(
            rules::controller_list(),
            format!("Identify CNS 12h (controllers attached) NSID {nsid}"),
            format!("controller list {listed:?}"),
            format!("[{first}]: the private namespace is attached to port 1 alone"),
        ));
    }
    Ok(())
}
