//! `Alert`: one alert to investigate. Written by users, the Alertmanager
//! bridge and the REST API; its status is the bounded summary of the session.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tarsy_config::model::AlertSpec;

use tarsy_core::{ParallelType, StageKind, SuccessPolicy};

use crate::common::ExecutionPhase;

// The spec of an [`Alert`]: the model's [`AlertSpec`]. (A doc comment here would replace the
// model's description in the CRD schema.)
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
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
        name = "Score",
        type_ = "integer",
        json_path = ".status.score",
        description = "The judge's score, 0-100"
    ),
    printcolumn(
        name = "Cost",
        type_ = "string",
        json_path = ".status.cost.usd",
        description = "Estimated cost of the session's LLM calls, US dollars"
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
#[serde(transparent)]
#[schemars(transparent)]
pub struct AlertResourceSpec(pub AlertSpec);

crate::spec_wrapper!(AlertResourceSpec => AlertSpec);

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
    /// The judge's score of the investigation, 0–100 (the latest completed
    /// scoring attempt; the `Scored` condition says where the latest stands
    /// and gives the failure tags).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 100))]
    pub score: Option<u8>,
    /// How many scoring attempts of the session have ended (with a score or
    /// without): the operator counts each new end once, and learns from it
    /// when it gave a score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoring_attempts_ended: Option<u32>,
    /// What the session's LLM calls cost so far: the investigation's, the
    /// executive summary's, scoring's, memory's and chat answers'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostStatus>,
    /// When the session started running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the session reached a terminal phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// Standard conditions (`Ready`: the investigation finished successfully;
    /// `ChainResolved`: a chain was found; `Scored`: the judge scored it, or
    /// why not yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The estimated cost of a session's LLM calls.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CostStatus {
    /// US dollars, four decimals (a string: status holds no floats).
    #[schemars(length(max = 32))]
    pub usd: String,
    /// Some calls have no estimate (a model without a price, or estimates
    /// off): `usd` is a lower bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// Tokens of every call.
    pub tokens: u64,
}

impl CostStatus {
    /// The status of a session's cost.
    pub fn of(cost: &tarsy_core::Cost) -> Self {
        Self {
            usd: tarsy_core::cost::usd(cost.usd),
            partial: cost.partial,
            tokens: u64::try_from(cost.tokens.total_tokens).unwrap_or(0),
        }
    }
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
