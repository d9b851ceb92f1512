//! Failure handling as a user sees it over the REST API, with golden files
//! over the four data layers: a failing agent under `successPolicy: any`
//! (the stage and the session still complete; a failing executive summary
//! is recorded, not fatal) and under `successPolicy: all` (the stage fails
//! and nothing after it runs).

use tarsy_e2e::golden::assert_golden;
use tarsy_e2e::harness::{Peers, TestApp, is_terminal_session_event};
use tarsy_e2e::layers::{snapshot, ws_sequence};
use tarsy_e2e::on_both_backends;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};

const CHAINS: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: resilient}
spec:
  alertTypes: [Resilient]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: parallel
    successPolicy: any
    agents: [{name: alpha, maxIterations: 1}, {name: bravo}]
  - name: final
    agent: delta
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: strict}
spec:
  alertTypes: [Strict]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: parallel
    successPolicy: all
    agents: [{name: alpha, maxIterations: 1}, {name: bravo}]
  - name: final
    agent: delta
"#;

const EXEC_SUMMARY: &str = "You write executive summaries";

fn stage_names(session: &serde_json::Value) -> Vec<String> {
    session["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}={}",
                s["stage_name"].as_str().unwrap(),
                s["status"].as_str().unwrap()
            )
        })
        .collect()
}

/// `successPolicy: any`: one agent's model fails, the other answers; the
/// stage completes (synthesised from the survivor), the chain goes on, and
/// the executive summary's failure leaves the session completed with the
/// error recorded.
async fn failure_resilience(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::error("invalid_argument", "Alpha's model refused", false),
        )
        .push_route(
            "Bravo",
            ScriptedResponse::text("Bravo: the node is out of memory."),
        )
        .push_route(
            "SynthesisAgent",
            ScriptedResponse::text("SYNTH: node memory pressure."),
        )
        .push_route("Delta", ScriptedResponse::text("FINAL: drain the node."))
        .push_route(
            EXEC_SUMMARY,
            ScriptedResponse::error("unavailable", "summary model down", false),
        );
    let peers = Peers::start(script).await;
    let app = TestApp::start(peers.options(peers.config(CHAINS), &db_url)).await;
    let mut ws = app.ws().await;
    let id = app.submit("Resilient", "node: n1").await;
    ws.subscribe(&format!("session:{id}")).await;
    let end = ws
        .until("the session's end", is_terminal_session_event)
        .await;
    assert_eq!(end["status"], "completed", "{end}");

    let s = app.finish(&id).await;
    assert_eq!(s["status"], "completed", "{s}");
    assert_eq!(s["final_analysis"], "FINAL: drain the node.");
    assert!(s["executive_summary"].is_null(), "{s}");
    let err = s["executive_summary_error"].as_str().unwrap_or_default();
    assert!(err.contains("summary model down"), "{err}");
    assert_eq!(
        stage_names(&s),
        [
            "parallel=completed",
            "parallel - Synthesis=completed",
            "final=completed"
        ]
    );
    let parallel = &s["stages"][0]["executions"];
    assert_eq!(parallel[0]["status"], "failed", "{parallel}");
    assert!(
        parallel[0]["error_message"]
            .as_str()
            .unwrap_or_default()
            .contains("Alpha's model refused"),
        "{parallel}"
    );
    assert_eq!(parallel[1]["status"], "completed", "{parallel}");

    let snap = snapshot(&app, &id).await;
    assert_golden("failure_resilience_layers", &snap.document);
    assert_golden(
        "failure_resilience_ws_events",
        &ws_sequence(&snap.names, &ws.events),
    );
    app.shutdown().await;
}

/// `successPolicy: all`: one failing agent fails the stage and the session
/// (fail-fast): no synthesis, no later stage, no executive summary.
async fn failure_propagation(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::error("invalid_argument", "Alpha's model refused", false),
        )
        .push_route(
            "Bravo",
            ScriptedResponse::text("Bravo: the node is out of memory."),
        );
    let peers = Peers::start(script).await;
    let app = TestApp::start(peers.options(peers.config(CHAINS), &db_url)).await;
    let mut ws = app.ws().await;
    let id = app.submit("Strict", "node: n1").await;
    ws.subscribe(&format!("session:{id}")).await;
    let end = ws
        .until("the session's end", is_terminal_session_event)
        .await;
    assert_eq!(end["status"], "failed", "{end}");

    let s = app.finish(&id).await;
    assert_eq!(s["status"], "failed", "{s}");
    assert!(s["final_analysis"].is_null(), "{s}");
    assert!(s["executive_summary"].is_null(), "{s}");
    assert!(
        s["error_message"]
            .as_str()
            .unwrap_or_default()
            .contains("Alpha's model refused"),
        "{s}"
    );
    assert_eq!(stage_names(&s), ["parallel=failed"]);
    let routes: Vec<_> = peers
        .script()
        .requests()
        .into_iter()
        .filter_map(|r| r.route)
        .collect();
    assert!(
        !routes.iter().any(|r| r == "SynthesisAgent" || r == "Delta"),
        "nothing runs after the failed stage: {routes:?}"
    );
    assert!(
        peers
            .script()
            .requests()
            .iter()
            .all(|r| !r.system_prompt().contains(EXEC_SUMMARY)),
        "no executive summary for a failed session"
    );

    let snap = snapshot(&app, &id).await;
    assert_golden("failure_propagation_layers", &snap.document);
    assert_golden(
        "failure_propagation_ws_events",
        &ws_sequence(&snap.names, &ws.events),
    );
    app.shutdown().await;
}

on_both_backends!(failure_resilience, failure_propagation);
