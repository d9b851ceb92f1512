//! A recorder for an execution's tool executor: the MCP interaction record
//! of a tool call is not written on its own but with the execution's next
//! write (the tool call's completion and the tool message), in the same
//! transaction — one round trip less per tool call.
//!
//! The engine writes before anything outside the process sees a step's
//! effects (see [`crate::recording`]), so a deferred record is stored before
//! the next model request or the end of the execution, never lost to a
//! later step. A failure to store it stays what it was: logged, not failing
//! the investigation.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use tarsy_core::{
    ExecutionRecorder, NewLlmInteraction, NewMcpInteraction, NewMessage, NewTimelineEvent,
    RecordError, RecordWrite, StoredMessage, TimelineEvent, TimelineEventStatus,
};

/// Wraps the execution's recorder; give the same instance to the tool
/// executor and the engine.
pub struct DeferringRecorder {
    inner: Arc<dyn ExecutionRecorder>,
    deferred: Mutex<Vec<NewMcpInteraction>>,
}

impl DeferringRecorder {
    /// Defers MCP interaction records written through it to `inner`.
    pub fn new(inner: Arc<dyn ExecutionRecorder>) -> Self {
        Self {
            inner,
            deferred: Mutex::new(Vec::new()),
        }
    }

    fn take(&self) -> Vec<NewMcpInteraction> {
        std::mem::take(&mut *self.deferred.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Writes `records` one by one, logging (not returning) failures.
    async fn write_alone(&self, records: Vec<NewMcpInteraction>) {
        for r in records {
            let (server, tool) = (r.server_name.clone(), r.tool_name.clone());
            if let Err(e) = self.inner.create_mcp_interaction(r).await {
                tracing::warn!(server, tool, error = %e, "recording MCP interaction failed");
            }
        }
    }

    /// `writes` after the deferred records, as one batch. Should the batch
    /// fail, `writes` are tried again alone: when they fail again that is
    /// the caller's error (the records before them were written by the
    /// store's record-by-record fallback, or the database is gone); when
    /// they succeed a deferred record was the problem, and it is tried
    /// alone once more, its failure logged.
    async fn with_deferred(
        &self,
        writes: Vec<RecordWrite>,
    ) -> Result<Vec<Option<String>>, RecordError> {
        let deferred = self.take();
        if deferred.is_empty() {
            return self.inner.write_batch(writes).await;
        }
        let n = deferred.len();
        let mut batch: Vec<RecordWrite> = deferred
            .iter()
            .cloned()
            .map(RecordWrite::McpInteraction)
            .collect();
        batch.extend(writes.iter().cloned());
        match self.inner.write_batch(batch).await {
            Ok(ids) => Ok(ids.into_iter().skip(n).collect()),
            Err(_) => {
                let ids = self.inner.write_batch(writes).await?;
                self.write_alone(deferred).await;
                Ok(ids)
            }
        }
    }

    async fn one(&self, write: RecordWrite) -> Result<Option<String>, RecordError> {
        Ok(self.with_deferred(vec![write]).await?.pop().flatten())
    }
}

#[async_trait]
impl ExecutionRecorder for DeferringRecorder {
    async fn create_timeline_event(&self, event: NewTimelineEvent) -> Result<String, RecordError> {
        Ok(self
            .one(RecordWrite::CreateEvent(event))
            .await?
            .unwrap_or_default())
    }

    async fn append_timeline_content(
        &self,
        event_id: &str,
        delta: &str,
    ) -> Result<(), RecordError> {
        self.flush().await?;
        self.inner.append_timeline_content(event_id, delta).await
    }

    async fn complete_timeline_event(
        &self,
        event_id: &str,
        content: &str,
        status: TimelineEventStatus,
        metadata: Option<Value>,
    ) -> Result<(), RecordError> {
        self.one(RecordWrite::CompleteEvent {
            event_id: event_id.to_string(),
            content: content.to_string(),
            status,
            metadata,
        })
        .await
        .map(|_| ())
    }

    async fn create_message(&self, message: NewMessage) -> Result<String, RecordError> {
        Ok(self
            .one(RecordWrite::Message(message))
            .await?
            .unwrap_or_default())
    }

    async fn create_llm_interaction(
        &self,
        interaction: NewLlmInteraction,
    ) -> Result<String, RecordError> {
        Ok(self
            .one(RecordWrite::LlmInteraction(interaction))
            .await?
            .unwrap_or_default())
    }

    /// Deferred: written with the next write or [`ExecutionRecorder::flush`].
    /// The id is the store's, so it is not known yet: empty.
    async fn create_mcp_interaction(
        &self,
        interaction: NewMcpInteraction,
    ) -> Result<String, RecordError> {
        self.deferred
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(interaction);
        Ok(String::new())
    }

    async fn write(&self, write: RecordWrite) -> Result<Option<String>, RecordError> {
        self.one(write).await
    }

    async fn write_batch(
        &self,
        writes: Vec<RecordWrite>,
    ) -> Result<Vec<Option<String>>, RecordError> {
        self.with_deferred(writes).await
    }

    async fn flush(&self) -> Result<(), RecordError> {
        self.write_alone(self.take()).await;
        self.inner.flush().await
    }

    async fn execution_timeline(
        &self,
        execution_id: &str,
    ) -> Result<Vec<TimelineEvent>, RecordError> {
        self.inner.execution_timeline(execution_id).await
    }

    async fn session_timeline(&self, session_id: &str) -> Result<Vec<TimelineEvent>, RecordError> {
        self.inner.session_timeline(session_id).await
    }

    async fn execution_messages(
        &self,
        execution_id: &str,
    ) -> Result<Vec<StoredMessage>, RecordError> {
        self.inner.execution_messages(execution_id).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use tarsy_core::{McpInteractionType, MessageRole, RecordScope};

    use super::*;
    use crate::memory::MemoryRecorder;

    /// The memory store, counting batches; can refuse MCP records.
    #[derive(Default)]
    struct Store {
        mem: MemoryRecorder,
        batches: AtomicUsize,
        refuse_mcp: AtomicBool,
    }

    #[async_trait]
    impl ExecutionRecorder for Store {
        async fn create_timeline_event(&self, e: NewTimelineEvent) -> Result<String, RecordError> {
            self.mem.create_timeline_event(e).await
        }
        async fn append_timeline_content(&self, id: &str, d: &str) -> Result<(), RecordError> {
            self.mem.append_timeline_content(id, d).await
        }
        async fn complete_timeline_event(
            &self,
            id: &str,
            content: &str,
            status: TimelineEventStatus,
            metadata: Option<Value>,
        ) -> Result<(), RecordError> {
            self.mem
                .complete_timeline_event(id, content, status, metadata)
                .await
        }
        async fn create_message(&self, m: NewMessage) -> Result<String, RecordError> {
            self.mem.create_message(m).await
        }
        async fn create_llm_interaction(
            &self,
            i: NewLlmInteraction,
        ) -> Result<String, RecordError> {
            self.mem.create_llm_interaction(i).await
        }
        async fn create_mcp_interaction(
            &self,
            i: NewMcpInteraction,
        ) -> Result<String, RecordError> {
            if self.refuse_mcp.load(Ordering::SeqCst) {
                return Err(RecordError::Storage("refused".into()));
            }
            self.mem.create_mcp_interaction(i).await
        }
        async fn write_batch(
            &self,
            writes: Vec<RecordWrite>,
        ) -> Result<Vec<Option<String>>, RecordError> {
            self.batches.fetch_add(1, Ordering::SeqCst);
            let mut ids = Vec::new();
            for w in writes {
                ids.push(self.write(w).await?);
            }
            Ok(ids)
        }
        async fn execution_timeline(&self, id: &str) -> Result<Vec<TimelineEvent>, RecordError> {
            self.mem.execution_timeline(id).await
        }
        async fn session_timeline(&self, id: &str) -> Result<Vec<TimelineEvent>, RecordError> {
            self.mem.session_timeline(id).await
        }
        async fn execution_messages(&self, id: &str) -> Result<Vec<StoredMessage>, RecordError> {
            self.mem.execution_messages(id).await
        }
    }

    fn scope() -> RecordScope {
        RecordScope {
            session_id: "s".into(),
            stage_id: Some("st".into()),
            execution_id: Some("e".into()),
        }
    }

    fn mcp_call(tool: &str) -> NewMcpInteraction {
        NewMcpInteraction {
            scope: scope(),
            interaction_type: McpInteractionType::ToolCall,
            server_name: "kubernetes".into(),
            tool_name: tool.into(),
            tool_arguments: Value::Null,
            tool_result: Value::String("pods".into()),
            available_tools: Value::Null,
            duration_ms: 1,
            error_message: None,
        }
    }

    fn tool_message(seq: i64) -> NewMessage {
        NewMessage {
            scope: scope(),
            sequence_number: seq,
            role: MessageRole::Tool,
            content: "pods".into(),
            tool_calls: Vec::new(),
            tool_call_id: Some("c1".into()),
            tool_name: Some("kubernetes.pods_list".into()),
        }
    }

    #[tokio::test]
    async fn an_mcp_record_is_written_with_the_next_write_in_one_batch() {
        let store = Arc::new(Store::default());
        let rec = DeferringRecorder::new(store.clone());
        rec.create_mcp_interaction(mcp_call("pods_list"))
            .await
            .expect("deferred");
        assert!(store.mem.mcp_interactions().is_empty(), "not written alone");

        let id = rec.create_message(tool_message(1)).await.expect("written");
        assert!(!id.is_empty(), "the message's id comes back");
        assert_eq!(store.mem.mcp_interactions(), vec![mcp_call("pods_list")]);
        assert_eq!(store.mem.messages().len(), 1);
        assert_eq!(store.batches.load(Ordering::SeqCst), 1, "one round trip");
    }

    #[tokio::test]
    async fn flush_writes_what_no_later_write_took_along() {
        let store = Arc::new(Store::default());
        let rec = DeferringRecorder::new(store.clone());
        rec.create_mcp_interaction(mcp_call("a"))
            .await
            .expect("deferred");
        rec.create_mcp_interaction(mcp_call("b"))
            .await
            .expect("deferred");
        rec.flush().await.expect("flushed");
        let tools: Vec<String> = store
            .mem
            .mcp_interactions()
            .into_iter()
            .map(|i| i.tool_name)
            .collect();
        assert_eq!(tools, ["a", "b"], "in order");
        rec.flush().await.expect("nothing left");
        assert_eq!(store.mem.mcp_interactions().len(), 2, "written once");
    }

    #[tokio::test]
    async fn a_refused_mcp_record_does_not_fail_the_write_it_joined() {
        let store = Arc::new(Store::default());
        store.refuse_mcp.store(true, Ordering::SeqCst);
        let rec = DeferringRecorder::new(store.clone());
        rec.create_mcp_interaction(mcp_call("pods_list"))
            .await
            .expect("deferred");
        rec.create_message(tool_message(1))
            .await
            .expect("the message is still written");
        assert_eq!(store.mem.messages().len(), 1, "stored once");
        assert!(store.mem.mcp_interactions().is_empty());
    }

    #[tokio::test]
    async fn a_failing_write_is_the_callers_error() {
        let store = Arc::new(Store::default());
        let rec = DeferringRecorder::new(store.clone());
        rec.create_mcp_interaction(mcp_call("pods_list"))
            .await
            .expect("deferred");
        store.mem.fail_writes(true);
        assert!(rec.create_message(tool_message(1)).await.is_err());
    }
}
