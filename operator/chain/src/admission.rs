//! Admission: which pending sessions may start now (the concurrency limit),
//! and whether a scope's daily budget holds them all.

use serde::{Deserialize, Serialize};

/// A session waiting for admission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSession<T> {
    /// Session id.
    pub id: String,
    /// Creation order key (a timestamp, or anything ordered).
    pub created: T,
}

/// Ids of the pending sessions to start now, oldest first (ties broken by id,
/// so every replica of the operator picks the same ones). `limit: None` means
/// unlimited.
pub fn admit<T: Ord>(
    pending: &[PendingSession<T>],
    running: usize,
    limit: Option<usize>,
) -> Vec<String> {
    let free = match limit {
        Some(limit) => limit.saturating_sub(running),
        None => pending.len(),
    };
    let mut order: Vec<&PendingSession<T>> = pending.iter().collect();
    order.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.id.cmp(&b.id)));
    order.into_iter().take(free).map(|p| p.id.clone()).collect()
}

/// Whether the pending sessions of a scope that has spent `spent_today` US
/// dollars today (UTC) must wait under `limit_per_day` (none: no limit):
/// the reason, said for people, while they must. Running sessions finish.
pub fn daily_budget_hold(limit_per_day: Option<f64>, spent_today: f64) -> Option<String> {
    let limit = limit_per_day?;
    (spent_today >= limit).then(|| {
        format!(
            "the budget of ${}/day of this scope is spent: new sessions wait for the next day \
             (UTC) or a higher limit",
            tarsy_core::cost::usd(limit)
        )
    })
}

#[cfg(test)]
mod budget_tests {
    use super::daily_budget_hold;

    #[test]
    fn a_spent_day_holds_new_sessions() {
        assert_eq!(daily_budget_hold(None, 1e9), None);
        assert_eq!(daily_budget_hold(Some(5.0), 4.99), None);
        let why = daily_budget_hold(Some(5.0), 5.0).unwrap();
        assert!(why.contains("$5.0000/day"), "{why}");
        // The reason does not move with the spend: it is written once.
        assert_eq!(daily_budget_hold(Some(5.0), 7.0), Some(why));
    }
}
