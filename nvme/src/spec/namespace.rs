//! Namespace Management (admin 0Dh, NVMe 1.4 §5.20), Namespace Attachment (admin 15h,
//! §5.19) and Format NVM (admin 80h, §5.23): the commands that create, delete, attach,
//! detach and format namespaces.
//!
//! This module owns these commands' dwords and the statuses the spec gives each; the
//! data they carry are [`IdentifyNamespace`] (create) and [`ControllerList`]
//! (attach / detach). Namespace Management and Namespace Attachment are NVMe 1.2 and
//! later, reported in OACS bit 3.
//!
//! [`IdentifyNamespace`]: crate::spec::identify::IdentifyNamespace
//! [`ControllerList`]: crate::spec::identify::ControllerList

use crate::spec::command::{AdminOpcode, Command, Completion};
use bitfield_struct::bitfield;

/// NSID FFFFFFFFh: every namespace (delete all, format all).
pub const ALL_NAMESPACES: u32 = 0xFFFF_FFFF;

// ---------------------------------------------------------------------------------------
// Namespace Management
// ---------------------------------------------------------------------------------------

/// SEL of Namespace Management ("Namespace Management – Command Dword 10", bits 03:00).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamespaceManagementSel {
    /// 0h: Create. The data buffer is an Identify Namespace structure whose
    /// host-specified fields (NSZE, NCAP, FLBAS, DPS, NMIC; ANAGRPID and NVMSETID in 1.4)
    /// describe the namespace; the other fields are ignored. The NSID field is reserved.
    /// On success CQE DW0 holds the NSID created (see [`created_nsid`]).
    ///
    /// Statuses (§5.20): Namespace Insufficient Capacity (NCAP beyond the unallocated
    /// capacity); Namespace Identifier Unavailable (no free NSID, NN reached); Thin
    /// Provisioning Not Supported (NCAP < NSZE without thin provisioning); Invalid Format
    /// (FLBAS or DPS the controller does not support); ANA Group Identifier Invalid (1.4).
    Create,
    /// 1h: Delete the namespace the NSID names, or every namespace for FFFFFFFFh; it
    /// is detached from all controllers first. Statuses: Invalid Field in Command for an
    /// NSID that is not allocated.
    Delete,
    /// 2h–Fh: reserved (Invalid Field in Command).
    Reserved(u8),
}

impl NamespaceManagementSel {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0xF {
            0 => Self::Create,
            1 => Self::Delete,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::Create => 0,
            Self::Delete => 1,
            Self::Reserved(r) => r & 0xF,
        }
    }
}

impl From<&Command> for NamespaceManagementSel {
    /// SEL of a Namespace Management command (the opcode is not checked).
    fn from(cmd: &Command) -> Self {
        Self::from_bits(cmd.cdw10 as u8)
    }
}

/// A Namespace Management command with `sel` for `nsid`.
pub fn namespace_management(sel: NamespaceManagementSel, nsid: u32) -> Command {
    let mut cmd = Command::admin(AdminOpcode::NamespaceManagement);
    cmd.nsid = nsid;
    cmd.cdw10 = sel.into_bits() as u32;
    cmd
}

/// Namespace Management – Create. Send it with the 4096-byte host-specified data
/// ([`IdentifyNamespace::for_create`](crate::spec::identify::IdentifyNamespace::for_create)).
pub fn namespace_create() -> Command {
    namespace_management(NamespaceManagementSel::Create, 0)
}

/// Namespace Management – Delete of `nsid` ([`ALL_NAMESPACES`] deletes every one).
pub fn namespace_delete(nsid: u32) -> Command {
    namespace_management(NamespaceManagementSel::Delete, nsid)
}

/// The NSID a successful Namespace Management – Create allocated (CQE DW0).
pub fn created_nsid(completion: &Completion) -> u32 {
    completion.dw0
}

// ---------------------------------------------------------------------------------------
// Namespace Attachment
// ---------------------------------------------------------------------------------------

/// SEL of Namespace Attachment ("Namespace Attachment – Command Dword 10", bits 03:00).
/// The data buffer is a Controller List of the controllers to attach or detach.
///
/// Statuses (§5.19): Namespace Already Attached (attaching to a controller it is
/// attached to); Namespace Is Private (attaching a private namespace to a second
/// controller, or listing more than one); Namespace Not Attached (detaching from a
/// controller it is not attached to); Controller List Invalid (a malformed list or an
/// unknown controller); ANA Attach Failed (1.4); Invalid Field in Command for an NSID
/// that is not allocated, or FFFFFFFFh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamespaceAttachmentSel {
    /// 0h: Controller Attach.
    Attach,
    /// 1h: Controller Detach.
    Detach,
    /// 2h–Fh: reserved (Invalid Field in Command).
    Reserved(u8),
}

impl NamespaceAttachmentSel {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0xF {
            0 => Self::Attach,
            1 => Self::Detach,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::Attach => 0,
            Self::Detach => 1,
            Self::Reserved(r) => r & 0xF,
        }
    }
}

impl From<&Command> for NamespaceAttachmentSel {
    /// SEL of a Namespace Attachment command (the opcode is not checked).
    fn from(cmd: &Command) -> Self {
        Self::from_bits(cmd.cdw10 as u8)
    }
}

/// A Namespace Attachment command with `sel` for `nsid`; send it with a 4096-byte
/// [`ControllerList`](crate::spec::identify::ControllerList).
pub fn namespace_attachment(sel: NamespaceAttachmentSel, nsid: u32) -> Command {
    let mut cmd = Command::admin(AdminOpcode::NamespaceAttachment);
    cmd.nsid = nsid;
    cmd.cdw10 = sel.into_bits() as u32;
    cmd
}

/// Namespace Attachment – Controller Attach of `nsid`.
pub fn namespace_attach(nsid: u32) -> Command {
    namespace_attachment(NamespaceAttachmentSel::Attach, nsid)
}

/// Namespace Attachment – Controller Detach of `nsid`.
pub fn namespace_detach(nsid: u32) -> Command {
    namespace_attachment(NamespaceAttachmentSel::Detach, nsid)
}

// ---------------------------------------------------------------------------------------
// Format NVM
// ---------------------------------------------------------------------------------------

/// SES: Secure Erase Settings (Format NVM CDW10 bits 11:09).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecureErase {
    /// 000b: no secure erase requested.
    None,
    /// 001b: User Data Erase: user data is erased; its content afterwards is
    /// indeterminate (it may read back as zeroes, ones or anything).
    UserData,
    /// 010b: Cryptographic Erase: the encryption key is deleted (supported when FNA
    /// bit 2 is set).
    Cryptographic,
    /// 011b–111b: reserved.
    Reserved(u8),
}

impl SecureErase {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 7 {
            0 => Self::None,
            1 => Self::UserData,
            2 => Self::Cryptographic,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::None => 0,
            Self::UserData => 1,
            Self::Cryptographic => 2,
            Self::Reserved(r) => r & 7,
        }
    }
}

/// "Format NVM – Command Dword 10". The NSID names the namespace, or FFFFFFFFh for all
/// (FNA bit 0 / bit 1 say when a format / secure erase always applies to all).
///
/// Statuses (§5.23): Invalid Format (an LBA format, metadata or protection setting the
/// namespace does not support); Invalid Namespace or Format (an NSID that is not
/// active); Invalid Field in Command (a reserved or unsupported SES, such as a
/// Cryptographic Erase without FNA bit 2); Sanitize In Progress (1.3). While the format
/// runs, commands to the namespace may complete with Format In Progress.
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct FormatNvm {
    /// LBAF: LBA Format, the index into LBAF0–LBAF15 (bits 03:00).
    #[bits(4)]
    pub lbaf: u8,
    /// MSET: Metadata Settings; set, metadata is transferred in the extended data LBA,
    /// clear, in a separate buffer (bit 04).
    pub mset: bool,
    /// PI: Protection Information, 000b none, 001b–011b Type 1–3 (bits 07:05).
    #[bits(3)]
    pub pi: u8,
    /// PIL: Protection Information Location; set, the first eight bytes of metadata,
    /// clear, the last eight (bit 08).
    pub pil: bool,
    /// SES: Secure Erase Settings (bits 11:09).
    #[bits(3)]
    pub ses: SecureErase,
    #[bits(20)]
    __: u32,
}

impl FormatNvm {
    /// CDW10 of a Format NVM command (the opcode is not checked).
    pub fn from_command(cmd: &Command) -> Self {
        Self::from_bits(cmd.cdw10)
    }
}

/// A Format NVM command of `nsid` ([`ALL_NAMESPACES`] for all) with `settings`.
pub fn format_nvm(nsid: u32, settings: FormatNvm) -> Command {
    let mut cmd = Command::admin(AdminOpcode::FormatNvm);
    cmd.nsid = nsid;
    cmd.cdw10 = settings.into_bits();
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_management_sel_is_cdw10_bits_3_0() {
        let create = namespace_create();
        assert_eq!((create.opcode, create.nsid, create.cdw10), (0x0D, 0, 0));
        assert_eq!(NamespaceManagementSel::from(&create), NamespaceManagementSel::Create);
        let delete = namespace_delete(ALL_NAMESPACES);
        assert_eq!((delete.nsid, delete.cdw10), (0xFFFF_FFFF, 1));
        assert_eq!(NamespaceManagementSel::from(&delete), NamespaceManagementSel::Delete);
        let reserved = namespace_management(NamespaceManagementSel::Reserved(0xF), 1);
        assert_eq!(reserved.cdw10, 0xF);
        assert_eq!(NamespaceManagementSel::from(&reserved), NamespaceManagementSel::Reserved(0xF));
        let done = Completion { dw0: 3, ..Default::default() };
        assert_eq!(created_nsid(&done), 3);
    }

    #[test]
    fn namespace_attachment_sel_is_cdw10_bits_3_0() {
        let attach = namespace_attach(2);
        assert_eq!((attach.opcode, attach.nsid, attach.cdw10), (0x15, 2, 0));
        assert_eq!(NamespaceAttachmentSel::from(&attach), NamespaceAttachmentSel::Attach);
        let detach = namespace_detach(2);
        assert_eq!(detach.cdw10, 1);
        assert_eq!(NamespaceAttachmentSel::from(&detach), NamespaceAttachmentSel::Detach);
        let mut odd = detach;
        odd.cdw10 = 0xFFFF_FFF4; // only bits 3:0 are SEL
        assert_eq!(NamespaceAttachmentSel::from(&odd), NamespaceAttachmentSel::Reserved(4));
    }

    #[test]
    fn format_nvm_fields_sit_at_their_bits() {
        let settings = FormatNvm::new()
            .with_lbaf(1)
            .with_mset(true)
            .with_pi(1)
            .with_pil(true)
            .with_ses(SecureErase::Cryptographic);
        let cmd = format_nvm(1, settings);
        assert_eq!(cmd.opcode, 0x80);
        assert_eq!(cmd.nsid, 1);
        // LBAF 1 | MSET (4) | PI 1 (7:5) | PIL (8) | SES 2 (11:9)
        assert_eq!(cmd.cdw10, 1 | 1 << 4 | 1 << 5 | 1 << 8 | 2 << 9);
        assert_eq!(FormatNvm::from_command(&cmd), settings);
        assert_eq!(FormatNvm::from_bits(1 << 9).ses(), SecureErase::UserData);
        assert_eq!(FormatNvm::from_bits(7 << 9).ses(), SecureErase::Reserved(7));
        assert_eq!(FormatNvm::new().with_ses(SecureErase::Reserved(12)).ses(), SecureErase::Reserved(4));
    }
}
