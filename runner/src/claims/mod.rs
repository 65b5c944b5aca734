//! Drive claims: what a datasheet promises of a drive, given as a YAML file (or under the
//! `claims:` key of a simulated-drive profile), each claim kept with its line and column so
//! that a verdict about it can cite it.
//!
//! ```yaml
//! # claims of a drive, from its datasheet
//! drive: PBlaze5 916 (datasheet 2019)      # required: what the claims are of
//! model: 3.2TB PBlaze5 916                  # optional: the Identify Controller MN they are of
//! read_qos:                                 # read latency under load, one promise an entry
//!   - name: mixed                           # optional, unique in the file
//!     read_iops: 50000                      # the read load (IOPS, > 0)
//!     block: 4 KiB                          # read size: 4096, 512 B, 4 KiB (default 4 KiB)
//!     queue_depth: 32                       # optional, >= 1
//!     background_write: 500 MB/s            # B/s, kB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s; 0 or none
//!     percentile: 99.9                      # 0 < p < 100
//!     latency: 0.12 ms                      # ns, us, µs, ms, s
//! ready_time: 5 s                           # controller ready after power-on
//! power_loss_protection: true
//! crypto_erase: true
//! namespaces: {max: 32, lba_sizes: [512, 4096]}
//! firmware_activation_without_reset: true
//! dual_port: true
//! hot_plug: true
//! arbitration: {weighted_round_robin: true, urgent: true}
//! ```
//!
//! Every key but `drive` is optional and an unknown key is an error; numbers and booleans
//! are written without quotes. `model` is the drive's Identify Controller MN (Model
//! Number) the claims are of: a drive whose MN (trimmed) differs is still judged against
//! them, with a warning saying so; without `model` the warning comes when `drive` does
//! not contain the drive's MN ([`Claims::model_mismatch`]).
//!
//! Each promise (every `read_qos` entry, and each other claim but a `false` one, which
//! promises nothing) gets its own verdict at the end of a run: met, breached, or not
//! measured by the suites run ([`verdicts`]). A file that is not valid is a [`ClaimsError`] saying
//! `file:line:column: what is wrong; what is allowed`, on one line.
//!
//! [`identify::unreported`] judges the claimed capabilities Identify Controller (and CAP)
//! contradict; the cases judging figures (read QoS, ready time) are the suites'.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use nvme::input::strict::Strict;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

pub mod identify;
pub mod verdicts;

pub use identify::{unreported, Breach};
pub use verdicts::{ClaimJudgement, Promise, PromiseVerdict};

/// The read block size when a read QoS promise gives none.
pub const DEFAULT_BLOCK_BYTES: u32 = 4096;
/// The largest LBA data size a claim may name (2^16).
pub const MAX_LBA_SIZE: u32 = 65536;

/// What a datasheet promises of one drive.
#[derive(Clone, Debug, PartialEq)]
pub struct Claims {
    /// The file the claims were read from, as errors and citations name it.
    pub origin: String,
    /// What the claims are of (`drive:`), e.g. `PBlaze5 916 (datasheet 2019)`.
    pub drive: String,
    /// The Identify Controller MN (Model Number) the claims are of (`model:`), trimmed.
    pub model: Option<String>,
    /// Read latency promises under a read load (and a background write), in file order.
    pub read_qos: Vec<Claimed<ReadQos>>,
    /// The controller is ready (CSTS.RDY) within this time of power-on.
    pub ready_time: Option<Claimed<Duration>>,
    /// Data written and completed survives a sudden power loss.
    pub power_loss_protection: Option<Claimed<bool>>,
    /// The drive erases by destroying its media encryption key.
    pub crypto_erase: Option<Claimed<bool>>,
    /// How many namespaces the drive supports, and their LBA data sizes.
    pub namespaces: Option<Claimed<NamespaceClaim>>,
    /// New firmware is activated without a reset.
    pub firmware_activation_without_reset: Option<Claimed<bool>>,
    /// The drive has two (PCI Express) ports.
    pub dual_port: Option<Claimed<bool>>,
    /// The drive may be added and removed while the host runs.
    pub hot_plug: Option<Claimed<bool>>,
    /// The command arbitration the drive offers.
    pub arbitration: Option<Claimed<ArbitrationClaim>>,
}

/// One claim and where it is written: the 1-based line and column of its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Claimed<T> {
    pub value: T,
    pub line: u64,
    pub column: u64,
}

/// A read QoS promise: at `read_iops` reads of `block_bytes` (at `queue_depth`, with
/// `background_write_bytes_per_s` written meanwhile), `percentile` percent of the reads
/// complete within `latency`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadQos {
    /// Its name, unique in the file.
    pub name: Option<String>,
    pub read_iops: u64,
    /// A whole number of 512-byte units.
    pub block_bytes: u32,
    pub queue_depth: Option<u32>,
    /// 0 when there is no background write.
    pub background_write_bytes_per_s: u64,
    /// Strictly between 0 and 100.
    pub percentile: f64,
    /// More than 0.
    pub latency: Duration,
}

/// Namespaces a drive supports: at most `max` at once, each formatted with one of
/// `lba_sizes` (LBA data sizes in bytes, powers of two from 512 to [`MAX_LBA_SIZE`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceClaim {
    pub max: u32,
    pub lba_sizes: Vec<u32>,
}

/// The arbitration a drive offers besides round robin: weighted round robin, with the
/// urgent priority class. NVMe names both as one mechanism (CAP.AMS bit 0, "Weighted
/// Round Robin with Urgent Priority Class").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArbitrationClaim {
    pub weighted_round_robin: bool,
    pub urgent: bool,
}

/// A claims file could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimsError {
    /// The text is not valid claims; `line` and `column` are 1-based.
    Invalid { origin: String, line: u64, column: u64, message: String },
    /// The file could not be read.
    Read { origin: String, message: String },
}

impl fmt::Display for ClaimsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClaimsError::Invalid { origin, line, column, message } => {
                write!(f, "{origin}:{line}:{column}: {}", nvme::input::one_line(message))
            }
            ClaimsError::Read { origin, message } => {
                write!(f, "{origin}: cannot read the claims: {}", nvme::input::one_line(message))
            }
        }
    }
}

impl std::error::Error for ClaimsError {}

/// Loads a claims file.
pub fn load_claims(path: &Path) -> Result<Claims, ClaimsError> {
    let origin = path.display().to_string();
    let text = nvme::input::read_text_file(path)
        .map_err(|e| ClaimsError::Read { origin: origin.clone(), message: e.to_string() })?;
    parse_claims(&text, &origin)
}

/// Parses claims text; `origin` names it in errors and citations.
pub fn parse_claims(text: &str, origin: &str) -> Result<Claims, ClaimsError> {
    let Strict(file): Strict<Spanned<ClaimsFile>> =
        serde_saphyr::from_str_with_options(text, crate::suite::yaml_options()).map_err(|e| yaml_error(origin, &e))?;
    file.value.validate(origin)
}

/// The claims a simulated-drive profile carries under its `claims:` key (`None` if it has
/// none), located in the profile file itself. The rest of the profile is the simulator's
/// (`nvme_sim::Profile`) and is not checked here.
pub fn claims_of_profile(text: &str, origin: &str) -> Result<Option<Claims>, ClaimsError> {
    let Strict(profile): Strict<ProfileWithClaims> =
        serde_saphyr::from_str_with_options(text, crate::suite::yaml_options()).map_err(|e| yaml_error(origin, &e))?;
    profile.claims.map(|c| c.value.validate(origin)).transpose()
}

impl Claims {
    /// A claim as a verdict names it: `FILE:LINE:COLUMN (what)`, e.g.
    /// `claims.yaml:7:5 (read_qos `mixed`: p99.9 ≤ 120 µs at 50000 read IOPS of 4 KiB, 500 MB/s background write)`.
    pub fn cite<T>(&self, claim: &Claimed<T>, what: &str) -> String {
        format!("{}:{}:{} ({what})", self.origin, claim.line, claim.column)
    }

    /// A read QoS promise cited with its name and what it promises.
    pub fn cite_read_qos(&self, claim: &Claimed<ReadQos>) -> String {
        let which = match &claim.value.name {
            Some(name) => format!("read_qos `{name}`"),
            None => "read_qos".to_string(),
        };
        self.cite(claim, &format!("{which}: {}", claim.value.describe()))
    }

    /// The warning of claims that are not of the drive whose Identify Controller MN is
    /// `drive_model`: `model` given and not the MN (both trimmed), or without `model`,
    /// `drive` not containing the MN. `None` when they are of it (or the MN is empty,
    /// nothing to compare).
    pub fn model_mismatch(&self, drive_model: &str) -> Option<String> {
        let mn = drive_model.trim();
        if mn.is_empty() {
            return None;
        }
        match &self.model {
            Some(model) if model != mn => {
                Some(format!("claims file {} is for model {model}, the drive is model {mn}", self.origin))
            }
            Some(_) => None,
            None if !self.drive.contains(mn) => Some(format!(
                "claims file {} is for model {} (its `drive`, no `model` given), the drive is model {mn}",
                self.origin, self.drive
            )),
            None => None,
        }
    }

    /// Whether nothing is claimed but what the drive is.
    pub fn is_empty(&self) -> bool {
        let Claims {
            origin: _,
            drive: _,
            model: _,
            read_qos,
            ready_time,
            power_loss_protection,
            crypto_erase,
            namespaces,
            firmware_activation_without_reset,
            dual_port,
            hot_plug,
            arbitration,
        } = self;
        read_qos.is_empty()
            && ready_time.is_none()
            && power_loss_protection.is_none()
            && crypto_erase.is_none()
            && namespaces.is_none()
            && firmware_activation_without_reset.is_none()
            && dual_port.is_none()
            && hot_plug.is_none()
            && arbitration.is_none()
    }
}

impl ReadQos {
    /// The promise in words: `p99.9 ≤ 120 µs at 50000 read IOPS of 4 KiB, 500 MB/s
    /// background write` (with `, queue depth 32` when one is given).
    pub fn describe(&self) -> String {
        let depth = self.queue_depth.map(|d| format!(", queue depth {d}")).unwrap_or_default();
        let write = match self.background_write_bytes_per_s {
            0 => "no background write".to_string(),
            rate => format!("{} background write", show_rate(rate)),
        };
        format!(
            "p{} ≤ {} at {} read IOPS of {}{depth}, {write}",
            self.percentile,
            show_duration(self.latency),
            self.read_iops,
            show_size(u64::from(self.block_bytes)),
        )
    }
}

// ---------------------------------------------------------------------------------
// Quantities: durations, rates, sizes.

/// Nanoseconds per unit of duration.
const DURATION_UNITS: &[(&str, u64)] =
    &[("ns", 1), ("us", 1_000), ("µs", 1_000), ("μs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)];

/// Bytes per second per unit of rate; decimal (10^3) then binary (2^10) prefixes.
const RATE_UNITS: &[(&str, u64)] = &[
    ("B/s", 1),
    ("kB/s", 1_000),
    ("KB/s", 1_000),
    ("MB/s", 1_000_000),
    ("GB/s", 1_000_000_000),
    ("KiB/s", 1 << 10),
    ("MiB/s", 1 << 20),
    ("GiB/s", 1 << 30),
];

/// A duration: a number and a unit (`120 us`, `120 µs`, `0.12 ms`, `5 s`, `200 ns`), or
/// a bare `0`. The number may have decimals as long as the duration is whole nanoseconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let shown = text.trim();
    let examples = "write a number and a unit (ns, us, µs, ms, s), e.g. `120 us` or `0.12 ms`";
    let nanos = scaled_by_unit(shown, DURATION_UNITS)
        .map_err(|p| p.message(shown, "a duration", "a whole number of nanoseconds", examples))?;
    Ok(Duration::from_nanos(nanos))
}

/// A rate in bytes per second: a number and a unit (`500 MB/s`, `1.5 GB/s`, `200 MiB/s`;
/// B/s, kB/s, KB/s, MB/s, GB/s are powers of 10, KiB/s, MiB/s, GiB/s of 2), or `0` or
/// `none` for none.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let shown = text.trim();
    if shown == "none" {
        return Ok(0);
    }
    let examples =
        "write a number and a unit (B/s, kB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s), e.g. `500 MB/s`, or 0 or `none`";
    scaled_by_unit(shown, RATE_UNITS)
        .map_err(|p| p.message(shown, "a rate", "a whole number of bytes per second", examples))
}

/// Why a quantity did not parse.
#[derive(Debug, PartialEq, Eq)]
enum QuantityProblem {
    /// Not a number followed by one of the units.
    Malformed,
    /// A number other than 0 without a unit.
    NoUnit,
    /// Finer than the smallest unit counted (a nanosecond, a byte per second).
    NotWhole,
    /// Beyond a u64 of the smallest unit.
    TooLarge,
}

impl QuantityProblem {
    fn message(&self, text: &str, kind: &str, whole: &str, examples: &str) -> String {
        match self {
            QuantityProblem::Malformed => format!("`{text}` is not {kind}; {examples}"),
            QuantityProblem::NoUnit => format!("`{text}` has no unit; {examples}"),
            QuantityProblem::NotWhole => format!("`{text}` is not {whole}; {examples}"),
            QuantityProblem::TooLarge => format!("`{text}` is too large for {kind}"),
        }
    }
}

/// `text` (a decimal number, then one of `units`) in the units' smallest unit.
fn scaled_by_unit(text: &str, units: &[(&str, u64)]) -> Result<u64, QuantityProblem> {
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = (&text[..end], text[end..].trim());
    let scale = if unit.is_empty() {
        // Only zero needs no unit.
        let zero = !number.is_empty() && number.chars().all(|c| c == '0' || c == '.');
        if zero && scaled(number, 1).is_ok() {
            return Ok(0);
        }
        return Err(if scaled(number, 1).is_ok() { QuantityProblem::NoUnit } else { QuantityProblem::Malformed });
    } else {
        units.iter().find(|(name, _)| *name == unit).map(|(_, scale)| *scale).ok_or(QuantityProblem::Malformed)?
    };
    scaled(number, scale)
}

/// The decimal `number` (`120`, `0.12`) times `scale`, when that is a whole number.
fn scaled(number: &str, scale: u64) -> Result<u64, QuantityProblem> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || (number.contains('.') && fraction.is_empty()) {
        return Err(QuantityProblem::Malformed);
    }
    let fraction = fraction.trim_end_matches('0');
    let whole: u128 = whole.parse().map_err(|_| QuantityProblem::TooLarge)?;
    let value = whole.checked_mul(u128::from(scale)).ok_or(QuantityProblem::TooLarge)?;
    let part = if fraction.is_empty() {
        0
    } else {
        // More decimals than 10^19 (a u64 scale) could ever make whole.
        let denominator = u32::try_from(fraction.len())
            .ok()
            .filter(|&n| n <= 19)
            .map(|n| 10u128.pow(n))
            .ok_or(QuantityProblem::NotWhole)?;
        let numerator = fraction.parse::<u128>().map_err(|_| QuantityProblem::NotWhole)? * u128::from(scale);
        if !numerator.is_multiple_of(denominator) {
            return Err(QuantityProblem::NotWhole);
        }
        numerator / denominator
    };
    u64::try_from(value + part).map_err(|_| QuantityProblem::TooLarge)
}

/// `value` in the largest of `units` (largest first) that shows it with at most three
/// decimals; the last unit otherwise.
fn show_in(value: u128, units: &[(&str, u128)]) -> String {
    let (name, scale) = units
        .iter()
        .find(|(_, scale)| value >= *scale && (value * 1000).is_multiple_of(*scale))
        .unwrap_or(&units[units.len() - 1]);
    let milli = value * 1000 / scale;
    let (whole, fraction) = (milli / 1000, milli % 1000);
    if fraction == 0 {
        format!("{whole} {name}")
    } else {
        format!("{whole}.{} {name}", format!("{fraction:03}").trim_end_matches('0'))
    }
}

/// A duration as claims show it: `120 µs`, `5 s`, `1.5 ms`, `200 ns`.
pub fn show_duration(d: Duration) -> String {
    show_in(d.as_nanos(), &[("s", 1_000_000_000), ("ms", 1_000_000), ("µs", 1_000), ("ns", 1)])
}

/// A rate as claims show it: `500 MB/s`, `1.5 GB/s`, `200 MiB/s`.
pub fn show_rate(bytes_per_s: u64) -> String {
    show_in(
        u128::from(bytes_per_s),
        &[
            ("GB/s", 1_000_000_000),
            ("GiB/s", 1 << 30),
            ("MB/s", 1_000_000),
            ("MiB/s", 1 << 20),
            ("kB/s", 1_000),
            ("KiB/s", 1 << 10),
            ("B/s", 1),
        ],
    )
}

/// A size as claims show it: `4 KiB`, `512 B`, `1 MiB`.
fn show_size(bytes: u64) -> String {
    let (name, shift) = [("GiB", 30), ("MiB", 20), ("KiB", 10)]
        .into_iter()
        .find(|(_, s)| bytes >= 1 << s && bytes.is_multiple_of(1 << s))
        .unwrap_or(("B", 0));
    format!("{} {name}", bytes >> shift)
}

// ---------------------------------------------------------------------------------
// The file as written.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimsFile {
    drive: Spanned<String>,
    model: Option<Spanned<String>>,
    #[serde(default)]
    read_qos: Vec<Spanned<ReadQosFile>>,
    ready_time: Option<Spanned<Quantity>>,
    power_loss_protection: Option<Spanned<bool>>,
    crypto_erase: Option<Spanned<bool>>,
    namespaces: Option<Spanned<NamespacesFile>>,
    firmware_activation_without_reset: Option<Spanned<bool>>,
    dual_port: Option<Spanned<bool>>,
    hot_plug: Option<Spanned<bool>>,
    arbitration: Option<Spanned<ArbitrationFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadQosFile {
    name: Option<Spanned<String>>,
    read_iops: Spanned<u64>,
    block: Option<Spanned<Quantity>>,
    queue_depth: Option<Spanned<u32>>,
    background_write: Option<Spanned<Quantity>>,
    percentile: Spanned<f64>,
    latency: Spanned<Quantity>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NamespacesFile {
    max: Spanned<u32>,
    #[serde(default)]
    lba_sizes: Vec<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArbitrationFile {
    #[serde(default)]
    weighted_round_robin: bool,
    #[serde(default)]
    urgent: bool,
}

/// A profile: only its `claims:` are read here (other keys are ignored, not refused).
#[derive(Deserialize)]
struct ProfileWithClaims {
    claims: Option<Spanned<ClaimsFile>>,
}

/// A quantity as written: a number (`4096`, `0`) or text with a unit (`4 KiB`,
/// `120 us`, `500 MB/s`), read by [`nvme::input::parse_size`],
/// [`parse_duration`] or [`parse_rate`].
pub(crate) struct Quantity(pub(crate) String);

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct QuantityVisitor;

        impl Visitor<'_> for QuantityVisitor {
            type Value = Quantity;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity with its unit, e.g. `4 KiB`, `120 us` or `500 MB/s`")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
        }

        deserializer.deserialize_any(QuantityVisitor)
    }
}

// ---------------------------------------------------------------------------------
// Checking.

fn yaml_error(origin: &str, e: &serde_saphyr::Error) -> ClaimsError {
    let (line, column, message) = crate::yaml_message::located(e);
    let message = match message.as_str() {
        "unexpected end of file" | "unexpected end of input" => {
            "the file is empty or ends early; claims need at least `drive: …` (what they are of)".to_string()
        }
        _ => message,
    };
    ClaimsError::Invalid { origin: origin.to_string(), line, column, message }
}

fn claimed<T>(value: T, at: &Location) -> Claimed<T> {
    Claimed { value, line: at.line().max(1), column: at.column().max(1) }
}

/// Turns the file's spans into errors at `origin`.
struct Checker<'a> {
    origin: &'a str,
}

impl Checker<'_> {
    fn error(&self, at: &Location, message: impl Into<String>) -> ClaimsError {
        ClaimsError::Invalid {
            origin: self.origin.to_string(),
            line: at.line().max(1),
            column: at.column().max(1),
            message: message.into(),
        }
    }

    fn duration(&self, key: &str, q: &Spanned<Quantity>) -> Result<Duration, ClaimsError> {
        parse_duration(&q.value.0).map_err(|m| self.error(&q.referenced, format!("{key} {m}")))
    }

    fn read_qos(&self, q: &ReadQosFile) -> Result<ReadQos, ClaimsError> {
        if q.read_iops.value == 0 {
            return Err(self.error(
                &q.read_iops.referenced,
                "read_iops 0 is not a load; give the read IOPS the promise holds at, e.g. 50000",
            ));
        }
        let block_bytes = match &q.block {
            None => DEFAULT_BLOCK_BYTES,
            Some(b) => {
                let bytes = nvme::input::parse_size(&b.value.0).ok_or_else(|| {
                    self.error(
                        &b.referenced,
                        format!(
                            "block `{}` is not a size; write bytes (4096) or a number with B, KiB or MiB (4 KiB)",
                            b.value.0
                        ),
                    )
                })?;
                match u32::try_from(bytes) {
                    Ok(n) if n > 0 && n.is_multiple_of(512) => n,
                    _ => {
                        return Err(self.error(
                            &b.referenced,
                            format!("block {bytes} bytes is not a read size; a read is whole 512-byte units (512 B, 4 KiB, 128 KiB) below 4 GiB"),
                        ))
                    }
                }
            }
        };
        if let Some(d) = &q.queue_depth {
            if d.value == 0 {
                return Err(self.error(&d.referenced, "queue_depth 0; at least one read is outstanding (1 or more)"));
            }
        }
        let background_write_bytes_per_s = match &q.background_write {
            None => 0,
            Some(w) => {
                parse_rate(&w.value.0).map_err(|m| self.error(&w.referenced, format!("background_write {m}")))?
            }
        };
        let p = q.percentile.value;
        if !(p > 0.0 && p < 100.0) {
            return Err(self.error(
                &q.percentile.referenced,
                format!("percentile {p} is not between 0 and 100 (exclusive); write e.g. 99.9"),
            ));
        }
        let latency = self.duration("latency", &q.latency)?;
        if latency.is_zero() {
            return Err(self.error(
                &q.latency.referenced,
                "latency 0 is not a bound (every read takes time); give the bound, e.g. 120 us",
            ));
        }
        Ok(ReadQos {
            name: q.name.as_ref().map(|n| n.value.trim().to_string()),
            read_iops: q.read_iops.value,
            block_bytes,
            queue_depth: q.queue_depth.as_ref().map(|d| d.value),
            background_write_bytes_per_s,
            percentile: p,
            latency,
        })
    }

    fn namespaces(&self, n: &NamespacesFile) -> Result<NamespaceClaim, ClaimsError> {
        if n.max.value == 0 {
            return Err(self.error(
                &n.max.referenced,
                "namespaces max 0 is not a count; a drive supports at least 1 namespace (NN)",
            ));
        }
        let mut lba_sizes = Vec::new();
        for size in &n.lba_sizes {
            let s = size.value;
            if !(s.is_power_of_two() && (512..=MAX_LBA_SIZE).contains(&s)) {
                return Err(self.error(
                    &size.referenced,
                    format!(
                        "lba size {s} is not an LBA data size; a power of two from 512 to {MAX_LBA_SIZE} (512, 4096)"
                    ),
                ));
            }
            if lba_sizes.contains(&s) {
                return Err(self.error(&size.referenced, format!("lba size {s} is listed twice")));
            }
            lba_sizes.push(s);
        }
        Ok(NamespaceClaim { max: n.max.value, lba_sizes })
    }
}

impl ClaimsFile {
    fn validate(self, origin: &str) -> Result<Claims, ClaimsError> {
        let check = Checker { origin };
        let drive = self.drive.value.trim().to_string();
        if drive.is_empty() {
            return Err(check.error(
                &self.drive.referenced,
                "drive is empty; say what the claims are of, e.g. `PBlaze5 916 (datasheet 2019)`",
            ));
        }
        let model = match &self.model {
            Some(m) if m.value.trim().is_empty() => {
                return Err(check.error(
                    &m.referenced,
                    "model is empty; give the drive's Identify Controller MN (Model Number), or leave it out",
                ))
            }
            Some(m) => Some(m.value.trim().to_string()),
            None => None,
        };
        let mut names: BTreeSet<String> = BTreeSet::new();
        let mut read_qos = Vec::new();
        for q in &self.read_qos {
            if let Some(name) = &q.value.name {
                let text = name.value.trim();
                if text.is_empty() {
                    return Err(check.error(&name.referenced, "name is empty; leave it out or give the promise a name"));
                }
                if !names.insert(text.to_string()) {
                    return Err(check.error(
                        &name.referenced,
                        format!("read_qos name `{text}` is used twice; each promise's name is unique in the file"),
                    ));
                }
            }
            read_qos.push(claimed(check.read_qos(&q.value)?, &q.referenced));
        }
        let flag = |f: &Option<Spanned<bool>>| f.as_ref().map(|b| claimed(b.value, &b.referenced));
        Ok(Claims {
            origin: origin.to_string(),
            drive,
            model,
            read_qos,
            ready_time: match &self.ready_time {
                Some(t) => Some(claimed(check.duration("ready_time", t)?, &t.referenced)),
                None => None,
            },
            power_loss_protection: flag(&self.power_loss_protection),
            crypto_erase: flag(&self.crypto_erase),
            namespaces: match &self.namespaces {
                Some(n) => Some(claimed(check.namespaces(&n.value)?, &n.referenced)),
                None => None,
            },
            firmware_activation_without_reset: flag(&self.firmware_activation_without_reset),
            dual_port: flag(&self.dual_port),
            hot_plug: flag(&self.hot_plug),
            arbitration: self.arbitration.as_ref().map(|a| {
                claimed(
                    ArbitrationClaim { weighted_round_robin: a.value.weighted_round_robin, urgent: a.value.urgent },
                    &a.referenced,
                )
            }),
        })
    }
}

#[cfg(test)]
mod tests;
