//! Circuit breakers of LLM providers, shared through the database so that
//! every process calling a provider (each runner pod, local mode across
//! restarts) sees the failures the others saw. One row per `(scope,
//! provider)`; the engine's `tarsy_engine::fallback` decides what the
//! numbers mean, this module only counts atomically.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::Store;
use crate::db::{Sql, now};
use crate::error::Result;

/// The recorded state of one provider's circuit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BreakerState {
    /// Who configured the provider (a cluster namespace; `local` locally).
    pub scope: String,
    /// Provider name.
    pub provider: String,
    /// Failed calls since the last success.
    pub consecutive_failures: u32,
    /// Until when the circuit rejects calls (`None`: never opened since the
    /// last success).
    pub open_until: Option<DateTime<Utc>>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

impl BreakerState {
    /// How long the circuit stays open from `now` (`None` when it is closed
    /// or its open period has passed).
    pub fn open_for(&self, now: DateTime<Utc>) -> Option<Duration> {
        self.open_until
            .and_then(|until| (until - now).to_std().ok())
            .filter(|d| !d.is_zero())
    }
}

macro_rules! breaker_from_row {
    ($row_ty:ty) => {
        impl<'r> sqlx::FromRow<'r, $row_ty> for BreakerState {
            fn from_row(row: &'r $row_ty) -> std::result::Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                let failures: i64 = row.try_get("consecutive_failures")?;
                Ok(BreakerState {
                    scope: row.try_get("scope")?,
                    provider: row.try_get("provider")?,
                    consecutive_failures: u32::try_from(failures.max(0)).unwrap_or(u32::MAX),
                    open_until: row.try_get("open_until")?,
                    updated_at: row.try_get("updated_at")?,
                })
            }
        }
    };
}
breaker_from_row!(sqlx::postgres::PgRow);
breaker_from_row!(sqlx::sqlite::SqliteRow);

const COLUMNS: &str = "scope, provider, consecutive_failures, open_until, updated_at";

impl Store {
    /// The recorded circuits of `providers` in `scope` (providers never
    /// recorded, or closed since, have no row).
    pub async fn breaker_states(
        &self,
        scope: &str,
        providers: &[String],
    ) -> Result<Vec<BreakerState>> {
        if providers.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders: Vec<String> = (0..providers.len())
            .map(|i| format!("${}", i + 2))
            .collect();
        let mut sql = Sql::dynamic(format!(
            "SELECT {COLUMNS} FROM llm_breakers WHERE scope = $1 AND provider IN ({})",
            placeholders.join(", ")
        ))
        .bind(scope);
        for p in providers {
            sql = sql.bind(p);
        }
        self.db.fetch_all(sql).await
    }

    /// Counts a failed call of `provider` and, once `threshold` failures
    /// happened in a row, opens its circuit for `open_for` from now (again,
    /// when a trial call after an earlier opening failed). Atomic: concurrent
    /// failures from several processes are all counted. Returns the new state.
    pub async fn record_breaker_failure(
        &self,
        scope: &str,
        provider: &str,
        threshold: u32,
        open_for: Duration,
    ) -> Result<BreakerState> {
        let at = now();
        let until = at + chrono::Duration::from_std(open_for).unwrap_or(chrono::Duration::MAX);
        let rows: Vec<BreakerState> = self
            .db
            .fetch_all(
                Sql::dynamic(format!(
                    "INSERT INTO llm_breakers ({COLUMNS}) \
                     VALUES ($1, $2, 1, CASE WHEN 1 >= $3 THEN $4 ELSE NULL END, $5) \
                     ON CONFLICT (scope, provider) DO UPDATE SET \
                       consecutive_failures = llm_breakers.consecutive_failures + 1, \
                       open_until = CASE WHEN llm_breakers.consecutive_failures + 1 >= $3 \
                                    THEN $4 ELSE llm_breakers.open_until END, \
                       updated_at = $5 \
                     RETURNING {COLUMNS}"
                ))
                .bind(scope)
                .bind(provider)
                .bind(i64::from(threshold.max(1)))
                .bind(until)
                .bind(at),
            )
            .await?;
        rows.into_iter().next().ok_or_else(|| {
            crate::error::StoreError::InvalidInput(format!(
                "recording a failure of provider {provider:?} returned no row"
            ))
        })
    }

    /// A call of `provider` succeeded: its circuit closes (the row goes).
    pub async fn reset_breaker(&self, scope: &str, provider: &str) -> Result<()> {
        self.db
            .execute(
                Sql::new("DELETE FROM llm_breakers WHERE scope = $1 AND provider = $2")
                    .bind(scope)
                    .bind(provider),
            )
            .await
            .map(|_| ())
    }

    /// Every circuit open at `at`, in every scope (system warnings).
    pub async fn open_breakers(&self, at: DateTime<Utc>) -> Result<Vec<BreakerState>> {
        self.db
            .fetch_all(
                Sql::dynamic(format!(
                    "SELECT {COLUMNS} FROM llm_breakers \
                     WHERE open_until IS NOT NULL AND open_until > $1 \
                     ORDER BY scope, provider"
                ))
                .bind(crate::db::normalize_time(at)),
            )
            .await
    }
}
