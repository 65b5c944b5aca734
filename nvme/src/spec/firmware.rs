//! Firmware Image Download (admin 11h, NVMe 1.4 §5.13) and Firmware Commit (admin 10h,
//! §5.12), with the firmware fields of Identify Controller they depend on (FRMW in
//! [`super::identify::Frmw`], FWUG, MTFA) and the Firmware Slot Information log
//! ([`super::log::FirmwareSlotLog`]). Both commands are supported when OACS bit 2 is set.

use bitfield_struct::bitfield;

use super::{AdminOpcode, Command};

/// CA: Commit Action (Firmware Commit CDW10 bits 05:03, Figure 172 in 1.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitAction {
    /// 000b: the downloaded image replaces the image in the slot; not activated.
    Replace,
    /// 001b: the downloaded image replaces the image in the slot and is activated at
    /// the next reset.
    ReplaceAndActivateAtReset,
    /// 010b: the image already in the slot is activated at the next reset.
    ActivateAtReset,
    /// 011b: the downloaded image replaces the image in the slot and is activated
    /// immediately, without a reset (FRMW bit 4).
    ReplaceAndActivateNow,
    /// 100b–111b: reserved here (boot partitions use 110b and 111b).
    Reserved(u8),
}

impl CommitAction {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 7 {
            0 => Self::Replace,
            1 => Self::ReplaceAndActivateAtReset,
            2 => Self::ActivateAtReset,
            3 => Self::ReplaceAndActivateNow,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::Replace => 0,
            Self::ReplaceAndActivateAtReset => 1,
            Self::ActivateAtReset => 2,
            Self::ReplaceAndActivateNow => 3,
            Self::Reserved(r) => r & 7,
        }
    }

    /// Whether the action puts the downloaded image into the slot.
    pub const fn replaces(self) -> bool {
        matches!(self, Self::Replace | Self::ReplaceAndActivateAtReset | Self::ReplaceAndActivateNow)
    }
}

/// "Firmware Commit – Command Dword 10".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct FirmwareCommitCdw10 {
    /// FS: Firmware Slot (bits 02:00); 0 lets the controller choose the slot.
    #[bits(3)]
    pub fs: u8,
    /// CA: Commit Action (bits 05:03).
    #[bits(3)]
    pub ca: CommitAction,
    #[bits(25)]
    __: u32,
    /// BPID: Boot Partition ID (bit 31).
    pub bpid: bool,
}

/// A Firmware Commit of slot `fs` with `action`.
pub fn firmware_commit(fs: u8, action: CommitAction) -> Command {
    let mut cmd = Command::admin(AdminOpcode::FirmwareCommit);
    cmd.cdw10 = FirmwareCommitCdw10::new().with_fs(fs).with_ca(action).into_bits();
    cmd
}

/// A Firmware Image Download of `bytes` bytes at byte `offset` of the image: NUMD the
/// dword count, 0's based (CDW10), OFST the offset in dwords (CDW11). `None` when either
/// is not a whole number of dwords or the count is zero.
pub fn firmware_image_download(bytes: u32, offset: u64) -> Option<Command> {
    if bytes == 0 || !bytes.is_multiple_of(4) || !offset.is_multiple_of(4) || offset / 4 > u32::MAX as u64 {
        return None;
    }
    let mut cmd = Command::admin(AdminOpcode::FirmwareImageDownload);
    cmd.cdw10 = bytes / 4 - 1;
    cmd.cdw11 = (offset / 4) as u32;
    Some(cmd)
}

/// The transfer a Firmware Image Download command asks for: (bytes, byte offset).
pub fn download_extent(cmd: &Command) -> (u64, u64) {
    ((cmd.cdw10 as u64 + 1) * 4, cmd.cdw11 as u64 * 4)
}

/// FWUG (Identify Controller byte 319, NVMe 1.3) as a granularity in bytes: `None` when
/// no restriction is reported (0h: no information; FFh: no restriction).
pub fn update_granularity(fwug: u8) -> Option<u64> {
    match fwug {
        0 | 0xFF => None,
        n => Some(n as u64 * 4096),
    }
}

/// MTFA (Identify Controller bytes 259:258, units of 100 ms) in milliseconds; `None`
/// when not reported (0).
pub fn max_activation_ms(mtfa: u16) -> Option<u64> {
    (mtfa != 0).then_some(mtfa as u64 * 100)
}

/// Asynchronous Event Information of the notice raised when an activation without reset
/// begins: 01h Firmware Activation Starting (event type 010b, log page 03h).
pub const NOTICE_FIRMWARE_ACTIVATION_STARTING: u8 = 0x01;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_fields_sit_where_the_figure_puts_them() {
        let c = firmware_commit(2, CommitAction::ReplaceAndActivateNow);
        assert_eq!((c.opcode, c.cdw10), (0x10, 2 | 3 << 3));
        let f = FirmwareCommitCdw10::from_bits(c.cdw10);
        assert_eq!((f.fs(), f.ca()), (2, CommitAction::ReplaceAndActivateNow));
        assert!(CommitAction::Replace.replaces() && !CommitAction::ActivateAtReset.replaces());
    }

    #[test]
    fn download_counts_dwords_zero_based() {
        let d = firmware_image_download(8192, 4096).unwrap();
        assert_eq!((d.opcode, d.cdw10, d.cdw11), (0x11, 2047, 1024));
        assert_eq!(download_extent(&d), (8192, 4096));
        assert!(firmware_image_download(6, 0).is_none());
        assert!(firmware_image_download(0, 0).is_none());
        assert_eq!(update_granularity(2), Some(8192));
        assert_eq!(update_granularity(0xFF), None);
        assert_eq!(max_activation_ms(50), Some(5000));
    }
}
