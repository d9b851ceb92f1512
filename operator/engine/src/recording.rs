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
//!
//! A pipelined recorder also writes an iteration step's records as one
//! transaction: records nobody waits for (an LLM call's interaction record,
//! an event's completion, a conversation message) are held until the next
//! record that returns an id (a new event) and written with it in one batch
//! ([`ExecutionRecorder::write_batch`]); an event completed that way is
//! published once it is stored. [`Recorder::flush_writes`] writes them
//! before anything outside the process sees the step's effects (the next
//! model request, a tool call, the end of the execution).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use serde_json::Value;
use tarsy_core::recorder::session_channel;
use tarsy_core::stream::{StreamEvent, timestamp};
use tarsy_core::{
    ConversationMessage, EventPublisher, ExecutionRecorder, NewLlmInteraction, NewMessage,
    NewTimelineEvent, RecordError, RecordScope, RecordWrite, TimelineEvent, TimelineEventStatus,
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
    /// Writes held for the next batch (pipelined recorders only).
    held: Option<Mutex<Held>>,
    event_seq: i64,
    message_seq: i64,
    /// Id of the last conversation message stored (an LLM call's record
    /// names the conversation it was given by it).
    last_message_id: Mutex<Option<String>>,
}

/// Records held for the next batch, and the events to publish once they
/// are stored.
#[derive(Default)]
struct Held {
    writes: Vec<RecordWrite>,
    events: Vec<StreamEvent>,
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
            held: None,
            event_seq: 0,
            message_seq: 0,
            last_message_id: Mutex::new(None),
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
        recorder.held = Some(Mutex::new(Held::default()));
        recorder
    }

    /// Writes the held records, then waits until every queued event is
    /// published; later events are published directly and later records
    /// written at once. Returns the held records' write error.
    pub async fn flush(&mut self) -> Result<(), RecordError> {
        let written = self.flush_writes().await;
        self.held = None;
        if let Some(Pipeline { tx, task }) = self.pipeline.take() {
            drop(tx);
            if let Err(e) = task.await {
                tracing::warn!(session_id = %self.scope.session_id, error = %e, "event publisher task failed");
            }
        }
        written
    }

    fn take_held(&self) -> Held {
        match &self.held {
            Some(h) => std::mem::take(&mut *h.lock().unwrap_or_else(|e| e.into_inner())),
            None => Held::default(),
        }
    }

    /// Holds `write` for the next batch (and `event` until it is stored);
    /// gives both back when this recorder does not hold writes.
    fn hold(
        &self,
        write: RecordWrite,
        event: Option<StreamEvent>,
    ) -> Option<(RecordWrite, Option<StreamEvent>)> {
        let Some(h) = &self.held else {
            return Some((write, event));
        };
        let mut h = h.lock().unwrap_or_else(|e| e.into_inner());
        h.writes.push(write);
        h.events.extend(event);
        None
    }

    /// Writes the held records with `last` (if any) as one batch, publishes
    /// the events that waited for them, and returns `last`'s id.
    async fn write_with_held(
        &self,
        last: Option<RecordWrite>,
    ) -> Result<Option<String>, RecordError> {
        let held = self.take_held();
        let mut writes = held.writes;
        let with_last = last.is_some();
        writes.extend(last);
        if writes.is_empty() {
            return Ok(None);
        }
        let last_message = writes
            .iter()
            .rposition(|w| matches!(w, RecordWrite::Message(_)));
        let ids = if writes.len() == 1 && with_last {
            // One record: its own write, as without holding.
            match writes.pop() {
                Some(w) => vec![self.store.write(w).await?],
                None => Vec::new(),
            }
        } else {
            self.store.write_batch(writes).await?
        };
        if let Some(id) = last_message.and_then(|i| ids.get(i).cloned().flatten()) {
            self.set_last_message_id(Some(id));
        }
        for e in held.events {
            self.publish(e).await;
        }
        Ok(if with_last {
            ids.last().cloned().flatten()
        } else {
            None
        })
    }

    /// Writes the held records (one transaction) and publishes the events
    /// that waited for them.
    pub async fn flush_writes(&self) -> Result<(), RecordError> {
        self.write_with_held(None).await?;
        // What the store itself deferred (the tool executor's MCP records).
        self.store.flush().await
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
            .write_with_held(Some(RecordWrite::CreateEvent(NewTimelineEvent {
                scope: self.scope.clone(),
                sequence_number: seq,
                event_type,
                status,
                content: content.to_string(),
                metadata: metadata.clone(),
            })))
            .await?
            .unwrap_or_default();
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
            self.flush_writes().await?;
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
        let write = RecordWrite::CompleteEvent {
            event_id: handle.id.clone(),
            content: content.to_string(),
            status,
            metadata: metadata.clone(),
        };
        if let (Value::Object(base), Some(Value::Object(extra))) = (&mut handle.metadata, metadata)
        {
            for (k, v) in extra {
                base.insert(k, v);
            }
        }
        let event = StreamEvent::TimelineEventCompleted {
            event_id: handle.id.clone(),
            session_id: self.scope.session_id.clone(),
            stage_id: self.scope.stage_id.clone(),
            execution_id: self.scope.execution_id.clone(),
            event_type: handle.event_type,
            status,
            content: content.to_string(),
            metadata: handle.metadata.clone(),
            timestamp: timestamp(),
        };
        // Held: written with the next record, published once stored.
        if let Some((write, event)) = self.hold(write, Some(event)) {
            self.store.write(write).await?;
            if let Some(event) = event {
                self.publish(event).await;
            }
        }
        Ok(())
    }

    /// Stores a conversation message. A pipelined recorder holds it for the
    /// next batch: the tool call's event that follows an assistant message
    /// goes with it, and anything held is written before the next model
    /// request anyway ([`Recorder::last_message_id`] names it from then).
    pub async fn store_message(&mut self, m: &ConversationMessage) -> Result<(), RecordError> {
        self.message_seq += 1;
        let write = RecordWrite::Message(NewMessage {
            scope: self.scope.clone(),
            sequence_number: self.message_seq,
            role: m.role,
            content: m.content.clone(),
            tool_calls: m.tool_calls.clone(),
            tool_call_id: m.tool_call_id.clone(),
            tool_name: m.tool_name.clone(),
        });
        if let Some((write, _)) = self.hold(write, None) {
            let id = self.store.write(write).await?;
            self.set_last_message_id(id);
        }
        Ok(())
    }

    /// The id of the last conversation message stored (held ones are not,
    /// until written).
    pub fn last_message_id(&self) -> Option<String> {
        self.last_message_id
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sets what [`Recorder::last_message_id`] returns (a resumed execution
    /// continues from its stored conversation).
    pub(crate) fn set_last_message_id(&self, id: Option<String>) {
        *self
            .last_message_id
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = id;
    }

    /// Records an LLM call (a pipelined recorder holds it for the next
    /// batch).
    pub async fn llm_interaction(&self, i: NewLlmInteraction) -> Result<(), RecordError> {
        if let Some((write, _)) = self.hold(RecordWrite::LlmInteraction(i), None) {
            self.store.write(write).await?;
        }
        Ok(())
    }
}
