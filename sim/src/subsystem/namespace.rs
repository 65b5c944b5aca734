//! A namespace of the simulated subsystem: its size, LBA format, attachment, unique
//! identifiers, and the media holding its blocks and their metadata (NVMe 1.4 §6.1
//! "Namespaces", §8.11 "Namespace Management").
//!
//! This module owns the mapping from LBAs to media bytes and the per-block state the
//! spec makes visible: whether a block is allocated (NUSE), and which blocks Write
//! Uncorrectable marked. It checks nothing the host sends; the command code does.

use super::crypt::Key;
use super::media::{Media, OutOfMedia};
use super::reservation::ReservationState;
use std::collections::BTreeMap;

/// The LBA format a namespace is formatted with (Figure 246), resolved from the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    /// Index in the LBA Format table (FLBAS bits 3:0).
    pub index: u8,
    /// LBA data size in bytes (2^LBADS).
    pub data_size: u32,
    /// MS: metadata bytes per block.
    pub ms: u16,
    /// FLBAS bit 4: metadata transferred at the end of each block's data (extended LBA);
    /// otherwise in a separate buffer at MPTR.
    pub extended: bool,
}

impl Format {
    /// Bytes per block in the host data buffer.
    pub fn host_block_size(&self) -> u64 {
        if self.extended {
            self.data_size as u64 + self.ms as u64
        } else {
            self.data_size as u64
        }
    }
}

/// Which media a piece of a transfer lives on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    Data,
    Metadata,
}

/// The mapping from a transfer's host data stream to media offsets (a copy, so the
/// media can be written while it is consulted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub format: Format,
    /// Where LBA n starts on the media: byte n × stride. The LBA data size, except under
    /// the quirks that misaddress LBAs.
    pub stride: u64,
}

impl Layout {
    /// Where byte `x` of the host data stream of a transfer starting at `slba` lives:
    /// the region, the media offset, and how many bytes from there are contiguous.
    ///
    /// Without extended LBAs the stream is the blocks' data, back to back. With extended
    /// LBAs each block's data is followed by its metadata (§8.2 "Metadata Handling").
    ///
    /// The data of a transfer starts at `slba × stride`. A stride at least the data size
    /// lays the transfer's blocks one after another from there (so a stride above the
    /// data size runs a transfer over the places of later LBAs); a smaller stride puts
    /// each block at its own LBA's start (so neighbouring blocks overlap).
    pub fn locate(&self, slba: u64, x: u64) -> (Region, u64, u64) {
        let f = &self.format;
        let size = f.data_size as u64;
        let ms = if f.extended { f.ms as u64 } else { 0 };
        if ms == 0 && self.stride >= size {
            return (Region::Data, slba * self.stride + x, u64::MAX);
        }
        let per = size + ms;
        let (block, within) = (x / per, x % per);
        if within < size {
            let start =
                if self.stride >= size { slba * self.stride + block * size } else { (slba + block) * self.stride };
            (Region::Data, start + within, size - within)
        } else {
            (Region::Metadata, (slba + block) * f.ms as u64 + (within - size), per - within)
        }
    }

    /// The media data bytes a transfer of `nlb` blocks from `slba` covers: offset and length.
    pub fn data_extent(&self, slba: u64, nlb: u64) -> (u64, u64) {
        let size = self.format.data_size as u64;
        let start = slba * self.stride;
        if nlb == 0 {
            (start, 0)
        } else if self.stride >= size {
            (start, nlb * size)
        } else {
            (start, (nlb - 1) * self.stride + size)
        }
    }

    /// Bytes of data media a namespace of `nsze` blocks needs: room for every transfer
    /// inside it (the last LBA's data runs `data size` bytes from its start).
    pub fn data_media_size(&self, nsze: u64) -> u64 {
        if nsze == 0 {
            return 0;
        }
        let size = self.format.data_size as u64;
        let last = (nsze - 1).saturating_mul(self.stride).saturating_add(size);
        nsze.saturating_mul(size).max(last)
    }
}

/// One block as the namespace holds it (data, metadata, allocation, Write Uncorrectable
/// mark): what a change replaced, kept so that a power loss can take the change back
/// ([`super::power`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockState {
    data: BlockData,
    metadata: Vec<u8>,
    allocated: bool,
    uncorrectable: bool,
}

/// A block's data as kept: as the media stores it (ciphertext, on an encrypted media,
/// put back without decrypting and encrypting again), or as it reads.
#[derive(Clone, Debug, PartialEq, Eq)]
enum BlockData {
    Stored(Vec<u8>),
    Plain(Vec<u8>),
}

impl BlockState {
    /// Bytes of memory the copy takes.
    pub fn bytes(&self) -> u64 {
        let (BlockData::Stored(d) | BlockData::Plain(d)) = &self.data;
        (d.len() + self.metadata.len()) as u64
    }
}

/// One allocated namespace.
pub struct Namespace {
    pub nsid: u32,
    pub format: Format,
    /// NSZE (and NCAP: no thin provisioning) in logical blocks.
    pub nsze: u64,
    /// Controllers this namespace is attached to (CNTLIDs).
    pub attached: Vec<u16>,
    /// NMIC bit 0 (Figure 245): the namespace may be attached to two or more
    /// controllers; clear, it is private to one.
    pub shared: bool,
    pub nguid: [u8; 16],
    pub eui64: [u8; 8],
    /// Where LBA n starts on the media: byte n × this. The LBA data size, except under
    /// `Quirk::Format4096Addresses512` and `Quirk::Format512Addresses4096`.
    pub lba_stride: u64,
    /// The key the data media is encrypted under (`None`: stored in plaintext).
    key: Option<Key>,
    data: Media,
    metadata: Media,
    allocated: Bitmap,
    /// Write Uncorrectable ranges: start LBA → end LBA (exclusive), disjoint.
    uncorrectable: BTreeMap<u64, u64>,
    /// Registrants and the reservation (§8.8), kept by the NVM subsystem for the namespace.
    pub reservation: ReservationState,
    /// ANAGRPID: the ANA group the namespace belongs to (0h: the drive reports no ANA).
    pub anagrpid: u32,
}

impl Namespace {
    /// A namespace whose blocks all read as `fill` (deallocated), its data encrypted
    /// under `key` when one is given.
    pub fn new(
        nsid: u32,
        format: Format,
        nsze: u64,
        fill: u8,
        ids: ([u8; 16], [u8; 8]),
        key: Option<Key>,
    ) -> Namespace {
        let (nguid, eui64) = ids;
        Namespace {
            nsid,
            format,
            nsze,
            attached: Vec::new(),
            shared: false,
            nguid,
            eui64,
            lba_stride: format.data_size as u64,
            key,
            data: data_media(nsze * format.data_size as u64, fill, key, format.data_size),
            metadata: Media::new(nsze * format.ms as u64, fill),
            allocated: Bitmap::new(nsze),
            uncorrectable: BTreeMap::new(),
            reservation: ReservationState::default(),
            anagrpid: 0,
        }
    }

    /// Moves LBA n to byte n × `stride` of the media. The data media is made anew (and
    /// sized for the new stride): for a namespace just created or formatted.
    pub fn set_stride(&mut self, stride: u64) {
        self.lba_stride = stride;
        let size = self.layout().data_media_size(self.nsze);
        self.data = data_media(size, self.data.fill_byte(), self.key, self.format.data_size);
    }

    /// The key the data is encrypted under, if it is.
    pub fn key(&self) -> Option<Key> {
        self.key
    }

    /// A cryptographic erase: the data stays on the media under a new key (so every
    /// block written reads as noise) and the metadata, kept in plaintext, is set to `fill`.
    pub fn crypto_erase(&mut self, key: Key) {
        self.key = Some(key);
        self.data.rekey(key);
        let fill = self.metadata.fill_byte();
        self.metadata = Media::new(self.metadata.size(), fill);
    }

    /// Every data and metadata byte, written or not, reads as the repeated `pattern`
    /// (a sanitize overwrite, or a block erase's erased state); allocation is unchanged.
    pub fn overwrite(&mut self, pattern: [u8; 4]) {
        self.data.overwrite(pattern);
        self.metadata.overwrite(pattern);
        self.uncorrectable.clear();
    }

    /// Capacity in bytes this namespace takes from the subsystem (NVMCAP).
    pub fn capacity_bytes(&self) -> u128 {
        self.nsze as u128 * self.format.data_size as u128
    }

    pub fn is_attached_to(&self, cntlid: u16) -> bool {
        self.attached.contains(&cntlid)
    }

    /// NUSE: blocks currently allocated.
    pub fn nuse(&self) -> u64 {
        self.allocated.count()
    }

    /// Whether `nlb` blocks from `slba` lie inside the namespace.
    pub fn contains(&self, slba: u64, nlb: u64) -> bool {
        slba.checked_add(nlb).is_some_and(|end| end <= self.nsze)
    }

    pub fn media(&self, region: Region) -> &Media {
        match region {
            Region::Data => &self.data,
            Region::Metadata => &self.metadata,
        }
    }

    pub fn media_mut(&mut self, region: Region) -> &mut Media {
        match region {
            Region::Data => &mut self.data,
            Region::Metadata => &mut self.metadata,
        }
    }

    /// How this namespace's LBAs map onto its media.
    pub fn layout(&self) -> Layout {
        Layout { format: self.format, stride: self.lba_stride }
    }

    /// Marks blocks written by Write: allocated, and no longer uncorrectable.
    pub fn mark_written(&mut self, slba: u64, nlb: u64) {
        self.allocated.set_range(slba, nlb, true);
        self.clear_uncorrectable(slba, nlb);
    }

    /// Deallocates blocks: they read as the fill byte (unless `keep_data`, which leaves
    /// the old bytes in place) and no longer count in NUSE.
    pub fn deallocate(&mut self, slba: u64, nlb: u64, keep_data: bool) -> Result<(), OutOfMedia> {
        let nlb = nlb.min(self.nsze.saturating_sub(slba));
        if nlb == 0 {
            return Ok(());
        }
        self.allocated.set_range(slba, nlb, false);
        self.clear_uncorrectable(slba, nlb);
        if !keep_data {
            let fill = self.data.fill_byte();
            self.fill_blocks(slba, nlb, fill)?;
        }
        Ok(())
    }

    /// Sets every data and metadata byte of the blocks to `byte`.
    pub fn fill_blocks(&mut self, slba: u64, nlb: u64, byte: u8) -> Result<(), OutOfMedia> {
        // What a transfer of the same blocks covers (more or less than nlb × data size
        // when a quirk misaddresses LBAs).
        let (offset, len) = self.layout().data_extent(slba, nlb);
        self.data.fill(offset, len.min(self.data.size().saturating_sub(offset)), byte)?;
        let ms = self.format.ms as u64;
        self.metadata.fill(slba * ms, nlb * ms, byte)
    }

    /// Marks blocks uncorrectable (Write Uncorrectable): they count as allocated.
    pub fn mark_uncorrectable(&mut self, slba: u64, nlb: u64) {
        self.allocated.set_range(slba, nlb, true);
        self.clear_uncorrectable(slba, nlb);
        self.uncorrectable.insert(slba, slba + nlb);
    }

    /// Whether any block of the range is marked uncorrectable.
    pub fn any_uncorrectable(&self, slba: u64, nlb: u64) -> bool {
        if self.uncorrectable.is_empty() {
            return false;
        }
        let end = slba + nlb;
        // A range that starts before `end` and ends after `slba` overlaps.
        self.uncorrectable.range(..end).next_back().is_some_and(|(_, e)| *e > slba)
    }

    fn clear_uncorrectable(&mut self, slba: u64, nlb: u64) {
        if self.uncorrectable.is_empty() {
            return;
        }
        let end = slba + nlb;
        let overlapping: Vec<(u64, u64)> =
            self.uncorrectable.range(..end).filter(|(_, e)| **e > slba).map(|(s, e)| (*s, *e)).collect();
        for (s, e) in overlapping {
            self.uncorrectable.remove(&s);
            if s < slba {
                self.uncorrectable.insert(s, slba);
            }
            if e > end {
                self.uncorrectable.insert(end, e);
            }
        }
    }

    /// Block `lba` as it is now (LBA n at byte n × the stride; the quirks that misaddress
    /// LBAs are not modelled across a power loss).
    pub fn block_state(&self, lba: u64) -> BlockState {
        let size = self.format.data_size as u64;
        let offset = lba * self.lba_stride;
        let len = size.min(self.data.size().saturating_sub(offset));
        let data = match self.data.stored(offset, len) {
            Some(stored) => BlockData::Stored(stored),
            None => {
                let mut data = vec![0u8; len as usize];
                // Inside the media by construction (length clamped above).
                let _ = self.data.read(offset, &mut data);
                BlockData::Plain(data)
            }
        };
        let ms = self.format.ms as u64;
        let mut metadata = vec![0u8; ms.min(self.metadata.size().saturating_sub(lba * ms)) as usize];
        let _ = self.metadata.read(lba * ms, &mut metadata);
        BlockState { data, metadata, allocated: self.allocated.get(lba), uncorrectable: self.any_uncorrectable(lba, 1) }
    }

    /// Puts block `lba` back as `state` recorded it.
    pub fn restore_block(&mut self, lba: u64, state: &BlockState) {
        let _ = match &state.data {
            BlockData::Stored(bytes) => self.data.put_stored(lba * self.lba_stride, bytes),
            BlockData::Plain(bytes) => self.data.write(lba * self.lba_stride, bytes),
        };
        let _ = self.metadata.write(lba * self.format.ms as u64, &state.metadata);
        self.allocated.set_range(lba, 1, state.allocated);
        self.clear_uncorrectable(lba, 1);
        if state.uncorrectable {
            self.uncorrectable.insert(lba, lba + 1);
        }
    }

    /// The last `count` blocks as the host reads them now (plaintext, so they survive a
    /// change of key), for quirk `erase-spares-last-blocks` to put back after an erase.
    pub fn last_blocks(&self, count: u64) -> Vec<(u64, BlockState)> {
        self.blocks_in(self.nsze.saturating_sub(count)..self.nsze)
    }

    /// The state and data of the blocks of `lbas` inside the namespace, to put back with
    /// [`Self::put_back`].
    pub fn blocks_in(&self, lbas: std::ops::Range<u64>) -> Vec<(u64, BlockState)> {
        let size = self.format.data_size as u64;
        (lbas.start..lbas.end.min(self.nsze))
            .map(|lba| {
                let mut state = self.block_state(lba);
                let mut data = vec![0u8; size as usize];
                // Inside the media: lba < nsze.
                let _ = self.data.read(lba * self.lba_stride, &mut data);
                state.data = BlockData::Plain(data);
                (lba, state)
            })
            .collect()
    }

    /// Puts blocks taken by [`Self::last_blocks`] back, where they still fit.
    pub fn put_back(&mut self, blocks: &[(u64, BlockState)]) {
        for (lba, state) in blocks {
            if *lba < self.nsze {
                self.restore_block(*lba, state);
            }
        }
    }

    /// Takes over `old`'s stored bytes where the two overlap (quirk
    /// `create-keeps-old-media`): blocks never written read as what `old` held there.
    pub fn inherit_media(&mut self, old: Namespace) {
        self.key = old.key.or(self.key);
        self.data.inherit(old.data);
        self.metadata.inherit(old.metadata);
    }

    /// Deallocates every block and drops every mark: the namespace as if just created.
    pub fn erase(&mut self) {
        let fill = self.data.fill_byte();
        self.reformat(self.format, self.nsze, self.lba_stride, fill);
    }

    /// Reformats: a new format and size, every block deallocated.
    pub fn reformat(&mut self, format: Format, nsze: u64, lba_stride: u64, fill: u8) {
        self.format = format;
        self.nsze = nsze;
        self.lba_stride = lba_stride;
        self.data = data_media(self.layout().data_media_size(nsze), fill, self.key, format.data_size);
        self.metadata = Media::new(nsze * format.ms as u64, fill);
        self.allocated = Bitmap::new(nsze);
        self.uncorrectable.clear();
    }
}

/// A data media of `size` bytes, encrypted under `key` in units of the LBA data size.
fn data_media(size: u64, fill: u8, key: Option<Key>, data_size: u32) -> Media {
    match key {
        Some(key) => Media::encrypted(size, fill, key, data_size as usize),
        None => Media::new(size, fill),
    }
}

/// One bit per block, with a running count of set bits.
struct Bitmap {
    words: Vec<u64>,
    bits: u64,
    ones: u64,
}

impl Bitmap {
    fn new(bits: u64) -> Bitmap {
        Bitmap { words: vec![0; bits.div_ceil(64) as usize], bits, ones: 0 }
    }

    fn count(&self) -> u64 {
        self.ones
    }

    fn get(&self, bit: u64) -> bool {
        self.words.get((bit / 64) as usize).is_some_and(|w| w >> (bit % 64) & 1 == 1)
    }

    /// Sets or clears `len` bits from `start` (clamped to the map).
    fn set_range(&mut self, start: u64, len: u64, value: bool) {
        let end = start.saturating_add(len).min(self.bits);
        let mut at = start;
        while at < end {
            let word = (at / 64) as usize;
            let bit = at % 64;
            let n = (64 - bit).min(end - at);
            let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << bit };
            let Some(w) = self.words.get_mut(word) else { return };
            let before = (*w & mask).count_ones() as u64;
            if value {
                *w |= mask;
                self.ones += n - before;
            } else {
                *w &= !mask;
                self.ones -= before;
            }
            at += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(data_size: u32, ms: u16, extended: bool) -> Namespace {
        let format = Format { index: 0, data_size, ms, extended };
        Namespace::new(1, format, 1024, 0, ([0; 16], [0; 8]), None)
    }

    #[test]
    fn extended_lbas_interleave_data_and_metadata() {
        let n = ns(512, 8, true).layout();
        assert_eq!(n.locate(2, 0), (Region::Data, 1024, 512));
        assert_eq!(n.locate(2, 512), (Region::Metadata, 16, 8));
        assert_eq!(n.locate(2, 520), (Region::Data, 1536, 512));
        let n = ns(512, 8, false).layout();
        assert_eq!(n.locate(2, 520), (Region::Data, 1544, u64::MAX));
    }

    #[test]
    fn a_stride_below_the_block_size_overlaps_neighbours() {
        let mut n = ns(4096, 0, false);
        n.lba_stride = 512;
        let l = n.layout();
        assert_eq!(l.locate(3, 0), (Region::Data, 1536, 4096));
        assert_eq!(l.locate(3, 4096), (Region::Data, 2048, 4096));
    }

    #[test]
    fn a_stride_above_the_block_size_runs_a_transfer_over_later_lbas() {
        let mut n = ns(512, 0, false);
        n.set_stride(4096);
        let l = n.layout();
        assert_eq!(l.locate(3, 0), (Region::Data, 3 * 4096, u64::MAX));
        assert_eq!(l.locate(0, 8 * 512), (Region::Data, 4096, u64::MAX), "block 8 of a transfer at 0 is LBA 1's place");
        assert_eq!(l.data_extent(1, 2), (4096, 1024));
        assert_eq!(n.media(Region::Data).size(), 1023 * 4096 + 512);
        let mut n = ns(512, 8, true);
        n.set_stride(4096);
        let l = n.layout();
        assert_eq!(l.locate(2, 520), (Region::Data, 2 * 4096 + 512, 512));
        assert_eq!(l.locate(2, 512), (Region::Metadata, 16, 8));
    }

    #[test]
    fn nuse_counts_allocated_blocks() {
        let mut n = ns(512, 0, false);
        n.mark_written(60, 10);
        n.mark_written(65, 100);
        assert_eq!(n.nuse(), 105);
        n.deallocate(0, 64, false).unwrap();
        assert_eq!(n.nuse(), 101);
    }

    #[test]
    fn uncorrectable_ranges_split_when_overwritten() {
        let mut n = ns(512, 0, false);
        n.mark_uncorrectable(10, 10);
        n.mark_written(14, 2);
        assert!(n.any_uncorrectable(10, 4));
        assert!(!n.any_uncorrectable(14, 2));
        assert!(n.any_uncorrectable(16, 1));
        assert!(!n.any_uncorrectable(20, 100));
        assert!(n.any_uncorrectable(0, 11));
    }
}
