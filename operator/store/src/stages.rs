//! Stages and agent executions. A stage's outcome is decided by the chain
//! state machine (`tarsy_chain::aggregate_stage`) and stored as given.

use tarsy_core::{ExecutionStatus, StageKind};

use crate::Store;
use crate::db::{Sql, new_id, now};
use crate::error::{Result, StoreError, classify_insert, is_foreign_key_violation};
use crate::model::{AgentExecution, NewAgentExecution, NewStage, Stage};

const STAGE: &str = "stage";
const EXECUTION: &str = "agent execution";

impl Store {
    /// Creates a pending stage. With an explicit id that already exists, the
    /// stored stage is returned. A second stage at the same index of the same
    /// session is a conflict; an unknown session, chat or chat message is
    /// not-found.
    pub async fn create_stage(&self, new: NewStage) -> Result<Stage> {
        if new.stage_name.trim().is_empty() {
            return Err(StoreError::InvalidInput("stage name is empty".into()));
        }
        if (new.kind == StageKind::Chat) != new.chat_id.is_some() {
            return Err(StoreError::InvalidInput(format!(
                "a {} stage {} a chat",
                new.kind,
                if new.chat_id.is_some() {
                    "cannot belong to"
                } else {
                    "must belong to"
                }
            )));
        }
        if new.expected_agent_count < 1 {
            return Err(StoreError::InvalidInput(format!(
                "expected agent count {} must be at least 1",
                new.expected_agent_count
            )));
        }
        let id = new.id.clone().unwrap_or_else(new_id);
        let inserted = self
            .db
            .fetch_optional::<Stage>(
                Sql::new(
                    "INSERT INTO stages (id, session_id, stage_name, stage_kind, stage_index, \
                     expected_agent_count, parallel_type, success_policy, chat_id, \
                     chat_user_message_id, status, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                     ON CONFLICT (id) DO NOTHING RETURNING *",
                )
                .bind(&id)
                .bind(&new.session_id)
                .bind(new.stage_name)
                .bind(new.kind.as_str())
                .bind(new.stage_index)
                .bind(new.expected_agent_count)
                .bind(new.parallel_type.map(|p| p.as_str()))
                .bind(new.success_policy.map(|p| p.as_str()))
                .bind(new.chat_id.clone())
                .bind(new.chat_user_message_id.clone())
                .bind(ExecutionStatus::Pending.as_str())
                .bind(now()),
            )
            .await
            .map_err(|e| match e {
                StoreError::Database(db) => classify_insert(STAGE, db),
                other => other,
            });
        match inserted {
            Ok(Some(stage)) => Ok(stage),
            Ok(None) => self.get_stage(&id).await,
            Err(e) if is_foreign_key_violation(&e) => {
                self.require_session(&new.session_id).await?;
                if let Some(chat) = &new.chat_id {
                    self.get_chat(chat).await?;
                }
                if let Some(msg) = &new.chat_user_message_id {
                    self.get_chat_user_message(msg).await?;
                }
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// The stage with this id.
    pub async fn get_stage(&self, id: &str) -> Result<Stage> {
        self.db
            .fetch_optional(Sql::new("SELECT * FROM stages WHERE id = $1").bind(id))
            .await?
            .ok_or_else(|| StoreError::not_found(STAGE, id))
    }

    /// The stages of a session in stage order (chat stages included).
    pub async fn list_stages(&self, session_id: &str) -> Result<Vec<Stage>> {
        let stages: Vec<Stage> = self
            .db
            .fetch_all(
                Sql::new("SELECT * FROM stages WHERE session_id = $1 ORDER BY stage_index")
                    .bind(session_id),
            )
            .await?;
        if stages.is_empty() {
            self.require_session(session_id).await?;
        }
        Ok(stages)
    }

    /// The highest stage index used in a session (to place a chat stage after it).
    pub async fn max_stage_index(&self, session_id: &str) -> Result<Option<i64>> {
        self.require_session(session_id).await?;
        let n = self
            .db
            .fetch_i64(
                Sql::new(
                    "SELECT COALESCE(MAX(stage_index) + 1, 0) FROM stages WHERE session_id = $1",
                )
                .bind(session_id),
            )
            .await?;
        Ok(n.checked_sub(1).filter(|n| *n >= 0))
    }

    /// Sets a stage's status directly (e.g. cancelled). Entering active
    /// stamps `started_at` once; a terminal status stamps `completed_at`.
    pub async fn update_stage_status(
        &self,
        id: &str,
        status: ExecutionStatus,
        error_message: Option<&str>,
    ) -> Result<Stage> {
        let at = now();
        self.db
            .fetch_optional(
                Sql::new(
                    "UPDATE stages SET status = $2, error_message = COALESCE($3, error_message), \
                     started_at = COALESCE(started_at, $4), completed_at = COALESCE($5, completed_at) \
                     WHERE id = $1 RETURNING *",
                )
                .bind(id)
                .bind(status.as_str())
                .bind(error_message)
                .bind((status != ExecutionStatus::Pending).then_some(at))
                .bind(status.is_terminal().then_some(at)),
            )
            .await?
            .ok_or_else(|| StoreError::not_found(STAGE, id))
            .inspect(|s: &Stage| {
                if let (true, Some(started)) = (status.is_terminal(), s.started_at)
                    && let Ok(took) = (at - started).to_std()
                {
                    tarsy_telemetry::global().stage_finished(status.as_str(), took);
                }
            })
    }

    /// The chat's stage that is still pending or running, if any (one
    /// message at a time per chat).
    pub async fn active_stage_for_chat(&self, chat_id: &str) -> Result<Option<Stage>> {
        let stage = self
            .db
            .fetch_optional(
                Sql::new(
                    "SELECT * FROM stages WHERE chat_id = $1 AND status IN ($2, $3) \
                     ORDER BY stage_index DESC LIMIT 1",
                )
                .bind(chat_id)
                .bind(ExecutionStatus::Pending.as_str())
                .bind(ExecutionStatus::Active.as_str()),
            )
            .await?;
        if stage.is_none() {
            self.get_chat(chat_id).await?;
        }
        Ok(stage)
    }

    /// Every chat stage still answering (pending or active), oldest first:
    /// after a restart, the answers that died with their process.
    pub async fn unfinished_chat_stages(&self) -> Result<Vec<Stage>> {
        self.db
            .fetch_all(
                Sql::new(
                    "SELECT * FROM stages WHERE chat_id IS NOT NULL AND status IN ($1, $2) \
                     ORDER BY created_at, id",
                )
                .bind(ExecutionStatus::Pending.as_str())
                .bind(ExecutionStatus::Active.as_str()),
            )
            .await
    }

    /// Creates a pending agent execution. With an explicit id that already
    /// exists, the stored execution is returned. A second execution at the
    /// same index of the same stage is a conflict.
    pub async fn create_agent_execution(&self, new: NewAgentExecution) -> Result<AgentExecution> {
        if new.agent_name.trim().is_empty() {
            return Err(StoreError::InvalidInput("agent name is empty".into()));
        }
        let id = new.id.clone().unwrap_or_else(new_id);
        let inserted = self
            .db
            .fetch_optional::<AgentExecution>(
                Sql::new(
                    "INSERT INTO agent_executions (id, stage_id, session_id, agent_name, agent_index, \
                     kind, iteration_strategy, llm_provider, status, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                     ON CONFLICT (id) DO NOTHING RETURNING *",
                )
                .bind(&id)
                .bind(&new.stage_id)
                .bind(&new.session_id)
                .bind(new.agent_name)
                .bind(new.agent_index)
                .bind(new.kind.as_str())
                .bind(new.iteration_strategy.as_str())
                .bind(new.llm_provider)
                .bind(ExecutionStatus::Pending.as_str())
                .bind(now()),
            )
            .await
            .map_err(|e| match e {
                StoreError::Database(db) => classify_insert(EXECUTION, db),
                other => other,
            });
        match inserted {
            Ok(Some(execution)) => Ok(execution),
            Ok(None) => self.get_agent_execution(&id).await,
            Err(e) if is_foreign_key_violation(&e) => {
                self.require_session(&new.session_id).await?;
                self.get_stage(&new.stage_id).await?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// The agent execution with this id.
    pub async fn get_agent_execution(&self, id: &str) -> Result<AgentExecution> {
        self.db
            .fetch_optional(Sql::new("SELECT * FROM agent_executions WHERE id = $1").bind(id))
            .await?
            .ok_or_else(|| StoreError::not_found(EXECUTION, id))
    }

    /// Sets an execution's status and, when given, its error. Entering
    /// active stamps `started_at` once; a terminal status stamps `completed_at`.
    pub async fn update_agent_execution_status(
        &self,
        id: &str,
        status: ExecutionStatus,
        error_message: Option<&str>,
    ) -> Result<AgentExecution> {
        let at = now();
        self.db
            .fetch_optional(
                Sql::new(
                    "UPDATE agent_executions SET status = $2, error_message = COALESCE($3, error_message), \
                     started_at = COALESCE(started_at, $4), completed_at = COALESCE($5, completed_at) \
                     WHERE id = $1 RETURNING *",
                )
                .bind(id)
                .bind(status.as_str())
                .bind(error_message)
                .bind((status != ExecutionStatus::Pending).then_some(at))
                .bind(status.is_terminal().then_some(at)),
            )
            .await?
            .ok_or_else(|| StoreError::not_found(EXECUTION, id))
    }

    /// The executions of a stage in launch order.
    pub async fn list_agent_executions(&self, stage_id: &str) -> Result<Vec<AgentExecution>> {
        let list: Vec<AgentExecution> = self
            .db
            .fetch_all(
                Sql::new("SELECT * FROM agent_executions WHERE stage_id = $1 ORDER BY agent_index")
                    .bind(stage_id),
            )
            .await?;
        if list.is_empty() {
            self.get_stage(stage_id).await?;
        }
        Ok(list)
    }

    /// All executions of a session, by stage then launch order.
    pub async fn list_session_executions(&self, session_id: &str) -> Result<Vec<AgentExecution>> {
        let list: Vec<AgentExecution> = self
            .db
            .fetch_all(
                Sql::new(
                    "SELECT e.* FROM agent_executions e JOIN stages s ON s.id = e.stage_id \
                     WHERE e.session_id = $1 ORDER BY s.stage_index, e.agent_index",
                )
                .bind(session_id),
            )
            .await?;
        if list.is_empty() {
            self.require_session(session_id).await?;
        }
        Ok(list)
    }
}
