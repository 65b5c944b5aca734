//! Claims files (runner/src/claims) as a lab writes them: the example in `tests/claims/`
//! loads, and every mistake in `tests/malformed-claims/` is refused on one line,
//! `FILE:LINE:COLUMN: message` (or `FILE: message` when the file cannot be read). Each
//! malformed fixture says on its second line `# expect: LINE:COL: message`.

use std::path::PathBuf;

use nvtest::claims::{load_claims, ClaimsError};

#[path = "common/fixtures.rs"]
mod fixtures;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn malformed_fixtures() -> Vec<PathBuf> {
    fixtures::yaml_files(&manifest_dir().join("tests/malformed-claims"))
}

#[test]
fn every_malformed_claims_file_is_refused_on_one_line_at_file_line_column() {
    for fixture in malformed_fixtures() {
        let path = fixture.display().to_string();
        let error = match load_claims(&fixture) {
            Ok(claims) => panic!("{path} loaded: {claims:?}"),
            Err(e) => e,
        };
        assert!(matches!(error, ClaimsError::Invalid { .. }), "{path}: {error:?}");
        let shown = error.to_string();
        assert!(!shown.contains('\n'), "{path}: the error spans lines: {shown:?}");
        let expected = format!("{path}:{}", fixtures::expectation(&fixture));
        assert!(shown.starts_with(&expected), "{path}:\n  error:    {shown}\n  expected: {expected}…");
    }
}

/// Every kind of mistake has its fixture, and every fixture is a kind listed here.
#[test]
fn the_malformed_claims_fixtures_are_every_kind_of_mistake() {
    let kinds = [
        "unknown-key",
        "quoted-number",
        "quoted-boolean",
        "bad-duration-unit",
        "bad-rate",
        "percentile-100",
        "read-iops-zero",
        "latency-zero",
        "duplicate-name",
        "duplicate-key",
        "lba-size-1000",
        "namespaces-max-zero",
        "missing-drive",
        "empty-drive",
        "wrong-type",
        "empty",
    ];
    let names: Vec<String> =
        malformed_fixtures().iter().map(|p| p.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    for kind in kinds {
        assert!(names.iter().any(|n| n == kind), "no fixture tests/malformed-claims/{kind}.yaml");
    }
    for name in &names {
        assert!(kinds.contains(&name.as_str()), "tests/malformed-claims/{name}.yaml is not a kind this test names");
    }
}

#[test]
fn a_claims_file_that_cannot_be_read_is_named_without_a_location() {
    let missing = manifest_dir().join("tests/malformed-claims/no-such-file.yaml");
    let shown = load_claims(&missing).unwrap_err().to_string();
    assert!(shown.starts_with(&format!("{}: cannot read the claims: ", missing.display())), "{shown}");
    let dir = manifest_dir().join("tests/malformed-claims");
    let shown = load_claims(&dir).unwrap_err().to_string();
    assert!(shown.starts_with(&format!("{}: cannot read the claims: ", dir.display())), "{shown}");
    assert!(!shown.contains('\n'), "{shown:?}");
}

#[test]
fn the_example_claims_file_loads_every_kind_of_claim() {
    let path = manifest_dir().join("tests/claims/pblaze5-916.yaml");
    let claims = load_claims(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(claims.drive, "PBlaze5 916 (datasheet 2019)");
    assert_eq!(claims.read_qos.len(), 2);
    assert_eq!(
        claims.cite_read_qos(&claims.read_qos[0]),
        format!(
            "{}:5:5 (read_qos `mixed`: p99.9 ≤ 120 µs at 50000 read IOPS of 4 KiB, queue depth 32, 500 MB/s background write)",
            path.display()
        )
    );
    let every = [
        claims.ready_time.is_some(),
        claims.power_loss_protection.is_some(),
        claims.crypto_erase.is_some(),
        claims.namespaces.is_some(),
        claims.firmware_activation_without_reset.is_some(),
        claims.dual_port.is_some(),
        claims.hot_plug.is_some(),
        claims.arbitration.is_some(),
    ];
    assert!(every.iter().all(|&given| given), "{claims:#?}");
}

// ---------------------------------------------------------------------------------
// Claims judged whole (issue 29): a run on the simulated drive gives every promise its
// verdict in the record, on the console and in JUnit.

/// Runs nvtest with `args`, the record written to `dir/r.json` and JUnit to `dir/r.xml`:
/// the exit status, the console and the record.
fn run_with_claims(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, serde_json::Value) {
    let (json, junit) = (dir.join("r.json"), dir.join("r.xml"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nvtest"))
        .args(args)
        .args(["--seed", "29", "--json", &json.display().to_string(), "--junit", &junit.display().to_string()])
        .env_remove("NVTEST_REQUIRE_TARGET")
        .env_remove("NVTEST_SUITES_DIR")
        .output()
        .expect("the nvtest binary runs");
    let console = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("no record ({e}):\n{console}"));
    (out.status.code(), console, serde_json::from_str(&text).unwrap())
}

/// `promise` → (verdict, the promise's record) of the first target's claims.
fn promises(record: &serde_json::Value) -> std::collections::BTreeMap<String, (String, serde_json::Value)> {
    let claims = &record["targets"][0]["claims"];
    claims["promises"]
        .as_array()
        .unwrap_or_else(|| panic!("no claims in the record: {claims}"))
        .iter()
        .map(|p| (p["promise"].as_str().unwrap().to_string(), (p["verdict"].as_str().unwrap().to_string(), p.clone())))
        .collect()
}

/// A claims file beside the run, as a lab writes it.
fn claims_file(dir: &std::path::Path, text: &str) -> PathBuf {
    let path = dir.join("claims.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Promises the simulated enterprise 1.4 drive keeps, and some no suite of the run
/// measures.
const HOLDING: &str = "drive: the simulated enterprise 1.4 drive\n\
model: nvtest simulated enterprise NVMe 1.4\n\
read_qos:\n\
  - {name: mixed, read_iops: 50000, block: 4 KiB, background_write: 500 MB/s, percentile: 99.9, latency: 0.12 ms}\n\
  - {name: light, read_iops: 1000, background_write: none, percentile: 50, latency: 200 us}\n\
ready_time: 5 s\n\
power_loss_protection: true\n\
crypto_erase: true\n\
namespaces: {max: 32, lba_sizes: [512, 4096]}\n\
dual_port: true\n\
hot_plug: true\n";

const QOS_AND_CAPABILITIES: [&str; 8] =
    ["--suite", "qos", "--suite", "claims", "--exact", "qos::mixed", "--filter", "claims::capabilities-reported"];

#[test]
fn promises_the_drive_keeps_are_met_and_those_no_suite_run_measures_are_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let path = claims_file(dir.path(), HOLDING);
    let file = path.display().to_string();
    let mut args = QOS_AND_CAPABILITIES.to_vec();
    args.extend(["--claims", &file, "sim:enterprise-1.4"]);
    let (status, console, record) = run_with_claims(dir.path(), &args);
    assert_eq!(status, Some(0), "{console}");
    let p = promises(&record);
    let verdicts: Vec<(&str, &str)> = p.iter().map(|(k, (v, _))| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        verdicts,
        [
            ("crypto_erase", "met"),
            ("dual_port", "met"),
            ("hot_plug", "not-measured"),
            ("namespaces", "met"),
            ("power_loss_protection", "not-measured"),
            ("read_qos[0]", "met"),
            ("read_qos[1]", "met"),
            ("ready_time", "not-measured"),
        ]
    );
    let qos = &p["read_qos[1]"].1;
    assert_eq!(
        qos["claim"],
        format!("{file}:5:3 (read_qos `light`: p50 ≤ 200 µs at 1000 read IOPS of 4 KiB, no background write)")
    );
    assert_eq!(qos["judged_by"], serde_json::json!(["qos::mixed"]));
    assert!(qos["observed"][0].as_str().unwrap().starts_with("qos::mixed: p50 read latency "), "{qos}");
    let ready = &p["ready_time"].1;
    assert_eq!(ready["measured_by"], serde_json::json!(["suite power-fail", "suite hot-plug"]));
    assert!(ready["reason"].as_str().unwrap().contains("not measured by the suites run"), "{ready}");
    assert_eq!(record["targets"][0]["claims"]["warnings"], serde_json::json!([]));
    // The console's summary, one line per promise; JUnit's properties.
    assert!(console.contains(&format!("claims of {file}")), "{console}");
    for (word, key) in [("met", "5:3 (read_qos `light`"), ("not measured", "7:24 (power_loss_protection: true)")] {
        assert!(
            console.lines().any(|l| l.trim_start().starts_with(word) && l.contains(&format!("{file}:{key}"))),
            "no `{word}` line for {key}:\n{console}"
        );
    }
    let xml = std::fs::read_to_string(dir.path().join("r.xml")).unwrap();
    assert!(xml.contains("name=\"claim.read_qos[0]\" value=\"met: "), "{xml}");
    assert!(xml.contains("name=\"claim.hot_plug\" value=\"not-measured: "), "{xml}");
    // The claims file's SHA-256 is in the record, as sha256sum computes it.
    let sum = std::process::Command::new("sha256sum").arg(&path).output().expect("sha256sum runs");
    let sum = String::from_utf8_lossy(&sum.stdout).split_whitespace().next().unwrap().to_string();
    assert_eq!(record["run"]["claims"]["sha256"], sum.as_str());
    assert_eq!(record["run"]["claims"]["path"], file.as_str());
}

#[test]
fn three_breached_promises_are_three_breaches_in_the_failures_and_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let text = HOLDING
        .replace("latency: 0.12 ms", "latency: 10 us")
        .replace("latency: 200 us", "latency: 20 us")
        .replace("max: 32", "max: 64");
    let path = claims_file(dir.path(), &text);
    let file = path.display().to_string();
    let mut args = QOS_AND_CAPABILITIES.to_vec();
    args.extend(["--claims", &file, "sim:enterprise-1.4"]);
    let (status, console, record) = run_with_claims(dir.path(), &args);
    assert_eq!(status, Some(1), "{console}");
    let p = promises(&record);
    let breached: Vec<&str> = p.iter().filter(|(_, (v, _))| v == "breached").map(|(k, _)| k.as_str()).collect();
    assert_eq!(breached, ["namespaces", "read_qos[0]", "read_qos[1]"]);
    assert_eq!(record["targets"][0]["claims"]["breached"], 3);
    assert!(p["namespaces"].1["observed"][0].as_str().unwrap().contains("NN 32"), "{:?}", p["namespaces"]);
    // Each failure cites every claim it breached, as a claim.
    let failure = |case: &str| {
        let cases = record["targets"][0]["cases"].as_array().unwrap();
        cases.iter().find(|c| c["case"] == case).unwrap()["failure"].clone()
    };
    let qos = failure("mixed");
    let section = qos["section"].as_str().unwrap();
    for at in ["4:3 (read_qos `mixed`", "5:3 (read_qos `light`"] {
        assert!(section.contains(&format!("claim {file}:{at}")), "{qos}");
    }
    assert!(qos["rule"].as_str().unwrap().contains("2 of them breached (claims, not rules"), "{qos}");
    assert!(qos["observed"].as_str().unwrap().starts_with("1. p99.9 read latency"), "{qos}");
    assert!(qos["observed"].as_str().unwrap().contains("; 2. p50 read latency"), "{qos}");
    let caps = failure("capabilities-reported");
    assert!(caps["section"].as_str().unwrap().contains(&format!("claim {file}:9:13 (namespaces: up to 64)")), "{caps}");
    assert!(caps["observed"].as_str().unwrap().contains("NN 32"), "{caps}");
    assert_eq!(console.matches("BREACHED").count(), 3, "{console}");
}

#[test]
fn claims_of_another_model_warn_and_judge_and_a_profiles_own_claims_do_not_warn() {
    let dir = tempfile::tempdir().unwrap();
    let path =
        claims_file(dir.path(), &HOLDING.replace("model: nvtest simulated enterprise NVMe 1.4", "model: PBlaze5 916"));
    let file = path.display().to_string();
    let (status, console, record) =
        run_with_claims(dir.path(), &["--suite", "claims", "--claims", &file, "sim:enterprise-1.4"]);
    assert_eq!(status, Some(0), "the warning does not fail the run:\n{console}");
    let warning =
        format!("claims file {file} is for model PBlaze5 916, the drive is model nvtest simulated enterprise NVMe 1.4");
    assert!(console.contains(&warning), "{console}");
    assert_eq!(record["targets"][0]["claims"]["warnings"], serde_json::json!([warning]));
    assert_eq!(promises(&record)["dual_port"].0, "met");
    // Without `model`, a `drive` that does not name the drive's MN warns too.
    let path = claims_file(dir.path(), "drive: PBlaze5 916 (datasheet 2019)\ndual_port: true\n");
    let (status, console, record) = run_with_claims(
        dir.path(),
        &["--suite", "claims", "--claims", &path.display().to_string(), "sim:enterprise-1.4"],
    );
    assert_eq!(status, Some(0), "{console}");
    assert_eq!(record["targets"][0]["claims"]["warnings"].as_array().unwrap().len(), 1, "{console}");
    // The shipped profiles' own claims are of their drives.
    for profile in ["sim:enterprise-1.4", "sim:enterprise-1.2a"] {
        let (status, console, record) = run_with_claims(dir.path(), &["--suite", "claims", profile]);
        assert_eq!(status, Some(0), "{console}");
        let claims = &record["targets"][0]["claims"];
        assert_eq!(claims["warnings"], serde_json::json!([]), "{profile}: {claims}");
        assert!(claims["file"].as_str().unwrap().contains("fixtures/sim/"), "{claims}");
        assert!(!console.contains("is for model"), "{console}");
        assert_eq!(record["run"]["claims"], serde_json::Value::Null);
    }
}

/// The power-fail and hot-plug campaigns judge the ready time, power-loss protection and
/// hot-plug: the simulated 1.4 drive (a volatile write cache without power-loss
/// protection, CSTS.RDY within about 2.5 s) keeps a 5 s ready time and hot-plug, breaks
/// a claimed power-loss protection, and a 100 ms ready time.
#[test]
fn campaigns_judge_the_ready_time_power_loss_protection_and_hot_plug_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        "drive: nvtest simulated enterprise NVMe 1.4\nready_time: 5 s\npower_loss_protection: true\nhot_plug: true\n";
    let path = claims_file(dir.path(), text);
    let file = path.display().to_string();
    let campaigns = ["--suite", "power-fail", "--suite", "hot-plug", "--exact", "power-fail::cut-under-load"];
    let mut args = campaigns.to_vec();
    args.extend(["--filter", "hot-plug::orderly-removal", "--claims", &file, "sim:enterprise-1.4"]);
    let (status, console, record) = run_with_claims(dir.path(), &args);
    assert_eq!(status, Some(1), "{console}");
    let p = promises(&record);
    assert_eq!((p["ready_time"].0.as_str(), p["hot_plug"].0.as_str()), ("met", "met"), "{console}");
    assert_eq!(
        p["ready_time"].1["judged_by"],
        serde_json::json!(["power-fail::cut-under-load", "hot-plug::orderly-removal"])
    );
    let plp = &p["power_loss_protection"];
    assert_eq!(plp.0, "breached", "{console}");
    assert!(plp.1["observed"][0].as_str().unwrap().contains("completed: expected generation"), "{plp:?}");
    let path = claims_file(dir.path(), &text.replace("5 s", "100 ms"));
    let mut args = vec!["--suite", "hot-plug", "--filter", "orderly-removal", "--claims"];
    let file = path.display().to_string();
    args.extend([file.as_str(), "sim:enterprise-1.4"]);
    let (status, console, record) = run_with_claims(dir.path(), &args);
    assert_eq!(status, Some(1), "{console}");
    let p = promises(&record);
    assert_eq!(p["ready_time"].0, "breached", "{console}");
    assert!(p["ready_time"].1["observed"][0].as_str().unwrap().contains("CSTS.RDY = 1 after"), "{:?}", p["ready_time"]);
    // The campaign ended on the ready time: hot-plug was not judged.
    assert_eq!(p["hot_plug"].0, "not-measured", "{console}");
}
