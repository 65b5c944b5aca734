//! The SMART / Health Information log (NVMe 1.4 §5.14.1.2, Log Identifier 02h) read
//! for a case, and the check that its traffic counters move with the host's own
//! traffic (`check: smart_counts_host_traffic`).
//!
//! The check writes (every other command with Force Unit Access), reads and (with ONCS
//! bit 0) compares a known amount of data on every namespace of the set, taking turns
//! over the I/O queues the target brought up, then compares the log's counters with what the host did, in the spec's
//! units:
//! - Host Write Commands: Write commands completed; Host Read Commands: Read and Compare
//!   commands completed.
//! - Data Units Written / Read: thousands of 512-byte units of user data (metadata
//!   excluded; a controller with another LBA data size converts), rounded up.
//!
//! The log is the controller's (NSID FFFFFFFFh), so another user of the drive can only
//! make a counter move *more*: a counter that moved less than the host's own traffic is
//! the drive's failure; one that moved more is a warning (another user, or commands
//! counted that the figure leaves out). A drive that updates its counters late gets a
//! bounded wait before a shortfall is judged, and then only a counter that moved and
//! settled short is the drive's failure: one that did not move at all, or was still moving,
//! is a warning (§5.14.1.2 sets no time for the update). The rounding is not judged: the counter's
//! value before the traffic says nothing about the units below a thousand it stood for.

use nvme::device::Data;
use nvme::spec::log::{get_log_page, LogPageId, SmartHealthLog};
use nvme::spec::nvm;
use zerocopy::FromBytes;

use super::{io, CaseContext, StepError, StepResult};
use crate::load::{Figure, JobFigures};
use crate::rules;
use crate::verdict::Failure;

/// User data each namespace of the set is written and read with: 4 MiB, 8192 units of
/// 512 bytes, so that a counter in the wrong unit (a 4096-byte block counted as one
/// unit) falls well short of the thousands it must add.
const TRAFFIC_BYTES: u64 = 4 * 1024 * 1024;
/// The most bytes one command moves (MDTS permitting).
const COMMAND_BYTES: u64 = 64 * 1024;
/// How often, and how far apart on the target's clock, a counter short of the host's
/// traffic is re-read before it is judged: 20 times 500 ms, 10 s (at once on the
/// simulated drive's clock).
const SETTLE_READS: u32 = 20;
const SETTLE_GAP_MS: u64 = 500;

/// Reads the SMART / Health Information log of the controller (NSID FFFFFFFFh).
pub fn smart_log(ctx: &mut CaseContext<'_>, when: &str) -> StepResult<SmartHealthLog> {
    let mut bytes = vec![0u8; 512];
    let what = format!("Get Log Page SMART / Health Information (02h), {when}");
    let cmd = get_log_page(LogPageId::SmartHealth, 0xFFFF_FFFF, 512, 0, false)
        .map_err(|e| StepError::Error(e.to_string()))?;
    let c = ctx.admin(&what, cmd, Data::FromDevice(&mut bytes))?;
    ctx.require_success(&what, &c)?;
    SmartHealthLog::read_from_bytes(&bytes).map_err(|_| StepError::Error("SMART log: 512 bytes expected".into()))
}

/// What the host's commands did, counted as the SMART log counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    /// Write commands completed successfully.
    writes: u128,
    /// Read and Compare commands completed successfully.
    reads: u128,
    /// Of `reads`, the Compare commands.
    compares: u128,
    /// 512-byte units of user data the successful writes carried.
    units_written: u128,
    /// 512-byte units of user data the successful reads and compares carried.
    units_read: u128,
    /// Commands that completed with an error: the spec does not say whether they count,
    /// so they only widen the upper bound.
    unsuccessful: u128,
}

/// One counter judged: its name, how far it moved, the least and the most the host's
/// traffic explains.
struct Judged {
    counter: &'static str,
    moved: u128,
    least: u128,
    most: u128,
    unit: &'static str,
}

/// `check: smart_counts_host_traffic`.
pub fn counts_host_traffic(ctx: &mut CaseContext<'_>) -> StepResult {
    let members: Vec<usize> =
        (0..ctx.set.len()).filter(|&i| ctx.set[i].attached && ctx.set[i].protection == 0).collect();
    if members.is_empty() {
        return Err(StepError::Skip(format!(
            "no namespace of the set takes nvtest's writes (looked at {} namespaces: detached, or formatted with \
             end-to-end protection, whose information nvtest does not generate)",
            ctx.set.len()
        )));
    }
    let queues = ctx.device.io_queues();
    if queues.is_empty() {
        return Err(StepError::Error("the target has no I/O queue ready".into()));
    }
    let compare = ctx.facts.identify.oncs.compare();
    let before = smart_log(ctx, "before the traffic")?;
    let mut tally = Tally::default();
    let mut sent = 0usize;
    for &i in &members {
        traffic(ctx, i, &queues, compare, &mut sent, &mut tally)?;
    }
    let sizes: Vec<String> =
        members.iter().map(|&i| format!("NSID {} ({} B)", ctx.set[i].nsid, ctx.set[i].block_size)).collect();
    ctx.log.push(format!(
        "host traffic on {} over I/O queues {:?}: {} writes, {} reads ({} of them Compare), {} units of 512 bytes \
         written, {} read, {} commands unsuccessful",
        sizes.join(", "),
        queues,
        tally.writes,
        tally.reads,
        tally.compares,
        tally.units_written,
        tally.units_read,
        tally.unsuccessful
    ));
    if members.iter().all(|&i| ctx.set[i].block_size == 512) {
        ctx.log.push(
            "every namespace used has 512-byte blocks: a controller counting blocks instead of 512-byte units \
             cannot be told apart here"
                .into(),
        );
    }
    // Each counter's movement at the previous read: one still changing is not judged.
    let mut previous: Option<Vec<u128>> = None;
    let mut rereads = 0;
    loop {
        let last = rereads >= SETTLE_READS;
        let after = smart_log(ctx, "after the traffic")?;
        let judged = judge(&before, &after, &tally);
        let short: Vec<&Judged> = judged.iter().filter(|j| j.moved < j.least).collect();
        if short.is_empty() || last {
            record_figures(ctx, &judged);
        }
        if short.is_empty() {
            for j in &judged {
                ctx.log.push(format!(
                    "{}: moved by {} {} (the host's traffic explains {}..={})",
                    j.counter, j.moved, j.unit, j.least, j.most
                ));
            }
            return over_counted(&judged);
        }
        if last {
            let sent = format!(
                "Get Log Page SMART / Health Information before and after the host's traffic ({} writes, {} reads of \
                 which {} Compare, {} units of 512 bytes written, {} read), re-read {SETTLE_READS} times {SETTLE_GAP_MS} \
                 ms apart",
                tally.writes,
                tally.reads,
                tally.compares,
                tally.units_written,
                tally.units_read
            );
            let describe = |list: &[&Judged]| {
                let observed: Vec<String> =
                    list.iter().map(|j| format!("{} moved by {} {}", j.counter, j.moved, j.unit)).collect();
                let expected: Vec<String> =
                    list.iter().map(|j| format!("{} by at least {} {}", j.counter, j.least, j.unit)).collect();
                (observed.join("; "), expected.join("; "))
            };
            let (wrong, unsettled) = shortfall(&judged, previous.as_deref());
            if !wrong.is_empty() {
                let (observed, expected) = describe(&wrong);
                return Err(ctx.fail_rule(rules::smart_host_traffic(), sent, observed, expected));
            }
            let (observed, expected) = describe(&unsettled);
            return Err(StepError::Warning(Failure {
                rule: rules::smart_host_traffic(),
                sent,
                observed: format!("{observed}, not settled: not moved at all, or still moving at the last re-read"),
                expected: format!(
                    "{expected}; NVMe 1.4 §5.14.1.2 sets no time within which the counters follow the commands, so \
                     a drive that updates its log later is not failed: read the log again later to judge it"
                ),
            }));
        }
        previous = Some(judged.iter().map(|j| j.moved).collect());
        ctx.device.wait(SETTLE_GAP_MS)?;
        rereads += 1;
    }
}

/// The counters short of the host's traffic after the bounded re-reads, split into those
/// judged wrong (moved, then settled short: counted, and counted wrong) and those not
/// settled (not moved at all: a log updated later; or changed since the `previous` read).
fn shortfall<'j>(judged: &'j [Judged], previous: Option<&[u128]>) -> (Vec<&'j Judged>, Vec<&'j Judged>) {
    let short = judged.iter().enumerate().filter(|(_, j)| j.moved < j.least);
    let unsettled = |k: usize, j: &Judged| j.moved == 0 || previous.is_some_and(|p| p.get(k) != Some(&j.moved));
    let (unsettled, wrong): (Vec<_>, Vec<_>) = short.partition(|(k, j)| unsettled(*k, j));
    (wrong.into_iter().map(|(_, j)| j).collect(), unsettled.into_iter().map(|(_, j)| j).collect())
}

/// Writes (every other one with FUA), reads and compares [`TRAFFIC_BYTES`] of member
/// `i`, one command after another on each queue in turn.
fn traffic(
    ctx: &mut CaseContext<'_>,
    i: usize,
    queues: &[u16],
    compare: bool,
    sent: &mut usize,
    tally: &mut Tally,
) -> StepResult {
    let e = &ctx.set[i];
    let (nsid, nsze, data) = (e.nsid, e.nsze, e.block_size);
    let layout = io::layout(ctx, i)?;
    let limit = ctx.facts.mdts_bytes.unwrap_or(COMMAND_BYTES).min(COMMAND_BYTES);
    let per_cmd = (limit / layout.per_block_in_buffer()).clamp(1, 65536).min(nsze);
    let commands = TRAFFIC_BYTES.div_ceil(per_cmd * data);
    let extents = (nsze / per_cmd).max(1);
    let units = |n: u64| (n * data / 512) as u128;
    let generation = ctx.map.next_generation();
    let at = |k: u64| (k % extents) * per_cmd;
    for k in 0..commands {
        let lba = at(k);
        let qid = queues[*sent % queues.len()];
        *sent += 1;
        let (buf, md) = io::tagged(&layout, nsid, lba, per_cmd, generation, ctx.seed)?;
        let fua = k % 2 == 1;
        let what = format!(
            "Write NSID {nsid} SLBA {lba:#x} NLB {}{} on SQ {qid}",
            per_cmd - 1,
            if fua { ", FUA" } else { "" }
        );
        let cmd = nvm::write(nsid, lba, (per_cmd - 1) as u16, fua);
        let c = ctx.io_on(qid, &what, cmd, Data::ToDevice(&buf), io::outgoing(&md))?;
        if c.status().is_success() {
            ctx.map.record_write(nsid, lba, per_cmd, generation, ctx.seed);
            tally.writes += 1;
            tally.units_written += units(per_cmd);
        } else {
            ctx.map.forget(nsid, lba, per_cmd);
            tally.unsuccessful += 1;
        }
    }
    for k in 0..commands {
        let lba = at(k);
        let qid = queues[*sent % queues.len()];
        *sent += 1;
        let mut buf = vec![0u8; layout.buffer_bytes(per_cmd)];
        let mut md = vec![0u8; layout.metadata_buffer_bytes(per_cmd)];
        let what = format!("Read NSID {nsid} SLBA {lba:#x} NLB {} on SQ {qid}", per_cmd - 1);
        let cmd = nvm::read(nsid, lba, (per_cmd - 1) as u16);
        let c = ctx.io_on(qid, &what, cmd, Data::FromDevice(&mut buf), io::incoming(&mut md))?;
        if c.status().is_success() {
            tally.reads += 1;
            tally.units_read += units(per_cmd);
        } else {
            tally.unsuccessful += 1;
        }
    }
    if !compare {
        return Ok(());
    }
    // Compare the first extents against what was written there: as many commands as a
    // tenth of the writes, at least one.
    for k in 0..(commands / 10).max(1) {
        let lba = at(k);
        let qid = queues[*sent % queues.len()];
        *sent += 1;
        let crate::data::Expectation::Written { generation, seed } = ctx.map.state_at(nsid, lba) else { continue };
        let (buf, md) = io::tagged(&layout, nsid, lba, per_cmd, generation, seed)?;
        let what = format!("Compare NSID {nsid} SLBA {lba:#x} NLB {} on SQ {qid}", per_cmd - 1);
        let cmd = nvm::compare(nsid, lba, (per_cmd - 1) as u16);
        let c = ctx.io_on(qid, &what, cmd, Data::ToDevice(&buf), io::outgoing(&md))?;
        if c.status().is_success() {
            tally.reads += 1;
            tally.compares += 1;
            tally.units_read += units(per_cmd);
        } else {
            tally.unsuccessful += 1;
        }
    }
    Ok(())
}

/// The four counters the traffic moves, with the bounds the host's tally sets.
/// Data units: the counter before stood for somewhere in (1000 (B − 1), 1000 B] units,
/// so `u` more units move it by at least ⌊u / 1000⌋ and at most ⌈u / 1000⌉.
fn judge(before: &SmartHealthLog, after: &SmartHealthLog, t: &Tally) -> Vec<Judged> {
    const COMMANDS: &str = "commands";
    const UNITS: &str = "thousands of 512-byte units";
    let extra = t.unsuccessful;
    let counter = |counter, (a, b): (u128, u128), least, most, unit| Judged {
        counter,
        moved: a.wrapping_sub(b),
        least,
        most,
        unit,
    };
    vec![
        counter(
            "Host Write Commands",
            (after.host_write_commands.get(), before.host_write_commands.get()),
            t.writes,
            t.writes + extra,
            COMMANDS,
        ),
        counter(
            "Host Read Commands",
            (after.host_read_commands.get(), before.host_read_commands.get()),
            t.reads,
            t.reads + extra,
            COMMANDS,
        ),
        counter(
            "Data Units Written",
            (after.data_units_written.get(), before.data_units_written.get()),
            t.units_written / 1000,
            t.units_written.div_ceil(1000) + extra,
            UNITS,
        ),
        counter(
            "Data Units Read",
            (after.data_units_read.get(), before.data_units_read.get()),
            t.units_read / 1000,
            t.units_read.div_ceil(1000) + extra,
            UNITS,
        ),
    ]
}

/// Each counter's movement and the least and most the host's traffic explains, as the
/// case's figures (console, JUnit properties, JSON record).
fn record_figures(ctx: &mut CaseContext<'_>, judged: &[Judged]) {
    let mut extra = Vec::new();
    for j in judged {
        let name = j.counter.to_lowercase().replace(' ', "_");
        let unit = if j.unit == "commands" { "commands" } else { "thousands of 512 B" };
        for (what, value) in [("moved", j.moved), ("host_least", j.least), ("host_most", j.most)] {
            extra.push(Figure { name: format!("smart.{name}.{what}"), value: value as f64, unit });
        }
    }
    ctx.figures.push(JobFigures { job: "smart".into(), window_ns: 0, simulated_clock: false, ops: Vec::new(), extra });
}

/// A counter that moved by more than the host's traffic explains: a warning, since the
/// log covers the whole controller and another user of the drive may have moved it.
fn over_counted(judged: &[Judged]) -> StepResult {
    let over: Vec<String> = judged
        .iter()
        .filter(|j| j.moved > j.most)
        .map(|j| format!("{} moved by {} {} (at most {} expected)", j.counter, j.moved, j.unit, j.most))
        .collect();
    if over.is_empty() {
        return Ok(());
    }
    Err(StepError::Warning(Failure {
        rule: rules::smart_host_traffic(),
        sent: "Get Log Page SMART / Health Information before and after the host's traffic".into(),
        observed: over.join("; "),
        expected: "the counters to move by the host's own traffic: more means another user of the drive (the log \
                   covers the controller), or commands counted that §5.14.1.2 leaves out — nvtest cannot tell which"
            .into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    fn log(written: u128, read: u128, w: u128, r: u128) -> SmartHealthLog {
        let mut l = SmartHealthLog::new_zeroed();
        l.data_units_written.set(written);
        l.data_units_read.set(read);
        l.host_write_commands.set(w);
        l.host_read_commands.set(r);
        l
    }

    #[test]
    fn data_units_are_bounded_by_the_floor_and_ceiling_of_thousands() {
        let t = Tally { writes: 64, reads: 70, compares: 6, units_written: 8192, units_read: 8960, unsuccessful: 0 };
        let j = judge(&log(5, 5, 100, 100), &log(14, 14, 164, 170), &t);
        assert_eq!((j[0].moved, j[0].least, j[0].most), (64, 64, 64));
        assert_eq!((j[1].moved, j[1].least), (70, 70));
        assert_eq!((j[2].moved, j[2].least, j[2].most), (9, 8, 9));
        assert_eq!((j[3].moved, j[3].least, j[3].most), (9, 8, 9));
    }

    #[test]
    fn a_shortfall_is_wrong_only_once_the_counter_moved_and_settled() {
        let t = Tally { writes: 16, reads: 16, units_written: 8192, units_read: 8192, ..Tally::default() };
        // Data Units Written settled at 1 (blocks counted); Data Units Read not moved at
        // all; Host Read Commands still moving; Host Write Commands right.
        let j = judge(&log(0, 0, 0, 0), &log(1, 0, 16, 9), &t);
        let (wrong, unsettled) = shortfall(&j, Some(&[16, 7, 1, 0]));
        let names = |l: &[&Judged]| l.iter().map(|j| j.counter).collect::<Vec<_>>();
        assert_eq!(names(&wrong), ["Data Units Written"]);
        assert_eq!(names(&unsettled), ["Host Read Commands", "Data Units Read"]);
        // Without an earlier read, only the counter that did not move is unsettled.
        let (wrong, unsettled) = shortfall(&j, None);
        assert_eq!(names(&wrong), ["Host Read Commands", "Data Units Written"]);
        assert_eq!(names(&unsettled), ["Data Units Read"]);
    }

    #[test]
    fn a_counter_in_blocks_of_4096_bytes_falls_short() {
        // 1024 blocks of 4096 bytes: 8192 units; a counter of blocks adds ~1.
        let t = Tally { writes: 16, units_written: 8192, ..Tally::default() };
        let j = judge(&log(0, 0, 0, 0), &log(2, 0, 16, 0), &t);
        assert!(j[2].moved < j[2].least);
    }
}
