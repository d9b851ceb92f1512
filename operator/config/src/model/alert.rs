//! The alert document (`kind: Alert`): one alert to investigate. Users,
//! the Alertmanager bridge and the REST API write it; `tarsy investigate`
//! reads it from a file.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use tarsy_core::MAX_ALERT_DATA_BYTES;

/// An alert for TARSy to investigate. The operator picks a Chain (`chainRef`,
/// else the Chain whose `alertTypes` lists `alertType`), runs its stages as
/// AgentExecutions and records the result in `status` (summary) and in
/// Postgres (everything).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.chainRef) == has(oldSelf.chainRef) && (!has(self.chainRef) || self.chainRef == oldSelf.chainRef)", "message": "chainRef is immutable"},
    {"rule": "has(self.mcpSelection) == has(oldSelf.mcpSelection) && (!has(self.mcpSelection) || self.mcpSelection == oldSelf.mcpSelection)", "message": "mcpSelection is immutable"},
]))]
#[serde(rename_all = "camelCase")]
pub struct AlertSpec {
    /// Alert type (e.g. `KubePodCrashLooping`). Selects the Chain whose
    /// `alertTypes` contains it, unless `chainRef` names a Chain. Immutable.
    #[schemars(length(min = 1, max = 253))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "alertType is immutable"}]))]
    pub alert_type: String,

    /// The alert payload as opaque text (YAML, JSON or prose), at most 1 MiB.
    /// It is masked before any agent or record sees it. Immutable.
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": format!("size(bytes(self)) <= {MAX_ALERT_DATA_BYTES}"), "message": format!("data must not exceed 1 MiB ({MAX_ALERT_DATA_BYTES} bytes)")},
        {"rule": "self == oldSelf", "message": "data is immutable"},
    ]))]
    pub data: String,

    /// Name of the Chain (same namespace) to run, overriding the lookup by
    /// `alertType`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub chain_ref: Option<String>,

    /// URL of a runbook the agents receive as context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.matches('^https?://')", "message": "runbookUrl must be an http(s) URL"}]))]
    pub runbook_url: Option<String>,

    /// Per-alert MCP selection: REPLACES (never merges with) the MCP servers
    /// the chain and agents would use, optionally restricting tools per
    /// server, and overrides the providers' native tools. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_selection: Option<McpSelectionSpec>,

    /// Who submitted the alert (API: X-Forwarded-User, then X-Forwarded-Email).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub author: Option<String>,

    /// Where the alert came from (e.g. the Alertmanager bridge and the alert's
    /// fingerprint, used to deduplicate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<AlertSource>,

    /// Set to true to cancel the investigation (Cancelling, then Cancelled).
    /// Once true it cannot be set back to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self || !oldSelf", "message": "cancel cannot be withdrawn once set"}]))]
    pub cancel: Option<bool>,
}

/// Origin of an alert.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AlertSource {
    /// The submitting system: `alertmanager`, `api`, `kubectl`, ...
    #[schemars(length(min = 1, max = 63))]
    pub system: String,
    /// The alert's identity in that system (Alertmanager fingerprint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub fingerprint: Option<String>,
}

impl AlertSpec {
    /// The alert as a submission: the same record as an alert posted to the
    /// API, so that every writer builds the same session row from it (and
    /// every entry point checks the same alert). `default_author` stands in
    /// when the alert names none (empty: no author).
    pub fn submission(&self, default_author: &str) -> tarsy_core::control::NewAlert {
        tarsy_core::control::NewAlert {
            alert_type: self.alert_type.clone(),
            data: self.data.clone(),
            chain: self.chain_ref.clone(),
            runbook_url: self.runbook_url.clone(),
            mcp_selection: self
                .mcp_selection
                .as_ref()
                .map(tarsy_core::McpSelection::from),
            author: self
                .author
                .clone()
                .unwrap_or_else(|| default_author.to_string()),
        }
    }
}

/// Gemini native tools, by name (`google_search`, `code_execution`,
/// `url_context`) → enabled.
pub type NativeTools = BTreeMap<String, bool>;

/// Names accepted as native tool keys (`tarsy-core`'s).
pub use tarsy_core::NATIVE_TOOL_NAMES;

/// A per-alert MCP selection override.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct McpSelectionSpec {
    /// The complete MCP server set for this alert (each server at most once).
    #[schemars(length(min = 1, max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub servers: Vec<McpServerSelectionSpec>,
    /// Native tools override (Gemini), by name: google_search, code_execution, url_context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.all(k, k in ['google_search', 'code_execution', 'url_context'])", "message": "nativeTools keys must be google_search, code_execution or url_context"}]))]
    pub native_tools: Option<NativeTools>,
}

/// One MCP server of a selection.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct McpServerSelectionSpec {
    /// Name of an MCPServer (or a built-in server).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Tools of this server the agents may call; absent or empty means all tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub tools: Option<Vec<String>>,
}

impl From<&McpSelectionSpec> for tarsy_core::McpSelection {
    fn from(spec: &McpSelectionSpec) -> Self {
        tarsy_core::McpSelection {
            servers: spec
                .servers
                .iter()
                .map(|s| tarsy_core::McpServerSelection {
                    name: s.name.clone(),
                    tools: s.tools.clone(),
                })
                .collect(),
            native_tools: spec.native_tools.clone(),
        }
    }
}

impl From<&tarsy_core::McpSelection> for McpSelectionSpec {
    fn from(sel: &tarsy_core::McpSelection) -> Self {
        McpSelectionSpec {
            servers: sel
                .servers
                .iter()
                .map(|s| McpServerSelectionSpec {
                    name: s.name.clone(),
                    tools: s.tools.clone(),
                })
                .collect(),
            native_tools: sel.native_tools.clone(),
        }
    }
}
