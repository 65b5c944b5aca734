//! Where a report goes (`--junit PATH`, `--json PATH`), and how it is written there
//! without destroying what the path names. nvtest runs as root on machines with real
//! drives, so a path is written by what it is:
//!
//! - `-` is standard output: the report is written there after the run, and the console
//!   goes to standard error for the whole run so the report stays whole;
//! - a character device or a FIFO (`/dev/null`, `/dev/stdout`, a named pipe, `>(cmd)`) is
//!   written in place, never replaced;
//! - a regular file, or a path where nothing is yet, is replaced atomically: a temporary
//!   file beside it, synced, then renamed over it, so a reader never sees half a report;
//! - a symbolic link is followed (to its last target) and that target judged as above;
//! - anything else (a directory, a block device, a socket) is refused before any target
//!   is opened.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How many symbolic links a path may go through (as the kernel's own limit, ELOOP).
const MAX_LINKS: usize = 40;

/// Where a report goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// `-`: standard output.
    Stdout,
    /// A character device or a FIFO, written in place (the path as given: `/dev/fd/N`
    /// names a pipe only through its link).
    InPlace(PathBuf),
    /// A regular file, or nothing yet: replaced atomically; the path with its links followed.
    File(PathBuf),
}

/// Judges `path` for the `what` (e.g. "JUnit report"): where and how it is written, or
/// why it cannot be. Creates nothing. The error is one line.
pub fn destination(path: &Path, what: &str) -> Result<Destination, String> {
    if path.as_os_str() == "-" {
        return Ok(Destination::Stdout);
    }
    let cannot = |why: String| format!("cannot write the {what} {}: {why}", path.display());
    let resolved = follow_links(path).map_err(cannot)?;
    match std::fs::metadata(&resolved) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Destination::File(resolved)),
        Err(e) => Err(cannot(e.to_string())),
        Ok(m) if m.is_file() => Ok(Destination::File(resolved)),
        Ok(m) if m.file_type().is_char_device() || m.file_type().is_fifo() => Ok(Destination::InPlace(path.into())),
        Ok(m) => {
            let kind = if m.is_dir() {
                "a directory"
            } else if m.file_type().is_block_device() {
                "a block device"
            } else if m.file_type().is_socket() {
                "a socket"
            } else {
                "not a regular file"
            };
            Err(cannot(format!(
                "it is {kind}; a report is written to a regular file (replaced whole), a character device or a FIFO \
                 (written in place), or `-` (standard output)"
            )))
        }
    }
}

/// Follows `path`'s symbolic links (its last component's, as often as they chain) to the
/// path they end at, existing or not. A link into `/proc` that names no path (a pipe's
/// `pipe:[N]`) is kept as given.
fn follow_links(path: &Path) -> Result<PathBuf, String> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let link = match std::fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => std::fs::read_link(&current).map_err(|e| e.to_string())?,
            _ => return Ok(current),
        };
        if !link.is_absolute()
            && link.components().next().is_some_and(|c| c.as_os_str().to_string_lossy().contains(':'))
        {
            // `/proc/self/fd/N -> pipe:[123]`: the kernel opens it, no path does.
            return Ok(current);
        }
        current = match current.parent() {
            Some(dir) if link.is_relative() => dir.join(link),
            _ => link,
        };
    }
    Err(format!("more than {MAX_LINKS} symbolic links"))
}

/// Why the run's report paths cannot be used; each says it in one line.
#[derive(Debug, PartialEq, Eq)]
pub enum ReportPathError {
    /// `--junit` and `--json` name the same file: a usage error.
    SameFile(String),
    /// A path [`check_writable`] refuses.
    Unwritable(String),
}

impl std::fmt::Display for ReportPathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportPathError::SameFile(line) | ReportPathError::Unwritable(line) => f.write_str(line),
        }
    }
}

/// The run's report paths judged before any target opens (or guest boots): `--junit`
/// and `--json` must not name the same file, and each must be a path
/// [`check_writable`] accepts.
pub fn check_report_paths(junit: Option<&Path>, json: Option<&Path>) -> Result<(), ReportPathError> {
    if let (Some(a), Some(b)) = (junit, json) {
        if a == b {
            return Err(ReportPathError::SameFile(format!("--junit and --json name the same file {}", a.display())));
        }
    }
    for (path, what) in [(junit, "JUnit report"), (json, "JSON record")] {
        if let Some(path) = path {
            check_writable(path, what).map_err(ReportPathError::Unwritable)?;
        }
    }
    Ok(())
}

/// Checks, before any target is opened, that the report can be written where `path`
/// says: a regular file's directory is created and a file created and removed there; a
/// device or FIFO must be writable by this process (not opened: a FIFO's reader would see
/// its end). The error is one line.
pub fn check_writable(path: &Path, what: &str) -> Result<(), String> {
    let cannot = |why: String| format!("cannot write the {what} {}: {why}", path.display());
    match destination(path, what)? {
        Destination::Stdout => Ok(()),
        Destination::InPlace(p) => {
            nix::unistd::access(&p, nix::unistd::AccessFlags::W_OK).map_err(|e| cannot(e.desc().to_string()))
        }
        Destination::File(p) => {
            let probe = temp_path(&p).map_err(|e| cannot(e.to_string()))?;
            let created =
                probe.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| File::create(&probe).map(drop));
            let _ = std::fs::remove_file(&probe);
            created.map_err(|e| cannot(e.to_string()))
        }
    }
}

/// Writes `bytes` as the `what` to where `path` says ([`destination`]); the error is one
/// line naming the path and the system's reason (`/dev/full`: no space left on device).
pub fn write(path: &Path, what: &str, bytes: &[u8]) -> Result<(), String> {
    let cannot = |e: std::io::Error| format!("cannot write the {what} {}: {e}", path.display());
    match destination(path, what)? {
        Destination::Stdout => write_stdout(bytes).map_err(cannot),
        Destination::InPlace(p) => OpenOptions::new()
            .write(true)
            .open(&p)
            .and_then(|mut f| f.write_all(bytes).and_then(|()| f.flush()))
            .map_err(cannot),
        Destination::File(p) => write_atomically(&p, bytes).map_err(cannot),
    }
}

/// The temporary file a report is written to before its rename.
fn temp_path(path: &Path) -> std::io::Result<PathBuf> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path.file_name().ok_or_else(|| std::io::Error::other("the path names no file"))?;
    Ok(dir.join(format!(".{}.{}.tmp", file_name.to_string_lossy(), std::process::id())))
}

/// Writes `bytes` to a temporary file beside `path`, then renames it to `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = temp_path(path)?;
    if let Some(dir) = temp.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let written = (|| {
        let mut file = File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// The process's standard output as it was before [`console_to_stderr`] moved it aside.
static REPORT_STDOUT: Mutex<Option<OwnedFd>> = Mutex::new(None);

/// A report goes to `-`: keeps the process's standard output for it and points file
/// descriptor 1 at standard error, so everything the console prints (libtest-mimic's
/// lines, progress, summaries) goes there and the report alone reaches standard output.
/// For the binary's run (the process's descriptors are changed); a second call is a no-op.
pub fn console_to_stderr() -> std::io::Result<()> {
    let mut saved = REPORT_STDOUT.lock().unwrap_or_else(|e| e.into_inner());
    if saved.is_some() {
        return Ok(());
    }
    std::io::stdout().flush()?;
    let stdout = std::io::stdout();
    let original = {
        use std::os::fd::AsFd;
        stdout.as_fd().try_clone_to_owned()?
    };
    // SAFETY: dup2 on the process's own descriptors 2 and 1, which stay open; no Rust
    // object owns descriptor 1 (std's Stdout only writes to it), so none is invalidated.
    if unsafe { nix::libc::dup2(2, 1) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    *saved = Some(original);
    Ok(())
}

/// Writes to the standard output kept by [`console_to_stderr`], else to the process's.
fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    let saved = REPORT_STDOUT.lock().unwrap_or_else(|e| e.into_inner());
    match saved.as_ref() {
        Some(fd) => {
            let mut file = File::from(fd.try_clone()?);
            file.write_all(bytes)?;
            file.flush()
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes)?;
            out.flush()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_device_is_written_in_place_and_keeps_its_node() {
        let before = std::fs::metadata("/dev/null").unwrap();
        assert_eq!(destination(Path::new("/dev/null"), "JUnit report"), Ok(Destination::InPlace("/dev/null".into())));
        write(Path::new("/dev/null"), "JUnit report", b"<testsuites/>").unwrap();
        let after = std::fs::metadata("/dev/null").unwrap();
        assert!(after.file_type().is_char_device());
        assert_eq!(std::os::unix::fs::MetadataExt::rdev(&before), std::os::unix::fs::MetadataExt::rdev(&after));
    }

    #[test]
    fn a_full_device_reports_the_write_error_and_stays_a_device() {
        if !Path::new("/dev/full").exists() {
            return;
        }
        let error = write(Path::new("/dev/full"), "JUnit report", b"<testsuites/>").unwrap_err();
        assert!(error.starts_with("cannot write the JUnit report /dev/full: "), "{error}");
        assert!(error.contains("No space left"), "{error}");
        assert!(std::fs::metadata("/dev/full").unwrap().file_type().is_char_device());
    }

    #[test]
    fn a_fifo_is_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        check_writable(&fifo, "JSON record").unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write(&fifo, "JSON record", b"{}\n").unwrap();
        assert_eq!(reader.join().unwrap(), b"{}\n");
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn a_symlink_is_followed_and_its_target_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("deep/real.xml");
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.xml");
        std::os::unix::fs::symlink("deep/real.xml", &link).unwrap();
        write(&link, "JUnit report", b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        // A dangling link is followed too: its target is created.
        let dangling = dir.path().join("dangling.xml");
        std::os::unix::fs::symlink(dir.path().join("made.xml"), &dangling).unwrap();
        write(&dangling, "JUnit report", b"made").unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("made.xml")).unwrap(), "made");
    }

    #[test]
    fn a_regular_file_is_replaced_whole_and_nothing_else_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reports/r.json");
        write(&path, "JSON record", b"one").unwrap();
        write(&path, "JSON record", b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> =
            std::fs::read_dir(path.parent().unwrap()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, [std::ffi::OsString::from("r.json")]);
    }

    #[test]
    fn a_directory_a_block_device_and_a_socket_are_refused_naming_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let error = check_writable(dir.path(), "JUnit report").unwrap_err();
        assert!(error.contains("it is a directory"), "{error}");
        let socket = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let error = check_writable(&socket, "JUnit report").unwrap_err();
        assert!(error.contains("it is a socket"), "{error}");
        // A block device node of its own (a loop device's numbers; root may make one).
        let block = dir.path().join("block");
        let kind = nix::sys::stat::SFlag::S_IFBLK;
        if nix::sys::stat::mknod(&block, kind, nix::sys::stat::Mode::S_IRWXU, nix::sys::stat::makedev(7, 0)).is_ok() {
            let error = check_writable(&block, "JUnit report").unwrap_err();
            assert!(error.contains("it is a block device"), "{error}");
        }
    }

    #[test]
    fn a_link_loop_is_an_error_line() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("b")).unwrap();
        let error = destination(&a, "JSON record").unwrap_err();
        assert!(error.contains("symbolic links"), "{error}");
    }
}
