//! Investigation memory in local mode. Recall happens in every
//! investigation's launch and the reflector's run, what it reads and how
//! its answer becomes memories are [`tarsy_exec::memory`]'s; here the
//! reflector is a task of this process, started when a session's score
//! arrives, or a person's review feedback. Fail-open: nothing here changes the session or its score.

use std::sync::Arc;

use tarsy_exec::memory::{REFLECTOR_TIMEOUT, Reflector};
use tarsy_store::SessionScore;
use tokio::time::Instant;

use crate::runtime::Runtime;

/// Learns from a session whose scoring attempt just ended: a completed
/// score starts the reflector.
pub(crate) async fn after_score(rt: &Arc<Runtime>, attempt: &SessionScore) {
    if attempt.status == tarsy_core::ScoreStatus::Completed {
        reflect(rt, &attempt.session_id, None).await;
    }
}

/// Starts the reflector of a finished session (with a review's
/// `feedback`: the feedback reflector) when memory is on and the session
/// has a scope, as a task stopped with the process. Fail-open: logged.
pub(crate) async fn reflect(rt: &Arc<Runtime>, session_id: &str, feedback: Option<String>) {
    if rt.shutdown.is_cancelled() {
        return;
    }
    let Some(memory) = rt.launcher.memory.clone() else {
        return;
    };
    let session_id = session_id.to_string();
    let prepared = async {
        let session = rt.store.get_session(&session_id).await.ok()?;
        let scope = rt.store.session_memory_scope(&session_id).await.ok()??;
        let chain = rt.config.chain(&session.chain_id)?;
        match rt.config.resolve_reflector(&chain.spec) {
            Ok(agent) => Some((scope, agent)),
            Err(e) => {
                tracing::warn!(%session_id, error = %e, "no reflector: nothing is learned from this session");
                None
            }
        }
    }
    .await;
    let Some((scope, agent)) = prepared else {
        return;
    };
    let reflector = match Reflector::start(&rt.store, &session_id, &scope, &agent).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(%session_id, error = %e, "the reflector could not start");
            return;
        }
    };
    let rt = rt.clone();
    let cancel = rt.interrupt.child_token();
    rt.clone().tasks.spawn(async move {
        let deadline = Instant::now() + REFLECTOR_TIMEOUT;
        match reflector
            .run(
                &rt.launcher,
                &memory,
                agent,
                feedback.as_deref(),
                deadline,
                cancel,
            )
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
