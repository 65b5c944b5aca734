//! A queued target in memory for the engine's tests: commands complete in an order of
//! its own (each after a latency drawn from a seed, so completions overtake each other)
//! on a simulated clock, reads are served when submitted and writes land when they
//! complete — the widest freedom NVMe leaves a controller. `late_writes` makes it
//! break the rule the engine checks: a write lands only after its completion was posted,
//! so a read sent after the completion still returns the old data.

use std::collections::HashMap;

use nvme::device::DeviceError;
use nvme::queued::{QueuedIo, Reaped, Transfer};
use nvme::spec::nvm::DsmRange;
use nvme::spec::{Command, Completion, NvmOpcode, Status};

use super::job::Draws;

struct InFlight {
    cid: u16,
    cmd: Command,
    data: Vec<u8>,
    due_ns: u64,
}

pub struct FakeIo {
    block_size: usize,
    pub blocks: HashMap<(u32, u64), Vec<u8>>,
    queues: Vec<(usize, Vec<InFlight>, Vec<u16>, usize)>,
    now: u64,
    draws: Draws,
    /// Writes land this long after their completion (0: when they complete).
    pub late_writes_ns: u64,
    landing: Vec<(u64, u32, u64, Vec<u8>)>,
    pub max_latency_ns: u64,
}

impl FakeIo {
    pub fn new(block_size: usize, depths: &[usize], seed: u64) -> Self {
        FakeIo {
            block_size,
            blocks: HashMap::new(),
            queues: depths.iter().map(|&d| (d, Vec::new(), (0..d as u16).rev().collect(), 0)).collect(),
            now: 0,
            draws: Draws::new(seed),
            late_writes_ns: 0,
            landing: Vec::new(),
            max_latency_ns: 100_000,
        }
    }

    fn read_blocks(&self, nsid: u32, lba: u64, n: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(n as usize * self.block_size);
        for b in lba..lba + n {
            match self.blocks.get(&(nsid, b)) {
                Some(d) => out.extend_from_slice(d),
                None => out.resize(out.len() + self.block_size, 0),
            }
        }
        out
    }

    fn land(&mut self, nsid: u32, lba: u64, data: &[u8]) {
        for (i, block) in data.chunks(self.block_size).enumerate() {
            self.blocks.insert((nsid, lba + i as u64), block.to_vec());
        }
    }

    fn advance(&mut self, to: u64) {
        self.now = self.now.max(to);
        let now = self.now;
        let due: Vec<_> = self.landing.iter().filter(|l| l.0 <= now).cloned().collect();
        self.landing.retain(|l| l.0 > now);
        for (_, nsid, lba, data) in due {
            self.land(nsid, lba, &data);
        }
    }

    fn next_event(&self) -> u64 {
        let completions = self.queues.iter().flat_map(|q| q.1.iter().map(|c| c.due_ns));
        completions.chain(self.landing.iter().map(|l| l.0)).min().unwrap_or(u64::MAX)
    }
}

impl QueuedIo for FakeIo {
    fn describe(&self) -> String {
        "fake".into()
    }
    fn queue_count(&self) -> usize {
        self.queues.len()
    }
    fn qid(&self, queue: usize) -> u16 {
        queue as u16 + 1
    }
    fn capacity(&self, queue: usize) -> usize {
        self.queues[queue].0
    }
    fn outstanding(&self, queue: usize) -> usize {
        self.queues[queue].1.len()
    }

    fn submit(&mut self, queue: usize, cmd: Command, data: Transfer<'_>, _: Transfer<'_>) -> Result<u16, DeviceError> {
        let cid = self.queues[queue].2.pop().ok_or_else(|| DeviceError::Driver("fake queue full".into()))?;
        let latency = 1_000 + self.draws.below(self.max_latency_ns);
        let (nsid, lba, n) = (cmd.nsid, cmd.slba(), cmd.nlb() as u64 + 1);
        let data = match (NvmOpcode::from_u8(cmd.opcode), data) {
            (Some(NvmOpcode::Read), _) => self.read_blocks(nsid, lba, n),
            (_, Transfer::ToDevice(bytes)) => bytes.to_vec(),
            _ => Vec::new(),
        };
        self.queues[queue].1.push(InFlight { cid, cmd, data, due_ns: self.now + latency });
        Ok(cid)
    }

    fn ring(&mut self, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }

    fn poll(&mut self, queue: usize, f: &mut dyn FnMut(Reaped<'_>)) -> Result<usize, DeviceError> {
        let now = self.now;
        let mut done = Vec::new();
        let q = &mut self.queues[queue].1;
        let mut i = 0;
        while i < q.len() {
            if q[i].due_ns <= now {
                done.push(q.swap_remove(i));
            } else {
                i += 1;
            }
        }
        done.sort_by_key(|c| (c.due_ns, c.cid));
        for c in &done {
            let (nsid, lba) = (c.cmd.nsid, c.cmd.slba());
            match NvmOpcode::from_u8(c.cmd.opcode) {
                Some(NvmOpcode::Write) if self.late_writes_ns == 0 => self.land(nsid, lba, &c.data),
                Some(NvmOpcode::Write) => self.landing.push((now + self.late_writes_ns, nsid, lba, c.data.clone())),
                Some(NvmOpcode::DatasetManagement) => {
                    for r in DsmRange::parse_list(&c.data, 1).unwrap_or_default() {
                        for b in r.slba..r.slba + r.length as u64 {
                            self.blocks.remove(&(nsid, b));
                        }
                    }
                }
                _ => {}
            }
            let completion = Completion {
                cid: c.cid,
                sq_id: queue as u16 + 1,
                status: Status::SUCCESS.to_field() << 1,
                ..Completion::default()
            };
            let data = if NvmOpcode::from_u8(c.cmd.opcode) == Some(NvmOpcode::Read) { &c.data[..] } else { &[] };
            f(Reaped { completion, data, metadata: &[] });
            self.queues[queue].2.push(c.cid);
        }
        Ok(done.len())
    }

    fn expired(&mut self, _: usize) -> Option<DeviceError> {
        None
    }
    fn now_ns(&mut self) -> u64 {
        self.now
    }
    fn idle_until(&mut self, deadline_ns: u64) -> Result<(), DeviceError> {
        let next = self.next_event().min(deadline_ns);
        if next == u64::MAX {
            return Err(DeviceError::Driver("the fake has nothing to wait for".into()));
        }
        self.advance(next);
        Ok(())
    }
    fn simulated_clock(&self) -> bool {
        true
    }
    fn close(self: Box<Self>) -> Result<(), DeviceError> {
        Ok(())
    }
}
