//! The pod of a request and its candidate names.

use waterline_api::v1 as pb;
use waterline_core::Pod;
use waterline_core::pod::Overrides;

use crate::{ConvertError, FromProto};

impl FromProto for Pod {
    type Proto = pb::PodInfo;

    /// Negative quantities are errors naming the field, as are bad values of the
    /// `waterline.io/` annotations (naming the annotation); other annotations are ignored.
    fn from_proto(pod: &pb::PodInfo) -> Result<Pod, ConvertError> {
        let quantities = [
            ("pod.cpu_request_millis", pod.cpu_request_millis),
            ("pod.cpu_limit_millis", pod.cpu_limit_millis),
            ("pod.memory_request_bytes", pod.memory_request_bytes),
            ("pod.memory_limit_bytes", pod.memory_limit_bytes),
        ];
        if let Some(&(field, value)) = quantities.iter().find(|(_, v)| *v < 0) {
            return Err(ConvertError::Negative { field, value });
        }
        let overrides = Overrides::from_annotations(&pod.annotations)?;
        Ok(Pod {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
            labels: pod.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            cpu_request_millis: pod.cpu_request_millis,
            cpu_limit_millis: pod.cpu_limit_millis,
            memory_request_bytes: pod.memory_request_bytes,
            memory_limit_bytes: pod.memory_limit_bytes,
            owner_kind: pod.owner_kind.clone(),
            owner_name: pod.owner_name.clone(),
            priority: pod.priority,
            overrides,
        })
    }
}

/// The pod of a request (proto3 makes message fields optional; a request needs one).
pub fn required_pod(pod: Option<&pb::PodInfo>) -> Result<Pod, ConvertError> {
    Pod::from_proto(pod.ok_or(ConvertError::NoPod)?)
}

/// Candidate node names: not empty, none blank, at most `max_nodes`.
pub fn check_node_names(names: &[String], max_nodes: usize) -> Result<(), ConvertError> {
    if names.is_empty() {
        return Err(ConvertError::NoNodeNames);
    }
    if names.len() > max_nodes {
        return Err(ConvertError::TooManyNodes { count: names.len(), limit: max_nodes });
    }
    if let Some(i) = names.iter().position(|n| n.is_empty()) {
        return Err(ConvertError::BlankNodeName(i));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_quantities_are_named() {
        let pod = pb::PodInfo { memory_limit_bytes: -5, ..Default::default() };
        assert_eq!(
            Pod::from_proto(&pod).unwrap_err().to_string(),
            "pod.memory_limit_bytes must not be negative (got -5)"
        );
        assert_eq!(required_pod(None).unwrap_err().to_string(), "pod is required");
    }

    #[test]
    fn owner_priority_and_overrides_cross_into_the_domain() {
        let pod = pb::PodInfo {
            owner_kind: "ReplicaSet".into(),
            owner_name: "web-5d8f".into(),
            priority: 9000,
            annotations: [
                ("waterline.io/estimate-factor".to_string(), "1.5".to_string()),
                ("waterline.io/load-filter".to_string(), "off".to_string()),
            ]
            .into(),
            ..Default::default()
        };
        let domain = Pod::from_proto(&pod).unwrap();
        assert_eq!((domain.owner_name.as_str(), domain.priority), ("web-5d8f", 9000));
        assert_eq!(
            domain.overrides,
            Overrides { estimate_factor: Some(1.5), load_filter_off: true }
        );
        let bad = pb::PodInfo {
            annotations: [("waterline.io/estimate-factor".to_string(), "x".to_string())].into(),
            ..Default::default()
        };
        let err = Pod::from_proto(&bad).unwrap_err().to_string();
        assert!(err.starts_with("pod annotation waterline.io/estimate-factor:"), "{err}");
    }

    #[test]
    fn node_name_checks() {
        assert_eq!(
            check_node_names(&[], 10).unwrap_err().to_string(),
            "node_names must not be empty"
        );
        let many: Vec<String> = (0..11).map(|i| i.to_string()).collect();
        assert!(check_node_names(&many, 10).unwrap_err().to_string().contains("limit of 10"));
        assert_eq!(
            check_node_names(&["a".into(), "".into()], 10).unwrap_err().to_string(),
            "node_names[1] is empty"
        );
        assert!(check_node_names(&["a".into()], 10).is_ok());
    }
}
