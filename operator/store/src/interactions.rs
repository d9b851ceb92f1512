//! LLM and MCP interaction records, and the trace view built from them.

use std::collections::HashMap;

use tarsy_core::{NewLlmInteraction, NewMcpInteraction};

use crate::Store;
use crate::db::{Sql, new_id, now};
use crate::error::{Result, StoreError, is_foreign_key_violation};
use crate::model::{
    AgentExecution, LlmInteraction, LlmInteractionSummary, McpInteraction, McpInteractionSummary,
    SessionTrace, Stage, TraceExecution, TraceStage,
};

/// The tail of a record's insert that returns it, and nothing when an
/// earlier attempt of the same call already stored it (same id).
pub(crate) const INSERTED: &str = " ON CONFLICT (id) DO NOTHING RETURNING *";

/// The insert of one LLM interaction record under `id`, `tail` appended
/// (a `RETURNING` clause, or an `ON CONFLICT` clause inside a batch).
pub(crate) fn insert_llm_interaction(new: NewLlmInteraction, id: String, tail: &str) -> Sql {
    let usage = new.usage;
    Sql::dynamic(format!(
        "INSERT INTO llm_interactions (id, session_id, stage_id, execution_id, interaction_type, \
         provider, model, last_message_id, llm_request, llm_response, thinking_content, \
         response_text, input_tokens, output_tokens, total_tokens, thinking_tokens, \
         cached_input_tokens, cost_usd, duration_ms, error_message, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
         $19, $20, $21){tail}"
    ))
    .bind(id)
    .bind(new.scope.session_id)
    .bind(new.scope.stage_id)
    .bind(new.scope.execution_id)
    .bind(new.interaction_type.as_str())
    .bind(new.provider)
    .bind(new.model)
    .bind(new.last_message_id)
    .bind(new.llm_request)
    .bind(new.llm_response)
    .bind(new.thinking_content)
    .bind(new.response_text)
    .bind(usage.map(|u| u.input_tokens))
    .bind(usage.map(|u| u.output_tokens))
    .bind(usage.map(|u| u.total_tokens))
    .bind(usage.map(|u| u.thinking_tokens))
    .bind(usage.map(|u| u.cached_input_tokens))
    .bind(new.cost_usd)
    .bind(new.duration_ms)
    .bind(new.error_message)
    .bind(now())
}

/// The insert of one MCP interaction record under `id`, `tail` appended
/// (a `RETURNING` clause, or an `ON CONFLICT` clause inside a batch).
pub(crate) fn insert_mcp_interaction(new: &NewMcpInteraction, id: String, tail: &str) -> Sql {
    Sql::dynamic(format!(
        "INSERT INTO mcp_interactions (id, session_id, stage_id, execution_id, interaction_type, \
         server_name, tool_name, tool_arguments, tool_result, available_tools, duration_ms, \
         error_message, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13){tail}"
    ))
    .bind(id)
    .bind(&new.scope.session_id)
    .bind(new.scope.stage_id.clone())
    .bind(new.scope.execution_id.clone())
    .bind(new.interaction_type.as_str())
    .bind(new.server_name.clone())
    .bind(new.tool_name.clone())
    .bind(new.tool_arguments.clone())
    .bind(new.tool_result.clone())
    .bind(new.available_tools.clone())
    .bind(new.duration_ms)
    .bind(new.error_message.clone())
    .bind(now())
}

const LLM: &str = "LLM interaction";
const MCP: &str = "MCP interaction";

const LLM_SUMMARY_COLUMNS: &str = "id, session_id, stage_id, execution_id, interaction_type, provider, \
     model, input_tokens, output_tokens, total_tokens, thinking_tokens, cached_input_tokens, cost_usd, \
     duration_ms, error_message, created_at";
const MCP_SUMMARY_COLUMNS: &str = "id, session_id, stage_id, execution_id, interaction_type, \
     server_name, tool_name, duration_ms, error_message, created_at";

impl Store {
    /// Records an LLM call and returns it.
    pub async fn create_llm_interaction(&self, new: NewLlmInteraction) -> Result<LlmInteraction> {
        let scope = new.scope.clone();
        let id = new_id();
        let result = self
            .db
            .fetch_optional::<LlmInteraction>(insert_llm_interaction(new, id.clone(), INSERTED))
            .await;
        match result {
            Ok(Some(r)) => Ok(r),
            // Stored by an earlier attempt of this call.
            Ok(None) => self.get_llm_interaction(&id).await,
            Err(e) if is_foreign_key_violation(&e) => {
                self.require_scope(&scope).await?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Records an MCP call and returns it.
    pub async fn create_mcp_interaction(&self, new: NewMcpInteraction) -> Result<McpInteraction> {
        let id = new_id();
        let result = self
            .db
            .fetch_optional::<McpInteraction>(insert_mcp_interaction(&new, id.clone(), INSERTED))
            .await;
        match result {
            Ok(Some(r)) => Ok(r),
            // Stored by an earlier attempt of this call.
            Ok(None) => self.get_mcp_interaction(&id).await,
            Err(e) if is_foreign_key_violation(&e) => {
                self.require_scope(&new.scope).await?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// One LLM interaction with its request and response (trace level 2).
    pub async fn get_llm_interaction(&self, id: &str) -> Result<LlmInteraction> {
        self.db
            .fetch_optional(Sql::new("SELECT * FROM llm_interactions WHERE id = $1").bind(id))
            .await?
            .ok_or_else(|| StoreError::not_found(LLM, id))
    }

    /// One MCP interaction with arguments, result and tool list (trace level 2).
    pub async fn get_mcp_interaction(&self, id: &str) -> Result<McpInteraction> {
        self.db
            .fetch_optional(Sql::new("SELECT * FROM mcp_interactions WHERE id = $1").bind(id))
            .await?
            .ok_or_else(|| StoreError::not_found(MCP, id))
    }

    /// Every MCP interaction of a session, with arguments, results and tool
    /// lists, in the order they were recorded (what a fixture is exported
    /// from).
    pub async fn session_mcp_interactions(&self, session_id: &str) -> Result<Vec<McpInteraction>> {
        self.require_session(session_id).await?;
        self.db
            .fetch_all(
                Sql::new(
                    "SELECT * FROM mcp_interactions WHERE session_id = $1 ORDER BY created_at, id",
                )
                .bind(session_id),
            )
            .await
    }

    /// The trace list of a session (trace level 1): stage → execution →
    /// LLM and MCP calls in time order; calls outside any stage separately.
    pub async fn session_trace(&self, session_id: &str) -> Result<SessionTrace> {
        self.require_session(session_id).await?;
        let stages: Vec<Stage> = self
            .db
            .fetch_all(
                Sql::new("SELECT * FROM stages WHERE session_id = $1 ORDER BY stage_index")
                    .bind(session_id),
            )
            .await?;
        let executions: Vec<AgentExecution> = self
            .db
            .fetch_all(
                Sql::new(
                    "SELECT * FROM agent_executions WHERE session_id = $1 ORDER BY agent_index",
                )
                .bind(session_id),
            )
            .await?;
        let llm: Vec<LlmInteractionSummary> = self
            .db
            .fetch_all(
                Sql::dynamic(format!(
                    "SELECT {LLM_SUMMARY_COLUMNS} FROM llm_interactions WHERE session_id = $1 \
                     ORDER BY created_at, id"
                ))
                .bind(session_id),
            )
            .await?;
        let mcp: Vec<McpInteractionSummary> = self
            .db
            .fetch_all(
                Sql::dynamic(format!(
                    "SELECT {MCP_SUMMARY_COLUMNS} FROM mcp_interactions WHERE session_id = $1 \
                     ORDER BY created_at, id"
                ))
                .bind(session_id),
            )
            .await?;

        // Group in memory: four indexed queries instead of one per execution.
        let mut by_execution: HashMap<String, TraceExecution> = executions
            .iter()
            .map(|e| {
                (
                    e.id.clone(),
                    TraceExecution {
                        execution_id: e.id.clone(),
                        agent_name: e.agent_name.clone(),
                        agent_index: e.agent_index,
                        llm_interactions: Vec::new(),
                        mcp_interactions: Vec::new(),
                    },
                )
            })
            .collect();
        let mut session_interactions = Vec::new();
        for item in llm {
            match item
                .scope
                .execution_id
                .as_ref()
                .and_then(|id| by_execution.get_mut(id))
            {
                Some(group) => group.llm_interactions.push(item),
                None => session_interactions.push(item),
            }
        }
        for item in mcp {
            if let Some(group) = item
                .scope
                .execution_id
                .as_ref()
                .and_then(|id| by_execution.get_mut(id))
            {
                group.mcp_interactions.push(item);
            }
        }
        let stages = stages
            .into_iter()
            .map(|stage| TraceStage {
                executions: executions
                    .iter()
                    .filter(|e| e.stage_id == stage.id)
                    .filter_map(|e| by_execution.remove(&e.id))
                    .collect(),
                stage_id: stage.id,
                stage_name: stage.stage_name,
                stage_index: stage.stage_index,
            })
            .collect();
        Ok(SessionTrace {
            stages,
            session_interactions,
        })
    }
}
