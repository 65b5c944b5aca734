//! Get Log Page (admin opcode 02h, NVMe 1.4 §5.14) and the state behind the pages:
//! Error Information (01h), SMART / Health Information (02h), Firmware Slot Information
//! (03h), Changed Namespace List (04h) and Commands Supported and Effects (05h); the
//! Asymmetric Namespace Access page (0Ch) is [`super::ana`]'s.
//!
//! The Changed Namespace List and the Namespace Attribute Changed notice live here too:
//! an attached namespace whose Identify data changes is added to the list, and the
//! notice is raised once, then masked until the host reads log 04h (§5.2, Figure 146).

use super::features::Features;
use super::identify::{COMPOSITE_TEMPERATURE, ERROR_LOG_ENTRIES};
use super::{Quirk, Quirks, Subsystem, NSID_ALL};
use crate::exec::{AsyncEvent, DataPointer, Done};
use crate::profile::OptionalCommand;
use nvme::spec::log::{
    Afi, ChangedNamespaceList, CommandEffects, CommandSubmission, CommandsSupportedAndEffects, ErrorInformationEntry,
    FirmwareSlotLog, GetLogPageFields, LogPageId, ParameterErrorLocation, SmartHealthLog,
};
use nvme::spec::{AdminOpcode, Command, NvmOpcode, Status};
use std::collections::{BTreeSet, VecDeque};
use zerocopy::little_endian::{U128, U16};
use zerocopy::{FromZeros, IntoBytes};

/// Asynchronous Event Type 2h: Notice (Figure 146).
pub const EVENT_TYPE_NOTICE: u8 = 2;
/// Asynchronous Event Information 00h for notices: Namespace Attribute Changed.
pub const NOTICE_NAMESPACE_ATTRIBUTE_CHANGED: u8 = 0;

/// The Error Information log: the most recent entries, newest first when read.
#[derive(Debug, Default)]
pub struct ErrorLog {
    entries: VecDeque<ErrorInformationEntry>,
    /// Errors recorded over the life of the controller (the last Error Count used).
    count: u64,
}

impl ErrorLog {
    /// Records a command that completed with `status`.
    pub fn record(&mut self, cmd: &Command, status: Status) {
        self.count += 1;
        let entry = ErrorInformationEntry {
            error_count: self.count,
            // The command set does not see the queue a command came from.
            sqid: 0xFFFF,
            cid: cmd.cid,
            status_field: status.to_field() << 1,
            parameter_error_location: ParameterErrorLocation::from_bits(0xFFFF),
            nsid: cmd.nsid,
            ..ErrorInformationEntry::default()
        };
        self.entries.push_front(entry);
        self.entries.truncate(ERROR_LOG_ENTRIES);
    }

    /// Errors recorded over the life of the controller.
    pub fn count(&self) -> u64 {
        self.count
    }

    fn page(&self) -> Vec<u8> {
        let mut out = vec![0u8; ERROR_LOG_ENTRIES * 64];
        for (slot, e) in out.chunks_exact_mut(64).zip(&self.entries) {
            slot.copy_from_slice(e.as_bytes());
        }
        out
    }
}

/// The Changed Namespace List and whether its notice is waiting for the log to be read.
#[derive(Debug, Default)]
pub struct ChangedNamespaces {
    nsids: BTreeSet<u32>,
    /// A Namespace Attribute Changed notice was raised and log 04h not yet read.
    notice_outstanding: bool,
}

impl ChangedNamespaces {
    /// The NSIDs listed, increasing.
    pub fn nsids(&self) -> Vec<u32> {
        self.nsids.iter().copied().collect()
    }

    pub fn notice_outstanding(&self) -> bool {
        self.notice_outstanding
    }
}

impl Subsystem {
    /// Notes that the attributes of `nsid`, as the controller running the command sees
    /// them, changed: attached, detached, deleted while attached, or formatted. Adds it to
    /// the Changed Namespace List and raises Namespace Attribute Changed (into `events`,
    /// the command's context) if enabled and not masked.
    pub(super) fn namespace_changed(&mut self, events: &mut Vec<AsyncEvent>, nsid: u32) {
        let cntlid = self.controller.cntlid;
        self.namespace_changed_on(events, nsid, cntlid);
    }

    /// [`Self::namespace_changed`] for controller `cntlid`: the one running the command
    /// (its notice into `events`), or another of the subsystem, whose notice waits in its
    /// own mailbox for its queue engine ([`crate::exec::CommandSet::take_events`]). A
    /// CNTLID the subsystem does not have is ignored.
    pub(super) fn namespace_changed_on(&mut self, events: &mut Vec<AsyncEvent>, nsid: u32, cntlid: u16) {
        if !self.profile.controller.namespace_attribute_notices {
            return;
        }
        let quirks = &self.quirks;
        if cntlid == self.controller.cntlid {
            let c = &mut self.controller;
            note_change(quirks, &mut c.changed, &c.features, events, nsid);
        } else if let Some(c) = self.others.iter_mut().find(|c| c.cntlid == cntlid) {
            note_change(quirks, &mut c.changed, &c.features, &mut c.events, nsid);
        }
    }

    pub(super) fn get_log_page(&mut self, cmd: &Command, data: &dyn DataPointer) -> Done {
        let fields = if self.extended_log_data() {
            GetLogPageFields::from_command(cmd)
        } else {
            GetLogPageFields::from_command_without_extended_data(cmd)
        };
        // The page, whole; the transfer is cut from it below.
        let page: Vec<u8> = match LogPageId::from_u8(fields.lid) {
            Some(LogPageId::ErrorInformation) => self.controller.errors.page(),
            Some(LogPageId::SmartHealth) => {
                // LPA bit 0 is clear: the page is controller-wide only.
                if cmd.nsid != 0 && cmd.nsid != NSID_ALL {
                    return Done::err(Status::INVALID_FIELD);
                }
                self.smart_health().as_bytes().to_vec()
            }
            Some(LogPageId::FirmwareSlot) => self.firmware_slot().as_bytes().to_vec(),
            Some(LogPageId::ChangedNamespaceList) if self.profile.controller.namespace_attribute_notices => {
                let ids = self.controller.changed.nsids();
                ChangedNamespaceList::from_ids(&ids).as_bytes().to_vec()
            }
            Some(LogPageId::CommandsSupportedAndEffects) => self.commands_supported_and_effects().as_bytes().to_vec(),
            Some(LogPageId::ReservationNotification) if self.reservations().is_some() => {
                self.reservation_log_page(fields.rae)
            }
            Some(LogPageId::AsymmetricNamespaceAccess) if self.ana().is_some() => {
                self.ana_log_page(fields.lsp, fields.rae)
            }
            Some(LogPageId::SanitizeStatus) if self.profile.erase.sanitize.is_some() => {
                self.sanitize_status_log(self.now_ns).as_bytes().to_vec()
            }
            _ => return Done::err(Status::INVALID_LOG_PAGE),
        };
        // The offset is in bytes and dword aligned (§5.14: LPOL bits 1:0 are 0); one
        // beyond the end of the page is Invalid Field in Command.
        if fields.offset % 4 != 0 || fields.offset > page.len() as u64 {
            return Done::err(Status::INVALID_FIELD);
        }
        if let Err(s) = to_host_padded(data, &page[fields.offset as usize..], fields.bytes()) {
            return Done::err(s);
        }
        // Reading the Changed Namespace List clears it and re-arms the notice, unless
        // RAE (NVMe 1.3 and later) asks to retain the event.
        if fields.lid == LogPageId::ChangedNamespaceList as u8 && !fields.rae {
            self.controller.changed.nsids.clear();
            self.controller.changed.notice_outstanding = false;
        }
        Done::ok()
    }

    /// "Get Log Page – SMART / Health Information Log".
    pub fn smart_health(&self) -> SmartHealthLog {
        let h = &self.health;
        let mut log = SmartHealthLog::new_zeroed();
        log.composite_temperature = U16::new(COMPOSITE_TEMPERATURE);
        log.available_spare = 100;
        log.available_spare_threshold = 10;
        // Thousands of 512-byte units, rounded up.
        log.data_units_read = U128::new((h.bytes_read / 512).div_ceil(1000));
        log.data_units_written = U128::new((h.bytes_written / 512).div_ceil(1000));
        log.host_read_commands = U128::new(h.host_read_commands);
        log.host_write_commands = U128::new(h.host_write_commands);
        log.power_cycles = U128::new(h.power_cycles);
        log.unsafe_shutdowns = U128::new(h.unsafe_shutdowns);
        log.media_errors = U128::new(h.media_errors);
        log.error_log_entries = U128::new(self.controller.errors.count() as u128);
        log
    }

    /// "Get Log Page – Firmware Slot Information Log": the active slot, the slot the
    /// next reset activates, and the revision in every slot.
    fn firmware_slot(&self) -> FirmwareSlotLog {
        let fw = self.firmware();
        let mut log = FirmwareSlotLog::new_zeroed();
        // Quirk `afi-next-slot-unset`: AFI bits 6:4 stay 0 (§5.14.1.3 broken).
        let next = if self.quirks.has(Quirk::AfiNextSlotUnset) { 0 } else { fw.next.unwrap_or(0) };
        log.afi = Afi::new().with_active_slot(fw.active).with_next_slot(next);
        for (frs, slot) in log.frs.iter_mut().zip(fw.slots.iter()) {
            if let Some(fr) = slot {
                *frs = *fr;
            }
        }
        log
    }

    /// "Get Log Page – Commands Supported and Effects Log": exactly the commands this
    /// controller runs, including the queue engine's own.
    pub fn commands_supported_and_effects(&self) -> CommandsSupportedAndEffects {
        let mut log = CommandsSupportedAndEffects::new_zeroed();
        let supported = CommandEffects::new().with_csupp(true);
        let changes_content = supported.with_lbcc(true);
        let mut admin = vec![
            (AdminOpcode::DeleteIoSubmissionQueue, supported),
            (AdminOpcode::CreateIoSubmissionQueue, supported),
            (AdminOpcode::GetLogPage, supported),
            (AdminOpcode::DeleteIoCompletionQueue, supported),
            (AdminOpcode::CreateIoCompletionQueue, supported),
            (AdminOpcode::Identify, supported),
            (AdminOpcode::Abort, supported),
            (AdminOpcode::SetFeatures, supported),
            (AdminOpcode::GetFeatures, supported),
            (AdminOpcode::AsynchronousEventRequest, supported),
        ];
        if self.supports(OptionalCommand::NamespaceManagement) {
            // Quirk `namespace-management-not-implemented`: the log says what the controller does.
            if !self.quirks.has(Quirk::NamespaceManagementNotImplemented) {
                admin.push((AdminOpcode::NamespaceManagement, supported.with_nic(true)));
            }
            admin.push((AdminOpcode::NamespaceAttachment, supported.with_nic(true)));
        }
        if self.supports(OptionalCommand::FormatNvm) {
            let format = changes_content.with_ncc(true).with_cse(CommandSubmission::ExclusiveToNamespace);
            admin.push((AdminOpcode::FormatNvm, format));
        }
        if self.profile.firmware.is_some() {
            admin.push((AdminOpcode::FirmwareCommit, supported.with_ccc(true)));
            admin.push((AdminOpcode::FirmwareImageDownload, supported));
        }
        if self.profile.erase.sanitize.is_some() {
            let sanitize = changes_content.with_ncc(true).with_cse(CommandSubmission::ExclusiveToController);
            admin.push((AdminOpcode::Sanitize, sanitize));
        }
        for (op, effects) in admin {
            log.acs[op as usize] = effects;
        }
        let mut io =
            vec![(NvmOpcode::Flush, supported), (NvmOpcode::Write, changes_content), (NvmOpcode::Read, supported)];
        let optional = [
            (OptionalCommand::WriteUncorrectable, NvmOpcode::WriteUncorrectable, changes_content),
            (OptionalCommand::Compare, NvmOpcode::Compare, supported),
            (OptionalCommand::WriteZeroes, NvmOpcode::WriteZeroes, changes_content),
            (OptionalCommand::DatasetManagement, NvmOpcode::DatasetManagement, changes_content),
            (OptionalCommand::Verify, NvmOpcode::Verify, supported),
        ];
        for (c, op, effects) in optional {
            if self.supports(c) {
                io.push((op, effects));
            }
        }
        if self.reservations().is_some() {
            for op in [
                NvmOpcode::ReservationRegister,
                NvmOpcode::ReservationReport,
                NvmOpcode::ReservationAcquire,
                NvmOpcode::ReservationRelease,
            ] {
                io.push((op, supported));
            }
        }
        for (op, effects) in io {
            log.iocs[op as usize] = effects;
        }
        log
    }
}

/// Adds `nsid` to a controller's Changed Namespace List and raises its Namespace
/// Attribute Changed notice into `events`, if its features enable it and none is
/// outstanding.
fn note_change(
    quirks: &Quirks,
    changed: &mut ChangedNamespaces,
    features: &Features,
    events: &mut Vec<AsyncEvent>,
    nsid: u32,
) {
    if !quirks.has(Quirk::ChangedListEmpty) {
        // Quirk `changed-list-empty`: the list is never filled (§5.14.1.4 broken).
        changed.nsids.insert(nsid);
    }
    let enabled = features.namespace_notices_enabled();
    if enabled && !changed.notice_outstanding && !quirks.has(Quirk::NoNamespaceNotice) {
        // Quirk `no-namespace-notice`: the event is never raised (§5.2 broken).
        changed.notice_outstanding = true;
        events.push(AsyncEvent {
            event_type: EVENT_TYPE_NOTICE,
            info: NOTICE_NAMESPACE_ATTRIBUTE_CHANGED,
            log_page: LogPageId::ChangedNamespaceList as u8,
        });
    }
}

/// Copies `page` to the host buffer of a `len`-byte transfer; bytes past the end of the
/// page read as zero.
pub(super) fn to_host_padded(data: &dyn DataPointer, page: &[u8], len: u64) -> Result<(), Status> {
    let dma = data.dma();
    let mut at = 0usize;
    let mut failed = None;
    data.segments(len as usize, &mut |addr, n| {
        if failed.is_some() {
            return;
        }
        let from_page = page.len().saturating_sub(at).min(n);
        let copied = dma
            .write(addr, &page[at.min(page.len())..at.min(page.len()) + from_page])
            .and_then(|_| dma.fill(addr + from_page as u64, n - from_page, 0));
        if copied.is_err() {
            failed = Some(Status::DATA_TRANSFER_ERROR);
        }
        at += n;
    })?;
    failed.map_or(Ok(()), Err)
}
