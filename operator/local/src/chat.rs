//! Follow-up chat in local mode. The rules and the submission are
//! [`tarsy_exec::chat`]'s; here an answer is a task of this process — one
//! execution of the chain's chat agent, with the same strategies as an
//! investigation, its context the session's history — and an answer left
//! open by a process that died is closed.

use std::sync::Arc;

use async_trait::async_trait;
use tarsy_api::{ChatAccepted, ChatError, ChatSubmission};
use tarsy_config::Config;
use tarsy_core::{ExecutionStatus, ResolvedAgentConfig};
use tarsy_exec::Assignment;
use tarsy_exec::chat::{Answer, ChatEdge, ChatStore, Question};
use tarsy_store::{Chat, Session, Stage, StoreError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::runtime::{ActiveChat, Runtime, lock};

/// Accepts a question and starts answering it in this process
/// ([`tarsy_exec::chat::submit`]).
pub(crate) async fn submit(
    rt: &Arc<Runtime>,
    submission: ChatSubmission,
) -> Result<ChatAccepted, ChatError> {
    if rt.shutdown.is_cancelled() {
        return Err(ChatError::Unavailable("TARSy is shutting down".into()));
    }
    let at = ChatStore {
        store: &rt.api_store,
        publisher: Some(&rt.publisher),
        masker: Some(&rt.masking),
    };
    tarsy_exec::chat::submit(&LocalChat { rt }, at, submission).await
}

/// Local mode's part of chat: an answer is a task of this process; a chat
/// is held in `Runtime::chats` while this process answers in it.
struct LocalChat<'a> {
    rt: &'a Arc<Runtime>,
}

#[async_trait]
impl ChatEdge for LocalChat<'_> {
    async fn config(&self) -> Result<Arc<Config>, ChatError> {
        Ok(self.rt.config.clone())
    }

    async fn claim(
        &self,
        session: &Session,
        chat: &Chat,
        open: Option<&Stage>,
    ) -> Result<(), ChatError> {
        let rt = self.rt;
        {
            let mut chats = lock(&rt.chats);
            if chats.contains_key(&chat.id) {
                return Err(ChatError::Busy {
                    chat_id: chat.id.clone(),
                });
            }
            chats.insert(
                chat.id.clone(),
                ActiveChat {
                    session_id: session.id.clone(),
                    stage_id: String::new(),
                    cancel: CancellationToken::new(),
                },
            );
        }
        let Some(stale) = open else { return Ok(()) };
        // Not answered by this process (it holds no answer here): either an
        // answer this process was giving before a restart, or one whose
        // owner went silent — close it; otherwise another process is busy.
        if !orphaned(rt, chat) {
            self.unclaim(&chat.id);
            return Err(ChatError::Busy {
                chat_id: chat.id.clone(),
            });
        }
        if let Err(e) = close_stale_stage(rt, &stale.id).await {
            self.unclaim(&chat.id);
            return Err(ChatError::Internal(e.to_string()));
        }
        Ok(())
    }

    fn unclaim(&self, chat_id: &str) {
        lock(&self.rt.chats).remove(chat_id);
    }

    async fn prepare(&self, question: &Question) -> Result<(), ChatError> {
        if let Some(active) = lock(&self.rt.chats).get_mut(&question.answer.chat_id) {
            active.stage_id = question.answer.stage_id.clone();
        }
        Ok(())
    }

    fn run(&self, question: Question) {
        let cancel = lock(&self.rt.chats)
            .get(&question.answer.chat_id)
            .map(|c| c.cancel.clone())
            .unwrap_or_default();
        let task = AnswerTask {
            rt: self.rt.clone(),
            deadline: Instant::now() + question.agent.timeout,
            session: question.session,
            answer: question.answer,
            question: question.message.content,
            config: question.agent.config,
            cancel,
        };
        self.rt.tasks.spawn(task.run());
    }
}

/// One chat answer in flight.
struct AnswerTask {
    rt: Arc<Runtime>,
    session: Session,
    answer: Answer,
    question: String,
    config: ResolvedAgentConfig,
    cancel: CancellationToken,
    deadline: Instant,
}

impl AnswerTask {
    async fn run(self) {
        let rt = self.rt.clone();
        let (chat_id, stage_id) = (self.answer.chat_id.clone(), self.answer.stage_id.clone());
        self.answer().await;
        release(&rt, &chat_id, &stage_id);
    }

    async fn answer(self) {
        let rt = &self.rt;
        let input = match self
            .answer
            .begin(&rt.store, &rt.publisher, Some(&rt.pod_id), &self.question)
            .await
        {
            Ok(input) => input,
            Err(e) => {
                self.finish(
                    ExecutionStatus::Failed,
                    Some(format!("cannot build the chat history: {e}")),
                )
                .await;
                return;
            }
        };
        let assignment = Assignment::new(
            &self.session,
            self.answer.stage_id.clone(),
            self.answer.execution_id.clone(),
            self.config.clone(),
            input,
            self.deadline,
            self.cancel.clone(),
        );
        let result = rt.launcher.run(assignment, None).await.result;
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
            .update_agent_execution_status(&self.answer.execution_id, status, error.as_deref())
            .await
        {
            tracing::warn!(execution_id = %self.answer.execution_id, error = %e, "cannot record chat execution status");
        }
        // Free the chat before its stage shows the end: a client that sees
        // the answer finished may ask the next question at once.
        release(rt, &self.answer.chat_id, &self.answer.stage_id);
        self.answer
            .end(&rt.store, &rt.publisher, status, error.as_deref())
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

/// Whether nobody is answering in `chat` any more: this process is not
/// (checked by the caller), and the owner is this process before a restart
/// or went silent.
fn orphaned(rt: &Runtime, chat: &tarsy_store::Chat) -> bool {
    chat.pod_id.as_deref() == Some(rt.pod_id.as_str())
        || chat.last_interaction_at.is_none_or(|at| {
            chrono::Utc::now() - at
                > chrono::Duration::from_std(rt.settings.orphan_timeout).unwrap_or_default()
        })
}

/// Closes the chat answers whose process died (this one before a restart,
/// or a silent replica), so that no chat stays busy forever: their stage
/// and execution end failed with the reason, and the chat is free.
pub(crate) async fn close_orphaned_answers(rt: &Runtime) -> Result<usize, StoreError> {
    let mut closed = 0;
    for stage in rt.store.unfinished_chat_stages().await? {
        let Some(chat_id) = stage.chat_id.as_deref() else {
            continue;
        };
        if lock(&rt.chats).contains_key(chat_id) {
            continue;
        }
        let chat = rt.store.get_chat(chat_id).await?;
        if !orphaned(rt, &chat) {
            continue;
        }
        tracing::warn!(session_id = %stage.session_id, stage_id = %stage.id, "closing a chat answer interrupted by a restart");
        close_stale_stage(rt, &stage.id).await?;
        rt.store.touch_chat(chat_id, None).await?;
        rt.publish_stage_status(
            &stage.session_id,
            &stage.id,
            &stage.stage_name,
            stage.stage_index,
            ExecutionStatus::Failed,
        )
        .await;
        closed += 1;
    }
    Ok(closed)
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
