//! NVM command set I/O commands (NVMe 1.4 §6): builders and decoders for Read, Write,
//! Compare, Write Zeroes, Write Uncorrectable, Verify, Flush and Dataset Management.
//!
//! This module owns the command dwords of these commands and the Dataset Management
//! range definition. Commands that address logical blocks carry SLBA in CDW11:CDW10 and
//! NLB (0's based) in CDW12 bits 15:00; CDW12 bits 31:16 hold the flags each command
//! defines (see [`LbaFields`]). Protection information fields (PRINFO, CDW14, CDW15) are
//! decoded but not built: nvtest formats without end-to-end protection unless a case
//! sets them itself.

use crate::assert_size;
use crate::spec::command::{rw, write_zeroes, Command, NvmOpcode};
use bitfield_struct::bitfield;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The fields of a command addressing a range of logical blocks (Read, Write, Compare,
/// Write Zeroes, Write Uncorrectable, Verify), decoded (the opcode is not checked; a flag
/// a command does not define reads as whatever the bit holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LbaFields {
    pub nsid: u32,
    /// SLBA: Starting LBA (CDW11:CDW10).
    pub slba: u64,
    /// NLB: Number of Logical Blocks, 0's based (CDW12 bits 15:00).
    pub nlb: u16,
    /// DEAC: Deallocate (Write Zeroes CDW12 bit 25, NVMe 1.3).
    pub deac: bool,
    /// PRINFO: Protection Information Field (CDW12 bits 29:26): PRACT (bit 3) and PRCHK
    /// (bits 2:0).
    pub prinfo: u8,
    /// FUA: Force Unit Access (CDW12 bit 30).
    pub fua: bool,
    /// LR: Limited Retry (CDW12 bit 31).
    pub lr: bool,
}

impl LbaFields {
    pub fn from_command(cmd: &Command) -> Self {
        LbaFields {
            nsid: cmd.nsid,
            slba: cmd.slba(),
            nlb: cmd.nlb(),
            deac: cmd.cdw12 & write_zeroes::DEAC != 0,
            prinfo: ((cmd.cdw12 >> 26) & 0xF) as u8,
            fua: cmd.cdw12 & rw::FUA != 0,
            lr: cmd.cdw12 & rw::LR != 0,
        }
    }

    /// The number of logical blocks addressed (NLB + 1, so 1 to 65536).
    pub fn blocks(&self) -> u32 {
        self.nlb as u32 + 1
    }

    /// The LBA after the last one addressed (SLBA + NLB + 1), or `None` if that passes
    /// the end of the 64-bit LBA space.
    pub fn end_lba(&self) -> Option<u64> {
        self.slba.checked_add(self.blocks() as u64)
    }
}

fn lba_command(opcode: NvmOpcode, nsid: u32, slba: u64, nlb: u16, flags: u32) -> Command {
    let mut cmd = Command::nvm(opcode, nsid).with_slba(slba);
    cmd.cdw12 = nlb as u32 | flags;
    cmd
}

/// Read `nlb + 1` logical blocks from `slba` (NLB is 0's based).
pub fn read(nsid: u32, slba: u64, nlb: u16) -> Command {
    lba_command(NvmOpcode::Read, nsid, slba, nlb, 0)
}

/// Write `nlb + 1` logical blocks at `slba`; `fua` sets Force Unit Access (the data is
/// on non-volatile media before the command completes).
pub fn write(nsid: u32, slba: u64, nlb: u16, fua: bool) -> Command {
    lba_command(NvmOpcode::Write, nsid, slba, nlb, if fua { rw::FUA } else { 0 })
}

/// Compare `nlb + 1` logical blocks at `slba` with the data sent (ONCS bit 0). A
/// mismatch completes with Compare Failure.
pub fn compare(nsid: u32, slba: u64, nlb: u16) -> Command {
    lba_command(NvmOpcode::Compare, nsid, slba, nlb, 0)
}

/// Write Zeroes over `nlb + 1` logical blocks at `slba` (ONCS bit 3, NVMe 1.1). `deac`
/// sets Deallocate (CDW12 bit 25, NVMe 1.3; supported when DLFEAT bit 3 is set): the
/// controller may then deallocate the blocks. Either way they read back as zeroes.
pub fn write_zeroes(nsid: u32, slba: u64, nlb: u16, deac: bool) -> Command {
    lba_command(NvmOpcode::WriteZeroes, nsid, slba, nlb, if deac { write_zeroes::DEAC } else { 0 })
}

/// Write Uncorrectable over `nlb + 1` logical blocks at `slba` (ONCS bit 1): reads of
/// them fail with Unrecovered Read Error until they are written.
pub fn write_uncorrectable(nsid: u32, slba: u64, nlb: u16) -> Command {
    lba_command(NvmOpcode::WriteUncorrectable, nsid, slba, nlb, 0)
}

/// Verify `nlb + 1` logical blocks at `slba` without transferring data (ONCS bit 7,
/// NVMe 1.4).
pub fn verify(nsid: u32, slba: u64, nlb: u16) -> Command {
    lba_command(NvmOpcode::Verify, nsid, slba, nlb, 0)
}

/// Flush the volatile write cache for `nsid`. NSID FFFFFFFFh flushes every namespace
/// where Identify Controller VWC bits 2:1 say so (NVMe 1.4).
pub fn flush(nsid: u32) -> Command {
    Command::nvm(NvmOpcode::Flush, nsid)
}

// ---------------------------------------------------------------------------------------
// Dataset Management
// ---------------------------------------------------------------------------------------

/// "Dataset Management – Command Dword 11": the attributes of all the ranges.
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct DsmAttributes {
    /// IDR: Attribute – Integral Dataset for Read (bit 0).
    pub idr: bool,
    /// IDW: Attribute – Integral Dataset for Write (bit 1).
    pub idw: bool,
    /// AD: Attribute – Deallocate (bit 2): the ranges may be deallocated.
    pub ad: bool,
    #[bits(29)]
    __: u32,
}

/// Context Attributes of a Dataset Management range.
#[bitfield(u32)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ContextAttributes {
    /// AF: Access Frequency (bits 3:0).
    #[bits(4)]
    pub af: u8,
    /// AL: Access Latency (bits 5:4).
    #[bits(2)]
    pub al: u8,
    #[bits(2)]
    __: u8,
    /// SR: Sequential Read Range (bit 8).
    pub sr: bool,
    /// SW: Sequential Write Range (bit 9).
    pub sw: bool,
    /// WP: Write Prepare (bit 10).
    pub wp: bool,
    #[bits(13)]
    __: u16,
    /// Command Access Size, in logical blocks (bits 31:24).
    pub command_access_size: u8,
}

/// "Dataset Management – Range Definition" (16 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct DsmRange {
    /// Context Attributes (bytes 03:00).
    pub context_attributes: ContextAttributes,
    /// Length in logical blocks (bytes 07:04); 1-based, unlike NLB.
    pub length: u32,
    /// Starting LBA (bytes 15:08).
    pub slba: u64,
}
assert_size!(DsmRange, 16);

impl DsmRange {
    /// A range of `length` logical blocks from `slba`, with no context attributes.
    pub fn new(slba: u64, length: u32) -> Self {
        DsmRange { context_attributes: ContextAttributes::new(), length, slba }
    }

    /// The first `count` ranges of a Dataset Management data buffer.
    pub fn parse_list(data: &[u8], count: usize) -> Result<Vec<DsmRange>, DsmError> {
        let needed = count.checked_mul(16).ok_or(DsmError::BufferTooShort { count, len: data.len() })?;
        match data.get(..needed) {
            Some(bytes) => {
                Ok(bytes.chunks_exact(16).map(|c| DsmRange::read_from_bytes(c).expect("16 bytes")).collect())
            }
            None => Err(DsmError::BufferTooShort { count, len: data.len() }),
        }
    }

    /// The data buffer for `ranges`.
    pub fn encode_list(ranges: &[DsmRange]) -> Vec<u8> {
        ranges.as_bytes().to_vec()
    }
}

/// Why a Dataset Management command or its ranges could not be built or read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DsmError {
    #[error("a Dataset Management command carries 1 to 256 ranges, not {0}")]
    RangeCount(usize),
    #[error("{count} ranges need {} bytes; the buffer has {len}", count.saturating_mul(16))]
    BufferTooShort { count: usize, len: usize },
}

/// The most ranges one Dataset Management command carries (NR is 8 bits, 0's based).
pub const DSM_MAX_RANGES: usize = 256;

/// A Dataset Management command over `nr_ranges` ranges (1 to 256; sent as NR, 0's based,
/// in CDW10 bits 07:00) with `attributes` (CDW11). ONCS bit 2.
pub fn dataset_management(nsid: u32, nr_ranges: usize, attributes: DsmAttributes) -> Result<Command, DsmError> {
    if !(1..=DSM_MAX_RANGES).contains(&nr_ranges) {
        return Err(DsmError::RangeCount(nr_ranges));
    }
    let mut cmd = Command::nvm(NvmOpcode::DatasetManagement, nsid);
    cmd.cdw10 = (nr_ranges - 1) as u32;
    cmd.cdw11 = attributes.into_bits();
    Ok(cmd)
}

/// A Dataset Management command decoded (the opcode is not checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DsmFields {
    pub nsid: u32,
    /// The number of ranges (NR + 1, so 1 to 256).
    pub nr_ranges: u16,
    pub attributes: DsmAttributes,
}

impl DsmFields {
    pub fn from_command(cmd: &Command) -> Self {
        DsmFields {
            nsid: cmd.nsid,
            nr_ranges: (cmd.cdw10 & 0xFF) as u16 + 1,
            attributes: DsmAttributes::from_bits(cmd.cdw11),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn block_commands_carry_slba_nlb_and_their_flags() {
        let cmd = write(1, 0x1_2345_6789, 7, true);
        assert_eq!((cmd.opcode, cmd.nsid), (0x01, 1));
        assert_eq!((cmd.cdw10, cmd.cdw11), (0x2345_6789, 1));
        assert_eq!(cmd.cdw12, 7 | 1 << 30);
        let f = LbaFields::from_command(&cmd);
        assert_eq!((f.slba, f.nlb, f.blocks(), f.fua, f.deac), (0x1_2345_6789, 7, 8, true, false));
        assert_eq!(f.end_lba(), Some(0x1_2345_6791));
        assert_eq!(read(1, 0, 0).opcode, 0x02);
        assert_eq!(read(1, 0, 0).cdw12, 0);
        assert_eq!(compare(1, 5, 1).opcode, 0x05);
        assert_eq!(write_uncorrectable(1, 5, 1).opcode, 0x04);
        assert_eq!(verify(1, 5, 1).opcode, 0x0C);
        assert!(!LbaFields::from_command(&write(1, 0, 0, false)).fua);
    }

    #[test]
    fn write_zeroes_deallocate_is_cdw12_bit_25() {
        let cmd = write_zeroes(2, 100, 0xFFFF, true);
        assert_eq!(cmd.opcode, 0x08);
        assert_eq!(cmd.cdw12, 0xFFFF | 1 << 25);
        let f = LbaFields::from_command(&cmd);
        assert!(f.deac && !f.fua);
        assert_eq!(f.blocks(), 65536);
        assert!(!LbaFields::from_command(&write_zeroes(2, 100, 0, false)).deac);
        let mut pi = cmd;
        pi.cdw12 |= 0b1001 << 26 | 1 << 31;
        let f = LbaFields::from_command(&pi);
        assert_eq!(f.prinfo, 0b1001);
        assert!(f.lr);
        assert_eq!(LbaFields { slba: u64::MAX, ..f }.end_lba(), None);
    }

    #[test]
    fn flush_is_opcode_0_with_the_nsid() {
        let cmd = flush(0xFFFF_FFFF);
        assert_eq!((cmd.opcode, cmd.nsid, cmd.cdw10, cmd.cdw12), (0x00, 0xFFFF_FFFF, 0, 0));
    }

    #[test]
    fn dsm_range_fields_sit_at_their_bytes() {
        assert_eq!(offset_of!(DsmRange, length), 4);
        assert_eq!(offset_of!(DsmRange, slba), 8);
        let r = DsmRange {
            context_attributes: ContextAttributes::new().with_af(3).with_sw(true).with_command_access_size(8),
            length: 256,
            slba: 0x10_0000_0000,
        };
        let b = r.as_bytes();
        assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), 3 | 1 << 9 | 8 << 24);
        assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 256);
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 0x10_0000_0000);
        let list = DsmRange::encode_list(&[r, DsmRange::new(7, 1)]);
        assert_eq!(list.len(), 32);
        assert_eq!(DsmRange::parse_list(&list, 2).unwrap(), [r, DsmRange::new(7, 1)]);
        assert_eq!(DsmRange::parse_list(&list, 3), Err(DsmError::BufferTooShort { count: 3, len: 32 }));
    }

    #[test]
    fn dataset_management_sends_nr_zeros_based_and_attributes_in_cdw11() {
        let cmd = dataset_management(1, 256, DsmAttributes::new().with_ad(true)).unwrap();
        assert_eq!((cmd.opcode, cmd.cdw10, cmd.cdw11), (0x09, 0xFF, 0b100));
        let f = DsmFields::from_command(&cmd);
        assert_eq!(f.nr_ranges, 256);
        assert!(f.attributes.ad() && !f.attributes.idr() && !f.attributes.idw());
        assert_eq!(dataset_management(1, 1, DsmAttributes::new().with_idr(true).with_idw(true)).unwrap().cdw11, 0b11);
        assert_eq!(dataset_management(1, 0, DsmAttributes::new()), Err(DsmError::RangeCount(0)));
        assert_eq!(dataset_management(1, 257, DsmAttributes::new()), Err(DsmError::RangeCount(257)));
    }
}
