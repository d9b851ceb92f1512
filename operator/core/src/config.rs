//! Runtime configuration as the engine and the MCP client consume it: the
//! output of hierarchy resolution (the `tarsy-config` crate turns Chain, Agent,
//! MCPServer and LLMProvider resources into these), free of Kubernetes types.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::status::{Backend, IterationStrategy, wire_enum};

/// Default per-iteration timeout (LLM call + tool calls of one iteration).
pub const DEFAULT_ITERATION_TIMEOUT: Duration = Duration::from_secs(120);
/// Default maximum number of iterations before a forced conclusion.
pub const DEFAULT_MAX_ITERATIONS: u32 = 20;
/// Default session timeout.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(15 * 60);

wire_enum!(
    /// Which provider API an LLMProvider talks to.
    ProviderType, "provider type" {
        /// Google Gemini API.
        Google = "google",
        /// OpenAI or an OpenAI-compatible endpoint (baseUrl).
        Openai = "openai",
        /// Anthropic.
        Anthropic = "anthropic",
        /// xAI.
        Xai = "xai",
        /// Google Vertex AI.
        Vertexai = "vertexai",
        /// Replays a script file, offline (examples and tests only; never a
        /// silent fallback for a real provider).
        Scripted = "scripted",
    }
);

/// A secret value (token, key). Its `Debug` and `Display` never show it, so it
/// cannot leak through logs or error messages by accident.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue([redacted])")
    }
}

impl fmt::Display for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// A resolved LLM provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmProviderConfig {
    /// Provider name (the LLMProvider resource's name).
    pub name: String,
    /// Provider API.
    pub provider_type: ProviderType,
    /// Model name.
    pub model: String,
    /// Environment variable, in the LLM service, that holds the API key.
    pub api_key_env: Option<String>,
    /// Environment variable holding a credentials file path (Vertex AI).
    pub credentials_env: Option<String>,
    /// OpenAI-compatible base URL.
    pub base_url: Option<String>,
    /// Google Cloud project (Vertex AI).
    pub project: Option<String>,
    /// Google Cloud location (Vertex AI).
    pub location: Option<String>,
    /// Gemini native tools enabled by name (google_search, code_execution, url_context).
    pub native_tools: BTreeMap<String, bool>,
    /// Upper bound for one tool result sent to the model, in tokens.
    pub max_tool_result_tokens: Option<u64>,
    /// The model's context window in tokens (context management thresholds).
    pub context_window_tokens: Option<u64>,
    /// Script file replayed by a `scripted` provider.
    pub script: Option<String>,
    /// Providers to try, in order, when this one keeps failing. Each entry's
    /// own `fallback` is empty (chains do not nest).
    pub fallback: Vec<LlmProviderConfig>,
    /// The model's prices, when estimates are on and the price is known
    /// (an override, the defaults or the bundled price book).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<crate::ModelPrice>,
}

impl LlmProviderConfig {
    /// The estimated cost of a call to this provider that used `usage`
    /// (none without a price or without usage).
    pub fn cost_of(&self, usage: Option<&crate::TokenUsage>) -> Option<f64> {
        Some(self.price.as_ref()?.cost(usage?))
    }
}

/// Tool result summarization settings of one MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummarizationConfig {
    /// Summarize results above the threshold.
    pub enabled: bool,
    /// Results larger than this (estimated tokens) are summarized.
    pub size_threshold_tokens: u64,
    /// Target size of a summary, in tokens.
    pub summary_max_token_limit: u64,
}

impl Default for SummarizationConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            size_threshold_tokens: 5000,
            summary_max_token_limit: 1000,
        }
    }
}

/// TLS options for HTTP-based MCP transports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsOptions {
    /// Skip server certificate verification (development only).
    pub insecure_skip_verify: bool,
    /// PEM file with extra CA certificates to trust.
    pub ca_file: Option<String>,
}

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    /// A child process speaking MCP over stdin/stdout.
    Stdio {
        /// Executable.
        command: String,
        /// Arguments.
        args: Vec<String>,
        /// Environment added to the inherited one.
        env: BTreeMap<String, String>,
        /// Working directory of the process (`None`: the caller's). Local
        /// mode starts servers in the configuration directory, so that
        /// relative paths in a manifest mean the same from anywhere.
        cwd: Option<std::path::PathBuf>,
    },
    /// Streamable HTTP (the current MCP transport).
    Http(HttpTransport),
    /// Legacy HTTP + Server-Sent Events.
    Sse(HttpTransport),
}

/// Settings shared by the HTTP-based transports.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpTransport {
    /// Endpoint URL.
    pub url: String,
    /// Bearer token sent as `Authorization: Bearer ...`.
    pub bearer_token: Option<SecretValue>,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
    /// TLS options.
    pub tls: TlsOptions,
    /// Request timeout.
    pub timeout: Option<Duration>,
}

/// A resolved MCP server.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// Server name (the MCPServer resource's name); the `server` of `server.tool`.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// Instructions added to the system prompt of agents that use it.
    pub instructions: String,
    /// Tool result summarization.
    pub summarization: SummarizationConfig,
}

/// Per-server tool allow-lists. A server absent from the map, or mapped to an
/// empty list, exposes all its tools.
pub type ToolFilter = BTreeMap<String, Vec<String>>;

/// Names accepted as native tool keys of an MCP selection (Gemini's).
pub const NATIVE_TOOL_NAMES: [&str; 3] = ["google_search", "code_execution", "url_context"];

/// A per-alert MCP selection override: replaces (never merges with) the
/// servers the chain would use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
// A misspelt field (`tool` for `tools`) must be refused, not ignored: an
// ignored restriction silently allows every tool.
#[serde(deny_unknown_fields)]
pub struct McpSelection {
    /// The complete server set for this alert.
    #[cfg_attr(feature = "openapi", schema(min_items = 1))]
    pub servers: Vec<McpServerSelection>,
    /// Native tools override (Gemini), by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_tools: Option<BTreeMap<String, bool>>,
}

/// One server of an [`McpSelection`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct McpServerSelection {
    /// MCP server name.
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub name: String,
    /// Allowed tools; absent or empty means all tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

impl McpSelection {
    /// Server names in order.
    pub fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }

    /// The tool filter this selection implies.
    pub fn tool_filter(&self) -> ToolFilter {
        self.servers
            .iter()
            .filter_map(|s| match &s.tools {
                Some(tools) if !tools.is_empty() => Some((s.name.clone(), tools.clone())),
                _ => None,
            })
            .collect()
    }
}

/// An agent's configuration after hierarchy resolution (defaults → agent →
/// chain → stage → stage-agent), ready for the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedAgentConfig {
    /// Agent definition name (registry key).
    pub agent_name: String,
    /// Name shown in records and logs (`{Base}-N` for replicas).
    pub display_name: String,
    /// Strategy; picks the controller.
    pub iteration_strategy: IterationStrategy,
    /// LLM service backend (derived from the strategy).
    pub backend: Backend,
    /// Provider, with its fallback chain.
    pub llm_provider: LlmProviderConfig,
    /// Iterations before a forced conclusion.
    pub max_iterations: u32,
    /// Timeout of one iteration.
    pub iteration_timeout: Duration,
    /// MCP servers the agent may use.
    pub mcp_servers: Vec<String>,
    /// Tool allow-lists per server.
    pub tool_filter: ToolFilter,
    /// Agent-specific instructions (third tier of the system prompt).
    pub custom_instructions: String,
    /// Per-alert native tools override.
    pub native_tools_override: Option<BTreeMap<String, bool>>,
    /// Fail the execution when one of its MCP servers cannot be used,
    /// instead of investigating with the tools that are left.
    pub fail_on_unavailable_server: bool,
    /// What the session may spend (investigation and synthesis executions;
    /// none for chat, scoring and memory, which run after).
    pub budget: Option<crate::Budget>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = SecretValue::new("hunter2");
        assert!(!format!("{s:?} {s}").contains("hunter2"));
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn selection_filter_skips_unrestricted_servers() {
        let sel: McpSelection = serde_json::from_str(
            r#"{"servers":[{"name":"kubernetes","tools":["pods_list"]},{"name":"prometheus"}]}"#,
        )
        .unwrap();
        assert_eq!(sel.server_names(), vec!["kubernetes", "prometheus"]);
        let filter = sel.tool_filter();
        assert_eq!(filter.len(), 1);
        assert_eq!(filter["kubernetes"], vec!["pods_list"]);
    }
}
