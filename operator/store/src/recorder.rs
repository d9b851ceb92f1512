//! The engine's view of the store.

use async_trait::async_trait;
use serde_json::Value;
use tarsy_core::{
    ExecutionRecorder, NewLlmInteraction, NewMcpInteraction, NewMessage, NewTimelineEvent,
    RecordError, TimelineEvent, TimelineEventStatus,
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

    async fn execution_timeline(
        &self,
        execution_id: &str,
    ) -> Result<Vec<TimelineEvent>, RecordError> {
        Ok(Store::execution_timeline(self, execution_id).await?)
    }

    async fn session_timeline(&self, session_id: &str) -> Result<Vec<TimelineEvent>, RecordError> {
        Ok(Store::session_timeline(self, session_id).await?)
    }
}
