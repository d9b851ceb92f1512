//! How an execution writes what it does: timeline events (created, streamed,
//! completed) with their WebSocket payloads, conversation messages and LLM
//! interaction records, all through the `tarsy_core` traits.
//!
//! WebSocket payloads (channel `session:{id}`):
//!
//! * `timeline_event.created` (persistent): `type`, `event_id`, `session_id`,
//!   `stage_id`, `execution_id`, `sequence_number`, `event_type`, `status`,
//!   `content`, `metadata`, `timestamp`.
//! * `stream.chunk` (transient): `type`, `event_id`, `session_id`,
//!   `execution_id`, `event_type`, `delta`, `timestamp`.
//! * `timeline_event.completed` (persistent): `type`, `event_id`,
//!   `session_id`, `stage_id`, `execution_id`, `event_type`, `status`,
//!   `content` (final), `metadata` (merged), `timestamp`.
//!
//! Events created whole (tool-less results such as `error`, a parsed
//! `final_analysis`, `provider_fallback`) are announced once, by
//! `timeline_event.created` with status `completed`.
//!
//! Streamed content is published on every chunk but written to storage in
//! batches (see `APPEND_FLUSH_BYTES`): completion stores the full text
//! anyway, and a chunk-per-write would put a storage round trip on every
//! token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tarsy_core::recorder::session_channel;
use tarsy_core::stream::{StreamEvent, timestamp};
use tarsy_core::{
    ConversationMessage, EventPublisher, ExecutionRecorder, NewLlmInteraction, NewMessage,
    NewTimelineEvent, RecordError, RecordScope, TimelineEventStatus, TimelineEventType,
};

/// Streamed content is written to storage once this much is buffered...
pub(crate) const APPEND_FLUSH_BYTES: usize = 1024;
/// ...or this long after the previous write.
pub(crate) const APPEND_FLUSH_INTERVAL: Duration = Duration::from_millis(250);

/// A timeline event this execution created and may still update.
#[derive(Debug, Clone)]
pub struct EventHandle {
    /// Stored id.
    pub id: String,
    /// Its type.
    pub event_type: TimelineEventType,
    /// Metadata as created (merged with completion metadata when published).
    pub metadata: Value,
    /// Content so far (for streaming events).
    pub content: String,
    pending: String,
    last_flush: Instant,
}

/// Writes one execution's records and publishes its events.
pub struct Recorder {
    scope: RecordScope,
    channel: String,
    store: Arc<dyn ExecutionRecorder>,
    publisher: Arc<dyn EventPublisher>,
    event_seq: i64,
    message_seq: i64,
}

impl Recorder {
    /// A recorder for `scope`.
    pub fn new(
        scope: RecordScope,
        store: Arc<dyn ExecutionRecorder>,
        publisher: Arc<dyn EventPublisher>,
    ) -> Self {
        Self {
            channel: session_channel(&scope.session_id),
            scope,
            store,
            publisher,
            event_seq: 0,
            message_seq: 0,
        }
    }

    /// The scope records are written under.
    pub fn scope(&self) -> &RecordScope {
        &self.scope
    }

    async fn publish(&self, event: StreamEvent) {
        if let Err(e) = self.publisher.publish(&self.channel, &event).await {
            // Live delivery is best effort: the record is stored already.
            tracing::warn!(session_id = %self.scope.session_id, error = %e, "event publish failed");
        }
    }

    /// Creates an event (streaming or already final) and announces it.
    pub async fn create_event(
        &mut self,
        event_type: TimelineEventType,
        status: TimelineEventStatus,
        content: &str,
        metadata: Value,
    ) -> Result<EventHandle, RecordError> {
        self.event_seq += 1;
        let seq = self.event_seq;
        let id = self
            .store
            .create_timeline_event(NewTimelineEvent {
                scope: self.scope.clone(),
                sequence_number: seq,
                event_type,
                status,
                content: content.to_string(),
                metadata: metadata.clone(),
            })
            .await?;
        self.publish(StreamEvent::TimelineEventCreated {
            event_id: id.clone(),
            session_id: self.scope.session_id.clone(),
            stage_id: self.scope.stage_id.clone(),
            execution_id: self.scope.execution_id.clone(),
            sequence_number: seq,
            event_type,
            status,
            content: content.to_string(),
            metadata: metadata.clone(),
            timestamp: timestamp(),
        })
        .await;
        Ok(EventHandle {
            id,
            event_type,
            metadata,
            content: content.to_string(),
            pending: String::new(),
            last_flush: Instant::now(),
        })
    }

    /// Creates an event whose content is final already.
    pub async fn create_completed(
        &mut self,
        event_type: TimelineEventType,
        content: &str,
        metadata: Value,
    ) -> Result<EventHandle, RecordError> {
        self.create_event(
            event_type,
            TimelineEventStatus::Completed,
            content,
            metadata,
        )
        .await
    }

    /// Streams a delta into an event: published at once, stored in batches.
    pub async fn append(&self, handle: &mut EventHandle, delta: &str) -> Result<(), RecordError> {
        if delta.is_empty() {
            return Ok(());
        }
        handle.content.push_str(delta);
        handle.pending.push_str(delta);
        self.publisher
            .publish_transient(
                &self.channel,
                &StreamEvent::StreamChunk {
                    event_id: handle.id.clone(),
                    session_id: self.scope.session_id.clone(),
                    execution_id: self.scope.execution_id.clone(),
                    event_type: handle.event_type,
                    delta: delta.to_string(),
                    timestamp: timestamp(),
                },
            )
            .await;
        if handle.pending.len() >= APPEND_FLUSH_BYTES
            || handle.last_flush.elapsed() >= APPEND_FLUSH_INTERVAL
        {
            let pending = std::mem::take(&mut handle.pending);
            handle.last_flush = Instant::now();
            self.store
                .append_timeline_content(&handle.id, &pending)
                .await?;
        }
        Ok(())
    }

    /// Sets final content and status; `metadata` is merged into the event's.
    pub async fn complete(
        &self,
        handle: &mut EventHandle,
        content: &str,
        status: TimelineEventStatus,
        metadata: Option<Value>,
    ) -> Result<(), RecordError> {
        handle.pending.clear();
        handle.content = content.to_string();
        self.store
            .complete_timeline_event(&handle.id, content, status, metadata.clone())
            .await?;
        if let (Value::Object(base), Some(Value::Object(extra))) = (&mut handle.metadata, metadata)
        {
            for (k, v) in extra {
                base.insert(k, v);
            }
        }
        self.publish(StreamEvent::TimelineEventCompleted {
            event_id: handle.id.clone(),
            session_id: self.scope.session_id.clone(),
            stage_id: self.scope.stage_id.clone(),
            execution_id: self.scope.execution_id.clone(),
            event_type: handle.event_type,
            status,
            content: content.to_string(),
            metadata: handle.metadata.clone(),
            timestamp: timestamp(),
        })
        .await;
        Ok(())
    }

    /// Stores a conversation message; returns its id.
    pub async fn store_message(&mut self, m: &ConversationMessage) -> Result<String, RecordError> {
        self.message_seq += 1;
        self.store
            .create_message(NewMessage {
                scope: self.scope.clone(),
                sequence_number: self.message_seq,
                role: m.role,
                content: m.content.clone(),
                tool_calls: m.tool_calls.clone(),
                tool_call_id: m.tool_call_id.clone(),
                tool_name: m.tool_name.clone(),
            })
            .await
    }

    /// Records an LLM call.
    pub async fn llm_interaction(&self, i: NewLlmInteraction) -> Result<String, RecordError> {
        self.store.create_llm_interaction(i).await
    }
}
