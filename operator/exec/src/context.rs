//! What an agent learns about the rest of its session, built from the store
//! the same way in every mode:
//!
//! * [`previous_stages`] — the results of the completed stages before a
//!   stage (the chain state machine's rule, [`tarsy_chain::stage_results`]);
//! * [`synthesis_input`] — the full timelines of the parallel executions a
//!   synthesis reads;
//! * [`stage_input`] — which of the two a stage's executions get;
//! * [`chat_history`] — a session's history for a follow-up answer: stage
//!   by stage, each agent labelled, syntheses with their stage, the
//!   executive summary and earlier questions and answers, the current
//!   question left to the prompt.

use std::collections::HashMap;

use tarsy_chain::{ExecutionView, SessionView, StageView, stage_results};
use tarsy_core::{ExecutionStatus, SessionStatus, StageKind, TimelineEvent, TimelineEventType};
use tarsy_engine::context::{
    AgentInvestigation, ChatExchange, ChatHistory, StageInvestigation, build_stage_context,
    format_chat_history, format_investigation_for_synthesis,
};
use tarsy_store::{AgentExecution, Stage, Store};

use crate::error::{ExecError, Result};
use crate::launch::AgentInput;

/// The conclusion an execution recorded last (its `final_analysis` event).
pub fn final_analysis_of(events: &[TimelineEvent]) -> Option<String> {
    events
        .iter()
        .filter(|e| e.event_type == TimelineEventType::FinalAnalysis)
        .max_by_key(|e| e.sequence_number)
        .map(|e| e.content.clone())
}

/// One execution with its timeline.
struct ExecutionRecord {
    row: AgentExecution,
    events: Vec<TimelineEvent>,
}

impl ExecutionRecord {
    fn investigation(&self) -> AgentInvestigation {
        AgentInvestigation {
            agent_name: self.row.agent_name.clone(),
            agent_index: u32::try_from(self.row.agent_index).unwrap_or(0),
            strategy: self.row.iteration_strategy,
            llm_provider: self.row.llm_provider.clone().unwrap_or_default(),
            status: self.row.status,
            error_message: self.row.error_message.clone(),
            events: self.events.clone(),
        }
    }

    fn final_analysis(&self) -> Option<String> {
        (self.row.status == ExecutionStatus::Completed)
            .then(|| final_analysis_of(&self.events))
            .flatten()
    }
}

/// One stage record with its executions (by index).
struct StageRecord {
    stage: Stage,
    executions: Vec<ExecutionRecord>,
}

impl StageRecord {
    fn index(&self) -> u32 {
        u32::try_from(self.stage.stage_index).unwrap_or(0)
    }
}

/// A session's stage records, executions and timelines, in order: three
/// reads, whatever the session's size.
async fn load(store: &Store, session_id: &str) -> Result<Vec<StageRecord>> {
    let stages = store.list_stages(session_id).await?;
    let executions = store.list_session_executions(session_id).await?;
    let mut events: HashMap<String, Vec<TimelineEvent>> = HashMap::new();
    for e in store.session_timeline(session_id).await? {
        if let Some(id) = e.scope.execution_id.clone() {
            events.entry(id).or_default().push(e);
        }
    }
    for list in events.values_mut() {
        list.sort_by_key(|e| e.sequence_number);
    }
    let mut by_stage: HashMap<String, Vec<ExecutionRecord>> = HashMap::new();
    for row in executions {
        let events = events.remove(&row.id).unwrap_or_default();
        by_stage
            .entry(row.stage_id.clone())
            .or_default()
            .push(ExecutionRecord { row, events });
    }
    let mut records: Vec<StageRecord> = stages
        .into_iter()
        .map(|stage| {
            let mut executions = by_stage.remove(&stage.id).unwrap_or_default();
            executions.sort_by_key(|e| e.row.agent_index);
            StageRecord { stage, executions }
        })
        .collect();
    records.sort_by_key(|r| r.stage.stage_index);
    Ok(records)
}

/// The state machine's view of the investigation stages among `records`.
fn view_of(records: &[&StageRecord]) -> SessionView {
    SessionView {
        status: SessionStatus::InProgress,
        cancel_requested: false,
        deadline_passed: false,
        stages: records
            .iter()
            .map(|r| StageView {
                db_index: r.index(),
                config_index: 0,
                kind: r.stage.kind,
                name: r.stage.stage_name.clone(),
                status: r.stage.status,
                executions: r
                    .executions
                    .iter()
                    .map(|e| ExecutionView {
                        index: u32::try_from(e.row.agent_index).unwrap_or(0),
                        display_name: e.row.agent_name.clone(),
                        status: e.row.status,
                        final_analysis: e.final_analysis(),
                        error: e.row.error_message.clone(),
                        stopping: false,
                    })
                    .collect(),
            })
            .collect(),
        executive_summary: Default::default(),
        spent: None,
    }
}

/// The session's final analysis as its records hold it in full: the last
/// completed stage's result ([`tarsy_chain::final_analysis`]). A cluster
/// status only holds it clipped.
pub async fn session_final_analysis(store: &Store, session_id: &str) -> Result<Option<String>> {
    let records = load(store, session_id).await?;
    let stages: Vec<&StageRecord> = records
        .iter()
        .filter(|r| r.stage.kind != StageKind::Chat)
        .collect();
    Ok(tarsy_chain::final_analysis(&view_of(&stages)))
}

/// The previous-stage context of stage record `before` of `session_id`:
/// the results later stages build on, formatted for the prompt (`None` for
/// the first stage).
pub async fn previous_stages(
    store: &Store,
    session_id: &str,
    before: u32,
) -> Result<Option<String>> {
    // Stage records count from 1, and nothing precedes the first: no reads
    // on the way to the session's first model request.
    if before <= 1 {
        return Ok(None);
    }
    let records = load(store, session_id).await?;
    let earlier: Vec<&StageRecord> = records
        .iter()
        .filter(|r| r.index() < before && r.stage.kind != StageKind::Chat)
        .collect();
    let results = stage_results(&view_of(&earlier));
    Ok(Some(build_stage_context(&results)).filter(|c| !c.is_empty()))
}

/// What the synthesis at stage record `synthesis_index` reads: the
/// investigations of the latest investigation stage before it.
pub async fn synthesis_input(
    store: &Store,
    session_id: &str,
    synthesis_index: u32,
) -> Result<String> {
    let records = load(store, session_id).await?;
    let target = records
        .iter()
        .filter(|r| r.index() < synthesis_index && r.stage.kind == StageKind::Investigation)
        .max_by_key(|r| r.index())
        .ok_or_else(|| {
            ExecError::Invalid(format!(
                "no investigation stage precedes synthesis stage {synthesis_index}"
            ))
        })?;
    let agents: Vec<AgentInvestigation> = target
        .executions
        .iter()
        .map(ExecutionRecord::investigation)
        .collect();
    Ok(format_investigation_for_synthesis(
        &agents,
        &target.stage.stage_name,
    ))
}

/// What the executions of stage record `stage_index` (of kind `kind`) work
/// on: a synthesis reads the investigations before it, an investigation
/// the earlier stages' results. (A chat answer's input is its question and
/// the history: [`crate::chat::Answer::begin`].)
pub async fn stage_input(
    store: &Store,
    session_id: &str,
    kind: StageKind,
    stage_index: u32,
) -> Result<AgentInput> {
    Ok(match kind {
        StageKind::Synthesis => AgentInput::Synthesis {
            investigations: synthesis_input(store, session_id, stage_index).await?,
        },
        StageKind::Investigation | StageKind::Chat => AgentInput::Investigation {
            previous_stages: previous_stages(store, session_id, stage_index).await?,
        },
        StageKind::Scoring | StageKind::Memory => {
            return Err(ExecError::Invalid(format!(
                "a {kind} execution's input is the whole investigation, not a stage's"
            )));
        }
    })
}

/// The history a chat answer (stage `current_stage_id`) works from.
pub async fn chat_history(
    store: &Store,
    session_id: &str,
    current_stage_id: &str,
) -> Result<String> {
    history(store, session_id, Some(current_stage_id)).await
}

/// What a judge reads: the alert, then every stage's timeline (tool calls,
/// arguments and results), syntheses and the executive summary; no chat.
pub async fn judged_investigation(store: &Store, session_id: &str) -> Result<String> {
    let session = store.get_session(session_id).await?;
    let investigation = history(store, session_id, None).await?;
    Ok(format!(
        "Alert type: {}\n\nAlert data:\n{}\n\n{}",
        session.alert_type,
        session.alert_data.trim(),
        investigation.trim()
    ))
}

/// The session's stages formatted for a model: with the earlier chat
/// exchanges when `chat` names the answering stage, without any otherwise.
async fn history(store: &Store, session_id: &str, chat: Option<&str>) -> Result<String> {
    let session = store.get_session(session_id).await?;
    let records = load(store, session_id).await?;
    let mut history = ChatHistory {
        executive_summary: session.executive_summary,
        ..ChatHistory::default()
    };
    for record in &records {
        match record.stage.kind {
            StageKind::Investigation => history.stages.push(StageInvestigation {
                stage_name: record.stage.stage_name.clone(),
                agents: record
                    .executions
                    .iter()
                    .map(ExecutionRecord::investigation)
                    .collect(),
                synthesis_result: None,
            }),
            // A synthesis belongs to the investigation stage just before it.
            StageKind::Synthesis => {
                if let Some(stage) = history.stages.last_mut() {
                    stage.synthesis_result = record
                        .executions
                        .iter()
                        .find_map(ExecutionRecord::final_analysis);
                }
            }
            // A judge's verdict and what was learned from it are not part
            // of what was investigated.
            StageKind::Scoring | StageKind::Memory => {}
            StageKind::Chat if chat.is_none_or(|current| record.stage.id == current) => {}
            StageKind::Chat => {
                let execution = record.executions.first();
                let question = execution.and_then(|e| {
                    e.events
                        .iter()
                        .find(|ev| ev.event_type == TimelineEventType::UserQuestion)
                        .map(|ev| ev.content.clone())
                });
                if let Some(question) = question {
                    history.previous_chats.push(ChatExchange {
                        question,
                        answer: execution.and_then(|e| final_analysis_of(&e.events)),
                    });
                }
            }
        }
    }
    Ok(format_chat_history(&history))
}
