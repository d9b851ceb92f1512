//! The replay server over streamable HTTP, driven by TARSy's own MCP client
//! (the one agents use): tools with their schemas, recorded results,
//! sequences per session, defaults, and the errors of calls nothing answers.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tarsy_core::config::{HttpTransport, TlsOptions};
use tarsy_core::{McpServerConfig, McpTransport, SummarizationConfig};
use tarsy_mcp::client::CallOutcome;
use tarsy_mcp::{McpClient, McpTimeouts};
use tarsy_replay::{ServerFixture, spawn_http};

const FIXTURE: &str = r#"
version: 1
server: kubernetes
instructions: A recorded cluster.
tools:
- name: pods_get
  description: One pod as YAML
  input_schema:
    type: object
    properties:
      namespace: {type: string}
      name: {type: string}
    required: [namespace, name]
  calls:
  - arguments: {namespace: shop, name: web-0}
    text: |
      phase: Pending
  - arguments: {namespace: shop, name: web-0}
    text: |
      phase: Running
  default:
    text: pod not found
    is_error: true
- name: pods_log
  calls:
  - arguments: {namespace: shop, name: web-0}
    text: "OOM: heap exhausted"
"#;

fn client(url: &str) -> McpClient {
    let config = McpServerConfig {
        name: "kubernetes".into(),
        transport: McpTransport::Http(HttpTransport {
            url: url.into(),
            bearer_token: None,
            headers: BTreeMap::new(),
            tls: TlsOptions::default(),
            timeout: None,
        }),
        instructions: String::new(),
        summarization: SummarizationConfig::default(),
    };
    McpClient::new(
        [config],
        McpTimeouts {
            init: Duration::from_secs(10),
            call: Duration::from_secs(10),
            ..McpTimeouts::default()
        },
    )
}

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

async fn call(c: &McpClient, tool: &str, a: Value) -> (String, bool) {
    match c.call_tool("kubernetes", tool, args(a)).await.unwrap() {
        CallOutcome::Completed { result: r, .. } => {
            let text = r
                .content
                .iter()
                .filter_map(|b| b.as_text().map(|t| t.text.clone()))
                .collect::<Vec<_>>()
                .join("");
            (text, r.is_error.unwrap_or(false))
        }
        CallOutcome::Rejected(e) => (format!("rejected: {}", e.message), true),
    }
}

#[tokio::test]
async fn recorded_results_are_served_by_tool_and_arguments() {
    let fixture = ServerFixture::parse(FIXTURE, Path::new("kubernetes.yaml")).unwrap();
    let server = spawn_http(fixture, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let c = client(&server.url());

    let tools = c.list_tools("kubernetes").await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["pods_get", "pods_log"]);
    assert_eq!(tools[0].description.as_deref(), Some("One pod as YAML"));
    assert_eq!(
        tools[0].input_schema.get("required"),
        Some(&json!(["namespace", "name"]))
    );
    assert_eq!(
        Value::Object((*tools[1].input_schema).clone()),
        json!({"type": "object"})
    );

    // A sequence: the first call, then the next, then the last repeats.
    let web0 = json!({"namespace": "shop", "name": "web-0"});
    assert_eq!(
        call(&c, "pods_get", web0.clone()).await,
        ("phase: Pending\n".into(), false)
    );
    assert_eq!(
        call(&c, "pods_get", web0.clone()).await,
        ("phase: Running\n".into(), false)
    );
    assert_eq!(
        call(&c, "pods_get", web0.clone()).await,
        ("phase: Running\n".into(), false)
    );
    // Loose values and extra arguments still match.
    assert_eq!(
        call(
            &c,
            "pods_log",
            json!({"namespace": "shop", "name": "web-0", "tail": "100"})
        )
        .await,
        ("OOM: heap exhausted".into(), false)
    );
    // No match: the tool's default.
    assert_eq!(
        call(
            &c,
            "pods_get",
            json!({"namespace": "shop", "name": "web-9"})
        )
        .await,
        ("pod not found".into(), true)
    );
    // No match and no default: an error result saying what is recorded.
    let (text, is_error) = call(
        &c,
        "pods_log",
        json!({"namespace": "shop", "name": "web-9"}),
    )
    .await;
    assert!(is_error);
    assert_eq!(
        text,
        "no recorded result for pods_log with arguments {\"name\":\"web-9\",\"namespace\":\"shop\"}: \
         the fixture of MCP server \"kubernetes\" records pods_log only for the arguments \
         {\"name\":\"web-0\",\"namespace\":\"shop\"} and has no default for it"
    );
    // A tool the recording does not have: a JSON-RPC error, as live.
    let (text, _) = call(&c, "pods_delete", json!({})).await;
    assert!(
        text.starts_with("rejected: unknown tool \"pods_delete\"; the recorded MCP server \"kubernetes\" has: pods_get, pods_log"),
        "{text}"
    );
    c.close().await;

    // A new session replays the sequence from its start.
    let c = client(&server.url());
    assert_eq!(
        call(&c, "pods_get", web0).await,
        ("phase: Pending\n".into(), false)
    );
    c.close().await;
    server.stop().await;
}
