//! The safety gate: before any destructive case runs on a drive owned by the Linux NVMe
//! driver (`/dev/nvmeN`), nvtest checks — failing closed — that nothing on the machine
//! uses the drive, holds exclusive opens on its block devices, and checks again before
//! every further suite of the run.
//!
//! What is checked, for the controller and every controller of its NVM subsystem
//! (Namespace Management acts on the whole subsystem: deleting NSID FFFFFFFFh deletes
//! the namespaces of every controller), their namespaces, partitions and everything
//! stacked on them at any depth ([`inventory`]: device-mapper, md, loop devices backed
//! by a device of the drive or by a file on one), is in [`usage`]: mounts in every mount
//! namespace, swap, holders and loop devices, every process's open descriptors and
//! memory mappings, and the root filesystem. Anything that cannot be examined (an
//! unreadable `/proc` entry, a loop device whose backing file cannot be told) counts as
//! in use, and the line says what could not be checked and how to proceed.
//!
//! Then an exclusive open (O_EXCL, read-only) of every namespace block device, which the
//! kernel refuses while the device is mounted, swapped on, held or opened exclusively in
//! any mount namespace, and which keeps those off the drive while nvtest holds it. It
//! does not keep a loop device or a mapping off (neither claims the device), and the
//! namespaces a destructive case creates are new block devices: so [`Guard::recheck`]
//! runs the whole check again between suites and takes the exclusive opens anew.
//!
//! Destructive cases also need `--allow-destructive`, and on a kernel target
//! `--confirm-serial SN` equal to the controller's serial (sysfs before anything is
//! sent; Identify Controller once the device is open). `--preserve` runs only the
//! non-destructive cases. The simulated drive and QEMU are disposable: no opt-in there.
//!
//! Every refusal is one line per finding saying what was found and what to do; nothing
//! is sent to the device when any is found.

mod inventory;
mod usage;

pub use inventory::{inventory, Member, Stacking};
pub use usage::in_use;

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use nvme::device::Device;
use nvme::linux::sysfs::{self, ControllerInfo};
use nvme::linux::{Host, LinuxDevice, Options};

use crate::identity::DeviceIdentity;
use crate::suite::{ExpandedCase, LoadedSuite};

/// The opt-ins and restraints of the command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SafetyOptions {
    /// `--allow-destructive`: destructive cases may run on a kernel target.
    pub allow_destructive: bool,
    /// `--confirm-serial SN`: the serial the user expects the controller to have.
    pub confirm_serial: Option<String>,
    /// `--preserve`: only non-destructive cases run; destructive ones are skipped.
    pub preserve: bool,
}

/// Why the gate stops a run (exit status 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateError {
    /// The path is not a controller nvtest can drive: one line with the fix.
    BadTarget(String),
    /// Destructive cases would run and something says they must not: one line each.
    Refused { target: String, findings: Vec<String> },
}

impl std::fmt::Display for GateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateError::BadTarget(line) => f.write_str(line),
            GateError::Refused { target, findings } => {
                write!(f, "refusing to run destructive cases on {target} (nothing was sent to it):")?;
                for line in findings {
                    write!(f, "\n  {line}")?;
                }
                Ok(())
            }
        }
    }
}

/// Block devices held open with O_EXCL for the run; dropping this releases them.
#[derive(Debug, Default)]
pub struct Claims {
    held: Vec<(PathBuf, File)>,
}

impl Claims {
    /// The devices held.
    pub fn paths(&self) -> Vec<&Path> {
        self.held.iter().map(|(p, _)| p.as_path()).collect()
    }
}

/// How long [`Guard::follow`] lets the old controller take to leave the kernel.
const FOLLOW_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long [`Guard::lasting_users`] gives a user of the drive to go before it counts.
const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// A drive that passed the gate, held for the run: its exclusive opens, and what is
/// needed to check it again.
#[derive(Debug)]
pub struct Guard {
    host: Host,
    ctrl: ControllerInfo,
    claims: Claims,
}

impl Guard {
    /// The devices held exclusively now.
    pub fn paths(&self) -> Vec<&Path> {
        self.claims.paths()
    }

    /// The controller found again under `ctrl` after a power cycle (the kernel may give it
    /// another name): the exclusive opens of the old namespaces are let go and the whole
    /// check runs on the controller as it is now.
    /// The old controller leaves the kernel once nothing holds it: its NVM subsystem
    /// still lists it meanwhile, so the check is retried for a while ([`FOLLOW_WAIT`])
    /// before what it finds counts (a mount of an old namespace would hold it for good).
    pub fn follow(&mut self, ctrl: &ControllerInfo) -> Result<(), Vec<String>> {
        self.claims = Claims::default();
        self.ctrl = ctrl.clone();
        let deadline = std::time::Instant::now() + FOLLOW_WAIT;
        loop {
            match self.recheck() {
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(200))
                }
                result => return result,
            }
        }
    }

    /// Who uses the drive now besides nvtest: the check of [`Guard::recheck`] without
    /// taking the exclusive opens anew, one line per finding (empty: nobody).
    pub fn users(&self) -> Vec<String> {
        match inventory(&self.host, &self.ctrl) {
            Ok(members) => in_use(&self.host, &members),
            Err(e) => vec![format!("cannot tell what belongs to {} ({e})", self.ctrl.node.display())],
        }
    }

    /// [`Guard::users`] once any user found has had [`SETTLE_WAIT`] to go: a process
    /// that only looks at a device (udev's probe of a namespace the run created) closes
    /// it within that time, one that uses it does not. Empty: nobody uses the drive.
    pub fn lasting_users(&self) -> Vec<String> {
        let deadline = std::time::Instant::now() + SETTLE_WAIT;
        loop {
            let users = self.users();
            if users.is_empty() || std::time::Instant::now() >= deadline {
                return users;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// The whole check again, on the drive as it is now (new namespaces, new stacking):
    /// `Err` with one line per finding when anything uses it. The exclusive opens are
    /// taken anew on the namespaces there are now (those of deleted namespaces are let
    /// go); while nvtest holds none of a namespace's, it has checked that nothing uses it.
    pub fn recheck(&mut self) -> Result<(), Vec<String>> {
        let members = inventory(&self.host, &self.ctrl).map_err(|e| {
            vec![format!(
                "cannot tell what belongs to {} ({e}): nothing more is run until it can be checked",
                self.ctrl.node.display()
            )]
        })?;
        let findings = in_use(&self.host, &members);
        if !findings.is_empty() {
            return Err(findings);
        }
        self.claims = Claims::default();
        self.claims = claim(&self.host, &members)?;
        Ok(())
    }
}

/// The destructive cases a run would execute: those `selected` keeps (none with
/// `preserve`).
pub fn destructive_cases<'a>(
    suites: &'a [LoadedSuite],
    selected: &dyn Fn(&ExpandedCase) -> bool,
    preserve: bool,
) -> Vec<&'a ExpandedCase> {
    if preserve {
        return Vec::new();
    }
    suites.iter().flat_map(|s| s.cases.iter()).filter(|c| c.destructive).filter(|c| selected(c)).collect()
}

/// Takes the controller for this run: an advisory exclusive lock (`flock`) on its
/// device node, held until the run ends, so a second nvtest run on the same drive is
/// refused instead of sharing it. The error is one line.
pub fn lock_controller(path: &Path) -> Result<ControllerLock, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {} to take it for the run: {e}", path.display()))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(locked) => Ok(ControllerLock(locked)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(format!(
            "{} is in use by another nvtest run (it holds the drive's lock): a drive is never shared between runs; \
             wait for that run to end",
            path.display()
        )),
        Err((_, e)) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

/// A controller taken for a run ([`lock_controller`]); released when dropped.
pub struct ControllerLock(#[allow(dead_code)] nix::fcntl::Flock<File>);

/// The PCI function of a controller of the Linux driver as sysfs has it: vendor, device,
/// subsystem vendor and subsystem device IDs, and its address; what cannot be read is
/// left out. Only for a controller on PCIe (`transport` is `pcie`): a fabrics
/// controller (TCP, RDMA, FC, loop) has no PCI function, and its `device` link leads to
/// the fabrics class device (`ctl`), which is no address.
pub fn pci_details(host: &Host, path: &Path) -> Vec<(String, String)> {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else { return Vec::new() };
    let transport = sysfs::read_attr(&host.sys_path(&format!("class/nvme/{name}/transport"))).unwrap_or_default();
    if transport != "pcie" {
        let shown = if transport.is_empty() { "unknown".to_string() } else { transport };
        return vec![("transport".to_string(), shown)];
    }
    let mut out = vec![("transport".to_string(), "pcie".to_string())];
    for attr in ["vendor", "device", "subsystem_vendor", "subsystem_device"] {
        if let Ok(value) = sysfs::read_attr(&host.sys_path(&format!("class/nvme/{name}/device/{attr}"))) {
            out.push((attr.to_string(), value.trim().to_string()));
        }
    }
    if let Ok(target) = std::fs::canonicalize(host.sys_path(&format!("class/nvme/{name}/device"))) {
        if let Some(address) = target.file_name() {
            out.push(("address".to_string(), address.to_string_lossy().into_owned()));
        }
    }
    out
}

/// The destructive suites among `cases`, for messages: "`namespaces`, `trim`".
fn suite_names(cases: &[&ExpandedCase]) -> String {
    let names: BTreeSet<&str> = cases.iter().map(|c| c.suite.as_str()).collect();
    names.into_iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// The gate for a kernel target: checks that `path` is a controller (always), and when
/// destructive cases will run, the opt-ins and that nothing uses the drive; then holds
/// the exclusive opens. `Ok(None)` when no destructive case runs.
pub fn gate(
    host: &Host,
    path: &Path,
    destructive: &[&ExpandedCase],
    options: &SafetyOptions,
) -> Result<Option<Guard>, GateError> {
    let ctrl = sysfs::classify(host, path).map_err(|e| GateError::BadTarget(e.to_string()))?;
    if destructive.is_empty() {
        return Ok(None);
    }
    let shown = path.display().to_string();
    let mut findings = Vec::new();
    let suites = suite_names(destructive);
    if !options.allow_destructive {
        findings.push(format!(
            "{} destructive case(s) of suite(s) {suites} would change data or configuration on {shown}: \
             give --allow-destructive (and --confirm-serial SN) to run them, or --preserve to run only the \
             non-destructive cases",
            destructive.len()
        ));
    }
    let serial = ctrl.serial.trim();
    match options.confirm_serial.as_deref().map(str::trim) {
        None => findings.push(format!(
            "destructive cases on a drive of the Linux driver need --confirm-serial SN: {shown} is `{}`, serial `{serial}`; \
             give that serial if this is the drive to be erased",
            ctrl.model.trim()
        )),
        Some(given) if given != serial => findings.push(format!(
            "--confirm-serial `{given}` does not match {shown}, whose serial is `{serial}` (model `{}`): \
             check that you named the right drive",
            ctrl.model.trim()
        )),
        Some(_) => {}
    }
    let members = match inventory(host, &ctrl) {
        Ok(members) => members,
        Err(e) => {
            findings.push(format!("cannot tell what belongs to {shown} ({e}): nothing is run until it can be checked"));
            return Err(GateError::Refused { target: shown, findings });
        }
    };
    findings.extend(in_use(host, &members));
    if !findings.is_empty() {
        return Err(GateError::Refused { target: shown, findings });
    }
    match claim(host, &members) {
        Ok(claims) => Ok(Some(Guard { host: host.clone(), ctrl, claims })),
        Err(lines) => Err(GateError::Refused { target: shown, findings: lines }),
    }
}

/// After the device opened: the serial the user confirmed must be Identify
/// Controller's SN too (sysfs holds what the kernel read at probe time).
pub fn confirm_identity(identity: &DeviceIdentity, options: &SafetyOptions, destructive: usize) -> Result<(), String> {
    let Some(given) = options.confirm_serial.as_deref().map(str::trim) else { return Ok(()) };
    if destructive == 0 || identity.serial.trim() == given {
        return Ok(());
    }
    Err(format!(
        "refusing to run destructive cases on {}: --confirm-serial `{given}` does not match Identify Controller SN \
         `{}` (model `{}`); check that you named the right drive (only Identify was sent)",
        identity.target,
        identity.serial.trim(),
        identity.model.trim()
    ))
}

/// The gate's hold on a drive, shared by the runner (which checks it again between
/// suites) and the device (which hands it the controller found again after each power
/// cycle of a rig).
pub type SharedGuard = std::sync::Arc<std::sync::Mutex<Guard>>;

/// The run's lock on the drive ([`lock_controller`]), shared with the device, which takes
/// it anew on the controller found again after a power cycle.
pub type SharedLock = std::sync::Arc<std::sync::Mutex<Option<ControllerLock>>>;

/// Opens a controller of the Linux NVMe driver as a device, with the rig's power switch
/// when one is given. After each power cycle the controller may come back under another
/// name: the run's lock on the old one is let go (it holds the old controller's device,
/// which keeps it in the kernel), the gate checks and holds the new one, and the lock is
/// taken on it. The error is one line.
pub fn open_linux_target(
    host: &Host,
    path: &Path,
    rig: Option<&nvme::linux::rig::Rig>,
    guard: Option<&SharedGuard>,
    lock: &SharedLock,
) -> Result<Box<dyn Device>, String> {
    let mut device = LinuxDevice::open_on(host.clone(), path, Options::default()).map_err(|e| e.to_string())?;
    if let Some(rig) = rig {
        let (guard, lock) = (guard.cloned(), lock.clone());
        let hook = Box::new(move |ctrl: &ControllerInfo| {
            let mut held = lock.lock().unwrap_or_else(|p| p.into_inner());
            let had_lock = held.take().is_some();
            if let Some(guard) = &guard {
                let mut guard = guard.lock().unwrap_or_else(|p| p.into_inner());
                guard.follow(ctrl).map_err(|lines| {
                    format!("the safety gate found {} in use: {}", ctrl.node.display(), lines.join("; "))
                })?;
            }
            if had_lock {
                *held = Some(lock_controller(&ctrl.node)?);
            }
            Ok(())
        }) as nvme::linux::AfterPowerOn;
        device.set_rig(rig.clone(), Some(hook)).map_err(|e| e.to_string())?;
    }
    Ok(Box::new(device))
}

/// Opens every namespace block device O_EXCL (read-only). The kernel refuses while a
/// device is mounted, swapped on, held or opened exclusively, in any mount namespace.
pub fn claim(host: &Host, members: &[Member]) -> Result<Claims, Vec<String>> {
    let mut claims = Claims::default();
    let mut refusals = Vec::new();
    for m in members.iter().filter(|m| m.claim) {
        let Some(node) = &m.node else { continue };
        match host.open_exclusive(node) {
            Ok(file) => claims.held.push((node.clone(), file)),
            Err(e) if e.raw_os_error() == Some(nix::libc::EBUSY) => refusals.push(format!(
                "the kernel reports {} busy (an exclusive open failed with EBUSY): something this check cannot see \
                 uses it (a mount in another namespace, swap, device-mapper, md, or an exclusive opener); find it with \
                 `lsblk` and `fuser -vm {}`",
                m.what,
                node.display()
            )),
            Err(e) => refusals.push(format!(
                "cannot open {} exclusively ({e}): nothing is run until the drive can be held for the run",
                m.what
            )),
        }
    }
    if refusals.is_empty() {
        Ok(claims)
    } else {
        Err(refusals)
    }
}
