//! Removal and reinsertion leave nothing behind in the host driver: the DMA memory its
//! queues, PRP lists and buffers take is all back after 20 surprise removals under load
//! (`hot-plug::surprise-removal`), as much free as before them (issue 13: "20
//! remove/reinsert cycles under I/O on the sim with no leak").

use std::path::PathBuf;

use nvme_sim::profile::Profile;
use nvtest::exec::{fresh_run_seed, Session};
use nvtest::suite::{load_file, ExpandedCase};
use nvtest::verdict::Verdict;

fn case(name: &str) -> ExpandedCase {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../suites/hot-plug.yaml");
    let suite = load_file(&path, Some("hot-plug")).unwrap_or_else(|e| panic!("{e}"));
    suite.cases.into_iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no case {name}"))
}

fn free_bytes(s: &mut Session) -> usize {
    s.with_context(0, |ctx| ctx.device.dma_free_bytes()).expect("the userspace driver reports its DMA memory")
}

#[test]
fn twenty_surprise_removals_under_load_leave_the_drivers_dma_memory_as_it_was() {
    let device = nvtest::targets::open_sim(Profile::builtin("enterprise-1.4").unwrap()).unwrap();
    let mut s = Session::with_device("sim:enterprise-1.4".into(), device).unwrap();
    // One orderly cycle first: whatever the driver allocates once and keeps (the I/O
    // queue of the cases' own commands) is allocated before the first measure.
    let orderly = case("orderly-removal");
    let outcome = s.run_case(&orderly, fresh_run_seed());
    assert_eq!(outcome.verdict, Verdict::Pass, "{:#?}", outcome.log);
    let before = free_bytes(&mut s);
    let surprise = case("surprise-removal");
    let mut after = Vec::new();
    for run in 0..2 {
        let outcome = s.run_case(&surprise, fresh_run_seed());
        assert_eq!(outcome.verdict, Verdict::Pass, "run {run}: {:#?}", outcome.log);
        after.push(free_bytes(&mut s));
        println!("after 20 surprise removals (run {run}): DMA memory free {} bytes (before: {before})", after[run]);
    }
    assert_eq!(after, vec![before, before], "DMA memory free before and after each 20 surprise removals");
}
