//! What an agent execution writes while it runs, and the traits through which
//! it writes it. The store implements [`ExecutionRecorder`]; the event
//! transports (Postgres NOTIFY, in-process fan-out) implement
//! [`EventPublisher`]. The engine sees only these traits.

use async_trait::async_trait;

use crate::stream::StreamEvent;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::conversation::{ConversationMessage, TokenUsage, ToolCall};
use crate::status::{
    LlmInteractionType, McpInteractionType, MessageRole, TimelineEventStatus, TimelineEventType,
};

/// Identifies where a record belongs. Stage and execution are absent for
/// session-level records (the executive summary).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RecordScope {
    /// Session (alert) id.
    pub session_id: String,
    /// Stage id, if any.
    pub stage_id: Option<String>,
    /// Agent execution id, if any.
    pub execution_id: Option<String>,
}

/// A timeline event to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewTimelineEvent {
    /// Where it belongs.
    pub scope: RecordScope,
    /// Order within the session's timeline as the producer sees it.
    pub sequence_number: i64,
    /// What it is.
    pub event_type: TimelineEventType,
    /// Initial status (streaming, or completed for events created whole).
    pub status: TimelineEventStatus,
    /// Initial content.
    pub content: String,
    /// Type-specific metadata (tool name and arguments, thinking source, ...).
    pub metadata: Value,
}

/// A stored timeline event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TimelineEvent {
    /// Event id.
    pub id: String,
    /// Where it belongs.
    #[serde(flatten)]
    pub scope: RecordScope,
    /// Order within the timeline.
    pub sequence_number: i64,
    /// What it is.
    pub event_type: TimelineEventType,
    /// Current status.
    pub status: TimelineEventStatus,
    /// Current content.
    pub content: String,
    /// Metadata.
    pub metadata: Value,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

/// A stored conversation message: what an interrupted execution continues
/// from.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Stored id.
    pub id: String,
    /// Position in the execution's conversation, from 1.
    pub sequence_number: i64,
    /// The message.
    pub message: ConversationMessage,
}

/// A conversation message to store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewMessage {
    /// Where it belongs (session, stage and execution are all set).
    pub scope: RecordScope,
    /// Position in the execution's conversation, from 1.
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
}

/// An LLM call, recorded for the trace view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewLlmInteraction {
    /// Where it belongs.
    pub scope: RecordScope,
    /// Why the call was made.
    pub interaction_type: LlmInteractionType,
    /// Provider name (the LLMProvider resource).
    pub provider: String,
    /// Model name.
    pub model: String,
    /// Id of the last stored message sent with this call; the trace view
    /// rebuilds the conversation from the message table up to it.
    pub last_message_id: Option<String>,
    /// Request summary, or the whole request for self-contained calls
    /// (summarization, executive summary) that do not use the message table.
    pub llm_request: Value,
    /// Response summary: text, tool calls, native tool output.
    pub llm_response: Value,
    /// Native thinking text, if any.
    pub thinking_content: Option<String>,
    /// Final response text.
    pub response_text: String,
    /// Token usage of the call.
    pub usage: Option<TokenUsage>,
    /// Estimated cost in US dollars at the provider's price when the call
    /// was made; `None`: no estimate (estimates off, or no known price).
    pub cost_usd: Option<f64>,
    /// Wall time in milliseconds.
    pub duration_ms: i64,
    /// Error text when the call failed.
    pub error_message: Option<String>,
}

/// An MCP call, recorded for the trace view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewMcpInteraction {
    /// Where it belongs.
    pub scope: RecordScope,
    /// tools/call or tools/list.
    pub interaction_type: McpInteractionType,
    /// MCP server name.
    pub server_name: String,
    /// Tool name (empty for tools/list).
    pub tool_name: String,
    /// Arguments sent.
    pub tool_arguments: Value,
    /// Result received (masked, storage-truncated).
    pub tool_result: Value,
    /// Tools the server offered (tools/list): name, description and
    /// input_schema of each.
    pub available_tools: Value,
    /// Wall time in milliseconds.
    pub duration_ms: i64,
    /// Error text when the call failed.
    pub error_message: Option<String>,
}

/// Errors of a recorder or publisher.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The referenced record does not exist.
    #[error("{kind} {id} not found")]
    NotFound {
        /// Record kind, e.g. "timeline event".
        kind: &'static str,
        /// The missing id.
        id: String,
    },
    /// The backing store failed.
    #[error("storage error: {0}")]
    Storage(String),
    /// The backing store could not be reached (or could not take the
    /// write) for longer than its writes wait: the record is not lost to a
    /// bad request, and the execution can go on from its stored records
    /// once the store is back.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
}

/// One write of a [`ExecutionRecorder::write_batch`].
#[derive(Debug, Clone, PartialEq)]
pub enum RecordWrite {
    /// [`ExecutionRecorder::create_timeline_event`].
    CreateEvent(NewTimelineEvent),
    /// [`ExecutionRecorder::complete_timeline_event`].
    CompleteEvent {
        /// The event.
        event_id: String,
        /// Final content.
        content: String,
        /// Final status.
        status: TimelineEventStatus,
        /// Merged into the event's metadata.
        metadata: Option<Value>,
    },
    /// [`ExecutionRecorder::create_message`].
    Message(NewMessage),
    /// [`ExecutionRecorder::create_llm_interaction`].
    LlmInteraction(NewLlmInteraction),
    /// [`ExecutionRecorder::create_mcp_interaction`].
    McpInteraction(NewMcpInteraction),
}

/// Writes what an agent execution produces, as it happens. Every method is a
/// single insert or an update by id: progressive writes stay cheap.
#[async_trait]
pub trait ExecutionRecorder: Send + Sync {
    /// Creates a timeline event and returns its id.
    async fn create_timeline_event(&self, event: NewTimelineEvent) -> Result<String, RecordError>;

    /// Appends streamed content to a streaming event.
    async fn append_timeline_content(&self, event_id: &str, delta: &str)
    -> Result<(), RecordError>;

    /// Sets the final content and status of an event; `metadata`, when given,
    /// is merged into the event's metadata (keys already there are kept unless
    /// overwritten).
    async fn complete_timeline_event(
        &self,
        event_id: &str,
        content: &str,
        status: TimelineEventStatus,
        metadata: Option<Value>,
    ) -> Result<(), RecordError>;

    /// Stores a conversation message and returns its id.
    async fn create_message(&self, message: NewMessage) -> Result<String, RecordError>;

    /// Records an LLM call and returns its id.
    async fn create_llm_interaction(
        &self,
        interaction: NewLlmInteraction,
    ) -> Result<String, RecordError>;

    /// Records an MCP call and returns its id.
    async fn create_mcp_interaction(
        &self,
        interaction: NewMcpInteraction,
    ) -> Result<String, RecordError>;

    /// One write through the method of its kind; returns the id it
    /// created (`None` for a completion).
    async fn write(&self, write: RecordWrite) -> Result<Option<String>, RecordError> {
        Ok(match write {
            RecordWrite::CreateEvent(e) => Some(self.create_timeline_event(e).await?),
            RecordWrite::CompleteEvent {
                event_id,
                content,
                status,
                metadata,
            } => {
                self.complete_timeline_event(&event_id, &content, status, metadata)
                    .await?;
                None
            }
            RecordWrite::Message(m) => Some(self.create_message(m).await?),
            RecordWrite::LlmInteraction(i) => Some(self.create_llm_interaction(i).await?),
            RecordWrite::McpInteraction(i) => Some(self.create_mcp_interaction(i).await?),
        })
    }

    /// Writes what this recorder deferred (see `tarsy_engine`'s deferred
    /// MCP records); a recorder that defers nothing has nothing to do.
    async fn flush(&self) -> Result<(), RecordError> {
        Ok(())
    }

    /// Several writes in order, as one transaction where the store has them
    /// (one commit for an iteration step instead of one per record).
    /// Returns, per write, the id it created (`None` for a completion). The
    /// default runs them one by one.
    async fn write_batch(
        &self,
        writes: Vec<RecordWrite>,
    ) -> Result<Vec<Option<String>>, RecordError> {
        let mut ids = Vec::with_capacity(writes.len());
        for w in writes {
            ids.push(self.write(w).await?);
        }
        Ok(ids)
    }

    /// Timeline events of one execution, in sequence order (synthesis and
    /// chat context are built from these).
    async fn execution_timeline(
        &self,
        execution_id: &str,
    ) -> Result<Vec<TimelineEvent>, RecordError>;

    /// Timeline events of a whole session, in order.
    async fn session_timeline(&self, session_id: &str) -> Result<Vec<TimelineEvent>, RecordError>;

    /// The stored conversation of one execution, in order (empty for an
    /// execution that has not started): an execution interrupted by a
    /// restart continues from it.
    async fn execution_messages(
        &self,
        execution_id: &str,
    ) -> Result<Vec<StoredMessage>, RecordError>;
}

/// A WebSocket channel: `session:{id}` or `sessions`.
pub fn session_channel(session_id: &str) -> String {
    format!("session:{session_id}")
}

/// The channel carrying session list updates.
pub const SESSIONS_CHANNEL: &str = "sessions";

/// Publishes live events to WebSocket subscribers.
#[async_trait]
pub trait EventPublisher: Send + Sync {
    /// A persistent event: stored for catch-up and delivered (on Postgres, in
    /// one transaction with its NOTIFY) on `channel`. Returns the event id.
    async fn publish(&self, channel: &str, event: &StreamEvent) -> Result<i64, RecordError>;

    /// A transient event (`stream.chunk`): delivered, never stored. Failures
    /// are the publisher's to log; streaming never stops an agent.
    async fn publish_transient(&self, channel: &str, event: &StreamEvent);
}

/// `metadata.kind` values of `error` timeline events that mean the
/// investigation ran with less than it was configured with. The API lists
/// them as the session's warnings.
pub mod error_kind {
    /// An MCP server the agent cannot use (failed to start, to list its
    /// tools, or lacks the tools a selection names); `metadata.server` names it.
    pub const MCP_SERVER_UNAVAILABLE: &str = "mcp_server_unavailable";
    /// Listing the agent's tools failed or timed out.
    pub const TOOL_LIST_ERROR: &str = "tool_list_error";
    /// The alert's runbook could not be fetched; the agent worked from the
    /// default runbook.
    pub const RUNBOOK_UNAVAILABLE: &str = "runbook_unavailable";
    /// The alert's runbook was larger than the limit; the agent saw only
    /// its beginning.
    pub const RUNBOOK_TRUNCATED: &str = "runbook_truncated";
    /// A judge's report on the tools could not be had; its assessment
    /// stands alone.
    pub const TOOL_REPORT_UNAVAILABLE: &str = "tool_report_unavailable";
    /// The kinds that degrade an investigation.
    pub const DEGRADED: &[&str] = &[
        MCP_SERVER_UNAVAILABLE,
        TOOL_LIST_ERROR,
        RUNBOOK_UNAVAILABLE,
        RUNBOOK_TRUNCATED,
    ];
}
