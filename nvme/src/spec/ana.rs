//! Asymmetric Namespace Access (NVMe 1.4 §8.20 "Asymmetric Namespace Access Reporting").
//!
//! This module owns the ANA states (§8.20.3 "ANA States"), the Asymmetric Namespace
//! Access log page (Get Log Page 0Ch, §5.14.1.12: "Asymmetric Namespace Access Log
//! Page" with its "ANA Group Descriptor format"), its Return Groups Only log specific
//! field, Identify Controller ANACAP ("Figure 247", byte 343), the Asynchronous Event
//! Notice it raises (ANA Change, type 010b, information 03h, log page 0Ch) and which
//! commands each state lets a controller process (§8.20.3, the figure of commands
//! processed per ANA state).
//!
//! The log page is variable in length: a header, then for each group a 32-byte
//! descriptor followed by its NNSID namespace identifiers (none with RGO set).
//! [`AnaLog::parse`] never panics: a page cut short is an [`AnaLogError`].

use crate::assert_size;
use crate::spec::command::{AdminOpcode, Command};
use crate::spec::log::{GetLogPageFields, LogLengthError, LogPageId};
use crate::spec::status::Status;
use bitfield_struct::bitfield;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// Asynchronous Event Information 03h for notices: Asymmetric Namespace Access Change
/// (§5.2.1, "Asynchronous Event Information – Notice"), with log page 0Ch.
pub const ANA_CHANGE_NOTICE: u8 = 0x03;

/// LSP bit 0 of Get Log Page 0Ch: RGO, Return Groups Only. Set, the controller returns
/// the ANA Group Descriptors with NNSID 0h and no NSID list.
pub const LSP_RETURN_GROUPS_ONLY: u8 = 0x01;

/// ANA State ("ANA Group Descriptor format", bits 3:0 of byte 16; §8.20.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum AnaState {
    /// 01h: ANA Optimized state (§8.20.3.1).
    Optimized = 0x01,
    /// 02h: ANA Non-Optimized state (§8.20.3.2).
    NonOptimized = 0x02,
    /// 03h: ANA Inaccessible state (§8.20.3.3).
    Inaccessible = 0x03,
    /// 04h: ANA Persistent Loss state (§8.20.3.4).
    PersistentLoss = 0x04,
    /// 0Fh: ANA Change state (§8.20.3.5).
    Change = 0x0F,
}

impl AnaState {
    pub const ALL: [AnaState; 5] =
        [Self::Optimized, Self::NonOptimized, Self::Inaccessible, Self::PersistentLoss, Self::Change];

    /// The state for a descriptor's ANA State value; `None` for reserved values.
    pub fn from_u8(value: u8) -> Option<AnaState> {
        Self::ALL.into_iter().find(|s| *s as u8 == value)
    }

    /// The state's name as §8.20.3 writes it.
    pub fn name(self) -> &'static str {
        match self {
            AnaState::Optimized => "ANA Optimized",
            AnaState::NonOptimized => "ANA Non-Optimized",
            AnaState::Inaccessible => "ANA Inaccessible",
            AnaState::PersistentLoss => "ANA Persistent Loss",
            AnaState::Change => "ANA Change",
        }
    }

    /// The ANACAP bit saying the controller reports this state (bits 4:0).
    pub fn anacap_bit(self) -> u8 {
        match self {
            AnaState::Optimized => 1 << 0,
            AnaState::NonOptimized => 1 << 1,
            AnaState::Inaccessible => 1 << 2,
            AnaState::PersistentLoss => 1 << 3,
            AnaState::Change => 1 << 4,
        }
    }

    /// Whether a controller processes I/O commands to a namespace of a group in this
    /// state: Optimized and Non-Optimized do (§8.20.3.1, §8.20.3.2); the others abort
    /// them with [`Self::refusal`].
    pub fn serves_io(self) -> bool {
        matches!(self, AnaState::Optimized | AnaState::NonOptimized)
    }

    /// The path related status an I/O command to a namespace of a group in this state
    /// completes with when the controller does not process it: Asymmetric Access
    /// Inaccessible, Asymmetric Access Persistent Loss, Asymmetric Access Transition.
    /// `None` for the states that serve I/O.
    pub fn refusal(self) -> Option<Status> {
        match self {
            AnaState::Optimized | AnaState::NonOptimized => None,
            AnaState::Inaccessible => Some(Status::ASYMMETRIC_ACCESS_INACCESSIBLE),
            AnaState::PersistentLoss => Some(Status::ASYMMETRIC_ACCESS_PERSISTENT_LOSS),
            AnaState::Change => Some(Status::ASYMMETRIC_ACCESS_TRANSITION),
        }
    }
}

/// Whether a controller processes admin command `opcode` for a namespace whose group is
/// in a state that does not serve I/O (§8.20.3's figure of commands processed per ANA
/// state): the commands that read or set up the controller and the namespace's
/// description (Identify, Get Log Page, Get / Set Features, Asynchronous Event Request,
/// Abort, Keep Alive, Namespace Attachment and Management, queue management) are; the
/// ones that act on the namespace's media (Format NVM, Sanitize) are not.
pub fn admin_processed_in_any_state(opcode: u8) -> bool {
    !matches!(AdminOpcode::from_u8(opcode), Some(AdminOpcode::FormatNvm) | Some(AdminOpcode::Sanitize))
}

/// ANACAP: Asymmetric Namespace Access Capabilities (Identify Controller byte 343).
#[bitfield(u8)]
#[derive(PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Anacap {
    /// Bit 0: reports ANA Optimized state.
    pub optimized: bool,
    /// Bit 1: reports ANA Non-Optimized state.
    pub non_optimized: bool,
    /// Bit 2: reports ANA Inaccessible state.
    pub inaccessible: bool,
    /// Bit 3: reports ANA Persistent Loss state.
    pub persistent_loss: bool,
    /// Bit 4: reports ANA Change state.
    pub change: bool,
    #[bits(1)]
    __: u8,
    /// Bit 6: a namespace's ANAGRPID does not change while it is attached to any
    /// controller.
    pub anagrpid_static: bool,
    /// Bit 7: a non-zero ANAGRPID in Namespace Management (create) is supported.
    pub anagrpid_on_create: bool,
}

impl Anacap {
    /// Whether the controller says it reports `state`.
    pub fn reports(&self, state: AnaState) -> bool {
        self.into_bits() & state.anacap_bit() != 0
    }
}

/// The header of the Asymmetric Namespace Access log page (bytes 15:0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct AnaLogHeader {
    /// Change Count: incremented each time the log page's content changes.
    pub chgcnt: U64,
    /// Number of ANA Group Descriptors that follow.
    pub ngrps: U16,
    pub rsvd10: [u8; 6],
}
assert_size!(AnaLogHeader, 16);

/// "ANA Group Descriptor format": the fixed part, followed by NNSID NSIDs (4 bytes each).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct AnaGroupDescriptorHeader {
    /// ANAGRPID: the ANA Group Identifier.
    pub anagrpid: U32,
    /// NNSID: Number of NSID Values listed after this structure.
    pub nnsid: U32,
    /// Change Count of this group's descriptor.
    pub chgcnt: U64,
    /// ANA State in bits 3:0 (bits 7:4 reserved).
    pub state: u8,
    pub rsvd17: [u8; 15],
}
assert_size!(AnaGroupDescriptorHeader, 32);

/// One ANA group as the log page describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnaGroup {
    pub anagrpid: u32,
    pub chgcnt: u64,
    /// The ANA State field (bits 3:0), raw: a reserved value is the drive's to answer for.
    pub state: u8,
    /// The NSIDs listed (NNSID of them).
    pub nsids: Vec<u32>,
}

impl AnaGroup {
    /// The state, if the value is a defined one.
    pub fn ana_state(&self) -> Option<AnaState> {
        AnaState::from_u8(self.state)
    }
}

/// The Asymmetric Namespace Access log page, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnaLog {
    pub chgcnt: u64,
    pub groups: Vec<AnaGroup>,
}

/// A log page that does not hold what its header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnaLogError {
    #[error("the page is {len} bytes: shorter than its 16-byte header")]
    NoHeader { len: usize },
    #[error(
        "the header announces {ngrps} group descriptors but the page ends ({len} bytes) inside descriptor {index}"
    )]
    Truncated { ngrps: u16, index: u16, len: usize },
}

impl AnaLog {
    /// Decodes a page. `bytes` may be longer than the page (the rest is ignored).
    pub fn parse(bytes: &[u8]) -> Result<AnaLog, AnaLogError> {
        let (header, mut rest) =
            AnaLogHeader::read_from_prefix(bytes).map_err(|_| AnaLogError::NoHeader { len: bytes.len() })?;
        let ngrps = header.ngrps.get();
        let mut groups = Vec::with_capacity(ngrps.min(1024) as usize);
        for index in 0..ngrps {
            let truncated = AnaLogError::Truncated { ngrps, index, len: bytes.len() };
            let (d, after) = AnaGroupDescriptorHeader::read_from_prefix(rest).map_err(|_| truncated)?;
            let n = d.nnsid.get() as usize;
            let list_bytes = n.checked_mul(4).filter(|b| *b <= after.len()).ok_or(truncated)?;
            let nsids = after[..list_bytes].chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            groups.push(AnaGroup {
                anagrpid: d.anagrpid.get(),
                chgcnt: d.chgcnt.get(),
                state: d.state & 0x0F,
                nsids: nsids.collect(),
            });
            rest = &after[list_bytes..];
        }
        Ok(AnaLog { chgcnt: header.chgcnt.get(), groups })
    }

    /// The page's bytes; with `groups_only` (RGO) every descriptor has NNSID 0h and no list.
    pub fn to_bytes(&self, groups_only: bool) -> Vec<u8> {
        let header = AnaLogHeader {
            chgcnt: U64::new(self.chgcnt),
            ngrps: U16::new(self.groups.len().min(u16::MAX as usize) as u16),
            rsvd10: [0; 6],
        };
        let mut out = header.as_bytes().to_vec();
        for g in self.groups.iter().take(u16::MAX as usize) {
            let listed: &[u32] = if groups_only { &[] } else { &g.nsids };
            let mut d = AnaGroupDescriptorHeader::new_zeroed();
            d.anagrpid = U32::new(g.anagrpid);
            d.nnsid = U32::new(listed.len() as u32);
            d.chgcnt = U64::new(g.chgcnt);
            d.state = g.state & 0x0F;
            out.extend_from_slice(d.as_bytes());
            for nsid in listed {
                out.extend_from_slice(&nsid.to_le_bytes());
            }
        }
        out
    }

    /// The length the header and descriptors of a page need, from its first bytes
    /// (`None`: not even the header is there). For sizing the next read.
    pub fn length_hint(bytes: &[u8]) -> Option<usize> {
        let (header, _) = AnaLogHeader::read_from_prefix(bytes).ok()?;
        Some(16 + header.ngrps.get() as usize * 32)
    }

    /// The group whose descriptor lists `nsid`, and how many descriptors list it.
    pub fn groups_listing(&self, nsid: u32) -> Vec<&AnaGroup> {
        self.groups.iter().filter(|g| g.nsids.contains(&nsid)).collect()
    }

    /// The descriptor of group `anagrpid`, if listed.
    pub fn group(&self, anagrpid: u32) -> Option<&AnaGroup> {
        self.groups.iter().find(|g| g.anagrpid == anagrpid)
    }
}

/// Get Log Page 0Ch of `bytes` from byte `offset`, RGO as `groups_only`, RAE as given.
pub fn get_ana_log(bytes: u32, offset: u64, groups_only: bool, rae: bool) -> Result<Command, LogLengthError> {
    if bytes == 0 || !bytes.is_multiple_of(4) {
        return Err(LogLengthError { bytes });
    }
    let fields = GetLogPageFields {
        lid: LogPageId::AsymmetricNamespaceAccess as u8,
        lsp: if groups_only { LSP_RETURN_GROUPS_ONLY } else { 0 },
        rae,
        numd: bytes / 4 - 1,
        lsi: 0,
        offset,
    };
    Ok(fields.to_command(0xFFFF_FFFF))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_refuse_with_path_statuses() {
        for s in AnaState::ALL {
            assert_eq!(AnaState::from_u8(s as u8), Some(s));
            assert_eq!(s.serves_io(), s.refusal().is_none(), "{}", s.name());
        }
        assert_eq!(AnaState::from_u8(0), None);
        assert_eq!(AnaState::from_u8(5), None);
        assert_eq!(AnaState::Inaccessible.refusal(), Some(Status::ASYMMETRIC_ACCESS_INACCESSIBLE));
        assert_eq!(Status::ASYMMETRIC_ACCESS_INACCESSIBLE.to_field(), 0x302);
        assert_eq!(Status::ASYMMETRIC_ACCESS_PERSISTENT_LOSS.name(), Some("Asymmetric Access Persistent Loss"));
        assert_eq!(Status::ASYMMETRIC_ACCESS_TRANSITION.name(), Some("Asymmetric Access Transition"));
        assert!(admin_processed_in_any_state(AdminOpcode::Identify as u8));
        assert!(!admin_processed_in_any_state(AdminOpcode::FormatNvm as u8));
    }

    #[test]
    fn anacap_bits() {
        let cap = Anacap::new().with_optimized(true).with_inaccessible(true).with_anagrpid_on_create(true);
        assert_eq!(cap.into_bits(), 0x85);
        assert!(cap.reports(AnaState::Inaccessible) && !cap.reports(AnaState::Change));
    }

    #[test]
    fn the_page_round_trips_with_and_without_nsids() {
        let log = AnaLog {
            chgcnt: 7,
            groups: vec![
                AnaGroup { anagrpid: 1, chgcnt: 2, state: 1, nsids: vec![1, 3] },
                AnaGroup { anagrpid: 2, chgcnt: 0, state: 3, nsids: vec![2] },
            ],
        };
        let bytes = log.to_bytes(false);
        assert_eq!(bytes.len(), 16 + 32 + 8 + 32 + 4);
        assert_eq!(AnaLog::parse(&bytes).unwrap(), log);
        assert_eq!(AnaLog::length_hint(&bytes), Some(80));
        let rgo = AnaLog::parse(&log.to_bytes(true)).unwrap();
        assert!(rgo.groups.iter().all(|g| g.nsids.is_empty()));
        assert_eq!(rgo.groups[1].ana_state(), Some(AnaState::Inaccessible));
        assert_eq!(log.groups_listing(3).len(), 1);
        assert_eq!(log.group(2).unwrap().nsids, vec![2]);
    }

    #[test]
    fn a_cut_page_is_an_error_not_a_panic() {
        assert_eq!(AnaLog::parse(&[0u8; 8]), Err(AnaLogError::NoHeader { len: 8 }));
        let mut bytes =
            AnaLog { chgcnt: 1, groups: vec![AnaGroup { anagrpid: 1, chgcnt: 0, state: 1, nsids: vec![1] }] }
                .to_bytes(false);
        bytes.truncate(bytes.len() - 2);
        assert!(matches!(AnaLog::parse(&bytes), Err(AnaLogError::Truncated { index: 0, .. })));
        // NNSID far larger than the page.
        let mut huge = AnaLogHeader { chgcnt: U64::new(0), ngrps: U16::new(1), rsvd10: [0; 6] }.as_bytes().to_vec();
        let mut d = AnaGroupDescriptorHeader::new_zeroed();
        d.nnsid = U32::new(u32::MAX);
        huge.extend_from_slice(d.as_bytes());
        assert!(AnaLog::parse(&huge).is_err());
    }

    #[test]
    fn the_command_carries_rgo_in_lsp() {
        let cmd = get_ana_log(4096, 0, true, false).unwrap();
        let f = GetLogPageFields::from_command(&cmd);
        assert_eq!((f.lid, f.lsp, f.rae, f.bytes()), (0x0C, 1, false, 4096));
        assert!(get_ana_log(6, 0, false, false).is_err());
    }
}
