//! [`SessionControl`] for local mode: alerts become sessions in the store
//! (masked, fail-open), cancellation reaches the running session or chat in
//! process, chat questions start answers in process.

use std::sync::Arc;

use async_trait::async_trait;
use tarsy_api::{
    AlertAccepted, CancelError, CancelOutcome, ChatAccepted, ChatError, ChatSubmission, NewAlert,
    SessionControl, SubmitError,
};
use tarsy_config::ResolveError;
use tarsy_core::{MAX_ALERT_DATA_BYTES, SessionStatus};
use tarsy_store::{NewSession, SessionOutcome, StoreError};

use crate::chat;
use crate::runtime::{Runtime, lock};

/// The local driver's [`SessionControl`]. Cheap to clone.
#[derive(Clone)]
pub struct LocalControl {
    pub(crate) rt: Arc<Runtime>,
}

impl LocalControl {
    async fn cancel_session(&self, session_id: &str) -> Result<Option<SessionStatus>, CancelError> {
        let store = &self.rt.store;
        let internal = |e: StoreError| CancelError::Internal(e.to_string());
        // Not started yet: nothing runs, it ends at once.
        if store
            .transition_session_status(
                session_id,
                &[SessionStatus::Pending],
                SessionStatus::Cancelled,
            )
            .await
            .map_err(internal)?
        {
            let session = store.get_session(session_id).await.map_err(internal)?;
            store
                .finish_session(
                    session_id,
                    SessionOutcome {
                        status: SessionStatus::Cancelled,
                        final_analysis: None,
                        executive_summary: session.executive_summary,
                        executive_summary_error: session.executive_summary_error,
                        error_message: Some("cancelled by user before it started".into()),
                    },
                )
                .await
                .map_err(internal)?;
            self.rt
                .publish_session_status(session_id, SessionStatus::Cancelled)
                .await;
            return Ok(Some(SessionStatus::Cancelled));
        }
        if store
            .transition_session_status(
                session_id,
                &[SessionStatus::InProgress, SessionStatus::Cancelling],
                SessionStatus::Cancelling,
            )
            .await
            .map_err(internal)?
        {
            self.rt
                .publish_session_status(session_id, SessionStatus::Cancelling)
                .await;
            let wake = lock(&self.rt.running)
                .get(session_id)
                .map(|r| r.wake.clone());
            if let Some(wake) = wake {
                wake.notify_one();
            }
            return Ok(Some(SessionStatus::Cancelling));
        }
        Ok(None)
    }
}

fn submit_error(e: ResolveError) -> SubmitError {
    match e {
        ResolveError::NoChainForAlertType(t) => SubmitError::UnknownAlertType(t),
        ResolveError::AmbiguousAlertType { alert_type, chains } => {
            SubmitError::AmbiguousAlertType {
                alert_type,
                chains: chains.split(", ").map(str::to_string).collect(),
            }
        }
        ResolveError::ChainNotFound(c) => SubmitError::UnknownChain(c),
        other => SubmitError::Invalid(other.to_string()),
    }
}

#[async_trait]
impl SessionControl for LocalControl {
    async fn submit_alert(&self, alert: NewAlert) -> Result<AlertAccepted, SubmitError> {
        if self.rt.shutdown.is_cancelled() {
            return Err(SubmitError::Unavailable("TARSy is shutting down".into()));
        }
        if alert.alert_type.trim().is_empty() {
            return Err(SubmitError::Invalid("alert_type is empty".into()));
        }
        if alert.data.len() > MAX_ALERT_DATA_BYTES {
            return Err(SubmitError::Invalid(format!(
                "alert data is {} bytes; the limit is {MAX_ALERT_DATA_BYTES}",
                alert.data.len()
            )));
        }
        let chain = self
            .rt
            .config
            .chain_for_alert(&alert.alert_type, alert.chain.as_deref())
            .map_err(submit_error)?;
        if let Some(selection) = &alert.mcp_selection {
            self.rt
                .config
                .validate_mcp_selection(selection)
                .map_err(|e| {
                    match selection
                        .servers
                        .iter()
                        .find(|s| self.rt.config.mcp_server(&s.name).is_none())
                    {
                        Some(unknown) => SubmitError::UnknownMcpServer(unknown.name.clone()),
                        None => SubmitError::Invalid(format!("mcp_selection: {e}")),
                    }
                })?;
        }
        // Fail-open: a masking failure keeps the data unmasked (logged).
        let data = self.rt.masking.mask_alert_data(&alert.data);
        let id = uuid::Uuid::new_v4().to_string();
        let created = self
            .rt
            .store
            .create_session(NewSession {
                id: id.clone(),
                alert_data: data,
                alert_type: alert.alert_type,
                chain_id: chain.name.clone(),
                author: Some(alert.author),
                runbook_url: alert.runbook_url,
                mcp_selection: alert
                    .mcp_selection
                    .map(|s| serde_json::to_value(s).unwrap_or_default()),
            })
            .await
            .map_err(|e| match e {
                StoreError::InvalidInput(m) => SubmitError::Invalid(m),
                other => SubmitError::Internal(other.to_string()),
            })?;
        self.rt
            .publish_session_status(&id, SessionStatus::Pending)
            .await;
        self.rt.admission.notify_one();
        Ok(AlertAccepted {
            session_id: id,
            chain_id: chain.name.clone(),
            status: created.record.status,
        })
    }

    async fn cancel(&self, session_id: &str) -> Result<CancelOutcome, CancelError> {
        let session = match self.rt.store.get_session(session_id).await {
            Ok(s) => s,
            Err(StoreError::NotFound { .. }) => {
                return Err(CancelError::NotFound(session_id.to_string()));
            }
            Err(e) => return Err(CancelError::Internal(e.to_string())),
        };
        if !session.status.is_terminal()
            && let Some(status) = self.cancel_session(session_id).await?
        {
            return Ok(CancelOutcome::Session { status });
        }
        if let Some((chat_id, stage_id)) = chat::cancel_for_session(&self.rt, session_id) {
            return Ok(CancelOutcome::Chat { chat_id, stage_id });
        }
        let status = self
            .rt
            .store
            .get_session(session_id)
            .await
            .map(|s| s.status)
            .unwrap_or(session.status);
        Err(CancelError::NothingToCancel { status })
    }

    async fn submit_chat_message(
        &self,
        submission: ChatSubmission,
    ) -> Result<ChatAccepted, ChatError> {
        chat::submit(&self.rt, submission).await
    }
}
