//! The NVMe passthrough ioctls of the Linux driver (UAPI `include/uapi/linux/nvme_ioctl.h`,
//! read for the layout only): the command structures, their request numbers, and the
//! [`Passthrough`] seam that [`super::LinuxDevice`] sends through (the kernel, or a fake
//! in tests).
//!
//! An ioctl returns 0 on success, a positive NVMe status (the CQE Status Field without
//! the Phase Tag: SC, SCT, CRD, More, DNR) when the controller — or the driver on its
//! behalf — completed the command with an error, and -1 with errno when the driver did
//! not get a completion from the drive (EINTR: the command timed out and was aborted, or
//! the controller was reset under it).

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use super::sysfs::Host;

/// `struct nvme_passthru_cmd` (72 bytes): one admin or I/O command and its buffers.
/// `result` receives completion DW0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PassthruCmd {
    pub opcode: u8,
    /// Must be 0: the driver rejects any flag (FUSE, PSDT) with EINVAL.
    pub flags: u8,
    pub rsvd1: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    /// Address of the separate metadata buffer in this process.
    pub metadata: u64,
    /// Address of the data buffer in this process.
    pub addr: u64,
    pub metadata_len: u32,
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    /// 0 means the driver's default (admin_timeout / io_timeout).
    pub timeout_ms: u32,
    /// Completion DW0.
    pub result: u32,
}
crate::assert_size!(PassthruCmd, 72);

/// `struct nvme_passthru_cmd64` (80 bytes): as [`PassthruCmd`], with a 64-bit result
/// (completion DW0 in the low half, DW1 in the high half).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, zerocopy::IntoBytes, zerocopy::Immutable)]
#[repr(C)]
pub struct PassthruCmd64 {
    pub opcode: u8,
    pub flags: u8,
    pub rsvd1: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    pub metadata: u64,
    pub addr: u64,
    pub metadata_len: u32,
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    pub timeout_ms: u32,
    pub rsvd2: u32,
    /// Completion DW0 (bits 31:0) and DW1 (bits 63:32).
    pub result: u64,
}
crate::assert_size!(PassthruCmd64, 80);

impl PassthruCmd64 {
    /// The 72-byte form, for kernels without the 64-bit ioctls (before Linux 5.4).
    pub fn to_32(&self) -> PassthruCmd {
        PassthruCmd {
            opcode: self.opcode,
            flags: self.flags,
            rsvd1: self.rsvd1,
            nsid: self.nsid,
            cdw2: self.cdw2,
            cdw3: self.cdw3,
            metadata: self.metadata,
            addr: self.addr,
            metadata_len: self.metadata_len,
            data_len: self.data_len,
            cdw10: self.cdw10,
            cdw11: self.cdw11,
            cdw12: self.cdw12,
            cdw13: self.cdw13,
            cdw14: self.cdw14,
            cdw15: self.cdw15,
            timeout_ms: self.timeout_ms,
            result: 0,
        }
    }
}

/// The ioctl type letter of the NVMe driver.
pub const NVME_IOCTL_TYPE: u8 = b'N';
/// Request numbers (`_IOWR('N', nr, struct)` or `_IO('N', nr)`).
pub mod nr {
    pub const ADMIN_CMD: u8 = 0x41;
    pub const IO_CMD: u8 = 0x43;
    pub const RESET: u8 = 0x44;
    pub const SUBSYS_RESET: u8 = 0x45;
    pub const RESCAN: u8 = 0x46;
    pub const ADMIN64_CMD: u8 = 0x47;
    pub const IO64_CMD: u8 = 0x48;
}

nix::ioctl_readwrite!(nvme_ioctl_admin_cmd, NVME_IOCTL_TYPE, nr::ADMIN_CMD, PassthruCmd);
nix::ioctl_readwrite!(nvme_ioctl_io_cmd, NVME_IOCTL_TYPE, nr::IO_CMD, PassthruCmd);
nix::ioctl_readwrite!(nvme_ioctl_admin64_cmd, NVME_IOCTL_TYPE, nr::ADMIN64_CMD, PassthruCmd64);
nix::ioctl_readwrite!(nvme_ioctl_io64_cmd, NVME_IOCTL_TYPE, nr::IO64_CMD, PassthruCmd64);
nix::ioctl_none!(nvme_ioctl_rescan, NVME_IOCTL_TYPE, nr::RESCAN);
nix::ioctl_none!(nvme_ioctl_reset, NVME_IOCTL_TYPE, nr::RESET);

/// Where [`super::LinuxDevice`] sends commands. The return value is the ioctl's: 0, or
/// a positive NVMe status; an `Err` is the errno.
pub trait Passthrough {
    /// An admin command on the controller's character device.
    fn admin(&mut self, cmd: &mut PassthruCmd64) -> Result<i32, Errno>;
    /// An I/O command on a namespace's generic character device `node`.
    fn io(&mut self, node: &Path, cmd: &mut PassthruCmd64) -> Result<i32, Errno>;
    /// NVME_IOCTL_RESCAN on the controller: the driver re-reads the namespace list.
    fn rescan(&mut self) -> Result<(), Errno>;
    /// NVME_IOCTL_RESET on the controller: the driver resets it (Controller Reset and
    /// its own re-initialisation) and returns when that is done.
    fn reset(&mut self) -> Result<(), Errno>;
    /// Closes the namespace devices it keeps open (namespaces were deleted or created:
    /// an open device may now stand for a namespace that is gone).
    fn forget_namespaces(&mut self) {}
}

/// The kernel: the controller's character device, and the generic namespace devices
/// opened on first use (read-write: the driver sends a command that writes only through
/// a device opened for writing).
pub struct Kernel {
    host: Host,
    controller: File,
    namespaces: HashMap<PathBuf, File>,
    /// Whether the 64-bit ioctls exist (Linux 5.4 and later); learnt from ENOTTY.
    wide: bool,
}

impl Kernel {
    pub fn new(host: Host, controller: File) -> Kernel {
        Kernel { host, controller, namespaces: HashMap::new(), wide: true }
    }

    fn namespace_fd(&mut self, node: &Path) -> Result<i32, Errno> {
        if let Some(file) = self.namespaces.get(node) {
            return Ok(file.as_raw_fd());
        }
        let file = self.host.open_rw(node).map_err(|e| e.raw_os_error().map(Errno::from_raw).unwrap_or(Errno::EIO))?;
        let fd = file.as_raw_fd();
        self.namespaces.insert(node.to_path_buf(), file);
        Ok(fd)
    }

    fn send(&mut self, fd: i32, cmd: &mut PassthruCmd64, io: bool) -> Result<i32, Errno> {
        if self.wide {
            // SAFETY: `cmd` is a valid, exclusively borrowed PassthruCmd64 for the whole
            // call; the buffers its addr/metadata fields point to were checked by the
            // caller to be live for their lengths, writable when the opcode's direction
            // makes the driver write them.
            let result = unsafe {
                if io {
                    nvme_ioctl_io64_cmd(fd, cmd)
                } else {
                    nvme_ioctl_admin64_cmd(fd, cmd)
                }
            };
            match result {
                Err(Errno::ENOTTY) => self.wide = false,
                other => return other,
            }
        }
        let mut narrow = cmd.to_32();
        // SAFETY: as above, with the 72-byte structure.
        let result = unsafe {
            if io {
                nvme_ioctl_io_cmd(fd, &mut narrow)
            } else {
                nvme_ioctl_admin_cmd(fd, &mut narrow)
            }
        };
        cmd.result = narrow.result as u64;
        result
    }
}

impl Passthrough for Kernel {
    fn admin(&mut self, cmd: &mut PassthruCmd64) -> Result<i32, Errno> {
        let fd = self.controller.as_raw_fd();
        self.send(fd, cmd, false)
    }

    fn io(&mut self, node: &Path, cmd: &mut PassthruCmd64) -> Result<i32, Errno> {
        let fd = self.namespace_fd(node)?;
        self.send(fd, cmd, true)
    }

    fn rescan(&mut self) -> Result<(), Errno> {
        // SAFETY: an argument-less ioctl on an open file descriptor.
        unsafe { nvme_ioctl_rescan(self.controller.as_raw_fd()) }.map(|_| ())
    }

    fn reset(&mut self) -> Result<(), Errno> {
        // SAFETY: an argument-less ioctl on an open file descriptor.
        unsafe { nvme_ioctl_reset(self.controller.as_raw_fd()) }.map(|_| ())
    }

    fn forget_namespaces(&mut self) {
        self.namespaces.clear();
    }
}
