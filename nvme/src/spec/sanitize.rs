//! Sanitize (admin 84h, NVMe 1.4 §5.24, the operation in §8.15 "Sanitize Operations")
//! and the Sanitize Status log page (Log Identifier 81h, §5.14.1.16), both NVMe 1.3 and
//! later. A controller supports Sanitize when SANICAP (Identify Controller bytes
//! 331:328) reports at least one operation.

use bitfield_struct::bitfield;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use super::{AdminOpcode, Command};
use crate::assert_size;

/// SANACT: Sanitize Action (CDW10 bits 02:00).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SanitizeAction {
    /// 001b: Exit Failure Mode.
    ExitFailureMode,
    /// 010b: Start a Block Erase sanitize operation.
    BlockErase,
    /// 011b: Start an Overwrite sanitize operation.
    Overwrite,
    /// 100b: Start a Crypto Erase sanitize operation.
    CryptoErase,
    /// 000b and 101b–111b: reserved.
    Reserved(u8),
}

impl SanitizeAction {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 7 {
            1 => Self::ExitFailureMode,
            2 => Self::BlockErase,
            3 => Self::Overwrite,
            4 => Self::CryptoErase,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::ExitFailureMode => 1,
            Self::BlockErase => 2,
            Self::Overwrite => 3,
            Self::CryptoErase => 4,
            Self::Reserved(r) => r & 7,
        }
    }

    /// The operation's name as §8.15 gives it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::ExitFailureMode => "Exit Failure Mode",
            Self::BlockErase => "Block Erase",
            Self::Overwrite => "Overwrite",
            Self::CryptoErase => "Crypto Erase",
            Self::Reserved(_) => "reserved action",
        }
    }
}

/// "Sanitize – Command Dword 10" (Figure 310 in 1.4). CDW11 is the Overwrite Pattern.
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct SanitizeCdw10 {
    /// SANACT: Sanitize Action (bits 02:00).
    #[bits(3)]
    pub sanact: SanitizeAction,
    /// AUSE: Allow Unrestricted Sanitize Exit (bit 03): a failed operation leaves the
    /// controller in unrestricted failure mode, from which Exit Failure Mode may leave.
    pub ause: bool,
    /// OWPASS: Overwrite Pass Count (bits 07:04); 0h means 16 passes.
    #[bits(4)]
    pub owpass: u8,
    /// OIPBP: Overwrite Invert Pattern Between Passes (bit 08).
    pub oipbp: bool,
    /// NDAS: No-Deallocate After Sanitize (bit 09): the controller shall not deallocate
    /// the user data after the operation (unless SANICAP.NDI inhibits it).
    pub ndas: bool,
    #[bits(22)]
    __: u32,
}

impl SanitizeCdw10 {
    /// The number of overwrite passes OWPASS asks for (0h: 16).
    pub fn passes(&self) -> u8 {
        match self.owpass() {
            0 => 16,
            n => n,
        }
    }
}

/// A Sanitize command. NSID is not used (the operation applies to the NVM subsystem).
pub fn sanitize(cdw10: SanitizeCdw10, overwrite_pattern: u32) -> Command {
    let mut cmd = Command::admin(AdminOpcode::Sanitize);
    cmd.cdw10 = cdw10.into_bits();
    cmd.cdw11 = overwrite_pattern;
    cmd
}

/// What an overwrite of `passes` passes with `pattern` leaves on the media: the
/// pattern, inverted between passes when `invert` is set (OIPBP), so the last pass
/// writes the inverse when the pass count is even.
pub fn final_overwrite_pattern(pattern: u32, passes: u8, invert: bool) -> u32 {
    if invert && passes.is_multiple_of(2) {
        !pattern
    } else {
        pattern
    }
}

/// SSTAT bits 02:00: Status of the most recent sanitize operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SanitizeStatus {
    /// 000b: the NVM subsystem has never been sanitized.
    NeverSanitized,
    /// 001b: the most recent sanitize operation completed successfully.
    Completed,
    /// 010b: a sanitize operation is in progress.
    InProgress,
    /// 011b: the most recent sanitize operation failed.
    Failed,
    /// 100b: the most recent sanitize operation, for which No-Deallocate After Sanitize
    /// was requested, completed successfully with deallocation of all user data.
    CompletedWithDeallocation,
    /// 101b–111b: reserved.
    Reserved(u8),
}

impl SanitizeStatus {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 7 {
            0 => Self::NeverSanitized,
            1 => Self::Completed,
            2 => Self::InProgress,
            3 => Self::Failed,
            4 => Self::CompletedWithDeallocation,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::NeverSanitized => 0,
            Self::Completed => 1,
            Self::InProgress => 2,
            Self::Failed => 3,
            Self::CompletedWithDeallocation => 4,
            Self::Reserved(r) => r & 7,
        }
    }
}

/// SSTAT: Sanitize Status (bytes 03:02 of the log).
#[bitfield(u16)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Sstat {
    /// Bits 02:00: status of the most recent sanitize operation.
    #[bits(3)]
    pub status: SanitizeStatus,
    /// Bits 07:03: Overwrite Passes Completed (of an overwrite in progress or failed).
    #[bits(5)]
    pub passes_completed: u8,
    /// Bit 08: Global Data Erased: no user data has been written since the most recent
    /// successful sanitize operation (or ever).
    pub global_data_erased: bool,
    #[bits(7)]
    __: u16,
}

/// SPROG value when no sanitize operation is in progress.
pub const SPROG_NOT_IN_PROGRESS: u16 = 0xFFFF;

/// An estimated time field's value meaning "no time is reported".
pub const TIME_NOT_REPORTED: u32 = 0xFFFF_FFFF;

/// "Get Log Page – Sanitize Status Log" (Log Identifier 81h, 512 bytes, NVMe 1.4).
/// Estimated times are in seconds; FFFFFFFFh: not reported; 0: the operation is not
/// supported (ETBE, ETCE) or no time is given.
#[derive(Clone, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct SanitizeStatusLog {
    /// SPROG: Sanitize Progress, the fraction complete as a numerator of 65536
    /// (FFFFh when no operation is in progress).
    pub sprog: u16,
    pub sstat: Sstat,
    /// SCDW10: Command Dword 10 of the Sanitize command that started the most recent
    /// (or current) operation.
    pub scdw10: u32,
    /// Estimated Time For Overwrite (no-deallocate not requested).
    pub eto: u32,
    /// Estimated Time For Block Erase.
    pub etbe: u32,
    /// Estimated Time For Crypto Erase.
    pub etce: u32,
    /// Estimated Time For Overwrite With No-Deallocate Media Modification (1.4).
    pub etond: u32,
    /// Estimated Time For Block Erase With No-Deallocate Media Modification (1.4).
    pub etbend: u32,
    /// Estimated Time For Crypto Erase With No-Deallocate Media Modification (1.4).
    pub etcend: u32,
    pub rsvd32: [u8; 480],
}
assert_size!(SanitizeStatusLog, 512);

impl Default for SanitizeStatusLog {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// Asynchronous Event Information of the I/O Command Specific status events (event
/// type 110b, Figure 146): 01h Sanitize Operation Completed.
pub const EVENT_SANITIZE_COMPLETED: u8 = 0x01;
/// 02h: Sanitize Operation Completed With Unexpected Deallocation.
pub const EVENT_SANITIZE_COMPLETED_UNEXPECTED_DEALLOCATION: u8 = 0x02;
/// Asynchronous Event Type 110b: I/O Command Specific status.
pub const EVENT_TYPE_IO_COMMAND_SPECIFIC: u8 = 6;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdw10_fields_sit_where_figure_310_puts_them() {
        let c = SanitizeCdw10::new()
            .with_sanact(SanitizeAction::Overwrite)
            .with_ause(true)
            .with_owpass(3)
            .with_oipbp(true)
            .with_ndas(true);
        assert_eq!(c.into_bits(), 0b11_0011_1011);
        let cmd = sanitize(c, 0xDEAD_BEEF);
        assert_eq!((cmd.opcode, cmd.cdw11), (0x84, 0xDEAD_BEEF));
        assert_eq!(SanitizeCdw10::new().passes(), 16);
        assert_eq!(SanitizeCdw10::from_bits(0).sanact(), SanitizeAction::Reserved(0));
    }

    #[test]
    fn an_even_inverted_overwrite_ends_on_the_inverse() {
        assert_eq!(final_overwrite_pattern(0x0F0F_0F0F, 2, true), 0xF0F0_F0F0);
        assert_eq!(final_overwrite_pattern(0x0F0F_0F0F, 3, true), 0x0F0F_0F0F);
        assert_eq!(final_overwrite_pattern(0x0F0F_0F0F, 2, false), 0x0F0F_0F0F);
    }

    #[test]
    fn status_log_layout() {
        use core::mem::offset_of;
        assert_eq!(offset_of!(SanitizeStatusLog, sstat), 2);
        assert_eq!(offset_of!(SanitizeStatusLog, scdw10), 4);
        assert_eq!(offset_of!(SanitizeStatusLog, etce), 16);
        assert_eq!(offset_of!(SanitizeStatusLog, etcend), 28);
        let s =
            Sstat::new().with_status(SanitizeStatus::InProgress).with_passes_completed(3).with_global_data_erased(true);
        assert_eq!(s.into_bits(), 0x11A);
    }
}
