//! The host under QEMU: enough free space before a machine starts, and, while it runs,
//! the faults of this machine that QEMU's controller would otherwise pass on to nvtest
//! as the drive's (a full disk under the images completes writes with Write Fault).
//!
//! Measured on QEMU 10.0.2 with the images on a full tmpfs: hw/nvme completes the
//! write with Write Fault (SCT 2h, SC 80h), prints
//! `qemu-system-x86_64: aio failed: No space left on device` on stderr, sends no QMP
//! event (no BLOCK_IO_ERROR: nvme-ns has no werror/rerror and never stops the VM;
//! `query-status` stays `prelaunch`) and goes on serving commands. So QEMU's stderr
//! ([`super::stderr`]) is where a host fault shows, beside the images themselves.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::device::HostFault;
use crate::transport::TransportError;

use super::stderr::StderrLog;

/// The free space the images' filesystem needs before QEMU starts, at most: images are
/// sparse, so their full size is rarely used, but a run writes a good part of it.
pub(crate) const IMAGE_SPACE_CAP: u64 = 256 << 20;
/// Where the guest RAM file goes.
pub(crate) const SHM_DIR: &str = "/dev/shm";
/// glibc's texts (QEMU runs with `LC_ALL=C`) for the errors that mean the filesystem
/// is full: ENOSPC and EDQUOT.
const NO_SPACE: [&str; 2] = ["No space left on device", "Disk quota exceeded"];

/// Bytes an unprivileged writer may still use on the filesystem holding `path`.
pub(crate) fn free_bytes(path: &Path) -> Result<u64, nix::Error> {
    let stat = nix::sys::statvfs::statvfs(path)?;
    Ok(stat.blocks_available() as u64 * stat.fragment_size() as u64)
}

/// "64.0 MiB (67108864 bytes)", or "0 bytes" below 1 KiB.
fn bytes_text(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    format!("{} ({bytes} bytes)", short_bytes(bytes))
}

/// "64.0 MiB", "18.0 GiB", "512 bytes".
fn short_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let (mut value, mut unit) = (bytes as f64 / 1024.0, UNITS[0]);
    for next in &UNITS[1..] {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    format!("{value:.1} {unit}")
}

/// Checks, before anything is created, that the images' directory `images_dir` (the
/// temporary directory) has `min(image_bytes, IMAGE_SPACE_CAP)` free and `shm_dir` the
/// guest RAM's `ram_bytes`. The error is one line naming the directory, what is free
/// and what is needed.
pub(crate) fn check_free_space(
    images_dir: &Path,
    image_bytes: u64,
    shm_dir: &Path,
    ram_bytes: u64,
) -> Result<(), TransportError> {
    check_image_space(images_dir, image_bytes)?;
    let ram = Need {
        what: "the guest RAM needs",
        bytes: ram_bytes,
        note: "machine.memory_mb, all of it shared with nvtest".to_owned(),
        instead: "lower machine.memory_mb in the topology",
    };
    ram.check(shm_dir, "shared memory")
}

/// Checks, before anything is created, that the images' directory `images_dir` (the
/// temporary directory) has `min(image_bytes, IMAGE_SPACE_CAP)` free: for a machine
/// nvtest drives itself ([`check_free_space`]) and for one that runs a Linux guest.
pub fn check_image_space(images_dir: &Path, image_bytes: u64) -> Result<(), TransportError> {
    let need_images = image_bytes.min(IMAGE_SPACE_CAP);
    if need_images == 0 {
        return Ok(());
    }
    let images = Need {
        what: "QEMU's disk images need",
        bytes: need_images,
        note: format!(
            "sparse, {} in all: nvtest asks for that or {}, whichever is less",
            short_bytes(image_bytes),
            short_bytes(IMAGE_SPACE_CAP)
        ),
        instead: "point TMPDIR elsewhere",
    };
    images.check(images_dir, "the temporary directory, TMPDIR")
}

/// The host faults QEMU's stderr `lines` report on its disk images (each distinct error
/// once, with how often), said with the free space of `tmp_dir` (TMPDIR, where the
/// images are): for a machine that runs a Linux guest, whose stderr nvtest reads
/// whole once the guest ends ([`FaultWatch`] follows a machine nvtest drives itself).
pub fn image_faults(lines: &[String], tmp_dir: &Path) -> Vec<HostFault> {
    count_repeats(lines.iter().filter_map(|l| io_error(l))).map(|(text, n)| io_fault(text, n, tmp_dir)).collect()
}

/// Free space something needs before QEMU starts.
struct Need {
    /// Who needs it, with the verb: "the guest RAM needs".
    what: &'static str,
    bytes: u64,
    /// Why that much, in brackets after the figure.
    note: String,
    /// What else the user can do than free space.
    instead: &'static str,
}

impl Need {
    /// Checks the filesystem of `dir` (whose `role` is said in brackets).
    fn check(&self, dir: &Path, role: &str) -> Result<(), TransportError> {
        let free = free_bytes(dir).map_err(|e| {
            TransportError::Other(format!("cannot tell the free space in {} ({role}): {e}", dir.display()))
        })?;
        if free >= self.bytes {
            return Ok(());
        }
        Err(TransportError::Other(format!(
            "not enough free space to start QEMU: {} ({role}) has {} free, {} {} ({}) — free space there or {}",
            dir.display(),
            bytes_text(free),
            self.what,
            bytes_text(self.bytes),
            self.note,
            self.instead
        )))
    }
}

/// What has been reported of one machine's host faults, so each is reported once.
#[derive(Default)]
pub(crate) struct FaultWatch {
    /// Lines of QEMU's stderr already looked at.
    stderr_cursor: u64,
    /// Images already reported as gone.
    gone: BTreeSet<PathBuf>,
}

impl FaultWatch {
    /// Host faults since the last call: QEMU's I/O errors on its images (from its
    /// stderr) and images that no longer exist. `tmp_dir` is TMPDIR, where the images
    /// are (most of them unlinked once QEMU has them open); `images` are those that
    /// should still have a name.
    pub(crate) fn take(&mut self, stderr: &StderrLog, tmp_dir: &Path, images: &[PathBuf]) -> Vec<HostFault> {
        let dir = tmp_dir;
        let lines = stderr.lines_since(&mut self.stderr_cursor);
        let mut faults: Vec<HostFault> =
            count_repeats(lines.iter().filter_map(|l| io_error(l))).map(|(text, n)| io_fault(text, n, dir)).collect();
        let newly_gone: Vec<&PathBuf> =
            images.iter().filter(|p| !self.gone.contains(*p) && std::fs::symlink_metadata(p).is_err()).collect();
        if let Some(first) = newly_gone.first() {
            faults.push(gone_fault(first, newly_gone.len() - 1));
        }
        self.gone.extend(newly_gone.into_iter().cloned());
        faults
    }
}

/// The error text of a stderr line in which QEMU's NVMe device reports a failed I/O on
/// its image ("qemu-system-x86_64: aio failed: No space left on device" gives
/// "aio failed: No space left on device").
fn io_error(line: &str) -> Option<&str> {
    line.find("aio failed:").map(|at| line[at..].trim_end())
}

/// Each distinct text once, in order of first appearance, with how often it came.
fn count_repeats<'a>(texts: impl Iterator<Item = &'a str>) -> impl Iterator<Item = (&'a str, usize)> {
    let mut counted: Vec<(&str, usize)> = Vec::new();
    for text in texts {
        match counted.iter_mut().find(|(t, _)| *t == text) {
            Some((_, n)) => *n += 1,
            None => counted.push((text, 1)),
        }
    }
    counted.into_iter()
}

/// The directory's free space, said for a fault message (the filesystem of its parent
/// when the directory itself is gone).
fn free_text(dir: &Path) -> String {
    let measured = free_bytes(dir).or_else(|e| dir.parent().map_or(Err(e), free_bytes));
    match measured {
        Ok(0) => "0 bytes free".to_owned(),
        Ok(free) => format!("{} free", bytes_text(free)),
        Err(e) => format!("an unknown free space ({e})"),
    }
}

fn io_fault(text: &str, times: usize, dir: &Path) -> HostFault {
    let ends_run = NO_SPACE.iter().any(|cause| text.contains(cause));
    let times = if times > 1 { format!(" ({times} times)") } else { String::new() };
    let remedy = if ends_run {
        "free space there or point TMPDIR elsewhere".to_owned()
    } else {
        format!("check the filesystem holding {} (the kernel log says more)", dir.display())
    };
    HostFault {
        message: format!(
            "the host failed QEMU's disk images: `{text}`{times}; {} (TMPDIR, where the images are) has {} on its \
             filesystem — a fault of this machine, not of the drive: {remedy}",
            dir.display(),
            free_text(dir)
        ),
        ends_run,
    }
}

fn gone_fault(first: &Path, more: usize) -> HostFault {
    let more = if more > 0 { format!(" and {more} more of its images") } else { String::new() };
    let dir_state = if first.parent().is_none_or(Path::exists) { "" } else { " (the images' directory is gone too)" };
    HostFault {
        message: format!(
            "the host removed QEMU's disk image {}{more} while QEMU used it{dir_state}: something on this machine deletes \
             files in TMPDIR (a temporary-file cleaner?) — a fault of this machine, not of the drive: keep it away from \
             nvtest-qemu-* or point TMPDIR elsewhere",
            first.display()
        ),
        ends_run: false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::stderr::tests::log_of;
    use super::*;

    #[test]
    fn sizes_read_as_units_and_bytes() {
        assert_eq!(bytes_text(0), "0 bytes");
        assert_eq!(bytes_text(64 << 20), "64.0 MiB (67108864 bytes)");
        assert_eq!(bytes_text(18 << 30), "18.0 GiB (19327352832 bytes)");
    }

    #[test]
    fn too_little_space_names_the_directory_what_is_free_and_what_is_needed() {
        let dir = tempfile::tempdir().unwrap();
        check_free_space(dir.path(), 1 << 20, dir.path(), 1 << 20).unwrap();
        // More than any filesystem here has: the RAM's need is not capped.
        let e = check_free_space(dir.path(), 0, dir.path(), u64::MAX).unwrap_err().to_string();
        let free = free_bytes(dir.path()).unwrap();
        let start = format!("not enough free space to start QEMU: {} (shared memory) has ", dir.path().display());
        assert!(e.starts_with(&start), "{e}");
        assert!(e.contains(&format!("({free} bytes) free, the guest RAM needs ")), "{e}");
        assert!(e.ends_with("(machine.memory_mb, all of it shared with nvtest) — free space there or lower machine.memory_mb in the topology"), "{e}");
        let e = check_free_space(Path::new("/nonexistent/tmp"), 1, dir.path(), 0).unwrap_err().to_string();
        assert!(
            e.starts_with("cannot tell the free space in /nonexistent/tmp (the temporary directory, TMPDIR): "),
            "{e}"
        );
    }

    #[test]
    fn aio_errors_are_host_faults_counted_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("ns1.img");
        std::fs::write(&image, b"").unwrap();
        let log = log_of(
            "echo 'qemu-system-x86_64: aio failed: No space left on device' >&2; \
             echo 'qemu-system-x86_64: warning: something else' >&2; \
             echo 'qemu-system-x86_64: aio failed: No space left on device' >&2; \
             echo 'qemu-system-x86_64: aio failed: Input/output error' >&2",
        );
        let mut watch = FaultWatch::default();
        let faults = watch.take(&log, dir.path(), std::slice::from_ref(&image));
        assert_eq!(faults.len(), 2, "{faults:?}");
        assert!(faults[0].ends_run && !faults[1].ends_run);
        let expected = format!(
            "the host failed QEMU's disk images: `aio failed: No space left on device` (2 times); {} (TMPDIR, where \
             the images are) has ",
            dir.path().display()
        );
        assert!(faults[0].message.starts_with(&expected), "{}", faults[0].message);
        assert!(faults[0].message.ends_with("not of the drive: free space there or point TMPDIR elsewhere"));
        assert!(faults[1].message.contains("`aio failed: Input/output error`; "), "{}", faults[1].message);
        assert_eq!(watch.take(&log, dir.path(), std::slice::from_ref(&image)), Vec::new());
    }

    #[test]
    fn a_removed_image_is_a_host_fault_once() {
        let dir = tempfile::tempdir().unwrap();
        let images: Vec<PathBuf> = (1..=3).map(|n| dir.path().join(format!("ns{n}.img"))).collect();
        for image in &images {
            std::fs::write(image, b"").unwrap();
        }
        let log = StderrLog::empty();
        let mut watch = FaultWatch::default();
        std::fs::remove_file(&images[1]).unwrap();
        std::fs::remove_file(&images[2]).unwrap();
        let faults = watch.take(&log, dir.path(), &images);
        assert_eq!(faults.len(), 1, "{faults:?}");
        let expected =
            format!("the host removed QEMU's disk image {} and 1 more of its images while", images[1].display());
        assert!(faults[0].message.starts_with(&expected) && !faults[0].ends_run, "{}", faults[0].message);
        assert_eq!(watch.take(&log, dir.path(), &images), Vec::new());
    }
}
