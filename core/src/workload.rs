//! A pod's workload: the controller whose pods share a template, so what one of them uses
//! prices the next (docs/design.md#learned-estimate). Derived from the pod alone — its
//! controlling owner and labels — so the collector, the scorers and the simulator agree on
//! it without reading ReplicaSets or Jobs from the API server.

use std::fmt;

use crate::pod::Pod;

/// Set by the Deployment controller on every ReplicaSet and its pods; the ReplicaSet is
/// named `<deployment>-<hash>`.
const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// A CronJob names its Jobs `<cronjob>-<scheduled time in minutes since the epoch>`:
/// eight digits from 1989 to 2160. A Job a user named `backup-2` keeps its own name.
const CRONJOB_SUFFIX_DIGITS: usize = 8;

/// `namespace/Kind/name` of a workload: `shop/Deployment/web`, `shop/StatefulSet/db`,
/// `batch/CronJob/report`, `shop/Pod/debug` for a bare pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadKey {
    pub namespace: String,
    pub kind: String,
    pub name: String,
}

impl WorkloadKey {
    pub fn new(namespace: &str, kind: &str, name: &str) -> WorkloadKey {
        WorkloadKey { namespace: namespace.into(), kind: kind.into(), name: name.into() }
    }

    /// The workload `pod` belongs to: a ReplicaSet's pod by the pod-template-hash
    /// convention belongs to its Deployment, a CronJob's Job's pod to the CronJob; a
    /// StatefulSet's, DaemonSet's, Job's or other controller's pod to that controller; a
    /// pod without a controlling owner is its own workload.
    pub fn of(pod: &Pod) -> WorkloadKey {
        let (kind, name) = match (pod.owner_kind.as_str(), pod.owner_name.as_str()) {
            (_, "") | ("", _) => ("Pod", pod.name.as_str()),
            ("ReplicaSet", owner) => match deployment_of(owner, pod) {
                Some(deployment) => ("Deployment", deployment),
                None => ("ReplicaSet", owner),
            },
            ("Job", owner) => match cronjob_of(owner) {
                Some(cronjob) => ("CronJob", cronjob),
                None => ("Job", owner),
            },
            (kind, owner) => (kind, owner),
        };
        WorkloadKey::new(&pod.namespace, kind, name)
    }
}

fn deployment_of<'a>(replica_set: &'a str, pod: &Pod) -> Option<&'a str> {
    let hash = pod.labels.get(POD_TEMPLATE_HASH).filter(|h| !h.is_empty())?;
    let name = replica_set.strip_suffix(hash.as_str())?.strip_suffix('-')?;
    (!name.is_empty()).then_some(name)
}

fn cronjob_of(job: &str) -> Option<&str> {
    let (name, suffix) = job.rsplit_once('-')?;
    let scheduled =
        suffix.len() == CRONJOB_SUFFIX_DIGITS && suffix.bytes().all(|b| b.is_ascii_digit());
    (scheduled && !name.is_empty()).then_some(name)
}

impl fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.namespace, self.kind, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(kind: &str, owner: &str, labels: &[(&str, &str)]) -> Pod {
        Pod {
            namespace: "shop".into(),
            name: "web-7d4b9c-x2x9z".into(),
            owner_kind: kind.into(),
            owner_name: owner.into(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Pod::default()
        }
    }

    #[test]
    fn a_replica_set_pod_belongs_to_its_deployment_by_the_template_hash() {
        let key =
            WorkloadKey::of(&pod("ReplicaSet", "web-7d4b9c", &[("pod-template-hash", "7d4b9c")]));
        assert_eq!(key.to_string(), "shop/Deployment/web");
        // Two releases of one Deployment are one workload.
        let next =
            WorkloadKey::of(&pod("ReplicaSet", "web-55f6d8", &[("pod-template-hash", "55f6d8")]));
        assert_eq!(key, next);
        // A hyphenated Deployment name survives.
        let key =
            WorkloadKey::of(&pod("ReplicaSet", "my-web-1-abc", &[("pod-template-hash", "abc")]));
        assert_eq!(key.name, "my-web-1");
    }

    #[test]
    fn a_replica_set_without_the_convention_is_its_own_workload() {
        // No label (a bare ReplicaSet), or a label that is not the name's suffix.
        assert_eq!(
            WorkloadKey::of(&pod("ReplicaSet", "cache", &[])).to_string(),
            "shop/ReplicaSet/cache"
        );
        let key = WorkloadKey::of(&pod("ReplicaSet", "cache-1", &[("pod-template-hash", "2")]));
        assert_eq!(key.to_string(), "shop/ReplicaSet/cache-1");
        let key = WorkloadKey::of(&pod("ReplicaSet", "abc", &[("pod-template-hash", "abc")]));
        assert_eq!(key.to_string(), "shop/ReplicaSet/abc");
    }

    #[test]
    fn a_cronjob_job_belongs_to_the_cronjob_and_other_jobs_to_themselves() {
        // 29,412,000 minutes after the epoch is in 2025: eight digits.
        assert_eq!(
            WorkloadKey::of(&pod("Job", "report-29412000", &[])).to_string(),
            "shop/CronJob/report"
        );
        assert_eq!(WorkloadKey::of(&pod("Job", "backup-2", &[])).to_string(), "shop/Job/backup-2");
        assert_eq!(
            WorkloadKey::of(&pod("Job", "-29412000", &[])).to_string(),
            "shop/Job/-29412000"
        );
    }

    #[test]
    fn other_controllers_and_bare_pods() {
        assert_eq!(
            WorkloadKey::of(&pod("StatefulSet", "db", &[])).to_string(),
            "shop/StatefulSet/db"
        );
        assert_eq!(
            WorkloadKey::of(&pod("DaemonSet", "agent", &[])).to_string(),
            "shop/DaemonSet/agent"
        );
        assert_eq!(WorkloadKey::of(&pod("", "", &[])).to_string(), "shop/Pod/web-7d4b9c-x2x9z");
        // An owner kind without a name (a malformed PodInfo) is still the pod's own.
        assert_eq!(WorkloadKey::of(&pod("ReplicaSet", "", &[])).kind, "Pod");
    }
}
