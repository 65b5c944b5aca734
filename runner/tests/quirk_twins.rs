//! Every check proven both ways: each case of the shipped suites passes on the clean
//! simulated profiles, and fails — naming its rule — on a profile with the quirk made to
//! violate it. `every_case_has_a_failing_twin` keeps the table complete.

use std::path::PathBuf;

use nvme_sim::profile::Profile;
use nvme_sim::subsystem::quirk::Quirk;
use nvtest::exec::Session;
use nvtest::suite::{load_file, ExpandedCase, LoadedSuite};
use nvtest::targets::TargetSpec;
use nvtest::verdict::Verdict;

/// (suite, case, quirk, a fragment of the rule the failure must name).
/// `case` is a case name as written in the suite (all its matrix expansions) or one
/// expanded name (`transfer-follows-format/lbads=512`).
const TWINS: &[(&str, &str, &str, &str)] = &[
    ("namespaces", "identify-controller", "serial-not-ascii", "(SN, MN, FR)"),
    ("namespaces", "identify-controller", "ver-mismatch", "(VER) and §3.1.2"),
    ("namespaces", "namespaces-as-found", "ncap-exceeds-nsze", "(NSZE, NCAP, NUSE)"),
    ("namespaces", "namespaces-as-found", "nuse-exceeds-ncap", "(NSZE, NCAP, NUSE)"),
    ("namespaces", "namespaces-as-found", "flbas-beyond-nlbaf", "(FLBAS, NLBAF)"),
    ("namespaces", "create-32-namespaces", "lbaf-wrong-size", "uses the LBA format the host selected"),
    ("namespaces", "create-32-namespaces", "namespace-management-not-implemented", "OACS bit 3"),
    ("namespaces", "active-namespace-list", "active-list-omits-last", "CNS 02h"),
    ("namespaces", "namespace-sizes", "ncap-exceeds-nsze", "(NSZE, NCAP, NUSE)"),
    ("namespaces", "namespace-sizes", "nuse-exceeds-ncap", "(NSZE, NCAP, NUSE)"),
    ("namespaces", "lba-format-table", "flbas-beyond-nlbaf", "(FLBAS, NLBAF)"),
    ("namespaces", "unique-identifiers", "duplicate-nguid", "§7.11 Unique Identifier"),
    ("namespaces", "identifiers-present", "no-namespace-identifiers", "§7.11 Unique Identifier"),
    ("namespaces", "descriptor-lists", "descriptor-list-mismatch", "CNS 03h"),
    ("namespaces", "allocated-namespace-list", "allocated-list-omits-inactive", "CNS 10h"),
    ("namespaces", "allocated-namespace-list", "allocated-identify-zero-when-detached", "CNS 11h"),
    ("namespaces", "controller-lists", "controller-list-empty", "CNS 12h"),
    ("namespaces", "isolation", "namespace-write-leak", "§6.1 Namespaces"),
    ("namespaces", "last-lba", "last-lba-rejected", "LBAs 0 through NSZE - 1 are valid"),
    ("namespaces", "read-at-nsze", "lba-past-nsze-accepted", "Read command"),
    ("namespaces", "read-crossing-nsze", "lba-past-nsze-accepted", "Read command"),
    ("namespaces", "write-at-nsze", "lba-past-nsze-accepted", "Write command"),
    ("namespaces", "write-crossing-nsze", "lba-past-nsze-accepted", "Write command"),
    ("namespaces", "transfer-follows-format/lbads=512", "format-512-addresses-4096", "LBA Format"),
    ("namespaces", "transfer-follows-format/lbads=4096", "format-4096-addresses-512", "LBA Format"),
    ("namespaces", "compare-follows-data", "compare-always-succeeds", "§6.5 Compare command"),
    ("namespaces", "transfer-beyond-mdts", "mdts-not-enforced", "(MDTS)"),
    ("namespaces", "io-to-unallocated-nsid", "inactive-namespace-io-accepted", "§6.1.5"),
    ("namespaces", "io-to-nsid-zero", "inactive-namespace-io-accepted", "NSID 0"),
    ("namespaces", "io-to-broadcast-nsid", "inactive-namespace-io-accepted", "broadcast"),
    ("namespaces", "io-to-detached-namespace", "inactive-namespace-io-accepted", "§6.1.5"),
    ("namespaces", "detach-attach-keeps-data", "detach-loses-data", "§8.11"),
    ("namespaces", "attach-already-attached", "attach-twice-succeeds", "§5.19"),
    ("namespaces", "detach-not-attached", "detach-unattached-succeeds", "§5.19"),
    ("namespaces", "detach-survives-reset", "detach-undone-by-reset", "§5.19 Namespace Attachment"),
    ("namespaces", "identify-inactive-is-zero", "identify-inactive-nonzero", "CNS 00h"),
    ("namespaces", "namespace-change-event", "no-namespace-notice", "§5.2 Asynchronous Event Request"),
    ("namespaces", "changed-namespace-list", "changed-list-empty", "Log Identifier 04h"),
    ("namespaces", "format-change-event", "no-namespace-notice", "§5.2 Asynchronous Event Request"),
    ("namespaces", "delete-change-event", "changed-list-empty", "Log Identifier 04h"),
    ("namespaces", "delete-unallocated", "delete-unallocated-succeeds", "§5.20"),
    ("namespaces", "create-beyond-capacity", "create-beyond-capacity", "Namespace Insufficient Capacity"),
    ("namespaces", "create-beyond-nn", "nsid-exhaustion-internal-error", "Namespace Identifier Unavailable"),
    ("namespaces", "create-invalid-format", "format-invalid-lbaf-accepted", "§5.20"),
    ("namespaces", "format-to-4096", "format-ignored", "uses the LBA format the host selected"),
    ("namespaces", "format-to-512", "format-ignored", "uses the LBA format the host selected"),
    ("namespaces", "format-invalid-lbaf", "format-invalid-lbaf-accepted", "§5.23"),
    ("namespaces", "delete-all", "delete-broadcast-ignored", "NSID FFFFFFFFh deletes every namespace"),
    ("namespaces", "create-32-namespaces", "nsze-understated", "(NSZE, NCAP)"),
    ("namespaces", "detach-not-attached", "fatal-on-detach-unattached", "§4.6 Completion Queue Entry"),
    ("namespaces", "io-to-detached-namespace", "controller-list-stale-after-detach", "CNS 12h"),
    ("namespaces", "format-erases-data", "format-keeps-data", "§5.23 Format NVM"),
    ("namespaces", "every-lba-format", "format-rejects-advertised-lbaf", "LBAF0–LBAF15"),
    ("namespaces", "new-namespace-unwritten", "create-keeps-old-media", "§6.7.1.1"),
    ("namespaces", "new-namespace-unwritten", "deleted-namespace-stays-allocated", "(CNS 02h, CNS 10h)"),
    ("namespaces", "utilization-follows-writes", "nuse-not-updated", "NUSE"),
    // Each SMART counter the case's traffic moves, each broken alone.
    ("namespaces", "smart-counts-host-traffic", "data-units-read-in-blocks", "Data Units Read, Data Units Written"),
    ("namespaces", "smart-counts-host-traffic", "data-units-written-in-blocks", "Data Units Read, Data Units Written"),
    ("namespaces", "smart-counts-host-traffic", "host-reads-omit-compare", "Host Read Commands, Host Write Commands"),
    ("namespaces", "smart-counts-host-traffic", "host-writes-omit-fua", "Host Read Commands, Host Write Commands"),
    ("trim", "write-zeroes", "write-zeroes-not-implemented", "ONCS bit 3"),
    ("namespaces", "flush-keeps-data", "flush-rejected", "§6.8 Flush command"),
    ("namespaces", "changed-namespace-list", "identify-zero-after-attach", "CNS 00h"),
    ("namespaces", "namespaces-as-found", "lba-format-lbads-zero", "(FLBAS, NLBAF)"),
    ("trim", "deallocated-reads", "deallocated-reads-wrong-pattern", "DLFEAT"),
    ("trim", "neighbours-untouched", "deallocate-wipes-neighbour", "Range Definition"),
    ("trim", "many-ranges", "dsm-later-ranges-corrupted", "NR + 1 ranges"),
    ("trim", "range-past-nsze", "dsm-range-past-nsze-accepted", "Dataset Management"),
    ("trim", "range-straddling-nsze", "dsm-range-past-nsze-accepted", "Dataset Management"),
    ("trim", "rejected-command-changes-nothing", "dsm-range-past-nsze-accepted", "deallocates nothing"),
    ("trim", "whole-namespace", "deallocated-reads-wrong-pattern", "DLFEAT"),
    ("trim", "other-namespace-untouched", "deallocate-leaks-to-next-namespace", "§6.1 Namespaces"),
    ("trim", "inactive-namespace", "inactive-namespace-io-accepted", "§6.1.5"),
    ("trim", "write-zeroes", "write-zeroes-ignored", "Write Zeroes"),
    ("trim", "write-zeroes-deallocate", "write-zeroes-ignored", "Write Zeroes"),
    ("trim", "write-zeroes-past-nsze", "lba-past-nsze-accepted", "Write Zeroes command"),
    ("qos", "mixed", "stale-read-after-write", "Read command"),
    ("qos", "baseline", "stale-read-after-write", "Read command"),
    ("qos", "latency-vs-rate", "stale-read-after-write", "Read command"),
    ("qos", "mixed", "reads-queued-behind-writes", "claim fixtures/sim/enterprise-1.4.yaml:"),
    ("claims", "capabilities-reported", "nn-understated", "claim fixtures/sim/enterprise-1.4.yaml:"),
    ("arbitration", "wrr-selectable", "cc-ams-not-kept", "CC.AMS"),
    ("arbitration", "arbitration-feature", "arbitration-feature-not-kept", "§5.21.1.1"),
    ("arbitration", "weighted-shares", "wrr-weights-inverted", "not served fewer commands than a class with a smaller"),
    ("arbitration", "urgent-first", "urgent-not-first", "§4.13.2"),
    ("arbitration", "round-robin-fair", "round-robin-favours-last", "§4.13.1"),
    ("power-fail", "cut-under-load", "flush-ignored", "§6.8 Flush command"),
    ("power-fail", "cut-under-load", "fua-ignored", "§6.15 Write command (CDW12 FUA)"),
    ("power-fail", "cut-under-load", "atomic-write-torn", "§6.4 Atomic Operations, Identify Controller AWUPF"),
    (
        "power-fail",
        "cut-under-load",
        "foreign-data-after-power-loss",
        "§6.4 Atomic Operations (AWUPF) and Read command",
    ),
    ("power-fail", "cut-under-load", "ready-after-timeout", "(CAP.TO)"),
    ("power-fail", "cut-under-load", "ready-slow-after-power-loss", "claim fixtures/sim/enterprise-1.4.yaml:"),
    ("power-fail", "write-cache-off", "write-cache-disable-ignored", "§5.21.1.6 Volatile Write Cache"),
    ("power-fail", "shutdown-then-power-off", "shutdown-status-never-reported", "§7.6.2 Shutdown"),
    (
        "power-fail",
        "unsafe-shutdown-counters",
        "power-counters-not-incremented",
        "§5.14.1.2 SMART / Health Information",
    ),
    (
        "power-fail",
        "normal-shutdown-counters",
        "power-counters-not-incremented",
        "§5.14.1.2 SMART / Health Information",
    ),
    ("erase", "format-crypto-erase", "crypto-erase-leaves-plaintext", "SES 010b Cryptographic Erase"),
    ("erase", "format-user-data-erase", "secure-erase-beyond-scope", "(FNA bits 0 and 1)"),
    ("erase", "sanitize-crypto-erase", "crypto-erase-leaves-plaintext", "§8.15 Sanitize Operations and §5.24"),
    ("erase", "sanitize-block-erase", "sanitize-misses-namespace", "§8.15 Sanitize Operations and §5.24"),
    // The last blocks of a namespace: caught only because the case writes and judges them.
    ("erase", "sanitize-block-erase", "erase-spares-last-blocks", "§8.15 Sanitize Operations and §5.24"),
    ("erase", "format-user-data-erase", "erase-spares-last-blocks", "Figure 273 (SES 001b User Data Erase)"),
    // A band inside the namespace: caught only because the case writes 16 extents across it.
    ("erase", "sanitize-block-erase", "erase-spares-interior-band", "§8.15 Sanitize Operations and §5.24"),
    ("erase", "format-user-data-erase", "erase-spares-interior-band", "Figure 273 (SES 001b User Data Erase)"),
    // Every restricted command the controller supports, each admitted alone by its quirk.
    ("erase", "sanitize-restrictions", "sanitize-admits-compare", "restrictions while a sanitize operation"),
    (
        "erase",
        "sanitize-restrictions",
        "sanitize-admits-write-uncorrectable",
        "restrictions while a sanitize operation",
    ),
    ("erase", "sanitize-restrictions", "sanitize-admits-write-zeroes", "restrictions while a sanitize operation"),
    ("erase", "sanitize-restrictions", "sanitize-admits-dataset-management", "restrictions while a sanitize operation"),
    ("erase", "sanitize-restrictions", "sanitize-admits-firmware-download", "restrictions while a sanitize operation"),
    ("erase", "sanitize-restrictions", "sanitize-admits-verify", "restrictions while a sanitize operation"),
    (
        "erase",
        "sanitize-restrictions",
        "sanitize-admits-namespace-attachment",
        "restrictions while a sanitize operation",
    ),
    ("erase", "sanitize-block-erase", "global-data-erased-never-set", "Sanitize Status (Log Identifier 81h)"),
    ("erase", "sanitize-overwrite", "sanitize-misses-namespace", "§8.15 Sanitize Operations and §5.24"),
    ("erase", "sanitize-reaches-every-namespace", "sanitize-misses-namespace", "§8.15 Sanitize Operations and §5.24"),
    ("erase", "sanitize-reaches-every-namespace", "erase-spares-interior-band", "§8.15 Sanitize Operations and §5.24"),
    ("erase", "overwrite-no-deallocate", "sanitize-misses-namespace", "§8.15 Sanitize Operations and §5.24"),
    ("erase", "crypto-erase-no-deallocate", "crypto-erase-leaves-plaintext", "§8.15 Sanitize Operations and §5.24"),
    ("erase", "sanitize-restrictions", "sanitize-accepts-commands", "restrictions while a sanitize operation"),
    ("erase", "sanitize-completion-event", "sanitize-no-completion-event", "Figure 146"),
    ("erase", "sanitize-power-cycle", "sanitize-lost-on-power-cycle", "loses power resumes"),
    ("erase", "sanitize-completes", "sanitize-never-completes", "runs to completion"),
    ("erase", "crypto-erase-unsupported", "fna-hides-crypto-erase", "FNA bit 2 and Figure 128"),
    ("erase", "sanitize-block-erase", "sprog-ffff-in-progress", "Sanitize Status (Log Identifier 81h)"),
    ("erase", "sanitize-block-erase", "sanitize-status-log-refused", "Sanitize Status (Log Identifier 81h)"),
    ("erase", "sanitize-crypto-erase", "sprog-stuck-after-completion", "Sanitize Status (Log Identifier 81h)"),
    ("erase", "sanitize-overwrite", "scdw10-not-recorded", "Sanitize Status (Log Identifier 81h)"),
    ("erase", "sanitize-restrictions", "identify-refused-during-sanitize", "Identify completes"),
    ("erase", "sanitize-power-cycle", "sanitize-status-reset-by-power-cycle", "loses power resumes"),
    ("firmware", "commit-errors", "invalid-slot-accepted", "Figure 175"),
    ("firmware", "replace-only", "firmware-slot-log-stale", "§5.14.1.3 Firmware Slot Information"),
    ("firmware", "activate-at-reset", "firmware-revision-unchanged", "(Commit Action) and Figure 247 FR"),
    ("firmware", "activate-existing-at-reset", "firmware-revision-unchanged", "(Commit Action) and Figure 247 FR"),
    ("firmware", "activate-without-reset", "activation-needs-reset-silently", "(Commit Action) and Figure 247 FR"),
    ("firmware", "activate-without-reset", "activation-beyond-mtfa", "Figure 247 MTFA"),
    ("firmware", "activate-without-reset", "no-activation-notice", "Firmware Activation Starting"),
    ("firmware", "activate-without-reset-under-load", "io-fails-during-activation", "§3.1.6 CSTS.PP"),
    ("firmware", "activate-without-reset-under-load", "activation-beyond-mtfa", "Figure 247 MTFA"),
    ("firmware", "activate-at-reset", "afi-next-slot-unset", "§5.14.1.3 Firmware Slot Information"),
    ("firmware", "activate-existing-at-reset", "afi-next-slot-unset", "§5.14.1.3 Firmware Slot Information"),
    ("firmware", "activate-at-reset", "firmware-runs-before-reset", "(Commit Action) and Figure 247 FR"),
    ("firmware", "activate-existing-at-reset", "firmware-runs-before-reset", "(Commit Action) and Figure 247 FR"),
    ("firmware", "replace-only", "replace-activates", "(Commit Action) and Figure 247 FR"),
    ("firmware", "commit-errors", "bad-image-accepted", "Figure 175"),
    ("firmware", "commit-errors", "read-only-slot-writable", "Figure 175"),
    // The read-only slot with each commit action that replaces an image.
    ("firmware", "commit-errors", "read-only-slot-replaced-at-reset", "Figure 175"),
    ("firmware", "commit-errors", "read-only-slot-replaced-now", "Figure 175"),
    ("firmware", "commit-errors", "refused-commit-changes-slot", "§5.14.1.3 Firmware Slot Information"),
    ("dual-port", "identity", "cntlid-duplicate", "(CNTLID)"),
    ("dual-port", "identity", "cmic-single-controller", "(CMIC bit 1)"),
    ("dual-port", "shared-namespace-both-ways", "port-stale-data", "§2.4.1 Multi-Path I/O"),
    ("dual-port", "private-namespace", "private-namespace-attached-twice", "Figure 267 (Namespace Is Private)"),
    ("dual-port", "port-down-under-load", "port-down-stalls-others", "§2.4.1 Multi-Path I/O"),
    ("dual-port", "both-ports-under-load", "port-stale-data", "§2.4.1 Multi-Path I/O"),
    ("dual-port", "reservation-types", "reservation-not-enforced", "Command Behavior in the Presence of a Reservation"),
    (
        "dual-port",
        "reservation-types",
        "registrants-only-lets-anyone-read",
        "Command Behavior in the Presence of a Reservation",
    ),
    ("dual-port", "reservation-types", "release-by-non-holder-releases", "§6.12 Reservation Release"),
    ("dual-port", "reservation-preempt", "reservation-log-not-raised", "Reservation Notification log page (80h)"),
    ("dual-port", "reservation-power-loss", "reservation-lost-despite-ptpl", "(Persist Through Power Loss)"),
    ("dual-port", "ana-groups", "ana-log-omits-namespace", "§8.20.2 ANA Groups"),
    ("dual-port", "ana-states", "ana-state-not-honoured", "figure of commands processed in each ANA state"),
    ("dual-port", "ana-states", "ana-change-not-notified", "§8.20.4 ANA Reporting"),
    ("dual-port", "ana-states", "ana-log-stale", "§5.14.1.12 Asymmetric Namespace Access log page (0Ch) and §8.20.3"),
    ("dual-port", "ana-states", "ana-wrong-status", "Figure 131 Path Related Status Values"),
    ("hot-plug", "surprise-removal", "removed-function-answers", "PCI Express Base Specification, Hot-Plug"),
    ("hot-plug", "surprise-removal", "nguid-changes-after-power-cycle", "Figure 245 (NGUID, EUI64)"),
    ("hot-plug", "surprise-removal", "flush-ignored", "§6.8 Flush command"),
    ("hot-plug", "orderly-removal", "shutdown-status-never-reported", "§7.6.2 Shutdown"),
    ("hot-plug", "orderly-removal", "nguid-changes-after-power-cycle", "Figure 245 (NGUID, EUI64)"),
];

const SUITES: &[&str] =
    &["namespaces", "trim", "qos", "arbitration", "claims", "power-fail", "erase", "firmware", "dual-port", "hot-plug"];
const CLEAN_PROFILES: &[&str] = &["enterprise-1.4", "enterprise-1.2a"];

fn suite(name: &str) -> LoadedSuite {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../suites").join(format!("{name}.yaml"));
    load_file(&path, Some(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn base_name(case: &ExpandedCase) -> &str {
    case.name.split('/').next().unwrap_or(&case.name)
}

fn selects(entry_case: &str, case: &ExpandedCase) -> bool {
    if entry_case.contains('/') {
        case.name == entry_case
    } else {
        base_name(case) == entry_case
    }
}

/// A session on the simulated drive of `profile`, with the claims its shipped profile
/// carries (as `nvtest sim:NAME` runs it), so the cases about claims judge them.
fn session(profile: Profile) -> Session {
    let name = format!("sim:{}", profile.name);
    let claims = nvtest::targets::profile_claims(&TargetSpec::SimProfile(profile.name.clone()))
        .unwrap_or_else(|e| panic!("{e}"))
        .map(std::sync::Arc::new);
    let device = nvtest::targets::open_sim(profile).unwrap_or_else(|e| panic!("{e}"));
    let mut session = Session::with_device(name, device).unwrap_or_else(|e| panic!("{e}"));
    session.set_claims(claims);
    session
}

/// Cases that judge only a drive in a state the shipped profiles never are, with the test
/// here that brings a simulated drive into it and proves the case both ways.
const TWINS_ON_OTHER_SETUPS: &[(&str, &str, &str)] =
    &[("erase", "sanitize-failure-recovery", "a_drive_found_in_sanitize_failure_mode_is_judged_both_ways")];

#[test]
fn every_case_has_a_failing_twin() {
    let mut missing = Vec::new();
    for name in SUITES {
        for case in suite(name).cases {
            let elsewhere = TWINS_ON_OTHER_SETUPS.iter().any(|(s, c, _)| s == name && selects(c, &case));
            if !elsewhere && !TWINS.iter().any(|(s, c, _, _)| s == name && selects(c, &case)) {
                missing.push(format!("{name}::{}", case.name));
            }
        }
    }
    assert!(missing.is_empty(), "cases with no quirk proving they can fail: {missing:#?}");
}

/// Quirks proven by a suite case on a profile other than enterprise-1.4 (the drive they
/// need is provisioned differently), with the test here or beside it that runs them.
const PROVEN_ON_OTHER_PROFILES: &[(&str, &str)] = &[
    ("nn-understated", "namespaces_as_found_judges_a_provisioned_drive_read_only"),
    ("metadata-not-kept", "metadata_formats::a_drive_that_drops_separate_metadata_fails_naming_the_metadata_rule"),
    ("failure-mode-accepts-io", "a_drive_found_in_sanitize_failure_mode_is_judged_both_ways"),
    ("exit-failure-mode-ignored", "a_drive_found_in_sanitize_failure_mode_is_judged_both_ways"),
    (
        "loss-protection-cache-lost",
        "power_fail::a_drive_that_loses_its_cache_despite_protection_fails_naming_the_claim",
    ),
];

/// Quirks that break no rule: behaviour the specification allows, kept to prove that
/// nvtest passes it (and the test that proves it).
const BREAK_NO_RULE: &[(&str, &str)] = &[
    ("stale-after-deallocate", "advisory_deallocation_passes_the_trim_suite"),
    ("dsm-first-range-only", "advisory_deallocation_passes_the_trim_suite"),
    // Arbitration Burst is the most commands the controller *may* launch from one queue
    // at a time (NVMe 1.4 §5.21.1.1): launching one per turn whatever AB says is allowed.
    ("arbitration-burst-ignored", "load_suites::a_drive_that_launches_one_command_per_turn_passes_arbitration"),
];

/// Quirks where the spec's wording leaves room: the case ends in a warning naming the
/// rule, never a failure. (suite, case, quirk, a fragment of the rule.)
const WARNS: &[(&str, &str, &str, &str)] = &[
    ("firmware", "commit-errors", "invalid-slot-generic-status", "Figure 175"),
    ("erase", "overwrite-no-deallocate", "overwrite-final-pass-inverted", "SANICAP (NODMMAS 01b)"),
    ("erase", "sanitize-block-erase", "sanitize-skips-deallocation", "(DLFEAT)"),
    // Classes served alike (shares off the weights, in no wrong order): what a host also
    // sees of a drive that takes every queued command in at once, so a warning.
    ("arbitration", "weighted-shares", "wrr-weights-ignored", "§4.13.2"),
    ("arbitration", "weighted-shares", "wrr-not-enabled", "§4.13.2"),
    ("arbitration", "weighted-shares", "cc-ams-not-kept", "§4.13.2"),
    // A read torn under a write within AWUN: §6.4.1 read as covering racing reads.
    ("dual-port", "both-ports-under-load", "torn-read-under-write", "§6.4.1 AWUN/NAWUN"),
];

#[test]
fn quirks_the_spec_may_allow_end_in_a_warning_naming_the_rule() {
    for (suite_name, case_name, quirk_name, rule_fragment) in WARNS {
        let quirk = Quirk::from_name(quirk_name).unwrap_or_else(|| panic!("unknown quirk {quirk_name}"));
        for case in suite(suite_name).cases.iter().filter(|c| selects(case_name, c)) {
            let mut s = session(Profile::builtin("enterprise-1.4").unwrap().with_quirk(quirk));
            match s.run_case(case, nvtest::exec::fresh_run_seed()).verdict {
                Verdict::Warning(f) => assert!(f.rule.to_string().contains(rule_fragment), "{quirk_name}: {f}"),
                other => panic!("{suite_name}::{} with {quirk_name}: expected a warning, got {other:?}", case.name),
            }
        }
    }
}

/// The other direction of the twins: every quirk of the simulated drive fails at least
/// one case of the shipped suites (or breaks no rule, and is proven to pass).
#[test]
fn every_quirk_fails_some_case() {
    let known = |list: &[(&str, &str)], name: &str| list.iter().any(|(q, _)| *q == name);
    let idle: Vec<&str> = Quirk::ALL
        .iter()
        .map(|q| q.name())
        .filter(|name| {
            !TWINS.iter().any(|(_, _, q, _)| q == name)
                && !known(PROVEN_ON_OTHER_PROFILES, name)
                && !known(BREAK_NO_RULE, name)
                && !WARNS.iter().any(|(_, _, q, _)| q == name)
        })
        .collect();
    assert!(idle.is_empty(), "quirks no suite case fails on: {idle:?}");
    for (name, _) in PROVEN_ON_OTHER_PROFILES.iter().chain(BREAK_NO_RULE) {
        assert!(Quirk::from_name(name).is_some(), "unknown quirk {name}");
    }
}

#[test]
fn clean_profiles_pass_both_suites() {
    for profile in CLEAN_PROFILES {
        let mut s = session(Profile::builtin(profile).unwrap());
        let mut passed = 0;
        for name in SUITES {
            for case in suite(name).cases {
                let outcome = s.run_case(&case, nvtest::exec::fresh_run_seed());
                match &outcome.verdict {
                    Verdict::Pass => passed += 1,
                    Verdict::Skipped(_) => {}
                    other => panic!("{profile}: {name}::{} should pass, got {other:?}\n{:#?}", case.name, outcome.log),
                }
            }
        }
        assert!(passed >= 60, "{profile}: only {passed} cases passed");
    }
}

#[test]
fn each_quirk_fails_its_cases_naming_the_rule() {
    let mut problems = Vec::new();
    for (suite_name, case_name, quirk_name, rule_fragment) in TWINS {
        let Some(quirk) = Quirk::from_name(quirk_name) else {
            problems.push(format!("{suite_name}::{case_name}: unknown quirk {quirk_name}"));
            continue;
        };
        for case in suite(suite_name).cases.iter().filter(|c| selects(case_name, c)) {
            let profile = Profile::builtin("enterprise-1.4").unwrap().with_quirk(quirk);
            let mut s = session(profile);
            let outcome = s.run_case(case, nvtest::exec::fresh_run_seed());
            let who = format!("{suite_name}::{} with quirk {quirk_name}", case.name);
            match &outcome.verdict {
                // An advisory case reports its violation as a warning, naming the rule all the same.
                Verdict::Fail(f) | Verdict::Warning(f)
                    if matches!(outcome.verdict, Verdict::Fail(_)) || case.advisory =>
                {
                    let rule = f.rule.to_string();
                    if !rule.contains(rule_fragment) {
                        problems.push(format!("{who}: failed naming `{rule}`, expected a rule with `{rule_fragment}`"));
                    }
                }
                other => problems.push(format!("{who}: expected a failure, got {other:?}")),
            }
        }
    }
    assert!(problems.is_empty(), "{} twins did not fail as they should:\n{}", problems.len(), problems.join("\n"));
}

/// The weighted classes' order is a failure in `weighted-shares`, not an advisory
/// warning: the clean drive passes with shares near 8 : 4 : 2, a drive serving its Low
/// class by HPW and its High class by LPW fails naming the order rule with the counts,
/// and a drive serving the classes alike only warns, saying which reading was applied.
#[test]
fn weighted_classes_served_in_inverted_order_fail_not_warn() {
    let arbitration = suite("arbitration");
    let case = arbitration.cases.iter().find(|c| c.name == "weighted-shares").unwrap();
    assert!(!case.advisory, "the order must be able to fail the case");
    let clean = session(Profile::builtin("enterprise-1.4").unwrap()).run_case(case, nvtest::exec::fresh_run_seed());
    assert_eq!(clean.verdict, Verdict::Pass, "{:#?}", clean.log);
    let shares = clean.log.iter().find(|l| l.starts_with("shares of ")).unwrap();
    println!("clean: {shares}");
    let profile = Profile::builtin("enterprise-1.4").unwrap().with_quirk(Quirk::WrrWeightsInverted);
    let outcome = session(profile).run_case(case, nvtest::exec::fresh_run_seed());
    match &outcome.verdict {
        Verdict::Fail(f) => {
            assert_eq!(f.rule, nvtest::rules::weighted_round_robin_order(), "{f}");
            assert!(
                f.rule.section.contains("§4.13.2") && f.observed.contains("(the smaller weight) was served"),
                "{f}"
            );
            println!("inverted: {}", f.observed);
        }
        other => panic!("wrr-weights-inverted: expected a failure, got {other:?}\n{:#?}", outcome.log),
    }
    let profile = Profile::builtin("enterprise-1.4").unwrap().with_quirk(Quirk::WrrWeightsIgnored);
    match session(profile).run_case(case, nvtest::exec::fresh_run_seed()).verdict {
        Verdict::Warning(f) => {
            assert_eq!(f.rule, nvtest::rules::weighted_round_robin(), "{f}");
            assert!(f.expected.contains("a host sees completions, not the fetch order"), "{f}");
        }
        other => panic!("wrr-weights-ignored: expected a warning, got {other:?}"),
    }
}

/// `namespaces-as-found` checks the namespaces a drive already has. The shipped profiles
/// hold one, too few for an NSID beyond NN or two namespaces sharing an NGUID: on a drive
/// provisioned with 32, those violations fail it as well, naming their rules, and the
/// clean drive passes.
#[test]
fn namespaces_as_found_judges_a_provisioned_drive_read_only() {
    let provisioned = || {
        let mut p = Profile::builtin("enterprise-1.4").unwrap();
        p.namespaces = (0..32)
            .map(|i| nvme_sim::profile::InitialNamespace {
                lbads: if i % 2 == 0 { 512 } else { 4096 },
                ms: 0,
                extended: false,
                blocks: 4096,
                attached: true,
            })
            .collect();
        p
    };
    let namespaces = suite("namespaces");
    let case = namespaces.cases.iter().find(|c| c.name == "namespaces-as-found").unwrap();
    assert!(!case.destructive, "the case runs under --preserve");
    let mut clean = session(provisioned());
    let outcome = clean.run_case(case, nvtest::exec::fresh_run_seed());
    assert_eq!(outcome.verdict, Verdict::Pass, "{:#?}", outcome.log);
    for (quirk, rule_fragment) in
        [(Quirk::NnUnderstated, "CNS 02h"), (Quirk::DuplicateNguid, "§7.11 Unique Identifier")]
    {
        let mut s = session(provisioned().with_quirk(quirk));
        match s.run_case(case, nvtest::exec::fresh_run_seed()).verdict {
            Verdict::Fail(f) => assert!(f.rule.to_string().contains(rule_fragment), "{quirk:?}: {f}"),
            other => panic!("{quirk:?}: expected a failure, got {other:?}"),
        }
    }
}

/// On a drive that cannot create namespaces, one whose NSZE is one block short of the
/// namespace (its range checks take the real size) is not blamed for its range checks:
/// the out-of-range cases fail naming the NSZE field, after probing where the namespace
/// really ends; the clean drive of the same kind passes them.
#[test]
fn an_nsze_that_disagrees_with_the_range_checks_is_named() {
    let fixed = || {
        let mut p = Profile::builtin("enterprise-1.4").unwrap();
        p.optional_commands.retain(|c| *c != nvme_sim::profile::OptionalCommand::NamespaceManagement);
        p
    };
    let namespaces = suite("namespaces");
    let cases: Vec<&ExpandedCase> = namespaces
        .cases
        .iter()
        .filter(|c| c.name.starts_with("read-at-nsze") || c.name.starts_with("write-crossing-nsze"))
        .collect();
    assert!(!cases.is_empty());
    for case in &cases {
        let mut clean = session(fixed());
        let outcome = clean.run_case(case, nvtest::exec::fresh_run_seed());
        assert!(matches!(outcome.verdict, Verdict::Pass | Verdict::Skipped(_)), "{}: {:?}", case.name, outcome.verdict);
        if outcome.verdict != Verdict::Pass {
            continue;
        }
        let mut s = session(fixed().with_quirk(Quirk::NszeUnderstated));
        match s.run_case(case, nvtest::exec::fresh_run_seed()).verdict {
            Verdict::Fail(f) => {
                assert!(f.rule.section.contains("NSZE"), "{}: {f}", case.name);
                assert!(f.observed.contains("range checks are those of a namespace of"), "{}: {f}", case.name);
            }
            other => panic!("{}: expected a failure, got {other:?}", case.name),
        }
    }
}

/// DLFEAT 010b (deallocated blocks read as all ones): the trim suite judges against ones,
/// passes on a drive that returns them or keeps the data (deallocation is advisory), and
/// fails on one that returns zeroes.
#[test]
fn trim_follows_dlfeat_ones() {
    let ones = || {
        let mut p = Profile::builtin("enterprise-1.4").unwrap();
        p.dlfeat = nvme_sim::profile::DlfeatSetting::Ones;
        p
    };
    let mut clean = session(ones());
    let mut kept = session(ones().with_quirk(Quirk::StaleAfterDeallocate));
    let mut wrong = session(ones().with_quirk(Quirk::DeallocatedReadsWrongPattern));
    let trim = suite("trim");
    let mut judged = 0;
    for case in trim.cases.iter().filter(|c| ["deallocated-reads", "whole-namespace"].contains(&base_name(c))) {
        let outcome = clean.run_case(case, nvtest::exec::fresh_run_seed());
        assert_eq!(outcome.verdict, Verdict::Pass, "{}: {:#?}", case.name, outcome.log);
        let outcome = kept.run_case(case, nvtest::exec::fresh_run_seed());
        assert_eq!(outcome.verdict, Verdict::Pass, "{} keeping the data: {:#?}", case.name, outcome.log);
        match wrong.run_case(case, nvtest::exec::fresh_run_seed()).verdict {
            Verdict::Fail(f) => {
                assert!(f.expected.contains("all ones"), "{}: {f}", case.name);
                assert!(
                    f.observed.contains("reads all zeros after a deallocate; DLFEAT promises ones"),
                    "{}: {f}",
                    case.name
                );
            }
            other => panic!("{} reading zeroes should fail, got {other:?}", case.name),
        }
        judged += 1;
    }
    assert_eq!(judged, 8);
}

/// Dataset Management is advisory (NVMe 1.4 §6.7: the controller may take no action; AD:
/// the NVM subsystem *may* deallocate the ranges, and a block not deallocated returns the
/// last data written). A drive that keeps the data of every range, or deallocates only the
/// first, breaks no rule: the whole trim suite passes on it — no trim case needs a
/// deallocate to change data, and Write Zeroes, which must, is left alone by these quirks —
/// and `verify` notes the blocks that kept their data.
#[test]
fn advisory_deallocation_passes_the_trim_suite() {
    let trim = suite("trim");
    for (quirk, noted_in) in [
        (
            Quirk::StaleAfterDeallocate,
            &[
                "deallocated-reads",
                "neighbours-untouched",
                "many-ranges",
                "whole-namespace",
                "other-namespace-untouched",
            ][..],
        ),
        (Quirk::DsmFirstRangeOnly, &["neighbours-untouched", "many-ranges"][..]),
    ] {
        let mut s = session(Profile::builtin("enterprise-1.4").unwrap().with_quirk(quirk));
        let mut passed = 0;
        let mut noted = Vec::new();
        let mut exact_note_seen = quirk != Quirk::StaleAfterDeallocate;
        for case in &trim.cases {
            let outcome = s.run_case(case, nvtest::exec::fresh_run_seed());
            match &outcome.verdict {
                Verdict::Pass => passed += 1,
                Verdict::Skipped(_) => {}
                other => {
                    panic!("trim::{} with quirk {quirk} should pass, got {other:?}\n{:#?}", case.name, outcome.log)
                }
            }
            let notes: Vec<&String> = outcome.log.iter().filter(|l| l.starts_with("note: ")).collect();
            for note in &notes {
                assert!(
                    note.contains(" of NSID ")
                        && note.ends_with(
                            " data: Dataset Management deallocation is advisory \
                             (NVMe 1.4 Dataset Management command, Attribute – Deallocate)"
                        ),
                    "trim::{}: {note}",
                    case.name
                );
            }
            if case.name == "deallocated-reads/blocks=8,lbads=512" && quirk == Quirk::StaleAfterDeallocate {
                exact_note_seen = true;
                assert_eq!(
                    notes,
                    ["note: 8 deallocated blocks of NSID 1 still hold their data: Dataset Management deallocation \
                      is advisory (NVMe 1.4 Dataset Management command, Attribute – Deallocate)"]
                );
            }
            if !notes.is_empty() {
                noted.push(base_name(case).to_string());
            }
        }
        assert!(passed >= 20, "{quirk}: only {passed} trim cases passed");
        assert!(exact_note_seen, "no case deallocated-reads/blocks=8,lbads=512");
        let mut expected: Vec<String> = noted_in.iter().map(|s| s.to_string()).collect();
        noted.dedup();
        expected.sort();
        noted.sort();
        assert_eq!(noted, expected, "{quirk}: the cases noting kept data");
    }
}

/// `erase::sanitize-failure-recovery` on drives whose first sanitize operation fails (the
/// profile's `fail_next`, a fault): the failed operation is itself a failure of the
/// sanitize case that started it (SSTAT 011b), and leaves the drive in failure mode,
/// unrestricted or restricted as its AUSE said; the recovery case then passes on the
/// clean drive, skips on a drive not in failure mode, and fails naming the failure-mode
/// rule on a drive that restricts nothing or does not leave the mode on Exit Failure Mode.
#[test]
fn a_drive_found_in_sanitize_failure_mode_is_judged_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let setup = |ause: bool| {
        let path = dir.path().join(format!("fail-{ause}.yaml"));
        let text = format!(
            "suite: setup\ntitle: a sanitize that the drive fails\nspec: [\"NVMe 1.4 §8.15\"]\ncases:\n  - name: fail\n    title: fails\n    \
             rule: \"NVMe 1.4 §8.15\"\n    destructive: true\n    steps:\n      - sanitize: {{action: block_erase, \
             ause: {ause}}}\n"
        );
        std::fs::write(&path, text).unwrap();
        load_file(&path, None).unwrap_or_else(|e| panic!("{e}"))
    };
    let erase = suite("erase");
    let recovery = erase.cases.iter().find(|c| c.name == "sanitize-failure-recovery").unwrap();
    let failing = |quirk: Option<Quirk>| {
        let mut p = Profile::builtin("enterprise-1.4").unwrap();
        p.erase.sanitize.as_mut().unwrap().fail_next = 1;
        session(match quirk {
            Some(q) => p.with_quirk(q),
            None => p,
        })
    };
    let seed = nvtest::exec::fresh_run_seed;
    let mut clean = session(Profile::builtin("enterprise-1.4").unwrap());
    assert!(matches!(clean.run_case(recovery, seed()).verdict, Verdict::Skipped(_)), "not in failure mode");
    for (ause, quirk, wanted) in [
        (true, None, None),
        (false, None, None),
        (false, Some(Quirk::FailureModeAcceptsIo), Some("(failure mode)")),
        (true, Some(Quirk::ExitFailureModeIgnored), Some("(failure mode)")),
    ] {
        let mut s = failing(quirk);
        let fail = &setup(ause).cases[0];
        match s.run_case(fail, seed()).verdict {
            Verdict::Fail(f) => assert!(f.observed.contains("011b"), "the failed operation named: {f}"),
            other => panic!("a failed sanitize operation should fail its case, got {other:?}"),
        }
        let outcome = s.run_case(recovery, seed());
        match (wanted, &outcome.verdict) {
            (None, Verdict::Pass) => {}
            (Some(rule), Verdict::Fail(f)) if f.rule.to_string().contains(rule) => {}
            (_, other) => panic!("AUSE {ause}, {quirk:?}: got {other:?}\n{:#?}", outcome.log),
        }
    }
}

/// Not a quirk: drives whose images cannot run at once (Firmware Activation Requires a
/// Controller Level / Conventional Reset, §5.12) or may not run at all (Firmware
/// Activation Prohibited) are not blamed. The firmware cases pass, after the reset the
/// status names (a Conventional Reset by a power cycle, after a normal shutdown so the
/// data written before is kept), or skip, saying why.
#[test]
fn drives_whose_images_need_a_reset_or_are_prohibited_are_not_blamed() {
    use nvme_sim::subsystem::firmware::ActivationRule;
    let firmware = suite("firmware");
    for (rule, skips) in [
        (ActivationRule::ControllerReset, false),
        (ActivationRule::ConventionalReset, false),
        (ActivationRule::NvmSubsystemReset, false),
        (ActivationRule::Prohibited, true),
    ] {
        let mut p = Profile::builtin("enterprise-1.4").unwrap();
        p.firmware.as_mut().unwrap().activation = [("NVTF*".to_string(), rule)].into();
        let mut s = session(p);
        for case in &firmware.cases {
            let outcome = s.run_case(case, nvtest::exec::fresh_run_seed());
            let activates = case.name != "commit-errors" && case.name != "replace-only";
            match &outcome.verdict {
                Verdict::Pass if !(skips && activates) => {}
                Verdict::Skipped(why) if skips && activates && why.contains("Firmware Activation Prohibited") => {}
                other => panic!("{rule:?}: firmware::{} got {other:?}\n{:#?}", case.name, outcome.log),
            }
        }
    }
}

/// A drive that completes commit action 011b only once the new image runs (allowed):
/// the host reaps nothing while it waits, so the commit's own time holds the pause. The
/// under-load case passes on such a drive, and fails naming MTFA when that pause is
/// longer (quirk `activation-beyond-mtfa`): the bound cannot be widened by the wait.
#[test]
fn a_commit_that_completes_after_the_activation_is_bounded_by_mtfa_too() {
    let firmware = suite("firmware");
    let case = firmware.cases.iter().find(|c| c.name == "activate-without-reset-under-load").unwrap();
    let profile = || {
        let mut p = Profile::builtin("enterprise-1.4").unwrap();
        p.firmware.as_mut().unwrap().commit_completes_after_activation = true;
        p
    };
    let outcome = session(profile()).run_case(case, nvtest::exec::fresh_run_seed());
    assert_eq!(outcome.verdict, Verdict::Pass, "{:#?}", outcome.log);
    assert!(
        outcome.log.iter().any(|l| l.contains("-> Successful Completion") && l.contains("(200.0")),
        "{:#?}",
        outcome.log
    );
    let outcome =
        session(profile().with_quirk(Quirk::ActivationBeyondMtfa)).run_case(case, nvtest::exec::fresh_run_seed());
    match &outcome.verdict {
        Verdict::Fail(f) => {
            assert!(f.rule.to_string().contains("Figure 247 MTFA"), "{f}");
            assert!(f.observed.contains("the Firmware Commit itself took"), "{f}");
        }
        other => panic!("expected a failure naming MTFA, got {other:?}\n{:#?}", outcome.log),
    }
}

/// A drive on which another host (or an earlier run) masked Registration Preempted
/// notices (Set Features 82h, REGPRE) still passes `reservation-preempt`: the case
/// unmasks them for its namespace instead of blaming the drive for a notice it was told
/// to withhold.
#[test]
fn a_drive_left_with_registration_preempted_masked_passes_the_preempt_case() {
    use nvme::device::Data;
    use nvme::spec::features::{set_features, FeatureId};
    use nvme::spec::reservation::ReservationNotificationMask;
    let dual = suite("dual-port");
    let preempt = dual.cases.iter().find(|c| c.name == "reservation-preempt").unwrap();
    let mut s = session(Profile::builtin("enterprise-1.4").unwrap());
    let seed = nvtest::exec::fresh_run_seed;
    assert_eq!(s.run_case(preempt, seed()).verdict, Verdict::Pass);
    let masked = s.with_context(seed(), |ctx| {
        let mask = ReservationNotificationMask::new().with_regpre(true).into_bits();
        (1..=32u32)
            .filter(|&nsid| {
                let cmd = set_features(FeatureId::ReservationNotificationMask, false, nsid, mask);
                ctx.admin("Set Features 82h, REGPRE masked", cmd, Data::None).is_ok_and(|c| c.status().is_success())
            })
            .count()
    });
    assert!(masked > 0, "no namespace took the mask");
    let outcome = s.run_case(preempt, seed());
    assert_eq!(outcome.verdict, Verdict::Pass, "{:#?}", outcome.log);
}
