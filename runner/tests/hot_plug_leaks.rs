//! Removal and reinsertion leave nothing behind in the host driver: the DMA memory its
//! queues, PRP lists and buffers take is all back after the surprise removals under load
//! of `hot-plug::surprise-removal` (20 cycles), as much free as before them, on the
//! simulated drive and in QEMU's hot-plug slots (issue 13: "20 remove/reinsert cycles
//! under I/O on the sim and 5 on QEMU with no leak"). Processes and files left by a QEMU
//! run are checked by qemu_topologies.rs
//! (`the_hot_plug_suite_passes_on_qemu_hotplug_and_leaves_nothing`).

use std::path::{Path, PathBuf};

use nvme_sim::profile::Profile;
use nvtest::exec::{fresh_run_seed, Session};
use nvtest::suite::{load_file, ExpandedCase};
use nvtest::targets::TargetSpec;
use nvtest::verdict::Verdict;

fn case(name: &str) -> ExpandedCase {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../suites/hot-plug.yaml");
    let suite = load_file(&path, Some("hot-plug")).unwrap_or_else(|e| panic!("{e}"));
    suite.cases.into_iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no case {name}"))
}

fn free_bytes(s: &mut Session) -> usize {
    s.with_context(0, |ctx| ctx.device.dma_free_bytes()).expect("the userspace driver reports its DMA memory")
}

/// One orderly cycle first (what the driver allocates once and keeps, such as the I/O
/// queue of the cases' own commands, is then allocated), then the surprise removals
/// twice: the free DMA memory after each equals that before them.
fn removals_leave_the_dma_memory_as_it_was(target: &str, mut s: Session) {
    let outcome = s.run_case(&case("orderly-removal"), fresh_run_seed());
    assert_eq!(outcome.verdict, Verdict::Pass, "{target}: {:#?}", outcome.log);
    let before = free_bytes(&mut s);
    let surprise = case("surprise-removal");
    let mut after = Vec::new();
    for run in 0..2 {
        let outcome = s.run_case(&surprise, fresh_run_seed());
        assert_eq!(outcome.verdict, Verdict::Pass, "{target} run {run}: {:#?}", outcome.log);
        after.push(free_bytes(&mut s));
        println!(
            "{target}: after 20 surprise removals (run {run}) {} bytes of DMA memory free, before {before}",
            after[run]
        );
    }
    assert_eq!(after, vec![before, before], "{target}: DMA memory free before and after each 20 surprise removals");
}

#[test]
fn twenty_surprise_removals_under_load_leave_the_drivers_dma_memory_as_it_was() {
    let device = nvtest::targets::open_sim(Profile::builtin("enterprise-1.4").unwrap()).unwrap();
    let s = Session::with_device("sim:enterprise-1.4".into(), device).unwrap();
    removals_leave_the_dma_memory_as_it_was("sim:enterprise-1.4", s);
}

#[test]
fn removals_from_qemus_hot_plug_slots_leave_the_drivers_dma_memory_as_it_was() {
    nvme::transport::qemu::require_binary(Path::new("qemu-system-x86_64"))
        .unwrap_or_else(|e| panic!("this test needs QEMU: {e}"));
    let s = Session::open(&TargetSpec::parse("qemu:hotplug").unwrap()).unwrap_or_else(|e| panic!("{e}"));
    removals_leave_the_dma_memory_as_it_was("qemu:hotplug", s);
}
