//! waterline-extender: kube-scheduler's HTTP extender protocol
//! (`k8s.io/kube-scheduler/extender/v1`) in front of the scorer's gRPC API, on one shared
//! channel. **One scorer call per pod**: filter calls `Evaluate` (filter and score in one
//! answer) and keeps the feasible nodes' scores by pod uid ([`cache`]), prioritize answers
//! from them (mapped 0..10 over the candidates it received) and calls Score only on a miss;
//! a scorer older than `Evaluate` gets Filter and Score as before. Pods whose
//! `spec.schedulerName` is not ours, and every call the scorer cannot answer in time, get a
//! neutral answer so the scheduler keeps working.
//!
//! **Provisional reservations** ([`provisional`]): kube-scheduler never tells an extender
//! which node it chose, so prioritize records the pod on the node it scored best as a
//! short-lived Reserve; the next pod's Evaluate sees it, the bind verb or the pod watch
//! confirms or moves it, and it expires unconfirmed otherwise (`--provisional-reserve`,
//! `--provisional-reserve-ttl`).
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
//! Binding) and `provisional` (the guesses at prioritize) → `scorer` (the gRPC client:
//! timeouts, fallbacks); `cache`, `metrics`, `mapping`, `pod` and `wire` are leaves that
//! every layer may use.

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
