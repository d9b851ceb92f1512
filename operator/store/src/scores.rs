//! The judge's scores of finished sessions. Every attempt is a row (a
//! re-score adds one); at most one attempt of a session runs at a time,
//! which a partial unique index enforces, so two concurrent starts cannot
//! both win. What a score means is `tarsy-scoring`'s business: this module
//! stores what it is given.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::types::Json;

pub use tarsy_core::ScoreStatus;

use crate::Store;
use crate::db::{Sql, new_id, now};
use crate::error::{Result, StoreError, is_foreign_key_violation, is_unique_violation};

const SCORE: &str = "session score";

/// One scoring attempt of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionScore {
    /// Attempt id.
    pub id: String,
    /// The session scored.
    pub session_id: String,
    /// 1 for the first attempt, then one more per re-score.
    pub attempt: u32,
    /// Where it stands.
    pub status: ScoreStatus,
    /// The scoring execution, once it has one.
    pub execution_id: Option<String>,
    /// The process running the attempt, when it says (local mode: its pod id).
    pub owner: Option<String>,
    /// 0–100 (completed attempts).
    pub score: Option<u8>,
    /// The judge's verdict on the outcome (completed attempts).
    pub outcome: Option<String>,
    /// Failure tags (completed attempts).
    pub failure_tags: Vec<String>,
    /// The judge's assessment (completed attempts).
    pub assessment: Option<String>,
    /// The judge's report on the tools, when it gave one.
    pub tool_report: Option<String>,
    /// Why a failed attempt failed.
    pub error: Option<String>,
    /// Started.
    pub created_at: DateTime<Utc>,
    /// Ended.
    pub completed_at: Option<DateTime<Utc>>,
}

/// What a completed attempt records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreResult {
    /// 0–100.
    pub score: u8,
    /// The verdict on the outcome.
    pub outcome: String,
    /// Failure tags.
    pub failure_tags: Vec<String>,
    /// The judge's assessment.
    pub assessment: String,
    /// The judge's report on the tools.
    pub tool_report: Option<String>,
}

macro_rules! score_from_row {
    ($row_ty:ty) => {
        impl<'r> sqlx::FromRow<'r, $row_ty> for SessionScore {
            fn from_row(row: &'r $row_ty) -> std::result::Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                let status: String = row.try_get("status")?;
                let attempt: i64 = row.try_get("attempt")?;
                let score: Option<i64> = row.try_get("score")?;
                let tags: Option<Json<Vec<String>>> = row.try_get("failure_tags")?;
                Ok(SessionScore {
                    id: row.try_get("id")?,
                    session_id: row.try_get("session_id")?,
                    attempt: u32::try_from(attempt).unwrap_or(0),
                    status: status
                        .parse::<ScoreStatus>()
                        .map_err(|e| sqlx::Error::Decode(e.into()))?,
                    execution_id: row.try_get("execution_id")?,
                    owner: row.try_get("owner")?,
                    score: score.and_then(|s| u8::try_from(s).ok()),
                    outcome: row.try_get("outcome")?,
                    failure_tags: tags.map(|t| t.0).unwrap_or_default(),
                    assessment: row.try_get("assessment")?,
                    tool_report: row.try_get("tool_report")?,
                    error: row.try_get("error")?,
                    created_at: row.try_get("created_at")?,
                    completed_at: row.try_get("completed_at")?,
                })
            }
        }
    };
}
score_from_row!(sqlx::postgres::PgRow);
score_from_row!(sqlx::sqlite::SqliteRow);

const COLUMNS: &str = "id, session_id, attempt, status, execution_id, owner, score, outcome, \
                       failure_tags, assessment, tool_report, error, created_at, completed_at";

impl Store {
    /// Starts the next scoring attempt of `session_id`, run by `owner` when
    /// it says. A conflict while another attempt of the session runs (also
    /// when two start at once: one wins); not found for an unknown session.
    pub async fn start_score_attempt(
        &self,
        session_id: &str,
        execution_id: Option<&str>,
        owner: Option<&str>,
    ) -> Result<SessionScore> {
        let id = new_id();
        let inserted = self
            .db
            .execute_batch(vec![
                Sql::new(
                    "INSERT INTO session_scores (id, session_id, attempt, status, execution_id, owner, created_at) \
                     SELECT $1, $2, COALESCE(MAX(attempt), 0) + 1, 'in_progress', $3, $4, $5 \
                     FROM session_scores WHERE session_id = $2",
                )
                .bind(id.as_str())
                .bind(session_id)
                .bind(execution_id)
                .bind(owner)
                .bind(now()),
                Sql::new("UPDATE alert_sessions SET score_status = 'in_progress' WHERE id = $1")
                    .bind(session_id),
            ])
            .await;
        match inserted {
            Ok(_) => {}
            Err(e) if is_foreign_key_violation(&e) => {
                return Err(StoreError::not_found("session", session_id));
            }
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::Conflict {
                    kind: SCORE,
                    message: format!("session {session_id:?} is being scored already"),
                });
            }
            Err(e) => return Err(e),
        }
        self.score_attempt(&id).await
    }

    /// Records the scoring execution of a running attempt.
    pub async fn set_score_execution(&self, id: &str, execution_id: &str) -> Result<()> {
        let n = self
            .db
            .execute(
                Sql::new("UPDATE session_scores SET execution_id = $2 WHERE id = $1")
                    .bind(id)
                    .bind(execution_id),
            )
            .await?;
        if n == 0 {
            return Err(StoreError::not_found(SCORE, id));
        }
        Ok(())
    }

    /// Ends a running attempt with its score. A conflict when the attempt
    /// has already ended.
    pub async fn complete_score(&self, id: &str, result: &ScoreResult) -> Result<SessionScore> {
        if result.score > 100 {
            return Err(StoreError::InvalidInput(format!(
                "score {} is not between 0 and 100",
                result.score
            )));
        }
        let tags = serde_json::json!(result.failure_tags);
        // The session's columns first: both statements see the attempt
        // still in progress (one snapshot on Postgres, in order on SQLite).
        let n = self
            .db
            .execute_batch(vec![
                Sql::new(
                    "UPDATE alert_sessions SET score_status = 'completed', score = $2, \
                     score_failure_tags = $3 \
                     WHERE id = (SELECT session_id FROM session_scores \
                                 WHERE id = $1 AND status = 'in_progress')",
                )
                .bind(id)
                .bind(i64::from(result.score))
                .bind(tags.clone()),
                Sql::new(
                    "UPDATE session_scores SET status = 'completed', score = $2, outcome = $3, \
                     failure_tags = $4, assessment = $5, tool_report = $6, completed_at = $7 \
                     WHERE id = $1 AND status = 'in_progress'",
                )
                .bind(id)
                .bind(i64::from(result.score))
                .bind(result.outcome.as_str())
                .bind(tags)
                .bind(result.assessment.as_str())
                .bind(result.tool_report.as_deref())
                .bind(now()),
            ])
            .await?;
        let attempt = self.ended(id, n).await?;
        if self.count_scores {
            let (chain, alert_type) = self.score_labels(&attempt.session_id).await;
            count_ended_score(&chain, &alert_type, &attempt);
        }
        Ok(attempt)
    }

    /// The chain and alert type a score is counted under. The attempt is
    /// stored already: a failed read leaves the labels empty rather than
    /// failing the call.
    async fn score_labels(&self, session_id: &str) -> (String, String) {
        let read = self
            .db
            .fetch_optional::<(String, String)>(
                Sql::new("SELECT chain_id, alert_type FROM alert_sessions WHERE id = $1")
                    .bind(session_id),
            )
            .await;
        match read {
            Ok(labels) => labels.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(session_id, error = %e, "cannot read the scored session's chain");
                Default::default()
            }
        }
    }

    /// Ends a running attempt without a score, saying why. A conflict when
    /// the attempt has already ended.
    pub async fn fail_score(&self, id: &str, error: &str) -> Result<SessionScore> {
        let n = self
            .db
            .execute_batch(vec![
                Sql::new(
                    "UPDATE alert_sessions SET score_status = 'failed' \
                     WHERE id = (SELECT session_id FROM session_scores \
                                 WHERE id = $1 AND status = 'in_progress')",
                )
                .bind(id),
                Sql::new(
                    "UPDATE session_scores SET status = 'failed', error = $2, completed_at = $3 \
                     WHERE id = $1 AND status = 'in_progress'",
                )
                .bind(id)
                .bind(error)
                .bind(now()),
            ])
            .await?;
        let attempt = self.ended(id, n).await?;
        if self.count_scores {
            count_ended_score("", "", &attempt);
        }
        Ok(attempt)
    }

    async fn ended(&self, id: &str, updated: u64) -> Result<SessionScore> {
        let attempt = self.score_attempt(id).await?;
        if updated == 0 {
            return Err(StoreError::Conflict {
                kind: SCORE,
                message: format!("attempt {id:?} has already ended ({:?})", attempt.status),
            });
        }
        Ok(attempt)
    }

    /// One attempt by id.
    pub async fn score_attempt(&self, id: &str) -> Result<SessionScore> {
        self.db
            .fetch_optional(
                Sql::dynamic(format!(
                    "SELECT {COLUMNS} FROM session_scores WHERE id = $1"
                ))
                .bind(id),
            )
            .await?
            .ok_or_else(|| StoreError::not_found(SCORE, id))
    }

    /// Every attempt of a session, newest first.
    pub async fn session_scores(&self, session_id: &str) -> Result<Vec<SessionScore>> {
        self.db
            .fetch_all(
                Sql::dynamic(format!(
                    "SELECT {COLUMNS} FROM session_scores WHERE session_id = $1 \
                     ORDER BY attempt DESC"
                ))
                .bind(session_id),
            )
            .await
    }

    /// The session's score: its latest completed attempt.
    pub async fn latest_score(&self, session_id: &str) -> Result<Option<SessionScore>> {
        self.db
            .fetch_optional(
                Sql::dynamic(format!(
                    "SELECT {COLUMNS} FROM session_scores \
                     WHERE session_id = $1 AND status = 'completed' \
                     ORDER BY attempt DESC LIMIT 1"
                ))
                .bind(session_id),
            )
            .await
    }

    /// The session's attempt in progress, if one is.
    pub async fn running_score(&self, session_id: &str) -> Result<Option<SessionScore>> {
        self.db
            .fetch_optional(
                Sql::dynamic(format!(
                    "SELECT {COLUMNS} FROM session_scores \
                     WHERE session_id = $1 AND status = 'in_progress'"
                ))
                .bind(session_id),
            )
            .await
    }

    /// Every attempt in progress, oldest first: what a process that
    /// starts again checks for attempts it left running.
    pub async fn running_scores(&self) -> Result<Vec<SessionScore>> {
        self.db
            .fetch_all(Sql::dynamic(format!(
                "SELECT {COLUMNS} FROM session_scores WHERE status = 'in_progress' \
                 ORDER BY created_at, id"
            )))
            .await
    }
}

/// Counts an ended scoring attempt in this process's metrics: its score
/// (under the session's `chain` and `alert_type`) and failure tags, or a
/// failed attempt. The store counts the attempts it ends (unless told not
/// to, [`Store::without_score_metrics`]); a cluster's operator counts those
/// its Alerts show ended.
pub fn count_ended_score(chain: &str, alert_type: &str, attempt: &SessionScore) {
    let metrics = tarsy_telemetry::global();
    match (attempt.status, attempt.score) {
        (ScoreStatus::Completed, Some(score)) => {
            metrics.session_scored(tarsy_telemetry::SessionScored {
                chain,
                alert_type,
                score,
                failure_tags: &attempt.failure_tags,
            })
        }
        (ScoreStatus::InProgress, _) => {}
        _ => metrics.scoring_failed(),
    }
}
