//! QEMU's emulated NVMe controllers as transports, with no guest OS: nvtest is the
//! controller's only driver.
//!
//! QEMU runs `q35` under TCG with its vCPU stopped (`-S`), so no firmware ever touches
//! a device. nvtest reaches the machine three ways:
//! - **qtest** (`-qtest unix:…,abstract=on`, nvtest listening, QEMU connecting): port I/O and
//!   physical memory reads/writes, used for PCI configuration (ECAM, enabled through
//!   0xCF8/0xCFC at start) and BAR0 registers. Register writes are posted: sent at
//!   once, their `OK` collected later (qtest.rs), so a doorbell costs no round trip.
//! - **shared guest RAM**: `memory-backend-file,share=on` on a file in /dev/shm that
//!   nvtest maps; bus address = file offset (all RAM sits below the PCI hole, so
//!   [`QemuConfig::memory_mb`] is at most 2048). Queues and data buffers are plain
//!   memory; only register accesses cross the socket. The file is unlinked as soon as
//!   QEMU has it open (QEMU keeps using the unlinked file), so nothing can be left in
//!   /dev/shm after that.
//! - **stderr**: a pipe nvtest drains into memory ([`stderr`]), never a file beside the
//!   images, whose filesystem may be the one that is full.
//! - **QMP** (`-qmp unix:…,server=on,wait=off,abstract=on`): commands (device_add, device_del,
//!   qom-set …) and events.
//!
//! [`QemuMachine`] owns one QEMU; [`QemuMachine::transport`] hands out one
//! [`QemuTransport`] per NVMe function, each with its own window of guest RAM as its
//! [`DmaRegion`], all sharing the machine. Dropping the machine (or a panic unwinding
//! through it, or SIGINT/SIGTERM, see [`cleanup_all`]) kills QEMU and removes its
//! temporary directory; QEMU also dies with nvtest (`PR_SET_PDEATHSIG`).
//!
//! Against SIGKILL of nvtest, which no handler sees, the files have names only while
//! QEMU needs them: the temporary directory (`nvtest-qemu-<pid>-*` in TMPDIR: the
//! images; both sockets are abstract, with no file) goes as soon as QEMU has opened the
//! images and nvtest is connected, the guest-RAM file once QEMU has mapped it. What a
//! SIGKILL during a start leaves, every later machine's start sweeps away
//! ([`leftovers`]), never touching a live run's. A start after a power cut
//! ([`QemuMachine::power_on`]) names nothing at all.
//!
//! The host under QEMU is checked ([`host`]): enough free space for the images and the
//! guest RAM before QEMU starts, and [`QemuMachine::host_faults`] while it runs, so a
//! full disk under the images is nvtest's error, never the drive's Write Fault.
//!
//! `idle()` has nothing to advance: with the vCPU stopped, QEMU's main loop still runs
//! the NVMe device's bottom halves (doorbell → SQ processing → block I/O → CQ posting)
//! in real time, and `clock_step` does not exist outside `-accel qtest` (QEMU answers
//! "FAIL Unknown command"). The virtual clock is stopped, so anything the device times
//! on it (e.g. the Timestamp feature) does not advance. `idle()` collects the answers to
//! posted writes and yields the CPU to QEMU.

mod host;
pub use host::{check_image_space, image_faults};
mod leftovers;
mod pci;
mod process;
mod qmp;
mod qtest;
mod slot;
mod socket;
mod stderr;

pub use pci::{Bar, PciAddress, PciFunction};
pub use process::{
    cleanup_all, cleanup_and_exit, install_interrupt_cleanup, on_interrupt, spawn_watched_group, WatchedGroup,
};
pub use qtest::QtestStats;

use std::fs::File;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use self::host::FaultWatch;
use self::pci::{ConfigSpace, PciState, ScanError, CMD_BUS_MASTER, CMD_MEMORY};
use self::process::Process;
use self::qmp::{Qmp, QmpFailure};
use self::qtest::{Op, Qtest, QtestError};
use self::socket::WaitError;
use self::stderr::StderrLog;
use super::{DmaRegion, PowerMethod, PowerSwitch, Transport, TransportError};
use crate::device::HostFault;

/// How to install QEMU where it is missing (Debian bookworm).
pub const INSTALL_HINT: &str = "install QEMU 10 from bookworm-backports: add \
     'deb http://deb.debian.org/debian bookworm-backports main' to the apt sources, then \
     `apt-get update && apt-get install -y -t bookworm-backports qemu-system-x86`";

/// Checks that `binary` (e.g. `qemu-system-x86_64`) runs (`--version`); the error names it
/// and says how to install QEMU. Tests that need QEMU fail with it, never skip.
pub fn require_binary(binary: &Path) -> Result<(), String> {
    let works = Command::new(binary)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if works {
        Ok(())
    } else {
        Err(format!("{} does not run here; {INSTALL_HINT}", binary.display()))
    }
}

/// The guest-physical address of the first byte of DMA memory. Below 1 MiB, q35 maps
/// legacy VGA and BIOS ranges over RAM, so it is not used for DMA.
const DMA_START: u64 = 1 << 20;
/// Where PCIe ECAM (MMCONFIG) is enabled: q35's PCIEXBAR default, 256 buses.
const ECAM_BASE: u64 = 0xB000_0000;
/// q35's host bridge (MCH) register PCIEXBAR, at 00:00.0 offset 60h.
const MCH_PCIEXBAR: u8 = 0x60;
/// The 32-bit MMIO window BARs are placed in: above ECAM, below the IOAPIC.
const MMIO_BASE: u64 = 0xC000_0000;
const MMIO_END: u64 = 0xFEC0_0000;
/// How long a dropped machine waits for QEMU to `quit` before SIGKILL.
const QUIT_BOUND: Duration = Duration::from_millis(500);

/// A raw disk image nvtest creates (sparse) in the machine's temporary directory and
/// hands QEMU as a block node: `-blockdev driver=file,node-name=<node>-file,aio=…,…` and
/// `-blockdev driver=raw,node-name=<node>,file=<node>-file`. Device arguments name it as
/// `drive=<node>` (for example `nvme-ns,drive=ns1,nsid=1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disk {
    pub node_name: String,
    pub size_bytes: u64,
}

/// How QEMU submits a [`Disk`]'s I/O to the host (the file node's `aio` option).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DiskAio {
    /// Linux io_uring: measured 1.5–3x the IOPS of `Threads` at QD 32 here, since no
    /// worker-thread hand-off is needed per request. Needs a kernel that allows io_uring.
    #[default]
    IoUring,
    /// QEMU's default: a pool of worker threads doing blocking preadv/pwritev.
    Threads,
}

impl DiskAio {
    fn option(self) -> &'static str {
        match self {
            DiskAio::IoUring => "io_uring",
            DiskAio::Threads => "threads",
        }
    }
}

/// What to start.
#[derive(Clone, Debug)]
pub struct QemuConfig {
    /// The QEMU binary (looked up in PATH when it has no `/`).
    pub binary: PathBuf,
    /// Guest RAM in MiB (16 ..= 2048), all of it shared with nvtest.
    pub memory_mb: u32,
    /// Guest RAM given to each transport as its DMA region, in MiB.
    pub dma_window_mb: u32,
    /// Raw images to create and attach as block nodes before QEMU starts.
    pub disks: Vec<Disk>,
    /// How QEMU does the disks' I/O.
    pub disk_aio: DiskAio,
    /// Device arguments (`-device nvme,…`, `-device pcie-root-port,…`, …), passed as is.
    pub extra_args: Vec<String>,
    /// The longest any single qtest or QMP exchange may take.
    pub timeout: Duration,
    /// Names the machine in reports: transports describe themselves as
    /// `qemu:<label> <bus:dev.fn>`.
    pub label: String,
    /// Where the disks' images live between runs (`<node_name>.img`: used as found when
    /// it has the disk's size, created sparse when missing, never removed): media that
    /// outlives nvtest, for `nvtest resume` after nvtest or the host died. `None`: the
    /// images are temporary, in the machine's directory.
    pub image_dir: Option<PathBuf>,
}

impl Default for QemuConfig {
    fn default() -> Self {
        QemuConfig {
            binary: PathBuf::from("qemu-system-x86_64"),
            memory_mb: 512,
            dma_window_mb: 64,
            disks: Vec::new(),
            disk_aio: DiskAio::default(),
            extra_args: Vec::new(),
            timeout: Duration::from_secs(10),
            label: "qemu".to_owned(),
            image_dir: None,
        }
    }
}

/// A QMP command QEMU refused, or a failure to talk to QEMU at all.
#[derive(Debug, thiserror::Error)]
pub enum QmpError {
    #[error("QMP {command}: {class}: {desc}")]
    Command { command: String, class: String, desc: String },
    #[error(transparent)]
    Transport(#[from] TransportError),
}

impl From<QmpError> for TransportError {
    fn from(e: QmpError) -> Self {
        match e {
            QmpError::Command { .. } => TransportError::Other(e.to_string()),
            QmpError::Transport(t) => t,
        }
    }
}

/// The qtest connection and the PCI address plan, used together under one lock.
struct Bus {
    qtest: Qtest,
    pci: PciState,
    /// Why the connection is unusable (QEMU died, timed out, or the machine shut down).
    dead: Option<String>,
    /// QEMU was killed to cut the power ([`Machine::power_off`]): the one way to be
    /// dead that [`Machine::power_on`] undoes.
    powered_off: bool,
}

struct Machine {
    label: String,
    timeout: Duration,
    bus: Mutex<Bus>,
    qmp: Mutex<Qmp>,
    process: Mutex<Process>,
    /// What the machine was started with, to start it again after a power cut.
    config: QemuConfig,
    /// The start's disk images, held open (they have no name once QEMU opened them): a
    /// QEMU started again after a power cut opens them as `/proc/<nvtest>/fd/<fd>`.
    image_files: Vec<File>,
    /// Guest RAM (already unlinked), mapped window by window for transports; a QEMU
    /// started again maps the same file, so the transports' mappings stay valid.
    ram: File,
    /// The name the RAM file had in /dev/shm.
    ram_path: PathBuf,
    /// The name the start's temporary directory had in TMPDIR.
    start_dir: PathBuf,
    dma_window: u64,
    /// Which transport holds each DMA window.
    windows: Mutex<Vec<Option<PciAddress>>>,
    /// Everything QEMU wrote to stderr.
    stderr: StderrLog,
    /// The disk images that still have a name: those of `create_disk` (the images of
    /// the start are unlinked once QEMU has them open, so no cleaner can remove them).
    images: Mutex<Vec<PathBuf>>,
    /// TMPDIR when the machine started: where its images are, also unlinked ones
    /// (their space is still taken on that filesystem).
    tmp_dir: PathBuf,
    /// The host faults already reported.
    faults: Mutex<FaultWatch>,
}

/// A running QEMU with its NVMe controllers. Dropping it stops QEMU and removes every
/// file it used; transports still alive then report [`TransportError::Gone`].
pub struct QemuMachine {
    machine: Arc<Machine>,
}

/// One NVMe function of a [`QemuMachine`] as a [`Transport`].
pub struct QemuTransport {
    machine: Arc<Machine>,
    address: PciAddress,
    bar0: Bar,
    dma: DmaRegion,
    window: usize,
    /// The hot-plug slot the function sits in, when made with
    /// [`QemuMachine::transport_in_slot`].
    hotplug: Option<slot::HotplugSlot>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its data consistent before it can panic.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn other(what: impl std::fmt::Display, e: impl std::fmt::Display) -> TransportError {
    TransportError::Other(format!("{what}: {e}"))
}

impl QemuConfig {
    fn validate(&self) -> Result<(), TransportError> {
        if !(16..=2048).contains(&self.memory_mb) {
            return Err(TransportError::Other(format!(
                "QEMU memory_mb {} is outside 16..=2048 (RAM must stay below the PCI hole)",
                self.memory_mb
            )));
        }
        if self.dma_window_mb == 0 || (self.dma_window_mb as u64) << 20 > self.ram_bytes() - DMA_START {
            return Err(TransportError::Other(format!(
                "QEMU dma_window_mb {} must be at least 1 and fit in {} MiB of guest RAM above 1 MiB",
                self.dma_window_mb, self.memory_mb
            )));
        }
        for disk in &self.disks {
            check_node_name(&disk.node_name)?;
        }
        if self.timeout.is_zero() {
            return Err(TransportError::Other("QEMU timeout must be positive".to_owned()));
        }
        Ok(())
    }

    fn ram_bytes(&self) -> u64 {
        (self.memory_mb as u64) << 20
    }

    /// The disks' sizes added up (what the sparse images could grow to).
    fn image_bytes(&self) -> u64 {
        self.disks.iter().map(|d| d.size_bytes).fold(0, u64::saturating_add)
    }
}

/// A disk's node name becomes part of QEMU options (`node-name=<name>-file`) and of a
/// file name, so it is kept to what QEMU accepts there and can never split an option.
fn check_node_name(name: &str) -> Result<(), TransportError> {
    let valid = name.len() <= 26
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(TransportError::Other(format!(
            "disk node name {name:?}: use up to 26 letters, digits, '-' or '_', starting with a letter"
        )));
    }
    Ok(())
}

impl QemuMachine {
    /// Starts QEMU with `config`, enumerates PCI and configures every NVMe function.
    /// First checks the free space the images' filesystem (TMPDIR) and /dev/shm need
    /// ([`host`]); without it nothing is created or started.
    pub fn start(config: QemuConfig) -> Result<QemuMachine, TransportError> {
        config.validate()?;
        let ram_bytes = config.ram_bytes();
        let tmp_dir = std::env::temp_dir();
        // Dead runs' files go first, so their space counts as free.
        leftovers::sweep(&tmp_dir, Path::new(host::SHM_DIR));
        host::check_free_space(&tmp_dir, config.image_bytes(), Path::new(host::SHM_DIR), ram_bytes)?;
        // Every file nvtest creates for the machine is created, and QEMU is spawned, with
        // the registry held: a SIGINT/SIGTERM arriving meanwhile waits, then finds them
        // all registered.
        let starting = process::hold_for_start()?;
        let dir = leftovers::RunDir::create_in(&tmp_dir)
            .map_err(|e| other("cannot create a temporary directory for QEMU", e))?;
        let ram = leftovers::shm_file(Path::new(host::SHM_DIR))
            .map_err(|e| other("cannot create the guest RAM file in /dev/shm", e))?;
        ram.as_file().set_len(ram_bytes).map_err(|e| other("cannot size the guest RAM file", e))?;
        let ram_path = ram.path().to_owned();
        let registered = process::register_held(starting, Some(dir.path()), Some(&ram_path));
        let start_dir = dir.path().to_owned();
        let id = registered.id();

        let mut image_paths = Vec::with_capacity(config.disks.len());
        let mut image_files = Vec::with_capacity(config.disks.len());
        for disk in &config.disks {
            let (image, file) = match &config.image_dir {
                Some(kept) => {
                    let image = kept.join(format!("{}.img", disk.node_name));
                    (image.clone(), open_kept_image(&image, disk.size_bytes)?)
                }
                None => {
                    let image = dir.path().join(format!("{}.img", disk.node_name));
                    (image.clone(), create_sparse(&image, disk.size_bytes)?)
                }
            };
            image_files.push(file);
            image_paths.push(qemu_path(&image)?);
        }
        let (cmd, listener, qmp_address) = command(&config, &qemu_path(&ram_path)?, &image_paths)?;
        let process = Process::spawn(registered, cmd, Some(dir), None).map_err(|e| {
            TransportError::Other(format!("cannot run {}: {e}; {INSTALL_HINT}", config.binary.display()))
        })?;
        // From here on, dropping `process` kills QEMU and removes the directory.
        let mut process = process;
        let (qtest, qmp) = attach(&mut process, &listener, &qmp_address, config.timeout)?;
        drop(listener);
        // QMP answers only after machine creation, so QEMU has the RAM file open and
        // mapped: its name can go.
        let ram_file = ram.into_file();
        process::shm_unlinked(id);
        // QEMU has its images open (block nodes are opened before the machine is
        // created) and both sockets are connected: nothing needs a name in the
        // directory any more, so it goes now and a SIGKILL of nvtest leaves nothing.
        // QMP is never reconnected; a start after a power cut reaches the images and the
        // RAM through nvtest's open files; images QEMU is to open later by name get a
        // directory again ([`Self::create_disk`]).
        process.remove_dir();

        let stderr = process.stderr().clone();
        let machine = Arc::new(Machine {
            label: config.label.clone(),
            timeout: config.timeout,
            bus: Mutex::new(Bus { qtest, pci: PciState::new(MMIO_BASE, MMIO_END), dead: None, powered_off: false }),
            qmp: Mutex::new(qmp),
            process: Mutex::new(process),
            ram: ram_file,
            ram_path,
            start_dir,
            dma_window: (config.dma_window_mb as u64) << 20,
            windows: Mutex::new(vec![None; ((ram_bytes - DMA_START) / ((config.dma_window_mb as u64) << 20)) as usize]),
            stderr,
            images: Mutex::new(Vec::new()),
            tmp_dir,
            faults: Mutex::new(FaultWatch::default()),
            config,
            image_files,
        });
        let qemu = QemuMachine { machine };
        qemu.machine.with_bus("enabling PCIe ECAM", enable_ecam)??;
        qemu.rescan()?;
        Ok(qemu)
    }

    /// NVMe functions found at the last scan, ascending.
    pub fn controllers(&self) -> Vec<PciAddress> {
        lock(&self.machine.bus).pci.nvme_functions().map(|f| f.address).collect()
    }

    /// The NVMe function at `address` as configured (IDs, class, BARs).
    pub fn function(&self, address: PciAddress) -> Option<PciFunction> {
        lock(&self.machine.bus).pci.function(address).cloned()
    }

    /// Scans PCI again (after device_add / device_del): new NVMe functions are placed
    /// and enabled, vanished ones forgotten. Returns [`Self::controllers`].
    pub fn rescan(&self) -> Result<Vec<PciAddress>, TransportError> {
        self.machine.scan()?;
        Ok(self.controllers())
    }

    /// Cuts the machine's power: QEMU is stopped and killed (SIGSTOP, SIGKILL) and
    /// reaped, whatever its controllers were doing. What QEMU had written to its images
    /// stays there (the host's page cache outlives it), each host write whole; commands
    /// it had not carried out are lost. Every
    /// transport of the machine reports [`TransportError::Gone`] until
    /// [`Self::power_on`].
    pub fn power_off(&self) -> Result<(), TransportError> {
        self.machine.power_off()
    }

    /// Starts QEMU again after [`Self::power_off`] with the same command line, on the
    /// same images and guest-RAM file, and enumerates PCI again (every function placed
    /// where it was). Devices added through QMP since the first start are not there.
    pub fn power_on(&self) -> Result<(), TransportError> {
        self.machine.power_on()
    }

    /// A transport for the NVMe function at `address`, with its own DMA window of guest
    /// RAM, all zeroes. One transport per function at a time. Sets Bus Master Enable;
    /// dropping the transport clears it, so the controller can no longer write into that
    /// window once another transport has it.
    pub fn transport(&self, address: PciAddress) -> Result<QemuTransport, TransportError> {
        let bar0 = self
            .function(address)
            .and_then(|f| f.bar(0))
            .ok_or_else(|| TransportError::Other(format!("no NVMe controller with a BAR0 at {address}")))?;
        let window = {
            let mut windows = lock(&self.machine.windows);
            if windows.contains(&Some(address)) {
                return Err(TransportError::Other(format!("{address} already has a transport")));
            }
            let free = windows.iter().position(Option::is_none).ok_or_else(|| {
                TransportError::Other(format!(
                    "all {} DMA windows of {} MiB are in use; raise memory_mb or lower dma_window_mb",
                    windows.len(),
                    self.machine.dma_window >> 20
                ))
            })?;
            windows[free] = Some(address);
            free
        };
        let result = self.machine.map_window(window).and_then(|dma| {
            let command = self.machine.config_read(address, 0x04)?;
            self.machine.config_write(address, 0x04, (command & 0xFFFF) | CMD_MEMORY | CMD_BUS_MASTER)?;
            Ok(dma)
        });
        match result {
            Ok(dma) => Ok(QemuTransport { machine: self.machine.clone(), address, bar0, dma, window, hotplug: None }),
            Err(e) => {
                lock(&self.machine.windows)[window] = None;
                Err(e)
            }
        }
    }

    /// Reads a dword of any function's configuration space (0 ..= FFCh, ECAM).
    pub fn config_read32(&self, address: PciAddress, offset: u16) -> Result<u32, TransportError> {
        self.machine.config_read(address, offset)
    }

    /// Writes a dword of any function's configuration space (e.g. a root port's Slot
    /// Control for hot-plug).
    pub fn config_write32(&self, address: PciAddress, offset: u16, value: u32) -> Result<(), TransportError> {
        self.machine.config_write(address, offset, value)
    }

    /// The offset of the PCI Express Capability (ID 10h) in `port`'s configuration space,
    /// found through the capability list; `None` when the function has none.
    pub fn pcie_capability(&self, port: PciAddress) -> Result<Option<u16>, TransportError> {
        slot::pcie_capability(&self.machine, port)
    }

    /// Sets a PCIe root port's Slot Control (PCI Express Capability + 18h) as a guest's
    /// hot-plug driver would: power on is Power Controller Control (bit 10) 0 with the
    /// Power Indicator (bits 9:8) on (01b); power off is PCC 1 with the indicator off
    /// (11b), which is when QEMU completes the removal of a device being deleted (and
    /// removes one that was not, at once: a surprise removal). Slot Status (the upper
    /// half) is written as 0, leaving its RW1C bits alone.
    pub fn set_slot_power(&self, port: PciAddress, on: bool) -> Result<(), TransportError> {
        let pcie = self
            .pcie_capability(port)?
            .ok_or_else(|| TransportError::Other(format!("{port} has no PCI Express capability")))?;
        slot::set_slot_power(&self.machine, port, pcie, on)
    }

    /// Runs a QMP command; `arguments` is its JSON object. Returns QMP's `return` value.
    pub fn qmp_execute(&self, command: &str, arguments: Option<Value>) -> Result<Value, QmpError> {
        let result = lock(&self.machine.qmp).execute(command, arguments);
        result.map_err(|failure| self.machine.qmp_error(command, failure))
    }

    /// Waits up to `timeout` for the QMP event `name` (events that arrived earlier,
    /// during commands, count) and returns the whole event object.
    pub fn qmp_wait_event(&self, name: &str, timeout: Duration) -> Result<Value, QmpError> {
        let result = lock(&self.machine.qmp).wait_event(name, timeout);
        result.map_err(|failure| match failure {
            QmpFailure::Timeout => QmpError::Transport(TransportError::Timeout(timeout.as_millis() as u64)),
            failure => self.machine.qmp_error(&format!("waiting for event {name}"), failure),
        })
    }

    /// Every QMP event received and not yet waited for, oldest first.
    pub fn qmp_take_events(&self) -> Result<Vec<Value>, QmpError> {
        let result = lock(&self.machine.qmp).take_events();
        result.map_err(|failure| self.machine.qmp_error("reading events", failure))
    }

    /// Creates a sparse raw image `<name>.img` of `size_bytes` in the machine's
    /// temporary directory (removed with the machine), e.g. for `blockdev-add`. The
    /// directory, gone after the start, is created again for it: QEMU opens the image
    /// by name whenever it is told to, so the name stays until the machine is dropped
    /// (a SIGKILL meanwhile leaves it to the next machine's sweep, [`leftovers`]).
    pub fn create_disk(&self, name: &str, size_bytes: u64) -> Result<PathBuf, TransportError> {
        check_node_name(name)?;
        let dir = lock(&self.machine.process).ensure_dir(&self.machine.tmp_dir).map_err(|e| {
            if self.temp_dir().is_none() && lock(&self.machine.bus).dead.is_some() {
                TransportError::Gone(format!("the machine was shut down ({e})"))
            } else {
                other("cannot create a directory for a disk image", e)
            }
        })?;
        let path = dir.join(format!("{name}.img"));
        process::while_no_cleanup(|| create_sparse(&path, size_bytes))?;
        lock(&self.machine.images).push(path.clone());
        Ok(path)
    }

    /// QEMU's stderr lines after line number `cursor`, moving `cursor` past them. Each
    /// reader keeps its own cursor; every line stays readable by all (up to 10 000).
    pub fn stderr_since(&self, cursor: &mut u64) -> Vec<String> {
        self.machine.stderr.lines_since(cursor)
    }

    /// Faults of the host under this machine seen since the last call, each once: I/O
    /// errors QEMU met on its disk images (a full filesystem, a failing disk), and
    /// images that no longer exist. Each names the cause, the place and what to do.
    pub fn host_faults(&self) -> Vec<HostFault> {
        let images = lock(&self.machine.images).clone();
        lock(&self.machine.faults).take(&self.machine.stderr, &self.machine.tmp_dir, &images)
    }

    /// qtest requests sent so far, by kind.
    pub fn qtest_stats(&self) -> QtestStats {
        lock(&self.machine.bus).qtest.stats()
    }

    /// QEMU's process id.
    pub fn pid(&self) -> u32 {
        lock(&self.machine.process).pid()
    }

    /// The machine's temporary directory while it has one: during the start (the
    /// images), then only once [`Self::create_disk`] made one; `None` otherwise.
    pub fn temp_dir(&self) -> Option<PathBuf> {
        lock(&self.machine.process).dir().map(Path::to_owned)
    }

    /// The name the guest-RAM file had in /dev/shm (unlinked once QEMU opened it).
    pub fn ram_path(&self) -> &Path {
        &self.machine.ram_path
    }

    /// The name the start's temporary directory had in TMPDIR (removed once QEMU had
    /// its images open; [`Self::create_disk`] may create it again).
    pub fn start_dir(&self) -> &Path {
        &self.machine.start_dir
    }
}

impl Drop for QemuMachine {
    fn drop(&mut self) {
        self.machine.shut_down();
    }
}

/// Builds the command line and the qtest listening socket, with guest RAM in the file
/// `ram` and the disks in the files `images` (paths as QEMU is to open them, one per
/// [`QemuConfig::disks`]). Returns the command, the listener and the QMP socket's
/// address. Both sockets are abstract (Linux): they have no file that could be left
/// behind, and go with the last process that holds them.
fn command(
    config: &QemuConfig,
    ram: &str,
    images: &[String],
) -> Result<(Command, UnixListener, SocketAddr), TransportError> {
    use std::os::linux::net::SocketAddrExt;
    static SOCKETS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SOCKETS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = format!("nvtest-qemu-{}-{n}", std::process::id());
    let abstract_address = |name: &str| {
        SocketAddr::from_abstract_name(name.as_bytes()).map_err(|e| other("cannot name an abstract socket", e))
    };
    let qtest_name = format!("{base}-qtest");
    let qmp_name = format!("{base}-qmp");
    let listener =
        UnixListener::bind_addr(&abstract_address(&qtest_name)?).map_err(|e| other("cannot listen for qtest", e))?;
    listener.set_nonblocking(true).map_err(|e| other("qtest socket", e))?;
    let ram_mb = config.memory_mb;
    let mut cmd = Command::new(&config.binary);
    cmd.args(["-machine", "q35,memory-backend=mem", "-accel", "tcg", "-S", "-nodefaults", "-no-user-config"]);
    cmd.args(["-display", "none", "-m", &format!("{ram_mb}M")]);
    cmd.arg("-object").arg(format!("memory-backend-file,id=mem,size={ram_mb}M,mem-path={ram},share=on"));
    cmd.arg("-qtest").arg(format!("unix:{qtest_name},abstract=on"));
    cmd.args(["-qtest-log", "/dev/null"]);
    cmd.arg("-qmp").arg(format!("unix:{qmp_name},server=on,wait=off,abstract=on"));
    for (disk, image) in config.disks.iter().zip(images) {
        let node = &disk.node_name;
        // discard=unmap on both nodes: a deallocate (Dataset Management AD, Write Zeroes
        // DEAC) then really punches the blocks out of the image, as a drive's would.
        cmd.arg("-blockdev").arg(format!(
            "driver=file,node-name={node}-file,filename={image},aio={},discard=unmap",
            config.disk_aio.option()
        ));
        cmd.arg("-blockdev").arg(format!("driver=raw,node-name={node},file={node}-file,discard=unmap"));
    }
    cmd.args(&config.extra_args);
    // Piped into memory (stderr.rs); in the C locale, so its error texts are glibc's
    // English ones that host.rs recognises.
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).env("LC_ALL", "C");
    // Its own process group: a terminal's Ctrl-C reaches nvtest, which then stops QEMU.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    Ok((cmd, listener, abstract_address(&qmp_name)?))
}

/// Waits for QEMU to connect to qtest, then connects to its QMP and shakes hands.
fn attach(
    process: &mut Process,
    listener: &UnixListener,
    qmp_address: &SocketAddr,
    timeout: Duration,
) -> Result<(Qtest, Qmp), TransportError> {
    let deadline = Instant::now() + timeout;
    let qtest_stream = accept(listener, process, deadline)?;
    let qmp_stream = connect(qmp_address, process, deadline)?;
    let qmp = Qmp::handshake(qmp_stream, timeout)
        .map_err(|e| startup_failure(process, "the QMP handshake", qmp_failure_text(&e)))?;
    Ok((Qtest::new(socket::LineSocket::new(qtest_stream), timeout), qmp))
}

/// A path as it may appear inside a QEMU option value (commas would split the option).
fn qemu_path(path: &Path) -> Result<String, TransportError> {
    match path.to_str() {
        Some(s) if !s.contains(',') => Ok(s.to_owned()),
        _ => Err(TransportError::Other(format!("path {} is unusable in a QEMU option", path.display()))),
    }
}

/// An image of [`QemuConfig::image_dir`]: opened as found when it has `size` bytes,
/// created sparse (with its directory) when missing.
fn open_kept_image(path: &Path, size: u64) -> Result<File, TransportError> {
    let fail = |e: std::io::Error| other(format!("image {}", path.display()), e);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let file =
        std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).map_err(fail)?;
    let len = file.metadata().map_err(fail)?.len();
    if len == 0 {
        file.set_len(size).map_err(fail)?;
    } else if len != size {
        return Err(TransportError::Other(format!(
            "image {} has {len} bytes, the topology's namespace {size}: remove it or fix the topology",
            path.display()
        )));
    }
    Ok(file)
}

fn create_sparse(path: &Path, size: u64) -> Result<File, TransportError> {
    let file = File::create(path).map_err(|e| other(format!("cannot create {}", path.display()), e))?;
    file.set_len(size).map_err(|e| other(format!("cannot size {}", path.display()), e))?;
    Ok(file)
}

/// Waits for QEMU to connect to the qtest socket, noticing if it exits instead.
fn accept(listener: &UnixListener, process: &mut Process, deadline: Instant) -> Result<UnixStream, TransportError> {
    use std::os::fd::AsRawFd;
    loop {
        match listener.accept() {
            Ok((stream, _)) => return Ok(stream),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(other("accepting QEMU's qtest connection", e)),
        }
        if process.exit_status().is_some() {
            return Err(startup_failure(process, "the qtest connection", "QEMU exited".to_owned()));
        }
        if Instant::now() >= deadline {
            return Err(startup_failure(process, "the qtest connection", "no connection in time".to_owned()));
        }
        let slice = (Instant::now() + Duration::from_millis(20)).min(deadline);
        match socket::wait_fd(listener.as_raw_fd(), libc::POLLIN, slice) {
            Ok(()) | Err(WaitError::Timeout) => {}
            Err(e) => return Err(other("waiting for QEMU's qtest connection", format!("{e:?}"))),
        }
    }
}

/// Connects to QEMU's QMP socket once QEMU has created it.
fn connect(address: &SocketAddr, process: &mut Process, deadline: Instant) -> Result<UnixStream, TransportError> {
    loop {
        match UnixStream::connect_addr(address) {
            Ok(stream) => return Ok(stream),
            Err(e) => {
                if process.exit_status().is_some() {
                    return Err(startup_failure(process, "the QMP connection", "QEMU exited".to_owned()));
                }
                if Instant::now() >= deadline {
                    return Err(startup_failure(process, "the QMP connection", e.to_string()));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
}

/// The longest a killed QEMU's image locks may outlive it (see [`wait_until_unlocked`]).
const IMAGE_LOCK_RELEASE: Duration = Duration::from_secs(10);

/// Waits until no process holds a lock on any of `images`, at most `bound`. QEMU locks
/// its images (open file description locks, `locking=auto`); a QEMU killed with
/// `disk_aio: io_uring` can leave its ring's teardown to the kernel's workqueue, which
/// keeps the images' file descriptions, and so their locks, for a while after QEMU was
/// reaped (on a busy host long enough for the next QEMU to fail with `Failed to get
/// "write" lock`). nvtest's own descriptors hold no lock, so any lock seen is the dead
/// QEMU's. Past the bound it is an error of the host, never the drive's failure.
fn wait_until_unlocked(images: &[File], bound: Duration) -> Result<(), TransportError> {
    use std::os::fd::AsRawFd;
    let locked = |file: &File| {
        // SAFETY: a zeroed flock is a valid value; F_OFD_GETLK only writes into it.
        let mut probe: libc::flock = unsafe { std::mem::zeroed() };
        probe.l_type = libc::F_WRLCK as libc::c_short;
        probe.l_whence = libc::SEEK_SET as libc::c_short;
        // SAFETY: plain fcntl on an open descriptor with a valid flock.
        let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut probe) };
        r == 0 && probe.l_type != libc::F_UNLCK as libc::c_short
    };
    let deadline = Instant::now() + bound;
    while images.iter().any(locked) {
        if Instant::now() >= deadline {
            return Err(TransportError::Other(format!(
                "the disk images are still locked {} s after the QEMU that used them was killed (its io_uring \
                 teardown keeps them): the host is too slow to start QEMU again",
                bound.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn startup_failure(process: &mut Process, step: &str, what: String) -> TransportError {
    process.wait_exit(Duration::from_millis(500));
    TransportError::Gone(format!(
        "QEMU (pid {}) {} during {step} ({what}); stderr: {}",
        process.pid(),
        process.state(),
        process.stderr_tail()
    ))
}

fn qmp_failure_text(failure: &QmpFailure) -> String {
    match failure {
        QmpFailure::Command { class, desc } => format!("{class}: {desc}"),
        QmpFailure::Closed(None) => "connection closed".to_owned(),
        QmpFailure::Closed(Some(e)) => format!("connection broke: {e}"),
        QmpFailure::Timeout => "no answer in time".to_owned(),
        QmpFailure::Garbled(line) => format!("not a QMP message: {line}"),
    }
}

/// Turns on PCIe ECAM at [`ECAM_BASE`] through the legacy 0xCF8/0xCFC mechanism and
/// checks it by reading the host bridge's IDs both ways.
fn enable_ecam(bus: &mut Bus) -> Result<Result<(), TransportError>, QtestError> {
    let cf8 = |offset: u8| 0x8000_0000u32 | offset as u32;
    let qt = &mut bus.qtest;
    qt.post(Op::Outl { port: 0xCF8, value: cf8(0) })?;
    let legacy_id = qt.call(Op::Inl { port: 0xCFC })? as u32;
    qt.post(Op::Outl { port: 0xCF8, value: cf8(MCH_PCIEXBAR + 4) })?;
    qt.post(Op::Outl { port: 0xCFC, value: (ECAM_BASE >> 32) as u32 })?;
    qt.post(Op::Outl { port: 0xCF8, value: cf8(MCH_PCIEXBAR) })?;
    // Length 00b (256 buses), PCIEXBAREN.
    qt.post(Op::Outl { port: 0xCFC, value: ECAM_BASE as u32 | 1 })?;
    let ecam_id = qt.call(Op::Readl { addr: ECAM_BASE })? as u32;
    if legacy_id != ecam_id || legacy_id as u16 == 0xFFFF {
        return Ok(Err(TransportError::Other(format!(
            "PCIe ECAM did not come up at {ECAM_BASE:#x} (host bridge {legacy_id:#010x} through 0xCF8, \
             {ecam_id:#010x} through ECAM); is this a q35 machine?"
        ))));
    }
    Ok(Ok(()))
}

/// Configuration access through ECAM.
struct Ecam<'a>(&'a mut Qtest);

fn ecam_addr(f: PciAddress, offset: u16) -> u64 {
    ECAM_BASE | (f.bus as u64) << 20 | (f.device as u64 & 0x1F) << 15 | (f.function as u64 & 7) << 12 | offset as u64
}

impl ConfigSpace for Ecam<'_> {
    type Error = QtestError;
    fn read32(&mut self, f: PciAddress, offset: u16) -> Result<u32, QtestError> {
        Ok(self.0.call(Op::Readl { addr: ecam_addr(f, offset) })? as u32)
    }
    fn write32(&mut self, f: PciAddress, offset: u16, value: u32) -> Result<(), QtestError> {
        self.0.post(Op::Writel { addr: ecam_addr(f, offset), value })
    }
}

fn check_config_offset(address: PciAddress, offset: u16) -> Result<(), TransportError> {
    if offset > 0xFFC || !offset.is_multiple_of(4) || address.device > 31 || address.function > 7 {
        return Err(TransportError::Other(format!("config access {address} +{offset:#x}: not a dword of 4 KiB")));
    }
    Ok(())
}

impl Machine {
    /// Runs `f` on the qtest connection. A QEMU that went away turns into `Gone` with
    /// its exit status and stderr tail; a QEMU that stopped answering is killed (the
    /// stream is out of step after a timeout) and reported as `Timeout`.
    fn with_bus<R>(&self, what: &str, f: impl FnOnce(&mut Bus) -> Result<R, QtestError>) -> Result<R, TransportError> {
        let mut bus = lock(&self.bus);
        if let Some(dead) = &bus.dead {
            return Err(TransportError::Gone(dead.clone()));
        }
        match f(&mut bus) {
            Ok(r) => Ok(r),
            Err(QtestError::Reply { during, line }) => {
                Err(TransportError::Other(format!("{what}: qtest `{during}` got {line:?} from QEMU")))
            }
            Err(QtestError::Closed { during, cause }) => {
                let mut process = lock(&self.process);
                process.wait_exit(Duration::from_secs(1));
                let cause = cause.map(|c| format!(" ({c})")).unwrap_or_default();
                let dead = format!(
                    "QEMU (pid {}) {} while {what} (qtest `{during}`: connection closed{cause}); stderr: {}",
                    process.pid(),
                    process.state(),
                    process.stderr_tail()
                );
                bus.dead = Some(dead.clone());
                Err(TransportError::Gone(dead))
            }
            Err(QtestError::Timeout { during }) => {
                let mut process = lock(&self.process);
                let ms = self.timeout.as_millis() as u64;
                let state = if process.exit_status().is_some() {
                    process.state()
                } else {
                    process.kill();
                    format!("was killed after {ms} ms without an answer")
                };
                let dead = format!(
                    "QEMU (pid {}) {state} while {what} (qtest `{during}`); stderr: {}",
                    process.pid(),
                    process.stderr_tail()
                );
                bus.dead = Some(dead);
                Err(TransportError::Timeout(ms))
            }
        }
    }

    /// Scans PCI: new NVMe functions are placed and enabled, vanished ones forgotten.
    fn scan(&self) -> Result<(), TransportError> {
        self.with_bus("scanning PCI", |bus| {
            let mut ecam = Ecam(&mut bus.qtest);
            match bus.pci.scan(&mut ecam) {
                Ok(()) => Ok(Ok(())),
                Err(ScanError::Access(e)) => Err(e),
                Err(ScanError::Layout(msg)) => Ok(Err(TransportError::Other(format!("PCI layout: {msg}")))),
            }
        })?
    }

    /// [`QemuMachine::power_off`]. Powering off a machine that is off does nothing.
    fn power_off(&self) -> Result<(), TransportError> {
        let mut bus = lock(&self.bus);
        if bus.powered_off {
            return Ok(());
        }
        if let Some(dead) = &bus.dead {
            return Err(TransportError::Gone(dead.clone()));
        }
        bus.dead = Some(format!("the QEMU machine {} is powered off (QEMU was killed to cut its power)", self.label));
        bus.powered_off = true;
        // Lock order: bus, qmp, process. Reaped, every thread of QEMU is gone: no write
        // of the dead QEMU can reach an image after this.
        let _qmp = lock(&self.qmp);
        lock(&self.process).cut();
        Ok(())
    }

    /// [`QemuMachine::power_on`].
    fn power_on(&self) -> Result<(), TransportError> {
        {
            let mut bus = lock(&self.bus);
            if !bus.powered_off {
                return match &bus.dead {
                    Some(dead) => Err(TransportError::Gone(dead.clone())),
                    None => Ok(()),
                };
            }
            let mut qmp = lock(&self.qmp);
            let mut process = lock(&self.process);
            wait_until_unlocked(&self.image_files, IMAGE_LOCK_RELEASE)?;
            // Nothing with a name: the sockets are abstract, the files nvtest's open ones,
            // so a SIGKILL of nvtest during this start leaves nothing either.
            let starting = process::hold_for_start()?;
            let registered = process::register_held(starting, None, None);
            // Through nvtest's own descriptors: the files have no names any more.
            use std::os::fd::AsRawFd;
            let me = std::process::id();
            let by_fd = |f: &File| format!("/proc/{me}/fd/{}", f.as_raw_fd());
            let images: Vec<String> = self.image_files.iter().map(by_fd).collect();
            let (cmd, listener, qmp_address) = command(&self.config, &by_fd(&self.ram), &images)?;
            let mut fresh = Process::spawn(registered, cmd, None, Some(&self.stderr)).map_err(|e| {
                TransportError::Other(format!("cannot run {} again: {e}", self.config.binary.display()))
            })?;
            let (qtest, fresh_qmp) = attach(&mut fresh, &listener, &qmp_address, self.timeout)?;
            drop(listener);
            *process = fresh;
            *qmp = fresh_qmp;
            bus.qtest = qtest;
            bus.pci = PciState::new(MMIO_BASE, MMIO_END);
            bus.dead = None;
            bus.powered_off = false;
        }
        self.with_bus("enabling PCIe ECAM", enable_ecam)??;
        self.scan()?;
        // The functions that have a transport get their memory space and bus mastering
        // back, as the transports set them.
        let held: Vec<PciAddress> = lock(&self.windows).iter().flatten().copied().collect();
        for address in held {
            let command = self.config_read(address, 0x04)?;
            self.config_write(address, 0x04, (command & 0xFFFF) | CMD_MEMORY | CMD_BUS_MASTER)?;
        }
        Ok(())
    }

    fn config_read(&self, address: PciAddress, offset: u16) -> Result<u32, TransportError> {
        check_config_offset(address, offset)?;
        self.with_bus("reading PCI configuration", |bus| Ecam(&mut bus.qtest).read32(address, offset))
    }

    fn config_write(&self, address: PciAddress, offset: u16, value: u32) -> Result<(), TransportError> {
        check_config_offset(address, offset)?;
        self.with_bus("writing PCI configuration", |bus| Ecam(&mut bus.qtest).write32(address, offset, value))
    }

    /// Maps DMA window `window`, zeroed: punching a hole in the tmpfs file drops its
    /// pages (QEMU's mapping sees the same zeroes), so a transport never inherits what
    /// an earlier one left there, and the memory goes back to the host.
    fn map_window(&self, window: usize) -> Result<DmaRegion, TransportError> {
        use std::os::fd::AsRawFd;
        let offset = DMA_START + window as u64 * self.dma_window;
        // SAFETY: plain syscall on our own file descriptor.
        let punched = unsafe {
            libc::fallocate(
                self.ram.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                self.dma_window as libc::off_t,
            )
        };
        if punched != 0 {
            return Err(other("cannot zero a DMA window of guest RAM", std::io::Error::last_os_error()));
        }
        // A raw mapping: QEMU writes this memory concurrently, and DmaRegion only ever
        // copies in and out of it or uses atomics.
        let map = memmap2::MmapOptions::new()
            .offset(offset)
            .len(self.dma_window as usize)
            .map_raw(&self.ram)
            .map_err(|e| other("cannot map guest RAM", e))?;
        Ok(DmaRegion::mapped(map, offset))
    }

    fn qmp_error(&self, command: &str, failure: QmpFailure) -> QmpError {
        match failure {
            QmpFailure::Command { class, desc } => QmpError::Command { command: command.to_owned(), class, desc },
            QmpFailure::Timeout => QmpError::Transport(TransportError::Timeout(self.timeout.as_millis() as u64)),
            failure => {
                let mut process = lock(&self.process);
                process.wait_exit(Duration::from_secs(1));
                QmpError::Transport(TransportError::Gone(format!(
                    "QEMU (pid {}) {} during QMP {command} ({}); stderr: {}",
                    process.pid(),
                    process.state(),
                    qmp_failure_text(&failure),
                    process.stderr_tail()
                )))
            }
        }
    }

    /// Asks QEMU to quit, kills it if it has not within [`QUIT_BOUND`], removes its files.
    fn shut_down(&self) {
        let mut bus = lock(&self.bus);
        if bus.dead.is_none() {
            bus.dead = Some(format!("the QEMU machine {} was shut down", self.label));
        }
        // Lock order everywhere: bus, then qmp, then process.
        let mut qmp = lock(&self.qmp);
        let mut process = lock(&self.process);
        if process.exit_status().is_none() && qmp.send_quit().is_ok() {
            process.wait_exit(QUIT_BOUND);
        }
        process.kill();
        process.remove_files();
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        self.shut_down();
    }
}

impl QemuTransport {
    pub fn address(&self) -> PciAddress {
        self.address
    }

    /// BAR0 as placed: registers and doorbells.
    pub fn bar0(&self) -> Bar {
        self.bar0
    }

    fn mmio_addr(&self, offset: u64, width: u64) -> Result<u64, TransportError> {
        if !offset.is_multiple_of(width) || offset.checked_add(width).is_none_or(|end| end > self.bar0.size) {
            return Err(TransportError::Other(format!(
                "{}: MMIO of {width} bytes at BAR0+{offset:#x} is unaligned or outside BAR0 ({:#x} bytes)",
                self.describe(),
                self.bar0.size
            )));
        }
        Ok(self.bar0.base + offset)
    }
}

impl Transport for QemuTransport {
    fn describe(&self) -> String {
        format!("qemu:{} {}", self.machine.label, self.address)
    }

    fn config_read32(&mut self, offset: u16) -> Result<u32, TransportError> {
        self.machine.config_read(self.address, offset)
    }

    fn config_write32(&mut self, offset: u16, value: u32) -> Result<(), TransportError> {
        self.machine.config_write(self.address, offset, value)
    }

    fn mmio_read32(&mut self, offset: u64) -> Result<u32, TransportError> {
        let addr = self.mmio_addr(offset, 4)?;
        self.machine.with_bus("reading a register", |bus| Ok(bus.qtest.call(Op::Readl { addr })? as u32))
    }

    fn mmio_write32(&mut self, offset: u64, value: u32) -> Result<(), TransportError> {
        let addr = self.mmio_addr(offset, 4)?;
        self.machine.with_bus("writing a register", |bus| bus.qtest.post(Op::Writel { addr, value }))
    }

    fn mmio_read64(&mut self, offset: u64) -> Result<u64, TransportError> {
        let addr = self.mmio_addr(offset, 8)?;
        self.machine.with_bus("reading a register", |bus| bus.qtest.call(Op::Readq { addr }))
    }

    fn mmio_write64(&mut self, offset: u64, value: u64) -> Result<(), TransportError> {
        let addr = self.mmio_addr(offset, 8)?;
        self.machine.with_bus("writing a register", |bus| bus.qtest.post(Op::Writeq { addr, value }))
    }

    fn dma(&self) -> &DmaRegion {
        &self.dma
    }

    fn idle(&mut self) -> Result<(), TransportError> {
        self.machine.with_bus("waiting", |bus| bus.qtest.drain())?;
        std::thread::yield_now();
        Ok(())
    }

    /// QEMU's power is cut by killing it: every controller of the machine goes off.
    fn power(&mut self) -> Option<&mut dyn PowerSwitch> {
        Some(self)
    }

    /// The root port's slot, for a transport made with [`QemuMachine::transport_in_slot`].
    fn slot(&mut self) -> Option<&mut dyn super::Slot> {
        match self.hotplug {
            Some(_) => Some(self),
            None => None,
        }
    }
}

impl PowerSwitch for QemuTransport {
    fn method(&self) -> PowerMethod {
        PowerMethod::Cut
    }

    fn off(&mut self, _seed: u64) -> Result<(), TransportError> {
        self.machine.power_off()
    }

    /// Starts QEMU again; the function must come back where its BAR0 was placed.
    fn on(&mut self) -> Result<(), TransportError> {
        self.machine.power_on()?;
        // Started from its command line: the device is in its slot again.
        if let Some(slot) = self.hotplug.as_mut() {
            slot.restarted();
        }
        let placed = lock(&self.machine.bus).pci.function(self.address).and_then(|f| f.bar(0));
        if placed != Some(self.bar0) {
            return Err(TransportError::Other(format!(
                "{} came back from the power cycle with BAR0 {placed:?}, not {:?}",
                self.describe(),
                self.bar0
            )));
        }
        Ok(())
    }
}

impl Drop for QemuTransport {
    fn drop(&mut self) {
        // Stop the controller's DMA into this window before another transport gets it.
        let alive = lock(&self.machine.bus).dead.is_none();
        if alive {
            if let Ok(command) = self.machine.config_read(self.address, 0x04) {
                let _ = self.machine.config_write(self.address, 0x04, command & 0xFFFF & !CMD_BUS_MASTER);
                let _ = self.machine.with_bus("releasing a transport", |bus| bus.qtest.settle());
            }
        }
        lock(&self.machine.windows)[self.window] = None;
    }
}
