//! The local driver end to end, on SQLite and on Postgres: the scripted LLM
//! over real gRPC, the test MCP server over real streamable HTTP, the store,
//! the events, the state machine and the engine.

mod common;

use std::time::Duration;

use serde_json::Value;
use tarsy_api::{CancelOutcome, ChatError, ChatSubmission, ScoreError};
use tarsy_core::{
    ExecutionStatus, ParallelType, ScoreStatus, SessionStatus, TimelineEventStatus,
    TimelineEventType,
};
use tarsy_exec::ids::CHAT_STAGE_NAME;
use tarsy_exec::retention::Retention;
use tarsy_local::LocalApp;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};

use common::*;

const PIPELINE_CHAIN: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: pipeline}
spec:
  alertTypes: [Pipeline]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: parallel
    agents: [{name: alpha}, {name: bravo}]
  - name: replicas
    agent: charlie
    replicas: 2
  - name: final
    agent: delta
"#;

/// Multi-agent stage + synthesis, replica stage + synthesis, a single-agent
/// stage fed by the syntheses, a real tool call, the executive summary, and
/// the events a dashboard would see.
async fn full_pipeline(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::default()
                .then_thinking("Checking the pod with the echo tool.")
                .then_tool_call(
                    "c1",
                    "testmcp__echo",
                    r#"{"text":"alpha evidence: OOMKilled"}"#,
                ),
        )
        .push_route(
            "Alpha",
            ScriptedResponse::text("Alpha found repeated OOM kills."),
        )
        .push_route(
            "Bravo",
            ScriptedResponse::text("Bravo found a memory leak."),
        )
        .push_route(
            "SynthesisAgent",
            ScriptedResponse::text("SYNTH-1: OOM from a leak."),
        )
        .push_route(
            "Charlie-1",
            ScriptedResponse::text("Charlie one: limit too low."),
        )
        .push_route(
            "Charlie-2",
            ScriptedResponse::text("Charlie two: leak in cache."),
        )
        .push_route(
            "SynthesisAgent",
            ScriptedResponse::text("SYNTH-2: leak in cache."),
        )
        .push_route(
            "Delta",
            ScriptedResponse::text("FINAL: fix the cache leak."),
        )
        .push(ScriptedResponse::text("EXEC SUMMARY: cache leak."));
    let peers = Peers::start(script).await;
    let app = start(config(&peers, PIPELINE_CHAIN), &peers, &db_url).await;
    let id = submit(&app, "Pipeline").await;
    let session = finish(&app, &id).await;

    assert_eq!(session.status, SessionStatus::Completed, "{session:?}");
    assert_eq!(
        session.final_analysis.as_deref(),
        Some("FINAL: fix the cache leak.")
    );
    assert_eq!(
        session.executive_summary.as_deref(),
        Some("EXEC SUMMARY: cache leak.")
    );
    assert_eq!(session.executive_summary_error, None);
    assert_eq!(
        peers.script().remaining(),
        0,
        "every scripted answer was used"
    );

    let stages = stages(app.store(), &id).await;
    let names: Vec<&str> = stages.iter().map(|(s, _)| s.stage_name.as_str()).collect();
    assert_eq!(
        names,
        [
            "parallel",
            "parallel - Synthesis",
            "replicas",
            "replicas - Synthesis",
            "final"
        ]
    );
    for (i, (s, execs)) in stages.iter().enumerate() {
        assert_eq!(s.stage_index, i as i64 + 1);
        assert_eq!(s.status, ExecutionStatus::Completed, "{s:?}");
        assert!(execs.iter().all(|e| e.status == ExecutionStatus::Completed));
    }
    let agents =
        |i: usize| -> Vec<String> { stages[i].1.iter().map(|e| e.agent_name.clone()).collect() };
    assert_eq!(agents(0), ["Alpha", "Bravo"]);
    assert_eq!(stages[0].0.parallel_type, Some(ParallelType::MultiAgent));
    assert_eq!(agents(1), ["SynthesisAgent"]);
    assert_eq!(agents(2), ["Charlie-1", "Charlie-2"]);
    assert_eq!(stages[2].0.parallel_type, Some(ParallelType::Replica));
    assert_eq!(agents(4), ["Delta"]);

    // Synthesis saw both investigations; the last stage saw only the
    // syntheses (they replace the parallel results).
    let requests = peers.script().requests();
    let synth = requests
        .iter()
        .find(|r| r.route.as_deref() == Some("SynthesisAgent"))
        .unwrap();
    let synth_text: String = synth
        .request
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert!(synth_text.contains("Alpha found repeated OOM kills."));
    assert!(synth_text.contains("Bravo found a memory leak."));
    assert!(
        synth_text.contains("alpha evidence: OOMKilled"),
        "tool result in the synthesis context"
    );
    let delta = requests
        .iter()
        .find(|r| r.route.as_deref() == Some("Delta"))
        .unwrap();
    let delta_text: String = delta
        .request
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert!(delta_text.contains("SYNTH-1: OOM from a leak."));
    assert!(delta_text.contains("SYNTH-2: leak in cache."));
    assert!(
        !delta_text.contains("Charlie one"),
        "replica results are replaced by their synthesis"
    );

    // The real MCP call went through and was recorded.
    let trace = app.store().session_trace(&id).await.unwrap();
    let mcp: Vec<_> = trace
        .stages
        .iter()
        .flat_map(|s| &s.executions)
        .flat_map(|e| &e.mcp_interactions)
        .filter(|m| m.tool_name == "echo")
        .collect();
    assert_eq!(mcp.len(), 1);
    assert_eq!(
        trace.session_interactions.len(),
        1,
        "the executive summary call"
    );

    let timeline = app.store().session_timeline(&id).await.unwrap();
    let summary: Vec<_> = timeline
        .iter()
        .filter(|e| e.event_type == TimelineEventType::ExecutiveSummary)
        .collect();
    assert_eq!(summary.len(), 1);
    assert_eq!(summary[0].scope.stage_id, None);
    assert_eq!(summary[0].content, "EXEC SUMMARY: cache leak.");
    assert!(
        timeline
            .iter()
            .all(|e| e.status != TimelineEventStatus::Streaming)
    );

    let events = app
        .store()
        .events_since(&format!("session:{id}"), 0, 10_000)
        .await
        .unwrap();
    let kinds: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| {
            let t = e.payload.get("type")?.as_str()?;
            let s = e
                .payload
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("");
            (t == "stage.status" || t == "session.status").then(|| (t.to_string(), s.to_string()))
        })
        .collect();
    let started = kinds
        .iter()
        .filter(|(t, s)| t == "stage.status" && s == "started")
        .count();
    let completed = kinds
        .iter()
        .filter(|(t, s)| t == "stage.status" && s == "completed")
        .count();
    assert_eq!((started, completed), (5, 5), "{kinds:?}");
    assert_eq!(
        kinds.last(),
        Some(&("session.status".to_string(), "completed".to_string()))
    );
    app.shutdown().await;
}

const POLICY_CHAIN: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: policies}
spec:
  alertTypes: [AnyPolicy]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: s1
    successPolicy: any
    agents: [{name: alpha, maxIterations: 1}, {name: bravo}]
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: strict}
spec:
  alertTypes: [AllPolicy]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: s1
    successPolicy: all
    agents: [{name: alpha, maxIterations: 1}, {name: bravo}]
  - name: s2
    agent: delta
"#;

/// Policy any: one failed agent does not fail the stage; the executive
/// summary failing does not fail the session (its error is recorded).
async fn policy_any_and_summary_fail_open(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::error("provider_error", "Alpha's provider is down", false),
        )
        .push_route(
            "Bravo",
            ScriptedResponse::text("Bravo: the node is out of memory."),
        )
        .push_route(
            "SynthesisAgent",
            ScriptedResponse::text("SYN: node memory."),
        )
        .push(ScriptedResponse::error(
            "provider_error",
            "summary model down",
            false,
        ));
    let peers = Peers::start(script).await;
    let app = start(config(&peers, POLICY_CHAIN), &peers, &db_url).await;
    let id = submit(&app, "AnyPolicy").await;
    let session = finish(&app, &id).await;
    assert_eq!(session.status, SessionStatus::Completed, "{session:?}");
    assert_eq!(session.final_analysis.as_deref(), Some("SYN: node memory."));
    assert_eq!(session.executive_summary, None);
    let err = session.executive_summary_error.unwrap();
    assert!(err.contains("summary model down"), "{err}");
    let stages = stages(app.store(), &id).await;
    assert_eq!(stages[0].0.status, ExecutionStatus::Completed);
    assert_eq!(stages[0].1[0].status, ExecutionStatus::Failed);
    assert!(
        stages[0].1[0]
            .error_message
            .as_deref()
            .unwrap()
            .contains("Alpha's provider is down")
    );
    assert_eq!(stages[1].0.stage_name, "s1 - Synthesis");
    app.shutdown().await;
}

/// Policy all: one failed agent fails the stage and the session, and no
/// later stage (nor synthesis) starts.
async fn policy_all_fails_fast(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::error("provider_error", "Alpha's provider is down", false),
        )
        .push_route("Bravo", ScriptedResponse::text("Bravo fine."));
    let peers = Peers::start(script).await;
    let app = start(config(&peers, POLICY_CHAIN), &peers, &db_url).await;
    let id = submit(&app, "AllPolicy").await;
    let session = finish(&app, &id).await;
    assert_eq!(session.status, SessionStatus::Failed);
    let error = session.error_message.unwrap();
    assert!(error.contains("s1") && error.contains("Alpha"), "{error}");
    assert_eq!(session.executive_summary, None);
    let stages = stages(app.store(), &id).await;
    assert_eq!(stages.len(), 1, "fail-fast: nothing after the failed stage");
    assert_eq!(stages[0].0.status, ExecutionStatus::Failed);
    assert_eq!(
        peers.script().request_count(),
        2,
        "no synthesis, no summary, no s2"
    );
    app.shutdown().await;
}

const SIMPLE_CHAIN: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: simple}
spec:
  alertTypes: [Simple]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: only
    agent: alpha
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: quick}
spec:
  alertTypes: [Quick]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  sessionTimeout: 2s
  stages:
  - name: only
    agent: alpha
"#;

/// Cancel while the model is answering: executions stop, the stage and the
/// session end cancelled, the LLM call is abandoned.
async fn cancellation(db_url: String) {
    let script = ScriptedLlm::new();
    script.push_route("Alpha", ScriptedResponse::hang());
    let peers = Peers::start(script).await;
    let app = start(config(&peers, SIMPLE_CHAIN), &peers, &db_url).await;
    let id = submit(&app, "Simple").await;
    wait_active_execution(app.store(), &id).await;
    eventually("the LLM call", || async {
        peers.script().request_count() == 1
    })
    .await;
    let outcome = app.control().cancel(&id).await.unwrap();
    assert!(matches!(
        outcome,
        CancelOutcome::Session {
            status: SessionStatus::Cancelling
        }
    ));
    let session = finish(&app, &id).await;
    assert_eq!(session.status, SessionStatus::Cancelled);
    let stages = stages(app.store(), &id).await;
    assert_eq!(stages[0].0.status, ExecutionStatus::Cancelled);
    assert_eq!(stages[0].1[0].status, ExecutionStatus::Cancelled);
    assert!(
        peers
            .script()
            .wait_for_cancellations(1, Duration::from_secs(10))
            .await
    );
    // Nothing left to cancel on a terminal session without a chat.
    assert!(app.control().cancel(&id).await.is_err());
    app.shutdown().await;
}

/// The session timeout ends a hanging investigation as timed out (not
/// cancelled).
async fn session_timeout(db_url: String) {
    let script = ScriptedLlm::new();
    script.push_route("Alpha", ScriptedResponse::hang());
    let peers = Peers::start(script).await;
    let app = start(config(&peers, SIMPLE_CHAIN), &peers, &db_url).await;
    let id = submit(&app, "Quick").await;
    let session = finish(&app, &id).await;
    assert_eq!(session.status, SessionStatus::TimedOut, "{session:?}");
    let stages = stages(app.store(), &id).await;
    assert_eq!(stages[0].0.status, ExecutionStatus::TimedOut);
    assert_eq!(stages[0].1[0].status, ExecutionStatus::TimedOut);
    app.shutdown().await;
}

/// The retention sweep runs beside the sessions (`tarsy serve` turns it
/// on): a finished session leaves the list once its retention passed, and
/// stays readable by id.
async fn retention_sweeps_run(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route("Alpha", ScriptedResponse::text("Done."))
        .push(ScriptedResponse::text("Summary."));
    let peers = Peers::start(script).await;
    let mut opts = options(config(&peers, SIMPLE_CHAIN), &peers, &db_url);
    let retention = Retention {
        hide_after: Some(Duration::from_secs(1)),
        purge_after: None,
        event_ttl: None,
    };
    opts.retention = Some((retention, Duration::from_secs(1)));
    let app = LocalApp::start(opts).await.unwrap();
    let id = submit(&app, "Simple").await;
    assert_eq!(finish(&app, &id).await.status, SessionStatus::Completed);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let page = app
            .store()
            .list_sessions(&tarsy_store::SessionFilter::default())
            .await
            .unwrap();
        if page.sessions.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the finished session is still listed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let kept = app.store().get_session(&id).await.unwrap();
    assert!(kept.deleted_at.is_some());
    app.shutdown().await;
}

/// With a limit of one, sessions run one at a time, in creation order.
async fn concurrency_limit(db_url: String) {
    let script = ScriptedLlm::new();
    for n in 1..=3 {
        script.push_route(
            "Alpha",
            ScriptedResponse::text(format!("analysis {n}"))
                .with_chunk_delay(Duration::from_millis(150)),
        );
    }
    script.set_default(Some(ScriptedResponse::text("summary")));
    let peers = Peers::start(script).await;
    let mut options = options(config(&peers, SIMPLE_CHAIN), &peers, &db_url);
    options.max_concurrent_sessions = Some(1);
    let app = tarsy_local::LocalApp::start(options).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(submit(&app, "Simple").await);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Never more than one in progress while they run.
    let store = app.store().clone();
    let watch_ids = ids.clone();
    let watcher = tokio::spawn(async move {
        let mut max = 0;
        loop {
            let mut running = 0;
            let mut done = 0;
            for id in &watch_ids {
                let s = store.get_session(id).await.unwrap();
                if s.status == SessionStatus::InProgress {
                    running += 1;
                }
                if s.status.is_terminal() {
                    done += 1;
                }
            }
            max = max.max(running);
            if done == watch_ids.len() {
                return max;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let mut sessions = Vec::new();
    for id in &ids {
        sessions.push(finish(&app, id).await);
    }
    assert_eq!(watcher.await.unwrap(), 1);
    for (n, s) in sessions.iter().enumerate() {
        assert_eq!(s.status, SessionStatus::Completed);
        assert_eq!(
            s.final_analysis.as_deref(),
            Some(format!("analysis {}", n + 1).as_str())
        );
    }
    for pair in sessions.windows(2) {
        assert!(pair[0].started_at < pair[1].started_at, "creation order");
        assert!(pair[0].completed_at <= pair[1].started_at, "one at a time");
    }
    app.shutdown().await;
}

/// Two chat turns: each answer sees the whole timeline, the second one the
/// first question and answer too; a question while one is being answered is
/// refused as busy; cancel stops the running answer.
async fn chat_two_turns_and_busy(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::text("Investigation: OOM in web-1."),
        )
        .push(ScriptedResponse::text("Summary."))
        .push_route(
            "ChatAgent",
            ScriptedResponse::text("Answer one: raise the limit."),
        )
        .push_route("ChatAgent", ScriptedResponse::text("Answer two: 512Mi."))
        .push_route("ChatAgent", ScriptedResponse::hang());
    let peers = Peers::start(script).await;
    let app = start(config(&peers, SIMPLE_CHAIN), &peers, &db_url).await;
    let id = submit(&app, "Simple").await;
    assert_eq!(finish(&app, &id).await.status, SessionStatus::Completed);
    let control = app.control();
    let ask = |q: &str| ChatSubmission {
        session_id: id.clone(),
        content: q.into(),
        author: "alice".into(),
    };

    let first = control
        .submit_chat_message(ask("What should I do?"))
        .await
        .unwrap();
    assert!(first.chat_created);
    wait_stage(app.store(), &first.stage_id, ExecutionStatus::Completed).await;
    let second = control
        .submit_chat_message(ask("How much memory?"))
        .await
        .unwrap();
    assert!(!second.chat_created);
    assert_eq!(second.chat_id, first.chat_id);
    wait_stage(app.store(), &second.stage_id, ExecutionStatus::Completed).await;

    let chat_requests: Vec<_> = peers
        .script()
        .requests()
        .into_iter()
        .filter(|r| r.route.as_deref() == Some("ChatAgent"))
        .collect();
    let text = |i: usize| -> String {
        chat_requests[i]
            .request
            .messages
            .iter()
            .map(|m| m.content.clone())
            .collect()
    };
    assert!(text(0).contains("Investigation: OOM in web-1."));
    assert!(text(0).contains("What should I do?"));
    assert!(
        text(1).contains("Answer one: raise the limit."),
        "second turn sees the first answer"
    );
    assert!(text(1).contains("How much memory?"));

    let timeline = app.store().session_timeline(&id).await.unwrap();
    let questions: Vec<&str> = timeline
        .iter()
        .filter(|e| e.event_type == TimelineEventType::UserQuestion)
        .map(|e| e.content.as_str())
        .collect();
    assert_eq!(questions, ["What should I do?", "How much memory?"]);
    let chat_stages: Vec<_> = app
        .store()
        .list_stages(&id)
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.chat_id.is_some())
        .collect();
    assert_eq!(chat_stages.len(), 2);
    assert!(chat_stages.iter().all(|s| s.stage_name == CHAT_STAGE_NAME));

    // A third question hangs; a fourth is refused while it runs.
    let third = control
        .submit_chat_message(ask("And the node?"))
        .await
        .unwrap();
    wait_stage(app.store(), &third.stage_id, ExecutionStatus::Active).await;
    let busy = control
        .submit_chat_message(ask("Hello?"))
        .await
        .unwrap_err();
    assert!(matches!(busy, ChatError::Busy { .. }), "{busy:?}");
    let messages = app
        .store()
        .list_chat_user_messages(&first.chat_id)
        .await
        .unwrap();
    assert_eq!(
        messages.len(),
        3,
        "the refused question left no message behind"
    );

    match control.cancel(&id).await.unwrap() {
        CancelOutcome::Chat { stage_id, .. } => assert_eq!(stage_id, third.stage_id),
        other => panic!("expected a chat cancel, got {other:?}"),
    }
    wait_stage(app.store(), &third.stage_id, ExecutionStatus::Cancelled).await;
    assert_eq!(
        app.store().get_session(&id).await.unwrap().status,
        SessionStatus::Completed
    );
    app.shutdown().await;
}

const SCORED_CHAIN: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: scored}
spec:
  alertTypes: [Scored]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  scoring: {enabled: true}
  stages:
  - name: only
    agent: alpha
"#;

const ASSESSMENT: &str = "## Outcome\nRight: web-1 was OOMKilled.\n\nVERDICT: correct\n\
                          FAILURE TAGS: incomplete-evidence\nSCORE: 77";
const TOOL_REPORT: &str = "MISSING TOOLS:\n- node memory history: was the node short?";

/// A completed session of a chain with scoring on is judged after it ends
/// (its status untouched), a re-score is a new attempt, an answer without
/// a score fails its attempt visibly and keeps the earlier score, and one
/// attempt runs at a time; a judge at work leaves no open record behind.
async fn scoring_after_completion_and_on_request(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::text("Investigation: OOM in web-1."),
        )
        .push(ScriptedResponse::text("Summary."))
        .push_route("ScoringAgent", ScriptedResponse::text(ASSESSMENT))
        .push_route("ScoringAgent", ScriptedResponse::text(TOOL_REPORT))
        .push_route("ScoringAgent", ScriptedResponse::text("Looks fine to me."))
        .push_route("ScoringAgent", ScriptedResponse::text(TOOL_REPORT))
        .push_route(
            "ScoringAgent",
            ScriptedResponse::text(ASSESSMENT).with_chunk_delay(Duration::from_millis(1500)),
        )
        .push_route("ScoringAgent", ScriptedResponse::text(TOOL_REPORT));
    let peers = Peers::start(script).await;
    let app = start(config(&peers, SCORED_CHAIN), &peers, &db_url).await;
    let store = app.store().clone();
    let id = submit(&app, "Scored").await;
    assert_eq!(finish(&app, &id).await.status, SessionStatus::Completed);
    let badge = |status| {
        let (store, id) = (store.clone(), id.clone());
        async move {
            store
                .get_session(&id)
                .await
                .unwrap()
                .score
                .is_some_and(|s| s.status == status)
        }
    };
    eventually("the first score", || badge(ScoreStatus::Completed)).await;
    let first = store.latest_score(&id).await.unwrap().unwrap();
    assert_eq!(
        (first.score, first.failure_tags.clone()),
        (Some(77), vec!["incomplete-evidence".to_string()])
    );
    assert_eq!(first.tool_report.as_deref(), Some(TOOL_REPORT));
    let session = store.get_session(&id).await.unwrap();
    assert_eq!(session.status, SessionStatus::Completed);
    let names: Vec<String> = stages(&store, &id)
        .await
        .into_iter()
        .map(|(s, e)| format!("{}:{}:{}", s.stage_name, s.status, e[0].agent_name))
        .collect();
    assert_eq!(
        names,
        ["only:completed:Alpha", "Scoring:completed:ScoringAgent"]
    );
    // The judge read the investigation.
    let judged = peers
        .script()
        .requests()
        .into_iter()
        .find(|r| r.route.as_deref() == Some("ScoringAgent"))
        .unwrap();
    let read: String = judged
        .request
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert!(read.contains("Investigation: OOM in web-1."), "{read}");
    // Its two calls are in the session's trace, with their token usage.
    let trace = store.session_trace(&id).await.unwrap();
    let judge_calls = &trace
        .stages
        .iter()
        .find(|s| s.stage_name == "Scoring")
        .unwrap()
        .executions[0]
        .llm_interactions;
    assert_eq!(judge_calls.len(), 2);
    assert!(
        judge_calls
            .iter()
            .all(|c| c.interaction_type == tarsy_core::LlmInteractionType::Scoring),
        "{judge_calls:?}"
    );

    // A re-score whose answer has no score: a failed attempt that says why;
    // the session keeps its score.
    let control = app.control();
    control.rescore(&id).await.unwrap();
    eventually("the failed attempt", || badge(ScoreStatus::Failed)).await;
    let attempts = store.session_scores(&id).await.unwrap();
    assert_eq!(attempts[0].attempt, 2);
    assert_eq!(
        attempts[0].error.as_deref(),
        Some("the judge gave no score (expected a line `SCORE: <0-100>`)")
    );
    assert_eq!(
        store.get_session(&id).await.unwrap().score.unwrap().score,
        Some(77)
    );

    // One attempt at a time; a judge at work is not an open record.
    control.rescore(&id).await.unwrap();
    let busy = control.rescore(&id).await.unwrap_err();
    assert!(matches!(busy, ScoreError::Busy { .. }), "{busy:?}");
    assert_eq!(store.open_records_in_terminal_sessions().await.unwrap(), []);
    eventually("the third attempt", || badge(ScoreStatus::Completed)).await;
    assert_eq!(store.session_scores(&id).await.unwrap().len(), 3);
    assert_eq!(store.open_records_in_terminal_sessions().await.unwrap(), []);

    app.shutdown().await;
}

async fn wait_stage(store: &tarsy_store::Store, stage_id: &str, status: ExecutionStatus) {
    eventually(&format!("stage {stage_id} {status}"), || async {
        store
            .get_stage(stage_id)
            .await
            .map(|s| s.status == status)
            .unwrap_or(false)
    })
    .await;
}

on_both_backends!(
    scoring_after_completion_and_on_request,
    full_pipeline,
    policy_any_and_summary_fail_open,
    policy_all_fails_fast,
    cancellation,
    session_timeout,
    concurrency_limit,
    chat_two_turns_and_busy,
    retention_sweeps_run,
);
