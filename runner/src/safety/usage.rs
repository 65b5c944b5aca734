//! Whether anything on the machine uses the drive's devices ([`super::inventory`]), one
//! line per finding, failing closed: a view that cannot be read is a finding too.
//!
//! - mounts in every mount namespace (`/proc/PID/mountinfo` of one process per
//!   namespace), by device number and by source;
//! - swap (`/proc/swaps`: a device of the drive, or a swap file on one);
//! - holders (`holders/`) and loop devices stacked on the drive;
//! - every other process's open descriptors (`/proc/PID/fd`) and memory mappings
//!   (`/proc/PID/maps` with `map_files/`): a device of the drive, or a file on a
//!   filesystem of one, identified by the kernel's numbers through its own links, so a
//!   mapping whose descriptor was closed, a file in another mount namespace or a
//!   deleted one are seen;
//! - the files registered with every io_uring ring a process has open (the ring's
//!   `/proc/PID/fdinfo/FD`, `UserFiles:`): a registered file stays open after its
//!   descriptor is closed, and the kernel lists it by name only, so a name of a device
//!   of the drive counts;
//! - users inside the kernel that no process and no holder shows: namespaces of the
//!   kernel's NVMe target (nvmet) and backstores of the LIO SCSI target, both in
//!   configfs (`/sys/kernel/config`), backed by a device of the drive or a file on one;
//!   with either target loaded and configfs not mounted, its exports cannot be read, and
//!   that is a finding;
//! - the root filesystem: a drive holding `/` is always refused.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::Path;

use nvme::linux::sysfs::{self, DevNum, FileIdentity, NodeKind};
use nvme::linux::Host;

use super::inventory::{member_of_identity, member_of_path, Member, Stacking};

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

/// One mount: device number, mount point, filesystem type, source.
struct Mount {
    dev: Option<DevNum>,
    mountpoint: String,
    fstype: String,
    source: String,
    /// The process it was seen through when not in nvtest's own mount namespace: PID, comm.
    elsewhere: Option<(u32, String)>,
}

fn parse_mountinfo(text: &str, elsewhere: Option<(u32, String)>) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            Some(Mount {
                dev: DevNum::parse(fields.get(2)?),
                mountpoint: unescape(fields.get(4)?),
                fstype: fields.get(sep + 1).map(|s| s.to_string()).unwrap_or_default(),
                source: unescape(fields.get(sep + 2).unwrap_or(&"")),
                elsewhere: elsewhere.clone(),
            })
        })
        .collect()
}

/// The processes of the machine other than nvtest, ascending, with their `comm`.
fn processes(host: &Host) -> Result<Vec<(u32, String)>, String> {
    let entries = fs::read_dir(&host.proc).map_err(|e| {
        format!(
            "cannot list processes in {} ({e}): mount /proc so that open devices can be checked",
            host.proc.display()
        )
    })?;
    let me = std::process::id();
    let mut pids: Vec<u32> =
        entries.filter_map(|e| e.ok()).filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok())).collect();
    pids.sort_unstable();
    Ok(pids
        .into_iter()
        .filter(|&p| p != me)
        .map(|pid| (pid, sysfs::read_attr(&host.proc.join(format!("{pid}/comm"))).unwrap_or_else(|_| "?".into())))
        .collect())
}

/// What uses the drive, one line per finding (empty: nothing found).
pub fn in_use(host: &Host, members: &[Member]) -> Vec<String> {
    let mut findings = Vec::new();
    let mut note = |line: String| {
        if !findings.contains(&line) {
            findings.push(line);
        }
    };
    let procs = match processes(host) {
        Ok(procs) => procs,
        Err(line) => {
            note(line);
            Vec::new()
        }
    };
    for line in mounts(host, members, &procs) {
        note(line);
    }
    for line in swap(host, members) {
        note(line);
    }
    for line in stacked(host, members) {
        note(line);
    }
    for line in kernel_exports(host, members) {
        note(line);
    }
    for (pid, comm) in &procs {
        let (open, rings) = descriptors(host, members, *pid, comm);
        let lines = open
            .into_iter()
            .chain(mappings(host, members, *pid, comm))
            .chain(ring_files(host, members, *pid, comm, &rings));
        for line in lines {
            note(line);
        }
    }
    findings
}

/// What a descriptor link of an io_uring ring reads as.
const IO_URING: &str = "anon_inode:[io_uring]";

/// The files registered with the io_uring rings process `pid` has open (`rings`: their
/// descriptors, as [`descriptors`] found them): each ring's fdinfo lists them
/// (`UserFiles:` then `  N: NAME`, the file's name alone). A name of a device of the
/// drive counts; a ring whose files the kernel did not list (it lists them only when the
/// ring is not busy) is re-read, and counts if it stays unlisted.
fn ring_files(host: &Host, members: &[Member], pid: u32, comm: &str, rings: &[OsString]) -> Vec<String> {
    let mut lines = Vec::new();
    for fd in rings {
        let fdinfo = host.proc.join(format!("{pid}/fdinfo")).join(fd);
        let mut listed = None;
        for _ in 0..5 {
            match fs::read_to_string(&fdinfo) {
                Ok(text) => {
                    let parsed = parse_ring_files(&text).map_err(str::to_string);
                    let done = parsed.is_ok();
                    listed = Some(parsed);
                    if done {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => break, // closed meanwhile
                Err(e) => {
                    listed = Some(Err(e.to_string()));
                    break;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let fd = fd.to_string_lossy();
        match listed {
            None => {}
            Some(Ok(names)) => {
                for name in names {
                    let Some(m) = members.iter().find(|m| m.name == name || m.aliases.contains(&name)) else {
                        continue;
                    };
                    lines.push(format!(
                        "process {pid} ({comm}) has {} registered as a fixed file of its io_uring ring (descriptor \
                         {fd}; the file stays open after its own descriptor is closed): stop it, or wait for it to \
                         finish",
                        m.what
                    ));
                }
            }
            Some(Err(why)) => lines.push(format!(
                "cannot see which files process {pid} ({comm}) registered with its io_uring ring (descriptor {fd}: \
                 {why}): stop it, or run nvtest again when the ring is idle"
            )),
        }
    }
    lines
}

/// The names an io_uring fdinfo lists under `UserFiles:` (`%5u: NAME` lines, `<none>`
/// for an empty slot); `Err` when it lists fewer than it counts (the kernel lists them
/// only when it can lock the ring) or has no such field.
fn parse_ring_files(text: &str) -> Result<Vec<String>, &'static str> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with("UserFiles:"));
    let header = lines.next().ok_or("the kernel's fdinfo has no UserFiles field")?;
    let count: usize =
        header["UserFiles:".len()..].trim().parse().map_err(|_| "the kernel's UserFiles field is not a number")?;
    let entries: Vec<&str> = lines.take_while(|l| l.starts_with(' ')).collect();
    if entries.len() < count {
        return Err("the kernel did not list them (the ring was busy)");
    }
    Ok(entries
        .iter()
        .filter_map(|l| l.trim_start().split_once(": ").map(|(_, name)| name.to_string()))
        .filter(|name| name != "<none>")
        .collect())
}

/// Users of the drive inside the kernel, in configfs: namespaces of the NVMe target
/// (nvmet) and backstores of the LIO SCSI target backed by a device of the drive or a
/// file on one. A target module loaded without configfs mounted is a finding: its
/// exports cannot be read.
fn kernel_exports(host: &Host, members: &[Member]) -> Vec<String> {
    let mut lines = Vec::new();
    let configfs = host.sys_path("kernel/config");
    let backs = |path: &str| -> Option<&Member> {
        member_of_path(host, members, path).or_else(|| match host.identify(Path::new(path)) {
            Ok(identity) => member_of_identity(members, &identity),
            Err(_) => None,
        })
    };
    // nvmet: subsystems/NQN/namespaces/NSID/{device_path,enable}.
    let nvmet = configfs.join("nvmet/subsystems");
    match fs::read_dir(&nvmet) {
        Ok(subsystems) => {
            for subsystem in subsystems.filter_map(|e| e.ok()) {
                let nqn = subsystem.file_name().to_string_lossy().into_owned();
                let Ok(namespaces) = fs::read_dir(subsystem.path().join("namespaces")) else { continue };
                for ns in namespaces.filter_map(|e| e.ok()) {
                    let path = sysfs::read_attr(&ns.path().join("device_path")).unwrap_or_default();
                    let enabled = sysfs::read_attr(&ns.path().join("enable")).is_ok_and(|e| e.trim() == "1");
                    let Some(m) = backs(path.trim()) else { continue };
                    let nsid = ns.file_name().to_string_lossy().into_owned();
                    let state = if enabled { "enabled" } else { "configured, not enabled" };
                    lines.push(format!(
                        "{} is exported by the kernel's NVMe target: nvmet subsystem `{nqn}` namespace {nsid}                          (device_path {}, {state}): take it out first (echo 0 > {}/enable, then rmdir it)",
                        m.what,
                        path.trim(),
                        ns.path().display()
                    ));
                }
            }
        }
        Err(_) if host.sys_path("module/nvmet").exists() => lines.push(format!(
            "the kernel's NVMe target (nvmet) is loaded but {} cannot be read: mount configfs there (mount -t              configfs none {}) so that its exports can be checked",
            nvmet.display(),
            configfs.display()
        )),
        Err(_) => {}
    }
    // LIO: target/core/HBA/STORAGE_OBJECT/udev_path (iblock and fileio backstores).
    let lio = configfs.join("target/core");
    match fs::read_dir(&lio) {
        Ok(hbas) => {
            for hba in hbas.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()) {
                let Ok(objects) = fs::read_dir(hba.path()) else { continue };
                for object in objects.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()) {
                    let path = sysfs::read_attr(&object.path().join("udev_path")).unwrap_or_default();
                    let Some(m) = backs(path.trim()) else { continue };
                    lines.push(format!(
                        "{} backs the LIO SCSI target's backstore {}/{} (udev_path {}): delete the backstore first                          (targetcli /backstores … delete)",
                        m.what,
                        hba.file_name().to_string_lossy(),
                        object.file_name().to_string_lossy(),
                        path.trim()
                    ));
                }
            }
        }
        Err(_) if host.sys_path("module/target_core_mod").exists() => lines.push(format!(
            "the LIO SCSI target (target_core_mod) is loaded but {} cannot be read: mount configfs (mount -t              configfs none {}) so that its backstores can be checked",
            lio.display(),
            configfs.display()
        )),
        Err(_) => {}
    }
    lines
}

/// Mounts of the drive's devices in nvtest's mount namespace and in every other one a
/// process is in.
fn mounts(host: &Host, members: &[Member], procs: &[(u32, String)]) -> Vec<String> {
    let mut lines = Vec::new();
    let own = host.proc.join("self/mountinfo");
    let mut all = match fs::read_to_string(&own) {
        Ok(text) => parse_mountinfo(&text, None),
        Err(e) => {
            lines.push(format!("cannot read {} ({e}): mount /proc so that mounts can be checked", own.display()));
            Vec::new()
        }
    };
    let namespace_of = |pid: &str| fs::read_link(host.proc.join(pid).join("ns/mnt")).ok();
    let mut namespaces_seen: BTreeSet<_> = namespace_of("self").into_iter().collect();
    let mut pid1_read = false;
    for (pid, comm) in procs {
        let ns = namespace_of(&pid.to_string());
        // A tree without namespace links (a fake one) still has PID 1's view read.
        let new = match &ns {
            Some(ns) => namespaces_seen.insert(ns.clone()),
            None => *pid == 1 && !pid1_read,
        };
        if !new {
            continue;
        }
        pid1_read |= *pid == 1;
        if let Ok(text) = fs::read_to_string(host.proc.join(format!("{pid}/mountinfo"))) {
            let seen_by = ns.is_some().then(|| (*pid, comm.clone()));
            all.extend(parse_mountinfo(&text, seen_by));
        }
    }
    for mount in &all {
        let by_num = mount.dev.and_then(|d| members.iter().find(|m| m.kind == NodeKind::Block && m.num == Some(d)));
        let Some(m) = by_num.or_else(|| member_of_path(host, members, &mount.source)) else { continue };
        let line = if mount.mountpoint == "/" && mount.elsewhere.is_none() {
            format!(
                "{} holds the root filesystem (/): nvtest never runs destructive cases on the drive the system runs \
                 from; use another drive",
                m.what
            )
        } else if let Some((pid, comm)) = &mount.elsewhere {
            format!(
                "{} is mounted at {} ({}) in the mount namespace of process {pid} ({comm}): unmount it there \
                 (nsenter -t {pid} -m umount {})",
                m.what, mount.mountpoint, mount.fstype, mount.mountpoint
            )
        } else {
            format!(
                "{} is mounted at {} ({}): unmount it (umount {})",
                m.what, mount.mountpoint, mount.fstype, mount.mountpoint
            )
        };
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
}

/// Swap on a device of the drive, or in a swap file on one.
fn swap(host: &Host, members: &[Member]) -> Vec<String> {
    let path = host.proc.join("swaps");
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            return vec![format!("cannot read {} ({e}): mount /proc so that swap can be checked", path.display())]
        }
    };
    let mut lines = Vec::new();
    for line in text.lines().skip(1) {
        let Some(file) = line.split_whitespace().next().map(unescape) else { continue };
        if let Some(m) = member_of_path(host, members, &file) {
            lines.push(format!("{} is in use as swap: turn it off (swapoff {file})", m.what));
        } else if let Ok(identity @ FileIdentity::OnFilesystem(_)) = host.identify(Path::new(&file)) {
            if let Some(m) = member_of_identity(members, &identity) {
                lines.push(format!("the swap file {file} is on {}: turn it off (swapoff {file})", m.what));
            }
        }
    }
    lines
}

/// What is stacked on the drive: holders of its own block devices, and loop devices.
fn stacked(host: &Host, members: &[Member]) -> Vec<String> {
    let mut lines = Vec::new();
    for m in members.iter().filter(|m| m.kind == NodeKind::Block && m.stacking == Stacking::Own) {
        match sysfs::holders(host, &m.name) {
            Ok(holders) => lines.extend(holders.iter().map(|h| {
                format!(
                    "{} is held by {}: take it down first (umount what is on it, then dmsetup remove / vgchange -an / \
                     mdadm --stop)",
                    m.what,
                    sysfs::describe_holder(host, h)
                )
            })),
            Err(e) => lines
                .push(format!("cannot read the holders of {} ({e}): nothing is run until they can be checked", m.what)),
        }
    }
    for m in members.iter() {
        let Stacking::Loop { file } = &m.stacking else { continue };
        let below = m.stacked_on.as_deref().and_then(|b| members.iter().find(|x| x.name == b));
        let below = below.map(|b| b.what.as_str()).unwrap_or("the drive");
        let node = m.shown(host);
        lines.push(match file {
            None => format!(
                "{below} backs {node} (a loop device): detach it (umount what is on it, then losetup -d {node})"
            ),
            Some(file) => format!(
                "{below} holds {file}, the backing file of {node} (a loop device): detach it (umount what is on it, \
                 then losetup -d {node})"
            ),
        });
    }
    lines
}

/// Descriptors of process `pid` on a device of the drive or on a file of its filesystems,
/// and the descriptors of its io_uring rings (for [`ring_files`]).
fn descriptors(host: &Host, members: &[Member], pid: u32, comm: &str) -> (Vec<String>, Vec<OsString>) {
    let dir = host.proc.join(format!("{pid}/fd"));
    let fds = match fs::read_dir(&dir) {
        Ok(fds) => fds,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return (Vec::new(), Vec::new()),
        Err(e) => {
            let line = format!(
                "cannot see which files process {pid} ({comm}) has open ({e}): run nvtest as root so that the in-use \
                 check is complete"
            );
            return (vec![line], Vec::new());
        }
    };
    let mut lines = Vec::new();
    let mut rings = Vec::new();
    let mut seen = BTreeSet::new();
    for fd in fds.filter_map(|e| e.ok()) {
        let link = fs::read_link(fd.path()).ok();
        if link.as_deref().is_some_and(|t| t.as_os_str() == IO_URING) {
            rings.push(fd.file_name());
            continue;
        }
        let target = link.and_then(|t| t.to_str().map(str::to_string));
        // (member, whether the descriptor is of a file on it rather than the device)
        let found = match host.identify(&fd.path()) {
            Ok(identity) => {
                member_of_identity(members, &identity).map(|m| (m, matches!(identity, FileIdentity::OnFilesystem(_))))
            }
            // The descriptor closed meanwhile, or its file cannot be examined: its name.
            Err(_) => target.as_deref().and_then(|t| member_of_path(host, members, t)).map(|m| (m, false)),
        };
        let Some((m, on_file)) = found else { continue };
        if !seen.insert(m.name.clone()) {
            continue;
        }
        lines.push(if on_file {
            format!(
                "process {pid} ({comm}) has {} open, a file on {}: stop it, or wait for it to finish",
                target.unwrap_or_else(|| "a file".into()),
                m.what
            )
        } else {
            format!("process {pid} ({comm}) has {} open: stop it, or wait for it to finish", m.what)
        });
    }
    (lines, rings)
}

/// Memory mappings of process `pid` of a device of the drive, or of a file on one; a
/// mapping outlives the descriptor it was made with.
fn mappings(host: &Host, members: &[Member], pid: u32, comm: &str) -> Vec<String> {
    let dir = host.proc.join(pid.to_string());
    let maps = match fs::read_to_string(dir.join("maps")) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            return vec![format!(
                "cannot see what process {pid} ({comm}) has memory-mapped ({e}): run nvtest as root so that the \
                 in-use check is complete"
            )]
        }
    };
    let mut lines = Vec::new();
    // One look per distinct file: a process maps the same library many times.
    let mut looked: BTreeMap<(String, String), Option<String>> = BTreeMap::new();
    for line in maps.lines() {
        let mut fields = line.splitn(6, ' ');
        let (Some(range), _perms, _offset, Some(dev), Some(inode)) =
            (fields.next(), fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let path = fields.next().unwrap_or("").trim_start().to_string();
        if inode == "0" {
            continue; // anonymous memory, the stack, the heap
        }
        let key = (dev.to_string(), inode.to_string());
        if looked.contains_key(&key) {
            continue;
        }
        let finding = mapping_finding(host, members, &dir, range, dev, &path).map(|what| match what {
            Ok(line) => format!("process {pid} ({comm}) has {line} memory-mapped: stop it, or wait for it to finish"),
            Err(e) => format!(
                "cannot see what process {pid} ({comm}) has mapped at {range} ({path}: {e}): run nvtest as root so \
                 that the in-use check is complete"
            ),
        });
        looked.insert(key, finding.clone());
        lines.extend(finding);
    }
    lines
}

/// What one mapping is, when it belongs to the drive: `Some(Ok(description))`, or
/// `Some(Err(why))` when it could not be examined.
fn mapping_finding(
    host: &Host,
    members: &[Member],
    dir: &Path,
    range: &str,
    dev: &str,
    path: &str,
) -> Option<Result<String, String>> {
    // A file of a filesystem on the drive: the mapping's own device field says so.
    let on = DevNum::parse_hex(dev).map(FileIdentity::OnFilesystem);
    if let Some(m) = on.and_then(|on| member_of_identity(members, &on)) {
        return Some(Ok(format!("{path}, a file on {},", m.what)));
    }
    // A device node: only the mapped file itself says which device it stands for.
    let identity = match host.identify(&dir.join("map_files").join(range)) {
        Ok(identity) => identity,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None, // unmapped meanwhile
        Err(e) => match host.identify(Path::new(path)) {
            Ok(identity) if path.starts_with('/') => identity,
            _ => return Some(Err(e.to_string())),
        },
    };
    member_of_identity(members, &identity).map(|m| Ok(m.what.clone()))
}
