//! What each block may hold after a power cut: the writes and flushes of one power
//! cycle, in the order the engine journalled them ([`Ledger`] is the engine's
//! [`Journal`]), and from them, per block, the newest write that had to survive.
//!
//! A write is **durable** once it completed successfully and
//! - it was sent with FUA (NVMe 1.4 Write command, CDW12 bit 30), or
//! - a Flush of its namespace (or of NSID FFFFFFFFh) submitted after its completion
//!   completed successfully (§6.8 Flush command: the data of commands completed before
//!   the Flush was submitted is made non-volatile), or
//! - every completed write survives on this drive ([`Survival::Completed`]: no volatile
//!   write cache, the cache disabled, or power-loss protection claimed).
//!
//! Order is the journal's sequence, not time stamps: a Flush covers the writes whose
//! completion the engine saw before it submitted the Flush. Two writes of one block are
//! never in flight together (the engine keeps data-changing commands apart), so the
//! writes of a block are totally ordered and their generations increase with it.

use std::collections::{BTreeMap, HashMap};

use crate::load::{Change, Journal, WriteRecord};

/// Why every completed write must survive a cut, when it must.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Survival {
    /// Only what FUA and Flush made durable.
    Flushed,
    /// Every completed write (the reason, for the finding: "VWC bit 0 cleared", "WCE
    /// cleared with Set Features 06h", "power-loss protection claimed at FILE:L:C").
    Completed(String),
}

/// Why a write had to survive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durable {
    Fua,
    /// By the Flush at this index of [`Ledger::flushes`].
    Flush(usize),
    /// Completed, and every completed write survives.
    Completion,
}

/// One journalled write of the cycle.
#[derive(Clone, Debug)]
pub struct Write {
    pub record: WriteRecord,
    pub submitted_seq: u64,
    /// The journal sequence of its completion and whether it succeeded.
    pub completed: Option<(u64, bool)>,
}

impl Write {
    /// The write as a finding names it.
    pub fn describe(&self) -> String {
        let r = &self.record;
        let state = match self.completed {
            None => "in flight at the cut",
            Some((_, true)) => "completed",
            Some((_, false)) => "failed",
        };
        format!(
            "Write NSID {} SLBA {:#x} NLB {} (generation {}{}, {state})",
            r.nsid,
            r.first_lba,
            r.blocks.saturating_sub(1),
            r.generation,
            if r.fua { ", FUA" } else { "" }
        )
    }
}

/// One journalled Flush of the cycle.
#[derive(Clone, Debug)]
pub struct Flush {
    pub nsid: u32,
    pub submitted_seq: u64,
    pub completed: Option<(u64, bool)>,
}

/// The writes and flushes of one power cycle.
#[derive(Debug, Default)]
pub struct Ledger {
    seq: u64,
    pub writes: Vec<Write>,
    pub flushes: Vec<Flush>,
    /// Writes not yet completed, by (NSID, SLBA, generation): where a completion goes.
    open: HashMap<(u32, u64, u64), usize>,
    open_flushes: BTreeMap<(u32, u64), Vec<usize>>,
    /// Deallocates journalled (a power-fail load has none; counted to refuse them).
    pub deallocates: u64,
    /// Read back from a journal file whose end may be missing (nvtest died before its
    /// last records reached the file): the highest generation it journalled. A block
    /// holding nvtest's data of its own address with a higher generation holds a write
    /// submitted after that, unknown to the journal, and is not judged.
    pub journal_ends_after: Option<u64>,
}

impl Journal for Ledger {
    fn submitted(&mut self, r: &WriteRecord) {
        self.seq += 1;
        match r.change {
            Change::Write => {
                self.open.insert((r.nsid, r.first_lba, r.generation), self.writes.len());
                self.writes.push(Write { record: *r, submitted_seq: self.seq, completed: None });
            }
            Change::Flush => {
                self.open_flushes.entry((r.nsid, r.submitted_ns)).or_default().push(self.flushes.len());
                self.flushes.push(Flush { nsid: r.nsid, submitted_seq: self.seq, completed: None });
            }
            Change::Deallocate => self.deallocates += 1,
        }
    }

    fn completed(&mut self, r: &WriteRecord, _completed_ns: u64, success: bool) {
        self.seq += 1;
        match r.change {
            Change::Write => {
                if let Some(i) = self.open.remove(&(r.nsid, r.first_lba, r.generation)) {
                    self.writes[i].completed = Some((self.seq, success));
                }
            }
            Change::Flush => {
                let key = (r.nsid, r.submitted_ns);
                if let Some(list) = self.open_flushes.get_mut(&key) {
                    if !list.is_empty() {
                        let i = list.remove(0);
                        self.flushes[i].completed = Some((self.seq, success));
                    }
                    if list.is_empty() {
                        self.open_flushes.remove(&key);
                    }
                }
            }
            Change::Deallocate => {}
        }
    }
}

impl Ledger {
    /// Whether `generation` is of a write submitted after the journal's last record
    /// ([`Self::journal_ends_after`]).
    pub fn unjournalled(&self, generation: u64) -> bool {
        self.journal_ends_after.is_some_and(|last| generation > last)
    }

    /// Why write `i` had to survive the cut, if it had to.
    pub fn durable(&self, i: usize, survival: &Survival, last_flush: &BTreeMap<u32, (u64, usize)>) -> Option<Durable> {
        let w = &self.writes[i];
        let (done, true) = w.completed? else {
            return None;
        };
        if w.record.fua {
            return Some(Durable::Fua);
        }
        let flushed = [w.record.nsid, u32::MAX]
            .iter()
            .filter_map(|n| last_flush.get(n))
            .filter(|(submitted, _)| *submitted > done)
            .map(|(_, f)| *f)
            .next();
        if let Some(f) = flushed {
            return Some(Durable::Flush(f));
        }
        matches!(survival, Survival::Completed(_)).then_some(Durable::Completion)
    }

    /// Per NSID (FFFFFFFFh for a broadcast Flush), the submission sequence and index of
    /// the last Flush submitted that completed successfully: every write completed before
    /// that sequence is durable.
    pub fn last_flushes(&self) -> BTreeMap<u32, (u64, usize)> {
        let mut last: BTreeMap<u32, (u64, usize)> = BTreeMap::new();
        for (i, f) in self.flushes.iter().enumerate() {
            if f.completed.is_some_and(|(_, ok)| ok) {
                let e = last.entry(f.nsid).or_insert((f.submitted_seq, i));
                if f.submitted_seq >= e.0 {
                    *e = (f.submitted_seq, i);
                }
            }
        }
        last
    }

    /// Every block the cycle's writes touched, with the writes (indices, in submission
    /// order) that touched it.
    pub fn blocks(&self) -> BTreeMap<(u32, u64), Vec<usize>> {
        let mut blocks: BTreeMap<(u32, u64), Vec<usize>> = BTreeMap::new();
        for (i, w) in self.writes.iter().enumerate() {
            for lba in w.record.first_lba..w.record.first_lba + w.record.blocks {
                blocks.entry((w.record.nsid, lba)).or_default().push(i);
            }
        }
        blocks
    }

    /// Writes journalled and still in flight.
    pub fn in_flight(&self) -> usize {
        self.writes.iter().filter(|w| w.completed.is_none()).count()
    }
}

/// A journalled command of NSID 1, for tests.
#[cfg(test)]
pub(crate) fn record(change: Change, lba: u64, blocks: u64, generation: u64, fua: bool, at: u64) -> WriteRecord {
    WriteRecord { nsid: 1, first_lba: lba, blocks, generation, change, fua, submitted_ns: at }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(lba: u64, generation: u64, fua: bool) -> WriteRecord {
        record(Change::Write, lba, 1, generation, fua, generation)
    }

    fn flush(nsid: u32, at: u64) -> WriteRecord {
        WriteRecord { nsid, ..record(Change::Flush, 0, 0, 0, false, at) }
    }

    #[test]
    fn a_flush_covers_the_writes_completed_before_it_was_submitted() {
        let mut l = Ledger::default();
        let (a, b) = (write(0, 1, false), write(1, 2, false));
        l.submitted(&a);
        l.submitted(&b);
        l.completed(&a, 0, true);
        let f = flush(1, 10);
        l.submitted(&f);
        l.completed(&b, 0, true); // after the Flush was submitted: not covered
        l.completed(&f, 0, true);
        let last = l.last_flushes();
        assert_eq!(l.durable(0, &Survival::Flushed, &last), Some(Durable::Flush(0)));
        assert_eq!(l.durable(1, &Survival::Flushed, &last), None);
        assert_eq!(l.durable(1, &Survival::Completed("no cache".into()), &last), Some(Durable::Completion));
    }

    #[test]
    fn fua_is_durable_at_completion_and_in_flight_never() {
        let mut l = Ledger::default();
        let (a, b) = (write(0, 1, true), write(1, 2, true));
        l.submitted(&a);
        l.submitted(&b);
        l.completed(&a, 0, true);
        let last = l.last_flushes();
        assert_eq!(l.durable(0, &Survival::Flushed, &last), Some(Durable::Fua));
        assert_eq!(l.durable(1, &Survival::Completed("x".into()), &last), None);
        assert_eq!(l.in_flight(), 1);
    }

    #[test]
    fn a_broadcast_flush_covers_every_namespace_and_an_unfinished_one_nothing() {
        let mut l = Ledger::default();
        let a = write(0, 1, false);
        l.submitted(&a);
        l.completed(&a, 0, true);
        let pending = flush(1, 5);
        l.submitted(&pending);
        assert_eq!(l.durable(0, &Survival::Flushed, &l.last_flushes()), None);
        let all = flush(u32::MAX, 6);
        l.submitted(&all);
        l.completed(&all, 0, true);
        assert_eq!(l.durable(0, &Survival::Flushed, &l.last_flushes()), Some(Durable::Flush(1)));
    }
}
