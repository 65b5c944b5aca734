//! The Linux-guest lane (TARGET `qemu-linux:ns32`): QEMU boots Debian's kernel with the
//! recipe's initramfs (fixtures/guest/build.sh) and nvtest runs inside, against
//! /dev/nvme0 through the Linux NVMe driver.
//!
//! - `qemu-linux:dual`: the dual-port suite through both controllers of one NVM
//!   subsystem in the guest kernel, agreeing with `qemu:dual`;
//!
//! - boot plus the `namespaces` suite is timed (printed, not asserted), and every case
//!   both lanes can run (neither skipped) gets the same verdict as on `qemu:ns32`, where
//!   nvtest's own driver runs the same QEMU device in process; the divergences that are
//!   known are listed below with their cause, and each must really diverge;
//! - the same for `trim`;
//! - a guest that overruns its time is killed, with a clear error, and leaves no QEMU;
//! - power-fail campaigns on the kernel target through a rig (`--rig`): the PCI
//!   remove/rescan fallback, every verdict labelled as such (a campaign without findings
//!   is a warning; the SMART-counter case is skipped), and lab-style commands run with
//!   the drive in their environment, the controller found again by its serial.
//!
//! QEMU and the recipe's Debian packages must be available: where they are not, these
//! tests fail with the reason, never skip. Guests run one at a time (two cores here).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Parser;
use nvtest::cli::{load_suites, Cli};
use nvtest::exec::Session;
use nvtest::suite::load_file;
use nvtest::targets::guest::{self, GuestOutcome, GuestRequest, Timeouts};
use nvtest::targets::{TargetSpec, TopologyRef};
use nvtest::verdict::Verdict;
use quick_xml::events::Event;

/// One guest (or QEMU lane) at a time: they share two cores, and the timing is printed.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Cases whose verdicts differ between `qemu:ns32` and `qemu-linux:ns32` for a known
/// reason, each with that reason. A listed case that no longer diverges fails the test,
/// so the list stays true.
/// None today. `namespaces::detach-not-attached` diverged until a controller that stops
/// answering became the drive's failure: QEMU 10.0.2 counts a namespace's attachments up
/// at every controller enable, so on qemu:ns32 (one enable) the second detach hits
/// `assert(ns->attached > 0)` and QEMU aborts, while in the guest (SeaBIOS's NVMe driver
/// and Linux enabled it) it completes successfully; both lanes now fail it, for one QEMU
/// defect shown two ways (fixtures/qemu/README.md D3, D4).
const KNOWN_DIVERGENCES: &[(&str, &str)] = &[];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn suite_path(name: &str) -> PathBuf {
    repo().join("suites").join(format!("{name}.yaml"))
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// A verdict as both lanes can report it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Pass,
    Warning,
    Fail,
    Error,
    Skipped(String),
}

fn kind(verdict: &Verdict) -> Kind {
    match verdict {
        Verdict::Pass | Verdict::ExpectedFailure { .. } => Kind::Pass,
        Verdict::Warning(_) => Kind::Warning,
        Verdict::Fail(_) | Verdict::UnexpectedPass { .. } => Kind::Fail,
        Verdict::Error(_) => Kind::Error,
        Verdict::Skipped(reason) => Kind::Skipped(reason.clone()),
    }
}

/// The verdicts in a JUnit report of nvtest, by `suite::case`, with the message of each
/// non-pass.
fn junit_verdicts(xml: &str) -> BTreeMap<String, (Kind, String)> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    loop {
        let event = reader.read_event().unwrap_or_else(|e| panic!("the guest's JUnit is malformed: {e}\n{xml}"));
        let attribute = |e: &quick_xml::events::BytesStart<'_>, key: &str| -> String {
            e.attributes()
                .flatten()
                .find(|a| a.key.as_ref() == key.as_bytes())
                .map(|a| a.normalized_value(quick_xml::XmlVersion::Implicit1_0).unwrap().into_owned())
                .unwrap_or_default()
        };
        match &event {
            Event::Start(e) | Event::Empty(e) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                match name.as_str() {
                    "testcase" => {
                        let key = format!("{}::{}", attribute(e, "classname"), attribute(e, "name"));
                        out.insert(key.clone(), (Kind::Pass, String::new()));
                        current = Some(key);
                    }
                    "failure" | "error" | "skipped" => {
                        let key = current.clone().expect("a verdict inside a testcase");
                        let message = attribute(e, "message");
                        let k = match name.as_str() {
                            "failure" => Kind::Fail,
                            "error" => Kind::Error,
                            _ => Kind::Skipped(message.clone()),
                        };
                        out.insert(key, (k, message));
                    }
                    // The testcase's `verdict` property names a warning (a success to JUnit).
                    "property" if attribute(e, "name") == "verdict" && attribute(e, "value") == "warning" => {
                        if let Some(entry) = current.as_ref().and_then(|key| out.get_mut(key)) {
                            entry.0 = Kind::Warning;
                        }
                    }
                    _ => {}
                }
                if matches!(event, Event::Empty(_)) && name == "testcase" {
                    current = None;
                }
            }
            Event::End(e) if e.name().as_ref() == b"testcase" => current = None,
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

/// Runs `suite` in the guest on ns32 (no expected findings, the disposable drive's
/// opt-ins); prints the guest's console when it fails.
fn guest_run(suite: &str) -> (GuestOutcome, BTreeMap<String, (Kind, String)>) {
    guest_run_on("ns32", suite, |_| {})
}

/// Runs `suite` in the guest on `topology`, the request as `configure` leaves it.
fn guest_run_on(
    topology: &str,
    suite: &str,
    configure: impl FnOnce(&mut GuestRequest),
) -> (GuestOutcome, BTreeMap<String, (Kind, String)>) {
    let target = TopologyRef::Builtin(topology.into());
    let mut request = GuestRequest::new(&target, vec![suite_path(suite)]).unwrap();
    request.echo = false;
    configure(&mut request);
    let outcome = guest::execute(&request).unwrap_or_else(|e| panic!("the guest lane failed: {e}"));
    let Some(xml) = &outcome.junit else {
        panic!("no JUnit from the guest; its console:\n{}", outcome.console.join("\n"))
    };
    let verdicts = junit_verdicts(xml);
    assert!(!verdicts.is_empty(), "the guest's JUnit has no cases:\n{xml}");
    (outcome, verdicts)
}

/// Runs `suite` on `qemu:ns32` in process.
fn qemu_run(suite: &str) -> BTreeMap<String, (Kind, String)> {
    qemu_run_on("qemu:ns32", suite)
}

/// Runs `suite` on the guestless target `target` (`qemu:dual`) in process.
fn qemu_run_on(target: &str, suite: &str) -> BTreeMap<String, (Kind, String)> {
    let spec = TargetSpec::parse(target).unwrap();
    let mut session = Session::open(&spec).unwrap_or_else(|e| panic!("{e}"));
    let loaded = load_file(&suite_path(suite), Some(suite)).unwrap_or_else(|e| panic!("{e}"));
    let mut out = BTreeMap::new();
    for case in &loaded.cases {
        let outcome = session.run_case(case, nvtest::exec::fresh_run_seed());
        let message = match &outcome.verdict {
            Verdict::Fail(f) | Verdict::Warning(f) => f.to_string(),
            Verdict::Error(e) => e.clone(),
            _ => String::new(),
        };
        out.insert(format!("{}::{}", case.suite, case.name), (kind(&outcome.verdict), message));
    }
    out
}

/// Every case both lanes ran gets the same verdict, but the known divergences (which
/// must diverge). Prints the comparison.
fn compare(suite: &str, guest: &BTreeMap<String, (Kind, String)>, qemu: &BTreeMap<String, (Kind, String)>) {
    let mut problems = Vec::new();
    let mut compared = 0;
    for (case, (q, q_message)) in qemu {
        let Some((g, g_message)) = guest.get(case) else {
            problems.push(format!("{case}: in the guestless lane but not in the guest's report"));
            continue;
        };
        let known = KNOWN_DIVERGENCES.iter().find(|(c, _)| c == case);
        let both_ran = !matches!(q, Kind::Skipped(_)) && !matches!(g, Kind::Skipped(_));
        println!("{case}: without a guest {q:?} | in the guest {g:?}");
        if !both_ran {
            if known.is_some() {
                problems.push(format!("{case}: listed as a known divergence, but a lane skips it now: remove it"));
            }
            continue;
        }
        compared += 1;
        match (q == g, known) {
            (true, None) => {}
            (false, Some(_)) => {}
            (true, Some(_)) => problems.push(format!(
                "{case}: listed as a known divergence, but both lanes say {q:?} now: remove it from the list"
            )),
            (false, None) => problems.push(format!(
                "{case}: the guestless lane says {q:?}, the guest says {g:?}\n    guestless: {q_message}\n    guest: {g_message}"
            )),
        }
    }
    for case in guest.keys().filter(|c| !qemu.contains_key(*c)) {
        problems.push(format!("{case}: in the guest's report but not run without a guest"));
    }
    println!("{suite}: {compared} cases compared");
    assert!(compared > 0, "{suite}: no case ran on both lanes");
    assert!(problems.is_empty(), "{suite}: the lanes disagree:\n  {}", problems.join("\n  "));
}

#[test]
fn namespaces_in_the_guest_agree_with_the_qemu_lane_and_boot_plus_suite_is_timed() {
    let _one = lock();
    let started = Instant::now();
    let (outcome, guest) = guest_run("namespaces");
    let elapsed = started.elapsed();
    let t = outcome.timings;
    println!(
        "qemu-linux:ns32 namespaces: boot {:.1} s + nvtest {:.1} s = {:.1} s from QEMU's start to power-off \
         (image check {:.1} s; {:.1} s in all); nvtest exited {}",
        t.boot.as_secs_f64(),
        t.run.as_secs_f64(),
        t.guest_total.as_secs_f64(),
        t.image.as_secs_f64(),
        elapsed.as_secs_f64(),
        outcome.exit_status
    );
    assert_eq!(outcome.controller, "/dev/nvme0");
    assert!(outcome.stages.iter().any(|s| s.contains("32 namespace node(s) of 32 expected")), "{:?}", outcome.stages);
    let qemu = qemu_run("namespaces");
    compare("namespaces", &guest, &qemu);
    // What only the kernel target skips, it skips because of the kernel driver.
    for (case, (k, _)) in &guest {
        if let (Kind::Skipped(reason), Some((q, _))) = (k, qemu.get(case)) {
            if !matches!(q, Kind::Skipped(_)) {
                assert!(
                    reason.contains("needs a userspace-driver target") || reason.contains("kernel driver"),
                    "{case} is skipped only in the guest, for another reason than the kernel driver: {reason}"
                );
            }
        }
    }
}

#[test]
fn trim_in_the_guest_agrees_with_the_qemu_lane() {
    let _one = lock();
    let (outcome, guest) = guest_run("trim");
    println!(
        "qemu-linux:ns32 trim: boot {:.1} s, nvtest {:.1} s; nvtest exited {}",
        outcome.timings.boot.as_secs_f64(),
        outcome.timings.run.as_secs_f64(),
        outcome.exit_status
    );
    let qemu = qemu_run("trim");
    compare("trim", &guest, &qemu);
}

/// Two controllers of one NVM subsystem in the guest kernel (`qemu-linux:dual`, native
/// multipath off): the dual-port suite runs through both, each port's commands on its
/// own controller's devices, and agrees with `qemu:dual` where both lanes run a case.
#[test]
fn dual_port_runs_in_the_guest_through_both_controllers_of_the_subsystem() {
    let _one = lock();
    let (outcome, guest) = guest_run_on("dual", "dual-port", |r| {
        r.expect = Some(repo().join("fixtures/guest/expected.yaml"));
    });
    println!(
        "qemu-linux:dual dual-port: boot {:.1} s, nvtest {:.1} s; nvtest exited {}",
        outcome.timings.boot.as_secs_f64(),
        outcome.timings.run.as_secs_f64(),
        outcome.exit_status
    );
    let console = outcome.console.join("\n");
    assert!(outcome.stages.iter().any(|s| s.contains("4 namespace node(s) of 4 expected")), "{:?}", outcome.stages);
    assert_eq!(outcome.exit_status, 0, "only the expected finding fails:\n{console}");
    for case in [
        "dual-port::identity",
        "dual-port::shared-namespace-both-ways/lbads=512",
        "dual-port::shared-namespace-both-ways/lbads=4096",
        "dual-port::both-ports-under-load",
        "dual-port::private-namespace",
    ] {
        assert_eq!(guest.get(case).map(|(k, _)| k), Some(&Kind::Pass), "{case} runs through both ports:\n{console}");
    }
    let mut qemu = qemu_run_on("qemu:dual", "dual-port");
    // The same QEMU defect in both lanes (fixtures/qemu/expected.yaml lists it for
    // qemu:dual): run without findings here, it is a failure; the guest's report, run with
    // the lane's findings, shows it expected.
    let private = qemu.get_mut("dual-port::private-namespace").expect("run on qemu:dual");
    assert_eq!(private.0, Kind::Fail, "{}", private.1);
    assert!(private.1.contains("observed: Namespace Already Attached"), "{}", private.1);
    private.0 = Kind::Pass;
    compare("dual-port", &guest, &qemu);
}

/// The workload suite runs on the kernel target's io_uring passthrough queues
/// (`LinuxDevice::queued_io`): every `qos` case comes to a verdict with figures (until
/// nvme::linux offered queued I/O, each was skipped: "this target cannot keep commands
/// queued"), and no read is judged wrong.
#[test]
fn qos_in_the_guest_runs_on_io_uring_passthrough_with_figures() {
    let _one = lock();
    let (outcome, guest) = guest_run("qos");
    println!(
        "qemu-linux:ns32 qos: boot {:.1} s, nvtest {:.1} s; nvtest exited {}",
        outcome.timings.boot.as_secs_f64(),
        outcome.timings.run.as_secs_f64(),
        outcome.exit_status
    );
    let xml = outcome.junit.as_deref().unwrap_or_default();
    for (case, (k, message)) in &guest {
        println!("{case}: {k:?} {message}");
        assert!(!matches!(k, Kind::Skipped(_)), "{case} is skipped in the guest: {message}");
        assert!(!matches!(k, Kind::Fail | Kind::Error), "{case}: {k:?}: {message}");
    }
    assert!(xml.contains(".read.iops"), "the guest's JUnit has no read IOPS figure:\n{xml}");
}

/// Processes whose parent is this test process and whose name starts with `qemu`.
fn qemu_children() -> Vec<String> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid …
        let Some((head, rest)) = stat.rsplit_once(") ") else { continue };
        let comm = head.split_once(" (").map(|(_, c)| c).unwrap_or("");
        let ppid = rest.split_whitespace().nth(1).unwrap_or("");
        if ppid == me && comm.starts_with("qemu") {
            found.push(stat);
        }
    }
    found
}

#[test]
fn a_guest_that_overruns_its_time_is_killed_with_a_clear_error() {
    let _one = lock();
    let target = TopologyRef::Builtin("ns32".into());
    let mut request = GuestRequest::new(&target, vec![suite_path("namespaces")]).unwrap();
    request.echo = false;
    // The image first, so its build is not what times out.
    request.image = Some(guest::image(false).unwrap_or_else(|e| panic!("{e}")));
    request.timeouts = Timeouts { boot: Duration::from_secs(1), total: Duration::from_secs(600) };
    let started = Instant::now();
    let error = guest::execute(&request).expect_err("a guest cannot start nvtest within 1 s");
    let text = error.to_string();
    assert!(
        text.starts_with("qemu-linux:ns32: the guest did not start nvtest within 1 s of QEMU's start; QEMU was killed"),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(30), "the timeout took {:?}", started.elapsed());
    assert!(qemu_children().is_empty(), "QEMU left behind: {:?}", qemu_children());

    // The whole run is bounded too.
    request.timeouts = Timeouts { boot: Duration::from_secs(600), total: Duration::from_secs(3) };
    let text = guest::execute(&request).expect_err("3 s is too short for the suite").to_string();
    assert!(text.contains("did not"), "{text}");
    assert!(text.contains("QEMU was killed"), "{text}");
    assert!(qemu_children().is_empty(), "QEMU left behind: {:?}", qemu_children());
}

#[test]
fn the_command_line_runs_the_suites_in_the_guest_with_the_lanes_expected_findings() {
    let _one = lock();
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("reports").join("qemu-linux-ns32.xml");
    let json = dir.path().join("record").join("qemu-linux-ns32.json");
    let expect = repo().join("fixtures").join("guest").join("expected.yaml");
    let args = ["nvtest", "--suite", "namespaces", "--suite", "trim", "--suite", "erase", "--expect"]
        .into_iter()
        .map(String::from)
        .chain([
            expect.display().to_string(),
            "--junit".into(),
            junit.display().to_string(),
            "--json".into(),
            json.display().to_string(),
            "qemu-linux:ns32".into(),
        ]);
    let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{e}"));
    let suites = load_suites(&cli.run.suites, None).unwrap_or_else(|e| panic!("{e}"));
    // What `nvtest … qemu-linux:ns32` runs (nvtest::cli::run_in_guest), without echoing the
    // guest's console into cargo's.
    let mut request = nvtest::cli::guest_request(&cli.run, &suites).unwrap_or_else(|e| panic!("{e}"));
    request.echo = false;
    let outcome = guest::execute(&request).unwrap_or_else(|e| panic!("the guest lane failed: {e}"));
    let status = outcome.exit_status;
    let xml = std::fs::read_to_string(&junit).unwrap_or_else(|e| panic!("no JUnit at {}: {e}", junit.display()));
    assert_eq!(outcome.junit.as_deref(), Some(xml.as_str()), "the JUnit at --junit is the guest's");
    let verdicts = junit_verdicts(&xml);
    // The guest nvtest's JSON record comes back beside its JUnit, with every case.
    let record = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("no JSON record at {}: {e}", json.display()));
    assert_eq!(outcome.json.as_deref(), Some(record.as_str()), "the record at --json is the guest's");
    let record: serde_json::Value = serde_json::from_str(&record).unwrap_or_else(|e| panic!("{e}"));
    let cases = record["targets"][0]["cases"].as_array().map_or(0, Vec::len);
    assert_eq!(cases, verdicts.len(), "the JSON record and the JUnit report hold different cases");
    for suite in ["namespaces::", "trim::", "erase::"] {
        assert!(verdicts.keys().any(|c| c.starts_with(suite)), "no {suite} case in the guest's report");
    }
    let not_ok: Vec<(&String, &Kind)> =
        verdicts.iter().filter(|(_, (k, _))| matches!(k, Kind::Fail | Kind::Error)).map(|(c, (k, _))| (c, k)).collect();
    // Until nvme::linux skips what the kernel refuses, those cases (and only those) fail
    // the run; then it exits 0.
    let nvtest_bugs: Vec<&str> =
        KNOWN_DIVERGENCES.iter().filter(|(_, why)| why.starts_with("nvtest bug")).map(|(c, _)| *c).collect();
    let unexplained: Vec<_> = not_ok.iter().filter(|(c, _)| !nvtest_bugs.contains(&c.as_str())).collect();
    assert!(unexplained.is_empty(), "not ok and not expected: {unexplained:?}");
    assert_eq!(status, if not_ok.is_empty() { 0 } else { 1 }, "{not_ok:?}");
}

/// A short power-fail suite for the guest (each power cycle re-enumerates 32 namespaces
/// under TCG): cuts under load, normal shutdowns, and a case about SMART's counters.
const RIG_SUITE: &str = "suite: pf-rig
title: power cycles through a rig on a drive of the Linux driver
spec: [NVMe 1.4 §6.4 Atomic Operations, NVMe 1.4 §7.6.2 Shutdown]
destructive: true
requires: [power_switch]
cases:
  - name: cut-under-load
    title: power cuts under a write load with Flush and FUA
    rule: \"NVMe 1.4 §6.8, §6.15, §6.4: what a power loss leaves\"
    steps:
      - use_namespaces: {count: 2, lbads: [512, 4096], blocks: 4096}
      - power_fail:
          cycles: 2
          cut_within_ms: 300
          smart_counters: false
          jobs:
            - {name: small, ns: 1, lba: 0, blocks: 1024, write: 97, flush: 3, fua: 10, sizes: [512, 4096], queue_depth: 8, duration_ms: 1000}
            - {name: large, ns: 2, lba: 0, blocks: 1024, write: 97, flush: 3, fua: 10, sizes: [4096, 32768], queue_depth: 8, duration_ms: 1000}
  - name: shutdown-then-power-off
    title: normal shutdowns after a write load
    rule: \"NVMe 1.4 §7.6.2: nothing completed is lost after a normal shutdown\"
    steps:
      - use_namespaces: {count: 1, lbads: [512], blocks: 4096}
      - power_fail:
          cycles: 1
          cut_within_ms: 20
          shutdown: true
          smart_counters: false
          jobs:
            - {name: writes, ns: 1, lba: 0, blocks: 1024, write: 100, sizes: [512, 4096], queue_depth: 8, commands: 300}
  - name: counters
    title: SMART counts the power cut
    rule: \"NVMe 1.4 §5.14.1.2: Power Cycles and Unsafe Shutdowns\"
    steps:
      - use_namespaces: {count: 1, lbads: [512], blocks: 4096}
      - power_fail:
          cycles: 1
          cut_within_ms: 20
          jobs:
            - {name: writes, ns: 1, lba: 0, blocks: 1024, write: 100, sizes: [512], queue_depth: 8, duration_ms: 500}
";

/// Runs [`RIG_SUITE`] in the guest on ns32 with the rig `rig` (YAML), the cases whose
/// names contain one of `filters` (all when empty); the verdicts and the guest's console.
fn rig_run(rig: &str, filters: &[&str]) -> (GuestOutcome, BTreeMap<String, (Kind, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let (suite, rig_file) = (dir.path().join("pf-rig.yaml"), dir.path().join("rig.yaml"));
    std::fs::write(&suite, RIG_SUITE).unwrap();
    std::fs::write(&rig_file, rig).unwrap();
    load_file(&suite, None).unwrap_or_else(|e| panic!("{}", e.render()));
    let target = TopologyRef::Builtin("ns32".into());
    let mut request = GuestRequest::new(&target, vec![suite]).unwrap();
    request.echo = false;
    request.rig = Some(rig_file);
    request.filters = filters.iter().map(|f| f.to_string()).collect();
    let outcome = guest::execute(&request).unwrap_or_else(|e| panic!("the guest lane failed: {e}"));
    let console = outcome.console.join("\n");
    let Some(xml) = &outcome.junit else { panic!("no JUnit from the guest; its console:\n{console}") };
    println!("{console}");
    (outcome.clone(), junit_verdicts(xml))
}

#[test]
fn power_fail_by_the_rigs_pci_remove_rescan_is_judged_and_labelled_in_every_verdict() {
    let _one = lock();
    let (outcome, verdicts) = rig_run("pci_remove_rescan: true\n", &[]);
    let console = outcome.console.join("\n");
    for case in ["pf-rig::cut-under-load", "pf-rig::shutdown-then-power-off"] {
        let (kind, message) = verdicts.get(case).unwrap_or_else(|| panic!("{case} not run:\n{console}"));
        assert_eq!(*kind, Kind::Warning, "{case}: {message}\n{console}");
        // The warning's text, as the console lists it: what was not proven.
        let at = outcome.console.iter().position(|l| l.trim() == case).unwrap_or_else(|| panic!("{console}"));
        let said = outcome.console[at..].iter().take(5).cloned().collect::<Vec<_>>().join("\n");
        assert!(said.contains("by PCI remove/rescan") && said.contains("no power was lost"), "{said}");
        assert!(said.contains("blocks judged, each held what it had to"), "{said}");
    }
    let (kind, _) = &verdicts["pf-rig::counters"];
    let Kind::Skipped(why) = kind else { panic!("the counters case: {kind:?}\n{console}") };
    assert!(why.contains("PCI remove/rescan loses no power"), "{why}");
    assert_eq!(outcome.exit_status, 0, "warnings and skips are not failures:\n{console}");
}

/// The hot-plug suite on a Linux target whose rig removes and rescans the PCI function:
/// the orderly removals are the kernel's (the driver shuts the controller down, the
/// function leaves the bus, a rescan finds it again), every block judged, and the case
/// says what it did not prove (no power was lost); the surprise removal, which the
/// kernel's sysfs cannot do, is skipped saying so.
#[test]
fn hot_plug_by_the_rigs_pci_remove_rescan_removes_in_order_and_skips_the_surprise() {
    let _one = lock();
    let dir = tempfile::tempdir().unwrap();
    let rig_file = dir.path().join("rig.yaml");
    std::fs::write(&rig_file, "pci_remove_rescan: true\n").unwrap();
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/hot-plug.yaml");
    let mut request = GuestRequest::new(&TopologyRef::Builtin("ns32".into()), vec![suite]).unwrap();
    request.echo = false;
    request.rig = Some(rig_file);
    let outcome = guest::execute(&request).unwrap_or_else(|e| panic!("the guest lane failed: {e}"));
    let console = outcome.console.join("\n");
    let Some(xml) = &outcome.junit else { panic!("no JUnit from the guest; its console:\n{console}") };
    let verdicts = junit_verdicts(xml);
    let (kind, message) = &verdicts["hot-plug::orderly-removal"];
    assert_eq!(*kind, Kind::Warning, "{message}\n{console}");
    assert!(console.contains("5 power cycles by PCI remove/rescan") && console.contains("each held what it had to"));
    let (kind, _) = &verdicts["hot-plug::surprise-removal"];
    let Kind::Skipped(why) = kind else { panic!("surprise removal: {kind:?}\n{console}") };
    assert!(why.contains("cannot remove the drive"), "{why}");
    assert_eq!(outcome.exit_status, 0, "{console}");
}

#[test]
fn power_fail_by_a_rigs_commands_finds_the_controller_again_by_its_serial() {
    let _one = lock();
    // What a lab's commands do, done here by the guest's sysfs: the function goes (and
    // stops answering) at power_off; nvtest rescans the bus after power_on. The commands
    // see the drive in their environment; one that fails would end the case as an error.
    let rig = "power_off: 'test -n \"$NVTEST_SERIAL\" && echo 1 > /sys/bus/pci/devices/$NVTEST_PCI_ADDRESS/remove'\n\
               power_on: 'test \"$NVTEST_CONTROLLER\" != \"\"'\n\
               settle: 100 ms\n\
               come_back_within: 60 s\n";
    let (outcome, verdicts) = rig_run(rig, &["pf-rig::cut-under-load"]);
    let console = outcome.console.join("\n");
    let (kind, message) = verdicts.get("pf-rig::cut-under-load").unwrap_or_else(|| panic!("not run:\n{console}"));
    assert_eq!(*kind, Kind::Pass, "{message}\n{console}");
    assert_eq!(outcome.exit_status, 0, "{console}");
}

#[test]
fn a_rig_whose_power_off_leaves_the_drive_powered_is_an_error_not_a_verdict() {
    let _one = lock();
    // `true` cuts nothing: the function still answers configuration reads, so nothing is
    // judged of the cycle and the case is nvtest's (the rig's) error, not the drive's.
    let (outcome, verdicts) =
        rig_run("power_off: 'true'\npower_on: 'true'\ncome_back_within: 2 s\n", &["pf-rig::cut-under-load"]);
    let console = outcome.console.join("\n");
    let (kind, message) = verdicts.get("pf-rig::cut-under-load").unwrap_or_else(|| panic!("not run:\n{console}"));
    assert_eq!(*kind, Kind::Error, "{message}\n{console}");
    assert!(message.contains("still answers configuration reads") && message.contains("kept its power"), "{message}");
    assert_eq!(outcome.exit_status, 1, "{console}");
}
