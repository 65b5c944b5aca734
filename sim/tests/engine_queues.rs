//! Queues in the simulated drive: wrap-around and the Phase Tag, many commands in flight,
//! every status the queue-management commands can end with, a full completion queue
//! stalling its submission queue, queues described by PRP lists, and held commands
//! aborted by Abort or by deleting their queue.

mod engine_support;

use engine_support::*;
use nvme::device::{Data, Device};
use nvme::driver::{Options, Transfer};
use nvme::spec::queue::{
    Abort, CreateIoCompletionQueue, CreateIoSubmissionQueue, DeleteIoCompletionQueue, DeleteIoSubmissionQueue,
    QueuePriority,
};
use nvme::spec::{AdminOpcode, Command, NvmOpcode, Status};
use nvme_sim::pci::ControllerConfig;
use std::sync::atomic::Ordering;

fn identify() -> Command {
    Command { cdw10: 1, ..Command::admin(AdminOpcode::Identify) }
}

#[test]
fn admin_queue_wraps_around_three_times() {
    let options = Options { admin_queue_depth: 4, ..Default::default() };
    let (mut ctrl, _) = driver(ControllerConfig::default(), options);
    for i in 0..12 {
        let mut id = vec![0u8; 4096];
        let done = ctrl.admin(identify(), Data::FromDevice(&mut id)).unwrap();
        assert!(done.status().is_success(), "command {i}: {}", done.status());
        assert_eq!(id, identify_pattern(), "command {i}");
    }
}

#[test]
fn phase_tag_flips_on_every_wrap_of_a_two_entry_queue() {
    let options = Options { io_queue_depth: 2, ..Default::default() };
    let (mut ctrl, _) = driver(ControllerConfig::default(), options);
    let mut q = ctrl.queue(1).unwrap();
    assert_eq!((q.entries(), q.capacity()), (2, 1));
    for i in 0..10u32 {
        let data = pattern(BLOCK, i);
        q.submit(rw(NvmOpcode::Write, i as u64, 1), Transfer::ToDevice(&data)).unwrap();
        q.ring().unwrap();
        q.wait(1, |r| assert!(r.completion.status().is_success())).unwrap();
        q.submit(rw(NvmOpcode::Read, i as u64, 1), Transfer::FromDevice(BLOCK)).unwrap();
        q.ring().unwrap();
        q.wait(1, |r| assert_eq!(r.data, &data[..], "block {i}")).unwrap();
    }
}

#[test]
fn many_commands_in_flight_complete_with_their_own_data() {
    let options = Options { io_queue_depth: 64, ..Default::default() };
    let (mut ctrl, _) = driver(ControllerConfig::default(), options);
    let mut q = ctrl.queue(1).unwrap();
    let writes: Vec<Vec<u8>> = (0..63).map(|i| pattern(4096, 100 + i)).collect();
    for (i, data) in writes.iter().enumerate() {
        q.submit(rw(NvmOpcode::Write, i as u64 * 8, 8), Transfer::ToDevice(data)).unwrap();
    }
    q.ring().unwrap();
    assert_eq!(q.wait(63, |r| assert!(r.completion.status().is_success())).unwrap(), 63);
    let mut lba_of_cid = std::collections::HashMap::new();
    for i in 0..63u64 {
        let cid = q.submit(rw(NvmOpcode::Read, i * 8, 8), Transfer::FromDevice(4096)).unwrap();
        lba_of_cid.insert(cid, i as usize);
    }
    q.ring().unwrap();
    let mut seen = 0;
    q.wait(63, |r| {
        let i = lba_of_cid[&r.completion.cid];
        assert_eq!(r.data, &writes[i][..], "read {i}");
        seen += 1;
    })
    .unwrap();
    assert_eq!(seen, 63);
    assert_eq!(q.outstanding(), 0);
}

fn status_of(ctrl: &mut nvme::driver::Controller, cmd: Command) -> Status {
    ctrl.admin_raw(cmd).unwrap().status()
}

#[test]
fn queue_management_fails_with_the_status_the_spec_assigns() {
    let (mut ctrl, _) = default_driver();
    allow_queues(&mut ctrl, 4);
    let mem = ctrl.alloc_dma(64 * 1024).unwrap().addr;
    let cq = |qid: u16, qsize: u16| CreateIoCompletionQueue { qid, qsize, prp1: mem, pc: true, ien: false, iv: 0 };
    let sq = |qid: u16, qsize: u16, cqid: u16| CreateIoSubmissionQueue {
        qid,
        qsize,
        prp1: mem + 0x8000,
        pc: true,
        qprio: QueuePriority::Urgent,
        cqid,
        nvmsetid: 0,
    };
    let mqes = ctrl.cap().mqes();
    let cases: Vec<(&str, Command, Status)> = vec![
        ("CQ 0 is the admin queue", cq(0, 15).to_command(), Status::INVALID_QUEUE_IDENTIFIER),
        ("CQ 1 exists", cq(1, 15).to_command(), Status::INVALID_QUEUE_IDENTIFIER),
        ("CQ 5 beyond NCQA", cq(5, 15).to_command(), Status::INVALID_QUEUE_IDENTIFIER),
        ("CQ of one entry", cq(2, 0).to_command(), Status::INVALID_QUEUE_SIZE),
        ("CQ above MQES", cq(2, mqes + 1).to_command(), Status::INVALID_QUEUE_SIZE),
        (
            "CQ not contiguous with CAP.CQR set",
            CreateIoCompletionQueue { pc: false, ..cq(2, 15) }.to_command(),
            Status::INVALID_FIELD,
        ),
        (
            "CQ on vector 64 of 64",
            CreateIoCompletionQueue { ien: true, iv: 64, ..cq(2, 15) }.to_command(),
            Status::INVALID_INTERRUPT_VECTOR,
        ),
        (
            "CQ base not page aligned",
            CreateIoCompletionQueue { prp1: mem + 0x100, ..cq(2, 15) }.to_command(),
            Status::PRP_OFFSET_INVALID,
        ),
        ("SQ on the admin CQ", sq(2, 15, 0).to_command(), Status::COMPLETION_QUEUE_INVALID),
        ("SQ on a missing CQ", sq(2, 15, 3).to_command(), Status::COMPLETION_QUEUE_INVALID),
        ("SQ 0 is the admin queue", sq(0, 15, 1).to_command(), Status::INVALID_QUEUE_IDENTIFIER),
        ("SQ 1 exists", sq(1, 15, 1).to_command(), Status::INVALID_QUEUE_IDENTIFIER),
        ("SQ 5 beyond NSQA", sq(5, 15, 1).to_command(), Status::INVALID_QUEUE_IDENTIFIER),
        ("SQ of one entry", sq(2, 0, 1).to_command(), Status::INVALID_QUEUE_SIZE),
        ("SQ above MQES", sq(2, mqes + 1, 1).to_command(), Status::INVALID_QUEUE_SIZE),
        (
            "delete CQ 1 while SQ 1 uses it",
            DeleteIoCompletionQueue { qid: 1 }.to_command(),
            Status::INVALID_QUEUE_DELETION,
        ),
        ("delete CQ 0", DeleteIoCompletionQueue { qid: 0 }.to_command(), Status::INVALID_QUEUE_IDENTIFIER),
        ("delete missing CQ 3", DeleteIoCompletionQueue { qid: 3 }.to_command(), Status::INVALID_QUEUE_IDENTIFIER),
        ("delete SQ 0", DeleteIoSubmissionQueue { qid: 0 }.to_command(), Status::INVALID_QUEUE_IDENTIFIER),
        ("delete missing SQ 3", DeleteIoSubmissionQueue { qid: 3 }.to_command(), Status::INVALID_QUEUE_IDENTIFIER),
    ];
    for (what, cmd, expected) in cases {
        let got = status_of(&mut ctrl, cmd);
        assert!(got.same_code(&expected) && got.dnr, "{what}: got {got}, expected {expected} with DNR");
    }
    // And the same queue, asked for properly, works: vector 63 of 64 is valid.
    let ok = |s: Status| s.is_success();
    assert!(ok(status_of(&mut ctrl, CreateIoCompletionQueue { ien: true, iv: 63, ..cq(2, 15) }.to_command())));
    assert!(ok(status_of(&mut ctrl, sq(2, 15, 2).to_command())));
    assert!(ok(status_of(&mut ctrl, sq(3, 15, 2).to_command().with_prp1(mem + 0xc000))));
    assert!(status_of(&mut ctrl, DeleteIoCompletionQueue { qid: 2 }.to_command())
        .same_code(&Status::INVALID_QUEUE_DELETION));
    assert!(ok(status_of(&mut ctrl, DeleteIoSubmissionQueue { qid: 2 }.to_command())));
    assert!(ok(status_of(&mut ctrl, DeleteIoSubmissionQueue { qid: 3 }.to_command())));
    assert!(ok(status_of(&mut ctrl, DeleteIoCompletionQueue { qid: 2 }.to_command())));
    // The driver's own queue was never disturbed.
    let data = pattern(512, 4);
    assert!(ctrl.io(1, rw(NvmOpcode::Write, 0, 1), Data::ToDevice(&data), Data::None).unwrap().status().is_success());
}

trait WithPrp1 {
    fn with_prp1(self, prp1: u64) -> Self;
}

impl WithPrp1 for Command {
    fn with_prp1(self, prp1: u64) -> Self {
        Command { prp1, ..self }
    }
}

#[test]
fn a_full_completion_queue_stalls_its_submission_queue_until_the_host_frees_slots() {
    let (mut ctrl, _) = default_driver();
    allow_queues(&mut ctrl, 2);
    // A CQ of two entries holds one completion; its SQ has eight entries.
    let mut q = RawQueue::create(&mut ctrl, 2, 8, 2);
    for cid in [10, 11, 12] {
        q.push(&ctrl, cid, flush());
    }
    q.ring(&mut ctrl);
    let first = q.pop(&ctrl).expect("one completion fits");
    assert_eq!((first.cid, first.sq_head, first.sq_id), (10, 1, 2));
    assert!(q.pop(&ctrl).is_none(), "the CQ is full: the controller must not fetch more");
    q.release(&mut ctrl);
    let second = q.pop(&ctrl).expect("freeing a slot resumes the SQ");
    assert_eq!((second.cid, second.sq_head), (11, 2));
    assert!(q.pop(&ctrl).is_none());
    q.release(&mut ctrl);
    let third = q.pop(&ctrl).expect("and again");
    assert_eq!((third.cid, third.sq_head), (12, 3));
    assert!(!third.phase(), "the third completion is posted after the CQ wrapped: Phase Tag 0");
    assert!(third.status().is_success());
}

#[test]
fn queues_described_by_prp_lists_work_when_cqr_is_clear() {
    let (mut ctrl, _) = driver(ControllerConfig { cqr: false, ..Default::default() }, Options::default());
    allow_queues(&mut ctrl, 2);
    // Two pages each, allocated apart and listed in reverse order of address.
    let pages: Vec<u64> = (0..4).map(|_| ctrl.alloc_dma(4096).unwrap().addr).collect();
    let (cq_pages, sq_pages) = ([pages[3], pages[0]], [pages[2], pages[1]]);
    let (cq_list, sq_list) = (ctrl.alloc_dma(4096).unwrap().addr, ctrl.alloc_dma(4096).unwrap().addr);
    for p in cq_pages {
        ctrl.dma().fill(p, 4096, 0).unwrap();
    }
    let bytes = |l: [u64; 2]| -> Vec<u8> { l.iter().flat_map(|p| p.to_le_bytes()).collect() };
    ctrl.dma().write(cq_list, &bytes(cq_pages)).unwrap();
    ctrl.dma().write(sq_list, &bytes(sq_pages)).unwrap();
    let cq = CreateIoCompletionQueue { qid: 2, qsize: 511, prp1: cq_list, pc: false, ien: false, iv: 0 };
    assert!(ctrl.admin_raw(cq.to_command()).unwrap().status().is_success());
    let sq = CreateIoSubmissionQueue {
        qid: 2,
        qsize: 127,
        prp1: sq_list,
        pc: false,
        qprio: QueuePriority::Urgent,
        cqid: 2,
        nvmsetid: 0,
    };
    assert!(ctrl.admin_raw(sq.to_command()).unwrap().status().is_success());
    // 300 commands: the SQ wraps twice and both queues cross into their second page.
    let (mut tail, mut head, mut phase) = (0u32, 0u32, true);
    for batch in 0..3u16 {
        for i in 0..100u16 {
            let at = sq_pages[(tail as usize * 64) / 4096] + (tail as u64 * 64) % 4096;
            ctrl.dma().write_obj(at, &Command { cid: batch * 100 + i, ..flush() }).unwrap();
            tail = (tail + 1) % 128;
        }
        ctrl.write_register(nvme::spec::registers::doorbell(2, false, 0), tail).unwrap();
        for i in 0..100u16 {
            let at = cq_pages[(head as usize * 16) / 4096] + (head as u64 * 16) % 4096;
            let cqe: nvme::spec::Completion = ctrl.dma().read_obj(at).unwrap();
            assert_eq!(cqe.phase(), phase, "completion {}", batch * 100 + i);
            assert_eq!(cqe.cid, batch * 100 + i);
            assert!(cqe.status().is_success());
            head += 1;
            if head == 512 {
                head = 0;
                phase = !phase;
            }
        }
        ctrl.write_register(nvme::spec::registers::doorbell(2, true, 0), head).unwrap();
    }
    // A list entry with an offset is refused, and so is a list pointer with one.
    let bad_list = ctrl.alloc_dma(4096).unwrap().addr;
    ctrl.dma().write(bad_list, &bytes([pages[0], pages[1] + 0x40])).unwrap();
    allow_queues(&mut ctrl, 3);
    let bad = CreateIoCompletionQueue { qid: 3, qsize: 511, prp1: bad_list, pc: false, ien: false, iv: 0 };
    assert!(ctrl.admin_raw(bad.to_command()).unwrap().status().same_code(&Status::PRP_OFFSET_INVALID));
    let bad = CreateIoCompletionQueue { prp1: cq_list + 8, ..bad };
    assert!(ctrl.admin_raw(bad.to_command()).unwrap().status().same_code(&Status::PRP_OFFSET_INVALID));
}

#[test]
fn abort_completes_a_held_command_and_reports_it_aborted() {
    let (mut ctrl, controls) = default_driver();
    allow_queues(&mut ctrl, 2);
    let mut q = RawQueue::create(&mut ctrl, 2, 8, 8);
    controls.hang.store(true, Ordering::Relaxed);
    q.push(&ctrl, 9, rw(NvmOpcode::Read, 0, 1));
    q.ring(&mut ctrl);
    controls.hang.store(false, Ordering::Relaxed);
    assert!(q.pop(&ctrl).is_none(), "a held command has no completion");
    let not_there = ctrl.admin_raw(Abort { sqid: 2, cid: 10 }.to_command()).unwrap();
    assert!(not_there.status().is_success() && !Abort::was_aborted(not_there.dw0));
    let aborted = ctrl.admin_raw(Abort { sqid: 2, cid: 9 }.to_command()).unwrap();
    assert!(aborted.status().is_success() && Abort::was_aborted(aborted.dw0));
    let cqe = q.pop(&ctrl).expect("the aborted command completes");
    assert_eq!(cqe.cid, 9);
    assert!(cqe.status().same_code(&Status::ABORT_REQUESTED), "{}", cqe.status());
}

#[test]
fn deleting_a_queue_completes_its_held_commands_as_aborted() {
    let (mut ctrl, controls) = default_driver();
    allow_queues(&mut ctrl, 2);
    let mut q = RawQueue::create(&mut ctrl, 2, 8, 8);
    controls.hang.store(true, Ordering::Relaxed);
    q.push(&ctrl, 3, rw(NvmOpcode::Read, 0, 1));
    q.push(&ctrl, 4, rw(NvmOpcode::Read, 1, 1));
    q.ring(&mut ctrl);
    controls.hang.store(false, Ordering::Relaxed);
    assert!(q.pop(&ctrl).is_none());
    assert!(ctrl.admin_raw(DeleteIoSubmissionQueue { qid: 2 }.to_command()).unwrap().status().is_success());
    for cid in [3, 4] {
        let cqe = q.pop(&ctrl).expect("completed by the deletion");
        assert_eq!(cqe.cid, cid);
        assert!(cqe.status().same_code(&Status::ABORTED_SQ_DELETION), "{}", cqe.status());
    }
    assert!(ctrl.admin_raw(DeleteIoCompletionQueue { qid: 2 }.to_command()).unwrap().status().is_success());
}

#[test]
fn sgl_data_pointers_are_refused_by_a_prp_only_controller() {
    let (mut ctrl, _) = default_driver();
    let mut q = ctrl.queue(1).unwrap();
    // PSDT = 01b: SGL for data.
    let done = q.execute_raw(Command { flags: 0x40, ..rw(NvmOpcode::Read, 0, 1) }).unwrap();
    assert!(done.status().same_code(&Status::INVALID_FIELD));
}
