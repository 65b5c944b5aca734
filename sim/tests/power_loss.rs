//! The simulated drive's power model driven through nvtest's host driver: a power cut
//! loses only what the drive may lose (NVMe 1.4 §6.8 Flush, §6.15 FUA, §6.4 atomic
//! operations, Feature 06h Volatile Write Cache), SMART / Health counts it (Figure 196),
//! a shutdown (§7.6.2) makes it lose nothing, and the controller comes back after the
//! profile's ready time on the simulated clock. Each quirk breaking one of these rules
//! shows here as that rule broken.

mod service_support;

use nvme::device::{Data, Device};
use nvme::driver::{Controller, Options};
use nvme::spec::features::{self, FeatureId};
use nvme::spec::log::{self, LogPageId, SmartHealthLog};
use nvme::spec::nvm;
use nvme::spec::registers::offset;
use nvme::transport::PowerMethod;
use nvme_sim::profile::Profile;
use nvme_sim::subsystem::Quirk;
use std::time::Duration;
use zerocopy::FromBytes;

const BLOCK: usize = 4096;

/// The drive of `profile` with one 1 GiB namespace of 4 KiB blocks, through the driver.
fn bring_up(profile: Profile) -> Controller {
    Controller::new(Box::new(service_support::transport(profile)), Options::default()).unwrap()
}

fn enterprise(quirks: &[Quirk]) -> Controller {
    let profile = quirks.iter().fold(Profile::builtin("enterprise-1.4").unwrap(), |p, q| p.with_quirk(*q));
    bring_up(profile)
}

/// Block `lba`'s content for generation `generation`.
fn pattern(lba: u64, generation: u8) -> Vec<u8> {
    let mut block = vec![generation; BLOCK];
    block[..8].copy_from_slice(&lba.to_le_bytes());
    block
}

fn write(ctrl: &mut Controller, slba: u64, nlb: u64, generation: u8, fua: bool) {
    let data: Vec<u8> = (slba..slba + nlb).flat_map(|lba| pattern(lba, generation)).collect();
    let done = ctrl.io(1, nvm::write(1, slba, nlb as u16 - 1, fua), Data::ToDevice(&data), Data::None).unwrap();
    assert!(done.status().is_success(), "write: {}", done.status());
}

fn flush(ctrl: &mut Controller) {
    let done = ctrl.io(1, nvm::flush(1), Data::None, Data::None).unwrap();
    assert!(done.status().is_success(), "flush: {}", done.status());
}

/// The generation block `lba` holds (0: never written), or `None` for bytes no
/// generation has.
fn generation(ctrl: &mut Controller, lba: u64) -> Option<u8> {
    let mut block = vec![0u8; BLOCK];
    let done = ctrl.io(1, nvm::read(1, lba, 0), Data::FromDevice(&mut block), Data::None).unwrap();
    assert!(done.status().is_success(), "read: {}", done.status());
    if block.iter().all(|b| *b == 0) {
        return Some(0);
    }
    let g = block[BLOCK - 1];
    (block == pattern(lba, g)).then_some(g)
}

fn smart(ctrl: &mut Controller) -> SmartHealthLog {
    let mut bytes = vec![0u8; 512];
    let cmd = log::get_log_page(LogPageId::SmartHealth, 0xFFFF_FFFF, 512, 0, false).unwrap();
    let done = ctrl.admin(cmd, Data::FromDevice(&mut bytes)).unwrap();
    assert!(done.status().is_success());
    SmartHealthLog::read_from_bytes(&bytes).unwrap()
}

/// Power off (losses drawn from `seed`) and on again: the bring-up's ready time in ms.
fn power_cycle(ctrl: &mut Controller, seed: u64) -> u64 {
    ctrl.power_off(seed).unwrap();
    let on = ctrl.power_on(Duration::from_secs(60)).unwrap();
    assert_eq!(on.method, PowerMethod::Cut);
    on.ready_ns.unwrap() / 1_000_000
}

/// Writes generation 1 to LBAs 0..64 one block per command, cuts the power, and
/// returns what each block held afterwards.
fn unflushed_writes_then_cut(ctrl: &mut Controller, seed: u64, fua: bool) -> Vec<Option<u8>> {
    for lba in 0..64 {
        write(ctrl, lba, 1, 1, fua);
    }
    power_cycle(ctrl, seed);
    (0..64).map(|lba| generation(ctrl, lba)).collect()
}

#[test]
fn a_completed_unflushed_write_may_be_lost_but_only_to_the_old_data() {
    let mut ctrl = enterprise(&[]);
    let found = unflushed_writes_then_cut(&mut ctrl, 7, false);
    assert!(found.iter().all(|g| matches!(g, Some(0 | 1))), "old or new, never other data: {found:?}");
    let lost = found.iter().filter(|g| **g == Some(0)).count();
    assert!(lost > 0 && lost < 64, "the cache holds them: some lost, some kept ({lost} of 64 lost)");
}

#[test]
fn the_same_seed_loses_the_same_writes() {
    let a = unflushed_writes_then_cut(&mut enterprise(&[]), 42, false);
    let b = unflushed_writes_then_cut(&mut enterprise(&[]), 42, false);
    assert_eq!(a, b);
}

#[test]
fn flush_makes_every_write_completed_before_it_durable() {
    let mut ctrl = enterprise(&[]);
    for lba in 0..64 {
        write(&mut ctrl, lba, 1, 1, false);
    }
    flush(&mut ctrl);
    power_cycle(&mut ctrl, 7);
    assert!((0..64).all(|lba| generation(&mut ctrl, lba) == Some(1)));
}

#[test]
fn quirk_flush_ignored_loses_flushed_writes() {
    let mut ctrl = enterprise(&[Quirk::FlushIgnored]);
    for lba in 0..64 {
        write(&mut ctrl, lba, 1, 1, false);
    }
    flush(&mut ctrl);
    power_cycle(&mut ctrl, 7);
    assert!((0..64).any(|lba| generation(&mut ctrl, lba) == Some(0)), "§6.8 broken: a flushed write lost");
}

#[test]
fn a_completed_fua_write_survives() {
    let found = unflushed_writes_then_cut(&mut enterprise(&[]), 7, true);
    assert!(found.iter().all(|g| *g == Some(1)), "{found:?}");
}

#[test]
fn quirk_fua_ignored_loses_fua_writes() {
    let found = unflushed_writes_then_cut(&mut enterprise(&[Quirk::FuaIgnored]), 7, true);
    assert!(found.contains(&Some(0)), "§6.15 FUA broken: {found:?}");
}

#[test]
fn with_the_volatile_write_cache_disabled_every_completed_write_survives() {
    let mut ctrl = enterprise(&[]);
    let wce_off = features::set_features(FeatureId::VolatileWriteCache, false, 0, 0);
    assert!(ctrl.admin(wce_off, Data::None).unwrap().status().is_success());
    for lba in 0..64 {
        write(&mut ctrl, lba, 1, 1, false);
    }
    power_cycle(&mut ctrl, 7);
    assert!((0..64).all(|lba| generation(&mut ctrl, lba) == Some(1)));
    // Power-on brings the feature back to its default (WCE set).
    let get = features::get_features(FeatureId::VolatileWriteCache, features::Select::Current, 0, 0);
    assert_eq!(ctrl.admin(get, Data::None).unwrap().dw0 & 1, 1);
}

#[test]
fn quirk_write_cache_disable_ignored_loses_completed_writes_with_wce_cleared() {
    let mut ctrl = enterprise(&[Quirk::WriteCacheDisableIgnored]);
    let wce_off = features::set_features(FeatureId::VolatileWriteCache, false, 0, 0);
    assert!(ctrl.admin(wce_off, Data::None).unwrap().status().is_success());
    let get = features::get_features(FeatureId::VolatileWriteCache, features::Select::Current, 0, 0);
    assert_eq!(ctrl.admin(get, Data::None).unwrap().dw0 & 1, 0, "the host is told the cache is off");
    for lba in 0..64 {
        write(&mut ctrl, lba, 1, 1, false);
    }
    power_cycle(&mut ctrl, 7);
    let found: Vec<Option<u8>> = (0..64).map(|lba| generation(&mut ctrl, lba)).collect();
    assert!(found.contains(&Some(0)), "§5.21.1.6 broken: completed writes lost with WCE cleared: {found:?}");
}

#[test]
fn power_loss_protection_keeps_every_completed_write_unless_the_quirk_drops_it() {
    let mut profile = Profile::builtin("enterprise-1.4").unwrap();
    profile.power.loss_protection = true;
    let found = unflushed_writes_then_cut(&mut bring_up(profile.clone()), 7, false);
    assert!(found.iter().all(|g| *g == Some(1)), "{found:?}");
    let found = unflushed_writes_then_cut(&mut bring_up(profile.with_quirk(Quirk::LossProtectionCacheLost)), 7, false);
    assert!(found.contains(&Some(0)), "the power-loss protection claim broken: {found:?}");
}

/// Eight-block writes (AWUPF 7 in enterprise-1.4) over LBAs 0..256, cut, and the
/// writes found torn (blocks of both generations).
fn torn_atomic_writes(quirks: &[Quirk]) -> usize {
    let mut ctrl = enterprise(quirks);
    for slba in (0..256).step_by(8) {
        write(&mut ctrl, slba, 8, 1, false);
    }
    power_cycle(&mut ctrl, 11);
    (0..256)
        .step_by(8)
        .filter(|slba| {
            let g: Vec<_> = (*slba..slba + 8).map(|lba| generation(&mut ctrl, lba)).collect();
            g.iter().any(|x| *x != g[0])
        })
        .count()
}

#[test]
fn a_write_within_awupf_is_all_or_nothing() {
    assert_eq!(torn_atomic_writes(&[]), 0);
    assert!(torn_atomic_writes(&[Quirk::AtomicWriteTorn]) > 0, "§6.4 broken");
}

#[test]
fn quirk_foreign_data_after_power_loss_leaves_bytes_no_host_wrote() {
    let mut ctrl = enterprise(&[Quirk::ForeignDataAfterPowerLoss]);
    write(&mut ctrl, 9, 1, 1, true);
    power_cycle(&mut ctrl, 1);
    assert_eq!(generation(&mut ctrl, 9), None);
}

#[test]
fn smart_counts_the_power_cycle_and_the_unsafe_shutdown() {
    let mut ctrl = enterprise(&[]);
    let before = smart(&mut ctrl);
    assert_eq!((before.power_cycles.get(), before.unsafe_shutdowns.get()), (1, 0));
    write(&mut ctrl, 0, 1, 1, false);
    power_cycle(&mut ctrl, 1);
    let after = smart(&mut ctrl);
    assert_eq!((after.power_cycles.get(), after.unsafe_shutdowns.get()), (2, 1));

    let mut ctrl = enterprise(&[Quirk::PowerCountersNotIncremented]);
    power_cycle(&mut ctrl, 1);
    let after = smart(&mut ctrl);
    assert_eq!((after.power_cycles.get(), after.unsafe_shutdowns.get()), (1, 0), "Figure 196 broken");
}

#[test]
fn after_a_shutdown_nothing_is_lost_and_no_unsafe_shutdown_is_counted() {
    let mut ctrl = enterprise(&[]);
    for lba in 0..64 {
        write(&mut ctrl, lba, 1, 1, false);
    }
    ctrl.shutdown().unwrap();
    let ready_ms = power_cycle(&mut ctrl, 7);
    assert!((0..64).all(|lba| generation(&mut ctrl, lba) == Some(1)));
    let smart = smart(&mut ctrl);
    assert_eq!((smart.power_cycles.get(), smart.unsafe_shutdowns.get()), (2, 0));
    assert_eq!(ready_ms, 800, "enterprise-1.4 ready_ms.clean");
}

#[test]
fn quirk_shutdown_status_never_reported_leaves_shst_processing() {
    let mut ctrl = enterprise(&[Quirk::ShutdownStatusNeverReported]);
    let err = ctrl.shutdown().unwrap_err().to_string();
    assert!(err.contains("CSTS.SHST"), "{err}");
    let csts = ctrl.read_register(offset::CSTS).unwrap();
    assert_eq!(csts >> 2 & 3, 0b01, "Figure 85 SHST stays 01b");
}

#[test]
fn the_controller_is_ready_after_the_profiles_ready_time_and_reads_all_ones_while_off() {
    let mut ctrl = enterprise(&[]);
    write(&mut ctrl, 0, 1, 1, false);
    ctrl.power_off(3).unwrap();
    assert_eq!(ctrl.read_register(offset::CSTS).unwrap(), u32::MAX, "no power: all ones");
    let on = ctrl.power_on(Duration::ZERO).unwrap();
    // enterprise-1.4: ready_ms.dirty 2400, per_tib 150 (the test drive has 1 GiB: + 0).
    assert_eq!(on.ready_ns, Some(2_400_000_000));
    assert!(on.since_power_on_ns >= 2_400_000_000);
}

#[test]
fn quirks_make_the_controller_ready_late() {
    // CAP.TO of enterprise-1.4: 15 s.
    let mut ctrl = enterprise(&[Quirk::ReadyAfterTimeout]);
    write(&mut ctrl, 0, 1, 1, false);
    assert_eq!(power_cycle(&mut ctrl, 3), 16_000, "later than CAP.TO");
    let mut ctrl = enterprise(&[Quirk::ReadySlowAfterPowerLoss]);
    write(&mut ctrl, 0, 1, 1, false);
    assert_eq!(power_cycle(&mut ctrl, 3), 11_250, "within CAP.TO, beyond a 5 s claim");
    // Without the grace beyond CAP.TO the bring-up gives up, as a host would.
    let mut ctrl = enterprise(&[Quirk::ReadyAfterTimeout]);
    write(&mut ctrl, 0, 1, 1, false);
    ctrl.power_off(3).unwrap();
    let err = ctrl.power_on(Duration::ZERO).unwrap_err().to_string();
    assert!(err.contains("CSTS.RDY"), "{err}");
}
