//! What a workload asks for: its jobs, each on one namespace range with its own queue.

use std::time::Duration;

use nvme::spec::identify::AtomicWrite;
use nvme::spec::queue::QueuePriority;

use crate::data::judge::DeallocatedRead;

/// The operations a job mixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Read,
    Write,
    /// Dataset Management with the Deallocate attribute, one range.
    Deallocate,
    Flush,
}

impl Op {
    pub const ALL: [Op; 4] = [Op::Read, Op::Write, Op::Deallocate, Op::Flush];

    /// As figures and reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Deallocate => "deallocate",
            Op::Flush => "flush",
        }
    }

    /// Whether the command changes what blocks hold (and so never overlaps another such
    /// command in flight: the engine keeps overlapping writes apart, as NVMe does not
    /// order commands, §6.3 "Command Ordering Requirements").
    pub fn changes_data(self) -> bool {
        matches!(self, Op::Write | Op::Deallocate)
    }
}

/// Shares of each operation, in percent (they add up to 100).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix {
    pub read: u32,
    pub write: u32,
    pub deallocate: u32,
    pub flush: u32,
}

impl Mix {
    pub const READ: Mix = Mix { read: 100, write: 0, deallocate: 0, flush: 0 };
    pub const WRITE: Mix = Mix { read: 0, write: 100, deallocate: 0, flush: 0 };

    /// The operation a draw in `0 .. 100` selects.
    pub fn pick(&self, draw: u32) -> Op {
        let mut at = draw;
        for (op, share) in [(Op::Read, self.read), (Op::Write, self.write), (Op::Deallocate, self.deallocate)] {
            if at < share {
                return op;
            }
            at -= share;
        }
        Op::Flush
    }

    pub fn total(&self) -> u32 {
        self.read + self.write + self.deallocate + self.flush
    }

    pub fn share(&self, op: Op) -> u32 {
        match op {
            Op::Read => self.read,
            Op::Write => self.write,
            Op::Deallocate => self.deallocate,
            Op::Flush => self.flush,
        }
    }
}

/// How a job walks its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Uniformly random starting LBAs, aligned to the command's size.
    Random,
    /// From the start of the range up, wrapping around at its end.
    Sequential,
}

/// A job's rate limit (open loop: commands are submitted on schedule whatever the
/// drive's latency, as long as the queue depth allows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    Iops(u64),
    /// Bytes of data per second (decimal: 500 MB/s is 500,000,000).
    BytesPerSecond(u64),
}

/// When a job stops submitting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// After this many commands.
    Commands(u64),
    /// After this long on the target's clock.
    Time(Duration),
}

/// The namespace a job runs on, as the engine needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Namespace {
    pub nsid: u32,
    /// LBA data size in bytes.
    pub block_size: u64,
    pub nsze: u64,
    /// What reads of deallocated blocks return (DLFEAT).
    pub dealloc_read: DeallocatedRead,
    /// Which writes are atomic with respect to reads (AWUN/NAWUN, NABSN/NABO): a read that
    /// a larger write races may come back torn, a mix of old and new data.
    pub atomic: AtomicWrite,
}

/// One job: a stream of commands on its own I/O queue.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub name: String,
    pub namespace: Namespace,
    /// The LBA range it uses: `first_lba .. first_lba + blocks`.
    pub first_lba: u64,
    pub blocks: u64,
    pub mix: Mix,
    pub pattern: Pattern,
    /// Blocks per command: one of these, drawn uniformly per command.
    pub blocks_per_command: Vec<u32>,
    pub queue_depth: u32,
    /// QPRIO of the job's submission queue (used under weighted round robin).
    pub priority: QueuePriority,
    /// The port whose controller the job's queue is on (0: the one nvtest opened;
    /// [`nvme::queued::QueueSpec::port`]).
    pub port: usize,
    /// Writes sent with FUA (Force Unit Access), in percent.
    pub fua_percent: u32,
    pub rate: Option<Rate>,
    pub end: End,
    /// Commands submitted in the first `warmup` of the job are judged but left out of
    /// its figures.
    pub warmup: Duration,
}

impl Job {
    /// The queue the job runs on.
    pub fn queue_spec(&self) -> nvme::queued::QueueSpec {
        nvme::queued::QueueSpec { depth: self.queue_depth, priority: self.priority, port: self.port }
    }

    /// The largest transfer one command of the job moves, in bytes.
    pub fn max_transfer_bytes(&self) -> u64 {
        self.blocks_per_command.iter().copied().max().unwrap_or(1) as u64 * self.namespace.block_size
    }
}

/// Jobs run together, with the seed their LBAs and data are drawn from.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub jobs: Vec<Job>,
    pub seed: u64,
    /// Whether to wait for commands in flight when every job has ended (always, unless
    /// the workload is stopped early with [`crate::load::Stop`]).
    pub drain: bool,
    /// The queue each job submits to, by job (the queues a [`QueuedIo`] was opened with,
    /// from 0); jobs sharing a queue share its entries. Empty: job `i` on queue `i`.
    ///
    /// [`QueuedIo`]: nvme::queued::QueuedIo
    pub queues: Vec<usize>,
}

impl Workload {
    /// `jobs`, each on a queue of its own.
    pub fn new(jobs: Vec<Job>, seed: u64, drain: bool) -> Self {
        Workload { jobs, seed, drain, queues: Vec::new() }
    }

    /// The queue of job `j`.
    pub fn queue_of(&self, j: usize) -> usize {
        self.queues.get(j).copied().unwrap_or(j)
    }

    /// How many queues the jobs use.
    pub fn queue_count(&self) -> usize {
        (0..self.jobs.len()).map(|j| self.queue_of(j) + 1).max().unwrap_or(0)
    }
}

/// SplitMix64: the engine's draws (LBAs, sizes, operations), deterministic per seed.
#[derive(Clone, Debug)]
pub struct Draws(u64);

impl Draws {
    pub fn new(seed: u64) -> Self {
        Draws(seed ^ 0x6e76_7465_7374_2d6c)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A draw in `0 .. n` (`n` > 0), without modulo bias worth mentioning for n ≪ 2^64.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mix_picks_each_operation_by_its_share() {
        let mix = Mix { read: 70, write: 20, deallocate: 5, flush: 5 };
        let picks: Vec<Op> = (0..100).map(|d| mix.pick(d)).collect();
        for op in Op::ALL {
            assert_eq!(picks.iter().filter(|&&p| p == op).count() as u32, mix.share(op), "{op:?}");
        }
    }

    #[test]
    fn draws_repeat_for_a_seed_and_stay_below_their_bound() {
        let a: Vec<u64> = {
            let mut d = Draws::new(7);
            (0..100).map(|_| d.below(10)).collect()
        };
        let mut d = Draws::new(7);
        let b: Vec<u64> = (0..100).map(|_| d.below(10)).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|&x| x < 10));
        assert!((0..10).all(|x| a.contains(&x)), "{a:?}");
    }
}
