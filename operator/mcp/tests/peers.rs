//! The client against MCP servers we did not write, installed from the npm
//! and PyPI registries by `e2e/install-mcp-peers.sh`:
//! `@modelcontextprotocol/server-everything` (stdio, streamable HTTP, legacy
//! SSE), `mcp-server-time` (stdio, and through the bridge), and
//! `kubernetes-mcp-server` (tools listing, read-only).
//!
//! These tests fail, never skip, when the peers are missing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tarsy_core::config::{HttpTransport, TlsOptions};
use tarsy_core::{McpServerConfig, McpTransport, SummarizationConfig, ToolCall, ToolFilter};
use tarsy_masking::{AlertMaskingConfig, MaskingService};
use tarsy_mcp::bridge::{self, StdioBridgeConfig};
use tarsy_mcp::{ExecutorRequest, McpClientFactory, McpTimeouts, McpToolExecutor};

fn peers_dir() -> PathBuf {
    let dir = std::env::var_os("TARSY_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/tarsy/mcp-peers")
        });
    assert!(
        dir.join(".installed").exists(),
        "MCP test peers are not installed in {}: run e2e/install-mcp-peers.sh (or set TARSY_PEERS_DIR)",
        dir.display()
    );
    dir
}

fn everything_js() -> String {
    let p =
        peers_dir().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        p.exists(),
        "{} missing: rerun e2e/install-mcp-peers.sh",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

fn time_server() -> String {
    let p = peers_dir().join("venv/bin/mcp-server-time");
    assert!(
        p.exists(),
        "{} missing: rerun e2e/install-mcp-peers.sh",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

fn kubernetes_server() -> String {
    let p = peers_dir().join("npm/node_modules/.bin/kubernetes-mcp-server");
    assert!(
        p.exists(),
        "{} missing: rerun e2e/install-mcp-peers.sh",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

fn timeouts() -> McpTimeouts {
    McpTimeouts {
        init: Duration::from_secs(30),
        call: Duration::from_secs(20),
        ..McpTimeouts::default()
    }
}

fn stdio(name: &str, command: &str, args: &[&str]) -> McpServerConfig {
    McpServerConfig {
        name: name.to_owned(),
        transport: McpTransport::Stdio {
            command: command.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: BTreeMap::new(),
            cwd: None,
        },
        instructions: String::new(),
        summarization: SummarizationConfig::default(),
    }
}

fn http_transport(url: String) -> HttpTransport {
    HttpTransport {
        url,
        bearer_token: None,
        headers: BTreeMap::new(),
        tls: TlsOptions::default(),
        timeout: None,
    }
}

fn remote(name: &str, transport: McpTransport) -> McpServerConfig {
    McpServerConfig {
        name: name.to_owned(),
        transport,
        instructions: String::new(),
        summarization: SummarizationConfig::default(),
    }
}

async fn executor(config: McpServerConfig) -> McpToolExecutor {
    let name = config.name.clone();
    let masking = Arc::new(MaskingService::new([], AlertMaskingConfig::default()).unwrap());
    let ex = McpClientFactory::new([config], masking)
        .with_timeouts(timeouts())
        .create_executor(ExecutorRequest::new(vec![name], ToolFilter::new()))
        .await
        .unwrap();
    assert!(ex.failed_servers().is_empty(), "{:?}", ex.failed_servers());
    ex
}

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `node index.js MODE` with PORT set and waits until it accepts
/// connections.
async fn start_everything(mode: &str) -> (tokio::process::Child, u16) {
    let port = free_port();
    let child = tokio::process::Command::new("node")
        .args([everything_js().as_str(), mode])
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node is required for the server-everything peer");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "server-everything ({mode}) did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (child, port)
}

/// The same checks over every transport: listing, a JSON call, a ReAct-style
/// call with coercion, and a tool-side validation error.
async fn exercise_everything(ex: &McpToolExecutor) {
    let tools = ex.list_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"everything.echo"), "{names:?}");
    assert!(names.contains(&"everything.get-sum"), "{names:?}");
    let r = ex
        .execute(&call("everything__echo", r#"{"message":"hello peer"}"#))
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.content);
    assert!(r.content.contains("hello peer"), "{}", r.content);
    let r = ex
        .execute(&call("everything.get-sum", "a: 2, b: 40"))
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.content);
    assert!(r.content.contains("42"), "{}", r.content);
    let r = ex
        .execute(&call("everything.get-sum", r#"{"a":"two"}"#))
        .await
        .unwrap();
    assert!(
        r.is_error,
        "invalid arguments must come back as a tool error: {}",
        r.content
    );
}

#[tokio::test]
async fn server_everything_over_stdio() {
    let ex = executor(stdio("everything", "node", &[&everything_js(), "stdio"])).await;
    exercise_everything(&ex).await;
    ex.close().await;
}

#[tokio::test]
async fn server_everything_over_streamable_http() {
    let (_child, port) = start_everything("streamableHttp").await;
    let transport = McpTransport::Http(http_transport(format!("http://127.0.0.1:{port}/mcp")));
    let ex = executor(remote("everything", transport)).await;
    exercise_everything(&ex).await;
    ex.close().await;
}

#[tokio::test]
async fn server_everything_over_legacy_sse() {
    let (_child, port) = start_everything("sse").await;
    let transport = McpTransport::Sse(http_transport(format!("http://127.0.0.1:{port}/sse")));
    let ex = executor(remote("everything", transport)).await;
    exercise_everything(&ex).await;
    ex.close().await;
}

#[tokio::test]
async fn sse_server_restart_is_recovered_on_a_new_session() {
    let (mut child, port) = start_everything("sse").await;
    let transport = McpTransport::Sse(http_transport(format!("http://127.0.0.1:{port}/sse")));
    let ex = executor(remote("everything", transport)).await;
    let r = ex
        .execute(&call("everything.echo", "message: one"))
        .await
        .unwrap();
    assert!(r.content.contains("one"));
    // The server restarts on the same port between two calls: the old
    // session is gone, the client notices, opens a new one and retries.
    child.kill().await.unwrap();
    let _ = child.wait().await;
    let restart = tokio::process::Command::new("node")
        .args([everything_js().as_str(), "sse"])
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(tokio::time::Instant::now() < deadline, "restart failed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = ex
        .execute(&call("everything.echo", "message: two"))
        .await
        .unwrap();
    assert!(r.content.contains("two"), "{}", r.content);
    ex.close().await;
    drop(restart);
}

#[tokio::test]
async fn mcp_server_time_over_stdio() {
    let ex = executor(stdio("time", &time_server(), &[])).await;
    let names: Vec<_> = ex
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(
        names.contains(&"time.get_current_time".to_owned()),
        "{names:?}"
    );
    let r = ex
        .execute(&call(
            "time.get_current_time",
            r#"{"timezone":"Europe/Paris"}"#,
        ))
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.content);
    assert!(r.content.contains("Europe/Paris"), "{}", r.content);
    let r = ex
        .execute(&call("time.get_current_time", "timezone: Not/AZone"))
        .await
        .unwrap();
    assert!(r.is_error, "{}", r.content);
    ex.close().await;
}

#[tokio::test]
async fn mcp_server_time_through_the_bridge() {
    let bridge = bridge::start(StdioBridgeConfig::new(0, time_server(), vec![]))
        .await
        .unwrap();
    let transport = McpTransport::Http(http_transport(bridge.url()));
    let ex = executor(remote("time", transport)).await;
    let r = ex
        .execute(&call(
            "time.convert_time",
            "source_timezone: UTC, time: \"12:30\", target_timezone: Asia/Tokyo",
        ))
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.content);
    assert!(r.content.contains("21:30"), "{}", r.content);
    ex.close().await;
    bridge.stop();
    tokio::time::timeout(Duration::from_secs(15), bridge.wait())
        .await
        .expect("bridge stops")
        .unwrap();
}

#[tokio::test]
async fn kubernetes_mcp_server_lists_read_only_tools() {
    // No cluster here: a syntactically valid kubeconfig pointing nowhere is
    // enough to start the server and list its tools.
    let dir = std::env::temp_dir().join(format!("tarsy-k8s-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: none\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: none\n  context:\n    cluster: none\n    user: none\ncurrent-context: none\nusers:\n- name: none\n  user:\n    token: dummy\n",
    )
    .unwrap();
    let config = stdio(
        "kubernetes",
        &kubernetes_server(),
        &["--read-only", "--kubeconfig", kubeconfig.to_str().unwrap()],
    );
    let ex = executor(config).await;
    let tools = ex.list_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"kubernetes.pods_list"), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with("_delete") || n.ends_with("_create_or_update")),
        "read-only mode must not offer mutating tools: {names:?}"
    );
    ex.close().await;
    let _ = std::fs::remove_dir_all(dir);
}
