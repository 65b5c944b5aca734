//! A software NVMe subsystem that behaves like hardware at the register level.
//!
//! The host driver reaches it through [`pci::SimTransport`] (an implementation of
//! `nvme::transport::Transport`): configuration space, BAR0 registers and doorbells.
//! Commands are fetched from submission queues in host memory, their data moved by
//! DMA following PRPs, and completions posted with phase tags, as a real controller does.
//!
//! - [`pci`] and [`controller`]: the PCIe function, registers, CC/CSTS state, queues,
//!   doorbells, queue-management commands, Abort and Asynchronous Event Requests.
//! - [`exec`]: the contract between that queue engine and the command set.
//! - [`service`]: the simulated clock and the service model (how long commands take).
//! - [`subsystem`]: the NVM subsystem: namespaces, media, the admin and NVM commands
//!   they answer, profiles and quirks.
//! - [`rng`]: the seeded pseudo-random generator behind every random choice the drive makes.
//! - [`bench`]: for benchmarks: the bare driver's read loop and a RAM command set.

pub mod bench;
pub mod controller;
pub mod exec;
pub mod pci;
pub mod profile;
pub mod rng;
pub mod service;
pub mod subsystem;

pub use controller::ControllerConfig;
pub use pci::SimTransport;
pub use profile::Profile;
pub use subsystem::Subsystem;

/// The queue engine's configuration for a profile: CAP, VS and PCI identity as the
/// profile describes the drive.
pub fn controller_config(profile: &Profile) -> ControllerConfig {
    let c = &profile.controller;
    ControllerConfig {
        name: profile.name.clone(),
        mqes: c.max_queue_entries.clamp(2, 65536).saturating_sub(1) as u16,
        to: c.timeout_ms.div_ceil(500).clamp(1, 255) as u8,
        version: profile.version,
        aerl: c.aerl,
        cntlid: c.cntlid,
        vendor_id: profile.identity.pci_vendor_id,
        subsystem_vendor_id: profile.identity.pci_subsystem_vendor_id,
        ams: profile.cap_ams(),
        service: profile.service.clone(),
        quirks: crate::subsystem::Quirks::new(&profile.quirks),
        ..ControllerConfig::default()
    }
}

/// The queue engine's configuration of every port of a profile's drive, port 0 first:
/// [`controller_config`] with each port's CNTLID (`controller.cntlid + i`).
pub fn port_configs(profile: &Profile) -> Vec<ControllerConfig> {
    let config = controller_config(profile);
    profile.controller.cntlids().into_iter().map(|cntlid| ControllerConfig { cntlid, ..config.clone() }).collect()
}

/// A simulated drive built from a profile, ready for a host driver: its first port
/// (CNTLID `controller.cntlid`). A drive with several ports has the others too (the
/// subsystem lists their controllers), reached through [`open_ports`].
pub fn open(profile: Profile) -> Result<SimTransport, String> {
    let config = controller_config(&profile);
    let subsystem = Subsystem::new(profile).map_err(|e| e.to_string())?;
    Ok(SimTransport::new(config, Box::new(subsystem)))
}

/// Every port of a simulated drive, port 0 (CNTLID `controller.cntlid`) first: one
/// controller each, sharing the subsystem (namespaces, media) and its clock.
pub fn open_ports(profile: Profile) -> Result<Vec<SimTransport>, String> {
    let mut configs = port_configs(&profile).into_iter();
    let first = configs.next().ok_or("a drive needs at least one port")?;
    let subsystem = Subsystem::new(profile).map_err(|e| e.to_string())?;
    let first = SimTransport::new(first, Box::new(subsystem));
    let others: Vec<SimTransport> = configs.map(|config| first.another_port(config)).collect();
    Ok(std::iter::once(first).chain(others).collect())
}
