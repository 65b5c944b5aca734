//! The load suites as a user runs them: `qos` and `arbitration` on the simulated drives,
//! the figures a workload measures in the console summary, JUnit properties and the JSON
//! record, the same figures for the same `--seed` (the simulated clock), and what a drive
//! lacks skipped with the Identify/register reason.

#[path = "common/record.rs"]
mod record;

use record::{figures, nvtest};
use std::path::Path;

/// The `sim:PATH` target of enterprise-1.4's profile with `from` replaced by `to`, written
/// into `dir`.
fn changed_profile(dir: &Path, from: &str, to: &str) -> String {
    changed_profile_in(dir, &[(from, to)])
}

/// The enterprise-1.4 profile with each `(from, to)` text replaced, as a `sim:` target.
fn changed_profile_in(dir: &Path, changes: &[(&str, &str)]) -> String {
    let mut profile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/sim/enterprise-1.4.yaml")).unwrap();
    for (from, to) in changes {
        assert!(profile.contains(from), "`{from}` is not in the profile");
        profile = profile.replace(from, to);
    }
    let path = dir.join("changed.yaml");
    std::fs::write(&path, profile).unwrap();
    format!("sim:{}", path.display())
}

#[test]
fn the_same_seed_gives_the_same_figures_on_the_simulated_drive() {
    let dir = tempfile::tempdir().unwrap();
    let run = |n: u32| {
        let json = dir.path().join(format!("r{n}.json"));
        let out =
            nvtest(&["--suite", "qos", "--filter", "mixed", "--seed", "7", "--json", json.to_str().unwrap(), "sim"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        figures(&json)
    };
    let (first, second) = (run(1), run(2));
    assert!(first.iter().any(|(n, v)| n == "mixed::reads.read.latency.p99.9_us" && *v > 0.0), "{first:?}");
    assert!(first.iter().any(|(n, _)| n == "mixed::background.write.mb_per_s"), "{first:?}");
    assert_eq!(first, second, "two runs with --seed 7 measured different figures");
}

#[test]
fn figures_reach_the_console_and_junit_properties() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("r.xml");
    let out = nvtest(&["--suite", "qos", "--filter", "baseline", "--junit", junit.to_str().unwrap(), "sim"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("figures of qos::baseline:")
            && stdout.contains("p99.9=")
            && stdout.contains("(simulated clock)"),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    for property in
        ["figure.reads.read.iops", "figure.reads.read.latency.p99.9_us", "figure.reads.read.latency.samples"]
    {
        assert!(xml.contains(&format!("name=\"{property}\"")), "{property} missing from\n{xml}");
    }
}

#[test]
fn both_suites_pass_on_the_1_4_drive_and_the_1_2a_drive_skips_weighted_round_robin_naming_cap_ams() {
    let out = nvtest(&["--suite", "qos", "--suite", "arbitration", "sim:enterprise-1.4"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("11 passed; 0 failed; 0 ignored"), "{stdout}");
    let out = nvtest(&["--suite", "arbitration", "sim:enterprise-1.2a"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let skipped: Vec<&str> = stdout.lines().filter(|l| l.starts_with("test ") && l.contains("ignored (")).collect();
    assert_eq!(skipped.len(), 4, "{stdout}");
    assert!(skipped.iter().all(|l| l.contains("CAP.AMS is 00b")), "{skipped:#?}");
    let fair = stdout.lines().find(|l| l.starts_with("test arbitration::round-robin-fair"));
    assert!(fair.is_some_and(|l| l.ends_with(" ok")), "{stdout}");
}

#[test]
fn a_drive_whose_reads_return_the_previous_generation_fails_the_workload_naming_the_read() {
    let dir = tempfile::tempdir().unwrap();
    let target = changed_profile(dir.path(), "quirks: []", "quirks: [stale-read-after-write]");
    let out = nvtest(&["--suite", "qos", "--filter", "baseline", &target]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("Read NSID") && stdout.contains("wrong reads of"), "{stdout}");
}

/// A compliant drive that takes in every queued command at once (more internal slots
/// than the queues hold) leaves arbitration nothing to decide: its equal shares are a
/// warning (a host sees completions, not the fetch order), never the drive's failure —
/// nor a failure of the classes' order, which allows for the commands such a drive holds.
#[test]
fn shares_on_a_drive_that_never_lets_commands_wait_are_a_warning_not_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let target = changed_profile(dir.path(), "slots: 256 ", "slots: 65536 ");
    let out = nvtest(&["--suite", "arbitration", "--filter", "weighted-shares", &target]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("warnings (counted as ok") && stdout.contains("§4.13.2"), "{stdout}");
}

/// Arbitration Burst is the most commands a controller may launch from one submission
/// queue at a time (NVMe 1.4 §5.21.1.1, "may"): a drive that launches one per turn
/// whatever AB says breaks no rule, and the arbitration suite passes it.
#[test]
fn a_drive_that_launches_one_command_per_turn_passes_arbitration() {
    let dir = tempfile::tempdir().unwrap();
    let target = changed_profile(dir.path(), "quirks: []", "quirks: [arbitration-burst-ignored]");
    let out = nvtest(&["--suite", "arbitration", &target]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("5 passed; 0 failed; 0 ignored"), "{stdout}");
    assert!(!stdout.contains("warnings (counted as ok"), "{stdout}");
}

/// A claims file that promises what the controller does not report (the PBlaze5 916's
/// crypto erase and dual port, on a simulated drive with one port whose FNA, SANICAP and
/// CMIC report neither) fails the claims case citing the claim's file:line:col and the field; the
/// drive's own profile claims nothing it lacks and passes.
#[test]
fn a_claimed_capability_the_controller_does_not_report_fails_citing_the_claim() {
    let claims = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/claims/pblaze5-916.yaml");
    let dir = tempfile::tempdir().unwrap();
    let without_crypto_erase =
        changed_profile_in(dir.path(), &[("crypto_erase: true", "crypto_erase: false"), ("ports: 2", "ports: 1")]);
    let out = nvtest(&["--suite", "claims", "--claims", claims, &without_crypto_erase]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    for wanted in [
        &format!("claim {claims}:19:15 (crypto_erase: true)") as &str,
        "FNA bit 2 (Cryptographic Erase Supported)",
        "CMIC 08h: bit 0 cleared", // bit 3: the profile reports ANA
        "a claim, not a rule of the specification",
    ] {
        assert!(stdout.contains(wanted), "`{wanted}` missing from\n{stdout}");
    }
    let out = nvtest(&["--suite", "claims", "--show-output", "sim"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("every capability fixtures/sim/enterprise-1.4.yaml claims"), "{stdout}");
}

/// No wall-clock window in a verdict: the share cases count commands, within a bound on
/// the target's clock. A drive too slow to complete the count within it (one command in
/// service at a time, 1 ms each: 20,000 in the 20 s) is skipped with the figures, never
/// an error or a failure.
#[test]
fn a_drive_too_slow_for_the_share_count_is_skipped_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let target = changed_profile_in(
        dir.path(),
        &[("slots: 256 ", "slots: 1 "), ("read_overhead_us: 60 ", "read_overhead_us: 1000 ")],
    );
    let out = nvtest(&["--suite", "arbitration", "--filter", "round-robin-fair", &target]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let line = stdout.lines().find(|l| l.starts_with("test arbitration::round-robin-fair")).unwrap_or_default();
    assert!(
        line.contains("ignored (only ") && line.contains(" of the 30000 commands needed completed within 20 s"),
        "{stdout}"
    );
    assert!(line.contains("the host or drive is too slow to judge shares"), "{line}");
}
