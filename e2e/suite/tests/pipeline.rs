//! The full pipeline through the REST and WebSocket API, verified by golden
//! files over all four data layers: a parallel multi-agent stage (one agent
//! summarises a large tool result, the other hits its iteration limit and
//! is forced to conclude) with synthesis, a replica stage (written as the
//! reference writes it: a one-entry `agents` list with a stage-level
//! `replicas`) with synthesis, a final stage, the executive summary and two
//! chat turns.

use std::time::Duration;

use tarsy_e2e::golden::assert_golden;
use tarsy_e2e::harness::{Peers, TestApp, is_terminal_session_event};
use tarsy_e2e::layers::{snapshot, ws_sequence};
use tarsy_e2e::on_both_backends;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};

const CHAIN: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: pipeline}
spec:
  alertTypes: [Pipeline]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: parallel
    agents: [{name: alpha}, {name: bravo, maxIterations: 1}]
  - name: replicas
    agents: [{name: charlie}]
    replicas: 2
  - name: final
    agent: delta
"#;

/// Routing keys: agent names appear in their system prompts; the
/// summarisation and executive-summary prompts open with these words.
const SUMMARIZER: &str = "You condense the output of a tool";
const EXEC_SUMMARY: &str = "You write executive summaries";

/// Parallel agents run concurrently, but the chat context lists the
/// session's timeline in creation order (interleaving parallel agents), so
/// the golden chat prompts are only deterministic when the second agent of
/// a parallel stage starts answering after the first one is done.
const STAGGER: Duration = Duration::from_millis(1200);

fn script() -> ScriptedLlm {
    let s = ScriptedLlm::new();
    s.push_route(
        "Alpha",
        ScriptedResponse::default()
            .then_thinking("The pod logs are big; fetch them.")
            .then_tool_call("a1", "testmcp__large_output", r#"{"bytes":6000}"#)
            .then_usage(120, 30),
    )
    .push_route(
        SUMMARIZER,
        ScriptedResponse::text("SUMMARY: 6000 bytes of filler, no errors.").then_usage(400, 12),
    )
    .push_route(
        "Alpha",
        ScriptedResponse::text("Alpha: logs are clean; OOM kills come from the limit."),
    )
    .push_route(
        "Bravo",
        ScriptedResponse::default()
            .then_text("Checking the events.")
            .then_tool_call(
                "b1",
                "testmcp__echo",
                r#"{"text":"bravo evidence: OOMKilled x5"}"#,
            )
            .with_chunk_delay(STAGGER),
    )
    // Iteration limit reached: the forced conclusion, without tools.
    .push_route(
        "Bravo",
        ScriptedResponse::text("Bravo (forced): five OOM kills, limit 256Mi."),
    )
    .push_route(
        "SynthesisAgent",
        ScriptedResponse::text("SYNTH-1: OOM kills caused by a 256Mi limit."),
    )
    .push_route(
        "Charlie-1",
        ScriptedResponse::text("Charlie one: raise the limit."),
    )
    .push_route(
        "Charlie-2",
        ScriptedResponse::text("Charlie two: check the cache.").with_chunk_delay(STAGGER),
    )
    .push_route(
        "SynthesisAgent",
        ScriptedResponse::text("SYNTH-2: raise the limit, then check the cache."),
    )
    .push_route(
        "Delta",
        ScriptedResponse::default()
            .then_thinking("Combine both syntheses.")
            .then_text("FINAL: raise the memory limit to 512Mi; audit the cache."),
    )
    .push_route(
        EXEC_SUMMARY,
        ScriptedResponse::text("EXEC: OOM kills; raise the limit."),
    )
    .push_route(
        "ChatAgent",
        ScriptedResponse::text("CHAT-1: the limit is 256Mi."),
    )
    .push_route(
        "ChatAgent",
        ScriptedResponse::default().then_tool_call(
            "c1",
            "testmcp__echo",
            r#"{"text":"limit 256Mi"}"#,
        ),
    )
    .push_route(
        "ChatAgent",
        ScriptedResponse::text("CHAT-2: set it to 512Mi."),
    );
    s
}

async fn pipeline(db_url: String) {
    let backend = if db_url.starts_with("postgres") {
        "postgres"
    } else {
        "sqlite"
    };
    let peers = Peers::start(script()).await;
    let app = TestApp::start(peers.options(peers.config(CHAIN), &db_url)).await;
    let mut ws = app.ws().await;

    let id = app
        .submit("Pipeline", "pod: web-1\nnamespace: shop\nreason: OOMKilled")
        .await;
    ws.subscribe(&format!("session:{id}")).await;
    ws.until("the session's end", is_terminal_session_event)
        .await;
    let done = app.finish(&id).await;
    assert_eq!(done["status"], "completed", "{done}");

    // Two chat turns; the second one uses a tool.
    for (question, answer) in [
        ("Why did it crash?", "CHAT-1: the limit is 256Mi."),
        ("What limit should I set?", "CHAT-2: set it to 512Mi."),
    ] {
        let accepted = app.chat(&id, question).await;
        let stage_id = accepted["stage_id"].as_str().unwrap().to_string();
        let sid = stage_id.clone();
        ws.until("the chat stage's end", move |e| {
            e["type"] == "stage.status"
                && e["stage_id"] == sid.as_str()
                && e["status"] != "started"
                && e["status"] != "active"
        })
        .await;
        app.finish_chat(&id, &stage_id).await;
        let timeline = app.get_ok(&format!("/api/v1/sessions/{id}/timeline")).await;
        assert!(
            timeline
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["content"] == answer),
            "chat answer {answer:?} missing from the timeline"
        );
    }
    assert_eq!(
        peers.script().remaining(),
        0,
        "every scripted answer was used"
    );

    let snap = snapshot(&app, &id).await;
    // The same scenario on both backends must read back identically.
    assert_golden("pipeline_layers", &snap.document);
    assert_golden("pipeline_ws_events", &ws_sequence(&snap.names, &ws.events));
    let _ = backend;

    // The transient stream reached the client: chunks of the final answer.
    assert!(
        ws.events.iter().any(|e| e["type"] == "stream.chunk"),
        "no stream.chunk over the WebSocket"
    );
    app.shutdown().await;
}

on_both_backends!(pipeline);
