//! Bad input never panics: every file nvtest reads (suites, sim profiles, QEMU
//! topologies, expected findings, drive claims) is mutated at random (bytes deleted, YAML punctuation
//! inserted, lines replaced, duplicated, swapped, the file cut short) and loaded. Each
//! load either succeeds or fails with located, one-line errors (`file:line:column:
//! message`); what loads is then used as a run would use it (a simulated drive built from
//! the profile, QEMU's command line from the topology, claims cited and judged against
//! Identify), which must not panic either.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use nvme::spec::identify::IdentifyController;
use nvme::spec::registers::Cap;
use nvme_sim::{Profile, Subsystem};
use nvtest::claims::{claims_of_profile, parse_claims, unreported};
use nvtest::targets::expected::parse_expected;
use nvtest::targets::topology::Topology;
use proptest::prelude::*;
use zerocopy::FromZeros;

const ORIGIN: &str = "mutated.yaml";

fn repo_file(relative: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[derive(Clone, Debug)]
enum Mutation {
    /// Delete `len` bytes at a position given as a fraction of the file.
    Delete {
        at: f64,
        len: usize,
    },
    Insert {
        at: f64,
        text: String,
    },
    ReplaceLine {
        line: f64,
        text: String,
    },
    DuplicateLine {
        line: f64,
    },
    SwapLines {
        a: f64,
        b: f64,
    },
    Truncate {
        at: f64,
    },
}

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ :\\-\\[\\]{}#'\"\n\t0-9a-z!&*|>%@`,?.]{1,8}",
        Just(": ".to_string()),
        Just("- ".to_string()),
        Just("\n  ".to_string()),
        Just("~".to_string()),
        Just("18446744073709551616".to_string()),
        Just("-1".to_string()),
        Just("0x".to_string()),
        Just("&a *a".to_string()),
        Just("<<: *a".to_string()),
        Just("!!binary".to_string()),
        Just("\u{feff}".to_string()),
        Just("é§—".to_string()),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0.0..1.0f64;
    prop_oneof![
        (at.clone(), 1usize..24).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (at.clone(), fragment()).prop_map(|(at, text)| Mutation::Insert { at, text }),
        (at.clone(), fragment()).prop_map(|(line, text)| Mutation::ReplaceLine { line, text }),
        at.clone().prop_map(|line| Mutation::DuplicateLine { line }),
        (at.clone(), at.clone()).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
        at.prop_map(|at| Mutation::Truncate { at }),
    ]
}

fn index(fraction: f64, len: usize) -> usize {
    ((fraction * len as f64) as usize).min(len)
}

/// Applies the mutations; byte edits may split a character, which becomes U+FFFD.
fn mutate(original: &str, mutations: &[Mutation]) -> String {
    let mut bytes = original.as_bytes().to_vec();
    for m in mutations {
        match m {
            Mutation::Delete { at, len } => {
                let start = index(*at, bytes.len());
                let end = (start + len).min(bytes.len());
                bytes.drain(start..end);
            }
            Mutation::Insert { at, text } => {
                let start = index(*at, bytes.len());
                bytes.splice(start..start, text.bytes());
            }
            Mutation::Truncate { at } => bytes.truncate(index(*at, bytes.len())),
            Mutation::ReplaceLine { .. } | Mutation::DuplicateLine { .. } | Mutation::SwapLines { .. } => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
                if lines.is_empty() {
                    continue;
                }
                let pick = |f: f64| index(f, lines.len() - 1);
                match m {
                    Mutation::ReplaceLine { line, text } => {
                        let i = pick(*line);
                        lines[i] = text.clone();
                    }
                    Mutation::DuplicateLine { line } => {
                        let i = pick(*line);
                        lines.insert(i, lines[i].clone());
                    }
                    Mutation::SwapLines { a, b } => {
                        let (a, b) = (pick(*a), pick(*b));
                        lines.swap(a, b);
                    }
                    _ => unreachable!("byte mutations are handled above"),
                }
                bytes = lines.join("\n").into_bytes();
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Runs `f`, turning a panic into a test failure that shows the input.
fn no_panic<T>(what: &str, text: &str, f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|_| TestCaseError::fail(format!("{what} panicked on this input:\n---\n{text}\n---")))
}

/// An error must read `mutated.yaml:LINE:COLUMN: message`, on one line, with a line
/// number inside the file (or just past its end, for a premature end).
fn located_one_line(error: &str, text: &str) -> Result<(), TestCaseError> {
    let rest = error
        .strip_prefix(ORIGIN)
        .and_then(|r| r.strip_prefix(':'))
        .ok_or_else(|| TestCaseError::fail(format!("error does not start with `{ORIGIN}:`: {error}")))?;
    let mut parts = rest.splitn(3, ':');
    let line: usize = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
    let column: usize = parts.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let message = parts.next().unwrap_or("").trim();
    prop_assert!(line >= 1 && column >= 1, "no line:column in: {error}");
    prop_assert!(line <= text.lines().count() + 1, "line {line} beyond the file's end in: {error}");
    prop_assert!(!message.is_empty(), "empty message in: {error}");
    prop_assert!(!error.contains('\n'), "error spans lines: {error:?}");
    Ok(())
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..4)
}

fn check_suite(original: &str, mutations: &[Mutation]) -> Result<(), TestCaseError> {
    let text = mutate(original, mutations);
    let loaded = no_panic("loading a suite", &text, || nvtest::suite::load_str(&text, Path::new(ORIGIN), None))?;
    if let Err(e) = loaded {
        prop_assert!(!e.errors.is_empty());
        for error in &e.errors {
            located_one_line(&error.to_string(), &text)?;
        }
    }
    Ok(())
}

fn check_profile(original: &str, mutations: &[Mutation]) -> Result<(), TestCaseError> {
    let text = mutate(original, mutations);
    match no_panic("loading a profile", &text, || Profile::from_str(&text, ORIGIN))? {
        Ok(profile) => {
            // A profile that loads builds a drive, or says why not; it never panics.
            no_panic("building a simulated drive", &text, || Subsystem::new(profile).map(drop))?
                .map_err(|e| TestCaseError::fail(format!("a profile that validated did not build: {e}\n{text}")))?;
        }
        Err(e) => located_one_line(&e.to_string(), &text)?,
    }
    Ok(())
}

fn check_topology(original: &str, mutations: &[Mutation]) -> Result<(), TestCaseError> {
    let text = mutate(original, mutations);
    match no_panic("loading a topology", &text, || Topology::from_str(&text, ORIGIN))? {
        Ok(topology) => {
            no_panic("building QEMU's command line", &text, || (topology.qemu_config(), topology.device_args()))?;
        }
        Err(e) => located_one_line(&e.to_string(), &text)?,
    }
    Ok(())
}

fn check_expected(original: &str, mutations: &[Mutation]) -> Result<(), TestCaseError> {
    let text = mutate(original, mutations);
    if let Err(e) = no_panic("loading expected findings", &text, || parse_expected(&text, ORIGIN))? {
        located_one_line(&e, &text)?;
    }
    Ok(())
}

/// Claims on their own (`in_profile` false) or under a profile's `claims:` key.
fn check_claims(original: &str, mutations: &[Mutation], in_profile: bool) -> Result<(), TestCaseError> {
    let text = mutate(original, mutations);
    let loaded = no_panic("loading claims", &text, || {
        if in_profile {
            claims_of_profile(&text, ORIGIN)
        } else {
            parse_claims(&text, ORIGIN).map(Some)
        }
    })?;
    match loaded {
        Ok(Some(claims)) => {
            // Claims that load are cited and judged against a controller reporting nothing.
            no_panic("citing and judging claims", &text, || {
                let cited: Vec<String> = claims.read_qos.iter().map(|q| claims.cite_read_qos(q)).collect();
                let whole = (claims.verdicts(&[]), claims.model_mismatch("nvtest simulated enterprise NVMe 1.4"));
                (cited, unreported(&claims, &IdentifyController::new_zeroed(), Some(Cap::new())), whole)
            })?;
        }
        Ok(None) => {}
        Err(e) => located_one_line(&e.to_string(), &text)?,
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_mutated_namespaces_suite_loads_or_fails_located(m in mutations()) {
        check_suite(&repo_file("suites/namespaces.yaml"), &m)?;
    }

    #[test]
    fn a_mutated_trim_suite_loads_or_fails_located(m in mutations()) {
        check_suite(&repo_file("suites/trim.yaml"), &m)?;
    }

    #[test]
    fn a_mutated_sim_profile_loads_or_fails_located(m in mutations(), which in 0..2usize) {
        let file = ["fixtures/sim/enterprise-1.4.yaml", "fixtures/sim/enterprise-1.2a.yaml"][which];
        check_profile(&repo_file(file), &m)?;
    }

    #[test]
    fn a_mutated_qemu_topology_loads_or_fails_located(m in mutations(), which in 0..3usize) {
        let file = ["fixtures/qemu/ns32.yaml", "fixtures/qemu/dual.yaml", "fixtures/qemu/hotplug.yaml"][which];
        check_topology(&repo_file(file), &m)?;
    }

    #[test]
    fn mutated_expected_findings_load_or_fail_located(m in mutations(), which in 0..2usize) {
        let file = ["fixtures/qemu/expected.yaml", "fixtures/guest/expected.yaml"][which];
        check_expected(&repo_file(file), &m)?;
    }

    #[test]
    fn a_mutated_claims_file_loads_or_fails_located(m in mutations(), which in 0..3usize) {
        let (file, in_profile) = [
            ("runner/tests/claims/pblaze5-916.yaml", false),
            ("fixtures/sim/enterprise-1.4.yaml", true),
            ("fixtures/sim/enterprise-1.2a.yaml", true),
        ][which];
        check_claims(&repo_file(file), &m, in_profile)?;
    }
}
