//! Command arbitration (NVMe 1.4 §4.13) under saturation: every queue kept full, fewer
//! internal slots than commands waiting, so the order the controller fetches in decides
//! the shares. Driven through nvtest's driver on the simulated clock.

mod service_support;

use nvme::driver::{ArbitrationMechanism, Controller, Transfer};
use nvme::queued::{QueueSpec, QueuedIo};
use nvme::spec::nvm;
use nvme::spec::queue::QueuePriority::{self, High, Low, Medium, Urgent};
use nvme::spec::registers::{offset, Cap, Cc};
use nvme_sim::pci::FetchTrace;
use nvme_sim::profile::{Profile, Quirk};
use service_support::{driver, set_arbitration, transport, Rng};

const WARM_UP: usize = 2_000;
const MEASURED: usize = 30_000;

/// enterprise-1.4 with 4 internal slots.
fn profile(quirks: &[Quirk]) -> Profile {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.service.as_mut().unwrap().slots = 4;
    quirks.iter().fold(p, |p, q| p.with_quirk(*q))
}

fn drive(quirks: &[Quirk], mechanism: ArbitrationMechanism) -> (Controller, FetchTrace) {
    let mut t = transport(profile(quirks));
    let trace = t.trace_fetches();
    (driver(t, mechanism), trace)
}

/// Keeps every queue full of 4 KiB reads; completions per queue after a warm-up.
fn shares(ctrl: &mut Controller, priorities: &[QueuePriority]) -> Vec<f64> {
    let specs: Vec<QueueSpec> = priorities.iter().map(|&priority| QueueSpec { depth: 32, priority, port: 0 }).collect();
    let q = ctrl.open_queues(&specs).unwrap();
    let mut rng = Rng(7);
    let mut counts = vec![0usize; specs.len()];
    let mut total = 0;
    let top_up = |q: &mut Box<dyn QueuedIo + '_>, queue: usize, rng: &mut Rng| {
        while q.outstanding(queue) < q.capacity(queue) {
            let read = nvm::read(1, rng.below(1 << 16), 0);
            q.submit(queue, read, Transfer::FromDevice(4096), Transfer::None).unwrap();
        }
        q.ring(queue).unwrap();
    };
    let mut q: Box<dyn QueuedIo + '_> = Box::new(q);
    for queue in 0..specs.len() {
        top_up(&mut q, queue, &mut rng);
    }
    while total < WARM_UP + MEASURED {
        let now = q.now_ns();
        q.idle_until(now + 1_000_000).unwrap();
        for (queue, count) in counts.iter_mut().enumerate() {
            let n = q.poll(queue, &mut |r| assert!(r.completion.status().is_success())).unwrap();
            if total >= WARM_UP {
                *count += n;
            }
            total += n;
            top_up(&mut q, queue, &mut rng);
        }
    }
    let sum: usize = counts.iter().sum();
    counts.iter().map(|&c| c as f64 / sum as f64).collect()
}

fn assert_shares(got: &[f64], want: &[f64]) {
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 0.02, "shares {got:?}, expected {want:?}");
    }
}

fn wrr(quirks: &[Quirk]) -> Controller {
    let (mut ctrl, _) = drive(quirks, ArbitrationMechanism::WeightedRoundRobinUrgent);
    // AB 0 (one command per turn), LPW 1, MPW 3, HPW 7: rounds of 8 High, 4 Medium, 2 Low.
    set_arbitration(&mut ctrl, 0, 1, 3, 7);
    ctrl
}

#[test]
fn cap_ams_follows_the_profile() {
    let mut ctrl = driver(transport(Profile::builtin("enterprise-1.4").unwrap()), ArbitrationMechanism::RoundRobin);
    assert_eq!(Cap::from_bits(ctrl.read_register64(offset::CAP).unwrap()).ams(), 1);
    let mut old = driver(transport(Profile::builtin("enterprise-1.2a").unwrap()), ArbitrationMechanism::RoundRobin);
    assert_eq!(Cap::from_bits(old.read_register64(offset::CAP).unwrap()).ams(), 0);
}

#[test]
fn weighted_round_robin_shares_follow_the_weights() {
    let got = shares(&mut wrr(&[]), &[High, Medium, Low]);
    println!("WRR 8:4:2 shares (High, Medium, Low): {got:?}");
    assert_shares(&got, &[8.0 / 14.0, 4.0 / 14.0, 2.0 / 14.0]);
}

#[test]
fn wrr_weights_ignored_serves_the_classes_alike() {
    let got = shares(&mut wrr(&[Quirk::WrrWeightsIgnored]), &[High, Medium, Low]);
    assert_shares(&got, &[1.0 / 3.0; 3]);
}

#[test]
fn wrr_weights_inverted_serves_low_by_the_high_weight() {
    let got = shares(&mut wrr(&[Quirk::WrrWeightsInverted]), &[High, Medium, Low]);
    assert_shares(&got, &[2.0 / 14.0, 4.0 / 14.0, 8.0 / 14.0]);
}

#[test]
fn urgent_queues_are_served_first() {
    let got = shares(&mut wrr(&[]), &[Urgent, High, Low]);
    assert_eq!(got, [1.0, 0.0, 0.0]);
}

#[test]
fn urgent_not_first_makes_urgent_one_more_weighted_class() {
    let got = shares(&mut wrr(&[Quirk::UrgentNotFirst]), &[Urgent, High, Low]);
    // Urgent takes High's weight: rounds of 8 Urgent, 8 High, 2 Low.
    assert_shares(&got, &[8.0 / 18.0, 8.0 / 18.0, 2.0 / 18.0]);
}

#[test]
fn round_robin_is_fair_whatever_the_priorities() {
    let (mut ctrl, _) = drive(&[], ArbitrationMechanism::RoundRobin);
    set_arbitration(&mut ctrl, 0, 1, 3, 7);
    let got = shares(&mut ctrl, &[Urgent, High, Medium, Low]);
    println!("RR shares: {got:?}");
    assert_shares(&got, &[0.25; 4]);
}

#[test]
fn wrr_not_enabled_reads_back_but_serves_round_robin() {
    let mut ctrl = wrr(&[Quirk::WrrNotEnabled]);
    assert_eq!(Cc::from_bits(ctrl.read_register(offset::CC).unwrap()).ams(), 1);
    let got = shares(&mut ctrl, &[Urgent, High, Low]);
    assert_shares(&got, &[1.0 / 3.0; 3]);
}

#[test]
fn cc_ams_is_latched_at_enable() {
    let (mut ctrl, _) = drive(&[], ArbitrationMechanism::RoundRobin);
    set_arbitration(&mut ctrl, 0, 1, 3, 7);
    // Changing CC.AMS while CC.EN = 1: read back, not used until the next enable.
    let cc = Cc::from_bits(ctrl.read_register(offset::CC).unwrap()).with_ams(1);
    ctrl.write_register(offset::CC, cc.into_bits()).unwrap();
    assert_eq!(Cc::from_bits(ctrl.read_register(offset::CC).unwrap()).ams(), 1);
    assert_shares(&shares(&mut ctrl, &[High, Medium, Low]), &[1.0 / 3.0; 3]);
}

/// Lengths of the runs of one queue in the fetch trace, after the warm-up.
fn runs(trace: &FetchTrace) -> Vec<usize> {
    let trace = trace.lock().unwrap();
    let mut runs = Vec::new();
    let mut last = 0;
    for &q in &trace[WARM_UP..] {
        match runs.last_mut() {
            Some(n) if q == last => *n += 1,
            _ => runs.push(1),
        }
        last = q;
    }
    // The first and last runs may be cut by the window.
    runs[1..runs.len() - 1].to_vec()
}

#[test]
fn the_arbitration_burst_limits_a_turn() {
    let (mut ctrl, trace) = drive(&[], ArbitrationMechanism::RoundRobin);
    set_arbitration(&mut ctrl, 2, 0, 0, 0);
    shares(&mut ctrl, &[Low, Low]);
    let runs = runs(&trace);
    assert!(runs.iter().all(|&n| n == 4), "AB 2: runs of 4, got {:?}", &runs[..20.min(runs.len())]);
}

#[test]
fn arbitration_burst_ignored_takes_one_per_turn() {
    let (mut ctrl, trace) = drive(&[Quirk::ArbitrationBurstIgnored], ArbitrationMechanism::RoundRobin);
    set_arbitration(&mut ctrl, 2, 0, 0, 0);
    shares(&mut ctrl, &[Low, Low]);
    assert!(runs(&trace).iter().all(|&n| n == 1));
}
