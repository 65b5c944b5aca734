//! A drive with several ports (NVMe 1.4 §2.4.1 "Multi-Path I/O and Namespace Sharing"):
//! enterprise-1.4 is dual port, one controller behind each, driven here by nvtest's own
//! host driver through both at once ([`nvme_sim::open_ports`]). They report one NVM
//! subsystem with two controllers, share the namespaces' data, keep their own features
//! and notices, and refuse to share a private namespace. The four quirks of multi-port
//! drives each break one of those rules; every test runs the clean drive too.

use nvme::device::{Data, Device};
use nvme::driver::{Controller, Options};
use nvme::spec::features::{self, Arbitration, AsyncEventConfiguration, FeatureId, Select};
use nvme::spec::identify::{
    self, Cns, ControllerList, Dps, Flbas, IdentifyController, IdentifyNamespace, NamespaceList, Nmic,
};
use nvme::spec::log::{self, ChangedNamespaceList, LogPageId};
use nvme::spec::namespace::{self, FormatNvm};
use nvme::spec::nvm;
use nvme::spec::{Completion, Status};
use nvme_sim::profile::{InitialNamespace, Profile, Quirk};
use zerocopy::{FromBytes, IntoBytes};

/// enterprise-1.4 (two ports) scaled to 1 GiB with one shared namespace of 4096 blocks
/// of 4096 bytes, with `quirk`.
fn profile(quirk: Option<Quirk>) -> Profile {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.capacity_bytes = 1 << 30;
    p.namespaces = vec![InitialNamespace { lbads: 4096, ms: 0, extended: false, blocks: 4096, attached: true }];
    if let Some(quirk) = quirk {
        p = p.with_quirk(quirk);
    }
    p
}

/// The host driver on each port, port 1 (CNTLID 1) first.
fn ports(quirk: Option<Quirk>) -> Vec<Controller> {
    let transports = nvme_sim::open_ports(profile(quirk)).unwrap();
    assert_eq!(transports.len(), 2, "enterprise-1.4 is dual port");
    transports
        .into_iter()
        .map(|t| Controller::new(Box::new(t), Options { io_queues: 1, ..Options::default() }).unwrap())
        .collect()
}

fn two_ports(quirk: Option<Quirk>) -> (Controller, Controller) {
    let mut v = ports(quirk);
    let second = v.pop().unwrap();
    (v.pop().unwrap(), second)
}

#[track_caller]
fn assert_status(c: &Completion, expected: Status) {
    assert!(c.status().same_code(&expected), "expected {expected}, got {}", c.status());
}

fn identify_controller(ctrl: &mut Controller) -> IdentifyController {
    let mut bytes = vec![0u8; 4096];
    let c = ctrl.admin(identify::identify(Cns::Controller, 0, 0), Data::FromDevice(&mut bytes)).unwrap();
    assert_status(&c, Status::SUCCESS);
    IdentifyController::read_from_bytes(&bytes).unwrap()
}

fn identify_namespace(ctrl: &mut Controller, nsid: u32) -> IdentifyNamespace {
    let mut bytes = vec![0u8; 4096];
    let c = ctrl.admin(identify::identify(Cns::Namespace, nsid, 0), Data::FromDevice(&mut bytes)).unwrap();
    assert_status(&c, Status::SUCCESS);
    IdentifyNamespace::read_from_bytes(&bytes).unwrap()
}

/// CNS 12h (`nsid`'s controllers) or 13h (the subsystem's).
fn controller_list(ctrl: &mut Controller, cns: Cns, nsid: u32) -> Vec<u16> {
    let mut bytes = vec![0u8; 4096];
    let c = ctrl.admin(identify::identify(cns, nsid, 0), Data::FromDevice(&mut bytes)).unwrap();
    assert_status(&c, Status::SUCCESS);
    ControllerList::read_from_bytes(&bytes).unwrap().ids().collect()
}

fn active_nsids(ctrl: &mut Controller) -> Vec<u32> {
    let mut bytes = vec![0u8; 4096];
    let c = ctrl.admin(identify::identify(Cns::ActiveNamespaceList, 0, 0), Data::FromDevice(&mut bytes)).unwrap();
    assert_status(&c, Status::SUCCESS);
    NamespaceList::read_from_bytes(&bytes).unwrap().ids().collect()
}

/// Namespace Management create of 256 blocks of 4096 bytes, shared or private: the NSID.
fn create(ctrl: &mut Controller, shared: bool) -> u32 {
    let spec = IdentifyNamespace::for_create(
        256,
        256,
        Flbas::new().with_format(2),
        Dps::new(),
        Nmic::new().with_shared(shared),
    );
    let c = ctrl.admin(namespace::namespace_create(), Data::ToDevice(spec.as_bytes())).unwrap();
    assert_status(&c, Status::SUCCESS);
    namespace::created_nsid(&c)
}

fn attachment(ctrl: &mut Controller, attach: bool, nsid: u32, controllers: &[u16]) -> Completion {
    let list = ControllerList::from_ids(controllers).unwrap();
    let cmd = if attach { namespace::namespace_attach(nsid) } else { namespace::namespace_detach(nsid) };
    ctrl.admin(cmd, Data::ToDevice(list.as_bytes())).unwrap()
}

fn write(ctrl: &mut Controller, nsid: u32, lba: u64, byte: u8) {
    let data = vec![byte; 4096];
    let c = ctrl.io(1, nvm::write(nsid, lba, 0, false), Data::ToDevice(&data), Data::None).unwrap();
    assert_status(&c, Status::SUCCESS);
}

fn read(ctrl: &mut Controller, nsid: u32, lba: u64) -> (Completion, Vec<u8>) {
    let mut data = vec![0xA5u8; 4096];
    let c = ctrl.io(1, nvm::read(nsid, lba, 0), Data::FromDevice(&mut data), Data::None).unwrap();
    (c, data)
}

/// The byte every position of a block read holds (panics on a mixed block or a failure).
fn read_byte(ctrl: &mut Controller, nsid: u32, lba: u64) -> u8 {
    let (c, data) = read(ctrl, nsid, lba);
    assert_status(&c, Status::SUCCESS);
    assert!(data.iter().all(|b| *b == data[0]), "a block of mixed bytes");
    data[0]
}

fn enable_namespace_notices(ctrl: &mut Controller) {
    let aec = AsyncEventConfiguration::new().with_namespace_attribute_notices(true);
    let c = ctrl.admin(features::set_features(FeatureId::AsyncEventConfiguration, false, 0, aec.into()), Data::None);
    assert_status(&c.unwrap(), Status::SUCCESS);
}

fn changed_namespaces(ctrl: &mut Controller) -> Vec<u32> {
    let mut bytes = vec![0u8; 4096];
    let cmd = log::get_log_page(LogPageId::ChangedNamespaceList, 0, 4096, 0, false).unwrap();
    let c = ctrl.admin(cmd, Data::FromDevice(&mut bytes)).unwrap();
    assert_status(&c, Status::SUCCESS);
    ChangedNamespaceList::read_from_bytes(&bytes).unwrap().ids().collect()
}

/// AER completions of a port, once the host lets its controller run (a look at the
/// clock: the simulated port acts when its host touches it, as `wait` does).
fn events(ctrl: &mut Controller) -> Vec<u32> {
    ctrl.transport_mut().now_ns();
    ctrl.take_async_events().unwrap().iter().map(|c| c.dw0).collect()
}

fn arbitration(ctrl: &mut Controller) -> u32 {
    let c = ctrl.admin(features::get_features(FeatureId::Arbitration, Select::Current, 0, 0), Data::None).unwrap();
    assert_status(&c, Status::SUCCESS);
    c.dw0
}

// ---------------------------------------------------------------------------------------
// One subsystem, two controllers
// ---------------------------------------------------------------------------------------

#[test]
fn ports_report_one_subsystem_with_their_own_cntlids() {
    let (mut a, mut b) = two_ports(None);
    let (ia, ib) = (identify_controller(&mut a), identify_controller(&mut b));
    assert_eq!((ia.cntlid, ib.cntlid), (1, 2));
    assert_eq!((ia.vid, ia.ssvid, ia.sn, ia.mn, ia.fr), (ib.vid, ib.ssvid, ib.sn, ib.mn, ib.fr));
    assert_eq!(ia.subnqn, ib.subnqn);
    assert_eq!(ia.serial().text, "NVT14E00000000000001");
    for id in [&ia, &ib] {
        assert!(id.cmic.multiple_ports() && id.cmic.multiple_controllers(), "CMIC {:#x}", id.cmic.into_bits());
        assert!(!id.cmic.sriov() && id.cmic.ana_reporting(), "bit 3: the profile's `ana`");
    }
    assert_eq!(controller_list(&mut a, Cns::ControllerList, 0), [1, 2]);
    assert_eq!(controller_list(&mut b, Cns::ControllerList, 0), [1, 2]);
    // The shipped namespace is shared (NMIC bit 0) and attached to both.
    assert_eq!(controller_list(&mut b, Cns::NamespaceAttachedControllers, 1), [1, 2]);
    assert!(identify_namespace(&mut a, 1).nmic.shared());
    assert!(identify_namespace(&mut b, 1).nmic.shared());
}

#[test]
fn a_single_port_profile_reports_one_controller() {
    let mut p = profile(None);
    p.controller.ports = 1;
    let ports = nvme_sim::open_ports(p).unwrap();
    assert_eq!(ports.len(), 1);
    let mut ctrl = Controller::new(Box::new(ports.into_iter().next().unwrap()), Options::default()).unwrap();
    // Bit 3 (ANA reporting) is the profile's `ana`, one port or two.
    assert_eq!(identify_controller(&mut ctrl).cmic.into_bits(), 0x08);
    assert_eq!(controller_list(&mut ctrl, Cns::ControllerList, 0), [1]);
    // open() is the first port of a multi-port drive.
    let mut first = Controller::new(Box::new(nvme_sim::open(profile(None)).unwrap()), Options::default()).unwrap();
    assert_eq!(identify_controller(&mut first).cntlid, 1);
    assert_eq!(controller_list(&mut first, Cns::ControllerList, 0), [1, 2]);
}

#[test]
fn shared_namespace_data_written_on_one_port_reads_on_the_other() {
    let (mut a, mut b) = two_ports(None);
    write(&mut a, 1, 10, 0x11);
    assert_eq!(read_byte(&mut b, 1, 10), 0x11);
    write(&mut b, 1, 10, 0x22);
    assert_eq!(read_byte(&mut a, 1, 10), 0x22);
    assert_eq!(read_byte(&mut b, 1, 10), 0x22);
    // A shared namespace created and attached to both.
    let nsid = create(&mut b, true);
    assert_status(&attachment(&mut b, true, nsid, &[1, 2]), Status::SUCCESS);
    assert!(identify_namespace(&mut a, nsid).nmic.shared());
    write(&mut b, nsid, 0, 0x33);
    assert_eq!(read_byte(&mut a, nsid, 0), 0x33);
}

#[test]
fn a_private_namespace_is_attached_to_one_controller() {
    let (mut a, mut b) = two_ports(None);
    let nsid = create(&mut a, false);
    assert_status(&attachment(&mut a, true, nsid, &[1]), Status::SUCCESS);
    assert!(!identify_namespace(&mut a, nsid).nmic.shared());
    assert_eq!(identify_namespace(&mut a, nsid).nsze, 256);
    // Not controller 2's: not in its active list, zeroes for CNS 00h, its I/O refused.
    assert_eq!(active_nsids(&mut a), [1, nsid]);
    assert_eq!(active_nsids(&mut b), [1]);
    assert_eq!(identify_namespace(&mut b, nsid).nsze, 0);
    assert_status(&read(&mut b, nsid, 0).0, Status::INVALID_FIELD);
    // Attaching it to controller 2 too, from either port: Namespace Is Private (SCT 1h, SC 19h).
    let refused = attachment(&mut b, true, nsid, &[2]);
    assert_status(&refused, Status::NAMESPACE_IS_PRIVATE);
    assert_eq!(refused.status().to_field() & 0x7FF, 0x119);
    assert_status(&attachment(&mut a, true, nsid, &[2]), Status::NAMESPACE_IS_PRIVATE);
    assert_eq!(controller_list(&mut b, Cns::NamespaceAttachedControllers, nsid), [1]);
    // Both at once, to a namespace attached to none: private all the same.
    let other = create(&mut b, false);
    assert_status(&attachment(&mut b, true, other, &[1, 2]), Status::NAMESPACE_IS_PRIVATE);
    // Detached from controller 1 (by controller 2), it may go to controller 2.
    assert_status(&attachment(&mut b, false, nsid, &[1]), Status::SUCCESS);
    assert_status(&attachment(&mut b, true, nsid, &[2]), Status::SUCCESS);
    assert_eq!(active_nsids(&mut a), [1]);
    assert_eq!(active_nsids(&mut b), [1, nsid]);
}

#[test]
fn a_controller_list_naming_no_controller_of_the_subsystem_is_invalid() {
    let (mut a, _b) = two_ports(None);
    let nsid = create(&mut a, true);
    for list in [&[3][..], &[1, 3], &[0], &[2, 2]] {
        assert_status(&attachment(&mut a, true, nsid, list), Status::CONTROLLER_LIST_INVALID);
    }
    assert!(controller_list(&mut a, Cns::NamespaceAttachedControllers, nsid).is_empty());
}

#[test]
fn an_attach_through_one_port_is_noticed_on_the_other() {
    let (mut a, mut b) = two_ports(None);
    // Only controller 2 enables the notice: the feature is per controller.
    enable_namespace_notices(&mut b);
    a.arm_async_events(1).unwrap();
    b.arm_async_events(1).unwrap();
    let nsid = create(&mut a, true);
    assert_status(&attachment(&mut a, true, nsid, &[2]), Status::SUCCESS);
    // Notice (2h), Namespace Attribute Changed (00h), log page 04h, on port 2 only.
    assert_eq!(events(&mut b), [0x04_00_02]);
    assert!(events(&mut a).is_empty());
    assert_eq!(changed_namespaces(&mut b), [nsid]);
    assert!(changed_namespaces(&mut a).is_empty(), "controller 1's namespaces did not change");
    assert_eq!(active_nsids(&mut b), [1, nsid]);
    // Detached by controller 1 from both: controller 2 is told again, once its log was read.
    assert_status(&attachment(&mut a, true, nsid, &[1]), Status::SUCCESS);
    assert_status(&attachment(&mut a, false, nsid, &[1, 2]), Status::SUCCESS);
    assert_eq!(events(&mut b), [0x04_00_02]);
    assert_eq!(changed_namespaces(&mut b), [nsid]);
    // Controller 1 lists its own changes (the notice stays off there).
    assert_eq!(changed_namespaces(&mut a), [nsid]);
    assert!(events(&mut a).is_empty());
    // A delete of a namespace attached to controller 2 only, through port 1.
    assert_status(&attachment(&mut a, true, nsid, &[2]), Status::SUCCESS);
    assert_eq!(events(&mut b), [0x04_00_02]);
    assert_eq!(changed_namespaces(&mut b), [nsid]);
    let c = a.admin(namespace::namespace_delete(nsid), Data::None).unwrap();
    assert_status(&c, Status::SUCCESS);
    assert_eq!(events(&mut b), [0x04_00_02]);
    assert_eq!(changed_namespaces(&mut b), [nsid]);
    assert!(changed_namespaces(&mut a).is_empty());
    // A format through port 1 of the shared namespace 1 (4096 → 512-byte blocks): both see it.
    let c = a.admin(namespace::format_nvm(1, FormatNvm::new().with_lbaf(0)), Data::None).unwrap();
    assert_status(&c, Status::SUCCESS);
    assert_eq!(events(&mut b), [0x04_00_02]);
    assert_eq!(changed_namespaces(&mut b), [1]);
    assert_eq!(changed_namespaces(&mut a), [1]);
    assert_eq!(identify_namespace(&mut b, 1).lba_data_size(), Some(512));
}

#[test]
fn a_notice_for_a_port_without_an_aer_waits_for_one() {
    let (mut a, mut b) = two_ports(None);
    enable_namespace_notices(&mut b);
    let nsid = create(&mut a, true);
    assert_status(&attachment(&mut a, true, nsid, &[1, 2]), Status::SUCCESS);
    b.transport_mut().now_ns();
    // Completed as the AER arrives: no further look at the port needed.
    b.arm_async_events(1).unwrap();
    let dw0: Vec<u32> = b.take_async_events().unwrap().iter().map(|c| c.dw0).collect();
    assert_eq!(dw0, [0x04_00_02]);
    assert_eq!(changed_namespaces(&mut b), [nsid]);
}

#[test]
fn a_controller_reset_of_one_port_leaves_the_other_working() {
    let (mut a, mut b) = two_ports(None);
    let weights = Arbitration::from_bits(0).with_hpw(7).with_mpw(3).with_lpw(1).into_bits();
    for ctrl in [&mut a, &mut b] {
        let c = ctrl.admin(features::set_features(FeatureId::Arbitration, false, 0, weights), Data::None).unwrap();
        assert_status(&c, Status::SUCCESS);
    }
    write(&mut a, 1, 5, 0x44);
    b.reset().unwrap();
    // Port 2's Arbitration feature is back at its default; port 1 keeps its value and runs on.
    assert_eq!(arbitration(&mut b), Arbitration::new().into_bits());
    assert_eq!(arbitration(&mut a), weights);
    assert_eq!(read_byte(&mut a, 1, 5), 0x44);
    write(&mut a, 1, 6, 0x55);
    assert_eq!(read_byte(&mut b, 1, 6), 0x55);
    assert_eq!(identify_controller(&mut b).cntlid, 2);
}

// ---------------------------------------------------------------------------------------
// Quirks
// ---------------------------------------------------------------------------------------

#[test]
fn port_stale_data_hides_one_ports_writes_from_the_other() {
    // Clean: every port reads what either wrote.
    let (mut a, mut b) = two_ports(None);
    write(&mut a, 1, 7, 0x66);
    assert_eq!(read_byte(&mut b, 1, 7), 0x66);

    let (mut a, mut b) = two_ports(Some(Quirk::PortStaleData));
    write(&mut a, 1, 7, 0x66);
    // The writing port reads its data; the other what the block held before (zeroes: DLFEAT).
    assert_eq!(read_byte(&mut a, 1, 7), 0x66);
    assert_eq!(read_byte(&mut b, 1, 7), 0x00);
    assert_eq!(read_byte(&mut b, 1, 7), 0x00, "stale for good, not once");
    write(&mut a, 1, 7, 0x77);
    assert_eq!(read_byte(&mut b, 1, 7), 0x66, "the data before the last write");
    // Port 2 writes: now port 1 is the one left behind.
    write(&mut b, 1, 7, 0x88);
    assert_eq!(read_byte(&mut b, 1, 7), 0x88);
    assert_eq!(read_byte(&mut a, 1, 7), 0x77);
    // Blocks written long ago (more than 256 writes back) read right everywhere.
    write(&mut a, 1, 100, 0x99);
    for lba in 200..460 {
        write(&mut a, 1, lba, 0x01);
    }
    assert_eq!(read_byte(&mut b, 1, 100), 0x99);
    assert_eq!(read_byte(&mut b, 1, 459), 0x00);
}

#[test]
fn cntlid_duplicate_reports_the_first_ports_cntlid_on_every_port() {
    let (mut a, mut b) = two_ports(None);
    assert_ne!(identify_controller(&mut a).cntlid, identify_controller(&mut b).cntlid);

    let (mut a, mut b) = two_ports(Some(Quirk::CntlidDuplicate));
    assert_eq!((identify_controller(&mut a).cntlid, identify_controller(&mut b).cntlid), (1, 1));
    // The controllers themselves are still two.
    assert_eq!(controller_list(&mut b, Cns::ControllerList, 0), [1, 2]);
}

#[test]
fn private_namespace_attached_twice_succeeds() {
    let (mut a, _b) = two_ports(None);
    let nsid = create(&mut a, false);
    assert_status(&attachment(&mut a, true, nsid, &[1]), Status::SUCCESS);
    assert_status(&attachment(&mut a, true, nsid, &[2]), Status::NAMESPACE_IS_PRIVATE);

    let (mut a, mut b) = two_ports(Some(Quirk::PrivateNamespaceAttachedTwice));
    let nsid = create(&mut a, false);
    assert_status(&attachment(&mut a, true, nsid, &[1]), Status::SUCCESS);
    assert_status(&attachment(&mut a, true, nsid, &[2]), Status::SUCCESS);
    assert_eq!(controller_list(&mut a, Cns::NamespaceAttachedControllers, nsid), [1, 2]);
    assert!(!identify_namespace(&mut b, nsid).nmic.shared(), "still reported private");
}

#[test]
fn cmic_single_controller_reports_no_multi_controller_capability() {
    let (mut a, mut b) = two_ports(None);
    assert_eq!(identify_controller(&mut a).cmic.into_bits() & 0b11, 0b11);
    assert_eq!(identify_controller(&mut b).cmic.into_bits() & 0b11, 0b11);

    let (mut a, mut b) = two_ports(Some(Quirk::CmicSingleController));
    assert_eq!(identify_controller(&mut a).cmic.into_bits() & 0b11, 0);
    assert_eq!(identify_controller(&mut b).cmic.into_bits() & 0b11, 0);
    assert_eq!(controller_list(&mut a, Cns::ControllerList, 0), [1, 2]);
}
