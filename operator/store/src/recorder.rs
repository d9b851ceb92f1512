//! The engine's view of the store.

use async_trait::async_trait;
use serde_json::Value;
use tarsy_core::{
    ConversationMessage, ExecutionRecorder, NewLlmInteraction, NewMcpInteraction, NewMessage,
    NewTimelineEvent, RecordError, RecordWrite, StoredMessage, TimelineEvent, TimelineEventStatus,
};

use crate::Store;

#[async_trait]
impl ExecutionRecorder for Store {
    async fn create_timeline_event(&self, event: NewTimelineEvent) -> Result<String, RecordError> {
        Ok(Store::create_timeline_event(self, event).await?.id)
    }

    async fn append_timeline_content(
        &self,
        event_id: &str,
        delta: &str,
    ) -> Result<(), RecordError> {
        Ok(Store::append_timeline_content(self, event_id, delta).await?)
    }

    async fn complete_timeline_event(
        &self,
        event_id: &str,
        content: &str,
        status: TimelineEventStatus,
        metadata: Option<Value>,
    ) -> Result<(), RecordError> {
        Store::complete_timeline_event(self, event_id, content, status, metadata).await?;
        Ok(())
    }

    async fn create_message(&self, message: NewMessage) -> Result<String, RecordError> {
        Ok(Store::create_message(self, message).await?.id)
    }

    async fn create_llm_interaction(
        &self,
        interaction: NewLlmInteraction,
    ) -> Result<String, RecordError> {
        Ok(Store::create_llm_interaction(self, interaction).await?.id)
    }

    async fn create_mcp_interaction(
        &self,
        interaction: NewMcpInteraction,
    ) -> Result<String, RecordError> {
        Ok(Store::create_mcp_interaction(self, interaction).await?.id)
    }

    async fn write_batch(
        &self,
        writes: Vec<RecordWrite>,
    ) -> Result<Vec<Option<String>>, RecordError> {
        Ok(Store::write_batch(self, writes).await?)
    }

    async fn execution_timeline(
        &self,
        execution_id: &str,
    ) -> Result<Vec<TimelineEvent>, RecordError> {
        Ok(Store::execution_timeline(self, execution_id).await?)
    }

    async fn session_timeline(&self, session_id: &str) -> Result<Vec<TimelineEvent>, RecordError> {
        Ok(Store::session_timeline(self, session_id).await?)
    }

    async fn execution_messages(
        &self,
        execution_id: &str,
    ) -> Result<Vec<StoredMessage>, RecordError> {
        let stored = match Store::list_messages(self, execution_id).await {
            Ok(list) => list,
            // An execution not stored (yet) has no conversation.
            Err(crate::StoreError::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        Ok(stored
            .into_iter()
            .map(|m| StoredMessage {
                id: m.id,
                sequence_number: m.sequence_number,
                message: ConversationMessage {
                    role: m.role,
                    content: m.content,
                    tool_calls: m.tool_calls,
                    tool_call_id: m.tool_call_id,
                    tool_name: m.tool_name,
                },
            })
            .collect())
    }
}
