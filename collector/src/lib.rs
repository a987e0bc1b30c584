//! waterline-collector: reads node usage from its sources (a static file, a synthetic
//! cluster, Prometheus), keeps the ledger of recent placements, and streams both to every
//! scorer through `waterline.v1.CollectorService/WatchNodes`.
#![forbid(unsafe_code)]

mod app;
mod args;
pub mod learn;
pub mod node_directory;
pub mod policy_check;
pub mod predicted_load;
pub mod published;
pub mod running_pods;
pub mod service;
pub mod shadow;
pub mod sources;
pub mod state;

pub use app::run;
pub use args::{Args, Command, PolicyCommand};
