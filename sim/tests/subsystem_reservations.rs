//! Reservations on the dual-port enterprise-1.4 drive (NVMe 1.4 §8.8 "Reservations",
//! §6.10–6.13): two hosts, one behind each port (controllers 1 and 2, Host Identifiers
//! 1111h and 2222h), share namespace 1. Each test reads as the rule it checks; the
//! quirks at the end each break one rule, shown against the clean drive.

use nvme::device::{Data, Device};
use nvme::driver::{Controller, Options};
use nvme::spec::features::{self, FeatureId, Select};
use nvme::spec::identify::{Cns, IdentifyController, IdentifyNamespace};
use nvme::spec::log::LogPageId;
use nvme::spec::reservation::{
    self, AcquireAction, ChangePtpl, NotificationType, RegisterAction, ReleaseAction, ReservationNotificationLog,
    ReservationNotificationMask, ReservationPersistence, ReservationStatus, ReservationType,
};
use nvme::spec::{nvm, Command, Status};
use nvme_sim::exec::{CommandSet, Done};
use nvme_sim::profile::{InitialNamespace, Profile, Quirk};
use nvme_sim::subsystem::testing::TestHost;
use nvme_sim::subsystem::Subsystem;
use zerocopy::{FromBytes, IntoBytes};

const NSID: u32 = 1;
/// The reservation keys of host A (controller 1) and host B (controller 2).
const KEY_A: u64 = 0xA0A0;
const KEY_B: u64 = 0xB0B0;

/// enterprise-1.4 scaled to 1 GiB with one shared namespace of 4096 blocks of 512 bytes.
fn profile(quirk: Option<Quirk>) -> Profile {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.capacity_bytes = 1 << 30;
    p.namespaces = vec![InitialNamespace { lbads: 512, ms: 0, extended: false, blocks: 4096, attached: true }];
    if let Some(q) = quirk {
        p = p.with_quirk(q);
    }
    p
}

/// The drive and a host on each port, with Host Identifiers 1111h and 2222h.
fn drive(quirk: Option<Quirk>) -> (Subsystem, TestHost, TestHost) {
    let mut sub = Subsystem::new(profile(quirk)).unwrap();
    let (mut a, mut b) = (TestHost::new(1), TestHost::new(2));
    assert_eq!(set_host_id(&mut sub, &mut a, &0x1111u64.to_le_bytes(), false), Status::SUCCESS);
    assert_eq!(set_host_id(&mut sub, &mut b, &0x2222u64.to_le_bytes(), false), Status::SUCCESS);
    (sub, a, b)
}

fn set_host_id(sub: &mut Subsystem, host: &mut TestHost, id: &[u8], exhid: bool) -> Status {
    let mut bytes = [0u8; 16];
    bytes[..id.len()].copy_from_slice(id);
    host.put(&bytes);
    st(host.admin(sub, &features::set_features(FeatureId::HostIdentifier, false, 0, exhid as u32)))
}

fn register(sub: &mut Subsystem, host: &mut TestHost, rrega: RegisterAction, crkey: u64, nrkey: u64) -> Status {
    register_with(sub, host, rrega, false, ChangePtpl::NoChange, crkey, nrkey)
}

fn register_with(
    sub: &mut Subsystem,
    host: &mut TestHost,
    rrega: RegisterAction,
    iekey: bool,
    cptpl: ChangePtpl,
    crkey: u64,
    nrkey: u64,
) -> Status {
    let (cmd, data) = reservation::register(NSID, rrega, iekey, cptpl, crkey, nrkey);
    host.put(data.as_bytes());
    st(host.io(sub, &cmd))
}

fn acquire(
    sub: &mut Subsystem,
    host: &mut TestHost,
    racqa: AcquireAction,
    rtype: u8,
    crkey: u64,
    prkey: u64,
) -> Status {
    let (cmd, data) = reservation::acquire(NSID, racqa, false, rtype, crkey, prkey);
    host.put(data.as_bytes());
    st(host.io(sub, &cmd))
}

fn release(sub: &mut Subsystem, host: &mut TestHost, rrela: ReleaseAction, rtype: u8, crkey: u64) -> Status {
    let (cmd, data) = reservation::release(NSID, rrela, false, rtype, crkey);
    host.put(data.as_bytes());
    st(host.io(sub, &cmd))
}

fn report_raw(sub: &mut Subsystem, host: &mut TestHost, eds: bool) -> (Done, Vec<u8>) {
    host.poison(0xA5);
    let done = host.io(sub, &reservation::report(NSID, 4096, eds).unwrap());
    (done, host.get(4096))
}

fn report(sub: &mut Subsystem, host: &mut TestHost, eds: bool) -> ReservationStatus {
    let (done, bytes) = report_raw(sub, host, eds);
    assert_eq!(st(done), Status::SUCCESS);
    ReservationStatus::parse(&bytes, eds).unwrap()
}

/// Register `host` with `key` and acquire a reservation of `rtype`.
fn hold(sub: &mut Subsystem, host: &mut TestHost, key: u64, rtype: ReservationType) {
    assert_eq!(register(sub, host, RegisterAction::Register, 0, key), Status::SUCCESS);
    assert_eq!(acquire(sub, host, AcquireAction::Acquire, rtype as u8, key, 0), Status::SUCCESS);
}

fn read(sub: &mut Subsystem, host: &mut TestHost) -> Status {
    st(host.read(sub, NSID, 0, 0, 512).0)
}

fn write(sub: &mut Subsystem, host: &mut TestHost) -> Status {
    st(host.write(sub, NSID, 0, 0, &[0x5A; 512]))
}

fn io(sub: &mut Subsystem, host: &mut TestHost, cmd: Command) -> Status {
    st(host.io(sub, &cmd))
}

/// The next Reservation Notification log page of a controller (read without RAE).
fn notice(sub: &mut Subsystem, host: &mut TestHost) -> ReservationNotificationLog {
    let (done, bytes) = host.log_page(sub, LogPageId::ReservationNotification as u8, 0, 64, false);
    assert_eq!(st(done), Status::SUCCESS);
    ReservationNotificationLog::read_from_bytes(&bytes).unwrap()
}

/// The Asynchronous Events raised for a controller by other controllers' commands.
fn events(sub: &mut Subsystem, cntlid: u16) -> Vec<(u8, u8, u8)> {
    sub.take_events(cntlid).iter().map(|e| (e.event_type, e.info, e.log_page)).collect()
}

/// A completion's status code, without DNR, More and CRD.
fn st(done: Done) -> Status {
    Status { dnr: false, more: false, crd: 0, ..done.status }
}

/// Type 110b (I/O Command Specific), information 00h (Reservation Log Page Available), log 80h.
const RESERVATION_EVENT: (u8, u8, u8) = (6, 0, 0x80);

// ---------------------------------------------------------------------------------------
// What the drive advertises
// ---------------------------------------------------------------------------------------

#[test]
fn oncs_and_rescap_advertise_reservations_truthfully() {
    let (mut sub, mut a, _) = drive(None);
    let id: IdentifyController = a.identify_controller(&mut sub);
    assert!(id.oncs.reservations(), "ONCS bit 5");
    let (_, ns): (Done, IdentifyNamespace) = a.identify_namespace(&mut sub, NSID);
    assert_eq!(ns.rescap.into_bits(), 0xFF, "all six types, PTPL, IEKEY as 1.3 defines it");
    // 1.2a: RESCAP bit 7 is reserved.
    let mut old = Subsystem::builtin("enterprise-1.2a").unwrap();
    let (_, ns) = TestHost::new(1).identify_namespace(&mut old, NSID);
    assert_eq!(ns.rescap.into_bits(), 0x7F);
    let _ = Cns::Namespace;
}

#[test]
fn a_drive_without_reservations_refuses_the_commands_and_features() {
    let mut p = profile(None);
    p.reservations = None;
    let mut sub = Subsystem::new(p).unwrap();
    let mut a = TestHost::new(1);
    assert!(!a.identify_controller(&mut sub).oncs.reservations());
    assert_eq!(a.identify_namespace(&mut sub, NSID).1.rescap.into_bits(), 0);
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Register, 0, 1), Status::INVALID_COMMAND_OPCODE);
    assert_eq!(st(report_raw(&mut sub, &mut a, false).0), Status::INVALID_COMMAND_OPCODE);
    assert_eq!(set_host_id(&mut sub, &mut a, &[1], false), Status::INVALID_FIELD);
    let get = features::get_features(FeatureId::ReservationPersistence, Select::Current, NSID, 0);
    assert_eq!(st(a.admin(&mut sub, &get)), Status::INVALID_FIELD);
}

// ---------------------------------------------------------------------------------------
// Command Behavior in the Presence of a Reservation (§8.8)
// ---------------------------------------------------------------------------------------

#[test]
fn every_type_gives_holder_registrant_and_non_registrant_the_access_the_table_says() {
    // (type, non-registrant read, non-registrant write, registrant read, registrant write)
    let c = Status::RESERVATION_CONFLICT;
    let ok = Status::SUCCESS;
    let table = [
        (ReservationType::WriteExclusive, ok, c, ok, c),
        (ReservationType::ExclusiveAccess, c, c, c, c),
        (ReservationType::WriteExclusiveRegistrantsOnly, ok, c, ok, ok),
        (ReservationType::ExclusiveAccessRegistrantsOnly, c, c, ok, ok),
        (ReservationType::WriteExclusiveAllRegistrants, ok, c, ok, ok),
        (ReservationType::ExclusiveAccessAllRegistrants, c, c, ok, ok),
    ];
    for (rtype, non_read, non_write, reg_read, reg_write) in table {
        let (mut sub, mut a, mut b) = drive(None);
        hold(&mut sub, &mut a, KEY_A, rtype);
        assert_eq!(read(&mut sub, &mut a), ok, "holder read, {}", rtype.name());
        assert_eq!(write(&mut sub, &mut a), ok, "holder write, {}", rtype.name());
        assert_eq!(read(&mut sub, &mut b), non_read, "non-registrant read, {}", rtype.name());
        assert_eq!(write(&mut sub, &mut b), non_write, "non-registrant write, {}", rtype.name());
        // The other Write and Read Command Group commands follow the same row.
        assert_eq!(io(&mut sub, &mut b, nvm::write_zeroes(NSID, 0, 0, false)), non_write, "{}", rtype.name());
        assert_eq!(register(&mut sub, &mut b, RegisterAction::Register, 0, KEY_B), ok);
        assert_eq!(read(&mut sub, &mut b), reg_read, "registrant read, {}", rtype.name());
        assert_eq!(write(&mut sub, &mut b), reg_write, "registrant write, {}", rtype.name());
        // Flush is in neither command group.
        assert_eq!(io(&mut sub, &mut b, Command::nvm(nvme::spec::NvmOpcode::Flush, NSID)), ok);
    }
}

#[test]
fn controllers_with_the_same_host_identifier_share_the_registration() {
    let (mut sub, mut a, mut b) = drive(None);
    assert_eq!(set_host_id(&mut sub, &mut b, &0x1111u64.to_le_bytes(), false), Status::SUCCESS);
    hold(&mut sub, &mut a, KEY_A, ReservationType::ExclusiveAccess);
    // Controller 2 belongs to the holding host: it reads and writes.
    assert_eq!(write(&mut sub, &mut b), Status::SUCCESS);
    let status = report(&mut sub, &mut b, false);
    assert_eq!(status.regctl, 2, "both controllers of the registered host are listed");
    assert!(status.controllers.iter().all(|c| c.holds && c.rkey == KEY_A));
}

// ---------------------------------------------------------------------------------------
// Register, Acquire, Release (§6.10–6.12)
// ---------------------------------------------------------------------------------------

#[test]
fn register_replace_and_unregister_check_the_current_key() {
    let (mut sub, mut a, _) = drive(None);
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Register, 0, KEY_A), Status::SUCCESS);
    // The same key again changes nothing; another key is a conflict.
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Register, 0, KEY_A), Status::SUCCESS);
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Register, 0, 7), Status::RESERVATION_CONFLICT);
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Replace, 1, 7), Status::RESERVATION_CONFLICT);
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Replace, KEY_A, 7), Status::SUCCESS);
    // IEKEY: the current key is not checked.
    let replaced = register_with(&mut sub, &mut a, RegisterAction::Replace, true, ChangePtpl::NoChange, 99, 8);
    assert_eq!(replaced, Status::SUCCESS);
    assert_eq!(report(&mut sub, &mut a, false).controllers[0].rkey, 8);
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Unregister, 7, 0), Status::RESERVATION_CONFLICT);
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Unregister, 8, 0), Status::SUCCESS);
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Unregister, 8, 0), Status::RESERVATION_CONFLICT);
    // Reserved actions and CPTPL 01b are invalid fields.
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Reserved(3), 0, 1), Status::INVALID_FIELD);
    let reserved = register_with(&mut sub, &mut a, RegisterAction::Register, false, ChangePtpl::Reserved, 0, 1);
    assert_eq!(reserved, Status::INVALID_FIELD);
    let status = report(&mut sub, &mut a, false);
    assert_eq!((status.gen, status.regctl), (5, 0), "GEN counts the five successful Registers");
}

#[test]
fn acquire_needs_a_registration_and_conflicts_with_another_hosts_reservation() {
    let (mut sub, mut a, mut b) = drive(None);
    let we = ReservationType::WriteExclusive as u8;
    assert_eq!(acquire(&mut sub, &mut a, AcquireAction::Acquire, we, KEY_A, 0), Status::RESERVATION_CONFLICT);
    hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusive);
    // Again with the same type: no change. Another type: conflict.
    assert_eq!(acquire(&mut sub, &mut a, AcquireAction::Acquire, we, KEY_A, 0), Status::SUCCESS);
    assert_eq!(acquire(&mut sub, &mut a, AcquireAction::Acquire, 2, KEY_A, 0), Status::RESERVATION_CONFLICT);
    assert_eq!(register(&mut sub, &mut b, RegisterAction::Register, 0, KEY_B), Status::SUCCESS);
    assert_eq!(acquire(&mut sub, &mut b, AcquireAction::Acquire, we, KEY_B, 0), Status::RESERVATION_CONFLICT);
    assert_eq!(acquire(&mut sub, &mut b, AcquireAction::Acquire, we, KEY_A, 0), Status::RESERVATION_CONFLICT);
    // RTYPE 0h and 7h are invalid; IEKEY in Acquire is refused from 1.3 on.
    assert_eq!(acquire(&mut sub, &mut b, AcquireAction::Acquire, 0, KEY_B, 0), Status::INVALID_FIELD);
    assert_eq!(acquire(&mut sub, &mut b, AcquireAction::Acquire, 7, KEY_B, 0), Status::INVALID_FIELD);
    let (cmd, data) = reservation::acquire(NSID, AcquireAction::Acquire, true, we, KEY_B, 0);
    b.put(data.as_bytes());
    assert_eq!(st(b.io(&mut sub, &cmd)), Status::INVALID_FIELD);
    let status = report(&mut sub, &mut b, false);
    assert_eq!((status.rtype, status.gen), (we, 2), "Acquire does not count in GEN");
}

#[test]
fn unregistering_the_holder_releases_the_reservation() {
    let (mut sub, mut a, mut b) = drive(None);
    hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusiveRegistrantsOnly);
    assert_eq!(register(&mut sub, &mut b, RegisterAction::Register, 0, KEY_B), Status::SUCCESS);
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Unregister, KEY_A, 0), Status::SUCCESS);
    assert_eq!(report(&mut sub, &mut b, false).rtype, 0, "no reservation");
    // A Registrants Only reservation's other registrants are told it was released.
    assert_eq!(notice(&mut sub, &mut b).kind(), Some(NotificationType::ReservationReleased));
}

#[test]
fn release_by_the_holder_ends_the_reservation_and_by_a_non_holder_changes_nothing() {
    let (mut sub, mut a, mut b) = drive(None);
    let ro = ReservationType::ExclusiveAccessRegistrantsOnly;
    hold(&mut sub, &mut a, KEY_A, ro);
    assert_eq!(register(&mut sub, &mut b, RegisterAction::Register, 0, KEY_B), Status::SUCCESS);
    // A registrant that does not hold it: success, no effect.
    assert_eq!(release(&mut sub, &mut b, ReleaseAction::Release, ro as u8, KEY_B), Status::SUCCESS);
    assert_eq!(report(&mut sub, &mut a, false).rtype, ro as u8);
    // The wrong key: conflict. The holder with the wrong type: invalid field.
    assert_eq!(release(&mut sub, &mut a, ReleaseAction::Release, ro as u8, KEY_B), Status::RESERVATION_CONFLICT);
    assert_eq!(release(&mut sub, &mut a, ReleaseAction::Release, 1, KEY_A), Status::INVALID_FIELD);
    assert_eq!(release(&mut sub, &mut a, ReleaseAction::Release, ro as u8, KEY_A), Status::SUCCESS);
    let status = report(&mut sub, &mut a, false);
    assert_eq!((status.rtype, status.regctl), (0, 2), "released; both still registered");
    assert_eq!(events(&mut sub, 2), [RESERVATION_EVENT]);
    let page = notice(&mut sub, &mut b);
    assert_eq!(
        (page.kind(), page.nsid.get(), page.log_page_count.get()),
        (Some(NotificationType::ReservationReleased), NSID, 1)
    );
    assert_eq!(notice(&mut sub, &mut a).kind(), Some(NotificationType::Empty), "the releasing host is not told");
}

#[test]
fn preempt_removes_the_holders_registration_and_takes_the_reservation() {
    for racqa in [AcquireAction::Preempt, AcquireAction::PreemptAndAbort] {
        let (mut sub, mut a, mut b) = drive(None);
        hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusive);
        assert_eq!(register(&mut sub, &mut b, RegisterAction::Register, 0, KEY_B), Status::SUCCESS);
        let gen = report(&mut sub, &mut b, false).gen;
        let ea = ReservationType::ExclusiveAccess as u8;
        // PRKEY matching nobody: conflict; PRKEY 0 while a holder exists: invalid field.
        assert_eq!(acquire(&mut sub, &mut b, racqa, ea, KEY_B, 0x77), Status::RESERVATION_CONFLICT);
        assert_eq!(acquire(&mut sub, &mut b, racqa, ea, KEY_B, 0), Status::INVALID_FIELD);
        assert_eq!(acquire(&mut sub, &mut b, racqa, ea, KEY_B, KEY_A), Status::SUCCESS);
        let status = report(&mut sub, &mut b, false);
        assert_eq!((status.rtype, status.regctl, status.gen), (ea, 1, gen + 1));
        assert_eq!((status.controllers[0].cntlid, status.controllers[0].holds), (2, true));
        // Host A lost its registration and is told so, with the event.
        assert_eq!(write(&mut sub, &mut a), Status::RESERVATION_CONFLICT);
        assert_eq!(events(&mut sub, 1), [RESERVATION_EVENT]);
        assert_eq!(notice(&mut sub, &mut a).kind(), Some(NotificationType::RegistrationPreempted));
    }
}

#[test]
fn preempt_of_an_all_registrants_reservation_with_key_zero_removes_every_other_registrant() {
    let (mut sub, mut a, mut b) = drive(None);
    hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusiveAllRegistrants);
    assert_eq!(register(&mut sub, &mut b, RegisterAction::Register, 0, KEY_B), Status::SUCCESS);
    let we = ReservationType::WriteExclusive as u8;
    assert_eq!(acquire(&mut sub, &mut b, AcquireAction::Preempt, we, KEY_B, 0), Status::SUCCESS);
    let status = report(&mut sub, &mut a, false);
    assert_eq!((status.rtype, status.regctl), (we, 1));
    assert_eq!(notice(&mut sub, &mut a).kind(), Some(NotificationType::RegistrationPreempted));
}

#[test]
fn clear_releases_the_reservation_and_every_registration() {
    let (mut sub, mut a, mut b) = drive(None);
    hold(&mut sub, &mut a, KEY_A, ReservationType::ExclusiveAccess);
    assert_eq!(register(&mut sub, &mut b, RegisterAction::Register, 0, KEY_B), Status::SUCCESS);
    assert_eq!(release(&mut sub, &mut b, ReleaseAction::Clear, 0, KEY_A), Status::RESERVATION_CONFLICT);
    assert_eq!(release(&mut sub, &mut b, ReleaseAction::Clear, 0, KEY_B), Status::SUCCESS);
    let status = report(&mut sub, &mut a, false);
    assert_eq!((status.rtype, status.regctl, status.gen), (0, 0, 3));
    assert_eq!(write(&mut sub, &mut b), Status::SUCCESS);
    assert_eq!(notice(&mut sub, &mut a).kind(), Some(NotificationType::ReservationReleased));
    assert_eq!(notice(&mut sub, &mut b).kind(), Some(NotificationType::Empty));
}

// ---------------------------------------------------------------------------------------
// Report (§6.13) and the Host Identifier
// ---------------------------------------------------------------------------------------

#[test]
fn report_lists_registered_controllers_with_their_host_identifiers_and_keys() {
    let (mut sub, mut a, mut b) = drive(None);
    hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusiveRegistrantsOnly);
    assert_eq!(register(&mut sub, &mut b, RegisterAction::Register, 0, KEY_B), Status::SUCCESS);
    let status = report(&mut sub, &mut a, false);
    assert_eq!((status.gen, status.rtype, status.regctl, status.ptpls), (2, 3, 2, false));
    let rows: Vec<(u16, bool, u8, u64)> =
        status.controllers.iter().map(|c| (c.cntlid, c.holds, c.hostid[1], c.rkey)).collect();
    assert_eq!(rows, [(1, true, 0x11, KEY_A), (2, false, 0x22, KEY_B)]);
    // A transfer shorter than the structure carries what fits; REGCTL counts them all.
    let cmd = reservation::report(NSID, 32, false).unwrap();
    a.poison(0xA5);
    assert_eq!(st(a.io(&mut sub, &cmd)), Status::SUCCESS);
    let cut = ReservationStatus::parse(&a.get(32), false).unwrap();
    assert_eq!((cut.regctl, cut.controllers.len()), (2, 0));
}

#[test]
fn extended_host_identifiers_need_the_extended_report() {
    let mut sub = Subsystem::new(profile(None)).unwrap();
    let (mut a, mut b) = (TestHost::new(1), TestHost::new(2));
    let id_a: [u8; 16] = std::array::from_fn(|i| 0x10 + i as u8);
    assert_eq!(set_host_id(&mut sub, &mut a, &id_a, true), Status::SUCCESS);
    // Controller 2 cannot use a 64-bit identifier beside a 128-bit one.
    assert_eq!(set_host_id(&mut sub, &mut b, &[0x22; 8], false), Status::HOST_IDENTIFIER_INCONSISTENT_FORMAT);
    hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusive);
    assert_eq!(st(report_raw(&mut sub, &mut a, false).0), Status::HOST_IDENTIFIER_INCONSISTENT_FORMAT);
    let status = report(&mut sub, &mut a, true);
    assert_eq!(status.controllers.len(), 1);
    assert_eq!((status.controllers[0].hostid, status.controllers[0].rkey), (id_a, KEY_A));
    // Get Features returns the identifier and EXHID.
    a.poison(0);
    let got = a.admin(&mut sub, &features::get_features(FeatureId::HostIdentifier, Select::Current, 0, 0));
    assert_eq!((st(got), got.dw0), (Status::SUCCESS, 1));
    assert_eq!(a.get(16), id_a);
}

#[test]
fn the_host_identifier_cannot_change_while_its_host_is_registered() {
    let (mut sub, mut a, _) = drive(None);
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Register, 0, KEY_A), Status::SUCCESS);
    assert_eq!(set_host_id(&mut sub, &mut a, &[9; 8], false), Status::COMMAND_SEQUENCE_ERROR);
    assert_eq!(register(&mut sub, &mut a, RegisterAction::Unregister, KEY_A, 0), Status::SUCCESS);
    assert_eq!(set_host_id(&mut sub, &mut a, &[9; 8], false), Status::SUCCESS);
}

// ---------------------------------------------------------------------------------------
// Persist Through Power Loss, resets, notification mask
// ---------------------------------------------------------------------------------------

fn power_cycle(sub: &mut Subsystem) {
    CommandSet::power_cut(sub, 7);
    CommandSet::power_on(sub);
}

/// After a power cycle the hosts set their identifiers again.
fn reconnect(sub: &mut Subsystem, a: &mut TestHost, b: &mut TestHost) {
    assert_eq!(set_host_id(sub, a, &0x1111u64.to_le_bytes(), false), Status::SUCCESS);
    assert_eq!(set_host_id(sub, b, &0x2222u64.to_le_bytes(), false), Status::SUCCESS);
}

#[test]
fn reservations_survive_a_power_cut_only_with_ptpl_set() {
    // PTPL clear (the default): gone.
    let (mut sub, mut a, mut b) = drive(None);
    hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusive);
    power_cycle(&mut sub);
    reconnect(&mut sub, &mut a, &mut b);
    let status = report(&mut sub, &mut a, false);
    assert_eq!((status.rtype, status.regctl, status.gen), (0, 0, 0));
    assert_eq!(write(&mut sub, &mut b), Status::SUCCESS);

    // CPTPL 11b on Register: kept, with the PTPL state.
    let (mut sub, mut a, mut b) = drive(None);
    let reg = register_with(&mut sub, &mut a, RegisterAction::Register, false, ChangePtpl::Set, 0, KEY_A);
    assert_eq!(reg, Status::SUCCESS);
    assert_eq!(acquire(&mut sub, &mut a, AcquireAction::Acquire, 1, KEY_A, 0), Status::SUCCESS);
    power_cycle(&mut sub);
    reconnect(&mut sub, &mut a, &mut b);
    let status = report(&mut sub, &mut a, false);
    assert_eq!((status.rtype, status.regctl, status.ptpls), (1, 1, true));
    assert_eq!(write(&mut sub, &mut b), Status::RESERVATION_CONFLICT);

    // Feature 83h sets it too, and reads it back.
    let (mut sub, mut a, mut b) = drive(None);
    let set = features::set_features(FeatureId::ReservationPersistence, false, NSID, 1);
    assert_eq!(st(a.admin(&mut sub, &set)), Status::SUCCESS);
    let get = features::get_features(FeatureId::ReservationPersistence, Select::Current, NSID, 0);
    assert!(ReservationPersistence::from_bits(a.admin(&mut sub, &get).dw0).ptpl());
    hold(&mut sub, &mut a, KEY_A, ReservationType::ExclusiveAccess);
    power_cycle(&mut sub);
    reconnect(&mut sub, &mut a, &mut b);
    assert_eq!(read(&mut sub, &mut b), Status::RESERVATION_CONFLICT);
    assert_eq!(read(&mut sub, &mut a), Status::SUCCESS);
}

#[test]
fn a_controller_reset_keeps_reservations() {
    let (mut sub, mut a, mut b) = drive(None);
    hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusive);
    CommandSet::controller_enabled(&mut sub, 1);
    CommandSet::controller_enabled(&mut sub, 2);
    assert_eq!(write(&mut sub, &mut b), Status::RESERVATION_CONFLICT);
    assert_eq!(write(&mut sub, &mut a), Status::SUCCESS);
}

#[test]
fn the_notification_mask_suppresses_the_page_and_the_event() {
    let (mut sub, mut a, mut b) = drive(None);
    let mask = ReservationNotificationMask::new().with_regpre(true);
    let set = features::set_features(FeatureId::ReservationNotificationMask, false, NSID, mask.into_bits());
    assert_eq!(st(a.admin(&mut sub, &set)), Status::SUCCESS);
    let get = features::get_features(FeatureId::ReservationNotificationMask, Select::Current, NSID, 0);
    assert_eq!(a.admin(&mut sub, &get).dw0, mask.into_bits());
    hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusive);
    assert_eq!(register(&mut sub, &mut b, RegisterAction::Register, 0, KEY_B), Status::SUCCESS);
    assert_eq!(acquire(&mut sub, &mut b, AcquireAction::Preempt, 1, KEY_B, KEY_A), Status::SUCCESS);
    assert!(events(&mut sub, 1).is_empty());
    assert_eq!(notice(&mut sub, &mut a).kind(), Some(NotificationType::Empty));
}

// ---------------------------------------------------------------------------------------
// Through the host driver, on both ports
// ---------------------------------------------------------------------------------------

#[test]
fn the_preempted_port_gets_the_reservation_log_event_through_its_driver() {
    let transports = nvme_sim::open_ports(profile(None)).unwrap();
    let mut ports: Vec<Controller> = transports
        .into_iter()
        .map(|t| Controller::new(Box::new(t), Options { io_queues: 1, ..Options::default() }).unwrap())
        .collect();
    let mut b = ports.pop().unwrap();
    let mut a = ports.pop().unwrap();
    for (ctrl, id) in [(&mut a, 0x1111u64), (&mut b, 0x2222)] {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&id.to_le_bytes());
        let c = ctrl.admin(features::set_features(FeatureId::HostIdentifier, false, 0, 0), Data::ToDevice(&bytes));
        assert!(c.unwrap().status().is_success());
    }
    let send = |ctrl: &mut Controller, (cmd, data): (Command, Vec<u8>)| {
        ctrl.io(1, cmd, Data::ToDevice(&data), Data::None).unwrap().status()
    };
    let reg = |key| {
        let (c, d) = reservation::register(NSID, RegisterAction::Register, false, ChangePtpl::NoChange, 0, key);
        (c, d.as_bytes().to_vec())
    };
    assert!(send(&mut a, reg(KEY_A)).is_success());
    let (c, d) = reservation::acquire(NSID, AcquireAction::Acquire, false, 1, KEY_A, 0);
    assert!(send(&mut a, (c, d.as_bytes().to_vec())).is_success());
    assert!(send(&mut b, reg(KEY_B)).is_success());
    a.arm_async_events(1).unwrap();
    let (c, d) = reservation::acquire(NSID, AcquireAction::Preempt, false, 1, KEY_B, KEY_A);
    assert!(send(&mut b, (c, d.as_bytes().to_vec())).is_success());
    a.transport_mut().now_ns();
    let dw0: Vec<u32> = a.take_async_events().unwrap().iter().map(|c| c.dw0).collect();
    assert_eq!(dw0, [0x80_00_06], "log 80h, information 00h, type 110b");
    let mut page = [0u8; 64];
    let cmd = nvme::spec::log::get_log_page(LogPageId::ReservationNotification, 0, 64, 0, false).unwrap();
    assert!(a.admin(cmd, Data::FromDevice(&mut page)).unwrap().status().is_success());
    let page = ReservationNotificationLog::read_from_bytes(&page).unwrap();
    assert_eq!(page.kind(), Some(NotificationType::RegistrationPreempted));
    let data = vec![0u8; 512];
    let c = a.io(1, nvm::write(NSID, 0, 0, false), Data::ToDevice(&data), Data::None).unwrap();
    assert!(c.status().same_code(&Status::RESERVATION_CONFLICT));
}

// ---------------------------------------------------------------------------------------
// Quirks: each breaks one rule
// ---------------------------------------------------------------------------------------

#[test]
fn reservation_not_enforced_lets_a_non_registrant_write() {
    for (quirk, expected) in
        [(None, Status::RESERVATION_CONFLICT), (Some(Quirk::ReservationNotEnforced), Status::SUCCESS)]
    {
        let (mut sub, mut a, mut b) = drive(quirk);
        hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusive);
        assert_eq!(write(&mut sub, &mut b), expected, "{quirk:?}");
    }
}

#[test]
fn registrants_only_lets_anyone_read_lets_a_non_registrant_read() {
    let quirky = Some(Quirk::RegistrantsOnlyLetsAnyoneRead);
    for (quirk, expected) in [(None, Status::RESERVATION_CONFLICT), (quirky, Status::SUCCESS)] {
        let (mut sub, mut a, mut b) = drive(quirk);
        hold(&mut sub, &mut a, KEY_A, ReservationType::ExclusiveAccessRegistrantsOnly);
        assert_eq!(read(&mut sub, &mut b), expected, "{quirk:?}");
        assert_eq!(write(&mut sub, &mut b), Status::RESERVATION_CONFLICT, "writes stay refused");
    }
}

#[test]
fn reservation_lost_despite_ptpl_drops_registrations_at_a_power_cut() {
    for (quirk, regctl) in [(None, 1), (Some(Quirk::ReservationLostDespitePtpl), 0)] {
        let (mut sub, mut a, mut b) = drive(quirk);
        let reg = register_with(&mut sub, &mut a, RegisterAction::Register, false, ChangePtpl::Set, 0, KEY_A);
        assert_eq!(reg, Status::SUCCESS);
        power_cycle(&mut sub);
        reconnect(&mut sub, &mut a, &mut b);
        assert_eq!(report(&mut sub, &mut a, false).regctl, regctl, "{quirk:?}");
    }
}

#[test]
fn reservation_log_not_raised_leaves_a_preempted_host_untold() {
    for quirk in [None, Some(Quirk::ReservationLogNotRaised)] {
        let (mut sub, mut a, mut b) = drive(quirk);
        hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusive);
        assert_eq!(register(&mut sub, &mut b, RegisterAction::Register, 0, KEY_B), Status::SUCCESS);
        assert_eq!(acquire(&mut sub, &mut b, AcquireAction::Preempt, 1, KEY_B, KEY_A), Status::SUCCESS);
        let (raised, kind) = (events(&mut sub, 1), notice(&mut sub, &mut a).kind());
        if quirk.is_none() {
            assert_eq!((raised, kind), (vec![RESERVATION_EVENT], Some(NotificationType::RegistrationPreempted)));
        } else {
            assert_eq!((raised, kind), (vec![], Some(NotificationType::Empty)));
        }
    }
}

#[test]
fn release_by_non_holder_releases_takes_away_the_holders_reservation() {
    for (quirk, rtype_after) in [(None, 1), (Some(Quirk::ReleaseByNonHolderReleases), 0)] {
        let (mut sub, mut a, mut b) = drive(quirk);
        hold(&mut sub, &mut a, KEY_A, ReservationType::WriteExclusive);
        assert_eq!(register(&mut sub, &mut b, RegisterAction::Register, 0, KEY_B), Status::SUCCESS);
        assert_eq!(release(&mut sub, &mut b, ReleaseAction::Release, 1, KEY_B), Status::SUCCESS);
        assert_eq!(report(&mut sub, &mut a, false).rtype, rtype_after, "{quirk:?}");
    }
}
