//! Namespace Management (admin 0Dh, NVMe 1.4 §5.20), Namespace Attachment (admin 15h,
//! §5.19) and Format NVM (admin 80h, §5.23): creating, deleting, attaching, detaching
//! and formatting namespaces, with the statuses those sections assign, and the
//! Namespace Attribute Changed notices they cause (§8.11).
//!
//! Every check runs before anything changes: a command that fails leaves the subsystem
//! as it was.
//!
//! With several controllers (CMIC bit 1) a namespace may be created shared (NMIC bit 0)
//! and attached to any of them; a private one to one controller at a time. A change to
//! a namespace is noticed by every controller it is attached to, whichever controller
//! the command came through.

use super::{Quirk, Subsystem, NSID_ALL};
use crate::exec::{ControllerContext, DataPointer, Done};
use nvme::spec::identify::{ControllerList, IdentifyNamespace};
use nvme::spec::namespace::{FormatNvm, NamespaceAttachmentSel, NamespaceManagementSel, SecureErase};
use nvme::spec::{Command, Status};
use zerocopy::FromBytes;

/// Size of the data buffer of Namespace Management create and Namespace Attachment.
const DATA_SIZE: usize = 4096;

impl Subsystem {
    /// Namespace Management (§5.20): create (SEL 0h) or delete (SEL 1h).
    pub(super) fn namespace_management(
        &mut self,
        ctx: &mut ControllerContext,
        cmd: &Command,
        data: &dyn DataPointer,
    ) -> Done {
        match NamespaceManagementSel::from(cmd) {
            NamespaceManagementSel::Create => match self.create_namespace(data) {
                Ok(nsid) => Done::ok_with(nsid),
                Err(s) => Done::err(s),
            },
            NamespaceManagementSel::Delete => match self.delete_namespace(ctx, cmd.nsid) {
                Ok(()) => Done::ok(),
                Err(s) => Done::err(s),
            },
            NamespaceManagementSel::Reserved(_) => Done::err(Status::INVALID_FIELD),
        }
    }

    /// Create: the host-specified fields of an Identify Namespace structure (NSZE, NCAP,
    /// FLBAS, DPS, NMIC) describe the namespace. Returns the NSID allocated; the new
    /// namespace is attached to no controller. NMIC bit 0 (shared) needs a subsystem of
    /// two or more controllers (CMIC bit 1).
    fn create_namespace(&mut self, data: &dyn DataPointer) -> Result<u32, Status> {
        let bytes = data.copy_from_host(DATA_SIZE)?;
        let spec = IdentifyNamespace::read_from_bytes(&bytes).map_err(|_| Status::INTERNAL_ERROR)?;
        let nlbaf = self.profile.lba_formats.len() as u8 - 1;
        let mut index = spec.flbas_index();
        if index > nlbaf {
            if !self.quirks.has(Quirk::FormatInvalidLbafAccepted) {
                return Err(Status::INVALID_FORMAT);
            }
            // Quirk: an FLBAS index beyond NLBAF is taken as format 0 (§5.20 Invalid Format broken).
            index = 0;
        }
        // No end-to-end protection (DPC is 0): any protection type is a format we lack.
        if spec.dps.pit() != 0 {
            return Err(Status::INVALID_FORMAT);
        }
        // One controller (CMIC bit 1 clear): a shared namespace cannot be created.
        if spec.nmic.shared() && !self.multiple_controllers() {
            return Err(Status::INVALID_FIELD);
        }
        if spec.nsze == 0 || spec.ncap > spec.nsze {
            return Err(Status::INVALID_FIELD);
        }
        // NSFEAT.THINP is clear: NCAP must equal NSZE.
        if spec.ncap < spec.nsze {
            return Err(Status::THIN_PROVISIONING_NOT_SUPPORTED);
        }
        if self.quirks.has(Quirk::LbafWrongSize) && self.profile.lba_formats[index as usize].lbads == 4096 {
            // Quirk: a 4096-byte format request gets a 512-byte format (§5.20 FLBAS broken).
            let ms = self.profile.lba_formats[index as usize].ms;
            let formats = &self.profile.lba_formats;
            let small = formats.iter().position(|f| f.lbads == 512 && f.ms == ms);
            if let Some(i) = small.or_else(|| formats.iter().position(|f| f.lbads == 512)) {
                index = i as u8;
            }
        }
        let data_size = self.profile.lba_formats[index as usize].lbads as u128;
        let Some(slot) = self.namespaces.iter().position(|n| n.is_none()) else {
            if self.quirks.has(Quirk::NsidExhaustionInternalError) {
                // Quirk: Internal Error instead of Namespace Identifier Unavailable (Figure 268 broken).
                return Err(Status::INTERNAL_ERROR);
            }
            return Err(Status::NAMESPACE_ID_UNAVAILABLE);
        };
        let needed = spec.nsze as u128 * data_size;
        if needed > self.unallocated_bytes() {
            // Quirk `create-beyond-capacity`: up to twice TNVMCAP is handed out (§5.20 broken).
            let overcommit = 2 * self.profile.capacity_bytes as u128;
            if !self.quirks.has(Quirk::CreateBeyondCapacity) || self.allocated_bytes() + needed > overcommit {
                return Err(Status::NAMESPACE_INSUFFICIENT_CAPACITY);
            }
        }
        let nsid = slot as u32 + 1;
        // ANAGRPID (ANACAP bit 7): the group asked for, or one the controller picks.
        let anagrpid = match self.ana() {
            Some(model) => model.group_for(nsid, spec.anagrpid)?,
            None => 0,
        };
        let mut ns = self.make_namespace(nsid, index, spec.extended_metadata(), spec.nsze);
        ns.shared = spec.nmic.shared();
        ns.anagrpid = anagrpid;
        if self.quirks.has(Quirk::CreateKeepsOldMedia) {
            if let Some(old) = self.recycled.take() {
                // Quirk: the old namespace's bytes show through (§6.7.1.1 broken).
                ns.inherit_media(old);
            }
        }
        self.ghosts.retain(|n| *n != nsid);
        self.namespaces[slot] = Some(ns);
        Ok(nsid)
    }

    /// Delete: the namespace `nsid`, or every allocated namespace for FFFFFFFFh. A
    /// namespace attached to controllers is detached from them first, which each is told of.
    fn delete_namespace(&mut self, ctx: &mut ControllerContext, nsid: u32) -> Result<(), Status> {
        let victims: Vec<u32> = if nsid == NSID_ALL {
            if self.quirks.has(Quirk::DeleteBroadcastIgnored) {
                // Quirk: FFFFFFFFh succeeds and deletes nothing (§5.20 broken).
                return Ok(());
            }
            self.ghosts.clear();
            self.allocated_nsids()
        } else if !self.is_valid_nsid(nsid) {
            return Err(Status::INVALID_NAMESPACE_OR_FORMAT);
        } else if self.namespace(nsid).is_some() {
            if self.quirks.has(Quirk::DeletedNamespaceStaysAllocated) {
                // Quirk: CNS 10h keeps the deleted NSID (§5.20 broken).
                self.ghosts.push(nsid);
            }
            vec![nsid]
        } else if self.quirks.has(Quirk::DeleteUnallocatedSucceeds) {
            // Quirk: deleting an unallocated NSID succeeds (§5.20 Invalid Field broken).
            return Ok(());
        } else {
            return Err(Status::INVALID_FIELD);
        };
        for nsid in victims {
            let was_attached = self.namespace(nsid).map(|ns| ns.attached.clone()).unwrap_or_default();
            self.power.writeback.forget(nsid);
            self.forget_port_stale(nsid);
            if let Some(old) = self.namespaces.get_mut(nsid as usize - 1).and_then(Option::take) {
                if self.quirks.has(Quirk::CreateKeepsOldMedia) {
                    self.recycled = Some(old);
                }
            }
            self.stale_attached.retain(|(n, _)| *n != nsid);
            self.late_attached.retain(|n| *n != nsid);
            for cntlid in was_attached {
                self.namespace_changed_on(&mut ctx.events, nsid, cntlid);
            }
        }
        Ok(())
    }

    /// Namespace Attachment (§5.19): attach (SEL 0h) or detach (SEL 1h) the namespace
    /// to or from the controllers of a Controller List.
    pub(super) fn namespace_attachment(
        &mut self,
        ctx: &mut ControllerContext,
        cmd: &Command,
        data: &dyn DataPointer,
    ) -> Done {
        match self.attachment(ctx, cmd, data) {
            Ok(()) => Done::ok(),
            Err(s) => Done::err(s),
        }
    }

    fn attachment(&mut self, ctx: &mut ControllerContext, cmd: &Command, data: &dyn DataPointer) -> Result<(), Status> {
        let attach = match NamespaceAttachmentSel::from(cmd) {
            NamespaceAttachmentSel::Attach => true,
            NamespaceAttachmentSel::Detach => false,
            NamespaceAttachmentSel::Reserved(_) => return Err(Status::INVALID_FIELD),
        };
        let nsid = cmd.nsid;
        if nsid == NSID_ALL {
            return Err(Status::INVALID_FIELD);
        }
        if !self.is_valid_nsid(nsid) {
            return Err(Status::INVALID_NAMESPACE_OR_FORMAT);
        }
        if self.namespace(nsid).is_none() {
            return Err(Status::INVALID_FIELD);
        }
        let bytes = data.copy_from_host(DATA_SIZE)?;
        let list = ControllerList::read_from_bytes(&bytes).map_err(|_| Status::INTERNAL_ERROR)?;
        let ids = self.controller_list(&list)?;
        let Some(ns) = self.namespace(nsid) else { return Err(Status::INVALID_FIELD) };
        // Every check first, then the change.
        let mut changes = Vec::new();
        for id in &ids {
            let attached = ns.is_attached_to(*id);
            if attach {
                if attached {
                    if self.quirks.has(Quirk::AttachTwiceSucceeds) {
                        // Quirk: attaching an attached namespace succeeds (Figure 267 broken).
                        continue;
                    }
                    return Err(Status::NAMESPACE_ALREADY_ATTACHED);
                }
                // A private namespace (NMIC bit 0 clear) is attached to one controller at most
                // (§5.19, Figure 267: Namespace Is Private).
                // Quirk `private-namespace-attached-twice`: it is attached all the same
                // (§5.19, Figure 267 Namespace Is Private broken).
                let private = !ns.shared && !self.quirks.has(Quirk::PrivateNamespaceAttachedTwice);
                if private && (!ns.attached.is_empty() || ids.len() > 1) {
                    return Err(Status::NAMESPACE_IS_PRIVATE);
                }
            } else if !attached {
                if self.quirks.has(Quirk::DetachUnattachedSucceeds) {
                    // Quirk: detaching a detached namespace succeeds (Figure 267 broken).
                    continue;
                }
                if self.quirks.has(Quirk::FatalOnDetachUnattached) {
                    // Quirk: the controller fails (CSTS.CFS) instead of completing (§4.6 broken).
                    ctx.fatal = true;
                    return Ok(());
                }
                return Err(Status::NAMESPACE_NOT_ATTACHED);
            }
            changes.push(*id);
        }
        let lose_data = !attach && !changes.is_empty() && self.quirks.has(Quirk::DetachLosesData);
        if lose_data {
            self.power.writeback.forget(nsid);
        }
        let Some(ns) = self.namespace_mut(nsid) else { return Err(Status::INVALID_FIELD) };
        if lose_data {
            // Quirk: detaching deallocates every block (§8.11 / §5.19 broken).
            ns.erase();
        }
        for id in &changes {
            if attach {
                ns.attached.push(*id);
            } else {
                ns.attached.retain(|c| c != id);
            }
        }
        if attach && !changes.is_empty() && self.quirks.has(Quirk::IdentifyZeroAfterAttach) {
            self.late_attached.push(nsid);
        } else if !attach {
            self.late_attached.retain(|n| *n != nsid);
        }
        if self.quirks.has(Quirk::ControllerListStaleAfterDetach) {
            // Quirk: CNS 12h keeps the detached controllers (§5.15.2.1 broken).
            for id in &changes {
                if attach {
                    self.stale_attached.retain(|e| *e != (nsid, *id));
                } else {
                    self.stale_attached.push((nsid, *id));
                }
            }
        }
        // Each controller attached or detached notices it, whichever port the command came on.
        for id in changes {
            self.namespace_changed_on(&mut ctx.events, nsid, id);
        }
        Ok(())
    }

    /// The controllers a Controller List names: at least one, at most 2047, no repeats,
    /// each a controller of this subsystem — else Controller List Invalid.
    fn controller_list(&self, list: &ControllerList) -> Result<Vec<u16>, Status> {
        if list.numid == 0 || list.numid as usize > ControllerList::MAX {
            return Err(Status::CONTROLLER_LIST_INVALID);
        }
        let ids: Vec<u16> = list.ids().collect();
        let known = self.controller_ids();
        for (i, id) in ids.iter().enumerate() {
            if !known.contains(id) || ids[..i].contains(id) {
                return Err(Status::CONTROLLER_LIST_INVALID);
            }
        }
        Ok(ids)
    }

    /// Format NVM (§5.23): the namespace (or, for FFFFFFFFh, every attached namespace)
    /// takes the LBA format and metadata setting asked for, keeps its capacity in bytes,
    /// and every block is deallocated. Secure Erase Settings: none, User Data Erase, and
    /// Cryptographic Erase when FNA bit 2 is set (the namespace's key is replaced). FNA
    /// bit 0 widens the format to every namespace; bit 1 widens a secure erase to every
    /// namespace (which keep their formats).
    pub(super) fn format_nvm(&mut self, ctx: &mut ControllerContext, cmd: &Command) -> Done {
        match self.format_namespaces(ctx, cmd) {
            Ok(()) => Done::ok(),
            Err(s) => Done::err(s),
        }
    }

    fn format_namespaces(&mut self, ctx: &mut ControllerContext, cmd: &Command) -> Result<(), Status> {
        let settings = FormatNvm::from_command(cmd);
        let fna = self.profile.erase.fna();
        let targets = if cmd.nsid == NSID_ALL {
            self.active_nsids()
        } else if !self.is_active(cmd.nsid) {
            return Err(Status::INVALID_NAMESPACE_OR_FORMAT);
        } else if fna.format_all_namespaces() {
            self.allocated_nsids()
        } else {
            vec![cmd.nsid]
        };
        let nlbaf = self.profile.lba_formats.len() as u8 - 1;
        if settings.lbaf() > nlbaf {
            if self.quirks.has(Quirk::FormatInvalidLbafAccepted) {
                // Quirk: an LBAF beyond NLBAF succeeds and changes nothing (Figure 273 broken).
                return Ok(());
            }
            return Err(Status::INVALID_FORMAT);
        }
        if self.quirks.has(Quirk::FormatRejectsAdvertisedLbaf) && nlbaf > 0 && settings.lbaf() == nlbaf {
            // Quirk: a format of the table refused (Figure 245 LBAF, §5.23 broken).
            return Err(Status::INVALID_FORMAT);
        }
        // No end-to-end protection information (DPC is 0).
        if settings.pi() != 0 {
            return Err(Status::INVALID_FORMAT);
        }
        let ses = settings.ses();
        match ses {
            SecureErase::None | SecureErase::UserData => {}
            SecureErase::Cryptographic if fna.crypto_erase() => {}
            SecureErase::Cryptographic | SecureErase::Reserved(_) => return Err(Status::INVALID_FIELD),
        }
        if self.quirks.has(Quirk::FormatIgnored) {
            // Quirk: success without formatting (§5.23 broken).
            return Ok(());
        }
        let format = self.resolve_format(settings.lbaf(), settings.mset());
        let stride = self.lba_stride(format.data_size);
        let fill = self.fill_byte();
        // A namespace too small for one block of the new size cannot take the format.
        for nsid in &targets {
            if self.namespace(*nsid).is_some_and(|ns| ns.capacity_bytes() < format.data_size as u128) {
                return Err(Status::INVALID_FORMAT);
            }
        }
        let crypto = ses == SecureErase::Cryptographic;
        if crypto && self.quirks.has(Quirk::CryptoEraseLeavesPlaintext) {
            // Quirk: success, the key kept and nothing erased (§5.23 SES 010b broken).
            return Ok(());
        }
        // The namespaces a secure erase reaches beyond the formatted ones.
        let erase_all = fna.secure_erase_all_namespaces() || self.quirks.has(Quirk::SecureEraseBeyondScope);
        let erased_too: Vec<u32> = if ses != SecureErase::None && erase_all {
            // Quirk `secure-erase-beyond-scope`: all namespaces although FNA bit 1 is clear (Figure 247 broken).
            self.allocated_nsids().into_iter().filter(|n| !targets.contains(n)).collect()
        } else {
            Vec::new()
        };
        let keep_data = self.quirks.has(Quirk::FormatKeepsData);
        let this = self.controller.cntlid;
        // Quirks `erase-spares-last-blocks`, `erase-spares-interior-band`: a secure erase
        // leaves blocks as they were (§5.23 broken).
        let quirks = self.quirks.clone();
        let spared_of = |ns: &super::namespace::Namespace| {
            if ses != SecureErase::None {
                super::quirk::erase_spared(&quirks, ns)
            } else {
                Vec::new()
            }
        };
        for nsid in targets {
            let key = if crypto { self.new_key() } else { None };
            let Some(ns) = self.namespace_mut(nsid) else { continue };
            let spared = spared_of(ns);
            let bytes = ns.capacity_bytes();
            let nsze = (bytes / format.data_size as u128) as u64;
            let changed = ns.format != format || ns.nsze != nsze;
            if !changed && keep_data && ses == SecureErase::None {
                // Quirk: nothing happens, the data stays (§5.23 broken).
                continue;
            }
            if let Some(key) = key {
                ns.crypto_erase(key);
            }
            ns.reformat(format, nsze, stride, fill);
            if !changed {
                ns.put_back(&spared);
            }
            let others: Vec<u16> = ns.attached.iter().copied().filter(|c| *c != this).collect();
            self.power.writeback.forget(nsid);
            self.forget_port_stale(nsid);
            if changed {
                self.namespace_changed(&mut ctx.events, nsid);
                // The other controllers it is attached to see the new format too.
                for cntlid in others {
                    self.namespace_changed_on(&mut ctx.events, nsid, cntlid);
                }
            }
        }
        for nsid in erased_too {
            let key = if crypto { self.new_key() } else { None };
            let Some(ns) = self.namespace_mut(nsid) else { continue };
            let spared = spared_of(ns);
            if let Some(key) = key {
                ns.crypto_erase(key);
            }
            ns.erase();
            ns.put_back(&spared);
            self.power.writeback.forget(nsid);
            self.forget_port_stale(nsid);
        }
        Ok(())
    }
}
