//! Reservations across two hosts: one per port of a dual-port drive, each with a Host
//! Identifier of its own (NVMe 1.4 §8.8 "Reservations"; the Reservation Register,
//! Acquire, Release and Report commands of §6; Features 81h Host Identifier; log page 80h
//! Reservation Notification). UNH-IOL's Group 7 checks the same behaviour.
//!
//! - `reservation_access`: for every type RESCAP advertises, the holder, a registrant and
//!   a non-registrant each read and write, and the figure "Command Behavior in the
//!   Presence of a Reservation" says which succeed and which end in Reservation Conflict;
//!   a registrant that holds nothing releasing changes nothing ([`access`]).
//! - `reservation_preempt`: a registrant preempts the holder; the preempted host loses
//!   its registration and is told (log page 80h, Registration Preempted, and its event)
//!   ([`preempt`]).
//! - `reservation_power_loss`: a registration and reservation with Persist Through Power
//!   Loss set survive a power cycle ([`power_loss`]).
//!
//! A drive found with registrations (an earlier run, another host) is cleared first: the
//! suite is destructive. Port 1 is the controller nvtest opened, port 2 the next one.

use nvme::device::Data;
use nvme::spec::features::{get_features, set_features, FeatureId, Select};
use nvme::spec::identify::{identify, Cns, IdentifyNamespace, Rescap};
use nvme::spec::log::{get_log_page, LogPageId};
use nvme::spec::nvm;
use nvme::spec::queue::AsyncEventCompletion;
use nvme::spec::reservation::{
    access_allowed, acquire, register, release, report, AcquireAction, ChangePtpl, CommandGroup, NotificationType,
    RegisterAction, ReleaseAction, ReservationNotificationLog, ReservationNotificationMask, ReservationStatus,
    ReservationType, Standing, ASYNC_EVENT_IO_COMMAND_SPECIFIC, HOST_IDENTIFIER_BYTES, RESERVATION_LOG_PAGE_AVAILABLE,
};
use nvme::spec::{Completion, Status};
use zerocopy::{FromZeros, IntoBytes};

use super::resolve::{self, NsTarget};
use super::{CaseContext, StepError, StepResult};
use crate::rules;
use crate::suite::model::NsRef;

/// The reservation keys of the two hosts nvtest plays.
const KEY: [u64; 2] = [0x6e76_7465_7374_0001, 0x6e76_7465_7374_0002];
/// Their Host Identifiers (64-bit, EXHID cleared): "nvtestH1", "nvtestH2".
const HOST_ID: [&[u8; 8]; 2] = [b"nvtestH1", b"nvtestH2"];

/// The namespace and what the checks need of it.
struct Target {
    nsid: u32,
    block_size: usize,
    rescap: Rescap,
}

/// `reservation_access`: every advertised type, three standings, reads and writes.
pub fn access(ctx: &mut CaseContext<'_>, ns: &NsRef) -> StepResult {
    let t = prepare(ctx, ns)?;
    let types: Vec<ReservationType> =
        ReservationType::ALL.into_iter().filter(|rt| t.rescap.into_bits() & rt.rescap_bit() != 0).collect();
    if types.is_empty() {
        return Err(StepError::Skip(format!(
            "Identify Namespace NSID {} RESCAP {:02X}h advertises no reservation type",
            t.nsid,
            t.rescap.into_bits()
        )));
    }
    for rtype in types {
        let result = access_of(ctx, &t, rtype);
        // Whatever was judged, nothing of this type is left for the next.
        let cleared = clear(ctx, &t);
        result?;
        cleared?;
    }
    Ok(())
}

/// One type: port 1 holds it; port 2 is a registrant, then a non-registrant.
fn access_of(ctx: &mut CaseContext<'_>, t: &Target, rtype: ReservationType) -> StepResult {
    let name = rtype.name();
    ctx.log.push(format!("reservation type {} ({name})", rtype as u8));
    clear(ctx, t)?;
    register_key(ctx, t, 0, ChangePtpl::NoChange)?;
    register_key(ctx, t, 1, ChangePtpl::NoChange)?;
    let (cmd, data) = acquire(t.nsid, AcquireAction::Acquire, false, rtype as u8, KEY[0], 0);
    let c =
        on_port(ctx, 0, &format!("Reservation Acquire ({name}), port 1's key"), cmd, Data::ToDevice(data.as_bytes()))?;
    ctx.require_success(&format!("Reservation Acquire ({name}) by a registrant, no reservation held"), &c)?;
    let status = report_status(ctx, t, 0)?;
    if status.rtype != rtype as u8 {
        return Err(ctx.fail_rule(
            rules::reservation_report(),
            format!("Reservation Report after port 1 acquired {name}"),
            format!("RTYPE {:X}h", status.rtype),
            format!("RTYPE {:X}h ({name})", rtype as u8),
        ));
    }
    let registrant = if rtype.all_registrants() { Standing::Holder } else { Standing::Registrant };
    judge_io(ctx, t, rtype, 0, Standing::Holder)?;
    judge_io(ctx, t, rtype, 1, registrant)?;
    if !rtype.all_registrants() {
        // A registrant that is no holder releasing: success, and the reservation stays.
        let (cmd, data) = release(t.nsid, ReleaseAction::Release, false, rtype as u8, KEY[1]);
        let what = format!("[port 2] Reservation Release ({name}) by a registrant that does not hold it");
        let c = on_port(ctx, 1, "Reservation Release, port 2's key", cmd, Data::ToDevice(data.as_bytes()))?;
        ctx.require_success(&what, &c)?;
        let after = report_status(ctx, t, 0)?;
        if after.rtype != rtype as u8 {
            return Err(ctx.fail_rule(
                rules::reservation_release(),
                what,
                format!("the reservation is gone (RTYPE {:X}h in Reservation Report)", after.rtype),
                format!("the reservation held by port 1's host as it was (RTYPE {:X}h)", rtype as u8),
            ));
        }
    }
    let (cmd, data) = register(t.nsid, RegisterAction::Unregister, false, ChangePtpl::NoChange, KEY[1], 0);
    let c = on_port(ctx, 1, "Reservation Register (Unregister), port 2's key", cmd, Data::ToDevice(data.as_bytes()))?;
    ctx.require_success("[port 2] Reservation Register (Unregister)", &c)?;
    judge_io(ctx, t, rtype, 1, Standing::NonRegistrant)?;
    let (cmd, data) = release(t.nsid, ReleaseAction::Release, false, rtype as u8, KEY[0]);
    let c =
        on_port(ctx, 0, &format!("Reservation Release ({name}), port 1's key"), cmd, Data::ToDevice(data.as_bytes()))?;
    ctx.require_success(&format!("Reservation Release ({name}) by the holder"), &c)?;
    let after = report_status(ctx, t, 0)?;
    if after.rtype != 0 {
        return Err(ctx.fail_rule(
            rules::reservation_release(),
            format!("Reservation Release ({name}) by the holder, then Reservation Report"),
            format!("RTYPE {:X}h", after.rtype),
            "RTYPE 0h: no reservation",
        ));
    }
    Ok(())
}

/// A read and a write of LBA 0 through `port`, whose host stands as `standing` toward a
/// reservation of `rtype`: each succeeds or ends in Reservation Conflict as the figure
/// says.
fn judge_io(
    ctx: &mut CaseContext<'_>,
    t: &Target,
    rtype: ReservationType,
    port: usize,
    standing: Standing,
) -> StepResult {
    let who = match standing {
        Standing::Holder => "the holder",
        Standing::Registrant => "a registrant",
        Standing::NonRegistrant => "a non-registrant",
    };
    for group in [CommandGroup::Read, CommandGroup::Write] {
        let mut block = vec![0u8; t.block_size];
        let (cmd, data, op) = match group {
            CommandGroup::Read => (nvm::read(t.nsid, 0, 0), Data::FromDevice(&mut block), "Read"),
            CommandGroup::Write => {
                block.fill(0xA5);
                (nvm::write(t.nsid, 0, 0, false), Data::ToDevice(&block), "Write")
            }
        };
        let what = format!("{op} NSID {} LBA 0 from {who} (port {}) under {}", t.nsid, port + 1, rtype.name());
        let c = on_port(ctx, port, &what, cmd, data)?;
        if group == CommandGroup::Write {
            // What LBA 0 holds now is not the case's to judge.
            ctx.map.forget(t.nsid, 0, 1);
        }
        let allowed = access_allowed(rtype, standing, group);
        let got = c.status();
        let ok = if allowed { got.is_success() } else { got.same_code(&Status::RESERVATION_CONFLICT) };
        if !ok {
            return Err(ctx.fail_rule(
                rules::reservation_access(),
                what,
                got.to_string(),
                if allowed { "Successful Completion".to_string() } else { "Reservation Conflict".to_string() },
            ));
        }
    }
    Ok(())
}

/// `reservation_preempt`: port 2's host preempts port 1's, which is told.
pub fn preempt(ctx: &mut CaseContext<'_>, ns: &NsRef) -> StepResult {
    let t = prepare(ctx, ns)?;
    let Some(rtype) = ReservationType::ALL
        .into_iter()
        .find(|rt| t.rescap.into_bits() & rt.rescap_bit() != 0 && !rt.all_registrants())
    else {
        return Err(StepError::Skip(format!(
            "Identify Namespace NSID {} RESCAP {:02X}h advertises no type with a single holder to preempt",
            t.nsid,
            t.rescap.into_bits()
        )));
    };
    let result = preempt_of(ctx, &t, rtype);
    let cleared = clear(ctx, &t);
    result.and(cleared)
}

fn preempt_of(ctx: &mut CaseContext<'_>, t: &Target, rtype: ReservationType) -> StepResult {
    let name = rtype.name();
    clear(ctx, t)?;
    // Port 1's host is the one told: the events of its type (110b) cleared and its
    // pending notices read away, a request outstanding.
    settle_events(ctx)?;
    drain_notifications(ctx)?;
    unmask_registration_preempted(ctx, t)?;
    register_key(ctx, t, 0, ChangePtpl::NoChange)?;
    let (cmd, data) = acquire(t.nsid, AcquireAction::Acquire, false, rtype as u8, KEY[0], 0);
    let c =
        on_port(ctx, 0, &format!("Reservation Acquire ({name}), port 1's key"), cmd, Data::ToDevice(data.as_bytes()))?;
    ctx.require_success(&format!("Reservation Acquire ({name})"), &c)?;
    register_key(ctx, t, 1, ChangePtpl::NoChange)?;
    let (cmd, data) = acquire(t.nsid, AcquireAction::Preempt, false, rtype as u8, KEY[1], KEY[0]);
    let what = format!("[port 2] Reservation Acquire (Preempt, {name}), PRKEY port 1's key");
    let c = on_port(ctx, 1, "Reservation Acquire (Preempt), PRKEY port 1's key", cmd, Data::ToDevice(data.as_bytes()))?;
    ctx.require_success(&what, &c)?;
    let status = report_status(ctx, t, 1)?;
    let port1_registered = status.controllers.iter().any(|r| r.rkey == KEY[0]);
    let port2_holds = status.controllers.iter().any(|r| r.rkey == KEY[1] && r.holds);
    if port1_registered || !port2_holds || status.rtype != rtype as u8 {
        return Err(ctx.fail_rule(
            rules::reservation_preempt(),
            format!("{what}, then Reservation Report"),
            format!(
                "RTYPE {:X}h; port 1's key {}registered; port 2's host {}holding",
                status.rtype,
                if port1_registered { "still " } else { "not " },
                if port2_holds { "" } else { "not " }
            ),
            format!("RTYPE {:X}h held by port 2's host; port 1's registration removed", rtype as u8),
        ));
    }
    let told = super::events::await_event(ctx, &|e: &AsyncEventCompletion| {
        e.event_type == ASYNC_EVENT_IO_COMMAND_SPECIFIC
            && e.info == RESERVATION_LOG_PAGE_AVAILABLE
            && e.log_page == LogPageId::ReservationNotification as u8
    })?;
    let log = read_notification(ctx)?;
    let logged = log.kind() == Some(NotificationType::RegistrationPreempted) && log.nsid.get() == t.nsid;
    if told.is_err() || !logged {
        return Err(ctx.fail_rule(
            rules::reservation_notification(),
            format!("{what}: port 1's host preempted"),
            format!(
                "{}; log page 80h: type {:X}h NSID {:#x}",
                match &told {
                    Ok(()) => "the event came".to_string(),
                    Err(seen) if seen.is_empty() => "no Asynchronous Event within a second".to_string(),
                    Err(seen) => format!("other events only ({})", seen.join(", ")),
                },
                log.rnlpt,
                log.nsid.get()
            ),
            format!(
                "an Asynchronous Event (type 110b, information 00h, log page 80h) and a Reservation Notification log \
                 page of type 1h (Registration Preempted) for NSID {:#x}",
                t.nsid
            ),
        ));
    }
    Ok(())
}

/// `reservation_power_loss`: with PTPL set, a power cycle keeps registration and
/// reservation.
pub fn power_loss(ctx: &mut CaseContext<'_>, ns: &NsRef) -> StepResult {
    if ctx.device.power_method().is_none() {
        return Err(StepError::Skip(super::facts::NO_POWER_SWITCH.into()));
    }
    let t = prepare(ctx, ns)?;
    if !t.rescap.ptpl() {
        return Err(StepError::Skip(format!(
            "Identify Namespace NSID {} RESCAP {:02X}h: bit 0 (Persist Through Power Loss) is clear",
            t.nsid,
            t.rescap.into_bits()
        )));
    }
    let Some(rtype) = ReservationType::ALL.into_iter().find(|rt| t.rescap.into_bits() & rt.rescap_bit() != 0) else {
        return Err(StepError::Skip("RESCAP advertises no reservation type".into()));
    };
    let result = power_loss_of(ctx, &t, rtype);
    let cleared = clear(ctx, &t);
    result.and(cleared)
}

fn power_loss_of(ctx: &mut CaseContext<'_>, t: &Target, rtype: ReservationType) -> StepResult {
    clear(ctx, t)?;
    register_key(ctx, t, 0, ChangePtpl::Set)?;
    let (cmd, data) = acquire(t.nsid, AcquireAction::Acquire, false, rtype as u8, KEY[0], 0);
    let c = on_port(ctx, 0, "Reservation Acquire, port 1's key", cmd, Data::ToDevice(data.as_bytes()))?;
    ctx.require_success("Reservation Acquire", &c)?;
    let before = report_status(ctx, t, 0)?;
    if !before.ptpls {
        return Err(ctx.fail_rule(
            rules::reservation_persistence(),
            "Reservation Register with CPTPL 11b, then Reservation Report",
            "PTPLS 0",
            "PTPLS 1: reservations persist through a power loss",
        ));
    }
    ctx.device.power_off(ctx.seed)?;
    let on = ctx.device.power_on(std::time::Duration::from_secs(30))?;
    ctx.log.push(format!("power cycled; ready after {:.1} ms", on.ready_ns.unwrap_or(0) as f64 / 1e6));
    set_host_ids(ctx)?;
    let after = report_status(ctx, t, 0)?;
    let kept = after.rtype == rtype as u8 && after.controllers.iter().any(|r| r.rkey == KEY[0] && r.holds);
    if !kept {
        return Err(ctx.fail_rule(
            rules::reservation_persistence(),
            format!("a power cycle with Persist Through Power Loss set, port 1's host holding {}", rtype.name()),
            format!(
                "Reservation Report: RTYPE {:X}h, {} registered controllers{}",
                after.rtype,
                after.regctl,
                if after.controllers.iter().any(|r| r.rkey == KEY[0]) { "" } else { ", port 1's key not among them" }
            ),
            format!("RTYPE {:X}h held by port 1's host, its key registered", rtype as u8),
        ));
    }
    Ok(())
}

/// Checks what the steps need and gives the two hosts their identifiers.
fn prepare(ctx: &mut CaseContext<'_>, ns: &NsRef) -> StepResult<Target> {
    if !ctx.facts.identify.oncs.reservations() {
        return Err(StepError::Skip("Identify Controller ONCS bit 5 (Reservations) is clear".into()));
    }
    if ctx.device.port_count() < 1 {
        return Err(StepError::Skip(format!(
            "reservations across two hosts need two controllers of one NVM subsystem; the target brought up {}",
            super::ports::reached(&*ctx.device)
        )));
    }
    let i = match resolve::ns_one(ctx, ns)? {
        NsTarget::Member(i) => i,
        NsTarget::Raw(nsid) => {
            return Err(StepError::Error(format!("reservations run on a namespace of the set, not NSID {nsid:#x}")))
        }
    };
    let e = &ctx.set[i];
    if e.metadata_size > 0 || e.protection != 0 {
        return Err(StepError::Skip(format!(
            "NSID {} uses a format with metadata or protection information: the reservation checks move plain \
             blocks",
            e.nsid
        )));
    }
    let (nsid, block_size) = (e.nsid, e.block_size as usize);
    let mut id = IdentifyNamespace::new_zeroed();
    let what = format!("Identify Namespace NSID {nsid}");
    let c = ctx.admin(&what, identify(Cns::Namespace, nsid, 0), Data::FromDevice(id.as_mut_bytes()))?;
    ctx.require_success(&what, &c)?;
    if !id.nmic.shared() {
        return Err(StepError::Error(format!(
            "NSID {nsid} is private (NMIC bit 0 clear): reservations across hosts need a shared namespace \
             (use_namespaces with shared: true)"
        )));
    }
    set_host_ids(ctx)?;
    Ok(Target { nsid, block_size, rescap: id.rescap })
}

/// Set Features 81h (Host Identifier) on each port: two hosts.
fn set_host_ids(ctx: &mut CaseContext<'_>) -> StepResult {
    for (port, id) in HOST_ID.iter().enumerate() {
        let mut hostid = [0u8; HOST_IDENTIFIER_BYTES];
        hostid[..8].copy_from_slice(*id);
        let what = format!("Set Features 81h (Host Identifier) {}", String::from_utf8_lossy(*id));
        let c = on_port_admin(ctx, port, &what, set_features(FeatureId::HostIdentifier, false, 0, 0), &hostid)?;
        if c.status().same_code(&Status::COMMAND_SEQUENCE_ERROR) {
            return Err(StepError::Skip(format!(
                "port {}'s controller is registered under another Host Identifier (Set Features 81h: Command \
                 Sequence Error): another host holds it; looked at the Set Features answer",
                port + 1
            )));
        }
        ctx.require_success(&format!("[port {}] {what}", port + 1), &c)?;
    }
    Ok(())
}

/// Port `port`'s host registers its key (re-registering the same key is a no-op).
fn register_key(ctx: &mut CaseContext<'_>, t: &Target, port: usize, cptpl: ChangePtpl) -> StepResult {
    let (cmd, data) = register(t.nsid, RegisterAction::Register, false, cptpl, 0, KEY[port]);
    let what = format!("Reservation Register, port {}'s key", port + 1);
    let c = on_port(ctx, port, &what, cmd, Data::ToDevice(data.as_bytes()))?;
    ctx.require_success(&format!("[port {}] {what}", port + 1), &c)
}

/// No registration and no reservation on the namespace: port 1's host registers (taking
/// over its own registration whatever its key, IEKEY) and clears everything.
fn clear(ctx: &mut CaseContext<'_>, t: &Target) -> StepResult {
    let status = report_status(ctx, t, 0)?;
    if status.regctl == 0 && status.rtype == 0 {
        return Ok(());
    }
    let (cmd, data) = register(t.nsid, RegisterAction::Register, false, ChangePtpl::NoChange, 0, KEY[0]);
    let c = on_port(ctx, 0, "Reservation Register, port 1's key", cmd, Data::ToDevice(data.as_bytes()))?;
    if !c.status().is_success() {
        let (cmd, data) = register(t.nsid, RegisterAction::Replace, true, ChangePtpl::NoChange, 0, KEY[0]);
        let c = on_port(
            ctx,
            0,
            "Reservation Register (Replace, IEKEY), port 1's key",
            cmd,
            Data::ToDevice(data.as_bytes()),
        )?;
        ctx.require_success("Reservation Register (Replace, IEKEY) to clear what an earlier host left", &c)?;
    }
    let (cmd, data) = release(t.nsid, ReleaseAction::Clear, false, 0, KEY[0]);
    let c = on_port(ctx, 0, "Reservation Release (Clear), port 1's key", cmd, Data::ToDevice(data.as_bytes()))?;
    ctx.require_success("Reservation Release (Clear) by a registrant", &c)?;
    let after = report_status(ctx, t, 0)?;
    if after.regctl != 0 || after.rtype != 0 {
        return Err(ctx.fail_rule(
            rules::reservation_release(),
            "Reservation Release (Clear), then Reservation Report",
            format!("RTYPE {:X}h, {} registered controllers", after.rtype, after.regctl),
            "RTYPE 0h and no registered controller: a Clear releases the reservation and removes every registrant",
        ));
    }
    Ok(())
}

/// Reservation Report (4 KiB, the extended structure where the drive is NVMe 1.3 or
/// later) through `port`.
fn report_status(ctx: &mut CaseContext<'_>, t: &Target, port: usize) -> StepResult<ReservationStatus> {
    let eds = ctx.facts.version >= nvme::spec::Version::V1_3;
    let mut buf = vec![0u8; 4096];
    let cmd = report(t.nsid, 4096, eds).map_err(|e| StepError::Error(format!("{e:?}")))?;
    let what = format!("Reservation Report (EDS {})", eds as u8);
    let c = on_port(ctx, port, &what, cmd, Data::FromDevice(&mut buf))?;
    ctx.require_success(&format!("[port {}] {what}", port + 1), &c)?;
    ReservationStatus::parse(&buf, eds).ok_or_else(|| StepError::Error("the Reservation Status header is cut".into()))
}

/// Get Log Page 80h (Reservation Notification) on port 1.
fn read_notification(ctx: &mut CaseContext<'_>) -> StepResult<ReservationNotificationLog> {
    let mut log = ReservationNotificationLog::new_zeroed();
    let what = "Get Log Page 80h (Reservation Notification), 64 bytes";
    let cmd = get_log_page(LogPageId::ReservationNotification, 0xFFFF_FFFF, 64, 0, false)
        .map_err(|e| StepError::Error(e.to_string()))?;
    let c = ctx.admin(what, cmd, Data::FromDevice(log.as_mut_bytes()))?;
    ctx.require_success(what, &c)?;
    Ok(log)
}

/// Keeps an Asynchronous Event Request outstanding on port 1 and takes the events already
/// waiting, reading the log page each names without RAE: an event the controller reported
/// masks later events of its type until the host reads that page (NVMe 1.4 §5.2), so an
/// earlier case's Sanitize Operation Completed (type 110b, like the reservation notice)
/// would hide the notice. Those pages are read first, for an event an earlier case took.
fn settle_events(ctx: &mut CaseContext<'_>) -> StepResult {
    ctx.device.arm_async_events(1)?;
    // An event of type 110b an earlier case took and did not clear.
    let sanicap = ctx.facts.identify.sanicap;
    if sanicap.ces() || sanicap.bes() || sanicap.ows() {
        let mut log = [0u8; 512];
        let what = "Get Log Page 81h (Sanitize Status), 512 bytes, to clear an earlier Sanitize Operation Completed";
        let cmd = get_log_page(LogPageId::SanitizeStatus, 0xFFFF_FFFF, 512, 0, false)
            .map_err(|e| StepError::Error(e.to_string()))?;
        let c = ctx.admin(what, cmd, Data::FromDevice(&mut log))?;
        ctx.require_success(what, &c)?;
    }
    drain_notifications(ctx)?;
    for _ in 0..16 {
        ctx.device.wait(20)?;
        let events = ctx.device.take_async_events()?;
        if events.is_empty() {
            return Ok(());
        }
        for c in events {
            let event = AsyncEventCompletion::from_dw0(c.dw0);
            let bytes = match event.log_page {
                0x01 | 0x80 => 64,
                0x04 => 4096,
                _ => 512,
            };
            let what = format!(
                "Asynchronous Event (before the preempt) DW0 {:#x}: Get Log Page {:02X}h, {bytes} bytes, to clear it",
                c.dw0, event.log_page
            );
            let mut buf = vec![0u8; bytes as usize];
            let cmd = get_log_page(event.log_page, 0xFFFF_FFFF, bytes, 0, false)
                .map_err(|e| StepError::Error(e.to_string()))?;
            let c = ctx.admin(&what, cmd, Data::FromDevice(&mut buf))?;
            ctx.require_success(&what, &c)?;
        }
    }
    Ok(())
}

/// Port 1's host wants Registration Preempted notices for the namespace: Set Features
/// 82h (Reservation Notification Mask) to 0, since another host or an earlier run may
/// have masked them. A drive that refuses it is asked what the mask is (Get Features 82h,
/// current); a mask with REGPRE set that cannot be cleared skips the case, naming it.
fn unmask_registration_preempted(ctx: &mut CaseContext<'_>, t: &Target) -> StepResult {
    let what = format!("Set Features 82h (Reservation Notification Mask) NSID {:#x} to 0", t.nsid);
    let c = ctx.admin(&what, set_features(FeatureId::ReservationNotificationMask, false, t.nsid, 0), Data::None)?;
    if c.status().is_success() {
        return Ok(());
    }
    let what = format!("Get Features 82h (Reservation Notification Mask) NSID {:#x}, current", t.nsid);
    let get = get_features(FeatureId::ReservationNotificationMask, Select::Current, t.nsid, 0);
    let g = ctx.admin(&what, get, Data::None)?;
    ctx.require_success(&what, &g)?;
    if ReservationNotificationMask::from_bits(g.dw0).regpre() {
        return Err(StepError::Skip(format!(
            "Registration Preempted notices are masked for NSID {:#x} (Get Features 82h: {:#x}) and Set Features \
             82h to 0 was refused ({}): the notice cannot be judged",
            t.nsid,
            g.dw0,
            c.status()
        )));
    }
    Ok(())
}

/// Reads port 1's Reservation Notification log pages until it is empty (at most 256).
fn drain_notifications(ctx: &mut CaseContext<'_>) -> StepResult {
    for _ in 0..256 {
        if read_notification(ctx)?.kind() == Some(NotificationType::Empty) {
            return Ok(());
        }
    }
    Ok(())
}

/// An NVM command through `port` (0-based).
fn on_port(
    ctx: &mut CaseContext<'_>,
    port: usize,
    what: &str,
    cmd: nvme::spec::Command,
    data: Data<'_>,
) -> StepResult<Completion> {
    ctx.through_port(port, |ctx| ctx.io(what, cmd, data))
}

/// An admin command with data to the device through `port` (0-based).
fn on_port_admin(
    ctx: &mut CaseContext<'_>,
    port: usize,
    what: &str,
    cmd: nvme::spec::Command,
    data: &[u8],
) -> StepResult<Completion> {
    ctx.through_port(port, |ctx| ctx.admin(what, cmd, Data::ToDevice(data)))
}
