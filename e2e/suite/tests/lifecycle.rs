//! Session lifecycle controls through the REST and WebSocket API:
//! cancelling an investigation and a chat answer, the session timeout, and
//! the concurrency limit.

use std::time::Duration;

use serde_json::Value;
use tarsy_e2e::harness::{Peers, TestApp, is_terminal_session_event};
use tarsy_e2e::on_both_backends;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};

const CHAINS: &str = r#"
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
  - name: after
    agent: delta
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

const EXEC_SUMMARY: &str = "You write executive summaries";

fn statuses(s: &Value) -> Vec<String> {
    s["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| {
            let execs: Vec<&str> = st["executions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["status"].as_str().unwrap())
                .collect();
            format!(
                "{}={}[{}]",
                st["stage_name"].as_str().unwrap(),
                st["status"].as_str().unwrap(),
                execs.join(",")
            )
        })
        .collect()
}

async fn wait_llm_calls(peers: &Peers, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while peers.script().request_count() < n {
        assert!(tokio::time::Instant::now() < deadline, "no LLM call #{n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Cancelling a running investigation: 200 `cancelled: session`, the model
/// call is abandoned, the session, stage and execution end cancelled, no
/// later stage runs, the WebSocket sees it, and a second cancel is a 409.
async fn cancel_investigation(db_url: String) {
    let script = ScriptedLlm::new();
    script.push_route("Alpha", ScriptedResponse::text("Looking…").then_hang());
    let peers = Peers::start(script).await;
    let app = TestApp::start(peers.options(peers.config(CHAINS), &db_url)).await;
    let mut ws = app.ws().await;
    let id = app.submit("Simple", "pod: web-1").await;
    ws.subscribe(&format!("session:{id}")).await;
    // The answer has started streaming when the user cancels.
    ws.until("the first chunk", |e| e["type"] == "stream.chunk")
        .await;
    let (status, body) = app
        .post(&format!("/api/v1/sessions/{id}/cancel"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelled"], "session", "{body}");
    let end = ws
        .until("the session's end", is_terminal_session_event)
        .await;
    assert_eq!(end["status"], "cancelled", "{end}");
    let s = app.finish(&id).await;
    assert_eq!(s["status"], "cancelled", "{s}");
    assert_eq!(statuses(&s), ["only=cancelled[cancelled]"]);
    assert!(
        peers
            .script()
            .wait_for_cancellations(1, Duration::from_secs(10))
            .await
    );
    assert!(
        !peers
            .script()
            .requests()
            .iter()
            .any(|r| r.system_prompt().contains(EXEC_SUMMARY))
    );
    assert!(
        !s["chat_available"].as_bool().unwrap(),
        "no chat on a cancelled session"
    );
    let (again, body) = app
        .post(&format!("/api/v1/sessions/{id}/cancel"), None)
        .await;
    assert_eq!(again, 409, "{body}");
    app.shutdown().await;
}

/// Cancelling a chat answer: 200 `cancelled: chat`, the chat stage ends
/// cancelled, the session stays completed, and the chat takes a new
/// question afterwards.
async fn cancel_chat(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route("Alpha", ScriptedResponse::text("Alpha done."))
        .push_route("Delta", ScriptedResponse::text("FINAL."))
        .push_route(EXEC_SUMMARY, ScriptedResponse::text("EXEC."))
        .push_route("ChatAgent", ScriptedResponse::hang())
        .push_route("ChatAgent", ScriptedResponse::text("Second answer."));
    let peers = Peers::start(script).await;
    let app = TestApp::start(peers.options(peers.config(CHAINS), &db_url)).await;
    let id = app.submit("Simple", "pod: web-1").await;
    assert_eq!(app.finish(&id).await["status"], "completed");
    let mut ws = app.ws().await;
    ws.subscribe(&format!("session:{id}")).await;

    let calls = peers.script().request_count();
    let first = app.chat(&id, "Why?").await;
    let stage = first["stage_id"].as_str().unwrap().to_string();
    // The model is answering when the user cancels.
    wait_llm_calls(&peers, calls + 1).await;
    app.wait_session(&id, "the chat answer running", |s| {
        s["chat"]["active_stage_id"] == stage.as_str()
    })
    .await;
    let (busy, _) = app
        .post(
            &format!("/api/v1/sessions/{id}/chat/messages"),
            Some(serde_json::json!({"content": "Hello?"})),
        )
        .await;
    assert_eq!(busy, 409, "one answer at a time");
    let (status, body) = app
        .post(&format!("/api/v1/sessions/{id}/cancel"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelled"], "chat", "{body}");
    assert_eq!(body["stage_id"], stage.as_str(), "{body}");
    let s = app.finish_chat(&id, &stage).await;
    assert_eq!(s["status"], "completed", "the session is untouched: {s}");
    let chat_stage = s["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["id"] == stage.as_str())
        .unwrap();
    assert_eq!(chat_stage["status"], "cancelled", "{chat_stage}");
    let st = stage.clone();
    ws.until("the chat stage cancelled", move |e| {
        e["type"] == "stage.status" && e["stage_id"] == st.as_str() && e["status"] == "cancelled"
    })
    .await;
    assert!(
        peers
            .script()
            .wait_for_cancellations(1, Duration::from_secs(10))
            .await
    );

    let second = app.chat(&id, "And now?").await;
    let s = app
        .finish_chat(&id, second["stage_id"].as_str().unwrap())
        .await;
    assert_eq!(s["chat"]["message_count"], 2, "{s}");
    let timeline = app.get_ok(&format!("/api/v1/sessions/{id}/timeline")).await;
    assert!(
        timeline
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["content"] == "Second answer.")
    );
    app.shutdown().await;
}

/// The chain's session timeout ends a hanging investigation as timed out
/// (not cancelled); the session can still be chatted about.
async fn session_timeout(db_url: String) {
    let script = ScriptedLlm::new();
    script.push_route("Alpha", ScriptedResponse::hang());
    let peers = Peers::start(script).await;
    let app = TestApp::start(peers.options(peers.config(CHAINS), &db_url)).await;
    let mut ws = app.ws().await;
    let started = tokio::time::Instant::now();
    let id = app.submit("Quick", "pod: web-1").await;
    ws.subscribe(&format!("session:{id}")).await;
    let end = ws
        .until("the session's end", is_terminal_session_event)
        .await;
    assert_eq!(end["status"], "timed_out", "{end}");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1900),
        "timed out after {elapsed:?}, before 2 s"
    );
    let s = app.finish(&id).await;
    assert_eq!(s["status"], "timed_out", "{s}");
    assert_eq!(statuses(&s), ["only=timed_out[timed_out]"]);
    assert!(s["chat_available"].as_bool().unwrap(), "{s}");
    assert!(
        peers
            .script()
            .wait_for_cancellations(1, Duration::from_secs(10))
            .await
    );
    app.shutdown().await;
}

/// With `maxConcurrentSessions` 1, three sessions run one at a time in
/// creation order; the others wait as `pending`.
async fn concurrency_limit(db_url: String) {
    let script = ScriptedLlm::new();
    for n in 1..=3 {
        script.push_route(
            "Alpha",
            ScriptedResponse::text(format!("analysis {n}"))
                .with_chunk_delay(Duration::from_millis(150)),
        );
        script.push_route("Delta", ScriptedResponse::text(format!("final {n}")));
    }
    script.set_default(Some(ScriptedResponse::text("summary")));
    let peers = Peers::start(script).await;
    let mut options = peers.options(peers.config(CHAINS), &db_url);
    options.max_concurrent_sessions = Some(1);
    let app = TestApp::start(options).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(app.submit("Simple", "pod: web-1").await);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Watch the session list as a dashboard would.
    let mut max_running = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let list = app.get_ok("/api/v1/sessions?page_size=10").await;
        let sessions = list["sessions"].as_array().unwrap();
        let running = sessions
            .iter()
            .filter(|s| s["status"] == "in_progress")
            .count();
        max_running = max_running.max(running);
        if sessions
            .iter()
            .filter(|s| s["status"] == "completed")
            .count()
            == 3
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "sessions did not finish: {list}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(max_running, 1, "never more than one session in progress");
    let mut done = Vec::new();
    for id in &ids {
        done.push(app.finish(id).await);
    }
    for (n, s) in done.iter().enumerate() {
        assert_eq!(
            s["final_analysis"],
            format!("final {}", n + 1),
            "creation order"
        );
    }
    for pair in done.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            a["completed_at"].as_str() <= b["started_at"].as_str(),
            "one at a time: {a} {b}"
        );
    }
    app.shutdown().await;
}

on_both_backends!(
    cancel_investigation,
    cancel_chat,
    session_timeout,
    concurrency_limit
);
