//! Kube pods with odd resources, fuzzed (RELIABILITY.md): random pods — app containers,
//! regular and sidecar init containers (`restartPolicy: Always`), pod-level resources,
//! overhead, zero and missing limits, quantities like `1e3`, `0.5`, `100Ki`, `1.5Gi`, and
//! malformed ones (`lots`, `1Qi`, `-1`, `1e400`, `8Ei`, empty) — read by the collector's pod
//! watch (`pod_resources` on the `k8s_openapi` object) and by the extender's wire pod (the
//! request decoder on the JSON bytes) give exactly what core's one rule
//! (`effective_resources`) gives for the same spec, or both refuse the pod naming the same
//! field with core's quantity error; never a panic.
//!
//! Cases: `WATERLINE_FUZZ_CASES` (default 2,000 in `make test`, under a second); a failure
//! is printed and kept in `fuzz_pods.regressions`, which later runs replay first.
//!
//! The same generator, with a fixed seed, wrote `tests/fixtures/pod-resources-generated.json`
//! (valid pods only, with their requests and limits), which the Go plugin's podinfo test runs
//! too; `a_generated_corpus_holds_for_both_readers` checks it here.
//! `WATERLINE_WRITE_POD_CORPUS=1 cargo test -p waterline-tests --test fuzz_pods` rewrites it.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod as KubePod;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Map, Value, json};
use waterline_collector::sources::kube::pods::{PodError, pod_resources};
use waterline_core::pod::{
    ContainerResources, EffectiveResources, InitContainerResources, PodSpecResources, ResourceList,
    effective_resources,
};
use waterline_core::quantity::{QuantityError, parse_bytes, parse_cpu_millis};
use waterline_extender::wire::ExtenderArgs;

fn suffix(suffixes: &'static [&'static str]) -> impl Strategy<Value = &'static str> + Clone {
    prop::sample::select(suffixes)
}

/// Quantities as the API server may hold them, and some it would refuse.
fn quantity() -> BoxedStrategy<String> {
    let suffix = suffix(&["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "n", "u"]);
    prop_oneof![
        6 => (0u64..100_000, suffix.clone()).prop_map(|(n, s)| format!("{n}{s}")),
        3 => (0u32..64, 0u32..1000, suffix).prop_map(|(i, f, s)| format!("{i}.{f}{s}")),
        1 => (1u32..10, -3i32..10).prop_map(|(m, e)| format!("{m}e{e}")),
        1 => prop::sample::select(vec![
            "0", "0.5", "1e3", "100Ki", "1.5Gi", "2E2", "+5", "1E", "8Ei", "9e18", "1e400",
            "lots", "1Qi", "-1", "", "1.5.5", "e3", "0x10", "NaN", " 250m", "Inf",
        ])
        .prop_map(str::to_owned),
    ]
    .boxed()
}

/// For the Go corpus: only quantities that are whole in their unit (milli-cores, bytes).
/// Kubernetes sums the exact quantities and rounds up once (`PodRequests`, then
/// `MilliValue`), core rounds each quantity up and sums: two `21.5n` cpu requests are one
/// milli-core in Go and two here (RELIABILITY.md, "a known difference").
fn whole_quantity(cpu: bool) -> BoxedStrategy<String> {
    let suffix = suffix(&["", "k", "M", "G", "Ki", "Mi", "Gi", "Ti"]);
    let plain = (0u64..100_000, suffix).prop_map(|(n, s)| format!("{n}{s}"));
    if cpu {
        let millis = (0u64..100_000).prop_map(|n| format!("{n}m"));
        let decimal = (0u32..64, 0u32..1000).prop_map(|(i, f)| format!("{i}.{f:03}"));
        prop_oneof![plain, millis, decimal, Just("1e3".to_owned())].boxed()
    } else {
        let binary =
            (0u32..64, 0u32..4).prop_map(|(i, q)| format!("{i}.{}Gi", [0, 25, 5, 75][q as usize]));
        let decimal = (0u32..64, 0u32..1000).prop_map(|(i, f)| format!("{i}.{f:03}M"));
        prop_oneof![plain, binary, decimal, Just("100Ki".to_owned())].boxed()
    }
}

/// Where a model's quantities come from.
#[derive(Clone)]
struct Quantities {
    cpu: BoxedStrategy<String>,
    memory: BoxedStrategy<String>,
}

impl Quantities {
    fn any() -> Self {
        Quantities { cpu: quantity(), memory: quantity() }
    }

    fn whole() -> Self {
        Quantities { cpu: whole_quantity(true), memory: whole_quantity(false) }
    }
}

/// A resource list: cpu and memory present or not, sometimes another resource beside them.
#[derive(Clone, Debug)]
struct List {
    cpu: Option<String>,
    memory: Option<String>,
    gpu: bool,
}

fn list(q: &Quantities) -> impl Strategy<Value = List> + use<> {
    (proptest::option::of(q.cpu.clone()), proptest::option::of(q.memory.clone()), any::<bool>())
        .prop_map(|(cpu, memory, gpu)| List { cpu, memory, gpu })
}

/// `resources` of a container (or of the pod): requests, limits, each absent or a list.
#[derive(Clone, Debug)]
struct Requirements {
    requests: Option<List>,
    limits: Option<List>,
}

fn requirements(q: &Quantities) -> impl Strategy<Value = Option<Requirements>> + use<> {
    proptest::option::weighted(
        0.85,
        (proptest::option::of(list(q)), proptest::option::of(list(q)))
            .prop_map(|(requests, limits)| Requirements { requests, limits }),
    )
}

#[derive(Clone, Debug)]
struct Container {
    resources: Option<Requirements>,
    restart_policy: Option<&'static str>,
}

fn container(q: &Quantities) -> impl Strategy<Value = Container> + use<> {
    let policy = prop_oneof![
        3 => Just(None),
        2 => Just(Some("Always")),
        1 => Just(Some("OnFailure")),
        1 => Just(Some("Never")),
    ];
    (requirements(q), policy)
        .prop_map(|(resources, restart_policy)| Container { resources, restart_policy })
}

#[derive(Clone, Debug)]
struct PodModel {
    containers: Vec<Container>,
    init_containers: Vec<Container>,
    pod_level: Option<Requirements>,
    overhead: Option<List>,
}

fn pod_model(q: Quantities) -> impl Strategy<Value = PodModel> {
    (
        proptest::collection::vec(container(&q), 0..4),
        proptest::collection::vec(container(&q), 0..4),
        proptest::option::weighted(0.3, requirements(&q).prop_filter_map("some", |r| r)),
        proptest::option::weighted(0.3, list(&q)),
    )
        .prop_map(|(mut containers, init_containers, pod_level, overhead)| {
            // restartPolicy on an app container is not a sidecar marker; keep it off there.
            for c in &mut containers {
                c.restart_policy = None;
            }
            PodModel { containers, init_containers, pod_level, overhead }
        })
}

// ---- the pod object ----------------------------------------------------------------------

fn list_json(list: &List) -> Value {
    let mut map = Map::new();
    if let Some(cpu) = &list.cpu {
        map.insert("cpu".into(), json!(cpu));
    }
    if let Some(memory) = &list.memory {
        map.insert("memory".into(), json!(memory));
    }
    if list.gpu {
        map.insert("nvidia.com/gpu".into(), json!("1"));
    }
    Value::Object(map)
}

fn requirements_json(r: &Requirements) -> Value {
    let mut map = Map::new();
    if let Some(requests) = &r.requests {
        map.insert("requests".into(), list_json(requests));
    }
    if let Some(limits) = &r.limits {
        map.insert("limits".into(), list_json(limits));
    }
    Value::Object(map)
}

fn container_json(c: &Container, name: String) -> Value {
    let mut map = Map::new();
    map.insert("name".into(), json!(name));
    map.insert("image".into(), json!("registry.example/app:1"));
    if let Some(r) = &c.resources {
        map.insert("resources".into(), requirements_json(r));
    }
    if let Some(policy) = c.restart_policy {
        map.insert("restartPolicy".into(), json!(policy));
    }
    Value::Object(map)
}

/// The `v1.Pod` as the API server (and kube-scheduler, which marshals it with the same
/// `omitempty` tags) sends it.
fn pod_json(model: &PodModel, i: usize) -> Value {
    let mut spec = Map::new();
    let containers: Vec<Value> = model
        .containers
        .iter()
        .enumerate()
        .map(|(k, c)| container_json(c, format!("app-{k}")))
        .collect();
    spec.insert("containers".into(), Value::Array(containers));
    if !model.init_containers.is_empty() {
        let init: Vec<Value> = model
            .init_containers
            .iter()
            .enumerate()
            .map(|(k, c)| container_json(c, format!("init-{k}")))
            .collect();
        spec.insert("initContainers".into(), Value::Array(init));
    }
    if let Some(r) = &model.pod_level {
        spec.insert("resources".into(), requirements_json(r));
    }
    if let Some(o) = &model.overhead {
        spec.insert("overhead".into(), list_json(o));
    }
    spec.insert("schedulerName".into(), json!("waterline-scheduler"));
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("fuzz-{i}"), "namespace": "fuzz",
            "uid": format!("00000000-0000-4000-8000-{i:012}"),
            "creationTimestamp": "2026-12-01T10:00:00Z",
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    })
}

// ---- the oracle: core's rule on the model ------------------------------------------------

/// A quantity that does not parse: its field path in the pod and core's reason.
type Malformed = (String, QuantityError);

fn parse_list(list: Option<&List>, field: &str, bad: &mut Vec<Malformed>) -> ResourceList {
    let Some(list) = list else { return ResourceList::default() };
    let mut one = |q: &Option<String>, key: &str, parse: fn(&str) -> Result<i64, QuantityError>| {
        q.as_deref().and_then(|q| match parse(q) {
            Ok(v) => Some(v),
            Err(e) => {
                bad.push((format!("{field}.{key}"), e));
                None
            }
        })
    };
    ResourceList {
        cpu_millis: one(&list.cpu, "cpu", parse_cpu_millis),
        memory_bytes: one(&list.memory, "memory", parse_bytes),
    }
}

fn parse_requirements(
    r: Option<&Requirements>,
    field: &str,
    bad: &mut Vec<Malformed>,
) -> ContainerResources {
    let Some(r) = r else { return ContainerResources::default() };
    ContainerResources {
        requests: parse_list(r.requests.as_ref(), &format!("{field}.requests"), bad),
        limits: parse_list(r.limits.as_ref(), &format!("{field}.limits"), bad),
    }
}

/// What core's rule gives for the model, or every malformed quantity in it.
fn expected(model: &PodModel) -> Result<EffectiveResources, Vec<Malformed>> {
    let mut bad = Vec::new();
    let containers = model
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let field = format!("spec.containers[{i}].resources");
            parse_requirements(c.resources.as_ref(), &field, &mut bad)
        })
        .collect();
    let init_containers = model
        .init_containers
        .iter()
        .enumerate()
        .map(|(i, c)| InitContainerResources {
            resources: parse_requirements(
                c.resources.as_ref(),
                &format!("spec.initContainers[{i}].resources"),
                &mut bad,
            ),
            sidecar: c.restart_policy == Some("Always"),
        })
        .collect();
    let spec = PodSpecResources {
        containers,
        init_containers,
        pod_level: parse_requirements(model.pod_level.as_ref(), "spec.resources", &mut bad),
        overhead: parse_list(model.overhead.as_ref(), "spec.overhead", &mut bad),
    };
    if bad.is_empty() { Ok(effective_resources(&spec)) } else { Err(bad) }
}

// ---- the two readers ---------------------------------------------------------------------

/// The collector's pod watch: the bytes decoded as `k8s_openapi`'s `v1.Pod`, then converted.
fn collector_reads(bytes: &str) -> Result<EffectiveResources, PodError> {
    let pod: KubePod = serde_json::from_str(bytes).expect("every generated pod is a v1.Pod");
    pod_resources(&pod)
}

/// The extender: the pod inside an `ExtenderArgs` body through the request decoder.
fn extender_reads(pod: &Value) -> Result<EffectiveResources, String> {
    let body = json!({"Pod": pod, "Nodes": null, "NodeNames": ["node-1"]}).to_string();
    let args: ExtenderArgs =
        waterline_extender::http::decode(body.as_bytes()).map_err(|e| e.message)?;
    Ok(args.pod.expect("the body has a pod").resources())
}

/// Both readers against the oracle; `Err` describes the disagreement.
fn check(model: &PodModel, i: usize) -> Result<(), String> {
    let pod = pod_json(model, i);
    let bytes = pod.to_string();
    let collector = collector_reads(&bytes);
    let extender = extender_reads(&pod);
    match expected(model) {
        Ok(want) => {
            if collector.as_ref() != Ok(&want) {
                return Err(format!("collector {collector:?}, core {want:?}"));
            }
            if extender.as_ref() != Ok(&want) {
                return Err(format!("extender {extender:?}, core {want:?}"));
            }
        }
        Err(bad) => {
            let fields: BTreeSet<&str> = bad.iter().map(|(f, _)| f.as_str()).collect();
            // The collector names the field and core's reason, exactly.
            match &collector {
                Err(PodError::Quantity { field, reason })
                    if bad.iter().any(|(f, r)| f == field && r == reason) => {}
                other => return Err(format!("collector {other:?}, malformed {bad:?}")),
            }
            // The extender's 400 message: `malformed request at Pod.<field>: <reason> at line
            // 1 column N`, for one of the malformed fields.
            let message = match &extender {
                Err(message) => message,
                Ok(got) => return Err(format!("extender accepted {got:?}, malformed {bad:?}")),
            };
            let named = bad
                .iter()
                .any(|(f, r)| message.starts_with(&format!("malformed request at Pod.{f}: {r}")));
            if !named {
                return Err(format!("extender said {message:?}, malformed {fields:?}"));
            }
            if bad.len() == 1 {
                // One bad quantity: both name the same field.
                let Err(PodError::Quantity { field, .. }) = &collector else { unreachable!() };
                if !message.starts_with(&format!("malformed request at Pod.{field}: ")) {
                    return Err(format!("collector named {field}, extender said {message:?}"));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(waterline_testkit::proptest_config(2000))]

    #[test]
    fn odd_pods_read_alike_in_collector_extender_and_core(model in pod_model(Quantities::any())) {
        if let Err(why) = check(&model, 0) {
            let pod = pod_json(&model, 0);
            prop_assert!(false, "{why}\npod: {pod}");
        }
    }
}

// ---- the corpus the Go plugin runs too ---------------------------------------------------

const CORPUS: &str = "../tests/fixtures/pod-resources-generated.json";
const CORPUS_SIZE: usize = 120;

fn corpus_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(CORPUS)
}

/// `CORPUS_SIZE` valid pods from a fixed seed, with core's requests and limits.
fn generate_corpus() -> Vec<Value> {
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[17; 32]);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = pod_model(Quantities::whole());
    let mut out = Vec::new();
    while out.len() < CORPUS_SIZE {
        let model = strategy.new_tree(&mut runner).expect("a pod").current();
        let Ok(want) = expected(&model) else { continue };
        let i = out.len();
        out.push(json!({
            "name": format!("generated {i}"),
            "pod": pod_json(&model, i),
            "requests": {"cpuMillis": want.cpu_request_millis, "memoryBytes": want.memory_request_bytes},
            "limits": {"cpuMillis": want.cpu_limit_millis, "memoryBytes": want.memory_limit_bytes},
        }));
    }
    out
}

#[test]
fn a_generated_corpus_holds_for_both_readers() {
    let path = corpus_path();
    if std::env::var_os("WATERLINE_WRITE_POD_CORPUS").is_some() {
        // One case per line: the file stays diffable without being ten times longer.
        let lines: Vec<String> = generate_corpus().iter().map(Value::to_string).collect();
        std::fs::write(&path, format!("[\n{}\n]\n", lines.join(",\n")))
            .expect("writing the corpus");
    }
    let text = std::fs::read_to_string(&path).expect("the generated corpus is checked in");
    let cases: Vec<Value> = serde_json::from_str(&text).expect("the corpus parses");
    assert_eq!(cases.len(), CORPUS_SIZE);
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        let want = EffectiveResources {
            cpu_request_millis: case["requests"]["cpuMillis"].as_i64().expect("cpuMillis"),
            memory_request_bytes: case["requests"]["memoryBytes"].as_i64().expect("memoryBytes"),
            cpu_limit_millis: case["limits"]["cpuMillis"].as_i64().expect("cpuMillis"),
            memory_limit_bytes: case["limits"]["memoryBytes"].as_i64().expect("memoryBytes"),
        };
        assert_eq!(collector_reads(&case["pod"].to_string()), Ok(want), "{name}: collector");
        assert_eq!(extender_reads(&case["pod"]), Ok(want), "{name}: extender");
    }
}
