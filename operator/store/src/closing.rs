//! What an ended session may have left open, closed: an execution that
//! ended without recording its end (its process died, its store writes
//! failed) leaves `streaming` timeline events and a non-terminal execution
//! behind. Once the session is over nobody will close them, so the session's
//! end does, with the reason on the timeline.

use serde_json::json;
use tarsy_core::{ExecutionStatus, TimelineEventStatus, TimelineEventType};

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

impl Store {
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
