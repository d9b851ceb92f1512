//! What sessions, stages and executions cost. Each LLM interaction keeps the
//! estimate made when it was recorded; a trigger adds each stored interaction
//! to its session's row of `session_usage` (per provider and model), so a
//! session's cost is read from a row or two, whatever its length.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use tarsy_core::{Cost, TokenUsage};

use crate::Store;
use crate::db::Sql;
use crate::error::Result;

/// The sums of a group of calls, as every cost query selects them:
/// calls, unpriced calls, estimate, then input, output, thinking, cached
/// and total tokens.
/// (Postgres sums BIGINTs as NUMERIC: cast back.)
pub(crate) const COST_SUMS: &str = "CAST(SUM(calls) AS BIGINT), \
     CAST(SUM(unpriced_calls) AS BIGINT), CAST(SUM(cost_usd) AS DOUBLE PRECISION), \
     CAST(SUM(input_tokens) AS BIGINT), CAST(SUM(output_tokens) AS BIGINT), \
     CAST(SUM(thinking_tokens) AS BIGINT), CAST(SUM(cached_input_tokens) AS BIGINT), \
     CAST(SUM(total_tokens) AS BIGINT)";

/// A row of sums in [`COST_SUMS`]' order, behind a key.
pub(crate) type CostRow = (
    String,
    Option<i64>,
    Option<i64>,
    Option<f64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// The cost a row of sums says (key dropped).
pub(crate) fn cost_of(row: &CostRow) -> Cost {
    let n = |v: Option<i64>| v.unwrap_or(0);
    let unpriced = n(row.2);
    Cost {
        usd: row.3.unwrap_or(0.0),
        partial: unpriced > 0,
        calls: n(row.1),
        unpriced_calls: unpriced,
        tokens: TokenUsage {
            input_tokens: n(row.4),
            output_tokens: n(row.5),
            thinking_tokens: n(row.6),
            cached_input_tokens: n(row.7),
            total_tokens: n(row.8),
        },
    }
}

/// What one model cost one chain since the first call.
#[derive(Debug, Clone, PartialEq)]
pub struct CostTotal {
    /// The LLMProvider.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The chain.
    pub chain_id: String,
    /// Estimated US dollars (unpriced calls add nothing).
    pub usd: f64,
}

impl Store {
    /// What each model cost each chain since the first call (never lowered
    /// by retention: a counter).
    pub async fn cost_totals(&self) -> Result<Vec<CostTotal>> {
        let rows: Vec<(String, String, String, f64)> = self
            .db
            .fetch_all(Sql::new(
                "SELECT provider, model, chain_id, cost_usd FROM usage_totals \
                 ORDER BY provider, model, chain_id",
            ))
            .await?;
        Ok(rows
            .into_iter()
            .map(|(provider, model, chain_id, usd)| CostTotal {
                provider,
                model,
                chain_id,
                usd,
            })
            .collect())
    }

    /// What session `id` cost so far (none before its first LLM call).
    pub async fn session_cost(&self, id: &str) -> Result<Option<Cost>> {
        Ok(self.session_costs(&[id.to_string()]).await?.remove(id))
    }

    /// What each of `ids` cost so far; sessions without LLM calls are absent.
    pub async fn session_costs(&self, ids: &[String]) -> Result<HashMap<String, Cost>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let placeholders: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        let mut sql = Sql::dynamic(format!(
            "SELECT session_id, {COST_SUMS} FROM session_usage \
             WHERE session_id IN ({}) GROUP BY session_id",
            placeholders.join(", ")
        ));
        for id in ids {
            sql = sql.bind(id.clone());
        }
        let rows: Vec<CostRow> = self.db.fetch_all(sql).await?;
        Ok(rows.iter().map(|r| (r.0.clone(), cost_of(r))).collect())
    }

    /// What the sessions of `scope` — and of its projects, `scope/...` —
    /// created at or after `since` cost: a scope's spend of the day.
    pub async fn scope_spend_since(&self, scope: &str, since: DateTime<Utc>) -> Result<f64> {
        let project = format!("{scope}/");
        let rows: Vec<(Option<f64>,)> = self
            .db
            .fetch_all(
                Sql::new(
                    "SELECT CAST(SUM(u.cost_usd) AS DOUBLE PRECISION) FROM session_usage u \
                     JOIN alert_sessions s ON s.id = u.session_id \
                     WHERE (s.memory_scope = $1 \
                            OR substr(s.memory_scope, 1, CAST($2 AS INTEGER)) = $3) \
                     AND s.created_at >= $4",
                )
                .bind(scope)
                .bind(i64::try_from(project.chars().count()).unwrap_or(i64::MAX))
                .bind(project)
                .bind(since),
            )
            .await?;
        Ok(rows.first().and_then(|r| r.0).unwrap_or(0.0))
    }

    /// Says why pending session `id` waits (`None`: it no longer does).
    /// Written only when it changes; a session that is no longer pending
    /// is left alone.
    pub async fn hold_session(&self, id: &str, reason: Option<&str>) -> Result<()> {
        self.db
            .execute(
                Sql::new(
                    "UPDATE alert_sessions SET hold_reason = $2 WHERE id = $1 AND status = 'pending' \
                     AND COALESCE(hold_reason, '') <> COALESCE($2, '')",
                )
                .bind(id)
                .bind(reason),
            )
            .await?;
        Ok(())
    }

    /// What each execution of session `session_id` cost, by execution id
    /// (calls outside executions, the executive summary's, are the
    /// session's alone).
    pub async fn execution_costs(&self, session_id: &str) -> Result<HashMap<String, Cost>> {
        // The interactions' own columns, summed as session_usage sums them.
        let sql = Sql::dynamic(format!(
            "SELECT execution_id, {COST_SUMS} FROM (SELECT execution_id, 1 AS calls, \
             CASE WHEN cost_usd IS NULL AND COALESCE(total_tokens, 0) > 0 THEN 1 ELSE 0 END \
             AS unpriced_calls, cost_usd, input_tokens, output_tokens, thinking_tokens, \
             cached_input_tokens, total_tokens FROM llm_interactions \
             WHERE session_id = $1 AND execution_id IS NOT NULL) calls GROUP BY execution_id"
        ))
        .bind(session_id);
        let rows: Vec<CostRow> = self.db.fetch_all(sql).await?;
        Ok(rows.iter().map(|r| (r.0.clone(), cost_of(r))).collect())
    }
}
