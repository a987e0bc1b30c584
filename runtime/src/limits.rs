//! Limits of a gRPC server (`--max-request-bytes`, `--max-concurrent-rpcs`,
//! `--max-streams-per-client`; `--max-nodes` is checked by the scorer's handlers). Every
//! refusal is RESOURCE_EXHAUSTED, answered at once, and counted in
//! `waterline_grpc_limit_rejections_total{limit}`; the server stays SERVING.
//!
//! The layer sits inside tonic's per-connection stack (after the connect info is attached,
//! so it can see the peer) and in front of every service. It:
//! - sheds load instead of queueing: tower's `ConcurrencyLimit` waits for a permit, which
//!   under overload turns every RPC into a timeout at the caller; here a unary RPC that
//!   finds no permit free is refused at once. The permit lives until the answer is sent.
//!   Health checks are exempt (probes must see SERVING while the server sheds load), and so
//!   are the long-lived streams, which the per-client stream count bounds instead;
//! - counts the long-lived streams per client IP address and refuses one more;
//! - turns tonic's answer to an oversized message into RESOURCE_EXHAUSTED: tonic's decoder
//!   answers OUT_OF_RANGE ("Error, decoded message length too large: found N bytes, the
//!   limit is: M bytes", hyperium/tonic `tonic/src/codec/decode.rs`, `DecodeBuf` length
//!   check against `max_message_size`), while gRPC's status-code guide reserves OUT_OF_RANGE
//!   for iterating past a range and names RESOURCE_EXHAUSTED for a message too large.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http_body_util::BodyExt;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::body::Body;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tonic::{Code, Status};

use crate::args::GrpcLimitArgs;

/// The prefix of tonic's message for a request past the decoding limit.
const TOO_LARGE: &str = "Error, decoded message length too large";

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LimitLabel {
    limit: &'static str,
}

/// The configured limits and their rejection counter; cheap to clone.
#[derive(Clone)]
pub struct Limits {
    max_request_bytes: usize,
    in_flight: Option<Arc<Semaphore>>,
    max_concurrent: usize,
    max_streams: usize,
    streams: Arc<Mutex<HashMap<IpAddr, usize>>>,
    /// Paths (`/package.Service/Method`) of the long-lived streams counted per client.
    stream_paths: Arc<[&'static str]>,
    rejections: Family<LimitLabel, Counter>,
}

impl Limits {
    /// `stream_paths` lists the server's long-lived streaming methods.
    pub fn register(
        registry: &mut Registry,
        args: &GrpcLimitArgs,
        stream_paths: &[&'static str],
    ) -> Limits {
        let rejections = Family::default();
        registry.register(
            "waterline_grpc_limit_rejections",
            "gRPC requests refused with RESOURCE_EXHAUSTED, by limit (request_bytes, concurrent_rpcs, streams_per_client, nodes)",
            rejections.clone(),
        );
        Limits {
            max_request_bytes: args.max_request_bytes,
            in_flight: (args.max_concurrent_rpcs > 0)
                .then(|| Arc::new(Semaphore::new(args.max_concurrent_rpcs))),
            max_concurrent: args.max_concurrent_rpcs,
            max_streams: args.max_streams_per_client,
            streams: Arc::default(),
            stream_paths: stream_paths.into(),
            rejections,
        }
    }

    /// `--max-request-bytes`, for each service's `max_decoding_message_size`.
    pub fn max_request_bytes(&self) -> usize {
        self.max_request_bytes
    }

    /// Counts a refusal made by a handler (e.g. `--max-nodes`) and returns its status.
    pub fn reject(&self, limit: &'static str, message: String) -> Status {
        self.rejections.get_or_create(&LimitLabel { limit }).inc();
        Status::resource_exhausted(message)
    }

    fn refused(&self, limit: &'static str, message: String) -> http::Response<Body> {
        tracing::debug!(limit, %message, "request refused");
        self.reject(limit, message).into_http()
    }

    /// Takes one stream slot of `peer`, or says why not.
    fn open_stream(&self, peer: Option<IpAddr>) -> Result<Option<StreamSlot>, String> {
        let Some(ip) = peer.filter(|_| self.max_streams > 0) else { return Ok(None) };
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        let open = streams.entry(ip).or_insert(0);
        if *open >= self.max_streams {
            return Err(format!(
                "{ip} already holds {open} streams, the most --max-streams-per-client allows"
            ));
        }
        *open += 1;
        Ok(Some(StreamSlot { streams: self.streams.clone(), ip }))
    }
}

/// One open stream of a client; gives its slot back when the stream's body is dropped.
struct StreamSlot {
    streams: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(open) = streams.get_mut(&self.ip) {
            *open -= 1;
            if *open == 0 {
                streams.remove(&self.ip);
            }
        }
    }
}

/// What an admitted request holds until its answer has been sent.
enum Held {
    Permit(#[allow(dead_code)] OwnedSemaphorePermit),
    Stream(#[allow(dead_code)] StreamSlot),
    Nothing,
}

fn peer_ip<B>(request: &http::Request<B>) -> Option<IpAddr> {
    let extensions = request.extensions();
    extensions
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| {
            extensions
                .get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|info| info.get_ref().remote_addr())
        })
        .map(|addr| addr.ip())
}

impl<S> tower::Layer<S> for Limits {
    type Service = Limited<S>;

    fn layer(&self, inner: S) -> Limited<S> {
        Limited { inner, limits: self.clone() }
    }
}

/// A service behind [`Limits`].
#[derive(Clone)]
pub struct Limited<S> {
    inner: S,
    limits: Limits,
}

impl<S> tower::Service<http::Request<Body>> for Limited<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let limits = self.limits.clone();
        let path = request.uri().path();
        let held = if limits.stream_paths.contains(&path) {
            match limits.open_stream(peer_ip(&request)) {
                Ok(Some(slot)) => Held::Stream(slot),
                Ok(None) => Held::Nothing,
                Err(message) => {
                    let answer = limits.refused("streams_per_client", message);
                    return Box::pin(async move { Ok(answer) });
                }
            }
        } else if path.starts_with("/grpc.health.v1.Health/") {
            Held::Nothing
        } else if let Some(in_flight) = &limits.in_flight {
            match in_flight.clone().try_acquire_owned() {
                Ok(permit) => Held::Permit(permit),
                Err(_) => {
                    let message = format!(
                        "{} RPCs already in flight, the most --max-concurrent-rpcs allows; retry later",
                        limits.max_concurrent
                    );
                    let answer = limits.refused("concurrent_rpcs", message);
                    return Box::pin(async move { Ok(answer) });
                }
            }
        } else {
            Held::Nothing
        };
        // The clone that was ready serves this request (tower's `call` contract).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let answer = inner.call(request).await?;
            let answer = too_large_is_resource_exhausted(answer, &limits);
            let (parts, body) = answer.into_parts();
            // The permit or stream slot is given back when the answer's body is done.
            let body = body.map_frame(move |frame| {
                let _held = &held;
                frame
            });
            Ok(http::Response::from_parts(parts, Body::new(body)))
        })
    }
}

fn too_large_is_resource_exhausted(
    mut answer: http::Response<Body>,
    limits: &Limits,
) -> http::Response<Body> {
    let Some(status) = Status::from_header_map(answer.headers()) else { return answer };
    if status.code() != Code::OutOfRange || !status.message().starts_with(TOO_LARGE) {
        return answer;
    }
    let status = limits.reject(
        "request_bytes",
        format!(
            "request larger than --max-request-bytes ({}): {}",
            limits.max_request_bytes,
            status.message()
        ),
    );
    // Only fails for a message that cannot be a header value; tonic's own message can.
    let _ = status.add_header(answer.headers_mut());
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_streams: usize) -> Limits {
        let args = GrpcLimitArgs {
            max_request_bytes: 100,
            max_concurrent_rpcs: 1,
            max_streams_per_client: max_streams,
        };
        Limits::register(&mut Registry::default(), &args, &["/s/Watch"])
    }

    #[test]
    fn stream_slots_are_per_address_and_come_back() {
        let limits = limits(2);
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = limits.open_stream(Some(a)).unwrap();
        let second = limits.open_stream(Some(a)).unwrap();
        assert!(limits.open_stream(Some(a)).is_err(), "a third stream of one address");
        assert!(limits.open_stream(Some(b)).unwrap().is_some(), "another address has its own");
        drop(first);
        assert!(limits.open_stream(Some(a)).unwrap().is_some(), "a closed stream frees its slot");
        drop(second);
        // No peer address (an in-process transport): not counted.
        assert!(limits.open_stream(None).unwrap().is_none());
    }

    #[test]
    fn only_tonics_too_large_answer_is_rewritten() {
        let limits = limits(1);
        let answer = |status: Status| too_large_is_resource_exhausted(status.into_http(), &limits);
        let tonic = Status::out_of_range(
            "Error, decoded message length too large: found 200 bytes, the limit is: 100 bytes",
        );
        let rewritten = Status::from_header_map(answer(tonic).headers()).unwrap();
        assert_eq!(rewritten.code(), Code::ResourceExhausted);
        assert!(
            rewritten.message().contains("--max-request-bytes (100)"),
            "{}",
            rewritten.message()
        );
        // Another OUT_OF_RANGE is left as it is.
        let other = Status::from_header_map(answer(Status::out_of_range("page 9 of 3")).headers());
        assert_eq!(other.unwrap().code(), Code::OutOfRange);
        let counted = limits.rejections.get_or_create(&LimitLabel { limit: "request_bytes" }).get();
        assert_eq!(counted, 1);
    }
}
