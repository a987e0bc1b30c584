//! `kubectl-waterline` against a real collector (the synthetic cluster `make run` uses) and a
//! real scorer on loopback: every figure it prints is checked against the services' own
//! answers to the same calls. Needs the binaries: `cargo build -p waterline-collector -p
//! waterline-scorer --bins`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use waterline_api::v1 as pb;
use waterline_tests::procs::{Service, free_port, write_file};
use waterline_tests::prometheus::wait_until;

const NODES: usize = 8;

struct Cluster {
    collector: Service,
    scorer: Service,
}

/// A collector with a synthetic cluster that holds still (its usage moves once an hour, so
/// the tool's answers and the test's own calls see the same numbers) and a scorer.
async fn cluster() -> Result<Cluster> {
    let args: Vec<String> = ["--synthetic-nodes", &NODES.to_string(), "--synthetic-interval", "1h"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let collector = Service::collector(&args).await?;
    let scorer = Service::scorer(collector.grpc, &[]).await?;
    Ok(Cluster { collector, scorer })
}

impl Cluster {
    fn cli(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_kubectl-waterline"))
            .args(["--scorer", &self.scorer.grpc.to_string()])
            .args(["--collector", &self.collector.url()])
            .args(args)
            .env_remove("NO_COLOR")
            .output()
            .expect("run kubectl-waterline")
    }

    /// Stdout of a successful run; fails with its stderr otherwise.
    fn ok(&self, args: &[&str]) -> Result<String> {
        let out = self.cli(args);
        if !out.status.success() {
            bail!("{args:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8(out.stdout)?)
    }

    fn json(&self, args: &[&str]) -> Result<Value> {
        let mut all = vec!["-o", "json"];
        all.extend_from_slice(args);
        let text = self.ok(&all)?;
        serde_json::from_str(&text).with_context(|| format!("not JSON: {text}"))
    }

    async fn node_names(&self) -> Result<Vec<String>> {
        let listing = self
            .collector
            .collector_client()
            .await?
            .list_nodes(pb::ListNodesRequest::default())
            .await?
            .into_inner();
        let mut names: Vec<String> = listing.nodes.into_iter().map(|n| n.name).collect();
        names.sort();
        Ok(names)
    }

    /// The scorer's own Evaluate and Score (explain) for `pod`.
    async fn scorer_answers(
        &self,
        pod: &pb::PodInfo,
        names: &[String],
    ) -> Result<(pb::EvaluateResponse, BTreeMap<String, pb::NodeScore>)> {
        let mut client = self.scorer.scorer_client().await?;
        let evaluated = client
            .evaluate(pb::EvaluateRequest {
                policy: String::new(),
                pod: Some(pod.clone()),
                node_names: vec![],
                all_nodes: true,
            })
            .await?
            .into_inner();
        let scored = client
            .score(pb::ScoreRequest {
                policy: String::new(),
                pod: Some(pod.clone()),
                node_names: names.to_vec(),
                explain: true,
                scores_only: false,
            })
            .await?
            .into_inner();
        Ok((evaluated, scored.scores.into_iter().map(|s| (s.node_name.clone(), s)).collect()))
    }
}

/// The pod the tool sends for flags only (its identity defaults, pod.rs).
fn flag_pod(name: &str, cpu_millis: i64, memory_bytes: i64) -> pb::PodInfo {
    pb::PodInfo {
        namespace: "default".into(),
        name: name.into(),
        uid: "waterline-cli-probe".into(),
        cpu_request_millis: cpu_millis,
        memory_request_bytes: memory_bytes,
        ..Default::default()
    }
}

fn f(value: &Value) -> f64 {
    value.as_f64().unwrap_or(f64::NAN)
}

/// Equal but for the last bits JSON's decimal round trip may change.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn top_shows_every_node_as_the_scorer_scores_it() -> Result<()> {
    let cluster = cluster().await?;
    let names = cluster.node_names().await?;
    assert_eq!(names.len(), NODES);

    let report = cluster.json(&["top", "--sort", "score", "--cpu", "1", "--memory", "2Gi"])?;
    let rows = report["nodes"].as_array().context("nodes")?;
    let listed: BTreeSet<String> =
        rows.iter().map(|r| r["node"].as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(listed, names.iter().cloned().collect::<BTreeSet<_>>());

    let pod = flag_pod("waterline-cli-probe", 1000, 2 << 30);
    let (evaluated, scores) = cluster.scorer_answers(&pod, &names).await?;
    for row in rows {
        let node = row["node"].as_str().unwrap_or_default();
        let own = &scores[node];
        assert_eq!(row["score"].as_i64(), Some(i64::from(own.score)), "{node}");
        assert_eq!(
            row["rejected"].as_str(),
            evaluated.rejected.get(node).map(String::as_str),
            "{node}"
        );
        let cpu_term =
            own.terms.iter().find(|t| t.metric == "cpu_usage_avg_5m").context("cpu term")?;
        let cpu = &row["cpu"];
        assert!(close(f(&cpu["predicted_percent"]), cpu_term.predicted_percent), "{node}: {cpu}");
        let sum =
            f(&cpu["observed_percent"]) + f(&cpu["ledger_percent"]) + f(&cpu["incoming_percent"]);
        assert!((sum - f(&cpu["predicted_percent"])).abs() < 1e-6, "{node}: {cpu}");
        assert_eq!(row["terms"].as_array().map(Vec::len), Some(own.terms.len()));
        assert_eq!(row["ledger_pods"].as_u64(), Some(0));
        let age = f(&row["sample_age_seconds"]);
        assert!((0.0..60.0).contains(&age), "{node}: a synthetic sample is fresh, not {age}s old");
    }

    // --sort score: ranked nodes first, ranks never decreasing, each rank the count of
    // better-scored feasible nodes plus one.
    let ranks: Vec<Option<u64>> = rows.iter().map(|r| r["rank"].as_u64()).collect();
    let ranked: Vec<u64> = ranks.iter().map_while(|r| *r).collect();
    assert!(ranks[ranked.len()..].iter().all(Option::is_none), "{ranks:?}");
    assert!(ranked.windows(2).all(|w| w[0] <= w[1]), "{ranks:?}");
    assert_eq!(ranked.len(), NODES - evaluated.rejected.len());
    for row in rows.iter().take(ranked.len()) {
        let score = row["score"].as_i64().unwrap_or(-1);
        let better =
            rows.iter().filter(|r| r["rank"].is_u64() && r["score"].as_i64() > Some(score)).count();
        assert_eq!(row["rank"].as_u64(), Some(better as u64 + 1), "{row}");
    }

    // Through a pipe: plain, aligned, one line per node.
    let text = cluster.ok(&["top"])?;
    assert!(!text.contains('\x1b'), "no colour through a pipe: {text:?}");
    let table: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("NODE ")).collect();
    assert_eq!(table.len(), 1 + NODES, "{text}");
    for name in &names {
        assert_eq!(
            table.iter().filter(|l| l.starts_with(name.as_str())).count(),
            1,
            "{name} in {text}"
        );
    }
    // Hottest first: the PRED% columns' maximum never rises down the table.
    let header: Vec<&str> = table[0].split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
    let cpu_pred = header.iter().position(|c| *c == "CPU PRED%").context("CPU PRED% column")?;
    let mem_pred = header.iter().position(|c| *c == "MEM PRED%").context("MEM PRED% column")?;
    let hottest: Vec<f64> = table[1..]
        .iter()
        .map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            cells[cpu_pred]
                .parse::<f64>()
                .unwrap_or(0.0)
                .max(cells[mem_pred].parse().unwrap_or(0.0))
        })
        .collect();
    assert!(hottest.windows(2).all(|w| w[0] >= w[1]), "{hottest:?}\n{text}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_gives_the_scorers_verdicts_for_a_manifest_and_for_flags() -> Result<()> {
    let cluster = cluster().await?;
    let names = cluster.node_names().await?;
    let dir = tempfile::tempdir()?;
    let manifest = write_file(
        dir.path(),
        "pod.yaml",
        "apiVersion: v1
kind: Pod
metadata: {name: web-7, namespace: shop, uid: u-web-7, labels: {app: web}}
spec:
  containers:
    - name: web
      resources: {requests: {cpu: 1500m, memory: 3Gi}}
    - name: sidecar
      resources: {requests: {cpu: 500m, memory: 1Gi}}
",
    );
    let report = cluster.json(&["explain", &manifest])?;
    assert_eq!(report["pod"]["cpu_request_millis"].as_i64(), Some(2000));
    assert_eq!(report["pod"]["memory_request_bytes"].as_i64(), Some(4 << 30));
    let pod = pb::PodInfo {
        namespace: "shop".into(),
        name: "web-7".into(),
        uid: "u-web-7".into(),
        labels: [("app".to_string(), "web".to_string())].into(),
        cpu_request_millis: 2000,
        memory_request_bytes: 4 << 30,
        scheduler_name: "default-scheduler".into(),
        ..Default::default()
    };
    let (evaluated, scores) = cluster.scorer_answers(&pod, &names).await?;
    let verdicts = report["nodes"].as_array().context("nodes")?;
    assert_eq!(verdicts.len(), NODES);
    for verdict in verdicts {
        let node = verdict["node"].as_str().unwrap_or_default();
        let reason = evaluated.rejected.get(node);
        assert_eq!(verdict["feasible"].as_bool(), Some(reason.is_none()), "{node}");
        assert_eq!(verdict["reason"].as_str(), reason.map(String::as_str), "{node}");
        assert_eq!(verdict["score"].as_i64(), Some(i64::from(scores[node].score)), "{node}");
        let terms = verdict["terms"].as_array().context("terms")?;
        let own: Vec<&str> = scores[node].terms.iter().map(|t| t.metric.as_str()).collect();
        let shown: Vec<&str> =
            terms.iter().map(|t| t["metric"].as_str().unwrap_or_default()).collect();
        assert_eq!(shown, own, "{node}");
        for (term, own) in terms.iter().zip(&scores[node].terms) {
            assert!(close(f(&term["incoming_percent"]), own.incoming_percent), "{node}: {term}");
            assert!(close(f(&term["curve_score"]), own.curve_score), "{node}: {term}");
        }
    }
    assert_eq!(report["rejected"].as_u64(), Some(evaluated.rejected.len() as u64));
    // The estimate as the scorer priced it: 2000 m × 0.85, by the factor.
    assert_eq!(report["estimate"]["cpu_millis"].as_i64(), Some(1700));
    assert_eq!(report["estimate"]["cpu"]["kind"].as_str(), Some("factor"));
    assert_eq!(report["estimate"]["workload"], Value::Null);

    // 500 cores fit nowhere: every node rejected with Filter's own wording.
    let huge = cluster.json(&["explain", "--cpu", "500"])?;
    let verdicts = huge["nodes"].as_array().context("nodes")?;
    assert_eq!(verdicts.len(), NODES);
    for verdict in verdicts {
        assert_eq!(verdict["feasible"].as_bool(), Some(false), "{verdict}");
        let reason = verdict["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("cpu_usage_avg_5m") && reason.contains("> 65%"), "{reason}");
    }

    // The table for one node: its line, then one line per further metric.
    let node = &names[1];
    let text = cluster.ok(&["explain", "--cpu", "2", "--memory", "4Gi", "--node", node])?;
    assert!(
        text.starts_with("pod default/waterline-cli-explain: requests cpu 2 memory 4Gi"),
        "{text}"
    );
    // 2000 m × 0.85 and 4 GiB × 0.70 = 2.8 GiB: nothing learned in a synthetic cluster.
    assert!(
        text.lines().any(|l| l
            == "estimate: cpu 1700m by the policy's factor 0.85; memory 2.8Gi by the policy's factor 0.70"),
        "{text}"
    );
    let table: Vec<&str> = text.lines().skip_while(|l| !l.contains("RANK")).collect();
    assert_eq!(table.len(), 1 + scores[node].terms.len(), "{text}");
    assert!(table[1].contains(node.as_str()), "{text}");
    for term in &scores[node].terms {
        assert_eq!(
            table.iter().filter(|l| l.contains(&format!(" {} ", term.metric))).count(),
            1,
            "{text}"
        );
    }

    // A node the scorer does not know: shown as such, never rejected, outside the counts.
    let unknown = cluster.json(&["explain", "--cpu", "1", "--node", "no-such-node"])?;
    let only = unknown["nodes"].as_array().context("nodes")?;
    assert_eq!(only.len(), 1, "{unknown}");
    assert_eq!(
        (only[0]["known_to_scorer"].as_bool(), only[0]["feasible"].as_bool()),
        (Some(false), Some(true))
    );
    let counted =
        unknown["feasible"].as_u64().unwrap_or(0) + unknown["rejected"].as_u64().unwrap_or(0);
    assert_eq!(counted, NODES as u64, "{unknown}");

    // A bad manifest names the field and the line, and nothing is asked of the scorer.
    let bad = write_file(
        dir.path(),
        "bad.yaml",
        "kind: Pod\nspec:\n  containers:\n    - resources: {requests: {cpu: lots}}\n",
    );
    let out = cluster.cli(&["explain", &bad]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("spec.containers[0].resources.requests.cpu") && stderr.contains("line 4"),
        "{stderr}"
    );
    Ok(())
}

/// A collector without Prometheus learns nothing: the table is empty, and says why.
#[tokio::test(flavor = "multi_thread")]
async fn learned_lists_the_collectors_table() -> Result<()> {
    let cluster = cluster().await?;
    let text = cluster.ok(&["learned"])?;
    assert!(text.contains(": 0 workloads learned\n"), "{text}");
    assert!(text.contains("priced by the policy's factors"), "{text}");
    let report = cluster.json(&["learned"])?;
    assert_eq!(report["workloads"].as_array().map(Vec::len), Some(0), "{report}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn ledger_shows_a_reserve_until_it_hands_over() -> Result<()> {
    let cluster = cluster().await?;
    let names = cluster.node_names().await?;
    let node = names[2].clone();
    let pod = pb::PodInfo {
        namespace: "default".into(),
        name: "batch-1".into(),
        uid: "u-batch-1".into(),
        cpu_request_millis: 4000,
        memory_request_bytes: 8 << 30,
        ..Default::default()
    };
    let reserve = pb::ReserveRequest {
        pod: Some(pod.clone()),
        node_name: node.clone(),
        provisional_ttl: None,
    };
    cluster.scorer.scorer_client().await?.reserve(reserve).await?;

    // The scorer forwards the Reserve to the collector; wait until the collector lists it.
    let report = wait_until(Duration::from_secs(15), || async {
        let report = cluster.json(&["ledger", &node])?;
        match report["placements"].as_array() {
            Some(placements) if !placements.is_empty() => Ok(report),
            _ => bail!("the reserve never reached the collector's ledger: {report}"),
        }
    })
    .await?;
    let listing = cluster
        .collector
        .collector_client()
        .await?
        .list_nodes(pb::ListNodesRequest { node_names: vec![node.clone()] })
        .await?
        .into_inner();
    let entry =
        listing.ledger.iter().find(|e| e.pod_uid == "u-batch-1").context("collector's entry")?;
    let placements = report["placements"].as_array().context("placements")?;
    assert_eq!(placements.len(), 1);
    let placement = &placements[0];
    assert_eq!(placement["uid"], "u-batch-1");
    assert_eq!(placement["source"], "reserve");
    assert_eq!(placement["cpu_millis"].as_i64(), Some(entry.cpu_millis));
    assert_eq!(placement["memory_bytes"].as_i64(), Some(entry.memory_bytes));
    let by_metric =
        placement["hands_over_in_seconds_by_metric"].as_object().context("by metric")?;
    assert_eq!(by_metric.len(), entry.absorb_remaining_by_metric.len());
    let longest = by_metric.values().map(f).fold(0.0, f64::max);
    assert!(
        close(f(&placement["hands_over_in_seconds"]), longest),
        "the longest metric's window: {placement}"
    );
    assert!(longest > 60.0, "a fresh placement counts for minutes, not {longest}s");
    assert!((0.0..30.0).contains(&f(&placement["placed_seconds_ago"])), "{placement}");

    let text = cluster.ok(&["ledger", &node])?;
    let line =
        text.lines().find(|l| l.starts_with("default/batch-1")).with_context(|| text.clone())?;
    assert!(line.contains("reserve") && line.contains(" ago"), "{line}");
    let other = cluster.ok(&["ledger", &names[3]])?;
    assert!(other.contains("no recent placements"), "{other}");
    let unknown = cluster.ok(&["ledger", "no-such-node"])?;
    assert!(unknown.contains("not a node the collector knows"), "{unknown}");

    // top sees it too, once the scorer has heard the placement back from the collector.
    wait_until(Duration::from_secs(15), || async {
        let top = cluster.json(&["top"])?;
        let rows = top["nodes"].as_array().context("nodes")?;
        let row = rows.iter().find(|r| r["node"] == node.as_str()).context("node in top")?;
        if row["ledger_pods"].as_u64() == Some(1) && f(&row["cpu"]["ledger_percent"]) > 0.0 {
            Ok(())
        } else {
            bail!("top never showed the placement: {row}")
        }
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_scorer_is_named_with_the_way_to_start_one() -> Result<()> {
    let address = format!("127.0.0.1:{}", free_port());
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-waterline"))
        .args(["--scorer", &address, "explain", "--cpu", "1"])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("cannot reach the scorer at http://{address}")), "{stderr}");
    assert!(stderr.contains("make run"), "{stderr}");
    assert!(out.stdout.is_empty());
    Ok(())
}

/// Colour and the width limit through a real pseudo-terminal, and neither through a pipe.
#[tokio::test(flavor = "multi_thread")]
async fn colour_and_width_on_a_terminal_only() -> Result<()> {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    use std::io::Read;

    let cluster = cluster().await?;
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let name = ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY,
        rustix::fs::Mode::empty(),
    )?;
    const COLUMNS: usize = 140;
    rustix::termios::tcsetwinsize(
        &slave,
        rustix::termios::Winsize { ws_row: 50, ws_col: COLUMNS as u16, ws_xpixel: 0, ws_ypixel: 0 },
    )?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-waterline"))
        .args([
            "--scorer",
            &cluster.scorer.grpc.to_string(),
            "--collector",
            &cluster.collector.url(),
        ])
        .args(["top", "--cpu", "12"])
        .env_remove("NO_COLOR")
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(slave))
        .spawn()?;
    // Only the child holds the terminal now: reading ends (EIO) once it exits.
    let mut master = std::fs::File::from(master);
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match master.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => break,
            Err(e) => return Err(e.into()),
        }
    }
    let status = child.wait()?;
    let text = String::from_utf8(raw)?.replace('\r', "");
    assert!(status.success(), "{text}");
    assert!(text.contains("\x1b[1mNODE\x1b[0m"), "bold header on a terminal: {text:?}");
    assert!(
        text.contains("\x1b[31mrejected: "),
        "12 cores are rejected somewhere, in red: {text:?}"
    );
    for line in text.lines().skip_while(|l| !l.contains("NODE")) {
        let visible = strip_ansi(line);
        assert!(visible.chars().count() <= COLUMNS, "wider than the terminal: {visible:?}");
    }
    assert!(text.contains('…'), "a rejection reason was cut to fit: {text}");

    let piped = cluster.ok(&["top", "--cpu", "12"])?;
    assert!(!piped.contains('\x1b'), "{piped:?}");
    assert!(!piped.contains('…'), "{piped}");
    assert!(
        piped.lines().any(|l| l.chars().count() > COLUMNS),
        "through a pipe nothing is cut: {piped}"
    );
    let forced = cluster.ok(&["top", "--cpu", "12", "--color", "always"])?;
    assert!(forced.contains("\x1b[1mNODE\x1b[0m"), "{forced:?}");
    Ok(())
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A CA and one `localhost` certificate good for both ends, as rcgen makes them (the same
/// shape as tests/tests/tls.rs).
fn pki(dir: &std::path::Path) -> Result<[String; 3]> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "waterline-cli test CA");
    let ca_key = KeyPair::generate()?;
    let ca_pem = ca.self_signed(&ca_key)?.pem();
    let issuer = Issuer::new(ca, ca_key);
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()])?;
    leaf.extended_key_usages
        .extend([ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth]);
    leaf.distinguished_name.push(DnType::CommonName, "localhost");
    let key = KeyPair::generate()?;
    let cert = leaf.signed_by(&key, &issuer)?.pem();
    Ok([
        write_file(dir, "ca.pem", &ca_pem),
        write_file(dir, "leaf.pem", &cert),
        write_file(dir, "leaf.key", &key.serialize_pem()),
    ])
}

/// An https:// scorer that requires client certificates: answered with --scorer-ca and
/// --scorer-cert/--scorer-key, refused without the certificate, and an https:// address
/// without a CA is an error naming the flag.
#[tokio::test(flavor = "multi_thread")]
async fn a_tls_scorer_with_client_certificates() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let [ca, cert, key] = pki(dir.path())?;
    let args: Vec<String> = ["--synthetic-nodes", "3"].iter().map(|s| s.to_string()).collect();
    let collector = Service::collector(&args).await?;
    let tls: Vec<String> = ["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", &ca]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let scorer = Service::scorer(collector.grpc, &tls).await?;
    let url = format!("https://localhost:{}", scorer.grpc.port());
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kubectl-waterline"))
            .args(["--scorer", &url])
            .args(extra)
            .args(["-o", "json", "explain", "--cpu", "1"])
            .output()
    };

    let out = run(&["--scorer-ca", &ca, "--scorer-cert", &cert, "--scorer-key", &key])?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["nodes"].as_array().map(Vec::len), Some(3), "{report}");

    let out = run(&["--scorer-ca", &ca])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "no client certificate, no answer");
    assert!(stderr.contains(&url), "{stderr}");
    assert!(stderr.contains("--scorer-cert and --scorer-key"), "{stderr}");

    let out = run(&[])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--scorer-ca"), "{stderr}");
    Ok(())
}
