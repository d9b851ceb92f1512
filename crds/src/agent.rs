//! `Agent`: a reusable agent definition (instructions, tools, strategy).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::IterationStrategy;

/// An agent definition: what it is told, which MCP servers it may use and how
/// it iterates. A resource named like a built-in agent (KubernetesAgent,
/// ChatAgent, SynthesisAgent) replaces it.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "tarsy.dev",
    version = "v1alpha1",
    kind = "Agent",
    namespaced,
    status = "AgentStatus",
    derive = "PartialEq",
    shortname = "tagent",
    category = "tarsy",
    printcolumn(
        name = "Strategy",
        type_ = "string",
        json_path = ".spec.iterationStrategy",
        description = "Iteration strategy"
    ),
    printcolumn(
        name = "MCP Servers",
        type_ = "string",
        json_path = ".spec.mcpServers",
        description = "MCP servers"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "References resolve"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "A TARSy agent definition: instructions, MCP servers and iteration strategy."
)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpec {
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

/// Observed state of an Agent.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    /// Standard conditions (`Ready`: its MCP servers exist).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
