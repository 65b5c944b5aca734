//! The Linux-guest lane: TARGET `qemu-linux:NAME` (or `qemu-linux:PATH.yaml`).
//!
//! QEMU boots a stock Debian kernel with an initramfs built by `fixtures/guest/build.sh`
//! (busybox, the NVMe and ext4 modules, a statically linked nvtest), with the NVMe
//! devices and disks of the topology. Inside, nvtest runs the requested suites against
//! the first controller of the topology through the Linux NVMe driver (`/dev/nvmeN`, the
//! kernel-passthrough target, behind the safety gate); its console lines and then its
//! JUnit report (base64) come back on the serial console between `@@NVTEST-` markers,
//! and the guest powers off. The host streams the console, writes the JUnit report to
//! `--junit` and returns the guest nvtest's exit status.
//!
//! This is another execution model than the in-process targets: nothing here opens a
//! [`nvme::device::Device`]. The command line hands a `qemu-linux` target to [`run`]
//! after loading (and so validating) the suites.
//!
//! How the run reaches the guest: a small uncompressed cpio archive with `/run/nvtest/`
//! (the arguments one per line, the suites, the translated expected findings, which
//! controller, how many namespaces to wait for, optional setup steps) is appended to the
//! recipe's initramfs; the kernel unpacks both. Nothing goes on the kernel command line
//! but the console settings, so arguments need no quoting and have no length limit.
//!
//! Nothing is left behind: the initramfs copy and the namespace images are anonymous
//! files (`O_TMPFILE`) that QEMU opens through `/proc/<nvtest>/fd/N`, so they vanish
//! with the last process holding them; QEMU runs with `PR_SET_PDEATHSIG` (SIGKILL), so
//! it dies with nvtest, and it is killed when the guest overruns its time.
//!
//! Safety: QEMU's drive is disposable, like `qemu:`'s. When the command line gives none
//! of `--allow-destructive`, `--confirm-serial` and `--preserve`, the guest's nvtest gets
//! `--allow-destructive --confirm-serial SN` with the serial the topology gives the
//! controller, and says so; when it gives any of them, exactly those are passed, so the
//! gate inside the guest can be exercised (with [`SetupStep`]s, e.g. a mounted
//! filesystem; `NVTEST_GUEST_SETUP` on the command line).
//!
//! Environment: `NVTEST_GUEST_KERNEL` and `NVTEST_GUEST_INITRD` (a prebuilt image instead
//! of running the recipe; `NVTEST_GUEST_FIO` its fio archive, needed only by a `bench`
//! setup step), `NVTEST_GUEST_RECIPE` (the recipe's path),
//! `NVTEST_GUEST_ACCEL` (`tcg` or `kvm`; default kvm when /dev/kvm is usable and the CPU
//! has VMX/SVM, else tcg), `NVTEST_GUEST_BOOT_TIMEOUT` and `NVTEST_GUEST_TIMEOUT`
//! (seconds), `NVTEST_GUEST_SETUP` (`mount 1; checksum 1; target /dev/null`),
//! `NVTEST_GUEST_KERNEL_LOG=1` (print the guest's whole kernel log),
//! `NVTEST_GUEST_QEMU_ARGS` (more QEMU arguments, split at whitespace, e.g.
//! `-bios /usr/share/qemu/qboot.rom`).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::libc;

use super::expected::{load_expected, ExpectedFinding, ExpectedVerdict};
use super::spec::TopologyRef;
use super::topology::{ControllerSpec, Topology};
use crate::exit::{EXIT_OK, EXIT_USAGE};
use crate::safety::SafetyOptions;
use nvme::transport::qemu::DiskAio;

/// Where the run's files are inside the guest.
const GUEST_DIR: &str = "/run/nvtest";
/// The prefix of every line the guest's init prints for the host.
const MARK: &str = "@@NVTEST-";
/// Console lines before the run kept for error messages.
const TAIL_LINES: usize = 40;

/// A kernel and initramfs to boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestImage {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// fio and its libraries, an archive appended to the initramfs only for a run whose
    /// setup has a [`SetupStep::Bench`]: every boot under TCG pays for unpacking what
    /// the initramfs holds, and fio's libraries are most of it.
    pub fio_archive: Option<PathBuf>,
    /// What they were built from (package versions), for the console.
    pub description: String,
}

/// Something the guest does before nvtest runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetupStep {
    /// Makes a filesystem (busybox mke2fs) on the namespace's block device, mounts it
    /// with the ext4 driver and writes a file on it.
    Mount(u32),
    /// sha256 of the namespace's block device before and after nvtest runs, read with
    /// O_DIRECT so that a write the page cache did not see is seen.
    Checksum(u32),
    /// A loop device bound to the namespace's block device (`losetup`).
    Loop(u32),
    /// A loop device on the namespace with a filesystem made and mounted on the loop
    /// device, a file written there.
    LoopMount(u32),
    /// A filesystem on the namespace holding a file that backs a loop device; the
    /// filesystem is then lazily unmounted, so only the loop device holds it.
    LoopFile(u32),
    /// A process that memory-mapped the namespace's block device (shared, read-write)
    /// and closed its descriptor.
    Map(u32),
    /// After the `before` checksums, one NVM Write of LBA 0 through the passthrough ioctl
    /// (past the page cache): proves that the checksums see what nvtest's writes do.
    RawWrite(u32),
    /// A loop device bound to the namespace once nvtest has passed the gate (it printed
    /// the device identity): the re-check before the next suite must find it.
    LateLoop(u32),
    /// Runs nvtest (`--preserve`, the first suite) with this path as its target, which is
    /// not the controller: its exit status and output become a `target …` stage.
    Target(String),
    /// The same as an unprivileged user (uid 65534): an `unprivileged …` stage.
    Unprivileged(String),
    /// `nvtest-guest-helper bench` on the namespace: nvtest's io_uring engine against
    /// fio's ([`crate::guest_bench`]); its lines become `bench: …` stages.
    Bench(u32),
    /// A process that registered the namespace's block device as a fixed file of an
    /// io_uring ring and closed its descriptor (only the ring's fdinfo shows it).
    UringFixed(u32),
    /// The namespace exported by the kernel's NVMe target: an nvmet subsystem in configfs
    /// with the block device as an enabled namespace (no process holds it).
    Nvmet(u32),
    /// Once nvtest has passed the gate (it printed the device identity), a process opens
    /// the namespace's block device and overwrites its first 4 KiB (O_DIRECT) every
    /// 10 ms: a writer that appears during the run.
    LateWriter(u32),
}

impl SetupStep {
    /// Parses `mount 1; checksum 1; target /dev/null; unprivileged /dev/nvme0` (steps
    /// separated by `;` or newlines).
    pub fn parse_list(text: &str) -> Result<Vec<SetupStep>, String> {
        const USAGE: &str = "write `mount NSID`, `checksum NSID`, `loop NSID`, `loop-mount NSID`, `loop-file NSID`, \
                             `map NSID`, `raw-write NSID`, `late-loop NSID`, `bench NSID`, `uring-fixed NSID`, \
                             `nvmet NSID`, `late-writer NSID`, `target PATH` or `unprivileged PATH`";
        let mut steps = Vec::new();
        for part in text.split([';', '\n']).map(str::trim).filter(|p| !p.is_empty()) {
            let mut words = part.split_whitespace();
            let (Some(verb), Some(arg), None) = (words.next(), words.next(), words.next()) else {
                return Err(format!("guest setup step `{part}`: {USAGE}"));
            };
            let nsid = || -> Result<u32, String> {
                arg.parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("guest setup step `{part}`: `{arg}` is not a namespace ID (1 and up)"))
            };
            steps.push(match verb {
                "mount" => SetupStep::Mount(nsid()?),
                "checksum" => SetupStep::Checksum(nsid()?),
                "loop" => SetupStep::Loop(nsid()?),
                "loop-mount" => SetupStep::LoopMount(nsid()?),
                "loop-file" => SetupStep::LoopFile(nsid()?),
                "map" => SetupStep::Map(nsid()?),
                "raw-write" => SetupStep::RawWrite(nsid()?),
                "late-loop" => SetupStep::LateLoop(nsid()?),
                "bench" => SetupStep::Bench(nsid()?),
                "uring-fixed" => SetupStep::UringFixed(nsid()?),
                "nvmet" => SetupStep::Nvmet(nsid()?),
                "late-writer" => SetupStep::LateWriter(nsid()?),
                "target" | "unprivileged" if !arg.starts_with('/') => {
                    return Err(format!("guest setup step `{part}`: `{arg}` is not an absolute path"))
                }
                "target" => SetupStep::Target(arg.to_string()),
                "unprivileged" => SetupStep::Unprivileged(arg.to_string()),
                other => return Err(format!("guest setup step `{part}`: unknown step `{other}`; {USAGE}")),
            });
        }
        Ok(steps)
    }

    fn line(&self) -> String {
        match self {
            SetupStep::Mount(nsid) => format!("mount {nsid}"),
            SetupStep::Checksum(nsid) => format!("checksum {nsid}"),
            SetupStep::Loop(nsid) => format!("loop {nsid}"),
            SetupStep::LoopMount(nsid) => format!("loop-mount {nsid}"),
            SetupStep::LoopFile(nsid) => format!("loop-file {nsid}"),
            SetupStep::Map(nsid) => format!("map {nsid}"),
            SetupStep::RawWrite(nsid) => format!("raw-write {nsid}"),
            SetupStep::LateLoop(nsid) => format!("late-loop {nsid}"),
            SetupStep::Bench(nsid) => format!("bench {nsid}"),
            SetupStep::UringFixed(nsid) => format!("uring-fixed {nsid}"),
            SetupStep::Nvmet(nsid) => format!("nvmet {nsid}"),
            SetupStep::LateWriter(nsid) => format!("late-writer {nsid}"),
            SetupStep::Target(path) => format!("target {path}"),
            SetupStep::Unprivileged(path) => format!("unprivileged {path}"),
        }
    }
}

/// How long the guest may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// From QEMU's start until nvtest starts in the guest.
    pub boot: Duration,
    /// From QEMU's start until the guest powers off.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { boot: Duration::from_secs(180), total: Duration::from_secs(1800) }
    }
}

impl Timeouts {
    /// The defaults, with `NVTEST_GUEST_BOOT_TIMEOUT` / `NVTEST_GUEST_TIMEOUT` (seconds).
    pub fn from_env() -> Result<Timeouts, String> {
        let mut t = Timeouts::default();
        for (name, field) in [("NVTEST_GUEST_BOOT_TIMEOUT", &mut t.boot), ("NVTEST_GUEST_TIMEOUT", &mut t.total)] {
            if let Ok(text) = std::env::var(name) {
                let secs: u64 = text
                    .trim()
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("{name}={text}: give a number of seconds (1 and up)"))?;
                *field = Duration::from_secs(secs);
            }
        }
        Ok(t)
    }
}

/// One run of nvtest in the guest.
#[derive(Clone, Debug)]
pub struct GuestRequest {
    /// The target as written (`qemu-linux:ns32`), for messages.
    pub label: String,
    pub topology: Topology,
    /// Suite files, already loaded and validated on the host.
    pub suites: Vec<PathBuf>,
    /// `--filter` texts: cases whose name contains one are run (all when empty).
    pub filters: Vec<String>,
    pub exact: bool,
    /// `--seed`, handed to the guest's nvtest.
    pub seed: Option<u64>,
    /// `--skip` texts: cases whose name contains one are left out.
    pub skip: Vec<String>,
    pub expect: Option<PathBuf>,
    /// `--claims`: checked on the host, then handed to the guest's nvtest (whose
    /// citations name the file in the guest, `/run/nvtest/claims-NAME`, at the same
    /// line and column as the host's file).
    pub claims: Option<PathBuf>,
    /// `--rig`: checked on the host, then handed to the guest's nvtest (its commands run
    /// in the guest, on the guest's view of the drive).
    pub rig: Option<PathBuf>,
    /// `--firmware`, copied into the guest.
    pub firmware: Option<PathBuf>,
    pub safety: SafetyOptions,
    /// Where the JUnit report goes on the host.
    pub junit: Option<PathBuf>,
    /// Where the JSON run record goes on the host (the guest nvtest's record: its
    /// target is the guest's `/dev/nvmeN`).
    pub json: Option<PathBuf>,
    pub setup: Vec<SetupStep>,
    pub timeouts: Timeouts,
    /// Print progress and the guest nvtest's console on stdout as they come.
    pub echo: bool,
    /// The kernel and initramfs; `None`: [`image`] finds or builds them.
    pub image: Option<GuestImage>,
}

impl GuestRequest {
    /// A request for `target` with defaults: every option off, no JUnit, no setup,
    /// default timeouts, echo on.
    pub fn new(target: &TopologyRef, suites: Vec<PathBuf>) -> Result<GuestRequest, String> {
        let topology = target.load()?;
        Ok(GuestRequest {
            label: format!("qemu-linux:{}", target.describe()),
            topology,
            suites,
            filters: Vec::new(),
            exact: false,
            seed: None,
            skip: Vec::new(),
            expect: None,
            claims: None,
            rig: None,
            firmware: None,
            safety: SafetyOptions::default(),
            junit: None,
            json: None,
            setup: Vec::new(),
            timeouts: Timeouts::default(),
            echo: true,
            image: None,
        })
    }
}

/// A checksum the guest took of a namespace's block device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checksum {
    /// `before` or `after` nvtest ran.
    pub when: String,
    pub device: String,
    pub sha256: String,
}

/// How long each part took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timings {
    /// Finding or building the image (the recipe).
    pub image: Duration,
    /// QEMU start until nvtest started in the guest.
    pub boot: Duration,
    /// nvtest in the guest.
    pub run: Duration,
    /// QEMU start until it exited.
    pub guest_total: Duration,
}

/// What a guest run brought back.
#[derive(Clone, Debug, Default)]
pub struct GuestOutcome {
    /// The guest nvtest's exit status.
    pub exit_status: i32,
    /// The guest nvtest's console lines.
    pub console: Vec<String>,
    /// The init's progress lines (versions, controller, setup).
    pub stages: Vec<String>,
    /// The JUnit report the guest wrote.
    pub junit: Option<String>,
    /// The JSON record it wrote, when `--json` was asked for.
    pub json: Option<String>,
    pub checksums: Vec<Checksum>,
    pub kernel_log: Vec<String>,
    /// The arguments nvtest got in the guest (before the controller node).
    pub nvtest_args: Vec<String>,
    /// The controller node nvtest ran against (`/dev/nvme0`).
    pub controller: String,
    pub timings: Timings,
}

/// Why a guest run could not do its job (exit status 2): one line, then context lines
/// (the last console lines, QEMU's stderr).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestError(pub String);

impl std::fmt::Display for GuestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GuestError {}

fn error(text: impl Into<String>) -> GuestError {
    GuestError(text.into())
}

// ---------------------------------------------------------------------------------
// The image.

/// The kernel and initramfs (and fio's archive): `NVTEST_GUEST_KERNEL` and
/// `NVTEST_GUEST_INITRD` (and `NVTEST_GUEST_FIO`) when both are set, else what the recipe prints (it builds what is missing; its progress goes
/// to stderr when `echo`, else into the error on failure).
pub fn image(echo: bool) -> Result<GuestImage, GuestError> {
    if let (Ok(kernel), Ok(initrd)) = (std::env::var("NVTEST_GUEST_KERNEL"), std::env::var("NVTEST_GUEST_INITRD")) {
        let image = GuestImage {
            kernel: kernel.into(),
            initrd: initrd.into(),
            fio_archive: std::env::var_os("NVTEST_GUEST_FIO").map(PathBuf::from),
            description: "prebuilt (NVTEST_GUEST_KERNEL, NVTEST_GUEST_INITRD)".into(),
        };
        for path in [&image.kernel, &image.initrd].into_iter().chain(image.fio_archive.as_ref()) {
            if !path.is_file() {
                return Err(error(format!("{}: no such file (from NVTEST_GUEST_KERNEL/INITRD/FIO)", path.display())));
            }
        }
        return Ok(image);
    }
    let recipe = recipe_path()?;
    let mut cmd = Command::new("bash");
    cmd.arg(&recipe).stdin(Stdio::null()).stdout(Stdio::piped());
    // The recipe stops its whole group once this process is gone, SIGKILL included
    // (fixtures/guest/owner-watch.sh).
    cmd.env("NVTEST_RECIPE_OWNER", std::process::id().to_string());
    cmd.stderr(if echo { Stdio::inherit() } else { Stdio::piped() });
    let cannot_run =
        |e: std::io::Error| error(format!("cannot run the guest recipe {} with bash: {e}", recipe.display()));
    // Its own process group, which SIGINT/SIGTERM to nvtest stops (bash, the cargo build
    // it runs, and bash's EXIT trap removing its work directory).
    let (child, _watched) = nvme::transport::qemu::spawn_watched_group(&mut cmd).map_err(cannot_run)?;
    let output = child.wait_with_output().map_err(cannot_run)?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let detail: Vec<&str> = stderr.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(error(format!(
            "the guest recipe {} failed ({}){}",
            recipe.display(),
            output.status,
            if detail.is_empty() {
                " (its messages are above)".to_string()
            } else {
                format!(":\n  {}", detail.join("\n  "))
            }
        )));
    }
    let value = |key: &str| {
        stdout.lines().find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('='))).map(str::to_string)
    };
    let (Some(kernel), Some(initrd)) = (value("kernel"), value("initrd")) else {
        return Err(error(format!(
            "the guest recipe {} printed no kernel=… and initrd=… lines: {stdout}",
            recipe.display()
        )));
    };
    let description = format!(
        "{}, {}",
        value("kernel_package").unwrap_or_else(|| "kernel ?".into()),
        value("busybox_package").unwrap_or_else(|| "busybox ?".into())
    );
    Ok(GuestImage {
        kernel: kernel.into(),
        initrd: initrd.into(),
        fio_archive: value("fio_archive").map(PathBuf::from),
        description,
    })
}

/// The recipe: `NVTEST_GUEST_RECIPE`, `./fixtures/guest/build.sh`, the one found walking
/// up from the executable, else the source tree's.
fn recipe_path() -> Result<PathBuf, GuestError> {
    if let Ok(path) = std::env::var("NVTEST_GUEST_RECIPE") {
        return Ok(path.into());
    }
    let rel = Path::new("fixtures").join("guest").join("build.sh");
    let mut candidates = vec![rel.clone()];
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().skip(1).map(|dir| dir.join(&rel)));
    }
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(&rel));
    candidates.into_iter().find(|p| p.is_file()).map(|p| std::fs::canonicalize(&p).unwrap_or(p)).ok_or_else(|| {
        error(
            "no guest recipe: looked for ./fixtures/guest/build.sh, above the executable and in the source tree; \
             run from a checkout of nvtest, or set NVTEST_GUEST_KERNEL and NVTEST_GUEST_INITRD",
        )
    })
}

// ---------------------------------------------------------------------------------
// What the guest gets.

/// The guest's run directory and nvtest's arguments for `request`.
struct Plan {
    /// Files under `/run/nvtest/`, relative.
    files: Vec<(String, Vec<u8>)>,
    args: Vec<String>,
    /// A line for the console about opt-ins added for the disposable drive.
    note: Option<String>,
    /// The controller's root-complex function (`0000:00:SS.0`).
    slot: String,
    namespaces: usize,
    /// The other controllers of its NVM subsystem the guest brings up (the ports).
    ports: Vec<String>,
    /// The setup runs fio (a `bench` step): fio's archive goes into the initramfs.
    needs_fio: bool,
}

fn plan(request: &GuestRequest) -> Result<Plan, GuestError> {
    let topology = &request.topology;
    let controller = topology
        .controllers
        .first()
        .ok_or_else(|| error(format!("{}: the topology has no controller", request.label)))?;
    let slot = match (&controller.root_port, controller.root_slot) {
        (Some(rp), _) => topology
            .root_ports
            .iter()
            .find(|p| &p.id == rp)
            .map(|p| p.root_slot)
            .ok_or_else(|| error(format!("{}: controller {}: no root port {rp}", request.label, controller.id)))?,
        (None, Some(slot)) => slot,
        (None, None) => return Err(error(format!("{}: controller {} has no address", request.label, controller.id))),
    };
    // The other controllers of its NVM subsystem: the guest kernel brings them up too, as
    // the dual-port cases' ports, each with its own namespace devices (native multipath
    // off, so that a command sent through a port's device goes through that controller).
    let siblings: Vec<&ControllerSpec> = topology
        .controllers
        .iter()
        .skip(1)
        .filter(|c| controller.subsystem.is_some() && c.subsystem == controller.subsystem)
        .collect();
    // The generic nodes the guest waits for: every attached namespace of each of them.
    let namespaces = std::iter::once(controller)
        .chain(siblings.iter().copied())
        .map(|c| {
            topology
                .namespaces
                .iter()
                .filter(|ns| !ns.detached)
                .filter(|ns| ns.controller == c.id || (ns.shared && c.subsystem.is_some()))
                .count()
        })
        .sum::<usize>();

    let mut files = Vec::new();
    let mut args = Vec::new();
    for (i, path) in request.suites.iter().enumerate() {
        let text = std::fs::read(path).map_err(|e| error(format!("{}: cannot read the suite: {e}", path.display())))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "suite.yaml".into());
        let rel = format!("suites/{i}-{name}");
        args.extend(["--suite".to_string(), format!("{GUEST_DIR}/{rel}")]);
        files.push((rel, text));
    }
    args.extend(["--junit".to_string(), Report::Junit.guest_path()]);
    if request.json.is_some() {
        args.extend(["--json".to_string(), Report::Json.guest_path()]);
    }
    for filter in &request.filters {
        args.extend(["--filter".to_string(), filter.clone()]);
    }
    for skip in &request.skip {
        args.extend(["--skip".to_string(), skip.clone()]);
    }
    if request.exact && !(request.filters.is_empty() && request.skip.is_empty()) {
        args.push("--exact".into());
    }
    if let Some(seed) = request.seed {
        args.extend(["--seed".to_string(), seed.to_string()]);
    }
    if let Some(path) = &request.expect {
        let findings = load_expected(path).map_err(error)?;
        let text = translated_findings(request, path, &findings);
        files.push(("expect.yaml".into(), text.into_bytes()));
        args.extend(["--expect".to_string(), format!("{GUEST_DIR}/expect.yaml")]);
    }
    if let Some(path) = &request.claims {
        crate::claims::load_claims(path).map_err(|e| error(e.to_string()))?;
        let text =
            std::fs::read(path).map_err(|e| error(format!("{}: cannot read the claims: {e}", path.display())))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "claims.yaml".into());
        let rel = format!("claims-{name}");
        args.extend(["--claims".to_string(), format!("{GUEST_DIR}/{rel}")]);
        files.push((rel, text));
    }
    if let Some(path) = &request.rig {
        crate::rig::load_rig(path).map_err(|e| error(e.to_string()))?;
        let text = std::fs::read(path).map_err(|e| error(format!("{}: cannot read the rig: {e}", path.display())))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "rig.yaml".into());
        let rel = format!("rig-{name}");
        args.extend(["--rig".to_string(), format!("{GUEST_DIR}/{rel}")]);
        files.push((rel, text));
    }
    if let Some(path) = &request.firmware {
        let image = crate::steps::firmware::VendorImage::load(path).map_err(error)?;
        args.extend(["--firmware".to_string(), format!("{GUEST_DIR}/firmware.bin")]);
        files.push(("firmware.bin".to_string(), image.bytes.clone()));
    }
    let safety = &request.safety;
    let mut note = None;
    if !safety.allow_destructive && safety.confirm_serial.is_none() && !safety.preserve {
        args.extend(["--allow-destructive".into(), "--confirm-serial".into(), controller.serial.clone()]);
        note = Some(format!(
            "QEMU's drive is disposable: the guest's nvtest gets --allow-destructive --confirm-serial {} \
             (give any of --allow-destructive, --confirm-serial, --preserve to pass your own)",
            controller.serial
        ));
    } else {
        if safety.allow_destructive {
            args.push("--allow-destructive".into());
        }
        if let Some(serial) = &safety.confirm_serial {
            args.extend(["--confirm-serial".to_string(), serial.clone()]);
        }
        if safety.preserve {
            args.push("--preserve".into());
        }
    }
    if let Some(arg) = args.iter().find(|a| a.contains('\n')) {
        return Err(error(format!("argument {arg:?} has a line break, which the guest's argument file cannot hold")));
    }
    let mut list = args.join("\n");
    list.push('\n');
    files.push(("args".into(), list.into_bytes()));
    files.push(("controller".into(), format!("0000:00:{slot:02x}.0\n").into_bytes()));
    files.push(("namespaces".into(), format!("{namespaces}\n").into_bytes()));
    if !siblings.is_empty() {
        files.push(("multipath".into(), b"N\n".to_vec()));
    }
    if !request.setup.is_empty() {
        let text: String = request.setup.iter().map(|s| format!("{}\n", s.line())).collect();
        files.push(("setup".into(), text.into_bytes()));
    }
    let needs_fio = request.setup.iter().any(|s| matches!(s, SetupStep::Bench(_)));
    let ports = siblings.iter().map(|c| c.id.clone()).collect();
    Ok(Plan { files, args, note, slot: format!("0000:00:{slot:02x}.0"), namespaces, ports, needs_fio })
}

/// The findings of `path` that apply to this lane (those without targets, and those
/// listing this `qemu-linux:` target), as an expected-findings file for every target:
/// the guest's nvtest sees its target as `/dev/nvmeN`.
fn translated_findings(request: &GuestRequest, path: &Path, findings: &[ExpectedFinding]) -> String {
    let mut entries = Vec::new();
    for f in findings {
        if !f.applies_to(&request.label) {
            continue;
        }
        let verdict = match f.verdict {
            ExpectedVerdict::Fail => "fail",
            ExpectedVerdict::Error => "error",
        };
        entries.push(serde_json::json!({"case": f.case, "reason": f.reason, "rule": f.rule, "verdict": verdict}));
    }
    let file = serde_json::json!({
        "target": format!("findings for {} (from {}, as the guest lane hands them to the guest)",
            request.label, path.display()),
        "expected": entries,
    });
    // JSON is YAML: the guest reads it with the same loader.
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_else(|_| "{}".into());
    text.push('\n');
    text
}

/// A cpio archive ("newc", what the kernel unpacks into the initramfs) of `files`
/// under `dir`, with the directories they need.
fn cpio_archive(dir: &str, files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ino = 0x4e56_0000u32;
    let mut entry = |out: &mut Vec<u8>, name: &str, mode: u32, data: &[u8]| {
        ino += 1;
        let nlink = if mode & 0o170000 == 0o040000 { 2 } else { 1 };
        let fields = [ino, mode, 0, 0, nlink, 0, data.len() as u32, 0, 0, 0, 0, name.len() as u32 + 1, 0];
        out.extend_from_slice(b"070701");
        for f in fields {
            out.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
        out.extend_from_slice(data);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    };
    let mut dirs: Vec<String> = Vec::new();
    let add_dir = |dirs: &mut Vec<String>, path: &str| {
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(part);
            if !dirs.contains(&at) {
                dirs.push(at.clone());
            }
        }
    };
    add_dir(&mut dirs, dir.trim_start_matches('/'));
    for (rel, _) in files {
        if let Some((parent, _)) = rel.rsplit_once('/') {
            add_dir(&mut dirs, &format!("{}/{parent}", dir.trim_start_matches('/')));
        }
    }
    for d in &dirs {
        entry(&mut out, d, 0o040755, &[]);
    }
    for (rel, data) in files {
        entry(&mut out, &format!("{}/{rel}", dir.trim_start_matches('/')), 0o100644, data);
    }
    entry(&mut out, "TRAILER!!!", 0, &[]);
    out
}

// ---------------------------------------------------------------------------------
// Files QEMU opens that never have a name.

/// A file without a name in the temporary directory (`O_TMPFILE`; where that is not
/// supported, a file unlinked right after it is created).
fn anonymous_file(what: &str) -> Result<File, GuestError> {
    let dir = std::env::temp_dir();
    let tmpfile = OpenOptions::new().read(true).write(true).mode(0o600).custom_flags(libc::O_TMPFILE).open(&dir);
    if let Ok(file) = tmpfile {
        return Ok(file);
    }
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("nvtest-guest-{}-{n}", std::process::id()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| error(format!("cannot create the {what} in {}: {e}", dir.display())))?;
    let _ = std::fs::remove_file(&path);
    Ok(file)
}

/// How QEMU opens `file`: through this process's descriptor.
fn fd_path(file: &File) -> String {
    format!("/proc/{}/fd/{}", std::process::id(), file.as_raw_fd())
}

/// The initramfs for this run: the recipe's, then fio's archive when the setup runs fio,
/// each padded to 512 bytes (the kernel reads an uncompressed archive only at a 4-byte
/// offset and skips zeros between archives), then the run's archive.
fn run_initrd(image: &GuestImage, plan: &Plan) -> Result<File, GuestError> {
    let mut parts = vec![&image.initrd];
    if plan.needs_fio {
        parts.push(image.fio_archive.as_ref().ok_or_else(|| {
            error(
                "the setup's bench step runs fio, but the guest image has no fio archive \
                 (the recipe printed no fio_archive=…; with a prebuilt image set NVTEST_GUEST_FIO)",
            )
        })?);
    }
    let mut file = anonymous_file("guest initramfs")?;
    let mut copied = 0;
    for path in parts {
        let mut part =
            File::open(path).map_err(|e| error(format!("cannot read the guest archive {}: {e}", path.display())))?;
        copied += std::io::copy(&mut part, &mut file)
            .map_err(|e| error(format!("cannot copy the guest archive {}: {e}", path.display())))?;
        let pad = (512 - copied % 512) % 512;
        file.write_all(&vec![0u8; pad as usize])
            .map_err(|e| error(format!("cannot write the guest initramfs: {e}")))?;
        copied += pad;
    }
    file.write_all(&cpio_archive(GUEST_DIR, &plan.files))
        .map_err(|e| error(format!("cannot write the guest initramfs: {e}")))?;
    file.flush().map_err(|e| error(format!("cannot write the guest initramfs: {e}")))?;
    Ok(file)
}

// ---------------------------------------------------------------------------------
// QEMU.

/// `kvm` when asked for, or when /dev/kvm opens and the CPU has VMX or SVM; else `tcg`.
fn accelerator() -> Result<&'static str, GuestError> {
    match std::env::var("NVTEST_GUEST_ACCEL").ok().as_deref().map(str::trim) {
        Some("kvm") => return Ok("kvm"),
        Some("tcg") => return Ok("tcg"),
        Some(other) => return Err(error(format!("NVTEST_GUEST_ACCEL={other}: write tcg or kvm"))),
        None => {}
    }
    let kvm = OpenOptions::new().read(true).write(true).open("/dev/kvm").is_ok();
    // A /dev/kvm without hardware virtualization (some nested sandboxes) starts but
    // never runs the guest: the CPU flags are checked too.
    let cpu_has_it = std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| {
            t.lines()
                .find(|l| l.starts_with("flags"))
                .is_some_and(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"))
        })
        .unwrap_or(false);
    Ok(if kvm && cpu_has_it { "kvm" } else { "tcg" })
}

/// Everything a started guest needs to stay alive: QEMU and the files it opened
/// through our descriptors.
struct Guest {
    child: Child,
    _files: Vec<File>,
    stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Guest {
    fn kill(&mut self) -> Option<ExitStatus> {
        let _ = self.child.kill();
        self.child.wait().ok()
    }

    /// QEMU's stderr so far (its first 200 lines).
    fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn stderr_text(&self) -> String {
        let lines = self.stderr.lock().map(|l| l.clone()).unwrap_or_default();
        let lines: Vec<String> =
            lines.into_iter().filter(|l| !l.contains("host doesn't support requested feature")).collect();
        if lines.is_empty() {
            String::new()
        } else {
            format!("\n  QEMU: {}", lines.join("\n  QEMU: "))
        }
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

/// QEMU's `aio=` for a disk.
fn aio_name(aio: DiskAio) -> &'static str {
    match aio {
        DiskAio::IoUring => "io_uring",
        DiskAio::Threads => "threads",
    }
}

fn start_guest(
    request: &GuestRequest,
    image: &GuestImage,
    plan: &Plan,
) -> Result<(Guest, mpsc::Receiver<String>), GuestError> {
    let accel = accelerator()?;
    let initrd = run_initrd(image, plan)?;
    let topology = &request.topology;
    let memory = topology.machine.memory_mb.max(512);
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(["-machine", "q35", "-accel", accel, "-smp", "1", "-m", &format!("{memory}M")]);
    cmd.args(["-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio", "-no-reboot"]);
    cmd.arg("-kernel").arg(&image.kernel);
    cmd.arg("-initrd").arg(fd_path(&initrd));
    cmd.args(["-append", "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init"]);
    let mut files = vec![initrd];
    for ns in &topology.namespaces {
        let node = ns.node_name();
        let disk = anonymous_file(&format!("image of namespace {}", ns.nsid))?;
        disk.set_len(ns.image_bytes())
            .map_err(|e| error(format!("cannot size the image of namespace {}: {e}", ns.nsid)))?;
        cmd.arg("-blockdev").arg(format!(
            "driver=file,node-name={node}-file,filename={},aio={},discard=unmap",
            fd_path(&disk),
            aio_name(topology.machine.disk_aio)
        ));
        cmd.arg("-blockdev").arg(format!("driver=raw,node-name={node},file={node}-file,discard=unmap"));
        files.push(disk);
    }
    cmd.args(topology.device_args());
    // For experiments (another firmware, tracing): split at whitespace, appended as is.
    if let Ok(extra) = std::env::var("NVTEST_GUEST_QEMU_ARGS") {
        cmd.args(extra.split_whitespace());
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // Its own process group: a terminal's Ctrl-C stops nvtest, and QEMU follows it.
    cmd.process_group(0);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe
    // calls (prctl, getppid); it does not allocate.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // nvtest may have died before the prctl: then nobody would kill QEMU.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| {
        error(format!(
            "cannot run qemu-system-x86_64: {e}; install QEMU 10.0 from bookworm-backports \
             (`apt-get install -t bookworm-backports qemu-system-x86`)"
        ))
    })?;
    let (Some(stdout), Some(stderr_pipe)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(error("QEMU started without its console pipes"));
    };
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = stderr.clone();
    let spawned = std::thread::Builder::new().name("nvtest-guest-stderr".into()).spawn(move || {
        for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
            if let Ok(mut lines) = sink.lock() {
                if lines.len() < 200 {
                    lines.push(line);
                }
            }
        }
    });
    let (tx, rx) = mpsc::channel();
    let spawned_out = std::thread::Builder::new().name("nvtest-guest-console".into()).spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    let line = line.trim_end_matches(['\n', '\r']).replace('\r', "");
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let mut guest = Guest { child, _files: files, stderr };
    if spawned.is_err() || spawned_out.is_err() {
        guest.kill();
        return Err(error("cannot start the threads that read QEMU's console"));
    }
    Ok((guest, rx))
}

// ---------------------------------------------------------------------------------
// The run.

/// Where the console reader is in the init's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before nvtest starts: kernel messages and the init's progress.
    Boot,
    /// nvtest's console, until `END rc`.
    Run,
    /// After nvtest: checksums, the report, the kernel log, `DONE`.
    After,
    /// The base64 lines of a report file (`JUNIT-BEGIN` / `JSON-BEGIN` to its `-END`).
    Report(Report),
    Dmesg,
}

/// The files nvtest writes in the guest that come back to the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Report {
    Junit,
    Json,
}

impl Report {
    const ALL: [Report; 2] = [Report::Junit, Report::Json];

    /// Its name in the init's markers (`JUNIT-BEGIN`) and in messages.
    fn marker(self) -> &'static str {
        match self {
            Report::Junit => "JUNIT",
            Report::Json => "JSON",
        }
    }

    /// The report whose `NAME-BEGIN sha256 length` marker `m` is.
    fn begun(m: &str) -> Option<Report> {
        Report::ALL.into_iter().find(|r| m.strip_prefix(r.marker()).is_some_and(|rest| rest.starts_with("-BEGIN ")))
    }

    fn what(self) -> &'static str {
        match self {
            Report::Junit => "JUnit report",
            Report::Json => "JSON record",
        }
    }

    /// Where nvtest in the guest writes it.
    fn guest_path(self) -> String {
        match self {
            Report::Junit => format!("{GUEST_DIR}/junit.xml"),
            Report::Json => format!("{GUEST_DIR}/record.json"),
        }
    }
}

/// One report's base64 text as it arrives, and the length the init announced.
#[derive(Default)]
struct Incoming {
    base64: String,
    len: Option<usize>,
}

/// What a console line meant for the run.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    /// The guest printed `DONE` (it powers off next).
    Done,
    /// The init gave up (`FATAL`), with its kernel log if it printed one.
    Fatal,
}

/// The host's side of the init's console protocol (see `fixtures/guest/init`): reads the
/// lines one by one, shows what is for the user, keeps the rest.
struct Transcript {
    phase: Phase,
    echo: bool,
    /// Where the host writes the JUnit report and the JSON record (for the report lines
    /// nvtest prints).
    junit_path: Option<PathBuf>,
    json_path: Option<PathBuf>,
    /// The last lines, for error messages.
    tail: VecDeque<String>,
    outcome: GuestOutcome,
    exit_status: Option<i32>,
    /// The reports arriving, in [`Report::ALL`] order.
    incoming: [Incoming; 2],
    fatal: Option<String>,
    run_started: Option<Instant>,
}

impl Transcript {
    fn new(echo: bool, junit_path: Option<PathBuf>, json_path: Option<PathBuf>) -> Transcript {
        Transcript {
            phase: Phase::Boot,
            echo,
            junit_path,
            json_path,
            tail: VecDeque::new(),
            outcome: GuestOutcome::default(),
            exit_status: None,
            incoming: Default::default(),
            fatal: None,
            run_started: None,
        }
    }

    fn show(&self, line: &str) {
        if self.echo {
            say!("{line}");
        }
    }

    fn feed(&mut self, line: String) -> Flow {
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line.clone());
        let marker = line.strip_prefix(MARK);
        match (self.phase, marker) {
            (Phase::Report(r), Some(m)) if m.strip_suffix("-END") == Some(r.marker()) => self.phase = Phase::After,
            (Phase::Report(r), _) => self.incoming[r as usize].base64.push_str(line.trim()),
            (Phase::Dmesg, Some("DMESG-END")) => {
                if self.fatal.is_some() {
                    return Flow::Fatal;
                }
                self.phase = if self.exit_status.is_some() { Phase::After } else { Phase::Boot };
            }
            (Phase::Dmesg, _) => self.outcome.kernel_log.push(line),
            (Phase::Run, Some(m)) if m.starts_with("END ") => {
                self.exit_status = Some(m[4..].trim().parse::<i32>().unwrap_or(255));
                self.outcome.timings.run = self.run_started.map(|s| s.elapsed()).unwrap_or_default();
                self.phase = Phase::After;
            }
            (Phase::Run, _) => {
                let line = rewrite_report_line(&line, self.junit_path.as_deref(), self.json_path.as_deref());
                self.show(&line);
                self.outcome.console.push(line);
            }
            (_, Some(m)) if m.starts_with("STAGE ") => {
                self.show(&format!("guest: {}", &m[6..]));
                self.outcome.stages.push(m[6..].to_string());
            }
            (_, Some(m)) if m.starts_with("CHECKSUM ") => {
                if let [_, when, device, sha256] = m.split_whitespace().collect::<Vec<_>>()[..] {
                    self.show(&format!("guest: sha256 of {device} {when} nvtest: {sha256}"));
                    let checksum = Checksum { when: when.into(), device: device.into(), sha256: sha256.into() };
                    self.outcome.checksums.push(checksum);
                }
            }
            (_, Some(m)) if m.starts_with("FATAL ") => {
                // The init prints its kernel log next, then powers off.
                self.fatal = Some(m[6..].to_string());
            }
            (_, Some("DMESG-BEGIN")) => self.phase = Phase::Dmesg,
            (Phase::Boot, Some(m)) if m.starts_with("BEGIN ") => {
                self.outcome.controller = m[6..].trim().to_string();
                self.run_started = Some(Instant::now());
                self.phase = Phase::Run;
            }
            (Phase::After, Some(m)) if Report::begun(m).is_some() => {
                if let Some(report) = Report::begun(m) {
                    self.incoming[report as usize].len = m.split_whitespace().nth(2).and_then(|n| n.parse().ok());
                    self.phase = Phase::Report(report);
                }
            }
            (_, Some("DONE")) => return Flow::Done,
            _ => {}
        }
        Flow::Continue
    }

    fn tail_text(&self) -> String {
        self.tail.iter().cloned().collect::<Vec<_>>().join("\n  ")
    }

    /// The outcome of a guest that printed `DONE`, or why there is none.
    fn finish(mut self, label: &str) -> Result<GuestOutcome, GuestError> {
        let Some(exit_status) = self.exit_status else {
            return Err(error(format!(
                "{label}: the guest finished without running nvtest. Last console lines:\n  {}",
                self.tail_text()
            )));
        };
        self.outcome.exit_status = exit_status;
        self.outcome.junit = self.received(label, Report::Junit)?;
        self.outcome.json = self.received(label, Report::Json)?;
        Ok(self.outcome)
    }

    /// The text of `report`, when the init sent it, checked against its length.
    fn received(&self, label: &str, report: Report) -> Result<Option<String>, GuestError> {
        let incoming = &self.incoming[report as usize];
        let Some(expected) = incoming.len else {
            return Ok(None);
        };
        let what = report.what();
        let bytes = base64_decode(&incoming.base64)
            .map_err(|e| error(format!("{label}: the {what} from the guest is damaged: {e}")))?;
        if bytes.len() != expected {
            return Err(error(format!(
                "{label}: the {what} from the guest is damaged: {} bytes arrived, {expected} were sent",
                bytes.len()
            )));
        }
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| error(format!("{label}: the {what} from the guest is not UTF-8")))
    }

    /// The error of an init that gave up: its message and the end of the kernel log.
    fn fatal_error(&self, label: &str) -> GuestError {
        let message = self.fatal.clone().unwrap_or_default();
        let log = &self.outcome.kernel_log;
        let log: Vec<&str> = log[log.len().saturating_sub(25)..].iter().map(String::as_str).collect();
        let log = if log.is_empty() { String::new() } else { format!("\n  kernel: {}", log.join("\n  kernel: ")) };
        error(format!("{label}: the guest could not run nvtest: {message}{log}"))
    }
}

/// Boots the guest, runs nvtest there and brings back what it printed and wrote. The
/// JUnit report goes to `request.junit` when given.
pub fn execute(request: &GuestRequest) -> Result<GuestOutcome, GuestError> {
    let started = Instant::now();
    let label = &request.label;
    let plan = plan(request)?;
    let image = match &request.image {
        Some(image) => image.clone(),
        None => image(request.echo)?,
    };
    let image_time = started.elapsed();
    if request.echo {
        say!(
            "{label}: booting Linux ({}) on QEMU, controller {} at {}{} with {} namespace device(s)",
            image.description,
            request.topology.controllers[0].id,
            plan.slot,
            if plan.ports.is_empty() {
                String::new()
            } else {
                format!(
                    " and {} of its NVM subsystem (the ports; nvme_core multipath=N, a namespace device per \
                     controller)",
                    plan.ports.join(", ")
                )
            },
            plan.namespaces
        );
        if let Some(note) = &plan.note {
            say!("{label}: {note}");
        }
    }
    for (path, what) in [(&request.junit, "JUnit report"), (&request.json, "JSON record")] {
        if let Some(dir) = path.as_ref().and_then(|p| p.parent()).filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| error(format!("cannot create {} for the {what}: {e}", dir.display())))?;
        }
    }

    // The namespaces' images go to TMPDIR, as the guestless lane's do: too little room
    // there is refused before the guest boots (a full disk under the images would
    // complete the guest's writes with Write Fault).
    let image_bytes: u64 = request.topology.namespaces.iter().map(|ns| ns.image_bytes()).sum();
    nvme::transport::qemu::check_image_space(&std::env::temp_dir(), image_bytes)
        .map_err(|e| error(format!("{label}: {e}")))?;

    let boot_started = Instant::now();
    let (mut guest, console) = start_guest(request, &image, &plan)?;
    let boot_deadline = boot_started + request.timeouts.boot;
    let deadline = boot_started + request.timeouts.total;
    let mut transcript = Transcript::new(request.echo, request.junit.clone(), request.json.clone());
    let mut boot_time = None;
    let flow = loop {
        let booting = transcript.phase == Phase::Boot && transcript.exit_status.is_none();
        let limit = if booting { boot_deadline.min(deadline) } else { deadline };
        let now = Instant::now();
        if now >= limit {
            let status = guest.kill();
            let what = if booting {
                format!("the guest did not start nvtest within {} s of QEMU's start", request.timeouts.boot.as_secs())
            } else {
                format!("the guest did not finish within {} s (NVTEST_GUEST_TIMEOUT)", request.timeouts.total.as_secs())
            };
            return Err(error(format!(
                "{label}: {what}; QEMU was killed ({}). Last console lines:\n  {}{}",
                status.map(|s| s.to_string()).unwrap_or_else(|| "not reaped".into()),
                transcript.tail_text(),
                guest.stderr_text()
            )));
        }
        let line = match console.recv_timeout(limit - now) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break None,
        };
        let flow = transcript.feed(line);
        if transcript.phase == Phase::Run && boot_time.is_none() {
            let boot = boot_started.elapsed();
            boot_time = Some(boot);
            if request.echo {
                say!(
                    "guest: booted in {:.1} s; nvtest {} {}",
                    boot.as_secs_f64(),
                    plan.args.join(" "),
                    transcript.outcome.controller
                );
            }
        }
        if flow != Flow::Continue {
            break Some(flow);
        }
    };
    // The guest powers off after DONE and FATAL; QEMU then exits by itself.
    let qemu_exit = wait_exit(&mut guest.child, Duration::from_secs(10)).or_else(|| guest.kill());
    let guest_total = boot_started.elapsed();
    let mut outcome = match flow {
        Some(Flow::Done) => transcript.finish(label)?,
        Some(Flow::Fatal) => return Err(transcript.fatal_error(label)),
        _ if transcript.fatal.is_some() => return Err(transcript.fatal_error(label)),
        _ => {
            let when = match transcript.exit_status {
                Some(status) => format!("after nvtest exited with {status}, before handing back its report"),
                None => "before nvtest finished in the guest".to_string(),
            };
            return Err(error(format!(
                "{label}: QEMU {} {when}. Last console lines:\n  {}{}",
                qemu_exit.map(|s| format!("ended ({s})")).unwrap_or_else(|| "stopped".into()),
                transcript.tail_text(),
                guest.stderr_text()
            )));
        }
    };
    // The host failed QEMU's images (a full TMPDIR): what the guest's nvtest judged
    // meanwhile is not the drive's doing, so its reports are not handed on as verdicts.
    let faults = nvme::transport::qemu::image_faults(&guest.stderr_lines(), &std::env::temp_dir());
    if !faults.is_empty() {
        let messages: Vec<String> = faults.into_iter().map(|f| f.message).collect();
        return Err(error(format!(
            "{label}: {}; nvtest in the guest exited with {} — its verdicts are void and its reports are not \
             written, since the drive saw the host's fault as its own",
            messages.join("; "),
            outcome.exit_status
        )));
    }
    outcome.nvtest_args = plan.args.clone();
    outcome.timings =
        Timings { image: image_time, boot: boot_time.unwrap_or_default(), guest_total, ..outcome.timings };
    let exit_status = outcome.exit_status;
    for (text, path, what) in
        [(&outcome.junit, &request.junit, "JUnit report"), (&outcome.json, &request.json, "JSON record")]
    {
        match (text, path) {
            // As the host's own reports: a device or FIFO in place, a regular file atomically.
            (Some(text), Some(path)) => crate::report::output::write(path, what, text.as_bytes()).map_err(error)?,
            (None, Some(_)) if exit_status != EXIT_USAGE => {
                return Err(error(format!("{label}: nvtest in the guest wrote no {what}")))
            }
            _ => {}
        }
    }
    if request.echo {
        let show_all = std::env::var("NVTEST_GUEST_KERNEL_LOG").is_ok_and(|v| v == "1");
        if show_all || exit_status != EXIT_OK {
            let lines = kernel_log_summary(&outcome.kernel_log, show_all);
            if !lines.is_empty() {
                say!("guest kernel log{}:", if show_all { "" } else { " (nvme and filesystem lines)" });
                for l in lines.iter().rev().take(60).rev() {
                    say!("  {l}");
                }
            }
        }
        let t = &outcome.timings;
        say!(
            "{label}: image {:.1} s, boot {:.1} s, nvtest {:.1} s, guest total {:.1} s; nvtest in the guest exited with {exit_status}",
            t.image.as_secs_f64(),
            t.boot.as_secs_f64(),
            t.run.as_secs_f64(),
            t.guest_total.as_secs_f64()
        );
    }
    Ok(outcome)
}

/// The kernel log lines to show (all, or those about nvme and filesystems), each
/// message once, with how often it came when more than once.
fn kernel_log_summary(log: &[String], all: bool) -> Vec<String> {
    let mut seen: Vec<(String, String, usize)> = Vec::new();
    for line in log {
        if !(all || line.contains("nvme") || line.contains("EXT")) {
            continue;
        }
        // "[   30.59] nvme nvme0: …": the message without its time stamp.
        let message = match line.trim_start().strip_prefix('[') {
            Some(rest) => rest.split_once("] ").map(|(_, m)| m).unwrap_or(line),
            None => line,
        };
        match seen.iter_mut().find(|(m, _, _)| m == message) {
            Some(entry) => entry.2 += 1,
            None => seen.push((message.to_string(), line.clone(), 1)),
        }
    }
    seen.into_iter()
        .map(|(_, first, n)| if n > 1 { format!("{first} (and {} more times)", n - 1) } else { first })
        .collect()
}

/// The guest nvtest's "JUnit report: /run/nvtest/junit.xml (…)" and "JSON record:
/// /run/nvtest/record.json (…)" lines, as the host has them.
fn rewrite_report_line(line: &str, junit: Option<&Path>, json: Option<&Path>) -> String {
    for (report, host, flag) in [(Report::Junit, junit, "--junit"), (Report::Json, json, "--json")] {
        let what = report.what();
        if let Some(rest) = line.strip_prefix(&format!("{what}: {}", report.guest_path())) {
            return match host {
                Some(path) => format!("{what}: {}{rest}", path.display()),
                None => format!("{what}: not written (give {flag} PATH)"),
            };
        }
    }
    line.to_string()
}

fn wait_exit(child: &mut Child, bound: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + bound;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

/// Standard base64 (RFC 4648, with padding), as busybox writes it; whitespace ignored,
/// anything else outside the alphabet is an error (a stray console line).
fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    let mut padding = 0;
    for (i, c) in text.bytes().enumerate() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padding += 1;
                continue;
            }
            b' ' | b'\t' | b'\n' | b'\r' => continue,
            other => return Err(format!("byte {other:#04x} at offset {i} is not base64")),
        };
        if padding > 0 {
            return Err(format!("data after padding at offset {i}"));
        }
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_what_busybox_writes() {
        assert_eq!(base64_decode("aGVsbG8gd29ybGQ=").unwrap(), b"hello world");
        assert_eq!(base64_decode("YQ==\n").unwrap(), b"a");
        assert_eq!(base64_decode("YWI=").unwrap(), b"ab");
        assert_eq!(base64_decode("YWJj").unwrap(), b"abc");
        let e = base64_decode("YWJj[ 1.0] nvme").unwrap_err();
        assert!(e.contains("not base64"), "{e}");
    }

    #[test]
    fn setup_steps_parse_and_refuse_what_they_do_not_know() {
        assert_eq!(
            SetupStep::parse_list("mount 1; checksum 1\nchecksum 2").unwrap(),
            [SetupStep::Mount(1), SetupStep::Checksum(1), SetupStep::Checksum(2)]
        );
        let all = "loop 1; loop-mount 2; loop-file 3; map 4; raw-write 5; late-loop 6";
        let steps = SetupStep::parse_list(all).unwrap();
        assert_eq!(
            steps,
            [
                SetupStep::Loop(1),
                SetupStep::LoopMount(2),
                SetupStep::LoopFile(3),
                SetupStep::Map(4),
                SetupStep::RawWrite(5),
                SetupStep::LateLoop(6)
            ]
        );
        assert_eq!(steps.iter().map(SetupStep::line).collect::<Vec<_>>().join("; "), all);
        assert!(SetupStep::parse_list("format 1").unwrap_err().contains("unknown step `format`"));
        assert!(SetupStep::parse_list("mount x").unwrap_err().contains("not a namespace ID"));
        assert!(SetupStep::parse_list("mount").unwrap_err().contains("write `mount NSID`"));
        assert_eq!(SetupStep::parse_list("target /dev/null").unwrap(), [SetupStep::Target("/dev/null".into())]);
        assert!(SetupStep::parse_list("target dev/null").unwrap_err().contains("not an absolute path"));
    }

    #[test]
    fn the_run_archive_is_newc_with_its_directories() {
        let archive = cpio_archive("/run/nvtest", &[("suites/0-a.yaml".into(), b"abc".to_vec())]);
        let text = String::from_utf8_lossy(&archive);
        for name in ["run\0", "run/nvtest\0", "run/nvtest/suites\0", "run/nvtest/suites/0-a.yaml\0", "TRAILER!!!\0"] {
            assert!(text.contains(name), "{name:?} missing");
        }
        assert!(archive.starts_with(b"070701"));
        assert_eq!(archive.len() % 4, 0);
    }

    #[test]
    fn two_controllers_of_one_subsystem_come_up_each_with_its_own_namespace_devices() {
        let target = TopologyRef::Builtin("dual".into());
        let p = plan(&GuestRequest::new(&target, vec![]).unwrap()).unwrap();
        assert_eq!(p.ports, ["ctrl1"]);
        // Shared namespaces 1 and 2 on each controller; 3 is detached.
        assert_eq!(p.namespaces, 4);
        let file = |name: &str| p.files.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone());
        assert_eq!(file("multipath").as_deref(), Some(&b"N\n"[..]), "native multipath off");
        let single = plan(&GuestRequest::new(&TopologyRef::Builtin("ns32".into()), vec![]).unwrap()).unwrap();
        assert!(single.ports.is_empty() && !single.files.iter().any(|(n, _)| n == "multipath"));
    }

    #[test]
    fn disposable_drives_get_the_opt_ins_and_given_flags_pass_as_given() {
        let target = TopologyRef::Builtin("ns32".into());
        let request = GuestRequest::new(&target, vec![]).unwrap();
        let p = plan(&request).unwrap();
        assert!(p.args.ends_with(&["--allow-destructive".into(), "--confirm-serial".into(), "NVTQ32000001".into()]));
        assert!(p.note.is_some());
        assert_eq!(p.slot, "0000:00:01.0");
        assert_eq!(p.namespaces, 32);
        let mut request = request;
        request.safety.preserve = true;
        let p = plan(&request).unwrap();
        assert!(p.args.ends_with(&["--preserve".into()]) && !p.args.contains(&"--allow-destructive".into()));
        assert!(p.note.is_none());
    }

    #[test]
    fn fio_goes_into_the_initramfs_only_for_a_bench_run() {
        use std::io::{Read, Seek};
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let mut image = GuestImage {
            kernel: write("vmlinuz", b"k"),
            initrd: write("base.cpio.gz", b"BASE"),
            fio_archive: Some(write("fio.cpio.gz", b"FIO-ARCHIVE")),
            description: String::new(),
        };
        let target = TopologyRef::Builtin("ns32".into());
        let mut request = GuestRequest::new(&target, vec![]).unwrap();
        let contents = |image: &GuestImage, request: &GuestRequest| {
            let mut file = run_initrd(image, &plan(request).unwrap())?;
            file.rewind().unwrap();
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).unwrap();
            Ok::<_, GuestError>(bytes)
        };
        let lane = contents(&image, &request).unwrap();
        assert!(lane.starts_with(b"BASE\0") && lane[512..].starts_with(b"070701"));
        assert!(!lane.windows(11).any(|w| w == b"FIO-ARCHIVE"), "fio appended to a run without bench");

        request.setup = vec![SetupStep::Bench(1)];
        let bench = contents(&image, &request).unwrap();
        assert!(bench[512..].starts_with(b"FIO-ARCHIVE\0"));
        assert!(bench[1024..].starts_with(b"070701"), "the run's archive follows fio's at 512 bytes");

        image.fio_archive = None;
        let e = contents(&image, &request).unwrap_err().to_string();
        assert!(e.contains("no fio archive") && e.contains("NVTEST_GUEST_FIO"), "{e}");
    }

    #[test]
    fn repeated_kernel_messages_are_shown_once() {
        let log: Vec<String> = [
            "[ 1.0] nvme nvme0: bogus",
            "[ 1.1] nvme nvme0: bogus",
            "[ 1.2] random: crng",
            "[ 1.3] EXT4-fs (nvme0n1): mounted",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            kernel_log_summary(&log, false),
            ["[ 1.0] nvme nvme0: bogus (and 1 more times)", "[ 1.3] EXT4-fs (nvme0n1): mounted"]
        );
        assert_eq!(kernel_log_summary(&log, true).len(), 3);
    }

    fn transcript(lines: &[&str]) -> (Transcript, Vec<Flow>) {
        let mut t = Transcript::new(false, Some("r/x.xml".into()), None);
        let flows = lines.iter().map(|l| t.feed(l.to_string())).collect();
        (t, flows)
    }

    #[test]
    fn the_console_protocol_is_read_as_the_init_writes_it() {
        let (t, flows) = transcript(&[
            "[    0.1] early kernel line",
            "@@NVTEST-STAGE booted",
            "@@NVTEST-CHECKSUM before /dev/nvme0n1 abc",
            "@@NVTEST-BEGIN /dev/nvme0",
            "test namespaces::identify-controller ... ok",
            "@@NVTEST-STAGE not a marker inside nvtest's output",
            "JUnit report: /run/nvtest/junit.xml (1 cases: 1 passed)",
            "@@NVTEST-END 1",
            "@@NVTEST-CHECKSUM after /dev/nvme0n1 abc",
            "@@NVTEST-JUNIT-BEGIN 0123 11",
            "aGVsbG8gd29y",
            "bGQ=",
            "@@NVTEST-JUNIT-END",
            "@@NVTEST-JSON-BEGIN 4567 2",
            "e30=",
            "@@NVTEST-JSON-END",
            "@@NVTEST-DMESG-BEGIN",
            "[    1.0] nvme nvme0: pci function 0000:00:01.0",
            "@@NVTEST-DMESG-END",
            "@@NVTEST-DONE",
        ]);
        assert_eq!(flows.last(), Some(&Flow::Done));
        assert!(flows[..flows.len() - 1].iter().all(|f| *f == Flow::Continue));
        let o = t.finish("qemu-linux:ns32").unwrap();
        assert_eq!(o.exit_status, 1);
        assert_eq!(o.controller, "/dev/nvme0");
        assert_eq!(o.stages, ["booted"]);
        assert_eq!(
            o.console,
            [
                "test namespaces::identify-controller ... ok",
                "@@NVTEST-STAGE not a marker inside nvtest's output",
                "JUnit report: r/x.xml (1 cases: 1 passed)"
            ]
        );
        assert_eq!(o.checksums.len(), 2);
        assert_eq!(o.junit.as_deref(), Some("hello world"));
        assert_eq!(o.json.as_deref(), Some("{}"));
        assert_eq!(o.kernel_log, ["[    1.0] nvme nvme0: pci function 0000:00:01.0"]);
    }

    #[test]
    fn a_damaged_report_or_a_missing_run_is_an_error() {
        let (t, _) = transcript(&[
            "@@NVTEST-BEGIN /dev/nvme0",
            "@@NVTEST-END 0",
            "@@NVTEST-JUNIT-BEGIN 0123 11",
            "aGVsbG8gd29y",
            "[   3.2] nvme nvme0: I/O 12 QID 1 timeout",
            "bGQ=",
            "@@NVTEST-JUNIT-END",
            "@@NVTEST-DONE",
        ]);
        let e = t.finish("qemu-linux:ns32").unwrap_err().to_string();
        assert!(e.contains("the JUnit report from the guest is damaged") && e.contains("not base64"), "{e}");
        let (t, _) = transcript(&[
            "@@NVTEST-BEGIN /dev/nvme0",
            "@@NVTEST-END 0",
            "@@NVTEST-JUNIT-BEGIN 0123 12",
            "aGVsbG8gd29ybGQ=",
            "@@NVTEST-JUNIT-END",
            "@@NVTEST-DONE",
        ]);
        let e = t.finish("qemu-linux:ns32").unwrap_err().to_string();
        assert!(e.contains("11 bytes arrived, 12 were sent"), "{e}");
        let (t, flows) = transcript(&[
            "@@NVTEST-FATAL no live NVMe controller",
            "@@NVTEST-DMESG-BEGIN",
            "[ 1.0] x",
            "@@NVTEST-DMESG-END",
        ]);
        assert_eq!(flows.last(), Some(&Flow::Fatal));
        let e = t.fatal_error("qemu-linux:ns32").to_string();
        assert_eq!(e, "qemu-linux:ns32: the guest could not run nvtest: no live NVMe controller\n  kernel: [ 1.0] x");
    }

    #[test]
    fn report_lines_name_the_hosts_file() {
        let line = "JUnit report: /run/nvtest/junit.xml (3 cases: 3 passed)";
        let junit = Some(Path::new("r/x.xml"));
        assert_eq!(rewrite_report_line(line, junit, None), "JUnit report: r/x.xml (3 cases: 3 passed)");
        assert_eq!(rewrite_report_line(line, None, None), "JUnit report: not written (give --junit PATH)");
        let line = "JSON record: /run/nvtest/record.json (3 cases: 3 passed)";
        assert_eq!(
            rewrite_report_line(line, junit, Some(Path::new("r.json"))),
            "JSON record: r.json (3 cases: 3 passed)"
        );
        assert_eq!(rewrite_report_line(line, junit, None), "JSON record: not written (give --json PATH)");
        assert_eq!(rewrite_report_line("other", None, None), "other");
    }
}
