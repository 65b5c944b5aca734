//! Steps: what each word of the suite vocabulary does on a device.
//!
//! A case runs its steps in order against one [`CaseContext`]: the device, what nvtest
//! knows of the controller ([`Facts`]), the case's namespace set, and the host map of
//! what every written block must hold. A step either succeeds, or ends the case with a
//! failure naming the rule, a skip naming the missing capability, or an error (nvtest or
//! the transport broke).
//!
//! - [`namespaces`]: namespace setup, creation, deletion, attachment, format.
//! - [`io`]: tagged writes, verification, raw I/O with expected statuses, deallocate,
//!   write zeroes, flush, compare.
//! - [`checks`]: the named checks (`check: NAME`), each a rule implemented in Rust.
//! - [`events`]: asynchronous events and the Changed Namespace List.

pub mod checks;
pub mod events;
pub mod facts;
pub mod io;
pub mod layout;
pub mod namespaces;
mod resolve;

use nvme::device::{Data, Device, DeviceError};
use nvme::spec::{Command, Completion, Status};

use crate::data::HostMap;
use crate::suite::model::{Expect, Step};
use crate::verdict::{Failure, Rule};

pub use facts::Facts;
pub use namespaces::NsEntry;

/// How a step ended a case early.
#[derive(Debug)]
pub enum StepError {
    /// The drive broke a rule.
    Fail(Failure),
    /// The drive lacks something the case needs (the exact bit or version).
    Skip(String),
    /// nvtest or the transport broke; says nothing about the drive.
    Error(String),
}

impl From<DeviceError> for StepError {
    /// A command the target cannot send at all (a kernel target refusing an NSID with no
    /// device node) skips the case with that reason; anything else is nvtest's error.
    fn from(e: DeviceError) -> Self {
        match e {
            DeviceError::Unsupported(reason) => StepError::Skip(format!("not possible on this target: {reason}")),
            other => StepError::Error(other.to_string()),
        }
    }
}

pub type StepResult<T = ()> = Result<T, StepError>;

/// Everything a case's steps share.
pub struct CaseContext<'a> {
    pub device: &'a mut dyn Device,
    pub facts: &'a Facts,
    /// The rule of the case, used when a step's expectation fails.
    pub rule: Rule,
    /// The namespace set, in the order `use_namespaces` / `create_namespace` made it.
    pub set: Vec<NsEntry>,
    /// What every block nvtest wrote must hold.
    pub map: HostMap,
    /// Commands sent and what came back, one line each.
    pub log: Vec<String>,
    /// Write generation: increases with every tagged write command.
    pub generation: u64,
    /// Seed of this case's data patterns.
    pub seed: u64,
    /// Whether Asynchronous Event Requests are outstanding for this case.
    pub events_armed: bool,
}

impl<'a> CaseContext<'a> {
    pub fn new(device: &'a mut dyn Device, facts: &'a Facts, rule: Rule, seed: u64) -> Self {
        CaseContext {
            device,
            facts,
            rule,
            set: Vec::new(),
            map: HostMap::default(),
            log: Vec::new(),
            generation: 0,
            seed,
            events_armed: false,
        }
    }

    /// Sends an admin command, logging what was sent and what came back.
    pub fn admin(&mut self, what: &str, cmd: Command, data: Data<'_>) -> StepResult<Completion> {
        let result = self.device.admin(cmd, data);
        self.log_completion(what, &result);
        Ok(result?)
    }

    /// Sends an I/O command on the first I/O queue, logging it.
    pub fn io(&mut self, what: &str, cmd: Command, data: Data<'_>) -> StepResult<Completion> {
        self.io_with_metadata(what, cmd, data, Data::None)
    }

    /// [`CaseContext::io`] with a separate metadata buffer (MPTR) for formats that
    /// have one ([`layout::Layout`]).
    pub fn io_with_metadata(
        &mut self,
        what: &str,
        cmd: Command,
        data: Data<'_>,
        metadata: Data<'_>,
    ) -> StepResult<Completion> {
        let qid = self.io_queue()?;
        let result = self.device.io(qid, cmd, data, metadata);
        self.log_completion(what, &result);
        Ok(result?)
    }

    fn io_queue(&self) -> StepResult<u16> {
        self.device
            .io_queues()
            .first()
            .copied()
            .ok_or_else(|| StepError::Error("the target has no I/O queue ready".into()))
    }

    fn log_completion(&mut self, what: &str, result: &Result<Completion, DeviceError>) {
        let line = match result {
            Ok(c) if c.status().is_success() => format!("{what} -> Successful Completion, DW0 {:#x}", c.dw0),
            Ok(c) => format!("{what} -> {}", c.status()),
            Err(e) => format!("{what} -> no completion: {e}"),
        };
        self.log.push(line);
    }

    /// A failure of the case's own rule.
    pub fn fail(&self, sent: impl Into<String>, observed: impl Into<String>, expected: impl Into<String>) -> StepError {
        StepError::Fail(Failure {
            rule: self.rule.clone(),
            sent: sent.into(),
            observed: observed.into(),
            expected: expected.into(),
        })
    }

    /// A failure of a specific rule (named checks carry their own).
    pub fn fail_rule(
        &self,
        rule: Rule,
        sent: impl Into<String>,
        observed: impl Into<String>,
        expected: impl Into<String>,
    ) -> StepError {
        StepError::Fail(Failure { rule, sent: sent.into(), observed: observed.into(), expected: expected.into() })
    }

    /// Judges a completion against a step's expectation (success when none is given).
    pub fn expect(&self, sent: &str, completion: &Completion, expect: Option<&Expect>) -> StepResult {
        let got = completion.status();
        let wanted = expected_statuses(expect).map_err(StepError::Error)?;
        if wanted.iter().any(|w| w.same_code(&got)) {
            return Ok(());
        }
        Err(self.fail(sent, got.to_string(), describe_expected(&wanted)))
    }

    /// Requires success of a command the case does not test but depends on.
    pub fn require_success(&self, sent: &str, completion: &Completion) -> StepResult {
        self.expect(sent, completion, None)
    }
}

/// The statuses an expectation accepts; `success` (any case) means Successful Completion.
pub fn expected_statuses(expect: Option<&Expect>) -> Result<Vec<Status>, String> {
    let names: Vec<&str> = match expect {
        None => vec!["success"],
        Some(Expect::One(n)) => vec![n.as_str()],
        Some(Expect::AnyOf(v)) => v.iter().map(String::as_str).collect(),
    };
    names
        .into_iter()
        .map(|n| {
            if n.trim().eq_ignore_ascii_case("success") {
                Ok(Status::SUCCESS)
            } else {
                Status::from_name(n).ok_or_else(|| format!("`{n}` is not a status name of the specification"))
            }
        })
        .collect()
}

fn describe_expected(wanted: &[Status]) -> String {
    let names: Vec<String> = wanted.iter().map(|s| s.to_string()).collect();
    names.join(" or ")
}

/// Runs one step.
pub fn run_step(ctx: &mut CaseContext<'_>, step: &Step) -> StepResult {
    match step {
        Step::UseNamespaces { count, lbads, blocks, create } => {
            namespaces::use_namespaces(ctx, count, lbads, blocks, *create)
        }
        Step::DeleteAllNamespaces {} => namespaces::delete_all(ctx),
        Step::ExistingNamespaces {} => namespaces::existing_namespaces(ctx),
        Step::ControllerReset {} => {
            let result = ctx.device.controller_reset();
            let outcome = match &result {
                Ok(()) => "done".to_string(),
                Err(e) => format!("failed: {e}"),
            };
            ctx.log.push(format!("Controller Reset (CC.EN 1 → 0 → 1, or the kernel driver's reset) -> {outcome}"));
            Ok(result?)
        }
        Step::CreateNamespace { lbads, lbaf, blocks, expect } => {
            namespaces::create(ctx, lbads.as_ref(), lbaf.as_ref(), blocks, expect.as_ref())
        }
        Step::CreateUntilFull { lbads, blocks } => namespaces::create_until_full(ctx, lbads, blocks),
        Step::DeleteNamespace { ns, expect } => namespaces::delete(ctx, ns, expect.as_ref()),
        Step::Attach { ns, expect } => namespaces::attach(ctx, ns, true, expect.as_ref()),
        Step::Detach { ns, expect } => namespaces::attach(ctx, ns, false, expect.as_ref()),
        Step::Format { ns, lbads, lbaf, expect } => {
            namespaces::format(ctx, ns, lbads.as_ref(), lbaf.as_ref(), expect.as_ref())
        }
        Step::Write { ns, lba, blocks, fua, reverse } => io::write(ctx, ns, lba, blocks, *fua, *reverse),
        Step::Verify { ns, lba, blocks } => io::verify(ctx, ns, lba.as_ref(), blocks.as_ref()),
        Step::Io { ns, op, lba, blocks, expect } => io::raw(ctx, ns, *op, lba, blocks, expect.as_ref()),
        Step::IoBeyondMdts { ns, op, expect } => io::beyond_mdts(ctx, ns, *op, expect.as_ref()),
        Step::Deallocate { ns, ranges, expect } => io::deallocate(ctx, ns, ranges, expect.as_ref()),
        Step::DeallocateAll { ns } => io::deallocate_all(ctx, ns),
        Step::WriteZeroes { ns, lba, blocks, deac, expect } => {
            io::write_zeroes(ctx, ns, lba, blocks, *deac, expect.as_ref())
        }
        Step::Flush { ns } => io::flush(ctx, ns),
        Step::Compare { ns, lba, blocks, mismatch } => io::compare(ctx, ns, lba, blocks, *mismatch),
        Step::Identify { cns, ns, expect, zero_filled } => {
            checks::identify(ctx, *cns, ns, expect.as_ref(), *zero_filled)
        }
        Step::Check(name) => checks::run(ctx, *name),
        Step::ArmAsyncEvents {} => events::arm(ctx),
        Step::ExpectNamespaceChanged { ns } => events::expect_namespace_changed(ctx, ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_name_spec_statuses() {
        assert_eq!(expected_statuses(None).unwrap(), vec![Status::SUCCESS]);
        let e = Expect::AnyOf(vec!["LBA Out of Range".into(), "success".into()]);
        assert_eq!(expected_statuses(Some(&e)).unwrap(), vec![Status::LBA_OUT_OF_RANGE, Status::SUCCESS]);
        assert!(expected_statuses(Some(&Expect::One("Nope".into()))).is_err());
    }
}
