//! The QEMU process and everything that must not outlive nvtest: the process itself,
//! its temporary directory and its guest-RAM file in /dev/shm (named so a later run's
//! sweep can tell they are dead, [`super::leftovers`]).
//!
//! - QEMU is spawned from one long-lived launcher thread with `PR_SET_PDEATHSIG`
//!   (SIGKILL): the kernel sends that signal when the *thread* that forked exits, so
//!   forking from a short-lived test or worker thread would kill QEMU with it; the
//!   launcher lives as long as the process, so QEMU dies exactly when nvtest dies, even
//!   by SIGKILL.
//! - A process-wide registry lists every live QEMU with its files. The first machine
//!   installs a SIGINT/SIGTERM watcher (a thread, via `signal-hook`) that kills every
//!   registered QEMU, removes its files, sends SIGTERM to the helper process groups of
//!   [`spawn_watched_group`] (the guest recipe) and exits with 130 / 143, holding the
//!   registry until the end so no new machine starts meanwhile. [`cleanup_all`] does
//!   the same for a caller with its own signal handling.
//! - [`Process`] drops by killing QEMU, reaping it and removing its files. Its child is
//!   reaped only while the registry is locked, so the watcher never signals a pid that
//!   was reaped and possibly reused.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::leftovers::RunDir;
use super::stderr::StderrLog;

/// What the signal watcher must clean for one machine.
struct Entry {
    /// Set while QEMU runs and is not reaped.
    pid: Option<u32>,
    /// The machine's directory while it has a name ([`Process::remove_dir`]).
    dir: Option<PathBuf>,
    /// The guest-RAM file, until it is unlinked after QEMU opened it.
    shm: Option<PathBuf>,
}

static REGISTRY: Mutex<BTreeMap<u64, Entry>> = Mutex::new(BTreeMap::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Process groups of other helpers that must not outlive nvtest (the guest recipe's
/// bash and the cargo it runs): the signal watcher sends each SIGTERM.
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn groups() -> MutexGuard<'static, Vec<i32>> {
    GROUPS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A helper's process group in the signal watcher's care; forgotten on drop.
pub struct WatchedGroup(i32);

impl Drop for WatchedGroup {
    fn drop(&mut self) {
        groups().retain(|&g| g != self.0);
    }
}

/// Spawns `cmd` as the leader of a new process group in the signal watcher's care: on
/// SIGINT/SIGTERM the whole group gets SIGTERM (a shell in it runs its EXIT trap)
/// before nvtest exits. The group is registered before a signal can be handled.
pub fn spawn_watched_group(cmd: &mut Command) -> io::Result<(Child, WatchedGroup)> {
    install_interrupt_cleanup()?;
    let mut held = groups();
    let child = cmd.process_group(0).spawn()?;
    let pgid = child.id() as i32;
    held.push(pgid);
    Ok((child, WatchedGroup(pgid)))
}

fn registry() -> MutexGuard<'static, BTreeMap<u64, Entry>> {
    // A panic elsewhere while holding the lock leaves the map consistent (each change is
    // one insert/remove/field store), so a poisoned lock is still usable.
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The registry held while a machine's files are created: the signal watcher cannot
/// clean up (and exit) between their creation and [`register_held`].
pub(crate) struct StartGuard(MutexGuard<'static, BTreeMap<u64, Entry>>);

/// Installs the signal watcher, then holds the registry for a machine's start.
pub(crate) fn hold_for_start() -> Result<StartGuard, crate::transport::TransportError> {
    install_interrupt_cleanup().map_err(|e| crate::transport::TransportError::Other(format!("QEMU cleanup: {e}")))?;
    Ok(StartGuard(registry()))
}

/// Registers a machine's directory and guest-RAM file under the guard of
/// [`hold_for_start`], which stays held until [`Process::spawn`]; dropping the returned
/// value without spawning removes the files and the registration.
/// A machine started again after a power cut has neither: its files have no names.
pub(crate) fn register_held(mut guard: StartGuard, dir: Option<&Path>, shm: Option<&Path>) -> Registered {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    guard.0.insert(id, Entry { pid: None, dir: dir.map(Path::to_owned), shm: shm.map(Path::to_owned) });
    Registered { guard: Some(guard), id }
}

/// A registered machine whose QEMU is not spawned yet; the registry is held meanwhile.
pub(crate) struct Registered {
    guard: Option<StartGuard>,
    id: u64,
}

impl Registered {
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Registered {
    /// Never spawned (an error while preparing): the files go now, still under the
    /// registry, so no signal can slip in between forgetting them and removing them.
    fn drop(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            if let Some(entry) = guard.0.remove(&self.id) {
                if let Some(dir) = entry.dir {
                    let _ = std::fs::remove_dir_all(dir);
                }
                if let Some(shm) = entry.shm {
                    let _ = std::fs::remove_file(shm);
                }
            }
        }
    }
}

/// Runs `create` (which creates a file in a machine's directory) while no cleanup can
/// run, so the file is either created before the cleanup removes the directory, or
/// never (the cleanup holds the registry until the process exits).
pub(crate) fn while_no_cleanup<T>(create: impl FnOnce() -> T) -> T {
    let _held = registry();
    create()
}

/// Records that the guest-RAM file no longer has a name.
pub(crate) fn shm_unlinked(id: u64) {
    if let Some(entry) = registry().get_mut(&id) {
        entry.shm = None;
    }
}

/// Kills every QEMU nvtest started and removes their temporary files. For signal
/// handlers and fatal-error paths; machines still referenced afterwards report `Gone`.
pub fn cleanup_all() {
    kill_all_and_remove_files(&mut registry());
}

/// [`cleanup_all`] on a locked registry, returning the pids it killed (not reaped: their
/// `Process` owns that).
fn kill_all_and_remove_files(map: &mut BTreeMap<u64, Entry>) -> Vec<u32> {
    let mut killed = Vec::new();
    for entry in map.values_mut() {
        if let Some(pid) = entry.pid.take() {
            // SAFETY: plain syscall. The pid is not reaped (reaping happens under this
            // lock and clears `pid`), so it still names our QEMU or its zombie.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            killed.push(pid);
        }
    }
    // A QEMU that got SIGKILL may finish the system call it was in (creating its QMP
    // socket, say) before it dies: wait until it is gone, then remove.
    wait_gone(&killed);
    for entry in map.values_mut() {
        if let Some(dir) = &entry.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some(shm) = entry.shm.take() {
            let _ = std::fs::remove_file(shm);
        }
    }
    killed
}

/// Waits (at most one second: a process stuck in the kernel) until the killed children
/// have died, without reaping them: their `Process` or [`reap_before_exit`] does that.
fn wait_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(1);
    for &pid in pids {
        loop {
            // SAFETY: all-zero is a valid siginfo_t.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: plain syscall on our own child into a valid siginfo_t; WNOWAIT
            // leaves it a zombie. si_pid stays 0 while it is still running.
            let waited =
                unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
            // SAFETY: reading the union field waitid filled (or left zero).
            if waited != 0 || unsafe { info.si_pid() } != 0 || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Reaps killed children before the process exits, so no zombie waits for init to
/// collect it; gives up after one second (a child stuck in the kernel).
fn reap_before_exit(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut left: Vec<u32> = pids.to_vec();
    while !left.is_empty() && Instant::now() < deadline {
        // SAFETY: plain syscall on our own children; nothing else will wait for them,
        // the process exits right after.
        left.retain(|&pid| unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG) } == 0);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What the signal watcher does first, before it cleans up and exits.
type InterruptHook = Box<dyn Fn(i32) + Send + Sync>;
static INTERRUPT_HOOK: OnceLock<InterruptHook> = OnceLock::new();

/// Sets (once per process) what the SIGINT/SIGTERM watcher does first, with the signal's
/// number, before it kills QEMU and exits with 128 + signal: a runner writes the reports
/// of the cases that ran. Installs the watcher. A second hook is refused.
pub fn on_interrupt(hook: InterruptHook) -> io::Result<()> {
    INTERRUPT_HOOK.set(hook).map_err(|_| io::Error::other("the interrupt hook is already set"))?;
    install_interrupt_cleanup()
}

/// Kills every QEMU and watched helper group nvtest started, removes their files and
/// exits the process with `status`: the end of a run interrupted by a signal or its own
/// time limit. The registry stays locked until the process is gone: a thread that sees
/// its QEMU die and opens the target again blocks in `hold_for_start` instead of
/// creating files nobody would remove.
pub fn cleanup_and_exit(status: i32) -> ! {
    let mut map = registry();
    let killed = kill_all_and_remove_files(&mut map);
    for &group in groups().iter() {
        // SAFETY: plain syscall; the group is a child's, still watched.
        unsafe { libc::killpg(group, libc::SIGTERM) };
    }
    reap_before_exit(&killed);
    std::process::exit(status)
}

/// Installs (once) the SIGINT/SIGTERM watcher described above. Machines install it as
/// they start; a caller without a machine whose children die with it anyway
/// (`PR_SET_PDEATHSIG`) installs it for the watched groups and the exit status 128 + signal.
pub fn install_interrupt_cleanup() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    let result = INSTALLED.get_or_init(|| {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map_err(|e| e.to_string())?;
        std::thread::Builder::new()
            .name("nvtest-qemu-signals".into())
            .spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    if let Some(hook) = INTERRUPT_HOOK.get() {
                        hook(signal);
                    }
                    cleanup_and_exit(128 + signal);
                }
            })
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    result.clone().map_err(|e| io::Error::other(format!("cannot install the SIGINT/SIGTERM cleanup: {e}")))
}

type LaunchJob = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` from the launcher thread, with `PR_SET_PDEATHSIG` set in the child.
fn spawn_with_death_signal(mut cmd: Command) -> io::Result<Child> {
    static LAUNCHER: OnceLock<Option<mpsc::Sender<LaunchJob>>> = OnceLock::new();
    let launcher = LAUNCHER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<LaunchJob>();
        let thread = std::thread::Builder::new().name("nvtest-qemu-launcher".into()).spawn(move || {
            for (mut cmd, reply) in rx {
                let _ = reply.send(cmd.spawn());
            }
        });
        thread.ok().map(|_| tx)
    });
    let Some(launcher) = launcher else {
        return Err(io::Error::other("cannot start the QEMU launcher thread"));
    };
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
    // calls (prctl, getppid); it does not allocate.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // nvtest may have died before the prctl: then nobody would kill QEMU.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let (reply_tx, reply_rx) = mpsc::channel();
    launcher.send((cmd, reply_tx)).map_err(|_| io::Error::other("the QEMU launcher thread is gone"))?;
    reply_rx.recv().map_err(|_| io::Error::other("the QEMU launcher thread is gone"))?
}

/// A running QEMU, its temporary directory and its stderr.
pub(crate) struct Process {
    id: u64,
    child: Child,
    pid: u32,
    exit: Option<ExitStatus>,
    dir: Option<RunDir>,
    stderr: StderrLog,
}

impl Process {
    /// Spawns `cmd` for the `registered` machine; the directory is removed when the
    /// process is dropped. A piped stderr is captured ([`StderrLog`]), into `log` when
    /// given (a machine started again goes on with the log of its first QEMU). On error
    /// the registration is dropped.
    pub(crate) fn spawn(
        mut registered: Registered,
        cmd: Command,
        dir: Option<RunDir>,
        log: Option<&StderrLog>,
    ) -> io::Result<Process> {
        // The pid is recorded before the registry is released, so the signal watcher
        // sees either no pid or a live one.
        let mut child = spawn_with_death_signal(cmd)?;
        let captured = match (child.stderr.take(), log) {
            (Some(pipe), Some(log)) => log.resume(pipe).map(|()| log.clone()),
            (Some(pipe), None) => StderrLog::capture(pipe),
            (None, log) => Ok(log.cloned().unwrap_or_else(StderrLog::empty)),
        };
        let stderr = match captured {
            Ok(log) => log,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        let pid = child.id();
        let id = registered.id;
        if let Some(mut guard) = registered.guard.take() {
            if let Some(entry) = guard.0.get_mut(&id) {
                entry.pid = Some(pid);
            }
        }
        Ok(Process { id, child, pid, exit: None, dir, stderr })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(|d| d.path())
    }

    /// QEMU's exit status if it has exited (it is reaped then).
    pub(crate) fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            let mut map = registry();
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exit = Some(status);
                if let Some(entry) = map.get_mut(&self.id) {
                    entry.pid = None;
                }
            }
        }
        self.exit
    }

    /// Waits up to `bound` for QEMU to exit by itself.
    pub(crate) fn wait_exit(&mut self, bound: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = self.exit_status() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Kills QEMU (SIGKILL) unless it already exited, and reaps it.
    pub(crate) fn kill(&mut self) {
        let mut map = registry();
        if self.exit.is_none() {
            let _ = self.child.kill();
            if let Ok(status) = self.child.wait() {
                self.exit = Some(status);
            }
        }
        if let Some(entry) = map.get_mut(&self.id) {
            entry.pid = None;
        }
    }

    /// Cuts QEMU's power: SIGSTOP first, and once every thread of QEMU's own has stopped
    /// (at most one second), SIGKILL, then reaps it. A thread stops only between system
    /// calls, so a write QEMU had handed to the host kernel is in the image whole or not
    /// at all; a SIGKILL alone can land in the middle of the kernel's copy into the page
    /// cache and tear a logical block, a fault of the switch, not of the controller.
    pub(crate) fn cut(&mut self) {
        if self.exit_status().is_none() {
            // SAFETY: plain syscall; the child is not reaped (exit_status said so), so
            // the pid is still ours.
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGSTOP) };
            let deadline = Instant::now() + Duration::from_secs(1);
            while !all_threads_stopped(self.pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        self.kill();
    }

    /// "exited with status 1", "was killed by signal 9", or "is still running".
    pub(crate) fn state(&mut self) -> String {
        match self.exit_status() {
            None => "is still running".to_owned(),
            Some(status) => describe_exit(status),
        }
    }

    /// The last lines QEMU wrote to stderr, for error messages.
    pub(crate) fn stderr_tail(&self) -> String {
        self.stderr.tail()
    }

    /// Everything QEMU writes to stderr.
    pub(crate) fn stderr(&self) -> &StderrLog {
        &self.stderr
    }
}

impl Process {
    /// Removes the temporary directory and, if still named, the guest-RAM file, and
    /// drops the registry entry. Call after [`Self::kill`].
    pub(crate) fn remove_files(&mut self) {
        let mut map = registry();
        drop(self.dir.take());
        if let Some(entry) = map.remove(&self.id) {
            if let Some(shm) = entry.shm {
                let _ = std::fs::remove_file(shm);
            }
        }
    }
}

impl Process {
    /// Removes the machine's directory once nothing needs its names any more (QEMU has
    /// opened its images and nvtest is connected to both sockets), so a SIGKILL of
    /// nvtest leaves nothing in TMPDIR; QEMU goes on using the open files.
    pub(crate) fn remove_dir(&mut self) {
        let mut map = registry();
        drop(self.dir.take());
        if let Some(entry) = map.get_mut(&self.id) {
            entry.dir = None;
        }
    }

    /// The machine's directory, created again (in `parent`, locked, registered for the
    /// signal watcher) if [`Self::remove_dir`] removed it: for files QEMU is to open
    /// by name later, such as the images of `blockdev-add`.
    pub(crate) fn ensure_dir(&mut self, parent: &Path) -> io::Result<PathBuf> {
        let mut map = registry();
        if let Some(dir) = &self.dir {
            return Ok(dir.path().to_owned());
        }
        // Files removed already (the machine was shut down): nothing to hold them.
        let Some(entry) = map.get_mut(&self.id) else {
            return Err(io::Error::other("the machine was shut down"));
        };
        let dir = RunDir::create_in(parent)?;
        let path = dir.path().to_owned();
        entry.dir = Some(path.clone());
        self.dir = Some(dir);
        Ok(path)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        self.remove_files();
    }
}

/// Whether every thread of process `pid` is stopped (state `T` or `t` in
/// `/proc/PID/task/TID/stat`), the kernel's io_uring workers (`iou-*`) aside: they take
/// no signal but SIGKILL.
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return true };
    tasks.flatten().all(|task| {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { return true };
        // "TID (COMM) STATE …": COMM may hold spaces and parentheses, so split at the last ')'.
        let Some((head, tail)) = stat.rsplit_once(')') else { return true };
        let comm = head.split_once('(').map(|(_, c)| c).unwrap_or("");
        comm.starts_with("iou-") || matches!(tail.trim_start().chars().next(), Some('T' | 't'))
    })
}

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => format!("ended ({status})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_process_is_reaped_and_its_files_removed() {
        let parent = tempfile::tempdir().unwrap();
        let dir = RunDir::create_in(parent.path()).unwrap();
        let dir_path = dir.path().to_owned();
        let shm = dir_path.join("ram");
        std::fs::write(&shm, b"").unwrap();
        let registered = register_held(hold_for_start().unwrap(), Some(&dir_path), Some(&shm));
        let id = registered.id();
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let mut process = Process::spawn(registered, cmd, Some(dir), None).unwrap();
        let pid = process.pid();
        assert_eq!(process.state(), "is still running");
        drop(process);
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        assert!(!dir_path.exists());
        assert!(!registry().contains_key(&id));
    }
}
