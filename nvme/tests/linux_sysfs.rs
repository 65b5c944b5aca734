//! Discovery of controllers and namespaces on fake sysfs trees, and the one-line errors
//! for paths that are not a controller.

use std::path::Path;

use nvme::linux::fake::FakeTree;
use nvme::linux::sysfs::{self, classify, DevNum, TargetError};
use nvme::linux::{Host, LinuxDevice, Options};

fn tree() -> (tempfile::TempDir, FakeTree) {
    let dir = tempfile::tempdir().unwrap();
    let tree = FakeTree::new(dir.path()).unwrap();
    (dir, tree)
}

#[test]
fn a_controller_with_private_namespaces_is_found_with_its_nodes() {
    let (_dir, mut t) = tree();
    t.controller(0, 0, "SN-0001").unwrap();
    // Head instances are not NSIDs: nvme0n1 is NSID 5, nvme0n2 is NSID 2.
    t.namespace(0, 1, 5).unwrap();
    t.namespace(0, 2, 2).unwrap();
    t.partition("nvme0n1", 1).unwrap();
    t.partition("nvme0n1", 2).unwrap();
    let host = t.host();
    let ctrl = classify(&host, &t.node("nvme0")).unwrap();
    assert_eq!(ctrl.name, "nvme0");
    assert_eq!(ctrl.serial, "SN-0001");
    assert_eq!(ctrl.num, DevNum { major: 245, minor: 0 });
    assert_eq!(ctrl.state.as_deref(), Some("live"));
    assert_eq!(ctrl.subsystem.as_ref().map(|s| s.0.as_str()), Some("nvme-subsys0"));
    let ns = sysfs::namespaces(&host, &ctrl).unwrap();
    assert_eq!(ns.iter().map(|n| n.nsid).collect::<Vec<_>>(), [2, 5]);
    let five = &ns[1];
    assert_eq!(five.disk.as_ref().unwrap().name, "nvme0n1");
    assert_eq!(five.disk.as_ref().unwrap().node.as_deref(), Some(t.node("nvme0n1").as_path()));
    assert_eq!(five.generic.as_ref().unwrap().name, "ng0n1");
    assert_eq!(five.generic.as_ref().unwrap().node.as_deref(), Some(t.node("ng0n1").as_path()));
    let parts: Vec<&str> = five.partitions.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(parts, ["nvme0n1p1", "nvme0n1p2"]);
    assert!(!five.multipath);
    assert!(ns[0].partitions.is_empty());
}

#[test]
fn multipath_namespaces_use_the_heads_in_the_subsystem() {
    let (_dir, mut t) = tree();
    t.controller(0, 0, "SN-DUAL").unwrap();
    t.controller(1, 0, "SN-DUAL").unwrap();
    t.multipath_namespace(0, 0, 1, 1).unwrap();
    t.multipath_namespace(0, 1, 1, 1).unwrap();
    let host = t.host();
    let ctrl = classify(&host, &t.node("nvme1")).unwrap();
    let ns = sysfs::namespaces(&host, &ctrl).unwrap();
    assert_eq!(ns.len(), 1);
    assert!(ns[0].multipath);
    assert_eq!(ns[0].disk.as_ref().unwrap().name, "nvme0n1");
    assert_eq!(ns[0].generic.as_ref().unwrap().name, "ng0n1");
    let (_, subsys) = ctrl.subsystem.unwrap();
    assert_eq!(sysfs::subsystem_controllers(&subsys).unwrap(), ["nvme0", "nvme1"]);
}

#[test]
fn a_node_that_is_missing_or_another_device_is_not_used() {
    let (_dir, mut t) = tree();
    t.controller(0, 0, "S").unwrap();
    t.namespace(0, 1, 1).unwrap();
    t.namespace(0, 2, 2).unwrap();
    std::fs::remove_file(t.node("ng0n1")).unwrap();
    std::fs::write(t.node("ng0n2"), "c 244:99\n").unwrap();
    let host = t.host();
    let ctrl = classify(&host, &t.node("nvme0")).unwrap();
    let ns = sysfs::namespaces(&host, &ctrl).unwrap();
    assert!(ns.iter().all(|n| n.generic.as_ref().unwrap().node.is_none()), "{ns:?}");
    assert!(ns.iter().all(|n| n.disk.as_ref().unwrap().node.is_some()));
}

fn error(host: &Host, path: &Path) -> (TargetError, String) {
    let e = classify(host, path).unwrap_err();
    let text = e.to_string();
    assert!(!text.contains('\n'), "{text}");
    (e, text)
}

#[test]
fn a_namespace_block_device_names_its_controller() {
    let (_dir, mut t) = tree();
    t.controller(0, 0, "S").unwrap();
    t.namespace(0, 1, 1).unwrap();
    let (e, text) = error(&t.host(), &t.node("nvme0n1"));
    assert!(matches!(e, TargetError::NamespaceBlock { .. }), "{e:?}");
    let ctrl = t.node("nvme0").display().to_string();
    assert!(text.contains("is the block device of namespace nvme0n1, not a controller"), "{text}");
    assert!(text.contains(&format!("give its controller {ctrl}")), "{text}");
}

#[test]
fn a_partition_and_a_generic_device_name_their_controller() {
    let (_dir, mut t) = tree();
    t.controller(3, 3, "S").unwrap();
    t.namespace(3, 1, 1).unwrap();
    t.partition("nvme3n1", 1).unwrap();
    let ctrl = t.node("nvme3").display().to_string();
    let (e, text) = error(&t.host(), &t.node("nvme3n1p1"));
    assert!(matches!(e, TargetError::Partition { .. }), "{e:?}");
    assert!(text.contains("is a partition of namespace nvme3n1") && text.contains(&ctrl), "{text}");
    let (e, text) = error(&t.host(), &t.node("ng3n1"));
    assert!(matches!(e, TargetError::NamespaceGeneric { .. }), "{e:?}");
    assert!(text.contains("is the generic device of namespace ng3n1") && text.contains(&ctrl), "{text}");
}

#[test]
fn a_multipath_head_names_the_subsystems_controllers() {
    let (_dir, mut t) = tree();
    t.controller(0, 0, "S").unwrap();
    t.controller(1, 0, "S").unwrap();
    t.multipath_namespace(0, 0, 1, 1).unwrap();
    let (_, text) = error(&t.host(), &t.node("nvme0n1"));
    let both = format!("{} or {}", t.node("nvme0").display(), t.node("nvme1").display());
    assert!(text.contains(&both), "{text}");
}

#[test]
fn paths_that_are_not_nvme_devices_say_what_they_are() {
    let (_dir, mut t) = tree();
    t.controller(0, 0, "S").unwrap();
    let null = t.other_char("null", 1, 3, "mem").unwrap();
    let host = t.host();
    let (e, text) = error(&host, &null);
    assert!(matches!(e, TargetError::NotNvme { .. }), "{e:?}");
    assert!(text.contains("is not an NVMe controller (character device 1:3, `mem` device null)"), "{text}");
    assert!(text.contains(&format!("controllers here: {}", t.node("nvme0").display())), "{text}");

    let (e, text) = error(&host, &t.node("sda"));
    assert!(matches!(e, TargetError::NotNvme { .. }), "{e:?}");
    assert!(text.contains("block device 8:0"), "{text}");

    let file = t.root().join("regular");
    std::fs::write(&file, "hello").unwrap();
    let (e, text) = error(&host, &file);
    assert!(matches!(e, TargetError::NotADevice { .. }), "{e:?}");
    assert!(text.contains("is a regular file, not a device"), "{text}");

    let (e, _) = error(&host, t.root());
    assert!(matches!(e, TargetError::NotADevice { ref what, .. } if what == "a directory"), "{e:?}");

    let (e, text) = error(&host, &t.node("nvme7"));
    assert!(matches!(e, TargetError::NotFound { .. }), "{e:?}");
    assert!(text.contains("no such file or device"), "{text}");
}

#[test]
fn without_controllers_the_hint_says_so() {
    let (_dir, t) = tree();
    let (_, text) = error(&t.host(), &t.node("nvme0"));
    assert!(text.contains("the Linux NVMe driver has no controller on this machine"), "{text}");
}

#[test]
fn a_controller_that_is_not_live_is_refused_with_the_fix() {
    let (_dir, mut t) = tree();
    t.controller(0, 0, "S").unwrap();
    t.set_state(0, "resetting").unwrap();
    let (e, text) = error(&t.host(), &t.node("nvme0"));
    assert!(matches!(e, TargetError::NotLive { .. }), "{e:?}");
    assert!(text.contains("controller nvme0 is resetting, not live"), "{text}");
    assert!(text.contains("reset_controller"), "{text}");
}

#[test]
fn missing_permission_is_a_line_with_the_fix() {
    let (_dir, mut t) = tree();
    t.controller(0, 0, "S").unwrap();
    t.flag_node("nvme0", "eacces").unwrap();
    let e = LinuxDevice::open_on(t.host(), &t.node("nvme0"), Options::default()).err().unwrap();
    assert!(matches!(e, TargetError::PermissionDenied { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.ends_with("permission denied; run nvtest as root (the NVMe passthrough ioctls need CAP_SYS_ADMIN)"));
}

#[test]
fn a_fake_node_that_answers_no_ioctl_is_not_an_nvme_controller() {
    // The fake node is a regular file: the ioctl answers ENOTTY, as a non-NVMe device would.
    let (_dir, mut t) = tree();
    t.controller(0, 0, "S").unwrap();
    let e = LinuxDevice::open_on(t.host(), &t.node("nvme0"), Options::default()).err().unwrap();
    assert!(matches!(e, TargetError::NotNvme { .. }), "{e:?}");
    assert!(e.to_string().contains("does not answer the NVMe passthrough ioctls (ENOTTY)"), "{e}");
}

#[test]
fn holders_are_named_with_what_they_are() {
    let (_dir, mut t) = tree();
    t.controller(0, 0, "S").unwrap();
    t.namespace(0, 1, 1).unwrap();
    let p = t.partition("nvme0n1", 1).unwrap();
    let dm = t.device_mapper(&p, 0, "vg0-data").unwrap();
    let md = t.md("nvme0n1", 1).unwrap();
    let host = t.host();
    assert_eq!(sysfs::holders(&host, &p).unwrap(), std::slice::from_ref(&dm));
    assert_eq!(sysfs::holders(&host, "nvme0n1").unwrap(), std::slice::from_ref(&md));
    assert_eq!(sysfs::describe_holder(&host, &dm), "dm-0 (device-mapper `vg0-data`)");
    assert_eq!(sysfs::describe_holder(&host, &md), "md1 (md RAID)");
    assert!(sysfs::holders(&host, &dm).unwrap().is_empty());
}
