//! Asynchronous events: arming Asynchronous Event Requests with Namespace Attribute
//! Notices enabled, and expecting a Namespace Attribute Changed notice with the Changed
//! Namespace List that goes with it.

use std::time::{Duration, Instant};

use nvme::device::Data;
use nvme::spec::features::{get_features, set_features, AsyncEventConfiguration, FeatureId, Select};
use nvme::spec::log::{get_log_page, ChangedNamespaceList, LogPageId};
use nvme::spec::queue::{event_type, notice_info, AsyncEventCompletion};
use zerocopy::{FromZeros, IntoBytes};

use super::resolve;
use super::{CaseContext, StepError, StepResult};
use crate::rules;
use crate::suite::model::NsRef;

/// How long a notice may take to arrive after the change that raises it.
const NOTICE_WAIT: Duration = Duration::from_secs(2);

/// `arm_async_events`: enables Namespace Attribute Notices (Set Features 0Bh bit 8),
/// clears any pending notice by reading the Changed Namespace List, and keeps an
/// Asynchronous Event Request outstanding.
pub fn arm(ctx: &mut CaseContext<'_>) -> StepResult {
    let what = "Get Features 0Bh (Asynchronous Event Configuration), current";
    let c = ctx.admin(what, get_features(FeatureId::AsyncEventConfiguration, Select::Current, 0, 0), Data::None)?;
    ctx.require_success(what, &c)?;
    let config = AsyncEventConfiguration::from_bits(c.dw0).with_namespace_attribute_notices(true);
    let what = format!("Set Features 0Bh (Asynchronous Event Configuration) {:#x}", config.into_bits());
    let c =
        ctx.admin(&what, set_features(FeatureId::AsyncEventConfiguration, false, 0, config.into_bits()), Data::None)?;
    ctx.require_success(&what, &c)?;
    read_changed_list(ctx)?;
    ctx.device.arm_async_events(1)?;
    // A notice raised before the log was read may still complete the new request.
    for c in ctx.device.take_async_events()? {
        ctx.log.push(format!("Asynchronous Event (before the change) DW0 {:#x}", c.dw0));
    }
    read_changed_list(ctx)?;
    ctx.events_armed = true;
    Ok(())
}

/// `expect_namespace_changed`: a Notice – Namespace Attribute Changed event, then NSID
/// listed in the Changed Namespace List.
pub fn expect_namespace_changed(ctx: &mut CaseContext<'_>, ns: &NsRef) -> StepResult {
    if !ctx.events_armed {
        return Err(StepError::Error("expect_namespace_changed needs arm_async_events first".into()));
    }
    let nsid = resolve::ns_one(ctx, ns)?.nsid(ctx);
    let deadline = Instant::now() + NOTICE_WAIT;
    let mut seen = Vec::new();
    let notice = loop {
        let events = ctx.device.take_async_events()?;
        for c in &events {
            ctx.log.push(format!("Asynchronous Event DW0 {:#x} ({})", c.dw0, c.status()));
        }
        let found = events
            .iter()
            .map(|c| AsyncEventCompletion::from_dw0(c.dw0))
            .find(|e| e.event_type == event_type::NOTICE && e.info == notice_info::NAMESPACE_ATTRIBUTE_CHANGED);
        seen.extend(events.iter().map(|c| c.dw0));
        if found.is_some() {
            break found;
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let Some(notice) = notice else {
        return Err(ctx.fail_rule(
            rules::namespace_notice(),
            format!("a namespace change of NSID {nsid} with an Asynchronous Event Request outstanding"),
            format!("no Namespace Attribute Changed notice within {} ms (events: {seen:x?})", NOTICE_WAIT.as_millis()),
            "an event with type Notice (2h), information 00h, log page 04h",
        ));
    };
    if notice.log_page != LogPageId::ChangedNamespaceList as u8 {
        return Err(ctx.fail_rule(
            rules::namespace_notice(),
            "Asynchronous Event Request",
            format!("Namespace Attribute Changed notice naming log page {:02X}h", notice.log_page),
            "log page 04h (Changed Namespace List)",
        ));
    }
    let list = read_changed_list(ctx)?;
    if !list.overflowed() && !list.ids().any(|id| id == nsid) {
        return Err(ctx.fail_rule(
            rules::changed_namespace_list(),
            "Get Log Page 04h (Changed Namespace List)",
            format!("listed NSIDs {:?}", list.ids().collect::<Vec<_>>()),
            format!("NSID {nsid} listed"),
        ));
    }
    Ok(())
}

/// Reads (and so clears) the Changed Namespace List.
pub(crate) fn read_changed_list(ctx: &mut CaseContext<'_>) -> StepResult<ChangedNamespaceList> {
    let mut list = ChangedNamespaceList::new_zeroed();
    let what = "Get Log Page 04h (Changed Namespace List), 4096 bytes";
    let cmd = get_log_page(LogPageId::ChangedNamespaceList, 0xFFFF_FFFF, 4096, 0, false)
        .map_err(|e| StepError::Error(e.to_string()))?;
    let c = ctx.admin(what, cmd, Data::FromDevice(list.as_mut_bytes()))?;
    ctx.require_success(what, &c)?;
    Ok(list)
}

/// Waits up to about a second (20 polls, 50 ms apart on the target's clock) for an
/// asynchronous event `wanted` accepts. `Err` holds the DW0 of the events that came
/// instead (empty: none).
pub(crate) fn await_event(
    ctx: &mut CaseContext<'_>,
    wanted: &dyn Fn(&AsyncEventCompletion) -> bool,
) -> StepResult<Result<(), Vec<String>>> {
    let mut seen = Vec::new();
    for _ in 0..20 {
        for c in ctx.device.take_async_events()? {
            ctx.log.push(format!("Asynchronous Event DW0 {:#x}", c.dw0));
            if wanted(&AsyncEventCompletion::from_dw0(c.dw0)) {
                return Ok(Ok(()));
            }
            seen.push(format!("{:#x}", c.dw0));
        }
        ctx.device.wait(50)?;
    }
    Ok(Err(seen))
}
