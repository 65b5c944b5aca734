//! I/O steps: tagged writes the host map remembers, verification of every block the map
//! knows, raw commands with expected statuses (boundaries, invalid namespaces, MDTS),
//! Dataset Management deallocate, Write Zeroes, Flush and Compare. Every command moves
//! the namespace's metadata as its format in use lays it out ([`super::layout`]), and
//! the metadata of written blocks is judged like their data.

use nvme::device::Data;
use nvme::spec::nvm::{self, dataset_management, DsmAttributes, DsmRange};
use nvme::spec::{Completion, Status};

use super::layout::{metadata_pattern, Layout};
use super::resolve::{self, param, NsTarget};
use super::{expected_statuses, CaseContext, StepError, StepResult};
use crate::data::judge::{judge_range, DeallocatedRead, JudgeError, Mismatch};
use crate::data::{fill_blocks, BlockSize, BlockTag};
use crate::data::{Expectation, Previous};
use crate::rules;
use crate::suite::model::{Blocks, Expect, IoOp, Lba, NsRef, Param, Ranges};
use crate::verdict::Failure;

/// The most bytes one command moves when MDTS allows more (keeps buffers small).
const MAX_CHUNK_BYTES: u64 = 256 * 1024;

/// `write`: tagged data, split into commands of at most MDTS; every block recorded.
pub fn write(
    ctx: &mut CaseContext<'_>,
    ns: &NsRef,
    lba: &Lba,
    blocks: &Blocks,
    fua: bool,
    reverse: bool,
) -> StepResult {
    let mut members = resolve::ns_members(ctx, ns)?;
    if reverse {
        members.reverse();
    }
    for i in members {
        let (_, nsze, _) = member(ctx, i)?;
        let count = resolve::blocks(blocks, nsze)?;
        for first in resolve::write_extents(lba, nsze, count)? {
            write_extent(ctx, i, first, count, fua)?;
        }
    }
    Ok(())
}

/// One extent of a `write`: `count` tagged blocks from `first` on member `i`.
fn write_extent(ctx: &mut CaseContext<'_>, i: usize, first: u64, count: u64, fua: bool) -> StepResult {
    let (nsid, nsze, _) = member(ctx, i)?;
    if first.checked_add(count).is_none_or(|end| end > nsze) {
        return Err(StepError::Error(format!(
            "write of {count} blocks at LBA {first:#x} does not fit NSID {nsid} (NSZE {nsze:#x}); fix the suite"
        )));
    }
    let generation = ctx.map.next_generation();
    let layout = layout(ctx, i)?;
    let per_cmd = blocks_per_command(ctx, layout.per_block_in_buffer());
    let mut lba = first;
    while lba < first + count {
        let n = per_cmd.min(first + count - lba);
        let (buf, md) = tagged(&layout, nsid, lba, n, generation, ctx.seed)?;
        let what = format!("Write NSID {nsid} SLBA {lba:#x} NLB {} (generation {generation}{})", n - 1, fua_text(fua));
        let cmd = nvm::write(nsid, lba, (n - 1) as u16, fua);
        let c = ctx.io_with_metadata(&what, cmd, Data::ToDevice(&buf), outgoing(&md))?;
        if !c.status().is_success() {
            ctx.map.forget(nsid, lba, n);
            // The write is the case's means, not (necessarily) what it tests: the
            // rule it breaks is the one of I/O inside the namespace.
            return Err(ctx.fail_rule(
                rules::io_within_namespace(),
                what,
                c.status().to_string(),
                "Successful Completion (a write inside the namespace, within MDTS)",
            ));
        }
        ctx.map.record_write(nsid, lba, n, generation, ctx.seed);
        lba += n;
    }
    Ok(())
}

fn fua_text(fua: bool) -> &'static str {
    if fua {
        ", FUA"
    } else {
        ""
    }
}

/// `verify`: reads back and judges every block the map knows (or the window given). Where
/// deallocated blocks still held their data (legal: deallocation is advisory), one note
/// line per namespace says so.
pub fn verify(ctx: &mut CaseContext<'_>, ns: &NsRef, lba: Option<&Lba>, blocks: Option<&Blocks>) -> StepResult {
    for i in resolve::ns_members(ctx, ns)? {
        let (nsid, nsze, _) = member(ctx, i)?;
        let windows: Vec<(u64, u64)> = match (lba, blocks) {
            (None, None) => match ctx.map.namespace(nsid) {
                Some(map) => map.known().flat_map(|s| judged_windows(s.first, s.count, s.state)).collect(),
                None => Vec::new(),
            },
            (l, b) => {
                let first = match l {
                    Some(l) => resolve::lba(l, nsze)?,
                    None => 0,
                };
                let count = match b {
                    Some(b) => resolve::blocks(b, nsze)?,
                    None => nsze.saturating_sub(first),
                };
                vec![(first, count)]
            }
        };
        let mut kept = 0;
        for (first, count) in windows {
            kept += read_and_judge(ctx, i, first, count)?;
        }
        if kept > 0 {
            ctx.log.push(kept_note(kept, nsid));
        }
    }
    Ok(())
}

/// What `verify` without a window reads of a known segment: all of it, except a segment
/// that must merely hold no earlier data (a namespace just created or formatted), whose
/// first and last blocks are sampled (reading every block of every new namespace would
/// cost more than the rest of the case; a window given to `verify` reads them all).
fn judged_windows(first: u64, count: u64, state: Expectation) -> Vec<(u64, u64)> {
    match state {
        Expectation::Erased { .. } if count > 2 => vec![(first, 1), (first + count - 1, 1)],
        _ => vec![(first, count)],
    }
}

/// The note for deallocated blocks that still hold their data: not a failure.
fn kept_note(kept: u64, nsid: u32) -> String {
    let (blocks, hold) = if kept == 1 { ("block", "holds its") } else { ("blocks", "hold their") };
    format!(
        "note: {kept} deallocated {blocks} of NSID {nsid} still {hold} data: Dataset Management deallocation is \
         advisory (NVMe 1.4 Dataset Management command, Attribute – Deallocate)"
    )
}

/// Reads `count` blocks of member `i` from `first` and judges them against the map.
/// Returns how many deallocated blocks still held their data.
pub(crate) fn read_and_judge(ctx: &mut CaseContext<'_>, i: usize, first: u64, count: u64) -> StepResult<u64> {
    let (nsid, _, bs) = member(ctx, i)?;
    let dealloc = ctx.set[i].dealloc_read;
    let size = block_size(bs)?;
    let layout = layout(ctx, i)?;
    let mut kept = 0;
    read_chunks(ctx, i, first, count, &mut |ctx, what, lba, buf, md| {
        match judge_range(buf, nsid, lba, size, &ctx.map, dealloc) {
            Ok(judged) => kept += judged.kept,
            Err(JudgeError::Mismatch(m)) => return Err(mismatch_failure(ctx, what.to_string(), &m, dealloc)),
            Err(JudgeError::Layout(e)) => return Err(StepError::Error(e.to_string())),
        }
        judge_metadata(ctx, &layout, nsid, lba, md, what)
    })?;
    Ok(kept)
}

/// Reads `count` blocks of member `i` from `first`, as many per command as MDTS allows,
/// and hands each block's data (its metadata left out) to `visit` with its LBA.
pub(crate) fn read_blocks(
    ctx: &mut CaseContext<'_>,
    i: usize,
    first: u64,
    count: u64,
    visit: &mut dyn FnMut(u64, &[u8]),
) -> StepResult {
    let bs = member(ctx, i)?.2 as usize;
    read_chunks(ctx, i, first, count, &mut |_, _, lba, data, _| {
        for (k, block) in data.chunks_exact(bs).enumerate() {
            visit(lba + k as u64, block);
        }
        Ok(())
    })
}

/// What [`read_chunks`] hands on for each Read: the context, the command as logged, its
/// first LBA, the blocks' data and their metadata (unpacked from extended LBAs).
type ChunkVisit<'v, 'c> = dyn FnMut(&mut CaseContext<'c>, &str, u64, &[u8], &[u8]) -> StepResult + 'v;

/// Reads `count` blocks of member `i` from `first`, as many per command as MDTS allows,
/// handing each command's data to `visit`. A read that fails is the failure of the rule
/// that reads inside a namespace succeed.
fn read_chunks<'c>(
    ctx: &mut CaseContext<'c>,
    i: usize,
    first: u64,
    count: u64,
    visit: &mut ChunkVisit<'_, 'c>,
) -> StepResult {
    let nsid = member(ctx, i)?.0;
    let layout = layout(ctx, i)?;
    let per_cmd = blocks_per_command(ctx, layout.per_block_in_buffer());
    let mut lba = first;
    while lba < first + count {
        let n = per_cmd.min(first + count - lba);
        let mut buf = vec![0u8; layout.buffer_bytes(n)];
        let mut md_buf = vec![0u8; layout.metadata_buffer_bytes(n)];
        let what = format!("Read NSID {nsid} SLBA {lba:#x} NLB {}", n - 1);
        let cmd = nvm::read(nsid, lba, (n - 1) as u16);
        let c = ctx.io_with_metadata(&what, cmd, Data::FromDevice(&mut buf), incoming(&mut md_buf))?;
        if !c.status().is_success() {
            return Err(ctx.fail_rule(
                rules::io_within_namespace(),
                what,
                c.status().to_string(),
                "Successful Completion (a read inside the namespace, within MDTS)",
            ));
        }
        let (data, md) = layout.unpack(&buf, &md_buf);
        visit(ctx, &what, lba, &data, &md)?;
        lba += n;
    }
    Ok(())
}

/// The failure a wrong block makes: of the case's rule for data nvtest wrote or
/// zeroed; for a block that must hold no earlier data, of the rule that says so (Format
/// NVM's; for a block never written, the unwritten-block rule, a warning only when
/// DLFEAT reports no read behaviour: the spec then leaves open what is read).
pub(crate) fn mismatch_failure(
    ctx: &CaseContext<'_>,
    what: String,
    m: &Mismatch,
    dealloc: DeallocatedRead,
) -> StepError {
    let expected = describe_expectation(m.expected, dealloc);
    match m.expected {
        Expectation::Erased { dlfeat: false } => {
            ctx.fail_rule(rules::format_erases_data(), what, m.to_string(), expected)
        }
        Expectation::Erased { dlfeat: true } => {
            let failure = Failure { rule: rules::unwritten_blocks(), sent: what, observed: m.to_string(), expected };
            match dealloc {
                DeallocatedRead::Zeroes | DeallocatedRead::Ones => StepError::Fail(failure),
                _ => StepError::Warning(failure),
            }
        }
        _ => ctx.fail(what, m.to_string(), expected),
    }
}

fn describe_expectation(e: Expectation, dealloc: DeallocatedRead) -> String {
    match e {
        Expectation::Erased { dlfeat } => {
            let pattern = match dealloc {
                DeallocatedRead::Zeroes if dlfeat => "all zeroes (never written, DLFEAT 001b)",
                DeallocatedRead::Ones if dlfeat => "all ones (never written, DLFEAT 010b)",
                _ if dlfeat => "no earlier user data (never written; DLFEAT reports no read behaviour)",
                _ => "no user data from before the Format NVM (NVMe 1.4 §5.23)",
            };
            pattern.into()
        }
        Expectation::Written { generation, .. } => format!("the data of write generation {generation}"),
        Expectation::Zeroes => "all zeroes (Write Zeroes)".into(),
        Expectation::Deallocated { previous } => {
            let pattern = match dealloc {
                DeallocatedRead::Zeroes => "all zeroes (deallocated, DLFEAT 001b)",
                DeallocatedRead::Ones => "all ones (deallocated, DLFEAT 010b)",
                DeallocatedRead::NotReported => return "any data (deallocated, DLFEAT not reported)".into(),
                DeallocatedRead::Reserved(r) => {
                    return format!("any data (deallocated, DLFEAT {r:03b}b is reserved: judged as not reported)")
                }
            };
            match previous {
                Some(Previous::Written { generation, .. }) => format!(
                    "{pattern}, or the data of write generation {generation} if the controller did not deallocate \
                     (deallocation is advisory)"
                ),
                Some(Previous::Zeroes) if dealloc != DeallocatedRead::Zeroes => format!(
                    "{pattern}, or all zeroes (Write Zeroes) if the controller did not deallocate \
                     (deallocation is advisory)"
                ),
                _ => pattern.into(),
            }
        }
        Expectation::Unknown => "anything (not judged)".into(),
    }
}

/// `io`: one raw command with an expected status.
pub fn raw(
    ctx: &mut CaseContext<'_>,
    ns: &NsRef,
    op: IoOp,
    lba: &Lba,
    blocks: &Param<u32>,
    expect: Option<&Expect>,
) -> StepResult {
    let target = resolve::ns_one(ctx, ns)?;
    let (nsid, nsze, layout) = match target {
        NsTarget::Member(i) => {
            let (nsid, nsze, _) = member(ctx, i)?;
            (nsid, nsze, layout(ctx, i)?)
        }
        NsTarget::Raw(nsid) => (nsid, 0, Layout::plain(4096)),
    };
    let first = match (target, lba) {
        (NsTarget::Raw(_), Lba::At(p)) => param(p)?,
        (NsTarget::Raw(_), _) => {
            return Err(StepError::Error("a named LBA needs a namespace of the set".into()));
        }
        (NsTarget::Member(_), l) => resolve::lba(l, nsze)?,
    };
    let n = param(blocks)? as u64;
    if n == 0 || n > 65536 {
        return Err(StepError::Error(format!("blocks: {n} does not fit NLB (1 to 65536 blocks)")));
    }
    let moves_data = matches!(op, IoOp::Read | IoOp::Write | IoOp::Compare);
    if let (true, NsTarget::Member(_), Some(mdts)) = (moves_data, target, ctx.facts.mdts_bytes) {
        // A range check must not also exceed MDTS: which of the two errors a drive reports
        // first the specification does not say.
        let bytes = n * layout.per_block_in_buffer();
        if bytes > mdts {
            return Err(StepError::Skip(format!(
                "{n} blocks of NSID {nsid} move {bytes} bytes, more than MDTS ({mdts} bytes): the command would break \
                 the transfer limit as well as the rule checked, and a drive may report either"
            )));
        }
    }
    let nlb = (n - 1) as u16;
    let generation = ctx.map.next_generation();
    let (mut buf, mut md) = match op {
        IoOp::Write => tagged(&layout, nsid, first, n, generation, ctx.seed)?,
        _ => (vec![0u8; layout.buffer_bytes(n)], vec![0u8; layout.metadata_buffer_bytes(n)]),
    };
    let (what, cmd, data, metadata) = match op {
        IoOp::Read => (
            format!("Read NSID {nsid:#x} SLBA {first:#x} NLB {nlb}"),
            nvm::read(nsid, first, nlb),
            Data::FromDevice(&mut buf),
            incoming(&mut md),
        ),
        IoOp::Write => (
            format!("Write NSID {nsid:#x} SLBA {first:#x} NLB {nlb}"),
            nvm::write(nsid, first, nlb, false),
            Data::ToDevice(&buf),
            outgoing(&md),
        ),
        IoOp::Compare => (
            format!("Compare NSID {nsid:#x} SLBA {first:#x} NLB {nlb}"),
            nvm::compare(nsid, first, nlb),
            Data::ToDevice(&buf),
            outgoing(&md),
        ),
        IoOp::WriteZeroes => (
            format!("Write Zeroes NSID {nsid:#x} SLBA {first:#x} NLB {nlb}"),
            nvm::write_zeroes(nsid, first, nlb, false),
            Data::None,
            Data::None,
        ),
        IoOp::Flush => (format!("Flush NSID {nsid:#x}"), nvm::flush(nsid), Data::None, Data::None),
    };
    let c = ctx.io_with_metadata(&what, cmd, data, metadata)?;
    if c.status().is_success() {
        record_success(ctx, target, op, first, n, generation);
    }
    expect_range(ctx, target, &what, &c, expect, first.saturating_add(n))
}

/// Judges a command whose range ends before LBA `end` against its expectation. A command
/// reaching past NSZE that was to be LBA Out of Range and succeeded is looked at more
/// closely before the range check is blamed: when the drive's namespace ends consistently
/// at some LBA beyond NSZE (one-block reads succeed up to it and the next is LBA Out of
/// Range), its range checks are those of a larger namespace and what disagrees with its
/// behaviour is Identify Namespace NSZE: the failure names that field.
fn expect_range(
    ctx: &mut CaseContext<'_>,
    target: NsTarget,
    what: &str,
    c: &Completion,
    expect: Option<&Expect>,
    end: u64,
) -> StepResult {
    let Err(failure) = ctx.expect(what, c, expect) else { return Ok(()) };
    let NsTarget::Member(i) = target else { return Err(failure) };
    let nsze = ctx.set[i].nsze;
    let wanted = expected_statuses(expect).map_err(StepError::Error)?;
    let out_of_range_wanted = wanted.iter().any(|w| w.same_code(&Status::LBA_OUT_OF_RANGE));
    if !(c.status().is_success() && end > nsze && out_of_range_wanted) {
        return Err(failure);
    }
    let Some(real_end) = namespace_end(ctx, i)? else { return Err(failure) };
    Err(ctx.fail_rule(
        rules::nsze_field(),
        what,
        format!(
            "Successful Completion; probing with one-block Reads, LBAs up to {:#x} are read and LBA {real_end:#x} \
             is LBA Out of Range: the drive's range checks are those of a namespace of {real_end} blocks, while \
             Identify Namespace reports NSZE {nsze}",
            real_end - 1
        ),
        format!("NSZE equal to the blocks the namespace has (LBA {nsze:#x} and later LBA Out of Range)"),
    ))
}

/// Where the namespace of member `i` really ends, when that is beyond NSZE: the first LBA
/// a one-block Read rejects with LBA Out of Range, found by doubling steps past NSZE and
/// then bisection (at most about 40 reads). `None` when LBA NSZE is already rejected
/// (the drive's range check agrees with NSZE), or when nothing up to 2^20 blocks past
/// NSZE is (the range check is missing, not NSZE wrong), or on any other status.
fn namespace_end(ctx: &mut CaseContext<'_>, i: usize) -> StepResult<Option<u64>> {
    let nsze = ctx.set[i].nsze;
    let mut good = match read_status(ctx, i, nsze)? {
        Probe::Read => nsze,
        Probe::OutOfRange | Probe::Other => return Ok(None),
    };
    let mut step = 1u64;
    let bad = loop {
        if step > 1 << 20 {
            return Ok(None);
        }
        let at = nsze.saturating_add(step);
        match read_status(ctx, i, at)? {
            Probe::Read => good = at,
            Probe::OutOfRange => break at,
            Probe::Other => return Ok(None),
        }
        step *= 2;
    };
    let (mut lo, mut hi) = (good, bad);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match read_status(ctx, i, mid)? {
            Probe::Read => lo = mid,
            Probe::OutOfRange => hi = mid,
            Probe::Other => return Ok(None),
        }
    }
    Ok(Some(hi))
}

/// What a one-block Read of an LBA did.
enum Probe {
    Read,
    OutOfRange,
    Other,
}

fn read_status(ctx: &mut CaseContext<'_>, i: usize, lba: u64) -> StepResult<Probe> {
    let nsid = ctx.set[i].nsid;
    let layout = layout(ctx, i)?;
    let mut buf = vec![0u8; layout.buffer_bytes(1)];
    let mut md = vec![0u8; layout.metadata_buffer_bytes(1)];
    let what = format!("Read NSID {nsid} SLBA {lba:#x} NLB 0 (where does the namespace end?)");
    let c = ctx.io_with_metadata(&what, nvm::read(nsid, lba, 0), Data::FromDevice(&mut buf), incoming(&mut md))?;
    let status = c.status();
    Ok(if status.is_success() {
        Probe::Read
    } else if status.same_code(&Status::LBA_OUT_OF_RANGE) {
        Probe::OutOfRange
    } else {
        Probe::Other
    })
}

/// After a raw command succeeded, the map learns what it did (so a later verify judges
/// exactly, even where the success itself was a violation).
fn record_success(ctx: &mut CaseContext<'_>, target: NsTarget, op: IoOp, first: u64, n: u64, generation: u64) {
    let NsTarget::Member(i) = target else { return };
    let nsid = ctx.set[i].nsid;
    match op {
        IoOp::Write => ctx.map.record_write(nsid, first, n, generation, ctx.seed),
        IoOp::WriteZeroes => ctx.map.record_zeroes(nsid, first, n),
        IoOp::Read | IoOp::Compare | IoOp::Flush => {}
    }
}

/// `io_beyond_mdts`: one block more than MDTS allows.
pub fn beyond_mdts(ctx: &mut CaseContext<'_>, ns: &NsRef, op: IoOp, expect: Option<&Expect>) -> StepResult {
    let Some(mdts) = ctx.facts.mdts_bytes else {
        return Err(StepError::Skip("MDTS is 0: the controller reports no transfer size limit to exceed".into()));
    };
    let target = resolve::ns_one(ctx, ns)?;
    let NsTarget::Member(i) = target else {
        return Err(StepError::Error("io_beyond_mdts needs a namespace of the set".into()));
    };
    let (nsid, nsze, _) = member(ctx, i)?;
    let layout = layout(ctx, i)?;
    // MDTS limits the data buffer, metadata included where it is part of an extended LBA.
    let per_block = layout.per_block_in_buffer();
    let n = mdts / per_block + 1;
    if n > 65536 || n > nsze {
        return Err(StepError::Skip(format!(
            "MDTS ({mdts} bytes) + 1 block is more than one command or the namespace can address"
        )));
    }
    let nlb = (n - 1) as u16;
    let shown = format!("{} bytes, MDTS {mdts} bytes", n * per_block);
    let generation = ctx.map.next_generation();
    let (mut buf, mut md) = match op {
        IoOp::Write => tagged(&layout, nsid, 0, n, generation, ctx.seed)?,
        _ => (vec![0u8; layout.buffer_bytes(n)], vec![0u8; layout.metadata_buffer_bytes(n)]),
    };
    let (what, cmd, data, metadata) = match op {
        IoOp::Read => (
            format!("Read NSID {nsid} SLBA 0 NLB {nlb} ({shown})"),
            nvm::read(nsid, 0, nlb),
            Data::FromDevice(&mut buf),
            incoming(&mut md),
        ),
        IoOp::Write => {
            ctx.map.forget(nsid, 0, n);
            (
                format!("Write NSID {nsid} SLBA 0 NLB {nlb} ({shown})"),
                nvm::write(nsid, 0, nlb, false),
                Data::ToDevice(&buf),
                outgoing(&md),
            )
        }
        other => return Err(StepError::Error(format!("io_beyond_mdts moves data: {other:?} does not"))),
    };
    let c = ctx.io_with_metadata(&what, cmd, data, metadata)?;
    ctx.expect(&what, &c, expect)
}

/// `deallocate`: Dataset Management with AD over the ranges given.
pub fn deallocate(ctx: &mut CaseContext<'_>, ns: &NsRef, ranges: &Ranges, expect: Option<&Expect>) -> StepResult {
    let target = resolve::ns_one(ctx, ns)?;
    let nsze = match target {
        NsTarget::Member(i) => ctx.set[i].nsze,
        NsTarget::Raw(_) => 0,
    };
    let list: Vec<(u64, u64)> = match ranges {
        Ranges::List(items) => items
            .iter()
            .map(|r| {
                let first = match (target, &r.lba) {
                    (NsTarget::Raw(_), Lba::At(p)) => param(p)?,
                    (NsTarget::Raw(_), _) => {
                        return Err(StepError::Error("a named LBA needs a namespace of the set".into()))
                    }
                    (_, l) => resolve::lba(l, nsze)?,
                };
                Ok((first, resolve::blocks(&r.blocks, nsze)?))
            })
            .collect::<StepResult<_>>()?,
        Ranges::Generated { count, blocks, stride, start } => {
            let (count, blocks, stride) = (param(count)? as u64, param(blocks)? as u64, param(stride)?);
            (0..count).map(|k| (start + k * stride, blocks)).collect()
        }
    };
    send_deallocate(ctx, target, &list, expect)
}

/// `deallocate_all`: one Dataset Management command covering LBA 0 to NSZE - 1.
pub fn deallocate_all(ctx: &mut CaseContext<'_>, ns: &NsRef) -> StepResult {
    let target = resolve::ns_one(ctx, ns)?;
    let NsTarget::Member(i) = target else {
        return Err(StepError::Error("deallocate_all needs a namespace of the set".into()));
    };
    let nsze = ctx.set[i].nsze;
    let mut list = Vec::new();
    let mut lba = 0;
    while lba < nsze {
        let n = (nsze - lba).min(u32::MAX as u64);
        list.push((lba, n));
        lba += n;
    }
    send_deallocate(ctx, target, &list, None)
}

fn send_deallocate(
    ctx: &mut CaseContext<'_>,
    target: NsTarget,
    list: &[(u64, u64)],
    expect: Option<&Expect>,
) -> StepResult {
    let nsid = target.nsid(ctx);
    let mut ranges = Vec::with_capacity(list.len());
    for &(first, count) in list {
        let length = u32::try_from(count)
            .map_err(|_| StepError::Error(format!("a range of {count} blocks does not fit a DSM range")))?;
        ranges.push(DsmRange::new(first, length));
    }
    let cmd = dataset_management(nsid, ranges.len(), DsmAttributes::new().with_ad(true))
        .map_err(|e| StepError::Error(e.to_string()))?;
    let data = DsmRange::encode_list(&ranges);
    let shown: Vec<String> = list.iter().take(4).map(|(f, c)| format!("{f:#x}+{c}")).collect();
    let more = if list.len() > 4 { format!(" … ({} ranges)", list.len()) } else { String::new() };
    let what = format!("Dataset Management AD NSID {nsid:#x} ranges [{}]{more}", shown.join(", "));
    let c = ctx.io(&what, cmd, Data::ToDevice(&data))?;
    if c.status().is_success() {
        if let NsTarget::Member(i) = target {
            let nsze = ctx.set[i].nsze;
            for &(first, count) in list {
                let count = count.min(nsze.saturating_sub(first));
                ctx.map.record_deallocate(nsid, first, count);
            }
        }
    }
    let end = list.iter().map(|&(first, count)| first.saturating_add(count)).max().unwrap_or(0);
    expect_range(ctx, target, &what, &c, expect, end)
}

/// `write_zeroes`.
pub fn write_zeroes(
    ctx: &mut CaseContext<'_>,
    ns: &NsRef,
    lba: &Lba,
    blocks: &Param<u32>,
    deac: bool,
    expect: Option<&Expect>,
) -> StepResult {
    let target = resolve::ns_one(ctx, ns)?;
    let NsTarget::Member(i) = target else {
        return Err(StepError::Error("write_zeroes needs a namespace of the set".into()));
    };
    let (nsid, nsze, _) = member(ctx, i)?;
    let first = resolve::lba(lba, nsze)?;
    let n = param(blocks)? as u64;
    if n == 0 || n > 65536 {
        return Err(StepError::Error(format!("blocks: {n} does not fit NLB (1 to 65536 blocks)")));
    }
    let what = format!("Write Zeroes NSID {nsid} SLBA {first:#x} NLB {}{}", n - 1, if deac { " DEAC" } else { "" });
    let c = ctx.io(&what, nvm::write_zeroes(nsid, first, (n - 1) as u16, deac), Data::None)?;
    if c.status().is_success() {
        let count = n.min(nsze.saturating_sub(first));
        ctx.map.record_zeroes(nsid, first, count);
    }
    expect_range(ctx, target, &what, &c, expect, first.saturating_add(n))
}

/// `flush`.
pub fn flush(ctx: &mut CaseContext<'_>, ns: &NsRef) -> StepResult {
    let target = resolve::ns_one(ctx, ns)?;
    let nsid = target.nsid(ctx);
    let what = format!("Flush NSID {nsid:#x}");
    let c = ctx.io(&what, nvm::flush(nsid), Data::None)?;
    ctx.expect(&what, &c, None)
}

/// `compare`: against what the map says the blocks hold (or altered data, expecting
/// Compare Failure).
pub fn compare(ctx: &mut CaseContext<'_>, ns: &NsRef, lba: &Lba, blocks: &Param<u32>, mismatch: bool) -> StepResult {
    let target = resolve::ns_one(ctx, ns)?;
    let NsTarget::Member(i) = target else {
        return Err(StepError::Error("compare needs a namespace of the set".into()));
    };
    let (nsid, nsze, bs) = member(ctx, i)?;
    let first = resolve::lba(lba, nsze)?;
    let n = param(blocks)? as u64;
    if n == 0 || n > 65536 {
        return Err(StepError::Error(format!("blocks: {n} does not fit NLB (1 to 65536 blocks)")));
    }
    let size = block_size(bs)?;
    let layout = layout(ctx, i)?;
    let ms = layout.metadata as usize;
    let mut buf = vec![0u8; (n * bs) as usize];
    // Compare compares the metadata too: known only for blocks nvtest wrote.
    let mut md = vec![0u8; n as usize * ms];
    for (k, block) in buf.chunks_exact_mut(bs as usize).enumerate() {
        let lba = first + k as u64;
        match ctx.map.state_at(nsid, lba) {
            Expectation::Written { generation, seed } => {
                let tag = BlockTag { nsid, lba, generation, seed, block_size: size };
                fill_blocks(block, &tag).map_err(|e| StepError::Error(e.to_string()))?;
                md[k * ms..(k + 1) * ms].copy_from_slice(&metadata_pattern(nsid, lba, generation, seed, ms));
            }
            Expectation::Zeroes if ms > 0 => {
                return Err(StepError::Error(format!(
                    "compare needs known metadata; LBA {lba:#x} of NSID {nsid} was written with Write Zeroes, whose \
                     metadata nvtest does not judge"
                )));
            }
            Expectation::Zeroes => {}
            // A deallocated block reads as DLFEAT says or, deallocation being advisory, as
            // its old data: known only where the two are the same.
            Expectation::Deallocated { previous: Some(Previous::Zeroes) }
                if ctx.set[i].dealloc_read == DeallocatedRead::Zeroes => {}
            Expectation::Deallocated { .. } => {
                return Err(StepError::Error(format!(
                    "compare needs known data; LBA {lba:#x} of NSID {nsid} was deallocated, and may read as DLFEAT \
                     says or as its old data (deallocation is advisory)"
                )));
            }
            Expectation::Unknown | Expectation::Erased { .. } => {
                return Err(StepError::Error(format!("compare needs known data; LBA {lba:#x} of NSID {nsid} is not")));
            }
        }
    }
    if mismatch {
        buf[bs as usize / 2] ^= 0x5A;
    }
    // In commands of at most MDTS (Compare moves data too); the altered byte is in the
    // first block, so with `mismatch` only the first command is sent.
    let per_cmd = blocks_per_command(ctx, layout.per_block_in_buffer());
    let mut done = 0;
    while done < n {
        let k = per_cmd.min(n - done);
        let (from, to) = ((done * bs) as usize, ((done + k) * bs) as usize);
        let (data, metadata) = layout.pack(&buf[from..to], &md[done as usize * ms..(done + k) as usize * ms]);
        let lba = first + done;
        let altered = if mismatch { " (altered data)" } else { "" };
        let what = format!("Compare NSID {nsid} SLBA {lba:#x} NLB {}{altered}", k - 1);
        let cmd = nvm::compare(nsid, lba, (k - 1) as u16);
        let c = ctx.io_with_metadata(&what, cmd, Data::ToDevice(&data), outgoing(&metadata))?;
        let expected = if mismatch { Expect::One("Compare Failure".into()) } else { Expect::One("success".into()) };
        ctx.expect(&what, &c, Some(&expected))?;
        if mismatch {
            break;
        }
        done += k;
    }
    Ok(())
}

/// How member `i`'s blocks travel. A namespace formatted with end-to-end protection is
/// skipped: nvtest does not generate protection information, which the controller checks
/// on every write (NVMe 1.4 §8.3, End-to-end Data Protection).
pub(super) fn layout(ctx: &CaseContext<'_>, i: usize) -> StepResult<Layout> {
    let e = &ctx.set[i];
    if e.protection != 0 {
        return Err(StepError::Skip(format!(
            "NSID {} is formatted with end-to-end data protection (DPS PIT {}): nvtest does not generate \
             protection information, so its writes would fail the controller's checks",
            e.nsid, e.protection
        )));
    }
    Ok(Layout { data: e.block_size, metadata: e.metadata_size, extended: e.extended })
}

/// The data and metadata buffers of a tagged write of `n` blocks from `lba`.
pub(super) fn tagged(
    layout: &Layout,
    nsid: u32,
    lba: u64,
    n: u64,
    generation: u64,
    seed: u64,
) -> StepResult<(Vec<u8>, Vec<u8>)> {
    let tag = BlockTag { nsid, lba, generation, seed, block_size: block_size(layout.data)? };
    let mut data = vec![0u8; (n * layout.data) as usize];
    fill_blocks(&mut data, &tag).map_err(|e| StepError::Error(e.to_string()))?;
    Ok(layout.pack(&data, &layout.metadata_for(nsid, lba, n, generation, seed)))
}

/// A separate metadata buffer to send (none when it is empty).
pub(super) fn outgoing(md: &[u8]) -> Data<'_> {
    if md.is_empty() {
        Data::None
    } else {
        Data::ToDevice(md)
    }
}

/// A separate metadata buffer to receive into (none when it is empty).
pub(super) fn incoming(md: &mut [u8]) -> Data<'_> {
    if md.is_empty() {
        Data::None
    } else {
        Data::FromDevice(md)
    }
}

/// The metadata read with blocks `lba..`, judged for each block whose last write nvtest
/// knows; other blocks' metadata (never written, deallocated, zeroed) is not judged.
fn judge_metadata(ctx: &CaseContext<'_>, layout: &Layout, nsid: u32, lba: u64, md: &[u8], what: &str) -> StepResult {
    let ms = layout.metadata as usize;
    if ms == 0 {
        return Ok(());
    }
    for (k, got) in md.chunks_exact(ms).enumerate() {
        let block = lba + k as u64;
        let Expectation::Written { generation, seed } = ctx.map.state_at(nsid, block) else { continue };
        let wanted = metadata_pattern(nsid, block, generation, seed, ms);
        if let Some(at) = got.iter().zip(&wanted).position(|(g, w)| g != w) {
            let placement = if layout.extended { "extended LBA" } else { "separate buffer" };
            return Err(ctx.fail_rule(
                rules::metadata_returned(),
                what.to_string(),
                format!(
                    "the {ms}-byte metadata ({placement}) of LBA {block:#x} differs at byte {at}: read {:#04x}, \
                     written {:#04x}",
                    got[at], wanted[at]
                ),
                format!("the metadata written with the block by write generation {generation}"),
            ));
        }
    }
    Ok(())
}

/// A member's NSID, NSZE and LBA data size, requiring it to be attached.
fn member(ctx: &CaseContext<'_>, i: usize) -> StepResult<(u32, u64, u64)> {
    let e = &ctx.set[i];
    if e.block_size == 0 {
        return Err(StepError::Error(format!("NSID {} has no usable LBA format (see lba_formats)", e.nsid)));
    }
    Ok((e.nsid, e.nsze, e.block_size))
}

fn block_size(bs: u64) -> StepResult<BlockSize> {
    BlockSize::new(bs as u32).map_err(|e| StepError::Error(e.to_string()))
}

/// Blocks per command: MDTS (or 256 KiB when larger or unlimited), at most 65536.
fn blocks_per_command(ctx: &CaseContext<'_>, bs: u64) -> u64 {
    let limit = ctx.facts.mdts_bytes.unwrap_or(MAX_CHUNK_BYTES).min(MAX_CHUNK_BYTES);
    (limit / bs).clamp(1, 65536)
}
