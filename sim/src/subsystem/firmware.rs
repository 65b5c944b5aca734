//! Firmware: the slots, Firmware Image Download (admin 11h, NVMe 1.4 §5.13) and Firmware
//! Commit (admin 10h, §5.12) with commit actions 000b–011b, the Firmware Slot
//! Information log (03h), Identify Controller FR, FRMW, FWUG and MTFA, and activation
//! without a reset: the Firmware Activation Starting notice, and processing paused
//! (CSTS.PP) for the profile's activation time while I/O waits, then the new revision
//! running.
//!
//! Images are nvtest's test images ([`nvme::fw_image`]): a commit that replaces a slot
//! validates the downloaded image (header, length, CRC) and refuses anything else with
//! Invalid Firmware Image. The profile's `firmware:` section says what the drive has:
//!
//! ```yaml
//! firmware: {slots: 3, slot1_read_only: true, activation_without_reset: true, fwug: 1,
//!            mtfa_ms: 1000, activation_ms: 200, performance: {"NVTF*": 78}}
//! ```
//!
//! `activation` says how a revision may be activated, where not as the commit action
//! asks: `controller_reset`, `conventional_reset` or `nvm_subsystem_reset` (a commit
//! action 011b then answers Firmware Activation Requires … Reset and the image runs
//! after that reset; the last two only after a power cycle here), or `prohibited`
//! (Firmware Activation Prohibited for every activating action; the slot still takes
//! the image). Keys as `performance`'s.
//!
//! `performance` gives the speed of a firmware revision in percent of the service
//! model's (a field update that changes measured performance): each I/O command's
//! service time is stretched by 100 / percent while that revision runs, so at a fixed
//! queue depth IOPS scale by the percentage. A key ending in `*` matches the revisions
//! that begin with the rest; revisions not named run at 100 %.
//!
//! Without it the drive has one read-only slot and neither command (OACS bit 2 clear).

use serde::Deserialize;
use std::collections::BTreeMap;

use super::{Quirk, Subsystem};
use crate::exec::{AsyncEvent, ControllerContext, DataPointer, Done};
use nvme::spec::firmware::{download_extent, update_granularity, CommitAction, FirmwareCommitCdw10};
use nvme::spec::log::LogPageId;
use nvme::spec::{Command, Status};

/// The largest image the download buffer takes.
pub const MAX_IMAGE: u64 = 4 << 20;

/// The `firmware:` section of a profile.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirmwareModel {
    /// FRMW bits 3:1: firmware slots, 1 to 7.
    pub slots: u8,
    /// FRMW bit 0: slot 1 is read only.
    #[serde(default)]
    pub slot1_read_only: bool,
    /// FRMW bit 4: commit action 011b (activate without reset) is supported.
    #[serde(default)]
    pub activation_without_reset: bool,
    /// FWUG: update granularity in 4 KiB units (0: not reported, FFh: no restriction).
    #[serde(default)]
    pub fwug: u8,
    /// MTFA in milliseconds (reported in 100 ms units; 0: not reported).
    #[serde(default)]
    pub mtfa_ms: u64,
    /// How long an activation without reset pauses processing (CSTS.PP set).
    #[serde(default)]
    pub activation_ms: u64,
    /// Speed per firmware revision (exact, or a prefix ending in `*`) in percent of the
    /// service model's.
    #[serde(default)]
    pub performance: BTreeMap<String, u32>,
    /// How a revision (exact, or a prefix ending in `*`) may be activated, where not as
    /// the commit action asks.
    #[serde(default)]
    pub activation: BTreeMap<String, ActivationRule>,
    /// Commit action 011b completes when the activation's pause ends, not before it
    /// starts (both are allowed: the pause then shows in the commit's own time).
    #[serde(default)]
    pub commit_completes_after_activation: bool,
}

/// How a revision may be activated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivationRule {
    ControllerReset,
    ConventionalReset,
    NvmSubsystemReset,
    Prohibited,
}

/// The value of the first key of `map` naming `revision` (FR, space padded): the key
/// itself, or a prefix followed by `*`.
fn for_revision<'m, T>(map: &'m BTreeMap<String, T>, revision: &[u8; 8]) -> Option<&'m T> {
    let text = String::from_utf8_lossy(revision);
    let text = text.trim_end();
    map.iter()
        .find(|(k, _)| match k.strip_suffix('*') {
            Some(prefix) => text.starts_with(prefix),
            None => text == k.as_str(),
        })
        .map(|(_, v)| v)
}

impl FirmwareModel {
    /// What is inconsistent in the section, for the profile's error.
    pub fn problem(&self) -> Option<&'static str> {
        if !(1..=7).contains(&self.slots) {
            return Some("firmware: slots must be 1 to 7");
        }
        if self.mtfa_ms > 0xFFFF * 100 {
            return Some("firmware: mtfa_ms must fit MTFA (65535 × 100 ms)");
        }
        if self.performance.values().any(|p| !(1..=1000).contains(p)) {
            return Some("firmware: performance percentages must be 1 to 1000");
        }
        let bad_key = |k: &String| k.trim_end_matches('*').is_empty() || k.len() > 9;
        if self.performance.keys().chain(self.activation.keys()).any(bad_key) {
            return Some(
                "firmware: performance and activation keys are revisions (up to 8 characters, or a prefix and `*`)",
            );
        }
        None
    }

    /// The speed of `revision` (FR, space padded) in percent; `None`: not named, 100 %.
    pub fn speed_percent(&self, revision: &[u8; 8]) -> Option<u32> {
        for_revision(&self.performance, revision).copied()
    }

    /// How `revision` may be activated; `None`: as the commit action asks.
    pub fn activation_rule(&self, revision: &[u8; 8]) -> Option<ActivationRule> {
        for_revision(&self.activation, revision).copied()
    }
}

/// The firmware state of the subsystem (survives resets; the slots survive power loss).
#[derive(Debug, Default)]
pub struct FirmwareState {
    /// FRS1–FRS7: the revision in each slot (`None`: empty).
    pub slots: [Option<[u8; 8]>; 7],
    /// The slot the running firmware came from (1-based).
    pub active: u8,
    /// The slot activated at the next reset (AFI bits 6:4).
    pub next: Option<u8>,
    /// The revision that slot holds, to run at that reset.
    pending: Option<[u8; 8]>,
    /// The pending image runs only after a power cycle (it needs a Conventional or NVM
    /// Subsystem Reset), not at a Controller Reset.
    pending_needs_power_cycle: bool,
    /// The power came back since the last controller enable.
    pub(super) powered_on: bool,
    /// The revision running (Identify Controller FR).
    pub running: [u8; 8],
    /// The image being downloaded, and the byte ranges received.
    image: Vec<u8>,
    received: Vec<(u64, u64)>,
    /// The running revision's speed (the profile's `performance`), handed to the engine.
    pub(super) speed_percent: Option<u32>,
    /// Quirk `io-fails-during-activation`: I/O fails with Internal Error until this time.
    pub(super) io_failing_until_ns: u64,
}

impl FirmwareState {
    /// Slot 1 holding and running `revision`.
    pub fn new(revision: &str) -> FirmwareState {
        let mut fr = [b' '; 8];
        for (d, s) in fr.iter_mut().zip(revision.bytes()) {
            *d = s;
        }
        let mut state = FirmwareState { active: 1, running: fr, ..FirmwareState::default() };
        state.slots[0] = Some(fr);
        state
    }
}

impl Subsystem {
    /// Firmware Image Download: `bytes` at `offset` of the image. A download at offset 0
    /// starts a new image. Offsets and sizes must keep to FWUG (Invalid Field in
    /// Command); a range overlapping one already received is Overlapping Range.
    pub(super) fn firmware_image_download(&mut self, cmd: &Command, data: &dyn DataPointer) -> Done {
        let Some(model) = self.profile.firmware.clone() else { return Done::err(Status::INVALID_COMMAND_OPCODE) };
        let (bytes, offset) = download_extent(cmd);
        if let Some(g) = update_granularity(model.fwug) {
            if offset % g != 0 || bytes % g != 0 && offset + bytes < self.firmware.image.len() as u64 {
                return Done::err(Status::INVALID_FIELD);
            }
        }
        if offset + bytes > MAX_IMAGE {
            return Done::err(Status::INVALID_FIELD);
        }
        if offset == 0 {
            self.firmware.image.clear();
            self.firmware.received.clear();
        }
        let end = offset + bytes;
        if self.firmware.received.iter().any(|&(s, e)| offset < e && s < end) {
            return Done::err(Status::OVERLAPPING_RANGE);
        }
        let piece = match data.copy_from_host(bytes as usize) {
            Ok(p) => p,
            Err(s) => return Done::err(s),
        };
        let fw = &mut self.firmware;
        if fw.image.len() < end as usize {
            fw.image.resize(end as usize, 0);
        }
        fw.image[offset as usize..end as usize].copy_from_slice(&piece);
        fw.received.push((offset, end));
        Done::ok()
    }

    /// Firmware Commit.
    pub(super) fn firmware_commit(&mut self, ctx: &mut ControllerContext, cmd: &Command) -> Done {
        let Some(model) = self.profile.firmware.clone() else { return Done::err(Status::INVALID_COMMAND_OPCODE) };
        let f = FirmwareCommitCdw10::from_bits(cmd.cdw10);
        let action = f.ca();
        if matches!(action, CommitAction::Reserved(_)) || f.bpid() {
            return Done::err(Status::INVALID_FIELD);
        }
        if action == CommitAction::ReplaceAndActivateNow && !model.activation_without_reset {
            return Done::err(Status::INVALID_FIELD);
        }
        // FS 0: the controller picks a slot: the first writable slot not running.
        let slot = match f.fs() {
            0 => (1..=model.slots)
                .find(|s| *s != self.firmware.active && !(*s == 1 && model.slot1_read_only))
                .unwrap_or(self.firmware.active),
            s => s,
        };
        if slot > model.slots {
            if self.quirks.has(Quirk::InvalidSlotAccepted) {
                // Quirk: success, nothing done (§5.12 Invalid Firmware Slot broken).
                return Done::ok();
            }
            if self.quirks.has(Quirk::InvalidSlotGenericStatus) {
                // Quirk: refused with the generic status (Figure 175 names another).
                return Done::err(Status::INVALID_FIELD);
            }
            return Done::err(Status::INVALID_FIRMWARE_SLOT);
        }
        // Quirks `read-only-slot-writable` (every action), `read-only-slot-replaced-at-reset`
        // (CA 001b), `read-only-slot-replaced-now` (CA 011b): slot 1 takes images
        // (Figure 175 broken).
        let protection_lost = self.quirks.has(Quirk::ReadOnlySlotWritable)
            || (action == CommitAction::ReplaceAndActivateAtReset
                && self.quirks.has(Quirk::ReadOnlySlotReplacedAtReset))
            || (action == CommitAction::ReplaceAndActivateNow && self.quirks.has(Quirk::ReadOnlySlotReplacedNow));
        if action.replaces() && slot == 1 && model.slot1_read_only && !protection_lost {
            return Done::err(Status::INVALID_FIRMWARE_SLOT);
        }
        let revision = if action.replaces() {
            match nvme::fw_image::validate(&self.firmware.image) {
                Ok(fr) => fr,
                Err(_) if self.quirks.has(Quirk::BadImageAccepted) => {
                    // Quirk: success, nothing stored (Figure 175 Invalid Firmware Image broken).
                    return Done::ok();
                }
                Err(_) => {
                    if self.quirks.has(Quirk::RefusedCommitChangesSlot) {
                        // Quirk: the refused image's revision lands in FRS (§5.12 broken).
                        let mut fr = [b' '; 8];
                        let header = self.firmware.image.get(8..16).unwrap_or_default();
                        fr[..header.len()].copy_from_slice(header);
                        self.firmware.slots[slot as usize - 1] = Some(fr);
                    }
                    return Done::err(Status::INVALID_FIRMWARE_IMAGE);
                }
            }
        } else {
            match self.firmware.slots[slot as usize - 1] {
                Some(fr) => fr,
                None => return Done::err(Status::INVALID_FIRMWARE_IMAGE),
            }
        };
        if action.replaces() {
            if !self.quirks.has(Quirk::FirmwareSlotLogStale) {
                // Quirk `firmware-slot-log-stale`: FRS keeps what it had (log 03h broken).
                self.firmware.slots[slot as usize - 1] = Some(revision);
            }
            self.firmware.image.clear();
            self.firmware.received.clear();
        }
        let rule = model.activation_rule(&revision);
        if action != CommitAction::Replace && rule == Some(ActivationRule::Prohibited) {
            // The profile prohibits activating this revision (e.g. a downgrade).
            return Done::err(Status::FIRMWARE_ACTIVATION_PROHIBITED);
        }
        self.firmware.pending_needs_power_cycle = false;
        match action {
            CommitAction::Replace => {
                if self.quirks.has(Quirk::ReplaceActivates) {
                    // Quirk: the replaced image runs at once (§5.12 CA 000b broken).
                    self.firmware.active = slot;
                    self.set_running(revision);
                }
                Done::ok()
            }
            CommitAction::ReplaceAndActivateAtReset | CommitAction::ActivateAtReset => {
                self.firmware.next = Some(slot);
                self.firmware.pending = Some(revision);
                if self.quirks.has(Quirk::FirmwareRunsBeforeReset) {
                    // Quirk: FR reports the image before any reset (§5.12 broken).
                    self.set_running(revision);
                }
                Done::ok()
            }
            CommitAction::ReplaceAndActivateNow => {
                let needs = match rule {
                    Some(ActivationRule::ControllerReset) => {
                        Some((Status::FIRMWARE_ACTIVATION_REQUIRES_CONTROLLER_LEVEL_RESET, false))
                    }
                    Some(ActivationRule::ConventionalReset) => {
                        Some((Status::FIRMWARE_ACTIVATION_REQUIRES_CONVENTIONAL_RESET, true))
                    }
                    Some(ActivationRule::NvmSubsystemReset) => {
                        Some((Status::FIRMWARE_ACTIVATION_REQUIRES_NVM_SUBSYSTEM_RESET, true))
                    }
                    _ => None,
                };
                if let Some((status, power_cycle)) = needs {
                    // §5.12: the image runs after the reset the status names.
                    self.firmware.next = Some(slot);
                    self.firmware.pending = Some(revision);
                    self.firmware.pending_needs_power_cycle = power_cycle;
                    return Done::err(status);
                }
                if model.mtfa_ms > 0 && model.activation_ms > model.mtfa_ms {
                    // §5.12: an activation that would take longer than MTFA is refused;
                    // the image runs after the next reset instead.
                    self.firmware.next = Some(slot);
                    self.firmware.pending = Some(revision);
                    return Done::err(Status::FIRMWARE_ACTIVATION_REQUIRES_MAX_TIME_VIOLATION);
                }
                // Quirk `no-activation-notice`: the notice is never raised (§5.2 broken).
                if self.controller.features.firmware_notices_enabled() && !self.quirks.has(Quirk::NoActivationNotice) {
                    ctx.events.push(AsyncEvent {
                        event_type: super::log::EVENT_TYPE_NOTICE,
                        info: nvme::spec::firmware::NOTICE_FIRMWARE_ACTIVATION_STARTING,
                        log_page: LogPageId::FirmwareSlot as u8,
                    });
                }
                if self.quirks.has(Quirk::ActivationNeedsResetSilently) {
                    // Quirk: success, the image runs only after a reset (§5.12 CA 011b broken).
                    self.firmware.next = Some(slot);
                    self.firmware.pending = Some(revision);
                    return Done::ok();
                }
                // Processing pauses (CSTS.PP) while the new image starts; commands wait.
                let pause_ms = if self.quirks.has(Quirk::ActivationBeyondMtfa) {
                    // Quirk: paused for twice MTFA (Figure 247 MTFA broken).
                    model.mtfa_ms.max(100) * 2
                } else {
                    model.activation_ms
                };
                ctx.pause_ns = pause_ms.saturating_mul(1_000_000);
                ctx.complete_after_pause = model.commit_completes_after_activation;
                if self.quirks.has(Quirk::IoFailsDuringActivation) {
                    // Quirk: I/O fetched in the first 50 ms after the pause fails (§5.12 broken).
                    self.firmware.io_failing_until_ns = ctx.now_ns + ctx.pause_ns + 50_000_000;
                }
                self.firmware.active = slot;
                self.firmware.next = None;
                self.set_running(revision);
                Done::ok()
            }
            CommitAction::Reserved(_) => Done::err(Status::INVALID_FIELD),
        }
    }

    /// The revision now running: FR reports it.
    fn set_running(&mut self, revision: [u8; 8]) {
        self.firmware.speed_percent = self.profile.firmware.as_ref().and_then(|m| m.speed_percent(&revision));
        if !self.quirks.has(Quirk::FirmwareRevisionUnchanged) {
            // Quirk `firmware-revision-unchanged`: FR keeps the old revision (Figure 247 FR broken).
            self.firmware.running = revision;
        }
    }

    /// Quirk `io-fails-during-activation`: whether an I/O command now fails.
    pub(super) fn activation_fails_io(&self) -> bool {
        self.now_ns < self.firmware.io_failing_until_ns
    }

    /// A Controller Level Reset (or power-on): the firmware committed for the next reset
    /// starts running, unless it waits for a power cycle and `powered_on` is false.
    pub(super) fn firmware_reset(&mut self, powered_on: bool) {
        if self.firmware.pending_needs_power_cycle && !powered_on {
            return;
        }
        self.firmware.pending_needs_power_cycle = false;
        if let Some(slot) = self.firmware.next.take() {
            self.firmware.active = slot;
            if let Some(fr) = self.firmware.pending.take() {
                self.set_running(fr);
            }
        }
    }
}
