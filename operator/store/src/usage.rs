//! What the usage page aggregates over a window of sessions: totals, cost
//! by model, alert type, chain and scope, and the sessions that cost most.
//! Three indexed passes over the window: the sessions' own rows (counts by
//! alert type, chain and scope), their usage rows by model and dimension
//! (a few hundred groups at most, folded here), and the top sessions.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tarsy_core::{Cost, SessionStatus};

use crate::Store;
use crate::costs::{COST_SUMS, cost_of};
use crate::db::Sql;
use crate::error::{Result, StoreError};

/// How many sessions the usage page lists as the costliest.
pub const TOP_SESSIONS: i64 = 20;

/// What the top sessions are ranked by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UsageRank {
    /// Estimated cost.
    #[default]
    Cost,
    /// Total tokens.
    Tokens,
}

/// Which sessions the usage page sums: those created in `[from, to)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageFilter {
    /// First instant of the window.
    pub from: DateTime<Utc>,
    /// First instant after the window.
    pub to: DateTime<Utc>,
    /// What the top sessions are ranked by.
    pub rank: UsageRank,
}

/// The usage of one value of a breakdown (a model, an alert type, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageGroup {
    /// The value: the model, alert type, chain or scope.
    pub key: String,
    /// The LLMProvider (model breakdown only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Sessions of the window with this value.
    pub sessions: i64,
    /// What their LLM calls cost.
    pub cost: Cost,
}

/// A session of the top list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageSession {
    /// Session id.
    pub session_id: String,
    /// Its alert type.
    pub alert_type: String,
    /// Its chain.
    pub chain_id: String,
    /// Its status.
    pub status: SessionStatus,
    /// Submitted.
    pub created_at: DateTime<Utc>,
    /// What its LLM calls cost.
    pub cost: Cost,
}

/// The usage of a window of sessions.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageSummary {
    /// Sessions created in the window (hidden ones included: they were paid for).
    pub sessions: i64,
    /// What their LLM calls cost; `cost.partial` and `cost.unpriced_calls`
    /// say how complete the estimate is.
    pub cost: Cost,
    /// By model (and LLMProvider), costliest first.
    pub by_model: Vec<UsageGroup>,
    /// By alert type, costliest first.
    pub by_alert_type: Vec<UsageGroup>,
    /// By chain, costliest first.
    pub by_chain: Vec<UsageGroup>,
    /// By scope (cluster: namespace[/project]; local: project), costliest first.
    pub by_scope: Vec<UsageGroup>,
    /// The [`TOP_SESSIONS`] sessions that cost most (or used most tokens).
    pub top_sessions: Vec<UsageSession>,
}

/// A row of the grouped usage: provider, model, alert type, chain, scope,
/// sessions, then the sums of [`COST_SUMS`].
type ComboRow = (
    String,
    String,
    String,
    String,
    Option<String>,
    i64,
    Option<i64>,
    Option<i64>,
    Option<f64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// The scope a session without one (stored before scopes) is listed under.
const NO_SCOPE: &str = "";

impl Store {
    /// The usage of the sessions created in `filter`'s window.
    pub async fn usage_summary(&self, filter: &UsageFilter) -> Result<UsageSummary> {
        if filter.from >= filter.to {
            return Err(StoreError::InvalidInput(
                "the window must end after it starts".into(),
            ));
        }
        let window = "s.created_at >= $1 AND s.created_at < $2";
        let bind = |sql: Sql| sql.bind(filter.from).bind(filter.to);

        // The three passes at once (each its own connection): sessions by
        // alert type, chain and scope from their own rows; their usage rows
        // by model and dimension (few groups, folded here); the top sessions.
        let counts = self
            .db
            .fetch_all::<(String, String, Option<String>, i64)>(bind(Sql::dynamic(format!(
                "SELECT s.alert_type, s.chain_id, s.memory_scope, COUNT(*) FROM alert_sessions s \
                 WHERE {window} GROUP BY s.alert_type, s.chain_id, s.memory_scope"
            ))));
        let combos = self.db.fetch_all::<ComboRow>(bind(Sql::dynamic(format!(
            "SELECT provider, model, s.alert_type, s.chain_id, s.memory_scope, \
             COUNT(DISTINCT u.session_id), {COST_SUMS} \
             FROM session_usage u JOIN alert_sessions s ON s.id = u.session_id \
             WHERE {window} \
             GROUP BY provider, model, s.alert_type, s.chain_id, s.memory_scope"
        ))));
        let (counts, combos, top_sessions) =
            tokio::try_join!(counts, combos, self.top_sessions(filter, window))?;
        let mut by_alert_type = Groups::default();
        let mut by_chain = Groups::default();
        let mut by_scope = Groups::default();
        let mut sessions = 0;
        for (alert_type, chain, scope, n) in counts {
            sessions += n;
            by_alert_type.count(alert_type, n);
            by_chain.count(chain, n);
            by_scope.count(scope.unwrap_or_else(|| NO_SCOPE.into()), n);
        }

        let mut total = Cost::default();
        let mut by_model: BTreeMap<(String, String), UsageGroup> = BTreeMap::new();
        for row in combos {
            let (provider, model, alert_type, chain, scope, n) =
                (row.0, row.1, row.2, row.3, row.4, row.5);
            let cost = cost_of(&(
                String::new(),
                row.6,
                row.7,
                row.8,
                row.9,
                row.10,
                row.11,
                row.12,
                row.13,
            ));
            total.add(&cost);
            by_alert_type.add(alert_type, &cost);
            by_chain.add(chain, &cost);
            by_scope.add(scope.unwrap_or_else(|| NO_SCOPE.into()), &cost);
            let group = by_model
                .entry((provider.clone(), model.clone()))
                .or_insert_with(|| UsageGroup {
                    key: model,
                    provider: Some(provider),
                    sessions: 0,
                    cost: Cost::default(),
                });
            // A session belongs to one alert type, chain and scope: its
            // counts in different combinations are different sessions.
            group.sessions += n;
            group.cost.add(&cost);
        }

        Ok(UsageSummary {
            sessions,
            cost: total,
            by_model: ranked(by_model.into_values().collect()),
            by_alert_type: by_alert_type.ranked(),
            by_chain: by_chain.ranked(),
            by_scope: by_scope.ranked(),
            top_sessions,
        })
    }

    async fn top_sessions(&self, filter: &UsageFilter, window: &str) -> Result<Vec<UsageSession>> {
        let order = match filter.rank {
            UsageRank::Cost => "SUM(u.cost_usd)",
            UsageRank::Tokens => "SUM(u.total_tokens)",
        };
        let top: Vec<(String, f64)> = self
            .db
            .fetch_all(
                Sql::dynamic(format!(
                    "SELECT u.session_id, CAST({order} AS DOUBLE PRECISION) \
                     FROM session_usage u JOIN alert_sessions s ON s.id = u.session_id \
                     WHERE {window} GROUP BY u.session_id \
                     ORDER BY 2 DESC, u.session_id LIMIT $3"
                ))
                .bind(filter.from)
                .bind(filter.to)
                .bind(TOP_SESSIONS),
            )
            .await?;
        let ids: Vec<String> = top.into_iter().map(|(id, _)| id).collect();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut costs = self.session_costs(&ids).await?;
        let placeholders: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        let mut sql = Sql::dynamic(format!(
            "SELECT id, alert_type, chain_id, status, created_at FROM alert_sessions \
             WHERE id IN ({})",
            placeholders.join(", ")
        ));
        for id in &ids {
            sql = sql.bind(id.clone());
        }
        let rows: Vec<(String, String, String, String, DateTime<Utc>)> =
            self.db.fetch_all(sql).await?;
        let mut by_id: BTreeMap<String, UsageSession> = BTreeMap::new();
        for (id, alert_type, chain_id, status, created_at) in rows {
            let status = status
                .parse::<SessionStatus>()
                .map_err(|e| StoreError::InvalidInput(e.to_string()))?;
            let cost = costs.remove(&id).unwrap_or_default();
            by_id.insert(
                id.clone(),
                UsageSession {
                    session_id: id,
                    alert_type,
                    chain_id,
                    status,
                    created_at,
                    cost,
                },
            );
        }
        // In the ranking's order.
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }
}

/// One breakdown being built, by key.
#[derive(Default)]
struct Groups(BTreeMap<String, UsageGroup>);

impl Groups {
    fn entry(&mut self, key: String) -> &mut UsageGroup {
        self.0.entry(key.clone()).or_insert_with(|| UsageGroup {
            key,
            provider: None,
            sessions: 0,
            cost: Cost::default(),
        })
    }

    fn count(&mut self, key: String, sessions: i64) {
        self.entry(key).sessions += sessions;
    }

    fn add(&mut self, key: String, cost: &Cost) {
        self.entry(key).cost.add(cost);
    }

    fn ranked(self) -> Vec<UsageGroup> {
        ranked(self.0.into_values().collect())
    }
}

/// Costliest first, then by key.
fn ranked(mut groups: Vec<UsageGroup>) -> Vec<UsageGroup> {
    groups.sort_by(|a, b| {
        b.cost
            .usd
            .total_cmp(&a.cost.usd)
            .then(b.cost.tokens.total_tokens.cmp(&a.cost.tokens.total_tokens))
            .then_with(|| a.key.cmp(&b.key))
    });
    groups
}
