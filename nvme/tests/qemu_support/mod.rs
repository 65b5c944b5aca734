//! Shared by the QEMU integration tests: finding QEMU (a test fails, never skips, when
//! it is missing), machine configurations, and a deliberately small hand-rolled NVMe
//! queue pair that talks to a controller through any `Transport`, so the transport is
//! tested on its own, without the host driver.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nvme::spec::registers::{doorbell, offset, Aqa, Cap, Cc, Csts};
use nvme::spec::{AdminOpcode, Command, Completion, NvmOpcode};
use nvme::transport::qemu::{require_binary, Disk, QemuConfig};
use nvme::transport::{DmaRegion, Transport};

/// The QEMU binary, or a failing test that says how to install it.
pub fn qemu_binary() -> PathBuf {
    let binary = PathBuf::from("qemu-system-x86_64");
    require_binary(&binary).unwrap_or_else(|e| panic!("these tests need QEMU: {e}"));
    binary
}

/// One NVMe controller on the root bus with one 64 MiB namespace of 4 KiB blocks.
pub fn one_controller(serial: &str) -> QemuConfig {
    QemuConfig {
        binary: qemu_binary(),
        disks: vec![Disk { node_name: "ns1".into(), size_bytes: 64 << 20 }],
        extra_args: args(&[
            "-device",
            &format!("nvme,serial={serial},id=nvme0"),
            "-device",
            "nvme-ns,drive=ns1,nsid=1,logical_block_size=4096,physical_block_size=4096",
        ]),
        label: "test".into(),
        ..QemuConfig::default()
    }
}

pub fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Whether the process `pid` still runs. A zombie does not: it is dead and only waits
/// for its parent (init, once nvtest itself has exited) to collect its status.
pub fn process_exists(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()), Some("Z" | "X")),
        Err(_) => false,
    }
}

/// Asserts that nothing of a machine is left: its QEMU, its temp dir, its RAM file.
pub fn assert_cleaned(pid: u32, dir: &Path, ram: &Path) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while process_exists(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!process_exists(pid), "QEMU pid {pid} is still there");
    assert!(!dir.exists(), "{} is still there", dir.display());
    assert!(!ram.exists(), "{} is still there", ram.display());
}

/// Where the hand-rolled driver keeps things, as offsets into the transport's DMA region.
pub mod layout {
    pub const ASQ: u64 = 0x0000;
    pub const ACQ: u64 = 0x1000;
    pub const IOSQ: u64 = 0x2000;
    pub const IOCQ: u64 = 0x3000;
    pub const IDENTIFY: u64 = 0x4000;
    /// Data buffers, 4 KiB each, one per outstanding command.
    pub const DATA: u64 = 0x10000;
}

pub type Result<T> = std::result::Result<T, String>;

fn t_err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A submission/completion queue pair in DMA memory (64-byte SQEs, 16-byte CQEs).
pub struct Queue {
    pub qid: u16,
    sq: u64,
    cq: u64,
    depth: u16,
    tail: u16,
    head: u16,
    phase: bool,
    dstrd: u8,
}

impl Queue {
    fn new(qid: u16, sq: u64, cq: u64, depth: u16, dstrd: u8) -> Self {
        Queue { qid, sq, cq, depth, tail: 0, head: 0, phase: true, dstrd }
    }

    /// Places `cmd` in the next submission slot (no doorbell).
    pub fn push(&mut self, dma: &DmaRegion, cmd: &Command) -> Result<()> {
        dma.write_obj(self.sq + self.tail as u64 * 64, cmd).map_err(t_err)?;
        self.tail = (self.tail + 1) % self.depth;
        Ok(())
    }

    /// Writes the SQ tail doorbell.
    pub fn ring(&self, t: &mut dyn Transport) -> Result<()> {
        t.mmio_write32(doorbell(self.qid, false, self.dstrd), self.tail as u32).map_err(t_err)
    }

    /// Waits for `n` completions, then writes the CQ head doorbell once.
    pub fn reap(&mut self, t: &mut dyn Transport, n: usize, timeout: Duration) -> Result<Vec<Completion>> {
        let deadline = Instant::now() + timeout;
        let mut done = Vec::with_capacity(n);
        while done.len() < n {
            let entry = self.cq + self.head as u64 * 16;
            let status = t.dma().load_u16_acquire(entry + 14).map_err(t_err)?;
            if (status & 1 != 0) != self.phase {
                if Instant::now() > deadline {
                    return Err(format!("queue {}: {} of {n} completions after {timeout:?}", self.qid, done.len()));
                }
                t.idle().map_err(t_err)?;
                continue;
            }
            done.push(t.dma().read_obj::<Completion>(entry).map_err(t_err)?);
            self.head = (self.head + 1) % self.depth;
            if self.head == 0 {
                self.phase = !self.phase;
            }
        }
        t.mmio_write32(doorbell(self.qid, true, self.dstrd), self.head as u32).map_err(t_err)?;
        Ok(done)
    }
}

/// A controller brought up by hand: admin queue, and after [`Self::create_io_queue`],
/// one I/O queue pair.
pub struct Hand {
    pub cap: Cap,
    pub admin: Queue,
    pub io: Option<Queue>,
    next_cid: u16,
}

/// Waits until CSTS.RDY equals `ready`, within CAP.TO.
pub fn wait_ready(t: &mut dyn Transport, cap: Cap, ready: bool) -> Result<Duration> {
    let start = Instant::now();
    let limit = Duration::from_millis(cap.timeout_ms().max(500));
    loop {
        let csts = Csts::from_bits(t.mmio_read32(offset::CSTS).map_err(t_err)?);
        if csts.cfs() {
            return Err("CSTS.CFS set".into());
        }
        if csts.rdy() == ready {
            return Ok(start.elapsed());
        }
        if start.elapsed() > limit {
            return Err(format!("CSTS.RDY did not become {ready} within CAP.TO ({limit:?})"));
        }
        t.idle().map_err(t_err)?;
    }
}

impl Hand {
    /// Disables the controller, sets up a `depth`-entry admin queue and enables it.
    pub fn bring_up(t: &mut dyn Transport, depth: u16) -> Result<Hand> {
        let cap = Cap::from_bits(t.mmio_read64(offset::CAP).map_err(t_err)?);
        let cc = Cc::from_bits(t.mmio_read32(offset::CC).map_err(t_err)?);
        if cc.en() {
            t.mmio_write32(offset::CC, cc.with_en(false).into_bits()).map_err(t_err)?;
        }
        wait_ready(t, cap, false)?;
        let base = t.dma().base();
        t.dma().fill(base, 0x4000, 0).map_err(t_err)?;
        let aqa = Aqa::new().with_asqs(depth - 1).with_acqs(depth - 1);
        t.mmio_write32(offset::AQA, aqa.into_bits()).map_err(t_err)?;
        t.mmio_write64(offset::ASQ, base + layout::ASQ).map_err(t_err)?;
        t.mmio_write64(offset::ACQ, base + layout::ACQ).map_err(t_err)?;
        let cc = Cc::new().with_en(true).with_iosqes(6).with_iocqes(4);
        t.mmio_write32(offset::CC, cc.into_bits()).map_err(t_err)?;
        wait_ready(t, cap, true)?;
        let admin = Queue::new(0, base + layout::ASQ, base + layout::ACQ, depth, cap.dstrd());
        Ok(Hand { cap, admin, io: None, next_cid: 0 })
    }

    fn cid(&mut self) -> u16 {
        self.next_cid = self.next_cid.wrapping_add(1);
        self.next_cid
    }

    /// Runs one admin command and returns its completion (which must be successful).
    pub fn admin(&mut self, t: &mut dyn Transport, mut cmd: Command) -> Result<Completion> {
        cmd.cid = self.cid();
        self.admin.push(t.dma(), &cmd)?;
        self.admin.ring(t)?;
        let cqe = self.admin.reap(t, 1, Duration::from_secs(5))?[0];
        if cqe.cid != cmd.cid || !cqe.status().is_success() {
            return Err(format!("admin opcode {:#x}: completion {cqe:?}", cmd.opcode));
        }
        Ok(cqe)
    }

    /// Identify Controller into the identify buffer; returns the 4 KiB.
    pub fn identify_controller(&mut self, t: &mut dyn Transport) -> Result<Vec<u8>> {
        let buf = t.dma().base() + layout::IDENTIFY;
        let mut cmd = Command::admin(AdminOpcode::Identify);
        cmd.prp1 = buf;
        cmd.cdw10 = 1;
        self.admin(t, cmd)?;
        let mut data = vec![0u8; 4096];
        t.dma().read(buf, &mut data).map_err(t_err)?;
        Ok(data)
    }

    /// Creates I/O CQ 1 and SQ 1 of `depth` entries.
    pub fn create_io_queue(&mut self, t: &mut dyn Transport, depth: u16) -> Result<()> {
        let base = t.dma().base();
        t.dma().fill(base + layout::IOSQ, 0x2000, 0).map_err(t_err)?;
        let mut cq = Command::admin(AdminOpcode::CreateIoCompletionQueue);
        cq.prp1 = base + layout::IOCQ;
        cq.cdw10 = ((depth as u32 - 1) << 16) | 1;
        cq.cdw11 = 1; // physically contiguous, no interrupts
        self.admin(t, cq)?;
        let mut sq = Command::admin(AdminOpcode::CreateIoSubmissionQueue);
        sq.prp1 = base + layout::IOSQ;
        sq.cdw10 = ((depth as u32 - 1) << 16) | 1;
        sq.cdw11 = (1 << 16) | 1; // CQ 1, physically contiguous
        self.admin(t, sq)?;
        self.io = Some(Queue::new(1, base + layout::IOSQ, base + layout::IOCQ, depth, self.cap.dstrd()));
        Ok(())
    }

    /// Runs `total` 4 KiB reads or writes (one block of 4 KiB each, LBA = index) on the
    /// I/O queue, `qd` at a time: fill, one doorbell, reap all, one CQ doorbell.
    pub fn io_batch(&mut self, t: &mut dyn Transport, opcode: NvmOpcode, total: u64, qd: u16) -> Result<()> {
        let base = t.dma().base();
        let mut io = self.io.take().ok_or("no I/O queue")?;
        let mut lba = 0u64;
        let result = (|| {
            while lba < total {
                let n = (total - lba).min(qd as u64) as u16;
                for i in 0..n {
                    let mut cmd = Command::nvm(opcode, 1).with_slba(lba + i as u64);
                    cmd.cid = i;
                    cmd.prp1 = base + layout::DATA + i as u64 * 4096;
                    io.push(t.dma(), &cmd)?;
                }
                io.ring(t)?;
                for cqe in io.reap(t, n as usize, Duration::from_secs(10))? {
                    if !cqe.status().is_success() {
                        return Err(format!("{opcode:?} cid {}: {cqe:?}", cqe.cid));
                    }
                }
                lba += n as u64;
            }
            Ok(())
        })();
        self.io = Some(io);
        result
    }
}
