//! The session workflow: the one interpreter of the chain state machine's
//! actions, for both modes.
//!
//! [`tarsy_chain::decide`] says *what* to do next ([`Action`]); a
//! [`Workflow`] turns one action into a [`Step`]: the store writes it
//! implies ([`StoreOp`], with ids, rows, resolved configurations and the
//! failure rule decided here) and the one [`Effect`] the edge applies in its
//! own way — local mode with in-process tasks, cluster mode with
//! AgentExecution objects and the Alert's status. It also updates the
//! [`SessionView`] the way the action changes it, so the next `decide` sees
//! the step as done. No IO: [`perform`] carries out the store writes, the
//! same in both modes.
//!
//! One failure rule: an execution whose configuration cannot be resolved
//! (an agent or provider removed since the session started, an MCP
//! selection that no longer applies) fails on its own, with the reason, and
//! the stage's success policy decides — never the whole session at once.

use std::sync::Arc;

use tarsy_chain::{
    Action, ExecutionStart, ExecutionView, ExecutiveSummaryView, SessionView, StageStart,
    StageView, StopReason,
};
use tarsy_config::Config;
use tarsy_config::model::ChainSpec;
use tarsy_core::{
    EventPublisher, ExecutionKind, ExecutionStatus, McpSelection, ParallelType,
    ResolvedAgentConfig, SessionEndReason, SessionStatus, StageKind, SuccessPolicy,
};
use tarsy_events::lifecycle;
use tarsy_store::{NewAgentExecution, NewSession, NewStage, SessionOutcome, Store, StoreError};

use crate::ids::{execution_id, stage_id};
use crate::plan::resolve_execution;
use crate::records;

/// What the error of an execution whose configuration did not resolve
/// starts with.
pub const UNRESOLVED: &str = "cannot resolve the agent configuration";

/// A store write a step asks for. Every one is idempotent: a step repeated
/// after a failure or a restart finds what the first attempt wrote.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreOp {
    /// Create the session row (cluster mode: id = the Alert's UID).
    CreateSession(NewSession),
    /// The session leaves `pending` (cluster mode's admission).
    StartSession {
        /// Session id.
        session_id: String,
    },
    /// Say why a pending session waits (its scope's daily budget is spent).
    HoldSession {
        /// Session id.
        session_id: String,
        /// Why.
        reason: String,
    },
    /// Create a stage row and mark it active.
    CreateStage(NewStage),
    /// The session's current stage (the dashboard's progress).
    Progress {
        /// Session id.
        session_id: String,
        /// Stage record index.
        stage_index: u32,
        /// Stage row id.
        stage_id: String,
    },
    /// Create an execution row.
    CreateExecution(NewAgentExecution),
    /// Record that an execution could not start.
    FailExecution {
        /// Execution row id.
        execution_id: String,
        /// Why.
        error: String,
    },
    /// Record a stage's outcome.
    FinishStage {
        /// Stage row id.
        stage_id: String,
        /// Outcome.
        status: ExecutionStatus,
        /// Why it did not complete.
        error: Option<String>,
    },
    /// Record the session's end; what it left open (streaming events,
    /// unfinished executions and stages) is closed with the reason. A
    /// summary (or its error) already in the row is kept: it was stored whole when it was made, while the one here
    /// may be the bounded copy a cluster status holds.
    FinishSession {
        /// Session id.
        session_id: String,
        /// How it ended.
        outcome: SessionOutcome,
    },
    /// End a scoring attempt whose judge stopped without recording its end
    /// (its pod died): failed, with the reason. One that has ended already
    /// is left as it is.
    FailScore {
        /// The session scored.
        session_id: String,
        /// The attempt.
        attempt_id: String,
        /// Why.
        error: String,
    },
}

/// One execution of a started stage.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRecord {
    /// 1-based index within the stage.
    pub index: u32,
    /// Agent definition (registry key).
    pub agent_name: String,
    /// Name in records (`{Base}-N` for replicas).
    pub display_name: String,
    /// Investigation or synthesis.
    pub kind: ExecutionKind,
    /// Execution row id.
    pub id: String,
    /// What it runs, or why it cannot run (then it has already failed).
    pub config: Result<ResolvedAgentConfig, String>,
}

/// A stage record that was started.
#[derive(Debug, Clone, PartialEq)]
pub struct StageRecord {
    /// 1-based record index.
    pub db_index: u32,
    /// Index of the chain stage it belongs to.
    pub config_index: usize,
    /// Investigation or synthesis.
    pub kind: StageKind,
    /// Record name.
    pub name: String,
    /// Stage row id.
    pub id: String,
    /// Parallel type when it has several executions.
    pub parallel_type: Option<ParallelType>,
    /// Success policy (investigation stages).
    pub success_policy: Option<SuccessPolicy>,
    /// Its executions, by index.
    pub executions: Vec<ExecutionRecord>,
}

impl StageRecord {
    /// The executions to run (those whose configuration resolved).
    pub fn runnable(&self) -> impl Iterator<Item = (&ExecutionRecord, &ResolvedAgentConfig)> {
        self.executions
            .iter()
            .filter_map(|e| e.config.as_ref().ok().map(|c| (e, c)))
    }
}

/// What the edge does for a step, after its store writes.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Run the stage's runnable executions.
    StartStage(StageRecord),
    /// A stage ended.
    FinishStage {
        /// Stage record.
        db_index: u32,
        /// Outcome.
        status: ExecutionStatus,
        /// Why it did not complete.
        error: Option<String>,
    },
    /// Stop these executions, `(stage db_index, execution index)`.
    Stop {
        /// Why.
        reason: StopReason,
        /// Which.
        executions: Vec<(u32, u32)>,
    },
    /// Make the executive summary of `final_analysis` (fail-open; the view
    /// waits until the edge reports it with [`summary_done`]).
    Summarize {
        /// The analysis to summarize.
        final_analysis: String,
    },
    /// The session ended.
    FinishSession {
        /// How.
        status: SessionStatus,
        /// Its final analysis.
        final_analysis: Option<String>,
        /// Why it did not complete.
        error: Option<String>,
        /// Why a session that ran its course ended early.
        end_reason: Option<SessionEndReason>,
    },
}

/// What one action amounts to.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Store writes, in order, before the effect.
    pub store: Vec<StoreOp>,
    /// What the edge does then.
    pub effect: Effect,
}

/// The interpreter of one session's actions.
#[derive(Debug, Clone, Copy)]
pub struct Workflow<'a> {
    /// The configuration the session runs with.
    pub config: &'a Config,
    /// Its chain.
    pub chain: &'a ChainSpec,
    /// Session id.
    pub session_id: &'a str,
    /// The alert's MCP selection, if any.
    pub selection: Option<&'a McpSelection>,
}

impl Workflow<'_> {
    /// The step `action` amounts to; `view` is updated as if it were done
    /// (the caller keeps the update only once the store writes succeeded).
    pub fn apply(&self, view: &mut SessionView, action: Action) -> Step {
        match action {
            Action::StartStage(start) => self.start_stage(view, &start),
            Action::FinishStage {
                db_index,
                status,
                error,
            } => {
                if let Some(s) = view.stages.iter_mut().find(|s| s.db_index == db_index) {
                    s.status = status;
                }
                Step {
                    store: vec![StoreOp::FinishStage {
                        stage_id: stage_id(self.session_id, db_index),
                        status,
                        error: error.clone(),
                    }],
                    effect: Effect::FinishStage {
                        db_index,
                        status,
                        error,
                    },
                }
            }
            Action::StopExecutions { reason, executions } => {
                for &(stage, index) in &executions {
                    if let Some(e) = execution_mut(view, stage, index) {
                        e.stopping = true;
                    }
                }
                if reason == StopReason::Cancelled && !view.status.is_terminal() {
                    view.status = SessionStatus::Cancelling;
                }
                Step {
                    store: Vec::new(),
                    effect: Effect::Stop { reason, executions },
                }
            }
            Action::GenerateExecutiveSummary { final_analysis } => {
                view.executive_summary = ExecutiveSummaryView::Requested;
                Step {
                    store: Vec::new(),
                    effect: Effect::Summarize { final_analysis },
                }
            }
            Action::FinishSession {
                status,
                final_analysis,
                error,
                end_reason,
            } => {
                view.status = status;
                let (summary, summary_error) = match &view.executive_summary {
                    ExecutiveSummaryView::Generated(s) => (Some(s.clone()), None),
                    ExecutiveSummaryView::Failed(e) => (None, Some(e.clone())),
                    _ => (None, None),
                };
                Step {
                    store: vec![StoreOp::FinishSession {
                        session_id: self.session_id.to_string(),
                        outcome: SessionOutcome {
                            status,
                            final_analysis: final_analysis.clone(),
                            executive_summary: summary,
                            executive_summary_error: summary_error,
                            error_message: error.clone(),
                            end_reason,
                        },
                    }],
                    effect: Effect::FinishSession {
                        status,
                        final_analysis,
                        error,
                        end_reason,
                    },
                }
            }
        }
    }

    /// The configuration of execution `index` of a stage record of kind
    /// `kind` for chain stage `config_index`, or why there is none.
    pub fn resolve(
        &self,
        config_index: usize,
        kind: StageKind,
        index: u32,
    ) -> Result<ResolvedAgentConfig, String> {
        resolve_execution(
            self.config,
            self.chain,
            config_index,
            kind,
            index,
            self.selection,
        )
        .map_err(|e| format!("{UNRESOLVED}: {e}"))
    }

    fn start_stage(&self, view: &mut SessionView, start: &StageStart) -> Step {
        let session_id = self.session_id;
        let id = stage_id(session_id, start.db_index);
        let mut store = vec![
            StoreOp::CreateStage(records::stage_row(session_id, start)),
            StoreOp::Progress {
                session_id: session_id.to_string(),
                stage_index: start.db_index,
                stage_id: id.clone(),
            },
        ];
        let executions: Vec<ExecutionRecord> = start
            .executions
            .iter()
            .map(|e| self.execution(start, e))
            .collect();
        for e in &executions {
            store.push(StoreOp::CreateExecution(records::execution_row(
                session_id,
                start.db_index,
                &start_of(e),
                e.config.as_ref().ok(),
            )));
            if let Err(error) = &e.config {
                store.push(StoreOp::FailExecution {
                    execution_id: e.id.clone(),
                    error: error.clone(),
                });
            }
        }
        view.stages.push(StageView {
            db_index: start.db_index,
            config_index: start.config_index,
            kind: start.kind,
            name: start.name.clone(),
            status: ExecutionStatus::Active,
            executions: executions.iter().map(initial_view).collect(),
        });
        Step {
            store,
            effect: Effect::StartStage(StageRecord {
                db_index: start.db_index,
                config_index: start.config_index,
                kind: start.kind,
                name: start.name.clone(),
                id,
                parallel_type: start.parallel_type,
                success_policy: start.success_policy,
                executions,
            }),
        }
    }

    fn execution(&self, start: &StageStart, e: &ExecutionStart) -> ExecutionRecord {
        ExecutionRecord {
            index: e.index,
            agent_name: e.agent_name.clone(),
            display_name: e.display_name.clone(),
            kind: e.kind,
            id: execution_id(self.session_id, start.db_index, e.index),
            config: self.resolve(start.config_index, start.kind, e.index),
        }
    }
}

fn start_of(e: &ExecutionRecord) -> ExecutionStart {
    ExecutionStart {
        index: e.index,
        agent_name: e.agent_name.clone(),
        display_name: e.display_name.clone(),
        kind: e.kind,
    }
}

/// How a just-started execution looks to the state machine: pending, or
/// failed already when it cannot run.
fn initial_view(e: &ExecutionRecord) -> ExecutionView {
    let (status, error) = match &e.config {
        Ok(_) => (ExecutionStatus::Pending, None),
        Err(error) => (ExecutionStatus::Failed, Some(error.clone())),
    };
    ExecutionView {
        index: e.index,
        display_name: e.display_name.clone(),
        status,
        final_analysis: None,
        error,
        stopping: false,
    }
}

fn execution_mut(view: &mut SessionView, stage: u32, index: u32) -> Option<&mut ExecutionView> {
    view.stages
        .iter_mut()
        .find(|s| s.db_index == stage)?
        .executions
        .iter_mut()
        .find(|e| e.index == index)
}

/// Records in `view` that an execution ended (local mode learns it from its
/// task; cluster mode reads it from the AgentExecution's status).
pub fn execution_ended(
    view: &mut SessionView,
    stage: u32,
    index: u32,
    status: ExecutionStatus,
    error: Option<String>,
    final_analysis: Option<String>,
) {
    if let Some(e) = execution_mut(view, stage, index) {
        e.status = status;
        e.error = error;
        e.final_analysis = (status == ExecutionStatus::Completed)
            .then_some(final_analysis)
            .flatten();
    }
}

/// Records in `view` that the executive summary came back (`Err`: why it
/// failed; the session completes anyway).
pub fn summary_done(view: &mut SessionView, outcome: Result<String, String>) {
    view.executive_summary = match outcome {
        Ok(text) => ExecutiveSummaryView::Generated(text),
        Err(e) => ExecutiveSummaryView::Failed(e),
    };
}

/// How an execution that was asked to stop ended: the engine reports every
/// stop as `cancelled`; a stop for the session timeout is `timed_out`.
pub fn stopped_outcome(
    stop: Option<StopReason>,
    status: ExecutionStatus,
    error: Option<String>,
) -> (ExecutionStatus, Option<String>) {
    match (stop, status) {
        (_, ExecutionStatus::Completed) => (ExecutionStatus::Completed, None),
        (Some(StopReason::TimedOut), ExecutionStatus::Cancelled) => (
            ExecutionStatus::TimedOut,
            Some(StopReason::TimedOut.message().to_string()),
        ),
        (_, status) => (status, error),
    }
}

/// Carries out one store write and publishes the lifecycle event it implies
/// (`session.status`, `stage.status`) for WebSocket clients — once: only
/// when the write changed something. A record that is gone (a session
/// deleted meanwhile) is not an error.
pub async fn perform(
    store: &Store,
    publisher: &dyn EventPublisher,
    op: &StoreOp,
) -> Result<(), StoreError> {
    match op {
        StoreOp::CreateSession(new) => {
            if store.create_session(new.clone()).await?.created {
                lifecycle::publish_session_status(publisher, &new.id, SessionStatus::Pending).await;
            }
        }
        StoreOp::HoldSession { session_id, reason } => {
            store.hold_session(session_id, Some(reason)).await?;
        }
        StoreOp::StartSession { session_id } => {
            let started = store
                .transition_session_status(
                    session_id,
                    &[SessionStatus::Pending],
                    SessionStatus::InProgress,
                )
                .await?;
            if started {
                lifecycle::publish_session_status(publisher, session_id, SessionStatus::InProgress)
                    .await;
            }
        }
        StoreOp::CreateStage(new) => {
            let stage = store.create_stage(new.clone()).await?;
            if stage.status == ExecutionStatus::Pending {
                let stage = store
                    .update_stage_status(&stage.id, ExecutionStatus::Active, None)
                    .await?;
                let stage_ref = lifecycle::PublishedStage {
                    id: &stage.id,
                    name: &stage.stage_name,
                    index: stage.stage_index,
                };
                lifecycle::publish_stage_status(
                    publisher,
                    &stage.session_id,
                    stage_ref,
                    ExecutionStatus::Active,
                )
                .await;
            }
        }
        StoreOp::Progress {
            session_id,
            stage_index,
            stage_id,
        } => {
            store
                .update_session_progress(session_id, i64::from(*stage_index), stage_id)
                .await?;
        }
        StoreOp::CreateExecution(new) => {
            store.create_agent_execution(new.clone()).await?;
        }
        StoreOp::FailExecution {
            execution_id,
            error,
        } => {
            store
                .update_agent_execution_status(execution_id, ExecutionStatus::Failed, Some(error))
                .await?;
        }
        StoreOp::FinishStage {
            stage_id,
            status,
            error,
        } => match store
            .update_stage_status(stage_id, *status, error.as_deref())
            .await
        {
            Ok(stage) => {
                let stage_ref = lifecycle::PublishedStage {
                    id: &stage.id,
                    name: &stage.stage_name,
                    index: stage.stage_index,
                };
                lifecycle::publish_stage_status(publisher, &stage.session_id, stage_ref, *status)
                    .await;
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        },
        StoreOp::FinishSession {
            session_id,
            outcome,
        } => {
            let reason = match &outcome.error_message {
                Some(e) => format!("the session ended ({}): {e}", outcome.status),
                None => format!(
                    "the session ended ({}) before this recorded its end",
                    outcome.status
                ),
            };
            match store.close_open_records(session_id, &reason).await {
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            // The analysis in full, from the records (the caller may hold a
            // clipped copy: a cluster status does).
            let mut outcome = outcome.clone();
            if outcome.final_analysis.is_some()
                && let Ok(Some(full)) =
                    crate::context::session_final_analysis(store, session_id).await
            {
                outcome.final_analysis = Some(full);
            }
            let status = outcome.status;
            match store.finish_session(session_id, outcome).await {
                Ok(_) => lifecycle::publish_session_status(publisher, session_id, status).await,
                Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        StoreOp::FailScore {
            session_id,
            attempt_id,
            error,
        } => match store.fail_score(attempt_id, error).await {
            Ok(attempt) => {
                lifecycle::publish_session_score(
                    publisher,
                    session_id,
                    attempt_id,
                    attempt.status,
                    attempt.score,
                    &attempt.failure_tags,
                )
                .await
            }
            Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        },
    }
    Ok(())
}

/// [`perform`] for every write of `ops`, in order.
pub async fn perform_all(
    store: &Store,
    publisher: &Arc<dyn EventPublisher>,
    ops: &[StoreOp],
) -> Result<(), StoreError> {
    for op in ops {
        perform(store, publisher.as_ref(), op).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
