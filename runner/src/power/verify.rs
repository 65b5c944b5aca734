//! After a power cut: every block of the load's ranges read back and judged against
//! what it may hold ([`super::ledger`]), findings grouped into LBA ranges per command.
//!
//! A block no write of the cycle touched must still hold what the previous verification
//! found there (the `floor` map). A touched block may hold the newest write that had to
//! survive or any newer write of the cycle (in flight or completed); with no write that
//! had to survive, also what it held before the cycle. What else it holds breaks:
//! - an older generation, or what it held before the cycle → the durability rule of the
//!   write that had to survive (FUA / Flush, or "every completed write survives");
//! - anything else (another block's data, data of no write, a torn block) → the
//!   integrity rule ([`Broken::Integrity`]).
//!
//! A write of at most the atomic unit (AWUPF + 1 blocks, NAWUPF + 1 where the namespace
//! reports it) that was not yet durable must have survived whole or not at all, on the
//! blocks no later write of the cycle covers ([`Broken::Atomicity`]).
//!
//! Untouched runs are judged with [`judge_range`] against the floor (the fast path);
//! only touched blocks, and a run that fails, are looked at block by block.

use std::collections::BTreeMap;

use crate::data::{
    decode_header, judge_block, judge_range, BlockSize, DeallocatedRead, Expectation, Found, HostMap, JudgeError,
};

use super::ledger::{Durable, Ledger, Survival};

/// One namespace range of the load, as verification reads it.
#[derive(Clone, Debug)]
pub struct Range {
    pub nsid: u32,
    pub first_lba: u64,
    pub blocks: u64,
    pub block_size: BlockSize,
    pub dealloc: DeallocatedRead,
    /// The power-fail atomic unit in blocks (AWUPF + 1, or NAWUPF + 1).
    pub atomic_blocks: u64,
}

/// Which rule a finding breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Broken {
    /// A write that had to survive was lost; why it had to.
    Durability(Durable),
    /// Neither what the block held nor a write of the cycle: foreign, garbage or torn.
    Integrity,
    /// A write within the atomic unit partly survived.
    Atomicity,
}

/// Blocks found wrong of one command (or of no command), for one rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub broken: Broken,
    pub nsid: u32,
    /// The blocks, ascending (one entry per block).
    pub lbas: Vec<u64>,
    /// The write the range belongs to (index into [`Ledger::writes`]), if any.
    pub write: Option<usize>,
    pub expected: String,
    pub found: String,
}

/// What one verification judged.
#[derive(Clone, Debug, Default)]
pub struct Verified {
    pub findings: Vec<Finding>,
    pub blocks_judged: u64,
    pub bytes_judged: u64,
    /// Touched blocks that held a write of the cycle, and touched blocks that held what
    /// they held before it (writes not durable that were lost, legally).
    pub survived: u64,
    pub rolled_back: u64,
}

/// Reads `blocks` blocks of `nsid` from `lba` into the buffer (exactly that long).
pub type ReadBlocks<'a, E> = dyn FnMut(u32, u64, u64, &mut [u8]) -> Result<(), E> + 'a;

/// What a block was found to hold.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Held {
    /// What the floor map says it held before the cycle.
    Floor,
    /// nvtest's block of this address with this generation (and the run's seed).
    Generation(u64),
    /// Something else: what, and whether it is foreign (data of no write to this block:
    /// another block's, a fill, a torn or unrecognisable block) rather than this block's
    /// own older content or the never-written pattern.
    Wrong(String, bool),
}

/// Reads every range with `read(nsid, lba, blocks, buf)` (at most `per_read` blocks at
/// once), judges it and leaves in `map` what each block was found to hold. An untouched
/// block that no longer holds what the floor says breaks `untouched` (the integrity rule
/// after a cycle: the floor was read back after a power-on, so it was on the media).
#[allow(clippy::too_many_arguments)]
pub fn verify<E>(
    untouched: Broken,
    ranges: &[Range],
    ledger: &Ledger,
    survival: &Survival,
    floor: &HostMap,
    map: &mut HostMap,
    seed: u64,
    per_read: u64,
    read: &mut ReadBlocks<'_, E>,
) -> Result<Verified, E> {
    let last_flush = ledger.last_flushes();
    let durable: Vec<Option<Durable>> =
        (0..ledger.writes.len()).map(|i| ledger.durable(i, survival, &last_flush)).collect();
    let touched = ledger.blocks();
    let mut out = Verified::default();
    let mut findings: Vec<Finding> = Vec::new();
    // Per write: its blocks that held it (true) or not (false), where it is the newest write.
    let mut atomic: BTreeMap<usize, Vec<(u64, bool)>> = BTreeMap::new();
    for r in ranges {
        let bs = r.block_size.bytes();
        let mut buf = Vec::new();
        let mut lba = r.first_lba;
        let end = r.first_lba + r.blocks;
        while lba < end {
            let n = per_read.max(1).min(end - lba);
            buf.resize(n as usize * bs, 0);
            read(r.nsid, lba, n, &mut buf)?;
            out.blocks_judged += n;
            out.bytes_judged += n * bs as u64;
            let mut at = lba;
            let chunk_end = lba + n;
            let mut hits = touched.range((r.nsid, lba)..(r.nsid, chunk_end)).peekable();
            while at < chunk_end {
                let next_touched = hits.peek().map_or(chunk_end, |((_, l), _)| *l);
                if next_touched > at {
                    // An untouched run: still what the floor says.
                    let slice = &buf[(at - lba) as usize * bs..(next_touched - lba) as usize * bs];
                    if judge_range(slice, r.nsid, at, r.block_size, floor, r.dealloc).is_err() {
                        for (i, block) in slice.chunks(bs).enumerate() {
                            let b = at + i as u64;
                            let held = held(block, r.nsid, b, seed, floor, r.dealloc);
                            let found = match held {
                                Held::Floor => continue,
                                Held::Generation(g) => {
                                    format!("generation {g}, not what the verification after the previous cycle found")
                                }
                                Held::Wrong(ref w, _) => w.clone(),
                            };
                            let foreign = matches!(held, Held::Wrong(_, true));
                            map.forget(r.nsid, b, 1);
                            push(
                                &mut findings,
                                Finding {
                                    broken: if foreign { Broken::Integrity } else { untouched.clone() },
                                    nsid: r.nsid,
                                    lbas: vec![b],
                                    write: None,
                                    expected: describe(floor.state_at(r.nsid, b)),
                                    found,
                                },
                            );
                        }
                    }
                    at = next_touched;
                    continue;
                }
                let Some((_, writes)) = hits.next() else { break };
                let block = &buf[(at - lba) as usize * bs..(at - lba + 1) as usize * bs];
                let held = held(block, r.nsid, at, seed, floor, r.dealloc);
                let newest_durable = writes.iter().rposition(|&w| durable[w].is_some());
                let allowed = &writes[newest_durable.unwrap_or(0)..];
                let generation = |w: usize| ledger.writes[w].record.generation;
                let ok = match &held {
                    Held::Floor => newest_durable.is_none(),
                    Held::Generation(g) => allowed.iter().any(|&w| generation(w) == *g),
                    Held::Wrong(..) => false,
                };
                if ok {
                    match held {
                        Held::Floor => {
                            out.rolled_back += 1;
                            map.namespace_mut(r.nsid).set(at, 1, floor.state_at(r.nsid, at));
                        }
                        Held::Generation(g) => {
                            out.survived += 1;
                            map.namespace_mut(r.nsid).set(at, 1, Expectation::Written { generation: g, seed });
                        }
                        Held::Wrong(..) => {}
                    }
                    if let Some(&last) = writes.last() {
                        if durable[last].is_none() && ledger.writes[last].record.blocks <= r.atomic_blocks {
                            atomic.entry(last).or_default().push((at, held == Held::Generation(generation(last))));
                        }
                    }
                } else {
                    map.forget(r.nsid, at, 1);
                    let stale = match &held {
                        Held::Floor => Some("what it held before the cycle".to_string()),
                        Held::Generation(g) if writes.iter().any(|&w| generation(w) == *g) => {
                            Some(format!("the older generation {g}"))
                        }
                        _ => None,
                    };
                    let finding = match (stale, newest_durable) {
                        (Some(found), Some(d)) => Finding {
                            broken: Broken::Durability(durable[writes[d]].unwrap_or(Durable::Completion)),
                            nsid: r.nsid,
                            lbas: vec![at],
                            write: Some(writes[d]),
                            expected: format!("generation {} or newer", generation(writes[d])),
                            found,
                        },
                        (_, d) => Finding {
                            broken: Broken::Integrity,
                            nsid: r.nsid,
                            lbas: vec![at],
                            write: writes.last().copied(),
                            expected: match d {
                                Some(d) => format!("generation {} or newer", generation(writes[d])),
                                None => format!(
                                    "{}, or a generation of the cycle's writes ({})",
                                    describe(floor.state_at(r.nsid, at)),
                                    writes.iter().map(|&w| generation(w).to_string()).collect::<Vec<_>>().join(", ")
                                ),
                            },
                            found: match held {
                                Held::Wrong(w, _) => w,
                                Held::Generation(g) => format!("generation {g}, which no write of this block had"),
                                Held::Floor => "what it held before the cycle".into(),
                            },
                        },
                    };
                    push(&mut findings, finding);
                }
                at += 1;
            }
            lba += n;
        }
    }
    for (w, blocks) in atomic {
        let kept = blocks.iter().filter(|(_, k)| *k).count();
        if kept == 0 || kept == blocks.len() {
            continue;
        }
        let record = &ledger.writes[w].record;
        let list = |want: bool| {
            let lbas: Vec<u64> = blocks.iter().filter(|(_, k)| *k == want).map(|(l, _)| *l).collect();
            ranges_text(&lbas)
        };
        findings.push(Finding {
            broken: Broken::Atomicity,
            nsid: record.nsid,
            lbas: (record.first_lba..record.first_lba + record.blocks).collect(),
            write: Some(w),
            expected: format!(
                "all {} blocks of generation {} or none of them (the write is within the atomic unit)",
                blocks.len(),
                record.generation
            ),
            found: format!("generation {} at {}, the older data at {}", record.generation, list(true), list(false)),
        });
    }
    out.findings = findings;
    Ok(out)
}

/// Adds `f` to the finding of the same rule, namespace, command and expectation, if
/// there is one (what its blocks hold named once each, three at most).
fn push(findings: &mut Vec<Finding>, f: Finding) {
    let same = |last: &Finding| {
        last.broken == f.broken && last.nsid == f.nsid && last.write == f.write && last.expected == f.expected
    };
    // A command's blocks are judged together: its finding is among the last few.
    if let Some(last) = findings.iter_mut().rev().take(64).find(|l| same(l)) {
        last.lbas.extend(&f.lbas);
        let named = last.found.split("; ").count();
        if !last.found.split("; ").any(|x| x == f.found) && !last.found.ends_with('…') {
            if named < 3 {
                last.found = format!("{}; {}", last.found, f.found);
            } else {
                last.found.push_str("; …");
            }
        }
        return;
    }
    findings.push(f);
}

fn held(block: &[u8], nsid: u32, lba: u64, seed: u64, floor: &HostMap, dealloc: DeallocatedRead) -> Held {
    let floor_state = floor.state_at(nsid, lba);
    if let Some(tag) = decode_header(block) {
        let written = Expectation::Written { generation: tag.generation, seed: tag.seed };
        // The cycle's writes carry its seed; earlier ones the seed the floor records.
        if tag.nsid == nsid
            && tag.lba == lba
            && (tag.seed == seed || floor_state == written)
            && judge_block(block, nsid, lba, written, dealloc).is_ok()
        {
            return if floor_state == written { Held::Floor } else { Held::Generation(tag.generation) };
        }
    }
    match judge_block(block, nsid, lba, floor_state, dealloc) {
        Ok(()) => Held::Floor,
        Err(JudgeError::Mismatch(m)) => {
            let own = match m.found {
                Found::Zeroes | Found::Ones => true,
                Found::Block(t) | Found::OtherSize(t) => t.nsid == nsid && t.lba == lba,
                _ => false,
            };
            Held::Wrong(found_text(&m.found), !own)
        }
        Err(JudgeError::Layout(e)) => Held::Wrong(format!("a block nvtest could not lay out ({e})"), true),
    }
}

/// What a wrong block holds, in a finding's words.
fn found_text(found: &Found) -> String {
    match found {
        Found::Zeroes => "all zeros".into(),
        Found::Ones => "all 0xFF bytes".into(),
        Found::Filled(b) => format!("every byte {b:#04x}"),
        Found::Block(t) => format!("the data of NSID {} LBA {:#x} (generation {})", t.nsid, t.lba, t.generation),
        Found::OtherSize(t) => format!("a {} block of NSID {} LBA {:#x}", t.block_size, t.nsid, t.lba),
        Found::Torn { header, from, .. } => format!(
            "a torn block: the header of NSID {} LBA {:#x} generation {}, other data from byte {from:#x}",
            header.nsid, header.lba, header.generation
        ),
        Found::CorruptHeader => "an nvtest block header that fails its checksum".into(),
        Found::Unrecognisable => "data no write of nvtest's put there".into(),
    }
}

fn describe(e: Expectation) -> String {
    match e {
        Expectation::Written { generation, .. } => format!("generation {generation}"),
        Expectation::Erased { .. } => "the never-written content it had".into(),
        Expectation::Zeroes => "all zeros (Write Zeroes)".into(),
        Expectation::Deallocated { .. } => "the deallocated content it had".into(),
        Expectation::Unknown => "anything".into(),
    }
}

/// "0x10..=0x13, 0x17" for a sorted LBA list.
pub fn ranges_text(lbas: &[u64]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < lbas.len() {
        let start = lbas[i];
        let mut end = start;
        while i + 1 < lbas.len() && lbas[i + 1] == end + 1 {
            i += 1;
            end = lbas[i];
        }
        parts.push(if end == start { format!("{start:#x}") } else { format!("{start:#x}..={end:#x}") });
        i += 1;
    }
    parts.join(", ")
}
