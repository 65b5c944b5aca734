//! Every case is gated on the capability it uses, not on a neighbour's: a drive with
//! Sanitize and without Format NVM still has every sanitize case checked (they were gated
//! on Format NVM at the suite's level, and their skip named OACS bit 1), and a drive with
//! Format NVM and without Sanitize has its format cases checked and its sanitize cases
//! skipped naming SANICAP.

use std::path::PathBuf;

use nvme_sim::profile::{OptionalCommand, Profile};
use nvtest::exec::Session;
use nvtest::suite::{load_file, ExpandedCase};
use nvtest::verdict::Verdict;

fn erase_cases() -> Vec<ExpandedCase> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../suites/erase.yaml");
    load_file(&path, Some("erase")).unwrap_or_else(|e| panic!("{e}")).cases
}

/// Each erase case's verdict on `profile`, by name.
fn verdicts(profile: Profile) -> Vec<(String, Verdict)> {
    let name = format!("sim:{}", profile.name);
    let device = nvtest::targets::open_sim(profile).unwrap_or_else(|e| panic!("{e}"));
    let mut session = Session::with_device(name, device).unwrap_or_else(|e| panic!("{e}"));
    erase_cases().iter().map(|c| (c.name.clone(), session.run_case(c, 29).verdict)).collect()
}

fn is_sanitize_case(name: &str) -> bool {
    name.contains("sanitize") || name.ends_with("no-deallocate")
}

#[test]
fn a_drive_with_sanitize_and_without_format_nvm_has_its_sanitize_checked() {
    let mut profile = Profile::builtin("enterprise-1.4").unwrap();
    profile.optional_commands.retain(|c| *c != OptionalCommand::FormatNvm);
    let verdicts = verdicts(profile);
    let mut sanitize_ran = 0;
    for (name, verdict) in &verdicts {
        if is_sanitize_case(name) {
            match verdict {
                Verdict::Pass | Verdict::Warning(_) => sanitize_ran += 1,
                // A clean drive is not in sanitize failure mode: that case skips saying so.
                Verdict::Skipped(reason) if name == "sanitize-failure-recovery" => {
                    assert!(reason.contains("not in sanitize failure mode"), "{name}: {reason}")
                }
                other => panic!("{name} runs and passes: {other:?}"),
            }
        } else {
            let Verdict::Skipped(reason) = verdict else { panic!("{name} needs Format NVM: {verdict:?}") };
            assert!(reason.contains("OACS bit 1 (Format NVM)"), "{name}: {reason}");
        }
    }
    let sanitize_cases = verdicts.iter().filter(|(n, _)| is_sanitize_case(n)).count();
    assert_eq!(sanitize_ran, sanitize_cases - 1, "every sanitize case ran but failure recovery: {verdicts:?}");
}

#[test]
fn a_drive_without_sanitize_skips_the_sanitize_cases_naming_sanicap() {
    let mut profile = Profile::builtin("enterprise-1.4").unwrap();
    profile.erase.sanitize = None;
    for (name, verdict) in verdicts(profile) {
        if is_sanitize_case(&name) {
            let Verdict::Skipped(reason) = &verdict else { panic!("{name} needs Sanitize: {verdict:?}") };
            assert!(reason.contains("SANICAP"), "{name}: {reason}");
        } else if name != "crypto-erase-unsupported" {
            assert!(matches!(verdict, Verdict::Pass | Verdict::Warning(_)), "{name} runs and passes: {verdict:?}");
        }
    }
}

/// A drive whose I/O queues hold fewer commands than a job's queue depth (CAP.MQES 7)
/// runs the workload at the depth it offers, saying so, instead of an error: every case
/// with a workload of depth 16 still gets its verdict.
#[test]
fn a_job_deeper_than_mqes_runs_at_the_depth_a_queue_holds() {
    let mut profile = Profile::builtin("enterprise-1.4").unwrap();
    profile.controller.max_queue_entries = 8;
    let name = format!("sim:{}", profile.name);
    let device = nvtest::targets::open_sim(profile).unwrap_or_else(|e| panic!("{e}"));
    let mut session = Session::with_device(name, device).unwrap_or_else(|e| panic!("{e}"));
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../suites/firmware.yaml");
    let suite = load_file(&path, Some("firmware")).unwrap_or_else(|e| panic!("{e}"));
    let case = suite.cases.iter().find(|c| c.name == "activate-without-reset-under-load").unwrap();
    let outcome = session.run_case(case, 29);
    assert_eq!(outcome.verdict, Verdict::Pass, "{:#?}", outcome.log);
    assert!(
        outcome.log.iter().any(|l| l.contains(
            "job mixed: queue depth 16 exceeds what one I/O queue holds (CAP.MQES 7: 7 commands in flight): depth 7 \
             used"
        )),
        "{:#?}",
        outcome.log
    );
}

/// Runs case `name` of suite `suite` on `profile` with `seed`.
fn run_one(profile: Profile, suite: &str, name: &str, seed: u64) -> nvtest::verdict::CaseOutcome {
    let target = format!("sim:{}", profile.name);
    let device = nvtest::targets::open_sim(profile).unwrap_or_else(|e| panic!("{e}"));
    let mut session = Session::with_device(target, device).unwrap_or_else(|e| panic!("{e}"));
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../suites/{suite}.yaml"));
    let loaded = load_file(&path, Some(suite)).unwrap_or_else(|e| panic!("{e}"));
    let case = loaded.cases.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no case {name}"));
    session.run_case(case, seed)
}

/// A drive that allocates a single I/O queue (Number of Queues, NSQA = NCQA = 1), which
/// the driver already uses for its own commands: a campaign of four jobs runs with the
/// four sharing that queue (the driver's own given up meanwhile), saying so, instead of
/// being skipped for want of queues; with two queues, two jobs share each.
#[test]
fn jobs_share_the_queues_a_drive_allocated_when_it_allocated_fewer() {
    for (queues, shared) in [
        (1, vec!["queue 1 shared by small-blocks (depth 16), large-blocks (depth 16), small-reads (depth 8), large-reads (depth 8)"]),
        (2, vec!["queue 1 shared by small-blocks (depth 16), small-reads (depth 8)", "queue 2 shared by large-blocks (depth 16), large-reads (depth 8)"]),
    ] {
        let mut profile = Profile::builtin("enterprise-1.4").unwrap();
        profile.controller.max_io_queues = queues;
        let outcome = run_one(profile, "hot-plug", "surprise-removal", 31);
        assert_eq!(outcome.verdict, Verdict::Pass, "{queues} queue(s): {:#?}", outcome.log);
        for line in shared {
            assert!(
                outcome.log.iter().any(|l| l.starts_with(&format!(
                    "queues: port 1 allocated {queues} I/O queue(s) (Number of Queues) for 4 jobs: {line}"
                ))),
                "{queues} queue(s), `{line}`: {:#?}",
                outcome.log
            );
        }
    }
    // Enough queues: a queue per job, nothing shared.
    let outcome = run_one(Profile::builtin("enterprise-1.4").unwrap(), "hot-plug", "surprise-removal", 31);
    assert_eq!(outcome.verdict, Verdict::Pass, "{:#?}", outcome.log);
    assert!(!outcome.log.iter().any(|l| l.starts_with("queues: ")), "{:#?}", outcome.log);
}

/// Arbitration is between submission queues (NVMe 1.4 §4.13): jobs of different
/// priorities never share one, so a drive with too few queues skips the weighted case,
/// naming the queues it allocated.
#[test]
fn jobs_of_different_priorities_never_share_a_queue() {
    let mut profile = Profile::builtin("enterprise-1.4").unwrap();
    profile.controller.max_io_queues = 1;
    let outcome = run_one(profile, "arbitration", "weighted-shares", 31);
    match &outcome.verdict {
        Verdict::Skipped(why) => {
            assert!(why.contains("the controller allocated 1 (Set Features Number of Queues)"), "{why}")
        }
        other => panic!("expected a skip, got {other:?}: {:#?}", outcome.log),
    }
}
