//! The pods the pod watch shows running, reduced to what the learner joins Prometheus'
//! per-pod series with (docs/design.md#learned-estimate): per (namespace, name), the pod's
//! workload and its cpu and memory requests. The pod watch keeps it (a pod leaves when it
//! finishes, is deleted or starts terminating; a re-list replaces it whole); the learner
//! reads it once per refresh.
//!
//! Compact and bounded: a pod is its name, a hash of its uid (so a late delete of an old
//! pod never removes a new one of the same name, as a StatefulSet's), its requests and a
//! shared handle on its workload, which all pods of the workload point to; about 130 bytes
//! a pod. Past [`MAX_RUNNING_PODS`] a new pod is not tracked, and counted.

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
    /// namespace → pod name → the pod.
    namespaces: HashMap<Box<str>, HashMap<Box<str>, Running>>,
    /// Every workload a tracked pod belongs to, once.
    workloads: HashSet<Arc<WorkloadKey>>,
    len: usize,
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

fn uid_hash(uid: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    uid.hash(&mut hasher);
    hasher.finish()
}

impl Table {
    fn upsert(&mut self, pod: &Pod) {
        let key = WorkloadKey::of(pod);
        let workload = match self.workloads.get(&key) {
            Some(shared) => Arc::clone(shared),
            None => {
                let shared = Arc::new(key);
                self.workloads.insert(Arc::clone(&shared));
                shared
            }
        };
        let running = Running {
            uid: uid_hash(&pod.uid),
            workload,
            cpu_request_millis: pod.cpu_request_millis,
            memory_request_bytes: pod.memory_request_bytes,
        };
        let full = self.len >= self.limit;
        let pods = match self.namespaces.get_mut(pod.namespace.as_str()) {
            Some(pods) => pods,
            None if full => return self.refuse(running),
            None => self.namespaces.entry(pod.namespace.as_str().into()).or_default(),
        };
        match pods.get_mut(pod.name.as_str()) {
            Some(stored) => {
                let old = std::mem::replace(stored, running);
                self.release(old.workload);
            }
            None if full => self.refuse(running),
            None => {
                pods.insert(pod.name.as_str().into(), running);
                self.len += 1;
            }
        }
    }

    fn refuse(&mut self, running: Running) {
        self.untracked += 1;
        self.release(running.workload);
    }

    /// Forgets `workload` when the handle dropped here was its last pod's.
    fn release(&mut self, workload: Arc<WorkloadKey>) {
        // Two holders left: the set and this handle.
        if Arc::strong_count(&workload) == 2 {
            self.workloads.remove(&workload);
        }
    }

    fn remove(&mut self, namespace: &str, name: &str, uid: &str) {
        let Some(pods) = self.namespaces.get_mut(namespace) else { return };
        if pods.get(name).is_none_or(|p| p.uid != uid_hash(uid)) {
            return;
        }
        let removed = pods.remove(name).map(|p| p.workload);
        if pods.is_empty() {
            self.namespaces.remove(namespace);
        }
        if let Some(workload) = removed {
            self.len -= 1;
            self.release(workload);
        }
    }
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
        (table.len, table.untracked)
    }

    /// Distinct workloads of the tracked pods.
    pub fn workloads(&self) -> usize {
        self.lock().workloads.len()
    }

    /// The observations of the tracked pods among `series`, each a pod's (namespace, name)
    /// with its cpu and memory series; also how many named no tracked pod (a pod that ran
    /// earlier in the window, or one the watch has not shown yet).
    pub fn observe<'a>(
        &self,
        series: impl IntoIterator<Item = ((&'a str, &'a str), Option<Series>, Option<Series>)>,
    ) -> (Vec<PodObservation>, usize) {
        let table = self.lock();
        let mut unknown = 0;
        let mut observed = Vec::with_capacity(table.len);
        for ((namespace, name), cpu, memory) in series {
            let Some(pod) = table.namespaces.get(namespace).and_then(|pods| pods.get(name)) else {
                unknown += 1;
                continue;
            };
            observed.push(PodObservation {
                workload: WorkloadKey::clone(&pod.workload),
                cpu_request_millis: pod.cpu_request_millis,
                memory_request_bytes: pod.memory_request_bytes,
                cpu,
                memory,
            });
        }
        (observed, unknown)
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

    #[test]
    fn series_join_the_pods_by_namespace_and_name() {
        let pods = RunningPods::default();
        pods.upsert(&pod("web-1", "u1", "web", 500));
        pods.upsert(&pod("web-2", "u2", "web", 500));
        let (observed, unknown) = pods.observe([
            (("shop", "web-1"), series(1000.0), None),
            (("shop", "gone-7"), series(10.0), None),
            (("other", "web-2"), series(10.0), None),
        ]);
        assert_eq!(unknown, 2);
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
        let (observed, _) = pods.observe([(("shop", "db-0"), series(1.0), None)]);
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
        let (observed, unknown) = pods.observe([
            (("shop", "web-0"), series(1.0), None),
            (("shop", "web-3"), series(1.0), None),
        ]);
        assert_eq!((observed[0].cpu_request_millis, unknown), (300, 1));
        // A fresh list: exactly these pods (the refused count is since start).
        let staged = pods.staging();
        staged.upsert(&pod("api-1", "a1", "api", 100));
        assert_eq!(pods.counts().0, 2, "the staged list is not in use yet");
        pods.replace_with(staged);
        assert_eq!((pods.counts(), pods.workloads()), ((1, 2), 1));
        assert_eq!(pods.observe([(("shop", "web-0"), series(1.0), None)]).1, 1);
    }
}
