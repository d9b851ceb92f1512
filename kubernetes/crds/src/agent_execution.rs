//! `AgentExecution`: one agent run (investigation, synthesis or chat answer),
//! created by the operator only and owned by its Alert.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use tarsy_config::model::{DURATION_RULE, NativeTools, format_duration, parse_duration};
use tarsy_config::{Config, ResolveError};
use tarsy_core::{Backend, Budget, ExecutionKind, IterationStrategy, ResolvedAgentConfig};

use crate::common::ExecutionPhase;

/// Annotation asking an execution to stop (set by the operator or the API;
/// the operator then ends its pod and the runner records the outcome).
pub const STOP_ANNOTATION: &str = "tarsy.dev/stop";
/// [`STOP_ANNOTATION`] value: the user cancelled (phase Cancelled).
pub const STOP_CANCELLED: &str = "cancelled";
/// [`STOP_ANNOTATION`] value: the session timed out (phase TimedOut).
pub const STOP_TIMED_OUT: &str = "timed_out";

/// One agent run with its fully resolved configuration. Created by the
/// operator (owned by its Alert), run by an investigation pod, summarised in
/// `status` (bounded; the full timeline lives in Postgres).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "tarsy.dev",
    version = "v1alpha1",
    kind = "AgentExecution",
    namespaced,
    status = "AgentExecutionStatus",
    derive = "PartialEq",
    shortname = "ae",
    shortname = "agentexec",
    category = "tarsy",
    printcolumn(
        name = "Agent",
        type_ = "string",
        json_path = ".spec.displayName",
        description = "Agent (display name)"
    ),
    printcolumn(
        name = "Kind",
        type_ = "string",
        json_path = ".spec.kind",
        description = "investigation, synthesis or chat"
    ),
    printcolumn(
        name = "Stage",
        type_ = "string",
        json_path = ".spec.stage.name",
        description = "Stage"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Execution phase"
    ),
    printcolumn(
        name = "Iteration",
        type_ = "integer",
        json_path = ".status.iteration",
        description = "Current iteration"
    ),
    printcolumn(
        name = "Pod",
        type_ = "string",
        json_path = ".status.podName",
        description = "Investigation pod",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "One agent run (investigation, synthesis or chat) with its resolved configuration; created by the TARSy operator."
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable"))]
#[x_kube(validation = Rule::new("(self.kind == 'chat') == has(self.chat)").message("chat is required for kind chat and forbidden otherwise").field_path(".chat"))]
#[serde(rename_all = "camelCase")]
pub struct AgentExecutionSpec {
    /// Session id in Postgres (the owning Alert's UID).
    #[schemars(length(min = 1, max = 64))]
    pub session_id: String,
    /// Name of the owning Alert.
    #[schemars(length(min = 1, max = 253))]
    pub alert_name: String,
    /// Name of the Chain being run.
    #[schemars(length(min = 1, max = 253))]
    pub chain: String,
    /// The stage this execution belongs to.
    pub stage: StageRef,
    /// Agent definition name (registry key; the base name for replicas).
    #[schemars(length(min = 1, max = 253))]
    pub agent_name: String,
    /// Name shown in records and logs (`{agent}-N` for replicas).
    #[schemars(length(min = 1, max = 253))]
    pub display_name: String,
    /// 1-based position of this execution within its stage.
    #[schemars(range(min = 1))]
    pub agent_index: u32,
    /// investigation, synthesis or chat.
    pub kind: ExecutionKind,
    /// The configuration after hierarchy resolution.
    pub resolved: ResolvedConfigSpec,
    /// The question being answered (kind chat only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatRequestSpec>,
    /// When the execution must stop as timed out: its session's deadline
    /// (a chat answer's own). The runner stops the engine then; the pod's
    /// `activeDeadlineSeconds` is a backstop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Time>,
}

/// Identity of a stage.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StageRef {
    /// 1-based position among the session's stages (synthesis stages count).
    #[schemars(range(min = 1))]
    pub index: u32,
    /// Stage name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Stage id in Postgres.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub id: Option<String>,
}

/// A resolved agent configuration (see `tarsy-config` for the hierarchy).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedConfigSpec {
    /// Iteration strategy.
    pub iteration_strategy: IterationStrategy,
    /// LLM service backend, derived from the strategy.
    pub backend: Backend,
    /// LLMProvider name (its fallbacks come with it).
    #[schemars(length(min = 1, max = 253))]
    pub llm_provider: String,
    /// Iterations before a forced conclusion.
    #[schemars(range(min = 1, max = 1000))]
    pub max_iterations: u32,
    /// Timeout of one iteration, Go duration.
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new(DURATION_RULE).message("iterationTimeout must be a positive duration"))]
    pub iteration_timeout: String,
    /// MCP servers the agent may use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub mcp_servers: Vec<String>,
    /// Per-server tool allow-lists; a server absent or mapped to [] exposes all tools.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_filter: BTreeMap<String, Vec<String>>,
    /// Agent-specific instructions (third tier of the system prompt).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub custom_instructions: String,
    /// Per-alert native tools override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_tools_override: Option<NativeTools>,
    /// Fail the execution when one of its MCP servers cannot be used (the
    /// chain's `onMcpServerUnavailable: fail`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fail_on_unavailable_server: bool,
    /// What the session may spend (the chain's `budget`): past it the agent
    /// stops calling tools and concludes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

impl From<&ResolvedAgentConfig> for ResolvedConfigSpec {
    /// The AgentExecution form of a resolved configuration: names and values
    /// only (the provider by name; the runner rebuilds the rest with
    /// [`ResolvedConfigSpec::resolve`]).
    fn from(resolved: &ResolvedAgentConfig) -> Self {
        Self {
            iteration_strategy: resolved.iteration_strategy,
            backend: resolved.backend,
            llm_provider: resolved.llm_provider.name.clone(),
            max_iterations: resolved.max_iterations,
            iteration_timeout: format_duration(resolved.iteration_timeout),
            mcp_servers: resolved.mcp_servers.clone(),
            tool_filter: resolved.tool_filter.clone(),
            custom_instructions: resolved.custom_instructions.clone(),
            native_tools_override: resolved.native_tools_override.clone(),
            fail_on_unavailable_server: resolved.fail_on_unavailable_server,
            budget: resolved.budget,
        }
    }
}

impl ResolvedConfigSpec {
    /// Rebuilds the engine configuration: the provider, with its fallbacks,
    /// comes from `config`; everything else from this spec.
    pub fn resolve(
        &self,
        config: &Config,
        agent_name: &str,
        display_name: &str,
    ) -> Result<ResolvedAgentConfig, ResolveError> {
        let iteration_timeout =
            parse_duration(&self.iteration_timeout).map_err(|source| ResolveError::Duration {
                field: "spec.resolved.iterationTimeout".to_string(),
                source,
            })?;
        Ok(ResolvedAgentConfig {
            agent_name: agent_name.to_string(),
            display_name: display_name.to_string(),
            iteration_strategy: self.iteration_strategy,
            backend: self.backend,
            llm_provider: config.llm_provider_config(&self.llm_provider)?,
            max_iterations: self.max_iterations,
            iteration_timeout,
            mcp_servers: self.mcp_servers.clone(),
            tool_filter: self.tool_filter.clone(),
            custom_instructions: self.custom_instructions.clone(),
            native_tools_override: self.native_tools_override.clone(),
            fail_on_unavailable_server: self.fail_on_unavailable_server,
            budget: self.budget,
        })
    }
}

/// A follow-up chat question.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ChatRequestSpec {
    /// Chat id in Postgres.
    #[schemars(length(min = 1, max = 64))]
    pub chat_id: String,
    /// Chat user message id in Postgres.
    #[schemars(length(min = 1, max = 64))]
    pub message_id: String,
    /// The user's question, clipped (full text in Postgres).
    #[schemars(length(min = 1, max = 16384))]
    pub question: String,
    /// Who asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub author: Option<String>,
}

/// Observed state of an AgentExecution (bounded).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentExecutionStatus {
    /// Pending, Active, Completed, Failed, TimedOut or Cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ExecutionPhase>,
    /// Agent execution id in Postgres.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub execution_id: Option<String>,
    /// The investigation pod running this execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub pod_name: Option<String>,
    /// Replacement pods started because a pod was lost before its runner
    /// recorded a result (eviction, OOM kill, node loss, deletion); each
    /// resumes the execution from its stored conversation. The `PodReady`
    /// condition and the Events say why each pod was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_restarts: Option<u32>,
    /// Current iteration (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u32>,
    /// Token usage so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenUsageStatus>,
    /// LLM and tool calls the runner made (the operator exports them: a
    /// runner pod ends before anything could scrape it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<CallCountsStatus>,
    /// The last timeline events (at most 20, content clipped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub recent_timeline: Vec<TimelineSnippet>,
    /// The agent's conclusion, clipped (full text in Postgres).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16384))]
    pub final_analysis: Option<String>,
    /// Why the execution failed, clipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16384))]
    pub error: Option<String>,
    /// When the execution started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the execution reached a terminal phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// Outcome of connecting to each MCP server when the execution started
    /// (at most 32); the operator copies the newest into each MCPServer's
    /// `status.lastHealth`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub mcp_servers: Vec<McpServerOutcome>,
    /// Standard conditions (`PodReady`, `Ready`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Most MCP server outcomes an execution status lists.
pub const MAX_MCP_OUTCOMES: usize = 32;

/// Longest error of an MCP server outcome (characters).
pub const MAX_MCP_OUTCOME_ERROR_CHARS: usize = 1024;

/// Whether one MCP server could be connected to when an execution started.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct McpServerOutcome {
    /// MCP server name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Whether the server initialised and listed its tools.
    pub healthy: bool,
    /// Why the connection failed, clipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub error: Option<String>,
    /// When the connection was attempted.
    pub checked_at: Time,
    /// The tools it listed (at most 256 names): submissions naming others
    /// are refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub tools: Vec<String>,
}

/// Token usage of an execution.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsageStatus {
    /// Prompt tokens.
    #[serde(default)]
    pub input: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output: u64,
    /// Thinking tokens.
    #[serde(default)]
    pub thinking: u64,
    /// Total tokens.
    #[serde(default)]
    pub total: u64,
}

/// LLM and tool calls of an execution.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CallCountsStatus {
    /// LLM call attempts.
    #[serde(default)]
    pub llm: u64,
    /// Of which failed.
    #[serde(default)]
    pub llm_errors: u64,
    /// MCP tool calls.
    #[serde(default)]
    pub tools: u64,
    /// Of which failed or timed out.
    #[serde(default)]
    pub tool_errors: u64,
}

/// One recent timeline event, clipped.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TimelineSnippet {
    /// Sequence number in the session timeline.
    pub seq: u64,
    /// Event type (llm_thinking, llm_response, llm_tool_call, ...).
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 63))]
    pub event_type: String,
    /// Event status (streaming, completed, failed, cancelled, timed_out).
    #[schemars(length(min = 1, max = 63))]
    pub status: String,
    /// Start of the content (at most 512 characters).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 512))]
    pub snippet: String,
}
