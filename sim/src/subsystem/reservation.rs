//! Reservations (NVMe 1.4 §8.8 "Reservations"): the four NVM commands (§6.10
//! "Reservation Acquire command", §6.11 "Reservation Register command", §6.12 "Reservation
//! Release command", §6.13 "Reservation Report command"), the access rules of the figure
//! "Command Behavior in the Presence of a Reservation", the Reservation Notification log
//! page (80h) and its Asynchronous Event, and features 81h–83h.
//!
//! This module owns each namespace's [`ReservationState`] (registrants and their keys, the
//! reservation and its type, the generation PRGEN, PTPL), each controller's
//! [`NoticeLog`], and the profile's [`ReservationModel`].
//!
//! ## Hosts
//!
//! A registrant is a host. Controllers whose Host Identifier (Feature 81h) is the same
//! non-zero value belong to the same host; a controller whose Host Identifier is 0h (not
//! specified) is a host of its own, not associated with any other controller. A
//! registration made through one controller of a host is the host's, so it counts on all
//! of them; a Report lists every controller of each registered host.
//!
//! ## What is modelled, and what is not
//!
//! - Register, Unregister, Replace (IEKEY honoured), CPTPL; Acquire, Preempt, Preempt and
//!   Abort; Release and Clear; Report with and without EDS (EDS from NVMe 1.3).
//! - PRGEN is incremented by every successful Reservation Register, Preempt, Preempt and
//!   Abort and Clear; Acquire and Release leave it.
//! - Preempt and Abort acts as Preempt: the simulated controllers complete every command
//!   as it is fetched, so no command of a preempted host is ever outstanding to abort.
//! - Reservations and registrations are kept across Controller Level Resets; across a
//!   power cut only for a namespace whose PTPL state is set (RESCAP bit 0), otherwise they
//!   are cleared and PRGEN returns to 0.
//! - Notices: "Registration Preempted" to the controllers of every host whose registration
//!   a Preempt removed; "Reservation Preempted" to the controllers of the hosts still
//!   registered (other than the preempting host) when a Preempt took the reservation
//!   over; "Reservation Released" to the controllers of the other registered hosts when
//!   the holder releases (or unregisters from) a Registrants Only or All Registrants
//!   reservation, and when a Clear removes the reservation and registrations. Each only
//!   on controllers the namespace is attached to, unless that controller's Reservation
//!   Notification Mask for the namespace masks it. A controller keeps at most 255 unread
//!   pages (the oldest dropped); one Asynchronous Event (type 110b, information 00h, log
//!   80h) is raised until the host reads log 80h without RAE.
//! - The Host Identifier cannot change while its host is a registrant of any namespace
//!   (Command Sequence Error); 64-bit and 128-bit identifiers cannot be in use at once
//!   (Host Identifier Inconsistent Format). NVMe 1.2a has only 64-bit identifiers (EXHID
//!   is refused) and no EDS.
//! - IEKEY: NVMe 1.3 and later (RESCAP bit 7) honour it in Reservation Register only,
//!   and refuse it in Acquire and Release with Invalid Field in Command; NVMe 1.2a
//!   honours it in all three (its revision's definition).

use super::{ControllerState, Quirk, Subsystem, NSID_ALL};
use crate::exec::{AsyncEvent, DataPointer, Done};
use nvme::spec::features::FeatureId;
use nvme::spec::log::LogPageId;
use nvme::spec::reservation::{
    access_allowed, AcquireAction, AcquireData, AcquireFields, ChangePtpl, CommandGroup, HostIdentifierCdw11,
    NotificationType, RegisterAction, RegisterData, RegisterFields, RegisteredController, RegisteredControllerExtended,
    ReleaseAction, ReleaseData, ReleaseFields, ReportFields, ReservationNotificationLog, ReservationNotificationMask,
    ReservationPersistence, ReservationStatusExtendedHeader, ReservationStatusHeader, ReservationType, Standing,
    ASYNC_EVENT_IO_COMMAND_SPECIFIC, HOST_IDENTIFIER_BYTES, RCSTS_HOLDS_RESERVATION, RESERVATION_LOG_PAGE_AVAILABLE,
};
use nvme::spec::{Command, Status, Version};
use serde::Deserialize;
use std::collections::VecDeque;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, IntoBytes};

/// A profile's `reservations:` section: the drive supports reservations (ONCS bit 5) of
/// the types listed (RESCAP bits 6:1), and Persist Through Power Loss when `ptpl` (RESCAP
/// bit 0).
///
/// ```yaml
/// reservations: {ptpl: true}      # every type; or types: [write_exclusive, exclusive_access, …]
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReservationModel {
    /// PTPL: reservations may persist through a power loss (RESCAP bit 0).
    #[serde(default)]
    pub ptpl: bool,
    /// The reservation types supported; all six when not given.
    #[serde(default = "all_types")]
    pub types: Vec<TypeName>,
}

/// A reservation type as a profile writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TypeName {
    WriteExclusive,
    ExclusiveAccess,
    WriteExclusiveRegistrantsOnly,
    ExclusiveAccessRegistrantsOnly,
    WriteExclusiveAllRegistrants,
    ExclusiveAccessAllRegistrants,
}

impl TypeName {
    pub fn rtype(self) -> ReservationType {
        match self {
            TypeName::WriteExclusive => ReservationType::WriteExclusive,
            TypeName::ExclusiveAccess => ReservationType::ExclusiveAccess,
            TypeName::WriteExclusiveRegistrantsOnly => ReservationType::WriteExclusiveRegistrantsOnly,
            TypeName::ExclusiveAccessRegistrantsOnly => ReservationType::ExclusiveAccessRegistrantsOnly,
            TypeName::WriteExclusiveAllRegistrants => ReservationType::WriteExclusiveAllRegistrants,
            TypeName::ExclusiveAccessAllRegistrants => ReservationType::ExclusiveAccessAllRegistrants,
        }
    }
}

fn all_types() -> Vec<TypeName> {
    vec![
        TypeName::WriteExclusive,
        TypeName::ExclusiveAccess,
        TypeName::WriteExclusiveRegistrantsOnly,
        TypeName::ExclusiveAccessRegistrantsOnly,
        TypeName::WriteExclusiveAllRegistrants,
        TypeName::ExclusiveAccessAllRegistrants,
    ]
}

impl ReservationModel {
    /// Whether the drive supports reservations of type `rtype`.
    pub fn supports(&self, rtype: ReservationType) -> bool {
        self.types.iter().any(|t| t.rtype() == rtype)
    }

    /// RESCAP (Identify Namespace byte 31): PTPL (bit 0), the types (bits 6:1), and IEKEY
    /// as NVMe 1.3 defines it (bit 7) on `version` 1.3 and later.
    pub fn rescap(&self, version: Version) -> u8 {
        let types = self.types.iter().fold(0u8, |bits, t| bits | t.rtype().rescap_bit());
        types | self.ptpl as u8 | ((version >= Version::V1_3) as u8) << 7
    }
}

/// A host, as reservations see it (see the module's "Hosts").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Host {
    /// Controllers with this non-zero Host Identifier (a 64-bit one in bytes 7:0).
    Id([u8; 16]),
    /// The controller with this CNTLID, whose Host Identifier is 0h.
    Controller(u16),
}

/// One registrant of a namespace: a host and its reservation key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registrant {
    pub host: Host,
    pub key: u64,
}

/// The reservation on a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// The host that acquired it (for All Registrants types every registrant holds it).
    pub holder: Host,
    pub rtype: ReservationType,
}

/// The reservation state of one namespace (§8.8), kept by the NVM subsystem.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReservationState {
    pub registrants: Vec<Registrant>,
    pub reservation: Option<Reservation>,
    /// PRGEN: the Reservation Status GEN field.
    pub generation: u32,
    /// PTPL state: reservations and registrations persist through a power loss.
    pub ptpl: bool,
}

impl ReservationState {
    /// The key `host` registered, if it is a registrant.
    pub fn key_of(&self, host: Host) -> Option<u64> {
        self.registrants.iter().find(|r| r.host == host).map(|r| r.key)
    }

    /// How `host` stands toward the reservation.
    pub fn standing(&self, host: Host) -> Standing {
        let registered = self.key_of(host).is_some();
        match self.reservation {
            Some(r) if r.holder == host || (r.rtype.all_registrants() && registered) => Standing::Holder,
            _ if registered => Standing::Registrant,
            _ => Standing::NonRegistrant,
        }
    }

    /// The registered hosts other than `host`.
    fn others(&self, host: Host) -> Vec<Host> {
        self.registrants.iter().map(|r| r.host).filter(|h| *h != host).collect()
    }

    /// Removes the registrants other than `issuer` whose key is `key` (every one other
    /// than `issuer` for `None`); returns their hosts.
    fn remove_registrants(&mut self, issuer: Host, key: Option<u64>) -> Vec<Host> {
        let (gone, kept): (Vec<Registrant>, Vec<Registrant>) =
            self.registrants.iter().partition(|r| r.host != issuer && key.is_none_or(|k| r.key == k));
        self.registrants = kept;
        gone.into_iter().map(|r| r.host).collect()
    }

    /// What a power cut leaves: everything with PTPL set, else nothing but the PTPL state.
    pub fn after_power_loss(&mut self, lose_anyway: bool) {
        if !self.ptpl || lose_anyway {
            *self = ReservationState { ptpl: self.ptpl, ..ReservationState::default() };
        }
    }
}

/// The most unread Reservation Notification log pages a controller keeps.
pub const NOTICE_LOG_PAGES: usize = 255;

/// A controller's Reservation Notification log pages not yet read, oldest first.
#[derive(Clone, Debug, Default)]
pub struct NoticeLog {
    pages: VecDeque<ReservationNotificationLog>,
    /// The Log Page Count of the page created last.
    count: u64,
    /// A Reservation Log Page Available event was raised and log 80h not yet read.
    event_outstanding: bool,
}

impl NoticeLog {
    /// Pages waiting to be read.
    pub fn pending(&self) -> usize {
        self.pages.len()
    }

    /// Adds a page; true when the Asynchronous Event is to be raised.
    fn push(&mut self, kind: NotificationType, nsid: u32) -> bool {
        self.count = self.count.wrapping_add(1).max(1);
        let page = ReservationNotificationLog {
            log_page_count: U64::new(self.count),
            rnlpt: kind as u8,
            nsid: U32::new(nsid),
            ..Default::default()
        };
        self.pages.push_back(page);
        if self.pages.len() > NOTICE_LOG_PAGES {
            self.pages.pop_front();
        }
        !std::mem::replace(&mut self.event_outstanding, true)
    }

    /// Get Log Page 80h: the oldest page (an empty page when none is waiting), with the
    /// number still waiting after it. Without `rae` the event is re-armed (and raised again
    /// at once if pages remain: true).
    fn read(&mut self, rae: bool) -> (ReservationNotificationLog, bool) {
        let mut page = self.pages.pop_front().unwrap_or_default();
        page.nalp = self.pages.len().min(255) as u8;
        let mut raise = false;
        if !rae {
            self.event_outstanding = !self.pages.is_empty();
            raise = self.event_outstanding;
        }
        (page, raise)
    }
}

/// The Asynchronous Event of a new Reservation Notification log page (Figure 146):
/// type 110b I/O Command Specific status, information 00h Reservation Log Page Available.
fn log_available_event() -> AsyncEvent {
    AsyncEvent {
        event_type: ASYNC_EVENT_IO_COMMAND_SPECIFIC,
        info: RESERVATION_LOG_PAGE_AVAILABLE,
        log_page: LogPageId::ReservationNotification as u8,
    }
}

/// The host a controller belongs to (see the module's "Hosts").
pub fn host_of(c: &ControllerState) -> Host {
    let id = c.features.host_identifier;
    if id == [0u8; 16] {
        Host::Controller(c.cntlid)
    } else {
        Host::Id(id)
    }
}

impl Subsystem {
    /// The profile's reservation support, if any.
    pub fn reservations(&self) -> Option<&ReservationModel> {
        self.profile.reservations.as_ref()
    }

    /// The reservation state of namespace `nsid`, if allocated.
    pub fn reservation_state(&self, nsid: u32) -> Option<&ReservationState> {
        self.namespace(nsid).map(|ns| &ns.reservation)
    }

    fn controllers(&self) -> impl Iterator<Item = &ControllerState> {
        std::iter::once(&self.controller).chain(&self.others)
    }

    /// The host of the controller the command runs on.
    fn issuing_host(&self) -> Host {
        host_of(&self.controller)
    }

    /// Whether any host of the controllers of `host` is a registrant of any namespace.
    fn host_registered_anywhere(&self, host: Host) -> bool {
        self.namespaces.iter().flatten().any(|ns| ns.reservation.key_of(host).is_some())
    }

    /// Reservation Conflict for an I/O command the reservation on its namespace does not
    /// allow the issuing host (§8.8, figure "Command Behavior in the Presence of a
    /// Reservation"); `None` when it may run (or is not in the figure's groups).
    pub(super) fn reservation_conflict(&self, cmd: &Command) -> Option<Status> {
        self.reservations()?;
        let group = CommandGroup::of(cmd.opcode)?;
        if !self.is_active(cmd.nsid) {
            return None;
        }
        let state = &self.namespace(cmd.nsid)?.reservation;
        let reservation = state.reservation?;
        let standing = state.standing(self.issuing_host());
        if access_allowed(reservation.rtype, standing, group) {
            return None;
        }
        if self.quirks.has(Quirk::ReservationNotEnforced)
            && standing == Standing::NonRegistrant
            && group == CommandGroup::Write
        {
            // Quirk: a non-registrant's write runs under the reservation (§8.8 figure
            // "Command Behavior in the Presence of a Reservation" broken).
            return None;
        }
        if self.quirks.has(Quirk::RegistrantsOnlyLetsAnyoneRead)
            && reservation.rtype == ReservationType::ExclusiveAccessRegistrantsOnly
            && group == CommandGroup::Read
        {
            // Quirk: Exclusive Access – Registrants Only lets a non-registrant read (same figure broken).
            return None;
        }
        Some(Status::RESERVATION_CONFLICT)
    }

    /// The namespace a reservation command names: an active one, or the status
    /// io_target gives (Invalid Field for an inactive NSID on 1.4, Invalid Namespace or Format).
    fn reservation_namespace(&self, nsid: u32) -> Result<u32, Status> {
        if self.is_active(nsid) {
            return Ok(nsid);
        }
        if self.is_valid_nsid(nsid) && self.version() >= Version::V1_4 {
            return Err(Status::INVALID_FIELD);
        }
        Err(Status::INVALID_NAMESPACE_OR_FORMAT)
    }

    /// Whether IEKEY disables the CRKEY check of Acquire and Release (NVMe 1.2a), or is
    /// refused there (1.3 and later: `Err`).
    fn acquire_release_iekey(&self, iekey: bool) -> Result<bool, Status> {
        match (iekey, self.version() >= Version::V1_3) {
            (true, true) => Err(Status::INVALID_FIELD),
            (iekey, _) => Ok(iekey),
        }
    }

    /// Reservation Register (§6.11).
    pub(super) fn reservation_register(&mut self, cmd: &Command, data: &dyn DataPointer) -> Done {
        let nsid = match self.reservation_namespace(cmd.nsid) {
            Ok(n) => n,
            Err(s) => return Done::err(s),
        };
        let f = RegisterFields::from_command(cmd);
        let ptpl_supported = self.reservations().is_some_and(|m| m.ptpl);
        match f.cptpl {
            ChangePtpl::Reserved => return Done::err(Status::INVALID_FIELD),
            ChangePtpl::Set if !ptpl_supported => return Done::err(Status::INVALID_FIELD),
            _ => {}
        }
        if let RegisterAction::Reserved(_) = f.rrega {
            return Done::err(Status::INVALID_FIELD);
        }
        let d = match data.copy_from_host(16).map(|b| RegisterData::read_from_bytes(&b).ok()) {
            Ok(Some(d)) => d,
            _ => return Done::err(Status::DATA_TRANSFER_ERROR),
        };
        let (crkey, nrkey) = (d.crkey.get(), d.nrkey.get());
        let host = self.issuing_host();
        let Some(ns) = self.namespace_mut(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        let state = &mut ns.reservation;
        let current = state.key_of(host);
        let mut released_to = Vec::new();
        match f.rrega {
            RegisterAction::Register => match current {
                None => state.registrants.push(Registrant { host, key: nrkey }),
                // Registering again with the key held is no change.
                Some(key) if key == nrkey => {}
                Some(_) => return Done::err(Status::RESERVATION_CONFLICT),
            },
            RegisterAction::Unregister | RegisterAction::Replace => {
                let Some(key) = current else { return Done::err(Status::RESERVATION_CONFLICT) };
                if !f.iekey && key != crkey {
                    return Done::err(Status::RESERVATION_CONFLICT);
                }
                if f.rrega == RegisterAction::Replace {
                    for r in state.registrants.iter_mut().filter(|r| r.host == host) {
                        r.key = nrkey;
                    }
                } else {
                    state.registrants.retain(|r| r.host != host);
                    // The holder unregistering releases the reservation; an All Registrants
                    // reservation goes with its last registrant (§8.8).
                    if let Some(r) = state.reservation {
                        let gone =
                            if r.rtype.all_registrants() { state.registrants.is_empty() } else { r.holder == host };
                        if gone {
                            state.reservation = None;
                            if r.rtype.registrants_have_access() {
                                released_to = state.others(host);
                            }
                        }
                    }
                }
            }
            RegisterAction::Reserved(_) => return Done::err(Status::INVALID_FIELD),
        }
        match f.cptpl {
            ChangePtpl::Set => state.ptpl = true,
            ChangePtpl::Clear => state.ptpl = false,
            ChangePtpl::NoChange | ChangePtpl::Reserved => {}
        }
        state.generation = state.generation.wrapping_add(1);
        self.notify(nsid, &released_to, NotificationType::ReservationReleased);
        Done::ok()
    }

    /// Reservation Acquire (§6.10): Acquire, Preempt, Preempt and Abort.
    pub(super) fn reservation_acquire(&mut self, cmd: &Command, data: &dyn DataPointer) -> Done {
        let nsid = match self.reservation_namespace(cmd.nsid) {
            Ok(n) => n,
            Err(s) => return Done::err(s),
        };
        let f = AcquireFields::from_command(cmd);
        if let AcquireAction::Reserved(_) = f.racqa {
            return Done::err(Status::INVALID_FIELD);
        }
        let ignore_key = match self.acquire_release_iekey(f.iekey) {
            Ok(i) => i,
            Err(s) => return Done::err(s),
        };
        let rtype = match ReservationType::from_u8(f.rtype) {
            Some(t) if self.reservations().is_some_and(|m| m.supports(t)) => t,
            _ => return Done::err(Status::INVALID_FIELD),
        };
        let d = match data.copy_from_host(16).map(|b| AcquireData::read_from_bytes(&b).ok()) {
            Ok(Some(d)) => d,
            _ => return Done::err(Status::DATA_TRANSFER_ERROR),
        };
        let (crkey, prkey) = (d.crkey.get(), d.prkey.get());
        let host = self.issuing_host();
        let quiet = self.quirks.has(Quirk::ReservationLogNotRaised);
        let Some(ns) = self.namespace_mut(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        let state = &mut ns.reservation;
        match state.key_of(host) {
            Some(key) if ignore_key || key == crkey => {}
            _ => return Done::err(Status::RESERVATION_CONFLICT),
        }
        if f.racqa == AcquireAction::Acquire {
            return match state.reservation {
                None => {
                    state.reservation = Some(Reservation { holder: host, rtype });
                    Done::ok()
                }
                // Acquiring what the host holds already, of the same type, changes nothing.
                Some(r) if state.standing(host) == Standing::Holder && r.rtype == rtype => Done::ok(),
                Some(_) => Done::err(Status::RESERVATION_CONFLICT),
            };
        }
        // Preempt, and Preempt and Abort (nothing is outstanding to abort: see the module doc).
        let mut preempted_reservation = false;
        let removed = match state.reservation {
            Some(r) if r.rtype.all_registrants() && prkey == 0 => {
                preempted_reservation = true;
                state.remove_registrants(host, None)
            }
            Some(r) if !r.rtype.all_registrants() && state.key_of(r.holder) == Some(prkey) => {
                preempted_reservation = true;
                state.remove_registrants(host, Some(prkey))
            }
            Some(r) if !r.rtype.all_registrants() && prkey == 0 => return Done::err(Status::INVALID_FIELD),
            _ => {
                let removed = state.remove_registrants(host, Some(prkey));
                if removed.is_empty() {
                    return Done::err(Status::RESERVATION_CONFLICT);
                }
                removed
            }
        };
        if preempted_reservation {
            state.reservation = Some(Reservation { holder: host, rtype });
        }
        let remaining = if preempted_reservation { state.others(host) } else { Vec::new() };
        state.generation = state.generation.wrapping_add(1);
        if quiet {
            // Quirk `reservation-log-not-raised`: no notice of the preempt (§8.8 broken).
            return Done::ok();
        }
        self.notify(nsid, &removed, NotificationType::RegistrationPreempted);
        self.notify(nsid, &remaining, NotificationType::ReservationPreempted);
        Done::ok()
    }

    /// Reservation Release (§6.12): Release and Clear.
    pub(super) fn reservation_release(&mut self, cmd: &Command, data: &dyn DataPointer) -> Done {
        let nsid = match self.reservation_namespace(cmd.nsid) {
            Ok(n) => n,
            Err(s) => return Done::err(s),
        };
        let f = ReleaseFields::from_command(cmd);
        if let ReleaseAction::Reserved(_) = f.rrela {
            return Done::err(Status::INVALID_FIELD);
        }
        let ignore_key = match self.acquire_release_iekey(f.iekey) {
            Ok(i) => i,
            Err(s) => return Done::err(s),
        };
        let d = match data.copy_from_host(8).map(|b| ReleaseData::read_from_bytes(&b).ok()) {
            Ok(Some(d)) => d,
            _ => return Done::err(Status::DATA_TRANSFER_ERROR),
        };
        let host = self.issuing_host();
        let anyone_releases = self.quirks.has(Quirk::ReleaseByNonHolderReleases);
        let Some(ns) = self.namespace_mut(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        let state = &mut ns.reservation;
        match state.key_of(host) {
            Some(key) if ignore_key || key == d.crkey.get() => {}
            _ => return Done::err(Status::RESERVATION_CONFLICT),
        }
        let notify = match f.rrela {
            ReleaseAction::Release => {
                let Some(r) = state.reservation else { return Done::ok() };
                // A registrant that does not hold the reservation releases nothing, and
                // succeeds (§8.8 "Releasing a Reservation").
                if state.standing(host) != Standing::Holder && !anyone_releases {
                    return Done::ok();
                }
                // Quirk `release-by-non-holder-releases`: the reservation goes all the same.
                if f.rtype != r.rtype as u8 {
                    return Done::err(Status::INVALID_FIELD);
                }
                state.reservation = None;
                if r.rtype.registrants_have_access() {
                    state.others(host)
                } else {
                    Vec::new()
                }
            }
            ReleaseAction::Clear => {
                let others = state.others(host);
                state.registrants.clear();
                state.reservation = None;
                state.generation = state.generation.wrapping_add(1);
                others
            }
            ReleaseAction::Reserved(_) => return Done::err(Status::INVALID_FIELD),
        };
        self.notify(nsid, &notify, NotificationType::ReservationReleased);
        Done::ok()
    }

    /// Reservation Report (§6.13): the Reservation Status data structure, extended with
    /// EDS set (NVMe 1.3 and later), cut to the transfer NUMD asks for.
    pub(super) fn reservation_report(&mut self, cmd: &Command, data: &dyn DataPointer) -> Done {
        let nsid = match self.reservation_namespace(cmd.nsid) {
            Ok(n) => n,
            Err(s) => return Done::err(s),
        };
        let f = ReportFields::from_command(cmd);
        let v13 = self.version() >= Version::V1_3;
        let eds = f.eds && v13;
        // A 128-bit Host Identifier cannot be reported in the 64-bit structure.
        if !eds && v13 && self.controllers().any(|c| c.features.host_identifier_extended) {
            return Done::err(Status::HOST_IDENTIFIER_INCONSISTENT_FORMAT);
        }
        let Some(ns) = self.namespace(nsid) else { return Done::err(Status::INVALID_NAMESPACE_OR_FORMAT) };
        let state = &ns.reservation;
        let mut controllers: Vec<&ControllerState> = self.controllers().collect();
        controllers.sort_by_key(|c| c.cntlid);
        let mut entries = Vec::new();
        for r in &state.registrants {
            for c in controllers.iter().filter(|c| host_of(c) == r.host) {
                let holds = state.standing(r.host) == Standing::Holder;
                entries.push((c.cntlid, holds, c.features.host_identifier, r.key));
            }
        }
        let header = ReservationStatusHeader {
            gen: U32::new(state.generation),
            rtype: state.reservation.map_or(0, |r| r.rtype as u8),
            regctl: U16::new(entries.len() as u16),
            ptpls: state.ptpl as u8,
            ..Default::default()
        };
        let mut page = Vec::new();
        if eds {
            page.extend_from_slice(ReservationStatusExtendedHeader { header, ..Default::default() }.as_bytes());
        } else {
            page.extend_from_slice(header.as_bytes());
        }
        for (cntlid, holds, hostid, key) in entries {
            let rcsts = if holds { RCSTS_HOLDS_RESERVATION } else { 0 };
            if eds {
                let c = RegisteredControllerExtended {
                    cntlid: U16::new(cntlid),
                    rcsts,
                    rkey: U64::new(key),
                    hostid,
                    ..Default::default()
                };
                page.extend_from_slice(c.as_bytes());
            } else {
                let mut id = [0u8; 8];
                id.copy_from_slice(&hostid[..8]);
                let c = RegisteredController {
                    cntlid: U16::new(cntlid),
                    rcsts,
                    hostid: U64::new(u64::from_le_bytes(id)),
                    rkey: U64::new(key),
                    ..Default::default()
                };
                page.extend_from_slice(c.as_bytes());
            }
        }
        match super::log::to_host_padded(data, &page, f.bytes()) {
            Ok(()) => Done::ok(),
            Err(s) => Done::err(s),
        }
    }

    /// Adds a Reservation Notification log page of `kind` for `nsid` on every controller of
    /// `hosts` that `nsid` is attached to and whose mask lets it through, raising the
    /// Asynchronous Event where none is outstanding.
    fn notify(&mut self, nsid: u32, hosts: &[Host], kind: NotificationType) {
        if hosts.is_empty() {
            return;
        }
        let attached = self.namespace(nsid).map(|ns| ns.attached.clone()).unwrap_or_default();
        for c in std::iter::once(&mut self.controller).chain(&mut self.others) {
            if !hosts.contains(&host_of(c)) || !attached.contains(&c.cntlid) {
                continue;
            }
            if c.features.notification_mask(nsid).masks(kind) {
                continue;
            }
            if c.reservation_log.push(kind, nsid) {
                c.events.push(log_available_event());
            }
        }
    }

    /// Get Log Page 80h: the oldest unread Reservation Notification log page.
    pub(super) fn reservation_log_page(&mut self, rae: bool) -> Vec<u8> {
        let (page, raise) = self.controller.reservation_log.read(rae);
        if raise {
            self.controller.events.push(log_available_event());
        }
        page.as_bytes().to_vec()
    }

    /// Get Features 81h–83h, current value: CQE DW0, and for the Host Identifier its data.
    pub(super) fn reservation_feature_get(&self, fid: FeatureId, nsid: u32, data: &dyn DataPointer) -> Done {
        let f = &self.controller.features;
        match fid {
            FeatureId::HostIdentifier => {
                if let Err(s) = data.copy_to_host(&f.host_identifier[..HOST_IDENTIFIER_BYTES]) {
                    return Done::err(s);
                }
                Done::ok_with(HostIdentifierCdw11::new().with_exhid(f.host_identifier_extended).into_bits())
            }
            // Namespace specific: one namespace's value (FFFFFFFFh names none).
            FeatureId::ReservationNotificationMask if nsid != NSID_ALL => {
                Done::ok_with(f.notification_mask(nsid).into_bits())
            }
            FeatureId::ReservationPersistence if nsid != NSID_ALL => {
                let ptpl = self.namespace(nsid).is_some_and(|ns| ns.reservation.ptpl);
                Done::ok_with(ReservationPersistence::new().with_ptpl(ptpl).into_bits())
            }
            _ => Done::err(Status::INVALID_FIELD),
        }
    }

    /// Set Features 81h–83h.
    pub(super) fn reservation_feature_set(
        &mut self,
        fid: FeatureId,
        nsid: u32,
        cdw11: u32,
        data: &dyn DataPointer,
    ) -> Done {
        match fid {
            FeatureId::HostIdentifier => self.set_host_identifier(cdw11, data),
            FeatureId::ReservationNotificationMask => {
                let mask = ReservationNotificationMask::from_bits(cdw11 & 0b1110);
                let nsids = if nsid == NSID_ALL { self.active_nsids() } else { vec![nsid] };
                for n in nsids {
                    self.controller.features.notification_masks.insert(n, mask);
                }
                Done::ok()
            }
            FeatureId::ReservationPersistence => {
                let ptpl = ReservationPersistence::from_bits(cdw11).ptpl();
                if ptpl && !self.reservations().is_some_and(|m| m.ptpl) {
                    return Done::err(Status::INVALID_FIELD);
                }
                let nsids = if nsid == NSID_ALL { self.active_nsids() } else { vec![nsid] };
                for n in nsids {
                    if let Some(ns) = self.namespace_mut(n) {
                        ns.reservation.ptpl = ptpl;
                    }
                }
                Done::ok()
            }
            _ => Done::err(Status::INVALID_FIELD),
        }
    }

    /// Set Features Host Identifier (81h).
    fn set_host_identifier(&mut self, cdw11: u32, data: &dyn DataPointer) -> Done {
        let exhid = HostIdentifierCdw11::from_bits(cdw11).exhid();
        // 128-bit identifiers are NVMe 1.3 (EXHID); 1.2a has the 64-bit one only.
        if exhid && self.version() < Version::V1_3 {
            return Done::err(Status::INVALID_FIELD);
        }
        let bytes = match data.copy_from_host(HOST_IDENTIFIER_BYTES) {
            Ok(b) => b,
            Err(s) => return Done::err(s),
        };
        let mut id = [0u8; 16];
        let used = if exhid { 16 } else { 8 };
        id[..used].copy_from_slice(&bytes[..used]);
        // The identifier of a host that is a registrant cannot change.
        if self.host_registered_anywhere(self.issuing_host()) {
            return Done::err(Status::COMMAND_SEQUENCE_ERROR);
        }
        let cntlid = self.controller.cntlid;
        let other_size = self
            .others
            .iter()
            .filter(|c| c.cntlid != cntlid && c.features.host_identifier != [0u8; 16])
            .any(|c| c.features.host_identifier_extended != exhid);
        if id != [0u8; 16] && other_size {
            return Done::err(Status::HOST_IDENTIFIER_INCONSISTENT_FORMAT);
        }
        self.controller.features.host_identifier = id;
        self.controller.features.host_identifier_extended = exhid && id != [0u8; 16];
        Done::ok()
    }

    /// A power cut: namespaces whose PTPL state is clear lose their reservations and
    /// registrations.
    pub(super) fn reservations_power_cut(&mut self) {
        // Quirk `reservation-lost-despite-ptpl`: PTPL is not honoured (§8.8 broken).
        let lose_anyway = self.quirks.has(Quirk::ReservationLostDespitePtpl);
        for ns in self.namespaces.iter_mut().flatten() {
            ns.reservation.after_power_loss(lose_anyway);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_pages_count_and_rearm() {
        let mut log = NoticeLog::default();
        assert!(log.push(NotificationType::ReservationReleased, 1));
        assert!(!log.push(NotificationType::RegistrationPreempted, 2));
        let (first, raise) = log.read(false);
        assert_eq!((first.log_page_count.get(), first.rnlpt, first.nalp, first.nsid.get()), (1, 2, 1, 1));
        assert!(raise, "a page remains: the event is raised again");
        let (second, raise) = log.read(false);
        assert_eq!((second.log_page_count.get(), second.nalp), (2, 0));
        assert!(!raise);
        let (empty, _) = log.read(false);
        assert_eq!(empty.kind(), Some(NotificationType::Empty));
        for _ in 0..300 {
            log.push(NotificationType::ReservationPreempted, 1);
        }
        assert_eq!(log.pending(), NOTICE_LOG_PAGES);
    }

    #[test]
    fn standing_follows_the_holder_and_all_registrants() {
        let (a, b, c) = (Host::Controller(1), Host::Controller(2), Host::Controller(3));
        let mut s = ReservationState::default();
        s.registrants.push(Registrant { host: a, key: 1 });
        s.registrants.push(Registrant { host: b, key: 2 });
        s.reservation = Some(Reservation { holder: a, rtype: ReservationType::WriteExclusive });
        assert_eq!(
            (s.standing(a), s.standing(b), s.standing(c)),
            (Standing::Holder, Standing::Registrant, Standing::NonRegistrant)
        );
        s.reservation = Some(Reservation { holder: a, rtype: ReservationType::ExclusiveAccessAllRegistrants });
        assert_eq!(s.standing(b), Standing::Holder);
        s.ptpl = false;
        s.after_power_loss(false);
        assert!(s.registrants.is_empty() && s.reservation.is_none());
    }
}
