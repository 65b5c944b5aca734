//! The NVM command set (NVMe 1.4 §6): Flush, Write, Read, Write Uncorrectable, Compare,
//! Write Zeroes, Dataset Management and Verify, and the data path between host memory and
//! media.
//!
//! Data moves directly between media chunks and the host memory segments of the command's
//! PRPs: no buffer is allocated per command. Every input is checked in the order a
//! controller checks it: the namespace (Invalid Namespace or Format), the transfer size
//! (MDTS: Invalid Field in Command), the LBA range (LBA Out of Range), then the media.

use super::media::{OutOfMedia, Run};
use super::namespace::{Layout, Namespace, Region};
use super::{Quirk, Subsystem, NSID_ALL};
use crate::exec::{DataPointer, Done};
use crate::profile::{DlfeatSetting, OptionalCommand};
use nvme::spec::nvm::{DsmFields, DsmRange, LbaFields};
use nvme::spec::{Command, NvmOpcode, Status, Version};
use nvme::transport::DmaRegion;

/// The writes quirk `port-stale-data` remembers.
pub const PORT_STALE_WRITES: usize = 256;

/// Quirk `port-stale-data`: what one write overwrote (the bytes of the data media at
/// `offset` of namespace `nsid`), and the controller it came through.
#[derive(Debug)]
pub struct PortStale {
    writer: u16,
    nsid: u32,
    offset: u64,
    old: Vec<u8>,
}

/// Quirk `torn-read-under-write`: a write in flight, named by its write-back token, and
/// the first half of each of its blocks as it was before (data media offset, bytes).
#[derive(Debug)]
pub struct TornWrite {
    pub(super) token: u64,
    nsid: u32,
    halves: Vec<(u64, Vec<u8>)>,
}

/// How a command reaches its namespace.
enum Target {
    /// An active namespace (or, under a quirk, an allocated inactive one).
    Namespace(u32),
    /// No namespace, but a quirk accepts the command anyway: it succeeds doing nothing
    /// (a read returns zeroes).
    Nothing,
}

impl Subsystem {
    /// Runs one NVM command.
    pub(super) fn nvm_command(&mut self, cmd: &Command, data: &dyn DataPointer) -> Done {
        let supported = |c| self.supports(c);
        match NvmOpcode::from_u8(cmd.opcode) {
            Some(NvmOpcode::Flush) => self.flush(cmd),
            Some(NvmOpcode::Write) => self.write(cmd, data),
            Some(NvmOpcode::Read) => self.read(cmd, data),
            Some(NvmOpcode::WriteUncorrectable) if supported(OptionalCommand::WriteUncorrectable) => {
                self.write_uncorrectable(cmd)
            }
            Some(NvmOpcode::Compare) if supported(OptionalCommand::Compare) => self.compare(cmd, data),
            Some(NvmOpcode::WriteZeroes) if supported(OptionalCommand::WriteZeroes) => self.write_zeroes(cmd),
            Some(NvmOpcode::DatasetManagement) if supported(OptionalCommand::DatasetManagement) => {
                self.dataset_management(cmd, data)
            }
            Some(NvmOpcode::Verify) if supported(OptionalCommand::Verify) => self.verify(cmd),
            Some(NvmOpcode::ReservationRegister) if self.reservations().is_some() => {
                self.reservation_register(cmd, data)
            }
            Some(NvmOpcode::ReservationAcquire) if self.reservations().is_some() => self.reservation_acquire(cmd, data),
            Some(NvmOpcode::ReservationRelease) if self.reservations().is_some() => self.reservation_release(cmd, data),
            Some(NvmOpcode::ReservationReport) if self.reservations().is_some() => self.reservation_report(cmd, data),
            _ => Done::err(Status::INVALID_COMMAND_OPCODE),
        }
    }

    /// The namespace an I/O command addresses: active, or Invalid Namespace or Format
    /// (§6.1, Figure 128). NSID 0, FFFFFFFFh and NSIDs above NN are never namespaces.
    fn io_target(&self, nsid: u32) -> Result<Target, Status> {
        if self.is_active(nsid) {
            return Ok(Target::Namespace(nsid));
        }
        if self.quirks.has(Quirk::InactiveNamespaceIoAccepted)
            && (self.is_valid_nsid(nsid) || nsid == 0 || nsid == NSID_ALL)
        {
            // Quirk: I/O to an inactive NSID, NSID 0 or NSID FFFFFFFFh succeeds (§6.1 /
            // Figure 128 broken): an allocated namespace is used as if attached, anything
            // else reads as zeroes and drops writes.
            return Ok(match self.namespace(nsid) {
                Some(_) => Target::Namespace(nsid),
                None => Target::Nothing,
            });
        }
        // NVMe 1.4 §6.1.5 (NSID and Namespace Usage): an inactive NSID (valid, not
        // attached) gets Invalid Field in Command; an invalid one (0, above NN, or
        // FFFFFFFFh where the command takes no broadcast) Invalid Namespace or Format.
        // Earlier revisions answer Invalid Namespace or Format for both.
        if self.is_valid_nsid(nsid) && self.version() >= Version::V1_4 {
            return Err(Status::INVALID_FIELD);
        }
        Err(Status::INVALID_NAMESPACE_OR_FORMAT)
    }

    /// The LBA range check (§6.1: LBAs 0 to NSZE − 1 exist; Figure 128: LBA Out of
    /// Range). `Ok(true)` when the range reaches past NSZE and a quirk accepts it anyway.
    fn check_range(&self, ns: &Namespace, slba: u64, nlb: u64) -> Result<bool, Status> {
        if !ns.contains(slba, nlb) {
            if self.quirks.has(Quirk::LbaPastNszeAccepted) {
                // Quirk: a range reaching past NSZE succeeds (Figure 128 LBA Out of Range broken).
                return Ok(true);
            }
            return Err(Status::LBA_OUT_OF_RANGE);
        }
        if self.quirks.has(Quirk::LastLbaRejected) && slba + nlb == ns.nsze {
            // Quirk: off by one, a range including LBA NSZE − 1 is out of range (§6.1 broken).
            return Err(Status::LBA_OUT_OF_RANGE);
        }
        Ok(false)
    }

    /// Checks a transfer of `bytes` against MDTS (Figure 247: a larger command is
    /// aborted with Invalid Field in Command).
    fn check_mdts(&self, bytes: u64) -> Result<(), Status> {
        match self.max_transfer_bytes() {
            Some(max) if bytes > max && !self.quirks.has(Quirk::MdtsNotEnforced) => Err(Status::INVALID_FIELD),
            // Quirk `mdts-not-enforced`: the limit is advertised but not applied.
            _ => Ok(()),
        }
    }

    /// Flush (§6.8): every Write completed to the namespace is made durable
    /// ([`super::power`]). NSID FFFFFFFFh flushes every attached namespace on 1.4, whose
    /// VWC bits 2:1 report 11b; on earlier versions it is not a namespace.
    fn flush(&mut self, cmd: &Command) -> Done {
        if cmd.nsid == NSID_ALL && self.version() >= Version::V1_4 {
            self.flush_cache(None);
            return Done::ok();
        }
        match self.io_target(cmd.nsid) {
            // Quirk `flush-rejected` (§6.8 broken).
            Ok(Target::Namespace(_)) if self.quirks.has(Quirk::FlushRejected) => Done::err(Status::INVALID_FIELD),
            Ok(Target::Namespace(nsid)) => {
                self.flush_cache(Some(nsid));
                Done::ok()
            }
            Ok(Target::Nothing) => Done::ok(),
            Err(s) => Done::err(s),
        }
    }

    /// The checks Read, Write and Compare share: namespace, MDTS, LBA range. Returns the
    /// namespace (or nothing to do) and the block count.
    fn rw_checks(&self, cmd: &Command) -> Result<(Target, u64, bool), Status> {
        let target = self.io_target(cmd.nsid)?;
        let nlb = cmd.nlb() as u64 + 1;
        let Target::Namespace(nsid) = target else {
            return Ok((Target::Nothing, nlb, false));
        };
        let Some(ns) = self.namespace(nsid) else { return Err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        self.check_mdts(nlb * ns.format.host_block_size())?;
        let past_end = self.check_range(ns, cmd.slba(), nlb)?;
        Ok((target, nlb, past_end))
    }

    /// Read (§6.9).
    fn read(&mut self, cmd: &Command, data: &dyn DataPointer) -> Done {
        let (target, nlb, past_end) = match self.rw_checks(cmd) {
            Ok(t) => t,
            Err(s) => return Done::err(s),
        };
        let Target::Namespace(nsid) = target else {
            // Quirk `inactive-namespace-io-accepted`, no namespace there: the read returns
            // zeroes, as many blocks of the smallest LBA format as asked for.
            let smallest = self.profile.lba_formats.iter().map(|f| f.lbads as u64).min().unwrap_or(512);
            return match zero_host(data, nlb * smallest) {
                Ok(()) => Done::ok(),
                Err(s) => Done::err(s),
            };
        };
        let Some(ns) = self.namespace(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        let slba = cmd.slba();
        let len = nlb * ns.format.host_block_size();
        if past_end {
            // Quirk `lba-past-nsze-accepted`: the whole read returns zeroes.
            return match zero_host(data, len) {
                Ok(()) => Done::ok(),
                Err(s) => Done::err(s),
            };
        }
        if ns.any_uncorrectable(slba, nlb) {
            self.health.media_errors += 1;
            return Done::err(Status::UNRECOVERED_READ_ERROR);
        }
        let stale = self.quirks.has(Quirk::StaleReadAfterWrite) && !self.stale.is_empty();
        if stale {
            // Quirk `stale-read-after-write`: the data a write replaced is read once more.
            self.swap_stale(nsid, slba, nlb);
        }
        let port_stale = self.quirks.has(Quirk::PortStaleData) && !self.port_stale.is_empty();
        if port_stale {
            // Quirk `port-stale-data`: another port's writes are not seen (§2.4.1 broken).
            self.swap_port_stale(nsid, slba, nlb);
        }
        let torn = self.quirks.has(Quirk::TornReadUnderWrite) && !self.torn.is_empty();
        if torn {
            // Quirk `torn-read-under-write`: half of each block a write in flight changes is old.
            self.swap_torn(nsid, false);
        }
        let Some(ns) = self.namespace(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        let mut result = media_to_host(ns, slba, len, data);
        if result.is_ok() && separate_metadata(ns) {
            result = metadata_to_host(ns, slba, nlb, data.dma(), cmd.mptr);
        }
        if torn {
            self.swap_torn(nsid, true);
        }
        if port_stale {
            self.swap_port_stale(nsid, slba, nlb);
        }
        if stale {
            self.swap_stale(nsid, slba, nlb);
            self.drop_stale(nsid, slba, nlb);
        }
        let Some(ns) = self.namespace(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        match result {
            Ok(()) => {
                self.health.bytes_read += self.counted_bytes(nlb, ns.format.data_size, Quirk::DataUnitsReadInBlocks);
                self.health.host_read_commands += 1;
                Done::ok()
            }
            Err(s) => Done::err(s),
        }
    }

    /// Write (§6.15). What it replaces goes into the write-back log first, durable at
    /// completion with FUA (CDW12 bit 30) or without a volatile write cache.
    fn write(&mut self, cmd: &Command, data: &dyn DataPointer) -> Done {
        let fua = LbaFields::from_command(cmd).fua;
        let (target, nlb, past_end) = match self.rw_checks(cmd) {
            Ok(t) => t,
            Err(s) => return Done::err(s),
        };
        let Target::Namespace(nsid) = target else { return Done::ok() };
        if past_end {
            // Quirk `lba-past-nsze-accepted`: the write is dropped.
            return Done::ok();
        }
        let slba = cmd.slba();
        if self.quirks.has(Quirk::StaleReadAfterWrite) {
            self.keep_stale(nsid, slba, nlb);
        }
        if self.quirks.has(Quirk::PortStaleData) {
            self.keep_port_stale(nsid, slba, nlb);
        }
        let keep_metadata = !self.quirks.has(Quirk::MetadataNotKept);
        self.begin_write(nsid, slba, nlb, fua);
        if self.quirks.has(Quirk::TornReadUnderWrite) {
            self.keep_torn(nsid, slba, nlb);
        }
        let Some(ns) = self.namespace_mut(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        let len = nlb * ns.format.host_block_size();
        let mut result = host_to_media(ns, slba, len, data);
        // Quirk `metadata-not-kept`: the separate metadata is not stored.
        if result.is_ok() && separate_metadata(ns) && keep_metadata {
            result = host_to_metadata(ns, slba, nlb, data.dma(), cmd.mptr);
        }
        if let Err(s) = result {
            return Done::err(s);
        }
        ns.mark_written(slba, nlb);
        let data_size = ns.format.data_size;
        if self.quirks.has(Quirk::NamespaceWriteLeak) {
            self.leak_write(nsid, slba, nlb);
        }
        self.health.bytes_written += self.counted_bytes(nlb, data_size, Quirk::DataUnitsWrittenInBlocks);
        // Quirk `host-writes-omit-fua`: a write with FUA goes uncounted (§5.14.1.2 broken).
        if !(fua && self.quirks.has(Quirk::HostWritesOmitFua)) {
            self.health.host_write_commands += 1;
        }
        Done::ok()
    }

    /// The user-data bytes `nlb` blocks of `data_size` bytes add to a SMART data-unit
    /// counter (metadata excluded); with `quirk` on, each block counts as 512 bytes
    /// (quirks `data-units-read-in-blocks`, `data-units-written-in-blocks`: §5.14.1.2
    /// broken for LBA sizes other than 512).
    fn counted_bytes(&self, nlb: u64, data_size: u32, quirk: Quirk) -> u128 {
        let per_block = if self.quirks.has(quirk) { 512 } else { data_size as u64 };
        (nlb * per_block) as u128
    }

    /// Quirk `stale-read-after-write`: remembers what a write of `nlb` blocks at `slba`
    /// is about to overwrite (replacing an older memory of the same range).
    fn keep_stale(&mut self, nsid: u32, slba: u64, nlb: u64) {
        let Some(ns) = self.namespace(nsid) else { return };
        let (offset, len) = ns.layout().data_extent(slba, nlb);
        let mut old = vec![0u8; len as usize];
        if ns.media(Region::Data).read(offset, &mut old).is_ok() {
            self.stale.retain(|(n, o, b)| !(*n == nsid && overlaps(*o, b.len() as u64, offset, len)));
            self.stale.push((nsid, offset, old));
        }
    }

    /// Exchanges the remembered old data overlapping a read with what the media holds
    /// (twice restores it).
    fn swap_stale(&mut self, nsid: u32, slba: u64, nlb: u64) {
        let Some(index) = nsid.checked_sub(1) else { return };
        let Some(Some(ns)) = self.namespaces.get_mut(index as usize) else { return };
        let (offset, len) = ns.layout().data_extent(slba, nlb);
        for (n, o, bytes) in self.stale.iter_mut() {
            if *n == nsid && overlaps(*o, bytes.len() as u64, offset, len) {
                swap_media(ns, *o, bytes);
            }
        }
    }

    /// Quirk `port-stale-data`: remembers what a write of `nlb` blocks at `slba`, through
    /// the controller running it, is about to overwrite (forgetting older writes of the
    /// same blocks, and the oldest beyond [`PORT_STALE_WRITES`]).
    fn keep_port_stale(&mut self, nsid: u32, slba: u64, nlb: u64) {
        let Some(ns) = self.namespace(nsid) else { return };
        let (offset, len) = ns.layout().data_extent(slba, nlb);
        let mut old = vec![0u8; len as usize];
        if ns.media(Region::Data).read(offset, &mut old).is_ok() {
            self.forget_port_stale_extent(nsid, offset, len);
            let writer = self.controller.cntlid;
            self.port_stale.push_back(PortStale { writer, nsid, offset, old });
            if self.port_stale.len() > PORT_STALE_WRITES {
                self.port_stale.pop_front();
            }
        }
    }

    /// Exchanges what the media holds with the old data of the remembered writes of other
    /// controllers overlapping a read (twice restores it). The remembered writes never
    /// overlap one another.
    fn swap_port_stale(&mut self, nsid: u32, slba: u64, nlb: u64) {
        let reader = self.controller.cntlid;
        let Some(index) = nsid.checked_sub(1) else { return };
        let Some(Some(ns)) = self.namespaces.get_mut(index as usize) else { return };
        let (offset, len) = ns.layout().data_extent(slba, nlb);
        for e in self.port_stale.iter_mut() {
            if e.writer != reader && e.nsid == nsid && overlaps(e.offset, e.old.len() as u64, offset, len) {
                swap_media(ns, e.offset, &mut e.old);
            }
        }
    }

    /// Quirk `port-stale-data`: the writes remembered in a byte extent of `nsid`'s data
    /// media are forgotten (the blocks changed otherwise since).
    fn forget_port_stale_extent(&mut self, nsid: u32, offset: u64, len: u64) {
        self.port_stale.retain(|e| !(e.nsid == nsid && overlaps(e.offset, e.old.len() as u64, offset, len)));
    }

    /// Quirk `port-stale-data`: `nlb` blocks from `slba` changed without a Write (Write
    /// Zeroes, deallocation, Write Uncorrectable): no stale copy of them is kept.
    pub(super) fn forget_port_stale_blocks(&mut self, nsid: u32, slba: u64, nlb: u64) {
        if self.port_stale.is_empty() {
            return;
        }
        let Some(ns) = self.namespace(nsid) else { return };
        let (offset, len) = ns.layout().data_extent(slba, nlb.min(ns.nsze.saturating_sub(slba)));
        self.forget_port_stale_extent(nsid, offset, len);
    }

    /// Quirk `port-stale-data`: namespace `nsid` was formatted, erased or deleted (every
    /// namespace for [`NSID_ALL`]): nothing remembered of its old writes (nor, for
    /// `torn-read-under-write`, of the writes in flight).
    pub(super) fn forget_port_stale(&mut self, nsid: u32) {
        self.port_stale.retain(|e| nsid != NSID_ALL && e.nsid != nsid);
        self.torn.retain(|t| nsid != NSID_ALL && t.nsid != nsid);
    }

    /// Quirk `torn-read-under-write`: remembers the first half of each block the write
    /// just begun (the newest write-back change) is about to overwrite.
    fn keep_torn(&mut self, nsid: u32, slba: u64, nlb: u64) {
        let Some(token) = self.power.pending else { return };
        let Some(ns) = self.namespace(nsid) else { return };
        let half = ns.format.data_size as u64 / 2;
        let halves = (slba..slba.saturating_add(nlb).min(ns.nsze))
            .filter_map(|lba| {
                let (offset, _) = ns.layout().data_extent(lba, 1);
                let mut old = vec![0u8; half as usize];
                ns.media(Region::Data).read(offset, &mut old).ok().map(|()| (offset, old))
            })
            .collect();
        self.torn.push(TornWrite { token, nsid, halves });
    }

    /// Quirk `torn-read-under-write`: exchanges the first halves of the blocks of `nsid`'s
    /// writes in flight with what they held before (twice restores them). Writes in
    /// flight may overlap (two hosts): `undo` swaps in the reverse order, so that it
    /// restores the media whatever they share.
    fn swap_torn(&mut self, nsid: u32, undo: bool) {
        let Some(index) = nsid.checked_sub(1) else { return };
        let Some(Some(ns)) = self.namespaces.get_mut(index as usize) else { return };
        let mut halves: Vec<&mut (u64, Vec<u8>)> =
            self.torn.iter_mut().filter(|t| t.nsid == nsid).flat_map(|t| t.halves.iter_mut()).collect();
        if undo {
            halves.reverse();
        }
        for (offset, old) in halves {
            swap_media(ns, *offset, old);
        }
    }

    /// The stale data overlapping a read has been read once: forgotten.
    fn drop_stale(&mut self, nsid: u32, slba: u64, nlb: u64) {
        let Some(ns) = self.namespace(nsid) else { return };
        let (offset, len) = ns.layout().data_extent(slba, nlb);
        self.stale.retain(|(n, o, b)| !(*n == nsid && overlaps(*o, b.len() as u64, offset, len)));
    }

    /// Quirk `namespace-write-leak`: the blocks just written to `nsid` are also written at
    /// the same LBAs of the next active namespace (§6.1 namespace independence broken).
    fn leak_write(&mut self, nsid: u32, slba: u64, nlb: u64) {
        let Some(next) = self.active_nsids().into_iter().find(|n| *n > nsid) else { return };
        let (Some(src), Some(dst)) = (nsid.checked_sub(1), next.checked_sub(1)) else { return };
        let (low, high) = self.namespaces.split_at_mut(dst as usize);
        let (Some(Some(from)), Some(Some(to))) = (low.get(src as usize), high.first_mut()) else { return };
        let size = from.format.data_size.min(to.format.data_size) as u64;
        let nlb = nlb.min(to.nsze.saturating_sub(slba));
        for lba in slba..slba + nlb {
            let (src_off, dst_off) = (lba * from.lba_stride, lba * to.lba_stride);
            let mut at = dst_off;
            let copied = from.media(Region::Data).read_runs(src_off, size, &mut |run| -> Result<(), OutOfMedia> {
                let n = match run {
                    Run::Bytes(b) => to.media_mut(Region::Data).write(at, b).map(|_| b.len()),
                    Run::Fill(byte, n) => to.media_mut(Region::Data).fill(at, n as u64, byte).map(|_| n),
                }?;
                at += n as u64;
                Ok(())
            });
            if !matches!(copied, Ok(Ok(()))) {
                return;
            }
            to.mark_written(lba, 1);
        }
    }

    /// Compare (§6.5): Compare Failure when any byte of data or metadata differs.
    fn compare(&mut self, cmd: &Command, data: &dyn DataPointer) -> Done {
        let (target, nlb, past_end) = match self.rw_checks(cmd) {
            Ok(t) => t,
            Err(s) => return Done::err(s),
        };
        let Target::Namespace(nsid) = target else { return Done::ok() };
        if past_end {
            return Done::ok();
        }
        let Some(ns) = self.namespace(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        let slba = cmd.slba();
        if ns.any_uncorrectable(slba, nlb) {
            self.health.media_errors += 1;
            return Done::err(Status::UNRECOVERED_READ_ERROR);
        }
        let len = nlb * ns.format.host_block_size();
        let mut same = compare_host(ns, slba, len, data);
        if matches!(same, Ok(true)) && separate_metadata(ns) {
            same = compare_metadata(ns, slba, nlb, data.dma(), cmd.mptr);
        }
        match same {
            Ok(equal) => {
                self.health.bytes_read += self.counted_bytes(nlb, ns.format.data_size, Quirk::DataUnitsReadInBlocks);
                // Quirk `host-reads-omit-compare`: Compare is not a read here (§5.14.1.2 broken).
                if !self.quirks.has(Quirk::HostReadsOmitCompare) {
                    self.health.host_read_commands += 1;
                }
                if equal || self.quirks.has(Quirk::CompareAlwaysSucceeds) {
                    // Quirk `compare-always-succeeds`: a mismatch is not reported (§6.5 broken).
                    Done::ok()
                } else {
                    Done::err(Status::COMPARE_FAILURE)
                }
            }
            Err(s) => Done::err(s),
        }
    }

    /// The namespace, SLBA and block count of a command that moves no data (Write
    /// Uncorrectable, Verify), checked as a controller checks them (namespace, then range);
    /// `None` when a quirk has it succeed doing nothing (no namespace there, or a range
    /// past NSZE accepted).
    fn untransferred_range(&self, cmd: &Command) -> Result<Option<(u32, u64, u64)>, Status> {
        let Target::Namespace(nsid) = self.io_target(cmd.nsid)? else { return Ok(None) };
        let (slba, nlb) = (cmd.slba(), cmd.nlb() as u64 + 1);
        let ns = self.namespace(nsid).ok_or(Status::INVALID_NAMESPACE_OR_FORMAT)?;
        // Quirk `lba-past-nsze-accepted`: nothing done.
        let past_end = self.check_range(ns, slba, nlb)?;
        Ok((!past_end).then_some((nsid, slba, nlb)))
    }

    /// Verify (§6.15, NVMe 1.4): the blocks are read on the controller's side, nothing is
    /// transferred (so MDTS does not apply); a block written uncorrectable fails it with
    /// Unrecovered Read Error. Protection information is not checked (PRINFO ignored).
    fn verify(&mut self, cmd: &Command) -> Done {
        let (nsid, slba, nlb) = match self.untransferred_range(cmd) {
            Ok(Some(range)) => range,
            Ok(None) => return Done::ok(),
            Err(s) => return Done::err(s),
        };
        let Some(ns) = self.namespace(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        if ns.any_uncorrectable(slba, nlb) {
            self.health.media_errors += 1;
            return Done::err(Status::UNRECOVERED_READ_ERROR);
        }
        Done::ok()
    }

    /// Write Uncorrectable (§6.14): the blocks read back with Unrecovered Read Error
    /// until written again.
    fn write_uncorrectable(&mut self, cmd: &Command) -> Done {
        let (nsid, slba, nlb) = match self.untransferred_range(cmd) {
            Ok(Some(range)) => range,
            Ok(None) => return Done::ok(),
            Err(s) => return Done::err(s),
        };
        self.settle(nsid, slba, nlb);
        let Some(ns) = self.namespace_mut(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        ns.mark_uncorrectable(slba, nlb);
        self.health.host_write_commands += 1;
        Done::ok()
    }

    /// Write Zeroes (§6.16): the blocks read back as zeroes. With DEAC (CDW12 bit 25,
    /// NVMe 1.3 and later; DLFEAT bit 3) and a read behaviour of zeroes, they are
    /// deallocated instead of written.
    fn write_zeroes(&mut self, cmd: &Command) -> Done {
        if self.quirks.has(Quirk::WriteZeroesNotImplemented) {
            // Quirk: ONCS bit 3 set, the command unknown (Figure 247 ONCS broken).
            return Done::err(Status::INVALID_COMMAND_OPCODE);
        }
        let nsid = match self.io_target(cmd.nsid) {
            Ok(Target::Namespace(nsid)) => nsid,
            Ok(Target::Nothing) => return Done::ok(),
            Err(s) => return Done::err(s),
        };
        let nlb = cmd.nlb() as u64 + 1;
        let slba = cmd.slba();
        let deac = self.version() >= Version::V1_3 && LbaFields::from_command(cmd).deac && self.fill_byte() == 0;
        let ignored = self.quirks.has(Quirk::WriteZeroesIgnored);
        let Some(ns) = self.namespace(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        match self.check_range(ns, slba, nlb) {
            Ok(false) => {}
            // Quirk `lba-past-nsze-accepted`: nothing written.
            Ok(true) => return Done::ok(),
            Err(s) => return Done::err(s),
        }
        if ignored {
            // Quirk `write-zeroes-ignored`: success, data left in place (§6.16 broken).
            return Done::ok();
        }
        self.settle(nsid, slba, nlb);
        let Some(ns) = self.namespace_mut(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        let result = if deac {
            ns.deallocate(slba, nlb, false)
        } else {
            ns.fill_blocks(slba, nlb, 0).map(|_| ns.mark_written(slba, nlb))
        };
        match result {
            Ok(()) => {
                self.health.host_write_commands += 1;
                Done::ok()
            }
            Err(_) => Done::err(Status::INTERNAL_ERROR),
        }
    }

    /// Dataset Management (§6.7): up to 256 ranges; with the Deallocate attribute (AD)
    /// every range is deallocated, and if any range reaches past NSZE the command is LBA
    /// Out of Range and nothing is deallocated.
    fn dataset_management(&mut self, cmd: &Command, data: &dyn DataPointer) -> Done {
        let nsid = match self.io_target(cmd.nsid) {
            Ok(Target::Namespace(nsid)) => nsid,
            Ok(Target::Nothing) => return Done::ok(),
            Err(s) => return Done::err(s),
        };
        let dsm = DsmFields::from_command(cmd);
        let count = dsm.nr_ranges as usize;
        let bytes = match data.copy_from_host(count * size_of::<DsmRange>()) {
            Ok(b) => b,
            Err(s) => return Done::err(s),
        };
        let Ok(ranges) = DsmRange::parse_list(&bytes, count) else { return Done::err(Status::INTERNAL_ERROR) };
        if !dsm.attributes.ad() {
            // Integral Dataset Read/Write hints only: nothing to do.
            return Done::ok();
        }
        let past_ok = self.quirks.has(Quirk::DsmRangePastNszeAccepted);
        let first_only = self.quirks.has(Quirk::DsmFirstRangeOnly);
        let wipe_next = self.quirks.has(Quirk::DeallocateWipesNeighbour);
        let no_action = self.quirks.has(Quirk::StaleAfterDeallocate);
        let corrupt_later = self.quirks.has(Quirk::DsmLaterRangesCorrupted);
        // Quirk `deallocated-reads-wrong-pattern`: deallocated blocks read as the opposite
        // of what DLFEAT reports (Figure 245 DLFEAT bits 2:0 broken).
        let wrong_pattern = match self.profile.dlfeat {
            _ if !self.quirks.has(Quirk::DeallocatedReadsWrongPattern) => None,
            DlfeatSetting::Zeroes => Some(0xFF),
            DlfeatSetting::Ones => Some(0x00),
            DlfeatSetting::NotReported => None,
        };
        let Some(ns) = self.namespace_mut(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        if !past_ok && ranges.iter().any(|r| !ns.contains(r.slba, r.length as u64)) {
            return Done::err(Status::LBA_OUT_OF_RANGE);
        }
        // Quirk `dsm-range-past-nsze-accepted`: out-of-range parts are ignored, the rest
        // deallocated (§6.7 broken). `deallocate` clamps to NSZE.
        let take = if first_only { 1 } else { ranges.len() };
        // Quirk `dsm-first-range-only`: only the first range is deallocated (legal: advisory).
        // Quirk `deallocate-wipes-neighbour`: one block more than asked (§6.7.1.1 broken).
        let blocks: Vec<(u64, u64)> =
            ranges.iter().take(take).map(|r| (r.slba, r.length as u64 + wipe_next as u64)).collect();
        if !no_action {
            for (slba, nlb) in &blocks {
                self.settle(nsid, *slba, *nlb);
            }
        }
        let Some(ns) = self.namespace_mut(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        for (index, (slba, nlb)) in blocks.iter().enumerate() {
            if *slba >= ns.nsze {
                continue;
            }
            // Quirk `dsm-later-ranges-corrupted`: ranges after the first read as garbage
            // (§6.7 Attribute – Deallocate and DLFEAT broken).
            let reads_as = if corrupt_later && index > 0 { Some(GARBAGE) } else { wrong_pattern };
            if deallocate_range(ns, *slba, *nlb, no_action, reads_as).is_err() {
                return Done::err(Status::INTERNAL_ERROR);
            }
        }
        if self.quirks.has(Quirk::DeallocateLeaksToNextNamespace) {
            // Quirk: the same LBAs of the next active namespace are deallocated too (§6.1
            // namespace independence broken).
            let next = self.active_nsids().into_iter().find(|n| *n > nsid);
            if let Some(other) = next.and_then(|n| self.namespace_mut(n)) {
                for (slba, nlb) in &blocks {
                    // `deallocate` clamps to NSZE: only the LBAs that exist there.
                    if *slba < other.nsze && deallocate_range(other, *slba, *nlb, no_action, wrong_pattern).is_err() {
                        return Done::err(Status::INTERNAL_ERROR);
                    }
                }
            }
        }
        Done::ok()
    }
}

/// Exchanges the data media's bytes at `at` with `bytes`.
fn swap_media(ns: &mut Namespace, at: u64, bytes: &mut Vec<u8>) {
    let mut now = vec![0u8; bytes.len()];
    if ns.media(Region::Data).read(at, &mut now).is_ok() && ns.media_mut(Region::Data).write(at, bytes).is_ok() {
        *bytes = now;
    }
}

/// Whether byte ranges `a .. a + a_len` and `b .. b + b_len` overlap.
fn overlaps(a: u64, a_len: u64, b: u64, b_len: u64) -> bool {
    a < b + b_len && b < a + a_len
}

/// What blocks read as under `dsm-later-ranges-corrupted`: neither zeroes nor ones.
const GARBAGE: u8 = 0xA5;

/// Deallocates `nlb` blocks from `slba` (clamped to NSZE) as Dataset Management does. With
/// `no_action` (quirk `stale-after-deallocate`) nothing happens: the controller takes no
/// action on the advisory attribute, which §6.7 allows. With `reads_as` (quirks
/// `deallocated-reads-wrong-pattern` and `dsm-later-ranges-corrupted`) the deallocated
/// blocks and their metadata read as that byte instead of what DLFEAT reports.
fn deallocate_range(
    ns: &mut Namespace,
    slba: u64,
    nlb: u64,
    no_action: bool,
    reads_as: Option<u8>,
) -> Result<(), OutOfMedia> {
    if no_action {
        return Ok(());
    }
    ns.deallocate(slba, nlb, false)?;
    match reads_as {
        Some(byte) => ns.fill_blocks(slba, nlb.min(ns.nsze.saturating_sub(slba)), byte),
        None => Ok(()),
    }
}

/// Whether the namespace's format moves metadata in a separate buffer at MPTR.
fn separate_metadata(ns: &Namespace) -> bool {
    ns.format.ms > 0 && !ns.format.extended
}

fn dma_error<T>(_: T) -> Status {
    Status::DATA_TRANSFER_ERROR
}

/// Walks the host data stream of a transfer: for each host memory segment, each piece
/// of it that lies contiguously on one media region. `visit(region, media offset, host
/// address, length)`.
fn walk(
    layout: Layout,
    slba: u64,
    len: u64,
    data: &dyn DataPointer,
    visit: &mut dyn FnMut(Region, u64, u64, u64) -> Result<(), Status>,
) -> Result<(), Status> {
    let mut x = 0u64;
    let mut failed = None;
    data.segments(len as usize, &mut |addr, seg| {
        let mut addr = addr;
        let mut left = seg as u64;
        while left > 0 && failed.is_none() {
            let (region, offset, run) = layout.locate(slba, x);
            let n = run.min(left);
            if let Err(s) = visit(region, offset, addr, n) {
                failed = Some(s);
            }
            x += n;
            addr += n;
            left -= n;
        }
    })?;
    failed.map_or(Ok(()), Err)
}

/// Media → host memory.
fn media_to_host(ns: &Namespace, slba: u64, len: u64, data: &dyn DataPointer) -> Result<(), Status> {
    let dma = data.dma();
    walk(ns.layout(), slba, len, data, &mut |region, offset, addr, n| copy_out(ns, region, offset, dma, addr, n))
}

fn copy_out(ns: &Namespace, region: Region, offset: u64, dma: &DmaRegion, addr: u64, n: u64) -> Result<(), Status> {
    // Straight into the host's buffer: an encrypted media decrypts there, no copy between.
    let copied = dma.with_slice_mut(addr, n as usize, |out| ns.media(region).read(offset, out)).map_err(dma_error)?;
    copied.map_err(|_| Status::INTERNAL_ERROR)
}

/// Host memory → media.
fn host_to_media(ns: &mut Namespace, slba: u64, len: u64, data: &dyn DataPointer) -> Result<(), Status> {
    let dma = data.dma();
    walk(ns.layout(), slba, len, data, &mut |region, offset, addr, n| copy_in(ns, region, offset, dma, addr, n))
}

fn copy_in(ns: &mut Namespace, region: Region, offset: u64, dma: &DmaRegion, addr: u64, n: u64) -> Result<(), Status> {
    let mut at = addr;
    let copied = ns.media_mut(region).write_runs(offset, n, &mut |dst| {
        dma.read(at, dst).map_err(dma_error)?;
        at += dst.len() as u64;
        Ok(())
    });
    copied.map_err(|_| Status::INTERNAL_ERROR)?
}

/// Compares the host data stream with the media: `Ok(false)` on the first difference.
fn compare_host(ns: &Namespace, slba: u64, len: u64, data: &dyn DataPointer) -> Result<bool, Status> {
    let dma = data.dma();
    let mut equal = true;
    walk(ns.layout(), slba, len, data, &mut |region, offset, addr, n| {
        if equal {
            equal = compare_piece(ns, region, offset, dma, addr, n)?;
        }
        Ok(())
    })?;
    Ok(equal)
}

fn compare_piece(
    ns: &Namespace,
    region: Region,
    offset: u64,
    dma: &DmaRegion,
    addr: u64,
    n: u64,
) -> Result<bool, Status> {
    let mut at = addr;
    let mut equal = true;
    let compared = ns.media(region).read_runs(offset, n, &mut |run| {
        let (len, same) = match run {
            Run::Bytes(b) => (b.len(), dma.with_slice(at, b.len(), |h| h == b).map_err(dma_error)?),
            Run::Fill(byte, len) => {
                (len, dma.with_slice(at, len, |h| h.iter().all(|x| *x == byte)).map_err(dma_error)?)
            }
        };
        equal &= same;
        at += len as u64;
        Ok(())
    });
    compared.map_err(|_| Status::INTERNAL_ERROR)??;
    Ok(equal)
}

/// The separate metadata buffer: `nlb × MS` contiguous bytes at MPTR (§4.5).
fn metadata_span(ns: &Namespace, slba: u64, nlb: u64) -> (u64, u64) {
    let ms = ns.format.ms as u64;
    (slba * ms, nlb * ms)
}

fn metadata_to_host(ns: &Namespace, slba: u64, nlb: u64, dma: &DmaRegion, mptr: u64) -> Result<(), Status> {
    let (offset, len) = metadata_span(ns, slba, nlb);
    copy_out(ns, Region::Metadata, offset, dma, mptr, len)
}

fn host_to_metadata(ns: &mut Namespace, slba: u64, nlb: u64, dma: &DmaRegion, mptr: u64) -> Result<(), Status> {
    let (offset, len) = metadata_span(ns, slba, nlb);
    copy_in(ns, Region::Metadata, offset, dma, mptr, len)
}

fn compare_metadata(ns: &Namespace, slba: u64, nlb: u64, dma: &DmaRegion, mptr: u64) -> Result<bool, Status> {
    let (offset, len) = metadata_span(ns, slba, nlb);
    compare_piece(ns, Region::Metadata, offset, dma, mptr, len)
}

/// Fills the host buffer of a transfer with zeroes.
fn zero_host(data: &dyn DataPointer, len: u64) -> Result<(), Status> {
    let dma = data.dma();
    let mut failed = None;
    data.segments(len as usize, &mut |addr, n| {
        if failed.is_none() {
            failed = dma.fill(addr, n, 0).err().map(dma_error);
        }
    })?;
    failed.map_or(Ok(()), Err)
}
