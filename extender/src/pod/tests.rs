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
    let r = p.requests();
    assert_eq!(r.cpu, Some(3050));
    assert_eq!(r.memory, Some(1040 << 20));
    // limits: app 1000 + sidecar 500 = 1500; migrate 3000; proxy 500; warm none + 500
    // → 3000 + 50 overhead. memory: app 512 Mi; migrate 1024 Mi → 1024 + 16 Mi.
    let l = p.limits();
    assert_eq!(l.cpu, Some(3050));
    assert_eq!(l.memory, Some(1040 << 20));

    let info = p.to_info();
    assert_eq!(info.namespace, "shop");
    assert_eq!(info.name, "web-7d4b9c-x2x9z");
    assert_eq!(info.uid, "6f1c2d3e-0000-4000-8000-000000000001");
    assert_eq!(info.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(info.owner_kind, "ReplicaSet", "the controller reference, not the first one");
    assert_eq!(info.priority_class, "high");
    assert_eq!(info.scheduler_name, "waterline-scheduler");
    assert_eq!(info.cpu_request_millis, 3050);
    assert_eq!(info.memory_limit_bytes, 1040 << 20);
}

#[test]
fn sidecars_count_for_the_whole_life_of_the_pod() {
    // Small init container, big sidecar: the sidecar is added to the app containers.
    let p = pod(
        r#"{"spec":{"initContainers":[{"name":"i","resources":{"requests":{"cpu":"100m"}}},{"name":"s","restartPolicy":"Always","resources":{"requests":{"cpu":"1"}}}],"containers":[{"name":"c","resources":{"requests":{"cpu":"2"}}}]}}"#,
    );
    assert_eq!(p.requests().cpu, Some(3000));
    assert_eq!(p.requests().memory, None);
}

#[test]
fn overhead_is_added_to_set_limits_only() {
    let p = pod(
        r#"{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1"}}},{"name":"b","resources":{"limits":null,"requests":null}}],"overhead":{"cpu":"100m","memory":"10Mi"}}}"#,
    );
    assert_eq!(p.limits(), Resources { cpu: Some(1100), memory: None });
    assert_eq!(p.requests(), Resources { cpu: Some(100), memory: Some(10 << 20) });
    let info = p.to_info();
    assert_eq!((info.cpu_limit_millis, info.memory_limit_bytes), (1100, 0));
}

#[test]
fn pod_level_resources_win_for_cpu_and_memory() {
    let p = pod(
        r#"{"spec":{"resources":{"requests":{"cpu":"4"},"limits":{"memory":"8Gi"}},"containers":[{"name":"a","resources":{"requests":{"cpu":"1","memory":"1Gi"},"limits":{"memory":"2Gi"}}}]}}"#,
    );
    assert_eq!(p.requests(), Resources { cpu: Some(4000), memory: Some(1 << 30) });
    assert_eq!(p.limits(), Resources { cpu: None, memory: Some(8 << 30) });
}

#[test]
fn nulls_numbers_and_other_resources_are_tolerated() {
    let p = pod(
        r#"{"metadata":{"name":null,"labels":null,"ownerReferences":null},"spec":{"schedulerName":null,"initContainers":null,"overhead":null,"containers":[{"name":"a","restartPolicy":null,"resources":{"requests":{"cpu":2,"memory":1e3,"nvidia.com/gpu":"1","ephemeral-storage":"1Gi"}}}]},"status":null}"#,
    );
    assert_eq!(p.requests(), Resources { cpu: Some(2000), memory: Some(1000) });
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
