//! An in-memory [`ExecutionRecorder`] + [`EventPublisher`] for tests and the
//! engine benchmark: everything is kept in vectors that tests can inspect.
//! Behind the `testing` feature, so that production builds do not carry it.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::Utc;
use serde_json::Value;
use tarsy_core::{
    ConversationMessage, EventPublisher, ExecutionRecorder, NewLlmInteraction, NewMcpInteraction,
    NewMessage, NewTimelineEvent, RecordError, StoredMessage, StreamEvent, TimelineEvent,
    TimelineEventStatus,
};

/// A published event.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// Channel it went to.
    pub channel: String,
    /// Payload.
    pub payload: Value,
    /// False for transient events (`stream.chunk`).
    pub persistent: bool,
}

#[derive(Default)]
struct Inner {
    events: Vec<TimelineEvent>,
    index: HashMap<String, usize>,
    messages: Vec<(String, NewMessage)>,
    llm: Vec<(String, NewLlmInteraction)>,
    mcp: Vec<(String, NewMcpInteraction)>,
    published: Vec<Published>,
    next_id: u64,
    appends: usize,
    fail_writes: bool,
}

/// Keeps every record in memory.
#[derive(Default)]
pub struct MemoryRecorder {
    inner: Mutex<Inner>,
}

impl MemoryRecorder {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes every later write fail (infrastructure failure tests).
    pub fn fail_writes(&self, fail: bool) {
        self.lock().fail_writes = fail;
    }

    /// Timeline events in creation order.
    pub fn events(&self) -> Vec<TimelineEvent> {
        self.lock().events.clone()
    }

    /// Stored messages in creation order.
    pub fn messages(&self) -> Vec<NewMessage> {
        self.lock()
            .messages
            .iter()
            .map(|(_, m)| m.clone())
            .collect()
    }

    /// Stored messages with their ids.
    pub fn messages_with_ids(&self) -> Vec<(String, NewMessage)> {
        self.lock().messages.clone()
    }

    /// LLM interaction records in creation order.
    pub fn llm_interactions(&self) -> Vec<NewLlmInteraction> {
        self.lock().llm.iter().map(|(_, i)| i.clone()).collect()
    }

    /// MCP interaction records in creation order.
    pub fn mcp_interactions(&self) -> Vec<NewMcpInteraction> {
        self.lock().mcp.iter().map(|(_, i)| i.clone()).collect()
    }

    /// Everything published, persistent and transient, in order.
    pub fn published(&self) -> Vec<Published> {
        self.lock().published.clone()
    }

    /// Number of `append_timeline_content` writes.
    pub fn append_count(&self) -> usize {
        self.lock().appends
    }

    /// Drops every record (benchmarks reuse one recorder).
    pub fn clear(&self) {
        let mut g = self.lock();
        g.events.clear();
        g.index.clear();
        g.messages.clear();
        g.llm.clear();
        g.mcp.clear();
        g.published.clear();
        g.appends = 0;
    }

    fn next_id(g: &mut Inner, prefix: &str) -> String {
        g.next_id += 1;
        format!("{prefix}-{}", g.next_id)
    }

    fn check(g: &Inner) -> Result<(), RecordError> {
        if g.fail_writes {
            return Err(RecordError::Storage("simulated storage failure".into()));
        }
        Ok(())
    }
}

fn merge(into: &mut Value, extra: Value) {
    match (into, extra) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                a.insert(k, v);
            }
        }
        (slot, v) => *slot = v,
    }
}

#[async_trait]
impl ExecutionRecorder for MemoryRecorder {
    async fn create_timeline_event(&self, event: NewTimelineEvent) -> Result<String, RecordError> {
        let mut g = self.lock();
        Self::check(&g)?;
        let id = Self::next_id(&mut g, "evt");
        let now = Utc::now();
        let idx = g.events.len();
        g.events.push(TimelineEvent {
            id: id.clone(),
            scope: event.scope,
            sequence_number: event.sequence_number,
            event_type: event.event_type,
            status: event.status,
            content: event.content,
            metadata: event.metadata,
            created_at: now,
            updated_at: now,
        });
        g.index.insert(id.clone(), idx);
        Ok(id)
    }

    async fn append_timeline_content(
        &self,
        event_id: &str,
        delta: &str,
    ) -> Result<(), RecordError> {
        let mut g = self.lock();
        Self::check(&g)?;
        g.appends += 1;
        let idx = *g.index.get(event_id).ok_or_else(|| RecordError::NotFound {
            kind: "timeline event",
            id: event_id.to_string(),
        })?;
        let e = &mut g.events[idx];
        e.content.push_str(delta);
        e.updated_at = Utc::now();
        Ok(())
    }

    async fn complete_timeline_event(
        &self,
        event_id: &str,
        content: &str,
        status: TimelineEventStatus,
        metadata: Option<Value>,
    ) -> Result<(), RecordError> {
        let mut g = self.lock();
        Self::check(&g)?;
        let idx = *g.index.get(event_id).ok_or_else(|| RecordError::NotFound {
            kind: "timeline event",
            id: event_id.to_string(),
        })?;
        let e = &mut g.events[idx];
        e.content = content.to_string();
        e.status = status;
        if let Some(m) = metadata {
            merge(&mut e.metadata, m);
        }
        e.updated_at = Utc::now();
        Ok(())
    }

    async fn create_message(&self, message: NewMessage) -> Result<String, RecordError> {
        let mut g = self.lock();
        Self::check(&g)?;
        let id = Self::next_id(&mut g, "msg");
        g.messages.push((id.clone(), message));
        Ok(id)
    }

    async fn create_llm_interaction(
        &self,
        interaction: NewLlmInteraction,
    ) -> Result<String, RecordError> {
        let mut g = self.lock();
        Self::check(&g)?;
        let id = Self::next_id(&mut g, "llm");
        g.llm.push((id.clone(), interaction));
        Ok(id)
    }

    async fn create_mcp_interaction(
        &self,
        interaction: NewMcpInteraction,
    ) -> Result<String, RecordError> {
        let mut g = self.lock();
        Self::check(&g)?;
        let id = Self::next_id(&mut g, "mcp");
        g.mcp.push((id.clone(), interaction));
        Ok(id)
    }

    async fn execution_timeline(
        &self,
        execution_id: &str,
    ) -> Result<Vec<TimelineEvent>, RecordError> {
        let g = self.lock();
        let mut v: Vec<TimelineEvent> = g
            .events
            .iter()
            .filter(|e| e.scope.execution_id.as_deref() == Some(execution_id))
            .cloned()
            .collect();
        v.sort_by_key(|e| e.sequence_number);
        Ok(v)
    }

    async fn session_timeline(&self, session_id: &str) -> Result<Vec<TimelineEvent>, RecordError> {
        let g = self.lock();
        Ok(g.events
            .iter()
            .filter(|e| e.scope.session_id == session_id)
            .cloned()
            .collect())
    }

    async fn execution_messages(
        &self,
        execution_id: &str,
    ) -> Result<Vec<StoredMessage>, RecordError> {
        let g = self.lock();
        let mut v: Vec<StoredMessage> = g
            .messages
            .iter()
            .filter(|(_, m)| m.scope.execution_id.as_deref() == Some(execution_id))
            .map(|(id, m)| StoredMessage {
                id: id.clone(),
                sequence_number: m.sequence_number,
                message: ConversationMessage {
                    role: m.role,
                    content: m.content.clone(),
                    tool_calls: m.tool_calls.clone(),
                    tool_call_id: m.tool_call_id.clone(),
                    tool_name: m.tool_name.clone(),
                },
            })
            .collect();
        v.sort_by_key(|m| m.sequence_number);
        Ok(v)
    }
}

#[async_trait]
impl EventPublisher for MemoryRecorder {
    async fn publish(&self, channel: &str, event: &StreamEvent) -> Result<i64, RecordError> {
        let mut g = self.lock();
        g.published.push(Published {
            channel: channel.to_string(),
            payload: event.to_value(),
            persistent: true,
        });
        Ok(i64::try_from(g.published.len()).unwrap_or(i64::MAX))
    }

    async fn publish_transient(&self, channel: &str, event: &StreamEvent) {
        self.lock().published.push(Published {
            channel: channel.to_string(),
            payload: event.to_value(),
            persistent: false,
        });
    }
}
