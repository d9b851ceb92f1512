//! What the API asks of the orchestration side ([`SessionControl`], defined
//! with its request and answer types in `tarsy_core::control`) and the
//! sources `/health` reads.

pub use tarsy_core::control::{
    AlertAccepted, CancelError, CancelOutcome, ChatAccepted, ChatError, ChatSubmission, NewAlert,
    ScoreAccepted, ScoreError, SessionControl, SubmitError,
};

pub use tarsy_core::SystemWarning;

/// Source of the warnings `/health` shows (the MCP crate's `SystemWarnings`
/// adapts to it in one line).
pub trait SystemWarningsSource: Send + Sync {
    /// The current warnings.
    fn warnings(&self) -> Vec<SystemWarning>;
}

/// Health of one MCP server as last checked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct McpServerHealth {
    /// The last check succeeded.
    pub healthy: bool,
    /// When it was checked.
    pub checked_at: chrono::DateTime<chrono::Utc>,
    /// Why it is unhealthy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Source of the MCP health snapshot `/health` shows (the MCP crate's
/// `HealthMonitor::statuses` adapts to it).
pub trait McpHealthSource: Send + Sync {
    /// Server name → last check.
    fn statuses(&self) -> std::collections::BTreeMap<String, McpServerHealth>;
}

/// Reachability of one service the API depends on besides its database (in
/// cluster mode: the Kubernetes API).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct DependencyHealth {
    /// `ok` or `error`.
    #[schema(examples("ok", "error"))]
    pub status: String,
    /// When it was last checked.
    pub checked_at: chrono::DateTime<chrono::Utc>,
    /// Why it is unreachable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl DependencyHealth {
    /// Whether the last check reached it.
    pub fn is_ok(&self) -> bool {
        self.status == "ok"
    }
}

/// Source of the dependencies `/health` reports (checked in the background:
/// `/health` never waits on them).
pub trait DependencyHealthSource: Send + Sync {
    /// Dependency name → last check.
    fn dependencies(&self) -> std::collections::BTreeMap<String, DependencyHealth>;
}
