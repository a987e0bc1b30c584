//! The fake nodes' past: a day of node-exporter counters (every CPU × the eight real modes),
//! memory gauges and the recorded 5 m series, written one time window at a time as OpenMetrics
//! files (a day of 500k series never sits in memory) for `promtool tsdb create-blocks-from
//! openmetrics`.
//!
//! Load follows a smooth daily curve per node, so the counters are its exact integral and the
//! recorded 5 m averages (what the 5 m rules would have written every 30 s) are exact too:
//! the two rule variants can be compared on the same past.

use std::f64::consts::TAU;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use waterline_tests::exporter::{CpuModes, FakeNode, JOB_NAME};

const DAY: f64 = 86_400.0;
/// Interval of the recorded 5 m series in the history (the shipped 5 m group's).
pub const RECORDED_STEP_SECS: i64 = 30;
const CPU_5M: &str = "waterline:node_cpu_usage:avg5m";
const MEM_5M: &str = "waterline:node_memory_usage:avg5m";

/// Node `i`'s daily load curve: busy fraction `f(t) = base + amp·sin(2πt/day + phase)`,
/// memory used `g(t)` likewise.
#[derive(Clone, Copy, Debug)]
pub struct Curve {
    base: f64,
    phase: f64,
    mem_base: f64,
}

const CPU_AMP: f64 = 0.15;
const MEM_AMP: f64 = 0.10;

impl Curve {
    pub fn of(i: usize) -> Curve {
        Curve {
            base: 0.20 + 0.5 * ((i * 37) % 100) as f64 / 100.0,
            phase: TAU * ((i * 13) % 24) as f64 / 24.0,
            mem_base: 0.30 + 0.4 * ((i * 53) % 100) as f64 / 100.0,
        }
    }

    /// Busy fraction at unix time `t` (0.05..0.85).
    pub fn busy(&self, t: f64) -> f64 {
        self.base + CPU_AMP * (TAU * t / DAY + self.phase).sin()
    }

    /// ∫ busy dt from 0 to `t` (up to a constant, which cancels in every difference).
    fn busy_integral(&self, t: f64) -> f64 {
        self.base * t - CPU_AMP * DAY / TAU * (TAU * t / DAY + self.phase).cos()
    }

    /// Used memory fraction at `t` (0.2..0.8).
    pub fn memory_used(&self, t: f64) -> f64 {
        self.mem_base + MEM_AMP * (TAU * t / DAY + self.phase + 1.0).sin()
    }
}

/// The past of `nodes` from `start` on, sampled every `step` seconds (node-exporter series)
/// and every [`RECORDED_STEP_SECS`] (recorded series); [`History::write_chunk`] appends the
/// next window.
pub struct History {
    nodes: Vec<(FakeNode, Curve)>,
    start: i64,
    step: i64,
    /// The last grid time written (node-exporter series, recorded series).
    done: Option<(i64, i64)>,
}

/// What one chunk holds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Chunk {
    pub samples: u64,
    pub bytes: u64,
}

impl History {
    pub fn new(nodes: Vec<(FakeNode, Curve)>, start: i64, step: i64) -> History {
        History { nodes, start, step: step.max(1), done: None }
    }

    /// Writes every grid time in (last written, `end`] (from `start` on the first call) to
    /// `path`. Counters are `∫ load` since `start`, so they continue across chunks.
    pub fn write_chunk(&mut self, path: &Path, end: i64) -> Result<Chunk> {
        let (raw_from, rec_from) = match self.done {
            None => (self.start, self.start.div_euclid(RECORDED_STEP_SECS) * RECORDED_STEP_SECS),
            Some((raw, rec)) => (raw + self.step, rec + RECORDED_STEP_SECS),
        };
        let raw: Vec<i64> =
            (0..).map(|k| raw_from + k * self.step).take_while(|t| *t <= end).collect();
        let rec: Vec<i64> =
            (0..).map(|k| rec_from + k * RECORDED_STEP_SECS).take_while(|t| *t <= end).collect();
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut chunk = Chunk::default();
        let mut line = String::with_capacity(256);
        let start = self.start as f64;

        out.write_all(b"# HELP node_cpu_seconds Seconds the CPUs spent in each mode.\n# TYPE node_cpu_seconds counter\n")?;
        for (node, curve) in &self.nodes {
            let labels = labels(node);
            let b0 = curve.busy_integral(start);
            // Every mode's counter at every time of the chunk (all CPUs of a node are alike).
            let split: Vec<Vec<(&str, f64)>> = raw
                .iter()
                .map(|&t| {
                    let busy = curve.busy_integral(t as f64) - b0;
                    CpuModes::NodeExporter.split(busy, (t as f64 - start) - busy)
                })
                .collect();
            let modes = CpuModes::NodeExporter.split(0.0, 0.0);
            for cpu in 0..node.cores {
                for (m, (mode, _)) in modes.iter().enumerate() {
                    for (&t, values) in raw.iter().zip(&split) {
                        let value = values[m].1;
                        line.clear();
                        let _ = writeln!(
                            line,
                            "node_cpu_seconds_total{{cpu=\"{cpu}\",mode=\"{mode}\",{labels}}} {value:.3} {t}.000"
                        );
                        out.write_all(line.as_bytes())?;
                        chunk.samples += 1;
                        chunk.bytes += line.len() as u64;
                    }
                }
            }
        }
        let gauges: [(&str, &str, &[i64]); 4] = [
            (
                "node_memory_MemAvailable_bytes",
                "Memory information field MemAvailable_bytes.",
                &raw,
            ),
            ("node_memory_MemTotal_bytes", "Memory information field MemTotal_bytes.", &raw),
            (CPU_5M, "Recorded 5 m cpu usage, percent.", &rec),
            (MEM_5M, "Recorded 5 m memory usage, percent.", &rec),
        ];
        for (family, help, times) in gauges {
            let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} gauge");
            for (node, curve) in &self.nodes {
                // A recorded series has the labels its rule keeps: `by (instance, node)`.
                let labels = if family.starts_with("waterline:") {
                    recorded_labels(node)
                } else {
                    labels(node)
                };
                for &t in times {
                    let tf = t as f64;
                    let value = match family {
                        "node_memory_MemAvailable_bytes" => {
                            (node.memory_bytes as f64 * (1.0 - curve.memory_used(tf))).round()
                        }
                        "node_memory_MemTotal_bytes" => node.memory_bytes as f64,
                        // The 5 m average of the busy curve, exactly.
                        CPU_5M => {
                            100.0 * (curve.busy_integral(tf) - curve.busy_integral(tf - 300.0))
                                / 300.0
                        }
                        _ => 100.0 * curve.memory_used(tf),
                    };
                    line.clear();
                    let _ = writeln!(line, "{family}{{{labels}}} {value} {t}.000");
                    out.write_all(line.as_bytes())?;
                    chunk.samples += 1;
                    chunk.bytes += line.len() as u64;
                }
            }
        }
        out.write_all(b"# EOF\n")?;
        out.flush()?;
        if let (Some(&r), Some(&c)) = (raw.last(), rec.last()) {
            self.done = Some((r, c));
        }
        Ok(chunk)
    }
}

/// `instance`, `job` and `node` as the live scrape gives them (`FakeExporter::scrape_configs`).
fn labels(node: &FakeNode) -> String {
    format!(
        "instance=\"{}\",job=\"{JOB_NAME}\",node=\"{}\"",
        node.instance(),
        node.node_label().unwrap_or(&node.name)
    )
}

fn recorded_labels(node: &FakeNode) -> String {
    format!("instance=\"{}\",node=\"{}\"", node.instance(), node.node_label().unwrap_or(&node.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_continue_the_counters_and_cover_each_time_once() {
        let node = FakeNode::new("n").with_cores(1).with_memory_bytes(1000);
        let curve = Curve::of(3);
        let dir = tempfile::tempdir().unwrap();
        let mut h = History::new(vec![(node, curve)], 1_800_000_000, 300);
        let a = dir.path().join("a.om");
        let b = dir.path().join("b.om");
        h.write_chunk(&a, 1_800_000_600).unwrap();
        h.write_chunk(&b, 1_800_001_200).unwrap();
        let a = std::fs::read_to_string(a).unwrap();
        let b = std::fs::read_to_string(b).unwrap();
        let idle = |text: &str| -> Vec<(f64, i64)> {
            text.lines()
                .filter(|l| l.starts_with("node_cpu_seconds_total{cpu=\"0\",mode=\"idle\""))
                .map(|l| {
                    let mut f = l.rsplit(' ');
                    let t = f.next().unwrap().trim_end_matches(".000").parse().unwrap();
                    (f.next().unwrap().parse().unwrap(), t)
                })
                .collect()
        };
        let (ia, ib) = (idle(&a), idle(&b));
        // 0, 300, 600 in the first chunk; 900, 1200 in the second.
        assert_eq!(ia.iter().map(|x| x.1 - 1_800_000_000).collect::<Vec<_>>(), [0, 300, 600]);
        assert_eq!(ib.iter().map(|x| x.1 - 1_800_000_000).collect::<Vec<_>>(), [900, 1200]);
        // Idle seconds over 300 s = 300 × (1 − the curve's mean busy fraction there).
        let t = 1_800_000_900.0;
        let mean_busy = (curve.busy_integral(t) - curve.busy_integral(t - 300.0)) / 300.0;
        assert!((ib[0].0 - ia[2].0 - 300.0 * (1.0 - mean_busy)).abs() < 0.01);
        assert!(a.ends_with("# EOF\n") && b.contains("waterline:node_cpu_usage:avg5m{"));
        // Eight modes per CPU.
        assert_eq!(
            a.lines()
                .filter(|l| l.ends_with(" 1800000000.000") && l.starts_with("node_cpu"))
                .count(),
            8
        );
    }
}
