//! The NVM command set of the clean profiles: Read, Write, Flush, Compare, Write
//! Uncorrectable, Write Zeroes and Dataset Management, with their data paths (512 and
//! 4096-byte blocks, extended and separate metadata, PRP page splits) and every error
//! status the spec assigns them.

use nvme::spec::nvm::{self, DsmAttributes, DsmRange};
use nvme::spec::{Command, Status};
use nvme_sim::exec::Done;
use nvme_sim::profile::{DlfeatSetting, InitialNamespace, Profile};
use nvme_sim::subsystem::testing::TestHost;
use nvme_sim::subsystem::Subsystem;

/// Namespaces: 1 = 512-byte (8192 blocks), 2 = 4096-byte (1024), 3 = 512+8 separate
/// metadata (64), 4 = 4096+8 (64), 5 = detached 512-byte (64).
fn profile(name: &str) -> Profile {
    let mut p = Profile::builtin(name).unwrap();
    p.capacity_bytes = 64 << 20;
    let ns = |lbads, ms, blocks, attached| InitialNamespace { lbads, ms, extended: false, blocks, attached };
    p.namespaces = vec![
        ns(512, 0, 8192, true),
        ns(4096, 0, 1024, true),
        ns(512, 8, 64, true),
        ns(4096, 8, 64, true),
        ns(512, 0, 64, false),
    ];
    p
}

fn drive() -> (Subsystem, TestHost) {
    (Subsystem::new(profile("enterprise-1.4")).unwrap(), TestHost::new(1))
}

#[track_caller]
fn assert_status(done: Done, expected: Status) {
    assert!(done.status.same_code(&expected), "expected {expected}, got {}", done.status);
}

/// A block's worth of bytes that names the block: distinct for every (seed, offset).
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(seed as u32 * 7) as u8 ^ (i >> 8) as u8).collect()
}

fn dsm(host: &mut TestHost, sub: &mut Subsystem, nsid: u32, ranges: &[DsmRange]) -> Done {
    host.put(&DsmRange::encode_list(ranges));
    let cmd = nvm::dataset_management(nsid, ranges.len(), DsmAttributes::new().with_ad(true)).unwrap();
    host.io(sub, &cmd)
}

#[test]
fn writes_read_back_at_both_block_sizes() {
    let (mut sub, mut host) = drive();
    for (nsid, size) in [(1u32, 512usize), (2, 4096)] {
        let data = pattern(nsid as u8, 32 * size);
        assert_status(host.write(&mut sub, nsid, 10, 31, &data), Status::SUCCESS);
        let (done, back) = host.read(&mut sub, nsid, 10, 31, data.len());
        assert_status(done, Status::SUCCESS);
        assert_eq!(back, data);
        // A single block inside the range, and the blocks around it untouched (zeroes).
        let (_, one) = host.read(&mut sub, nsid, 11, 0, size);
        assert_eq!(one, data[size..2 * size]);
        let (_, before) = host.read(&mut sub, nsid, 9, 0, size);
        assert!(before.iter().all(|b| *b == 0));
    }
}

#[test]
fn transfers_work_whole_or_split_at_pages() {
    let (mut sub, mut host) = drive();
    // A buffer that starts mid-page and is handed over page by page.
    host.data_addr += 0x200;
    let data = pattern(3, 9 * 512);
    assert_status(host.write(&mut sub, 1, 100, 8, &data), Status::SUCCESS);
    host.page_size = None;
    let (_, back) = host.read(&mut sub, 1, 100, 8, data.len());
    assert_eq!(back, data);
    // The last block of the namespace.
    let last = pattern(9, 4096);
    assert_status(host.write(&mut sub, 2, 1023, 0, &last), Status::SUCCESS);
    assert_eq!(host.read(&mut sub, 2, 1023, 0, 4096).1, last);
}

#[test]
fn namespaces_are_independent() {
    let (mut sub, mut host) = drive();
    let a = pattern(1, 8 * 512);
    let b = pattern(2, 4096);
    assert_status(host.write(&mut sub, 1, 0, 7, &a), Status::SUCCESS);
    assert_status(host.write(&mut sub, 2, 0, 0, &b), Status::SUCCESS);
    assert_eq!(host.read(&mut sub, 1, 0, 7, a.len()).1, a);
    assert_eq!(host.read(&mut sub, 2, 0, 0, b.len()).1, b);
}

#[test]
fn separate_metadata_moves_through_mptr() {
    let (mut sub, mut host) = drive();
    let data = pattern(4, 4 * 512);
    let meta = pattern(5, 4 * 8);
    host.put_metadata(&meta);
    assert_status(host.write(&mut sub, 3, 2, 3, &data), Status::SUCCESS);
    host.put_metadata(&[0; 32]);
    let (done, back) = host.read(&mut sub, 3, 2, 3, data.len());
    assert_status(done, Status::SUCCESS);
    assert_eq!(back, data);
    assert_eq!(host.get_metadata(32), meta);
    // Only the metadata of block 3 (the second block).
    host.read(&mut sub, 3, 3, 0, 512);
    assert_eq!(host.get_metadata(8), meta[8..16]);
}

#[test]
fn extended_lbas_interleave_metadata_with_data() {
    let (mut sub, mut host) = drive();
    // Format namespace 4 (4096+8) with metadata in the extended LBA.
    let extended = nvme::spec::namespace::FormatNvm::new().with_lbaf(3).with_mset(true);
    assert_status(host.admin(&mut sub, &nvme::spec::namespace::format_nvm(4, extended)), Status::SUCCESS);
    let stream = pattern(6, 3 * 4104);
    assert_status(host.write(&mut sub, 4, 5, 2, &stream), Status::SUCCESS);
    let (_, back) = host.read(&mut sub, 4, 5, 2, stream.len());
    assert_eq!(back, stream);
    // The middle block alone: its 4096 data bytes then its 8 metadata bytes.
    let (_, middle) = host.read(&mut sub, 4, 6, 0, 4104);
    assert_eq!(middle, stream[4104..2 * 4104]);
}

#[test]
fn io_to_namespaces_that_are_not_active_is_refused() {
    let (mut sub, mut host) = drive();
    // NVMe 1.4 §6.1.5: an inactive NSID (valid, not attached) gets Invalid Field in
    // Command; an invalid one (0, above NN, FFFFFFFFh for Read/Write) Invalid Namespace or Format.
    for (nsid, status) in [
        (0, Status::INVALID_NAMESPACE_OR_FORMAT),
        (5, Status::INVALID_FIELD),
        (6, Status::INVALID_FIELD),
        (32, Status::INVALID_FIELD),
        (33, Status::INVALID_NAMESPACE_OR_FORMAT),
        (0xFFFF_FFFF, Status::INVALID_NAMESPACE_OR_FORMAT),
    ] {
        assert_status(host.read(&mut sub, nsid, 0, 0, 512).0, status);
        assert_status(host.write(&mut sub, nsid, 0, 0, &[1; 512]), status);
    }
    // Nothing reached the detached namespace 5.
    assert_eq!(sub.namespace(5).unwrap().nuse(), 0);
}

#[test]
fn lba_ranges_past_nsze_are_out_of_range() {
    let (mut sub, mut host) = drive();
    let cases = [(8192u64, 0u16), (8191, 1), (8000, 255), (u64::MAX, 0), (u64::MAX - 1, 3)];
    for (slba, nlb) in cases {
        assert_status(host.read(&mut sub, 1, slba, nlb, 0).0, Status::LBA_OUT_OF_RANGE);
        let data = vec![0xEE; (nlb as usize + 1) * 512];
        assert_status(host.write(&mut sub, 1, slba, nlb, &data), Status::LBA_OUT_OF_RANGE);
    }
    assert_eq!(sub.namespace(1).unwrap().nuse(), 0, "nothing was written");
    assert_status(host.read(&mut sub, 1, 8191, 0, 512).0, Status::SUCCESS);
}

#[test]
fn transfers_beyond_mdts_are_invalid_field() {
    let (mut sub, mut host) = drive();
    // MDTS 5: 128 KiB. 256 blocks of 512 bytes fit; 257 do not. 32 of 4096 fit; 33 do not.
    assert_status(host.read(&mut sub, 1, 0, 255, 0).0, Status::SUCCESS);
    assert_status(host.read(&mut sub, 1, 0, 256, 0).0, Status::INVALID_FIELD);
    assert_status(host.read(&mut sub, 2, 0, 31, 0).0, Status::SUCCESS);
    assert_status(host.read(&mut sub, 2, 0, 32, 0).0, Status::INVALID_FIELD);
    assert_status(host.write(&mut sub, 2, 0, 32, &vec![0; 33 * 4096]), Status::INVALID_FIELD);
    // A transfer beyond MDTS is refused before its range is checked.
    assert_status(host.read(&mut sub, 1, 8191, 300, 0).0, Status::INVALID_FIELD);
}

#[test]
fn flush_takes_an_active_nsid_or_all() {
    let (mut sub, mut host) = drive();
    assert_status(host.io(&mut sub, &nvm::flush(1)), Status::SUCCESS);
    assert_status(host.io(&mut sub, &nvm::flush(0xFFFF_FFFF)), Status::SUCCESS);
    for (nsid, status) in [
        (0, Status::INVALID_NAMESPACE_OR_FORMAT),
        (5, Status::INVALID_FIELD),
        (33, Status::INVALID_NAMESPACE_OR_FORMAT),
    ] {
        assert_status(host.io(&mut sub, &nvm::flush(nsid)), status);
    }
    // On 1.2, FFFFFFFFh is not a namespace for Flush (VWC bits 2:1 are 00b).
    let mut sub12 = Subsystem::new(profile("enterprise-1.2a")).unwrap();
    assert_status(host.io(&mut sub12, &nvm::flush(0xFFFF_FFFF)), Status::INVALID_NAMESPACE_OR_FORMAT);
}

#[test]
fn compare_reports_the_first_difference() {
    let (mut sub, mut host) = drive();
    let data = pattern(7, 4 * 512);
    assert_status(host.write(&mut sub, 1, 40, 3, &data), Status::SUCCESS);
    host.put(&data);
    assert_status(host.io(&mut sub, &nvm::compare(1, 40, 3)), Status::SUCCESS);
    let mut changed = data.clone();
    changed[3 * 512 + 17] ^= 1;
    host.put(&changed);
    assert_status(host.io(&mut sub, &nvm::compare(1, 40, 3)), Status::COMPARE_FAILURE);
    // Unwritten blocks compare equal to zeroes.
    host.put(&[0; 512]);
    assert_status(host.io(&mut sub, &nvm::compare(1, 1000, 0)), Status::SUCCESS);
    assert_status(host.io(&mut sub, &nvm::compare(1, 8192, 0)), Status::LBA_OUT_OF_RANGE);
    assert_status(host.io(&mut sub, &nvm::compare(5, 0, 0)), Status::INVALID_FIELD);
}

#[test]
fn compare_checks_separate_metadata_too() {
    let (mut sub, mut host) = drive();
    let data = pattern(8, 512);
    host.put_metadata(&[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_status(host.write(&mut sub, 3, 0, 0, &data), Status::SUCCESS);
    host.put(&data);
    host.put_metadata(&[1, 2, 3, 4, 5, 6, 7, 9]);
    assert_status(host.io(&mut sub, &nvm::compare(3, 0, 0)), Status::COMPARE_FAILURE);
    host.put_metadata(&[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_status(host.io(&mut sub, &nvm::compare(3, 0, 0)), Status::SUCCESS);
}

#[test]
fn write_uncorrectable_blocks_fail_reads_until_rewritten() {
    let (mut sub, mut host) = drive();
    assert_status(host.io(&mut sub, &nvm::write_uncorrectable(1, 20, 4)), Status::SUCCESS);
    assert_status(host.read(&mut sub, 1, 18, 3, 0).0, Status::UNRECOVERED_READ_ERROR);
    assert_status(host.read(&mut sub, 1, 25, 0, 0).0, Status::SUCCESS);
    assert_status(host.write(&mut sub, 1, 20, 4, &pattern(1, 5 * 512)), Status::SUCCESS);
    assert_status(host.read(&mut sub, 1, 18, 3, 0).0, Status::SUCCESS);
    assert_status(host.io(&mut sub, &nvm::write_uncorrectable(1, 8192, 0)), Status::LBA_OUT_OF_RANGE);
    // Deallocating clears it too.
    assert_status(host.io(&mut sub, &nvm::write_uncorrectable(1, 30, 0)), Status::SUCCESS);
    assert_status(dsm(&mut host, &mut sub, 1, &[DsmRange::new(30, 1)]), Status::SUCCESS);
    assert_status(host.read(&mut sub, 1, 30, 0, 0).0, Status::SUCCESS);
}

#[test]
fn write_zeroes_zeroes_and_deac_deallocates() {
    let (mut sub, mut host) = drive();
    assert_status(host.write(&mut sub, 1, 0, 15, &[0xCC; 16 * 512]), Status::SUCCESS);
    assert_status(host.io(&mut sub, &nvm::write_zeroes(1, 2, 3, false)), Status::SUCCESS);
    let (_, back) = host.read(&mut sub, 1, 0, 15, 16 * 512);
    assert!(back[..2 * 512].iter().all(|b| *b == 0xCC));
    assert!(back[2 * 512..6 * 512].iter().all(|b| *b == 0));
    assert!(back[6 * 512..].iter().all(|b| *b == 0xCC));
    assert_eq!(sub.namespace(1).unwrap().nuse(), 16, "written zeroes stay allocated");
    assert_status(host.io(&mut sub, &nvm::write_zeroes(1, 8, 7, true)), Status::SUCCESS);
    assert_eq!(sub.namespace(1).unwrap().nuse(), 8, "DEAC deallocated them");
    assert!(host.read(&mut sub, 1, 8, 7, 8 * 512).1.iter().all(|b| *b == 0));
    // Write Zeroes moves no data: MDTS does not limit it.
    assert_status(host.io(&mut sub, &nvm::write_zeroes(1, 0, 8191, false)), Status::SUCCESS);
    assert_status(host.io(&mut sub, &nvm::write_zeroes(1, 8191, 1, false)), Status::LBA_OUT_OF_RANGE);
    assert_status(host.io(&mut sub, &nvm::write_zeroes(5, 0, 0, false)), Status::INVALID_FIELD);
}

#[test]
fn write_zeroes_on_1_2_ignores_the_deac_bit() {
    let mut sub = Subsystem::new(profile("enterprise-1.2a")).unwrap();
    let mut host = TestHost::new(1);
    assert_status(host.write(&mut sub, 1, 0, 3, &[1; 4 * 512]), Status::SUCCESS);
    assert_status(host.io(&mut sub, &nvm::write_zeroes(1, 0, 3, true)), Status::SUCCESS);
    assert_eq!(sub.namespace(1).unwrap().nuse(), 4, "bit 25 is reserved in 1.2a: the zeroes are written");
    assert!(host.read(&mut sub, 1, 0, 3, 4 * 512).1.iter().all(|b| *b == 0));
}

#[test]
fn dataset_management_deallocates_every_range() {
    let (mut sub, mut host) = drive();
    assert_status(host.write(&mut sub, 1, 0, 63, &[0x11; 64 * 512]), Status::SUCCESS);
    let ranges = [DsmRange::new(0, 4), DsmRange::new(10, 2), DsmRange::new(63, 1), DsmRange::new(30, 0)];
    assert_status(dsm(&mut host, &mut sub, 1, &ranges), Status::SUCCESS);
    assert_eq!(sub.namespace(1).unwrap().nuse(), 64 - 7);
    let (_, back) = host.read(&mut sub, 1, 0, 63, 64 * 512);
    let block = |n: usize| &back[n * 512..(n + 1) * 512];
    for n in [0, 1, 2, 3, 10, 11, 63] {
        assert!(block(n).iter().all(|b| *b == 0), "block {n} deallocated reads zeroes");
    }
    for n in [4, 9, 12, 30, 62] {
        assert!(block(n).iter().all(|b| *b == 0x11), "block {n} kept");
    }
}

#[test]
fn dataset_management_with_a_bad_range_deallocates_nothing() {
    let (mut sub, mut host) = drive();
    assert_status(host.write(&mut sub, 1, 0, 15, &[0x22; 16 * 512]), Status::SUCCESS);
    let ranges = [DsmRange::new(0, 4), DsmRange::new(8190, 3)];
    assert_status(dsm(&mut host, &mut sub, 1, &ranges), Status::LBA_OUT_OF_RANGE);
    assert_eq!(sub.namespace(1).unwrap().nuse(), 16);
    assert!(host.read(&mut sub, 1, 0, 3, 4 * 512).1.iter().all(|b| *b == 0x22));
    assert_status(dsm(&mut host, &mut sub, 5, &ranges[..1]), Status::INVALID_FIELD);
}

#[test]
fn dataset_management_takes_256_ranges_and_ignores_hints() {
    let (mut sub, mut host) = drive();
    assert_status(host.write(&mut sub, 1, 0, 255, &[0x33; 256 * 512]), Status::SUCCESS);
    let ranges: Vec<DsmRange> = (0..256).map(|i| DsmRange::new(i, 1)).collect();
    // Hints only (no AD): nothing deallocated.
    host.put(&DsmRange::encode_list(&ranges));
    let hint = nvm::dataset_management(1, 256, DsmAttributes::new().with_idr(true)).unwrap();
    assert_status(host.io(&mut sub, &hint), Status::SUCCESS);
    assert_eq!(sub.namespace(1).unwrap().nuse(), 256);
    assert_status(dsm(&mut host, &mut sub, 1, &ranges), Status::SUCCESS);
    assert_eq!(sub.namespace(1).unwrap().nuse(), 0);
}

#[test]
fn deallocated_blocks_read_as_dlfeat_says() {
    let mut p = profile("enterprise-1.4");
    p.dlfeat = DlfeatSetting::Ones;
    let mut sub = Subsystem::new(p).unwrap();
    let mut host = TestHost::new(1);
    assert!(host.read(&mut sub, 1, 0, 0, 512).1.iter().all(|b| *b == 0xFF), "unwritten reads FFh");
    assert_status(host.write(&mut sub, 1, 0, 0, &[0; 512]), Status::SUCCESS);
    assert_status(dsm(&mut host, &mut sub, 1, &[DsmRange::new(0, 1)]), Status::SUCCESS);
    assert!(host.read(&mut sub, 1, 0, 0, 512).1.iter().all(|b| *b == 0xFF));
    // Write Zeroes still writes zeroes; DEAC cannot deallocate to zeroes here.
    assert_status(host.io(&mut sub, &nvm::write_zeroes(1, 0, 0, true)), Status::SUCCESS);
    assert!(host.read(&mut sub, 1, 0, 0, 512).1.iter().all(|b| *b == 0));
    let (_, id) = host.identify_namespace(&mut sub, 1);
    assert!(!id.dlfeat.write_zeroes_deallocate());
}

#[test]
fn unsupported_and_unknown_nvm_opcodes_are_invalid() {
    let (mut sub, mut host) = drive();
    // (The reservation commands are implemented: sim/tests/subsystem_reservations.rs.)
    let opcodes = [0x03, 0x7F, 0x80, 0xFF];
    for op in opcodes {
        let cmd = Command { opcode: op, nsid: 1, ..Default::default() };
        assert_status(host.io(&mut sub, &cmd), Status::INVALID_COMMAND_OPCODE);
    }
    // A drive without the optional commands refuses them.
    let mut p = profile("enterprise-1.4");
    p.optional_commands.clear();
    let mut bare = Subsystem::new(p).unwrap();
    for cmd in [
        nvm::compare(1, 0, 0),
        nvm::write_zeroes(1, 0, 0, false),
        nvm::write_uncorrectable(1, 0, 0),
        nvm::verify(1, 0, 0),
    ] {
        assert_status(host.io(&mut bare, &cmd), Status::INVALID_COMMAND_OPCODE);
    }
    let cmd = nvm::dataset_management(1, 1, DsmAttributes::new().with_ad(true)).unwrap();
    assert_status(host.io(&mut bare, &cmd), Status::INVALID_COMMAND_OPCODE);
}

#[test]
fn a_buffer_outside_host_memory_is_a_data_transfer_error() {
    let (mut sub, mut host) = drive();
    host.data_addr = 0x10;
    assert_status(host.read(&mut sub, 1, 0, 0, 0).0, Status::DATA_TRANSFER_ERROR);
    assert_status(host.write(&mut sub, 1, 0, 0, &[]), Status::DATA_TRANSFER_ERROR);
    assert_eq!(sub.namespace(1).unwrap().nuse(), 0);
    // A metadata pointer outside host memory fails the command as well.
    let mut host = TestHost::new(1);
    host.metadata_addr = 0x10;
    assert_status(host.read(&mut sub, 3, 0, 0, 0).0, Status::DATA_TRANSFER_ERROR);
}

#[test]
fn a_64_gib_namespace_costs_nothing_until_written() {
    let mut sub = Subsystem::builtin("enterprise-1.4").unwrap();
    let mut host = TestHost::new(1);
    let ns = sub.namespace(1).unwrap();
    assert_eq!(ns.nsze, 134_217_728);
    assert_eq!(ns.media(nvme_sim::subsystem::namespace::Region::Data).resident_bytes(), 0);
    let data = pattern(1, 4096);
    assert_status(host.write(&mut sub, 1, 134_217_720, 7, &data), Status::SUCCESS);
    assert_eq!(host.read(&mut sub, 1, 134_217_720, 7, 4096).1, data);
    let resident = sub.namespace(1).unwrap().media(nvme_sim::subsystem::namespace::Region::Data).resident_bytes();
    assert_eq!(resident, 64 << 10);
}
