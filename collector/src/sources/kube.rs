//! The Kubernetes source: a pod watch that feeds the ledger and a node watch that gives
//! capacity and addresses.
//!
//! Each watch is a kube-runtime `watcher` with the default backoff driving an [`Index`]
//! (kubert's shape: `apply` / `delete`, and a re-list delivered as `init` … `init_done`
//! that replaces the index's view, so objects deleted while disconnected leave it). The
//! loop never ends: an error is logged and the watcher retries after its backoff.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::time::Duration;

use ::kube::config::{KubeConfigOptions, Kubeconfig};
use ::kube::runtime::{WatchStreamExt, watcher};
use ::kube::{Api, Client, Resource};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::Instrument;
use waterline_runtime::policy::PolicyHandle;

use crate::state::ClusterState;

pub mod nodes;
pub mod pods;

pub use nodes::{NodeAddresses, NodeIndex};
pub use pods::PodIndex;

/// Pods that hold a node: bound and not finished. A pod that completes leaves the selector,
/// which the API server reports as a deletion.
pub const PLACED_PODS: &str = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";

/// An in-memory view kept in step with a watch (kubert's index).
pub trait Index<K> {
    /// An object was added or changed.
    fn apply(&mut self, object: K);
    /// An object was deleted.
    fn delete(&mut self, object: K);
    /// A (re-)list starts; `init_apply` calls follow until `init_done`.
    fn init(&mut self);
    fn init_apply(&mut self, object: K);
    /// The list is complete: whatever it did not show is gone.
    fn init_done(&mut self);
}

/// Drives `index` from a watch of `api` forever.
pub async fn run_watch<K, I>(api: Api<K>, config: watcher::Config, mut index: I)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
    I: Index<K>,
{
    let kind = K::kind(&());
    loop {
        let mut events = pin!(watcher(api.clone(), config.clone()).default_backoff());
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(object)) => index.apply(object),
                Ok(watcher::Event::Delete(object)) => index.delete(object),
                Ok(watcher::Event::Init) => index.init(),
                Ok(watcher::Event::InitApply(object)) => index.init_apply(object),
                Ok(watcher::Event::InitDone) => index.init_done(),
                // The next poll waits out the backoff, then re-watches or re-lists.
                Err(error) => tracing::warn!(%error, %kind, "watch failed; retrying"),
            }
        }
        // A watcher stream does not end; should one ever, start a fresh one.
        tracing::warn!(%kind, "watch stream ended; restarting");
    }
}

/// A watcher's configuration: every watch request ends after `timeout` (whole seconds) and
/// is renewed from its last resource version, and kube-rs takes a watch that stays silent
/// for `timeout` + 5 s for dead and reopens it (`--kube-watch-timeout`).
pub fn watch_config(timeout: Duration) -> watcher::Config {
    let seconds = u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX).max(1);
    watcher::Config::default().timeout(seconds)
}

/// Starts the pod watch; the receiver turns `true` once the first pod list is in the ledger.
/// `shadow`: shadow mode's scheduler filter, when it is on; `running`: the learner's running
/// pods, when it runs.
pub fn spawn_pod_watch(
    client: Client,
    state: ClusterState,
    policy: PolicyHandle,
    watch_timeout: Duration,
    shadow: Option<std::sync::Arc<crate::shadow::SchedulerFilter>>,
    running: Option<crate::running_pods::RunningPods>,
) -> watch::Receiver<bool> {
    let index = PodIndex::new(state, policy).with_shadow(shadow).with_running(running);
    let synced = index.synced();
    let config = watch_config(watch_timeout).fields(PLACED_PODS);
    tokio::spawn(
        run_watch(Api::<Pod>::all(client), config, index)
            .instrument(tracing::info_span!("pod_watch")),
    );
    synced
}

/// Starts the node watch (capacity and addresses).
pub fn spawn_node_watch(
    client: Client,
    state: ClusterState,
    addresses: Option<Box<dyn NodeAddresses>>,
    watch_timeout: Duration,
) {
    let index = NodeIndex::new(state, addresses);
    tokio::spawn(
        run_watch(Api::<Node>::all(client), watch_config(watch_timeout), index)
            .instrument(tracing::info_span!("node_watch")),
    );
}

/// Whether a cluster configuration is at hand without being asked for one: `KUBECONFIG`,
/// `~/.kube/config` or the in-cluster service account.
pub fn config_available() -> bool {
    let env_set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    env_set("KUBECONFIG")
        || env_set("KUBERNETES_SERVICE_HOST")
        || std::env::var_os("HOME")
            .is_some_and(|home| Path::new(&home).join(".kube").join("config").is_file())
}

/// Why no Kubernetes client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no usable Kubernetes configuration (KUBECONFIG, ~/.kube/config or in-cluster): {0}")]
    NoConfig(::kube::Error),
    #[error("--kubeconfig {}: {error}", path.display())]
    Kubeconfig { path: PathBuf, error: String },
}

/// A client for `kubeconfig`, or the default chain (`KUBECONFIG`, `~/.kube/config`,
/// in-cluster). Only reads configuration: an unreachable server is the watches' concern
/// (they log and retry), so the collector starts either way.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    let Some(path) = kubeconfig else {
        return Client::try_default().await.map_err(ClientError::NoConfig);
    };
    let bad = |error: &dyn std::fmt::Display| ClientError::Kubeconfig {
        path: path.to_owned(),
        error: error.to_string(),
    };
    let file = Kubeconfig::read_from(path).map_err(|e| bad(&e))?;
    let config = ::kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| bad(&e))?;
    Client::try_from(config).map_err(|e| bad(&e))
}

#[cfg(test)]
mod tests;
