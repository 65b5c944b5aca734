//! Asymmetric Namespace Access (NVMe 1.4 §8.20 "Asymmetric Namespace Access
//! Reporting"): the ANA groups of the subsystem, the ANA state of each group as each
//! controller sees it, the Asymmetric Namespace Access log page (0Ch) and its ANA
//! Change notice, and what each state does to the commands on a namespace of the group.
//!
//! This module owns the profile's [`AnaModel`], each controller's [`AnaView`] and the
//! test hook that changes a state ([`crate::exec::CommandSet::set_ana_state`]).
//!
//! ## What is modelled, and what is not
//!
//! - `groups` ANA groups, ANAGRPIDs 1 to `groups` (ANAGRPMAX = NANAGRPID = `groups`).
//!   A namespace belongs to one group for its life (ANACAP bit 6): the one Namespace
//!   Management's create names in ANAGRPID (ANACAP bit 7; above ANAGRPMAX: ANA Group
//!   Identifier Invalid), or, for 0h and the namespaces a profile ships with, group
//!   ((NSID − 1) mod `groups`) + 1.
//! - Every group starts ANA Optimized through every controller, and after a power cycle.
//!   A state changes only through the test hook: real drives change it themselves
//!   (failover); the simulated drive does not pass through ANA Change on its own, and
//!   ANATT is reported from `transition_ms` (whole seconds, rounded up) only.
//! - The log page of a controller holds one descriptor for each group with a namespace
//!   attached to that controller, listing those NSIDs (none with RGO, LSP bit 0). Its
//!   Change Count, and the group's, go up with each state change through that
//!   controller; membership changes (attach, detach) are not counted.
//! - A changed state raises the Notice – Asymmetric Namespace Access Change (type 010b,
//!   information 03h, log 0Ch) on that controller when Asynchronous Event Configuration
//!   bit 11 enables it, then no other until the host reads log 0Ch without RAE.
//! - Through a controller that sees a group Inaccessible, Persistent Loss or Change,
//!   every NVM command on a namespace of the group, and Format NVM of it, completes with
//!   Asymmetric Access Inaccessible, Persistent Loss or Transition, DNR clear (the host
//!   may retry it on another path); the other admin
//!   commands (Identify, Get Log Page, features, attachment) are processed.

use super::{Quirk, Subsystem};
use crate::exec::AsyncEvent;
use nvme::spec::ana::{AnaGroup, AnaLog, AnaState, Anacap, ANA_CHANGE_NOTICE, LSP_RETURN_GROUPS_ONLY};
use nvme::spec::log::LogPageId;
use nvme::spec::{AdminOpcode, Command, NvmOpcode, Status};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Asynchronous Event Type 010b: Notice.
const EVENT_TYPE_NOTICE: u8 = 2;

/// The most ANA groups a profile may give a drive.
pub const MAX_GROUPS: u32 = 128;

/// A profile's `ana:` section: the drive reports Asymmetric Namespace Access (CMIC bit 3,
/// NVMe 1.4) with `groups` ANA groups.
///
/// ```yaml
/// ana: {groups: 2, transition_ms: 10000}   # ANATT 10 s
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnaModel {
    /// ANA groups, ANAGRPIDs 1 to this.
    pub groups: u32,
    /// The longest a group stays in ANA Change state: ANATT, in whole seconds rounded up.
    pub transition_ms: u32,
}

impl AnaModel {
    /// What is wrong with the section, if anything.
    pub fn problem(&self) -> Option<String> {
        if !(1..=MAX_GROUPS).contains(&self.groups) {
            return Some(format!("ana: groups {} must be 1 to {MAX_GROUPS}", self.groups));
        }
        if !(1..=255_000).contains(&self.transition_ms) {
            return Some(format!(
                "ana: transition_ms {} must be 1 to 255000 (ANATT is 1 to 255 s)",
                self.transition_ms
            ));
        }
        None
    }

    /// ANATT: ANA Transition Time, seconds.
    pub fn anatt(&self) -> u8 {
        self.transition_ms.div_ceil(1000).clamp(1, 255) as u8
    }

    /// ANACAP: every state reported, ANAGRPID static while attached (bit 6) and settable
    /// at create (bit 7).
    pub fn anacap(&self) -> Anacap {
        let states = AnaState::ALL.iter().fold(0u8, |bits, s| bits | s.anacap_bit());
        Anacap::from_bits(states).with_anagrpid_static(true).with_anagrpid_on_create(true)
    }

    /// The group of a namespace created with ANAGRPID `requested` (0h: the controller picks).
    pub fn group_for(&self, nsid: u32, requested: u32) -> Result<u32, Status> {
        match requested {
            0 => Ok((nsid.saturating_sub(1) % self.groups) + 1),
            g if g <= self.groups => Ok(g),
            _ => Err(Status::ANA_GROUP_IDENTIFIER_INVALID),
        }
    }
}

/// What one controller reports of the ANA groups.
#[derive(Debug, Default)]
pub struct AnaView {
    /// The state of each group through this controller (absent: ANA Optimized).
    states: BTreeMap<u32, AnaState>,
    /// What the log page says of each group: the same as `states`, except under quirk
    /// `ana-log-stale`.
    logged: BTreeMap<u32, AnaState>,
    /// Each group descriptor's Change Count.
    group_chgcnt: BTreeMap<u32, u64>,
    /// The log page's Change Count.
    chgcnt: u64,
    /// An ANA Change notice was raised and log 0Ch not read since.
    notice_outstanding: bool,
}

impl AnaView {
    /// The state of group `anagrpid` through this controller.
    pub fn state(&self, anagrpid: u32) -> AnaState {
        self.states.get(&anagrpid).copied().unwrap_or(AnaState::Optimized)
    }

    fn logged(&self, anagrpid: u32) -> AnaState {
        self.logged.get(&anagrpid).copied().unwrap_or(AnaState::Optimized)
    }

    /// The log page's Change Count.
    pub fn chgcnt(&self) -> u64 {
        self.chgcnt
    }
}

/// A Change Count after one more change: it wraps to 1, never 0.
fn bump(count: u64) -> u64 {
    count.checked_add(1).unwrap_or(1)
}

impl Subsystem {
    /// The profile's ANA section, when the drive reports ANA.
    pub fn ana(&self) -> Option<&AnaModel> {
        self.profile.ana.as_ref()
    }

    /// The state of the group of active namespace `nsid` through the controller running
    /// the command (`None`: no ANA, or not an active namespace).
    fn ana_state_of(&self, nsid: u32) -> Option<AnaState> {
        self.ana()?;
        let ns = self.namespace(nsid).filter(|ns| ns.is_attached_to(self.controller.cntlid))?;
        Some(self.controller.ana.state(ns.anagrpid))
    }

    /// The status an I/O command (or Format NVM) completes with because of its
    /// namespace's ANA state, `None` when the state lets it run (§8.20.3).
    pub(super) fn ana_refusal(&self, cmd: &Command, admin: bool) -> Option<Status> {
        if admin && AdminOpcode::from_u8(cmd.opcode) != Some(AdminOpcode::FormatNvm) {
            return None;
        }
        if !admin && NvmOpcode::from_u8(cmd.opcode).is_none() {
            return None;
        }
        let state = self.ana_state_of(cmd.nsid)?;
        let refusal = state.refusal()?;
        if self.quirks.has(Quirk::AnaStateNotHonoured) {
            // Quirk: the group's state is reported but the command runs anyway (§8.20.3 broken).
            return None;
        }
        if self.quirks.has(Quirk::AnaWrongStatus) {
            // Quirk: a generic status instead of the path related one (Figure 131 broken).
            return Some(Status::NAMESPACE_NOT_READY);
        }
        Some(refusal)
    }

    /// Get Log Page 0Ch for the controller running the command. RGO (LSP bit 0) leaves
    /// out the NSID lists; a read without RAE re-arms the ANA Change notice.
    pub(super) fn ana_log_page(&mut self, lsp: u8, rae: bool) -> Vec<u8> {
        let cntlid = self.controller.cntlid;
        let mut members: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for ns in self.namespaces.iter().flatten().filter(|ns| ns.is_attached_to(cntlid)) {
            members.entry(ns.anagrpid).or_default().push(ns.nsid);
        }
        if self.quirks.has(Quirk::AnaLogOmitsNamespace) {
            // Quirk: the highest active NSID is in no descriptor (§5.14.1.12 broken).
            if let Some(last) = members.values().flatten().copied().max() {
                for list in members.values_mut() {
                    list.retain(|n| *n != last);
                }
            }
        }
        let view = &self.controller.ana;
        let groups = members
            .into_iter()
            .map(|(anagrpid, nsids)| AnaGroup {
                anagrpid,
                chgcnt: view.group_chgcnt.get(&anagrpid).copied().unwrap_or(0),
                state: view.logged(anagrpid) as u8,
                nsids,
            })
            .collect();
        let page = AnaLog { chgcnt: view.chgcnt, groups }.to_bytes(lsp & LSP_RETURN_GROUPS_ONLY != 0);
        if !rae {
            self.controller.ana.notice_outstanding = false;
        }
        page
    }

    /// The test hook: group `anagrpid` goes into `state` as controller `cntlid` sees it,
    /// raising that controller's ANA Change notice.
    pub(super) fn change_ana_state(&mut self, cntlid: u16, anagrpid: u32, state: u8) -> Result<(), String> {
        let Some(model) = self.ana() else {
            return Err("the drive does not report Asymmetric Namespace Access (no `ana:` in its profile)".into());
        };
        if anagrpid == 0 || anagrpid > model.groups {
            return Err(format!("ANA group {anagrpid} does not exist: ANAGRPIDs are 1 to {}", model.groups));
        }
        let Some(state) = AnaState::from_u8(state) else {
            return Err(format!("{state:#x} is not an ANA state (01h–04h, 0Fh)"));
        };
        let stale_log = self.quirks.has(Quirk::AnaLogStale);
        let silent = self.quirks.has(Quirk::AnaChangeNotNotified);
        let Some(c) = self.controller_state_mut(cntlid) else {
            return Err(format!("the subsystem has no controller {cntlid}"));
        };
        if c.ana.state(anagrpid) == state {
            return Ok(());
        }
        c.ana.states.insert(anagrpid, state);
        if !stale_log {
            // Quirk `ana-log-stale`: the log page keeps the state it had (§5.14.1.12 broken).
            c.ana.logged.insert(anagrpid, state);
        }
        let group = c.ana.group_chgcnt.entry(anagrpid).or_insert(0);
        *group = bump(*group);
        c.ana.chgcnt = bump(c.ana.chgcnt);
        let enabled = c.features.async_event_configuration.ana_change_notices();
        if enabled && !c.ana.notice_outstanding && !silent {
            // Quirk `ana-change-not-notified`: no notice is raised (§8.20.4 broken).
            c.ana.notice_outstanding = true;
            c.events.push(AsyncEvent {
                event_type: EVENT_TYPE_NOTICE,
                info: ANA_CHANGE_NOTICE,
                log_page: LogPageId::AsymmetricNamespaceAccess as u8,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_reports_and_assigns() {
        let m = AnaModel { groups: 2, transition_ms: 1500 };
        assert_eq!(m.problem(), None);
        assert_eq!(m.anatt(), 2);
        assert_eq!(m.anacap().into_bits(), 0xDF);
        assert_eq!(m.group_for(1, 0), Ok(1));
        assert_eq!(m.group_for(4, 0), Ok(2));
        assert_eq!(m.group_for(4, 1), Ok(1));
        assert_eq!(m.group_for(4, 3), Err(Status::ANA_GROUP_IDENTIFIER_INVALID));
        assert!(AnaModel { groups: 0, transition_ms: 1 }.problem().is_some());
        assert!(AnaModel { groups: 1, transition_ms: 0 }.problem().is_some());
    }

    #[test]
    fn change_counts_wrap_past_zero() {
        assert_eq!(bump(0), 1);
        assert_eq!(bump(u64::MAX), 1);
    }
}
