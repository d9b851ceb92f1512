//! Cluster mode's configuration: a namespace's resources over the
//! built-ins, and the resolved configuration an AgentExecution carries.

use std::collections::BTreeMap;

use tarsy_config::{Config, Defaults, Origin};
use tarsy_crds::ResolvedConfigSpec;
use tarsy_crds::config::from_resources;

#[test]
fn cluster_resources_override_builtins_and_validate() {
    let chain: tarsy_crds::Chain = serde_json::from_value(serde_json::json!({
        "apiVersion": "tarsy.dev/v1alpha1", "kind": "Chain", "metadata": {"name": "c", "namespace": "sre"},
        "spec": {"alertTypes": ["X"], "stages": [{"name": "s", "agent": "ghost"}]}
    }))
    .unwrap();
    let agent: tarsy_crds::Agent = serde_json::from_value(serde_json::json!({
        "apiVersion": "tarsy.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "KubernetesAgent"},
        "spec": {"customInstructions": "cluster version"}
    }))
    .unwrap();
    let c = from_resources(Defaults::default(), &[chain], &[agent], &[], &[]);
    assert_eq!(
        c.agent("KubernetesAgent")
            .unwrap()
            .spec
            .custom_instructions
            .as_deref(),
        Some("cluster version")
    );
    assert_eq!(c.agent("KubernetesAgent").unwrap().origin, Origin::Cluster);
    let errs: Vec<String> = c.validate().iter().map(ToString::to_string).collect();
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].starts_with("Chain \"c\": spec.stages[0].agent: unknown agent \"ghost\""),
        "{}",
        errs[0]
    );
    // The built-in configuration alone is valid.
    assert!(Config::builtin(Defaults::default()).validate().is_empty());
}

#[test]
fn resolved_config_round_trips_through_the_agent_execution_spec() {
    let c = Config::builtin(Defaults::default());
    let chain: tarsy_crds::ChainSpec = serde_json::from_value(serde_json::json!({
        "iterationTimeout": "90s",
        "stages": [{"name": "s", "agent": "KubernetesAgent", "replicas": 2}]
    }))
    .unwrap();
    let stage = &chain.stages[0];
    let exec = &c.stage_executions(stage)[1];
    let mut resolved = c
        .resolve_agent(&chain, stage, &exec.stage_agent, &exec.display_name)
        .unwrap();
    let selection = tarsy_core::McpSelection {
        servers: vec![tarsy_core::McpServerSelection {
            name: "kubernetes-server".into(),
            tools: Some(vec!["pods_list".into()]),
        }],
        native_tools: Some(BTreeMap::from([("google_search".to_string(), false)])),
    };
    c.apply_mcp_selection(&mut resolved, &selection).unwrap();
    let spec = ResolvedConfigSpec::from(&resolved);
    assert_eq!(spec.iteration_timeout, "90s");
    assert_eq!(spec.llm_provider, "google-default");
    // The spec is valid for the CRD (what the operator will create).
    let ae = serde_json::json!({
        "apiVersion": "tarsy.dev/v1alpha1", "kind": "AgentExecution", "metadata": {"name": "x"},
        "spec": {"sessionId": "s", "alertName": "a", "chain": "c", "stage": {"index": 1, "name": "s"},
                 "agentName": "KubernetesAgent", "displayName": "KubernetesAgent-2", "agentIndex": 2,
                 "kind": "investigation", "resolved": serde_json::to_value(&spec).unwrap()}
    });
    tarsy_config::schema::validate_object(&ae, None).unwrap();
    let back = spec
        .resolve(&c, &resolved.agent_name, &resolved.display_name)
        .unwrap();
    assert_eq!(back, resolved);
}
