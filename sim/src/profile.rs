//! Drive profiles: the YAML description of one simulated drive — its identity, the
//! controller's limits, capacity, LBA formats, optional commands, the namespaces it
//! ships with, and the named [quirks](Quirk) it runs with.
//!
//! Shipped profiles live in `fixtures/sim/` and are embedded in the binary
//! ([`Profile::builtin`]). Loading never panics: a malformed profile is a
//! [`ProfileError`] saying `file:line:column`, what is wrong and what is allowed.
//!
//! ```yaml
//! name: enterprise-1.4
//! description: …
//! version: "1.4"                 # VS and Identify VER: 1.2 or 1.4
//! identity: {pci_vendor_id: 0x1b36, pci_subsystem_vendor_id: 0x1af4, serial: …, model: …, firmware: …, ieee_oui: 0x525400}
//! controller: {cntlid: 1, mdts: 5, aerl: 3, acl: 3, volatile_write_cache: true,
//!              namespace_attribute_notices: true, max_queue_entries: 1024, timeout_ms: 15000, max_io_queues: 64,
//!              ports: 2}            # controllers (PCIe ports), CNTLIDs cntlid, cntlid + 1, …: 1 to 16, default 1
//! capacity_bytes: 68719476736    # TNVMCAP
//! max_namespaces: 32             # NN
//! lba_formats: [{lbads: 512, ms: 0}, {lbads: 4096, ms: 8}]
//! dlfeat: zeroes                 # zeroes | ones | not_reported
//! arbitration: weighted_round_robin   # round_robin (default) | weighted_round_robin: CAP.AMS bit 0
//! service: {slots: 256, dies: 128, read_us: 15, …}   # how long commands take: crate::service
//! power: {loss_protection: false, awupf: 7, ready_ms: {clean: 800, dirty: 2400, per_tib: 150}}   # crate::subsystem::power
//! erase: {encryption: true, format: {crypto_erase: true}, sanitize: {block_erase: true, …}}   # crate::subsystem::erase
//! firmware: {slots: 4, slot1_read_only: true, activation_without_reset: true, …}   # crate::subsystem::firmware
//! ana: {groups: 2, transition_ms: 10000}   # NVMe 1.4 only: CMIC bit 3, ANACAP, ANATT; crate::subsystem::ana
//! reservations: {ptpl: true}     # ONCS bit 5, RESCAP: all six types unless `types: […]`; crate::subsystem::reservation
//! optional_commands: [compare, write_uncorrectable, dataset_management, write_zeroes, verify, format_nvm, namespace_management]
//! namespaces: [{lbads: 512, blocks: 1048576, attached: true}]   # also ms: 8, extended: true
//! # shared: NMIC bit 0 (default true): an attached shared namespace is attached to every
//! # port's controller, an attached private one (shared: false) to the first controller only.
//! quirks: []
//! ```

use crate::controller::ControllerConfig;
use crate::service::ServiceModel;
use crate::subsystem::ana::AnaModel;
use crate::subsystem::erase::EraseModel;
use crate::subsystem::firmware::FirmwareModel;
use crate::subsystem::power::PowerModel;
use crate::subsystem::reservation::ReservationModel;
use nvme::spec::identify::DeallocatedRead;
use nvme::spec::Version;
use serde::Deserialize;
use serde_saphyr::{MessageFormatter, Spanned};
use std::path::Path;

pub use crate::subsystem::Quirk;

/// The profiles shipped in `fixtures/sim/`, by name.
const BUILTIN: &[(&str, &str)] = &[
    ("enterprise-1.4", include_str!("../../fixtures/sim/enterprise-1.4.yaml")),
    ("enterprise-1.2a", include_str!("../../fixtures/sim/enterprise-1.2a.yaml")),
];

/// A profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The text is not a valid profile; `line` and `column` are 1-based.
    #[error("{origin}:{line}:{column}: {}", nvme::input::one_line(message))]
    Invalid { origin: String, line: u32, column: u32, message: String },
    #[error("{origin}: cannot read the profile: {source}")]
    Read { origin: String, source: std::io::Error },
    #[error("unknown built-in profile `{name}`: expected one of {known}")]
    UnknownBuiltin { name: String, known: String },
}

/// One simulated drive, as a profile describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    pub name: String,
    pub description: String,
    /// The NVMe version the drive implements: the VS register and Identify Controller VER.
    pub version: Version,
    pub identity: Identity,
    pub controller: ControllerSettings,
    /// TNVMCAP: total NVM capacity in bytes, shared by all namespaces.
    pub capacity_bytes: u64,
    /// NN: the number of namespaces the subsystem supports (valid NSIDs are 1..=NN).
    pub max_namespaces: u32,
    /// The LBA Format table (Figure 246), index 0 first.
    pub lba_formats: Vec<LbaFormatSpec>,
    /// What a deallocated or unwritten block reads back as, and whether DLFEAT says so.
    pub dlfeat: DlfeatSetting,
    /// The arbitration mechanisms CAP.AMS reports beside round robin.
    pub arbitration: ArbitrationSetting,
    /// How long commands take (`None`: every command completes at its doorbell write).
    pub service: Option<ServiceModel>,
    /// What a power loss takes and how long the drive takes to come back
    /// ([`crate::subsystem::power`]); defaults when the profile has no `power:` section.
    pub power: PowerModel,
    /// Encryption, FNA and Sanitize ([`crate::subsystem::erase`]).
    pub erase: EraseModel,
    /// Firmware slots, download and commit ([`crate::subsystem::firmware`]); `None`: one
    /// read-only slot and neither command.
    pub firmware: Option<FirmwareModel>,
    /// Reservations (ONCS bit 5, RESCAP; [`crate::subsystem::reservation`]); `None`: the
    /// reservation commands are refused with Invalid Command Opcode and features 81h–83h
    /// with Invalid Field in Command.
    pub reservations: Option<ReservationModel>,
    /// Asymmetric Namespace Access reporting (NVMe 1.4 §8.20; [`crate::subsystem::ana`]);
    /// `None`: CMIC bit 3 clear, no log page 0Ch.
    pub ana: Option<AnaModel>,
    pub optional_commands: Vec<OptionalCommand>,
    /// The namespaces present when the drive is first powered, NSIDs 1, 2, … in order.
    pub namespaces: Vec<InitialNamespace>,
    /// The NSIDs of `namespaces` written `shared: false`: private namespaces (NMIC bit 0
    /// clear), attached to the first controller only. Every other initial namespace is
    /// shared (NMIC bit 0 set), attached to every controller. (Kept beside
    /// [`InitialNamespace`] rather than in it, so code building namespaces by hand
    /// keeps compiling.)
    pub private_namespaces: Vec<u32>,
    pub quirks: Vec<Quirk>,
}

/// Who the drive says it is: PCI IDs and the Identify Controller strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// PCI Vendor ID (configuration space and Identify Controller VID).
    pub pci_vendor_id: u16,
    /// PCI Subsystem Vendor ID (SSVID).
    pub pci_subsystem_vendor_id: u16,
    /// SN: up to 20 printable ASCII characters.
    pub serial: String,
    /// MN: up to 40 printable ASCII characters.
    pub model: String,
    /// FR: up to 8 printable ASCII characters.
    pub firmware: String,
    /// IEEE OUI Identifier (24 bits).
    pub ieee_oui: u32,
}

/// The controller's limits. `max_queue_entries` and `timeout_ms` belong to the queue
/// engine (CAP.MQES, CAP.TO): the glue passes them on; the command set reads the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerSettings {
    /// CNTLID: Controller ID.
    pub cntlid: u16,
    /// MDTS: maximum data transfer size as a power of two in units of the minimum memory
    /// page size (CAP.MPSMIN, 4 KiB); 0 means no limit.
    pub mdts: u8,
    /// AERL: Asynchronous Event Request Limit (0's based).
    pub aerl: u8,
    /// ACL: Abort Command Limit (0's based).
    pub acl: u8,
    /// VWC bit 0: a volatile write cache is present.
    pub volatile_write_cache: bool,
    /// OAES bit 8: Namespace Attribute Notices are supported.
    pub namespace_attribute_notices: bool,
    /// CAP.MQES + 1: the largest I/O queue, in entries.
    pub max_queue_entries: u32,
    /// CAP.TO × 500: the worst-case time for CSTS.RDY to follow CC.EN, in milliseconds.
    pub timeout_ms: u32,
    /// The most I/O Submission (and Completion) Queues Set Features Number of Queues allocates.
    pub max_io_queues: u16,
    /// Controllers of the NVM subsystem, one per PCIe port (1 to [`MAX_PORTS`]): port i
    /// (0-based) is the controller with CNTLID `cntlid + i`. More than one sets CMIC
    /// bits 0 and 1 (Figure 247).
    pub ports: u16,
}

/// The most ports (controllers) a profile may give a drive.
pub const MAX_PORTS: u16 = 16;

impl ControllerSettings {
    /// The CNTLIDs of the subsystem's controllers, port 0 first.
    pub fn cntlids(&self) -> Vec<u16> {
        (0..self.ports.max(1)).map(|i| self.cntlid.saturating_add(i)).collect()
    }
}

/// One entry of the LBA Format table: LBA data size in bytes and metadata size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LbaFormatSpec {
    /// LBA data size in bytes (512 or 4096); the table reports its log2 (LBADS).
    pub lbads: u32,
    /// MS: metadata bytes per block.
    #[serde(default)]
    pub ms: u16,
}

impl LbaFormatSpec {
    /// LBADS as the LBA Format reports it: log2 of the data size.
    pub fn lbads_log2(&self) -> u8 {
        self.lbads.trailing_zeros() as u8
    }
}

/// What a deallocated (or never written) block reads back as — DLFEAT bits 2:0
/// (Figure 245), reported on NVMe 1.3 and later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DlfeatSetting {
    /// Reported as 001b: all bytes 00h.
    Zeroes,
    /// Reported as 010b: all bytes FFh.
    Ones,
    /// Reported as 000b (byte 33 is reserved before NVMe 1.3); the media reads 00h.
    NotReported,
}

impl DlfeatSetting {
    /// DLFEAT bits 2:0 as Identify Namespace reports them.
    pub fn read_behavior(self) -> DeallocatedRead {
        match self {
            DlfeatSetting::Zeroes => DeallocatedRead::Zeroes,
            DlfeatSetting::Ones => DeallocatedRead::Ones,
            DlfeatSetting::NotReported => DeallocatedRead::NotReported,
        }
    }

    /// The byte a deallocated block reads as.
    pub fn fill_byte(self) -> u8 {
        match self {
            DlfeatSetting::Ones => 0xFF,
            DlfeatSetting::Zeroes | DlfeatSetting::NotReported => 0x00,
        }
    }
}

/// The arbitration mechanisms a drive offers (§4.13, CAP.AMS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArbitrationSetting {
    /// Round robin only: CAP.AMS 00b.
    #[default]
    RoundRobin,
    /// Also weighted round robin with urgent priority class: CAP.AMS bit 0.
    WeightedRoundRobin,
}

/// Optional commands the drive implements (ONCS and OACS bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptionalCommand {
    /// ONCS bit 0.
    Compare,
    /// ONCS bit 1.
    WriteUncorrectable,
    /// ONCS bit 2.
    DatasetManagement,
    /// ONCS bit 3 (with DEAC from NVMe 1.3 on).
    WriteZeroes,
    /// ONCS bit 7: Verify (NVMe 1.4 and later).
    Verify,
    /// OACS bit 1.
    FormatNvm,
    /// OACS bit 3: Namespace Management and Namespace Attachment.
    NamespaceManagement,
}

/// A namespace present at power-on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitialNamespace {
    /// LBA data size in bytes; with `ms`, selects the first matching LBA format.
    pub lbads: u32,
    #[serde(default)]
    pub ms: u16,
    /// FLBAS bit 4: with `ms`, the metadata is part of an extended LBA (else it travels
    /// in a separate buffer at MPTR).
    #[serde(default)]
    pub extended: bool,
    /// NSZE (= NCAP): size in logical blocks.
    pub blocks: u64,
    /// Attached (active) at power-on: to every controller if shared (the profile's
    /// `shared`, [`Profile::private_namespaces`]), else to the first.
    #[serde(default = "yes")]
    pub attached: bool,
}

/// A namespace as the profile file writes it: [`InitialNamespace`] and `shared`.
#[derive(Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct InitialNamespaceFile {
    lbads: u32,
    #[serde(default)]
    ms: u16,
    #[serde(default)]
    extended: bool,
    blocks: u64,
    #[serde(default = "yes")]
    attached: bool,
    /// NMIC bit 0 (Figure 245): may be attached to two or more controllers.
    #[serde(default = "yes")]
    shared: bool,
}

fn yes() -> bool {
    true
}

/// The versions a profile may claim.
const VERSIONS: &[(&str, Version)] = &[("1.2", Version::V1_2), ("1.4", Version::V1_4)];

/// The profile file as written, with the locations validation errors point at.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    name: Spanned<String>,
    description: String,
    version: Spanned<String>,
    identity: IdentityFile,
    controller: ControllerFile,
    capacity_bytes: Spanned<u64>,
    max_namespaces: Spanned<u32>,
    lba_formats: Spanned<Vec<Spanned<LbaFormatSpec>>>,
    dlfeat: Spanned<DlfeatSetting>,
    #[serde(default)]
    arbitration: ArbitrationSetting,
    service: Option<Spanned<ServiceModel>>,
    #[serde(default)]
    power: PowerModel,
    erase: Option<Spanned<EraseModel>>,
    firmware: Option<Spanned<FirmwareModel>>,
    reservations: Option<Spanned<ReservationModel>>,
    ana: Option<Spanned<AnaModel>>,
    #[serde(default)]
    optional_commands: Vec<OptionalCommand>,
    namespaces: Option<Spanned<Vec<Spanned<InitialNamespaceFile>>>>,
    #[serde(default)]
    quirks: Vec<Quirk>,
    /// What the drive's datasheet promises: read by the runner (runner/src/claims), not here.
    #[allow(dead_code)]
    claims: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityFile {
    pci_vendor_id: u16,
    pci_subsystem_vendor_id: u16,
    serial: Spanned<String>,
    model: Spanned<String>,
    firmware: Spanned<String>,
    ieee_oui: Spanned<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ControllerFile {
    cntlid: Spanned<u16>,
    mdts: Spanned<u8>,
    aerl: u8,
    acl: u8,
    volatile_write_cache: bool,
    namespace_attribute_notices: bool,
    max_queue_entries: Spanned<u32>,
    timeout_ms: Spanned<u32>,
    max_io_queues: Spanned<u16>,
    ports: Option<Spanned<u16>>,
}

impl Profile {
    /// Loads a profile file.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Profile, ProfileError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = nvme::input::read_text_file(path)
            .map_err(|source| ProfileError::Read { origin: origin.clone(), source })?;
        Profile::from_str(&text, &origin)
    }

    /// Parses profile text; `origin` names it in errors (a path or `<builtin>`).
    pub fn from_str(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        let nvme::input::strict::Strict(file): nvme::input::strict::Strict<ProfileFile> = serde_saphyr::from_str(text)
            .map_err(|e| {
                let (line, column) = e.location().map(|l| (l.line() as u32, l.column() as u32)).unwrap_or((1, 1));
                let message = serde_saphyr::DefaultMessageFormatter.format_message(e.without_snippet()).into_owned();
                ProfileError::Invalid { origin: origin.to_string(), line, column, message }
            })?;
        file.validate(origin)
    }

    /// A profile shipped in `fixtures/sim/`, by name (`enterprise-1.4`).
    pub fn builtin(name: &str) -> Result<Profile, ProfileError> {
        match BUILTIN.iter().find(|(n, _)| *n == name) {
            Some((n, text)) => Profile::from_str(text, &format!("fixtures/sim/{n}.yaml")),
            None => Err(ProfileError::UnknownBuiltin {
                name: name.to_string(),
                known: Profile::builtin_names().collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// The text of a shipped profile and the path it is shipped as (for the runner,
    /// which reads the `claims:` the profile carries).
    pub fn builtin_source(name: &str) -> Option<(String, &'static str)> {
        BUILTIN.iter().find(|(n, _)| *n == name).map(|(n, text)| (format!("fixtures/sim/{n}.yaml"), *text))
    }

    /// The names of the shipped profiles.
    pub fn builtin_names() -> impl Iterator<Item = &'static str> {
        BUILTIN.iter().map(|(n, _)| *n)
    }

    /// This profile with one more quirk (for tests).
    pub fn with_quirk(mut self, quirk: Quirk) -> Profile {
        if !self.quirks.contains(&quirk) {
            self.quirks.push(quirk);
        }
        self
    }

    /// Whether the drive implements an optional command.
    pub fn supports(&self, command: OptionalCommand) -> bool {
        self.optional_commands.contains(&command)
    }

    /// CAP.AMS as the profile's `arbitration` asks.
    pub fn cap_ams(&self) -> u8 {
        match self.arbitration {
            ArbitrationSetting::RoundRobin => 0,
            ArbitrationSetting::WeightedRoundRobin => 1,
        }
    }

    /// The VS register value (and, without quirks, Identify Controller VER).
    pub fn vs(&self) -> u32 {
        self.version.to_register()
    }

    /// The queue engine's configuration for this drive: CAP.MQES and CAP.TO from
    /// `max_queue_entries` and `timeout_ms`, VS, AERL, CNTLID, the PCI IDs, one MSI-X
    /// vector per I/O queue plus the admin queue, doorbells for every queue, and
    /// CAP.MPSMIN 0 (4 KiB: the unit MDTS counts in). Everything else is the engine's default.
    pub fn controller_config(&self) -> ControllerConfig {
        let c = &self.controller;
        let queues = c.max_io_queues as u64 + 1;
        // Doorbells start at 1000h: one SQ tail and one CQ head of 4 bytes per queue (DSTRD 0).
        let bar0_bytes = (0x1000 + queues * 8).next_power_of_two().max(ControllerConfig::default().bar0_bytes);
        ControllerConfig {
            name: self.name.clone(),
            mqes: (c.max_queue_entries - 1).min(u16::MAX as u32) as u16,
            to: (c.timeout_ms / 500).min(255) as u8,
            dstrd: 0,
            mpsmin: 0,
            version: self.version,
            aerl: c.aerl,
            cntlid: c.cntlid,
            vendor_id: self.identity.pci_vendor_id,
            subsystem_vendor_id: self.identity.pci_subsystem_vendor_id,
            interrupt_vectors: (queues as u16).min(2048),
            bar0_bytes,
            ams: self.cap_ams(),
            service: self.service.clone(),
            quirks: crate::subsystem::Quirks::new(&self.quirks),
            ..ControllerConfig::default()
        }
    }
}

fn invalid<T>(origin: &str, at: &serde_saphyr::Location, message: String) -> Result<T, ProfileError> {
    Err(ProfileError::Invalid {
        origin: origin.to_string(),
        line: at.line() as u32,
        column: at.column() as u32,
        message,
    })
}

fn ascii_field(origin: &str, field: &Spanned<String>, name: &str, max: usize) -> Result<String, ProfileError> {
    let s = &field.value;
    if s.is_empty() || s.len() > max || !s.bytes().all(|b| (0x20..=0x7E).contains(&b)) {
        return invalid(
            origin,
            &field.referenced,
            format!("{name} `{s}` must be 1 to {max} printable ASCII characters (20h–7Eh)"),
        );
    }
    Ok(s.clone())
}

impl ProfileFile {
    fn validate(self, origin: &str) -> Result<Profile, ProfileError> {
        if self.name.value.trim().is_empty() {
            return invalid(origin, &self.name.referenced, "name must not be empty".into());
        }
        let version = match VERSIONS.iter().find(|(s, _)| *s == self.version.value.trim()) {
            Some((_, v)) => *v,
            None => {
                let allowed: Vec<&str> = VERSIONS.iter().map(|(s, _)| *s).collect();
                return invalid(
                    origin,
                    &self.version.referenced,
                    format!(
                        "unsupported NVMe version `{}`: expected one of {}",
                        self.version.value,
                        allowed.join(", ")
                    ),
                );
            }
        };

        let id = &self.identity;
        if id.ieee_oui.value > 0xFF_FFFF {
            return invalid(
                origin,
                &id.ieee_oui.referenced,
                format!("ieee_oui {:#x} is wider than 24 bits", id.ieee_oui.value),
            );
        }
        let identity = Identity {
            pci_vendor_id: id.pci_vendor_id,
            pci_subsystem_vendor_id: id.pci_subsystem_vendor_id,
            serial: ascii_field(origin, &id.serial, "serial", 20)?,
            model: ascii_field(origin, &id.model, "model", 40)?,
            firmware: ascii_field(origin, &id.firmware, "firmware", 8)?,
            ieee_oui: id.ieee_oui.value,
        };

        let c = &self.controller;
        if c.cntlid.value > 0xFFEF {
            return invalid(
                origin,
                &c.cntlid.referenced,
                format!("cntlid {:#x} is reserved: expected 0 to FFEFh", c.cntlid.value),
            );
        }
        if c.mdts.value > 15 {
            return invalid(
                origin,
                &c.mdts.referenced,
                format!("mdts {} is too large: expected 0 (no limit) to 15", c.mdts.value),
            );
        }
        if !(2..=65536).contains(&c.max_queue_entries.value) {
            return invalid(
                origin,
                &c.max_queue_entries.referenced,
                format!("max_queue_entries {} must be 2 to 65536", c.max_queue_entries.value),
            );
        }
        let to = c.timeout_ms.value;
        if to == 0 || !to.is_multiple_of(500) || to > 255 * 500 {
            return invalid(
                origin,
                &c.timeout_ms.referenced,
                format!("timeout_ms {to} must be a multiple of 500 from 500 to 127500 (CAP.TO)"),
            );
        }
        if c.max_io_queues.value == 0 || c.max_io_queues.value == 0xFFFF {
            return invalid(
                origin,
                &c.max_io_queues.referenced,
                format!("max_io_queues {} must be 1 to 65534", c.max_io_queues.value),
            );
        }
        let (ports, ports_at) =
            c.ports.as_ref().map_or((1, serde_saphyr::Location::UNKNOWN), |p| (p.value, p.referenced));
        if !(1..=MAX_PORTS).contains(&ports) {
            return invalid(
                origin,
                &ports_at,
                format!("ports {ports} must be 1 to {MAX_PORTS} (one controller per port)"),
            );
        }
        let last = c.cntlid.value as u32 + ports as u32 - 1;
        if last > 0xFFEF {
            return invalid(
                origin,
                &ports_at,
                format!(
                    "ports {ports} from cntlid {:#x} reach CNTLID {last:#x}, which is reserved: the last must be at most FFEFh",
                    c.cntlid.value
                ),
            );
        }
        let controller = ControllerSettings {
            ports,
            cntlid: c.cntlid.value,
            mdts: c.mdts.value,
            aerl: c.aerl,
            acl: c.acl,
            volatile_write_cache: c.volatile_write_cache,
            namespace_attribute_notices: c.namespace_attribute_notices,
            max_queue_entries: c.max_queue_entries.value,
            timeout_ms: c.timeout_ms.value,
            max_io_queues: c.max_io_queues.value,
        };

        if self.capacity_bytes.value == 0 {
            return invalid(origin, &self.capacity_bytes.referenced, "capacity_bytes must not be 0".into());
        }
        if !(1..=1024).contains(&self.max_namespaces.value) {
            return invalid(
                origin,
                &self.max_namespaces.referenced,
                format!("max_namespaces {} must be 1 to 1024", self.max_namespaces.value),
            );
        }

        let formats = &self.lba_formats.value;
        if formats.is_empty() || formats.len() > 16 {
            return invalid(
                origin,
                &self.lba_formats.referenced,
                format!("lba_formats has {} entries: expected 1 to 16", formats.len()),
            );
        }
        for f in formats {
            let lbads = f.value.lbads;
            if !lbads.is_power_of_two() || !(512..=65536).contains(&lbads) {
                return invalid(
                    origin,
                    &f.referenced,
                    format!("lbads {lbads} must be a power of two from 512 to 65536 bytes (512 or 4096)"),
                );
            }
            if f.value.ms > 256 {
                return invalid(origin, &f.referenced, format!("ms {} must be 0 to 256 bytes", f.value.ms));
            }
        }
        let lba_formats: Vec<LbaFormatSpec> = formats.iter().map(|f| f.value).collect();

        if version < Version::V1_3 && self.dlfeat.value != DlfeatSetting::NotReported {
            return invalid(
                origin,
                &self.dlfeat.referenced,
                format!("DLFEAT (Identify Namespace byte 33) is reserved before NVMe 1.3: NVMe {version} needs `dlfeat: not_reported`"),
            );
        }

        if let Some(service) = &self.service {
            if let Err(message) = service.value.check() {
                return invalid(origin, &service.referenced, message);
            }
        }

        let mut optional_commands = self.optional_commands.clone();
        optional_commands.dedup();
        if version < Version::V1_4 && optional_commands.contains(&OptionalCommand::Verify) {
            return invalid(
                origin,
                &self.version.referenced,
                format!(
                    "optional command `verify` (ONCS bit 7) is NVMe 1.4 and later; NVMe {version} has no Verify command"
                ),
            );
        }

        let (list, list_at) = match &self.namespaces {
            Some(n) => (n.value.as_slice(), n.referenced),
            None => (&[][..], serde_saphyr::Location::UNKNOWN),
        };
        if list.len() as u64 > self.max_namespaces.value as u64 {
            return invalid(
                origin,
                &list_at,
                format!("{} namespaces listed but max_namespaces is {}", list.len(), self.max_namespaces.value),
            );
        }
        let mut used: u128 = 0;
        let mut namespaces = Vec::new();
        let mut private_namespaces = Vec::new();
        for (i, ns) in list.iter().enumerate() {
            let file = ns.value;
            let n = InitialNamespace {
                lbads: file.lbads,
                ms: file.ms,
                extended: file.extended,
                blocks: file.blocks,
                attached: file.attached,
            };
            if !file.shared {
                private_namespaces.push(i as u32 + 1);
            }
            if !lba_formats.iter().any(|f| f.lbads == n.lbads && f.ms == n.ms) {
                let have: Vec<String> = lba_formats.iter().map(|f| format!("{}+{}", f.lbads, f.ms)).collect();
                return invalid(
                    origin,
                    &ns.referenced,
                    format!("no LBA format has lbads {} and ms {}: lba_formats are {}", n.lbads, n.ms, have.join(", ")),
                );
            }
            if n.blocks == 0 {
                return invalid(origin, &ns.referenced, "a namespace needs at least one block".into());
            }
            if !n.attached && !optional_commands.contains(&OptionalCommand::NamespaceManagement) {
                return invalid(
                    origin,
                    &ns.referenced,
                    "a detached namespace needs namespace_management in optional_commands to be attached".into(),
                );
            }
            used += n.blocks as u128 * n.lbads as u128;
            if used > self.capacity_bytes.value as u128 {
                return invalid(
                    origin,
                    &ns.referenced,
                    format!("the namespaces need more than capacity_bytes ({})", self.capacity_bytes.value),
                );
            }
            namespaces.push(n);
        }

        let erase = match self.erase {
            None => EraseModel::default(),
            Some(e) => {
                if let Some(problem) = e.value.problem(version >= nvme::spec::Version::V1_3) {
                    return invalid(origin, &e.referenced, format!("erase: {problem}"));
                }
                e.value
            }
        };
        let firmware = match self.firmware {
            None => None,
            Some(f) => {
                if let Some(problem) = f.value.problem() {
                    return invalid(origin, &f.referenced, problem.to_string());
                }
                Some(f.value)
            }
        };
        let reservations = match self.reservations {
            None => None,
            Some(r) => {
                if r.value.types.is_empty() {
                    return invalid(origin, &r.referenced, "reservations: types must list at least one type".into());
                }
                Some(r.value)
            }
        };
        let ana = match self.ana {
            None => None,
            Some(a) => {
                if version < Version::V1_4 {
                    return invalid(
                        origin,
                        &a.referenced,
                        format!("ana: Asymmetric Namespace Access is NVMe 1.4; this profile is NVMe {version}"),
                    );
                }
                if let Some(problem) = a.value.problem() {
                    return invalid(origin, &a.referenced, problem);
                }
                Some(a.value)
            }
        };
        let mut quirks = self.quirks;
        quirks.dedup();
        Ok(Profile {
            name: self.name.value,
            description: self.description,
            version,
            identity,
            controller,
            capacity_bytes: self.capacity_bytes.value,
            max_namespaces: self.max_namespaces.value,
            lba_formats,
            dlfeat: self.dlfeat.value,
            arbitration: self.arbitration,
            service: self.service.map(|s| s.value),
            power: self.power,
            erase,
            firmware,
            reservations,
            ana,
            optional_commands,
            namespaces,
            private_namespaces,
            quirks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_profiles_load() {
        for name in Profile::builtin_names() {
            let p = Profile::builtin(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.name, name);
            assert!(p.quirks.is_empty(), "a shipped profile is clean");
        }
        assert!(matches!(Profile::builtin("nope"), Err(ProfileError::UnknownBuiltin { .. })));
    }

    #[test]
    fn the_engine_configuration_follows_the_profile() {
        let p = Profile::builtin("enterprise-1.4").unwrap();
        let config = p.controller_config();
        assert_eq!(config.mqes, 1023);
        assert_eq!(config.to, 30);
        assert_eq!(config.version, Version::V1_4);
        assert_eq!((config.aerl, config.cntlid), (3, 1));
        assert_eq!((config.vendor_id, config.subsystem_vendor_id), (0x5354, 0x5354));
        assert_eq!(config.interrupt_vectors, 65);
        assert_eq!(config.mpsmin, 0);
        assert!(config.bar0_size() >= 0x1000 + 65 * 8);
    }

    #[test]
    fn the_1_2a_profile_reports_no_dlfeat() {
        let p = Profile::builtin("enterprise-1.2a").unwrap();
        assert_eq!(p.version, Version::V1_2);
        assert_eq!(p.dlfeat, DlfeatSetting::NotReported);
    }
}
