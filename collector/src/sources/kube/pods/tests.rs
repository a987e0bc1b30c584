//! Pod → ledger entry conversion, on plain objects (no runtime, no API server).

use serde_json::{Value, json};
use waterline_core::estimate::estimate;
use waterline_core::policy::{AntiColocation, Estimator};

use super::*;

const SCHEDULED: &str = "2026-11-29T10:00:00Z";
const SCHEDULED_MS: i64 = 1_795_946_400_000;

fn kube_pod(value: Value) -> KubePod {
    serde_json::from_value(value).expect("valid pod")
}

/// A running pod on `node-1`, scheduled at [`SCHEDULED`], with one container asking for
/// `cpu` and `memory`; `patch` overrides top-level sections.
fn running(cpu: &str, memory: &str) -> Value {
    json!({
        "metadata": {
            "name": "web-0", "namespace": "shop", "uid": "uid-web-0",
            "labels": {"app": "web"},
            "creationTimestamp": "2026-11-29T09:59:58Z",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                                 "uid": "o1", "controller": true}],
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}]
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "app", "image": "x",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
        },
        "status": {
            "phase": "Running",
            "startTime": "2026-11-29T10:00:07Z",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-29T10:00:30Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": SCHEDULED}
            ]
        }
    })
}

fn container(name: &str, requests: Value, limits: Value) -> Value {
    json!({"name": name, "image": "x", "resources": {"requests": requests, "limits": limits}})
}

/// The default policy, with an anti-colocation rule on `app` so the entry keeps that label.
fn policy() -> Policy {
    Policy {
        anti_colocation: vec![AntiColocation { label_key: "app".into() }],
        ..Policy::default()
    }
}

fn placed(pod: &KubePod) -> LedgerEntry {
    match view(pod, &policy(), &Default::default()).expect("convertible") {
        PodView::Placed(entry) => entry,
        other => panic!("expected a placement, got {other:?}"),
    }
}

#[test]
fn a_bound_pod_becomes_a_watch_entry_placed_at_its_pod_scheduled_time() {
    let pod = kube_pod(running("1", "1Gi"));
    let entry = placed(&pod);
    assert_eq!(entry.uid, "uid-web-0");
    assert_eq!((entry.namespace.as_str(), entry.name.as_str()), ("shop", "web-0"));
    assert_eq!(entry.node, "node-1");
    assert_eq!(entry.placed_at, UnixMillis(SCHEDULED_MS));
    assert_eq!(entry.source, LedgerSource::Watch);
    // Trimmed to the labels the policy reads (its anti-colocation key).
    assert_eq!(entry.labels, [("app".to_string(), "web".to_string())].into());
    let expected = estimate(
        &Estimator::default(),
        &Default::default(),
        &Pod { cpu_request_millis: 1000, memory_request_bytes: 1 << 30, ..Pod::default() },
    );
    assert_eq!(entry.usage, expected);
    assert_eq!(domain_pod(&pod).unwrap().owner_kind, "StatefulSet");
}

/// Owner name, priority and the waterline annotations reach the domain pod; the ledger
/// entry is priced with the pod's estimate-factor; a bad override value is left out, never
/// the placement.
#[test]
fn owner_priority_and_overrides_are_read_and_price_the_entry() {
    let mut value = running("1", "1Gi");
    value["metadata"]["annotations"] = json!({
        "waterline.io/estimate-factor": "2",
        "deployment.kubernetes.io/revision": "3"
    });
    value["spec"]["priority"] = json!(9000);
    let pod = kube_pod(value.clone());
    let domain = domain_pod(&pod).unwrap();
    assert_eq!((domain.owner_name.as_str(), domain.priority), ("web", 9000));
    assert_eq!(domain.overrides.estimate_factor, Some(2.0));
    assert_eq!(placed(&pod).usage.cpu_millis, 1700, "1000m × 0.85 × 2");

    value["metadata"]["annotations"] = json!({"waterline.io/estimate-factor": "two"});
    let pod = kube_pod(value);
    assert_eq!(domain_pod(&pod).unwrap().overrides.estimate_factor, None);
    assert_eq!(placed(&pod).usage.cpu_millis, 850);
}

#[test]
fn placement_time_falls_back_to_start_then_creation_and_is_never_now() {
    let mut value = running("1", "1Gi");
    value["status"]["conditions"] = json!([
        {"type": "PodScheduled", "status": "False", "lastTransitionTime": "2026-11-29T09:00:00Z"}
    ]);
    assert_eq!(placed_at(&kube_pod(value.clone())), Some(UnixMillis(SCHEDULED_MS + 7_000)));
    value["status"].as_object_mut().unwrap().remove("startTime");
    assert_eq!(placed_at(&kube_pod(value.clone())), Some(UnixMillis(SCHEDULED_MS - 2_000)));
    value["metadata"].as_object_mut().unwrap().remove("creationTimestamp");
    assert_eq!(placed_at(&kube_pod(value.clone())), None);
    let err = view(&kube_pod(value), &policy(), &Default::default()).unwrap_err().to_string();
    assert!(err.contains("PodScheduled"), "{err}");
}

#[test]
fn completed_unbound_and_uid_less_pods_are_not_placements() {
    for phase in ["Succeeded", "Failed"] {
        let mut value = running("1", "1Gi");
        value["status"]["phase"] = json!(phase);
        assert_eq!(
            view(&kube_pod(value), &policy(), &Default::default()),
            Ok(PodView::Unplaced { uid: "uid-web-0".into() }),
            "{phase}"
        );
    }
    let mut pending = running("1", "1Gi");
    pending["spec"].as_object_mut().unwrap().remove("nodeName");
    pending["status"] = json!({"phase": "Pending"});
    assert_eq!(
        view(&kube_pod(pending), &policy(), &Default::default()),
        Ok(PodView::Unplaced { uid: "uid-web-0".into() })
    );
    let mut no_uid = running("1", "1Gi");
    no_uid["metadata"].as_object_mut().unwrap().remove("uid");
    assert!(
        view(&kube_pod(no_uid), &policy(), &Default::default())
            .unwrap_err()
            .to_string()
            .contains("uid")
    );
}

#[test]
fn requests_are_summed_like_kube_scheduler() {
    let mut value = running("1", "1Gi");
    value["spec"]["containers"] = json!([
        container(
            "a",
            json!({"cpu": "500m", "memory": "256Mi"}),
            json!({"cpu": "1", "memory": "512Mi"})
        ),
        container(
            "b",
            json!({"cpu": "250m", "memory": "256Mi"}),
            json!({"cpu": "500m", "memory": "256Mi"})
        ),
    ]);
    value["spec"]["overhead"] = json!({"cpu": "100m", "memory": "64Mi"});
    let r = pod_resources(&kube_pod(value)).unwrap();
    assert_eq!(r.cpu_request_millis, 850);
    assert_eq!(r.memory_request_bytes, 576 << 20);
    // Limits get the overhead too, as they are set on every container.
    assert_eq!(r.cpu_limit_millis, 1600);
    assert_eq!(r.memory_limit_bytes, 832 << 20);
}

#[test]
fn init_containers_count_as_their_peak_and_sidecars_add_up() {
    // The k8s PodRequests example: sidecar 1 cpu (restartable), then a regular init container
    // of 2 cpu runs next to it (3), the app asks for 1 (+1 sidecar = 2): peak is 3.
    let mut value = running("1", "0");
    value["spec"]["initContainers"] = json!([
        {"name": "side", "image": "x", "restartPolicy": "Always",
         "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}},
        {"name": "setup", "image": "x", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
    ]);
    let r = pod_resources(&kube_pod(value.clone())).unwrap();
    assert_eq!(r.cpu_request_millis, 3000);
    assert_eq!(r.memory_request_bytes, 1 << 30);
    // The app container sets no limit: the pod is unbounded.
    assert_eq!(r.cpu_limit_millis, 0);

    // A small init container: the long-running sum (app + sidecar) wins.
    value["spec"]["initContainers"][1]["resources"]["requests"] = json!({"cpu": "100m"});
    let r = pod_resources(&kube_pod(value)).unwrap();
    assert_eq!(r.cpu_request_millis, 2000);
    assert_eq!(r.memory_request_bytes, 0);
}

#[test]
fn pod_level_resources_replace_the_container_sum() {
    let mut value = running("1", "1Gi");
    value["spec"]["resources"] = json!({"requests": {"cpu": "3"}, "limits": {"memory": "2Gi"}});
    let r = pod_resources(&kube_pod(value)).unwrap();
    assert_eq!(r.cpu_request_millis, 3000);
    assert_eq!(r.memory_request_bytes, 1 << 30);
    assert_eq!(r.memory_limit_bytes, 2 << 30);
    assert_eq!(r.cpu_limit_millis, 0);
}

#[test]
fn a_bad_quantity_makes_the_pod_malformed_not_zero() {
    let err = view(&kube_pod(running("lots", "1Gi")), &policy(), &Default::default()).unwrap_err();
    assert!(err.to_string().contains("cpu"), "{err}");
    // The error names the field.
    assert_eq!(
        err.to_string(),
        "spec.containers[0].resources.requests.cpu: 'lots' is not a quantity"
    );
}

/// `tests/fixtures/pod-resources.json`: the one table of pod → requests, limits and
/// estimate that the extender's tests and the Go plugin's tests run too.
const FIXTURES: &str = include_str!("../../../../../tests/fixtures/pod-resources.json");

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Amounts {
    cpu_millis: i64,
    memory_bytes: i64,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    name: String,
    pod: Value,
    requests: Amounts,
    limits: Amounts,
    estimate: Amounts,
    owner_kind: Option<String>,
    owner_name: Option<String>,
    priority: Option<i32>,
    /// The `waterline.io/` annotations a reader keeps (every other key dropped).
    annotations: Option<std::collections::BTreeMap<String, String>>,
}

#[test]
fn the_shared_fixture_table_holds_for_the_pod_watch() {
    let cases: Vec<Case> = serde_json::from_str(FIXTURES).expect("fixture table parses");
    assert!(cases.len() >= 15, "{} cases", cases.len());
    for case in cases {
        let name = &case.name;
        let pod: KubePod = serde_json::from_value(case.pod)
            .unwrap_or_else(|e| panic!("{name}: not a v1.Pod: {e}"));
        let domain = domain_pod(&pod).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (domain.cpu_request_millis, domain.memory_request_bytes),
            (case.requests.cpu_millis, case.requests.memory_bytes),
            "{name}: requests"
        );
        assert_eq!(
            (domain.cpu_limit_millis, domain.memory_limit_bytes),
            (case.limits.cpu_millis, case.limits.memory_bytes),
            "{name}: limits"
        );
        let usage = estimate(&Estimator::default(), &Default::default(), &domain);
        assert_eq!(
            (usage.cpu_millis, usage.memory_bytes),
            (case.estimate.cpu_millis, case.estimate.memory_bytes),
            "{name}: estimate"
        );
        if let Some(kind) = &case.owner_kind {
            assert_eq!(&domain.owner_kind, kind, "{name}: owner kind");
        }
        if let Some(owner) = &case.owner_name {
            assert_eq!(&domain.owner_name, owner, "{name}: owner name");
        }
        if let Some(priority) = case.priority {
            assert_eq!(domain.priority, priority, "{name}: priority");
        }
        if let Some(annotations) = &case.annotations {
            let expected = waterline_core::pod::Overrides::from_annotations(annotations).unwrap();
            assert_eq!(domain.overrides, expected, "{name}: overrides");
        }
    }
}

#[test]
fn two_conversions_of_the_same_pod_are_identical() {
    // What a restarted collector sees: the same object, possibly with fresher status.
    let first = placed(&kube_pod(running("1", "1Gi")));
    let mut later = running("1", "1Gi");
    later["status"]["conditions"][0]["lastTransitionTime"] = json!("2026-11-29T11:00:00Z");
    later["metadata"]["resourceVersion"] = json!("999");
    assert_eq!(placed(&kube_pod(later)), first);
}

mod index {
    use waterline_core::Policy;

    use super::*;
    use crate::sources::kube::Index;

    fn index() -> (ClusterState, PodIndex) {
        let state = ClusterState::default();
        let index = PodIndex::new(state.clone(), PolicyHandle::new(Policy::default()));
        (state, index)
    }

    fn uids(state: &ClusterState) -> Vec<String> {
        let listed = state.list(&[], UnixMillis(0), &[]);
        let mut uids: Vec<String> = listed.ledger.into_iter().map(|(e, _)| e.uid).collect();
        uids.sort();
        uids
    }

    fn reserve(uid: &str) -> LedgerEntry {
        LedgerEntry {
            uid: uid.into(),
            namespace: "shop".into(),
            name: "web-0".into(),
            node: "node-1".into(),
            placed_at: UnixMillis::now(),
            usage: Default::default(),
            source: LedgerSource::Reserve,
            labels: Default::default(),
        }
    }

    #[test]
    fn an_unbound_pod_keeps_its_reservation_until_bound_finished_or_deleted() {
        let (state, mut index) = index();
        state.place(reserve("uid-web-0"));
        let mut pending = running("1", "1Gi");
        pending["spec"].as_object_mut().unwrap().remove("nodeName");
        pending["status"] = json!({"phase": "Pending"});
        index.apply(kube_pod(pending));
        assert_eq!(uids(&state), vec!["uid-web-0"], "the bind may be under way");

        // Bound: the watch confirms the placement.
        index.apply(kube_pod(running("1", "1Gi")));
        let listed = state.list(&[], UnixMillis(0), &[]);
        assert_eq!(listed.ledger[0].0.source, LedgerSource::Watch);

        // Finished: the watched pod departs (docs/design.md#departures), and a late event
        // of it (or a Reserve) never brings it back.
        let mut done = running("1", "1Gi");
        done["status"]["phase"] = json!("Succeeded");
        index.apply(kube_pod(done));
        let source = |state: &ClusterState| state.list(&[], UnixMillis(0), &[]).ledger[0].0.source;
        assert!(matches!(source(&state), LedgerSource::Departure { arrival_known: true, .. }));
        index.apply(kube_pod(running("1", "1Gi")));
        state.place(reserve("uid-web-0"));
        assert!(source(&state).is_departure());
        assert_eq!(uids(&state), vec!["uid-web-0"]);

        // A finished pod releases a reservation the watch never confirmed (it never ran).
        let (state, mut index) = self::index();
        state.place(reserve("uid-web-0"));
        let mut failed = running("1", "1Gi");
        failed["status"]["phase"] = json!("Failed");
        index.apply(kube_pod(failed));
        assert!(uids(&state).is_empty());
        // A deleted pod that never held a node (Pending, unbound) releases its Reserve; one
        // the object shows bound departs, even if this watch never saw it bound.
        let mut unbound = running("1", "1Gi");
        unbound["spec"].as_object_mut().unwrap().remove("nodeName");
        state.place(reserve("uid-web-0"));
        index.delete(kube_pod(unbound));
        assert!(uids(&state).is_empty());
        state.place(reserve("uid-web-0"));
        index.delete(kube_pod(running("1", "1Gi")));
        assert!(source(&state).is_departure());
    }

    /// An eviction or graceful delete sets `deletionTimestamp` (now + the grace period):
    /// the pod departs at the earlier of that and the event's arrival, at once — before the
    /// kubelet has stopped it and the delete event comes.
    #[test]
    fn a_terminating_pod_departs_at_once() {
        let (state, mut index) = index();
        index.apply(kube_pod(running("1", "1Gi")));
        let mut evicted = running("1", "1Gi");
        evicted["metadata"]["deletionTimestamp"] = json!("2026-11-29T10:05:00Z");
        let before = UnixMillis::now();
        index.apply(kube_pod(evicted.clone()));
        let listed = state.list(&[], UnixMillis(0), &[]);
        let LedgerSource::Departure { departed_at, arrival_known } = listed.ledger[0].0.source
        else {
            panic!("not a departure: {:?}", listed.ledger[0].0);
        };
        // The timestamp lies in the past of the machine's clock: it is the departure.
        assert!(arrival_known);
        assert!(departed_at < before);
        assert_eq!(departed_at, UnixMillis(1_795_946_700_000));
        // The delete event that follows changes nothing.
        index.delete(kube_pod(evicted));
        assert_eq!(state.list(&[], UnixMillis(0), &[]).ledger, listed.ledger);
        // A relist of a terminating pod lists its departure (a restarted collector keeps the
        // credit).
        let (state, mut index) = self::index();
        index.init();
        let mut terminating = running("1", "1Gi");
        terminating["metadata"]["deletionTimestamp"] = json!("2026-11-29T10:05:00Z");
        index.init_apply(kube_pod(terminating));
        index.init_done();
        assert!(state.list(&[], UnixMillis(0), &[]).ledger[0].0.source.is_departure());
    }

    #[test]
    fn a_relist_replaces_the_watched_view_and_marks_the_index_synced() {
        let (state, mut index) = index();
        let synced = index.synced();
        let mut other = running("1", "1Gi");
        other["metadata"]["uid"] = json!("uid-other");
        index.apply(kube_pod(other));
        assert!(!*synced.borrow());

        index.init();
        index.init_apply(kube_pod(running("lots", "1Gi"))); // malformed: skipped
        index.init_apply(kube_pod(running("1", "1Gi")));
        assert_eq!(uids(&state), vec!["uid-other"], "nothing changes before the list is done");
        index.init_done();
        assert_eq!(uids(&state), vec!["uid-web-0"]);
        assert!(*synced.borrow());
    }

    #[test]
    fn the_running_pods_follow_the_watch_for_the_learner() {
        let state = ClusterState::default();
        let running_pods = RunningPods::default();
        let mut index = PodIndex::new(state, PolicyHandle::new(Policy::default()))
            .with_running(Some(running_pods.clone()));
        let series = |name| [(crate::running_pods::pod_key("shop", name), None, None)];
        let observe = |name| running_pods.observe(series(name), |o| o.collect::<Vec<_>>()).0;
        index.init();
        index.init_apply(kube_pod(running("500m", "1Gi")));
        assert_eq!(running_pods.counts().0, 0, "the list is not done");
        index.init_done();
        let observed = observe("web-0");
        // The StatefulSet's pod with its requests.
        assert_eq!(observed[0].workload.to_string(), "shop/StatefulSet/web");
        assert_eq!(
            (observed[0].cpu_request_millis, observed[0].memory_request_bytes),
            (500, 1 << 30)
        );
        // Terminating, then gone: it leaves.
        let mut terminating = running("500m", "1Gi");
        terminating["metadata"]["deletionTimestamp"] = json!("2026-11-29T10:05:00Z");
        index.apply(kube_pod(terminating));
        assert_eq!(running_pods.counts().0, 0);
        index.apply(kube_pod(running("500m", "1Gi")));
        assert_eq!(running_pods.counts().0, 1);
        index.delete(kube_pod(running("500m", "1Gi")));
        assert_eq!(running_pods.counts().0, 0);
        // Finished: it leaves too.
        index.apply(kube_pod(running("500m", "1Gi")));
        let mut done = running("500m", "1Gi");
        done["status"]["phase"] = json!("Succeeded");
        index.apply(kube_pod(done));
        assert_eq!(running_pods.counts().0, 0);
    }
}
