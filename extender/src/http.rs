//! HTTP plumbing of the verbs: the axum routes under the prefix, bounded body reading (413
//! past `--max-body`), JSON decoding whose errors name the JSON path, answers in the wire's
//! shape (`{"Error": "..."}` for every 4xx), and the timing of each call per verb. It
//! decodes, hands the request to [`crate::verbs`] and encodes the answer; it knows nothing
//! of the scorer.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Serialize;

use crate::verbs::{BadRequest, Extender};
use crate::wire::{BindingArgs, ErrorResult, ExtenderArgs, PreemptionArgs};

/// A 4xx answer with the message in the wire's `Error` field.
#[derive(Debug)]
pub struct HttpError {
    pub status: StatusCode,
    pub message: String,
}

impl HttpError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        HttpError { status: StatusCode::BAD_REQUEST, message: message.into() }
    }
}

impl From<BadRequest> for HttpError {
    fn from(e: BadRequest) -> Self {
        match e {
            BadRequest::Invalid(message) => HttpError::bad_request(message),
            BadRequest::TooLarge(message) => {
                HttpError { status: StatusCode::PAYLOAD_TOO_LARGE, message }
            }
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        json_response(self.status, &ErrorResult { error: self.message })
    }
}

pub fn json_response(status: StatusCode, body: &impl Serialize) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (status, [(header::CONTENT_TYPE, "application/json")], Body::from(bytes))
            .into_response(),
        Err(error) => {
            tracing::error!(%error, "encoding an answer failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "encoding the answer failed\n").into_response()
        }
    }
}

/// Reads the whole body, refusing more than `limit` bytes (413) before or while reading.
pub async fn read_body(request: Request, limit: usize) -> Result<Bytes, HttpError> {
    let too_large = || HttpError {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        message: format!("request body exceeds {limit} bytes (--max-body)"),
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(too_large());
    }
    match axum::body::to_bytes(request.into_body(), limit).await {
        Ok(bytes) => Ok(bytes),
        Err(error) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
            while let Some(e) = source {
                if e.is::<http_body_util::LengthLimitError>() {
                    return Err(too_large());
                }
                source = e.source();
            }
            Err(HttpError::bad_request(format!("reading the request body failed: {error}")))
        }
    }
}

/// Decodes `bytes` as `T`; the error names the JSON path (`Pod.spec.containers[0]...`).
/// Every request of the protocol is a JSON object (serde would also take an array for a
/// struct; Go would not).
pub fn decode<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, HttpError> {
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return Err(HttpError::bad_request("malformed request: expected a JSON object"));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            HttpError::bad_request(format!("malformed request: {}", e.inner()))
        } else {
            HttpError::bad_request(format!("malformed request at {path}: {}", e.inner()))
        }
    })?;
    deserializer.end().map_err(|e| HttpError::bad_request(format!("malformed request: {e}")))?;
    Ok(value)
}

/// `/waterline/v1/` → `/waterline/v1`; `` and `/` → `` (verbs at the root).
pub fn normalize_prefix(prefix: &str) -> String {
    let trimmed = prefix.trim_matches('/');
    if trimmed.is_empty() { String::new() } else { format!("/{trimmed}") }
}

/// What the routes of one policy share: the verbs, the policy's index in
/// `Extender::policies` and the body limit.
struct Routes {
    extender: Arc<Extender>,
    policy: usize,
    max_body: usize,
}

/// The extender's routes: the verbs under `prefix` for the default policy and under
/// `prefix/<name>` for each named one (`/waterline/v1/batch/filter`), reading at most
/// `max_body` bytes per request; anything else is a 404 in the wire's error shape.
pub fn router(extender: Arc<Extender>, prefix: &str, max_body: usize) -> Router {
    let prefix = normalize_prefix(prefix);
    let mut app = Router::new();
    for policy in 0..extender.policies.len() {
        let at = match extender.policies.name(policy) {
            "" => prefix.clone(),
            name => format!("{prefix}/{name}"),
        };
        let routes = Routes { extender: extender.clone(), policy, max_body };
        app = app.merge(
            Router::new()
                .route(&format!("{at}/filter"), post(filter))
                .route(&format!("{at}/prioritize"), post(prioritize))
                .route(&format!("{at}/preempt"), post(preempt))
                .route(&format!("{at}/bind"), post(bind))
                .with_state(Arc::new(routes)),
        );
    }
    app.fallback(|| async {
        HttpError { status: StatusCode::NOT_FOUND, message: "no such extender verb".into() }
    })
}

/// Times the call, reads the body and hands it to `f`.
async fn serve<'s, F, Fut>(
    routes: &'s Routes,
    verb: &'static str,
    request: Request,
    f: F,
) -> Response
where
    F: FnOnce(&'s Extender, Bytes) -> Fut,
    Fut: Future<Output = Result<Response, HttpError>>,
{
    let timer = routes.extender.metrics.http.start(verb);
    let response = match read_body(request, routes.max_body).await {
        Ok(bytes) => f(&routes.extender, bytes).await.unwrap_or_else(|e| {
            tracing::debug!(verb, error = %e.message, "bad request");
            e.into_response()
        }),
        // The body was not read to its end, so hyper will not reuse this connection; saying
        // so keeps a client from sending its next request down a socket that is about to
        // close (a pooled client would see "connection closed").
        Err(e) => {
            let mut response = e.into_response();
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            response
        }
    };
    timer.finish(response.status().as_str());
    response
}

fn ok(body: &impl Serialize) -> Response {
    json_response(StatusCode::OK, body)
}

async fn filter(State(routes): State<Arc<Routes>>, request: Request) -> Response {
    let policy = routes.policy;
    serve(&routes, "filter", request, |ext, bytes| async move {
        let args: ExtenderArgs = decode(&bytes)?;
        Ok(ok(&ext.filter(policy, args).await?))
    })
    .await
}

async fn prioritize(State(routes): State<Arc<Routes>>, request: Request) -> Response {
    let policy = routes.policy;
    serve(&routes, "prioritize", request, |ext, bytes| async move {
        let args: ExtenderArgs = decode(&bytes)?;
        Ok(ok(&ext.prioritize(policy, args).await?))
    })
    .await
}

async fn preempt(State(routes): State<Arc<Routes>>, request: Request) -> Response {
    serve(&routes, "preempt", request, |ext, bytes| async move {
        let args: PreemptionArgs = decode(&bytes)?;
        Ok(ok(&ext.preempt(&args)))
    })
    .await
}

async fn bind(State(routes): State<Arc<Routes>>, request: Request) -> Response {
    serve(&routes, "bind", request, |ext, bytes| async move {
        let args: BindingArgs = decode(&bytes)?;
        Ok(ok(&ext.bind(&args).await))
    })
    .await
}

#[cfg(test)]
mod tests;
