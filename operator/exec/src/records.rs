//! The stage and execution rows of a stage the state machine starts — the
//! same rows, with the same deterministic ids, in every mode — and where a
//! stage added after them goes.

use tarsy_chain::{ExecutionStart, StageStart};
use tarsy_core::{
    EventPublisher, ExecutionKind, ExecutionStatus, IterationStrategy, ResolvedAgentConfig,
};
use tarsy_events::lifecycle::{PublishedStage, publish_stage_status};
use tarsy_store::{NewAgentExecution, NewStage, Store, StoreError};

use crate::ids::{execution_id, stage_id};

/// The row of stage record `start` of `session_id`.
pub fn stage_row(session_id: &str, start: &StageStart) -> NewStage {
    NewStage {
        id: Some(stage_id(session_id, start.db_index)),
        session_id: session_id.to_string(),
        stage_name: start.name.clone(),
        kind: start.kind,
        stage_index: i64::from(start.db_index),
        expected_agent_count: start.executions.len() as i64,
        parallel_type: start.parallel_type,
        success_policy: start.success_policy,
        chat_id: None,
        chat_user_message_id: None,
    }
}

/// The row of execution `execution` of stage record `stage_index`, running
/// `config` (`None`: its configuration did not resolve and it fails at
/// once; the row names no provider).
pub fn execution_row(
    session_id: &str,
    stage_index: u32,
    execution: &ExecutionStart,
    config: Option<&ResolvedAgentConfig>,
) -> NewAgentExecution {
    let (strategy, provider) = match config {
        Some(c) => (c.iteration_strategy, Some(c.llm_provider.name.clone())),
        None if execution.kind == ExecutionKind::Synthesis => (IterationStrategy::Synthesis, None),
        None => (IterationStrategy::NativeThinking, None),
    };
    NewAgentExecution {
        id: Some(execution_id(session_id, stage_index, execution.index)),
        stage_id: stage_id(session_id, stage_index),
        session_id: session_id.to_string(),
        agent_name: execution.display_name.clone(),
        agent_index: i64::from(execution.index),
        kind: execution.kind,
        iteration_strategy: strategy,
        llm_provider: provider,
    }
}

/// Records the status of a stage added after the session's stages (a chat
/// answer, a judge's, a reflector's) and publishes it (`stage.status`). A
/// write that fails is logged: the stage's own run goes on.
pub async fn stage_status(
    store: &Store,
    publisher: &dyn EventPublisher,
    session_id: &str,
    stage: PublishedStage<'_>,
    status: ExecutionStatus,
    error: Option<&str>,
) {
    if let Err(e) = store.update_stage_status(stage.id, status, error).await {
        tracing::warn!(stage_id = %stage.id, %status, error = %e, "cannot record the stage's status");
    }
    publish_stage_status(publisher, session_id, stage, status).await;
}

/// The index of a stage added after the session's stages (a chat answer,
/// a judge's scoring).
pub async fn next_stage_index(store: &Store, session_id: &str) -> Result<u32, StoreError> {
    let next = store.max_stage_index(session_id).await?.unwrap_or(0) + 1;
    u32::try_from(next)
        .map_err(|_| StoreError::InvalidInput(format!("stage index {next} is out of range")))
}
