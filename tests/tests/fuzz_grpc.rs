//! The scorer's RPCs, fuzzed (RELIABILITY.md): random Filter, Score, Evaluate and Reserve
//! requests — negative and huge quantities, empty and duplicate names, blank names, 10,000+
//! candidates, odd labels — against the real binary answer OK or INVALID_ARGUMENT (and
//! RESOURCE_EXHAUSTED for a message past the size limit), never anything else, and the
//! scorer is still healthy afterwards. `WATERLINE_FUZZ_CASES` cases (default 300); the seed
//! is printed and `WATERLINE_FUZZ_SEED` replays it.

use anyhow::Result;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use tonic::Code;
use waterline_api::v1 as pb;
use waterline_testkit::seed_and_cases;
use waterline_tests::procs::{Service, write_file};

fn quantity() -> impl Strategy<Value = i64> {
    prop_oneof![Just(0i64), 1i64..100_000, Just(-1), Just(i64::MIN), Just(i64::MAX), Just(1 << 62),]
}

fn pod() -> impl Strategy<Value = Option<pb::PodInfo>> {
    let labels = proptest::collection::btree_map("[a-z./-]{0,12}", "[a-z0-9-]{0,8}", 0..4);
    let info = (
        "[a-z0-9-]{0,10}",
        quantity(),
        quantity(),
        quantity(),
        quantity(),
        labels,
        prop_oneof![Just(""), Just("DaemonSet"), Just("ReplicaSet")],
    )
        .prop_map(|(uid, cr, cl, mr, ml, labels, owner)| pb::PodInfo {
            namespace: "default".into(),
            name: format!("p-{uid}"),
            uid,
            labels: labels.into_iter().collect(),
            cpu_request_millis: cr,
            cpu_limit_millis: cl,
            memory_request_bytes: mr,
            memory_limit_bytes: ml,
            owner_kind: owner.into(),
            ..Default::default()
        });
    prop_oneof![1 => Just(None), 9 => info.prop_map(Some)]
}

fn names() -> impl Strategy<Value = Vec<String>> {
    let name = prop_oneof![
        "node-[0-9]".prop_map(String::from),
        "[a-z0-9.-]{0,20}".prop_map(String::from),
        Just(String::new()),
        Just("é\u{1F600}".to_owned()),
    ];
    prop_oneof![
        8 => proptest::collection::vec(name, 0..30),
        1 => (10_000usize..10_050).prop_map(|n| (0..n).map(|i| format!("n{i}")).collect()),
        1 => Just(vec!["node-1".to_owned(); 50]),
    ]
}

#[derive(Clone, Debug)]
enum Call {
    Filter(pb::FilterRequest),
    Score(pb::ScoreRequest),
    Evaluate(pb::EvaluateRequest),
    Reserve(pb::ReserveRequest),
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (pod(), names(), any::<bool>()).prop_map(|(pod, node_names, all_nodes)| Call::Filter(
            pb::FilterRequest { policy: String::new(), pod, node_names, all_nodes }
        )),
        (pod(), names(), any::<bool>(), any::<bool>()).prop_map(
            |(pod, node_names, explain, scores_only)| Call::Score(pb::ScoreRequest {
                policy: String::new(),
                pod,
                node_names,
                explain,
                scores_only
            })
        ),
        (pod(), names(), any::<bool>()).prop_map(|(pod, node_names, all_nodes)| Call::Evaluate(
            pb::EvaluateRequest { policy: String::new(), pod, node_names, all_nodes }
        )),
        (pod(), "[a-z0-9-]{0,10}").prop_map(|(pod, node_name)| Call::Reserve(pb::ReserveRequest {
            pod,
            node_name,
            ..Default::default()
        })),
    ]
}

#[tokio::test]
async fn random_requests_get_ok_or_invalid_argument() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let nodes = "nodes:\n  - {name: node-1, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: 30}}\n";
    let nodes = write_file(dir.path(), "nodes.yaml", nodes);
    let collector = Service::collector(&["--static".into(), nodes]).await?;
    // A small request limit, so the 10,000-name requests also meet it.
    let scorer =
        Service::scorer(collector.grpc, &["--max-request-bytes".into(), "65536".into()]).await?;
    let mut client = scorer.scorer_client().await?;

    let (seed, bytes, cases) = seed_and_cases("fuzz_grpc", 300);
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = call();
    let mut codes = std::collections::BTreeMap::new();
    for case in 0..cases {
        let call = strategy.new_tree(&mut runner).map_err(anyhow::Error::msg)?.current();
        let code = match call.clone() {
            Call::Filter(r) => {
                client.filter(r).await.err().map(|s| (s.code(), s.message().to_owned()))
            }
            Call::Score(r) => {
                client.score(r).await.err().map(|s| (s.code(), s.message().to_owned()))
            }
            Call::Evaluate(r) => {
                client.evaluate(r).await.err().map(|s| (s.code(), s.message().to_owned()))
            }
            Call::Reserve(r) => {
                client.reserve(r).await.err().map(|s| (s.code(), s.message().to_owned()))
            }
        };
        let (code, message) = code.unwrap_or((Code::Ok, String::new()));
        // A message past --max-request-bytes is RESOURCE_EXHAUSTED (tonic's OUT_OF_RANGE
        // for it is rewritten by the server's limits layer), and so is a request naming more
        // nodes than --max-nodes.
        let allowed = matches!(code, Code::Ok | Code::InvalidArgument | Code::ResourceExhausted);
        let shown = format!("{call:?}");
        assert!(
            allowed,
            "seed {seed} case {case}: {code:?} {message}\n{}",
            &shown[..shown.len().min(600)]
        );
        if code == Code::InvalidArgument {
            assert!(
                !message.is_empty(),
                "seed {seed} case {case}: INVALID_ARGUMENT without a reason"
            );
        }
        *codes.entry(format!("{code:?}")).or_insert(0) += 1;
    }
    println!("fuzz_grpc: answers by code {codes:?}");
    // Both kinds of answer happened: the generator reaches valid and invalid requests.
    assert!(codes.contains_key("Ok") && codes.contains_key("InvalidArgument"), "{codes:?}");

    scorer.check_running()?;
    let mut health = tonic_health::pb::health_client::HealthClient::new(scorer.channel().await?);
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "waterline.v1.ScorerService".into(),
        })
        .await?
        .into_inner()
        .status;
    assert_eq!(status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);
    Ok(())
}
