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
//! - [`erase`]: Format NVM with a Secure Erase Setting, and Sanitize: erased data judged.
//! - [`firmware`]: Firmware Image Download and Commit, the slot log and the running revision.
//! - [`readback`]: after each namespace change, the lists and Identify data that must show it.
//! - [`ports`]: the other controllers of a multi-port drive: which one the commands go
//!   through, their identity, private namespaces; [`port_outage`]: one going down under load.
//! - [`smart`]: the SMART / Health Information log, and its counters judged against the
//!   host's own traffic.
//! - [`ana`]: Asymmetric Namespace Access: the groups the log page 0Ch reports, and what
//!   each ANA state does to the commands through one port while the other serves.

pub mod ana;
pub mod arbitration;
pub mod checks;
mod claimed;
pub mod erase;
pub mod events;
pub mod extent;
pub mod facts;
pub mod firmware;
mod firmware_load;
pub mod io;
pub mod layout;
pub mod namespaces;
pub mod port_outage;
pub mod ports;
pub mod power_fail;
mod readback;
pub mod reservations;
mod resolve;
pub mod smart;
pub mod workload;

use nvme::device::{Data, Device, DeviceError};
use nvme::spec::identify::IdentifyController;
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
    /// The drive did something the specification may not forbid (nvtest could not
    /// confirm the rule): the case ends as a warning.
    Warning(Failure),
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
    /// The controller stopped answering during a command of this case: the runner
    /// brings it back before the next case.
    pub controller_lost: bool,
    /// The fewest blocks a namespace must have for the case's steps
    /// ([`extent::blocks_needed`]): what `use_namespaces` asks of an existing one.
    pub blocks_needed: Option<u64>,
    /// `--case-timeout`: when the case must have ended, and the limit, for the message.
    /// Checked before every command (cooperative: a command itself is bounded by the
    /// driver's own timeouts).
    pub deadline: Option<(std::time::Instant, std::time::Duration)>,
    /// What the drive's datasheet promises, when a claims file or profile gives it.
    pub claims: Option<std::sync::Arc<crate::claims::Claims>>,
    /// What the case's workloads measured, per job ([`crate::load`]).
    pub figures: Vec<crate::load::JobFigures>,
    /// What the case concluded about each claim it judged ([`crate::claims::verdicts`]).
    pub claim_judgements: Vec<crate::claims::ClaimJudgement>,
    /// `SUITE::CASE` (names a power-fail campaign's journal).
    pub case_name: String,
    /// Where a power-fail campaign keeps its journal (`--journal`); `None`: in memory.
    pub journal: Option<crate::power::JournalSetup>,
    /// The vendor's firmware image (`--firmware`); `None`: nvtest's test image.
    pub firmware: Option<std::sync::Arc<firmware::VendorImage>>,
    /// The last command sent: on the admin queue (`true`) or an I/O queue, and its opcode.
    last_command: Option<(bool, u8)>,
    /// The port the case's commands go through ([`ports`]): 0 the controller nvtest
    /// opened, n the n-th other controller of its NVM subsystem ([`Device::port`]).
    pub port: usize,
    /// What the drive did that the specification may not allow, found by a step that
    /// went on: a case whose steps all succeed ends as a warning with the first of them.
    pub warnings: Vec<Failure>,
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
            controller_lost: false,
            blocks_needed: None,
            deadline: None,
            figures: Vec::new(),
            claim_judgements: Vec::new(),
            claims: None,
            last_command: None,
            case_name: String::new(),
            journal: None,
            firmware: None,
            port: 0,
            warnings: Vec::new(),
        }
    }

    /// The controller the case's commands go to: the one of the port in use.
    pub fn target(&mut self) -> StepResult<&mut dyn Device> {
        let n = self.port;
        if n > self.device.port_count() {
            let reached = ports::reached(&*self.device);
            return Err(StepError::Error(format!("port {} is not there: the target brought up {reached}", n + 1)));
        }
        match n {
            0 => Ok(&mut *self.device),
            n => self.device.port(n - 1).ok_or_else(|| StepError::Error(format!("port {} is not there", n + 1))),
        }
    }

    /// An error once the case ran past `--case-timeout`: nvtest stops it, the drive is
    /// not blamed (the limit is the user's, not a rule).
    fn within_deadline(&self, what: &str) -> StepResult {
        match self.deadline {
            Some((at, limit)) if std::time::Instant::now() >= at => Err(StepError::Error(format!(
                "the case ran past --case-timeout ({:.1} s): stopped before sending {what}",
                limit.as_secs_f64()
            ))),
            _ => Ok(()),
        }
    }

    /// Runs `f` with the case's commands going through `port` (0-based: 0 the controller
    /// nvtest opened, n its NVM subsystem's n-th other controller), then back to the port
    /// in use before, whatever `f` returned.
    pub fn through_port<T>(&mut self, port: usize, f: impl FnOnce(&mut Self) -> StepResult<T>) -> StepResult<T> {
        let before = std::mem::replace(&mut self.port, port);
        let result = f(self);
        self.port = before;
        result
    }

    /// Sends an admin command, logging what was sent and what came back.
    pub fn admin(&mut self, what: &str, cmd: Command, data: Data<'_>) -> StepResult<Completion> {
        self.within_deadline(what)?;
        self.last_command = Some((true, cmd.opcode));
        let result = self.target()?.admin(cmd, data);
        self.log_completion(what, &result);
        self.completed(what, result)
    }

    /// A command's result: a controller that stopped answering during it (no completion
    /// in time, CSTS.CFS, the target gone) fails the drive, naming the command.
    fn completed(&mut self, what: &str, result: Result<Completion, DeviceError>) -> StepResult<Completion> {
        match result {
            Ok(c) => Ok(c),
            Err(e) if e.controller_stopped() => {
                self.controller_lost = true;
                Err(self.fail_rule(
                    crate::rules::command_completes(),
                    what,
                    e.to_string(),
                    "a completion queue entry for the command (with an error status if it cannot be carried out)",
                ))
            }
            Err(e) => Err(e.into()),
        }
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
        self.io_on(qid, what, cmd, data, metadata)
    }

    /// [`CaseContext::io_with_metadata`] on I/O queue `qid` (one of
    /// [`Device::io_queues`]).
    pub fn io_on(
        &mut self,
        qid: u16,
        what: &str,
        cmd: Command,
        data: Data<'_>,
        metadata: Data<'_>,
    ) -> StepResult<Completion> {
        self.within_deadline(what)?;
        self.last_command = Some((false, cmd.opcode));
        let result = self.target()?.io(qid, cmd, data, metadata);
        self.log_completion(what, &result);
        self.completed(what, result)
    }

    fn io_queue(&self) -> StepResult<u16> {
        self.device
            .io_queues()
            .first()
            .copied()
            .ok_or_else(|| StepError::Error("the target has no I/O queue ready".into()))
    }

    fn log_completion(&mut self, what: &str, result: &Result<Completion, DeviceError>) {
        // Commands through another port than the first say which.
        let on = match self.port {
            0 => String::new(),
            n => format!("[port {}] ", n + 1),
        };
        let what = format!("{on}{what}");
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
        if let Some(contradicted) = self.capability_contradicted(sent, completion) {
            return Err(contradicted);
        }
        Err(self.fail(sent, got.to_string(), describe_expected(&wanted)))
    }

    /// A command completed with Invalid Command Opcode although Identify Controller
    /// advertises it (OACS, ONCS): the failure of that capability bit, whatever the step
    /// expected — the bit is what the drive contradicts.
    pub fn capability_contradicted(&self, sent: &str, completion: &Completion) -> Option<StepError> {
        let status = completion.status();
        if !status.same_code(&Status::INVALID_COMMAND_OPCODE) {
            return None;
        }
        let (admin, opcode) = self.last_command?;
        let (rule, bit) = advertising_bit(&self.facts.identify, admin, opcode)?;
        Some(self.fail_rule(
            rule,
            sent,
            format!("{status}, although Identify Controller sets {bit}"),
            "the command the capability bit advertises, carried out",
        ))
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

/// The Identify Controller bit that advertises command `opcode` (admin or NVM), with its
/// rule, when the controller sets it.
fn advertising_bit(id: &IdentifyController, admin: bool, opcode: u8) -> Option<(Rule, &'static str)> {
    use crate::rules;
    let (set, rule, bit) = match (admin, opcode) {
        (true, 0x0D | 0x15) => {
            (id.oacs.namespace_management(), rules::oacs_namespace_management(), "OACS bit 3 (Namespace Management)")
        }
        (true, 0x80) => (id.oacs.format_nvm(), rules::oacs_format_nvm(), "OACS bit 1 (Format NVM)"),
        (false, 0x05) => (id.oncs.compare(), rules::oncs(0, "Compare"), "ONCS bit 0 (Compare)"),
        (false, 0x09) => {
            (id.oncs.dataset_management(), rules::oncs(2, "Dataset Management"), "ONCS bit 2 (Dataset Management)")
        }
        (false, 0x08) => (id.oncs.write_zeroes(), rules::oncs(3, "Write Zeroes"), "ONCS bit 3 (Write Zeroes)"),
        _ => return None,
    };
    set.then_some((rule, bit))
}

fn describe_expected(wanted: &[Status]) -> String {
    let names: Vec<String> = wanted.iter().map(|s| s.to_string()).collect();
    names.join(" or ")
}

/// Runs one step.
pub fn run_step(ctx: &mut CaseContext<'_>, step: &Step) -> StepResult {
    match step {
        Step::UseNamespaces { count, lbads, blocks, create, shared } => {
            namespaces::use_namespaces(ctx, count, lbads, blocks, *create, *shared)
        }
        Step::DeleteAllNamespaces {} => namespaces::delete_all(ctx),
        Step::Port { number } => ports::select(ctx, *number),
        Step::PrivateNamespace {} => ports::private_namespace(ctx),
        Step::ReservationAccess { ns } => reservations::access(ctx, ns),
        Step::ReservationPreempt { ns } => reservations::preempt(ctx, ns),
        Step::ReservationPowerLoss { ns } => reservations::power_loss(ctx, ns),
        Step::AnaStates { ns } => ana::ana_states(ctx, ns),
        Step::PortOutage(o) => port_outage::port_outage(ctx, o),
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
        Step::FormatEachLbaFormat { ns } => namespaces::format_each_lba_format(ctx, ns),
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
        Step::Workload { jobs, qos } => workload::workload(ctx, jobs, qos.as_ref()),
        Step::PowerFail(p) => power_fail::power_fail(ctx, p),
        Step::FormatErase(f) => erase::format_erase(ctx, f),
        Step::Sanitize(s) => erase::sanitize(ctx, s),
        Step::FirmwareUpdate(f) => firmware::firmware_update(ctx, f),
        Step::FirmwareErrors {} => firmware::firmware_errors(ctx),
        Step::SanitizeFailureMode {} => erase::sanitize_failure_mode(ctx),
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
