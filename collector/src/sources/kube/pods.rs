//! The pod watch's half of the ledger: which pods the API server shows on which node, since
//! when, and how much they are estimated to use.
//!
//! A pod is converted to a [`LedgerEntry`] the moment it arrives, so nothing but the entry
//! is kept (the trimmed pod). Its placement time comes from the pod itself (PodScheduled,
//! else start, else creation time) and never from the clock at delivery: a restarted
//! collector re-lists the same pods and gets the same times, so nothing is counted twice.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod as KubePod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tokio::sync::watch;
use waterline_core::estimate::estimate;
use waterline_core::quantity::{parse_bytes, parse_cpu_millis};
use waterline_core::{LedgerEntry, LedgerSource, Pod, UnixMillis};
use waterline_runtime::policy::PolicyHandle;

use super::Index;
use crate::state::ClusterState;

/// What the watch makes of one pod object.
#[derive(Clone, Debug, PartialEq)]
pub enum PodView {
    /// Bound to a node and not finished: it belongs in the ledger.
    Placed(LedgerEntry),
    /// Not (or no longer) holding a node: not yet bound, Succeeded or Failed.
    Unplaced { uid: String },
}

/// Requests and limits of a whole pod, in the domain's units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodResources {
    pub cpu_request_millis: i64,
    pub memory_request_bytes: i64,
    /// Zero when any long-running container leaves it unbounded.
    pub cpu_limit_millis: i64,
    pub memory_limit_bytes: i64,
}

/// cpu (milli-cores) and memory (bytes) together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Amounts {
    cpu: i64,
    memory: i64,
}

impl Amounts {
    fn add(self, other: Amounts) -> Amounts {
        Amounts {
            cpu: self.cpu.saturating_add(other.cpu),
            memory: self.memory.saturating_add(other.memory),
        }
    }
    fn max(self, other: Amounts) -> Amounts {
        Amounts { cpu: self.cpu.max(other.cpu), memory: self.memory.max(other.memory) }
    }
}

fn quantity(list: Option<&BTreeMap<String, Quantity>>, key: &str) -> Result<Option<i64>, String> {
    let Some(q) = list.and_then(|l| l.get(key)) else { return Ok(None) };
    let parsed = if key == "cpu" { parse_cpu_millis(&q.0) } else { parse_bytes(&q.0) };
    parsed.map(Some).map_err(|e| format!("{key}: {e}"))
}

fn amounts(list: Option<&BTreeMap<String, Quantity>>) -> Result<Amounts, String> {
    Ok(Amounts {
        cpu: quantity(list, "cpu")?.unwrap_or(0),
        memory: quantity(list, "memory")?.unwrap_or(0),
    })
}

/// Limits where an absent limit is "unbounded" (`None` per resource).
fn limits(list: Option<&BTreeMap<String, Quantity>>) -> Result<[Option<i64>; 2], String> {
    Ok([quantity(list, "cpu")?, quantity(list, "memory")?])
}

fn requests_of(c: &Container) -> Result<Amounts, String> {
    amounts(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
}

fn limits_of(c: &Container) -> Result<[Option<i64>; 2], String> {
    limits(c.resources.as_ref().and_then(|r| r.limits.as_ref()))
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// The pod's requests computed the way kube-scheduler does (`PodRequests` in
/// k8s.io/component-helpers): app containers summed; init containers run one at a time, so
/// the pod needs the largest of them (plus the sidecars started before it); restartable
/// init containers (sidecars) run for the pod's whole life and add to the sum; pod-level
/// `spec.resources` replace the container aggregate where set; the runtime overhead is
/// added last.
///
/// Limits follow the same shape for the long-running containers only (app containers and
/// sidecars): a limit counts only when every one of them sets it, because one unbounded
/// container makes the pod unbounded and a partial sum would cap the estimate too low.
pub fn pod_resources(pod: &KubePod) -> Result<PodResources, String> {
    let Some(spec) = pod.spec.as_ref() else { return Ok(PodResources::default()) };
    let mut requests = Amounts::default();
    let mut limit_sum = [Some(0i64), Some(0i64)];
    let mut add_limits = |l: [Option<i64>; 2]| {
        for (sum, l) in limit_sum.iter_mut().zip(l) {
            *sum = match (*sum, l) {
                (Some(s), Some(l)) => Some(s.saturating_add(l)),
                _ => None,
            };
        }
    };
    for c in &spec.containers {
        requests = requests.add(requests_of(c)?);
        add_limits(limits_of(c)?);
    }
    let mut sidecars = Amounts::default();
    let mut init_peak = Amounts::default();
    for c in spec.init_containers.iter().flatten() {
        let own = requests_of(c)?;
        let running = if is_sidecar(c) {
            requests = requests.add(own);
            add_limits(limits_of(c)?);
            sidecars = sidecars.add(own);
            sidecars
        } else {
            own.add(sidecars)
        };
        init_peak = init_peak.max(running);
    }
    requests = requests.max(init_peak);

    let pod_level: Option<&ResourceRequirements> = spec.resources.as_ref();
    let pod_requests = pod_level.and_then(|r| r.requests.as_ref());
    let pod_limits = limits(pod_level.and_then(|r| r.limits.as_ref()))?;
    if let Some(cpu) = quantity(pod_requests, "cpu")? {
        requests.cpu = cpu;
    }
    if let Some(memory) = quantity(pod_requests, "memory")? {
        requests.memory = memory;
    }
    for (sum, pod_limit) in limit_sum.iter_mut().zip(pod_limits) {
        if pod_limit.is_some() {
            *sum = pod_limit;
        }
    }

    let overhead = amounts(spec.overhead.as_ref())?;
    requests = requests.add(overhead);
    // Like kube-scheduler, overhead is added to a limit only when that limit is set.
    let [cpu_limit, memory_limit] = limit_sum;
    Ok(PodResources {
        cpu_request_millis: requests.cpu,
        memory_request_bytes: requests.memory,
        cpu_limit_millis: cpu_limit.map_or(0, |l| l.saturating_add(overhead.cpu)),
        memory_limit_bytes: memory_limit.map_or(0, |l| l.saturating_add(overhead.memory)),
    })
}

/// When the pod was placed: its PodScheduled=True condition time, else its start time,
/// else its creation time. `None` when the object carries none of them.
pub fn placed_at(pod: &KubePod) -> Option<UnixMillis> {
    let status = pod.status.as_ref();
    let scheduled = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled" && c.status == "True"))
        .and_then(|c| c.last_transition_time.as_ref());
    let started = status.and_then(|s| s.start_time.as_ref());
    let created = pod.metadata.creation_timestamp.as_ref();
    scheduled.or(started).or(created).map(|t| UnixMillis(t.0.as_millisecond()))
}

/// The pod as the domain sees it (for the estimator).
pub fn domain_pod(pod: &KubePod) -> Result<Pod, String> {
    let resources = pod_resources(pod)?;
    let meta = &pod.metadata;
    Ok(Pod {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        cpu_request_millis: resources.cpu_request_millis,
        cpu_limit_millis: resources.cpu_limit_millis,
        memory_request_bytes: resources.memory_request_bytes,
        memory_limit_bytes: resources.memory_limit_bytes,
        owner_kind: meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.kind.clone())
            .unwrap_or_default(),
    })
}

/// Converts a pod object; `Err` names what is malformed (the pod is then skipped).
pub fn view(
    pod: &KubePod,
    estimator: &waterline_core::policy::Estimator,
) -> Result<PodView, String> {
    let uid = pod.metadata.uid.clone().filter(|u| !u.is_empty()).ok_or("no metadata.uid")?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
    let Some(node) = node.filter(|_| !matches!(phase, Some("Succeeded" | "Failed"))) else {
        return Ok(PodView::Unplaced { uid });
    };
    let placed_at = placed_at(pod).ok_or("no PodScheduled time, startTime or creationTimestamp")?;
    let pod = domain_pod(pod)?;
    Ok(PodView::Placed(LedgerEntry {
        usage: estimate(estimator, &pod),
        uid,
        namespace: pod.namespace,
        name: pod.name,
        node,
        placed_at,
        source: LedgerSource::Watch,
        labels: pod.labels,
    }))
}

fn describe(pod: &KubePod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("?")
    )
}

/// Feeds the pod watch into the ledger. Remembers which pods it placed (uid → node) so an
/// unbound pod never releases a Reserve entry a scheduler made for it.
pub struct PodIndex {
    state: ClusterState,
    policy: PolicyHandle,
    placed: HashMap<String, String>,
    /// Entries of the re-list under way, converted (trimmed) as they arrive.
    relist: Option<Vec<LedgerEntry>>,
    synced: watch::Sender<bool>,
}

impl PodIndex {
    pub fn new(state: ClusterState, policy: PolicyHandle) -> Self {
        PodIndex {
            state,
            policy,
            placed: HashMap::new(),
            relist: None,
            synced: watch::Sender::new(false),
        }
    }

    /// Becomes `true` once the first full list has reached the ledger.
    pub fn synced(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    fn convert(&self, pod: &KubePod) -> Option<PodView> {
        let policy = self.policy.get();
        match view(pod, &policy.estimator) {
            Ok(PodView::Placed(mut entry)) => {
                entry.labels = policy.ledger_labels(std::mem::take(&mut entry.labels));
                Some(PodView::Placed(entry))
            }
            Ok(view) => Some(view),
            Err(error) => {
                tracing::warn!(%error, pod = %describe(pod), "skipping malformed pod");
                None
            }
        }
    }
}

impl Index<KubePod> for PodIndex {
    fn apply(&mut self, pod: KubePod) {
        match self.convert(&pod) {
            Some(PodView::Placed(entry)) => {
                self.placed.insert(entry.uid.clone(), entry.node.clone());
                self.state.place(entry);
            }
            Some(PodView::Unplaced { uid }) => {
                // Unbound and never placed by this watch: a Reserve for it may be a bind
                // under way, so it stays.
                let was_placed = self.placed.remove(&uid).is_some();
                if was_placed || is_finished(&pod) {
                    self.state.release(&uid);
                }
            }
            None => {}
        }
    }

    fn delete(&mut self, pod: KubePod) {
        // A deleted pod leaves whatever put it in the ledger, a Reserve included.
        if let Some(uid) = pod.metadata.uid.as_deref() {
            self.placed.remove(uid);
            self.state.release(uid);
        }
    }

    fn init(&mut self) {
        self.relist = Some(Vec::new());
    }

    fn init_apply(&mut self, pod: KubePod) {
        if let Some(PodView::Placed(entry)) = self.convert(&pod) {
            self.relist.get_or_insert_with(Vec::new).push(entry);
        }
    }

    fn init_done(&mut self) {
        let live = self.relist.take().unwrap_or_default();
        self.placed = live.iter().map(|e| (e.uid.clone(), e.node.clone())).collect();
        let count = live.len();
        // A Reserve the list does not show yet may be a bind under way: keep it for the
        // longest absorb window (it counts that long anyway).
        let grace = self.policy.get().longest_absorb_window();
        self.state.reset_ledger(live, UnixMillis::now(), grace);
        tracing::info!(pods = count, "pod list synced into the ledger");
        self.synced.send_replace(true);
    }
}

fn is_finished(pod: &KubePod) -> bool {
    matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

#[cfg(test)]
mod tests;
