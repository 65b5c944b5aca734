//! Power: what a power loss takes from the drive, what the drive counts of it, and how
//! long it takes to come back (a profile's `power:` section, [`PowerModel`]).
//!
//! The simulator's media are memory, written when a command executes. What a real drive
//! could still lose is kept as a log of *changes* ([`WriteBack`]): for every Write, the
//! blocks as they were before it ([`BlockState`]), in submission order. Write Zeroes,
//! Write Uncorrectable and a Dataset Management deallocate are durable as they execute
//! (a drive may persist them at once; this model does, so that a deallocate of a whole
//! namespace costs no copy of it): they *settle* their blocks, which no older lost
//! change may put back ([`WriteBack::settle`]).
//! A change is *durable* once the drive may no longer lose it:
//!
//! - at its completion, when the volatile write cache is absent or disabled (Feature 06h
//!   WCE cleared), when it was written with FUA (CDW12 bit 30, §6.15), or when the drive
//!   has power-loss protection (`loss_protection`, a datasheet promise no Identify field
//!   states);
//! - at a Flush of its namespace (§6.8) or a shutdown (CC.SHN, §7.6.2) after it completed;
//! - when more than `cache_bytes` of completed changes are not yet durable, the oldest
//!   (the cache drained them to the media).
//!
//! A command in flight (fetched, not completed) is never durable. At a power cut
//! ([`WriteBack::cut`]) every change not durable is kept or lost, newest first; a lost
//! change puts back its blocks unless a newer kept change covers them. A change of at
//! most AWUPF + 1 blocks (Identify Controller AWUPF, 0's based; NVMe 1.4 §6.4 "Atomic
//! Operations") is kept or lost whole; a larger one block by block (it may tear, at block
//! granularity). Which changes are kept is the caller's `keep` (to be a PRNG seeded so
//! that the same host commands give the same losses run after run).
//!
//! The SMART / Health log counts Power Cycles and Unsafe Shutdowns (a power loss without
//! a completed shutdown, Figure 196); after power-on the controller is ready
//! `ready_ms.clean` or `ready_ms.dirty` (after an unsafe shutdown) plus `ready_ms.per_tib`
//! per TiB of capacity later, on the simulated clock, which CAP.TO bounds (Figure 79).

use super::namespace::BlockState;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// A profile's `power:` section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerModel {
    /// Power-loss protection: every completed write survives a power loss.
    #[serde(default)]
    pub loss_protection: bool,
    /// Identify Controller AWUPF (0's based, logical blocks): a write of at most AWUPF + 1
    /// blocks is all or nothing across a power loss.
    #[serde(default)]
    pub awupf: u16,
    /// Completed, not yet durable data the volatile write cache holds at most; older
    /// changes reach the media first. Default: the service model's `write_cache_bytes`,
    /// else 64 MiB.
    #[serde(default)]
    pub cache_bytes: Option<u64>,
    /// Time from power-on to when CSTS.RDY may follow CC.EN.
    #[serde(default)]
    pub ready_ms: ReadyTimes,
}

/// `ready_ms:` milliseconds from power-on to ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadyTimes {
    /// After a normal shutdown (CSTS.SHST 10b before the power went).
    pub clean: u32,
    /// After an unsafe shutdown (the mapping table is rebuilt).
    pub dirty: u32,
    /// Added per TiB of the subsystem's capacity, in either case.
    #[serde(default)]
    pub per_tib: u32,
}

impl Default for ReadyTimes {
    fn default() -> Self {
        ReadyTimes { clean: 500, dirty: 1000, per_tib: 0 }
    }
}

impl PowerModel {
    /// Milliseconds from power-on to ready, after a clean or an unsafe shutdown, for a
    /// subsystem of `capacity_bytes`.
    pub fn ready_ms(&self, clean: bool, capacity_bytes: u128) -> u64 {
        let base = if clean { self.ready_ms.clean } else { self.ready_ms.dirty } as u128;
        let per_tib = self.ready_ms.per_tib as u128 * capacity_bytes / (1u128 << 40);
        (base + per_tib).min(u64::MAX as u128) as u64
    }
}

/// One change the drive could still lose.
#[derive(Debug)]
struct Change {
    nsid: u32,
    slba: u64,
    /// The blocks from `slba` as they were before the change; `None` for a block a later
    /// durable change settled.
    before: Vec<Option<BlockState>>,
    completed: bool,
    durable: bool,
    /// Durable as soon as it completes (no cache, FUA, power-loss protection).
    durable_at_completion: bool,
}

impl Change {
    fn bytes(&self) -> u64 {
        self.before.iter().flatten().map(BlockState::bytes).sum()
    }
}

/// What a power cut took back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loss {
    /// Changes not durable at the cut (completed or in flight).
    pub exposed: usize,
    /// Of those, changes lost whole, and changes torn (some blocks kept, some lost).
    pub lost: usize,
    pub torn: usize,
    /// Blocks put back to what they held before.
    pub blocks_restored: u64,
}

/// The changes not yet known durable, by token (submission order).
#[derive(Debug, Default)]
pub struct WriteBack {
    changes: BTreeMap<u64, Change>,
    next_token: u64,
    /// Bytes of completed changes not yet durable.
    dirty_bytes: u64,
}

/// A block put back or kept: (NSID, LBA).
pub type BlockAddress = (u32, u64);

impl WriteBack {
    /// Records a change of `before.len()` blocks from `slba` about to be made; its token
    /// names it at completion.
    pub fn begin(&mut self, nsid: u32, slba: u64, before: Vec<BlockState>, durable_at_completion: bool) -> u64 {
        self.next_token += 1;
        let before = before.into_iter().map(Some).collect();
        let change = Change { nsid, slba, before, completed: false, durable: false, durable_at_completion };
        self.changes.insert(self.next_token, change);
        self.next_token
    }

    /// The change's completion was posted.
    pub fn completed(&mut self, token: u64, cache_bytes: u64) {
        let Some(change) = self.changes.get_mut(&token) else { return };
        if change.completed {
            return;
        }
        change.completed = true;
        if change.durable_at_completion {
            change.durable = true;
        } else {
            self.dirty_bytes += change.bytes();
        }
        self.drain(cache_bytes);
        self.prune();
    }

    /// Flush of `nsid` (or of every namespace): every completed change becomes durable.
    pub fn flush(&mut self, nsid: Option<u32>) {
        let mut freed = 0;
        for change in self.changes.values_mut() {
            if change.completed && !change.durable && nsid.is_none_or(|n| n == change.nsid) {
                change.durable = true;
                freed += change.bytes();
            }
        }
        self.dirty_bytes -= freed;
        self.prune();
    }

    /// The namespace was deleted or formatted: its changes no longer have blocks to
    /// put back.
    pub fn forget(&mut self, nsid: u32) {
        let freed: u64 =
            self.changes.values().filter(|c| c.nsid == nsid && c.completed && !c.durable).map(Change::bytes).sum();
        self.dirty_bytes -= freed;
        self.changes.retain(|_, c| c.nsid != nsid);
    }

    /// `nlb` blocks from `slba` of `nsid` were changed durably (a deallocate, Write Zeroes,
    /// Write Uncorrectable): no older change may put them back.
    pub fn settle(&mut self, nsid: u32, slba: u64, nlb: u64) {
        let end = slba.saturating_add(nlb);
        for change in self.changes.values_mut().filter(|c| c.nsid == nsid && !c.durable) {
            let change_end = change.slba + change.before.len() as u64;
            if change.slba >= end || change_end <= slba {
                continue;
            }
            let (from, to) = (slba.max(change.slba) - change.slba, end.min(change_end) - change.slba);
            for block in &mut change.before[from as usize..to as usize] {
                if let Some(state) = block.take() {
                    if change.completed {
                        self.dirty_bytes -= state.bytes();
                    }
                }
            }
        }
    }

    /// Changes the drive could still lose.
    pub fn exposed(&self) -> usize {
        self.changes.values().filter(|c| !c.durable).count()
    }

    /// The oldest completed changes reach the media until at most `cache_bytes` wait.
    fn drain(&mut self, cache_bytes: u64) {
        if self.dirty_bytes <= cache_bytes {
            return;
        }
        for change in self.changes.values_mut() {
            if self.dirty_bytes <= cache_bytes {
                break;
            }
            if change.completed && !change.durable {
                change.durable = true;
                self.dirty_bytes -= change.bytes();
            }
        }
    }

    /// Durable changes older than every change that could be lost protect nothing.
    fn prune(&mut self) {
        while let Some(entry) = self.changes.first_entry() {
            if !entry.get().durable {
                break;
            }
            entry.remove();
        }
    }

    /// A power cut: each change not durable is kept or lost, newest first (changes of at
    /// most `atomic_blocks` whole, larger ones block by block as `keep` decides); `restore`
    /// puts a lost block back. Empties the log.
    pub fn cut(
        &mut self,
        atomic_blocks: u64,
        keep: &mut dyn FnMut() -> bool,
        restore: &mut dyn FnMut(BlockAddress, &BlockState),
    ) -> Loss {
        let mut loss = Loss::default();
        // Blocks a newer kept change covers: an older lost change leaves them alone.
        let mut settled: BTreeSet<BlockAddress> = BTreeSet::new();
        for change in std::mem::take(&mut self.changes).into_values().rev() {
            let blocks = change.before.len() as u64;
            let whole = if change.durable {
                Some(true)
            } else {
                loss.exposed += 1;
                (blocks <= atomic_blocks).then(&mut *keep)
            };
            let (mut kept, mut lost) = (0u64, 0u64);
            for (i, before) in change.before.iter().enumerate() {
                let address = (change.nsid, change.slba + i as u64);
                let Some(before) = before else { continue };
                if whole.unwrap_or_else(&mut *keep) {
                    kept += 1;
                    settled.insert(address);
                } else {
                    lost += 1;
                    if !settled.contains(&address) {
                        restore(address, before);
                        loss.blocks_restored += 1;
                    }
                }
            }
            if !change.durable && lost > 0 {
                if kept == 0 {
                    loss.lost += 1;
                } else {
                    loss.torn += 1;
                }
            }
        }
        self.dirty_bytes = 0;
        loss
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subsystem::namespace::{Format, Namespace};

    fn namespace() -> Namespace {
        let format = Format { index: 0, data_size: 512, ms: 0, extended: false };
        Namespace::new(1, format, 64, 0, ([0; 16], [0; 8]), None)
    }

    fn write(ns: &mut Namespace, log: &mut WriteBack, slba: u64, nlb: u64, byte: u8, durable: bool) -> u64 {
        let before = (slba..slba + nlb).map(|lba| ns.block_state(lba)).collect();
        let token = log.begin(1, slba, before, durable);
        ns.fill_blocks(slba, nlb, byte).unwrap();
        ns.mark_written(slba, nlb);
        token
    }

    fn byte_at(ns: &Namespace, lba: u64) -> u8 {
        let mut b = [0u8; 1];
        ns.media(crate::subsystem::namespace::Region::Data).read(lba * 512, &mut b).unwrap();
        b[0]
    }

    fn cut(ns: &mut Namespace, log: &mut WriteBack, atomic: u64, keep: &mut dyn FnMut() -> bool) -> Loss {
        log.cut(atomic, keep, &mut |(_, lba), state| ns.restore_block(lba, state))
    }

    #[test]
    fn a_flushed_write_survives_and_an_unflushed_one_may_not() {
        let (mut ns, mut log) = (namespace(), WriteBack::default());
        let t = write(&mut ns, &mut log, 0, 1, 0xa1, false);
        log.completed(t, 1 << 20);
        log.flush(Some(1));
        let t = write(&mut ns, &mut log, 1, 1, 0xb2, false);
        log.completed(t, 1 << 20);
        let loss = cut(&mut ns, &mut log, 1, &mut || false);
        assert_eq!((byte_at(&ns, 0), byte_at(&ns, 1)), (0xa1, 0));
        assert_eq!(loss, Loss { exposed: 1, lost: 1, torn: 0, blocks_restored: 1 });
        assert_eq!(ns.nuse(), 1, "the lost block is deallocated again");
    }

    #[test]
    fn a_lost_change_gives_back_what_the_kept_one_before_it_wrote() {
        let (mut ns, mut log) = (namespace(), WriteBack::default());
        for byte in [1u8, 2, 3] {
            let t = write(&mut ns, &mut log, 5, 1, byte, false);
            log.completed(t, 1 << 20);
        }
        // Newest first: 3 lost, 2 kept, 1 lost (but 2 covers it).
        let mut choices = [false, true, false].into_iter();
        cut(&mut ns, &mut log, 1, &mut || choices.next().unwrap());
        assert_eq!(byte_at(&ns, 5), 2);
    }

    #[test]
    fn a_write_beyond_the_atomic_unit_may_tear_one_within_it_never() {
        let (mut ns, mut log) = (namespace(), WriteBack::default());
        let t = write(&mut ns, &mut log, 0, 8, 0xcc, false);
        log.completed(t, 1 << 20);
        let mut alternate = [true, false].into_iter().cycle();
        let loss = cut(&mut ns, &mut log, 8, &mut || alternate.next().unwrap());
        let bytes: Vec<u8> = (0..8).map(|l| byte_at(&ns, l)).collect();
        assert!(bytes == [0xcc; 8] || bytes == [0; 8], "within AWUPF + 1: all or nothing, {bytes:?}");
        assert_eq!(loss.torn, 0);

        let t = write(&mut ns, &mut log, 16, 8, 0xdd, false);
        log.completed(t, 1 << 20);
        let mut alternate = [true, false].into_iter().cycle();
        let loss = cut(&mut ns, &mut log, 4, &mut || alternate.next().unwrap());
        let bytes: Vec<u8> = (16..24).map(|l| byte_at(&ns, l)).collect();
        assert_eq!(bytes, [0xdd, 0, 0xdd, 0, 0xdd, 0, 0xdd, 0]);
        assert_eq!(loss.torn, 1);
    }

    #[test]
    fn durable_at_completion_means_completed_not_in_flight() {
        let (mut ns, mut log) = (namespace(), WriteBack::default());
        let fua = write(&mut ns, &mut log, 0, 1, 0x11, true);
        log.completed(fua, 1 << 20);
        let _in_flight = write(&mut ns, &mut log, 1, 1, 0x22, true);
        let loss = cut(&mut ns, &mut log, 1, &mut || false);
        assert_eq!((byte_at(&ns, 0), byte_at(&ns, 1)), (0x11, 0));
        assert_eq!(loss.exposed, 1);
    }

    #[test]
    fn the_cache_drains_its_oldest_changes_beyond_its_size() {
        let (mut ns, mut log) = (namespace(), WriteBack::default());
        for lba in 0..4 {
            let t = write(&mut ns, &mut log, lba, 1, 0x40 + lba as u8, false);
            log.completed(t, 1024);
        }
        assert_eq!(log.exposed(), 2, "two 512-byte blocks fit a 1 KiB cache");
        cut(&mut ns, &mut log, 1, &mut || false);
        let bytes: Vec<u8> = (0..4).map(|l| byte_at(&ns, l)).collect();
        assert_eq!(bytes, [0x40, 0x41, 0, 0]);
    }

    #[test]
    fn a_durable_deallocate_is_not_undone_by_losing_the_write_before_it() {
        let (mut ns, mut log) = (namespace(), WriteBack::default());
        let t = write(&mut ns, &mut log, 0, 4, 0x55, false);
        log.completed(t, 1 << 20);
        ns.deallocate(1, 2, false).unwrap();
        log.settle(1, 1, 2);
        let loss = cut(&mut ns, &mut log, 1, &mut || false);
        let bytes: Vec<u8> = (0..4).map(|l| byte_at(&ns, l)).collect();
        assert_eq!(bytes, [0, 0, 0, 0]);
        assert_eq!(loss.blocks_restored, 2, "LBAs 0 and 3 put back, 1 and 2 stay deallocated");
        assert_eq!(ns.nuse(), 0);
    }

    #[test]
    fn ready_time_follows_the_shutdown_and_the_capacity() {
        let model =
            PowerModel { ready_ms: ReadyTimes { clean: 800, dirty: 2400, per_tib: 150 }, ..PowerModel::default() };
        assert_eq!(model.ready_ms(true, 0), 800);
        assert_eq!(model.ready_ms(false, 2 << 40), 2700);
    }
}
