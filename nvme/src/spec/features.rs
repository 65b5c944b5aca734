//! Get Features and Set Features (admin opcodes 0Ah and 09h, NVMe 1.4 §5.13 and §5.21):
//! the commands, the feature identifiers and the typed value of each feature nvtest sets.
//!
//! This module owns CDW10 of both commands (FID, SEL, SV), the Supported Capabilities
//! answer, and the Command Dword 11 layout of features 01h–0Bh. Each typed value converts
//! to and from its dword with `from_bits` / `into_bits` (or `From<u32>` / `Into<u32>`);
//! the same dword comes back in CQE DW0 of a Get Features for the current, default or
//! saved value.

use crate::spec::command::{AdminOpcode, Command};
use bitfield_struct::bitfield;

/// FID: Feature Identifier ("Set Features – Feature Identifiers"), the features nvtest
/// knows. Any other identifier can still be sent as a raw `u8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FeatureId {
    /// 01h: Arbitration.
    Arbitration = 0x01,
    /// 02h: Power Management.
    PowerManagement = 0x02,
    /// 03h: LBA Range Type (namespace specific; data structure in the buffer).
    LbaRangeType = 0x03,
    /// 04h: Temperature Threshold.
    TemperatureThreshold = 0x04,
    /// 05h: Error Recovery.
    ErrorRecovery = 0x05,
    /// 06h: Volatile Write Cache.
    VolatileWriteCache = 0x06,
    /// 07h: Number of Queues.
    NumberOfQueues = 0x07,
    /// 08h: Interrupt Coalescing.
    InterruptCoalescing = 0x08,
    /// 09h: Interrupt Vector Configuration.
    InterruptVectorConfiguration = 0x09,
    /// 0Ah: Write Atomicity Normal.
    WriteAtomicityNormal = 0x0A,
    /// 0Bh: Asynchronous Event Configuration.
    AsyncEventConfiguration = 0x0B,
    /// 0Ch: Autonomous Power State Transition (NVMe 1.1).
    AutonomousPowerStateTransition = 0x0C,
    /// 0Dh: Host Memory Buffer (NVMe 1.2).
    HostMemoryBuffer = 0x0D,
    /// 0Eh: Timestamp (NVMe 1.3).
    Timestamp = 0x0E,
    /// 0Fh: Keep Alive Timer (NVMe 1.2.1).
    KeepAliveTimer = 0x0F,
    /// 81h: Host Identifier (NVM command set; 64-bit, or 128-bit with EXHID from 1.3).
    HostIdentifier = 0x81,
    /// 82h: Reservation Notification Mask (namespace specific).
    ReservationNotificationMask = 0x82,
    /// 83h: Reservation Persistence (namespace specific).
    ReservationPersistence = 0x83,
}

impl FeatureId {
    pub const ALL: [FeatureId; 18] = [
        Self::Arbitration,
        Self::PowerManagement,
        Self::LbaRangeType,
        Self::TemperatureThreshold,
        Self::ErrorRecovery,
        Self::VolatileWriteCache,
        Self::NumberOfQueues,
        Self::InterruptCoalescing,
        Self::InterruptVectorConfiguration,
        Self::WriteAtomicityNormal,
        Self::AsyncEventConfiguration,
        Self::AutonomousPowerStateTransition,
        Self::HostMemoryBuffer,
        Self::Timestamp,
        Self::KeepAliveTimer,
        Self::HostIdentifier,
        Self::ReservationNotificationMask,
        Self::ReservationPersistence,
    ];

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|f| *f as u8 == value)
    }

    /// Whether the feature's value belongs to a namespace, so that the command's NSID
    /// selects it. LBA Range Type is per namespace in every version. Error Recovery is per
    /// namespace once it carries DULBE (NVMe 1.3: DULBE is enabled for the namespace the
    /// NSID names; QEMU's 1.4 model reports it namespace specific too). For the others,
    /// a controller given a specific NSID may abort with Feature Not Namespace Specific.
    /// Reservation Notification Mask and Reservation Persistence belong to a namespace
    /// (§5.21.1, "Set Features – Feature Identifiers": NSID used).
    pub fn is_namespace_specific(self) -> bool {
        matches!(
            self,
            Self::LbaRangeType | Self::ErrorRecovery | Self::ReservationNotificationMask | Self::ReservationPersistence
        )
    }
}

impl From<FeatureId> for u8 {
    fn from(fid: FeatureId) -> u8 {
        fid as u8
    }
}

/// SEL: Select ("Get Features – Command Dword 10", bits 10:08; NVMe 1.1 and later, when
/// ONCS bit 4 is set): which value of the feature is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    /// 000b: Current.
    Current,
    /// 001b: Default.
    Default,
    /// 010b: Saved.
    Saved,
    /// 011b: Supported Capabilities (a [`FeatureCapabilities`] in CQE DW0).
    SupportedCapabilities,
    /// 100b–111b: reserved.
    Reserved(u8),
}

impl Select {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 7 {
            0 => Self::Current,
            1 => Self::Default,
            2 => Self::Saved,
            3 => Self::SupportedCapabilities,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::Current => 0,
            Self::Default => 1,
            Self::Saved => 2,
            Self::SupportedCapabilities => 3,
            Self::Reserved(r) => r & 7,
        }
    }
}

/// CQE DW0 of a Get Features with Select 011b: "Get Features – Supported Capabilities".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct FeatureCapabilities {
    /// Bit 0: the feature is saveable.
    pub saveable: bool,
    /// Bit 1: the feature is namespace specific.
    pub namespace_specific: bool,
    /// Bit 2: the feature is changeable.
    pub changeable: bool,
    #[bits(29)]
    __: u32,
}

/// A Get Features command. `cdw11` carries the feature-specific input some features take
/// (Interrupt Vector Configuration's IV, for one); a buffer is needed for LBA Range Type,
/// Autonomous Power State Transition, Host Memory Buffer and Timestamp.
pub fn get_features(fid: impl Into<u8>, sel: Select, nsid: u32, cdw11: u32) -> Command {
    let mut cmd = Command::admin(AdminOpcode::GetFeatures);
    cmd.nsid = nsid;
    cmd.cdw10 = fid.into() as u32 | (sel.into_bits() as u32) << 8;
    cmd.cdw11 = cdw11;
    cmd
}

/// A Set Features command; `save` sets SV ("Set Features – Command Dword 10", bit 31) so
/// the value persists across power cycles and resets.
pub fn set_features(fid: impl Into<u8>, save: bool, nsid: u32, cdw11: u32) -> Command {
    let mut cmd = Command::admin(AdminOpcode::SetFeatures);
    cmd.nsid = nsid;
    cmd.cdw10 = fid.into() as u32 | (save as u32) << 31;
    cmd.cdw11 = cdw11;
    cmd
}

/// A Get Features command decoded (the opcode is not checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetFeaturesFields {
    /// FID, raw (CDW10 bits 07:00).
    pub fid: u8,
    /// SEL (CDW10 bits 10:08).
    pub sel: Select,
    pub nsid: u32,
    pub cdw11: u32,
}

impl GetFeaturesFields {
    pub fn from_command(cmd: &Command) -> Self {
        GetFeaturesFields {
            fid: cmd.cdw10 as u8,
            sel: Select::from_bits((cmd.cdw10 >> 8) as u8),
            nsid: cmd.nsid,
            cdw11: cmd.cdw11,
        }
    }

    pub fn feature(&self) -> Option<FeatureId> {
        FeatureId::from_u8(self.fid)
    }
}

/// A Set Features command decoded (the opcode is not checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetFeaturesFields {
    /// FID, raw (CDW10 bits 07:00).
    pub fid: u8,
    /// SV: Save (CDW10 bit 31).
    pub save: bool,
    pub nsid: u32,
    pub cdw11: u32,
}

impl SetFeaturesFields {
    pub fn from_command(cmd: &Command) -> Self {
        SetFeaturesFields { fid: cmd.cdw10 as u8, save: cmd.cdw10 & (1 << 31) != 0, nsid: cmd.nsid, cdw11: cmd.cdw11 }
    }

    pub fn feature(&self) -> Option<FeatureId> {
        FeatureId::from_u8(self.fid)
    }
}

// ---------------------------------------------------------------------------------------
// Feature values (Command Dword 11)
// ---------------------------------------------------------------------------------------

/// 01h "Arbitration – Command Dword 11".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct Arbitration {
    /// AB: Arbitration Burst, `2 ^ AB` commands; 111b is no limit.
    #[bits(3)]
    pub ab: u8,
    #[bits(5)]
    __: u8,
    /// LPW: Low Priority Weight (0's based).
    pub lpw: u8,
    /// MPW: Medium Priority Weight (0's based).
    pub mpw: u8,
    /// HPW: High Priority Weight (0's based).
    pub hpw: u8,
}

impl Arbitration {
    /// The arbitration burst in commands; `None` for no limit (AB 111b).
    pub fn burst(&self) -> Option<u32> {
        (self.ab() != 7).then(|| 1 << self.ab())
    }
}

/// 02h "Power Management – Command Dword 11".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct PowerManagement {
    /// PS: Power State (index into the power state descriptors).
    #[bits(5)]
    pub ps: u8,
    /// WH: Workload Hint (NVMe 1.2).
    #[bits(3)]
    pub wh: u8,
    #[bits(24)]
    __: u32,
}

/// THSEL: Threshold Type Select (Temperature Threshold bits 21:20).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThresholdType {
    /// 00b: Over Temperature Threshold.
    Over,
    /// 01b: Under Temperature Threshold.
    Under,
    /// 10b–11b: reserved.
    Reserved(u8),
}

impl ThresholdType {
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 3 {
            0 => Self::Over,
            1 => Self::Under,
            r => Self::Reserved(r),
        }
    }

    pub const fn into_bits(self) -> u8 {
        match self {
            Self::Over => 0,
            Self::Under => 1,
            Self::Reserved(r) => r & 3,
        }
    }
}

/// 04h "Temperature Threshold – Command Dword 11".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct TemperatureThreshold {
    /// TMPTH: Temperature Threshold, in kelvins.
    pub tmpth: u16,
    /// TMPSEL: Threshold Temperature Select: 0h Composite Temperature, 1h–8h Temperature
    /// Sensor 1–8, 1111b all sensors (Set Features only; NVMe 1.2 and later).
    #[bits(4)]
    pub tmpsel: u8,
    /// THSEL: Threshold Type Select (NVMe 1.2).
    #[bits(2)]
    pub thsel: ThresholdType,
    #[bits(10)]
    __: u16,
}

/// 05h "Error Recovery – Command Dword 11".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct ErrorRecovery {
    /// TLER: Time Limited Error Recovery, in 100 ms units (0: no time limit).
    pub tler: u16,
    /// DULBE: Deallocated or Unwritten Logical Block Error Enable (NVMe 1.3; only when
    /// the namespace's NSFEAT.DAE is set).
    pub dulbe: bool,
    #[bits(15)]
    __: u16,
}

/// 06h "Volatile Write Cache – Command Dword 11".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct VolatileWriteCache {
    /// WCE: Volatile Write Cache Enable.
    pub wce: bool,
    #[bits(31)]
    __: u32,
}

/// 07h "Number of Queues – Command Dword 11": NSQR (15:00) and NCQR (31:16), the I/O
/// submission and completion queues requested, both 0's based (FFFFh is invalid). CQE DW0
/// of the Set Features has the same layout for NSQA and NCQA, the numbers allocated.
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct NumberOfQueues {
    /// NSQR / NSQA: Number of I/O Submission Queues Requested / Allocated (0's based).
    pub nsqr: u16,
    /// NCQR / NCQA: Number of I/O Completion Queues Requested / Allocated (0's based).
    pub ncqr: u16,
}

impl NumberOfQueues {
    /// A request for `sqs` submission and `cqs` completion queues (each 1 to 65535).
    /// Counts are clamped to that range: the 0's based field cannot express 0, and FFFFh
    /// (65536 queues) is invalid.
    pub fn request(sqs: u32, cqs: u32) -> Self {
        let zero_based = |n: u32| (n.clamp(1, 0xFFFF) - 1) as u16;
        NumberOfQueues::new().with_nsqr(zero_based(sqs)).with_ncqr(zero_based(cqs))
    }

    /// The number of submission queues (NSQR / NSQA + 1).
    pub fn submission_queues(&self) -> u32 {
        self.nsqr() as u32 + 1
    }

    /// The number of completion queues (NCQR / NCQA + 1).
    pub fn completion_queues(&self) -> u32 {
        self.ncqr() as u32 + 1
    }
}

/// 08h "Interrupt Coalescing – Command Dword 11".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct InterruptCoalescing {
    /// THR: Aggregation Threshold, completion entries per interrupt (0's based).
    pub thr: u8,
    /// TIME: Aggregation Time, in 100 µs units (0: none).
    pub time: u8,
    #[bits(16)]
    __: u16,
}

/// 09h "Interrupt Vector Configuration – Command Dword 11".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct InterruptVectorConfiguration {
    /// IV: Interrupt Vector the configuration applies to.
    pub iv: u16,
    /// CD: Coalescing Disable.
    pub cd: bool,
    #[bits(15)]
    __: u16,
}

/// 0Ah "Write Atomicity Normal – Command Dword 11".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct WriteAtomicityNormal {
    /// DN: Disable Normal (the host only relies on AWUPF / NAWUPF).
    pub dn: bool,
    #[bits(31)]
    __: u32,
}

/// 0Bh "Asynchronous Event Configuration – Command Dword 11", bits as NVMe 1.4 defines
/// them (bits 31:15 are not modelled).
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct AsyncEventConfiguration {
    /// Bits 7:0: SMART / Health Critical Warnings, one enable per Critical Warning bit.
    pub smart_critical_warnings: u8,
    /// Bit 8: Namespace Attribute Notices (NVMe 1.2).
    pub namespace_attribute_notices: bool,
    /// Bit 9: Firmware Activation Notices.
    pub firmware_activation_notices: bool,
    /// Bit 10: Telemetry Log Notices (NVMe 1.3).
    pub telemetry_log_notices: bool,
    /// Bit 11: Asymmetric Namespace Access Change Notices (NVMe 1.4).
    pub ana_change_notices: bool,
    /// Bit 12: Predictable Latency Event Aggregate Log Change Notices (NVMe 1.4).
    pub predictable_latency_event_notices: bool,
    /// Bit 13: LBA Status Information Notices (NVMe 1.4).
    pub lba_status_information_notices: bool,
    /// Bit 14: Endurance Group Event Aggregate Log Change Notices (NVMe 1.4).
    pub endurance_group_event_notices: bool,
    #[bits(17)]
    __: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_features_puts_fid_in_7_0_and_select_in_10_8() {
        let cmd = get_features(FeatureId::VolatileWriteCache, Select::SupportedCapabilities, 0, 0);
        assert_eq!(cmd.opcode, 0x0A);
        assert_eq!(cmd.cdw10, 0x306);
        let f = GetFeaturesFields::from_command(&cmd);
        assert_eq!(f.sel, Select::SupportedCapabilities);
        assert_eq!(f.feature(), Some(FeatureId::VolatileWriteCache));
        let cmd = get_features(FeatureId::InterruptVectorConfiguration, Select::Saved, 0, 3);
        assert_eq!((cmd.cdw10, cmd.cdw11), (0x209, 3));
        assert_eq!(
            GetFeaturesFields::from_command(&get_features(0x81u8, Select::Reserved(6), 0, 0)).sel,
            Select::Reserved(6)
        );
    }

    #[test]
    fn set_features_puts_save_in_bit_31() {
        let cmd = set_features(FeatureId::ErrorRecovery, true, 1, ErrorRecovery::new().with_dulbe(true).into());
        assert_eq!(cmd.opcode, 0x09);
        assert_eq!(cmd.cdw10, 0x8000_0005);
        assert_eq!(cmd.cdw11, 1 << 16);
        assert_eq!(cmd.nsid, 1);
        let f = SetFeaturesFields::from_command(&cmd);
        assert_eq!(f, SetFeaturesFields { fid: 5, save: true, nsid: 1, cdw11: 1 << 16 });
        assert!(!SetFeaturesFields::from_command(&set_features(6u8, false, 0, 1)).save);
        for fid in FeatureId::ALL {
            assert_eq!(FeatureId::from_u8(fid as u8), Some(fid));
        }
        assert!(FeatureId::LbaRangeType.is_namespace_specific());
        assert!(!FeatureId::NumberOfQueues.is_namespace_specific());
    }

    #[test]
    fn supported_capabilities_bits() {
        let c = FeatureCapabilities::from_bits(0b101);
        assert!(c.saveable() && !c.namespace_specific() && c.changeable());
    }

    #[test]
    fn feature_values_sit_at_their_bits() {
        let arb = Arbitration::from_bits(0x0403_0207);
        assert_eq!((arb.ab(), arb.lpw(), arb.mpw(), arb.hpw()), (7, 2, 3, 4));
        assert_eq!(arb.burst(), None);
        assert_eq!(Arbitration::new().with_ab(3).burst(), Some(8));
        let pm = PowerManagement::new().with_ps(4).with_wh(2);
        assert_eq!(pm.into_bits(), 0x44);
        let tt = TemperatureThreshold::new().with_tmpth(350).with_tmpsel(2).with_thsel(ThresholdType::Under);
        assert_eq!(tt.into_bits(), 350 | 2 << 16 | 1 << 20);
        assert_eq!(TemperatureThreshold::from_bits(3 << 20).thsel(), ThresholdType::Reserved(3));
        assert_eq!(ErrorRecovery::new().with_tler(10).with_dulbe(true).into_bits(), 0x1_000A);
        assert!(VolatileWriteCache::from_bits(1).wce());
        let ic = InterruptCoalescing::new().with_thr(7).with_time(20);
        assert_eq!(ic.into_bits(), 0x1407);
        assert_eq!(InterruptVectorConfiguration::new().with_iv(3).with_cd(true).into_bits(), 0x1_0003);
        assert!(WriteAtomicityNormal::from_bits(1).dn());
        let aec = AsyncEventConfiguration::new()
            .with_smart_critical_warnings(0x1F)
            .with_namespace_attribute_notices(true)
            .with_endurance_group_event_notices(true);
        assert_eq!(aec.into_bits(), 0x1F | 1 << 8 | 1 << 14);
    }

    #[test]
    fn number_of_queues_is_zeros_based() {
        let q = NumberOfQueues::request(4, 2);
        assert_eq!(q.into_bits(), 0x0001_0003);
        assert_eq!((q.submission_queues(), q.completion_queues()), (4, 2));
        // CQE DW0 of the Set Features: NSQA in 15:00, NCQA in 31:16.
        let allocated = NumberOfQueues::from_bits(0x003F_003F);
        assert_eq!((allocated.submission_queues(), allocated.completion_queues()), (64, 64));
        assert_eq!(NumberOfQueues::request(0, 70_000).into_bits(), 0xFFFE_0000);
    }
}
