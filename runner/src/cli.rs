//! The command line: `nvtest [--suite NAME|PATH.yaml]... [--junit PATH] [--list]
//! [--filter TEXT] [--exact] [--expect FILE] [--allow-destructive] [--confirm-serial SN]
//! [--preserve] [TARGET]`, and `nvtest schema`.
//!
//! Order of work: parse the arguments, find and load every suite (all are validated
//! before anything else), on a kernel target pass the safety gate, and only then open
//! the target. Exit status: 0 nothing failed, 1 a case failed or errored, 2 usage,
//! suite, profile or target-open errors, safety refusals, and runs during which the
//! host under the target failed (QEMU's disk images on a full filesystem).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::run::{self, RunError, RunOptions, RunTarget};
use crate::safety::SafetyOptions;
use crate::suite::{self, locate, LoadedSuite};
use crate::target::TargetSpec;

/// Nothing failed.
pub const EXIT_OK: i32 = 0;
/// A case failed or errored.
pub const EXIT_FAILED: i32 = 1;
/// Usage, suite, profile or target-open error, or a fault of the host under the
/// target: nvtest could not do its job.
pub const EXIT_USAGE: i32 = 2;
/// The filters selected no case: nothing ran (as nextest's "no tests to run").
pub const EXIT_NO_CASES: i32 = 4;
/// Set (to anything but empty or `0`), a run without TARGET is a usage error instead of
/// a run on the built-in simulated drive: for pipelines whose drive comes from a variable.
pub const REQUIRE_TARGET_ENV: &str = "NVTEST_REQUIRE_TARGET";

/// nvtest: checks an NVMe controller against NVMe 1.2a / 1.4, case by case.
#[derive(Debug, Parser)]
#[command(
    name = "nvtest",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "Safety: the simulated drive and QEMU are disposable, every suite runs there without opt-in. \
On a drive of the Linux driver (/dev/nvmeN), destructive suites (they delete namespaces, format, write) need \
--allow-destructive and --confirm-serial SN, and nvtest refuses while anything uses the drive (mounts, swap, \
device-mapper or md, other processes, the root filesystem); --preserve runs only the non-destructive cases."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Prints the JSON Schema of suite files (generated from the suite vocabulary).
    Schema,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("selection").args(["filter", "skip"]).multiple(true)))]
pub struct RunArgs {
    /// A suite: a NAME in suites/ or a PATH.yaml; repeat for several. Default: every suite in suites/.
    #[arg(long = "suite", value_name = "NAME|PATH.yaml")]
    pub suites: Vec<String>,
    /// Writes a JUnit XML report here (its directory is created).
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
    /// Lists the cases (SUITE::CASE) without opening the target.
    #[arg(long)]
    pub list: bool,
    /// Runs only the cases whose SUITE::CASE name contains TEXT.
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    /// With --filter or --skip: the name must equal TEXT.
    #[arg(long, requires = "selection")]
    pub exact: bool,
    /// Known deviations of the target (e.g. fixtures/qemu/expected.yaml): a listed case that
    /// fails as listed is an expected failure; a listed case that passes fails the run.
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// On a drive of the Linux driver (/dev/nvmeN): lets destructive cases run, once the
    /// drive is found unused (not needed for sim and QEMU, which are disposable).
    #[arg(long)]
    pub allow_destructive: bool,
    /// The controller serial (Identify Controller SN) you expect, required for destructive
    /// cases on a drive of the Linux driver; when given, destructive cases run only if it
    /// matches, on any target.
    #[arg(long, value_name = "SN")]
    pub confirm_serial: Option<String>,
    /// Runs only the non-destructive cases; destructive ones are reported as skipped.
    #[arg(long)]
    pub preserve: bool,
    /// The device: `sim` (default: the built-in simulated drive; `NVTEST_REQUIRE_TARGET=1`
    /// forbids the default), `sim:PROFILE`, `sim:PATH.yaml`, `qemu` (topology ns32),
    /// `qemu:TOPOLOGY`, `qemu:PATH.yaml`, `qemu-linux:TOPOLOGY` (the Linux NVMe driver in a
    /// QEMU guest), or `/dev/nvmeN` (a controller of the Linux NVMe driver).
    #[arg(value_name = "TARGET", value_parser = parse_target)]
    pub target: Option<RunTarget>,
    /// Leaves out the cases whose SUITE::CASE name contains TEXT (with --exact: equals it);
    /// repeat for several.
    #[arg(long, value_name = "TEXT")]
    pub skip: Vec<String>,
    /// What a run whose filters select no case does: `fail` (exit status 4, the default),
    /// `warn` (a warning, exit 0) or `pass`.
    #[arg(long, value_enum, value_name = "fail|warn|pass", default_value = "fail")]
    pub no_cases: crate::run::NoCases,
}

/// Parses TARGET: a path (`/dev/nvme0`, `./x`) is a controller of the Linux driver,
/// anything else a [`TargetSpec`]. The error is one line saying what is allowed.
pub fn parse_target(text: &str) -> Result<RunTarget, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("TARGET is empty (an unset shell variable?): name the drive, e.g. /dev/nvme0, or `sim` for the \
                    built-in simulated drive"
            .into());
    }
    let is_path = trimmed.starts_with('/') || trimmed.starts_with("./") || trimmed.starts_with("../");
    if is_path {
        if trimmed.ends_with(".yaml") || trimmed.ends_with(".yml") {
            return Err(format!(
                "`{trimmed}` is a YAML file: write `sim:{trimmed}` for a drive profile or `qemu:{trimmed}` for a \
                 QEMU topology; a real drive is given as its controller, e.g. /dev/nvme0"
            ));
        }
        return Ok(RunTarget::Kernel(trimmed.into()));
    }
    TargetSpec::parse(trimmed)
        .map(RunTarget::Spec)
        .map_err(|e| format!("{e}, or `/dev/nvmeN` (a controller of the Linux NVMe driver)"))
}

/// The binary's entry point: runs with the process arguments, returns the exit status.
pub fn main() -> i32 {
    quiet_broken_pipe_panics();
    main_with(std::env::args_os())
}

/// libtest-mimic panics when stdout closes under it (`nvtest | head`); the run reports
/// that as one error line, so the panic's own message and backtrace are not printed.
/// Every other panic is reported as before.
fn quiet_broken_pipe_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text =
            payload.downcast_ref::<String>().map(String::as_str).or_else(|| payload.downcast_ref::<&str>().copied());
        if !text.is_some_and(|t| t.contains("Broken pipe")) {
            previous(info);
        }
    }));
}

/// Runs with these arguments (the first is the program name); returns the exit status.
pub fn main_with<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    match cli.command {
        Some(Command::Schema) => {
            // A closed stdout (`nvtest schema | head`) is not an error.
            let _ = writeln!(std::io::stdout(), "{}", suite::json_schema());
            EXIT_OK
        }
        None => run_suites(cli.run),
    }
}

fn run_suites(args: RunArgs) -> i32 {
    let suites = match load_suites(&args.suites) {
        Ok(suites) => suites,
        Err(message) => {
            eprintln!("{message}");
            return EXIT_USAGE;
        }
    };
    // A qemu-linux target runs nvtest inside a Linux guest (crate::guest): the guest's
    // nvtest does the work, this one boots it and brings the results back.
    if matches!(args.target, Some(RunTarget::Spec(TargetSpec::QemuLinux(_)))) {
        return crate::guest::run(&args, &suites);
    }
    let default_target = args.target.is_none();
    if default_target && !args.list && target_required() {
        eprintln!(
            "error: no TARGET given, and {REQUIRE_TARGET_ENV} is set: name the drive (e.g. /dev/nvme0), or `sim` for \
             the built-in simulated drive"
        );
        return EXIT_USAGE;
    }
    let options = RunOptions {
        target: args
            .target
            .unwrap_or_else(|| RunTarget::Spec(TargetSpec::SimProfile(crate::target::DEFAULT_SIM_PROFILE.to_string()))),
        default_target,
        no_cases: args.no_cases,
        safety: SafetyOptions {
            allow_destructive: args.allow_destructive,
            confirm_serial: args.confirm_serial,
            preserve: args.preserve,
        },
        filter: args.filter,
        exact: args.exact,
        skip: args.skip,
        list: args.list,
        junit: args.junit,
        console_file: None,
        expect: args.expect,
    };
    match run::run(&suites, &options) {
        Ok(summary) if summary.host_fault.is_some() => EXIT_USAGE,
        Ok(summary) if summary.has_failed() => EXIT_FAILED,
        Ok(_) => EXIT_OK,
        Err(e @ RunError::NoCases(_)) => {
            eprintln!("error: {e}");
            EXIT_NO_CASES
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_USAGE
        }
    }
}

/// Whether [`REQUIRE_TARGET_ENV`] forbids the default target.
fn target_required() -> bool {
    std::env::var_os(REQUIRE_TARGET_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Finds, loads and validates every suite asked for; the error is the full diagnostic.
pub fn load_suites(arguments: &[String]) -> Result<Vec<LoadedSuite>, String> {
    let files = locate::resolve(arguments, locate::suites_dir).map_err(|e| format!("error: {e}"))?;
    let mut suites: Vec<LoadedSuite> = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        match suite::load_file(&file.path, file.expected_name.as_deref()) {
            Ok(loaded) => {
                if let Some(other) = suites.iter().find(|s| s.suite.name == loaded.suite.name) {
                    errors.push(format!(
                        "error: suite `{}` is loaded twice: {} and {}",
                        loaded.suite.name,
                        other.path.display(),
                        loaded.path.display()
                    ));
                } else {
                    suites.push(loaded);
                }
            }
            Err(e) => errors.push(e.render()),
        }
    }
    if errors.is_empty() {
        Ok(suites)
    } else {
        Err(errors.join("\n\n"))
    }
}
