//! Where node usage comes from. Every source writes into [`crate::state::ClusterState`].

pub mod kube;
pub mod metrics_server;
pub mod prometheus;
pub mod static_file;
pub mod synthetic;
