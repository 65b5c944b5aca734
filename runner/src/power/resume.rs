//! `nvtest resume JOURNAL`: judges the cycle a power-fail campaign did not live to
//! verify, from its journal (the writes and flushes it knew, the floor the cycle began
//! from) and the drive as it is now — after nvtest was killed, or the host or the drive
//! lost power. The target is opened again as the journal names it; it must be one whose
//! media outlived the run (a drive, a QEMU topology with `image_dir`), never a simulated
//! drive, whose media lived in the dead nvtest's memory.

use std::path::Path;

use crate::exit::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::power::journal_file::{read, read_floor};
use crate::steps::StepError;
use crate::targets::TargetSpec;

/// Runs `nvtest resume`: prints what was judged and the verdict; returns the exit status
/// (0 pass, 1 the drive broke a rule, 2 the journal or the target could not be used).
pub fn run(journal: &Path) -> i32 {
    match judge(journal) {
        Ok(verdict) => verdict,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_USAGE
        }
    }
}

fn judge(journal: &Path) -> Result<i32, String> {
    let replay = read(journal)?;
    let header = &replay.header;
    let spec = TargetSpec::parse(&header.target).map_err(|e| format!("{}: its target: {e}", journal.display()))?;
    media_outlives_the_run(&spec)?;
    let floor = read_floor(journal)?;
    println!("nvtest resume {} — {} on {} (seed {})", journal.display(), header.case, header.target, header.seed);
    if replay.torn_bytes > 0 {
        println!("  journal: {} records; a torn tail of {} bytes ignored", replay.records.len(), replay.torn_bytes);
    } else {
        println!("  journal: {} records", replay.records.len());
    }
    let mut session = crate::exec::Session::open(&spec)?;
    let (result, log) = session.with_context(header.seed, |ctx| {
        let result = crate::steps::power_fail::resume(ctx, &replay, &floor);
        (result, std::mem::take(&mut ctx.log))
    });
    match result {
        Ok(r) if r.verified_before => {
            println!("  cycle {}: verified before nvtest stopped; nothing left to judge", r.cycle);
            println!("resume result: ok");
            Ok(EXIT_OK)
        }
        Ok(r) => {
            println!(
                "  cycle {}{}: {} blocks judged, {} held a write of the cycle, {} what they held before it",
                r.cycle,
                if r.complete { "" } else { " (nvtest stopped before the cut; the power went with it)" },
                r.blocks_judged,
                r.survived,
                r.rolled_back
            );
            println!("resume result: ok");
            Ok(EXIT_OK)
        }
        Err(StepError::Fail(f)) | Err(StepError::Warning(f)) => {
            println!("{f}");
            for line in log.iter().filter(|l| l.starts_with("power_fail:") || l.starts_with("  ")) {
                println!("  {line}");
            }
            println!("resume result: FAILED");
            Ok(EXIT_FAILED)
        }
        Err(StepError::Skip(why)) => {
            println!("  nothing to judge: {why}");
            println!("resume result: ok");
            Ok(EXIT_OK)
        }
        Err(StepError::Error(e)) => Err(format!("{}: {e}", journal.display())),
    }
}

/// A target whose media cannot have outlived the run the journal is of is refused, so
/// that no verdict blames a drive for data it never had.
fn media_outlives_the_run(spec: &TargetSpec) -> Result<(), String> {
    let topology = match spec {
        TargetSpec::SimProfile(_) | TargetSpec::SimFile(_) => {
            return Err(format!(
                "{}: a simulated drive keeps its media in nvtest's memory, gone with the run the journal is of; \
                 resume needs a drive, or a QEMU topology with `machine: {{image_dir: …}}`",
                spec.describe()
            ))
        }
        TargetSpec::QemuTopology(name) => crate::targets::topology::Topology::builtin(name),
        TargetSpec::QemuFile(path) => crate::targets::topology::Topology::from_path(path),
        TargetSpec::QemuLinux(_) => return Err(format!("{}: resume runs on nvtest's own driver", spec.describe())),
    };
    let topology = topology.map_err(|e| e.to_string())?;
    if topology.machine.image_dir.is_none() {
        return Err(format!(
            "{}: its images were temporary, gone with the run the journal is of; resume needs a topology with \
             `machine: {{image_dir: …}}`",
            spec.describe()
        ));
    }
    Ok(())
}
