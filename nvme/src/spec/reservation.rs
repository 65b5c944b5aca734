//! Reservations (NVMe 1.4 §8.8 "Reservations") and the four NVM commands that manage
//! them: §6.10 "Reservation Acquire command", §6.11 "Reservation Register command",
//! §6.12 "Reservation Release command" and §6.13 "Reservation Report command".
//!
//! This module owns the Command Dword 10 (and 11) layouts of those commands and their
//! data structures ("Reservation Acquire Data Structure", "Reservation Register Data
//! Structure", "Reservation Release Data Structure"), the reservation types, the
//! "Reservation Status Data Structure" a Report returns (with its "Registered Controller
//! Data Structure" and, for EDS = 1, the "Reservation Status Extended Data Structure"
//! and "Registered Controller Extended Data Structure"), the values of features 81h
//! (Host Identifier), 82h (Reservation Notification Mask) and 83h (Reservation
//! Persistence), and the Reservation Notification log page (80h).
//!
//! IEKEY differs between revisions: up to 1.2.1 it disables the CRKEY check of all three
//! commands that carry it; from 1.3 on (a controller says so with RESCAP bit 7) only
//! Reservation Register honours it, and Reservation Acquire and Release with IEKEY set are
//! aborted with Invalid Field in Command.

use crate::assert_size;
use crate::spec::command::{Command, NvmOpcode};
use bitfield_struct::bitfield;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

// ---------------------------------------------------------------------------------------
// Reservation types
// ---------------------------------------------------------------------------------------

/// RTYPE: Reservation Type ("Reservation Type Encoding"; §8.8 "Reservations").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ReservationType {
    /// 1h: Write Exclusive.
    WriteExclusive = 1,
    /// 2h: Exclusive Access.
    ExclusiveAccess = 2,
    /// 3h: Write Exclusive – Registrants Only.
    WriteExclusiveRegistrantsOnly = 3,
    /// 4h: Exclusive Access – Registrants Only.
    ExclusiveAccessRegistrantsOnly = 4,
    /// 5h: Write Exclusive – All Registrants.
    WriteExclusiveAllRegistrants = 5,
    /// 6h: Exclusive Access – All Registrants.
    ExclusiveAccessAllRegistrants = 6,
}

impl ReservationType {
    pub const ALL: [ReservationType; 6] = [
        Self::WriteExclusive,
        Self::ExclusiveAccess,
        Self::WriteExclusiveRegistrantsOnly,
        Self::ExclusiveAccessRegistrantsOnly,
        Self::WriteExclusiveAllRegistrants,
        Self::ExclusiveAccessAllRegistrants,
    ];

    /// The type for an RTYPE value; `None` for 0h and the reserved values 7h–FFh.
    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|t| *t as u8 == value)
    }

    /// The RESCAP bit (Identify Namespace byte 31) saying the type is supported: bit 1 for
    /// Write Exclusive through bit 6 for Exclusive Access – All Registrants.
    pub fn rescap_bit(self) -> u8 {
        1 << (self as u8)
    }

    /// All Registrants types: every registrant is a reservation holder.
    pub fn all_registrants(self) -> bool {
        matches!(self, Self::WriteExclusiveAllRegistrants | Self::ExclusiveAccessAllRegistrants)
    }

    /// Registrants Only and All Registrants types: registrants other than the holder are
    /// granted access (and told when the reservation is released, §8.8).
    pub fn registrants_have_access(self) -> bool {
        !matches!(self, Self::WriteExclusive | Self::ExclusiveAccess)
    }

    /// Exclusive Access types: reads too are reserved.
    pub fn exclusive_access(self) -> bool {
        matches!(
            self,
            Self::ExclusiveAccess | Self::ExclusiveAccessRegistrantsOnly | Self::ExclusiveAccessAllRegistrants
        )
    }

    /// The spec's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::WriteExclusive => "Write Exclusive",
            Self::ExclusiveAccess => "Exclusive Access",
            Self::WriteExclusiveRegistrantsOnly => "Write Exclusive - Registrants Only",
            Self::ExclusiveAccessRegistrantsOnly => "Exclusive Access - Registrants Only",
            Self::WriteExclusiveAllRegistrants => "Write Exclusive - All Registrants",
            Self::ExclusiveAccessAllRegistrants => "Exclusive Access - All Registrants",
        }
    }
}

/// The host's standing toward a namespace's reservation, as §8.8's figure "Command
/// Behavior in the Presence of a Reservation" distinguishes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The host holds the reservation (for All Registrants types, every registrant).
    Holder,
    /// The host is a registrant but not a holder.
    Registrant,
    /// The host is not registered.
    NonRegistrant,
}

/// The command groups of the figure "Command Behavior in the Presence of a Reservation".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandGroup {
    /// Read Command Group: Read, Compare (and Verify).
    Read,
    /// Write Command Group: Write, Write Uncorrectable, Write Zeroes, Dataset Management.
    Write,
}

impl CommandGroup {
    /// The group of an NVM command; `None` for commands the figure does not restrict
    /// (Flush and the reservation commands themselves).
    pub fn of(opcode: u8) -> Option<CommandGroup> {
        match NvmOpcode::from_u8(opcode)? {
            NvmOpcode::Read | NvmOpcode::Compare | NvmOpcode::Verify => Some(CommandGroup::Read),
            NvmOpcode::Write
            | NvmOpcode::WriteUncorrectable
            | NvmOpcode::WriteZeroes
            | NvmOpcode::DatasetManagement => Some(CommandGroup::Write),
            _ => None,
        }
    }
}

/// Whether the figure "Command Behavior in the Presence of a Reservation" (§8.8) allows a
/// command of `group` from a host of `standing` under a reservation of type `rtype`
/// (`false`: the command is aborted with Reservation Conflict).
///
/// | type | read: non-registrant | read: registrant | write: non-registrant | write: registrant |
/// | --- | --- | --- | --- | --- |
/// | Write Exclusive | allowed | allowed | conflict | conflict |
/// | Exclusive Access | conflict | conflict | conflict | conflict |
/// | WE – Registrants Only / All Registrants | allowed | allowed | conflict | allowed |
/// | EA – Registrants Only / All Registrants | conflict | allowed | conflict | allowed |
///
/// The holder is always allowed.
pub fn access_allowed(rtype: ReservationType, standing: Standing, group: CommandGroup) -> bool {
    match standing {
        Standing::Holder => true,
        Standing::Registrant => match group {
            CommandGroup::Read => rtype != ReservationType::ExclusiveAccess,
            CommandGroup::Write => rtype.registrants_have_access(),
        },
        Standing::NonRegistrant => match group {
            CommandGroup::Read => !rtype.exclusive_access(),
            CommandGroup::Write => false,
        },
    }
}

// ---------------------------------------------------------------------------------------
// Reservation Register (§6.11)
// ---------------------------------------------------------------------------------------

/// RREGA: Reservation Register Action ("Reservation Register – Command Dword 10", 02:00).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterAction {
    /// 000b: Register Reservation Key.
    Register,
    /// 001b: Unregister Reservation Key.
    Unregister,
    /// 010b: Replace Reservation Key.
    Replace,
    /// 011b–111b: reserved.
    Reserved(u8),
}

impl RegisterAction {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 7 {
            0 => Self::Register,
            1 => Self::Unregister,
            2 => Self::Replace,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::Register => 0,
            Self::Unregister => 1,
            Self::Replace => 2,
            Self::Reserved(r) => r & 7,
        }
    }
}

/// CPTPL: Change Persist Through Power Loss State ("Reservation Register – Command
/// Dword 10", 31:30).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangePtpl {
    /// 00b: no change to the PTPL state.
    NoChange,
    /// 01b: reserved.
    Reserved,
    /// 10b: PTPL cleared: reservations are released and registrants cleared on a power loss.
    Clear,
    /// 11b: PTPL set: reservations and registrants persist across a power loss.
    Set,
}

impl ChangePtpl {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 3 {
            0 => Self::NoChange,
            1 => Self::Reserved,
            2 => Self::Clear,
            _ => Self::Set,
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::NoChange => 0,
            Self::Reserved => 1,
            Self::Clear => 2,
            Self::Set => 3,
        }
    }
}

/// "Reservation Register – Command Dword 10" decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisterFields {
    pub rrega: RegisterAction,
    /// IEKEY: Ignore Existing Key (bit 03): the CRKEY check is disabled.
    pub iekey: bool,
    pub cptpl: ChangePtpl,
}

impl RegisterFields {
    pub fn from_command(cmd: &Command) -> Self {
        RegisterFields {
            rrega: RegisterAction::from_bits(cmd.cdw10 as u8),
            iekey: cmd.cdw10 & (1 << 3) != 0,
            cptpl: ChangePtpl::from_bits((cmd.cdw10 >> 30) as u8),
        }
    }

    pub fn to_cdw10(self) -> u32 {
        self.rrega.into_bits() as u32 | (self.iekey as u32) << 3 | (self.cptpl.into_bits() as u32) << 30
    }
}

/// "Reservation Register Data Structure" (16 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct RegisterData {
    /// CRKEY: Current Reservation Key (Unregister and Replace).
    pub crkey: U64,
    /// NRKEY: New Reservation Key (Register and Replace).
    pub nrkey: U64,
}
assert_size!(RegisterData, 16);

/// A Reservation Register command for `nsid` and its 16-byte data.
pub fn register(
    nsid: u32,
    rrega: RegisterAction,
    iekey: bool,
    cptpl: ChangePtpl,
    crkey: u64,
    nrkey: u64,
) -> (Command, RegisterData) {
    let mut cmd = Command::nvm(NvmOpcode::ReservationRegister, nsid);
    cmd.cdw10 = RegisterFields { rrega, iekey, cptpl }.to_cdw10();
    (cmd, RegisterData { crkey: U64::new(crkey), nrkey: U64::new(nrkey) })
}

// ---------------------------------------------------------------------------------------
// Reservation Acquire (§6.10)
// ---------------------------------------------------------------------------------------

/// RACQA: Reservation Acquire Action ("Reservation Acquire – Command Dword 10", 02:00).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcquireAction {
    /// 000b: Acquire.
    Acquire,
    /// 001b: Preempt.
    Preempt,
    /// 010b: Preempt and Abort.
    PreemptAndAbort,
    /// 011b–111b: reserved.
    Reserved(u8),
}

impl AcquireAction {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 7 {
            0 => Self::Acquire,
            1 => Self::Preempt,
            2 => Self::PreemptAndAbort,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::Acquire => 0,
            Self::Preempt => 1,
            Self::PreemptAndAbort => 2,
            Self::Reserved(r) => r & 7,
        }
    }
}

/// "Reservation Acquire – Command Dword 10" decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquireFields {
    pub racqa: AcquireAction,
    /// IEKEY (bit 03).
    pub iekey: bool,
    /// RTYPE (15:08), raw.
    pub rtype: u8,
}

impl AcquireFields {
    pub fn from_command(cmd: &Command) -> Self {
        AcquireFields {
            racqa: AcquireAction::from_bits(cmd.cdw10 as u8),
            iekey: cmd.cdw10 & (1 << 3) != 0,
            rtype: (cmd.cdw10 >> 8) as u8,
        }
    }

    pub fn to_cdw10(self) -> u32 {
        self.racqa.into_bits() as u32 | (self.iekey as u32) << 3 | (self.rtype as u32) << 8
    }
}

/// "Reservation Acquire Data Structure" (16 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct AcquireData {
    /// CRKEY: Current Reservation Key.
    pub crkey: U64,
    /// PRKEY: Preempt Reservation Key (Preempt, Preempt and Abort).
    pub prkey: U64,
}
assert_size!(AcquireData, 16);

/// A Reservation Acquire command for `nsid` and its 16-byte data. `rtype` is raw so
/// that invalid types can be sent (use `ReservationType as u8`).
pub fn acquire(
    nsid: u32,
    racqa: AcquireAction,
    iekey: bool,
    rtype: u8,
    crkey: u64,
    prkey: u64,
) -> (Command, AcquireData) {
    let mut cmd = Command::nvm(NvmOpcode::ReservationAcquire, nsid);
    cmd.cdw10 = AcquireFields { racqa, iekey, rtype }.to_cdw10();
    (cmd, AcquireData { crkey: U64::new(crkey), prkey: U64::new(prkey) })
}

// ---------------------------------------------------------------------------------------
// Reservation Release (§6.12)
// ---------------------------------------------------------------------------------------

/// RRELA: Reservation Release Action ("Reservation Release – Command Dword 10", 02:00).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseAction {
    /// 000b: Release.
    Release,
    /// 001b: Clear.
    Clear,
    /// 010b–111b: reserved.
    Reserved(u8),
}

impl ReleaseAction {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 7 {
            0 => Self::Release,
            1 => Self::Clear,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::Release => 0,
            Self::Clear => 1,
            Self::Reserved(r) => r & 7,
        }
    }
}

/// "Reservation Release – Command Dword 10" decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReleaseFields {
    pub rrela: ReleaseAction,
    /// IEKEY (bit 03).
    pub iekey: bool,
    /// RTYPE (15:08), raw: the type of the reservation being released.
    pub rtype: u8,
}

impl ReleaseFields {
    pub fn from_command(cmd: &Command) -> Self {
        ReleaseFields {
            rrela: ReleaseAction::from_bits(cmd.cdw10 as u8),
            iekey: cmd.cdw10 & (1 << 3) != 0,
            rtype: (cmd.cdw10 >> 8) as u8,
        }
    }

    pub fn to_cdw10(self) -> u32 {
        self.rrela.into_bits() as u32 | (self.iekey as u32) << 3 | (self.rtype as u32) << 8
    }
}

/// "Reservation Release Data Structure" (8 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ReleaseData {
    /// CRKEY: Current Reservation Key.
    pub crkey: U64,
}
assert_size!(ReleaseData, 8);

/// A Reservation Release command for `nsid` and its 8-byte data.
pub fn release(nsid: u32, rrela: ReleaseAction, iekey: bool, rtype: u8, crkey: u64) -> (Command, ReleaseData) {
    let mut cmd = Command::nvm(NvmOpcode::ReservationRelease, nsid);
    cmd.cdw10 = ReleaseFields { rrela, iekey, rtype }.to_cdw10();
    (cmd, ReleaseData { crkey: U64::new(crkey) })
}

// ---------------------------------------------------------------------------------------
// Reservation Report (§6.13)
// ---------------------------------------------------------------------------------------

/// A transfer must be a whole, non-zero number of dwords.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a Reservation Report transfer is a whole, non-zero number of dwords; {bytes} bytes is not")]
pub struct ReportLengthError {
    pub bytes: u32,
}

/// "Reservation Report – Command Dword 10 / 11" decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportFields {
    /// NUMD: Number of Dwords to transfer, 0's based (CDW10).
    pub numd: u32,
    /// EDS: Extended Data Structure (CDW11 bit 0, NVMe 1.3): the extended structure with
    /// 128-bit host identifiers is returned.
    pub eds: bool,
}

impl ReportFields {
    pub fn from_command(cmd: &Command) -> Self {
        ReportFields { numd: cmd.cdw10, eds: cmd.cdw11 & 1 != 0 }
    }

    /// The number of bytes the command transfers.
    pub fn bytes(&self) -> u64 {
        (self.numd as u64 + 1) * 4
    }
}

/// A Reservation Report command for `nsid` transferring `bytes` (a non-zero multiple of 4).
pub fn report(nsid: u32, bytes: u32, eds: bool) -> Result<Command, ReportLengthError> {
    if bytes == 0 || !bytes.is_multiple_of(4) {
        return Err(ReportLengthError { bytes });
    }
    let mut cmd = Command::nvm(NvmOpcode::ReservationReport, nsid);
    cmd.cdw10 = bytes / 4 - 1;
    cmd.cdw11 = eds as u32;
    Ok(cmd)
}

/// The header of the "Reservation Status Data Structure" (bytes 23:00).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ReservationStatusHeader {
    /// GEN: Generation, incremented by every successful Register, Preempt, Preempt and
    /// Abort and Clear (not by Acquire or Release).
    pub gen: U32,
    /// RTYPE: the reservation type; 0h when there is no reservation.
    pub rtype: u8,
    /// REGCTL: Number of Registered Controllers (the data structures that follow).
    pub regctl: U16,
    pub rsvd7: [u8; 2],
    /// PTPLS: Persist Through Power Loss State (bit 0).
    pub ptpls: u8,
    pub rsvd10: [u8; 14],
}
assert_size!(ReservationStatusHeader, 24);

/// The header of the "Reservation Status Extended Data Structure" (bytes 63:00).
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ReservationStatusExtendedHeader {
    pub header: ReservationStatusHeader,
    pub rsvd24: [u8; 40],
}
assert_size!(ReservationStatusExtendedHeader, 64);

impl Default for ReservationStatusExtendedHeader {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// RCSTS: Reservation Status of a registered controller (bit 0: its host holds the reservation).
pub const RCSTS_HOLDS_RESERVATION: u8 = 1;

/// "Registered Controller Data Structure" (24 bytes, EDS = 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct RegisteredController {
    /// CNTLID: Controller ID (FFFFh: the controller is not identified).
    pub cntlid: U16,
    /// RCSTS: Reservation Status ([`RCSTS_HOLDS_RESERVATION`]).
    pub rcsts: u8,
    pub rsvd3: [u8; 5],
    /// HOSTID: the 64-bit Host Identifier of the controller's host.
    pub hostid: U64,
    /// RKEY: the host's Reservation Key.
    pub rkey: U64,
}
assert_size!(RegisteredController, 24);

/// "Registered Controller Extended Data Structure" (64 bytes, EDS = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct RegisteredControllerExtended {
    pub cntlid: U16,
    pub rcsts: u8,
    pub rsvd3: [u8; 5],
    /// RKEY: the host's Reservation Key.
    pub rkey: U64,
    /// HOSTID: the 128-bit Host Identifier of the controller's host.
    pub hostid: [u8; 16],
    pub rsvd32: [u8; 32],
}
assert_size!(RegisteredControllerExtended, 64);

impl Default for RegisteredControllerExtended {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// One registered controller of a Report, either layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registered {
    pub cntlid: u16,
    /// RCSTS bit 0: the controller's host holds the reservation.
    pub holds: bool,
    /// The host identifier: 8 bytes (EDS = 0, the rest zero) or 16 (EDS = 1).
    pub hostid: [u8; 16],
    pub rkey: u64,
}

/// A Reservation Status data structure read back (either layout), for hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservationStatus {
    pub gen: u32,
    /// RTYPE raw (0h: no reservation).
    pub rtype: u8,
    pub regctl: u16,
    pub ptpls: bool,
    /// The registered controller data structures present in the transfer.
    pub controllers: Vec<Registered>,
}

impl ReservationStatus {
    /// Parses `bytes` as the structure a Report with `eds` returns; controllers beyond the
    /// transfer are left out (REGCTL still counts them). `None` if the header is cut.
    pub fn parse(bytes: &[u8], eds: bool) -> Option<ReservationStatus> {
        let (header, rest) = if eds {
            let (h, rest) = ReservationStatusExtendedHeader::read_from_prefix(bytes).ok()?;
            (h.header, rest)
        } else {
            ReservationStatusHeader::read_from_prefix(bytes).ok()?
        };
        let regctl = header.regctl.get();
        let mut controllers = Vec::new();
        let mut rest = rest;
        for _ in 0..regctl {
            if eds {
                let Ok((c, tail)) = RegisteredControllerExtended::read_from_prefix(rest) else { break };
                controllers.push(Registered {
                    cntlid: c.cntlid.get(),
                    holds: c.rcsts & RCSTS_HOLDS_RESERVATION != 0,
                    hostid: c.hostid,
                    rkey: c.rkey.get(),
                });
                rest = tail;
            } else {
                let Ok((c, tail)) = RegisteredController::read_from_prefix(rest) else { break };
                let mut hostid = [0u8; 16];
                hostid[..8].copy_from_slice(c.hostid.as_bytes());
                controllers.push(Registered {
                    cntlid: c.cntlid.get(),
                    holds: c.rcsts & RCSTS_HOLDS_RESERVATION != 0,
                    hostid,
                    rkey: c.rkey.get(),
                });
                rest = tail;
            }
        }
        Some(ReservationStatus {
            gen: header.gen.get(),
            rtype: header.rtype,
            regctl,
            ptpls: header.ptpls & 1 != 0,
            controllers,
        })
    }
}

// ---------------------------------------------------------------------------------------
// Features 81h–83h
// ---------------------------------------------------------------------------------------

/// Bytes of the Host Identifier data structure (Feature 81h): 16, of which a 64-bit
/// identifier (EXHID = 0) uses bytes 07:00.
pub const HOST_IDENTIFIER_BYTES: usize = 16;

/// 81h "Host Identifier – Command Dword 11" (and CQE DW0 of the Get Features).
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct HostIdentifierCdw11 {
    /// EXHID: Enable Extended Host Identifier (bit 0, NVMe 1.3): a 128-bit identifier;
    /// cleared, a 64-bit one.
    pub exhid: bool,
    #[bits(31)]
    __: u32,
}

/// 82h "Reservation Notification Mask – Command Dword 11": a set bit masks (suppresses)
/// that kind of Reservation Notification log page for the namespace.
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct ReservationNotificationMask {
    __: bool,
    /// REGPRE: Mask Registration Preempted Notification (bit 1).
    pub regpre: bool,
    /// RESREL: Mask Reservation Released Notification (bit 2).
    pub resrel: bool,
    /// RESPRE: Mask Reservation Preempted Notification (bit 3).
    pub respre: bool,
    #[bits(28)]
    __: u32,
}

impl ReservationNotificationMask {
    /// Whether notices of `kind` are masked.
    pub fn masks(&self, kind: NotificationType) -> bool {
        match kind {
            NotificationType::Empty => true,
            NotificationType::RegistrationPreempted => self.regpre(),
            NotificationType::ReservationReleased => self.resrel(),
            NotificationType::ReservationPreempted => self.respre(),
        }
    }
}

/// 83h "Reservation Persistence – Command Dword 11".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct ReservationPersistence {
    /// PTPL: Persist Through Power Loss (bit 0).
    pub ptpl: bool,
    #[bits(31)]
    __: u32,
}

// ---------------------------------------------------------------------------------------
// Reservation Notification log page (80h) and its event
// ---------------------------------------------------------------------------------------

/// Asynchronous Event Type 110b: I/O Command Specific status (Figure 146).
pub const ASYNC_EVENT_IO_COMMAND_SPECIFIC: u8 = 6;
/// Asynchronous Event Information 00h for type 110b: Reservation Log Page Available.
pub const RESERVATION_LOG_PAGE_AVAILABLE: u8 = 0;

/// Reservation Notification Type ("Reservation Notification Log", byte 08).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum NotificationType {
    /// 0h: Empty Log Page.
    Empty = 0,
    /// 1h: Registration Preempted.
    RegistrationPreempted = 1,
    /// 2h: Reservation Released.
    ReservationReleased = 2,
    /// 3h: Reservation Preempted.
    ReservationPreempted = 3,
}

impl NotificationType {
    pub fn from_u8(value: u8) -> Option<Self> {
        [Self::Empty, Self::RegistrationPreempted, Self::ReservationReleased, Self::ReservationPreempted]
            .into_iter()
            .find(|t| *t as u8 == value)
    }
}

/// "Reservation Notification Log" (log page 80h, 64 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ReservationNotificationLog {
    /// Log Page Count: a 64-bit count of the Reservation Notification log pages created,
    /// wrapping to 1 (0h only in an empty page).
    pub log_page_count: U64,
    /// Reservation Notification Log Page Type ([`NotificationType`]).
    pub rnlpt: u8,
    /// Number of Available Log Pages: further unread pages (FFh: 255 or more).
    pub nalp: u8,
    pub rsvd10: [u8; 2],
    /// NSID: the namespace the notification is for.
    pub nsid: U32,
    pub rsvd16: [u8; 48],
}
assert_size!(ReservationNotificationLog, 64);

impl Default for ReservationNotificationLog {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

impl ReservationNotificationLog {
    pub fn kind(&self) -> Option<NotificationType> {
        NotificationType::from_u8(self.rnlpt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn register_dword_10_holds_rrega_iekey_and_cptpl() {
        let (cmd, data) = register(3, RegisterAction::Replace, true, ChangePtpl::Set, 0x11, 0x22);
        assert_eq!(cmd.opcode, 0x0D);
        assert_eq!(cmd.nsid, 3);
        assert_eq!(cmd.cdw10, 0b010 | 1 << 3 | 3 << 30);
        let f = RegisterFields::from_command(&cmd);
        assert_eq!(f, RegisterFields { rrega: RegisterAction::Replace, iekey: true, cptpl: ChangePtpl::Set });
        assert_eq!(&data.as_bytes()[..8], &0x11u64.to_le_bytes());
        assert_eq!(&data.as_bytes()[8..], &0x22u64.to_le_bytes());
        assert_eq!(RegisterAction::from_bits(5), RegisterAction::Reserved(5));
        assert_eq!(ChangePtpl::from_bits(1), ChangePtpl::Reserved);
    }

    #[test]
    fn acquire_and_release_put_rtype_in_15_8() {
        let (cmd, data) = acquire(1, AcquireAction::PreemptAndAbort, false, 4, 7, 9);
        assert_eq!((cmd.opcode, cmd.cdw10), (0x11, 0x0402));
        assert_eq!(AcquireFields::from_command(&cmd).racqa, AcquireAction::PreemptAndAbort);
        assert_eq!((data.crkey.get(), data.prkey.get()), (7, 9));
        let (cmd, data) = release(1, ReleaseAction::Clear, true, 6, 5);
        assert_eq!((cmd.opcode, cmd.cdw10), (0x15, 0x0609));
        let f = ReleaseFields::from_command(&cmd);
        assert_eq!((f.rrela, f.iekey, f.rtype), (ReleaseAction::Clear, true, 6));
        assert_eq!(data.as_bytes(), &5u64.to_le_bytes());
    }

    #[test]
    fn report_carries_numd_and_eds() {
        let cmd = report(2, 4096, true).unwrap();
        assert_eq!((cmd.opcode, cmd.cdw10, cmd.cdw11), (0x0E, 1023, 1));
        let f = ReportFields::from_command(&cmd);
        assert_eq!((f.bytes(), f.eds), (4096, true));
        assert_eq!(report(2, 6, false), Err(ReportLengthError { bytes: 6 }));
    }

    #[test]
    fn types_map_to_rescap_bits_and_the_access_table() {
        assert_eq!(ReservationType::from_u8(0), None);
        assert_eq!(ReservationType::from_u8(7), None);
        assert_eq!(ReservationType::WriteExclusive.rescap_bit(), 1 << 1);
        assert_eq!(ReservationType::ExclusiveAccessAllRegistrants.rescap_bit(), 1 << 6);
        use CommandGroup::*;
        use ReservationType::*;
        use Standing::*;
        let rows = [
            (WriteExclusive, [true, true, false, false]),
            (ExclusiveAccess, [false, false, false, false]),
            (WriteExclusiveRegistrantsOnly, [true, true, false, true]),
            (ExclusiveAccessRegistrantsOnly, [false, true, false, true]),
            (WriteExclusiveAllRegistrants, [true, true, false, true]),
            (ExclusiveAccessAllRegistrants, [false, true, false, true]),
        ];
        for (t, [read_non, read_reg, write_non, write_reg]) in rows {
            assert_eq!(access_allowed(t, NonRegistrant, Read), read_non, "{}", t.name());
            assert_eq!(access_allowed(t, Registrant, Read), read_reg, "{}", t.name());
            assert_eq!(access_allowed(t, NonRegistrant, Write), write_non, "{}", t.name());
            assert_eq!(access_allowed(t, Registrant, Write), write_reg, "{}", t.name());
            assert!(access_allowed(t, Holder, Read) && access_allowed(t, Holder, Write));
        }
        assert_eq!(CommandGroup::of(0x02), Some(Read));
        assert_eq!(CommandGroup::of(0x09), Some(Write));
        assert_eq!(CommandGroup::of(0x00), None);
    }

    #[test]
    fn status_structures_sit_at_their_bytes() {
        assert_eq!(offset_of!(ReservationStatusHeader, rtype), 4);
        assert_eq!(offset_of!(ReservationStatusHeader, regctl), 5);
        assert_eq!(offset_of!(ReservationStatusHeader, ptpls), 9);
        assert_eq!(offset_of!(RegisteredController, hostid), 8);
        assert_eq!(offset_of!(RegisteredController, rkey), 16);
        assert_eq!(offset_of!(RegisteredControllerExtended, rkey), 8);
        assert_eq!(offset_of!(RegisteredControllerExtended, hostid), 16);
        assert_eq!(offset_of!(ReservationNotificationLog, nsid), 12);
        let mut bytes =
            ReservationStatusHeader { gen: U32::new(5), rtype: 3, regctl: U16::new(1), ptpls: 1, ..Default::default() }
                .as_bytes()
                .to_vec();
        let c = RegisteredController {
            cntlid: U16::new(2),
            rcsts: 1,
            hostid: U64::new(0xAB),
            rkey: U64::new(0xCD),
            ..Default::default()
        };
        bytes.extend_from_slice(c.as_bytes());
        let s = ReservationStatus::parse(&bytes, false).unwrap();
        assert_eq!((s.gen, s.rtype, s.regctl, s.ptpls), (5, 3, 1, true));
        assert_eq!(s.controllers[0].cntlid, 2);
        assert!(s.controllers[0].holds);
        assert_eq!((s.controllers[0].hostid[0], s.controllers[0].rkey), (0xAB, 0xCD));
        assert!(ReservationStatus::parse(&bytes[..10], false).is_none());
    }

    #[test]
    fn feature_values_sit_at_their_bits() {
        assert!(HostIdentifierCdw11::from_bits(1).exhid());
        let m = ReservationNotificationMask::new().with_regpre(true).with_respre(true);
        assert_eq!(m.into_bits(), 0b1010);
        assert!(m.masks(NotificationType::RegistrationPreempted));
        assert!(!m.masks(NotificationType::ReservationReleased));
        assert!(ReservationPersistence::from_bits(1).ptpl());
        assert_eq!(NotificationType::from_u8(3), Some(NotificationType::ReservationPreempted));
        assert_eq!(NotificationType::from_u8(4), None);
    }
}
