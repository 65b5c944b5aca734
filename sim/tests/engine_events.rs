//! Asynchronous events and timeouts between the driver and the simulated drive: the AER
//! limit, delivery and per-type masking until the log page is read, invalid doorbell
//! writes reported as events, AERs dropped by a Controller Reset, and a command that
//! never completes proving the driver's timeout (then aborted).

mod engine_support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use engine_support::*;
use nvme::device::{Data, Device, DeviceError};
use nvme::driver::{Controller, Options, Transfer};
use nvme::spec::queue::{error_status_info, event_type, Abort, AsyncEventCompletion};
use nvme::spec::registers::doorbell;
use nvme::spec::{AdminOpcode, Command, NvmOpcode, Status};
use nvme_sim::pci::ControllerConfig;

fn raise(ctrl: &mut Controller, event_type: u8, info: u8, log_page: u8) {
    let cmd = Command {
        opcode: RAISE_EVENT,
        cdw10: event_type as u32,
        cdw11: info as u32,
        cdw12: log_page as u32,
        ..Default::default()
    };
    assert!(ctrl.admin(cmd, Data::None).unwrap().status().is_success());
}

/// Get Log Page of 512 bytes; `rae` keeps the event masked.
fn read_log(ctrl: &mut Controller, lid: u8, rae: bool) {
    let cmd = Command {
        nsid: 0xffff_ffff,
        cdw10: lid as u32 | (rae as u32) << 15 | 127 << 16,
        ..Command::admin(AdminOpcode::GetLogPage)
    };
    let mut buf = vec![0u8; 512];
    assert!(ctrl.admin(cmd, Data::FromDevice(&mut buf)).unwrap().status().is_success());
}

fn events(ctrl: &mut Controller) -> Vec<AsyncEventCompletion> {
    ctrl.take_async_events()
        .unwrap()
        .into_iter()
        .map(|c| {
            assert!(c.status().is_success(), "AER completed with {}", c.status());
            AsyncEventCompletion::from_dw0(c.dw0)
        })
        .collect()
}

#[test]
fn more_than_aerl_plus_one_requests_fail_with_the_limit_status() {
    let (mut ctrl, _) = driver(ControllerConfig { aerl: 3, ..Default::default() }, Options::default());
    ctrl.arm_async_events(5).unwrap();
    let done = ctrl.take_async_events().unwrap();
    assert_eq!(done.len(), 1, "four are kept outstanding, the fifth is refused");
    let status = done[0].status();
    assert!(status.same_code(&Status::ASYNC_EVENT_REQUEST_LIMIT_EXCEEDED) && status.dnr, "{status}");
    // The driver does not re-arm a refused request: nothing more arrives.
    assert!(ctrl.take_async_events().unwrap().is_empty());
    // The four still outstanding take events.
    raise(&mut ctrl, event_type::NOTICE, 0, 0x04);
    assert_eq!(events(&mut ctrl).len(), 1);
}

#[test]
fn an_event_type_stays_masked_until_its_log_page_is_read() {
    let (mut ctrl, _) = default_driver();
    ctrl.arm_async_events(2).unwrap();
    assert!(ctrl.take_async_events().unwrap().is_empty(), "no event yet");
    raise(&mut ctrl, event_type::NOTICE, 0, 0x04);
    let got = events(&mut ctrl);
    assert_eq!(got, vec![AsyncEventCompletion { event_type: event_type::NOTICE, info: 0, log_page: 0x04 }]);
    // A second notice waits: notices are masked until the Changed Namespace List is read.
    raise(&mut ctrl, event_type::NOTICE, 0, 0x04);
    assert!(events(&mut ctrl).is_empty());
    // Another type is not masked.
    raise(&mut ctrl, event_type::SMART_HEALTH_STATUS, 1, 0x02);
    assert_eq!(events(&mut ctrl)[0].event_type, event_type::SMART_HEALTH_STATUS);
    // Reading the log with Retain Asynchronous Event keeps the mask.
    read_log(&mut ctrl, 0x04, true);
    assert!(events(&mut ctrl).is_empty());
    // Another log page does not clear it either.
    read_log(&mut ctrl, 0x02, false);
    assert!(events(&mut ctrl).is_empty());
    read_log(&mut ctrl, 0x04, false);
    assert_eq!(
        events(&mut ctrl),
        vec![AsyncEventCompletion { event_type: event_type::NOTICE, info: 0, log_page: 0x04 }]
    );
}

#[test]
fn invalid_doorbell_writes_are_ignored_and_reported_as_error_events() {
    let (mut ctrl, _) = default_driver();
    ctrl.arm_async_events(1).unwrap();
    // SQ 7 does not exist.
    ctrl.write_register(doorbell(7, false, 0), 1).unwrap();
    let got = events(&mut ctrl);
    assert_eq!(
        got,
        vec![AsyncEventCompletion {
            event_type: event_type::ERROR_STATUS,
            info: error_status_info::WRITE_TO_INVALID_DOORBELL_REGISTER,
            log_page: 0x01
        }]
    );
    // A tail beyond I/O SQ 1's 256 entries: masked until the Error Information log is read.
    ctrl.write_register(doorbell(1, false, 0), 0xffff).unwrap();
    assert!(events(&mut ctrl).is_empty());
    read_log(&mut ctrl, 0x01, false);
    let got = events(&mut ctrl);
    assert_eq!(got[0].info, error_status_info::INVALID_DOORBELL_WRITE_VALUE);
    // A CQ head that would consume completions never posted.
    read_log(&mut ctrl, 0x01, false);
    ctrl.write_register(doorbell(1, true, 0), 5).unwrap();
    assert_eq!(events(&mut ctrl)[0].info, error_status_info::INVALID_DOORBELL_WRITE_VALUE);
    // The ignored writes left the queues working.
    let data = pattern(4096, 2);
    let done = ctrl.io(1, rw(NvmOpcode::Write, 0, 8), Data::ToDevice(&data), Data::None).unwrap();
    assert!(done.status().is_success());
    assert!(ctrl.take_unexpected_completions().is_empty());
}

#[test]
fn a_controller_reset_drops_outstanding_requests_and_the_driver_rearms() {
    let (mut ctrl, _) = default_driver();
    ctrl.arm_async_events(4).unwrap();
    ctrl.reset().unwrap();
    // Had the reset not dropped the four, re-arming four would exceed AERL + 1.
    assert!(ctrl.take_async_events().unwrap().is_empty());
    raise(&mut ctrl, event_type::NOTICE, 1, 0x03);
    assert_eq!(events(&mut ctrl)[0].info, 1);
}

#[test]
fn a_command_that_never_completes_times_out_naming_itself_and_can_be_aborted() {
    let options = Options { command_timeout_ms: 200, ..Default::default() };
    let (mut ctrl, controls) = driver(ControllerConfig::default(), options);
    controls.hang.store(true, Ordering::Relaxed);
    let start = Instant::now();
    let mut buf = vec![0u8; 4096];
    let err = ctrl.io(1, rw(NvmOpcode::Read, 0, 8), Data::FromDevice(&mut buf), Data::None).unwrap_err();
    let waited = start.elapsed();
    match &err {
        DeviceError::Timeout { what, after_ms } => {
            assert_eq!(*after_ms, 200);
            assert!(what.contains("Read (02h)") && what.contains("I/O queue 1"), "{what}");
        }
        e => panic!("expected a timeout, got {e}"),
    }
    // The deadline runs on the drive's simulated clock: 200 ms of it passed, not of ours.
    assert!(ctrl.transport_mut().now_ns() >= 200_000_000);
    assert!(waited < Duration::from_secs(3), "{waited:?}");

    // Through the queue API, with the CID in hand, then aborted.
    let mut q = ctrl.queue(1).unwrap();
    let cid = q.submit(rw(NvmOpcode::Read, 8, 8), Transfer::FromDevice(4096)).unwrap();
    q.ring().unwrap();
    assert!(matches!(q.wait(1, |_| {}), Err(DeviceError::Timeout { .. })));
    controls.hang.store(false, Ordering::Relaxed);
    let done = ctrl.admin_raw(Abort { sqid: 1, cid }.to_command()).unwrap();
    assert!(Abort::was_aborted(done.dw0));
    // The late completion frees the abandoned slot; nothing is left outstanding or stray.
    let mut q = ctrl.queue(1).unwrap();
    assert_eq!(q.poll(|_| panic!("an abandoned command is not handed back")).unwrap(), 0);
    assert_eq!(q.outstanding(), 0);
    assert!(ctrl.take_unexpected_completions().is_empty());
    // And the queue keeps working.
    let done = ctrl.io(1, rw(NvmOpcode::Read, 0, 8), Data::FromDevice(&mut buf), Data::None).unwrap();
    assert!(done.status().is_success());
}

#[test]
fn an_event_raised_before_bring_up_waits_for_a_request() {
    let (mut transport, _) = sim(ControllerConfig::default());
    transport.raise_event(nvme_sim::exec::AsyncEvent {
        event_type: event_type::SMART_HEALTH_STATUS,
        info: 2,
        log_page: 0x02,
    });
    let mut ctrl = Controller::new(Box::new(transport), Options::default()).unwrap();
    assert!(ctrl.take_async_events().unwrap().is_empty(), "no request outstanding yet");
    ctrl.arm_async_events(1).unwrap();
    assert_eq!(
        events(&mut ctrl),
        vec![AsyncEventCompletion { event_type: event_type::SMART_HEALTH_STATUS, info: 2, log_page: 0x02 }]
    );
}
