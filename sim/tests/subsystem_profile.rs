//! Loading drive profiles: the shipped ones load clean, and every kind of malformed
//! profile is an error value saying file:line:column, what is wrong and what is allowed.

use nvme::spec::Version;
use nvme_sim::profile::{DlfeatSetting, OptionalCommand, Profile, ProfileError, Quirk};

const GOOD: &str = r#"name: tiny
description: a small test drive
version: "1.4"
identity:
  pci_vendor_id: 0x5354
  pci_subsystem_vendor_id: 0x5354
  serial: T0001
  model: tiny test drive
  firmware: T1
  ieee_oui: 0x025354
controller:
  cntlid: 1
  mdts: 5
  aerl: 3
  acl: 3
  volatile_write_cache: true
  namespace_attribute_notices: true
  max_queue_entries: 256
  timeout_ms: 2000
  max_io_queues: 4
capacity_bytes: 1048576
max_namespaces: 4
lba_formats:
  - {lbads: 512, ms: 0}
  - {lbads: 4096}
dlfeat: zeroes
optional_commands: [dataset_management, namespace_management]
namespaces:
  - {lbads: 512, blocks: 1024}
quirks: [nn-understated]
"#;

/// The error for `text` (a variation of GOOD), which must be an Invalid error.
fn error_of(text: &str) -> (u32, u32, String) {
    match Profile::from_str(text, "fixtures/sim/tiny.yaml") {
        Err(ProfileError::Invalid { origin, line, column, message }) => {
            assert_eq!(origin, "fixtures/sim/tiny.yaml");
            (line, column, message)
        }
        other => panic!("expected an invalid-profile error, got {other:?}"),
    }
}

#[test]
fn a_well_formed_profile_loads_every_field() {
    let p = Profile::from_str(GOOD, "tiny.yaml").unwrap();
    assert_eq!(p.name, "tiny");
    assert_eq!(p.version, Version::V1_4);
    assert_eq!(p.identity.serial, "T0001");
    assert_eq!(p.controller.mdts, 5);
    assert_eq!(p.controller.timeout_ms, 2000);
    assert_eq!(p.lba_formats[1].lbads, 4096);
    assert_eq!(p.lba_formats[1].ms, 0, "ms defaults to 0");
    assert_eq!(p.dlfeat, DlfeatSetting::Zeroes);
    assert!(p.supports(OptionalCommand::DatasetManagement) && !p.supports(OptionalCommand::Compare));
    assert!(p.namespaces[0].attached, "attached defaults to true");
    assert_eq!(p.quirks, [Quirk::NnUnderstated]);
    assert_eq!(p.vs(), 0x0001_0400);
    assert_eq!(p.with_quirk(Quirk::VerMismatch).quirks, [Quirk::NnUnderstated, Quirk::VerMismatch]);
}

#[test]
fn shipped_profiles_describe_the_enterprise_drive() {
    let p14 = Profile::builtin("enterprise-1.4").unwrap();
    assert_eq!(p14.version, Version::V1_4);
    assert_eq!(p14.max_namespaces, 32);
    assert_eq!(p14.controller.mdts, 5);
    assert!(p14.controller.volatile_write_cache && p14.controller.namespace_attribute_notices);
    assert_eq!(p14.dlfeat, DlfeatSetting::Zeroes);
    let sizes: Vec<(u32, u16)> = p14.lba_formats.iter().map(|f| (f.lbads, f.ms)).collect();
    assert_eq!(sizes, [(512, 0), (512, 8), (4096, 0), (4096, 8)]);
    // Room for 32 namespaces of 1 GiB (262144 blocks of 4096 bytes) at least.
    assert!(p14.capacity_bytes >= 32 * (1 << 30));
    let p12 = Profile::builtin("enterprise-1.2a").unwrap();
    assert_eq!(p12.version, Version::V1_2);
    assert_eq!(p12.dlfeat, DlfeatSetting::NotReported);
    assert_eq!(Profile::builtin_names().collect::<Vec<_>>(), ["enterprise-1.4", "enterprise-1.2a"]);
}

#[test]
fn an_unknown_key_names_its_place_and_the_allowed_keys() {
    let text = GOOD.replace("max_namespaces: 4\n", "max_namespaces: 4\nmax_namespace: 5\n");
    let (line, column, message) = error_of(&text);
    assert_eq!((line, column), (23, 1));
    assert!(message.contains("unknown field `max_namespace`"), "{message}");
    assert!(message.contains("max_namespaces"), "the allowed keys are listed: {message}");
    let text = GOOD.replace("  mdts: 5\n", "  mdts: 5\n  mtds: 5\n");
    let (line, column, message) = error_of(&text);
    assert_eq!((line, column), (14, 3));
    assert!(message.contains("unknown field `mtds`"), "{message}");
}

#[test]
fn a_wrong_type_names_its_place() {
    let text = GOOD.replace("  mdts: 5\n", "  mdts: five\n");
    let (line, column, message) = error_of(&text);
    assert_eq!((line, column), (13, 9));
    assert!(message.contains("u8"), "{message}");
    let text = GOOD.replace("volatile_write_cache: true", "volatile_write_cache: 3");
    let (line, _, _) = error_of(&text);
    assert_eq!(line, 16);
}

#[test]
fn an_unknown_quirk_lists_the_known_ones() {
    let text = GOOD.replace("quirks: [nn-understated]", "quirks:\n  - nn-understated\n  - flush-ignored-forever");
    let (line, column, message) = error_of(&text);
    assert_eq!((line, column), (32, 5));
    assert!(message.contains("unknown variant `flush-ignored-forever`"), "{message}");
    assert!(message.contains("stale-after-deallocate"), "{message}");
}

#[test]
fn a_bad_version_says_which_are_allowed() {
    let text = GOOD.replace("version: \"1.4\"", "version: \"1.5\"");
    let (line, column, message) = error_of(&text);
    assert_eq!((line, column), (3, 10));
    assert!(message.contains("`1.5`") && message.contains("1.2, 1.4"), "{message}");
}

#[test]
fn dlfeat_before_1_3_must_be_not_reported() {
    let text = GOOD.replace("version: \"1.4\"", "version: \"1.2\"");
    let (line, column, message) = error_of(&text);
    assert_eq!((line, column), (26, 9));
    assert!(message.contains("reserved before NVMe 1.3"), "{message}");
    let fixed = text.replace("dlfeat: zeroes", "dlfeat: not_reported");
    assert!(Profile::from_str(&fixed, "tiny.yaml").is_ok());
}

#[test]
fn verify_before_1_4_is_refused_at_the_version() {
    let text = GOOD
        .replace("version: \"1.4\"", "version: \"1.2\"")
        .replace("dlfeat: zeroes", "dlfeat: not_reported")
        .replace("optional_commands: [dataset_management,", "optional_commands: [verify, dataset_management,");
    let (line, column, message) = error_of(&text);
    assert_eq!((line, column), (3, 10));
    assert!(message.contains("`verify` (ONCS bit 7) is NVMe 1.4 and later"), "{message}");
    let p = Profile::from_str(&GOOD.replace("optional_commands: [", "optional_commands: [verify, "), "tiny.yaml");
    assert!(p.unwrap().optional_commands.contains(&nvme_sim::profile::OptionalCommand::Verify));
}

#[test]
fn values_out_of_range_point_at_the_value() {
    let cases = [
        ("  serial: T0001", "  serial: T0001T0001T0001T0001X", 7, "serial"),
        ("  ieee_oui: 0x025354", "  ieee_oui: 0x1025354", 10, "24 bits"),
        ("  mdts: 5", "  mdts: 16", 13, "mdts"),
        ("  timeout_ms: 2000", "  timeout_ms: 2100", 19, "multiple of 500"),
        ("  - {lbads: 4096}", "  - {lbads: 1000}", 25, "power of two"),
        ("  - {lbads: 512, blocks: 1024}", "  - {lbads: 4096, ms: 8, blocks: 1}", 29, "no LBA format"),
        ("  - {lbads: 512, blocks: 1024}", "  - {lbads: 512, blocks: 4096}", 29, "capacity_bytes"),
    ];
    for (from, to, line, needle) in cases {
        let text = GOOD.replace(from, to);
        assert_ne!(text, GOOD, "{from}");
        let (l, _, message) = error_of(&text);
        assert_eq!(l, line, "{to}: {message}");
        assert!(message.contains(needle), "{to}: {message}");
    }
}

#[test]
fn ports_and_namespace_sharing_load_and_default() {
    let p = Profile::from_str(GOOD, "tiny.yaml").unwrap();
    assert_eq!(p.controller.ports, 1, "ports defaults to 1");
    assert_eq!(p.controller.cntlids(), [1]);
    assert!(p.private_namespaces.is_empty(), "shared defaults to true");
    let text = GOOD.replace("  max_io_queues: 4\n", "  max_io_queues: 4\n  ports: 3\n").replace(
        "  - {lbads: 512, blocks: 1024}\n",
        "  - {lbads: 512, blocks: 512}\n  - {lbads: 512, blocks: 8, shared: false}\n",
    );
    let p = Profile::from_str(&text, "tiny.yaml").unwrap();
    assert_eq!(p.controller.ports, 3);
    assert_eq!(p.controller.cntlids(), [1, 2, 3]);
    assert_eq!(p.namespaces.len(), 2);
    assert_eq!(p.private_namespaces, [2]);
    assert_eq!(Profile::builtin("enterprise-1.4").unwrap().controller.cntlids(), [1, 2], "dual port");
    assert_eq!(Profile::builtin("enterprise-1.2a").unwrap().controller.ports, 1);
}

#[test]
fn ports_out_of_range_point_at_the_value() {
    for (ports, needle) in [("0", "1 to 16"), ("17", "1 to 16")] {
        let text = GOOD.replace("  max_io_queues: 4\n", &format!("  max_io_queues: 4\n  ports: {ports}\n"));
        let (line, column, message) = error_of(&text);
        assert_eq!((line, column), (21, 10), "{ports}: {message}");
        assert!(message.contains(needle), "{ports}: {message}");
    }
    // CNTLIDs run from cntlid: the last port's must not be a reserved value (FFF0h and up).
    let text = GOOD
        .replace("  cntlid: 1\n", "  cntlid: 0xffee\n")
        .replace("  max_io_queues: 4\n", "  max_io_queues: 4\n  ports: 3\n");
    let (line, column, message) = error_of(&text);
    assert_eq!((line, column), (21, 10), "{message}");
    assert!(message.contains("reserved"), "{message}");
    let text = GOOD.replace("  max_io_queues: 4\n", "  max_io_queues: 4\n  ports: two\n");
    assert_eq!(error_of(&text).0, 21);
    let text = GOOD.replace("  - {lbads: 512, blocks: 1024}", "  - {lbads: 512, blocks: 1024, shared: \"false\"}");
    assert_eq!(error_of(&text).0, 29);
}

#[test]
fn broken_yaml_and_missing_files_are_errors_not_panics() {
    let (line, _, _) = error_of("name: [unclosed\n");
    assert_eq!(line, 1);
    let (_, _, message) = error_of("name: x\n");
    assert!(message.contains("missing field"), "{message}");
    let err = Profile::from_path("/nonexistent/profile.yaml").unwrap_err();
    assert!(err.to_string().starts_with("/nonexistent/profile.yaml: cannot read the profile"), "{err}");
    let err = Profile::builtin("enterprise-9").unwrap_err();
    assert!(err.to_string().contains("enterprise-1.4, enterprise-1.2a"), "{err}");
}

#[test]
fn errors_display_as_file_line_column() {
    let text = GOOD.replace("version: \"1.4\"", "version: \"2.0\"");
    let err = Profile::from_str(&text, "fixtures/sim/tiny.yaml").unwrap_err();
    assert!(err.to_string().starts_with("fixtures/sim/tiny.yaml:3:10: unsupported NVMe version `2.0`"), "{err}");
}

#[test]
fn numbers_and_booleans_are_typed_not_quoted() {
    // The typed profile loads (GOOD has `mdts: 5`, `volatile_write_cache: true`).
    let p = Profile::from_str(GOOD, "fixtures/sim/tiny.yaml").unwrap();
    assert_eq!((p.controller.mdts, p.controller.volatile_write_cache), (5, true));
    let cases = [
        (
            "  mdts: 5",
            "  mdts: \"5\"",
            (13, 9),
            "\"5\" is quoted text; a whole number (u8) is written without quotes: 5",
        ),
        ("  aerl: 3", "  aerl: '3'", (14, 9), "\"3\" is quoted text; a whole number (u8) is written without quotes: 3"),
        ("max_namespaces: 4", "max_namespaces: \"4\"", (22, 17), "\"4\" is quoted text"),
        ("  - {lbads: 4096}", "  - {lbads: \"4096\"}", (25, 13), "\"4096\" is quoted text"),
        (
            "  volatile_write_cache: true",
            "  volatile_write_cache: \"true\"",
            (16, 25),
            "\"true\" is quoted text; true or false is written without quotes: true",
        ),
    ];
    for (from, to, at, needle) in cases {
        let text = GOOD.replace(from, to);
        assert_ne!(text, GOOD, "{from}");
        let (line, column, message) = error_of(&text);
        assert_eq!((line, column), at, "{to}: {message}");
        assert!(message.starts_with(needle), "{to}: {message}");
    }
}
