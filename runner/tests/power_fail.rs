//! The `power-fail` suite as a user runs it on the simulated drives: both clean profiles
//! (with and without power-loss protection) pass their seeded cycles, the campaign's
//! figures reach the console, JUnit and the JSON record, `--seed` replays a campaign
//! exactly, and a drive that breaks a rule fails naming the rule, the namespace, the
//! LBAs and the generations.

#[path = "common/record.rs"]
mod record;

use record::{figures, nvtest};
use std::path::Path;

/// The `sim:PATH` target of `profile` with `quirks: []` replaced by `quirks`, in `dir`.
fn quirked(dir: &Path, profile: &str, quirks: &str) -> String {
    let path = format!("{}/../fixtures/sim/{profile}.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap().replace("quirks: []", &format!("quirks: [{quirks}]"));
    let out = dir.join(format!("{profile}.yaml"));
    std::fs::write(&out, text).unwrap();
    format!("sim:{}", out.display())
}

#[test]
fn both_clean_profiles_pass_100_seeded_cycles_with_their_figures_reported() {
    for profile in ["enterprise-1.4", "enterprise-1.2a"] {
        let dir = tempfile::tempdir().unwrap();
        let (json, junit) = (dir.path().join("r.json"), dir.path().join("r.xml"));
        let target = format!("sim:{profile}");
        let out = nvtest(&[
            "--suite",
            "power-fail",
            "--json",
            json.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
            &target,
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{profile}:\n{stdout}");
        let figures = figures(&json);
        let get = |name: &str| figures.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        assert_eq!(get("cut-under-load::power_fail.cycles"), Some(100.0), "{profile}: {figures:?}");
        assert!(get("cut-under-load::power_fail.blocks_judged").is_some_and(|v| v >= 100.0 * 4096.0));
        assert!(get("cut-under-load::power_fail.writes_in_flight_at_cut.max").is_some_and(|v| v > 0.0));
        assert!(get("cut-under-load::power_fail.ready_ms.median").is_some_and(|v| v > 0.0));
        assert!(stdout.contains("power_fail.media_ready_ms.median="), "{stdout}");
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(xml.contains("name=\"figure.power_fail.ready_ms.max\""), "{xml}");
    }
}

#[test]
fn the_same_seed_replays_the_same_campaign() {
    let dir = tempfile::tempdir().unwrap();
    let run = |n: u32| {
        let json = dir.path().join(format!("r{n}.json"));
        let out = nvtest(&[
            "--suite",
            "power-fail",
            "--filter",
            "cut-under-load",
            "--seed",
            "11",
            "--json",
            json.to_str().unwrap(),
            "sim",
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        figures(&json).into_iter().filter(|(n, _)| !n.contains("verify_mb_per_s")).collect::<Vec<_>>()
    };
    let first = run(1);
    assert!(first.iter().any(|(n, v)| n.ends_with("blocks_rolled_back") && *v > 0.0), "{first:?}");
    assert_eq!(first, run(2), "two campaigns with --seed 11 differ");
}

/// Every finding names the namespace, the LBA range, the command and the generations.
#[test]
fn a_drive_that_ignores_flush_fails_naming_the_rule_the_lbas_and_the_generations() {
    let dir = tempfile::tempdir().unwrap();
    let target = quirked(dir.path(), "enterprise-1.4", "flush-ignored");
    let out = nvtest(&["--suite", "power-fail", "--filter", "cut-under-load", "--show-output", &target]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("§6.8 Flush command"), "{stdout}");
    assert!(
        stdout.contains("completed before a Flush that completed")
            && stdout.contains("NSID ")
            && stdout.contains("LBA 0x")
            && stdout.contains("expected generation"),
        "{stdout}"
    );
}

/// The 1.2a profile claims power-loss protection (and reports a volatile write cache):
/// a cache lost at the cut breaks the claim, cited by file, line and column.
#[test]
fn a_drive_that_loses_its_cache_despite_protection_fails_naming_the_claim() {
    let dir = tempfile::tempdir().unwrap();
    let target = quirked(dir.path(), "enterprise-1.2a", "loss-protection-cache-lost");
    let out = nvtest(&["--suite", "power-fail", "--filter", "cut-under-load", &target]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("claim ") && stdout.contains("enterprise-1.2a.yaml:"), "{stdout}");
    assert!(stdout.contains("power-loss protection"), "{stdout}");
}

/// A campaign that cannot mean anything is refused when the suite loads, with the place
/// in the file, before any device is opened.
#[test]
fn a_power_fail_step_with_no_cycles_or_a_deallocating_load_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("bad.yaml");
    std::fs::write(
        &suite,
        "suite: bad\ntitle: t\nspec: [x]\ndestructive: true\ncases:\n  - name: c\n    title: t\n    rule: r\n    steps:\n      \
         - use_namespaces: {count: 1, lbads: [512], blocks: 4096}\n      - power_fail:\n          cycles: 0\n          \
         cut_within_ms: 5\n          jobs:\n            - {name: a, ns: 1, write: 50, deallocate: 50, queue_depth: 4}\n",
    )
    .unwrap();
    let out = nvtest(&["--suite", suite.to_str().unwrap(), "sim"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bad.yaml:12:19: `cycles: 0`"), "{stderr}");
    assert!(stderr.contains("bad.yaml:15:55: a power-fail load has no deallocates"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("running"), "nothing may run");
}
