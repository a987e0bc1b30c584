//! The one edge between the generated `waterline.v1` types and the domain (`waterline-core`):
//! every conversion lives here, so the collector's state, the scorer's store and the engine
//! know no wire types, and a field is mapped in exactly one place.
//!
//! Conversions are the [`ToProto`] and [`FromProto`] traits rather than `From`/`TryFrom`:
//! both sides are foreign to this crate (the API crate is generated, core knows no proto),
//! and Rust's orphan rule only lets a crate implement a foreign trait for a type it owns.
//! A wire value that the domain cannot hold is a [`ConvertError`], which becomes
//! `INVALID_ARGUMENT` with the reason.
#![forbid(unsafe_code)]

mod answer;
mod delta;
mod learned;
mod ledger;
mod node;
mod pod;
mod shadow;
mod time;

pub use answer::{filter_response, score_response, wire_score};
pub use delta::{Dropped, delta_from_proto};
pub use learned::workload_from_proto;
pub use ledger::{listed_entry, provisional_ttl};
pub use pod::{check_node_names, required_pod};
pub use time::{duration, timestamp, unix_millis};

/// A domain value as its wire message.
pub trait ToProto {
    type Proto;
    fn to_proto(&self) -> Self::Proto;
}

/// A domain value from its wire message, validated.
pub trait FromProto: Sized {
    type Proto;
    fn from_proto(proto: &Self::Proto) -> Result<Self, ConvertError>;
}

/// A request or message the domain cannot accept, and why (the text a client sees).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("pod is required")]
    NoPod,
    #[error("{field} must not be negative (got {value})")]
    Negative { field: &'static str, value: i64 },
    #[error("node_names must not be empty")]
    NoNodeNames,
    #[error("{count} node names exceed the limit of {limit} (--max-nodes)")]
    TooManyNodes { count: usize, limit: usize },
    #[error("node_names[{0}] is empty")]
    BlankNodeName(usize),
    #[error("ledger entry without pod_uid or node_name")]
    IncompleteEntry,
    #[error("{0} is required")]
    MissingField(String),
    /// A learned usage number (`learned[i].cpu.ratio`, …) that is NaN, infinite or negative.
    #[error("{field} of {workload} must be a finite number, not negative (got {value})")]
    BadLearned { field: String, workload: String, value: String },
    #[error(transparent)]
    Override(#[from] waterline_core::pod::OverrideError),
    #[error(transparent)]
    Placement(#[from] waterline_core::placement::PlacementError),
}

impl From<ConvertError> for tonic::Status {
    fn from(error: ConvertError) -> Self {
        tonic::Status::invalid_argument(error.to_string())
    }
}
