//! Nothing left behind by the `nvtest` binary on a QEMU target: after a normal run, a
//! run interrupted with SIGINT, and a run whose QEMU is killed mid-suite, no QEMU process
//! of that run, no temporary directory and no /dev/shm file remain.
//!
//! Each run gets its own TMPDIR and a marker in its environment, which QEMU inherits, so
//! the run's own QEMU processes are found however they were re-parented; its /dev/shm
//! files are named for nvtest's pid. A fourth test interrupts a qemu-linux run while its
//! guest recipe works. The last three SIGKILL nvtest (no handler sees that): once its
//! QEMU is up nothing is left; while a machine starts, what is left the next start
//! sweeps; and a sweep never takes a live run's files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod common;
use common::processes_naming;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn require_qemu() {
    let binary = Path::new("qemu-system-x86_64");
    nvme::transport::qemu::require_binary(binary).unwrap_or_else(|e| panic!("these tests need QEMU: {e}"));
}

/// PIDs of processes whose environment holds `marker`.
fn marked_processes(marker: &str) -> Vec<u32> {
    let needle = format!("NVTEST_LIFECYCLE_MARK={marker}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Ok(env) = std::fs::read(entry.path().join("environ")) {
            if env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()) {
                found.push(pid);
            }
        }
    }
    found
}

fn shm_files() -> BTreeSet<PathBuf> {
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("nvtest-")))
        .collect()
}

struct Run {
    child: Child,
    marker: String,
    tmp: tempfile::TempDir,
}

fn start(args: &[&str], label: &str) -> Run {
    start_with_env(args, label, &[])
}

fn start_with_env(args: &[&str], label: &str, env: &[(&str, &Path)]) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let marker = format!("{label}-{}", std::process::id());
    let child = Command::new(env!("CARGO_BIN_EXE_nvtest"))
        .args(args)
        .env("TMPDIR", tmp.path())
        .env("NVTEST_LIFECYCLE_MARK", &marker)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Run { child, marker, tmp }
}

/// Whether `pid` runs QEMU: not nvtest itself, nor a child forked for QEMU that has
/// not yet called exec (it carries the marker too, under the launcher thread's name).
fn is_qemu(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.starts_with("qemu"))
}

/// Waits until a QEMU of this run is up (a marked process running QEMU).
fn wait_for_qemu(run: &Run) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(pid) = marked_processes(&run.marker).into_iter().find(|&p| is_qemu(p)) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no QEMU came up for {}", run.marker);
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn finish(run: Run) -> (Option<i32>, String) {
    let pid = run.child.id();
    let output = run.child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    // QEMU is reaped before nvtest exits; give the kernel a moment to drop a zombie's environ.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !marked_processes(&run.marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(marked_processes(&run.marker), Vec::<u32>::new(), "QEMU left running after {}:\n{text}", run.marker);
    assert_empty(run.tmp.path(), &text);
    // The run's own files only: other tests of this file run beside it.
    let leaked = shm_files_of(pid);
    assert!(leaked.is_empty(), "/dev/shm files left by {}: {leaked:?}\n{text}", run.marker);
    (output.status.code(), text)
}

fn assert_empty(dir: &Path, text: &str) {
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "temporary files left: {left:?}\n{text}");
}

#[test]
fn nothing_is_left_behind_after_normal_interrupted_and_killed_runs() {
    require_qemu();

    // A normal run.
    let run = start(&["--suite", "namespaces", "--filter", "identify-controller", "qemu:ns32"], "normal");
    let (code, text) = finish(run);
    assert_eq!(code, Some(0), "{text}");

    // Interrupted with SIGINT once QEMU is up: exits 130. At several moments, since a run
    // is quick here and the target is restarted in it (a case that kills QEMU): a signal
    // arriving while a machine starts must find every file of it.
    for delay_ms in [0, 60, 150, 300, 500] {
        let run = start(&["--suite", "namespaces", "--suite", "trim", "qemu:ns32"], &format!("sigint{delay_ms}"));
        wait_for_qemu(&run);
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(run.child.id() as i32, libc::SIGINT) }, 0);
        let (code, text) = finish(run);
        assert_eq!(code, Some(130), "SIGINT after {delay_ms} ms:\n{text}");
    }

    // QEMU killed under a running suite: the case in flight errors with QEMU's fate,
    // nvtest opens the target again for the next case, and the run ends (exit 1). The qos
    // suite runs about 5 s here, so the kill 1.5 s in lands in a case (trim, which the
    // test used before, could end within 1.5 s and leave no QEMU to kill).
    let run = start(&["--suite", "qos", "qemu:ns32"], "killed");
    let qemu = wait_for_qemu(&run);
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill(2) on the QEMU this run started.
    assert_eq!(unsafe { libc::kill(qemu as i32, libc::SIGKILL) }, 0);
    let (code, text) = finish(run);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("killed by signal 9"), "the error should say QEMU was killed:\n{text}");
}

/// A qemu-linux run whose guest recipe is `recipe` (a stand-in that makes
/// `$TMPDIR/recipe-work` and sleeps), once that directory exists and `processes` of the
/// run are up; returns the run and the directory.
fn start_stand_in_recipe(recipe: &Path, marker: &str, processes: usize) -> (Run, PathBuf) {
    let run = start_with_env(&["--suite", "namespaces", "qemu-linux:ns32"], marker, &[("NVTEST_GUEST_RECIPE", recipe)]);
    let work = run.tmp.path().join("recipe-work");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(work.is_dir() && marked_processes(&run.marker).len() >= processes) {
        assert!(Instant::now() < deadline, "the stand-in recipe did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (run, work)
}

/// A qemu-linux run interrupted while its guest recipe works (here a stand-in recipe
/// that sleeps, as `cargo build` would): nvtest exits 130, the recipe's whole process
/// group is stopped (no process of the run remains) and the recipe's EXIT trap has
/// removed its work directory.
#[test]
fn an_interrupted_guest_recipe_is_stopped_with_its_children() {
    let recipe_dir = tempfile::tempdir().unwrap();
    let recipe = recipe_dir.path().join("recipe.sh");
    std::fs::write(
        &recipe,
        // The trap is set before the directory exists: the test signals once it sees it.
        "#!/bin/bash\nwork=\"$TMPDIR/recipe-work\"\ntrap 'rm -rf \"$work\"' EXIT\nmkdir \"$work\"\nsleep 60\n",
    )
    .unwrap();
    let (run, work) = start_stand_in_recipe(&recipe, "recipe", 3);
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(run.child.id() as i32, libc::SIGINT) }, 0);
    let output = run.child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(130), "{text}");
    // bash runs its EXIT trap once its sleep has died of the same SIGTERM.
    let deadline = Instant::now() + Duration::from_secs(5);
    while (!marked_processes(&run.marker).is_empty() || work.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(marked_processes(&run.marker), Vec::<u32>::new(), "recipe processes left running:\n{text}");
    assert_empty(run.tmp.path(), &text);
}

/// The same recipe killed with its nvtest (SIGKILL, which nvtest cannot pass on): the
/// recipe's owner watch (fixtures/guest/owner-watch.sh, which build.sh sources) stops the
/// whole group — no builder keeps running, and the EXIT trap still cleans up.
#[test]
fn a_guest_recipe_whose_nvtest_is_sigkilled_stops_with_its_children() {
    let recipe_dir = tempfile::tempdir().unwrap();
    let recipe = recipe_dir.path().join("recipe.sh");
    let watch = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/guest/owner-watch.sh");
    std::fs::write(
        &recipe,
        format!(
            "#!/bin/bash\n. '{}'\nwork=\"$TMPDIR/recipe-work\"\ntrap 'rm -rf \"$work\"; stop_owner_watch' EXIT\n\
             mkdir \"$work\"\nsleep 60\n",
            watch.display()
        ),
    )
    .unwrap();
    // nvtest, bash, the watch subshell and the sleep.
    let (run, work) = start_stand_in_recipe(&recipe, "recipe-killed", 4);
    let mut child = run.child;
    child.kill().unwrap();
    let _ = child.wait();
    // The watch polls every 0.5 s, then TERM; KILL 5 s later for what is left.
    let deadline = Instant::now() + Duration::from_secs(15);
    while (!marked_processes(&run.marker).is_empty() || work.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(marked_processes(&run.marker), Vec::<u32>::new(), "recipe processes left running after SIGKILL");
    assert!(!work.exists(), "the recipe's EXIT trap did not run");
}

/// /dev/shm files of the run of nvtest `pid` (`nvtest-qemu-<pid>-*`).
fn shm_files_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("nvtest-qemu-{pid}-");
    shm_files()
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&prefix)))
        .collect()
}

/// Reads stdout until a line starting with `start`; returns the lines so far.
fn wait_for_line(run: &mut Run, start: &str) -> Vec<String> {
    use std::io::BufRead;
    let stdout = run.child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                let done = line.starts_with(start);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(e) => panic!("no line {start:?} from nvtest ({e:?}); it printed:\n{}", seen.join("\n")),
        }
    }
}

/// SIGKILLs the run's nvtest and waits until no process of the run is left (QEMU dies
/// with nvtest, `PR_SET_PDEATHSIG`); returns nvtest's pid.
fn sigkill(mut run: Run) -> (u32, tempfile::TempDir) {
    let pid = run.child.id();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    run.child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_naming(run.tmp.path()).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(processes_naming(run.tmp.path()), Vec::<u32>::new(), "QEMU outlived the SIGKILL of nvtest");
    (pid, run.tmp)
}

/// A run SIGKILLed once QEMU is up leaves nothing at all: its QEMU dies with it, and its
/// directory and guest-RAM file lost their names as soon as QEMU had them open.
#[test]
fn a_sigkilled_run_leaves_nothing_in_tmpdir_or_dev_shm() {
    require_qemu();
    for wait_for in ["  NVMe ", "test "] {
        let mut run = start(&["--suite", "trim", "qemu:ns32"], "sigkill");
        let seen = wait_for_line(&mut run, wait_for);
        let (pid, tmp) = sigkill(run);
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.path()).collect();
        assert!(left.is_empty(), "SIGKILL after {wait_for:?} left in TMPDIR: {left:?}\n{}", seen.join("\n"));
        assert_eq!(shm_files_of(pid), Vec::<PathBuf>::new(), "SIGKILL after {wait_for:?} left in /dev/shm");
    }
}

/// A run SIGKILLed while its machine starts may leave its directory or RAM file (they
/// have names until QEMU has opened them); the next machine's start, here of a short
/// run on the same TMPDIR, removes them.
#[test]
fn what_a_run_sigkilled_while_starting_leaves_the_next_run_sweeps() {
    require_qemu();
    for delay_ms in [0, 2, 5, 10, 20, 40] {
        let run = start(&["--suite", "trim", "qemu:ns32"], &format!("starting{delay_ms}"));
        wait_for_qemu(&run);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let (pid, tmp) = sigkill(run);
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.path()).collect();
        let left_shm = shm_files_of(pid);
        eprintln!("SIGKILL {delay_ms} ms after QEMU appeared left {left:?} {left_shm:?}");
        let output = Command::new(env!("CARGO_BIN_EXE_nvtest"))
            .args(["--suite", "namespaces", "--filter", "identify-controller", "qemu:ns32"])
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert_eq!(output.status.code(), Some(0), "{text}");
        assert_empty(tmp.path(), &text);
        assert_eq!(shm_files_of(pid), Vec::<PathBuf>::new(), "the sweep left the killed run's RAM file");
    }
}

/// A sweep never removes a live run's files: here a directory and a RAM file named for
/// a pid no process has (as a run in another pid namespace would look) whose locks this
/// test holds, while three runs share the TMPDIR and start machines at once (each
/// sweeping). All three pass and the held files stay; once the locks are released,
/// the next run removes them.
#[test]
fn a_sweep_never_removes_a_live_runs_files() {
    use std::os::fd::AsRawFd;
    require_qemu();
    let tmp = tempfile::tempdir().unwrap();
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    let dead = pid_max + 1;
    let live_dir = tmp.path().join(format!("nvtest-qemu-{dead}-live01"));
    std::fs::create_dir(&live_dir).unwrap();
    std::fs::write(live_dir.join("ns1.img"), b"data").unwrap();
    let lock = std::fs::File::create(live_dir.join("lock")).unwrap();
    let live_ram = PathBuf::from(format!("/dev/shm/nvtest-qemu-{dead}-live01.ram"));
    let ram = std::fs::File::create(&live_ram).unwrap();
    for held in [&lock, &ram] {
        // SAFETY: plain syscall on a file this test opened.
        assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
    }
    let nvtest = || {
        Command::new(env!("CARGO_BIN_EXE_nvtest"))
            .args(["--suite", "namespaces", "--filter", "identify-controller", "qemu:ns32"])
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let runs: Vec<Child> = (0..3).map(|_| nvtest()).collect();
    for run in runs {
        let output = run.wait_with_output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert_eq!(output.status.code(), Some(0), "a run beside others failed:\n{text}");
    }
    assert!(live_dir.join("ns1.img").exists(), "a sweep removed a live run's directory");
    assert!(live_ram.exists(), "a sweep removed a live run's RAM file");

    drop((lock, ram));
    let output = nvtest().wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{text}");
    let removed = !live_dir.exists() && !live_ram.exists();
    let _ = std::fs::remove_file(&live_ram);
    assert!(removed, "the released files were not swept:\n{text}");
    assert_empty(tmp.path(), &text);
}

/// A power-fail campaign on QEMU starts a new QEMU at every power cycle: whether the run
/// ends by itself, by SIGINT or by SIGKILL in the middle of the campaign, no QEMU of any
/// cycle is left running and no file of any cycle is left in TMPDIR or /dev/shm.
#[test]
fn power_cycles_leave_no_qemu_and_no_file() {
    require_qemu();
    let args = ["--suite", "power-fail", "--filter", "write-cache-off", "qemu:nocache"];
    let (code, text) = finish(start(&args, "pf-normal"));
    assert_eq!(code, Some(0), "{text}");
    for delay_ms in [100, 400, 900] {
        let run = start(&args, &format!("pf-sigint{delay_ms}"));
        wait_for_qemu(&run);
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(run.child.id() as i32, libc::SIGINT) }, 0);
        let (code, text) = finish(run);
        assert_eq!(code, Some(130), "SIGINT after {delay_ms} ms:\n{text}");
    }
    let run = start(&args, "pf-sigkill");
    let first = wait_for_qemu(&run);
    // Once a QEMU other than the first runs, the campaign has power-cycled at least once.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !marked_processes(&run.marker).into_iter().any(|p| p != first && is_qemu(p)) {
        assert!(Instant::now() < deadline, "no power cycle started a second QEMU");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (pid, tmp) = sigkill(run);
    assert_empty(tmp.path(), "after a SIGKILL during a power-fail campaign");
    assert_eq!(shm_files_of(pid), Vec::<PathBuf>::new(), "a SIGKILL during a power-fail campaign left /dev/shm files");
}
