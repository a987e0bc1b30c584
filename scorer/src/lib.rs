//! waterline-scorer: keeps the collector's latest snapshot in memory and answers
//! `waterline.v1.ScorerService` Filter and Score from it without any I/O. Reserve and
//! Unreserve are applied locally at once and forwarded to the collector; one the collector's
//! stream does not confirm within `--forward-give-up` is removed and counted.
#![forbid(unsafe_code)]

mod app;
mod args;
pub mod forward;
mod grpc;
mod observe;
pub mod service;
mod session;
pub mod store;
pub mod sync;
pub mod unconfirmed;

pub use app::run;
pub use args::Args;
