//! A hardware runner's power switch for a controller of the Linux NVMe driver (the
//! runner's `--rig FILE`): how [`super::LinuxDevice`] switches the drive's power off and
//! on, and finds it again afterwards.
//!
//! Two switches:
//! - [`Switch::Commands`]: the lab's own commands (a PDU, IPMI, a power-injection
//!   module), run with `sh -c` and given `NVTEST_CONTROLLER` (`nvme0`),
//!   `NVTEST_PCI_ADDRESS` (`0000:01:00.0`) and `NVTEST_SERIAL`. After `power_off` the
//!   function must stop answering configuration reads (all ones, or gone): a drive that
//!   still answers kept its power, which is an error of the rig, not the drive's failure.
//!   nvtest then removes the dead function from the kernel (`remove` in sysfs; the driver
//!   does not shut down a function that is not present). After `power_on` and the settle
//!   time it rescans the PCI bus until the controller is back.
//! - [`Switch::PciRemoveRescan`]: the weaker fallback when there is no power switch. The
//!   function is removed (the driver shuts a present controller down normally, CC.SHN,
//!   NVMe 1.4 §7.6.2) and found again by a rescan: no power is lost, so this shows only
//!   that the data survived a shutdown and re-enumeration. Verdicts say so.
//!
//! The controller comes back as whichever `nvmeN` the kernel gives it, found by its
//! serial number (Identify Controller SN, sysfs `serial`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::sysfs::{self, ControllerInfo, Host};
use crate::transport::PowerMethod;

/// How long a rig command may run.
const COMMAND_LIMIT: Duration = Duration::from_secs(300);

/// The rig as its file describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rig {
    pub switch: Switch,
    /// Waited after the power is on, before the bus is rescanned (the drive's own start).
    pub settle: Duration,
    /// How long the controller may take to be back (enumerated and live), and the
    /// function to stop answering after `power_off`.
    pub come_back_within: Duration,
}

/// What switches the power.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Switch {
    /// Shell commands that cut and restore the drive's power.
    Commands { power_off: String, power_on: String },
    /// No switch: PCI remove and rescan (the drive keeps its power).
    PciRemoveRescan,
}

impl Rig {
    pub fn method(&self) -> PowerMethod {
        match self.switch {
            Switch::Commands { .. } => PowerMethod::Cut,
            Switch::PciRemoveRescan => PowerMethod::RemoveRescan,
        }
    }
}

/// The PCI function under controller `ctrl`: its address (`0000:01:00.0`) from the
/// controller's `device` link.
pub fn pci_address(ctrl: &ControllerInfo) -> Result<String, String> {
    let link = ctrl.sysfs.join("device");
    let target = std::fs::canonicalize(&link)
        .map_err(|e| format!("{}: {e}: the controller is not a PCI function nvtest can switch", link.display()))?;
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let looks_like_address = name.len() == 12 && name.as_bytes()[4] == b':' && name.as_bytes()[7] == b':';
    if !looks_like_address {
        return Err(format!(
            "{} is `{name}`, not a PCI address: a rig switches PCIe drives only (not NVMe over Fabrics)",
            link.display()
        ));
    }
    Ok(name)
}

/// The function's directory in sysfs.
pub fn function_dir(host: &Host, address: &str) -> PathBuf {
    host.sys_path(&format!("bus/pci/devices/{address}"))
}

/// Runs one of the rig's commands, with the drive named in its environment.
pub fn run_command(which: &str, command: &str, ctrl: &ControllerInfo, address: &str) -> Result<(), String> {
    let mut child = Command::new("sh")
        .args(["-c", command])
        .env("NVTEST_CONTROLLER", &ctrl.name)
        .env("NVTEST_PCI_ADDRESS", address)
        .env("NVTEST_SERIAL", ctrl.serial.trim())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("the rig's {which} `{command}` could not start: {e}"))?;
    // Read as it comes, so a talkative command never blocks on a full pipe.
    let stderr = child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let mut said = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut said);
            said
        })
    });
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let said = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
                let said = said.lines().last().unwrap_or_default().trim().to_string();
                return Err(format!(
                    "the rig's {which} `{command}` failed ({status}){}",
                    if said.is_empty() { String::new() } else { format!(": {said}") }
                ));
            }
            Ok(None) if started.elapsed() > COMMAND_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the rig's {which} `{command}` ran longer than {} s and was killed",
                    COMMAND_LIMIT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("the rig's {which} `{command}`: {e}")),
        }
    }
}

/// Whether the function answers configuration reads: its Vendor ID is not FFFFh.
/// A function the kernel removed (hot-plug saw it go) does not answer.
pub fn answers(host: &Host, address: &str) -> bool {
    match std::fs::read(function_dir(host, address).join("config")) {
        Ok(bytes) => bytes.get(..2).is_some_and(|id| id != [0xff, 0xff]),
        Err(_) => false,
    }
}

/// Writes `1` to a sysfs attribute (`remove`, `rescan`).
pub fn poke(path: &Path) -> Result<(), String> {
    std::fs::write(path, "1").map_err(|e| format!("writing 1 to {}: {e}", path.display()))
}

/// Removes the function from the kernel, when it is still there.
pub fn remove_function(host: &Host, address: &str) -> Result<(), String> {
    let dir = function_dir(host, address);
    if !dir.exists() {
        return Ok(());
    }
    poke(&dir.join("remove"))
}

/// Unbinds the driver from the function (the driver shuts the controller down
/// normally first, §7.6.2); nothing to do when no driver is bound.
pub fn unbind(host: &Host, address: &str) -> Result<(), String> {
    let unbind = function_dir(host, address).join("driver/unbind");
    if !unbind.exists() {
        return Ok(());
    }
    std::fs::write(&unbind, address).map_err(|e| format!("writing {address} to {}: {e}", unbind.display()))
}

/// Rescans the PCI bus until the `controllers` live controllers with `serial` the drive
/// had are back (or, once `within` passed, any): the name and node of the one at PCI
/// function `address`, else of the first. The controllers of one NVM subsystem share a
/// serial (the ports of a dual-port drive): the run goes on through the port it was on.
pub fn find_again(
    host: &Host,
    serial: &str,
    address: &str,
    controllers: usize,
    within: Duration,
) -> Result<(String, PathBuf), String> {
    let deadline = Instant::now() + within;
    let rescan = host.sys_path("bus/pci/rescan");
    loop {
        let found = live_with_serial(host, serial);
        let at_address = found.iter().find(|(name, _)| {
            let link = host.sys_path(&format!("class/nvme/{name}/device"));
            std::fs::canonicalize(link).ok().is_some_and(|t| t.file_name().is_some_and(|n| n == address))
        });
        let all_back = found.len() >= controllers.max(1) || Instant::now() >= deadline;
        if let Some(found) = at_address.or(found.first()).filter(|_| all_back) {
            return Ok(found.clone());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "no live controller with serial `{}` within {} s of the power coming on (the PCI bus rescanned; \
                 looked at {})",
                serial.trim(),
                within.as_secs(),
                host.sys_path("class/nvme").display()
            ));
        }
        poke(&rescan)?;
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The live controllers whose serial is `serial`, with a device node, by name.
fn live_with_serial(host: &Host, serial: &str) -> Vec<(String, PathBuf)> {
    let class = host.sys_path("class/nvme");
    let mut found = Vec::new();
    for name in sysfs::dir_names(&class).unwrap_or_default() {
        let dir = class.join(&name);
        let same = sysfs::read_attr(&dir.join("serial")).is_ok_and(|s| s.trim() == serial.trim());
        let live = sysfs::read_attr(&dir.join("state")).map_or(true, |s| s == "live");
        let node = host.node_path(&name);
        if same && live && node.exists() {
            found.push((name, node));
        }
    }
    found
}

/// A fault of the rig or the host (never the drive's failure).
fn rig_error(message: String) -> crate::device::DeviceError {
    crate::device::DeviceError::Transport(crate::transport::TransportError::Other(message))
}

/// A backend for the time the controller is off: every command fails with ENODEV.
struct PoweredOff;

impl super::Passthrough for PoweredOff {
    fn admin(&mut self, _: &mut super::PassthruCmd64) -> Result<i32, nix::errno::Errno> {
        Err(nix::errno::Errno::ENODEV)
    }
    fn io(&mut self, _: &Path, _: &mut super::PassthruCmd64) -> Result<i32, nix::errno::Errno> {
        Err(nix::errno::Errno::ENODEV)
    }
    fn rescan(&mut self) -> Result<(), nix::errno::Errno> {
        Err(nix::errno::Errno::ENODEV)
    }
    fn reset(&mut self) -> Result<(), nix::errno::Errno> {
        Err(nix::errno::Errno::ENODEV)
    }
}

impl super::LinuxDevice {
    /// Switches the power off by the rig; with `shutdown`, the driver first shuts the
    /// controller down normally (unbinding it). The controller's devices are let go once
    /// the function is gone; a rig that left it powered changes nothing of the device.
    pub(super) fn rig_power_off(
        &mut self,
        shutdown: bool,
    ) -> Result<crate::driver::Shutdown, crate::device::DeviceError> {
        let Some((rig, address)) = self.rig.clone() else {
            return Err(crate::device::DeviceError::Unsupported(
                "the target has no power switch (give --rig FILE)".into(),
            ));
        };
        let host = self.host.clone();
        let started = Instant::now();
        let unseen = "the Linux driver shut the controller down (CC.SHN = 01b) when it let go of it; CSTS.SHST is \
                      not visible to nvtest"
            .to_string();
        match &rig.switch {
            Switch::Commands { power_off, .. } => {
                let shut_down = if shutdown {
                    unbind(&host, &address).map_err(rig_error)?;
                    Some(started.elapsed())
                } else {
                    None
                };
                run_command("power_off", power_off, &self.controller, &address).map_err(rig_error)?;
                let deadline = Instant::now() + rig.come_back_within;
                while answers(&host, &address) {
                    if Instant::now() >= deadline {
                        return Err(rig_error(format!(
                            "PCI function {address} still answers configuration reads {} s after the rig's power_off: \
                             the drive kept its power (nothing is judged of a cut that did not happen)",
                            rig.come_back_within.as_secs()
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                remove_function(&host, &address).map_err(rig_error)?;
                self.let_go();
                let complete = Ok(shut_down.unwrap_or_default().as_nanos() as u64);
                Ok(crate::driver::Shutdown { complete, unseen: Some(unseen) })
            }
            Switch::PciRemoveRescan => {
                remove_function(&host, &address).map_err(rig_error)?;
                self.let_go();
                let complete = Ok(started.elapsed().as_nanos() as u64);
                Ok(crate::driver::Shutdown { complete, unseen: Some(unseen) })
            }
        }
    }

    /// Lets go of the controller's devices once its function is gone (they stand for
    /// nothing now, and holding them keeps the old controller in the kernel).
    fn let_go(&mut self) {
        self.backend = Box::new(PoweredOff);
        self.namespaces.clear();
    }

    /// Switches the power on by the rig and finds the controller again (by serial, under
    /// whatever name the kernel gives it), waits for its namespaces' devices, and runs the
    /// after-power-on hook. The controller's ready time is not visible (the driver enables
    /// it): what is measured is power-on to the controller live with its namespaces.
    pub(super) fn rig_power_on(&mut self) -> Result<crate::driver::PowerOn, crate::device::DeviceError> {
        let Some((rig, address)) = self.rig.clone() else {
            return Err(crate::device::DeviceError::Unsupported(
                "the target has no power switch (give --rig FILE)".into(),
            ));
        };
        let host = self.host.clone();
        let started = Instant::now();
        if let Switch::Commands { power_on, .. } = &rig.switch {
            run_command("power_on", power_on, &self.controller, &address).map_err(rig_error)?;
        }
        std::thread::sleep(rig.settle);
        let controllers = self.ports.len() + 1;
        let (_, node) = find_again(&host, &self.controller.serial, &address, controllers, rig.come_back_within)
            .map_err(rig_error)?;
        let controller = sysfs::classify(&host, &node).map_err(|e| rig_error(e.to_string()))?;
        let file = host.open_rw(&node).map_err(|e| rig_error(format!("{}: cannot open: {e}", node.display())))?;
        self.backend = Box::new(super::Kernel::new(host.clone(), file));
        self.controller = controller;
        self.rig = Some((rig.clone(), pci_address(&self.controller).unwrap_or(address)));
        // The other ports went with the power and come back under new names: opened anew below.
        self.ports.clear();
        // Namespace devices that do not appear are the kernel's or the host's doing, never
        // a ready-time verdict on the drive.
        crate::device::Device::namespaces_changed(self).map_err(|e| match e {
            crate::device::DeviceError::Driver(m) => rig_error(format!("after the power cycle: {m}")),
            e => e,
        })?;
        if let Some(hook) = self.after_power_on.as_mut() {
            hook(&self.controller).map_err(|e| rig_error(format!("after the power cycle: {e}")))?;
        }
        self.open_ports().map_err(|e| rig_error(format!("after the power cycle: {e}")))?;
        Ok(crate::driver::PowerOn {
            ready_ns: None,
            since_power_on_ns: started.elapsed().as_nanos() as u64,
            method: rig.method(),
            link_up_ns: None,
            enumerated_ns: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::fake::FakeTree;

    /// The two ports of a dual-port drive share a serial: the controller at the address
    /// the run was on is found again, once both are back; alone past the wait, any.
    #[test]
    fn the_port_the_run_was_on_is_found_again_among_controllers_of_one_serial() {
        let dir = tempfile::tempdir().unwrap();
        let mut tree = FakeTree::new(dir.path()).unwrap();
        tree.controller(0, 0, "DUAL-1").unwrap();
        tree.controller(1, 0, "DUAL-1").unwrap();
        tree.controller(2, 1, "OTHER").unwrap();
        let host = tree.host();
        std::fs::create_dir_all(host.sys_path("bus/pci")).unwrap();
        let found = |address: &str, controllers| {
            find_again(&host, "DUAL-1", address, controllers, Duration::from_millis(300)).map(|(name, _)| name)
        };
        // FakeTree puts controller N at 0000:00:(N + 4).0.
        assert_eq!(found("0000:00:05.0", 2).unwrap(), "nvme1");
        assert_eq!(found("0000:00:04.0", 2).unwrap(), "nvme0");
        // Its old address gone (renumbered): the first of the serial's.
        assert_eq!(found("0000:00:09.0", 2).unwrap(), "nvme0");
        // Three awaited, two back: after the wait, the one at the address.
        let started = Instant::now();
        assert_eq!(found("0000:00:05.0", 3).unwrap(), "nvme1");
        assert!(started.elapsed() >= Duration::from_millis(300));
        let e = find_again(&host, "NONE", "0000:00:04.0", 1, Duration::ZERO).unwrap_err();
        assert!(e.starts_with("no live controller with serial `NONE` within 0 s"), "{e}");
    }
}
