//! kubernetes-sigs/descheduler's LowNodeUtilization in Prometheus mode, as deploy/descheduler/
//! runs it. The rules, from its source:
//!
//! - **The signal** (pkg/framework/plugins/nodeutilization/usageclients.go,
//!   `prometheusUsageClient.sync`): one instant query; a failed query, or any node without a
//!   sample ("unable to find metric entry"), fails the whole cycle — nothing is evicted. Each
//!   value must lie in [0, 1] and is read as `int64(value × 100)` percent.
//! - **Classification** (lownodeutilization.go `Balance`; nodeutilization.go
//!   `isNodeBelowThreshold`, `isNodeAboveThreshold`): under ⇔ usage ≤ `thresholds`, over ⇔
//!   usage > `targetThresholds`. Nothing happens when no node is under, when no more than
//!   `numberOfNodes` (0) are, when every node is, or when none is over.
//! - **Eviction** (nodeutilization.go `evictPodsFromSourceNodes`, `evictPods`): over nodes in
//!   descending usage; on each, the evictable pods sorted by priority then QoS
//!   (`SortPodsBasedOnPriorityLowToHigh`); in Prometheus mode `podUsage` is not supported,
//!   so the plugin cannot tell what a pod frees and evicts exactly `evictionLimits.node` pods
//!   from each over node, without re-reading it; the evictor stops at
//!   `maxNoOfPodsToEvictPerNode` per node and `maxNoOfPodsToEvictTotal` per cycle
//!   (pkg/descheduler/evictions/evictions.go `EvictPod`).
//! - **Evictable** (pkg/framework/plugins/defaultevictor/defaultevictor.go): not a DaemonSet
//!   pod, owned by a controller, `minReplicas` pods of its controller, at least `minPodAge`
//!   old, and with `nodeFit` fitting another node by requests.
//! - **Loop**: every `--descheduling-interval` from the start (pkg/descheduler/descheduler.go
//!   `RunDeschedulerStrategies`, `wait.NonSlidingUntil`).
//!
//! Pods of equal priority and QoS come from the informer's indexer in no defined order and
//! `sort.Slice` is not stable, so the order among them is drawn from the actor's seeded RNG.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::Deserialize;
use waterline_core::Millis;

use super::signal::Signal;
use super::{ClusterState, CycleOutcome, Rebalancer, qos_rank};
use crate::strategy::{MetricNeed, NodeView};

/// deploy/descheduler/'s policy and interval: the one home of the thresholds and limits.
pub const POLICY_YAML: &str = include_str!("../../../deploy/descheduler/policy.yaml");
pub const DEPLOYMENT_YAML: &str = include_str!("../../../deploy/descheduler/deployment.yaml");

/// The numbers of the deployed descheduler the model needs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Deployed {
    /// `thresholds.MetricResource`: under ⇔ percent ≤ it.
    pub under_pct: i64,
    /// `targetThresholds.MetricResource`: over ⇔ percent > it.
    pub over_pct: i64,
    /// min(`evictionLimits.node`, `maxNoOfPodsToEvictPerNode`).
    pub per_node: usize,
    /// `maxNoOfPodsToEvictTotal`.
    pub per_cycle: usize,
    /// DefaultEvictor's `minReplicas`.
    pub min_replicas: usize,
    /// DefaultEvictor's `minPodAge`.
    pub min_pod_age: Millis,
    /// DefaultEvictor's `nodeFit`.
    pub node_fit: bool,
    /// `--descheduling-interval`.
    pub interval: Millis,
}

#[derive(Debug, thiserror::Error)]
#[error("deploy/descheduler: {0}")]
pub struct DeployedError(String);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicyFile {
    max_no_of_pods_to_evict_per_node: Option<usize>,
    max_no_of_pods_to_evict_total: Option<usize>,
    profiles: Vec<ProfileFile>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProfileFile {
    plugin_config: Vec<PluginConfigFile>,
}

#[derive(Deserialize)]
struct PluginConfigFile {
    name: String,
    args: serde_yaml::Value,
}

impl Deployed {
    /// Parses deploy/descheduler/policy.yaml and the interval flag of deployment.yaml.
    pub fn parse(policy: &str, deployment: &str) -> Result<Deployed, DeployedError> {
        let file: PolicyFile =
            serde_yaml::from_str(policy).map_err(|e| DeployedError(format!("policy.yaml: {e}")))?;
        let args = |name: &str| {
            file.profiles
                .iter()
                .flat_map(|p| &p.plugin_config)
                .find(|c| c.name == name)
                .map(|c| &c.args)
                .ok_or_else(|| DeployedError(format!("policy.yaml: no {name} args")))
        };
        let lnu = args("LowNodeUtilization")?;
        let evictor = args("DefaultEvictor")?;
        let int = |v: &serde_yaml::Value, path: &[&str]| -> Result<i64, DeployedError> {
            path.iter()
                .try_fold(v, |v, k| v.get(k))
                .and_then(serde_yaml::Value::as_i64)
                .ok_or_else(|| DeployedError(format!("policy.yaml: no integer {}", path.join("."))))
        };
        let node_limit = int(lnu, &["evictionLimits", "node"])? as usize;
        let min_pod_age = evictor
            .get("minPodAge")
            .and_then(serde_yaml::Value::as_str)
            .map(waterline_core::time::parse_duration)
            .transpose()
            .map_err(|e| DeployedError(format!("policy.yaml: minPodAge: {e}")))?
            .unwrap_or(Millis(0));
        let interval = deployment
            .lines()
            .find_map(|l| l.trim().strip_prefix("- --descheduling-interval="))
            .ok_or_else(|| DeployedError("deployment.yaml: no --descheduling-interval".into()))
            .and_then(|d| {
                waterline_core::time::parse_duration(d.trim())
                    .map_err(|e| DeployedError(format!("--descheduling-interval: {e}")))
            })?;
        Ok(Deployed {
            under_pct: int(lnu, &["thresholds", "MetricResource"])?,
            over_pct: int(lnu, &["targetThresholds", "MetricResource"])?,
            per_node: node_limit.min(file.max_no_of_pods_to_evict_per_node.unwrap_or(usize::MAX)),
            per_cycle: file.max_no_of_pods_to_evict_total.unwrap_or(usize::MAX),
            min_replicas: int(evictor, &["minReplicas"]).unwrap_or(0) as usize,
            min_pod_age,
            node_fit: evictor.get("nodeFit").and_then(serde_yaml::Value::as_bool).unwrap_or(false),
            interval,
        })
    }

    /// The shipped deploy/descheduler/.
    pub fn shipped() -> Deployed {
        Deployed::parse(POLICY_YAML, DEPLOYMENT_YAML).expect("deploy/descheduler/ parses")
    }
}

/// LowNodeUtilization (Prometheus mode) reading `signal`.
pub struct LowNodeUtilization {
    config: Deployed,
    signal: Signal,
    rng: StdRng,
}

impl LowNodeUtilization {
    pub fn new(config: Deployed, signal: Signal, seed: u64) -> Self {
        LowNodeUtilization { config, signal, rng: StdRng::seed_from_u64(seed ^ 0x0DE5_C4ED) }
    }
}

impl Rebalancer for LowNodeUtilization {
    fn metrics(&self) -> Vec<MetricNeed> {
        self.signal.metrics()
    }

    fn rule_interval(&self) -> Option<Millis> {
        self.signal.rule_interval()
    }

    fn interval(&self) -> Millis {
        self.config.interval
    }

    fn on_metrics(&mut self, now: waterline_core::UnixMillis, nodes: &[NodeView<'_>]) {
        self.signal.on_metrics(now, nodes);
    }

    fn on_bound(
        &mut self,
        now: waterline_core::UnixMillis,
        pod: &crate::model::SimPod,
        node: &str,
        bound_at: waterline_core::UnixMillis,
    ) {
        self.signal.on_bound(now, pod, node, bound_at);
    }

    fn on_deleted(
        &mut self,
        now: waterline_core::UnixMillis,
        pod: &crate::model::SimPod,
        node: &str,
    ) {
        self.signal.depart(now, pod, node);
    }

    fn on_rule(&mut self, t: crate::model::SimTime, names: &[&str], up: bool) {
        self.signal.on_rule(t, names, up);
    }

    fn cycle(&mut self, cluster: &ClusterState<'_>) -> CycleOutcome {
        let c = self.config;
        if !cluster.prometheus_up {
            return CycleOutcome { evict: vec![], failed: true };
        }
        // usageclients.go: a node without a sample fails the cycle; values outside [0, 1]
        // too (the rules clamp, so only a broken signal gets here).
        let mut pct = Vec::with_capacity(cluster.nodes.len());
        for (i, _) in cluster.nodes.iter().enumerate() {
            match self.signal.value(i, cluster.now) {
                Some(v) if (0.0..=1.0).contains(&v) => pct.push((v * 100.0) as i64),
                _ => return CycleOutcome { evict: vec![], failed: true },
            }
        }
        let under = pct.iter().filter(|&&p| p <= c.under_pct).count();
        let mut over: Vec<usize> = (0..pct.len()).filter(|&i| pct[i] > c.over_pct).collect();
        if under == 0 || under == pct.len() || over.is_empty() {
            return CycleOutcome::default();
        }
        over.sort_by_key(|&i| (std::cmp::Reverse(pct[i]), i));
        let mut evict = Vec::new();
        for i in over {
            let node = &cluster.nodes[i];
            let mut removable: Vec<&super::BoundPod<'_>> = node
                .pods
                .iter()
                .filter(|b| {
                    let pod = b.pod;
                    pod.owner_kind != "DaemonSet"
                        && pod.controller.as_ref().is_some_and(|ctl| {
                            cluster.replicas.get(ctl).copied().unwrap_or(0) >= c.min_replicas
                        })
                        && cluster.now - b.created >= c.min_pod_age.0
                        && (!c.node_fit || cluster.fits_elsewhere(pod, i))
                })
                .collect();
            removable.shuffle(&mut self.rng);
            removable.sort_by_key(|b| qos_rank(b.pod.qos()));
            for b in removable.into_iter().take(c.per_node) {
                if evict.len() >= c.per_cycle {
                    return CycleOutcome { evict, failed: false };
                }
                evict.push(b.index);
            }
        }
        CycleOutcome { evict, failed: false }
    }
}
