//! The optional bind verb: the scheduler hands the binding to the extender, which must create
//! the pod's `pods/binding` subresource itself (docs/design.md#the-extender-protocol), then records
//! the placement with Reserve so the next pods see it at once.

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod as KubePod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;

use crate::pod::Pod;
use crate::scorer::ScorerClient;
use crate::wire::BindingArgs;

/// Why a bind failed; the message goes to the wire's `Error` field.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("PodName, PodNamespace and Node are required")]
    MissingField,
    #[error("get pod: {0}")]
    GetPod(#[source] kube::Error),
    #[error("the pod could not be read")]
    Unreadable,
    #[error("pod {namespace}/{name} has uid {actual}, not {expected}")]
    UidMismatch { namespace: String, name: String, actual: String, expected: String },
    #[error("create binding: {0}")]
    CreateBinding(#[source] kube::Error),
}

/// Creates Bindings through the Kubernetes API.
pub struct Binder {
    client: kube::Client,
}

impl Binder {
    pub fn new(client: kube::Client) -> Self {
        Binder { client }
    }

    /// In-cluster config, or KUBECONFIG / ~/.kube/config.
    pub async fn from_environment() -> Result<Self, kube::Error> {
        Ok(Binder::new(kube::Client::try_default().await?))
    }

    /// GET the pod (for its resources), create its Binding, then Reserve on the scorer.
    pub async fn bind(&self, scorer: &ScorerClient, args: &BindingArgs) -> Result<(), BindError> {
        if args.pod_name.is_empty() || args.pod_namespace.is_empty() || args.node.is_empty() {
            return Err(BindError::MissingField);
        }
        let pods: Api<KubePod> = Api::namespaced(self.client.clone(), &args.pod_namespace);
        let object = pods.get(&args.pod_name).await.map_err(BindError::GetPod)?;
        // The same reader as filter/prioritize, so Reserve sees the same requests.
        let pod: Pod = serde_json::to_vec(&object)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or(BindError::Unreadable)?;
        if !args.pod_uid.is_empty() && pod.metadata.uid != args.pod_uid {
            return Err(BindError::UidMismatch {
                namespace: args.pod_namespace.clone(),
                name: args.pod_name.clone(),
                actual: pod.metadata.uid.clone(),
                expected: args.pod_uid.clone(),
            });
        }
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(args.pod_name.clone()),
                namespace: Some(args.pod_namespace.clone()),
                uid: (!args.pod_uid.is_empty()).then(|| args.pod_uid.clone()),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Node".to_owned()),
                name: Some(args.node.clone()),
                ..Default::default()
            },
        };
        pods.create_subresource::<_, serde_json::Value>(
            "binding",
            &args.pod_name,
            &PostParams::default(),
            &binding,
        )
        .await
        .map_err(BindError::CreateBinding)?;
        scorer.reserve(pod.to_info(), &args.node, None).await;
        Ok(())
    }
}
