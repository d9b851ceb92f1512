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
//!
//! A [`Recorder::pipelined`] recorder (the engine's) publishes through an
//! ordered queue served by its own task: publishing is best effort anyway
//! (the records are stored first), and the event's own write (a stored
//! event, a NOTIFY) then overlaps the next step instead of delaying it. The
//! order of the events is kept; [`Recorder::flush`] waits until all are out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use serde_json::Value;
use tarsy_core::recorder::session_channel;
use tarsy_core::stream::{StreamEvent, timestamp};
use tarsy_core::{
    ConversationMessage, EventPublisher, ExecutionRecorder, NewLlmInteraction, NewMessage,
    NewTimelineEvent, RecordError, RecordScope, TimelineEvent, TimelineEventStatus,
    TimelineEventType,
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

/// Events a pipelined recorder may have waiting before publishing makes it
/// wait (a model streaming faster than events can be delivered).
const PIPELINE_DEPTH: usize = 1024;

/// An event on its way to the publisher.
enum Outgoing {
    Persistent(StreamEvent),
    Transient(StreamEvent),
}

/// The ordered queue of a pipelined recorder and the task serving it.
struct Pipeline {
    tx: mpsc::Sender<Outgoing>,
    task: JoinHandle<()>,
}

/// Writes one execution's records and publishes its events.
pub struct Recorder {
    scope: RecordScope,
    channel: String,
    store: Arc<dyn ExecutionRecorder>,
    publisher: Arc<dyn EventPublisher>,
    pipeline: Option<Pipeline>,
    event_seq: i64,
    message_seq: i64,
}

/// Publishes one event, logging (not returning) a failure: live delivery is
/// best effort, the record is stored already.
async fn deliver(publisher: &dyn EventPublisher, channel: &str, session_id: &str, event: Outgoing) {
    match event {
        Outgoing::Persistent(e) => {
            if let Err(err) = publisher.publish(channel, &e).await {
                tracing::warn!(%session_id, error = %err, "event publish failed");
            }
        }
        Outgoing::Transient(e) => publisher.publish_transient(channel, &e).await,
    }
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
            pipeline: None,
            event_seq: 0,
            message_seq: 0,
        }
    }

    /// Like [`Recorder::new`], publishing through an ordered queue served by
    /// a task of its own (see the module documentation). Call
    /// [`Recorder::flush`] before anything that must come after its events.
    pub fn pipelined(
        scope: RecordScope,
        store: Arc<dyn ExecutionRecorder>,
        publisher: Arc<dyn EventPublisher>,
    ) -> Self {
        let mut recorder = Self::new(scope, store, publisher);
        let (tx, mut rx) = mpsc::channel(PIPELINE_DEPTH);
        let publisher = recorder.publisher.clone();
        let channel = recorder.channel.clone();
        let session_id = recorder.scope.session_id.clone();
        let task = tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                deliver(publisher.as_ref(), &channel, &session_id, event).await;
            }
        });
        recorder.pipeline = Some(Pipeline { tx, task });
        recorder
    }

    /// Waits until every queued event is published; later events are
    /// published directly. A no-op for a recorder that is not pipelined.
    pub async fn flush(&mut self) {
        if let Some(Pipeline { tx, task }) = self.pipeline.take() {
            drop(tx);
            if let Err(e) = task.await {
                tracing::warn!(session_id = %self.scope.session_id, error = %e, "event publisher task failed");
            }
        }
    }

    /// The scope records are written under.
    pub fn scope(&self) -> &RecordScope {
        &self.scope
    }

    /// Continues the numbering of an execution that already has events and
    /// messages (a resumed execution): nothing is numbered twice.
    pub(crate) fn continue_after(&mut self, event_seq: i64, message_seq: i64) {
        self.event_seq = self.event_seq.max(event_seq);
        self.message_seq = self.message_seq.max(message_seq);
    }

    /// Closes an event a dead process left streaming: failed, its partial
    /// content kept, marked `interrupted`.
    pub(crate) async fn close_interrupted(&self, event: &TimelineEvent) -> Result<(), RecordError> {
        let mut handle = EventHandle {
            id: event.id.clone(),
            event_type: event.event_type,
            metadata: event.metadata.clone(),
            content: event.content.clone(),
            pending: String::new(),
            last_flush: Instant::now(),
        };
        self.complete(
            &mut handle,
            &event.content,
            TimelineEventStatus::Failed,
            Some(serde_json::json!({"interrupted": true})),
        )
        .await
    }

    async fn publish(&self, event: StreamEvent) {
        self.send(Outgoing::Persistent(event)).await;
    }

    async fn send(&self, event: Outgoing) {
        let event = match &self.pipeline {
            Some(p) => match p.tx.send(event).await {
                Ok(()) => return,
                // The task is gone (a panic in a publisher): publish here.
                Err(mpsc::error::SendError(event)) => event,
            },
            None => event,
        };
        deliver(
            self.publisher.as_ref(),
            &self.channel,
            &self.scope.session_id,
            event,
        )
        .await;
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
        self.send(Outgoing::Transient(StreamEvent::StreamChunk {
            event_id: handle.id.clone(),
            session_id: self.scope.session_id.clone(),
            execution_id: self.scope.execution_id.clone(),
            event_type: handle.event_type,
            delta: delta.to_string(),
            timestamp: timestamp(),
        }))
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
