//! The driver's bring-up and shutdown against a scripted register file (no queues are
//! processed): the order of §7.6.1, bounds from CAP.TO, and refusals with clear errors.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nvme::device::DeviceError;
use nvme::driver::{Controller, Options};
use nvme::spec::registers::{offset, Cap, Cc, Csts};
use nvme::transport::{DmaRegion, Transport, TransportError};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Behaviour {
    /// CSTS.RDY follows CC.EN at once; SHST completes at once.
    Obedient,
    /// CSTS.RDY never sets.
    NeverReady,
    /// CC.EN = 1 sets CSTS.CFS.
    Fatal,
    /// Obedient until the first doorbell, which clears CSTS.RDY (the function present).
    RdyDroppedAtDoorbell,
    /// Obedient until the first doorbell, when the function leaves as from QEMU's emptied
    /// hot-plug slot: BAR0 reads 0, configuration space all ones.
    GoneAtDoorbell,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Access {
    Config(u16, u32),
    Write(u64, u32),
}

struct Fake {
    behaviour: Behaviour,
    vendor: u32,
    cap: Cap,
    cc: Cc,
    csts: Csts,
    log: Arc<Mutex<Vec<Access>>>,
    dma: DmaRegion,
}

impl Fake {
    fn new(behaviour: Behaviour, cap: Cap) -> (Fake, Arc<Mutex<Vec<Access>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let fake = Fake {
            behaviour,
            vendor: 0x1234_5678,
            cap,
            cc: Cc::new(),
            csts: Csts::new(),
            log: log.clone(),
            dma: DmaRegion::heap(1 << 20, 0x10_0000),
        };
        (fake, log)
    }
}

fn cap(to: u8, mpsmin: u8) -> Cap {
    Cap::new().with_mqes(63).with_cqr(true).with_to(to).with_css(1).with_mpsmin(mpsmin).with_mpsmax(4)
}

impl Transport for Fake {
    fn describe(&self) -> String {
        "fake".into()
    }
    fn config_read32(&mut self, offset: u16) -> Result<u32, TransportError> {
        Ok(if offset == 0 { self.vendor } else { 0 })
    }
    fn config_write32(&mut self, offset: u16, value: u32) -> Result<(), TransportError> {
        self.log.lock().unwrap().push(Access::Config(offset, value));
        Ok(())
    }
    fn mmio_read32(&mut self, at: u64) -> Result<u32, TransportError> {
        Ok(match at {
            offset::CAP => self.cap.into_bits() as u32,
            4 => (self.cap.into_bits() >> 32) as u32,
            offset::VS => 0x0001_0400,
            offset::CC => self.cc.into_bits(),
            offset::CSTS => self.csts.into_bits(),
            _ => 0,
        })
    }
    fn mmio_write32(&mut self, at: u64, value: u32) -> Result<(), TransportError> {
        self.log.lock().unwrap().push(Access::Write(at, value));
        if at >= 0x1000 {
            match self.behaviour {
                Behaviour::RdyDroppedAtDoorbell => self.csts.set_rdy(false),
                Behaviour::GoneAtDoorbell => {
                    self.csts = Csts::new();
                    self.cap = Cap::new();
                    self.vendor = 0xFFFF_FFFF;
                }
                _ => {}
            }
        }
        if at == offset::CC {
            let cc = Cc::from_bits(value);
            self.cc = cc;
            match self.behaviour {
                Behaviour::Obedient | Behaviour::RdyDroppedAtDoorbell => self.csts.set_rdy(cc.en()),
                Behaviour::GoneAtDoorbell if self.vendor != 0xFFFF_FFFF => self.csts.set_rdy(cc.en()),
                Behaviour::GoneAtDoorbell => {}
                Behaviour::NeverReady => {}
                Behaviour::Fatal => self.csts.set_cfs(cc.en()),
            }
            if cc.shn() != 0 {
                self.csts.set_shst(0b10);
            }
        }
        Ok(())
    }
    fn dma(&self) -> &DmaRegion {
        &self.dma
    }
}

fn no_io_queues() -> Options {
    Options { io_queues: 0, ..Default::default() }
}

#[test]
fn bring_up_follows_the_initialization_order_of_7_6_1() {
    let (fake, log) = Fake::new(Behaviour::Obedient, cap(2, 0));
    let ctrl = Controller::new(Box::new(fake), no_io_queues()).unwrap();
    let seen = log.lock().unwrap().clone();
    // Memory Space and Bus Master Enable first.
    assert_eq!(seen[0], Access::Config(0x04, 0x6));
    let position = |a: u64| seen.iter().position(|x| matches!(x, Access::Write(o, _) if *o == a)).unwrap();
    let cc_writes: Vec<u32> =
        seen.iter().filter_map(|x| if let Access::Write(offset::CC, v) = x { Some(*v) } else { None }).collect();
    assert_eq!(cc_writes, vec![0x0046_0001], "CSS NVM, MPS 4 KiB, AMS round robin, IOSQES 6, IOCQES 4, EN");
    assert!(position(offset::AQA) < position(offset::CC));
    assert!(position(offset::ASQ) < position(offset::CC));
    assert!(position(offset::ACQ) < position(offset::CC));
    assert!(seen.contains(&Access::Write(offset::AQA, 0x001f_001f)), "32-entry admin queues, 0's based");
    drop(ctrl);
    // Dropping the controller shuts it down: CC.SHN = 01b.
    let last_cc = log
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find_map(|x| if let Access::Write(offset::CC, v) = x { Some(*v) } else { None })
        .unwrap();
    assert_eq!(Cc::from_bits(last_cc).shn(), 0b01);
}

#[test]
fn an_enabled_controller_is_disabled_before_the_admin_queue_is_programmed() {
    let (mut fake, log) = Fake::new(Behaviour::Obedient, cap(2, 0));
    fake.cc = Cc::new().with_en(true).with_iosqes(6).with_iocqes(4);
    fake.csts.set_rdy(true);
    let _ctrl = Controller::new(Box::new(fake), no_io_queues()).unwrap();
    let seen = log.lock().unwrap().clone();
    let first_cc = seen.iter().position(|x| matches!(x, Access::Write(offset::CC, v) if v & 1 == 0)).unwrap();
    let aqa = seen.iter().position(|x| matches!(x, Access::Write(offset::AQA, _))).unwrap();
    assert!(first_cc < aqa, "CC.EN cleared before AQA is written");
}

#[test]
fn a_controller_that_never_becomes_ready_fails_within_cap_to() {
    let (fake, _) = Fake::new(Behaviour::NeverReady, cap(2, 0));
    let start = Instant::now();
    let err = Controller::new(Box::new(fake), no_io_queues()).err().expect("bring-up must fail");
    let waited = start.elapsed();
    let text = err.to_string();
    assert!(text.contains("CSTS.RDY") && text.contains("CAP.TO 2"), "{text}");
    assert!(waited >= Duration::from_millis(1000) && waited < Duration::from_secs(3), "{waited:?}");
}

#[test]
fn controller_fatal_status_on_enable_is_an_error() {
    let (fake, _) = Fake::new(Behaviour::Fatal, cap(2, 0));
    let err = Controller::new(Box::new(fake), no_io_queues()).err().expect("bring-up must fail");
    assert!(err.to_string().contains("CSTS.CFS"), "{err}");
}

#[test]
fn a_smallest_page_above_4k_is_refused_before_enabling() {
    let (fake, log) = Fake::new(Behaviour::Obedient, cap(2, 1));
    match Controller::new(Box::new(fake), no_io_queues()) {
        Err(DeviceError::Unsupported(why)) => assert!(why.contains("CAP.MPSMIN is 1"), "{why}"),
        Err(e) => panic!("expected Unsupported, got {e}"),
        Ok(_) => panic!("must refuse"),
    }
    assert!(!log.lock().unwrap().iter().any(|x| matches!(x, Access::Write(offset::CC, _))), "CC never written");
}

#[test]
fn an_absent_function_is_an_error() {
    let (mut fake, _) = Fake::new(Behaviour::Obedient, cap(2, 0));
    fake.vendor = 0xffff_ffff;
    let err = Controller::new(Box::new(fake), no_io_queues()).err().expect("bring-up must fail");
    assert!(err.to_string().contains("no PCI function"), "{err}");
}

#[test]
fn admin_queue_depth_outside_aqa_range_is_refused() {
    let (fake, _) = Fake::new(Behaviour::Obedient, cap(2, 0));
    let options = Options { admin_queue_depth: 4097, ..no_io_queues() };
    assert!(Controller::new(Box::new(fake), options).is_err());
}

/// A function whose BAR reads 0 once it is gone (QEMU's emptied hot-plug slot) is found
/// gone from configuration space (Vendor ID FFFFh) at the driver's 100 ms CSTS check:
/// the outstanding command ends in `Removed`, not at the command timeout.
#[test]
fn a_function_reading_zero_and_config_all_ones_is_removed_not_timed_out() {
    let (fake, _) = Fake::new(Behaviour::GoneAtDoorbell, cap(2, 0));
    let options = Options { command_timeout_ms: 5_000, ..no_io_queues() };
    let mut ctrl = Controller::new(Box::new(fake), options).unwrap();
    let start = Instant::now();
    let err =
        nvme::device::Device::admin(&mut ctrl, nvme::spec::identify::identify(1u8, 0, 0), nvme::device::Data::None)
            .expect_err("a gone function completes nothing");
    let took = start.elapsed();
    assert!(matches!(err, DeviceError::Removed { .. }), "{err}");
    assert!(took < Duration::from_millis(1_000), "found gone after {took:?}");
}

/// A present controller that dropped CSTS.RDY (a quirk, not a removal) is not reported
/// gone: its Vendor ID still answers, so the command runs into its timeout.
#[test]
fn a_present_controller_that_dropped_rdy_is_not_reported_removed() {
    let (fake, _) = Fake::new(Behaviour::RdyDroppedAtDoorbell, cap(2, 0));
    let options = Options { command_timeout_ms: 400, ..no_io_queues() };
    let mut ctrl = Controller::new(Box::new(fake), options).unwrap();
    let err =
        nvme::device::Device::admin(&mut ctrl, nvme::spec::identify::identify(1u8, 0, 0), nvme::device::Data::None)
            .expect_err("nothing completes");
    assert!(matches!(err, DeviceError::Timeout { .. }), "{err}");
}
