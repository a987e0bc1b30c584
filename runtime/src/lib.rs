//! What every waterline process shares: common flags, logging, the admin server
//! (`/metrics`, `/live`, `/ready`), gRPC reflection/health/limits wiring, TLS that follows
//! its files, policy loading and reload, and the conversions between the generated API
//! types and the domain.
// Denied, not forbidden: `memory` makes the one allocator call that needs it.
#![deny(unsafe_code)]

pub mod admin;
pub mod args;
pub mod backoff;
pub mod grpc;
pub mod https;
pub mod limits;
pub mod logging;
pub mod memory;
pub mod policy;
pub mod rpc_metrics;
pub mod tls;

/// Runs a service's `main`: allocator settings first, then a multi-threaded tokio runtime.
pub fn run_main<F: std::future::Future>(main: F) -> anyhow::Result<F::Output> {
    memory::limit_malloc_arenas();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    Ok(runtime.block_on(main))
}

/// Resolves when the process is asked to stop (SIGINT or SIGTERM).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown requested");
}
