//! Retention: how long finished investigations stay listed, when hidden
//! ones are removed for good, and how long the live event log (WebSocket
//! catch-up) is kept. The same rules in both modes; local mode runs
//! [`run`] beside its sessions, cluster mode in the operator's leader.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tarsy_store::{Store, StoreError};
use tokio_util::sync::CancellationToken;

/// Default: finished sessions stay listed 90 days (the reference's
/// retention).
pub const DEFAULT_HIDE_AFTER: Duration = Duration::from_secs(90 * 24 * 3600);
/// Default: hidden sessions are removed 30 days after they were hidden.
pub const DEFAULT_PURGE_AFTER: Duration = Duration::from_secs(30 * 24 * 3600);
/// Default: live events are kept one day (longer than any session runs).
pub const DEFAULT_EVENT_TTL: Duration = Duration::from_secs(24 * 3600);
/// Default: one sweep an hour.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(3600);

/// What is kept how long; `None` keeps forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// A finished session is hidden (soft-deleted) this long after it
    /// finished; hidden sessions are still served by id.
    pub hide_after: Option<Duration>,
    /// A hidden session, with everything below it, is removed this long
    /// after it was hidden.
    pub purge_after: Option<Duration>,
    /// Live events older than this are deleted.
    pub event_ttl: Option<Duration>,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            hide_after: Some(DEFAULT_HIDE_AFTER),
            purge_after: Some(DEFAULT_PURGE_AFTER),
            event_ttl: Some(DEFAULT_EVENT_TTL),
        }
    }
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Sessions hidden.
    pub hidden: u64,
    /// Sessions removed.
    pub purged: u64,
    /// Live events deleted.
    pub events: u64,
}

impl Retention {
    /// One sweep as of `now` (a parameter, so that tests can move the clock).
    pub async fn sweep(&self, store: &Store, now: DateTime<Utc>) -> Result<Swept, StoreError> {
        let before = |age: Duration| {
            chrono::Duration::from_std(age)
                .ok()
                .and_then(|age| now.checked_sub_signed(age))
        };
        let mut swept = Swept::default();
        if let Some(cutoff) = self.hide_after.and_then(before) {
            swept.hidden = store
                .soft_delete_sessions_completed_before(cutoff, now)
                .await?;
        }
        if let Some(cutoff) = self.purge_after.and_then(before) {
            swept.purged = store.purge_deleted_sessions(cutoff).await?;
        }
        if let Some(cutoff) = self.event_ttl.and_then(before) {
            swept.events = store.delete_events_before(cutoff).await?;
        }
        Ok(swept)
    }
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
        match retention.sweep(&store, Utc::now()).await {
            Ok(s) if s == Swept::default() => {}
            Ok(s) => tracing::info!(
                hidden = s.hidden,
                purged = s.purged,
                events = s.events,
                "retention sweep"
            ),
            Err(e) => tracing::warn!(error = %e, "retention sweep failed"),
        }
    }
}
