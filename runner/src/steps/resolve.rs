//! Turning a step's references (`ns: 2`, `lba: last`, `blocks: whole`) into numbers for
//! the namespace set and device at hand.

use nvme::device::Data;
use nvme::spec::identify::{Cns, NamespaceList};
use zerocopy::FromZeros;

use super::{CaseContext, StepError, StepResult};
use crate::suite::model::{Blocks, BlocksName, Lba, LbaName, NsName, NsRef, Param};

/// A parameter after matrix expansion; a `$name` left here is an nvtest bug.
pub fn param<T: Clone>(p: &Param<T>) -> StepResult<T> {
    match p {
        Param::Value(v) => Ok(v.clone()),
        Param::Var(name) => Err(StepError::Error(format!("matrix parameter {name} was not expanded"))),
    }
}

/// What an `ns:` reference names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NsTarget {
    /// A member of the namespace set (index into `CaseContext::set`).
    Member(usize),
    /// A namespace identifier chosen for what it is (unallocated, beyond NN, 0, broadcast).
    Raw(u32),
}

impl NsTarget {
    pub fn nsid(self, ctx: &CaseContext<'_>) -> u32 {
        match self {
            NsTarget::Member(i) => ctx.set[i].nsid,
            NsTarget::Raw(nsid) => nsid,
        }
    }
}

/// Resolves a reference to one namespace.
pub fn ns_one(ctx: &mut CaseContext<'_>, r: &NsRef) -> StepResult<NsTarget> {
    match r {
        NsRef::Index(p) => {
            let i = param(p)? as usize;
            if i == 0 || i > ctx.set.len() {
                return Err(StepError::Error(format!(
                    "ns: {i} refers past the namespace set, which has {} namespaces",
                    ctx.set.len()
                )));
            }
            Ok(NsTarget::Member(i - 1))
        }
        NsRef::Named(NsName::Last) => match ctx.set.len() {
            0 => Err(StepError::Error("ns: last, but the namespace set is empty".into())),
            n => Ok(NsTarget::Member(n - 1)),
        },
        NsRef::Named(NsName::All) => Err(StepError::Error("ns: all is not allowed for a step on one namespace".into())),
        NsRef::Named(NsName::BeyondNn) => Ok(NsTarget::Raw(ctx.facts.nn.saturating_add(1))),
        NsRef::Named(NsName::Broadcast) => Ok(NsTarget::Raw(0xFFFF_FFFF)),
        NsRef::Named(NsName::Zero) => Ok(NsTarget::Raw(0)),
        NsRef::Named(NsName::Unallocated) => unallocated_nsid(ctx).map(NsTarget::Raw),
    }
}

/// Resolves a reference to one or all members of the set.
pub fn ns_members(ctx: &mut CaseContext<'_>, r: &NsRef) -> StepResult<Vec<usize>> {
    if let NsRef::Named(NsName::All) = r {
        return Ok((0..ctx.set.len()).collect());
    }
    match ns_one(ctx, r)? {
        NsTarget::Member(i) => Ok(vec![i]),
        NsTarget::Raw(nsid) => {
            Err(StepError::Error(format!("this step needs a namespace of the set, not NSID {nsid:#x}")))
        }
    }
}

/// The lowest NSID in 1..=NN that is not allocated (with Namespace Management) or not
/// active (without it). Skips the case when every identifier is taken.
pub fn unallocated_nsid(ctx: &mut CaseContext<'_>) -> StepResult<u32> {
    let cns = if ctx.facts.namespace_management() { Cns::AllocatedNamespaceList } else { Cns::ActiveNamespaceList };
    let taken = namespace_list(ctx, cns)?;
    (1..=ctx.facts.nn)
        .find(|id| !taken.contains(id))
        .ok_or_else(|| StepError::Skip(format!("every NSID up to NN ({}) is allocated", ctx.facts.nn)))
}

/// Reads a whole namespace list (CNS 02h or 10h), following it past 1024 entries.
pub fn namespace_list(ctx: &mut CaseContext<'_>, cns: Cns) -> StepResult<Vec<u32>> {
    let mut ids = Vec::new();
    let mut after = 0u32;
    loop {
        let mut list = NamespaceList::new_zeroed();
        let what = format!("Identify CNS {:02X}h NSID {after:#x}", cns as u8);
        let c = ctx.admin(
            &what,
            nvme::spec::identify::identify(cns, after, 0),
            Data::FromDevice(zerocopy::IntoBytes::as_mut_bytes(&mut list)),
        )?;
        ctx.require_success(&what, &c)?;
        let page: Vec<u32> = list.ids().collect();
        let full = page.len() == 1024;
        after = page.last().copied().unwrap_or(0);
        ids.extend(page);
        if !full || after >= 0xFFFF_FFFE {
            return Ok(ids);
        }
    }
}

/// Resolves an LBA reference within a namespace of `nsze` blocks.
pub fn lba(l: &Lba, nsze: u64) -> StepResult<u64> {
    Ok(match l {
        Lba::At(p) => param(p)?,
        Lba::Named(LbaName::Last) => nsze.saturating_sub(1),
        Lba::Named(LbaName::End) => nsze,
        Lba::Named(LbaName::Middle) => nsze / 2,
        Lba::FromEnd { from_end } => nsze.saturating_sub(*from_end),
        Lba::Spread { .. } => {
            return Err(StepError::Error("`lba: {spread: k}` only places a write's extents; fix the suite".into()))
        }
    })
}

/// The first LBA of each extent of `count` blocks a write at `l` covers in a namespace
/// of `nsze` blocks: one, or for `{spread: k}` the k extents at NSZE × i / (k + 1)
/// (i = 1..=k), each moved back to fit and never overlapping the one before.
pub fn write_extents(l: &Lba, nsze: u64, count: u64) -> StepResult<Vec<u64>> {
    let Lba::Spread { spread } = l else { return Ok(vec![lba(l, nsze)?]) };
    let mut starts: Vec<u64> = Vec::new();
    for i in 1..=*spread {
        let at = (nsze as u128 * i as u128 / (*spread as u128 + 1)) as u64;
        let at = at.min(nsze.saturating_sub(count));
        if starts.last().is_none_or(|prev| at >= prev + count) {
            starts.push(at);
        }
    }
    Ok(starts)
}

/// Resolves a block count within a namespace of `nsze` blocks (not `remaining`).
pub fn blocks(b: &Blocks, nsze: u64) -> StepResult<u64> {
    match b {
        Blocks::Count(p) => param(p),
        Blocks::Named(BlocksName::Whole) => Ok(nsze),
        Blocks::Named(other) => Err(StepError::Error(format!("blocks: {other:?} only applies to create_namespace"))),
    }
}
