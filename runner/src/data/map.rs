//! The host-side map of what every block must hold: per namespace, disjoint LBA ranges
//! each with one [`Expectation`], kept in a `BTreeMap` keyed by first LBA. Adjacent ranges
//! with the same expectation are merged and unknown blocks are not stored, so the map's
//! size follows the number of distinct writes, not the number of blocks.
//!
//! LBAs are u64 and a range ends before `u64::MAX` (an exclusive end that fits in u64):
//! NSZE is a u64 count, so no namespace has a block at LBA `u64::MAX`. Ranges that would
//! run past it are cut there.

use std::collections::BTreeMap;

use super::expectation::Expectation;

/// A run of consecutive blocks with one expectation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub first: u64,
    pub count: u64,
    pub state: Expectation,
}

/// A stored range: its exclusive end and what its blocks hold (never `Unknown`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    end: u64,
    state: Expectation,
}

/// What each block of one namespace must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceMap {
    runs: BTreeMap<u64, Run>,
}

impl NamespaceMap {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `count` blocks from `first` now hold `state` (`Unknown` forgets them).
    pub fn set(&mut self, first: u64, count: u64, state: Expectation) {
        let end = first.saturating_add(count);
        if first >= end {
            return;
        }
        self.cut_out(first, end);
        if state == Expectation::Unknown {
            return;
        }
        let mut start = first;
        let mut stop = end;
        if let Some((&before, run)) = self.runs.range(..first).next_back() {
            if run.end == first && run.state == state {
                start = before;
            }
        }
        if let Some(after) = self.runs.get(&end).copied() {
            if after.state == state {
                stop = after.end;
                self.runs.remove(&end);
            }
        }
        // Inserting at `start` replaces the merged left neighbour, if any.
        self.runs.insert(start, Run { end: stop, state });
    }

    /// Removes `[first, end)` from every stored run, keeping the parts outside it.
    fn cut_out(&mut self, first: u64, end: u64) {
        if let Some((&before, &run)) = self.runs.range(..first).next_back() {
            if run.end > first {
                self.runs.insert(before, Run { end: first, state: run.state });
                if run.end > end {
                    self.runs.insert(end, run);
                }
            }
        }
        while let Some((&start, &run)) = self.runs.range(first..end).next() {
            self.runs.remove(&start);
            if run.end > end {
                self.runs.insert(end, run);
            }
        }
    }

    /// What the block at `lba` must hold.
    pub fn state_at(&self, lba: u64) -> Expectation {
        match self.runs.range(..=lba).next_back() {
            Some((_, run)) if run.end > lba => run.state,
            _ => Expectation::Unknown,
        }
    }

    /// The blocks `first .. first + count` as consecutive segments, unknown gaps included.
    pub fn segments(&self, first: u64, count: u64) -> Segments<'_> {
        Segments { runs: &self.runs, next: first, end: first.saturating_add(count) }
    }

    /// Every known range in LBA order: what a verify sweep reads.
    pub fn known(&self) -> impl Iterator<Item = Segment> + '_ {
        self.runs.iter().map(|(&first, run)| Segment { first, count: run.end - first, state: run.state })
    }

    /// Records a Dataset Management deallocate of `count` blocks from `first`: each block
    /// now reads as DLFEAT says or, deallocation being advisory, as what it held before
    /// ([`Expectation::deallocated`]), which is kept per block.
    pub fn deallocate(&mut self, first: u64, count: u64) {
        let before: Vec<Segment> = self.segments(first, count).collect();
        for segment in before {
            self.set(segment.first, segment.count, segment.state.deallocated());
        }
    }

    /// How many ranges are stored.
    pub fn range_count(&self) -> usize {
        self.runs.len()
    }

    /// Forgets everything (after a format or when the namespace is deleted).
    pub fn clear(&mut self) {
        self.runs.clear();
    }
}

/// The iterator of [`NamespaceMap::segments`].
pub struct Segments<'a> {
    runs: &'a BTreeMap<u64, Run>,
    next: u64,
    end: u64,
}

impl Iterator for Segments<'_> {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        if self.next >= self.end {
            return None;
        }
        let first = self.next;
        let (stop, state) = match self.runs.range(..=first).next_back() {
            Some((_, run)) if run.end > first => (run.end.min(self.end), run.state),
            _ => {
                let gap_end = self.runs.range(first..).next().map_or(self.end, |(&start, _)| start.min(self.end));
                (gap_end, Expectation::Unknown)
            }
        };
        self.next = stop;
        Some(Segment { first, count: stop - first, state })
    }
}

/// What every block of every namespace must hold, and the write generation counter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostMap {
    namespaces: BTreeMap<u32, NamespaceMap>,
    last_generation: u64,
}

impl HostMap {
    pub fn new() -> Self {
        Self::default()
    }

    /// A generation no earlier write used: 1, 2, 3 …
    pub fn next_generation(&mut self) -> u64 {
        self.last_generation += 1;
        self.last_generation
    }

    pub fn namespace(&self, nsid: u32) -> Option<&NamespaceMap> {
        self.namespaces.get(&nsid)
    }

    pub fn namespace_mut(&mut self, nsid: u32) -> &mut NamespaceMap {
        self.namespaces.entry(nsid).or_default()
    }

    /// Every namespace with something known, in NSID order.
    pub fn namespaces(&self) -> impl Iterator<Item = (u32, &NamespaceMap)> {
        self.namespaces.iter().map(|(&nsid, map)| (nsid, map))
    }

    /// A completed Write of `count` blocks from `first`, filled with this generation and seed.
    pub fn record_write(&mut self, nsid: u32, first: u64, count: u64, generation: u64, seed: u64) {
        self.namespace_mut(nsid).set(first, count, Expectation::Written { generation, seed });
    }

    /// A completed Dataset Management deallocate (advisory: what each block held before
    /// is remembered, see [`NamespaceMap::deallocate`]).
    pub fn record_deallocate(&mut self, nsid: u32, first: u64, count: u64) {
        self.namespace_mut(nsid).deallocate(first, count);
    }

    /// A completed Write Zeroes, with or without DEAC: the blocks must read as zeroes
    /// either way (Write Zeroes is not advisory).
    pub fn record_zeroes(&mut self, nsid: u32, first: u64, count: u64) {
        self.namespace_mut(nsid).set(first, count, Expectation::Zeroes);
    }

    /// Stops judging these blocks (a failed or interrupted command left them undefined).
    pub fn forget(&mut self, nsid: u32, first: u64, count: u64) {
        if let Some(map) = self.namespaces.get_mut(&nsid) {
            map.set(first, count, Expectation::Unknown);
        }
    }

    /// Forgets the whole namespace: after a Format NVM, or when it is deleted.
    pub fn reset_namespace(&mut self, nsid: u32) {
        self.namespaces.remove(&nsid);
    }

    /// Forgets every namespace (a format of all namespaces, a sanitize).
    pub fn reset_all(&mut self) {
        self.namespaces.clear();
    }

    /// What the block at `lba` of `nsid` must hold.
    pub fn state_at(&self, nsid: u32, lba: u64) -> Expectation {
        self.namespace(nsid).map_or(Expectation::Unknown, |map| map.state_at(lba))
    }
}

#[cfg(test)]
mod tests {
    use super::super::expectation::Previous;
    use super::*;

    const GEN1: Expectation = Expectation::Written { generation: 1, seed: 9 };
    const GEN2: Expectation = Expectation::Written { generation: 2, seed: 9 };

    fn segments(map: &NamespaceMap) -> Vec<(u64, u64, Expectation)> {
        map.known().map(|s| (s.first, s.count, s.state)).collect()
    }

    #[test]
    fn adjacent_writes_of_one_generation_merge() {
        let mut map = NamespaceMap::new();
        map.set(0, 10, GEN1);
        map.set(20, 10, GEN1);
        map.set(10, 10, GEN1);
        assert_eq!(segments(&map), [(0, 30, GEN1)]);
    }

    #[test]
    fn an_overwrite_in_the_middle_splits_a_range() {
        let mut map = NamespaceMap::new();
        map.set(0, 30, GEN1);
        map.set(10, 5, GEN2);
        assert_eq!(segments(&map), [(0, 10, GEN1), (10, 5, GEN2), (15, 15, GEN1)]);
        assert_eq!(map.state_at(14), GEN2);
        assert_eq!(map.state_at(15), GEN1);
        assert_eq!(map.state_at(30), Expectation::Unknown);
    }

    #[test]
    fn forgetting_leaves_a_gap_that_queries_report_as_unknown() {
        let mut map = NamespaceMap::new();
        map.set(0, 30, GEN1);
        map.set(10, 10, Expectation::Unknown);
        let all: Vec<_> = map.segments(5, 30).map(|s| (s.first, s.count, s.state)).collect();
        assert_eq!(all, [(5, 5, GEN1), (10, 10, Expectation::Unknown), (20, 10, GEN1), (30, 5, Expectation::Unknown)]);
    }

    #[test]
    fn a_range_reaching_the_end_of_the_lba_space_is_cut_there() {
        let mut map = NamespaceMap::new();
        map.set(u64::MAX - 4, 100, Expectation::Zeroes);
        assert_eq!(segments(&map), [(u64::MAX - 4, 4, Expectation::Zeroes)]);
        map.set(u64::MAX, 1, GEN1);
        assert_eq!(map.range_count(), 1);
    }

    #[test]
    fn a_deallocate_remembers_what_each_block_held() {
        let dealloc = |previous| Expectation::Deallocated { previous };
        let held_1 = dealloc(Some(Previous::Written { generation: 1, seed: 9 }));
        let held_2 = dealloc(Some(Previous::Written { generation: 2, seed: 9 }));
        let held_zeroes = dealloc(Some(Previous::Zeroes));
        let mut map = HostMap::new();
        map.record_write(1, 0, 10, 1, 9);
        map.record_zeroes(1, 10, 5);
        map.record_write(1, 20, 5, 2, 9);
        map.record_deallocate(1, 5, 30);
        let ns = map.namespace(1).expect("recorded");
        assert_eq!(
            segments(ns),
            [
                (0, 5, GEN1),
                (5, 5, held_1),
                (10, 5, held_zeroes),
                (15, 5, dealloc(None)),
                (20, 5, held_2),
                (25, 10, dealloc(None))
            ]
        );
        // Deallocating again changes nothing a block held; ranges of one kind merge.
        map.record_deallocate(1, 0, 40);
        let ns = map.namespace(1).expect("recorded");
        assert_eq!(
            segments(ns),
            [(0, 10, held_1), (10, 5, held_zeroes), (15, 5, dealloc(None)), (20, 5, held_2), (25, 15, dealloc(None))]
        );
    }

    #[test]
    fn write_zeroes_after_a_deallocate_must_read_zeroes() {
        let mut map = HostMap::new();
        map.record_write(1, 0, 8, 1, 9);
        map.record_deallocate(1, 0, 8);
        map.record_zeroes(1, 2, 2);
        assert_eq!(map.state_at(1, 2), Expectation::Zeroes);
        assert_eq!(map.state_at(1, 1), GEN1.deallocated());
    }

    #[test]
    fn a_reset_forgets_only_that_namespace() {
        let mut map = HostMap::new();
        map.record_write(1, 0, 8, 1, 9);
        map.record_zeroes(2, 0, 8);
        map.reset_namespace(1);
        assert_eq!(map.state_at(1, 0), Expectation::Unknown);
        assert_eq!(map.state_at(2, 0), Expectation::Zeroes);
        map.reset_all();
        assert_eq!(map.state_at(2, 0), Expectation::Unknown);
    }

    #[test]
    fn generations_increase() {
        let mut map = HostMap::new();
        assert_eq!((map.next_generation(), map.next_generation()), (1, 2));
    }
}
