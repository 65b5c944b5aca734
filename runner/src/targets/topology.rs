//! QEMU topologies: what a `qemu` target starts, and the findings expected of QEMU.
//!
//! A topology (`fixtures/qemu/NAME.yaml`, or any file given as `qemu:PATH.yaml`) lists
//! NVM subsystems (`nvme-subsys`), PCIe root ports, NVMe controllers (`nvme`) and
//! namespaces (`nvme-ns`) with the options a lab sets on them. [`Topology::qemu_config`]
//! turns it into a [`QemuConfig`]: one sparse raw image per namespace and the `-device`
//! arguments. Shipped topologies are embedded in the binary ([`Topology::builtin`]).
//! Loading never panics: a malformed file is a [`TopologyError`] saying
//! `file:line:column: what is wrong; what is allowed`.
//!
//! ```yaml
//! name: dual
//! description: …
//! machine: {memory_mb: 512, dma_window_mb: 64, timeout_ms: 10000, disk_aio: io_uring,
//!           image_dir: images}  # optional; image_dir keeps the images between runs
//! subsystems: [{id: subsys0, nqn: nvtest-dual}]          # nqn: nqn.2019-08.org.qemu:<nqn>
//! root_ports: [{id: rp1, chassis: 1, slot: 1, hotplug: true}]
//! controllers:
//!   - {id: ctrl0, serial: NVTDUAL0001, subsystem: subsys0, mdts: 7}
//!   - {id: ctrl1, serial: NVTDUAL0001, subsystem: subsys0, root_port: rp1}
//! namespaces:
//!   - {nsid: 1, controller: ctrl0, lbads: 4096, blocks: 262144, shared: true}
//!   - {nsid: 2, controller: ctrl0, lbads: 512, size: 128MiB, shared: false, detached: true,
//!      uuid: auto, nguid: "…32 hex digits…", eui64: 0x…, write_cache: false}
//! ```
//!
//! What QEMU 10.0 does with these (learned by experiment on this machine and from
//! `hw/nvme`): see `fixtures/qemu/README.md`.
//!
//! The expected findings file (`fixtures/qemu/expected.yaml`, read by
//! [`load_expected`]) lists the cases QEMU really fails, each with its reason and rule.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nvme::transport::qemu::{Disk, DiskAio, PciAddress, QemuConfig, QemuMachine};
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

/// The topology `qemu` (without a name) starts.
pub const DEFAULT_TOPOLOGY: &str = "ns32";

/// The topologies shipped in `fixtures/qemu/`, by name.
const BUILTIN: &[(&str, &str)] = &[
    ("ns32", include_str!("../../../fixtures/qemu/ns32.yaml")),
    ("dual", include_str!("../../../fixtures/qemu/dual.yaml")),
    ("hotplug", include_str!("../../../fixtures/qemu/hotplug.yaml")),
    ("metadata", include_str!("../../../fixtures/qemu/metadata.yaml")),
    ("nocache", include_str!("../../../fixtures/qemu/nocache.yaml")),
    ("mdts16k", include_str!("../../../fixtures/qemu/mdts16k.yaml")),
    ("metafirst", include_str!("../../../fixtures/qemu/metafirst.yaml")),
    ("rootports", include_str!("../../../fixtures/qemu/rootports.yaml")),
];

/// The most namespaces one QEMU NVM subsystem holds (NSIDs 1 ..= 256, `NVME_MAX_NAMESPACES`).
pub const MAX_NSID: u32 = 256;
/// Slots on the root complex (`pcie.0`) given to controllers and root ports, in order.
const ROOT_SLOTS_CONTROLLERS: std::ops::RangeInclusive<u8> = 0x01..=0x0F;
const ROOT_SLOTS_PORTS: std::ops::RangeInclusive<u8> = 0x10..=0x1E;
/// QEMU ids (device ids double as block node names) are kept short so that
/// `<controller>-ns<nsid>` stays within what a node name may be.
const MAX_ID_LEN: usize = 16;

/// A topology could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyError {
    /// The text is not a valid topology; `line` and `column` are 1-based.
    Invalid {
        origin: String,
        line: u64,
        column: u64,
        message: String,
    },
    Read {
        origin: String,
        message: String,
    },
    UnknownBuiltin {
        name: String,
        known: String,
    },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::Invalid { origin, line, column, message } => {
                write!(f, "{origin}:{line}:{column}: {}", nvme::input::one_line(message))
            }
            TopologyError::Read { origin, message } => write!(f, "{origin}: cannot read the topology: {message}"),
            TopologyError::UnknownBuiltin { name, known } => {
                write!(f, "unknown QEMU topology `{name}`: expected one of {known} (fixtures/qemu) or a PATH.yaml")
            }
        }
    }
}

impl std::error::Error for TopologyError {}

/// One QEMU machine's NVMe devices, as a topology describes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub name: String,
    pub description: String,
    pub machine: MachineSettings,
    pub subsystems: Vec<Subsystem>,
    pub root_ports: Vec<RootPort>,
    pub controllers: Vec<ControllerSpec>,
    pub namespaces: Vec<NamespaceSpec>,
}

/// The machine around the devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineSettings {
    /// Guest RAM in MiB, all shared with nvtest (16 ..= 2048).
    pub memory_mb: u32,
    /// Guest RAM each controller's transport gets as DMA memory, in MiB.
    pub dma_window_mb: u32,
    /// The longest any single qtest or QMP exchange may take.
    pub timeout_ms: u64,
    pub disk_aio: DiskAio,
    /// Where the namespaces' images are kept between runs (`<node>.img`, created when
    /// missing, never removed), relative to the topology file; `None`: temporary images.
    pub image_dir: Option<PathBuf>,
}

/// An NVM subsystem: `-device nvme-subsys`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subsystem {
    pub id: String,
    /// The `<nqn>` of SUBNQN `nqn.2019-08.org.qemu:<nqn>`; QEMU uses the id when absent.
    pub nqn: Option<String>,
}

/// A PCIe root port on the root complex: `-device pcie-root-port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootPort {
    pub id: String,
    /// PCIe chassis and physical slot numbers (Slot Capabilities); unique pairs.
    pub chassis: u8,
    pub slot: u16,
    /// Whether the slot is hot-plug capable (native PCIe hot-plug).
    pub hotplug: bool,
    /// The device number on `pcie.0` nvtest gives it.
    pub root_slot: u8,
}

/// An NVMe controller: `-device nvme`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerSpec {
    pub id: String,
    /// SN (Identify Controller); controllers of one subsystem share it.
    pub serial: String,
    pub subsystem: Option<String>,
    /// The root port it sits behind; on `pcie.0` when absent.
    pub root_port: Option<String>,
    /// The device number on `pcie.0` (controllers not behind a root port).
    pub root_slot: Option<u8>,
    /// QEMU options passed through when set (`mdts`, `max_ioqpairs`, `msix_qsize`,
    /// `mqes`, `aerl`, `aer_max_queued`, `cmb_size_mb`, `use-intel-id`).
    pub mdts: Option<u8>,
    pub max_ioqpairs: Option<u32>,
    pub msix_qsize: Option<u16>,
    pub mqes: Option<u16>,
    pub aerl: Option<u8>,
    pub aer_max_queued: Option<u32>,
    pub cmb_size_mb: Option<u32>,
    pub use_intel_id: Option<bool>,
}

/// The value of a device property, as the command line and QMP each write it.
enum Property {
    Text(String),
    Number(u64),
    /// `on`/`off` on the command line, a boolean in QMP.
    Switch(bool),
}

impl ControllerSpec {
    /// `-device nvme`'s properties in command-line order: the command line
    /// ([`Topology::device_args`]) and a re-insertion ([`Topology::device_add`]) both
    /// write these, so a re-inserted controller is the one the machine started with.
    fn properties(&self) -> Vec<(&'static str, Property)> {
        let mut out = vec![("id", Property::Text(self.id.clone())), ("serial", Property::Text(self.serial.clone()))];
        match (&self.root_port, self.root_slot) {
            (Some(rp), _) => out.extend([("bus", Property::Text(rp.clone())), ("addr", Property::Text("0x00".into()))]),
            (None, Some(slot)) => {
                out.extend([("bus", Property::Text("pcie.0".into())), ("addr", Property::Text(format!("{slot:#04x}")))])
            }
            (None, None) => {}
        }
        if let Some(s) = &self.subsystem {
            out.push(("subsys", Property::Text(s.clone())));
        }
        let numbers = [
            ("mdts", self.mdts.map(u64::from)),
            ("max_ioqpairs", self.max_ioqpairs.map(u64::from)),
            ("msix_qsize", self.msix_qsize.map(u64::from)),
            ("mqes", self.mqes.map(u64::from)),
            ("aerl", self.aerl.map(u64::from)),
            ("aer_max_queued", self.aer_max_queued.map(u64::from)),
            ("cmb_size_mb", self.cmb_size_mb.map(u64::from)),
        ];
        out.extend(numbers.into_iter().filter_map(|(key, value)| Some((key, Property::Number(value?)))));
        if let Some(intel) = self.use_intel_id {
            out.push(("use-intel-id", Property::Switch(intel)));
        }
        out
    }
}

/// A namespace: `-device nvme-ns` on its controller, backed by a sparse raw image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceSpec {
    pub nsid: u32,
    /// The controller it is defined on (`bus=`).
    pub controller: String,
    /// LBA data size in bytes (512 or 4096).
    pub lbads: u32,
    /// Metadata bytes per block (0, 8, 16 or 64).
    pub ms: u16,
    /// Metadata transferred as part of an extended LBA (`mset`).
    pub extended_lba: bool,
    /// End-to-end protection type (0 = none, 1 ..= 3).
    pub pi: u8,
    /// NSZE: blocks in the namespace.
    pub blocks: u64,
    /// May be attached to more than one controller of the subsystem (NMIC bit 0).
    pub shared: bool,
    /// Allocated in the subsystem but attached to no controller at start.
    pub detached: bool,
    /// `auto` (QEMU picks at random) or a UUID.
    pub uuid: Option<String>,
    /// `auto` or 32 hex digits.
    pub nguid: Option<String>,
    pub eui64: Option<u64>,
    /// The volatile write cache of the namespace's block backend (`write-cache`).
    pub write_cache: Option<bool>,
}

impl NamespaceSpec {
    /// Bytes of the backing image: every block with its metadata.
    pub fn image_bytes(&self) -> u64 {
        self.blocks * (self.lbads as u64 + self.ms as u64)
    }

    /// Block node name and device id: `<controller>-ns<nsid>`.
    pub fn node_name(&self) -> String {
        format!("{}-ns{}", self.controller, self.nsid)
    }
}

// ---------------------------------------------------------------------------------
// The file as written.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyFile {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    machine: Option<Spanned<MachineFile>>,
    #[serde(default)]
    subsystems: Vec<Spanned<SubsystemFile>>,
    #[serde(default)]
    root_ports: Vec<Spanned<RootPortFile>>,
    controllers: Spanned<Vec<Spanned<ControllerFile>>>,
    #[serde(default)]
    namespaces: Vec<Spanned<NamespaceFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MachineFile {
    memory_mb: Option<Spanned<u32>>,
    dma_window_mb: Option<Spanned<u32>>,
    timeout_ms: Option<Spanned<u64>>,
    disk_aio: Option<AioFile>,
    image_dir: Option<PathBuf>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum AioFile {
    IoUring,
    Threads,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubsystemFile {
    id: Spanned<String>,
    nqn: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RootPortFile {
    id: Spanned<String>,
    chassis: Option<u8>,
    slot: Option<u16>,
    hotplug: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ControllerFile {
    id: Spanned<String>,
    serial: Spanned<String>,
    subsystem: Option<Spanned<String>>,
    root_port: Option<Spanned<String>>,
    mdts: Option<u8>,
    max_ioqpairs: Option<Spanned<u32>>,
    msix_qsize: Option<Spanned<u16>>,
    mqes: Option<Spanned<u16>>,
    aerl: Option<u8>,
    aer_max_queued: Option<u32>,
    cmb_size_mb: Option<u32>,
    use_intel_id: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NamespaceFile {
    nsid: Spanned<u32>,
    controller: Spanned<String>,
    lbads: Spanned<u32>,
    ms: Option<Spanned<u16>>,
    extended_lba: Option<bool>,
    pi: Option<Spanned<u8>>,
    blocks: Option<Spanned<u64>>,
    size: Option<Spanned<SizeText>>,
    shared: Option<bool>,
    detached: Option<Spanned<bool>>,
    uuid: Option<Spanned<String>>,
    nguid: Option<Spanned<String>>,
    eui64: Option<Spanned<u64>>,
    write_cache: Option<bool>,
}

/// A size: a number of bytes, or a number with a unit (`128MiB`, `1 GiB`, `512 KiB`).
#[derive(Deserialize)]
#[serde(untagged)]
enum SizeText {
    Bytes(u64),
    Text(String),
}

impl SizeText {
    fn bytes(&self) -> Option<u64> {
        match self {
            SizeText::Bytes(n) => Some(*n),
            SizeText::Text(s) => nvme::input::parse_size(s),
        }
    }
}

// ---------------------------------------------------------------------------------
// Loading.

pub(super) fn yaml_error(origin: &str, e: &serde_saphyr::Error) -> TopologyError {
    let (line, column, message) = crate::yaml_message::located(e);
    TopologyError::Invalid { origin: origin.to_string(), line, column, message }
}

fn invalid<T>(origin: &str, at: &Location, message: impl Into<String>) -> Result<T, TopologyError> {
    Err(TopologyError::Invalid {
        origin: origin.to_string(),
        line: at.line().max(1),
        column: at.column().max(1),
        message: message.into(),
    })
}

impl Topology {
    /// Loads a topology file.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Topology, TopologyError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = nvme::input::read_text_file(path)
            .map_err(|e| TopologyError::Read { origin: origin.clone(), message: e.to_string() })?;
        let mut topology = Topology::from_str(&text, &origin)?;
        if let Some(dir) = topology.machine.image_dir.as_mut().filter(|d| d.is_relative()) {
            *dir = path.parent().unwrap_or(Path::new(".")).join(&*dir);
        }
        Ok(topology)
    }

    /// Parses topology text; `origin` names it in errors.
    pub fn from_str(text: &str, origin: &str) -> Result<Topology, TopologyError> {
        let nvme::input::strict::Strict(file): nvme::input::strict::Strict<TopologyFile> =
            serde_saphyr::from_str_with_options(text, crate::suite::yaml_options())
                .map_err(|e| yaml_error(origin, &e))?;
        file.validate(origin)
    }

    /// A topology shipped in `fixtures/qemu/`, by name.
    pub fn builtin(name: &str) -> Result<Topology, TopologyError> {
        match BUILTIN.iter().find(|(n, _)| *n == name) {
            Some((n, text)) => Topology::from_str(text, &format!("fixtures/qemu/{n}.yaml")),
            None => Err(TopologyError::UnknownBuiltin {
                name: name.to_string(),
                known: Topology::builtin_names().collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// The names of the shipped topologies.
    pub fn builtin_names() -> impl Iterator<Item = &'static str> {
        BUILTIN.iter().map(|(n, _)| *n)
    }

    /// What to start: one disk per namespace and the device arguments, labelled with
    /// the topology's name. The binary is `qemu-system-x86_64` from PATH.
    pub fn qemu_config(&self) -> QemuConfig {
        QemuConfig {
            memory_mb: self.machine.memory_mb,
            dma_window_mb: self.machine.dma_window_mb,
            disks: self
                .namespaces
                .iter()
                .map(|ns| Disk { node_name: ns.node_name(), size_bytes: ns.image_bytes() })
                .collect(),
            disk_aio: self.machine.disk_aio,
            extra_args: self.device_args(),
            timeout: Duration::from_millis(self.machine.timeout_ms),
            label: self.name.clone(),
            image_dir: self.machine.image_dir.clone(),
            ..QemuConfig::default()
        }
    }

    /// The QEMU arguments for the devices: subsystems, root ports, controllers, then
    /// namespaces (each on its controller's bus).
    pub fn device_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        let mut device = |spec: String| {
            args.push("-device".to_string());
            args.push(spec);
        };
        for s in &self.subsystems {
            let mut d = format!("nvme-subsys,id={}", s.id);
            if let Some(nqn) = &s.nqn {
                d.push_str(&format!(",nqn={nqn}"));
            }
            device(d);
        }
        for rp in &self.root_ports {
            device(format!(
                "pcie-root-port,id={},bus=pcie.0,addr={:#04x},chassis={},slot={},hotplug={}",
                rp.id,
                rp.root_slot,
                rp.chassis,
                rp.slot,
                on_off(rp.hotplug)
            ));
        }
        for c in &self.controllers {
            let properties: Vec<String> = c
                .properties()
                .into_iter()
                .map(|(key, value)| match value {
                    Property::Text(text) => format!("{key}={text}"),
                    Property::Number(n) => format!("{key}={n}"),
                    Property::Switch(on) => format!("{key}={}", on_off(on)),
                })
                .collect();
            device(format!("nvme,{}", properties.join(",")));
        }
        for ns in &self.namespaces {
            let mut d = format!(
                "nvme-ns,id={node},bus={ctrl},drive={node},nsid={nsid},logical_block_size={lbads},\
                 physical_block_size={lbads},shared={shared}",
                node = ns.node_name(),
                ctrl = ns.controller,
                nsid = ns.nsid,
                lbads = ns.lbads,
                shared = on_off(ns.shared)
            );
            if ns.detached {
                d.push_str(",detached=on");
            }
            if ns.ms != 0 {
                d.push_str(&format!(",ms={},mset={}", ns.ms, u8::from(ns.extended_lba)));
            }
            if ns.pi != 0 {
                d.push_str(&format!(",pi={}", ns.pi));
            }
            if let Some(uuid) = &ns.uuid {
                d.push_str(&format!(",uuid={uuid}"));
            }
            if let Some(nguid) = &ns.nguid {
                d.push_str(&format!(",nguid={nguid}"));
            }
            if let Some(eui64) = ns.eui64 {
                d.push_str(&format!(",eui64={eui64}"));
            }
            if let Some(wc) = ns.write_cache {
                d.push_str(&format!(",write-cache={}", on_off(wc)));
            }
            device(d);
        }
        if !self.root_ports.is_empty() {
            // Without a guest nobody runs the ACPI hot-plug code: the root ports' own
            // native PCIe hot-plug (Slot Control, written by the harness) is used instead.
            args.push("-global".to_string());
            args.push("ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off".to_string());
        }
        args
    }

    /// QMP `device_add`'s arguments that put controller `id` back where the command line
    /// put it, with the same properties ([`Self::device_args`]), numbers as numbers;
    /// `None` for a controller the topology does not have.
    pub fn device_add(&self, id: &str) -> Option<serde_json::Value> {
        let mut d = serde_json::json!({ "driver": "nvme" });
        for (key, value) in self.controller(id)?.properties() {
            d[key] = match value {
                Property::Text(text) => text.into(),
                Property::Number(n) => n.into(),
                Property::Switch(on) => on.into(),
            };
        }
        Some(d)
    }

    /// The hot-plug-capable root port controller `id` sits behind, with its address on
    /// `pcie.0`; `None` for a controller on `pcie.0` or behind a port without hot-plug.
    pub fn hotplug_port_of(&self, id: &str) -> Option<(&RootPort, PciAddress)> {
        let rp = self.controller(id)?.root_port.as_ref()?;
        let port = self.root_ports.iter().find(|p| &p.id == rp && p.hotplug)?;
        Some((port, PciAddress::new(0, port.root_slot, 0)))
    }

    /// The controller `id`.
    pub fn controller(&self, id: &str) -> Option<&ControllerSpec> {
        self.controllers.iter().find(|c| c.id == id)
    }

    /// Where each controller sits on a started machine, in topology order: on `pcie.0`
    /// at its slot, or at device 0 of its root port's secondary bus (read from the port).
    pub fn controller_addresses(&self, machine: &QemuMachine) -> Result<Vec<(String, PciAddress)>, String> {
        let mut out = Vec::new();
        for c in &self.controllers {
            let address = match (&c.root_port, c.root_slot) {
                (Some(rp), _) => {
                    let port = self
                        .root_ports
                        .iter()
                        .find(|p| &p.id == rp)
                        .ok_or_else(|| format!("controller {}: no root port {rp}", c.id))?;
                    let port_address = PciAddress::new(0, port.root_slot, 0);
                    let buses = machine
                        .config_read32(port_address, 0x18)
                        .map_err(|e| format!("reading root port {rp}'s bus numbers: {e}"))?;
                    let secondary = (buses >> 8) as u8;
                    if secondary == 0 {
                        return Err(format!("root port {rp} at {port_address} has no secondary bus"));
                    }
                    PciAddress::new(secondary, 0, 0)
                }
                (None, Some(slot)) => PciAddress::new(0, slot, 0),
                (None, None) => return Err(format!("controller {} has no address", c.id)),
            };
            out.push((c.id.clone(), address));
        }
        Ok(out)
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// QEMU's rule for ids, kept short (see [`MAX_ID_LEN`]).
fn check_id(origin: &str, id: &Spanned<String>, what: &str) -> Result<String, TopologyError> {
    let s = &id.value;
    let ok = !s.is_empty()
        && s.len() <= MAX_ID_LEN
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        return invalid(
            origin,
            &id.referenced,
            format!(
                "{what} id `{s}` is not usable; an id is 1 to {MAX_ID_LEN} letters, digits, '-' or '_', starting with a letter"
            ),
        );
    }
    Ok(s.clone())
}

fn check_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    parts.len() == 5 && parts.iter().zip(lens).all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

fn check_nguid(s: &str) -> bool {
    let hex: String = s.chars().filter(|&c| c != '-').collect();
    hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit())
}

impl TopologyFile {
    fn validate(self, origin: &str) -> Result<Topology, TopologyError> {
        let name = self.name.value.trim().to_string();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return invalid(
                origin,
                &self.name.referenced,
                format!("name `{name}` is not usable; a name is letters, digits, '-', '_' or '.'"),
            );
        }

        let mut ids: BTreeSet<String> = BTreeSet::new();
        let mut claim = |id: &Spanned<String>, what: &str| -> Result<String, TopologyError> {
            let id_text = check_id(origin, id, what)?;
            if !ids.insert(id_text.clone()) {
                return invalid(
                    origin,
                    &id.referenced,
                    format!("id `{id_text}` is used twice; every id must be unique"),
                );
            }
            Ok(id_text)
        };

        let mut subsystems = Vec::new();
        for s in &self.subsystems {
            let id = claim(&s.value.id, "subsystem")?;
            let nqn = match &s.value.nqn {
                Some(n) => {
                    let t = n.value.trim();
                    let ok = !t.is_empty()
                        && t.len() <= 200
                        && t.chars().all(|c| c.is_ascii_graphic() && c != ',' && c != '=');
                    if !ok {
                        return invalid(
                            origin,
                            &n.referenced,
                            format!("nqn `{t}` is not usable; 1 to 200 printable ASCII characters without ',', '=' or spaces"),
                        );
                    }
                    Some(t.to_string())
                }
                None => None,
            };
            subsystems.push(Subsystem { id, nqn });
        }

        let mut root_ports = Vec::new();
        let mut physical: BTreeSet<(u8, u16)> = BTreeSet::new();
        let port_slots: Vec<u8> = ROOT_SLOTS_PORTS.collect();
        for (i, rp) in self.root_ports.iter().enumerate() {
            let id = claim(&rp.value.id, "root port")?;
            let Some(&root_slot) = port_slots.get(i) else {
                return invalid(
                    origin,
                    &rp.referenced,
                    format!("at most {} root ports fit on pcie.0", port_slots.len()),
                );
            };
            let chassis = rp.value.chassis.unwrap_or(1);
            let slot = rp.value.slot.unwrap_or(i as u16 + 1);
            if !physical.insert((chassis, slot)) {
                return invalid(
                    origin,
                    &rp.referenced,
                    format!("chassis {chassis} slot {slot} is taken by another root port; each pair must be unique"),
                );
            }
            root_ports.push(RootPort { id, chassis, slot, hotplug: rp.value.hotplug.unwrap_or(true), root_slot });
        }

        if self.controllers.value.is_empty() {
            return invalid(origin, &self.controllers.referenced, "no controllers; a topology needs at least one");
        }
        let mut controllers: Vec<ControllerSpec> = Vec::new();
        let mut serial_of_subsystem: BTreeMap<String, String> = BTreeMap::new();
        let mut used_ports: BTreeSet<String> = BTreeSet::new();
        let mut root_slots = ROOT_SLOTS_CONTROLLERS;
        for c in &self.controllers.value {
            let f = &c.value;
            let id = claim(&f.id, "controller")?;
            let serial = f.serial.value.clone();
            if serial.is_empty()
                || serial.len() > 20
                || !serial.bytes().all(|b| (0x21..=0x7E).contains(&b) && b != b',')
            {
                return invalid(
                    origin,
                    &f.serial.referenced,
                    format!("serial `{serial}` is not usable; SN is 1 to 20 printable ASCII characters without spaces or ','"),
                );
            }
            let subsystem = match &f.subsystem {
                Some(s) => {
                    if !subsystems.iter().any(|x| x.id == s.value) {
                        let known: Vec<&str> = subsystems.iter().map(|x| x.id.as_str()).collect();
                        return invalid(
                            origin,
                            &s.referenced,
                            format!("no subsystem `{}`; subsystems are: {}", s.value, list_or_none(&known)),
                        );
                    }
                    if let Some(first) = serial_of_subsystem.get(&s.value) {
                        if first != &serial {
                            return invalid(
                                origin,
                                &f.serial.referenced,
                                format!(
                                    "serial `{serial}` differs from `{first}` of another controller of subsystem {}; \
                                     controllers of one NVM subsystem report the same SN (QEMU requires it)",
                                    s.value
                                ),
                            );
                        }
                    } else {
                        serial_of_subsystem.insert(s.value.clone(), serial.clone());
                    }
                    Some(s.value.clone())
                }
                None => None,
            };
            let (root_port, root_slot) = match &f.root_port {
                Some(rp) => {
                    if !root_ports.iter().any(|p| p.id == rp.value) {
                        let known: Vec<&str> = root_ports.iter().map(|p| p.id.as_str()).collect();
                        return invalid(
                            origin,
                            &rp.referenced,
                            format!("no root port `{}`; root ports are: {}", rp.value, list_or_none(&known)),
                        );
                    }
                    if !used_ports.insert(rp.value.clone()) {
                        return invalid(
                            origin,
                            &rp.referenced,
                            format!("root port `{}` already has a controller; one controller per root port", rp.value),
                        );
                    }
                    (Some(rp.value.clone()), None)
                }
                None => match root_slots.next() {
                    Some(slot) => (None, Some(slot)),
                    None => {
                        return invalid(
                            origin,
                            &c.referenced,
                            "at most 15 controllers fit on pcie.0; put more behind root ports",
                        )
                    }
                },
            };
            if let Some(q) = &f.max_ioqpairs {
                if q.value == 0 || q.value > 0xFFFF {
                    return invalid(origin, &q.referenced, format!("max_ioqpairs {} is outside 1 ..= 65535", q.value));
                }
            }
            if let Some(m) = &f.msix_qsize {
                if m.value == 0 || m.value > 2048 {
                    return invalid(origin, &m.referenced, format!("msix_qsize {} is outside 1 ..= 2048", m.value));
                }
            }
            if let Some(m) = &f.mqes {
                if m.value == 0 {
                    return invalid(
                        origin,
                        &m.referenced,
                        "mqes 0 is not allowed; CAP.MQES is 0's based and at least 1",
                    );
                }
            }
            controllers.push(ControllerSpec {
                id,
                serial,
                subsystem,
                root_port,
                root_slot,
                mdts: f.mdts,
                max_ioqpairs: f.max_ioqpairs.as_ref().map(|s| s.value),
                msix_qsize: f.msix_qsize.as_ref().map(|s| s.value),
                mqes: f.mqes.as_ref().map(|s| s.value),
                aerl: f.aerl,
                aer_max_queued: f.aer_max_queued,
                cmb_size_mb: f.cmb_size_mb,
                use_intel_id: f.use_intel_id,
            });
        }

        let mut namespaces: Vec<NamespaceSpec> = Vec::new();
        let mut nsids: BTreeSet<(String, u32)> = BTreeSet::new();
        let mut unique_ids: BTreeMap<String, ()> = BTreeMap::new();
        for ns in &self.namespaces {
            let f = &ns.value;
            let Some(ctrl) = controllers.iter().find(|c| c.id == f.controller.value) else {
                let known: Vec<&str> = controllers.iter().map(|c| c.id.as_str()).collect();
                return invalid(
                    origin,
                    &f.controller.referenced,
                    format!("no controller `{}`; controllers are: {}", f.controller.value, list_or_none(&known)),
                );
            };
            let nsid = f.nsid.value;
            if nsid == 0 || nsid > MAX_NSID {
                return invalid(
                    origin,
                    &f.nsid.referenced,
                    format!("nsid {nsid} is outside 1 ..= {MAX_NSID} (QEMU's NN)"),
                );
            }
            // NSIDs are unique in a subsystem, or on a controller of its own.
            let scope = ctrl.subsystem.clone().unwrap_or_else(|| format!("controller {}", ctrl.id));
            if !nsids.insert((scope.clone(), nsid)) {
                return invalid(
                    origin,
                    &f.nsid.referenced,
                    format!("nsid {nsid} is used twice in {scope}; NSIDs are unique there"),
                );
            }
            let lbads = f.lbads.value;
            if lbads != 512 && lbads != 4096 {
                return invalid(
                    origin,
                    &f.lbads.referenced,
                    format!("lbads {lbads} is not offered; allowed: 512, 4096"),
                );
            }
            let ms = f.ms.as_ref().map(|m| m.value).unwrap_or(0);
            if let Some(m) = &f.ms {
                if ![0, 8, 16, 64].contains(&m.value) {
                    return invalid(
                        origin,
                        &m.referenced,
                        format!("ms {} is not in QEMU's LBA format table; allowed: 0, 8, 16, 64", m.value),
                    );
                }
            }
            let pi = f.pi.as_ref().map(|p| p.value).unwrap_or(0);
            if let Some(p) = &f.pi {
                if p.value > 3 {
                    return invalid(
                        origin,
                        &p.referenced,
                        format!("pi {} is not a protection type; allowed: 0 (none), 1, 2, 3", p.value),
                    );
                }
                if p.value != 0 && ms < 8 {
                    return invalid(
                        origin,
                        &p.referenced,
                        format!("pi {} needs at least 8 bytes of metadata (ms: 8, 16 or 64)", p.value),
                    );
                }
            }
            let block_bytes = lbads as u64 + ms as u64;
            let blocks = match (&f.blocks, &f.size) {
                (Some(b), None) => {
                    if b.value == 0 {
                        return invalid(origin, &b.referenced, "blocks 0; a namespace needs at least one block");
                    }
                    b.value
                }
                (None, Some(s)) => {
                    let Some(bytes) = s.value.bytes() else {
                        return invalid(origin, &s.referenced, "size is not a size; write bytes (268435456) or a number with KiB, MiB, GiB or TiB (256MiB)");
                    };
                    if bytes == 0 || bytes % block_bytes != 0 {
                        return invalid(
                            origin,
                            &s.referenced,
                            format!("size {bytes} bytes is not a positive multiple of the {block_bytes}-byte block (lbads + ms)"),
                        );
                    }
                    bytes / block_bytes
                }
                _ => return invalid(origin, &ns.referenced, "give exactly one of blocks (NSZE) and size (bytes)"),
            };
            if blocks.checked_mul(block_bytes).is_none_or(|b| b > 1 << 50) {
                return invalid(origin, &ns.referenced, "the namespace is larger than 1 PiB; choose fewer blocks");
            }
            let shared = f.shared.unwrap_or(true);
            // QEMU 10 gives a controller without `subsystem` an implicit subsystem of its
            // own, so a detached namespace there can still be attached later.
            let detached = f.detached.as_ref().map(|d| d.value).unwrap_or(false);
            let mut unique = |key: String, at: &Location, what: &str| -> Result<(), TopologyError> {
                if unique_ids.insert(key, ()).is_some() {
                    return invalid(
                        origin,
                        at,
                        format!("this {what} is used by another namespace; identifiers are unique per namespace"),
                    );
                }
                Ok(())
            };
            let uuid = match &f.uuid {
                Some(u) if u.value == "auto" => Some("auto".to_string()),
                Some(u) => {
                    if !check_uuid(&u.value) {
                        return invalid(
                            origin,
                            &u.referenced,
                            format!("uuid `{}` is not a UUID; write `auto` or 8-4-4-4-12 hex digits", u.value),
                        );
                    }
                    unique(format!("uuid {}", u.value.to_ascii_lowercase()), &u.referenced, "uuid")?;
                    Some(u.value.to_ascii_lowercase())
                }
                None => None,
            };
            let nguid = match &f.nguid {
                Some(n) if n.value == "auto" => Some("auto".to_string()),
                Some(n) => {
                    if !check_nguid(&n.value) {
                        return invalid(
                            origin,
                            &n.referenced,
                            format!("nguid `{}` is not an NGUID; write `auto` or 32 hex digits", n.value),
                        );
                    }
                    let hex: String = n.value.chars().filter(|&c| c != '-').collect::<String>().to_ascii_lowercase();
                    if hex.chars().all(|c| c == '0') {
                        return invalid(
                            origin,
                            &n.referenced,
                            "an all-zero NGUID means `not reported`; leave nguid out instead",
                        );
                    }
                    unique(format!("nguid {hex}"), &n.referenced, "nguid")?;
                    Some(hex)
                }
                None => None,
            };
            let eui64 = match &f.eui64 {
                Some(e) if e.value == 0 => {
                    return invalid(
                        origin,
                        &e.referenced,
                        "an EUI64 of 0 means `not reported`; leave eui64 out instead",
                    )
                }
                Some(e) => {
                    unique(format!("eui64 {}", e.value), &e.referenced, "eui64")?;
                    Some(e.value)
                }
                None => None,
            };
            namespaces.push(NamespaceSpec {
                nsid,
                controller: ctrl.id.clone(),
                lbads,
                ms,
                extended_lba: f.extended_lba.unwrap_or(false),
                pi,
                blocks,
                shared,
                detached,
                uuid,
                nguid,
                eui64,
                write_cache: f.write_cache,
            });
        }

        let machine = self.machine.as_ref();
        let m = machine.map(|m| &m.value);
        let defaults = QemuConfig::default();
        let memory_mb = m.and_then(|m| m.memory_mb.as_ref());
        let memory = memory_mb.map(|s| s.value).unwrap_or(defaults.memory_mb);
        if !(16..=2048).contains(&memory) {
            let at = memory_mb.map(|s| s.referenced).unwrap_or(Location::UNKNOWN);
            return invalid(
                origin,
                &at,
                format!("memory_mb {memory} is outside 16 ..= 2048 (guest RAM stays below the PCI hole)"),
            );
        }
        let window_mb = m.and_then(|m| m.dma_window_mb.as_ref());
        let window = window_mb.map(|s| s.value).unwrap_or(defaults.dma_window_mb);
        let windows = if window == 0 { 0 } else { (memory as u64 - 1) / window as u64 };
        if windows < controllers.len() as u64 {
            let at = window_mb
                .or(memory_mb)
                .map(|s| s.referenced)
                .or(machine.map(|m| m.referenced))
                .unwrap_or(self.controllers.referenced);
            return invalid(
                origin,
                &at,
                format!(
                    "{} controllers need {} DMA windows of {window} MiB but {memory} MiB of guest RAM holds {windows}; \
                     raise machine.memory_mb or lower machine.dma_window_mb",
                    controllers.len(),
                    controllers.len()
                ),
            );
        }
        let timeout = m.and_then(|m| m.timeout_ms.as_ref());
        let timeout_ms = timeout.map(|s| s.value).unwrap_or(defaults.timeout.as_millis() as u64);
        if timeout_ms == 0 {
            return invalid(
                origin,
                &timeout.map(|t| t.referenced).unwrap_or(Location::UNKNOWN),
                "timeout_ms must be positive",
            );
        }
        let disk_aio = match m.and_then(|m| m.disk_aio) {
            Some(AioFile::IoUring) | None => DiskAio::IoUring,
            Some(AioFile::Threads) => DiskAio::Threads,
        };

        Ok(Topology {
            name,
            description: self.description.trim().to_string(),
            machine: MachineSettings {
                memory_mb: memory,
                dma_window_mb: window,
                timeout_ms,
                disk_aio,
                image_dir: m.and_then(|m| m.image_dir.clone()),
            },
            subsystems,
            root_ports,
            controllers,
            namespaces,
        })
    }
}

fn list_or_none(items: &[&str]) -> String {
    if items.is_empty() {
        "(none)".to_string()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Topology, TopologyError> {
        Topology::from_str(text, "t.yaml")
    }

    fn err(text: &str) -> String {
        load(text).unwrap_err().to_string()
    }

    const MINIMAL: &str = "name: t\ncontrollers:\n  - {id: c0, serial: S1}\nnamespaces:\n  - {nsid: 1, controller: c0, lbads: 512, blocks: 8}\n";

    #[test]
    fn every_shipped_topology_loads() {
        for name in Topology::builtin_names() {
            let t = Topology::builtin(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(t.name, name);
        }
        assert!(Topology::builtin("nope").unwrap_err().to_string().contains("ns32, dual, hotplug"));
    }

    #[test]
    fn ns32_is_one_controller_with_32_alternating_namespaces() {
        let t = Topology::builtin("ns32").unwrap();
        assert_eq!(t.controllers.len(), 1);
        assert_eq!(t.subsystems.len(), 1);
        assert_eq!(t.namespaces.len(), 32);
        for (i, ns) in t.namespaces.iter().enumerate() {
            assert_eq!(ns.nsid, i as u32 + 1);
            assert_eq!(ns.lbads, if i % 2 == 0 { 512 } else { 4096 });
            assert!(!ns.detached);
        }
        let c = t.qemu_config();
        assert_eq!(c.label, "ns32");
        assert_eq!(c.disks.len(), 32);
        assert_eq!(c.disks[0], Disk { node_name: "nvme0-ns1".into(), size_bytes: 262144 * 512 });
        assert_eq!(c.disks[1], Disk { node_name: "nvme0-ns2".into(), size_bytes: 262144 * 4096 });
        let devices: Vec<&String> = c.extra_args.iter().skip(1).step_by(2).collect();
        assert_eq!(devices[0], "nvme-subsys,id=subsys0,nqn=nvtest-ns32");
        assert_eq!(devices[1], "nvme,id=nvme0,serial=NVTQ32000001,bus=pcie.0,addr=0x01,subsys=subsys0");
        assert_eq!(devices.len(), 2 + 32);
    }

    #[test]
    fn dual_is_two_controllers_of_one_subsystem() {
        let t = Topology::builtin("dual").unwrap();
        assert_eq!(t.controllers.len(), 2);
        assert_eq!(t.controllers[0].serial, t.controllers[1].serial);
        assert_eq!(t.controllers[0].subsystem, t.controllers[1].subsystem);
        assert!(t.namespaces.iter().any(|n| n.shared && !n.detached));
        assert!(t.namespaces.iter().any(|n| !n.shared && n.detached));
    }

    #[test]
    fn hotplug_has_controllers_behind_root_ports() {
        let t = Topology::builtin("hotplug").unwrap();
        assert!(t.controllers.len() >= 2);
        assert!(t.controllers.iter().all(|c| c.root_port.is_some() && c.subsystem.is_some()));
        assert!(t.device_args().iter().any(|a| a == "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off"));
    }

    #[test]
    fn command_line_for_a_small_topology() {
        let text = "name: lab\n\
            machine: {memory_mb: 256, dma_window_mb: 32, timeout_ms: 5000, disk_aio: threads}\n\
            subsystems: [{id: sub, nqn: lab-1}]\n\
            root_ports: [{id: rp1, chassis: 2, slot: 7}]\n\
            controllers:\n\
            \x20 - {id: c0, serial: SER1, subsystem: sub, mdts: 5, max_ioqpairs: 4, mqes: 63}\n\
            \x20 - {id: c1, serial: SER1, subsystem: sub, root_port: rp1, use_intel_id: true}\n\
            namespaces:\n\
            \x20 - {nsid: 1, controller: c0, lbads: 4096, size: 1MiB, nguid: 00112233-4455-6677-8899-aabbccddeeff, eui64: 0x0011223344556677, uuid: 123e4567-e89b-12d3-a456-426614174000}\n\
            \x20 - {nsid: 2, controller: c1, lbads: 512, blocks: 100, ms: 8, pi: 1, shared: false, detached: true, write_cache: false}\n";
        let t = load(text).unwrap();
        let c = t.qemu_config();
        assert_eq!(
            (c.memory_mb, c.dma_window_mb, c.timeout, c.disk_aio),
            (256, 32, Duration::from_secs(5), DiskAio::Threads)
        );
        assert_eq!(c.label, "lab");
        assert_eq!(
            c.disks,
            vec![
                Disk { node_name: "c0-ns1".into(), size_bytes: 1 << 20 },
                Disk { node_name: "c1-ns2".into(), size_bytes: 100 * 520 },
            ]
        );
        let expected = [
            "-device",
            "nvme-subsys,id=sub,nqn=lab-1",
            "-device",
            "pcie-root-port,id=rp1,bus=pcie.0,addr=0x10,chassis=2,slot=7,hotplug=on",
            "-device",
            "nvme,id=c0,serial=SER1,bus=pcie.0,addr=0x01,subsys=sub,mdts=5,max_ioqpairs=4,mqes=63",
            "-device",
            "nvme,id=c1,serial=SER1,bus=rp1,addr=0x00,subsys=sub,use-intel-id=on",
            "-device",
            "nvme-ns,id=c0-ns1,bus=c0,drive=c0-ns1,nsid=1,logical_block_size=4096,physical_block_size=4096,shared=on,\
             uuid=123e4567-e89b-12d3-a456-426614174000,nguid=00112233445566778899aabbccddeeff,eui64=4822678189205111",
            "-device",
            "nvme-ns,id=c1-ns2,bus=c1,drive=c1-ns2,nsid=2,logical_block_size=512,physical_block_size=512,shared=off,\
             detached=on,ms=8,mset=0,pi=1,write-cache=off",
            "-global",
            "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off",
        ];
        assert_eq!(c.extra_args, expected);
    }

    #[test]
    fn defaults_follow_qemu_config() {
        let t = load(MINIMAL).unwrap();
        let c = t.qemu_config();
        let d = QemuConfig::default();
        assert_eq!((c.memory_mb, c.dma_window_mb, c.timeout), (d.memory_mb, d.dma_window_mb, d.timeout));
        assert!(t.namespaces[0].shared, "QEMU 10's nvme-ns default is shared=on");
        assert!(!c.extra_args.iter().any(|a| a == "-global"), "no root ports, no hot-plug global");
    }

    #[test]
    fn malformed_topologies_say_where_and_what_is_allowed() {
        let cases: &[(&str, &str)] = &[
            ("name: t\ncontrollers:\n  - {id: c0, serial: S1, colour: red}\n", "t.yaml:3:"),
            ("name: t\ncontrollers: []\n", "t.yaml:2:14: no controllers"),
            ("name: t\ncontrollers:\n  - {id: 0c, serial: S1}\n", "t.yaml:3:10: controller id `0c`"),
            ("name: t\ncontrollers:\n  - {id: c0, serial: \"has space\"}\n", "t.yaml:3:22: serial `has space`"),
            (
                "name: t\nsubsystems: [{id: s}]\ncontrollers:\n  - {id: c0, serial: A, subsystem: s}\n  - {id: c1, serial: B, subsystem: s}\n",
                "t.yaml:5:22: serial `B` differs",
            ),
            ("name: t\ncontrollers:\n  - {id: c0, serial: A, subsystem: nope}\n", "t.yaml:3:36: no subsystem `nope`; subsystems are: (none)"),
            (
                "name: t\ncontrollers:\n  - {id: c0, serial: A}\nnamespaces:\n  - {nsid: 1, controller: c0, lbads: 1024, blocks: 8}\n",
                "t.yaml:5:38: lbads 1024 is not offered; allowed: 512, 4096",
            ),
            (
                "name: t\ncontrollers:\n  - {id: c0, serial: A}\nnamespaces:\n  - {nsid: 300, controller: c0, lbads: 512, blocks: 8}\n",
                "t.yaml:5:12: nsid 300 is outside 1 ..= 256",
            ),
            (
                "name: t\ncontrollers:\n  - {id: c0, serial: A}\nnamespaces:\n  - {nsid: 1, controller: c0, lbads: 512, size: 1000}\n",
                "t.yaml:5:49: size 1000 bytes is not a positive multiple of the 512-byte block",
            ),
            (
                "name: t\ncontrollers:\n  - {id: c0, serial: A}\nnamespaces:\n  - {nsid: 1, controller: c0, lbads: 512, size: 3 parsecs}\n",
                "t.yaml:5:49: size is not a size",
            ),
            (
                "name: t\ncontrollers:\n  - {id: c0, serial: A}\nnamespaces:\n  - {nsid: 1, controller: c0, lbads: 512}\n",
                "t.yaml:5:5: give exactly one of blocks",
            ),
            (
                "name: t\ncontrollers:\n  - {id: c0, serial: A}\nnamespaces:\n  - {nsid: 1, controller: c0, lbads: 512, blocks: 8}\n  - {nsid: 1, controller: c0, lbads: 512, blocks: 8}\n",
                "t.yaml:6:12: nsid 1 is used twice",
            ),
            (
                "name: t\ncontrollers:\n  - {id: c0, serial: A}\nnamespaces:\n  - {nsid: 1, controller: c0, lbads: 512, blocks: 8, eui64: 7}\n  - {nsid: 2, controller: c0, lbads: 512, blocks: 8, eui64: 7}\n",
                "t.yaml:6:61: this eui64 is used by another namespace",
            ),
            ("name: t\ncontrollers:\n  - {id: c0, serial: A}\nnamespaces:\n  - {nsid: 1, controller: c0, lbads: 512, blocks: 8, uuid: nope}\n", "uuid `nope` is not a UUID"),
            ("name: t\nmachine: {memory_mb: 4096}\ncontrollers:\n  - {id: c0, serial: A}\n", "t.yaml:2:22: memory_mb 4096 is outside"),
            ("name: t\nmachine: {memory_mb: 64, dma_window_mb: 63}\ncontrollers:\n  - {id: c0, serial: A}\n  - {id: c1, serial: B}\n", "t.yaml:2:41: 2 controllers need 2 DMA windows"),
            ("name: t\nmachine: {disk_aio: fast}\ncontrollers:\n  - {id: c0, serial: A}\n", "t.yaml:2:21: unknown name `fast`"),
            ("name: t\ncontrollers:\n  - {id: c0, serial: A}\n  - {id: c0, serial: A}\n", "t.yaml:4:10: id `c0` is used twice"),
            ("name: t\nroot_ports: [{id: r}]\ncontrollers:\n  - {id: c0, serial: A, root_port: r}\n  - {id: c1, serial: A, root_port: r}\n", "t.yaml:5:36: root port `r` already has a controller"),
            ("name: t\ncontrollers:\n  - {id: c0, serial: A}\ncontrollers: []\n", "t.yaml:4:1: duplicate key"),
            ("name: t\ncontrollers:\n  - {id: c0, serial: A, mdts: 300}\n", "t.yaml:3:"),
            (
                "name: t\ncontrollers:\n  - {id: c0, serial: A, mdts: \"1\"}\n",
                "t.yaml:3:31: \"1\" is quoted text; a whole number (u8) is written without quotes: 1",
            ),
            (
                "name: t\ncontrollers:\n  - {id: c0, serial: A}\nnamespaces:\n  - {nsid: 1, controller: c0, lbads: 512, blocks: 8, shared: \"true\"}\n",
                "t.yaml:5:62: \"true\" is quoted text; true or false is written without quotes: true",
            ),
            ("name: t\nmachine: {memory_mb: \"256\"}\ncontrollers:\n  - {id: c0, serial: A}\n", "t.yaml:2:22: \"256\" is quoted text"),
            // A value folded over a blank line holds a line break; the error stays one line.
            (
                "name: t\ncontrollers:\n  - {id: c0, serial: A}\nnamespaces:\n  - nsid: 1\n    controller: c0\n    lbads: 512\n    blocks: 8\n    uuid: 6e76\n\n      0001\n",
                "t.yaml:9:11: uuid `6e76\\n0001` is not a UUID",
            ),
        ];
        let mut wrong = Vec::new();
        for (text, want) in cases {
            let got = err(text);
            if !(got.starts_with("t.yaml:") && got.contains(want)) {
                wrong.push(format!("for\n{text}wanted `{want}` in\n{got}\n"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn numbers_and_booleans_are_typed_not_quoted() {
        let typed = "name: t\nmachine: {memory_mb: 256}\ncontrollers:\n  - {id: c0, serial: A, mdts: 1}\nnamespaces:\n  - {nsid: 1, controller: c0, lbads: 512, blocks: 8, shared: true}\n";
        let t = load(typed).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((t.controllers[0].mdts, t.namespaces[0].shared, t.machine.memory_mb), (Some(1), true, 256));
        let quoted = typed.replace("mdts: 1", "mdts: \"1\"");
        assert_eq!(err(&quoted), "t.yaml:4:31: \"1\" is quoted text; a whole number (u8) is written without quotes: 1");
        // Text is still text where text is expected: a serial of digits, quoted or not.
        assert!(load(&typed.replace("serial: A", "serial: \"123\"")).is_ok());
    }

    #[test]
    fn unknown_keys_list_the_allowed_ones() {
        let got = err("name: t\ncontrollers:\n  - {id: c0, serial: S1, colour: red}\n");
        assert!(got.contains("unknown key") && got.contains("serial") && got.contains("mdts"), "{got}");
    }

    #[test]
    fn sizes_take_units() {
        assert_eq!(SizeText::Text("256MiB".into()).bytes(), Some(256 << 20));
        assert_eq!(SizeText::Text("1 GiB".into()).bytes(), Some(1 << 30));
        assert_eq!(SizeText::Bytes(4096).bytes(), Some(4096));
        assert_eq!(nvme::input::parse_size("512 B"), Some(512));
        assert_eq!(nvme::input::parse_size("4 KiB"), Some(4096));
        assert_eq!(nvme::input::parse_size("1 GB"), None);
        assert_eq!(nvme::input::parse_size("99999999999 TiB"), None);
    }
}
