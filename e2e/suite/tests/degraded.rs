//! An MCP server that cannot start, as a user sees it: by default the
//! investigation goes on with the tools that work, and says so on the
//! timeline, in the session's warnings and in `/health`; a chain with
//! `onMcpServerUnavailable: fail` fails the execution instead, naming the
//! server.

use std::time::Duration;

use serde_json::Value;
use tarsy_e2e::harness::{Peers, TestApp};
use tarsy_e2e::on_both_backends;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};

/// A server whose process exits at once (its command exists: local mode
/// refuses to start on a missing one), an agent using it beside the working
/// test server, and two chains that differ only in their policy.
const CONFIG: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: broken}
spec:
  stdio:
    command: /bin/sh
    args: [-c, "echo 'not an MCP server' >&2; exit 3"]
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: echo}
spec:
  displayName: Echo
  mcpServers: [testmcp, broken]
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: tolerant}
spec:
  alertTypes: [Tolerant]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: look
    agent: echo
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: strict-tools}
spec:
  alertTypes: [StrictTools]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  onMcpServerUnavailable: fail
  stages:
  - name: look
    agent: echo
"#;

fn error_events(timeline: &Value) -> Vec<&Value> {
    timeline
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == "error")
        .collect()
}

/// The default: the session completes on the tools that work, and the
/// broken server is visible everywhere a user looks.
async fn unavailable_server_is_visible(db_url: String) {
    let script = ScriptedLlm::new();
    script.push_route(
        "Echo",
        ScriptedResponse::text("FINAL: looked with testmcp only."),
    );
    let peers = Peers::start(script).await;
    let app = TestApp::start(peers.options(peers.config(CONFIG), &db_url)).await;
    let id = app.submit("Tolerant", "pod: web-0").await;
    let s = app.finish(&id).await;
    assert_eq!(s["status"], "completed", "{s}");

    // The timeline says which server and why.
    let timeline = app.get_ok(&format!("/api/v1/sessions/{id}/timeline")).await;
    let errors = error_events(&timeline);
    assert_eq!(errors.len(), 1, "{timeline}");
    assert_eq!(errors[0]["metadata"]["kind"], "mcp_server_unavailable");
    assert_eq!(errors[0]["metadata"]["server"], "broken");
    let content = errors[0]["content"].as_str().unwrap();
    assert!(
        content.starts_with("MCP server broken unavailable"),
        "{content}"
    );

    // The session carries it as a warning, pointing at the execution.
    let warnings = s["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{s}");
    assert_eq!(warnings[0]["kind"], "mcp_server_unavailable");
    assert_eq!(warnings[0]["server"], "broken");
    assert_eq!(
        warnings[0]["execution_id"],
        s["stages"][0]["executions"][0]["id"]
    );
    assert_eq!(warnings[0]["event_id"], errors[0]["id"]);

    // The model was told too: its first request names the server.
    let first = peers.script().requests()[0].clone();
    assert!(format!("{first:?}").contains("broken"), "{first:?}");

    // `/health` is degraded by it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, health) = app.get("/health").await;
        if health["status"] == "degraded" {
            let servers = &health["mcp"]["servers"];
            assert_eq!(servers["broken"]["healthy"], false, "{health}");
            assert_eq!(servers["testmcp"]["healthy"], true, "{health}");
            assert_eq!(health["warnings"][0]["server_id"], "broken", "{health}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/health never degraded: {health}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.shutdown().await;
}

/// `onMcpServerUnavailable: fail`: the execution fails before any model
/// call, naming the server; no warning-free "completed" answer.
async fn unavailable_server_fails_a_strict_chain(db_url: String) {
    let script = ScriptedLlm::new();
    script.push_route(
        "Echo",
        ScriptedResponse::text("FINAL: must not be reached."),
    );
    let peers = Peers::start(script).await;
    let app = TestApp::start(peers.options(peers.config(CONFIG), &db_url)).await;
    let id = app.submit("StrictTools", "pod: web-0").await;
    let s = app.finish(&id).await;
    assert_eq!(s["status"], "failed", "{s}");
    let execution = &s["stages"][0]["executions"][0];
    assert_eq!(execution["status"], "failed", "{s}");
    let message = execution["error_message"].as_str().unwrap();
    assert!(
        message.contains("MCP servers unavailable: broken"),
        "{message}"
    );
    assert!(peers.script().requests().is_empty(), "the model was called");
    assert_eq!(s["warnings"][0]["server"], "broken", "{s}");
    app.shutdown().await;
}

on_both_backends!(
    unavailable_server_is_visible,
    unavailable_server_fails_a_strict_chain
);
