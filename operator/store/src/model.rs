//! Records the store reads and writes, and how rows of either backend become
//! them. Enumerations come from `tarsy_core` and are stored as wire strings.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::types::Json;
use tarsy_core::{
    Cost, ExecutionKind, ExecutionStatus, IterationStrategy, LlmInteractionType,
    McpInteractionType, MessageRole, ParallelType, RecordScope, ReviewRating, ReviewStatus,
    ScoreStatus, SessionEndReason, SessionStatus, StageKind, SuccessPolicy, TimelineEvent,
    TokenUsage, ToolCall, UnknownValue,
};

/// Implements `FromRow` for both backends' rows with one body (`$row` is a
/// `&PgRow` in one instantiation and a `&SqliteRow` in the other).
macro_rules! from_row {
    ($ty:ty, |$row:ident| $body:block) => {
        impl<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> for $ty {
            fn from_row($row: &'r sqlx::postgres::PgRow) -> Result<Self, sqlx::Error> {
                #[allow(unused_imports)]
                use sqlx::Row as _;
                $body
            }
        }
        impl<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> for $ty {
            fn from_row($row: &'r sqlx::sqlite::SqliteRow) -> Result<Self, sqlx::Error> {
                #[allow(unused_imports)]
                use sqlx::Row as _;
                $body
            }
        }
    };
}

/// Parses a stored wire string; a value this build does not know is reported
/// as a decode error of that column (never a panic).
fn wire<T: FromStr<Err = UnknownValue>>(value: String, column: &str) -> Result<T, sqlx::Error> {
    value
        .parse()
        .map_err(|e: UnknownValue| sqlx::Error::ColumnDecode {
            index: column.to_string(),
            source: Box::new(e),
        })
}

/// [`wire`] for nullable columns.
fn opt_wire<T: FromStr<Err = UnknownValue>>(
    value: Option<String>,
    column: &str,
) -> Result<Option<T>, sqlx::Error> {
    value.map(|v| wire(v, column)).transpose()
}

// ---------------------------------------------------------------- sessions

/// A session to create (one per alert).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewSession {
    /// The session id, chosen by the caller (the Alert UID): creating twice is a no-op.
    pub id: String,
    /// The alert payload (already masked).
    pub alert_data: String,
    /// The alert type.
    pub alert_type: String,
    /// The chain that will run it.
    pub chain_id: String,
    /// Who submitted it.
    pub author: Option<String>,
    /// Runbook to include in prompts.
    pub runbook_url: Option<String>,
    /// Per-alert MCP selection override (replace, not merge).
    pub mcp_selection: Option<Value>,
    /// Where its memories are learned and recalled (a cluster's Alert
    /// namespace and project, local mode's project); `None`: nowhere.
    pub memory_scope: Option<String>,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Session {
    /// Session id.
    pub id: String,
    /// The alert payload.
    pub alert_data: String,
    /// The alert type.
    pub alert_type: String,
    /// The chain running it.
    pub chain_id: String,
    /// Lifecycle status.
    pub status: SessionStatus,
    /// Who submitted it.
    pub author: Option<String>,
    /// Runbook URL.
    pub runbook_url: Option<String>,
    /// MCP selection override.
    pub mcp_selection: Option<Value>,
    /// The chain's conclusion.
    pub final_analysis: Option<String>,
    /// Short summary of the final analysis.
    pub executive_summary: Option<String>,
    /// Why the executive summary could not be produced (fail-open).
    pub executive_summary_error: Option<String>,
    /// Why the session failed.
    pub error_message: Option<String>,
    /// Why a session that ran its course ended early (`budget_exhausted`).
    pub end_reason: Option<SessionEndReason>,
    /// Why a pending session waits (its scope's daily budget is spent).
    pub hold_reason: Option<String>,
    /// Index of the stage running now.
    pub current_stage_index: Option<i64>,
    /// Id of the stage running now.
    pub current_stage_id: Option<String>,
    /// The worker (pod) that owns it.
    pub pod_id: Option<String>,
    /// Submitted.
    pub created_at: DateTime<Utc>,
    /// Claimed by a worker.
    pub started_at: Option<DateTime<Utc>>,
    /// Reached a terminal status.
    pub completed_at: Option<DateTime<Utc>>,
    /// Last progress or heartbeat (orphan detection).
    pub last_interaction_at: Option<DateTime<Utc>>,
    /// Soft-deleted (hidden from lists).
    pub deleted_at: Option<DateTime<Utc>>,
    /// The judge's score, once a scoring attempt started.
    pub score: Option<ScoreBadge>,
    /// A person's review, once the session has finished.
    pub review: Option<ReviewBadge>,
}

/// A session's review as lists show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewBadge {
    /// Where the review stands.
    pub status: ReviewStatus,
    /// Who has it, or who reviewed it.
    pub assignee: Option<String>,
    /// The reviewer's verdict, once rated.
    pub rating: Option<ReviewRating>,
}

/// The review columns of a session row as its badge.
fn review_badge(
    status: Option<String>,
    assignee: Option<String>,
    rating: Option<String>,
) -> Result<Option<ReviewBadge>, sqlx::Error> {
    let Some(status) = status else {
        return Ok(None);
    };
    Ok(Some(ReviewBadge {
        status: wire(status, "review_status")?,
        assignee,
        rating: opt_wire(rating, "review_rating")?,
    }))
}

/// A session's score as lists show it: where its latest scoring attempt
/// stands, and the latest completed attempt's score and failure tags (kept
/// while a re-score runs or after one fails).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScoreBadge {
    /// The latest attempt's status.
    pub status: ScoreStatus,
    /// 0–100, once an attempt completed.
    pub score: Option<u8>,
    /// Failure tags of that attempt.
    pub failure_tags: Vec<String>,
}

/// The score columns of a session row as its badge.
fn score_badge(
    status: Option<String>,
    score: Option<i64>,
    tags: Option<Json<Vec<String>>>,
) -> Result<Option<ScoreBadge>, sqlx::Error> {
    let Some(status) = status else {
        return Ok(None);
    };
    Ok(Some(ScoreBadge {
        status: wire(status, "score_status")?,
        score: score.and_then(|s| u8::try_from(s).ok()),
        failure_tags: tags.map(|t| t.0).unwrap_or_default(),
    }))
}

from_row!(Session, |row| {
    Ok(Session {
        id: row.try_get("id")?,
        alert_data: row.try_get("alert_data")?,
        alert_type: row.try_get("alert_type")?,
        chain_id: row.try_get("chain_id")?,
        status: wire(row.try_get("status")?, "status")?,
        author: row.try_get("author")?,
        runbook_url: row.try_get("runbook_url")?,
        mcp_selection: row
            .try_get::<Option<Json<Value>>, _>("mcp_selection")?
            .map(|j| j.0),
        final_analysis: row.try_get("final_analysis")?,
        executive_summary: row.try_get("executive_summary")?,
        executive_summary_error: row.try_get("executive_summary_error")?,
        error_message: row.try_get("error_message")?,
        end_reason: row
            .try_get::<Option<String>, _>("end_reason")?
            .map(|v| wire(v, "end_reason"))
            .transpose()?,
        hold_reason: row.try_get("hold_reason")?,
        current_stage_index: row.try_get("current_stage_index")?,
        current_stage_id: row.try_get("current_stage_id")?,
        pod_id: row.try_get("pod_id")?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        completed_at: row.try_get("completed_at")?,
        last_interaction_at: row.try_get("last_interaction_at")?,
        deleted_at: row.try_get("deleted_at")?,
        score: score_badge(
            row.try_get("score_status")?,
            row.try_get("score")?,
            row.try_get("score_failure_tags")?,
        )?,
        review: review_badge(
            row.try_get("review_status")?,
            row.try_get("review_assignee")?,
            row.try_get("review_rating")?,
        )?,
    })
});

/// A session as the list shows it: everything but the large text fields
/// (alert data and final analysis can be up to a MiB each).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionSummary {
    /// Session id.
    pub id: String,
    /// The alert type.
    pub alert_type: String,
    /// The chain.
    pub chain_id: String,
    /// Lifecycle status.
    pub status: SessionStatus,
    /// Who submitted it.
    pub author: Option<String>,
    /// Short summary.
    pub executive_summary: Option<String>,
    /// Why it failed.
    pub error_message: Option<String>,
    /// Why a session that ran its course ended early (`budget_exhausted`).
    pub end_reason: Option<SessionEndReason>,
    /// Why a pending session waits (its scope's daily budget is spent).
    pub hold_reason: Option<String>,
    /// Index of the stage running now.
    pub current_stage_index: Option<i64>,
    /// Owning worker.
    pub pod_id: Option<String>,
    /// Submitted.
    pub created_at: DateTime<Utc>,
    /// Claimed.
    pub started_at: Option<DateTime<Utc>>,
    /// Finished.
    pub completed_at: Option<DateTime<Utc>>,
    /// Soft-deleted.
    pub deleted_at: Option<DateTime<Utc>>,
    /// The judge's score, once a scoring attempt started.
    pub score: Option<ScoreBadge>,
    /// A person's review, once the session has finished.
    pub review: Option<ReviewBadge>,
    /// What its LLM calls cost so far (none before the first call).
    pub cost: Option<Cost>,
}

from_row!(SessionSummary, |row| {
    Ok(SessionSummary {
        id: row.try_get("id")?,
        alert_type: row.try_get("alert_type")?,
        chain_id: row.try_get("chain_id")?,
        status: wire(row.try_get("status")?, "status")?,
        author: row.try_get("author")?,
        executive_summary: row.try_get("executive_summary")?,
        error_message: row.try_get("error_message")?,
        end_reason: row
            .try_get::<Option<String>, _>("end_reason")?
            .map(|v| wire(v, "end_reason"))
            .transpose()?,
        hold_reason: row.try_get("hold_reason")?,
        current_stage_index: row.try_get("current_stage_index")?,
        pod_id: row.try_get("pod_id")?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        completed_at: row.try_get("completed_at")?,
        deleted_at: row.try_get("deleted_at")?,
        score: score_badge(
            row.try_get("score_status")?,
            row.try_get("score")?,
            row.try_get("score_failure_tags")?,
        )?,
        review: review_badge(
            row.try_get("review_status")?,
            row.try_get("review_assignee")?,
            row.try_get("review_rating")?,
        )?,
        // Filled in by the list, from the usage rows.
        cost: None,
    })
});

/// Filters and paging of the session list. Every filter is optional; given
/// filters must all match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionFilter {
    /// Any of these statuses (empty: all).
    pub statuses: Vec<SessionStatus>,
    /// Exact alert type.
    pub alert_type: Option<String>,
    /// Exact chain id.
    pub chain_id: Option<String>,
    /// Exact author.
    pub author: Option<String>,
    /// Case-insensitive substring of the id, alert type, alert data, final
    /// analysis or executive summary.
    pub search: Option<String>,
    /// Include soft-deleted sessions.
    pub include_deleted: bool,
    /// Only sessions that need a person's attention: failed, timed out, or
    /// completed in a degraded way (an agent failed or timed out while the
    /// stage's success policy let the chain go on, or the executive summary
    /// could not be written).
    #[serde(default)]
    pub needs_attention: bool,
    /// Review status.
    #[serde(default)]
    pub review_status: Option<ReviewStatus>,
    /// Exact review assignee (who has it, or who reviewed it).
    #[serde(default)]
    pub assignee: Option<String>,
    /// Review rating.
    #[serde(default)]
    pub rating: Option<ReviewRating>,
    /// Lowest score, inclusive (unscored sessions are left out).
    #[serde(default)]
    pub score_min: Option<u8>,
    /// Highest score, inclusive (unscored sessions are left out).
    #[serde(default)]
    pub score_max: Option<u8>,
    /// A failure tag the session's score carries.
    #[serde(default)]
    pub failure_tag: Option<String>,
    /// Order of the rows (default: newest first).
    #[serde(default)]
    pub sort: SessionSort,
    /// Page size (default 20, at most 1000).
    pub limit: Option<i64>,
    /// Rows to skip.
    pub offset: Option<i64>,
}

/// A column the session list can be ordered by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SessionSortKey {
    /// Submission time.
    #[default]
    CreatedAt,
    /// Start time.
    StartedAt,
    /// End time.
    CompletedAt,
    /// Status (alphabetical).
    Status,
    /// Alert type.
    AlertType,
    /// Chain.
    ChainId,
    /// Author.
    Author,
}

impl SessionSortKey {
    /// Every key, for messages listing them.
    pub const ALL: [SessionSortKey; 7] = [
        Self::CreatedAt,
        Self::StartedAt,
        Self::CompletedAt,
        Self::Status,
        Self::AlertType,
        Self::ChainId,
        Self::Author,
    ];

    /// The wire name (also the column).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::CreatedAt => "created_at",
            Self::StartedAt => "started_at",
            Self::CompletedAt => "completed_at",
            Self::Status => "status",
            Self::AlertType => "alert_type",
            Self::ChainId => "chain_id",
            Self::Author => "author",
        }
    }

    /// The key of a wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// Order of the session list: a key and a direction; ties are broken by id
/// in the same direction, and missing values (a session not started yet)
/// come last either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSort {
    /// The column.
    pub key: SessionSortKey,
    /// Largest first.
    pub descending: bool,
}

impl Default for SessionSort {
    fn default() -> Self {
        Self {
            key: SessionSortKey::CreatedAt,
            descending: true,
        }
    }
}

/// One page of the session list, in the filter's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionPage {
    /// The sessions of this page.
    pub sessions: Vec<SessionSummary>,
    /// How many sessions match the filters in all pages.
    pub total: i64,
    /// The page size used.
    pub limit: i64,
    /// The offset used.
    pub offset: i64,
}

/// The end of a session: terminal status and results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOutcome {
    /// Terminal status (completed, failed, cancelled, timed_out).
    pub status: SessionStatus,
    /// The chain's conclusion.
    pub final_analysis: Option<String>,
    /// Short summary.
    pub executive_summary: Option<String>,
    /// Why the summary is missing.
    pub executive_summary_error: Option<String>,
    /// Why the session failed.
    pub error_message: Option<String>,
    /// Why a session that ran its course ended early.
    pub end_reason: Option<SessionEndReason>,
}

// ---------------------------------------------------------------- stages

/// A stage to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewStage {
    /// Id to use; a random one when absent. Creating the same id twice returns
    /// the existing stage (reconciles are idempotent).
    pub id: Option<String>,
    /// Owning session.
    pub session_id: String,
    /// Display name ("{name} - Synthesis" for synthesis stages).
    pub stage_name: String,
    /// What the stage is for.
    pub kind: StageKind,
    /// Position among the session's stages (unique per session).
    pub stage_index: i64,
    /// How many executions the stage will have (≥ 1).
    pub expected_agent_count: i64,
    /// Relation of the executions, when more than one.
    pub parallel_type: Option<ParallelType>,
    /// Success policy; absent means "any".
    pub success_policy: Option<SuccessPolicy>,
    /// Chat of a chat response stage.
    pub chat_id: Option<String>,
    /// The chat question this stage answers.
    pub chat_user_message_id: Option<String>,
}

/// A stored stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Stage {
    /// Stage id.
    pub id: String,
    /// Owning session.
    pub session_id: String,
    /// Display name.
    pub stage_name: String,
    /// What the stage is for (investigation, synthesis, chat).
    pub kind: StageKind,
    /// Position in the session.
    pub stage_index: i64,
    /// Executions expected.
    pub expected_agent_count: i64,
    /// Relation of the executions.
    pub parallel_type: Option<ParallelType>,
    /// Success policy (absent: any).
    pub success_policy: Option<SuccessPolicy>,
    /// Chat, for chat response stages.
    pub chat_id: Option<String>,
    /// Chat question answered.
    pub chat_user_message_id: Option<String>,
    /// Lifecycle status.
    pub status: ExecutionStatus,
    /// Why it did not complete.
    pub error_message: Option<String>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// First execution became active.
    pub started_at: Option<DateTime<Utc>>,
    /// Reached a terminal status.
    pub completed_at: Option<DateTime<Utc>>,
}

from_row!(Stage, |row| {
    Ok(Stage {
        id: row.try_get("id")?,
        session_id: row.try_get("session_id")?,
        stage_name: row.try_get("stage_name")?,
        kind: wire(row.try_get("stage_kind")?, "stage_kind")?,
        stage_index: row.try_get("stage_index")?,
        expected_agent_count: row.try_get("expected_agent_count")?,
        parallel_type: opt_wire(row.try_get("parallel_type")?, "parallel_type")?,
        success_policy: opt_wire(row.try_get("success_policy")?, "success_policy")?,
        chat_id: row.try_get("chat_id")?,
        chat_user_message_id: row.try_get("chat_user_message_id")?,
        status: wire(row.try_get("status")?, "status")?,
        error_message: row.try_get("error_message")?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        completed_at: row.try_get("completed_at")?,
    })
});

// ---------------------------------------------------------------- executions

/// An agent execution to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewAgentExecution {
    /// Id to use; a random one when absent. Creating the same id twice returns
    /// the existing execution.
    pub id: Option<String>,
    /// Owning stage.
    pub stage_id: String,
    /// Owning session (denormalised for session-wide queries).
    pub session_id: String,
    /// Display name (`{Base}-N` for replicas).
    pub agent_name: String,
    /// Launch position within the stage, from 1 (unique per stage).
    pub agent_index: i64,
    /// Investigation, synthesis or chat.
    pub kind: ExecutionKind,
    /// Resolved strategy.
    pub iteration_strategy: IterationStrategy,
    /// Resolved LLM provider name.
    pub llm_provider: Option<String>,
}

/// A stored agent execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentExecution {
    /// Execution id.
    pub id: String,
    /// Owning stage.
    pub stage_id: String,
    /// Owning session.
    pub session_id: String,
    /// Display name.
    pub agent_name: String,
    /// Launch position, from 1.
    pub agent_index: i64,
    /// What it is for.
    pub kind: ExecutionKind,
    /// Strategy.
    pub iteration_strategy: IterationStrategy,
    /// LLM provider.
    pub llm_provider: Option<String>,
    /// Lifecycle status.
    pub status: ExecutionStatus,
    /// Why it did not complete.
    pub error_message: Option<String>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Became active.
    pub started_at: Option<DateTime<Utc>>,
    /// Reached a terminal status.
    pub completed_at: Option<DateTime<Utc>>,
}

from_row!(AgentExecution, |row| {
    Ok(AgentExecution {
        id: row.try_get("id")?,
        stage_id: row.try_get("stage_id")?,
        session_id: row.try_get("session_id")?,
        agent_name: row.try_get("agent_name")?,
        agent_index: row.try_get("agent_index")?,
        kind: wire(row.try_get("kind")?, "kind")?,
        iteration_strategy: wire(row.try_get("iteration_strategy")?, "iteration_strategy")?,
        llm_provider: row.try_get("llm_provider")?,
        status: wire(row.try_get("status")?, "status")?,
        error_message: row.try_get("error_message")?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        completed_at: row.try_get("completed_at")?,
    })
});

// ---------------------------------------------------------------- timeline

/// Row wrapper: `TimelineEvent` lives in `tarsy_core`, so the row impl is on
/// this local newtype.
pub(crate) struct TimelineRow(pub(crate) TimelineEvent);

from_row!(TimelineRow, |row| {
    Ok(TimelineRow(TimelineEvent {
        id: row.try_get("id")?,
        scope: RecordScope {
            session_id: row.try_get("session_id")?,
            stage_id: row.try_get("stage_id")?,
            execution_id: row.try_get("execution_id")?,
        },
        sequence_number: row.try_get("sequence_number")?,
        event_type: wire(row.try_get("event_type")?, "event_type")?,
        status: wire(row.try_get("status")?, "status")?,
        content: row.try_get("content")?,
        metadata: row.try_get::<Json<Value>, _>("metadata")?.0,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    }))
});

// ---------------------------------------------------------------- messages

/// A stored conversation message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Message id.
    pub id: String,
    /// Where it belongs.
    #[serde(flatten)]
    pub scope: RecordScope,
    /// Position in the execution's conversation.
    pub sequence_number: i64,
    /// Who speaks.
    pub role: MessageRole,
    /// Text.
    pub content: String,
    /// Tool calls of an assistant message.
    pub tool_calls: Vec<ToolCall>,
    /// For tool messages: the answered call.
    pub tool_call_id: Option<String>,
    /// For tool messages: the tool's name.
    pub tool_name: Option<String>,
    /// Created.
    pub created_at: DateTime<Utc>,
}

from_row!(Message, |row| {
    Ok(Message {
        id: row.try_get("id")?,
        scope: RecordScope {
            session_id: row.try_get("session_id")?,
            stage_id: row.try_get("stage_id")?,
            execution_id: row.try_get("execution_id")?,
        },
        sequence_number: row.try_get("sequence_number")?,
        role: wire(row.try_get("role")?, "role")?,
        content: row.try_get("content")?,
        tool_calls: row.try_get::<Json<Vec<ToolCall>>, _>("tool_calls")?.0,
        tool_call_id: row.try_get("tool_call_id")?,
        tool_name: row.try_get("tool_name")?,
        created_at: row.try_get("created_at")?,
    })
});

// ---------------------------------------------------------------- interactions

/// Reads the four nullable token columns; all null means "no usage reported".
macro_rules! usage_from_row {
    ($row:ident) => {{
        let input: Option<i64> = $row.try_get("input_tokens")?;
        let output: Option<i64> = $row.try_get("output_tokens")?;
        let total: Option<i64> = $row.try_get("total_tokens")?;
        let thinking: Option<i64> = $row.try_get("thinking_tokens")?;
        let cached: Option<i64> = $row.try_get("cached_input_tokens")?;
        if input.is_none() && output.is_none() && total.is_none() && thinking.is_none() {
            None
        } else {
            Some(TokenUsage {
                input_tokens: input.unwrap_or(0),
                output_tokens: output.unwrap_or(0),
                total_tokens: total.unwrap_or(0),
                thinking_tokens: thinking.unwrap_or(0),
                cached_input_tokens: cached.unwrap_or(0),
            })
        }
    }};
}

/// A stored LLM interaction (trace level 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LlmInteraction {
    /// Interaction id.
    pub id: String,
    /// Where it belongs.
    #[serde(flatten)]
    pub scope: RecordScope,
    /// Why the call was made.
    pub interaction_type: LlmInteractionType,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// Last stored message sent with the call.
    pub last_message_id: Option<String>,
    /// Request (summary or whole).
    pub llm_request: Value,
    /// Response summary.
    pub llm_response: Value,
    /// Native thinking text.
    pub thinking_content: Option<String>,
    /// Final response text.
    pub response_text: String,
    /// Token usage.
    pub usage: Option<TokenUsage>,
    /// Estimated cost in US dollars when the call was made (none: no estimate).
    pub cost_usd: Option<f64>,
    /// Wall time in milliseconds.
    pub duration_ms: i64,
    /// Error text of a failed call.
    pub error_message: Option<String>,
    /// Recorded.
    pub created_at: DateTime<Utc>,
}

from_row!(LlmInteraction, |row| {
    Ok(LlmInteraction {
        id: row.try_get("id")?,
        scope: RecordScope {
            session_id: row.try_get("session_id")?,
            stage_id: row.try_get("stage_id")?,
            execution_id: row.try_get("execution_id")?,
        },
        interaction_type: wire(row.try_get("interaction_type")?, "interaction_type")?,
        provider: row.try_get("provider")?,
        model: row.try_get("model")?,
        last_message_id: row.try_get("last_message_id")?,
        llm_request: row.try_get::<Json<Value>, _>("llm_request")?.0,
        llm_response: row.try_get::<Json<Value>, _>("llm_response")?.0,
        thinking_content: row.try_get("thinking_content")?,
        response_text: row.try_get("response_text")?,
        usage: usage_from_row!(row),
        cost_usd: row.try_get("cost_usd")?,
        duration_ms: row.try_get("duration_ms")?,
        error_message: row.try_get("error_message")?,
        created_at: row.try_get("created_at")?,
    })
});

/// An LLM interaction as the trace list shows it (no request/response bodies).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LlmInteractionSummary {
    /// Interaction id.
    pub id: String,
    /// Where it belongs.
    #[serde(flatten)]
    pub scope: RecordScope,
    /// Why the call was made.
    pub interaction_type: LlmInteractionType,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// Token usage.
    pub usage: Option<TokenUsage>,
    /// Estimated cost in US dollars when the call was made (none: no estimate).
    pub cost_usd: Option<f64>,
    /// Wall time in milliseconds.
    pub duration_ms: i64,
    /// Error text of a failed call.
    pub error_message: Option<String>,
    /// Recorded.
    pub created_at: DateTime<Utc>,
}

from_row!(LlmInteractionSummary, |row| {
    Ok(LlmInteractionSummary {
        id: row.try_get("id")?,
        scope: RecordScope {
            session_id: row.try_get("session_id")?,
            stage_id: row.try_get("stage_id")?,
            execution_id: row.try_get("execution_id")?,
        },
        interaction_type: wire(row.try_get("interaction_type")?, "interaction_type")?,
        provider: row.try_get("provider")?,
        model: row.try_get("model")?,
        usage: usage_from_row!(row),
        cost_usd: row.try_get("cost_usd")?,
        duration_ms: row.try_get("duration_ms")?,
        error_message: row.try_get("error_message")?,
        created_at: row.try_get("created_at")?,
    })
});

/// A stored MCP interaction (trace level 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct McpInteraction {
    /// Interaction id.
    pub id: String,
    /// Where it belongs.
    #[serde(flatten)]
    pub scope: RecordScope,
    /// tools/call or tools/list.
    pub interaction_type: McpInteractionType,
    /// MCP server name.
    pub server_name: String,
    /// Tool name (empty for tools/list).
    pub tool_name: String,
    /// Arguments sent.
    pub tool_arguments: Value,
    /// Result received.
    pub tool_result: Value,
    /// Tools offered.
    pub available_tools: Value,
    /// Wall time in milliseconds.
    pub duration_ms: i64,
    /// Error text of a failed call.
    pub error_message: Option<String>,
    /// Recorded.
    pub created_at: DateTime<Utc>,
}

from_row!(McpInteraction, |row| {
    Ok(McpInteraction {
        id: row.try_get("id")?,
        scope: RecordScope {
            session_id: row.try_get("session_id")?,
            stage_id: row.try_get("stage_id")?,
            execution_id: row.try_get("execution_id")?,
        },
        interaction_type: wire(row.try_get("interaction_type")?, "interaction_type")?,
        server_name: row.try_get("server_name")?,
        tool_name: row.try_get("tool_name")?,
        tool_arguments: row.try_get::<Json<Value>, _>("tool_arguments")?.0,
        tool_result: row.try_get::<Json<Value>, _>("tool_result")?.0,
        available_tools: row.try_get::<Json<Value>, _>("available_tools")?.0,
        duration_ms: row.try_get("duration_ms")?,
        error_message: row.try_get("error_message")?,
        created_at: row.try_get("created_at")?,
    })
});

/// An MCP interaction as the trace list shows it (no argument/result bodies).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct McpInteractionSummary {
    /// Interaction id.
    pub id: String,
    /// Where it belongs.
    #[serde(flatten)]
    pub scope: RecordScope,
    /// tools/call or tools/list.
    pub interaction_type: McpInteractionType,
    /// MCP server name.
    pub server_name: String,
    /// Tool name.
    pub tool_name: String,
    /// Wall time in milliseconds.
    pub duration_ms: i64,
    /// Error text of a failed call.
    pub error_message: Option<String>,
    /// Recorded.
    pub created_at: DateTime<Utc>,
}

from_row!(McpInteractionSummary, |row| {
    Ok(McpInteractionSummary {
        id: row.try_get("id")?,
        scope: RecordScope {
            session_id: row.try_get("session_id")?,
            stage_id: row.try_get("stage_id")?,
            execution_id: row.try_get("execution_id")?,
        },
        interaction_type: wire(row.try_get("interaction_type")?, "interaction_type")?,
        server_name: row.try_get("server_name")?,
        tool_name: row.try_get("tool_name")?,
        duration_ms: row.try_get("duration_ms")?,
        error_message: row.try_get("error_message")?,
        created_at: row.try_get("created_at")?,
    })
});

/// The trace list of a session (trace level 1): interactions grouped stage →
/// execution, plus session-level LLM calls (executive summary).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionTrace {
    /// Stages in stage order.
    pub stages: Vec<TraceStage>,
    /// LLM interactions that belong to no stage.
    pub session_interactions: Vec<LlmInteractionSummary>,
}

/// One stage of a [`SessionTrace`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceStage {
    /// Stage id.
    pub stage_id: String,
    /// Stage name.
    pub stage_name: String,
    /// Stage index.
    pub stage_index: i64,
    /// Executions in launch order.
    pub executions: Vec<TraceExecution>,
}

/// One execution of a [`TraceStage`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceExecution {
    /// Execution id.
    pub execution_id: String,
    /// Display name.
    pub agent_name: String,
    /// Launch position.
    pub agent_index: i64,
    /// LLM calls in time order.
    pub llm_interactions: Vec<LlmInteractionSummary>,
    /// MCP calls in time order.
    pub mcp_interactions: Vec<McpInteractionSummary>,
}

// ---------------------------------------------------------------- events

/// A stored WebSocket event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    /// Increasing id: the catch-up cursor.
    pub id: i64,
    /// Session it concerns.
    pub session_id: String,
    /// Channel (`session:{id}` or `sessions`).
    pub channel: String,
    /// The event as sent to clients.
    pub payload: Value,
    /// Stored.
    pub created_at: DateTime<Utc>,
}

from_row!(StoredEvent, |row| {
    Ok(StoredEvent {
        id: row.try_get("id")?,
        session_id: row.try_get("session_id")?,
        channel: row.try_get("channel")?,
        payload: row.try_get::<Json<Value>, _>("payload")?.0,
        created_at: row.try_get("created_at")?,
    })
});

// ---------------------------------------------------------------- chats

/// A session's follow-up chat (at most one per session).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chat {
    /// Chat id.
    pub id: String,
    /// Session it extends.
    pub session_id: String,
    /// Who opened it.
    pub created_by: Option<String>,
    /// Worker running its current message.
    pub pod_id: Option<String>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last heartbeat of a running answer.
    pub last_interaction_at: Option<DateTime<Utc>>,
}

from_row!(Chat, |row| {
    Ok(Chat {
        id: row.try_get("id")?,
        session_id: row.try_get("session_id")?,
        created_by: row.try_get("created_by")?,
        pod_id: row.try_get("pod_id")?,
        created_at: row.try_get("created_at")?,
        last_interaction_at: row.try_get("last_interaction_at")?,
    })
});

/// A question asked in a chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatUserMessage {
    /// Message id.
    pub id: String,
    /// Chat.
    pub chat_id: String,
    /// The question.
    pub content: String,
    /// Who asked.
    pub author: Option<String>,
    /// Asked.
    pub created_at: DateTime<Utc>,
}

from_row!(ChatUserMessage, |row| {
    Ok(ChatUserMessage {
        id: row.try_get("id")?,
        chat_id: row.try_get("chat_id")?,
        content: row.try_get("content")?,
        author: row.try_get("author")?,
        created_at: row.try_get("created_at")?,
    })
});

/// Result of a create-if-absent call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Created<T> {
    /// The stored record (new, or the one that already existed).
    pub record: T,
    /// True when this call created it.
    pub created: bool,
}
