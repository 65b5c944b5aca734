//! The command line: `nvtest [OPTIONS] [TARGET]... [FILTER]`, `nvtest schema
//! [--record]` and `nvtest targets`. Without TARGET the run tests the built-in simulated
//! drive, unless `CI` or `NVTEST_REQUIRE_TARGET` is set (then it is a usage error); a
//! positional word that is neither a target nor part of a case name is refused with the
//! nearest of each.
//!
//! Order of work: parse the arguments, find and load every suite (all are validated
//! before anything else), check the findings files and that the reports can be written,
//! on a kernel target take the drive and pass the safety gate, and only then open the
//! targets. Exit status: 0 nothing failed, 1 a case failed or errored, 2 usage, suite,
//! profile or target-open errors, safety refusals, and runs during which the host under
//! a target failed (QEMU's disk images on a full filesystem), 4 no case selected, 124
//! `--timeout` expired, 130 / 143 SIGINT / SIGTERM (the reports then hold what ran).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::run::{self, Repeat, RunError, RunOptions, RunTarget, Selection};
use crate::safety::SafetyOptions;
use crate::suite::{self, locate, LoadedSuite};
use crate::targets::guest;
use crate::targets::TargetSpec;

pub use crate::exit::{EXIT_FAILED, EXIT_NO_CASES, EXIT_OK, EXIT_TIMEOUT, EXIT_USAGE};
/// Set (to anything but empty or `0`), a run without TARGET is a usage error instead of
/// a run on the built-in simulated drive: for pipelines whose drive comes from a variable.
pub const REQUIRE_TARGET_ENV: &str = "NVTEST_REQUIRE_TARGET";
/// Set by every CI system (GitHub Actions, GitLab, Jenkins' plugins, Buildkite, …): there
/// too a run without TARGET is a usage error, so a pipeline whose drive variable came out
/// empty is red, not a green run of the simulated drive.
pub const CI_ENV: &str = "CI";

/// nvtest: checks NVMe controllers against NVMe 1.2a / 1.4, case by case.
#[derive(Debug, Parser)]
#[command(
    name = "nvtest",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "TARGET: `sim` (the built-in simulated drive, also the default without TARGET; \
CI=true, as CI systems set it, or NVTEST_REQUIRE_TARGET=1 forbids that default), `sim:PROFILE`, `sim:PATH.yaml`, `qemu` (topology ns32), \
`qemu:TOPOLOGY`, `qemu:PATH.yaml`, `qemu-linux:TOPOLOGY` (the Linux NVMe driver in a QEMU guest; runs alone), \
`/dev/nvmeN` (a controller of the Linux NVMe driver). Several targets run in parallel, each device one case at \
a time. A positional argument that is not a target is a filter (as `cargo test NAME`) and must match a case \
(else it is refused, naming the nearest target and case; --filter takes any text); `nvtest targets` lists \
profiles and topologies.

Exit status: 0 nothing failed, 1 a case failed or errored, 2 nvtest could not do its job, 4 no case selected, \
124 --timeout expired, 130 / 143 interrupted by SIGINT / SIGTERM (reports are written for what ran).

Safety: the simulated drive and QEMU are disposable, every suite runs there without opt-in. \
On a drive of the Linux driver (/dev/nvmeN), destructive suites (they delete namespaces, format, write) need \
--allow-destructive and --confirm-serial SN, and nvtest refuses while anything uses the drive (mounts, swap, \
device-mapper or md, other processes, another nvtest run, the root filesystem); --preserve runs only the \
non-destructive cases."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Prints the JSON Schema of suite files (generated from the suite vocabulary), or
    /// with --record that of the JSON run record.
    Schema {
        /// The schema of the run record `--json` writes.
        #[arg(long)]
        record: bool,
    },
    /// Lists the targets nvtest knows: simulated drive profiles and QEMU topologies.
    Targets,
    /// Judges the cycle a power-fail campaign did not live to verify (nvtest killed, the
    /// host or the drive powered off), from its journal (`--journal DIR`) and the drive as
    /// it is now; exit 0 when every block holds what it may, 1 when the drive broke a rule.
    Resume {
        /// The campaign's journal, DIR/SUITE--CASE.nvtj.
        journal: PathBuf,
    },
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("selection").args(["filters", "skip", "positional"]).multiple(true)))]
pub struct RunArgs {
    /// A suite: a NAME (in --suites-dir, then the shipped suites/) or a PATH.yaml; repeat
    /// for several. Default: every suite of --suites-dir, or the shipped ones.
    #[arg(long = "suite", value_name = "NAME|PATH.yaml")]
    pub suites: Vec<String>,
    /// A directory of suites looked in before the shipped ones.
    #[arg(long, value_name = "DIR", env = "NVTEST_SUITES_DIR")]
    pub suites_dir: Option<PathBuf>,
    /// Writes a JUnit XML report here (its directory is created).
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
    /// Writes the JSON run record here (schema: `nvtest schema --record`).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Lists the cases (SUITE::CASE) without opening the target.
    #[arg(long)]
    pub list: bool,
    /// How cases are shown: pretty (default), terse (one character per case), json
    /// (libtest's events); with --list, json gives one object per case.
    #[arg(long, value_enum, value_name = "pretty|terse|json")]
    pub format: Option<libtest_mimic::FormatSetting>,
    /// Colours on the console: auto (default), always, never.
    #[arg(long, value_enum, value_name = "auto|always|never")]
    pub color: Option<libtest_mimic::ColorSetting>,
    /// One character per case (as --format terse).
    #[arg(short, long)]
    pub quiet: bool,
    /// Shows the command log of every case, passing ones too (failures always show it).
    #[arg(long, alias = "nocapture")]
    pub show_output: bool,
    /// How many targets run at once (cases on one device never run concurrently).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub test_threads: Option<u32>,
    /// Runs only the cases whose SUITE::CASE name contains TEXT; repeat for several (any
    /// matches). On a run of several targets TARGET::SUITE::CASE matches too.
    #[arg(long = "filter", value_name = "TEXT")]
    pub filters: Vec<String>,
    /// With --filter or --skip: the name must equal TEXT.
    #[arg(long, requires = "selection")]
    pub exact: bool,
    /// Leaves out the cases whose SUITE::CASE name contains TEXT (with --exact: equals it);
    /// repeat for several.
    #[arg(long, value_name = "TEXT")]
    pub skip: Vec<String>,
    /// Known deviations of targets (e.g. fixtures/qemu/expected.yaml), repeatable: a listed
    /// case that fails as listed is an expected failure; a listed case that passes fails
    /// the run. Each applies to the targets its `applies_to` names.
    #[arg(long, value_name = "FILE")]
    pub expect: Vec<PathBuf>,
    /// What the drive's datasheet promises (read QoS, capabilities; format: `nvtest::claims`):
    /// cases about a claim judge it. Without it a simulated drive's profile gives its own.
    #[arg(long, value_name = "FILE")]
    pub claims: Option<PathBuf>,
    /// Keeps each power-fail campaign's journal (every write, flush and cut, synced) and
    /// the floor of its cycle in progress in DIR (created), as SUITE--CASE.nvtj: if nvtest
    /// or the host dies mid-campaign, `nvtest resume DIR/SUITE--CASE.nvtj` judges the cycle.
    #[arg(long, value_name = "DIR")]
    pub journal: Option<PathBuf>,
    /// How this runner switches the drive's power, for the power-fail cases on a drive of
    /// the Linux driver: power_off / power_on commands (a PDU, IPMI), or
    /// `pci_remove_rescan: true`, the weaker fallback (no power is lost; verdicts say so).
    #[arg(long, value_name = "FILE")]
    pub rig: Option<PathBuf>,
    /// The drive vendor's firmware image for the firmware suite's download and activation
    /// cases (its length whole dwords). Without it nvtest downloads its own test image,
    /// which only the simulated drive accepts: a real drive skips those cases.
    #[arg(long, value_name = "FILE")]
    pub firmware: Option<PathBuf>,
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
    /// The run seed of the data patterns (printed by every run): replays a run exactly.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Runs the selected cases N times, or until a pass has a failure (`until-failure`),
    /// each pass reported.
    #[arg(long, value_name = "N|until-failure", value_parser = Repeat::parse, default_value = "1")]
    pub repeat: Repeat,
    /// Ends the run after this long (`90`, `90s`, `15m`, `2h`): the reports hold what ran,
    /// the case cut short an error; exit status 124.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Ends a case that runs longer than this before its next command, as an error; the
    /// device is recovered for the next case.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub case_timeout: Option<Duration>,
    /// What a run whose filters select no case does: `fail` (exit status 4, the default),
    /// `warn` (a warning, exit 0) or `pass`.
    #[arg(long, value_enum, value_name = "fail|warn|pass", default_value = "fail")]
    pub no_cases: crate::run::NoCases,
    /// TARGET... (see below), then at most one FILTER: a name part, as `cargo test NAME`.
    #[arg(value_name = "TARGET", value_parser = parse_positional)]
    pub positional: Vec<Positional>,
    /// The arguments as given (filled in by [`main_with`]).
    #[arg(skip)]
    pub command_line: Vec<String>,
}

/// A positional argument: a target, or a filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Positional {
    Target(RunTarget),
    Filter(String),
}

/// A positional argument is a target when it looks like one (a path, `sim`, `qemu`, a
/// `KIND:…` form such as `sim:…`, `qemu:…`, `qemu-linux:…`, or a bare `nvmeN`), and
/// must then be a valid one; anything else (case names hold `::`) is a filter. An empty
/// argument is an error (an unset shell variable).
pub fn parse_positional(text: &str) -> Result<Positional, String> {
    let t = text.trim();
    let looks_like_target = t.is_empty()
        || t.starts_with('/')
        || t.starts_with("./")
        || t.starts_with("../")
        || matches!(t, "sim" | "qemu" | "qemu-linux")
        || (t.contains(':') && !t.contains("::"))
        || is_controller_name(t);
    if looks_like_target {
        parse_target(text).map(Positional::Target)
    } else {
        Ok(Positional::Filter(t.to_string()))
    }
}

/// `nvme0`, `nvme0n1`: a device name without /dev/.
fn is_controller_name(text: &str) -> bool {
    text.strip_prefix("nvme").is_some_and(|rest| {
        let digits = rest.split('n').collect::<Vec<_>>();
        !rest.is_empty()
            && digits.len() <= 2
            && digits.iter().all(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    })
}

impl RunArgs {
    /// The targets given, in order.
    pub fn targets(&self) -> Vec<RunTarget> {
        self.positional
            .iter()
            .filter_map(|p| match p {
                Positional::Target(t) => Some(t.clone()),
                Positional::Filter(_) => None,
            })
            .collect()
    }

    /// Every filter: `--filter`s and the positional one.
    pub fn filters(&self) -> Vec<String> {
        let positional = self.positional.iter().filter_map(|p| match p {
            Positional::Filter(f) => Some(f.clone()),
            Positional::Target(_) => None,
        });
        self.filters.iter().cloned().chain(positional).collect()
    }

    /// The one target when it is a `qemu-linux` one.
    pub fn guest_target(&self) -> Option<RunTarget> {
        let targets = self.targets();
        match targets.as_slice() {
            [t @ RunTarget::Spec(TargetSpec::QemuLinux(_))] => Some(t.clone()),
            _ => None,
        }
    }

    /// `--filter`, `--skip`, `--exact` and the positional filter.
    pub fn selection(&self) -> Selection {
        Selection { filters: self.filters(), skip: self.skip.clone(), exact: self.exact }
    }
}

/// Parses a duration: seconds (`90`, `1.5`), or with a unit `ms`, `s`, `m`, `h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && (v * scale).is_finite() && v * scale < 1e9 => Ok(Duration::from_secs_f64(v * scale)),
        _ => Err(format!("`{text}` is not a duration: write seconds (90) or with a unit (500ms, 90s, 15m, 2h)")),
    }
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
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let mut cli = match Cli::try_parse_from(args.clone()) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    cli.run.command_line = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    match cli.command {
        Some(Command::Schema { record }) => {
            let schema = if record { crate::report::json::schema() } else { suite::json_schema() };
            // A closed stdout (`nvtest schema | head`) is not an error.
            let _ = writeln!(std::io::stdout(), "{schema}");
            EXIT_OK
        }
        Some(Command::Resume { journal }) => crate::power::resume::run(&journal),
        Some(Command::Targets) => {
            let _ = write!(std::io::stdout(), "{}", crate::targets::catalogue());
            EXIT_OK
        }
        None => run_suites(cli.run),
    }
}

fn run_suites(args: RunArgs) -> i32 {
    let suites = match load_suites(&args.suites, args.suites_dir.as_deref()) {
        Ok(suites) => suites,
        Err(message) => {
            tell!("{message}");
            return EXIT_USAGE;
        }
    };
    if let Err(message) = check_positional_filter(&args, &suites) {
        tell!("error: {message}");
        return EXIT_USAGE;
    }
    for (path, what) in [(&args.junit, "JUnit report"), (&args.json, "JSON record")] {
        if path.as_deref() == Some(std::path::Path::new("-")) && !args.list {
            // The report is standard output's: the console goes to standard error.
            if let Err(e) = crate::report::output::console_to_stderr() {
                tell!("error: cannot send the {what} to standard output: {e}");
                return EXIT_USAGE;
            }
        }
    }
    let mut targets = args.targets();
    // A qemu-linux target runs nvtest inside a Linux guest (crate::targets::guest): the guest's
    // nvtest does the work, this one boots it and brings the results back.
    if args.guest_target().is_some() {
        return run_in_guest(&args, &suites);
    }
    if targets.len() > 1 {
        if let Some(t) = targets.iter().find(|t| matches!(t, RunTarget::Spec(TargetSpec::QemuLinux(_)))) {
            tell!(
                "error: `{}` runs nvtest inside a Linux guest, a run of its own: give it as the only target",
                t.describe()
            );
            return EXIT_USAGE;
        }
    }
    if args.filters().len() > args.filters.len() + 1 {
        tell!(
            "error: more than one positional filter ({}): give further ones with --filter",
            args.filters()[args.filters.len()..].join(", ")
        );
        return EXIT_USAGE;
    }
    let default_target = targets.is_empty();
    if default_target && !args.list {
        if let Some(variable) = target_required() {
            tell!(
                "error: no TARGET given, and {variable} is set: name the drive (e.g. /dev/nvme0), or `sim` for the \
                 built-in simulated drive"
            );
            return EXIT_USAGE;
        }
    }
    if default_target {
        targets.push(RunTarget::Spec(TargetSpec::SimProfile(crate::targets::DEFAULT_SIM_PROFILE.to_string())));
    }
    let options = RunOptions {
        targets,
        default_target,
        no_cases: args.no_cases,
        safety: SafetyOptions {
            allow_destructive: args.allow_destructive,
            confirm_serial: args.confirm_serial.clone(),
            preserve: args.preserve,
        },
        selection: args.selection(),
        list: args.list,
        format: args.format,
        color: args.color,
        quiet: args.quiet,
        show_output: args.show_output,
        test_threads: args.test_threads.map(|n| n as usize),
        junit: args.junit.clone(),
        json: args.json.clone(),
        console_file: None,
        expect: args.expect.clone(),
        claims: args.claims.clone(),
        journal: args.journal.clone(),
        rig: args.rig.clone(),
        firmware: args.firmware.clone(),
        seed: args.seed,
        repeat: args.repeat,
        timeout: args.timeout,
        case_timeout: args.case_timeout,
        command_line: args.command_line.clone(),
    };
    match run::run(&suites, &options) {
        Ok(summary) if !summary.host_faults.is_empty() => EXIT_USAGE,
        Ok(summary) if summary.has_failed() => EXIT_FAILED,
        Ok(_) => EXIT_OK,
        Err(e @ RunError::NoCases(_)) => {
            tell!("error: {e}");
            EXIT_NO_CASES
        }
        Err(e) => {
            tell!("error: {e}");
            EXIT_USAGE
        }
    }
}

/// The variable that forbids the default target, if one is set: [`REQUIRE_TARGET_ENV`]
/// (anything but empty or `0`), or [`CI_ENV`] (anything but empty, `0` or `false`).
fn target_required() -> Option<&'static str> {
    let set = |name: &str, off: &[&str]| {
        std::env::var(name).is_ok_and(|v| !v.trim().is_empty() && !off.iter().any(|o| v.trim().eq_ignore_ascii_case(o)))
    };
    if set(REQUIRE_TARGET_ENV, &["0"]) {
        Some(REQUIRE_TARGET_ENV)
    } else if set(CI_ENV, &["0", "false"]) {
        Some(CI_ENV)
    } else {
        None
    }
}

/// The positional FILTER must be part of some case's name (`SUITE::CASE`, or
/// `TARGET::SUITE::CASE` on a run of several targets; whole with `--exact`). A word that
/// names neither a target nor a case is most often a mistyped drive (`nvme0x`, `sim:enterprise`)
/// or a variable that expanded to something else: it is refused, naming the nearest
/// target and the nearest case, rather than run as a filter that selects nothing.
fn check_positional_filter(args: &RunArgs, suites: &[LoadedSuite]) -> Result<(), String> {
    let Some(word) = args.filters().get(args.filters.len()).cloned() else {
        return Ok(());
    };
    let targets = args.targets();
    let labels: Vec<String> = targets.iter().map(RunTarget::describe).collect();
    let names: Vec<String> = suites.iter().flat_map(|s| &s.cases).map(|c| format!("{}::{}", c.suite, c.name)).collect();
    let selection = Selection { filters: vec![word.clone()], skip: Vec::new(), exact: args.exact };
    let several = labels.len() > 1;
    let matched = suites.iter().flat_map(|s| &s.cases).any(|case| {
        selection.selects(case, None) || (several && labels.iter().any(|l| selection.selects(case, Some(l))))
    });
    if matched {
        return Ok(());
    }
    let nearest = |candidates: &[String]| {
        candidates
            .iter()
            .map(|c| {
                // Names are long: measure against their part after the last `:` too
                // (`sim:NAME`, `SUITE::CASE`); on a tie, the longer common beginning wins.
                let tail = c.rsplit(':').next().unwrap_or(c);
                let distance = strsim::damerau_levenshtein(&word, c).min(strsim::damerau_levenshtein(&word, tail));
                let common = |name: &str| word.chars().zip(name.chars()).take_while(|(a, b)| a == b).count();
                (distance, usize::MAX - common(c).max(common(tail)), c)
            })
            .min_by_key(|(distance, common, _)| (*distance, *common))
            .map(|(_, _, c)| format!("`{c}`"))
            .unwrap_or_else(|| "none".into())
    };
    Err(format!(
        "`{word}` is neither a target nor part of a case name of the suites loaded: the nearest target is {}, the \
         nearest case {} (`nvtest targets` lists the targets, `--list` the cases; --filter takes a text that may \
         match nothing)",
        nearest(&crate::targets::spec::target_names()),
        nearest(&names)
    ))
}

/// Finds, loads and validates every suite asked for (names in `own` first, then the
/// shipped suites); the error is the full diagnostic.
pub fn load_suites(arguments: &[String], own: Option<&std::path::Path>) -> Result<Vec<LoadedSuite>, String> {
    let files = locate::resolve_with(arguments, own, locate::suites_dir).map_err(|e| format!("error: {e}"))?;
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

/// Runs the suites of a `qemu-linux` TARGET in the guest; returns the exit status
/// (the guest nvtest's, or 2 when the guest could not run them).
fn run_in_guest(args: &RunArgs, suites: &[LoadedSuite]) -> i32 {
    let Some(target) = args.guest_target() else {
        tell!("error: run_in_guest needs one qemu-linux target");
        return EXIT_USAGE;
    };
    if args.list {
        let options = RunOptions {
            targets: vec![target],
            selection: args.selection(),
            list: true,
            format: args.format,
            ..RunOptions::default()
        };
        return match crate::run::list(suites, &options) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                tell!("error: cannot write the list: {e}");
                EXIT_USAGE
            }
            _ => EXIT_OK,
        };
    }
    // The report paths are judged before the guest boots, as before any target opens.
    if let Err(e) = crate::report::output::check_report_paths(args.junit.as_deref(), args.json.as_deref()) {
        tell!("error: {e}");
        return EXIT_USAGE;
    }
    let request = match guest_request(args, suites) {
        Ok(r) => r,
        Err(e) => {
            tell!("error: {e}");
            return EXIT_USAGE;
        }
    };
    // SIGINT/SIGTERM: the recipe's process group is stopped and nvtest exits 130 / 143;
    // QEMU dies with nvtest (PR_SET_PDEATHSIG) and its files are anonymous.
    if let Err(e) = nvme::transport::qemu::install_interrupt_cleanup() {
        tell!("error: {e}");
        return EXIT_USAGE;
    }
    match guest::execute(&request) {
        Ok(outcome) => guest_exit_status(&request, &outcome),
        Err(e) => {
            tell!("error: {e}");
            EXIT_USAGE
        }
    }
}

/// The request the command line makes: its suites, filter, expected findings, safety
/// options and JUnit path, the timeouts and setup of the environment
/// (`NVTEST_GUEST_BOOT_TIMEOUT`, `NVTEST_GUEST_TIMEOUT`, `NVTEST_GUEST_SETUP`).
pub fn guest_request(args: &RunArgs, suites: &[LoadedSuite]) -> Result<guest::GuestRequest, String> {
    let Some(RunTarget::Spec(TargetSpec::QemuLinux(target))) = args.guest_target() else {
        return Err("the target is not a qemu-linux target".into());
    };
    let mut request = guest::GuestRequest::new(&target, suites.iter().map(|s| s.path.clone()).collect())?;
    request.filters = args.filters();
    request.exact = args.exact;
    request.skip = args.skip.clone();
    request.expect = match args.expect.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        _ => return Err("a qemu-linux run takes one --expect file".into()),
    };
    request.seed = args.seed;
    request.claims = args.claims.clone();
    request.rig = args.rig.clone();
    request.firmware = args.firmware.clone();
    request.safety = SafetyOptions {
        allow_destructive: args.allow_destructive,
        confirm_serial: args.confirm_serial.clone(),
        preserve: args.preserve,
    };
    request.junit = args.junit.clone();
    request.json = args.json.clone();
    request.timeouts = guest::Timeouts::from_env()?;
    if let Ok(text) = std::env::var("NVTEST_GUEST_SETUP") {
        request.setup = guest::SetupStep::parse_list(&text).map_err(|e| format!("NVTEST_GUEST_SETUP: {e}"))?;
    }
    Ok(request)
}

/// The host's exit status for a finished guest run; explains what is not nvtest's own.
fn guest_exit_status(request: &guest::GuestRequest, outcome: &guest::GuestOutcome) -> i32 {
    match outcome.exit_status {
        s @ (EXIT_OK | EXIT_FAILED | EXIT_USAGE) => s,
        other => {
            tell!(
                "error: {}: nvtest in the guest ended with status {other} (a crash, not a verdict); its output is above",
                request.label
            );
            EXIT_USAGE
        }
    }
}
