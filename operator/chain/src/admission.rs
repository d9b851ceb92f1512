//! The concurrency limit: which pending sessions may start now.

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
