//! Every quirk breaks its one rule at the command level: each test runs the command the
//! rule governs on a drive with the quirk and shows the deviation (the clean behaviour
//! is covered by subsystem_admin.rs and subsystem_io.rs; the newer tests also run the
//! same commands on the clean drive first).

use nvme::spec::features::{self, AsyncEventConfiguration, FeatureId};
use nvme::spec::identify::{parse_descriptor_list, Cns, ControllerList, Flbas, IdentifyNamespace, NsDescriptor};
use nvme::spec::log::{ChangedNamespaceList, LogPageId};
use nvme::spec::namespace::{self, FormatNvm};
use nvme::spec::nvm::{self, DsmAttributes, DsmRange};
use nvme::spec::{Status, Version};
use nvme_sim::exec::{CommandSet, Done};
use nvme_sim::profile::{InitialNamespace, Profile, Quirk};
use nvme_sim::subsystem::testing::TestHost;
use nvme_sim::subsystem::Subsystem;
use zerocopy::FromBytes;

/// The 1.4 drive scaled to 64 MiB with a 512-byte namespace (1, 8192 blocks), a
/// 4096-byte one (2, 1024 blocks), and a detached 512-byte one (3, 64 blocks), with `quirk`.
fn drive(quirk: Quirk) -> (Subsystem, TestHost) {
    build(Some(quirk))
}

/// The same drive without quirks.
fn clean() -> (Subsystem, TestHost) {
    build(None)
}

fn build(quirk: Option<Quirk>) -> (Subsystem, TestHost) {
    (Subsystem::new(profile(quirk)).unwrap(), TestHost::new(1))
}

fn profile(quirk: Option<Quirk>) -> Profile {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.capacity_bytes = 64 << 20;
    p.namespaces = vec![
        InitialNamespace { lbads: 512, ms: 0, extended: false, blocks: 8192, attached: true },
        InitialNamespace { lbads: 4096, ms: 0, extended: false, blocks: 1024, attached: true },
        InitialNamespace { lbads: 512, ms: 0, extended: false, blocks: 64, attached: false },
    ];
    if let Some(quirk) = quirk {
        p = p.with_quirk(quirk);
    }
    p
}

#[track_caller]
fn assert_status(done: Done, expected: Status) {
    assert!(done.status.same_code(&expected), "expected {expected}, got {}", done.status);
}

fn dsm(host: &mut TestHost, sub: &mut Subsystem, nsid: u32, ranges: &[DsmRange]) -> Done {
    host.put(&DsmRange::encode_list(ranges));
    host.io(sub, &nvm::dataset_management(nsid, ranges.len(), DsmAttributes::new().with_ad(true)).unwrap())
}

fn flbas(index: u8) -> Flbas {
    Flbas::new().with_format(index)
}

fn enable_notices(sub: &mut Subsystem, host: &mut TestHost) {
    let aec = AsyncEventConfiguration::new().with_namespace_attribute_notices(true);
    assert_status(
        host.admin(sub, &features::set_features(FeatureId::AsyncEventConfiguration, false, 0, aec.into())),
        Status::SUCCESS,
    );
}

fn changed_list(sub: &mut Subsystem, host: &mut TestHost) -> Vec<u32> {
    let (done, bytes) = host.log_page(sub, LogPageId::ChangedNamespaceList as u8, 0, 4096, false);
    assert_status(done, Status::SUCCESS);
    ChangedNamespaceList::read_from_bytes(&bytes).unwrap().ids().collect()
}

#[test]
fn every_quirk_has_a_test_here() {
    // A quirk added to the enum must get a test in this file: keep the count in step.
    // The seven of the service model and arbitration (reads-queued-behind-writes,
    // wrr-weights-ignored, urgent-not-first, arbitration-burst-ignored, wrr-not-enabled,
    // stale-read-after-write, wrr-weights-inverted) need the simulated clock and the driver: their tests are in
    // service_qos.rs and service_arbitration.rs. The ten of the power model (flush-ignored,
    // fua-ignored, atomic-write-torn, foreign-data-after-power-loss,
    // power-counters-not-incremented, ready-after-timeout, ready-slow-after-power-loss,
    // loss-protection-cache-lost, shutdown-status-never-reported,
    // write-cache-disable-ignored) need a power cycle: their tests are in power_loss.rs.
    // The nine of erase (crypto-erase-leaves-plaintext, secure-erase-beyond-scope,
    // sanitize-misses-namespace, sanitize-never-completes, sanitize-accepts-commands,
    // sanitize-no-completion-event, sanitize-lost-on-power-cycle,
    // global-data-erased-never-set, fna-hides-crypto-erase) are in subsystem_erase.rs;
    // the fourteen of firmware (firmware-slot-log-stale, activation-needs-reset-silently,
    // activation-beyond-mtfa, firmware-revision-unchanged, invalid-slot-accepted,
    // no-activation-notice, io-fails-during-activation, afi-next-slot-unset,
    // firmware-runs-before-reset, replace-activates, bad-image-accepted,
    // read-only-slot-writable, refused-commit-changes-slot, invalid-slot-generic-status)
    // in subsystem_firmware.rs. The eight of the sanitize status log, restrictions and
    // content (sprog-ffff-in-progress, sprog-stuck-after-completion, scdw10-not-recorded,
    // identify-refused-during-sanitize, sanitize-status-log-refused,
    // sanitize-status-reset-by-power-cycle, overwrite-final-pass-inverted,
    // sanitize-skips-deallocation) and the two of failure mode (failure-mode-accepts-io,
    // exit-failure-mode-ignored) in subsystem_erase.rs too. The four of a drive with
    // several ports (port-stale-data, cntlid-duplicate, private-namespace-attached-twice,
    // cmic-single-controller) need two controllers: their tests are in subsystem_ports.rs.
    // The five of Asymmetric Namespace Access (ana-state-not-honoured,
    // ana-change-not-notified, ana-log-stale, ana-wrong-status, ana-log-omits-namespace)
    // need two ports and the state hook: their tests are in subsystem_ana.rs.
    // torn-read-under-write needs a read executed while a write is in flight (the
    // simulated clock, two queues): runner/tests/quirk_twins.rs (WARNS) runs it under the
    // workload engine.
    // The seven sanitize-admits-* and erase-spares-interior-band are in subsystem_erase.rs,
    // read-only-slot-replaced-at-reset and -now in subsystem_firmware.rs, the four SMART
    // traffic counters (data-units-read-in-blocks, data-units-written-in-blocks,
    // host-reads-omit-compare, host-writes-omit-fua) below.
    assert_eq!(Quirk::ALL.len(), 143);
}

// ---------------------------------------------------------------------------------------
// Data path
// ---------------------------------------------------------------------------------------

#[test]
fn stale_after_deallocate_takes_no_action_as_the_advisory_attribute_allows() {
    let (mut sub, mut host) = drive(Quirk::StaleAfterDeallocate);
    assert_status(host.write(&mut sub, 1, 0, 0, &[0x77; 512]), Status::SUCCESS);
    assert_status(dsm(&mut host, &mut sub, 1, &[DsmRange::new(0, 1)]), Status::SUCCESS);
    let (_, id) = host.identify_namespace(&mut sub, 1);
    assert_eq!(id.dlfeat.read_behavior(), nvme::spec::identify::DeallocatedRead::Zeroes);
    assert!(host.read(&mut sub, 1, 0, 0, 512).1.iter().all(|b| *b == 0x77), "the last data written");
    assert_eq!(sub.namespace(1).unwrap().nuse(), 1, "the block was not deallocated");
}

/// A drive scaled as `drive`, with DLFEAT reporting ones and `quirk` (if any).
fn ones_drive(quirk: Option<Quirk>) -> (Subsystem, TestHost) {
    let mut p = profile(quirk);
    p.dlfeat = nvme_sim::profile::DlfeatSetting::Ones;
    (Subsystem::new(p).unwrap(), TestHost::new(1))
}

#[test]
fn deallocated_reads_wrong_pattern_reads_ones_where_dlfeat_says_zeroes_and_zeroes_where_ones() {
    use nvme::spec::identify::DeallocatedRead;
    // 8 blocks written, 2..6 deallocated; (drive, DLFEAT, the pattern read back).
    let run = |sub: &mut Subsystem, host: &mut TestHost| {
        assert_status(host.write(sub, 1, 0, 7, &[0x77; 8 * 512]), Status::SUCCESS);
        assert_status(dsm(host, sub, 1, &[DsmRange::new(2, 4)]), Status::SUCCESS);
        let (_, id) = host.identify_namespace(sub, 1);
        let back = host.read(sub, 1, 0, 7, 8 * 512).1;
        assert!(back[..2 * 512].iter().chain(&back[6 * 512..]).all(|b| *b == 0x77), "the rest keeps its data");
        assert_eq!(sub.namespace(1).unwrap().nuse(), 4, "the range counts as deallocated");
        let fill = back[2 * 512];
        assert!(back[2 * 512..6 * 512].iter().all(|b| *b == fill));
        (id.dlfeat.read_behavior(), fill)
    };
    let (mut sub, mut host) = clean();
    assert_eq!(run(&mut sub, &mut host), (DeallocatedRead::Zeroes, 0x00));
    let (mut sub, mut host) = drive(Quirk::DeallocatedReadsWrongPattern);
    assert_eq!(run(&mut sub, &mut host), (DeallocatedRead::Zeroes, 0xFF));
    let (mut sub, mut host) = ones_drive(None);
    assert_eq!(run(&mut sub, &mut host), (DeallocatedRead::Ones, 0xFF));
    let (mut sub, mut host) = ones_drive(Some(Quirk::DeallocatedReadsWrongPattern));
    assert_eq!(run(&mut sub, &mut host), (DeallocatedRead::Ones, 0x00));
}

#[test]
fn dsm_later_ranges_corrupted_reads_garbage_after_the_first_range() {
    let run = |sub: &mut Subsystem, host: &mut TestHost| {
        assert_status(host.write(sub, 1, 0, 15, &[0x12; 16 * 512]), Status::SUCCESS);
        let ranges = [DsmRange::new(0, 2), DsmRange::new(8, 2), DsmRange::new(12, 1)];
        assert_status(dsm(host, sub, 1, &ranges), Status::SUCCESS);
        assert_eq!(sub.namespace(1).unwrap().nuse(), 11);
        let back = host.read(sub, 1, 0, 15, 16 * 512).1;
        assert!(back[..2 * 512].iter().all(|b| *b == 0), "the first range reads as DLFEAT says");
        assert!(back[2 * 512..8 * 512].iter().all(|b| *b == 0x12), "blocks outside the ranges keep their data");
        [back[8 * 512], back[10 * 512], back[12 * 512]]
    };
    let (mut sub, mut host) = clean();
    assert_eq!(run(&mut sub, &mut host), [0x00, 0x12, 0x00]);
    let (mut sub, mut host) = drive(Quirk::DsmLaterRangesCorrupted);
    assert_eq!(run(&mut sub, &mut host), [0xA5, 0x12, 0xA5], "neither zeroes, ones nor the data written");
}

#[test]
fn namespace_write_leak_lands_in_the_next_namespace() {
    let (mut sub, mut host) = drive(Quirk::NamespaceWriteLeak);
    let data: Vec<u8> = (0..512).map(|i| i as u8).collect();
    assert_status(host.write(&mut sub, 1, 5, 0, &data), Status::SUCCESS);
    let (_, other) = host.read(&mut sub, 2, 5, 0, 4096);
    assert_eq!(&other[..512], &data[..], "namespace 2's LBA 5 holds namespace 1's data");
}

#[test]
fn lba_past_nsze_accepted_completes_out_of_range_io() {
    let (mut sub, mut host) = drive(Quirk::LbaPastNszeAccepted);
    assert_status(host.write(&mut sub, 1, 8192, 0, &[9; 512]), Status::SUCCESS);
    let (done, data) = host.read(&mut sub, 1, 8191, 1, 1024);
    assert_status(done, Status::SUCCESS);
    assert!(data.iter().all(|b| *b == 0), "reads return zeroes");
    assert_eq!(sub.namespace(1).unwrap().nuse(), 0, "writes are dropped");
}

#[test]
fn format_4096_addresses_512_overlaps_neighbouring_blocks() {
    let (mut sub, mut host) = drive(Quirk::Format4096Addresses512);
    let (_, id) = host.identify_namespace(&mut sub, 2);
    assert_eq!(id.lba_data_size(), Some(4096), "the format still says 4096 bytes");
    assert_status(host.write(&mut sub, 2, 0, 0, &[0xAA; 4096]), Status::SUCCESS);
    assert_status(host.write(&mut sub, 2, 1, 0, &[0xBB; 4096]), Status::SUCCESS);
    let (_, block0) = host.read(&mut sub, 2, 0, 0, 4096);
    assert!(block0[..512].iter().all(|b| *b == 0xAA));
    assert!(block0[512..].iter().all(|b| *b == 0xBB), "LBA 1 overwrote 3584 bytes of LBA 0");
    // A single block still reads back what was written to it.
    assert!(host.read(&mut sub, 2, 1, 0, 4096).1.iter().all(|b| *b == 0xBB));
}

#[test]
fn last_lba_rejected_refuses_every_io_command_that_includes_nsze_minus_one() {
    // Write, Read, Compare, Write Zeroes, Write Uncorrectable: in this order, so each
    // one on the clean drive finds the data the previous one left.
    let commands = |slba: u64, nlb: u16| {
        [
            nvm::write(1, slba, nlb, false),
            nvm::read(1, slba, nlb),
            nvm::compare(1, slba, nlb),
            nvm::write_zeroes(1, slba, nlb, false),
            nvm::write_uncorrectable(1, slba, nlb),
        ]
    };
    let (mut sub, mut host) = clean();
    host.put(&[7; 1024]);
    for cmd in commands(8191, 0).iter().chain(&commands(8190, 1)) {
        assert_status(host.io(&mut sub, cmd), Status::SUCCESS);
    }

    let (mut sub, mut host) = drive(Quirk::LastLbaRejected);
    host.put(&[7; 1024]);
    for cmd in commands(8191, 0).iter().chain(&commands(8190, 1)) {
        assert_status(host.io(&mut sub, cmd), Status::LBA_OUT_OF_RANGE);
    }
    // The LBA before the last one is still fine.
    for cmd in commands(8190, 0) {
        assert_status(host.io(&mut sub, &cmd), Status::SUCCESS);
    }
    assert_status(host.read(&mut sub, 2, 1023, 0, 4096).0, Status::LBA_OUT_OF_RANGE);
}

#[test]
fn format_512_addresses_4096_runs_a_transfer_over_later_lbas() {
    // 32 blocks at LBA 0, block i filled with i; then LBA 1 rewritten with EEh.
    let first: Vec<u8> = (0..32u8).flat_map(|i| [i; 512]).collect();
    let run = |sub: &mut Subsystem, host: &mut TestHost| {
        let (_, id) = host.identify_namespace(sub, 1);
        assert_eq!(id.lba_data_size(), Some(512), "the format says 512 bytes");
        assert_status(host.write(sub, 1, 0, 31, &first), Status::SUCCESS);
        assert_status(host.write(sub, 1, 1, 0, &[0xEE; 512]), Status::SUCCESS);
        assert!(host.read(sub, 1, 1, 0, 512).1.iter().all(|b| *b == 0xEE), "LBA 1 alone reads back");
        host.read(sub, 1, 0, 31, 32 * 512).1
    };
    let mut expected = first.clone();
    expected[512..1024].fill(0xEE);

    let (mut sub, mut host) = clean();
    assert_eq!(run(&mut sub, &mut host), expected);

    let (mut sub, mut host) = drive(Quirk::Format512Addresses4096);
    let back = run(&mut sub, &mut host);
    assert_ne!(back, expected);
    assert!(back[512..1024].iter().all(|b| *b == 1), "block 1 of the long read is not LBA 1's data");
    assert!(back[8 * 512..9 * 512].iter().all(|b| *b == 0xEE), "LBA 1's data is where block 8 was");
    // The 4096-byte namespace is addressed correctly.
    assert_eq!(sub.namespace(2).unwrap().lba_stride, 4096);
}

#[test]
fn deallocate_leaks_to_next_namespace_deallocates_the_same_lbas_there() {
    let setup = |sub: &mut Subsystem, host: &mut TestHost| {
        assert_status(host.write(sub, 1, 0, 7, &[0x31; 8 * 512]), Status::SUCCESS);
        assert_status(host.write(sub, 2, 0, 7, &[0x32; 8 * 4096]), Status::SUCCESS);
        // LBA 2000 exists in namespace 1 only.
        assert_status(dsm(host, sub, 1, &[DsmRange::new(0, 4), DsmRange::new(2000, 8)]), Status::SUCCESS);
        assert_eq!(sub.namespace(1).unwrap().nuse(), 4);
    };
    let (mut sub, mut host) = clean();
    setup(&mut sub, &mut host);
    assert_eq!(sub.namespace(2).unwrap().nuse(), 8);
    assert!(host.read(&mut sub, 2, 0, 0, 4096).1.iter().all(|b| *b == 0x32));

    let (mut sub, mut host) = drive(Quirk::DeallocateLeaksToNextNamespace);
    setup(&mut sub, &mut host);
    assert_eq!(sub.namespace(2).unwrap().nuse(), 4, "namespace 2 lost LBAs 0 to 3");
    assert!(host.read(&mut sub, 2, 0, 0, 4096).1.iter().all(|b| *b == 0));
    assert!(host.read(&mut sub, 2, 4, 0, 4096).1.iter().all(|b| *b == 0x32));
}

#[test]
fn deallocate_wipes_neighbour_takes_one_block_more() {
    let (mut sub, mut host) = drive(Quirk::DeallocateWipesNeighbour);
    assert_status(host.write(&mut sub, 1, 0, 7, &[0x55; 8 * 512]), Status::SUCCESS);
    assert_status(dsm(&mut host, &mut sub, 1, &[DsmRange::new(2, 2)]), Status::SUCCESS);
    let (_, data) = host.read(&mut sub, 1, 4, 0, 512);
    assert!(data.iter().all(|b| *b == 0), "block 4, outside the range, was deallocated");
    assert_eq!(sub.namespace(1).unwrap().nuse(), 5);
}

#[test]
fn inactive_namespace_io_accepted_succeeds_on_unattached_and_unallocated_nsids() {
    let (mut sub, mut host) = drive(Quirk::InactiveNamespaceIoAccepted);
    assert_status(host.write(&mut sub, 3, 0, 0, &[1; 512]), Status::SUCCESS);
    assert_eq!(sub.namespace(3).unwrap().nuse(), 1, "the detached namespace was written");
    assert_status(host.read(&mut sub, 9, 0, 0, 512).0, Status::SUCCESS);
    // An NSID above NN is still no namespace.
    assert_status(host.read(&mut sub, 33, 0, 0, 512).0, Status::INVALID_NAMESPACE_OR_FORMAT);
}

#[test]
fn inactive_namespace_io_accepted_succeeds_on_nsid_0_and_ffffffff() {
    let (mut sub, mut host) = clean();
    for nsid in [0, 0xFFFF_FFFF] {
        assert_status(host.read(&mut sub, nsid, 0, 0, 512).0, Status::INVALID_NAMESPACE_OR_FORMAT);
        assert_status(host.write(&mut sub, nsid, 0, 0, &[1; 512]), Status::INVALID_NAMESPACE_OR_FORMAT);
        assert_status(host.io(&mut sub, &nvm::write_zeroes(nsid, 0, 0, false)), Status::INVALID_NAMESPACE_OR_FORMAT);
    }
    // Flush keeps its broadcast meaning on 1.4; NSID 0 is no namespace for it either.
    assert_status(host.io(&mut sub, &nvm::flush(0xFFFF_FFFF)), Status::SUCCESS);
    assert_status(host.io(&mut sub, &nvm::flush(0)), Status::INVALID_NAMESPACE_OR_FORMAT);

    let (mut sub, mut host) = drive(Quirk::InactiveNamespaceIoAccepted);
    for nsid in [0, 0xFFFF_FFFF] {
        assert_status(host.write(&mut sub, nsid, 0, 1, &[1; 1024]), Status::SUCCESS);
        let (done, data) = host.read(&mut sub, nsid, 0, 1, 1024);
        assert_status(done, Status::SUCCESS);
        assert!(data.iter().all(|b| *b == 0), "reads return zeroes");
        assert_status(host.io(&mut sub, &nvm::write_zeroes(nsid, 0, 0, false)), Status::SUCCESS);
        assert_status(host.io(&mut sub, &nvm::flush(nsid)), Status::SUCCESS);
    }
    for nsid in [1, 2, 3] {
        assert_eq!(sub.namespace(nsid).unwrap().nuse(), 0, "the writes were dropped");
    }
}

#[test]
fn mdts_not_enforced_moves_larger_transfers() {
    let (mut sub, mut host) = drive(Quirk::MdtsNotEnforced);
    let id = host.identify_controller(&mut sub);
    assert_eq!(id.mdts, 5, "MDTS still advertises 128 KiB");
    assert_status(host.write(&mut sub, 1, 0, 511, &[3; 512 * 512]), Status::SUCCESS);
    assert_status(host.read(&mut sub, 1, 0, 511, 0).0, Status::SUCCESS);
}

#[test]
fn write_zeroes_ignored_leaves_the_data() {
    let (mut sub, mut host) = drive(Quirk::WriteZeroesIgnored);
    assert_status(host.write(&mut sub, 1, 0, 0, &[0x44; 512]), Status::SUCCESS);
    assert_status(host.io(&mut sub, &nvm::write_zeroes(1, 0, 0, false)), Status::SUCCESS);
    assert!(host.read(&mut sub, 1, 0, 0, 512).1.iter().all(|b| *b == 0x44));
}

#[test]
fn dsm_range_past_nsze_accepted_deallocates_the_valid_part() {
    let (mut sub, mut host) = drive(Quirk::DsmRangePastNszeAccepted);
    assert_status(host.write(&mut sub, 1, 8188, 3, &[0x66; 4 * 512]), Status::SUCCESS);
    assert_status(dsm(&mut host, &mut sub, 1, &[DsmRange::new(8190, 16)]), Status::SUCCESS);
    assert_eq!(sub.namespace(1).unwrap().nuse(), 2, "8190 and 8191 deallocated");
}

/// Legal (deallocation is advisory): the other ranges keep the last data written.
#[test]
fn dsm_first_range_only_skips_the_other_ranges() {
    let (mut sub, mut host) = drive(Quirk::DsmFirstRangeOnly);
    assert_status(host.write(&mut sub, 1, 0, 15, &[0x12; 16 * 512]), Status::SUCCESS);
    assert_status(dsm(&mut host, &mut sub, 1, &[DsmRange::new(0, 2), DsmRange::new(8, 2)]), Status::SUCCESS);
    assert_eq!(sub.namespace(1).unwrap().nuse(), 14);
    assert!(host.read(&mut sub, 1, 8, 0, 512).1.iter().all(|b| *b == 0x12), "the second range kept its data");
}

#[test]
fn compare_always_succeeds_misses_a_difference() {
    let (mut sub, mut host) = drive(Quirk::CompareAlwaysSucceeds);
    assert_status(host.write(&mut sub, 1, 0, 0, &[1; 512]), Status::SUCCESS);
    host.put(&[2; 512]);
    assert_status(host.io(&mut sub, &nvm::compare(1, 0, 0)), Status::SUCCESS);
}

// ---------------------------------------------------------------------------------------
// Identify
// ---------------------------------------------------------------------------------------

#[test]
fn active_list_omits_last_leaves_out_the_highest_nsid() {
    let (mut sub, mut host) = drive(Quirk::ActiveListOmitsLast);
    assert_eq!(host.namespace_list(&mut sub, Cns::ActiveNamespaceList, 0).1, [1]);
    assert!(sub.is_active(2));
}

#[test]
fn nn_understated_reports_one_namespace_fewer_than_can_exist() {
    let (mut sub, mut host) = drive(Quirk::NnUnderstated);
    assert_eq!(host.identify_controller(&mut sub).nn, 31);
    for _ in 4..=31 {
        assert_status(host.create_namespace(&mut sub, 1, flbas(0)), Status::SUCCESS);
    }
    assert_eq!(host.create_namespace(&mut sub, 1, flbas(0)).dw0, 32, "NSID 32 exists beyond NN");
}

#[test]
fn duplicate_nguid_gives_every_namespace_the_same_identifiers() {
    let (mut sub, mut host) = drive(Quirk::DuplicateNguid);
    let (_, a) = host.identify_namespace(&mut sub, 1);
    let (_, b) = host.identify_namespace(&mut sub, 2);
    assert_eq!((a.nguid, a.eui64), (b.nguid, b.eui64));
}

#[test]
fn descriptor_list_mismatch_reports_another_nguid() {
    let (mut sub, mut host) = drive(Quirk::DescriptorListMismatch);
    let (_, id) = host.identify_namespace(&mut sub, 1);
    let (_, bytes) = host.identify(&mut sub, Cns::NamespaceDescriptorList as u8, 1, 0);
    let descriptors = parse_descriptor_list(&bytes).unwrap();
    assert!(descriptors.contains(&NsDescriptor::Eui64(id.eui64)));
    assert!(!descriptors.contains(&NsDescriptor::Nguid(id.nguid)));
}

#[test]
fn ncap_exceeds_nsze_by_one() {
    let (mut sub, mut host) = drive(Quirk::NcapExceedsNsze);
    let (_, id) = host.identify_namespace(&mut sub, 1);
    assert_eq!((id.nsze, id.ncap), (8192, 8193));
}

#[test]
fn nuse_exceeds_ncap_by_one() {
    let (mut sub, mut host) = drive(Quirk::NuseExceedsNcap);
    let (_, id) = host.identify_namespace(&mut sub, 1);
    assert_eq!((id.ncap, id.nuse), (8192, 8193));
}

#[test]
fn flbas_beyond_nlbaf_names_a_missing_format() {
    let (mut sub, mut host) = drive(Quirk::FlbasBeyondNlbaf);
    let (_, id) = host.identify_namespace(&mut sub, 1);
    assert!(id.flbas_index() > id.nlbaf);
    assert_eq!(id.lba_format_in_use(), None);
}

#[test]
fn allocated_list_omits_inactive_lists_only_attached_namespaces() {
    let (mut sub, mut host) = drive(Quirk::AllocatedListOmitsInactive);
    assert_eq!(host.namespace_list(&mut sub, Cns::AllocatedNamespaceList, 0).1, [1, 2]);
    assert!(sub.namespace(3).is_some());
}

#[test]
fn controller_list_empty_for_an_attached_namespace() {
    let (mut sub, mut host) = drive(Quirk::ControllerListEmpty);
    let (done, bytes) = host.identify(&mut sub, Cns::NamespaceAttachedControllers as u8, 1, 0);
    assert_status(done, Status::SUCCESS);
    assert_eq!(ControllerList::read_from_bytes(&bytes).unwrap().numid, 0);
    assert!(sub.is_active(1));
}

#[test]
fn identify_inactive_nonzero_returns_an_unattached_namespace() {
    let (mut sub, mut host) = drive(Quirk::IdentifyInactiveNonzero);
    let (done, id) = host.identify_namespace(&mut sub, 3);
    assert_status(done, Status::SUCCESS);
    assert_eq!(id.nsze, 64);
}

#[test]
fn serial_not_ascii_puts_a_control_byte_in_sn() {
    let (mut sub, mut host) = drive(Quirk::SerialNotAscii);
    let sn = host.identify_controller(&mut sub).serial();
    assert!(!sn.is_clean());
    assert_eq!(sn.non_printable, [(1, 0x07)]);
}

#[test]
fn ver_mismatch_reports_a_lower_version_than_vs() {
    let (mut sub, mut host) = drive(Quirk::VerMismatch);
    assert_eq!(sub.profile().vs(), 0x0001_0400, "VS stays 1.4");
    assert_eq!(host.identify_controller(&mut sub).version(), Version::new(1, 3, 0));
}

#[test]
fn lbaf_wrong_size_creates_512_byte_blocks_for_a_4096_request() {
    let (mut sub, mut host) = drive(Quirk::LbafWrongSize);
    let nsid = host.create_namespace(&mut sub, 64, flbas(2)).dw0;
    let (_, bytes) = host.identify(&mut sub, Cns::AllocatedNamespace as u8, nsid, 0);
    let id = IdentifyNamespace::read_from_bytes(&bytes).unwrap();
    assert_eq!(id.lba_data_size(), Some(512));
    assert_status(host.attachment(&mut sub, true, nsid, &[1]), Status::SUCCESS);
    // And uses it: a block transfers 512 bytes.
    assert_status(host.write(&mut sub, nsid, 0, 1, &[5; 1024]), Status::SUCCESS);
    assert_eq!(sub.namespace(nsid).unwrap().format.data_size, 512);
}

// ---------------------------------------------------------------------------------------
// Namespace management, attachment, format
// ---------------------------------------------------------------------------------------

#[test]
fn create_beyond_capacity_hands_out_more_than_tnvmcap() {
    let (mut sub, mut host) = drive(Quirk::CreateBeyondCapacity);
    // 64 MiB total, 8 MiB 32 KiB allocated: a 60 MiB namespace does not fit, yet succeeds.
    assert_status(host.create_namespace(&mut sub, (60 << 20) / 512, flbas(0)), Status::SUCCESS);
    assert!(sub.allocated_bytes() > sub.profile().capacity_bytes as u128);
}

#[test]
fn detach_loses_data_deallocates_the_namespace() {
    let cycle = |sub: &mut Subsystem, host: &mut TestHost| {
        assert_status(host.write(sub, 1, 10, 0, &[0x5A; 512]), Status::SUCCESS);
        assert_status(host.attachment(sub, false, 1, &[1]), Status::SUCCESS);
        assert_status(host.attachment(sub, true, 1, &[1]), Status::SUCCESS);
        host.read(sub, 1, 10, 0, 512).1
    };
    let (mut sub, mut host) = clean();
    assert!(cycle(&mut sub, &mut host).iter().all(|b| *b == 0x5A));
    assert_eq!(sub.namespace(1).unwrap().nuse(), 1);

    let (mut sub, mut host) = drive(Quirk::DetachLosesData);
    assert!(cycle(&mut sub, &mut host).iter().all(|b| *b == 0), "the data is gone");
    assert_eq!(sub.namespace(1).unwrap().nuse(), 0);
}

#[test]
fn detach_undone_by_reset_attaches_the_namespace_again_at_enable() {
    let cycle = |sub: &mut Subsystem, host: &mut TestHost| {
        assert_status(host.attachment(sub, false, 2, &[1]), Status::SUCCESS);
        sub.controller_enabled(1);
        host.namespace_list(sub, Cns::ActiveNamespaceList, 0).1
    };
    let (mut sub, mut host) = clean();
    assert_eq!(cycle(&mut sub, &mut host), [1], "the detach persists across the reset");
    let (mut sub, mut host) = drive(Quirk::DetachUndoneByReset);
    assert_eq!(cycle(&mut sub, &mut host), [1, 2, 3], "every allocated namespace attached again");
}

#[test]
fn delete_broadcast_ignored_deletes_nothing() {
    let (mut sub, mut host) = clean();
    assert_status(host.delete_namespace(&mut sub, 0xFFFF_FFFF), Status::SUCCESS);
    assert!(sub.allocated_nsids().is_empty());

    let (mut sub, mut host) = drive(Quirk::DeleteBroadcastIgnored);
    assert_status(host.delete_namespace(&mut sub, 0xFFFF_FFFF), Status::SUCCESS);
    assert_eq!(sub.allocated_nsids(), [1, 2, 3]);
    assert_eq!(host.namespace_list(&mut sub, Cns::AllocatedNamespaceList, 0).1, [1, 2, 3]);
    // Deleting one namespace still works.
    assert_status(host.delete_namespace(&mut sub, 3), Status::SUCCESS);
    assert_eq!(sub.allocated_nsids(), [1, 2]);
}

#[test]
fn attach_twice_succeeds() {
    let (mut sub, mut host) = drive(Quirk::AttachTwiceSucceeds);
    assert_status(host.attachment(&mut sub, true, 1, &[1]), Status::SUCCESS);
    // Shared by the dual-port drive's two controllers, each still once.
    assert_eq!(sub.namespace(1).unwrap().attached, [1, 2], "still attached once");
}

#[test]
fn detach_unattached_succeeds() {
    let (mut sub, mut host) = drive(Quirk::DetachUnattachedSucceeds);
    assert_status(host.attachment(&mut sub, false, 3, &[1]), Status::SUCCESS);
}

#[test]
fn delete_unallocated_succeeds() {
    let (mut sub, mut host) = drive(Quirk::DeleteUnallocatedSucceeds);
    assert_status(host.delete_namespace(&mut sub, 20), Status::SUCCESS);
}

#[test]
fn nsid_exhaustion_internal_error() {
    let (mut sub, mut host) = drive(Quirk::NsidExhaustionInternalError);
    for _ in 4..=32 {
        assert_status(host.create_namespace(&mut sub, 1, flbas(0)), Status::SUCCESS);
    }
    assert_status(host.create_namespace(&mut sub, 1, flbas(0)), Status::INTERNAL_ERROR);
}

#[test]
fn changed_list_empty_after_attach_and_detach() {
    let (mut sub, mut host) = drive(Quirk::ChangedListEmpty);
    enable_notices(&mut sub, &mut host);
    assert_status(host.attachment(&mut sub, true, 3, &[1]), Status::SUCCESS);
    assert_status(host.attachment(&mut sub, false, 1, &[1]), Status::SUCCESS);
    assert_eq!(host.ctx.events.len(), 1, "the notice still comes");
    assert!(changed_list(&mut sub, &mut host).is_empty());
}

#[test]
fn no_namespace_notice_raises_no_event() {
    let (mut sub, mut host) = drive(Quirk::NoNamespaceNotice);
    enable_notices(&mut sub, &mut host);
    assert_status(host.attachment(&mut sub, true, 3, &[1]), Status::SUCCESS);
    assert!(host.ctx.events.is_empty());
    assert_eq!(changed_list(&mut sub, &mut host), [3], "the list is still kept");
}

#[test]
fn format_ignored_keeps_the_old_format() {
    let (mut sub, mut host) = drive(Quirk::FormatIgnored);
    assert_status(host.write(&mut sub, 1, 0, 0, &[8; 512]), Status::SUCCESS);
    assert_status(host.admin(&mut sub, &namespace::format_nvm(1, FormatNvm::new().with_lbaf(2))), Status::SUCCESS);
    let (_, id) = host.identify_namespace(&mut sub, 1);
    assert_eq!(id.lba_data_size(), Some(512));
    assert_eq!(id.nuse, 1, "nothing erased either");
}

#[test]
fn format_invalid_lbaf_accepted_succeeds_and_changes_nothing() {
    let (mut sub, mut host) = drive(Quirk::FormatInvalidLbafAccepted);
    assert_status(host.admin(&mut sub, &namespace::format_nvm(1, FormatNvm::new().with_lbaf(9))), Status::SUCCESS);
    let (_, id) = host.identify_namespace(&mut sub, 1);
    assert_eq!(id.flbas_index(), 0);
}

#[test]
fn format_invalid_lbaf_accepted_creates_a_namespace_with_format_0() {
    let (mut sub, mut host) = clean();
    assert_status(host.create_namespace(&mut sub, 64, flbas(9)), Status::INVALID_FORMAT);
    assert_eq!(sub.allocated_nsids(), [1, 2, 3]);

    let (mut sub, mut host) = drive(Quirk::FormatInvalidLbafAccepted);
    let done = host.create_namespace(&mut sub, 64, flbas(9));
    assert_status(done, Status::SUCCESS);
    assert_eq!(done.dw0, 4);
    let (_, bytes) = host.identify(&mut sub, Cns::AllocatedNamespace as u8, 4, 0);
    let id = IdentifyNamespace::read_from_bytes(&bytes).unwrap();
    assert_eq!((id.nsze, id.flbas_index(), id.lba_data_size()), (64, 0, Some(512)));
}

#[test]
fn metadata_not_kept_stores_the_data_of_a_write_but_not_its_separate_metadata() {
    let with_metadata = |quirk: Option<Quirk>| {
        let mut p = profile(quirk);
        p.namespaces.push(InitialNamespace { lbads: 512, ms: 8, extended: false, blocks: 64, attached: true });
        (Subsystem::new(p).unwrap(), TestHost::new(1))
    };
    let data: Vec<u8> = (0..1024u32).map(|i| (i * 7) as u8).collect();
    let meta: Vec<u8> = (1..=16).collect();
    for (quirk, kept) in [(None, true), (Some(Quirk::MetadataNotKept), false)] {
        let (mut sub, mut host) = with_metadata(quirk);
        host.put_metadata(&meta);
        assert_status(host.write(&mut sub, 4, 0, 1, &data), Status::SUCCESS);
        host.put_metadata(&[0xEE; 16]);
        let (done, back) = host.read(&mut sub, 4, 0, 1, data.len());
        assert_status(done, Status::SUCCESS);
        assert_eq!(back, data, "the data is stored either way");
        assert_eq!(host.get_metadata(16) == meta, kept, "{quirk:?}");
    }
}

#[test]
fn allocated_identify_zero_when_detached_hides_an_unattached_namespace() {
    let identify_allocated = |sub: &mut Subsystem, host: &mut TestHost, nsid: u32| {
        let (done, data) = host.identify(sub, Cns::AllocatedNamespace as u8, nsid, 0);
        assert_status(done, Status::SUCCESS);
        u64::from_le_bytes(data[..8].try_into().unwrap())
    };
    let (mut sub, mut host) = clean();
    assert_eq!(identify_allocated(&mut sub, &mut host, 3), 64, "NSZE of the detached namespace");
    let (mut sub, mut host) = drive(Quirk::AllocatedIdentifyZeroWhenDetached);
    assert_eq!(identify_allocated(&mut sub, &mut host, 3), 0, "zeroes for the detached namespace");
    assert_eq!(identify_allocated(&mut sub, &mut host, 1), 8192, "an attached one is still described");
}

#[test]
fn no_namespace_identifiers_reports_none() {
    let ids = |sub: &mut Subsystem, host: &mut TestHost| {
        let (done, data) = host.identify(sub, Cns::Namespace as u8, 1, 0);
        assert_status(done, Status::SUCCESS);
        let (_, list) = host.identify(sub, Cns::NamespaceDescriptorList as u8, 1, 0);
        (data[104..128].iter().any(|&b| b != 0), list.iter().any(|&b| b != 0))
    };
    let (mut sub, mut host) = clean();
    assert_eq!(ids(&mut sub, &mut host), (true, true), "NGUID/EUI64 and descriptors reported");
    let (mut sub, mut host) = drive(Quirk::NoNamespaceIdentifiers);
    assert_eq!(ids(&mut sub, &mut host), (false, false), "nothing identifies the namespace");
}

#[test]
fn namespace_management_not_implemented_advertises_what_it_does_not_do() {
    let (mut sub, mut host) = drive(Quirk::NamespaceManagementNotImplemented);
    assert!(host.identify_controller(&mut sub).oacs.namespace_management(), "OACS bit 3 still set");
    assert_status(host.delete_namespace(&mut sub, 0xFFFF_FFFF), Status::INVALID_COMMAND_OPCODE);
    assert_eq!(sub.allocated_nsids(), [1, 2, 3], "nothing deleted");
    let (mut sub, mut host) = clean();
    assert_status(host.delete_namespace(&mut sub, 0xFFFF_FFFF), Status::SUCCESS);
}

/// The SMART / Health traffic counters (§5.14.1.2) and the four quirks that each break
/// one: Data Units in 512-byte units whatever the LBA size, Compare among the reads,
/// FUA writes among the writes.
#[test]
fn smart_traffic_counter_quirks_break_one_counter_each() {
    use nvme::spec::log::SmartHealthLog;
    let counters = |quirk: Option<Quirk>| {
        let mut p = Profile::builtin("enterprise-1.4").unwrap();
        p.capacity_bytes = 64 << 20;
        p.namespaces = vec![nvme_sim::profile::InitialNamespace {
            lbads: 4096,
            ms: 0,
            extended: false,
            blocks: 1024,
            attached: true,
        }];
        if let Some(q) = quirk {
            p = p.with_quirk(q);
        }
        let mut sub = Subsystem::new(p).unwrap();
        let mut host = TestHost::new(1);
        let data = vec![0x5Au8; 8 * 4096];
        for lba in (0..1000u64).step_by(8) {
            assert_status(host.write(&mut sub, 1, lba, 7, &data), Status::SUCCESS);
        }
        host.put(&data);
        assert_status(host.io(&mut sub, &nvm::write(1, 0, 7, true)), Status::SUCCESS);
        for lba in (0..1000u64).step_by(8) {
            assert_status(host.read(&mut sub, 1, lba, 7, 8 * 4096).0, Status::SUCCESS);
        }
        host.put(&data);
        assert_status(host.io(&mut sub, &nvm::compare(1, 0, 7)), Status::SUCCESS);
        let (done, bytes) = host.log_page(&mut sub, LogPageId::SmartHealth as u8, 0xFFFF_FFFF, 512, false);
        assert_status(done, Status::SUCCESS);
        let log = SmartHealthLog::read_from_bytes(&bytes).unwrap();
        (
            log.host_write_commands.get(),
            log.host_read_commands.get(),
            log.data_units_written.get(),
            log.data_units_read.get(),
        )
    };
    // 125 writes of 8 blocks of 4096 bytes and one more with FUA: 1008 blocks, 8064
    // units of 512 bytes, 9 thousands rounded up (2 counted in blocks); as many reads,
    // the last a Compare.
    assert_eq!(counters(None), (126, 126, 9, 9));
    assert_eq!(counters(Some(Quirk::HostWritesOmitFua)), (125, 126, 9, 9));
    assert_eq!(counters(Some(Quirk::HostReadsOmitCompare)), (126, 125, 9, 9));
    assert_eq!(counters(Some(Quirk::DataUnitsWrittenInBlocks)), (126, 126, 2, 9));
    assert_eq!(counters(Some(Quirk::DataUnitsReadInBlocks)), (126, 126, 9, 2));
}
