//! waterline-extender: kube-scheduler's HTTP extender protocol
//! (`k8s.io/kube-scheduler/extender/v1`) in front of the scorer's gRPC API. One Filter or
//! Score RPC per extender call, on one shared channel; pods whose `spec.schedulerName` is not
//! ours, and every call the scorer cannot answer in time, get a neutral answer so the
//! scheduler keeps working.
//!
//! Filter splits the scorer's rejections by what preemption could do about them. A load
//! rejection goes to `FailedAndUnresolvableNodes`: evicting pods does not lower the measured
//! load within the cycle, and a resolvable answer would let kube-scheduler preempt
//! lower-priority pods on a hot node that waterline keeps rejecting (the plugin answers
//! `UnschedulableAndUnresolvable` for the same reason). An anti-colocation conflict (a reason
//! starting `anti-colocation `) stays in `FailedNodes`: evicting the other pod of the group
//! resolves it.
#![forbid(unsafe_code)]

//!
//! Modules, imports pointing one way: `app` (wiring) → `http` (axum routes, body limits,
//! errors → responses) → `verbs` (filter, prioritize, preempt, bind) → `bind` (Kubernetes
//! Binding) → `scorer` (the gRPC client: timeouts, fallbacks); `metrics`, `mapping`, `pod`
//! and `wire` are leaves that every layer may use.

mod app;
mod args;
pub mod bind;
pub mod cache;
pub mod http;
pub mod mapping;
pub mod metrics;
pub mod pod;
pub mod provisional;
pub mod scorer;
pub mod verbs;
pub mod wire;

pub use app::run;
pub use args::Args;
pub use http::router;
