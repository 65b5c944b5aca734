//! Sanitize (admin 84h, NVMe 1.4 §5.24) and the sanitize operation (§8.15): Block
//! Erase, Crypto Erase and Overwrite of all user data in the NVM subsystem, run in the
//! background on the simulated clock, with the Sanitize Status log (81h), the commands
//! refused while it runs (§8.15.1 "Sanitize Operation Restrictions"), the Sanitize
//! Operation Completed event, and the operation resuming after a power cycle.
//!
//! The operation takes the profile's time ([`super::erase::SanitizeModel`]) from when
//! it starts; it is looked at whenever a command arrives (the host polls the log, the
//! only way the spec gives it to follow the operation). The erase itself is applied when
//! the operation completes; until then every command that could see user data is
//! refused, so no host sees the difference.
//!
//! An operation fails when the profile says so (`sanitize.fail_next`, a fault: a drive
//! may fail one): SSTAT 011b, nothing erased, and the controller in failure mode (§8.15)
//! until Exit Failure Mode (allowed only when the failed Sanitize set AUSE: unrestricted
//! completion mode) or a new operation completes; meanwhile the restricted commands are
//! refused with Sanitize Failed.

use super::{Quirk, Subsystem};
use crate::exec::{AsyncEvent, ControllerContext, Done};
use nvme::spec::log::LogPageId;
use nvme::spec::sanitize::{
    final_overwrite_pattern, SanitizeAction, SanitizeCdw10, SanitizeStatus, SanitizeStatusLog, Sstat,
    EVENT_SANITIZE_COMPLETED, EVENT_TYPE_IO_COMMAND_SPECIFIC, SPROG_NOT_IN_PROGRESS, TIME_NOT_REPORTED,
};
use nvme::spec::{AdminOpcode, Command, NvmOpcode, Status};

/// What a block erase leaves on the media, read back when no deallocation follows
/// (NDAS set): erased NAND's all-ones, a vendor-specific value (§8.15).
const BLOCK_ERASED: [u8; 4] = [0xFF; 4];

/// The sanitize state of the subsystem (it survives resets and power cycles).
#[derive(Debug, Default)]
pub struct SanitizeState {
    /// Status of the most recent operation (SSTAT bits 2:0).
    status: Option<SanitizeStatus>,
    /// CDW10 of the command that started the most recent operation.
    scdw10: u32,
    running: Option<Running>,
    /// Failure mode: `Some(unrestricted)` after a failed operation.
    failed: Option<bool>,
    /// SSTAT bit 8: no user data written since the last successful operation.
    global_data_erased: bool,
    /// Quirk `sanitize-no-completion-event` aside, whether the completion event is owed.
    event_pending: bool,
    /// Operations failed so far (the profile's `fail_next` fails the first ones).
    operations_failed: u32,
}

#[derive(Clone, Copy, Debug)]
struct Running {
    cdw10: SanitizeCdw10,
    pattern: u32,
    /// When the operation (re)started on the clock, or `None` when it resumes at the
    /// next command after a power cycle.
    started_ns: Option<u64>,
    duration_ns: u64,
}

impl SanitizeState {
    /// Whether an operation is running.
    pub fn in_progress(&self) -> bool {
        self.running.is_some()
    }

    /// User data was written: Global Data Erased no longer holds.
    pub fn data_written(&mut self) {
        self.global_data_erased = false;
    }
}

impl Subsystem {
    /// The Sanitize command.
    pub(super) fn sanitize(&mut self, ctx: &mut ControllerContext, cmd: &Command) -> Done {
        let Some(model) = self.profile.erase.sanitize else { return Done::err(Status::INVALID_COMMAND_OPCODE) };
        let cdw10 = SanitizeCdw10::from_bits(cmd.cdw10);
        if self.sanitize.running.is_some() {
            return Done::err(Status::SANITIZE_IN_PROGRESS);
        }
        let duration_ms = match cdw10.sanact() {
            SanitizeAction::ExitFailureMode => {
                // §8.15: leaves unrestricted failure mode; a controller in restricted
                // failure mode (or in none) has nothing to exit to.
                return match self.sanitize.failed {
                    // Quirk `exit-failure-mode-ignored`: success, failure mode stays (§8.15 broken).
                    Some(true) if self.quirks.has(Quirk::ExitFailureModeIgnored) => Done::ok(),
                    Some(true) | None => {
                        self.sanitize.failed = None;
                        Done::ok()
                    }
                    Some(false) => Done::err(Status::SANITIZE_FAILED),
                };
            }
            SanitizeAction::BlockErase if model.block_erase => model.block_erase_ms,
            SanitizeAction::CryptoErase if model.crypto_erase => model.crypto_erase_ms,
            SanitizeAction::Overwrite if model.overwrite => model.overwrite_pass_ms * cdw10.passes() as u64,
            _ => return Done::err(Status::INVALID_FIELD),
        };
        if cdw10.ndas() && model.no_deallocate_inhibited {
            // SANICAP.NDI set: No-Deallocate After Sanitize is Invalid Field (§5.24).
            return Done::err(Status::INVALID_FIELD);
        }
        self.sanitize.failed = None;
        self.sanitize.status = Some(SanitizeStatus::InProgress);
        self.sanitize.scdw10 = cmd.cdw10;
        self.sanitize.event_pending = false;
        self.sanitize.running = Some(Running {
            cdw10,
            pattern: cmd.cdw11,
            started_ns: Some(ctx.now_ns),
            duration_ns: duration_ms.saturating_mul(1_000_000),
        });
        // The operation may be instant (a zero duration): done before the completion.
        self.sanitize_progress(ctx);
        Done::ok()
    }

    /// Completes the running operation when its time has come; raises the completion
    /// event once it has. Called as every command arrives.
    pub(super) fn sanitize_progress(&mut self, ctx: &mut ControllerContext) {
        if let Some(run) = self.sanitize.running.as_mut() {
            let started = *run.started_ns.get_or_insert(ctx.now_ns);
            if self.quirks.has(Quirk::SanitizeNeverCompletes) {
                // Quirk: the operation never ends (§8.15 broken).
                return;
            }
            if ctx.now_ns >= started.saturating_add(run.duration_ns) {
                let run = *run;
                self.sanitize.running = None;
                let fail_next = self.profile.erase.sanitize.map_or(0, |m| m.fail_next);
                if self.sanitize.operations_failed < fail_next {
                    // The profile's fault: the operation fails, nothing is erased.
                    self.sanitize.operations_failed += 1;
                    self.sanitize.status = Some(SanitizeStatus::Failed);
                    self.sanitize.failed = Some(run.cdw10.ause());
                    return;
                }
                self.apply_sanitize(run);
                self.sanitize.status = Some(SanitizeStatus::Completed);
                // Quirk `global-data-erased-never-set`: SSTAT bit 8 stays clear (log 81h broken).
                self.sanitize.global_data_erased = !self.quirks.has(Quirk::GlobalDataErasedNeverSet);
                self.sanitize.event_pending = !self.quirks.has(Quirk::SanitizeNoCompletionEvent);
            }
        }
        if std::mem::take(&mut self.sanitize.event_pending) {
            ctx.events.push(AsyncEvent {
                event_type: EVENT_TYPE_IO_COMMAND_SPECIFIC,
                info: EVENT_SANITIZE_COMPLETED,
                log_page: LogPageId::SanitizeStatus as u8,
            });
        }
    }

    /// The erase of a completed operation, on every namespace of the subsystem.
    fn apply_sanitize(&mut self, run: Running) {
        self.forget_port_stale(super::NSID_ALL);
        let crypto = run.cdw10.sanact() == SanitizeAction::CryptoErase;
        let mut nsids = self.allocated_nsids();
        if self.quirks.has(Quirk::SanitizeMissesNamespace) {
            // Quirk: the highest namespace keeps its data (§8.15: all user data, broken).
            nsids.pop();
        }
        let final_inverted = self.quirks.has(Quirk::OverwriteFinalPassInverted);
        let keep_allocated = self.quirks.has(Quirk::SanitizeSkipsDeallocation);
        for nsid in nsids {
            self.power.writeback.forget(nsid);
            let key = if crypto { self.new_key() } else { None };
            let plaintext_kept = crypto && self.quirks.has(Quirk::CryptoEraseLeavesPlaintext);
            let quirks = self.quirks.clone();
            let Some(ns) = self.namespace_mut(nsid) else { continue };
            // Quirks `erase-spares-last-blocks`, `erase-spares-interior-band`: blocks come
            // through (§8.15 broken).
            let spared = super::quirk::erase_spared(&quirks, ns);
            if plaintext_kept {
                // Quirk: the key is kept and nothing deallocated (§8.15 Crypto Erase broken).
                continue;
            }
            match run.cdw10.sanact() {
                SanitizeAction::CryptoErase => {
                    if let Some(key) = key {
                        ns.crypto_erase(key);
                    }
                }
                SanitizeAction::BlockErase => ns.overwrite(BLOCK_ERASED),
                SanitizeAction::Overwrite => {
                    let last = final_overwrite_pattern(run.pattern, run.cdw10.passes(), run.cdw10.oipbp());
                    // Quirk `overwrite-final-pass-inverted`: the media ends inverted (§5.24 'should').
                    let last = if final_inverted { !last } else { last };
                    ns.overwrite(last.to_le_bytes());
                }
                _ => {}
            }
            // Quirk `sanitize-skips-deallocation`: the blocks stay as written (§5.24 'should').
            if !run.cdw10.ndas() && !keep_allocated {
                ns.erase();
            }
            ns.put_back(&spared);
        }
    }

    /// The status a command gets instead of running while an operation runs or the
    /// controller is in failure mode (§8.15.1), or `None` when it may run.
    pub(super) fn sanitize_restriction(&self, cmd: &Command, admin: bool) -> Option<Status> {
        let status = if self.sanitize.running.is_some() {
            Status::SANITIZE_IN_PROGRESS
        } else if self.sanitize.failed.is_some() {
            Status::SANITIZE_FAILED
        } else {
            return None;
        };
        if self.quirks.has(Quirk::SanitizeAcceptsCommands) {
            // Quirk: commands run during the operation (§8.15.1 broken).
            return None;
        }
        if self.sanitize.running.is_none() && self.quirks.has(Quirk::FailureModeAcceptsIo) {
            // Quirk: failure mode restricts nothing (§8.15 broken).
            return None;
        }
        let in_progress = self.sanitize.running.is_some();
        if in_progress && self.admitted_by_quirk(cmd, admin) {
            // Quirks `sanitize-admits-*`: one restricted command runs (§8.15 broken).
            return None;
        }
        if !admin {
            return Some(status);
        }
        let allowed = match AdminOpcode::from_u8(cmd.opcode) {
            // Quirk `identify-refused-during-sanitize` (§8.15.1 broken).
            Some(AdminOpcode::Identify) if in_progress && self.quirks.has(Quirk::IdentifyRefusedDuringSanitize) => {
                false
            }
            // Quirk `sanitize-status-log-refused` (§8.15.1 broken).
            Some(AdminOpcode::GetLogPage)
                if in_progress
                    && cmd.cdw10 as u8 == LogPageId::SanitizeStatus as u8
                    && self.quirks.has(Quirk::SanitizeStatusLogRefused) =>
            {
                false
            }
            // Set Features too: a host brings its queues up (Number of Queues) after a reset.
            Some(
                AdminOpcode::Identify | AdminOpcode::GetFeatures | AdminOpcode::SetFeatures | AdminOpcode::Sanitize,
            ) => true,
            // Error Information, SMART / Health Information and Sanitize Status.
            Some(AdminOpcode::GetLogPage) => {
                let lid = cmd.cdw10 as u8;
                lid == LogPageId::ErrorInformation as u8
                    || lid == LogPageId::SmartHealth as u8
                    || lid == LogPageId::SanitizeStatus as u8
            }
            _ => false,
        };
        (!allowed).then_some(status)
    }

    /// Whether one of the quirks `sanitize-admits-*` lets this restricted command run
    /// while a sanitize operation is in progress.
    fn admitted_by_quirk(&self, cmd: &Command, admin: bool) -> bool {
        let quirk = if admin {
            match AdminOpcode::from_u8(cmd.opcode) {
                Some(AdminOpcode::FirmwareImageDownload) => Quirk::SanitizeAdmitsFirmwareDownload,
                Some(AdminOpcode::NamespaceAttachment) => Quirk::SanitizeAdmitsNamespaceAttachment,
                _ => return false,
            }
        } else {
            match NvmOpcode::from_u8(cmd.opcode) {
                Some(NvmOpcode::Compare) => Quirk::SanitizeAdmitsCompare,
                Some(NvmOpcode::WriteUncorrectable) => Quirk::SanitizeAdmitsWriteUncorrectable,
                Some(NvmOpcode::WriteZeroes) => Quirk::SanitizeAdmitsWriteZeroes,
                Some(NvmOpcode::DatasetManagement) => Quirk::SanitizeAdmitsDatasetManagement,
                Some(NvmOpcode::Verify) => Quirk::SanitizeAdmitsVerify,
                _ => return false,
            }
        };
        self.quirks.has(quirk)
    }

    /// After a power cut: the running operation resumes, from its start, when the
    /// controller next runs a command (§8.15: a sanitize operation in progress continues
    /// across a power cycle).
    pub(super) fn sanitize_power_cut(&mut self) {
        if self.quirks.has(Quirk::SanitizeLostOnPowerCycle) && self.sanitize.running.take().is_some() {
            // Quirk: the operation is dropped, the data is still there (§8.15 broken).
            self.sanitize.status = Some(SanitizeStatus::Completed);
            return;
        }
        if let Some(run) = self.sanitize.running.as_mut() {
            run.started_ns = None;
            if self.quirks.has(Quirk::SanitizeStatusResetByPowerCycle) {
                // Quirk: the log forgets the operation that resumes (§5.14.1.16 broken).
                self.sanitize.status = Some(SanitizeStatus::NeverSanitized);
            }
        }
    }

    /// "Get Log Page – Sanitize Status Log" at `now_ns`.
    pub(super) fn sanitize_status_log(&self, now_ns: u64) -> SanitizeStatusLog {
        let state = &self.sanitize;
        let sprog = match &state.running {
            Some(run) => {
                let elapsed = run.started_ns.map_or(0, |s| now_ns.saturating_sub(s));
                // FFFFh means "not in progress": a late operation reports at most FFFEh.
                let done = (elapsed as u128 * 65536 / run.duration_ns.max(1) as u128).min(0xFFFE);
                done as u16
            }
            // Quirk `sprog-stuck-after-completion` (§5.14.1.16 broken).
            None if state.status.is_some() && self.quirks.has(Quirk::SprogStuckAfterCompletion) => 0xFFFE,
            None => SPROG_NOT_IN_PROGRESS,
        };
        // Quirk `sprog-ffff-in-progress` (§5.14.1.16 broken).
        let sprog = if state.running.is_some() && self.quirks.has(Quirk::SprogFfffInProgress) {
            SPROG_NOT_IN_PROGRESS
        } else {
            sprog
        };
        let mut log = SanitizeStatusLog { sprog, ..SanitizeStatusLog::default() };
        let status = if state.failed.is_some() {
            SanitizeStatus::Failed
        } else {
            state.status.unwrap_or(SanitizeStatus::NeverSanitized)
        };
        log.sstat = Sstat::new().with_status(status).with_global_data_erased(state.global_data_erased);
        // Quirk `scdw10-not-recorded` (§5.14.1.16 broken).
        log.scdw10 = if self.quirks.has(Quirk::Scdw10NotRecorded) { 0 } else { state.scdw10 };
        if let Some(model) = &self.profile.erase.sanitize {
            let seconds = |supported: bool, ms: u64| if supported { ms.div_ceil(1000) as u32 } else { 0 };
            // ETO: an Overwrite of 16 passes.
            log.eto = seconds(model.overwrite, model.overwrite_pass_ms * 16);
            log.etbe = seconds(model.block_erase, model.block_erase_ms);
            log.etce = seconds(model.crypto_erase, model.crypto_erase_ms);
            // No-deallocate takes no longer.
            log.etond = log.eto;
            log.etbend = log.etbe;
            log.etcend = log.etce;
        } else {
            log.eto = TIME_NOT_REPORTED;
        }
        log
    }
}
