//! A judge scoring a finished session, the same in every mode: the attempt
//! and its records (a stage of kind `scoring` after the session's stages,
//! one execution), what the judge reads, and its answer read back into the
//! attempt. An edge runs the execution between [`Judgement::start`] and
//! [`Judgement::end`] (through [`crate::launch::Launcher`], with
//! [`Judgement::input`]). Scoring runs after the session's own outcome is
//! final and never changes it: everything here is about the attempt.

use tarsy_core::{ExecutionKind, ExecutionStatus, ResolvedAgentConfig, StageKind};
use tarsy_engine::{ExecutionResult, ScoringContext};
use tarsy_store::{NewAgentExecution, NewStage, ScoreResult, SessionScore, Store};

use crate::context::judged_investigation;
use crate::error::{ExecError, Result};
use crate::ids::{execution_id, stage_id};
use crate::launch::AgentInput;

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
    /// `agent`: the attempt (a conflict while another runs), then its stage
    /// and execution. Records that cannot be created fail the attempt.
    pub async fn start(
        store: &Store,
        session_id: &str,
        agent: &ResolvedAgentConfig,
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
            .start_score_attempt(session_id, Some(&execution))
            .await?;
        let judgement = Judgement {
            session_id: session_id.to_string(),
            attempt_id: attempt.id,
            stage_id: stage_id(session_id, stage_index),
            stage_index,
            execution_id: execution,
        };
        let created = async {
            store.create_stage(judgement.stage_row()).await?;
            store
                .create_agent_execution(judgement.execution_row(agent))
                .await
        }
        .await;
        if let Err(e) = created {
            let why = format!("the judge's records could not be created: {e}");
            judgement.abandon(store, &why).await;
            return Err(e.into());
        }
        Ok(judgement)
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

    /// What the judge reads: the whole investigation.
    pub async fn input(&self, store: &Store) -> Result<AgentInput> {
        Ok(AgentInput::Scoring(ScoringContext {
            investigation: judged_investigation(store, &self.session_id).await?,
        }))
    }

    /// Reads the judge's conclusion into the attempt and ends the stage
    /// with the execution's outcome (the caller records the execution's
    /// own status first). An answer without a usable score fails the
    /// attempt, saying why; nothing of it is stored as a score.
    pub async fn end(&self, store: &Store, result: &ExecutionResult) -> Result<SessionScore> {
        let stage_status = result.status;
        if let Err(e) = store
            .update_stage_status(&self.stage_id, stage_status, result.error.as_deref())
            .await
        {
            tracing::warn!(stage_id = %self.stage_id, error = %e, "cannot record the judge's stage end");
        }
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
    pub async fn abandon(&self, store: &Store, why: &str) {
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
            store.fail_score(&self.attempt_id, why).await.map(|_| ()),
        ] {
            match result {
                Ok(()) | Err(tarsy_store::StoreError::NotFound { .. }) => {}
                Err(e) => {
                    tracing::warn!(attempt = %self.attempt_id, error = %e, "cannot close a scoring attempt's records")
                }
            }
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
