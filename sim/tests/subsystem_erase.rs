//! Erase on the clean 1.4 profile: encrypted media, Format NVM with each Secure Erase
//! Setting and the FNA scope, and Sanitize (each action, the status log, the commands
//! refused while it runs, the completion event, a power cycle mid-operation) — and each
//! erase quirk breaking its rule.

use nvme::spec::log::LogPageId;
use nvme::spec::namespace::{self, FormatNvm, SecureErase};
use nvme::spec::sanitize::{self, SanitizeAction, SanitizeCdw10, SanitizeStatus, SanitizeStatusLog};
use nvme::spec::{nvm, Status};
use nvme_sim::exec::{CommandSet, Done};
use nvme_sim::profile::{InitialNamespace, Profile};
use nvme_sim::subsystem::testing::TestHost;
use nvme_sim::subsystem::{Quirk, Subsystem};
use zerocopy::FromBytes;

/// enterprise-1.4 at 64 MiB: two attached 512-byte namespaces of 1024 blocks.
fn drive(quirks: &[Quirk]) -> (Subsystem, TestHost) {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.capacity_bytes = 64 << 20;
    p.namespaces = vec![InitialNamespace { lbads: 512, ms: 0, extended: false, blocks: 1024, attached: true }; 2];
    for q in quirks {
        p = p.with_quirk(*q);
    }
    (Subsystem::new(p).unwrap(), TestHost::new(1))
}

#[track_caller]
fn ok(done: Done) {
    assert!(done.status.is_success(), "expected success, got {}", done.status);
}

const BLOCK: usize = 512;

fn pattern(nsid: u32) -> Vec<u8> {
    (0..8 * BLOCK).map(|i| (i as u32 * 7 + nsid * 13) as u8 | 1).collect()
}

/// Writes 8 blocks at LBA 0 of `nsid` with a pattern of its own.
fn fill(sub: &mut Subsystem, host: &mut TestHost, nsid: u32) {
    ok(host.write(sub, nsid, 0, 8, &pattern(nsid)));
}

fn read8(sub: &mut Subsystem, host: &mut TestHost, nsid: u32) -> Vec<u8> {
    let (done, data) = host.read(sub, nsid, 0, 8, 8 * BLOCK);
    ok(done);
    data
}

fn status_log(sub: &mut Subsystem, host: &mut TestHost) -> SanitizeStatusLog {
    let (done, bytes) = host.log_page(sub, LogPageId::SanitizeStatus as u8, 0, 512, false);
    ok(done);
    SanitizeStatusLog::read_from_bytes(&bytes).unwrap()
}

fn start(sub: &mut Subsystem, host: &mut TestHost, action: SanitizeAction, ndas: bool, pattern: u32) -> Done {
    let cdw10 = SanitizeCdw10::new().with_sanact(action).with_ndas(ndas).with_owpass(1);
    host.admin(sub, &sanitize::sanitize(cdw10, pattern))
}

/// Lets `ms` pass on the host's clock.
fn wait(host: &mut TestHost, ms: u64) {
    host.ctx.now_ns += ms * 1_000_000;
}

#[test]
fn the_media_holds_ciphertext_and_crypto_format_makes_it_noise() {
    let (mut sub, mut host) = drive(&[]);
    fill(&mut sub, &mut host, 1);
    assert!(sub.namespace(1).unwrap().key().is_some(), "encryption: true gives each namespace a key");
    let erase = FormatNvm::new().with_ses(SecureErase::Cryptographic);
    ok(host.admin(&mut sub, &namespace::format_nvm(1, erase)));
    assert!(read8(&mut sub, &mut host, 1) == vec![0u8; 8 * BLOCK], "formatted blocks are deallocated: DLFEAT zeroes");
    assert_eq!(sub.namespace(1).unwrap().nuse(), 0);
}

#[test]
fn a_secure_erase_reaches_only_the_namespace_named_when_fna_bit_1_is_clear() {
    let (mut sub, mut host) = drive(&[]);
    fill(&mut sub, &mut host, 1);
    fill(&mut sub, &mut host, 2);
    ok(host.admin(&mut sub, &namespace::format_nvm(1, FormatNvm::new().with_ses(SecureErase::UserData))));
    assert!(read8(&mut sub, &mut host, 2) == pattern(2));
    let (mut sub, mut host) = drive(&[Quirk::SecureEraseBeyondScope]);
    fill(&mut sub, &mut host, 2);
    ok(host.admin(&mut sub, &namespace::format_nvm(1, FormatNvm::new().with_ses(SecureErase::UserData))));
    assert!(read8(&mut sub, &mut host, 2) == vec![0u8; 8 * BLOCK], "the quirk erases namespace 2 too");
}

#[test]
fn quirk_crypto_erase_leaves_plaintext() {
    let (mut sub, mut host) = drive(&[Quirk::CryptoEraseLeavesPlaintext]);
    fill(&mut sub, &mut host, 1);
    ok(host.admin(&mut sub, &namespace::format_nvm(1, FormatNvm::new().with_ses(SecureErase::Cryptographic))));
    assert!(read8(&mut sub, &mut host, 1) == pattern(1));
    ok(start(&mut sub, &mut host, SanitizeAction::CryptoErase, true, 0));
    wait(&mut host, 1000);
    assert!(read8(&mut sub, &mut host, 1) == pattern(1));
}

#[test]
fn sanitize_runs_in_the_background_and_refuses_commands_meanwhile() {
    let (mut sub, mut host) = drive(&[]);
    fill(&mut sub, &mut host, 1);
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    let log = status_log(&mut sub, &mut host);
    assert_eq!(log.sstat.status(), SanitizeStatus::InProgress);
    assert_eq!(log.sprog, 0);
    assert_eq!(log.etbe, 2, "2000 ms, in seconds");
    let (done, _) = host.read(&mut sub, 1, 0, 1, BLOCK);
    assert!(done.status.same_code(&Status::SANITIZE_IN_PROGRESS), "{}", done.status);
    let format = host.admin(&mut sub, &namespace::format_nvm(1, FormatNvm::new()));
    assert!(format.status.same_code(&Status::SANITIZE_IN_PROGRESS));
    let again = start(&mut sub, &mut host, SanitizeAction::CryptoErase, false, 0);
    assert!(again.status.same_code(&Status::SANITIZE_IN_PROGRESS));
    wait(&mut host, 1000);
    assert_eq!(status_log(&mut sub, &mut host).sprog, 32768, "half way");
    wait(&mut host, 1000);
    let log = status_log(&mut sub, &mut host);
    assert_eq!((log.sstat.status(), log.sprog), (SanitizeStatus::Completed, 0xFFFF));
    assert!(log.sstat.global_data_erased());
    assert_eq!(SanitizeCdw10::from_bits(log.scdw10).sanact(), SanitizeAction::BlockErase);
    let event = host.ctx.events.pop().expect("Sanitize Operation Completed");
    assert_eq!((event.event_type, event.info, event.log_page), (6, 1, 0x81));
    assert!(read8(&mut sub, &mut host, 1) == vec![0u8; 8 * BLOCK]);
    fill(&mut sub, &mut host, 1);
    assert!(!status_log(&mut sub, &mut host).sstat.global_data_erased(), "a write clears Global Data Erased");
}

#[test]
fn no_deallocate_leaves_what_each_action_wrote() {
    let (mut sub, mut host) = drive(&[]);
    fill(&mut sub, &mut host, 1);
    ok(start(&mut sub, &mut host, SanitizeAction::Overwrite, true, 0x1234_5678));
    wait(&mut host, 4000);
    let data = read8(&mut sub, &mut host, 1);
    assert_eq!(&data[..8], &[0x78, 0x56, 0x34, 0x12, 0x78, 0x56, 0x34, 0x12]);
    fill(&mut sub, &mut host, 2);
    ok(start(&mut sub, &mut host, SanitizeAction::CryptoErase, true, 0));
    wait(&mut host, 100);
    let noise = read8(&mut sub, &mut host, 2);
    assert!(noise != pattern(2), "the old data under a new key");
    assert!(noise != vec![0u8; 8 * BLOCK], "not deallocated (NDAS)");
}

#[test]
fn a_sanitize_resumes_after_a_power_cycle() {
    let (mut sub, mut host) = drive(&[]);
    fill(&mut sub, &mut host, 1);
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    wait(&mut host, 1500);
    sub.power_cut(1);
    CommandSet::power_on(&mut sub);
    let log = status_log(&mut sub, &mut host);
    assert_eq!(log.sstat.status(), SanitizeStatus::InProgress);
    wait(&mut host, 2000);
    assert_eq!(status_log(&mut sub, &mut host).sstat.status(), SanitizeStatus::Completed);
    assert!(read8(&mut sub, &mut host, 1) == vec![0u8; 8 * BLOCK]);
}

#[test]
fn sanitize_quirks_break_their_rules() {
    let (mut sub, mut host) = drive(&[Quirk::SanitizeMissesNamespace]);
    fill(&mut sub, &mut host, 2);
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    wait(&mut host, 2000);
    assert!(read8(&mut sub, &mut host, 2) == pattern(2));

    let (mut sub, mut host) = drive(&[Quirk::SanitizeNeverCompletes]);
    ok(start(&mut sub, &mut host, SanitizeAction::CryptoErase, false, 0));
    wait(&mut host, 100_000);
    assert_eq!(status_log(&mut sub, &mut host).sstat.status(), SanitizeStatus::InProgress);

    let (mut sub, mut host) = drive(&[Quirk::SanitizeAcceptsCommands]);
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    ok(host.read(&mut sub, 1, 0, 1, BLOCK).0);

    let (mut sub, mut host) = drive(&[Quirk::SanitizeNoCompletionEvent]);
    ok(start(&mut sub, &mut host, SanitizeAction::CryptoErase, false, 0));
    wait(&mut host, 100);
    status_log(&mut sub, &mut host);
    assert!(host.ctx.events.is_empty());

    let (mut sub, mut host) = drive(&[Quirk::SanitizeLostOnPowerCycle]);
    fill(&mut sub, &mut host, 1);
    // The write's completion posted (as the queue engine tells the drive), then a Flush:
    // the data is durable and a power cut keeps it.
    if let Some(token) = host.ctx.change.take() {
        sub.change_completed(token);
    }
    ok(host.io(&mut sub, &nvm::flush(1)));
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    sub.power_cut(1);
    CommandSet::power_on(&mut sub);
    assert!(read8(&mut sub, &mut host, 1) == pattern(1));
}

#[test]
fn status_and_fna_quirks_break_their_rules() {
    let (mut sub, mut host) = drive(&[Quirk::GlobalDataErasedNeverSet]);
    ok(start(&mut sub, &mut host, SanitizeAction::CryptoErase, false, 0));
    wait(&mut host, 100);
    let log = status_log(&mut sub, &mut host);
    assert_eq!(log.sstat.status(), SanitizeStatus::Completed);
    assert!(!log.sstat.global_data_erased());

    let (mut sub, mut host) = drive(&[Quirk::FnaHidesCryptoErase]);
    assert!(!host.identify_controller(&mut sub).fna.crypto_erase());
    ok(host.admin(&mut sub, &namespace::format_nvm(1, FormatNvm::new().with_ses(SecureErase::Cryptographic))));
}

#[test]
fn sanitize_refuses_what_sanicap_does_not_offer() {
    let (mut sub, mut host) = drive(&[]);
    let reserved = start(&mut sub, &mut host, SanitizeAction::Reserved(0), false, 0);
    assert!(reserved.status.same_code(&Status::INVALID_FIELD));
    ok(start(&mut sub, &mut host, SanitizeAction::ExitFailureMode, false, 0));
    let mut p = Profile::builtin("enterprise-1.2a").unwrap();
    p.capacity_bytes = 64 << 20;
    p.namespaces.truncate(1);
    let mut old = Subsystem::new(p).unwrap();
    let done = start(&mut old, &mut host, SanitizeAction::BlockErase, false, 0);
    assert!(done.status.same_code(&Status::INVALID_COMMAND_OPCODE), "no Sanitize before 1.3");
}

#[test]
fn status_log_and_restriction_quirks_break_their_rules() {
    let (mut sub, mut host) = drive(&[Quirk::SprogFfffInProgress]);
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    let log = status_log(&mut sub, &mut host);
    assert_eq!((log.sstat.status(), log.sprog), (SanitizeStatus::InProgress, 0xFFFF));

    let (mut sub, mut host) = drive(&[Quirk::SprogStuckAfterCompletion]);
    ok(start(&mut sub, &mut host, SanitizeAction::CryptoErase, false, 0));
    wait(&mut host, 1000);
    let log = status_log(&mut sub, &mut host);
    assert_eq!((log.sstat.status(), log.sprog), (SanitizeStatus::Completed, 0xFFFE));

    let (mut sub, mut host) = drive(&[Quirk::Scdw10NotRecorded]);
    ok(start(&mut sub, &mut host, SanitizeAction::CryptoErase, false, 0));
    wait(&mut host, 1000);
    assert_eq!(status_log(&mut sub, &mut host).scdw10, 0);

    let (mut sub, mut host) = drive(&[Quirk::IdentifyRefusedDuringSanitize]);
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    let (done, _) = host.identify(&mut sub, 1, 0, 0);
    assert!(done.status.same_code(&Status::SANITIZE_IN_PROGRESS), "{}", done.status);

    let (mut sub, mut host) = drive(&[Quirk::SanitizeStatusLogRefused]);
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    let (done, _) = host.log_page(&mut sub, LogPageId::SanitizeStatus as u8, 0, 512, false);
    assert!(done.status.same_code(&Status::SANITIZE_IN_PROGRESS), "{}", done.status);

    let (mut sub, mut host) = drive(&[Quirk::SanitizeStatusResetByPowerCycle]);
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    sub.power_cut(1);
    CommandSet::power_on(&mut sub);
    assert_eq!(status_log(&mut sub, &mut host).sstat.status(), SanitizeStatus::NeverSanitized);
    assert!(host.read(&mut sub, 1, 0, 1, BLOCK).0.status.same_code(&Status::SANITIZE_IN_PROGRESS), "still running");
}

#[test]
fn content_quirks_leave_other_content_than_the_spec_says() {
    // Overwrite, one pass, NDAS: the last pass writes the pattern; the quirk leaves its inverse.
    let (mut sub, mut host) = drive(&[Quirk::OverwriteFinalPassInverted]);
    fill(&mut sub, &mut host, 1);
    let cdw10 =
        SanitizeCdw10::new().with_sanact(SanitizeAction::Overwrite).with_ndas(true).with_owpass(1).with_oipbp(true);
    ok(host.admin(&mut sub, &sanitize::sanitize(cdw10, 0x1122_3344)));
    wait(&mut host, 100_000);
    let last = sanitize::final_overwrite_pattern(0x1122_3344, 1, true);
    assert_eq!(read8(&mut sub, &mut host, 1)[..4], (!last).to_le_bytes());

    let (mut sub, mut host) = drive(&[Quirk::SanitizeSkipsDeallocation]);
    fill(&mut sub, &mut host, 1);
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    wait(&mut host, 100_000);
    assert!(read8(&mut sub, &mut host, 1).iter().all(|b| *b == 0xFF), "the erased NAND's ones, not deallocated");
}

/// enterprise-1.4 whose first sanitize operation fails (the profile's fault).
fn failing_drive(quirks: &[Quirk]) -> (Subsystem, TestHost) {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.capacity_bytes = 64 << 20;
    p.namespaces = vec![InitialNamespace { lbads: 512, ms: 0, extended: false, blocks: 1024, attached: true }; 2];
    p.erase.sanitize.as_mut().unwrap().fail_next = 1;
    for q in quirks {
        p = p.with_quirk(*q);
    }
    (Subsystem::new(p).unwrap(), TestHost::new(1))
}

fn fail_once(sub: &mut Subsystem, host: &mut TestHost, ause: bool) {
    let cdw10 = SanitizeCdw10::new().with_sanact(SanitizeAction::BlockErase).with_ause(ause);
    ok(host.admin(sub, &sanitize::sanitize(cdw10, 0)));
    wait(host, 100_000);
    assert_eq!(status_log(sub, host).sstat.status(), SanitizeStatus::Failed);
}

fn exit_failure_mode(sub: &mut Subsystem, host: &mut TestHost) -> Done {
    host.admin(sub, &sanitize::sanitize(SanitizeCdw10::new().with_sanact(SanitizeAction::ExitFailureMode), 0))
}

#[test]
fn a_failed_sanitize_leaves_failure_mode_until_exit_or_a_new_operation() {
    // Unrestricted (AUSE set): I/O refused with Sanitize Failed until Exit Failure Mode.
    let (mut sub, mut host) = failing_drive(&[]);
    fill(&mut sub, &mut host, 1);
    fail_once(&mut sub, &mut host, true);
    assert!(host.read(&mut sub, 1, 0, 1, BLOCK).0.status.same_code(&Status::SANITIZE_FAILED));
    ok(host.identify(&mut sub, 1, 0, 0).0);
    ok(exit_failure_mode(&mut sub, &mut host));
    assert!(read8(&mut sub, &mut host, 1) == pattern(1), "a failed operation erased nothing");

    // Restricted (AUSE clear): Exit Failure Mode is refused; a new operation leaves it.
    let (mut sub, mut host) = failing_drive(&[]);
    fail_once(&mut sub, &mut host, false);
    assert!(exit_failure_mode(&mut sub, &mut host).status.same_code(&Status::SANITIZE_FAILED));
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    wait(&mut host, 100_000);
    assert_eq!(status_log(&mut sub, &mut host).sstat.status(), SanitizeStatus::Completed);
    ok(host.read(&mut sub, 1, 0, 1, BLOCK).0);
}

#[test]
fn failure_mode_quirks_break_their_rules() {
    let (mut sub, mut host) = failing_drive(&[Quirk::FailureModeAcceptsIo]);
    fail_once(&mut sub, &mut host, false);
    ok(host.read(&mut sub, 1, 0, 1, BLOCK).0);

    let (mut sub, mut host) = failing_drive(&[Quirk::ExitFailureModeIgnored]);
    fail_once(&mut sub, &mut host, true);
    ok(exit_failure_mode(&mut sub, &mut host));
    assert!(host.read(&mut sub, 1, 0, 1, BLOCK).0.status.same_code(&Status::SANITIZE_FAILED));
}

/// Each `sanitize-admits-*` quirk lets its one command run during the operation; the
/// others stay refused with Sanitize In Progress.
#[test]
fn each_admits_quirk_lets_only_its_command_through() {
    let ranges = nvm::DsmRange::encode_list(&[nvm::DsmRange::new(0, 1)]);
    let dsm = nvm::dataset_management(1, 1, nvm::DsmAttributes::new().with_ad(true)).unwrap();
    let download = nvme::spec::firmware::firmware_image_download(4096, 0).unwrap();
    let commands: [(Quirk, bool, nvme::spec::Command); 7] = [
        (Quirk::SanitizeAdmitsCompare, false, nvm::compare(1, 0, 0)),
        (Quirk::SanitizeAdmitsVerify, false, nvm::verify(1, 0, 0)),
        (Quirk::SanitizeAdmitsWriteUncorrectable, false, nvm::write_uncorrectable(1, 0, 0)),
        (Quirk::SanitizeAdmitsWriteZeroes, false, nvm::write_zeroes(1, 0, 0, false)),
        (Quirk::SanitizeAdmitsDatasetManagement, false, dsm),
        (Quirk::SanitizeAdmitsFirmwareDownload, true, download),
        (Quirk::SanitizeAdmitsNamespaceAttachment, true, namespace::namespace_attach(1)),
    ];
    for (quirk, _, _) in &commands {
        let (mut sub, mut host) = drive(&[*quirk]);
        ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
        for (other, admin, cmd) in &commands {
            host.put(&ranges);
            let done = if *admin { host.admin(&mut sub, cmd) } else { host.io(&mut sub, cmd) };
            let refused = done.status.same_code(&Status::SANITIZE_IN_PROGRESS);
            assert_eq!(refused, other != quirk, "{quirk}: opcode {:#04x} got {}", cmd.opcode, done.status);
        }
    }
}

/// Quirk `erase-spares-interior-band`: a sanitize leaves the blocks from NSZE/4 for
/// NSZE/16 blocks as they were; the first blocks are erased.
#[test]
fn quirk_erase_spares_interior_band() {
    let (mut sub, mut host) = drive(&[Quirk::EraseSparesInteriorBand]);
    fill(&mut sub, &mut host, 1);
    ok(host.write(&mut sub, 1, 256, 7, &pattern(1)));
    ok(start(&mut sub, &mut host, SanitizeAction::BlockErase, false, 0));
    wait(&mut host, 5000);
    assert_eq!(status_log(&mut sub, &mut host).sstat.status(), SanitizeStatus::Completed);
    assert_ne!(read8(&mut sub, &mut host, 1), pattern(1), "the first blocks are erased");
    let (done, band) = host.read(&mut sub, 1, 256, 7, 8 * BLOCK);
    ok(done);
    assert_eq!(band, pattern(1), "the band at NSZE/4 kept its data");
}

/// Verify (NVMe 1.4 §6.15, ONCS bit 7): succeeds over written blocks without moving data,
/// fails a block written uncorrectable with Unrecovered Read Error, and a range past NSZE
/// with LBA Out of Range.
#[test]
fn verify_reads_on_the_controllers_side() {
    let (mut sub, mut host) = drive(&[]);
    ok(host.write(&mut sub, 1, 0, 7, &pattern(3)));
    ok(host.io(&mut sub, &nvm::verify(1, 0, 7)));
    ok(host.io(&mut sub, &nvm::write_uncorrectable(1, 4, 0)));
    let done = host.io(&mut sub, &nvm::verify(1, 0, 7));
    assert!(done.status.same_code(&Status::UNRECOVERED_READ_ERROR), "{}", done.status);
    let done = host.io(&mut sub, &nvm::verify(1, 1020, 7));
    assert!(done.status.same_code(&Status::LBA_OUT_OF_RANGE), "{}", done.status);
}
