//! Alert sessions: creation, the claim queue, progress, outcome, listing,
//! soft deletion and retention.

use chrono::{DateTime, Utc};
use tarsy_core::{InvalidAlert, MAX_ALERT_DATA_BYTES, SessionEndReason, SessionStatus};

use crate::db::{Sql, like_pattern, normalize_time, now};
use crate::error::{Result, StoreError};
use crate::model::{Created, NewSession, Session, SessionFilter, SessionOutcome, SessionPage};
use crate::{SessionSummary, Store};

const KIND: &str = "session";
const DEFAULT_PAGE: i64 = 20;
const MAX_PAGE: i64 = 1000;

/// Assignment that enters a finished session into review (`$2` is its new
/// status): `needs_review`, or `reviewed` for a cancelled one (nothing to
/// review). A review already under way is kept.
const ENTER_REVIEW: &str = "review_status = CASE \
     WHEN $2 IN ('completed', 'failed', 'timed_out') THEN COALESCE(review_status, 'needs_review') \
     WHEN $2 = 'cancelled' THEN COALESCE(review_status, 'reviewed') \
     ELSE review_status END";

const SUMMARY_COLUMNS: &str = "id, alert_type, chain_id, status, author, executive_summary, \
     error_message, end_reason, hold_reason, current_stage_index, pod_id, created_at, started_at, completed_at, deleted_at, \
     score_status, score, score_failure_tags, review_status, review_assignee, review_rating";

impl Store {
    /// Creates a pending session with the caller's id. Creating an id that
    /// exists returns the stored session unchanged (`created: false`): the
    /// operator may run its reconcile twice.
    pub async fn create_session(&self, new: NewSession) -> Result<Created<Session>> {
        if new.id.trim().is_empty() {
            return Err(StoreError::InvalidInput("session id is empty".into()));
        }
        // The last guard of the column; submissions were checked already.
        if new.alert_data.len() > MAX_ALERT_DATA_BYTES {
            return Err(StoreError::InvalidInput(
                InvalidAlert::DataTooLarge {
                    bytes: new.alert_data.len(),
                }
                .to_string(),
            ));
        }
        let inserted = self
            .db
            .execute(
                Sql::new(
                    "INSERT INTO alert_sessions \
                     (id, alert_data, alert_type, chain_id, status, author, runbook_url, mcp_selection, \
                      memory_scope, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING",
                )
                .bind(&new.id)
                .bind(new.alert_data)
                .bind(new.alert_type)
                .bind(new.chain_id)
                .bind(SessionStatus::Pending.as_str())
                .bind(new.author)
                .bind(new.runbook_url)
                .bind(new.mcp_selection)
                .bind(new.memory_scope)
                .bind(now()),
            )
            .await?;
        let record = self.get_session(&new.id).await?;
        Ok(Created {
            record,
            created: inserted == 1,
        })
    }

    /// The memory scope of a session (`None`: it learns and recalls
    /// nothing). Not found for an unknown session.
    pub async fn session_memory_scope(&self, id: &str) -> Result<Option<String>> {
        self.db
            .fetch_optional::<(Option<String>,)>(
                Sql::new("SELECT memory_scope FROM alert_sessions WHERE id = $1").bind(id),
            )
            .await?
            .map(|(scope,)| scope)
            .ok_or_else(|| StoreError::not_found(KIND, id))
    }

    /// The session with this id (soft-deleted ones included).
    pub async fn get_session(&self, id: &str) -> Result<Session> {
        self.db
            .fetch_optional(Sql::new("SELECT * FROM alert_sessions WHERE id = $1").bind(id))
            .await?
            .ok_or_else(|| StoreError::not_found(KIND, id))
    }

    /// Fails with not-found unless the session exists.
    pub(crate) async fn require_session(&self, id: &str) -> Result<()> {
        let n = self
            .db
            .fetch_i64(Sql::new("SELECT COUNT(*) FROM alert_sessions WHERE id = $1").bind(id))
            .await?;
        if n == 0 {
            return Err(StoreError::not_found(KIND, id));
        }
        Ok(())
    }

    /// One page of sessions matching `filter`, newest first, with the total
    /// count of matches.
    pub async fn list_sessions(&self, filter: &SessionFilter) -> Result<SessionPage> {
        let limit = filter.limit.unwrap_or(DEFAULT_PAGE);
        let offset = filter.offset.unwrap_or(0);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(StoreError::InvalidInput(format!(
                "page size {limit} is outside 1..={MAX_PAGE}"
            )));
        }
        if offset < 0 {
            return Err(StoreError::InvalidInput(format!(
                "offset {offset} is negative"
            )));
        }

        // Assemble the WHERE clause from constant fragments; values are bound.
        let mut clauses: Vec<String> = Vec::new();
        let mut args: Vec<String> = Vec::new();
        let param = |value: String, args: &mut Vec<String>| {
            args.push(value);
            format!("${}", args.len())
        };
        if !filter.include_deleted {
            clauses.push("deleted_at IS NULL".into());
        }
        if !filter.statuses.is_empty() {
            let list: Vec<String> = filter
                .statuses
                .iter()
                .map(|s| param(s.as_str().to_string(), &mut args))
                .collect();
            clauses.push(format!("status IN ({})", list.join(", ")));
        }
        if let Some(v) = &filter.alert_type {
            clauses.push(format!("alert_type = {}", param(v.clone(), &mut args)));
        }
        if let Some(v) = &filter.chain_id {
            clauses.push(format!("chain_id = {}", param(v.clone(), &mut args)));
        }
        if let Some(v) = &filter.author {
            clauses.push(format!("author = {}", param(v.clone(), &mut args)));
        }
        if let Some(text) = filter.search.as_deref().filter(|t| !t.is_empty()) {
            let p = param(like_pattern(text), &mut args);
            let like = self.db.dialect().ilike();
            clauses.push(format!(
                "(id {like} {p} ESCAPE '\\' OR alert_type {like} {p} ESCAPE '\\' \
                 OR alert_data {like} {p} ESCAPE '\\' \
                 OR COALESCE(final_analysis, '') {like} {p} ESCAPE '\\' \
                 OR COALESCE(executive_summary, '') {like} {p} ESCAPE '\\')"
            ));
        }
        if let Some(v) = filter.review_status {
            clauses.push(format!(
                "review_status = {}",
                param(v.as_str().to_string(), &mut args)
            ));
        }
        if let Some(v) = &filter.assignee {
            clauses.push(format!("review_assignee = {}", param(v.clone(), &mut args)));
        }
        if let Some(v) = filter.rating {
            clauses.push(format!(
                "review_rating = {}",
                param(v.as_str().to_string(), &mut args)
            ));
        }
        // Scores are small integers from a closed range: written inline.
        if let Some(min) = filter.score_min {
            clauses.push(format!("score >= {min}"));
        }
        if let Some(max) = filter.score_max {
            clauses.push(format!("score <= {max}"));
        }
        if let Some(tag) = &filter.failure_tag {
            let p = param(tag.clone(), &mut args);
            clauses.push(
                self.db
                    .dialect()
                    .json_array_contains("score_failure_tags", &p),
            );
        }
        if filter.needs_attention {
            // Constant SQL: the statuses are fixed words, not input.
            clauses.push(
                "(status IN ('failed', 'timed_out') OR (status = 'completed' AND \
                 (executive_summary_error IS NOT NULL OR EXISTS (SELECT 1 FROM agent_executions e \
                  WHERE e.session_id = alert_sessions.id AND e.kind <> 'chat' \
                  AND e.status IN ('failed', 'timed_out')))))"
                    .into(),
            );
        }
        let where_sql = if clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", clauses.join(" AND "))
        };

        let mut count = Sql::dynamic(format!("SELECT COUNT(*) FROM alert_sessions{where_sql}"));
        for a in &args {
            count = count.bind(a);
        }
        let total = self.db.fetch_i64(count).await?;

        // The column comes from a closed enum, never from input text.
        let column = filter.sort.key.as_str();
        let direction = if filter.sort.descending {
            "DESC"
        } else {
            "ASC"
        };
        let mut page = Sql::dynamic(format!(
            "SELECT {SUMMARY_COLUMNS} FROM alert_sessions{where_sql} \
             ORDER BY {column} {direction} NULLS LAST, id {direction} LIMIT ${} OFFSET ${}",
            args.len() + 1,
            args.len() + 2
        ));
        for a in args {
            page = page.bind(a);
        }
        let mut sessions: Vec<SessionSummary> =
            self.db.fetch_all(page.bind(limit).bind(offset)).await?;
        let ids: Vec<String> = sessions.iter().map(|s| s.id.clone()).collect();
        let mut costs = self.session_costs(&ids).await?;
        for session in &mut sessions {
            session.cost = costs.remove(&session.id);
        }
        Ok(SessionPage {
            sessions,
            total,
            limit,
            offset,
        })
    }

    /// Claims the oldest pending session for worker `pod_id`: it becomes
    /// in_progress, owned by the pod, started now. Concurrent claimers never
    /// receive the same session (Postgres skips rows locked by another
    /// claimer; SQLite runs one writer at a time). `None` when nothing waits.
    pub async fn claim_next_pending_session(&self, pod_id: &str) -> Result<Option<Session>> {
        let at = now();
        let sql = format!(
            "UPDATE alert_sessions SET status = $1, pod_id = $2, started_at = $3, last_interaction_at = $3, \
             hold_reason = NULL \
             WHERE id = (SELECT id FROM alert_sessions WHERE status = $4 AND deleted_at IS NULL \
                         ORDER BY created_at, id LIMIT 1{}) \
               AND status = $4 \
             RETURNING *",
            self.db.dialect().skip_locked()
        );
        self.db
            .fetch_optional(
                Sql::dynamic(sql)
                    .bind(SessionStatus::InProgress.as_str())
                    .bind(pod_id)
                    .bind(at)
                    .bind(SessionStatus::Pending.as_str()),
            )
            .await
    }

    /// Sets the status. Entering in_progress stamps `started_at` (once); a
    /// terminal status stamps `completed_at`; every change counts as activity.
    pub async fn update_session_status(&self, id: &str, status: SessionStatus) -> Result<Session> {
        let at = now();
        let started = (status == SessionStatus::InProgress).then_some(at);
        let completed = status.is_terminal().then_some(at);
        self.db
            .fetch_optional(
                Sql::dynamic(format!(
                    "UPDATE alert_sessions SET status = $2, last_interaction_at = $3, \
                     started_at = COALESCE(started_at, $4), completed_at = COALESCE($5, completed_at), \
                     hold_reason = CASE WHEN $2 = 'pending' THEN hold_reason END, \
                     {ENTER_REVIEW} WHERE id = $1 RETURNING *",
                ))
                .bind(id)
                .bind(status.as_str())
                .bind(at)
                .bind(started)
                .bind(completed),
            )
            .await?
            .ok_or_else(|| StoreError::not_found(KIND, id))
    }

    /// Moves the session to `to` only if its status is one of `from` (e.g.
    /// cancel: in_progress → cancelling). Returns false when the session is in
    /// another status; not-found when it does not exist.
    pub async fn transition_session_status(
        &self,
        id: &str,
        from: &[SessionStatus],
        to: SessionStatus,
    ) -> Result<bool> {
        if from.is_empty() {
            return Err(StoreError::InvalidInput(
                "a status transition needs at least one source status".into(),
            ));
        }
        let at = now();
        let placeholders: Vec<String> = (0..from.len()).map(|i| format!("${}", i + 6)).collect();
        let mut sql = Sql::dynamic(format!(
            "UPDATE alert_sessions SET status = $2, last_interaction_at = $3, \
             started_at = COALESCE(started_at, $4), completed_at = COALESCE($5, completed_at), \
             hold_reason = CASE WHEN $2 = 'pending' THEN hold_reason END, \
             {ENTER_REVIEW} WHERE id = $1 AND status IN ({})",
            placeholders.join(", ")
        ))
        .bind(id)
        .bind(to.as_str())
        .bind(at)
        .bind((to == SessionStatus::InProgress).then_some(at))
        .bind(to.is_terminal().then_some(at));
        for s in from {
            sql = sql.bind(s.as_str());
        }
        if self.db.execute(sql).await? == 1 {
            return Ok(true);
        }
        self.require_session(id).await?;
        Ok(false)
    }

    /// Records which stage is running (dashboard progress).
    pub async fn update_session_progress(
        &self,
        id: &str,
        stage_index: i64,
        stage_id: &str,
    ) -> Result<()> {
        let n = self
            .db
            .execute(
                Sql::new(
                    "UPDATE alert_sessions SET current_stage_index = $2, current_stage_id = $3, \
                     last_interaction_at = $4 WHERE id = $1",
                )
                .bind(id)
                .bind(stage_index)
                .bind(stage_id)
                .bind(now()),
            )
            .await?;
        one_row(n, id)
    }

    /// Heartbeat: the owner is alive (orphan detection looks at this).
    pub async fn touch_session(&self, id: &str) -> Result<()> {
        let n = self
            .db
            .execute(
                Sql::new("UPDATE alert_sessions SET last_interaction_at = $2 WHERE id = $1")
                    .bind(id)
                    .bind(now()),
            )
            .await?;
        one_row(n, id)
    }

    /// Stores the end of a session: terminal status, final analysis,
    /// executive summary (or why it is missing) and error. A summary or
    /// summary error already stored is kept (it was stored whole when it
    /// was made; the caller may only hold a bounded copy).
    pub async fn finish_session(&self, id: &str, outcome: SessionOutcome) -> Result<Session> {
        if !outcome.status.is_terminal() {
            return Err(StoreError::InvalidInput(format!(
                "{} is not a terminal session status",
                outcome.status
            )));
        }
        let at = now();
        let cancelled = outcome.status == SessionStatus::Cancelled;
        let session = self
            .db
            .fetch_optional(
                Sql::dynamic(format!(
                    "UPDATE alert_sessions SET status = $2, final_analysis = $3, \
                     executive_summary = COALESCE(executive_summary, $4), \
                     executive_summary_error = COALESCE(executive_summary_error, $5), \
                     error_message = $6, completed_at = $7, \
                     last_interaction_at = $7, end_reason = $8, hold_reason = NULL, {ENTER_REVIEW} \
                     WHERE id = $1 RETURNING *",
                ))
                .bind(id)
                .bind(outcome.status.as_str())
                .bind(outcome.final_analysis)
                .bind(outcome.executive_summary)
                .bind(outcome.executive_summary_error)
                .bind(outcome.error_message)
                .bind(at)
                .bind(outcome.end_reason.map(SessionEndReason::as_str)),
            )
            .await?
            .ok_or_else(|| StoreError::not_found(KIND, id))
            .inspect(|s: &Session| {
                // Counted where every mode writes the end of a session.
                let took = s.started_at.and_then(|t| (at - t).to_std().ok());
                tarsy_telemetry::global().session_finished(s.status.as_str(), took);
            })?;
        if cancelled {
            self.auto_acknowledge(id, at).await?;
        }
        Ok(session)
    }

    /// Sets the executive summary or the reason it failed, independently of
    /// the status (the summary is produced after the last stage).
    pub async fn set_executive_summary(
        &self,
        id: &str,
        summary: Option<&str>,
        error: Option<&str>,
    ) -> Result<()> {
        let n = self
            .db
            .execute(
                Sql::new(
                    "UPDATE alert_sessions SET executive_summary = $2, executive_summary_error = $3 \
                     WHERE id = $1",
                )
                .bind(id)
                .bind(summary)
                .bind(error),
            )
            .await?;
        one_row(n, id)
    }

    /// How many sessions (not soft-deleted) have one of these statuses.
    pub async fn count_sessions_with_status(&self, statuses: &[SessionStatus]) -> Result<i64> {
        if statuses.is_empty() {
            return Ok(0);
        }
        let placeholders: Vec<String> = (1..=statuses.len()).map(|i| format!("${i}")).collect();
        let mut sql = Sql::dynamic(format!(
            "SELECT COUNT(*) FROM alert_sessions WHERE deleted_at IS NULL AND status IN ({})",
            placeholders.join(", ")
        ));
        for s in statuses {
            sql = sql.bind(s.as_str());
        }
        self.db.fetch_i64(sql).await
    }

    /// How many listed sessions each status has (every status, zeros
    /// included: a gauge that disappears reads as "no data").
    pub async fn count_sessions_by_status(&self) -> Result<Vec<(SessionStatus, i64)>> {
        let mut counts = Vec::with_capacity(SessionStatus::ALL.len());
        for status in SessionStatus::ALL {
            counts.push((*status, self.count_sessions_with_status(&[*status]).await?));
        }
        Ok(counts)
    }

    /// How many sessions are in progress (admission control).
    pub async fn count_in_progress(&self) -> Result<i64> {
        self.count_sessions_with_status(&[SessionStatus::InProgress])
            .await
    }

    /// Sessions in progress (or cancelling) whose owner has not shown
    /// activity since `stale_before`: their worker probably died.
    pub async fn find_orphaned_sessions(
        &self,
        stale_before: DateTime<Utc>,
    ) -> Result<Vec<Session>> {
        self.db
            .fetch_all(
                Sql::new(
                    "SELECT * FROM alert_sessions WHERE status IN ($1, $2) \
                     AND last_interaction_at IS NOT NULL AND last_interaction_at < $3 \
                     ORDER BY created_at, id",
                )
                .bind(SessionStatus::InProgress.as_str())
                .bind(SessionStatus::Cancelling.as_str())
                .bind(normalize_time(stale_before)),
            )
            .await
    }

    /// Makes `pod_id` the owner of running session `id` if it may take it:
    /// it owns it already, nobody does, or the owner's last sign of life is
    /// older than `stale_before`. Atomic: of several replicas sweeping at
    /// once, one wins. True when `pod_id` owns it now.
    pub async fn take_over_session(
        &self,
        id: &str,
        pod_id: &str,
        stale_before: DateTime<Utc>,
    ) -> Result<bool> {
        let n = self
            .db
            .execute(
                Sql::new(
                    "UPDATE alert_sessions SET pod_id = $2, last_interaction_at = $3 \
                     WHERE id = $1 AND status IN ($4, $5) AND deleted_at IS NULL \
                     AND (pod_id = $2 OR pod_id IS NULL OR last_interaction_at IS NULL \
                          OR last_interaction_at < $6)",
                )
                .bind(id)
                .bind(pod_id)
                .bind(now())
                .bind(SessionStatus::InProgress.as_str())
                .bind(SessionStatus::Cancelling.as_str())
                .bind(normalize_time(stale_before)),
            )
            .await?;
        Ok(n == 1)
    }

    /// Hides a session from lists (keeps its data until purged). Deleting a
    /// deleted session keeps the first deletion time.
    pub async fn soft_delete_session(&self, id: &str) -> Result<()> {
        let n = self
            .db
            .execute(
                Sql::new(
                    "UPDATE alert_sessions SET deleted_at = COALESCE(deleted_at, $2) WHERE id = $1",
                )
                .bind(id)
                .bind(now()),
            )
            .await?;
        one_row(n, id)
    }

    /// Undoes a soft delete.
    pub async fn restore_session(&self, id: &str) -> Result<()> {
        let n = self
            .db
            .execute(Sql::new("UPDATE alert_sessions SET deleted_at = NULL WHERE id = $1").bind(id))
            .await?;
        one_row(n, id)
    }

    /// Retention, step 1: soft-deletes, as of `now`, sessions that finished
    /// before `cutoff`. Returns how many were hidden.
    pub async fn soft_delete_sessions_completed_before(
        &self,
        cutoff: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<u64> {
        self.db
            .execute(
                Sql::new(
                    "UPDATE alert_sessions SET deleted_at = $1 \
                     WHERE deleted_at IS NULL AND completed_at IS NOT NULL AND completed_at < $2",
                )
                .bind(normalize_time(now))
                .bind(normalize_time(cutoff)),
            )
            .await
    }

    /// Retention, step 2: permanently removes sessions soft-deleted before
    /// `cutoff`, with everything below them (cascade) and their events.
    /// Returns how many sessions were removed.
    pub async fn purge_deleted_sessions(&self, cutoff: DateTime<Utc>) -> Result<u64> {
        let cutoff = normalize_time(cutoff);
        self.db
            .run("purge", || async {
                let mut tx = self.db.begin().await?;
                tx.execute(
                    Sql::new(
                        "DELETE FROM events WHERE session_id IN (SELECT id FROM alert_sessions \
                         WHERE deleted_at IS NOT NULL AND deleted_at < $1)",
                    )
                    .bind(cutoff),
                )
                .await?;
                let n = tx
                    .execute(
                        Sql::new(
                            "DELETE FROM alert_sessions WHERE deleted_at IS NOT NULL AND deleted_at < $1",
                        )
                        .bind(cutoff),
                    )
                    .await?;
                tx.commit().await?;
                Ok(n)
            })
            .await
    }
}

/// Maps "no row updated" to not-found.
fn one_row(affected: u64, id: &str) -> Result<()> {
    if affected == 0 {
        Err(StoreError::not_found(KIND, id))
    } else {
        Ok(())
    }
}
