//! Scoring in local mode. The attempt, what the judge reads and how its
//! answer becomes a score are [`tarsy_exec::scoring`]'s; here a judge is a
//! task of this process, started when a session of a chain with scoring on
//! completes, or on request. It runs after the session's outcome is final
//! and fail-open: nothing here changes or delays the session. A process
//! that starts again closes the attempts it left running.

use std::sync::Arc;

use tarsy_core::control::{ScoreAccepted, ScoreError};
use tarsy_core::{ResolvedAgentConfig, SessionStatus};
use tarsy_exec::scoring::{self, Judgement};
use tarsy_store::StoreError;
use tokio::time::Instant;

use crate::runtime::Runtime;

/// Starts the judge of a session that just ended, when its chain scores
/// completed sessions (`scoring.enabled`, else the defaults): the attempt
/// is created here, before the session is let go of (so whoever waits for
/// the session sees it), the judge runs as a task. Fail-open: a judge that
/// cannot start is logged, the session is untouched.
pub(crate) async fn after_finish(
    rt: &Arc<Runtime>,
    session_id: &str,
    chain_id: &str,
    status: SessionStatus,
) {
    if status != SessionStatus::Completed || rt.shutdown.is_cancelled() {
        return;
    }
    let Some(chain) = rt.config.chain(chain_id) else {
        return;
    };
    if !rt.config.scoring_enabled(&chain.spec) {
        return;
    }
    let started = match scoring::judge_of_chain(&rt.config, chain_id) {
        Ok((judge, timeout)) => start(rt, session_id, judge, timeout).await,
        Err(e) => Err(e),
    };
    if let Err(e) = started {
        tracing::warn!(%session_id, error = %e, "the session is not scored");
    }
}

/// Scores a finished session again, on request: the attempt starts here
/// (so a conflict is the caller's 409), the judge runs in the background.
pub(crate) async fn rescore(
    rt: &Arc<Runtime>,
    session_id: &str,
) -> Result<ScoreAccepted, ScoreError> {
    if rt.shutdown.is_cancelled() {
        return Err(ScoreError::Unavailable("TARSy is shutting down".into()));
    }
    let (judge, timeout) = scoring::judge_for(&rt.api_store, &rt.config, session_id).await?;
    start(rt, session_id, judge, timeout).await?;
    Ok(ScoreAccepted {
        session_id: session_id.to_string(),
    })
}

/// Starts an attempt owned by this process and runs its judge as a task,
/// stopped when the shutdown grace is over. The attempt is created on the
/// fail-fast store: a store outage refuses it at once instead of holding
/// the session (or the request) up.
async fn start(
    rt: &Arc<Runtime>,
    session_id: &str,
    judge: ResolvedAgentConfig,
    timeout: std::time::Duration,
) -> Result<(), ScoreError> {
    let judgement = Judgement::start(
        &rt.api_store,
        &rt.publisher,
        session_id,
        &judge,
        Some(&rt.pod_id),
    )
    .await
    .map_err(|e| scoring::start_refused(session_id, e))?;
    let rt = rt.clone();
    let cancel = rt.interrupt.child_token();
    rt.clone().tasks.spawn(async move {
        let deadline = Instant::now() + timeout;
        match judgement.run(&rt.launcher, judge, deadline, cancel).await {
            Ok(attempt) => {
                tracing::info!(session_id = %judgement.session_id, status = %attempt.status, score = ?attempt.score, "session scored");
                crate::memory::after_score(&rt, &attempt).await;
                rt.notify_score(attempt).await;
            }
            Err(e) => {
                tracing::warn!(session_id = %judgement.session_id, error = %e, "the scoring attempt failed")
            }
        }
    });
    Ok(())
}

/// Closes the attempts this process left running when it stopped (its pod
/// id owns them): their judge's records end failed and the attempt fails
/// with the reason, so the session can be scored again.
pub(crate) async fn close_orphaned_attempts(rt: &Runtime) -> Result<usize, StoreError> {
    let mut closed = 0;
    for attempt in rt.store.running_scores().await? {
        if attempt.owner.as_deref() != Some(rt.pod_id.as_str()) {
            continue;
        }
        tracing::warn!(session_id = %attempt.session_id, attempt = attempt.attempt, "closing a scoring attempt interrupted by a restart");
        match Judgement::of_attempt(&rt.store, &attempt).await {
            Ok(judgement) => {
                judgement
                    .abandon(
                        &rt.store,
                        &rt.publisher,
                        crate::view::INTERRUPTED_BY_RESTART,
                    )
                    .await
            }
            Err(_) => {
                rt.store
                    .fail_score(&attempt.id, crate::view::INTERRUPTED_BY_RESTART)
                    .await?;
            }
        }
        closed += 1;
    }
    Ok(closed)
}
