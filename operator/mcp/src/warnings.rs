//! System warnings: an in-memory, thread-safe list of operational problems
//! (an MCP server that stopped answering, ...) that the health endpoint shows.
//! Not persisted: warnings describe the live state and reset on restart.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::Utc;

/// Category of MCP health warnings.
pub const CATEGORY_MCP_HEALTH: &str = "mcp_health";

pub use tarsy_core::SystemWarning;

/// The warning store. At most one warning per (category, server): adding again
/// replaces the previous one.
#[derive(Debug, Default)]
pub struct SystemWarnings {
    warnings: Mutex<Vec<SystemWarning>>,
    next_id: AtomicU64,
}

impl SystemWarnings {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SystemWarning>> {
        // A panic elsewhere while holding the lock cannot corrupt a Vec of
        // plain values: keep serving it.
        self.warnings.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds (or replaces) the warning of `category` + `server_id`; returns its id.
    pub fn add(
        &self,
        category: &str,
        message: impl Into<String>,
        details: impl Into<String>,
        server_id: Option<&str>,
    ) -> String {
        let id = format!("w{}", self.next_id.fetch_add(1, Ordering::Relaxed) + 1);
        let warning = SystemWarning {
            id: id.clone(),
            category: category.to_owned(),
            message: message.into(),
            details: details.into(),
            server_id: server_id.map(str::to_owned),
            created_at: Utc::now(),
        };
        let mut list = self.lock();
        list.retain(|w| !(w.category == category && w.server_id.as_deref() == server_id));
        list.push(warning);
        id
    }

    /// All warnings, oldest first.
    pub fn list(&self) -> Vec<SystemWarning> {
        self.lock().clone()
    }

    /// Removes the warning of `category` + `server_id`; true if there was one.
    pub fn clear(&self, category: &str, server_id: Option<&str>) -> bool {
        let mut list = self.lock();
        let before = list.len();
        list.retain(|w| !(w.category == category && w.server_id.as_deref() == server_id));
        list.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn dedups_by_category_and_server() {
        let w = SystemWarnings::new();
        w.add(CATEGORY_MCP_HEALTH, "down", "e1", Some("k8s"));
        w.add(CATEGORY_MCP_HEALTH, "down", "e2", Some("prom"));
        let id = w.add(CATEGORY_MCP_HEALTH, "still down", "e3", Some("k8s"));
        w.add("other", "x", "", None);
        let list = w.list();
        assert_eq!(list.len(), 3);
        let k8s: Vec<_> = list
            .iter()
            .filter(|x| x.server_id.as_deref() == Some("k8s"))
            .collect();
        assert_eq!(k8s.len(), 1);
        assert_eq!(k8s[0].details, "e3");
        assert_eq!(k8s[0].id, id);
        assert!(w.clear(CATEGORY_MCP_HEALTH, Some("k8s")));
        assert!(!w.clear(CATEGORY_MCP_HEALTH, Some("k8s")));
        assert_eq!(w.list().len(), 2);
        assert!(w.clear("other", None));
    }

    #[test]
    fn is_safe_across_threads() {
        let w = Arc::new(SystemWarnings::new());
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let w = w.clone();
                std::thread::spawn(move || {
                    for j in 0..100 {
                        w.add(
                            CATEGORY_MCP_HEALTH,
                            "m",
                            "d",
                            Some(&format!("s{}", (i + j) % 4)),
                        );
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(w.list().len(), 4);
    }
}
