//! The subsystem's side of power (the model is [`super::power`]): every Write recorded
//! in the write-back log before it changes the media and marked when its completion is
//! posted; Flush and a shutdown making completed writes durable; a power cut taking
//! back what was not durable and counting the unsafe shutdown; power-on counting the
//! power cycle and saying when the controller may be ready.

use super::power::{Loss, WriteBack};
use super::{features, Quirk, Subsystem};
use crate::rng::Rng;

/// What the subsystem keeps of power between commands.
#[derive(Debug, Default)]
pub struct PowerState {
    pub writeback: WriteBack,
    /// The change of the command executing now, for [`crate::exec::ControllerContext::change`].
    pub(super) pending: Option<u64>,
    /// A shutdown completed (CSTS.SHST 10b) and nothing was written since.
    pub(super) clean: bool,
    /// Powered off (between a cut and power-on).
    pub(super) off: bool,
    /// The newest Write's first block (NSID, LBA): what quirk
    /// `foreign-data-after-power-loss` damages.
    pub(super) last_write: Option<(u32, u64)>,
    /// What the last cut took back.
    pub last_loss: Loss,
}

/// Bytes a quirk `foreign-data-after-power-loss` block holds: a pattern no host wrote.
pub const FOREIGN_BYTE: u8 = 0xE7;

impl Subsystem {
    /// The write-back cache's size: the profile's, else the service model's, else 64 MiB.
    pub(super) fn cache_bytes(&self) -> u64 {
        let service = self.profile.service.as_ref().map(|s| s.write_cache_bytes);
        self.profile.power.cache_bytes.or(service).unwrap_or(64 << 20)
    }

    /// Whether a Write completed now is durable at once: no volatile write cache, or it
    /// is disabled (Feature 06h WCE cleared), or power-loss protection, or FUA.
    fn durable_at_completion(&self, fua: bool) -> bool {
        let cache = self.controller.features.volatile_write_cache;
        // Quirk `write-cache-disable-ignored`: WCE cleared, the cache used all the same.
        let wce = cache.is_some_and(|v| v.wce() || self.quirks.has(Quirk::WriteCacheDisableIgnored));
        // Quirk `fua-ignored`: FUA completes before the data is on the media (§6.15 broken).
        let fua = fua && !self.quirks.has(Quirk::FuaIgnored);
        // Quirk `loss-protection-cache-lost`: the profile promises power-loss protection
        // but the cache is lost as without it (the datasheet claim broken).
        let protected = self.profile.power.loss_protection && !self.quirks.has(Quirk::LossProtectionCacheLost);
        !wce || fua || protected
    }

    /// A Write of `nlb` blocks from `slba` of `nsid` is about to change the media: the
    /// blocks as they are now go into the write-back log.
    pub(super) fn begin_write(&mut self, nsid: u32, slba: u64, nlb: u64, fua: bool) {
        let durable = self.durable_at_completion(fua);
        let Some(ns) = self.namespace(nsid) else { return };
        let before = (slba..slba + nlb).map(|lba| ns.block_state(lba)).collect();
        self.power.pending = Some(self.power.writeback.begin(nsid, slba, before, durable));
        self.power.clean = false;
        self.power.last_write = Some((nsid, slba));
    }

    /// Blocks changed durably as the command executes (deallocate, Write Zeroes, Write
    /// Uncorrectable): no older Write lost at a cut may put them back.
    pub(super) fn settle(&mut self, nsid: u32, slba: u64, nlb: u64) {
        self.power.writeback.settle(nsid, slba, nlb);
        self.power.clean = false;
        self.forget_port_stale_blocks(nsid, slba, nlb);
    }

    /// Flush (§6.8) of `nsid`, or of every namespace.
    pub(super) fn flush_cache(&mut self, nsid: Option<u32>) {
        // Quirk `flush-ignored`: success, and nothing made durable (§6.8 broken).
        if !self.quirks.has(Quirk::FlushIgnored) {
            self.power.writeback.flush(nsid);
        }
    }

    /// Normal or abrupt shutdown (CC.SHN, §7.6.2): the cache written back. True when the
    /// shutdown completes (CSTS.SHST 10b).
    pub(super) fn shut_down(&mut self) -> bool {
        self.power.writeback.flush(None);
        self.power.clean = self.power.writeback.exposed() == 0;
        // Quirk `shutdown-status-never-reported`: CSTS.SHST stays 01b (Figure 85 broken).
        !self.quirks.has(Quirk::ShutdownStatusNeverReported)
    }

    /// The power goes: what was not durable is kept or lost as draws seeded with `seed`
    /// say (the same host commands and seed lose the same changes), the unsafe shutdown
    /// counted unless a shutdown completed first.
    pub(super) fn cut_power(&mut self, seed: u64) {
        if self.power.off {
            return;
        }
        self.power.off = true;
        self.power.pending = None;
        self.sanitize_power_cut();
        self.reservations_power_cut();
        // Quirk `port-stale-data`: the ports' stale copies go with the power.
        self.forget_port_stale(super::NSID_ALL);
        // Quirk `atomic-write-torn`: writes within AWUPF tear like larger ones (§6.4 broken).
        let atomic_blocks =
            if self.quirks.has(Quirk::AtomicWriteTorn) { 0 } else { self.profile.power.awupf as u64 + 1 };
        let Subsystem { power, namespaces, .. } = self;
        let mut rng = Rng::new(seed);
        let loss = power.writeback.cut(atomic_blocks, &mut || rng.coin(), &mut |(nsid, lba), state| {
            if let Some(Some(ns)) = namespaces.get_mut(nsid as usize - 1) {
                ns.restore_block(lba, state);
            }
        });
        if self.quirks.has(Quirk::ForeignDataAfterPowerLoss) {
            // Quirk: the block written last holds bytes no host wrote (§6.9 broken).
            if let Some((nsid, lba)) = self.power.last_write {
                if let Some(ns) = self.namespace_mut(nsid) {
                    let _ = ns.fill_blocks(lba, 1, FOREIGN_BYTE);
                    ns.mark_written(lba, 1);
                }
            }
        }
        let unsafe_shutdown = !self.power.clean;
        // Quirk `power-counters-not-incremented`: SMART counts neither (Figure 196 broken).
        if unsafe_shutdown && !self.quirks.has(Quirk::PowerCountersNotIncremented) {
            self.health.unsafe_shutdowns += 1;
        }
        self.power.last_loss = loss;
    }

    /// The power comes back: every controller's features to their defaults, the power
    /// cycle counted.
    /// Returns the milliseconds until the controller may become ready.
    pub(super) fn power_on(&mut self) -> u64 {
        if !self.power.off {
            return 0;
        }
        self.power.off = false;
        self.firmware.powered_on = true;
        let clean = std::mem::replace(&mut self.power.clean, false);
        // Every controller's features, whichever port the host powers up through.
        for c in std::iter::once(&mut self.controller).chain(&mut self.others) {
            c.features = features::Features::new(&self.profile);
            c.reservation_log = Default::default();
            // Every ANA group starts Optimized again ([`super::ana`]).
            c.ana = Default::default();
        }
        if !self.quirks.has(Quirk::PowerCountersNotIncremented) {
            self.health.power_cycles += 1;
        }
        if self.quirks.has(Quirk::NguidChangesAfterPowerCycle) {
            // Quirk: the namespaces come back with other identifiers (Figure 245 broken).
            for ns in self.namespaces.iter_mut().flatten() {
                ns.nguid[0] = ns.nguid[0].wrapping_add(1);
                ns.eui64[7] = ns.eui64[7].wrapping_add(1);
            }
        }
        let capacity = self.profile.capacity_bytes as u128;
        let ready = self.profile.power.ready_ms(clean, capacity);
        let timeout_ms = self.profile.controller.timeout_ms as u64;
        if !clean && self.quirks.has(Quirk::ReadyAfterTimeout) {
            // Quirk: ready later than CAP.TO allows (Figure 79 CAP.TO broken).
            return timeout_ms + 1000;
        }
        if !clean && self.quirks.has(Quirk::ReadySlowAfterPowerLoss) {
            // Quirk: within CAP.TO, but later than the datasheet's ready time.
            return ready.max(timeout_ms * 3 / 4);
        }
        ready
    }
}
