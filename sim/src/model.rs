//! The simulated cluster's objects as every part of the simulator sees them: resources,
//! pods (what a scheduler may read of them) and simulated time.

use std::collections::BTreeMap;

use waterline_core::{Millis, UnixMillis};

/// Simulated time 0 as a wall-clock instant: samples and ledger entries carry unix
/// milliseconds like the real ones, so core's code runs on plausible timestamps.
pub const EPOCH: UnixMillis = UnixMillis(1_700_000_000_000);

/// Simulated time in milliseconds since the start of the measured run (negative during the
/// warm-up that fills the metrics pipeline's history).
pub type SimTime = i64;

pub fn instant(t: SimTime) -> UnixMillis {
    EPOCH.plus(Millis(t))
}

/// Cpu in millicores and memory in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
}

impl Resources {
    pub const fn new(cpu_millis: i64, memory_bytes: i64) -> Self {
        Resources { cpu_millis, memory_bytes }
    }

    pub fn plus(self, other: Resources) -> Resources {
        Resources::new(self.cpu_millis + other.cpu_millis, self.memory_bytes + other.memory_bytes)
    }

    pub fn minus(self, other: Resources) -> Resources {
        Resources::new(self.cpu_millis - other.cpu_millis, self.memory_bytes - other.memory_bytes)
    }

    /// Whether `self` fits within `limit` in both dimensions.
    pub fn fits_in(self, limit: Resources) -> bool {
        self.cpu_millis <= limit.cpu_millis && self.memory_bytes <= limit.memory_bytes
    }
}

/// Kubernetes QoS class, derived from requests and limits as the kubelet does for a
/// one-container pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// A pod as a scheduler sees it: never its true usage.
#[derive(Clone, Debug, PartialEq)]
pub struct SimPod {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `Deployment`'s pods are owned by a `ReplicaSet`; `DaemonSet` pods bypass load filters.
    pub owner_kind: String,
    /// `namespace/name` of the ReplicaSet (StatefulSet, ReplicationController) that owns
    /// the pod: one per pod group, an explicit pod's `owner`. kube-scheduler's default
    /// spread constraints count a node's pods of the same controller. `None` for DaemonSet
    /// and bare pods, which those constraints skip.
    pub controller: Option<String>,
    /// The controlling owner's name as the API shows it (a ReplicaSet `<deployment>-<hash>`
    /// beside the pod's `pod-template-hash` label, a StatefulSet's name; empty for a bare
    /// pod): with `owner_kind` and the labels, core's `WorkloadKey::of` reads the workload.
    pub owner_name: String,
    pub requests: Resources,
    /// 0 means no limit.
    pub limits: Resources,
}

impl SimPod {
    pub fn qos(&self) -> Qos {
        let r = self.requests;
        let l = self.limits;
        if r == Resources::default() && l == Resources::default() {
            Qos::BestEffort
        } else if l.cpu_millis > 0 && l.memory_bytes > 0 && (r == l || r == Resources::default()) {
            Qos::Guaranteed
        } else {
            Qos::Burstable
        }
    }

    /// The pod as waterline's engine reads it.
    pub fn to_core(&self) -> waterline_core::Pod {
        waterline_core::Pod {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            labels: self.labels.clone(),
            cpu_request_millis: self.requests.cpu_millis,
            cpu_limit_millis: self.limits.cpu_millis,
            memory_request_bytes: self.requests.memory_bytes,
            memory_limit_bytes: self.limits.memory_bytes,
            owner_kind: self.owner_kind.clone(),
            owner_name: self.owner_name.clone(),
            ..waterline_core::Pod::default()
        }
    }
}
