//! Submission and completion queue entries and the opcodes (NVMe 1.4 §4.2, §4.6, §5, §6).

use crate::assert_size;
use crate::spec::status::Status;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A submission queue entry: "Figure 105: Common Command Format" (64 bytes).
///
/// CDW0 is split into its fields: OPC (07:00), FUSE (09:08) and PSDT (15:14) in
/// `flags`, and CID (31:16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Command {
    /// OPC: Opcode.
    pub opcode: u8,
    /// FUSE (bits 1:0) and PSDT (bits 7:6). nvtest always uses PRPs (PSDT 00b).
    pub flags: u8,
    /// CID: Command Identifier.
    pub cid: u16,
    /// NSID: Namespace Identifier.
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    /// MPTR: Metadata Pointer.
    pub mptr: u64,
    /// DPTR PRP Entry 1.
    pub prp1: u64,
    /// DPTR PRP Entry 2.
    pub prp2: u64,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
}
assert_size!(Command, 64);

impl Command {
    pub fn admin(opcode: AdminOpcode) -> Self {
        Command { opcode: opcode as u8, ..Default::default() }
    }

    pub fn nvm(opcode: NvmOpcode, nsid: u32) -> Self {
        Command { opcode: opcode as u8, nsid, ..Default::default() }
    }

    /// Starting LBA (SLBA) in CDW10 (low) and CDW11 (high), as Read, Write, Compare,
    /// Write Zeroes and Write Uncorrectable carry it.
    pub fn slba(&self) -> u64 {
        (self.cdw11 as u64) << 32 | self.cdw10 as u64
    }

    pub fn with_slba(mut self, slba: u64) -> Self {
        self.cdw10 = slba as u32;
        self.cdw11 = (slba >> 32) as u32;
        self
    }

    /// Number of Logical Blocks (NLB, CDW12 bits 15:00), a 0's based value.
    pub fn nlb(&self) -> u16 {
        self.cdw12 as u16
    }
}

/// A completion queue entry: "Figure 125: Completion Queue Entry Layout" (16 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Completion {
    /// DW0: command specific.
    pub dw0: u32,
    /// DW1: command specific (reserved for most commands).
    pub dw1: u32,
    /// SQHD: SQ Head Pointer.
    pub sq_head: u16,
    /// SQID: SQ Identifier.
    pub sq_id: u16,
    /// CID: Command Identifier.
    pub cid: u16,
    /// P (bit 0) and the Status Field (bits 15:1).
    pub status: u16,
}
assert_size!(Completion, 16);

impl Completion {
    /// P: the Phase Tag.
    pub fn phase(&self) -> bool {
        self.status & 1 != 0
    }

    /// The Status Field (DW3 bits 31:17), decoded.
    pub fn status(&self) -> Status {
        Status::from_field(self.status >> 1)
    }
}

/// "Figure 139: Opcodes for Admin Commands".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AdminOpcode {
    DeleteIoSubmissionQueue = 0x00,
    CreateIoSubmissionQueue = 0x01,
    GetLogPage = 0x02,
    DeleteIoCompletionQueue = 0x04,
    CreateIoCompletionQueue = 0x05,
    Identify = 0x06,
    Abort = 0x08,
    SetFeatures = 0x09,
    GetFeatures = 0x0A,
    AsynchronousEventRequest = 0x0C,
    NamespaceManagement = 0x0D,
    FirmwareCommit = 0x10,
    FirmwareImageDownload = 0x11,
    DeviceSelfTest = 0x14,
    NamespaceAttachment = 0x15,
    KeepAlive = 0x18,
    DirectiveSend = 0x19,
    DirectiveReceive = 0x1A,
    VirtualizationManagement = 0x1C,
    NvmeMiSend = 0x1D,
    NvmeMiReceive = 0x1E,
    DoorbellBufferConfig = 0x7C,
    FormatNvm = 0x80,
    SecuritySend = 0x81,
    SecurityReceive = 0x82,
    Sanitize = 0x84,
    GetLbaStatus = 0x86,
}

impl AdminOpcode {
    pub const ALL: [AdminOpcode; 27] = [
        Self::DeleteIoSubmissionQueue,
        Self::CreateIoSubmissionQueue,
        Self::GetLogPage,
        Self::DeleteIoCompletionQueue,
        Self::CreateIoCompletionQueue,
        Self::Identify,
        Self::Abort,
        Self::SetFeatures,
        Self::GetFeatures,
        Self::AsynchronousEventRequest,
        Self::NamespaceManagement,
        Self::FirmwareCommit,
        Self::FirmwareImageDownload,
        Self::DeviceSelfTest,
        Self::NamespaceAttachment,
        Self::KeepAlive,
        Self::DirectiveSend,
        Self::DirectiveReceive,
        Self::VirtualizationManagement,
        Self::NvmeMiSend,
        Self::NvmeMiReceive,
        Self::DoorbellBufferConfig,
        Self::FormatNvm,
        Self::SecuritySend,
        Self::SecurityReceive,
        Self::Sanitize,
        Self::GetLbaStatus,
    ];

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|op| *op as u8 == value)
    }
}

/// "Figure 346: Opcodes for NVM Commands".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NvmOpcode {
    Flush = 0x00,
    Write = 0x01,
    Read = 0x02,
    WriteUncorrectable = 0x04,
    Compare = 0x05,
    WriteZeroes = 0x08,
    DatasetManagement = 0x09,
    Verify = 0x0C,
    ReservationRegister = 0x0D,
    ReservationReport = 0x0E,
    ReservationAcquire = 0x11,
    ReservationRelease = 0x15,
}

impl NvmOpcode {
    pub const ALL: [NvmOpcode; 12] = [
        Self::Flush,
        Self::Write,
        Self::Read,
        Self::WriteUncorrectable,
        Self::Compare,
        Self::WriteZeroes,
        Self::DatasetManagement,
        Self::Verify,
        Self::ReservationRegister,
        Self::ReservationReport,
        Self::ReservationAcquire,
        Self::ReservationRelease,
    ];

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|op| *op as u8 == value)
    }
}

/// Read / Write CDW12 bits (Figure 364 "Read – Command Dword 12", Figure 404 "Write").
pub mod rw {
    /// FUA: Force Unit Access (CDW12 bit 30).
    pub const FUA: u32 = 1 << 30;
    /// LR: Limited Retry (CDW12 bit 31).
    pub const LR: u32 = 1 << 31;
}

/// Write Zeroes CDW12 bits (Figure 412 "Write Zeroes – Command Dword 12").
pub mod write_zeroes {
    /// DEAC: Deallocate (CDW12 bit 25), NVMe 1.3 and later.
    pub const DEAC: u32 = 1 << 25;
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn command_fields_sit_where_figure_105_puts_them() {
        let c = Command { opcode: 0x02, cid: 0x1234, nsid: 7, prp1: 0x1000, cdw10: 5, ..Default::default() }
            .with_slba(0x1_0000_0005);
        let b = c.as_bytes();
        assert_eq!(b[0], 0x02);
        assert_eq!(u16::from_le_bytes([b[2], b[3]]), 0x1234);
        assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 7);
        assert_eq!(u64::from_le_bytes(b[24..32].try_into().unwrap()), 0x1000);
        assert_eq!(u32::from_le_bytes(b[40..44].try_into().unwrap()), 5);
        assert_eq!(u32::from_le_bytes(b[44..48].try_into().unwrap()), 1);
        assert_eq!(c.slba(), 0x1_0000_0005);
    }

    #[test]
    fn opcodes_round_trip() {
        for op in AdminOpcode::ALL {
            assert_eq!(AdminOpcode::from_u8(op as u8), Some(op));
        }
        for op in NvmOpcode::ALL {
            assert_eq!(NvmOpcode::from_u8(op as u8), Some(op));
        }
        assert_eq!(AdminOpcode::from_u8(0x03), None);
    }
}
