//! Queue management, Abort and Asynchronous Event Request commands (NVMe 1.4 §5.1–§5.6).
//!
//! Each command is a struct of the fields its command dwords carry, named as the spec
//! names them. `to_command` builds the submission queue entry (the host driver's side);
//! `from_command` decodes one (the simulated controller's side). Reserved bits are
//! ignored when decoding and left zero when building.
//!
//! Queue sizes (QSIZE) are 0's based, exactly as in the command: a queue of 64 entries
//! has `qsize == 63`. [`CreateIoCompletionQueue::entries`] gives the count.

use crate::spec::command::{AdminOpcode, Command};

/// Create I/O Completion Queue (05h), §5.3: "Create I/O Completion Queue – PRP Entry 1",
/// "– Command Dword 10" and "– Command Dword 11".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateIoCompletionQueue {
    /// QID: Queue Identifier (CDW10 bits 15:00).
    pub qid: u16,
    /// QSIZE: Queue Size, 0's based (CDW10 bits 31:16).
    pub qsize: u16,
    /// PRP Entry 1: the queue's base address (PC = 1) or a PRP List pointer (PC = 0).
    pub prp1: u64,
    /// PC: Physically Contiguous (CDW11 bit 0).
    pub pc: bool,
    /// IEN: Interrupts Enabled (CDW11 bit 1).
    pub ien: bool,
    /// IV: Interrupt Vector (CDW11 bits 31:16).
    pub iv: u16,
}

impl CreateIoCompletionQueue {
    pub fn to_command(&self) -> Command {
        Command {
            prp1: self.prp1,
            cdw10: queue_cdw10(self.qid, self.qsize),
            cdw11: self.pc as u32 | (self.ien as u32) << 1 | (self.iv as u32) << 16,
            ..Command::admin(AdminOpcode::CreateIoCompletionQueue)
        }
    }

    pub fn from_command(cmd: &Command) -> Self {
        CreateIoCompletionQueue {
            qid: cmd.cdw10 as u16,
            qsize: (cmd.cdw10 >> 16) as u16,
            prp1: cmd.prp1,
            pc: cmd.cdw11 & 1 != 0,
            ien: cmd.cdw11 & 2 != 0,
            iv: (cmd.cdw11 >> 16) as u16,
        }
    }

    /// The number of entries (QSIZE + 1).
    pub fn entries(&self) -> u32 {
        self.qsize as u32 + 1
    }
}

/// QPRIO: Queue Priority of an I/O Submission Queue (CDW11 bits 02:01), used when
/// weighted round robin with urgent priority class arbitration is selected (§4.11).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueuePriority {
    Urgent = 0,
    High = 1,
    Medium = 2,
    Low = 3,
}

impl QueuePriority {
    pub fn from_bits(bits: u32) -> Self {
        match bits & 3 {
            0 => QueuePriority::Urgent,
            1 => QueuePriority::High,
            2 => QueuePriority::Medium,
            _ => QueuePriority::Low,
        }
    }
}

/// Create I/O Submission Queue (01h), §5.4: "Create I/O Submission Queue – PRP Entry 1",
/// "– Command Dword 10", "– Command Dword 11" and "– Command Dword 12".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateIoSubmissionQueue {
    /// QID: Queue Identifier (CDW10 bits 15:00).
    pub qid: u16,
    /// QSIZE: Queue Size, 0's based (CDW10 bits 31:16).
    pub qsize: u16,
    /// PRP Entry 1: the queue's base address (PC = 1) or a PRP List pointer (PC = 0).
    pub prp1: u64,
    /// PC: Physically Contiguous (CDW11 bit 0).
    pub pc: bool,
    /// QPRIO: Queue Priority (CDW11 bits 02:01).
    pub qprio: QueuePriority,
    /// CQID: Completion Queue Identifier (CDW11 bits 31:16).
    pub cqid: u16,
    /// NVMSETID: NVM Set Identifier (CDW12 bits 15:00), 1.4; 0 when NVM Sets are unused.
    pub nvmsetid: u16,
}

impl CreateIoSubmissionQueue {
    pub fn to_command(&self) -> Command {
        Command {
            prp1: self.prp1,
            cdw10: queue_cdw10(self.qid, self.qsize),
            cdw11: self.pc as u32 | (self.qprio as u32) << 1 | (self.cqid as u32) << 16,
            cdw12: self.nvmsetid as u32,
            ..Command::admin(AdminOpcode::CreateIoSubmissionQueue)
        }
    }

    pub fn from_command(cmd: &Command) -> Self {
        CreateIoSubmissionQueue {
            qid: cmd.cdw10 as u16,
            qsize: (cmd.cdw10 >> 16) as u16,
            prp1: cmd.prp1,
            pc: cmd.cdw11 & 1 != 0,
            qprio: QueuePriority::from_bits(cmd.cdw11 >> 1),
            cqid: (cmd.cdw11 >> 16) as u16,
            nvmsetid: cmd.cdw12 as u16,
        }
    }

    /// The number of entries (QSIZE + 1).
    pub fn entries(&self) -> u32 {
        self.qsize as u32 + 1
    }
}

fn queue_cdw10(qid: u16, qsize: u16) -> u32 {
    qid as u32 | (qsize as u32) << 16
}

/// Delete I/O Submission Queue (00h), §5.6: "Delete I/O Submission Queue – Command Dword 10".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeleteIoSubmissionQueue {
    /// QID: Queue Identifier (CDW10 bits 15:00).
    pub qid: u16,
}

impl DeleteIoSubmissionQueue {
    pub fn to_command(&self) -> Command {
        Command { cdw10: self.qid as u32, ..Command::admin(AdminOpcode::DeleteIoSubmissionQueue) }
    }

    pub fn from_command(cmd: &Command) -> Self {
        DeleteIoSubmissionQueue { qid: cmd.cdw10 as u16 }
    }
}

/// Delete I/O Completion Queue (04h), §5.5: "Delete I/O Completion Queue – Command Dword 10".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeleteIoCompletionQueue {
    /// QID: Queue Identifier (CDW10 bits 15:00).
    pub qid: u16,
}

impl DeleteIoCompletionQueue {
    pub fn to_command(&self) -> Command {
        Command { cdw10: self.qid as u32, ..Command::admin(AdminOpcode::DeleteIoCompletionQueue) }
    }

    pub fn from_command(cmd: &Command) -> Self {
        DeleteIoCompletionQueue { qid: cmd.cdw10 as u16 }
    }
}

/// Abort (08h), §5.1: "Abort – Command Dword 10".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Abort {
    /// SQID: Submission Queue Identifier of the command to abort (CDW10 bits 15:00).
    pub sqid: u16,
    /// CID: Command Identifier of the command to abort (CDW10 bits 31:16).
    pub cid: u16,
}

impl Abort {
    pub fn to_command(&self) -> Command {
        Command { cdw10: self.sqid as u32 | (self.cid as u32) << 16, ..Command::admin(AdminOpcode::Abort) }
    }

    pub fn from_command(cmd: &Command) -> Self {
        Abort { sqid: cmd.cdw10 as u16, cid: (cmd.cdw10 >> 16) as u16 }
    }

    /// Completion Dword 0 of a successful Abort, "Abort – Completion Queue Entry Dword 0":
    /// bit 0 cleared means the command was aborted, set means it was not.
    pub fn completion_dw0(aborted: bool) -> u32 {
        !aborted as u32
    }

    /// Decodes Completion Dword 0: true if the command was aborted.
    pub fn was_aborted(dw0: u32) -> bool {
        dw0 & 1 == 0
    }
}

/// Asynchronous Event Type values ("Asynchronous Event Request – Completion Queue Entry
/// Dword 0", bits 02:00), §5.2.1.
pub mod event_type {
    pub const ERROR_STATUS: u8 = 0;
    pub const SMART_HEALTH_STATUS: u8 = 1;
    pub const NOTICE: u8 = 2;
    pub const IO_COMMAND_SPECIFIC_STATUS: u8 = 6;
    pub const VENDOR_SPECIFIC: u8 = 7;
}

/// Asynchronous Event Information for Error Status events ("Asynchronous Event
/// Information – Error Status"), §5.2.1.
pub mod error_status_info {
    /// Write to Invalid Doorbell Register: a doorbell of a queue that does not exist.
    pub const WRITE_TO_INVALID_DOORBELL_REGISTER: u8 = 0;
    /// Invalid Doorbell Write Value: a value beyond the queue, or a CQ head past its tail.
    pub const INVALID_DOORBELL_WRITE_VALUE: u8 = 1;
    pub const DIAGNOSTIC_FAILURE: u8 = 2;
    pub const PERSISTENT_INTERNAL_ERROR: u8 = 3;
    pub const TRANSIENT_INTERNAL_ERROR: u8 = 4;
    pub const FIRMWARE_IMAGE_LOAD_ERROR: u8 = 5;
}

/// Asynchronous Event Information for Notice events ("Asynchronous Event Information –
/// Notice"), §5.2.1.
pub mod notice_info {
    pub const NAMESPACE_ATTRIBUTE_CHANGED: u8 = 0;
    pub const FIRMWARE_ACTIVATION_STARTING: u8 = 1;
    pub const TELEMETRY_LOG_CHANGED: u8 = 2;
    pub const ASYMMETRIC_NAMESPACE_ACCESS_CHANGE: u8 = 3;
    pub const PREDICTABLE_LATENCY_EVENT_AGGREGATE_LOG_CHANGE: u8 = 4;
    pub const LBA_STATUS_INFORMATION_ALERT: u8 = 5;
    pub const ENDURANCE_GROUP_EVENT_AGGREGATE_LOG_PAGE_CHANGE: u8 = 6;
}

/// A completed Asynchronous Event Request (0Ch), §5.2: "Asynchronous Event Request –
/// Completion Queue Entry Dword 0".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AsyncEventCompletion {
    /// Asynchronous Event Type (bits 02:00), see [`event_type`].
    pub event_type: u8,
    /// Asynchronous Event Information (bits 15:08).
    pub info: u8,
    /// Log Page Identifier (bits 23:16): the log page the host reads to clear the event.
    pub log_page: u8,
}

impl AsyncEventCompletion {
    pub fn from_dw0(dw0: u32) -> Self {
        AsyncEventCompletion { event_type: (dw0 & 7) as u8, info: (dw0 >> 8) as u8, log_page: (dw0 >> 16) as u8 }
    }

    pub fn to_dw0(&self) -> u32 {
        (self.event_type & 7) as u32 | (self.info as u32) << 8 | (self.log_page as u32) << 16
    }
}

/// The Asynchronous Event Request command (0Ch, §5.2); it has no command-specific fields.
pub fn asynchronous_event_request() -> Command {
    Command::admin(AdminOpcode::AsynchronousEventRequest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_io_cq_fields_sit_in_cdw10_and_cdw11() {
        let c = CreateIoCompletionQueue { qid: 3, qsize: 255, prp1: 0x1_0000_2000, pc: true, ien: true, iv: 7 };
        let cmd = c.to_command();
        assert_eq!(cmd.opcode, 0x05);
        assert_eq!(cmd.cdw10, 0x00ff_0003);
        assert_eq!(cmd.cdw11, 0x0007_0003);
        assert_eq!(cmd.prp1, 0x1_0000_2000);
        assert_eq!(CreateIoCompletionQueue::from_command(&cmd), c);
        assert_eq!(c.entries(), 256);
    }

    #[test]
    fn create_io_sq_fields_sit_in_cdw10_to_cdw12() {
        let s = CreateIoSubmissionQueue {
            qid: 1,
            qsize: 63,
            prp1: 0x4000,
            pc: true,
            qprio: QueuePriority::Medium,
            cqid: 2,
            nvmsetid: 5,
        };
        let cmd = s.to_command();
        assert_eq!(cmd.opcode, 0x01);
        assert_eq!(cmd.cdw10, 0x003f_0001);
        assert_eq!(cmd.cdw11, 0x0002_0005);
        assert_eq!(cmd.cdw12, 5);
        assert_eq!(CreateIoSubmissionQueue::from_command(&cmd), s);
        // QSIZE 0FFFFh is 65536 entries, the largest queue the field can name.
        let big = CreateIoSubmissionQueue { qsize: 0xffff, ..s };
        assert_eq!(big.entries(), 65536);
    }

    #[test]
    fn reserved_bits_are_ignored_when_decoding() {
        let cmd = Command { cdw11: 0x0001_fffd, ..Command::admin(AdminOpcode::CreateIoCompletionQueue) };
        let c = CreateIoCompletionQueue::from_command(&cmd);
        assert!(c.pc && !c.ien);
        assert_eq!(c.iv, 1);
    }

    #[test]
    fn delete_and_abort_carry_their_identifiers() {
        let d = DeleteIoSubmissionQueue { qid: 9 }.to_command();
        assert_eq!((d.opcode, d.cdw10), (0x00, 9));
        let d = DeleteIoCompletionQueue { qid: 9 }.to_command();
        assert_eq!((d.opcode, d.cdw10), (0x04, 9));
        let a = Abort { sqid: 2, cid: 0x1234 };
        let cmd = a.to_command();
        assert_eq!((cmd.opcode, cmd.cdw10), (0x08, 0x1234_0002));
        assert_eq!(Abort::from_command(&cmd), a);
    }

    #[test]
    fn abort_dw0_bit0_set_means_not_aborted() {
        assert!(!Abort::was_aborted(1));
        assert!(Abort::was_aborted(0));
        assert_eq!(Abort::completion_dw0(false), 1);
        assert_eq!(Abort::completion_dw0(true), 0);
    }

    #[test]
    fn async_event_dw0_type_info_and_log_page() {
        // Error status, Invalid Doorbell Write Value, Error Information log (01h).
        let e = AsyncEventCompletion::from_dw0(0x0001_0100);
        assert_eq!(e.event_type, event_type::ERROR_STATUS);
        assert_eq!(e.info, error_status_info::INVALID_DOORBELL_WRITE_VALUE);
        assert_eq!(e.log_page, 0x01);
        // Notice, Namespace Attribute Changed, Changed Namespace List log (04h).
        let n = AsyncEventCompletion { event_type: event_type::NOTICE, info: 0, log_page: 0x04 };
        assert_eq!(n.to_dw0(), 0x0004_0002);
        assert_eq!(AsyncEventCompletion::from_dw0(n.to_dw0()), n);
        assert_eq!(asynchronous_event_request().opcode, 0x0C);
    }
}
