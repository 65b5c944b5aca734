//! Get Log Page (admin opcode 02h, NVMe 1.4 §5.14): the command, its log identifiers and
//! the log pages nvtest reads.
//!
//! This module owns the Get Log Page command dwords (and how a 1.2 controller reads
//! them), the Error Information, SMART / Health Information, Firmware Slot Information,
//! Changed Namespace List and Commands Supported and Effects log pages. Other log
//! pages are named by [`LogPageId`] only.

use crate::assert_size;
use crate::spec::command::{AdminOpcode, Command};
use crate::spec::identify::AsciiField;
use crate::spec::status::Status;
use bitfield_struct::bitfield;
use zerocopy::little_endian::{U128, U16};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

// ---------------------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------------------

/// LID: Log Page Identifier ("Get Log Page – Log Page Identifiers"), the pages nvtest
/// knows. Any other identifier can still be sent as a raw `u8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LogPageId {
    /// 01h: Error Information.
    ErrorInformation = 0x01,
    /// 02h: SMART / Health Information.
    SmartHealth = 0x02,
    /// 03h: Firmware Slot Information.
    FirmwareSlot = 0x03,
    /// 04h: Changed Namespace List (NVMe 1.2).
    ChangedNamespaceList = 0x04,
    /// 05h: Commands Supported and Effects (NVMe 1.2).
    CommandsSupportedAndEffects = 0x05,
    /// 06h: Device Self-test (NVMe 1.3).
    DeviceSelfTest = 0x06,
    /// 07h: Telemetry Host-Initiated (NVMe 1.3).
    TelemetryHostInitiated = 0x07,
    /// 08h: Telemetry Controller-Initiated (NVMe 1.3).
    TelemetryControllerInitiated = 0x08,
    /// 0Ch: Asymmetric Namespace Access (NVMe 1.4).
    AsymmetricNamespaceAccess = 0x0C,
    /// 80h: Reservation Notification (NVM command set, NVMe 1.1).
    ReservationNotification = 0x80,
    /// 81h: Sanitize Status (NVMe 1.3).
    SanitizeStatus = 0x81,
}

impl LogPageId {
    pub const ALL: [LogPageId; 11] = [
        Self::ErrorInformation,
        Self::SmartHealth,
        Self::FirmwareSlot,
        Self::ChangedNamespaceList,
        Self::CommandsSupportedAndEffects,
        Self::DeviceSelfTest,
        Self::TelemetryHostInitiated,
        Self::TelemetryControllerInitiated,
        Self::AsymmetricNamespaceAccess,
        Self::ReservationNotification,
        Self::SanitizeStatus,
    ];

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|l| *l as u8 == value)
    }
}

impl From<LogPageId> for u8 {
    fn from(lid: LogPageId) -> u8 {
        lid as u8
    }
}

/// A Get Log Page transfer must be a whole number of dwords, at least one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a Get Log Page transfer is a whole, non-zero number of dwords; {bytes} bytes is not")]
pub struct LogLengthError {
    pub bytes: u32,
}

/// The fields of a Get Log Page command, NVMe 1.4 layout:
///
/// - "Get Log Page – Command Dword 10": LID (07:00), LSP (11:08, NVMe 1.3), RAE (15,
///   NVMe 1.3), NUMDL (31:16);
/// - "Get Log Page – Command Dword 11": NUMDU (15:00), LSI (31:16, Log Specific
///   Identifier, NVMe 1.4);
/// - "Get Log Page – Command Dword 12/13": LPOL and LPOU, the byte offset into the log.
///
/// NUMD (NUMDU:NUMDL) is a 0's based number of dwords. NVMe 1.2 and 1.2a have instead a
/// 12-bit NUMD in CDW10 27:16 (31:28 reserved) and no offset; NUMDU and LPOL/LPOU came
/// in 1.2.1, and a controller reports them in LPA bit 2 ("extended data"). Since NUMDL
/// is CDW10 31:16, a transfer of at most 16 KiB (NUMD < 1000h) reads the same to both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetLogPageFields {
    /// LID, raw.
    pub lid: u8,
    /// LSP: Log Specific Field (4 bits).
    pub lsp: u8,
    /// RAE: Retain Asynchronous Event.
    pub rae: bool,
    /// NUMD: Number of Dwords, 0's based (NUMDU:NUMDL).
    pub numd: u32,
    /// LSI: Log Specific Identifier.
    pub lsi: u16,
    /// LPOU:LPOL: the byte offset into the log page.
    pub offset: u64,
}

impl GetLogPageFields {
    /// Decodes the dwords as a 1.2.1-or-later controller (LPA.extended_data) reads them.
    pub fn from_command(cmd: &Command) -> Self {
        GetLogPageFields {
            lid: cmd.cdw10 as u8,
            lsp: ((cmd.cdw10 >> 8) & 0xF) as u8,
            rae: cmd.cdw10 & (1 << 15) != 0,
            numd: (cmd.cdw10 >> 16) | (cmd.cdw11 & 0xFFFF) << 16,
            lsi: (cmd.cdw11 >> 16) as u16,
            offset: (cmd.cdw13 as u64) << 32 | cmd.cdw12 as u64,
        }
    }

    /// Decodes the dwords as a controller without extended data (NVMe 1.2 / 1.2a) reads
    /// them: NUMD in CDW10 27:16, no NUMDU, LSP, RAE, LSI or offset.
    pub fn from_command_without_extended_data(cmd: &Command) -> Self {
        GetLogPageFields {
            lid: cmd.cdw10 as u8,
            lsp: 0,
            rae: false,
            numd: (cmd.cdw10 >> 16) & 0xFFF,
            lsi: 0,
            offset: 0,
        }
    }

    /// The command for namespace `nsid` (FFFFFFFFh or 0 for controller-wide pages).
    pub fn to_command(&self, nsid: u32) -> Command {
        let mut cmd = Command::admin(AdminOpcode::GetLogPage);
        cmd.nsid = nsid;
        cmd.cdw10 = self.lid as u32 | ((self.lsp & 0xF) as u32) << 8 | (self.rae as u32) << 15 | self.numd << 16;
        cmd.cdw11 = self.numd >> 16 | (self.lsi as u32) << 16;
        cmd.cdw12 = self.offset as u32;
        cmd.cdw13 = (self.offset >> 32) as u32;
        cmd
    }

    /// The number of bytes the command transfers.
    pub fn bytes(&self) -> u64 {
        (self.numd as u64 + 1) * 4
    }
}

/// A Get Log Page command reading `bytes` (a non-zero multiple of 4) of log `lid` from
/// byte `offset`, with RAE as given (set it to leave an event's log unacknowledged).
/// The offset is sent as given: a controller must reject a misaligned one.
pub fn get_log_page(
    lid: impl Into<u8>,
    nsid: u32,
    bytes: u32,
    offset: u64,
    rae: bool,
) -> Result<Command, LogLengthError> {
    if bytes == 0 || !bytes.is_multiple_of(4) {
        return Err(LogLengthError { bytes });
    }
    let fields = GetLogPageFields { lid: lid.into(), lsp: 0, rae, numd: bytes / 4 - 1, lsi: 0, offset };
    Ok(fields.to_command(nsid))
}

// ---------------------------------------------------------------------------------------
// Error Information (01h)
// ---------------------------------------------------------------------------------------

/// Parameter Error Location of an error entry: byte (7:0) and bit (10:8) of the command
/// that held the error. FFFFh means not applicable.
#[bitfield(u16)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ParameterErrorLocation {
    /// Byte in the command that contained the error.
    pub byte: u8,
    /// Bit in that byte.
    #[bits(3)]
    pub bit: u8,
    #[bits(5)]
    __: u8,
}

impl ParameterErrorLocation {
    /// FFFFh: the error is not specific to a parameter.
    pub fn is_not_applicable(&self) -> bool {
        self.into_bits() == 0xFFFF
    }
}

/// "Get Log Page – Error Information Log Entry (Log Identifier 01h)" (64 bytes).
/// Transport Type and its specific information (bytes 29, 41:40) are NVMe 1.4; they
/// are reserved in 1.2a.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ErrorInformationEntry {
    /// Error Count: a unique, incrementing identifier; 0 marks an invalid entry.
    pub error_count: u64,
    /// Submission Queue ID of the failed command.
    pub sqid: u16,
    /// Command ID of the failed command.
    pub cid: u16,
    /// Status Field: bit 0 the Phase Tag posted, bits 15:1 the status.
    pub status_field: u16,
    pub parameter_error_location: ParameterErrorLocation,
    /// LBA: the first LBA that experienced the error.
    pub lba: u64,
    /// Namespace: the NSID of the namespace the error is associated with.
    pub nsid: u32,
    /// Vendor Specific Information Available: a vendor log page number, or 0.
    pub vendor_specific_log_page: u8,
    /// TRTYPE: Transport Type (NVMe 1.4).
    pub trtype: u8,
    pub rsvd30: [u8; 2],
    /// Command Specific Information.
    pub command_specific_information: u64,
    /// Transport Type Specific Information (NVMe 1.4).
    pub transport_type_specific_information: u16,
    pub rsvd42: [u8; 22],
}
assert_size!(ErrorInformationEntry, 64);

impl ErrorInformationEntry {
    /// The status of the failed command.
    pub fn status(&self) -> Status {
        Status::from_field(self.status_field >> 1)
    }

    /// The Phase Tag the completion carried.
    pub fn phase_tag(&self) -> bool {
        self.status_field & 1 != 0
    }
}

// ---------------------------------------------------------------------------------------
// SMART / Health Information (02h)
// ---------------------------------------------------------------------------------------

/// Critical Warning (byte 0 of the SMART / Health log).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct CriticalWarning {
    /// Bit 0: available spare capacity fell below the threshold.
    pub available_spare: bool,
    /// Bit 1: a temperature is above an over-temperature or below an under-temperature
    /// threshold.
    pub temperature: bool,
    /// Bit 2: NVM subsystem reliability is degraded by media errors or internal errors.
    pub reliability_degraded: bool,
    /// Bit 3: the media has been placed in read only mode.
    pub read_only: bool,
    /// Bit 4: the volatile memory backup device has failed.
    pub volatile_memory_backup_failed: bool,
    /// Bit 5: the Persistent Memory Region has become read-only (NVMe 1.4).
    pub pmr_read_only: bool,
    #[bits(2)]
    __: u8,
}

/// "Get Log Page – SMART / Health Information Log" (Log Identifier 02h, 512 bytes).
/// 128-bit counters and the (unaligned) composite temperature are little-endian types.
#[derive(Clone, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct SmartHealthLog {
    pub critical_warning: CriticalWarning,
    /// Composite Temperature, in kelvins (bytes 2:1).
    pub composite_temperature: U16,
    /// Available Spare, a normalized percentage (0 to 100).
    pub available_spare: u8,
    /// Available Spare Threshold, a normalized percentage.
    pub available_spare_threshold: u8,
    /// Percentage Used: an estimate of the life used (may exceed 100; 255 saturates).
    pub percentage_used: u8,
    /// Endurance Group Critical Warning Summary (NVMe 1.4).
    pub endurance_group_critical_warning: u8,
    pub rsvd7: [u8; 25],
    /// Data Units Read: thousands of 512-byte units read by the host.
    pub data_units_read: U128,
    /// Data Units Written: thousands of 512-byte units written by the host.
    pub data_units_written: U128,
    /// Host Read Commands completed.
    pub host_read_commands: U128,
    /// Host Write Commands completed.
    pub host_write_commands: U128,
    /// Controller Busy Time, in minutes.
    pub controller_busy_time: U128,
    /// Power Cycles.
    pub power_cycles: U128,
    /// Power On Hours.
    pub power_on_hours: U128,
    /// Unsafe Shutdowns.
    pub unsafe_shutdowns: U128,
    /// Media and Data Integrity Errors.
    pub media_errors: U128,
    /// Number of Error Information Log Entries over the life of the controller.
    pub error_log_entries: U128,
    /// Warning Composite Temperature Time, in minutes (NVMe 1.2).
    pub warning_temperature_time: u32,
    /// Critical Composite Temperature Time, in minutes (NVMe 1.2).
    pub critical_temperature_time: u32,
    /// Temperature Sensors 1–8, in kelvins (0: not implemented; NVMe 1.2).
    pub temperature_sensor: [u16; 8],
    /// Thermal Management Temperature 1 Transition Count (NVMe 1.3).
    pub thermal_management_t1_transitions: u32,
    /// Thermal Management Temperature 2 Transition Count (NVMe 1.3).
    pub thermal_management_t2_transitions: u32,
    /// Total Time For Thermal Management Temperature 1, in seconds (NVMe 1.3).
    pub thermal_management_t1_time: u32,
    /// Total Time For Thermal Management Temperature 2, in seconds (NVMe 1.3).
    pub thermal_management_t2_time: u32,
    pub rsvd232: [u8; 280],
}
assert_size!(SmartHealthLog, 512);

impl Default for SmartHealthLog {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

// ---------------------------------------------------------------------------------------
// Firmware Slot Information (03h)
// ---------------------------------------------------------------------------------------

/// AFI: Active Firmware Info (byte 0 of the Firmware Slot Information log).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Afi {
    /// Bits 2:0: the slot the running firmware came from.
    #[bits(3)]
    pub active_slot: u8,
    #[bits(1)]
    __: u8,
    /// Bits 6:4: the slot activated at the next reset (0: none indicated).
    #[bits(3)]
    pub next_slot: u8,
    #[bits(1)]
    __: u8,
}

/// "Get Log Page – Firmware Slot Information Log" (Log Identifier 03h, 512 bytes).
#[derive(Clone, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct FirmwareSlotLog {
    pub afi: Afi,
    pub rsvd1: [u8; 7],
    /// FRS1–FRS7: Firmware Revision for Slot 1 to 7 (ASCII; all zeros if empty).
    pub frs: [[u8; 8]; 7],
    pub rsvd64: [u8; 448],
}
assert_size!(FirmwareSlotLog, 512);

impl Default for FirmwareSlotLog {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

impl FirmwareSlotLog {
    /// The firmware revision in `slot` (1 to 7); `None` for another slot number or an
    /// all-zero (empty or unsupported) slot.
    pub fn revision(&self, slot: u8) -> Option<AsciiField> {
        let frs = self.frs.get((slot as usize).checked_sub(1)?)?;
        (frs.iter().any(|b| *b != 0)).then(|| AsciiField::new(frs))
    }
}

// ---------------------------------------------------------------------------------------
// Changed Namespace List (04h)
// ---------------------------------------------------------------------------------------

/// "Get Log Page – Changed Namespace List" (Log Identifier 04h, 4096 bytes): the NSIDs
/// whose Identify Namespace data changed since the log was last read, up to 1024, zero
/// filled after them. If more than 1024 changed, the first entry is FFFFFFFFh and the
/// rest are zero.
#[derive(Clone, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ChangedNamespaceList {
    pub nsid: [u32; 1024],
}
assert_size!(ChangedNamespaceList, 4096);

impl Default for ChangedNamespaceList {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

impl ChangedNamespaceList {
    pub const MAX: usize = 1024;
    /// The first entry when more than 1024 namespaces changed.
    pub const OVERFLOW: u32 = 0xFFFF_FFFF;

    /// The changed NSIDs up to the first zero entry (none when the list overflowed).
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        let n = if self.overflowed() { 0 } else { Self::MAX };
        self.nsid.iter().copied().take(n).take_while(|id| *id != 0)
    }

    /// True when more than 1024 namespaces changed (first entry FFFFFFFFh).
    pub fn overflowed(&self) -> bool {
        self.nsid[0] == Self::OVERFLOW
    }

    /// The log a controller returns for `ids`: the list itself, or the overflow form
    /// when there are more than 1024.
    pub fn from_ids(ids: &[u32]) -> Self {
        let mut log = Self::new_zeroed();
        if ids.len() > Self::MAX {
            log.nsid[0] = Self::OVERFLOW;
        } else {
            log.nsid[..ids.len()].copy_from_slice(ids);
        }
        log
    }
}

// ---------------------------------------------------------------------------------------
// Commands Supported and Effects (05h)
// ---------------------------------------------------------------------------------------

/// CSE: Command Submission and Execution (bits 18:16 of a command's effects).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandSubmission {
    /// 000b: no restriction.
    NoRestriction,
    /// 001b: submitted only when no other command is outstanding to the same namespace.
    ExclusiveToNamespace,
    /// 010b: submitted only when no other command is outstanding to any namespace.
    ExclusiveToController,
    /// 011b–111b: reserved.
    Reserved(u8),
}

impl CommandSubmission {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 7 {
            0 => Self::NoRestriction,
            1 => Self::ExclusiveToNamespace,
            2 => Self::ExclusiveToController,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::NoRestriction => 0,
            Self::ExclusiveToNamespace => 1,
            Self::ExclusiveToController => 2,
            Self::Reserved(r) => r & 7,
        }
    }
}

/// "Get Log Page – Commands Supported and Effects Data Structure": one command's entry.
#[bitfield(u32)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct CommandEffects {
    /// Bit 0: CSUPP, the command is supported.
    pub csupp: bool,
    /// Bit 1: LBCC, Logical Block Content Change.
    pub lbcc: bool,
    /// Bit 2: NCC, Namespace Capability Change.
    pub ncc: bool,
    /// Bit 3: NIC, Namespace Inventory Change.
    pub nic: bool,
    /// Bit 4: CCC, Controller Capability Change.
    pub ccc: bool,
    #[bits(11)]
    __: u16,
    /// Bits 18:16: CSE, Command Submission and Execution.
    #[bits(3)]
    pub cse: CommandSubmission,
    /// Bit 19: UUID Selection Supported (NVMe 1.4).
    pub uuid_selection: bool,
    #[bits(12)]
    __: u16,
}

/// "Get Log Page – Commands Supported and Effects Log" (Log Identifier 05h, 4096 bytes):
/// ACS0–ACS255 for admin opcodes, IOCS0–IOCS255 for I/O opcodes. NVMe 1.2 and later.
#[derive(Clone, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct CommandsSupportedAndEffects {
    /// ACS: Admin Command Supported, indexed by opcode.
    pub acs: [CommandEffects; 256],
    /// IOCS: I/O Command Supported, indexed by opcode.
    pub iocs: [CommandEffects; 256],
    pub rsvd2048: [u8; 2048],
}
assert_size!(CommandsSupportedAndEffects, 4096);

impl Default for CommandsSupportedAndEffects {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

impl CommandsSupportedAndEffects {
    /// The effects of admin opcode `opcode`.
    pub fn admin(&self, opcode: u8) -> CommandEffects {
        self.acs[opcode as usize]
    }

    /// The effects of I/O opcode `opcode`.
    pub fn io(&self, opcode: u8) -> CommandEffects {
        self.iocs[opcode as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn get_log_page_dwords_follow_the_1_4_layout() {
        let cmd = get_log_page(LogPageId::SmartHealth, 0xFFFF_FFFF, 512, 0x1_0000_0200, true).unwrap();
        assert_eq!(cmd.opcode, 0x02);
        assert_eq!(cmd.nsid, 0xFFFF_FFFF);
        // LID 02h, RAE (bit 15), NUMDL 127 (bits 31:16).
        assert_eq!(cmd.cdw10, 127 << 16 | 1 << 15 | 0x02);
        assert_eq!(cmd.cdw11, 0);
        assert_eq!((cmd.cdw12, cmd.cdw13), (0x200, 1));
        let f = GetLogPageFields::from_command(&cmd);
        assert_eq!(f, GetLogPageFields { lid: 2, lsp: 0, rae: true, numd: 127, lsi: 0, offset: 0x1_0000_0200 });
        assert_eq!(f.bytes(), 512);
    }

    #[test]
    fn numd_beyond_16_bits_goes_to_numdu() {
        let f = GetLogPageFields { lid: 7, lsp: 1, rae: false, numd: 0x3_0004, lsi: 0xABCD, offset: 0 };
        let cmd = f.to_command(0);
        assert_eq!(cmd.cdw10, 0x0004_0107);
        assert_eq!(cmd.cdw11, 0xABCD_0003);
        assert_eq!(GetLogPageFields::from_command(&cmd), f);
    }

    #[test]
    fn a_1_2_controller_reads_the_same_numd_up_to_16_kib() {
        for bytes in [4, 512, 4096, 16 * 1024] {
            let cmd = get_log_page(LogPageId::ErrorInformation, 0xFFFF_FFFF, bytes, 0, false).unwrap();
            let new = GetLogPageFields::from_command(&cmd);
            let old = GetLogPageFields::from_command_without_extended_data(&cmd);
            assert_eq!(old.numd, new.numd, "{bytes} bytes");
            assert_eq!(old.bytes(), bytes as u64);
        }
        // Above 16 KiB, NUMDL's bits 31:28 are set, which a 1.2 controller ignores.
        let cmd = get_log_page(LogPageId::ErrorInformation, 0, 16 * 1024 + 4, 0, false).unwrap();
        assert_eq!(GetLogPageFields::from_command_without_extended_data(&cmd).numd, 0);
    }

    #[test]
    fn transfer_length_must_be_whole_dwords() {
        assert_eq!(get_log_page(0x02u8, 0, 0, 0, false), Err(LogLengthError { bytes: 0 }));
        assert_eq!(get_log_page(0x02u8, 0, 6, 0, false), Err(LogLengthError { bytes: 6 }));
        let cmd = get_log_page(0xC0u8, 0, 4, 0, false).unwrap();
        assert_eq!(cmd.cdw10, 0xC0);
        for lid in LogPageId::ALL {
            assert_eq!(LogPageId::from_u8(lid as u8), Some(lid));
        }
        assert_eq!(LogPageId::from_u8(0x09), None);
    }

    #[test]
    fn error_entry_fields_sit_at_their_bytes() {
        assert_eq!(offset_of!(ErrorInformationEntry, sqid), 8);
        assert_eq!(offset_of!(ErrorInformationEntry, cid), 10);
        assert_eq!(offset_of!(ErrorInformationEntry, status_field), 12);
        assert_eq!(offset_of!(ErrorInformationEntry, parameter_error_location), 14);
        assert_eq!(offset_of!(ErrorInformationEntry, lba), 16);
        assert_eq!(offset_of!(ErrorInformationEntry, nsid), 24);
        assert_eq!(offset_of!(ErrorInformationEntry, vendor_specific_log_page), 28);
        assert_eq!(offset_of!(ErrorInformationEntry, trtype), 29);
        assert_eq!(offset_of!(ErrorInformationEntry, command_specific_information), 32);
        assert_eq!(offset_of!(ErrorInformationEntry, transport_type_specific_information), 40);
        let mut b = [0u8; 64];
        b[12..14].copy_from_slice(&(0x4002u16 << 1 | 1).to_le_bytes()); // DNR | Invalid Field, P
        b[14..16].copy_from_slice(&(40u16 | 3 << 8).to_le_bytes()); // byte 40, bit 3
        let e = ErrorInformationEntry::read_from_bytes(&b).unwrap();
        assert!(e.status().same_code(&Status::INVALID_FIELD) && e.status().dnr);
        assert!(e.phase_tag());
        assert_eq!((e.parameter_error_location.byte(), e.parameter_error_location.bit()), (40, 3));
        assert!(ParameterErrorLocation::from_bits(0xFFFF).is_not_applicable());
    }

    #[test]
    fn smart_log_fields_sit_at_their_bytes() {
        assert_eq!(offset_of!(SmartHealthLog, composite_temperature), 1);
        assert_eq!(offset_of!(SmartHealthLog, available_spare), 3);
        assert_eq!(offset_of!(SmartHealthLog, percentage_used), 5);
        assert_eq!(offset_of!(SmartHealthLog, endurance_group_critical_warning), 6);
        assert_eq!(offset_of!(SmartHealthLog, data_units_read), 32);
        assert_eq!(offset_of!(SmartHealthLog, data_units_written), 48);
        assert_eq!(offset_of!(SmartHealthLog, host_read_commands), 64);
        assert_eq!(offset_of!(SmartHealthLog, controller_busy_time), 96);
        assert_eq!(offset_of!(SmartHealthLog, power_cycles), 112);
        assert_eq!(offset_of!(SmartHealthLog, power_on_hours), 128);
        assert_eq!(offset_of!(SmartHealthLog, unsafe_shutdowns), 144);
        assert_eq!(offset_of!(SmartHealthLog, media_errors), 160);
        assert_eq!(offset_of!(SmartHealthLog, error_log_entries), 176);
        assert_eq!(offset_of!(SmartHealthLog, warning_temperature_time), 192);
        assert_eq!(offset_of!(SmartHealthLog, critical_temperature_time), 196);
        assert_eq!(offset_of!(SmartHealthLog, temperature_sensor), 200);
        assert_eq!(offset_of!(SmartHealthLog, thermal_management_t1_transitions), 216);
        assert_eq!(offset_of!(SmartHealthLog, thermal_management_t2_time), 228);
        let mut b = [0u8; 512];
        b[0] = 0b1001; // spare below threshold, read only
        b[1..3].copy_from_slice(&310u16.to_le_bytes());
        b[48..64].copy_from_slice(&(u64::MAX as u128 + 5).to_le_bytes());
        let log = SmartHealthLog::read_from_bytes(&b).unwrap();
        assert!(log.critical_warning.available_spare() && log.critical_warning.read_only());
        assert!(!log.critical_warning.temperature());
        assert_eq!(log.composite_temperature.get(), 310);
        assert_eq!(log.data_units_written.get(), u64::MAX as u128 + 5);
    }

    #[test]
    fn firmware_slot_log_reports_active_slot_and_revisions() {
        assert_eq!(offset_of!(FirmwareSlotLog, frs), 8);
        let mut log = FirmwareSlotLog { afi: Afi::new().with_active_slot(2).with_next_slot(3), ..Default::default() };
        log.frs[1] = *b"2.1.0   ";
        assert_eq!(log.as_bytes()[0], 0x32);
        assert_eq!(&log.as_bytes()[16..24], b"2.1.0   ");
        assert_eq!(log.revision(2).unwrap().text, "2.1.0");
        assert_eq!(log.revision(1), None);
        assert_eq!(log.revision(0), None);
        assert_eq!(log.revision(8), None);
    }

    #[test]
    fn changed_namespace_list_overflows_past_1024() {
        let log = ChangedNamespaceList::from_ids(&[4, 9]);
        assert_eq!(log.ids().collect::<Vec<_>>(), [4, 9]);
        assert!(!log.overflowed());
        let many: Vec<u32> = (1..=1025).collect();
        let log = ChangedNamespaceList::from_ids(&many);
        assert!(log.overflowed());
        assert_eq!(log.ids().count(), 0);
        assert!(log.nsid[1..].iter().all(|id| *id == 0));
        assert_eq!(ChangedNamespaceList::from_ids(&many[..1024]).ids().count(), 1024);
    }

    #[test]
    fn command_effects_follow_their_bits() {
        let e = CommandEffects::from_bits(1 | 1 << 1 | 1 << 3 | 2 << 16 | 1 << 19);
        assert!(e.csupp() && e.lbcc() && e.nic() && !e.ncc() && !e.ccc());
        assert_eq!(e.cse(), CommandSubmission::ExclusiveToController);
        assert!(e.uuid_selection());
        assert_eq!(CommandEffects::from_bits(5 << 16).cse(), CommandSubmission::Reserved(5));
        let mut b = vec![0u8; 4096];
        b[0x80 * 4] = 0b1111; // Format NVM: CSUPP, LBCC, NCC, NIC
        b[1024 + 4] = 0b11; // Write: CSUPP, LBCC
        let log = CommandsSupportedAndEffects::read_from_bytes(&b).unwrap();
        assert!(log.admin(0x80).nic() && log.admin(0x80).ncc());
        assert!(log.io(0x01).lbcc() && !log.io(0x02).csupp());
    }
}
