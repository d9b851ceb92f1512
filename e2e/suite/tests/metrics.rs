//! `/metrics` of `tarsy serve` after an investigation, as Prometheus would
//! scrape it: LLM calls under the OpenTelemetry GenAI names, tool calls by
//! server and tool, the API's requests by route (never by raw path), and
//! sessions by status from the store.

use tarsy_e2e::harness::{Peers, TestApp};
use tarsy_e2e::on_both_backends;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};

const CHAIN: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: measured}
spec:
  alertTypes: [Measured]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: look
    agent: alpha
"#;

/// The value of the first sample line starting with `prefix`.
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn metrics_after_an_investigation(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::default()
                .then_tool_call("c1", "testmcp__echo", r#"{"text":"hello"}"#)
                .then_usage(1200, 40),
        )
        .push_route(
            "Alpha",
            ScriptedResponse::text("FINAL: fine.").then_usage(1300, 20),
        )
        .push(ScriptedResponse::text("Summary."));
    let peers = Peers::start(script).await;
    let app = TestApp::start(peers.options(peers.config(CHAIN), &db_url)).await;
    let id = app.submit("Measured", "pod: web-0").await;
    assert_eq!(app.finish(&id).await["status"], "completed");

    let response = app
        .http
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");

    // LLM calls: GenAI names and attributes (the provider type is google in
    // the e2e configuration; the scripted LLM serves it).
    let llm = "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"google\",gen_ai_request_model=\"test-model\",tarsy_llm_provider=\"test-llm\",error_type=\"\"}";
    assert!(sample(&text, llm).is_some_and(|n| n >= 2.0), "{text}");
    let input = "gen_ai_client_token_usage_sum{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"google\",gen_ai_request_model=\"test-model\",tarsy_llm_provider=\"test-llm\",gen_ai_token_type=\"input\"}";
    assert!(sample(&text, input).is_some_and(|n| n >= 2500.0), "{text}");

    // Tool calls by server, tool and outcome.
    let tool = "tarsy_mcp_tool_calls_total{server=\"testmcp\",tool=\"echo\",outcome=\"ok\"}";
    assert!(sample(&text, tool).is_some_and(|n| n >= 1.0), "{text}");

    // The API by route pattern: the session id never becomes a label.
    assert!(
        text.contains("route=\"/api/v1/alerts\",status=\"202\"")
            || text.contains("route=\"/api/v1/alerts\",status=202"),
        "{text}"
    );
    assert!(!text.contains(&id), "a session id leaked into a label");

    // Sessions by status, counted in this test's own store.
    assert_eq!(
        sample(&text, "tarsy_sessions{status=\"completed\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "tarsy_sessions{status=\"pending\"}"),
        Some(0.0),
        "{text}"
    );
    app.shutdown().await;
}

on_both_backends!(metrics_after_an_investigation);
