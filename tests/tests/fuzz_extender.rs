//! The extender's request bodies, fuzzed (RELIABILITY.md): random and mutated
//! `ExtenderArgs` (filter, prioritize), `ExtenderPreemptionArgs` (preempt) and
//! `ExtenderBindingArgs` (bind) — deep nesting, huge and fractional numbers, wrong types
//! anywhere in the tree, invalid UTF-8 and lone surrogates, NUL bytes, truncated bodies,
//! 10 MB strings, a body past `--max-body` — sent over HTTP to the real extender in front of
//! a real scorer and collector. Every answer is a 200 with a valid answer of that verb (the
//! names it returns among the candidates, prioritize scores within 0..10), a 400 with an
//! `Error` message, or a 413 for a body past the limit; never a dropped connection, never
//! past the client's timeout. Afterwards the extender still runs, is ready, answers a
//! normal request, and never logged a panic.
//!
//! Cases: `WATERLINE_FUZZ_CASES` (default 200, ~10 s on a busy debug build); the seed is printed and
//! `WATERLINE_FUZZ_SEED` replays it. Every body in `tests/fuzz/extender/` (`<verb>-<what>`)
//! is sent first: a failing body is written to `target/fuzz-extender/`, to be copied there
//! as a regression once fixed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};
use waterline_testkit::seed_and_cases;
use waterline_tests::procs::{Launch, Service, write_file};

const MAX_BODY: usize = 12 << 20;
/// How long one answer may take: a 10 MB body through a debug build on a busy machine
/// takes well under a second; past this the extender hangs.
const TIMEOUT: Duration = Duration::from_secs(20);
const VERBS: [&str; 4] = ["filter", "prioritize", "preempt", "bind"];

// ---- bodies ------------------------------------------------------------------------------

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0u32..6).prop_map(|i| format!("node-{i}")),
        1 => "[a-z0-9.-]{0,12}",
        1 => Just(String::new()),
        1 => Just("é\u{1F600}\u{0}".to_owned()),
    ]
}

fn quantity() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("500m")),
        Just(json!("1.5Gi")),
        Just(json!("1e3")),
        Just(json!("100Ki")),
        Just(json!("lots")),
        Just(json!("-1")),
        Just(json!("8Ei")),
        Just(json!(2)),
        Just(json!(0.5)),
        Just(json!(1e300)),
        Just(json!(-7)),
        Just(json!(null)),
    ]
}

fn pod() -> impl Strategy<Value = Value> {
    let container = (quantity(), quantity(), quantity(), any::<bool>())
        .prop_map(|(cpu, memory, limit, sidecar)| {
            json!({"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory},
                   "limits": {"cpu": limit}},
                   "restartPolicy": if sidecar { json!("Always") } else { Value::Null }})
        })
        .boxed();
    let scheduler = prop_oneof![
        4 => Just(json!("waterline-scheduler")),
        1 => Just(json!("default-scheduler")),
        1 => Just(Value::Null),
    ];
    (
        "[a-z0-9-]{0,10}",
        proptest::collection::vec(container.clone(), 0..3),
        proptest::collection::vec(container, 0..2),
        scheduler,
        proptest::collection::btree_map("[a-z./]{1,8}", "[a-z0-9]{0,6}", 0..3),
    )
        .prop_map(|(uid, containers, init, scheduler, labels)| {
            json!({
                "metadata": {"name": format!("p-{uid}"), "namespace": "fuzz", "uid": uid,
                             "labels": labels,
                             "ownerReferences": [{"kind": "ReplicaSet", "controller": true}]},
                "spec": {"schedulerName": scheduler, "containers": containers,
                         "initContainers": init, "overhead": {"cpu": "10m"}},
            })
        })
}

fn node_object(name: &str) -> Value {
    json!({"metadata": {"name": name, "uid": format!("uid-{name}")},
           "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}}})
}

/// An `ExtenderArgs` with `NodeNames` (nodeCacheCapable) or a `Nodes` list.
fn extender_args() -> impl Strategy<Value = Value> {
    (pod(), proptest::collection::vec(name(), 0..8), any::<bool>()).prop_map(
        |(pod, names, as_list)| {
            if as_list {
                let items: Vec<Value> = names.iter().map(|n| node_object(n)).collect();
                json!({"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": null})
            } else {
                json!({"Pod": pod, "Nodes": null, "NodeNames": names})
            }
        },
    )
}

fn victims() -> impl Strategy<Value = Value> {
    (proptest::collection::vec("[a-z0-9]{0,6}", 0..3), any::<i64>()).prop_map(|(uids, pdb)| {
        let pods: Vec<Value> = uids.iter().map(|u| json!({"metadata": {"uid": u}})).collect();
        json!({"Pods": pods, "NumPDBViolations": pdb})
    })
}

fn preemption_args() -> impl Strategy<Value = Value> {
    (pod(), proptest::collection::btree_map(name(), victims(), 0..4), any::<bool>()).prop_map(
        |(pod, by_node, meta)| {
            let by_node: serde_json::Map<String, Value> = by_node.into_iter().collect();
            if meta {
                // The Meta form carries uids only.
                let meta: serde_json::Map<String, Value> = by_node
                    .into_iter()
                    .map(|(n, v)| {
                        let pods: Vec<Value> = v["Pods"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|p| json!({"UID": p["metadata"]["uid"]}))
                            .collect();
                        (n, json!({"Pods": pods, "NumPDBViolations": v["NumPDBViolations"]}))
                    })
                    .collect();
                json!({"Pod": pod, "NodeNameToVictims": null, "NodeNameToMetaVictims": meta})
            } else {
                json!({"Pod": pod, "NodeNameToVictims": by_node, "NodeNameToMetaVictims": null})
            }
        },
    )
}

fn binding_args() -> impl Strategy<Value = Value> {
    ("[a-z0-9-]{0,8}", name()).prop_map(|(pod, node)| {
        json!({"PodName": format!("p-{pod}"), "PodNamespace": "fuzz", "PodUID": pod, "Node": node})
    })
}

/// What a mutation puts in place of a subtree: every JSON type, numbers past `i64` and
/// `f64`, fractions where integers go, a deep array.
fn wrong_value(rng: &mut TestRng) -> Value {
    match rng.random_range(0..12) {
        0 => json!(-1),
        1 => json!(1.5),
        2 => json!(1e308),
        3 => serde_json::from_str("18446744073709551616").expect("a big number"),
        4 => json!(i64::MIN),
        5 => json!("str"),
        6 => json!([]),
        7 => json!({}),
        8 => json!(true),
        9 => Value::Null,
        10 => nested(rng.random_range(10..200)),
        _ => json!({"unexpected": [1, {"x": null}]}),
    }
}

fn nested(depth: usize) -> Value {
    (0..depth).fold(json!(0), |inner, _| json!([inner]))
}

/// The number of nodes (values) in the tree.
fn count(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(map) => map.values().map(count).sum(),
        _ => 0,
    }
}

fn replace_random(value: &mut Value, rng: &mut TestRng) {
    let k = rng.random_range(0..count(value));
    let replacement = wrong_value(rng);
    set_nth(value, k, replacement);
}

/// Replaces the `k`-th node in pre-order.
fn set_nth(value: &mut Value, k: usize, replacement: Value) {
    fn walk(value: &mut Value, k: &mut usize, replacement: &mut Option<Value>) {
        if replacement.is_none() {
            return;
        }
        if *k == 0 {
            *value = replacement.take().expect("checked");
            return;
        }
        *k -= 1;
        match value {
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, k, replacement)),
            Value::Object(map) => map.values_mut().for_each(|v| walk(v, k, replacement)),
            _ => {}
        }
    }
    walk(value, &mut { k }, &mut Some(replacement));
}

/// A 10 MB string somewhere a string goes.
fn huge_string(value: &mut Value, rng: &mut TestRng) {
    let big = "x".repeat(10_000_000);
    match rng.random_range(0..3) {
        0 => set_at(value, &["Pod", "metadata", "name"], json!(big)),
        1 => set_at(value, &["NodeNames"], json!([big])),
        _ => set_at(value, &["Pod", "metadata", "labels"], json!({"big": big})),
    }
}

/// Sets `path` in `value`, turning whatever stands in its way into an object: an earlier
/// mutation may have made the body, or a part of the path, an array or a number, where
/// `value["Pod"] = …` would panic.
fn set_at(value: &mut Value, path: &[&str], new: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut at = value;
    for key in parents {
        if !at.is_object() {
            *at = json!({});
        }
        at = at.as_object_mut().expect("made an object above").entry(*key).or_insert(json!({}));
    }
    if !at.is_object() {
        *at = json!({});
    }
    at.as_object_mut().expect("made an object above").insert((*last).to_owned(), new);
}

/// Byte-level damage to a serialised body.
fn damage(bytes: &mut Vec<u8>, rng: &mut TestRng) {
    match rng.random_range(0..6) {
        // Cut anywhere: a body that ends early.
        0 => bytes.truncate(rng.random_range(0..=bytes.len())),
        // Invalid UTF-8 inside the text.
        1 => {
            let at = rng.random_range(0..=bytes.len());
            bytes.splice(at..at, [0xff, 0xfe, 0xc3]);
        }
        // A lone surrogate escape in the first string.
        2 => {
            if let Some(at) = bytes.iter().position(|&b| b == b'"') {
                bytes.splice(at + 1..at + 1, b"\\ud800".iter().copied());
            }
        }
        // A NUL byte.
        3 => {
            let at = rng.random_range(0..=bytes.len());
            bytes.insert(at, 0);
        }
        // Random bytes flipped.
        4 => {
            for _ in 0..rng.random_range(1..4) {
                if !bytes.is_empty() {
                    let at = rng.random_range(0..bytes.len());
                    bytes[at] = rng.next_u32() as u8;
                }
            }
        }
        // Deep nesting as the whole body.
        _ => {
            let depth = rng.random_range(100..100_000);
            *bytes = format!("{}{}", "{\"a\":".repeat(depth), "}".repeat(depth)).into_bytes();
        }
    }
}

/// One random request: verb and body.
fn case(runner: &mut TestRunner) -> Result<(&'static str, Vec<u8>)> {
    let verb = VERBS[runner.rng().random_range(0..VERBS.len())];
    let strategy = match verb {
        "filter" | "prioritize" => extender_args().boxed(),
        "preempt" => preemption_args().boxed(),
        _ => binding_args().boxed(),
    };
    let mut value = strategy.new_tree(runner).map_err(anyhow::Error::msg)?.current();
    let rng = runner.rng();
    for _ in 0..rng.random_range(0..3) {
        replace_random(&mut value, rng);
    }
    if rng.random_range(0..100) == 0 {
        huge_string(&mut value, rng);
    }
    let mut bytes = serde_json::to_vec(&value)?;
    if rng.random_range(0..3) == 0 {
        damage(&mut bytes, rng);
    }
    Ok((verb, bytes))
}

// ---- answers -----------------------------------------------------------------------------

/// The candidate names of an `ExtenderArgs` body (for checking what comes back).
fn candidates(body: &Value) -> Vec<String> {
    let names = body["NodeNames"].as_array().into_iter().flatten();
    let items = body["Nodes"]["items"].as_array().into_iter().flatten();
    names
        .filter_map(|n| n.as_str().map(str::to_owned))
        .chain(items.filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned)))
        .collect()
}

/// A 200 answer is the verb's answer shape, naming only nodes it was asked about.
fn check_ok(verb: &str, body: &[u8], answer: &Value) -> Result<()> {
    // `serde_json::Value` refuses a lone surrogate escape (`\ud800`) that the extender may
    // rightly skip unread (a preemption's pod, a node object's other fields; Go's decoder
    // takes it too): then only the answer's shape is checked.
    let asked = serde_json::from_slice::<Value>(body).ok().map(|request| candidates(&request));
    let was_asked = |name: &str| asked.as_ref().is_none_or(|a| a.iter().any(|n| n == name));
    match verb {
        "prioritize" => {
            let list = answer.as_array().context("prioritize: not an array")?;
            for entry in list {
                let host = entry["Host"].as_str().context("prioritize: no Host")?;
                let score = entry["Score"].as_i64().context("prioritize: no Score")?;
                ensure!(was_asked(host), "prioritize: {host} was not asked");
                ensure!((0..=10).contains(&score), "prioritize: score {score}");
            }
        }
        "filter" => {
            ensure!(answer.get("Error").is_some(), "filter: no Error field");
            let passed = answer["NodeNames"].as_array().into_iter().flatten();
            let listed = answer["Nodes"]["items"].as_array().into_iter().flatten();
            let failed = answer["FailedNodes"].as_object().into_iter().flatten().map(|(k, _)| k);
            let names: Vec<String> = passed
                .filter_map(|n| n.as_str().map(str::to_owned))
                .chain(listed.filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned)))
                .chain(failed.cloned())
                .collect();
            for n in names {
                ensure!(was_asked(&n), "filter: {n:?} was not asked");
            }
        }
        "preempt" => {
            let meta = &answer["NodeNameToMetaVictims"];
            ensure!(meta.is_object() || meta.is_null(), "preempt: {answer}");
        }
        _ => ensure!(answer["Error"].is_string(), "bind: no Error field: {answer}"),
    }
    Ok(())
}

struct Extender {
    service: Service,
    http: reqwest::Client,
}

impl Extender {
    fn url(&self, verb: &str) -> String {
        format!("{}/waterline/v1/{verb}", self.service.url())
    }

    /// Sends one body; `Err` when the answer breaks the contract.
    async fn send(&self, verb: &str, body: Vec<u8>) -> Result<u16> {
        let len = body.len();
        let answer = self
            .http
            .post(self.url(verb))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .with_context(|| {
                format!("{verb}: no answer (connection dropped or past {TIMEOUT:?})")
            })?;
        let status = answer.status().as_u16();
        let text = answer.bytes().await.context("reading the answer")?;
        let json: Option<Value> = serde_json::from_slice(&text).ok();
        match status {
            200 => check_ok(verb, &body, json.as_ref().context("200 without JSON")?)?,
            400 => {
                let message = json.as_ref().and_then(|j| j["Error"].as_str()).unwrap_or("");
                ensure!(!message.is_empty(), "400 without an Error message");
            }
            413 => ensure!(len > MAX_BODY, "413 for {len} bytes"),
            other => bail!("{verb}: status {other}: {}", String::from_utf8_lossy(&text)),
        }
        Ok(status)
    }
}

/// A body past `--max-body`, declared (`Content-Length`) or chunked, sent over a raw socket
/// while the answer is read: the extender may answer 413 and close before the body is in,
/// which an HTTP client that writes first and reads after reports as a failed write.
async fn oversize_status(addr: std::net::SocketAddr, chunked: bool) -> Result<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut read, mut write) = stream.into_split();
    let length = MAX_BODY + 1024;
    let framing = if chunked {
        "Transfer-Encoding: chunked".to_owned()
    } else {
        format!("Content-Length: {length}")
    };
    let head = format!(
        "POST /waterline/v1/filter HTTP/1.1\r\nHost: fuzz\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    );
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await?;
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..length.div_ceil(chunk.len()) {
            if chunked {
                write.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await?;
                write.write_all(&chunk).await?;
                write.write_all(b"\r\n").await?;
            } else {
                write.write_all(&chunk).await?;
            }
        }
        std::io::Result::Ok(())
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(TIMEOUT, read.read(&mut buf)).await??;
        ensure!(n > 0, "the connection closed without an answer");
        answer.extend_from_slice(&buf[..n]);
    }
    writer.abort();
    let text = String::from_utf8_lossy(&answer);
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok());
    status.with_context(|| format!("not an HTTP answer: {text}"))
}

fn regressions() -> Result<Vec<(String, Vec<u8>)>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/extender");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
        let path = entry?.path();
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or_default().to_owned();
        let verb = file.split('-').next().unwrap_or_default().to_owned();
        ensure!(VERBS.contains(&verb.as_str()), "{file}: name it <verb>-<what>");
        out.push((verb, std::fs::read(&path)?));
    }
    out.sort();
    Ok(out)
}

fn keep_failure(verb: &str, seed: u64, case: u64, body: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-extender");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{verb}-seed{seed}-case{case}"));
    let _ = std::fs::write(&path, body);
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bodies_get_a_valid_answer_or_a_clear_error() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut nodes = String::from("nodes:\n");
    for i in 0..6 {
        nodes.push_str(&format!(
            "  - {{name: node-{i}, capacity: {{cpu: 8, memory: 32Gi}}, metrics: {{cpu_usage_avg_5m: {}}}}}\n",
            i * 15
        ));
    }
    let nodes = write_file(dir.path(), "nodes.yaml", &nodes);
    let collector = Service::collector(&["--static".into(), nodes]).await?;
    let scorer = Service::scorer(collector.grpc, &[]).await?;
    let service = Launch::new("waterline-extender").addr_flag("--http-addr").spawn(&[
        format!("--scorer-url={}", scorer.url()),
        format!("--max-body={MAX_BODY}"),
        "--scorer-timeout=2s".into(),
    ])?;
    service.wait_ready(Duration::from_secs(20)).await?;
    let http = reqwest::Client::builder().timeout(TIMEOUT).build()?;
    let extender = Extender { service, http };

    let (seed, bytes, cases) = seed_and_cases("fuzz_extender", 200);

    let mut statuses = std::collections::BTreeMap::new();
    // The kept bodies first, then one past the limit, then the random ones.
    for (verb, body) in regressions()? {
        let shown = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        let status =
            extender.send(&verb, body).await.with_context(|| format!("kept {verb} {shown}"))?;
        *statuses.entry(status).or_insert(0) += 1;
    }
    for chunked in [false, true] {
        let status = oversize_status(extender.service.grpc, chunked).await?;
        ensure!(status == 413, "{status} for a body past --max-body (chunked: {chunked})");
    }

    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    for n in 0..cases {
        let (verb, body) = case(&mut runner)?;
        match extender.send(verb, body.clone()).await {
            Ok(status) => *statuses.entry(status).or_insert(0) += 1,
            Err(error) => {
                let kept = keep_failure(verb, seed, n, &body);
                let shown = String::from_utf8_lossy(&body[..body.len().min(400)]).into_owned();
                bail!(
                    "seed {seed} case {n} ({verb}, {} bytes, kept in {}): {error:#}\n{shown}\nextender log:\n{}",
                    body.len(),
                    kept.display(),
                    extender.service.log_text()
                );
            }
        }
    }
    println!("fuzz_extender: answers by status {statuses:?}");
    // Both kinds of answer happened: the generator reaches valid and invalid bodies.
    ensure!(statuses.contains_key(&200) && statuses.contains_key(&400), "{statuses:?}");

    extender.service.check_running()?;
    extender.service.wait_ready(Duration::from_secs(5)).await?;
    let normal = json!({"Pod": {"metadata": {"name": "p", "namespace": "fuzz", "uid": "u"},
                                 "spec": {"schedulerName": "waterline-scheduler"}},
                        "Nodes": null, "NodeNames": ["node-0", "node-1"]});
    ensure!(extender.send("prioritize", serde_json::to_vec(&normal)?).await? == 200);
    let log = extender.service.log_text();
    ensure!(!log.contains("panicked"), "the extender panicked:\n{log}");
    Ok(())
}
