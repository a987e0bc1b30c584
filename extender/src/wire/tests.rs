//! Golden bodies: the upstream fixture strings of kube-scheduler's extender/v1
//! `types_test.go` (`TestCompatibility`) and richer ones written by hand the way Go's
//! encoding/json marshals these types (field order, explicit nulls) — never produced by our
//! own serializer.

use super::*;

/// `ExtenderArgs` from types_test.go (sets both Nodes and NodeNames to exercise the codec).
const UPSTREAM_ARGS: &str = r#"{"Pod":{"metadata":{"name":"podname"},"spec":{"containers":null},"status":{}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"nodename"},"spec":{},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},"nodeInfo":{"machineID":"","systemUUID":"","bootID":"","kernelVersion":"","osImage":"","containerRuntimeVersion":"","kubeletVersion":"","kubeProxyVersion":"","operatingSystem":"","architecture":""}}}]},"NodeNames":["node1"]}"#;

const UPSTREAM_NODE: &str = r#"{"metadata":{"name":"nodename"},"spec":{},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},"nodeInfo":{"machineID":"","systemUUID":"","bootID":"","kernelVersion":"","osImage":"","containerRuntimeVersion":"","kubeletVersion":"","kubeProxyVersion":"","operatingSystem":"","architecture":""}}}"#;

#[test]
fn upstream_extender_args_decode() {
    let args: ExtenderArgs = serde_json::from_str(UPSTREAM_ARGS).unwrap();
    assert_eq!(args.pod.unwrap().metadata.name, "podname");
    assert_eq!(args.node_names.as_deref(), Some(&["node1".to_owned()][..]));
    let nodes = args.nodes.unwrap();
    assert_eq!(nodes.items().len(), 1);
    // Raw objects are the exact bytes sent.
    assert_eq!(nodes.items()[0].get(), UPSTREAM_NODE);
    assert_eq!(node_name(nodes.items()[0]).unwrap(), "nodename");
}

#[test]
fn names_only_args_carry_an_explicit_null_nodes() {
    let body = r#"{"Pod":{"metadata":{"name":"p","namespace":"default","uid":"u"},"spec":{"containers":[{"name":"c","resources":{}}],"schedulerName":"waterline-scheduler"},"status":{}},"Nodes":null,"NodeNames":["n1","n2"]}"#;
    let args: ExtenderArgs = serde_json::from_str(body).unwrap();
    assert!(args.nodes.is_none());
    assert_eq!(args.node_names.unwrap(), ["n1", "n2"]);
}

#[test]
fn filter_result_marshals_like_go_for_names() {
    let result = FilterResult {
        nodes: None,
        node_names: Some(vec!["node1".into()]),
        failed_nodes: [("foo".to_owned(), "bar".to_owned())].into(),
        failed_and_unresolvable_nodes: None,
        error: String::new(),
    };
    // Go: nil *NodeList → null, nil map → null, fields in declaration order.
    assert_eq!(
        serde_json::to_string(&result).unwrap(),
        r#"{"Nodes":null,"NodeNames":["node1"],"FailedNodes":{"foo":"bar"},"FailedAndUnresolvableNodes":null,"Error":""}"#
    );
}

#[test]
fn filter_result_passes_node_objects_through_unchanged() {
    let args: ExtenderArgs = serde_json::from_str(UPSTREAM_ARGS).unwrap();
    let list = args.nodes.unwrap();
    let result = FilterResult {
        nodes: Some(list.with_items(list.items().to_vec())),
        node_names: None,
        failed_nodes: FailedNodesMap::new(),
        failed_and_unresolvable_nodes: Some([("baz".to_owned(), "qux".to_owned())].into()),
        error: "myerror".into(),
    };
    let want = format!(
        r#"{{"Nodes":{{"metadata":{{}},"items":[{UPSTREAM_NODE}]}},"NodeNames":null,"FailedNodes":{{}},"FailedAndUnresolvableNodes":{{"baz":"qux"}},"Error":"myerror"}}"#
    );
    assert_eq!(serde_json::to_string(&result).unwrap(), want);
}

#[test]
fn node_list_type_meta_and_missing_metadata_survive() {
    let raw = r#"{"kind":"NodeList","apiVersion":"v1","items":[{"metadata":{"name":"a"}}]}"#;
    let list: NodeList = serde_json::from_str(raw).unwrap();
    assert_eq!(
        serde_json::to_string(&list.with_items(vec![])).unwrap(),
        r#"{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[]}"#
    );
}

#[test]
fn host_priority_list_is_a_bare_array() {
    let list = vec![HostPriority { host: "myhost".into(), score: 1 }];
    assert_eq!(serde_json::to_string(&list).unwrap(), r#"[{"Host":"myhost","Score":1}]"#);
    let back: HostPriority = serde_json::from_str(r#"{"Host":"myhost","Score":1}"#).unwrap();
    assert_eq!(back, list[0]);
}

#[test]
fn binding_args_and_result() {
    let args: BindingArgs = serde_json::from_str(
        r#"{"PodName":"mypodname","PodNamespace":"mypodnamespace","PodUID":"mypoduid","Node":"mynode"}"#,
    )
    .unwrap();
    assert_eq!(
        (
            args.pod_name.as_str(),
            args.pod_namespace.as_str(),
            args.pod_uid.as_str(),
            args.node.as_str()
        ),
        ("mypodname", "mypodnamespace", "mypoduid", "mynode")
    );
    let result = ErrorResult { error: "myerror".into() };
    assert_eq!(serde_json::to_string(&result).unwrap(), r#"{"Error":"myerror"}"#);
}

const UPSTREAM_PREEMPTION_RESULT: &str =
    r#"{"NodeNameToMetaVictims":{"foo":{"Pods":[{"UID":"myuid"}],"NumPDBViolations":1}}}"#;

#[test]
fn preemption_with_meta_victims_is_echoed() {
    let body = r#"{"Pod":{"metadata":{"name":"p"},"spec":{"containers":null},"status":{}},"NodeNameToVictims":null,"NodeNameToMetaVictims":{"foo":{"Pods":[{"UID":"myuid"}],"NumPDBViolations":1}}}"#;
    let args: PreemptionArgs = serde_json::from_str(body).unwrap();
    assert_eq!(serde_json::to_string(&args.unchanged()).unwrap(), UPSTREAM_PREEMPTION_RESULT);
}

#[test]
fn preemption_with_full_victims_becomes_meta() {
    let body = r#"{"Pod":{"metadata":{"name":"p"},"spec":{"containers":null},"status":{}},"NodeNameToVictims":{"foo":{"Pods":[{"metadata":{"name":"v","namespace":"d","uid":"myuid","labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i","resources":{}}]},"status":{"phase":"Running"}}],"NumPDBViolations":1},"bar":{"Pods":null,"NumPDBViolations":0}},"NodeNameToMetaVictims":null}"#;
    let args: PreemptionArgs = serde_json::from_str(body).unwrap();
    // Go marshals map keys sorted.
    assert_eq!(
        serde_json::to_string(&args.unchanged()).unwrap(),
        r#"{"NodeNameToMetaVictims":{"bar":{"Pods":null,"NumPDBViolations":0},"foo":{"Pods":[{"UID":"myuid"}],"NumPDBViolations":1}}}"#
    );
}

#[test]
fn preemption_without_candidates_answers_null() {
    let args: PreemptionArgs = serde_json::from_str(
        r#"{"Pod":{"metadata":{}},"NodeNameToVictims":null,"NodeNameToMetaVictims":null}"#,
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&args.unchanged()).unwrap(),
        r#"{"NodeNameToMetaVictims":null}"#
    );
}
