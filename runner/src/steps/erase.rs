//! The erase steps: `format_erase` (Format NVM with a Secure Erase Setting, NVMe 1.4
//! §5.23) and `sanitize` (§5.24, §8.15), each judged on the data nvtest wrote before it.
//!
//! What an erase must leave is judged block by block on every block the host map knows
//! nvtest wrote (not a sample): **no block may still hold its data** — nvtest's blocks
//! carry a self-describing header, so any nvtest block read back (this namespace's or
//! another's, this size or another) is data from before the erase. That is the rule of
//! the erase (a failure). What the blocks read as instead is judged only where the spec
//! says it: after a sanitize that deallocates, DLFEAT's value; after an overwrite kept
//! allocated (NDAS), the pattern of the last pass — both "should", so a departure is a
//! warning. Namespaces outside a format's scope (FNA bits 0 and 1 clear) must keep every
//! block.
//!
//! A sanitize is followed through the Sanitize Status log until it completes: the
//! status, progress and SCDW10 are judged, the commands refused meanwhile may be probed,
//! the power may be cut midway (the operation must resume), and the Sanitize Operation
//! Completed event may be awaited. Its duration, measured on the target's clock to the
//! polling interval, is a figure of the case.

use nvme::device::Data;
use nvme::spec::firmware::firmware_image_download;
use nvme::spec::identify::{Cns, DeallocatedRead};
use nvme::spec::log::{get_log_page, LogPageId};
use nvme::spec::namespace::{format_nvm, SecureErase};
use nvme::spec::queue::AsyncEventCompletion;
use nvme::spec::sanitize::{
    final_overwrite_pattern, sanitize as sanitize_command, SanitizeAction, SanitizeCdw10, SanitizeStatus,
    SanitizeStatusLog, EVENT_SANITIZE_COMPLETED, EVENT_SANITIZE_COMPLETED_UNEXPECTED_DEALLOCATION,
    EVENT_TYPE_IO_COMMAND_SPECIFIC, SPROG_NOT_IN_PROGRESS, TIME_NOT_REPORTED,
};
use nvme::spec::{nvm, Status, Version};
use zerocopy::{FromBytes, IntoBytes};

use super::facts::{format_settings, NO_POWER_SWITCH};
use super::resolve::{self, NsTarget};
use super::{events, io, namespaces, CaseContext, StepError, StepResult};
use crate::data::judge::{judge_block, JudgeError};
use crate::data::Expectation;
use crate::load::{Figure, JobFigures};
use crate::rules;
use crate::suite::model::{EraseSetting, FormatErase, SanitizeOperation, SanitizeStep};
use crate::verdict::{Failure, Rule};

/// How long the power stays off when a sanitize is cut midway, and the grace beyond
/// CAP.TO the controller has to come back.
const READY_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// What the erased blocks must read as, beyond "not their old data".
#[derive(Clone, Copy, Debug)]
enum After {
    /// Anything (a Format's secure erase leaves the content indeterminate, §5.23).
    Anything,
    /// What DLFEAT reports for a deallocated block, when it reports a value.
    Deallocated,
    /// The 4-byte pattern repeated (little-endian, as OVRPAT is a dword).
    Pattern(u32),
}

/// The blocks nvtest wrote to member `i` (their data is recognisable): `(first, count)`.
fn written(ctx: &CaseContext<'_>, i: usize) -> Vec<(u64, u64)> {
    let nsid = ctx.set[i].nsid;
    match ctx.map.namespace(nsid) {
        Some(map) => {
            map.known().filter(|s| matches!(s.state, Expectation::Written { .. })).map(|s| (s.first, s.count)).collect()
        }
        None => Vec::new(),
    }
}

/// `format_erase`.
pub fn format_erase(ctx: &mut CaseContext<'_>, f: &FormatErase) -> StepResult {
    let id = &ctx.facts.identify;
    if !id.oacs.format_nvm() {
        return Err(StepError::Skip("Identify Controller OACS bit 1 (Format NVM) is clear".into()));
    }
    let fna = id.fna;
    let crypto = f.ses == EraseSetting::Crypto;
    if f.unsupported {
        return crypto_erase_refused(ctx, f);
    }
    if crypto && !fna.crypto_erase() {
        return Err(StepError::Skip(format!(
            "Identify Controller FNA bit 2 (Cryptographic Erase Supported) is clear: FNA {:02X}h",
            fna.into_bits()
        )));
    }
    let NsTarget::Member(i) = resolve::ns_one(ctx, &f.ns)? else {
        return Err(StepError::Error("format_erase needs a namespace of the set".into()));
    };
    let nsid = ctx.set[i].nsid;
    let before: Vec<Vec<(u64, u64)>> = (0..ctx.set.len()).map(|j| written(ctx, j)).collect();
    let ses = if crypto { SecureErase::Cryptographic } else { SecureErase::UserData };
    let settings = format_settings(&namespaces::identify_namespace(ctx, nsid)?).with_ses(ses);
    let what = format!(
        "Format NVM NSID {nsid} LBAF {} MSET {} SES {:03b}b ({})",
        settings.lbaf(),
        settings.mset() as u8,
        ses.into_bits(),
        if crypto { "Cryptographic Erase" } else { "User Data Erase" }
    );
    let c = ctx.admin(&what, format_nvm(nsid, settings), Data::None)?;
    ctx.expect(&what, &c, None)?;
    ctx.device.namespaces_changed()?;
    let all = fna.format_all_namespaces() || fna.secure_erase_all_namespaces();
    ctx.log.push(format!(
        "FNA {:02X}h: the erase reaches {}",
        fna.into_bits(),
        if all { "every namespace (bit 0 or 1 set)".to_string() } else { format!("NSID {nsid} only") }
    ));
    let mut warnings = Vec::new();
    for (j, segments) in before.iter().enumerate() {
        namespaces::refresh(ctx, j)?;
        if all || j == i {
            let rule = rules::format_secure_erase(crypto);
            judge_erased(ctx, j, segments, &what, rule, After::Anything, &mut warnings)?;
        } else {
            keeps_data(ctx, j, segments, &what)?;
        }
    }
    first_warning(warnings)
}

/// `format_erase` with `unsupported: true`: a controller with FNA bit 2 clear refuses a
/// Cryptographic Erase with Invalid Field in Command, and the data stays.
fn crypto_erase_refused(ctx: &mut CaseContext<'_>, f: &FormatErase) -> StepResult {
    let fna = ctx.facts.identify.fna;
    if fna.crypto_erase() {
        return Err(StepError::Skip(format!(
            "Identify Controller FNA bit 2 (Cryptographic Erase Supported) is set (FNA {:02X}h): the case is for \
             controllers without it",
            fna.into_bits()
        )));
    }
    let NsTarget::Member(i) = resolve::ns_one(ctx, &f.ns)? else {
        return Err(StepError::Error("format_erase needs a namespace of the set".into()));
    };
    let nsid = ctx.set[i].nsid;
    let segments = written(ctx, i);
    let settings = format_settings(&namespaces::identify_namespace(ctx, nsid)?).with_ses(SecureErase::Cryptographic);
    let what = format!(
        "Format NVM NSID {nsid} LBAF {} SES 010b (Cryptographic Erase), FNA {:02X}h (bit 2 clear)",
        settings.lbaf(),
        fna.into_bits()
    );
    let c = ctx.admin(&what, format_nvm(nsid, settings), Data::None)?;
    if !c.status().same_code(&Status::INVALID_FIELD) {
        ctx.device.namespaces_changed()?;
        ctx.map.reset_namespace(nsid);
        return Err(ctx.fail_rule(
            rules::format_crypto_unsupported(),
            what,
            c.status().to_string(),
            "Invalid Field in Command: SES 010b is an unsupported value where FNA bit 2 is clear",
        ));
    }
    keeps_data(ctx, i, &segments, &what)
}

/// Member `j`, outside the erase's scope, still holds every block nvtest wrote.
fn keeps_data(ctx: &mut CaseContext<'_>, j: usize, segments: &[(u64, u64)], what: &str) -> StepResult {
    for &(first, count) in segments {
        match io::read_and_judge(ctx, j, first, count) {
            Err(StepError::Fail(f)) => {
                return Err(StepError::Fail(Failure {
                    rule: rules::secure_erase_scope(),
                    sent: format!("{what}; then {}", f.sent),
                    observed: format!("NSID {} (outside the erase's scope): {}", ctx.set[j].nsid, f.observed),
                    expected: f.expected,
                }))
            }
            other => {
                other?;
            }
        }
    }
    Ok(())
}

/// Judges every block of `segments` of member `i` after an erase: none may hold data
/// written before it (`rule`'s failure); each should read as `after` says (a warning,
/// collected in `warnings`). The map then says the namespace holds no earlier data.
fn judge_erased(
    ctx: &mut CaseContext<'_>,
    i: usize,
    segments: &[(u64, u64)],
    erase: &str,
    rule: Rule,
    after: After,
    warnings: &mut Vec<Failure>,
) -> StepResult {
    let nsid = ctx.set[i].nsid;
    let dealloc = ctx.set[i].dealloc_read;
    let mut judged = 0u64;
    let mut old = 0u64;
    let mut first_old = None;
    let mut off = 0u64;
    let mut first_off = None;
    for &(first, count) in segments {
        io::read_blocks(ctx, i, first, count, &mut |lba, block| {
            judged += 1;
            if let Err(JudgeError::Mismatch(m)) =
                judge_block(block, nsid, lba, Expectation::Erased { dlfeat: false }, dealloc)
            {
                old += 1;
                first_old.get_or_insert(m);
            } else if let Some(departs) = departure(block, after, dealloc) {
                off += 1;
                first_off.get_or_insert((lba, departs));
            }
        })?;
    }
    ctx.log.push(format!(
        "NSID {nsid}: {judged} blocks nvtest wrote read back after the erase: {old} still hold data from before it, \
         {off} read otherwise than {}",
        describe_after(after, dealloc)
    ));
    if let Some(m) = first_old {
        return Err(StepError::Fail(Failure {
            rule,
            sent: format!("{erase}; then Read of every block nvtest wrote to NSID {nsid}"),
            observed: format!("{old} of {judged} blocks still hold data written before the erase; the first: {m}"),
            expected: "no block holds data written before the erase".into(),
        }));
    }
    if let Some((lba, departs)) = first_off {
        let no_deallocate = matches!(after, After::Pattern(_));
        warnings.push(Failure {
            rule: rules::sanitize_after_content(no_deallocate),
            sent: format!("{erase}; then Read of every block nvtest wrote to NSID {nsid}"),
            observed: format!("{off} of {judged} blocks read otherwise; the first, LBA {lba:#x}, {departs}"),
            expected: format!(
                "{} — a 'should' of the specification, so a warning, not a failure",
                describe_after(after, dealloc)
            ),
        });
    }
    let nsze = ctx.set[i].nsze;
    ctx.map.reset_namespace(nsid);
    ctx.map.namespace_mut(nsid).set(0, nsze, Expectation::Erased { dlfeat: false });
    Ok(())
}

/// How `block` departs from what `after` expects, or `None` when it does not.
fn departure(block: &[u8], after: After, dealloc: DeallocatedRead) -> Option<String> {
    let expected: Box<dyn Fn(usize) -> u8> = match (after, dealloc) {
        (After::Anything, _) => return None,
        (After::Deallocated, DeallocatedRead::Zeroes) => Box::new(|_| 0x00),
        (After::Deallocated, DeallocatedRead::Ones) => Box::new(|_| 0xFF),
        (After::Deallocated, _) => return None,
        (After::Pattern(p), _) => {
            let bytes = p.to_le_bytes();
            Box::new(move |k| bytes[k % 4])
        }
    };
    let at = block.iter().enumerate().position(|(k, b)| *b != expected(k))?;
    Some(format!("reads {:#04x} at byte {at} where {:#04x} was expected", block[at], expected(at)))
}

fn describe_after(after: After, dealloc: DeallocatedRead) -> String {
    match (after, dealloc) {
        (After::Anything, _) => "anything but their old data (indeterminate, §5.23)".into(),
        (After::Deallocated, DeallocatedRead::Zeroes) => "all zeroes (deallocated, DLFEAT 001b)".into(),
        (After::Deallocated, DeallocatedRead::Ones) => "all ones (deallocated, DLFEAT 010b)".into(),
        (After::Deallocated, _) => "anything (deallocated; DLFEAT reports no read behaviour)".into(),
        (After::Pattern(p), _) => format!("the overwrite pattern {p:08X}h of the last pass"),
    }
}

/// The first warning collected, as the step's outcome (or success when none).
fn first_warning(mut warnings: Vec<Failure>) -> StepResult {
    if warnings.is_empty() {
        Ok(())
    } else {
        Err(StepError::Warning(warnings.remove(0)))
    }
}

/// Sanitize and its log are NVMe 1.3 and later: the skip naming the version otherwise.
fn require_sanitize_version(ctx: &CaseContext<'_>) -> StepResult {
    let version = ctx.facts.version;
    if version < Version::V1_3 {
        return Err(StepError::Skip(format!(
            "Sanitize (SANICAP, the Sanitize Status log) is NVMe 1.3 and later: the controller reports version \
             {version}"
        )));
    }
    Ok(())
}

/// `sanitize`.
pub fn sanitize(ctx: &mut CaseContext<'_>, s: &SanitizeStep) -> StepResult {
    require_sanitize_version(ctx)?;
    let cap = ctx.facts.identify.sanicap;
    let (action, supported, bit) = match s.action {
        SanitizeOperation::CryptoErase => (SanitizeAction::CryptoErase, cap.ces(), "bit 0 (CES, Crypto Erase)"),
        SanitizeOperation::BlockErase => (SanitizeAction::BlockErase, cap.bes(), "bit 1 (BES, Block Erase)"),
        SanitizeOperation::Overwrite => (SanitizeAction::Overwrite, cap.ows(), "bit 2 (OWS, Overwrite)"),
    };
    if !supported {
        return Err(StepError::Skip(format!(
            "Identify Controller SANICAP {bit} is clear: SANICAP {:08X}h",
            cap.into_bits()
        )));
    }
    if s.no_deallocate && cap.ndi() {
        return Err(StepError::Skip(format!(
            "SANICAP bit 29 (NDI, No-Deallocate Inhibited) is set: No-Deallocate After Sanitize is refused \
             (SANICAP {:08X}h)",
            cap.into_bits()
        )));
    }
    if s.power_cycle && ctx.device.power_method().is_none() {
        return Err(StepError::Skip(NO_POWER_SWITCH.into()));
    }
    let passes = s.passes.unwrap_or(1);
    let pattern = s.pattern.unwrap_or(0x5AA5_C33C);
    let cdw10 = SanitizeCdw10::new()
        .with_sanact(action)
        .with_ause(s.ause)
        .with_ndas(s.no_deallocate)
        .with_owpass(if action == SanitizeAction::Overwrite { passes % 16 } else { 0 })
        .with_oipbp(s.invert);
    let before: Vec<Vec<(u64, u64)>> = (0..ctx.set.len()).map(|j| written(ctx, j)).collect();
    if s.expect_event && !ctx.events_armed {
        events::arm(ctx)?;
    }
    drain_events(ctx)?;
    let mut initial = status_log(ctx, "before the Sanitize")?;
    if initial.sstat.status() == SanitizeStatus::InProgress {
        // State left by an earlier run (or another host): that operation is waited for,
        // judged by nothing; this case's Sanitize would only get Sanitize In Progress.
        ctx.log.push("a sanitize operation was already in progress: waiting for it to end first".into());
        let limit = s.within_s.unwrap_or(3600);
        let (ended, _) = follow(ctx, "the sanitize operation found in progress", limit, None)?;
        initial = ended;
    }
    let estimate_s = estimate(&initial, action, s.no_deallocate);
    let mut what =
        format!("Sanitize SANACT {:03b}b ({}) NDAS {}", action.into_bits(), action.name(), s.no_deallocate as u8);
    if action == SanitizeAction::Overwrite {
        what += &format!(" OWPASS {passes} OIPBP {} OVRPAT {pattern:08X}h", s.invert as u8);
    }
    let c = ctx.admin(&what, sanitize_command(cdw10, pattern), Data::None)?;
    ctx.expect(&what, &c, None)?;

    let first = status_log(ctx, "just after the Sanitize")?;
    let running = first.sstat.status() == SanitizeStatus::InProgress;
    if (s.probe_restrictions || s.power_cycle) && !running {
        return Err(StepError::Skip(format!(
            "the sanitize operation had ended when nvtest first looked (SSTAT {:03b}b, SPROG {:04X}h): nothing \
             could be sent during it",
            first.sstat.status().into_bits(),
            first.sprog
        )));
    }
    if s.probe_restrictions {
        probe_restrictions(ctx, &what)?;
    }
    if s.power_cycle {
        power_cycle(ctx, &what, s.expect_event)?;
    }
    let limit_s = s.within_s.unwrap_or(match estimate_s {
        Some(e) => (e.saturating_mul(10)).max(60),
        None => 3600,
    });
    let (last, waited_ms) = follow(ctx, &what, limit_s, estimate_s)?;
    ctx.device.namespaces_changed()?;
    let after = match (action, s.no_deallocate) {
        (_, false) => After::Deallocated,
        // NODMMAS 01b: the media is not modified further after the operation.
        (SanitizeAction::Overwrite, true) if cap.nodmmas() == 1 => {
            After::Pattern(final_overwrite_pattern(pattern, passes, s.invert))
        }
        _ => After::Anything,
    };
    let mut warnings = Vec::new();
    let rule = if s.power_cycle { rules::sanitize_resumes() } else { rules::sanitize_erases_all() };
    for (j, segments) in before.iter().enumerate() {
        namespaces::refresh(ctx, j)?;
        judge_erased(ctx, j, segments, &what, rule.clone(), after, &mut warnings)?;
    }
    // The log and the event after the data: a drive that dropped the operation is
    // blamed for the data it left, not for the log that says so.
    judge_completed_log(ctx, &what, &last, cdw10)?;
    if s.expect_event {
        expect_completion_event(ctx, &what)?;
    }
    ctx.figures.push(JobFigures {
        job: "sanitize".into(),
        window_ns: 0,
        simulated_clock: false,
        ops: Vec::new(),
        extra: vec![
            Figure { name: "sanitize.completed_within_ms".into(), value: waited_ms as f64, unit: "ms" },
            Figure { name: "sanitize.estimate_s".into(), value: estimate_s.map_or(-1.0, |e| e as f64), unit: "s" },
        ],
    });
    first_warning(warnings)
}

/// `sanitize_failure_mode`: on a drive whose last sanitize operation failed (found so:
/// a host cannot make one fail), a Read must be refused with Sanitize Failed and
/// Identify must complete; then the way out: Exit Failure Mode must succeed where the
/// failed Sanitize set AUSE (SCDW10 bit 3) and end the restrictions; where it did not,
/// Exit Failure Mode is refused (Sanitize Failed; anything else is a warning, the text
/// being less plain there) and a new sanitize operation (the first SANICAP offers) must
/// complete and end them.
pub fn sanitize_failure_mode(ctx: &mut CaseContext<'_>) -> StepResult {
    require_sanitize_version(ctx)?;
    let cap = ctx.facts.identify.sanicap;
    if !(cap.ces() || cap.bes() || cap.ows()) {
        return Err(StepError::Skip(format!(
            "Identify Controller SANICAP {:08X}h offers no sanitize operation",
            cap.into_bits()
        )));
    }
    let log = status_log(ctx, "at the start")?;
    if log.sstat.status() != SanitizeStatus::Failed {
        return Err(StepError::Skip(format!(
            "the Sanitize Status log shows SSTAT {:03b}b: the drive is not in sanitize failure mode (only a drive \
             whose last operation failed is; a host cannot make one fail)",
            log.sstat.status().into_bits()
        )));
    }
    let failed = SanitizeCdw10::from_bits(log.scdw10);
    let mode = if failed.ause() { "unrestricted (AUSE set)" } else { "restricted (AUSE clear)" };
    ctx.log.push(format!("in sanitize failure mode, {mode}: SCDW10 {:#x}", log.scdw10));
    let fail = |ctx: &CaseContext<'_>, sent: String, observed: String, expected: &str| {
        ctx.fail_rule(rules::sanitize_failure_mode(), sent, observed, expected.to_string())
    };
    let Some(&nsid) = resolve::namespace_list(ctx, Cns::ActiveNamespaceList)?.first() else {
        return Err(StepError::Skip("no active namespace to send a Read to (Identify CNS 02h is empty)".into()));
    };
    let size = namespaces::identify_namespace(ctx, nsid)?.lba_data_size().unwrap_or(512).clamp(512, 65536) as usize;
    let mut buf = vec![0u8; size];
    let read = |ctx: &mut CaseContext<'_>, buf: &mut [u8], when: &str| -> StepResult<(String, Status)> {
        let what = format!("Read NSID {nsid} SLBA 0 NLB 0, {when}");
        let c = ctx.io(&what, nvm::read(nsid, 0, 0), Data::FromDevice(buf))?;
        Ok((what, c.status()))
    };
    let (what, got) = read(ctx, &mut buf, "in failure mode")?;
    if !got.same_code(&Status::SANITIZE_FAILED) {
        return Err(fail(
            ctx,
            what,
            got.to_string(),
            "Sanitize Failed (SCT 0h, SC 1Ch): I/O is restricted in failure mode",
        ));
    }
    let mut id = [0u8; 4096];
    let what = "Identify CNS 01h (Identify Controller), in failure mode";
    let c = ctx.admin(what, nvme::spec::identify::identify(Cns::Controller, 0, 0), Data::FromDevice(&mut id))?;
    if !c.status().is_success() {
        return Err(fail(
            ctx,
            what.into(),
            c.status().to_string(),
            "Successful Completion: Identify is allowed in failure mode",
        ));
    }
    let exit = "Sanitize SANACT 001b (Exit Failure Mode)";
    let c = ctx.admin(
        exit,
        sanitize_command(SanitizeCdw10::new().with_sanact(SanitizeAction::ExitFailureMode), 0),
        Data::None,
    )?;
    let mut warning = None;
    if failed.ause() {
        if !c.status().is_success() {
            return Err(fail(
                ctx,
                exit.into(),
                c.status().to_string(),
                "Successful Completion: AUSE was set, the mode is unrestricted",
            ));
        }
    } else {
        if !c.status().same_code(&Status::SANITIZE_FAILED) {
            warning = Some(Failure {
                rule: rules::sanitize_failure_mode(),
                sent: exit.into(),
                observed: c.status().to_string(),
                expected: "Sanitize Failed: the failed Sanitize left AUSE clear (restricted completion mode), which \
                           nvtest reads §8.15 as allowing only a new sanitize operation out — a reading, so a warning"
                    .into(),
            });
        }
        if !c.status().is_success() {
            let (action, name) = if cap.ces() {
                (SanitizeAction::CryptoErase, "Crypto Erase")
            } else if cap.bes() {
                (SanitizeAction::BlockErase, "Block Erase")
            } else {
                (SanitizeAction::Overwrite, "Overwrite, 1 pass")
            };
            let what =
                format!("Sanitize SANACT {:03b}b ({name}), to leave restricted failure mode", action.into_bits());
            let cdw10 = SanitizeCdw10::new().with_sanact(action).with_owpass(1);
            let c = ctx.admin(&what, sanitize_command(cdw10, 0x5AA5_C33C), Data::None)?;
            ctx.expect(&what, &c, None)?;
            let estimate_s = estimate(&status_log(ctx, "just after the Sanitize")?, action, false);
            let limit_s = estimate_s.map_or(3600, |e| e.saturating_mul(10).max(60));
            follow(ctx, &what, limit_s, estimate_s)?;
            ctx.device.namespaces_changed()?;
        }
    }
    let (what, got) = read(ctx, &mut buf, "after leaving failure mode")?;
    if got.same_code(&Status::SANITIZE_FAILED) {
        return Err(fail(ctx, what, got.to_string(), "no longer Sanitize Failed: the controller left failure mode"));
    }
    match warning {
        Some(w) => Err(StepError::Warning(w)),
        None => Ok(()),
    }
}

/// The Sanitize Status log, requiring the read to succeed.
fn status_log(ctx: &mut CaseContext<'_>, when: &str) -> StepResult<SanitizeStatusLog> {
    let mut log = SanitizeStatusLog::default();
    let what = format!("Get Log Page 81h (Sanitize Status) {when}");
    let cmd = get_log_page(LogPageId::SanitizeStatus, 0, 512, 0, false).map_err(|e| StepError::Error(e.to_string()))?;
    let c = ctx.admin(&what, cmd, Data::FromDevice(log.as_mut_bytes()))?;
    if !c.status().is_success() {
        return Err(ctx.fail_rule(
            rules::sanitize_status_log(),
            what,
            c.status().to_string(),
            "the Sanitize Status log of a controller whose SANICAP reports an operation",
        ));
    }
    let log = SanitizeStatusLog::read_from_bytes(log.as_bytes()).map_err(|_| StepError::Error("log size".into()))?;
    ctx.log.push(format!(
        "  SSTAT {:#06x} (status {:03b}b, GDE {}), SPROG {:04X}h, SCDW10 {:#x}",
        log.sstat.into_bits(),
        log.sstat.status().into_bits(),
        log.sstat.global_data_erased() as u8,
        log.sprog,
        log.scdw10
    ));
    Ok(log)
}

/// The estimated time of the operation, in seconds, when the log gives one.
fn estimate(log: &SanitizeStatusLog, action: SanitizeAction, no_deallocate: bool) -> Option<u64> {
    let field = match (action, no_deallocate) {
        // ETO is for an Overwrite of 16 passes: an upper bound for fewer.
        (SanitizeAction::Overwrite, false) => log.eto,
        (SanitizeAction::Overwrite, true) => log.etond,
        (SanitizeAction::BlockErase, false) => log.etbe,
        (SanitizeAction::BlockErase, true) => log.etbend,
        (SanitizeAction::CryptoErase, false) => log.etce,
        (SanitizeAction::CryptoErase, true) => log.etcend,
        _ => TIME_NOT_REPORTED,
    };
    (field != TIME_NOT_REPORTED && field != 0).then_some(field as u64)
}

/// While the operation runs, every command §8.15 restricts that the controller supports
/// is sent once and must be refused with Sanitize In Progress: the I/O commands that
/// touch user data (Read, Write, and as ONCS advertises them Compare, Write
/// Uncorrectable, Write Zeroes, Dataset Management, Verify) and the admin commands that
/// change what the namespaces hold (Format NVM; as OACS advertises them Firmware Image
/// Download and Namespace Attachment). Each is harmless should the drive run it (one
/// block, an image never committed, a namespace already attached). Identify must run.
fn probe_restrictions(ctx: &mut CaseContext<'_>, sanitize: &str) -> StepResult {
    let nsid = ctx.set.first().map(|e| e.nsid).ok_or_else(|| StepError::Error("no namespace in the set".into()))?;
    let size = ctx.set[0].block_size.max(512) as usize;
    let (oncs, oacs) = (ctx.facts.identify.oncs, ctx.facts.identify.oacs);
    let mut probed = Vec::new();
    let mut buf = vec![0u8; size];
    let what = format!("Read NSID {nsid} SLBA 0 NLB 0, during the sanitize");
    let c = ctx.io(&what, nvm::read(nsid, 0, 0), Data::FromDevice(&mut buf))?;
    refused(ctx, sanitize, &what, c.status())?;
    probed.push("Read");
    let junk = vec![0xA5u8; size];
    let what = format!("Write NSID {nsid} SLBA 0 NLB 0, during the sanitize");
    let c = ctx.io(&what, nvm::write(nsid, 0, 0, false), Data::ToDevice(&junk))?;
    refused(ctx, sanitize, &what, c.status())?;
    probed.push("Write");
    if oncs.compare() {
        let what = format!("Compare NSID {nsid} SLBA 0 NLB 0, during the sanitize");
        let c = ctx.io(&what, nvm::compare(nsid, 0, 0), Data::ToDevice(&junk))?;
        refused(ctx, sanitize, &what, c.status())?;
        probed.push("Compare");
    }
    if oncs.write_uncorrectable() {
        let what = format!("Write Uncorrectable NSID {nsid} SLBA 0 NLB 0, during the sanitize");
        let c = ctx.io(&what, nvm::write_uncorrectable(nsid, 0, 0), Data::None)?;
        refused(ctx, sanitize, &what, c.status())?;
        probed.push("Write Uncorrectable");
    }
    if oncs.write_zeroes() {
        let what = format!("Write Zeroes NSID {nsid} SLBA 0 NLB 0, during the sanitize");
        let c = ctx.io(&what, nvm::write_zeroes(nsid, 0, 0, false), Data::None)?;
        refused(ctx, sanitize, &what, c.status())?;
        probed.push("Write Zeroes");
    }
    if oncs.dataset_management() {
        let what = format!("Dataset Management AD NSID {nsid} range 0+1, during the sanitize");
        let cmd = nvm::dataset_management(nsid, 1, nvm::DsmAttributes::new().with_ad(true))
            .map_err(|e| StepError::Error(e.to_string()))?;
        let ranges = nvm::DsmRange::encode_list(&[nvm::DsmRange::new(0, 1)]);
        let c = ctx.io(&what, cmd, Data::ToDevice(&ranges))?;
        refused(ctx, sanitize, &what, c.status())?;
        probed.push("Dataset Management");
    }
    if oncs.verify() {
        let what = format!("Verify NSID {nsid} SLBA 0 NLB 0, during the sanitize");
        let c = ctx.io(&what, nvm::verify(nsid, 0, 0), Data::None)?;
        refused(ctx, sanitize, &what, c.status())?;
        probed.push("Verify");
    }
    let settings = format_settings(&namespaces::identify_namespace(ctx, nsid)?);
    let what = format!("Format NVM NSID {nsid} SES 000b, during the sanitize");
    let c = ctx.admin(&what, format_nvm(nsid, settings), Data::None)?;
    refused(ctx, sanitize, &what, c.status())?;
    probed.push("Format NVM");
    if oacs.firmware() {
        let chunk = [0u8; 4096];
        let what = "Firmware Image Download of 4096 bytes at offset 0, during the sanitize";
        let cmd = firmware_image_download(4096, 0).ok_or_else(|| StepError::Error("firmware download".into()))?;
        let c = ctx.admin(what, cmd, Data::ToDevice(&chunk))?;
        refused(ctx, sanitize, what, c.status())?;
        probed.push("Firmware Image Download");
    }
    if oacs.namespace_management() {
        let cntlid = ctx.facts.cntlid;
        let what = format!(
            "Namespace Attachment attach NSID {nsid} (attached already) to CNTLID {cntlid}, during the sanitize"
        );
        let c = namespaces::send_attachment_to(ctx, &what, nsid, true, &[cntlid])?;
        refused(ctx, sanitize, &what, c.status())?;
        probed.push("Namespace Attachment");
    }
    ctx.log.push(format!("refused with Sanitize In Progress: {}", probed.join(", ")));
    let mut id = [0u8; 4096];
    let what = "Identify CNS 01h (Identify Controller), during the sanitize";
    let c = ctx.admin(what, nvme::spec::identify::identify(Cns::Controller, 0, 0), Data::FromDevice(&mut id))?;
    if !c.status().is_success() {
        return Err(ctx.fail_rule(
            rules::sanitize_restrictions(),
            format!("{sanitize}; then {what}"),
            c.status().to_string(),
            "Successful Completion: Identify is allowed while a sanitize operation is in progress",
        ));
    }
    Ok(())
}

/// A command sent during the operation must have been refused with Sanitize In Progress.
fn refused(ctx: &CaseContext<'_>, sanitize: &str, what: &str, got: Status) -> StepResult {
    if got.same_code(&Status::SANITIZE_IN_PROGRESS) {
        return Ok(());
    }
    Err(ctx.fail_rule(
        rules::sanitize_restrictions(),
        format!("{sanitize}; then {what}"),
        got.to_string(),
        "Sanitize In Progress (SCT 0h, SC 1Dh)",
    ))
}

/// Cuts the power while the operation runs and brings the controller back.
fn power_cycle(ctx: &mut CaseContext<'_>, sanitize: &str, rearm: bool) -> StepResult {
    ctx.log.push(format!("power cut during the sanitize ({sanitize})"));
    ctx.device.power_off(ctx.seed)?;
    let on = ctx.device.power_on(READY_GRACE)?;
    if let Some(ns) = on.ready_ns {
        ctx.log.push(format!("power on: controller ready after {:.1} ms", ns as f64 / 1e6));
    }
    ctx.device.namespaces_changed()?;
    if rearm {
        ctx.events_armed = false;
        events::arm(ctx)?;
    }
    let log = status_log(ctx, "after the power cycle")?;
    match log.sstat.status() {
        SanitizeStatus::InProgress => Ok(()),
        // Completed while the power was off or at once after: the data judgement says
        // whether it really did.
        SanitizeStatus::Completed | SanitizeStatus::CompletedWithDeallocation => Ok(()),
        other => Err(ctx.fail_rule(
            rules::sanitize_resumes(),
            format!("{sanitize}; power cut and restored; then Get Log Page 81h"),
            format!("SSTAT status {:03b}b ({other:?})", other.into_bits()),
            "SSTAT 010b (the operation resumed) or 001b (it has completed)",
        )),
    }
}

/// Polls the Sanitize Status log until the operation ends, waiting between reads.
/// Returns the last log and the time waited (ms, on the target's clock).
fn follow(
    ctx: &mut CaseContext<'_>,
    sanitize: &str,
    limit_s: u64,
    estimate_s: Option<u64>,
) -> StepResult<(SanitizeStatusLog, u64)> {
    let interval = estimate_s.map_or(1000, |e| (e * 1000 / 20).clamp(10, 1000));
    let mut waited = 0u64;
    let mut last_sprog = 0u16;
    let mut polls = 0u32;
    loop {
        let mut log = SanitizeStatusLog::default();
        let cmd =
            get_log_page(LogPageId::SanitizeStatus, 0, 512, 0, false).map_err(|e| StepError::Error(e.to_string()))?;
        // Not logged each time: a long operation is polled many times.
        let c = ctx.device.admin(cmd, Data::FromDevice(log.as_mut_bytes()))?;
        polls += 1;
        if !c.status().is_success() {
            return Err(ctx.fail_rule(
                rules::sanitize_status_log(),
                format!("{sanitize}; then Get Log Page 81h while it runs"),
                c.status().to_string(),
                "the Sanitize Status log, readable while a sanitize operation is in progress",
            ));
        }
        match log.sstat.status() {
            SanitizeStatus::InProgress => {
                if log.sprog == SPROG_NOT_IN_PROGRESS {
                    return Err(ctx.fail_rule(
                        rules::sanitize_status_log(),
                        format!("{sanitize}; then Get Log Page 81h"),
                        "SSTAT 010b (in progress) with SPROG FFFFh".to_string(),
                        "SPROG the fraction completed (FFFFh only when no operation is in progress)",
                    ));
                }
                last_sprog = log.sprog;
            }
            SanitizeStatus::Completed | SanitizeStatus::CompletedWithDeallocation => {
                ctx.log.push(format!(
                    "the sanitize operation completed within {waited} ms ({polls} reads of the status log, the last \
                     SPROG seen in progress {last_sprog:04X}h)"
                ));
                return Ok((log, waited));
            }
            SanitizeStatus::Failed => {
                return Err(ctx.fail_rule(
                    rules::sanitize_erases_all(),
                    format!("{sanitize}; then Get Log Page 81h"),
                    "SSTAT 011b: the sanitize operation failed".to_string(),
                    "the operation completes (SSTAT 001b)",
                ))
            }
            other => {
                return Err(ctx.fail_rule(
                    rules::sanitize_status_log(),
                    format!("{sanitize}; then Get Log Page 81h"),
                    format!("SSTAT status {:03b}b ({other:?}) after a Sanitize that succeeded", other.into_bits()),
                    "SSTAT 010b (in progress) or 001b (completed)",
                ))
            }
        }
        if waited >= limit_s * 1000 {
            return Err(StepError::Warning(Failure {
                rule: rules::sanitize_completes(),
                sent: format!("{sanitize}; then Get Log Page 81h every {interval} ms"),
                observed: format!(
                    "still in progress after {} s (SPROG {last_sprog:04X}h); the drive estimated {}",
                    waited / 1000,
                    estimate_s.map_or("no time".to_string(), |e| format!("{e} s"))
                ),
                expected: format!("completion within {limit_s} s"),
            }));
        }
        ctx.device.wait(interval)?;
        waited += interval;
    }
}

/// The log after completion: SPROG FFFFh, SCDW10 as sent, Global Data Erased set.
fn judge_completed_log(
    ctx: &CaseContext<'_>,
    sanitize: &str,
    log: &SanitizeStatusLog,
    cdw10: SanitizeCdw10,
) -> StepResult {
    let fail = |observed: String, expected: &str| {
        Err(ctx.fail_rule(
            rules::sanitize_status_log(),
            format!("{sanitize}; then Get Log Page 81h once it completed"),
            observed,
            expected.to_string(),
        ))
    };
    if log.sprog != SPROG_NOT_IN_PROGRESS {
        return fail(format!("SPROG {:04X}h", log.sprog), "SPROG FFFFh (no operation in progress)");
    }
    // SCDW10 bits 09:00 are the fields Sanitize defines.
    if log.scdw10 & 0x3FF != cdw10.into_bits() & 0x3FF {
        return fail(
            format!("SCDW10 {:#x}", log.scdw10),
            &format!("SCDW10 {:#x}, the Command Dword 10 of the Sanitize command", cdw10.into_bits()),
        );
    }
    if !log.sstat.global_data_erased() {
        return fail(
            "SSTAT bit 8 (Global Data Erased) clear, though nothing was written since".into(),
            "Global Data Erased set",
        );
    }
    Ok(())
}

/// Events completed before the operation (or since the arming) are not its event.
fn drain_events(ctx: &mut CaseContext<'_>) -> StepResult {
    if ctx.events_armed {
        for c in ctx.device.take_async_events()? {
            ctx.log.push(format!("Asynchronous Event (before the sanitize) DW0 {:#x}", c.dw0));
        }
    }
    Ok(())
}

/// The Sanitize Operation Completed event (I/O Command Specific status 01h, or 02h
/// With Unexpected Deallocation), within a few polls of the completion.
fn expect_completion_event(ctx: &mut CaseContext<'_>, sanitize: &str) -> StepResult {
    let completed = |e: &AsyncEventCompletion| {
        e.event_type == EVENT_TYPE_IO_COMMAND_SPECIFIC
            && [EVENT_SANITIZE_COMPLETED, EVENT_SANITIZE_COMPLETED_UNEXPECTED_DEALLOCATION].contains(&e.info)
            && e.log_page == LogPageId::SanitizeStatus as u8
    };
    let Err(seen) = events::await_event(ctx, &completed)? else { return Ok(()) };
    Err(ctx.fail_rule(
        rules::sanitize_event(),
        format!("{sanitize}, an Asynchronous Event Request outstanding; then waited 1 s after completion"),
        if seen.is_empty() { "no asynchronous event".to_string() } else { format!("events {}", seen.join(", ")) },
        "an event of type 110b (I/O Command Specific), information 01h (Sanitize Operation Completed), log page 81h",
    ))
}
