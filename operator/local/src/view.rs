//! The state machine's view of a session, read from the store. Every
//! decision is re-derivable from it, which is what makes a restart lose
//! nothing: a session left in progress by a dead process is read back, the
//! executions that were running are run again (the engine continues each
//! from its stored conversation), and the machine carries on from there —
//! starting the next stage, synthesis or summary as if nothing had
//! happened.

use std::collections::HashMap;

use tarsy_chain::{ChainPlan, ExecutionView, ExecutiveSummaryView, SessionView, StageView};
use tarsy_core::{
    ExecutionKind, ExecutionStatus, IterationStrategy, SessionStatus, StageKind,
    TimelineEventStatus,
};
use tarsy_exec::context::final_analysis_of;
use tarsy_exec::ids;
use tarsy_store::{NewAgentExecution, Session, Store};

use crate::error::Result;

/// Why a chat answer found running at start-up is recorded as failed.
pub(crate) const INTERRUPTED_BY_RESTART: &str =
    "interrupted: the TARSy process answering stopped before it finished";

/// The view plus the record ids behind it.
pub(crate) struct Loaded {
    pub(crate) view: SessionView,
    /// `(stage db_index, execution index)` → execution id.
    pub(crate) executions: HashMap<(u32, u32), String>,
    /// Executions a dead process left unfinished, to run again:
    /// `(stage db_index, execution index)`.
    pub(crate) interrupted: Vec<(u32, u32)>,
}

/// Closes an execution that cannot continue: its streaming timeline events
/// are marked failed and the execution failed with `reason`.
pub(crate) async fn close_interrupted(
    store: &Store,
    execution_id: &str,
    reason: &str,
) -> Result<()> {
    for event in store.execution_timeline(execution_id).await? {
        if event.status == TimelineEventStatus::Streaming {
            store
                .complete_timeline_event(
                    &event.id,
                    &event.content,
                    TimelineEventStatus::Failed,
                    None,
                )
                .await?;
        }
    }
    store
        .update_agent_execution_status(execution_id, ExecutionStatus::Failed, Some(reason))
        .await?;
    Ok(())
}

/// Reads the session's investigation stages and executions into a view,
/// listing the executions that were running (they belonged to a process
/// that is gone: this is only called when nobody else drives the session)
/// and creating the executions a stage expected but never got.
pub(crate) async fn load(
    store: &Store,
    session: &Session,
    plan: &ChainPlan,
    deadline_passed: bool,
) -> Result<Loaded> {
    let mut view = SessionView {
        status: session.status,
        cancel_requested: session.status == SessionStatus::Cancelling,
        deadline_passed,
        stages: Vec::new(),
        executive_summary: match (&session.executive_summary, &session.executive_summary_error) {
            (Some(s), _) => ExecutiveSummaryView::Generated(s.clone()),
            (None, Some(e)) => ExecutiveSummaryView::Failed(e.clone()),
            (None, None) => ExecutiveSummaryView::NotRequested,
        },
        spent: store.session_cost(&session.id).await?,
    };
    let mut executions = HashMap::new();
    let mut interrupted = Vec::new();
    let mut next_config_index = 0usize;
    let mut last_investigation = 0usize;

    for stage in store.list_stages(&session.id).await? {
        let kind = stage.kind;
        if kind == StageKind::Chat {
            continue;
        }
        let db_index = u32::try_from(stage.stage_index).unwrap_or(u32::MAX);
        let mut rows = store.list_agent_executions(&stage.id).await?;
        let config_index = match kind {
            StageKind::Investigation => {
                last_investigation = next_config_index;
                next_config_index += 1;
                last_investigation
            }
            _ => last_investigation,
        };

        // Executions the stage expected but that were never created.
        if !stage.status.is_terminal() && (rows.len() as i64) < stage.expected_agent_count {
            let planned: Vec<(u32, String, ExecutionKind)> = match kind {
                StageKind::Synthesis | StageKind::Chat => plan
                    .stages
                    .get(config_index)
                    .map(|s| {
                        vec![(
                            1,
                            s.synthesis.display_name.clone(),
                            ExecutionKind::Synthesis,
                        )]
                    })
                    .unwrap_or_default(),
                StageKind::Investigation => plan
                    .stages
                    .get(config_index)
                    .map(|s| {
                        s.executions
                            .iter()
                            .zip(1u32..)
                            .map(|(e, i)| (i, e.display_name.clone(), ExecutionKind::Investigation))
                            .collect()
                    })
                    .unwrap_or_default(),
                // A judge's or reflector's stage creates its one execution
                // with it.
                StageKind::Scoring | StageKind::Memory => Vec::new(),
            };
            for (index, name, exec_kind) in planned {
                if rows.iter().any(|r| r.agent_index == i64::from(index)) {
                    continue;
                }
                let created = store
                    .create_agent_execution(NewAgentExecution {
                        id: Some(ids::execution_id(&session.id, db_index, index)),
                        stage_id: stage.id.clone(),
                        session_id: session.id.clone(),
                        agent_name: name,
                        agent_index: i64::from(index),
                        kind: exec_kind,
                        iteration_strategy: if exec_kind == ExecutionKind::Synthesis {
                            IterationStrategy::Synthesis
                        } else {
                            IterationStrategy::NativeThinking
                        },
                        llm_provider: None,
                    })
                    .await?;
                rows.push(created);
            }
            rows.sort_by_key(|r| r.agent_index);
        }

        let mut exec_views = Vec::new();
        for row in rows {
            let index = u32::try_from(row.agent_index).unwrap_or(u32::MAX);
            if !row.status.is_terminal() {
                interrupted.push((db_index, index));
            }
            let final_analysis = if row.status == ExecutionStatus::Completed {
                final_analysis_of(&store.execution_timeline(&row.id).await?)
            } else {
                None
            };
            executions.insert((db_index, index), row.id.clone());
            exec_views.push(ExecutionView {
                index,
                display_name: row.agent_name.clone(),
                status: if row.status.is_terminal() {
                    row.status
                } else {
                    ExecutionStatus::Active
                },
                final_analysis,
                error: row.error_message.clone(),
                stopping: false,
            });
        }
        view.stages.push(StageView {
            db_index,
            config_index,
            kind,
            name: stage.stage_name.clone(),
            // A stage not finished yet is active: the machine finishes it
            // from its executions.
            status: if stage.status.is_terminal() {
                stage.status
            } else {
                ExecutionStatus::Active
            },
            executions: exec_views,
        });
    }
    Ok(Loaded {
        view,
        executions,
        interrupted,
    })
}
