//! The MCP tool executor against our own test server, over stdio and
//! streamable HTTP: routing, argument parsing, tool errors, recovery,
//! timeouts, masking, selection overrides, interaction records.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use tarsy_core::{McpInteractionType, McpSelection, RecordScope, ToolFilter};
use tarsy_mcp::{ExecutorRequest, McpClientFactory, McpError, McpToolExecutor};
use tarsy_test_mcp_server::{PLANTED_SECRETS, spawn_http};

async fn stdio_executor(recorder: Option<Arc<MemoryRecorder>>) -> McpToolExecutor {
    let factory = McpClientFactory::new(
        [stdio("test", &[("TARSY_TEST_VAR", "from-config")])],
        masking(&["test"]),
    )
    .with_timeouts(fast_timeouts());
    let mut request = ExecutorRequest::new(vec!["test".into()], ToolFilter::new());
    if let Some(r) = recorder {
        request = request.with_recorder(
            r,
            RecordScope {
                session_id: "s1".into(),
                stage_id: Some("st1".into()),
                execution_id: Some("e1".into()),
            },
        );
    }
    factory.create_executor(request).await.unwrap()
}

#[tokio::test]
async fn stdio_calls_tools_with_every_argument_style() {
    let recorder = Arc::new(MemoryRecorder::default());
    let ex = stdio_executor(Some(recorder.clone())).await;
    assert!(ex.failed_servers().is_empty());

    let tools = ex.list_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    for expected in [
        "test.echo",
        "test.crash",
        "test.get_secret",
        "test.slow",
        "test.fail",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let echo = tools.iter().find(|t| t.name == "test.echo").unwrap();
    assert!(echo.parameters_schema.contains("\"text\""));
    assert_eq!(echo.description, "Returns its input text unchanged");

    // Function calling (JSON, `server__tool`), ReAct key-value, YAML.
    let r = ex
        .execute(&call("test__echo", r#"{"text":"hello json"}"#))
        .await
        .unwrap();
    assert_eq!(
        (r.name.as_str(), r.content.as_str(), r.is_error),
        ("test.echo", "hello json", false)
    );
    assert_eq!(r.call_id, "call-test__echo");
    let r = ex
        .execute(&call("test.echo", "text: hello kv"))
        .await
        .unwrap();
    assert_eq!(r.content, "hello kv");
    let r = ex.execute(&call("test.slow", "ms=5")).await.unwrap();
    assert_eq!(r.content, "slept 5 ms");

    // Environment: configured variables are added, the rest is inherited.
    let r = ex
        .execute(&call("test.env", "name: TARSY_TEST_VAR"))
        .await
        .unwrap();
    assert_eq!(r.content, "from-config");
    let r = ex.execute(&call("test.env", "name: PATH")).await.unwrap();
    assert!(!r.is_error && !r.content.is_empty());

    let records = recorder.interactions();
    assert_eq!(records[0].interaction_type, McpInteractionType::ToolList);
    assert!(records[0].available_tools.to_string().contains("echo"));
    let first_call = &records[1];
    assert_eq!(first_call.interaction_type, McpInteractionType::ToolCall);
    assert_eq!(
        (
            first_call.server_name.as_str(),
            first_call.tool_name.as_str()
        ),
        ("test", "echo")
    );
    assert_eq!(first_call.tool_arguments["text"], "hello json");
    assert_eq!(first_call.tool_result["content"], "hello json");
    assert_eq!(first_call.scope.execution_id.as_deref(), Some("e1"));
    assert!(first_call.error_message.is_none());
    ex.close().await;
}

#[tokio::test]
async fn tool_errors_reach_the_model_as_error_results() {
    let ex = stdio_executor(None).await;
    let r = ex
        .execute(&call("test.fail", r#"{"message":"disk full"}"#))
        .await
        .unwrap();
    assert!(r.is_error);
    assert_eq!(r.content, "disk full");
    let r = ex.execute(&call("test.reject", "{}")).await.unwrap();
    assert!(r.is_error);
    assert!(r.content.starts_with("MCP error -32602: "), "{}", r.content);
    // Missing arguments: the server's own validation error.
    let r = ex.execute(&call("test.echo", "")).await.unwrap();
    assert!(r.is_error, "{}", r.content);
    // Unknown tool on an allowed server.
    let r = ex.execute(&call("test.nope", "{}")).await.unwrap();
    assert!(r.is_error);
    ex.close().await;
}

#[tokio::test]
async fn a_crash_mid_call_is_retried_once_on_a_new_process() {
    let recorder = Arc::new(MemoryRecorder::default());
    let ex = stdio_executor(Some(recorder.clone())).await;
    let marker = temp_path("crash-once");
    let args = serde_json::json!({"once_marker": marker}).to_string();
    let started = Instant::now();
    let r = ex.execute(&call("test.crash", &args)).await.unwrap();
    assert_eq!(r.content, "survived: already crashed once");
    assert!(!r.is_error);
    assert!(marker.exists(), "the first attempt crashed the server");
    // The answer says it is the retry's, and why (the timeline shows it).
    let first = r.recovered.as_deref().unwrap_or_default();
    assert!(!first.is_empty(), "{r:?}");
    // One jittered backoff (250-750 ms) plus a process start.
    assert!(started.elapsed() >= Duration::from_millis(250));
    // The replacement session keeps working.
    let r = ex
        .execute(&call("test.echo", "text: still here"))
        .await
        .unwrap();
    assert_eq!(r.content, "still here");
    assert_eq!(r.recovered, None, "answered at once");
    let calls: Vec<_> = recorder
        .interactions()
        .into_iter()
        .filter(|i| i.tool_name == "crash")
        .collect();
    assert_eq!(calls.len(), 1);
    assert!(calls[0].error_message.is_none());
    let _ = std::fs::remove_file(marker);
    ex.close().await;
}

#[tokio::test]
async fn a_server_that_keeps_crashing_gives_a_clear_error() {
    let recorder = Arc::new(MemoryRecorder::default());
    let ex = stdio_executor(Some(recorder.clone())).await;
    let err = ex.execute(&call("test.crash", "{}")).await.unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, McpError::Operation { retried: true, .. }),
        "unexpected error: {err:?}"
    );
    assert!(
        message.starts_with(
            "MCP server 'test': tools/call 'crash' failed (also after a retry on a new session)"
        ),
        "{message}"
    );
    let shown = tarsy_mcp::executor::error_result(&call("test.crash", "{}"), &err);
    assert!(shown.is_error && shown.content.starts_with("Error: MCP server 'test'"));
    let record = recorder.interactions().pop().unwrap();
    assert_eq!(record.error_message.as_deref(), Some(message.as_str()));
    // The executor recovers for the next call.
    let r = ex.execute(&call("test.echo", "text: back")).await.unwrap();
    assert_eq!(r.content, "back");
    ex.close().await;
}

#[tokio::test]
async fn slow_calls_time_out_without_retry_and_the_session_survives() {
    let factory = McpClientFactory::new([stdio("test", &[])], masking(&[])).with_timeouts(
        tarsy_mcp::McpTimeouts {
            call: Duration::from_millis(500),
            ..fast_timeouts()
        },
    );
    let ex = factory
        .create_executor(ExecutorRequest::new(vec!["test".into()], ToolFilter::new()))
        .await
        .unwrap();
    let started = Instant::now();
    let err = ex
        .execute(&call("test.slow", "ms: 3000"))
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Timeout { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "MCP server 'test': tools/call 'slow' timed out after 0.5s"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "no retry after a timeout"
    );
    let r = ex.execute(&call("test.echo", "text: ok")).await.unwrap();
    assert_eq!(r.content, "ok");
    ex.close().await;
}

#[tokio::test]
async fn every_result_is_masked_before_anyone_sees_it() {
    let recorder = Arc::new(MemoryRecorder::default());
    let ex = stdio_executor(Some(recorder.clone())).await;
    let r = ex.execute(&call("test.get_secret", "{}")).await.unwrap();
    for secret in PLANTED_SECRETS {
        assert!(
            !r.content.contains(secret),
            "{secret} leaked to the model:\n{}",
            r.content
        );
    }
    assert!(r.content.contains("[MASKED_"), "{}", r.content);
    assert!(
        r.content.contains("name: payments-db"),
        "non-secret fields stay"
    );
    let stored = recorder
        .interactions()
        .pop()
        .unwrap()
        .tool_result
        .to_string();
    for secret in PLANTED_SECRETS {
        assert!(!stored.contains(secret), "{secret} leaked to storage");
    }
    // Echoed secrets from a server with masking are masked too.
    let r = ex
        .execute(&call("test.echo", r#"{"text":"password: hunter2hunter2"}"#))
        .await
        .unwrap();
    assert!(!r.content.contains("hunter2hunter2"), "{}", r.content);
    ex.close().await;
}

#[tokio::test]
async fn large_results_are_whole_for_the_model_and_truncated_in_storage() {
    let recorder = Arc::new(MemoryRecorder::default());
    let ex = stdio_executor(Some(recorder.clone())).await;
    let r = ex
        .execute(&call("test.large_output", "bytes: 1000000"))
        .await
        .unwrap();
    assert_eq!(r.content.len(), 1_000_000);
    let stored = recorder.interactions().pop().unwrap();
    let content = stored.tool_result["content"].as_str().unwrap();
    assert!(content.len() < 33_000, "{}", content.len());
    assert!(content.contains("[TRUNCATED: showing"));
    ex.close().await;
}

#[tokio::test]
async fn selection_overrides_replace_servers_and_filter_tools() {
    let factory = McpClientFactory::new([stdio("test", &[]), stdio("other", &[])], masking(&[]))
        .with_timeouts(fast_timeouts());
    let selection: McpSelection =
        serde_json::from_str(r#"{"servers":[{"name":"other","tools":["echo","slow"]}]}"#).unwrap();
    // The agent asked for `test`; the alert's override replaces it.
    let ex = factory
        .create_executor(
            ExecutorRequest::new(vec!["test".into()], ToolFilter::new())
                .with_selection(Some(selection)),
        )
        .await
        .unwrap();
    assert_eq!(ex.servers(), vec!["other"]);
    let names: Vec<_> = ex
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names.len(), 2);
    assert!(names.contains(&"other.echo".to_owned()) && names.contains(&"other.slow".to_owned()));

    let r = ex
        .execute(&call("other.echo", "text: allowed"))
        .await
        .unwrap();
    assert_eq!(r.content, "allowed");
    let r = ex.execute(&call("test.echo", "text: x")).await.unwrap();
    assert!(r.is_error);
    assert_eq!(
        r.content,
        "Error: MCP server 'test' is not available to this agent (available: other)"
    );
    let r = ex.execute(&call("other__get_secret", "{}")).await.unwrap();
    assert!(r.is_error);
    assert_eq!(
        r.content,
        "Error: tool 'get_secret' of MCP server 'other' is not allowed for this agent (allowed: echo, slow)"
    );
    ex.close().await;

    // Unknown servers are refused at execution too.
    let bad: McpSelection = serde_json::from_str(r#"{"servers":[{"name":"ghost"}]}"#).unwrap();
    let err = factory
        .create_executor(
            ExecutorRequest::new(vec!["test".into()], ToolFilter::new()).with_selection(Some(bad)),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "MCP selection: servers[0].name: unknown MCP server \"ghost\" (known: other, test)"
    );
}

#[tokio::test]
async fn agent_tool_filters_are_enforced() {
    let factory =
        McpClientFactory::new([stdio("test", &[])], masking(&[])).with_timeouts(fast_timeouts());
    let mut filter = ToolFilter::new();
    filter.insert("test".into(), vec!["echo".into()]);
    let ex = factory
        .create_executor(ExecutorRequest::new(vec!["test".into()], filter))
        .await
        .unwrap();
    let names: Vec<_> = ex
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, vec!["test.echo"]);
    let r = ex.execute(&call("test.crash", "{}")).await.unwrap();
    assert!(r.is_error, "a filtered tool must never run");
    assert!(r.content.contains("not allowed"));
    ex.close().await;
}

#[tokio::test]
async fn servers_that_fail_to_start_are_reported_not_fatal() {
    let mut broken = stdio("broken", &[]);
    broken.transport = tarsy_core::McpTransport::Stdio {
        command: "/nonexistent/mcp-server".into(),
        args: vec![],
        env: Default::default(),
        cwd: None,
    };
    let factory = McpClientFactory::new([stdio("test", &[]), broken], masking(&[]))
        .with_timeouts(fast_timeouts());
    let ex = factory
        .create_executor(ExecutorRequest::new(
            vec!["test".into(), "broken".into()],
            ToolFilter::new(),
        ))
        .await
        .unwrap();
    let failed = ex.failed_servers();
    assert_eq!(failed.keys().collect::<Vec<_>>(), vec!["broken"]);
    assert!(
        failed["broken"].contains("cannot start '/nonexistent/mcp-server'"),
        "{failed:?}"
    );
    let tools = ex.list_tools().await.unwrap();
    assert!(tools.iter().all(|t| t.name.starts_with("test.")));
    let err = ex
        .execute(&call("broken.anything", "{}"))
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Unavailable { .. }), "{err:?}");
    ex.close().await;
}

#[tokio::test]
async fn close_ends_stdio_server_processes() {
    let ex = stdio_executor(None).await;
    let r = ex.execute(&call("test.env", "name: PATH")).await.unwrap();
    assert!(!r.is_error);
    let pid_probe = ex.execute(&call("test.echo", "text: x")).await.unwrap();
    assert_eq!(pid_probe.content, "x");
    ex.close().await;
    let err = ex.execute(&call("test.echo", "text: x")).await.unwrap_err();
    assert!(matches!(err, McpError::Closed));
}

#[tokio::test]
async fn streamable_http_with_bearer_token_and_headers() {
    use axum::http::StatusCode;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    // Refuse requests without the configured credentials.
    let router =
        tarsy_test_mcp_server::http_router(cancel.child_token()).layer(axum::middleware::from_fn(
            |req: axum::extract::Request, next: axum::middleware::Next| async move {
                let h = req.headers();
                let ok = h.get("authorization").is_some_and(|v| v == "Bearer t0ken")
                    && h.get("x-tenant").is_some_and(|v| v == "blue");
                if ok {
                    next.run(req).await
                } else {
                    StatusCode::UNAUTHORIZED.into_response()
                }
            },
        ));
    use axum::response::IntoResponse;
    let server = tokio::spawn(axum::serve(listener, router).into_future());
    let url = format!("http://{addr}/mcp");

    let mut good = http("remote", &url);
    if let tarsy_core::McpTransport::Http(h) = &mut good.transport {
        h.bearer_token = Some(tarsy_core::SecretValue::new("t0ken"));
        h.headers.insert("X-Tenant".into(), "blue".into());
    }
    let factory = McpClientFactory::new([good, http("anonymous", &url)], masking(&["remote"]))
        .with_timeouts(fast_timeouts());
    let ex = factory
        .create_executor(ExecutorRequest::new(
            vec!["remote".into(), "anonymous".into()],
            ToolFilter::new(),
        ))
        .await
        .unwrap();
    let failed = ex.failed_servers();
    assert_eq!(
        failed.keys().collect::<Vec<_>>(),
        vec!["anonymous"],
        "{failed:?}"
    );
    let r = ex
        .execute(&call("remote.echo", r#"{"text":"over http"}"#))
        .await
        .unwrap();
    assert_eq!(r.content, "over http");
    let r = ex.execute(&call("remote.get_secret", "")).await.unwrap();
    assert!(PLANTED_SECRETS.iter().all(|s| !r.content.contains(s)));
    ex.close().await;
    cancel.cancel();
    server.abort();
}

#[tokio::test]
async fn a_crashed_http_server_gives_a_clear_error() {
    let mut child = tokio::process::Command::new(bin())
        .args(["--http", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = first_line(&mut child).await;
    let factory =
        McpClientFactory::new([http("remote", &url)], masking(&[])).with_timeouts(fast_timeouts());
    let ex = factory
        .create_executor(ExecutorRequest::new(
            vec!["remote".into()],
            ToolFilter::new(),
        ))
        .await
        .unwrap();
    let r = ex
        .execute(&call("remote.echo", "text: before"))
        .await
        .unwrap();
    assert_eq!(r.content, "before");
    let err = ex.execute(&call("remote.crash", "{}")).await.unwrap_err();
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(3));
    let message = err.to_string();
    assert!(
        message.starts_with("MCP server 'remote': tools/call 'crash' failed"),
        "{message}"
    );
    ex.close().await;
}

/// Reads the URL the server prints once listening.
pub async fn first_line(child: &mut tokio::process::Child) -> String {
    use tokio::io::AsyncBufReadExt;
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn streamable_http_in_process_server() {
    let server = spawn_http("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let factory = McpClientFactory::new([http("remote", &server.url())], masking(&[]))
        .with_timeouts(fast_timeouts());
    let ex = factory
        .create_executor(ExecutorRequest::new(
            vec!["remote".into()],
            ToolFilter::new(),
        ))
        .await
        .unwrap();
    // Concurrent calls share the session.
    let calls = (0..8).map(|i| {
        let ex = &ex;
        async move {
            ex.execute(&call("remote.echo", &format!("text: n{i}")))
                .await
                .unwrap()
        }
    });
    let results = futures::future::join_all(calls).await;
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r.content, format!("n{i}"));
    }
    ex.close().await;
    server.stop().await;
}

#[tokio::test]
async fn concurrent_failures_recreate_the_session_once() {
    let log = temp_path("spawns");
    let marker = temp_path("herd-crash");
    let log_str = log.to_string_lossy().into_owned();
    let factory = McpClientFactory::new(
        [stdio("test", &[("TARSY_TEST_SPAWN_LOG", log_str.as_str())])],
        masking(&[]),
    )
    .with_timeouts(fast_timeouts());
    let ex = factory
        .create_executor(ExecutorRequest::new(vec!["test".into()], ToolFilter::new()))
        .await
        .unwrap();
    // Four slow calls are in flight when the fifth crashes the server: all
    // five fail together, all five retry, and one new process serves them.
    let slow_call = call("test.slow", "ms: 1500");
    let slow = (0..4).map(|_| ex.execute(&slow_call));
    let crash_args = serde_json::json!({"once_marker": marker}).to_string();
    let crash = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        ex.execute(&call("test.crash", &crash_args)).await
    };
    let (slow_results, crash_result) = tokio::join!(futures::future::join_all(slow), crash);
    assert_eq!(
        crash_result.unwrap().content,
        "survived: already crashed once"
    );
    for r in slow_results {
        assert_eq!(r.unwrap().content, "slept 1500 ms");
    }
    let spawns = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        spawns.lines().count(),
        2,
        "one start plus one recreation: {spawns:?}"
    );
    ex.close().await;
    let _ = std::fs::remove_file(log);
    let _ = std::fs::remove_file(marker);
}
