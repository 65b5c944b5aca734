//! Identify (admin opcode 06h, NVMe 1.4 §5.15): the command, its CNS values and the data
//! structures it returns.
//!
//! This module owns the Identify Controller and Identify Namespace data structures (with
//! their power state and LBA format descriptors), the Namespace and Controller lists, and
//! the Namespace Identification Descriptor list. Bit fields are typed so that no caller
//! tests raw bits. Figure names are those of NVMe 1.4; where 1.2a differs (fields that
//! were reserved there) the field says in which version it appeared.
//!
//! The Identify Namespace layout doubles as the host-specified data of a Namespace
//! Management create (see [`IdentifyNamespace::for_create`]).

use crate::assert_size;
use crate::spec::command::{AdminOpcode, Command};
use crate::spec::version::Version;
use bitfield_struct::bitfield;
use std::fmt;
use zerocopy::little_endian::U128;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

// ---------------------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------------------

/// CNS: Controller or Namespace Structure ("Identify – CNS Values"), the values nvtest
/// uses. Any other value can still be sent as a raw `u8` (to check that a controller
/// rejects it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Cns {
    /// 00h: Identify Namespace data structure for the NSID (active namespaces).
    Namespace = 0x00,
    /// 01h: Identify Controller data structure.
    Controller = 0x01,
    /// 02h: Active Namespace ID list (NSIDs greater than the NSID field).
    ActiveNamespaceList = 0x02,
    /// 03h: Namespace Identification Descriptor list. NVMe 1.3 and later (mandatory there).
    NamespaceDescriptorList = 0x03,
    /// 10h: Allocated Namespace ID list. NVMe 1.2 and later (Namespace Management).
    AllocatedNamespaceList = 0x10,
    /// 11h: Identify Namespace data structure for an allocated NSID. NVMe 1.2 and later.
    AllocatedNamespace = 0x11,
    /// 12h: Controller list of controllers attached to the NSID. NVMe 1.2 and later.
    NamespaceAttachedControllers = 0x12,
    /// 13h: Controller list of controllers in the NVM subsystem. NVMe 1.2 and later.
    ControllerList = 0x13,
}

impl Cns {
    pub const ALL: [Cns; 8] = [
        Self::Namespace,
        Self::Controller,
        Self::ActiveNamespaceList,
        Self::NamespaceDescriptorList,
        Self::AllocatedNamespaceList,
        Self::AllocatedNamespace,
        Self::NamespaceAttachedControllers,
        Self::ControllerList,
    ];

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|c| *c as u8 == value)
    }

    /// The first specification version that defines this CNS value. CNS was a single bit
    /// before 1.1; 00h/01h exist from 1.0, 02h from 1.1, 10h–13h from 1.2 (Namespace
    /// Management), 03h from 1.3.
    pub fn introduced_in(self) -> Version {
        match self {
            Self::Namespace | Self::Controller => Version::V1_0,
            Self::ActiveNamespaceList => Version::V1_1,
            Self::AllocatedNamespaceList
            | Self::AllocatedNamespace
            | Self::NamespaceAttachedControllers
            | Self::ControllerList => Version::V1_2,
            Self::NamespaceDescriptorList => Version::V1_3,
        }
    }
}

impl From<Cns> for u8 {
    fn from(cns: Cns) -> u8 {
        cns as u8
    }
}

/// "Identify – Command Dword 10": CNS (bits 07:00) and CNTID (bits 31:16, Controller
/// Identifier, used by CNS 12h and 13h; NVMe 1.2 and later).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdentifyCdw10 {
    /// CNS, raw: a controller model must see reserved values too.
    pub cns: u8,
    pub cntid: u16,
}

impl IdentifyCdw10 {
    pub fn from_cdw10(cdw10: u32) -> Self {
        IdentifyCdw10 { cns: cdw10 as u8, cntid: (cdw10 >> 16) as u16 }
    }

    /// Decodes an Identify command's CDW10 (the opcode is not checked).
    pub fn from_command(cmd: &Command) -> Self {
        Self::from_cdw10(cmd.cdw10)
    }

    pub fn to_cdw10(self) -> u32 {
        self.cns as u32 | (self.cntid as u32) << 16
    }

    /// The CNS value as a known [`Cns`], or `None` for a value nvtest does not model.
    pub fn known_cns(&self) -> Option<Cns> {
        Cns::from_u8(self.cns)
    }
}

/// An Identify command. The 4096-byte data buffer is supplied with the command.
pub fn identify(cns: impl Into<u8>, nsid: u32, cntid: u16) -> Command {
    let mut cmd = Command::admin(AdminOpcode::Identify);
    cmd.nsid = nsid;
    cmd.cdw10 = IdentifyCdw10 { cns: cns.into(), cntid }.to_cdw10();
    cmd
}

// ---------------------------------------------------------------------------------------
// ASCII string fields
// ---------------------------------------------------------------------------------------

/// An ASCII string field (SN, MN, FR, a firmware slot revision): the spec requires
/// printable ASCII (20h–7Eh), left justified and padded with spaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsciiField {
    /// The text with trailing spaces and NULs removed; any other byte outside 20h–7Eh is
    /// shown as `\xNN`.
    pub text: String,
    /// Every byte outside 20h–7Eh, padding included, as (offset in the field, byte).
    pub non_printable: Vec<(usize, u8)>,
}

impl AsciiField {
    pub fn new(raw: &[u8]) -> Self {
        let non_printable = raw.iter().enumerate().filter(|(_, b)| !is_printable(**b)).map(|(i, b)| (i, *b)).collect();
        let end = raw.iter().rposition(|b| *b != b' ' && *b != 0).map_or(0, |i| i + 1);
        let mut text = String::with_capacity(end);
        for b in &raw[..end] {
            if is_printable(*b) {
                text.push(*b as char);
            } else {
                text.push_str(&format!("\\x{b:02X}"));
            }
        }
        AsciiField { text, non_printable }
    }

    /// True when every byte is printable ASCII, as the spec requires.
    pub fn is_clean(&self) -> bool {
        self.non_printable.is_empty()
    }
}

impl fmt::Display for AsciiField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn is_printable(b: u8) -> bool {
    (0x20..=0x7E).contains(&b)
}

/// Copies `text` into a fixed ASCII field, padded with spaces (for building data).
/// Bytes beyond the field are dropped.
pub fn ascii_padded<const N: usize>(text: &str) -> [u8; N] {
    let mut field = [b' '; N];
    for (dst, src) in field.iter_mut().zip(text.bytes()) {
        *dst = src;
    }
    field
}

// ---------------------------------------------------------------------------------------
// Identify Controller
// ---------------------------------------------------------------------------------------

/// CMIC: Controller Multi-Path I/O and Namespace Sharing Capabilities (byte 76).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Cmic {
    /// Bit 0: the NVM subsystem may contain two or more physical PCI Express ports.
    pub multiple_ports: bool,
    /// Bit 1: the NVM subsystem may contain two or more controllers.
    pub multiple_controllers: bool,
    /// Bit 2: the controller is associated with an SR-IOV Virtual Function.
    pub sriov: bool,
    /// Bit 3: Asymmetric Namespace Access Reporting supported (NVMe 1.4).
    pub ana_reporting: bool,
    #[bits(4)]
    __: u8,
}

/// OAES: Optional Asynchronous Events Supported (bytes 95:92, NVMe 1.2 and later).
#[bitfield(u32)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Oaes {
    #[bits(8)]
    __: u8,
    /// Bit 8: Namespace Attribute Notices (and the Changed Namespace List log page).
    pub namespace_attribute_notices: bool,
    /// Bit 9: Firmware Activation Notices.
    pub firmware_activation_notices: bool,
    #[bits(1)]
    __: u8,
    /// Bit 11: Asymmetric Namespace Access Change Notices (NVMe 1.4).
    pub ana_change_notices: bool,
    /// Bit 12: Predictable Latency Event Aggregate Log Change Notices (NVMe 1.4).
    pub predictable_latency_event_notices: bool,
    /// Bit 13: LBA Status Information Notices (NVMe 1.4).
    pub lba_status_information_notices: bool,
    /// Bit 14: Endurance Group Event Aggregate Log Page Change Notices (NVMe 1.4).
    pub endurance_group_event_notices: bool,
    #[bits(17)]
    __: u32,
}

/// CTRATT: Controller Attributes (bytes 99:96, NVMe 1.2 and later).
#[bitfield(u32)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Ctratt {
    /// Bit 0: HIDS, 128-bit Host Identifier supported.
    pub hids: bool,
    /// Bit 1: NOPSPM, Non-Operational Power State Permissive Mode supported (1.3).
    pub nopspm: bool,
    /// Bit 2: NVM Sets supported (1.4).
    pub nvm_sets: bool,
    /// Bit 3: Read Recovery Levels supported (1.4).
    pub read_recovery_levels: bool,
    /// Bit 4: Endurance Groups supported (1.4).
    pub endurance_groups: bool,
    /// Bit 5: Predictable Latency Mode supported (1.4).
    pub predictable_latency_mode: bool,
    /// Bit 6: TBKAS, Traffic Based Keep Alive supported (1.4).
    pub tbkas: bool,
    /// Bit 7: Namespace Granularity (1.4).
    pub namespace_granularity: bool,
    /// Bit 8: SQ Associations (1.4).
    pub sq_associations: bool,
    /// Bit 9: UUID List (1.4).
    pub uuid_list: bool,
    #[bits(22)]
    __: u32,
}

/// OACS: Optional Admin Command Support (bytes 257:256).
#[bitfield(u16)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Oacs {
    /// Bit 0: Security Send and Security Receive.
    pub security: bool,
    /// Bit 1: Format NVM.
    pub format_nvm: bool,
    /// Bit 2: Firmware Commit and Firmware Image Download.
    pub firmware: bool,
    /// Bit 3: Namespace Management and Namespace Attachment (NVMe 1.2).
    pub namespace_management: bool,
    /// Bit 4: Device Self-test (NVMe 1.3).
    pub device_self_test: bool,
    /// Bit 5: Directives (NVMe 1.3).
    pub directives: bool,
    /// Bit 6: NVMe-MI Send and NVMe-MI Receive (NVMe 1.3).
    pub nvme_mi: bool,
    /// Bit 7: Virtualization Management (NVMe 1.3).
    pub virtualization_management: bool,
    /// Bit 8: Doorbell Buffer Config (NVMe 1.3).
    pub doorbell_buffer_config: bool,
    /// Bit 9: Get LBA Status (NVMe 1.4).
    pub get_lba_status: bool,
    #[bits(6)]
    __: u8,
}

/// FRMW: Firmware Updates (byte 260).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Frmw {
    /// Bit 0: the first firmware slot (slot 1) is read only.
    pub slot1_read_only: bool,
    /// Bits 3:1: number of firmware slots (1 to 7).
    #[bits(3)]
    pub slots: u8,
    /// Bit 4: firmware activation without a reset supported (NVMe 1.2).
    pub activation_without_reset: bool,
    #[bits(3)]
    __: u8,
}

/// LPA: Log Page Attributes (byte 261).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Lpa {
    /// Bit 0: SMART / Health Information log page per namespace.
    pub smart_per_namespace: bool,
    /// Bit 1: Commands Supported and Effects log page (NVMe 1.2).
    pub commands_supported_and_effects: bool,
    /// Bit 2: extended data for Get Log Page: NUMDU, and LPOL/LPOU (NVMe 1.2.1). Without
    /// it a controller reads NUMD from CDW10 bits 27:16 only.
    pub extended_data: bool,
    /// Bit 3: Telemetry Host-Initiated and Controller-Initiated log pages (NVMe 1.3).
    pub telemetry: bool,
    /// Bit 4: Persistent Event log (NVMe 1.4).
    pub persistent_event: bool,
    #[bits(3)]
    __: u8,
}

/// SANICAP: Sanitize Capabilities (bytes 331:328, NVMe 1.3 and later).
#[bitfield(u32)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Sanicap {
    /// Bit 0: CES, Crypto Erase sanitize operation supported.
    pub ces: bool,
    /// Bit 1: BES, Block Erase sanitize operation supported.
    pub bes: bool,
    /// Bit 2: OWS, Overwrite sanitize operation supported.
    pub ows: bool,
    #[bits(26)]
    __: u32,
    /// Bit 29: NDI, No-Deallocate Inhibited (NVMe 1.4).
    pub ndi: bool,
    /// Bits 31:30: NODMMAS, No-Deallocate Modifies Media After Sanitize (NVMe 1.4).
    #[bits(2)]
    pub nodmmas: u8,
}

/// ONCS: Optional NVM Command Support (bytes 521:520).
#[bitfield(u16)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Oncs {
    /// Bit 0: Compare.
    pub compare: bool,
    /// Bit 1: Write Uncorrectable.
    pub write_uncorrectable: bool,
    /// Bit 2: Dataset Management.
    pub dataset_management: bool,
    /// Bit 3: Write Zeroes (NVMe 1.1).
    pub write_zeroes: bool,
    /// Bit 4: the Save field in Set Features and the Select field in Get Features (1.1).
    pub save_select: bool,
    /// Bit 5: Reservations (NVMe 1.1).
    pub reservations: bool,
    /// Bit 6: Timestamp feature (NVMe 1.3).
    pub timestamp: bool,
    /// Bit 7: Verify (NVMe 1.4).
    pub verify: bool,
    #[bits(8)]
    __: u8,
}

/// FNA: Format NVM Attributes (byte 524).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Fna {
    /// Bit 0: a format (any Format NVM) applies to all namespaces.
    pub format_all_namespaces: bool,
    /// Bit 1: a secure erase applies to all namespaces.
    pub secure_erase_all_namespaces: bool,
    /// Bit 2: cryptographic erase is supported as part of the secure erase.
    pub crypto_erase: bool,
    #[bits(5)]
    __: u8,
}

/// VWC bits 2:1 (NVMe 1.4): what a Flush with NSID FFFFFFFFh does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushBroadcast {
    /// 00b: support for NSID FFFFFFFFh is not indicated (every pre-1.4 controller).
    NotIndicated,
    /// 01b: reserved.
    Reserved,
    /// 10b: not supported; such a Flush is aborted with Invalid Namespace or Format.
    NotSupported,
    /// 11b: supported.
    Supported,
}

impl FlushBroadcast {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 3 {
            0 => Self::NotIndicated,
            1 => Self::Reserved,
            2 => Self::NotSupported,
            _ => Self::Supported,
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::NotIndicated => 0,
            Self::Reserved => 1,
            Self::NotSupported => 2,
            Self::Supported => 3,
        }
    }
}

/// VWC: Volatile Write Cache (byte 525).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Vwc {
    /// Bit 0: a volatile write cache is present.
    pub present: bool,
    /// Bits 2:1: Flush with NSID FFFFFFFFh (NVMe 1.4).
    #[bits(2)]
    pub flush_broadcast: FlushBroadcast,
    #[bits(5)]
    __: u8,
}

/// A power state descriptor's byte 3: MXPS (bit 0) and NOPS (bit 1).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct PsdFlags {
    /// MXPS: Max Power Scale (0: MP in 0.01 W, 1: in 0.0001 W). NVMe 1.1.
    pub mxps: bool,
    /// NOPS: Non-Operational State.
    pub nops: bool,
    #[bits(6)]
    __: u8,
}

/// A power state descriptor's byte 18: IPS, Idle Power Scale (bits 7:6). NVMe 1.2.
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct PsdIdle {
    #[bits(6)]
    __: u8,
    /// IPS: 00b not reported, 01b 0.0001 W, 10b 0.01 W, 11b reserved.
    #[bits(2)]
    pub ips: u8,
}

/// A power state descriptor's byte 22: APW (bits 2:0) and APS (bits 7:6). NVMe 1.2.
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct PsdActive {
    /// APW: Active Power Workload.
    #[bits(3)]
    pub apw: u8,
    #[bits(3)]
    __: u8,
    /// APS: Active Power Scale (as IPS).
    #[bits(2)]
    pub aps: u8,
}

/// "Figure 248: Identify – Power State Descriptor Data Structure" (32 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct PowerStateDescriptor {
    /// MP: Maximum Power (bytes 1:0), in the unit MXPS selects.
    pub mp: u16,
    pub rsvd2: u8,
    /// MXPS and NOPS (byte 3).
    pub flags: PsdFlags,
    /// ENLAT: Entry Latency in microseconds (0: not reported).
    pub enlat: u32,
    /// EXLAT: Exit Latency in microseconds (0: not reported).
    pub exlat: u32,
    /// RRT: Relative Read Throughput (bits 4:0).
    pub rrt: u8,
    /// RRL: Relative Read Latency (bits 4:0).
    pub rrl: u8,
    /// RWT: Relative Write Throughput (bits 4:0).
    pub rwt: u8,
    /// RWL: Relative Write Latency (bits 4:0).
    pub rwl: u8,
    /// IDLP: Idle Power (NVMe 1.2).
    pub idlp: u16,
    /// IPS (byte 18).
    pub idle: PsdIdle,
    pub rsvd19: u8,
    /// ACTP: Active Power (NVMe 1.2).
    pub actp: u16,
    /// APW and APS (byte 22).
    pub active: PsdActive,
    pub rsvd23: [u8; 9],
}
assert_size!(PowerStateDescriptor, 32);

impl PowerStateDescriptor {
    /// MP in microwatts, whichever scale MXPS selects.
    pub fn max_power_microwatts(&self) -> u64 {
        if self.flags.mxps() {
            self.mp as u64 * 100
        } else {
            self.mp as u64 * 10_000
        }
    }
}

/// "Figure 247: Identify – Identify Controller Data Structure" (4096 bytes).
///
/// Field names are the spec's; reserved ranges are `rsvdNNN` by their byte offset. The
/// NVMe-MI fields (bytes 253–255) are defined by the NVMe Management Interface
/// specification, the fabrics region (1792–2047) by NVMe over Fabrics.
#[derive(Clone, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct IdentifyController {
    /// VID: PCI Vendor ID.
    pub vid: u16,
    /// SSVID: PCI Subsystem Vendor ID.
    pub ssvid: u16,
    /// SN: Serial Number (ASCII).
    pub sn: [u8; 20],
    /// MN: Model Number (ASCII).
    pub mn: [u8; 40],
    /// FR: Firmware Revision (ASCII).
    pub fr: [u8; 8],
    /// RAB: Recommended Arbitration Burst (2^n commands).
    pub rab: u8,
    /// IEEE: IEEE OUI Identifier.
    pub ieee: [u8; 3],
    /// CMIC: Controller Multi-Path I/O and Namespace Sharing Capabilities.
    pub cmic: Cmic,
    /// MDTS: Maximum Data Transfer Size (2^n units of CAP.MPSMIN; 0 is no limit).
    pub mdts: u8,
    /// CNTLID: Controller ID (NVMe 1.1).
    pub cntlid: u16,
    /// VER: Version (NVMe 1.2; a 1.0/1.1 controller may report 0).
    pub ver: u32,
    /// RTD3R: RTD3 Resume Latency in microseconds (NVMe 1.2).
    pub rtd3r: u32,
    /// RTD3E: RTD3 Entry Latency in microseconds (NVMe 1.2).
    pub rtd3e: u32,
    /// OAES: Optional Asynchronous Events Supported (NVMe 1.2).
    pub oaes: Oaes,
    /// CTRATT: Controller Attributes (NVMe 1.2).
    pub ctratt: Ctratt,
    /// RRLS: Read Recovery Levels Supported (NVMe 1.4).
    pub rrls: u16,
    pub rsvd102: [u8; 9],
    /// CNTRLTYPE: Controller Type (NVMe 1.4; 1h I/O controller).
    pub cntrltype: u8,
    /// FGUID: FRU Globally Unique Identifier (NVMe 1.3).
    pub fguid: [u8; 16],
    /// CRDT1: Command Retry Delay Time 1, in 100 ms units (NVMe 1.4).
    pub crdt1: u16,
    /// CRDT2: Command Retry Delay Time 2 (NVMe 1.4).
    pub crdt2: u16,
    /// CRDT3: Command Retry Delay Time 3 (NVMe 1.4).
    pub crdt3: u16,
    pub rsvd134: [u8; 106],
    /// Bytes 240–252 of the NVMe-MI region (reserved there).
    pub rsvd240: [u8; 13],
    /// NVMSR: NVM Subsystem Report (NVMe-MI).
    pub nvmsr: u8,
    /// VWCI: VPD Write Cycle Information (NVMe-MI).
    pub vwci: u8,
    /// MEC: Management Endpoint Capabilities (NVMe-MI).
    pub mec: u8,
    /// OACS: Optional Admin Command Support.
    pub oacs: Oacs,
    /// ACL: Abort Command Limit (0's based).
    pub acl: u8,
    /// AERL: Asynchronous Event Request Limit (0's based).
    pub aerl: u8,
    /// FRMW: Firmware Updates.
    pub frmw: Frmw,
    /// LPA: Log Page Attributes.
    pub lpa: Lpa,
    /// ELPE: Error Log Page Entries (0's based).
    pub elpe: u8,
    /// NPSS: Number of Power States Support (0's based).
    pub npss: u8,
    /// AVSCC: Admin Vendor Specific Command Configuration (bit 0: standard format).
    pub avscc: u8,
    /// APSTA: Autonomous Power State Transition Attributes (bit 0: supported; 1.1).
    pub apsta: u8,
    /// WCTEMP: Warning Composite Temperature Threshold, in kelvins (NVMe 1.2).
    pub wctemp: u16,
    /// CCTEMP: Critical Composite Temperature Threshold, in kelvins (NVMe 1.2).
    pub cctemp: u16,
    /// MTFA: Maximum Time for Firmware Activation, in 100 ms units (NVMe 1.2).
    pub mtfa: u16,
    /// HMPRE: Host Memory Buffer Preferred Size, in 4 KiB units (NVMe 1.2).
    pub hmpre: u32,
    /// HMMIN: Host Memory Buffer Minimum Size, in 4 KiB units (NVMe 1.2).
    pub hmmin: u32,
    /// TNVMCAP: Total NVM Capacity in bytes (NVMe 1.2).
    pub tnvmcap: U128,
    /// UNVMCAP: Unallocated NVM Capacity in bytes (NVMe 1.2).
    pub unvmcap: U128,
    /// RPMBS: Replay Protected Memory Block Support (NVMe 1.2).
    pub rpmbs: u32,
    /// EDSTT: Extended Device Self-test Time, in minutes (NVMe 1.3).
    pub edstt: u16,
    /// DSTO: Device Self-test Options (NVMe 1.3).
    pub dsto: u8,
    /// FWUG: Firmware Update Granularity, in 4 KiB units (NVMe 1.3).
    pub fwug: u8,
    /// KAS: Keep Alive Support, in 100 ms units (NVMe 1.2.1).
    pub kas: u16,
    /// HCTMA: Host Controlled Thermal Management Attributes (NVMe 1.3).
    pub hctma: u16,
    /// MNTMT: Minimum Thermal Management Temperature, in kelvins (NVMe 1.3).
    pub mntmt: u16,
    /// MXTMT: Maximum Thermal Management Temperature, in kelvins (NVMe 1.3).
    pub mxtmt: u16,
    /// SANICAP: Sanitize Capabilities (NVMe 1.3).
    pub sanicap: Sanicap,
    /// HMMINDS: Host Memory Buffer Minimum Descriptor Entry Size (NVMe 1.4).
    pub hmminds: u32,
    /// HMMAXD: Host Memory Maximum Descriptors Entries (NVMe 1.4).
    pub hmmaxd: u16,
    /// NSETIDMAX: NVM Set Identifier Maximum (NVMe 1.4).
    pub nsetidmax: u16,
    /// ENDGIDMAX: Endurance Group Identifier Maximum (NVMe 1.4).
    pub endgidmax: u16,
    /// ANATT: ANA Transition Time in seconds (NVMe 1.4).
    pub anatt: u8,
    /// ANACAP: Asymmetric Namespace Access Capabilities (NVMe 1.4).
    pub anacap: u8,
    /// ANAGRPMAX: ANA Group Identifier Maximum (NVMe 1.4).
    pub anagrpmax: u32,
    /// NANAGRPID: Number of ANA Group Identifiers (NVMe 1.4).
    pub nanagrpid: u32,
    /// PELS: Persistent Event Log Size, in 64 KiB units (NVMe 1.4).
    pub pels: u32,
    pub rsvd356: [u8; 156],
    /// SQES: Submission Queue Entry Size (bits 3:0 required, 7:4 maximum; log2).
    pub sqes: u8,
    /// CQES: Completion Queue Entry Size (bits 3:0 required, 7:4 maximum; log2).
    pub cqes: u8,
    /// MAXCMD: Maximum Outstanding Commands (fabrics; NVMe 1.2.1).
    pub maxcmd: u16,
    /// NN: Number of Namespaces (the largest valid NSID).
    pub nn: u32,
    /// ONCS: Optional NVM Command Support.
    pub oncs: Oncs,
    /// FUSES: Fused Operation Support (bit 0: Compare and Write).
    pub fuses: u16,
    /// FNA: Format NVM Attributes.
    pub fna: Fna,
    /// VWC: Volatile Write Cache.
    pub vwc: Vwc,
    /// AWUN: Atomic Write Unit Normal (0's based, logical blocks).
    pub awun: u16,
    /// AWUPF: Atomic Write Unit Power Fail (0's based, logical blocks).
    pub awupf: u16,
    /// NVSCC: NVM Vendor Specific Command Configuration.
    pub nvscc: u8,
    /// NWPC: Namespace Write Protection Capabilities (NVMe 1.4).
    pub nwpc: u8,
    /// ACWU: Atomic Compare & Write Unit (0's based; NVMe 1.2).
    pub acwu: u16,
    pub rsvd534: [u8; 2],
    /// SGLS: SGL Support (NVMe 1.1).
    pub sgls: u32,
    /// MNAN: Maximum Number of Allowed Namespaces (NVMe 1.4).
    pub mnan: u32,
    pub rsvd544: [u8; 224],
    /// SUBNQN: NVM Subsystem NVMe Qualified Name (UTF-8, NUL terminated; NVMe 1.2.1).
    pub subnqn: [u8; 256],
    pub rsvd1024: [u8; 768],
    /// NVMe over Fabrics region (bytes 2047:1792).
    pub nvmof: [u8; 256],
    /// PSD0–PSD31: Power State Descriptors.
    pub psd: [PowerStateDescriptor; 32],
    /// VS: Vendor Specific.
    pub vs: [u8; 1024],
}
assert_size!(IdentifyController, 4096);

impl Default for IdentifyController {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

impl IdentifyController {
    /// SN, trimmed, with any non-printable byte reported.
    pub fn serial(&self) -> AsciiField {
        AsciiField::new(&self.sn)
    }

    /// MN, trimmed, with any non-printable byte reported.
    pub fn model(&self) -> AsciiField {
        AsciiField::new(&self.mn)
    }

    /// FR, trimmed, with any non-printable byte reported.
    pub fn firmware(&self) -> AsciiField {
        AsciiField::new(&self.fr)
    }

    /// VER decoded (0.0.0 when a pre-1.2 controller leaves it zero).
    pub fn version(&self) -> Version {
        Version::from_register(self.ver)
    }

    /// TNVMCAP in bytes.
    pub fn tnvmcap(&self) -> u128 {
        self.tnvmcap.get()
    }

    /// UNVMCAP in bytes.
    pub fn unvmcap(&self) -> u128 {
        self.unvmcap.get()
    }

    /// MDTS in bytes, given the minimum memory page size (`2 ^ (12 + CAP.MPSMIN)`).
    /// `None` when MDTS is 0 (no limit); a size beyond `u64` saturates to `u64::MAX`.
    pub fn mdts_bytes(&self, mps_min_bytes: u64) -> Option<u64> {
        if self.mdts == 0 {
            return None;
        }
        Some(match 1u64.checked_shl(self.mdts as u32) {
            Some(pages) => pages.saturating_mul(mps_min_bytes),
            None => u64::MAX,
        })
    }

    /// The power state descriptors the controller supports (PSD0 to PSD`NPSS`).
    pub fn power_states(&self) -> &[PowerStateDescriptor] {
        &self.psd[..=(self.npss as usize).min(31)]
    }
}

// ---------------------------------------------------------------------------------------
// Identify Namespace
// ---------------------------------------------------------------------------------------

/// NSFEAT: Namespace Features (byte 24).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Nsfeat {
    /// Bit 0: THINP, thin provisioning (NCAP may be less than NSZE).
    pub thinp: bool,
    /// Bit 1: NSABP, NAWUN/NAWUPF/NACWU are defined (NVMe 1.2).
    pub nsabp: bool,
    /// Bit 2: DAE, Deallocated or Unwritten Logical Block error supported (NVMe 1.3).
    pub dae: bool,
    /// Bit 3: UIDREUSE, NGUID/EUI64 are never reused (NVMe 1.3).
    pub uidreuse: bool,
    /// Bit 4: OPTPERF, NPWG/NPWA/NPDG/NPDA/NOWS are defined (NVMe 1.4).
    pub optperf: bool,
    #[bits(3)]
    __: u8,
}

/// FLBAS: Formatted LBA Size (byte 26).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Flbas {
    /// Bits 3:0: the LBA format (index into LBAF0–LBAF15) the namespace is formatted with.
    #[bits(4)]
    pub format: u8,
    /// Bit 4: metadata is transferred at the end of the data LBA (extended LBA); clear,
    /// it is transferred in a separate buffer.
    pub extended: bool,
    #[bits(3)]
    __: u8,
}

/// MC: Metadata Capabilities (byte 27).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mc {
    /// Bit 0: metadata as part of an extended data LBA is supported.
    pub extended_lba: bool,
    /// Bit 1: metadata in a separate buffer is supported.
    pub separate_buffer: bool,
    #[bits(6)]
    __: u8,
}

/// DPC: End-to-end Data Protection Capabilities (byte 28).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Dpc {
    /// Bit 0: Protection Information Type 1 supported.
    pub type1: bool,
    /// Bit 1: Protection Information Type 2 supported.
    pub type2: bool,
    /// Bit 2: Protection Information Type 3 supported.
    pub type3: bool,
    /// Bit 3: protection information in the first eight bytes of metadata supported.
    pub first_eight_bytes: bool,
    /// Bit 4: protection information in the last eight bytes of metadata supported.
    pub last_eight_bytes: bool,
    #[bits(3)]
    __: u8,
}

/// DPS: End-to-end Data Protection Type Settings (byte 29).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Dps {
    /// Bits 2:0: PIT, 000b protection disabled, 001b–011b Type 1–3, others reserved.
    #[bits(3)]
    pub pit: u8,
    /// Bit 3: protection information is the first eight bytes of metadata (else last).
    pub first_eight_bytes: bool,
    #[bits(4)]
    __: u8,
}

/// NMIC: Namespace Multi-path I/O and Namespace Sharing Capabilities (byte 30).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Nmic {
    /// Bit 0: the namespace may be attached to two or more controllers (shared).
    pub shared: bool,
    #[bits(7)]
    __: u8,
}

/// RESCAP: Reservation Capabilities (byte 31).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Rescap {
    /// Bit 0: Persist Through Power Loss.
    pub ptpl: bool,
    /// Bit 1: Write Exclusive.
    pub write_exclusive: bool,
    /// Bit 2: Exclusive Access.
    pub exclusive_access: bool,
    /// Bit 3: Write Exclusive – Registrants Only.
    pub write_exclusive_registrants_only: bool,
    /// Bit 4: Exclusive Access – Registrants Only.
    pub exclusive_access_registrants_only: bool,
    /// Bit 5: Write Exclusive – All Registrants.
    pub write_exclusive_all_registrants: bool,
    /// Bit 6: Exclusive Access – All Registrants.
    pub exclusive_access_all_registrants: bool,
    /// Bit 7: IEKEY, Ignore Existing Key as defined in 1.3 and later.
    pub iekey: bool,
}

/// FPI: Format Progress Indicator (byte 32, NVMe 1.2).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Fpi {
    /// Bits 6:0: percentage of the Format NVM command that remains to be completed.
    #[bits(7)]
    pub remaining_percent: u8,
    /// Bit 7: the namespace supports the Format Progress Indicator.
    pub supported: bool,
}

/// DLFEAT bits 2:0: what a read of a deallocated logical block returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeallocatedRead {
    /// 000b: not reported.
    NotReported,
    /// 001b: all bytes 00h.
    Zeroes,
    /// 010b: all bytes FFh.
    Ones,
    /// 011b–111b: reserved.
    Reserved(u8),
}

impl DeallocatedRead {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 7 {
            0 => Self::NotReported,
            1 => Self::Zeroes,
            2 => Self::Ones,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::NotReported => 0,
            Self::Zeroes => 1,
            Self::Ones => 2,
            Self::Reserved(r) => r & 7,
        }
    }
}

/// DLFEAT: Deallocate Logical Block Features (byte 33). NVMe 1.3 and later: byte 33 is
/// reserved in 1.2a, whose Dataset Management only says a deallocated block reads as
/// zeroes, ones or its last data, deterministically.
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Dlfeat {
    /// Bits 2:0: the deallocated logical block read behavior.
    #[bits(3)]
    pub read_behavior: DeallocatedRead,
    /// Bit 3: the Deallocate bit of Write Zeroes (DEAC, also 1.3) is supported.
    pub write_zeroes_deallocate: bool,
    /// Bit 4: the Guard field of a deallocated block's protection information is the CRC
    /// of the data read from it.
    pub guard_crc: bool,
    #[bits(3)]
    __: u8,
}

/// NSATTR: Namespace Attributes (byte 99, NVMe 1.4).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Nsattr {
    /// Bit 0: the namespace is currently write protected.
    pub write_protected: bool,
    #[bits(7)]
    __: u8,
}

/// RP: Relative Performance of an LBA format (bits 25:24 of its descriptor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelativePerformance {
    Best,
    Better,
    Good,
    Degraded,
}

/// "Figure 246: LBA Format Data Structure, NVM Command Set Specific" (4 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct LbaFormat {
    /// MS: Metadata Size in bytes per logical block (bits 15:00).
    pub ms: u16,
    /// LBADS: LBA Data Size, as a power of two (bits 23:16). 0 means the format is not
    /// available.
    pub lbads: u8,
    /// RP: Relative Performance (bits 25:24, i.e. bits 1:0 of this byte; 7:2 reserved).
    pub rp: u8,
}
assert_size!(LbaFormat, 4);

impl LbaFormat {
    /// An LBA format of `2 ^ lbads` data bytes and `ms` metadata bytes, best performance.
    pub const fn new(lbads: u8, ms: u16) -> Self {
        LbaFormat { ms, lbads, rp: 0 }
    }

    /// The logical block data size in bytes: `None` when LBADS is below 9 (the spec
    /// supports nothing smaller than 512 bytes, and 0 marks an unavailable format) or
    /// above 31 (nvtest refuses a logical block of 4 GiB or more as absurd).
    pub fn data_size(&self) -> Option<u64> {
        (9..=31).contains(&self.lbads).then(|| 1u64 << self.lbads)
    }

    pub fn relative_performance(&self) -> RelativePerformance {
        match self.rp & 3 {
            0 => RelativePerformance::Best,
            1 => RelativePerformance::Better,
            2 => RelativePerformance::Good,
            _ => RelativePerformance::Degraded,
        }
    }
}

/// "Figure 245: Identify – Identify Namespace Data Structure, NVM Command Set Specific"
/// (4096 bytes).
#[derive(Clone, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct IdentifyNamespace {
    /// NSZE: Namespace Size, in logical blocks.
    pub nsze: u64,
    /// NCAP: Namespace Capacity, in logical blocks.
    pub ncap: u64,
    /// NUSE: Namespace Utilization, in logical blocks.
    pub nuse: u64,
    /// NSFEAT: Namespace Features.
    pub nsfeat: Nsfeat,
    /// NLBAF: Number of LBA Formats (0's based).
    pub nlbaf: u8,
    /// FLBAS: Formatted LBA Size.
    pub flbas: Flbas,
    /// MC: Metadata Capabilities.
    pub mc: Mc,
    /// DPC: End-to-end Data Protection Capabilities.
    pub dpc: Dpc,
    /// DPS: End-to-end Data Protection Type Settings.
    pub dps: Dps,
    /// NMIC: Namespace Multi-path I/O and Namespace Sharing Capabilities (NVMe 1.1).
    pub nmic: Nmic,
    /// RESCAP: Reservation Capabilities (NVMe 1.1).
    pub rescap: Rescap,
    /// FPI: Format Progress Indicator (NVMe 1.2).
    pub fpi: Fpi,
    /// DLFEAT: Deallocate Logical Block Features (NVMe 1.3; reserved in 1.2a).
    pub dlfeat: Dlfeat,
    /// NAWUN: Namespace Atomic Write Unit Normal (0's based; NVMe 1.2).
    pub nawun: u16,
    /// NAWUPF: Namespace Atomic Write Unit Power Fail (0's based; NVMe 1.2).
    pub nawupf: u16,
    /// NACWU: Namespace Atomic Compare & Write Unit (0's based; NVMe 1.2).
    pub nacwu: u16,
    /// NABSN: Namespace Atomic Boundary Size Normal (0's based; NVMe 1.2).
    pub nabsn: u16,
    /// NABO: Namespace Atomic Boundary Offset (NVMe 1.2).
    pub nabo: u16,
    /// NABSPF: Namespace Atomic Boundary Size Power Fail (0's based; NVMe 1.2).
    pub nabspf: u16,
    /// NOIOB: Namespace Optimal I/O Boundary, in logical blocks (NVMe 1.3).
    pub noiob: u16,
    /// NVMCAP: NVM Capacity in bytes (NVMe 1.2).
    pub nvmcap: U128,
    /// NPWG: Namespace Preferred Write Granularity (0's based; NVMe 1.4).
    pub npwg: u16,
    /// NPWA: Namespace Preferred Write Alignment (0's based; NVMe 1.4).
    pub npwa: u16,
    /// NPDG: Namespace Preferred Deallocate Granularity (0's based; NVMe 1.4).
    pub npdg: u16,
    /// NPDA: Namespace Preferred Deallocate Alignment (0's based; NVMe 1.4).
    pub npda: u16,
    /// NOWS: Namespace Optimal Write Size (0's based; NVMe 1.4).
    pub nows: u16,
    pub rsvd74: [u8; 18],
    /// ANAGRPID: ANA Group Identifier (NVMe 1.4).
    pub anagrpid: u32,
    pub rsvd96: [u8; 3],
    /// NSATTR: Namespace Attributes (NVMe 1.4).
    pub nsattr: Nsattr,
    /// NVMSETID: NVM Set Identifier (NVMe 1.4).
    pub nvmsetid: u16,
    /// ENDGID: Endurance Group Identifier (NVMe 1.4).
    pub endgid: u16,
    /// NGUID: Namespace Globally Unique Identifier (NVMe 1.2).
    pub nguid: [u8; 16],
    /// EUI64: IEEE Extended Unique Identifier (NVMe 1.1).
    pub eui64: [u8; 8],
    /// LBAF0–LBAF15: LBA Format Support.
    pub lbaf: [LbaFormat; 16],
    pub rsvd192: [u8; 192],
    /// VS: Vendor Specific.
    pub vs: [u8; 3712],
}
assert_size!(IdentifyNamespace, 4096);

impl Default for IdentifyNamespace {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// Which writes a namespace performs atomically in normal operation (NVMe 1.4 §6.4.1):
/// one of at most `blocks` logical blocks that crosses no atomic boundary is atomic "with
/// respect to other read or write commands". From
/// [`IdentifyNamespace::atomic_write_normal`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicWrite {
    /// AWUN or NAWUN + 1.
    pub blocks: u64,
    /// The atomic boundary size in blocks (NABSN + 1) and its offset (NABO), if any.
    pub boundary: Option<(u64, u64)>,
}

impl AtomicWrite {
    /// The least any controller guarantees: one logical block (AWUN 0h), no boundaries.
    pub const ONE_BLOCK: AtomicWrite = AtomicWrite { blocks: 1, boundary: None };

    /// Whether a write of `nlb` blocks (1-based) from `slba` is atomic.
    pub fn covers(&self, slba: u64, nlb: u64) -> bool {
        if nlb == 0 || nlb > self.blocks {
            return false;
        }
        match self.boundary {
            None => true,
            Some((size, offset)) => {
                let unit = |lba: u64| (lba as i128 - offset as i128).div_euclid(size as i128);
                unit(slba) == unit(slba + nlb - 1)
            }
        }
    }
}

impl IdentifyNamespace {
    /// The host-specified data of a Namespace Management create (NVMe 1.4 §5.20, the
    /// "Namespace Management – Host Software Specified Fields" figure: NSZE, NCAP,
    /// FLBAS, DPS, NMIC; and, in 1.4, ANAGRPID and NVMSETID, left 0 here for the
    /// controller to choose). Every other byte is zero.
    pub fn for_create(nsze: u64, ncap: u64, flbas: Flbas, dps: Dps, nmic: Nmic) -> Self {
        let mut id = Self::new_zeroed();
        id.nsze = nsze;
        id.ncap = ncap;
        id.flbas = flbas;
        id.dps = dps;
        id.nmic = nmic;
        id
    }

    /// FLBAS bits 3:0: the index of the LBA format in use.
    pub fn flbas_index(&self) -> u8 {
        self.flbas.format()
    }

    /// FLBAS bit 4: metadata travels with the data as an extended LBA.
    pub fn extended_metadata(&self) -> bool {
        self.flbas.extended()
    }

    /// The LBA format in use; `None` when FLBAS names a format beyond NLBAF.
    pub fn lba_format_in_use(&self) -> Option<LbaFormat> {
        let index = self.flbas_index();
        (index <= self.nlbaf).then(|| self.lbaf[index as usize])
    }

    /// The data size of a logical block in the format in use (see
    /// [`LbaFormat::data_size`]).
    pub fn lba_data_size(&self) -> Option<u64> {
        self.lba_format_in_use()?.data_size()
    }

    /// The writes this namespace performs atomically with respect to other commands
    /// (NVMe 1.4 §6.4.1 "AWUN/NAWUN" and §6.4.3 "Atomic Boundaries"), given the
    /// controller's AWUN: NAWUN where NSFEAT bit 1 defines it and it is not 0 (0 means
    /// "as AWUN"), else AWUN; NABSN + 1 blocks from NABO apart where NSFEAT bit 1 is set
    /// and NABSN is not 0 (0: no atomic boundaries).
    pub fn atomic_write_normal(&self, awun: u16) -> AtomicWrite {
        let own = self.nsfeat.nsabp();
        let unit = if own && self.nawun != 0 { self.nawun } else { awun };
        let boundary = (own && self.nabsn != 0).then_some((self.nabsn as u64 + 1, self.nabo as u64));
        AtomicWrite { blocks: unit as u64 + 1, boundary }
    }

    /// The LBA formats the namespace supports (LBAF0 to LBAF`NLBAF`).
    pub fn lba_formats(&self) -> &[LbaFormat] {
        &self.lbaf[..=(self.nlbaf as usize).min(15)]
    }

    /// NVMCAP in bytes.
    pub fn nvmcap(&self) -> u128 {
        self.nvmcap.get()
    }
}

// ---------------------------------------------------------------------------------------
// Namespace and controller lists
// ---------------------------------------------------------------------------------------

/// Why a list could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ListError {
    #[error("{count} identifiers do not fit a list of at most {max}")]
    TooMany { count: usize, max: usize },
    #[error("NSID 0 cannot be listed: a zero entry ends a namespace list")]
    ZeroNsid,
}

/// A Namespace List ("Identify – Namespace List" for CNS 02h and 10h): up to 1024 NSIDs in
/// increasing order, the list ending at the first zero entry (4096 bytes).
#[derive(Clone, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct NamespaceList {
    pub nsid: [u32; 1024],
}
assert_size!(NamespaceList, 4096);

impl Default for NamespaceList {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

impl NamespaceList {
    pub const MAX: usize = 1024;

    /// The NSIDs, up to the first zero entry.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.nsid.iter().copied().take_while(|id| *id != 0)
    }

    /// A list of `ids` in the order given, zero filled after them.
    pub fn from_ids(ids: &[u32]) -> Result<Self, ListError> {
        if ids.len() > Self::MAX {
            return Err(ListError::TooMany { count: ids.len(), max: Self::MAX });
        }
        if ids.contains(&0) {
            return Err(ListError::ZeroNsid);
        }
        let mut list = Self::new_zeroed();
        list.nsid[..ids.len()].copy_from_slice(ids);
        Ok(list)
    }

    /// The spec lists NSIDs in increasing order; true if this list does.
    pub fn is_increasing(&self) -> bool {
        let ids: Vec<u32> = self.ids().collect();
        ids.windows(2).all(|w| w[0] < w[1])
    }
}

/// "Identify – Controller List Format" (CNS 12h and 13h; also the data of Namespace
/// Attachment): NUMID, the Number of Identifiers, then up to 2047 controller identifiers
/// (4096 bytes). NVMe 1.2 and later.
#[derive(Clone, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ControllerList {
    /// Number of Identifiers.
    pub numid: u16,
    /// Identifier 0 to Identifier 2046 (controller IDs, increasing).
    pub identifier: [u16; 2047],
}
assert_size!(ControllerList, 4096);

impl Default for ControllerList {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

impl ControllerList {
    pub const MAX: usize = 2047;

    /// The first NUMID identifiers (at most 2047, even if NUMID claims more).
    pub fn ids(&self) -> impl Iterator<Item = u16> + '_ {
        self.identifier.iter().copied().take((self.numid as usize).min(Self::MAX))
    }

    pub fn from_ids(ids: &[u16]) -> Result<Self, ListError> {
        if ids.len() > Self::MAX {
            return Err(ListError::TooMany { count: ids.len(), max: Self::MAX });
        }
        let mut list = Self::new_zeroed();
        list.numid = ids.len() as u16;
        list.identifier[..ids.len()].copy_from_slice(ids);
        Ok(list)
    }
}

// ---------------------------------------------------------------------------------------
// Namespace Identification Descriptors (CNS 03h, NVMe 1.3 and later)
// ---------------------------------------------------------------------------------------

/// One Namespace Identification Descriptor ("Identify – Namespace Identification
/// Descriptor" and its "Namespace Identifier Type Values"): NIDT (byte 0), NIDL (byte 1),
/// two reserved bytes, then NIDL bytes of NID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NsDescriptor {
    /// NIDT 1h: IEEE Extended Unique Identifier, NIDL 8.
    Eui64([u8; 8]),
    /// NIDT 2h: Namespace Globally Unique Identifier, NIDL 16.
    Nguid([u8; 16]),
    /// NIDT 3h: Namespace UUID, NIDL 16.
    Uuid([u8; 16]),
    /// NIDT 4h: Command Set Identifier, NIDL 1. Reserved in 1.4; defined by NVMe 2.0,
    /// whose controllers return it, so it is parsed rather than refused.
    Csi(u8),
}

impl NsDescriptor {
    /// NIDT: Namespace Identifier Type.
    pub fn nidt(&self) -> u8 {
        match self {
            Self::Eui64(_) => 1,
            Self::Nguid(_) => 2,
            Self::Uuid(_) => 3,
            Self::Csi(_) => 4,
        }
    }

    /// NID: the identifier's bytes (NIDL of them).
    pub fn nid(&self) -> &[u8] {
        match self {
            Self::Eui64(id) => id,
            Self::Nguid(id) | Self::Uuid(id) => id,
            Self::Csi(csi) => std::slice::from_ref(csi),
        }
    }

    /// The NIDL a descriptor of type `nidt` must have, or `None` for a reserved type.
    pub fn nidl_for(nidt: u8) -> Option<u8> {
        match nidt {
            1 => Some(8),
            2 | 3 => Some(16),
            4 => Some(1),
            _ => None,
        }
    }
}

/// Why a Namespace Identification Descriptor list is malformed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DescriptorError {
    #[error("descriptor at byte {offset}: NIDT {nidt:X}h requires NIDL {expected}, found {nidl}")]
    WrongLength { offset: usize, nidt: u8, nidl: u8, expected: u8 },
    #[error("descriptor at byte {offset} runs past the end of the {len}-byte list")]
    RunsPastEnd { offset: usize, len: usize },
    #[error("descriptor at byte {offset}: NIDT {nidt:X}h is reserved")]
    UnknownType { offset: usize, nidt: u8 },
    #[error(
        "descriptor at byte {offset}: a second descriptor of NIDT {nidt:X}h (the controller shall not return one)"
    )]
    DuplicateType { offset: usize, nidt: u8 },
    #[error("the descriptors need {needed} bytes, more than the 4096-byte list")]
    ListTooLong { needed: usize },
}

/// Size of the Identify data buffer.
pub const IDENTIFY_DATA_SIZE: usize = 4096;

/// Parses a Namespace Identification Descriptor list. The list ends at a descriptor
/// whose NIDL is 0 (or at the end of the buffer); a descriptor of a reserved type, with
/// the wrong NIDL for its type, running past the buffer, or repeating a type is an error.
pub fn parse_descriptor_list(data: &[u8]) -> Result<Vec<NsDescriptor>, DescriptorError> {
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < data.len() {
        if offset + 4 > data.len() {
            // Two header bytes are enough to see NIDL 0 (the end of the list).
            if offset + 1 < data.len() && data[offset + 1] == 0 {
                break;
            }
            return Err(DescriptorError::RunsPastEnd { offset, len: data.len() });
        }
        let (nidt, nidl) = (data[offset], data[offset + 1]);
        if nidl == 0 {
            break;
        }
        let expected = NsDescriptor::nidl_for(nidt).ok_or(DescriptorError::UnknownType { offset, nidt })?;
        if nidl != expected {
            return Err(DescriptorError::WrongLength { offset, nidt, nidl, expected });
        }
        let end = offset + 4 + nidl as usize;
        if end > data.len() {
            return Err(DescriptorError::RunsPastEnd { offset, len: data.len() });
        }
        let nid = &data[offset + 4..end];
        let descriptor = match nidt {
            1 => NsDescriptor::Eui64(nid.try_into().expect("NIDL checked")),
            2 => NsDescriptor::Nguid(nid.try_into().expect("NIDL checked")),
            3 => NsDescriptor::Uuid(nid.try_into().expect("NIDL checked")),
            _ => NsDescriptor::Csi(nid[0]),
        };
        if out.iter().any(|d: &NsDescriptor| d.nidt() == nidt) {
            return Err(DescriptorError::DuplicateType { offset, nidt });
        }
        out.push(descriptor);
        offset = end;
    }
    Ok(out)
}

/// Encodes descriptors as a 4096-byte Namespace Identification Descriptor list, zero
/// filled after the last one (which a host reads as NIDL 0, the end of the list).
pub fn encode_descriptor_list(descriptors: &[NsDescriptor]) -> Result<[u8; IDENTIFY_DATA_SIZE], DescriptorError> {
    let needed: usize = descriptors.iter().map(|d| 4 + d.nid().len()).sum();
    if needed > IDENTIFY_DATA_SIZE {
        return Err(DescriptorError::ListTooLong { needed });
    }
    let mut out = [0u8; IDENTIFY_DATA_SIZE];
    let mut offset = 0;
    for d in descriptors {
        let nid = d.nid();
        out[offset] = d.nidt();
        out[offset + 1] = nid.len() as u8;
        out[offset + 4..offset + 4 + nid.len()].copy_from_slice(nid);
        offset += 4 + nid.len();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn a_write_is_atomic_within_awun_or_nawun_and_inside_an_atomic_boundary() {
        let mut ns = IdentifyNamespace::new_zeroed();
        // NSFEAT bit 1 clear: AWUN alone (0's based), no boundaries.
        ns.nawun = 15;
        let unit = ns.atomic_write_normal(3);
        assert_eq!(unit, AtomicWrite { blocks: 4, boundary: None });
        assert!(unit.covers(7, 4) && !unit.covers(7, 5) && !unit.covers(7, 0));
        // NSFEAT bit 1 set: NAWUN (0 would mean "as AWUN"), boundaries every NABSN + 1 from NABO.
        ns.nsfeat.set_nsabp(true);
        ns.nabsn = 7;
        ns.nabo = 2;
        let unit = ns.atomic_write_normal(3);
        assert_eq!(unit, AtomicWrite { blocks: 16, boundary: Some((8, 2)) });
        assert!(unit.covers(2, 8) && unit.covers(0, 2) && !unit.covers(1, 2) && !unit.covers(9, 2));
        ns.nawun = 0;
        assert_eq!(ns.atomic_write_normal(3).blocks, 4);
    }

    #[test]
    fn identify_cdw10_carries_cns_in_7_0_and_cntid_in_31_16() {
        let cmd = identify(Cns::NamespaceAttachedControllers, 5, 0x1234);
        assert_eq!(cmd.opcode, 0x06);
        assert_eq!(cmd.nsid, 5);
        assert_eq!(cmd.cdw10, 0x1234_0012);
        let f = IdentifyCdw10::from_command(&cmd);
        assert_eq!(f, IdentifyCdw10 { cns: 0x12, cntid: 0x1234 });
        assert_eq!(f.known_cns(), Some(Cns::NamespaceAttachedControllers));
        // A reserved CNS can still be sent, and decodes as unknown.
        assert_eq!(IdentifyCdw10::from_command(&identify(0x05u8, 0, 0)).known_cns(), None);
        for cns in Cns::ALL {
            assert_eq!(Cns::from_u8(cns as u8), Some(cns));
        }
        assert_eq!(Cns::NamespaceDescriptorList.introduced_in(), Version::V1_3);
        assert_eq!(Cns::ControllerList.introduced_in(), Version::V1_2);
    }

    #[test]
    fn identify_controller_fields_sit_at_figure_247_bytes() {
        assert_eq!(offset_of!(IdentifyController, sn), 4);
        assert_eq!(offset_of!(IdentifyController, mn), 24);
        assert_eq!(offset_of!(IdentifyController, fr), 64);
        assert_eq!(offset_of!(IdentifyController, rab), 72);
        assert_eq!(offset_of!(IdentifyController, cmic), 76);
        assert_eq!(offset_of!(IdentifyController, mdts), 77);
        assert_eq!(offset_of!(IdentifyController, cntlid), 78);
        assert_eq!(offset_of!(IdentifyController, ver), 80);
        assert_eq!(offset_of!(IdentifyController, oaes), 92);
        assert_eq!(offset_of!(IdentifyController, ctratt), 96);
        assert_eq!(offset_of!(IdentifyController, rrls), 100);
        assert_eq!(offset_of!(IdentifyController, cntrltype), 111);
        assert_eq!(offset_of!(IdentifyController, fguid), 112);
        assert_eq!(offset_of!(IdentifyController, crdt1), 128);
        assert_eq!(offset_of!(IdentifyController, crdt3), 132);
        assert_eq!(offset_of!(IdentifyController, nvmsr), 253);
        assert_eq!(offset_of!(IdentifyController, mec), 255);
        assert_eq!(offset_of!(IdentifyController, oacs), 256);
        assert_eq!(offset_of!(IdentifyController, acl), 258);
        assert_eq!(offset_of!(IdentifyController, frmw), 260);
        assert_eq!(offset_of!(IdentifyController, lpa), 261);
        assert_eq!(offset_of!(IdentifyController, npss), 263);
        assert_eq!(offset_of!(IdentifyController, wctemp), 266);
        assert_eq!(offset_of!(IdentifyController, hmpre), 272);
        assert_eq!(offset_of!(IdentifyController, tnvmcap), 280);
        assert_eq!(offset_of!(IdentifyController, unvmcap), 296);
        assert_eq!(offset_of!(IdentifyController, rpmbs), 312);
        assert_eq!(offset_of!(IdentifyController, kas), 320);
        assert_eq!(offset_of!(IdentifyController, sanicap), 328);
        assert_eq!(offset_of!(IdentifyController, hmminds), 332);
        assert_eq!(offset_of!(IdentifyController, anatt), 342);
        assert_eq!(offset_of!(IdentifyController, anagrpmax), 344);
        assert_eq!(offset_of!(IdentifyController, pels), 352);
        assert_eq!(offset_of!(IdentifyController, sqes), 512);
        assert_eq!(offset_of!(IdentifyController, maxcmd), 514);
        assert_eq!(offset_of!(IdentifyController, nn), 516);
        assert_eq!(offset_of!(IdentifyController, oncs), 520);
        assert_eq!(offset_of!(IdentifyController, fna), 524);
        assert_eq!(offset_of!(IdentifyController, vwc), 525);
        assert_eq!(offset_of!(IdentifyController, awun), 526);
        assert_eq!(offset_of!(IdentifyController, nvscc), 530);
        assert_eq!(offset_of!(IdentifyController, acwu), 532);
        assert_eq!(offset_of!(IdentifyController, sgls), 536);
        assert_eq!(offset_of!(IdentifyController, mnan), 540);
        assert_eq!(offset_of!(IdentifyController, subnqn), 768);
        assert_eq!(offset_of!(IdentifyController, nvmof), 1792);
        assert_eq!(offset_of!(IdentifyController, psd), 2048);
        assert_eq!(offset_of!(IdentifyController, vs), 3072);
    }

    #[test]
    fn power_state_descriptor_fields_sit_at_figure_248_bytes() {
        assert_eq!(offset_of!(PowerStateDescriptor, flags), 3);
        assert_eq!(offset_of!(PowerStateDescriptor, enlat), 4);
        assert_eq!(offset_of!(PowerStateDescriptor, exlat), 8);
        assert_eq!(offset_of!(PowerStateDescriptor, rrt), 12);
        assert_eq!(offset_of!(PowerStateDescriptor, rwl), 15);
        assert_eq!(offset_of!(PowerStateDescriptor, idlp), 16);
        assert_eq!(offset_of!(PowerStateDescriptor, idle), 18);
        assert_eq!(offset_of!(PowerStateDescriptor, actp), 20);
        assert_eq!(offset_of!(PowerStateDescriptor, active), 22);
        let mut b = [0u8; 32];
        b[0..2].copy_from_slice(&2500u16.to_le_bytes());
        b[3] = 0b10; // NOPS, MP in 0.01 W
        b[22] = 0b1000_0010; // APS 10b, APW 2
        let psd = PowerStateDescriptor::read_from_bytes(&b).unwrap();
        assert!(psd.flags.nops() && !psd.flags.mxps());
        assert_eq!(psd.max_power_microwatts(), 25_000_000);
        assert_eq!((psd.active.apw(), psd.active.aps()), (2, 2));
    }

    #[test]
    fn identify_controller_accessors() {
        let mut id = IdentifyController {
            sn: ascii_padded("S3X9NX0K123456"),
            mn: ascii_padded("nvtest model"),
            fr: *b"1.0\0\0\0\0\0",
            ver: 0x0001_0400,
            tnvmcap: U128::new(3_200_000_000_000),
            mdts: 5,
            npss: 2,
            ..Default::default()
        };
        assert_eq!(id.serial().to_string(), "S3X9NX0K123456");
        assert!(id.serial().is_clean());
        assert_eq!(id.model().text, "nvtest model");
        // NUL padding is trimmed from the text but reported: the spec pads with spaces.
        let fr = id.firmware();
        assert_eq!(fr.text, "1.0");
        assert_eq!(fr.non_printable, (3..8).map(|i| (i, 0)).collect::<Vec<_>>());
        id.mn[3] = 0x07;
        assert_eq!(id.model().text, "nvt\\x07st model");
        assert_eq!(id.version(), Version::V1_4);
        assert_eq!(id.tnvmcap(), 3_200_000_000_000);
        assert_eq!(id.mdts_bytes(4096), Some(128 * 1024));
        id.mdts = 0;
        assert_eq!(id.mdts_bytes(4096), None);
        id.mdts = 70;
        assert_eq!(id.mdts_bytes(4096), Some(u64::MAX));
        assert_eq!(id.power_states().len(), 3);
    }

    #[test]
    fn controller_bit_views_follow_the_spec_bits() {
        let mut b = vec![0u8; 4096];
        b[76] = 0b1011; // CMIC
        b[92..96].copy_from_slice(&(1u32 << 8 | 1 << 11).to_le_bytes()); // OAES
        b[256..258].copy_from_slice(&(1u16 << 3 | 1 << 9).to_le_bytes()); // OACS
        b[260] = 1 << 4 | 3 << 1; // FRMW: activation without reset, 3 slots
        b[261] = 0b0100; // LPA: extended data
        b[328..332].copy_from_slice(&(1u32 | 1 << 29 | 2 << 30).to_le_bytes()); // SANICAP
        b[520..522].copy_from_slice(&(1u16 << 2 | 1 << 3 | 1 << 7).to_le_bytes()); // ONCS
        b[524] = 0b100; // FNA: crypto erase
        b[525] = 0b101; // VWC: present, flush broadcast 10b
        let id = IdentifyController::read_from_bytes(&b).unwrap();
        assert!(id.cmic.multiple_ports() && id.cmic.multiple_controllers() && !id.cmic.sriov());
        assert!(id.cmic.ana_reporting());
        assert!(id.oaes.namespace_attribute_notices() && id.oaes.ana_change_notices());
        assert!(!id.oaes.firmware_activation_notices());
        assert!(id.oacs.namespace_management() && id.oacs.get_lba_status() && !id.oacs.format_nvm());
        assert_eq!(id.frmw.slots(), 3);
        assert!(id.frmw.activation_without_reset() && !id.frmw.slot1_read_only());
        assert!(id.lpa.extended_data() && !id.lpa.telemetry());
        assert!(id.sanicap.ces() && id.sanicap.ndi() && !id.sanicap.bes());
        assert_eq!(id.sanicap.nodmmas(), 2);
        assert!(id.oncs.dataset_management() && id.oncs.write_zeroes() && id.oncs.verify());
        assert!(!id.oncs.compare());
        assert!(id.fna.crypto_erase() && !id.fna.format_all_namespaces());
        assert!(id.vwc.present());
        assert_eq!(id.vwc.flush_broadcast(), FlushBroadcast::NotSupported);
        assert_eq!(id.as_bytes(), &b[..]);
    }

    #[test]
    fn identify_namespace_fields_sit_at_figure_245_bytes() {
        assert_eq!(offset_of!(IdentifyNamespace, ncap), 8);
        assert_eq!(offset_of!(IdentifyNamespace, nuse), 16);
        assert_eq!(offset_of!(IdentifyNamespace, nsfeat), 24);
        assert_eq!(offset_of!(IdentifyNamespace, nlbaf), 25);
        assert_eq!(offset_of!(IdentifyNamespace, flbas), 26);
        assert_eq!(offset_of!(IdentifyNamespace, dps), 29);
        assert_eq!(offset_of!(IdentifyNamespace, nmic), 30);
        assert_eq!(offset_of!(IdentifyNamespace, fpi), 32);
        assert_eq!(offset_of!(IdentifyNamespace, dlfeat), 33);
        assert_eq!(offset_of!(IdentifyNamespace, nawun), 34);
        assert_eq!(offset_of!(IdentifyNamespace, noiob), 46);
        assert_eq!(offset_of!(IdentifyNamespace, nvmcap), 48);
        assert_eq!(offset_of!(IdentifyNamespace, npwg), 64);
        assert_eq!(offset_of!(IdentifyNamespace, nows), 72);
        assert_eq!(offset_of!(IdentifyNamespace, anagrpid), 92);
        assert_eq!(offset_of!(IdentifyNamespace, nsattr), 99);
        assert_eq!(offset_of!(IdentifyNamespace, nvmsetid), 100);
        assert_eq!(offset_of!(IdentifyNamespace, endgid), 102);
        assert_eq!(offset_of!(IdentifyNamespace, nguid), 104);
        assert_eq!(offset_of!(IdentifyNamespace, eui64), 120);
        assert_eq!(offset_of!(IdentifyNamespace, lbaf), 128);
        assert_eq!(offset_of!(IdentifyNamespace, vs), 384);
    }

    #[test]
    fn lba_format_follows_figure_246_bits() {
        // MS 8 (bits 15:0), LBADS 12 (bits 23:16), RP 10b (bits 25:24).
        let f = LbaFormat::read_from_bytes(&(8u32 | 12 << 16 | 2 << 24).to_le_bytes()).unwrap();
        assert_eq!(f, LbaFormat { ms: 8, lbads: 12, rp: 2 });
        assert_eq!(f.data_size(), Some(4096));
        assert_eq!(f.relative_performance(), RelativePerformance::Good);
        assert_eq!(LbaFormat::new(0, 0).data_size(), None);
        assert_eq!(LbaFormat::new(8, 0).data_size(), None);
        assert_eq!(LbaFormat::new(9, 0).data_size(), Some(512));
        assert_eq!(LbaFormat::new(40, 0).data_size(), None);
    }

    #[test]
    fn format_in_use_is_flbas_index_bounded_by_nlbaf() {
        let mut id = IdentifyNamespace {
            nlbaf: 1,
            flbas: Flbas::new().with_format(1).with_extended(true),
            ..Default::default()
        };
        id.lbaf[0] = LbaFormat::new(9, 0);
        id.lbaf[1] = LbaFormat::new(12, 8);
        assert_eq!(id.as_bytes()[26], 0x11);
        assert_eq!(id.flbas_index(), 1);
        assert!(id.extended_metadata());
        assert_eq!(id.lba_format_in_use(), Some(LbaFormat::new(12, 8)));
        assert_eq!(id.lba_data_size(), Some(4096));
        assert_eq!(id.lba_formats().len(), 2);
        id.flbas.set_format(2);
        assert_eq!(id.lba_format_in_use(), None);
        assert_eq!(id.lba_data_size(), None);
    }

    #[test]
    fn namespace_bit_views_follow_the_spec_bits() {
        let mut b = vec![0u8; 4096];
        b[24] = 0b10101; // NSFEAT: THINP, DAE, OPTPERF
        b[30] = 1; // NMIC shared
        b[32] = 0x80 | 40; // FPI supported, 40 % remaining
        b[33] = 0b01001; // DLFEAT: zeroes, Write Zeroes DEAC
        b[99] = 1; // NSATTR write protected
        let id = IdentifyNamespace::read_from_bytes(&b).unwrap();
        assert!(id.nsfeat.thinp() && id.nsfeat.dae() && id.nsfeat.optperf());
        assert!(!id.nsfeat.nsabp() && !id.nsfeat.uidreuse());
        assert!(id.nmic.shared());
        assert!(id.fpi.supported());
        assert_eq!(id.fpi.remaining_percent(), 40);
        assert_eq!(id.dlfeat.read_behavior(), DeallocatedRead::Zeroes);
        assert!(id.dlfeat.write_zeroes_deallocate() && !id.dlfeat.guard_crc());
        assert!(id.nsattr.write_protected());
        assert_eq!(Dlfeat::from_bits(0b10010).read_behavior(), DeallocatedRead::Ones);
        assert!(Dlfeat::from_bits(0b10010).guard_crc());
        assert_eq!(Dlfeat::from_bits(5).read_behavior(), DeallocatedRead::Reserved(5));
    }

    #[test]
    fn create_data_holds_only_the_host_specified_fields() {
        let id = IdentifyNamespace::for_create(
            1 << 20,
            1 << 19,
            Flbas::new().with_format(1),
            Dps::new().with_pit(1),
            Nmic::new().with_shared(true),
        );
        let b = id.as_bytes();
        assert_eq!(u64::from_le_bytes(b[0..8].try_into().unwrap()), 1 << 20);
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 1 << 19);
        assert_eq!((b[26], b[29], b[30]), (1, 1, 1));
        let set: usize = b.iter().filter(|x| **x != 0).count();
        assert_eq!(set, 5);
    }

    #[test]
    fn namespace_list_ends_at_the_first_zero() {
        let list = NamespaceList::from_ids(&[1, 2, 7]).unwrap();
        assert_eq!(list.ids().collect::<Vec<_>>(), [1, 2, 7]);
        assert!(list.is_increasing());
        assert_eq!(&list.as_bytes()[8..12], &7u32.to_le_bytes());
        let mut gap = list.clone();
        gap.nsid[1] = 0;
        assert_eq!(gap.ids().collect::<Vec<_>>(), [1]);
        assert!(!NamespaceList::from_ids(&[3, 2]).unwrap().is_increasing());
        assert_eq!(NamespaceList::from_ids(&[1, 0]), Err(ListError::ZeroNsid));
        let many: Vec<u32> = (1..=1025).collect();
        assert_eq!(NamespaceList::from_ids(&many), Err(ListError::TooMany { count: 1025, max: 1024 }));
        assert_eq!(NamespaceList::from_ids(&many[..1024]).unwrap().ids().count(), 1024);
    }

    #[test]
    fn controller_list_counts_its_identifiers() {
        let list = ControllerList::from_ids(&[0, 1, 0x41]).unwrap();
        assert_eq!(&list.as_bytes()[..8], &[3, 0, 0, 0, 1, 0, 0x41, 0]);
        assert_eq!(list.ids().collect::<Vec<_>>(), [0, 1, 0x41]);
        let many: Vec<u16> = (0..2048).collect();
        assert_eq!(ControllerList::from_ids(&many), Err(ListError::TooMany { count: 2048, max: 2047 }));
        assert_eq!(ControllerList::from_ids(&many[..2047]).unwrap().ids().count(), 2047);
        // A NUMID beyond 2047 is read as 2047 entries, never past the structure.
        let bad = ControllerList { numid: 0xFFFF, ..Default::default() };
        assert_eq!(bad.ids().count(), 2047);
    }

    #[test]
    fn descriptor_list_round_trips_and_ends_at_nidl_zero() {
        let ds = [NsDescriptor::Eui64([1; 8]), NsDescriptor::Nguid([2; 16]), NsDescriptor::Uuid([3; 16])];
        let data = encode_descriptor_list(&ds).unwrap();
        assert_eq!(&data[..4], &[1, 8, 0, 0]);
        assert_eq!(&data[12..16], &[2, 16, 0, 0]);
        assert_eq!(&data[32..36], &[3, 16, 0, 0]);
        assert!(data[52..].iter().all(|b| *b == 0));
        assert_eq!(parse_descriptor_list(&data).unwrap(), ds);
        assert_eq!(parse_descriptor_list(&[0u8; 4096]).unwrap(), []);
        let csi = encode_descriptor_list(&[NsDescriptor::Csi(0)]).unwrap();
        assert_eq!(parse_descriptor_list(&csi).unwrap(), [NsDescriptor::Csi(0)]);
    }

    #[test]
    fn malformed_descriptor_lists_are_errors() {
        let mut data = [0u8; 4096];
        data[..2].copy_from_slice(&[2, 8]); // NGUID with NIDL 8
        assert_eq!(
            parse_descriptor_list(&data),
            Err(DescriptorError::WrongLength { offset: 0, nidt: 2, nidl: 8, expected: 16 })
        );
        data[..2].copy_from_slice(&[9, 16]);
        assert_eq!(parse_descriptor_list(&data), Err(DescriptorError::UnknownType { offset: 0, nidt: 9 }));
        data[..2].copy_from_slice(&[1, 8]);
        data[12..14].copy_from_slice(&[1, 8]);
        assert_eq!(parse_descriptor_list(&data), Err(DescriptorError::DuplicateType { offset: 12, nidt: 1 }));
        // A descriptor whose NID would end past the buffer, and a header cut short.
        assert_eq!(parse_descriptor_list(&data[12..20]), Err(DescriptorError::RunsPastEnd { offset: 0, len: 8 }));
        assert_eq!(parse_descriptor_list(&[1, 8, 0]), Err(DescriptorError::RunsPastEnd { offset: 0, len: 3 }));
        // Bytes after a descriptor with NIDL 0 are never read.
        let mut ended = [0u8; 4096];
        ended[20..22].copy_from_slice(&[9, 16]);
        assert_eq!(parse_descriptor_list(&ended).unwrap(), []);
        let too_many = [NsDescriptor::Uuid([0; 16]); 205];
        assert_eq!(encode_descriptor_list(&too_many), Err(DescriptorError::ListTooLong { needed: 205 * 20 }));
    }
}
