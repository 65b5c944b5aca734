//! `nvtest-guest-helper`: the few actions the Linux-guest lane's PID 1
//! (`fixtures/guest/init`) needs for the safety tests that busybox cannot do. It is
//! built statically beside nvtest by `fixtures/guest/build.sh` and is no part of a run.
//!
//! - `map DEVICE READY`: maps DEVICE (a namespace's block device) shared, read-write,
//!   closes the descriptor, creates the file READY, and sleeps until killed: a process
//!   using the drive that has no descriptor of it, only a mapping. It never writes.
//! - `raw-write CONTROLLER NSID LBA_BYTES`: one NVM Write of logical block 0 of NSID
//!   through the controller's passthrough ioctl, which the block device's page cache
//!   does not see: the write a checksum read through the cache would miss. Refused when
//!   a logical block is larger than 1024 bytes, so that a filesystem of the ext family
//!   (whose first 1024 bytes are unused) stays intact.
//!
//! - `uring-fixed DEVICE READY`: registers DEVICE as a fixed file of an io_uring ring,
//!   closes its own descriptor, creates READY and sleeps until killed: a process using
//!   the drive through a ring only. It never submits anything.
//! - `write-loop DEVICE`: opens DEVICE with O_DIRECT and overwrites its first 4 KiB with
//!   a pattern every 10 ms until killed (a writer that is not nvtest); prints `wrote …`
//!   once the first write is done.
//!
//! - `bench CONTROLLER NSID [SECONDS [ROUNDS]]`: nvtest's io_uring passthrough engine
//!   against fio's `io_uring_cmd` engine on the namespace's generic device, 4 KiB random
//!   reads at QD 32, alternately (default 5 s, 2 rounds each; [`nvtest::guest_bench`]).
//!   Prints a line per round and a RESULT line.
//!
//! Each other action prints one line; exit status 0 on success, 1 with the reason on stderr.

use std::fs::OpenOptions;
use std::path::Path;
use std::process::ExitCode;

use nvme::device::{Data, Device};
use nvme::linux::LinuxDevice;
use nvme::spec::nvm;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["map", device, ready] => map(Path::new(device), Path::new(ready)),
        ["uring-fixed", device, ready] => uring_fixed(Path::new(device), Path::new(ready)),
        ["write-loop", device] => write_loop(Path::new(device)),
        ["raw-write", controller, nsid, lba_bytes] => raw_write(Path::new(controller), nsid, lba_bytes),
        ["bench", controller, nsid, rest @ ..] if rest.len() <= 2 => bench(Path::new(controller), nsid, rest),
        _ => Err("usage: nvtest-guest-helper map DEVICE READY | uring-fixed DEVICE READY | write-loop DEVICE | \
                  raw-write CONTROLLER NSID LBA_BYTES | bench CONTROLLER NSID [SECONDS [ROUNDS]]"
            .into()),
    };
    match result {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("nvtest-guest-helper: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Maps 1 MiB of `device` and keeps only the mapping.
fn map(device: &Path, ready: &Path) -> Result<String, String> {
    let file =
        OpenOptions::new().read(true).write(true).open(device).map_err(|e| format!("{}: {e}", device.display()))?;
    // SAFETY: the mapping is only read, and stays alive until the process is killed.
    let mapping = unsafe { memmap2::MmapOptions::new().len(1 << 20).map_mut(&file) }
        .map_err(|e| format!("mmap {}: {e}", device.display()))?;
    drop(file);
    let first = mapping[0];
    std::fs::write(ready, format!("{}\n", std::process::id())).map_err(|e| format!("{}: {e}", ready.display()))?;
    println!("mapped 1 MiB of {} (first byte {first:#04x}), descriptor closed", device.display());
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        std::hint::black_box(&mapping);
    }
}

/// Registers `device` with an io_uring ring and keeps only the ring.
fn uring_fixed(device: &Path, ready: &Path) -> Result<String, String> {
    use std::os::fd::AsRawFd;
    let file =
        OpenOptions::new().read(true).write(true).open(device).map_err(|e| format!("{}: {e}", device.display()))?;
    let ring = io_uring::IoUring::new(8).map_err(|e| format!("io_uring_setup: {e}"))?;
    ring.submitter().register_files(&[file.as_raw_fd()]).map_err(|e| format!("IORING_REGISTER_FILES: {e}"))?;
    drop(file);
    std::fs::write(ready, format!("{}\n", std::process::id())).map_err(|e| format!("{}: {e}", ready.display()))?;
    println!("registered {} as fixed file 0 of an io_uring ring, descriptor closed", device.display());
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        std::hint::black_box(&ring);
    }
}

/// Overwrites the first 4 KiB of `device` every 10 ms, through O_DIRECT.
fn write_loop(device: &Path) -> Result<String, String> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(device)
        .map_err(|e| format!("{}: {e}", device.display()))?;
    // O_DIRECT wants an aligned buffer: 4 KiB inside an 8 KiB allocation.
    let mut backing = vec![0u8; 8192];
    let offset = backing.as_ptr().align_offset(4096);
    let block = &mut backing[offset..offset + 4096];
    for round in 0u64.. {
        block.iter_mut().enumerate().for_each(|(i, b)| *b = (i as u64 ^ round) as u8 | 0x80);
        if let Err(e) = file.write_all_at(block, 0) {
            return Err(format!("write to {}: {e}", device.display()));
        }
        if round == 0 {
            // The guest's init waits for this line before letting nvtest go on.
            println!("wrote the first 4 KiB of {}; again every 10 ms", device.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Ok(String::new())
}

/// Writes a recognisable block 0 of `nsid` through the passthrough ioctl.
fn raw_write(controller: &Path, nsid: &str, lba_bytes: &str) -> Result<String, String> {
    let nsid: u32 = nsid.parse().map_err(|_| format!("`{nsid}` is not a namespace ID"))?;
    let lba_bytes: usize = lba_bytes.parse().map_err(|_| format!("`{lba_bytes}` is not a block size"))?;
    if !(512..=1024).contains(&lba_bytes) {
        return Err(format!("logical blocks of {lba_bytes} bytes: only 512..=1024 keep an ext filesystem intact"));
    }
    let mut device = LinuxDevice::open(controller).map_err(|e| e.to_string())?;
    let qid = device.io_queues().first().copied().unwrap_or(1);
    let data: Vec<u8> = b"nvtest raw passthrough write ".iter().copied().cycle().take(lba_bytes).collect();
    let completion = device
        .io(qid, nvm::write(nsid, 0, 0, false), Data::ToDevice(&data), Data::None)
        .map_err(|e| format!("Write NSID {nsid} LBA 0: {e}"))?;
    if !completion.status().is_success() {
        return Err(format!("Write NSID {nsid} LBA 0 completed with {:?}", completion.status()));
    }
    Ok(format!("wrote LBA 0 of NSID {nsid} ({lba_bytes} bytes) through {}", controller.display()))
}

/// The io_uring benchmark ([`nvtest::guest_bench`]).
fn bench(controller: &Path, nsid: &str, rest: &[&str]) -> Result<String, String> {
    let nsid: u32 = nsid.parse().map_err(|_| format!("`{nsid}` is not a namespace ID"))?;
    let number = |i: usize, default: u64| -> Result<u64, String> {
        rest.get(i)
            .map_or(Ok(default), |t| t.parse().ok().filter(|n| *n > 0).ok_or_else(|| format!("`{t}` is not a count")))
    };
    let plan = nvtest::guest_bench::BenchPlan { seconds: number(0, 5)?, rounds: number(1, 2)? as usize };
    nvtest::guest_bench::run(controller, nsid, plan, &mut |line| println!("{line}"))?;
    Ok("bench: done".into())
}
