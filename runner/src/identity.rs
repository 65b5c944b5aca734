//! Who the device under test is ([`DeviceIdentity`]): what every report names (the
//! console's identity lines, the JSON record, JUnit properties) and what the safety gate
//! compares `--confirm-serial` with.

use crate::steps::Facts;

/// Who the device under test is: printed on every report. The first five are the
/// console's identity lines; the rest is what a sign-off sheet records (NVMe 1.4
/// Figure 247, Identify Controller Data Structure), in the JSON record and as JUnit
/// properties.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct DeviceIdentity {
    /// The target as given ("sim:enterprise-1.4", "qemu:ns32", "/dev/nvme0").
    pub target: String,
    /// Identify Controller MN, SN, FR (trimmed), and the NVMe version (VER, or VS).
    pub model: String,
    pub serial: String,
    pub firmware: String,
    pub version: String,
    /// VID: PCI Vendor ID, and SSVID: PCI Subsystem Vendor ID (Identify Controller).
    pub vid: u16,
    pub ssvid: u16,
    /// IEEE: the IEEE OUI Identifier, as hex.
    pub ieee_oui: String,
    /// CNTLID: the controller's identifier in its subsystem.
    pub cntlid: u16,
    /// NN: Number of Namespaces.
    pub nn: u32,
    /// MDTS in bytes (MDTS and CAP.MPSMIN); `None`: no limit reported.
    pub mdts_bytes: Option<u64>,
    /// OACS: Optional Admin Command Support, and ONCS: Optional NVM Command Support.
    pub oacs: u16,
    pub oncs: u16,
    /// TNVMCAP, UNVMCAP: total and unallocated NVM capacity in bytes (0 where the
    /// controller does not report them).
    pub tnvmcap: u128,
    pub unvmcap: u128,
    /// Active namespaces when the run opened the device: NSID and LBA data size.
    pub active_namespaces: Vec<(u32, u64)>,
    /// What the host knows beyond the controller: the PCI function of a drive of the
    /// Linux driver (vendor, device, subsystem IDs, address, from sysfs), empty elsewhere.
    pub pci: Vec<(String, String)>,
    /// For a drive of the Linux driver: where the kernel's log of the run is read from,
    /// or why it is not ([`crate::run::KernelLogged`]); empty elsewhere.
    pub kernel_log: String,
}

impl DeviceIdentity {
    /// The identity as `name = value` pairs, for JUnit properties.
    pub fn properties(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("target".to_string(), self.target.clone()),
            ("model".into(), self.model.clone()),
            ("serial".into(), self.serial.clone()),
            ("firmware".into(), self.firmware.clone()),
            ("nvme_version".into(), self.version.clone()),
            ("vid".into(), format!("{:04x}", self.vid)),
            ("ssvid".into(), format!("{:04x}", self.ssvid)),
            ("ieee_oui".into(), self.ieee_oui.clone()),
            ("cntlid".into(), self.cntlid.to_string()),
            ("nn".into(), self.nn.to_string()),
            ("mdts_bytes".into(), self.mdts_bytes.map_or("no limit".into(), |b| b.to_string())),
            ("oacs".into(), format!("{:#06x}", self.oacs)),
            ("oncs".into(), format!("{:#06x}", self.oncs)),
            ("tnvmcap".into(), self.tnvmcap.to_string()),
            ("unvmcap".into(), self.unvmcap.to_string()),
        ];
        let namespaces: Vec<String> =
            self.active_namespaces.iter().map(|(nsid, size)| format!("{nsid} ({size}-byte LBAs)")).collect();
        out.push(("active_namespaces".into(), namespaces.join(", ")));
        out.extend(self.pci.iter().map(|(k, v)| (format!("pci.{k}"), v.clone())));
        if !self.kernel_log.is_empty() {
            out.push(("kernel_log".into(), self.kernel_log.clone()));
        }
        out
    }

    /// The identity of a device whose facts were read.
    pub fn from_facts(target: String, facts: &Facts) -> DeviceIdentity {
        let id = &facts.identify;
        let ieee = id.ieee;
        DeviceIdentity {
            target,
            model: id.model().to_string(),
            serial: id.serial().to_string(),
            firmware: id.firmware().to_string(),
            version: facts.version.to_string(),
            vid: id.vid,
            ssvid: id.ssvid,
            ieee_oui: format!("{:02x}{:02x}{:02x}", ieee[2], ieee[1], ieee[0]),
            cntlid: facts.cntlid,
            nn: facts.nn,
            mdts_bytes: facts.mdts_bytes,
            oacs: id.oacs.into_bits(),
            oncs: id.oncs.into_bits(),
            tnvmcap: id.tnvmcap.get(),
            unvmcap: id.unvmcap.get(),
            active_namespaces: facts.active_namespaces.clone(),
            pci: Vec::new(),
            kernel_log: String::new(),
        }
    }
}
