//! The admin command set of the clean profiles: Identify, Get Log Page, Get/Set
//! Features, Namespace Management, Namespace Attachment and Format NVM, each with its
//! successful results and every error status the spec assigns it.

use nvme::spec::features::{self, AsyncEventConfiguration, FeatureCapabilities, FeatureId, NumberOfQueues, Select};
use nvme::spec::identify::{
    parse_descriptor_list, Cns, ControllerList, DeallocatedRead, Dps, Flbas, FlushBroadcast, IdentifyController,
    IdentifyNamespace, Nmic, NsDescriptor,
};
use nvme::spec::log::{
    ChangedNamespaceList, CommandsSupportedAndEffects, ErrorInformationEntry, FirmwareSlotLog, LogPageId,
    SmartHealthLog,
};
use nvme::spec::namespace::{self, FormatNvm, SecureErase};
use nvme::spec::{nvm, AdminOpcode, Command, NvmOpcode, Status, Version};
use nvme_sim::exec::Done;
use nvme_sim::profile::{InitialNamespace, Profile};
use nvme_sim::subsystem::testing::TestHost;
use nvme_sim::subsystem::Subsystem;
use zerocopy::{FromBytes, IntoBytes};

/// The shipped profile `name`, scaled to 64 MiB with a 512-byte namespace of 8192
/// blocks and a 4096-byte one of 1024 blocks, both attached.
fn drive(name: &str) -> (Subsystem, TestHost) {
    let mut p = Profile::builtin(name).unwrap();
    p.capacity_bytes = 64 << 20;
    p.namespaces = vec![
        InitialNamespace { lbads: 512, ms: 0, extended: false, blocks: 8192, attached: true },
        InitialNamespace { lbads: 4096, ms: 0, extended: false, blocks: 1024, attached: true },
    ];
    (Subsystem::new(p).unwrap(), TestHost::new(1))
}

fn drive14() -> (Subsystem, TestHost) {
    drive("enterprise-1.4")
}

#[track_caller]
fn assert_status(done: Done, expected: Status) {
    assert!(done.status.same_code(&expected), "expected {expected}, got {}", done.status);
    if !expected.is_success() {
        assert!(done.status.dnr, "errors a retry cannot fix carry DNR: {}", done.status);
    }
}

fn flbas(index: u8) -> Flbas {
    Flbas::new().with_format(index)
}

fn enable_namespace_notices(sub: &mut Subsystem, host: &mut TestHost) {
    let aec = AsyncEventConfiguration::new().with_namespace_attribute_notices(true);
    let done = host.admin(sub, &features::set_features(FeatureId::AsyncEventConfiguration, false, 0, aec.into()));
    assert_status(done, Status::SUCCESS);
}

// ---------------------------------------------------------------------------------------
// Identify
// ---------------------------------------------------------------------------------------

#[test]
fn identify_controller_reports_the_profile() {
    let (mut sub, mut host) = drive14();
    let id: IdentifyController = host.identify_controller(&mut sub);
    assert_eq!(id.vid, 0x5354);
    assert_eq!(id.serial().text, "NVT14E00000000000001");
    assert!(id.serial().is_clean() && id.model().is_clean() && id.firmware().is_clean());
    assert_eq!(id.firmware().text, "NVT14A01");
    assert_eq!(id.ieee, [0x54, 0x53, 0x02], "IEEE OUI least significant byte first");
    assert_eq!(id.version(), Version::V1_4);
    assert_eq!(id.mdts_bytes(4096), Some(128 << 10));
    assert_eq!(id.cntlid, 1);
    assert_eq!(id.nn, 32);
    assert!(id.oacs.format_nvm() && id.oacs.namespace_management() && id.oacs.firmware());
    assert!(id.frmw.slot1_read_only() && id.frmw.slots() == 4 && id.frmw.activation_without_reset());
    assert_eq!((id.fwug, id.mtfa), (1, 10));
    assert!(id.oncs.compare() && id.oncs.write_uncorrectable() && id.oncs.dataset_management());
    assert!(id.oncs.write_zeroes() && id.oncs.save_select() && id.oncs.verify() && id.oncs.reservations());
    assert!(id.oaes.namespace_attribute_notices());
    assert!(id.lpa.commands_supported_and_effects() && id.lpa.extended_data() && !id.lpa.smart_per_namespace());
    assert!(id.vwc.present());
    assert_eq!(id.vwc.flush_broadcast(), FlushBroadcast::Supported);
    assert_eq!(id.cntrltype, 1);
    assert_eq!(id.tnvmcap(), 64 << 20);
    assert_eq!(id.unvmcap(), (64 << 20) - 2 * (4 << 20));
    assert_eq!((id.sqes, id.cqes), (0x66, 0x44));
    assert!(id.wctemp > 0 && id.cctemp > id.wctemp);
    assert!(id.subnqn.starts_with(b"nqn.2014-08.org.nvmexpress:5354"));
    assert!(id.fna.crypto_erase() && !id.fna.format_all_namespaces() && !id.fna.secure_erase_all_namespaces());
    assert!(id.sanicap.ces() && id.sanicap.bes() && id.sanicap.ows() && !id.sanicap.ndi());
}

#[test]
fn identify_controller_at_1_2_leaves_later_fields_reserved() {
    let (mut sub, mut host) = drive("enterprise-1.2a");
    let id = host.identify_controller(&mut sub);
    assert_eq!(id.version(), Version::V1_2);
    assert_eq!(id.cntrltype, 0);
    assert_eq!(id.vwc.flush_broadcast(), FlushBroadcast::NotIndicated);
    assert!(!id.lpa.extended_data());
    assert!(id.subnqn.iter().all(|b| *b == 0));
}

#[test]
fn identify_namespace_describes_an_active_namespace() {
    let (mut sub, mut host) = drive14();
    let (done, id) = host.identify_namespace(&mut sub, 2);
    assert_status(done, Status::SUCCESS);
    assert_eq!((id.nsze, id.ncap, id.nuse), (1024, 1024, 0));
    assert_eq!(id.nlbaf, 3);
    assert_eq!(id.flbas_index(), 2);
    assert_eq!(id.lba_data_size(), Some(4096));
    assert!(id.mc.extended_lba() && id.mc.separate_buffer());
    assert_eq!(id.dlfeat.read_behavior(), DeallocatedRead::Zeroes);
    assert!(id.dlfeat.write_zeroes_deallocate());
    assert_eq!(id.nvmcap(), 4 << 20);
    assert!(id.fpi.supported());
    let (_, other) = host.identify_namespace(&mut sub, 1);
    assert_ne!(id.nguid, other.nguid);
    assert_ne!(id.eui64, other.eui64);
    assert!(id.nguid.iter().any(|b| *b != 0) && id.eui64.iter().any(|b| *b != 0));
}

#[test]
fn identify_namespace_at_1_2_reports_no_dlfeat() {
    let (mut sub, mut host) = drive("enterprise-1.2a");
    let (_, id) = host.identify_namespace(&mut sub, 1);
    assert_eq!(id.as_bytes()[33], 0, "byte 33 is reserved in 1.2a");
}

#[test]
fn identify_namespace_nsid_rules() {
    let (mut sub, mut host) = drive14();
    // An inactive but valid NSID: a zero-filled structure.
    let (done, bytes) = host.identify(&mut sub, Cns::Namespace as u8, 5, 0);
    assert_status(done, Status::SUCCESS);
    assert!(bytes.iter().all(|b| *b == 0));
    // NSID 0 and NSIDs above NN are invalid.
    for nsid in [0, 33, 0xFFFF_FFFE] {
        let (done, _) = host.identify(&mut sub, Cns::Namespace as u8, nsid, 0);
        assert_status(done, Status::INVALID_NAMESPACE_OR_FORMAT);
    }
    // FFFFFFFFh with Namespace Management: the capabilities common to all namespaces.
    let (done, bytes) = host.identify(&mut sub, Cns::Namespace as u8, 0xFFFF_FFFF, 0);
    assert_status(done, Status::SUCCESS);
    let common = IdentifyNamespace::read_from_bytes(&bytes).unwrap();
    assert_eq!(common.nsze, 0);
    assert_eq!(common.nlbaf, 3);
    assert_eq!(common.lba_formats()[3].data_size(), Some(4096));
    assert_eq!(common.lba_formats()[3].ms, 8);
}

#[test]
fn namespace_lists_hold_active_and_allocated_nsids() {
    let (mut sub, mut host) = drive14();
    assert_status(host.create_namespace(&mut sub, 100, flbas(0)), Status::SUCCESS);
    let (done, active) = host.namespace_list(&mut sub, Cns::ActiveNamespaceList, 0);
    assert_status(done, Status::SUCCESS);
    assert_eq!(active, [1, 2]);
    assert_eq!(host.namespace_list(&mut sub, Cns::ActiveNamespaceList, 1).1, [2]);
    assert_eq!(host.namespace_list(&mut sub, Cns::AllocatedNamespaceList, 0).1, [1, 2, 3]);
    assert_eq!(host.namespace_list(&mut sub, Cns::AllocatedNamespaceList, 2).1, [3]);
    for cns in [Cns::ActiveNamespaceList, Cns::AllocatedNamespaceList] {
        for nsid in [0xFFFF_FFFE, 0xFFFF_FFFF] {
            assert_status(host.namespace_list(&mut sub, cns, nsid).0, Status::INVALID_NAMESPACE_OR_FORMAT);
        }
    }
    // CNS 11h: an allocated namespace, attached or not; zeroes for an unallocated NSID.
    let (done, bytes) = host.identify(&mut sub, Cns::AllocatedNamespace as u8, 3, 0);
    assert_status(done, Status::SUCCESS);
    assert_eq!(IdentifyNamespace::read_from_bytes(&bytes).unwrap().nsze, 100);
    let (done, bytes) = host.identify(&mut sub, Cns::AllocatedNamespace as u8, 4, 0);
    assert_status(done, Status::SUCCESS);
    assert!(bytes.iter().all(|b| *b == 0));
    // CNS 00h for the allocated, unattached namespace is zero filled.
    let (_, id) = host.identify_namespace(&mut sub, 3);
    assert_eq!(id.nsze, 0);
}

#[test]
fn controller_lists_name_the_subsystems_controllers() {
    // enterprise-1.4 is dual port: controllers 1 and 2, the shipped namespaces shared by both.
    let (mut sub, mut host) = drive14();
    let ids = |bytes: &[u8]| ControllerList::read_from_bytes(bytes).unwrap().ids().collect::<Vec<u16>>();
    let (done, bytes) = host.identify(&mut sub, Cns::NamespaceAttachedControllers as u8, 1, 0);
    assert_status(done, Status::SUCCESS);
    assert_eq!(ids(&bytes), [1, 2]);
    // From CNTID 2 on: the second controller only; above it, nothing.
    assert_eq!(ids(&host.identify(&mut sub, Cns::NamespaceAttachedControllers as u8, 1, 2).1), [2]);
    assert!(ids(&host.identify(&mut sub, Cns::NamespaceAttachedControllers as u8, 1, 3).1).is_empty());
    assert_eq!(ids(&host.identify(&mut sub, Cns::ControllerList as u8, 0, 0).1), [1, 2]);
    assert_eq!(ids(&host.identify(&mut sub, Cns::ControllerList as u8, 0, 2).1), [2]);
    assert_status(
        host.identify(&mut sub, Cns::NamespaceAttachedControllers as u8, 0, 0).0,
        Status::INVALID_NAMESPACE_OR_FORMAT,
    );
    // Detached from controller 1 only, namespace 2 is still controller 2's.
    assert_status(host.attachment(&mut sub, false, 2, &[1]), Status::SUCCESS);
    assert_eq!(ids(&host.identify(&mut sub, Cns::NamespaceAttachedControllers as u8, 2, 0).1), [2]);
    assert_status(host.detach_all(&mut sub, 2), Status::SUCCESS);
    assert!(ids(&host.identify(&mut sub, Cns::NamespaceAttachedControllers as u8, 2, 0).1).is_empty());
}

#[test]
fn a_single_port_drive_has_one_controller() {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.controller.ports = 1;
    let mut sub = Subsystem::new(p).unwrap();
    let mut host = TestHost::new(1);
    let ids = |bytes: &[u8]| ControllerList::read_from_bytes(bytes).unwrap().ids().collect::<Vec<u16>>();
    assert_eq!(ids(&host.identify(&mut sub, Cns::ControllerList as u8, 0, 0).1), [1]);
    assert_eq!(ids(&host.identify(&mut sub, Cns::NamespaceAttachedControllers as u8, 1, 0).1), [1]);
    // Bits 0 and 1 clear; bit 3 (ANA reporting) is the profile's `ana`, one port or two.
    assert_eq!(host.identify_controller(&mut sub).cmic.into_bits(), 0x08);
    assert_status(host.attachment(&mut sub, false, 1, &[2]), Status::CONTROLLER_LIST_INVALID);
}

/// Detach `nsid` from every controller it is attached to.
trait Detach {
    fn detach_all(&mut self, sub: &mut Subsystem, nsid: u32) -> Done;
}

impl Detach for TestHost {
    fn detach_all(&mut self, sub: &mut Subsystem, nsid: u32) -> Done {
        let attached = sub.namespace(nsid).map(|ns| ns.attached.clone()).unwrap_or_default();
        self.attachment(sub, false, nsid, &attached)
    }
}

#[test]
fn descriptor_list_matches_identify_namespace_on_1_4() {
    let (mut sub, mut host) = drive14();
    let (done, bytes) = host.identify(&mut sub, Cns::NamespaceDescriptorList as u8, 1, 0);
    assert_status(done, Status::SUCCESS);
    let descriptors = parse_descriptor_list(&bytes).unwrap();
    let (_, id) = host.identify_namespace(&mut sub, 1);
    assert_eq!(descriptors, [NsDescriptor::Eui64(id.eui64), NsDescriptor::Nguid(id.nguid)]);
    for nsid in [0, 3, 33] {
        let (done, _) = host.identify(&mut sub, Cns::NamespaceDescriptorList as u8, nsid, 0);
        assert_status(done, Status::INVALID_NAMESPACE_OR_FORMAT);
    }
}

#[test]
fn descriptor_list_is_an_invalid_cns_on_1_2() {
    let (mut sub, mut host) = drive("enterprise-1.2a");
    let (done, _) = host.identify(&mut sub, Cns::NamespaceDescriptorList as u8, 1, 0);
    assert_status(done, Status::INVALID_FIELD);
}

#[test]
fn reserved_cns_values_are_invalid_field() {
    let (mut sub, mut host) = drive14();
    for cns in [0x04, 0x05, 0x14, 0x15, 0xFF] {
        let (done, _) = host.identify(&mut sub, cns, 1, 0);
        assert_status(done, Status::INVALID_FIELD);
    }
}

// ---------------------------------------------------------------------------------------
// Namespace Management
// ---------------------------------------------------------------------------------------

#[test]
fn create_allocates_the_lowest_free_nsid_unattached() {
    let (mut sub, mut host) = drive14();
    let done = host.create_namespace(&mut sub, 256, flbas(2));
    assert_status(done, Status::SUCCESS);
    assert_eq!(done.dw0, 3);
    assert!(!sub.is_active(3));
    let (_, bytes) = host.identify(&mut sub, Cns::AllocatedNamespace as u8, 3, 0);
    let id = IdentifyNamespace::read_from_bytes(&bytes).unwrap();
    assert_eq!((id.nsze, id.ncap, id.lba_data_size()), (256, 256, Some(4096)));
    assert_eq!(host.identify_controller(&mut sub).unvmcap(), (64 << 20) - (8 << 20) - (1 << 20));
    // Delete namespace 1, and the next create reuses NSID 1 with new identifiers.
    let (_, old) = host.identify_namespace(&mut sub, 1);
    assert_status(host.delete_namespace(&mut sub, 1), Status::SUCCESS);
    assert_eq!(host.create_namespace(&mut sub, 8, flbas(0)).dw0, 1);
    let (_, bytes) = host.identify(&mut sub, Cns::AllocatedNamespace as u8, 1, 0);
    let new = IdentifyNamespace::read_from_bytes(&bytes).unwrap();
    assert_ne!(old.nguid, new.nguid);
}

#[test]
fn create_refuses_what_the_drive_cannot_make() {
    let (mut sub, mut host) = drive14();
    // FLBAS beyond NLBAF.
    assert_status(host.create_namespace(&mut sub, 8, flbas(4)), Status::INVALID_FORMAT);
    // Protection information (DPC is 0).
    let spec = IdentifyNamespace::for_create(8, 8, flbas(1), Dps::new().with_pit(1), Nmic::new());
    host.put(spec.as_bytes());
    assert_status(host.admin(&mut sub, &namespace::namespace_create()), Status::INVALID_FORMAT);
    // NCAP below NSZE without thin provisioning; NCAP above NSZE; NSZE 0.
    let spec = IdentifyNamespace::for_create(16, 8, flbas(0), Dps::new(), Nmic::new());
    host.put(spec.as_bytes());
    assert_status(host.admin(&mut sub, &namespace::namespace_create()), Status::THIN_PROVISIONING_NOT_SUPPORTED);
    let spec = IdentifyNamespace::for_create(8, 16, flbas(0), Dps::new(), Nmic::new());
    host.put(spec.as_bytes());
    assert_status(host.admin(&mut sub, &namespace::namespace_create()), Status::INVALID_FIELD);
    assert_status(host.create_namespace(&mut sub, 0, flbas(0)), Status::INVALID_FIELD);
    // A shared namespace on a single-controller subsystem.
    let mut single = Profile::builtin("enterprise-1.4").unwrap();
    single.controller.ports = 1;
    let mut single = Subsystem::new(single).unwrap();
    let spec = IdentifyNamespace::for_create(8, 8, flbas(0), Dps::new(), Nmic::new().with_shared(true));
    host.put(spec.as_bytes());
    assert_status(host.admin(&mut single, &namespace::namespace_create()), Status::INVALID_FIELD);
    // More than the unallocated capacity (56 MiB left).
    assert_status(
        host.create_namespace(&mut sub, (56 << 20) / 512 + 1, flbas(0)),
        Status::NAMESPACE_INSUFFICIENT_CAPACITY,
    );
    assert_status(host.create_namespace(&mut sub, (56 << 20) / 512, flbas(0)), Status::SUCCESS);
    assert_eq!(host.identify_controller(&mut sub).unvmcap(), 0);
    // Nothing failed changed anything.
    assert_eq!(sub.allocated_nsids(), [1, 2, 3]);
}

#[test]
fn create_runs_out_of_nsids_at_nn() {
    let (mut sub, mut host) = drive14();
    for expected in 3..=32 {
        assert_eq!(host.create_namespace(&mut sub, 8, flbas(0)).dw0, expected);
    }
    assert_status(host.create_namespace(&mut sub, 8, flbas(0)), Status::NAMESPACE_ID_UNAVAILABLE);
}

#[test]
fn delete_nsid_rules() {
    let (mut sub, mut host) = drive14();
    assert_status(host.delete_namespace(&mut sub, 5), Status::INVALID_FIELD);
    assert_status(host.delete_namespace(&mut sub, 0), Status::INVALID_NAMESPACE_OR_FORMAT);
    assert_status(host.delete_namespace(&mut sub, 33), Status::INVALID_NAMESPACE_OR_FORMAT);
    let mut reserved = namespace::namespace_delete(1);
    reserved.cdw10 = 2;
    assert_status(host.admin(&mut sub, &reserved), Status::INVALID_FIELD);
    // Deleting an attached namespace detaches it.
    assert_status(host.delete_namespace(&mut sub, 2), Status::SUCCESS);
    assert_eq!(sub.active_nsids(), [1]);
    assert_status(host.delete_namespace(&mut sub, 0xFFFF_FFFF), Status::SUCCESS);
    assert!(sub.allocated_nsids().is_empty());
    assert_eq!(host.identify_controller(&mut sub).unvmcap(), 64 << 20);
}

// ---------------------------------------------------------------------------------------
// Namespace Attachment
// ---------------------------------------------------------------------------------------

#[test]
fn attach_and_detach_change_the_active_namespaces() {
    let (mut sub, mut host) = drive14();
    assert_eq!(host.create_namespace(&mut sub, 64, flbas(0)).dw0, 3);
    assert_status(host.attachment(&mut sub, true, 3, &[1]), Status::SUCCESS);
    assert_eq!(sub.active_nsids(), [1, 2, 3]);
    assert_status(host.attachment(&mut sub, true, 3, &[1]), Status::NAMESPACE_ALREADY_ATTACHED);
    assert_status(host.attachment(&mut sub, false, 3, &[1]), Status::SUCCESS);
    assert_eq!(sub.active_nsids(), [1, 2]);
    assert_status(host.attachment(&mut sub, false, 3, &[1]), Status::NAMESPACE_NOT_ATTACHED);
}

#[test]
fn attachment_refuses_bad_nsids_and_controller_lists() {
    let (mut sub, mut host) = drive14();
    assert_status(host.attachment(&mut sub, true, 7, &[1]), Status::INVALID_FIELD);
    assert_status(host.attachment(&mut sub, true, 0xFFFF_FFFF, &[1]), Status::INVALID_FIELD);
    assert_status(host.attachment(&mut sub, true, 0, &[1]), Status::INVALID_NAMESPACE_OR_FORMAT);
    assert_status(host.attachment(&mut sub, true, 40, &[1]), Status::INVALID_NAMESPACE_OR_FORMAT);
    assert_eq!(host.create_namespace(&mut sub, 64, flbas(0)).dw0, 3);
    assert_status(host.attachment(&mut sub, true, 3, &[]), Status::CONTROLLER_LIST_INVALID);
    // Controllers 1 and 2 exist (dual port); 0 and 3 do not.
    assert_status(host.attachment(&mut sub, true, 3, &[3]), Status::CONTROLLER_LIST_INVALID);
    assert_status(host.attachment(&mut sub, true, 3, &[1, 3]), Status::CONTROLLER_LIST_INVALID);
    assert_status(host.attachment(&mut sub, true, 3, &[0]), Status::CONTROLLER_LIST_INVALID);
    assert_status(host.attachment(&mut sub, true, 3, &[1, 1]), Status::CONTROLLER_LIST_INVALID);
    // Namespace 3 is private (created without NMIC bit 0): one controller at a time.
    assert_status(host.attachment(&mut sub, true, 3, &[1, 2]), Status::NAMESPACE_IS_PRIVATE);
    let mut reserved = namespace::namespace_attach(3);
    reserved.cdw10 = 5;
    assert_status(host.admin(&mut sub, &reserved), Status::INVALID_FIELD);
    assert!(!sub.is_active(3), "a refused attachment changes nothing");
}

#[test]
fn attachment_changes_raise_one_notice_until_the_log_is_read() {
    let (mut sub, mut host) = drive14();
    enable_namespace_notices(&mut sub, &mut host);
    assert_status(host.detach_all(&mut sub, 2), Status::SUCCESS);
    assert_eq!(host.ctx.events.len(), 1);
    let event = host.ctx.events[0];
    assert_eq!((event.event_type, event.info, event.log_page), (2, 0, 0x04));
    // A second change while the first notice is unread: listed, but no second event.
    assert_status(host.detach_all(&mut sub, 1), Status::SUCCESS);
    assert_eq!(host.ctx.events.len(), 1);
    // RAE keeps the list and the mask.
    let (done, bytes) = host.log_page(&mut sub, LogPageId::ChangedNamespaceList as u8, 0, 4096, true);
    assert_status(done, Status::SUCCESS);
    assert_eq!(ChangedNamespaceList::read_from_bytes(&bytes).unwrap().ids().collect::<Vec<_>>(), [1, 2]);
    let (_, bytes) = host.log_page(&mut sub, LogPageId::ChangedNamespaceList as u8, 0, 4096, false);
    assert_eq!(ChangedNamespaceList::read_from_bytes(&bytes).unwrap().ids().collect::<Vec<_>>(), [1, 2]);
    // Read without RAE: cleared, and the next change raises a new notice.
    let (_, bytes) = host.log_page(&mut sub, LogPageId::ChangedNamespaceList as u8, 0, 4096, false);
    assert_eq!(ChangedNamespaceList::read_from_bytes(&bytes).unwrap().ids().count(), 0);
    host.ctx.events.clear();
    assert_status(host.attachment(&mut sub, true, 1, &[1]), Status::SUCCESS);
    assert_eq!(host.ctx.events.len(), 1);
}

#[test]
fn without_the_notice_enabled_changes_are_listed_but_not_announced() {
    let (mut sub, mut host) = drive14();
    assert_status(host.detach_all(&mut sub, 2), Status::SUCCESS);
    assert!(host.ctx.events.is_empty());
    let (_, bytes) = host.log_page(&mut sub, LogPageId::ChangedNamespaceList as u8, 0, 4096, false);
    assert_eq!(ChangedNamespaceList::read_from_bytes(&bytes).unwrap().ids().collect::<Vec<_>>(), [2]);
}

#[test]
fn creating_a_namespace_is_no_attribute_change() {
    let (mut sub, mut host) = drive14();
    enable_namespace_notices(&mut sub, &mut host);
    assert_status(host.create_namespace(&mut sub, 8, flbas(0)), Status::SUCCESS);
    assert!(host.ctx.events.is_empty());
    // Deleting an attached namespace is.
    assert_status(host.delete_namespace(&mut sub, 1), Status::SUCCESS);
    assert_eq!(host.ctx.events.len(), 1);
}

// ---------------------------------------------------------------------------------------
// Format NVM
// ---------------------------------------------------------------------------------------

#[test]
fn format_changes_the_lba_size_and_erases() {
    let (mut sub, mut host) = drive14();
    assert_status(host.write(&mut sub, 1, 0, 7, &[0x5A; 4096]), Status::SUCCESS);
    let done = host.admin(&mut sub, &namespace::format_nvm(1, FormatNvm::new().with_lbaf(2)));
    assert_status(done, Status::SUCCESS);
    let (_, id) = host.identify_namespace(&mut sub, 1);
    assert_eq!((id.nsze, id.lba_data_size(), id.nuse), (1024, Some(4096), 0));
    let (done, data) = host.read(&mut sub, 1, 0, 0, 4096);
    assert_status(done, Status::SUCCESS);
    assert!(data.iter().all(|b| *b == 0));
    // A user data erase keeps the format and erases.
    assert_status(host.write(&mut sub, 2, 3, 0, &[7; 4096]), Status::SUCCESS);
    let erase = FormatNvm::new().with_lbaf(2).with_ses(SecureErase::UserData);
    assert_status(host.admin(&mut sub, &namespace::format_nvm(2, erase)), Status::SUCCESS);
    assert!(host.read(&mut sub, 2, 3, 0, 4096).1.iter().all(|b| *b == 0));
}

#[test]
fn format_refuses_what_the_drive_cannot_do() {
    let (mut sub, mut host) = drive14();
    let run = |sub: &mut Subsystem, host: &mut TestHost, nsid: u32, f: FormatNvm| {
        host.admin(sub, &namespace::format_nvm(nsid, f))
    };
    assert_status(run(&mut sub, &mut host, 1, FormatNvm::new().with_lbaf(4)), Status::INVALID_FORMAT);
    assert_status(run(&mut sub, &mut host, 1, FormatNvm::new().with_lbaf(1).with_pi(1)), Status::INVALID_FORMAT);
    let reserved = FormatNvm::new().with_ses(SecureErase::Reserved(5));
    assert_status(run(&mut sub, &mut host, 1, reserved), Status::INVALID_FIELD);
    for nsid in [0, 3, 33] {
        assert_status(run(&mut sub, &mut host, nsid, FormatNvm::new()), Status::INVALID_NAMESPACE_OR_FORMAT);
    }
    let (_, id) = host.identify_namespace(&mut sub, 1);
    assert_eq!(id.lba_data_size(), Some(512), "nothing refused changed the format");
}

#[test]
fn format_of_all_namespaces_and_metadata_settings() {
    let (mut sub, mut host) = drive14();
    let extended = FormatNvm::new().with_lbaf(1).with_mset(true);
    assert_status(host.admin(&mut sub, &namespace::format_nvm(0xFFFF_FFFF, extended)), Status::SUCCESS);
    for nsid in [1, 2] {
        let (_, id) = host.identify_namespace(&mut sub, nsid);
        assert_eq!(id.lba_format_in_use().map(|f| (f.data_size(), f.ms)), Some((Some(512), 8)));
        assert!(id.extended_metadata());
    }
    let (_, id) = host.identify_namespace(&mut sub, 2);
    assert_eq!(id.nsze, 8192, "4 MiB at 512 bytes a block");
}

#[test]
fn format_of_an_attached_namespace_is_an_attribute_change() {
    let (mut sub, mut host) = drive14();
    enable_namespace_notices(&mut sub, &mut host);
    assert_status(host.admin(&mut sub, &namespace::format_nvm(1, FormatNvm::new().with_lbaf(2))), Status::SUCCESS);
    assert_eq!(host.ctx.events.len(), 1);
}

// ---------------------------------------------------------------------------------------
// Get Log Page
// ---------------------------------------------------------------------------------------

#[test]
fn error_log_records_failed_commands_newest_first() {
    let (mut sub, mut host) = drive14();
    let mut bad = Command::admin(AdminOpcode::DeviceSelfTest);
    bad.cid = 0x42;
    assert_status(host.admin(&mut sub, &bad), Status::INVALID_COMMAND_OPCODE);
    let mut read = nvm::read(9, 0, 0);
    read.cid = 0x43;
    // NSID 9 is valid but inactive: Invalid Field in Command on 1.4 (§6.1.5).
    assert_status(host.io(&mut sub, &read), Status::INVALID_FIELD);
    let (done, bytes) = host.log_page(&mut sub, LogPageId::ErrorInformation as u8, 0, 128, false);
    assert_status(done, Status::SUCCESS);
    let newest = ErrorInformationEntry::read_from_bytes(&bytes[..64]).unwrap();
    let older = ErrorInformationEntry::read_from_bytes(&bytes[64..]).unwrap();
    assert_eq!((newest.error_count, newest.cid, newest.nsid), (2, 0x43, 9));
    assert!(newest.status().same_code(&Status::INVALID_FIELD));
    assert_eq!((older.error_count, older.cid), (1, 0x42));
    let (_, smart) = host.log_page(&mut sub, LogPageId::SmartHealth as u8, 0xFFFF_FFFF, 512, false);
    // The SMART log counts the same two errors (the log reads themselves succeeded).
    assert_eq!(SmartHealthLog::read_from_bytes(&smart).unwrap().error_log_entries.get(), 2);
}

#[test]
fn smart_log_counts_host_io() {
    let (mut sub, mut host) = drive14();
    for _ in 0..12 {
        assert_status(host.write(&mut sub, 1, 0, 249, &vec![1u8; 250 * 512]), Status::SUCCESS);
    }
    assert_status(host.read(&mut sub, 1, 0, 1, 1024).0, Status::SUCCESS);
    let (done, bytes) = host.log_page(&mut sub, LogPageId::SmartHealth as u8, 0, 512, false);
    assert_status(done, Status::SUCCESS);
    let log = SmartHealthLog::read_from_bytes(&bytes).unwrap();
    assert_eq!(log.data_units_written.get(), 3, "3000 units of 512 bytes, in thousands");
    assert_eq!(log.data_units_read.get(), 1, "2 units, rounded up to one thousand");
    assert_eq!((log.host_write_commands.get(), log.host_read_commands.get()), (12, 1));
    assert_eq!(log.available_spare, 100);
    assert!(log.composite_temperature.get() > 273);
    // The page is controller-wide only (LPA bit 0 clear).
    let (done, _) = host.log_page(&mut sub, LogPageId::SmartHealth as u8, 1, 512, false);
    assert_status(done, Status::INVALID_FIELD);
}

#[test]
fn firmware_slot_and_effects_logs() {
    let (mut sub, mut host) = drive14();
    let (done, bytes) = host.log_page(&mut sub, LogPageId::FirmwareSlot as u8, 0, 512, false);
    assert_status(done, Status::SUCCESS);
    let fw = FirmwareSlotLog::read_from_bytes(&bytes).unwrap();
    assert_eq!(fw.afi.active_slot(), 1);
    assert_eq!(fw.revision(1).unwrap().text, "NVT14A01");
    let (done, bytes) = host.log_page(&mut sub, LogPageId::CommandsSupportedAndEffects as u8, 0, 4096, false);
    assert_status(done, Status::SUCCESS);
    let cse = CommandsSupportedAndEffects::read_from_bytes(&bytes).unwrap();
    for op in [AdminOpcode::Identify, AdminOpcode::GetLogPage, AdminOpcode::FormatNvm, AdminOpcode::Abort] {
        assert!(cse.admin(op as u8).csupp(), "{op:?}");
    }
    assert!(cse.admin(AdminOpcode::NamespaceManagement as u8).nic());
    assert!(cse.admin(AdminOpcode::Sanitize as u8).csupp());
    assert!(cse.admin(AdminOpcode::FirmwareCommit as u8).ccc());
    assert!(cse.admin(AdminOpcode::FirmwareImageDownload as u8).csupp());
    assert!(cse.io(NvmOpcode::Write as u8).lbcc() && cse.io(NvmOpcode::DatasetManagement as u8).lbcc());
    assert!(cse.io(NvmOpcode::Read as u8).csupp() && !cse.io(NvmOpcode::Read as u8).lbcc());
    let verify = cse.io(NvmOpcode::Verify as u8);
    assert!(verify.csupp() && !verify.lbcc() && cse.io(NvmOpcode::ReservationReport as u8).csupp());
}

#[test]
fn log_page_offsets_and_unknown_pages() {
    let (mut sub, mut host) = drive14();
    // (80h, Reservation Notification, exists: the profile has reservations.)
    // (0Ch, Asymmetric Namespace Access, exists: the profile has ANA.)
    for lid in [0x00, 0x06, 0x07, 0x0D, 0xC0] {
        let (done, _) = host.log_page(&mut sub, lid, 0, 512, false);
        assert_status(done, Status::INVALID_LOG_PAGE);
    }
    // The firmware revision from byte 8 of the slot log, by offset (LPA bit 2).
    let cmd = nvme::spec::log::get_log_page(LogPageId::FirmwareSlot, 0, 8, 8, false).unwrap();
    let (done, bytes) = host.admin_read(&mut sub, &cmd, 8);
    assert_status(done, Status::SUCCESS);
    assert_eq!(&bytes, b"NVT14A01");
    for offset in [2, 516] {
        let cmd = nvme::spec::log::get_log_page(LogPageId::FirmwareSlot, 0, 8, offset, false).unwrap();
        assert_status(host.admin(&mut sub, &cmd), Status::INVALID_FIELD);
    }
    // Reading past the end of a page returns zeroes there.
    let (done, bytes) = host.log_page(&mut sub, LogPageId::FirmwareSlot as u8, 0, 1024, false);
    assert_status(done, Status::SUCCESS);
    assert!(bytes[512..].iter().all(|b| *b == 0));
}

#[test]
fn log_page_at_1_2_reads_numd_from_cdw10_only() {
    let (mut sub, mut host) = drive("enterprise-1.2a");
    let mut cmd = nvme::spec::log::get_log_page(LogPageId::FirmwareSlot, 0, 16, 0, false).unwrap();
    // Bits a 1.2 controller does not have: NUMDU and an offset are ignored.
    cmd.cdw11 = 0xFFFF;
    cmd.cdw12 = 8;
    let (done, bytes) = host.admin_read(&mut sub, &cmd, 16);
    assert_status(done, Status::SUCCESS);
    assert_eq!(&bytes[8..16], b"NVT12A01");
}

// ---------------------------------------------------------------------------------------
// Get / Set Features
// ---------------------------------------------------------------------------------------

fn get(sub: &mut Subsystem, host: &mut TestHost, fid: FeatureId, sel: Select, cdw11: u32) -> Done {
    host.admin(sub, &features::get_features(fid, sel, 0, cdw11))
}

fn set(sub: &mut Subsystem, host: &mut TestHost, fid: impl Into<u8>, value: u32) -> Done {
    host.admin(sub, &features::set_features(fid, false, 0, value))
}

#[test]
fn volatile_write_cache_current_default_saved_and_capabilities() {
    let (mut sub, mut host) = drive14();
    let vwc = FeatureId::VolatileWriteCache;
    assert_eq!(get(&mut sub, &mut host, vwc, Select::Current, 0).dw0, 1);
    assert_status(set(&mut sub, &mut host, vwc, 0), Status::SUCCESS);
    assert_eq!(get(&mut sub, &mut host, vwc, Select::Current, 0).dw0, 0);
    assert_eq!(get(&mut sub, &mut host, vwc, Select::Default, 0).dw0, 1);
    assert_eq!(get(&mut sub, &mut host, vwc, Select::Saved, 0).dw0, 1);
    let caps = FeatureCapabilities::from_bits(get(&mut sub, &mut host, vwc, Select::SupportedCapabilities, 0).dw0);
    assert!(caps.changeable() && !caps.saveable() && !caps.namespace_specific());
    assert_status(get(&mut sub, &mut host, vwc, Select::Reserved(4), 0), Status::INVALID_FIELD);
    let save = features::set_features(vwc, true, 0, 1);
    assert_status(host.admin(&mut sub, &save), Status::FEATURE_NOT_SAVEABLE);
}

#[test]
fn number_of_queues_allocates_up_to_the_maximum() {
    let (mut sub, mut host) = drive14();
    let noq = FeatureId::NumberOfQueues;
    let done = set(&mut sub, &mut host, noq, NumberOfQueues::request(8, 4).into());
    assert_status(done, Status::SUCCESS);
    assert_eq!(NumberOfQueues::from_bits(done.dw0).submission_queues(), 8);
    assert_eq!((host.ctx.nsqa, host.ctx.ncqa), (7, 3));
    let done = set(&mut sub, &mut host, noq, NumberOfQueues::request(1000, 1000).into());
    let allocated = NumberOfQueues::from_bits(done.dw0);
    assert_eq!((allocated.submission_queues(), allocated.completion_queues()), (64, 64));
    assert_eq!(get(&mut sub, &mut host, noq, Select::Current, 0).dw0, done.dw0);
    assert_status(set(&mut sub, &mut host, noq, 0xFFFF), Status::INVALID_FIELD);
}

#[test]
fn feature_values_round_trip_and_are_checked() {
    let (mut sub, mut host) = drive14();
    let cases: [(FeatureId, u32); 4] = [
        (FeatureId::Arbitration, 0x0403_0203),
        (FeatureId::InterruptCoalescing, 0x1407),
        (FeatureId::WriteAtomicityNormal, 1),
        (FeatureId::PowerManagement, 0),
    ];
    for (fid, value) in cases {
        assert_status(set(&mut sub, &mut host, fid, value), Status::SUCCESS);
        assert_eq!(get(&mut sub, &mut host, fid, Select::Current, 0).dw0, value, "{fid:?}");
    }
    // Error Recovery is namespace specific on 1.3 and later: it takes an NSID.
    let er = features::set_features(FeatureId::ErrorRecovery, false, 1, 50);
    assert_status(host.admin(&mut sub, &er), Status::SUCCESS);
    let er = features::get_features(FeatureId::ErrorRecovery, Select::Current, 1, 0);
    assert_eq!(host.admin(&mut sub, &er).dw0, 50);
    // Power state 1 does not exist (NPSS 0); DULBE needs NSFEAT.DAE.
    assert_status(set(&mut sub, &mut host, FeatureId::PowerManagement, 1), Status::INVALID_FIELD);
    let dulbe = features::set_features(FeatureId::ErrorRecovery, false, 1, 1 << 16);
    assert_status(host.admin(&mut sub, &dulbe), Status::INVALID_FIELD);
    // Temperature thresholds of the composite sensor only.
    assert_status(set(&mut sub, &mut host, FeatureId::TemperatureThreshold, 350), Status::SUCCESS);
    assert_eq!(get(&mut sub, &mut host, FeatureId::TemperatureThreshold, Select::Current, 0).dw0 & 0xFFFF, 350);
    assert_status(set(&mut sub, &mut host, FeatureId::TemperatureThreshold, 350 | 1 << 16), Status::INVALID_FIELD);
    // Interrupt vector configuration, per vector.
    assert_status(set(&mut sub, &mut host, FeatureId::InterruptVectorConfiguration, 3 | 1 << 16), Status::SUCCESS);
    assert_eq!(get(&mut sub, &mut host, FeatureId::InterruptVectorConfiguration, Select::Current, 3).dw0, 3 | 1 << 16);
    assert_eq!(get(&mut sub, &mut host, FeatureId::InterruptVectorConfiguration, Select::Current, 2).dw0, 2);
    assert_status(set(&mut sub, &mut host, FeatureId::InterruptVectorConfiguration, 65), Status::INVALID_FIELD);
    // Asynchronous event configuration keeps only what the controller supports.
    assert_status(set(&mut sub, &mut host, FeatureId::AsyncEventConfiguration, 0xFFFF_FFFF), Status::SUCCESS);
    assert_eq!(get(&mut sub, &mut host, FeatureId::AsyncEventConfiguration, Select::Current, 0).dw0, 0xB1F);
}

#[test]
fn unsupported_features_and_nsid_rules() {
    let (mut sub, mut host) = drive14();
    for fid in [0x00u8, 0x03, 0x0C, 0x0D, 0x0E, 0x0F, 0x80, 0xFF] {
        assert_status(host.admin(&mut sub, &features::get_features(fid, Select::Current, 0, 0)), Status::INVALID_FIELD);
        assert_status(set(&mut sub, &mut host, fid, 0), Status::INVALID_FIELD);
    }
    let per_ns = features::set_features(FeatureId::VolatileWriteCache, false, 1, 1);
    assert_status(host.admin(&mut sub, &per_ns), Status::FEATURE_NOT_NAMESPACE_SPECIFIC);
    // Error Recovery is namespace specific: an inactive NSID is refused.
    let er = features::set_features(FeatureId::ErrorRecovery, false, 5, 1);
    assert_status(host.admin(&mut sub, &er), Status::INVALID_NAMESPACE_OR_FORMAT);
    let er = features::get_features(FeatureId::ErrorRecovery, Select::SupportedCapabilities, 1, 0);
    assert!(FeatureCapabilities::from_bits(host.admin(&mut sub, &er).dw0).namespace_specific());
}

#[test]
fn error_recovery_is_controller_wide_on_1_2() {
    let (mut sub, mut host) = drive("enterprise-1.2a");
    assert_status(set(&mut sub, &mut host, FeatureId::ErrorRecovery, 20), Status::SUCCESS);
    assert_eq!(get(&mut sub, &mut host, FeatureId::ErrorRecovery, Select::Current, 0).dw0, 20);
}

#[test]
fn a_drive_without_a_write_cache_has_no_such_feature() {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.controller.volatile_write_cache = false;
    p.capacity_bytes = 1 << 20;
    p.namespaces = vec![InitialNamespace { lbads: 512, ms: 0, extended: false, blocks: 16, attached: true }];
    let mut sub = Subsystem::new(p).unwrap();
    let mut host = TestHost::new(1);
    assert_status(get(&mut sub, &mut host, FeatureId::VolatileWriteCache, Select::Current, 0), Status::INVALID_FIELD);
    assert!(!host.identify_controller(&mut sub).vwc.present());
}

#[test]
fn unsupported_admin_opcodes_are_invalid() {
    let (mut sub, mut host) = drive14();
    for op in [0x14u8, 0x18, 0x7C, 0x81, 0x82, 0x86, 0xC0, 0x03] {
        let cmd = Command { opcode: op, ..Default::default() };
        assert_status(host.admin(&mut sub, &cmd), Status::INVALID_COMMAND_OPCODE);
    }
}

#[test]
fn a_drive_without_namespace_management_refuses_it() {
    let mut p = Profile::builtin("enterprise-1.4").unwrap();
    p.optional_commands.retain(|c| *c != nvme_sim::profile::OptionalCommand::NamespaceManagement);
    p.capacity_bytes = 1 << 20;
    p.namespaces = vec![InitialNamespace { lbads: 512, ms: 0, extended: false, blocks: 16, attached: true }];
    let mut sub = Subsystem::new(p).unwrap();
    let mut host = TestHost::new(1);
    assert_status(host.create_namespace(&mut sub, 8, flbas(0)), Status::INVALID_COMMAND_OPCODE);
    assert_status(host.attachment(&mut sub, true, 1, &[1]), Status::INVALID_COMMAND_OPCODE);
    assert_status(host.identify(&mut sub, Cns::AllocatedNamespaceList as u8, 0, 0).0, Status::INVALID_FIELD);
    assert_status(host.identify(&mut sub, Cns::Namespace as u8, 0xFFFF_FFFF, 0).0, Status::INVALID_NAMESPACE_OR_FORMAT);
    assert!(!host.identify_controller(&mut sub).oacs.namespace_management());
}
