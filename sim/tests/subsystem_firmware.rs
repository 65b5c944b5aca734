//! Firmware on the clean 1.4 profile: Firmware Image Download and Firmware Commit with
//! each commit action and error status, the Firmware Slot Information log, Identify FR
//! after activation at a reset, and activation without reset pausing processing
//! (CSTS.PP) while I/O waits and then completes.

use nvme::device::{Data, Device};
use nvme::driver::{Controller, Options};
use nvme::fw_image;
use nvme::spec::firmware::{firmware_commit, firmware_image_download, CommitAction};
use nvme::spec::identify::{self, Cns, IdentifyController};
use nvme::spec::log::{FirmwareSlotLog, LogPageId};
use nvme::spec::registers::{offset, Csts};
use nvme::spec::{nvm, Status};
use nvme_sim::exec::{CommandSet, Done};
use nvme_sim::pci::SimTransport;
use nvme_sim::profile::{InitialNamespace, Profile};
use nvme_sim::subsystem::testing::TestHost;
use nvme_sim::subsystem::Subsystem;
use zerocopy::FromBytes;

fn profile() -> Profile {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.capacity_bytes = 64 << 20;
    p.namespaces = vec![InitialNamespace { lbads: 4096, ms: 0, extended: false, blocks: 1024, attached: true }];
    p
}

#[track_caller]
fn status(done: Done, expected: Status) {
    assert!(done.status.same_code(&expected), "expected {expected}, got {}", done.status);
}

/// Downloads `image` in 4 KiB pieces (FWUG 1).
fn download(sub: &mut Subsystem, host: &mut TestHost, image: &[u8]) {
    for (k, piece) in image.chunks(4096).enumerate() {
        host.put(piece);
        let cmd = firmware_image_download(piece.len() as u32, k as u64 * 4096).unwrap();
        status(host.admin(sub, &cmd), Status::SUCCESS);
    }
}

fn slot_log(sub: &mut Subsystem, host: &mut TestHost) -> FirmwareSlotLog {
    let (done, bytes) = host.log_page(sub, LogPageId::FirmwareSlot as u8, 0, 512, false);
    status(done, Status::SUCCESS);
    FirmwareSlotLog::read_from_bytes(&bytes).unwrap()
}

fn fr(sub: &mut Subsystem, host: &mut TestHost) -> String {
    host.identify_controller(sub).firmware().text
}

#[test]
fn a_downloaded_image_is_committed_and_runs_after_a_reset() {
    let mut sub = Subsystem::new(profile()).unwrap();
    let mut host = TestHost::new(1);
    download(&mut sub, &mut host, &fw_image::build("NVT14A02", 10_000));
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::Replace)), Status::SUCCESS);
    let log = slot_log(&mut sub, &mut host);
    assert_eq!(log.revision(2).unwrap().text, "NVT14A02");
    assert_eq!((log.afi.active_slot(), log.afi.next_slot()), (1, 0));
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::ActivateAtReset)), Status::SUCCESS);
    assert_eq!(slot_log(&mut sub, &mut host).afi.next_slot(), 2);
    assert_eq!(fr(&mut sub, &mut host), "NVT14A01", "nothing runs before the reset");
    sub.controller_enabled(1);
    let log = slot_log(&mut sub, &mut host);
    assert_eq!((log.afi.active_slot(), log.afi.next_slot()), (2, 0));
    assert_eq!(fr(&mut sub, &mut host), "NVT14A02");
    // Back to the factory image in slot 1 (read-only: it can be activated, not replaced).
    status(host.admin(&mut sub, &firmware_commit(1, CommitAction::ActivateAtReset)), Status::SUCCESS);
    sub.controller_enabled(1);
    assert_eq!(fr(&mut sub, &mut host), "NVT14A01");
}

#[test]
fn commit_and_download_errors_carry_their_statuses() {
    let mut sub = Subsystem::new(profile()).unwrap();
    let mut host = TestHost::new(1);
    let image = fw_image::build("NVT14A03", 8192);
    download(&mut sub, &mut host, &image);
    status(host.admin(&mut sub, &firmware_commit(5, CommitAction::Replace)), Status::INVALID_FIRMWARE_SLOT);
    status(host.admin(&mut sub, &firmware_commit(1, CommitAction::Replace)), Status::INVALID_FIRMWARE_SLOT);
    status(host.admin(&mut sub, &firmware_commit(3, CommitAction::ActivateAtReset)), Status::INVALID_FIRMWARE_IMAGE);
    let mut corrupt = image.clone();
    corrupt[40] ^= 0xFF;
    download(&mut sub, &mut host, &corrupt);
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::Replace)), Status::INVALID_FIRMWARE_IMAGE);
    // Overlapping pieces, and a piece off the 4 KiB granularity.
    host.put(&image[..8192]);
    status(host.admin(&mut sub, &firmware_image_download(8192, 0).unwrap()), Status::SUCCESS);
    status(host.admin(&mut sub, &firmware_image_download(4096, 4096).unwrap()), Status::OVERLAPPING_RANGE);
    status(host.admin(&mut sub, &firmware_image_download(4096, 2048).unwrap()), Status::INVALID_FIELD);
    let reserved = firmware_commit(2, CommitAction::Reserved(5));
    status(host.admin(&mut sub, &reserved), Status::INVALID_FIELD);
}

#[test]
fn activation_without_reset_pauses_processing_and_io_carries_on() {
    let p = profile();
    let config = p.controller_config();
    let transport = SimTransport::new(config, Box::new(Subsystem::new(p).unwrap()));
    let mut ctrl = Controller::new(Box::new(transport), Options { io_queues: 1, ..Options::default() }).unwrap();
    let image = fw_image::build("NVT14A09", 6000);
    for (k, piece) in image.chunks(4096).enumerate() {
        let cmd = firmware_image_download(piece.len() as u32, k as u64 * 4096).unwrap();
        assert!(ctrl.admin(cmd, Data::ToDevice(piece)).unwrap().status().is_success());
    }
    let block = vec![0x3Cu8; 4096];
    let qid = ctrl.io_queues()[0];
    assert!(ctrl
        .io(qid, nvm::write(1, 0, 0, false), Data::ToDevice(&block), Data::None)
        .unwrap()
        .status()
        .is_success());
    let done = ctrl.admin(firmware_commit(2, CommitAction::ReplaceAndActivateNow), Data::None).unwrap();
    assert!(done.status().is_success(), "{}", done.status());
    let csts = Csts::from_bits(ctrl.read_register(offset::CSTS).unwrap());
    assert!(csts.pp(), "CSTS.PP set while the new image starts");
    let mut back = vec![0u8; 4096];
    let read = ctrl.io(qid, nvm::read(1, 0, 0), Data::FromDevice(&mut back), Data::None).unwrap();
    assert!(read.status().is_success() && back == block, "the read waits out the pause and completes");
    assert!(!Csts::from_bits(ctrl.read_register(offset::CSTS).unwrap()).pp());
    let mut id = vec![0u8; 4096];
    assert!(ctrl
        .admin(identify::identify(Cns::Controller, 0, 0), Data::FromDevice(&mut id))
        .unwrap()
        .status()
        .is_success());
    assert_eq!(IdentifyController::read_from_bytes(&id).unwrap().firmware().text, "NVT14A09");
}

#[test]
fn firmware_quirks_break_their_rules() {
    let quirked = |q: nvme_sim::subsystem::Quirk| (Subsystem::new(profile().with_quirk(q)).unwrap(), TestHost::new(1));
    use nvme_sim::subsystem::Quirk;
    let (mut sub, mut host) = quirked(Quirk::InvalidSlotAccepted);
    status(host.admin(&mut sub, &firmware_commit(7, CommitAction::ActivateAtReset)), Status::SUCCESS);

    let (mut sub, mut host) = quirked(Quirk::FirmwareSlotLogStale);
    download(&mut sub, &mut host, &fw_image::build("NVT14A04", 4096));
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::Replace)), Status::SUCCESS);
    assert!(slot_log(&mut sub, &mut host).revision(2).is_none());

    let (mut sub, mut host) = quirked(Quirk::FirmwareRevisionUnchanged);
    download(&mut sub, &mut host, &fw_image::build("NVT14A05", 4096));
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::ReplaceAndActivateAtReset)), Status::SUCCESS);
    sub.controller_enabled(1);
    assert_eq!(fr(&mut sub, &mut host), "NVT14A01");

    let (mut sub, mut host) = quirked(Quirk::ActivationNeedsResetSilently);
    download(&mut sub, &mut host, &fw_image::build("NVT14A06", 4096));
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::ReplaceAndActivateNow)), Status::SUCCESS);
    assert_eq!(fr(&mut sub, &mut host), "NVT14A01");

    let (mut sub, mut host) = quirked(Quirk::ActivationBeyondMtfa);
    download(&mut sub, &mut host, &fw_image::build("NVT14A07", 4096));
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::ReplaceAndActivateNow)), Status::SUCCESS);
    assert_eq!(host.ctx.pause_ns, 2_000_000_000, "twice MTFA (1 s)");

    for (quirk, notices) in [(None, 1), (Some(Quirk::NoActivationNotice), 0)] {
        let p = match quirk {
            Some(q) => profile().with_quirk(q),
            None => profile(),
        };
        let (mut sub, mut host) = (Subsystem::new(p).unwrap(), TestHost::new(1));
        let aec = nvme::spec::features::AsyncEventConfiguration::new().with_firmware_activation_notices(true);
        let set = nvme::spec::features::set_features(
            nvme::spec::features::FeatureId::AsyncEventConfiguration,
            false,
            0,
            aec.into(),
        );
        status(host.admin(&mut sub, &set), Status::SUCCESS);
        download(&mut sub, &mut host, &fw_image::build("NVT14A08", 4096));
        status(host.admin(&mut sub, &firmware_commit(2, CommitAction::ReplaceAndActivateNow)), Status::SUCCESS);
        let starting = host.ctx.events.iter().filter(|e| e.event_type == 2 && e.info == 1 && e.log_page == 3).count();
        assert_eq!(starting, notices, "{quirk:?}");
    }
}

#[test]
fn a_revisions_performance_applies_while_it_runs() {
    let mut p = profile();
    p.firmware.as_mut().unwrap().performance = [("NVTP*".to_string(), 50), ("NVT14A01".to_string(), 120)].into();
    let (mut sub, mut host) = (Subsystem::new(p).unwrap(), TestHost::new(1));
    let block = vec![0x11u8; 4096];
    status(host.write(&mut sub, 1, 0, 0, &block), Status::SUCCESS);
    assert_eq!(host.ctx.service_percent, Some(120), "the shipped revision's own figure");
    download(&mut sub, &mut host, &fw_image::build("NVTP0001", 4096));
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::ReplaceAndActivateNow)), Status::SUCCESS);
    status(host.read(&mut sub, 1, 0, 0, 4096).0, Status::SUCCESS);
    assert_eq!(host.ctx.service_percent, Some(50), "a prefix key matches the new revision");
    download(&mut sub, &mut host, &fw_image::build("NVT99999", 4096));
    status(host.admin(&mut sub, &firmware_commit(3, CommitAction::ReplaceAndActivateNow)), Status::SUCCESS);
    status(host.read(&mut sub, 1, 0, 0, 4096).0, Status::SUCCESS);
    assert_eq!(host.ctx.service_percent, None, "a revision not named runs at the model's speed");
}

#[test]
fn io_fails_during_activation_quirk_fails_io_just_after_the_pause() {
    use nvme_sim::subsystem::Quirk;
    let (mut sub, mut host) =
        (Subsystem::new(profile().with_quirk(Quirk::IoFailsDuringActivation)).unwrap(), TestHost::new(1));
    download(&mut sub, &mut host, &fw_image::build("NVT14A0A", 4096));
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::ReplaceAndActivateNow)), Status::SUCCESS);
    let pause = host.ctx.pause_ns;
    host.ctx.now_ns += pause + 1_000_000;
    status(host.read(&mut sub, 1, 0, 0, 4096).0, Status::INTERNAL_ERROR);
    host.ctx.now_ns += 60_000_000;
    status(host.read(&mut sub, 1, 0, 0, 4096).0, Status::SUCCESS);
}

#[test]
fn commit_quirks_break_their_rules() {
    use nvme_sim::subsystem::Quirk;
    let quirked = |q: Quirk| (Subsystem::new(profile().with_quirk(q)).unwrap(), TestHost::new(1));
    let mut corrupt = fw_image::build("NVT14B01", 4096);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xFF;

    let (mut sub, mut host) = quirked(Quirk::AfiNextSlotUnset);
    download(&mut sub, &mut host, &fw_image::build("NVT14B02", 4096));
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::ReplaceAndActivateAtReset)), Status::SUCCESS);
    assert_eq!(slot_log(&mut sub, &mut host).afi.next_slot(), 0, "AFI bits 6:4 left 0");

    let (mut sub, mut host) = quirked(Quirk::FirmwareRunsBeforeReset);
    download(&mut sub, &mut host, &fw_image::build("NVT14B03", 4096));
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::ReplaceAndActivateAtReset)), Status::SUCCESS);
    assert_eq!(fr(&mut sub, &mut host), "NVT14B03", "FR before any reset");

    let (mut sub, mut host) = quirked(Quirk::ReplaceActivates);
    download(&mut sub, &mut host, &fw_image::build("NVT14B04", 4096));
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::Replace)), Status::SUCCESS);
    assert_eq!(fr(&mut sub, &mut host), "NVT14B04", "CA 000b ran the image");

    let (mut sub, mut host) = quirked(Quirk::BadImageAccepted);
    download(&mut sub, &mut host, &corrupt);
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::Replace)), Status::SUCCESS);
    assert!(slot_log(&mut sub, &mut host).revision(2).is_none(), "nothing stored");

    let (mut sub, mut host) = quirked(Quirk::ReadOnlySlotWritable);
    download(&mut sub, &mut host, &fw_image::build("NVT14B05", 4096));
    status(host.admin(&mut sub, &firmware_commit(1, CommitAction::Replace)), Status::SUCCESS);
    assert_eq!(slot_log(&mut sub, &mut host).revision(1).unwrap().text, "NVT14B05");

    // The protection lost for one replacing action only: 000b is still refused.
    for (quirk, action) in [
        (Quirk::ReadOnlySlotReplacedAtReset, CommitAction::ReplaceAndActivateAtReset),
        (Quirk::ReadOnlySlotReplacedNow, CommitAction::ReplaceAndActivateNow),
    ] {
        let (mut sub, mut host) = quirked(quirk);
        download(&mut sub, &mut host, &fw_image::build("NVT14B06", 4096));
        status(host.admin(&mut sub, &firmware_commit(1, CommitAction::Replace)), Status::INVALID_FIRMWARE_SLOT);
        status(host.admin(&mut sub, &firmware_commit(1, action)), Status::SUCCESS);
        assert_eq!(slot_log(&mut sub, &mut host).revision(1).unwrap().text, "NVT14B06", "{quirk}");
    }

    let (mut sub, mut host) = quirked(Quirk::RefusedCommitChangesSlot);
    download(&mut sub, &mut host, &corrupt);
    status(host.admin(&mut sub, &firmware_commit(2, CommitAction::Replace)), Status::INVALID_FIRMWARE_IMAGE);
    assert_eq!(slot_log(&mut sub, &mut host).revision(2).unwrap().text, "NVT14B01", "refused, yet FRS written");

    let (mut sub, mut host) = quirked(Quirk::InvalidSlotGenericStatus);
    status(host.admin(&mut sub, &firmware_commit(7, CommitAction::ActivateAtReset)), Status::INVALID_FIELD);
}

#[test]
fn a_revisions_activation_rule_names_its_reset_or_prohibits_it() {
    use nvme_sim::subsystem::firmware::ActivationRule;
    let mut p = profile();
    p.firmware.as_mut().unwrap().activation = [
        ("NVTC*".to_string(), ActivationRule::ControllerReset),
        ("NVTP*".to_string(), ActivationRule::ConventionalReset),
        ("NVTX*".to_string(), ActivationRule::Prohibited),
    ]
    .into();
    let (mut sub, mut host) = (Subsystem::new(p).unwrap(), TestHost::new(1));
    download(&mut sub, &mut host, &fw_image::build("NVTX0001", 4096));
    let now = CommitAction::ReplaceAndActivateNow;
    status(host.admin(&mut sub, &firmware_commit(2, now)), Status::FIRMWARE_ACTIVATION_PROHIBITED);
    assert_eq!(slot_log(&mut sub, &mut host).revision(2).unwrap().text, "NVTX0001", "the slot took the image");

    download(&mut sub, &mut host, &fw_image::build("NVTC0001", 4096));
    status(host.admin(&mut sub, &firmware_commit(2, now)), Status::FIRMWARE_ACTIVATION_REQUIRES_CONTROLLER_LEVEL_RESET);
    assert_eq!(fr(&mut sub, &mut host), "NVT14A01");
    sub.controller_enabled(1);
    assert_eq!(fr(&mut sub, &mut host), "NVTC0001", "runs after a Controller Reset");

    download(&mut sub, &mut host, &fw_image::build("NVTP0001", 4096));
    status(host.admin(&mut sub, &firmware_commit(3, now)), Status::FIRMWARE_ACTIVATION_REQUIRES_CONVENTIONAL_RESET);
    sub.controller_enabled(1);
    assert_eq!(fr(&mut sub, &mut host), "NVTC0001", "a Controller Reset is not enough");
    sub.power_cut(1);
    CommandSet::power_on(&mut sub);
    sub.controller_enabled(1);
    assert_eq!(fr(&mut sub, &mut host), "NVTP0001", "runs after the power cycle");
}
