//! One session's loop: ask the state machine what to do, do it, wait for
//! something to change (an execution ended, the summary came back, a cancel
//! request, the deadline), repeat until the session is terminal.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tarsy_chain::{
    Action, ChainPlan, ExecutiveSummaryView, SessionView, StageStart, StopReason, decide,
};
use tarsy_config::Named;
use tarsy_core::{ExecutionStatus, McpSelection, SessionStatus, StageKind};
use tarsy_crds::ChainSpec;
use tarsy_engine::ExecutionResult;
use tarsy_exec::plan::{chain_plan, resolve_execution};
use tarsy_exec::{AgentInput, Assignment, context, records};
use tarsy_store::{Session, SessionOutcome};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Result, SessionError};
use crate::runtime::{Runtime, lock};
use crate::view::{self, StageMeta};

/// Attempts of one action before the session is failed (storage errors).
const MAX_ATTEMPTS: u32 = 5;

/// Why the runner stopped an execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The machine asked (user cancel or session timeout).
    Machine(StopReason),
    /// The process shut down and its grace is over: the execution is
    /// left running in the store, for the next start to resume.
    Shutdown,
}

/// An execution this runner launched.
struct Running {
    id: String,
    cancel: CancellationToken,
    stop: Option<Stop>,
    done: bool,
}

enum Event {
    ExecutionDone {
        stage: u32,
        index: u32,
        result: ExecutionResult,
    },
    SummaryDone(std::result::Result<String, String>),
}

/// Drives one claimed (or recovered) session to its end, then releases its
/// admission slot. Never leaves the session stuck: a setup failure fails it.
pub(crate) async fn drive(rt: Arc<Runtime>, session_id: String, wake: Arc<Notify>) {
    if let Err(e) = drive_inner(&rt, &session_id, wake).await {
        tracing::error!(%session_id, error = %e, "session failed in the driver");
        fail_session(&rt, &session_id, &format!("orchestration error: {e}")).await;
    }
    lock(&rt.running).remove(&session_id);
    rt.released.notify_waiters();
    rt.admission.notify_one();
}

/// Records a session as failed (best effort, used when the loop cannot run).
async fn fail_session(rt: &Runtime, session_id: &str, error: &str) {
    let Ok(session) = rt.store.get_session(session_id).await else {
        return;
    };
    if session.status.is_terminal() || rt.shutdown.is_cancelled() {
        return;
    }
    let outcome = SessionOutcome {
        status: SessionStatus::Failed,
        final_analysis: session.final_analysis,
        executive_summary: session.executive_summary,
        executive_summary_error: session.executive_summary_error,
        error_message: Some(error.to_string()),
    };
    if rt.store.finish_session(session_id, outcome).await.is_ok() {
        rt.publish_session_status(session_id, SessionStatus::Failed)
            .await;
    }
}

async fn drive_inner(rt: &Arc<Runtime>, session_id: &str, wake: Arc<Notify>) -> Result<()> {
    let session = rt.store.get_session(session_id).await?;
    if session.status.is_terminal() {
        return Ok(());
    }
    let Some(chain) = rt.config.chain(&session.chain_id).cloned() else {
        fail_session(
            rt,
            session_id,
            &format!(
                "chain {:?} is not in the configuration any more",
                session.chain_id
            ),
        )
        .await;
        return Ok(());
    };
    let selection: Option<McpSelection> = match &session.mcp_selection {
        Some(v) => Some(serde_json::from_value(v.clone()).map_err(|e| {
            SessionError::Invalid(format!("stored mcp_selection is unreadable: {e}"))
        })?),
        None => None,
    };
    let timeout = rt.config.session_timeout(&chain.spec)?;
    let started = session.started_at.unwrap_or_else(chrono::Utc::now);
    let elapsed = (chrono::Utc::now() - started).to_std().unwrap_or_default();
    let deadline = Instant::now() + timeout.saturating_sub(elapsed);
    let plan = chain_plan(&rt.config, &chain);
    let loaded = view::load(&rt.store, &session, &plan, elapsed >= timeout).await?;
    rt.publish_session_status(session_id, session.status).await;

    let (tx, rx) = mpsc::unbounded_channel();
    let mut run = SessionRun {
        rt: rt.clone(),
        session,
        chain,
        plan,
        selection,
        view: loaded.view,
        stages: loaded.stages,
        executions: loaded
            .executions
            .into_iter()
            .map(|(k, id)| {
                (
                    k,
                    Running {
                        id,
                        cancel: CancellationToken::new(),
                        stop: None,
                        done: true,
                    },
                )
            })
            .collect(),
        deadline,
        tx,
        summary: None,
        shutting_down: false,
        interrupted: false,
    };
    run.resume_interrupted(loaded.interrupted).await?;
    run.run(rx, wake).await
}

struct SessionRun {
    rt: Arc<Runtime>,
    session: Session,
    chain: Named<ChainSpec>,
    plan: ChainPlan,
    selection: Option<McpSelection>,
    view: SessionView,
    stages: HashMap<u32, StageMeta>,
    executions: HashMap<(u32, u32), Running>,
    deadline: Instant,
    tx: mpsc::UnboundedSender<Event>,
    summary: Option<JoinHandle<()>>,
    shutting_down: bool,
    /// The shutdown grace is over and what ran was told to stop.
    interrupted: bool,
}

impl SessionRun {
    fn session_id(&self) -> &str {
        &self.session.id
    }

    fn running_count(&self) -> usize {
        self.executions.values().filter(|e| !e.done).count()
    }

    async fn run(
        &mut self,
        mut rx: mpsc::UnboundedReceiver<Event>,
        wake: Arc<Notify>,
    ) -> Result<()> {
        let mut heartbeat = tokio::time::interval(self.rt.settings.heartbeat_interval);
        heartbeat.tick().await;
        // A cancel requested through another process (same database) is
        // only visible in the store.
        let mut status_poll = tokio::time::interval(self.rt.settings.poll_interval);
        status_poll.tick().await;
        let shutdown = self.rt.shutdown.clone();
        let interrupt = self.rt.interrupt.clone();
        loop {
            if self.shutting_down && self.running_count() == 0 {
                if let Some(s) = self.summary.take() {
                    s.abort();
                }
                return Ok(());
            }
            let actions = if self.shutting_down {
                Vec::new()
            } else {
                decide(&self.plan, &self.view)
            };
            if actions.is_empty() {
                if self.view.status.is_terminal() {
                    return Ok(());
                }
                tokio::select! {
                    event = rx.recv() => {
                        if let Some(event) = event {
                            self.on_event(event).await;
                        }
                    }
                    _ = wake.notified() => self.on_wake().await,
                    _ = status_poll.tick(), if !self.view.cancel_requested => self.on_wake().await,
                    _ = tokio::time::sleep_until(self.deadline), if !self.view.deadline_passed => {
                        self.view.deadline_passed = true;
                    }
                    _ = shutdown.cancelled(), if !self.shutting_down => self.shutting_down = true,
                    // Once: a cancelled token stays ready, and taking it on
                    // every turn would spin without yielding, starving the
                    // executions this loop waits for.
                    _ = interrupt.cancelled(), if self.shutting_down && !self.interrupted => {
                        self.interrupted = true;
                        self.on_interrupt();
                    }
                    _ = heartbeat.tick() => {
                        if let Err(e) = self.rt.store.touch_session(self.session_id()).await {
                            tracing::warn!(session_id = %self.session_id(), error = %e, "heartbeat failed");
                        }
                    }
                }
                continue;
            }
            for action in actions {
                self.apply_with_retry(action).await?;
            }
        }
    }

    async fn apply_with_retry(&mut self, action: Action) -> Result<()> {
        let mut attempt = 1;
        loop {
            match self.apply(action.clone()).await {
                Ok(()) => return Ok(()),
                Err(e) if attempt < MAX_ATTEMPTS && !self.rt.shutdown.is_cancelled() => {
                    tracing::warn!(session_id = %self.session_id(), attempt, error = %e, "applying a session step failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                    attempt += 1;
                }
                Err(e) => {
                    // Stop what runs, then let the caller fail the session.
                    for r in self.executions.values() {
                        r.cancel.cancel();
                    }
                    return Err(e);
                }
            }
        }
    }

    /// A cancel request: the store says `cancelling`.
    async fn on_wake(&mut self) {
        match self.rt.store.get_session(self.session_id()).await {
            Ok(s) if s.status == SessionStatus::Cancelling => {
                self.view.cancel_requested = true;
                self.view.status = SessionStatus::Cancelling;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(session_id = %self.session_id(), error = %e, "cannot read session status")
            }
        }
    }

    /// The shutdown grace is over: stops what still runs.
    fn on_interrupt(&mut self) {
        for r in self
            .executions
            .values_mut()
            .filter(|r| !r.done && r.stop.is_none())
        {
            r.stop = Some(Stop::Shutdown);
            r.cancel.cancel();
        }
    }

    async fn on_event(&mut self, event: Event) {
        match event {
            Event::ExecutionDone {
                stage,
                index,
                result,
            } => self.execution_done(stage, index, result).await,
            Event::SummaryDone(outcome) => {
                self.summary = None;
                self.view.executive_summary = match outcome {
                    Ok(text) => ExecutiveSummaryView::Generated(text),
                    Err(e) => {
                        tracing::warn!(session_id = %self.session_id(), error = %e, "executive summary failed (the session still completes)");
                        ExecutiveSummaryView::Failed(e)
                    }
                };
            }
        }
    }

    /// Records an execution's end, with the status the reason for stopping
    /// it implies (the engine reports every stop as `cancelled`).
    async fn execution_done(&mut self, stage: u32, index: u32, result: ExecutionResult) {
        let Some(running) = self.executions.get_mut(&(stage, index)) else {
            return;
        };
        running.done = true;
        if running.stop == Some(Stop::Shutdown) && result.status != ExecutionStatus::Completed {
            tracing::info!(execution_id = %running.id, "execution interrupted by the shutdown; the next start resumes it");
            return;
        }
        let (status, error) = match (running.stop, result.status) {
            (_, ExecutionStatus::Completed) => (ExecutionStatus::Completed, None),
            (Some(Stop::Machine(StopReason::TimedOut)), ExecutionStatus::Cancelled) => (
                ExecutionStatus::TimedOut,
                Some("session timed out".to_string()),
            ),
            (Some(Stop::Machine(reason)), ExecutionStatus::Cancelled) => {
                (reason.execution_status(), result.error.clone())
            }
            (_, status) => (status, result.error.clone()),
        };
        let id = running.id.clone();
        if let Err(e) = self
            .rt
            .store
            .update_agent_execution_status(&id, status, error.as_deref())
            .await
        {
            tracing::warn!(execution_id = %id, error = %e, "cannot record execution status");
        }
        if let Some(ev) = self
            .view
            .stages
            .iter_mut()
            .find(|s| s.db_index == stage)
            .and_then(|s| s.executions.iter_mut().find(|e| e.index == index))
        {
            ev.status = status;
            ev.error = error;
            ev.final_analysis = if status == ExecutionStatus::Completed {
                result.final_analysis
            } else {
                None
            };
        }
    }

    async fn apply(&mut self, action: Action) -> Result<()> {
        match action {
            Action::StartStage(start) => self.start_stage(start).await,
            Action::FinishStage {
                db_index,
                status,
                error,
            } => {
                let meta = self.stage_meta(db_index)?;
                self.rt
                    .store
                    .update_stage_status(&meta.id, status, error.as_deref())
                    .await?;
                if let Some(s) = self.view.stages.iter_mut().find(|s| s.db_index == db_index) {
                    s.status = status;
                }
                self.rt
                    .publish_stage_status(
                        &self.session.id,
                        &meta.id,
                        &meta.name,
                        i64::from(db_index),
                        status,
                    )
                    .await;
                Ok(())
            }
            Action::StopExecutions { reason, executions } => {
                for key in executions {
                    if let Some(r) = self.executions.get_mut(&key) {
                        r.stop = Some(Stop::Machine(reason));
                        r.cancel.cancel();
                    }
                    if let Some(e) = self
                        .view
                        .stages
                        .iter_mut()
                        .find(|s| s.db_index == key.0)
                        .and_then(|s| s.executions.iter_mut().find(|e| e.index == key.1))
                    {
                        e.stopping = true;
                    }
                }
                Ok(())
            }
            Action::GenerateExecutiveSummary { final_analysis } => {
                self.view.executive_summary = ExecutiveSummaryView::Requested;
                let rt = self.rt.clone();
                let tx = self.tx.clone();
                let session_id = self.session.id.clone();
                let chain = self.chain.spec.clone();
                self.summary = Some(self.rt.tasks.spawn(async move {
                    let outcome = rt
                        .executive_summary(&session_id, &chain, &final_analysis)
                        .await;
                    let _ = tx.send(Event::SummaryDone(outcome));
                }));
                Ok(())
            }
            Action::FinishSession {
                status,
                final_analysis,
                error,
            } => {
                let (summary, summary_error) = match &self.view.executive_summary {
                    ExecutiveSummaryView::Generated(s) => (Some(s.clone()), None),
                    ExecutiveSummaryView::Failed(e) => (None, Some(e.clone())),
                    _ => (None, None),
                };
                if let Some(s) = self.summary.take() {
                    s.abort();
                }
                self.rt
                    .store
                    .finish_session(
                        &self.session.id,
                        SessionOutcome {
                            status,
                            final_analysis,
                            executive_summary: summary,
                            executive_summary_error: summary_error,
                            error_message: error,
                        },
                    )
                    .await?;
                self.view.status = status;
                self.rt
                    .publish_session_status(&self.session.id, status)
                    .await;
                tracing::info!(session_id = %self.session.id, %status, "session finished");
                Ok(())
            }
        }
    }

    fn stage_meta(&self, db_index: u32) -> Result<StageMeta> {
        self.stages.get(&db_index).cloned().ok_or_else(|| {
            SessionError::Invalid(format!("stage record #{db_index} is unknown to the driver"))
        })
    }

    async fn start_stage(&mut self, start: StageStart) -> Result<()> {
        let store = &self.rt.store;
        let session_id = self.session.id.clone();
        let stage = store
            .create_stage(records::stage_row(&session_id, &start))
            .await?;
        if let Err(e) = store
            .update_session_progress(&session_id, i64::from(start.db_index), &stage.id)
            .await
        {
            tracing::warn!(%session_id, error = %e, "cannot record session progress");
        }

        // Resolve every execution first so the rows carry strategy and provider.
        let mut launches = Vec::new();
        for e in &start.executions {
            let resolved = resolve_execution(
                &self.rt.config,
                &self.chain.spec,
                start.config_index,
                start.kind,
                e.index,
                self.selection.as_ref(),
            );
            let row = store
                .create_agent_execution(records::execution_row(
                    &session_id,
                    start.db_index,
                    e,
                    resolved.as_ref().ok(),
                ))
                .await?;
            launches.push((e.index, e.display_name.clone(), row.id, resolved));
        }
        store
            .update_stage_status(&stage.id, ExecutionStatus::Active, None)
            .await?;

        let input = self.stage_input(start.kind, start.db_index).await?;

        self.stages.insert(
            start.db_index,
            StageMeta {
                id: stage.id.clone(),
                name: stage.stage_name.clone(),
            },
        );
        self.view.stages.push(tarsy_chain::StageView {
            db_index: start.db_index,
            config_index: start.config_index,
            kind: start.kind,
            name: start.name.clone(),
            status: ExecutionStatus::Active,
            executions: launches
                .iter()
                .map(|(index, name, _, _)| tarsy_chain::ExecutionView {
                    index: *index,
                    display_name: name.clone(),
                    status: ExecutionStatus::Pending,
                    final_analysis: None,
                    error: None,
                    stopping: false,
                })
                .collect(),
        });
        self.rt
            .publish_stage_status(
                &session_id,
                &stage.id,
                &stage.stage_name,
                i64::from(start.db_index),
                ExecutionStatus::Active,
            )
            .await;

        for (index, _, execution_id, resolved) in launches {
            self.launch(
                start.db_index,
                index,
                &stage.id,
                execution_id,
                resolved,
                &input,
            );
        }
        Ok(())
    }

    /// Runs an execution of a stage record: the engine starts it, or
    /// continues it from its stored conversation if it ran before.
    fn launch(
        &mut self,
        db_index: u32,
        index: u32,
        stage_id: &str,
        execution_id: String,
        resolved: std::result::Result<tarsy_core::ResolvedAgentConfig, impl std::fmt::Display>,
        input: &AgentInput,
    ) {
        let cancel = CancellationToken::new();
        self.executions.insert(
            (db_index, index),
            Running {
                id: execution_id.clone(),
                cancel: cancel.clone(),
                stop: None,
                done: false,
            },
        );
        let tx = self.tx.clone();
        let config = match resolved {
            Ok(c) => c,
            Err(e) => {
                // Nothing to run: the execution fails with the reason.
                let _ = tx.send(Event::ExecutionDone {
                    stage: db_index,
                    index,
                    result: ExecutionResult::ended(
                        ExecutionStatus::Failed,
                        format!("cannot resolve the agent configuration: {e}"),
                        Default::default(),
                        0,
                    ),
                });
                return;
            }
        };
        let assignment = Assignment::new(
            &self.session,
            stage_id,
            execution_id,
            config,
            input.clone(),
            self.deadline,
            cancel,
        );
        let launcher = self.rt.launcher.clone();
        self.rt.tasks.spawn(async move {
            let result = launcher.run(assignment, None).await.result;
            let _ = tx.send(Event::ExecutionDone {
                stage: db_index,
                index,
                result,
            });
        });
    }

    /// Runs again the executions a dead (or stopped) process left
    /// unfinished: each continues from its stored conversation.
    async fn resume_interrupted(&mut self, interrupted: Vec<(u32, u32)>) -> Result<()> {
        for (db_index, index) in interrupted {
            let Some(stage) = self.view.stages.iter().find(|s| s.db_index == db_index) else {
                continue;
            };
            let (config_index, kind) = (stage.config_index, stage.kind);
            let meta = self.stage_meta(db_index)?;
            let Some(execution_id) = self
                .executions
                .get(&(db_index, index))
                .map(|r| r.id.clone())
            else {
                continue;
            };
            let resolved = resolve_execution(
                &self.rt.config,
                &self.chain.spec,
                config_index,
                kind,
                index,
                self.selection.as_ref(),
            );
            let input = self.stage_input(kind, db_index).await?;
            tracing::info!(session_id = %self.session.id, %execution_id, "resuming an interrupted execution");
            self.launch(db_index, index, &meta.id, execution_id, resolved, &input);
        }
        Ok(())
    }

    /// What the executions of a stage record are given.
    async fn stage_input(&self, kind: StageKind, db_index: u32) -> Result<AgentInput> {
        let store = &self.rt.store;
        Ok(match kind {
            StageKind::Synthesis => AgentInput::Synthesis {
                investigations: context::synthesis_input(store, &self.session.id, db_index).await?,
            },
            _ => AgentInput::Investigation {
                previous_stages: context::previous_stages(store, &self.session.id, db_index)
                    .await?,
            },
        })
    }
}
