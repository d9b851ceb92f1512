//! [`SessionControl`] for local mode: alerts become sessions in the store
//! (masked, fail-open), cancellation reaches the running session or chat in
//! process, chat questions start answers in process.

use std::sync::Arc;

use async_trait::async_trait;
use tarsy_api::{
    AlertAccepted, CancelError, CancelOutcome, ChatAccepted, ChatError, ChatSubmission, NewAlert,
    ScoreAccepted, ScoreError, SessionControl, SubmitError,
};
use tarsy_core::{SessionStatus, ToolCatalog};
use tarsy_exec::intake::new_session;
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

/// What a submission's create is given at least, when waiting for the
/// submission lock took nearly all its time: a live database answers well
/// within it.
const MIN_CREATE: std::time::Duration = std::time::Duration::from_millis(100);

/// A cancel request's store failure: 503 when the store is unavailable.
fn cancel_error(e: StoreError) -> CancelError {
    match e.unavailable_message() {
        Some(m) => CancelError::Unavailable(m),
        None => CancelError::Internal(e.to_string()),
    }
}

impl LocalControl {
    async fn cancel_session(&self, session_id: &str) -> Result<Option<SessionStatus>, CancelError> {
        let store = &self.rt.api_store;
        // Not started yet: nothing runs, it ends at once.
        if store
            .transition_session_status(
                session_id,
                &[SessionStatus::Pending],
                SessionStatus::Cancelled,
            )
            .await
            .map_err(cancel_error)?
        {
            let session = store.get_session(session_id).await.map_err(cancel_error)?;
            store
                .finish_session(
                    session_id,
                    SessionOutcome {
                        status: SessionStatus::Cancelled,
                        final_analysis: None,
                        executive_summary: session.executive_summary,
                        executive_summary_error: session.executive_summary_error,
                        error_message: Some("cancelled by user before it started".into()),
                        end_reason: None,
                    },
                )
                .await
                .map_err(cancel_error)?;
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
            .map_err(cancel_error)?
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
        let row = new_session(
            id.clone(),
            &chain.name,
            &alert,
            Some(&self.rt.masking),
            Some(self.rt.config.defaults.memory.project.clone()),
        );
        // The request answers within the API's bound also while the
        // database is down: not waiting as long as an investigation's writes
        // do, and the wait for the lock (a claim or another submission may
        // hold it while its own call waits for a connection) counting in.
        let limit = tarsy_store::FAIL_FAST_LIMIT;
        let deadline = tokio::time::Instant::now() + limit;
        let submitting = tokio::time::timeout_at(deadline, self.rt.submitting.lock())
            .await
            .map_err(|_| {
                SubmitError::Unavailable(format!(
                    "the database is unavailable; try again shortly (no answer within {limit:?})"
                ))
            })?;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let created = self
            .rt
            .api_store
            .fail_fast(left.max(MIN_CREATE))
            .create_session(row)
            .await
            .map_err(|e| match e {
                StoreError::InvalidInput(m) => SubmitError::Refused(m),
                other => match other.unavailable_message() {
                    Some(m) => SubmitError::Unavailable(m),
                    None => SubmitError::Internal(other.to_string()),
                },
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
        let session = match self.rt.api_store.get_session(session_id).await {
            Ok(s) => s,
            Err(StoreError::NotFound { .. }) => {
                return Err(CancelError::NotFound(session_id.to_string()));
            }
            Err(e) => return Err(cancel_error(e)),
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

    async fn rescore(&self, session_id: &str) -> Result<ScoreAccepted, ScoreError> {
        crate::scoring::rescore(&self.rt, session_id).await
    }

    async fn learn_from_feedback(&self, session_id: &str) {
        crate::memory::reflect(&self.rt, session_id, true).await;
    }
}
