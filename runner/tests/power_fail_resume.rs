//! `nvtest resume JOURNAL`: a power-fail campaign on QEMU whose images outlive nvtest
//! (`machine: {image_dir: …}`) is SIGKILLed mid-campaign — QEMU dies with it, which is
//! the power cut — and `nvtest resume` judges the cycle from the journal with the verdict
//! an uninterrupted run gives (pass on QEMU), also from a journal cut short mid-record.
//! Its failing twin: a block of the range overwritten behind nvtest's back fails the
//! resume, naming the LBA; a journal of a namespace formatted since is an error, not a
//! failure of the drive. A journal of a simulated drive (whose media died with the run)
//! is refused. QEMU must be installed (these tests fail without it, never skip).

#[path = "common/record.rs"]
#[allow(dead_code)] // its figure reader is for other tests
mod record;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use record::nvtest;

const TOPOLOGY: &str = "name: kept
description: two namespaces whose images outlive nvtest
machine: {disk_aio: threads, image_dir: images}
controllers:
  - {id: nvme0, serial: NVTQKEPT0001}
namespaces:
  - {nsid: 1, controller: nvme0, lbads: 512, blocks: 65536}
  - {nsid: 2, controller: nvme0, lbads: 4096, blocks: 16384}
";

/// A campaign of `cycles` power cuts under a write load with Flush and FUA.
fn suite(cycles: u32) -> String {
    format!(
        "suite: pf-resume
title: a power-fail campaign to interrupt
spec: [NVMe 1.4 §6.4 Atomic Operations]
destructive: true
requires: [power_switch]
cases:
  - name: campaign
    title: power cuts under a write load
    rule: \"NVMe 1.4 §6.8 Flush, §6.15 Write (FUA), §6.4 Atomic Operations: what a power loss leaves\"
    steps:
      - use_namespaces: {{count: 2, lbads: [512, 4096], blocks: 4096}}
      - power_fail:
          cycles: {cycles}
          cut_within_ms: 50
          smart_counters: false
          jobs:
            - {{name: small, ns: 1, lba: 0, blocks: 2048, write: 97, flush: 3, fua: 10, sizes: [512, 4096, 16384], queue_depth: 16, duration_ms: 1000}}
            - {{name: large, ns: 2, lba: 0, blocks: 2048, write: 97, flush: 3, fua: 10, sizes: [4096, 32768], queue_depth: 16, duration_ms: 1000}}
"
    )
}

fn require_qemu() {
    nvme::transport::qemu::require_binary(Path::new("qemu-system-x86_64"))
        .unwrap_or_else(|e| panic!("this test needs QEMU: {e}"));
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Records of cycles the journal holds whole: its size past the header, in records.
fn journal_records(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len() / 48).unwrap_or(0)
}

#[test]
fn a_campaign_killed_mid_cycle_is_judged_by_resume_as_an_uninterrupted_run_would_be() {
    require_qemu();
    let dir = tempfile::tempdir().unwrap();
    let topology = dir.path().join("kept.yaml");
    std::fs::write(&topology, TOPOLOGY).unwrap();
    let target = format!("qemu:{}", topology.display());
    let (short, long) = (dir.path().join("short.yaml"), dir.path().join("long.yaml"));
    std::fs::write(&short, suite(5)).unwrap();
    std::fs::write(&long, suite(100_000)).unwrap();

    // Uninterrupted, on the same kept images: the verdict to match.
    let out = nvtest(&["--suite", short.to_str().unwrap(), &target]);
    assert!(out.status.success(), "uninterrupted run:\n{}", text(&out));

    // Interrupted: nvtest SIGKILLed once the campaign has journalled a few cycles.
    let journals = dir.path().join("journals");
    let journal = journals.join("pf-resume--campaign.nvtj");
    let mut run = Command::new(env!("CARGO_BIN_EXE_nvtest"))
        .args(["--suite", long.to_str().unwrap(), "--journal", journals.to_str().unwrap(), &target])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while journal_records(&journal) < 20_000 {
        assert!(Instant::now() < deadline, "the campaign journalled too little");
        std::thread::sleep(Duration::from_millis(20));
    }
    run.kill().unwrap();
    run.wait().unwrap();

    let out = nvtest(&["resume", journal.to_str().unwrap()]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("resume result: ok") && said.contains("blocks judged"), "{said}");

    // A journal cut short mid-record (a writer that died in the middle of one): the
    // torn tail is ignored and the verdict is the same.
    let torn = dir.path().join("journals/torn.nvtj");
    let bytes = std::fs::read(&journal).unwrap();
    std::fs::write(&torn, &bytes[..bytes.len() - 20]).unwrap();
    std::fs::copy(format!("{}.floor", journal.display()), format!("{}.floor", torn.display())).unwrap();
    let out = nvtest(&["resume", torn.to_str().unwrap()]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("torn tail of 28 bytes ignored") && said.contains("resume result: ok"), "{said}");

    // A journal whose campaign ran on another format of namespace 1 (as if the drive were
    // formatted since): not the drive's failure, an error naming the reformat.
    let reformatted = dir.path().join("journals/reformatted.nvtj");
    let length = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let header = String::from_utf8(bytes[12..12 + length].to_vec()).unwrap();
    let other = header.replacen("\"block_size\":512", "\"block_size\":4096", 1);
    assert_ne!(header, other, "the header names namespace 1's block size: {header}");
    let mut rewritten = bytes[..8].to_vec();
    rewritten.extend_from_slice(&(other.len() as u32).to_le_bytes());
    rewritten.extend_from_slice(other.as_bytes());
    rewritten.extend_from_slice(&bytes[12 + length..]);
    std::fs::write(&reformatted, rewritten).unwrap();
    std::fs::copy(format!("{}.floor", journal.display()), format!("{}.floor", reformatted.display())).unwrap();
    let out = nvtest(&["resume", reformatted.to_str().unwrap()]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("NSID 1 is now formatted 512 + 0") && said.contains("formatted since"), "{said}");

    // The failing twin: LBA 100 of namespace 1 (in the load's range) overwritten behind
    // nvtest's back holds data no write put there.
    let image = dir.path().join("images/nvme0-ns1.img");
    let mut data = std::fs::read(&image).unwrap();
    data[100 * 512..101 * 512].fill(0xa5);
    std::fs::write(&image, data).unwrap();
    let out = nvtest(&["resume", journal.to_str().unwrap()]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("NSID 1 LBA 0x64") && said.contains("§6.4"), "{said}");
    assert!(said.contains("resume result: FAILED"), "{said}");
}

#[test]
fn a_journal_of_a_simulated_drive_is_refused_by_resume() {
    let dir = tempfile::tempdir().unwrap();
    let journals = dir.path().join("journals");
    let out = nvtest(&[
        "--suite",
        "power-fail",
        "--filter",
        "normal-shutdown-counters",
        "--journal",
        journals.to_str().unwrap(),
        "sim",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let journal = journals.join("power-fail--normal-shutdown-counters.nvtj");
    let out = nvtest(&["resume", journal.to_str().unwrap()]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("keeps its media in nvtest's memory"), "{said}");
    let out = nvtest(&["resume", dir.path().join("none.nvtj").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1, "{}", text(&out));
}
