//! What a workload measured: per job and operation, commands, IOPS, MB/s and latency
//! percentiles with their sample counts (hdrhistogram, 3 significant digits, 1 ns to
//! 1 hour). One [`Figure`] list feeds the console, the JUnit properties and the JSON
//! record, so the three always show the same numbers.

use hdrhistogram::Histogram;

use super::job::Op;

/// The percentiles reported, as named in figures ("p99.9").
pub const PERCENTILES: [(f64, &str); 5] =
    [(50.0, "p50"), (90.0, "p90"), (99.0, "p99"), (99.9, "p99.9"), (99.99, "p99.99")];

/// Latency of one job's operation, in nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    pub samples: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    /// The values of [`PERCENTILES`], in order.
    pub percentiles_ns: [u64; 5],
    pub max_ns: u64,
}

impl Latency {
    /// The figures of `histogram`, with the exact extremes recorded beside it (the
    /// histogram only knows them to its precision).
    pub fn of(histogram: &Histogram<u64>, min_ns: u64, max_ns: u64) -> Latency {
        Latency {
            samples: histogram.len(),
            min_ns,
            mean_ns: histogram.mean(),
            percentiles_ns: PERCENTILES.map(|(p, _)| histogram.value_at_percentile(p).clamp(min_ns, max_ns)),
            max_ns,
        }
    }
}

/// One operation of one job.
#[derive(Clone, Debug, PartialEq)]
pub struct OpFigures {
    pub op: Op,
    /// Commands completed and counted (those submitted after the warm-up).
    pub commands: u64,
    pub bytes: u64,
    pub iops: f64,
    /// Decimal megabytes per second.
    pub mb_per_s: f64,
    pub latency: Latency,
    /// Every latency sample, for percentiles beyond those reported (a claim's own).
    pub histogram: Histogram<u64>,
}

impl OpFigures {
    /// The latency at percentile `p` (0 < p ≤ 100), in ns, within the exact extremes.
    pub fn latency_at(&self, p: f64) -> u64 {
        self.histogram.value_at_percentile(p).clamp(self.latency.min_ns, self.latency.max_ns)
    }
}

/// One job's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct JobFigures {
    pub job: String,
    /// The measured window (after the warm-up), in ns of the target's clock.
    pub window_ns: u64,
    /// Whether the clock was simulated (exact, repeatable) or the monotonic wall clock.
    pub simulated_clock: bool,
    pub ops: Vec<OpFigures>,
    /// Figures of a campaign rather than of an operation (the power-fail step's cycles,
    /// ready times …), named in full.
    pub extra: Vec<Figure>,
}

/// One named figure: `JOB.OP.METRIC` with its value and unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
}

impl Figure {
    /// The value as text: whole numbers without a fraction, others with three decimals.
    pub fn value_text(&self) -> String {
        if self.value.fract() == 0.0 && self.value.abs() < 1e15 {
            format!("{}", self.value as i64)
        } else {
            format!("{:.3}", self.value)
        }
    }
}

impl JobFigures {
    /// Every figure of the job, flat: what JUnit properties and the JSON record carry.
    pub fn figures(&self) -> Vec<Figure> {
        let mut out = Vec::new();
        for o in &self.ops {
            let base = format!("{}.{}", self.job, o.op.name());
            let mut push = |metric: &str, value: f64, unit: &'static str| {
                out.push(Figure { name: format!("{base}.{metric}"), value, unit });
            };
            push("commands", o.commands as f64, "commands");
            push("iops", round3(o.iops), "IOPS");
            push("mb_per_s", round3(o.mb_per_s), "MB/s");
            push("latency.samples", o.latency.samples as f64, "samples");
            push("latency.min_us", us(o.latency.min_ns), "µs");
            push("latency.mean_us", round3(o.latency.mean_ns / 1000.0), "µs");
            for ((_, name), v) in PERCENTILES.iter().zip(o.latency.percentiles_ns) {
                push(&format!("latency.{name}_us"), us(v), "µs");
            }
            push("latency.max_us", us(o.latency.max_ns), "µs");
        }
        out.extend(self.extra.iter().cloned());
        out
    }

    /// fio-style summary lines, one per operation.
    pub fn summary(&self) -> Vec<String> {
        let clock = if self.simulated_clock { "simulated clock" } else { "monotonic clock" };
        let mut lines = Vec::new();
        for o in &self.ops {
            let l = &o.latency;
            let pct: Vec<String> =
                PERCENTILES.iter().zip(l.percentiles_ns).map(|((_, n), v)| format!("{n}={}", us_text(v))).collect();
            lines.push(format!(
                "{}: {:<10} IOPS={:.0}, BW={:.1}MB/s, {} commands in {:.3}s ({clock})",
                self.job,
                o.op.name(),
                o.iops,
                o.mb_per_s,
                o.commands,
                self.window_ns as f64 / 1e9
            ));
            lines.push(format!(
                "{}: {:<10} lat (µs): min={}, mean={:.2}, {}, max={} ({} samples)",
                self.job,
                o.op.name(),
                us_text(l.min_ns),
                l.mean_ns / 1000.0,
                pct.join(", "),
                us_text(l.max_ns),
                l.samples
            ));
        }
        if !self.extra.is_empty() {
            let text: Vec<String> =
                self.extra.iter().map(|f| format!("{}={} {}", f.name, f.value_text(), f.unit)).collect();
            lines.push(format!("{}: {}", self.job, text.join(", ")));
        }
        lines
    }

    /// The figures of operation `op`, if the job ran any.
    pub fn op(&self, op: Op) -> Option<&OpFigures> {
        self.ops.iter().find(|o| o.op == op)
    }
}

fn us(ns: u64) -> f64 {
    round3(ns as f64 / 1000.0)
}

fn us_text(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// A latency histogram as the engine keeps one: 1 ns to 1 hour, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static histogram bounds are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_name_job_operation_and_metric_with_units() {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let job = JobFigures {
            job: "reads".into(),
            window_ns: 1_000_000_000,
            simulated_clock: true,
            ops: vec![OpFigures {
                op: Op::Read,
                commands: 1000,
                bytes: 4096 * 1000,
                iops: 1000.0,
                mb_per_s: 4.096,
                latency: Latency::of(&h, 1000, 1_000_000),
                histogram: h.clone(),
            }],
            extra: Vec::new(),
        };
        let figures = job.figures();
        let get = |n: &str| figures.iter().find(|f| f.name == n).unwrap_or_else(|| panic!("{n}: {figures:?}"));
        assert_eq!(get("reads.read.iops").value, 1000.0);
        assert_eq!(get("reads.read.latency.samples").value, 1000.0);
        assert!((get("reads.read.latency.p50_us").value - 500.0).abs() <= 1.0);
        assert_eq!(get("reads.read.latency.p99.9_us").unit, "µs");
        assert!((get("reads.read.latency.p99.9_us").value - 999.0).abs() <= 2.0, "{figures:?}");
        assert_eq!(get("reads.read.latency.max_us").value_text(), "1000");
        let summary = job.summary().join("\n");
        assert!(
            summary.contains("IOPS=1000") && summary.contains("p99.9=") && summary.contains("1000 samples"),
            "{summary}"
        );
    }
}
