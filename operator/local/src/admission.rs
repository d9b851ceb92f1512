//! Admission: which sessions this process drives. Pending sessions are
//! claimed oldest first while fewer than `maxConcurrentSessions` are in
//! progress; sessions left in progress by a dead process are taken back at
//! start-up.

use std::sync::Arc;

use tarsy_chain::{PendingSession, admit};
use tarsy_core::SessionStatus;
use tarsy_store::SessionFilter;
use tokio::sync::Notify;

use crate::error::Result;
use crate::runtime::{RunningSession, Runtime, lock};
use crate::session_loop;

/// Starts driving `session_id` unless this process drives it already.
fn spawn_runner(rt: &Arc<Runtime>, session_id: String) {
    let wake = Arc::new(Notify::new());
    {
        let mut running = lock(&rt.running);
        if running.contains_key(&session_id) {
            return;
        }
        running.insert(session_id.clone(), RunningSession { wake: wake.clone() });
    }
    let rt2 = rt.clone();
    rt.tasks
        .spawn(async move { session_loop::drive(rt2, session_id, wake).await });
}

/// Sessions in progress (or cancelling) that this process must take back:
/// those it owned before a restart (same pod id) and those whose owner has
/// shown no sign of life for the orphan timeout.
pub(crate) async fn recover(rt: &Arc<Runtime>) -> Result<usize> {
    let mut ids = Vec::new();
    let mut offset = 0;
    loop {
        let page = rt
            .store
            .list_sessions(&SessionFilter {
                statuses: vec![SessionStatus::InProgress, SessionStatus::Cancelling],
                limit: Some(500),
                offset: Some(offset),
                ..SessionFilter::default()
            })
            .await?;
        let n = page.sessions.len() as i64;
        ids.extend(
            page.sessions
                .into_iter()
                .filter(|s| s.pod_id.as_deref() == Some(rt.pod_id.as_str()) || s.pod_id.is_none())
                .map(|s| s.id),
        );
        offset += n;
        if n == 0 || offset >= page.total {
            break;
        }
    }
    let stale_before = chrono::Utc::now()
        - chrono::Duration::from_std(rt.settings.orphan_timeout).unwrap_or_default();
    for s in rt.store.find_orphaned_sessions(stale_before).await? {
        if !ids.contains(&s.id) {
            ids.push(s.id);
        }
    }
    let mut count = 0;
    for id in ids {
        if rt.is_driving(&id)
            || !rt
                .store
                .take_over_session(&id, &rt.pod_id, stale_before)
                .await?
        {
            continue;
        }
        tracing::info!(session_id = %id, "taking back a session left in progress");
        spawn_runner(rt, id);
        count += 1;
    }
    Ok(count)
}

/// Takes back what was left behind — sessions and chat answers of a
/// restarted process or a replica that went silent — now and then, not only
/// at start-up.
async fn sweep(rt: &Arc<Runtime>) {
    match recover(rt).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(sessions = n, "took over sessions left in progress"),
        Err(e) => tracing::warn!(error = %e, "sweeping for orphaned sessions failed"),
    }
    if let Err(e) = crate::chat::close_orphaned_answers(rt).await {
        tracing::warn!(error = %e, "sweeping for orphaned chat answers failed");
    }
}

/// Claims pending sessions while the limit allows, oldest first.
///
/// Through the fail-fast store, and holding the submission lock only to
/// claim: a submission waits for that lock, and a call waiting out an
/// outage would keep every `POST /alerts` from answering 503 within its
/// bound. Nothing is lost by failing: the loop looks again at its next
/// turn.
async fn admit_pending(rt: &Arc<Runtime>) -> Result<()> {
    let store = &rt.api_store;
    let in_progress = store
        .count_sessions_with_status(&[SessionStatus::InProgress, SessionStatus::Cancelling])
        .await?;
    let in_progress = usize::try_from(in_progress).unwrap_or(usize::MAX);
    // The state machine's admission rule decides how many may start; the
    // store's claim hands them out oldest first, atomically.
    let page = store
        .list_sessions(&SessionFilter {
            statuses: vec![SessionStatus::Pending],
            limit: Some(1000),
            ..SessionFilter::default()
        })
        .await?;
    let pending: Vec<PendingSession<chrono::DateTime<chrono::Utc>>> = page
        .sessions
        .iter()
        .map(|s| PendingSession {
            id: s.id.clone(),
            created: s.created_at,
        })
        .collect();
    let admitted = admit(&pending, in_progress, Some(rt.max_concurrent));
    if admitted.is_empty() {
        return Ok(());
    }
    // A spent daily budget holds every pending session of the project,
    // saying why on each (written once); running ones finish.
    let defaults = &rt.config.defaults;
    let hold = tarsy_exec::budget::daily_hold(
        store,
        &defaults.memory.project,
        defaults.max_cost_usd_per_day,
        chrono::Utc::now(),
    )
    .await?;
    if let Some(why) = hold {
        for s in page
            .sessions
            .iter()
            .filter(|s| s.hold_reason.as_deref() != Some(why.as_str()))
        {
            store.hold_session(&s.id, Some(&why)).await?;
        }
        return Ok(());
    }
    // A session is seen `pending` (its submission publishes it under this
    // lock) before it is seen `in_progress`.
    let _submissions = rt.submitting.lock().await;
    for _ in admitted {
        if rt.shutdown.is_cancelled() {
            break;
        }
        match store.claim_next_pending_session(&rt.pod_id).await? {
            Some(session) => {
                tracing::info!(session_id = %session.id, chain = %session.chain_id, "session admitted");
                if rt.notifier.as_ref().is_some_and(|n| n.notifies_start()) {
                    rt.notify(&session.id).await;
                }
                spawn_runner(rt, session.id);
            }
            None => break,
        }
    }
    Ok(())
}

/// The admission loop: runs until shutdown.
pub(crate) async fn admission_loop(rt: Arc<Runtime>, sweep_orphans: bool) {
    let mut sweeps = tokio::time::interval(rt.settings.heartbeat_interval);
    sweeps.tick().await;
    // An outage fails every turn: said once, not at every poll.
    let mut failing = false;
    loop {
        match admit_pending(&rt).await {
            Ok(()) if failing => {
                failing = false;
                tracing::info!("admitting pending sessions works again");
            }
            Ok(()) => {}
            Err(e) if failing => {
                tracing::debug!(error = %e, "admitting pending sessions still fails")
            }
            Err(e) => {
                failing = true;
                tracing::warn!(error = %e, "admitting pending sessions failed");
            }
        }
        tokio::select! {
            _ = rt.shutdown.cancelled() => return,
            _ = rt.admission.notified() => {}
            _ = tokio::time::sleep(rt.settings.poll_interval) => {}
            _ = sweeps.tick(), if sweep_orphans => sweep(&rt).await,
        }
    }
}
