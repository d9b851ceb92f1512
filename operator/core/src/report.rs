//! What sessions report to each other and to people: a completed stage's
//! result (the context of later stages) and operational warnings.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A completed stage's result, as context for later stages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageResult {
    /// Stage record name.
    pub stage_name: String,
    /// Its final analysis (the synthesis result for a parallel stage); empty
    /// when it produced none.
    pub final_analysis: String,
}

/// One operational warning (`/health`, the dashboard's System page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SystemWarning {
    /// Unique id.
    pub id: String,
    /// Category, e.g. `mcp_health`.
    pub category: String,
    /// One-line message.
    pub message: String,
    /// Details (the error).
    pub details: String,
    /// The MCP server concerned, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_id: Option<String>,
    /// When it was (last) raised.
    pub created_at: DateTime<Utc>,
}
