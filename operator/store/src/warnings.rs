//! System warnings raised by one process and shown by every API replica
//! (`/health`): what went wrong outside any one session's records, such as
//! a runbook that could not be fetched. Each warning has an identity; raising
//! it again refreshes it, clearing it (the problem went away) removes it, and
//! it expires on its own otherwise.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::Store;
use crate::db::{Sql, normalize_time, now};
use crate::error::Result;

/// A stored system warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredWarning {
    /// Identity, e.g. `runbook:https://wiki.example.com/oom`.
    pub id: String,
    /// Category, e.g. `runbook`.
    pub category: String,
    /// One-line message.
    pub message: String,
    /// Details (the error).
    pub details: String,
    /// First raised.
    pub created_at: DateTime<Utc>,
    /// Last raised.
    pub updated_at: DateTime<Utc>,
    /// Shown until then unless raised again.
    pub expires_at: DateTime<Utc>,
}

macro_rules! warning_from_row {
    ($row_ty:ty) => {
        impl<'r> sqlx::FromRow<'r, $row_ty> for StoredWarning {
            fn from_row(row: &'r $row_ty) -> std::result::Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                Ok(StoredWarning {
                    id: row.try_get("id")?,
                    category: row.try_get("category")?,
                    message: row.try_get("message")?,
                    details: row.try_get("details")?,
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                    expires_at: row.try_get("expires_at")?,
                })
            }
        }
    };
}
warning_from_row!(sqlx::postgres::PgRow);
warning_from_row!(sqlx::sqlite::SqliteRow);

impl Store {
    /// Raises (or refreshes) warning `id` for `ttl` from now. Warnings that
    /// have expired are removed here: the table holds one row per problem
    /// seen lately and needs no retention job of its own.
    pub async fn raise_system_warning(
        &self,
        id: &str,
        category: &str,
        message: &str,
        details: &str,
        ttl: Duration,
    ) -> Result<()> {
        let at = now();
        // Longer TTLs than a century (unrepresentable ones included) are
        // a century: `at + ttl` must not overflow.
        let century = chrono::Duration::days(36_500);
        let expires = at + chrono::Duration::from_std(ttl).map_or(century, |t| t.min(century));
        self.db
            .execute(Sql::new("DELETE FROM system_warnings WHERE expires_at <= $1").bind(at))
            .await?;
        self.db
            .execute(
                Sql::new(
                    "INSERT INTO system_warnings \
                     (id, category, message, details, created_at, updated_at, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $5, $6) \
                     ON CONFLICT (id) DO UPDATE SET category = $2, message = $3, details = $4, \
                     updated_at = $5, expires_at = $6",
                )
                .bind(id)
                .bind(category)
                .bind(message)
                .bind(details)
                .bind(at)
                .bind(normalize_time(expires)),
            )
            .await
            .map(|_| ())
    }

    /// The problem behind warning `id` went away.
    pub async fn clear_system_warning(&self, id: &str) -> Result<()> {
        self.db
            .execute(Sql::new("DELETE FROM system_warnings WHERE id = $1").bind(id))
            .await
            .map(|_| ())
    }

    /// Warnings not expired at `at`, newest first.
    pub async fn active_system_warnings(&self, at: DateTime<Utc>) -> Result<Vec<StoredWarning>> {
        self.db
            .fetch_all(
                Sql::new(
                    "SELECT id, category, message, details, created_at, updated_at, expires_at \
                     FROM system_warnings WHERE expires_at > $1 ORDER BY updated_at DESC, id",
                )
                .bind(normalize_time(at)),
            )
            .await
    }
}
