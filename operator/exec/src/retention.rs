//! Retention: how long finished investigations stay listed, when hidden
//! ones are removed for good, and how long the live event log (WebSocket
//! catch-up) is kept. The same rules in both modes; local mode runs
//! [`run`] beside its sessions, cluster mode in the operator's leader.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tarsy_store::{Store, StoreError};
use tokio_util::sync::CancellationToken;

pub use tarsy_config::Retention;

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Sessions hidden.
    pub hidden: u64,
    /// Sessions removed.
    pub purged: u64,
    /// Live events deleted.
    pub events: u64,
    /// Slack threads forgotten: opened longer ago than a finished session
    /// stays listed (the next notice of their key opens a new thread).
    pub threads: u64,
}

/// One sweep of `policy` as of `now` (a parameter, so that tests can move
/// the clock).
pub async fn sweep(
    policy: &Retention,
    store: &Store,
    now: DateTime<Utc>,
) -> Result<Swept, StoreError> {
    let before = |age: Duration| {
        chrono::Duration::from_std(age)
            .ok()
            .and_then(|age| now.checked_sub_signed(age))
    };
    let mut swept = Swept::default();
    if let Some(cutoff) = policy.hide_after.and_then(before) {
        swept.hidden = store
            .soft_delete_sessions_completed_before(cutoff, now)
            .await?;
        swept.threads = store.forget_slack_threads_before(cutoff).await?;
    }
    if let Some(cutoff) = policy.purge_after.and_then(before) {
        swept.purged = store.purge_deleted_sessions(cutoff).await?;
    }
    if let Some(cutoff) = policy.event_ttl.and_then(before) {
        swept.events = store.delete_events_before(cutoff).await?;
    }
    Ok(swept)
}

/// Sweeps every `interval` (the first at once) until `stop`. A failed sweep
/// is logged and tried again at the next tick.
pub async fn run(store: Store, retention: Retention, interval: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(interval.max(Duration::from_secs(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        match sweep(&retention, &store, Utc::now()).await {
            Ok(s) if s == Swept::default() => {}
            Ok(s) => tracing::info!(
                hidden = s.hidden,
                purged = s.purged,
                events = s.events,
                threads = s.threads,
                "retention sweep"
            ),
            Err(e) => tracing::warn!(error = %e, "retention sweep failed"),
        }
    }
}
