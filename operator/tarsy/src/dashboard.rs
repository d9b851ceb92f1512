//! What `tarsy serve` and `tarsy api` give the API for the dashboard: the
//! embedded files, the configuration view and (cluster mode) the Kubernetes
//! objects behind a session.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use tarsy_api::{
    AgentView, AlertObject, ChainView, ClusterObjectsSource, Dashboard, ExecutionObject,
    LlmProviderView, McpServerView, SessionObjects, StageView, SystemConfiguration,
    SystemConfigurationSource,
};
use tarsy_config::{Config, Defaults};
use tarsy_crds::contract::{LABEL_SESSION, label_value};
use tarsy_crds::{AgentExecution, Alert, MCPServerSpec};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/dashboard_assets.rs"));
}

/// The dashboard built into this binary (empty when it was not built).
pub fn dashboard() -> Dashboard {
    Dashboard::new(embedded::ASSETS)
}

/// The wire name of a serde enum (`"openai"`, `"any"`, ...).
fn wire<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

fn transport(spec: &MCPServerSpec) -> &'static str {
    if spec.container.is_some() {
        "container"
    } else if spec.stdio.is_some() {
        "stdio"
    } else {
        "http"
    }
}

/// The configuration as the dashboard shows it: structure and names, never
/// a secret, a command line, a URL or a header.
pub fn configuration_view(
    config: &Config,
    mode: &str,
    namespace: Option<String>,
) -> SystemConfiguration {
    let chains = config
        .chains()
        .map(|c| {
            let spec = &c.spec;
            ChainView {
                name: c.name.clone(),
                alert_types: spec.alert_types.clone(),
                stages: spec
                    .stages
                    .iter()
                    .map(|s| {
                        let mut agents: Vec<String> =
                            s.agents.iter().flatten().map(|a| a.name.clone()).collect();
                        agents.extend(s.agent.clone());
                        StageView {
                            name: s.name.clone(),
                            replicas: s.replicas_count(),
                            success_policy: s.success_policy.as_ref().map(wire),
                            synthesis_agent: s.synthesis.as_ref().and_then(|y| y.agent.clone()),
                            agents,
                        }
                    })
                    .collect(),
                llm_provider: spec.llm_provider.clone(),
                iteration_strategy: spec.iteration_strategy.map(|s| s.as_str().to_string()),
                mcp_servers: spec.mcp_servers.clone().unwrap_or_default(),
                chat_enabled: tarsy_config::chat_enabled(spec),
                session_timeout: spec.session_timeout.clone(),
                origin: c.origin.to_string(),
            }
        })
        .collect();
    let agents = config
        .agents()
        .map(|a| AgentView {
            name: a.name.clone(),
            description: a.spec.description.clone(),
            mcp_servers: a.spec.mcp_servers.clone().unwrap_or_default(),
            iteration_strategy: a.spec.iteration_strategy.map(|s| s.as_str().to_string()),
            max_iterations: a.spec.max_iterations,
            origin: a.origin.to_string(),
        })
        .collect();
    let llm_providers = config
        .llm_providers()
        .map(|p| LlmProviderView {
            name: p.name.clone(),
            provider_type: wire(&p.spec.provider_type),
            model: p.spec.model.clone(),
            context_window_tokens: p.spec.context_window_tokens,
            fallback: p.spec.fallback.clone().unwrap_or_default(),
            origin: p.origin.to_string(),
        })
        .collect();
    let mcp_servers = config
        .mcp_servers()
        .map(|m| McpServerView {
            name: m.name.clone(),
            transport: transport(&m.spec).to_string(),
            instructions: m.spec.instructions.clone(),
            origin: m.origin.to_string(),
        })
        .collect();
    SystemConfiguration {
        mode: mode.to_string(),
        namespace,
        chains,
        agents,
        llm_providers,
        mcp_servers,
    }
}

/// Local mode: the configuration loaded at start (it does not change while
/// `tarsy serve` runs).
pub struct StaticConfiguration(pub SystemConfiguration);

#[async_trait]
impl SystemConfigurationSource for StaticConfiguration {
    async fn configuration(&self) -> Result<SystemConfiguration, String> {
        Ok(self.0.clone())
    }
}

/// Cluster mode: the namespace's Chain, Agent, MCPServer and LLMProvider
/// resources over the built-ins, listed on each request (as alert
/// submission does), and the Alert and AgentExecutions behind sessions.
pub struct ClusterView {
    client: Client,
    namespace: String,
    defaults: Defaults,
}

impl ClusterView {
    /// A view of one namespace.
    pub fn new(client: Client, namespace: String, defaults: Defaults) -> Arc<Self> {
        Arc::new(Self {
            client,
            namespace,
            defaults,
        })
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }
}

#[async_trait]
impl SystemConfigurationSource for ClusterView {
    async fn configuration(&self) -> Result<SystemConfiguration, String> {
        let config =
            tarsy_cluster_control::namespace_config(&self.client, &self.namespace, &self.defaults)
                .await
                .map_err(|e| e.to_string())?;
        Ok(configuration_view(
            &config,
            "cluster",
            Some(self.namespace.clone()),
        ))
    }
}

#[async_trait]
impl ClusterObjectsSource for ClusterView {
    async fn session_objects(&self, session_id: &str) -> Result<SessionObjects, String> {
        // The operator labels executions with the session id as a label value.
        let selector = format!("{LABEL_SESSION}={}", label_value(session_id));
        let executions = self
            .api::<AgentExecution>()
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| e.to_string())?;
        let mut by_id = BTreeMap::new();
        let mut alert_name = None;
        for ae in &executions.items {
            alert_name.get_or_insert_with(|| ae.spec.alert_name.clone());
            let status = ae.status.as_ref();
            let id = tarsy_exec::ids::execution_id(
                &ae.spec.session_id,
                ae.spec.stage.index,
                ae.spec.agent_index,
            );
            by_id.insert(
                id,
                ExecutionObject {
                    namespace: self.namespace.clone(),
                    name: ae.name_any(),
                    phase: status.and_then(|s| s.phase.as_ref()).map(wire),
                    pod_name: status.and_then(|s| s.pod_name.clone()),
                },
            );
        }
        let alerts = self.api::<Alert>();
        // Selectors cannot match UIDs: without an execution naming it, the
        // Alert is found among the namespace's Alerts' metadata.
        if alert_name.is_none() {
            let list = alerts
                .list_metadata(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            alert_name = list
                .items
                .into_iter()
                .find(|a| a.metadata.uid.as_deref() == Some(session_id))
                .and_then(|a| a.metadata.name);
        }
        let alert = match alert_name {
            Some(name) => alerts
                .get_opt(&name)
                .await
                .map_err(|e| e.to_string())?
                .filter(|a| a.metadata.uid.as_deref() == Some(session_id))
                .map(|a| AlertObject {
                    namespace: self.namespace.clone(),
                    phase: a.status.as_ref().and_then(|s| s.phase.as_ref()).map(wire),
                    name,
                }),
            None => None,
        };
        Ok(SessionObjects {
            alert,
            executions: by_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tarsy_crds::Chain;

    #[test]
    fn configuration_view_names_no_secret() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/config");
        let config = tarsy_config::load_dir(&dir).expect("the example configuration loads");
        let view = configuration_view(&config, "local", None);
        let chain = view
            .chains
            .iter()
            .find(|c| c.name == "pod-crashloop")
            .expect("the example chain");
        assert_eq!(chain.alert_types, ["PodCrashLooping"]);
        assert_eq!(chain.stages.len(), 2);
        assert!(chain.chat_enabled);
        let gemini = view
            .llm_providers
            .iter()
            .find(|p| p.name == "gemini")
            .expect("the example's real provider");
        assert_eq!(gemini.provider_type, "google");
        let text = serde_json::to_string(&view).expect("serializes");
        // The key's variable name and the MCP server's command stay out.
        assert!(!text.contains("GOOGLE_API_KEY"));
        assert!(!text.contains("mcp-replay"));
        assert!(!text.contains("checkout-api-crashloop"));
    }

    /// The first document of a file of `crds/examples`.
    fn example<T: serde::de::DeserializeOwned>(file: &str) -> T {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../crds/examples")
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
            config.agents.iter().any(|a| a.name == "KubernetesAgent"),
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
        let id =
            tarsy_exec::ids::execution_id(&session_id, ae.spec.stage.index, ae.spec.agent_index);
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
}
