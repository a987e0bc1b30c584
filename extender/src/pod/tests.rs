use serde_json::Value;
use waterline_core::estimate::estimate;
use waterline_core::policy::Estimator;

use super::*;

fn pod(json: &str) -> Pod {
    serde_json::from_str(json).expect("pod decodes")
}

#[test]
fn upstream_fixture_pod_is_empty_and_uses_the_default_scheduler() {
    // kube-scheduler extender/v1 types_test.go: `"spec":{"containers":null}`.
    let p = pod(r#"{"metadata":{"name":"podname"},"spec":{"containers":null},"status":{}}"#);
    let info = p.to_info();
    assert_eq!(info.name, "podname");
    assert_eq!(info.scheduler_name, DEFAULT_SCHEDULER);
    assert_eq!((info.cpu_request_millis, info.memory_request_bytes), (0, 0));
    assert_eq!((info.cpu_limit_millis, info.memory_limit_bytes), (0, 0));
    assert_eq!(info.owner_kind, "");
}

/// A pod the way the scheduler's informer copy marshals it (no managedFields; Go encodes
/// nil pointers as null, quantities as strings; unknown and status fields are skipped).
const REPLICASET_POD: &str = r#"{"metadata":{"name":"web-7d4b9c-x2x9z","generateName":"web-7d4b9c-","namespace":"shop","uid":"6f1c2d3e-0000-4000-8000-000000000001","resourceVersion":"123","labels":{"app":"web","pod-template-hash":"7d4b9c"},"annotations":{"a":"b"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"u1"},{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d4b9c","uid":"u2","controller":true,"blockOwnerDeletion":true}]},"spec":{"volumes":[{"name":"kube-api-access","projected":{"sources":null,"defaultMode":420}}],"initContainers":[{"name":"migrate","image":"m","resources":{"limits":{"cpu":"3","memory":"1Gi"},"requests":{"cpu":"3","memory":"1Gi"}},"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"},{"name":"proxy","image":"p","resources":{"limits":{"cpu":"500m"},"requests":{"cpu":"500m","memory":"64Mi"}},"restartPolicy":"Always"},{"name":"warm","image":"w","resources":{"requests":{"cpu":"2","memory":"128Mi"}}}],"containers":[{"name":"app","image":"a","ports":[{"containerPort":8080,"protocol":"TCP"}],"resources":{"limits":{"cpu":"1","memory":"512Mi"},"requests":{"cpu":"250m","memory":"256Mi"}}},{"name":"log","image":"l","resources":{"requests":{"cpu":"100m","memory":"32Mi"}}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","securityContext":{},"schedulerName":"waterline-scheduler","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priorityClassName":"high","priority":1000,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","overhead":{"cpu":"50m","memory":"16Mi"}},"status":{"phase":"Pending","qosClass":"Burstable","conditions":[{"type":"PodScheduled","status":"False","lastProbeTime":null,"lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#;

#[test]
fn requests_follow_kube_scheduler_with_sidecars_and_overhead() {
    let p = pod(REPLICASET_POD);
    // cpu: app 250 + log 100 + sidecar proxy 500 = 850 for the pod's life;
    // init peaks: migrate 3000 (no sidecar yet), proxy 500, warm 2000 + 500 = 2500
    // → max(850, 3000) = 3000, + overhead 50.
    // memory: 256 + 32 + 64 = 352 Mi; peaks 1024, 64, 128 + 64 → 1024 Mi, + 16 Mi.
    let r = p.resources();
    assert_eq!(r.cpu_request_millis, 3050);
    assert_eq!(r.memory_request_bytes, 1040 << 20);
    // limits: only the containers that keep running count (app, log and the sidecar
    // proxy), and `log` sets none, the proxy no memory limit: both are unbounded (0).
    // `PodLimits` said 3000 + 50 and 1024 + 16 Mi, the regular init container `migrate`'s
    // limits, which cap nothing once it has finished (core's rule, docs/design.md#pod-estimate).
    assert_eq!((r.cpu_limit_millis, r.memory_limit_bytes), (0, 0));

    let info = p.to_info();
    assert_eq!(info.namespace, "shop");
    assert_eq!(info.name, "web-7d4b9c-x2x9z");
    assert_eq!(info.uid, "6f1c2d3e-0000-4000-8000-000000000001");
    assert_eq!(info.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(info.owner_kind, "ReplicaSet", "the controller reference, not the first one");
    assert_eq!(info.priority_class, "high");
    assert_eq!(info.scheduler_name, "waterline-scheduler");
    assert_eq!(info.cpu_request_millis, 3050);
    assert_eq!(info.memory_limit_bytes, 0);
}

#[test]
fn sidecars_count_for_the_whole_life_of_the_pod() {
    // Small init container, big sidecar: the sidecar is added to the app containers.
    let p = pod(
        r#"{"spec":{"initContainers":[{"name":"i","resources":{"requests":{"cpu":"100m"}}},{"name":"s","restartPolicy":"Always","resources":{"requests":{"cpu":"1"}}}],"containers":[{"name":"c","resources":{"requests":{"cpu":"2"}}}]}}"#,
    );
    assert_eq!(p.resources().cpu_request_millis, 3000);
    assert_eq!(p.resources().memory_request_bytes, 0);
}

#[test]
fn overhead_is_added_to_set_limits_only() {
    let p = pod(
        r#"{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1"}}},{"name":"b","resources":{"limits":null,"requests":null}}],"overhead":{"cpu":"100m","memory":"10Mi"}}}"#,
    );
    let r = p.resources();
    // Container `b` sets no limit, so the pod's cpu is unbounded (0): one unlimited
    // container can use the node. This test used to expect 1100 (a's limit + overhead),
    // which capped the usage estimate below what the pod may use while the collector
    // and the plugin said unbounded for the same pod; core's rule is unbounded.
    assert_eq!((r.cpu_limit_millis, r.memory_limit_bytes), (0, 0));
    assert_eq!((r.cpu_request_millis, r.memory_request_bytes), (100, 10 << 20));
    let info = p.to_info();
    assert_eq!((info.cpu_limit_millis, info.memory_limit_bytes), (0, 0));
}

#[test]
fn pod_level_resources_win_for_cpu_and_memory() {
    let p = pod(
        r#"{"spec":{"resources":{"requests":{"cpu":"4"},"limits":{"memory":"8Gi"}},"containers":[{"name":"a","resources":{"requests":{"cpu":"1","memory":"1Gi"},"limits":{"memory":"2Gi"}}}]}}"#,
    );
    let r = p.resources();
    assert_eq!((r.cpu_request_millis, r.memory_request_bytes), (4000, 1 << 30));
    assert_eq!((r.cpu_limit_millis, r.memory_limit_bytes), (0, 8 << 30));
}

#[test]
fn nulls_numbers_and_other_resources_are_tolerated() {
    let p = pod(
        r#"{"metadata":{"name":null,"labels":null,"ownerReferences":null},"spec":{"schedulerName":null,"initContainers":null,"overhead":null,"containers":[{"name":"a","restartPolicy":null,"resources":{"requests":{"cpu":2,"memory":1e3,"nvidia.com/gpu":"1","ephemeral-storage":"1Gi"}}}]},"status":null}"#,
    );
    let r = p.resources();
    assert_eq!((r.cpu_request_millis, r.memory_request_bytes), (2000, 1000));
    assert_eq!(p.scheduler_name(), DEFAULT_SCHEDULER);
}

#[test]
fn a_bad_quantity_is_an_error() {
    let err = serde_json::from_str::<Pod>(
        r#"{"spec":{"containers":[{"resources":{"requests":{"cpu":"lots"}}}]}}"#,
    )
    .unwrap_err();
    assert!(err.to_string().contains("'lots' is not a quantity"), "{err}");
    assert!(
        serde_json::from_str::<Pod>(
            r#"{"spec":{"containers":[{"resources":{"requests":{"memory":[]}}}]}}"#
        )
        .is_err()
    );
}

#[test]
fn daemonset_pods_carry_their_owner_kind() {
    let p = pod(
        r#"{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"ds","uid":"u","controller":true}]}}"#,
    );
    assert_eq!(p.to_info().owner_kind, "DaemonSet");
}

/// `tests/fixtures/pod-resources.json`: the table the collector's and the Go plugin's tests
/// run too, so the three readers of a pod cannot drift apart again.
const FIXTURES: &str = include_str!("../../../tests/fixtures/pod-resources.json");

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Amounts {
    cpu_millis: i64,
    memory_bytes: i64,
}

#[derive(Deserialize)]
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
fn the_shared_fixture_table_holds_for_the_wire_pod() {
    let cases: Vec<Case> = serde_json::from_str(FIXTURES).expect("fixture table parses");
    assert!(cases.len() >= 15, "{} cases", cases.len());
    for case in cases {
        let name = &case.name;
        // The bytes the scheduler sends, through the same decoder as a request.
        let p: Pod =
            serde_json::from_str(&case.pod.to_string()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let info = p.to_info();
        assert_eq!(
            (info.cpu_request_millis, info.memory_request_bytes),
            (case.requests.cpu_millis, case.requests.memory_bytes),
            "{name}: requests"
        );
        assert_eq!(
            (info.cpu_limit_millis, info.memory_limit_bytes),
            (case.limits.cpu_millis, case.limits.memory_bytes),
            "{name}: limits"
        );
        let domain = waterline_core::Pod {
            cpu_request_millis: info.cpu_request_millis,
            cpu_limit_millis: info.cpu_limit_millis,
            memory_request_bytes: info.memory_request_bytes,
            memory_limit_bytes: info.memory_limit_bytes,
            ..waterline_core::Pod::default()
        };
        let usage = estimate(&Estimator::default(), &Default::default(), &domain);
        assert_eq!(
            (usage.cpu_millis, usage.memory_bytes),
            (case.estimate.cpu_millis, case.estimate.memory_bytes),
            "{name}: estimate"
        );
        if let Some(kind) = &case.owner_kind {
            assert_eq!(&info.owner_kind, kind, "{name}: owner kind");
        }
        if let Some(owner) = &case.owner_name {
            assert_eq!(&info.owner_name, owner, "{name}: owner name");
        }
        if let Some(priority) = case.priority {
            assert_eq!(info.priority, priority, "{name}: priority");
        }
        if let Some(annotations) = &case.annotations {
            let kept: std::collections::BTreeMap<String, String> =
                info.annotations.clone().into_iter().collect();
            assert_eq!(&kept, annotations, "{name}: annotations");
        }
    }
}
