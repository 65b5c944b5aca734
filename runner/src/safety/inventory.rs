//! What belongs to the drive under test: every controller of its NVM subsystem, their
//! namespaces' block and generic devices, partitions, and everything stacked on them at
//! any depth — device-mapper and md (`holders/`), and loop devices, whose backing file is
//! a device of the drive or a file on a filesystem of one (the kernel shows those under
//! no `holders/`).
//!
//! Each member carries the chain that leads to it from the drive, for messages:
//! "/dev/loop0 (loop device on /dev/nvme0n4 (namespace 4 of nvme0))".

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use nvme::linux::loopdev::{self, LoopDevice};
use nvme::linux::sysfs::{self, ControllerInfo, DevNum, FileIdentity, NodeKind};
use nvme::linux::Host;

/// How a member stands on the one below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stacking {
    /// A device of the drive itself: controller, namespace, partition.
    Own,
    /// Listed under the lower device's `holders/` (device-mapper, md, bcache …).
    Holder,
    /// A loop device whose backing file is the lower device (`file` None) or a file on
    /// a filesystem of it (`file` its path).
    Loop { file: Option<String> },
}

/// A device that belongs to the drive under test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Kernel name: `nvme0`, `ng0n1`, `nvme0n1`, `nvme0n1p2`, `dm-0`, `loop0`.
    pub name: String,
    pub kind: NodeKind,
    pub num: Option<DevNum>,
    /// Its node in /dev, when there is one.
    pub node: Option<PathBuf>,
    /// Other names it is known by (a device-mapper name).
    pub aliases: Vec<String>,
    /// For messages, with the chain from the drive: "/dev/nvme0n1p2 (partition of
    /// namespace 1 of nvme0)", "/dev/dm-0 (device-mapper `vg0` on /dev/nvme0n1 (…))".
    pub what: String,
    /// A namespace's whole block device: held with O_EXCL for the run.
    pub claim: bool,
    /// The member it is stacked on, for a holder or a loop device.
    pub stacked_on: Option<String>,
    pub stacking: Stacking,
}

impl Member {
    /// A device of the drive itself.
    fn own(name: &str, kind: NodeKind, num: Option<DevNum>, node: Option<PathBuf>, what: String) -> Member {
        Member {
            name: name.to_string(),
            kind,
            num,
            node,
            aliases: Vec::new(),
            what,
            claim: false,
            stacked_on: None,
            stacking: Stacking::Own,
        }
    }

    /// Its node as shown: `/dev/NAME` when it has none of its own.
    pub fn shown(&self, host: &Host) -> String {
        shown(host, &self.name, &self.node)
    }

    /// Whether the kernel's numbers name this member (a node of it, or a file on it).
    fn is(&self, identity: &FileIdentity) -> bool {
        match identity {
            FileIdentity::Node(node) => self.kind == node.kind && self.num == Some(node.num),
            FileIdentity::OnFilesystem(dev) => self.kind == NodeKind::Block && self.num == Some(*dev),
        }
    }
}

fn shown(host: &Host, name: &str, node: &Option<PathBuf>) -> String {
    node.clone().unwrap_or_else(|| host.node_path(name)).display().to_string()
}

/// The members a file the kernel identifies belongs to: the device itself, or the block
/// device whose filesystem holds the file.
pub fn member_of_identity<'a>(members: &'a [Member], identity: &FileIdentity) -> Option<&'a Member> {
    members.iter().find(|m| m.is(identity))
}

/// Every device of the controller's NVM subsystem, and everything stacked on them.
pub fn inventory(host: &Host, ctrl: &ControllerInfo) -> Result<Vec<Member>, String> {
    let controllers = match &ctrl.subsystem {
        Some((_, dir)) => sysfs::subsystem_controllers(dir).map_err(|e| e.to_string())?,
        None => vec![ctrl.name.clone()],
    };
    let mut members: Vec<Member> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut push = |members: &mut Vec<Member>, m: Member| {
        if seen.insert(m.name.clone()) {
            members.push(m);
        }
    };
    for name in &controllers {
        let info = if *name == ctrl.name {
            ctrl.clone()
        } else {
            let num = sysfs::read_attr(&host.sys_path(&format!("class/nvme/{name}/dev")))
                .ok()
                .and_then(|t| DevNum::parse(&t))
                .ok_or_else(|| format!("controller {name} of {} has no readable `dev`", ctrl.name))?;
            sysfs::controller_info(host, name, &host.node_path(name), num).map_err(|e| e.to_string())?
        };
        let same = if *name == ctrl.name { String::new() } else { format!(", same NVM subsystem as {}", ctrl.name) };
        let node = host.node_if_matches(name, NodeKind::Char, info.num);
        let what = format!("{} (controller {name}{same})", shown(host, name, &node));
        push(&mut members, Member::own(name, NodeKind::Char, Some(info.num), node, what));
        for ns in sysfs::namespaces(host, &info).map_err(|e| e.to_string())? {
            let of = format!("namespace {} of {name}{same}", ns.nsid);
            if let Some(g) = &ns.generic {
                let what = format!("{} (generic device of {of})", shown(host, &g.name, &g.node));
                push(&mut members, Member::own(&g.name, NodeKind::Char, Some(g.num), g.node.clone(), what));
            }
            if let Some(d) = &ns.disk {
                let what = format!("{} ({of})", shown(host, &d.name, &d.node));
                let mut disk = Member::own(&d.name, NodeKind::Block, d.num, d.node.clone(), what);
                disk.claim = d.node.is_some();
                push(&mut members, disk);
            }
            for p in &ns.partitions {
                let what = format!("{} (partition of {of})", shown(host, &p.name, &p.node));
                push(&mut members, Member::own(&p.name, NodeKind::Block, p.num, p.node.clone(), what));
            }
        }
    }
    let loops = loopdev::loop_devices(host).map_err(|e| e.to_string())?;
    if let Some(unknown) = loops.iter().find_map(|l| l.backing.as_ref().err().map(|e| (l, e))) {
        let (device, why) = unknown;
        return Err(format!(
            "cannot tell what backs loop device /dev/{} ({why}); detach it (losetup -d /dev/{}) if it is not needed, \
             or run nvtest where its backing file can be examined",
            device.name, device.name
        ));
    }
    // Everything stacked on the block devices, recursively (bounded: a stack is shallow).
    let mut frontier: Vec<Member> = members.iter().filter(|m| m.kind == NodeKind::Block).cloned().collect();
    for _ in 0..16 {
        let mut next = Vec::new();
        for below in &frontier {
            for holder in sysfs::holders(host, &below.name).map_err(|e| e.to_string())? {
                next.push(holder_member(host, below, &holder));
            }
            for device in loops.iter().filter(|l| l.backing.as_ref().is_ok_and(|b| below.is(b))) {
                next.push(loop_member(host, below, device));
            }
        }
        next.retain(|m| !members.iter().any(|known| known.name == m.name));
        if next.is_empty() {
            break;
        }
        for m in &next {
            push(&mut members, m.clone());
        }
        frontier = next;
    }
    Ok(members)
}

/// A device listed under `below`'s `holders/`.
fn holder_member(host: &Host, below: &Member, holder: &str) -> Member {
    let info = sysfs::block_by_name(host, holder);
    let dm = sysfs::read_attr(&info.sysfs.join("dm/name")).ok();
    let kind = match &dm {
        Some(name) => format!("device-mapper `{name}`"),
        None if info.sysfs.join("md").is_dir() => "md RAID".to_string(),
        None => "stacked device".to_string(),
    };
    Member {
        name: holder.to_string(),
        kind: NodeKind::Block,
        num: info.num,
        what: format!("{} ({kind} on {})", shown(host, holder, &info.node), below.what),
        node: info.node,
        aliases: dm.into_iter().collect(),
        claim: false,
        stacked_on: Some(below.name.clone()),
        stacking: Stacking::Holder,
    }
}

/// A loop device backed by `below` or by a file on it.
fn loop_member(host: &Host, below: &Member, device: &LoopDevice) -> Member {
    let node = device.num.and_then(|num| host.node_if_matches(&device.name, NodeKind::Block, num));
    let by_node = matches!(device.backing, Ok(FileIdentity::Node(_)));
    // The loop driver keeps the path the file had when it was bound: once its
    // filesystem is unmounted (umount -l) that path leads nowhere, or elsewhere.
    let file = if device.path_current {
        format!("the file {}", device.backing_path)
    } else {
        format!("a file the loop driver calls `{}` (its filesystem is no longer mounted there)", device.backing_path)
    };
    let (on, file) = if by_node {
        (format!("loop device on {}", below.what), None)
    } else {
        (format!("loop device on {file}, on {}", below.what), Some(file))
    };
    Member {
        name: device.name.clone(),
        kind: NodeKind::Block,
        num: device.num,
        what: format!("{} ({on})", shown(host, &device.name, &node)),
        node,
        aliases: Vec::new(),
        claim: false,
        stacked_on: Some(below.name.clone()),
        stacking: Stacking::Loop { file },
    }
}

/// The member a device path names (`/dev/nvme0n1p1`, `/dev/mapper/vg0-data`, a
/// by-uuid link), by device number where the node can be examined, else by name.
pub fn member_of_path<'a>(host: &Host, members: &'a [Member], path: &str) -> Option<&'a Member> {
    let path = Path::new(path);
    if let Ok(Some(node)) = host.stat(path) {
        if let Some(m) = members.iter().find(|m| m.kind == node.kind && m.num == Some(node.num)) {
            return Some(m);
        }
    }
    let resolved =
        if host.is_fake() { path.to_path_buf() } else { fs::canonicalize(path).unwrap_or(path.to_path_buf()) };
    if let Some(m) = members.iter().find(|m| m.node.as_deref() == Some(resolved.as_path())) {
        return Some(m);
    }
    let under_dev = resolved.starts_with(&host.dev) || resolved.starts_with("/dev");
    let name = resolved.file_name()?.to_str()?;
    under_dev.then(|| members.iter().find(|m| m.name == name || m.aliases.iter().any(|a| a == name))).flatten()
}
