//! nvtest: NVMe 1.2a / 1.4 compliance checker.
//!
//! Data flow (see DESIGN.md): a YAML suite is loaded into [`suite`] types with spans
//! kept, validated and matrix-expanded into cases; [`run`] turns the cases into
//! libtest-mimic trials run one at a time on a device opened by [`targets`]; each case's
//! steps ([`steps`]) send commands through `nvme::device::Device` and judge what comes
//! back, data by [`data`], queued workloads by [`load`]; outcomes become [`verdict`]s, written by [`report`] as JUnit
//! and the JSON run record.

/// Prints a line on stdout; a closed stdout (`nvtest | head`) is not an error worth a
/// panic, as `println!` would make it.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Prints a line on stderr; a closed stderr (`2>&-`, a pipe whose reader left) is not an
/// error worth a panic, as `eprintln!` would make it.
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod claims;
pub mod cli;
pub mod data;
pub mod exec;
pub mod exit;
pub mod guest_bench;
pub mod identity;
pub mod load;
pub mod power;
pub mod report;
pub mod rig;
pub mod rules;
pub mod run;
pub mod safety;
pub mod steps;
pub mod suite;
pub mod targets;
pub mod verdict;
pub mod yaml_message;
