//! A misbehaving PromQL endpoint: an HTTP server that answers chosen queries with garbage
//! (HTML, invalid JSON, HTTP 500, …) or slowly, and forwards every other request to a real
//! upstream (a [`crate::prometheus::Prometheus`]) untouched. It also records every query it
//! receives, so a test can count the requests a client sends.
//!
//! ```ignore
//! let bad = BadHttp::start(Some(prom.url())).await?;
//! bad.set_rules(vec![
//!     Rule::new("slow_marker", Reply::Delay(Duration::from_secs(5))),
//!     Rule::new("html_marker", Reply::html()),
//! ]);
//! // point the client at bad.url()
//! ```

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tokio::task::JoinHandle;

/// What to answer to a matching request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Wait, then answer as if there were no rule (forwarded upstream, or an empty vector
    /// without an upstream).
    Delay(Duration),
    /// This status, content type and body.
    Fixed { status: u16, content_type: String, body: String },
}

impl Reply {
    /// A login page from a misconfigured proxy: HTTP 200, `text/html`.
    pub fn html() -> Reply {
        Reply::Fixed {
            status: 200,
            content_type: "text/html; charset=utf-8".into(),
            body: "<!DOCTYPE html><html><head><title>Sign in</title></head><body>Please sign in</body></html>\n".into(),
        }
    }

    /// Truncated JSON with a JSON content type.
    pub fn invalid_json() -> Reply {
        Reply::Fixed {
            status: 200,
            content_type: "application/json".into(),
            body: r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":"#
                .into(),
        }
    }

    /// HTTP 500 with a plain-text body, as a crashing proxy sends.
    pub fn server_error() -> Reply {
        Reply::Fixed {
            status: 500,
            content_type: "text/plain; charset=utf-8".into(),
            body: "upstream connect error or disconnect/reset before headers\n".into(),
        }
    }

    /// A well-formed answer with these `(labels, value)` samples, value written as given
    /// (`"NaN"`, `"+Inf"`, `"abc"` are all passed through).
    pub fn vector(samples: &[(&[(&str, &str)], &str)]) -> Reply {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let rows: Vec<serde_json::Value> = samples
            .iter()
            .map(|(labels, value)| {
                let metric: serde_json::Map<String, serde_json::Value> = labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
                    .collect();
                serde_json::json!({"metric": metric, "value": [now, value]})
            })
            .collect();
        Reply::Fixed {
            status: 200,
            content_type: "application/json".into(),
            body: serde_json::json!({"status": "success", "data": {"resultType": "vector", "result": rows}})
                .to_string(),
        }
    }
}

/// Requests whose PromQL (`query` parameter) or path contains `contains` get `reply`.
#[derive(Clone, Debug)]
pub struct Rule {
    pub contains: String,
    pub reply: Reply,
}

impl Rule {
    pub fn new(contains: impl Into<String>, reply: Reply) -> Rule {
        Rule { contains: contains.into(), reply }
    }
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The PromQL (`query` parameter), or the path for requests without one.
    pub query: String,
    /// Header names lower-cased; repeated headers joined with `, `.
    pub headers: std::collections::BTreeMap<String, String>,
}

struct Inner {
    upstream: Option<String>,
    rules: Mutex<Vec<Rule>>,
    seen: Mutex<Vec<Seen>>,
    client: reqwest::Client,
}

/// The running endpoint; dropping it stops the server.
pub struct BadHttp {
    addr: SocketAddr,
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl BadHttp {
    /// Serves on `127.0.0.1:<free port>`; requests no rule matches go to `upstream`
    /// (`http://host:port`), or get an empty vector when there is none.
    pub async fn start(upstream: Option<String>) -> Result<BadHttp> {
        let inner = Arc::new(Inner {
            upstream: upstream.map(|u| u.trim_end_matches('/').to_owned()),
            rules: Mutex::new(Vec::new()),
            seen: Mutex::new(Vec::new()),
            client: reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?,
        });
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let listener =
            tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding bad_http")?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("bad_http on {addr} stopped: {e}");
            }
        });
        Ok(BadHttp { addr, inner, task })
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_rules(&self, rules: Vec<Rule>) {
        *self.inner.rules.lock().unwrap_or_else(|e| e.into_inner()) = rules;
    }

    /// The PromQL of every request so far (the path for requests without a `query`), in
    /// arrival order.
    pub fn queries(&self) -> Vec<String> {
        self.requests().into_iter().map(|s| s.query).collect()
    }

    /// Every request so far, with its headers.
    pub fn requests(&self) -> Vec<Seen> {
        self.inner.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Forgets the recorded queries.
    pub fn clear_queries(&self) {
        self.inner.seen.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

impl Drop for BadHttp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The `query` parameter of a query string or form body.
fn promql(encoded: &str) -> Option<String> {
    let url = reqwest::Url::parse(&format!("http://x/?{encoded}")).ok()?;
    url.query_pairs().find(|(k, _)| k == "query").map(|(_, v)| v.into_owned())
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = raw
        .as_deref()
        .and_then(promql)
        .or_else(|| promql(&String::from_utf8_lossy(&body)))
        .unwrap_or_else(|| uri.path().to_owned());
    let mut seen_headers = std::collections::BTreeMap::<String, String>::new();
    for (name, value) in &headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        seen_headers
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    inner
        .seen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Seen { query: query.clone(), headers: seen_headers });
    let rule = {
        let rules = inner.rules.lock().unwrap_or_else(|e| e.into_inner());
        rules.iter().find(|r| query.contains(&r.contains)).cloned()
    };
    match rule.map(|r| r.reply) {
        Some(Reply::Fixed { status, content_type, body }) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            [(header::CONTENT_TYPE, content_type)],
            body,
        )
            .into_response(),
        Some(Reply::Delay(pause)) => {
            tokio::time::sleep(pause).await;
            forward(&inner, method, &uri, headers, body).await
        }
        None => forward(&inner, method, &uri, headers, body).await,
    }
}

async fn forward(
    inner: &Inner,
    method: Method,
    uri: &Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(upstream) = &inner.upstream else {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
        )
            .into_response();
    };
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut request = inner.client.request(method, format!("{upstream}{path}")).body(body);
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        request = request.header(header::CONTENT_TYPE, ct);
    }
    match request.send().await {
        Ok(resp) => {
            let status = resp.status();
            let content_type = resp
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/octet-stream")
                .to_owned();
            let body = resp.bytes().await.unwrap_or_default();
            (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
        }
        Err(e) => {
            (StatusCode::BAD_GATEWAY, format!("bad_http: upstream failed: {e}\n")).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rules_answer_garbage_and_everything_is_recorded() {
        let bad = BadHttp::start(None).await.unwrap();
        bad.set_rules(vec![
            Rule::new("html_me", Reply::html()),
            Rule::new("fail_me", Reply::server_error()),
            Rule::new("slow_me", Reply::Delay(Duration::from_millis(300))),
        ]);
        let get = |q: &str| {
            let url = reqwest::Url::parse_with_params(
                &format!("{}/api/v1/query", bad.url()),
                [("query", q)],
            )
            .unwrap();
            async move { reqwest::get(url).await.unwrap() }
        };
        let html = get("up{x=\"html_me\"}").await;
        assert_eq!(html.status(), 200);
        assert!(html.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
        assert_eq!(get("fail_me").await.status(), 500);
        let started = tokio::time::Instant::now();
        let slow = get("slow_me").await;
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(slow.text().await.unwrap().contains("\"result\":[]"));
        assert_eq!(bad.queries(), vec!["up{x=\"html_me\"}", "fail_me", "slow_me"]);
        bad.clear_queries();
        assert!(bad.queries().is_empty());
    }
}
