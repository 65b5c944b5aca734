//! The simulated drive's clock and service model through nvtest's driver: time moves only
//! when the host idles, commands take the time the model gives, the write cache absorbs a
//! burst and then writes run at the program rate, Flush waits for the drain, a hung
//! command expires in simulated time, ports share one clock; and quirk
//! `stale-read-after-write`.

mod engine_support;
mod service_support;

use std::time::{Duration, Instant};

use nvme::device::{Data, Device, DeviceError};
use nvme::driver::{ArbitrationMechanism, Options, Transfer};
use nvme::queued::{QueueSpec, QueuedIo};
use nvme::spec::queue::QueuePriority;
use nvme::spec::{nvm, Command, NvmOpcode};
use nvme::transport::Transport;
use nvme_sim::pci::ControllerConfig;
use nvme_sim::profile::{Profile, Quirk};
use nvme_sim::service::ServiceModel;
use service_support::{driver, transport};

const MS: u64 = 1_000_000;

fn enterprise(edit: impl FnOnce(&mut ServiceModel)) -> Profile {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    edit(p.service.as_mut().unwrap());
    p
}

#[test]
fn time_moves_only_when_the_host_idles() {
    let mut t = transport(Profile::builtin("enterprise-1.4").unwrap());
    assert!(t.simulated_clock());
    assert_eq!(t.now_ns(), 0);
    t.mmio_read32(0).unwrap();
    t.config_read32(0).unwrap();
    assert_eq!(t.now_ns(), 0, "register accesses take no time");
    t.idle().unwrap();
    assert_eq!(t.now_ns(), MS, "nothing scheduled: idle lets 1 ms pass");
    t.idle_until(5 * MS).unwrap();
    assert_eq!(t.now_ns(), 5 * MS);
    t.idle_until(2 * MS).unwrap();
    assert_eq!(t.now_ns(), 5 * MS, "never backwards");
}

#[test]
fn one_read_takes_what_the_model_says_and_idle_stops_at_its_completion() {
    let profile = enterprise(|m| m.read_jitter_us = 0);
    let mut ctrl = driver(transport(profile), ArbitrationMechanism::RoundRobin);
    let mut q = ctrl.open_queues(&[QueueSpec { depth: 4, priority: QueuePriority::Medium, port: 0 }]).unwrap();
    let start = q.now_ns();
    q.submit(0, nvm::read(1, 3, 0), Transfer::FromDevice(4096), Transfer::None).unwrap();
    q.ring(0).unwrap();
    assert_eq!(q.poll(0, &mut |_| {}).unwrap(), 0, "not complete before time passes");
    q.idle_until(start + 10 * MS).unwrap();
    // 15 µs on the die + 60 µs overhead + 4096 bytes at 6800 MB/s (603 ns).
    assert_eq!(q.now_ns() - start, 75_603, "idle_until stops at the completion");
    assert_eq!(q.poll(0, &mut |r| assert!(r.completion.status().is_success())).unwrap(), 1);
}

#[test]
fn a_hung_command_expires_in_simulated_time() {
    let config =
        ControllerConfig { service: Profile::builtin("enterprise-1.4").unwrap().service, ..Default::default() };
    let options = Options { command_timeout_ms: 5_000, ..Default::default() };
    let (mut ctrl, controls) = engine_support::driver(config, options);
    controls.hang.store(true, std::sync::atomic::Ordering::Relaxed);
    let wall = Instant::now();
    let before = ctrl.transport_mut().now_ns();
    let mut buf = vec![0u8; 512];
    let err = ctrl.io(1, engine_support::rw(NvmOpcode::Read, 0, 1), Data::FromDevice(&mut buf), Data::None);
    assert!(matches!(err, Err(DeviceError::Timeout { after_ms: 5_000, .. })), "{err:?}");
    let waited = ctrl.transport_mut().now_ns() - before;
    assert!((5_000 * MS..5_100 * MS).contains(&waited), "{waited} ns");
    assert!(wall.elapsed() < Duration::from_secs(2), "{:?} of wall time", wall.elapsed());
}

/// A small cache: 1 MiB, drained by 2 dies at 64 KiB per ms (131 MB/s).
fn small_cache() -> Profile {
    enterprise(|m| {
        m.write_cache_bytes = 1 << 20;
        m.dies = 2;
        m.program_us = 1000;
    })
}

/// Writes `count` × 128 KiB at LBA 0 onwards, `depth` at a time, as fast as they
/// complete; then a Flush. Completion times (ns from the start) of each write, and the
/// Flush's latency.
fn burst(profile: Profile, count: usize, depth: usize) -> (Vec<u64>, u64) {
    let mut ctrl = driver(transport(profile), ArbitrationMechanism::RoundRobin);
    let mut q =
        ctrl.open_queues(&[QueueSpec { depth: depth as u32, priority: QueuePriority::Medium, port: 0 }]).unwrap();
    let data = vec![0xa5u8; 128 * 1024];
    let start = q.now_ns();
    let (mut sent, mut done) = (0usize, Vec::new());
    while done.len() < count {
        while sent < count && q.outstanding(0) < depth {
            q.submit(0, nvm::write(1, sent as u64 * 32, 31, false), Transfer::ToDevice(&data), Transfer::None).unwrap();
            sent += 1;
        }
        q.ring(0).unwrap();
        let now = q.now_ns();
        q.idle_until(now + 100 * MS).unwrap();
        let now = q.now_ns();
        q.poll(0, &mut |_| done.push(now - start)).unwrap();
    }
    let flushed_at = q.now_ns();
    q.submit(0, Command::nvm(NvmOpcode::Flush, 1), Transfer::None, Transfer::None).unwrap();
    q.ring(0).unwrap();
    let mut flush = 0;
    while flush == 0 {
        let now = q.now_ns();
        q.idle_until(now + 100 * MS).unwrap();
        let now = q.now_ns();
        q.poll(0, &mut |_| flush = now - flushed_at).unwrap();
    }
    (done, flush)
}

#[test]
fn the_write_cache_absorbs_a_burst_then_writes_run_at_the_program_rate() {
    let (done, _) = burst(small_cache(), 64, 4);
    // The first writes fit in the cache: 10 µs after their transfer (~22 µs at 6 GB/s).
    assert!(done[0] < 100_000, "first write after {} ns", done[0]);
    assert!(done[3] < 200_000, "fourth write after {} ns", done[3]);
    // Then one 128 KiB write per two programs: 2 programs on 2 dies per ms.
    let steady = (done[63] - done[31]) as f64 / 32.0;
    assert!((900_000.0..1_100_000.0).contains(&steady), "{steady} ns per write");
}

#[test]
fn flush_waits_until_the_cache_is_drained() {
    // 4 × 128 KiB = 8 programs on 2 dies: 4 ms of draining after the data arrived.
    let (done, flush) = burst(small_cache(), 4, 4);
    let drained = 4 * MS;
    assert!(done[3] + flush >= drained, "flush done {} ns after the start", done[3] + flush);
    assert!(done[3] + flush < drained + 200_000);
    // Nothing dirty: a flush is quick.
    let (_, flush) = burst(small_cache(), 0, 4);
    assert_eq!(flush, nvme_sim::service::FLUSH_US * 1000);
}

#[test]
fn ports_of_a_subsystem_share_one_clock() {
    let a = transport(Profile::builtin("enterprise-1.4").unwrap());
    let config = ControllerConfig { cntlid: 2, ..a.controller().config().clone() };
    let b = a.another_port(config);
    let mut a = driver(a, ArbitrationMechanism::RoundRobin);
    let mut b = driver(b, ArbitrationMechanism::RoundRobin);
    a.transport_mut().idle_until(7 * MS).unwrap();
    assert_eq!(b.transport_mut().now_ns(), 7 * MS);
    // A read on port B completes when port A lets time pass over it.
    {
        let mut qb = b.queue(1).unwrap();
        qb.submit(nvm::read(1, 0, 0), Transfer::FromDevice(4096)).unwrap();
        qb.ring().unwrap();
    }
    // A's idle stops at B's completion, the subsystem's next event, then goes on.
    a.transport_mut().idle_until(8 * MS).unwrap();
    let stop = b.transport_mut().now_ns();
    assert!(stop > 7 * MS + 70_000 && stop < 7 * MS + 100_000, "{stop}");
    a.transport_mut().idle_until(8 * MS).unwrap();
    assert_eq!(b.transport_mut().now_ns(), 8 * MS);
    assert_eq!(b.queue(1).unwrap().poll(|r| assert!(r.completion.status().is_success())).unwrap(), 1);
}

fn write_then_read(profile: Profile) -> Vec<Vec<u8>> {
    let mut ctrl = driver(transport(profile), ArbitrationMechanism::RoundRobin);
    let (first, second) = (vec![1u8; 4096], vec![2u8; 4096]);
    for data in [&first, &second] {
        let done = ctrl.io(1, nvm::write(1, 10, 0, false), Data::ToDevice(data), Data::None).unwrap();
        assert!(done.status().is_success());
    }
    (0..2)
        .map(|_| {
            let mut back = vec![0u8; 4096];
            ctrl.io(1, nvm::read(1, 10, 0), Data::FromDevice(&mut back), Data::None).unwrap();
            back
        })
        .collect()
}

#[test]
fn a_read_returns_the_last_write() {
    let reads = write_then_read(Profile::builtin("enterprise-1.4").unwrap());
    assert!(reads.iter().all(|r| r.iter().all(|&b| b == 2)));
}

#[test]
fn stale_read_after_write_returns_the_previous_data_once() {
    let reads = write_then_read(Profile::builtin("enterprise-1.4").unwrap().with_quirk(Quirk::StaleReadAfterWrite));
    assert!(reads[0].iter().all(|&b| b == 1), "first read after the write: the data before it");
    assert!(reads[1].iter().all(|&b| b == 2));
}
