//! `LLMProvider`: a model at a provider, its credentials and limits.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use tarsy_core::{ModelPrice, ProviderType};

use super::alert::NativeTools;
use super::common::SecretKeyRef;

/// An LLM provider: a model at a provider API with its credentials, limits
/// and fallback providers. The API key never appears here: `apiKeySecretRef`
/// names the Secret the LLM service reads it from.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.type != 'scripted' || has(self.script)", "message": "a scripted provider needs script", "fieldPath": ".script"},
    {"rule": "self.type != 'vertexai' || (has(self.project) && has(self.location))", "message": "a vertexai provider needs project and location"},
    {"rule": "!(has(self.apiKeySecretRef) && has(self.apiKeyEnv))", "message": "set apiKeySecretRef or apiKeyEnv, not both"},
]))]
#[serde(rename_all = "camelCase")]
pub struct LLMProviderSpec {
    /// Provider API: google, openai, anthropic, xai, vertexai (or scripted, for tests).
    #[serde(rename = "type")]
    pub provider_type: ProviderType,
    /// Model name, e.g. `gemini-2.5-pro`.
    #[schemars(length(min = 1, max = 253))]
    pub model: String,
    /// Secret key holding the API key. The LLM service reads it from the
    /// environment variable named like the key (the chart loads the Secret
    /// with envFrom), so the key should be a valid variable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.key.matches('^[A-Za-z_][A-Za-z0-9_]*$')", "message": "apiKeySecretRef.key must be a valid environment variable name", "fieldPath": ".key"}]))]
    pub api_key_secret_ref: Option<SecretKeyRef>,
    /// Environment variable of the LLM service holding the API key (local
    /// mode; in a cluster prefer `apiKeySecretRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.matches('^[A-Za-z_][A-Za-z0-9_]*$')", "message": "apiKeyEnv must be a valid environment variable name"}]))]
    pub api_key_env: Option<String>,
    /// Environment variable of the LLM service holding a credentials file path (Vertex AI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub credentials_env: Option<String>,
    /// Base URL of an OpenAI-compatible (or proxied) endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.matches('^https?://')", "message": "baseUrl must be an http(s) URL"}]))]
    pub base_url: Option<String>,
    /// Google Cloud project (Vertex AI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub project: Option<String>,
    /// Google Cloud location (Vertex AI), e.g. `us-central1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub location: Option<String>,
    /// Upper bound, in tokens, of one tool result sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tool_result_tokens: Option<u64>,
    /// Gemini native tools by name (google_search, code_execution,
    /// url_context). Suppressed whenever MCP tools are present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.all(k, k in ['google_search', 'code_execution', 'url_context'])", "message": "nativeTools keys must be google_search, code_execution or url_context"}]))]
    pub native_tools: Option<NativeTools>,
    /// The model's context window, in tokens (drives context management:
    /// a tool result stays under 30 %, trimming at 60 % / 80 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1024))]
    pub context_window_tokens: Option<u64>,
    /// LLMProviders tried in order when this one keeps failing (a circuit
    /// breaker decides). Fallback chains do not nest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 8))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub fallback: Option<Vec<String>>,
    /// The model's prices, in US dollars per million tokens, over the bundled
    /// price book's (a model it does not know, a negotiated discount, a
    /// self-hosted model). Without a price, calls get no cost estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<ModelPrice>,
    /// Script replayed by a `scripted` provider (path inside the LLM service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub script: Option<String>,
}
