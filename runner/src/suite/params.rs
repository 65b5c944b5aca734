//! What validation and matrix expansion need to know about each step: where its
//! parameters are (path, numeric type, whether it is an LBA data size), its `expect`, the
//! fields of which exactly one must be given, the maps serde does not check for unknown
//! keys (struct variants of untagged enums), and names used where the step cannot take
//! them (`ns: all` in a one-namespace step, `blocks: remaining` outside create_namespace).
//!
//! One exhaustive `match` over [`Step`]: a new step, or a new parameter of a step, must be
//! listed here, or `$name` in it would never be substituted. The compiler enforces the
//! first; the second is a line in the step's arm.

use super::model::{Blocks, BlocksName, Expect, Lba, NsName, NsRef, Param, Range, Ranges, Step, WorkloadJob};
use super::spans::{key, Seg};

/// A numeric parameter slot, borrowed from a step so that expansion can fill it in.
pub enum Slot<'a> {
    U8(&'a mut Param<u8>),
    U32(&'a mut Param<u32>),
    U64(&'a mut Param<u64>),
}

impl Slot<'_> {
    /// The type's name, for messages ("u32").
    pub fn type_name(&self) -> &'static str {
        match self {
            Slot::U8(_) => "u8",
            Slot::U32(_) => "u32",
            Slot::U64(_) => "u64",
        }
    }

    /// The largest value the slot holds.
    pub fn max(&self) -> u64 {
        match self {
            Slot::U8(_) => u8::MAX.into(),
            Slot::U32(_) => u32::MAX.into(),
            Slot::U64(_) => u64::MAX,
        }
    }

    /// `Some("$name")` when the slot holds a matrix variable.
    pub fn var(&self) -> Option<&str> {
        match self {
            Slot::U8(Param::Var(v)) | Slot::U32(Param::Var(v)) | Slot::U64(Param::Var(v)) => Some(v),
            _ => None,
        }
    }

    /// The literal value, when the slot holds one.
    pub fn literal(&self) -> Option<u64> {
        match self {
            Slot::U8(Param::Value(v)) => Some((*v).into()),
            Slot::U32(Param::Value(v)) => Some((*v).into()),
            Slot::U64(Param::Value(v)) => Some(*v),
            _ => None,
        }
    }

    /// Replaces the slot's content by `value`; an error if the value does not fit.
    pub fn set(&mut self, value: u64) -> Result<(), String> {
        let type_name = self.type_name();
        let too_big = || format!("{value} does not fit a {type_name}");
        match self {
            Slot::U8(p) => **p = Param::Value(u8::try_from(value).map_err(|_| too_big())?),
            Slot::U32(p) => **p = Param::Value(u32::try_from(value).map_err(|_| too_big())?),
            Slot::U64(p) => **p = Param::Value(value),
        }
        Ok(())
    }
}

/// One numeric parameter of a step.
pub struct ParamField<'a> {
    /// Path below the step's body (`["ranges", 0, "blocks"]`).
    pub path: Vec<Seg>,
    pub slot: Slot<'a>,
    /// An LBA data size in bytes: a power of two, at least 512.
    pub data_size: bool,
}

/// The parts of one step that validation and expansion look at.
#[derive(Default)]
pub struct StepParts<'a> {
    pub params: Vec<ParamField<'a>>,
    pub expect: Option<&'a Expect>,
    /// Fields of which exactly one must be given, and whether each is.
    pub exactly_one: Vec<(&'static str, bool)>,
    /// Maps written as struct variants of untagged enums, with the keys they allow.
    pub closed_maps: Vec<(Vec<Seg>, &'static [&'static str])>,
    /// Names this step cannot take, and what it takes instead.
    pub misuses: Vec<(Vec<Seg>, String)>,
    /// Where the step names members of the case's namespace set (`ns: 2`, `last`, `all`).
    pub set_refs: Vec<(Vec<Seg>, SetRef)>,
}

/// A reference to members of the namespace set, as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetRef {
    /// `ns: N` (a number, not a `$name`).
    Index(u32),
    /// `ns: last` or `ns: all`.
    Some,
}

/// What an `ns:` of a step may name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NsUse {
    /// One namespace: of the set, or an identifier chosen for what it is.
    One,
    /// Members of the set: an index, `last` or `all`.
    Members,
}

/// Where a `blocks:` count stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BlocksUse {
    /// The size of a new namespace: a count, `remaining` or `more_than_remaining`.
    Create,
    /// A range in a namespace: a count or `whole`.
    Range,
}

impl<'a> StepParts<'a> {
    fn param(&mut self, path: Vec<Seg>, slot: Slot<'a>) {
        self.params.push(ParamField { path, slot, data_size: false });
    }

    fn data_size(&mut self, path: Vec<Seg>, slot: Slot<'a>) {
        self.params.push(ParamField { path, slot, data_size: true });
    }

    fn ns(&mut self, path: Vec<Seg>, ns: &'a mut NsRef, used: NsUse) {
        match &*ns {
            NsRef::Index(Param::Value(i)) => self.set_refs.push((path.clone(), SetRef::Index(*i))),
            NsRef::Named(NsName::Last | NsName::All) => self.set_refs.push((path.clone(), SetRef::Some)),
            _ => {}
        }
        match (ns, used) {
            (NsRef::Index(p), _) => self.param(path, Slot::U32(p)),
            (NsRef::Named(NsName::All), NsUse::One) => self.misuses.push((
                path,
                "`ns: all` names every namespace of the set; this step takes one: an index, `$name`, \
                 last, unallocated, beyond_nn, broadcast or zero"
                    .into(),
            )),
            (
                NsRef::Named(name @ (NsName::Unallocated | NsName::BeyondNn | NsName::Broadcast | NsName::Zero)),
                NsUse::Members,
            ) => self.misuses.push((
                path,
                format!(
                    "`ns: {}` is not a namespace of the set; this step works on the set: an index, `$name`, \
                     last or all",
                    ns_name(name)
                ),
            )),
            (NsRef::Named(_), _) => {}
        }
    }

    fn lba(&mut self, path: Vec<Seg>, lba: &'a mut Lba) {
        match lba {
            Lba::At(p) => self.param(path, Slot::U64(p)),
            Lba::Named(_) => {}
            Lba::FromEnd { .. } => self.closed_maps.push((path, &["from_end"])),
            Lba::Spread { .. } => self.misuses.push((
                path,
                "`lba: {spread: k}` places the extents of a write; this step takes one LBA: a number, `$name`, \
                 last, end, middle or {from_end: k}"
                    .into(),
            )),
        }
    }

    /// A write's LBA, which may also be `{spread: k}` (k ≥ 1).
    fn write_lba(&mut self, path: Vec<Seg>, lba: &'a mut Lba) {
        match lba {
            Lba::Spread { spread: 0 } => self.misuses.push((path, "`lba: {spread: k}` needs k of at least 1".into())),
            Lba::Spread { .. } => self.closed_maps.push((path, &["spread"])),
            other => self.lba(path, other),
        }
    }

    fn blocks(&mut self, path: Vec<Seg>, blocks: &'a mut Blocks, used: BlocksUse) {
        match (blocks, used) {
            (Blocks::Count(p), _) => self.param(path, Slot::U64(p)),
            (Blocks::Named(BlocksName::Whole), BlocksUse::Create) => self.misuses.push((
                path,
                "`blocks: whole` is a range over a namespace; a new namespace's size is a number, `$name`, \
                 remaining or more_than_remaining"
                    .into(),
            )),
            (Blocks::Named(name @ (BlocksName::Remaining | BlocksName::MoreThanRemaining)), BlocksUse::Range) => {
                let name = if *name == BlocksName::Remaining { "remaining" } else { "more_than_remaining" };
                self.misuses.push((
                    path,
                    format!("`blocks: {name}` only sizes a new namespace (create_namespace); here give a number, `$name` or whole"),
                ))
            }
            (Blocks::Named(_), _) => {}
        }
    }

    fn ranges(&mut self, path: Vec<Seg>, ranges: &'a mut Ranges) {
        match ranges {
            Ranges::List(list) => {
                for (i, Range { lba, blocks }) in list.iter_mut().enumerate() {
                    let at = |field: &str| [path.clone(), vec![Seg::Index(i), key(field)]].concat();
                    self.lba(at("lba"), lba);
                    self.blocks(at("blocks"), blocks, BlocksUse::Range);
                }
            }
            Ranges::Generated { count, blocks, stride, start: _ } => {
                let at = |field: &str| [path.clone(), vec![key(field)]].concat();
                self.param(at("count"), Slot::U32(count));
                self.param(at("blocks"), Slot::U32(blocks));
                self.param(at("stride"), Slot::U64(stride));
                self.closed_maps.push((path, &["count", "blocks", "stride", "start"]));
            }
        }
    }
}

fn at(field: &str) -> Vec<Seg> {
    vec![key(field)]
}

fn ns_name(name: &NsName) -> &'static str {
    match name {
        NsName::All => "all",
        NsName::Last => "last",
        NsName::Unallocated => "unallocated",
        NsName::BeyondNn => "beyond_nn",
        NsName::Broadcast => "broadcast",
        NsName::Zero => "zero",
    }
}

/// Lists the parts of `step`, borrowing its parameters mutably.
pub fn step_parts(step: &mut Step) -> StepParts<'_> {
    let mut parts = StepParts::default();
    match step {
        Step::UseNamespaces { count, lbads, blocks, create: _, shared: _ } => {
            parts.param(at("count"), Slot::U32(count));
            for (i, size) in lbads.iter_mut().enumerate() {
                parts.data_size(vec![key("lbads"), Seg::Index(i)], Slot::U32(size));
            }
            parts.param(at("blocks"), Slot::U64(blocks));
        }
        Step::DeleteAllNamespaces {}
        | Step::ExistingNamespaces {}
        | Step::Port { .. }
        | Step::PrivateNamespace {}
        | Step::ControllerReset {}
        | Step::ArmAsyncEvents {}
        | Step::Check(_) => {}
        Step::CreateNamespace { lbads, lbaf, blocks, expect } => {
            parts.exactly_one = vec![("lbads", lbads.is_some()), ("lbaf", lbaf.is_some())];
            if let Some(size) = lbads {
                parts.data_size(at("lbads"), Slot::U32(size));
            }
            if let Some(index) = lbaf {
                parts.param(at("lbaf"), Slot::U8(index));
            }
            parts.blocks(at("blocks"), blocks, BlocksUse::Create);
            parts.expect = expect.as_ref();
        }
        Step::CreateUntilFull { lbads, blocks } => {
            parts.data_size(at("lbads"), Slot::U32(lbads));
            parts.param(at("blocks"), Slot::U64(blocks));
        }
        Step::DeleteNamespace { ns, expect } | Step::Attach { ns, expect } | Step::Detach { ns, expect } => {
            parts.ns(at("ns"), ns, NsUse::One);
            parts.expect = expect.as_ref();
        }
        Step::Format { ns, lbads, lbaf, expect } => {
            parts.ns(at("ns"), ns, NsUse::One);
            parts.exactly_one = vec![("lbads", lbads.is_some()), ("lbaf", lbaf.is_some())];
            if let Some(size) = lbads {
                parts.data_size(at("lbads"), Slot::U32(size));
            }
            if let Some(index) = lbaf {
                parts.param(at("lbaf"), Slot::U8(index));
            }
            parts.expect = expect.as_ref();
        }
        Step::Write { ns, lba, blocks, fua: _, reverse: _ } => {
            parts.ns(at("ns"), ns, NsUse::Members);
            parts.write_lba(at("lba"), lba);
            parts.blocks(at("blocks"), blocks, BlocksUse::Range);
        }
        Step::Verify { ns, lba, blocks } => {
            parts.ns(at("ns"), ns, NsUse::Members);
            if let Some(lba) = lba {
                parts.lba(at("lba"), lba);
            }
            if let Some(blocks) = blocks {
                parts.blocks(at("blocks"), blocks, BlocksUse::Range);
            }
        }
        Step::Io { ns, op: _, lba, blocks, expect } => {
            parts.ns(at("ns"), ns, NsUse::One);
            parts.lba(at("lba"), lba);
            parts.param(at("blocks"), Slot::U32(blocks));
            parts.expect = expect.as_ref();
        }
        Step::IoBeyondMdts { ns, op: _, expect } => {
            parts.ns(at("ns"), ns, NsUse::One);
            parts.expect = expect.as_ref();
        }
        Step::Deallocate { ns, ranges, expect } => {
            parts.ns(at("ns"), ns, NsUse::One);
            parts.ranges(at("ranges"), ranges);
            parts.expect = expect.as_ref();
        }
        Step::DeallocateAll { ns }
        | Step::Flush { ns }
        | Step::ExpectNamespaceChanged { ns }
        | Step::ReservationAccess { ns }
        | Step::ReservationPreempt { ns }
        | Step::ReservationPowerLoss { ns }
        | Step::AnaStates { ns }
        | Step::FormatEachLbaFormat { ns } => {
            parts.ns(at("ns"), ns, NsUse::One);
        }
        Step::WriteZeroes { ns, lba, blocks, deac: _, expect } => {
            parts.ns(at("ns"), ns, NsUse::One);
            parts.lba(at("lba"), lba);
            parts.param(at("blocks"), Slot::U32(blocks));
            parts.expect = expect.as_ref();
        }
        Step::Compare { ns, lba, blocks, mismatch: _ } => {
            parts.ns(at("ns"), ns, NsUse::One);
            parts.lba(at("lba"), lba);
            parts.param(at("blocks"), Slot::U32(blocks));
        }
        Step::Identify { cns: _, ns, expect, zero_filled: _ } => {
            parts.ns(at("ns"), ns, NsUse::One);
            parts.expect = expect.as_ref();
        }
        Step::Workload { jobs, qos: _ } => workload_jobs(&mut parts, jobs),
        Step::PortOutage(o) => {
            parts.param(at("down_after_ms"), Slot::U64(&mut o.down_after_ms));
            workload_jobs(&mut parts, &mut o.jobs);
        }
        Step::FirmwareUpdate(f) => {
            let now = f.action == crate::suite::model::FirmwareAction::ReplaceAndActivateNow;
            if !f.jobs.is_empty() && !now {
                parts.misuses.push((
                    at("jobs"),
                    "a load runs across an activation without reset: `jobs` need `action: replace_and_activate_now`"
                        .to_string(),
                ));
            }
            if f.commit_after_ms.is_some() && f.jobs.is_empty() {
                parts.misuses.push((
                    at("commit_after_ms"),
                    "`commit_after_ms` places the commit in `jobs`' load; give jobs".to_string(),
                ));
            }
            if let Some(after) = &mut f.commit_after_ms {
                parts.param(at("commit_after_ms"), Slot::U64(after));
            }
            workload_jobs(&mut parts, &mut f.jobs);
        }
        Step::FirmwareErrors {} | Step::SanitizeFailureMode {} => {}
        Step::FormatErase(f) => {
            if f.unsupported && f.ses != crate::suite::model::EraseSetting::Crypto {
                parts.misuses.push((
                    at("unsupported"),
                    "`unsupported: true` is for `ses: crypto` (FNA bit 2); User Data Erase is always defined"
                        .to_string(),
                ));
            }
            parts.ns(at("ns"), &mut f.ns, NsUse::One)
        }
        Step::Sanitize(s) => {
            if s.passes.is_some_and(|p| !(1..=16).contains(&p)) {
                parts.misuses.push((at("passes"), "an overwrite has 1 to 16 passes (OWPASS)".to_string()));
            }
            if s.action != crate::suite::model::SanitizeOperation::Overwrite
                && (s.pattern.is_some() || s.passes.is_some() || s.invert)
            {
                parts
                    .misuses
                    .push((at("action"), "`pattern`, `passes` and `invert` belong to `action: overwrite`".to_string()));
            }
        }
        Step::PowerFail(p) => {
            if p.jobs.is_empty() {
                parts.misuses.push((at("jobs"), "`power_fail` needs at least one job".to_string()));
            }
            if p.cycles == Param::Value(0) {
                parts.misuses.push((at("cycles"), "`cycles: 0` cuts the power no time; give at least 1".to_string()));
            }
            if p.removal.is_some() && p.shutdown {
                parts.misuses.push((
                    at("shutdown"),
                    "`shutdown` goes with a power cut; a removal says how: `removal: orderly` shuts down first"
                        .to_string(),
                ));
            }
            for (i, job) in p.jobs.iter().enumerate() {
                if job.deallocate.as_ref().is_some_and(|d| *d != Param::Value(0)) {
                    parts.misuses.push((
                        vec![key("jobs"), Seg::Index(i), key("deallocate")],
                        "a power-fail load has no deallocates (what a cut leaves of one is not judged)".to_string(),
                    ));
                }
            }
            parts.param(at("cycles"), Slot::U32(&mut p.cycles));
            parts.param(at("cut_within_ms"), Slot::U64(&mut p.cut_within_ms));
            workload_jobs(&mut parts, &mut p.jobs);
        }
    }
    parts
}

/// The numeric parameters of workload jobs (`workload` and `power_fail` steps).
fn workload_jobs<'a>(parts: &mut StepParts<'a>, jobs: &'a mut [WorkloadJob]) {
    for (i, job) in jobs.iter_mut().enumerate() {
        let path = |field: &str| vec![key("jobs"), Seg::Index(i), key(field)];
        parts.ns(path("ns"), &mut job.ns, NsUse::One);
        if let Some(lba) = &mut job.lba {
            parts.lba(path("lba"), lba);
        }
        if let Some(blocks) = &mut job.blocks {
            parts.blocks(path("blocks"), blocks, BlocksUse::Range);
        }
        for (field, share) in [
            ("read", &mut job.read),
            ("write", &mut job.write),
            ("deallocate", &mut job.deallocate),
            ("flush", &mut job.flush),
            ("fua", &mut job.fua),
            ("port", &mut job.port),
        ] {
            if let Some(p) = share {
                parts.param(path(field), Slot::U32(p));
            }
        }
        for (n, size) in job.sizes.iter_mut().enumerate() {
            parts.param(vec![key("jobs"), Seg::Index(i), key("sizes"), Seg::Index(n)], Slot::U32(size));
        }
        parts.param(path("queue_depth"), Slot::U32(&mut job.queue_depth));
        for (field, value) in [
            ("iops", &mut job.iops),
            ("mb_per_s", &mut job.mb_per_s),
            ("commands", &mut job.commands),
            ("duration_ms", &mut job.duration_ms),
            ("warmup_ms", &mut job.warmup_ms),
        ] {
            if let Some(p) = value {
                parts.param(path(field), Slot::U64(p));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::model::IoOp;

    #[test]
    fn every_numeric_parameter_of_a_deallocate_is_listed_with_its_path() {
        let mut step = Step::Deallocate {
            ns: NsRef::Index(Param::Var("$ns".into())),
            ranges: Ranges::List(vec![Range {
                lba: Lba::At(Param::Value(100)),
                blocks: Blocks::Count(Param::Var("$b".into())),
            }]),
            expect: Some(Expect::One("LBA Out of Range".into())),
        };
        let parts = step_parts(&mut step);
        let listed: Vec<(Vec<Seg>, &str, Option<&str>)> =
            parts.params.iter().map(|p| (p.path.clone(), p.slot.type_name(), p.slot.var())).collect();
        assert_eq!(
            listed,
            vec![
                (vec![key("ns")], "u32", Some("$ns")),
                (vec![key("ranges"), Seg::Index(0), key("lba")], "u64", None),
                (vec![key("ranges"), Seg::Index(0), key("blocks")], "u64", Some("$b")),
            ]
        );
        assert_eq!(parts.expect, Some(&Expect::One("LBA Out of Range".into())));
    }

    #[test]
    fn setting_a_slot_checks_its_width() {
        let mut step = Step::Format {
            ns: NsRef::Index(Param::Value(1)),
            lbads: None,
            lbaf: Some(Param::Var("$f".into())),
            expect: None,
        };
        let mut parts = step_parts(&mut step);
        assert_eq!(parts.exactly_one, vec![("lbads", false), ("lbaf", true)]);
        let lbaf = &mut parts.params[1].slot;
        assert_eq!(lbaf.set(300).unwrap_err(), "300 does not fit a u8");
        lbaf.set(15).unwrap();
        drop(parts);
        assert!(matches!(step, Step::Format { lbaf: Some(Param::Value(15)), .. }));
    }

    #[test]
    fn generated_ranges_and_from_end_are_closed_maps() {
        let mut step = Step::Io {
            ns: NsRef::Index(Param::Value(1)),
            op: IoOp::Read,
            lba: Lba::FromEnd { from_end: 4 },
            blocks: Param::Value(1),
            expect: None,
        };
        assert_eq!(step_parts(&mut step).closed_maps, vec![(vec![key("lba")], &["from_end"][..])]);
    }
}
