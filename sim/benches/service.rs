//! Simulated seconds per wall second of the datasheet's mixed QoS load (50,000 random
//! 4 KiB read IOPS beside a 500 MB/s sequential 128 KiB write) on the enterprise-1.4
//! profile's service model, through nvtest's driver on the simulated clock.
//!
//!     cargo bench -p nvme-sim --bench service
//!
//! `NVTEST_BENCH_SIM_SECS` sets the simulated time of the run (default 3 s).

#[path = "../tests/service_support/mod.rs"]
mod service_support;

use std::time::Instant;

use nvme::driver::ArbitrationMechanism;
use nvme_sim::profile::Profile;
use service_support::{driver, run, transport, Load};

fn main() {
    let secs = std::env::var("NVTEST_BENCH_SIM_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3.0f64);
    let mut ctrl = driver(transport(Profile::builtin("enterprise-1.4").unwrap()), ArbitrationMechanism::RoundRobin);
    let wall = Instant::now();
    let f = run(&mut ctrl, Load { seconds: secs, ..Load::CLAIM });
    let wall = wall.elapsed().as_secs_f64();
    let simulated = f.simulated_ns as f64 / 1e9;
    println!(
        "mixed QoS load, {simulated:.1} simulated s: {} reads (p99.9 {:.1} µs), {} writes, in {wall:.2} wall s",
        f.reads.len(),
        f.read_us(99.9),
        f.writes.len()
    );
    let ratio = simulated / wall;
    let verdict = if ratio >= 5.0 { "met" } else { "NOT met" };
    println!("simulated seconds per wall second: {ratio:.1} (goal >= 5: {verdict})");
}
