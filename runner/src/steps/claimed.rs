//! `check: claimed_capabilities`: every capability the drive's claims promise (a claims
//! file given with `--claims`, or the simulated drive's profile) is one the controller
//! itself reports. Which field reports which claim is [`crate::claims::unreported`]'s
//! table (FNA / SANICAP for crypto erase, NN and OACS for namespaces, FRMW bit 4, CMIC
//! bit 0, CAP.AMS). A breach is the claim's failure, citing the claim's file:line:col,
//! not a rule of the specification: the datasheet and the drive disagree. Every claim
//! judged is recorded met or breached for the run's claims summary, and the failure
//! lists every breach.

use nvme::device::Data;
use nvme::spec::identify::{identify as identify_cmd, Cns, IdentifyController};
use nvme::spec::registers::{offset, Cap};
use zerocopy::{FromZeros, IntoBytes};

use super::{CaseContext, StepError, StepResult};
use crate::claims::identify::{checked, Breach};
use crate::claims::ClaimJudgement;
use crate::verdict::{Failure, Rule};

pub(super) fn claimed_capabilities(ctx: &mut CaseContext<'_>) -> StepResult {
    let Some(claims) = ctx.claims.clone() else {
        ctx.log.push(
            "claimed_capabilities: no claims given (--claims, or the simulated drive's profile): nothing to judge"
                .into(),
        );
        return Ok(());
    };
    let mut id = IdentifyController::new_zeroed();
    let what = "Identify Controller (CNS 01h)";
    let c = ctx.admin(what, identify_cmd(Cns::Controller, 0, 0), Data::FromDevice(id.as_mut_bytes()))?;
    ctx.require_success(what, &c)?;
    let cap = match ctx.device.registers() {
        Some(regs) => {
            Some(Cap::from_bits(regs.read64(offset::CAP).map_err(|e| StepError::Error(format!("reading CAP: {e}")))?))
        }
        None => {
            ctx.log.push(
                "claimed_capabilities: the target's registers are not reachable: an arbitration claim is not judged \
                 (CAP.AMS reports it)"
                    .into(),
            );
            None
        }
    };
    let checked = checked(&claims, &id, cap);
    for c in &checked {
        let observed = format!("{} ({})", c.breach.found, c.breach.rule);
        ctx.claim_judgements.push(if c.reported {
            ClaimJudgement::met(c.key, observed)
        } else {
            ClaimJudgement::breached(c.key, observed)
        });
    }
    let breaches: Vec<&Breach> = checked.iter().filter(|c| !c.reported).map(|c| &c.breach).collect();
    let sent = if cap.is_some() { "Identify Controller (CNS 01h); CAP read" } else { what };
    if breaches.is_empty() {
        ctx.log.push(format!(
            "claimed_capabilities: every capability {} claims for {} is reported",
            claims.origin, claims.drive
        ));
        return Ok(());
    }
    for b in &breaches {
        ctx.log.push(format!("claimed_capabilities: {} — {}: {}", b.claim, b.rule, b.found));
    }
    Err(StepError::Fail(breaches_failure(&breaches, sent)))
}

/// The failure of every breached claim: each cited in the section, each field and what
/// it reports in the evidence.
fn breaches_failure(breaches: &[&Breach], sent: &str) -> Failure {
    let mut cited: Vec<&str> = Vec::new();
    for b in breaches {
        if !cited.contains(&b.claim.as_str()) {
            cited.push(&b.claim);
        }
    }
    let count = match breaches.len() {
        1 => "a capability".to_string(),
        n => format!("{n} capabilities"),
    };
    Failure {
        rule: Rule {
            section: format!("claim {}", cited.join("; claim ")),
            text: format!(
                "the drive's datasheet claims {count} its controller does not report (a claim, not a rule of the \
                 specification)"
            ),
        },
        sent: sent.into(),
        observed: breaches.iter().map(|b| format!("{} for {}", b.found, b.claim)).collect::<Vec<_>>().join("; "),
        expected: breaches.iter().map(|b| b.rule.clone()).collect::<Vec<_>>().join("; "),
    }
}
