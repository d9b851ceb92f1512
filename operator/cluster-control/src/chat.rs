//! Follow-up chat in cluster mode: the same rules as local mode (terminal
//! sessions only — cancelled ones excepted —, chat enabled for the chain,
//! one answer at a time per chat, no orphan question when refused), but the
//! answer is an `AgentExecution` of kind `chat` owned by the Alert: the
//! operator runs its pod and the runner answers with the whole session
//! timeline as context, then closes the chat stage.
//!
//! The operator's Alert reconcile stops at terminal phases, so the API
//! creates this execution itself (the one deviation from "AgentExecutions
//! are written by the operator only"); everything about it — name, labels,
//! owner reference, Postgres ids — is what the operator would produce.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::PostParams;
use tarsy_api::{ChatAccepted, ChatError, ChatSubmission};
use tarsy_config::resolved_spec;
use tarsy_core::ExecutionStatus;
use tarsy_crds::contract::{ExecutionRequest, execution_for};
use tarsy_crds::{AgentExecution, Alert, ChatRequestSpec, ExecutionKind, StageRef};
use tarsy_exec::admission::{ChatAgent, chat_agent, question_for};
use tarsy_exec::chat::Answer;
use tarsy_exec::ids::CHAT_STAGE_NAME;
use tarsy_store::{ChatUserMessage, Session, Stage};

use crate::{KubeSessionControl, kube_message, transient};

/// Longest question an AgentExecution carries (its schema bound); longer
/// questions are clipped there, the stored question stays whole.
const MAX_SPEC_QUESTION_CHARS: usize = 16_384;

/// How long a chat stage may exist without its AgentExecution before it is
/// taken for the remains of a submission that died half-way.
const MISSING_EXECUTION_GRACE: Duration = Duration::from_secs(60);

fn internal(e: impl std::fmt::Display) -> ChatError {
    ChatError::Internal(e.to_string())
}

fn chat_kube(what: &str, e: kube::Error) -> ChatError {
    tracing::warn!(error = %e, "{what}");
    let msg = kube_message(what, &e);
    if transient(&e) {
        ChatError::Unavailable(msg)
    } else {
        ChatError::Internal(msg)
    }
}

/// Accepts a question and creates the execution answering it.
pub(crate) async fn submit(
    ctl: &KubeSessionControl,
    submission: ChatSubmission,
) -> Result<ChatAccepted, ChatError> {
    let (content, session) =
        question_for(&ctl.store, &submission, ctl.alert_masker.as_ref()).await?;
    // The answer is owned by the Alert: without it there is nothing to chat about.
    let alert = ctl
        .alert_by_uid(&session.id)
        .await
        .map_err(|e| chat_kube("listing Alerts", e))?
        .ok_or_else(|| ChatError::NotFound(session.id.clone()))?;
    let config = ctl
        .config()
        .await
        .map_err(|e| chat_kube("reading the configuration", e))?;
    let agent = chat_agent(&config, &session)?;

    let created = ctl
        .store
        .get_or_create_chat(&session.id, Some(&submission.author))
        .await
        .map_err(internal)?;
    let chat = created.record;
    if let Some(active) = ctl
        .store
        .active_stage_for_chat(&chat.id)
        .await
        .map_err(internal)?
        && !close_if_ended(ctl, &alert, &active).await?
    {
        return Err(ChatError::Busy { chat_id: chat.id });
    }

    let message = ctl
        .store
        .create_chat_user_message(&chat.id, &content, Some(&submission.author))
        .await
        .map_err(internal)?;
    let answer = ChatExecution {
        ctl,
        alert: &alert,
        session: &session,
        chat_id: &chat.id,
        message: &message,
        agent: &agent,
        author: &submission.author,
    };
    match answer.start().await {
        Ok(stage_id) => {
            let accepted = ChatAccepted {
                chat_id: chat.id,
                message_id: message.id,
                stage_id,
                chat_created: created.created,
            };
            // After the AgentExecution exists (nothing to retract if its
            // creation fails) and long before its pod can emit anything.
            if let Some(publisher) = &ctl.publisher {
                tarsy_api::publish_chat_accepted(
                    publisher.as_ref(),
                    &submission,
                    &accepted,
                    &message.content,
                )
                .await;
            }
            Ok(accepted)
        }
        Err(e) => {
            // A refused question leaves no orphan message behind.
            if let Err(d) = ctl.store.delete_chat_user_message(&message.id).await {
                tracing::warn!(message_id = %message.id, error = %d, "cannot delete a refused chat message");
            }
            Err(e)
        }
    }
}

/// The chat's active stage has ended when its execution has (the runner or
/// the operator recorded a terminal phase) or never came to exist: record
/// that on the stage and report true; false means it is still answering.
async fn close_if_ended(
    ctl: &KubeSessionControl,
    alert: &Alert,
    stage: &Stage,
) -> Result<bool, ChatError> {
    let executions = ctl
        .executions_of(alert)
        .await
        .map_err(|e| chat_kube("listing AgentExecutions", e))?;
    let ae = executions
        .iter()
        .find(|ae| ae.spec.stage.id.as_deref() == Some(stage.id.as_str()));
    let (status, error) = match ae {
        Some(ae) => match ae.status.as_ref().and_then(|s| s.phase) {
            Some(phase) if phase.is_terminal() => (
                ExecutionStatus::from(phase),
                ae.status.as_ref().and_then(|s| s.error.clone()),
            ),
            _ => return Ok(false),
        },
        None => {
            let age = chrono::Utc::now() - stage.created_at;
            if age < chrono::Duration::from_std(MISSING_EXECUTION_GRACE).unwrap_or_default() {
                return Ok(false);
            }
            let msg = "the chat answer never started (its AgentExecution does not exist)";
            for e in ctl
                .store
                .list_agent_executions(&stage.id)
                .await
                .map_err(internal)?
            {
                if !e.status.is_terminal() {
                    ctl.store
                        .update_agent_execution_status(&e.id, ExecutionStatus::Failed, Some(msg))
                        .await
                        .map_err(internal)?;
                }
            }
            (ExecutionStatus::Failed, Some(msg.to_string()))
        }
    };
    tracing::info!(stage_id = %stage.id, %status, "closing a chat stage whose execution ended");
    ctl.store
        .update_stage_status(&stage.id, status, error.as_deref())
        .await
        .map_err(internal)?;
    Ok(true)
}

/// One question being handed to an execution.
struct ChatExecution<'a> {
    ctl: &'a KubeSessionControl,
    alert: &'a Alert,
    session: &'a Session,
    chat_id: &'a str,
    message: &'a ChatUserMessage,
    agent: &'a ChatAgent,
    author: &'a str,
}

impl ChatExecution<'_> {
    /// Creates the stage and execution rows, then the AgentExecution;
    /// returns the stage id.
    async fn start(&self) -> Result<String, ChatError> {
        let store = &self.ctl.store;
        let session_id = self.session.id.as_str();
        let next = store
            .max_stage_index(session_id)
            .await
            .map_err(internal)?
            .unwrap_or(0)
            + 1;
        let index = u32::try_from(next)
            .map_err(|_| ChatError::Internal(format!("stage index {next} is out of range")))?;
        let answer = Answer::new(session_id, self.chat_id, index);
        let stage = store
            .create_stage(answer.stage_row(&self.message.id))
            .await
            .map_err(|e| match e {
                // Another replica placed a question at this index first.
                e if e.is_conflict() => ChatError::Busy {
                    chat_id: self.chat_id.to_string(),
                },
                e => internal(e),
            })?;
        if stage.chat_user_message_id.as_deref() != Some(self.message.id.as_str()) {
            // The deterministic id existed: a concurrent question won it.
            return Err(ChatError::Busy {
                chat_id: self.chat_id.to_string(),
            });
        }
        let created = store
            .create_agent_execution(answer.execution_row(&self.agent.config))
            .await;
        if let Err(e) = created {
            self.fail(
                &answer.stage_id,
                None,
                &format!("cannot record the chat execution: {e}"),
            )
            .await;
            return Err(internal(e));
        }
        let ae = self.execution(&answer);
        let name = ae.name_any();
        if let Err(e) = self
            .ctl
            .api::<AgentExecution>()
            .create(&PostParams::default(), &ae)
            .await
        {
            let err = chat_kube("creating the chat AgentExecution", e);
            self.fail(
                &answer.stage_id,
                Some(&answer.execution_id),
                &format!("the chat answer could not start: {err}"),
            )
            .await;
            return Err(err);
        }
        tracing::info!(session_id, execution = %name, stage_id = %answer.stage_id, "chat answer started");
        Ok(answer.stage_id)
    }

    /// The chat AgentExecution, the object the operator's contract gives.
    fn execution(&self, answer: &Answer) -> AgentExecution {
        let deadline = k8s_openapi::jiff::Timestamp::now()
            .checked_add(
                k8s_openapi::jiff::SignedDuration::try_from(self.agent.timeout).unwrap_or_default(),
            )
            .ok()
            .map(Time);
        execution_for(
            self.alert,
            &self.session.chain_id,
            ExecutionRequest {
                stage: StageRef {
                    index: answer.stage_index,
                    name: CHAT_STAGE_NAME.to_string(),
                    id: Some(answer.stage_id.clone()),
                },
                agent_name: self.agent.config.agent_name.clone(),
                display_name: self.agent.config.display_name.clone(),
                agent_index: 1,
                kind: ExecutionKind::Chat,
                resolved: resolved_spec(&self.agent.config),
                chat: Some(ChatRequestSpec {
                    chat_id: self.chat_id.to_string(),
                    message_id: self.message.id.clone(),
                    question: tarsy_crds::clip(&self.message.content, MAX_SPEC_QUESTION_CHARS),
                    author: Some(self.author.to_string()),
                }),
                deadline,
            },
        )
    }

    /// Ends the rows of an answer that could not start, so the chat is not
    /// left busy.
    async fn fail(&self, stage_id: &str, execution_id: Option<&str>, msg: &str) {
        let store = &self.ctl.store;
        if let Some(id) = execution_id
            && let Err(e) = store
                .update_agent_execution_status(id, ExecutionStatus::Failed, Some(msg))
                .await
        {
            tracing::warn!(execution_id = id, error = %e, "cannot record the chat execution's failure");
        }
        if let Err(e) = store
            .update_stage_status(stage_id, ExecutionStatus::Failed, Some(msg))
            .await
        {
            tracing::warn!(stage_id, error = %e, "cannot record the chat stage's failure");
        }
    }
}
