//! Context building from the store: what later stages, a synthesis and a
//! chat answer are told — the one builder both modes use.

use tarsy_chain::{ExecutionStart, StageStart};
use tarsy_core::{
    ExecutionKind, ExecutionStatus, NewTimelineEvent, ParallelType, RecordScope, StageKind,
    TimelineEventStatus, TimelineEventType,
};
use tarsy_exec::chat::Answer;
use tarsy_exec::{context, records};
use tarsy_store::{NewSession, Store};

const SESSION: &str = "s1";

async fn store() -> Store {
    let store = Store::sqlite_in_memory().await.unwrap();
    store
        .create_session(NewSession {
            id: SESSION.into(),
            alert_data: "pod: web-1".into(),
            alert_type: "T".into(),
            chain_id: "c".into(),
            author: None,
            runbook_url: None,
            mcp_selection: None,
            memory_scope: None,
        })
        .await
        .unwrap();
    store
}

/// A finished stage record with one execution per `(agent, status, analysis)`.
async fn stage(
    store: &Store,
    index: u32,
    name: &str,
    kind: StageKind,
    agents: &[(&str, ExecutionStatus, Option<&str>)],
) {
    let start = StageStart {
        db_index: index,
        config_index: 0,
        kind,
        name: name.into(),
        success_policy: None,
        parallel_type: (agents.len() > 1).then_some(ParallelType::MultiAgent),
        executions: agents
            .iter()
            .zip(1u32..)
            .map(|((agent, _, _), i)| ExecutionStart {
                index: i,
                agent_name: agent.to_string(),
                display_name: agent.to_string(),
                kind: match kind {
                    StageKind::Synthesis => ExecutionKind::Synthesis,
                    _ => ExecutionKind::Investigation,
                },
            })
            .collect(),
        previous_stages: Vec::new(),
        synthesis_of: None,
    };
    let row = store
        .create_stage(records::stage_row(SESSION, &start))
        .await
        .unwrap();
    for (e, (_, status, analysis)) in start.executions.iter().zip(agents) {
        let ex = store
            .create_agent_execution(records::execution_row(SESSION, index, e, None))
            .await
            .unwrap();
        if let Some(text) = analysis {
            event(
                store,
                &row.id,
                &ex.id,
                1,
                TimelineEventType::FinalAnalysis,
                text,
            )
            .await;
        }
        store
            .update_agent_execution_status(&ex.id, *status, None)
            .await
            .unwrap();
    }
    let status = if agents
        .iter()
        .any(|(_, s, _)| *s == ExecutionStatus::Completed)
    {
        ExecutionStatus::Completed
    } else {
        ExecutionStatus::Failed
    };
    store
        .update_stage_status(&row.id, status, None)
        .await
        .unwrap();
}

async fn event(
    store: &Store,
    stage_id: &str,
    execution_id: &str,
    seq: i64,
    event_type: TimelineEventType,
    content: &str,
) {
    store
        .create_timeline_event(NewTimelineEvent {
            scope: RecordScope {
                session_id: SESSION.into(),
                stage_id: Some(stage_id.into()),
                execution_id: Some(execution_id.into()),
            },
            sequence_number: seq,
            event_type,
            status: TimelineEventStatus::Completed,
            content: content.into(),
            metadata: serde_json::json!({}),
        })
        .await
        .unwrap();
}

fn chat_config() -> tarsy_core::ResolvedAgentConfig {
    let yaml = r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: p}
spec: {type: google, model: m, apiKeyEnv: K}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: c}
spec:
  alertTypes: [T]
  llmProvider: p
  stages: [{name: one, agent: KubernetesAgent}]
"#;
    let objects = tarsy_config::parse_config("t.yaml", yaml, &|_| None).unwrap();
    let config =
        tarsy_config::build_config(objects, &tarsy_config::DefaultsSpec::default()).unwrap();
    let chain = config.chain("c").unwrap();
    config.resolve_chat(&chain.name, &chain.spec, None).unwrap()
}

/// triage (one agent) → deep (two agents) → deep - Synthesis → a stage
/// whose name merely ends like a synthesis.
async fn session() -> Store {
    let store = store().await;
    let done = ExecutionStatus::Completed;
    stage(
        &store,
        1,
        "triage",
        StageKind::Investigation,
        &[("A", done, Some("triage says OOM"))],
    )
    .await;
    stage(
        &store,
        2,
        "deep",
        StageKind::Investigation,
        &[
            ("B", done, Some("B: limit too low")),
            ("C", ExecutionStatus::Failed, None),
        ],
    )
    .await;
    stage(
        &store,
        3,
        "deep - Synthesis",
        StageKind::Synthesis,
        &[("SynthesisAgent", done, Some("synthesized: raise the limit"))],
    )
    .await;
    stage(
        &store,
        4,
        "cleanup - Synthesis",
        StageKind::Investigation,
        &[("D", done, Some("cleanup done"))],
    )
    .await;
    store
}

#[tokio::test]
async fn later_stages_get_single_agent_and_synthesis_results_only() {
    let store = session().await;
    assert_eq!(
        context::previous_stages(&store, SESSION, 1).await.unwrap(),
        None
    );
    let before_synthesis = context::previous_stages(&store, SESSION, 3)
        .await
        .unwrap()
        .unwrap();
    assert!(before_synthesis.contains("triage says OOM"));
    // A parallel stage is represented by its synthesis, not its agents.
    assert!(!before_synthesis.contains("B: limit too low"));
    let last = context::previous_stages(&store, SESSION, 5)
        .await
        .unwrap()
        .unwrap();
    assert!(last.contains("### Stage 2: deep - Synthesis"), "{last}");
    assert!(last.contains("synthesized: raise the limit"));
    assert!(last.contains("cleanup done"));
}

#[tokio::test]
async fn synthesis_reads_the_investigation_stage_before_it_by_kind() {
    let store = session().await;
    let input = context::synthesis_input(&store, SESSION, 3).await.unwrap();
    assert!(
        input.contains("Parallel investigation \"deep\": 1/2 agents completed"),
        "{input}"
    );
    assert!(input.contains("B: limit too low"));
    assert!(!input.contains("triage says OOM"));
    // A stage named like a synthesis is still an investigation: a synthesis
    // after it reads it.
    let input = context::synthesis_input(&store, SESSION, 5).await.unwrap();
    assert!(input.contains("cleanup done"), "{input}");
    assert!(context::synthesis_input(&store, SESSION, 1).await.is_err());
}

#[tokio::test]
async fn chat_history_pairs_syntheses_and_lists_earlier_questions_once() {
    let store = session().await;
    let chat = store
        .get_or_create_chat(SESSION, Some("me"))
        .await
        .unwrap()
        .record;
    let config = chat_config();
    let mut answers = Vec::new();
    for (index, question, answer) in [
        (5u32, "why OOM?", Some("the limit")),
        (6, "what now?", None),
    ] {
        let message = store
            .create_chat_user_message(&chat.id, question, Some("me"))
            .await
            .unwrap();
        let a = Answer::new(SESSION, &chat.id, index);
        store.create_stage(a.stage_row(&message.id)).await.unwrap();
        store
            .create_agent_execution(a.execution_row(&config))
            .await
            .unwrap();
        event(
            &store,
            &a.stage_id,
            &a.execution_id,
            1,
            TimelineEventType::UserQuestion,
            question,
        )
        .await;
        if let Some(text) = answer {
            event(
                &store,
                &a.stage_id,
                &a.execution_id,
                2,
                TimelineEventType::FinalAnalysis,
                text,
            )
            .await;
        }
        answers.push(a);
    }
    let history = context::chat_history(&store, SESSION, &answers[1].stage_id)
        .await
        .unwrap();
    for part in [
        "## Stage 1: triage",
        "## Stage 2: deep",
        "#### Agent 1: B",
        "### Synthesis result\n\nsynthesized: raise the limit",
        "## Stage 3: cleanup - Synthesis",
        "## Previous chat messages",
        "**Q1:** why OOM?",
        "**A1:** the limit",
    ] {
        assert!(history.contains(part), "{part:?} missing:\n{history}");
    }
    // The current question is the prompt's, not the history's.
    assert!(!history.contains("what now?"), "{history}");
    assert_eq!(history.matches("deep - Synthesis").count(), 0, "{history}");
}
