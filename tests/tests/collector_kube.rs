//! The collector binary against a fake Kubernetes API server over loopback
//! (`--kubeconfig FILE`): pods enter the ledger with their PodScheduled time, nodes give
//! capacity, readiness waits for the pod list, and a restarted collector rebuilds the same
//! ledger from a fresh list (a pod deleted while it was down is gone).
//!
//! The fake (`waterline_tests::fake_kube`) answers lists from its current objects and
//! holds every watch open (this test pushes no events); the real kube-apiserver path is
//! the end-to-end suite's job (tests/e2e).

use std::time::Duration;

use anyhow::Result;
use waterline_api::v1 as pb;
use waterline_tests::fake_kube::{FakeKube, node};
use waterline_tests::procs::Service;

fn pod(name: &str, node: &str, scheduled: &str) -> serde_json::Value {
    waterline_tests::fake_kube::pod(name, node, scheduled, "default-scheduler")
}

async fn list_nodes(collector: &Service) -> Result<pb::ListNodesResponse> {
    let mut client = collector.collector_client().await?;
    Ok(client.list_nodes(pb::ListNodesRequest::default()).await?.into_inner())
}

/// uid → (node, placed_at seconds, cpu estimate, source).
fn ledger(listed: &pb::ListNodesResponse) -> Vec<(String, String, i64, i64, i32)> {
    let mut entries: Vec<_> = listed
        .ledger
        .iter()
        .map(|e| {
            let placed = e.placed_at.map(|t| t.seconds).unwrap_or_default();
            (e.pod_uid.clone(), e.node_name.clone(), placed, e.cpu_millis, e.source)
        })
        .collect();
    entries.sort();
    entries
}

#[tokio::test]
async fn collector_builds_the_ledger_from_the_api_server_and_rebuilds_it_after_a_restart()
-> Result<()> {
    let api = FakeKube::start(
        vec![pod("a", "n1", "2026-11-29T10:00:00Z"), pod("b", "n2", "2026-11-29T10:05:00Z")],
        vec![node("n1", "4", "10.0.0.1"), node("n2", "8", "10.0.0.2")],
    )
    .await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = api.kubeconfig(dir.path());

    let mut collector = Service::collector(&["--kubeconfig".to_string(), kubeconfig]).await?;
    // Ready means the pod list is in: no waiting needed.
    let first = list_nodes(&collector).await?;
    let watch = pb::LedgerSource::Watch as i32;
    let a = ("uid-a".to_string(), "n1".to_string(), 1_795_946_400, 850, watch);
    let b = ("uid-b".to_string(), "n2".to_string(), 1_795_946_700, 850, watch);
    assert_eq!(ledger(&first), vec![a.clone(), b]);
    let requests = api.requests.lock().unwrap().clone();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("pods?") && r.contains("fieldSelector=spec.nodeName")),
        "{requests:?}"
    );

    // Node capacity arrives from the node watch (shortly after readiness at the latest).
    let capacities = waterline_tests::prometheus::wait_until(Duration::from_secs(10), || {
        let collector = &collector;
        async move {
            let listed = list_nodes(collector).await?;
            let caps: Vec<(String, i64)> = listed
                .nodes
                .iter()
                .map(|n| (n.name.clone(), n.capacity.map(|c| c.cpu_millis).unwrap_or_default()))
                .collect();
            anyhow::ensure!(caps.len() == 2 && caps.iter().all(|c| c.1 > 0), "{caps:?}");
            Ok(caps)
        }
    })
    .await?;
    assert_eq!(capacities, vec![("n1".to_string(), 4000), ("n2".to_string(), 8000)]);

    // b is deleted while the collector is down; the restarted one lists again.
    collector.stop();
    api.pods.lock().unwrap().retain(|p| p["metadata"]["name"] != "b");
    collector.restart()?;
    collector.wait_ready(Duration::from_secs(20)).await?;
    let second = list_nodes(&collector).await?;
    assert_eq!(ledger(&second), vec![a], "same placement time after the restart, b gone");
    Ok(())
}
