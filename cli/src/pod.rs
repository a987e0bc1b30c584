//! The pod a command asks about: a `v1.Pod` manifest (YAML or JSON, read by the extender's
//! reader so the requests are the ones the scheduler's path computes) and/or flags.

use std::path::Path;

use anyhow::{Context, Result, bail};
use waterline_api::v1 as pb;
use waterline_core::quantity::{parse_bytes, parse_cpu_millis};

/// The pod's size and identity, as flags; each one set overrides the manifest's value.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct PodFlags {
    /// cpu request, a Kubernetes quantity (500m, 2).
    #[arg(long, value_parser = cpu_millis)]
    pub cpu: Option<i64>,
    /// memory request, a Kubernetes quantity (512Mi, 4Gi).
    #[arg(long, value_parser = bytes)]
    pub memory: Option<i64>,
    /// cpu limit.
    #[arg(long, value_parser = cpu_millis)]
    pub cpu_limit: Option<i64>,
    /// memory limit.
    #[arg(long, value_parser = bytes)]
    pub memory_limit: Option<i64>,
    /// The pod's namespace (anti-colocation rules match it).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// The pod's name.
    #[arg(long)]
    pub name: Option<String>,
    /// Labels, key=value[,key=value…] (anti-colocation rules match them).
    #[arg(long, short = 'l', value_parser = label, value_delimiter = ',')]
    pub labels: Vec<(String, String)>,
    /// Kind of the controlling owner (DaemonSet pods bypass the load filters).
    #[arg(long)]
    pub owner_kind: Option<String>,
    /// Name of the controlling owner (a ReplicaSet's name for a Deployment's pod, with its
    /// pod-template-hash label): with the kind and namespace, the workload whose learned
    /// usage prices the pod.
    #[arg(long)]
    pub owner_name: Option<String>,
}

fn cpu_millis(text: &str) -> Result<i64, String> {
    parse_cpu_millis(text).map_err(|e| e.to_string())
}

fn bytes(text: &str) -> Result<i64, String> {
    parse_bytes(text).map_err(|e| e.to_string())
}

fn label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not key=value")),
    }
}

/// The uid a pod without one is sent with: never a real pod's, so no ledger entry is
/// mistaken for this pod's own.
pub const PROBE_UID: &str = "waterline-cli-probe";

/// The pod of `manifest` (when given) with `flags` applied on top.
pub fn pod_info(
    manifest: Option<&Path>,
    flags: &PodFlags,
    default_name: &str,
) -> Result<pb::PodInfo> {
    let mut pod = match manifest {
        None => pb::PodInfo::default(),
        Some(path) => {
            let text = if path == Path::new("-") {
                std::io::read_to_string(std::io::stdin()).context("reading the pod from stdin")?
            } else {
                std::fs::read_to_string(path)
                    .with_context(|| format!("reading the pod manifest {}", path.display()))?
            };
            parse_manifest(&text).with_context(|| format!("pod manifest {}", path.display()))?
        }
    };
    apply(&mut pod, flags);
    if pod.name.is_empty() {
        pod.name = default_name.to_owned();
    }
    if pod.namespace.is_empty() {
        pod.namespace = "default".to_owned();
    }
    if pod.uid.is_empty() {
        pod.uid = PROBE_UID.to_owned();
    }
    Ok(pod)
}

fn apply(pod: &mut pb::PodInfo, flags: &PodFlags) {
    let set = |field: &mut i64, value: Option<i64>| {
        if let Some(v) = value {
            *field = v;
        }
    };
    set(&mut pod.cpu_request_millis, flags.cpu);
    set(&mut pod.memory_request_bytes, flags.memory);
    set(&mut pod.cpu_limit_millis, flags.cpu_limit);
    set(&mut pod.memory_limit_bytes, flags.memory_limit);
    for (target, value) in [
        (&mut pod.namespace, &flags.namespace),
        (&mut pod.name, &flags.name),
        (&mut pod.owner_kind, &flags.owner_kind),
        (&mut pod.owner_name, &flags.owner_name),
    ] {
        if let Some(v) = value {
            target.clone_from(v);
        }
    }
    pod.labels.extend(flags.labels.iter().cloned());
}

#[derive(serde::Deserialize)]
struct Kind {
    #[serde(default)]
    kind: Option<String>,
}

/// A `v1.Pod` in YAML or JSON (JSON is YAML). Errors name the field and the line.
pub fn parse_manifest(text: &str) -> Result<pb::PodInfo> {
    let kind: Kind = serde_yaml::from_str(text).context("not a YAML or JSON object")?;
    match kind.kind.as_deref() {
        None | Some("Pod") => {}
        Some(other) => bail!(
            "kind is {other}; explain takes a Pod (for a workload, its pod template as a Pod)"
        ),
    }
    let deserializer = serde_yaml::Deserializer::from_str(text);
    let pod: waterline_extender::pod::Pod = serde_path_to_error::deserialize(deserializer)
        .map_err(|e| anyhow::anyhow!("{}: {}", e.path(), e.inner()))?;
    Ok(pod.to_info())
}

/// `cpu 2 / memory 4Gi requested` and the limits when set, for headers.
pub fn describe(pod: &pb::PodInfo) -> String {
    use crate::format::{bytes, cpu};
    let mut parts = Vec::new();
    let quantity =
        |value: i64, show: fn(i64) -> String| if value > 0 { show(value) } else { "-".into() };
    parts.push(format!(
        "requests cpu {} memory {}",
        quantity(pod.cpu_request_millis, cpu),
        quantity(pod.memory_request_bytes, bytes)
    ));
    if pod.cpu_limit_millis > 0 || pod.memory_limit_bytes > 0 {
        parts.push(format!(
            "limits cpu {} memory {}",
            quantity(pod.cpu_limit_millis, cpu),
            quantity(pod.memory_limit_bytes, bytes)
        ));
    }
    if pod.cpu_request_millis == 0
        && pod.memory_request_bytes == 0
        && pod.cpu_limit_millis == 0
        && pod.memory_limit_bytes == 0
    {
        parts.push("best-effort: the policy's estimator sizes it".into());
    }
    if !pod.labels.is_empty() {
        let mut pairs: Vec<String> = pod.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        pairs.sort();
        parts.push(format!("labels {}", pairs.join(",")));
    }
    format!("{}/{}: {}", pod.namespace, pod.name, parts.join("; "))
}

/// The pod as it was sent, for `-o json`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PodJson {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: std::collections::BTreeMap<String, String>,
    pub cpu_request_millis: i64,
    pub cpu_limit_millis: i64,
    pub memory_request_bytes: i64,
    pub memory_limit_bytes: i64,
    pub owner_kind: String,
}

impl From<&pb::PodInfo> for PodJson {
    fn from(p: &pb::PodInfo) -> PodJson {
        PodJson {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            uid: p.uid.clone(),
            labels: p.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            cpu_request_millis: p.cpu_request_millis,
            cpu_limit_millis: p.cpu_limit_millis,
            memory_request_bytes: p.memory_request_bytes,
            memory_limit_bytes: p.memory_limit_bytes,
            owner_kind: p.owner_kind.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: shop
  labels: {app: web}
spec:
  containers:
    - name: a
      resources:
        requests: {cpu: 500m, memory: 1Gi}
        limits: {cpu: 2}
    - name: b
      resources:
        requests: {cpu: 250m}
";

    #[test]
    fn a_manifest_sums_its_containers() {
        let pod = parse_manifest(MANIFEST).unwrap();
        assert_eq!((pod.namespace.as_str(), pod.name.as_str()), ("shop", "web-1"));
        assert_eq!(pod.cpu_request_millis, 750);
        assert_eq!(pod.memory_request_bytes, 1 << 30);
        assert_eq!(pod.labels.get("app").map(String::as_str), Some("web"));
    }

    #[test]
    fn json_is_read_too() {
        let json = r#"{"kind": "Pod", "metadata": {"name": "j"},
            "spec": {"containers": [{"resources": {"requests": {"memory": "2Gi"}}}]}}"#;
        let pod = parse_manifest(json).unwrap();
        assert_eq!(pod.memory_request_bytes, 2 << 30);
    }

    #[test]
    fn a_bad_quantity_names_the_field_and_line() {
        let bad = MANIFEST.replace("cpu: 250m", "cpu: lots");
        let error = format!("{:#}", parse_manifest(&bad).unwrap_err());
        assert!(error.contains("spec.containers[1].resources.requests.cpu"), "{error}");
        assert!(error.contains("line 15"), "{error}");
    }

    #[test]
    fn another_kind_is_refused_by_name() {
        let error = parse_manifest("kind: Deployment\n").unwrap_err().to_string();
        assert!(error.contains("kind is Deployment"), "{error}");
    }

    #[test]
    fn flags_override_the_manifest_and_fill_identity() {
        let flags = PodFlags {
            cpu: Some(3000),
            labels: vec![("tier".into(), "front".into())],
            ..PodFlags::default()
        };
        let mut pod = parse_manifest(MANIFEST).unwrap();
        apply(&mut pod, &flags);
        assert_eq!(pod.cpu_request_millis, 3000);
        assert_eq!(pod.memory_request_bytes, 1 << 30, "unset flags keep the manifest's");
        assert_eq!(pod.labels.len(), 2);

        let bare = pod_info(None, &PodFlags::default(), "probe").unwrap();
        assert_eq!(
            (bare.namespace.as_str(), bare.name.as_str(), bare.uid.as_str()),
            ("default", "probe", PROBE_UID)
        );
    }

    #[test]
    fn label_flags_need_key_equals_value() {
        assert_eq!(label("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert!(label("novalue").is_err());
        assert!(label("=x").is_err());
    }
}
