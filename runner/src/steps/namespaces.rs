//! Namespace steps: setting up the case's namespace set, Namespace Management create and
//! delete, Namespace Attachment, Format NVM.

use nvme::device::Data;
use nvme::spec::identify::{
    identify, AtomicWrite, Cns, ControllerList, Dps, Flbas, IdentifyController, IdentifyNamespace, Nmic,
};
use nvme::spec::namespace::{
    created_nsid, format_nvm, namespace_attach, namespace_create, namespace_delete, namespace_detach, FormatNvm,
    ALL_NAMESPACES,
};
use zerocopy::{FromZeros, IntoBytes};

use super::facts::format_settings;
use super::ports;
use super::readback;
use super::resolve::{self, param, NsTarget};
use super::{CaseContext, StepError, StepResult};
use crate::data::judge::DeallocatedRead;
use crate::data::Expectation;
use crate::rules;
use crate::suite::model::{Blocks, BlocksName, Expect, Lba, LbaName, NsRef, Param};

/// A namespace of the case's set, as nvtest believes it to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NsEntry {
    pub nsid: u32,
    /// The LBA data size the case asked for (0 when it took an existing namespace as is).
    pub requested_block_size: u64,
    /// The LBA data size the namespace reports (Identify Namespace, format in use).
    pub block_size: u64,
    /// MS of the format in use: metadata bytes per block.
    pub metadata_size: u64,
    /// FLBAS bit 4: the metadata is part of an extended LBA (else a separate buffer).
    pub extended: bool,
    /// DPS bits 2:0: the end-to-end protection type in use (0: none).
    pub protection: u8,
    pub nsze: u64,
    pub allocated: bool,
    pub attached: bool,
    /// What reads of deallocated blocks return (DLFEAT bits 2:0).
    pub dealloc_read: DeallocatedRead,
    /// Which writes are atomic in normal operation (AWUN/NAWUN, NABSN/NABO).
    pub atomic: AtomicWrite,
}

/// `use_namespaces`: the case's namespace set.
pub fn use_namespaces(
    ctx: &mut CaseContext<'_>,
    count: &Param<u32>,
    lbads: &[Param<u32>],
    blocks: &Param<u64>,
    create: bool,
    shared: bool,
) -> StepResult {
    // The controllers the namespaces are attached to: this one, or every port.
    let attach_to = match shared {
        true => ports::cntlids(ctx, "a namespace shared by two controllers")?,
        false => vec![ctx.facts.cntlid],
    };
    let count = param(count)? as usize;
    let sizes = lbads.iter().map(param).collect::<StepResult<Vec<u32>>>()?;
    if sizes.is_empty() {
        return Err(StepError::Error("use_namespaces needs at least one LBA data size".into()));
    }
    let blocks = param(blocks)?;
    ctx.set.clear();
    ctx.map.reset_all();
    if create || ctx.facts.can_create_namespaces() {
        delete_all(ctx)?;
        for i in 0..count {
            let size = sizes[i % sizes.len()] as u64;
            let index = format_index(ctx, size)?;
            let nsid = create_checked(ctx, index, blocks, size, Nmic::new().with_shared(shared))?;
            let what = format!("Namespace Attachment attach NSID {nsid} to CNTLIDs {attach_to:?}");
            let c = send_attachment_to(ctx, &what, nsid, true, &attach_to)?;
            setup_success(ctx, Setup::Attach, &what, &c)?;
            readback::after_attachment(ctx, &what, nsid, true)?;
            let i = ctx.set.len() - 1;
            ctx.set[i].attached = true;
        }
        ctx.device.namespaces_changed()?;
        for i in 0..ctx.set.len() {
            refresh(ctx, i)?;
        }
        return Ok(());
    }
    // Without namespace creation: take existing active namespaces of the sizes asked
    // for, after re-attaching any an earlier case detached.
    if ctx.facts.namespace_management() {
        reattach_detached(ctx)?;
    }
    let active = match shared {
        true => ports::active_on_every_port(ctx)?,
        false => resolve::namespace_list(ctx, Cns::ActiveNamespaceList)?,
    };
    let mut candidates = Vec::new();
    for nsid in active {
        let ns = restore_format(ctx, nsid)?;
        if shared && !ns.nmic.shared() {
            continue;
        }
        candidates.push(Candidate::of(nsid, &ns));
    }
    let looked_at = candidates.iter().map(Candidate::describe).collect::<Vec<_>>();
    // An existing namespace serves when it holds every block the case's steps address
    // (not necessarily the size the case would create).
    let blocks = ctx.blocks_needed.map_or(blocks, |needed| needed.min(blocks).max(1));
    for i in 0..count {
        let size = sizes[i % sizes.len()] as u64;
        // Large enough, and without metadata or protection where there is one: the case
        // is about data; metadata formats are used (and their metadata judged) when
        // they are all there is.
        let fits = |c: &Candidate| c.data == size && c.nsze >= blocks;
        let pos = candidates
            .iter()
            .position(|c| fits(c) && c.metadata == 0 && c.protection == 0)
            .or_else(|| candidates.iter().position(|c| fits(c) && c.protection == 0))
            .or_else(|| candidates.iter().position(fits));
        let Some(pos) = pos else {
            return Err(StepError::Skip(format!(
                "namespaces cannot be created here ({}) and too few {}namespaces have {size}-byte LBAs and at \
                 least {blocks} blocks (the case needs {count} namespaces of sizes {sizes:?}, each holding the blocks its \
                 steps address); {}namespaces: {}",
                if ctx.facts.namespace_management() {
                    "OACS bit 3 is set, but the Commands Supported and Effects log does not support opcode 0Dh"
                } else {
                    "OACS bit 3 (Namespace Management) is 0"
                },
                if shared { "shared (NMIC bit 0) " } else { "active " },
                if shared { "shared namespaces active on every port: " } else { "active " },
                if looked_at.is_empty() { "none".to_string() } else { looked_at.join(", ") }
            )));
        };
        let chosen = candidates.remove(pos);
        take_active(ctx, chosen.nsid, size)?;
    }
    Ok(())
}

/// Identify Namespace of active `nsid`, after formatting it back to the settings it had
/// when the session opened if an earlier case reformatted it: every case starts from the
/// drive as it was found, so a verdict does not depend on the cases run before it.
fn restore_format(ctx: &mut CaseContext<'_>, nsid: u32) -> StepResult<IdentifyNamespace> {
    let ns = identify_namespace(ctx, nsid)?;
    let Some(&(_, provisioned)) = ctx.facts.provisioned_formats.iter().find(|(id, _)| *id == nsid) else {
        return Ok(ns);
    };
    if format_settings(&ns) == provisioned {
        return Ok(ns);
    }
    let what = format!(
        "Format NVM NSID {nsid:#x} LBAF {} MSET {} PI {} SES 0 (restoring the format NSID {nsid} had when the \
         session opened; an earlier case reformatted it)",
        provisioned.lbaf(),
        u8::from(provisioned.mset()),
        provisioned.pi()
    );
    let c = ctx.admin(&what, format_nvm(nsid, provisioned), Data::None)?;
    setup_success(ctx, Setup::Format, &what, &c)?;
    ctx.map.reset_namespace(nsid);
    ctx.device.namespaces_changed()?;
    let ns = identify_namespace(ctx, nsid)?;
    readback::after_format(ctx, &what, &ns, nsid, provisioned.lbaf())?;
    Ok(ns)
}

/// An active namespace `use_namespaces` may take, as Identify Namespace reports it.
struct Candidate {
    nsid: u32,
    data: u64,
    metadata: u16,
    extended: bool,
    protection: u8,
    nsze: u64,
}

impl Candidate {
    fn of(nsid: u32, ns: &IdentifyNamespace) -> Candidate {
        Candidate {
            nsid,
            data: ns.lba_data_size().unwrap_or(0),
            metadata: ns.lba_format_in_use().map_or(0, |f| f.ms),
            extended: ns.extended_metadata(),
            protection: ns.dps.pit(),
            nsze: ns.nsze,
        }
    }

    /// "NSID 2: 4096+16 (extended), 1000 blocks".
    fn describe(&self) -> String {
        let metadata = match (self.metadata, self.extended) {
            (0, _) => String::new(),
            (ms, true) => format!("+{ms} (extended)"),
            (ms, false) => format!("+{ms} (separate)"),
        };
        let protection = if self.protection != 0 { format!(", PI type {}", self.protection) } else { String::new() };
        format!("NSID {}: {}{metadata}{protection}, {} blocks", self.nsid, self.data, self.nsze)
    }
}

/// Adds the active namespace `nsid` to the set as the drive reports it (Identify
/// Namespace), recording the LBA data size the case asked for (0: none).
pub(crate) fn take_active(ctx: &mut CaseContext<'_>, nsid: u32, requested_block_size: u64) -> StepResult {
    ctx.set.push(NsEntry {
        nsid,
        requested_block_size,
        block_size: requested_block_size,
        metadata_size: 0,
        extended: false,
        protection: 0,
        nsze: 0,
        allocated: true,
        attached: true,
        dealloc_read: DeallocatedRead::NotReported,
        atomic: AtomicWrite::ONE_BLOCK,
    });
    let i = ctx.set.len() - 1;
    refresh(ctx, i)
}

/// `existing_namespaces`: the case's set is every active namespace as the drive has it.
/// Only Identify is sent, so the step is allowed in a `destructive: false` case.
pub fn existing_namespaces(ctx: &mut CaseContext<'_>) -> StepResult {
    ctx.set.clear();
    ctx.map.reset_all();
    let active = resolve::namespace_list(ctx, Cns::ActiveNamespaceList)?;
    if active.is_empty() {
        return Err(StepError::Skip("the Active Namespace ID list (CNS 02h) is empty: no namespace to check".into()));
    }
    for nsid in active {
        take_active(ctx, nsid, 0)?;
    }
    Ok(())
}

/// Attaches to this controller every namespace that was active when the session
/// opened and is not now (an earlier case detached it), so each case starts from the
/// drive's provisioned set.
fn reattach_detached(ctx: &mut CaseContext<'_>) -> StepResult {
    let active = resolve::namespace_list(ctx, Cns::ActiveNamespaceList)?;
    let missing: Vec<u32> =
        ctx.facts.active_namespaces.iter().map(|&(id, _)| id).filter(|id| !active.contains(id)).collect();
    let mut changed = false;
    for nsid in missing {
        let what = format!("Namespace Attachment attach NSID {nsid} (detached by an earlier case)");
        let c = send_attachment(ctx, &what, nsid, true)?;
        setup_success(ctx, Setup::Attach, &what, &c)?;
        readback::after_attachment(ctx, &what, nsid, true)?;
        changed = true;
    }
    if changed {
        ctx.device.namespaces_changed()?;
    }
    Ok(())
}

/// `delete_all_namespaces`: Namespace Management delete with NSID FFFFFFFFh.
pub fn delete_all(ctx: &mut CaseContext<'_>) -> StepResult {
    let what = "Namespace Management delete NSID FFFFFFFFh (all)";
    let c = ctx.admin(what, namespace_delete(ALL_NAMESPACES), Data::None)?;
    setup_success(ctx, Setup::DeleteAll, what, &c)?;
    let left = resolve::namespace_list(ctx, Cns::AllocatedNamespaceList)?;
    if !left.is_empty() {
        return Err(ctx.fail_rule(
            rules::delete_all(),
            what,
            format!("Successful Completion, but the Allocated Namespace ID list still holds {left:?}"),
            "no allocated namespace",
        ));
    }
    for entry in &mut ctx.set {
        entry.allocated = false;
        entry.attached = false;
    }
    ctx.map.reset_all();
    ctx.device.namespaces_changed()?;
    Ok(())
}

/// `create_namespace`.
pub fn create(
    ctx: &mut CaseContext<'_>,
    lbads: Option<&Param<u32>>,
    lbaf: Option<&Param<u8>>,
    blocks: &Blocks,
    expect: Option<&Expect>,
) -> StepResult {
    let (index, size) = chosen_format(ctx, "create_namespace", lbads, lbaf)?;
    // A raw (unsupported) index has no data size; capacity is counted in 512-byte blocks.
    let size = size.unwrap_or(512);
    let nsze = match blocks {
        Blocks::Named(BlocksName::Remaining) => unallocated_blocks(ctx, size)?,
        Blocks::Named(BlocksName::MoreThanRemaining) => unallocated_blocks(ctx, size)? + 1,
        other => resolve::blocks(other, 0)?,
    };
    let (what, c) = send_create(ctx, index, nsze, Nmic::new())?;
    ctx.expect(&what, &c, expect)?;
    if c.status().is_success() {
        let nsid = created_nsid(&c);
        readback::after_create(ctx, &what, nsid, nsze, index)?;
        push_created(ctx, nsid, size, nsze);
    }
    Ok(())
}

/// `create_until_full`: creates and attaches namespaces until every NSID up to NN is allocated.
pub fn create_until_full(ctx: &mut CaseContext<'_>, lbads: &Param<u32>, blocks: &Param<u64>) -> StepResult {
    let size = param(lbads)? as u64;
    let blocks = param(blocks)?;
    let index = format_index(ctx, size)?;
    let allocated = resolve::namespace_list(ctx, Cns::AllocatedNamespaceList)?.len() as u32;
    for _ in allocated..ctx.facts.nn {
        let nsid = create_checked(ctx, index, blocks, size, Nmic::new())?;
        let what = format!("Namespace Attachment attach NSID {nsid}");
        let c = send_attachment(ctx, &what, nsid, true)?;
        setup_success(ctx, Setup::Attach, &what, &c)?;
        readback::after_attachment(ctx, &what, nsid, true)?;
        let i = ctx.set.len() - 1;
        ctx.set[i].attached = true;
    }
    ctx.device.namespaces_changed()?;
    Ok(())
}

/// `delete_namespace`.
pub fn delete(ctx: &mut CaseContext<'_>, ns: &NsRef, expect: Option<&Expect>) -> StepResult {
    let target = resolve::ns_one(ctx, ns)?;
    let nsid = target.nsid(ctx);
    let what = format!("Namespace Management delete NSID {nsid:#x}");
    let c = ctx.admin(&what, namespace_delete(nsid), Data::None)?;
    ctx.expect(&what, &c, expect)?;
    if c.status().is_success() {
        if let NsTarget::Member(i) = target {
            ctx.set[i].allocated = false;
            ctx.set[i].attached = false;
        }
        ctx.map.reset_namespace(nsid);
        ctx.device.namespaces_changed()?;
        readback::after_delete(ctx, &what, nsid)?;
    }
    Ok(())
}

/// `attach` (`attach == true`) and `detach`: Namespace Attachment for this controller.
pub fn attach(ctx: &mut CaseContext<'_>, ns: &NsRef, attach: bool, expect: Option<&Expect>) -> StepResult {
    let target = resolve::ns_one(ctx, ns)?;
    let nsid = target.nsid(ctx);
    let verb = if attach { "attach" } else { "detach" };
    let what = format!("Namespace Attachment {verb} NSID {nsid:#x} to/from CNTLID {}", ctx.facts.cntlid);
    let c = send_attachment(ctx, &what, nsid, attach)?;
    ctx.expect(&what, &c, expect)?;
    if c.status().is_success() {
        if let NsTarget::Member(i) = target {
            ctx.set[i].attached = attach;
        }
        ctx.device.namespaces_changed()?;
        readback::after_attachment(ctx, &what, nsid, attach)?;
        if let NsTarget::Member(i) = target {
            if attach {
                refresh(ctx, i)?;
            }
        }
    }
    Ok(())
}

/// `format`: Format NVM of one namespace to a format given by data size or raw index.
pub fn format(
    ctx: &mut CaseContext<'_>,
    ns: &NsRef,
    lbads: Option<&Param<u32>>,
    lbaf: Option<&Param<u8>>,
    expect: Option<&Expect>,
) -> StepResult {
    let target = resolve::ns_one(ctx, ns)?;
    let nsid = target.nsid(ctx);
    let (index, size) = chosen_format(ctx, "format", lbads, lbaf)?;
    let what = format!("Format NVM NSID {nsid:#x} LBAF {index} SES 0");
    let c = ctx.admin(&what, format_nvm(nsid, FormatNvm::new().with_lbaf(index)), Data::None)?;
    ctx.expect(&what, &c, expect)?;
    if c.status().is_success() {
        match target {
            NsTarget::Member(i) => {
                formatted(ctx, i, &what, index)?;
                if let Some(size) = size {
                    ctx.set[i].requested_block_size = size;
                }
            }
            NsTarget::Raw(_) => {
                ctx.map.reset_namespace(nsid);
                ctx.device.namespaces_changed()?;
            }
        }
    }
    Ok(())
}

/// Identify Namespace (CNS 00h) of `nsid`, requiring success.
pub fn identify_namespace(ctx: &mut CaseContext<'_>, nsid: u32) -> StepResult<IdentifyNamespace> {
    let mut ns = IdentifyNamespace::new_zeroed();
    let what = format!("Identify Namespace NSID {nsid}");
    let c = ctx.admin(&what, identify(Cns::Namespace, nsid, 0), Data::FromDevice(ns.as_mut_bytes()))?;
    ctx.require_success(&what, &c)?;
    Ok(ns)
}

/// Re-reads a member's size, format and DLFEAT from Identify Namespace.
pub fn refresh(ctx: &mut CaseContext<'_>, i: usize) -> StepResult {
    let nsid = ctx.set[i].nsid;
    let ns = identify_namespace(ctx, nsid)?;
    learn(&mut ctx.set[i], &ns, ctx.facts.identify.awun);
    Ok(())
}

/// Takes a member's size, format, DLFEAT and atomic write unit from its Identify
/// Namespace data (and the controller's AWUN).
fn learn(entry: &mut NsEntry, ns: &IdentifyNamespace, awun: u16) {
    entry.nsze = ns.nsze;
    entry.block_size = ns.lba_data_size().unwrap_or(0);
    entry.metadata_size = ns.lba_format_in_use().map_or(0, |f| f.ms as u64);
    entry.extended = ns.extended_metadata();
    entry.protection = ns.dps.pit();
    entry.dealloc_read = ns.dlfeat.read_behavior();
    entry.atomic = ns.atomic_write_normal(awun);
}

/// The LBA format a step asks for: by data size (a supported format, else the case is
/// skipped), or as a raw index that must be unsupported (the step checks the rejection),
/// with the data size when known.
fn chosen_format(
    ctx: &CaseContext<'_>,
    step: &str,
    lbads: Option<&Param<u32>>,
    lbaf: Option<&Param<u8>>,
) -> StepResult<(u8, Option<u64>)> {
    match (lbads, lbaf) {
        (Some(l), None) => {
            let size = param(l)? as u64;
            Ok((format_index(ctx, size)?, Some(size)))
        }
        (None, Some(f)) => {
            let index = param(f)?;
            let supported = ctx.facts.formats.len();
            if (index as usize) < supported {
                return Err(StepError::Skip(format!(
                    "LBA format index {index} is supported (NLBAF + 1 = {supported}); no unsupported index to send"
                )));
            }
            Ok((index, None))
        }
        _ => Err(StepError::Error(format!("{step} takes exactly one of lbads and lbaf"))),
    }
}

fn format_index(ctx: &CaseContext<'_>, size: u64) -> StepResult<u8> {
    ctx.facts
        .format_index(size)
        .ok_or_else(|| StepError::Skip(format!("no LBA format with {size}-byte data is supported")))
}

fn unallocated_blocks(ctx: &mut CaseContext<'_>, block_size: u64) -> StepResult<u64> {
    let mut ctrl = IdentifyController::new_zeroed();
    let what = "Identify Controller (UNVMCAP)";
    let c = ctx.admin(what, identify(Cns::Controller, 0, 0), Data::FromDevice(ctrl.as_mut_bytes()))?;
    ctx.require_success(what, &c)?;
    Ok((ctrl.unvmcap() / block_size as u128).min(u64::MAX as u128 - 1) as u64)
}

fn send_create(
    ctx: &mut CaseContext<'_>,
    index: u8,
    nsze: u64,
    nmic: Nmic,
) -> StepResult<(String, nvme::spec::Completion)> {
    let data = IdentifyNamespace::for_create(nsze, nsze, Flbas::new().with_format(index), Dps::new(), nmic);
    let shared = if nmic.shared() { " NMIC 1 (shared)" } else { "" };
    let what = format!("Namespace Management create NSZE=NCAP={nsze} FLBAS {index}{shared}");
    let c = ctx.admin(&what, namespace_create(), Data::ToDevice(data.as_bytes()))?;
    Ok((what, c))
}

/// Creates a namespace the case depends on: any error fails the setup rule.
fn create_checked(ctx: &mut CaseContext<'_>, index: u8, nsze: u64, size: u64, nmic: Nmic) -> StepResult<u32> {
    let (what, c) = send_create(ctx, index, nsze, nmic)?;
    setup_success(ctx, Setup::Create, &what, &c)?;
    let nsid = created_nsid(&c);
    if nsid == 0 || nsid > ctx.facts.nn {
        return Err(ctx.fail_rule(
            rules::namespace_setup(),
            what,
            format!("created NSID {nsid:#x} (CQE DW0)"),
            format!("an NSID in 1..={}", ctx.facts.nn),
        ));
    }
    readback::after_create(ctx, &what, nsid, nsze, index)?;
    push_created(ctx, nsid, size, nsze);
    Ok(nsid)
}

/// Adds a namespace just created to the set; none of its blocks was ever written.
fn push_created(ctx: &mut CaseContext<'_>, nsid: u32, size: u64, nsze: u64) {
    ctx.map.reset_namespace(nsid);
    ctx.map.namespace_mut(nsid).set(0, nsze, Expectation::Erased { dlfeat: true });
    ctx.set.push(NsEntry {
        nsid,
        requested_block_size: size,
        block_size: size,
        metadata_size: 0,
        extended: false,
        protection: 0,
        nsze,
        allocated: true,
        attached: false,
        dealloc_read: DeallocatedRead::NotReported,
        atomic: AtomicWrite::ONE_BLOCK,
    });
}

fn send_attachment(
    ctx: &mut CaseContext<'_>,
    what: &str,
    nsid: u32,
    attach: bool,
) -> StepResult<nvme::spec::Completion> {
    let cntlid = ctx.facts.cntlid;
    send_attachment_to(ctx, what, nsid, attach, &[cntlid])
}

/// Namespace Attachment of `nsid` naming the controllers `cntlids`.
pub(crate) fn send_attachment_to(
    ctx: &mut CaseContext<'_>,
    what: &str,
    nsid: u32,
    attach: bool,
    cntlids: &[u16],
) -> StepResult<nvme::spec::Completion> {
    let list = ControllerList::from_ids(cntlids).map_err(|e| StepError::Error(e.to_string()))?;
    let cmd = if attach { namespace_attach(nsid) } else { namespace_detach(nsid) };
    ctx.admin(what, cmd, Data::ToDevice(list.as_bytes()))
}

/// What a setup command was, for the rule its failure breaks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Setup {
    Create,
    Attach,
    DeleteAll,
    Format,
}

/// A setup command must succeed. Its failure names the rule actually broken: the
/// capability bit when the controller does not know a command it advertises (Invalid
/// Command Opcode), else the rule of the operation.
fn setup_success(ctx: &CaseContext<'_>, setup: Setup, what: &str, c: &nvme::spec::Completion) -> StepResult {
    let status = c.status();
    if status.is_success() {
        return Ok(());
    }
    if let Some(contradicted) = ctx.capability_contradicted(what, c) {
        return Err(contradicted);
    }
    let rule = match setup {
        Setup::Create | Setup::Attach => rules::namespace_setup(),
        Setup::DeleteAll => rules::delete_all(),
        Setup::Format => rules::format_supported(),
    };
    Err(ctx.fail_rule(rule, what, status.to_string(), "Successful Completion"))
}

/// `format_each_lba_format`: every LBA format the namespace's table lists (index 0 to
/// NLBAF) is formatted to and used — Identify Namespace reports it, and the first, middle
/// and last blocks hold what is written (with their metadata) — then the namespace is
/// formatted back to what it had. A listed format that Format NVM refuses, or that does
/// not hold data, fails the drive: it advertised the format.
pub fn format_each_lba_format(ctx: &mut CaseContext<'_>, ns: &NsRef) -> StepResult {
    let NsTarget::Member(i) = resolve::ns_one(ctx, ns)? else {
        return Err(StepError::Error("format_each_lba_format needs a namespace of the set".into()));
    };
    let nsid = ctx.set[i].nsid;
    let original = identify_namespace(ctx, nsid)?;
    let listed = (original.nlbaf as usize + 1).min(original.lbaf.len());
    for index in 0..listed as u8 {
        let f = original.lbaf[index as usize];
        if f.lbads < 9 {
            return Err(ctx.fail_rule(
                rules::lba_format(),
                format!("Identify Namespace NSID {nsid}"),
                format!("LBAF{index} (listed: NLBAF is {}) has LBADS {}", original.nlbaf, f.lbads),
                "LBADS of at least 9 (512 bytes) for every listed format",
            ));
        }
        // Metadata in a separate buffer unless the namespace can only carry it in an
        // extended LBA (MC); never protection information, which nvtest does not generate.
        let extended = f.ms > 0 && !original.mc.separate_buffer() && original.mc.extended_lba();
        let settings = FormatNvm::new().with_lbaf(index).with_mset(extended);
        let what = format!(
            "Format NVM NSID {nsid:#x} LBAF {index} ({} + {} bytes{}) MSET {} PI 0 SES 0",
            1u64 << f.lbads,
            f.ms,
            if extended { ", extended" } else { "" },
            u8::from(extended)
        );
        let c = ctx.admin(&what, format_nvm(nsid, settings), Data::None)?;
        if !c.status().is_success() {
            if let Some(contradicted) = ctx.capability_contradicted(&what, &c) {
                return Err(contradicted);
            }
            return Err(ctx.fail_rule(
                rules::advertised_format(),
                what,
                c.status().to_string(),
                format!("Successful Completion: LBAF{index} is one of the NLBAF + 1 = {listed} formats listed"),
            ));
        }
        formatted(ctx, i, &what, index)?;
        ctx.set[i].requested_block_size = 1 << f.lbads;
        ctx.log.push(format!("LBAF{index}: formatted; writing and reading back the first, middle and last blocks"));
        let one = Blocks::Count(Param::Value(1));
        for lba in [Lba::At(Param::Value(0)), Lba::Named(LbaName::Middle), Lba::Named(LbaName::Last)] {
            super::io::write(ctx, &NsRef::Index(Param::Value(i as u32 + 1)), &lba, &one, false, false)?;
        }
        super::io::verify(ctx, &NsRef::Index(Param::Value(i as u32 + 1)), None, None)?;
    }
    let back = format_settings(&original);
    let what = format!(
        "Format NVM NSID {nsid:#x} LBAF {} MSET {} PI {} SES 0 (back to the format the namespace had)",
        back.lbaf(),
        u8::from(back.mset()),
        back.pi()
    );
    let c = ctx.admin(&what, format_nvm(nsid, back), Data::None)?;
    setup_success(ctx, Setup::Format, &what, &c)?;
    formatted(ctx, i, &what, back.lbaf())?;
    ctx.set[i].requested_block_size = ctx.set[i].block_size;
    Ok(())
}

/// After a successful Format NVM of member `i` to LBA format `index`: Identify Namespace
/// reports the format, no block holds its old data, and the member is re-read.
fn formatted(ctx: &mut CaseContext<'_>, i: usize, what: &str, index: u8) -> StepResult {
    let nsid = ctx.set[i].nsid;
    ctx.device.namespaces_changed()?;
    let ns = identify_namespace(ctx, nsid)?;
    readback::after_format(ctx, what, &ns, nsid, index)?;
    ctx.map.reset_namespace(nsid);
    ctx.map.namespace_mut(nsid).set(0, ns.nsze, Expectation::Erased { dlfeat: false });
    learn(&mut ctx.set[i], &ns, ctx.facts.identify.awun);
    Ok(())
}
