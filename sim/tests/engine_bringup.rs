//! The simulated drive's PCI function and controller state, driven through nvtest's
//! driver: bring-up, Controller Reset, shutdown, NVM Subsystem Reset, enable refusals,
//! configuration space, and registers that survive arbitrary values.

mod engine_support;

use engine_support::*;
use nvme::device::{Data, Device};
use nvme::driver::{Controller, Options};
use nvme::spec::registers::{doorbell, offset, Cap, Cc, Csts, NSSR_RESET_VALUE};
use nvme::spec::{AdminOpcode, Command, NvmOpcode, Version};
use nvme::transport::Transport;
use nvme_sim::pci::ControllerConfig;

fn csts(ctrl: &mut Controller) -> Csts {
    Csts::from_bits(ctrl.read_register(offset::CSTS).unwrap())
}

#[test]
fn bring_up_reads_cap_and_vs_and_creates_the_queues_asked_for() {
    let config = ControllerConfig { mqes: 63, version: Version::V1_2_1, ..Default::default() };
    let options = Options { io_queues: 3, io_queues_requested: 3, io_queue_depth: 1024, ..Default::default() };
    let (mut ctrl, _) = driver(config, options);
    assert_eq!(ctrl.cap().mqes(), 63);
    assert_eq!(ctrl.version(), Version::V1_2_1);
    assert_eq!(ctrl.io_queues(), vec![1, 2, 3]);
    assert_eq!(ctrl.queues_allocated(), (3, 3));
    // Queue sizes are capped at CAP.MQES + 1.
    assert_eq!(ctrl.queue(1).unwrap().entries(), 64);
    let cc = Cc::from_bits(ctrl.read_register(offset::CC).unwrap());
    assert!(cc.en());
    assert_eq!((cc.css(), cc.mps(), cc.ams(), cc.iosqes(), cc.iocqes()), (0, 0, 0, 6, 4));
    assert!(csts(&mut ctrl).rdy());
    let mut id = vec![0u8; 4096];
    let done = ctrl.admin(Command { cdw10: 1, ..Command::admin(AdminOpcode::Identify) }, Data::FromDevice(&mut id));
    assert!(done.unwrap().status().is_success());
    assert_eq!(id, identify_pattern());
}

#[test]
fn controller_reset_deletes_io_queues_and_bring_up_restores_them() {
    let (mut ctrl, _) = default_driver();
    let data = pattern(4096, 1);
    ctrl.io(1, rw(NvmOpcode::Write, 0, 8), Data::ToDevice(&data), Data::None).unwrap();
    // CC.EN 1 → 0 by hand: the I/O queue is gone, its doorbell now raises nothing and
    // processes nothing.
    let cc = ctrl.read_register(offset::CC).unwrap();
    ctrl.write_register(offset::CC, cc & !1).unwrap();
    assert!(!csts(&mut ctrl).rdy());
    ctrl.write_register(doorbell(1, false, 0), 1).unwrap();
    ctrl.reset().unwrap();
    assert!(csts(&mut ctrl).rdy());
    let mut back = vec![0u8; 4096];
    let done = ctrl.io(1, rw(NvmOpcode::Read, 0, 8), Data::FromDevice(&mut back), Data::None).unwrap();
    assert!(done.status().is_success());
    assert_eq!(back, data, "the namespace keeps its data across a controller reset");
    assert!(ctrl.take_unexpected_completions().is_empty());
}

#[test]
fn shutdown_deletes_queues_and_reports_shst_complete() {
    let (ctrl, _) = default_driver();
    let mut transport = ctrl.close().unwrap();
    let csts = Csts::from_bits(transport.mmio_read32(offset::CSTS).unwrap());
    assert_eq!(csts.shst(), 0b10);
    // The I/O queues were deleted before shutdown: their doorbells are invalid now.
    // (Nothing to observe but that the write is harmless.)
    transport.mmio_write32(doorbell(1, false, 0), 1).unwrap();
}

#[test]
fn nvm_subsystem_reset_sets_nssro_and_the_driver_recovers() {
    let (mut ctrl, _) = default_driver();
    ctrl.write_register(offset::NSSR, 0x1234).unwrap();
    assert!(csts(&mut ctrl).rdy(), "only the value 4E564D65h starts an NVM Subsystem Reset");
    ctrl.write_register(offset::NSSR, NSSR_RESET_VALUE).unwrap();
    let after = csts(&mut ctrl);
    assert!(after.nssro() && !after.rdy());
    assert_eq!(ctrl.read_register(offset::CC).unwrap(), 0, "registers return to their defaults");
    ctrl.enable().unwrap();
    assert!(csts(&mut ctrl).nssro(), "NSSRO stays until the host clears it");
    ctrl.write_register(offset::CSTS, 1 << 4).unwrap();
    assert!(!csts(&mut ctrl).nssro());
    let mut id = vec![0u8; 4096];
    ctrl.admin(Command { cdw10: 1, ..Command::admin(AdminOpcode::Identify) }, Data::FromDevice(&mut id)).unwrap();
    assert_eq!(id, identify_pattern());
}

#[test]
fn nssr_is_ignored_when_cap_nssrs_is_clear() {
    let (mut ctrl, _) = driver(ControllerConfig { nssrs: false, ..Default::default() }, Options::default());
    ctrl.write_register(offset::NSSR, NSSR_RESET_VALUE).unwrap();
    assert!(csts(&mut ctrl).rdy());
    assert!(!csts(&mut ctrl).nssro());
}

/// Programs the admin queue by hand and sets CC.EN with `cc`; returns CSTS.
fn enable_by_hand(transport: &mut dyn Transport, cc: Cc, asq: u64, acq: u64, aqa: u32) -> Csts {
    transport.config_write32(0x04, 0x6).unwrap();
    transport.mmio_write32(offset::CC, 0).unwrap();
    transport.mmio_write32(offset::AQA, aqa).unwrap();
    transport.mmio_write64(offset::ASQ, asq).unwrap();
    transport.mmio_write64(offset::ACQ, acq).unwrap();
    transport.mmio_write32(offset::CC, cc.with_en(true).into_bits()).unwrap();
    Csts::from_bits(transport.mmio_read32(offset::CSTS).unwrap())
}

#[test]
fn enable_refuses_what_the_controller_cannot_do_with_cfs() {
    let (mut sim, _) = sim(ControllerConfig { mpsmax: 1, ..Default::default() });
    let base = sim.dma().base();
    let good = Cc::new().with_iosqes(6).with_iocqes(4);
    let (asq, acq, aqa) = (base + 0x1000, base + 0x2000, 0x000f_000f);
    assert!(enable_by_hand(&mut sim, good, asq, acq, aqa).rdy());
    let refusals = [
        (good.with_mps(2), asq, acq, aqa, "MPS above CAP.MPSMAX"),
        (good.with_iosqes(5), asq, acq, aqa, "IOSQES 5"),
        (good.with_iocqes(3), asq, acq, aqa, "IOCQES 3"),
        (good.with_css(1), asq, acq, aqa, "a command set not offered"),
        (good.with_ams(1), asq, acq, aqa, "WRR not offered"),
        (good, 0, acq, aqa, "ASQ 0"),
        (good, asq, acq, 0x000f_0000, "a one-entry admin SQ"),
        (good.with_mps(1), base + 0x1000, acq, aqa, "ASQ not aligned to 8 KiB pages"),
    ];
    for (cc, asq, acq, aqa, what) in refusals {
        let csts = enable_by_hand(&mut sim, cc, asq, acq, aqa);
        assert!(csts.cfs() && !csts.rdy(), "{what}: CSTS {:#x}", csts.into_bits());
        assert!(sim.controller().enable_refusal().is_some(), "{what}");
    }
    // IOSQES / IOCQES may still be 0 when enabling (§7.6.1 sets them before I/O queues).
    let csts = enable_by_hand(&mut sim, Cc::new(), asq, acq, aqa);
    assert!(csts.rdy() && !csts.cfs());
}

#[test]
fn driver_refuses_a_controller_whose_smallest_page_is_8k() {
    let (transport, _) = sim(ControllerConfig { mpsmin: 1, ..Default::default() });
    match Controller::new(Box::new(transport), Options::default()) {
        Err(nvme::device::DeviceError::Unsupported(why)) => assert!(why.contains("MPSMIN"), "{why}"),
        Err(e) => panic!("expected an Unsupported error, got {e}"),
        Ok(_) => panic!("bring-up must refuse CAP.MPSMIN > 0"),
    }
}

#[test]
fn configuration_space_identifies_an_nvme_function() {
    let config = ControllerConfig { vendor_id: 0x1234, device_id: 0xabcd, subsystem_id: 0x77, ..Default::default() };
    let (mut t, _) = sim(config);
    assert_eq!(t.config_read32(0x00).unwrap(), 0xabcd_1234);
    assert_eq!(t.config_read32(0x08).unwrap() >> 8, 0x01_0802, "class code: mass storage, NVM, NVMe");
    assert_eq!(t.config_read32(0x2c).unwrap() >> 16, 0x77);
    // BAR0 sizing: all ones reads back the size mask with the 64-bit memory type.
    t.config_write32(0x10, u32::MAX).unwrap();
    t.config_write32(0x14, u32::MAX).unwrap();
    assert_eq!(t.config_read32(0x10).unwrap(), !(16 * 1024 - 1) | 0b100);
    assert_eq!(t.config_read32(0x14).unwrap(), u32::MAX);
    t.config_write32(0x10, 0xfebf_0000).unwrap();
    assert_eq!(t.config_read32(0x10).unwrap(), 0xfebf_0004);
    // Capabilities: walk the list.
    assert_ne!(t.config_read32(0x04).unwrap() & (1 << 20), 0, "Status: Capabilities List");
    let mut at = t.config_read32(0x34).unwrap() & 0xfc;
    let mut ids = Vec::new();
    while at != 0 && ids.len() < 8 {
        let header = t.config_read32(at as u16).unwrap();
        ids.push(header & 0xff);
        at = (header >> 8) & 0xfc;
    }
    assert_eq!(ids, vec![0x01, 0x11, 0x10], "PCI Power Management, MSI-X, PCI Express");
    // Memory Space Enable clear: BAR0 reads as all ones, writes are dropped.
    t.config_write32(0x04, 0).unwrap();
    assert_eq!(t.mmio_read32(offset::VS).unwrap(), u32::MAX);
    t.config_write32(0x04, 0x2).unwrap();
    assert_eq!(t.mmio_read32(offset::VS).unwrap(), Version::V1_4.to_register());
    // Bad offsets are errors, not panics.
    assert!(t.config_read32(0x1001).is_err());
    assert!(t.config_read32(4096).is_err());
    assert!(t.mmio_read32(0x3).is_err());
    assert!(t.mmio_write32(16 * 1024, 0).is_err());
}

#[test]
fn function_level_reset_returns_the_function_to_its_initial_state() {
    let (mut ctrl, _) = default_driver();
    let t = ctrl.transport_mut();
    // Device Control in the PCI Express capability (at 60h + 8): Initiate FLR.
    t.config_write32(0x68, 1 << 15).unwrap();
    assert_eq!(t.config_read32(0x04).unwrap() & 0x6, 0, "Command register reset");
    t.config_write32(0x04, 0x2).unwrap();
    assert_eq!(t.mmio_read32(offset::CC).unwrap(), 0);
    ctrl.enable().unwrap();
    assert_eq!(ctrl.io_queues(), vec![1]);
}

#[test]
fn cap_reports_the_configuration() {
    let config = ControllerConfig { mqes: 0xff, cqr: false, to: 7, dstrd: 2, ams: 1, mpsmax: 3, ..Default::default() };
    let (mut t, _) = sim(config);
    t.config_write32(0x04, 0x6).unwrap();
    let cap = Cap::from_bits(t.mmio_read64(offset::CAP).unwrap());
    assert_eq!((cap.mqes(), cap.cqr(), cap.to(), cap.dstrd(), cap.ams()), (0xff, false, 7, 2, 1));
    assert_eq!((cap.css(), cap.mpsmin(), cap.mpsmax(), cap.nssrs()), (1, 0, 3, true));
}

#[test]
fn a_wider_doorbell_stride_works_end_to_end() {
    let (mut ctrl, _) = driver(ControllerConfig { dstrd: 3, ..Default::default() }, Options::default());
    assert_eq!(ctrl.doorbell_stride(), 32);
    let data = pattern(8192, 3);
    ctrl.io(1, rw(NvmOpcode::Write, 64, 16), Data::ToDevice(&data), Data::None).unwrap();
    let mut back = vec![0u8; 8192];
    ctrl.io(1, rw(NvmOpcode::Read, 64, 16), Data::FromDevice(&mut back), Data::None).unwrap();
    assert_eq!(back, data);
}

#[test]
fn arbitrary_register_and_doorbell_values_never_panic() {
    let (mut ctrl, _) = default_driver();
    let mut x = 0x9e37_79b9u32;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    for round in 0..20_000 {
        let offset = (next() % 0x1400) as u64 & !3;
        let value = match round % 4 {
            0 => u32::MAX,
            1 => 0,
            _ => next(),
        };
        let t = ctrl.transport_mut();
        t.mmio_write32(offset, value).unwrap();
        let _ = t.mmio_read32(offset).unwrap();
        if round % 97 == 0 {
            // Now and then a setting the engine accepts, so queues exist to be abused.
            let base = t.dma().base();
            t.mmio_write32(offset::AQA, next() & 0x0fff_0fff).unwrap();
            t.mmio_write64(offset::ASQ, base + ((next() as u64 % 64) << 12)).unwrap();
            t.mmio_write64(offset::ACQ, base + ((next() as u64 % 64) << 12)).unwrap();
            t.mmio_write32(offset::CC, 0).unwrap();
            t.mmio_write32(offset::CC, 0x0046_0001).unwrap();
        }
    }
    // Whatever state that left, the driver brings the controller back.
    ctrl.reset().unwrap();
    let data = pattern(4096, 9);
    ctrl.io(1, rw(NvmOpcode::Write, 8, 8), Data::ToDevice(&data), Data::None).unwrap();
    let mut back = vec![0u8; 4096];
    ctrl.io(1, rw(NvmOpcode::Read, 8, 8), Data::FromDevice(&mut back), Data::None).unwrap();
    assert_eq!(back, data);
}

#[test]
fn the_device_offers_its_registers_to_register_level_cases() {
    let (mut ctrl, _) = default_driver();
    let regs = ctrl.registers().expect("a userspace-driver target has registers");
    assert_eq!(regs.read32(offset::VS).unwrap(), Version::V1_4.to_register());
    assert_eq!(Cap::from_bits(regs.read64(offset::CAP).unwrap()).mqes(), 1023);
    regs.write32(offset::INTMS, 0x3).unwrap();
    assert_eq!(regs.read32(offset::INTMC).unwrap(), 0x3, "INTMS sets mask bits; both read the mask");
    regs.write32(offset::INTMC, 0x1).unwrap();
    assert_eq!(regs.read32(offset::INTMS).unwrap(), 0x2);
}

#[test]
fn a_drive_reporting_mqes_0_is_an_error_not_a_panic() {
    // MQES is 0's based and at least 1; a drive reporting 0 cannot take a two-entry queue.
    let (transport, _) = sim(ControllerConfig { mqes: 0, ..Default::default() });
    let err = Controller::new(Box::new(transport), Options::default()).err().expect("bring-up must fail");
    assert!(err.to_string().contains("Invalid Queue Size"), "{err}");
}

#[test]
fn after_shutdown_commands_are_refused_and_enable_brings_the_controller_back() {
    let (mut ctrl, _) = default_driver();
    ctrl.shutdown().unwrap();
    let err = ctrl.admin(Command { cdw10: 1, ..Command::admin(AdminOpcode::Identify) }, Data::None).unwrap_err();
    assert!(err.to_string().contains("shut down"), "{err}");
    assert!(ctrl.io_queues().is_empty());
    ctrl.enable().unwrap();
    assert_eq!(ctrl.io_queues(), vec![1]);
    assert_eq!(csts(&mut ctrl).shst(), 0, "a Controller Reset clears SHST");
}
