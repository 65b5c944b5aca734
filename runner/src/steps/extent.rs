//! How large a namespace a case needs: the blocks its steps address, read from the steps
//! themselves. `use_namespaces` takes an existing namespace (on a drive where nvtest
//! cannot create its own) when it has at least this many blocks, rather than the size
//! the case would create, so a drive with small namespaces still runs every case that
//! fits them.

use crate::suite::model::{Blocks, Lba, LbaName, Param, Ranges, Step};

/// The fewest blocks a namespace must have for every LBA the steps name to lie where
/// the case means it: `lba + blocks` for a numbered start, `k` for `{from_end: k}`,
/// twice the count from the middle, one block for `last` and `end` (whose commands are
/// meant to reach past the end). At least 1.
pub fn blocks_needed(steps: &[Step]) -> u64 {
    steps.iter().map(step_extent).max().unwrap_or(0).max(1)
}

fn step_extent(step: &Step) -> u64 {
    match step {
        Step::Write { lba, blocks, .. } => extent(lba, count_of(blocks)),
        Step::Verify { lba, blocks, .. } => match lba {
            Some(lba) => extent(lba, blocks.as_ref().map_or(1, count_of)),
            None => blocks.as_ref().map_or(0, count_of),
        },
        Step::Io { lba, blocks, .. } | Step::WriteZeroes { lba, blocks, .. } | Step::Compare { lba, blocks, .. } => {
            extent(lba, value(blocks).map_or(1, u64::from))
        }
        Step::Deallocate { ranges, .. } => match ranges {
            Ranges::List(items) => items.iter().map(|r| extent(&r.lba, count_of(&r.blocks))).max().unwrap_or(0),
            Ranges::Generated { count, blocks, stride, start } => match (value(count), value(blocks), value(stride)) {
                (Some(0), _, _) => 0,
                (Some(n), Some(b), Some(s)) => {
                    start.saturating_add((n as u64 - 1).saturating_mul(s)).saturating_add(b as u64)
                }
                _ => 0,
            },
        },
        // A job's range: from its LBA (default 0) for its blocks (default to the end: the
        // LBA itself is what it needs, one block at least).
        Step::Workload { jobs, .. }
        | Step::PowerFail(crate::suite::model::PowerFail { jobs, .. })
        | Step::FirmwareUpdate(crate::suite::model::FirmwareUpdate { jobs, .. }) => jobs
            .iter()
            .map(|j| {
                let lba = j.lba.clone().unwrap_or(Lba::At(Param::Value(0)));
                extent(&lba, j.blocks.as_ref().map_or(1, count_of))
            })
            .max()
            .unwrap_or(0),
        _ => 0,
    }
}

/// Blocks a count names; `whole` (and the creation sizes) constrain nothing: 1.
fn count_of(blocks: &Blocks) -> u64 {
    match blocks {
        Blocks::Count(p) => value(p).unwrap_or(1),
        Blocks::Named(_) => 1,
    }
}

fn extent(lba: &Lba, count: u64) -> u64 {
    match lba {
        Lba::At(p) => value(p).map_or(0, |first| first.saturating_add(count)),
        Lba::FromEnd { from_end } => *from_end,
        // k extents of `count` blocks, one every NSZE / (k + 1).
        Lba::Spread { spread } => count.saturating_mul(spread.saturating_add(1)),
        Lba::Named(LbaName::Middle) => count.saturating_mul(2),
        Lba::Named(LbaName::Last | LbaName::End) => 1,
    }
}

fn value<T: Copy>(p: &Param<T>) -> Option<T> {
    match p {
        Param::Value(v) => Some(*v),
        Param::Var(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::model::{NsName, NsRef, Range};

    fn at(n: u64) -> Lba {
        Lba::At(Param::Value(n))
    }

    #[test]
    fn the_furthest_block_a_step_names_decides() {
        let ns = NsRef::Index(Param::Value(1));
        let steps = vec![
            Step::Write {
                ns: ns.clone(),
                lba: at(0),
                blocks: Blocks::Count(Param::Value(1024)),
                fua: false,
                reverse: false,
            },
            Step::Deallocate {
                ns: ns.clone(),
                ranges: Ranges::Generated {
                    count: Param::Value(256),
                    blocks: Param::Value(4),
                    stride: Param::Value(16),
                    start: 8,
                },
                expect: None,
            },
            Step::Io {
                ns: NsRef::Named(NsName::Last),
                op: crate::suite::model::IoOp::Read,
                lba: Lba::Named(LbaName::End),
                blocks: Param::Value(1),
                expect: None,
            },
        ];
        assert_eq!(blocks_needed(&steps), 8 + 255 * 16 + 4);
        let ranges =
            Ranges::List(vec![Range { lba: Lba::FromEnd { from_end: 9000 }, blocks: Blocks::Count(Param::Value(1)) }]);
        assert_eq!(blocks_needed(&[Step::Deallocate { ns, ranges, expect: None }]), 9000);
        assert_eq!(blocks_needed(&[]), 1);
    }
}

#[cfg(test)]
mod workload_tests {
    use super::*;

    #[test]
    fn a_workload_needs_the_furthest_range_of_its_jobs() {
        let suite = "suite: s\ntitle: t\nspec: [x]\ndestructive: true\ncases:\n  - name: c\n    title: t\n    rule: \"r: r\"\n    steps:\n      - use_namespaces: {count: 1, lbads: [4096], blocks: 8}\n      - workload:\n          jobs:\n            - {name: a, ns: 1, lba: 0, blocks: 65536, read: 100, queue_depth: 1}\n            - {name: b, ns: 1, lba: 65536, blocks: 65536, write: 100, queue_depth: 1}\n";
        let loaded = crate::suite::load_str(suite, std::path::Path::new("s.yaml"), None).unwrap();
        assert_eq!(blocks_needed(&loaded.cases[0].steps), 131072);
    }
}
