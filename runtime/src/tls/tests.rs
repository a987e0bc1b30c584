use super::*;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

fn ca(name: &str) -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    Ca { issuer: Issuer::new(params, key), pem }
}

/// (certificate PEM, key PEM) for localhost, valid until `not_after` (Unix seconds).
fn leaf(ca: &Ca, not_after: i64) -> (String, String) {
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.not_after = rcgen::date_time_ymd(1970, 1, 1) + Duration::from_secs(not_after as u64);
    let key = KeyPair::generate().unwrap();
    (params.signed_by(&key, &ca.issuer).unwrap().pem(), key.serialize_pem())
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn in_use(reloader: &Reloader) -> Vec<u8> {
    reloader.current().identity.as_ref().unwrap().cert[0].to_vec()
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::pem_slice_iter(pem.as_bytes()).next().unwrap().unwrap().to_vec()
}

fn reloads(metrics: &TlsMetrics, result: &'static str) -> u64 {
    metrics.reloads.get_or_create(&ReloadLabels { role: "server", result }).get()
}

fn expiry(metrics: &TlsMetrics) -> i64 {
    metrics.not_after.get_or_create(&RoleLabel { role: "server" }).get()
}

#[test]
fn changed_files_replace_the_certificate_and_bad_ones_keep_it() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (ca("first CA"), ca("second CA"));
    // 2030-01-01T00:00:00Z = 1,893,456,000 s; 2031-01-01 = that + 365 days = 1,924,992,000 s.
    let (cert_a, key_a) = leaf(&first, 1_893_456_000);
    let (cert_b, key_b) = leaf(&second, 1_924_992_000);
    let cert = write(dir.path(), "tls.crt", &cert_a);
    let key = write(dir.path(), "tls.key", &key_a);
    let ca_file = write(dir.path(), "ca.crt", &first.pem);
    let files = TlsFiles { identity: Some((cert.clone(), key.clone())), ca: Some(ca_file.clone()) };
    let metrics = TlsMetrics::default();
    let reloader = Reloader::new(files, Role::Server, metrics.clone()).unwrap();
    assert_eq!(in_use(&reloader), der(&cert_a));
    assert_eq!(expiry(&metrics), 1_893_456_000);
    assert!(!reloader.check(), "nothing changed");

    // Half-written: the new certificate cut in the middle of its base64.
    write(dir.path(), "tls.crt", &cert_b[..cert_b.len() / 2]);
    assert!(!reloader.check());
    assert_eq!(in_use(&reloader), der(&cert_a), "a cut file keeps the old certificate");
    assert_eq!(reloads(&metrics, "error"), 1);
    assert!(!reloader.check(), "the same bad files are not tried (or logged) again");
    assert_eq!(reloads(&metrics, "error"), 1);

    // The new certificate with the old key (the key is written second): refused.
    write(dir.path(), "tls.crt", &cert_b);
    assert!(!reloader.check());
    assert_eq!(in_use(&reloader), der(&cert_a));
    assert_eq!(reloads(&metrics, "error"), 2);

    // Then the key arrives: the pair is taken, with its expiry.
    write(dir.path(), "tls.key", &key_b);
    write(dir.path(), "ca.crt", &second.pem);
    assert!(reloader.check());
    assert_eq!(in_use(&reloader), der(&cert_b));
    assert_eq!(reloads(&metrics, "ok"), 1);
    assert_eq!(expiry(&metrics), 1_924_992_000);

    // A CA file that is not PEM: the previous CA stays.
    write(dir.path(), "ca.crt", "not a certificate\n");
    assert!(!reloader.check());
    assert!(reloader.current().client_verifier.is_some());
    assert_eq!(reloads(&metrics, "error"), 3);

    // A missing file at start is an error naming it.
    std::fs::remove_file(&key).unwrap();
    let files = TlsFiles { identity: Some((cert, key.clone())), ca: None };
    let error = Reloader::new(files, Role::Server, TlsMetrics::default()).unwrap_err();
    assert!(error.to_string().contains(&key.display().to_string()), "{error}");
}
