//! The pods the pod watch shows running, reduced to what the learner joins Prometheus'
//! per-pod series with (docs/design.md#learned-estimate): per (namespace, name), the pod's
//! workload and its cpu and memory requests. The pod watch keeps it (a pod leaves when it
//! finishes, is deleted or starts terminating; a re-list replaces it whole); the learner
//! reads it once per refresh.
//!
//! Compact and bounded: a pod is a 64-bit hash of its namespace and name (what the
//! learner's series are joined by, [`pod_key`]), a hash of its uid (so a late delete of an
//! old pod never removes a new one of the same name, as a StatefulSet's), its requests and a
//! shared handle on its workload, which all pods of the workload point to: about 50 bytes a
//! pod. Past [`MAX_RUNNING_PODS`] a new pod is not tracked, and counted. Two of 150,000 pods
//! share a key with a chance of 6 × 10⁻¹⁰ (then one pod's series count for the other).

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use waterline_core::Pod;
use waterline_core::learn::{PodObservation, Series};
use waterline_core::workload::WorkloadKey;

/// Kubernetes' own limit of pods per cluster (kubernetes.io, "Considerations for large
/// clusters": 150,000 pods): a bigger table would only be a leak.
pub const MAX_RUNNING_PODS: usize = 150_000;

/// One running pod.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Running {
    uid: u64,
    workload: Arc<WorkloadKey>,
    cpu_request_millis: i64,
    memory_request_bytes: i64,
}

#[derive(Debug, Default)]
struct Table {
    /// [`pod_key`] → the pod.
    pods: HashMap<u64, Running>,
    /// Every workload a tracked pod belongs to, once.
    workloads: HashSet<Arc<WorkloadKey>>,
    limit: usize,
    /// Pods not tracked because the table was full, since start.
    untracked: u64,
}

/// Shared by the pod watch and the learner; clones share the table.
#[derive(Clone, Debug)]
pub struct RunningPods {
    table: Arc<Mutex<Table>>,
}

impl Default for RunningPods {
    fn default() -> Self {
        RunningPods::with_limit(MAX_RUNNING_PODS)
    }
}

/// SipHash with fixed keys: the same pod has the same key in every process and run.
fn hash(value: impl Hash) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// The key of pod `namespace/name`: what a series' `namespace` and `pod` labels are looked
/// up by. (A `str` hashes with a terminator, so ("a", "bc") and ("ab", "c") differ.)
pub fn pod_key(namespace: &str, name: &str) -> u64 {
    hash((namespace, name))
}

impl Table {
    fn upsert(&mut self, pod: &Pod) {
        let key = pod_key(&pod.namespace, &pod.name);
        if self.pods.len() >= self.limit && !self.pods.contains_key(&key) {
            self.untracked += 1;
            return;
        }
        let workload_key = WorkloadKey::of(pod);
        let workload = match self.workloads.get(&workload_key) {
            Some(shared) => Arc::clone(shared),
            None => {
                let shared = Arc::new(workload_key);
                self.workloads.insert(Arc::clone(&shared));
                shared
            }
        };
        let running = Running {
            uid: hash(pod.uid.as_str()),
            workload,
            cpu_request_millis: pod.cpu_request_millis,
            memory_request_bytes: pod.memory_request_bytes,
        };
        if let Some(old) = self.pods.insert(key, running) {
            self.release(old.workload);
        }
    }

    /// Forgets `workload` when the handle dropped here was its last pod's.
    fn release(&mut self, workload: Arc<WorkloadKey>) {
        // Two holders left: the set and this handle.
        if Arc::strong_count(&workload) == 2 {
            self.workloads.remove(&workload);
        }
    }

    fn remove(&mut self, namespace: &str, name: &str, uid: &str) {
        let key = pod_key(namespace, name);
        if self.pods.get(&key).is_none_or(|p| p.uid != hash(uid)) {
            return;
        }
        if let Some(removed) = self.pods.remove(&key) {
            self.release(removed.workload);
        }
    }
}

/// How a batch of series met the tracked pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Joined {
    /// Series of a tracked pod.
    pub observed: usize,
    /// Series of no tracked pod: one that ran earlier in the window, or one the watch has
    /// not shown yet.
    pub unknown: usize,
}

impl RunningPods {
    /// An empty table that tracks at most `limit` pods.
    pub fn with_limit(limit: usize) -> Self {
        let table = Table { limit, ..Table::default() };
        RunningPods { table: Arc::new(Mutex::new(table)) }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `pod` runs (added, or changed: a new uid under the same name replaces the old pod).
    pub fn upsert(&self, pod: &Pod) {
        self.lock().upsert(pod);
    }

    /// Pod `namespace/name` with `uid` no longer runs; another pod of that name stays.
    pub fn remove(&self, namespace: &str, name: &str, uid: &str) {
        self.lock().remove(namespace, name, uid);
    }

    /// An empty table with this one's bound, shared with nobody: a re-list fills it as
    /// the pods arrive and then [`RunningPods::replace_with`] it, so a list of 50,000 pods
    /// is never held as pods.
    pub fn staging(&self) -> RunningPods {
        RunningPods::with_limit(self.lock().limit)
    }

    /// A fresh list: exactly the pods of `staged` run now.
    pub fn replace_with(&self, staged: RunningPods) {
        let staged = std::mem::take(&mut *staged.lock());
        let mut table = self.lock();
        let untracked = table.untracked + staged.untracked;
        *table = Table { untracked, ..staged };
    }

    /// Pods tracked, and pods not tracked since start because the table was full.
    pub fn counts(&self) -> (usize, u64) {
        let table = self.lock();
        (table.pods.len(), table.untracked)
    }

    /// Distinct workloads of the tracked pods.
    pub fn workloads(&self) -> usize {
        self.lock().workloads.len()
    }

    /// Hands `consume` the observations of the tracked pods among `series` (each a pod's
    /// [`pod_key`] with its cpu and memory series), one at a time as it asks for them, so
    /// no list of 50,000 observations is built; the table is locked meanwhile (the pod
    /// watch waits that long).
    pub fn observe<T>(
        &self,
        series: impl IntoIterator<Item = (u64, Option<Series>, Option<Series>)>,
        consume: impl FnOnce(&mut dyn Iterator<Item = PodObservation>) -> T,
    ) -> (T, Joined) {
        let table = self.lock();
        let (observed, unknown) = (Cell::new(0), Cell::new(0));
        let mut observations = series.into_iter().filter_map(|(key, cpu, memory)| {
            let Some(pod) = table.pods.get(&key) else {
                unknown.set(unknown.get() + 1);
                return None;
            };
            observed.set(observed.get() + 1);
            Some(PodObservation {
                workload: WorkloadKey::clone(&pod.workload),
                cpu_request_millis: pod.cpu_request_millis,
                memory_request_bytes: pod.memory_request_bytes,
                cpu,
                memory,
            })
        });
        let out = consume(&mut observations);
        (out, Joined { observed: observed.get(), unknown: unknown.get() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str, deployment: &str, cpu: i64) -> Pod {
        Pod {
            namespace: "shop".into(),
            name: name.into(),
            uid: uid.into(),
            owner_kind: "ReplicaSet".into(),
            owner_name: format!("{deployment}-abc"),
            labels: [("pod-template-hash".to_string(), "abc".to_string())].into(),
            cpu_request_millis: cpu,
            memory_request_bytes: 1 << 20,
            ..Pod::default()
        }
    }

    fn series(usage: f64) -> Option<Series> {
        Some(Series { usage, samples: 10 })
    }

    /// The observations of `series` ((namespace, name), cpu), and how they were joined.
    fn observe(
        pods: &RunningPods,
        series: &[((&str, &str), Option<Series>)],
    ) -> (Vec<PodObservation>, Joined) {
        let keyed =
            series.iter().map(|((namespace, name), cpu)| (pod_key(namespace, name), *cpu, None));
        pods.observe(keyed, |observations| observations.collect())
    }

    #[test]
    fn series_join_the_pods_by_namespace_and_name() {
        let pods = RunningPods::default();
        pods.upsert(&pod("web-1", "u1", "web", 500));
        pods.upsert(&pod("web-2", "u2", "web", 500));
        let (observed, joined) = observe(
            &pods,
            &[
                (("shop", "web-1"), series(1000.0)),
                (("shop", "gone-7"), series(10.0)),
                (("other", "web-2"), series(10.0)),
            ],
        );
        assert_eq!(joined, Joined { observed: 1, unknown: 2 });
        assert_eq!(observed.len(), 1);
        assert_eq!(observed[0].workload.to_string(), "shop/Deployment/web");
        assert_eq!((observed[0].cpu_request_millis, observed[0].cpu), (500, series(1000.0)));
        assert_eq!((pods.counts(), pods.workloads()), ((2, 0), 1));
    }

    #[test]
    fn a_pod_leaves_by_its_uid_and_its_workload_with_its_last_pod() {
        let pods = RunningPods::default();
        pods.upsert(&pod("db-0", "old", "db", 100));
        // Recreated under the same name: the new pod replaces the old one.
        pods.upsert(&pod("db-0", "new", "db", 200));
        pods.remove("shop", "db-0", "old");
        assert_eq!(pods.counts().0, 1, "the old pod's late delete leaves the new one");
        let (observed, _) = observe(&pods, &[(("shop", "db-0"), series(1.0))]);
        assert_eq!(observed[0].cpu_request_millis, 200);
        pods.upsert(&pod("api-1", "a1", "api", 100));
        assert_eq!(pods.workloads(), 2);
        pods.remove("shop", "db-0", "new");
        assert_eq!((pods.counts().0, pods.workloads()), (1, 1));
        pods.remove("shop", "api-1", "a1");
        assert_eq!((pods.counts().0, pods.workloads()), (0, 0));
    }

    #[test]
    fn the_table_is_bounded_and_a_relist_replaces_it() {
        let pods = RunningPods::with_limit(2);
        for i in 0..4 {
            pods.upsert(&pod(&format!("web-{i}"), &format!("u{i}"), "web", 100));
        }
        // Two tracked, two refused; a pod already tracked still changes.
        assert_eq!(pods.counts(), (2, 2));
        pods.upsert(&pod("web-0", "u0", "web", 300));
        let (observed, joined) =
            observe(&pods, &[(("shop", "web-0"), series(1.0)), (("shop", "web-3"), series(1.0))]);
        assert_eq!((observed[0].cpu_request_millis, joined.unknown), (300, 1));
        // A fresh list: exactly these pods (the refused count is since start).
        let staged = pods.staging();
        staged.upsert(&pod("api-1", "a1", "api", 100));
        assert_eq!(pods.counts().0, 2, "the staged list is not in use yet");
        pods.replace_with(staged);
        assert_eq!((pods.counts(), pods.workloads()), ((1, 2), 1));
        assert_eq!(observe(&pods, &[(("shop", "web-0"), series(1.0))]).1.unknown, 1);
    }
}
