//! Get Features and Set Features (admin opcodes 0Ah and 09h, NVMe 1.4 §5.13, §5.21) for
//! features 01h–0Bh, and the current value of each.
//!
//! Select (SEL) is honoured from NVMe 1.1 on (ONCS bit 4 is set): current, default,
//! saved (no feature is saveable, so the saved value is the default) and supported
//! capabilities. Save (SV) is refused with Feature Identifier Not Saveable.
//! LBA Range Type (03h) is optional and not implemented: Invalid Field in Command, like
//! any feature identifier the controller does not support. Host Identifier (81h),
//! Reservation Notification Mask (82h) and Reservation Persistence (83h) exist when the
//! profile has reservations; their current values are [`super::reservation`]'s.

use super::identify::WCTEMP;
use super::Quirk;
use super::{Subsystem, NSID_ALL};
use crate::exec::{ControllerContext, DataPointer, Done};
use crate::profile::Profile;
use nvme::spec::features::{
    Arbitration, AsyncEventConfiguration, ErrorRecovery, FeatureCapabilities, FeatureId, GetFeaturesFields,
    InterruptCoalescing, InterruptVectorConfiguration, NumberOfQueues, PowerManagement, Select, SetFeaturesFields,
    TemperatureThreshold, ThresholdType, VolatileWriteCache, WriteAtomicityNormal,
};
use nvme::spec::reservation::ReservationNotificationMask;
use nvme::spec::{Command, Status, Version};
use std::collections::BTreeMap;

/// The current value of each implemented feature, as its Command Dword 11.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Features {
    pub arbitration: Arbitration,
    pub power_management: PowerManagement,
    /// Over Temperature Threshold of the composite temperature (kelvins).
    pub over_temperature: u16,
    /// Under Temperature Threshold of the composite temperature (kelvins).
    pub under_temperature: u16,
    pub error_recovery: ErrorRecovery,
    /// `None` when no volatile write cache is present (the feature is then not supported).
    pub volatile_write_cache: Option<VolatileWriteCache>,
    /// The most I/O queues the controller allocates.
    pub max_io_queues: u16,
    pub interrupt_coalescing: InterruptCoalescing,
    /// Coalescing Disable per interrupt vector (absent: the default, cleared).
    pub coalescing_disabled: BTreeMap<u16, bool>,
    pub write_atomicity_normal: WriteAtomicityNormal,
    pub async_event_configuration: AsyncEventConfiguration,
    /// Bits of Asynchronous Event Configuration the controller implements.
    aec_supported: u32,
    /// Features 81h–83h exist: the profile has reservations ([`super::reservation`]).
    reservations: bool,
    /// Host Identifier (81h): a 64-bit identifier in bytes 7:0, or 128 bits with EXHID;
    /// all zeros when not specified.
    pub host_identifier: [u8; 16],
    /// EXHID of the identifier set (a non-zero 128-bit identifier is in use).
    pub host_identifier_extended: bool,
    /// Reservation Notification Mask (82h) per NSID (absent: nothing masked).
    pub notification_masks: BTreeMap<u32, ReservationNotificationMask>,
}

impl Features {
    /// Default values for a controller of `profile`.
    pub fn new(profile: &Profile) -> Features {
        // SMART / Health critical warnings 0–4 (NVMe 1.0), and Namespace Attribute
        // Notices when OAES bit 8 says so.
        let mut aec_supported = 0x1F;
        if profile.controller.namespace_attribute_notices {
            aec_supported |= 1 << 8;
        }
        // Firmware Activation Notices where an activation without reset can start one.
        if profile.firmware.as_ref().is_some_and(|f| f.activation_without_reset) {
            aec_supported |= 1 << 9;
        }
        // ANA Change Notices where the drive reports ANA (OAES bit 11).
        if profile.ana.is_some() {
            aec_supported |= 1 << 11;
        }
        Features {
            arbitration: Arbitration::new(),
            power_management: PowerManagement::new(),
            over_temperature: WCTEMP,
            under_temperature: 0,
            error_recovery: ErrorRecovery::new(),
            volatile_write_cache: profile
                .controller
                .volatile_write_cache
                .then(|| VolatileWriteCache::new().with_wce(true)),
            max_io_queues: profile.controller.max_io_queues,
            interrupt_coalescing: InterruptCoalescing::new(),
            coalescing_disabled: BTreeMap::new(),
            write_atomicity_normal: WriteAtomicityNormal::new(),
            async_event_configuration: AsyncEventConfiguration::new(),
            aec_supported,
            reservations: profile.reservations.is_some(),
            host_identifier: [0; 16],
            host_identifier_extended: false,
            notification_masks: BTreeMap::new(),
        }
    }

    /// The Reservation Notification Mask of namespace `nsid`.
    pub fn notification_mask(&self, nsid: u32) -> ReservationNotificationMask {
        self.notification_masks.get(&nsid).copied().unwrap_or(ReservationNotificationMask::new())
    }

    /// Asynchronous Event Configuration bit 8: Namespace Attribute Notices enabled.
    pub fn namespace_notices_enabled(&self) -> bool {
        self.async_event_configuration.namespace_attribute_notices()
    }

    /// AEC bit 9: Firmware Activation Notices are enabled.
    pub fn firmware_notices_enabled(&self) -> bool {
        self.async_event_configuration.firmware_activation_notices()
    }

    /// Whether `fid` is a feature this controller implements.
    fn implemented(&self, fid: FeatureId) -> bool {
        match fid {
            FeatureId::Arbitration
            | FeatureId::PowerManagement
            | FeatureId::TemperatureThreshold
            | FeatureId::ErrorRecovery
            | FeatureId::NumberOfQueues
            | FeatureId::InterruptCoalescing
            | FeatureId::InterruptVectorConfiguration
            | FeatureId::WriteAtomicityNormal
            | FeatureId::AsyncEventConfiguration => true,
            FeatureId::VolatileWriteCache => self.volatile_write_cache.is_some(),
            FeatureId::HostIdentifier | FeatureId::ReservationNotificationMask | FeatureId::ReservationPersistence => {
                self.reservations
            }
            _ => false,
        }
    }

    /// The value Get Features reports for `fid` in these settings; `cdw11` carries the
    /// selector some features take (TMPSEL/THSEL, IV).
    fn value(&self, fid: FeatureId, cdw11: u32) -> Result<u32, Status> {
        Ok(match fid {
            FeatureId::Arbitration => self.arbitration.into_bits(),
            FeatureId::PowerManagement => self.power_management.into_bits(),
            FeatureId::TemperatureThreshold => {
                let sel = TemperatureThreshold::from_bits(cdw11);
                let tmpth = match (sel.tmpsel(), sel.thsel()) {
                    (0, ThresholdType::Over) => self.over_temperature,
                    (0, ThresholdType::Under) => self.under_temperature,
                    _ => return Err(Status::INVALID_FIELD),
                };
                TemperatureThreshold::new().with_tmpth(tmpth).with_thsel(sel.thsel()).into_bits()
            }
            FeatureId::ErrorRecovery => self.error_recovery.into_bits(),
            FeatureId::VolatileWriteCache => self.volatile_write_cache.ok_or(Status::INVALID_FIELD)?.into_bits(),
            // The default allocation: one I/O queue of each kind (0's based 0) until the
            // host sets the feature. The current value is the controller context's.
            FeatureId::NumberOfQueues => NumberOfQueues::new().into_bits(),
            FeatureId::InterruptCoalescing => self.interrupt_coalescing.into_bits(),
            FeatureId::InterruptVectorConfiguration => {
                let iv = InterruptVectorConfiguration::from_bits(cdw11).iv();
                if iv > self.max_io_queues {
                    return Err(Status::INVALID_FIELD);
                }
                let cd = self.coalescing_disabled.get(&iv).copied().unwrap_or(false);
                InterruptVectorConfiguration::new().with_iv(iv).with_cd(cd).into_bits()
            }
            FeatureId::WriteAtomicityNormal => self.write_atomicity_normal.into_bits(),
            FeatureId::AsyncEventConfiguration => self.async_event_configuration.into_bits(),
            // The defaults: no Host Identifier, nothing masked, PTPL clear.
            FeatureId::HostIdentifier | FeatureId::ReservationNotificationMask | FeatureId::ReservationPersistence => 0,
            _ => return Err(Status::INVALID_FIELD),
        })
    }
}

impl Subsystem {
    /// Get Features (§5.13).
    pub(super) fn get_features(&mut self, ctx: &mut ControllerContext, cmd: &Command, data: &dyn DataPointer) -> Done {
        let f = GetFeaturesFields::from_command(cmd);
        let features = &self.controller.features;
        let fid = match f.feature() {
            Some(fid) if features.implemented(fid) => fid,
            _ => return Done::err(Status::INVALID_FIELD),
        };
        let namespace_specific = self.namespace_specific(fid);
        if namespace_specific {
            if let Err(s) = self.feature_namespace(f.nsid) {
                return Done::err(s);
            }
        }
        if f.sel == Select::Current && is_reservation_feature(fid) {
            return self.reservation_feature_get(fid, f.nsid, data);
        }
        let result = match f.sel {
            // The allocation lives in the controller context, where the engine enforces it.
            Select::Current if fid == FeatureId::NumberOfQueues => {
                Ok(NumberOfQueues::new().with_nsqr(ctx.nsqa).with_ncqr(ctx.ncqa).into_bits())
            }
            // Quirk `arbitration-feature-not-kept`: the current value reads as the default.
            Select::Current if fid == FeatureId::Arbitration && self.quirks.has(Quirk::ArbitrationFeatureNotKept) => {
                Features::new(&self.profile).value(fid, f.cdw11)
            }
            Select::Current => features.value(fid, f.cdw11),
            // Nothing is saveable: the saved value is the default (§5.13.1).
            Select::Default | Select::Saved => Features::new(&self.profile).value(fid, f.cdw11),
            Select::SupportedCapabilities => Ok(FeatureCapabilities::new()
                .with_saveable(false)
                .with_namespace_specific(namespace_specific)
                .with_changeable(true)
                .into_bits()),
            Select::Reserved(_) => Err(Status::INVALID_FIELD),
        };
        match result {
            Ok(dw0) => Done::ok_with(dw0),
            Err(s) => Done::err(s),
        }
    }

    /// Whether a feature's value belongs to a namespace. Error Recovery does from NVMe
    /// 1.3 on (it carries DULBE there); in 1.2a it is controller-wide.
    fn namespace_specific(&self, fid: FeatureId) -> bool {
        match fid {
            FeatureId::ErrorRecovery => self.version() >= Version::V1_3,
            _ => fid.is_namespace_specific(),
        }
    }

    /// The NSID of a namespace-specific feature: an active namespace or FFFFFFFFh (all).
    fn feature_namespace(&self, nsid: u32) -> Result<(), Status> {
        if nsid == NSID_ALL || self.is_active(nsid) {
            Ok(())
        } else {
            Err(Status::INVALID_NAMESPACE_OR_FORMAT)
        }
    }

    /// Set Features (§5.21).
    pub(super) fn set_features(&mut self, ctx: &mut ControllerContext, cmd: &Command, data: &dyn DataPointer) -> Done {
        let f = SetFeaturesFields::from_command(cmd);
        let fid = match f.feature() {
            Some(fid) if self.controller.features.implemented(fid) => fid,
            _ => return Done::err(Status::INVALID_FIELD),
        };
        if self.namespace_specific(fid) {
            if let Err(s) = self.feature_namespace(f.nsid) {
                return Done::err(s);
            }
        } else if f.nsid != 0 && f.nsid != NSID_ALL {
            return Done::err(Status::FEATURE_NOT_NAMESPACE_SPECIFIC);
        }
        if f.save {
            return Done::err(Status::FEATURE_NOT_SAVEABLE);
        }
        if is_reservation_feature(fid) {
            return self.reservation_feature_set(fid, f.nsid, f.cdw11, data);
        }
        let features = &mut self.controller.features;
        let value = f.cdw11;
        match fid {
            FeatureId::Arbitration => features.arbitration = Arbitration::from_bits(value),
            FeatureId::PowerManagement => {
                let pm = PowerManagement::from_bits(value);
                // NPSS is 0: power state 0 is the only one.
                if pm.ps() != 0 {
                    return Done::err(Status::INVALID_FIELD);
                }
                features.power_management = pm;
            }
            FeatureId::TemperatureThreshold => {
                let t = TemperatureThreshold::from_bits(value);
                // The composite temperature (0h, or 1111b for every sensor) is the only sensor.
                if t.tmpsel() != 0 && t.tmpsel() != 0xF {
                    return Done::err(Status::INVALID_FIELD);
                }
                match t.thsel() {
                    ThresholdType::Over => features.over_temperature = t.tmpth(),
                    ThresholdType::Under => features.under_temperature = t.tmpth(),
                    ThresholdType::Reserved(_) => return Done::err(Status::INVALID_FIELD),
                }
            }
            FeatureId::ErrorRecovery => {
                let e = ErrorRecovery::from_bits(value);
                // NSFEAT.DAE is clear: DULBE cannot be enabled.
                if e.dulbe() {
                    return Done::err(Status::INVALID_FIELD);
                }
                features.error_recovery = e;
            }
            FeatureId::VolatileWriteCache => {
                features.volatile_write_cache = Some(VolatileWriteCache::from_bits(value & 1));
            }
            FeatureId::NumberOfQueues => {
                let q = NumberOfQueues::from_bits(value);
                if q.nsqr() == 0xFFFF || q.ncqr() == 0xFFFF {
                    return Done::err(Status::INVALID_FIELD);
                }
                let max = features.max_io_queues - 1;
                let allocated = NumberOfQueues::new().with_nsqr(q.nsqr().min(max)).with_ncqr(q.ncqr().min(max));
                ctx.nsqa = allocated.nsqr();
                ctx.ncqa = allocated.ncqr();
                return Done::ok_with(allocated.into_bits());
            }
            FeatureId::InterruptCoalescing => features.interrupt_coalescing = InterruptCoalescing::from_bits(value),
            FeatureId::InterruptVectorConfiguration => {
                let ivc = InterruptVectorConfiguration::from_bits(value);
                if ivc.iv() > features.max_io_queues {
                    return Done::err(Status::INVALID_FIELD);
                }
                features.coalescing_disabled.insert(ivc.iv(), ivc.cd());
            }
            FeatureId::WriteAtomicityNormal => features.write_atomicity_normal = WriteAtomicityNormal::from_bits(value),
            FeatureId::AsyncEventConfiguration => {
                let supported = value & features.aec_supported;
                features.async_event_configuration = AsyncEventConfiguration::from_bits(supported);
            }
            _ => return Done::err(Status::INVALID_FIELD),
        }
        Done::ok()
    }
}

/// Features 81h–83h, whose values live with reservations ([`super::reservation`]).
fn is_reservation_feature(fid: FeatureId) -> bool {
    matches!(
        fid,
        FeatureId::HostIdentifier | FeatureId::ReservationNotificationMask | FeatureId::ReservationPersistence
    )
}
