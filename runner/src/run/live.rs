//! What a run has done so far, kept where a signal or the run's `--timeout` can find
//! it: the cases that ended, the case each device is running, and where the reports go.
//! On SIGINT / SIGTERM (through the QEMU layer's signal watcher, which then kills every
//! QEMU and exits 130 / 143) and when `--timeout` expires (exit [`EXIT_TIMEOUT`]), the
//! reports are written for what ran, the running cases as errors saying they were cut
//! short.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use crate::identity::DeviceIdentity;
use crate::report::meta::RunMeta;
use crate::report::{json, junit, CaseResult, RunRecord, RunResults};
use crate::suite::SuiteInfo;
use crate::verdict::{CaseOutcome, Verdict};

/// The exit status of a run whose `--timeout` expired (as GNU `timeout`'s).
pub const EXIT_TIMEOUT: i32 = 124;

/// One ended case: its target, its place in the run, its result.
#[derive(Clone, Debug)]
pub struct Ended {
    pub target: usize,
    pub order: usize,
    pub result: CaseResult,
}

/// A case a device is running now.
#[derive(Clone, Debug)]
pub struct Running {
    pub order: usize,
    pub result: CaseResult,
    pub since: Instant,
}

/// The state of a run in progress.
#[derive(Debug)]
pub struct Live {
    pub meta: Mutex<RunMeta>,
    pub identities: Mutex<Vec<DeviceIdentity>>,
    /// Per target, the claims its cases judge.
    pub claims: Mutex<Vec<Option<Arc<crate::claims::Claims>>>>,
    pub suites: Vec<SuiteInfo>,
    pub started: SystemTime,
    pub ended: Mutex<Vec<Ended>>,
    /// Per target, the case its device runs now.
    pub running: Mutex<Vec<Option<Running>>>,
    pub junit: Option<PathBuf>,
    pub json: Option<PathBuf>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Live {
    pub fn new(
        meta: RunMeta,
        suites: Vec<SuiteInfo>,
        targets: usize,
        junit: Option<PathBuf>,
        json: Option<PathBuf>,
    ) -> Live {
        Live {
            meta: Mutex::new(meta),
            identities: Mutex::new(vec![DeviceIdentity::default(); targets]),
            claims: Mutex::new(vec![None; targets]),
            suites,
            started: SystemTime::now(),
            ended: Mutex::new(Vec::new()),
            running: Mutex::new(vec![None; targets]),
            junit,
            json,
        }
    }

    pub fn set_identity(&self, target: usize, identity: DeviceIdentity) {
        if let Some(slot) = lock(&self.identities).get_mut(target) {
            *slot = identity;
        }
    }

    pub fn set_claims(&self, target: usize, claims: Option<Arc<crate::claims::Claims>>) {
        if let Some(slot) = lock(&self.claims).get_mut(target) {
            *slot = claims;
        }
    }

    pub fn start(&self, target: usize, order: usize, result: CaseResult) {
        if let Some(slot) = lock(&self.running).get_mut(target) {
            *slot = Some(Running { order, result, since: Instant::now() });
        }
    }

    /// Records an ended case (also one never handed to a device: a `--preserve` skip).
    pub fn end(&self, target: usize, order: usize, result: CaseResult) {
        if let Some(slot) = lock(&self.running).get_mut(target) {
            if slot.as_ref().is_some_and(|r| r.order == order) {
                *slot = None;
            }
        }
        lock(&self.ended).push(Ended { target, order, result });
    }

    /// The whole run as a record; `interrupted` adds the running cases as errors.
    pub fn record(&self, interrupted: Option<String>) -> RunRecord {
        let identities = lock(&self.identities).clone();
        let mut ended = lock(&self.ended).clone();
        if let Some(why) = &interrupted {
            for (target, running) in lock(&self.running).iter().enumerate() {
                if let Some(r) = running {
                    let mut result = r.result.clone();
                    result.outcome = CaseOutcome {
                        figures: Vec::new(),
                        claims: Vec::new(),
                        verdict: Verdict::Error(format!(
                            "interrupted: {why} while the case ran (after {:.1} s); it did not finish",
                            r.since.elapsed().as_secs_f64()
                        )),
                        log: Vec::new(),
                        duration: r.since.elapsed(),
                    };
                    ended.push(Ended { target, order: r.order, result });
                }
            }
        }
        ended.sort_by_key(|e| e.order);
        let claims = lock(&self.claims).clone();
        let targets = identities
            .into_iter()
            .enumerate()
            .map(|(i, identity)| {
                let mut results = RunResults {
                    identity,
                    started: self.started,
                    suites: self.suites.clone(),
                    cases: ended.iter().filter(|e| e.target == i).map(|e| e.result.clone()).collect(),
                    claims: None,
                };
                results.claims = claims.get(i).and_then(Option::as_ref).map(|c| results.judge_claims(c));
                results
            })
            .collect();
        let mut meta = lock(&self.meta).clone();
        meta.ended = Some(SystemTime::now());
        RunRecord { meta, targets, interrupted }
    }

    /// Writes the reports asked for; the errors, one line each.
    pub fn write_reports(&self, record: &RunRecord) -> Vec<String> {
        let mut errors = Vec::new();
        if let Some(path) = &self.junit {
            if let Err(e) = junit::write(path, record) {
                errors.push(e);
            }
        }
        if let Some(path) = &self.json {
            if let Err(e) = json::write(path, record) {
                errors.push(e);
            }
        }
        errors
    }
}

/// The run in progress, for the signal hook.
static CURRENT: Mutex<Option<Arc<Live>>> = Mutex::new(None);

/// Makes `live` the run a signal reports; installs (once) the hook. Errors are one line.
pub fn enter(live: Arc<Live>) -> Result<(), String> {
    static HOOK: OnceLock<Result<(), String>> = OnceLock::new();
    HOOK.get_or_init(|| {
        nvme::transport::qemu::on_interrupt(Box::new(|signal| {
            let name = match signal {
                2 => "SIGINT",
                15 => "SIGTERM",
                _ => "a signal",
            };
            interrupted(&format!("{name} (signal {signal})"));
        }))
        .map_err(|e| e.to_string())
    })
    .clone()?;
    *lock(&CURRENT) = Some(live);
    Ok(())
}

/// The run ended: a signal no longer reports it.
pub fn leave() {
    *lock(&CURRENT) = None;
}

/// Writes the reports of the current run, if any, cut short by `why`, and says so on
/// stderr.
pub fn interrupted(why: &str) {
    let Some(live) = lock(&CURRENT).clone() else { return };
    let record = live.record(Some(why.to_string()));
    let c = record.counts();
    tell!("\nnvtest: run interrupted by {why}: {} (the running cases as errors)", c.line());
    for error in live.write_reports(&record) {
        tell!("error: {error}");
    }
    for (path, what) in [(&live.junit, "JUnit report"), (&live.json, "JSON record")] {
        if let Some(path) = path {
            tell!("nvtest: {what} of the cases that ran: {}", path.display());
        }
    }
}

/// Ends the run when `limit` passes: writes its reports, kills what it started, exits
/// [`EXIT_TIMEOUT`]. Dropping the returned sender (the run ended) stops the watch.
pub fn watch_timeout(limit: Duration) -> std::sync::mpsc::Sender<()> {
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let _ = std::thread::Builder::new().name("nvtest-timeout".into()).spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = ended.recv_timeout(limit) {
            interrupted(&format!("--timeout ({} s expired)", limit.as_secs_f64()));
            nvme::transport::qemu::cleanup_and_exit(EXIT_TIMEOUT);
        }
    });
    done
}
