//! Harness for waterline's integration tests and for `waterline-bench`: starts the real
//! binaries, a real Prometheus (or VictoriaMetrics, behind the same
//! [`backend::MetricsBackend`] trait) and a fake node-exporter on loopback ports, and stops
//! them when dropped.
#![forbid(unsafe_code)]

pub mod backend;
pub mod bad_http;
pub mod cadvisor;
pub mod exporter;
pub mod fake_kube;
pub mod procs;
pub mod prometheus;
pub mod victoria;
