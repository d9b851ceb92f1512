//! Follow-up chat, the same in both modes: one chat per session, questions
//! on ended sessions only (cancelled ones excepted), chat enabled for the
//! chain, one answer at a time per chat, no orphan question when refused.
//!
//! [`submit`] is the whole submission — question, chat agent, the chat,
//! the busy check, the message, the answer's stage and execution rows, the
//! undo on refusal, the live events of the question (`chat.created` for a
//! new chat, `chat.user_message`) — around a [`ChatEdge`], the
//! mode's part: where an answer runs (an in-process task; an
//! AgentExecution). [`Answer`] is an answer's records around its execution:
//! the start (stage active, question on the timeline, history as context)
//! and the end (stage status, chat free again).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use tarsy_config::Config;
use tarsy_core::control::{ChatAccepted, ChatError, ChatSubmission};
use tarsy_core::{
    EventPublisher, ExecutionKind, ExecutionRecorder, ExecutionStatus, RecordScope,
    ResolvedAgentConfig, StageKind, TimelineEventType,
};
use tarsy_engine::ChatContext;
use tarsy_engine::recording::Recorder;
use tarsy_events::lifecycle::{PublishedStage, publish_chat_accepted, publish_stage_status};
use tarsy_masking::MaskingService;
use tarsy_store::{Chat, ChatUserMessage, NewAgentExecution, NewStage, Session, Stage, Store};

use crate::context::chat_history;
use crate::error::Result;
use crate::ids::{CHAT_STAGE_NAME, execution_id, stage_id};
use crate::intake::{ChatAgent, chat_agent, question_for};
use crate::launch::AgentInput;

/// A mode's part of chat submission: where an answer runs.
#[async_trait]
pub trait ChatEdge: Send + Sync {
    /// The configuration the session's chain is read from now.
    async fn config(&self) -> Result<Arc<Config>, ChatError>;

    /// Takes `chat` of `session` for a new answer, or refuses (`Busy`,
    /// `NotFound`, ...). `open` is the chat's answer still open in the
    /// store, if any: one that has ended, or whose process died, is closed
    /// here and the chat taken; one still being given refuses.
    async fn claim(
        &self,
        session: &Session,
        chat: &Chat,
        open: Option<&Stage>,
    ) -> Result<(), ChatError>;

    /// Gives `chat_id` back after a refusal: nothing was started.
    fn unclaim(&self, chat_id: &str);

    /// Makes what runs `question`'s answer exist; nothing of it runs yet.
    /// A refusal here closes the answer's records and removes the question.
    async fn prepare(&self, question: &Question) -> Result<(), ChatError>;

    /// Runs the answer (after the question was published).
    fn run(&self, question: Question);
}

/// A question placed in its session: the records that answer it.
#[derive(Debug, Clone)]
pub struct Question {
    /// Where the answer is recorded.
    pub answer: Answer,
    /// The session asked about.
    pub session: Session,
    /// The question as stored (masked).
    pub message: ChatUserMessage,
    /// The agent answering.
    pub agent: ChatAgent,
    /// Who asked.
    pub author: String,
}

/// Where [`submit`] reads and writes.
#[derive(Clone, Copy)]
pub struct ChatStore<'a> {
    /// The session store.
    pub store: &'a Store,
    /// Where the question's live events go (`None`: not published).
    pub publisher: Option<&'a Arc<dyn EventPublisher>>,
    /// Masks the question before it is stored (`None`: unavailable; stored
    /// as asked, fail-open like alert data).
    pub masker: Option<&'a MaskingService>,
}

fn internal(e: tarsy_store::StoreError) -> ChatError {
    match e.unavailable_message() {
        Some(m) => ChatError::Unavailable(m),
        None => ChatError::Internal(e.to_string()),
    }
}

/// Accepts a question and starts answering it (see the module docs).
pub async fn submit(
    edge: &dyn ChatEdge,
    at: ChatStore<'_>,
    submission: ChatSubmission,
) -> Result<ChatAccepted, ChatError> {
    let store = at.store;
    let (content, session) = question_for(store, &submission, at.masker).await?;
    let config = edge.config().await?;
    let agent = chat_agent(&config, &session)?;
    let created = store
        .get_or_create_chat(&session.id, Some(&submission.author))
        .await
        .map_err(internal)?;
    let chat = created.record;
    let open = store
        .active_stage_for_chat(&chat.id)
        .await
        .map_err(internal)?;
    edge.claim(&session, &chat, open.as_ref()).await?;

    let message = match store
        .create_chat_user_message(&chat.id, &content, Some(&submission.author))
        .await
    {
        Ok(m) => m,
        Err(e) => {
            edge.unclaim(&chat.id);
            return Err(internal(e));
        }
    };
    let placed = place(store, &session.id, &chat.id, &message.id, &agent.config).await;
    let answer = match placed {
        Ok(answer) => answer,
        Err((e, answer)) => {
            return Err(refuse(edge, store, &chat.id, &message.id, e, answer).await);
        }
    };
    let question = Question {
        answer,
        session,
        message: message.clone(),
        agent,
        author: submission.author.clone(),
    };
    if let Err(e) = edge.prepare(&question).await {
        return Err(refuse(edge, store, &chat.id, &message.id, e, Some(question.answer)).await);
    }
    let accepted = ChatAccepted {
        chat_id: chat.id,
        message_id: message.id.clone(),
        stage_id: question.answer.stage_id.clone(),
        chat_created: created.created,
    };
    // The question goes out before the answer can emit its first event.
    if let Some(publisher) = at.publisher {
        publish_chat_accepted(publisher.as_ref(), &submission, &accepted, &message.content).await;
    }
    edge.run(question);
    Ok(accepted)
}

/// Undoes a question that cannot be answered: its answer's records closed,
/// the message removed (a refused question leaves no orphan message), the
/// chat given back. Returns `e`.
async fn refuse(
    edge: &dyn ChatEdge,
    store: &Store,
    chat_id: &str,
    message_id: &str,
    e: ChatError,
    answer: Option<Answer>,
) -> ChatError {
    if let Some(answer) = answer {
        answer
            .abandon(store, &format!("the chat answer could not start: {e}"))
            .await;
    }
    if let Err(d) = store.delete_chat_user_message(message_id).await {
        tracing::warn!(message_id, error = %d, "cannot delete a refused chat message");
    }
    edge.unclaim(chat_id);
    e
}

/// The stage and execution rows of the answer to `message_id`, at the next
/// stage index. A question placed there first by someone else refuses this
/// one (`Busy`); the answer is returned with the error when its rows exist.
async fn place(
    store: &Store,
    session_id: &str,
    chat_id: &str,
    message_id: &str,
    agent: &ResolvedAgentConfig,
) -> std::result::Result<Answer, (ChatError, Option<Answer>)> {
    let index = crate::records::next_stage_index(store, session_id)
        .await
        .map_err(|e| (internal(e), None))?;
    let answer = Answer::new(session_id, chat_id, index);
    let busy = || ChatError::Busy {
        chat_id: chat_id.to_string(),
    };
    let stage = match store.create_stage(answer.stage_row(message_id)).await {
        Ok(stage) => stage,
        Err(e) if e.is_conflict() => return Err((busy(), None)),
        Err(e) => return Err((internal(e), None)),
    };
    if stage.chat_user_message_id.as_deref() != Some(message_id) {
        // The deterministic id existed: a concurrent question won it.
        return Err((busy(), None));
    }
    if let Err(e) = store
        .create_agent_execution(answer.execution_row(agent))
        .await
    {
        return Err((internal(e), Some(answer)));
    }
    Ok(answer)
}

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

    fn stage_ref(&self) -> PublishedStage<'_> {
        PublishedStage {
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
        crate::records::stage_status(
            store,
            publisher.as_ref(),
            session_id,
            self.stage_ref(),
            ExecutionStatus::Active,
            None,
        )
        .await;
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
            status,
        )
        .await;
    }

    /// Closes the records of an answer that never started (best effort:
    /// a failure is logged), so the chat is not left busy.
    pub async fn abandon(&self, store: &Store, why: &str) {
        match store
            .update_agent_execution_status(&self.execution_id, ExecutionStatus::Failed, Some(why))
            .await
        {
            Ok(_) | Err(tarsy_store::StoreError::NotFound { .. }) => {}
            Err(e) => {
                tracing::warn!(execution_id = %self.execution_id, error = %e, "cannot record the chat execution's failure")
            }
        }
        if let Err(e) = store
            .update_stage_status(&self.stage_id, ExecutionStatus::Failed, Some(why))
            .await
        {
            tracing::warn!(stage_id = %self.stage_id, error = %e, "cannot record the chat stage's failure");
        }
    }
}
