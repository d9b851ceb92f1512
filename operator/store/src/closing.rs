//! What an ended session may have left open, closed: an execution that
//! ended without recording its end (its process died, its store writes
//! failed) leaves `streaming` timeline events and a non-terminal execution
//! behind. Once the session is over nobody will close them, so the session's
//! end does, with the reason on the timeline.

use serde_json::json;
use tarsy_core::{ExecutionStatus, SessionStatus, TimelineEventStatus, TimelineEventType};

use crate::Store;
use crate::db::{Sql, new_id, now};
use crate::error::Result;
use crate::model::{AgentExecution, Stage};

/// What [`Store::close_open_records`] closed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Closed {
    /// Timeline events that were still `streaming`.
    pub events: u64,
    /// Executions that were pending or active.
    pub executions: u64,
    /// Stages that were pending or active.
    pub stages: u64,
}

/// A record a terminal session still has open (see
/// [`Store::open_records_in_terminal_sessions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenRecord {
    /// The session.
    pub session_id: String,
    /// Its (terminal) status.
    pub session_status: String,
    /// `timeline_event`, `execution` or `stage`.
    pub kind: String,
    /// The record's id.
    pub id: String,
    /// The record's status (`streaming`, `pending`, `active`).
    pub status: String,
}

impl std::fmt::Display for OpenRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} is {} in {} session {}",
            self.kind, self.id, self.status, self.session_status, self.session_id
        )
    }
}

impl Store {
    /// Every record left open in a session that has ended: a `streaming`
    /// timeline event, a pending or active execution or stage. None should
    /// exist once nothing runs: a user would see a finished investigation
    /// still "working". A chat answer being given (a chat stage still
    /// pending or active, with its executions and events) is not open: a
    /// chat runs in an ended session by design; so does a judge (a scoring
    /// stage while its session has a scoring attempt in progress).
    pub async fn open_records_in_terminal_sessions(&self) -> Result<Vec<OpenRecord>> {
        let quoted = |v: &[&str]| {
            v.iter()
                .map(|s| format!("'{s}'"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let ended = quoted(
            &[
                SessionStatus::Completed,
                SessionStatus::Failed,
                SessionStatus::Cancelled,
                SessionStatus::TimedOut,
            ]
            .map(SessionStatus::as_str),
        );
        let open = quoted(
            &[ExecutionStatus::Pending, ExecutionStatus::Active].map(ExecutionStatus::as_str),
        );
        let streaming = TimelineEventStatus::Streaming.as_str();
        // Records of a chat answer or a judge still at work are left out.
        let judging = format!(
            "(st.stage_kind = '{scoring}' AND EXISTS (SELECT 1 FROM session_scores sc \
             WHERE sc.session_id = st.session_id AND sc.status = '{in_progress}'))",
            scoring = tarsy_core::StageKind::Scoring.as_str(),
            in_progress = tarsy_core::ScoreStatus::InProgress.as_str(),
        );
        let not_chatting =
            format!("NOT ((st.chat_id IS NOT NULL OR {judging}) AND st.status IN ({open}))");
        let rows: Vec<(String, String, String, String, String)> = self
            .db
            .fetch_all(Sql::dynamic(format!(
                "SELECT s.id, s.status, CAST('timeline_event' AS TEXT), t.id, t.status \
                 FROM timeline_events t JOIN alert_sessions s ON s.id = t.session_id \
                 LEFT JOIN stages st ON st.id = t.stage_id \
                 WHERE s.status IN ({ended}) AND t.status = '{streaming}' \
                 AND (st.id IS NULL OR {not_chatting}) \
                 UNION ALL \
                 SELECT s.id, s.status, CAST('execution' AS TEXT), e.id, e.status \
                 FROM agent_executions e JOIN alert_sessions s ON s.id = e.session_id \
                 JOIN stages st ON st.id = e.stage_id \
                 WHERE s.status IN ({ended}) AND e.status IN ({open}) AND {not_chatting} \
                 UNION ALL \
                 SELECT s.id, s.status, CAST('stage' AS TEXT), st.id, st.status \
                 FROM stages st JOIN alert_sessions s ON s.id = st.session_id \
                 WHERE s.status IN ({ended}) AND st.status IN ({open}) AND st.chat_id IS NULL \
                 AND NOT {judging} \
                 ORDER BY 1, 3, 4"
            )))
            .await?;
        Ok(rows
            .into_iter()
            .map(
                |(session_id, session_status, kind, id, status)| OpenRecord {
                    session_id,
                    session_status,
                    kind,
                    id,
                    status,
                },
            )
            .collect())
    }

    /// Closes the records of session `session_id` that are still open:
    /// `streaming` timeline events become `failed`; pending or active
    /// executions fail with `reason`, each with an `error` event saying so
    /// on its timeline; pending or active stages fail with `reason`. Called
    /// when the session ends; idempotent (a second call finds nothing).
    pub async fn close_open_records(&self, session_id: &str, reason: &str) -> Result<Closed> {
        let open = format!(
            "('{}', '{}')",
            ExecutionStatus::Pending.as_str(),
            ExecutionStatus::Active.as_str()
        );
        let executions: Vec<AgentExecution> = self
            .db
            .fetch_all(
                Sql::dynamic(format!(
                    "SELECT * FROM agent_executions WHERE session_id = $1 AND status IN {open} \
                     ORDER BY stage_id, agent_index"
                ))
                .bind(session_id),
            )
            .await?;
        let mut closed = Closed::default();
        for e in &executions {
            // The reason, last on the execution's own timeline.
            let next = self
                .db
                .fetch_i64(
                    Sql::new(
                        "SELECT COALESCE(MAX(sequence_number), 0) + 1 FROM timeline_events \
                         WHERE execution_id = $1",
                    )
                    .bind(&e.id),
                )
                .await?;
            let at = now();
            self.db
                .execute(
                    Sql::new(
                        "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, \
                         sequence_number, event_type, status, content, metadata, created_at, updated_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) \
                         ON CONFLICT (id) DO NOTHING",
                    )
                    .bind(new_id())
                    .bind(session_id)
                    .bind(e.stage_id.clone())
                    .bind(e.id.clone())
                    .bind(next)
                    .bind(TimelineEventType::Error.as_str())
                    .bind(TimelineEventStatus::Completed.as_str())
                    .bind(reason)
                    .bind(json!({"kind": "closed_at_session_end"}))
                    .bind(at),
                )
                .await?;
            self.update_agent_execution_status(&e.id, ExecutionStatus::Failed, Some(reason))
                .await?;
            closed.executions += 1;
        }
        closed.events = self
            .db
            .execute(
                Sql::new(
                    "UPDATE timeline_events SET status = $2, updated_at = $3 \
                     WHERE session_id = $1 AND status = $4",
                )
                .bind(session_id)
                .bind(TimelineEventStatus::Failed.as_str())
                .bind(now())
                .bind(TimelineEventStatus::Streaming.as_str()),
            )
            .await?;
        let stages: Vec<Stage> = self
            .db
            .fetch_all(
                Sql::dynamic(format!(
                    "SELECT * FROM stages WHERE session_id = $1 AND status IN {open}"
                ))
                .bind(session_id),
            )
            .await?;
        for s in &stages {
            self.update_stage_status(&s.id, ExecutionStatus::Failed, Some(reason))
                .await?;
            closed.stages += 1;
        }
        if closed != Closed::default() {
            tracing::warn!(
                session_id,
                events = closed.events,
                executions = closed.executions,
                stages = closed.stages,
                reason,
                "closed records the session left open"
            );
        }
        Ok(closed)
    }
}
