//! Completion status: "Figure 126: Completion Queue Entry: Status Field" and the status
//! code tables of §4.6.1.2 (Figures 127–131).
//!
//! A status is a (Status Code Type, Status Code) pair plus the DNR, More and CRD bits.
//! Named constants exist for every code nvtest sends for or expects; [`Status::name`]
//! gives the spec's name for any defined code.

use std::fmt;

/// SCT: Status Code Type ("Figure 127: Status Code – Status Code Type Values").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatusCodeType {
    Generic,
    CommandSpecific,
    MediaAndDataIntegrity,
    PathRelated,
    VendorSpecific,
    Reserved(u8),
}

impl StatusCodeType {
    pub fn from_u8(v: u8) -> Self {
        match v & 7 {
            0 => Self::Generic,
            1 => Self::CommandSpecific,
            2 => Self::MediaAndDataIntegrity,
            3 => Self::PathRelated,
            7 => Self::VendorSpecific,
            r => Self::Reserved(r),
        }
    }

    pub fn to_u8(self) -> u8 {
        match self {
            Self::Generic => 0,
            Self::CommandSpecific => 1,
            Self::MediaAndDataIntegrity => 2,
            Self::PathRelated => 3,
            Self::VendorSpecific => 7,
            Self::Reserved(r) => r & 7,
        }
    }
}

/// A decoded Status Field (CQE DW3 bits 31:17).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status {
    pub sct: StatusCodeType,
    /// SC: Status Code.
    pub sc: u8,
    /// CRD: Command Retry Delay (1.4; reserved in 1.2a).
    pub crd: u8,
    /// M: More (more status information in the Error Information log page).
    pub more: bool,
    /// DNR: Do Not Retry.
    pub dnr: bool,
}

const fn code(sct: StatusCodeType, sc: u8) -> Status {
    Status { sct, sc, crd: 0, more: false, dnr: false }
}
const fn generic(sc: u8) -> Status {
    code(StatusCodeType::Generic, sc)
}
const fn specific(sc: u8) -> Status {
    code(StatusCodeType::CommandSpecific, sc)
}
const fn media(sc: u8) -> Status {
    code(StatusCodeType::MediaAndDataIntegrity, sc)
}
const fn path(sc: u8) -> Status {
    code(StatusCodeType::PathRelated, sc)
}

impl Status {
    // "Figure 128: Status Code – Generic Command Status Values"
    pub const SUCCESS: Status = generic(0x00);
    pub const INVALID_COMMAND_OPCODE: Status = generic(0x01);
    pub const INVALID_FIELD: Status = generic(0x02);
    pub const COMMAND_ID_CONFLICT: Status = generic(0x03);
    pub const DATA_TRANSFER_ERROR: Status = generic(0x04);
    pub const INTERNAL_ERROR: Status = generic(0x06);
    pub const ABORT_REQUESTED: Status = generic(0x07);
    pub const ABORTED_SQ_DELETION: Status = generic(0x08);
    pub const INVALID_NAMESPACE_OR_FORMAT: Status = generic(0x0B);
    pub const COMMAND_SEQUENCE_ERROR: Status = generic(0x0C);
    pub const PRP_OFFSET_INVALID: Status = generic(0x13);
    /// 18h: the NVM subsystem saw 64-bit and 128-bit Host Identifiers used at once
    /// (Host Identifier feature, Reservation Report with EDS cleared).
    pub const HOST_IDENTIFIER_INCONSISTENT_FORMAT: Status = generic(0x18);
    /// 1Bh: the command was aborted by a Reservation Acquire with RACQA 010b.
    pub const COMMAND_ABORTED_PREEMPT_AND_ABORT: Status = generic(0x1B);
    /// 1Ch: the most recent sanitize operation failed and no recovery action has completed (1.3).
    pub const SANITIZE_FAILED: Status = generic(0x1C);
    /// 1Dh: the command is prohibited while a sanitize operation is in progress (1.3).
    pub const SANITIZE_IN_PROGRESS: Status = generic(0x1D);
    // Generic Command Status, NVM Command Set values (80h–BFh)
    pub const LBA_OUT_OF_RANGE: Status = generic(0x80);
    pub const CAPACITY_EXCEEDED: Status = generic(0x81);
    pub const NAMESPACE_NOT_READY: Status = generic(0x82);
    /// 83h: the command was aborted due to a conflict with a reservation held on the
    /// namespace (§8.8), or a reservation command's key did not match.
    pub const RESERVATION_CONFLICT: Status = generic(0x83);
    pub const FORMAT_IN_PROGRESS: Status = generic(0x84);

    // "Figure 129: Status Code – Command Specific Status Values"
    pub const COMPLETION_QUEUE_INVALID: Status = specific(0x00);
    pub const INVALID_QUEUE_IDENTIFIER: Status = specific(0x01);
    pub const INVALID_QUEUE_SIZE: Status = specific(0x02);
    pub const ABORT_COMMAND_LIMIT_EXCEEDED: Status = specific(0x03);
    pub const ASYNC_EVENT_REQUEST_LIMIT_EXCEEDED: Status = specific(0x05);
    pub const INVALID_INTERRUPT_VECTOR: Status = specific(0x08);
    pub const INVALID_LOG_PAGE: Status = specific(0x09);
    pub const INVALID_FIRMWARE_SLOT: Status = specific(0x06);
    pub const INVALID_FIRMWARE_IMAGE: Status = specific(0x07);
    pub const INVALID_FORMAT: Status = specific(0x0A);
    pub const FIRMWARE_ACTIVATION_REQUIRES_CONVENTIONAL_RESET: Status = specific(0x0B);
    pub const FIRMWARE_ACTIVATION_REQUIRES_NVM_SUBSYSTEM_RESET: Status = specific(0x10);
    pub const FIRMWARE_ACTIVATION_REQUIRES_CONTROLLER_LEVEL_RESET: Status = specific(0x11);
    pub const FIRMWARE_ACTIVATION_REQUIRES_MAX_TIME_VIOLATION: Status = specific(0x12);
    pub const FIRMWARE_ACTIVATION_PROHIBITED: Status = specific(0x13);
    pub const OVERLAPPING_RANGE: Status = specific(0x14);
    pub const INVALID_QUEUE_DELETION: Status = specific(0x0C);
    pub const FEATURE_NOT_SAVEABLE: Status = specific(0x0D);
    pub const FEATURE_NOT_CHANGEABLE: Status = specific(0x0E);
    pub const FEATURE_NOT_NAMESPACE_SPECIFIC: Status = specific(0x0F);
    pub const NAMESPACE_INSUFFICIENT_CAPACITY: Status = specific(0x15);
    pub const NAMESPACE_ID_UNAVAILABLE: Status = specific(0x16);
    pub const NAMESPACE_ALREADY_ATTACHED: Status = specific(0x18);
    pub const NAMESPACE_IS_PRIVATE: Status = specific(0x19);
    pub const NAMESPACE_NOT_ATTACHED: Status = specific(0x1A);
    pub const THIN_PROVISIONING_NOT_SUPPORTED: Status = specific(0x1B);
    pub const CONTROLLER_LIST_INVALID: Status = specific(0x1C);
    // Command Specific Status, NVM Command Set values
    pub const CONFLICTING_ATTRIBUTES: Status = specific(0x80);
    pub const INVALID_PROTECTION_INFORMATION: Status = specific(0x81);

    // "Figure 130: Status Code – Media and Data Integrity Error Values"
    pub const WRITE_FAULT: Status = media(0x80);
    pub const UNRECOVERED_READ_ERROR: Status = media(0x81);
    pub const COMPARE_FAILURE: Status = media(0x85);
    pub const DEALLOCATED_OR_UNWRITTEN: Status = media(0x87);

    // "Figure 131: Status Code – Path Related Status Values" (NVMe 1.4)
    /// 01h: the namespace's ANA group is in ANA Persistent Loss state through this
    /// controller (§8.20.3.4).
    pub const ASYMMETRIC_ACCESS_PERSISTENT_LOSS: Status = path(0x01);
    /// 02h: the namespace's ANA group is in ANA Inaccessible state through this
    /// controller (§8.20.3.3).
    pub const ASYMMETRIC_ACCESS_INACCESSIBLE: Status = path(0x02);
    /// 03h: the namespace's ANA group is changing state through this controller
    /// (ANA Change state, §8.20.3.5).
    pub const ASYMMETRIC_ACCESS_TRANSITION: Status = path(0x03);
    /// 24h (Command Specific): Namespace Management named an ANAGRPID that is not valid.
    pub const ANA_GROUP_IDENTIFIER_INVALID: Status = specific(0x24);

    /// Decodes the 15-bit Status Field (CQE DW3 bits 31:17, i.e. the CQE status word
    /// shifted right by one to drop the Phase Tag).
    pub const fn from_field(field: u16) -> Status {
        Status {
            sc: field as u8,
            sct: match (field >> 8) & 7 {
                0 => StatusCodeType::Generic,
                1 => StatusCodeType::CommandSpecific,
                2 => StatusCodeType::MediaAndDataIntegrity,
                3 => StatusCodeType::PathRelated,
                7 => StatusCodeType::VendorSpecific,
                r => StatusCodeType::Reserved(r as u8),
            },
            crd: ((field >> 11) & 3) as u8,
            more: field & (1 << 13) != 0,
            dnr: field & (1 << 14) != 0,
        }
    }

    /// Encodes as the 15-bit Status Field (without the Phase Tag).
    pub fn to_field(self) -> u16 {
        self.sc as u16
            | (self.sct.to_u8() as u16) << 8
            | ((self.crd & 3) as u16) << 11
            | (self.more as u16) << 13
            | (self.dnr as u16) << 14
    }

    /// This status with DNR set, as controllers report errors a retry cannot fix.
    pub const fn dnr(mut self) -> Status {
        self.dnr = true;
        self
    }

    pub fn is_success(&self) -> bool {
        self.sct == StatusCodeType::Generic && self.sc == 0
    }

    /// The same (SCT, SC) pair, ignoring DNR, More and CRD.
    pub fn same_code(&self, other: &Status) -> bool {
        self.sct == other.sct && self.sc == other.sc
    }

    /// The spec's name for this (SCT, SC) pair, if the spec defines one.
    pub fn name(&self) -> Option<&'static str> {
        use StatusCodeType::*;
        Some(match (self.sct, self.sc) {
            (Generic, 0x00) => "Successful Completion",
            (Generic, 0x01) => "Invalid Command Opcode",
            (Generic, 0x02) => "Invalid Field in Command",
            (Generic, 0x03) => "Command ID Conflict",
            (Generic, 0x04) => "Data Transfer Error",
            (Generic, 0x05) => "Commands Aborted due to Power Loss Notification",
            (Generic, 0x06) => "Internal Error",
            (Generic, 0x07) => "Command Abort Requested",
            (Generic, 0x08) => "Command Aborted due to SQ Deletion",
            (Generic, 0x09) => "Command Aborted due to Failed Fused Command",
            (Generic, 0x0A) => "Command Aborted due to Missing Fused Command",
            (Generic, 0x0B) => "Invalid Namespace or Format",
            (Generic, 0x0C) => "Command Sequence Error",
            (Generic, 0x0D) => "Invalid SGL Segment Descriptor",
            (Generic, 0x0E) => "Invalid Number of SGL Descriptors",
            (Generic, 0x0F) => "Data SGL Length Invalid",
            (Generic, 0x10) => "Metadata SGL Length Invalid",
            (Generic, 0x11) => "SGL Descriptor Type Invalid",
            (Generic, 0x12) => "Invalid Use of Controller Memory Buffer",
            (Generic, 0x13) => "PRP Offset Invalid",
            (Generic, 0x14) => "Atomic Write Unit Exceeded",
            (Generic, 0x15) => "Operation Denied",
            (Generic, 0x16) => "SGL Offset Invalid",
            (Generic, 0x18) => "Host Identifier Inconsistent Format",
            (Generic, 0x19) => "Keep Alive Timer Expired",
            (Generic, 0x1A) => "Keep Alive Timeout Invalid",
            (Generic, 0x1B) => "Command Aborted due to Preempt and Abort",
            (Generic, 0x1C) => "Sanitize Failed",
            (Generic, 0x1D) => "Sanitize In Progress",
            (Generic, 0x1E) => "SGL Data Block Granularity Invalid",
            (Generic, 0x1F) => "Command Not Supported for Queue in CMB",
            (Generic, 0x20) => "Namespace is Write Protected",
            (Generic, 0x21) => "Command Interrupted",
            (Generic, 0x22) => "Transient Transport Error",
            (Generic, 0x80) => "LBA Out of Range",
            (Generic, 0x81) => "Capacity Exceeded",
            (Generic, 0x82) => "Namespace Not Ready",
            (Generic, 0x83) => "Reservation Conflict",
            (Generic, 0x84) => "Format In Progress",
            (CommandSpecific, 0x00) => "Completion Queue Invalid",
            (CommandSpecific, 0x01) => "Invalid Queue Identifier",
            (CommandSpecific, 0x02) => "Invalid Queue Size",
            (CommandSpecific, 0x03) => "Abort Command Limit Exceeded",
            (CommandSpecific, 0x05) => "Asynchronous Event Request Limit Exceeded",
            (CommandSpecific, 0x06) => "Invalid Firmware Slot",
            (CommandSpecific, 0x07) => "Invalid Firmware Image",
            (CommandSpecific, 0x08) => "Invalid Interrupt Vector",
            (CommandSpecific, 0x09) => "Invalid Log Page",
            (CommandSpecific, 0x0A) => "Invalid Format",
            (CommandSpecific, 0x0B) => "Firmware Activation Requires Conventional Reset",
            (CommandSpecific, 0x0C) => "Invalid Queue Deletion",
            (CommandSpecific, 0x0D) => "Feature Identifier Not Saveable",
            (CommandSpecific, 0x0E) => "Feature Not Changeable",
            (CommandSpecific, 0x0F) => "Feature Not Namespace Specific",
            (CommandSpecific, 0x10) => "Firmware Activation Requires NVM Subsystem Reset",
            (CommandSpecific, 0x11) => "Firmware Activation Requires Controller Level Reset",
            (CommandSpecific, 0x12) => "Firmware Activation Requires Maximum Time Violation",
            (CommandSpecific, 0x13) => "Firmware Activation Prohibited",
            (CommandSpecific, 0x14) => "Overlapping Range",
            (CommandSpecific, 0x15) => "Namespace Insufficient Capacity",
            (CommandSpecific, 0x16) => "Namespace Identifier Unavailable",
            (CommandSpecific, 0x18) => "Namespace Already Attached",
            (CommandSpecific, 0x19) => "Namespace Is Private",
            (CommandSpecific, 0x1A) => "Namespace Not Attached",
            (CommandSpecific, 0x1B) => "Thin Provisioning Not Supported",
            (CommandSpecific, 0x1C) => "Controller List Invalid",
            (CommandSpecific, 0x1D) => "Device Self-test In Progress",
            (CommandSpecific, 0x1E) => "Boot Partition Write Prohibited",
            (CommandSpecific, 0x1F) => "Invalid Controller Identifier",
            (CommandSpecific, 0x20) => "Invalid Secondary Controller State",
            (CommandSpecific, 0x21) => "Invalid Number of Controller Resources",
            (CommandSpecific, 0x22) => "Invalid Resource Identifier",
            (CommandSpecific, 0x23) => "Sanitize Prohibited While Persistent Memory Region is Enabled",
            (CommandSpecific, 0x24) => "ANA Group Identifier Invalid",
            (CommandSpecific, 0x25) => "ANA Attach Failed",
            (CommandSpecific, 0x80) => "Conflicting Attributes",
            (CommandSpecific, 0x81) => "Invalid Protection Information",
            (CommandSpecific, 0x82) => "Attempted Write to Read Only Range",
            (MediaAndDataIntegrity, 0x80) => "Write Fault",
            (MediaAndDataIntegrity, 0x81) => "Unrecovered Read Error",
            (MediaAndDataIntegrity, 0x82) => "End-to-end Guard Check Error",
            (MediaAndDataIntegrity, 0x83) => "End-to-end Application Tag Check Error",
            (MediaAndDataIntegrity, 0x84) => "End-to-end Reference Tag Check Error",
            (MediaAndDataIntegrity, 0x85) => "Compare Failure",
            (MediaAndDataIntegrity, 0x86) => "Access Denied",
            (MediaAndDataIntegrity, 0x87) => "Deallocated or Unwritten Logical Block",
            (PathRelated, 0x00) => "Internal Path Error",
            (PathRelated, 0x01) => "Asymmetric Access Persistent Loss",
            (PathRelated, 0x02) => "Asymmetric Access Inaccessible",
            (PathRelated, 0x03) => "Asymmetric Access Transition",
            (PathRelated, 0x60) => "Controller Pathing Error",
            (PathRelated, 0x70) => "Host Pathing Error",
            (PathRelated, 0x71) => "Command Aborted By Host",
            _ => return None,
        })
    }

    /// Every (SCT, SC) pair that has a spec name, for parsing names in suites.
    pub fn all_named() -> impl Iterator<Item = Status> {
        [
            StatusCodeType::Generic,
            StatusCodeType::CommandSpecific,
            StatusCodeType::MediaAndDataIntegrity,
            StatusCodeType::PathRelated,
        ]
        .into_iter()
        .flat_map(|sct| (0..=255u8).map(move |sc| code(sct, sc)))
        .filter(|s| s.name().is_some())
    }

    /// Looks a status up by its spec name, case-insensitively ("LBA Out of Range").
    pub fn from_name(name: &str) -> Option<Status> {
        Self::all_named().find(|s| s.name().is_some_and(|n| n.eq_ignore_ascii_case(name.trim())))
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}")?,
            None => write!(f, "Unknown status")?,
        }
        write!(f, " (SCT {:X}h, SC {:02X}h", self.sct.to_u8(), self.sc)?;
        if self.dnr {
            write!(f, ", DNR")?;
        }
        if self.more {
            write!(f, ", More")?;
        }
        if self.crd != 0 {
            write!(f, ", CRD {}", self.crd)?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_field_bits_follow_figure_126() {
        // 0x4002 from a real controller: DNR | Invalid Field in Command.
        let s = Status::from_field(0x4002);
        assert!(s.same_code(&Status::INVALID_FIELD));
        assert!(s.dnr && !s.more);
        assert_eq!(s.to_field(), 0x4002);
        let s = Status::from_field(0x0118 | 1 << 13);
        assert_eq!(s, Status { more: true, ..Status::NAMESPACE_ALREADY_ATTACHED });
        assert_eq!(format!("{}", Status::LBA_OUT_OF_RANGE.dnr()), "LBA Out of Range (SCT 0h, SC 80h, DNR)");
    }

    #[test]
    fn names_parse_back() {
        for s in Status::all_named() {
            assert_eq!(Status::from_name(s.name().unwrap()), Some(s));
        }
        assert_eq!(Status::from_name("lba out of range"), Some(Status::LBA_OUT_OF_RANGE));
        assert_eq!(Status::from_name("Nonsense"), None);
    }
}
