//! The HTTP side: one reqwest client (auth headers, TLS, timeout) under
//! `prometheus-http-query`, which builds the `/api/v1/query` requests. Answers are read
//! raw and parsed by [`super::answer`], so a bad sample or a proxy's HTML page is reported
//! precisely instead of failing inside a generic deserializer.

use std::path::PathBuf;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::answer::{QueryError, Series, parse};

/// Where Prometheus is and how to talk to it.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub url: String,
    /// Read before every query, so a rotated token is picked up.
    pub bearer_token_file: Option<PathBuf>,
    /// User and password file.
    pub basic_auth: Option<(String, PathBuf)>,
    /// PEM bundle of CAs trusted for an `https://` URL (besides the system's).
    pub ca_file: Option<PathBuf>,
    pub insecure_skip_verify: bool,
    /// Extra headers (`X-Scope-OrgID` for Mimir, …).
    pub headers: Vec<(String, String)>,
    /// Bound on one query, connection included; also sent as the server's `timeout`.
    pub timeout: Duration,
}

#[derive(Clone)]
pub struct PromClient {
    client: prometheus_http_query::Client,
    bearer_token_file: Option<PathBuf>,
    timeout: Duration,
}

/// `K: V` (as given to `--prometheus-header`).
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) =
        text.split_once(':').ok_or_else(|| format!("'{text}' is not 'Name: value'"))?;
    let (name, value) = (name.trim(), value.trim());
    HeaderName::from_bytes(name.as_bytes())
        .map_err(|e| format!("'{name}' is not a header name: {e}"))?;
    HeaderValue::from_str(value).map_err(|e| format!("header {name}: bad value: {e}"))?;
    Ok((name.to_owned(), value.to_owned()))
}

fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn read_secret(path: &PathBuf, what: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{what} {}: cannot read: {e}", path.display()))?;
    Ok(text.trim_end_matches(['\r', '\n']).to_owned())
}

/// The whole chain of an error, `outer: inner: root`, since reqwest's own message hides the
/// cause (connection refused, certificate unknown, …).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

impl PromClient {
    pub fn new(config: &ClientConfig) -> Result<PromClient, String> {
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
            let value = HeaderValue::from_str(value).map_err(|e| e.to_string())?;
            headers.append(name, value);
        }
        if let Some((user, password_file)) = &config.basic_auth {
            let password = read_secret(password_file, "--prometheus-basic-auth-password-file")?;
            let mut value = HeaderValue::from_str(&format!(
                "Basic {}",
                base64(format!("{user}:{password}").as_bytes())
            ))
            .map_err(|e| format!("basic auth: {e}"))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(5)))
            .default_headers(headers);
        if let Some(path) = &config.ca_file {
            let pem = std::fs::read(path)
                .map_err(|e| format!("--prometheus-ca-file {}: {e}", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("--prometheus-ca-file {}: {}", path.display(), chain(&e)))?;
            if certs.is_empty() {
                return Err(format!("--prometheus-ca-file {}: no certificate", path.display()));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        if config.insecure_skip_verify {
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        let http = builder.build().map_err(|e| chain(&e))?;
        let client = prometheus_http_query::Client::from(http, &config.url)
            .map_err(|e| format!("--prometheus-url {}: {}", config.url, chain(&e)))?;
        if let Some(path) = &config.bearer_token_file {
            read_secret(path, "--prometheus-bearer-token-file")?;
        }
        Ok(PromClient {
            client,
            bearer_token_file: config.bearer_token_file.clone(),
            timeout: config.timeout,
        })
    }

    /// One instant query at the server's "now".
    pub async fn query(&self, promql: &str) -> Result<Vec<Series>, QueryError> {
        self.query_with(promql, parse).await
    }

    /// One instant query, its answer (HTTP status, content type, body) read by `read`
    /// before the body is let go: for answers too large to parse into [`Series`].
    pub async fn query_with<T>(
        &self,
        promql: &str,
        read: impl FnOnce(u16, &str, &[u8]) -> Result<T, QueryError>,
    ) -> Result<T, QueryError> {
        match tokio::time::timeout(self.timeout, self.query_inner(promql, read)).await {
            Ok(result) => result,
            Err(_) => Err(QueryError::Timeout(self.timeout)),
        }
    }

    async fn query_inner<T>(
        &self,
        promql: &str,
        read: impl FnOnce(u16, &str, &[u8]) -> Result<T, QueryError>,
    ) -> Result<T, QueryError> {
        let mut request = self.client.query(promql).timeout(self.timeout.as_millis() as i64);
        if let Some(path) = &self.bearer_token_file {
            let token = read_secret(path, "--prometheus-bearer-token-file")
                .map_err(QueryError::Transport)?;
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|e| QueryError::Transport(format!("bearer token: {e}")))?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        let transport = |e: &dyn std::error::Error, timed_out: bool| {
            if timed_out {
                QueryError::Timeout(self.timeout)
            } else {
                QueryError::Transport(chain(e))
            }
        };
        let response = request.get_raw().await.map_err(|e| {
            let timed_out = match &e {
                prometheus_http_query::Error::Client(c) => {
                    c.inner().is_some_and(|r| r.is_timeout())
                }
                _ => false,
            };
            transport(&e, timed_out)
        })?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body = response.bytes().await.map_err(|e| transport(&e, e.is_timeout()))?;
        read(status, &content_type, &body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("user:pa ss", "dXNlcjpwYSBzcw=="),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain}");
        }
    }

    #[test]
    fn headers_are_name_colon_value() {
        assert_eq!(
            parse_header("X-Scope-OrgID: tenant-1").unwrap(),
            ("X-Scope-OrgID".into(), "tenant-1".into())
        );
        assert!(parse_header("no colon").is_err());
        assert!(parse_header("bad name: x").is_err());
    }
}
