//! `MCPServer`: a tool server agents reach over MCP.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tarsy_config::model::MCPServerSpec;

// The spec of an [`MCPServer`]: the model's [`MCPServerSpec`]. (A doc comment here would replace the
// model's description in the CRD schema.)
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "tarsy.dev",
    version = "v1alpha1",
    kind = "MCPServer",
    plural = "mcpservers",
    namespaced,
    status = "MCPServerStatus",
    derive = "PartialEq",
    shortname = "mcps",
    category = "tarsy",
    printcolumn(
        name = "Image",
        type_ = "string",
        json_path = ".spec.container.image",
        description = "Sidecar image",
        priority = 1
    ),
    printcolumn(
        name = "URL",
        type_ = "string",
        json_path = ".spec.url",
        description = "Remote endpoint",
        priority = 1
    ),
    printcolumn(
        name = "Healthy",
        type_ = "boolean",
        json_path = ".status.lastHealth.healthy",
        description = "Last health check"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Definition is usable"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "An MCP tool server: a sidecar container, a stdio command or a remote URL, with instructions, masking and summarization."
)]
#[serde(transparent)]
#[schemars(transparent)]
pub struct MCPServerResourceSpec(pub MCPServerSpec);

crate::spec_wrapper!(MCPServerResourceSpec => MCPServerSpec);

/// Observed state of an MCPServer.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MCPServerStatus {
    /// Standard conditions (`Ready`: definition usable, referenced Secrets exist).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Latest health check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_health: Option<HealthStatus>,
    /// The metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Outcome of one health check of an MCP server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HealthStatus {
    /// Whether the server initialised and listed its tools.
    pub healthy: bool,
    /// When the check ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<Time>,
    /// Number of tools listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_count: Option<u32>,
    /// The tools listed (at most 256 names): the cluster API refuses alerts
    /// whose MCP selection names others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub tools: Vec<String>,
    /// Error of a failed check, clipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub message: Option<String>,
}
