//! `check: claimed_capabilities`: every capability the drive's claims promise (a claims
//! file given with `--claims`, or the simulated drive's profile) is one the controller
//! itself reports. Which field reports which claim is [`crate::claims::unreported`]'s
//! table (FNA / SANICAP for crypto erase, NN and OACS for namespaces, FRMW bit 4, CMIC
//! bit 0, CAP.AMS). A breach is the claim's failure, citing the claim's file:line:col,
//! not a rule of the specification: the datasheet and the drive disagree.

use nvme::device::Data;
use nvme::spec::identify::{identify as identify_cmd, Cns, IdentifyController};
use nvme::spec::registers::{offset, Cap};
use zerocopy::{FromZeros, IntoBytes};

use super::{CaseContext, StepError, StepResult};
use crate::claims::unreported;
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
    let breaches = unreported(&claims, &id, cap);
    let sent = if cap.is_some() { "Identify Controller (CNS 01h); CAP read" } else { what };
    let Some(first) = breaches.first() else {
        ctx.log.push(format!(
            "claimed_capabilities: every capability {} claims for {} is reported",
            claims.origin, claims.drive
        ));
        return Ok(());
    };
    for b in &breaches {
        ctx.log.push(format!("claimed_capabilities: {} — {}: {}", b.claim, b.rule, b.found));
    }
    Err(StepError::Fail(Failure {
        rule: Rule {
            section: format!("claim {}", first.claim),
            text: format!(
                "the drive's datasheet claims a capability its controller does not report in {} (a claim, not a rule \
                 of the specification)",
                first.rule
            ),
        },
        sent: sent.into(),
        observed: breaches.iter().map(|b| format!("{} for {}", b.found, b.claim)).collect::<Vec<_>>().join("; "),
        expected: breaches.iter().map(|b| b.rule.clone()).collect::<Vec<_>>().join("; "),
    }))
}
