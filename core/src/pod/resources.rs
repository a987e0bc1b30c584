//! A pod's effective requests and limits: the one rule for every adapter (the collector's
//! pod watch, the extender, and — through the shared fixture table
//! `tests/fixtures/pod-resources.json` — the Go plugin).
//!
//! Requests follow kube-scheduler exactly (`PodRequests` in
//! kubernetes/kubernetes `staging/src/k8s.io/component-helpers/resource/helpers.go`, what
//! NodeResourcesFit uses): app containers summed; restartable init containers (sidecars) run
//! for the pod's whole life and add to the sum; each regular init container runs alone with
//! the sidecars started before it, so the pod needs at least that much; pod-level
//! `spec.resources` replace the container aggregate where set; the runtime overhead is added
//! last.
//!
//! Limits are waterline's rule, because they only cap the usage estimate: the containers
//! that keep running (app containers and sidecars) are summed, and **a resource that any of
//! them leaves without a limit (or with a zero limit) is unbounded for the whole pod**
//! (reported as 0, "not set"). One unbounded container can use the node, and the kubelet
//! sizes the pod cgroup the same way; summing only the limits that are set (what
//! `PodLimits` does) would cap the estimate below what the pod may use — below its own
//! requests, even. Regular init containers finish before the app starts, so their limits
//! do not count. A pod-level limit wins where set; the overhead is added to a bounded
//! limit.

/// cpu and memory of one resource list; `None` when the list does not name it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceList {
    pub cpu_millis: Option<i64>,
    pub memory_bytes: Option<i64>,
}

impl ResourceList {
    fn zip(self, other: ResourceList, f: impl Fn(Option<i64>, Option<i64>) -> Option<i64>) -> Self {
        ResourceList {
            cpu_millis: f(self.cpu_millis, other.cpu_millis),
            memory_bytes: f(self.memory_bytes, other.memory_bytes),
        }
    }

    /// Sum; present when either side is.
    fn add(self, other: ResourceList) -> Self {
        self.zip(other, |a, b| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        })
    }

    /// Maximum; present when either side is.
    fn max(self, other: ResourceList) -> Self {
        self.zip(other, |a, b| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).max(b.unwrap_or(0))),
        })
    }
}

/// One container's requests and limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContainerResources {
    pub requests: ResourceList,
    pub limits: ResourceList,
}

/// An init container; `sidecar` when its `restartPolicy` is `Always`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InitContainerResources {
    pub resources: ContainerResources,
    pub sidecar: bool,
}

/// What of a pod spec decides its resources.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSpecResources {
    pub containers: Vec<ContainerResources>,
    pub init_containers: Vec<InitContainerResources>,
    /// `spec.resources` (pod-level resources).
    pub pod_level: ContainerResources,
    /// `spec.overhead`.
    pub overhead: ResourceList,
}

/// A pod's effective resources in the domain's units; a limit of 0 means unbounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EffectiveResources {
    pub cpu_request_millis: i64,
    pub memory_request_bytes: i64,
    pub cpu_limit_millis: i64,
    pub memory_limit_bytes: i64,
}

/// Running sum of limits where one missing limit makes the resource unbounded (`None`).
fn add_bounded(sum: Option<i64>, limit: Option<i64>) -> Option<i64> {
    match (sum, limit) {
        (Some(s), Some(l)) if l > 0 => Some(s.saturating_add(l)),
        _ => None,
    }
}

pub fn effective_resources(spec: &PodSpecResources) -> EffectiveResources {
    let mut requests = ResourceList::default();
    let mut cpu_limit = Some(0i64);
    let mut memory_limit = Some(0i64);
    let mut add_limits = |limits: ResourceList| {
        cpu_limit = add_bounded(cpu_limit, limits.cpu_millis);
        memory_limit = add_bounded(memory_limit, limits.memory_bytes);
    };
    for c in &spec.containers {
        requests = requests.add(c.requests);
        add_limits(c.limits);
    }
    let mut sidecars = ResourceList::default();
    let mut init_peak = ResourceList::default();
    for init in &spec.init_containers {
        let own = init.resources.requests;
        let running = if init.sidecar {
            requests = requests.add(own);
            add_limits(init.resources.limits);
            sidecars = sidecars.add(own);
            sidecars
        } else {
            own.add(sidecars)
        };
        init_peak = init_peak.max(running);
    }
    let requests = requests
        .max(init_peak)
        .zip(spec.pod_level.requests, |containers, pod| pod.or(containers))
        .add(spec.overhead);
    let pod_limit = |containers: Option<i64>, pod: Option<i64>| match pod {
        Some(l) if l > 0 => Some(l),
        _ => containers,
    };
    let cpu_limit = pod_limit(cpu_limit, spec.pod_level.limits.cpu_millis);
    let memory_limit = pod_limit(memory_limit, spec.pod_level.limits.memory_bytes);
    let bounded = |limit: Option<i64>, overhead: Option<i64>| match limit {
        // A pod with no long-running container at all has nothing bounded.
        Some(l) if l > 0 => l.saturating_add(overhead.unwrap_or(0)),
        _ => 0,
    };
    EffectiveResources {
        cpu_request_millis: requests.cpu_millis.unwrap_or(0),
        memory_request_bytes: requests.memory_bytes.unwrap_or(0),
        cpu_limit_millis: bounded(cpu_limit, spec.overhead.cpu_millis),
        memory_limit_bytes: bounded(memory_limit, spec.overhead.memory_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(cpu: Option<i64>, memory: Option<i64>) -> ResourceList {
        ResourceList { cpu_millis: cpu, memory_bytes: memory }
    }

    fn container(requests: ResourceList, limits: ResourceList) -> ContainerResources {
        ContainerResources { requests, limits }
    }

    #[test]
    fn init_containers_are_peaks_and_sidecars_add_for_the_whole_life() {
        let spec = PodSpecResources {
            containers: vec![container(list(Some(500), Some(100)), list(Some(1000), Some(200)))],
            init_containers: vec![
                InitContainerResources {
                    resources: container(list(Some(200), None), list(Some(300), Some(50))),
                    sidecar: true,
                },
                InitContainerResources {
                    resources: container(list(Some(2000), Some(10)), ResourceList::default()),
                    sidecar: false,
                },
            ],
            pod_level: ContainerResources::default(),
            overhead: list(Some(100), Some(1)),
        };
        let got = effective_resources(&spec);
        // cpu requests: app 500 + sidecar 200 = 700; the init container runs with the
        // sidecar: 2000 + 200 = 2200 > 700; + overhead 100 = 2300.
        // memory: 100 + 0 = 100 vs init 10 + 0 = 10 → 100; + 1 = 101.
        assert_eq!((got.cpu_request_millis, got.memory_request_bytes), (2300, 101));
        // limits: app 1000 + sidecar 300 + overhead 100 = 1400; memory 200 + 50 + 1 = 251.
        // The regular init container's missing limit does not unbound the running pod.
        assert_eq!((got.cpu_limit_millis, got.memory_limit_bytes), (1400, 251));
    }

    #[test]
    fn a_long_running_container_without_a_limit_unbounds_the_pod() {
        let spec = PodSpecResources {
            containers: vec![
                container(list(Some(1000), None), list(Some(1000), Some(64))),
                container(list(Some(100), None), list(None, Some(0))),
            ],
            overhead: list(Some(100), None),
            ..PodSpecResources::default()
        };
        let got = effective_resources(&spec);
        // The second container sets no cpu limit and a zero memory limit: both unbounded,
        // not 1000 + 100 (overhead) and 64, which would cap the estimate below the request.
        assert_eq!((got.cpu_limit_millis, got.memory_limit_bytes), (0, 0));
        assert_eq!(got.cpu_request_millis, 1200);
    }

    #[test]
    fn pod_level_resources_win_where_set() {
        let spec = PodSpecResources {
            containers: vec![container(list(Some(100), Some(10)), list(None, Some(20)))],
            pod_level: container(list(Some(4000), None), list(Some(8000), None)),
            ..PodSpecResources::default()
        };
        let got = effective_resources(&spec);
        assert_eq!(
            got,
            EffectiveResources {
                cpu_request_millis: 4000,
                memory_request_bytes: 10,
                cpu_limit_millis: 8000,
                memory_limit_bytes: 20,
            }
        );
    }
}
