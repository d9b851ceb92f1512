//! `Alert`: one alert to investigate. Written by users, the Alertmanager
//! bridge and the REST API; its status is the bounded summary of the session.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ExecutionPhase, MAX_ALERT_DATA_BYTES, ParallelType, StageKind, SuccessPolicy};

/// An alert for TARSy to investigate. The operator picks a Chain (`chainRef`,
/// else the Chain whose `alertTypes` lists `alertType`), runs its stages as
/// AgentExecutions and records the result in `status` (summary) and in
/// Postgres (everything).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "tarsy.dev",
    version = "v1alpha1",
    kind = "Alert",
    namespaced,
    status = "AlertStatus",
    derive = "PartialEq",
    shortname = "talert",
    category = "tarsy",
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".spec.alertType",
        description = "Alert type"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Session phase"
    ),
    printcolumn(
        name = "Stage",
        type_ = "string",
        json_path = ".status.currentStage",
        description = "Current stage"
    ),
    printcolumn(
        name = "Chain",
        type_ = "string",
        json_path = ".status.chain",
        description = "Chain",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "An alert for TARSy to investigate: a Chain of agents analyses it and the result is kept in status and in Postgres."
)]
#[x_kube(validation = Rule::new("has(self.chainRef) == has(oldSelf.chainRef) && (!has(self.chainRef) || self.chainRef == oldSelf.chainRef)").message("chainRef is immutable"))]
#[x_kube(validation = Rule::new("has(self.mcpSelection) == has(oldSelf.mcpSelection) && (!has(self.mcpSelection) || self.mcpSelection == oldSelf.mcpSelection)").message("mcpSelection is immutable"))]
#[serde(rename_all = "camelCase")]
pub struct AlertSpec {
    /// Alert type (e.g. `KubePodCrashLooping`). Selects the Chain whose
    /// `alertTypes` contains it, unless `chainRef` names a Chain. Immutable.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("alertType is immutable"))]
    pub alert_type: String,

    /// The alert payload as opaque text (YAML, JSON or prose), at most 1 MiB.
    /// It is masked before any agent or record sees it. Immutable.
    #[x_kube(validation = Rule::new(format!("size(bytes(self)) <= {MAX_ALERT_DATA_BYTES}")).message(format!("data must not exceed 1 MiB ({MAX_ALERT_DATA_BYTES} bytes)").as_str()))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("data is immutable"))]
    pub data: String,

    /// Name of the Chain (same namespace) to run, overriding the lookup by
    /// `alertType`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub chain_ref: Option<String>,

    /// URL of a runbook the agents receive as context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    #[x_kube(validation = Rule::new("self.matches('^https?://')").message("runbookUrl must be an http(s) URL"))]
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
    #[x_kube(validation = Rule::new("self || !oldSelf").message("cancel cannot be withdrawn once set"))]
    pub cancel: Option<bool>,
}

/// Origin of an alert.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
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

/// Gemini native tools, by name (`google_search`, `code_execution`,
/// `url_context`) → enabled.
pub type NativeTools = BTreeMap<String, bool>;

/// Names accepted as native tool keys (`tarsy-core`'s).
pub use tarsy_core::NATIVE_TOOL_NAMES;

/// A per-alert MCP selection override.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct McpSelectionSpec {
    /// The complete MCP server set for this alert (each server at most once).
    #[schemars(length(min = 1, max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub servers: Vec<McpServerSelectionSpec>,
    /// Native tools override (Gemini), by name: google_search, code_execution, url_context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(k, k in ['google_search', 'code_execution', 'url_context'])").message("nativeTools keys must be google_search, code_execution or url_context"))]
    pub native_tools: Option<NativeTools>,
}

/// One MCP server of a selection.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
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

/// Phase of an alert's investigation session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
pub enum AlertPhase {
    /// Accepted, waiting for a chain or for admission (concurrency limit).
    Pending,
    /// The chain is running.
    InProgress,
    /// Cancellation requested; executions are being stopped.
    Cancelling,
    /// Every stage finished successfully.
    Completed,
    /// A stage (or synthesis) failed, or no chain matched.
    Failed,
    /// Cancelled by a user.
    Cancelled,
    /// The session timeout expired.
    TimedOut,
}

impl AlertPhase {
    /// True once the phase can no longer change.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Cancelled | Self::TimedOut
        )
    }
}

impl From<AlertPhase> for tarsy_core::SessionStatus {
    fn from(p: AlertPhase) -> Self {
        use tarsy_core::SessionStatus as S;
        match p {
            AlertPhase::Pending => S::Pending,
            AlertPhase::InProgress => S::InProgress,
            AlertPhase::Cancelling => S::Cancelling,
            AlertPhase::Completed => S::Completed,
            AlertPhase::Failed => S::Failed,
            AlertPhase::Cancelled => S::Cancelled,
            AlertPhase::TimedOut => S::TimedOut,
        }
    }
}

impl From<tarsy_core::SessionStatus> for AlertPhase {
    fn from(s: tarsy_core::SessionStatus) -> Self {
        use tarsy_core::SessionStatus as S;
        match s {
            S::Pending => AlertPhase::Pending,
            S::InProgress => AlertPhase::InProgress,
            S::Cancelling => AlertPhase::Cancelling,
            S::Completed => AlertPhase::Completed,
            S::Failed => AlertPhase::Failed,
            S::Cancelled => AlertPhase::Cancelled,
            S::TimedOut => AlertPhase::TimedOut,
        }
    }
}

/// Observed state of an Alert: a bounded summary (full timelines live in Postgres).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AlertStatus {
    /// Session phase: Pending, InProgress, Cancelling, Completed, Failed, Cancelled, TimedOut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AlertPhase>,
    /// Session id in Postgres (the Alert's UID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub session_id: Option<String>,
    /// Name of the Chain that runs this alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub chain: Option<String>,
    /// Name of the stage running now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub current_stage: Option<String>,
    /// 1-based index (in `stages`) of the stage running now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_stage_index: Option<u32>,
    /// Stages started so far, in order (synthesis stages have their own entry).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub stages: Vec<StageStatus>,
    /// The investigation's conclusion, clipped (full text in Postgres).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16384))]
    pub final_analysis: Option<String>,
    /// Short executive summary of the final analysis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16384))]
    pub executive_summary: Option<String>,
    /// Why the executive summary could not be generated (the session still completes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16384))]
    pub executive_summary_error: Option<String>,
    /// Why the session failed, clipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16384))]
    pub error: Option<String>,
    /// When the session started running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the session reached a terminal phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// Standard conditions (`Ready`: the investigation finished successfully;
    /// `ChainResolved`: a chain was found).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Summary of one stage of the session.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StageStatus {
    /// 1-based position among the session's stages (synthesis stages count).
    pub index: u32,
    /// Stage name (`{stage} - Synthesis` for a synthesis stage).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// investigation (a configured stage) or synthesis (of the stage
    /// before it). Absent in status written by older operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<StageKind>,
    /// Stage id in Postgres.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub stage_id: Option<String>,
    /// Phase: Pending, Active, Completed, Failed, TimedOut, Cancelled.
    pub phase: ExecutionPhase,
    /// Names of this stage's AgentExecution resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub executions: Vec<String>,
    /// multi_agent or replica when the stage runs several executions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_type: Option<ParallelType>,
    /// Success policy applied to the stage (all or any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<SuccessPolicy>,
    /// When the stage started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the stage finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// Why the stage failed, clipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub error: Option<String>,
    /// Executions of `executions` that could not start because their
    /// configuration did not resolve (an Agent or LLMProvider removed, a
    /// selection that no longer applies): no AgentExecution exists for
    /// them, each failed with its reason, and the stage's success policy
    /// decides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub unstarted: Vec<UnstartedExecution>,
}

/// An execution that failed before it could start.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct UnstartedExecution {
    /// Its name, as listed in the stage's `executions`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The agent's name in records (`{agent}-N` for replicas).
    #[schemars(length(min = 1, max = 253))]
    pub display_name: String,
    /// Why it could not start, clipped.
    #[schemars(length(max = 4096))]
    pub error: String,
}
