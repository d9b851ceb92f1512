//! What a session may spend, as both modes enforce it: a running execution
//! reads the session's spend from the store before each iteration (its
//! parallel siblings' calls included, wherever they run), and the chain's
//! state machine reads it before starting a stage.

use async_trait::async_trait;
use tarsy_core::{Cost, SpendGauge};
use tarsy_store::Store;

/// A session's spend, as the store sums it.
pub struct StoreSpend {
    store: Store,
    session_id: String,
}

impl StoreSpend {
    /// The spend of session `session_id`.
    pub fn new(store: Store, session_id: impl Into<String>) -> Self {
        Self {
            store,
            session_id: session_id.into(),
        }
    }
}

#[async_trait]
impl SpendGauge for StoreSpend {
    async fn spent(&self) -> Option<Cost> {
        match self.store.session_cost(&self.session_id).await {
            Ok(cost) => Some(cost.unwrap_or_default()),
            Err(e) => {
                // Fail-open: a budget never fails an investigation.
                tracing::warn!(session_id = %self.session_id, error = %e, "the session's spend cannot be read; its budget is not checked now");
                None
            }
        }
    }
}

/// Why the pending sessions of `scope` must wait under its daily budget
/// `limit_per_day` (none: no limit), at `now`: its sessions created since
/// midnight (UTC) have spent it. Both modes' admission asks this.
pub async fn daily_hold(
    store: &Store,
    scope: &str,
    limit_per_day: Option<f64>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<String>, tarsy_store::StoreError> {
    if limit_per_day.is_none() {
        return Ok(None);
    }
    let midnight = now.date_naive().and_time(chrono::NaiveTime::MIN).and_utc();
    let spent = store.scope_spend_since(scope, midnight).await?;
    Ok(tarsy_chain::daily_budget_hold(limit_per_day, spent))
}
