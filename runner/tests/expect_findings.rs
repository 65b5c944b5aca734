//! `--expect`: a listed case that fails as listed is an expected failure, and a listed
//! case that passes is an unexpected pass (a failure of the run), so a findings file can
//! neither hide a new failure nor outlive a fixed one.

use std::path::PathBuf;

use nvme_sim::profile::Profile;
use nvme_sim::subsystem::quirk::Quirk;
use nvtest::exec::Session;
use nvtest::suite::load_file;
use nvtest::targets::expected::parse_expected;
use nvtest::verdict::Verdict;

const FINDINGS: &str = r#"target: "a simulated drive with a known deviation"
expected:
  - case: namespaces::attach-already-attached
    reason: "attaches twice"
    rule: "NVMe 1.4 §5.19: Namespace Already Attached"
"#;

fn case(name: &str) -> nvtest::suite::ExpandedCase {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../suites/namespaces.yaml");
    let suite = load_file(&path, Some("namespaces")).unwrap();
    suite.cases.into_iter().find(|c| c.name == name).unwrap()
}

fn session(profile: Profile) -> Session {
    let device = nvtest::targets::open_sim(profile).unwrap();
    let mut s = Session::with_device("sim:enterprise-1.4".into(), device).unwrap();
    s.expect_findings(parse_expected(FINDINGS, "findings.yaml").unwrap());
    s
}

#[test]
fn a_listed_failure_is_expected_and_a_listed_pass_is_not() {
    let quirky = Profile::builtin("enterprise-1.4").unwrap().with_quirk(Quirk::AttachTwiceSucceeds);
    let outcome = session(quirky).run_case(&case("attach-already-attached"), nvtest::exec::fresh_run_seed());
    match outcome.verdict {
        Verdict::ExpectedFailure { reason, .. } => assert_eq!(reason, "attaches twice"),
        other => panic!("expected an expected failure, got {other:?}"),
    }
    let outcome = session(Profile::builtin("enterprise-1.4").unwrap())
        .run_case(&case("attach-already-attached"), nvtest::exec::fresh_run_seed());
    assert!(matches!(outcome.verdict, Verdict::UnexpectedPass { .. }), "{:?}", outcome.verdict);
    assert!(outcome.verdict.is_failure());
}

#[test]
fn unlisted_cases_keep_their_verdict() {
    let quirky = Profile::builtin("enterprise-1.4").unwrap().with_quirk(Quirk::DetachUnattachedSucceeds);
    let outcome = session(quirky).run_case(&case("detach-not-attached"), nvtest::exec::fresh_run_seed());
    assert!(matches!(outcome.verdict, Verdict::Fail(_)), "{:?}", outcome.verdict);
}
