//! The shipped QEMU topologies started for real: each comes up through the `qemu`
//! target, QEMU presents exactly the controllers and namespaces the fixture describes,
//! QEMU 10 reports what `fixtures/qemu/README.md` says it does, and nothing is left
//! behind. These tests need QEMU; where it is missing they fail with the install hint.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nvme::device::{Data, Device};
use nvme::driver::{Controller, Options};
use nvme::spec::identify::identify;
use nvme::spec::log::get_log_page;
use nvme::spec::namespace::{namespace_attach, namespace_delete, namespace_detach};
use nvme::spec::{AdminOpcode, Command, Completion, Status};
use nvme::transport::qemu::{PciAddress, QemuMachine};
use nvtest::targets::topology::{NamespaceSpec, Topology};
use nvtest::targets::{start_qemu, QemuDevice};

fn require_qemu() {
    let binary = Path::new("qemu-system-x86_64");
    nvme::transport::qemu::require_binary(binary).unwrap_or_else(|e| panic!("these tests need QEMU: {e}"));
}

fn admin(d: &mut dyn Device, what: &str, cmd: Command, data: Data<'_>) -> Completion {
    d.admin(cmd, data).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn identify_data(d: &mut dyn Device, cns: u8, nsid: u32) -> (Status, Vec<u8>) {
    let mut b = vec![0u8; 4096];
    let c = admin(d, &format!("Identify CNS {cns:#x} NSID {nsid}"), identify(cns, nsid, 0), Data::FromDevice(&mut b));
    (c.status(), b)
}

fn list(d: &mut dyn Device, cns: u8) -> Vec<u32> {
    let (status, b) = identify_data(d, cns, 0);
    assert!(status.is_success(), "Identify CNS {cns:#x}: {status}");
    b.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).take_while(|&i| i != 0).collect()
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// What must be gone once a machine is dropped.
struct Leftovers {
    pid: u32,
    dir: Option<PathBuf>,
    ram: PathBuf,
}

impl Leftovers {
    fn of(machine: &QemuMachine) -> Self {
        Leftovers { pid: machine.pid(), dir: machine.temp_dir(), ram: machine.ram_path().to_owned() }
    }

    fn assert_gone(&self) {
        let alive = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !matches!(stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()), Some("Z" | "X"))
            })
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        while alive(self.pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(self.pid), "QEMU pid {} is still there", self.pid);
        if let Some(dir) = &self.dir {
            assert!(!dir.exists(), "{} is still there", dir.display());
        }
        assert!(!self.ram.exists(), "{} is still there", self.ram.display());
    }
}

fn start(topology: &Topology) -> (QemuDevice, Leftovers) {
    require_qemu();
    let device = start_qemu(topology).unwrap_or_else(|e| panic!("{e}"));
    let leftovers = Leftovers::of(device.machine());
    (device, leftovers)
}

/// Whether namespace `n` lives in the first controller's NVM subsystem (its own implicit
/// one when it has no `subsystem`).
fn in_first_subsystem(t: &Topology, n: &NamespaceSpec) -> bool {
    let first = &t.controllers[0];
    n.controller == first.id
        || (first.subsystem.is_some() && t.controller(&n.controller).unwrap().subsystem == first.subsystem)
}

/// The namespaces the first controller sees at start: not detached, and defined on it
/// or shared within its subsystem.
fn attached_to_first(t: &Topology) -> Vec<&NamespaceSpec> {
    let first = &t.controllers[0];
    t.namespaces
        .iter()
        .filter(|n| !n.detached && in_first_subsystem(t, n) && (n.controller == first.id || n.shared))
        .collect()
}

/// The topology as QEMU presents it to the first controller: serial, subsystem NQN,
/// active and allocated namespaces, each namespace's size, format and identifiers.
fn check_presented(t: &Topology, d: &mut dyn Device) {
    let (status, ctrl) = identify_data(d, 1, 0);
    assert!(status.is_success());
    let first = &t.controllers[0];
    assert_eq!(String::from_utf8_lossy(&ctrl[4..24]).trim_end(), first.serial);
    let subnqn = String::from_utf8_lossy(&ctrl[768..1024]).trim_end_matches('\0').to_string();
    let nqn_tail = match &first.subsystem {
        Some(s) => t.subsystems.iter().find(|x| &x.id == s).unwrap().nqn.clone().unwrap_or(s.clone()),
        None => first.serial.clone(),
    };
    assert_eq!(subnqn, format!("nqn.2019-08.org.qemu:{nqn_tail}"));

    let attached = attached_to_first(t);
    let mut active: Vec<u32> = attached.iter().map(|n| n.nsid).collect();
    active.sort_unstable();
    assert_eq!(list(d, 0x02), active, "{}: Active Namespace ID list", t.name);
    let mut allocated: Vec<u32> = t.namespaces.iter().filter(|n| in_first_subsystem(t, n)).map(|n| n.nsid).collect();
    allocated.sort_unstable();
    assert_eq!(list(d, 0x10), allocated, "{}: Allocated Namespace ID list", t.name);

    for ns in &attached {
        let (status, b) = identify_data(d, 0, ns.nsid);
        assert!(status.is_success());
        assert_eq!(u64_at(&b, 0), ns.blocks, "NSZE of NSID {}", ns.nsid);
        let flbas = (b[26] & 0x0F) as usize;
        let lbads = b[128 + flbas * 4 + 2];
        assert_eq!(1u32 << lbads, ns.lbads, "LBA data size of NSID {}", ns.nsid);
        assert_eq!(b[30] & 1, u8::from(ns.shared), "NMIC bit 0 of NSID {}", ns.nsid);
        if let Some(nguid) = &ns.nguid {
            let hex: String = b[104..120].iter().map(|x| format!("{x:02x}")).collect();
            assert_eq!(&hex, nguid, "NGUID of NSID {}", ns.nsid);
        }
        if let Some(eui64) = ns.eui64 {
            assert_eq!(u64::from_be_bytes(b[120..128].try_into().unwrap()), eui64, "EUI64 of NSID {}", ns.nsid);
        }
    }
    for ns in t.namespaces.iter().filter(|n| n.detached) {
        let (status, b) = identify_data(d, 0, ns.nsid);
        assert!(status.is_success() && b.iter().all(|&x| x == 0), "a detached NSID identifies as zeroes");
        let (status, b) = identify_data(d, 0x11, ns.nsid);
        assert!(status.is_success() && u64_at(&b, 0) == ns.blocks, "CNS 11h shows the detached namespace");
    }
}

#[test]
fn ns32_comes_up_as_described_and_leaves_nothing() {
    let t = Topology::builtin("ns32").unwrap();
    let (mut device, leftovers) = start(&t);
    assert_eq!(device.describe(), "qemu:ns32 00:01.0");
    check_presented(&t, &mut device);
    drop(device);
    leftovers.assert_gone();
}

#[test]
fn dual_shares_namespaces_between_two_controllers_of_one_subsystem() {
    let t = Topology::builtin("dual").unwrap();
    let (mut device, leftovers) = start(&t);
    check_presented(&t, &mut device);
    let d: &mut dyn Device = &mut device;
    // Both controllers are in the subsystem (CNS 13h), with CNTLIDs 0 and 1.
    let (_, b) = identify_data(d, 0x13, 0);
    assert_eq!((u16_at(&b, 0), u16_at(&b, 2), u16_at(&b, 4)), (2, 0, 1));
    // QEMU 10.0 attaches shared namespaces to a controller when that controller is
    // enabled (CC.EN); nvtest brings ctrl1 up with the device (its second port), so NSID 1
    // lists both controllers (CNS 12h).
    let attached_to = |d: &mut dyn Device, nsid: u32| {
        let (_, b) = identify_data(d, 0x12, nsid);
        (1..=u16_at(&b, 0) as usize).map(|i| u16_at(&b, i * 2)).collect::<Vec<u16>>()
    };
    assert_eq!(attached_to(d, 1), vec![0, 1]);
    assert!(attached_to(d, 3).is_empty(), "the detached namespace is attached to no controller");
    // The second controller is there, behind its own PCI function, and sees the shared
    // namespaces: the device's port 2.
    let addresses = t.controller_addresses(device.machine()).unwrap();
    let found = device.machine().controllers();
    assert_eq!(addresses.len(), 2);
    assert!(addresses.iter().all(|(_, a)| found.contains(a)), "{addresses:?} among {found:?}");
    assert_eq!(device.port_count(), 1, "ctrl1 brought up as the device's second port");
    let ctrl1 = device.port(0).unwrap();
    assert_eq!(u16_at(&identify_data(ctrl1, 1, 0).1, 78), 1, "ctrl1's CNTLID");
    assert_eq!(list(ctrl1, 0x02), vec![1, 2]);
    // A private namespace attached to ctrl1 cannot also be attached to ctrl0.
    let ids = |cntlid: u16| {
        let mut b = vec![0u8; 4096];
        b[0..2].copy_from_slice(&1u16.to_le_bytes());
        b[2..4].copy_from_slice(&cntlid.to_le_bytes());
        b
    };
    let c = admin(ctrl1, "attach NSID 3 to ctrl1", namespace_attach(3), Data::ToDevice(&ids(1)));
    assert!(c.status().is_success(), "{}", c.status());
    let c = admin(&mut device, "attach NSID 3 to ctrl0", namespace_attach(3), Data::ToDevice(&ids(0)));
    assert!(c.status().to_string().starts_with("Namespace Is Private"), "{}", c.status());
    // Deviation (NVMe 1.4 §5.19: attach and detach persist across all reset events):
    // QEMU 10.0 re-attaches a detached shared namespace when the controller is enabled again.
    let ctrl1 = device.port(0).unwrap();
    let c = admin(ctrl1, "detach NSID 1 from ctrl1", namespace_detach(1), Data::ToDevice(&ids(1)));
    assert!(c.status().is_success(), "{}", c.status());
    assert_eq!(list(ctrl1, 0x02), vec![2, 3]);
    ctrl1.controller_reset().unwrap();
    assert_eq!(
        list(ctrl1, 0x02),
        vec![1, 2, 3],
        "QEMU 10.0 re-attaches NSID 1 at CC.EN; if it no longer does, update fixtures/qemu/README.md"
    );
    drop(device);
    leftovers.assert_gone();
}

#[test]
fn hotplug_puts_controllers_behind_hot_plug_capable_root_ports() {
    let t = Topology::builtin("hotplug").unwrap();
    let (mut device, leftovers) = start(&t);
    assert_eq!(device.describe(), "qemu:hotplug 01:00.0");
    check_presented(&t, &mut device);
    let machine = device.machine();
    let addresses = t.controller_addresses(machine).unwrap();
    assert_eq!(
        addresses,
        vec![("ctrl0".to_string(), PciAddress::new(1, 0, 0)), ("ctrl1".to_string(), PciAddress::new(2, 0, 0))]
    );
    for rp in &t.root_ports {
        let port = PciAddress::new(0, rp.root_slot, 0);
        let pcie = machine.pcie_capability(port).unwrap().expect("a PCI Express capability");
        let slot_caps = machine.config_read32(port, pcie + 0x14).unwrap();
        assert!(
            slot_caps & (1 << 6) != 0,
            "root port {}: Slot Capabilities {slot_caps:#x} lacks Hot-Plug Capable",
            rp.id
        );
        assert!(slot_caps & (1 << 1) != 0, "root port {}: no Power Controller", rp.id);
        assert_eq!(slot_caps >> 19, rp.slot as u32, "root port {}: Physical Slot Number", rp.id);
    }
    drop(device);
    leftovers.assert_gone();
}

/// The `hotplug` fixture does what it is for: ctrl1 leaves and comes back, a third
/// controller arrives in the free slot, and each sees the shared namespaces.
#[test]
fn hotplug_controllers_leave_and_arrive_in_their_slots() {
    let t = Topology::builtin("hotplug").unwrap();
    require_qemu();
    let machine = QemuMachine::start(t.qemu_config()).unwrap_or_else(|e| panic!("{e}"));
    let leftovers = Leftovers::of(&machine);
    // ctrl0 alone: the `qemu` target would bring ctrl1 up too, as the drive's second port
    // (every controller of the subsystem), and this test takes ctrl1 out of its slot.
    let (_, first) = t.controller_addresses(&machine).unwrap()[0].clone();
    let mut device = Controller::new(Box::new(machine.transport(first).unwrap()), Options::default()).unwrap();
    let rp = |id: &str| PciAddress::new(0, t.root_ports.iter().find(|p| p.id == id).unwrap().root_slot, 0);
    let serial = t.controllers[1].serial.clone();

    machine.qmp_execute("device_del", Some(serde_json::json!({ "id": "ctrl1" }))).unwrap();
    machine.set_slot_power(rp("rp2"), false).unwrap();
    let event = machine.qmp_wait_event("DEVICE_DELETED", Duration::from_secs(5)).unwrap();
    assert_eq!(event["data"]["device"], "ctrl1");
    assert_eq!(machine.rescan().unwrap(), vec![PciAddress::new(1, 0, 0)]);

    for (id, port, bus) in [("ctrl1", "rp2", 2u8), ("ctrl2", "rp3", 3)] {
        let add = serde_json::json!({ "driver": "nvme", "id": id, "bus": port, "serial": serial, "subsys": "subsys0" });
        machine.qmp_execute("device_add", Some(add)).unwrap();
        machine.set_slot_power(rp(port), true).unwrap();
        let address = PciAddress::new(bus, 0, 0);
        assert!(machine.rescan().unwrap().contains(&address), "{id} at {address}");
        let transport = machine.transport(address).unwrap();
        let mut ctrl = Controller::new(Box::new(transport), Options::default()).unwrap();
        assert_eq!(list(&mut ctrl, 0x02), vec![1, 2], "{id} sees the shared namespaces");
        drop(ctrl);
    }
    // ctrl0, which holds the namespaces, never noticed.
    assert_eq!(list(&mut device, 0x02), vec![1, 2]);
    drop(device);
    drop(machine);
    leftovers.assert_gone();
}

/// What QEMU 10 reports and does, as fixtures/qemu/README.md records it.
#[test]
fn qemu_10_namespace_facts() {
    let t = Topology::builtin("dual").unwrap();
    let (mut device, leftovers) = start(&t);
    let d: &mut dyn Device = &mut device;
    let (_, c) = identify_data(d, 1, 0);
    let oacs = u16_at(&c, 256);
    assert!(oacs & (1 << 3) != 0, "OACS {oacs:#x}: QEMU 10 claims Namespace Management (bit 3)");
    assert!(oacs & (1 << 1) != 0, "OACS {oacs:#x}: Format NVM");
    assert_eq!(u32_at(&c, 516), 256, "NN");
    assert_eq!(u32_at(&c, 540), 0, "MNAN");
    assert_eq!(c[77], 7, "MDTS default: 2^7 pages of CAP.MPSMIN (512 KiB)");
    let oncs = u16_at(&c, 520);
    assert!(oncs & 0b1101 == 0b1101, "ONCS {oncs:#x}: Compare, Dataset Management, Write Zeroes");
    assert_eq!(c[525] & 1, 1, "VWC: a volatile write cache is present");
    assert!(u32_at(&c, 92) & (1 << 8) != 0, "OAES bit 8: Namespace Attribute Notices");
    assert_eq!(c[261] & 2, 2, "LPA bit 1: Commands Supported and Effects log");
    let (_, ns) = identify_data(d, 0, 1);
    assert_eq!(ns[33], 1, "DLFEAT 001b: deallocated blocks read as zeroes; bit 3 (Write Zeroes DEAC) clear");
    assert_eq!(ns[25], 7, "NLBAF: 8 formats (512 and 4096, each with 0/8/16/64 metadata bytes)");

    // The Commands Supported and Effects log contradicts OACS bit 3: Namespace
    // Management (0Dh) is not a supported command, Namespace Attachment (15h) is.
    let mut log = vec![0u8; 4096];
    let cmd = get_log_page(5u8, 0, 4096, 0, false).unwrap();
    assert!(admin(d, "effects log", cmd, Data::FromDevice(&mut log)).status().is_success());
    assert_eq!(u32_at(&log, 0x0D * 4) & 1, 0, "CSUPP of Namespace Management");
    assert_eq!(u32_at(&log, 0x15 * 4) & 1, 1, "CSUPP of Namespace Attachment");
    let c = admin(d, "Namespace Management delete", namespace_delete(0xFFFF_FFFF), Data::None);
    assert!(c.status().to_string().starts_with("Invalid Command Opcode"), "{}", c.status());
    // Namespace Attachment works: the detached private namespace can be attached.
    let cntlid = u16_at(&identify_data(d, 1, 0).1, 78);
    let mut ids = vec![0u8; 4096];
    ids[0..2].copy_from_slice(&1u16.to_le_bytes());
    ids[2..4].copy_from_slice(&cntlid.to_le_bytes());
    let c = admin(d, "attach NSID 3", namespace_attach(3), Data::ToDevice(&ids));
    assert!(c.status().is_success(), "{}", c.status());
    assert_eq!(list(d, 0x02), vec![1, 2, 3]);
    let c = admin(d, "detach NSID 3", namespace_detach(3), Data::ToDevice(&ids));
    assert!(c.status().is_success(), "{}", c.status());
    // Identify Namespace with NSID FFFFFFFFh (common capabilities) is refused.
    let (status, _) = identify_data(d, 0, 0xFFFF_FFFF);
    assert_eq!(status.to_string().split(" (").next(), Some("Invalid Namespace or Format"));
    let mut cmd = Command::admin(AdminOpcode::GetFeatures);
    cmd.cdw10 = 0x06;
    let c = admin(d, "Get Features Volatile Write Cache", cmd, Data::None);
    assert!(c.status().is_success() && c.dw0 & 1 == 1, "the write cache is enabled");
    drop(device);
    leftovers.assert_gone();
}

/// Namespace Attachment and detached namespaces need no `nvme-subsys` in QEMU 10: a
/// controller without one gets an implicit subsystem of its own.
#[test]
fn attachment_works_without_a_subsystem() {
    let t = Topology::from_str(
        "name: nosub\ncontrollers:\n  - {id: c0, serial: NOSUB1}\nnamespaces:\n  \
         - {nsid: 1, controller: c0, lbads: 512, blocks: 4096}\n  \
         - {nsid: 2, controller: c0, lbads: 4096, blocks: 4096, shared: false, detached: true}\n",
        "nosub.yaml",
    )
    .unwrap();
    let (mut device, leftovers) = start(&t);
    check_presented(&t, &mut device);
    let d: &mut dyn Device = &mut device;
    let mut ids = vec![0u8; 4096];
    ids[0..2].copy_from_slice(&1u16.to_le_bytes());
    let c = admin(d, "attach NSID 2", namespace_attach(2), Data::ToDevice(&ids));
    assert!(c.status().is_success(), "{}", c.status());
    assert_eq!(list(d, 0x02), vec![1, 2]);
    drop(device);
    leftovers.assert_gone();
}

/// What a QEMU function pulled from its hot-plug slot looks like to a host, and that
/// nvtest's driver finds it gone from that: its old BAR reads 0 (QEMU's unassigned
/// memory, not the all ones of real hardware), its configuration space all ones, and an
/// outstanding command ends in `DeviceError::Removed` at the driver's next CSTS check
/// (every 100 ms), not at the command timeout. Put back, it is the same controller.
#[test]
fn a_function_pulled_from_its_hot_plug_slot_ends_its_commands_as_removed() {
    use nvme::device::DeviceError;
    use nvme::queued::{QueueSpec, Transfer};
    use nvme::spec::queue::QueuePriority;
    use nvme::spec::registers::offset;

    let t = Topology::builtin("hotplug").unwrap();
    let (mut device, leftovers) = start(&t);
    let address = PciAddress::new(1, 0, 0);
    let timeout_ms = device.command_timeout_ms();
    {
        let mut io = device.queued_io(&[QueueSpec { depth: 4, priority: QueuePriority::Medium, port: 0 }]).unwrap();
        // Submitted, its doorbell never rung: outstanding for the driver, never seen by QEMU.
        io.submit(0, nvme::spec::nvm::read(1, 0, 0), Transfer::FromDevice(4096), Transfer::None).unwrap();
        io.pull_drive(1).unwrap();
        let pulled = Instant::now();
        let error = loop {
            if let Some(e) = io.expired(0) {
                break e;
            }
            assert!(pulled.elapsed() < Duration::from_millis(timeout_ms), "never found gone");
            std::thread::sleep(Duration::from_millis(1));
        };
        let took = pulled.elapsed();
        assert!(matches!(error, DeviceError::Removed { .. }), "{error}");
        assert!(took < Duration::from_millis(500), "found gone after {took:?}, not at the 100 ms check");
        io.abandon();
    }
    // The facts the driver's check rests on.
    assert_eq!(device.machine().config_read32(address, 0).unwrap(), 0xFFFF_FFFF, "configuration space");
    assert_eq!(device.registers().unwrap().read32(offset::CSTS).unwrap(), 0, "CSTS through the old BAR");

    let on = device.reinsert(Duration::from_secs(5)).unwrap();
    assert!(on.enumerated_ns.is_some() && on.ready_ns.is_some(), "{on:?}");
    assert_eq!(device.machine().controllers(), vec![address, PciAddress::new(2, 0, 0)]);
    assert_eq!(list(&mut device, 0x02), vec![1, 2], "the namespaces on subsys0 are attached again");
    // An orderly removal and reinsertion too: the controller shut down first.
    let shutdown = device.remove_orderly(2).unwrap();
    assert!(shutdown.complete.is_ok(), "{shutdown:?}");
    device.reinsert(Duration::from_secs(5)).unwrap();
    let (_, ctrl) = identify_data(&mut device, 1, 0);
    assert_eq!(String::from_utf8_lossy(&ctrl[4..24]).trim_end(), t.controllers[0].serial);
    drop(device);
    leftovers.assert_gone();
}

/// `nvtest --suite hot-plug --expect fixtures/qemu/expected.yaml qemu:hotplug` through the
/// binary: both cases pass (20 surprise and 5 orderly removals), the slot's figures are
/// reported, the exit status is 0 and no QEMU process, socket, temporary or /dev/shm
/// file of the run is left.
#[test]
fn the_hot_plug_suite_passes_on_qemu_hotplug_and_leaves_nothing() {
    require_qemu();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("run.json");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_nvtest"))
        .args(["--suite", "hot-plug", "--expect", "fixtures/qemu/expected.yaml", "--json"])
        .arg(&json)
        .arg("qemu:hotplug")
        .current_dir(&repo)
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("2 passed; 0 failed"), "{stdout}");
    for figure in ["removal_found_ms.max", "slot_power_on_to_enumerated_ms.median", "power_fail.cycles=20 cycles"] {
        assert!(stdout.contains(figure), "{figure} missing:\n{stdout}");
    }
    let record = std::fs::read_to_string(&json).unwrap();
    assert!(record.contains("power_fail.slot_power_on_to_enumerated_ms.max"), "JSON record lacks the slot figures");

    let prefix = format!("nvtest-qemu-{pid}-");
    let deadline = Instant::now() + Duration::from_secs(2);
    let qemu_left = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
            std::fs::read(p.path().join("cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(&prefix))
        })
    };
    while qemu_left() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!qemu_left(), "a QEMU of the run is still there");
    for dir in [Path::new("/dev/shm"), tmp.path()] {
        let left: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}
