//! A session with one device: opens the target, learns its identity, and runs cases
//! one at a time, turning each case's steps into a [`CaseOutcome`].

use std::time::Instant;

use nvme::device::{Device, HostFault};

use crate::steps::{self, CaseContext, Facts, StepError};
use crate::suite::ExpandedCase;
use crate::targets::expected::{ExpectedFinding, ExpectedVerdict};
use crate::targets::TargetSpec;
use crate::verdict::{CaseOutcome, Failure, Rule, Verdict};

use crate::identity::DeviceIdentity;

/// What a case measured: its workloads' figures, and its claim judgements.
type Measured = (Vec<crate::load::JobFigures>, Vec<crate::claims::ClaimJudgement>);

/// A fault of the host under the target, and the case it first showed in.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FaultSeen {
    message: String,
    /// `SUITE::CASE`.
    case: String,
}

/// One open device and everything nvtest remembers about it across cases.
pub struct Session {
    /// How to open the device again if it goes away (QEMU died); `None` for devices
    /// opened elsewhere.
    spec: Option<TargetSpec>,
    device: Box<dyn Device>,
    facts: Facts,
    identity: DeviceIdentity,
    cases_run: u64,
    /// Known deviations of this target (`--expect`), keyed by `suite::case`.
    expected: Vec<ExpectedFinding>,
    /// The first host fault of the run.
    first_fault: Option<FaultSeen>,
    /// The first host fault that ends the run ([`HostFault::ends_run`]): later cases
    /// are not sent.
    stop: Option<FaultSeen>,
    /// Cases not run because of `stop`.
    not_run: usize,
    /// `--case-timeout`: a case still sending commands past it is stopped as an error.
    case_timeout: Option<std::time::Duration>,
    /// What the drive's datasheet promises (`--claims`, or the simulated profile's).
    claims: Option<std::sync::Arc<crate::claims::Claims>>,
    /// Where power-fail campaigns journal (`--journal`).
    journal: Option<crate::power::JournalSetup>,
    /// The vendor's firmware image (`--firmware`).
    firmware: Option<std::sync::Arc<crate::steps::firmware::VendorImage>>,
}

impl Session {
    /// Opens the target and reads its identity. Errors are one line, for the console.
    pub fn open(target: &TargetSpec) -> Result<Session, String> {
        let device = crate::targets::open(target)?;
        let mut session = Session::with_device(target.describe(), device)?;
        session.spec = Some(target.clone());
        Ok(session)
    }

    /// A session on a device opened elsewhere (tests build their own simulated drives).
    pub fn with_device(target: String, mut device: Box<dyn Device>) -> Result<Session, String> {
        let facts = Facts::read(device.as_mut()).map_err(|e| format!("{target}: {e}"))?;
        let identity = DeviceIdentity::from_facts(target, &facts);
        Ok(Session {
            spec: None,
            device,
            facts,
            identity,
            cases_run: 0,
            expected: Vec::new(),
            first_fault: None,
            stop: None,
            not_run: 0,
            case_timeout: None,
            claims: None,
            journal: None,
            firmware: None,
        })
    }

    pub fn identity(&self) -> &DeviceIdentity {
        &self.identity
    }

    /// What the host says of the device beyond the controller (PCI IDs from sysfs).
    pub fn add_host_details(&mut self, details: Vec<(String, String)>) {
        self.identity.pci.extend(details);
    }

    /// `--case-timeout`: a case still running past `limit` stops before its next command,
    /// as an error saying so; the device is recovered for the next case.
    pub fn set_case_timeout(&mut self, limit: Option<std::time::Duration>) {
        self.case_timeout = limit;
    }

    /// Runs `f` with a case context on the session's device, outside any case: what
    /// `nvtest resume` judges a journalled cycle with.
    pub fn with_context<R>(&mut self, seed: u64, f: impl FnOnce(&mut CaseContext<'_>) -> R) -> R {
        let rule =
            parse_rule("NVMe 1.4 §6.4 Atomic Operations, §6.8 Flush, §6.15 Write (FUA): what a power loss leaves");
        let mut ctx = CaseContext::new(self.device.as_mut(), &self.facts, rule, seed);
        ctx.claims = self.claims.clone();
        f(&mut ctx)
    }

    /// The vendor's firmware image the firmware cases download; `None`: nvtest's test image.
    pub fn set_firmware(&mut self, image: Option<std::sync::Arc<crate::steps::firmware::VendorImage>>) {
        self.firmware = image;
    }

    /// Where power-fail campaigns keep their journals; `None`: in memory only.
    pub fn set_journal(&mut self, journal: Option<crate::power::JournalSetup>) {
        self.journal = journal;
    }

    /// The claims cases judge (`None`: figures are reported, not judged).
    pub fn claims(&self) -> Option<std::sync::Arc<crate::claims::Claims>> {
        self.claims.clone()
    }

    /// The claims cases about a claim judge; `None`: figures are reported, not judged.
    pub fn set_claims(&mut self, claims: Option<std::sync::Arc<crate::claims::Claims>>) {
        self.claims = claims;
    }

    pub fn facts(&self) -> &Facts {
        &self.facts
    }

    /// Known deviations of this target (`--expect FILE`): a listed case that fails as
    /// listed is an expected failure; one that passes is an unexpected pass (a failure of
    /// the run, so the list stays honest). Findings for other targets are ignored.
    pub fn expect_findings(&mut self, findings: Vec<ExpectedFinding>) {
        self.expected = findings.into_iter().filter(|f| f.applies_to(&self.identity.target)).collect();
    }

    fn apply_expected(&self, case: &ExpandedCase, verdict: Verdict) -> Verdict {
        let key = format!("{}::{}", case.suite, case.name);
        let Some(finding) = self.expected.iter().find(|f| f.case == key) else {
            return verdict;
        };
        let reason = finding.reason.clone();
        match (verdict, finding.verdict) {
            (Verdict::Fail(failure), ExpectedVerdict::Fail) => Verdict::ExpectedFailure { failure, reason },
            (Verdict::Error(message), ExpectedVerdict::Error) => Verdict::ExpectedFailure {
                failure: Failure {
                    rule: parse_rule(&finding.rule),
                    sent: String::new(),
                    observed: message,
                    expected: "an answer from the controller".into(),
                },
                reason,
            },
            (Verdict::Pass, _) => Verdict::UnexpectedPass { reason },
            (other, _) => other,
        }
    }

    /// Runs one expanded case: requirements, then its steps; never panics on device
    /// answers. A host fault during the case makes it an error whatever the steps
    /// concluded (expected findings and advisory warnings do not apply to it); after a
    /// fault that ends the run, cases are not sent at all.
    ///
    /// `seed` makes the case's data ([`case_seed`]); a run replays exactly with the same.
    pub fn run_case(&mut self, case: &ExpandedCase, seed: u64) -> CaseOutcome {
        let start = Instant::now();
        let outcome =
            |verdict, log, (figures, claims)| CaseOutcome { figures, claims, verdict, log, duration: start.elapsed() };
        if let Some(stop) = &self.stop {
            self.not_run += 1;
            let verdict = Verdict::Error(format!("not run: {} (first seen in case {})", stop.message, stop.case));
            return outcome(verdict, Vec::new(), Default::default());
        }
        if let Some(reason) = case.requires.iter().find_map(|r| self.facts.missing(r)) {
            return outcome(Verdict::Skipped(reason), Vec::new(), Default::default());
        }
        let (verdict, mut log, controller_lost, measured) = self.run_steps(case, seed);
        let faults = self.device.host_faults();
        let host_failed = !faults.is_empty();
        let verdict = if host_failed { self.host_fault_verdict(case, verdict, &faults, &mut log) } else { verdict };
        if !matches!(verdict, Verdict::Pass | Verdict::Skipped(_)) {
            log.extend(self.device.take_diagnostics().into_iter().map(|line| format!("target: {line}")));
        } else {
            self.device.take_diagnostics();
        }
        // The case may have left the controller mid-command: start the next one clean
        // (unless no next case will be sent).
        if (controller_lost || matches!(verdict, Verdict::Error(_))) && self.stop.is_none() {
            self.recover(&mut log);
        }
        let verdict = match verdict {
            verdict if host_failed => verdict,
            Verdict::Fail(failure) if case.advisory => Verdict::Warning(failure),
            other => self.apply_expected(case, other),
        };
        // A host fault sets aside what the steps concluded: their claim judgements too.
        let measured = if host_failed { (measured.0, Vec::new()) } else { measured };
        outcome(verdict, log, measured)
    }

    /// The case's steps, up to the first that does not succeed: the steps' verdict, the
    /// case's log, whether the controller stopped answering during it, the figures its
    /// workloads measured and what it concluded about the claims it judged.
    fn run_steps(&mut self, case: &ExpandedCase, seed: u64) -> (Verdict, Vec<String>, bool, Measured) {
        self.cases_run += 1;
        let mut ctx = CaseContext::new(self.device.as_mut(), &self.facts, parse_rule(&case.rule), seed);
        ctx.blocks_needed = Some(steps::extent::blocks_needed(&case.steps));
        ctx.deadline = self.case_timeout.map(|limit| (Instant::now() + limit, limit));
        ctx.claims = self.claims.clone();
        ctx.journal = self.journal.clone();
        ctx.firmware = self.firmware.clone();
        ctx.case_name = format!("{}::{}", case.suite, case.name);
        let mut verdict = Verdict::Pass;
        for (n, step) in case.steps.iter().enumerate() {
            if let Err(e) = steps::run_step(&mut ctx, step) {
                verdict = match e {
                    StepError::Fail(f) => Verdict::Fail(f),
                    StepError::Warning(f) => Verdict::Warning(f),
                    StepError::Skip(reason) => Verdict::Skipped(reason),
                    StepError::Error(msg) => Verdict::Error(format!("step {} ({}): {msg}", n + 1, step_name(step))),
                };
                break;
            }
        }
        if verdict == Verdict::Pass && !ctx.warnings.is_empty() {
            verdict = Verdict::Warning(ctx.warnings.remove(0));
        }
        (verdict, ctx.log, ctx.controller_lost, (ctx.figures, ctx.claim_judgements))
    }

    /// The verdict of a case during which the host failed: an error naming the faults.
    /// What the steps concluded goes to the log, set aside; the run remembers the first
    /// fault, and the first that ends the run.
    fn host_fault_verdict(
        &mut self,
        case: &ExpandedCase,
        steps: Verdict,
        faults: &[HostFault],
        log: &mut Vec<String>,
    ) -> Verdict {
        let key = format!("{}::{}", case.suite, case.name);
        log.extend(faults.iter().map(|f| format!("host fault: {}", f.message)));
        log.push(format!("the steps' verdict, set aside (the host failed, not the drive): {}", steps.summary()));
        let seen = |fault: &HostFault| FaultSeen { message: fault.message.clone(), case: key.clone() };
        if self.first_fault.is_none() {
            self.first_fault = faults.first().map(seen);
        }
        if self.stop.is_none() {
            self.stop = faults.iter().find(|f| f.ends_run).map(seen);
        }
        Verdict::Error(faults.iter().map(|f| f.message.as_str()).collect::<Vec<_>>().join("; "))
    }

    /// Brings the device back after an error: a controller reset, or opening it again.
    fn recover(&mut self, log: &mut Vec<String>) {
        match self.device.recover() {
            Ok(()) => log.push("target recovered after the error (a controller reset where nvtest drives it)".into()),
            Err(e) => {
                log.push(format!("controller reset after the error failed: {e}"));
                log.push(self.reopen());
            }
        }
    }

    /// The run's host fault in one line for the end of the console, if there was one:
    /// the fault that ended the run (and how many cases were not run), or else the
    /// first. Fault messages say themselves that the host, not the drive, failed.
    pub fn host_fault(&self) -> Option<String> {
        if let Some(stop) = &self.stop {
            let n = self.not_run;
            let cases = if n == 1 { "case" } else { "cases" };
            return Some(format!("{} (first seen in case {}); {n} later {cases} not run", stop.message, stop.case));
        }
        self.first_fault.as_ref().map(|first| format!("{} (first seen in case {})", first.message, first.case))
    }
}

impl Session {
    /// Opens the target again after it went away (QEMU died under a case), so one lost
    /// device does not turn every later case into an error. Says what happened.
    fn reopen(&mut self) -> String {
        let Some(spec) = self.spec.clone() else {
            return "the device cannot be reopened: it was not opened from a target".into();
        };
        let reopened = crate::targets::open(&spec).and_then(|mut device| {
            let facts = Facts::read(device.as_mut())?;
            Ok((device, facts))
        });
        match reopened {
            Ok((device, facts)) => {
                self.device = device;
                self.facts = facts;
                format!("{}: reopened for the next case", spec.describe())
            }
            Err(e) => format!("{}: reopening failed: {e}", spec.describe()),
        }
    }
}

/// Splits a suite's rule text "SECTION: RULE" at the first ": ".
pub fn parse_rule(text: &str) -> Rule {
    match text.split_once(": ") {
        Some((section, rule)) => Rule { section: section.trim().to_string(), text: rule.trim().to_string() },
        None => Rule { section: String::new(), text: text.trim().to_string() },
    }
}

/// The YAML name of a step, for messages.
fn step_name(step: &crate::suite::model::Step) -> String {
    serde_json::to_value(step)
        .ok()
        .and_then(|v| match v {
            serde_json::Value::Object(m) => m.keys().next().cloned(),
            serde_json::Value::String(s) => Some(s),
            _ => None,
        })
        .unwrap_or_else(|| "step".into())
}

/// The seed of one case's data: from the run's seed (printed and recorded, `--seed`
/// replays it), the case's name and the iteration (`--repeat`), so cases of one run and
/// iterations of one case never write the same data, and a replay writes exactly the
/// same.
pub fn case_seed(run_seed: u64, suite: &str, case: &str, iteration: u32) -> u64 {
    let name = xxhash_rust::xxh3::xxh3_64(format!("{suite}::{case}").as_bytes());
    name ^ run_seed.rotate_left(17) ^ u64::from(iteration).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A run seed when none is given: from the clock and the process, so two runs (also
/// two at once) differ.
pub fn fresh_run_seed() -> u64 {
    let clock =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    xxhash_rust::xxh3::xxh3_64(&[clock.to_le_bytes(), u64::from(std::process::id()).to_le_bytes()].concat())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use nvme::device::{Access, Data, DeviceError};
    use nvme::spec::{Command, Completion};

    /// The simulated drive on a host that fails once: the first `host_faults` call
    /// after a command reports `fault`. Counts the commands sent.
    struct FailingHost {
        drive: Box<dyn Device>,
        fault: Option<HostFault>,
        commands: Arc<AtomicUsize>,
    }

    impl Device for FailingHost {
        fn describe(&self) -> String {
            self.drive.describe()
        }
        fn access(&self) -> Access {
            self.drive.access()
        }
        fn admin(&mut self, cmd: Command, data: Data<'_>) -> Result<Completion, DeviceError> {
            self.commands.fetch_add(1, Ordering::Relaxed);
            self.drive.admin(cmd, data)
        }
        fn io(&mut self, qid: u16, cmd: Command, data: Data<'_>, md: Data<'_>) -> Result<Completion, DeviceError> {
            self.commands.fetch_add(1, Ordering::Relaxed);
            self.drive.io(qid, cmd, data, md)
        }
        fn io_queues(&self) -> Vec<u16> {
            self.drive.io_queues()
        }
        fn arm_async_events(&mut self, count: u16) -> Result<(), DeviceError> {
            self.drive.arm_async_events(count)
        }
        fn take_async_events(&mut self) -> Result<Vec<Completion>, DeviceError> {
            self.drive.take_async_events()
        }
        fn command_timeout_ms(&self) -> u64 {
            self.drive.command_timeout_ms()
        }
        fn host_faults(&mut self) -> Vec<HostFault> {
            self.fault.take().into_iter().collect()
        }
    }

    /// Findings that list a trim case as an error: a host fault must not meet them.
    const FINDINGS: &str = r#"target: t
expected:
  - {case: "trim::deallocated-reads/blocks=1,lbads=512", reason: r, rule: "§1: x", verdict: error}
"#;

    fn trim_case(name: &str) -> ExpandedCase {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/trim.yaml");
        let suite = crate::suite::load_file(&path, Some("trim")).unwrap();
        suite.cases.into_iter().find(|c| c.name == name).unwrap()
    }

    /// Runs trim case `first` on the simulated drive whose host fails during it, with
    /// [`FINDINGS`] expected; checks it is an error naming the fault and returns the
    /// session, the outcome and the count of commands sent.
    fn first_case_on_a_failing_host(fault: HostFault, first: &str) -> (Session, CaseOutcome, Arc<AtomicUsize>) {
        let commands = Arc::new(AtomicUsize::new(0));
        let drive = crate::targets::open_sim(nvme_sim::Profile::builtin("enterprise-1.4").unwrap()).unwrap();
        let message = fault.message.clone();
        let device = FailingHost { drive, fault: Some(fault), commands: commands.clone() };
        let mut session = Session::with_device("sim:enterprise-1.4".into(), Box::new(device)).unwrap();
        session.expect_findings(crate::targets::expected::parse_expected(FINDINGS, "f.yaml").unwrap());
        let outcome = session.run_case(&trim_case(first), 1);
        assert_eq!(outcome.verdict, Verdict::Error(message.clone()));
        assert!(outcome.log.contains(&format!("host fault: {message}")), "{:?}", outcome.log);
        (session, outcome, commands)
    }

    #[test]
    fn a_full_disk_makes_the_case_an_error_and_later_cases_are_not_sent() {
        let full = HostFault { message: "the host's disk is full at /x".into(), ends_run: true };
        // Not an expected failure, though the findings list the case as an error.
        let (mut session, first, commands) = first_case_on_a_failing_host(full, "deallocated-reads/blocks=1,lbads=512");
        let set_aside = "the steps' verdict, set aside (the host failed, not the drive): pass".to_string();
        assert!(first.log.contains(&set_aside), "{:?}", first.log);

        let sent = commands.load(Ordering::Relaxed);
        let second = session.run_case(&trim_case("deallocated-reads/blocks=8,lbads=512"), 2);
        let seen = "first seen in case trim::deallocated-reads/blocks=1,lbads=512";
        assert_eq!(second.verdict, Verdict::Error(format!("not run: the host's disk is full at /x ({seen})")));
        assert_eq!(commands.load(Ordering::Relaxed), sent, "a case was sent after the disk filled up");
        assert_eq!(
            session.host_fault().unwrap(),
            format!("the host's disk is full at /x ({seen}); 1 later case not run")
        );
    }

    #[test]
    fn a_fault_that_does_not_end_the_run_errors_its_case_only() {
        let gone = HostFault { message: "an image went away".into(), ends_run: false };
        let (mut session, _, _) = first_case_on_a_failing_host(gone, "range-past-nsze/lbads=512");
        let next = session.run_case(&trim_case("deallocated-reads/blocks=8,lbads=512"), 3);
        assert_eq!(next.verdict, Verdict::Pass);
        let seen = "first seen in case trim::range-past-nsze/lbads=512";
        assert_eq!(session.host_fault().unwrap(), format!("an image went away ({seen})"));
    }

    #[test]
    fn rules_split_into_section_and_text() {
        let r = parse_rule("NVMe 1.4 §5.23 Format NVM: the namespace is formatted");
        assert_eq!(r.section, "NVMe 1.4 §5.23 Format NVM");
        assert_eq!(r.text, "the namespace is formatted");
    }
}
