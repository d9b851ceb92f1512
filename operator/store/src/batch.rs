//! An iteration step's records in one transaction: the engine's writes that
//! follow each other without anything in between (an LLM call's record, the
//! completion of its events and the message that answers it; a tool result's
//! event completion, the MCP call's record and its message) go to the
//! database together, one commit and one round trip instead of one per
//! record.

use serde_json::Value;
use tarsy_core::{RecordWrite, TimelineEventStatus};

use crate::Store;
use crate::db::{Sql, new_id, now};
use crate::error::{Result, StoreError};
use crate::interactions::{insert_llm_interaction, insert_mcp_interaction};
use crate::timeline::metadata_object;

impl Store {
    /// Runs `writes` in order as one transaction and returns the ids they
    /// created (`None` for completions). When the transaction fails nothing
    /// is written and the writes are made one by one instead, so that a
    /// failure reads exactly as the single write's (a missing parent, a
    /// sequence number stored twice) and the writes before it are kept.
    pub async fn write_batch(&self, writes: Vec<RecordWrite>) -> Result<Vec<Option<String>>> {
        if writes.len() < 2 {
            return self.write_each(writes).await;
        }
        let mut statements = Vec::with_capacity(writes.len());
        let mut ids = Vec::with_capacity(writes.len());
        let mut completed = Vec::new();
        for w in &writes {
            let Some((sql, id)) = self.batch_statement(w)? else {
                // Not expressible in a batch: the slow path says why.
                return self.write_each(writes).await;
            };
            if let RecordWrite::CompleteEvent { event_id, .. } = w {
                completed.push(event_id.clone());
            }
            statements.push(sql);
            ids.push(id);
        }
        let expected = statements.len() as u64;
        match self.db.execute_batch(statements).await {
            Ok(n) if n == expected => Ok(ids),
            // Fewer rows: a completion matched no event (the batch is
            // committed, as the writes before a failed single completion
            // would be), or an attempt whose commit was not acknowledged
            // had stored the records already (inserts skip their ids).
            Ok(_) => {
                let missing = self.missing_events(&completed).await?;
                if missing.is_empty() {
                    Ok(ids)
                } else {
                    Err(StoreError::not_found(EVENT, missing.join(", ")))
                }
            }
            Err(_) => self.write_each(writes).await,
        }
    }

    /// Which of `ids` name no timeline event.
    async fn missing_events(&self, ids: &[String]) -> Result<Vec<String>> {
        let mut missing = Vec::new();
        for id in ids {
            match self.get_timeline_event(id).await {
                Ok(_) => {}
                Err(StoreError::NotFound { .. }) => missing.push(id.clone()),
                Err(e) => return Err(e),
            }
        }
        Ok(missing)
    }

    async fn write_each(&self, writes: Vec<RecordWrite>) -> Result<Vec<Option<String>>> {
        let mut ids = Vec::with_capacity(writes.len());
        for w in writes {
            ids.push(match w {
                RecordWrite::CreateEvent(e) => Some(self.create_timeline_event(e).await?.id),
                RecordWrite::CompleteEvent {
                    event_id,
                    content,
                    status,
                    metadata,
                } => {
                    self.complete_timeline_event(&event_id, &content, status, metadata)
                        .await?;
                    None
                }
                RecordWrite::Message(m) => Some(self.create_message(m).await?.id),
                RecordWrite::LlmInteraction(i) => Some(self.create_llm_interaction(i).await?.id),
                RecordWrite::McpInteraction(i) => Some(self.create_mcp_interaction(i).await?.id),
            });
        }
        Ok(ids)
    }

    /// The statement of one write (without `RETURNING`) and the id it
    /// creates; `None` when the write needs the single path's checks.
    fn batch_statement(&self, w: &RecordWrite) -> Result<Option<(Sql, Option<String>)>> {
        Ok(Some(match w {
            RecordWrite::CreateEvent(e) => {
                let id = new_id();
                let at = now();
                let sql = Sql::new(
                    "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number, \
                     event_type, status, content, metadata, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) \
                     ON CONFLICT (id) DO NOTHING",
                )
                .bind(id.clone())
                .bind(&e.scope.session_id)
                .bind(e.scope.stage_id.clone())
                .bind(e.scope.execution_id.clone())
                .bind(e.sequence_number)
                .bind(e.event_type.as_str())
                .bind(e.status.as_str())
                .bind(e.content.clone())
                .bind(metadata_object(e.metadata.clone())?)
                .bind(at);
                (sql, Some(id))
            }
            RecordWrite::CompleteEvent {
                event_id,
                content,
                status,
                metadata,
            } => {
                if *status == TimelineEventStatus::Streaming {
                    return Ok(None);
                }
                let sql = match metadata {
                    Some(patch) => Sql::dynamic(format!(
                        "UPDATE timeline_events SET content = $2, status = $3, updated_at = $4, \
                         metadata = {} WHERE id = $1",
                        self.db.dialect().merge_metadata(5)
                    ))
                    .bind(event_id)
                    .bind(content)
                    .bind(status.as_str())
                    .bind(now())
                    .bind(metadata_object(patch.clone())?),
                    None => Sql::new(
                        "UPDATE timeline_events SET content = $2, status = $3, updated_at = $4 \
                         WHERE id = $1",
                    )
                    .bind(event_id)
                    .bind(content)
                    .bind(status.as_str())
                    .bind(now()),
                };
                (sql, None)
            }
            RecordWrite::Message(m) => {
                let (Some(stage_id), Some(execution_id)) =
                    (&m.scope.stage_id, &m.scope.execution_id)
                else {
                    return Ok(None);
                };
                let tool_calls: Value = match serde_json::to_value(&m.tool_calls) {
                    Ok(v) => v,
                    Err(_) => return Ok(None),
                };
                let id = new_id();
                let sql = Sql::new(
                    "INSERT INTO messages (id, session_id, stage_id, execution_id, sequence_number, role, \
                     content, tool_calls, tool_call_id, tool_name, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                     ON CONFLICT (id) DO NOTHING",
                )
                .bind(id.clone())
                .bind(&m.scope.session_id)
                .bind(stage_id)
                .bind(execution_id)
                .bind(m.sequence_number)
                .bind(m.role.as_str())
                .bind(m.content.clone())
                .bind(tool_calls)
                .bind(m.tool_call_id.clone())
                .bind(m.tool_name.clone())
                .bind(now());
                (sql, Some(id))
            }
            RecordWrite::LlmInteraction(i) => {
                let id = new_id();
                let sql = insert_llm_interaction(i.clone(), id.clone(), IF_NEW);
                (sql, Some(id))
            }
            RecordWrite::McpInteraction(i) => {
                let id = new_id();
                let sql = insert_mcp_interaction(i, id.clone(), IF_NEW);
                (sql, Some(id))
            }
        }))
    }
}

const EVENT: &str = "timeline event";

/// Inside a batch, an insert that skips a record an earlier attempt of the
/// same batch stored (same id).
const IF_NEW: &str = " ON CONFLICT (id) DO NOTHING";
