//! Investigation memory in local mode. Recall happens in every
//! investigation's launch; what the reflector reads and how its answer
//! becomes memories are [`tarsy_exec::memory`]'s. Here the reflector is a
//! task of this process, started when a session's score arrives, or a
//! person's review feedback. Fail-open: nothing here changes the session
//! or its score.

use std::sync::Arc;

use tarsy_exec::memory::{REFLECTOR_TIMEOUT, Reflector};
use tarsy_store::SessionScore;
use tokio::time::Instant;

use crate::runtime::Runtime;

/// Learns from a session whose scoring attempt just ended: a completed
/// score starts the reflector.
pub(crate) async fn after_score(rt: &Arc<Runtime>, attempt: &SessionScore) {
    if attempt.status == tarsy_core::ScoreStatus::Completed {
        reflect(rt, &attempt.session_id, false).await;
    }
}

/// Starts the reflector of a finished session (`feedback`: the feedback
/// reflector, after a review's text) when memory is on and the session
/// has a scope, as a task stopped with the process. Fail-open: logged.
pub(crate) async fn reflect(rt: &Arc<Runtime>, session_id: &str, feedback: bool) {
    if rt.shutdown.is_cancelled() {
        return;
    }
    let Some(memory) = rt.launcher.memory.clone() else {
        return;
    };
    let (reflector, agent) = match Reflector::start_for(&rt.store, &rt.config, session_id, feedback)
        .await
    {
        Ok(Some(started)) => started,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(%session_id, error = %e, "the reflector could not start: nothing is learned from this session");
            return;
        }
    };
    let rt = rt.clone();
    let cancel = rt.interrupt.child_token();
    rt.clone().tasks.spawn(async move {
        let deadline = Instant::now() + REFLECTOR_TIMEOUT;
        match reflector
            .run(&rt.launcher, &memory, agent, deadline, cancel)
            .await
        {
            Ok(learned) => tracing::info!(
                session_id = %reflector.session_id,
                created = learned.created.len(),
                reinforced = learned.reinforced,
                deprecated = learned.deprecated,
                "memories learned"
            ),
            Err(e) => {
                tracing::warn!(session_id = %reflector.session_id, error = %e, "nothing learned from the session")
            }
        }
    });
}
