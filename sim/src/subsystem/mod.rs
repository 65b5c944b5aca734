//! The simulated NVM subsystem: namespaces on sparse media and the admin and NVM
//! commands that act on them (NVMe 1.4 §5 "Admin Command Set", §6 "NVM Command Set").
//!
//! [`Subsystem`] implements [`CommandSet`] for the queue engine: Identify, Get Log Page,
//! Get/Set Features, Namespace Management and Attachment, Format NVM, and the NVM
//! commands. Everything it advertises it implements; everything it does not implement
//! is refused with the status the spec assigns. A profile ([`crate::profile`]) says what
//! the drive is; its quirks ([`Quirk`]) make it break one named rule each.
//!
//! - [`media`]: sparse byte store; [`namespace`]: LBAs, formats, allocation state.
//! - [`identify`], [`log`], [`features`], [`manage`]: the admin commands.
//! - [`io`]: the NVM commands and the data path; [`reservation`]: reservations and the
//!   access they leave each host; [`ana`]: Asymmetric Namespace Access, the state of each
//!   ANA group through each controller and what it lets through.
//! - [`power`]: what a power loss takes back, the power counters and ready times;
//!   [`power_cycle`]: the commands, shutdown, power cut and power-on acting on it.
//! - [`testing`]: a host-memory data pointer for tests without the queue engine.
//!
//! ## Controllers
//!
//! A profile's `controller.ports` gives the subsystem one controller per port, CNTLIDs
//! `controller.cntlid`, `+ 1`, … (NVMe 1.4 §2.4.1 "Multi-Path I/O and Namespace
//! Sharing"). They share everything the NVM subsystem holds (namespaces and their media,
//! firmware slots, sanitize, the SMART / Health counters, power); each keeps its own
//! [`ControllerState`]: feature values, Changed Namespace List and error log. A command
//! acts for the controller its context names ([`ControllerContext::cntlid`]): on arrival
//! that controller's state is swapped into `Subsystem::controller` (the others wait in
//! `Subsystem::others`), so every command reads and changes the state of the controller
//! it came on, and a namespace is active for it only if attached to it. A context naming
//! no controller of the subsystem (a hand-built one in a test) acts for the first.
//! Changes one controller makes to a namespace attached to another raise that one's
//! notices in its own mailbox, which its queue engine takes ([`CommandSet::take_events`]).

pub mod ana;
pub mod crypt;
pub mod erase;
pub mod features;
pub mod firmware;
pub mod identify;
pub mod io;
pub mod log;
pub mod manage;
pub mod media;
pub mod namespace;
pub mod power;
pub mod power_cycle;
pub mod quirk;
pub mod reservation;
pub mod sanitize;
pub mod testing;

pub use quirk::{Quirk, Quirks};

use crate::exec::{AsyncEvent, CommandSet, ControllerContext, DataPointer, Done};
use crate::profile::{OptionalCommand, Profile};
use namespace::{Format, Namespace};
use nvme::spec::{AdminOpcode, Command, NvmOpcode, Status, Version};

/// NSID FFFFFFFFh: the broadcast value ("all namespaces" / common capabilities).
pub const NSID_ALL: u32 = 0xFFFF_FFFF;

/// What the subsystem keeps per controller: feature values, the Changed Namespace List,
/// the error log, and the events other controllers' commands raised for it.
#[derive(Debug)]
pub struct ControllerState {
    pub cntlid: u16,
    pub features: features::Features,
    pub changed: log::ChangedNamespaces,
    pub errors: log::ErrorLog,
    /// Events raised for this controller by commands that ran on another, until its
    /// queue engine takes them ([`CommandSet::take_events`]).
    pub events: Vec<AsyncEvent>,
    /// The PCIe link of this controller's port is down ([`CommandSet::port_link`]).
    pub link_down: bool,
    /// Reservation Notification log pages not yet read ([`reservation`]).
    pub reservation_log: reservation::NoticeLog,
    /// The ANA groups' states through this controller and its log page 0Ch ([`ana`]).
    pub ana: ana::AnaView,
}

impl ControllerState {
    /// A controller as the profile describes it after power-on.
    fn new(cntlid: u16, profile: &Profile) -> ControllerState {
        ControllerState {
            cntlid,
            features: features::Features::new(profile),
            changed: log::ChangedNamespaces::default(),
            errors: log::ErrorLog::default(),
            events: Vec::new(),
            link_down: false,
            reservation_log: reservation::NoticeLog::default(),
            ana: ana::AnaView::default(),
        }
    }
}

/// Counters behind the SMART / Health Information log page (Figure 196).
#[derive(Clone, Copy, Debug, Default)]
pub struct Health {
    /// Bytes of user data read by Read and Compare (metadata excluded).
    pub bytes_read: u128,
    /// Bytes of user data written by Write.
    pub bytes_written: u128,
    /// Read and Compare commands completed.
    pub host_read_commands: u128,
    /// Write, Write Uncorrectable and Write Zeroes commands completed.
    pub host_write_commands: u128,
    /// Unrecovered data integrity errors reported (Unrecovered Read Error).
    pub media_errors: u128,
    /// Power Cycles: 1 for the first power-on, then one per power-on after a cut.
    pub power_cycles: u128,
    /// Unsafe Shutdowns: power lost without a completed shutdown (CSTS.SHST 10b).
    pub unsafe_shutdowns: u128,
}

/// A simulated NVM subsystem with one controller per port of its profile.
pub struct Subsystem {
    profile: Profile,
    quirks: Quirks,
    /// Indexed by NSID − 1; `None` is an unallocated NSID. Length is the NN the
    /// subsystem really supports (the profile's `max_namespaces`).
    namespaces: Vec<Option<Namespace>>,
    /// The controller the command running arrived on (see the module's "Controllers").
    controller: ControllerState,
    /// The subsystem's other controllers, one swapped with `controller` when a command
    /// arrives on it ([`Subsystem::select`]).
    others: Vec<ControllerState>,
    /// Bumped for every namespace created, so NGUID and EUI64 are never reused.
    next_uid: u64,
    /// Quirk `deleted-namespace-stays-allocated`: deleted NSIDs CNS 10h still lists.
    ghosts: Vec<u32>,
    /// Quirk `controller-list-stale-after-detach`: (NSID, CNTLID) detached that CNS 12h
    /// still lists.
    stale_attached: Vec<(u32, u16)>,
    /// Quirk `create-keeps-old-media`: the namespace deleted last, whose media the next
    /// namespace created takes over.
    recycled: Option<Namespace>,
    /// Quirk `identify-zero-after-attach`: NSIDs attached by a command, which CNS 00h
    /// reports as zeros.
    late_attached: Vec<u32>,
    /// Quirk `stale-read-after-write`: what each write overwrote (NSID, data media offset,
    /// bytes), returned once by the next read of it.
    stale: Vec<(u32, u64, Vec<u8>)>,
    /// Quirk `port-stale-data`: what the latest writes overwrote, newest last, at most
    /// [`io::PORT_STALE_WRITES`]: read through any controller but the writer's.
    port_stale: std::collections::VecDeque<io::PortStale>,
    /// Quirk `torn-read-under-write`: the writes in flight, by their write-back token, and
    /// what the first half of each of their blocks held before them.
    torn: Vec<io::TornWrite>,
    health: Health,
    power: power_cycle::PowerState,
    /// Media encryption keys made so far (each namespace and crypto erase takes a new one).
    keys_made: u64,
    /// The Sanitize operation and its status log ([`sanitize`]).
    sanitize: sanitize::SanitizeState,
    /// The clock when the command being run started ([`ControllerContext::now_ns`]).
    now_ns: u64,
    /// Firmware slots, the image being downloaded, the revision running ([`firmware`]).
    firmware: firmware::FirmwareState,
}

/// Why a subsystem could not be built from a profile.
#[derive(Debug, thiserror::Error)]
#[error("profile `{profile}`: {message}")]
pub struct BuildError {
    pub profile: String,
    pub message: String,
}

impl Subsystem {
    /// A freshly powered subsystem as the profile describes it, with its initial namespaces.
    pub fn new(profile: Profile) -> Result<Subsystem, BuildError> {
        let refuse = |message: &str| Err(BuildError { profile: profile.name.clone(), message: message.to_string() });
        if profile.lba_formats.is_empty() || profile.lba_formats.len() > 16 {
            return refuse("the LBA format table needs 1 to 16 formats");
        }
        if profile.max_namespaces == 0 || profile.namespaces.len() > profile.max_namespaces as usize {
            return refuse("max_namespaces must be at least 1 and cover the initial namespaces");
        }
        if profile.controller.max_io_queues == 0 || profile.controller.max_io_queues == 0xFFFF {
            return refuse("max_io_queues must be 1 to 65534");
        }
        let quirks = Quirks::new(&profile.quirks);
        let nn = profile.max_namespaces as usize;
        let mut namespaces = Vec::new();
        namespaces.resize_with(nn, || None);
        let cntlids = profile.controller.cntlids();
        let mut controllers = cntlids.iter().map(|c| ControllerState::new(*c, &profile));
        let Some(first) = controllers.next() else { return refuse("a subsystem needs at least one controller") };
        let others = controllers.collect();
        let mut sub = Subsystem {
            controller: first,
            others,
            profile,
            quirks,
            namespaces,
            next_uid: 1,
            ghosts: Vec::new(),
            stale_attached: Vec::new(),
            recycled: None,
            late_attached: Vec::new(),
            stale: Vec::new(),
            port_stale: Default::default(),
            torn: Vec::new(),
            health: Health { power_cycles: 1, ..Health::default() },
            power: power_cycle::PowerState::default(),
            keys_made: 0,
            sanitize: sanitize::SanitizeState::default(),
            now_ns: 0,
            firmware: firmware::FirmwareState::default(),
        };
        sub.firmware = firmware::FirmwareState::new(&sub.profile.identity.firmware);
        sub.firmware.speed_percent = sub.profile.firmware.as_ref().and_then(|m| m.speed_percent(&sub.firmware.running));
        let initial = sub.profile.namespaces.clone();
        for (i, ns) in initial.iter().enumerate() {
            let index =
                sub.profile.lba_formats.iter().position(|f| f.lbads == ns.lbads && f.ms == ns.ms).ok_or_else(|| {
                    BuildError {
                        profile: sub.profile.name.clone(),
                        message: format!("namespace {} has no LBA format {}+{}", i + 1, ns.lbads, ns.ms),
                    }
                })?;
            let nsid = i as u32 + 1;
            let mut created = sub.make_namespace(nsid, index as u8, ns.extended, ns.blocks);
            created.shared = !sub.profile.private_namespaces.contains(&nsid);
            if let Some(model) = sub.ana() {
                created.anagrpid = model.group_for(nsid, 0).unwrap_or(1);
            }
            if ns.attached {
                // A shared namespace on every controller, a private one on the first.
                let reach = if created.shared { cntlids.len() } else { 1 };
                created.attached.extend(&cntlids[..reach]);
            }
            sub.namespaces[i] = Some(created);
        }
        Ok(sub)
    }

    /// A subsystem for a shipped profile (for tests and the default target).
    pub fn builtin(name: &str) -> Result<Subsystem, String> {
        let profile = Profile::builtin(name).map_err(|e| e.to_string())?;
        Subsystem::new(profile).map_err(|e| e.to_string())
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    pub fn quirks(&self) -> &Quirks {
        &self.quirks
    }

    pub fn version(&self) -> Version {
        self.profile.version
    }

    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The state of the controller the last command ran on.
    pub fn controller(&self) -> &ControllerState {
        &self.controller
    }

    /// The state of controller `cntlid`, if the subsystem has it.
    pub fn controller_state(&self, cntlid: u16) -> Option<&ControllerState> {
        std::iter::once(&self.controller).chain(&self.others).find(|c| c.cntlid == cntlid)
    }

    fn controller_state_mut(&mut self, cntlid: u16) -> Option<&mut ControllerState> {
        std::iter::once(&mut self.controller).chain(&mut self.others).find(|c| c.cntlid == cntlid)
    }

    /// Makes controller `cntlid` the one commands act for (the first controller for a
    /// CNTLID the subsystem does not have).
    fn select(&mut self, cntlid: u16) {
        if self.controller.cntlid == cntlid {
            return;
        }
        let find = |id: u16| self.others.iter().position(|c| c.cntlid == id);
        let first = self.profile.controller.cntlid;
        let index = find(cntlid).or_else(|| if self.controller.cntlid == first { None } else { find(first) });
        if let Some(i) = index {
            std::mem::swap(&mut self.controller, &mut self.others[i]);
        }
    }

    /// Whether the subsystem has two or more controllers (CMIC bits 0 and 1: one port each).
    pub fn multiple_controllers(&self) -> bool {
        !self.others.is_empty()
    }

    /// The firmware slots and the revision running.
    pub fn firmware(&self) -> &firmware::FirmwareState {
        &self.firmware
    }

    /// The allocated namespace `nsid`, attached or not.
    pub fn namespace(&self, nsid: u32) -> Option<&Namespace> {
        let index = (nsid as usize).checked_sub(1)?;
        self.namespaces.get(index)?.as_ref()
    }

    fn namespace_mut(&mut self, nsid: u32) -> Option<&mut Namespace> {
        let index = (nsid as usize).checked_sub(1)?;
        self.namespaces.get_mut(index)?.as_mut()
    }

    /// The number of NSIDs the subsystem supports (valid NSIDs are 1..=this).
    pub fn max_nsid(&self) -> u32 {
        self.namespaces.len() as u32
    }

    /// Whether `nsid` is a valid NSID: 1 to NN (§6.1.2 "Valid and Invalid NSIDs").
    pub fn is_valid_nsid(&self, nsid: u32) -> bool {
        nsid >= 1 && nsid <= self.max_nsid()
    }

    /// Whether `nsid` is active on the controller the command runs on: allocated and attached.
    pub fn is_active(&self, nsid: u32) -> bool {
        self.namespace(nsid).is_some_and(|ns| ns.is_attached_to(self.controller.cntlid))
    }

    /// The active NSIDs, increasing.
    pub fn active_nsids(&self) -> Vec<u32> {
        let cntlid = self.controller.cntlid;
        self.namespaces.iter().flatten().filter(|ns| ns.is_attached_to(cntlid)).map(|ns| ns.nsid).collect()
    }

    /// The allocated NSIDs, increasing.
    pub fn allocated_nsids(&self) -> Vec<u32> {
        self.namespaces.iter().flatten().map(|ns| ns.nsid).collect()
    }

    /// The CNTLIDs of the subsystem's controllers, increasing.
    pub fn controller_ids(&self) -> Vec<u16> {
        self.profile.controller.cntlids()
    }

    /// Capacity taken by allocated namespaces, in bytes.
    pub fn allocated_bytes(&self) -> u128 {
        self.namespaces.iter().flatten().map(|ns| ns.capacity_bytes()).sum()
    }

    /// UNVMCAP: capacity not allocated to any namespace.
    pub fn unallocated_bytes(&self) -> u128 {
        (self.profile.capacity_bytes as u128).saturating_sub(self.allocated_bytes())
    }

    pub fn supports(&self, command: OptionalCommand) -> bool {
        self.profile.supports(command)
    }

    /// The fill byte of deallocated blocks.
    fn fill_byte(&self) -> u8 {
        self.profile.dlfeat.fill_byte()
    }

    /// The media stride of one LBA for a format: its data size, except that under
    /// `Quirk::Format4096Addresses512` a 4096-byte format advances 512 bytes per LBA, and
    /// under `Quirk::Format512Addresses4096` a 512-byte format advances 4096.
    fn lba_stride(&self, data_size: u32) -> u64 {
        if self.quirks.has(Quirk::Format4096Addresses512) && data_size == 4096 {
            // Quirk: LBA n of a 4096-byte namespace starts at byte n × 512 (§6.1, Figure 246 broken).
            return 512;
        }
        if self.quirks.has(Quirk::Format512Addresses4096) && data_size == 512 {
            // Quirk: LBA n of a 512-byte namespace starts at byte n × 4096, and a transfer
            // runs on contiguously from there (§6.1, Figure 246 broken).
            return 4096;
        }
        data_size as u64
    }

    /// The resolved format for LBA format `index` (which the caller checked exists).
    fn resolve_format(&self, index: u8, extended: bool) -> Format {
        let f = self.profile.lba_formats.get(index as usize).copied().unwrap_or(self.profile.lba_formats[0]);
        Format { index, data_size: f.lbads, ms: f.ms, extended: extended && f.ms > 0 }
    }

    /// A new, empty namespace with fresh unique identifiers.
    fn make_namespace(&mut self, nsid: u32, format_index: u8, extended: bool, nsze: u64) -> Namespace {
        let format = self.resolve_format(format_index, extended);
        let (nguid, eui64) = self.unique_ids(self.next_uid);
        self.next_uid += 1;
        let key = self.new_key();
        let mut ns = Namespace::new(nsid, format, nsze, self.fill_byte(), (nguid, eui64), key);
        let stride = self.lba_stride(format.data_size);
        if stride != ns.lba_stride {
            ns.set_stride(stride);
        }
        ns
    }

    /// A fresh media encryption key, when the drive encrypts (`erase.encryption`).
    fn new_key(&mut self) -> Option<crypt::Key> {
        if !self.profile.erase.encryption {
            return None;
        }
        self.keys_made += 1;
        Some(crypt::Key::derive(fnv1a(self.profile.identity.serial.as_bytes()), self.keys_made))
    }

    /// NGUID and EUI64 for the `uid`-th namespace created (§7.11 "Unique Identifier"):
    /// the IEEE OUI, bits of the serial number, and the creation counter.
    fn unique_ids(&self, uid: u64) -> ([u8; 16], [u8; 8]) {
        let oui = self.profile.identity.ieee_oui.to_be_bytes();
        let serial = fnv1a(self.profile.identity.serial.as_bytes()).to_be_bytes();
        let count = uid.to_be_bytes();
        let mut nguid = [0u8; 16];
        // Vendor Specific Extension Identifier (bytes 0–7), OUI (8–10), Extension Identifier (11–15).
        nguid[..8].copy_from_slice(&count);
        nguid[8..11].copy_from_slice(&oui[1..4]);
        nguid[11..16].copy_from_slice(&serial[3..8]);
        let mut eui64 = [0u8; 8];
        // OUI (bytes 0–2), then a 40-bit extension: 16 bits of the serial, 24 of the counter.
        eui64[..3].copy_from_slice(&oui[1..4]);
        eui64[3..5].copy_from_slice(&serial[6..8]);
        eui64[5..8].copy_from_slice(&count[5..8]);
        (nguid, eui64)
    }

    /// The largest transfer MDTS allows, in bytes (`None`: no limit). MDTS is in units of
    /// the minimum memory page size, CAP.MPSMIN, which the simulated controller reports as 4 KiB.
    pub fn max_transfer_bytes(&self) -> Option<u64> {
        match self.profile.controller.mdts {
            0 => None,
            mdts => Some(4096u64 << mdts),
        }
    }

    /// Records a failed command in the Error Information log.
    fn record(&mut self, cmd: &Command, done: Done) -> Done {
        if !done.status.is_success() {
            self.controller.errors.record(cmd, done.status);
        }
        done
    }
}

impl CommandSet for Subsystem {
    fn admin(&mut self, ctx: &mut ControllerContext, cmd: &Command, data: &dyn DataPointer) -> Done {
        self.select(ctx.cntlid);
        self.now_ns = ctx.now_ns;
        self.sanitize_progress(ctx);
        if let Some(refused) = self.sanitize_restriction(cmd, true) {
            return self.record(cmd, Done::err(refused));
        }
        if let Some(refused) = self.ana_refusal(cmd, true) {
            return self.record(cmd, Done::retryable(refused));
        }
        let done = match AdminOpcode::from_u8(cmd.opcode) {
            Some(AdminOpcode::Identify) => self.identify(cmd, data),
            Some(AdminOpcode::GetLogPage) => self.get_log_page(cmd, data),
            Some(AdminOpcode::GetFeatures) => self.get_features(ctx, cmd, data),
            Some(AdminOpcode::SetFeatures) => self.set_features(ctx, cmd, data),
            // Quirk `namespace-management-not-implemented`: OACS bit 3 set, opcode 0Dh unknown.
            Some(AdminOpcode::NamespaceManagement)
                if self.supports(OptionalCommand::NamespaceManagement)
                    && !self.quirks.has(Quirk::NamespaceManagementNotImplemented) =>
            {
                self.namespace_management(ctx, cmd, data)
            }
            Some(AdminOpcode::NamespaceAttachment) if self.supports(OptionalCommand::NamespaceManagement) => {
                self.namespace_attachment(ctx, cmd, data)
            }
            Some(AdminOpcode::FormatNvm) if self.supports(OptionalCommand::FormatNvm) => self.format_nvm(ctx, cmd),
            Some(AdminOpcode::Sanitize) if self.profile.erase.sanitize.is_some() => self.sanitize(ctx, cmd),
            Some(AdminOpcode::FirmwareImageDownload) if self.profile.firmware.is_some() => {
                self.firmware_image_download(cmd, data)
            }
            Some(AdminOpcode::FirmwareCommit) if self.profile.firmware.is_some() => self.firmware_commit(ctx, cmd),
            _ => Done::err(Status::INVALID_COMMAND_OPCODE),
        };
        self.record(cmd, done)
    }

    fn io(&mut self, ctx: &mut ControllerContext, cmd: &Command, data: &dyn DataPointer) -> Done {
        self.select(ctx.cntlid);
        self.now_ns = ctx.now_ns;
        ctx.service_percent = self.firmware.speed_percent;
        self.sanitize_progress(ctx);
        if let Some(refused) = self.sanitize_restriction(cmd, false) {
            return self.record(cmd, Done::err(refused));
        }
        if self.activation_fails_io() {
            return self.record(cmd, Done::err(Status::INTERNAL_ERROR));
        }
        if self.quirks.has(Quirk::PortDownStallsOthers) && self.others.iter().any(|c| c.link_down) {
            // Quirk `port-down-stalls-others`: another port's link down fails this one's
            // I/O (§2.4.1 Multi-Path I/O broken).
            return self.record(cmd, Done::err(Status::NAMESPACE_NOT_READY));
        }
        if let Some(refused) = self.ana_refusal(cmd, false) {
            // The path this controller offers to the namespace's ANA group (§8.20.3): DNR
            // clear, the host may retry on another path.
            return self.record(cmd, Done::retryable(refused));
        }
        if let Some(conflict) = self.reservation_conflict(cmd) {
            return self.record(cmd, Done::err(conflict));
        }
        let done = self.nvm_command(cmd, data);
        let writes = [NvmOpcode::Write, NvmOpcode::WriteZeroes, NvmOpcode::WriteUncorrectable];
        if done.status.is_success() && writes.iter().any(|op| *op as u8 == cmd.opcode) {
            self.sanitize.data_written();
        }
        ctx.change = self.power.pending.take();
        self.record(cmd, done)
    }

    fn take_events(&mut self, cntlid: u16) -> Vec<AsyncEvent> {
        match self.controller_state_mut(cntlid) {
            Some(c) if !c.events.is_empty() => std::mem::take(&mut c.events),
            _ => Vec::new(),
        }
    }

    fn change_completed(&mut self, token: u64) {
        // Quirk `torn-read-under-write`: the write is no longer being written.
        self.torn.retain(|t| t.token != token);
        let cache_bytes = self.cache_bytes();
        self.power.writeback.completed(token, cache_bytes);
    }

    fn shutdown(&mut self, _cntlid: u16) -> bool {
        self.shut_down()
    }

    fn port_link(&mut self, cntlid: u16, up: bool) {
        if let Some(c) = self.controller_state_mut(cntlid) {
            c.link_down = !up;
        }
    }

    fn set_ana_state(&mut self, cntlid: u16, anagrpid: u32, state: u8) -> Result<(), String> {
        self.change_ana_state(cntlid, anagrpid, state)
    }

    fn power_cut(&mut self, seed: u64) {
        self.cut_power(seed);
    }

    fn power_on(&mut self) -> u64 {
        Subsystem::power_on(self)
    }

    fn work(&self, cmd: &Command) -> crate::service::Work {
        // Asked before `io` selects the controller: a namespace attached to any controller.
        let block =
            self.namespace(cmd.nsid).filter(|ns| !ns.attached.is_empty()).map_or(512, |ns| ns.format.host_block_size());
        crate::service::Work::of_blocks(cmd, block)
    }

    fn controller_enabled(&mut self, cntlid: u16) {
        // The reset is this controller's: the others keep their features.
        self.select(cntlid);
        // A Controller Level Reset (or the first enable after power-on) runs the firmware
        // committed for the next reset (§5.12).
        let powered_on = std::mem::take(&mut self.firmware.powered_on);
        self.firmware_reset(powered_on);
        // The Arbitration feature returns to its default with a Controller Reset (the
        // queue engine's arbiter does the same).
        self.controller.features.arbitration = nvme::spec::features::Arbitration::new();
        if self.quirks.has(Quirk::DetachUndoneByReset) {
            // Quirk: a detach does not survive the reset (§5.19 broken).
            for ns in self.namespaces.iter_mut().flatten() {
                if !ns.is_attached_to(cntlid) {
                    ns.attached.push(cntlid);
                }
            }
        }
    }
}

/// FNV-1a: a small stable hash for deriving identifiers from the serial number.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01B3))
}
