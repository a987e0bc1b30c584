//! True usage over time: a node's background and a pod's profile. The scheduler never reads
//! these; the pipeline scrapes them and the measures judge by them.

use std::f64::consts::TAU;

use waterline_core::Millis;

use crate::model::{Resources, SimTime};

/// A daily (or any period) swing: `1 + amplitude × cos(2π (t − peak) / period)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Diurnal {
    pub amplitude: f64,
    pub period: Millis,
    /// Simulated time of a peak (time 0 is the start of the measured run).
    pub peak: SimTime,
}

impl Diurnal {
    pub fn factor(&self, t: SimTime) -> f64 {
        1.0 + self.amplitude * (TAU * (t - self.peak) as f64 / self.period.0 as f64).cos()
    }
}

/// Points `(time, value)` joined by straight lines, flat before the first and after the
/// last.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series(pub Vec<(SimTime, f64)>);

impl Series {
    pub fn at(&self, t: SimTime) -> Option<f64> {
        let points = &self.0;
        let first = points.first()?;
        if t <= first.0 {
            return Some(first.1);
        }
        let i = points.partition_point(|p| p.0 <= t);
        if i >= points.len() {
            return points.last().map(|p| p.1);
        }
        let (t0, v0) = points[i - 1];
        let (t1, v1) = points[i];
        Some(v0 + (v1 - v0) * (t - t0) as f64 / (t1 - t0) as f64)
    }
}

/// What runs on a node besides the scheduled pods (system daemons, pods placed before the
/// run), in percent of allocatable.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Background {
    pub cpu_pct: f64,
    pub memory_pct: f64,
    /// Applied to cpu only (memory rarely follows traffic).
    pub diurnal: Option<Diurnal>,
    /// When set, replaces `cpu_pct` (absolute simulated times).
    pub cpu_series: Option<Series>,
    pub memory_series: Option<Series>,
}

impl Background {
    /// Usage at `t` on a node of `allocatable`.
    pub fn at(&self, t: SimTime, allocatable: Resources) -> (f64, f64) {
        let mut cpu = self.cpu_series.as_ref().and_then(|s| s.at(t)).unwrap_or(self.cpu_pct);
        if let Some(d) = &self.diurnal {
            cpu *= d.factor(t);
        }
        let memory = self.memory_series.as_ref().and_then(|s| s.at(t)).unwrap_or(self.memory_pct);
        (
            cpu.max(0.0) / 100.0 * allocatable.cpu_millis as f64,
            memory.max(0.0) / 100.0 * allocatable.memory_bytes as f64,
        )
    }
}

/// A pod's true usage: linear ramp from 0 to the steady level over `ramp` after it starts,
/// the cpu optionally swinging with a diurnal factor, capped at the limits (cpu throttled,
/// memory at its limit). Series, when given, replace the steady levels (times since start).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodUsage {
    pub cpu_millis: f64,
    pub memory_bytes: f64,
    pub ramp: Millis,
    pub diurnal: Option<Diurnal>,
    pub cpu_series: Option<Series>,
    pub memory_series: Option<Series>,
    /// From this absolute time on, the cpu level is multiplied by the factor: the workload's
    /// traffic steps up wherever its pods run (a recreated pod keeps it).
    pub cpu_step: Option<(SimTime, f64)>,
}

impl PodUsage {
    /// Usage `since_start` after the pod started, at absolute time `t`.
    pub fn at(&self, since_start: i64, t: SimTime, limits: Resources) -> (f64, f64) {
        if since_start < 0 {
            return (0.0, 0.0);
        }
        let ramp =
            if self.ramp.0 > 0 { (since_start as f64 / self.ramp.0 as f64).min(1.0) } else { 1.0 };
        let mut cpu =
            self.cpu_series.as_ref().and_then(|s| s.at(since_start)).unwrap_or(self.cpu_millis);
        let mut memory = self
            .memory_series
            .as_ref()
            .and_then(|s| s.at(since_start))
            .unwrap_or(self.memory_bytes);
        if let Some((at, factor)) = self.cpu_step
            && t >= at
        {
            cpu *= factor;
        }
        cpu *= ramp;
        memory *= ramp;
        if let Some(d) = &self.diurnal {
            cpu *= d.factor(t);
        }
        if limits.cpu_millis > 0 {
            cpu = cpu.min(limits.cpu_millis as f64);
        }
        if limits.memory_bytes > 0 {
            memory = memory.min(limits.memory_bytes as f64);
        }
        (cpu.max(0.0), memory.max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_interpolates_and_holds_its_ends() {
        let s = Series(vec![(0, 10.0), (100, 30.0)]);
        assert_eq!(s.at(-5), Some(10.0));
        assert_eq!(s.at(50), Some(20.0));
        assert_eq!(s.at(500), Some(30.0));
        assert_eq!(Series::default().at(0), None);
    }

    #[test]
    fn pod_usage_ramps_and_respects_limits() {
        let u = PodUsage {
            cpu_millis: 1000.0,
            memory_bytes: 100.0,
            ramp: Millis(60_000),
            ..Default::default()
        };
        assert_eq!(u.at(30_000, 0, Resources::default()), (500.0, 50.0));
        assert_eq!(u.at(120_000, 0, Resources::new(800, 0)), (800.0, 100.0));
        assert_eq!(u.at(-1, 0, Resources::default()), (0.0, 0.0));
    }

    #[test]
    fn a_cpu_step_applies_from_its_absolute_time_whenever_the_pod_started() {
        let u = PodUsage {
            cpu_millis: 500.0,
            memory_bytes: 100.0,
            ramp: Millis(60_000),
            cpu_step: Some((600_000, 10.0)),
            ..Default::default()
        };
        // an old pod: 500m before 10 m, 5000m from 10 m
        assert_eq!(u.at(3_600_000, 599_999, Resources::default()), (500.0, 100.0));
        assert_eq!(u.at(3_600_000, 600_000, Resources::default()), (5000.0, 100.0));
        // a pod started at 20 m ramps to the stepped level: half of 5000m after 30 s
        assert_eq!(u.at(30_000, 1_230_000, Resources::default()), (2500.0, 50.0));
    }
}
