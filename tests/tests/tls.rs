//! TLS on the gRPC listeners: the scorer streams from a TLS collector (checking its CA),
//! serves clients over TLS, and with `--tls-client-ca` requires client certificates; the
//! certificates and CAs of every hop are replaced mid-run and picked up without a restart.

use std::time::Duration;

use anyhow::Result;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use waterline_api::v1 as pb;
use waterline_api::v1::scorer_service_client::ScorerServiceClient;
use waterline_tests::procs::{Service, free_port, loopback, write_file};

struct Pki {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Result<Pki> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // Distinct subject names: OpenSSL (curl) takes a leaf whose subject equals its
        // issuer's for self-signed.
        params.distinguished_name.push(DnType::CommonName, "waterline test CA");
        let key = KeyPair::generate()?;
        let ca_pem = params.self_signed(&key)?.pem();
        Ok(Pki { ca_pem, issuer: Issuer::new(params, key) })
    }

    /// (certificate PEM, key PEM) for `localhost`, for servers or clients.
    fn leaf(&self, usage: ExtendedKeyUsagePurpose) -> Result<(String, String)> {
        self.leaf_for(&[usage])
    }

    /// (certificate PEM, key PEM) for `localhost` with these usages (a service that is
    /// server and client, as cert-manager issues with both usages).
    fn leaf_for(&self, usages: &[ExtendedKeyUsagePurpose]) -> Result<(String, String)> {
        let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
        params.extended_key_usages.extend_from_slice(usages);
        params.distinguished_name.push(DnType::CommonName, "localhost");
        let key = KeyPair::generate()?;
        Ok((params.signed_by(&key, &self.issuer)?.pem(), key.serialize_pem()))
    }
}

async fn tls_client(
    addr: std::net::SocketAddr,
    tls: ClientTlsConfig,
) -> Result<ScorerServiceClient<Channel>> {
    let channel = Channel::from_shared(format!("https://{addr}"))?
        .tls_config(tls.domain_name("localhost"))?
        .connect_timeout(Duration::from_secs(3))
        .connect()
        .await?;
    Ok(ScorerServiceClient::new(channel))
}

fn score_request() -> pb::ScoreRequest {
    pb::ScoreRequest {
        pod: Some(pb::PodInfo { name: "p".into(), uid: "u".into(), ..Default::default() }),
        node_names: vec!["n1".into()],
        explain: false,
        ..Default::default()
    }
}

#[tokio::test]
async fn tls_end_to_end_with_client_certificates() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let pki = Pki::new()?;
    let (server_cert, server_key) = pki.leaf(ExtendedKeyUsagePurpose::ServerAuth)?;
    let (client_cert, client_key) = pki.leaf(ExtendedKeyUsagePurpose::ClientAuth)?;
    let ca = write_file(dir.path(), "ca.pem", &pki.ca_pem);
    let cert = write_file(dir.path(), "server.pem", &server_cert);
    let key = write_file(dir.path(), "server.key", &server_key);
    let nodes = write_file(
        dir.path(),
        "nodes.yaml",
        "nodes:\n  - {name: n1, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: 20}}\n",
    );

    let tls_args = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> =
            ["--tls-cert", &cert, "--tls-key", &key].iter().map(|s| s.to_string()).collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let collector = Service::collector(&tls_args(&["--static", &nodes])).await?;
    let collector_url = format!("https://localhost:{}", collector.grpc.port());
    let scorer = Service::spawn_on(
        "waterline-scorer",
        loopback(free_port()),
        loopback(free_port()),
        &tls_args(&[
            "--collector-url",
            &collector_url,
            "--collector-ca",
            &ca,
            "--tls-client-ca",
            &ca,
        ]),
    )?;
    // Ready means the scorer streamed its first snapshot over TLS, verified against the CA.
    scorer.wait_ready(Duration::from_secs(20)).await?;

    let trusted = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&pki.ca_pem));
    let mut client = tls_client(
        scorer.grpc,
        trusted.clone().identity(Identity::from_pem(&client_cert, &client_key)),
    )
    .await?;
    let scores = client.score(score_request()).await?.into_inner().scores;
    assert_eq!(scores.len(), 1);

    // Without a client certificate the handshake (or the first call) fails.
    let anonymous = match tls_client(scorer.grpc, trusted).await {
        Ok(mut client) => client.score(score_request()).await.is_err(),
        Err(_) => true,
    };
    assert!(anonymous, "a client without a certificate was served");

    // Plaintext against a TLS listener fails.
    let plaintext = match Channel::from_shared(scorer.url())?.connect().await {
        Ok(channel) => ScorerServiceClient::new(channel).score(score_request()).await.is_err(),
        Err(_) => true,
    };
    assert!(plaintext, "a plaintext client was served by a TLS listener");
    Ok(())
}

/// `--admin-tls` serves /metrics, /live and /ready over HTTPS with the same certificate.
#[tokio::test]
async fn admin_port_speaks_https_when_asked() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let pki = Pki::new()?;
    let (server_cert, server_key) = pki.leaf(ExtendedKeyUsagePurpose::ServerAuth)?;
    let ca = write_file(dir.path(), "ca.pem", &pki.ca_pem);
    let cert = write_file(dir.path(), "server.pem", &server_cert);
    let key = write_file(dir.path(), "server.key", &server_key);
    let args: Vec<String> =
        ["--tls-cert", &cert, "--tls-key", &key, "--admin-tls", "--synthetic-nodes", "3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let collector = Service::spawn("waterline-collector", &args)?;
    let url = format!("https://localhost:{}/ready", collector.admin.port());
    let ready = waterline_tests::prometheus::wait_until(Duration::from_secs(20), || {
        let (url, ca) = (url.clone(), ca.clone());
        async move {
            let out = tokio::process::Command::new("curl")
                .args(["-fsS", "--cacert", &ca, "--resolve"])
                .arg(format!(
                    "localhost:{}:127.0.0.1",
                    url.split(':').nth(2).unwrap_or("0").trim_end_matches("/ready")
                ))
                .arg(&url)
                .output()
                .await?;
            anyhow::ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        }
    })
    .await?;
    assert_eq!(ready.trim(), "ready");
    // Plain HTTP on the TLS port gets no answer.
    let plain = reqwest::get(format!("http://{}/ready", collector.admin)).await;
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true));
    Ok(())
}

/// One generation of a service's TLS files: its CA, and a certificate (server and client
/// usages) with its key.
struct Generation {
    pki: Pki,
    cert: String,
    key: String,
}

impl Generation {
    fn new() -> Result<Generation> {
        let pki = Pki::new()?;
        let usages = [ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let (cert, key) = pki.leaf_for(&usages)?;
        Ok(Generation { pki, cert, key })
    }

    /// Writes the files the way the kubelet updates a mounted Secret: each new file is
    /// complete before it replaces the old one (rename).
    fn install(&self, dir: &std::path::Path) -> Result<()> {
        for (name, text) in
            [("ca.pem", &self.pki.ca_pem), ("tls.crt", &self.cert), ("tls.key", &self.key)]
        {
            let partial = dir.join(format!(".{name}.new"));
            std::fs::write(&partial, text)?;
            std::fs::rename(&partial, dir.join(name))?;
        }
        Ok(())
    }

    fn client(&self) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.pki.ca_pem))
            .identity(Identity::from_pem(&self.cert, &self.key))
    }
}

/// Sum of the samples of one metric family whose labels contain `labels`.
async fn metric_sum(service: &Service, family: &str, labels: &str) -> Result<f64> {
    let text = service.metrics().await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// A Score over a fresh connection (a new TLS handshake): its answer, or the error.
async fn score_over_new_connection(
    addr: std::net::SocketAddr,
    tls: ClientTlsConfig,
) -> Result<Vec<pb::NodeScore>> {
    // Bounded: a refused handshake must be an error, not a hang.
    tokio::time::timeout(Duration::from_secs(10), async {
        let mut client = tls_client(addr, tls).await?;
        Ok(client.score(score_request()).await?.into_inner().scores)
    })
    .await
    .map_err(|_| anyhow::anyhow!("no answer within 10 s"))?
}

/// `prioritize` over HTTPS with curl (an independent TLS client): the answer's scores of
/// n1 and n2, or curl's error.
async fn prioritize(extender: &Service, dir: &std::path::Path) -> Result<(i64, i64)> {
    let port = extender.grpc.port();
    let body = serde_json::json!({
        "Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
                "spec": {"schedulerName": "waterline-scheduler", "containers": []}},
        "Nodes": null,
        "NodeNames": ["n1", "n2"],
    });
    let file = |name: &str| dir.join(name).display().to_string();
    let out = tokio::process::Command::new("curl")
        .args(["-fsS", "--max-time", "10", "--cacert", &file("ca.pem")])
        .args(["--cert", &file("tls.crt"), "--key", &file("tls.key")])
        .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
        .args(["-H", "Content-Type: application/json", "--data", &body.to_string()])
        .arg(format!("https://localhost:{port}/waterline/v1/prioritize"))
        .output()
        .await?;
    anyhow::ensure!(out.status.success(), "curl: {}", String::from_utf8_lossy(&out.stderr));
    let answer: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)?;
    let score = |host: &str| {
        answer.iter().find(|h| h["Host"] == host).and_then(|h| h["Score"].as_i64()).unwrap_or(-1)
    };
    Ok((score("n1"), score("n2")))
}

/// Every hop with mTLS (extender → scorer → collector, a client → scorer, curl →
/// extender); then a new CA and new certificates replace the files of every process while
/// they run. New connections use the new ones — each client (the scorer towards the
/// collector, the extender towards the scorer) is shown by restarting its peer, which makes
/// it dial again with what it reloaded — and a client trusting only the old CA is refused
/// with a handshake error, not a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_replaced_mid_run_are_used_without_a_restart() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (old, new) = (Generation::new()?, Generation::new()?);
    old.install(dir.path())?;
    let file = |name: &str| dir.path().join(name).display().to_string();
    let nodes = write_file(
        dir.path(),
        "nodes.yaml",
        "nodes:\n  - {name: n1, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: 10}}\n  - {name: n2, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: 90}}\n",
    );
    let (ca, cert, key) = (file("ca.pem"), file("tls.crt"), file("tls.key"));
    let listener = |extra: &[&str]| -> Vec<String> {
        let tls = ["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", &ca];
        let reload = ["--tls-reload-interval", "200ms"];
        tls.iter().chain(&reload).chain(extra).map(|s| s.to_string()).collect()
    };
    let mut collector = Service::collector(&listener(&["--static", &nodes])).await?;
    let collector_url = format!("https://localhost:{}", collector.grpc.port());
    let peer = ["--collector-ca", &ca, "--collector-cert", &cert, "--collector-key", &key];
    let mut scorer_args = vec!["--collector-url", &collector_url];
    scorer_args.extend(peer);
    let mut scorer = Service::spawn("waterline-scorer", &listener(&scorer_args))?;
    scorer.wait_ready(Duration::from_secs(20)).await?;
    let scorer_url = format!("https://localhost:{}", scorer.grpc.port());
    let extender_args = [
        "--scorer-url",
        &scorer_url,
        "--scorer-ca",
        &ca,
        "--scorer-cert",
        &cert,
        "--scorer-key",
        &key,
    ];
    let extender = waterline_tests::procs::Launch::new("waterline-extender")
        .addr_flag("--http-addr")
        .spawn(&listener(&extender_args))?;
    extender.wait_ready(Duration::from_secs(20)).await?;

    // Before: every hop works with the old generation. n1 (10 %) scores above n2 (90 %),
    // which only the scorer's answer gives (a neutral fallback scores both alike).
    let before = waterline_tests::prometheus::wait_until(Duration::from_secs(20), || async {
        let (n1, n2) = prioritize(&extender, dir.path()).await?;
        anyhow::ensure!(n1 > n2, "n1 {n1}, n2 {n2}");
        Ok((n1, n2))
    })
    .await?;
    assert_eq!(score_over_new_connection(scorer.grpc, old.client()).await?.len(), 1);

    new.install(dir.path())?;
    // Each process loads its listener's and its client's files (the collector has no client).
    for (service, reloads) in [(&collector, 1.0), (&scorer, 2.0), (&extender, 2.0)] {
        waterline_tests::prometheus::wait_until(Duration::from_secs(20), || async {
            let ok = metric_sum(service, "waterline_tls_reload_total", "result=\"ok\"").await?;
            anyhow::ensure!(ok >= reloads, "{}: {ok} reloads", service.name());
            Ok(())
        })
        .await?;
        let errors = metric_sum(service, "waterline_tls_reload_total", "result=\"error\"").await?;
        assert_eq!(errors, 0.0, "{}: whole files were written, none may fail", service.name());
        service.check_running()?;
    }

    // The listeners: a new connection trusting the new CA, with a new client certificate,
    // is served (scorer directly; collector through ListNodes).
    assert_eq!(score_over_new_connection(scorer.grpc, new.client()).await?.len(), 1);
    let channel = Channel::from_shared(collector_url.clone())?
        .tls_config(new.client().domain_name("localhost"))?
        .connect()
        .await?;
    let listed = waterline_api::v1::collector_service_client::CollectorServiceClient::new(channel)
        .list_nodes(pb::ListNodesRequest::default())
        .await?;
    assert_eq!(listed.into_inner().nodes.len(), 2);
    // A client trusting only the old CA now meets a certificate it cannot verify; one
    // presenting the old client certificate is refused by the new client CA.
    let old_ca = score_over_new_connection(scorer.grpc, old.client()).await;
    let error = old_ca.expect_err("a client trusting only the old CA was served").to_string();
    assert!(!error.contains("no answer within"), "the handshake hung instead of failing: {error}");
    let old_identity = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&new.pki.ca_pem))
        .identity(Identity::from_pem(&old.cert, &old.key));
    let refused = score_over_new_connection(scorer.grpc, old_identity).await;
    let error = refused.expect_err("the old client certificate was accepted").to_string();
    assert!(!error.contains("no answer within"), "{error}");
    // curl towards the extender with the new files.
    assert!(prioritize(&extender, dir.path()).await?.0 > 0);

    // The clients: restarting the collector makes the scorer dial it again, with the CA and
    // client certificate it reloaded; restarting the scorer does the same for the extender.
    let messages = scorer.metric_value("waterline_collector_messages_total").await?;
    collector.restart()?;
    collector.wait_ready(Duration::from_secs(20)).await?;
    waterline_tests::prometheus::wait_until(Duration::from_secs(20), || async {
        let now = scorer.metric_value("waterline_collector_messages_total").await?;
        let connected = scorer.metric_value("waterline_collector_connected").await?;
        anyhow::ensure!(
            now > messages && connected == 1.0,
            "messages {now}, connected {connected}"
        );
        Ok(())
    })
    .await?;
    scorer.restart()?;
    scorer.wait_ready(Duration::from_secs(20)).await?;
    let after = waterline_tests::prometheus::wait_until(Duration::from_secs(20), || async {
        let (n1, n2) = prioritize(&extender, dir.path()).await?;
        anyhow::ensure!(n1 > n2, "n1 {n1}, n2 {n2}");
        Ok((n1, n2))
    })
    .await?;
    assert_eq!(after, before, "the same snapshot scores the same after the rotation");
    Ok(())
}
