//! The safety gate: before any destructive case runs on a drive owned by the Linux NVMe
//! driver (`/dev/nvmeN`), nvtest checks — failing closed — that nothing on the machine
//! uses the drive, and holds exclusive opens on its block devices for the whole run.
//!
//! What is checked, for the controller and every controller of its NVM subsystem
//! (Namespace Management acts on the whole subsystem: deleting NSID FFFFFFFFh deletes
//! the namespaces of every controller), their namespaces, partitions and everything
//! stacked on them (device-mapper, md, recursively):
//! - mounts (`/proc/self/mountinfo`, and PID 1's, by major:minor and by source);
//! - swap (`/proc/swaps`);
//! - holders (`/sys/class/block/*/holders`);
//! - other processes with a device open (`/proc/*/fd`);
//! - the root filesystem: a drive holding `/` is always refused;
//! - then an exclusive open (O_EXCL, read-only) of every namespace block device, which
//!   the kernel refuses while anything above is true in any mount namespace, and which
//!   keeps new mounts, swap and device-mapper off the drive until nvtest exits.
//!
//! Destructive cases also need `--allow-destructive`, and on a kernel target
//! `--confirm-serial SN` equal to the controller's serial (sysfs before anything is
//! sent; Identify Controller once the device is open). `--preserve` runs only the
//! non-destructive cases. The simulated drive and QEMU are disposable: no opt-in there.
//!
//! Every refusal is one line saying what was found and what to do; nothing is sent to
//! the device when any is found.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Trial};
use nvme::device::Device;
use nvme::linux::sysfs::{self, ControllerInfo, DevNum, NodeKind};
use nvme::linux::{Host, LinuxDevice, Options};

use crate::exec::DeviceIdentity;
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

/// The trial name libtest-mimic filters on (as `run::trial_name`).
fn trial_name(case: &ExpandedCase) -> String {
    format!("{}::{}", case.suite, case.name)
}

/// The destructive cases a run with these arguments would execute (none with `preserve`).
pub fn destructive_cases<'a>(suites: &'a [LoadedSuite], args: &Arguments, preserve: bool) -> Vec<&'a ExpandedCase> {
    if preserve {
        return Vec::new();
    }
    suites
        .iter()
        .flat_map(|s| s.cases.iter())
        .filter(|c| c.destructive)
        .filter(|c| !args.is_filtered_out(&Trial::test(trial_name(c), || Ok(()))))
        .collect()
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
) -> Result<Option<Claims>, GateError> {
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
        Ok(claims) => Ok(Some(claims)),
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

/// Opens a controller of the Linux NVMe driver as a device; the error is one line.
pub fn open_linux_target(host: &Host, path: &Path) -> Result<Box<dyn Device>, String> {
    LinuxDevice::open_on(host.clone(), path, Options::default())
        .map(|d| Box::new(d) as Box<dyn Device>)
        .map_err(|e| e.to_string())
}

/// A device that belongs to the drive under test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Kernel name: `nvme0`, `ng0n1`, `nvme0n1`, `nvme0n1p2`, `dm-0`.
    pub name: String,
    pub kind: NodeKind,
    pub num: Option<DevNum>,
    /// Its node in /dev, when there is one.
    pub node: Option<PathBuf>,
    /// Other names it is known by (a device-mapper name).
    pub aliases: Vec<String>,
    /// For messages: "/dev/nvme0n1p2 (partition of namespace 1 of nvme0)".
    pub what: String,
    /// A namespace's whole block device: held with O_EXCL for the run.
    pub claim: bool,
    /// The device it is stacked on (device-mapper, md), for a holder.
    pub stacked_on: Option<String>,
}

fn shown(host: &Host, name: &str, node: &Option<PathBuf>) -> String {
    node.clone().unwrap_or_else(|| host.node_path(name)).display().to_string()
}

/// Every device of the controller's NVM subsystem, and everything stacked on them.
pub fn inventory(host: &Host, ctrl: &ControllerInfo) -> Result<Vec<Member>, String> {
    let controllers = match &ctrl.subsystem {
        Some((_, dir)) => sysfs::subsystem_controllers(dir).map_err(|e| e.to_string())?,
        None => vec![ctrl.name.clone()],
    };
    let mut members: Vec<Member> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut push = |members: &mut Vec<Member>, m: Member| {
        if seen.insert(m.name.clone()) {
            members.push(m);
        }
    };
    for name in &controllers {
        let info = if *name == ctrl.name {
            ctrl.clone()
        } else {
            let num = sysfs::read_attr(&host.sys_path(&format!("class/nvme/{name}/dev")))
                .ok()
                .and_then(|t| DevNum::parse(&t))
                .ok_or_else(|| format!("controller {name} of {} has no readable `dev`", ctrl.name))?;
            sysfs::controller_info(host, name, &host.node_path(name), num).map_err(|e| e.to_string())?
        };
        let same = if *name == ctrl.name { String::new() } else { format!(", same NVM subsystem as {}", ctrl.name) };
        let node = host.node_if_matches(name, NodeKind::Char, info.num);
        push(
            &mut members,
            Member {
                name: name.clone(),
                kind: NodeKind::Char,
                num: Some(info.num),
                what: format!("{} (controller {name}{same})", shown(host, name, &node)),
                node,
                aliases: Vec::new(),
                claim: false,
                stacked_on: None,
            },
        );
        for ns in sysfs::namespaces(host, &info).map_err(|e| e.to_string())? {
            let of = format!("namespace {} of {name}{same}", ns.nsid);
            if let Some(g) = &ns.generic {
                push(
                    &mut members,
                    Member {
                        name: g.name.clone(),
                        kind: NodeKind::Char,
                        num: Some(g.num),
                        what: format!("{} (generic device of {of})", shown(host, &g.name, &g.node)),
                        node: g.node.clone(),
                        aliases: Vec::new(),
                        claim: false,
                        stacked_on: None,
                    },
                );
            }
            if let Some(d) = &ns.disk {
                push(
                    &mut members,
                    Member {
                        name: d.name.clone(),
                        kind: NodeKind::Block,
                        num: d.num,
                        what: format!("{} ({of})", shown(host, &d.name, &d.node)),
                        node: d.node.clone(),
                        aliases: Vec::new(),
                        claim: d.node.is_some(),
                        stacked_on: None,
                    },
                );
            }
            for p in &ns.partitions {
                push(
                    &mut members,
                    Member {
                        name: p.name.clone(),
                        kind: NodeKind::Block,
                        num: p.num,
                        what: format!("{} (partition of {of})", shown(host, &p.name, &p.node)),
                        node: p.node.clone(),
                        aliases: Vec::new(),
                        claim: false,
                        stacked_on: None,
                    },
                );
            }
        }
    }
    // Everything stacked on the block devices, recursively (bounded: a stack is shallow).
    let mut frontier: Vec<(String, String)> =
        members.iter().filter(|m| m.kind == NodeKind::Block).map(|m| (m.name.clone(), m.what.clone())).collect();
    for _ in 0..16 {
        let mut next = Vec::new();
        for (below, below_what) in &frontier {
            for holder in sysfs::holders(host, below).map_err(|e| e.to_string())? {
                let info = sysfs::block_by_name(host, &holder);
                let dm = sysfs::read_attr(&info.sysfs.join("dm/name")).ok();
                let kind = match &dm {
                    Some(name) => format!("device-mapper `{name}`"),
                    None if info.sysfs.join("md").is_dir() => "md RAID".to_string(),
                    None => "stacked device".to_string(),
                };
                let on = below_what.split(' ').next().unwrap_or(below);
                let what = format!("{} ({kind} on {on})", shown(host, &holder, &info.node));
                next.push((holder.clone(), what.clone()));
                push(
                    &mut members,
                    Member {
                        name: holder,
                        kind: NodeKind::Block,
                        num: info.num,
                        node: info.node,
                        aliases: dm.into_iter().collect(),
                        what,
                        claim: false,
                        stacked_on: Some(below.clone()),
                    },
                );
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    Ok(members)
}

/// Undoes the octal escapes of /proc/self/mountinfo and /proc/swaps (`\040` is a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b)) {
            let v = (bytes[i + 1] - b'0') as u32 * 64 + (bytes[i + 2] - b'0') as u32 * 8 + (bytes[i + 3] - b'0') as u32;
            if let Ok(b) = u8::try_from(v) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The member a device path names (`/dev/nvme0n1p1`, `/dev/mapper/vg0-data`, a
/// by-uuid link), by device number where the node can be examined, else by name.
fn member_of_path<'a>(host: &Host, members: &'a [Member], path: &str) -> Option<&'a Member> {
    let path = Path::new(path);
    if let Ok(Some(node)) = host.stat(path) {
        if let Some(m) = members.iter().find(|m| m.kind == node.kind && m.num == Some(node.num)) {
            return Some(m);
        }
    }
    let resolved =
        if host.is_fake() { path.to_path_buf() } else { fs::canonicalize(path).unwrap_or(path.to_path_buf()) };
    if let Some(m) = members.iter().find(|m| m.node.as_deref() == Some(resolved.as_path())) {
        return Some(m);
    }
    let under_dev = resolved.starts_with(&host.dev) || resolved.starts_with("/dev");
    let name = resolved.file_name()?.to_str()?;
    under_dev.then(|| members.iter().find(|m| m.name == name || m.aliases.iter().any(|a| a == name))).flatten()
}

/// One mount: device number, mount point, filesystem type, source.
struct Mount {
    dev: Option<DevNum>,
    mountpoint: String,
    fstype: String,
    source: String,
}

fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            Some(Mount {
                dev: DevNum::parse(fields.get(2)?),
                mountpoint: unescape(fields.get(4)?),
                fstype: fields.get(sep + 1).map(|s| s.to_string()).unwrap_or_default(),
                source: unescape(fields.get(sep + 2).unwrap_or(&"")),
            })
        })
        .collect()
}

/// What uses the drive, one line per finding (empty: nothing found). A view that
/// cannot be read is a finding too: the check fails closed.
pub fn in_use(host: &Host, members: &[Member]) -> Vec<String> {
    let mut findings = Vec::new();
    let mut note = |line: String| {
        if !findings.contains(&line) {
            findings.push(line);
        }
    };

    // Mounts: ours, and PID 1's when readable (another mount namespace).
    let own = host.proc.join("self/mountinfo");
    let mut mounts = match fs::read_to_string(&own) {
        Ok(text) => parse_mountinfo(&text),
        Err(e) => {
            note(format!("cannot read {} ({e}): mount /proc so that mounts can be checked", own.display()));
            Vec::new()
        }
    };
    if let Ok(text) = fs::read_to_string(host.proc.join("1/mountinfo")) {
        mounts.extend(parse_mountinfo(&text));
    }
    for mount in &mounts {
        let by_num = mount.dev.and_then(|d| members.iter().find(|m| m.kind == NodeKind::Block && m.num == Some(d)));
        let Some(m) = by_num.or_else(|| member_of_path(host, members, &mount.source)) else { continue };
        if mount.mountpoint == "/" {
            note(format!(
                "{} holds the root filesystem (/): nvtest never runs destructive cases on the drive the system runs \
                 from; use another drive",
                m.what
            ));
        } else {
            note(format!(
                "{} is mounted at {} ({}): unmount it (umount {})",
                m.what, mount.mountpoint, mount.fstype, mount.mountpoint
            ));
        }
    }

    // Swap.
    let swaps = host.proc.join("swaps");
    match fs::read_to_string(&swaps) {
        Ok(text) => {
            for line in text.lines().skip(1) {
                let Some(file) = line.split_whitespace().next().map(unescape) else { continue };
                if let Some(m) = member_of_path(host, members, &file) {
                    note(format!("{} is in use as swap: turn it off (swapoff {file})", m.what));
                }
            }
        }
        Err(e) => note(format!("cannot read {} ({e}): mount /proc so that swap can be checked", swaps.display())),
    }

    // Holders: what is stacked directly on the drive's own block devices.
    for m in members.iter().filter(|m| m.kind == NodeKind::Block && m.stacked_on.is_none()) {
        match sysfs::holders(host, &m.name) {
            Ok(holders) => {
                for h in holders {
                    note(format!(
                        "{} is held by {}: take it down first (umount what is on it, then dmsetup remove / \
                         vgchange -an / mdadm --stop)",
                        m.what,
                        sysfs::describe_holder(host, &h)
                    ));
                }
            }
            Err(e) => {
                note(format!("cannot read the holders of {} ({e}): nothing is run until they can be checked", m.what))
            }
        }
    }

    // Other processes with a device of the drive open.
    for line in openers(host, members) {
        note(line);
    }
    findings
}

/// `/proc/PID/fd/*` links to the drive's devices, other than this process's.
fn openers(host: &Host, members: &[Member]) -> Vec<String> {
    let mut lines = Vec::new();
    let entries = match fs::read_dir(&host.proc) {
        Ok(entries) => entries,
        Err(e) => {
            return vec![format!(
                "cannot list processes in {} ({e}): mount /proc so that open devices can be checked",
                host.proc.display()
            )]
        }
    };
    let me = std::process::id();
    let mut pids: Vec<u32> =
        entries.filter_map(|e| e.ok()).filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok())).collect();
    pids.sort_unstable();
    for pid in pids.into_iter().filter(|&p| p != me) {
        let dir = host.proc.join(pid.to_string());
        let comm = sysfs::read_attr(&dir.join("comm")).unwrap_or_else(|_| "?".into());
        let fds = match fs::read_dir(dir.join("fd")) {
            Ok(fds) => fds,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                lines.push(format!(
                    "cannot see which files process {pid} ({comm}) has open ({e}): run nvtest as root so that the \
                     in-use check is complete"
                ));
                continue;
            }
        };
        let mut seen = BTreeSet::new();
        for fd in fds.filter_map(|e| e.ok()) {
            let Ok(target) = fs::read_link(fd.path()) else { continue };
            let Some(text) = target.to_str() else { continue };
            if let Some(m) = member_of_path(host, members, text) {
                if seen.insert(m.name.clone()) {
                    lines
                        .push(format!("process {pid} ({comm}) has {} open: stop it, or wait for it to finish", m.what));
                }
            }
        }
    }
    lines
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
