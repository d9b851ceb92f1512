//! Read-only views the dashboard shows beside sessions: the configuration
//! (`GET /api/v1/system/configuration`) and, in cluster mode, the
//! Kubernetes objects behind a session (optional `cluster` fields of
//! `GET /api/v1/sessions/{id}`). Both come from sources the binary plugs in
//! through [`crate::ApiConfig`]; without one, the endpoint answers 404 and the
//! fields are absent.
//!
//! The configuration view carries names, models, strategies and structure,
//! never a secret value: no API keys, no secret references, no MCP server
//! commands, environments, URLs or headers (any of which may embed a token).

use async_trait::async_trait;
use serde::Serialize;
use tarsy_config::Config;
use tarsy_config::model::MCPServerSpec;
use utoipa::ToSchema;

/// The configuration as the dashboard shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct SystemConfiguration {
    /// `local` (`tarsy serve`) or `cluster` (`tarsy api`).
    pub mode: String,
    /// The namespace the configuration is read from (cluster mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Chains, by name.
    pub chains: Vec<ChainView>,
    /// Agents (built-in and configured), by name.
    pub agents: Vec<AgentView>,
    /// LLM providers, by name.
    pub llm_providers: Vec<LlmProviderView>,
    /// MCP servers, by name.
    pub mcp_servers: Vec<McpServerView>,
}

/// One chain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct ChainView {
    /// Name.
    pub name: String,
    /// Alert types it handles.
    pub alert_types: Vec<String>,
    /// Stages in order.
    pub stages: Vec<ChainStageView>,
    /// Chain-level LLM provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_provider: Option<String>,
    /// Chain-level iteration strategy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iteration_strategy: Option<String>,
    /// Chain-level MCP servers.
    pub mcp_servers: Vec<String>,
    /// Follow-up chat is enabled.
    pub chat_enabled: bool,
    /// Session timeout as configured (Go duration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_timeout: Option<String>,
    /// `built-in`, `cluster` or the file it came from.
    pub origin: String,
}

/// One stage of a chain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct ChainStageView {
    /// Name.
    pub name: String,
    /// Agents (one entry per configured agent; replicas are a count).
    pub agents: Vec<String>,
    /// Replicas of a single agent (1 when not replicated).
    pub replicas: u32,
    /// `all` or `any`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<String>,
    /// The synthesis agent when the stage runs several executions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthesis_agent: Option<String>,
}

/// One agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct AgentView {
    /// Name (what chains refer to).
    pub name: String,
    /// How prompts, timelines and the dashboard call it (`spec.displayName`,
    /// else the name).
    pub label: String,
    /// What it is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MCP servers it uses.
    pub mcp_servers: Vec<String>,
    /// Its iteration strategy, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iteration_strategy: Option<String>,
    /// Its iteration limit, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// `built-in`, `cluster` or the file it came from.
    pub origin: String,
}

/// One LLM provider (no credentials).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct LlmProviderView {
    /// Name.
    pub name: String,
    /// Provider type (`google`, `openai`, `scripted`, ...).
    #[serde(rename = "type")]
    pub provider_type: String,
    /// Model.
    pub model: String,
    /// Context window, when configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window_tokens: Option<u64>,
    /// Providers tried in order when this one fails.
    pub fallback: Vec<String>,
    /// `built-in`, `cluster` or the file it came from.
    pub origin: String,
}

/// One MCP server (its transport only: commands, URLs and headers may hold
/// secrets).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct McpServerView {
    /// Name.
    pub name: String,
    /// `stdio`, `container` or `http`.
    pub transport: String,
    /// Instructions given to agents about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// `built-in`, `cluster` or the file it came from.
    pub origin: String,
}

/// Where the configuration view comes from.
#[async_trait]
pub trait SystemConfigurationSource: Send + Sync {
    /// The configuration now. The error is logged, and the client gets a 503.
    async fn configuration(&self) -> Result<SystemConfiguration, String>;
}

/// The `Alert` resource behind a session (cluster mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct AlertObject {
    /// Namespace.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `status.phase`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

/// The `AgentExecution` resource (and its pod) behind an execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ExecutionObject {
    /// Namespace.
    pub namespace: String,
    /// `metadata.name` of the AgentExecution.
    pub name: String,
    /// `status.phase`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The investigation pod, once created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
}

/// The Kubernetes objects behind one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionObjects {
    /// The Alert, when found.
    pub alert: Option<AlertObject>,
    /// AgentExecutions by execution id (the store's id).
    pub executions: std::collections::BTreeMap<String, ExecutionObject>,
}

/// Looks up the Kubernetes objects of a session (cluster mode). A failure
/// is logged and the session is answered without them: the records in the
/// store are what matters.
#[async_trait]
pub trait ClusterObjectsSource: Send + Sync {
    /// The objects of the session whose id (the Alert's UID) is given.
    async fn session_objects(&self, session_id: &str) -> Result<SessionObjects, String>;
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
                        ChainStageView {
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
            label: config.agent_label(&a.name),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
