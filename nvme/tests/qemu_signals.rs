//! Nothing of a QEMU machine outlives nvtest when nvtest is stopped from outside:
//! SIGTERM and SIGINT kill QEMU, remove its files and exit with 143 / 130; SIGKILL
//! (which no handler sees) still takes QEMU down with it (`PR_SET_PDEATHSIG`), and
//! TMPDIR and /dev/shm hold nothing because the directory and the RAM file lost their
//! names at the start.
//!
//! Each test runs this same test binary again as the "nvtest" to be stopped: with
//! `NVTEST_QEMU_SIGNAL_CHILD` set, the test starts a machine, prints its pid and files,
//! and waits to be signalled.

mod qemu_support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use nvme::transport::qemu::QemuMachine;
use qemu_support::{assert_cleaned, one_controller, process_exists};

const CHILD_ENV: &str = "NVTEST_QEMU_SIGNAL_CHILD";

/// In the child role: start a machine, report it, wait for the signal.
fn be_the_child() {
    let machine = QemuMachine::start(one_controller("SIG00001")).unwrap();
    println!("MACHINE {} {} {}", machine.pid(), machine.start_dir().to_owned().display(), machine.ram_path().display());
    std::thread::sleep(Duration::from_secs(30));
    panic!("no signal arrived within 30 s");
}

struct Child {
    process: std::process::Child,
    qemu_pid: u32,
    dir: PathBuf,
    ram: PathBuf,
}

/// Runs `test` of this binary in the child role and reads what machine it started.
fn spawn_child(test: &str) -> Child {
    let mut process = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = process.stdout.take().unwrap();
    let line = BufReader::new(stdout)
        .lines()
        .map(Result::unwrap)
        .find_map(|l| l.split_once("MACHINE ").map(|(_, rest)| rest.to_owned()))
        .expect("the child reports its machine");
    let fields: Vec<&str> = line.split(' ').collect();
    Child { process, qemu_pid: fields[0].parse().unwrap(), dir: fields[1].into(), ram: fields[2].into() }
}

fn stop_child_with(test: &str, signal: i32) -> (Child, std::process::ExitStatus) {
    let mut child = spawn_child(test);
    assert!(process_exists(child.qemu_pid));
    // SAFETY: plain syscall on the child this test started.
    assert_eq!(unsafe { libc::kill(child.process.id() as i32, signal) }, 0);
    let status = child.process.wait().unwrap();
    (child, status)
}

#[test]
fn sigterm_kills_qemu_removes_its_files_and_exits_143() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return be_the_child();
    }
    let (child, status) = stop_child_with("sigterm_kills_qemu_removes_its_files_and_exits_143", libc::SIGTERM);
    assert_eq!(status.code(), Some(143));
    assert_cleaned(child.qemu_pid, &child.dir, &child.ram);
}

#[test]
fn sigint_kills_qemu_removes_its_files_and_exits_130() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return be_the_child();
    }
    let (child, status) = stop_child_with("sigint_kills_qemu_removes_its_files_and_exits_130", libc::SIGINT);
    assert_eq!(status.code(), Some(130));
    assert_cleaned(child.qemu_pid, &child.dir, &child.ram);
}

#[test]
fn sigkill_of_nvtest_takes_qemu_down_and_leaves_nothing_in_tmpdir_or_dev_shm() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return be_the_child();
    }
    let (child, status) =
        stop_child_with("sigkill_of_nvtest_takes_qemu_down_and_leaves_nothing_in_tmpdir_or_dev_shm", libc::SIGKILL);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    // Nothing ran in the child to remove anything: its directory went at the start.
    assert!(!child.dir.exists(), "{} is still there", child.dir.display());
    assert_cleaned(child.qemu_pid, &child.dir, &child.ram);
}
