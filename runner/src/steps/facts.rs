//! What nvtest knows of the controller before running cases: its Identify Controller
//! data, version, limits and the LBA formats it offers; and which requirements of a
//! case it meets, with the exact missing bit or version when it does not.

use nvme::device::{Access, Data, Device};
use nvme::spec::identify::{identify, Cns, IdentifyController, IdentifyNamespace, LbaFormat, NamespaceList};
use nvme::spec::log::{get_log_page, CommandsSupportedAndEffects, LogPageId};
use nvme::spec::namespace::FormatNvm;
use nvme::spec::registers::{offset, Cap};
use nvme::spec::AdminOpcode;
use nvme::spec::Version;
use zerocopy::{FromZeros, IntoBytes};

use crate::suite::model::Requirement;

/// Why a power-fail case cannot run on a target without a power switch.
pub const NO_POWER_SWITCH: &str = "the target has no power switch (looked at the target's power capability: the \
     simulated drive and QEMU have one; a drive behind the kernel's driver has one when a rig is given, --rig FILE)";

/// Facts about the controller under test, read once when the session opens.
#[derive(Clone, Debug)]
pub struct Facts {
    pub identify: IdentifyController,
    /// The VS register, where registers are reachable.
    pub vs: Option<Version>,
    /// The version the controller claims: VER, or VS when VER is 0 (pre-1.2 controllers).
    pub version: Version,
    pub nn: u32,
    pub cntlid: u16,
    /// MDTS in bytes; `None` means no limit reported.
    pub mdts_bytes: Option<u64>,
    /// The largest transfer a command can move here: MDTS, or less where the host's
    /// driver allows less ([`nvme::device::Device::max_transfer_bytes`]); what steps that
    /// choose their command sizes keep to.
    pub transfer_bytes: Option<u64>,
    /// CAP.MQES (0's based: the entries of the largest I/O queue less one, which is the
    /// most commands one queue holds in flight), where the target shows its registers.
    pub mqes: Option<u16>,
    pub access: Access,
    /// LBA formats a namespace can be given (Identify Namespace for NSID FFFFFFFFh with
    /// Namespace Management; otherwise those of the active namespaces, or, with none
    /// active, those of the allocated ones through CNS 11h).
    pub formats: Vec<LbaFormat>,
    /// Active namespaces when the session opened, with their LBA data sizes.
    pub active_namespaces: Vec<(u32, u64)>,
    /// The format settings (LBAF, MSET, PI, PIL) of each namespace active when the session
    /// opened: a case that reformats one leaves it to the next case to restore them.
    pub provisioned_formats: Vec<(u32, FormatNvm)>,
    /// The Commands Supported and Effects log (05h), when LPA bit 1 says it exists.
    pub effects: Option<CommandsSupportedAndEffects>,
    /// How the target switches the drive's power, if it can.
    pub power: Option<nvme::transport::PowerMethod>,
}

/// A namespace's format settings as Format NVM would set them (NVMe 1.4 Figure 273: LBAF
/// from FLBAS bits 3:0, MSET from FLBAS bit 4, PI and PIL from DPS).
pub fn format_settings(ns: &IdentifyNamespace) -> FormatNvm {
    FormatNvm::new()
        .with_lbaf(ns.flbas_index())
        .with_mset(ns.extended_metadata())
        .with_pi(ns.dps.pit())
        .with_pil(ns.dps.first_eight_bytes())
}

impl Facts {
    /// Reads the facts; the error is one line for the console.
    pub fn read(device: &mut dyn Device) -> Result<Facts, String> {
        let access = device.access();
        let (vs, mps_min, mqes) = match device.registers() {
            Some(regs) => {
                let vs = regs.read32(offset::VS).map_err(|e| format!("reading VS: {e}"))?;
                let cap = Cap::from_bits(regs.read64(offset::CAP).map_err(|e| format!("reading CAP: {e}"))?);
                (Some(Version::from_register(vs)), 4096u64 << cap.mpsmin(), Some(cap.mqes()))
            }
            None => (None, 4096, None),
        };
        let mut ctrl = IdentifyController::new_zeroed();
        let c = device
            .admin(identify(Cns::Controller, 0, 0), Data::FromDevice(ctrl.as_mut_bytes()))
            .map_err(|e| format!("Identify Controller: {e}"))?;
        if !c.status().is_success() {
            return Err(format!("Identify Controller failed: {}", c.status()));
        }
        let ver = ctrl.version();
        let version = if ver.major == 0 { vs.unwrap_or(ver) } else { ver };
        let nn = ctrl.nn;
        let mut facts = Facts {
            vs,
            version,
            nn,
            cntlid: ctrl.cntlid,
            mdts_bytes: ctrl.mdts_bytes(mps_min),
            transfer_bytes: match (ctrl.mdts_bytes(mps_min), device.max_transfer_bytes()) {
                (Some(m), Some(h)) => Some(m.min(h)),
                (m, h) => m.or(h),
            },
            mqes,
            access,
            identify: ctrl,
            formats: Vec::new(),
            active_namespaces: Vec::new(),
            provisioned_formats: Vec::new(),
            effects: None,
            power: device.power_method(),
        };
        if facts.identify.lpa.commands_supported_and_effects() {
            facts.effects = read_effects(device)?;
        }
        // Each active namespace is identified once: its size, its format settings and the
        // formats it offers all come from that answer.
        let active = read_active(device, nn)?;
        facts.active_namespaces =
            active.iter().map(|(nsid, ns)| (*nsid, ns.as_ref().and_then(|n| n.lba_data_size()).unwrap_or(0))).collect();
        facts.provisioned_formats =
            active.iter().filter_map(|(nsid, ns)| ns.as_ref().map(|n| (*nsid, format_settings(n)))).collect();
        facts.formats = if facts.namespace_management() {
            let mut ns = IdentifyNamespace::new_zeroed();
            let c = device
                .admin(identify(Cns::Namespace, 0xFFFF_FFFF, 0), Data::FromDevice(ns.as_mut_bytes()))
                .map_err(|e| format!("Identify Namespace FFFFFFFFh: {e}"))?;
            if c.status().is_success() {
                ns.lba_formats().to_vec()
            } else {
                Vec::new()
            }
        } else {
            Vec::new()
        };
        if facts.formats.is_empty() {
            for ns in active.iter().filter_map(|(_, ns)| ns.as_ref()) {
                merge_formats(&mut facts.formats, ns);
            }
        }
        if facts.formats.is_empty() && facts.namespace_management() {
            // No active namespace to learn from: the allocated ones (CNS 10h, 11h) tell too.
            facts.formats = allocated_formats(device)?;
        }
        Ok(facts)
    }

    pub fn namespace_management(&self) -> bool {
        self.identify.oacs.namespace_management()
    }

    /// Whether namespaces can be created and deleted: OACS bit 3, and, where the
    /// controller has a Commands Supported and Effects log, CSUPP set for opcode 0Dh
    /// (a controller may advertise OACS bit 3 for Namespace Attachment alone in
    /// practice; the case that checks creation still sends the command).
    pub fn can_create_namespaces(&self) -> bool {
        self.namespace_management()
            && self.effects.as_ref().is_none_or(|e| e.admin(AdminOpcode::NamespaceManagement as u8).csupp())
    }

    /// A format with this LBA data size, preferring one without metadata.
    pub fn format_index(&self, data_size: u64) -> Option<u8> {
        let matching = |ms_ok: fn(u16) -> bool| {
            self.formats.iter().position(|f| f.data_size() == Some(data_size) && ms_ok(f.ms)).map(|i| i as u8)
        };
        matching(|ms| ms == 0).or_else(|| matching(|_| true))
    }

    /// Why a requirement is not met, or `None` when it is.
    pub fn missing(&self, req: &Requirement) -> Option<String> {
        let id = &self.identify;
        let bit = |present: bool, what: &str| (!present).then(|| format!("{what} is 0"));
        match req {
            Requirement::Version(v) => match v.parse::<Version>() {
                Ok(needed) if self.version >= needed => None,
                Ok(needed) => {
                    Some(format!("the controller reports NVMe {} (VER), the case needs {needed}", self.version))
                }
                Err(e) => Some(format!("bad version requirement: {e}")),
            },
            Requirement::Namespaces(n) => {
                if self.namespace_management() {
                    let limit = if id.mnan != 0 { id.mnan.min(self.nn) } else { self.nn };
                    (limit < *n).then(|| format!("NN (and MNAN) allow {limit} namespaces, the case needs {n}"))
                } else {
                    let active = self.active_namespaces.len() as u32;
                    (active < *n).then(|| {
                        format!(
                            "{active} active namespaces and no Namespace Management (OACS bit 3); the case needs {n}"
                        )
                    })
                }
            }
            Requirement::Lbads(size) => self
                .format_index(*size as u64)
                .is_none()
                .then(|| format!("no LBA format with {size}-byte data is supported")),
            Requirement::NamespaceManagement => {
                bit(id.oacs.namespace_management(), "OACS bit 3 (Namespace Management)")
            }
            Requirement::FormatNvm => bit(id.oacs.format_nvm(), "OACS bit 1 (Format NVM)"),
            Requirement::Sanitize => {
                let operations = id.sanicap.ces() || id.sanicap.bes() || id.sanicap.ows();
                if self.version < Version::V1_3 {
                    Some(format!("Sanitize is NVMe 1.3; the controller reports {} (VER)", self.version))
                } else {
                    (!operations).then(|| {
                        format!(
                            "SANICAP is {:#010x}: bits 2:0 (Crypto Erase, Block Erase, Overwrite) report no sanitize \
                             operation",
                            id.sanicap.into_bits()
                        )
                    })
                }
            }
            Requirement::Compare => bit(id.oncs.compare(), "ONCS bit 0 (Compare)"),
            Requirement::DatasetManagement => bit(id.oncs.dataset_management(), "ONCS bit 2 (Dataset Management)"),
            Requirement::WriteZeroes => bit(id.oncs.write_zeroes(), "ONCS bit 3 (Write Zeroes)"),
            Requirement::WriteZeroesDeallocate => {
                bit(id.oncs.write_zeroes(), "ONCS bit 3 (Write Zeroes)").or_else(|| {
                    (self.version < Version::V1_3).then(|| {
                        format!("Write Zeroes DEAC is NVMe 1.3; the controller reports {} (VER)", self.version)
                    })
                })
            }
            Requirement::VolatileWriteCache => bit(id.vwc.present(), "VWC bit 0 (Volatile Write Cache present)"),
            Requirement::NamespaceAttributeNotices => {
                bit(id.oaes.namespace_attribute_notices(), "OAES bit 8 (Namespace Attribute Notices)")
            }
            Requirement::UserspaceDriver => {
                (self.access != Access::Userspace).then(|| "needs a userspace-driver target (sim, qemu)".to_string())
            }
            Requirement::PowerSwitch => self.power.is_none().then(|| NO_POWER_SWITCH.to_string()),
        }
    }
}

fn read_effects(device: &mut dyn Device) -> Result<Option<CommandsSupportedAndEffects>, String> {
    let mut log = CommandsSupportedAndEffects::new_zeroed();
    let cmd = get_log_page(LogPageId::CommandsSupportedAndEffects, 0, 4096, 0, false).map_err(|e| e.to_string())?;
    let c = device
        .admin(cmd, Data::FromDevice(log.as_mut_bytes()))
        .map_err(|e| format!("Get Log Page 05h (Commands Supported and Effects): {e}"))?;
    // A failed read leaves the question to OACS; the log's own rules are not checked here.
    Ok(c.status().is_success().then_some(log))
}

/// Identify Namespace (CNS 00h, or 11h for an allocated NSID): `None` when the
/// controller answers with an error status.
fn identify_namespace(device: &mut dyn Device, cns: Cns, nsid: u32) -> Result<Option<IdentifyNamespace>, String> {
    let mut ns = IdentifyNamespace::new_zeroed();
    let c = device
        .admin(identify(cns, nsid, 0), Data::FromDevice(ns.as_mut_bytes()))
        .map_err(|e| format!("Identify Namespace (CNS {:02X}h) NSID {nsid}: {e}", cns as u8))?;
    Ok(c.status().is_success().then_some(ns))
}

/// The LBA formats of the allocated namespaces, attached or not (Identify CNS 10h, then
/// CNS 11h for each); none when the controller answers neither.
fn allocated_formats(device: &mut dyn Device) -> Result<Vec<LbaFormat>, String> {
    let mut list = NamespaceList::new_zeroed();
    let c = device
        .admin(identify(Cns::AllocatedNamespaceList, 0, 0), Data::FromDevice(list.as_mut_bytes()))
        .map_err(|e| format!("Identify Allocated Namespace ID list: {e}"))?;
    let mut formats = Vec::new();
    if !c.status().is_success() {
        return Ok(formats);
    }
    for nsid in list.ids() {
        if let Some(ns) = identify_namespace(device, Cns::AllocatedNamespace, nsid)? {
            merge_formats(&mut formats, &ns);
        }
    }
    Ok(formats)
}

/// The active namespaces with their Identify Namespace data. A controller without the
/// list (before 1.1) has namespaces 1..=NN active, kept even where Identify fails (`None`);
/// from the list, only namespaces that identify are kept.
fn read_active(device: &mut dyn Device, nn: u32) -> Result<Vec<(u32, Option<IdentifyNamespace>)>, String> {
    let mut list = NamespaceList::new_zeroed();
    let c = device
        .admin(identify(Cns::ActiveNamespaceList, 0, 0), Data::FromDevice(list.as_mut_bytes()))
        .map_err(|e| format!("Identify Active Namespace ID list: {e}"))?;
    if !c.status().is_success() {
        return (1..=nn.min(1024)).map(|id| Ok((id, identify_namespace(device, Cns::Namespace, id)?))).collect();
    }
    let mut out = Vec::new();
    for nsid in list.ids() {
        if let Some(ns) = identify_namespace(device, Cns::Namespace, nsid)? {
            out.push((nsid, Some(ns)));
        }
    }
    Ok(out)
}

/// Adds the LBA formats `ns` supports that `formats` does not hold yet.
fn merge_formats(formats: &mut Vec<LbaFormat>, ns: &IdentifyNamespace) {
    for f in ns.lba_formats() {
        if !formats.contains(f) {
            formats.push(*f);
        }
    }
}
