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
