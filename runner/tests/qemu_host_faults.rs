//! The host's faults are nvtest's errors, never the drive's findings: the `nvtest`
//! binary on `qemu:ns32` with TMPDIR on a small tmpfs.
//!
//! - too small for the images from the start: nvtest refuses before QEMU starts (exit
//!   2, one line naming the directory, what is free and what is needed), nothing left;
//! - filled up under a running suite: QEMU completes writes with Write Fault, and
//!   nvtest reports errors naming the full disk, no case as failed, ends with a line
//!   naming the fault (exit 2), and leaves no QEMU and no files;
//! - the same in the Linux-guest lane (`qemu-linux:ns32`): refused before the guest
//!   boots, and a TMPDIR filled under the guest's run voids the guest's verdicts (exit 2
//!   naming the full disk, no report written).
//!
//! Needs root (mount) and QEMU; without them the tests fail with the reason.

use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

mod common;
use common::processes_naming;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn require_qemu() {
    let binary = Path::new("qemu-system-x86_64");
    nvme::transport::qemu::require_binary(binary).unwrap_or_else(|e| panic!("these tests need QEMU: {e}"));
}

/// A tmpfs mounted on a fresh directory, unmounted (lazily, so a QEMU still holding
/// files there cannot keep it) and removed on drop, also when the test fails.
struct Tmpfs {
    mountpoint: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let mountpoint = tempfile::tempdir().unwrap();
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(mountpoint.path())
            .output()
            .unwrap_or_else(|e| panic!("these tests mount a tmpfs and cannot run mount(8): {e}"));
        assert!(
            output.status.success(),
            "these tests mount a tmpfs (as root): mount -t tmpfs -o size={size} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Tmpfs { mountpoint }
    }

    fn path(&self) -> &Path {
        self.mountpoint.path()
    }

    /// The files in the tmpfs, except `filler`.
    fn files_except(&self, filler: Option<&Path>) -> Vec<PathBuf> {
        let entries = std::fs::read_dir(self.path()).unwrap().flatten().map(|e| e.path());
        entries.filter(|p| Some(p.as_path()) != filler).collect()
    }

    /// Fills the filesystem completely: preallocates what statvfs says is free (in
    /// halves where that is a little too much: QEMU may still finish a write), then
    /// writes until ENOSPC. Returns the filler file.
    fn fill(&self) -> PathBuf {
        let path = self.path().join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let stat = nix::sys::statvfs::statvfs(self.path()).unwrap();
        let (mut chunk, mut end) = (stat.blocks_available() as i64 * stat.fragment_size() as i64, 0);
        while chunk >= 4096 {
            match nix::fcntl::fallocate(&file, nix::fcntl::FallocateFlags::empty(), end, chunk) {
                Ok(()) => end += chunk,
                Err(nix::errno::Errno::ENOSPC) => chunk /= 2,
                Err(e) => panic!("filling {}: {e}", self.path().display()),
            }
        }
        file.seek(SeekFrom::End(0)).unwrap();
        let page = [0xFFu8; 4096];
        loop {
            match file.write(&page) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling {}: {e}", self.path().display()),
            }
        }
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let path = std::ffi::CString::new(self.path().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: plain syscall on a NUL-terminated path.
        unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
    }
}

/// An nvtest child killed (with its QEMU, which dies with it) if the test fails first.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nvtest(args: &[&str], tmpdir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvtest"));
    cmd.args(args).env("TMPDIR", tmpdir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Nothing of the run is left: no process naming the tmpfs, no file but the filler.
fn assert_nothing_left(tmpfs: &Tmpfs, filler: Option<&Path>, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_naming(tmpfs.path()).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(processes_naming(tmpfs.path()), Vec::<u32>::new(), "QEMU left running:\n{text}");
    assert_eq!(tmpfs.files_except(filler), Vec::<PathBuf>::new(), "files left in TMPDIR:\n{text}");
}

#[test]
fn a_temporary_directory_too_small_for_the_images_stops_nvtest_before_qemu_starts() {
    require_qemu();
    let started = Instant::now();
    let tmpfs = Tmpfs::mount("64m");
    let output = nvtest(&["--suite", "trim", "qemu:ns32"], tmpfs.path()).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let text = format!("{stdout}{stderr}");
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(stdout.is_empty(), "nothing is run, so nothing is printed on stdout:\n{text}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one error line:\n{text}");
    let expected = format!(
        "error: qemu:ns32: not enough free space to start QEMU: {} (the temporary directory, TMPDIR) has 64.0 MiB \
         (67108864 bytes) free, QEMU's disk images need 256.0 MiB (268435456 bytes)",
        tmpfs.path().display()
    );
    assert!(lines[0].starts_with(&expected), "{text}");
    assert!(lines[0].ends_with("free space there or point TMPDIR elsewhere"), "{text}");
    assert_nothing_left(&tmpfs, None, &text);
    eprintln!("too-small TMPDIR refused in {:?}", started.elapsed());
}

/// Reads the child's stdout in a thread, line by line.
fn read_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for the last line of the device identity ("  NVMe      1.4"); returns the lines so far.
fn wait_for_identity(lines: &mpsc::Receiver<String>) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                let done = line.starts_with("  NVMe ");
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(e) => panic!("no device identity from nvtest ({e:?}); it printed:\n{}", seen.join("\n")),
        }
    }
}

#[test]
fn a_temporary_directory_that_fills_up_under_a_run_is_nvtest_error_not_a_finding() {
    require_qemu();
    let started = Instant::now();
    // Enough for the preflight (the ns32 images need min(18 GiB, 256 MiB)).
    let tmpfs = Tmpfs::mount("300m");
    let reports = tempfile::tempdir().unwrap();
    let junit = reports.path().join("trim.xml");
    let junit_arg = junit.to_str().unwrap();
    let stderr_path = reports.path().join("stderr");
    let mut cmd = nvtest(&["--suite", "trim", "--junit", junit_arg, "qemu:ns32"], tmpfs.path());
    let mut run = Running(cmd.stderr(std::fs::File::create(&stderr_path).unwrap()).spawn().unwrap());
    let lines = read_lines(&mut run.0);
    let mut console = wait_for_identity(&lines);

    // nvtest is held while the disk fills: the suite takes under a second here, and
    // rewrites blocks it already wrote, so filling it while it runs may come too late.
    let pid = run.0.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let filler = tmpfs.fill();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);

    console.extend(lines.iter());
    let status = run.0.wait().unwrap();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    let text = format!("{}\n{stderr}", console.join("\n"));

    assert_eq!(status.code(), Some(2), "a run the host failed could not do its job:\n{text}");
    let last = console.iter().rev().find(|l| !l.trim().is_empty()).unwrap();
    let dir = tmpfs.path().display().to_string();
    assert!(
        last.starts_with("error: the host failed QEMU's disk images: `aio failed: No space left on device`")
            && last.contains(&dir)
            && last.contains("later cases not run"),
        "the last line names the full disk:\n{text}"
    );
    assert!(console.iter().all(|l| !l.starts_with("rule ")), "a case reported as the drive breaking a rule:\n{text}");
    assert!(
        !console.iter().any(|l| l.starts_with("warnings (counted as ok")),
        "a host fault became a warning:\n{text}"
    );

    let report = std::fs::read_to_string(&junit).unwrap_or_else(|e| panic!("no JUnit report ({e}):\n{text}"));
    assert!(!report.contains("<failure"), "the JUnit report has a failure:\n{report}");
    let errors: Vec<&str> = report.split("<error ").skip(1).collect();
    assert!(
        errors.iter().any(|e| e.contains("No space left on device") && e.contains(&dir)),
        "no <error> names the full disk:\n{report}"
    );
    assert_nothing_left(&tmpfs, Some(&filler), &text);
    eprintln!("full TMPDIR reported in {:?} ({} errors)", started.elapsed(), errors.len());
}

/// The QEMU that nvtest process `parent` started.
fn qemu_child_of(parent: u32) -> Option<libc::pid_t> {
    for entry in std::fs::read_dir("/proc").ok()?.filter_map(|e| e.ok()) {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<libc::pid_t>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid …: comm may hold spaces, so split after its `)`.
        let Some((head, rest)) = stat.rsplit_once(") ") else { continue };
        let ppid = rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) && head.contains("(qemu-system-") {
            return Some(pid);
        }
    }
    None
}

/// The Linux-guest lane (`qemu-linux:ns32`, the kernel's driver in a guest): TMPDIR too
/// small from the start is refused before the guest boots; filled while the guest's
/// nvtest runs (QEMU stopped meanwhile), the Write Faults the guest saw are the host's:
/// exit 2 naming the full disk, no report handing the guest's verdicts on, nothing left.
#[test]
fn in_the_guest_lane_a_full_temporary_directory_is_the_hosts_fault_not_the_drives() {
    require_qemu();
    let args = ["--suite", "trim", "--allow-destructive", "--confirm-serial", "NVTQ32000001", "qemu-linux:ns32"];
    let tmpfs = Tmpfs::mount("64m");
    let output = nvtest(&args, tmpfs.path()).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("qemu-linux:ns32: not enough free space to start QEMU: ")
            && text.contains("(the temporary directory, TMPDIR) has 64.0 MiB"),
        "{text}"
    );
    assert!(!text.contains("guest: booted"), "refused before the guest boots:\n{text}");
    assert_nothing_left(&tmpfs, None, &text);
    drop(tmpfs);

    let tmpfs = Tmpfs::mount("300m");
    let reports = tempfile::tempdir().unwrap();
    let junit = reports.path().join("trim.xml");
    let mut all = vec!["--junit", junit.to_str().unwrap()];
    all.extend(args);
    // One stream, stdout and stderr merged, to follow the guest's progress.
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg("exec \"$0\" \"$@\" 2>&1").arg(env!("CARGO_BIN_EXE_nvtest")).args(&all);
    cmd.env("TMPDIR", tmpfs.path()).stdin(Stdio::null()).stdout(Stdio::piped());
    let mut run = Running(cmd.spawn().unwrap());
    let lines = read_lines(&mut run.0);
    let mut console = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let line = lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|e| panic!("the guest did not boot ({e:?}):\n{}", console.join("\n")));
        let booted = line.starts_with("guest: booted");
        console.push(line);
        if booted {
            break;
        }
    }
    let qemu = qemu_child_of(run.0.id()).unwrap_or_else(|| panic!("no QEMU under nvtest:\n{}", console.join("\n")));
    // SAFETY: kill(2) on the QEMU our child started.
    assert_eq!(unsafe { libc::kill(qemu, libc::SIGSTOP) }, 0);
    let filler = tmpfs.fill();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(qemu, libc::SIGCONT) }, 0);
    console.extend(lines.iter());
    let status = run.0.wait().unwrap();
    let text = console.join("\n");
    assert_eq!(status.code(), Some(2), "a run the host failed could not do its job:\n{text}");
    let last = console.iter().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        last.starts_with(
            "error: qemu-linux:ns32: the host failed QEMU's disk images: `aio failed: No space left on device`"
        ) && last.contains(&tmpfs.path().display().to_string())
            && last.contains("its verdicts are void and its reports are not written"),
        "the last line names the full disk:\n{text}"
    );
    assert!(!junit.exists(), "no report hands the guest's verdicts on:\n{text}");
    assert_nothing_left(&tmpfs, Some(&filler), &text);
}
