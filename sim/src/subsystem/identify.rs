//! Identify (admin opcode 06h, NVMe 1.4 §5.15): the controller, namespace, list and
//! descriptor data structures the subsystem returns, built from the profile and the
//! namespaces' current state.
//!
//! NSID rules (§5.15.1, "Identify – CNS Values"): an invalid NSID (0, above NN, or
//! FFFFFFFFh where it has no meaning) is Invalid Namespace or Format; an inactive NSID
//! returns zeroes for CNS 00h, an unallocated one zeroes for CNS 11h.

use super::namespace::Namespace;
use super::{Quirk, Subsystem, NSID_ALL};
use crate::exec::{DataPointer, Done};
use crate::profile::OptionalCommand;
use nvme::spec::identify::{
    ascii_padded, encode_descriptor_list, Cmic, Cns, ControllerList, Dlfeat, Flbas, FlushBroadcast, Fpi, Frmw,
    IdentifyCdw10, IdentifyController, IdentifyNamespace, LbaFormat, Lpa, Mc, NamespaceList, Nmic, NsDescriptor, Oacs,
    Oaes, Oncs, PowerStateDescriptor, Rescap, Vwc,
};
use nvme::spec::{Status, Version};
use zerocopy::little_endian::U128;
use zerocopy::{FromZeros, IntoBytes};

/// ELPE + 1: Error Information log entries kept.
pub const ERROR_LOG_ENTRIES: usize = 64;
/// WCTEMP and CCTEMP, in kelvins (70 °C and 80 °C), and the composite temperature reported (40 °C).
pub const WCTEMP: u16 = 343;
pub const CCTEMP: u16 = 353;
pub const COMPOSITE_TEMPERATURE: u16 = 313;

impl Subsystem {
    pub(super) fn identify(&mut self, cmd: &nvme::spec::Command, data: &dyn DataPointer) -> Done {
        let cdw10 = IdentifyCdw10::from_command(cmd);
        let cns = match cdw10.known_cns() {
            Some(cns) if cns.introduced_in() <= self.version() => cns,
            // A CNS value this version does not define is reserved: Invalid Field.
            _ => return Done::err(Status::INVALID_FIELD),
        };
        let namespace_management = self.supports(OptionalCommand::NamespaceManagement);
        let result: Result<Vec<u8>, Status> = match cns {
            Cns::Controller => Ok(self.identify_controller().as_bytes().to_vec()),
            Cns::Namespace => self.identify_namespace_active(cmd.nsid).map(|id| id.as_bytes().to_vec()),
            Cns::ActiveNamespaceList => self.active_list(cmd.nsid).map(|l| l.as_bytes().to_vec()),
            Cns::NamespaceDescriptorList => self.descriptor_list(cmd.nsid),
            _ if !namespace_management => Err(Status::INVALID_FIELD),
            Cns::AllocatedNamespaceList => self.allocated_list(cmd.nsid).map(|l| l.as_bytes().to_vec()),
            Cns::AllocatedNamespace => self.identify_namespace_allocated(cmd.nsid).map(|id| id.as_bytes().to_vec()),
            Cns::NamespaceAttachedControllers => {
                self.attached_controllers(cmd.nsid, cdw10.cntid).map(|l| l.as_bytes().to_vec())
            }
            Cns::ControllerList => self.subsystem_controllers(cdw10.cntid).map(|l| l.as_bytes().to_vec()),
        };
        match result.and_then(|bytes| data.copy_to_host(&bytes)) {
            Ok(()) => Done::ok(),
            Err(s) => Done::err(s),
        }
    }

    /// "Figure 247: Identify – Identify Controller Data Structure".
    pub fn identify_controller(&self) -> IdentifyController {
        let p = &self.profile;
        let v14 = self.version() >= Version::V1_4;
        let mut id = IdentifyController::new_zeroed();
        id.vid = p.identity.pci_vendor_id;
        id.ssvid = p.identity.pci_subsystem_vendor_id;
        id.sn = ascii_padded(&p.identity.serial);
        if self.quirks.has(Quirk::SerialNotAscii) {
            // Quirk: a control character in SN (Figure 247 SN: printable ASCII, broken).
            id.sn[1] = 0x07;
        }
        id.mn = ascii_padded(&p.identity.model);
        id.fr = self.firmware().running;
        id.rab = 6;
        // IEEE OUI, least significant byte first.
        let oui = p.identity.ieee_oui.to_le_bytes();
        id.ieee = [oui[0], oui[1], oui[2]];
        // CMIC (Figure 247): one port per controller, so bits 0 (two or more ports) and 1
        // (two or more controllers) go together. No SR-IOV; bit 3 with ANA reporting.
        let multiple = self.multiple_controllers() && !self.quirks.has(Quirk::CmicSingleController);
        // Quirk `cmic-single-controller`: CMIC 0 on a multi-controller subsystem (Figure 247 CMIC broken).
        id.cmic = Cmic::new()
            .with_multiple_ports(multiple)
            .with_multiple_controllers(multiple)
            .with_ana_reporting(p.ana.is_some());
        if let Some(ana) = &p.ana {
            // ANATT, ANACAP, ANAGRPMAX, NANAGRPID (Figure 247, NVMe 1.4; §8.20).
            id.anatt = ana.anatt();
            id.anacap = ana.anacap().into_bits();
            id.anagrpmax = ana.groups;
            id.nanagrpid = ana.groups;
        }
        id.mdts = p.controller.mdts;
        id.cntlid = if self.quirks.has(Quirk::CntlidDuplicate) {
            // Quirk: every port reports the first port's CNTLID (Figure 247 CNTLID: unique
            // within the NVM subsystem, broken).
            p.controller.cntlid
        } else {
            self.controller.cntlid
        };
        id.ver = if self.quirks.has(Quirk::VerMismatch) {
            // Quirk: VER one minor version below VS (Figure 247 VER broken).
            let v = self.version();
            Version::new(v.major, v.minor.saturating_sub(1), v.tertiary).to_register()
        } else {
            self.version().to_register()
        };
        id.oaes = Oaes::new()
            .with_namespace_attribute_notices(p.controller.namespace_attribute_notices)
            .with_firmware_activation_notices(p.firmware.as_ref().is_some_and(|f| f.activation_without_reset))
            .with_ana_change_notices(p.ana.is_some());
        if v14 {
            // CNTRLTYPE (1.4): 1h, an I/O controller.
            id.cntrltype = 1;
        }
        id.oacs = Oacs::new()
            .with_format_nvm(self.supports(OptionalCommand::FormatNvm))
            .with_firmware(p.firmware.is_some())
            .with_namespace_management(self.supports(OptionalCommand::NamespaceManagement));
        id.acl = p.controller.acl;
        id.aerl = p.controller.aerl;
        // The profile's slots, or one read-only slot with no firmware download or commit.
        id.frmw = match &p.firmware {
            Some(f) => {
                // FWUG is NVMe 1.3 and later.
                if self.version() >= Version::V1_3 {
                    id.fwug = f.fwug;
                }
                id.mtfa = (f.mtfa_ms / 100) as u16;
                Frmw::new()
                    .with_slot1_read_only(f.slot1_read_only)
                    .with_slots(f.slots)
                    .with_activation_without_reset(f.activation_without_reset)
            }
            None => Frmw::new().with_slot1_read_only(true).with_slots(1),
        };
        id.lpa = Lpa::new().with_commands_supported_and_effects(true).with_extended_data(self.extended_log_data());
        id.elpe = (ERROR_LOG_ENTRIES - 1) as u8;
        id.npss = 0;
        id.wctemp = WCTEMP;
        id.cctemp = CCTEMP;
        id.tnvmcap = U128::new(p.capacity_bytes as u128);
        id.unvmcap = U128::new(self.unallocated_bytes());
        id.sqes = 0x66;
        id.cqes = 0x44;
        id.nn = if self.quirks.has(Quirk::NnUnderstated) {
            // Quirk: NN one below the namespaces that can exist (Figure 247 NN broken).
            self.max_nsid().saturating_sub(1)
        } else {
            self.max_nsid()
        };
        id.oncs = Oncs::new()
            .with_compare(self.supports(OptionalCommand::Compare))
            .with_write_uncorrectable(self.supports(OptionalCommand::WriteUncorrectable))
            .with_dataset_management(self.supports(OptionalCommand::DatasetManagement))
            .with_write_zeroes(self.supports(OptionalCommand::WriteZeroes))
            .with_verify(self.supports(OptionalCommand::Verify))
            .with_save_select(true)
            .with_reservations(p.reservations.is_some());
        // FNA and SANICAP as the profile's erase section says (SANICAP: 1.3 and later;
        // the profile refuses a sanitize section on an older version).
        id.fna = p.erase.fna();
        if self.quirks.has(Quirk::FnaHidesCryptoErase) {
            // Quirk: FNA bit 2 clear, SES 010b still carried out (Figure 247 FNA broken).
            id.fna.set_crypto_erase(false);
        }
        id.sanicap = p.erase.sanicap();
        id.vwc = Vwc::new().with_present(p.controller.volatile_write_cache).with_flush_broadcast(if v14 {
            FlushBroadcast::Supported
        } else {
            FlushBroadcast::NotIndicated
        });
        // AWUN = AWUPF: a write within the power-fail unit is atomic in normal operation
        // too (commands execute one at a time here).
        id.awupf = p.power.awupf;
        id.awun = id.awupf;
        // SUBNQN: NVMe 1.2.1 and later.
        if self.version() >= Version::V1_2_1 {
            id.subnqn = self.subnqn();
        }
        id.psd[0] = PowerStateDescriptor { mp: 2500, ..PowerStateDescriptor::default() };
        id
    }

    /// Whether Get Log Page has NUMDU and LPOL/LPOU (LPA bit 2, NVMe 1.2.1 and later).
    pub(super) fn extended_log_data(&self) -> bool {
        self.version() >= Version::V1_2_1
    }

    /// SUBNQN in the form §7.9 gives for a controller without an assigned NQN:
    /// `nqn.2014-08.org.nvmexpress:` then VID, SSVID (hex), SN and MN.
    fn subnqn(&self) -> [u8; 256] {
        let p = &self.profile.identity;
        let text = format!(
            "nqn.2014-08.org.nvmexpress:{:04x}{:04x}{:<20}{:<40}",
            p.pci_vendor_id, p.pci_subsystem_vendor_id, p.serial, p.model
        );
        let mut out = [0u8; 256];
        for (dst, src) in out.iter_mut().take(255).zip(text.bytes()) {
            *dst = src;
        }
        out
    }

    /// The LBA Format table (LBAF0 to LBAF`NLBAF`).
    fn lba_format_table(&self) -> (u8, [LbaFormat; 16]) {
        let mut table = [LbaFormat::default(); 16];
        for (slot, f) in table.iter_mut().zip(&self.profile.lba_formats) {
            *slot = LbaFormat::new(f.lbads_log2(), f.ms);
            if f.lbads == 4096 && self.quirks.has(Quirk::LbaFormatLbadsZero) {
                // Quirk: a listed format without a data size (Figure 245 LBADS broken).
                slot.lbads = 0;
            }
        }
        (self.profile.lba_formats.len() as u8 - 1, table)
    }

    /// The fields every namespace shares (and the common capabilities of NSID FFFFFFFFh).
    fn namespace_common(&self) -> IdentifyNamespace {
        let mut id = IdentifyNamespace::new_zeroed();
        let (nlbaf, lbaf) = self.lba_format_table();
        id.nlbaf = nlbaf;
        id.lbaf = lbaf;
        let any_metadata = self.profile.lba_formats.iter().any(|f| f.ms > 0);
        id.mc = Mc::new().with_extended_lba(any_metadata).with_separate_buffer(any_metadata);
        // FPI (1.2): supported; a format completes before its command does.
        id.fpi = Fpi::new().with_supported(true);
        if self.version() >= Version::V1_3 {
            id.dlfeat = Dlfeat::new()
                .with_read_behavior(self.profile.dlfeat.read_behavior())
                .with_write_zeroes_deallocate(self.supports(OptionalCommand::WriteZeroes) && self.fill_byte() == 0);
        }
        id
    }

    /// "Figure 245: Identify – Identify Namespace Data Structure" for an allocated namespace.
    pub fn identify_namespace(&self, ns: &Namespace) -> IdentifyNamespace {
        let mut id = self.namespace_common();
        id.nsze = if self.quirks.has(Quirk::NszeUnderstated) {
            // Quirk: one block fewer than the namespace has (Figure 245 NSZE broken).
            ns.nsze.saturating_sub(1)
        } else {
            ns.nsze
        };
        id.ncap = if self.quirks.has(Quirk::NcapExceedsNsze) {
            // Quirk: NCAP = NSZE + 1 (Figure 245 NCAP ≤ NSZE broken).
            id.nsze + 1
        } else {
            id.nsze
        };
        id.nuse = if self.quirks.has(Quirk::NuseExceedsNcap) {
            // Quirk: NUSE = NCAP + 1 (Figure 245 NUSE ≤ NCAP broken).
            id.ncap + 1
        } else if self.quirks.has(Quirk::NuseNotUpdated) {
            // Quirk: NUSE never counts what was written (Figure 245 NUSE broken).
            0
        } else {
            ns.nuse().min(id.ncap)
        };
        id.flbas = Flbas::new().with_format(ns.format.index).with_extended(ns.format.extended);
        if self.quirks.has(Quirk::FlbasBeyondNlbaf) {
            // Quirk: FLBAS names a format beyond NLBAF (Figure 245 FLBAS broken).
            id.flbas.set_format((id.nlbaf + 1).min(15));
        }
        id.nvmcap = U128::new(ns.capacity_bytes());
        id.nmic = Nmic::new().with_shared(ns.shared);
        id.anagrpid = ns.anagrpid;
        id.rescap = Rescap::from_bits(self.reservations().map_or(0, |m| m.rescap(self.version())));
        let (nguid, eui64) = self.reported_ids(ns);
        id.nguid = nguid;
        id.eui64 = eui64;
        id
    }

    /// NGUID and EUI64 as reported.
    fn reported_ids(&self, ns: &Namespace) -> ([u8; 16], [u8; 8]) {
        if self.quirks.has(Quirk::DuplicateNguid) {
            // Quirk: every namespace reports the first namespace's identifiers (§7.11 broken).
            return self.unique_ids(1);
        }
        if self.quirks.has(Quirk::NoNamespaceIdentifiers) {
            // Quirk: no identifier at all (§7.11).
            return ([0; 16], [0; 8]);
        }
        (ns.nguid, ns.eui64)
    }

    /// CNS 00h: an active NSID's data; zeroes for an inactive valid NSID; the common
    /// capabilities for FFFFFFFFh when Namespace Management is supported.
    fn identify_namespace_active(&self, nsid: u32) -> Result<IdentifyNamespace, Status> {
        if nsid == NSID_ALL && self.supports(OptionalCommand::NamespaceManagement) {
            return Ok(self.namespace_common());
        }
        if !self.is_valid_nsid(nsid) {
            return Err(Status::INVALID_NAMESPACE_OR_FORMAT);
        }
        match self.namespace(nsid) {
            // Quirk `identify-zero-after-attach` (CNS 00h broken).
            Some(_) if self.late_attached.contains(&nsid) => Ok(IdentifyNamespace::new_zeroed()),
            Some(ns) if ns.is_attached_to(self.controller.cntlid) => Ok(self.identify_namespace(ns)),
            Some(ns) if self.quirks.has(Quirk::IdentifyInactiveNonzero) => {
                // Quirk: an inactive NSID returns its data (Figure 244, CNS 00h broken).
                Ok(self.identify_namespace(ns))
            }
            _ => Ok(IdentifyNamespace::new_zeroed()),
        }
    }

    /// CNS 11h: an allocated NSID's data, attached or not; zeroes if unallocated.
    fn identify_namespace_allocated(&self, nsid: u32) -> Result<IdentifyNamespace, Status> {
        if !self.is_valid_nsid(nsid) {
            return Err(Status::INVALID_NAMESPACE_OR_FORMAT);
        }
        Ok(match self.namespace(nsid) {
            // Quirk `allocated-identify-zero-when-detached`.
            Some(ns) if ns.attached.is_empty() && self.quirks.has(Quirk::AllocatedIdentifyZeroWhenDetached) => {
                IdentifyNamespace::new_zeroed()
            }
            Some(ns) => self.identify_namespace(ns),
            None => IdentifyNamespace::new_zeroed(),
        })
    }

    /// CNS 02h: active NSIDs greater than NSID, increasing. FFFFFFFEh and FFFFFFFFh are
    /// Invalid Namespace or Format.
    fn active_list(&self, nsid: u32) -> Result<NamespaceList, Status> {
        if nsid >= 0xFFFF_FFFE {
            return Err(Status::INVALID_NAMESPACE_OR_FORMAT);
        }
        let mut ids = self.active_nsids();
        if self.quirks.has(Quirk::ActiveListOmitsLast) {
            // Quirk: the highest active NSID is left out (Figure 244, CNS 02h broken).
            ids.pop();
        }
        list_after(&ids, nsid)
    }

    /// CNS 10h: allocated NSIDs greater than NSID, increasing.
    fn allocated_list(&self, nsid: u32) -> Result<NamespaceList, Status> {
        if nsid >= 0xFFFF_FFFE {
            return Err(Status::INVALID_NAMESPACE_OR_FORMAT);
        }
        let mut ids = if self.quirks.has(Quirk::AllocatedListOmitsInactive) {
            // Quirk: only attached namespaces listed (CNS 10h broken).
            self.active_nsids()
        } else {
            self.allocated_nsids()
        };
        // Quirk `deleted-namespace-stays-allocated`: deleted NSIDs still listed.
        ids.extend(&self.ghosts);
        ids.sort_unstable();
        ids.dedup();
        list_after(&ids, nsid)
    }

    /// CNS 03h (NVMe 1.3 and later): the EUI64 and NGUID descriptors of an active NSID.
    fn descriptor_list(&self, nsid: u32) -> Result<Vec<u8>, Status> {
        let ns = match self.namespace(nsid) {
            Some(ns) if ns.is_attached_to(self.controller.cntlid) => ns,
            _ => return Err(Status::INVALID_NAMESPACE_OR_FORMAT),
        };
        let (mut nguid, eui64) = self.reported_ids(ns);
        if self.quirks.has(Quirk::DescriptorListMismatch) {
            // Quirk: the NGUID descriptor differs from Identify Namespace's (Figure 248 broken).
            nguid[15] ^= 0xFF;
        }
        if self.quirks.has(Quirk::NoNamespaceIdentifiers) {
            return Ok(vec![0; 4096]);
        }
        let list = encode_descriptor_list(&[NsDescriptor::Eui64(eui64), NsDescriptor::Nguid(nguid)])
            .map_err(|_| Status::INTERNAL_ERROR)?;
        Ok(list.to_vec())
    }

    /// CNS 12h: the controllers `nsid` is attached to with a CNTLID ≥ `cntid`.
    fn attached_controllers(&self, nsid: u32, cntid: u16) -> Result<ControllerList, Status> {
        if !self.is_valid_nsid(nsid) {
            return Err(Status::INVALID_NAMESPACE_OR_FORMAT);
        }
        let mut ids: Vec<u16> = match self.namespace(nsid) {
            Some(ns) => ns.attached.iter().copied().filter(|c| *c >= cntid).collect(),
            None => Vec::new(),
        };
        // Quirk `controller-list-stale-after-detach`: controllers detached still listed.
        ids.extend(self.stale_attached.iter().filter(|(n, c)| *n == nsid && *c >= cntid).map(|(_, c)| *c));
        ids.sort_unstable();
        ids.dedup();
        if self.quirks.has(Quirk::ControllerListEmpty) {
            // Quirk: an empty list for an attached namespace (CNS 12h broken).
            ids.clear();
        }
        ControllerList::from_ids(&ids).map_err(|_| Status::INTERNAL_ERROR)
    }

    /// CNS 13h: the controllers of the subsystem with a CNTLID ≥ `cntid`.
    fn subsystem_controllers(&self, cntid: u16) -> Result<ControllerList, Status> {
        let ids: Vec<u16> = self.controller_ids().into_iter().filter(|c| *c >= cntid).collect();
        ControllerList::from_ids(&ids).map_err(|_| Status::INTERNAL_ERROR)
    }
}

/// A Namespace List of the `ids` greater than `after`.
fn list_after(ids: &[u32], after: u32) -> Result<NamespaceList, Status> {
    let ids: Vec<u32> = ids.iter().copied().filter(|n| *n > after).take(NamespaceList::MAX).collect();
    NamespaceList::from_ids(&ids).map_err(|_| Status::INTERNAL_ERROR)
}
