//! The subsystem behind the queue engine, driven by nvtest's host driver: a profile
//! becomes a running PCIe function (registers, queues, PRPs) whose commands the
//! subsystem answers, exactly as the runner's `sim` target builds it.

use nvme::device::{Data, Device};
use nvme::driver::{Controller, Options};
use nvme::spec::features::{self, AsyncEventConfiguration, FeatureId};
use nvme::spec::identify::{self, Cns, ControllerList, IdentifyController, IdentifyNamespace};
use nvme::spec::namespace;
use nvme::spec::nvm;
use nvme::spec::registers::offset;
use nvme::spec::{Status, Version};
use nvme_sim::pci::SimTransport;
use nvme_sim::profile::{InitialNamespace, Profile};
use nvme_sim::subsystem::Subsystem;
use std::time::Instant;
use zerocopy::{FromBytes, IntoBytes};

fn bring_up(mut profile: Profile) -> Controller {
    profile.capacity_bytes = 1 << 30;
    profile.namespaces = vec![InitialNamespace { lbads: 4096, ms: 0, extended: false, blocks: 65536, attached: true }];
    let config = profile.controller_config();
    let subsystem = Subsystem::new(profile).unwrap();
    let transport = SimTransport::new(config, Box::new(subsystem));
    Controller::new(Box::new(transport), Options { io_queues: 2, ..Options::default() }).unwrap()
}

#[test]
fn the_driver_brings_up_a_profile_and_moves_data() {
    let mut ctrl = bring_up(Profile::builtin("enterprise-1.4").unwrap());
    let vs = ctrl.read_register(offset::VS).unwrap();
    assert_eq!(Version::from_register(vs), Version::V1_4);
    let mut bytes = vec![0u8; 4096];
    let done = ctrl.admin(identify::identify(Cns::Controller, 0, 0), Data::FromDevice(&mut bytes)).unwrap();
    assert!(done.status().is_success());
    let id = IdentifyController::read_from_bytes(&bytes).unwrap();
    assert_eq!(id.version(), Version::V1_4);
    assert_eq!(id.serial().text, "NVT14E00000000000001");

    let data: Vec<u8> = (0..8 * 4096).map(|i| (i * 7 % 251) as u8).collect();
    let done = ctrl.io(1, nvm::write(1, 100, 7, false), Data::ToDevice(&data), Data::None).unwrap();
    assert!(done.status().is_success(), "{}", done.status());
    let mut back = vec![0u8; data.len()];
    let done = ctrl.io(2, nvm::read(1, 100, 7), Data::FromDevice(&mut back), Data::None).unwrap();
    assert!(done.status().is_success());
    assert_eq!(back, data);
    let done = ctrl.io(1, nvm::read(1, 65536, 0), Data::FromDevice(&mut back[..4096]), Data::None).unwrap();
    assert!(done.status().same_code(&Status::LBA_OUT_OF_RANGE));
}

#[test]
fn namespace_notices_reach_the_host_as_asynchronous_events() {
    let mut ctrl = bring_up(Profile::builtin("enterprise-1.4").unwrap());
    let aec = AsyncEventConfiguration::new().with_namespace_attribute_notices(true);
    let done = ctrl
        .admin(features::set_features(FeatureId::AsyncEventConfiguration, false, 0, aec.into()), Data::None)
        .unwrap();
    assert!(done.status().is_success());
    ctrl.arm_async_events(1).unwrap();
    let list = ControllerList::from_ids(&[1]).unwrap();
    let done = ctrl.admin(namespace::namespace_detach(1), Data::ToDevice(list.as_bytes())).unwrap();
    assert!(done.status().is_success());
    let events = ctrl.take_async_events().unwrap();
    assert_eq!(events.len(), 1);
    // Notice (2h), Namespace Attribute Changed (00h), log page 04h.
    let dw0 = events[0].dw0;
    assert_eq!((dw0 & 7, (dw0 >> 8) & 0xFF, (dw0 >> 16) & 0xFF), (2, 0, 0x04));
    let mut bytes = vec![0u8; 4096];
    let done = ctrl.admin(identify::identify(Cns::Namespace, 1, 0), Data::FromDevice(&mut bytes)).unwrap();
    assert!(done.status().is_success());
    assert_eq!(IdentifyNamespace::read_from_bytes(&bytes).unwrap().nsze, 0, "detached: zero filled");
}

#[test]
fn the_1_2a_profile_runs_behind_the_engine() {
    let mut ctrl = bring_up(Profile::builtin("enterprise-1.2a").unwrap());
    let vs = ctrl.read_register(offset::VS).unwrap();
    assert_eq!(Version::from_register(vs), Version::V1_2);
    let mut bytes = vec![0u8; 4096];
    let done =
        ctrl.admin(identify::identify(Cns::NamespaceDescriptorList, 1, 0), Data::FromDevice(&mut bytes)).unwrap();
    assert!(done.status().same_code(&Status::INVALID_FIELD));
}

/// 4 KiB random reads through the whole stack: a smoke figure for the IOPS benchmark's
/// path (printed, not judged; run with `--nocapture` to see it).
#[test]
fn small_reads_flow_through_the_stack() {
    let mut ctrl = bring_up(Profile::builtin("enterprise-1.4").unwrap());
    let mut buf = vec![0u8; 4096];
    let n = 20_000u64;
    let start = Instant::now();
    for i in 0..n {
        let lba = (i * 7919) % 65536;
        let done = ctrl.io(1, nvm::read(1, lba, 0), Data::FromDevice(&mut buf), Data::None).unwrap();
        assert!(done.status().is_success());
    }
    let per_io = start.elapsed() / n as u32;
    println!("4 KiB read through driver, engine and subsystem: {per_io:?} per command");
}
