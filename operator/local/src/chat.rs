//! Follow-up chat: one chat per session, questions on terminal sessions
//! only, one answer at a time per chat. An answer is one execution of the
//! chain's chat agent, with the same strategies as an investigation; its
//! context is the session's history ([`tarsy_exec::context::chat_history`]).

use std::sync::Arc;

use tarsy_api::{ChatAccepted, ChatError, ChatSubmission};
use tarsy_core::{ExecutionStatus, ResolvedAgentConfig};
use tarsy_exec::Assignment;
use tarsy_exec::admission::{chat_agent, question_for};
use tarsy_exec::chat::Answer;
use tarsy_store::{Session, StoreError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::runtime::{ActiveChat, Runtime, lock};

fn internal(e: impl std::fmt::Display) -> ChatError {
    ChatError::Internal(e.to_string())
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
    let (content, session) = question_for(&rt.store, &submission, Some(&rt.masking)).await?;
    let agent = chat_agent(&rt.config, &session)?;

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
        if !orphaned(rt, &chat) {
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
        let index = u32::try_from(index).map_err(|_| {
            StoreError::InvalidInput(format!("stage index {index} is out of range"))
        })?;
        let answer = Answer::new(&session.id, &chat.id, index);
        rt.store.create_stage(answer.stage_row(&message.id)).await?;
        rt.store
            .create_agent_execution(answer.execution_row(&agent.config))
            .await?;
        Ok::<_, StoreError>(answer)
    }
    .await;
    let answer = match records {
        Ok(r) => r,
        Err(e) => {
            // A refused question leaves no orphan message behind.
            let _ = rt.store.delete_chat_user_message(&message.id).await;
            return Err(internal(e));
        }
    };
    if let Some(active) = lock(&rt.chats).get_mut(&chat.id) {
        active.stage_id = answer.stage_id.clone();
    }
    reservation.armed = false;

    let accepted = ChatAccepted {
        chat_id: chat.id,
        message_id: message.id,
        stage_id: answer.stage_id.clone(),
        chat_created: created.created,
    };
    let task = AnswerTask {
        rt: rt.clone(),
        session,
        answer,
        question: content,
        config: agent.config,
        cancel,
        deadline: Instant::now() + agent.timeout,
    };
    // The question goes out before the answer can emit its first event.
    tarsy_api::publish_chat_accepted(
        rt.publisher.as_ref(),
        &submission,
        &accepted,
        &task.question,
    )
    .await;
    rt.tasks.spawn(task.run());
    Ok(accepted)
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
