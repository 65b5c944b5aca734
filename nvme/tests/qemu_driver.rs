//! nvtest's host driver (`nvme::driver::Controller`) over the QEMU transport: the same
//! driver the simulated drive runs under, now against QEMU's controller.

mod qemu_support;

use nvme::device::{Data, Device};
use nvme::driver::{Controller, Options, Transfer};
use nvme::spec::{AdminOpcode, Command, NvmOpcode};
use nvme::transport::qemu::QemuMachine;
use qemu_support::one_controller;

fn identify(cns: u32, nsid: u32) -> Command {
    let mut cmd = Command::admin(AdminOpcode::Identify);
    cmd.nsid = nsid;
    cmd.cdw10 = cns;
    cmd
}

fn block(lba: u64) -> Vec<u8> {
    (0..4096u64).map(|i| (i * 31 + lba * 7) as u8).collect()
}

#[test]
fn the_driver_brings_up_qemus_controller_identifies_it_and_moves_data() {
    let machine = QemuMachine::start(one_controller("DRV00001")).unwrap();
    let transport = machine.transport(machine.controllers()[0]).unwrap();
    let mut ctrl = Controller::new(Box::new(transport), Options::default()).unwrap();
    assert_eq!(ctrl.describe(), "qemu:test 00:01.0");

    let mut id = vec![0u8; 4096];
    let cqe = ctrl.admin(identify(1, 0), Data::FromDevice(&mut id)).unwrap();
    assert!(cqe.status().is_success(), "{cqe:?}");
    assert_eq!(&id[4..12], b"DRV00001");
    let mut ns = vec![0u8; 4096];
    ctrl.admin(identify(0, 1), Data::FromDevice(&mut ns)).unwrap();
    let nsze = u64::from_le_bytes(ns[0..8].try_into().unwrap());
    assert_eq!(nsze, (64 << 20) / 4096, "NSZE of a 64 MiB namespace of 4 KiB blocks");

    let qid = ctrl.io_queues()[0];
    for lba in [0u64, 1, 7, nsze - 1] {
        let cqe =
            ctrl.io(qid, Command::nvm(NvmOpcode::Write, 1).with_slba(lba), Data::ToDevice(&block(lba)), Data::None);
        assert!(cqe.unwrap().status().is_success());
    }
    for lba in [0u64, 1, 7, nsze - 1] {
        let mut back = vec![0u8; 4096];
        let cqe =
            ctrl.io(qid, Command::nvm(NvmOpcode::Read, 1).with_slba(lba), Data::FromDevice(&mut back), Data::None);
        assert!(cqe.unwrap().status().is_success());
        assert!(back == block(lba), "LBA {lba} reads back what was written");
    }

    // 32 in flight at once on one queue.
    let mut queue = ctrl.queue(qid).unwrap();
    for lba in 100..132u64 {
        queue.submit(Command::nvm(NvmOpcode::Write, 1).with_slba(lba), Transfer::ToDevice(&block(lba))).unwrap();
    }
    queue.ring().unwrap();
    let mut ok = 0;
    queue.wait(32, |r| ok += r.completion.status().is_success() as usize).unwrap();
    assert_eq!(ok, 32);

    ctrl.shutdown().unwrap();
}
