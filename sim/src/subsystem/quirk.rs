//! Named deviations from the specification that a profile can switch on.
//!
//! Each quirk breaks exactly one rule and is implemented as a branch at the place in
//! the command code that enforces that rule (search for `Quirk::` to find it), never
//! as a global switch. Every quirk exists so that the suite case checking its rule can
//! be proven to catch a drive that breaks it — except the few whose doc comment says
//! they break no rule: behaviour the specification allows that a careless checker would
//! fail (`stale-after-deallocate`, `dsm-first-range-only`), kept to prove nvtest passes it.
//!
//! In profiles quirks are written in kebab-case (`stale-after-deallocate`).

use serde::Deserialize;
use std::fmt;

/// How many blocks at the end of a namespace quirk `erase-spares-last-blocks` leaves.
pub const ERASE_SPARED_BLOCKS: u64 = 64;

/// The blocks of `ns` an erase leaves as they were under quirks
/// `erase-spares-last-blocks` and `erase-spares-interior-band` (empty without them), to
/// put back once the erase ran.
pub fn erase_spared(quirks: &Quirks, ns: &super::namespace::Namespace) -> Vec<(u64, super::namespace::BlockState)> {
    let mut spared = Vec::new();
    if quirks.has(Quirk::EraseSparesLastBlocks) {
        spared.extend(ns.last_blocks(ERASE_SPARED_BLOCKS));
    }
    if quirks.has(Quirk::EraseSparesInteriorBand) {
        let start = ns.nsze / 4;
        spared.extend(ns.blocks_in(start..start + ns.nsze / 16));
    }
    spared
}

/// A named deviation from NVMe 1.4 (or 1.2a). The doc comment of each variant names
/// the rule it breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Quirk {
    /// Dataset Management with the Deallocate attribute takes no action: the blocks keep
    /// their data (and stay allocated in NUSE) although DLFEAT promises zeroes or ones.
    /// Breaks no rule: Dataset Management is advisory (NVMe 1.4 §6.7: a compliant
    /// controller may choose to take no action; Attribute – Deallocate: the NVM subsystem
    /// *may* deallocate), and a block that was not deallocated returns the last data
    /// written. QEMU without discard behaves so. Kept to prove nvtest does not fail it.
    StaleAfterDeallocate,
    /// A Write to namespace N also lands at the same LBA of the next active namespace.
    /// Breaks NVMe 1.4 §6.1: a namespace is an independent quantity of NVM.
    NamespaceWriteLeak,
    /// I/O whose range reaches or passes NSZE succeeds (reads return zeroes, writes are
    /// dropped). Breaks Figure 128: LBA Out of Range.
    LbaPastNszeAccepted,
    /// The Active Namespace ID list (CNS 02h) leaves out the highest active NSID.
    /// Breaks §5.15.2.1, Figure 244: the list holds every active NSID greater than NSID.
    ActiveListOmitsLast,
    /// Identify Controller NN is one less than the namespaces that can exist.
    /// Breaks Figure 247 NN: the maximum value of a valid NSID.
    NnUnderstated,
    /// A namespace formatted with 4096-byte blocks reports LBADS 12, but its LBA n starts at
    /// byte n × 512 of the media, so neighbouring blocks overlap. Breaks §6.1 and Figure 246:
    /// each LBA holds 2^LBADS bytes of its own.
    #[serde(rename = "format-4096-addresses-512")]
    Format4096Addresses512,
    /// Namespace Management create succeeds beyond the unallocated capacity. Breaks
    /// §5.20.1 and Figure 268: Namespace Insufficient Capacity.
    CreateBeyondCapacity,
    /// Deallocating a range also deallocates the block after it. Breaks §6.7.1.1:
    /// only the blocks in the ranges are deallocated.
    DeallocateWipesNeighbour,
    /// Every namespace reports the same NGUID and EUI64. Breaks §7.11 (Unique
    /// Identifier): NGUID and EUI64 are globally unique per namespace.
    DuplicateNguid,
    /// The Namespace Identification Descriptor list (CNS 03h) reports an NGUID different
    /// from Identify Namespace's. Breaks Figure 248 / §7.11: the descriptors are the same
    /// identifiers as the Identify Namespace fields.
    DescriptorListMismatch,
    /// Identify Namespace reports NCAP = NSZE + 1. Breaks Figure 245: NCAP ≤ NSZE.
    NcapExceedsNsze,
    /// Identify Namespace reports an FLBAS index greater than NLBAF. Breaks Figure 245:
    /// FLBAS bits 3:0 select one of the NLBAF + 1 formats.
    FlbasBeyondNlbaf,
    /// Attaching an attached namespace succeeds. Breaks §5.19, Figure 267: Namespace Already Attached.
    AttachTwiceSucceeds,
    /// Detaching a detached namespace succeeds. Breaks §5.19, Figure 267: Namespace Not Attached.
    DetachUnattachedSucceeds,
    /// Deleting an unallocated NSID succeeds. Breaks §5.20: Invalid Field in Command for
    /// an NSID that is not allocated.
    DeleteUnallocatedSucceeds,
    /// Creating a namespace when every NSID is in use returns Internal Error. Breaks
    /// §5.20, Figure 268: Namespace Identifier Unavailable.
    NsidExhaustionInternalError,
    /// The Changed Namespace List log page stays empty after attach and detach. Breaks
    /// §5.14.1.4: the log lists the namespaces whose attributes changed.
    ChangedListEmpty,
    /// No Namespace Attribute Changed asynchronous event is raised. Breaks §5.2 and
    /// Figure 146: the notice is sent when enabled and the active namespaces change.
    NoNamespaceNotice,
    /// I/O to an NSID that is not active (unallocated or not attached), to NSID 0, or to
    /// NSID FFFFFFFFh succeeds: reads of a namespace that is not there return zeroes, writes
    /// to it are dropped. Breaks §6.1 and Figure 128: Invalid Namespace or Format.
    InactiveNamespaceIoAccepted,
    /// Transfers larger than MDTS succeed. Breaks Figure 247 MDTS: Invalid Field in Command.
    MdtsNotEnforced,
    /// Write Zeroes completes successfully but leaves the data. Breaks §6.16: the
    /// blocks read back as zeroes.
    WriteZeroesIgnored,
    /// A Dataset Management range past NSZE succeeds (the valid part deallocated).
    /// Breaks §6.7 and Figure 128: LBA Out of Range, and nothing deallocated.
    DsmRangePastNszeAccepted,
    /// Only the first range of a multi-range Dataset Management is deallocated; the others
    /// keep their data. Breaks no rule: deallocation is advisory (§6.7: the controller may
    /// take no action on any range, and a block not deallocated returns the last data
    /// written). Kept to prove nvtest does not fail it; `dsm-later-ranges-corrupted` is
    /// the multi-range violation.
    DsmFirstRangeOnly,
    /// Format NVM succeeds without changing the format. Breaks §5.23: the namespace is
    /// formatted with the LBA format requested.
    FormatIgnored,
    /// Format NVM with an LBAF index greater than NLBAF succeeds (and is ignored), and
    /// Namespace Management create with an FLBAS index greater than NLBAF creates the
    /// namespace with LBA format 0. Breaks §5.23, Figure 273 and §5.20: Invalid Format.
    FormatInvalidLbafAccepted,
    /// Compare always succeeds. Breaks §6.5: Compare Failure when the data differ.
    CompareAlwaysSucceeds,
    /// The Allocated Namespace ID list (CNS 10h) lists only attached namespaces. Breaks
    /// §5.15.2.1: the list holds every allocated NSID.
    AllocatedListOmitsInactive,
    /// The Namespace Attached Controller list (CNS 12h) is empty for an attached
    /// namespace. Breaks §5.15.2.1: the list holds the controllers the namespace is attached to.
    ControllerListEmpty,
    /// Identify Namespace (CNS 00h) for an allocated but unattached NSID returns the
    /// namespace's data. Breaks §5.15.2.1, Figure 244: an inactive NSID returns a zero-filled structure.
    IdentifyInactiveNonzero,
    /// SN contains a non-printable byte. Breaks Figure 247 SN: ASCII characters (20h–7Eh).
    SerialNotAscii,
    /// Identify Controller VER is one minor version lower than the VS register. Breaks
    /// Figure 247 VER: the same value as VS.
    VerMismatch,
    /// Identify Namespace reports NUSE = NCAP + 1. Breaks Figure 245: NUSE ≤ NCAP.
    NuseExceedsNcap,
    /// A namespace created with a 4096-byte format reports (and uses) a 512-byte format
    /// instead. Breaks §5.20 / §8.11: the namespace uses the LBA format requested in FLBAS.
    LbafWrongSize,
    /// An I/O command (Read, Write, Compare, Write Zeroes, Write Uncorrectable) whose range
    /// includes LBA NSZE − 1 completes with LBA Out of Range: an off-by-one in the range
    /// check. Breaks §6.1: LBAs 0 through NSZE − 1 are valid.
    LastLbaRejected,
    /// A namespace formatted with 512-byte blocks reports LBADS 9, but its LBA n starts at
    /// byte n × 4096 of the media while each LBA still transfers 512 bytes, so a
    /// multi-block transfer runs on contiguously from n × 4096 over the places of later
    /// LBAs. Breaks §6.1 and Figure 246: each LBA holds 2^LBADS bytes of its own.
    #[serde(rename = "format-512-addresses-4096")]
    Format512Addresses4096,
    /// Namespace Attachment Controller Detach deallocates every block of the namespace:
    /// its data is gone when it is attached again. Breaks §8.11 / §5.19: attachment changes
    /// which controllers see a namespace, not its contents.
    DetachLosesData,
    /// Namespace Management delete with NSID FFFFFFFFh succeeds but deletes nothing.
    /// Breaks §5.20: NSID FFFFFFFFh deletes every namespace.
    DeleteBroadcastIgnored,
    /// A Dataset Management deallocate also deallocates the same LBA ranges (where they
    /// exist) in the next active namespace by NSID. Breaks §6.1: a namespace is an
    /// independent quantity of NVM, which a command to another namespace does not change.
    DeallocateLeaksToNextNamespace,
    /// Blocks deallocated by Dataset Management read back as all FFh bytes when DLFEAT
    /// reports that deallocated blocks read as zeroes (001b), and as all 00h when it
    /// reports ones (010b); nothing changes when DLFEAT reports neither. Breaks Figure 245
    /// DLFEAT bits 2:0: a deallocated logical block and its metadata read as the value
    /// DLFEAT reports.
    DeallocatedReadsWrongPattern,
    /// The ranges after the first of a Dataset Management deallocate read back as A5h
    /// bytes: neither the DLFEAT pattern nor the last data written. Breaks §6.7 (Attribute
    /// – Deallocate: a read of a deallocated range returns all zeroes, all ones or the last
    /// data written) and Figure 245 DLFEAT bits 2:0.
    DsmLaterRangesCorrupted,
    /// When the controller is enabled (after a Controller Reset), every allocated
    /// namespace not attached to it is attached, as QEMU 10.0 re-attaches its namespaces
    /// at every enable. Breaks §5.19 Namespace Attachment: attach and detach persist
    /// across all reset events.
    DetachUndoneByReset,
    /// A Write of a namespace whose format carries metadata in a separate buffer (MPTR)
    /// stores the blocks' data but not their metadata: reads return the metadata the
    /// blocks had before. Breaks §8.2 (Metadata Region): the metadata is part of the
    /// logical block and is returned with it.
    MetadataNotKept,
    /// Identify Namespace for an Allocated NSID (CNS 11h) returns a zero-filled structure
    /// for a namespace attached to no controller. Breaks §5.15.2.1: CNS 11h returns the
    /// Identify Namespace data of any allocated NSID, attached or not.
    AllocatedIdentifyZeroWhenDetached,
    /// Namespaces report no identifier: NGUID and EUI64 are zero and the Namespace
    /// Identification Descriptor list is empty. Breaks §7.11 (Unique Identifier) as NVMe
    /// 2.0 states it (CNS 03h identifies the namespace); advisory for 1.4.
    NoNamespaceIdentifiers,
    /// OACS bit 3 is set but Namespace Management (opcode 0Dh) completes with Invalid
    /// Command Opcode, and the Commands Supported and Effects log leaves it out, as QEMU
    /// 10.0 does. Breaks Figure 247 OACS bit 3: set, the controller supports the Namespace
    /// Management and Namespace Attachment commands.
    NamespaceManagementNotImplemented,
    /// Identify Namespace reports NSZE (and NCAP) one block smaller than the namespace
    /// is: LBA NSZE is read and written, range checks use the real size. Breaks Figure 245
    /// NSZE (the total size of the namespace in logical blocks) and, for a namespace the
    /// host created, §5.20 (the size the host specified).
    NszeUnderstated,
    /// The Namespace Attached Controller list (CNS 12h) keeps a controller after the
    /// namespace was detached from it. Breaks §5.15.2.1 (CNS 12h): the list holds the
    /// controllers the namespace is attached to.
    ControllerListStaleAfterDetach,
    /// A Namespace Management delete of one NSID succeeds and the namespace is gone, but
    /// the Allocated Namespace ID list (CNS 10h) still holds it until the NSID is used
    /// again. Breaks §5.20 (Delete) and §5.15.2.1 CNS 10h: a deleted NSID is not allocated.
    DeletedNamespaceStaysAllocated,
    /// A namespace created after a delete takes over the media of the namespace deleted
    /// last without clearing it: its never-written blocks read as the old namespace's
    /// data. Breaks §6.7.1.1 and Figure 245 DLFEAT: an unwritten logical block reads as
    /// DLFEAT reports.
    CreateKeepsOldMedia,
    /// Format NVM to the LBA format a namespace already has succeeds and changes nothing:
    /// the blocks keep their data. Breaks §5.23: after a successful Format NVM the
    /// controller shall not return any user data the namespace held.
    FormatKeepsData,
    /// Identify Namespace reports NUSE 0 whatever is written. Breaks Figure 245 NUSE: the
    /// number of logical blocks currently allocated, which a written block is.
    NuseNotUpdated,
    /// Format NVM to the last LBA format of the table (index NLBAF, when there are at
    /// least two) completes with Invalid Format. Breaks Figure 245 (LBAF0–LBAF15: the
    /// formats the namespace supports) and §5.23.
    FormatRejectsAdvertisedLbaf,
    /// A Namespace Attachment detach of a namespace not attached to the controller sets
    /// CSTS.CFS and posts no completion, as QEMU 10.0 ends on an assertion there. Breaks
    /// §4.6 and Figure 267: the command completes, with Namespace Not Attached.
    FatalOnDetachUnattached,
    /// ONCS bit 3 is set but Write Zeroes completes with Invalid Command Opcode. Breaks
    /// Figure 247 ONCS bit 3: set, the controller supports the Write Zeroes command.
    WriteZeroesNotImplemented,
    /// Flush of one namespace completes with Invalid Field in Command (the cache holds
    /// nothing to write back). Breaks §6.8: Flush is a mandatory command that commits the
    /// namespace's data and completes successfully.
    FlushRejected,
    /// The LBA Format table reports LBADS 0 for every 4096-byte format, which still works
    /// when a namespace is created or formatted with its index. Breaks Figure 245 (LBA
    /// Format Data Structure): LBADS of a listed format is at least 9.
    LbaFormatLbadsZero,
    /// Identify Namespace (CNS 00h) of a namespace attached by a Namespace Attachment
    /// command returns a zero-filled structure (as for an inactive NSID) until it is
    /// detached or deleted; the Active Namespace ID list does list it. Breaks §5.15.2.1
    /// CNS 00h: an active NSID returns its Identify Namespace data.
    IdentifyZeroAfterAttach,
    /// Reads wait for the programs queued on their die instead of suspending them: the
    /// drive has no read priority. Breaks no spec rule: breaks the datasheet's mixed-load
    /// read QoS claim (99.9 % of reads within 120 µs at 50,000 read IOPS beside a 500 MB/s
    /// write), a claim nvtest judges.
    ReadsQueuedBehindWrites,
    /// With weighted round robin selected, the High, Medium and Low classes are served as
    /// one plain round robin. Breaks §4.13.2: the classes are served in proportion to
    /// HPW + 1, MPW + 1 and LPW + 1.
    WrrWeightsIgnored,
    /// The Urgent class is served as one more weighted class (with High's weight) instead
    /// of strictly first. Breaks §4.13.2: Urgent SQs are served before any other I/O SQ.
    UrgentNotFirst,
    /// The Arbitration Burst is ignored: a turn takes one command from an SQ whatever AB
    /// says. Breaks §4.13 and Figure "Arbitration – Command Dword 11" AB: up to 2^AB
    /// commands are taken from an SQ at a time.
    ArbitrationBurstIgnored,
    /// CAP.AMS reports weighted round robin and CC.AMS = 001b is accepted (and reads back),
    /// but service stays plain round robin. Breaks §4.13 and Figure 78 CC.AMS: the selected
    /// arbitration mechanism is the one used.
    WrrNotEnabled,
    /// The first read of a block after each write of it returns the data it held before
    /// that write (once; later reads return the new data). Breaks §6.9 (Read returns the
    /// data of the logical blocks) and §6.3 "Command Ordering Requirements": a read
    /// submitted after a write completed returns that write's data.
    StaleReadAfterWrite,
    /// Get Features Arbitration (01h, current) returns the default value, not the one
    /// Set Features set. Breaks §5.21.1.1: the current value is the one last set.
    ArbitrationFeatureNotKept,
    /// CC.AMS is not stored: it reads back (and is latched at enable) as 000b, round robin,
    /// though CAP.AMS reports weighted round robin. Breaks §3.1.5 (CC.AMS is read/write).
    CcAmsNotKept,
    /// Under round robin the turn of the I/O submission queue created last is twice the
    /// arbitration burst. Breaks §4.13.1: every submission queue is served in turn with
    /// equal priority.
    RoundRobinFavoursLast,
    /// Flush completes successfully and makes nothing durable: writes completed before it may
    /// still be lost at a power loss. Breaks §6.8: Flush commits the data and metadata of
    /// commands completed before it to non-volatile media.
    FlushIgnored,
    /// A Write with FUA completes while its data is still in the volatile write cache. Breaks
    /// §6.15 (Figure 404, FUA): the data is written to non-volatile media before the command
    /// completes.
    FuaIgnored,
    /// A write within AWUPF may tear across a power loss (some blocks new, some old). Breaks
    /// §6.4 "Atomic Operations": after a power fail during a write of at most AWUPF + 1
    /// blocks, reads return all old or all new data.
    AtomicWriteTorn,
    /// After a power loss the first block of the last Write holds bytes no host wrote.
    /// Breaks §6.9 (a Read returns the data written to the block; a lost write leaves the
    /// data before it, never other data).
    ForeignDataAfterPowerLoss,
    /// SMART / Health Power Cycles and Unsafe Shutdowns never move. Breaks Figure 196: each
    /// counts power cycles, and power losses without a shutdown notification.
    PowerCountersNotIncremented,
    /// After an unsafe shutdown CSTS.RDY follows CC.EN one second later than CAP.TO allows.
    /// Breaks Figure 79 CAP.TO: the worst-case time for CSTS.RDY to change after CC.EN.
    ReadyAfterTimeout,
    /// After an unsafe shutdown the controller becomes ready at three quarters of CAP.TO.
    /// Breaks no spec rule: breaks a datasheet's ready time claim shorter than that.
    ReadySlowAfterPowerLoss,
    /// The profile promises power-loss protection, but completed writes still in the cache
    /// are lost at a power cut as without it. Breaks no spec rule while VWC reports a
    /// volatile write cache: breaks the datasheet's power-loss protection claim.
    LossProtectionCacheLost,
    /// After CC.SHN, CSTS.SHST stays 01b (processing) and never reports 10b. Breaks §7.6.2
    /// and Figure 85 SHST: shutdown processing completes and is reported as 10b.
    ShutdownStatusNeverReported,
    /// Set Features Volatile Write Cache (06h) with WCE cleared succeeds and Get Features
    /// reports it cleared, but writes still complete from the volatile cache and are lost
    /// at a power cut. Breaks §5.21.1.6: with the cache disabled a completed write is on
    /// non-volatile media.
    WriteCacheDisableIgnored,
    /// A cryptographic erase (Format NVM SES 010b, Sanitize Crypto Erase) succeeds but
    /// keeps the key and deallocates nothing: the old data reads back in plaintext.
    /// Breaks §5.23 (SES 010b: user data erased by deleting the key) and §8.15.
    CryptoEraseLeavesPlaintext,
    /// A Format NVM with a Secure Erase Setting erases every namespace although FNA bit 1
    /// is clear. Breaks Figure 247 FNA bit 1: the secure erase applies to the namespace
    /// specified.
    SecureEraseBeyondScope,
    /// A sanitize operation leaves the highest allocated namespace's data in place.
    /// Breaks §8.15: a sanitize alters all user data in the NVM subsystem.
    SanitizeMissesNamespace,
    /// A Format NVM with a Secure Erase Setting, and a sanitize operation, leave the last
    /// [`ERASE_SPARED_BLOCKS`] blocks of every namespace they reach as they were (a
    /// region the erase engine forgets). Breaks §5.23 (SES: all user data erased) and
    /// §8.15 (a sanitize alters all user data): only a check that reads the last blocks
    /// back sees it.
    EraseSparesLastBlocks,
    /// A Format NVM with a Secure Erase Setting, and a sanitize operation, leave a band
    /// inside every namespace they reach as it was: the blocks from NSZE/4 for NSZE/16
    /// blocks (an erase unit the engine skips). Breaks §5.23 (SES: all user data erased)
    /// and §8.15 (a sanitize alters all user data): only a check that reads blocks back
    /// across the namespace, not just its first, middle and last ones, sees it.
    EraseSparesInteriorBand,
    /// A sanitize operation never completes: SSTAT stays in progress (SPROG stops at FFFEh).
    /// Breaks §8.15 (the operation runs to completion or failure).
    SanitizeNeverCompletes,
    /// Commands run while a sanitize operation is in progress. Breaks §8.15.1: they are
    /// aborted with Sanitize In Progress.
    SanitizeAcceptsCommands,
    /// Compare runs while a sanitize operation is in progress (every other restricted
    /// command is refused). Breaks §8.15: a command the section does not allow is aborted
    /// with Sanitize In Progress.
    SanitizeAdmitsCompare,
    /// Write Uncorrectable runs while a sanitize operation is in progress (every other restricted
    /// command is refused). Breaks §8.15: a command the section does not allow is aborted
    /// with Sanitize In Progress.
    SanitizeAdmitsWriteUncorrectable,
    /// Write Zeroes runs while a sanitize operation is in progress (every other restricted
    /// command is refused). Breaks §8.15: a command the section does not allow is aborted
    /// with Sanitize In Progress.
    SanitizeAdmitsWriteZeroes,
    /// Dataset Management runs while a sanitize operation is in progress (every other restricted
    /// command is refused). Breaks §8.15: a command the section does not allow is aborted
    /// with Sanitize In Progress.
    SanitizeAdmitsDatasetManagement,
    /// Firmware Image Download runs while a sanitize operation is in progress (every other restricted
    /// command is refused). Breaks §8.15: a command the section does not allow is aborted
    /// with Sanitize In Progress.
    SanitizeAdmitsFirmwareDownload,
    /// Namespace Attachment runs while a sanitize operation is in progress (every other restricted
    /// command is refused). Breaks §8.15: a command the section does not allow is aborted
    /// with Sanitize In Progress.
    SanitizeAdmitsNamespaceAttachment,
    /// Verify runs while a sanitize operation is in progress (every other restricted
    /// command is refused). Breaks §8.15: a command the section does not allow is aborted
    /// with Sanitize In Progress.
    SanitizeAdmitsVerify,
    /// No Sanitize Operation Completed event is raised. Breaks §5.2 / Figure 146 (I/O
    /// Command Specific status, 01h) and §8.15.
    SanitizeNoCompletionEvent,
    /// A power cycle during a sanitize operation ends it: the data stays and commands run
    /// again. Breaks §8.15: the operation resumes after the power cycle.
    SanitizeLostOnPowerCycle,
    /// The Sanitize Status log never sets Global Data Erased (SSTAT bit 8), even right
    /// after a successful operation. Breaks the Sanitize Status log's definition (81h).
    GlobalDataErasedNeverSet,
    /// Identify Controller FNA bit 2 (Cryptographic Erase Supported) reads clear, yet a
    /// Format NVM with SES 010b succeeds. Breaks Figure 247 FNA bit 2 / §5.23: an
    /// unsupported SES is Invalid Field in Command. (QEMU 10.0 behaves so.)
    FnaHidesCryptoErase,
    /// A Firmware Commit that replaces a slot leaves FRS of that slot as it was. Breaks
    /// §5.14.1.3 Firmware Slot Information: FRS reports the slot's revision.
    FirmwareSlotLogStale,
    /// Commit action 011b succeeds but the image runs only after a reset. Breaks §5.12
    /// (CA 011b: activated immediately; otherwise a Firmware Activation Requires … Reset status).
    ActivationNeedsResetSilently,
    /// An activation without reset pauses processing for twice MTFA. Breaks Figure 247
    /// MTFA (the most time processing stops) and §5.12.
    ActivationBeyondMtfa,
    /// After an activation Identify Controller FR still reports the old revision.
    /// Breaks Figure 247 FR: the revision of the firmware running.
    FirmwareRevisionUnchanged,
    /// A Firmware Commit naming a slot beyond FRMW's count succeeds. Breaks §5.12,
    /// Figure 175: Invalid Firmware Slot.
    InvalidSlotAccepted,
    /// No Firmware Activation Starting notice when an activation without reset begins,
    /// though OAES bit 9 is set and enabled. Breaks §5.2 (Notice 01h).
    NoActivationNotice,
    /// I/O commands fetched in the first 50 ms after an activation without reset ends
    /// its pause complete with Internal Error. Breaks §5.12 (CA 011b: the controller
    /// resumes processing commands with the new image; I/O is not lost to it).
    IoFailsDuringActivation,
    /// After commit action 001b or 010b the Firmware Slot Information log's AFI bits 6:4
    /// still read 0. Breaks §5.14.1.3: AFI names the slot activated at the next reset.
    AfiNextSlotUnset,
    /// Commit actions 001b and 010b start the new image at once: FR reports it before any
    /// reset. Breaks §5.12 (the image is activated at the next reset) and Figure 247 FR.
    FirmwareRunsBeforeReset,
    /// Commit action 000b activates the image as well. Breaks §5.12 (CA 000b: the image
    /// is not activated).
    ReplaceActivates,
    /// A Firmware Commit of an image that fails the drive's checks succeeds (nothing is
    /// stored). Breaks §5.12, Figure 175: Invalid Firmware Image.
    BadImageAccepted,
    /// Slot 1 is read-only (FRMW bit 0) yet a replace into it succeeds. Breaks §5.12,
    /// Figure 175: Invalid Firmware Slot for a read-only slot.
    ReadOnlySlotWritable,
    /// Commit action 001b (replace and activate at the next reset) replaces the image
    /// in read-only slot 1 (action 000b is refused as it should be). Breaks Figure 175:
    /// Invalid Firmware Slot for a read-only slot, whatever action replaces the image.
    ReadOnlySlotReplacedAtReset,
    /// Commit action 011b (replace and activate now) replaces the image in read-only
    /// slot 1 (action 000b is refused). Breaks Figure 175 as above.
    ReadOnlySlotReplacedNow,
    /// A commit refused with Invalid Firmware Image still writes the slot's FRS (the
    /// revision from the refused image). Breaks §5.12: a failed commit changes no slot.
    RefusedCommitChangesSlot,
    /// A Firmware Commit naming a slot beyond FRMW's count is refused with Invalid Field
    /// in Command rather than Invalid Firmware Slot: refused, with the generic status
    /// instead of the one §5.12 (Figure 175) names. nvtest warns.
    InvalidSlotGenericStatus,
    /// The Sanitize Status log reads SPROG FFFFh (no operation) while SSTAT says one is in
    /// progress. Breaks §5.14.1.16: SPROG is the fraction completed.
    SprogFfffInProgress,
    /// After an operation completes SPROG stays FFFEh. Breaks §5.14.1.16: SPROG is FFFFh
    /// when no operation is in progress.
    SprogStuckAfterCompletion,
    /// SCDW10 of the Sanitize Status log reads 0. Breaks §5.14.1.16: SCDW10 is the
    /// Command Dword 10 of the Sanitize command that started the operation.
    Scdw10NotRecorded,
    /// Identify is refused with Sanitize In Progress while an operation runs. Breaks
    /// §8.15.1: Identify is allowed.
    IdentifyRefusedDuringSanitize,
    /// Get Log Page of the Sanitize Status log is refused with Sanitize In Progress
    /// while an operation runs. Breaks §8.15.1 and §5.14.1.16: the log is how the host follows it.
    SanitizeStatusLogRefused,
    /// After a power cycle during an operation SSTAT reads 000b (never sanitized) though
    /// the operation resumes. Breaks §8.15 and §5.14.1.16.
    SanitizeStatusResetByPowerCycle,
    /// After an Overwrite the media holds the inverse of what its last pass writes: with
    /// No-Deallocate After Sanitize it then reads otherwise than §5.24 says (a 'should'
    /// with NODMMAS 01b: nvtest warns).
    OverwriteFinalPassInverted,
    /// A sanitize without No-Deallocate After Sanitize leaves the blocks as the operation
    /// wrote them, not deallocated: they read otherwise than DLFEAT says (a 'should' of
    /// §5.24: nvtest warns).
    SanitizeSkipsDeallocation,
    /// After a sanitize operation failed, I/O commands run as if nothing had: failure
    /// mode restricts nothing. Breaks §8.15: the restrictions hold in failure mode (Sanitize Failed).
    FailureModeAcceptsIo,
    /// Exit Failure Mode (unrestricted completion mode) succeeds but the controller stays
    /// in failure mode. Breaks §8.15 / §5.24 (SANACT 001b).
    ExitFailureModeIgnored,
    /// A read through a controller other than the one whose write last changed the
    /// blocks returns what they held before that write (data written on one port is
    /// stale on the others; the last 256 writes are remembered); reads through the
    /// writing port are right. Breaks NVMe 1.4 §2.4.1 (Multi-Path I/O and Namespace
    /// Sharing) and Figure 245 NMIC bit 0: a shared namespace is one namespace, data
    /// written through any controller is read back through every other.
    PortStaleData,
    /// Every port's Identify Controller reports the first port's CNTLID. Breaks Figure
    /// 247 CNTLID (§5.15.2.1): the Controller ID is unique within the NVM subsystem.
    CntlidDuplicate,
    /// Attaching a private namespace (NMIC bit 0 clear) that is attached to a controller
    /// to another controller succeeds. Breaks §5.19, Figure 267: Namespace Is Private.
    PrivateNamespaceAttachedTwice,
    /// Identify Controller CMIC reports 0 although the subsystem has two or more
    /// controllers (one per port). Breaks Figure 247 CMIC bits 0 (two or more ports) and
    /// 1 (two or more controllers).
    CmicSingleController,
    /// While the PCIe link of one port is down, I/O commands on every other port
    /// complete with Namespace Not Ready. Breaks §2.4.1 (Multi-Path I/O and Namespace
    /// Sharing): each controller is an independent path to the shared namespace, so a
    /// path going away leaves the others serving.
    PortDownStallsOthers,
    /// With its power gone (the drive pulled from its slot, or its power cut), the
    /// function goes on answering register reads as a controller just reset (CSTS 0,
    /// not all ones) and configuration reads as before, and completes nothing: the host
    /// cannot tell it is gone, and the commands it had outstanding hang until their
    /// timeout. Breaks surprise removal as PCI Express defines it (a function that is
    /// gone answers no request, reads returning all ones), on which a host's removal
    /// handling rests.
    RemovedFunctionAnswers,
    /// Every namespace's NGUID and EUI64 change at each power-on (the drive reinserted
    /// comes back with other namespace identifiers). Breaks Figure 245 NGUID and EUI64:
    /// assigned when the namespace is created and preserved across controller
    /// operations, for the life of the namespace.
    NguidChangesAfterPowerCycle,
    /// A write (Write Command Group) from a host that is not a registrant succeeds under
    /// any reservation. Breaks NVMe 1.4 §8.8, figure "Command Behavior in the Presence of a
    /// Reservation": a non-registrant's Write Command Group command is aborted with
    /// Reservation Conflict under every reservation type.
    ReservationNotEnforced,
    /// Under an Exclusive Access – Registrants Only reservation a host that is not a
    /// registrant may read. Breaks NVMe 1.4 §8.8, figure "Command Behavior in the Presence
    /// of a Reservation": Read Command Group from a non-registrant, Exclusive Access –
    /// Registrants Only: Reservation Conflict.
    RegistrantsOnlyLetsAnyoneRead,
    /// A power cut clears every namespace's registrations and reservation, even with the
    /// Persist Through Power Loss state set. Breaks NVMe 1.4 §8.8 and §6.11 (CPTPL 11b /
    /// Feature 83h PTPL): reservations and registrants persist across a power loss.
    ReservationLostDespitePtpl,
    /// A Preempt (or Preempt and Abort) adds no Reservation Notification log page and
    /// raises no Asynchronous Event. Breaks NVMe 1.4 §8.8 and the Reservation
    /// Notification log page (Get Log Page 80h, §5.14.1): a host whose registration is preempted gets a
    /// Registration Preempted page and the Reservation Log Page Available event.
    ReservationLogNotRaised,
    /// A Release from a registrant that does not hold the reservation releases it. Breaks
    /// NVMe 1.4 §8.8 "Releasing a Reservation": such a Release completes successfully but
    /// has no effect on the reservation.
    ReleaseByNonHolderReleases,
    /// A group reported ANA Inaccessible (or Persistent Loss, or Change) through a
    /// controller still serves I/O to its namespaces there. Breaks NVMe 1.4 §8.20.3 and
    /// its figure of commands processed per ANA state: in those states the controller
    /// does not process I/O commands to the group's namespaces.
    AnaStateNotHonoured,
    /// A changed ANA state raises no Asymmetric Namespace Access Change notice. Breaks
    /// NVMe 1.4 §8.20.4 and §5.2.1 (Notice, information 03h, log page 0Ch, enabled by
    /// Asynchronous Event Configuration bit 11).
    AnaChangeNotNotified,
    /// The ANA log page (0Ch) keeps showing the states the groups had before a change.
    /// Breaks NVMe 1.4 §5.14.1.12: the log reports each group's current ANA state
    /// through the controller.
    AnaLogStale,
    /// I/O to a namespace of an ANA Inaccessible (Persistent Loss, Change) group fails
    /// with Namespace Not Ready instead of the path related status. Breaks NVMe 1.4
    /// Figure 131 and §8.20.3: Asymmetric Access Inaccessible, Persistent Loss, Transition.
    AnaWrongStatus,
    /// The ANA log page lists the highest active NSID in no group descriptor. Breaks
    /// NVMe 1.4 §5.14.1.12 and §8.20.2: every attached namespace is a member of one ANA
    /// group, listed with its NSID in that group's descriptor.
    AnaLogOmitsNamespace,
    /// A read of a block that a Write is changing (fetched, its completion not yet posted)
    /// returns the first half of the block as it was before the write and the rest as the
    /// write leaves it, whatever the write's size. Where AWUN covers the write, breaks
    /// NVMe 1.4 §6.4.1: such a write is atomic "with respect to other read or write
    /// commands" (nvtest's reading, so its case ends in a warning).
    TornReadUnderWrite,
    /// With weighted round robin selected, the High class is served by the Low Priority
    /// Weight and the Low class by the High Priority Weight (Medium keeps its own). Breaks
    /// §4.13.2: the classes are served in proportion to HPW + 1, MPW + 1 and LPW + 1, so
    /// a class with a larger weight is never served less than one with a smaller weight.
    WrrWeightsInverted,
    /// Data Units Read counts each logical block as one 512-byte unit, whatever the LBA
    /// data size. Breaks §5.14.1.2 (Data Units Read: thousands of 512-byte units; a
    /// controller with another LBA size converts): seen on a namespace of 4096-byte blocks.
    DataUnitsReadInBlocks,
    /// Data Units Written counts each logical block as one 512-byte unit. Breaks
    /// §5.14.1.2 (Data Units Written), as above.
    DataUnitsWrittenInBlocks,
    /// Host Read Commands leaves Compare commands out. Breaks §5.14.1.2 (Host Read
    /// Commands: for the NVM command set, Compare and Read commands).
    HostReadsOmitCompare,
    /// Host Write Commands leaves out Write commands with Force Unit Access (counted where
    /// the write cache takes data, which FUA bypasses). Breaks §5.14.1.2 (Host Write
    /// Commands: the Write commands the controller completed): only a check whose
    /// writes include FUA ones sees it.
    HostWritesOmitFua,
}

impl Quirk {
    /// Every quirk, in declaration order.
    pub const ALL: &'static [Quirk] = &[
        Quirk::StaleAfterDeallocate,
        Quirk::NamespaceWriteLeak,
        Quirk::LbaPastNszeAccepted,
        Quirk::ActiveListOmitsLast,
        Quirk::NnUnderstated,
        Quirk::Format4096Addresses512,
        Quirk::CreateBeyondCapacity,
        Quirk::DeallocateWipesNeighbour,
        Quirk::DuplicateNguid,
        Quirk::DescriptorListMismatch,
        Quirk::NcapExceedsNsze,
        Quirk::FlbasBeyondNlbaf,
        Quirk::AttachTwiceSucceeds,
        Quirk::DetachUnattachedSucceeds,
        Quirk::DeleteUnallocatedSucceeds,
        Quirk::NsidExhaustionInternalError,
        Quirk::ChangedListEmpty,
        Quirk::NoNamespaceNotice,
        Quirk::InactiveNamespaceIoAccepted,
        Quirk::MdtsNotEnforced,
        Quirk::WriteZeroesIgnored,
        Quirk::DsmRangePastNszeAccepted,
        Quirk::DsmFirstRangeOnly,
        Quirk::FormatIgnored,
        Quirk::FormatInvalidLbafAccepted,
        Quirk::CompareAlwaysSucceeds,
        Quirk::AllocatedListOmitsInactive,
        Quirk::ControllerListEmpty,
        Quirk::IdentifyInactiveNonzero,
        Quirk::SerialNotAscii,
        Quirk::VerMismatch,
        Quirk::NuseExceedsNcap,
        Quirk::LbafWrongSize,
        Quirk::LastLbaRejected,
        Quirk::Format512Addresses4096,
        Quirk::DetachLosesData,
        Quirk::DeleteBroadcastIgnored,
        Quirk::DeallocateLeaksToNextNamespace,
        Quirk::DeallocatedReadsWrongPattern,
        Quirk::DsmLaterRangesCorrupted,
        Quirk::DetachUndoneByReset,
        Quirk::MetadataNotKept,
        Quirk::AllocatedIdentifyZeroWhenDetached,
        Quirk::NoNamespaceIdentifiers,
        Quirk::NamespaceManagementNotImplemented,
        Quirk::NszeUnderstated,
        Quirk::ControllerListStaleAfterDetach,
        Quirk::DeletedNamespaceStaysAllocated,
        Quirk::CreateKeepsOldMedia,
        Quirk::FormatKeepsData,
        Quirk::NuseNotUpdated,
        Quirk::FormatRejectsAdvertisedLbaf,
        Quirk::FatalOnDetachUnattached,
        Quirk::WriteZeroesNotImplemented,
        Quirk::FlushRejected,
        Quirk::LbaFormatLbadsZero,
        Quirk::IdentifyZeroAfterAttach,
        Quirk::ReadsQueuedBehindWrites,
        Quirk::WrrWeightsIgnored,
        Quirk::UrgentNotFirst,
        Quirk::ArbitrationBurstIgnored,
        Quirk::WrrNotEnabled,
        Quirk::StaleReadAfterWrite,
        Quirk::ArbitrationFeatureNotKept,
        Quirk::CcAmsNotKept,
        Quirk::RoundRobinFavoursLast,
        Quirk::FlushIgnored,
        Quirk::FuaIgnored,
        Quirk::AtomicWriteTorn,
        Quirk::ForeignDataAfterPowerLoss,
        Quirk::PowerCountersNotIncremented,
        Quirk::ReadyAfterTimeout,
        Quirk::ReadySlowAfterPowerLoss,
        Quirk::LossProtectionCacheLost,
        Quirk::ShutdownStatusNeverReported,
        Quirk::WriteCacheDisableIgnored,
        Quirk::CryptoEraseLeavesPlaintext,
        Quirk::SecureEraseBeyondScope,
        Quirk::SanitizeMissesNamespace,
        Quirk::EraseSparesLastBlocks,
        Quirk::SanitizeNeverCompletes,
        Quirk::SanitizeAcceptsCommands,
        Quirk::SanitizeNoCompletionEvent,
        Quirk::SanitizeLostOnPowerCycle,
        Quirk::GlobalDataErasedNeverSet,
        Quirk::FnaHidesCryptoErase,
        Quirk::FirmwareSlotLogStale,
        Quirk::ActivationNeedsResetSilently,
        Quirk::ActivationBeyondMtfa,
        Quirk::FirmwareRevisionUnchanged,
        Quirk::InvalidSlotAccepted,
        Quirk::NoActivationNotice,
        Quirk::IoFailsDuringActivation,
        Quirk::AfiNextSlotUnset,
        Quirk::FirmwareRunsBeforeReset,
        Quirk::ReplaceActivates,
        Quirk::BadImageAccepted,
        Quirk::ReadOnlySlotWritable,
        Quirk::RefusedCommitChangesSlot,
        Quirk::InvalidSlotGenericStatus,
        Quirk::SprogFfffInProgress,
        Quirk::SprogStuckAfterCompletion,
        Quirk::Scdw10NotRecorded,
        Quirk::IdentifyRefusedDuringSanitize,
        Quirk::SanitizeStatusLogRefused,
        Quirk::SanitizeStatusResetByPowerCycle,
        Quirk::OverwriteFinalPassInverted,
        Quirk::SanitizeSkipsDeallocation,
        Quirk::FailureModeAcceptsIo,
        Quirk::ExitFailureModeIgnored,
        Quirk::PortStaleData,
        Quirk::CntlidDuplicate,
        Quirk::PrivateNamespaceAttachedTwice,
        Quirk::CmicSingleController,
        Quirk::PortDownStallsOthers,
        Quirk::RemovedFunctionAnswers,
        Quirk::NguidChangesAfterPowerCycle,
        Quirk::ReservationNotEnforced,
        Quirk::RegistrantsOnlyLetsAnyoneRead,
        Quirk::ReservationLostDespitePtpl,
        Quirk::ReservationLogNotRaised,
        Quirk::ReleaseByNonHolderReleases,
        Quirk::AnaStateNotHonoured,
        Quirk::AnaChangeNotNotified,
        Quirk::AnaLogStale,
        Quirk::AnaWrongStatus,
        Quirk::AnaLogOmitsNamespace,
        Quirk::TornReadUnderWrite,
        Quirk::WrrWeightsInverted,
        Quirk::EraseSparesInteriorBand,
        Quirk::SanitizeAdmitsCompare,
        Quirk::SanitizeAdmitsWriteUncorrectable,
        Quirk::SanitizeAdmitsWriteZeroes,
        Quirk::SanitizeAdmitsDatasetManagement,
        Quirk::SanitizeAdmitsFirmwareDownload,
        Quirk::SanitizeAdmitsNamespaceAttachment,
        Quirk::SanitizeAdmitsVerify,
        Quirk::ReadOnlySlotReplacedAtReset,
        Quirk::ReadOnlySlotReplacedNow,
        Quirk::DataUnitsReadInBlocks,
        Quirk::DataUnitsWrittenInBlocks,
        Quirk::HostReadsOmitCompare,
        Quirk::HostWritesOmitFua,
    ];

    /// The name a profile uses for this quirk.
    pub fn name(self) -> &'static str {
        match self {
            Quirk::StaleAfterDeallocate => "stale-after-deallocate",
            Quirk::NamespaceWriteLeak => "namespace-write-leak",
            Quirk::LbaPastNszeAccepted => "lba-past-nsze-accepted",
            Quirk::ActiveListOmitsLast => "active-list-omits-last",
            Quirk::NnUnderstated => "nn-understated",
            Quirk::Format4096Addresses512 => "format-4096-addresses-512",
            Quirk::CreateBeyondCapacity => "create-beyond-capacity",
            Quirk::DeallocateWipesNeighbour => "deallocate-wipes-neighbour",
            Quirk::DuplicateNguid => "duplicate-nguid",
            Quirk::DescriptorListMismatch => "descriptor-list-mismatch",
            Quirk::NcapExceedsNsze => "ncap-exceeds-nsze",
            Quirk::FlbasBeyondNlbaf => "flbas-beyond-nlbaf",
            Quirk::AttachTwiceSucceeds => "attach-twice-succeeds",
            Quirk::DetachUnattachedSucceeds => "detach-unattached-succeeds",
            Quirk::DeleteUnallocatedSucceeds => "delete-unallocated-succeeds",
            Quirk::NsidExhaustionInternalError => "nsid-exhaustion-internal-error",
            Quirk::ChangedListEmpty => "changed-list-empty",
            Quirk::NoNamespaceNotice => "no-namespace-notice",
            Quirk::InactiveNamespaceIoAccepted => "inactive-namespace-io-accepted",
            Quirk::MdtsNotEnforced => "mdts-not-enforced",
            Quirk::WriteZeroesIgnored => "write-zeroes-ignored",
            Quirk::DsmRangePastNszeAccepted => "dsm-range-past-nsze-accepted",
            Quirk::DsmFirstRangeOnly => "dsm-first-range-only",
            Quirk::FormatIgnored => "format-ignored",
            Quirk::FormatInvalidLbafAccepted => "format-invalid-lbaf-accepted",
            Quirk::CompareAlwaysSucceeds => "compare-always-succeeds",
            Quirk::AllocatedListOmitsInactive => "allocated-list-omits-inactive",
            Quirk::ControllerListEmpty => "controller-list-empty",
            Quirk::IdentifyInactiveNonzero => "identify-inactive-nonzero",
            Quirk::SerialNotAscii => "serial-not-ascii",
            Quirk::VerMismatch => "ver-mismatch",
            Quirk::NuseExceedsNcap => "nuse-exceeds-ncap",
            Quirk::LbafWrongSize => "lbaf-wrong-size",
            Quirk::LastLbaRejected => "last-lba-rejected",
            Quirk::Format512Addresses4096 => "format-512-addresses-4096",
            Quirk::DetachLosesData => "detach-loses-data",
            Quirk::DeleteBroadcastIgnored => "delete-broadcast-ignored",
            Quirk::DeallocateLeaksToNextNamespace => "deallocate-leaks-to-next-namespace",
            Quirk::DeallocatedReadsWrongPattern => "deallocated-reads-wrong-pattern",
            Quirk::DsmLaterRangesCorrupted => "dsm-later-ranges-corrupted",
            Quirk::DetachUndoneByReset => "detach-undone-by-reset",
            Quirk::MetadataNotKept => "metadata-not-kept",
            Quirk::AllocatedIdentifyZeroWhenDetached => "allocated-identify-zero-when-detached",
            Quirk::NoNamespaceIdentifiers => "no-namespace-identifiers",
            Quirk::NamespaceManagementNotImplemented => "namespace-management-not-implemented",
            Quirk::NszeUnderstated => "nsze-understated",
            Quirk::ControllerListStaleAfterDetach => "controller-list-stale-after-detach",
            Quirk::DeletedNamespaceStaysAllocated => "deleted-namespace-stays-allocated",
            Quirk::CreateKeepsOldMedia => "create-keeps-old-media",
            Quirk::FormatKeepsData => "format-keeps-data",
            Quirk::NuseNotUpdated => "nuse-not-updated",
            Quirk::FormatRejectsAdvertisedLbaf => "format-rejects-advertised-lbaf",
            Quirk::FatalOnDetachUnattached => "fatal-on-detach-unattached",
            Quirk::WriteZeroesNotImplemented => "write-zeroes-not-implemented",
            Quirk::FlushRejected => "flush-rejected",
            Quirk::LbaFormatLbadsZero => "lba-format-lbads-zero",
            Quirk::IdentifyZeroAfterAttach => "identify-zero-after-attach",
            Quirk::ReadsQueuedBehindWrites => "reads-queued-behind-writes",
            Quirk::WrrWeightsIgnored => "wrr-weights-ignored",
            Quirk::UrgentNotFirst => "urgent-not-first",
            Quirk::ArbitrationBurstIgnored => "arbitration-burst-ignored",
            Quirk::WrrNotEnabled => "wrr-not-enabled",
            Quirk::StaleReadAfterWrite => "stale-read-after-write",
            Quirk::ArbitrationFeatureNotKept => "arbitration-feature-not-kept",
            Quirk::CcAmsNotKept => "cc-ams-not-kept",
            Quirk::RoundRobinFavoursLast => "round-robin-favours-last",
            Quirk::FlushIgnored => "flush-ignored",
            Quirk::FuaIgnored => "fua-ignored",
            Quirk::AtomicWriteTorn => "atomic-write-torn",
            Quirk::ForeignDataAfterPowerLoss => "foreign-data-after-power-loss",
            Quirk::PowerCountersNotIncremented => "power-counters-not-incremented",
            Quirk::ReadyAfterTimeout => "ready-after-timeout",
            Quirk::ReadySlowAfterPowerLoss => "ready-slow-after-power-loss",
            Quirk::LossProtectionCacheLost => "loss-protection-cache-lost",
            Quirk::ShutdownStatusNeverReported => "shutdown-status-never-reported",
            Quirk::WriteCacheDisableIgnored => "write-cache-disable-ignored",
            Quirk::CryptoEraseLeavesPlaintext => "crypto-erase-leaves-plaintext",
            Quirk::SecureEraseBeyondScope => "secure-erase-beyond-scope",
            Quirk::SanitizeMissesNamespace => "sanitize-misses-namespace",
            Quirk::EraseSparesLastBlocks => "erase-spares-last-blocks",
            Quirk::SanitizeNeverCompletes => "sanitize-never-completes",
            Quirk::SanitizeAcceptsCommands => "sanitize-accepts-commands",
            Quirk::SanitizeNoCompletionEvent => "sanitize-no-completion-event",
            Quirk::SanitizeLostOnPowerCycle => "sanitize-lost-on-power-cycle",
            Quirk::GlobalDataErasedNeverSet => "global-data-erased-never-set",
            Quirk::FnaHidesCryptoErase => "fna-hides-crypto-erase",
            Quirk::FirmwareSlotLogStale => "firmware-slot-log-stale",
            Quirk::ActivationNeedsResetSilently => "activation-needs-reset-silently",
            Quirk::ActivationBeyondMtfa => "activation-beyond-mtfa",
            Quirk::FirmwareRevisionUnchanged => "firmware-revision-unchanged",
            Quirk::InvalidSlotAccepted => "invalid-slot-accepted",
            Quirk::NoActivationNotice => "no-activation-notice",
            Quirk::IoFailsDuringActivation => "io-fails-during-activation",
            Quirk::AfiNextSlotUnset => "afi-next-slot-unset",
            Quirk::FirmwareRunsBeforeReset => "firmware-runs-before-reset",
            Quirk::ReplaceActivates => "replace-activates",
            Quirk::BadImageAccepted => "bad-image-accepted",
            Quirk::ReadOnlySlotWritable => "read-only-slot-writable",
            Quirk::RefusedCommitChangesSlot => "refused-commit-changes-slot",
            Quirk::InvalidSlotGenericStatus => "invalid-slot-generic-status",
            Quirk::SprogFfffInProgress => "sprog-ffff-in-progress",
            Quirk::SprogStuckAfterCompletion => "sprog-stuck-after-completion",
            Quirk::Scdw10NotRecorded => "scdw10-not-recorded",
            Quirk::IdentifyRefusedDuringSanitize => "identify-refused-during-sanitize",
            Quirk::SanitizeStatusLogRefused => "sanitize-status-log-refused",
            Quirk::SanitizeStatusResetByPowerCycle => "sanitize-status-reset-by-power-cycle",
            Quirk::OverwriteFinalPassInverted => "overwrite-final-pass-inverted",
            Quirk::SanitizeSkipsDeallocation => "sanitize-skips-deallocation",
            Quirk::FailureModeAcceptsIo => "failure-mode-accepts-io",
            Quirk::ExitFailureModeIgnored => "exit-failure-mode-ignored",
            Quirk::PortStaleData => "port-stale-data",
            Quirk::CntlidDuplicate => "cntlid-duplicate",
            Quirk::PrivateNamespaceAttachedTwice => "private-namespace-attached-twice",
            Quirk::CmicSingleController => "cmic-single-controller",
            Quirk::PortDownStallsOthers => "port-down-stalls-others",
            Quirk::RemovedFunctionAnswers => "removed-function-answers",
            Quirk::NguidChangesAfterPowerCycle => "nguid-changes-after-power-cycle",
            Quirk::ReservationNotEnforced => "reservation-not-enforced",
            Quirk::RegistrantsOnlyLetsAnyoneRead => "registrants-only-lets-anyone-read",
            Quirk::ReservationLostDespitePtpl => "reservation-lost-despite-ptpl",
            Quirk::ReservationLogNotRaised => "reservation-log-not-raised",
            Quirk::ReleaseByNonHolderReleases => "release-by-non-holder-releases",
            Quirk::AnaStateNotHonoured => "ana-state-not-honoured",
            Quirk::AnaChangeNotNotified => "ana-change-not-notified",
            Quirk::AnaLogStale => "ana-log-stale",
            Quirk::AnaWrongStatus => "ana-wrong-status",
            Quirk::AnaLogOmitsNamespace => "ana-log-omits-namespace",
            Quirk::TornReadUnderWrite => "torn-read-under-write",
            Quirk::WrrWeightsInverted => "wrr-weights-inverted",
            Quirk::EraseSparesInteriorBand => "erase-spares-interior-band",
            Quirk::SanitizeAdmitsCompare => "sanitize-admits-compare",
            Quirk::SanitizeAdmitsWriteUncorrectable => "sanitize-admits-write-uncorrectable",
            Quirk::SanitizeAdmitsWriteZeroes => "sanitize-admits-write-zeroes",
            Quirk::SanitizeAdmitsDatasetManagement => "sanitize-admits-dataset-management",
            Quirk::SanitizeAdmitsFirmwareDownload => "sanitize-admits-firmware-download",
            Quirk::SanitizeAdmitsNamespaceAttachment => "sanitize-admits-namespace-attachment",
            Quirk::SanitizeAdmitsVerify => "sanitize-admits-verify",
            Quirk::ReadOnlySlotReplacedAtReset => "read-only-slot-replaced-at-reset",
            Quirk::ReadOnlySlotReplacedNow => "read-only-slot-replaced-now",
            Quirk::DataUnitsReadInBlocks => "data-units-read-in-blocks",
            Quirk::DataUnitsWrittenInBlocks => "data-units-written-in-blocks",
            Quirk::HostReadsOmitCompare => "host-reads-omit-compare",
            Quirk::HostWritesOmitFua => "host-writes-omit-fua",
        }
    }

    /// Looks a quirk up by its profile name.
    pub fn from_name(name: &str) -> Option<Quirk> {
        Quirk::ALL.iter().copied().find(|q| q.name() == name)
    }
}

impl fmt::Display for Quirk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The quirks a subsystem runs with. Usually empty or one or two entries, so a linear
/// search is the cheapest lookup on the I/O path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Quirks(Vec<Quirk>);

impl Quirks {
    pub fn new(list: &[Quirk]) -> Quirks {
        let mut v = list.to_vec();
        v.sort();
        v.dedup();
        Quirks(v)
    }

    /// Whether `quirk` is on.
    #[inline]
    pub fn has(&self, quirk: Quirk) -> bool {
        !self.0.is_empty() && self.0.contains(&quirk)
    }

    pub fn list(&self) -> &[Quirk] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for q in Quirk::ALL {
            assert_eq!(Quirk::from_name(q.name()), Some(*q));
            let parsed: Quirk = serde_saphyr::from_str(q.name()).unwrap();
            assert_eq!(parsed, *q, "{q}");
        }
        assert_eq!(Quirk::from_name("no-such-quirk"), None);
    }
}
