//! `Chain`: the stages of agents that investigate a family of alert types.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tarsy_config::model::ChainSpec;

// The spec of a [`Chain`]: the model's [`ChainSpec`]. (A doc comment here would replace the
// model's description in the CRD schema.)
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "tarsy.dev",
    version = "v1alpha1",
    kind = "Chain",
    namespaced,
    status = "ChainStatus",
    derive = "PartialEq",
    shortname = "tchain",
    category = "tarsy",
    printcolumn(
        name = "Alert Types",
        type_ = "string",
        json_path = ".spec.alertTypes",
        description = "Alert types this chain handles"
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
    doc = "A chain of investigation stages run for a set of alert types."
)]
#[serde(transparent)]
#[schemars(transparent)]
pub struct ChainResourceSpec(pub ChainSpec);

crate::spec_wrapper!(ChainResourceSpec => ChainSpec);

/// Observed state of a Chain.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChainStatus {
    /// Standard conditions (`Ready`: every reference resolves).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
