//! The cluster view against the Kubernetes API emulator.

use kube::ResourceExt;
use kube::api::Api;
use tarsy_api::{ClusterObjectsSource, SystemConfigurationSource};
use tarsy_cluster_control::objects::ClusterView;
use tarsy_config::Defaults;
use tarsy_crds::contract::LABEL_SESSION;
use tarsy_crds::{AgentExecution, Alert, Chain};

/// The first document of a file of `kubernetes/crds/examples`.
fn example<T: serde::de::DeserializeOwned>(file: &str) -> T {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crds/examples")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("the example exists");
    let first = text.split("\n---").next().expect("a first document");
    serde_yaml::from_str(first).expect("the example parses")
}

/// The cluster view against the Kubernetes API emulator: configuration
/// from the namespace's resources, a session's Alert, and its
/// AgentExecution with pod and phase.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_view_finds_the_objects_behind_a_session() {
    use kube::api::{Patch, PatchParams, PostParams};
    let dir = std::env::temp_dir().join(format!("tarsy-dash-view-{}", uuid::Uuid::new_v4()));
    let emulator = tarsy_kube_harness::Emulator::start(
        tarsy_kube_harness::EmulatorOptions::new(&dir).with_log(dir.join("emulator.log")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let client = emulator.client().await.expect("a client");
    let ns = "default";
    let view = ClusterView::new(client.clone(), ns.to_string(), Defaults::default());

    let mut chain: Chain = example("chains.yaml");
    chain.metadata.namespace = Some(ns.into());
    Api::<Chain>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &chain)
        .await
        .expect("chain created");
    let config = view.configuration().await.expect("configuration");
    assert_eq!(config.mode, "cluster");
    assert_eq!(config.namespace.as_deref(), Some(ns));
    assert!(
        config
            .chains
            .iter()
            .any(|c| Some(&c.name) == chain.metadata.name.as_ref())
    );
    assert!(
        config.agents.iter().any(|a| a.name == "kubernetes-agent"),
        "built-ins included"
    );

    let mut alert: Alert = example("alerts.yaml");
    alert.metadata.namespace = Some(ns.into());
    let alert = Api::<Alert>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &alert)
        .await
        .expect("alert created");
    let session_id = alert.metadata.uid.clone().expect("a uid");
    let alert_name = alert.name_any();

    // Before any execution exists, the Alert is found by its UID.
    let objects = view.session_objects(&session_id).await.expect("objects");
    assert_eq!(
        objects.alert.as_ref().map(|a| a.name.as_str()),
        Some(alert_name.as_str())
    );
    assert!(objects.executions.is_empty());

    let mut ae: AgentExecution = example("agentexecutions.yaml");
    ae.metadata.namespace = Some(ns.into());
    ae.metadata.labels = Some(
        [(LABEL_SESSION.to_string(), session_id.clone())]
            .into_iter()
            .collect(),
    );
    ae.spec.session_id = session_id.clone();
    ae.spec.alert_name = alert_name.clone();
    ae.status = None;
    let executions = Api::<AgentExecution>::namespaced(client.clone(), ns);
    let ae = executions
        .create(&PostParams::default(), &ae)
        .await
        .expect("execution created");
    executions
        .patch_status(
            &ae.name_any(),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {
                "phase": "Active", "podName": "pod-1"}})),
        )
        .await
        .expect("status patched");

    let objects = view.session_objects(&session_id).await.expect("objects");
    assert_eq!(
        objects.alert.as_ref().map(|a| a.name.as_str()),
        Some(alert_name.as_str())
    );
    // Keyed by its Postgres id, known before its runner reports it.
    let id = tarsy_exec::ids::execution_id(&session_id, ae.spec.stage.index, ae.spec.agent_index);
    let execution = objects
        .executions
        .get(&id)
        .expect("the execution by its id");
    assert_eq!(execution.name, ae.name_any());
    assert_eq!(execution.phase.as_deref(), Some("Active"));
    assert_eq!(execution.pod_name.as_deref(), Some("pod-1"));
    assert_eq!(execution.namespace, ns);

    // Another session: nothing.
    let none = view.session_objects("no-such-uid").await.expect("objects");
    assert!(none.alert.is_none() && none.executions.is_empty());
    drop(emulator);
    let _ = std::fs::remove_dir_all(&dir);
}
