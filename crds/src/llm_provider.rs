//! `LLMProvider`: a model at a provider, its credentials and limits.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::alert::NativeTools;
use crate::common::SecretKeyRef;

/// Which provider API a provider talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
#[serde(rename_all = "lowercase")]
pub enum ProviderType {
    /// Google Gemini API.
    Google,
    /// OpenAI, or an OpenAI-compatible endpoint (`baseUrl`).
    Openai,
    /// Anthropic.
    Anthropic,
    /// xAI.
    Xai,
    /// Google Vertex AI.
    Vertexai,
    /// Replays a script file offline (examples and tests only).
    Scripted,
}

impl From<ProviderType> for tarsy_core::ProviderType {
    fn from(t: ProviderType) -> Self {
        use tarsy_core::ProviderType as P;
        match t {
            ProviderType::Google => P::Google,
            ProviderType::Openai => P::Openai,
            ProviderType::Anthropic => P::Anthropic,
            ProviderType::Xai => P::Xai,
            ProviderType::Vertexai => P::Vertexai,
            ProviderType::Scripted => P::Scripted,
        }
    }
}

impl From<tarsy_core::ProviderType> for ProviderType {
    fn from(t: tarsy_core::ProviderType) -> Self {
        use tarsy_core::ProviderType as P;
        match t {
            P::Google => ProviderType::Google,
            P::Openai => ProviderType::Openai,
            P::Anthropic => ProviderType::Anthropic,
            P::Xai => ProviderType::Xai,
            P::Vertexai => ProviderType::Vertexai,
            P::Scripted => ProviderType::Scripted,
        }
    }
}

/// An LLM provider: a model at a provider API with its credentials, limits
/// and fallback providers. The API key never appears here: `apiKeySecretRef`
/// names the Secret the LLM service reads it from.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "tarsy.dev",
    version = "v1alpha1",
    kind = "LLMProvider",
    plural = "llmproviders",
    namespaced,
    status = "LLMProviderStatus",
    derive = "PartialEq",
    shortname = "llmp",
    category = "tarsy",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type", description = "Provider API"),
    printcolumn(name = "Model", type_ = "string", json_path = ".spec.model", description = "Model"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status", description = "References resolve"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("!has(self.spec.fallback) || !(self.metadata.name in self.spec.fallback)").message("a provider cannot be its own fallback"),
    doc = "An LLM provider: model, credentials (by Secret reference), limits and fallback providers."
)]
#[x_kube(validation = Rule::new("self.type != 'scripted' || has(self.script)").message("a scripted provider needs script").field_path(".script"))]
#[x_kube(validation = Rule::new("self.type != 'vertexai' || (has(self.project) && has(self.location))").message("a vertexai provider needs project and location"))]
#[x_kube(validation = Rule::new("!(has(self.apiKeySecretRef) && has(self.apiKeyEnv))").message("set apiKeySecretRef or apiKeyEnv, not both"))]
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
    #[x_kube(validation = Rule::new("self.key.matches('^[A-Za-z_][A-Za-z0-9_]*$')").message("apiKeySecretRef.key must be a valid environment variable name").field_path(".key"))]
    pub api_key_secret_ref: Option<SecretKeyRef>,
    /// Environment variable of the LLM service holding the API key (local
    /// mode; in a cluster prefer `apiKeySecretRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z_][A-Za-z0-9_]*$')").message("apiKeyEnv must be a valid environment variable name"))]
    pub api_key_env: Option<String>,
    /// Environment variable of the LLM service holding a credentials file path (Vertex AI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub credentials_env: Option<String>,
    /// Base URL of an OpenAI-compatible (or proxied) endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    #[x_kube(validation = Rule::new("self.matches('^https?://')").message("baseUrl must be an http(s) URL"))]
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
    #[x_kube(validation = Rule::new("self.all(k, k in ['google_search', 'code_execution', 'url_context'])").message("nativeTools keys must be google_search, code_execution or url_context"))]
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
    /// Script replayed by a `scripted` provider (path inside the LLM service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub script: Option<String>,
}

/// Observed state of an LLMProvider.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LLMProviderStatus {
    /// Standard conditions (`Ready`: the Secret and fallbacks exist).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
