//! The pod watch's half of the ledger: which pods the API server shows on which node, since
//! when, and how much they are estimated to use.
//!
//! A pod is converted to a [`LedgerEntry`] the moment it arrives, so nothing but the entry
//! is kept (the trimmed pod). Its placement time comes from the pod itself (PodScheduled,
//! else start, else creation time) and never from the clock at delivery: a restarted
//! collector re-lists the same pods and gets the same times, so nothing is counted twice.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod as KubePod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tokio::sync::watch;
use waterline_core::learn::LearnedUsage;
use waterline_core::placement::{PlacementError, placement};
use waterline_core::pod::{
    ContainerResources, EffectiveResources, InitContainerResources, Overrides, PodSpecResources,
    ResourceList, effective_resources, waterline_annotations,
};
use waterline_core::policy::Policy;
use waterline_core::quantity::{parse_bytes, parse_cpu_millis};
use waterline_core::shadow::{Bind, Requests};
use waterline_core::{LedgerEntry, LedgerSource, Pod, UnixMillis};
use waterline_runtime::policy::PolicyHandle;

use super::Index;
use crate::running_pods::RunningPods;
use crate::shadow::SchedulerFilter;
use crate::state::ClusterState;

/// What the watch makes of one pod object.
#[derive(Clone, Debug, PartialEq)]
pub enum PodView {
    /// Bound to a node and not finished: it belongs in the ledger.
    Placed(LedgerEntry),
    /// Not (or no longer) holding a node: not yet bound, Succeeded or Failed.
    Unplaced { uid: String },
}

/// Why a pod object cannot be converted (the pod is then skipped, with this in the log).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    #[error("no metadata.uid")]
    NoUid,
    #[error("no PodScheduled time, startTime or creationTimestamp")]
    NoPlacementTime,
    /// A resource quantity that does not parse; `field` is its JSON path in the pod.
    #[error("{field}: {reason}")]
    Quantity { field: String, reason: waterline_core::quantity::QuantityError },
    #[error(transparent)]
    Placement(#[from] PlacementError),
}

/// One quantity of `list`, parsed in the domain's unit; `field` names the list in errors.
fn quantity(
    list: Option<&BTreeMap<String, Quantity>>,
    field: &str,
    key: &str,
) -> Result<Option<i64>, PodError> {
    let Some(q) = list.and_then(|l| l.get(key)) else { return Ok(None) };
    let parsed = if key == "cpu" { parse_cpu_millis(&q.0) } else { parse_bytes(&q.0) };
    parsed
        .map(Some)
        .map_err(|reason| PodError::Quantity { field: format!("{field}.{key}"), reason })
}

fn resource_list(
    list: Option<&BTreeMap<String, Quantity>>,
    field: &str,
) -> Result<ResourceList, PodError> {
    Ok(ResourceList {
        cpu_millis: quantity(list, field, "cpu")?,
        memory_bytes: quantity(list, field, "memory")?,
    })
}

fn requirements(
    r: Option<&ResourceRequirements>,
    field: &str,
) -> Result<ContainerResources, PodError> {
    Ok(ContainerResources {
        requests: resource_list(r.and_then(|r| r.requests.as_ref()), &format!("{field}.requests"))?,
        limits: resource_list(r.and_then(|r| r.limits.as_ref()), &format!("{field}.limits"))?,
    })
}

fn container(c: &Container, field: String) -> Result<ContainerResources, PodError> {
    requirements(c.resources.as_ref(), &format!("{field}.resources"))
}

/// What of the pod object decides its resources, in the domain's units.
pub fn pod_spec_resources(pod: &KubePod) -> Result<PodSpecResources, PodError> {
    let Some(spec) = pod.spec.as_ref() else { return Ok(PodSpecResources::default()) };
    let containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| container(c, format!("spec.containers[{i}]")))
        .collect::<Result<_, _>>()?;
    let init_containers = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            Ok(InitContainerResources {
                resources: container(c, format!("spec.initContainers[{i}]"))?,
                sidecar: c.restart_policy.as_deref() == Some("Always"),
            })
        })
        .collect::<Result<_, PodError>>()?;
    Ok(PodSpecResources {
        containers,
        init_containers,
        pod_level: requirements(spec.resources.as_ref(), "spec.resources")?,
        overhead: resource_list(spec.overhead.as_ref(), "spec.overhead")?,
    })
}

/// The pod's effective requests and limits: core's one rule
/// ([`waterline_core::pod::effective_resources`]), shared with the extender and (through
/// the fixture table `tests/fixtures/pod-resources.json`) the Go plugin.
pub fn pod_resources(pod: &KubePod) -> Result<EffectiveResources, PodError> {
    Ok(effective_resources(&pod_spec_resources(pod)?))
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

/// The pod as the domain sees it (for the estimator). A `waterline.io/` annotation with a
/// bad value is logged and left out: the pod is placed already, and its load must count.
pub fn domain_pod(pod: &KubePod) -> Result<Pod, PodError> {
    let resources = pod_resources(pod)?;
    let meta = &pod.metadata;
    let owner = meta.owner_references.iter().flatten().find(|o| o.controller == Some(true));
    let annotations = meta.annotations.as_ref().map(waterline_annotations).unwrap_or_default();
    let overrides = Overrides::from_annotations(&annotations).unwrap_or_else(|error| {
        let pod = format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or(""),
            meta.name.as_deref().unwrap_or("")
        );
        tracing::warn!(%pod, %error, "pod annotation ignored");
        Overrides::default()
    });
    Ok(Pod {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        cpu_request_millis: resources.cpu_request_millis,
        cpu_limit_millis: resources.cpu_limit_millis,
        memory_request_bytes: resources.memory_request_bytes,
        memory_limit_bytes: resources.memory_limit_bytes,
        owner_kind: owner.map(|o| o.kind.clone()).unwrap_or_default(),
        owner_name: owner.map(|o| o.name.clone()).unwrap_or_default(),
        priority: pod.spec.as_ref().and_then(|s| s.priority).unwrap_or_default(),
        overrides,
    })
}

/// Converts a pod object; `Err` names what is malformed (the pod is then skipped). A placed
/// pod becomes its ledger entry by core's `placement`, as a Reserve does: estimated and its
/// labels trimmed by `policy`, priced with what `learned` knows of its workload.
pub fn view(pod: &KubePod, policy: &Policy, learned: &LearnedUsage) -> Result<PodView, PodError> {
    let uid = pod.metadata.uid.clone().filter(|u| !u.is_empty()).ok_or(PodError::NoUid)?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
    let Some(node) = node.filter(|_| !matches!(phase, Some("Succeeded" | "Failed"))) else {
        return Ok(PodView::Unplaced { uid });
    };
    let placed_at = placed_at(pod).ok_or(PodError::NoPlacementTime)?;
    let pod = Pod { uid, ..domain_pod(pod)? };
    Ok(PodView::Placed(placement(policy, learned, pod, &node, placed_at, LedgerSource::Watch)?))
}

/// When a pod is leaving its node: now for a deleted one (`deleted`: a delete event), and
/// for a terminating one (its `deletionTimestamp` set: an eviction or a graceful delete under
/// way) the earlier of `now` and that timestamp — the time by which the kubelet kills it, so
/// its load is gone by then. `None` for a pod that is staying.
pub fn leaving_at(pod: &KubePod, deleted: bool, now: UnixMillis) -> Option<UnixMillis> {
    let deletion = pod.metadata.deletion_timestamp.as_ref();
    match deletion.map(|t| UnixMillis(t.0.as_millisecond())) {
        Some(at) => Some(at.min(now)),
        None => deleted.then_some(now),
    }
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
///
/// With shadow mode on it also hands the state each bound pod's requests, and each new
/// bind by a judged scheduler to judge (`ClusterState::place_bound`). With the learner on it
/// keeps the [`RunningPods`] the learner joins its series with.
pub struct PodIndex {
    state: ClusterState,
    policy: PolicyHandle,
    placed: HashMap<String, String>,
    /// Entries of the re-list under way, converted (trimmed) as they arrive, with their
    /// requests when shadow mode is on.
    relist: Option<Vec<(LedgerEntry, Option<Requests>)>>,
    synced: watch::Sender<bool>,
    shadow: Option<Arc<SchedulerFilter>>,
    running: Option<RunningPods>,
    /// The running pods of the re-list under way.
    running_relist: Option<RunningPods>,
}

impl PodIndex {
    pub fn new(state: ClusterState, policy: PolicyHandle) -> Self {
        PodIndex {
            state,
            policy,
            placed: HashMap::new(),
            relist: None,
            synced: watch::Sender::new(false),
            shadow: None,
            running: None,
            running_relist: None,
        }
    }

    /// The learner's running pods, kept by this watch.
    pub fn with_running(mut self, running: Option<RunningPods>) -> Self {
        self.running = running;
        self
    }

    /// A placed pod runs (for the learner): its workload and requests are tracked.
    fn track(&self, pod: &KubePod) {
        let table = self.running_relist.as_ref().or(self.running.as_ref());
        if let (Some(table), Ok(domain)) = (table, domain_pod(pod)) {
            table.upsert(&domain);
        }
    }

    /// The pod no longer runs (finished, deleted or terminating).
    fn untrack(&self, pod: &KubePod) {
        let (Some(table), meta) = (self.running.as_ref(), &pod.metadata) else { return };
        let field = |f: &Option<String>| f.clone().unwrap_or_default();
        table.remove(&field(&meta.namespace), &field(&meta.name), &field(&meta.uid));
    }

    /// Shadow mode: requests and binds go to the state's judge; `filter` picks the binds.
    pub fn with_shadow(mut self, filter: Option<Arc<SchedulerFilter>>) -> Self {
        self.shadow = filter;
        self
    }

    /// The pod's requests, when shadow mode needs them (a pod that converted into a ledger
    /// entry has quantities that parse).
    fn requests(&self, pod: &KubePod) -> Option<Pod> {
        self.shadow.as_ref()?;
        domain_pod(pod).ok()
    }

    /// Becomes `true` once the first full list has reached the ledger.
    pub fn synced(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    fn convert(&self, pod: &KubePod) -> Option<PodView> {
        let policy = self.policy.get();
        match view(pod, &policy, &self.state.learned()) {
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
            Some(PodView::Placed(entry)) if pod.metadata.deletion_timestamp.is_some() => {
                // Terminating: its load leaves the prediction now (docs/design.md#departures).
                let at = leaving_at(&pod, false, UnixMillis::now()).unwrap_or_else(UnixMillis::now);
                self.placed.remove(&entry.uid);
                self.untrack(&pod);
                self.state.depart_bound(entry.departed(at));
            }
            Some(PodView::Placed(entry)) => {
                self.track(&pod);
                let previous = self.placed.insert(entry.uid.clone(), entry.node.clone());
                let (Some(filter), Some(domain)) = (self.shadow.as_ref(), self.requests(&pod))
                else {
                    self.state.place(entry);
                    return;
                };
                let scheduler = SchedulerFilter::name(
                    pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()),
                );
                // A new bind (or a move): judged when its scheduler is, before it counts.
                let new_bind = previous.as_deref() != Some(entry.node.as_str());
                let judge = (new_bind && filter.judges(scheduler)).then(|| Bind {
                    scheduler: scheduler.to_owned(),
                    node: entry.node.clone(),
                    bound_at: entry.placed_at,
                    pod: domain.clone(),
                });
                self.state.place_bound(entry, Requests::of(&domain), judge);
            }
            Some(PodView::Unplaced { uid }) => {
                // Unbound and never placed by this watch: a Reserve for it may be a bind
                // under way, so it stays.
                let was_placed = self.placed.remove(&uid).is_some();
                self.untrack(&pod);
                if was_placed || is_finished(&pod) {
                    // Finished: a watched pod departs now, a reserved one is released.
                    self.state.release_bound(&uid, UnixMillis::now());
                }
            }
            None => {}
        }
    }

    fn delete(&mut self, pod: KubePod) {
        // A deleted pod leaves whatever put it in the ledger, a Reserve included; a bound one
        // departs (even one this watch never saw: it gets the full credit).
        let Some(uid) = pod.metadata.uid.as_deref() else { return };
        self.placed.remove(uid);
        self.untrack(&pod);
        let now = UnixMillis::now();
        let at = leaving_at(&pod, true, now).unwrap_or(now);
        match self.convert(&pod) {
            Some(PodView::Placed(entry)) => self.state.depart_bound(entry.departed(at)),
            _ => self.state.release_bound(uid, at),
        }
    }

    fn init(&mut self) {
        self.relist = Some(Vec::new());
        self.running_relist = self.running.as_ref().map(RunningPods::staging);
    }

    fn init_apply(&mut self, pod: KubePod) {
        if let Some(PodView::Placed(entry)) = self.convert(&pod) {
            // A terminating pod is listed as its departure (the reset keeps it as one).
            let entry = match leaving_at(&pod, false, UnixMillis::now()) {
                Some(at) => entry.departed(at),
                None => {
                    self.track(&pod);
                    entry
                }
            };
            let requests = self.requests(&pod).map(|p| Requests::of(&p));
            self.relist.get_or_insert_with(Vec::new).push((entry, requests));
        }
    }

    fn init_done(&mut self) {
        let listed = self.relist.take().unwrap_or_default();
        if let (Some(running), Some(listed)) = (&self.running, self.running_relist.take()) {
            running.replace_with(listed);
        }
        self.placed = listed.iter().map(|(e, _)| (e.uid.clone(), e.node.clone())).collect();
        let count = listed.len();
        let bound = listed
            .iter()
            .filter_map(|(e, r)| Some((e.uid.clone(), e.node.clone(), (*r)?)))
            .collect();
        let live = listed.into_iter().map(|(e, _)| e).collect();
        // A Reserve the list does not show yet may be a bind under way: keep it for the
        // longest absorb window (it counts that long anyway).
        let grace = self.policy.get().longest_absorb_window();
        self.state.reset_ledger(live, bound, UnixMillis::now(), grace);
        tracing::info!(pods = count, "pod list synced into the ledger");
        self.synced.send_replace(true);
    }
}

fn is_finished(pod: &KubePod) -> bool {
    matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

#[cfg(test)]
mod tests;
