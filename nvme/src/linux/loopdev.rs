//! Loop devices and what backs them: the one kind of stacking the kernel does not show
//! under `holders/`. After `losetup /dev/loop0 /dev/nvme0n4` exits, no process has the
//! namespace open and an exclusive open of it succeeds; only the loop device knows.
//!
//! Kernel facts this relies on (drivers/block/loop.c, read for behaviour only):
//! - a bound loop device `loopN` has `/sys/class/block/loopN/loop/backing_file`, the
//!   backing file's path as the binding process saw it (possibly in another mount
//!   namespace, possibly ending in " (deleted)");
//! - `LOOP_GET_STATUS64` (0x4C05, `struct loop_info64`) gives the backing file's
//!   `st_dev` (`lo_device`) and `st_rdev` (`lo_rdevice`) as the kernel sees the open
//!   file, whatever its path: `lo_rdevice` is the block device when the backing file is
//!   one, 0 for a regular file (which then lives on the filesystem of `lo_device`).
//!
//! No crate is used for the one ioctl: `loopdev` generates its bindings with bindgen
//! (libclang at build time) for what is a 232-byte structure read once.

use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

use super::sysfs::{dir_names, read_attr, DevNode, DevNum, FileIdentity, Host, NodeKind, SysfsError};

/// A bound loop device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopDevice {
    /// Kernel name: `loop0`.
    pub name: String,
    /// Its own device number (`dev`), when readable.
    pub num: Option<DevNum>,
    /// The backing file as `backing_file` names it.
    pub backing_path: String,
    /// What the backing file is; an error says why it could not be told.
    pub backing: Result<FileIdentity, String>,
    /// Whether `backing_path` still leads to that file here (it does not once the
    /// file's filesystem was unmounted, or for a path of another mount namespace).
    pub path_current: bool,
}

/// `struct loop_info64` (UAPI `linux/loop.h`, 232 bytes); only the device numbers are
/// read, the rest is there for the layout.
#[repr(C)]
#[allow(dead_code)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

const _: () = assert!(std::mem::size_of::<LoopInfo64>() == 232);

const LOOP_GET_STATUS64: u64 = 0x4C05;
nix::ioctl_read_bad!(loop_get_status64, LOOP_GET_STATUS64, LoopInfo64);

/// Every bound loop device of the machine (an unbound one has no `loop/backing_file`).
pub fn loop_devices(host: &Host) -> Result<Vec<LoopDevice>, SysfsError> {
    let class = host.sys_path("class/block");
    let names = dir_names(&class).map_err(|e| SysfsError(format!("{}: {e}", class.display())))?;
    let mut found = Vec::new();
    for name in names.into_iter().filter(|n| is_loop_name(n)) {
        let dir = class.join(&name);
        let backing_path = match read_attr(&dir.join("loop/backing_file")) {
            Ok(path) => path,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                let what = format!("cannot read {}: {e}", dir.join("loop/backing_file").display());
                let backing = Err(what);
                found.push(LoopDevice { name, num: None, backing_path: String::new(), backing, path_current: false });
                continue;
            }
        };
        let num = read_attr(&dir.join("dev")).ok().and_then(|t| DevNum::parse(&t));
        let backing = backing_of(host, &name, &backing_path);
        let here =
            host.identify(std::path::Path::new(backing_path.strip_suffix(" (deleted)").unwrap_or(&backing_path)));
        let path_current = matches!((&backing, here), (Ok(b), Ok(h)) if *b == h);
        found.push(LoopDevice { name, num, backing_path, backing, path_current });
    }
    Ok(found)
}

fn is_loop_name(name: &str) -> bool {
    name.strip_prefix("loop").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// What backs `name`: the kernel's answer through its node, else the path's file.
fn backing_of(host: &Host, name: &str, path: &str) -> Result<FileIdentity, String> {
    let by_ioctl = if host.is_fake() { Err("a fake tree has no loop driver".to_string()) } else { status(host, name) };
    by_ioctl.or_else(|ioctl_error| {
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        host.identify(std::path::Path::new(path))
            .map_err(|e| format!("LOOP_GET_STATUS64 on /dev/{name}: {ioctl_error}; its backing file {path}: {e}"))
    })
}

/// `LOOP_GET_STATUS64` on `/dev/NAME`, opened read-only (nothing is changed).
fn status(host: &Host, name: &str) -> Result<FileIdentity, String> {
    let node = host.node_path(name);
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
        .open(&node)
        .map_err(|e| format!("cannot open {}: {e}", node.display()))?;
    // SAFETY: zeroed is a valid value of the plain-integer structure the ioctl fills.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open and `info` is the structure the request expects.
    unsafe { loop_get_status64(file.as_raw_fd(), &mut info) }.map_err(|e| e.desc().to_string())?;
    Ok(if info.lo_rdevice != 0 {
        FileIdentity::Node(DevNode { kind: NodeKind::Block, num: DevNum::from_dev_t(info.lo_rdevice) })
    } else {
        FileIdentity::OnFilesystem(DevNum::from_dev_t(info.lo_device))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_names() {
        assert!(is_loop_name("loop0") && is_loop_name("loop12"));
        assert!(!is_loop_name("loop") && !is_loop_name("loop0p1") && !is_loop_name("loop-control"));
    }
}
