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
    pub stages: Vec<StageView>,
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
pub struct StageView {
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
    /// Name.
    pub name: String,
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
