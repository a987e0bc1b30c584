//! The poller against kube-rs' mock API server (tower-test): the test answers each request.

use ::kube::Client;
use ::kube::client::Body;
use http::{Response, StatusCode};
use prometheus_client::registry::Registry;
use serde_json::json;
use tower_test::mock::{self, Handle};
use waterline_core::snapshot::Capacity;
use waterline_core::{Policy, UnixMillis};

use super::*;

type ApiServer = Handle<http::Request<Body>, Response<Body>>;

fn poller(policy: Policy) -> (Poller, ApiServer, Registry) {
    let (service, handle) = mock::pair::<http::Request<Body>, Response<Body>>();
    let mut registry = Registry::default();
    let state = ClusterState::default();
    let capacity = Capacity { cpu_millis: 8000, memory_bytes: 32 << 30 };
    state.update_capacity(
        &[("node-0".to_string(), capacity), ("node-1".to_string(), capacity)].into(),
    );
    let poller = Poller {
        client: Client::new(service, "default"),
        state,
        policy: PolicyHandle::new(policy),
        directory: NodeDirectory::default(),
        metrics: MetricsServerMetrics::register(&mut registry),
        per_metric: SourceMetrics::register(&mut registry),
        fleet: Fleet::default(),
        published: HashMap::new(),
        health: HashMap::new(),
        last_error: String::new(),
        logged: HashSet::new(),
    };
    (poller, handle, registry)
}

fn exposition(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

async fn answer(server: &mut ApiServer, status: StatusCode, body: serde_json::Value) {
    let (request, send) = server.next_request().await.expect("no request");
    assert_eq!(request.method(), http::Method::GET);
    assert_eq!(request.uri().path(), NODES_PATH);
    send.send_response(
        Response::builder().status(status).body(Body::from(body.to_string().into_bytes())).unwrap(),
    );
}

fn list(at: &str, cpu: [&str; 2]) -> serde_json::Value {
    json!({"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION, "metadata": {},
           "items": [
               {"metadata": {"name": "node-0"}, "timestamp": at, "window": "15s",
                "usage": {"cpu": cpu[0], "memory": "8Gi"}},
               {"metadata": {"name": "node-1"}, "timestamp": at, "window": "15s",
                "usage": {"cpu": cpu[1], "memory": "16Gi"}}]})
}

#[tokio::test]
async fn one_list_gives_every_default_metric_for_every_node() {
    let (mut poller, mut server, registry) = poller(Policy::default());
    let round = tokio::spawn(async move {
        poller.round(Duration::from_secs(5)).await;
        poller
    });
    answer(&mut server, StatusCode::OK, list("2026-01-05T10:00:00Z", ["2", "6"])).await;
    let poller = round.await.unwrap();
    let listing = poller.state.list(&[], UnixMillis::now(), &[]);
    let at = UnixMillis(1_767_607_200_000);
    for node in &listing.nodes {
        // node-0: 2 of 8 cores = 25 %, 8 of 32 GiB = 25 %; node-1: 75 % and 50 %. One point:
        // the average and both maxima are that point.
        let (cpu, memory) = if node.name == "node-0" { (25.0, 25.0) } else { (75.0, 50.0) };
        assert_eq!(node.samples.len(), 6, "{node:?}");
        for (metric, sample) in &node.samples {
            let want = if metric.starts_with("cpu") { cpu } else { memory };
            assert_eq!((sample.value, sample.at), (want, at), "{} {metric}", node.name);
        }
    }
    let health = &listing.metrics["cpu_usage_max_avg_1d"];
    assert_eq!((health.series, health.nodes_covered, health.last_error.as_str()), (2, 2, ""));
    let text = exposition(&registry);
    assert!(text.contains(r#"waterline_collector_source_up{source="metrics-server"} 1"#), "{text}");
    assert!(
        text.contains(r#"waterline_metric_nodes_covered{metric="mem_usage_avg_5m"} 2"#),
        "{text}"
    );
}

#[tokio::test]
async fn each_metric_on_its_own_period_and_a_failure_ages_them_all() {
    let (mut poller, mut server, registry) = poller(Policy::default());
    let round = tokio::spawn(async move {
        poller.round(Duration::from_secs(5)).await;
        poller.round(Duration::from_secs(5)).await;
        poller.round(Duration::from_secs(5)).await;
        poller
    });
    answer(&mut server, StatusCode::OK, list("2026-01-05T10:00:00Z", ["2", "6"])).await;
    // 15 s later: node-0 at 6 cores. The 5 m metrics (period 30 s) were just published and
    // are not due yet, so nothing moves in the state; the history has the point.
    answer(&mut server, StatusCode::OK, list("2026-01-05T10:00:15Z", ["6", "6"])).await;
    answer(
        &mut server,
        StatusCode::SERVICE_UNAVAILABLE,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 503,
               "reason": "ServiceUnavailable", "message": "the server is currently unable to handle the request"}),
    )
    .await;
    let poller = round.await.unwrap();
    let listing = poller.state.list(&["node-0".into()], UnixMillis::now(), &[]);
    let cpu = listing.nodes[0].samples.iter().find(|(m, _)| m == "cpu_usage_avg_5m").unwrap().1;
    assert_eq!(cpu.value, 25.0);
    // The history did take it: (25 + 75) / 2 = 50 % is what the next publication says.
    let derived = derive("waterline:node_cpu_usage:avg5m").unwrap();
    assert_eq!(poller.fleet.samples(derived, true)["node-0"].value, 50.0);
    // The failed list: every metric reports the error; its samples stay and age.
    let health = &listing.metrics["cpu_usage_avg_5m"];
    assert!(health.last_error.contains("unable to handle the request"), "{health:?}");
    assert!(health.last_success.is_some());
    let text = exposition(&registry);
    assert!(text.contains(r#"waterline_collector_source_up{source="metrics-server"} 0"#), "{text}");
    assert!(text.contains("waterline_metrics_server_failures_total 1"), "{text}");
    assert!(text.contains("waterline_metrics_server_requests_total 3"), "{text}");
}

#[tokio::test]
async fn a_metric_metrics_server_cannot_give_reports_why() {
    let mut policy = Policy::default();
    policy.metrics[0].query = "waterline:node_network_bytes:rate5m".into();
    let (mut poller, mut server, _registry) = poller(policy);
    let round = tokio::spawn(async move {
        poller.round(Duration::from_secs(5)).await;
        poller
    });
    answer(&mut server, StatusCode::OK, list("2026-01-05T10:00:00Z", ["2", "6"])).await;
    let poller = round.await.unwrap();
    let listing = poller.state.list(&[], UnixMillis::now(), &[]);
    let health = &listing.metrics["cpu_usage_avg_5m"];
    assert!(health.last_error.contains("not derivable from metrics-server"), "{health:?}");
    assert!(
        listing.nodes.iter().all(
            |n| n.samples.len() == 5 && !n.samples.iter().any(|(m, _)| m == "cpu_usage_avg_5m")
        )
    );
}

#[tokio::test]
async fn available_asks_discovery_for_the_nodes_resource() {
    let (service, mut server) = mock::pair::<http::Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let ask = tokio::spawn(async move {
        let yes = available(&client, Duration::from_secs(5)).await;
        let no = available(&client, Duration::from_secs(5)).await;
        (yes, no)
    });
    for status in [StatusCode::OK, StatusCode::NOT_FOUND] {
        let (request, send) = server.next_request().await.unwrap();
        assert_eq!(request.uri().path(), "/apis/metrics.k8s.io/v1beta1");
        let body = if status == StatusCode::OK {
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
                   "resources": [{"name": "nodes", "singularName": "", "namespaced": false,
                                  "kind": "NodeMetrics", "verbs": ["get", "list"]}]})
        } else {
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                   "reason": "NotFound", "message": "the server could not find the requested resource"})
        };
        send.send_response(
            Response::builder()
                .status(status)
                .body(Body::from(body.to_string().into_bytes()))
                .unwrap(),
        );
    }
    let (yes, no) = ask.await.unwrap();
    assert_eq!(yes, Ok(()));
    assert!(no.unwrap_err().contains("could not find"));
}
