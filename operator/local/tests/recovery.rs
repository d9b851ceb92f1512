//! Restart recovery on SQLite and Postgres: sessions left in progress by a
//! process that is gone are resumed from the store by the level-triggered
//! machine, their interrupted executions continued from their stored
//! conversations — never stuck, never started over.

mod common;

use serde_json::json;
use tarsy_core::{
    ExecutionKind, ExecutionStatus, IterationStrategy, MessageRole, NewMessage, NewTimelineEvent,
    RecordScope, ScoreStatus, SessionStatus, TimelineEventStatus, TimelineEventType,
};
use tarsy_exec::scoring::Judgement;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};
use tarsy_store::{NewAgentExecution, NewSession, NewStage, Store};

use common::*;

const TWO_STAGES: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: two}
spec:
  alertTypes: [Two]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: first
    agent: alpha
  - name: second
    agent: delta
"#;

/// A session claimed by `pod` (in progress) with stage 1 and its single
/// execution in `status`; returns (stage id, execution id).
async fn crashed_session(store: &Store, id: &str, status: ExecutionStatus) -> (String, String) {
    store
        .create_session(NewSession {
            id: id.into(),
            alert_data: "pod: web-1".into(),
            alert_type: "Two".into(),
            chain_id: "two".into(),
            author: Some("tester".into()),
            runbook_url: None,
            mcp_selection: None,
            memory_scope: None,
        })
        .await
        .unwrap();
    let claimed = store
        .claim_next_pending_session("test-pod")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.id, id);
    let stage = store
        .create_stage(NewStage {
            id: Some(format!("{id}-s1")),
            session_id: id.into(),
            stage_name: "first".into(),
            kind: tarsy_core::StageKind::Investigation,
            stage_index: 1,
            expected_agent_count: 1,
            parallel_type: None,
            success_policy: None,
            chat_id: None,
            chat_user_message_id: None,
        })
        .await
        .unwrap();
    let exec = store
        .create_agent_execution(NewAgentExecution {
            id: Some(format!("{id}-s1-e1")),
            stage_id: stage.id.clone(),
            session_id: id.into(),
            agent_name: "Alpha".into(),
            agent_index: 1,
            kind: ExecutionKind::Investigation,
            iteration_strategy: IterationStrategy::NativeThinking,
            llm_provider: Some("test-llm".into()),
        })
        .await
        .unwrap();
    store
        .update_stage_status(&stage.id, ExecutionStatus::Active, None)
        .await
        .unwrap();
    store
        .update_agent_execution_status(&exec.id, status, None)
        .await
        .unwrap();
    let scope = RecordScope {
        session_id: id.into(),
        stage_id: Some(stage.id.clone()),
        execution_id: Some(exec.id.clone()),
    };
    if status == ExecutionStatus::Completed {
        store
            .create_timeline_event(NewTimelineEvent {
                scope,
                sequence_number: 1,
                event_type: TimelineEventType::FinalAnalysis,
                status: TimelineEventStatus::Completed,
                content: "STAGE ONE RESULT: the cache leaks".into(),
                metadata: json!({}),
            })
            .await
            .unwrap();
        store
            .update_stage_status(&stage.id, ExecutionStatus::Completed, None)
            .await
            .unwrap();
    } else {
        store
            .create_timeline_event(NewTimelineEvent {
                scope,
                sequence_number: 1,
                event_type: TimelineEventType::LlmResponse,
                status: TimelineEventStatus::Streaming,
                content: "half an answ".into(),
                metadata: json!({}),
            })
            .await
            .unwrap();
    }
    (stage.id, exec.id)
}

/// The process died between stages: the next start resumes with stage 2,
/// which gets stage 1's analysis as context, and completes the session.
async fn resumes_between_stages(db_url: String) {
    let store = Store::connect(&db_url).await.unwrap();
    crashed_session(&store, "resume-1", ExecutionStatus::Completed).await;
    store.close().await;

    let script = ScriptedLlm::new();
    script
        .push_route("Delta", ScriptedResponse::text("FINAL after restart."))
        .push(ScriptedResponse::text("Summary after restart."));
    let peers = Peers::start(script).await;
    let app = start(config(&peers, TWO_STAGES), &peers, &db_url).await;
    let session = finish(&app, "resume-1").await;
    assert_eq!(session.status, SessionStatus::Completed, "{session:?}");
    assert_eq!(
        session.final_analysis.as_deref(),
        Some("FINAL after restart.")
    );
    assert_eq!(
        session.executive_summary.as_deref(),
        Some("Summary after restart.")
    );
    let stages = stages(app.store(), "resume-1").await;
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[1].0.stage_name, "second");
    let requests = peers.script().requests();
    assert_eq!(requests.len(), 2, "stage 1 is not run again");
    let delta: String = requests[0]
        .request
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert!(delta.contains("STAGE ONE RESULT: the cache leaks"));
    app.shutdown().await;
}

/// The process died in the middle of an execution: the next start runs it
/// again from its stored conversation (not from scratch), closes the answer
/// that was cut off as interrupted, and the session completes — nothing
/// numbered twice.
async fn resumes_interrupted_execution(db_url: String) {
    let store = Store::connect(&db_url).await.unwrap();
    let (stage_id, exec_id) = crashed_session(&store, "crash-1", ExecutionStatus::Active).await;
    let scope = RecordScope {
        session_id: "crash-1".into(),
        stage_id: Some(stage_id),
        execution_id: Some(exec_id.clone()),
    };
    for (seq, role, content) in [
        (1, MessageRole::System, "You are Alpha (stored)."),
        (2, MessageRole::User, "Investigate web-1 (stored)."),
    ] {
        store
            .create_message(NewMessage {
                scope: scope.clone(),
                sequence_number: seq,
                role,
                content: content.into(),
                tool_calls: Vec::new(),
                tool_call_id: None,
                tool_name: None,
            })
            .await
            .unwrap();
    }
    store.close().await;

    let script = ScriptedLlm::new();
    script
        .push_route("Alpha", ScriptedResponse::text("Alpha after restart."))
        .push_route("Delta", ScriptedResponse::text("Delta after restart."))
        .push(ScriptedResponse::text("Summary."));
    let peers = Peers::start(script).await;
    let app = start(config(&peers, TWO_STAGES), &peers, &db_url).await;
    let session = finish(&app, "crash-1").await;
    assert_eq!(session.status, SessionStatus::Completed, "{session:?}");
    assert_eq!(
        session.final_analysis.as_deref(),
        Some("Delta after restart.")
    );
    let exec = app.store().get_agent_execution(&exec_id).await.unwrap();
    assert_eq!(exec.status, ExecutionStatus::Completed);
    let events = app.store().execution_timeline(&exec_id).await.unwrap();
    assert_eq!(events[0].status, TimelineEventStatus::Failed);
    assert_eq!(events[0].content, "half an answ");
    assert_eq!(events[0].metadata["interrupted"], true);
    let mut numbers: Vec<i64> = events.iter().map(|e| e.sequence_number).collect();
    numbers.dedup();
    assert_eq!(numbers.len(), events.len(), "{events:#?}");
    // Alpha continued its stored conversation.
    let alpha = &peers.script().requests()[0].request;
    let sent: Vec<&str> = alpha.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(
        sent,
        ["You are Alpha (stored).", "Investigate web-1 (stored)."]
    );
    app.shutdown().await;
}

/// A graceful shutdown lets running executions go on for its grace, then
/// interrupts them without recording them as failed; the next start
/// resumes the interrupted execution and the session completes; a pending
/// session waits for the next start and then runs.
async fn shutdown_then_restart(db_url: String) {
    let script = ScriptedLlm::new();
    script.push_route("Alpha", ScriptedResponse::hang());
    let peers = Peers::start(script).await;
    let mut first = options(config(&peers, TWO_STAGES), &peers, &db_url);
    first.max_concurrent_sessions = Some(1);
    first.settings.shutdown_grace = std::time::Duration::from_millis(300);
    let app = tarsy_local::LocalApp::start(first).await.unwrap();
    let running = submit(&app, "Two").await;
    wait_active_execution(app.store(), &running).await;
    let waiting = submit(&app, "Two").await;
    app.shutdown().await;

    let store = Store::connect(&db_url).await.unwrap();
    assert_eq!(
        store.get_session(&running).await.unwrap().status,
        SessionStatus::InProgress
    );
    assert_eq!(
        store.get_session(&waiting).await.unwrap().status,
        SessionStatus::Pending
    );
    let execs = store.list_session_executions(&running).await.unwrap();
    assert_eq!(execs[0].status, ExecutionStatus::Active, "left to resume");
    store.close().await;

    let script = ScriptedLlm::new();
    script
        .push_route("Alpha", ScriptedResponse::text("Alpha after restart."))
        .push_route("Alpha", ScriptedResponse::text("Alpha for the next one."))
        .push_route("Delta", ScriptedResponse::text("Delta after restart."))
        .push_route("Delta", ScriptedResponse::text("Delta for the next one."))
        .push(ScriptedResponse::text("Summary."))
        .push(ScriptedResponse::text("Summary."));
    let peers = Peers::start(script).await;
    let app = start(config(&peers, TWO_STAGES), &peers, &db_url).await;
    let resumed = finish(&app, &running).await;
    assert_eq!(resumed.status, SessionStatus::Completed, "{resumed:?}");
    let waited = finish(&app, &waiting).await;
    assert_eq!(waited.status, SessionStatus::Completed, "{waited:?}");
    app.shutdown().await;
}

/// Shutdown waits for an execution that finishes within the grace.
async fn shutdown_lets_executions_finish_within_the_grace(db_url: String) {
    let script = ScriptedLlm::new();
    script.push_route(
        "Alpha",
        ScriptedResponse::text("Alpha, finished during the grace.")
            .with_chunk_delay(std::time::Duration::from_millis(400)),
    );
    let peers = Peers::start(script).await;
    let mut opts = options(config(&peers, TWO_STAGES), &peers, &db_url);
    opts.settings.shutdown_grace = std::time::Duration::from_secs(20);
    let app = tarsy_local::LocalApp::start(opts).await.unwrap();
    let id = submit(&app, "Two").await;
    wait_active_execution(app.store(), &id).await;
    app.shutdown().await;

    let store = Store::connect(&db_url).await.unwrap();
    let execs = store.list_session_executions(&id).await.unwrap();
    assert_eq!(execs.len(), 1, "no new stage starts while shutting down");
    assert_eq!(execs[0].status, ExecutionStatus::Completed);
    assert_eq!(
        store.get_session(&id).await.unwrap().status,
        SessionStatus::InProgress
    );
    store.close().await;
}

/// A chat answer whose process was killed (nothing recorded its end) does
/// not leave the chat busy: the next start closes it as failed (its
/// execution too) before anyone asks again, and the next question is
/// answered.
async fn chat_answer_killed_mid_answer(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route("Alpha", ScriptedResponse::text("Alpha done."))
        .push_route("Delta", ScriptedResponse::text("Delta done."))
        .push(ScriptedResponse::text("Summary."))
        .push_route("ChatAgent", ScriptedResponse::hang());
    let peers = Peers::start(script).await;
    let app = start(config(&peers, TWO_STAGES), &peers, &db_url).await;
    let id = submit(&app, "Two").await;
    finish(&app, &id).await;
    let ask = |content: &str| tarsy_core::control::ChatSubmission {
        session_id: id.clone(),
        content: content.into(),
        author: "tester".into(),
    };
    let first = app
        .control()
        .submit_chat_message(ask("Why?"))
        .await
        .unwrap();
    eventually("the chat answer running", || async {
        app.store()
            .get_stage(&first.stage_id)
            .await
            .is_ok_and(|s| s.status == ExecutionStatus::Active)
    })
    .await;
    app.shutdown().await;
    // As if killed: the answer is still recorded as running.
    let store = Store::connect(&db_url).await.unwrap();
    store
        .update_stage_status(&first.stage_id, ExecutionStatus::Active, None)
        .await
        .unwrap();
    for exec in store.list_agent_executions(&first.stage_id).await.unwrap() {
        store
            .update_agent_execution_status(&exec.id, ExecutionStatus::Active, None)
            .await
            .unwrap();
    }
    store.close().await;

    let script = ScriptedLlm::new();
    script.push_route("ChatAgent", ScriptedResponse::text("Because of the cache."));
    let peers = Peers::start(script).await;
    let app = start(config(&peers, TWO_STAGES), &peers, &db_url).await;
    let stage = app.store().get_stage(&first.stage_id).await.unwrap();
    assert_eq!(stage.status, ExecutionStatus::Failed, "closed at start");
    for exec in app.store().list_agent_executions(&stage.id).await.unwrap() {
        assert!(exec.status.is_terminal(), "{exec:?}");
    }
    let second = app
        .control()
        .submit_chat_message(ask("And now?"))
        .await
        .unwrap();
    eventually("the second answer", || async {
        app.store()
            .get_stage(&second.stage_id)
            .await
            .is_ok_and(|s| s.status == ExecutionStatus::Completed)
    })
    .await;
    app.shutdown().await;
}

/// A judge whose process died (its attempt still in progress, its stage
/// and execution open) does not block the session's scoring forever: the
/// next start of the same process closes it, failed with the reason, and
/// the session can be scored again.
async fn judge_killed_mid_scoring(db_url: String) {
    let scored = format!("{TWO_STAGES}  scoring: {{enabled: true}}\n");
    let script = ScriptedLlm::new();
    script
        .push_route("Alpha", ScriptedResponse::text("Alpha done."))
        .push_route("Delta", ScriptedResponse::text("Delta done."))
        .push(ScriptedResponse::text("Summary."))
        .push_route(
            "ScoringAgent",
            ScriptedResponse::error("internal", "judge down", false),
        );
    let peers = Peers::start(script).await;
    let first_config = config(&peers, &scored);
    let judge = first_config
        .resolve_scoring(&first_config.chain("two").unwrap().spec)
        .unwrap();
    let app = start(first_config, &peers, &db_url).await;
    let id = submit(&app, "Two").await;
    finish(&app, &id).await;
    eventually("the first attempt over", || async {
        app.store()
            .session_scores(&id)
            .await
            .is_ok_and(|a| a.first().is_some_and(|a| a.status == ScoreStatus::Failed))
    })
    .await;
    app.shutdown().await;
    // As if this process had started a judge and been killed.
    let store = Store::connect(&db_url).await.unwrap();
    let publisher: std::sync::Arc<dyn tarsy_core::EventPublisher> =
        std::sync::Arc::new(tarsy_engine::memory::MemoryRecorder::new());
    let killed = Judgement::start(&store, &publisher, &id, &judge, Some("test-pod"))
        .await
        .unwrap();
    store.close().await;

    let script = ScriptedLlm::new();
    script
        .push_route(
            "ScoringAgent",
            ScriptedResponse::text("VERDICT: correct\nSCORE: 90"),
        )
        .push_route(
            "ScoringAgent",
            ScriptedResponse::text("MISSING TOOLS:\n- none"),
        );
    let peers = Peers::start(script).await;
    let app = start(config(&peers, &scored), &peers, &db_url).await;
    let attempt = app.store().score_attempt(&killed.attempt_id).await.unwrap();
    assert_eq!(attempt.status, ScoreStatus::Failed, "closed at start");
    assert!(
        attempt
            .error
            .as_deref()
            .unwrap_or_default()
            .starts_with("interrupted"),
        "{attempt:?}"
    );
    let stage = app.store().get_stage(&killed.stage_id).await.unwrap();
    assert_eq!(stage.status, ExecutionStatus::Failed);
    assert_eq!(
        app.store()
            .open_records_in_terminal_sessions()
            .await
            .unwrap(),
        []
    );
    app.control().rescore(&id).await.unwrap();
    eventually("the new score", || async {
        app.store()
            .latest_score(&id)
            .await
            .is_ok_and(|s| s.is_some_and(|s| s.score == Some(90)))
    })
    .await;
    app.shutdown().await;
}

on_both_backends!(
    judge_killed_mid_scoring,
    resumes_between_stages,
    resumes_interrupted_execution,
    shutdown_then_restart,
    shutdown_lets_executions_finish_within_the_grace,
    chat_answer_killed_mid_answer,
);
