//! io_uring NVMe passthrough in the Linux guest: nvtest's workload engine on
//! `LinuxDevice::queued_io` against fio's `io_uring_cmd` engine, both on /dev/ng0n1 of
//! QEMU's NVMe controller (topology ns32), 4 KiB random reads at QD 32, one job, run
//! alternately in one boot ([`nvtest::guest_bench`], the guest init's `bench 1` setup
//! step). Prints the guest's figures: IOPS of each round, the means and their ratio.
//!
//! `cargo bench -p nvtest --bench guest_uring` (QEMU and the guest recipe's Debian
//! packages must be available, as for the guest lane; KVM is used when /dev/kvm is).
//! After the benchmark the guest runs `qos::baseline`, the engine's own case.

use std::path::Path;
use std::process::ExitCode;

use nvtest::targets::guest::{self, GuestRequest, SetupStep};
use nvtest::targets::TopologyRef;

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/qos.yaml");
    let target = TopologyRef::Builtin("ns32".into());
    let mut request = match GuestRequest::new(&target, vec![suite]) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("guest_uring: {e}");
            return ExitCode::FAILURE;
        }
    };
    request.filters = vec!["baseline".into()];
    request.setup = vec![SetupStep::Bench(1)];
    request.echo = false;
    let outcome = match guest::execute(&request) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("guest_uring: the guest failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let bench: Vec<&String> = outcome.stages.iter().filter(|s| s.starts_with("bench:")).collect();
    println!("qemu-linux:ns32, {}:", outcome.stages.first().map_or("", |s| s.as_str()));
    for line in &bench {
        println!("  {line}");
    }
    println!(
        "  (boot {:.1} s, guest {:.1} s; then qos::baseline in the guest: nvtest exited {})",
        outcome.timings.boot.as_secs_f64(),
        outcome.timings.guest_total.as_secs_f64(),
        outcome.exit_status
    );
    if !bench.iter().any(|l| l.starts_with("bench: RESULT")) {
        eprintln!("guest_uring: no RESULT from the guest; its console:\n{}", outcome.console.join("\n"));
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
