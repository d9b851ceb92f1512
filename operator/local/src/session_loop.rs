//! One session's loop: ask the state machine what to do, do it, wait for
//! something to change (an execution ended, the summary came back, a cancel
//! request, the deadline), repeat until the session is terminal.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tarsy_chain::{Action, ChainPlan, SessionView, StopReason, decide};
use tarsy_config::Named;
use tarsy_config::model::ChainSpec;
use tarsy_core::{ExecutionStatus, McpSelection, ResolvedAgentConfig, SessionStatus, StageKind};
use tarsy_engine::ExecutionResult;
use tarsy_exec::plan::chain_plan;
use tarsy_exec::workflow::{
    self, Effect, StageRecord, StoreOp, Workflow, execution_ended, perform_all, stopped_outcome,
    summary_done,
};
use tarsy_exec::{AgentInput, Assignment, context, ids};
use tarsy_store::{Session, SessionOutcome};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Result, SessionError};
use crate::runtime::{Runtime, lock};
use crate::view;

/// Attempts of one action before the session is failed (storage errors
/// other than an unavailable store).
const MAX_ATTEMPTS: u32 = 5;

/// How often a session whose store is unavailable looks again.
const STORE_RECHECK: Duration = Duration::from_secs(2);

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
        end_reason: None,
    };
    if let Err(e) = rt.store.close_open_records(session_id, error).await {
        tracing::warn!(%session_id, error = %e, "cannot close the records the session left open");
    }
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

    /// Applies `action`; a step the store could not take is tried again:
    /// while the store is unavailable for as long as it takes (the store's
    /// own patience is one attempt; a session waits, it does not fail over
    /// an outage), otherwise a few times.
    async fn apply_with_retry(&mut self, action: Action) -> Result<()> {
        let mut attempt = 1;
        loop {
            match self.apply(action.clone()).await {
                Ok(()) => return Ok(()),
                Err(e) if e.is_transient() && !self.rt.shutdown.is_cancelled() => {
                    tracing::warn!(session_id = %self.session_id(), error = %e, "the store is unavailable; the session waits for it");
                    tokio::time::sleep(STORE_RECHECK).await;
                }
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
                if let Err(e) = &outcome {
                    tracing::warn!(session_id = %self.session_id(), error = %e, "executive summary failed (the session still completes)");
                }
                summary_done(&mut self.view, outcome);
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

        let stop = match running.stop {
            Some(Stop::Machine(reason)) => Some(reason),
            _ => None,
        };
        let (status, error) = stopped_outcome(stop, result.status, result.error.clone());
        let id = running.id.clone();
        // Stored before the session moves on, waiting out an unavailable
        // store as every session step does: an end left unrecorded would
        // be closed as failed when the session ends, and a completed
        // investigation would show a failed execution.
        loop {
            match self
                .rt
                .store
                .update_agent_execution_status(&id, status, error.as_deref())
                .await
            {
                Ok(_) => break,
                Err(e) if e.is_transient() && !self.rt.shutdown.is_cancelled() => {
                    tracing::warn!(execution_id = %id, error = %e, "the store is unavailable; the execution's end waits for it");
                    tokio::time::sleep(STORE_RECHECK).await;
                }
                Err(e) => {
                    tracing::warn!(execution_id = %id, error = %e, "cannot record execution status");
                    break;
                }
            }
        }
        execution_ended(
            &mut self.view,
            stage,
            index,
            status,
            error,
            result.final_analysis,
        );
        // What the session spent, for the budget checked before the next
        // stage (kept as last read when the store does not answer).
        if self.plan.budget.is_some() {
            match self.rt.store.session_cost(&self.session.id).await {
                Ok(spent) => self.view.spent = spent,
                Err(e) => {
                    tracing::warn!(session_id = %self.session.id, error = %e, "the session's spend cannot be read; its budget is not checked now")
                }
            }
        }
    }

    fn workflow(&self) -> Workflow<'_> {
        Workflow {
            config: &self.rt.config,
            chain: &self.chain.spec,
            session_id: &self.session.id,
            selection: self.selection.as_ref(),
        }
    }

    /// Applies one action: its store writes, then its effect here (tasks,
    /// tokens). The view takes the step only once both are done, so a
    /// failed attempt can be made again from the same view.
    async fn apply(&mut self, action: Action) -> Result<()> {
        let mut next = self.view.clone();
        let step = self.workflow().apply(&mut next, action);
        perform_all(&self.rt.store, &self.rt.publisher, &step.store).await?;
        match step.effect {
            Effect::StartStage(record) => self.start_stage(record).await?,
            Effect::FinishStage { .. } => {}
            Effect::Stop { reason, executions } => {
                for key in executions {
                    if let Some(r) = self.executions.get_mut(&key) {
                        r.stop = Some(Stop::Machine(reason));
                        r.cancel.cancel();
                    }
                }
            }
            Effect::Summarize { final_analysis } => {
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
            }
            Effect::FinishSession { status, .. } => {
                if let Some(s) = self.summary.take() {
                    s.abort();
                }
                self.rt.notify(&self.session.id).await;
                tracing::info!(session_id = %self.session.id, %status, "session finished");
                crate::scoring::after_finish(
                    &self.rt,
                    &self.session.id,
                    &self.session.chain_id,
                    status,
                )
                .await;
            }
        }
        self.view = next;
        Ok(())
    }

    /// Runs the executions of a started stage record.
    async fn start_stage(&mut self, record: StageRecord) -> Result<()> {
        let input = self.stage_input(record.kind, record.db_index).await?;
        for (e, config) in record.runnable() {
            self.launch(
                record.db_index,
                e.index,
                &record.id,
                e.id.clone(),
                config.clone(),
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
        config: ResolvedAgentConfig,
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
    /// unfinished: each continues from its stored conversation. One whose
    /// configuration no longer resolves fails with the reason.
    async fn resume_interrupted(&mut self, interrupted: Vec<(u32, u32)>) -> Result<()> {
        for (db_index, index) in interrupted {
            let Some(stage) = self.view.stages.iter().find(|s| s.db_index == db_index) else {
                continue;
            };
            let (config_index, kind) = (stage.config_index, stage.kind);
            let Some(execution_id) = self
                .executions
                .get(&(db_index, index))
                .map(|r| r.id.clone())
            else {
                continue;
            };
            match self.workflow().resolve(config_index, kind, index) {
                Ok(config) => {
                    let input = self.stage_input(kind, db_index).await?;
                    tracing::info!(session_id = %self.session.id, %execution_id, "resuming an interrupted execution");
                    let stage_id = ids::stage_id(&self.session.id, db_index);
                    self.launch(db_index, index, &stage_id, execution_id, config, &input);
                }
                Err(error) => {
                    let op = StoreOp::FailExecution {
                        execution_id,
                        error: error.clone(),
                    };
                    workflow::perform(&self.rt.store, self.rt.publisher.as_ref(), &op).await?;
                    execution_ended(
                        &mut self.view,
                        db_index,
                        index,
                        ExecutionStatus::Failed,
                        Some(error),
                        None,
                    );
                }
            }
        }
        Ok(())
    }

    /// What the executions of a stage record are given.
    async fn stage_input(&self, kind: StageKind, db_index: u32) -> Result<AgentInput> {
        Ok(context::stage_input(&self.rt.store, &self.session.id, kind, db_index).await?)
    }
}
