//! Fake kernel trees for tests: a `sys/`, `dev/` and `proc/` under a directory, laid out
//! as the Linux NVMe driver lays out the real ones (see [`super::sysfs`]), so discovery,
//! the bad-input checks and the safety gate run on them without a kernel NVMe device.
//! Device nodes are regular files describing themselves (`c 245:0`, `b 259:1 busy`).
//!
//! Nothing here touches the machine's own `/sys`, `/dev` or `/proc`.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::sysfs::Host;

/// Major numbers the fake tree gives its devices.
pub const CONTROLLER_MAJOR: u32 = 245;
pub const GENERIC_MAJOR: u32 = 244;
pub const BLOCK_MAJOR: u32 = 259;
pub const DM_MAJOR: u32 = 253;

/// A fake `sys/`, `dev/`, `proc/` tree under a directory.
pub struct FakeTree {
    root: PathBuf,
    next_block_minor: u32,
    next_generic_minor: u32,
    next_mount_id: u32,
}

fn write(path: &Path, text: &str) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::write(path, text)
}

fn link(target: &Path, at: &Path) -> io::Result<()> {
    if let Some(dir) = at.parent() {
        fs::create_dir_all(dir)?;
    }
    let _ = fs::remove_file(at);
    symlink(target, at)
}

impl FakeTree {
    /// An empty machine: no NVMe controller, `/` mounted from a non-NVMe disk, no swap.
    pub fn new(root: &Path) -> io::Result<FakeTree> {
        for dir in [
            "sys/class/nvme",
            "sys/class/nvme-generic",
            "sys/class/nvme-subsystem",
            "sys/class/block",
            "sys/block",
            "sys/dev/char",
            "sys/dev/block",
            "sys/devices/virtual/block",
            "dev",
            "proc/self",
        ] {
            fs::create_dir_all(root.join(dir))?;
        }
        write(&root.join("proc/swaps"), "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")?;
        write(&root.join("proc/self/mountinfo"), "")?;
        let mut tree =
            FakeTree { root: root.to_path_buf(), next_block_minor: 0, next_generic_minor: 0, next_mount_id: 20 };
        // The system disk: a SATA disk holding `/`.
        let sda = tree.root.join("sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda");
        write(&sda.join("dev"), "8:0\n")?;
        tree.register_block("sda", &sda, 8, 0)?;
        let sda1 = sda.join("sda1");
        write(&sda1.join("dev"), "8:1\n")?;
        write(&sda1.join("partition"), "1\n")?;
        tree.register_block("sda1", &sda1, 8, 1)?;
        tree.mount("sda1", "/", "ext4")?;
        Ok(tree)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn host(&self) -> Host {
        Host::fake(&self.root)
    }

    /// `dev/NAME`.
    pub fn node(&self, name: &str) -> PathBuf {
        self.root.join("dev").join(name)
    }

    fn sys(&self, relative: &str) -> PathBuf {
        self.root.join("sys").join(relative)
    }

    fn register_block(&mut self, name: &str, dir: &Path, major: u32, minor: u32) -> io::Result<()> {
        link(dir, &self.sys(&format!("class/block/{name}")))?;
        link(dir, &self.sys(&format!("dev/block/{major}:{minor}")))?;
        if !dir.join("partition").exists() {
            link(dir, &self.sys(&format!("block/{name}")))?;
        }
        fs::create_dir_all(dir.join("holders"))?;
        write(&self.node(name), &format!("b {major}:{minor}\n"))
    }

    /// The sysfs directory of controller `nvmeN`.
    pub fn controller_dir(&self, n: u32) -> PathBuf {
        self.sys(&format!("devices/pci0000:00/0000:00:{:02x}.0/nvme/nvme{n}", n + 4))
    }

    /// The sysfs directory of subsystem `nvme-subsysS`.
    pub fn subsystem_dir(&self, s: u32) -> PathBuf {
        self.sys(&format!("devices/virtual/nvme-subsystem/nvme-subsys{s}"))
    }

    /// Controller `nvmeN` (`/dev/nvmeN`, 245:N) with this serial, live, in subsystem
    /// `nvme-subsysS`.
    pub fn controller(&mut self, n: u32, subsystem: u32, serial: &str) -> io::Result<PathBuf> {
        let dir = self.controller_dir(n);
        write(&dir.join("dev"), &format!("{CONTROLLER_MAJOR}:{n}\n"))?;
        write(&dir.join("serial"), &format!("{serial:<20}\n"))?;
        write(&dir.join("model"), "QEMU NVMe Ctrl                          \n")?;
        write(&dir.join("firmware_rev"), "10.0.0  \n")?;
        write(&dir.join("state"), "live\n")?;
        write(&dir.join("transport"), "pcie\n")?;
        link(dir.parent().unwrap_or(&dir).parent().unwrap_or(&dir), &dir.join("device"))?;
        link(&dir, &self.sys(&format!("class/nvme/nvme{n}")))?;
        link(&dir, &self.sys(&format!("dev/char/{CONTROLLER_MAJOR}:{n}")))?;
        let subsys = self.subsystem_dir(subsystem);
        write(&subsys.join("subsysnqn"), &format!("nqn.2019-08.org.qemu:{serial}\n"))?;
        link(&subsys, &self.sys(&format!("class/nvme-subsystem/nvme-subsys{subsystem}")))?;
        link(&dir, &subsys.join(format!("nvme{n}")))?;
        write(&self.node(&format!("nvme{n}")), &format!("c {CONTROLLER_MAJOR}:{n}\n"))?;
        Ok(dir)
    }

    /// Sets a controller's `transport` attribute (`pcie`, `tcp`, `rdma`, `fc`, `loop`).
    pub fn set_transport(&self, n: u32, transport: &str) -> io::Result<()> {
        write(&self.controller_dir(n).join("transport"), &format!("{transport}\n"))
    }

    /// Sets a controller's `state` attribute.
    pub fn set_state(&self, n: u32, state: &str) -> io::Result<()> {
        write(&self.controller_dir(n).join("state"), &format!("{state}\n"))
    }

    fn generic(&mut self, dir: &Path, name: &str) -> io::Result<()> {
        let minor = self.next_generic_minor;
        self.next_generic_minor += 1;
        let g = dir.join(name);
        write(&g.join("dev"), &format!("{GENERIC_MAJOR}:{minor}\n"))?;
        link(&g, &self.sys(&format!("class/nvme-generic/{name}")))?;
        link(&g, &self.sys(&format!("dev/char/{GENERIC_MAJOR}:{minor}")))?;
        write(&self.node(name), &format!("c {GENERIC_MAJOR}:{minor}\n"))
    }

    fn disk(&mut self, dir: &Path, name: &str, nsid: u32) -> io::Result<()> {
        let minor = self.next_block_minor;
        self.next_block_minor += 1;
        let d = dir.join(name);
        write(&d.join("dev"), &format!("{BLOCK_MAJOR}:{minor}\n"))?;
        write(&d.join("nsid"), &format!("{nsid}\n"))?;
        self.register_block(name, &d, BLOCK_MAJOR, minor)
    }

    /// A private namespace of controller `nvmeC`: block device `nvmeCnI` and generic
    /// device `ngCnI` (I: the head instance), with this NSID.
    pub fn namespace(&mut self, ctrl: u32, instance: u32, nsid: u32) -> io::Result<()> {
        let dir = self.controller_dir(ctrl);
        self.disk(&dir, &format!("nvme{ctrl}n{instance}"), nsid)?;
        self.generic(&dir, &format!("ng{ctrl}n{instance}"))
    }

    /// A namespace through native multipath: the hidden path device `nvmeScCnI` under
    /// the controller (no device node), the head `nvmeSnI` and `ngSnI` in the subsystem.
    pub fn multipath_namespace(&mut self, subsystem: u32, ctrl: u32, instance: u32, nsid: u32) -> io::Result<()> {
        let path = self.controller_dir(ctrl).join(format!("nvme{subsystem}c{ctrl}n{instance}"));
        write(&path.join("nsid"), &format!("{nsid}\n"))?;
        let head = format!("nvme{subsystem}n{instance}");
        let subsys = self.subsystem_dir(subsystem);
        if !subsys.join(&head).exists() {
            self.disk(&subsys, &head, nsid)?;
            self.generic(&subsys, &format!("ng{subsystem}n{instance}"))?;
        }
        Ok(())
    }

    /// Removes a private namespace (its sysfs entries and nodes).
    pub fn remove_namespace(&mut self, ctrl: u32, instance: u32) -> io::Result<()> {
        let dir = self.controller_dir(ctrl);
        for name in [format!("nvme{ctrl}n{instance}"), format!("ng{ctrl}n{instance}")] {
            let _ = fs::remove_dir_all(dir.join(&name));
            let _ = fs::remove_file(self.sys(&format!("class/block/{name}")));
            let _ = fs::remove_file(self.sys(&format!("block/{name}")));
            let _ = fs::remove_file(self.sys(&format!("class/nvme-generic/{name}")));
            let _ = fs::remove_file(self.node(&name));
        }
        Ok(())
    }

    /// Partition `DISKpN` of a disk.
    pub fn partition(&mut self, disk: &str, n: u32) -> io::Result<String> {
        let dir = fs::canonicalize(self.sys(&format!("class/block/{disk}")))?;
        let name = format!("{disk}p{n}");
        let minor = self.next_block_minor;
        self.next_block_minor += 1;
        let p = dir.join(&name);
        write(&p.join("dev"), &format!("{BLOCK_MAJOR}:{minor}\n"))?;
        write(&p.join("partition"), &format!("{n}\n"))?;
        self.register_block(&name, &p, BLOCK_MAJOR, minor)?;
        Ok(name)
    }

    /// A device-mapper device `dm-N` (named `dm_name`) stacked on `under`.
    pub fn device_mapper(&mut self, under: &str, n: u32, dm_name: &str) -> io::Result<String> {
        let name = format!("dm-{n}");
        let dir = self.sys(&format!("devices/virtual/block/{name}"));
        write(&dir.join("dev"), &format!("{DM_MAJOR}:{n}\n"))?;
        write(&dir.join("dm/name"), &format!("{dm_name}\n"))?;
        self.register_block(&name, &dir, DM_MAJOR, n)?;
        let under_dir = fs::canonicalize(self.sys(&format!("class/block/{under}")))?;
        link(&dir, &under_dir.join("holders").join(&name))?;
        Ok(name)
    }

    /// An md RAID device `mdN` stacked on `under`.
    pub fn md(&mut self, under: &str, n: u32) -> io::Result<String> {
        let name = format!("md{n}");
        let dir = self.sys(&format!("devices/virtual/block/{name}"));
        write(&dir.join("dev"), &format!("9:{n}\n"))?;
        fs::create_dir_all(dir.join("md"))?;
        self.register_block(&name, &dir, 9, n)?;
        let under_dir = fs::canonicalize(self.sys(&format!("class/block/{under}")))?;
        link(&dir, &under_dir.join("holders").join(&name))?;
        Ok(name)
    }

    fn dev_of(&self, name: &str) -> io::Result<String> {
        Ok(fs::read_to_string(self.sys(&format!("class/block/{name}/dev")))?.trim().to_string())
    }

    /// Mounts block device `name` at `mountpoint` (a line of `proc/self/mountinfo`).
    pub fn mount(&mut self, name: &str, mountpoint: &str, fstype: &str) -> io::Result<()> {
        let dev = self.dev_of(name)?;
        self.mount_line(&dev, mountpoint, fstype, &format!("/dev/{name}"))
    }

    /// A mount line with any device number and source (btrfs subvolumes show 0:NN).
    pub fn mount_line(&mut self, dev: &str, mountpoint: &str, fstype: &str, source: &str) -> io::Result<()> {
        let id = self.next_mount_id;
        self.next_mount_id += 1;
        let mut file = fs::OpenOptions::new().append(true).open(self.root.join("proc/self/mountinfo"))?;
        writeln!(file, "{id} 1 {dev} / {mountpoint} rw,relatime shared:{id} - {fstype} {source} rw")
    }

    /// Uses block device `name` as swap (a line of `proc/swaps`).
    pub fn swap(&mut self, name: &str) -> io::Result<()> {
        let mut file = fs::OpenOptions::new().append(true).open(self.root.join("proc/swaps"))?;
        writeln!(file, "/dev/{name}                               partition\t8388604\t\t0\t\t-2")
    }

    /// Process `pid` (`comm`) holding `dev/NAME` open on descriptor 3.
    pub fn opener(&mut self, pid: u32, comm: &str, name: &str) -> io::Result<()> {
        let dir = self.root.join(format!("proc/{pid}"));
        write(&dir.join("comm"), &format!("{comm}\n"))?;
        fs::create_dir_all(dir.join("fd"))?;
        link(&PathBuf::from("/dev/null"), &dir.join("fd/0"))?;
        link(&self.node(name), &dir.join("fd/3"))
    }

    /// Loop device `loopN` bound to `backing` (a node of this tree, or a file made by
    /// [`FakeTree::file_on`]), as `losetup /dev/loopN BACKING` leaves it.
    pub fn loop_device(&mut self, n: u32, backing: &Path) -> io::Result<String> {
        let name = format!("loop{n}");
        let dir = self.sys(&format!("devices/virtual/block/{name}"));
        write(&dir.join("dev"), &format!("7:{n}\n"))?;
        write(&dir.join("loop/backing_file"), &format!("{}\n", backing.display()))?;
        self.register_block(&name, &dir, 7, n)?;
        Ok(name)
    }

    /// A regular file `RELATIVE` (under the tree's root) on the filesystem of block
    /// device `name`: a file in a filesystem on the drive.
    pub fn file_on(&self, name: &str, relative: &str) -> io::Result<PathBuf> {
        let path = self.root.join(relative);
        write(&path, &format!("f {}\n", self.dev_of(name)?))?;
        Ok(path)
    }

    /// Process `pid` (`comm`) with `target` (a node, or a file of [`FakeTree::file_on`])
    /// memory-mapped, its descriptor closed: a line of `proc/PID/maps` and the
    /// `map_files/` link the kernel keeps for it.
    pub fn mapping(&mut self, pid: u32, comm: &str, target: &Path, maps_dev: &str) -> io::Result<()> {
        let dir = self.root.join(format!("proc/{pid}"));
        write(&dir.join("comm"), &format!("{comm}\n"))?;
        fs::create_dir_all(dir.join("fd"))?;
        let range = "7f0000000000-7f0000100000";
        let mut maps = fs::OpenOptions::new().create(true).append(true).open(dir.join("maps"))?;
        writeln!(maps, "55d000000000-55d000001000 r-xp 00000000 08:01 1234 /usr/bin/{comm}")?;
        writeln!(maps, "{range} rw-s 00000000 {maps_dev} 321 {}", target.display())?;
        writeln!(maps, "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]")?;
        link(target, &dir.join(format!("map_files/{range}")))?;
        let program = self.root.join(format!("usr/bin/{comm}"));
        write(&program, "f 8:1\n")?;
        link(&program, &dir.join("map_files/55d000000000-55d000001000"))
    }

    /// Block device `name` mounted at `mountpoint` in another mount namespace, the one
    /// process `pid` (`comm`) is in (nvtest's own namespace is `mnt:[4026531840]`).
    pub fn mount_elsewhere(
        &mut self,
        pid: u32,
        comm: &str,
        name: &str,
        mountpoint: &str,
        fstype: &str,
    ) -> io::Result<()> {
        let own = self.root.join("proc/self/ns/mnt");
        if fs::symlink_metadata(&own).is_err() {
            link(Path::new("mnt:[4026531840]"), &own)?;
        }
        let dir = self.root.join(format!("proc/{pid}"));
        write(&dir.join("comm"), &format!("{comm}\n"))?;
        link(Path::new(&format!("mnt:[{}]", 4026532000u64 + pid as u64)), &dir.join("ns/mnt"))?;
        let id = self.next_mount_id;
        self.next_mount_id += 1;
        let dev = self.dev_of(name)?;
        let mut file = fs::OpenOptions::new().create(true).append(true).open(dir.join("mountinfo"))?;
        writeln!(file, "{id} 1 {dev} / {mountpoint} rw,relatime - {fstype} /dev/{name} rw")
    }

    /// Adds flags to a node (`busy`: an exclusive open fails; `eacces`: any open fails).
    pub fn flag_node(&self, name: &str, flag: &str) -> io::Result<()> {
        let path = self.node(name);
        let text = fs::read_to_string(&path)?;
        fs::write(&path, format!("{} {flag}\n", text.trim()))
    }

    /// Process `pid` (`comm`) with an io_uring ring on descriptor 5 whose fixed files are
    /// `names` (as the kernel's fdinfo lists them: the file's name alone), the files' own
    /// descriptors closed. `listed: false`: the kernel counted them but listed none (a
    /// busy ring).
    pub fn io_uring_ring(&mut self, pid: u32, comm: &str, names: &[&str], listed: bool) -> io::Result<()> {
        let dir = self.root.join(format!("proc/{pid}"));
        write(&dir.join("comm"), &format!("{comm}\n"))?;
        link(Path::new("anon_inode:[io_uring]"), &dir.join("fd/5"))?;
        let mut info =
            format!("pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nSqMask:\t0x7\nUserFiles:\t{}\n", names.len());
        if listed {
            for (i, name) in names.iter().enumerate() {
                info.push_str(&format!("{i:>5}: {name}\n"));
            }
        }
        info.push_str("UserBufs:\t0\nPollList:\n");
        write(&dir.join("fdinfo/5"), &info)
    }

    /// A namespace `nsid` of the kernel NVMe target's subsystem `nqn` in configfs
    /// (`sys/kernel/config/nvmet`), backed by `device_path`, enabled or not.
    pub fn nvmet_namespace(&mut self, nqn: &str, nsid: u32, device_path: &Path, enabled: bool) -> io::Result<()> {
        let ns = self.sys(&format!("kernel/config/nvmet/subsystems/{nqn}/namespaces/{nsid}"));
        write(&ns.join("device_path"), &format!("{}\n", device_path.display()))?;
        write(&ns.join("enable"), if enabled { "1\n" } else { "0\n" })
    }

    /// An LIO backstore `hba/name` in configfs (`sys/kernel/config/target/core`) whose
    /// `udev_path` is `path`.
    pub fn lio_backstore(&mut self, hba: &str, name: &str, path: &Path) -> io::Result<()> {
        let object = self.sys(&format!("kernel/config/target/core/{hba}/{name}"));
        write(&object.join("udev_path"), &format!("{}\n", path.display()))?;
        write(&object.join("enable"), "1\n")
    }

    /// Module `name` loaded (`sys/module/NAME`).
    pub fn module(&mut self, name: &str) -> io::Result<()> {
        fs::create_dir_all(self.sys(&format!("module/{name}")))
    }

    /// A character device of another class (`null`, 1:3, class `mem`).
    pub fn other_char(&mut self, name: &str, major: u32, minor: u32, class: &str) -> io::Result<PathBuf> {
        let dir = self.sys(&format!("devices/virtual/{class}/{name}"));
        write(&dir.join("dev"), &format!("{major}:{minor}\n"))?;
        link(&self.sys(&format!("class/{class}")), &dir.join("subsystem"))?;
        fs::create_dir_all(self.sys(&format!("class/{class}")))?;
        link(&dir, &self.sys(&format!("class/{class}/{name}")))?;
        link(&dir, &self.sys(&format!("dev/char/{major}:{minor}")))?;
        let node = self.node(name);
        write(&node, &format!("c {major}:{minor}\n"))?;
        Ok(node)
    }
}
