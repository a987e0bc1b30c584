//! The manifests in deploy/ agree with this binary: the KubeSchedulerConfiguration decodes
//! (kubescheduler.config.k8s.io/v1 fields only) and points at the extender the sidecar
//! runs, the sidecar's flags parse, and the shared policy parses. Schema validation of the
//! Kubernetes objects is `scripts/deps/manifests.sh --check`.

use std::path::PathBuf;

use clap::Parser;
use serde::Deserialize;

fn deploy(path: &str) -> String {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KubeSchedulerConfiguration {
    api_version: String,
    kind: String,
    leader_election: LeaderElection,
    profiles: Vec<Profile>,
    extenders: Vec<Extender>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LeaderElection {
    leader_elect: bool,
    resource_namespace: String,
    resource_name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Profile {
    scheduler_name: String,
    plugins: Option<Plugins>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Plugins {
    score: Option<PluginSet>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // decoded so that a misspelt field fails
struct PluginSet {
    #[serde(default)]
    enabled: Vec<Plugin>,
    #[serde(default)]
    disabled: Vec<Plugin>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Plugin {
    name: String,
    weight: Option<i32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Extender {
    url_prefix: String,
    filter_verb: Option<String>,
    prioritize_verb: Option<String>,
    preempt_verb: Option<String>,
    bind_verb: Option<String>,
    weight: Option<i64>,
    node_cache_capable: bool,
    http_timeout: String,
    ignorable: bool,
    #[serde(rename = "enableHTTPS")]
    enable_https: Option<bool>,
    #[allow(dead_code)] // decoded so that a misspelt field fails
    tls_config: Option<serde_yaml::Value>,
    #[allow(dead_code)]
    managed_resources: Option<Vec<serde_yaml::Value>>,
}

/// The extender container's args in the scheduler Deployment.
fn sidecar_args() -> Vec<String> {
    let deployment: serde_yaml::Value =
        serde_yaml::from_str(&deploy("scheduler/deployment.yaml")).unwrap();
    let containers = deployment["spec"]["template"]["spec"]["containers"].as_sequence().unwrap();
    let extender = containers.iter().find(|c| c["name"] == "extender").expect("extender sidecar");
    let mut args = vec![extender["command"][0].as_str().unwrap().to_owned()];
    args.extend(
        extender["args"].as_sequence().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()),
    );
    args
}

#[test]
fn scheduler_configuration_decodes_and_targets_the_sidecar() {
    let config: KubeSchedulerConfiguration =
        serde_yaml::from_str(&deploy("scheduler/kube-scheduler-config.yaml")).unwrap();
    assert_eq!(config.api_version, "kubescheduler.config.k8s.io/v1");
    assert_eq!(config.kind, "KubeSchedulerConfiguration");
    assert!(config.leader_election.leader_elect);
    assert_eq!(config.leader_election.resource_namespace, "waterline");
    assert_ne!(config.leader_election.resource_name, "kube-scheduler", "own lease");
    assert_eq!(config.profiles.len(), 1);
    assert_eq!(config.profiles[0].scheduler_name, "waterline-scheduler");
    let disabled: Vec<&str> = config.profiles[0]
        .plugins
        .as_ref()
        .and_then(|p| p.score.as_ref())
        .map(|s| s.disabled.iter().map(|p| p.name.as_str()).collect())
        .unwrap_or_default();
    assert!(disabled.contains(&"NodeResourcesBalancedAllocation"), "{disabled:?}");

    let [extender] = config.extenders.as_slice() else { panic!("one extender") };
    assert!(extender.node_cache_capable && extender.ignorable);
    assert!(extender.weight.is_some_and(|w| w > 0), "prioritizeVerb needs weight > 0");
    assert_eq!(extender.bind_verb, None);
    assert_eq!(extender.preempt_verb, None);
    assert_eq!(extender.enable_https, Some(false));

    let args = waterline_extender::Args::try_parse_from(sidecar_args()).expect("sidecar flags");
    assert_eq!(
        extender.url_prefix,
        format!("http://{}{}", args.http_addr, args.prefix),
        "urlPrefix must reach the sidecar"
    );
    assert_eq!(extender.filter_verb.as_deref(), Some("filter"));
    assert_eq!(extender.prioritize_verb.as_deref(), Some("prioritize"));
    assert_eq!(args.scheduler_names, [config.profiles[0].scheduler_name.clone()]);
    let http_timeout = waterline_core::time::parse_duration(&extender.http_timeout).unwrap();
    assert!(
        http_timeout.as_std() > args.scorer_timeout,
        "the extender must answer (neutrally) before the scheduler gives up on it"
    );
}

#[test]
fn shared_policy_parses() {
    let policy = waterline_core::policy::parse_policy(&deploy("policy/policy.yaml")).unwrap();
    assert_eq!(policy.metrics.len(), 6);
    assert_eq!(policy.extender_score_mapping, waterline_core::policy::ScoreMapping::Round);
}

#[test]
fn example_pod_uses_the_waterline_scheduler() {
    let pod: serde_yaml::Value = serde_yaml::from_str(&deploy("examples/pod.yaml")).unwrap();
    assert_eq!(pod["spec"]["schedulerName"], "waterline-scheduler");
}
