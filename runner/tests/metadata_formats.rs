//! Drives nvtest did not configure: namespaces formatted with metadata (extended LBAs,
//! FLBAS bit 4, and a separate buffer at MPTR) that nvtest cannot re-create, and
//! namespaces too small for a case. The suites move the metadata each format carries,
//! judge it where nvtest wrote it, and skip — naming what they looked at — where no
//! namespace fits; a drive that drops separate metadata fails, naming the metadata rule.

use std::path::PathBuf;

use nvme_sim::profile::{InitialNamespace, OptionalCommand, Profile};
use nvme_sim::subsystem::quirk::Quirk;
use nvtest::exec::Session;
use nvtest::suite::{load_file, LoadedSuite};
use nvtest::verdict::Verdict;

fn suite(name: &str) -> LoadedSuite {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../suites").join(format!("{name}.yaml"));
    load_file(&path, Some(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn session(profile: Profile) -> Session {
    let name = format!("sim:{}", profile.name);
    let device = nvtest::targets::open_sim(profile).unwrap_or_else(|e| panic!("{e}"));
    Session::with_device(name, device).unwrap_or_else(|e| panic!("{e}"))
}

fn namespace(lbads: u32, ms: u16, extended: bool, blocks: u64) -> InitialNamespace {
    InitialNamespace { lbads, ms, extended, blocks, attached: true }
}

/// enterprise-1.4 without Namespace Management, provisioned with `namespaces`: the
/// suites must take them as they are (as on QEMU).
fn provisioned(namespaces: Vec<InitialNamespace>) -> Profile {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.optional_commands.retain(|c| *c != OptionalCommand::NamespaceManagement);
    p.namespaces = namespaces;
    p
}

/// Every namespace carries metadata: 512+8 in a separate buffer and 4096+8 as extended
/// LBAs, two of each.
fn metadata_only() -> Profile {
    provisioned(vec![
        namespace(512, 8, false, 65536),
        namespace(4096, 8, true, 65536),
        namespace(512, 8, true, 65536),
        namespace(4096, 8, false, 65536),
    ])
}

#[test]
fn both_suites_hold_on_namespaces_that_carry_metadata() {
    let mut s = session(metadata_only());
    let (mut passed, mut skipped) = (Vec::new(), Vec::new());
    for name in ["namespaces", "trim"] {
        for case in suite(name).cases {
            let outcome = s.run_case(&case, nvtest::exec::fresh_run_seed());
            match &outcome.verdict {
                Verdict::Pass => passed.push(format!("{name}::{}", case.name)),
                Verdict::Skipped(reason) => skipped.push(format!("{name}::{}: {reason}", case.name)),
                other => panic!("{name}::{} on metadata formats: {other:?}\n{:#?}", case.name, outcome.log),
            }
        }
    }
    // The I/O cases ran (they need no Namespace Management): data and metadata moved
    // and judged on both layouts.
    for must_pass in [
        "namespaces::write-crossing-nsze/lbads=512",
        "namespaces::last-lba/lbads=512",
        "namespaces::transfer-follows-format/lbads=4096",
        "namespaces::transfer-beyond-mdts/lbads=4096",
        "trim::deallocated-reads/blocks=8,lbads=512",
        "trim::write-zeroes/blocks=8,lbads=4096",
        "trim::other-namespace-untouched/lbads=512",
    ] {
        assert!(passed.iter().any(|p| p == must_pass), "{must_pass} did not pass; skipped: {skipped:#?}");
    }
    for reason in &skipped {
        assert!(!reason.contains("metadata"), "no case is skipped for carrying metadata: {reason}");
    }
}

#[test]
fn a_drive_that_drops_separate_metadata_fails_naming_the_metadata_rule() {
    let mut s = session(metadata_only().with_quirk(Quirk::MetadataNotKept));
    let trim = suite("trim");
    let case = trim.cases.iter().find(|c| c.name == "deallocated-reads/blocks=8,lbads=512").unwrap();
    match s.run_case(case, nvtest::exec::fresh_run_seed()).verdict {
        Verdict::Fail(f) => {
            assert!(f.rule.to_string().contains("§8.2 Metadata Region"), "{f}");
            assert!(f.observed.contains("8-byte metadata (separate buffer) of LBA"), "{f}");
            assert!(f.expected.contains("the metadata written with the block"), "{f}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    // The extended LBA of the same data size is not affected by the quirk.
    let namespaces = suite("namespaces");
    let case = namespaces.cases.iter().find(|c| c.name == "last-lba/lbads=4096").unwrap();
    let mut s = session(
        provisioned(vec![namespace(4096, 8, true, 65536), namespace(512, 8, true, 65536)])
            .with_quirk(Quirk::MetadataNotKept),
    );
    let outcome = s.run_case(case, nvtest::exec::fresh_run_seed());
    assert_eq!(outcome.verdict, Verdict::Pass, "{:#?}", outcome.log);
}

#[test]
fn metadata_free_namespaces_are_preferred_and_metadata_is_still_carried_when_not() {
    // One plain and one metadata namespace of 512 bytes: a case needing one takes the
    // plain one; a case needing two takes both, and passes.
    let profile = provisioned(vec![
        namespace(512, 8, false, 65536),
        namespace(512, 0, false, 65536),
        namespace(4096, 8, true, 65536),
    ]);
    let mut s = session(profile);
    let trim = suite("trim");
    let one = trim.cases.iter().find(|c| c.name == "write-zeroes/blocks=1,lbads=512").unwrap();
    let outcome = s.run_case(one, nvtest::exec::fresh_run_seed());
    assert_eq!(outcome.verdict, Verdict::Pass, "{:#?}", outcome.log);
    assert!(
        outcome.log.iter().any(|l| l.starts_with("Write NSID 2 ")),
        "the metadata-free NSID 2 was taken: {:#?}",
        outcome.log
    );
    let two = trim.cases.iter().find(|c| c.name == "other-namespace-untouched/lbads=512").unwrap();
    let outcome = s.run_case(two, nvtest::exec::fresh_run_seed());
    assert_eq!(outcome.verdict, Verdict::Pass, "{:#?}", outcome.log);
}

#[test]
fn namespaces_too_small_for_a_case_are_a_skip_naming_what_was_looked_at() {
    let mut s = session(provisioned(vec![namespace(512, 0, false, 1000), namespace(4096, 8, true, 2000)]));
    let trim = suite("trim");
    let case = trim.cases.iter().find(|c| c.name == "deallocated-reads/blocks=8,lbads=512").unwrap();
    match s.run_case(case, nvtest::exec::fresh_run_seed()).verdict {
        Verdict::Skipped(reason) => {
            // The case writes LBAs 0 to 1023: that, not the 65536 blocks it would create,
            // is what an existing namespace must hold.
            assert!(reason.contains("512-byte LBAs and at least 1024 blocks"), "{reason}");
            assert!(
                reason.contains("active namespaces: NSID 1: 512, 1000 blocks, NSID 2: 4096+8 (extended), 2000 blocks"),
                "{reason}"
            );
        }
        other => panic!("expected a skip, got {other:?}"),
    }
}
