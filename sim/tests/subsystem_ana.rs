//! Asymmetric Namespace Access on the dual-port enterprise-1.4 drive (NVMe 1.4 §8.20
//! "Asymmetric Namespace Access Reporting"): two ANA groups, controllers 1 and 2, one
//! shared namespace per group. The group states change only through the simulated
//! drive's test hook ([`CommandSet::set_ana_state`]), standing for a real drive's own
//! failover. Each test reads as the rule it checks; the quirks at the end each break one
//! rule, shown against the clean drive.

use nvme::device::{Data, Device};
use nvme::driver::{Controller, Options};
use nvme::spec::ana::{get_ana_log, AnaLog, AnaState};
use nvme::spec::features::{self, AsyncEventConfiguration, FeatureId};
use nvme::spec::identify::{Dps, Flbas, IdentifyController, IdentifyNamespace, Nmic};
use nvme::spec::{nvm, Status};
use nvme_sim::exec::{CommandSet, Done};
use nvme_sim::profile::{InitialNamespace, Profile, Quirk};
use nvme_sim::subsystem::testing::TestHost;
use nvme_sim::subsystem::Subsystem;
use zerocopy::{FromZeros, IntoBytes};

/// enterprise-1.4 scaled to 1 GiB with two shared namespaces of 4096 blocks of 512 bytes:
/// NSID 1 in ANA group 1, NSID 2 in group 2.
fn profile(quirk: Option<Quirk>) -> Profile {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.capacity_bytes = 1 << 30;
    let ns = InitialNamespace { lbads: 512, ms: 0, extended: false, blocks: 4096, attached: true };
    p.namespaces = vec![ns, ns];
    if let Some(q) = quirk {
        p = p.with_quirk(q);
    }
    p
}

/// The drive and a host on each port, ANA Change Notices enabled on both.
fn drive(quirk: Option<Quirk>) -> (Subsystem, TestHost, TestHost) {
    let mut sub = Subsystem::new(profile(quirk)).unwrap();
    let (mut a, mut b) = (TestHost::new(1), TestHost::new(2));
    let aec = AsyncEventConfiguration::new().with_ana_change_notices(true).into_bits();
    for host in [&mut a, &mut b] {
        let done = host.admin(&mut sub, &features::set_features(FeatureId::AsyncEventConfiguration, false, 0, aec));
        assert_eq!(st(done), Status::SUCCESS);
    }
    (sub, a, b)
}

fn st(done: Done) -> Status {
    Status { dnr: false, more: false, crd: 0, ..done.status }
}

fn log(sub: &mut Subsystem, host: &mut TestHost, rgo: bool, rae: bool) -> AnaLog {
    let (done, bytes) = host.admin_read(sub, &get_ana_log(4096, 0, rgo, rae).unwrap(), 4096);
    assert_eq!(st(done), Status::SUCCESS);
    AnaLog::parse(&bytes).unwrap()
}

fn read(sub: &mut Subsystem, host: &mut TestHost, nsid: u32) -> Status {
    st(host.read(sub, nsid, 0, 0, 512).0)
}

/// (type, information, log page) of the events waiting for controller `cntlid`.
fn events(sub: &mut Subsystem, cntlid: u16) -> Vec<(u8, u8, u8)> {
    sub.take_events(cntlid).iter().map(|e| (e.event_type, e.info, e.log_page)).collect()
}

/// Notice (010b), information 03h (Asymmetric Namespace Access Change), log 0Ch.
const ANA_EVENT: (u8, u8, u8) = (2, 3, 0x0C);

#[test]
fn identify_advertises_ana_truthfully() {
    let (mut sub, mut a, _) = drive(None);
    let id: IdentifyController = a.identify_controller(&mut sub);
    assert!(id.cmic.ana_reporting(), "CMIC bit 3");
    assert!(id.oaes.ana_change_notices(), "OAES bit 11");
    assert_eq!((id.anacap, id.anatt, id.anagrpmax, id.nanagrpid), (0xDF, 10, 2, 2));
    for nsid in [1, 2] {
        let (_, ns): (Done, IdentifyNamespace) = a.identify_namespace(&mut sub, nsid);
        assert_eq!(ns.anagrpid, nsid, "NSID {nsid}");
    }
    // NVMe 1.2a has no ANA: CMIC bit 3 clear, log 0Ch refused.
    let mut old = Subsystem::builtin("enterprise-1.2a").unwrap();
    let mut host = TestHost::new(1);
    let id = host.identify_controller(&mut old);
    assert!(!id.cmic.ana_reporting());
    assert_eq!((id.anacap, id.anagrpmax), (0, 0));
    let (done, _) = host.admin_read(&mut old, &get_ana_log(4096, 0, false, false).unwrap(), 16);
    assert_eq!(st(done), Status::INVALID_LOG_PAGE);
}

#[test]
fn a_profile_of_an_older_version_cannot_have_ana() {
    let text = include_str!("../../fixtures/sim/enterprise-1.2a.yaml")
        .replace("quirks: []", "ana: {groups: 1, transition_ms: 1000}\nquirks: []");
    let err = Profile::from_str(&text, "t.yaml").unwrap_err().to_string();
    assert!(err.contains("Asymmetric Namespace Access is NVMe 1.4"), "{err}");
}

#[test]
fn the_log_lists_every_group_with_its_namespaces_and_rgo_leaves_them_out() {
    let (mut sub, mut a, mut b) = drive(None);
    for host in [&mut a, &mut b] {
        let page = log(&mut sub, host, false, false);
        assert_eq!(page.groups.len(), 2);
        for g in &page.groups {
            assert_eq!(g.nsids, vec![g.anagrpid]);
            assert_eq!(g.ana_state(), Some(AnaState::Optimized));
        }
        let groups_only = log(&mut sub, host, true, false);
        assert!(groups_only.groups.iter().all(|g| g.nsids.is_empty()));
        assert_eq!(groups_only.groups.len(), 2);
    }
}

#[test]
fn each_state_through_port_2_leaves_port_1_serving() {
    let (mut sub, mut a, mut b) = drive(None);
    let mut last_count = log(&mut sub, &mut b, false, false).chgcnt;
    for state in [AnaState::NonOptimized, AnaState::Inaccessible, AnaState::PersistentLoss, AnaState::Change] {
        sub.set_ana_state(2, 1, state as u8).unwrap();
        assert_eq!(events(&mut sub, 2), [ANA_EVENT], "{state:?}");
        assert!(events(&mut sub, 1).is_empty(), "port 1's view did not change");
        let page = log(&mut sub, &mut b, false, false);
        assert!(page.chgcnt > last_count, "{state:?}: the Change Count moves");
        last_count = page.chgcnt;
        assert_eq!(page.group(1).unwrap().ana_state(), Some(state));
        assert_eq!(page.group(2).unwrap().ana_state(), Some(AnaState::Optimized), "group 2 untouched");
        assert_eq!(log(&mut sub, &mut a, false, false).group(1).unwrap().ana_state(), Some(AnaState::Optimized));
        let expected = state.refusal().unwrap_or(Status::SUCCESS);
        assert_eq!(read(&mut sub, &mut b, 1), expected, "{state:?} through port 2");
        assert_eq!(read(&mut sub, &mut a, 1), Status::SUCCESS, "{state:?}: port 1 serves");
        assert_eq!(read(&mut sub, &mut b, 2), Status::SUCCESS, "{state:?}: the other group serves");
        // Identify is processed in every state.
        let (done, _) = b.identify_namespace(&mut sub, 1);
        assert_eq!(st(done), Status::SUCCESS);
    }
    sub.set_ana_state(2, 1, AnaState::Optimized as u8).unwrap();
    assert_eq!(read(&mut sub, &mut b, 1), Status::SUCCESS);
}

#[test]
fn the_notice_waits_for_the_log_and_needs_aec_bit_11() {
    let (mut sub, _, mut b) = drive(None);
    sub.set_ana_state(2, 1, AnaState::Inaccessible as u8).unwrap();
    sub.set_ana_state(2, 1, AnaState::Optimized as u8).unwrap();
    assert_eq!(events(&mut sub, 2), [ANA_EVENT], "one notice until log 0Ch is read");
    log(&mut sub, &mut b, false, true);
    sub.set_ana_state(2, 1, AnaState::Inaccessible as u8).unwrap();
    assert!(events(&mut sub, 2).is_empty(), "read with RAE: still masked");
    log(&mut sub, &mut b, false, false);
    sub.set_ana_state(2, 1, AnaState::Optimized as u8).unwrap();
    assert_eq!(events(&mut sub, 2), [ANA_EVENT]);
    // Without AEC bit 11, no notice.
    let mut quiet = Subsystem::new(profile(None)).unwrap();
    quiet.set_ana_state(2, 1, AnaState::Inaccessible as u8).unwrap();
    assert!(events(&mut quiet, 2).is_empty());
}

#[test]
fn the_hook_refuses_what_does_not_exist() {
    let (mut sub, _, _) = drive(None);
    assert!(sub.set_ana_state(2, 3, 1).unwrap_err().contains("ANAGRPIDs are 1 to 2"));
    assert!(sub.set_ana_state(2, 1, 5).is_err());
    assert!(sub.set_ana_state(9, 1, 1).is_err());
    let mut old = Subsystem::builtin("enterprise-1.2a").unwrap();
    assert!(old.set_ana_state(1, 1, 3).is_err());
}

#[test]
fn namespace_management_takes_an_anagrpid() {
    let (mut sub, mut a, _) = drive(None);
    let create = |sub: &mut Subsystem, host: &mut TestHost, anagrpid: u32| {
        let mut spec = IdentifyNamespace::for_create(64, 64, Flbas::new(), Dps::new(), Nmic::new().with_shared(true));
        spec.anagrpid = anagrpid;
        host.put(spec.as_bytes());
        st(host.admin(sub, &nvme::spec::namespace::namespace_create()))
    };
    assert_eq!(create(&mut sub, &mut a, 3), Status::ANA_GROUP_IDENTIFIER_INVALID);
    assert_eq!(create(&mut sub, &mut a, 2), Status::SUCCESS);
    let (done, ns) = {
        let (done, bytes) = a.identify(&mut sub, 0x11, 3, 0);
        let mut id = IdentifyNamespace::new_zeroed();
        id.as_mut_bytes().copy_from_slice(&bytes[..4096]);
        (done, id)
    };
    assert_eq!(st(done), Status::SUCCESS);
    assert_eq!(ns.anagrpid, 2);
}

#[test]
fn a_power_cycle_brings_every_group_back_optimized() {
    let (mut sub, _, mut b) = drive(None);
    sub.set_ana_state(2, 1, AnaState::Inaccessible as u8).unwrap();
    sub.power_cut(1);
    sub.power_on();
    assert_eq!(read(&mut sub, &mut b, 1), Status::SUCCESS);
}

// ---------------------------------------------------------------------------------------
// Through the host driver, on both ports
// ---------------------------------------------------------------------------------------

#[test]
fn the_hook_and_the_notice_reach_port_2_through_its_driver() {
    let transports = nvme_sim::open_ports(profile(None)).unwrap();
    let mut ports: Vec<Controller> = transports
        .into_iter()
        .map(|t| Controller::new(Box::new(t), Options { io_queues: 1, ..Options::default() }).unwrap())
        .collect();
    let mut b = ports.pop().unwrap();
    let mut a = ports.pop().unwrap();
    let aec = AsyncEventConfiguration::new().with_ana_change_notices(true).into_bits();
    let c = b.admin(features::set_features(FeatureId::AsyncEventConfiguration, false, 0, aec), Data::None).unwrap();
    assert!(c.status().is_success());
    b.arm_async_events(1).unwrap();
    b.set_ana_state(1, AnaState::Inaccessible).unwrap();
    b.transport_mut().now_ns();
    let dw0: Vec<u32> = b.take_async_events().unwrap().iter().map(|c| c.dw0).collect();
    assert_eq!(dw0, [0x0C_03_02], "log 0Ch, information 03h, type 010b");
    let mut block = vec![0u8; 512];
    let c = b.io(1, nvm::read(1, 0, 0), Data::FromDevice(&mut block), Data::None).unwrap();
    assert!(c.status().same_code(&Status::ASYMMETRIC_ACCESS_INACCESSIBLE), "{}", c.status());
    assert!(!c.status().dnr, "DNR clear: the host may retry on another path");
    let c = a.io(1, nvm::read(1, 0, 0), Data::FromDevice(&mut block), Data::None).unwrap();
    assert!(c.status().is_success());
}

// ---------------------------------------------------------------------------------------
// Quirks: each breaks one rule
// ---------------------------------------------------------------------------------------

#[test]
fn ana_state_not_honoured_serves_an_inaccessible_group() {
    for (quirk, expected) in
        [(None, Status::ASYMMETRIC_ACCESS_INACCESSIBLE), (Some(Quirk::AnaStateNotHonoured), Status::SUCCESS)]
    {
        let (mut sub, _, mut b) = drive(quirk);
        sub.set_ana_state(2, 1, AnaState::Inaccessible as u8).unwrap();
        assert_eq!(read(&mut sub, &mut b, 1), expected, "{quirk:?}");
    }
}

#[test]
fn ana_wrong_status_answers_namespace_not_ready() {
    let (mut sub, _, mut b) = drive(Some(Quirk::AnaWrongStatus));
    sub.set_ana_state(2, 1, AnaState::Inaccessible as u8).unwrap();
    assert_eq!(read(&mut sub, &mut b, 1), Status::NAMESPACE_NOT_READY);
}

#[test]
fn ana_change_not_notified_raises_nothing() {
    let (mut sub, _, _) = drive(Some(Quirk::AnaChangeNotNotified));
    sub.set_ana_state(2, 1, AnaState::Inaccessible as u8).unwrap();
    assert!(events(&mut sub, 2).is_empty());
}

#[test]
fn ana_log_stale_keeps_the_old_state_in_the_log() {
    let (mut sub, _, mut b) = drive(Some(Quirk::AnaLogStale));
    sub.set_ana_state(2, 1, AnaState::Inaccessible as u8).unwrap();
    assert_eq!(log(&mut sub, &mut b, false, false).group(1).unwrap().ana_state(), Some(AnaState::Optimized));
    assert_eq!(read(&mut sub, &mut b, 1), Status::ASYMMETRIC_ACCESS_INACCESSIBLE, "the state itself changed");
}

#[test]
fn ana_log_omits_namespace_leaves_the_highest_nsid_out() {
    let (mut sub, mut a, _) = drive(Some(Quirk::AnaLogOmitsNamespace));
    let page = log(&mut sub, &mut a, false, false);
    assert!(page.groups_listing(2).is_empty());
    assert_eq!(page.groups_listing(1).len(), 1);
}
