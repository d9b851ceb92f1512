//! Follow-up chat in cluster mode. The rules and the submission are
//! [`tarsy_exec::chat`]'s; here the answer is an `AgentExecution` of kind
//! `chat` owned by the Alert. The API stores the question's records and
//! asks for the answer through the Alert ([`CHAT_ANNOTATION`]); the
//! operator, the only writer of AgentExecutions, creates it; its pod's
//! runner answers with the whole session timeline as context, then closes
//! the chat stage.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tarsy_api::{ChatAccepted, ChatError, ChatSubmission};
use tarsy_config::Config;
use tarsy_core::ExecutionStatus;
use tarsy_crds::Alert;
use tarsy_crds::contract::CHAT_ANNOTATION;
use tarsy_exec::chat::{ChatEdge, ChatStore, Question};
use tarsy_store::{Chat, Session, Stage};

use crate::{KubeSessionControl, kube_message, transient};

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

/// Accepts a question and creates the execution answering it
/// ([`tarsy_exec::chat::submit`]).
pub(crate) async fn submit(
    ctl: &KubeSessionControl,
    submission: ChatSubmission,
) -> Result<ChatAccepted, ChatError> {
    let edge = ClusterChat {
        ctl,
        alert: Mutex::new(None),
    };
    let at = ChatStore {
        store: &ctl.store,
        publisher: ctl.publisher.as_ref(),
        masker: ctl.alert_masker.as_ref(),
    };
    tarsy_exec::chat::submit(&edge, at, submission).await
}

/// Cluster mode's part of chat: an answer is an AgentExecution of kind
/// `chat` owned by the session's Alert.
struct ClusterChat<'a> {
    ctl: &'a KubeSessionControl,
    /// The session's Alert, found by [`ChatEdge::claim`].
    alert: Mutex<Option<Alert>>,
}

impl ClusterChat<'_> {
    fn alert(&self) -> Option<Alert> {
        self.alert.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[async_trait]
impl ChatEdge for ClusterChat<'_> {
    async fn config(&self) -> Result<Arc<Config>, ChatError> {
        self.ctl
            .config()
            .await
            .map(Arc::new)
            .map_err(|e| chat_kube("reading the configuration", e))
    }

    async fn claim(
        &self,
        session: &Session,
        chat: &Chat,
        open: Option<&Stage>,
    ) -> Result<(), ChatError> {
        // The answer is owned by the Alert: without it there is nothing to chat about.
        let alert = self
            .ctl
            .alert_by_uid(&session.id)
            .await
            .map_err(|e| chat_kube("listing Alerts", e))?
            .ok_or_else(|| ChatError::NotFound(session.id.clone()))?;
        if let Some(stage) = open
            && !close_if_ended(self.ctl, &alert, stage).await?
        {
            return Err(ChatError::Busy {
                chat_id: chat.id.clone(),
            });
        }
        *self.alert.lock().unwrap_or_else(|e| e.into_inner()) = Some(alert);
        Ok(())
    }

    fn unclaim(&self, _chat_id: &str) {}

    /// Asks the operator for the answer's AgentExecution: the Alert's
    /// [`CHAT_ANNOTATION`] names the question's stage (the operator alone
    /// writes AgentExecutions).
    async fn prepare(&self, question: &Question) -> Result<(), ChatError> {
        let alert = self
            .alert()
            .ok_or_else(|| ChatError::Internal("chat prepared before it was claimed".into()))?;
        let patch = serde_json::json!({
            "metadata": {"annotations": {CHAT_ANNOTATION: question.answer.stage_id}}
        });
        self.ctl
            .patch_alert(&alert, &patch)
            .await
            .map_err(|e| chat_kube("asking for the chat answer on the Alert", e))?;
        tracing::info!(session_id = %question.session.id, stage_id = %question.answer.stage_id, "chat answer requested");
        Ok(())
    }

    /// The operator runs the AgentExecution's pod.
    fn run(&self, _question: Question) {}
}

/// The chat's open stage has ended when its execution has (the runner or
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
