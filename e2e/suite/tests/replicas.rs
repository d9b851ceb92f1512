//! Two API replicas on one Postgres database: replica A runs the driver and
//! the API; replica B is an API only (its own event hub, no orchestration).
//! A client on B follows a session A drives: every event, persistent and
//! streaming, can only reach it through Postgres NOTIFY/LISTEN.

use tarsy_api::{Api, ApiConfig};
use tarsy_e2e::harness::{Peers, TestApp, WsClient, is_terminal_session_event};
use tarsy_e2e::layers::{snapshot, ws_sequence};
use tarsy_e2e::on_postgres;
use tarsy_events::EventHub;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};
use tarsy_store::Store;
use tokio_util::sync::CancellationToken;

const CHAIN: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: replicated}
spec:
  alertTypes: [Replicated]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: investigate
    agent: alpha
  - name: conclude
    agent: delta
"#;

async fn multi_replica_streaming(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::default()
                .then_thinking("Looking at the pod.")
                .then_tool_call("a1", "testmcp__echo", r#"{"text":"restarts: 7"}"#),
        )
        .push_route(
            "Alpha",
            ScriptedResponse::text("Seven restarts, ").then_text("all OOMKilled."),
        )
        .push_route("Delta", ScriptedResponse::text("FINAL: raise the limit."))
        .push_route(
            "You write executive summaries",
            ScriptedResponse::text("EXEC: OOM."),
        );
    let peers = Peers::start(script).await;
    let a = TestApp::start(peers.options(peers.config(CHAIN), &db_url)).await;

    // Replica B: the API over its own store connection and event hub.
    let store_b = Store::connect(&db_url).await.unwrap();
    let hub_b = EventHub::start(store_b.clone());
    let router = Api::new(hub_b.clone(), a.app.control(), ApiConfig::default()).router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_b = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let server = tokio::spawn(
        axum::serve(listener, router)
            .with_graceful_shutdown(stop.clone().cancelled_owned())
            .into_future(),
    );

    let mut on_a = a.ws().await;
    let mut on_b = WsClient::connect(&base_b).await;
    on_b.subscribe("sessions").await;
    // Submitted through replica B's REST API.
    let http = reqwest::Client::new();
    let accepted: serde_json::Value = http
        .post(format!("{base_b}/api/v1/alerts"))
        .json(&serde_json::json!({"alert_type": "Replicated", "data": "pod: web-1"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = accepted["session_id"].as_str().unwrap().to_string();
    let channel = format!("session:{id}");
    on_b.subscribe(&channel).await;
    on_a.subscribe(&channel).await;
    on_b.until("the session's end on B", is_terminal_session_event)
        .await;
    on_a.until("the session's end on A", is_terminal_session_event)
        .await;
    let s = a.finish(&id).await;
    assert_eq!(s["status"], "completed", "{s}");
    assert_eq!(s["pod_id"], "e2e-pod", "replica A drove it");

    // B's client saw the model's answer stream (transient NOTIFYs) …
    assert!(
        on_b.events.iter().any(|e| e["type"] == "stream.chunk"),
        "no stream.chunk reached replica B: {:?}",
        on_b.events
            .iter()
            .map(|e| e["type"].clone())
            .collect::<Vec<_>>()
    );
    // … the `sessions` list channel …
    let listed = |e: &serde_json::Value| {
        e["channel"] == "sessions" && e["type"] == "session.status" && e["status"] == "completed"
    };
    if !on_b.events.iter().any(listed) {
        on_b.until("the session list's update on B", listed).await;
    }
    // … and exactly the persistent events A's own client saw, in order.
    let snap = snapshot(&a, &id).await;
    let only_session = |events: &[serde_json::Value]| -> Vec<serde_json::Value> {
        events
            .iter()
            .filter(|e| e["channel"] == channel.as_str())
            .cloned()
            .collect()
    };
    let seq_a = ws_sequence(&snap.names, &only_session(&on_a.events));
    let seq_b = ws_sequence(&snap.names, &only_session(&on_b.events));
    assert_eq!(seq_a, seq_b, "replica B's client saw other events than A's");
    let types: Vec<_> = seq_b["session"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].clone())
        .collect();
    assert!(
        types.contains(&"session.status".into()) && types.contains(&"stage.status".into()),
        "{types:?}"
    );
    // Replica B reads the same session over REST.
    let via_b: serde_json::Value = http
        .get(format!("{base_b}/api/v1/sessions/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(via_b["final_analysis"], "FINAL: raise the limit.");

    stop.cancel();
    let _ = server.await;
    store_b.close().await;
    a.shutdown().await;
}

on_postgres!(multi_replica_streaming);
