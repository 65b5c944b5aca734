//! The firmware steps: `firmware_update` (Firmware Image Download, NVMe 1.4 §5.13, and
//! Firmware Commit, §5.12, with one commit action, judged on the Firmware Slot
//! Information log and on Identify Controller FR read from the drive) and
//! `firmware_errors` (the commit and download statuses §5.12 and §5.13 assign).
//!
//! The image is nvtest's test image ([`nvme::fw_image`]) with a revision of its own. A
//! drive that refuses it (Invalid Firmware Image — every real drive) skips the cases that
//! need an image it accepts, saying so: activating firmware on a lab's drive needs the
//! vendor's image. After an activation the revision is read with Identify from the
//! drive itself (never a kernel's cached copy), and the slot log must agree.

use nvme::device::Data;
use nvme::fw_image;
use nvme::spec::features::{get_features, set_features, AsyncEventConfiguration, FeatureId, Select};
use nvme::spec::firmware::NOTICE_FIRMWARE_ACTIVATION_STARTING;
use nvme::spec::firmware::{
    firmware_commit, firmware_image_download, max_activation_ms, update_granularity, CommitAction,
};
use nvme::spec::identify::{identify, Cns, IdentifyController};
use nvme::spec::log::{get_log_page, FirmwareSlotLog, LogPageId};
use nvme::spec::queue::{event_type, AsyncEventCompletion};
use nvme::spec::registers::{offset, Csts};
use nvme::spec::Status;
use zerocopy::{FromZeros, IntoBytes};

use super::{CaseContext, Failure, StepError, StepResult};
use crate::rules;
use crate::suite::model::{FirmwareAction, FirmwareUpdate};

/// A revision for this case's test image: `NVTF` and four hex digits drawn from the
/// seed, other than every revision in `taken` (FR and the slots' FRS), so that an FR
/// left unchanged by the activation cannot pass for the new one.
fn test_revision(seed: u64, taken: &[String]) -> String {
    (0..=taken.len() as u64)
        .map(|k| format!("NVTF{:04X}", seed.wrapping_add(k) & 0xFFFF))
        .find(|r| !taken.contains(r))
        .expect("one of len + 1 candidates is free")
}

/// OACS bit 2, or the skip naming it.
fn require_firmware_commands(ctx: &CaseContext<'_>) -> StepResult {
    if ctx.facts.identify.oacs.firmware() {
        Ok(())
    } else {
        Err(StepError::Skip(
            "Identify Controller OACS bit 2 (Firmware Commit and Firmware Image Download) is clear".into(),
        ))
    }
}

/// The Firmware Slot Information log.
fn slot_log(ctx: &mut CaseContext<'_>, when: &str) -> StepResult<FirmwareSlotLog> {
    let mut log = FirmwareSlotLog::new_zeroed();
    let what = format!("Get Log Page 03h (Firmware Slot Information) {when}");
    let cmd = get_log_page(LogPageId::FirmwareSlot, 0xFFFF_FFFF, 512, 0, false)
        .map_err(|e| StepError::Error(e.to_string()))?;
    let c = ctx.admin(&what, cmd, Data::FromDevice(log.as_mut_bytes()))?;
    ctx.require_success(&what, &c)?;
    ctx.log.push(format!(
        "  AFI active slot {}, next {}; FRS {}",
        log.afi.active_slot(),
        log.afi.next_slot(),
        (1..=7).map(|s| log.revision(s).map_or("-".to_string(), |r| r.text)).collect::<Vec<_>>().join(", ")
    ));
    Ok(log)
}

/// Identify Controller FR, read from the drive.
fn running_revision(ctx: &mut CaseContext<'_>, when: &str) -> StepResult<String> {
    let mut id = IdentifyController::new_zeroed();
    let what = format!("Identify CNS 01h (Identify Controller) {when}");
    let c = ctx.admin(&what, identify(Cns::Controller, 0, 0), Data::FromDevice(id.as_mut_bytes()))?;
    ctx.require_success(&what, &c)?;
    let fr = id.firmware().text;
    ctx.log.push(format!("  FR {fr}"));
    Ok(fr)
}

/// Downloads `image` in pieces of FWUG (4 KiB when FWUG gives none), requiring success.
fn download(ctx: &mut CaseContext<'_>, image: &[u8]) -> StepResult {
    let piece = update_granularity(ctx.facts.identify.fwug).unwrap_or(4096).min(1 << 20) as usize;
    for (k, chunk) in image.chunks(piece).enumerate() {
        let at = (k * piece) as u64;
        let cmd = firmware_image_download(chunk.len() as u32, at)
            .ok_or_else(|| StepError::Error("a test image piece is not whole dwords".into()))?;
        let what = format!("Firmware Image Download {} bytes at offset {at}", chunk.len());
        let c = ctx.admin(&what, cmd, Data::ToDevice(chunk))?;
        ctx.require_success(&what, &c)?;
    }
    Ok(())
}

/// The slot a case writes: the first slot neither read-only nor running, else the
/// running slot when it is writable (a drive of two slots whose second runs).
fn writable_slot(ctx: &CaseContext<'_>, log: &FirmwareSlotLog) -> StepResult<u8> {
    let frmw = ctx.facts.identify.frmw;
    let writable = |s: &u8| !(*s == 1 && frmw.slot1_read_only());
    let active = log.afi.active_slot();
    (1..=frmw.slots()).filter(writable).find(|s| *s != active).or((1..=frmw.slots()).find(|s| writable(s))).ok_or_else(
        || {
            StepError::Skip(format!(
                "no firmware slot to write: FRMW reports {} slot(s), slot 1 read-only {}",
                frmw.slots(),
                frmw.slot1_read_only()
            ))
        },
    )
}

/// Commits, turning a refusal of the image into the skip or error it is.
fn commit(ctx: &mut CaseContext<'_>, slot: u8, action: CommitAction, what: &str) -> StepResult<Status> {
    let c = ctx.admin(what, firmware_commit(slot, action), Data::None)?;
    refused_image(ctx, c.status(), action, what)
}

/// The commit's status; or, for Invalid Firmware Image, the skip a refusal of nvtest's
/// test image means, or the error a refusal of the vendor's image is (the image given
/// may be another model's: nothing says the drive is wrong).
fn refused_image(ctx: &CaseContext<'_>, status: Status, action: CommitAction, what: &str) -> StepResult<Status> {
    if !(status.same_code(&Status::INVALID_FIRMWARE_IMAGE) && action.replaces()) {
        return Ok(status);
    }
    if let Some(image) = &ctx.firmware {
        return Err(StepError::Error(format!(
            "the drive refused the image given with --firmware {} ({what} -> Invalid Firmware Image): is it this \
             model's image, whole?",
            image.path.display()
        )));
    }
    Err(StepError::Skip(format!(
        "the drive refused nvtest's test image ({what} -> Invalid Firmware Image): activating firmware needs an \
         image this drive accepts (give the vendor's with --firmware FILE)"
    )))
}

/// A firmware image the user gave (`--firmware FILE`), read and checked once, before
/// any device is opened.
#[derive(Debug)]
pub struct VendorImage {
    pub path: std::path::PathBuf,
    pub bytes: Vec<u8>,
}

impl VendorImage {
    /// Reads `path`: an image Firmware Image Download can carry (whole dwords, §5.13 NUMD).
    pub fn load(path: &std::path::Path) -> Result<VendorImage, String> {
        let shown = path.display();
        let bytes = std::fs::read(path).map_err(|e| format!("--firmware {shown}: cannot read it: {e}"))?;
        if bytes.is_empty() {
            return Err(format!("--firmware {shown}: the file is empty"));
        }
        if !bytes.len().is_multiple_of(4) {
            return Err(format!(
                "--firmware {shown}: {} bytes, not whole dwords (Firmware Image Download carries dwords: NVMe 1.4 \
                 §5.13 NUMD)",
                bytes.len()
            ));
        }
        if bytes.len() as u64 > 4 * (u32::MAX as u64) {
            return Err(format!("--firmware {shown}: {} bytes, beyond what OFST can address", bytes.len()));
        }
        Ok(VendorImage { path: path.to_path_buf(), bytes })
    }
}

/// The reset after which a committed image runs.
#[derive(Clone, Copy, Debug)]
enum Reset {
    /// A Controller Reset (CC.EN 1 → 0 → 1), a Controller Level Reset.
    Controller,
    /// The reset named (a Conventional or NVM Subsystem Reset), done by a power cycle:
    /// both reset the whole NVM subsystem.
    PowerCycle(&'static str),
}

impl Reset {
    fn name(&self) -> String {
        match self {
            Reset::Controller => "a Controller Reset".into(),
            Reset::PowerCycle(name) => format!("{name} (a power cycle)"),
        }
    }
}

/// How long beyond CAP.TO a controller may take to be ready after the power cycle.
const POWER_ON_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// `firmware_update`.
pub fn firmware_update(ctx: &mut CaseContext<'_>, f: &FirmwareUpdate) -> StepResult {
    require_firmware_commands(ctx)?;
    let frmw = ctx.facts.identify.frmw;
    let now = f.action == FirmwareAction::ReplaceAndActivateNow;
    if now && !frmw.activation_without_reset() {
        return Err(StepError::Skip(
            "Identify Controller FRMW bit 4 (firmware activation without reset) is clear".into(),
        ));
    }
    let load = super::firmware_load::build(ctx, f)?;
    let before = slot_log(ctx, "before")?;
    let old_fr = running_revision(ctx, "before")?;
    let slot = writable_slot(ctx, &before)?;
    // The vendor's image (its revision known once a slot holds it), or a test image of a
    // revision no slot holds.
    let (image, expected) = match &ctx.firmware {
        Some(v) => {
            ctx.log.push(format!("image: {} ({} bytes, --firmware)", v.path.display(), v.bytes.len()));
            (v.bytes.clone(), None)
        }
        None => {
            let mut taken: Vec<String> = (1..=7).filter_map(|s| before.revision(s)).map(|r| r.text).collect();
            taken.push(old_fr.clone());
            let revision = test_revision(ctx.seed, &taken);
            (fw_image::build(&revision, 64 * 1024), Some(revision))
        }
    };
    download(ctx, &image)?;
    let before_load = match &load {
        Some(l) => Some(super::firmware_load::measure(ctx, l, "before")?),
        None => None,
    };
    let action = match f.action {
        FirmwareAction::Replace => CommitAction::Replace,
        FirmwareAction::ReplaceAndActivateAtReset => CommitAction::ReplaceAndActivateAtReset,
        // The slot gets the image first, then the existing image is activated.
        FirmwareAction::ActivateAtReset => {
            let what = format!("Firmware Commit FS {slot} CA 000b (replace)");
            let status = commit(ctx, slot, CommitAction::Replace, &what)?;
            expect_success(ctx, &what, status)?;
            CommitAction::ActivateAtReset
        }
        FirmwareAction::ReplaceAndActivateNow => CommitAction::ReplaceAndActivateNow,
    };
    let notice = now && ctx.facts.identify.oaes.firmware_activation_notices();
    if notice {
        enable_activation_notices(ctx)?;
    }
    let what = format!("Firmware Commit FS {slot} CA {:03b}b", action.into_bits());
    let (status, across) = match &load {
        Some(l) => {
            let (status, outcome) = super::firmware_load::commit_under_load(ctx, l, slot, action)?;
            (refused_image(ctx, status, action, &what)?, Some(outcome))
        }
        None => (commit(ctx, slot, action, &what)?, None),
    };
    if action != CommitAction::Replace && status.same_code(&Status::FIRMWARE_ACTIVATION_PROHIBITED) {
        return Err(StepError::Skip(format!(
            "{what} -> {status}: the drive does not let this image run (a downgrade, say: §5.12 leaves the reasons \
             to the vendor); nothing about activation can be judged"
        )));
    }
    let mut at_reset = matches!(action, CommitAction::ReplaceAndActivateAtReset | CommitAction::ActivateAtReset)
        .then_some(Reset::Controller);
    if now {
        // The image may need a reset after all: the statuses naming the reset (§5.12).
        let needs_reset = [
            (Status::FIRMWARE_ACTIVATION_REQUIRES_CONVENTIONAL_RESET, Reset::PowerCycle("a Conventional Reset")),
            (Status::FIRMWARE_ACTIVATION_REQUIRES_NVM_SUBSYSTEM_RESET, Reset::PowerCycle("an NVM Subsystem Reset")),
            (Status::FIRMWARE_ACTIVATION_REQUIRES_CONTROLLER_LEVEL_RESET, Reset::Controller),
            (Status::FIRMWARE_ACTIVATION_REQUIRES_MAX_TIME_VIOLATION, Reset::Controller),
        ];
        if let Some((_, reset)) = needs_reset.iter().find(|(s, _)| s.same_code(&status)) {
            ctx.log.push(format!("the commit reported {status}: the image runs after {}", reset.name()));
            if let Reset::PowerCycle(name) = reset {
                if ctx.device.power_method().is_none() {
                    return Err(StepError::Skip(format!(
                        "{what} -> {status}: the image runs after {name}, which nvtest performs by a power cycle, and \
                         this target has no power switch"
                    )));
                }
            }
            at_reset = Some(*reset);
        } else {
            expect_success(ctx, &what, status)?;
            match (&load, &before_load, &across) {
                (Some(l), Some(b), Some(a)) => super::firmware_load::judge_across(ctx, l, &what, b, a)?,
                _ => activation_within_mtfa(ctx, &what)?,
            }
            if notice {
                expect_activation_notice(ctx, &what)?;
            }
        }
    } else {
        expect_success(ctx, &what, status)?;
    }
    let after = slot_log(ctx, "after the commit")?;
    let frs = after.revision(slot).map(|r| r.text);
    let revision = match (&expected, frs) {
        (Some(e), Some(f)) if *e == f => f,
        // The vendor's image: its revision is what the slot now reports.
        (None, Some(f)) => {
            ctx.log.push(format!("FRS{slot} {f}: the revision of the image given"));
            if f == old_fr {
                ctx.log.push(format!(
                    "FR {old_fr} runs already: FR cannot show the activation, AFI's active slot must (a revision \
                     other than the running one proves more)"
                ));
            }
            f
        }
        (_, frs) => {
            return Err(ctx.fail_rule(
                rules::firmware_slot_log(),
                what,
                format!("FRS{slot} {}", frs.unwrap_or_else(|| "empty".into())),
                format!(
                    "FRS{slot} {}, the revision of the image committed",
                    expected.as_deref().unwrap_or("a revision")
                ),
            ))
        }
    };
    if let Some(reset) = at_reset {
        if after.afi.next_slot() != slot {
            return Err(ctx.fail_rule(
                rules::firmware_slot_log(),
                what,
                format!("AFI next slot {}", after.afi.next_slot()),
                format!("AFI bits 6:4 = {slot}, the slot activated at the next reset"),
            ));
        }
        if running_revision(ctx, "before the reset")? != old_fr {
            return Err(ctx.fail_rule(
                rules::firmware_activation(),
                what,
                "FR changed before any reset".to_string(),
                format!("FR {old_fr} until the reset that activates the image"),
            ));
        }
        match reset {
            Reset::Controller => {
                ctx.device.controller_reset()?;
                ctx.log.push("Controller Reset (activates the committed image)".into());
            }
            Reset::PowerCycle(name) => {
                // A normal shutdown first: the data written before must survive.
                let shutdown = ctx.device.shutdown_then_power_off(ctx.seed)?;
                ctx.device.power_on(POWER_ON_GRACE)?;
                ctx.device.namespaces_changed()?;
                ctx.log.push(format!("normal shutdown ({shutdown:?}), power off and on: {name} (activates the image)"));
            }
        }
    } else if f.action == FirmwareAction::Replace {
        let fr = running_revision(ctx, "after the commit")?;
        if fr != old_fr || after.afi.active_slot() != before.afi.active_slot() {
            return Err(ctx.fail_rule(
                rules::firmware_activation(),
                what,
                format!("FR {fr}, AFI active slot {}", after.afi.active_slot()),
                format!("FR {old_fr} and slot {} still running: CA 000b activates nothing", before.afi.active_slot()),
            ));
        }
        return Ok(());
    }
    let fr = running_revision(ctx, "after the activation")?;
    let log = slot_log(ctx, "after the activation")?;
    if fr != revision || log.afi.active_slot() != slot {
        return Err(ctx.fail_rule(
            rules::firmware_activation(),
            format!("{what}{}", at_reset.map_or(String::new(), |r| format!("; then {}", r.name()))),
            format!("FR {fr}, AFI active slot {}", log.afi.active_slot()),
            format!("FR {revision} running from slot {slot}"),
        ));
    }
    if let (Some(l), Some(b)) = (&load, &before_load) {
        let after = super::firmware_load::measure(ctx, l, "after")?;
        super::firmware_load::compare(ctx, b, &after, &old_fr, &fr);
    }
    Ok(())
}

/// AEC bit 9 (Firmware Activation Notices) set and an Asynchronous Event Request
/// outstanding, earlier events drained.
fn enable_activation_notices(ctx: &mut CaseContext<'_>) -> StepResult {
    let what = "Get Features 0Bh (Asynchronous Event Configuration), current";
    let c = ctx.admin(what, get_features(FeatureId::AsyncEventConfiguration, Select::Current, 0, 0), Data::None)?;
    ctx.require_success(what, &c)?;
    let config = AsyncEventConfiguration::from_bits(c.dw0).with_firmware_activation_notices(true);
    let what = format!("Set Features 0Bh (Asynchronous Event Configuration) {:#x}", config.into_bits());
    let cmd = set_features(FeatureId::AsyncEventConfiguration, false, 0, config.into_bits());
    let c = ctx.admin(&what, cmd, Data::None)?;
    ctx.require_success(&what, &c)?;
    if !ctx.events_armed {
        ctx.device.arm_async_events(1)?;
        ctx.events_armed = true;
    }
    for c in ctx.device.take_async_events()? {
        ctx.log.push(format!("Asynchronous Event (before the commit) DW0 {:#x}", c.dw0));
    }
    // A notice reported earlier (a namespace change of this or an earlier case) masks
    // further notices until its log page is read (§5.2): the Changed Namespace List is
    // read so that the activation's notice can be reported.
    if ctx.facts.identify.oaes.namespace_attribute_notices() {
        super::events::read_changed_list(ctx)?;
    }
    Ok(())
}

/// The Firmware Activation Starting notice (type 010b, information 01h, log page 03h).
fn expect_activation_notice(ctx: &mut CaseContext<'_>, what: &str) -> StepResult {
    let starting = |e: &AsyncEventCompletion| {
        e.event_type == event_type::NOTICE
            && e.info == NOTICE_FIRMWARE_ACTIVATION_STARTING
            && e.log_page == LogPageId::FirmwareSlot as u8
    };
    let Err(seen) = super::events::await_event(ctx, &starting)? else { return Ok(()) };
    Err(ctx.fail_rule(
        rules::firmware_activation_notice(),
        format!("{what}, AEC bit 9 set and an Asynchronous Event Request outstanding; then waited 1 s"),
        if seen.is_empty() { "no asynchronous event".to_string() } else { format!("events {}", seen.join(", ")) },
        "a notice (type 010b) with information 01h (Firmware Activation Starting) and log page 03h",
    ))
}

fn expect_success(ctx: &CaseContext<'_>, what: &str, status: Status) -> StepResult {
    if status.is_success() {
        return Ok(());
    }
    Err(ctx.fail_rule(rules::firmware_commit_statuses(), what, status.to_string(), "Successful Completion"))
}

/// After a commit with CA 011b: processing resumes (CSTS.PP clears) within MTFA, as
/// far as the target shows its registers.
fn activation_within_mtfa(ctx: &mut CaseContext<'_>, what: &str) -> StepResult {
    let Some(mtfa) = max_activation_ms(ctx.facts.identify.mtfa) else {
        ctx.log.push("MTFA 0: no maximum activation time reported, none judged".into());
        return Ok(());
    };
    let step = 10;
    let mut waited = 0;
    loop {
        let Some(regs) = ctx.device.registers() else {
            ctx.log.push("the target shows no registers: CSTS.PP not followed".into());
            return Ok(());
        };
        let csts = Csts::from_bits(regs.read32(offset::CSTS).map_err(|e| StepError::Error(e.to_string()))?);
        if !csts.pp() {
            ctx.log.push(format!("CSTS.PP clear within {waited} ms of the commit (MTFA {mtfa} ms)"));
            return Ok(());
        }
        if waited > mtfa {
            return Err(ctx.fail_rule(
                rules::firmware_mtfa(),
                what.to_string(),
                format!("CSTS.PP still set {waited} ms after the commit completed"),
                format!("processing resumed within MTFA ({mtfa} ms)"),
            ));
        }
        ctx.device.wait(step)?;
        waited += step;
    }
}

/// `firmware_errors`: a slot beyond FRMW's count, a replace of read-only slot 1, an
/// image that is not one, a reserved commit action, each with the status §5.12 gives.
pub fn firmware_errors(ctx: &mut CaseContext<'_>) -> StepResult {
    require_firmware_commands(ctx)?;
    let frmw = ctx.facts.identify.frmw;
    let mut checked = Vec::new();
    let mut corrupt = fw_image::build(&test_revision(ctx.seed, &[]), 16 * 1024);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xFF;
    download(ctx, &corrupt)?;
    let mut cases: Vec<(u8, CommitAction, Status, &str)> = Vec::new();
    // Activating (CA 010b) a slot beyond the count involves no image: only the slot is wrong.
    if frmw.slots() < 7 {
        let beyond = frmw.slots() + 1;
        cases.push((
            beyond,
            CommitAction::ActivateAtReset,
            Status::INVALID_FIRMWARE_SLOT,
            "a slot beyond FRMW's count",
        ));
    }
    let log = slot_log(ctx, "before the error cases")?;
    if let Ok(slot) = writable_slot(ctx, &log) {
        cases.push((slot, CommitAction::Replace, Status::INVALID_FIRMWARE_IMAGE, "an image whose CRC is wrong"));
    }
    let mut warning = None;
    for (slot, action, wanted, why) in cases {
        let what = format!("Firmware Commit FS {slot} CA {:03b}b ({why})", action.into_bits());
        let c = ctx.admin(&what, firmware_commit(slot, action), Data::None)?;
        let status = c.status();
        if wanted.same_code(&Status::INVALID_FIRMWARE_SLOT) && status.same_code(&Status::INVALID_FIELD) {
            // Refused, with the generic status: §5.12 names Invalid Firmware Slot, but a
            // slot beyond the count is also a field the command cannot take.
            warning.get_or_insert(Failure {
                rule: rules::firmware_commit_statuses(),
                sent: what,
                observed: format!("{status}: refused, but not with the status §5.12 names"),
                expected: wanted.to_string(),
            });
            checked.push(why);
            continue;
        }
        if !status.same_code(&wanted) {
            return Err(ctx.fail_rule(rules::firmware_commit_statuses(), what, status.to_string(), wanted.to_string()));
        }
        checked.push(why);
    }
    if frmw.slot1_read_only() {
        // An image the drive could take, so that only the slot is wrong. A drive may judge
        // the image before the slot: then the read-only rule is not judged.
        let image = match &ctx.firmware {
            Some(v) => v.bytes.clone(),
            None => {
                let mut taken: Vec<String> = (1..=7).filter_map(|s| log.revision(s)).map(|r| r.text).collect();
                taken.push(running_revision(ctx, "before the read-only slot case")?);
                fw_image::build(&test_revision(ctx.seed, &taken), 16 * 1024)
            }
        };
        // Every commit action that puts an image in a slot: 000b, 001b, and 011b where
        // FRMW bit 4 offers it (010b activates the image already there, which a
        // read-only slot allows).
        let mut actions = vec![CommitAction::Replace, CommitAction::ReplaceAndActivateAtReset];
        if frmw.activation_without_reset() {
            actions.push(CommitAction::ReplaceAndActivateNow);
        }
        for action in actions {
            download(ctx, &image)?;
            let what = format!("Firmware Commit FS 1 CA {:03b}b (slot 1, read-only: FRMW bit 0)", action.into_bits());
            let c = ctx.admin(&what, firmware_commit(1, action), Data::None)?;
            let status = c.status();
            if status.same_code(&Status::INVALID_FIRMWARE_IMAGE) {
                ctx.log.push(format!(
                    "slot 1 read-only not judged with CA {:03b}b: the drive refused the image before looking at the slot",
                    action.into_bits()
                ));
            } else if !status.same_code(&Status::INVALID_FIRMWARE_SLOT) {
                return Err(ctx.fail_rule(
                    rules::firmware_commit_statuses(),
                    what,
                    status.to_string(),
                    "Invalid Firmware Slot (or Invalid Firmware Image, had the drive judged the image first)",
                ));
            } else {
                checked.push(match action {
                    CommitAction::Replace => "slot 1, read-only (FRMW bit 0), CA 000b",
                    CommitAction::ReplaceAndActivateAtReset => "slot 1, read-only (FRMW bit 0), CA 001b",
                    _ => "slot 1, read-only (FRMW bit 0), CA 011b",
                });
            }
        }
    }
    ctx.log.push(format!("checked: {}", checked.join("; ")));
    if slot_log(ctx, "after the error cases")? != log {
        return Err(ctx.fail_rule(
            rules::firmware_slot_log(),
            "the refused commits above".to_string(),
            "the Firmware Slot Information log changed".to_string(),
            "no slot changed by a commit that failed",
        ));
    }
    match warning {
        Some(w) => Err(StepError::Warning(w)),
        None => Ok(()),
    }
}
