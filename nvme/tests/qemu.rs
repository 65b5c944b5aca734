//! The QEMU transport against a real QEMU (no guest): registers, an admin queue and
//! I/O by hand, a controller behind a PCIe root port, QMP, and that nothing of a
//! machine outlives it — after a drop, a panic, or QEMU being killed mid-test.
//!
//! Needs `qemu-system-x86_64` (QEMU 10 from bookworm-backports); without it every test
//! here fails and says how to install it.

mod qemu_support;

use std::time::{Duration, Instant};

use nvme::spec::registers::{offset, Cap, Cc};
use nvme::spec::NvmOpcode;
use nvme::transport::qemu::{PciAddress, QemuConfig, QemuMachine, QmpError};
use nvme::transport::{Transport, TransportError};
use qemu_support::{args, assert_cleaned, layout, one_controller, process_exists, qemu_binary, Hand};

#[test]
fn cap_and_vs_read_and_cc_en_brings_csts_rdy() {
    let machine = QemuMachine::start(one_controller("REG0001")).unwrap();
    let controllers = machine.controllers();
    assert_eq!(controllers, [PciAddress::new(0, 1, 0)]);
    let mut t = machine.transport(controllers[0]).unwrap();
    assert_eq!(t.describe(), "qemu:test 00:01.0");

    let id = t.config_read32(0x00).unwrap();
    assert_eq!(id, 0x0010_1b36, "QEMU's NVMe: vendor 1B36h, device 0010h");
    assert_eq!(t.config_read32(0x08).unwrap() >> 8, 0x01_0802);
    assert_eq!(t.config_read32(0x04).unwrap() & 0x6, 0x6, "memory space and bus master enabled");

    let cap = Cap::from_bits(t.mmio_read64(offset::CAP).unwrap());
    assert_eq!(cap.css() & 1, 1, "CAP.CSS: NVM command set");
    assert!(cap.mqes() >= 63);
    assert_eq!(
        t.mmio_read64(offset::CAP).unwrap(),
        t.mmio_read32(0).unwrap() as u64 | (t.mmio_read32(4).unwrap() as u64) << 32
    );
    assert_eq!(t.mmio_read32(offset::VS).unwrap(), 0x0001_0400, "QEMU 10 reports NVMe 1.4");

    let hand = Hand::bring_up(&mut t, 32).unwrap();
    assert!(Cc::from_bits(t.mmio_read32(offset::CC).unwrap()).en());
    // Disabling clears RDY again.
    t.mmio_write32(offset::CC, 0).unwrap();
    qemu_support::wait_ready(&mut t, hand.cap, false).unwrap();
}

#[test]
fn identify_controller_and_io_through_a_hand_built_queue() {
    let machine = QemuMachine::start(one_controller("HAND0001")).unwrap();
    let mut t = machine.transport(machine.controllers()[0]).unwrap();
    let mut hand = Hand::bring_up(&mut t, 32).unwrap();
    let id = hand.identify_controller(&mut t).unwrap();
    assert_eq!(u16::from_le_bytes([id[0], id[1]]), 0x1b36, "VID");
    assert_eq!(std::str::from_utf8(&id[4..24]).unwrap().trim_end(), "HAND0001", "SN");
    assert!(std::str::from_utf8(&id[24..64]).unwrap().starts_with("QEMU NVMe Ctrl"), "MN");

    hand.create_io_queue(&mut t, 64).unwrap();
    let data = t.dma().base() + layout::DATA;
    for i in 0..8u64 {
        let pattern: Vec<u8> = (0..4096u64).map(|b| (b * 7 + i * 13) as u8).collect();
        t.dma().write(data + i * 4096, &pattern).unwrap();
    }
    hand.io_batch(&mut t, NvmOpcode::Write, 8, 8).unwrap();
    t.dma().fill(data, 8 * 4096, 0).unwrap();
    hand.io_batch(&mut t, NvmOpcode::Read, 8, 8).unwrap();
    for i in 0..8u64 {
        let mut back = vec![0u8; 4096];
        t.dma().read(data + i * 4096, &mut back).unwrap();
        assert!(back.iter().enumerate().all(|(b, &v)| v == (b as u64 * 7 + i * 13) as u8), "block {i} read back");
    }
}

/// A power cut kills QEMU: the transport answers Gone until the power is back; then a
/// new QEMU runs on the same image and RAM, the function is where it was, and what the
/// first QEMU wrote is read back by the second.
#[test]
fn a_power_cycle_starts_qemu_again_on_the_same_image() {
    let machine = QemuMachine::start(one_controller("POWR0001")).unwrap();
    let first = machine.pid();
    let mut t = machine.transport(machine.controllers()[0]).unwrap();
    let mut hand = Hand::bring_up(&mut t, 32).unwrap();
    hand.create_io_queue(&mut t, 64).unwrap();
    let data = t.dma().base() + layout::DATA;
    let pattern: Vec<u8> = (0..8 * 4096u64).map(|b| (b * 11 + 5) as u8).collect();
    t.dma().write(data, &pattern).unwrap();
    hand.io_batch(&mut t, NvmOpcode::Write, 8, 8).unwrap();

    assert_eq!(t.power().unwrap().method(), nvme::transport::PowerMethod::Cut);
    t.power().unwrap().off(0).unwrap();
    assert!(!process_exists(first), "QEMU {first} outlived the power cut");
    assert!(matches!(t.mmio_read32(offset::VS), Err(TransportError::Gone(_))), "registers while off");
    t.power().unwrap().on().unwrap();
    assert_ne!(machine.pid(), first, "a new QEMU runs");
    assert_eq!(t.mmio_read32(offset::VS).unwrap(), 0x0001_0400, "VS after the power cycle");

    let mut hand = Hand::bring_up(&mut t, 32).unwrap();
    hand.create_io_queue(&mut t, 64).unwrap();
    t.dma().fill(data, 8 * 4096, 0).unwrap();
    hand.io_batch(&mut t, NvmOpcode::Read, 8, 8).unwrap();
    let mut back = vec![0u8; 8 * 4096];
    t.dma().read(data, &mut back).unwrap();
    assert!(back == pattern, "the blocks the first QEMU wrote, read by the second");
}

#[test]
fn controllers_behind_a_root_port_and_on_the_root_bus_work_side_by_side() {
    let config = QemuConfig {
        binary: qemu_binary(),
        disks: vec![qemu_support_disk("nsa"), qemu_support_disk("nsb")],
        extra_args: args(&[
            "-device",
            "pcie-root-port,id=rp0,chassis=1,slot=1",
            "-device",
            "nvme,serial=PORT0001,id=nvme0,bus=rp0",
            "-device",
            "nvme-ns,drive=nsa,nsid=1,bus=nvme0",
            "-device",
            "nvme,serial=ROOT0001,id=nvme1",
            "-device",
            "nvme-ns,drive=nsb,nsid=1,bus=nvme1",
        ]),
        ..QemuConfig::default()
    };
    let machine = QemuMachine::start(config).unwrap();
    let controllers = machine.controllers();
    assert_eq!(controllers, [PciAddress::new(0, 2, 0), PciAddress::new(1, 0, 0)]);
    let port = PciAddress::new(0, 1, 0);
    assert_eq!(
        machine.config_read32(port, 0x18).unwrap() & 0xFF_FFFF,
        0x01_0100,
        "root port: bus 0 → 1, subordinate 1"
    );

    let mut behind = machine.transport(PciAddress::new(1, 0, 0)).unwrap();
    let mut root = machine.transport(PciAddress::new(0, 2, 0)).unwrap();
    assert!(machine.transport(PciAddress::new(1, 0, 0)).is_err(), "one transport per function");
    let (a, b) = (behind.dma().base(), root.dma().base());
    assert!(a + behind.dma().len() as u64 <= b || b + root.dma().len() as u64 <= a, "DMA windows are disjoint");

    let mut hand_behind = Hand::bring_up(&mut behind, 16).unwrap();
    let mut hand_root = Hand::bring_up(&mut root, 16).unwrap();
    let id_behind = hand_behind.identify_controller(&mut behind).unwrap();
    let id_root = hand_root.identify_controller(&mut root).unwrap();
    assert_eq!(&id_behind[4..12], b"PORT0001");
    assert_eq!(&id_root[4..12], b"ROOT0001");
}

fn qemu_support_disk(name: &str) -> nvme::transport::qemu::Disk {
    nvme::transport::qemu::Disk { node_name: name.into(), size_bytes: 16 << 20 }
}

#[test]
fn qmp_answers_commands_and_reports_refusals() {
    let machine = QemuMachine::start(one_controller("QMP00001")).unwrap();
    let status = machine.qmp_execute("query-status", None).unwrap();
    assert_eq!(status["running"], false, "the vCPU never runs: {status}");
    match machine.qmp_execute("device_del", Some(serde_json::json!({ "id": "no-such-device" }))) {
        Err(QmpError::Command { class, .. }) => assert_eq!(class, "DeviceNotFound"),
        other => panic!("device_del of a missing device: {other:?}"),
    }
    let waited = Instant::now();
    let err = machine.qmp_wait_event("DEVICE_DELETED", Duration::from_millis(100)).unwrap_err();
    assert!(matches!(err, QmpError::Transport(TransportError::Timeout(100))), "{err:?}");
    assert!(waited.elapsed() < Duration::from_secs(1));
}

#[test]
fn the_guest_ram_file_and_the_directory_go_once_qemu_has_them_and_everything_goes_on_drop() {
    let machine = QemuMachine::start(one_controller("LIFE0001")).unwrap();
    let (pid, dir, ram) = (machine.pid(), machine.start_dir().to_owned(), machine.ram_path().to_owned());
    assert!(process_exists(pid));
    assert!(!dir.exists(), "{} goes once QEMU has its files open", dir.display());
    assert_eq!(machine.temp_dir(), None);
    assert!(!ram.exists(), "{} should be unlinked already", ram.display());
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let ram_name = ram.to_str().unwrap();
    assert!(
        maps.lines().any(|l| l.contains(ram_name) && l.ends_with("(deleted)")),
        "QEMU keeps the unlinked RAM mapped"
    );

    // The shared memory still works after the unlink: a write through the controller
    // (Identify) lands in our mapping.
    let mut t = machine.transport(machine.controllers()[0]).unwrap();
    let mut hand = Hand::bring_up(&mut t, 16).unwrap();
    assert_eq!(&hand.identify_controller(&mut t).unwrap()[4..12], b"LIFE0001");
    drop(machine);
    assert_cleaned(pid, &dir, &ram);
    // The transport outlived its machine: it reports the machine gone, never hangs.
    match t.mmio_read32(offset::CSTS) {
        Err(TransportError::Gone(msg)) => assert!(msg.contains("shut down"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_panicking_test_leaves_nothing_behind() {
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let machine = QemuMachine::start(one_controller("PANIC001")).unwrap();
        tx.send((machine.pid(), machine.start_dir().to_owned(), machine.ram_path().to_owned())).unwrap();
        let _t = machine.transport(machine.controllers()[0]).unwrap();
        panic!("a check failed while the machine was up");
    })
    .join();
    assert!(outcome.is_err());
    let (pid, dir, ram) = rx.recv().unwrap();
    assert_cleaned(pid, &dir, &ram);
}

#[test]
fn qemu_killed_mid_test_is_reported_gone_promptly_with_its_stderr() {
    let mut config = one_controller("KILL0001");
    config.timeout = Duration::from_secs(5);
    let machine = QemuMachine::start(config).unwrap();
    let (pid, dir, ram) = (machine.pid(), machine.start_dir().to_owned(), machine.ram_path().to_owned());
    let mut t = machine.transport(machine.controllers()[0]).unwrap();
    t.mmio_read32(offset::VS).unwrap();

    // SAFETY: plain syscall on the QEMU this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    // A host polling a completion queue in memory, with no register access pending,
    // learns it from idle().
    let asked = Instant::now();
    let err = loop {
        match t.idle() {
            Ok(()) => assert!(asked.elapsed() < Duration::from_secs(5), "idle() never noticed QEMU died"),
            Err(e) => break e,
        }
    };
    assert!(asked.elapsed() < Duration::from_secs(5), "answered within the timeout");
    match &err {
        TransportError::Gone(msg) => {
            assert!(msg.contains("killed by signal 9"), "{msg}");
            assert!(msg.contains("stderr"), "{msg}");
        }
        other => panic!("expected Gone, got {other:?}"),
    }
    // Every later call says the same, at once; posted writes too.
    assert!(matches!(t.mmio_read32(offset::CSTS), Err(TransportError::Gone(_))));
    assert!(matches!(t.mmio_write32(offset::CC, 0), Err(TransportError::Gone(_))));
    assert!(matches!(t.idle(), Err(TransportError::Gone(_))));
    assert!(matches!(machine.qmp_execute("query-status", None), Err(QmpError::Transport(TransportError::Gone(_)))));
    drop(t);
    drop(machine);
    assert_cleaned(pid, &dir, &ram);
}

#[test]
fn a_qemu_that_refuses_its_arguments_fails_start_with_its_message() {
    let mut config = one_controller("BAD00001");
    config.extra_args.extend(args(&["-device", "no-such-device-model"]));
    let started = Instant::now();
    let err = QemuMachine::start(config).err().expect("start must fail");
    assert!(started.elapsed() < Duration::from_secs(5));
    let msg = err.to_string();
    assert!(msg.contains("no-such-device-model") && msg.contains("exited with status 1"), "{msg}");
}

#[test]
fn a_missing_qemu_binary_says_how_to_install_it() {
    let config = QemuConfig { binary: "/nonexistent/qemu-system-x86_64".into(), ..one_controller("NONE0001") };
    let msg = QemuMachine::start(config).err().expect("start must fail").to_string();
    assert!(msg.contains("bookworm-backports"), "{msg}");
}

#[test]
fn configurations_qemu_cannot_honour_are_refused_before_starting() {
    let too_big = QemuConfig { memory_mb: 4096, ..one_controller("CFG00001") };
    assert!(QemuMachine::start(too_big).err().unwrap().to_string().contains("2048"));
    let mut bad_disk = one_controller("CFG00002");
    bad_disk.disks[0].node_name = "ns1,file=/etc/passwd".into();
    assert!(QemuMachine::start(bad_disk).err().unwrap().to_string().contains("node name"));
}

#[test]
fn mmio_outside_bar0_is_refused_without_reaching_qemu() {
    let machine = QemuMachine::start(one_controller("BAR00001")).unwrap();
    let mut t = machine.transport(machine.controllers()[0]).unwrap();
    let size = t.bar0().size;
    assert!(t.mmio_read32(size).is_err());
    assert!(t.mmio_read32(2).is_err(), "unaligned");
    assert!(t.config_read32(0x1000).is_err());
    assert_eq!(t.mmio_read32(offset::VS).unwrap(), 0x0001_0400, "the connection is still in step");
}

#[test]
fn a_rescan_finds_a_controller_hot_added_behind_a_root_port_and_forgets_it_when_removed() {
    let config = QemuConfig {
        binary: qemu_binary(),
        // Native PCIe hot-plug: with q35's default ACPI hot-plug, an unplug waits for a
        // guest's ACPI handler that never runs, and DEVICE_DELETED never comes.
        extra_args: args(&[
            "-global",
            "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off",
            "-device",
            "pcie-root-port,id=rp0,chassis=1,slot=1",
        ]),
        ..QemuConfig::default()
    };
    let machine = QemuMachine::start(config).unwrap();
    assert!(machine.controllers().is_empty());
    let port = PciAddress::new(0, 1, 0);
    let slot = PciAddress::new(1, 0, 0);
    let image = machine.create_disk("hp1", 16 << 20).unwrap();
    let blockdev = serde_json::json!({
        "driver": "raw", "node-name": "hp1", "file": { "driver": "file", "filename": image }
    });
    machine.qmp_execute("blockdev-add", Some(blockdev)).unwrap();

    let mut first_bar = None;
    for serial in ["HOT00001", "HOT00002"] {
        let device =
            serde_json::json!({ "driver": "nvme", "id": "hot", "bus": "rp0", "serial": serial, "drive": "hp1" });
        machine.qmp_execute("device_add", Some(device)).unwrap();
        machine.set_slot_power(port, true).unwrap();
        assert_eq!(machine.rescan().unwrap(), [slot]);
        let mut t = machine.transport(slot).unwrap();
        // A re-added controller gets the same place in its port's window.
        let bar = t.bar0();
        assert_eq!(*first_bar.get_or_insert(bar), bar);
        let mut hand = Hand::bring_up(&mut t, 16).unwrap();
        assert_eq!(&hand.identify_controller(&mut t).unwrap()[4..12], serial.as_bytes());
        drop(t);

        machine.qmp_execute("device_del", Some(serde_json::json!({ "id": "hot" }))).unwrap();
        machine.set_slot_power(port, false).unwrap();
        let event = machine.qmp_wait_event("DEVICE_DELETED", Duration::from_secs(5)).unwrap();
        assert_eq!(event["data"]["device"], "hot");
        assert!(machine.rescan().unwrap().is_empty());
    }
}

#[test]
fn a_new_transport_starts_with_zeroed_dma_memory_and_bus_mastering_on() {
    let machine = QemuMachine::start(one_controller("ZERO0001")).unwrap();
    let address = machine.controllers()[0];
    let t = machine.transport(address).unwrap();
    let (base, len) = (t.dma().base(), t.dma().len() as u64);
    t.dma().fill(base, 4096, 0xEE).unwrap();
    t.dma().fill(base + len - 4096, 4096, 0xEE).unwrap();
    drop(t);
    assert_eq!(machine.config_read32(address, 0x04).unwrap() & 0x4, 0, "a dropped transport clears Bus Master Enable");

    let t = machine.transport(address).unwrap();
    assert_eq!(t.dma().base(), base, "the freed window is handed out again");
    let mut page = [0xFFu8; 4096];
    for at in [base, base + len - 4096] {
        t.dma().read(at, &mut page).unwrap();
        assert!(page.iter().all(|&b| b == 0), "DMA memory at {at:#x} is zeroed for the new transport");
    }
    assert_eq!(machine.config_read32(address, 0x04).unwrap() & 0x6, 0x6);
}

#[test]
fn a_qemu_that_stops_answering_times_out_within_the_bound_and_is_put_down() {
    let mut config = one_controller("STOP0001");
    config.timeout = Duration::from_millis(500);
    let machine = QemuMachine::start(config).unwrap();
    let (pid, dir, ram) = (machine.pid(), machine.start_dir().to_owned(), machine.ram_path().to_owned());
    let mut t = machine.transport(machine.controllers()[0]).unwrap();
    // SAFETY: plain syscall on the QEMU this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
    let asked = Instant::now();
    assert!(matches!(t.mmio_read32(offset::CSTS), Err(TransportError::Timeout(500))));
    assert!(asked.elapsed() < Duration::from_secs(2));
    // The reply may still come: the stream is out of step, so QEMU was killed.
    match t.mmio_read32(offset::CSTS) {
        Err(TransportError::Gone(msg)) => assert!(msg.contains("without an answer"), "{msg}"),
        other => panic!("{other:?}"),
    }
    drop(t);
    drop(machine);
    assert_cleaned(pid, &dir, &ram);
}
