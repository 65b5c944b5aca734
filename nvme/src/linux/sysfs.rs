//! What the Linux kernel says about its NVMe controllers and namespaces: sysfs
//! (`/sys/class/nvme`, `/sys/class/nvme-generic`, `/sys/class/nvme-subsystem`,
//! `/sys/class/block`), the device nodes in `/dev`, and nothing else. No command is sent
//! to a device here.
//!
//! The roots are injectable ([`Host::fake`]) so that discovery, the bad-input checks and
//! the safety gate are tested on fake trees. A fake tree's device nodes are regular files
//! whose text says what they stand for: `c 245:0` (a character device, major 245 minor
//! 0) or `b 259:1` (a block device), optionally followed by `busy` (an exclusive open
//! fails with EBUSY) or `eacces` (every open fails with EACCES); `f 259:1` is a regular
//! file on the filesystem of block device 259:1 (a loop device's backing file, an open
//! or memory-mapped file).
//!
//! Kernel facts this relies on (drivers/nvme/host, read for behaviour only):
//! - a controller `nvmeN` is a device of class `nvme`; its `dev` attribute is the
//!   major:minor of `/dev/nvmeN`, and it has `serial`, `model`, `firmware_rev`, `state`;
//! - a namespace's block device is a child of its controller (`nvmeXnY`) or, with native
//!   multipath, of the subsystem (`nvme-subsysS/nvmeSnY`, the controller then holding a
//!   hidden path device `nvmeScCnY` without a device node); each has an `nsid` attribute;
//! - the generic character device `ngXnY` (class `nvme-generic`, Linux 5.13 and later)
//!   sits beside the block device and shares its last number (the namespace head's
//!   instance, which is not the NSID);
//! - `nvme-subsystem/nvme-subsysS` holds a link per controller of the subsystem.

use std::collections::BTreeSet;
use std::fmt;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where the kernel's views live. [`Host::real`] is `/sys`, `/dev`, `/proc`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    pub sys: PathBuf,
    pub dev: PathBuf,
    pub proc: PathBuf,
    /// Device nodes are regular files describing themselves (see the module docs).
    fake: bool,
}

/// A character or block device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeKind {
    Char,
    Block,
}

impl fmt::Display for NodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodeKind::Char => "character device",
            NodeKind::Block => "block device",
        })
    }
}

/// A device number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevNum {
    pub major: u32,
    pub minor: u32,
}

impl DevNum {
    /// Parses `MAJ:MIN` (a sysfs `dev` attribute, a mountinfo field).
    pub fn parse(text: &str) -> Option<DevNum> {
        let (major, minor) = text.trim().split_once(':')?;
        Some(DevNum { major: major.parse().ok()?, minor: minor.parse().ok()? })
    }
}

impl DevNum {
    /// Parses `MAJ:MIN` in hexadecimal, as `/proc/PID/maps` writes a mapping's device.
    pub fn parse_hex(text: &str) -> Option<DevNum> {
        let (major, minor) = text.trim().split_once(':')?;
        Some(DevNum { major: u32::from_str_radix(major, 16).ok()?, minor: u32::from_str_radix(minor, 16).ok()? })
    }

    /// From a `dev_t` as `stat` gives it (and as the kernel's `huge_encode_dev` makes it).
    pub fn from_dev_t(dev: u64) -> DevNum {
        DevNum { major: nix::sys::stat::major(dev) as u32, minor: nix::sys::stat::minor(dev) as u32 }
    }
}

impl fmt::Display for DevNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// What an open file, a memory mapping or a loop device's backing file is, by the
/// kernel's numbers: a device node (the device it stands for), or a file of a
/// filesystem (the device that filesystem lives on, `st_dev`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileIdentity {
    Node(DevNode),
    OnFilesystem(DevNum),
}

/// What a path in `/dev` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevNode {
    pub kind: NodeKind,
    pub num: DevNum,
}

impl Host {
    /// This machine: `/sys`, `/dev`, `/proc`.
    pub fn real() -> Host {
        Host { sys: "/sys".into(), dev: "/dev".into(), proc: "/proc".into(), fake: false }
    }

    /// A fake tree for tests: `ROOT/sys`, `ROOT/dev`, `ROOT/proc`, device nodes described
    /// by regular files.
    pub fn fake(root: &Path) -> Host {
        Host { sys: root.join("sys"), dev: root.join("dev"), proc: root.join("proc"), fake: true }
    }

    pub fn is_fake(&self) -> bool {
        self.fake
    }

    /// `/dev/NAME`.
    pub fn node_path(&self, name: &str) -> PathBuf {
        self.dev.join(name)
    }

    /// What `path` is: `Ok(Some)` for a device node, `Ok(None)` for anything else that
    /// exists (a regular file, a directory). Symbolic links are followed.
    pub fn stat(&self, path: &Path) -> io::Result<Option<DevNode>> {
        let meta = fs::metadata(path)?;
        if self.fake {
            if !meta.is_file() {
                return Ok(None);
            }
            return Ok(fake_node(&fs::read_to_string(path).unwrap_or_default()).map(|(node, _)| node));
        }
        Ok(node_of(&meta))
    }

    /// What `path` leads to, links followed: `/proc/PID/fd/N` and `/proc/PID/map_files/…`
    /// are the kernel's own links to the open file, so this holds for a file in another
    /// mount namespace or one already deleted.
    pub fn identify(&self, path: &Path) -> io::Result<FileIdentity> {
        if self.fake {
            let meta = fs::metadata(path)?;
            let text = if meta.is_file() { fs::read_to_string(path).unwrap_or_default() } else { String::new() };
            if let Some((node, _)) = fake_node(&text) {
                return Ok(FileIdentity::Node(node));
            }
            let on = text.strip_prefix("f ").and_then(|rest| DevNum::parse(rest.split_whitespace().next()?));
            return Ok(FileIdentity::OnFilesystem(on.unwrap_or(DevNum { major: 0, minor: 0 })));
        }
        let meta = fs::metadata(path)?;
        Ok(match node_of(&meta) {
            Some(node) => FileIdentity::Node(node),
            None => FileIdentity::OnFilesystem(DevNum::from_dev_t(meta.dev())),
        })
    }

    /// `/dev/NAME` when it exists and is the device `kind` `num` (a node that is missing
    /// or stands for another device is not used).
    pub fn node_if_matches(&self, name: &str, kind: NodeKind, num: DevNum) -> Option<PathBuf> {
        let path = self.node_path(name);
        match self.stat(&path) {
            Ok(Some(node)) if node.kind == kind && node.num == num => Some(path),
            _ => None,
        }
    }

    /// Opens a device node for reading and writing (the passthrough ioctls need a node
    /// opened for writing to send commands that write).
    pub fn open_rw(&self, path: &Path) -> io::Result<File> {
        if self.fake {
            self.fake_check(path, false)?;
            return File::open(path);
        }
        fs::OpenOptions::new().read(true).write(true).custom_flags(nix::libc::O_CLOEXEC).open(path)
    }

    /// Opens a block device read-only with O_EXCL: the kernel refuses (EBUSY) when the
    /// device is mounted, used as swap, held by device-mapper or md, or opened
    /// exclusively by anyone else, and while the file stays open nobody else can do any
    /// of these. Nothing is written.
    pub fn open_exclusive(&self, path: &Path) -> io::Result<File> {
        if self.fake {
            self.fake_check(path, true)?;
            return File::open(path);
        }
        fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_EXCL | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
            .open(path)
    }

    fn fake_check(&self, path: &Path, exclusive: bool) -> io::Result<()> {
        let text = fs::read_to_string(path)?;
        let flags = fake_node(&text).map(|(_, flags)| flags).unwrap_or_default();
        if flags.iter().any(|f| f == "eacces") {
            return Err(io::Error::from_raw_os_error(nix::libc::EACCES));
        }
        if exclusive && flags.iter().any(|f| f == "busy") {
            return Err(io::Error::from_raw_os_error(nix::libc::EBUSY));
        }
        Ok(())
    }

    /// `/sys/RELATIVE`.
    pub fn sys_path(&self, relative: &str) -> PathBuf {
        self.sys.join(relative)
    }
}

/// The device a node stands for; `None` when it is not a device node.
fn node_of(meta: &fs::Metadata) -> Option<DevNode> {
    let kind = if meta.file_type().is_char_device() {
        NodeKind::Char
    } else if meta.file_type().is_block_device() {
        NodeKind::Block
    } else {
        return None;
    };
    Some(DevNode { kind, num: DevNum::from_dev_t(meta.rdev()) })
}

/// Parses a fake node's text: `c 245:0 [flags…]` or `b 259:1 [flags…]`.
fn fake_node(text: &str) -> Option<(DevNode, Vec<String>)> {
    let mut words = text.split_whitespace();
    let kind = match words.next()? {
        "c" => NodeKind::Char,
        "b" => NodeKind::Block,
        _ => return None,
    };
    let num = DevNum::parse(words.next()?)?;
    Some((DevNode { kind, num }, words.map(str::to_string).collect()))
}

/// Reads a sysfs attribute, trimmed.
pub fn read_attr(path: &Path) -> io::Result<String> {
    Ok(fs::read_to_string(path)?.trim().to_string())
}

/// The entries of a directory, sorted by name; a missing directory is empty.
pub fn dir_names(path: &Path) -> io::Result<Vec<String>> {
    let entries = match fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_string());
        }
    }
    names.sort_by_key(|a| natural(a));
    Ok(names)
}

/// Sort key that puts `nvme2` before `nvme10`.
fn natural(name: &str) -> (String, u64, String) {
    let digits_at = name.find(|c: char| c.is_ascii_digit()).unwrap_or(name.len());
    let (head, rest) = name.split_at(digits_at);
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let number = rest[..end].parse().unwrap_or(0);
    (head.to_string(), number, rest[end..].to_string())
}

/// `PREFIX<digits>` → the digits' value.
fn numbered(name: &str, prefix: &str) -> Option<u32> {
    let digits = name.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `nvme<N>`: a controller name.
pub fn controller_number(name: &str) -> Option<u32> {
    numbered(name, "nvme")
}

/// The namespace head instance of `nvmeXnY`, `nvmeXcCnY` or `ngXnY` (the Y).
fn head_instance(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("nvme").or_else(|| name.strip_prefix("ng"))?;
    let (before, y) = rest.rsplit_once('n')?;
    let digits_only = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let before_ok = match before.split_once('c') {
        Some((x, c)) => digits_only(x) && digits_only(c) && name.starts_with("nvme"),
        None => digits_only(before),
    };
    (before_ok && digits_only(y)).then(|| y.parse().ok()).flatten()
}

fn is_generic_name(name: &str) -> bool {
    name.starts_with("ng") && head_instance(name).is_some()
}

fn is_disk_name(name: &str) -> bool {
    name.starts_with("nvme") && head_instance(name).is_some()
}

fn is_path_disk_name(name: &str) -> bool {
    is_disk_name(name) && name.strip_prefix("nvme").is_some_and(|r| r.contains('c'))
}

/// Why the kernel's view could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SysfsError(pub String);

fn sys_err(path: &Path, e: io::Error) -> SysfsError {
    SysfsError(format!("cannot read {}: {e} (is sysfs mounted on /sys?)", path.display()))
}

/// A controller of the Linux NVMe driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerInfo {
    /// `nvme0`.
    pub name: String,
    /// The device node as given (`/dev/nvme0`).
    pub node: PathBuf,
    pub num: DevNum,
    /// Its sysfs directory (`/sys/class/nvme/nvme0`).
    pub sysfs: PathBuf,
    /// Identify Controller SN, MN, FR as the kernel read them at probe time (sysfs).
    pub serial: String,
    pub model: String,
    pub firmware: String,
    /// `live`, `resetting`, `connecting`, `deleting`, `dead` … (sysfs `state`), when
    /// the kernel reports it.
    pub state: Option<String>,
    /// The NVM subsystem (`nvme-subsys0`) and its sysfs directory, when present.
    pub subsystem: Option<(String, PathBuf)>,
}

/// A block device (a namespace's disk, a partition, or something stacked on them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// Kernel name: `nvme0n1`, `nvme0n1p2`, `dm-0`.
    pub name: String,
    pub num: Option<DevNum>,
    /// `/dev/NAME` when it exists and is this device.
    pub node: Option<PathBuf>,
    pub sysfs: PathBuf,
}

/// A namespace generic character device (`/dev/ngXnY`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenericInfo {
    pub name: String,
    pub num: DevNum,
    /// `/dev/NAME` when it exists and is this device.
    pub node: Option<PathBuf>,
}

/// An active namespace as the kernel sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceInfo {
    pub nsid: u32,
    /// The block device users see (`nvme0n1`; the multipath head `nvmeSnY` when the
    /// namespace goes through native multipath). `None` when the kernel made none.
    pub disk: Option<BlockInfo>,
    /// Its partitions.
    pub partitions: Vec<BlockInfo>,
    /// The generic character device, through which nvtest sends I/O.
    pub generic: Option<GenericInfo>,
    /// Whether the namespace goes through a native multipath head: I/O sent on its
    /// generic device may then be served by another controller of the subsystem.
    pub multipath: bool,
    /// The largest data transfer the kernel passes to the drive for this namespace, in
    /// bytes (the disk's `queue/max_hw_sectors_kb`, from MDTS and the driver's own cap);
    /// a longer passthrough buffer is refused with EINVAL before the drive sees it.
    pub max_transfer_bytes: Option<u64>,
}

/// Why a path is not a controller nvtest can drive: one line naming the problem and the
/// fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("{path}: no such file or device; give the controller's character device /dev/nvmeN ({hint})")]
    NotFound { path: String, hint: String },
    #[error("{path} is {what}, not a device; give the controller's character device /dev/nvmeN ({hint})")]
    NotADevice { path: String, what: String, hint: String },
    #[error("{path} is not an NVMe controller ({what}); give the controller's character device /dev/nvmeN ({hint})")]
    NotNvme { path: String, what: String, hint: String },
    #[error(
        "{path} is the block device of namespace {namespace}, not a controller; give its controller {controller} \
         (nvtest reaches every namespace through it)"
    )]
    NamespaceBlock { path: String, namespace: String, controller: String },
    #[error(
        "{path} is a partition of namespace {namespace}, not a controller; give its controller {controller} \
         (nvtest reaches every namespace through it)"
    )]
    Partition { path: String, namespace: String, controller: String },
    #[error(
        "{path} is the generic device of namespace {namespace}, not a controller; give its controller {controller} \
         (nvtest reaches every namespace through it)"
    )]
    NamespaceGeneric { path: String, namespace: String, controller: String },
    #[error("{path}: permission denied; run nvtest as root (the NVMe passthrough ioctls need CAP_SYS_ADMIN)")]
    PermissionDenied { path: String },
    #[error(
        "{path}: controller {controller} is {state}, not live; wait for the driver to finish, or reset it \
         (echo 1 > /sys/class/nvme/{controller}/reset_controller)"
    )]
    NotLive { path: String, controller: String, state: String },
    #[error("{path}: {message}")]
    Other { path: String, message: String },
}

/// Names every controller the kernel has, for messages: "controllers here: /dev/nvme0,
/// /dev/nvme1", or that the Linux NVMe driver has none.
pub fn controllers_hint(host: &Host) -> String {
    let names: Vec<String> = dir_names(&host.sys_path("class/nvme"))
        .unwrap_or_default()
        .into_iter()
        .filter(|n| controller_number(n).is_some())
        .map(|n| host.node_path(&n).display().to_string())
        .collect();
    if names.is_empty() {
        "the Linux NVMe driver has no controller on this machine: /sys/class/nvme is empty; is the drive bound to \
         the nvme driver (modprobe nvme)?"
            .to_string()
    } else {
        format!("controllers here: {}", names.join(", "))
    }
}

/// Finds the class device (`/sys/class/CLASS/NAME`) whose `dev` attribute is `num`.
fn find_in_class(host: &Host, class: &str, num: DevNum) -> Option<String> {
    let dir = host.sys_path(&format!("class/{class}"));
    dir_names(&dir)
        .ok()?
        .into_iter()
        .find(|name| read_attr(&dir.join(name).join("dev")).ok().and_then(|t| DevNum::parse(&t)) == Some(num))
}

/// The controller a namespace device (`nvme0n1`, `ng0n1`, `nvme0n1p1`) belongs to, for
/// messages: `/dev/nvme0`, or the subsystem's controllers.
fn owning_controller(host: &Host, class: &str, name: &str) -> String {
    let canonical = fs::canonicalize(host.sys_path(&format!("class/{class}/{name}"))).ok();
    if let Some(path) = &canonical {
        for ancestor in path.ancestors().skip(1) {
            let Some(component) = ancestor.file_name().and_then(|n| n.to_str()) else { continue };
            if controller_number(component).is_some() {
                return host.node_path(component).display().to_string();
            }
            if component.starts_with("nvme-subsys") {
                let ctrls: Vec<String> = dir_names(ancestor)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|n| controller_number(n).is_some())
                    .map(|n| host.node_path(&n).display().to_string())
                    .collect();
                if !ctrls.is_empty() {
                    return ctrls.join(" or ");
                }
            }
        }
    }
    "/dev/nvmeN (see /sys/class/nvme)".to_string()
}

/// Checks that `path` is an NVMe controller's character device and reads what sysfs
/// says about it. Opens nothing; the errors are the bad-input lines of the runner.
pub fn classify(host: &Host, path: &Path) -> Result<ControllerInfo, TargetError> {
    let shown = path.display().to_string();
    let hint = || controllers_hint(host);
    let node = match host.stat(path) {
        Ok(Some(node)) => node,
        Ok(None) => {
            let what = match fs::metadata(path) {
                Ok(m) if m.is_dir() => "a directory",
                Ok(m) if m.file_type().is_fifo() => "a FIFO",
                Ok(m) if m.file_type().is_socket() => "a socket",
                _ => "a regular file",
            };
            return Err(TargetError::NotADevice { path: shown, what: what.into(), hint: hint() });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(TargetError::NotFound { path: shown, hint: hint() });
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return Err(TargetError::PermissionDenied { path: shown });
        }
        Err(e) => return Err(TargetError::Other { path: shown, message: format!("cannot stat: {e}") }),
    };
    match node.kind {
        NodeKind::Block => {
            if let Some(name) = find_in_class(host, "block", node.num).filter(|n| n.starts_with("nvme")) {
                let dir = host.sys_path(&format!("class/block/{name}"));
                let controller = owning_controller(host, "block", &name);
                if dir.join("partition").exists() {
                    let namespace = fs::canonicalize(&dir)
                        .ok()
                        .and_then(|p| p.parent().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().to_string()))
                        .unwrap_or_else(|| name.clone());
                    return Err(TargetError::Partition { path: shown, namespace, controller });
                }
                return Err(TargetError::NamespaceBlock { path: shown, namespace: name, controller });
            }
            let what = describe_other(host, "block", node);
            Err(TargetError::NotNvme { path: shown, what, hint: hint() })
        }
        NodeKind::Char => {
            if let Some(name) = find_in_class(host, "nvme-generic", node.num) {
                let controller = owning_controller(host, "nvme-generic", &name);
                return Err(TargetError::NamespaceGeneric { path: shown, namespace: name, controller });
            }
            let Some(name) = find_in_class(host, "nvme", node.num) else {
                let what = describe_other(host, "char", node);
                return Err(TargetError::NotNvme { path: shown, what, hint: hint() });
            };
            controller_info(host, &name, path, node.num)
                .map_err(|e| TargetError::Other { path: shown.clone(), message: e.0 })
                .and_then(|info| match info.state.as_deref() {
                    Some(state) if state != "live" => Err(TargetError::NotLive {
                        path: shown.clone(),
                        controller: info.name.clone(),
                        state: state.to_string(),
                    }),
                    _ => Ok(info),
                })
        }
    }
}

/// "character device 1:3, `mem` device null" for a device that is not NVMe.
fn describe_other(host: &Host, kind: &str, node: DevNode) -> String {
    let dir = host.sys_path(&format!("dev/{kind}/{}", node.num));
    let name = fs::canonicalize(&dir).ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()));
    let class =
        fs::read_link(dir.join("subsystem")).ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()));
    match (class, name) {
        (Some(class), Some(name)) => format!("{} {}, `{class}` device {name}", node.kind, node.num),
        (None, Some(name)) => format!("{} {}, device {name}", node.kind, node.num),
        _ => format!("{} {}", node.kind, node.num),
    }
}

/// What sysfs says about controller `name` (`nvme0`), reached through `node`.
pub fn controller_info(host: &Host, name: &str, node: &Path, num: DevNum) -> Result<ControllerInfo, SysfsError> {
    let sysfs = host.sys_path(&format!("class/nvme/{name}"));
    let attr = |a: &str| read_attr(&sysfs.join(a));
    let serial = attr("serial").map_err(|e| sys_err(&sysfs.join("serial"), e))?;
    let subsystem = subsystem_of(host, name)?;
    Ok(ControllerInfo {
        name: name.to_string(),
        node: node.to_path_buf(),
        num,
        sysfs: sysfs.clone(),
        serial,
        model: attr("model").unwrap_or_default(),
        firmware: attr("firmware_rev").unwrap_or_default(),
        state: attr("state").ok(),
        subsystem,
    })
}

/// The NVM subsystem holding controller `name`: the `nvme-subsystem` class device with a
/// link of that name.
pub fn subsystem_of(host: &Host, name: &str) -> Result<Option<(String, PathBuf)>, SysfsError> {
    let class = host.sys_path("class/nvme-subsystem");
    let subsystems = dir_names(&class).map_err(|e| sys_err(&class, e))?;
    Ok(subsystems.into_iter().map(|s| (s.clone(), class.join(&s))).find(|(_, dir)| dir.join(name).exists()))
}

/// The controllers of a subsystem directory (`nvme0`, `nvme1` …).
pub fn subsystem_controllers(dir: &Path) -> Result<Vec<String>, SysfsError> {
    Ok(dir_names(dir).map_err(|e| sys_err(dir, e))?.into_iter().filter(|n| controller_number(n).is_some()).collect())
}

fn block_info(host: &Host, name: &str, sysfs: PathBuf) -> BlockInfo {
    let num = read_attr(&sysfs.join("dev")).ok().and_then(|t| DevNum::parse(&t));
    let node = num.and_then(|num| host.node_if_matches(name, NodeKind::Block, num));
    BlockInfo { name: name.to_string(), num, node, sysfs }
}

/// A disk's `queue/max_hw_sectors_kb` in bytes, when the kernel reports it.
fn max_transfer_bytes(disk: &BlockInfo) -> Option<u64> {
    let kib: u64 = read_attr(&disk.sysfs.join("queue/max_hw_sectors_kb")).ok()?.parse().ok()?;
    let sectors = kib.checked_mul(1024)?;
    // The kernel maps a passthrough buffer page by page, and refuses (EINVAL) one whose
    // pages it cannot merge into `max_segments` segments: a page-aligned buffer of
    // `max_segments` pages always fits ([`super::LinuxDevice`] stages unaligned ones).
    let segments = read_attr(&disk.sysfs.join("queue/max_segments")).ok().and_then(|t| t.parse::<u64>().ok());
    Some(match segments {
        Some(n) if n > 0 => sectors.min(n.saturating_mul(PAGE_BYTES)),
        _ => sectors,
    })
}

/// The page size the kernel maps user buffers in (x86-64, arm64 with 4 KiB pages).
const PAGE_BYTES: u64 = 4096;

/// The partitions of a disk: children with a `partition` attribute.
pub fn partitions(host: &Host, disk: &BlockInfo) -> Result<Vec<BlockInfo>, SysfsError> {
    let mut parts = Vec::new();
    for name in dir_names(&disk.sysfs).map_err(|e| sys_err(&disk.sysfs, e))? {
        let dir = disk.sysfs.join(&name);
        if name.starts_with(&disk.name) && dir.join("partition").is_file() {
            parts.push(block_info(host, &name, dir));
        }
    }
    Ok(parts)
}

fn generic_info(host: &Host, dir: &Path, name: &str) -> Option<GenericInfo> {
    let num = DevNum::parse(&read_attr(&dir.join(name).join("dev")).ok()?)?;
    let node = host.node_if_matches(name, NodeKind::Char, num);
    Some(GenericInfo { name: name.to_string(), num, node })
}

fn nsid_of(dir: &Path) -> Result<u32, SysfsError> {
    let path = dir.join("nsid");
    let text = read_attr(&path).map_err(|e| sys_err(&path, e))?;
    text.parse().map_err(|_| SysfsError(format!("{}: `{text}` is not a namespace identifier", path.display())))
}

/// The active namespaces of controller `ctrl` as the kernel sees them, by NSID.
pub fn namespaces(host: &Host, ctrl: &ControllerInfo) -> Result<Vec<NamespaceInfo>, SysfsError> {
    let names = dir_names(&ctrl.sysfs).map_err(|e| sys_err(&ctrl.sysfs, e))?;
    let mut found = Vec::new();
    for name in names.iter().filter(|n| is_disk_name(n)) {
        let dir = ctrl.sysfs.join(name);
        if !dir.join("nsid").exists() {
            continue;
        }
        let nsid = nsid_of(&dir)?;
        let Some(instance) = head_instance(name) else { continue };
        let ns = if is_path_disk_name(name) {
            // Native multipath: the head disk and its generic device live in the subsystem.
            let Some((_, subsys)) = &ctrl.subsystem else {
                return Err(SysfsError(format!(
                    "{}: a multipath path device but {} belongs to no nvme-subsystem",
                    dir.display(),
                    ctrl.name
                )));
            };
            let subsys_names = dir_names(subsys).map_err(|e| sys_err(subsys, e))?;
            let head = subsys_names
                .iter()
                .find(|n| is_disk_name(n) && !is_path_disk_name(n) && head_instance(n) == Some(instance))
                .map(|n| block_info(host, n, subsys.join(n)));
            let generic = subsys_names
                .iter()
                .find(|n| is_generic_name(n) && head_instance(n) == Some(instance))
                .and_then(|n| generic_info(host, subsys, n));
            let max_transfer_bytes = head.as_ref().and_then(max_transfer_bytes);
            NamespaceInfo { nsid, disk: head, partitions: Vec::new(), generic, multipath: true, max_transfer_bytes }
        } else {
            let disk = block_info(host, name, dir);
            let generic = names
                .iter()
                .find(|n| is_generic_name(n) && head_instance(n) == Some(instance))
                .and_then(|n| generic_info(host, &ctrl.sysfs, n));
            let max_transfer_bytes = max_transfer_bytes(&disk);
            NamespaceInfo {
                nsid,
                disk: Some(disk),
                partitions: Vec::new(),
                generic,
                multipath: false,
                max_transfer_bytes,
            }
        };
        found.push(ns);
    }
    for ns in &mut found {
        if let Some(disk) = &ns.disk {
            ns.partitions = partitions(host, disk)?;
        }
    }
    found.sort_by_key(|ns| ns.nsid);
    found.dedup_by_key(|ns| ns.nsid);
    Ok(found)
}

/// The NSIDs in a namespace list.
pub fn nsids(namespaces: &[NamespaceInfo]) -> BTreeSet<u32> {
    namespaces.iter().map(|ns| ns.nsid).collect()
}

/// Block devices stacked on `name` (device-mapper, md, bcache …): `holders/` entries.
pub fn holders(host: &Host, name: &str) -> Result<Vec<String>, SysfsError> {
    let dir = host.sys_path(&format!("class/block/{name}/holders"));
    dir_names(&dir).map_err(|e| sys_err(&dir, e))
}

/// What a stacked block device is, for messages: "device-mapper vg0-root", "md RAID md0".
pub fn describe_holder(host: &Host, name: &str) -> String {
    let dir = host.sys_path(&format!("class/block/{name}"));
    if let Ok(dm) = read_attr(&dir.join("dm/name")) {
        return format!("{name} (device-mapper `{dm}`)");
    }
    if dir.join("md").is_dir() {
        return format!("{name} (md RAID)");
    }
    name.to_string()
}

/// A block device by kernel name (`dm-0`).
pub fn block_by_name(host: &Host, name: &str) -> BlockInfo {
    block_info(host, name, host.sys_path(&format!("class/block/{name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(head_instance("nvme0n1"), Some(1));
        assert_eq!(head_instance("nvme0c1n12"), Some(12));
        assert_eq!(head_instance("ng3n7"), Some(7));
        assert_eq!(head_instance("ng3c1n7"), None);
        assert_eq!(head_instance("nvme0"), None);
        assert_eq!(head_instance("nvme0n1p1"), None);
        assert_eq!(head_instance("nvme-subsys0"), None);
        assert_eq!(head_instance("nvmen1"), None);
        assert!(is_path_disk_name("nvme0c1n1") && !is_path_disk_name("nvme0n1"));
        assert_eq!(controller_number("nvme12"), Some(12));
        assert_eq!(controller_number("nvme0n1"), None);
        assert_eq!(controller_number("nvme"), None);
        assert_eq!(DevNum::parse("259:3\n"), Some(DevNum { major: 259, minor: 3 }));
        assert_eq!(DevNum::parse("259"), None);
        assert_eq!(DevNum::parse("a:b"), None);
    }

    #[test]
    fn fake_nodes_parse_with_flags() {
        let (node, flags) = fake_node("b 259:1 busy\n").unwrap();
        assert_eq!(node, DevNode { kind: NodeKind::Block, num: DevNum { major: 259, minor: 1 } });
        assert_eq!(flags, ["busy"]);
        assert!(fake_node("hello").is_none());
        assert!(fake_node("").is_none());
        assert!(fake_node("c 1").is_none());
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["nvme10".to_string(), "nvme2".into(), "ng0n1".into(), "nvme0n1".into()];
        v.sort_by_key(|a| natural(a));
        assert_eq!(v, ["ng0n1", "nvme0n1", "nvme2", "nvme10"]);
    }
}
