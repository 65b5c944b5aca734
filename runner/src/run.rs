//! Running loaded suites on one device: one libtest-mimic trial per expanded case, named
//! `SUITE::CASE`, run one at a time. A device thread owns the session (so the session
//! needs not be `Send`): it opens the target, then executes the cases the trials hand it,
//! one at a time, timing each and turning a panic into an error verdict. Every outcome is
//! recorded for the reports; the console shows the device identity first, and at the end
//! the expected failures, where the JUnit report went and, last, the fault of the host
//! under the target if there was one (a full disk under QEMU's images).

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Completion, Conclusion, Failed, Trial};

/// Prints a line on stdout; a closed stdout is not an error worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

use crate::exec::{DeviceIdentity, Session};
use crate::report::{junit, CaseResult, RunResults};
use crate::safety::{self, SafetyOptions};
use crate::suite::{ExpandedCase, LoadedSuite};
use crate::target::TargetSpec;
use crate::verdict::{CaseOutcome, Verdict};
use nvme::linux::Host;

/// What TARGET names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunTarget {
    /// A target nvtest's own driver runs (sim, QEMU): disposable, no opt-in needed.
    Spec(TargetSpec),
    /// A controller of the Linux NVMe driver (`/dev/nvmeN`): a real drive, whose
    /// destructive cases pass the safety gate ([`crate::safety`]).
    Kernel(PathBuf),
}

impl RunTarget {
    /// The target as written for reports.
    pub fn describe(&self) -> String {
        match self {
            RunTarget::Spec(spec) => spec.describe(),
            RunTarget::Kernel(path) => path.display().to_string(),
        }
    }
}

/// What the command line asks of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOptions {
    pub target: RunTarget,
    /// `--allow-destructive`, `--confirm-serial`, `--preserve`.
    pub safety: SafetyOptions,
    /// Substring of `SUITE::CASE` (or the whole name with `exact`).
    pub filter: Option<String>,
    pub exact: bool,
    /// `--skip`: cases whose `SUITE::CASE` contains one of these (equals, with `exact`)
    /// are left out, as libtest's `--skip`.
    pub skip: Vec<String>,
    /// List the cases instead of running them; no device is opened.
    pub list: bool,
    pub junit: Option<PathBuf>,
    /// Where libtest-mimic's case lines go instead of stdout (nvtest's own tests use this
    /// so that an inner "test result: FAILED" line never mixes with cargo test's).
    pub console_file: Option<PathBuf>,
    /// The target's expected findings (`--expect`).
    pub expect: Option<PathBuf>,
    /// TARGET was not given: the run tests nvtest's built-in simulated drive, and says so
    /// on the console and in every report.
    pub default_target: bool,
    /// What a run in which no case is selected does (`--no-cases`).
    pub no_cases: NoCases,
}

/// What a run in which the filters select no case does: by default it is an error of its
/// own (exit status 4, as nextest's "no tests to run"), so a mistyped `--filter` never
/// passes a pipeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum NoCases {
    /// Exit status 4, nothing opened.
    #[default]
    Fail,
    /// A warning on stderr, then an empty run (exit status 0).
    Warn,
    /// An empty run, exit status 0.
    Pass,
}

/// What executes cases on one device: [`Session`], or a stand-in in tests.
pub trait CaseRunner {
    fn identity(&self) -> DeviceIdentity;
    fn run_case(&mut self, case: &ExpandedCase) -> CaseOutcome;

    /// The host fault of the run in one line (nvtest's own error, not the drive's), if
    /// the host under the target failed; asked once, after the last case.
    fn host_fault(&self) -> Option<String> {
        None
    }
}

impl CaseRunner for Session {
    fn identity(&self) -> DeviceIdentity {
        Session::identity(self).clone()
    }

    fn run_case(&mut self, case: &ExpandedCase) -> CaseOutcome {
        Session::run_case(self, case)
    }

    fn host_fault(&self) -> Option<String> {
        Session::host_fault(self)
    }
}

/// A runner whose drive passed the safety gate: before the first case of every further
/// suite the gate's check runs again ([`safety::Guard::recheck`]); once it finds the
/// drive in use, no destructive case is sent any more (each is an error saying why).
pub struct Rechecked<R> {
    inner: R,
    guard: Option<safety::Guard>,
    suite: Option<String>,
    stopped: Option<String>,
}

impl<R> Rechecked<R> {
    /// `guard`: what the gate holds (`None` when no destructive case runs).
    pub fn new(inner: R, guard: Option<safety::Guard>) -> Self {
        Rechecked { inner, guard, suite: None, stopped: None }
    }
}

impl<R: CaseRunner> CaseRunner for Rechecked<R> {
    fn identity(&self) -> DeviceIdentity {
        self.inner.identity()
    }

    fn run_case(&mut self, case: &ExpandedCase) -> CaseOutcome {
        if self.suite.as_deref() != Some(case.suite.as_str()) {
            // The first suite runs right after the gate's own check.
            let further = self.suite.replace(case.suite.clone()).is_some();
            if let (true, None, Some(guard)) = (further, &self.stopped, self.guard.as_mut()) {
                if let Err(lines) = guard.recheck() {
                    self.stopped = Some(format!(
                        "the safety gate's check before suite `{}` found the drive in use: {}",
                        case.suite,
                        lines.join("; ")
                    ));
                }
            }
        }
        match &self.stopped {
            Some(why) if case.destructive => error_outcome(format!("destructive case not run: {why}")),
            _ => self.inner.run_case(case),
        }
    }
}

/// Why a run could not do its job (exit status 2), as one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunError {
    /// The target did not open.
    Target(String),
    /// The JUnit report could not be written.
    Report(String),
    /// The console stopped taking output (a closed pipe) during the run.
    Console(String),
    /// The safety gate refused destructive cases: what was found and what to do, one
    /// line each after the first.
    Refused(String),
    /// The filters selected no case (and `--no-cases fail`, the default).
    NoCases(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Target(e)
            | RunError::Report(e)
            | RunError::Console(e)
            | RunError::Refused(e)
            | RunError::NoCases(e) => f.write_str(e),
        }
    }
}

impl From<safety::GateError> for RunError {
    fn from(e: safety::GateError) -> Self {
        match e {
            safety::GateError::BadTarget(line) => RunError::Target(line),
            refused @ safety::GateError::Refused { .. } => RunError::Refused(refused.to_string()),
        }
    }
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct RunSummary {
    pub results: RunResults,
    /// libtest-mimic's counts, as the console showed them.
    pub conclusion: Conclusion,
    /// The host under the target failed during the run ([`CaseRunner::host_fault`]):
    /// the run could not do its job (exit status 2).
    pub host_fault: Option<String>,
}

impl RunSummary {
    /// Whether a case failed or errored (exit status 1).
    pub fn has_failed(&self) -> bool {
        self.results.cases.iter().any(|c| c.outcome.verdict.is_failure())
    }
}

/// The trial name of a case: `SUITE::CASE`.
pub fn trial_name(case: &ExpandedCase) -> String {
    format!("{}::{}", case.suite, case.name)
}

/// libtest-mimic's arguments for our options: one thread, our filter.
pub fn arguments(options: &RunOptions) -> Arguments {
    Arguments {
        filter: options.filter.clone(),
        exact: options.exact,
        skip: options.skip.clone(),
        list: options.list,
        test_threads: Some(1),
        logfile: options.console_file.as_ref().map(|p| p.display().to_string()),
        ..Arguments::default()
    }
}

/// Prints `SUITE::CASE: test` (libtest's list format) for every case libtest-mimic's
/// filter keeps. Opens nothing. A closed output (`nvtest --list | head`) ends the list.
pub fn list(suites: &[LoadedSuite], options: &RunOptions) -> std::io::Result<()> {
    let args = arguments(options);
    let mut out: Box<dyn Write> = match &options.console_file {
        Some(path) => Box::new(std::fs::File::create(path)?),
        None => Box::new(std::io::stdout().lock()),
    };
    for case in cases(suites) {
        let trial = Trial::test(trial_name(case), || Ok(()));
        if !args.is_filtered_out(&trial) {
            writeln!(out, "{}: test", trial.name())?;
        }
    }
    out.flush()
}

/// A run whose filters select no case: an error of its own unless `--no-cases` says
/// otherwise, found before anything is opened.
fn check_selection(suites: &[LoadedSuite], options: &RunOptions) -> Result<(), RunError> {
    let args = arguments(options);
    let all = cases(suites).count();
    let selected = cases(suites).filter(|c| !args.is_filtered_out(&Trial::test(trial_name(c), || Ok(())))).count();
    if selected > 0 {
        return Ok(());
    }
    let names: Vec<&str> = suites.iter().map(|s| s.suite.name.as_str()).collect();
    let exact = if options.exact { "--exact " } else { "" };
    let skips: Vec<String> = options.skip.iter().map(|s| format!("`{s}`")).collect();
    let why = match (&options.filter, skips.is_empty(), all) {
        (_, _, 0) => format!("the suites {} hold no case", names.join(", ")),
        (Some(f), true, _) => format!("--filter {exact}`{f}` matches none of the {all} cases of {}", names.join(", ")),
        (Some(f), false, _) => format!(
            "of the {all} cases of {}, none matches --filter {exact}`{f}` without --skip {}",
            names.join(", "),
            skips.join(", ")
        ),
        (None, _, _) => {
            format!("--skip {exact}{} leaves out all {all} cases of {}", skips.join(", "), names.join(", "))
        }
    };
    let message = format!("no case to run: {why} (`nvtest --list` shows them; `--no-cases pass` accepts an empty run)");
    match options.no_cases {
        NoCases::Fail => Err(RunError::NoCases(message)),
        NoCases::Warn => {
            eprintln!("warning: {message}");
            Ok(())
        }
        NoCases::Pass => Ok(()),
    }
}

/// Opens the target and runs the suites on it.
pub fn run(suites: &[LoadedSuite], options: &RunOptions) -> Result<RunSummary, RunError> {
    run_on(&Host::real(), suites, options)
}

/// [`run`] with the kernel's views (sysfs, /dev, /proc) of `host`.
///
/// On a kernel target the safety gate runs first, before anything is sent: the path must
/// be a controller, and destructive cases need the opt-ins and a drive nothing uses,
/// held exclusively until the run ends. Once the device is open, a confirmed serial must
/// also be Identify Controller's SN.
pub fn run_on(host: &Host, suites: &[LoadedSuite], options: &RunOptions) -> Result<RunSummary, RunError> {
    if !options.list {
        check_selection(suites, options)?;
    }
    // The findings file is read before the device is opened: a bad file sends nothing.
    let findings = match &options.expect {
        Some(path) => crate::topology::load_expected(path).map_err(RunError::Target)?,
        None => Vec::new(),
    };
    let destructive = safety::destructive_cases(suites, &arguments(options), options.safety.preserve).len();
    let confirm = options.safety.clone();
    let checked = move |mut session: Session| {
        safety::confirm_identity(session.identity(), &confirm, destructive)?;
        session.expect_findings(findings);
        Ok(session)
    };
    match &options.target {
        RunTarget::Spec(spec) => {
            let spec = spec.clone();
            run_with(suites, options, move || checked(Session::open(&spec)?))
        }
        RunTarget::Kernel(path) => {
            if options.list {
                return run_with(suites, options, || Err::<Session, _>("listing opens nothing".to_string()));
            }
            let cases = safety::destructive_cases(suites, &arguments(options), options.safety.preserve);
            // Held until the run ends, and checked again between suites.
            let guard = safety::gate(host, path, &cases, &options.safety)?;
            let (host, path) = (host.clone(), path.clone());
            run_with(suites, options, move || {
                let device = safety::open_linux_target(&host, &path)?;
                let session = checked(Session::with_device(path.display().to_string(), device)?)?;
                Ok(Rechecked::new(session, guard))
            })
        }
    }
}

/// Runs the suites on the device `open` gives, in a device thread of its own.
pub fn run_with<R, F>(suites: &[LoadedSuite], options: &RunOptions, open: F) -> Result<RunSummary, RunError>
where
    R: CaseRunner + 'static,
    F: FnOnce() -> Result<R, String> + Send + 'static,
{
    if options.list {
        match list(suites, options) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(RunError::Console(format!("cannot write the list: {e}")))
            }
            _ => {}
        }
        let results = RunResults::new(DeviceIdentity::default(), suites);
        return Ok(RunSummary { results, conclusion: empty_conclusion(), host_fault: None });
    }
    if let Some(dir) = options.junit.as_ref().and_then(|p| p.parent()).filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| RunError::Report(format!("cannot create {} for the JUnit report: {e}", dir.display())))?;
    }
    let device = Device::start(open).map_err(RunError::Target)?;
    let mut identity = device.identity.clone();
    if options.default_target {
        identity.target = format!("{} (nvtest's built-in simulated drive: no TARGET was given)", identity.target);
    }
    print_identity(&identity);

    let records: Arc<Mutex<Vec<(usize, CaseResult)>>> = Arc::default();
    let trials = cases(suites)
        .enumerate()
        .map(|(index, case)| trial(index, case.clone(), options.safety.preserve, device.jobs.clone(), records.clone()))
        .collect();
    let mut results = RunResults::new(identity, suites);
    // libtest-mimic panics when stdout closes (`nvtest | head`): the run stops there, but
    // the cases that ran are still reported.
    let conclusion = catch_unwind(AssertUnwindSafe(|| libtest_mimic::run(&arguments(options), trials)));
    let host_fault = device.stop();

    let mut records = std::mem::take(&mut *records.lock().unwrap_or_else(|p| p.into_inner()));
    records.sort_by_key(|(index, _)| *index);
    results.cases = records.into_iter().map(|(_, r)| r).collect();
    let conclusion = match conclusion {
        Ok(conclusion) => conclusion,
        Err(panic) => {
            if let Some(path) = &options.junit {
                junit::write(path, &results).map_err(RunError::Report)?;
            }
            let cause = panic_text(panic.as_ref());
            return Err(RunError::Console(format!("the console stopped taking output, run cut short: {cause}")));
        }
    };

    print_expected_failures(&results);
    print_warnings(&results);
    if let Some(path) = &options.junit {
        junit::write(path, &results).map_err(RunError::Report)?;
        let c = results.counts();
        say!(
            "JUnit report: {} ({} cases: {} passed, {} failed, {} errors, {} skipped, {} expected failures)",
            path.display(),
            c.total(),
            c.passed,
            c.failed,
            c.errors,
            c.skipped,
            c.expected_failures
        );
    } else {
        say!("JUnit report: not written (give --junit PATH)");
    }
    if let Some(fault) = &host_fault {
        say!("error: {fault}");
    }
    let c = results.counts();
    if c.total() > 0 && c.skipped == c.total() {
        say!(
            "every one of the {} cases was skipped: nothing on the drive was checked (each skip above says what was \
             missing)",
            c.total()
        );
    }
    Ok(RunSummary { results, conclusion, host_fault })
}

/// The skip reason of a destructive case under `--preserve`.
pub const PRESERVED: &str = "destructive case, not run: --preserve keeps the drive's data and configuration";

fn cases(suites: &[LoadedSuite]) -> impl Iterator<Item = &ExpandedCase> {
    suites.iter().flat_map(|s| s.cases.iter())
}

fn empty_conclusion() -> Conclusion {
    Conclusion { num_filtered_out: 0, num_passed: 0, num_failed: 0, num_ignored: 0, num_measured: 0 }
}

/// A case handed to the device thread, and where its outcome goes.
struct Job {
    case: ExpandedCase,
    reply: mpsc::Sender<CaseOutcome>,
}

/// The device thread: it owns the runner for the whole run, and ends with the run's
/// host fault ([`CaseRunner::host_fault`]).
struct Device {
    identity: DeviceIdentity,
    jobs: mpsc::Sender<Job>,
    thread: JoinHandle<Option<String>>,
}

impl Device {
    fn start<R, F>(open: F) -> Result<Device, String>
    where
        R: CaseRunner + 'static,
        F: FnOnce() -> Result<R, String> + Send + 'static,
    {
        let (ready_tx, ready_rx) = mpsc::channel::<Result<DeviceIdentity, String>>();
        let (jobs, jobs_rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("nvtest-device".into())
            .spawn(move || {
                let mut runner = match catch_unwind(AssertUnwindSafe(open)) {
                    Ok(Ok(runner)) => runner,
                    Ok(Err(e)) => {
                        let _ = ready_tx.send(Err(e));
                        return None;
                    }
                    Err(panic) => {
                        let e = format!("opening the target panicked: {}", panic_text(panic.as_ref()));
                        let _ = ready_tx.send(Err(e));
                        return None;
                    }
                };
                if ready_tx.send(Ok(runner.identity())).is_err() {
                    return None;
                }
                for job in jobs_rx {
                    let started = Instant::now();
                    let outcome = catch_unwind(AssertUnwindSafe(|| runner.run_case(&job.case)));
                    let mut outcome = outcome.unwrap_or_else(|panic| {
                        error_outcome(format!("nvtest panicked running the case: {}", panic_text(panic.as_ref())))
                    });
                    outcome.duration = started.elapsed();
                    let _ = job.reply.send(outcome);
                }
                runner.host_fault()
            })
            .map_err(|e| format!("cannot start the device thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(identity)) => Ok(Device { identity, jobs, thread }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err("the device thread stopped before the target opened".into())
            }
        }
    }

    /// Closes the device: the thread drops the runner and ends. Returns the run's host
    /// fault.
    fn stop(self) -> Option<String> {
        drop(self.jobs);
        self.thread.join().unwrap_or(None)
    }
}

fn trial(
    index: usize,
    case: ExpandedCase,
    preserve: bool,
    jobs: mpsc::Sender<Job>,
    records: Arc<Mutex<Vec<(usize, CaseResult)>>>,
) -> Trial {
    Trial::ignorable_test(trial_name(&case), move || {
        let (reply, outcome_rx) = mpsc::channel();
        let (suite, name) = (case.suite.clone(), case.name.clone());
        let outcome = if preserve && case.destructive {
            // Never handed to the device.
            CaseOutcome { verdict: Verdict::Skipped(PRESERVED.into()), log: Vec::new(), duration: Duration::ZERO }
        } else {
            match jobs.send(Job { case, reply }) {
                Ok(()) => outcome_rx.recv().unwrap_or_else(|_| error_outcome("the device thread stopped".into())),
                Err(_) => error_outcome("the device thread stopped".into()),
            }
        };
        let completion = completion(&outcome);
        records.lock().unwrap_or_else(|p| p.into_inner()).push((index, CaseResult { suite, case: name, outcome }));
        completion
    })
}

/// How libtest-mimic shows a verdict: pass and expected failure are ok, a skip is ignored
/// with its reason, the rest fail with the evidence and the case log.
pub fn completion(outcome: &CaseOutcome) -> Result<Completion, Failed> {
    let message = match &outcome.verdict {
        Verdict::Pass | Verdict::Warning(_) | Verdict::ExpectedFailure { .. } => return Ok(Completion::Completed),
        Verdict::Skipped(reason) => return Ok(Completion::ignored_with(reason)),
        Verdict::Fail(failure) => failure.to_string(),
        Verdict::Error(e) => format!("error (nvtest or the transport, not the drive): {e}"),
        Verdict::UnexpectedPass { reason } => {
            format!("unexpected pass: this target's expected findings list the case as failing ({reason})")
        }
    };
    Err(Failed::from(with_log(message, &outcome.log)))
}

fn with_log(mut message: String, log: &[String]) -> String {
    if !log.is_empty() {
        message.push_str("\n  log:");
        for line in log {
            message.push_str("\n    ");
            message.push_str(line);
        }
    }
    message
}

fn error_outcome(message: String) -> CaseOutcome {
    CaseOutcome { verdict: Verdict::Error(message), log: Vec::new(), duration: Duration::ZERO }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

fn print_identity(identity: &DeviceIdentity) {
    say!("nvtest {} — target {}", env!("CARGO_PKG_VERSION"), identity.target);
    say!("  model     {}", identity.model);
    say!("  serial    {}", identity.serial);
    say!("  firmware  {}", identity.firmware);
    say!("  NVMe      {}", identity.version);
}

/// Violations of rules the specification may not require (advisory cases): shown in
/// full, counted as passed.
fn print_warnings(results: &RunResults) {
    let warnings: Vec<_> = results
        .cases
        .iter()
        .filter_map(|c| match &c.outcome.verdict {
            Verdict::Warning(failure) => Some((c, failure)),
            _ => None,
        })
        .collect();
    if warnings.is_empty() {
        return;
    }
    say!("warnings (advisory cases: the specification may not require this; counted as ok):");
    for (case, failure) in warnings {
        say!("    {}::{}", case.suite, case.case);
        for line in failure.to_string().lines() {
            say!("      {line}");
        }
    }
    say!();
}

fn print_expected_failures(results: &RunResults) {
    let expected: Vec<(&CaseResult, &String)> = results
        .cases
        .iter()
        .filter_map(|c| match &c.outcome.verdict {
            Verdict::ExpectedFailure { reason, .. } => Some((c, reason)),
            _ => None,
        })
        .collect();
    if expected.is_empty() {
        return;
    }
    say!("expected failures (deviations this target is known for; counted as ok):");
    for (case, reason) in expected {
        say!("    {}::{} — {reason}", case.suite, case.case);
    }
    say!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::SuiteInfo;
    use crate::verdict::{Failure, Rule};

    /// A device that answers each case with the verdict its name asks for.
    struct Scripted {
        seen: Vec<String>,
    }

    impl CaseRunner for Scripted {
        fn identity(&self) -> DeviceIdentity {
            DeviceIdentity {
                target: "scripted".into(),
                model: "M".into(),
                serial: "S".into(),
                firmware: "F".into(),
                version: "1.4".into(),
            }
        }

        fn run_case(&mut self, case: &ExpandedCase) -> CaseOutcome {
            self.seen.push(case.name.clone());
            let failure = Failure {
                rule: Rule { section: "§1".into(), text: "rule".into() },
                sent: "s".into(),
                observed: "o".into(),
                expected: "e".into(),
            };
            let verdict = match case.name.as_str() {
                "pass" => Verdict::Pass,
                "fail" => Verdict::Fail(failure),
                "skip" => Verdict::Skipped("OACS bit 3 is 0".into()),
                "error" => Verdict::Error("transport broke".into()),
                "known" => Verdict::ExpectedFailure { failure, reason: "quirk".into() },
                _ => panic!("the scripted device does not know {}", case.name),
            };
            CaseOutcome { verdict, log: vec![format!("ran {}", case.name)], duration: Duration::ZERO }
        }
    }

    fn suite(names: &[&str]) -> LoadedSuite {
        LoadedSuite {
            path: "s.yaml".into(),
            suite: SuiteInfo { name: "s".into(), title: "t".into(), spec: vec![], destructive: false },
            cases: names
                .iter()
                .map(|n| ExpandedCase {
                    suite: "s".into(),
                    name: n.to_string(),
                    title: String::new(),
                    rule: String::new(),
                    requires: vec![],
                    destructive: false,
                    advisory: false,
                    steps: vec![],
                    params: vec![],
                })
                .collect(),
        }
    }

    /// Options for a run whose console lines go to a file in `dir`.
    fn options(filter: Option<&str>, dir: &tempfile::TempDir) -> RunOptions {
        RunOptions {
            target: RunTarget::Spec(TargetSpec::parse("sim").unwrap()),
            safety: SafetyOptions::default(),
            filter: filter.map(str::to_string),
            exact: false,
            skip: Vec::new(),
            list: false,
            junit: None,
            console_file: Some(dir.path().join("console.txt")),
            expect: None,
            default_target: false,
            no_cases: Default::default(),
        }
    }

    #[test]
    fn every_verdict_is_recorded_and_counted_as_the_console_counts_it() {
        let suites = [suite(&["pass", "fail", "skip", "error", "known", "panics"])];
        let dir = tempfile::tempdir().unwrap();
        let summary = run_with(&suites, &options(None, &dir), || Ok(Scripted { seen: vec![] })).unwrap();
        let c = summary.conclusion.clone();
        assert_eq!((c.num_passed, c.num_failed, c.num_ignored), (2, 3, 1));
        let counts = summary.results.counts();
        assert_eq!(counts.passed + counts.expected_failures, c.num_passed as usize);
        assert_eq!(counts.failed + counts.errors, c.num_failed as usize);
        assert_eq!(counts.skipped, c.num_ignored as usize);
        let names: Vec<&str> = summary.results.cases.iter().map(|r| r.case.as_str()).collect();
        assert_eq!(names, ["pass", "fail", "skip", "error", "known", "panics"]);
        let Verdict::Error(e) = &summary.results.cases[5].outcome.verdict else {
            panic!("a panic is an error verdict")
        };
        assert!(e.contains("the scripted device does not know panics"), "{e}");
        assert!(summary.has_failed());
        let console = std::fs::read_to_string(dir.path().join("console.txt")).unwrap();
        assert!(console.contains("test s::skip   ... ignored (OACS bit 3 is 0)"), "{console}");
        assert!(console.contains("---- s::fail ----\nrule §1: rule\n  sent:     s"), "{console}");
    }

    /// [`Scripted`] on a host that failed under it.
    struct HostFailed(Scripted);

    impl CaseRunner for HostFailed {
        fn identity(&self) -> DeviceIdentity {
            self.0.identity()
        }

        fn run_case(&mut self, case: &ExpandedCase) -> CaseOutcome {
            self.0.run_case(case)
        }

        fn host_fault(&self) -> Option<String> {
            Some(format!("the disk is full (after {} cases)", self.0.seen.len()))
        }
    }

    #[test]
    fn the_host_fault_of_the_run_is_asked_after_the_last_case() {
        let suites = [suite(&["pass", "error"])];
        let dir = tempfile::tempdir().unwrap();
        let summary = run_with(&suites, &options(None, &dir), || Ok(HostFailed(Scripted { seen: vec![] }))).unwrap();
        assert_eq!(summary.host_fault.as_deref(), Some("the disk is full (after 2 cases)"));
        let summary = run_with(&suites, &options(None, &dir), || Ok(Scripted { seen: vec![] })).unwrap();
        assert_eq!(summary.host_fault, None);
    }

    #[test]
    fn the_filter_keeps_matching_cases_only() {
        let suites = [suite(&["pass", "fail"])];
        let dir = tempfile::tempdir().unwrap();
        let summary = run_with(&suites, &options(Some("s::pass"), &dir), || Ok(Scripted { seen: vec![] })).unwrap();
        assert_eq!(summary.results.cases.len(), 1);
        assert_eq!(summary.conclusion.num_filtered_out, 1);
        assert!(!summary.has_failed());
    }

    #[test]
    fn a_target_that_does_not_open_is_a_run_error() {
        let suites = [suite(&["pass"])];
        let dir = tempfile::tempdir().unwrap();
        let error = run_with::<Scripted, _>(&suites, &options(None, &dir), || Err("sim:nope: no such profile".into()))
            .unwrap_err();
        assert_eq!(error, RunError::Target("sim:nope: no such profile".into()));
    }

    #[test]
    fn an_impossible_junit_directory_is_reported_before_the_device_opens() {
        let suites = [suite(&["pass"])];
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "").unwrap();
        let mut options = options(None, &dir);
        options.junit = Some(dir.path().join("file/junit.xml"));
        let error =
            run_with::<Scripted, _>(&suites, &options, || panic!("opened despite the report error")).unwrap_err();
        assert!(matches!(&error, RunError::Report(e) if e.starts_with("cannot create ")), "{error:?}");
    }

    #[test]
    fn listing_opens_nothing() {
        let suites = [suite(&["pass"])];
        let dir = tempfile::tempdir().unwrap();
        let mut listing = options(None, &dir);
        listing.list = true;
        let summary =
            run_with::<Scripted, _>(&suites, &listing, || panic!("listing must not open the device")).unwrap();
        assert!(summary.results.cases.is_empty());
    }

    #[test]
    fn failures_show_the_rule_and_the_log() {
        let outcome = CaseOutcome {
            verdict: Verdict::Error("queue timed out".into()),
            log: vec!["Identify CNS 1 -> timeout".into()],
            duration: Duration::ZERO,
        };
        let Err(failed) = completion(&outcome) else { panic!("an error verdict is a failed trial") };
        assert_eq!(
            failed.message(),
            Some("error (nvtest or the transport, not the drive): queue timed out\n  log:\n    Identify CNS 1 -> timeout")
        );
    }
}
