//! A chat answer's records around its execution, the same in both modes:
//! the stage and execution rows of a question, the start (stage active,
//! question on the timeline, history as context) and the end (stage
//! status, chat free again).

use std::sync::Arc;

use serde_json::json;
use tarsy_core::{
    EventPublisher, ExecutionKind, ExecutionRecorder, ExecutionStatus, RecordScope,
    ResolvedAgentConfig, StageKind, TimelineEventType,
};
use tarsy_engine::ChatContext;
use tarsy_engine::recording::Recorder;
use tarsy_events::lifecycle::{StageRef, publish_stage_status};
use tarsy_store::{NewAgentExecution, NewStage, Store};

use crate::context::chat_history;
use crate::error::Result;
use crate::ids::{CHAT_STAGE_NAME, execution_id, stage_id};
use crate::launch::AgentInput;

/// One question's answer: where its records are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The session.
    pub session_id: String,
    /// The session's chat.
    pub chat_id: String,
    /// The stage record answering the question.
    pub stage_id: String,
    /// Its index among the session's stages.
    pub stage_index: u32,
    /// The execution answering.
    pub execution_id: String,
}

impl Answer {
    /// The answer to a question placed at stage record `stage_index`.
    pub fn new(session_id: &str, chat_id: &str, stage_index: u32) -> Self {
        Self {
            session_id: session_id.to_string(),
            chat_id: chat_id.to_string(),
            stage_id: stage_id(session_id, stage_index),
            stage_index,
            execution_id: execution_id(session_id, stage_index, 1),
        }
    }

    /// The stage row answering message `message_id`.
    pub fn stage_row(&self, message_id: &str) -> NewStage {
        NewStage {
            id: Some(self.stage_id.clone()),
            session_id: self.session_id.clone(),
            stage_name: CHAT_STAGE_NAME.to_string(),
            kind: StageKind::Chat,
            stage_index: i64::from(self.stage_index),
            expected_agent_count: 1,
            parallel_type: None,
            success_policy: None,
            chat_id: Some(self.chat_id.clone()),
            chat_user_message_id: Some(message_id.to_string()),
        }
    }

    /// The execution row of the chat agent `config`.
    pub fn execution_row(&self, config: &ResolvedAgentConfig) -> NewAgentExecution {
        NewAgentExecution {
            id: Some(self.execution_id.clone()),
            stage_id: self.stage_id.clone(),
            session_id: self.session_id.clone(),
            agent_name: config.display_name.clone(),
            agent_index: 1,
            kind: ExecutionKind::Chat,
            iteration_strategy: config.iteration_strategy,
            llm_provider: Some(config.llm_provider.name.clone()),
        }
    }

    fn stage_ref(&self) -> StageRef<'_> {
        StageRef {
            id: &self.stage_id,
            name: CHAT_STAGE_NAME,
            index: i64::from(self.stage_index),
        }
    }

    /// Starts answering `question`: the stage is active (published), the
    /// chat is held by `owner`, the question is on the answer's timeline;
    /// returns what the agent works on (the session's history).
    pub async fn begin(
        &self,
        store: &Store,
        publisher: &Arc<dyn EventPublisher>,
        owner: Option<&str>,
        question: &str,
    ) -> Result<AgentInput> {
        let session_id = &self.session_id;
        if let Err(e) = store
            .update_stage_status(&self.stage_id, ExecutionStatus::Active, None)
            .await
        {
            tracing::warn!(%session_id, error = %e, "cannot mark the chat stage active");
        }
        publish_stage_status(publisher.as_ref(), session_id, self.stage_ref(), "started").await;
        if let Err(e) = store.touch_chat(&self.chat_id, owner).await {
            tracing::warn!(%session_id, error = %e, "chat heartbeat failed");
        }
        let scope = RecordScope {
            session_id: session_id.clone(),
            stage_id: Some(self.stage_id.clone()),
            execution_id: Some(self.execution_id.clone()),
        };
        let recorder: Arc<dyn ExecutionRecorder> = Arc::new(store.clone());
        let mut recorder = Recorder::new(scope, recorder, publisher.clone());
        if let Err(e) = recorder
            .create_completed(TimelineEventType::UserQuestion, question, json!({}))
            .await
        {
            tracing::warn!(%session_id, error = %e, "cannot record the user question");
        }
        let history = chat_history(store, session_id, &self.stage_id).await?;
        Ok(AgentInput::Chat(ChatContext {
            question: question.to_string(),
            investigation_context: history,
        }))
    }

    /// Ends the answer's stage with the execution's outcome (published) and
    /// frees the chat for the next question. The caller records the
    /// execution's own status first.
    pub async fn end(
        &self,
        store: &Store,
        publisher: &Arc<dyn EventPublisher>,
        status: ExecutionStatus,
        error: Option<&str>,
    ) {
        if let Err(e) = store
            .update_stage_status(&self.stage_id, status, error)
            .await
        {
            tracing::warn!(stage_id = %self.stage_id, error = %e, "cannot record the chat stage's end");
        }
        if let Err(e) = store.touch_chat(&self.chat_id, None).await {
            tracing::warn!(chat_id = %self.chat_id, error = %e, "cannot record the chat's last interaction");
        }
        publish_stage_status(
            publisher.as_ref(),
            &self.session_id,
            self.stage_ref(),
            status.as_str(),
        )
        .await;
    }
}
