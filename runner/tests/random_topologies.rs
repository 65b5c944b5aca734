//! A lane of unseen targets: QEMU topologies no fixture of ours has, drawn at random —
//! namespace count, data and metadata sizes, extended or separate metadata, sizes small
//! and large, MDTS, I/O queue pairs, queue entries, write cache, identifiers present or
//! absent, namespaces detached at start — and both suites run on each. Nothing may be
//! nvtest's error, and every failure must be a QEMU deviation that
//! `fixtures/qemu/expected.yaml` lists (for some topology) or an advisory case's warning.
//!
//! The seed is printed; `NVTEST_TOPOLOGY_SEED=N` replays a run, `NVTEST_TOPOLOGIES=K`
//! draws K topologies (default 4). Each failing topology is printed in full.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use nvtest::exec::Session;
use nvtest::suite::load_file;
use nvtest::targets::expected::{load_expected, ExpectedFinding, ExpectedVerdict};
use nvtest::targets::TargetSpec;
use nvtest::verdict::Verdict;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// xorshift64*: small, seedable, enough to draw topologies.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One random, valid topology as YAML.
fn topology(draw: &mut Draw, index: u32) -> String {
    let mut y = String::new();
    let serial = format!("NVTRND{index:06}");
    let _ = writeln!(y, "name: random{index}\ndescription: drawn by runner/tests/random_topologies.rs");
    let _ = writeln!(y, "subsystems:\n  - {{id: subsys0, nqn: nvtest-random{index}}}");
    let mut ctrl = format!("  - {{id: nvme0, serial: {serial}, subsystem: subsys0");
    if draw.chance(60) {
        let _ = write!(ctrl, ", mdts: {}", draw.pick(&[1u8, 3, 5, 7]));
    }
    if draw.chance(40) {
        let _ = write!(ctrl, ", max_ioqpairs: {}", draw.pick(&[1u32, 2, 4, 64]));
    }
    if draw.chance(40) {
        let _ = write!(ctrl, ", mqes: {}", draw.pick(&[31u16, 63, 255, 2047]));
    }
    let _ = writeln!(y, "controllers:\n{ctrl}}}");
    let _ = writeln!(y, "namespaces:");
    let count = 1 + draw.below(8) as u32;
    for nsid in 1..=count {
        let lbads = draw.pick(&[512u32, 4096]);
        let ms = if draw.chance(40) { draw.pick(&[8u16, 16, 64]) } else { 0 };
        let blocks = draw.pick(&[1024u64, 8192, 65536, 262144]);
        let mut ns = format!("  - {{nsid: {nsid}, controller: nvme0, lbads: {lbads}, blocks: {blocks}");
        if ms > 0 {
            let _ = write!(ns, ", ms: {ms}, extended_lba: {}", draw.chance(50));
        }
        if draw.chance(50) {
            let _ = write!(ns, ", nguid: \"{:032x}\"", (u128::from(draw.next()) << 64) | u128::from(draw.next()) | 1);
        }
        if draw.chance(50) {
            let _ = write!(ns, ", eui64: {:#x}", draw.next() | 1);
        }
        if draw.chance(50) {
            let _ = write!(ns, ", uuid: auto");
        }
        if draw.chance(30) {
            let _ = write!(ns, ", write_cache: {}", draw.chance(50));
        }
        if nsid > 1 && draw.chance(15) {
            let _ = write!(ns, ", detached: true");
        }
        let _ = writeln!(y, "{ns}}}");
    }
    y
}

/// Whether `case` is a QEMU deviation the findings file lists for some topology, with
/// this kind of verdict (QEMU dying on a case is listed as an error).
fn listed(findings: &[ExpectedFinding], case: &str, verdict: ExpectedVerdict) -> bool {
    findings.iter().any(|f| f.case == case && f.verdict == verdict)
}

/// Runs both suites on one topology; the problems found, one line each.
fn run(path: &Path, findings: &[ExpectedFinding]) -> Vec<String> {
    let spec = TargetSpec::parse(&format!("qemu:{}", path.display())).unwrap();
    let mut session = match Session::open(&spec) {
        Ok(s) => s,
        Err(e) => return vec![format!("the target did not open: {e}")],
    };
    let mut problems = Vec::new();
    let (mut passed, mut skipped) = (0, 0);
    for suite in ["namespaces", "trim"] {
        let loaded = load_file(&repo().join("suites").join(format!("{suite}.yaml")), Some(suite)).unwrap();
        for case in &loaded.cases {
            let name = format!("{}::{}", case.suite, case.name);
            let outcome = session.run_case(case, nvtest::exec::fresh_run_seed());
            match &outcome.verdict {
                Verdict::Pass => passed += 1,
                Verdict::Skipped(_) | Verdict::Warning(_) => skipped += 1,
                Verdict::Fail(_) if listed(findings, &name, ExpectedVerdict::Fail) => {}
                Verdict::Error(_) if listed(findings, &name, ExpectedVerdict::Error) => {}
                other => problems.push(format!("{name}: {other:?}\n    log: {:?}", outcome.log)),
            }
        }
    }
    println!("  {passed} passed, {skipped} skipped or warnings, {} problems", problems.len());
    problems
}

#[test]
fn both_suites_hold_on_random_topologies() {
    nvme::transport::qemu::require_binary(Path::new("qemu-system-x86_64"))
        .unwrap_or_else(|e| panic!("this test needs QEMU: {e}"));
    let seed = std::env::var("NVTEST_TOPOLOGY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    }) | 1;
    let count: u32 = std::env::var("NVTEST_TOPOLOGIES").ok().and_then(|s| s.parse().ok()).unwrap_or(4);
    println!("random topologies: seed {seed} (replay with NVTEST_TOPOLOGY_SEED={seed}), {count} topologies");
    let findings = load_expected(repo().join("fixtures/qemu/expected.yaml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut draw = Draw(seed);
    let mut failed = Vec::new();
    for index in 0..count {
        let text = topology(&mut draw, index);
        let path = dir.path().join(format!("random{index}.yaml"));
        std::fs::write(&path, &text).unwrap();
        println!("topology {index}:\n{text}");
        let problems = run(&path, &findings);
        if !problems.is_empty() {
            failed.push(format!("topology {index} (seed {seed}):\n{text}{}", problems.join("\n")));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
