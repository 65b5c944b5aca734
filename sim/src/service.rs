//! The drive's simulated clock and its service model: how long each command takes.
//!
//! [`SimClock`] is one subsystem's time, in nanoseconds from when the drive was built,
//! shared by every controller (port) of the subsystem. It moves only when the host
//! idles ([`crate::SimTransport`]'s `idle` / `idle_until`): never from wall time, and
//! nothing in the simulator reads the wall clock or a thread RNG, so the same host
//! command sequence gives the same timings and data run after run.
//!
//! [`ServiceModel`] (a profile's `service:` section) says what a command costs. Without
//! one the queue engine completes every command at the doorbell write, as before. With
//! one, [`Media`] answers, at a command's fetch time, when its completion is posted:
//!
//! - **Reads.** A transfer covers 4 KiB pages; page `p` of a namespace lives on die
//!   `(p + nsid × 7919) mod dies` (a fixed stripe, so the same LBAs always meet on the
//!   same die). Each page occupies its die `read_us`; then `read_overhead_us` (ECC,
//!   controller, DMA set-up, off the die) and a jitter of `read_jitter_us × u²` (`u`
//!   uniform in [0, 1) from a seeded xorshift PRNG: median a quarter of it, never more
//!   than it). A die busy with another read is waited for.
//! - **Background programs delay reads.** With `read_priority` (the datasheets'
//!   "priority queue management") a program on the die is suspended for the read, which
//!   costs `suspend_us` more and pushes the program back by the read; without it (or
//!   with quirk `reads-queued-behind-writes`) the read waits until every program queued
//!   on its die before it has finished.
//! - **Host interface.** Data moves at `read_mb_s` / `write_mb_s` (MB = 10^6 bytes): a
//!   transfer reserves the link for `bytes / bandwidth` in fetch order, and a command
//!   completes no earlier than its reservation ends.
//! - **Writes.** With a volatile write cache (`write_cache_bytes` > 0) a write's data is
//!   admitted once it fits (writes are admitted in order; a full cache makes them wait
//!   for programs to free room) and it completes `write_us` later. Dirty data is
//!   programmed in units of `program_bytes` taking `program_us` on the next die in
//!   rotation. Without a cache a write programs its own units and completes `write_us`
//!   after the last.
//! - **Flush** programs what is dirty and completes [`FLUSH_US`] after every program
//!   scheduled before it has finished.
//! - **Fixed costs**: Dataset Management [`DEALLOCATE_US`], Write Zeroes
//!   [`WRITE_ZEROES_US`], Write Uncorrectable and everything else (a command that
//!   failed its checks included) [`OTHER_US`]. Compare costs what a Read does. Admin
//!   commands take no time.
//!
//! The figures for the shipped profiles are in `fixtures/sim/*.yaml`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nvme::spec::{Command, NvmOpcode};
use serde::Deserialize;

/// Flush: the time after the last program it waits for.
pub const FLUSH_US: u64 = 5;
/// Dataset Management (any attributes, any number of ranges).
pub const DEALLOCATE_US: u64 = 20;
/// Write Zeroes (a mapping update, no data programmed).
pub const WRITE_ZEROES_US: u64 = 20;
/// Write Uncorrectable, Compare of nothing, and commands that fail their checks.
pub const OTHER_US: u64 = 5;
/// What `idle()` lets pass when nothing is scheduled.
pub const IDLE_STEP_NS: u64 = 1_000_000;
/// The media page the die stripe counts in.
pub const PAGE_BYTES: u64 = 4096;

/// A profile's `service:` section. Times in microseconds, bandwidths in MB/s (10^6 bytes).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceModel {
    /// I/O commands in service at once; more wait in their submission queues.
    pub slots: u32,
    /// Independent media units (die / plane groups).
    pub dies: u32,
    /// Die time to read one 4 KiB page.
    pub read_us: u32,
    /// Per read command, off the die: controller, ECC, DMA set-up.
    #[serde(default)]
    pub read_overhead_us: u32,
    /// Largest jitter added to a read (`read_jitter_us × u²`).
    #[serde(default)]
    pub read_jitter_us: u32,
    /// A write's completion after its data is in the cache (or after its programs).
    pub write_us: u32,
    /// Host interface bandwidth, device to host and host to device.
    pub read_mb_s: u32,
    pub write_mb_s: u32,
    /// Volatile write cache size; 0: writes program the media before completing.
    #[serde(default)]
    pub write_cache_bytes: u64,
    /// Unit of a program (a multiple of 4 KiB).
    pub program_bytes: u32,
    /// Die time of one program.
    pub program_us: u32,
    /// Reads suspend programs on their die (priority queue management).
    #[serde(default)]
    pub read_priority: bool,
    /// What suspending a program costs the read.
    #[serde(default)]
    pub suspend_us: u32,
    /// Seed of the jitter PRNG.
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_seed() -> u64 {
    0x6e76_7465_7374_0001
}

impl ServiceModel {
    /// What is wrong with the figures, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.slots == 0 || self.dies == 0 {
            return Err("service: slots and dies must be at least 1".into());
        }
        if self.read_mb_s == 0 || self.write_mb_s == 0 {
            return Err("service: read_mb_s and write_mb_s must be at least 1".into());
        }
        if self.program_bytes == 0 || !(self.program_bytes as u64).is_multiple_of(PAGE_BYTES) {
            return Err(format!("service: program_bytes {} must be a positive multiple of 4096", self.program_bytes));
        }
        if self.write_cache_bytes != 0 && self.write_cache_bytes < self.program_bytes as u64 * 2 {
            return Err("service: write_cache_bytes must be 0 or at least two program units".into());
        }
        Ok(())
    }
}

/// What a command asks of the media, as the command set describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Data read from the media (Read, Compare): namespace, byte offset and length.
    Read { nsid: u32, offset: u64, bytes: u64 },
    /// Data written (Write).
    Write { bytes: u64 },
    /// Flush of the write cache.
    Flush,
    /// A fixed cost in microseconds.
    Fixed(u64),
}

impl Work {
    /// The work of an NVM command on a namespace of `block`-byte logical blocks.
    pub fn of_blocks(cmd: &Command, block: u64) -> Work {
        let bytes = (cmd.nlb() as u64 + 1) * block;
        match NvmOpcode::from_u8(cmd.opcode) {
            Some(NvmOpcode::Read | NvmOpcode::Compare) => {
                Work::Read { nsid: cmd.nsid, offset: cmd.slba().saturating_mul(block), bytes }
            }
            Some(NvmOpcode::Write) => Work::Write { bytes },
            Some(NvmOpcode::Flush) => Work::Flush,
            Some(NvmOpcode::DatasetManagement) => Work::Fixed(DEALLOCATE_US),
            Some(NvmOpcode::WriteZeroes) => Work::Fixed(WRITE_ZEROES_US),
            _ => Work::Fixed(OTHER_US),
        }
    }
}

/// The media state behind a service model: dies, host link, write cache.
#[derive(Debug)]
pub struct Media {
    model: ServiceModel,
    /// Reads suspend programs (the model's `read_priority`, unless a quirk says no).
    priority: bool,
    rng: crate::rng::Rng,
    /// Per die: when the reads already reserved end, and when its programs end.
    read_free: Vec<u64>,
    program_free: Vec<u64>,
    read_link: u64,
    write_link: u64,
    /// Dirty bytes not yet part of a program.
    pending: u64,
    /// Programs scheduled: (end, bytes), earliest end first; and their bytes.
    programs: BinaryHeap<Reverse<(u64, u64)>>,
    programming: u64,
    /// Writes are admitted to the cache in order: none before this.
    admitted: u64,
    last_program_end: u64,
    next_die: u32,
}

const US: u64 = 1_000;

impl Media {
    /// `queued_reads`: quirk `reads-queued-behind-writes` (no program suspend).
    pub fn new(model: ServiceModel, queued_reads: bool) -> Media {
        let dies = model.dies.max(1) as usize;
        Media {
            priority: model.read_priority && !queued_reads,
            rng: crate::rng::Rng::new(model.seed),
            read_free: vec![0; dies],
            program_free: vec![0; dies],
            read_link: 0,
            write_link: 0,
            pending: 0,
            programs: BinaryHeap::new(),
            programming: 0,
            admitted: 0,
            last_program_end: 0,
            next_die: 0,
            model,
        }
    }

    pub fn model(&self) -> &ServiceModel {
        &self.model
    }

    /// When a command fetched at `now` completes.
    pub fn serve(&mut self, now: u64, work: Work) -> u64 {
        match work {
            Work::Read { nsid, offset, bytes } => self.read(now, nsid, offset, bytes),
            Work::Write { bytes } => self.write(now, bytes),
            Work::Flush => self.flush(now),
            Work::Fixed(us) => now + us * US,
        }
    }

    fn uniform(&mut self) -> f64 {
        self.rng.uniform()
    }

    fn transfer_ns(bytes: u64, mb_s: u32) -> u64 {
        // bytes / (mb_s × 10^6 B/s) in ns = bytes × 1000 / mb_s.
        (bytes * 1000).div_ceil(mb_s.max(1) as u64)
    }

    fn read(&mut self, now: u64, nsid: u32, offset: u64, bytes: u64) -> u64 {
        let m = &self.model;
        let dies = m.dies as u64;
        let (read_ns, suspend_ns) = (m.read_us as u64 * US, m.suspend_us as u64 * US);
        let first = offset / PAGE_BYTES;
        let last = (offset + bytes.max(1) - 1) / PAGE_BYTES;
        // A transfer wider than the dies reads each die several times: count per die.
        let mut media_end = now;
        let stripe = nsid as u64 * 7919;
        for page in first..=last.min(first + dies * 64) {
            let die = ((page + stripe) % dies) as usize;
            let mut start = now.max(self.read_free[die]);
            if self.priority {
                if self.program_free[die] > start {
                    // Suspend the program for this read; it resumes after.
                    start += suspend_ns;
                    self.program_free[die] += suspend_ns + read_ns;
                }
            } else {
                start = start.max(self.program_free[die]);
            }
            let end = start + read_ns;
            self.read_free[die] = end;
            media_end = media_end.max(end);
        }
        let xfer = Self::transfer_ns(bytes, self.model.read_mb_s);
        self.read_link = self.read_link.max(now) + xfer;
        let jitter = (self.model.read_jitter_us as f64 * US as f64 * self.uniform().powi(2)) as u64;
        (media_end + self.model.read_overhead_us as u64 * US + jitter + xfer).max(self.read_link)
    }

    /// Schedules one program (full unit or not, it takes `program_us`) ready at `ready` on
    /// the next die; its end.
    fn program(&mut self, ready: u64) -> u64 {
        let die = self.next_die as usize;
        self.next_die = (self.next_die + 1) % self.model.dies;
        let start = ready.max(self.program_free[die]).max(self.read_free[die]);
        let end = start + self.model.program_us as u64 * US;
        self.program_free[die] = end;
        self.last_program_end = self.last_program_end.max(end);
        end
    }

    fn write(&mut self, now: u64, bytes: u64) -> u64 {
        let xfer = Self::transfer_ns(bytes, self.model.write_mb_s);
        self.write_link = self.write_link.max(now) + xfer;
        let arrived = self.write_link;
        let write_ns = self.model.write_us as u64 * US;
        let unit = self.model.program_bytes as u64;
        let cache = self.model.write_cache_bytes;
        if cache == 0 {
            let mut end = arrived;
            for _ in 0..bytes.div_ceil(unit).max(1) {
                end = end.max(self.program(arrived));
            }
            return end + write_ns;
        }
        let mut at = arrived.max(self.admitted);
        let need = bytes.min(cache - unit);
        loop {
            while let Some(&Reverse((end, b))) = self.programs.peek() {
                if end > at {
                    break;
                }
                self.programs.pop();
                self.programming -= b;
            }
            if self.pending + self.programming + need <= cache {
                break;
            }
            match self.programs.peek() {
                Some(&Reverse((end, _))) => at = end,
                // Only partial data is dirty: program it to make room.
                None => self.start_program(at, self.pending),
            }
        }
        self.admitted = at;
        self.pending += bytes;
        while self.pending >= unit {
            self.start_program(at, unit);
        }
        at + write_ns
    }

    fn start_program(&mut self, at: u64, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let end = self.program(at);
        self.programs.push(Reverse((end, bytes)));
        self.programming += bytes;
        self.pending -= bytes;
    }

    fn flush(&mut self, now: u64) -> u64 {
        let at = now.max(self.admitted);
        if self.pending > 0 {
            self.start_program(at, self.pending);
        }
        now.max(self.last_program_end) + FLUSH_US * US
    }
}

/// One subsystem's simulated time, shared by its controllers, and the media state their
/// commands share.
#[derive(Debug)]
pub struct SimClock {
    now: AtomicU64,
    shared: Mutex<Shared>,
}

#[derive(Debug)]
struct Shared {
    media: Option<Media>,
    /// Per controller (port): its next scheduled event, `u64::MAX` for none.
    next: Vec<u64>,
}

/// The media of a clock, locked for one command.
pub struct MediaGuard<'a>(MutexGuard<'a, Shared>);

impl MediaGuard<'_> {
    pub fn media(&mut self) -> Option<&mut Media> {
        self.0.media.as_mut()
    }
}

impl SimClock {
    /// A clock at 0 with the media of `model` (none: commands take no time).
    pub fn new(model: Option<ServiceModel>, queued_reads: bool) -> Arc<SimClock> {
        Arc::new(SimClock {
            now: AtomicU64::new(0),
            shared: Mutex::new(Shared { media: model.map(|m| Media::new(m, queued_reads)), next: Vec::new() }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The simulated time in ns.
    #[inline]
    pub fn now(&self) -> u64 {
        self.now.load(Ordering::Acquire)
    }

    /// Moves the clock forward to `t` (never back).
    pub fn advance(&self, t: u64) {
        self.now.fetch_max(t, Ordering::AcqRel);
    }

    /// Whether commands take time (a service model is present).
    pub fn timed(&self) -> bool {
        self.lock().media.is_some()
    }

    pub fn media(&self) -> MediaGuard<'_> {
        MediaGuard(self.lock())
    }

    /// A new controller of the subsystem: its index for [`Self::publish`].
    pub fn register_port(&self) -> usize {
        let mut s = self.lock();
        s.next.push(u64::MAX);
        s.next.len() - 1
    }

    /// Port `port`'s next event is at `at` (`u64::MAX`: none).
    pub fn publish(&self, port: usize, at: u64) {
        if let Some(slot) = self.lock().next.get_mut(port) {
            *slot = at;
        }
    }

    /// The earliest event of any port later than `after` (events at or before it belong
    /// to ports that run them when next touched).
    pub fn next_event_after(&self, after: u64) -> Option<u64> {
        self.lock().next.iter().copied().filter(|&t| t > after && t != u64::MAX).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ServiceModel {
        ServiceModel {
            slots: 8,
            dies: 4,
            read_us: 50,
            read_overhead_us: 10,
            read_jitter_us: 0,
            write_us: 10,
            read_mb_s: 4096,
            write_mb_s: 4096,
            write_cache_bytes: 4 * 65536,
            program_bytes: 65536,
            program_us: 1000,
            read_priority: true,
            suspend_us: 5,
            seed: 1,
        }
    }

    #[test]
    fn a_page_read_costs_the_die_the_overhead_and_the_transfer() {
        let mut m = Media::new(model(), false);
        assert_eq!(m.serve(0, Work::Read { nsid: 0, offset: 0, bytes: 4096 }), 60_000 + 1000);
        // The same die again: waits for the first.
        assert_eq!(m.serve(0, Work::Read { nsid: 0, offset: 0, bytes: 4096 }), 110_000 + 1000);
    }

    #[test]
    fn a_read_behind_a_program_waits_unless_it_suspends_it() {
        for (priority, expect) in [(true, 5_000 + 60_000 + 1000), (false, 1_000_000 + 60_000 + 1000)] {
            let mut m = Media::new(model(), !priority);
            // 64 KiB of writes fill one program unit on die 0.
            m.serve(0, Work::Write { bytes: 65536 });
            let at = m.serve(16_000, Work::Read { nsid: 0, offset: 0, bytes: 4096 }) - 16_000;
            assert!(at.abs_diff(expect) < 17_000, "priority {priority}: {at}");
        }
    }
}
