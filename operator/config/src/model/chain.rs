//! `Chain`: the stages of agents that investigate a family of alert types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use tarsy_core::{IterationStrategy, SuccessPolicy};

use super::common::{DURATION_RULE, McpUnavailablePolicy};

/// A chain of investigation stages for a set of alert types. Stages run in
/// order; the agents of one stage run in parallel. Settings cascade:
/// defaults → agent → chain → stage → stage agent.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChainSpec {
    /// Alert types this chain handles. An alert type may be claimed by only
    /// one chain in a namespace (checked by the admission webhook).
    #[serde(default)]
    #[schemars(length(max = 128))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub alert_types: Vec<String>,

    /// Stages, run in order. Stage names are unique.
    #[schemars(length(min = 1, max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub stages: Vec<StageSpec>,

    /// LLMProvider for every agent of the chain (stage agents may override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub llm_provider: Option<String>,

    /// Iteration strategy for every agent of the chain (stage agents may override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_strategy: Option<IterationStrategy>,

    /// Iterations before an agent is forced to conclude (overrides agents and defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_iterations: Option<u32>,

    /// Timeout of one iteration (LLM call plus its tool calls), Go duration, e.g. `120s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": DURATION_RULE, "message": "iterationTimeout must be a positive duration such as 120s"}]))]
    pub iteration_timeout: Option<String>,

    /// MCP servers for every agent of the chain (overrides the agents' own
    /// lists; stage agents may override again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub mcp_servers: Option<Vec<String>>,

    /// What agents do when one of their MCP servers cannot be used:
    /// `continue` with the tools they have (default) or `fail` the execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_mcp_server_unavailable: Option<McpUnavailablePolicy>,

    /// Slack channel of this chain's notifications (default: the one
    /// TARSy is configured with), e.g. `#payments-oncall`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80))]
    pub slack_channel: Option<String>,

    /// LLMProvider for the executive summary (default: `llmProvider`, then the default provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub executive_summary_provider: Option<String>,

    /// Follow-up chat on finished investigations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatSpec>,

    /// A judge scoring each completed investigation (default: the Defaults
    /// document's `scoring.enabled`, off unless set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoring: Option<ScoringSpec>,

    /// Whole-session timeout, Go duration (default 15m); the session ends TimedOut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": DURATION_RULE, "message": "sessionTimeout must be a positive duration such as 15m"}]))]
    pub session_timeout: Option<String>,

    /// What one session may spend (default: the Defaults' `budget`). Once
    /// its LLM calls pass it, running agents stop calling tools and
    /// conclude, later stages do not start, the executive summary is still
    /// written, and the session ends with the reason `budget_exhausted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<tarsy_core::Budget>,

    /// Service account the investigation pods run as (default: the operator's
    /// read-only investigator account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_account_name: Option<String>,
}

/// One stage: several different agents (`agents`), or one agent (`agent`,
/// or `agents` with a single entry) run `replicas` times. Its executions run
/// in parallel; more than one execution triggers a synthesis.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.agents) != has(self.agent)", "message": "a stage needs either agents or agent, not both"},
    {"rule": "!has(self.replicas) || has(self.agent) || (has(self.agents) && size(self.agents) == 1)", "message": "replicas needs a single agent: agent, or agents with one entry", "fieldPath": ".replicas"},
    {"rule": "!has(self.replicas) || self.replicas >= 1", "message": "replicas must be at least 1", "fieldPath": ".replicas"},
]))]
#[serde(rename_all = "camelCase")]
pub struct StageSpec {
    /// Stage name, unique in the chain.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,

    /// Agents run in parallel in this stage (each with its own overrides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16))]
    pub agents: Option<Vec<StageAgentSpec>>,

    /// One agent (named `{agent}-1` ... `{agent}-N` when `replicas` > 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub agent: Option<String>,

    /// How many copies of the stage's single agent (`agent`, or the one
    /// entry of `agents`, with its overrides) run (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 16))]
    pub replicas: Option<u32>,

    /// all: every execution must complete; any: one is enough (default any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<SuccessPolicy>,

    /// Iterations before this stage's agents are forced to conclude.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_iterations: Option<u32>,

    /// Synthesis of this stage's parallel results (used when it has more than one execution).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthesis: Option<SynthesisSpec>,
}

impl StageSpec {
    /// Number of copies of the stage's agent (1 when `replicas` is unset).
    pub fn replicas_count(&self) -> u32 {
        self.replicas.unwrap_or(1)
    }

    /// How many executions the stage launches: `replicas` copies of a single
    /// agent (`agent`, or `agents` with one entry), else one per entry of
    /// `agents`.
    pub fn execution_count(&self) -> usize {
        match (self.agents.as_deref(), &self.agent) {
            (Some([_]), _) | (None, Some(_)) => self.replicas_count().max(1) as usize,
            (Some(agents), _) => agents.len(),
            (None, None) => 0,
        }
    }
}

/// An agent in a stage, with per-agent overrides.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StageAgentSpec {
    /// Agent name: an Agent resource or a built-in agent (kubernetes-agent, chat-agent, synthesis-agent).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// LLMProvider for this agent only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub llm_provider: Option<String>,
    /// Iteration strategy for this agent only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_strategy: Option<IterationStrategy>,
    /// Iterations before this agent is forced to conclude.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_iterations: Option<u32>,
    /// MCP servers for this agent only (replaces the agent's and chain's lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub mcp_servers: Option<Vec<String>>,
}

impl StageAgentSpec {
    /// A stage agent with no overrides.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            llm_provider: None,
            iteration_strategy: None,
            max_iterations: None,
            mcp_servers: None,
        }
    }
}

/// How a stage's parallel results are combined.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "!has(self.iterationStrategy) || self.iterationStrategy in ['synthesis', 'synthesis-native-thinking', 'single-call']", "message": "synthesis.iterationStrategy must be synthesis, synthesis-native-thinking or single-call (synthesis is tool-less)", "fieldPath": ".iterationStrategy"}]))]
#[serde(rename_all = "camelCase")]
pub struct SynthesisSpec {
    /// Synthesis agent (default: the built-in synthesis-agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub agent: Option<String>,
    /// LLMProvider for the synthesis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub llm_provider: Option<String>,
    /// Strategy: synthesis, synthesis-native-thinking or single-call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_strategy: Option<IterationStrategy>,
}

/// Scoring of a chain's investigations: after a session completes, a judge
/// reads the whole investigation and scores it 0–100, with failure tags and
/// a report of missing or hard-to-use tools. It runs after the session's
/// outcome is final and never changes it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScoringSpec {
    /// Whether completed sessions are scored (default: the Defaults
    /// document's `scoring.enabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Judge agent (default: the built-in scoring-agent). Its custom
    /// instructions are added to the judge's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub agent: Option<String>,
    /// LLMProvider of the judge (default: the chain's, then the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub llm_provider: Option<String>,
}

/// Follow-up chat settings.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChatSpec {
    /// Whether users may ask follow-up questions (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Chat agent (default: the built-in chat-agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub agent: Option<String>,
    /// LLMProvider for chat answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub llm_provider: Option<String>,
    /// Iteration strategy for chat answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_strategy: Option<IterationStrategy>,
    /// Iterations before a chat answer is forced to conclude.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_iterations: Option<u32>,
    /// MCP servers for chat (default: the chain's, else the union of its stages' servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub mcp_servers: Option<Vec<String>>,
}
