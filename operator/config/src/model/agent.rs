//! `Agent`: a reusable agent definition (instructions, tools, strategy).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use tarsy_core::IterationStrategy;

/// An agent definition: what it is told, which MCP servers it may use and how
/// it iterates. A resource named like a built-in agent (`kubernetes-agent`,
/// `chat-agent`, `synthesis-agent`) replaces it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpec {
    /// How the agent is called in prompts, timelines and the dashboard
    /// (default: the object name), e.g. `DataCollector`. Chains refer to the
    /// agent by its object name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub display_name: Option<String>,
    /// What the agent does (shown in the UI and to other agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub description: Option<String>,
    /// Agent-specific instructions: the third tier of the system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    pub custom_instructions: Option<String>,
    /// MCP servers the agent may use (chains and stages may replace the list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub mcp_servers: Option<Vec<String>>,
    /// Iteration strategy (overrides the default; chains and stages may override it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_strategy: Option<IterationStrategy>,
    /// Iterations before a forced conclusion (overrides the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_iterations: Option<u32>,
}
