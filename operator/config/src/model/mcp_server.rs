//! `MCPServer`: a tool server agents reach over MCP.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DURATION_RULE, SecretKeyRef};

/// An MCP server, reached in exactly one way: `container` (a native sidecar
/// of each investigation pod, spoken to over streamable HTTP on localhost),
/// `stdio` (a command run behind `tarsy mcp-bridge`; a child process in local
/// mode) or `url` (a remote streamable HTTP / SSE endpoint). Secrets are only
/// ever referenced, never inlined. A resource named like a built-in server
/// (`kubernetes-server`) replaces it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "(has(self.container) ? 1 : 0) + (has(self.stdio) ? 1 : 0) + (has(self.url) ? 1 : 0) == 1", "message": "set exactly one of container, stdio or url"},
    {"rule": "!has(self.bearerTokenSecretRef) || has(self.url)", "message": "bearerTokenSecretRef is only allowed with url", "fieldPath": ".bearerTokenSecretRef"},
    {"rule": "!has(self.bearerTokenEnv) || has(self.url)", "message": "bearerTokenEnv is only allowed with url", "fieldPath": ".bearerTokenEnv"},
    {"rule": "!(has(self.bearerTokenSecretRef) && has(self.bearerTokenEnv))", "message": "set bearerTokenSecretRef or bearerTokenEnv, not both"},
    {"rule": "!has(self.tls) || has(self.url)", "message": "tls is only allowed with url", "fieldPath": ".tls"},
    {"rule": "!has(self.headers) || has(self.url)", "message": "headers are only allowed with url", "fieldPath": ".headers"},
    {"rule": "!has(self.transport) || has(self.url)", "message": "transport is only allowed with url (containers always speak streamable HTTP)", "fieldPath": ".transport"},
]))]
#[serde(rename_all = "camelCase")]
pub struct MCPServerSpec {
    /// Run the server as a native sidecar of each investigation pod that uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerSpec>,

    /// Run a stdio MCP server command (behind `tarsy mcp-bridge` in a cluster,
    /// as a child process in local mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdio: Option<StdioSpec>,

    /// URL of a remote MCP endpoint (no sidecar), e.g. `https://mcp.example/mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.matches('^https?://')", "message": "url must be an http(s) URL"}]))]
    pub url: Option<String>,

    /// Protocol of `url`: streamable-http (default) or sse (legacy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<HttpTransportKind>,

    /// Secret key holding the bearer token sent to `url` (`Authorization: Bearer ...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_secret_ref: Option<SecretKeyRef>,

    /// Environment variable holding the bearer token for `url` (local mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.matches('^[A-Za-z_][A-Za-z0-9_]*$')", "message": "bearerTokenEnv must be a valid environment variable name"}]))]
    pub bearer_token_env: Option<String>,

    /// Extra, non-secret request headers sent to `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,

    /// TLS options for `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,

    /// Request timeout for `url`, Go duration (default: the client's 90s call timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": DURATION_RULE, "message": "timeout must be a positive duration such as 90s"}]))]
    pub timeout: Option<String>,

    /// Instructions added to the system prompt of agents that use this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    pub instructions: Option<String>,

    /// Masking of this server's tool results (fail-closed): built-in groups,
    /// built-in patterns and custom patterns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_masking: Option<DataMaskingSpec>,

    /// Summarization of large tool results by the LLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarization: Option<SummarizationSpec>,

    /// What the server needs from the pod's service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountNeeds>,
}

/// Protocol of a remote MCP endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
#[serde(rename_all = "kebab-case")]
pub enum HttpTransportKind {
    /// Streamable HTTP (current MCP transport).
    StreamableHttp,
    /// Legacy HTTP + Server-Sent Events.
    Sse,
}

/// A sidecar MCP server container.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerSpec {
    /// Container image.
    #[schemars(length(min = 1, max = 1024))]
    pub image: String,
    /// Entrypoint override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub command: Option<Vec<String>>,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub args: Vec<String>,
    /// Environment; secrets only through `valueFrom.secretKeyRef`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub env: Vec<EnvVarSpec>,
    /// Port the server listens on (streamable HTTP); it also serves the readiness probe.
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// HTTP path of the MCP endpoint (default `/mcp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.startsWith('/')", "message": "path must start with /"}]))]
    pub path: Option<String>,
}

/// A stdio MCP server command.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StdioSpec {
    /// Executable (e.g. `npx`).
    #[schemars(length(min = 1, max = 4096))]
    pub command: String,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub args: Vec<String>,
    /// Environment added to the inherited one; secrets only through `valueFrom.secretKeyRef`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub env: Vec<EnvVarSpec>,
    /// Image providing the command in a cluster (the `tarsy` bridge binary is
    /// injected into it); default: the operator's MCP runtime image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: Option<String>,
}

/// An environment variable: a literal value or a Secret reference.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "has(self.value) != has(self.valueFrom)", "message": "set exactly one of value or valueFrom"}]))]
#[serde(rename_all = "camelCase")]
pub struct EnvVarSpec {
    /// Variable name.
    #[schemars(length(min = 1, max = 253))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.matches('^[A-Za-z_][A-Za-z0-9_]*$')", "message": "env name must be a valid environment variable name"}]))]
    pub name: String,
    /// Literal, non-secret value (`${VAR}` is interpolated in local mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32768))]
    pub value: Option<String>,
    /// Where a secret value comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<EnvVarSource>,
}

/// Source of a secret environment value.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EnvVarSource {
    /// Secret key holding the value.
    pub secret_key_ref: SecretKeyRef,
}

/// TLS options of a remote MCP endpoint.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// Skip server certificate verification (development only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_skip_verify: Option<bool>,
    /// Secret key holding extra PEM CA certificates to trust.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret_ref: Option<SecretKeyRef>,
    /// PEM file with extra CA certificates (local mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub ca_file: Option<String>,
}

/// Masking of a server's tool results (same shape as `tarsy_masking::MaskingConfig`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DataMaskingSpec {
    /// Whether masking runs (default true when the block is present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Built-in groups: basic, secrets, security, kubernetes, cloud, all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub pattern_groups: Vec<String>,
    /// Individual built-in patterns (api_key, password, token, email, ...) or code maskers (kubernetes_secret).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub patterns: Vec<String>,
    /// Additional regex patterns for this server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub custom_patterns: Vec<CustomPatternSpec>,
}

/// A user-defined masking regex.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CustomPatternSpec {
    /// Unique name within the server (not a built-in pattern name).
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Regular expression (Rust `regex` syntax); must not match the empty string.
    #[schemars(length(min = 1, max = 4096))]
    pub regex: String,
    /// Replacement (`${1}` keeps group 1); default `[MASKED_<NAME>]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub replacement: Option<String>,
    /// Free text for humans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
}

/// Summarization of large tool results.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SummarizationSpec {
    /// Whether large results are summarized (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Results above this many (estimated) tokens are summarized (default 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub size_threshold_tokens: Option<u64>,
    /// Target size of a summary in tokens (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub summary_max_token_limit: Option<u64>,
}

/// What an MCP server needs from the investigation pod's service account.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountNeeds {
    /// The server reads the cluster API (pods then run as the chain's
    /// investigator account, a read-only cluster view by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_read: Option<bool>,
    /// A specific service account the pod must run as (overrides the chain's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<String>,
}
