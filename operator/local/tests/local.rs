//! Local mode as a user meets it: the REST API served by the local app, and
//! the shipped example configuration (scripted provider over in-process
//! gRPC, the real `mcp-server-time` over stdio).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tarsy_core::{SessionStatus, TimelineEventType};
use tarsy_local::{LocalApp, LocalOptions};
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};

use common::*;

const CHAIN: &str = r#"
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
"#;

/// Alert submission, session reading, chat (202 then 409 while busy) and
/// cancellation through real HTTP.
async fn rest_api(db_url: String) {
    let script = ScriptedLlm::new();
    // Two sessions are answered: one restricted to a tool, then the main one.
    script
        .push_route("Alpha", ScriptedResponse::text("Analysis over HTTP."))
        .push_route("Alpha", ScriptedResponse::text("Analysis over HTTP."))
        .push(ScriptedResponse::text("Summary over HTTP."))
        .push(ScriptedResponse::text("Summary over HTTP."))
        .push_route("ChatAgent", ScriptedResponse::hang());
    let peers = Peers::start(script).await;
    let mut opts = options(config(&peers, CHAIN), &peers, &db_url);
    opts.listen = Some("127.0.0.1:0".parse().unwrap());
    let app = LocalApp::start(opts).await.unwrap();
    let base = format!("http://{}", app.api_addr().unwrap());
    let http = reqwest::Client::new();

    // The MCP health monitor checks the servers chains use.
    eventually("testmcp healthy in /health", || async {
        let health: Value = match http.get(format!("{base}/health")).send().await {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(_) => return false,
        };
        health["mcp"]["servers"]["testmcp"]["healthy"] == json!(true)
    })
    .await;

    let unknown = http
        .post(format!("{base}/api/v1/alerts"))
        .json(&json!({"alert_type": "Nope", "data": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 400);
    let unknown_server = http
        .post(format!("{base}/api/v1/alerts"))
        .json(&json!({"alert_type": "Simple", "data": "x",
            "mcp_selection": {"servers": [{"name": "no-such-server"}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown_server.status(), 400);
    assert!(
        unknown_server
            .text()
            .await
            .unwrap()
            .contains("no-such-server")
    );
    // A tool the server does not offer (a typo) is refused, naming it and
    // what the server offers; a real one is accepted (the session is
    // cancelled: only the admission matters here).
    let unknown_tool = http
        .post(format!("{base}/api/v1/alerts"))
        .json(&json!({"alert_type": "Simple", "data": "x",
            "mcp_selection": {"servers": [{"name": "testmcp", "tools": ["echo", "ecoh"]}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown_tool.status(), 400);
    let body: Value = unknown_tool.json().await.unwrap();
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(r#"MCP server "testmcp" has no tool "ecoh""#)
            && message.contains("it offers: ")
            && message.contains("echo"),
        "{body}"
    );
    let known_tool = http
        .post(format!("{base}/api/v1/alerts"))
        .json(&json!({"alert_type": "Simple", "data": "x",
            "mcp_selection": {"servers": [{"name": "testmcp", "tools": ["echo"]}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(known_tool.status(), 202);
    let known: Value = known_tool.json().await.unwrap();
    let known_id = known["session_id"].as_str().unwrap().to_string();
    finish(&app, &known_id).await;

    let accepted: Value = http
        .post(format!("{base}/api/v1/alerts"))
        .json(&json!({"alert_type": "Simple", "data": {"pod": "web-1"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = accepted["session_id"].as_str().unwrap().to_string();
    let session = finish(&app, &id).await;
    assert_eq!(session.status, SessionStatus::Completed);
    let body: Value = http
        .get(format!("{base}/api/v1/sessions/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["status"], "completed", "{body}");
    assert_eq!(body["executive_summary"], "Summary over HTTP.", "{body}");

    let chat = |content: &str| {
        http.post(format!("{base}/api/v1/sessions/{id}/chat/messages"))
            .json(&json!({"content": content}))
            .send()
    };
    let first = chat("Why?").await.unwrap();
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    let stage_id = first["stage_id"].as_str().unwrap().to_string();
    eventually("the chat answer running", || async {
        app.store()
            .get_stage(&stage_id)
            .await
            .map(|s| s.status == tarsy_core::ExecutionStatus::Active)
            .unwrap_or(false)
    })
    .await;
    let busy = chat("Still there?").await.unwrap();
    assert_eq!(busy.status(), 409);
    let cancel = http
        .post(format!("{base}/api/v1/sessions/{id}/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 200);
    let cancel: Value = cancel.json().await.unwrap();
    assert_eq!(cancel["cancelled"], "chat", "{cancel}");
    app.shutdown().await;
}

on_both_backends!(rest_api);

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The peers example, in process: the example chain with the scripted
/// provider replaying its script over in-process gRPC, and the real
/// `mcp-server-time` as a stdio child process, investigates the example
/// alert to completion. Needs the MCP peers (`e2e/install-mcp-peers.sh`).
/// (README's first command, on recorded fixtures, is tested with the real
/// `tarsy` binary in operator/tarsy/tests/investigate.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_example_investigates_offline() {
    let peers_dir = std::env::var_os("TARSY_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/tarsy/mcp-peers")
        });
    assert!(
        peers_dir.join("venv/bin/mcp-server-time").exists(),
        "mcp-server-time is not installed in {}: run e2e/install-mcp-peers.sh",
        peers_dir.display()
    );
    let config_dir = examples_dir().join("peers/config");
    let env = |name: &str| match name {
        "TARSY_PEERS_DIR" => Some(peers_dir.display().to_string()),
        _ => None,
    };
    let config = tarsy_config::load_dir_with(&config_dir, &Default::default(), &env)
        .unwrap_or_else(|e| panic!("{e}"));
    let alert =
        tarsy_config::load_alert_file(&examples_dir().join("alerts/pod-crashloop.yaml"), &|_| None)
            .unwrap_or_else(|e| panic!("{e}"));
    let mut opts = LocalOptions::new(config, &config_dir);
    // Nothing listens here: a scripted provider must never reach it.
    opts.llm_addr = "http://127.0.0.1:9".into();
    let app = LocalApp::start(opts).await.unwrap();
    let accepted = app
        .control()
        .submit_alert(tarsy_api::NewAlert {
            alert_type: alert.spec.alert_type,
            data: alert.spec.data,
            chain: None,
            runbook_url: None,
            mcp_selection: None,
            author: "example".into(),
        })
        .await
        .unwrap();
    let session = app
        .wait_for_terminal(&accepted.session_id, Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(session.status, SessionStatus::Completed, "{session:?}");
    assert!(session.final_analysis.unwrap().contains("Root cause"));
    assert!(session.executive_summary.unwrap().contains("checkout-api"));
    let timeline = app
        .store()
        .session_timeline(&accepted.session_id)
        .await
        .unwrap();
    let tool = timeline
        .iter()
        .find(|e| e.event_type == TimelineEventType::LlmToolCall)
        .expect("the triage agent calls the time server");
    // The real server answered (its JSON carries the time zone asked for).
    assert!(
        tool.content.contains("\"timezone\": \"UTC\""),
        "{}",
        tool.content
    );
    let stages = stages(app.store(), &accepted.session_id).await;
    let names: Vec<&str> = stages.iter().map(|(s, _)| s.stage_name.as_str()).collect();
    assert_eq!(names, ["triage", "root-cause"]);
    app.shutdown().await;
}
