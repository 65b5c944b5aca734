//! Running loaded suites on one or several devices: one libtest-mimic trial per selected
//! (target, case), named `SUITE::CASE` (`TARGET::SUITE::CASE` on a run of several
//! targets; ` #N` for pass N of `--repeat`). Each target has a device thread
//! ([`device`]) that opens it and runs its cases strictly one at a time, in order; the
//! targets run in parallel (libtest-mimic's threads take the trials target by target).
//! Every outcome is recorded ([`live`], where SIGINT, SIGTERM and `--timeout` find it to
//! write the reports of a run cut short); the console shows each device's identity and
//! the run seed first, and at the end the expected failures and warnings, where the
//! reports went with their counts (per target on a run of several) and, last, the fault
//! of the host under a target if there was one (a full disk under QEMU's images).

pub mod device;
pub mod live;
pub mod select;

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use libtest_mimic::{Arguments, Completion, Conclusion, Failed, Trial};

use crate::exec::Session;
use crate::identity::DeviceIdentity;
use crate::report::meta::{InputFile, RunMeta};
use crate::report::{CaseResult, RunRecord, RunResults};
use crate::safety::{self, SafetyOptions};
use crate::suite::{ExpandedCase, LoadedSuite, SuiteInfo};
use crate::targets::expected::ExpectedFinding;
use crate::targets::TargetSpec;
use crate::verdict::{CaseOutcome, Verdict};
use device::{error_outcome, panic_text, Opener};
use live::Live;
use nvme::linux::Host;
use select::quoted;
pub use select::Selection;

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

/// The target as written, with a file's path made absolute: what a journal records so
/// that `nvtest resume` finds the target again from any directory.
fn absolute(target: &RunTarget) -> String {
    let abs = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
    match target {
        RunTarget::Spec(TargetSpec::SimFile(p)) => TargetSpec::SimFile(abs(p)).describe(),
        RunTarget::Spec(TargetSpec::QemuFile(p)) => TargetSpec::QemuFile(abs(p)).describe(),
        other => other.describe(),
    }
}

/// What the command line asks of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// The devices, each run with every selected case, in parallel.
    pub targets: Vec<RunTarget>,
    /// `--allow-destructive`, `--confirm-serial`, `--preserve`.
    pub safety: SafetyOptions,
    /// `--filter`, `--skip`, `--exact`.
    pub selection: Selection,
    /// List the cases instead of running them; no device is opened.
    pub list: bool,
    /// `--format`: how the console shows cases (libtest's pretty, terse, json), and how
    /// `--list` lists them (`json`: one object per case with its requirements).
    pub format: Option<libtest_mimic::FormatSetting>,
    pub color: Option<libtest_mimic::ColorSetting>,
    /// `-q`: one character per case.
    pub quiet: bool,
    /// `--show-output` / `--nocapture`: the command log of every case, passing ones too.
    pub show_output: bool,
    /// `--test-threads`: how many targets run at once (cases of one device never run
    /// concurrently); default all.
    pub test_threads: Option<usize>,
    pub junit: Option<PathBuf>,
    /// `--json`: the run record ([`crate::report::json`]).
    pub json: Option<PathBuf>,
    /// Where libtest-mimic's case lines go instead of stdout (nvtest's own tests use this
    /// so that an inner "test result: FAILED" line never mixes with cargo test's).
    pub console_file: Option<PathBuf>,
    /// The targets' expected findings (`--expect`, repeatable).
    pub expect: Vec<PathBuf>,
    /// The drive's claims (`--claims`); without it a simulated drive's profile gives its own.
    pub claims: Option<PathBuf>,
    /// Where power-fail campaigns keep their journals (`--journal DIR`), for `nvtest resume`.
    pub journal: Option<PathBuf>,
    /// How a hardware runner switches the drive's power (`--rig FILE`, drives of the Linux
    /// driver only).
    pub rig: Option<PathBuf>,
    /// The vendor's firmware image for the firmware suite (`--firmware FILE`).
    pub firmware: Option<PathBuf>,
    /// TARGET was not given: the run tests nvtest's built-in simulated drive, and says so
    /// on the console and in every report.
    pub default_target: bool,
    /// What a run in which no case is selected does (`--no-cases`).
    pub no_cases: NoCases,
    /// `--seed`: the run seed to replay; a fresh one when `None`.
    pub seed: Option<u64>,
    /// `--repeat`.
    pub repeat: Repeat,
    /// `--timeout`: the whole run's limit.
    pub timeout: Option<Duration>,
    /// `--case-timeout`: one case's limit.
    pub case_timeout: Option<Duration>,
    /// The arguments as given, for the records.
    pub command_line: Vec<String>,
}

/// `--repeat`: how many passes over the selected cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repeat {
    Times(u32),
    /// Until a pass has a failure or an error (or the run is interrupted or times out).
    UntilFailure,
}

impl Default for Repeat {
    fn default() -> Self {
        Repeat::Times(1)
    }
}

impl Repeat {
    /// Parses `--repeat`: a count of at least 1, or `until-failure`.
    pub fn parse(text: &str) -> Result<Repeat, String> {
        match text.trim() {
            "until-failure" => Ok(Repeat::UntilFailure),
            n => match n.parse::<u32>() {
                Ok(0) | Err(_) => Err(format!("`{n}` is not a repeat count: write a number from 1, or until-failure")),
                Ok(n) => Ok(Repeat::Times(n)),
            },
        }
    }

    fn describe(self) -> String {
        match self {
            Repeat::Times(n) => n.to_string(),
            Repeat::UntilFailure => "until-failure".into(),
        }
    }

    fn more(self, done: u32, failed: bool) -> bool {
        match self {
            Repeat::Times(n) => done < n,
            Repeat::UntilFailure => !failed,
        }
    }
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
    /// Runs one case; `seed` makes its data ([`crate::exec::case_seed`]).
    fn run_case(&mut self, case: &ExpandedCase, seed: u64) -> CaseOutcome;

    /// The host fault of the run in one line (nvtest's own error, not the drive's), if
    /// the host under the target failed; asked once, after the last case.
    fn host_fault(&self) -> Option<String> {
        None
    }

    /// The claims the cases judge, judged whole at the end of the target's run.
    fn claims(&self) -> Option<Arc<crate::claims::Claims>> {
        None
    }
}

impl CaseRunner for Session {
    fn identity(&self) -> DeviceIdentity {
        Session::identity(self).clone()
    }

    fn run_case(&mut self, case: &ExpandedCase, seed: u64) -> CaseOutcome {
        Session::run_case(self, case, seed)
    }

    fn host_fault(&self) -> Option<String> {
        Session::host_fault(self)
    }

    fn claims(&self) -> Option<Arc<crate::claims::Claims>> {
        Session::claims(self)
    }
}

impl CaseRunner for Box<dyn CaseRunner> {
    fn identity(&self) -> DeviceIdentity {
        self.as_ref().identity()
    }

    fn run_case(&mut self, case: &ExpandedCase, seed: u64) -> CaseOutcome {
        self.as_mut().run_case(case, seed)
    }

    fn host_fault(&self) -> Option<String> {
        self.as_ref().host_fault()
    }

    fn claims(&self) -> Option<Arc<crate::claims::Claims>> {
        self.as_ref().claims()
    }
}

/// A runner whose drive passed the safety gate: before the first case of every further
/// suite the gate's check runs again ([`safety::Guard::recheck`]), and before every
/// destructive case the check for other users ([`safety::Guard::lasting_users`]); once either finds
/// the drive in use, no destructive case is sent any more (each is an error saying why).
/// A case that fails is followed by the same check ([`safety::Guard::users`]): when
/// another user of the drive appeared meanwhile, the failure cannot be laid on the drive
/// (that user may have changed the data) and the case is an error naming the user.
pub struct Rechecked<R> {
    inner: R,
    guard: Option<safety::SharedGuard>,
    suite: Option<String>,
    stopped: Option<String>,
    /// Held for the run: no other nvtest run takes the drive meanwhile.
    _lock: Option<safety::SharedLock>,
}

impl<R> Rechecked<R> {
    /// `guard`: what the gate holds (`None` when no destructive case runs).
    pub fn new(inner: R, guard: Option<safety::SharedGuard>) -> Self {
        Rechecked { inner, guard, suite: None, stopped: None, _lock: None }
    }

    /// Holds the drive's lock ([`safety::lock_controller`]) as long as the runner lives.
    pub fn holding(mut self, lock: safety::SharedLock) -> Self {
        self._lock = Some(lock);
        self
    }
}

impl<R: CaseRunner> CaseRunner for Rechecked<R> {
    fn identity(&self) -> DeviceIdentity {
        self.inner.identity()
    }

    fn run_case(&mut self, case: &ExpandedCase, seed: u64) -> CaseOutcome {
        if self.suite.as_deref() != Some(case.suite.as_str()) {
            // The first suite runs right after the gate's own check.
            let further = self.suite.replace(case.suite.clone()).is_some();
            if let (true, None, Some(guard)) = (further, &self.stopped, self.guard.as_ref()) {
                let checked = guard.lock().unwrap_or_else(|p| p.into_inner()).recheck();
                if let Err(lines) = checked {
                    self.stopped = Some(format!(
                        "the safety gate's check before suite `{}` found the drive in use: {}",
                        case.suite,
                        lines.join("; ")
                    ));
                }
            }
        }
        if let (true, None, Some(guard)) = (case.destructive, &self.stopped, self.guard.as_ref()) {
            // Every destructive case starts on a drive nobody else uses: a user that
            // appeared since the gate (or the suite's recheck) stops the destructive work.
            let users = guard.lock().unwrap_or_else(|p| p.into_inner()).lasting_users();
            if !users.is_empty() {
                self.stopped = Some(format!(
                    "before case `{}`, the drive gained another user since the safety gate's check: {}",
                    case.name,
                    users.join("; ")
                ));
            }
        }
        let mut outcome = match &self.stopped {
            Some(why) if case.destructive => return error_outcome(format!("destructive case not run: {why}")),
            _ => self.inner.run_case(case, seed),
        };
        if let (Verdict::Fail(failure), Some(guard)) = (&outcome.verdict, self.guard.as_ref()) {
            let users = guard.lock().unwrap_or_else(|p| p.into_inner()).users();
            if !users.is_empty() {
                let why = format!(
                    "the drive gained another user during the case, which may have changed what the case judged, \
                     so its failure is not laid on the drive: {}",
                    users.join("; ")
                );
                outcome.log.push(format!("the failure set aside: {failure}"));
                outcome.verdict = Verdict::Error(why.clone());
                self.stopped = Some(format!("after case `{}`, {why}", case.name));
            }
        }
        outcome
    }

    fn host_fault(&self) -> Option<String> {
        self.inner.host_fault()
    }

    fn claims(&self) -> Option<Arc<crate::claims::Claims>> {
        self.inner.claims()
    }
}

/// A runner on a drive of the Linux driver whose kernel log is read ([`crate::targets::kmsg`]):
/// the run's start is marked in /dev/kmsg; after each case the kernel's lines about the
/// controller since the case began go into the case's log (so into the reports) when
/// the case did not pass, and those flagged as a timeout, a reset or a removal always,
/// as blktests keeps dmesg.
pub struct KernelLogged<R> {
    inner: R,
    log: Option<crate::targets::kmsg::KernelLog>,
    /// Why the kernel log is not read, or where it is read from.
    note: String,
}

impl<R> KernelLogged<R> {
    /// Opens the kernel log at `kmsg` for `controller` and marks the run's start; a log
    /// that cannot be opened or marked (not root, a container) leaves a note instead.
    pub fn new(inner: R, kmsg: &std::path::Path, controller: &str, label: &str) -> Self {
        let opened = crate::targets::kmsg::KernelLog::open(kmsg, controller).and_then(|mut log| {
            let text = format!("run of {label} starts (pid {})", std::process::id());
            log.mark(&text).map(|seq| (log, seq))
        });
        match opened {
            Ok((log, seq)) => KernelLogged {
                inner,
                log: Some(log),
                note: format!("{} from record {seq} (the run's marker)", kmsg.display()),
            },
            Err(e) => KernelLogged { inner, log: None, note: format!("not recorded: {e}") },
        }
    }
}

impl<R: CaseRunner> CaseRunner for KernelLogged<R> {
    fn identity(&self) -> DeviceIdentity {
        let mut identity = self.inner.identity();
        identity.kernel_log = self.note.clone();
        identity
    }

    fn run_case(&mut self, case: &ExpandedCase, seed: u64) -> CaseOutcome {
        let cursor = self.log.as_mut().map(|l| l.cursor());
        let mut outcome = self.inner.run_case(case, seed);
        if let (Some(log), Some(cursor)) = (self.log.as_mut(), cursor) {
            let lines = log.since(cursor);
            let passed = matches!(outcome.verdict, Verdict::Pass | Verdict::Skipped(_));
            for line in lines.iter().filter(|l| !passed || l.flag.is_some()) {
                outcome.log.push(format!("kernel: {line}"));
            }
            let flagged: Vec<String> = lines.iter().filter_map(|l| l.flag.map(|f| f.to_string())).collect();
            if !flagged.is_empty() {
                outcome.log.push(format!("kernel reported during the case: {}", flagged.join(", ")));
            }
        }
        outcome
    }

    fn host_fault(&self) -> Option<String> {
        self.inner.host_fault()
    }

    fn claims(&self) -> Option<Arc<crate::claims::Claims>> {
        self.inner.claims()
    }
}

/// Why a run could not do its job (exit status 2), as one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunError {
    /// The target did not open.
    Target(String),
    /// A report could not be written.
    Report(String),
    /// The console stopped taking output (a closed pipe) during the run.
    Console(String),
    /// The safety gate refused destructive cases: what was found and what to do, one
    /// line each after the first.
    Refused(String),
    /// The filters selected no case (and `--no-cases fail`, the default).
    NoCases(String),
    /// The targets or options of the run contradict each other.
    Usage(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Target(e)
            | RunError::Report(e)
            | RunError::Console(e)
            | RunError::Refused(e)
            | RunError::NoCases(e)
            | RunError::Usage(e) => f.write_str(e),
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
    pub record: RunRecord,
    /// libtest-mimic's counts over every pass, as the console showed them.
    pub conclusion: Conclusion,
    /// The host under a target failed during the run ([`CaseRunner::host_fault`]): the
    /// run could not do its job (exit status 2). One line per target that had one.
    pub host_faults: Vec<String>,
}

impl RunSummary {
    /// Whether a case failed or errored (exit status 1).
    pub fn has_failed(&self) -> bool {
        self.record.targets.iter().flat_map(|t| &t.cases).any(|c| c.outcome.verdict.is_failure())
    }

    /// The results of the first (or only) target.
    pub fn results(&self) -> &RunResults {
        &self.record.targets[0]
    }
}

/// The trial name of a case: `SUITE::CASE`.
pub fn trial_name(case: &ExpandedCase) -> String {
    format!("{}::{}", case.suite, case.name)
}

/// The label of each target: as written on the command line (as reports name it).
fn labels(options: &RunOptions) -> Vec<String> {
    options.targets.iter().map(RunTarget::describe).collect()
}

/// Every (target, case) the run selects, case by case and target by target within a
/// case (so targets take turns and run in parallel).
fn selected<'a>(suites: &'a [LoadedSuite], options: &RunOptions) -> Vec<(usize, &'a ExpandedCase)> {
    partition(suites, options).0
}

/// Every (target, case) in that order: those the run selects, and the others.
type Pairs<'a> = Vec<(usize, &'a ExpandedCase)>;
fn partition<'a>(suites: &'a [LoadedSuite], options: &RunOptions) -> (Pairs<'a>, Pairs<'a>) {
    let labels = labels(options);
    let several = labels.len() > 1;
    let (mut selected, mut others) = (Vec::new(), Vec::new());
    for case in cases(suites) {
        for (t, label) in labels.iter().enumerate() {
            if options.selection.selects(case, several.then_some(label.as_str())) {
                selected.push((t, case));
            } else {
                others.push((t, case));
            }
        }
    }
    (selected, others)
}

/// The name a case has on the console: `SUITE::CASE`, `TARGET::SUITE::CASE` on a run
/// of several targets, with ` #N` for pass N of `--repeat`.
fn display_name(label: Option<&str>, case: &ExpandedCase, iteration: Option<u32>) -> String {
    let mut name = trial_name(case);
    if let Some(label) = label {
        name = format!("{label}::{name}");
    }
    if let Some(n) = iteration {
        name.push_str(&format!(" #{n}"));
    }
    name
}

/// libtest-mimic's arguments for our options (the cases are selected beforehand).
pub fn arguments(options: &RunOptions, targets: usize) -> Arguments {
    let threads = options.test_threads.unwrap_or(targets).clamp(1, targets.max(1));
    Arguments {
        test_threads: Some(threads),
        logfile: options.console_file.as_ref().map(|p| p.display().to_string()),
        quiet: options.quiet,
        color: options.color,
        format: options.format,
        ..Arguments::default()
    }
}

/// Lists the selected cases (libtest's `NAME: test` lines; with `--format json` one
/// JSON object per case). Opens nothing. A closed output (`nvtest --list | head`) ends
/// the list.
pub fn list(suites: &[LoadedSuite], options: &RunOptions) -> std::io::Result<()> {
    let mut out: Box<dyn Write> = match &options.console_file {
        Some(path) => Box::new(std::fs::File::create(path)?),
        None => Box::new(std::io::stdout().lock()),
    };
    let labels = labels(options);
    let several = labels.len() > 1;
    for (t, case) in selected(suites, options) {
        let label = several.then_some(labels[t].as_str());
        let name = display_name(label, case, None);
        if options.format == Some(libtest_mimic::FormatSetting::Json) {
            let requires: Vec<String> = case.requires.iter().map(|r| format!("{r:?}")).collect();
            let line = serde_json::json!({
                "name": name, "target": labels.get(t), "suite": case.suite, "case": case.name,
                "title": case.title, "rule": case.rule, "destructive": case.destructive,
                "advisory": case.advisory, "requires": requires,
            });
            writeln!(out, "{line}")?;
        } else {
            writeln!(out, "{name}: test")?;
        }
    }
    out.flush()
}

/// A run whose filters select no case: an error of its own unless `--no-cases` says
/// otherwise, found before anything is opened.
fn check_selection(suites: &[LoadedSuite], options: &RunOptions) -> Result<(), RunError> {
    if !selected(suites, options).is_empty() {
        return Ok(());
    }
    let all = cases(suites).count();
    let names: Vec<&str> = suites.iter().map(|s| s.suite.name.as_str()).collect();
    let sel = &options.selection;
    let exact = if sel.exact { "--exact " } else { "" };
    let names = names.join(", ");
    let why = match (all, sel.filters.is_empty(), sel.skip.is_empty()) {
        (0, _, _) => format!("the suites {names} hold no case"),
        (_, false, true) => {
            format!("--filter {exact}{} matches none of the {all} cases of {names}", quoted(&sel.filters))
        }
        (_, true, false) => format!("--skip {exact}{} leaves out all {all} cases of {names}", quoted(&sel.skip)),
        _ => format!("of the {all} cases of {names}, none is selected by {}", sel.describe()),
    };
    let message = format!("no case to run: {why} (`nvtest --list` shows them; `--no-cases pass` accepts an empty run)");
    match options.no_cases {
        NoCases::Fail => Err(RunError::NoCases(message)),
        NoCases::Warn => {
            tell!("warning: {message}");
            Ok(())
        }
        NoCases::Pass => Ok(()),
    }
}

/// The targets of a run, checked: at least one, none twice; a qemu-linux target runs
/// alone (it is a run of its own inside a guest).
fn check_targets(options: &RunOptions) -> Result<(), RunError> {
    let labels = labels(options);
    if labels.is_empty() {
        return Err(RunError::Usage("no target to run on".into()));
    }
    for (i, label) in labels.iter().enumerate() {
        if labels[..i].contains(label) {
            return Err(RunError::Usage(format!(
                "target `{label}` is given twice: each device is named once (cases on one device never run concurrently)"
            )));
        }
    }
    Ok(())
}

/// Reads the expected findings; with several targets every file must say which it
/// describes (`applies_to`).
fn load_findings(options: &RunOptions) -> Result<Vec<ExpectedFinding>, RunError> {
    let mut all = Vec::new();
    for path in &options.expect {
        let findings = crate::targets::expected::load_expected(path).map_err(RunError::Target)?;
        if options.targets.len() > 1 && findings.iter().any(|f| f.file_scope.is_empty()) {
            return Err(RunError::Usage(format!(
                "{}: a run of several targets needs to know which of them the findings describe: add \
                 `applies_to: [qemu]` (a kind, or targets as written)",
                path.display()
            )));
        }
        all.extend(findings);
    }
    Ok(all)
}

/// Opens the targets and runs the suites on them.
pub fn run(suites: &[LoadedSuite], options: &RunOptions) -> Result<RunSummary, RunError> {
    run_on(&Host::real(), suites, options)
}

/// [`run`] with the kernel's views (sysfs, /dev, /proc) of `host`.
///
/// On a kernel target the safety gate runs first, before anything is sent: the path must
/// be a controller, no other nvtest run may hold it, and destructive cases need the
/// opt-ins and a drive nothing uses, held exclusively until the run ends. Once the
/// device is open, a confirmed serial must also be Identify Controller's SN.
pub fn run_on(host: &Host, suites: &[LoadedSuite], options: &RunOptions) -> Result<RunSummary, RunError> {
    check_targets(options)?;
    if options.list {
        let none: Vec<(String, Opener)> = Vec::new();
        return run_targets(suites, options, none);
    }
    check_selection(suites, options)?;
    // The findings and the report paths are checked before any device is opened: a bad
    // file or an unwritable path sends nothing.
    let findings = load_findings(options)?;
    let given_claims = match &options.claims {
        Some(path) => {
            Some(std::sync::Arc::new(crate::claims::load_claims(path).map_err(|e| RunError::Target(e.to_string()))?))
        }
        None => None,
    };
    check_reports(options)?;
    let rig = load_rig(options)?;
    let firmware = match &options.firmware {
        Some(path) => {
            Some(std::sync::Arc::new(crate::steps::firmware::VendorImage::load(path).map_err(RunError::Usage)?))
        }
        None => None,
    };
    let labels = labels(options);
    let several = labels.len() > 1;
    let mut openers: Vec<(String, Opener)> = Vec::new();
    for (target, label) in options.targets.iter().zip(&labels) {
        let select = |c: &ExpandedCase| options.selection.selects(c, several.then_some(label.as_str()));
        let destructive = safety::destructive_cases(suites, &select, options.safety.preserve).len();
        let confirm = options.safety.clone();
        let findings = findings.clone();
        let claims = match (&given_claims, target) {
            (Some(c), _) => Some(c.clone()),
            (None, RunTarget::Spec(spec)) => {
                crate::targets::profile_claims(spec).map_err(RunError::Target)?.map(std::sync::Arc::new)
            }
            (None, RunTarget::Kernel(_)) => None,
        };
        let case_timeout = options.case_timeout;
        let journal = options.journal.clone().map(|dir| crate::power::JournalSetup { dir, target: absolute(target) });
        let firmware = firmware.clone();
        let checked = move |mut session: Session| -> Result<Session, String> {
            safety::confirm_identity(session.identity(), &confirm, destructive)?;
            session.expect_findings(findings);
            session.set_case_timeout(case_timeout);
            session.set_claims(claims.clone());
            session.set_journal(journal.clone());
            session.set_firmware(firmware.clone());
            Ok(session)
        };
        let opener: Opener = match target {
            RunTarget::Spec(TargetSpec::QemuLinux(_)) => {
                return Err(RunError::Usage(format!(
                    "`{label}` runs nvtest inside a Linux guest, a run of its own: give it as the only target"
                )))
            }
            RunTarget::Spec(spec) => {
                let spec = spec.clone();
                Box::new(move || Ok(Box::new(checked(Session::open(&spec)?)?) as Box<dyn CaseRunner>))
            }
            RunTarget::Kernel(path) => {
                let cases = safety::destructive_cases(suites, &select, options.safety.preserve);
                // Held until the run ends, and checked again between suites.
                let guard = safety::gate(host, path, &cases, &options.safety)?
                    .map(|g| std::sync::Arc::new(std::sync::Mutex::new(g)));
                let (host, path, rig) = (host.clone(), path.clone(), rig.clone());
                Box::new(move || {
                    let lock = safety::SharedLock::default();
                    let device = safety::open_linux_target(&host, &path, rig.as_ref(), guard.as_ref(), &lock)?;
                    // Before anything is sent: a drive another nvtest run holds is refused.
                    *lock.lock().unwrap_or_else(|p| p.into_inner()) = Some(safety::lock_controller(&path)?);
                    let mut session = checked(Session::with_device(path.display().to_string(), device)?)?;
                    session.add_host_details(safety::pci_details(&host, &path));
                    let runner = Rechecked::new(session, guard).holding(lock);
                    let controller = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    let label = path.display().to_string();
                    let runner = KernelLogged::new(runner, &host.node_path("kmsg"), &controller, &label);
                    Ok(Box::new(runner) as Box<dyn CaseRunner>)
                })
            }
        };
        openers.push((label.clone(), opener));
    }
    run_targets(suites, options, openers)
}

/// The rig file, read and checked before anything is opened; only drives of the Linux
/// driver take one.
fn load_rig(options: &RunOptions) -> Result<Option<nvme::linux::rig::Rig>, RunError> {
    let Some(path) = &options.rig else { return Ok(None) };
    if let Some(RunTarget::Spec(spec)) = options.targets.iter().find(|t| matches!(t, RunTarget::Spec(_))) {
        return Err(RunError::Usage(format!(
            "--rig switches the power of a drive of the Linux driver (/dev/nvmeN); `{}` has a power switch of its \
             own",
            spec.describe()
        )));
    }
    crate::rig::load_rig(path).map(Some).map_err(|e| RunError::Target(e.to_string()))
}

/// The report paths can be written: checked before anything is opened.
fn check_reports(options: &RunOptions) -> Result<(), RunError> {
    use crate::report::output::{check_report_paths, ReportPathError};
    check_report_paths(options.junit.as_deref(), options.json.as_deref()).map_err(|e| match e {
        ReportPathError::SameFile(line) => RunError::Usage(line),
        ReportPathError::Unwritable(line) => RunError::Report(line),
    })
}

/// Runs the suites on the one device `open` gives (nvtest's own tests use it).
pub fn run_with<R, F>(suites: &[LoadedSuite], options: &RunOptions, open: F) -> Result<RunSummary, RunError>
where
    R: CaseRunner + 'static,
    F: FnOnce() -> Result<R, String> + Send + 'static,
{
    let label = options.targets.first().map(RunTarget::describe).unwrap_or_else(|| "sim".into());
    let opener: Opener = Box::new(move || open().map(|r| Box::new(r) as Box<dyn CaseRunner>));
    if !options.list {
        check_reports(options)?;
    }
    run_targets(suites, options, vec![(label, opener)])
}

/// Runs the suites on every target, each in a device thread of its own, in parallel.
pub fn run_targets(
    suites: &[LoadedSuite],
    options: &RunOptions,
    targets: Vec<(String, Opener)>,
) -> Result<RunSummary, RunError> {
    let seed = options.seed.unwrap_or_else(crate::exec::fresh_run_seed);
    let mut meta = RunMeta::now(options.command_line.clone(), seed, options.repeat.describe());
    meta.suites = suites.iter().map(|s| InputFile::of(&s.path)).collect();
    meta.expect = options.expect.iter().map(|p| InputFile::of(p)).collect();
    meta.claims = options.claims.as_deref().map(InputFile::of);
    let suite_infos: Vec<SuiteInfo> = suites.iter().map(|s| s.suite.clone()).collect();
    if options.list {
        match list(suites, options) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(RunError::Console(format!("cannot write the list: {e}")))
            }
            _ => {}
        }
        let record = RunRecord { meta, targets: Vec::new(), interrupted: None };
        return Ok(RunSummary { record, conclusion: empty_conclusion(), host_faults: Vec::new() });
    }
    let live = Arc::new(Live::new(meta, suite_infos, targets.len(), options.junit.clone(), options.json.clone()));
    let labels: Vec<String> = targets.iter().map(|(l, _)| l.clone()).collect();
    let several = labels.len() > 1;
    if several {
        tell!("nvtest: opening {} targets: {}", labels.len(), labels.join(", "));
    }
    let opening: Vec<Result<device::Opening, String>> =
        targets.into_iter().enumerate().map(|(i, (_, open))| device::Opening::start(i, open, live.clone())).collect();
    let mut devices = Vec::new();
    let mut errors = Vec::new();
    for (label, opening) in labels.iter().zip(opening) {
        match opening.and_then(device::Opening::ready) {
            Ok(device) => devices.push(device),
            Err(e) => errors.push(if several { format!("{label}: {e}") } else { e }),
        }
    }
    if !errors.is_empty() {
        for device in devices {
            device.stop();
        }
        return Err(RunError::Target(errors.join("\n")));
    }
    for (i, device) in devices.iter().enumerate() {
        let mut identity = device.identity.clone();
        if options.default_target {
            identity.target = format!("{} (nvtest's built-in simulated drive: no TARGET was given)", identity.target);
        }
        print_identity(&identity);
        if let Some(warning) = device.claims.as_ref().and_then(|c| c.model_mismatch(&identity.model)) {
            say!("  warning   {warning} (every claim is still judged)");
        }
        live.set_identity(i, identity);
        live.set_claims(i, device.claims.clone());
    }
    say!("  seed      {seed} (replay with --seed {seed})");
    crate::run::live::enter(live.clone()).map_err(RunError::Usage)?;
    let timeout = options.timeout.map(live::watch_timeout);

    let (pairs, not_selected) = partition(suites, options);
    let mut args = arguments(options, devices.len());
    args.skip = vec![NOT_SELECTED.to_string()];
    let repeated = options.repeat != Repeat::Times(1);
    let mut sequence = vec![0usize; devices.len()];
    let mut order = 0usize;
    let mut conclusion = empty_conclusion();
    let mut iteration = 0u32;
    let mut console_closed = None;
    loop {
        iteration += 1;
        let mut trials = Vec::with_capacity(pairs.len());
        for &(t, case) in &pairs {
            let skip = options.safety.preserve && case.destructive;
            let seq = if skip {
                None
            } else {
                sequence[t] += 1;
                Some(sequence[t] - 1)
            };
            let name = display_name(several.then_some(labels[t].as_str()), case, repeated.then_some(iteration));
            let job = TrialJob {
                target: t,
                seq,
                order,
                case: case.clone(),
                iteration,
                seed: crate::exec::case_seed(seed, &case.suite, &case.name, iteration),
                jobs: devices[t].jobs.clone(),
                live: live.clone(),
            };
            order += 1;
            trials.push(Trial::ignorable_test(name, move || job.run()));
        }
        // The cases not selected, for libtest-mimic's "N filtered out" only: its skip
        // filter drops them by their marker, they never run.
        for (t, case) in &not_selected {
            let name = display_name(several.then_some(labels[*t].as_str()), case, None);
            trials.push(Trial::test(format!("{NOT_SELECTED}{name}"), || Ok(())));
        }
        if repeated {
            say!("pass {iteration} of {}", options.repeat.describe());
        }
        let pass = catch_unwind(AssertUnwindSafe(|| libtest_mimic::run(&args, trials)));
        match pass {
            Ok(c) => {
                conclusion.num_passed += c.num_passed;
                conclusion.num_failed += c.num_failed;
                conclusion.num_ignored += c.num_ignored;
                conclusion.num_filtered_out = c.num_filtered_out;
                if !options.repeat.more(iteration, c.num_failed > 0) {
                    break;
                }
            }
            Err(panic) => {
                // libtest-mimic panics when stdout closes (`nvtest | head`): the run
                // stops there, but the cases that ran are still reported.
                console_closed = Some(panic_text(panic.as_ref()));
                break;
            }
        }
    }
    let host_faults: Vec<String> = devices
        .into_iter()
        .zip(&labels)
        .filter_map(|(d, label)| d.stop().map(|f| if several { format!("{label}: {f}") } else { f }))
        .collect();
    drop(timeout);
    crate::run::live::leave();
    let record = live.record(None);
    if let Some(cause) = console_closed {
        live.write_reports(&record).into_iter().next().map_or(Ok(()), |e| Err(RunError::Report(e)))?;
        return Err(RunError::Console(format!("the console stopped taking output, run cut short: {cause}")));
    }
    if options.show_output {
        print_logs(&record);
    }
    for results in &record.targets {
        let label = several.then_some(results.identity.target.as_str());
        print_expected_failures(results, label);
        print_warnings(results, label);
        print_claims(results, label);
    }
    if let Some(e) = live.write_reports(&record).into_iter().next() {
        return Err(RunError::Report(e));
    }
    print_figures(&record);
    print_report_lines(&record, options);
    for fault in &host_faults {
        say!("error: {fault}");
    }
    let c = record.counts();
    if c.total() > 0 && c.skipped == c.total() {
        say!(
            "every one of the {} cases was skipped: nothing on the drive was checked (each skip above says what was \
             missing)",
            c.total()
        );
    }
    Ok(RunSummary { record, conclusion, host_faults })
}

/// What the run's workloads measured, case by case, as fio prints its summary.
fn print_figures(record: &RunRecord) {
    let several = record.targets.len() > 1;
    for t in &record.targets {
        for r in t.cases.iter().filter(|r| !r.outcome.figures.is_empty()) {
            let target = if several { format!("{}::", t.identity.target) } else { String::new() };
            say!("\nfigures of {target}{}::{}:", r.suite, r.name(record.repeated()));
            for line in r.outcome.figures.iter().flat_map(|j| j.summary()) {
                say!("  {line}");
            }
        }
    }
}

/// The target's claims judged whole: one line per promise (met, breached, not
/// measured), after the model warning if the claims are of another drive.
fn print_claims(results: &RunResults, label: Option<&str>) {
    let Some(summary) = &results.claims else { return };
    let on = label.map(|l| format!("{l}: ")).unwrap_or_default();
    let mut lines = summary.lines().into_iter();
    if let Some(heading) = lines.next() {
        say!("\n{on}{heading}");
    }
    for line in lines {
        say!("{line}");
    }
}

/// Where the reports went, and each target's counts on a run of several.
fn print_report_lines(record: &RunRecord, options: &RunOptions) {
    if record.targets.len() > 1 {
        for t in &record.targets {
            say!("{}: {}", t.identity.target, t.counts().line());
        }
    }
    let counts = record.counts().line();
    match &options.junit {
        Some(path) => say!("JUnit report: {} ({counts})", path.display()),
        None => say!("JUnit report: not written (give --junit PATH)"),
    }
    if let Some(path) = &options.json {
        say!("JSON record: {} ({counts})", path.display());
    }
}

/// One trial's work: hand the case to its device (or skip it under `--preserve`) and
/// tell libtest-mimic how it ended.
struct TrialJob {
    target: usize,
    /// Its place among its device's cases; `None`: never handed to the device.
    seq: Option<usize>,
    order: usize,
    case: ExpandedCase,
    iteration: u32,
    seed: u64,
    jobs: mpsc::Sender<device::Job>,
    live: Arc<Live>,
}

impl TrialJob {
    fn run(self) -> Result<Completion, Failed> {
        let Some(seq) = self.seq else {
            let outcome = CaseOutcome {
                figures: Vec::new(),
                claims: Vec::new(),
                verdict: Verdict::Skipped(PRESERVED.into()),
                log: Vec::new(),
                duration: Duration::ZERO,
            };
            let mut record = CaseResult::new(self.case.suite.clone(), self.case.name.clone(), outcome.clone());
            record.rule = self.case.rule.clone();
            record.iteration = self.iteration;
            self.live.end(self.target, self.order, record);
            return completion(&outcome);
        };
        let (reply, outcome_rx) = mpsc::channel();
        let job =
            device::Job { seq, order: self.order, case: self.case, iteration: self.iteration, seed: self.seed, reply };
        let outcome = match self.jobs.send(job) {
            Ok(()) => outcome_rx.recv().unwrap_or_else(|_| error_outcome("the device thread stopped".into())),
            Err(_) => error_outcome("the device thread stopped".into()),
        };
        completion(&outcome)
    }
}

/// The name prefix of the trials of cases a run does not select (never shown).
const NOT_SELECTED: &str = "\u{1}nvtest-not-selected\u{1}";

/// The skip reason of a destructive case under `--preserve`.
pub const PRESERVED: &str = "destructive case, not run: --preserve keeps the drive's data and configuration";

fn cases(suites: &[LoadedSuite]) -> impl Iterator<Item = &ExpandedCase> {
    suites.iter().flat_map(|s| s.cases.iter())
}

fn empty_conclusion() -> Conclusion {
    Conclusion { num_filtered_out: 0, num_passed: 0, num_failed: 0, num_ignored: 0, num_measured: 0 }
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

fn print_identity(identity: &DeviceIdentity) {
    say!("nvtest {} — target {}", env!("CARGO_PKG_VERSION"), identity.target);
    say!("  model     {}", identity.model);
    say!("  serial    {}", identity.serial);
    say!("  firmware  {}", identity.firmware);
    say!("  NVMe      {}", identity.version);
    let mdts = identity.mdts_bytes.map_or("no limit".to_string(), |b| format!("{b} bytes"));
    say!(
        "  PCI VID {:04x} SSVID {:04x} · CNTLID {} · NN {} · MDTS {mdts} · OACS {:#06x} · ONCS {:#06x} · TNVMCAP {}",
        identity.vid,
        identity.ssvid,
        identity.cntlid,
        identity.nn,
        identity.oacs,
        identity.oncs,
        identity.tnvmcap
    );
    if !identity.pci.is_empty() {
        let pci: Vec<String> = identity.pci.iter().map(|(k, v)| format!("{k} {v}")).collect();
        say!("  PCI       {}", pci.join(" · "));
    }
    if !identity.kernel_log.is_empty() {
        say!("  kernel log {}", identity.kernel_log);
    }
}

/// `--show-output`: every passing case's command log (failures show theirs already).
fn print_logs(record: &RunRecord) {
    let several = record.targets.len() > 1;
    let repeated = record.repeated();
    for results in &record.targets {
        for case in results.cases.iter().filter(|c| !c.outcome.verdict.is_failure()) {
            let label = if several { format!("{}::", results.identity.target) } else { String::new() };
            say!("---- {label}{}::{} log ----", case.suite, case.name(repeated));
            for line in &case.outcome.log {
                say!("{line}");
            }
        }
    }
    say!();
}

/// Violations of rules the specification may not require (advisory cases): shown in
/// full, counted as passed.
fn print_warnings(results: &RunResults, label: Option<&str>) {
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
    let on = label.map(|l| format!(" on {l}")).unwrap_or_default();
    say!("warnings{on} (counted as ok: advisory cases the specification may not require, or verdicts that prove less than asked):");
    for (case, failure) in warnings {
        say!("    {}::{}", case.suite, case.case);
        for line in failure.to_string().lines() {
            say!("      {line}");
        }
    }
    say!();
}

fn print_expected_failures(results: &RunResults, label: Option<&str>) {
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
    let on = label.map(|l| format!(" on {l}")).unwrap_or_default();
    say!("expected failures{on} (deviations this target is known for; counted as ok):");
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
                ..Default::default()
            }
        }

        fn run_case(&mut self, case: &ExpandedCase, _seed: u64) -> CaseOutcome {
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
            CaseOutcome {
                figures: Vec::new(),
                claims: Vec::new(),
                verdict,
                log: vec![format!("ran {}", case.name)],
                duration: Duration::ZERO,
            }
        }
    }

    fn suite(names: &[&str]) -> LoadedSuite {
        LoadedSuite {
            path: "s.yaml".into(),
            suite: SuiteInfo { name: "s".into(), title: "t".into(), spec: vec![], destructive: false },
            cases: names.iter().map(|n| ExpandedCase::named("s", n)).collect(),
        }
    }

    /// Options for a run whose console lines go to a file in `dir`.
    fn options(filter: Option<&str>, dir: &tempfile::TempDir) -> RunOptions {
        RunOptions {
            targets: vec![RunTarget::Spec(TargetSpec::parse("sim").unwrap())],
            selection: Selection { filters: filter.map(str::to_string).into_iter().collect(), ..Selection::default() },
            console_file: Some(dir.path().join("console.txt")),
            ..RunOptions::default()
        }
    }

    #[test]
    fn every_verdict_is_recorded_and_counted_as_the_console_counts_it() {
        let suites = [suite(&["pass", "fail", "skip", "error", "known", "panics"])];
        let dir = tempfile::tempdir().unwrap();
        let summary = run_with(&suites, &options(None, &dir), || Ok(Scripted { seen: vec![] })).unwrap();
        let c = summary.conclusion.clone();
        assert_eq!((c.num_passed, c.num_failed, c.num_ignored), (2, 3, 1));
        let counts = summary.results().counts();
        assert_eq!(counts.passed + counts.expected_failures, c.num_passed as usize);
        assert_eq!(counts.failed + counts.errors, c.num_failed as usize);
        assert_eq!(counts.skipped, c.num_ignored as usize);
        let names: Vec<&str> = summary.results().cases.iter().map(|r| r.case.as_str()).collect();
        assert_eq!(names, ["pass", "fail", "skip", "error", "known", "panics"]);
        let Verdict::Error(e) = &summary.results().cases[5].outcome.verdict else {
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

        fn run_case(&mut self, case: &ExpandedCase, _seed: u64) -> CaseOutcome {
            self.0.run_case(case, 0)
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
        assert_eq!(summary.host_faults.first().map(String::as_str), Some("the disk is full (after 2 cases)"));
        let summary = run_with(&suites, &options(None, &dir), || Ok(Scripted { seen: vec![] })).unwrap();
        assert!(summary.host_faults.is_empty());
    }

    #[test]
    fn the_filter_keeps_matching_cases_only() {
        let suites = [suite(&["pass", "fail"])];
        let dir = tempfile::tempdir().unwrap();
        let summary = run_with(&suites, &options(Some("s::pass"), &dir), || Ok(Scripted { seen: vec![] })).unwrap();
        assert_eq!(summary.results().cases.len(), 1);
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
        assert!(matches!(&error, RunError::Report(e) if e.starts_with("cannot write the JUnit report ")), "{error:?}");
    }

    #[test]
    fn listing_opens_nothing() {
        let suites = [suite(&["pass"])];
        let dir = tempfile::tempdir().unwrap();
        let mut listing = options(None, &dir);
        listing.list = true;
        let summary =
            run_with::<Scripted, _>(&suites, &listing, || panic!("listing must not open the device")).unwrap();
        assert!(summary.record.targets.is_empty());
    }

    /// A drive of the Linux driver whose kernel writes into a fake /dev/kmsg as cases run.
    struct KernelSays {
        kmsg: std::path::PathBuf,
        seq: u64,
    }

    impl CaseRunner for KernelSays {
        fn identity(&self) -> DeviceIdentity {
            DeviceIdentity { target: "/dev/nvme0".into(), ..Default::default() }
        }

        fn run_case(&mut self, case: &ExpandedCase, _seed: u64) -> CaseOutcome {
            let lines: &[&str] = match case.name.as_str() {
                "fail" => &[
                    "3,{},5,-;nvme nvme0: I/O Cmd(0x2) @ LBA 8, 8 blocks, I/O Error",
                    "6,{},6,-;nvme nvme1: other drive",
                ],
                "timeout" => {
                    &["4,{},7,-;nvme nvme0: I/O tag 12 QID 1 timeout, aborting", "6,{},8,-;nvme nvme0: quiet line"]
                }
                _ => &["6,{},9,-;nvme nvme0: a line of a passing case"],
            };
            let mut text = String::new();
            for line in lines {
                self.seq += 1;
                text.push_str(&line.replace("{}", &self.seq.to_string()));
                text.push('\n');
            }
            use std::io::Write as _;
            std::fs::OpenOptions::new().append(true).open(&self.kmsg).unwrap().write_all(text.as_bytes()).unwrap();
            let verdict = if case.name == "fail" { Verdict::Error("I/O error".into()) } else { Verdict::Pass };
            CaseOutcome { figures: Vec::new(), claims: Vec::new(), verdict, log: vec![], duration: Duration::ZERO }
        }
    }

    #[test]
    fn the_kernels_lines_about_the_controller_go_with_a_failing_case_and_flags_always() {
        let dir = tempfile::tempdir().unwrap();
        let kmsg = dir.path().join("kmsg");
        std::fs::write(&kmsg, "6,1,1,-;Linux version 6.1\n").unwrap();
        let mut runner = KernelLogged::new(KernelSays { kmsg: kmsg.clone(), seq: 10 }, &kmsg, "nvme0", "/dev/nvme0");
        assert!(runner.identity().kernel_log.contains("(the run's marker)"), "{}", runner.identity().kernel_log);
        let suites = suite(&["fail", "timeout", "pass"]);
        let fail = runner.run_case(&suites.cases[0], 0);
        assert_eq!(
            fail.log,
            [
                "kernel: [    0.000005] nvme nvme0: I/O Cmd(0x2) @ LBA 8, 8 blocks, I/O Error (error)",
                "kernel reported during the case: error"
            ]
        );
        let timeout = runner.run_case(&suites.cases[1], 0);
        assert_eq!(timeout.verdict, Verdict::Pass);
        assert_eq!(timeout.log.len(), 2, "only the flagged line of a passing case: {:?}", timeout.log);
        assert!(timeout.log[0].contains("timeout, aborting (timeout)"), "{:?}", timeout.log);
        assert!(runner.run_case(&suites.cases[2], 0).log.is_empty());
        let unreadable =
            KernelLogged::new(KernelSays { kmsg: kmsg.clone(), seq: 0 }, &dir.path().join("none"), "nvme0", "x");
        assert!(unreadable.identity().kernel_log.starts_with("not recorded: "));
    }

    #[test]
    fn failures_show_the_rule_and_the_log() {
        let outcome = CaseOutcome {
            figures: Vec::new(),
            claims: Vec::new(),
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
