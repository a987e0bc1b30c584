//! The scenario file's shape (serde): every key of sim/README.md's "Scenario file", with
//! `deny_unknown_fields` so a misspelt key is reported with its line.

use std::collections::BTreeMap;

use rand::Rng;
use rand::rngs::StdRng;
use serde::{Deserialize, Deserializer, de::Error as _};
use waterline_core::Millis;
use waterline_core::time::parse_duration;
use waterline_core::yaml::{ByteQuantity, CpuQuantity};

use crate::scenario::Diurnal;

/// A duration such as `30s` or `1h30m`; zero allowed, and a leading `-` for times in the
/// warm-up before 0.
#[derive(Clone, Copy, Debug)]
pub(super) struct Duration(pub(super) Millis);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let (sign, body) = match text.trim().strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, text.trim()),
        };
        parse_duration(body).map(|m| Duration(Millis(sign * m.0))).map_err(D::Error::custom)
    }
}

/// A number, or `{min, max}` drawn uniformly per node or pod.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum Level {
    Fixed(f64),
    Range { min: f64, max: f64 },
}

impl Level {
    pub(super) fn draw(self, rng: &mut StdRng) -> f64 {
        match self {
            Level::Fixed(v) => v,
            Level::Range { min, max } if max > min => rng.random_range(min..max),
            Level::Range { min, .. } => min,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct DiurnalFile {
    pub(super) amplitude: f64,
    pub(super) period: Option<Duration>,
    pub(super) peak: Duration,
}

impl DiurnalFile {
    pub(super) fn resolve(&self) -> Diurnal {
        Diurnal {
            amplitude: self.amplitude,
            period: self.period.map_or(Millis::from_mins(24 * 60), |p| p.0),
            peak: self.peak.0.0,
        }
    }
}

/// `[[time, value], ...]` with times as durations.
pub(super) type PointsFile<V> = Vec<(Duration, V)>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct BackgroundSeriesFile {
    pub(super) cpu: Option<PointsFile<f64>>,
    pub(super) memory: Option<PointsFile<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct BackgroundFile {
    /// Percent of allocatable.
    pub(super) cpu: Option<Level>,
    pub(super) memory: Option<Level>,
    pub(super) diurnal: Option<DiurnalFile>,
    pub(super) series: Option<BackgroundSeriesFile>,
    pub(super) volatile: Option<VolatileFile>,
}

/// A regime's levels, percent of allocatable, drawn per node.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RegimeFile {
    pub(super) cpu: Level,
    pub(super) memory: Level,
}

/// A dwell-time distribution: lognormal `{median, sigma}` or Pareto `{min, alpha}` (each
/// strict about its keys, so a misspelt one fails instead of being ignored).
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum DwellFile {
    LogNormal(LogNormalFile),
    Pareto(ParetoFile),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LogNormalFile {
    pub(super) median: Duration,
    pub(super) sigma: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ParetoFile {
    pub(super) min: Duration,
    pub(super) alpha: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct NoiseFile {
    pub(super) cpu: Option<f64>,
    pub(super) memory: Option<f64>,
    pub(super) correlation: Option<Duration>,
}

/// scenario/volatile.rs: idle and busy regimes with heavy-tailed dwell times and noise.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct VolatileFile {
    pub(super) idle: RegimeFile,
    pub(super) busy: RegimeFile,
    pub(super) idle_dwell: DwellFile,
    pub(super) busy_dwell: DwellFile,
    pub(super) max_dwell: Option<Duration>,
    pub(super) ramp: Option<Duration>,
    pub(super) noise: Option<NoiseFile>,
    pub(super) step: Option<Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct NodeGroupFile {
    pub(super) count: usize,
    pub(super) prefix: String,
    pub(super) cpu: CpuQuantity,
    pub(super) memory: ByteQuantity,
    pub(super) background: Option<BackgroundFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct NodeFile {
    pub(super) name: String,
    pub(super) cpu: CpuQuantity,
    pub(super) memory: ByteQuantity,
    pub(super) background: Option<BackgroundFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct LimitsFile {
    pub(super) cpu: Option<CpuQuantity>,
    pub(super) memory: Option<ByteQuantity>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct UsageSeriesFile {
    pub(super) cpu: Option<PointsFile<CpuQuantity>>,
    pub(super) memory: Option<PointsFile<ByteQuantity>>,
}

/// True usage: `cpu` / `memory` as a fraction of the request (1 = at the request, 2 = twice
/// it), or of `0.1` core / `128Mi` when there is no request.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct UsageFile {
    pub(super) cpu: Option<Level>,
    pub(super) memory: Option<Level>,
    pub(super) ramp_up: Option<Duration>,
    pub(super) diurnal: Option<DiurnalFile>,
    pub(super) series: Option<UsageSeriesFile>,
    /// From `at` (absolute) on, cpu × `cpu`: the workload's load steps up.
    pub(super) step: Option<StepFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct StepFile {
    pub(super) at: Duration,
    pub(super) cpu: f64,
}

/// When a group's pods arrive: all `at` once, one `every` interval apart from `from`, or a
/// Poisson process of `perMinute` from `from` (seeded).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ArrivalFile {
    pub(super) at: Option<Duration>,
    pub(super) from: Option<Duration>,
    pub(super) every: Option<Duration>,
    pub(super) per_minute: Option<f64>,
}

/// Whether Prometheus records a pod's usage series (pipeline/pods.rs): `missing` where
/// cAdvisor is not scraped or the per-pod rules are not deployed for it.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub(super) enum PodSeriesFile {
    Recorded,
    Missing,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PodGroupFile {
    pub(super) prefix: String,
    pub(super) count: usize,
    pub(super) namespace: Option<String>,
    pub(super) arrival: ArrivalFile,
    pub(super) cpu: Option<CpuQuantity>,
    pub(super) memory: Option<ByteQuantity>,
    pub(super) limits: Option<LimitsFile>,
    pub(super) owner_kind: Option<String>,
    /// The controller the group's pods belong to (default: the prefix): groups naming the
    /// same one are one workload — with `ownerKind: ReplicaSet` (the default) each group is
    /// a ReplicaSet (a release) of that Deployment.
    pub(super) workload: Option<String>,
    pub(super) pod_series: Option<PodSeriesFile>,
    pub(super) labels: Option<BTreeMap<String, String>>,
    pub(super) usage: Option<UsageFile>,
    /// Each pod is deleted this long after it arrives; `lifetimeMinutes` draws it per pod
    /// (a number or `{min, max}`, minutes).
    pub(super) lifetime: Option<Duration>,
    pub(super) lifetime_minutes: Option<Level>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PodFile {
    pub(super) name: String,
    pub(super) namespace: Option<String>,
    pub(super) arrival: Duration,
    pub(super) deletion: Option<Duration>,
    pub(super) cpu: Option<CpuQuantity>,
    pub(super) memory: Option<ByteQuantity>,
    pub(super) limits: Option<LimitsFile>,
    pub(super) owner_kind: Option<String>,
    /// The controller's name: pods sharing it spread by PodTopologySpread's defaults.
    pub(super) owner: Option<String>,
    pub(super) labels: Option<BTreeMap<String, String>>,
    /// Bound here already (a trace's existing pods); the scheduler does not place it.
    pub(super) node: Option<String>,
    pub(super) usage: Option<UsageFile>,
    pub(super) pod_series: Option<PodSeriesFile>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum PathFile {
    Plugin,
    Extender,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct OutageFile {
    pub(super) from: Duration,
    pub(super) to: Duration,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PipelineFile {
    pub(super) scrape_interval: Option<Duration>,
    pub(super) rule_interval: Option<Duration>,
    pub(super) hour_rule_interval: Option<Duration>,
    pub(super) day_rule_interval: Option<Duration>,
    pub(super) subquery_step: Option<Duration>,
    pub(super) pod_rule_interval: Option<Duration>,
    pub(super) delay: Option<Duration>,
    pub(super) poll_period: Option<Duration>,
    pub(super) outages: Option<Vec<OutageFile>>,
}

/// koordlet's faults (its intervals are the Koordinator strategy's own).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct KoordletFile {
    pub(super) gaps: Option<Vec<OutageFile>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct SchedulerFile {
    pub(super) path: Option<PathFile>,
    pub(super) cycle: Option<Duration>,
    pub(super) bind_delay: Option<Duration>,
    pub(super) watch_lag: Option<Duration>,
    pub(super) retry_interval: Option<Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ScenarioFile {
    pub(super) name: String,
    pub(super) description: Option<String>,
    pub(super) seed: Option<u64>,
    pub(super) duration: Duration,
    pub(super) warmup: Option<Duration>,
    pub(super) threshold: Option<f64>,
    pub(super) target: Option<f64>,
    pub(super) measure_interval: Option<Duration>,
    pub(super) pipeline: Option<PipelineFile>,
    pub(super) koordlet: Option<KoordletFile>,
    pub(super) scheduler: Option<SchedulerFile>,
    pub(super) node_groups: Option<Vec<NodeGroupFile>>,
    pub(super) nodes: Option<Vec<NodeFile>>,
    pub(super) pod_groups: Option<Vec<PodGroupFile>>,
    pub(super) pods: Option<Vec<PodFile>>,
    /// When the scenario's load step happens: the recovery measures count from it.
    pub(super) load_step: Option<Duration>,
}
