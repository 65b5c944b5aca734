//! Claimed capabilities the controller's own data contradicts: a datasheet says the drive
//! can, Identify Controller (or CAP) says it cannot. Each is a [`Breach`] of the claim,
//! naming the field that should have reported it (NVMe 1.4 "Figure 247: Identify –
//! Identify Controller Data Structure", "Figure 68: Offset 0h: CAP – Controller
//! Capabilities").
//!
//! | claim (value `true`)                 | reported by |
//! |--------------------------------------|-------------|
//! | `crypto_erase`                       | FNA bit 2 (Cryptographic Erase Supported), or SANICAP bit 0 (Crypto Erase, NVMe 1.3) |
//! | `namespaces.max`                     | NN ≥ max; with max > 1 also OACS bit 3 (Namespace Management) |
//! | `firmware_activation_without_reset`  | FRMW bit 4, on controllers of NVMe 1.2 and later |
//! | `dual_port`                          | CMIC bit 0 (the NVM subsystem may contain two or more ports) |
//! | `arbitration` (either flag)          | CAP.AMS bit 0 (Weighted Round Robin with Urgent Priority Class) |
//!
//! FRMW bit 4 came with the Firmware Commit action 011b (activate immediately, without a
//! reset) and MTFA in NVMe 1.2; before 1.2 the bit is reserved. So on a controller whose
//! VER is below 1.2 (0 included: 1.0 and 1.1 may leave it zero) the claim cannot be
//! checked and is not a breach; on 1.2 and 1.2a (VER 1.2.0) it is.
//!
//! [`checked`] gives every claim it can judge, borne out or not (what the run's claims
//! summary records); [`unreported`] the breaches only.
//!
//! Without CAP (a kernel-driven target, whose registers nvtest cannot read) arbitration
//! cannot be checked and is not a breach. `ready_time`, `power_loss_protection`,
//! `hot_plug` and `namespaces.lba_sizes` have no Identify Controller bit (the LBA formats
//! are Identify Namespace's, judged by the cases that format): never a breach here.

use nvme::spec::identify::IdentifyController;
use nvme::spec::registers::Cap;
use nvme::spec::Version;

use super::{Claimed, Claims};

/// A claimed capability the controller does not report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breach {
    /// The claim, cited ([`Claims::cite`]).
    pub claim: String,
    /// The field that would report it, e.g. `Identify Controller FNA bit 2 (Cryptographic
    /// Erase Supported)`.
    pub rule: String,
    /// What the controller reports instead.
    pub found: String,
}

/// One claimed capability looked up where the controller reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The promise's key ([`super::Promise::key`]), e.g. `crypto_erase`.
    pub key: &'static str,
    /// Whether the controller reports it.
    pub reported: bool,
    pub breach: Breach,
}

/// The claimed capabilities (claims whose value is `true`, and the namespace count) that
/// `identify` (and `cap`, when the registers can be read) contradicts, in claim order.
pub fn unreported(claims: &Claims, identify: &IdentifyController, cap: Option<Cap>) -> Vec<Breach> {
    checked(claims, identify, cap).into_iter().filter(|c| !c.reported).map(|c| c.breach).collect()
}

/// Every claimed capability `identify` (and `cap`) can say something about, in claim
/// order, each with what the controller reports (`found`) and whether that bears the
/// claim out. A claim nothing here can judge (FRMW bit 4 before NVMe 1.2, arbitration
/// without CAP) is left out.
pub fn checked(claims: &Claims, identify: &IdentifyController, cap: Option<Cap>) -> Vec<Checked> {
    let mut out = Vec::new();
    let mut check = |key: &'static str, reported: bool, claim: String, rule: &str, found: String| {
        out.push(Checked { key, reported, breach: Breach { claim, rule: rule.to_string(), found } });
    };
    let set = |on: bool| if on { "set" } else { "cleared" };

    if let Some(c) = claimed(&claims.crypto_erase) {
        let reported = identify.fna.crypto_erase() || identify.sanicap.ces();
        check(
            "crypto_erase",
            reported,
            claims.cite(c, "crypto_erase: true"),
            "Identify Controller FNA bit 2 (Cryptographic Erase Supported) or SANICAP bit 0 (Crypto Erase Supported)",
            format!(
                "FNA {:02X}h and SANICAP {:08X}h: {}",
                identify.fna.into_bits(),
                identify.sanicap.into_bits(),
                if reported { "reported" } else { "both bits cleared" }
            ),
        );
    }
    if let Some(c) = &claims.namespaces {
        let max = c.value.max;
        let cite = || claims.cite(c, &format!("namespaces: up to {max}"));
        check(
            "namespaces",
            identify.nn >= max,
            cite(),
            "Identify Controller NN (Number of Namespaces)",
            format!("NN {}", identify.nn),
        );
        if max > 1 {
            let on = identify.oacs.namespace_management();
            check(
                "namespaces",
                on,
                cite(),
                "Identify Controller OACS bit 3 (Namespace Management and Namespace Attachment supported)",
                format!("OACS {:04X}h: bit 3 {}", identify.oacs.into_bits(), set(on)),
            );
        }
    }
    if let Some(c) = claimed(&claims.firmware_activation_without_reset) {
        let version = identify.version();
        if version >= Version::V1_2 {
            let on = identify.frmw.activation_without_reset();
            check(
                "firmware_activation_without_reset",
                on,
                claims.cite(c, "firmware_activation_without_reset: true"),
                "Identify Controller FRMW bit 4 (Firmware Activation Without Reset Support, NVMe 1.2 and later)",
                format!("FRMW {:02X}h: bit 4 {} (VER {version})", identify.frmw.into_bits(), set(on)),
            );
        }
    }
    if let Some(c) = claimed(&claims.dual_port) {
        let on = identify.cmic.multiple_ports();
        check(
            "dual_port",
            on,
            claims.cite(c, "dual_port: true"),
            "Identify Controller CMIC bit 0 (the NVM subsystem may contain two or more physical PCI Express ports)",
            format!("CMIC {:02X}h: bit 0 {}", identify.cmic.into_bits(), set(on)),
        );
    }
    if let (Some(c), Some(cap)) = (&claims.arbitration, cap) {
        let a = c.value;
        if a.weighted_round_robin || a.urgent {
            let on = cap.ams() & 1 != 0;
            check(
                "arbitration",
                on,
                claims.cite(c, arbitration_what(&a)),
                "CAP.AMS bit 0 (Weighted Round Robin with Urgent Priority Class)",
                format!("CAP.AMS {:02b}b: bit 0 {}", cap.ams(), set(on)),
            );
        }
    }
    out
}

/// An arbitration claim in words, as citations name it.
pub(crate) fn arbitration_what(a: &super::ArbitrationClaim) -> &'static str {
    match (a.weighted_round_robin, a.urgent) {
        (true, true) => "arbitration: weighted round robin with urgent",
        (true, false) => "arbitration: weighted round robin",
        _ => "arbitration: urgent priority class",
    }
}

/// A capability claimed (`true`), not disclaimed.
fn claimed(claim: &Option<Claimed<bool>>) -> Option<&Claimed<bool>> {
    claim.as_ref().filter(|c| c.value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::{claims_of_profile, parse_claims};
    use nvme::spec::identify::{Cmic, Fna, Frmw, Oacs, Sanicap};
    use zerocopy::FromZeros;

    const EVERY_CAPABILITY: &str = "drive: d\n\
        crypto_erase: true\n\
        namespaces: {max: 32, lba_sizes: [512, 4096]}\n\
        firmware_activation_without_reset: true\n\
        dual_port: true\n\
        arbitration: {weighted_round_robin: true, urgent: true}\n\
        ready_time: 5 s\n\
        power_loss_protection: true\n\
        hot_plug: true\n";

    fn claims(text: &str) -> Claims {
        parse_claims(text, "c.yaml").unwrap()
    }

    /// A 1.4 controller reporting every capability claimed in [`EVERY_CAPABILITY`].
    fn reporting_all() -> IdentifyController {
        let mut id = IdentifyController::new_zeroed();
        id.ver = Version::V1_4.to_register();
        id.fna = Fna::new().with_crypto_erase(true);
        id.nn = 32;
        id.oacs = Oacs::new().with_namespace_management(true);
        id.frmw = Frmw::new().with_slots(1).with_activation_without_reset(true);
        id.cmic = Cmic::new().with_multiple_ports(true);
        id
    }

    fn wrr() -> Cap {
        Cap::new().with_ams(1)
    }

    /// The one breach `unreported` finds, which breaches `rule`.
    fn only_breach(c: &Claims, id: &IdentifyController, cap: Option<Cap>, rule: &str) -> Breach {
        let breaches = unreported(c, id, cap);
        let rules: Vec<&str> = breaches.iter().map(|b| b.rule.as_str()).collect();
        assert_eq!(rules, [rule]);
        breaches.into_iter().next().unwrap()
    }

    #[test]
    fn a_controller_reporting_every_claimed_capability_breaches_nothing() {
        assert_eq!(unreported(&claims(EVERY_CAPABILITY), &reporting_all(), Some(wrr())), vec![]);
    }

    #[test]
    fn claims_of_false_or_without_an_identify_bit_are_never_breaches() {
        let c = claims(
            "drive: d\ncrypto_erase: false\ndual_port: false\nfirmware_activation_without_reset: false\n\
             arbitration: {weighted_round_robin: false, urgent: false}\n\
             ready_time: 1 ns\npower_loss_protection: true\nhot_plug: true\nnamespaces: {max: 1, lba_sizes: [65536]}\n",
        );
        let mut id = IdentifyController::new_zeroed();
        id.nn = 1;
        assert_eq!(unreported(&c, &id, Some(Cap::new())), vec![]);
    }

    #[test]
    fn crypto_erase_is_reported_by_fna_bit_2_or_sanicap_bit_0() {
        let c = claims("drive: d\ncrypto_erase: true\n");
        let mut id = reporting_all();
        id.fna = Fna::new();
        let b = only_breach(
            &c,
            &id,
            None,
            "Identify Controller FNA bit 2 (Cryptographic Erase Supported) or SANICAP bit 0 (Crypto Erase Supported)",
        );
        assert_eq!(b.claim, "c.yaml:2:15 (crypto_erase: true)");
        assert_eq!(b.found, "FNA 00h and SANICAP 00000000h: both bits cleared");
        id.sanicap = Sanicap::new().with_ces(true);
        assert_eq!(unreported(&c, &id, None), vec![]);
    }

    #[test]
    fn namespaces_need_nn_and_with_more_than_one_namespace_management() {
        let c = claims("drive: d\nnamespaces: {max: 32}\n");
        let mut id = reporting_all();
        id.nn = 31;
        let b = only_breach(&c, &id, None, "Identify Controller NN (Number of Namespaces)");
        assert_eq!((b.claim.as_str(), b.found.as_str()), ("c.yaml:2:13 (namespaces: up to 32)", "NN 31"));
        id.nn = 32;
        id.oacs = Oacs::new().with_format_nvm(true);
        let b = only_breach(
            &c,
            &id,
            None,
            "Identify Controller OACS bit 3 (Namespace Management and Namespace Attachment supported)",
        );
        assert_eq!(b.found, "OACS 0002h: bit 3 cleared");
        // One namespace needs no management.
        id.nn = 1;
        assert_eq!(unreported(&claims("drive: d\nnamespaces: {max: 1}\n"), &id, None), vec![]);
    }

    #[test]
    fn firmware_activation_without_reset_is_frmw_bit_4_from_nvme_1_2() {
        let c = claims("drive: d\nfirmware_activation_without_reset: true\n");
        let mut id = reporting_all();
        id.frmw = Frmw::new().with_slots(1).with_slot1_read_only(true);
        for version in [Version::V1_2, Version::V1_3, Version::V1_4] {
            id.ver = version.to_register();
            let b = only_breach(
                &c,
                &id,
                None,
                "Identify Controller FRMW bit 4 (Firmware Activation Without Reset Support, NVMe 1.2 and later)",
            );
            assert_eq!(b.found, format!("FRMW 03h: bit 4 cleared (VER {version})"));
        }
        // Reserved before 1.2 (VER 0 on a 1.0 or 1.1 controller): nothing to check.
        for version in [Version::new(0, 0, 0), Version::V1_1] {
            id.ver = version.to_register();
            assert_eq!(unreported(&c, &id, None), vec![]);
        }
    }

    #[test]
    fn dual_port_is_cmic_bit_0() {
        let c = claims("drive: d\ndual_port: true\n");
        let mut id = reporting_all();
        id.cmic = Cmic::new().with_multiple_controllers(true);
        let b = only_breach(
            &c,
            &id,
            None,
            "Identify Controller CMIC bit 0 (the NVM subsystem may contain two or more physical PCI Express ports)",
        );
        assert_eq!(b.found, "CMIC 02h: bit 0 cleared");
    }

    #[test]
    fn arbitration_is_cap_ams_bit_0_when_cap_can_be_read() {
        let id = reporting_all();
        for (text, what) in [
            ("{weighted_round_robin: true, urgent: true}", "weighted round robin with urgent"),
            ("{weighted_round_robin: true}", "weighted round robin"),
            ("{urgent: true}", "urgent priority class"),
        ] {
            let c = claims(&format!("drive: d\narbitration: {text}\n"));
            let b = only_breach(
                &c,
                &id,
                Some(Cap::new().with_ams(2)),
                "CAP.AMS bit 0 (Weighted Round Robin with Urgent Priority Class)",
            );
            assert_eq!(b.claim, format!("c.yaml:2:14 (arbitration: {what})"));
            assert_eq!(b.found, "CAP.AMS 10b: bit 0 cleared");
            assert_eq!(unreported(&c, &id, Some(wrr())), vec![], "{text}");
            // A kernel target: CAP cannot be read, so nothing can be said.
            assert_eq!(unreported(&c, &id, None), vec![], "{text}");
        }
    }

    #[test]
    fn every_unreported_capability_is_one_breach() {
        let b = unreported(&claims(EVERY_CAPABILITY), &IdentifyController::new_zeroed(), Some(Cap::new()));
        // FRMW is not checked: VER 0 (pre-1.2) leaves bit 4 reserved.
        assert_eq!(b.len(), 5, "{b:#?}");
        let mut id = IdentifyController::new_zeroed();
        id.ver = Version::V1_2.to_register();
        assert_eq!(unreported(&claims(EVERY_CAPABILITY), &id, Some(Cap::new())).len(), 6);
    }

    /// The shipped simulated drives claim only what they report. CAP is not known here
    /// (the 1.4 profile's CAP.AMS is set by the queue engine), so arbitration is left out.
    #[test]
    fn the_shipped_profiles_claims_load_and_their_drives_report_them() {
        for (name, text) in [
            ("enterprise-1.4", include_str!("../../../fixtures/sim/enterprise-1.4.yaml")),
            ("enterprise-1.2a", include_str!("../../../fixtures/sim/enterprise-1.2a.yaml")),
        ] {
            let origin = format!("fixtures/sim/{name}.yaml");
            let c = claims_of_profile(text, &origin).unwrap().unwrap_or_else(|| panic!("{name} has no claims"));
            assert!(!c.is_empty() && !c.read_qos.is_empty() && c.namespaces.is_some(), "{name}");
            let q = &c.read_qos[0].value;
            assert_eq!(
                (q.read_iops, q.block_bytes, q.background_write_bytes_per_s, q.percentile, q.latency),
                (50_000, 4096, 500_000_000, 99.9, std::time::Duration::from_micros(120)),
                "{name}"
            );
            let drive = nvme_sim::Subsystem::new(nvme_sim::Profile::builtin(name).unwrap()).unwrap();
            assert_eq!(unreported(&c, &drive.identify_controller(), None), vec![], "{name}");
        }
    }
}
