//! Every event TARSy publishes for live subscribers (NOTIFY, the WebSocket),
//! as one type: [`StreamEvent`], serialized with a `type` tag
//! (`session.status`, `stage.status`, `timeline_event.created`,
//! `timeline_event.completed`, `stream.chunk`, `chat.created`,
//! `chat.user_message`, `session.score`, `session.review`). Publishers build these values; nothing publishes
//! ad-hoc JSON.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    ExecutionStatus, ReviewAction, ReviewRating, ReviewStatus, ScoreStatus, SessionStatus,
    TimelineEventStatus, TimelineEventType,
};

/// Now, as events carry it (RFC 3339).
pub fn timestamp() -> String {
    chrono::Utc::now().to_rfc3339()
}

/// What happened to a stage, as `stage.status` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageEventStatus {
    /// Its executions started.
    Started,
    /// It completed.
    Completed,
    /// It failed.
    Failed,
    /// Its session timed out.
    TimedOut,
    /// It was cancelled.
    Cancelled,
}

impl From<ExecutionStatus> for StageEventStatus {
    /// A stage's recorded status as an event (pending and active read as
    /// started).
    fn from(status: ExecutionStatus) -> Self {
        match status {
            ExecutionStatus::Pending | ExecutionStatus::Active => Self::Started,
            ExecutionStatus::Completed => Self::Completed,
            ExecutionStatus::Failed => Self::Failed,
            ExecutionStatus::TimedOut => Self::TimedOut,
            ExecutionStatus::Cancelled => Self::Cancelled,
        }
    }
}

/// One live event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum StreamEvent {
    /// A session's status changed.
    #[serde(rename = "session.status")]
    SessionStatus {
        /// The session.
        session_id: String,
        /// Its status now.
        status: SessionStatus,
        /// When.
        timestamp: String,
    },
    /// A stage started or ended.
    #[serde(rename = "stage.status")]
    StageStatus {
        /// The session.
        session_id: String,
        /// The stage record.
        stage_id: String,
        /// Its name.
        stage_name: String,
        /// Its index among the session's stages.
        stage_index: i64,
        /// What happened.
        status: StageEventStatus,
        /// When.
        timestamp: String,
    },
    /// A timeline event was created (streaming or whole).
    #[serde(rename = "timeline_event.created")]
    TimelineEventCreated {
        /// The timeline event.
        event_id: String,
        /// The session.
        session_id: String,
        /// Its stage, unless session-level.
        stage_id: Option<String>,
        /// Its execution, unless session-level.
        execution_id: Option<String>,
        /// Order within its execution.
        sequence_number: i64,
        /// What it is.
        event_type: TimelineEventType,
        /// Streaming or completed.
        status: TimelineEventStatus,
        /// Its content so far.
        content: String,
        /// Type-specific metadata.
        metadata: Value,
        /// When.
        timestamp: String,
    },
    /// A timeline event got its final content and status.
    #[serde(rename = "timeline_event.completed")]
    TimelineEventCompleted {
        /// The timeline event.
        event_id: String,
        /// The session.
        session_id: String,
        /// Its stage, unless session-level.
        stage_id: Option<String>,
        /// Its execution, unless session-level.
        execution_id: Option<String>,
        /// What it is.
        event_type: TimelineEventType,
        /// Its final status.
        status: TimelineEventStatus,
        /// Its final content.
        content: String,
        /// Its metadata (merged).
        metadata: Value,
        /// When.
        timestamp: String,
    },
    /// A piece of a streaming event's content (transient: never stored).
    #[serde(rename = "stream.chunk")]
    StreamChunk {
        /// The timeline event it belongs to.
        event_id: String,
        /// The session.
        session_id: String,
        /// Its execution.
        execution_id: Option<String>,
        /// What the event is.
        event_type: TimelineEventType,
        /// The new text.
        delta: String,
        /// When.
        timestamp: String,
    },
    /// A session's chat was opened.
    #[serde(rename = "chat.created")]
    ChatCreated {
        /// The session.
        session_id: String,
        /// The chat.
        chat_id: String,
        /// Who opened it.
        created_by: String,
        /// When.
        timestamp: String,
    },
    /// A question was accepted (before its answer's stage emits anything).
    #[serde(rename = "chat.user_message")]
    ChatUserMessage {
        /// The session.
        session_id: String,
        /// The chat.
        chat_id: String,
        /// The stored question.
        message_id: String,
        /// The stage answering it.
        stage_id: String,
        /// The question.
        content: String,
        /// Who asked.
        author: String,
        /// When.
        timestamp: String,
    },
    /// A scoring attempt of a finished session started or ended.
    #[serde(rename = "session.score")]
    SessionScore {
        /// The session.
        session_id: String,
        /// The attempt.
        attempt_id: String,
        /// Where it stands.
        status: ScoreStatus,
        /// 0–100, once completed.
        score: Option<u8>,
        /// Failure tags, once completed.
        failure_tags: Vec<String>,
        /// When.
        timestamp: String,
    },
    /// A person changed a session's review.
    #[serde(rename = "session.review")]
    SessionReview {
        /// The session.
        session_id: String,
        /// What was done.
        action: ReviewAction,
        /// Who did it.
        actor: String,
        /// Where the review stands now.
        status: ReviewStatus,
        /// Who has it, or who reviewed it.
        assignee: Option<String>,
        /// The rating, once rated.
        rating: Option<ReviewRating>,
        /// When.
        timestamp: String,
    },
}

impl StreamEvent {
    /// The session the event belongs to.
    pub fn session_id(&self) -> &str {
        match self {
            Self::SessionStatus { session_id, .. }
            | Self::StageStatus { session_id, .. }
            | Self::TimelineEventCreated { session_id, .. }
            | Self::TimelineEventCompleted { session_id, .. }
            | Self::StreamChunk { session_id, .. }
            | Self::ChatCreated { session_id, .. }
            | Self::ChatUserMessage { session_id, .. }
            | Self::SessionScore { session_id, .. }
            | Self::SessionReview { session_id, .. } => session_id,
        }
    }

    /// The event as the JSON object subscribers receive.
    pub fn to_value(&self) -> Value {
        // Every variant is an object of strings, numbers and JSON values:
        // serialization cannot fail.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_carry_their_type_tag_and_wire_names() {
        let v = StreamEvent::StageStatus {
            session_id: "s".into(),
            stage_id: "s-s1".into(),
            stage_name: "triage".into(),
            stage_index: 1,
            status: ExecutionStatus::TimedOut.into(),
            timestamp: "t".into(),
        }
        .to_value();
        assert_eq!(v["type"], "stage.status");
        assert_eq!(v["status"], "timed_out");
        let chunk = StreamEvent::StreamChunk {
            event_id: "e".into(),
            session_id: "s".into(),
            execution_id: None,
            event_type: TimelineEventType::LlmResponse,
            delta: "tok".into(),
            timestamp: "t".into(),
        };
        let v = chunk.to_value();
        assert_eq!(v["type"], "stream.chunk");
        assert_eq!(v["event_type"], "llm_response");
        assert_eq!(v["execution_id"], Value::Null);
        let back: StreamEvent = serde_json::from_value(v).unwrap();
        assert_eq!(back, chunk);
        assert_eq!(back.session_id(), "s");
        assert_eq!(
            StageEventStatus::from(ExecutionStatus::Active),
            StageEventStatus::Started
        );
    }
}
