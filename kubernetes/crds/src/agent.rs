//! `Agent`: a reusable agent definition (instructions, tools, strategy).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tarsy_config::model::AgentSpec;

// The spec of an [`Agent`]: the model's [`AgentSpec`]. (A doc comment here would replace the
// model's description in the CRD schema.)
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
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
#[serde(transparent)]
#[schemars(transparent)]
pub struct AgentResourceSpec(pub AgentSpec);

crate::spec_wrapper!(AgentResourceSpec => AgentSpec);

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
