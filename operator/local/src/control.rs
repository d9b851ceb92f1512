//! [`SessionControl`] for local mode: alerts become sessions in the store
//! (masked, fail-open), cancellation reaches the running session or chat in
//! process, chat questions start answers in process.

use std::sync::Arc;

use async_trait::async_trait;
use tarsy_api::{
    AlertAccepted, CancelError, CancelOutcome, ChatAccepted, ChatError, ChatSubmission, NewAlert,
    SessionControl, SubmitError,
};
use tarsy_core::{SessionStatus, ToolCatalog};
use tarsy_exec::admission::new_session;
use tarsy_store::{SessionOutcome, StoreError};

use crate::chat;
use crate::runtime::{Runtime, lock};

/// The local driver's [`SessionControl`]. Cheap to clone.
#[derive(Clone)]
pub struct LocalControl {
    pub(crate) rt: Arc<Runtime>,
    /// What MCP selections are checked against (the health monitor's
    /// tool lists when the API runs).
    pub(crate) tools: Arc<dyn ToolCatalog>,
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
            // Never driven, so never released by a loop: wake the waiters here.
            self.rt.released.notify_waiters();
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

#[async_trait]
impl SessionControl for LocalControl {
    async fn submit_alert(&self, alert: NewAlert) -> Result<AlertAccepted, SubmitError> {
        if self.rt.shutdown.is_cancelled() {
            return Err(SubmitError::Unavailable("TARSy is shutting down".into()));
        }
        let chain = self.rt.config.check_alert(&alert, self.tools.as_ref())?;
        let id = uuid::Uuid::new_v4().to_string();
        // Fail-open: a masking failure keeps the data unmasked (logged).
        let row = new_session(id.clone(), &chain.name, &alert, Some(&self.rt.masking));
        let submitting = self.rt.submitting.lock().await;
        let created = self
            .rt
            .store
            .create_session(row)
            .await
            .map_err(|e| match e {
                StoreError::InvalidInput(m) => SubmitError::Refused(m),
                other => SubmitError::Internal(other.to_string()),
            })?;
        self.rt
            .publish_session_status(&id, SessionStatus::Pending)
            .await;
        drop(submitting);
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
