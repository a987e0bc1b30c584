//! The usage model per workload (docs/design.md#learned-estimate): what each workload's
//! running pods really use, as a ratio of what they request, learned from per-pod usage
//! series. The one home of the learning rule: the collector feeds it Prometheus' answers,
//! the simulator its modelled per-pod series, and both publish the [`LearnedUsage`] the
//! estimator prices new pods by.
//!
//! Each pod arrives already summarised by Prometheus over the policy's window (its usage
//! quantile and its sample count), so a restart loses nothing and the collector never pulls
//! a day of raw samples. Per workload and resource the model keeps the policy's quantile
//! across its pods (nearest rank), the spread between its lowest and highest pod, and the
//! evidence: pods and samples. A workload with less evidence than the policy asks is left
//! out, so its pods are priced by the policy's factors.

use std::collections::BTreeMap;

use crate::FastMap;
use crate::policy::Learn;
use crate::workload::WorkloadKey;

/// At most this many pods of one workload are read per refresh: beyond a thousand
/// replicas another pod does not move a quantile, and the model stays bounded per workload.
pub const MAX_PODS_PER_WORKLOAD: usize = 1000;

/// One pod's usage of one resource over the window, as Prometheus summarised it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Series {
    /// The pod's usage quantile over the window: millicores or bytes.
    pub usage: f64,
    /// How many samples the window held.
    pub samples: u64,
}

/// One running pod with what its series say.
#[derive(Clone, Debug, PartialEq)]
pub struct PodObservation {
    pub workload: WorkloadKey,
    pub cpu_request_millis: i64,
    pub memory_request_bytes: i64,
    pub cpu: Option<Series>,
    pub memory: Option<Series>,
}

/// What a workload's pods use of one resource.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Learned {
    /// The quantile of usage ÷ request across the pods that request the resource; `None`
    /// when none does (the pods are then priced at `usage`).
    pub ratio: Option<f64>,
    /// The quantile of the pods' absolute usage: millicores or bytes.
    pub usage: f64,
    /// Highest minus lowest pod: of the ratio when there is one, else of the usage.
    pub spread: f64,
    pub pods: u32,
    pub samples: u64,
}

/// A workload's learned cpu and memory; either may lack evidence.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WorkloadUsage {
    pub cpu: Option<Learned>,
    pub memory: Option<Learned>,
}

/// The learned table: the workloads with enough evidence.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LearnedUsage {
    workloads: FastMap<WorkloadKey, WorkloadUsage>,
    /// Workloads with evidence left out because the table was full (`estimator.learn.
    /// maxWorkloads`): the ones with the fewest pods go first.
    pub dropped: usize,
}

impl LearnedUsage {
    pub fn get(&self, workload: &WorkloadKey) -> Option<&WorkloadUsage> {
        self.workloads.get(workload)
    }

    pub fn len(&self) -> usize {
        self.workloads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workloads.is_empty()
    }

    /// In key order, so what is sent or shown is the same every time.
    pub fn sorted(&self) -> Vec<(&WorkloadKey, &WorkloadUsage)> {
        let mut all: Vec<_> = self.workloads.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        all
    }
}

impl FromIterator<(WorkloadKey, WorkloadUsage)> for LearnedUsage {
    fn from_iter<I: IntoIterator<Item = (WorkloadKey, WorkloadUsage)>>(iter: I) -> Self {
        LearnedUsage { workloads: iter.into_iter().collect(), dropped: 0 }
    }
}

/// Per workload and resource: (ratio when the pod requests it, usage, samples) per pod.
#[derive(Default)]
struct Evidence {
    cpu: Vec<(Option<f64>, f64, u64)>,
    memory: Vec<(Option<f64>, f64, u64)>,
}

/// The learned table of `observations` under `policy`. Pods with no samples of a resource
/// are not evidence of it; the rest of the rule is in the module's comment.
pub fn learn(
    policy: &Learn,
    observations: impl IntoIterator<Item = PodObservation>,
) -> LearnedUsage {
    let mut by_workload: BTreeMap<WorkloadKey, Evidence> = BTreeMap::new();
    for pod in observations {
        let evidence = by_workload.entry(pod.workload).or_default();
        if evidence.cpu.len().max(evidence.memory.len()) >= MAX_PODS_PER_WORKLOAD {
            continue;
        }
        let read = |series: Option<Series>, request: i64| {
            series.filter(|s| s.samples > 0 && s.usage.is_finite() && s.usage >= 0.0).map(|s| {
                let ratio = (request > 0).then(|| s.usage / request as f64);
                (ratio, s.usage, s.samples)
            })
        };
        evidence.cpu.extend(read(pod.cpu, pod.cpu_request_millis));
        evidence.memory.extend(read(pod.memory, pod.memory_request_bytes));
    }
    let mut learned: Vec<(WorkloadKey, WorkloadUsage)> = by_workload
        .into_iter()
        .filter_map(|(key, evidence)| {
            let usage = WorkloadUsage {
                cpu: summarise(policy, evidence.cpu),
                memory: summarise(policy, evidence.memory),
            };
            (usage.cpu.is_some() || usage.memory.is_some()).then_some((key, usage))
        })
        .collect();
    let mut dropped = 0;
    if learned.len() > policy.max_workloads {
        let pods =
            |u: &WorkloadUsage| u.cpu.map_or(0, |l| l.pods).max(u.memory.map_or(0, |l| l.pods));
        // Stable: among equals the key order of the BTreeMap decides.
        learned.sort_by_key(|(_, usage)| std::cmp::Reverse(pods(usage)));
        dropped = learned.len() - policy.max_workloads;
        learned.truncate(policy.max_workloads);
    }
    LearnedUsage { workloads: learned.into_iter().collect(), dropped }
}

fn summarise(policy: &Learn, mut pods: Vec<(Option<f64>, f64, u64)>) -> Option<Learned> {
    let samples: u64 = pods.iter().map(|p| p.2).sum();
    if (pods.len() as u64) < u64::from(policy.min_pods) || samples < policy.min_samples {
        return None;
    }
    let mut ratios: Vec<f64> = pods.iter().filter_map(|p| p.0).collect();
    pods.sort_by(|a, b| a.1.total_cmp(&b.1));
    ratios.sort_by(f64::total_cmp);
    let usages: Vec<f64> = pods.iter().map(|p| p.1).collect();
    let spread_of = |sorted: &[f64]| sorted.last().unwrap_or(&0.0) - sorted.first().unwrap_or(&0.0);
    Some(Learned {
        ratio: nearest_rank(&ratios, policy.quantile),
        usage: nearest_rank(&usages, policy.quantile).unwrap_or(0.0),
        spread: if ratios.is_empty() { spread_of(&usages) } else { spread_of(&ratios) },
        pods: pods.len() as u32,
        samples,
    })
}

/// The `q` quantile of ascending `sorted` by nearest rank: the smallest value with at least
/// a share `q` of the values at or below it.
fn nearest_rank(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = (q * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Learn {
        Learn { min_pods: 2, min_samples: 60, ..Learn::default() }
    }

    fn web(i: usize) -> WorkloadKey {
        WorkloadKey::new("shop", "Deployment", &format!("web-{i}"))
    }

    fn pod(workload: WorkloadKey, cpu_request: i64, cpu: f64, samples: u64) -> PodObservation {
        PodObservation {
            workload,
            cpu_request_millis: cpu_request,
            memory_request_bytes: 1000,
            cpu: Some(Series { usage: cpu, samples }),
            memory: Some(Series { usage: 500.0, samples }),
        }
    }

    #[test]
    fn a_workload_is_its_pods_quantile_of_usage_over_request() {
        // Five pods requesting 500m that use 400m..1200m over the window: ratios 0.8, 1.2,
        // 1.6, 2.0, 2.4. p90 by nearest rank is the ceil(0.9 × 5) = 5th: 2.4; the spread
        // 2.4 − 0.8 = 1.6; 5 pods × 30 samples = 150 samples.
        let pods = [400.0, 600.0, 800.0, 1000.0, 1200.0].map(|u| pod(web(0), 500, u, 30));
        let learned = learn(&policy(), pods);
        let cpu = learned.get(&web(0)).unwrap().cpu.unwrap();
        assert_eq!(cpu.ratio, Some(2.4));
        assert_eq!(cpu.usage, 1200.0);
        assert!((cpu.spread - 1.6).abs() < 1e-12, "{}", cpu.spread);
        assert_eq!((cpu.pods, cpu.samples), (5, 150));
        // With the median instead: the ceil(0.5 × 5) = 3rd, 1.6.
        let median = Learn { quantile: 0.5, ..policy() };
        let pods = [400.0, 600.0, 800.0, 1000.0, 1200.0].map(|u| pod(web(0), 500, u, 30));
        assert_eq!(learn(&median, pods).get(&web(0)).unwrap().cpu.unwrap().ratio, Some(1.6));
    }

    #[test]
    fn too_little_evidence_is_left_out() {
        // One pod (min 2), then two pods with 29 + 30 = 59 samples (min 60).
        assert!(learn(&policy(), [pod(web(0), 500, 1000.0, 500)]).is_empty());
        let pods = [pod(web(0), 500, 1000.0, 29), pod(web(0), 500, 1000.0, 30)];
        assert!(learn(&policy(), pods).is_empty());
        let pods = [pod(web(0), 500, 1000.0, 30), pod(web(0), 500, 1000.0, 30)];
        assert_eq!(learn(&policy(), pods).get(&web(0)).unwrap().cpu.unwrap().ratio, Some(2.0));
        // A pod without samples, or with a NaN, is no evidence: cpu has one pod left. The
        // memory series of the NaN pod is sound, so memory has two pods and 69 samples.
        let pods = [
            pod(web(0), 500, 1000.0, 60),
            pod(web(0), 500, 1000.0, 0),
            pod(web(0), 500, f64::NAN, 9),
        ];
        let learned = learn(&policy(), pods);
        let usage = learned.get(&web(0)).unwrap();
        assert_eq!(usage.cpu, None);
        assert_eq!(usage.memory.map(|m| (m.pods, m.samples)), Some((2, 69)));
    }

    #[test]
    fn pods_without_requests_are_learned_by_absolute_usage() {
        let pods = [pod(web(0), 0, 300.0, 40), pod(web(0), 0, 700.0, 40)];
        let cpu = learn(&policy(), pods).get(&web(0)).unwrap().cpu.unwrap();
        // No ratio; p90 of {300, 700} is the 2nd: 700; spread of the usage: 400.
        assert_eq!((cpu.ratio, cpu.usage, cpu.spread), (None, 700.0, 400.0));
    }

    #[test]
    fn resources_are_learned_apart() {
        let mut only_memory = pod(web(0), 500, 0.0, 40);
        only_memory.cpu = None;
        let learned = learn(&policy(), [only_memory.clone(), only_memory]);
        let usage = learned.get(&web(0)).unwrap();
        assert!(usage.cpu.is_none());
        // 500 B of 1000 B requested.
        assert_eq!(usage.memory.unwrap().ratio, Some(0.5));
    }

    #[test]
    fn the_table_is_bounded_in_workloads_and_in_pods_per_workload() {
        let bounded = Learn { max_workloads: 2, ..policy() };
        // web-0 has 2 pods, web-1 4, web-2 3: web-0 goes.
        let pods = (0..2)
            .map(|_| pod(web(0), 500, 500.0, 60))
            .chain((0..4).map(|_| pod(web(1), 500, 500.0, 60)))
            .chain((0..3).map(|_| pod(web(2), 500, 500.0, 60)));
        let learned = learn(&bounded, pods);
        assert_eq!((learned.len(), learned.dropped), (2, 1));
        assert!(learned.get(&web(0)).is_none());
        // 1,500 pods of one workload: the first 1,000 are read.
        let pods = (0..1500).map(|_| pod(web(3), 500, 500.0, 1));
        let cpu = learn(&policy(), pods).get(&web(3)).unwrap().cpu.unwrap();
        assert_eq!(cpu.pods as usize, MAX_PODS_PER_WORKLOAD);
    }
}
