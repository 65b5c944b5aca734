//! Names of a machine's files that say whose they are, and the sweep that removes the
//! files of runs that died by SIGKILL (which no handler sees).
//!
//! A machine's files are named `nvtest-qemu-<pid>-<random>`: its directory in TMPDIR
//! ([`RunDir`], holding a file `lock`) and its guest-RAM file in /dev/shm
//! ([`shm_file`], suffix `.ram`). The owner holds an advisory `flock` for as long as the
//! name exists: on `lock` for the directory, on the RAM file itself. The kernel drops
//! the lock when the owner dies, however it dies.
//!
//! [`sweep`] runs before every machine starts and removes an entry only when its lock
//! can be taken, so never a live run's (two nvtest runs at once are normal). The short
//! moment between creating an entry and locking it is covered by the pid in the name:
//! an unlocked entry whose pid is alive is left alone unless it is older than
//! [`STARTING_BOUND`] (then its pid is a reused one). Entries of older naming schemes
//! (`nvtest-qemu-<random>`, `/dev/shm/nvtest-<random>`) have no pid and are never
//! touched: nothing tells whether their run still lives.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The start of every name of this scheme.
const PREFIX: &str = "nvtest-qemu-";
/// The lock file inside a run directory.
const LOCK_NAME: &str = "lock";
/// The suffix of a guest-RAM file.
const RAM_SUFFIX: &str = ".ram";
/// Longer than any gap between creating an entry and locking it (microseconds).
const STARTING_BOUND: Duration = Duration::from_secs(60);

/// `nvtest-qemu-<our pid>-`, the prefix of our own entries (the random rest follows).
fn own_prefix() -> String {
    format!("{PREFIX}{}-", std::process::id())
}

/// Takes an exclusive advisory lock on `file` without waiting; false if someone holds it.
fn try_lock(file: &File) -> bool {
    // SAFETY: plain syscall on an open file descriptor.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

fn lock_or_error(file: &File, path: &Path) -> io::Result<()> {
    if try_lock(file) {
        Ok(())
    } else {
        Err(io::Error::other(format!("cannot lock {}: {}", path.display(), io::Error::last_os_error())))
    }
}

/// A machine's directory in TMPDIR, locked by this process until it is dropped, which
/// removes it (before releasing the lock).
pub(crate) struct RunDir {
    // Field order is drop order: the directory goes while the lock is still held.
    dir: tempfile::TempDir,
    _lock: File,
}

impl RunDir {
    /// Creates `nvtest-qemu-<pid>-<random>` in `parent` with its lock file, locked.
    pub(crate) fn create_in(parent: &Path) -> io::Result<RunDir> {
        let dir = tempfile::Builder::new().prefix(&own_prefix()).tempdir_in(parent)?;
        let path = dir.path().join(LOCK_NAME);
        let lock = File::create(&path)?;
        lock_or_error(&lock, &path)?;
        Ok(RunDir { dir, _lock: lock })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Creates the guest-RAM file `nvtest-qemu-<pid>-<random>.ram` in `dir`, locked by this
/// process for as long as the returned file is open.
pub(crate) fn shm_file(dir: &Path) -> io::Result<tempfile::NamedTempFile> {
    let file = tempfile::Builder::new().prefix(&own_prefix()).suffix(RAM_SUFFIX).tempfile_in(dir)?;
    lock_or_error(file.as_file(), file.path())?;
    Ok(file)
}

/// The pid in a name of this scheme (`nvtest-qemu-<pid>-…`), if it is one.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, random) = rest.split_once('-')?;
    if random.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether an unlocked entry may be one whose owner is still creating it.
fn may_be_starting(pid: u32, path: &Path) -> bool {
    let young = std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .map(|at| SystemTime::now().duration_since(at).map_or(true, |age| age < STARTING_BOUND))
        .unwrap_or(true);
    pid_alive(pid) && young
}

/// What [`sweep`] removed, for tests and diagnostics.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Swept {
    pub(crate) dirs: Vec<PathBuf>,
    pub(crate) shm_files: Vec<PathBuf>,
}

/// Removes the run directories in `tmp_dir` and the guest-RAM files in `shm_dir` of
/// runs that are dead (see the module documentation). Errors are ignored: a sweep is
/// housekeeping and never stops a machine from starting.
pub(crate) fn sweep(tmp_dir: &Path, shm_dir: &Path) -> Swept {
    let mut swept = Swept::default();
    for (path, pid) in candidates(tmp_dir) {
        if sweep_dir(&path, pid) {
            swept.dirs.push(path);
        }
    }
    for (path, pid) in candidates(shm_dir) {
        if path.to_string_lossy().ends_with(RAM_SUFFIX) && sweep_shm(&path, pid) {
            swept.shm_files.push(path);
        }
    }
    swept
}

/// Entries of `dir` named by this scheme, with their owner's pid; never our own.
fn candidates(dir: &Path) -> Vec<(PathBuf, u32)> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = owner_pid(e.file_name().to_str()?)?;
            (pid != me).then(|| (e.path(), pid))
        })
        .collect()
}

fn sweep_dir(path: &Path, pid: u32) -> bool {
    // Not following symlinks: only a real directory of the scheme is removed.
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    // The lock, held while removing, so a second sweeper does not race for it.
    let lock = match File::open(path.join(LOCK_NAME)) {
        Ok(lock) => {
            if !try_lock(&lock) {
                return false;
            }
            Some(lock)
        }
        // No lock file: its owner died before creating it, or is creating it now.
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(_) => return false,
    };
    if may_be_starting(pid, path) {
        return false;
    }
    let removed = std::fs::remove_dir_all(path).is_ok();
    drop(lock);
    removed
}

fn sweep_shm(path: &Path, pid: u32) -> bool {
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(file) = File::open(path) else { return false };
    if !try_lock(&file) || may_be_starting(pid, path) {
        return false;
    }
    std::fs::remove_file(path).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid no process has: above the kernel's pid_max.
    fn dead_pid() -> u32 {
        let max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(4_194_304);
        max + 1
    }

    /// Sweeps until something is taken, for at most 10 s. A child that another test of
    /// this process forks (QEMU and `sleep` are spawned with a `pre_exec` hook, so by
    /// fork) shares every open file description, locked ones included, until its exec
    /// closes them (they are close-on-exec): a lock dropped here can stay held for that
    /// moment. CI saw it once on a loaded machine.
    fn sweep_until_released(tmp: &Path, shm: &Path) -> Swept {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        let mut swept = Swept::default();
        loop {
            let more = sweep(tmp, shm);
            swept.dirs.extend(more.dirs);
            swept.shm_files.extend(more.shm_files);
            let both = !swept.dirs.is_empty() && !swept.shm_files.is_empty();
            if both || std::time::Instant::now() > until {
                return swept;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn names_tell_their_owner() {
        assert_eq!(owner_pid("nvtest-qemu-1234-AbC9"), Some(1234));
        assert_eq!(owner_pid("nvtest-qemu-1234-AbC9.ram"), Some(1234));
        assert_eq!(owner_pid("nvtest-qemu-AbC9x1"), None, "the older scheme has no pid");
        assert_eq!(owner_pid("nvtest-qemu-1234-"), None);
        assert_eq!(owner_pid("nvtest-qemu--x"), None);
        assert_eq!(owner_pid("nvtest-AbC9"), None);
    }

    #[test]
    fn a_dead_runs_files_are_swept_a_live_runs_never() {
        let tmp = tempfile::tempdir().unwrap();
        let shm = tempfile::tempdir().unwrap();
        let dead = dead_pid();

        // Dead: unlocked lock file, no lock file, an unlocked RAM file.
        let dead_dir = tmp.path().join(format!("nvtest-qemu-{dead}-aaaa"));
        std::fs::create_dir(&dead_dir).unwrap();
        std::fs::write(dead_dir.join(LOCK_NAME), b"").unwrap();
        std::fs::write(dead_dir.join("ns1.img"), b"x").unwrap();
        let unlocked_dir = tmp.path().join(format!("nvtest-qemu-{dead}-bbbb"));
        std::fs::create_dir(&unlocked_dir).unwrap();
        let dead_ram = shm.path().join(format!("nvtest-qemu-{dead}-cccc.ram"));
        std::fs::write(&dead_ram, b"").unwrap();

        // Live, though "its" pid is dead: the lock is held (as by a run in another pid
        // namespace). Ours, created by this process: left alone too.
        let live_dir = tmp.path().join(format!("nvtest-qemu-{dead}-dddd"));
        std::fs::create_dir(&live_dir).unwrap();
        let held = File::create(live_dir.join(LOCK_NAME)).unwrap();
        assert!(try_lock(&held));
        let live_ram = shm.path().join(format!("nvtest-qemu-{dead}-eeee.ram"));
        let held_ram = File::create(&live_ram).unwrap();
        assert!(try_lock(&held_ram));
        let ours = RunDir::create_in(tmp.path()).unwrap();
        let our_ram = shm_file(shm.path()).unwrap();
        // Being created right now by a live process (pid 1 exists), not locked yet.
        let starting = tmp.path().join("nvtest-qemu-1-ffff");
        std::fs::create_dir(&starting).unwrap();
        // Not of this scheme.
        let other = [tmp.path().join("nvtest-qemu-Xy12z"), shm.path().join("nvtest-Xy12z")];
        std::fs::create_dir(&other[0]).unwrap();
        std::fs::write(&other[1], b"").unwrap();

        let mut swept = sweep(tmp.path(), shm.path());
        swept.dirs.sort();
        assert_eq!(
            swept,
            Swept { dirs: vec![dead_dir.clone(), unlocked_dir.clone()], shm_files: vec![dead_ram.clone()] }
        );
        assert!(!dead_dir.exists() && !unlocked_dir.exists() && !dead_ram.exists());
        for kept in [&live_dir, &live_ram, &starting, &other[0], &other[1]] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        assert!(ours.path().exists() && our_ram.path().exists());

        // Once the live run ends (its locks go with its files' descriptors), the next
        // sweep takes its leftovers.
        drop((held, held_ram));
        let swept = sweep_until_released(tmp.path(), shm.path());
        assert_eq!(swept.dirs, vec![live_dir]);
        assert_eq!(swept.shm_files, vec![live_ram]);
        let path = ours.path().to_owned();
        drop(ours);
        assert!(!path.exists(), "a dropped RunDir is removed");
    }

    #[test]
    fn our_lock_is_seen_by_another_open_file() {
        // flock locks belong to the open file description: a sweeper's own open of the
        // lock file (even in this process) cannot take a live run's lock.
        let tmp = tempfile::tempdir().unwrap();
        let ours = RunDir::create_in(tmp.path()).unwrap();
        let other = File::open(ours.path().join(LOCK_NAME)).unwrap();
        assert!(!try_lock(&other));
        let ram = shm_file(tmp.path()).unwrap();
        assert!(!try_lock(&File::open(ram.path()).unwrap()));
    }
}
