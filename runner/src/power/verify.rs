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
//! The fast path: each run of blocks whose newest write is one command (or that no write
//! touched) is judged with [`judge_range`] against "every write reached the media", then
//! against "only what had to survive did"; a run matching either is allowed whole. Only a
//! run that matches neither is looked at block by block.

use std::collections::BTreeMap;

use crate::data::{
    decode_header, judge_block, judge_range, run_holds, BlockSize, DeallocatedRead, Expectation, Found, HostMap,
    JudgeError, Segment,
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

/// Where verification reads blocks from. Each read lends its data until the next, so a
/// source whose data is already in memory (a device whose reads land there) hands it
/// over without a copy.
pub trait BlockSource<E> {
    /// The `bytes` bytes of `blocks` blocks of `nsid` from `lba`.
    fn read(&mut self, nsid: u32, lba: u64, blocks: u64, bytes: usize) -> Result<&[u8], E>;
}

/// A [`BlockSource`] that reads into a buffer of its own with `read(nsid, lba, blocks,
/// buf)`: a command through the driver, its data copied out of the DMA memory.
pub struct Copied<F> {
    read: F,
    buf: Vec<u8>,
}

/// [`Copied`] around `read`.
pub fn copied<F>(read: F) -> Copied<F> {
    Copied { read, buf: Vec::new() }
}

impl<E, F: FnMut(u32, u64, u64, &mut [u8]) -> Result<(), E>> BlockSource<E> for Copied<F> {
    fn read(&mut self, nsid: u32, lba: u64, blocks: u64, bytes: usize) -> Result<&[u8], E> {
        self.buf.resize(bytes, 0);
        (self.read)(nsid, lba, blocks, &mut self.buf)?;
        Ok(&self.buf)
    }
}

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

/// Reads every range from `source` (at most `per_read` blocks at once), judges it and leaves in `map` what each block was found to hold. An untouched
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
    source: &mut dyn BlockSource<E>,
) -> Result<Verified, E> {
    let last_flush = ledger.last_flushes();
    let durable: Vec<Option<Durable>> =
        (0..ledger.writes.len()).map(|i| ledger.durable(i, survival, &last_flush)).collect();
    // What each block holds if every write of the cycle reached the media, and if only
    // those that had to: a run matching either is allowed as a whole (the fast path).
    let mut newest = floor.clone();
    let mut durable_only = floor.clone();
    for (i, w) in ledger.writes.iter().enumerate() {
        let r = &w.record;
        newest.record_write(r.nsid, r.first_lba, r.blocks, r.generation, seed);
        if durable[i].is_some() {
            durable_only.record_write(r.nsid, r.first_lba, r.blocks, r.generation, seed);
        }
    }
    // The ledger's writes are in submission order, so in generation order too.
    let write_of = |generation: u64| ledger.writes.binary_search_by_key(&generation, |w| w.record.generation).ok();
    let mut j = Judging {
        untouched,
        ledger,
        durable,
        floor,
        seed,
        touched: None,
        out: Verified::default(),
        findings: Vec::new(),
        atomic: BTreeMap::new(),
    };
    for r in ranges {
        let bs = r.block_size.bytes();
        let mut lba = r.first_lba;
        let end = r.first_lba + r.blocks;
        while lba < end {
            let n = per_read.max(1).min(end - lba);
            let buf = source.read(r.nsid, lba, n, n as usize * bs)?;
            j.out.blocks_judged += n;
            j.out.bytes_judged += n * bs as u64;
            let segments: Vec<Segment> = match newest.namespace(r.nsid) {
                Some(m) => m.segments(lba, n).collect(),
                None => vec![Segment { first: lba, count: n, state: Expectation::Unknown }],
            };
            for seg in segments {
                let sub = &buf[(seg.first - lba) as usize * bs..(seg.first - lba + seg.count) as usize * bs];
                let write = match seg.state {
                    Expectation::Written { generation, seed: s } if s == seed => write_of(generation),
                    _ => None,
                };
                let judged = |m: &HostMap| judge_range(sub, r.nsid, seg.first, r.block_size, m, r.dealloc).is_ok();
                // Against the segment's own expectation, stopping at the first wrong
                // block: a lost write's run fails at once.
                if run_holds(sub, r.nsid, seg.first, r.block_size, seg.state, r.dealloc) {
                    if let Some(w) = write {
                        // Every block holds the newest write of it; the engine's map knows
                        // the completed ones already.
                        j.out.survived += seg.count;
                        if ledger.writes[w].completed.is_none() {
                            map.namespace_mut(r.nsid).set(seg.first, seg.count, seg.state);
                        }
                        j.note_atomic(r, w, seg.first, seg.count, true);
                    }
                    continue;
                }
                if let Some(w) = write.filter(|_| judged(&durable_only)) {
                    // Every block holds the newest write that had to survive (or the floor):
                    // the writes after it were lost, which they may be.
                    let held: Vec<Segment> = match durable_only.namespace(r.nsid) {
                        Some(m) => m.segments(seg.first, seg.count).collect(),
                        None => Vec::new(),
                    };
                    for h in held {
                        map.namespace_mut(r.nsid).set(h.first, h.count, h.state);
                    }
                    j.out.rolled_back += seg.count;
                    j.note_atomic(r, w, seg.first, seg.count, false);
                    continue;
                }
                j.blocks(r, seg.first, sub, map);
            }
            lba += n;
        }
    }
    let Judging { out, mut findings, atomic, .. } = j;
    let mut out = out;
    for (w, runs) in atomic {
        let total: u64 = runs.iter().map(|(_, n, _)| n).sum();
        let kept: u64 = runs.iter().filter(|(_, _, k)| *k).map(|(_, n, _)| n).sum();
        if kept == 0 || kept == total {
            continue;
        }
        let record = &ledger.writes[w].record;
        let list = |want: bool| {
            let mut lbas: Vec<u64> =
                runs.iter().filter(|(_, _, k)| *k == want).flat_map(|&(first, n, _)| first..first + n).collect();
            lbas.sort_unstable();
            ranges_text(&lbas)
        };
        findings.push(Finding {
            broken: Broken::Atomicity,
            nsid: record.nsid,
            lbas: (record.first_lba..record.first_lba + record.blocks).collect(),
            write: Some(w),
            expected: format!(
                "all {total} blocks of generation {} or none of them (the write is within the atomic unit)",
                record.generation
            ),
            found: format!("generation {} at {}, the older data at {}", record.generation, list(true), list(false)),
        });
    }
    out.findings = findings;
    Ok(out)
}

/// The state of one verification: what it judges against and what it found so far.
struct Judging<'a> {
    untouched: Broken,
    ledger: &'a Ledger,
    durable: Vec<Option<Durable>>,
    floor: &'a HostMap,
    seed: u64,
    /// The writes of each touched block, built when a block is first judged on its own.
    touched: Option<BTreeMap<(u32, u64), Vec<usize>>>,
    out: Verified,
    findings: Vec<Finding>,
    /// Per write within the atomic unit and not durable: runs of its blocks (where it is
    /// the newest write), first and count, that held it (true) or not (false).
    atomic: BTreeMap<usize, Vec<(u64, u64, bool)>>,
}

impl Judging<'_> {
    fn note_atomic(&mut self, r: &Range, w: usize, first: u64, count: u64, kept: bool) {
        if self.durable[w].is_none() && self.ledger.writes[w].record.blocks <= r.atomic_blocks {
            self.atomic.entry(w).or_default().push((first, count, kept));
        }
    }

    /// Judges the blocks of `buf`, read from `first`, one by one: the slow path of a run
    /// that neither all-new nor all-durable content explains.
    fn blocks(&mut self, r: &Range, first: u64, buf: &[u8], map: &mut HostMap) {
        let ledger = self.ledger;
        let touched = self.touched.take().unwrap_or_else(|| ledger.blocks());
        let (floor, seed) = (self.floor, self.seed);
        let bs = r.block_size.bytes();
        for (i, block) in buf.chunks(bs).enumerate() {
            let at = first + i as u64;
            let held = held(block, r.nsid, at, seed, floor, r.dealloc);
            if let Held::Generation(g) = held {
                if ledger.unjournalled(g) {
                    self.out.survived += 1;
                    map.namespace_mut(r.nsid).set(at, 1, Expectation::Written { generation: g, seed });
                    continue;
                }
            }
            let Some(writes) = touched.get(&(r.nsid, at)) else {
                // Untouched: still what the floor says.
                let found = match held {
                    Held::Floor => continue,
                    Held::Generation(g) => {
                        format!("generation {g}, not what the verification after the previous cycle found")
                    }
                    Held::Wrong(ref w, _) => w.clone(),
                };
                let foreign = matches!(held, Held::Wrong(_, true));
                map.forget(r.nsid, at, 1);
                push(
                    &mut self.findings,
                    Finding {
                        broken: if foreign { Broken::Integrity } else { self.untouched.clone() },
                        nsid: r.nsid,
                        lbas: vec![at],
                        write: None,
                        expected: describe(floor.state_at(r.nsid, at)),
                        found,
                    },
                );
                continue;
            };
            let newest_durable = writes.iter().rposition(|&w| self.durable[w].is_some());
            let allowed = &writes[newest_durable.unwrap_or(0)..];
            let generation = |w: usize| ledger.writes[w].record.generation;
            let ok = match &held {
                Held::Floor => newest_durable.is_none(),
                Held::Generation(g) => allowed.iter().any(|&w| generation(w) == *g),
                Held::Wrong(..) => false,
            };
            if ok {
                let last = writes.last().copied();
                match held {
                    Held::Floor => {
                        self.out.rolled_back += 1;
                        map.namespace_mut(r.nsid).set(at, 1, floor.state_at(r.nsid, at));
                    }
                    Held::Generation(g) => {
                        self.out.survived += 1;
                        map.namespace_mut(r.nsid).set(at, 1, Expectation::Written { generation: g, seed });
                    }
                    Held::Wrong(..) => {}
                }
                if let Some(last) = last {
                    let kept = held == Held::Generation(generation(last));
                    self.note_atomic(r, last, at, 1, kept);
                }
                continue;
            }
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
                    broken: Broken::Durability(self.durable[writes[d]].unwrap_or(Durable::Completion)),
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
            push(&mut self.findings, finding);
        }
        self.touched = Some(touched);
    }
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
