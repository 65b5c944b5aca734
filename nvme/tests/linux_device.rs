//! `LinuxDevice` on a fake tree with a scripted passthrough: which node each command goes
//! to, what is refused before anything is sent, RAE, timeouts, and the rescan wait.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use nix::errno::Errno;
use nvme::device::{Access, Data, Device, DeviceError};
use nvme::linux::fake::FakeTree;
use nvme::linux::sysfs::classify;
use nvme::linux::{LinuxDevice, Options, Passthrough, PassthruCmd64};
use nvme::spec::identify::{identify, Cns};
use nvme::spec::log::{get_log_page, LogPageId};
use nvme::spec::{AdminOpcode, Command, NvmOpcode, Status};

/// What the fake drive does.
#[derive(Default)]
struct Drive {
    /// Every command sent: the node for I/O (None: admin), and the structure.
    sent: Vec<(Option<PathBuf>, PassthruCmd64)>,
    /// VER reported by Identify Controller.
    ver: u32,
    /// Active namespaces reported by Identify CNS 02h.
    active: BTreeSet<u32>,
    /// Return of the next I/O (0 when None).
    io_answer: Option<Result<i32, Errno>>,
    /// Return of the next non-Identify admin command.
    admin_answer: Option<Result<i32, Errno>>,
    rescans: u32,
    resets: u32,
    /// What a rescan does to the tree.
    on_rescan: Option<Box<dyn FnMut()>>,
}

struct Fake(Rc<RefCell<Drive>>);

fn fill(cmd: &PassthruCmd64, bytes: &[u8]) {
    assert!(cmd.addr != 0 && cmd.data_len as usize >= bytes.len());
    // SAFETY: the device handed us a live buffer of data_len bytes for a
    // controller-to-host command.
    let buf = unsafe { std::slice::from_raw_parts_mut(cmd.addr as *mut u8, cmd.data_len as usize) };
    buf[..bytes.len()].copy_from_slice(bytes);
}

impl Passthrough for Fake {
    fn admin(&mut self, cmd: &mut PassthruCmd64) -> Result<i32, Errno> {
        let mut d = self.0.borrow_mut();
        d.sent.push((None, *cmd));
        if cmd.opcode == AdminOpcode::Identify as u8 {
            match cmd.cdw10 & 0xFF {
                1 => {
                    let mut data = vec![0u8; 4096];
                    data[80..84].copy_from_slice(&d.ver.to_le_bytes());
                    fill(cmd, &data);
                }
                2 => {
                    let ids: Vec<u8> =
                        d.active.iter().filter(|&&id| id > cmd.nsid).flat_map(|id| id.to_le_bytes()).collect();
                    fill(cmd, &ids);
                }
                _ => return Ok(0x4002),
            }
            return Ok(0);
        }
        cmd.result = 0x1234_5678_9abc_def0;
        d.admin_answer.take().unwrap_or(Ok(0))
    }

    fn io(&mut self, node: &Path, cmd: &mut PassthruCmd64) -> Result<i32, Errno> {
        let mut d = self.0.borrow_mut();
        d.sent.push((Some(node.to_path_buf()), *cmd));
        d.io_answer.take().unwrap_or(Ok(0))
    }

    fn rescan(&mut self) -> Result<(), Errno> {
        let mut hook = {
            let mut d = self.0.borrow_mut();
            d.rescans += 1;
            d.on_rescan.take()
        };
        if let Some(f) = hook.as_mut() {
            f();
        }
        self.0.borrow_mut().on_rescan = hook;
        Ok(())
    }

    fn reset(&mut self) -> Result<(), Errno> {
        self.0.borrow_mut().resets += 1;
        Ok(())
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    tree: Rc<RefCell<FakeTree>>,
    drive: Rc<RefCell<Drive>>,
    device: LinuxDevice,
}

fn setup(ver: u32) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let mut tree = FakeTree::new(dir.path()).unwrap();
    tree.controller(0, 0, "SN-1").unwrap();
    tree.namespace(0, 1, 1).unwrap();
    tree.namespace(0, 2, 7).unwrap();
    let limit = tree.controller_dir(0).join("nvme0n2/queue");
    std::fs::create_dir_all(&limit).unwrap();
    std::fs::write(limit.join("max_hw_sectors_kb"), "128\n").unwrap();
    let drive = Rc::new(RefCell::new(Drive { ver, active: [1, 7].into(), ..Default::default() }));
    let host = tree.host();
    let ctrl = classify(&host, &tree.node("nvme0")).unwrap();
    let options = Options { command_timeout_ms: 4000, long_command_timeout_ms: 90_000, rescan_wait_ms: 300 };
    let device = LinuxDevice::with_backend(host, ctrl, Box::new(Fake(drive.clone())), options).unwrap();
    Setup { _dir: dir, tree: Rc::new(RefCell::new(tree)), drive, device }
}

fn sent(s: &Setup) -> Vec<(Option<PathBuf>, PassthruCmd64)> {
    std::mem::take(&mut s.drive.borrow_mut().sent)
}

#[test]
fn opening_reads_identify_controller_through_the_controller_node() {
    let s = setup(0x0001_0400);
    let sent = sent(&s);
    assert_eq!(sent.len(), 1);
    let (node, cmd) = &sent[0];
    assert!(node.is_none());
    assert_eq!((cmd.opcode, cmd.cdw10, cmd.data_len, cmd.timeout_ms), (0x06, 1, 4096, 4000));
    assert_eq!(s.device.access(), Access::Kernel);
    assert_eq!(s.device.io_queues(), [1]);
    assert_eq!(s.device.namespaces().iter().map(|n| n.nsid).collect::<Vec<_>>(), [1, 7]);
    assert!(s.device.describe().ends_with("nvme0 (Linux NVMe driver)"));
}

#[test]
fn admin_commands_carry_their_fields_timeout_and_result() {
    let mut s = setup(0x0001_0400);
    sent(&s);
    let mut cmd = Command::admin(AdminOpcode::GetFeatures);
    cmd.nsid = 3;
    cmd.cdw10 = 0x0B;
    cmd.cdw11 = 9;
    cmd.cdw15 = 15;
    let c = s.device.admin(cmd, Data::None).unwrap();
    assert!(c.status().is_success());
    assert_eq!((c.dw0, c.dw1, c.sq_id), (0x9abc_def0, 0x1234_5678, 0));
    let (_, pt) = sent(&s)[0];
    assert_eq!((pt.opcode, pt.nsid, pt.cdw10, pt.cdw11, pt.cdw15), (0x0A, 3, 0x0B, 9, 15));
    assert_eq!((pt.flags, pt.addr, pt.data_len, pt.timeout_ms), (0, 0, 0, 4000));

    s.drive.borrow_mut().admin_answer = Some(Ok(0x4002));
    let c = s.device.admin(Command::admin(AdminOpcode::FormatNvm), Data::None).unwrap();
    assert!(c.status().same_code(&Status::INVALID_FIELD) && c.status().dnr);
    assert_eq!(sent(&s)[0].1.timeout_ms, 90_000, "Format NVM gets the long timeout");
}

#[test]
fn io_goes_to_the_generic_device_of_its_namespace() {
    let mut s = setup(0x0001_0400);
    sent(&s);
    let mut buf = vec![0u8; 4096];
    let read = Command::nvm(NvmOpcode::Read, 7).with_slba(9);
    let c = s.device.io(1, read, Data::FromDevice(&mut buf), Data::None).unwrap();
    assert!(c.status().is_success());
    assert_eq!(c.sq_id, 1);
    let (node, pt) = sent(&s).remove(0);
    assert_eq!(node.unwrap(), s.tree.borrow().node("ng0n2"));
    assert_eq!((pt.nsid, pt.cdw10, pt.data_len, pt.addr), (7, 9, 4096, buf.as_ptr() as u64));

    let data = vec![1u8; 512];
    s.drive.borrow_mut().io_answer = Some(Ok(0x0080));
    let c = s.device.io(1, Command::nvm(NvmOpcode::Write, 1), Data::ToDevice(&data), Data::None).unwrap();
    assert!(c.status().same_code(&Status::LBA_OUT_OF_RANGE));
    assert_eq!(sent(&s)[0].0.as_ref().unwrap(), &s.tree.borrow().node("ng0n1"));
}

#[test]
fn a_transfer_beyond_the_kernels_limit_is_unsupported_and_nothing_is_sent() {
    let mut s = setup(0x0001_0400);
    sent(&s);
    let mut buf = vec![0u8; 128 * 1024];
    let read = Command::nvm(NvmOpcode::Read, 7);
    assert!(s.device.io(1, read, Data::FromDevice(&mut buf), Data::None).is_ok(), "128 KiB is within the limit");
    assert_eq!(sent(&s).len(), 1);
    let mut buf = vec![0u8; 132 * 1024];
    let e = s.device.io(1, read, Data::FromDevice(&mut buf), Data::None).unwrap_err();
    let DeviceError::Unsupported(text) = &e else { panic!("{e:?}") };
    assert!(text.contains("135168-byte transfer") && text.contains("(131072 bytes)"), "{text}");
    assert!(sent(&s).is_empty());
}

#[test]
fn io_to_an_nsid_without_a_node_is_unsupported_and_nothing_is_sent() {
    let mut s = setup(0x0001_0400);
    sent(&s);
    for (nsid, needle) in [
        (0, "NSID 0"),
        (0xFFFF_FFFF, "broadcast NSID FFFFFFFFh"),
        (3, "NSID 3, which the Linux driver has no namespace for"),
    ] {
        let e = s.device.io(1, Command::nvm(NvmOpcode::Flush, nsid), Data::None, Data::None).unwrap_err();
        let DeviceError::Unsupported(text) = &e else { panic!("{e:?}") };
        assert!(text.contains(needle), "{text}");
        assert!(text.contains("needs a userspace-driver target (sim, qemu)"), "{text}");
    }
    assert!(sent(&s).is_empty());
}

#[test]
fn commands_the_driver_owns_are_refused_before_sending() {
    let mut s = setup(0x0001_0400);
    sent(&s);
    for op in [
        AdminOpcode::CreateIoSubmissionQueue,
        AdminOpcode::CreateIoCompletionQueue,
        AdminOpcode::DeleteIoSubmissionQueue,
        AdminOpcode::DeleteIoCompletionQueue,
        AdminOpcode::DoorbellBufferConfig,
        AdminOpcode::Abort,
        AdminOpcode::AsynchronousEventRequest,
    ] {
        let e = s.device.admin(Command::admin(op), Data::None).unwrap_err();
        assert!(matches!(e, DeviceError::Unsupported(_)), "{op:?}: {e:?}");
    }
    let e = s.device.arm_async_events(1).unwrap_err();
    assert_eq!(e.to_string(), "not possible on this target: asynchronous events are consumed by the kernel driver");
    assert!(matches!(s.device.take_async_events(), Err(DeviceError::Unsupported(_))));
    let mut flagged = Command::admin(AdminOpcode::Identify);
    flagged.flags = 0x40;
    assert!(matches!(s.device.admin(flagged, Data::None), Err(DeviceError::Unsupported(_))));
    let e = s.device.io(2, Command::nvm(NvmOpcode::Flush, 1), Data::None, Data::None).unwrap_err();
    assert!(matches!(e, DeviceError::Unsupported(_)));
    assert!(matches!(
        s.device.io(0, Command::nvm(NvmOpcode::Flush, 1), Data::None, Data::None),
        Err(DeviceError::Driver(_))
    ));
    assert!(s.device.registers().is_none());
    assert!(sent(&s).is_empty());
}

#[test]
fn a_buffer_against_the_opcodes_direction_is_refused() {
    let mut s = setup(0x0001_0400);
    sent(&s);
    // Read (02h) moves data to the host: a host-to-controller buffer would be written.
    let data = [0u8; 512];
    let e = s.device.io(1, Command::nvm(NvmOpcode::Read, 1), Data::ToDevice(&data), Data::None).unwrap_err();
    assert!(matches!(e, DeviceError::Unsupported(_)), "{e:?}");
    let mut buf = [0u8; 512];
    let e = s.device.io(1, Command::nvm(NvmOpcode::Write, 1), Data::FromDevice(&mut buf), Data::None).unwrap_err();
    assert!(matches!(e, DeviceError::Unsupported(_)), "{e:?}");
    let e = s.device.admin(identify(Cns::Controller, 0, 0), Data::ToDevice(&data)).unwrap_err();
    assert!(matches!(e, DeviceError::Unsupported(_)), "{e:?}");
    assert!(sent(&s).is_empty());
}

#[test]
fn event_logs_are_read_with_rae_on_1_3_and_later() {
    let mut s = setup(0x0001_0400);
    sent(&s);
    let mut buf = vec![0u8; 4096];
    let cmd = get_log_page(LogPageId::ChangedNamespaceList, 0xFFFF_FFFF, 4096, 0, false).unwrap();
    s.device.admin(cmd, Data::FromDevice(&mut buf)).unwrap();
    assert_ne!(sent(&s)[0].1.cdw10 & (1 << 15), 0);
    let notes = s.device.take_diagnostics();
    assert_eq!(notes.len(), 1);
    assert!(notes[0].starts_with("Get Log Page 04h sent with RAE=1"), "{notes:?}");
    // Commands Supported and Effects is no event log.
    let cmd = get_log_page(LogPageId::CommandsSupportedAndEffects, 0, 4096, 0, false).unwrap();
    s.device.admin(cmd, Data::FromDevice(&mut buf)).unwrap();
    assert_eq!(sent(&s)[0].1.cdw10 & (1 << 15), 0);

    // On a 1.2 controller the bit is reserved: left clear.
    let mut old = setup(0x0001_0200);
    sent(&old);
    let cmd = get_log_page(LogPageId::SmartHealth, 0xFFFF_FFFF, 512, 0, false).unwrap();
    old.device.admin(cmd, Data::FromDevice(&mut buf[..512])).unwrap();
    assert_eq!(sent(&old)[0].1.cdw10 & (1 << 15), 0);
}

#[test]
fn a_cancelled_command_is_a_timeout_naming_the_cause() {
    let mut s = setup(0x0001_0400);
    s.drive.borrow_mut().io_answer = Some(Err(Errno::EINTR));
    let e = s.device.io(1, Command::nvm(NvmOpcode::Flush, 1), Data::None, Data::None).unwrap_err();
    let DeviceError::Timeout { what, after_ms } = &e else { panic!("{e:?}") };
    assert_eq!(*after_ms, 4000);
    assert!(what.contains("I/O opcode 00h (Flush) NSID 0x1 on") && what.contains("EINTR"), "{what}");
    s.drive.borrow_mut().admin_answer = Some(Err(Errno::EACCES));
    let e = s.device.admin(Command::admin(AdminOpcode::KeepAlive), Data::None).unwrap_err();
    assert!(e.to_string().contains("run nvtest as root"), "{e}");
}

#[test]
fn a_controller_reset_is_the_drivers_then_the_namespace_view_is_read_again() {
    let mut s = setup(0x0001_0400);
    sent(&s);
    // The drive re-attached NSID 9 at the reset; the driver shows it after its rescan.
    let tree = s.tree.clone();
    s.drive.borrow_mut().active = [1, 7, 9].into();
    s.drive.borrow_mut().on_rescan = Some(Box::new(move || tree.borrow_mut().namespace(0, 3, 9).unwrap()));
    s.device.controller_reset().unwrap();
    assert_eq!((s.drive.borrow().resets, s.drive.borrow().rescans), (1, 1));
    assert_eq!(s.device.namespaces().iter().map(|n| n.nsid).collect::<Vec<_>>(), [1, 7, 9]);
    assert!(sent(&s).iter().all(|(node, pt)| node.is_none() && pt.opcode == AdminOpcode::Identify as u8));
}

#[test]
fn after_a_rescan_the_new_namespace_is_reachable() {
    let mut s = setup(0x0001_0400);
    let tree = s.tree.clone();
    s.drive.borrow_mut().active = [1, 7, 9].into();
    s.drive.borrow_mut().on_rescan = Some(Box::new(move || tree.borrow_mut().namespace(0, 3, 9).unwrap()));
    // Before the rescan NSID 9 has no node.
    s.device.namespaces_changed().unwrap();
    assert_eq!(s.drive.borrow().rescans, 1);
    assert_eq!(s.device.namespaces().iter().map(|n| n.nsid).collect::<Vec<_>>(), [1, 7, 9]);
    sent(&s);
    s.device.io(1, Command::nvm(NvmOpcode::Flush, 9), Data::None, Data::None).unwrap();
    assert_eq!(sent(&s)[0].0.as_ref().unwrap(), &s.tree.borrow().node("ng0n3"));
}

#[test]
fn a_deleted_namespace_disappears_and_io_to_it_is_refused() {
    let mut s = setup(0x0001_0400);
    let tree = s.tree.clone();
    s.drive.borrow_mut().active = [1].into();
    s.drive.borrow_mut().on_rescan = Some(Box::new(move || tree.borrow_mut().remove_namespace(0, 2).unwrap()));
    s.device.namespaces_changed().unwrap();
    assert_eq!(s.device.namespaces().iter().map(|n| n.nsid).collect::<Vec<_>>(), [1]);
    let e = s.device.io(1, Command::nvm(NvmOpcode::Flush, 7), Data::None, Data::None).unwrap_err();
    assert!(matches!(e, DeviceError::Unsupported(_)));
}

/// A namespace device that refuses a command for a moment (just set up after a rescan):
/// the command, refused before it was sent, goes again on the same device and completes;
/// the diagnostics say so.
#[test]
fn a_command_refused_for_a_moment_by_a_fresh_device_is_sent_again() {
    let mut s = setup(0x0001_0400);
    sent(&s);
    s.drive.borrow_mut().io_answer = Some(Err(Errno::EINVAL));
    let c = s.device.io(1, Command::nvm(NvmOpcode::Flush, 1), Data::None, Data::None).unwrap();
    assert!(c.status().is_success());
    let nodes: Vec<PathBuf> = sent(&s).into_iter().filter_map(|(node, _)| node).collect();
    let ng = s.tree.borrow().node("ng0n1");
    assert_eq!(nodes, [ng.clone(), ng]);
    let notes = s.device.take_diagnostics();
    assert!(
        notes.iter().any(|n| n.contains("EINVAL after a rescan; sent again on ") && n.contains("(the same device)")),
        "{notes:?}"
    );
}

#[test]
fn a_rescan_that_never_matches_the_drive_is_a_bounded_error() {
    let mut s = setup(0x0001_0400);
    s.drive.borrow_mut().active = [1, 7, 8].into();
    let started = std::time::Instant::now();
    let e = s.device.namespaces_changed().unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    let text = e.to_string();
    assert!(
        text.contains("shows namespaces {1, 7} of nvme0 but the drive's active namespace list is {1, 7, 8}"),
        "{text}"
    );
    assert!(text.contains("waited 300 ms"), "{text}");
}

#[test]
fn a_namespace_without_a_generic_node_is_waited_for_then_named() {
    let mut s = setup(0x0001_0400);
    std::fs::remove_file(s.tree.borrow().node("ng0n2")).unwrap();
    let e = s.device.namespaces_changed().unwrap_err();
    assert!(e.to_string().contains("no /dev/ngXnY node for NSIDs [7] (is devtmpfs mounted on /dev?)"), "{e}");
    let e = s.device.io(1, Command::nvm(NvmOpcode::Flush, 7), Data::None, Data::None).unwrap_err();
    assert!(e.to_string().contains("has no generic device node"), "{e}");
}

/// Two controllers of subsystem 0 (`nvme0`, `nvme1`), each with its own devices of the
/// shared namespaces 1 and 7 (native multipath off), and one scripted drive behind both.
fn two_ports() -> Setup {
    let mut s = setup(0x0001_0400);
    {
        let mut tree = s.tree.borrow_mut();
        tree.controller(1, 0, "SN-1").unwrap();
        tree.namespace(1, 3, 1).unwrap();
        tree.namespace(1, 4, 7).unwrap();
    }
    open_ports(&mut s);
    sent(&s);
    s
}

/// Opens the ports of `s.device`, each on the same scripted drive.
fn open_ports(s: &mut Setup) {
    let drive = s.drive.clone();
    s.device
        .open_ports_with(&mut |host, node, options| {
            let ctrl = classify(&host, node)?;
            LinuxDevice::with_backend(host, ctrl, Box::new(Fake(drive.clone())), options)
        })
        .unwrap();
}

#[test]
fn the_other_controllers_of_the_subsystem_are_the_ports_each_with_its_own_devices() {
    let mut s = two_ports();
    assert_eq!(s.device.port_count(), 1);
    assert_eq!(s.device.ports_note(), None);
    let port = s.device.port(0).expect("port 2");
    assert!(port.describe().ends_with("nvme1 (Linux NVMe driver)"), "{}", port.describe());
    assert_eq!(port.port_count(), 0, "a port has no ports of its own");
    let read = Command { opcode: NvmOpcode::Read as u8, nsid: 1, ..Default::default() };
    let mut buf = vec![0u8; 512];
    port.io(1, read, Data::FromDevice(&mut buf), Data::None).unwrap();
    s.device.io(1, read, Data::FromDevice(&mut buf), Data::None).unwrap();
    let nodes: Vec<PathBuf> = sent(&s).into_iter().filter_map(|(node, _)| node).collect();
    let tree = s.tree.borrow();
    assert_eq!(nodes, [tree.node("ng1n3"), tree.node("ng0n1")], "each port's command on its own controller's device");
}

#[test]
fn native_multipath_gives_no_ports_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let mut tree = FakeTree::new(dir.path()).unwrap();
    tree.controller(0, 0, "SN-1").unwrap();
    tree.controller(1, 0, "SN-1").unwrap();
    tree.multipath_namespace(0, 0, 1, 1).unwrap();
    tree.multipath_namespace(0, 1, 1, 1).unwrap();
    let drive = Rc::new(RefCell::new(Drive { ver: 0x0001_0400, active: [1].into(), ..Default::default() }));
    let host = tree.host();
    let ctrl = classify(&host, &tree.node("nvme0")).unwrap();
    let mut device = LinuxDevice::with_backend(host, ctrl, Box::new(Fake(drive.clone())), Options::default()).unwrap();
    device.open_ports_with(&mut |_, node, _| panic!("{} opened through multipath", node.display())).unwrap();
    assert_eq!(device.port_count(), 0);
    let note = device.ports_note().expect("a note");
    assert!(note.contains("nvme-subsys0 also has nvme1") && note.contains("nvme_core.multipath=N"), "{note}");
}

#[test]
fn a_controller_of_the_subsystem_that_is_not_live_is_left_out_naming_its_state() {
    let mut s = setup(0x0001_0400);
    {
        let mut tree = s.tree.borrow_mut();
        tree.controller(1, 0, "SN-1").unwrap();
        tree.set_state(1, "resetting").unwrap();
    }
    open_ports(&mut s);
    assert_eq!(s.device.port_count(), 0);
    let note = s.device.ports_note().expect("a note");
    assert!(
        note.starts_with("controllers of nvme-subsys0 not opened: nvme1 (") && note.contains("resetting"),
        "{note}"
    );
}

#[test]
fn a_namespace_change_is_read_again_on_every_port() {
    let mut s = two_ports();
    s.device.namespaces_changed().unwrap();
    assert_eq!(s.drive.borrow().rescans, 2, "the port and the controller opened each rescanned");
}
