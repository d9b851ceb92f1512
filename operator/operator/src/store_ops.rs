//! The Postgres writes an Alert reconcile asks for ([`StoreOp`]), each
//! with the lifecycle event it implies, published once.

use tarsy_core::{EventPublisher, ExecutionStatus, SessionStatus};
use tarsy_crds::{MAX_STATUS_TEXT_CHARS, clip};
use tarsy_events::lifecycle;
use tarsy_store::{SessionOutcome, Store, StoreError};

use crate::alert::StoreOp;
use crate::error::Error;

/// Performs one Postgres write and publishes the lifecycle event it implies
/// (`session.status`, `stage.status`) for WebSocket clients, once: only
/// when the write changed something.
pub(crate) async fn perform(
    store: &Store,
    publisher: &dyn EventPublisher,
    op: &StoreOp,
) -> Result<(), Error> {
    match op {
        StoreOp::CreateSession(new) => {
            store.create_session(new.clone()).await?;
        }
        StoreOp::StartSession { session_id } => {
            let started = store
                .transition_session_status(
                    session_id,
                    &[SessionStatus::Pending],
                    SessionStatus::InProgress,
                )
                .await?;
            if started {
                lifecycle::publish_session_status(publisher, session_id, SessionStatus::InProgress)
                    .await;
            }
        }
        StoreOp::CreateStage(new) => {
            let stage = store.create_stage(new.clone()).await?;
            if stage.status == ExecutionStatus::Pending {
                store
                    .update_stage_status(&stage.id, ExecutionStatus::Active, None)
                    .await?;
                let stage_ref = lifecycle::StageRef {
                    id: &stage.id,
                    name: &stage.stage_name,
                    index: stage.stage_index,
                };
                lifecycle::publish_stage_status(
                    publisher,
                    &stage.session_id,
                    stage_ref,
                    ExecutionStatus::Active,
                )
                .await;
            }
        }
        StoreOp::CreateExecution(new) => {
            store.create_agent_execution(new.clone()).await?;
        }
        StoreOp::FinishStage {
            stage_id,
            status,
            error,
        } => match store
            .update_stage_status(stage_id, *status, error.as_deref())
            .await
        {
            Ok(stage) => {
                let stage_ref = lifecycle::StageRef {
                    id: &stage.id,
                    name: &stage.stage_name,
                    index: stage.stage_index,
                };
                lifecycle::publish_stage_status(publisher, &stage.session_id, stage_ref, *status)
                    .await;
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        },
        StoreOp::FinishSession {
            session_id,
            status,
            final_analysis,
            executive_summary,
            executive_summary_error,
            error,
        } => match store
            .finish_session(
                session_id,
                SessionOutcome {
                    status: *status,
                    final_analysis: final_analysis.clone(),
                    executive_summary: full_summary(store, session_id, executive_summary).await,
                    executive_summary_error: executive_summary_error.clone(),
                    error_message: error.clone(),
                },
            )
            .await
        {
            Ok(_) => lifecycle::publish_session_status(publisher, session_id, *status).await,
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        },
    }
    Ok(())
}

/// The summary to store at the end: the status holds it clipped, the row
/// (written when it was generated) in full; the row's text is kept when the
/// status's is its clipped form.
async fn full_summary(store: &Store, session_id: &str, clipped: &Option<String>) -> Option<String> {
    let clipped = clipped.as_ref()?;
    let stored = store
        .get_session(session_id)
        .await
        .ok()
        .and_then(|row| row.executive_summary);
    match stored {
        Some(full) if clip(&full, MAX_STATUS_TEXT_CHARS) == *clipped => Some(full),
        _ => Some(clipped.clone()),
    }
}
