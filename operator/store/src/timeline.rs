//! Timeline events (what the user sees) and conversation messages (what the
//! model saw). Streaming is an append in SQL, never a read-modify-write.

use serde_json::{Map, Value};
use tarsy_core::{
    NewMessage, NewTimelineEvent, RecordScope, TimelineEvent, TimelineEventStatus,
    TimelineEventType,
};

use crate::Store;
use crate::db::{Sql, new_id, now};
use crate::error::{Result, StoreError, classify_insert, is_foreign_key_violation};
use crate::model::{Message, TimelineRow};

const EVENT: &str = "timeline event";
const MESSAGE: &str = "message";

/// Metadata is always a JSON object so that completion can merge into it.
pub(crate) fn metadata_object(metadata: Value) -> Result<Value> {
    match metadata {
        Value::Null => Ok(Value::Object(Map::new())),
        Value::Object(_) => Ok(metadata),
        other => Err(StoreError::InvalidInput(format!(
            "timeline metadata must be a JSON object, got {other}"
        ))),
    }
}

impl Store {
    /// Names the missing parent of a record whose insert broke a foreign key.
    pub(crate) async fn require_scope(&self, scope: &RecordScope) -> Result<()> {
        self.require_session(&scope.session_id).await?;
        if let Some(stage) = &scope.stage_id {
            self.get_stage(stage).await?;
        }
        if let Some(execution) = &scope.execution_id {
            self.get_agent_execution(execution).await?;
        }
        Ok(())
    }

    /// Creates a timeline event (streaming, or whole) and returns it.
    pub async fn create_timeline_event(&self, event: NewTimelineEvent) -> Result<TimelineEvent> {
        let metadata = metadata_object(event.metadata)?;
        let at = now();
        let id = new_id();
        let result = self
            .db
            .fetch_optional::<TimelineRow>(
                Sql::new(
                    "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number, \
                     event_type, status, content, metadata, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) \
                     ON CONFLICT (id) DO NOTHING RETURNING *",
                )
                .bind(id.clone())
                .bind(&event.scope.session_id)
                .bind(event.scope.stage_id.clone())
                .bind(event.scope.execution_id.clone())
                .bind(event.sequence_number)
                .bind(event.event_type.as_str())
                .bind(event.status.as_str())
                .bind(event.content)
                .bind(metadata)
                .bind(at),
            )
            .await;
        match result {
            Ok(Some(row)) => Ok(row.0),
            // Stored by an earlier attempt of this call.
            Ok(None) => self.get_timeline_event(&id).await,
            Err(e) if is_foreign_key_violation(&e) => {
                self.require_scope(&event.scope).await?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Appends streamed text to a streaming event in one statement
    /// (`content = content || delta`). Not-found for an unknown id; conflict
    /// when the event is no longer streaming.
    pub async fn append_timeline_content(&self, id: &str, delta: &str) -> Result<()> {
        let n = self
            .db
            .execute(
                Sql::new(
                    "UPDATE timeline_events SET content = content || $2, updated_at = $3 \
                     WHERE id = $1 AND status = $4",
                )
                .bind(id)
                .bind(delta)
                .bind(now())
                .bind(TimelineEventStatus::Streaming.as_str()),
            )
            .await?;
        if n == 1 {
            return Ok(());
        }
        let event = self.get_timeline_event(id).await?;
        Err(StoreError::Conflict {
            kind: EVENT,
            message: format!("event {id} is {}, not streaming", event.status),
        })
    }

    /// Sets the final content and status; `metadata`, when given, is merged
    /// into the stored metadata (its top-level keys win, others are kept).
    /// Returns the completed event.
    pub async fn complete_timeline_event(
        &self,
        id: &str,
        content: &str,
        status: TimelineEventStatus,
        metadata: Option<Value>,
    ) -> Result<TimelineEvent> {
        if status == TimelineEventStatus::Streaming {
            return Err(StoreError::InvalidInput(
                "a timeline event cannot be completed as streaming".into(),
            ));
        }
        let sql = match metadata {
            Some(patch) => {
                let patch = metadata_object(patch)?;
                Sql::dynamic(format!(
                    "UPDATE timeline_events SET content = $2, status = $3, updated_at = $4, \
                     metadata = {} WHERE id = $1 RETURNING *",
                    self.db.dialect().merge_metadata(5)
                ))
                .bind(id)
                .bind(content)
                .bind(status.as_str())
                .bind(now())
                .bind(patch)
            }
            None => Sql::new(
                "UPDATE timeline_events SET content = $2, status = $3, updated_at = $4 \
                 WHERE id = $1 RETURNING *",
            )
            .bind(id)
            .bind(content)
            .bind(status.as_str())
            .bind(now()),
        };
        self.db
            .fetch_optional::<TimelineRow>(sql)
            .await?
            .map(|r| r.0)
            .ok_or_else(|| StoreError::not_found(EVENT, id))
    }

    /// The timeline event with this id.
    pub async fn get_timeline_event(&self, id: &str) -> Result<TimelineEvent> {
        self.db
            .fetch_optional::<TimelineRow>(
                Sql::new("SELECT * FROM timeline_events WHERE id = $1").bind(id),
            )
            .await?
            .map(|r| r.0)
            .ok_or_else(|| StoreError::not_found(EVENT, id))
    }

    /// A session's whole timeline (investigation, chat, executive summary).
    /// Ordered by creation time, then sequence number: stages run in
    /// different pods, each numbering its own events, and creation time is
    /// the order the user saw them in.
    pub async fn session_timeline(&self, session_id: &str) -> Result<Vec<TimelineEvent>> {
        let rows: Vec<TimelineRow> = self
            .db
            .fetch_all(
                Sql::new(
                    "SELECT * FROM timeline_events WHERE session_id = $1 \
                     ORDER BY created_at, sequence_number, id",
                )
                .bind(session_id),
            )
            .await?;
        if rows.is_empty() {
            self.require_session(session_id).await?;
        }
        Ok(rows.into_iter().map(|r| r.0).collect())
    }

    /// A session's `error` events in timeline order (its warnings are among
    /// them).
    pub async fn session_errors(&self, session_id: &str) -> Result<Vec<TimelineEvent>> {
        let rows: Vec<TimelineRow> = self
            .db
            .fetch_all(
                Sql::new(
                    "SELECT * FROM timeline_events WHERE session_id = $1 AND event_type = $2 \
                     ORDER BY created_at, sequence_number, id",
                )
                .bind(session_id)
                .bind(TimelineEventType::Error.as_str()),
            )
            .await?;
        Ok(rows.into_iter().map(|r| r.0).collect())
    }

    /// One execution's timeline in sequence order (synthesis context).
    pub async fn execution_timeline(&self, execution_id: &str) -> Result<Vec<TimelineEvent>> {
        let rows: Vec<TimelineRow> = self
            .db
            .fetch_all(
                Sql::new(
                    "SELECT * FROM timeline_events WHERE execution_id = $1 \
                     ORDER BY sequence_number, created_at, id",
                )
                .bind(execution_id),
            )
            .await?;
        if rows.is_empty() {
            self.get_agent_execution(execution_id).await?;
        }
        Ok(rows.into_iter().map(|r| r.0).collect())
    }

    /// Stores a conversation message (stage and execution are required).
    /// Sequence numbers are unique per execution: storing one twice is a conflict.
    pub async fn create_message(&self, message: NewMessage) -> Result<Message> {
        let (Some(stage_id), Some(execution_id)) =
            (&message.scope.stage_id, &message.scope.execution_id)
        else {
            return Err(StoreError::InvalidInput(
                "a message needs a stage id and an execution id".into(),
            ));
        };
        let tool_calls = serde_json::to_value(&message.tool_calls)
            .map_err(|e| StoreError::InvalidInput(format!("tool calls: {e}")))?;
        let id = new_id();
        let result = self
            .db
            .fetch_optional::<Message>(
                Sql::new(
                    "INSERT INTO messages (id, session_id, stage_id, execution_id, sequence_number, role, \
                     content, tool_calls, tool_call_id, tool_name, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                     ON CONFLICT (id) DO NOTHING RETURNING *",
                )
                .bind(id.clone())
                .bind(&message.scope.session_id)
                .bind(stage_id)
                .bind(execution_id)
                .bind(message.sequence_number)
                .bind(message.role.as_str())
                .bind(message.content)
                .bind(tool_calls)
                .bind(message.tool_call_id)
                .bind(message.tool_name)
                .bind(now()),
            )
            .await
            .map_err(|e| match e {
                StoreError::Database(db) => classify_insert(MESSAGE, db),
                other => other,
            });
        match result {
            Ok(Some(m)) => Ok(m),
            // Stored by an earlier attempt of this call.
            Ok(None) => self
                .db
                .fetch_optional(Sql::new("SELECT * FROM messages WHERE id = $1").bind(&id))
                .await?
                .ok_or_else(|| StoreError::not_found(MESSAGE, id)),
            Err(e) if is_foreign_key_violation(&e) => {
                self.require_scope(&message.scope).await?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// An execution's conversation in order.
    pub async fn list_messages(&self, execution_id: &str) -> Result<Vec<Message>> {
        let list: Vec<Message> = self
            .db
            .fetch_all(
                Sql::new("SELECT * FROM messages WHERE execution_id = $1 ORDER BY sequence_number")
                    .bind(execution_id),
            )
            .await?;
        if list.is_empty() {
            self.get_agent_execution(execution_id).await?;
        }
        Ok(list)
    }

    /// The conversation of `message_id`'s execution up to and including that
    /// message: what an LLM call whose last message it was had been sent.
    pub async fn list_messages_up_to(&self, message_id: &str) -> Result<Vec<Message>> {
        let list: Vec<Message> = self
            .db
            .fetch_all(
                Sql::new(
                    "SELECT m.* FROM messages m JOIN messages last ON last.id = $1 \
                     WHERE m.execution_id = last.execution_id AND m.sequence_number <= last.sequence_number \
                     ORDER BY m.sequence_number",
                )
                .bind(message_id),
            )
            .await?;
        if list.is_empty() {
            return Err(StoreError::not_found(MESSAGE, message_id));
        }
        Ok(list)
    }
}
