//! The Alert reconcile, sans IO: from what is observed (the Alert, its
//! AgentExecutions, the namespace's configuration, admission, the clock) it
//! computes what to do ([`AlertOutcome`]): the new status, executions to
//! create or stop, Postgres writes and Events. `alert_io` performs
//! them. Everything is derived from resources on every call, so an operator
//! restart loses nothing and a repeated reconcile changes nothing.
//!
//! Stage records live in `status.stages`; each lists its executions by their
//! deterministic names. Executions a record lists but that do not exist yet
//! are created again (the status is written after creation, so this only
//! happens when a previous reconcile stopped half-way).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use tarsy_chain::{
    ExecutionView, ExecutiveSummaryView, SessionView, StageView, StopReason, decide,
};
use tarsy_config::{Config, ResolveError};
use tarsy_core::{
    Cost, ExecutionStatus, McpSelection, ResolvedAgentConfig, ScoreStatus, SessionEndReason,
    SessionStatus, StageKind,
};
use tarsy_crds::contract::{ExecutionRequest, execution_for, execution_name};
use tarsy_crds::{
    AgentExecution, Alert, AlertPhase, AlertStatus, ChatRequestSpec, CostStatus,
    MAX_STATUS_TEXT_CHARS, ResolvedConfigSpec, StageRef, StageStatus, UnstartedExecution, clip,
};
use tarsy_exec::intake::new_session;
use tarsy_exec::memory::{REFLECTOR_TIMEOUT, Reflector};
use tarsy_exec::plan::chain_plan;
use tarsy_exec::scoring::Judgement;
use tarsy_exec::workflow::{Effect, StageRecord, Workflow};
use tarsy_masking::MaskingService;
use tarsy_store::{ChatUserMessage, ScoreBadge, Session, SessionOutcome, Stage};

use crate::conditions;

pub use tarsy_crds::STOP_ANNOTATION;

/// How often a Pending alert re-checks admission and a running one re-checks
/// its deadline at the latest.
pub const PENDING_RECHECK: Duration = Duration::from_secs(10);
/// How often an Alert held by its namespace's spent daily budget looks
/// again (a raised limit, or the next day).
pub const BUDGET_RECHECK: Duration = Duration::from_secs(60);

pub use tarsy_exec::workflow::StoreOp;

/// A Kubernetes Event to publish about the Alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventNote {
    /// Warning (true) or Normal.
    pub warning: bool,
    /// CamelCase reason, e.g. `StageStarted`.
    pub reason: String,
    /// Human text (never a secret).
    pub note: String,
}

/// The executive summary the chain state machine asked for. The IO layer
/// makes the call in the background and stores the summary (or why it
/// failed) in the session row; the next reconcile receives it
/// ([`SummaryProgress::Done`]), writes it to `status.executiveSummary` (or
/// `status.executiveSummaryError`) and completes the session. An operator
/// that restarts in between asks again (the row's summary is reused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRequest {
    /// Session id (the Alert UID).
    pub session_id: String,
    /// Name of the session's Chain (its summary provider is resolved from it).
    pub chain: String,
    /// The analysis to summarize.
    pub final_analysis: String,
}

/// Everything one reconcile needs to know.
#[derive(Debug, Clone, Copy)]
pub struct AlertInputs<'a> {
    /// The Alert (with name, namespace, uid).
    pub alert: &'a Alert,
    /// The configuration of the Alert's namespace.
    pub config: &'a Config,
    /// The Alert's AgentExecutions, by name.
    pub executions: &'a BTreeMap<String, AgentExecution>,
    /// Whether the concurrency limit lets this session start now.
    pub admitted: bool,
    /// Where the executive summary call the IO layer runs stands.
    pub summary: &'a SummaryProgress,
    /// Masks alert data before it is stored (`None`: unavailable; the data
    /// is stored unmasked, fail-open).
    pub alert_masker: Option<&'a MaskingService>,
    /// How long a finished Alert is kept before it is deleted (`None`:
    /// forever); its session stays listed.
    pub alert_ttl: Option<Duration>,
    /// A follow-up chat question the API placed (its records are in
    /// Postgres, [`tarsy_crds::contract::CHAT_ANNOTATION`] names its stage)
    /// whose AgentExecution does not exist yet.
    pub chat: Option<&'a ChatRequest>,
    /// The session's scoring as Postgres has it (finished Alerts).
    pub scoring: &'a ScoringState,
    /// The session's reflectors that have not ended, as Postgres has them
    /// (finished Alerts).
    pub reflectors: &'a [OpenReflector],
    /// What the session's LLM calls cost so far (none before the first).
    pub cost: Option<Cost>,
    /// Why a pending session must wait for its scope's daily budget (none:
    /// it need not).
    pub hold: Option<&'a str>,
    /// The clock.
    pub now: Timestamp,
}

/// A chat question waiting for its AgentExecution, as the API stored it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The session asked about.
    pub session: Session,
    /// The chat stage answering it.
    pub stage: Stage,
    /// The question.
    pub message: ChatUserMessage,
}

/// A finished session's scoring, as read from Postgres for a reconcile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScoringState {
    /// The session's score (`None`: never scored).
    pub badge: Option<ScoreBadge>,
    /// Why the latest attempt failed, when it did.
    pub last_error: Option<String>,
    /// How many attempts have ended (completed or failed).
    pub ended_attempts: u32,
    /// The attempt in progress, if any: its records.
    pub running: Option<Judgement>,
    /// The running attempt's judge still has to be started: the Alert asks
    /// for it ([`tarsy_crds::contract::SCORE_ANNOTATION`]), its stage is
    /// pending and no AgentExecution runs it yet.
    pub requested: bool,
}

/// A reflector of the session (investigation memory learning from it) that
/// has not ended, as read from Postgres for a reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenReflector {
    /// Its records.
    pub reflector: Reflector,
    /// Its stage has not started: nothing runs it yet.
    pub waiting: bool,
}

/// The executive summary call, which runs outside the reconcile (a slow
/// provider never holds a reconcile worker): asked for through
/// [`AlertOutcome::summarize`], its result comes back here and the
/// reconcile records it in the status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SummaryProgress {
    /// Not running (not asked yet, or asked before an operator restart).
    #[default]
    Idle,
    /// Being generated.
    Running,
    /// Generated (`Ok`) or failed with the reason (`Err`, fail-open).
    Done(Result<String, String>),
}

/// What one reconcile decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlertOutcome {
    /// The complete status to apply.
    pub status: AlertStatus,
    /// AgentExecutions to create (deterministic names; AlreadyExists is fine).
    pub create: Vec<AgentExecution>,
    /// Executions to stop, by name.
    pub stop: Vec<(String, StopReason)>,
    /// Postgres writes, to perform before anything else.
    pub store: Vec<StoreOp>,
    /// Events to publish.
    pub events: Vec<EventNote>,
    /// The executive summary to generate (the session finishes on a later
    /// reconcile, once the summary or its error came back).
    pub summarize: Option<SummaryRequest>,
    /// When to look again even if nothing changes.
    pub requeue: Option<Duration>,
    /// The Alert finished longer ago than its TTL: delete it (keeping its
    /// session listed).
    pub expire: bool,
    /// The session completed and its chain scores sessions: start a scoring
    /// attempt (the IO layer writes its records and asks for its judge on
    /// the Alert; a later reconcile creates the judge's AgentExecution).
    pub score: Option<String>,
}

impl AlertOutcome {
    fn event(&mut self, warning: bool, reason: &str, note: impl Into<String>) {
        self.events.push(EventNote {
            warning,
            reason: reason.to_string(),
            note: note.into(),
        });
    }
}

/// Runs one reconcile of an Alert.
pub fn reconcile_alert(inputs: &AlertInputs<'_>) -> AlertOutcome {
    let alert = inputs.alert;
    let mut out = AlertOutcome {
        status: alert.status.clone().unwrap_or_default(),
        ..AlertOutcome::default()
    };
    out.status.observed_generation = alert.metadata.generation;
    if let Some(cost) = &inputs.cost {
        out.status.cost = Some(CostStatus::of(cost));
    }
    let phase = out.status.phase.unwrap_or(AlertPhase::Pending);
    if phase.is_terminal() {
        if let Some(request) = inputs.chat {
            answer_chat(&mut out, inputs, request);
        }
        follow_scoring(&mut out, inputs);
        follow_reflectors(&mut out, inputs);
        expire_after_ttl(&mut out, inputs.alert_ttl, inputs.now);
        return out;
    }
    let uid = alert.metadata.uid.clone().unwrap_or_default();
    let generation = alert.metadata.generation;
    let now = inputs.now;

    // 1. The chain.
    let chain = match inputs.config.chain_for_alert(
        &alert.spec.alert_type,
        alert
            .status
            .as_ref()
            .and_then(|s| s.chain.as_deref())
            .or(alert.spec.chain_ref.as_deref()),
    ) {
        Ok(chain) => chain,
        Err(e) => {
            let reason = match e {
                ResolveError::ChainNotFound(_) => "ChainNotFound",
                ResolveError::NoChainForAlertType(_) => "NoChainForAlertType",
                ResolveError::AmbiguousAlertType { .. } => "AmbiguousAlertType",
                _ => "InvalidConfig",
            };
            conditions::set(
                &mut out.status.conditions,
                conditions::CHAIN_RESOLVED,
                false,
                reason,
                e.to_string(),
                generation,
                now,
            );
            fail(
                &mut out,
                &uid,
                reason,
                e.to_string(),
                generation,
                now,
                false,
            );
            return out;
        }
    };
    conditions::set(
        &mut out.status.conditions,
        conditions::CHAIN_RESOLVED,
        true,
        "Resolved",
        format!("chain {}", chain.name),
        generation,
        now,
    );
    out.status.chain = Some(chain.name.clone());
    out.status.session_id = Some(uid.clone());
    // The row exists once the session left Pending.
    if phase == AlertPhase::Pending {
        let scope = tarsy_crds::contract::memory_scope(
            alert.metadata.namespace.as_deref().unwrap_or_default(),
            alert
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(tarsy_crds::contract::LABEL_PROJECT))
                .map(String::as_str),
        );
        out.store.push(StoreOp::CreateSession(new_session(
            uid.clone(),
            &chain.name,
            &alert.spec.submission(""),
            inputs.alert_masker,
            Some(scope),
        )));
    }
    let cancel = alert.spec.cancel == Some(true);

    // 2. Admission.
    if phase == AlertPhase::Pending {
        if cancel {
            out.status.phase = Some(AlertPhase::Cancelled);
            out.status.completed_at = Some(Time(now));
            conditions::set(
                &mut out.status.conditions,
                conditions::READY,
                false,
                "Cancelled",
                "cancelled before it started",
                generation,
                now,
            );
            out.store.push(StoreOp::FinishSession {
                session_id: uid,
                outcome: SessionOutcome {
                    status: SessionStatus::Cancelled,
                    final_analysis: None,
                    executive_summary: None,
                    executive_summary_error: None,
                    error_message: Some(StopReason::Cancelled.message().into()),
                    end_reason: None,
                },
            });
            out.event(false, "Cancelled", "cancelled before it started");
            return out;
        }
        // A scope whose daily budget is spent holds its new sessions.
        if let Some(why) = inputs.hold {
            out.status.phase = Some(AlertPhase::Pending);
            conditions::set(
                &mut out.status.conditions,
                conditions::ADMITTED,
                false,
                "BudgetExhausted",
                why,
                generation,
                now,
            );
            out.store.push(StoreOp::HoldSession {
                session_id: uid,
                reason: why.to_string(),
            });
            out.requeue = Some(BUDGET_RECHECK);
            return out;
        }
        if !inputs.admitted {
            out.status.phase = Some(AlertPhase::Pending);
            conditions::set(
                &mut out.status.conditions,
                conditions::ADMITTED,
                false,
                "ConcurrencyLimit",
                "waiting: maxConcurrentSessions are running",
                generation,
                now,
            );
            out.requeue = Some(PENDING_RECHECK);
            return out;
        }
        conditions::set(
            &mut out.status.conditions,
            conditions::ADMITTED,
            true,
            "Admitted",
            "session started",
            generation,
            now,
        );
        out.status.phase = Some(AlertPhase::InProgress);
        out.status.started_at = Some(Time(now));
        out.store.push(StoreOp::StartSession {
            session_id: uid.clone(),
        });
        out.event(
            false,
            "SessionStarted",
            format!("running chain {}", chain.name),
        );
    }

    // 3. The chain state machine, applied until it waits.
    let plan = chain_plan(inputs.config, chain);
    let timeout = match inputs.config.session_timeout(&chain.spec) {
        Ok(t) => t,
        Err(e) => {
            fail(
                &mut out,
                &uid,
                "InvalidConfig",
                e.to_string(),
                generation,
                now,
                true,
            );
            return out;
        }
    };
    let started = out
        .status
        .started_at
        .as_ref()
        .map_or(now.as_second(), |t| t.0.as_second());
    let deadline = started.saturating_add(i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX));
    let deadline_passed = now.as_second() >= deadline;
    let deadline_at = Timestamp::from_second(deadline).ok();

    let mut executions = inputs.executions.clone();
    // A summary that came back goes to the status, which keeps it.
    if let SummaryProgress::Done(result) = inputs.summary
        && out.status.executive_summary.is_none()
        && out.status.executive_summary_error.is_none()
    {
        match result {
            Ok(text) => out.status.executive_summary = Some(clip(text, MAX_STATUS_TEXT_CHARS)),
            Err(e) => {
                out.status.executive_summary_error = Some(clip(e, MAX_STATUS_TEXT_CHARS));
                out.event(true, "ExecutiveSummaryFailed", e.clone());
            }
        }
    }
    let mut summary = match (
        &out.status.executive_summary,
        &out.status.executive_summary_error,
        inputs.summary,
    ) {
        (Some(text), _, _) => ExecutiveSummaryView::Generated(text.clone()),
        (None, Some(error), _) => ExecutiveSummaryView::Failed(error.clone()),
        (None, None, SummaryProgress::Running) => ExecutiveSummaryView::Requested,
        (None, None, _) => ExecutiveSummaryView::NotRequested,
    };
    mark_degraded(&mut out.status, &executions, generation, now);
    let selection = alert.spec.mcp_selection.as_ref().map(McpSelection::from);
    let workflow = Workflow {
        config: inputs.config,
        chain: &chain.spec,
        session_id: &uid,
        selection: selection.as_ref(),
    };
    let timing = StageTiming {
        now,
        deadline: deadline_at,
    };
    for _ in 0..16 {
        let mut view = session_view(&out.status, &executions, cancel, deadline_passed, &summary);
        view.spent = inputs.cost;
        let actions = decide(&plan, &view);
        if actions.is_empty() {
            break;
        }
        for action in actions {
            let step = workflow.apply(&mut view, action);
            out.store.extend(step.store);
            match step.effect {
                Effect::StartStage(record) => {
                    start_stage(&mut out, inputs, &record, &mut executions, timing);
                }
                Effect::FinishStage {
                    db_index,
                    status,
                    error,
                } => finish_stage(&mut out, db_index, status, error, now),
                Effect::Stop {
                    reason,
                    executions: which,
                } => {
                    if reason == StopReason::Cancelled {
                        out.status.phase = Some(AlertPhase::Cancelling);
                    }
                    for (stage, index) in which {
                        if let Some(name) = execution_at(&out.status, stage, index) {
                            if let Some(ae) = executions.get_mut(&name) {
                                ae.annotations_mut()
                                    .insert(STOP_ANNOTATION.into(), stop_value(reason).into());
                            }
                            out.stop.push((name, reason));
                        }
                    }
                }
                Effect::Summarize { final_analysis } => {
                    // The call is IO: ask for it and wait (the machine waits
                    // while the summary is Requested).
                    summary = ExecutiveSummaryView::Requested;
                    out.summarize = Some(SummaryRequest {
                        session_id: uid.clone(),
                        chain: chain.name.clone(),
                        final_analysis,
                    });
                }
                Effect::FinishSession {
                    status,
                    final_analysis,
                    error,
                    end_reason,
                } => {
                    finish_session(&mut out, status, final_analysis, error, generation, now);
                    if end_reason == Some(SessionEndReason::BudgetExhausted) {
                        let why = plan
                            .budget
                            .zip(inputs.cost)
                            .and_then(|(budget, spent)| budget.exhausted_by(&spent))
                            .unwrap_or_else(|| "the session's budget is spent".into());
                        budget_exhausted(&mut out, &why, generation, now);
                    }
                    if status == SessionStatus::Completed
                        && inputs.config.scoring_enabled(&chain.spec)
                    {
                        out.score = Some(uid.clone());
                    }
                    return out;
                }
            }
        }
    }

    // 4. Still running: current stage and the deadline.
    if let Some(last) = out.status.stages.last() {
        out.status.current_stage = Some(last.name.clone());
        out.status.current_stage_index = Some(last.index);
    }
    let left = deadline.saturating_sub(now.as_second()).max(1);
    out.requeue =
        Some(Duration::from_secs(u64::try_from(left).unwrap_or(1)).min(PENDING_RECHECK * 30));
    out
}

/// The AgentExecution answering a chat question; or, when the chat agent
/// cannot be resolved any more (chat disabled meanwhile, the chain gone),
/// the question's records closed with the reason.
fn answer_chat(out: &mut AlertOutcome, inputs: &AlertInputs<'_>, request: &ChatRequest) {
    let stage = &request.stage;
    let index = u32::try_from(stage.stage_index).unwrap_or(u32::MAX);
    let chat_id = stage.chat_id.clone().unwrap_or_default();
    let answer = tarsy_exec::chat::Answer::new(&request.session.id, &chat_id, index);
    let agent = match tarsy_exec::intake::chat_agent(inputs.config, &request.session) {
        Ok(agent) => agent,
        Err(e) => {
            let error = format!("the chat answer could not start: {e}");
            fail_added(out, &answer.execution_id, &answer.stage_id, &error);
            out.event(true, "ChatNotStarted", error);
            return;
        }
    };
    out.create.push(added_execution(
        inputs,
        &request.session.chain_id,
        StageRef {
            index,
            name: tarsy_exec::ids::CHAT_STAGE_NAME.to_string(),
            id: Some(answer.stage_id.clone()),
        },
        &agent.config,
        agent.timeout,
        tarsy_crds::ExecutionKind::Chat,
        Some(ChatRequestSpec {
            chat_id,
            message_id: request.message.id.clone(),
            question: clip(&request.message.content, MAX_SPEC_QUESTION_CHARS),
            author: request.message.author.clone(),
        }),
    ));
    out.event(
        false,
        "ChatStarted",
        format!("answering a chat question (stage {index})"),
    );
}

/// A finished session's scoring: its judge's AgentExecution once asked
/// for; an attempt whose judge stopped without recording its end closed;
/// the score and the `Scored` condition in the status.
fn follow_scoring(out: &mut AlertOutcome, inputs: &AlertInputs<'_>) {
    let scoring = inputs.scoring;
    let generation = inputs.alert.metadata.generation;
    if let Some(judgement) = &scoring.running {
        match added_run(inputs, &judgement.stage_id) {
            AddedRun::Missing if scoring.requested => start_judge(out, inputs, judgement),
            AddedRun::Ended => {
                // The runner ends the attempt before it records the
                // execution's end: an attempt still running means its pod
                // died first.
                let error = "the judge stopped before it recorded a score".to_string();
                close_attempt(out, judgement, error);
                return;
            }
            _ => {}
        }
    }
    let Some(badge) = &scoring.badge else { return };
    out.status.score = badge.score;
    out.status.scoring_attempts_ended = Some(scoring.ended_attempts);
    let (ok, reason, message) = match badge.status {
        ScoreStatus::InProgress => (false, "Scoring", "the judge is at work".to_string()),
        ScoreStatus::Completed => {
            let tags = if badge.failure_tags.is_empty() {
                "none".to_string()
            } else {
                badge.failure_tags.join(", ")
            };
            let score = badge.score.unwrap_or_default();
            (
                true,
                "Scored",
                format!("{score}/100 · failure tags: {tags}"),
            )
        }
        ScoreStatus::Failed => (
            false,
            "ScoringFailed",
            scoring
                .last_error
                .clone()
                .unwrap_or_else(|| "the scoring attempt failed".into()),
        ),
    };
    conditions::set(
        &mut out.status.conditions,
        conditions::SCORED,
        ok,
        reason,
        message,
        generation,
        inputs.now,
    );
}

/// The judge's AgentExecution, or, when no judge can be resolved any more
/// (the chain gone), the attempt closed with the reason.
fn start_judge(out: &mut AlertOutcome, inputs: &AlertInputs<'_>, judgement: &Judgement) {
    let chain = inputs
        .alert
        .status
        .as_ref()
        .and_then(|s| s.chain.clone())
        .unwrap_or_default();
    let (judge, timeout) = match tarsy_exec::scoring::judge_of_chain(inputs.config, &chain) {
        Ok(found) => found,
        Err(e) => {
            close_attempt(out, judgement, format!("the judge could not start: {e}"));
            return;
        }
    };
    out.create.push(added_execution(
        inputs,
        &chain,
        StageRef {
            index: judgement.stage_index,
            name: tarsy_exec::scoring::SCORING_STAGE_NAME.to_string(),
            id: Some(judgement.stage_id.clone()),
        },
        &judge,
        timeout,
        tarsy_crds::ExecutionKind::Scoring,
        None,
    ));
    out.event(
        false,
        "ScoringStarted",
        format!(
            "a judge scores the investigation (stage {})",
            judgement.stage_index
        ),
    );
}

/// Ends an attempt that cannot go on: its execution and stage failed, the
/// attempt failed, all with the reason.
fn close_attempt(out: &mut AlertOutcome, judgement: &Judgement, error: String) {
    fail_added(out, &judgement.execution_id, &judgement.stage_id, &error);
    out.store.push(StoreOp::FailScore {
        session_id: judgement.session_id.clone(),
        attempt_id: judgement.attempt_id.clone(),
        error: error.clone(),
    });
    out.event(true, "ScoringFailed", error);
}

/// A finished session's reflectors: the AgentExecution of each one
/// waiting; one whose AgentExecution ended without recording its end (its
/// pod died) closed.
fn follow_reflectors(out: &mut AlertOutcome, inputs: &AlertInputs<'_>) {
    for open in inputs.reflectors {
        let reflector = &open.reflector;
        match added_run(inputs, &reflector.stage_id) {
            AddedRun::Missing if open.waiting => start_reflector(out, inputs, reflector),
            // The runner records the stage's end before its status: a
            // stage still open means the pod died first.
            AddedRun::Ended => {
                let error = "the reflector stopped before it recorded its end".to_string();
                close_reflector(out, reflector, error);
            }
            _ => {}
        }
    }
}

/// The reflector's AgentExecution, or, when it cannot be resolved any more
/// (the chain gone), its records closed with the reason.
fn start_reflector(out: &mut AlertOutcome, inputs: &AlertInputs<'_>, reflector: &Reflector) {
    let chain = inputs
        .alert
        .status
        .as_ref()
        .and_then(|s| s.chain.clone())
        .unwrap_or_default();
    let agent = inputs
        .config
        .chain(&chain)
        .ok_or_else(|| format!("the chain {chain:?} is gone"))
        .and_then(|c| {
            inputs
                .config
                .resolve_reflector(&c.spec)
                .map_err(|e| e.to_string())
        });
    let agent = match agent {
        Ok(agent) => agent,
        Err(e) => {
            close_reflector(
                out,
                reflector,
                format!("the reflector could not start: {e}"),
            );
            return;
        }
    };
    out.create.push(added_execution(
        inputs,
        &chain,
        StageRef {
            index: reflector.stage_index,
            name: reflector.stage_name().to_string(),
            id: Some(reflector.stage_id.clone()),
        },
        &agent,
        REFLECTOR_TIMEOUT,
        tarsy_crds::ExecutionKind::Memory,
        None,
    ));
    out.event(
        false,
        "MemoryLearning",
        format!(
            "a reflector learns from the investigation (stage {})",
            reflector.stage_index
        ),
    );
}

/// Ends a reflector that cannot go on: its execution and stage failed with
/// the reason (nothing is learned; the session is untouched).
fn close_reflector(out: &mut AlertOutcome, reflector: &Reflector, error: String) {
    fail_added(out, &reflector.execution_id, &reflector.stage_id, &error);
    out.event(true, "MemoryNotLearned", error);
}

/// Where the AgentExecution of a stage added to a finished session stands.
enum AddedRun {
    /// Not created (or not seen yet).
    Missing,
    /// Created, not ended.
    Running,
    /// Ended (its phase is terminal).
    Ended,
}

fn added_run(inputs: &AlertInputs<'_>, stage_id: &str) -> AddedRun {
    let ae = inputs
        .executions
        .values()
        .find(|ae| ae.spec.stage.id.as_deref() == Some(stage_id));
    match ae.and_then(|ae| ae.status.as_ref()).and_then(|s| s.phase) {
        _ if ae.is_none() => AddedRun::Missing,
        Some(phase) if phase.is_terminal() => AddedRun::Ended,
        _ => AddedRun::Running,
    }
}

/// The AgentExecution of a stage added to a finished session (a chat
/// answer, a judge, a reflector): one agent, `timeout` from now.
fn added_execution(
    inputs: &AlertInputs<'_>,
    chain: &str,
    stage: StageRef,
    agent: &ResolvedAgentConfig,
    timeout: Duration,
    kind: tarsy_crds::ExecutionKind,
    chat: Option<ChatRequestSpec>,
) -> AgentExecution {
    let deadline = inputs
        .now
        .checked_add(SignedDuration::try_from(timeout).unwrap_or_default())
        .ok()
        .map(Time);
    execution_for(
        inputs.alert,
        chain,
        ExecutionRequest {
            stage,
            agent_name: agent.agent_name.clone(),
            display_name: agent.display_name.clone(),
            agent_index: 1,
            kind,
            resolved: ResolvedConfigSpec::from(agent),
            chat,
            deadline,
        },
    )
}

/// Fails the records of an added stage that cannot go on: its execution
/// and the stage, with the reason.
fn fail_added(out: &mut AlertOutcome, execution_id: &str, stage_id: &str, error: &str) {
    out.store.push(StoreOp::FailExecution {
        execution_id: execution_id.to_string(),
        error: error.to_string(),
    });
    out.store.push(StoreOp::FinishStage {
        stage_id: stage_id.to_string(),
        status: ExecutionStatus::Failed,
        error: Some(error.to_string()),
    });
}

/// Longest question an AgentExecution carries (its schema bound); longer
/// questions are clipped there, the stored question stays whole.
const MAX_SPEC_QUESTION_CHARS: usize = 16_384;

/// A finished Alert's TTL (like a Job's `ttlSecondsAfterFinished`): expire
/// it once passed, else look again when it will have.
fn expire_after_ttl(out: &mut AlertOutcome, ttl: Option<Duration>, now: Timestamp) {
    let Some(ttl) = ttl else { return };
    // An Alert finished before `completedAt` was recorded counts from now.
    let finished = out
        .status
        .completed_at
        .as_ref()
        .map_or(now.as_second(), |t| t.0.as_second());
    let ttl_secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    let left = finished
        .saturating_add(ttl_secs)
        .saturating_sub(now.as_second());
    if left <= 0 {
        out.expire = true;
    } else {
        out.requeue = Some(Duration::from_secs(u64::try_from(left).unwrap_or(1)));
    }
}

/// Sets the `Degraded` condition when an execution could not use some of
/// its MCP servers (the answer may be incomplete), naming them; never
/// cleared within a session, since the investigation ran without them.
fn mark_degraded(
    status: &mut AlertStatus,
    executions: &BTreeMap<String, AgentExecution>,
    generation: Option<i64>,
    now: Timestamp,
) {
    let mut unavailable: Vec<String> = Vec::new();
    for (name, ae) in executions {
        let outcomes = ae.status.as_ref().map(|s| s.mcp_servers.as_slice());
        for o in outcomes.unwrap_or_default().iter().filter(|o| !o.healthy) {
            let error = o.error.as_deref().unwrap_or("unavailable");
            unavailable.push(format!("{} ({name}): {error}", o.name));
        }
    }
    if unavailable.is_empty() {
        return;
    }
    conditions::set(
        &mut status.conditions,
        conditions::DEGRADED,
        true,
        "McpServerUnavailable",
        format!("MCP servers unavailable: {}", unavailable.join("; ")),
        generation,
        now,
    );
}

/// The stop annotation's value for `reason`.
pub fn stop_value(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Cancelled => tarsy_crds::STOP_CANCELLED,
        StopReason::TimedOut => tarsy_crds::STOP_TIMED_OUT,
    }
}

/// The stop reason an execution was annotated with.
pub fn stop_requested(ae: &AgentExecution) -> Option<StopReason> {
    match ae
        .metadata
        .annotations
        .as_ref()?
        .get(STOP_ANNOTATION)?
        .as_str()
    {
        tarsy_crds::STOP_CANCELLED => Some(StopReason::Cancelled),
        tarsy_crds::STOP_TIMED_OUT => Some(StopReason::TimedOut),
        _ => None,
    }
}

fn execution_at(status: &AlertStatus, stage: u32, index: u32) -> Option<String> {
    let record = status.stages.iter().find(|s| s.index == stage)?;
    record
        .executions
        .get(usize::try_from(index).ok()?.checked_sub(1)?)
        .cloned()
}

/// The state machine's view of the session, from the status's stage records
/// and the executions' phases.
pub fn session_view(
    status: &AlertStatus,
    executions: &BTreeMap<String, AgentExecution>,
    cancel: bool,
    deadline_passed: bool,
    summary: &ExecutiveSummaryView,
) -> SessionView {
    let mut stages: Vec<StageView> = Vec::new();
    let mut next_config = 0usize;
    for record in &status.stages {
        let kind = record.kind.map_or(StageKind::Investigation, Into::into);
        let config_index = if kind == StageKind::Synthesis {
            stages.last().map_or(0, |p| p.config_index)
        } else {
            next_config += 1;
            next_config - 1
        };
        let views = record
            .executions
            .iter()
            .zip(1u32..)
            .map(
                |(name, index)| match record.unstarted.iter().find(|u| &u.name == name) {
                    Some(u) => ExecutionView {
                        index,
                        display_name: u.display_name.clone(),
                        status: ExecutionStatus::Failed,
                        final_analysis: None,
                        error: Some(u.error.clone()),
                        stopping: false,
                    },
                    None => execution_view(executions.get(name), name, index),
                },
            )
            .collect();
        stages.push(StageView {
            db_index: record.index,
            config_index,
            kind,
            name: record.name.clone(),
            status: record.phase.into(),
            executions: views,
        });
    }
    let phase = status.phase.unwrap_or(AlertPhase::Pending);
    SessionView {
        status: phase.into(),
        cancel_requested: cancel,
        deadline_passed,
        stages,
        executive_summary: summary.clone(),
        spent: None,
    }
}

fn execution_view(ae: Option<&AgentExecution>, name: &str, index: u32) -> ExecutionView {
    let status = ae.and_then(|a| a.status.as_ref());
    ExecutionView {
        index,
        display_name: ae.map_or_else(|| name.to_string(), |a| a.spec.display_name.clone()),
        status: status
            .and_then(|s| s.phase)
            .map_or(ExecutionStatus::Pending, Into::into),
        final_analysis: status.and_then(|s| s.final_analysis.clone()),
        error: status.and_then(|s| s.error.clone()),
        stopping: ae.and_then(stop_requested).is_some(),
    }
}

/// When a stage starts and when its session must end.
#[derive(Debug, Clone, Copy)]
struct StageTiming {
    now: Timestamp,
    deadline: Option<Timestamp>,
}

fn start_stage(
    out: &mut AlertOutcome,
    inputs: &AlertInputs<'_>,
    record: &StageRecord,
    executions: &mut BTreeMap<String, AgentExecution>,
    timing: StageTiming,
) {
    let alert = inputs.alert;
    let alert_name = alert.metadata.name.clone().unwrap_or_default();
    let chain_name = out.status.chain.clone().unwrap_or_default();
    let mut names = Vec::new();
    let mut unstarted = Vec::new();
    for exec in &record.executions {
        let name = execution_name(&alert_name, record.db_index, &exec.display_name);
        names.push(name.clone());
        let config = match &exec.config {
            Ok(config) => config,
            Err(error) => {
                unstarted.push(UnstartedExecution {
                    name,
                    display_name: exec.display_name.clone(),
                    error: clip(error, 4096),
                });
                continue;
            }
        };
        let ae = execution_for(
            alert,
            &chain_name,
            ExecutionRequest {
                stage: StageRef {
                    index: record.db_index,
                    name: record.name.clone(),
                    id: Some(record.id.clone()),
                },
                agent_name: exec.agent_name.clone(),
                display_name: exec.display_name.clone(),
                agent_index: exec.index,
                kind: exec.kind,
                resolved: ResolvedConfigSpec::from(config),
                chat: None,
                deadline: timing.deadline.map(Time),
            },
        );
        executions.entry(name).or_insert_with(|| ae.clone());
        out.create.push(ae);
    }
    for u in &unstarted {
        out.event(
            true,
            "ExecutionNotStarted",
            format!(
                "stage {} ({}), agent {}: {}",
                record.db_index, record.name, u.display_name, u.error
            ),
        );
    }
    out.status.stages.push(StageStatus {
        index: record.db_index,
        name: record.name.clone(),
        kind: Some(record.kind),
        stage_id: Some(record.id.clone()),
        phase: tarsy_crds::ExecutionPhase::Active,
        executions: names,
        parallel_type: record.parallel_type,
        success_policy: record.success_policy,
        started_at: Some(Time(timing.now)),
        completed_at: None,
        error: None,
        unstarted,
    });
    out.status.current_stage = Some(record.name.clone());
    out.status.current_stage_index = Some(record.db_index);
    out.event(
        false,
        "StageStarted",
        format!(
            "stage {} ({}) started with {} execution(s)",
            record.db_index,
            record.name,
            record.executions.len()
        ),
    );
}

fn finish_stage(
    out: &mut AlertOutcome,
    db_index: u32,
    status: ExecutionStatus,
    error: Option<String>,
    now: Timestamp,
) {
    let Some(record) = out.status.stages.iter_mut().find(|s| s.index == db_index) else {
        return;
    };
    record.phase = status.into();
    record.completed_at = Some(Time(now));
    record.error = error.as_deref().map(|e| clip(e, 4096));
    let name = record.name.clone();
    let failed = status != ExecutionStatus::Completed;
    let note = match &error {
        Some(e) => format!("stage {db_index} ({name}) {status}: {e}"),
        None => format!("stage {db_index} ({name}) {status}"),
    };
    out.event(
        failed,
        if failed {
            "StageFailed"
        } else {
            "StageCompleted"
        },
        note,
    );
}

fn finish_session(
    out: &mut AlertOutcome,
    status: SessionStatus,
    final_analysis: Option<String>,
    error: Option<String>,
    generation: Option<i64>,
    now: Timestamp,
) {
    let phase: AlertPhase = status.into();
    out.status.phase = Some(phase);
    out.status.completed_at = Some(Time(now));
    out.status.final_analysis = final_analysis
        .as_deref()
        .map(|a| clip(a, MAX_STATUS_TEXT_CHARS));
    out.status.error = error.as_deref().map(|e| clip(e, MAX_STATUS_TEXT_CHARS));
    let ok = phase == AlertPhase::Completed;
    conditions::set(
        &mut out.status.conditions,
        conditions::READY,
        ok,
        &format!("{phase:?}"),
        error
            .clone()
            .unwrap_or_else(|| "investigation finished".into()),
        generation,
        now,
    );
    out.event(
        !ok,
        &format!("Session{phase:?}"),
        error.unwrap_or_else(|| "investigation completed".into()),
    );
}

/// A session that ended on its budget says so: the `Ready` condition's
/// reason and a Warning event (later stages did not start).
fn budget_exhausted(out: &mut AlertOutcome, why: &str, generation: Option<i64>, now: Timestamp) {
    let message = format!("{why}: the agents concluded early and later stages did not start");
    conditions::set(
        &mut out.status.conditions,
        conditions::READY,
        true,
        "BudgetExhausted",
        message.clone(),
        generation,
        now,
    );
    out.event(true, "BudgetExhausted", message);
}

fn fail(
    out: &mut AlertOutcome,
    uid: &str,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: Timestamp,
    session_exists: bool,
) {
    out.status.phase = Some(AlertPhase::Failed);
    out.status.completed_at = Some(Time(now));
    out.status.error = Some(clip(&message, MAX_STATUS_TEXT_CHARS));
    conditions::set(
        &mut out.status.conditions,
        conditions::READY,
        false,
        reason,
        message.clone(),
        generation,
        now,
    );
    if session_exists {
        out.store.push(StoreOp::FinishSession {
            session_id: uid.to_string(),
            outcome: SessionOutcome {
                status: SessionStatus::Failed,
                final_analysis: None,
                executive_summary: None,
                executive_summary_error: None,
                error_message: Some(message.clone()),
                end_reason: None,
            },
        });
    }
    out.event(true, reason, message);
}
