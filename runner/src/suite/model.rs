//! The suite vocabulary: what a YAML suite may say, as types.
//!
//! "YAML declares, Rust does": a suite is a list of cases, a case is a list of steps
//! from this fixed vocabulary with typed parameters. There is no expression language;
//! a procedure too complex for a few steps is one step (or one named check) here,
//! implemented and unit-tested in Rust (`crate::steps`).
//!
//! Parameters that vary across a case's `matrix` are written `$name` and resolved when
//! the matrix expands (see [`Param`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A whole suite file (`suites/NAME.yaml`).
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Short name, as given to `--suite` (`namespaces`, `trim`); kebab-case.
    #[schemars(pattern(r"^[a-z0-9]+(-[a-z0-9]+)*$"))]
    pub suite: String,
    pub title: String,
    /// The parts of the specification the suite checks ("NVMe 1.4 §6.7 Dataset Management").
    pub spec: Vec<String>,
    /// Requirements every case of the suite has; a device lacking one skips them all.
    #[serde(default)]
    pub requires: Vec<Requirement>,
    /// Whether the suite changes data or configuration on the drive.
    #[serde(default)]
    pub destructive: bool,
    #[schemars(length(min = 1))]
    pub cases: Vec<Case>,
}

/// One case: a rule checked by a sequence of steps.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = super::schema::read_only_unless_destructive)]
pub struct Case {
    /// kebab-case, unique in its suite; matrix values are appended (`boundaries/lbads=512`).
    #[schemars(pattern(r"^[a-z0-9]+(-[a-z0-9]+)*$"))]
    pub name: String,
    pub title: String,
    /// The rule this case checks, with its spec section and figure
    /// ("NVMe 1.4 §6.7, Figure 372: ranges beyond NSZE complete with LBA Out of Range").
    #[schemars(pattern(r"\S"))]
    pub rule: String,
    #[serde(default)]
    pub requires: Vec<Requirement>,
    /// Overrides the suite's `destructive` for this case. `false` is allowed only when
    /// every step only reads (identify, check, verify, compare, and io reads/compares/
    /// flushes): such cases run under `--preserve`.
    #[serde(default)]
    pub destructive: Option<bool>,
    /// `true` when the specification's text does not clearly require what the case
    /// checks (nvtest could not confirm a "shall"): a violation is then reported as a
    /// warning, which does not fail the run, instead of a failure.
    #[serde(default)]
    pub advisory: bool,
    /// Parameters whose values expand the case into one case per combination.
    #[serde(default)]
    #[schemars(with = "super::schema::Matrix")]
    pub matrix: BTreeMap<String, Vec<MatrixValue>>,
    #[schemars(length(min = 1))]
    pub steps: Vec<Step>,
}

/// A value a matrix parameter takes.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(untagged, expecting = "expected a matrix value: a whole number, true / false, or text")]
pub enum MatrixValue {
    Int(u64),
    Bool(bool),
    Text(String),
}

/// A parameter: a literal, or `$name` of a matrix parameter of the case.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(untagged, expecting = "expected a whole number or `$name` (a matrix parameter of the case)")]
pub enum Param<T> {
    Value(T),
    /// `$name`, kept with its `$`; only text starting with `$` is a variable, so plain
    /// words (`last`, `all`) reach the named alternatives of [`NsRef`], [`Lba`], [`Blocks`].
    Var(
        #[serde(deserialize_with = "dollar_name")]
        #[schemars(with = "String", pattern(r"^\$[a-z_][a-z0-9_]*$"))]
        String,
    ),
}

/// Accepts only `$name` (`$` then a-z, 0-9, `_`), so that `Param::Var` never swallows a
/// plain word meant for another alternative of an untagged enum.
fn dollar_name<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let text = String::deserialize(deserializer)?;
    let well_formed = text.strip_prefix('$').is_some_and(|name| {
        name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    });
    if well_formed {
        Ok(text)
    } else {
        Err(serde::de::Error::custom(format!("`{text}` is not `$name`")))
    }
}

/// What a device must offer for a case to run; otherwise the case is skipped with the
/// exact missing bit or version.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// VER (or VS) at least this ("1.3").
    Version(#[schemars(with = "super::schema::VersionText")] String),
    /// At least this many namespaces can be in use at once (NN, and MNAN where reported).
    Namespaces(u32),
    /// An LBA format with this data size (512, 4096) is supported.
    Lbads(#[schemars(with = "super::schema::DataSizeValue")] u32),
    /// OACS bit 3: Namespace Management and Namespace Attachment commands.
    NamespaceManagement,
    /// OACS bit 1: Format NVM command.
    FormatNvm,
    /// SANICAP bits 2:0: at least one sanitize operation (Crypto Erase, Block Erase,
    /// Overwrite) is supported (the Sanitize command, NVMe 1.3 and later).
    Sanitize,
    /// ONCS bit 0: Compare command.
    Compare,
    /// ONCS bit 2: Dataset Management command.
    DatasetManagement,
    /// ONCS bit 3: Write Zeroes command.
    WriteZeroes,
    /// Write Zeroes with Deallocate (DEAC, NVMe 1.3 and later).
    WriteZeroesDeallocate,
    /// VWC bit 0: a volatile write cache is present.
    VolatileWriteCache,
    /// OAES bit 8: Namespace Attribute Notices (asynchronous events on namespace changes).
    NamespaceAttributeNotices,
    /// nvtest's own host driver owns the controller (registers and queues reachable).
    UserspaceDriver,
    /// The target can switch the drive's power (the simulated drive; QEMU and hardware
    /// rigs later): the power-fail cases.
    PowerSwitch,
}

/// A status a step expects: a spec status name ("LBA Out of Range"), `success`, or
/// several acceptable ones.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(untagged, expecting = "expected a status name (`success`, `LBA Out of Range`, ...) or a list of them")]
pub enum Expect {
    One(String),
    AnyOf(Vec<String>),
}

/// A namespace of the case's namespace set (set up by `use_namespaces`), or a namespace
/// identifier chosen for what it is.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(
    untagged,
    expecting = "expected a namespace: a 1-based index, `$name`, or one of all, last, unallocated, beyond_nn, broadcast, zero"
)]
pub enum NsRef {
    /// 1-based position in the namespace set.
    Index(Param<u32>),
    Named(NsName),
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NsName {
    /// Every namespace of the set (where a step accepts several).
    All,
    /// The last namespace of the set.
    Last,
    /// A namespace identifier in 1..=NN that is not allocated.
    Unallocated,
    /// NN + 1: never a valid namespace identifier.
    BeyondNn,
    /// FFFFFFFFh, the broadcast value.
    Broadcast,
    /// 0: never a valid namespace identifier for an I/O command.
    Zero,
}

/// A logical block address in a namespace.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(
    untagged,
    expecting = "expected an LBA: a whole number, `$name`, one of last, end, middle, `{from_end: k}` or `{spread: k}`"
)]
pub enum Lba {
    At(Param<u64>),
    Named(LbaName),
    /// `{from_end: k}`: NSZE - k.
    #[schemars(extend("additionalProperties" = false))]
    FromEnd {
        from_end: u64,
    },
    /// `{spread: k}` (`write` only): k extents evenly spaced across the namespace, the
    /// i-th at NSZE × i / (k + 1): a sample of its interior besides its first, middle
    /// and last blocks.
    #[schemars(extend("additionalProperties" = false))]
    Spread {
        spread: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LbaName {
    /// NSZE - 1, the last valid LBA.
    Last,
    /// NSZE, the first LBA past the namespace.
    End,
    /// The middle of the namespace.
    Middle,
}

/// A namespace size in logical blocks.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(
    untagged,
    expecting = "expected a block count: a whole number, `$name`, or one of remaining, more_than_remaining, whole"
)]
pub enum Blocks {
    Count(Param<u64>),
    Named(BlocksName),
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BlocksName {
    /// All unallocated capacity (UNVMCAP) in blocks of the requested size.
    Remaining,
    /// One block more than the unallocated capacity holds.
    MoreThanRemaining,
    /// The whole namespace (for deallocate / verify ranges).
    Whole,
}

/// One job of a `workload` step: a stream of queued commands on an I/O queue of its own.
/// Percentages of `read`, `write`, `deallocate` and `flush` add up to 100.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadJob {
    /// Unique in the step; names the job's figures (`JOB.read.latency.p99.9_us`).
    pub name: String,
    #[schemars(with = "super::schema::OneNamespace")]
    pub ns: NsRef,
    /// The first LBA of the job's range (default 0).
    #[serde(default)]
    pub lba: Option<Lba>,
    /// Blocks of the job's range (default: to the end of the namespace).
    #[serde(default)]
    #[schemars(with = "Option<super::schema::RangeBlocks>")]
    pub blocks: Option<Blocks>,
    #[serde(default)]
    pub read: Option<Param<u32>>,
    #[serde(default)]
    pub write: Option<Param<u32>>,
    #[serde(default)]
    pub deallocate: Option<Param<u32>>,
    #[serde(default)]
    pub flush: Option<Param<u32>>,
    #[serde(default)]
    pub pattern: Option<AccessPattern>,
    /// Bytes per command, one drawn per command (each a multiple of the LBA data size);
    /// default one block.
    #[serde(default)]
    pub sizes: Vec<Param<u32>>,
    pub queue_depth: Param<u32>,
    /// The port whose controller runs the job's queue: 1 (default) the controller nvtest
    /// opened, 2 the next controller of its NVM subsystem, … (as the `port` step numbers
    /// them): jobs on several ports load a multi-port drive through all of them at once.
    #[serde(default)]
    pub port: Option<Param<u32>>,
    /// QPRIO of the job's submission queue, served by it under weighted round robin.
    #[serde(default)]
    pub priority: Option<QueuePriorityName>,
    /// Writes sent with FUA, in percent.
    #[serde(default)]
    pub fua: Option<Param<u32>>,
    /// Rate limit in commands per second, or in decimal megabytes per second (one of them).
    #[serde(default)]
    pub iops: Option<Param<u64>>,
    #[serde(default)]
    pub mb_per_s: Option<Param<u64>>,
    /// The job ends after this many commands, or after this long (one of them).
    #[serde(default)]
    pub commands: Option<Param<u64>>,
    #[serde(default)]
    pub duration_ms: Option<Param<u64>>,
    /// Commands submitted in the first milliseconds are judged but not counted in figures.
    #[serde(default)]
    pub warmup_ms: Option<Param<u64>>,
}

/// How a job walks its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AccessPattern {
    Random,
    Sequential,
}

/// QPRIO names (Create I/O Submission Queue, CDW11 bits 2:1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueuePriorityName {
    Urgent,
    High,
    Medium,
    Low,
}

/// A read-QoS judgement over a workload's jobs: with a claims file, the read job takes the
/// claim's read rate and block size and the write job its background write rate, and the
/// read job's latency at the claim's percentile must be within the claim's bound; without
/// one, the jobs run as written and their figures are reported.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QosJudgement {
    pub read_job: String,
    #[serde(default)]
    pub write_job: Option<String>,
    /// Which `read_qos` claim (its `name`); default the first.
    #[serde(default)]
    pub claim: Option<String>,
}

/// I/O commands for the raw `io` step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IoOp {
    Read,
    Write,
    Compare,
    WriteZeroes,
    Flush,
}

/// One range of a Dataset Management deallocate.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Range {
    pub lba: Lba,
    #[schemars(with = "super::schema::RangeBlocks")]
    pub blocks: Blocks,
}

/// Ranges of a deallocate: listed, or generated (`count` ranges of `blocks` blocks,
/// `stride` blocks apart from `start`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(untagged, expecting = "expected ranges: a list of `{lba, blocks}`, or `{count, blocks, stride, start}`")]
pub enum Ranges {
    List(Vec<Range>),
    #[schemars(extend("additionalProperties" = false))]
    Generated {
        count: Param<u32>,
        blocks: Param<u32>,
        stride: Param<u64>,
        #[serde(default)]
        start: u64,
    },
}

/// Named checks: a rule (or a small group of related rules) implemented in Rust,
/// each citing its section and figure when it fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckName {
    /// Identify Controller fields nvtest relies on are self-consistent (VER vs VS, NN,
    /// MNAN ≤ NN, SN/MN/FR printable ASCII, MDTS, CNTLID, SUBNQN for 1.2.1+).
    IdentifyController,
    /// The Active Namespace ID list (CNS 02h) is ascending, ≤ NN, and each listed
    /// namespace identifies with NSZE > 0; each unlisted one identifies as zeros.
    ActiveNamespaceList,
    /// For each namespace of the set: NCAP ≤ NSZE, NUSE ≤ NCAP.
    NamespaceSizes,
    /// For each namespace of the set: FLBAS selects a format ≤ NLBAF, LBADS ≥ 9, and the
    /// in-use format is the one requested.
    LbaFormats,
    /// NGUID and EUI64 are unique across the set (and non-zero where reported).
    UniqueIdentifiers,
    /// Every namespace of the set reports a globally unique identifier: a non-zero NGUID
    /// or EUI64, or a UUID descriptor (CNS 03h).
    IdentifiersPresent,
    /// Namespace Identification Descriptor lists (CNS 03h) agree with Identify Namespace
    /// NGUID / EUI64 and carry no duplicates.
    DescriptorLists,
    /// Allocated Namespace ID list (CNS 10h) contains every active namespace; Identify
    /// of an allocated namespace (CNS 11h) matches its active view.
    AllocatedNamespaceList,
    /// Controller lists (CNS 12h attached, 13h all) contain this controller as expected.
    ControllerLists,
    /// Every port the target reached is a controller of one NVM subsystem: the same
    /// SUBNQN, VID, SN and MN, a CNTLID of its own, CMIC bit 1 set, and CNS 13h on each
    /// listing every CNTLID.
    PortIdentity,
    /// With CMIC bit 3 (ANA reporting): every active namespace's ANAGRPID is 1 to
    /// ANAGRPMAX and its NSID is listed in exactly one descriptor of log page 0Ch, that
    /// group's; every descriptor's state is a defined ANA state.
    AnaGroups,
    /// Every namespace of the set is in the Active Namespace ID list exactly when the set
    /// says it is attached: after `controller_reset`, attach and detach persisted.
    AttachmentsPersist,
    /// For each namespace of the set: NUSE counts at least the blocks nvtest wrote there
    /// (and did not deallocate or zero since).
    NamespaceUtilization,
    /// SMART / Health Host Read and Write Commands and Data Units Read and Written move
    /// by at least the host's own traffic on the set's namespaces (writes with and without
    /// FUA, reads, compares: [`crate::steps::smart`]).
    SmartCountsHostTraffic,
    /// With CAP.AMS bit 0: CC.AMS = 001b (weighted round robin with urgent) is accepted
    /// at enable and reads back (round robin selected again afterwards).
    ArbitrationSelectable,
    /// Under weighted round robin: Set Features Arbitration (01h) then Get Features
    /// returns the same AB, LPW, MPW and HPW.
    ArbitrationFeature,
    /// Under weighted round robin with weights 8 : 4 : 2, queues of High, Medium and Low
    /// priority kept full get shares of the commands following the weights.
    WeightedRoundRobinShares,
    /// Under weighted round robin, a full Urgent queue is served before High and Low ones.
    UrgentPriorityFirst,
    /// Under round robin, queues kept equally full get equal shares (advisory).
    RoundRobinShares,
    /// Every capability the drive's claims promise (crypto erase, namespaces, firmware
    /// activation without reset, dual port, weighted round robin) is one Identify
    /// Controller (and CAP) reports; without claims there is nothing to judge.
    ClaimedCapabilities,
}

/// One step of a case.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Sets up the case's namespace set: on a controller that can create namespaces
    /// (OACS bit 3, and 0Dh supported in the Commands Supported and Effects log when the
    /// controller has that log), deletes every namespace and creates `count` namespaces
    /// of `blocks` blocks, their LBA data sizes taken in turn from `lbads`, attached to
    /// this controller; otherwise re-attaches detached namespaces and picks `count`
    /// existing active ones (skipping the case when there are too few). `create: true`
    /// always takes the creating path (the case is about creation). `shared: true` wants
    /// namespaces shared by every port (`port`): created with NMIC bit 0 set and attached
    /// to every port's controller, or found with NMIC bit 0 set and active on every port;
    /// the case skips on a target that reached one controller.
    UseNamespaces {
        #[schemars(with = "super::schema::SetCount")]
        count: Param<u32>,
        #[schemars(with = "Vec<super::schema::DataSize>")]
        lbads: Vec<Param<u32>>,
        blocks: Param<u64>,
        #[serde(default)]
        create: bool,
        #[serde(default)]
        shared: bool,
    },
    /// Sends the commands of the steps that follow through port `number` of the drive: 1
    /// the controller nvtest opened, 2 the next controller of its NVM subsystem the
    /// target brought up (the other port of a dual-port drive), and so on, until another
    /// `port` step. Skips the case when the target reached fewer controllers.
    Port {
        #[schemars(range(min = 1, max = 16))]
        number: u16,
    },
    /// A port going down under load and coming back: `jobs` run through port 1 while,
    /// `down_after_ms` into them, the link of port `port` goes down (the drive and its
    /// other ports run on). Port 1's commands must all succeed and every read return the
    /// data last written; a command through the downed port must end in an error (the
    /// host finds the controller gone), not hang; brought back, the port's controller is
    /// ready within CAP.TO with the CNTLID it had and reads back what port 1 wrote. Skips
    /// on a target that cannot take a port's link down.
    PortOutage(PortOutage),
    /// A private namespace (NMIC bit 0 clear) of two controllers' NVM subsystem: one found
    /// allocated, or one created, attached to port 1 only. Port 2 must not see it active;
    /// attaching it to port 2 as well must fail with Namespace Is Private; the Identify
    /// controller lists (CNS 12h) must name port 1's CNTLID alone. A namespace the step
    /// attached is detached again, one it created deleted.
    PrivateNamespace {},
    /// Reservations across two hosts (port 1's and port 2's, each given a Host Identifier
    /// of its own) on shared namespace `ns`: for every type RESCAP advertises, port 1's
    /// host acquires it; a read and a write from the holder, from port 2 as a registrant
    /// and as a non-registrant succeed or end in Reservation Conflict as NVMe 1.4 §8.8's
    /// figure "Command Behavior in the Presence of a Reservation" says; a Release by a
    /// registrant that holds nothing changes nothing; the holder's Release ends it.
    ReservationAccess {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
    },
    /// Port 2's host preempts port 1's reservation (Reservation Acquire, Preempt): port 1's
    /// registration is removed, port 2's host holds the reservation, and port 1's host is
    /// told (an Asynchronous Event, log page 80h Registration Preempted).
    ReservationPreempt {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
    },
    /// A registration made with CPTPL 11b (Persist Through Power Loss) and its
    /// reservation survive a power cycle. Skips on a target without a power switch.
    ReservationPowerLoss {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
    },
    /// Asymmetric Namespace Access (NVMe 1.4 §8.20) on shared namespace `ns`: on a target
    /// that reports ANA (CMIC bit 3) and can change a group's state (the simulated drive's
    /// test hook), the namespace's ANA group is walked through every state ANACAP reports
    /// on port 2 while port 1 stays ANA Optimized: the ANA Change notice on port 2, the log
    /// page 0Ch of both ports (with and without RGO), a Read and an Identify through port 2
    /// judged by the state (§8.20.3), a Read through port 1 served. Skips elsewhere.
    AnaStates {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
    },
    /// Sets up the case's namespace set read only: every active namespace as the drive
    /// has it (Identify CNS 02h, then Identify Namespace each); nothing is created,
    /// attached, formatted or written. The case is skipped when none is active.
    ExistingNamespaces {},
    /// A Controller Reset (CC.EN 1 → 0 → 1, queues set up again; on a kernel target the
    /// driver's reset). Skips the case on a target that cannot reset its controller.
    ControllerReset {},
    /// Deletes every namespace (Namespace Management, NSID FFFFFFFFh or one by one).
    DeleteAllNamespaces {},
    /// Creates one namespace and, on success, adds it to the set. The format is given
    /// by its LBA data size (`lbads`) or as a raw FLBAS index (`lbaf`), one of the two.
    #[schemars(transform = super::schema::one_format)]
    CreateNamespace {
        #[serde(default)]
        #[schemars(with = "Option<super::schema::DataSize>")]
        lbads: Option<Param<u32>>,
        #[serde(default)]
        lbaf: Option<Param<u8>>,
        #[schemars(with = "super::schema::NewNamespaceBlocks")]
        blocks: Blocks,
        #[serde(default)]
        expect: Option<Expect>,
    },
    /// Creates namespaces of `blocks` blocks until every NSID up to NN is allocated
    /// (attaching them), so the next create must find no identifier.
    CreateUntilFull {
        #[schemars(with = "super::schema::DataSize")]
        lbads: Param<u32>,
        blocks: Param<u64>,
    },
    DeleteNamespace {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
        #[serde(default)]
        expect: Option<Expect>,
    },
    /// Namespace Attachment (Controller Attach) to this controller.
    Attach {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
        #[serde(default)]
        expect: Option<Expect>,
    },
    /// Namespace Attachment (Controller Detach) from this controller.
    Detach {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
        #[serde(default)]
        expect: Option<Expect>,
    },
    /// Formats the namespace to every LBA format its table lists (index 0 to NLBAF, no
    /// protection information, metadata in a separate buffer), and for each: Identify
    /// Namespace reports it, and the first, middle and last blocks are written and read
    /// back (with their metadata). Formats back to the format it had at the end.
    FormatEachLbaFormat {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
    },
    /// Format NVM to the format with this LBA data size (or a raw format index).
    #[schemars(transform = super::schema::one_format)]
    Format {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
        #[serde(default)]
        #[schemars(with = "Option<super::schema::DataSize>")]
        lbads: Option<Param<u32>>,
        #[serde(default)]
        lbaf: Option<Param<u8>>,
        #[serde(default)]
        expect: Option<Expect>,
    },
    /// Tagged write: self-describing blocks, remembered by the host map. Split into
    /// commands of at most MDTS. With `ns: all`, namespaces are written in set order, or
    /// from the last to the first with `reverse: true` (so a write leaking into a
    /// neighbour is not overwritten by the neighbour's own write).
    Write {
        #[schemars(with = "super::schema::SetMembers")]
        ns: NsRef,
        lba: Lba,
        #[schemars(with = "super::schema::RangeBlocks")]
        blocks: Blocks,
        #[serde(default)]
        fua: bool,
        #[serde(default)]
        reverse: bool,
    },
    /// Reads and judges every block against the host map.
    Verify {
        #[schemars(with = "super::schema::SetMembers")]
        ns: NsRef,
        #[serde(default)]
        lba: Option<Lba>,
        #[serde(default)]
        #[schemars(with = "Option<super::schema::RangeBlocks>")]
        blocks: Option<Blocks>,
    },
    /// One raw I/O command with an expected status (boundaries, invalid fields).
    Io {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
        op: IoOp,
        lba: Lba,
        /// Number of blocks (1-based; the step sends NLB = blocks - 1).
        blocks: Param<u32>,
        #[serde(default)]
        expect: Option<Expect>,
    },
    /// A transfer of `blocks` blocks bigger than MDTS allows, expecting Invalid Field.
    IoBeyondMdts {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
        op: IoOp,
        #[serde(default)]
        expect: Option<Expect>,
    },
    /// Dataset Management with the Attribute – Deallocate (AD) bit.
    Deallocate {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
        ranges: Ranges,
        #[serde(default)]
        expect: Option<Expect>,
    },
    /// Deallocates the whole namespace in one range.
    DeallocateAll {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
    },
    WriteZeroes {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
        lba: Lba,
        blocks: Param<u32>,
        #[serde(default)]
        deac: bool,
        #[serde(default)]
        expect: Option<Expect>,
    },
    Flush {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
    },
    /// Compare against what the host map says the blocks hold (`mismatch: true` compares
    /// against altered data and expects Compare Failure).
    Compare {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
        lba: Lba,
        blocks: Param<u32>,
        #[serde(default)]
        mismatch: bool,
    },
    /// Sends an Identify with this CNS and NSID and expects a status; with
    /// `zero_filled: true` the returned data must be all zeros (inactive NSIDs).
    Identify {
        cns: u8,
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
        #[serde(default)]
        expect: Option<Expect>,
        #[serde(default)]
        zero_filled: bool,
    },
    Check(CheckName),
    /// Keeps Asynchronous Event Requests outstanding for the case and enables
    /// Namespace Attribute Notices (Set Features 0Bh).
    ArmAsyncEvents {},
    /// Expects a Notice – Namespace Attribute Changed event, then reads the Changed
    /// Namespace List (log 04h) and expects these namespaces in it.
    ExpectNamespaceChanged {
        #[schemars(with = "super::schema::OneNamespace")]
        ns: NsRef,
    },
    /// Jobs of queued I/O running at once, each on an I/O queue of its own, every write
    /// tagged and every read judged as it completes (runner/src/load); figures per job and
    /// operation (IOPS, MB/s, latency percentiles) go to the console, JUnit and the JSON
    /// record. `qos` judges a read-QoS claim. Skips on a target that cannot queue commands.
    Workload {
        jobs: Vec<WorkloadJob>,
        #[serde(default)]
        qos: Option<QosJudgement>,
    },
    /// A power-fail campaign (runner/src/power): `cycles` times, the jobs run and the
    /// power is cut at a seeded random instant within `cut_within_ms` of the load's start
    /// (with `shutdown: true`, after a normal shutdown instead, with nothing in flight);
    /// the drive is powered on, its ready time measured, SMART's counters compared and
    /// every block of the jobs' ranges judged. Skips on a target without a power switch.
    PowerFail(PowerFail),
    /// Format NVM of one namespace of the set with a Secure Erase Setting, in the LBA
    /// format it has (runner/src/steps/erase.rs). Then every block nvtest wrote to the
    /// namespaces the erase reaches (the one named, or all when FNA bit 0 or 1 says so)
    /// is read: none may still hold its data; the set's other namespaces keep theirs.
    /// Skips when OACS bit 1 is clear, or for `crypto` when FNA bit 2 is clear.
    FormatErase(FormatErase),
    /// A sanitize operation (NVMe 1.3+, runner/src/steps/erase.rs): Sanitize with the
    /// action, the Sanitize Status log followed to completion (its fields judged), and
    /// every block nvtest wrote to any namespace of the set read: none may still hold its
    /// data. Optionally probes the commands refused while it runs, cuts the power midway
    /// and expects the Sanitize Operation Completed event. Skips on a controller before
    /// 1.3 or whose SANICAP lacks the action.
    Sanitize(SanitizeStep),
    /// Firmware Image Download of nvtest's test image (or the vendor's, `--firmware`),
    /// then Firmware Commit with one commit action (runner/src/steps/firmware.rs),
    /// judged on the Firmware Slot Information log and on Identify Controller FR read
    /// from the drive, after the reset the action or the drive's status names (a
    /// Conventional or NVM Subsystem Reset by a power cycle). Skips when OACS bit 2 is
    /// clear, when the drive refuses the test image, and when it prohibits activation.
    FirmwareUpdate(FirmwareUpdate),
    /// Firmware Commit errors: a slot beyond FRMW's count, a replace of read-only slot 1,
    /// an image with a wrong CRC — each with the status §5.12 assigns, the slots unchanged.
    FirmwareErrors {},
    /// A drive found in sanitize failure mode (its last operation failed, SSTAT 011b):
    /// the restrictions with Sanitize Failed, then the way out its mode allows (Exit
    /// Failure Mode where the failed Sanitize set AUSE, else a new sanitize operation).
    /// Skips, saying what the log shows, on a drive not in failure mode.
    SanitizeFailureMode {},
}

/// The `port_outage` step's fields.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PortOutage {
    /// The port whose link goes down (2 or more: port 1 carries the load).
    #[schemars(range(min = 2, max = 16))]
    pub port: u16,
    /// When the link goes down, in ms after the load's start.
    pub down_after_ms: Param<u64>,
    /// The load through port 1.
    pub jobs: Vec<WorkloadJob>,
}

/// The `firmware_update` step's fields.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FirmwareUpdate {
    pub action: FirmwareAction,
    /// With `replace_and_activate_now`: a load the commit is sent into (`commit_after_ms`
    /// after its start), the workload engine keeping I/O queued across the activation;
    /// the same load runs once before and once after it, for the figures of each side.
    #[serde(default)]
    pub jobs: Vec<WorkloadJob>,
    /// When the commit is sent, in ms after the load's start (default 100).
    #[serde(default)]
    pub commit_after_ms: Option<Param<u64>>,
}

/// A Firmware Commit action (CA).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FirmwareAction {
    /// 000b: into the slot, not activated.
    Replace,
    /// 001b: into the slot, activated at the next reset.
    ReplaceAndActivateAtReset,
    /// 010b: the image in the slot (put there first with 000b) activated at the next reset.
    ActivateAtReset,
    /// 011b: into the slot and activated without a reset.
    ReplaceAndActivateNow,
}

/// The `format_erase` step's fields.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FormatErase {
    #[schemars(with = "super::schema::OneNamespace")]
    pub ns: NsRef,
    /// SES: `user_data` (001b) or `crypto` (010b, Cryptographic Erase).
    pub ses: EraseSetting,
    /// The case is about a controller without the setting (for `crypto`: FNA bit 2
    /// clear): the Format NVM must be refused with Invalid Field in Command and nothing
    /// erased. Skips when the controller reports the setting.
    #[serde(default)]
    pub unsupported: bool,
}

/// A Secure Erase Setting of Format NVM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EraseSetting {
    UserData,
    Crypto,
}

/// The `sanitize` step's fields.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SanitizeStep {
    pub action: SanitizeOperation,
    /// NDAS: No-Deallocate After Sanitize (skips when SANICAP.NDI inhibits it).
    #[serde(default)]
    pub no_deallocate: bool,
    /// Overwrite: the 32-bit pattern (OVRPAT), passes (OWPASS, 1–16) and whether it is
    /// inverted between passes (OIPBP).
    #[serde(default)]
    pub pattern: Option<u32>,
    #[serde(default)]
    pub passes: Option<u8>,
    #[serde(default)]
    pub invert: bool,
    /// While the operation runs: a Read, a Write and a Format NVM must be refused with
    /// Sanitize In Progress, Identify must succeed (NVMe 1.4 §8.15.1).
    #[serde(default)]
    pub probe_restrictions: bool,
    /// While the operation runs, the power is cut and restored: it must resume and finish
    /// (skips on a target without a power switch).
    #[serde(default)]
    pub power_cycle: bool,
    /// Asynchronous Event Requests are outstanding: the Sanitize Operation Completed
    /// event must arrive.
    #[serde(default)]
    pub expect_event: bool,
    /// AUSE: Allow Unrestricted Sanitize Exit (should the operation fail, Exit Failure
    /// Mode may end the failure mode).
    #[serde(default)]
    pub ause: bool,
    /// The longest wait for completion, in seconds; default: ten times the estimate the
    /// Sanitize Status log gives (at least 60 s), or an hour when it gives none.
    #[serde(default)]
    pub within_s: Option<u64>,
}

/// SANACT of a sanitize operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SanitizeOperation {
    BlockErase,
    CryptoErase,
    Overwrite,
}

/// The `power_fail` step's fields.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PowerFail {
    pub cycles: Param<u32>,
    /// The cut falls at a random instant in (0, cut_within_ms] of the load's start.
    pub cut_within_ms: Param<u64>,
    /// A normal shutdown (CC.SHN = 01b) before the power goes: nothing may be lost.
    #[serde(default)]
    pub shutdown: bool,
    /// The volatile write cache (Set Features 06h) for the campaign, set again after every
    /// power-on; default: as found.
    #[serde(default)]
    pub write_cache: Option<WriteCacheSetting>,
    /// Whether SMART / Health's Power Cycles and Unsafe Shutdowns are judged after each
    /// cycle (default `true`): a case about data alone sets `false`, so that a drive
    /// that counts wrongly fails the counters' case, not every data verdict with it.
    #[serde(default = "yes")]
    pub smart_counters: bool,
    /// The power goes because the drive is pulled from its slot (hot-plug): with
    /// `surprise` under load, the driver not told (it must find the controller gone and
    /// end every outstanding command in an error); with `orderly`, after the host stopped
    /// its I/O and shut every controller down. The drive is then reinserted: identity and
    /// namespaces unchanged, ready within CAP.TO. Default: a power cut in place.
    #[serde(default)]
    pub removal: Option<Removal>,
    /// The load: workload jobs of writes, reads and flushes (no deallocate).
    pub jobs: Vec<WorkloadJob>,
}

/// How a drive leaves its slot ([`PowerFail::removal`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Removal {
    Surprise,
    Orderly,
}

/// The volatile write cache a power-fail campaign runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteCacheSetting {
    AsFound,
    On,
    Off,
}

fn yes() -> bool {
    true
}
