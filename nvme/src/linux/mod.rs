//! The kernel-passthrough target: a controller owned by the Linux NVMe driver
//! (`/dev/nvmeN`), reached through the driver's passthrough ioctls.
//!
//! - [`sysfs`]: what the kernel says about controllers and namespaces (sysfs, `/dev`),
//!   and the checks that a path names a controller at all (the bad-input errors).
//! - [`passthru`]: the ioctl structures and request numbers, and the [`Passthrough`]
//!   seam (the kernel, or a fake in tests).
//! - [`loopdev`]: bound loop devices and what backs them (for the safety gate).
//! - [`fake`]: fake `sys/`, `dev/`, `proc/` trees for tests.
//! - [`rig`]: a hardware runner's power switch (lab commands, or PCI remove / rescan as
//!   the weaker fallback) and finding the controller again after a power cycle.
//! - [`uring`]: many commands in flight ([`crate::queued::QueuedIo`]) through io_uring
//!   NVMe passthrough on the generic namespace devices; [`slots`] is its bookkeeping.
//! - [`LinuxDevice`]: the [`Device`] the runner drives. Admin commands go to the
//!   controller's character device, I/O commands to the generic character device
//!   (`/dev/ngXnY`) of the namespace they name.
//!
//! What the kernel does not let through, and how it is reported (never as the drive's
//! answer):
//! - I/O whose NSID has no device node (0, FFFFFFFFh, an inactive or unallocated NSID):
//!   the driver checks that a passthrough command's NSID is the namespace of the node it
//!   is sent on (EINVAL otherwise, Linux 5.14 and later), and the controller node's
//!   deprecated I/O ioctl does the same with its only namespace. Sending such a command
//!   through the admin ioctl would put an I/O opcode on the admin queue, where it means
//!   another command. So it is [`DeviceError::Unsupported`].
//! - Queue management, Abort, Doorbell Buffer Config and Asynchronous Event Requests:
//!   the driver owns the queues, the command identifiers and the events.
//! - A status the driver made up instead of the drive (Host Pathing Error 370h, Command
//!   Aborted By Host 371h) is an error, not a completion.
//!
//! Event logs are read with Retain Asynchronous Event (RAE) set on NVMe 1.3 and later
//! controllers, so the driver's own asynchronous events are not cleared by nvtest.

pub mod fake;
pub mod loopdev;
pub mod passthru;
pub mod rig;
pub mod slots;
pub mod sysfs;
pub mod uring;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use zerocopy::{FromZeros, IntoBytes};

use crate::device::{Access, Data, Device, DeviceError};
use crate::spec::identify::{identify, Cns, IdentifyController, NamespaceList};
use crate::spec::{AdminOpcode, Command, Completion, Status, StatusCodeType, Version};

pub use passthru::{Kernel, Passthrough, PassthruCmd, PassthruCmd64};
pub use sysfs::{ControllerInfo, Host, NamespaceInfo, TargetError};

/// Timeouts of a kernel target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Timeout of most commands (the ioctl's `timeout_ms`).
    pub command_timeout_ms: u64,
    /// Timeout of commands that may take long on a real drive: Format NVM, Sanitize,
    /// Namespace Management and Attachment, Firmware Commit.
    pub long_command_timeout_ms: u64,
    /// How long to wait after a rescan for the device nodes to match the drive's active
    /// namespace list.
    pub rescan_wait_ms: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options { command_timeout_ms: 10_000, long_command_timeout_ms: 300_000, rescan_wait_ms: 5_000 }
    }
}

/// A controller of the Linux NVMe driver, as a [`Device`].
pub struct LinuxDevice {
    host: Host,
    controller: ControllerInfo,
    namespaces: Vec<NamespaceInfo>,
    backend: Box<dyn Passthrough>,
    options: Options,
    /// VER of Identify Controller, read when the device opened.
    version: Version,
    /// Lines for [`Device::take_diagnostics`].
    diagnostics: Vec<String>,
    /// Log identifiers already reported as read with RAE forced.
    rae_noted: BTreeSet<u8>,
    /// The power switch of a hardware runner ([`LinuxDevice::set_rig`]) and the PCI
    /// address of the controller's function.
    rig: Option<(rig::Rig, String)>,
    /// Called with the controller found again after each power-on, before nvtest sends it
    /// anything but Identify (the safety gate takes its namespaces anew); an error ends
    /// the power-on.
    after_power_on: Option<AfterPowerOn>,
    /// The other live controllers of its NVM subsystem, each a device of its own
    /// ([`Device::port`]): the ports of a dual-port drive ([`LinuxDevice::open_ports`]).
    ports: Vec<LinuxDevice>,
    /// Why controllers of the subsystem are not among the ports, when some are not.
    ports_note: Option<String>,
}

/// Opens one controller of a subsystem as a port: [`LinuxDevice::open_ports_with`].
pub type PortOpener<'a> = dyn FnMut(Host, &Path, Options) -> Result<LinuxDevice, TargetError> + 'a;

/// See [`LinuxDevice::set_rig`].
pub type AfterPowerOn = Box<dyn FnMut(&ControllerInfo) -> Result<(), String>>;

impl LinuxDevice {
    /// Opens `/dev/nvmeN` on this machine. The error is one line naming the problem and
    /// the fix.
    pub fn open(path: &Path) -> Result<LinuxDevice, TargetError> {
        LinuxDevice::open_on(Host::real(), path, Options::default())
    }

    /// Opens `path` with the kernel views of `host`, and the other controllers of its NVM
    /// subsystem as its ports ([`LinuxDevice::open_ports`]).
    pub fn open_on(host: Host, path: &Path, options: Options) -> Result<LinuxDevice, TargetError> {
        let mut device = LinuxDevice::open_controller(host, path, options)?;
        device.open_ports()?;
        Ok(device)
    }

    /// Opens the one controller at `path` (no ports).
    fn open_controller(host: Host, path: &Path, options: Options) -> Result<LinuxDevice, TargetError> {
        let controller = sysfs::classify(&host, path)?;
        let shown = path.display().to_string();
        let file = host.open_rw(path).map_err(|e| match Errno::from_raw(e.raw_os_error().unwrap_or(0)) {
            Errno::EACCES | Errno::EPERM => TargetError::PermissionDenied { path: shown.clone() },
            Errno::EWOULDBLOCK => TargetError::NotLive {
                path: shown.clone(),
                controller: controller.name.clone(),
                state: "not live (the driver refused the open with EWOULDBLOCK)".into(),
            },
            Errno::ENOENT | Errno::ENODEV | Errno::ENXIO => {
                TargetError::NotFound { path: shown.clone(), hint: sysfs::controllers_hint(&host) }
            }
            _ => TargetError::Other { path: shown.clone(), message: format!("cannot open: {e}") },
        })?;
        let backend = Box::new(Kernel::new(host.clone(), file));
        LinuxDevice::with_backend(host, controller, backend, options)
    }

    /// A device on `backend` (the kernel, or a fake in tests): discovers the namespaces
    /// and reads Identify Controller (which also proves the passthrough works).
    pub fn with_backend(
        host: Host,
        controller: ControllerInfo,
        backend: Box<dyn Passthrough>,
        options: Options,
    ) -> Result<LinuxDevice, TargetError> {
        let shown = controller.node.display().to_string();
        let namespaces = sysfs::namespaces(&host, &controller)
            .map_err(|e| TargetError::Other { path: shown.clone(), message: e.0 })?;
        let mut device = LinuxDevice {
            host,
            controller,
            namespaces,
            backend,
            options,
            version: Version::V1_0,
            diagnostics: Vec::new(),
            rae_noted: BTreeSet::new(),
            rig: None,
            after_power_on: None,
            ports: Vec::new(),
            ports_note: None,
        };
        let mut id = IdentifyController::new_zeroed();
        let mut cmd = passthru_command(&identify(Cns::Controller, 0, 0), device.options.command_timeout_ms);
        let bytes = id.as_mut_bytes();
        cmd.addr = bytes.as_mut_ptr() as u64;
        cmd.data_len = bytes.len() as u32;
        let result = device.backend.admin(&mut cmd);
        let completion = match result {
            Ok(ret) => completion(ret, cmd.result, 0, "Identify Controller")
                .map_err(|e| TargetError::Other { path: shown.clone(), message: e.to_string() })?,
            Err(Errno::EACCES | Errno::EPERM) => return Err(TargetError::PermissionDenied { path: shown }),
            Err(Errno::ENOTTY) => {
                return Err(TargetError::NotNvme {
                    path: shown,
                    what: "it does not answer the NVMe passthrough ioctls (ENOTTY)".into(),
                    hint: sysfs::controllers_hint(&device.host),
                })
            }
            Err(e) => {
                let message = errno_error(e, "Identify Controller", device.options.command_timeout_ms).to_string();
                return Err(TargetError::Other { path: shown, message });
            }
        };
        if !completion.status().is_success() {
            return Err(TargetError::Other {
                path: shown,
                message: format!("Identify Controller failed: {}", completion.status()),
            });
        }
        device.version = id.version();
        Ok(device)
    }

    pub fn controller(&self) -> &ControllerInfo {
        &self.controller
    }

    /// Opens every other live controller of the controller's NVM subsystem as a port
    /// (NVMe 1.4 §2.4.1 Multi-Path I/O and Namespace Sharing), each through its own
    /// character device and its own namespace devices. Not when the kernel's native
    /// multipath joins the subsystem's namespaces into one device per namespace: a
    /// command sent there goes through whichever controller the kernel picks, so no
    /// case could say which port it used ([`Device::ports_note`] says why). A controller
    /// not live is left out, saying so.
    pub fn open_ports(&mut self) -> Result<(), TargetError> {
        self.open_ports_with(&mut LinuxDevice::open_controller)
    }

    /// [`LinuxDevice::open_ports`] with `open` opening each controller (the kernel, or a
    /// fake passthrough in tests).
    pub fn open_ports_with(&mut self, open: &mut PortOpener<'_>) -> Result<(), TargetError> {
        self.ports.clear();
        self.ports_note = None;
        let Some((subsystem, dir)) = self.controller.subsystem.clone() else { return Ok(()) };
        let shown = self.controller.node.display().to_string();
        let others: Vec<String> = sysfs::subsystem_controllers(&dir)
            .map_err(|e| TargetError::Other { path: shown.clone(), message: e.0 })?
            .into_iter()
            .filter(|name| *name != self.controller.name)
            .collect();
        if others.is_empty() {
            return Ok(());
        }
        if self.namespaces.iter().any(|ns| ns.multipath) {
            self.ports_note = Some(format!(
                "{subsystem} also has {}, but the kernel's native multipath serves each shared namespace through                  one device of the subsystem, whose commands go through whichever controller it picks; load                  nvme_core with multipath=N (kernel command line nvme_core.multipath=N) for a device per controller",
                others.join(", ")
            ));
            return Ok(());
        }
        let mut left_out = Vec::new();
        for name in others {
            let node = self.host.node_path(&name);
            match open(self.host.clone(), &node, self.options.clone()) {
                Ok(port) => self.ports.push(port),
                Err(e) => left_out.push(format!("{name} ({e})")),
            }
        }
        if !left_out.is_empty() {
            self.ports_note = Some(format!("controllers of {subsystem} not opened: {}", left_out.join("; ")));
        }
        Ok(())
    }

    /// Gives the device a power switch ([`rig`]); `after_power_on` runs with the controller
    /// found again after each power-on. Fails when the controller is not a PCI function.
    pub fn set_rig(&mut self, rig: rig::Rig, after_power_on: Option<AfterPowerOn>) -> Result<(), TargetError> {
        let address = rig::pci_address(&self.controller)
            .map_err(|message| TargetError::Other { path: self.controller.node.display().to_string(), message })?;
        self.rig = Some((rig, address));
        self.after_power_on = after_power_on;
        Ok(())
    }

    /// The namespaces as the kernel showed them at the last discovery.
    pub fn namespaces(&self) -> &[NamespaceInfo] {
        &self.namespaces
    }

    fn timeout_for(&self, admin: bool, opcode: u8) -> u64 {
        let long = [
            AdminOpcode::FormatNvm,
            AdminOpcode::Sanitize,
            AdminOpcode::NamespaceManagement,
            AdminOpcode::NamespaceAttachment,
            AdminOpcode::FirmwareCommit,
        ];
        if admin && long.iter().any(|op| *op as u8 == opcode) {
            self.options.long_command_timeout_ms.max(self.options.command_timeout_ms)
        } else {
            self.options.command_timeout_ms
        }
    }

    /// Re-reads the kernel's view of the namespaces (sysfs only; nothing is sent).
    fn refresh(&mut self) -> Result<(), DeviceError> {
        self.namespaces =
            sysfs::namespaces(&self.host, &self.controller).map_err(|e| DeviceError::Driver(e.to_string()))?;
        Ok(())
    }

    /// The generic device to send an I/O command for `nsid` on and the longest transfer
    /// the kernel passes on it, or why there is none.
    fn generic_node(&mut self, nsid: u32) -> Result<(PathBuf, Option<u64>), DeviceError> {
        let find = |namespaces: &[NamespaceInfo]| namespaces.iter().find(|ns| ns.nsid == nsid).cloned();
        let ns = match find(&self.namespaces) {
            Some(ns) => Some(ns),
            None => {
                self.refresh()?;
                find(&self.namespaces)
            }
        };
        let Some(ns) = ns else {
            let which = match nsid {
                0 => "NSID 0".to_string(),
                0xFFFF_FFFF => "the broadcast NSID FFFFFFFFh".to_string(),
                n => format!(
                    "NSID {n}, which the Linux driver has no namespace for (inactive, unallocated or beyond NN)"
                ),
            };
            return Err(DeviceError::Unsupported(format!(
                "an I/O command to {which}: the Linux NVMe driver passes an I/O command only to the namespace whose \
                 device it is sent on (any other NSID is refused with EINVAL before the drive sees it); \
                 needs a userspace-driver target (sim, qemu)"
            )));
        };
        match ns.generic.and_then(|g| g.node) {
            Some(node) => Ok((node, ns.max_transfer_bytes)),
            None => Err(DeviceError::Unsupported(format!(
                "namespace {nsid} of {} has no generic device node /dev/ngXnY: the Linux driver makes one from \
                 Linux 5.13 on, and devtmpfs (or udev) must be mounted on /dev",
                self.controller.name
            ))),
        }
    }

    /// Sends an I/O command on `node` (see [`Device::io`]): the passthrough ioctl, and
    /// the command sent again when the kernel refused it before sending it just after a
    /// rescan.
    fn send_io(
        &mut self,
        node: &Path,
        cmd: &Command,
        pt: &mut PassthruCmd64,
        qid: u16,
        what: &str,
        timeout: u64,
    ) -> Result<Completion, DeviceError> {
        match self.backend.io(node, pt) {
            Ok(ret) => completion(ret, pt.result, qid, what),
            // The node was the namespace's when the view was read; after a rescan (a
            // power cycle by remove and rescan) the kernel may have given the namespace
            // another one, or be still setting up the one it has (a namespace that just
            // appeared may refuse a command for a moment): the view is read again and
            // the command, refused before it was sent, sent again on the namespace's
            // device as it is then, for up to two seconds.
            Err(e @ (Errno::EINVAL | Errno::ENODEV | Errno::ENXIO | Errno::ENOENT)) => {
                let mut last = e;
                for attempt in 1..=20u32 {
                    std::thread::sleep(Duration::from_millis(100));
                    self.refresh()?;
                    let Ok((now, _)) = self.generic_node(cmd.nsid) else { continue };
                    let what_now = command_name(false, cmd, Some(&now));
                    match self.backend.io(&now, pt) {
                        Ok(ret) => {
                            self.diagnostics.push(format!(
                                "{what}: {} after a rescan; sent again on {} ({}), {} ms later",
                                errno_name(e),
                                now.display(),
                                if now == node { "the same device" } else { "the namespace's device now" },
                                attempt * 100
                            ));
                            return completion(ret, pt.result, qid, &what_now);
                        }
                        Err(again @ (Errno::EINVAL | Errno::ENODEV | Errno::ENXIO | Errno::ENOENT)) => last = again,
                        Err(other) => return Err(errno_error(other, &what_now, timeout)),
                    }
                }
                Err(errno_error(last, what, timeout))
            }
            Err(e) => Err(errno_error(e, what, timeout)),
        }
    }

    /// Sets RAE on a Get Log Page of a log that has asynchronous events, on NVMe 1.3 and
    /// later controllers (the bit is reserved before 1.3).
    fn retain_events(&mut self, cmd: &mut Command) {
        if cmd.opcode != AdminOpcode::GetLogPage as u8 || self.version < Version::V1_3 {
            return;
        }
        let lid = (cmd.cdw10 & 0xFF) as u8;
        const EVENT_LOGS: [u8; 10] = [0x01, 0x02, 0x03, 0x04, 0x08, 0x0C, 0x0D, 0x0F, 0x80, 0x81];
        const RAE: u32 = 1 << 15;
        if EVENT_LOGS.contains(&lid) && cmd.cdw10 & RAE == 0 {
            cmd.cdw10 |= RAE;
            if self.rae_noted.insert(lid) {
                self.diagnostics.push(format!(
                    "Get Log Page {lid:02X}h sent with RAE=1: the Linux driver owns asynchronous events, \
                     nvtest does not clear them"
                ));
            }
        }
    }

    /// The drive's Active Namespace ID list (CNS 02h), all pages; `None` when the
    /// controller does not report one.
    fn active_namespace_list(&mut self) -> Result<Option<BTreeSet<u32>>, DeviceError> {
        let mut ids = BTreeSet::new();
        let mut start = 0u32;
        // At most 1024 NSIDs a page, pages bounded (a million namespaces).
        for _ in 0..1024 {
            let mut list = NamespaceList::new_zeroed();
            let c = self.admin(identify(Cns::ActiveNamespaceList, start, 0), Data::FromDevice(list.as_mut_bytes()))?;
            if !c.status().is_success() {
                return Ok(None);
            }
            let page: Vec<u32> = list.ids().filter(|&id| id > start).collect();
            ids.extend(page.iter().copied());
            match page.last() {
                Some(&last) if page.len() == NamespaceList::MAX && last < 0xFFFF_FFFE => start = last,
                _ => return Ok(Some(ids)),
            }
        }
        Ok(Some(ids))
    }
}

/// The ioctl structure of a command, without buffers.
fn passthru_command(cmd: &Command, timeout_ms: u64) -> PassthruCmd64 {
    PassthruCmd64 {
        opcode: cmd.opcode,
        flags: 0,
        nsid: cmd.nsid,
        cdw2: cmd.cdw2,
        cdw3: cmd.cdw3,
        cdw10: cmd.cdw10,
        cdw11: cmd.cdw11,
        cdw12: cmd.cdw12,
        cdw13: cmd.cdw13,
        cdw14: cmd.cdw14,
        cdw15: cmd.cdw15,
        timeout_ms: timeout_ms.min(u32::MAX as u64) as u32,
        ..Default::default()
    }
}

/// Whether a data buffer goes through a page-aligned copy: more than a page, not
/// starting on a page boundary.
fn needs_staging(buffer: &[u8]) -> bool {
    buffer.len() > slots::BUFFER_ALIGN && !(buffer.as_ptr() as usize).is_multiple_of(slots::BUFFER_ALIGN)
}

/// Puts a buffer's address and length in the command. The driver moves data by the
/// opcode's direction (bit 0 set: host to controller), so a buffer it would write must
/// be one we may write: a mismatch is refused before anything is sent.
fn attach_buffer(opcode: u8, data: Data<'_>, what: &str) -> Result<(u64, u32), DeviceError> {
    let (addr, len, to_device) = match data {
        Data::None => return Ok((0, 0)),
        Data::ToDevice(b) => (b.as_ptr() as u64, b.len(), true),
        Data::FromDevice(b) => (b.as_mut_ptr() as u64, b.len(), false),
    };
    check_direction(opcode, to_device, what)?;
    if len == 0 {
        return Ok((0, 0));
    }
    Ok((addr, transfer_len(len, what)?))
}

/// Refuses a buffer whose direction is not the opcode's (bit 0 set: host to controller).
fn check_direction(opcode: u8, to_device: bool, what: &str) -> Result<(), DeviceError> {
    match (opcode & 1 == 1, to_device) {
        (true, true) | (false, false) => Ok(()),
        (false, true) => Err(DeviceError::Unsupported(format!(
            "{what}: opcode {opcode:02X}h moves data from the controller, but a buffer to the controller was given"
        ))),
        (true, false) => Err(DeviceError::Unsupported(format!(
            "{what}: opcode {opcode:02X}h moves data to the controller (the Linux driver would not return any), \
             but a buffer from the controller was given"
        ))),
    }
}

/// A transfer's length as the passthrough structures carry it.
fn transfer_len(len: usize, what: &str) -> Result<u32, DeviceError> {
    u32::try_from(len).map_err(|_| {
        DeviceError::Unsupported(format!("{what}: a {len}-byte buffer; the Linux passthrough takes at most 4 GiB"))
    })
}

/// The completion a passthrough ioctl's return value and result stand for.
pub fn completion(ret: i32, result: u64, sq_id: u16, what: &str) -> Result<Completion, DeviceError> {
    if !(0..=0x7FFF).contains(&ret) {
        return Err(DeviceError::Driver(format!(
            "{what}: the Linux driver returned {ret}, which is neither an errno nor an NVMe status"
        )));
    }
    let status = Status::from_field(ret as u16);
    if status.sct == StatusCodeType::PathRelated && (0x70..=0x7F).contains(&status.sc) {
        return Err(DeviceError::Driver(format!(
            "{what}: the Linux driver completed it itself with {status} (a host-side status, status field {ret:#06x}): \
             the command did not reach the drive or was aborted by the host, e.g. while the controller was not live"
        )));
    }
    Ok(Completion {
        dw0: result as u32,
        dw1: (result >> 32) as u32,
        sq_head: 0,
        sq_id,
        cid: 0,
        status: (ret as u16) << 1,
    })
}

/// What an errno from a passthrough ioctl means, as a [`DeviceError`].
pub fn errno_error(errno: Errno, what: &str, timeout_ms: u64) -> DeviceError {
    match errno {
        Errno::EINTR => DeviceError::Timeout {
            what: format!(
                "{what}: cancelled by the Linux driver (EINTR): it timed out and the driver aborted it, \
                 or the controller was reset under it"
            ),
            after_ms: timeout_ms,
        },
        Errno::EACCES | Errno::EPERM => DeviceError::Driver(format!(
            "{what}: the Linux driver refused it ({}): run nvtest as root (the passthrough needs CAP_SYS_ADMIN)",
            errno_name(errno)
        )),
        Errno::EINVAL => DeviceError::Driver(format!(
            "{what}: the Linux driver refused it before sending it (EINVAL): a transfer beyond its limit \
             (max_hw_sectors_kb), a metadata buffer the namespace has no integrity support for, or an NSID that is \
             not the device's namespace"
        )),
        Errno::ENOTTY => DeviceError::Unsupported(format!(
            "{what}: the Linux driver does not know this passthrough ioctl (ENOTTY; the kernel is too old)"
        )),
        Errno::ENODEV | Errno::ENXIO | Errno::ENOENT => DeviceError::Driver(format!(
            "{what}: the device is gone ({}): the controller or namespace was removed",
            errno_name(errno)
        )),
        Errno::EWOULDBLOCK => DeviceError::Driver(format!(
            "{what}: no live path to the namespace (EWOULDBLOCK): every controller of it is resetting or gone"
        )),
        Errno::EIO => DeviceError::Driver(format!(
            "{what}: the block layer failed it without an NVMe status (EIO): the controller may be dead or \
             resetting (see dmesg)"
        )),
        Errno::ENOMEM => DeviceError::Driver(format!("{what}: the kernel ran out of memory for the buffers (ENOMEM)")),
        Errno::EFAULT => DeviceError::Driver(format!("{what}: the kernel could not reach a buffer (EFAULT)")),
        other => DeviceError::Driver(format!("{what}: the Linux driver failed it: {other}")),
    }
}

fn errno_name(errno: Errno) -> String {
    let text = errno.to_string();
    text.split(':').next().unwrap_or(&text).to_string()
}

/// A short name of a command for messages.
fn command_name(admin: bool, cmd: &Command, node: Option<&Path>) -> String {
    if admin {
        let name = AdminOpcode::from_u8(cmd.opcode).map(|op| format!(" ({op:?})")).unwrap_or_default();
        format!("admin opcode {:02X}h{name} NSID {:#x}", cmd.opcode, cmd.nsid)
    } else {
        let name = crate::spec::NvmOpcode::from_u8(cmd.opcode).map(|op| format!(" ({op:?})")).unwrap_or_default();
        let on = node.map(|n| format!(" on {}", n.display())).unwrap_or_default();
        format!("I/O opcode {:02X}h{name} NSID {:#x}{on}", cmd.opcode, cmd.nsid)
    }
}

impl Device for LinuxDevice {
    fn describe(&self) -> String {
        format!("{} (Linux NVMe driver)", self.controller.node.display())
    }

    fn access(&self) -> Access {
        Access::Kernel
    }

    fn admin(&mut self, cmd: Command, data: Data<'_>) -> Result<Completion, DeviceError> {
        let mut cmd = cmd;
        let what = command_name(true, &cmd, None);
        if cmd.flags != 0 {
            return Err(DeviceError::Unsupported(format!(
                "{what}: FUSE/PSDT flags {:#04x}; the Linux driver passes no command flags",
                cmd.flags
            )));
        }
        let owned_by_driver = match AdminOpcode::from_u8(cmd.opcode) {
            Some(
                AdminOpcode::CreateIoSubmissionQueue
                | AdminOpcode::CreateIoCompletionQueue
                | AdminOpcode::DeleteIoSubmissionQueue
                | AdminOpcode::DeleteIoCompletionQueue
                | AdminOpcode::DoorbellBufferConfig,
            ) => Some("the Linux driver owns the queues"),
            Some(AdminOpcode::Abort) => Some("the Linux driver owns the command identifiers"),
            Some(AdminOpcode::AsynchronousEventRequest) => {
                Some("asynchronous events are consumed by the kernel driver")
            }
            _ => None,
        };
        if let Some(reason) = owned_by_driver {
            return Err(DeviceError::Unsupported(format!(
                "{what}: {reason}; needs a userspace-driver target (sim, qemu)"
            )));
        }
        self.retain_events(&mut cmd);
        let timeout = self.timeout_for(true, cmd.opcode);
        let mut pt = passthru_command(&cmd, timeout);
        (pt.addr, pt.data_len) = attach_buffer(cmd.opcode, data, &what)?;
        match self.backend.admin(&mut pt) {
            Ok(ret) => completion(ret, pt.result, 0, &what),
            Err(e) => Err(errno_error(e, &what, timeout)),
        }
    }

    fn io(&mut self, qid: u16, cmd: Command, data: Data<'_>, metadata: Data<'_>) -> Result<Completion, DeviceError> {
        if qid == 0 {
            return Err(DeviceError::Driver("I/O commands go to I/O queues (1 and up), not the admin queue".into()));
        }
        if qid != 1 {
            return Err(DeviceError::Unsupported(format!(
                "I/O queue {qid}: the Linux driver picks the queue; this target offers queue 1 only"
            )));
        }
        let (node, max_transfer) = self.generic_node(cmd.nsid)?;
        let what = command_name(false, &cmd, Some(&node));
        if let Some(max) = max_transfer.filter(|&max| data.len() as u64 > max) {
            return Err(DeviceError::Unsupported(format!(
                "{what}: a {}-byte transfer; the Linux driver refuses (EINVAL) any longer than the namespace's \
                 queue/max_hw_sectors_kb ({max} bytes) before the drive sees it; needs a userspace-driver target \
                 (sim, qemu)",
                data.len()
            )));
        }
        if cmd.flags != 0 {
            return Err(DeviceError::Unsupported(format!(
                "{what}: FUSE/PSDT flags {:#04x}; the Linux driver passes no command flags",
                cmd.flags
            )));
        }
        let timeout = self.timeout_for(false, cmd.opcode);
        let mut pt = passthru_command(&cmd, timeout);
        // The kernel maps the buffer page by page (each page a segment when the pages are
        // not contiguous): a buffer that does not start on a page boundary spans one page
        // more, which can pass the queue's max_segments and be refused (EINVAL) on one
        // run and not the next. Such a buffer of more than a page goes through a
        // page-aligned copy.
        let mut data = data;
        let mut staged = match &data {
            Data::ToDevice(b) if needs_staging(b) => Some(slots::AlignedBuf::new(b.len())?),
            Data::FromDevice(b) if needs_staging(b) => Some(slots::AlignedBuf::new(b.len())?),
            _ => None,
        };
        let view = match (&mut staged, &mut data) {
            (Some(copy), Data::ToDevice(b)) => {
                copy.as_mut_slice().copy_from_slice(b);
                Data::ToDevice(copy.as_slice())
            }
            (Some(copy), Data::FromDevice(_)) => Data::FromDevice(copy.as_mut_slice()),
            (_, Data::ToDevice(b)) => Data::ToDevice(b),
            (_, Data::FromDevice(b)) => Data::FromDevice(b),
            (_, Data::None) => Data::None,
        };
        (pt.addr, pt.data_len) = attach_buffer(cmd.opcode, view, &what)?;
        (pt.metadata, pt.metadata_len) = attach_buffer(cmd.opcode, metadata, &format!("{what}, metadata"))?;
        let done = self.send_io(&node, &cmd, &mut pt, qid, &what, timeout);
        if let (Some(copy), Data::FromDevice(b), Ok(_)) = (&staged, &mut data, &done) {
            b.copy_from_slice(copy.as_slice());
        }
        done
    }

    /// The driver picks the queue; queue 1 stands for "an I/O queue of the driver".
    fn io_queues(&self) -> Vec<u16> {
        vec![1]
    }

    fn arm_async_events(&mut self, _count: u16) -> Result<(), DeviceError> {
        Err(DeviceError::Unsupported("asynchronous events are consumed by the kernel driver".into()))
    }

    fn take_async_events(&mut self) -> Result<Vec<Completion>, DeviceError> {
        Err(DeviceError::Unsupported("asynchronous events are consumed by the kernel driver".into()))
    }

    /// The driver's reset (NVME_IOCTL_RESET), then a bounded wait for the controller to
    /// be live again and for its namespace devices to match the drive's active list
    /// ([`Device::namespaces_changed`], which also closes the namespace devices held).
    fn controller_reset(&mut self) -> Result<(), DeviceError> {
        self.backend.reset().map_err(|e| errno_error(e, "controller reset (NVME_IOCTL_RESET)", 0))?;
        let wait = Duration::from_millis(self.options.long_command_timeout_ms);
        let deadline = Instant::now() + wait;
        loop {
            let state = sysfs::read_attr(&self.controller.sysfs.join("state")).ok();
            match state.as_deref() {
                Some("live") | None => break,
                Some(state) if Instant::now() >= deadline => {
                    return Err(DeviceError::Driver(format!(
                        "after a controller reset, {} is still `{state}`, not live (waited {} ms)",
                        self.controller.name,
                        wait.as_millis()
                    )))
                }
                Some(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        self.namespaces_changed()
    }

    /// Asks the driver to rescan (NVME_IOCTL_RESCAN), then waits (bounded) until the
    /// namespaces with device nodes are exactly the drive's active namespace list.
    fn namespaces_changed(&mut self) -> Result<(), DeviceError> {
        // A namespace attached, detached, created or deleted through one controller of the
        // subsystem changes what the others show too.
        for port in &mut self.ports {
            port.namespaces_changed()?;
        }
        self.backend.forget_namespaces();
        self.backend.rescan().map_err(|e| errno_error(e, "namespace rescan (NVME_IOCTL_RESCAN)", 0))?;
        let want = self.active_namespace_list()?;
        let wait = Duration::from_millis(self.options.rescan_wait_ms);
        let deadline = Instant::now() + wait;
        let poll = Duration::from_millis(50);
        // The rescan runs in the driver's work queue: a view that matches must match on
        // two looks in a row, so a view from before the rescan is not taken for its end.
        let mut matched_once = false;
        loop {
            self.refresh()?;
            let have = sysfs::nsids(&self.namespaces);
            let without_node: Vec<u32> = self
                .namespaces
                .iter()
                .filter(|ns| ns.generic.as_ref().and_then(|g| g.node.as_ref()).is_none())
                .map(|ns| ns.nsid)
                .collect();
            let matches = match &want {
                Some(want) => *want == have && without_node.is_empty(),
                None => without_node.is_empty(),
            };
            if matches && matched_once {
                return Ok(());
            }
            matched_once = matches;
            if Instant::now() >= deadline {
                let want_text = want.as_ref().map(|w| format!("{w:?}")).unwrap_or_else(|| "(not reported)".into());
                let missing_nodes = if without_node.is_empty() {
                    String::new()
                } else {
                    format!("; no /dev/ngXnY node for NSIDs {without_node:?} (is devtmpfs mounted on /dev?)")
                };
                return Err(DeviceError::Driver(format!(
                    "after a rescan, the Linux driver shows namespaces {have:?} of {} but the drive's active \
                     namespace list is {want_text} (waited {} ms){missing_nodes}",
                    self.controller.name,
                    wait.as_millis()
                )));
            }
            std::thread::sleep(poll);
        }
    }

    fn command_timeout_ms(&self) -> u64 {
        self.options.command_timeout_ms
    }

    /// The driver recovers its own queues after a timeout (it aborts the command or
    /// resets the controller); nvtest sends no reset to a kernel-owned controller. The
    /// namespace view is re-read, since a reset may have changed it.
    fn recover(&mut self) -> Result<(), DeviceError> {
        self.backend.forget_namespaces();
        self.refresh()
    }

    fn take_diagnostics(&mut self) -> Vec<String> {
        std::mem::take(&mut self.diagnostics)
    }

    fn power_method(&mut self) -> Option<crate::transport::PowerMethod> {
        self.rig.as_ref().map(|(r, _)| r.method())
    }

    fn power_off(&mut self, _seed: u64) -> Result<(), DeviceError> {
        self.rig_power_off(false).map(|_| ())
    }

    fn shutdown_then_power_off(&mut self, _seed: u64) -> Result<crate::driver::Shutdown, DeviceError> {
        self.rig_power_off(true)
    }

    fn power_on(&mut self, _grace: Duration) -> Result<crate::driver::PowerOn, DeviceError> {
        self.rig_power_on()
    }

    fn port_count(&self) -> usize {
        self.ports.len()
    }

    /// The smallest of the namespaces' limits (each disk's queue limits).
    fn max_transfer_bytes(&self) -> Option<u64> {
        self.namespaces.iter().filter_map(|ns| ns.max_transfer_bytes).min()
    }

    fn ports_note(&self) -> Option<String> {
        self.ports_note.clone()
    }

    fn port(&mut self, index: usize) -> Option<&mut dyn Device> {
        self.ports.get_mut(index).map(|p| p as &mut dyn Device)
    }

    /// Logical queues on an io_uring of NVMe passthrough commands ([`uring`]); a queue of
    /// another port goes through that controller's namespace devices.
    fn queued_io(
        &mut self,
        queues: &[crate::queued::QueueSpec],
    ) -> Result<Box<dyn crate::queued::QueuedIo + '_>, DeviceError> {
        Ok(Box::new(uring::UringQueues::open(self, queues)?))
    }
}
