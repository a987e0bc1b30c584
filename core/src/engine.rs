//! The engine: Filter and Score (docs/design.md#filter, docs/design.md#node-score) —
//! predicted utilisation per metric, observed + ledger + incoming, run through the policy's
//! curve and thresholds. Pure functions of a policy, a snapshot, a pod, the candidates and
//! `now`, with one entry point, [`evaluate`]. By role:
//!
//! - `plan.rs` — what a policy asks of each request, resolved once per pod, and the
//!   arithmetic every path shares (prediction, curve, weighted sum, thresholds, reasons);
//! - `prepared.rs` — the pod-independent half of every prediction, one row per node,
//!   kept up to date with the snapshot;
//! - `evaluate.rs` — the entry point; `rows.rs` answers a candidate at a time,
//!   `columns.rs` a chunk of rows at a time for the usual policy;
//! - `rejections.rs` — Filter's reasons as one string;
//! - `predicted.rs` — every node's predicted load with no pod incoming (the rebalancing
//!   signal);
//! - `breaker.rs` — the fleet staleness breaker (docs/design.md#fleet-staleness-breaker);
//! - `reference.rs` — the same answers walked node by node over the snapshot: the property
//!   tests' oracle and the benches' baseline, called by no service.

mod answer;
mod breaker;
mod columns;
mod evaluate;
mod plan;
mod predicted;
mod prepared;
pub mod reference;
mod rejections;
mod rows;

pub use answer::{Evaluation, ScoreTerm, Stats};
pub use breaker::{breaker_open, breakers};
pub use evaluate::{Ask, Candidates, evaluate};
pub use plan::settled_level;
pub use predicted::{PredictedLoad, predicted_loads};
pub use prepared::Prepared;
pub use rejections::Rejections;

#[cfg(test)]
mod breaker_tests;
#[cfg(test)]
mod departure_tests;
#[cfg(test)]
mod scoring_tests;
#[cfg(test)]
mod tests;
