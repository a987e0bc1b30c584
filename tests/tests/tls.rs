//! TLS on the gRPC listeners: the scorer streams from a TLS collector (checking its CA),
//! serves clients over TLS, and with `--tls-client-ca` requires client certificates.

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
        let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
        params.extended_key_usages.push(usage);
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
