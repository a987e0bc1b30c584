//! Waterline's domain: the policy (what to measure and how to score it), the formulas
//! (curves, the pod estimator, Filter and Score), the placement ledger and the snapshot the
//! scorer answers from; and the pure readers of the files around them (durations,
//! quantities, YAML with line numbers, Prometheus rule files).
//!
//! Nothing here knows about tonic, kube, axum or the generated API types, and nothing here
//! reads a clock: every function that depends on time takes `now` as an argument, so tests
//! need no runtime and no sleeping.
#![forbid(unsafe_code)]

pub mod curve;
pub mod delta;
pub mod engine;
pub mod estimate;
pub mod extender_score;
pub mod learn;
pub mod ledger;
pub mod placement;
pub mod pod;
pub mod policy;
pub mod quantity;
pub mod rule_file;
pub mod shadow;
pub mod snapshot;
pub mod time;
pub mod workload;
pub mod yaml;

pub use delta::{Delta, NodeReport};
pub use engine::ScoreTerm;
pub use ledger::{Ledger, LedgerEntry, LedgerSource};
pub use pod::Pod;
pub use policy::Policy;
pub use snapshot::{Capacity, NodeSlot, NodeState, Sample, Snapshot};
pub use time::{Millis, UnixMillis};

/// The hash map of the request path. Keys are node and metric names the cluster chose, not
/// adversarial input worth SipHash's cost: Fx hashing halves a Score's lookup time.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;
