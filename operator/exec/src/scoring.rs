//! A judge scoring a finished session, the same in every mode: the attempt
//! and its records (a stage of kind `scoring` after the session's stages,
//! one execution), what the judge reads, and its answer read back into the
//! attempt. [`Judgement::start`] creates the attempt; whoever runs the
//! execution (this process in local mode, the scoring pod in a cluster)
//! calls [`Judgement::begin`] for its input, runs it through
//! [`crate::launch::Launcher`], records the execution's status, then
//! [`Judgement::end`]; [`Judgement::run`] is all of that in one process. Scoring runs
//! after the session's own outcome is final and never changes it:
//! everything here is about the attempt.

use std::sync::Arc;
use std::time::Duration;

use tarsy_config::Config;
use tarsy_core::control::ScoreError;

use tarsy_core::{
    EventPublisher, ExecutionKind, ExecutionStatus, ResolvedAgentConfig, ScoreStatus, StageKind,
};
use tarsy_engine::{ExecutionResult, ScoringContext};
use tarsy_events::lifecycle::{PublishedStage, publish_session_score};
use tarsy_store::{NewAgentExecution, NewStage, ScoreResult, SessionScore, Store, StoreError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::context::judged_investigation;
use crate::error::{ExecError, Result};
use crate::ids::{execution_id, stage_id};
use crate::launch::{AgentInput, Assignment, Launcher};

/// The judge that scores `session_id` now, on request: the session must
/// have finished, its chain must still resolve a judge, and no attempt may
/// be running (checked again, race-free, when the attempt starts). Returns
/// the judge and how long it may take (the chain's session timeout).
pub async fn judge_for(
    store: &Store,
    config: &Config,
    session_id: &str,
) -> Result<(ResolvedAgentConfig, Duration), ScoreError> {
    let session = match store.get_session(session_id).await {
        Ok(s) => s,
        Err(StoreError::NotFound { .. }) => {
            return Err(ScoreError::NotFound(session_id.to_string()));
        }
        Err(e) => return Err(store_refused(e)),
    };
    if !session.status.is_terminal() {
        return Err(ScoreError::NotFinished {
            status: session.status,
        });
    }
    if store
        .running_score(session_id)
        .await
        .map_err(store_refused)?
        .is_some()
    {
        return Err(ScoreError::Busy {
            session_id: session_id.to_string(),
        });
    }
    judge_of_chain(config, &session.chain_id)
}

/// The judge of chain `chain_id` and how long it may take (the chain's
/// session timeout).
pub fn judge_of_chain(
    config: &Config,
    chain_id: &str,
) -> Result<(ResolvedAgentConfig, Duration), ScoreError> {
    let chain = config.chain(chain_id).ok_or_else(|| {
        ScoreError::Invalid(format!(
            "chain {chain_id:?} is no longer configured: there is no judge for its sessions"
        ))
    })?;
    let judge = config
        .resolve_scoring(&chain.spec)
        .map_err(|e| ScoreError::Invalid(format!("cannot resolve the scoring agent: {e}")))?;
    let timeout = config
        .session_timeout(&chain.spec)
        .map_err(|e| ScoreError::Invalid(e.to_string()))?;
    Ok((judge, timeout))
}

/// The error of a refused [`Judgement::start`] as a scoring request says
/// it.
pub fn start_refused(session_id: &str, e: ExecError) -> ScoreError {
    match e {
        ExecError::Store(StoreError::Conflict { .. }) => ScoreError::Busy {
            session_id: session_id.to_string(),
        },
        ExecError::Store(StoreError::NotFound { .. }) => {
            ScoreError::NotFound(session_id.to_string())
        }
        ExecError::Store(e) => store_refused(e),
        ExecError::Invalid(m) => ScoreError::Invalid(m),
        other => ScoreError::Internal(other.to_string()),
    }
}

/// A store failure as a scoring request says it: unavailable (503) when
/// the store is, else internal.
fn store_refused(e: StoreError) -> ScoreError {
    match e.unavailable_message() {
        Some(m) => ScoreError::Unavailable(m),
        None => ScoreError::Internal(e.to_string()),
    }
}

/// Name of a judge's stage.
pub const SCORING_STAGE_NAME: &str = "Scoring";

/// One scoring attempt: where its records are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// The session judged.
    pub session_id: String,
    /// The attempt (`session_scores`).
    pub attempt_id: String,
    /// The judge's stage.
    pub stage_id: String,
    /// Its index among the session's stages.
    pub stage_index: u32,
    /// The judge's execution.
    pub execution_id: String,
}

impl Judgement {
    /// Starts the next scoring attempt of a finished session with the judge
    /// `agent`: the attempt (a conflict while another runs; published), then
    /// its stage and execution; `owner` is the process that runs it, when
    /// it runs in one that may restart (local mode: its pod id). Records
    /// that cannot be created fail the attempt.
    pub async fn start(
        store: &Store,
        publisher: &Arc<dyn EventPublisher>,
        session_id: &str,
        agent: &ResolvedAgentConfig,
        owner: Option<&str>,
    ) -> Result<Judgement> {
        let session = store.get_session(session_id).await?;
        if !session.status.is_terminal() {
            return Err(ExecError::Invalid(format!(
                "session {session_id} is {}: only a finished session is scored",
                session.status
            )));
        }
        let stage_index = crate::records::next_stage_index(store, session_id).await?;
        let execution = execution_id(session_id, stage_index, 1);
        let attempt = store
            .start_score_attempt(session_id, Some(&execution), owner)
            .await?;
        let judgement = Judgement {
            session_id: session_id.to_string(),
            attempt_id: attempt.id,
            stage_id: stage_id(session_id, stage_index),
            stage_index,
            execution_id: execution,
        };
        publish_session_score(
            publisher.as_ref(),
            session_id,
            &judgement.attempt_id,
            ScoreStatus::InProgress,
            None,
            &[],
        )
        .await;
        let created = async {
            store.create_stage(judgement.stage_row()).await?;
            store
                .create_agent_execution(judgement.execution_row(agent))
                .await
        }
        .await;
        if let Err(e) = created {
            let why = format!("the judge's records could not be created: {e}");
            judgement.abandon(store, publisher, &why).await;
            return Err(e.into());
        }
        Ok(judgement)
    }

    /// Runs the judge of a started attempt in this process: its input, its
    /// execution through `launcher` (stopped at `deadline` or when `cancel`
    /// fires), its status, then [`Judgement::end`]. Errors are about the
    /// attempt only.
    pub async fn run(
        &self,
        launcher: &Launcher,
        agent: ResolvedAgentConfig,
        deadline: Instant,
        cancel: CancellationToken,
    ) -> Result<SessionScore> {
        let store = &launcher.store;
        let publisher = &launcher.publisher;
        let prepared = async {
            let input = self.begin(store, publisher).await?;
            Ok::<_, ExecError>((store.get_session(&self.session_id).await?, input))
        }
        .await;
        let (session, input) = match prepared {
            Ok(p) => p,
            Err(e) => {
                let why = format!("cannot build what the judge reads: {e}");
                self.abandon(store, publisher, &why).await;
                return Err(e);
            }
        };
        let assignment = Assignment::new(
            &session,
            self.stage_id.clone(),
            self.execution_id.clone(),
            agent,
            input,
            deadline,
            cancel,
        );
        let result = launcher.run(assignment, None).await.result;
        if let Err(e) = store
            .update_agent_execution_status(
                &self.execution_id,
                result.status,
                result.error.as_deref(),
            )
            .await
        {
            tracing::warn!(execution_id = %self.execution_id, error = %e, "cannot record the judge's execution status");
        }
        self.end(store, publisher, &result).await
    }

    /// The attempt a judge's execution belongs to, for the process that
    /// runs it elsewhere (a scoring pod): the session's running attempt,
    /// which must be this execution's.
    pub async fn of_execution(
        store: &Store,
        session_id: &str,
        stage_index: u32,
        execution_id: &str,
    ) -> Result<Judgement> {
        let attempt = store
            .running_score(session_id)
            .await?
            .filter(|a| a.execution_id.as_deref() == Some(execution_id))
            .ok_or_else(|| {
                ExecError::Invalid(format!(
                    "no scoring attempt of session {session_id} is running execution {execution_id}"
                ))
            })?;
        Ok(Judgement {
            session_id: session_id.to_string(),
            attempt_id: attempt.id,
            stage_id: stage_id(session_id, stage_index),
            stage_index,
            execution_id: execution_id.to_string(),
        })
    }

    /// The records of a running attempt, from its stored execution: how a
    /// process that starts again finds the attempts it left running.
    pub async fn of_attempt(store: &Store, attempt: &SessionScore) -> Result<Judgement> {
        let execution_id = attempt.execution_id.as_deref().ok_or_else(|| {
            ExecError::Invalid(format!("scoring attempt {} has no execution", attempt.id))
        })?;
        let execution = store.get_agent_execution(execution_id).await?;
        let stage = store.get_stage(&execution.stage_id).await?;
        Ok(Judgement {
            session_id: attempt.session_id.clone(),
            attempt_id: attempt.id.clone(),
            stage_id: stage.id,
            stage_index: u32::try_from(stage.stage_index).unwrap_or_default(),
            execution_id: execution.id,
        })
    }

    fn stage_ref(&self) -> PublishedStage<'_> {
        PublishedStage {
            id: &self.stage_id,
            name: SCORING_STAGE_NAME,
            index: i64::from(self.stage_index),
        }
    }

    fn stage_row(&self) -> NewStage {
        NewStage {
            id: Some(self.stage_id.clone()),
            session_id: self.session_id.clone(),
            stage_name: SCORING_STAGE_NAME.to_string(),
            kind: StageKind::Scoring,
            stage_index: i64::from(self.stage_index),
            expected_agent_count: 1,
            parallel_type: None,
            success_policy: None,
            chat_id: None,
            chat_user_message_id: None,
        }
    }

    fn execution_row(&self, agent: &ResolvedAgentConfig) -> NewAgentExecution {
        NewAgentExecution {
            id: Some(self.execution_id.clone()),
            stage_id: self.stage_id.clone(),
            session_id: self.session_id.clone(),
            agent_name: agent.display_name.clone(),
            agent_index: 1,
            kind: ExecutionKind::Scoring,
            iteration_strategy: agent.iteration_strategy,
            llm_provider: Some(agent.llm_provider.name.clone()),
        }
    }

    /// Starts the judge: its stage is active (published); returns what it
    /// reads, the whole investigation.
    pub async fn begin(
        &self,
        store: &Store,
        publisher: &Arc<dyn EventPublisher>,
    ) -> Result<AgentInput> {
        crate::records::stage_status(
            store,
            publisher.as_ref(),
            &self.session_id,
            self.stage_ref(),
            ExecutionStatus::Active,
            None,
        )
        .await;
        Ok(AgentInput::Scoring(ScoringContext {
            investigation: judged_investigation(store, &self.session_id).await?,
        }))
    }

    /// Reads the judge's conclusion into the attempt and ends the stage
    /// with the execution's outcome, both published (the caller records
    /// the execution's own status first). An answer without a usable score
    /// fails the attempt, saying why; nothing of it is stored as a score.
    pub async fn end(
        &self,
        store: &Store,
        publisher: &Arc<dyn EventPublisher>,
        result: &ExecutionResult,
    ) -> Result<SessionScore> {
        crate::records::stage_status(
            store,
            publisher.as_ref(),
            &self.session_id,
            self.stage_ref(),
            result.status,
            result.error.as_deref(),
        )
        .await;
        let attempt = self.read_answer(store, result).await?;
        self.publish(publisher, &attempt).await;
        Ok(attempt)
    }

    async fn publish(&self, publisher: &Arc<dyn EventPublisher>, attempt: &SessionScore) {
        publish_session_score(
            publisher.as_ref(),
            &self.session_id,
            &attempt.id,
            attempt.status,
            attempt.score,
            &attempt.failure_tags,
        )
        .await;
    }

    async fn read_answer(&self, store: &Store, result: &ExecutionResult) -> Result<SessionScore> {
        let conclusion = match (&result.status, &result.final_analysis) {
            (ExecutionStatus::Completed, Some(text)) => text,
            _ => {
                let why = result
                    .error
                    .clone()
                    .unwrap_or_else(|| format!("the judge's execution ended {}", result.status));
                return Ok(store.fail_score(&self.attempt_id, &why).await?);
            }
        };
        match tarsy_scoring::parse_assessment(conclusion) {
            Ok(assessment) => {
                let (assessment_text, report_text) = split_report(conclusion);
                let score = ScoreResult {
                    score: assessment.score,
                    outcome: assessment.outcome.word().to_string(),
                    failure_tags: assessment
                        .failure_tags
                        .iter()
                        .map(|t| t.slug().to_string())
                        .collect(),
                    assessment: assessment_text.to_string(),
                    tool_report: report_text.map(str::to_string),
                };
                Ok(store.complete_score(&self.attempt_id, &score).await?)
            }
            Err(e) => Ok(store.fail_score(&self.attempt_id, &e.to_string()).await?),
        }
    }

    /// Closes the records of an attempt that could not run (best effort:
    /// failures are logged).
    pub async fn abandon(&self, store: &Store, publisher: &Arc<dyn EventPublisher>, why: &str) {
        let mut failed = None;
        for result in [
            store
                .update_agent_execution_status(
                    &self.execution_id,
                    ExecutionStatus::Failed,
                    Some(why),
                )
                .await
                .map(|_| ()),
            store
                .update_stage_status(&self.stage_id, ExecutionStatus::Failed, Some(why))
                .await
                .map(|_| ()),
            store
                .fail_score(&self.attempt_id, why)
                .await
                .map(|attempt| {
                    failed = Some(attempt);
                }),
        ] {
            match result {
                Ok(()) | Err(tarsy_store::StoreError::NotFound { .. }) => {}
                Err(e) => {
                    tracing::warn!(attempt = %self.attempt_id, error = %e, "cannot close a scoring attempt's records")
                }
            }
        }
        if let Some(attempt) = failed {
            self.publish(publisher, &attempt).await;
        }
    }
}

/// The judge's conclusion split into its assessment and its tool report
/// (which starts at the `MISSING TOOLS:` heading).
fn split_report(conclusion: &str) -> (&str, Option<&str>) {
    match conclusion.find("MISSING TOOLS") {
        Some(at) => {
            // Back to the start of the heading's line (markdown around it).
            let start = conclusion[..at].rfind('\n').map_or(0, |n| n + 1);
            (conclusion[..start].trim(), Some(conclusion[start..].trim()))
        }
        None => (conclusion.trim(), None),
    }
}
