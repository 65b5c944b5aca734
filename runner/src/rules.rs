//! The rules nvtest's own procedures enforce (named checks and setup steps), each with
//! the section and figure of NVMe 1.4 that states it. Rules of a case's expectations
//! come from the suite (`rule:` of the case).

use crate::verdict::Rule;

fn rule(section: &str, text: &str) -> Rule {
    Rule { section: section.to_string(), text: text.to_string() }
}

pub fn identify_ascii() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify Controller Data Structure (SN, MN, FR)",
        "Serial Number, Model Number and Firmware Revision are ASCII strings (20h–7Eh), padded with spaces",
    )
}

pub fn ver_matches_vs() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify Controller Data Structure (VER) and §3.1.2 Version (VS)",
        "VER reports the same value as the Version register",
    )
}

pub fn metadata_returned() -> Rule {
    rule(
        "NVMe 1.4 §8.2 Metadata Region (Data Protection), Figure 245 (FLBAS bit 4, LBAF MS)",
        "the metadata written with a logical block, as an extended LBA or in the separate buffer at MPTR, is \
         returned with it by a read",
    )
}

pub fn mnan_within_nn() -> Rule {
    rule("NVMe 1.4 §5.15.2.1, Identify Controller Data Structure (MNAN)", "MNAN, when non-zero, is at most NN")
}

pub fn subnqn_present() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify Controller Data Structure (SUBNQN) and §7.9 NVMe Qualified Names",
        "controllers of revision 1.2.1 and later report a NUL-terminated NVM Subsystem NQN starting with \"nqn.\"",
    )
}

pub fn active_list() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify – CNS 02h (Active Namespace ID list)",
        "the list holds every active NSID, in increasing order, none above NN, and no inactive NSID",
    )
}

pub fn attachment_persists() -> Rule {
    rule(
        "NVMe 1.4 §5.19 Namespace Attachment command",
        "the attach and detach operations are persistent across all reset events (a Controller Reset does not \
         attach a detached namespace, nor detach an attached one)",
    )
}

pub fn namespace_sizes() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify Namespace Data Structure (NSZE, NCAP, NUSE)",
        "NCAP is at most NSZE and NUSE is at most NCAP",
    )
}

pub fn lba_format() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify Namespace Data Structure (FLBAS, NLBAF) and LBA Format Data Structure",
        "FLBAS bits 3:0 select one of the NLBAF + 1 supported formats, whose LBADS is at least 9",
    )
}

pub fn requested_format() -> Rule {
    rule(
        "NVMe 1.4 §5.20 Namespace Management and §5.23 Format NVM",
        "a namespace uses the LBA format the host selected when it was created or formatted",
    )
}

pub fn identifiers_present() -> Rule {
    rule(
        "NVMe 1.4 §7.11 Unique Identifier; §5.15.2.1 CNS 03h (Namespace Identification Descriptor list)",
        "a namespace reports a globally unique identifier (NGUID, EUI64 or a Namespace UUID); advisory: NVMe 2.0 \
         says the descriptor list shall identify the namespace, 1.4's text leaves room",
    )
}

pub fn unique_identifiers() -> Rule {
    rule(
        "NVMe 1.4 §7.11 Unique Identifier; Identify Namespace Data Structure (NGUID, EUI64)",
        "NGUID and EUI64, where reported (non-zero), differ between namespaces",
    )
}

pub fn descriptor_list() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify – CNS 03h (Namespace Identification Descriptor list)",
        "the list is well-formed and its EUI64 / NGUID descriptors equal the Identify Namespace fields",
    )
}

pub fn allocated_list() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify – CNS 10h (Allocated Namespace ID list)",
        "the list holds every allocated NSID, attached or not",
    )
}

pub fn allocated_identify() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify – CNS 11h (Identify Namespace data structure for an Allocated NSID)",
        "for an allocated NSID, attached or not, the controller returns that namespace's Identify Namespace data \
         (the same NSZE, NCAP and FLBAS as CNS 00h reports while it is attached)",
    )
}

pub fn controller_list() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify – CNS 12h (Namespace Attached Controller list)",
        "the list holds exactly the controllers the namespace is attached to",
    )
}

pub fn identify_inactive_zero() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify – CNS 00h",
        "for an inactive NSID the controller returns a zero-filled Identify Namespace data structure",
    )
}

pub fn delete_all() -> Rule {
    rule(
        "NVMe 1.4 §5.20 Namespace Management (Delete)",
        "a delete with NSID FFFFFFFFh deletes every namespace of the NVM subsystem",
    )
}

pub fn oacs_namespace_management() -> Rule {
    rule(
        "NVMe 1.4 Figure 247 (Identify Controller Data Structure), OACS bit 3",
        "set, the controller supports the Namespace Management and Namespace Attachment commands",
    )
}

pub fn oacs_format_nvm() -> Rule {
    rule(
        "NVMe 1.4 Figure 247 (Identify Controller Data Structure), OACS bit 1",
        "set, the controller supports the Format NVM command",
    )
}

pub fn format_supported() -> Rule {
    rule(
        "NVMe 1.4 §5.23 Format NVM",
        "formatting a namespace with one of its supported LBA formats (the one it had) succeeds",
    )
}

pub fn namespace_setup() -> Rule {
    rule(
        "NVMe 1.4 §5.20 Namespace Management and §5.19 Namespace Attachment",
        "creating a namespace within the capacity and NSID limits, and attaching it, succeed",
    )
}

pub fn namespace_notice() -> Rule {
    rule(
        "NVMe 1.4 §5.2 Asynchronous Event Request, Asynchronous Event Information – Notice",
        "a Namespace Attribute Changed notice completes an outstanding Asynchronous Event Request when an attached namespace changes",
    )
}

pub fn changed_namespace_list() -> Rule {
    rule(
        "NVMe 1.4 §5.14.1.4 Changed Namespace List (Log Identifier 04h)",
        "the log lists each NSID whose Identify Namespace data changed since it was last read",
    )
}

pub fn data_integrity() -> Rule {
    rule("NVMe 1.4 Read command (NVM Command Set)", "a read returns the data last written to each logical block")
}

pub fn format_erases_data() -> Rule {
    rule(
        "NVMe 1.4 §5.23 Format NVM",
        "after the Format NVM command successfully completes, the controller shall not return any user data that \
         was previously contained in an affected namespace",
    )
}

pub fn unwritten_blocks() -> Rule {
    rule(
        "NVMe 1.4 §6.7.1.1 Deallocated or Unwritten Logical Blocks and Figure 245 (DLFEAT bits 2:0)",
        "a logical block never written (as every block of a namespace just created) reads as DLFEAT reports a \
         deallocated block reads, never as data of another namespace; advisory where DLFEAT reports no read \
         behaviour (000b)",
    )
}

pub fn created_as_requested() -> Rule {
    rule(
        "NVMe 1.4 §5.20 Namespace Management (Create) and Figure 245 (NSZE, NCAP)",
        "a namespace is created with the size (NSZE) and capacity (NCAP) the host specified, and Identify \
         Namespace reports them",
    )
}

pub fn created_unattached() -> Rule {
    rule(
        "NVMe 1.4 §5.20 Namespace Management (Create) and §6.1.5 NSID and Namespace Usage",
        "a namespace just created is attached to no controller: it is inactive until a Namespace Attachment attaches it",
    )
}

pub fn deleted_namespace_gone() -> Rule {
    rule(
        "NVMe 1.4 §5.20 Namespace Management (Delete) and §5.15.2.1 (CNS 02h, CNS 10h)",
        "a deleted namespace is no longer allocated: neither the Allocated nor the Active Namespace ID list holds it",
    )
}

pub fn command_completes() -> Rule {
    rule(
        "NVMe 1.4 §4.6 Completion Queue Entry and §3.1.6 (CSTS.CFS)",
        "the controller posts a completion queue entry for every command it fetches — a command it cannot carry \
         out completes with an error status; a controller that cannot post it has failed (CSTS.CFS)",
    )
}

/// ONCS bit `bit`: the optional NVM command it advertises.
pub fn oncs(bit: u8, command: &str) -> Rule {
    rule(
        &format!("NVMe 1.4 Figure 247 (Identify Controller Data Structure), ONCS bit {bit}"),
        &format!("set, the controller supports the {command} command"),
    )
}

pub fn nsze_field() -> Rule {
    rule(
        "NVMe 1.4 Figure 245 (Identify Namespace Data Structure), NSZE",
        "NSZE is the total size of the namespace in logical blocks: LBA 0 through NSZE − 1 are its blocks, and the \
         drive's range checks (LBA Out of Range) end there",
    )
}

pub fn utilization() -> Rule {
    rule(
        "NVMe 1.4 Figure 245 (Identify Namespace Data Structure), NUSE, and §6.7.1.1",
        "NUSE is the number of logical blocks currently allocated in the namespace; a block written by a Write \
         command is allocated until it is deallocated",
    )
}

pub fn advertised_format() -> Rule {
    rule(
        "NVMe 1.4 Figure 245 (NLBAF, LBAF0–LBAF15) and §5.23 Format NVM",
        "each of the NLBAF + 1 LBA formats the namespace lists is supported: Format NVM to it succeeds, Identify \
         Namespace then reports it, and its logical blocks hold what is written",
    )
}

pub fn io_within_namespace() -> Rule {
    rule(
        "NVMe 1.4 §6.1 Namespaces; Read and Write commands (NVM Command Set)",
        "LBAs 0 through NSZE - 1 are valid: a Read or Write of them, within MDTS, completes successfully",
    )
}

pub fn identify_active() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify – CNS 00h",
        "for an active NSID (one attached to the controller) the controller returns that namespace's Identify \
         Namespace data structure, NSZE > 0",
    )
}

pub fn arbitration_selectable() -> Rule {
    rule(
        "NVMe 1.4 §3.1.5 Controller Configuration (CC.AMS) and §3.1.1 Controller Capabilities (CAP.AMS)",
        "with CAP.AMS bit 0 set, the host may select weighted round robin with urgent priority class: CC.AMS = 001b \
         is accepted when CC.EN is set to 1 and reads back as written",
    )
}

pub fn arbitration_feature() -> Rule {
    rule(
        "NVMe 1.4 §5.21.1.1 Arbitration (Feature Identifier 01h)",
        "Get Features (current) returns the Arbitration Burst and the High, Medium and Low Priority Weights that Set \
         Features set",
    )
}

pub fn weighted_round_robin() -> Rule {
    rule(
        "NVMe 1.4 §4.13.2 Weighted Round Robin with Urgent Priority Class Arbitration",
        "under weighted round robin, commands are taken from the High, Medium and Low priority classes in \
         proportion to their weights (HPW + 1, MPW + 1, LPW + 1) (advisory: a host sees completions, not the \
         fetch order; a drive that takes every queued command in at once serves all queues alike)",
    )
}

/// The order of the weighted classes: the part of §4.13.2 a host can confirm from
/// completions alone (a drive that takes every queued command in at once serves the
/// classes alike, never the lighter one more).
pub fn weighted_round_robin_order() -> Rule {
    rule(
        "NVMe 1.4 §4.13.2 Weighted Round Robin with Urgent Priority Class Arbitration",
        "under weighted round robin, a priority class with a larger weight (HPW + 1 > MPW + 1 > LPW + 1) is not \
         served fewer commands than a class with a smaller weight while both are kept full",
    )
}

pub fn urgent_first() -> Rule {
    rule(
        "NVMe 1.4 §4.13.2 Weighted Round Robin with Urgent Priority Class Arbitration",
        "the Urgent priority class is served by strict priority before the weighted classes: while urgent queues \
         have commands, High, Medium and Low queues wait (only the Admin class comes first) (advisory: a host \
         sees completions, not the fetch order)",
    )
}

pub fn round_robin_fair() -> Rule {
    rule(
        "NVMe 1.4 §4.13.1 Round Robin Arbitration",
        "under round robin every submission queue is served in turn with equal priority: queues kept equally full \
         get equal shares of the commands (advisory: the share a host sees also depends on the drive's internal \
         parallelism)",
    )
}

/// Power-fail rule (a): Flush and FUA make data durable.
pub fn flush_fua_durable() -> Rule {
    rule(
        "NVMe 1.4 §6.8 Flush command and §6.15 Write command (CDW12 FUA)",
        "the data of every write completed before a Flush was submitted, once the Flush completed, and of every \
         completed write sent with FUA, is on non-volatile media: a power loss does not take it back",
    )
}

/// Power-fail rule (b): without a volatile write cache every completed write is durable.
pub fn no_volatile_cache_durable() -> Rule {
    rule(
        "NVMe 1.4 §5.21.1.6 Volatile Write Cache (Feature 06h) and Identify Controller VWC",
        "with no volatile write cache present (VWC bit 0 cleared) or the cache disabled (WCE cleared), a write \
         completes only once its data is on non-volatile media: a power loss does not take back a completed write",
    )
}

/// Power-fail rule (c): after a power loss a block holds old or new data, nothing else.
pub fn power_fail_integrity() -> Rule {
    rule(
        "NVMe 1.4 §6.4 Atomic Operations (AWUPF) and Read command",
        "after a power failure each logical block holds the data it held or the data of a write to it that was \
         submitted (a write of one block is always within the atomic unit): never another block's data, data \
         no host wrote, or a torn block",
    )
}

/// Power-fail rule (d): writes within AWUPF are all-or-nothing.
pub fn atomic_write_unit_power_fail() -> Rule {
    rule(
        "NVMe 1.4 §6.4 Atomic Operations, Identify Controller AWUPF and Identify Namespace NAWUPF",
        "a write of at most AWUPF + 1 logical blocks (NAWUPF + 1 where NSFEAT bit 1 is set) is atomic across a \
         power failure: after it, all of its blocks hold the new data or all hold the old",
    )
}

/// Power-fail rule (e): SMART counts power cycles and unsafe shutdowns.
pub fn smart_power_counters() -> Rule {
    rule(
        "NVMe 1.4 §5.14.1.2 SMART / Health Information (Log Identifier 02h): Power Cycles, Unsafe Shutdowns",
        "Power Cycles counts every power cycle; Unsafe Shutdowns counts every power loss not preceded by a normal \
         shutdown notification (CC.SHN)",
    )
}

/// The SMART / Health log's traffic counters against the host's own traffic.
pub fn smart_host_traffic() -> Rule {
    rule(
        "NVMe 1.4 §5.14.1.2 SMART / Health Information (Log Identifier 02h): Data Units Read, Data Units Written, \
         Host Read Commands, Host Write Commands",
        "Data Units Read / Written count the user data read (Compare and Read) and written (Write) in thousands of \
         512-byte units, rounded up, metadata excluded and converted from other LBA sizes; Host Read Commands counts \
         the Read and Compare commands completed, Host Write Commands the Write commands completed",
    )
}

/// Power-fail rule (f): CSTS.RDY within CAP.TO.
pub fn ready_within_cap_to() -> Rule {
    rule(
        "NVMe 1.4 §3.1.1 Controller Capabilities (CAP.TO) and §7.6.1 Initialization",
        "CAP.TO is the worst-case time host software waits for CSTS.RDY to change from 0 to 1 after CC.EN is set \
         to 1: the controller is ready within it, after a power loss too",
    )
}

/// Power-fail rule (g): a normal shutdown completes and loses nothing.
pub fn normal_shutdown() -> Rule {
    rule(
        "NVMe 1.4 §7.6.2 Shutdown (CC.SHN, CSTS.SHST)",
        "after CC.SHN is set to 01b the controller completes shutdown processing, reports it with CSTS.SHST = 10b, \
         and the power may then be removed without losing any completed write",
    )
}

pub fn format_secure_erase(crypto: bool) -> Rule {
    if crypto {
        rule(
            "NVMe 1.4 §5.23 Format NVM, Figure 273 (SES 010b Cryptographic Erase)",
            "all user data of the namespaces the format reaches is erased cryptographically, by deleting the \
             encryption key: none of it can be read back",
        )
    } else {
        rule(
            "NVMe 1.4 §5.23 Format NVM, Figure 273 (SES 001b User Data Erase)",
            "all user data of the namespaces the format reaches is erased; what the blocks hold afterwards is \
             indeterminate, but never the data written before",
        )
    }
}

pub fn secure_erase_scope() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify Controller Data Structure (FNA bits 0 and 1) and §5.23 Format NVM",
        "a secure erase performed as part of a format applies to the namespace specified, unless FNA bit 1 \
         (secure erase applies to all namespaces) or bit 0 (format applies to all namespaces) is set: the other \
         namespaces keep their data",
    )
}

pub fn sanitize_erases_all() -> Rule {
    rule(
        "NVMe 1.4 §8.15 Sanitize Operations and §5.24 Sanitize command",
        "a sanitize operation alters all user data in the NVM subsystem, every namespace, so that no data \
         written before it can be recovered",
    )
}

pub fn sanitize_after_content(no_deallocate: bool) -> Rule {
    if no_deallocate {
        rule(
            "NVMe 1.4 §5.24 Sanitize command (NDAS, OVRPAT) and Figure 247 SANICAP (NODMMAS 01b)",
            "after an Overwrite with No-Deallocate After Sanitize, on a controller that does not modify the \
             media further (NODMMAS 01b), the blocks read as the last pass wrote them",
        )
    } else {
        rule(
            "NVMe 1.4 §5.24 Sanitize command (NDAS cleared) and Figure 245 (DLFEAT)",
            "after a sanitize without No-Deallocate After Sanitize the controller should deallocate the user \
             data: the blocks read as DLFEAT reports",
        )
    }
}

pub fn sanitize_failure_mode() -> Rule {
    rule(
        "NVMe 1.4 §8.15 Sanitize Operations (failure mode) and §5.24 Sanitize command (AUSE, Exit Failure Mode)",
        "after a sanitize operation failed, the restricted commands are aborted with Sanitize Failed until the \
         controller leaves failure mode: by Exit Failure Mode where the failed Sanitize set AUSE (unrestricted \
         completion mode), or by a sanitize operation that completes",
    )
}

pub fn sanitize_status_log() -> Rule {
    rule(
        "NVMe 1.4 §5.14.1.16 Sanitize Status (Log Identifier 81h)",
        "while a sanitize operation runs SSTAT reports 010b (in progress) with SPROG its progress; once it \
         completes, SSTAT reports 001b, SPROG FFFFh, SCDW10 the Command Dword 10 of the Sanitize command, and \
         Global Data Erased is set while nothing was written since",
    )
}

pub fn sanitize_restrictions() -> Rule {
    rule(
        "NVMe 1.4 §8.15 Sanitize Operations (restrictions while a sanitize operation is in progress)",
        "while a sanitize operation is in progress, I/O commands and admin commands other than those the \
         section allows (Identify, Get Log Page of the Sanitize Status, SMART and Error logs, Get Features, \
         Abort, Asynchronous Event Request …) are aborted with Sanitize In Progress",
    )
}

pub fn sanitize_event() -> Rule {
    rule(
        "NVMe 1.4 §5.2 Asynchronous Event Request, Figure 146 (I/O Command Specific status, 01h Sanitize \
         Operation Completed) and §8.15",
        "when a sanitize operation completes, the controller reports the Sanitize Operation Completed event to \
         an outstanding Asynchronous Event Request, with the Sanitize Status log (81h)",
    )
}

pub fn sanitize_resumes() -> Rule {
    rule(
        "NVMe 1.4 §8.15 Sanitize Operations",
        "a sanitize operation in progress when the NVM subsystem loses power resumes after power is restored, \
         and the restrictions hold until it completes",
    )
}

pub fn sanitize_completes() -> Rule {
    rule(
        "NVMe 1.4 §8.15 Sanitize Operations and Sanitize Status log (estimated times)",
        "a sanitize operation runs to completion (or fails) — advisory: the spec sets no time limit, nvtest \
         waits ten times the drive's own estimate",
    )
}

pub fn format_crypto_unsupported() -> Rule {
    rule(
        "NVMe 1.4 §5.23 Format NVM, Figure 273 (SES 010b), Figure 247 FNA bit 2 and Figure 128 (Invalid Field in \
         Command)",
        "Cryptographic Erase is supported only where FNA bit 2 is set; on a controller that clears it, SES 010b is \
         an unsupported value and the Format NVM completes with Invalid Field in Command",
    )
}

pub fn firmware_slot_log() -> Rule {
    rule(
        "NVMe 1.4 §5.14.1.3 Firmware Slot Information (Log Identifier 03h) and §5.12 Firmware Commit",
        "FRS of a slot reports the revision of the image committed to it; AFI reports the slot running and, \
         after a commit that activates at the next reset, that slot in bits 6:4; a commit that fails changes no slot",
    )
}

pub fn firmware_activation() -> Rule {
    rule(
        "NVMe 1.4 §5.12 Firmware Commit (Commit Action) and Figure 247 FR",
        "CA 000b activates nothing; CA 001b and 010b activate the image at the next reset, not before; CA 011b \
         activates it at once; after activation Identify Controller FR reports the image's revision",
    )
}

pub fn firmware_mtfa() -> Rule {
    rule(
        "NVMe 1.4 Figure 247 MTFA and §5.12 Firmware Commit (CA 011b)",
        "an activation without reset stops processing commands (CSTS.PP) for at most MTFA; an activation that \
         would take longer is refused with Firmware Activation Requires Maximum Time Violation",
    )
}

pub fn firmware_activation_io() -> Rule {
    rule(
        "NVMe 1.4 §5.12 Firmware Commit (CA 011b) and §3.1.6 CSTS.PP",
        "an activation without reset pauses processing and then resumes it with the new image: the commands \
         queued across it complete successfully and the namespaces keep their data",
    )
}

pub fn firmware_commit_statuses() -> Rule {
    rule(
        "NVMe 1.4 §5.12 Firmware Commit, Figure 175 (Invalid Firmware Slot, Invalid Firmware Image)",
        "a commit completes successfully when it can be carried out; a slot beyond FRMW's count, or a replace of a \
         read-only slot, is Invalid Firmware Slot; an image that is not valid is Invalid Firmware Image",
    )
}

pub fn firmware_activation_notice() -> Rule {
    rule(
        "NVMe 1.4 §5.2 Asynchronous Event Request, Figure 145 (Notice 01h Firmware Activation Starting) and Figure \
         247 OAES bit 9",
        "a controller that reports Firmware Activation Notices (OAES bit 9), with AEC bit 9 set, reports \
         Firmware Activation Starting to an outstanding Asynchronous Event Request when an activation without \
         reset begins",
    )
}

pub fn ports_one_subsystem() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify Controller Data Structure (VID, SSVID, SN, MN, SUBNQN) and §7.9 NVMe \
         Qualified Names",
        "every controller of one NVM subsystem reports the subsystem's identity: the same PCI Vendor and Subsystem \
         Vendor IDs, Serial Number, Model Number and NVM Subsystem NQN",
    )
}

pub fn cntlid_unique() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify Controller Data Structure (CNTLID)",
        "the Controller ID is unique within the NVM subsystem",
    )
}

pub fn cmic_multiple_controllers() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify Controller Data Structure (CMIC bit 1)",
        "a controller of an NVM subsystem that contains two or more controllers sets CMIC bit 1",
    )
}

pub fn subsystem_controller_list() -> Rule {
    rule(
        "NVMe 1.4 §5.15.2.1, Identify – CNS 13h (Controller list of controllers in the NVM subsystem)",
        "the list holds every controller of the NVM subsystem",
    )
}

pub fn attached_controllers_only() -> Rule {
    rule(
        "NVMe 1.4 §5.19 Namespace Attachment, §6.1.5 NSID and Namespace Usage and §8.11 (Namespace Management)",
        "a namespace is active only on the controllers it is attached to: another controller's Active Namespace ID \
         list does not hold it",
    )
}

pub fn namespace_is_private() -> Rule {
    rule(
        "NVMe 1.4 §5.19 Namespace Attachment, Figure 267 (Namespace Is Private) and Figure 245 (NMIC bit 0)",
        "attaching a private namespace (NMIC bit 0 clear) that is attached to a controller to another controller \
         fails with Namespace Is Private",
    )
}

pub fn shared_namespace_data() -> Rule {
    rule(
        "NVMe 1.4 §2.4.1 Multi-Path I/O and Namespace Sharing and Figure 245 (NMIC bit 0)",
        "a namespace shared by two or more controllers is one namespace: data written through any of them is read \
         back through every other",
    )
}

pub fn removed_drive_answers_nothing() -> Rule {
    rule(
        "PCI Express Base Specification, Hot-Plug (surprise removal); NVMe 1.4 §3.1.6 CSTS",
        "a drive pulled from its slot is gone from the bus: its function answers no request (a register read \
         returns all ones), so a host finds it gone and ends every command it had outstanding in an error within \
         the command timeout, never a hang",
    )
}

/// Hot-plug: the drive reinserted is the drive that was pulled.
pub fn same_drive_after_reinsertion() -> Rule {
    rule(
        "NVMe 1.4 Figure 247 (SN, MN, SUBNQN) and Figure 245 (NGUID, EUI64)",
        "a drive pulled and reinserted is the same NVM subsystem with the same namespaces: Serial Number, Model \
         Number and NVM Subsystem NQN are the subsystem's, and a namespace's NGUID and EUI64 are assigned when it \
         is created and preserved across controller operations for its life",
    )
}

/// Reservations: the command behaviour of each type toward each host.
pub fn reservation_access() -> Rule {
    rule(
        "NVMe 1.4 §8.8 Reservations, figure Command Behavior in the Presence of a Reservation",
        "under a reservation, a host's reads and writes of the namespace are carried out or aborted with \
         Reservation Conflict as its type and the host's standing (holder, registrant, non-registrant) say",
    )
}

/// Reservations: what Reservation Report returns.
pub fn reservation_report() -> Rule {
    rule(
        "NVMe 1.4 §6.13 Reservation Report and its Reservation Status data structure",
        "Reservation Report returns the namespace's reservation: its type (RTYPE) and every registered controller \
         with its key and whether its host holds the reservation",
    )
}

/// Reservations: Release and Clear.
pub fn reservation_release() -> Rule {
    rule(
        "NVMe 1.4 §8.8 Reservations (releasing a reservation) and §6.12 Reservation Release",
        "the holder's Release ends the reservation; a Release by a registrant that does not hold it completes and \
         changes nothing; a Clear releases the reservation and removes every registrant",
    )
}

/// Reservations: Preempt.
pub fn reservation_preempt() -> Rule {
    rule(
        "NVMe 1.4 §8.8 Reservations (preempting a reservation) and §6.10 Reservation Acquire",
        "a registrant's Acquire with Preempt and the holder's key as PRKEY removes the holder's registration and \
         makes the preempting host the holder of a reservation of the type asked",
    )
}

/// Reservations: the Reservation Notification log and its event.
pub fn reservation_notification() -> Rule {
    rule(
        "NVMe 1.4 §8.8 Reservations and §5.14.1.16 Reservation Notification log page (80h)",
        "a host whose registration is preempted gets a Reservation Notification log page of type Registration \
         Preempted for the namespace, announced by an Asynchronous Event (I/O Command Specific status, \
         Reservation Log Page Available), unless it masked that notification",
    )
}

/// Reservations: Persist Through Power Loss.
pub fn reservation_persistence() -> Rule {
    rule(
        "NVMe 1.4 §8.8 Reservations (Persist Through Power Loss), §6.11 Reservation Register (CPTPL) and Identify \
         Namespace RESCAP bit 0",
        "with Persist Through Power Loss set (CPTPL 11b, Reservation Report PTPLS 1), registrations and the \
         reservation are kept through a power loss",
    )
}

/// Dual port: a port's outage leaves the other ports serving.
pub fn other_ports_serve() -> Rule {
    rule(
        "NVMe 1.4 §2.4.1 Multi-Path I/O and Namespace Sharing",
        "the controllers of an NVM subsystem are paths of their own: while one port's link is down, the \
         controllers of the other ports carry out their commands, and the shared namespaces keep their data",
    )
}

pub fn atomic_write_normal() -> Rule {
    rule(
        "NVMe 1.4 §6.4.1 AWUN/NAWUN (Atomic Operations)",
        "a write of at most AWUN + 1 (NAWUN + 1) blocks that crosses no atomic boundary is atomic with respect to \
         other read or write commands: a read racing it returns each block's old data or its new data, not a mix",
    )
}

/// ANA: the groups the log page describes against the namespaces' ANAGRPIDs.
pub fn ana_groups() -> Rule {
    rule(
        "NVMe 1.4 §8.20.2 ANA Groups, §5.14.1.12 Asymmetric Namespace Access log page (0Ch), Figure 245 ANAGRPID \
         and Figure 247 ANAGRPMAX",
        "every attached namespace is a member of one ANA group: its Identify Namespace ANAGRPID is not 0h and at \
         most ANAGRPMAX, and its NSID is listed in exactly one ANA Group Descriptor, that group's; each descriptor \
         has a defined ANA state",
    )
}

/// ANA: the log page reports the current state through the controller read.
pub fn ana_log() -> Rule {
    rule(
        "NVMe 1.4 §5.14.1.12 Asymmetric Namespace Access log page (0Ch) and §8.20.3 ANA States",
        "the log page of a controller reports each ANA group's current state through that controller, its Change \
         Count increases when the page changes, and with RGO (Return Groups Only) the descriptors list no NSIDs",
    )
}

/// ANA: the Asymmetric Namespace Access Change notice.
pub fn ana_change_notice() -> Rule {
    rule(
        "NVMe 1.4 §8.20.4 ANA Reporting and §5.2.1 Asynchronous Event Request (Notice, Asymmetric Namespace Access \
         Change, enabled by Asynchronous Event Configuration bit 11)",
        "with ANA Change Notices enabled and an Asynchronous Event Request outstanding, a controller through which \
         an ANA group's state changed reports a Notice of type 010b, information 03h, log page 0Ch",
    )
}

/// ANA: which commands each state lets through.
pub fn ana_command_processing() -> Rule {
    rule(
        "NVMe 1.4 §8.20.3 ANA States and its figure of commands processed in each ANA state",
        "through a controller that reports a group ANA Optimized or Non-Optimized, I/O to its namespaces is \
         processed; in ANA Inaccessible or Persistent Loss it is not (admin commands such as Identify still are); \
         a state of one controller leaves the other controllers' paths to the namespace serving",
    )
}

/// ANA: the path related status of a refused command.
pub fn ana_path_status() -> Rule {
    rule(
        "NVMe 1.4 §8.20.3 ANA States and Figure 131 Path Related Status Values",
        "an I/O command not processed because of its namespace's ANA state completes with the path related status \
         of that state: Asymmetric Access Inaccessible (SCT 3h, SC 02h) in ANA Inaccessible state, Asymmetric \
         Access Persistent Loss (01h) in ANA Persistent Loss state",
    )
}

/// ANA: ANA Change state (a warning: nvtest could not confirm the spec requires the status).
pub fn ana_transition() -> Rule {
    rule(
        "NVMe 1.4 §8.20.3.5 ANA Change state and Figure 131 Path Related Status Values",
        "an I/O command to a namespace of a group in ANA Change state completes with Asymmetric Access Transition \
         (SCT 3h, SC 03h) so the host retries it later or on another path",
    )
}
