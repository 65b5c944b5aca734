//! The device thread of one target: it opens the target and owns the session for the
//! whole run (so the session needs not be `Send`), then runs the cases the trials hand
//! it strictly in the order the run lists them, one at a time, however the trials of
//! several targets share libtest-mimic's threads. A panic in a case is an error verdict.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::live::Live;
use super::CaseRunner;
use crate::identity::DeviceIdentity;
use crate::report::CaseResult;
use crate::suite::ExpandedCase;
use crate::verdict::{CaseOutcome, Verdict};

/// What opens a target in its device thread.
pub type Opener = Box<dyn FnOnce() -> Result<Box<dyn CaseRunner>, String> + Send>;

/// A case handed to the device thread, and where its outcome goes.
pub struct Job {
    /// The case's place among this device's cases: jobs run in this order.
    pub seq: usize,
    /// Its place in the whole run (for the reports).
    pub order: usize,
    pub case: ExpandedCase,
    pub iteration: u32,
    pub seed: u64,
    pub reply: mpsc::Sender<CaseOutcome>,
}

/// A running device thread.
pub struct Device {
    pub identity: DeviceIdentity,
    /// The claims its cases judge.
    pub claims: Option<Arc<crate::claims::Claims>>,
    pub jobs: mpsc::Sender<Job>,
    thread: JoinHandle<Option<String>>,
}

/// What an opened target tells the run: who it is, and the claims its cases judge.
type Opened = (DeviceIdentity, Option<Arc<crate::claims::Claims>>);

/// A device thread that is opening its target.
pub struct Opening {
    ready: mpsc::Receiver<Result<Opened, String>>,
    jobs: mpsc::Sender<Job>,
    thread: JoinHandle<Option<String>>,
}

impl Opening {
    /// Starts the thread of target number `index`; it opens the target at once, so
    /// several targets open in parallel.
    pub fn start(index: usize, open: Opener, live: Arc<Live>) -> Result<Opening, String> {
        let (ready_tx, ready) = mpsc::channel::<Result<Opened, String>>();
        let (jobs, jobs_rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name(format!("nvtest-device-{index}"))
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
                if ready_tx.send(Ok((runner.identity(), runner.claims()))).is_err() {
                    return None;
                }
                serve(index, runner.as_mut(), jobs_rx, &live);
                runner.host_fault()
            })
            .map_err(|e| format!("cannot start the device thread: {e}"))?;
        Ok(Opening { ready, jobs, thread })
    }

    /// Waits until the target opened.
    pub fn ready(self) -> Result<Device, String> {
        match self.ready.recv() {
            Ok(Ok((identity, claims))) => Ok(Device { identity, claims, jobs: self.jobs, thread: self.thread }),
            Ok(Err(e)) => {
                let _ = self.thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = self.thread.join();
                Err("the device thread stopped before the target opened".into())
            }
        }
    }
}

/// Runs the jobs in `seq` order: one that arrives early waits for those before it.
fn serve(index: usize, runner: &mut dyn CaseRunner, jobs: mpsc::Receiver<Job>, live: &Live) {
    let mut waiting: BTreeMap<usize, Job> = BTreeMap::new();
    let mut next = 0usize;
    for job in jobs {
        waiting.insert(job.seq, job);
        while let Some(job) = waiting.remove(&next) {
            next += 1;
            let mut record =
                CaseResult::new(job.case.suite.clone(), job.case.name.clone(), error_outcome(String::new()));
            record.rule = job.case.rule.clone();
            record.iteration = job.iteration;
            record.seed = job.seed;
            live.start(index, job.order, record.clone());
            let started = Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(|| runner.run_case(&job.case, job.seed)));
            let mut outcome = outcome.unwrap_or_else(|panic| {
                error_outcome(format!("nvtest panicked running the case: {}", panic_text(panic.as_ref())))
            });
            outcome.duration = started.elapsed();
            record.outcome = outcome.clone();
            live.end(index, job.order, record);
            let _ = job.reply.send(outcome);
        }
    }
    // The run ended (or a trial thread stopped): jobs left waiting are not run.
}

impl Device {
    /// Closes the device: the thread drops the runner and ends. Returns the run's host
    /// fault.
    pub fn stop(self) -> Option<String> {
        drop(self.jobs);
        self.thread.join().unwrap_or(None)
    }
}

pub fn error_outcome(message: String) -> CaseOutcome {
    CaseOutcome {
        figures: Vec::new(),
        claims: Vec::new(),
        verdict: Verdict::Error(message),
        log: Vec::new(),
        duration: Duration::ZERO,
    }
}

pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}
