//! `LLMProvider`: a model at a provider, its credentials and limits.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tarsy_config::model::LLMProviderSpec;

// The spec of an [`LLMProvider`]: the model's [`LLMProviderSpec`]. (A doc comment here would replace the
// model's description in the CRD schema.)
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
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
#[serde(transparent)]
#[schemars(transparent)]
pub struct LLMProviderResourceSpec(pub LLMProviderSpec);

crate::spec_wrapper!(LLMProviderResourceSpec => LLMProviderSpec);

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
