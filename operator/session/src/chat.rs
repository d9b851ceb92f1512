//! Follow-up chat: one chat per session, questions on terminal sessions
//! only, one answer at a time per chat. An answer is one execution of the
//! chain's chat agent, with the same controllers as an investigation; its
//! context is the session's whole timeline (investigation, earlier
//! questions and answers), which includes the question itself because its
//! `user_question` event is written first.

use std::sync::Arc;

use serde_json::json;
use tarsy_api::{ChatAccepted, ChatError, ChatSubmission};
use tarsy_config::chat_enabled;
use tarsy_core::{
    ExecutionKind, ExecutionStatus, McpSelection, RecordScope, ResolvedAgentConfig, SessionStatus,
    TimelineEventType,
};
use tarsy_engine::ChatContext;
use tarsy_engine::context::format_investigation_context;
use tarsy_engine::recording::Recorder;
use tarsy_store::{NewAgentExecution, NewStage, Session, StoreError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::runtime::{ActiveChat, ExecutionRequest, Runtime, lock};

/// Name of the stage record answering a chat question.
pub const CHAT_STAGE_NAME: &str = "Chat Response";

fn internal(e: impl std::fmt::Display) -> ChatError {
    ChatError::Internal(e.to_string())
}

/// Chat is for sessions whose investigation has ended, cancelled ones excepted.
fn chat_available(status: SessionStatus) -> bool {
    matches!(
        status,
        SessionStatus::Completed | SessionStatus::Failed | SessionStatus::TimedOut
    )
}

/// Releases the per-chat reservation when dropped (every early return).
struct Reservation<'a> {
    rt: &'a Runtime,
    chat_id: String,
    armed: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.armed {
            lock(&self.rt.chats).remove(&self.chat_id);
        }
    }
}

/// Accepts a question and starts answering it (see the module docs).
pub(crate) async fn submit(
    rt: &Arc<Runtime>,
    submission: ChatSubmission,
) -> Result<ChatAccepted, ChatError> {
    if rt.shutdown.is_cancelled() {
        return Err(ChatError::Unavailable("TARSy is shutting down".into()));
    }
    let content = submission.content.trim().to_string();
    if content.is_empty() {
        return Err(ChatError::Invalid("the question is empty".into()));
    }
    let session = match rt.store.get_session(&submission.session_id).await {
        Ok(s) => s,
        Err(StoreError::NotFound { .. }) => {
            return Err(ChatError::NotFound(submission.session_id));
        }
        Err(e) => return Err(internal(e)),
    };
    if !chat_available(session.status) {
        return Err(ChatError::NotAvailable {
            status: session.status,
        });
    }
    let chain = rt
        .config
        .chain(&session.chain_id)
        .ok_or_else(|| ChatError::Disabled(session.chain_id.clone()))?;
    if !chat_enabled(&chain.spec) {
        return Err(ChatError::Disabled(session.chain_id.clone()));
    }
    let selection: Option<McpSelection> = session
        .mcp_selection
        .as_ref()
        .map(|v| serde_json::from_value(v.clone()))
        .transpose()
        .map_err(|e| internal(format!("stored mcp_selection is unreadable: {e}")))?;
    let config = rt
        .config
        .resolve_chat(&chain.name, &chain.spec, selection.as_ref())
        .map_err(|e| ChatError::Invalid(format!("cannot resolve the chat agent: {e}")))?;
    let timeout = rt
        .config
        .session_timeout(&chain.spec)
        .map_err(|e| ChatError::Invalid(e.to_string()))?;

    let created = rt
        .store
        .get_or_create_chat(&session.id, Some(&submission.author))
        .await
        .map_err(internal)?;
    let chat = created.record;

    // One answer at a time: reserve the chat in this process, then check the
    // store (an answer left running by another process).
    let cancel = CancellationToken::new();
    {
        let mut chats = lock(&rt.chats);
        if chats.contains_key(&chat.id) {
            return Err(ChatError::Busy { chat_id: chat.id });
        }
        chats.insert(
            chat.id.clone(),
            ActiveChat {
                session_id: session.id.clone(),
                stage_id: String::new(),
                cancel: cancel.clone(),
            },
        );
    }
    let mut reservation = Reservation {
        rt: rt.as_ref(),
        chat_id: chat.id.clone(),
        armed: true,
    };
    if let Some(stale) = rt
        .store
        .active_stage_for_chat(&chat.id)
        .await
        .map_err(internal)?
    {
        // Not answered by this process (it holds the reservation): either an
        // answer this process was giving before a restart, or one whose
        // owner went silent — close it; otherwise another process is busy.
        let orphaned = chat.pod_id.as_deref() == Some(rt.pod_id.as_str())
            || chat.last_interaction_at.is_none_or(|at| {
                chrono::Utc::now() - at
                    > chrono::Duration::from_std(rt.settings.orphan_timeout).unwrap_or_default()
            });
        if !orphaned {
            return Err(ChatError::Busy { chat_id: chat.id });
        }
        close_stale_stage(rt, &stale.id).await.map_err(internal)?;
    }

    let message = rt
        .store
        .create_chat_user_message(&chat.id, &content, Some(&submission.author))
        .await
        .map_err(internal)?;
    let records = async {
        let index = rt.store.max_stage_index(&session.id).await?.unwrap_or(0) + 1;
        let stage = rt
            .store
            .create_stage(NewStage {
                id: None,
                session_id: session.id.clone(),
                stage_name: CHAT_STAGE_NAME.to_string(),
                stage_index: index,
                expected_agent_count: 1,
                parallel_type: None,
                success_policy: None,
                chat_id: Some(chat.id.clone()),
                chat_user_message_id: Some(message.id.clone()),
            })
            .await?;
        let execution = rt
            .store
            .create_agent_execution(NewAgentExecution {
                id: None,
                stage_id: stage.id.clone(),
                session_id: session.id.clone(),
                agent_name: config.display_name.clone(),
                agent_index: 1,
                kind: ExecutionKind::Chat,
                iteration_strategy: config.iteration_strategy,
                llm_provider: Some(config.llm_provider.name.clone()),
            })
            .await?;
        Ok::<_, StoreError>((stage, execution))
    }
    .await;
    let (stage, execution) = match records {
        Ok(r) => r,
        Err(e) => {
            // A refused question leaves no orphan message behind.
            let _ = rt.store.delete_chat_user_message(&message.id).await;
            return Err(internal(e));
        }
    };
    if let Some(active) = lock(&rt.chats).get_mut(&chat.id) {
        active.stage_id = stage.id.clone();
    }
    reservation.armed = false;

    let answer = Answer {
        rt: rt.clone(),
        session,
        chat_id: chat.id.clone(),
        stage_id: stage.id.clone(),
        stage_index: stage.stage_index,
        execution_id: execution.id,
        question: content,
        config,
        cancel,
        deadline: Instant::now() + timeout,
    };
    let accepted = ChatAccepted {
        chat_id: chat.id,
        message_id: message.id,
        stage_id: stage.id,
        chat_created: created.created,
    };
    // The question goes out before the answer can emit its first event.
    tarsy_api::publish_chat_accepted(rt.publisher.as_ref(), &submission, &accepted).await;
    rt.tasks.spawn(answer.run());
    Ok(accepted)
}

/// One chat answer in flight.
struct Answer {
    rt: Arc<Runtime>,
    session: Session,
    chat_id: String,
    stage_id: String,
    stage_index: i64,
    execution_id: String,
    question: String,
    config: ResolvedAgentConfig,
    cancel: CancellationToken,
    deadline: Instant,
}

impl Answer {
    async fn run(self) {
        let rt = self.rt.clone();
        let (chat_id, stage_id) = (self.chat_id.clone(), self.stage_id.clone());
        self.answer().await;
        release(&rt, &chat_id, &stage_id);
    }

    async fn answer(self) {
        let rt = &self.rt;
        let session_id = self.session.id.clone();
        if let Err(e) = rt
            .store
            .update_stage_status(&self.stage_id, ExecutionStatus::Active, None)
            .await
        {
            tracing::warn!(%session_id, error = %e, "cannot mark the chat stage active");
        }
        rt.publish_stage_status(
            &session_id,
            &self.stage_id,
            CHAT_STAGE_NAME,
            self.stage_index,
            "started",
        )
        .await;
        if let Err(e) = rt.store.touch_chat(&self.chat_id, Some(&rt.pod_id)).await {
            tracing::warn!(%session_id, error = %e, "chat heartbeat failed");
        }

        // The question goes into the timeline first, so the context below
        // (and every later answer's context) contains it.
        let scope = RecordScope {
            session_id: session_id.clone(),
            stage_id: Some(self.stage_id.clone()),
            execution_id: Some(self.execution_id.clone()),
        };
        let mut recorder = Recorder::new(scope, rt.recorder(), rt.publisher.clone());
        if let Err(e) = recorder
            .create_completed(TimelineEventType::UserQuestion, &self.question, json!({}))
            .await
        {
            tracing::warn!(%session_id, error = %e, "cannot record the user question");
        }
        let context = match rt.store.session_timeline(&session_id).await {
            Ok(events) => format_investigation_context(&group_by_execution(events)),
            Err(e) => {
                self.finish(
                    ExecutionStatus::Failed,
                    Some(format!("cannot read the session timeline: {e}")),
                )
                .await;
                return;
            }
        };

        let result = rt
            .run_execution(ExecutionRequest {
                session_id: session_id.clone(),
                stage_id: self.stage_id.clone(),
                execution_id: self.execution_id.clone(),
                alert_type: self.session.alert_type.clone(),
                alert_data: self.session.alert_data.clone(),
                runbook: None,
                config: self.config.clone(),
                prev_context: None,
                chat: Some(ChatContext {
                    question: self.question.clone(),
                    investigation_context: context,
                }),
                cancel: self.cancel.clone(),
                deadline: self.deadline,
            })
            .await;
        let status = if rt.shutdown.is_cancelled() && result.status != ExecutionStatus::Completed {
            ExecutionStatus::Failed
        } else {
            result.status
        };
        let error = if status == ExecutionStatus::Failed && rt.shutdown.is_cancelled() {
            Some(crate::runtime::INTERRUPTED_BY_SHUTDOWN.to_string())
        } else {
            result.error
        };
        self.finish(status, error).await;
    }

    async fn finish(&self, status: ExecutionStatus, error: Option<String>) {
        let rt = &self.rt;
        if let Err(e) = rt
            .store
            .update_agent_execution_status(&self.execution_id, status, error.as_deref())
            .await
        {
            tracing::warn!(execution_id = %self.execution_id, error = %e, "cannot record chat execution status");
        }
        // Free the chat before its stage shows the end: a client that sees
        // the answer finished may ask the next question at once.
        release(rt, &self.chat_id, &self.stage_id);
        if let Err(e) = rt
            .store
            .update_stage_status(&self.stage_id, status, error.as_deref())
            .await
        {
            tracing::warn!(stage_id = %self.stage_id, error = %e, "cannot record chat stage status");
        }
        let _ = rt.store.touch_chat(&self.chat_id, None).await;
        rt.publish_stage_status(
            &self.session.id,
            &self.stage_id,
            CHAT_STAGE_NAME,
            self.stage_index,
            status.as_str(),
        )
        .await;
    }
}

/// Ends this answer's reservation of its chat, unless a later question
/// already holds it.
fn release(rt: &Runtime, chat_id: &str, stage_id: &str) {
    let mut chats = lock(&rt.chats);
    if chats.get(chat_id).is_some_and(|c| c.stage_id == stage_id) {
        chats.remove(chat_id);
    }
}

/// Cancels the session's running chat answer; returns (chat, stage).
pub(crate) fn cancel_for_session(rt: &Runtime, session_id: &str) -> Option<(String, String)> {
    let chats = lock(&rt.chats);
    chats
        .iter()
        .find(|(_, c)| c.session_id == session_id)
        .map(|(chat_id, c)| {
            c.cancel.cancel();
            (chat_id.clone(), c.stage_id.clone())
        })
}

/// Closes a chat stage whose answer died with its process.
async fn close_stale_stage(rt: &Runtime, stage_id: &str) -> Result<(), StoreError> {
    for e in rt.store.list_agent_executions(stage_id).await? {
        if !e.status.is_terminal() {
            crate::view::close_interrupted(&rt.store, &e.id, crate::view::INTERRUPTED_BY_RESTART)
                .await
                .map_err(|e| match e {
                    crate::error::SessionError::Store(s) => s,
                    other => StoreError::InvalidInput(other.to_string()),
                })?;
        }
    }
    rt.store
        .update_stage_status(
            stage_id,
            ExecutionStatus::Failed,
            Some(crate::view::INTERRUPTED_BY_RESTART),
        )
        .await?;
    Ok(())
}

/// Orders a session timeline for formatting: parallel executions interleave
/// in creation order, but the formatter pairs each tool call with the summary
/// that follows it, so each execution's events are kept together (executions
/// in order of first appearance, events in their own sequence order).
fn group_by_execution(events: Vec<tarsy_core::TimelineEvent>) -> Vec<tarsy_core::TimelineEvent> {
    let mut first_seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut keyed: Vec<((usize, i64, usize), tarsy_core::TimelineEvent)> = events
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let key = match &e.scope.execution_id {
                Some(id) => (
                    *first_seen.entry(id.clone()).or_insert(i),
                    e.sequence_number,
                    i,
                ),
                None => (i, 0, i),
            };
            (key, e)
        })
        .collect();
    keyed.sort_by_key(|(k, _)| *k);
    keyed.into_iter().map(|(_, e)| e).collect()
}

#[cfg(test)]
mod grouping_tests {
    use super::group_by_execution;
    use tarsy_core::{RecordScope, TimelineEvent, TimelineEventStatus, TimelineEventType};

    fn ev(exec: Option<&str>, seq: i64, content: &str) -> TimelineEvent {
        TimelineEvent {
            id: content.into(),
            scope: RecordScope {
                session_id: "s".into(),
                stage_id: exec.map(|_| "st".into()),
                execution_id: exec.map(str::to_string),
            },
            sequence_number: seq,
            event_type: TimelineEventType::LlmResponse,
            status: TimelineEventStatus::Completed,
            content: content.into(),
            metadata: serde_json::json!({}),
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn parallel_executions_are_not_interleaved() {
        let events = vec![
            ev(Some("a"), 1, "a1"),
            ev(Some("b"), 1, "b1"),
            ev(Some("a"), 2, "a2-call"),
            ev(Some("b"), 2, "b2-call"),
            ev(Some("a"), 3, "a3-summary"),
            ev(None, 0, "exec-summary"),
            ev(Some("c"), 1, "chat"),
        ];
        let order: Vec<String> = group_by_execution(events)
            .into_iter()
            .map(|e| e.content)
            .collect();
        assert_eq!(
            order,
            [
                "a1",
                "a2-call",
                "a3-summary",
                "b1",
                "b2-call",
                "exec-summary",
                "chat"
            ]
        );
    }
}
