//! [`decide`]: the next actions for a session, from its plan and what exists.

use serde::{Deserialize, Serialize};
use tarsy_core::{
    Cost, ExecutionKind, ExecutionStatus, ParallelType, SessionEndReason, SessionStatus, StageKind,
    StageResult, SuccessPolicy,
};

use crate::aggregate::aggregate_stage;
use crate::plan::{ChainPlan, ExecutionPlan};

/// An execution as it exists now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionView {
    /// 1-based launch index within its stage.
    pub index: u32,
    /// Name in records (`{Base}-N` for replicas).
    pub display_name: String,
    /// Current status.
    pub status: ExecutionStatus,
    /// Final analysis, once completed.
    pub final_analysis: Option<String>,
    /// Error, once failed / timed out / cancelled.
    pub error: Option<String>,
    /// The driver has already asked this execution to stop.
    #[serde(default)]
    pub stopping: bool,
}

/// A stage record as it exists now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageView {
    /// 1-based position among the session's stage records (synthesis stages
    /// take their own index).
    pub db_index: u32,
    /// Index of the chain stage this record belongs to.
    pub config_index: usize,
    /// Investigation or synthesis (chat stages are not part of the view).
    pub kind: StageKind,
    /// Record name (`{stage} - Synthesis` for synthesis).
    pub name: String,
    /// Recorded status (`active` until [`Action::FinishStage`] is applied).
    pub status: ExecutionStatus,
    /// Its executions, by index.
    pub executions: Vec<ExecutionView>,
}

/// Progress of the executive summary.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "text")]
pub enum ExecutiveSummaryView {
    /// Not asked for yet.
    #[default]
    NotRequested,
    /// Being generated.
    Requested,
    /// Generated.
    Generated(String),
    /// Generation failed (fail-open: the session still completes).
    Failed(String),
}

/// Everything [`decide`] needs to know about a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionView {
    /// Recorded session status.
    pub status: SessionStatus,
    /// A user asked to cancel (`spec.cancel`, the cancel API).
    pub cancel_requested: bool,
    /// The session timeout has expired.
    pub deadline_passed: bool,
    /// Stage records in `db_index` order.
    pub stages: Vec<StageView>,
    /// Executive summary progress.
    pub executive_summary: ExecutiveSummaryView,
    /// What the session's LLM calls have cost so far, as last read (none:
    /// not read, or nothing yet); checked against the plan's budget before
    /// a stage starts.
    #[serde(default)]
    pub spent: Option<Cost>,
}

/// Why a session is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A user cancelled it.
    Cancelled,
    /// The session timeout expired.
    TimedOut,
}

impl StopReason {
    /// The session status this stop ends in.
    pub const fn session_status(self) -> SessionStatus {
        match self {
            Self::Cancelled => SessionStatus::Cancelled,
            Self::TimedOut => SessionStatus::TimedOut,
        }
    }

    /// The stage/execution status this stop ends in.
    pub const fn execution_status(self) -> ExecutionStatus {
        match self {
            Self::Cancelled => ExecutionStatus::Cancelled,
            Self::TimedOut => ExecutionStatus::TimedOut,
        }
    }

    /// Why, as the records say it.
    pub const fn message(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled by user",
            Self::TimedOut => "session timed out",
        }
    }
}

/// An execution to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionStart {
    /// 1-based launch index.
    pub index: u32,
    /// Agent definition to run.
    pub agent_name: String,
    /// Name in records.
    pub display_name: String,
    /// Investigation or synthesis.
    pub kind: ExecutionKind,
}

/// A stage record to create, with its executions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageStart {
    /// 1-based record index.
    pub db_index: u32,
    /// Chain stage index.
    pub config_index: usize,
    /// Investigation or synthesis.
    pub kind: StageKind,
    /// Record name (`{stage} - Synthesis` for synthesis).
    pub name: String,
    /// Success policy (investigation stages only).
    pub success_policy: Option<SuccessPolicy>,
    /// Parallel type when the stage has several executions.
    pub parallel_type: Option<ParallelType>,
    /// Executions to create and run.
    pub executions: Vec<ExecutionStart>,
    /// Results of earlier stages (context for the agents).
    pub previous_stages: Vec<StageResult>,
    /// For synthesis: the `db_index` of the stage being synthesized.
    pub synthesis_of: Option<u32>,
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum Action {
    /// Create a stage record and its executions, then run them.
    StartStage(StageStart),
    /// Record the stage's outcome.
    FinishStage {
        /// Stage record.
        db_index: u32,
        /// Outcome.
        status: ExecutionStatus,
        /// Why it did not complete.
        error: Option<String>,
    },
    /// Ask these executions to stop (the session shows `cancelling`
    /// meanwhile when a user cancelled).
    StopExecutions {
        /// Why.
        reason: StopReason,
        /// `(stage db_index, execution index)` of each execution to stop.
        executions: Vec<(u32, u32)>,
    },
    /// Generate the executive summary from the session's final analysis.
    GenerateExecutiveSummary {
        /// The analysis to summarize.
        final_analysis: String,
    },
    /// Record the session's end.
    FinishSession {
        /// Terminal status.
        status: SessionStatus,
        /// The last completed stage's result, if any.
        final_analysis: Option<String>,
        /// Why it did not complete.
        error: Option<String>,
        /// Why a session that ran its course ended early.
        #[serde(default)]
        end_reason: Option<SessionEndReason>,
    },
}

/// The actions that move `view` forward under `plan`. Empty when the session
/// is waiting (executions running, summary being generated) or has ended.
///
/// Idempotent: as long as the driver has not applied the returned actions,
/// calling again returns the same actions.
pub fn decide(plan: &ChainPlan, view: &SessionView) -> Vec<Action> {
    if view.status.is_terminal() || view.status == SessionStatus::Pending {
        return Vec::new();
    }
    if let Some(reason) = stop_reason(view) {
        return stop(view, reason);
    }

    let Some(last) = view.stages.last() else {
        return start_investigation(plan, view, 0).into_iter().collect();
    };

    if !last.status.is_terminal() {
        if last.executions.iter().all(|e| e.status.is_terminal()) {
            let policy = match last.kind {
                StageKind::Investigation => plan
                    .stages
                    .get(last.config_index)
                    .map(|s| s.success_policy)
                    .unwrap_or_default(),
                // A synthesis stage has one execution: it must complete.
                StageKind::Synthesis | StageKind::Chat | StageKind::Scoring | StageKind::Memory => {
                    SuccessPolicy::All
                }
            };
            let (status, error) = aggregate_stage(policy, &last.executions);
            return vec![Action::FinishStage {
                db_index: last.db_index,
                status,
                error,
            }];
        }
        return Vec::new();
    }

    if last.status != ExecutionStatus::Completed {
        let status = match last.status {
            ExecutionStatus::TimedOut => SessionStatus::TimedOut,
            ExecutionStatus::Cancelled => SessionStatus::Cancelled,
            _ => SessionStatus::Failed,
        };
        let name = &last.name;
        let error = aggregate_stage(SuccessPolicy::All, &last.executions)
            .1
            .map(|e| format!("stage {name:?} {}: {e}", last.status))
            .or_else(|| Some(format!("stage {name:?} {}", last.status)));
        return vec![Action::FinishSession {
            status,
            final_analysis: final_analysis(view),
            error,
            end_reason: None,
        }];
    }

    // A stage of several executions is synthesized even past the budget:
    // its synthesis is what the stage concluded.
    if last.kind == StageKind::Investigation && last.executions.len() > 1 {
        return vec![start_synthesis(plan, view, last)];
    }

    // Past the budget no further stage starts; the session still gets its
    // executive summary and says why it ended there.
    let end_reason = budget_exhausted(plan, view).then_some(SessionEndReason::BudgetExhausted);
    let next = last.config_index + 1;
    if end_reason.is_none()
        && let Some(action) = start_investigation(plan, view, next)
    {
        return vec![action];
    }

    // Every stage is done: executive summary (fail-open), then completion.
    match &view.executive_summary {
        ExecutiveSummaryView::NotRequested => match final_analysis(view) {
            Some(final_analysis) => vec![Action::GenerateExecutiveSummary { final_analysis }],
            None => vec![Action::FinishSession {
                status: SessionStatus::Completed,
                final_analysis: None,
                error: None,
                end_reason,
            }],
        },
        ExecutiveSummaryView::Requested => Vec::new(),
        ExecutiveSummaryView::Generated(_) | ExecutiveSummaryView::Failed(_) => {
            vec![Action::FinishSession {
                status: SessionStatus::Completed,
                final_analysis: final_analysis(view),
                error: None,
                end_reason,
            }]
        }
    }
}

/// Whether the session has spent its plan's budget.
fn budget_exhausted(plan: &ChainPlan, view: &SessionView) -> bool {
    match (plan.budget, view.spent) {
        (Some(budget), Some(spent)) => budget.exhausted_by(&spent).is_some(),
        _ => false,
    }
}

fn stop_reason(view: &SessionView) -> Option<StopReason> {
    if view.cancel_requested || view.status == SessionStatus::Cancelling {
        Some(StopReason::Cancelled)
    } else if view.deadline_passed {
        Some(StopReason::TimedOut)
    } else {
        None
    }
}

fn stop(view: &SessionView, reason: StopReason) -> Vec<Action> {
    let running: Vec<(u32, &ExecutionView)> = view
        .stages
        .iter()
        .flat_map(|s| s.executions.iter().map(move |e| (s.db_index, e)))
        .filter(|(_, e)| !e.status.is_terminal())
        .collect();
    if !running.is_empty() {
        let to_stop: Vec<(u32, u32)> = running
            .iter()
            .filter(|(_, e)| !e.stopping)
            .map(|(stage, e)| (*stage, e.index))
            .collect();
        let mut actions = Vec::new();
        if !to_stop.is_empty() {
            actions.push(Action::StopExecutions {
                reason,
                executions: to_stop,
            });
        }
        return actions;
    }
    let mut actions: Vec<Action> = view
        .stages
        .iter()
        .filter(|s| !s.status.is_terminal())
        .map(|s| Action::FinishStage {
            db_index: s.db_index,
            status: reason.execution_status(),
            error: Some(reason.message().to_string()),
        })
        .collect();
    actions.push(Action::FinishSession {
        status: reason.session_status(),
        final_analysis: final_analysis(view),
        error: Some(reason.message().to_string()),
        end_reason: None,
    });
    actions
}

fn next_db_index(view: &SessionView) -> u32 {
    view.stages.last().map_or(1, |s| s.db_index + 1)
}

fn start_investigation(
    plan: &ChainPlan,
    view: &SessionView,
    config_index: usize,
) -> Option<Action> {
    let stage = plan.stages.get(config_index)?;
    let executions = stage
        .executions
        .iter()
        .zip(1u32..)
        .map(|(e, index)| ExecutionStart {
            index,
            agent_name: e.agent_name.clone(),
            display_name: e.display_name.clone(),
            kind: ExecutionKind::Investigation,
        })
        .collect();
    Some(Action::StartStage(StageStart {
        db_index: next_db_index(view),
        config_index,
        kind: StageKind::Investigation,
        name: stage.name.clone(),
        success_policy: Some(stage.success_policy),
        parallel_type: stage.parallel_type,
        executions,
        previous_stages: stage_results(view),
        synthesis_of: None,
    }))
}

fn start_synthesis(plan: &ChainPlan, view: &SessionView, investigated: &StageView) -> Action {
    // A stage gone from the chain (configuration changed mid-session) is
    // synthesized by the built-in agent, under its legacy name, which the
    // configuration resolves as an alias.
    let (name, agent) = plan
        .stages
        .get(investigated.config_index)
        .map(|s| (s.name.clone(), s.synthesis.clone()))
        .unwrap_or_else(|| {
            (
                format!("stage {}", investigated.config_index + 1),
                ExecutionPlan {
                    agent_name: "SynthesisAgent".into(),
                    display_name: "SynthesisAgent".into(),
                },
            )
        });
    Action::StartStage(StageStart {
        db_index: next_db_index(view),
        config_index: investigated.config_index,
        kind: StageKind::Synthesis,
        name: synthesis_name(&name),
        success_policy: None,
        parallel_type: None,
        executions: vec![ExecutionStart {
            index: 1,
            display_name: agent.display_name,
            agent_name: agent.agent_name,
            kind: ExecutionKind::Synthesis,
        }],
        previous_stages: stage_results(view),
        synthesis_of: Some(investigated.db_index),
    })
}

fn synthesis_name(stage: &str) -> String {
    format!("{stage} - Synthesis")
}

/// Results of the completed chain stages, in order: a stage's single
/// execution's analysis, or its synthesis's when it had several executions.
/// The one rule for what later stages (and the session) build on; the
/// context builders apply it to views read back from the store.
pub fn stage_results(view: &SessionView) -> Vec<StageResult> {
    let mut results = Vec::new();
    for stage in &view.stages {
        if stage.status != ExecutionStatus::Completed {
            continue;
        }
        let usable = match stage.kind {
            StageKind::Synthesis => true,
            StageKind::Investigation => stage.executions.len() == 1,
            StageKind::Chat | StageKind::Scoring | StageKind::Memory => false,
        };
        if !usable {
            continue;
        }
        if let Some(analysis) = stage
            .executions
            .iter()
            .find(|e| e.status == ExecutionStatus::Completed)
            .and_then(|e| e.final_analysis.clone())
        {
            results.push(StageResult {
                stage_name: stage.name.clone(),
                final_analysis: analysis,
            });
        }
    }
    results
}

/// The session's final analysis: the last completed stage's result.
pub fn final_analysis(view: &SessionView) -> Option<String> {
    stage_results(view).pop().map(|r| r.final_analysis)
}
