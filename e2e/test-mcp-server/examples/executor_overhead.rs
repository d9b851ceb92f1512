//! Per-call overhead of TARSy's MCP tool executor over a local streamable
//! HTTP server (this crate's test server, in process).
//!
//! Measures the same `echo` call two ways: through a bare rmcp client, and
//! through `McpToolExecutor::execute` (name routing, ActionInput parsing,
//! recovery wrapper, text extraction, masking, storage truncation). The
//! difference is the executor's own cost.
//!
//! ```text
//! cargo run --release -p tarsy-test-mcp-server --example executor_overhead [-- CALLS]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use tarsy_core::config::{HttpTransport, TlsOptions};
use tarsy_core::{McpServerConfig, McpTransport, SummarizationConfig, ToolCall, ToolFilter};
use tarsy_masking::{AlertMaskingConfig, MaskingConfig, MaskingService};
use tarsy_mcp::{ExecutorRequest, McpClientFactory};

const WARMUP: usize = 50;

fn summary(label: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    let median = pick(0.5);
    println!(
        "{label:<28} median {:>8.1} µs   p90 {:>8.1} µs   p99 {:>8.1} µs",
        median.as_secs_f64() * 1e6,
        pick(0.9).as_secs_f64() * 1e6,
        pick(0.99).as_secs_f64() * 1e6,
    );
    median
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let calls: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1000);
    let server = tarsy_test_mcp_server::spawn_http("127.0.0.1:0".parse()?).await?;
    let url = server.url();

    // Bare rmcp client.
    let raw = tarsy_mcp::transport::client_info()
        .serve(StreamableHttpClientTransport::from_uri(url.as_str()))
        .await?;
    let args: serde_json::Map<String, serde_json::Value> =
        serde_json::from_value(serde_json::json!({"text": "hello from the benchmark"}))?;

    // The executor, with the masking a Kubernetes server gets.
    let masking = Arc::new(MaskingService::new(
        [(
            "bench".to_owned(),
            MaskingConfig {
                pattern_groups: vec!["kubernetes".into()],
                ..MaskingConfig::default()
            },
        )],
        AlertMaskingConfig::default(),
    )?);
    let config = McpServerConfig {
        name: "bench".into(),
        transport: McpTransport::Http(HttpTransport {
            url,
            bearer_token: None,
            headers: Default::default(),
            tls: TlsOptions::default(),
            timeout: None,
        }),
        instructions: String::new(),
        summarization: SummarizationConfig::default(),
    };
    let executor = McpClientFactory::new([config], masking.clone())
        .create_executor(ExecutorRequest::new(
            vec!["bench".into()],
            ToolFilter::new(),
        ))
        .await?;
    let json_call = ToolCall {
        id: "bench".into(),
        name: "bench__echo".into(),
        arguments: r#"{"text":"hello from the benchmark"}"#.into(),
    };
    let react_call = ToolCall {
        arguments: "text: hello from the benchmark".into(),
        ..json_call.clone()
    };

    // Interleaved, so that machine noise hits all three alike.
    let mut raw_samples = Vec::with_capacity(calls);
    let mut json_samples = Vec::with_capacity(calls);
    let mut react_samples = Vec::with_capacity(calls);
    for i in 0..WARMUP + calls {
        let started = Instant::now();
        raw.call_tool(CallToolRequestParams::new("echo").with_arguments(args.clone()))
            .await?;
        let raw_time = started.elapsed();
        let started = Instant::now();
        assert!(!executor.execute(&json_call).await?.is_error);
        let json_time = started.elapsed();
        let started = Instant::now();
        assert!(!executor.execute(&react_call).await?.is_error);
        let react_time = started.elapsed();
        if i >= WARMUP {
            raw_samples.push(raw_time);
            json_samples.push(json_time);
            react_samples.push(react_time);
        }
    }
    raw.cancel().await?;
    println!(
        "{calls} echo calls each, after {WARMUP} warm-up calls, over streamable HTTP on loopback"
    );
    let raw_median = summary("bare rmcp client", raw_samples);
    let json_median = summary("executor (JSON input)", json_samples);
    summary("executor (ReAct key-value)", react_samples);
    println!(
        "{:<28} {:>+8.1} µs per call (median difference, noisy)",
        "executor - bare client",
        (json_median.as_secs_f64() - raw_median.as_secs_f64()) * 1e6
    );

    // The executor's own processing without I/O: routing, input parsing,
    // text extraction, masking and storage truncation of a typical result.
    let access = tarsy_mcp::router::ToolAccess::new(["bench".to_owned()], ToolFilter::new());
    let result = rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(
        "NAME                     READY   STATUS    RESTARTS   AGE\n".repeat(40),
    )]);
    let mut cpu_samples = Vec::with_capacity(calls);
    for _ in 0..WARMUP + calls {
        let started = Instant::now();
        let (server, _tool) = access.resolve("bench__echo")?;
        let parsed = tarsy_mcp::params::parse_action_input(&react_call.arguments);
        let text = tarsy_mcp::executor::extract_text(&result);
        let masked = masking.mask_tool_result(&server, &text);
        let stored = tarsy_mcp::tokens::truncate_for_storage(&masked);
        std::hint::black_box((parsed, stored));
        cpu_samples.push(started.elapsed());
    }
    cpu_samples.drain(..WARMUP);
    summary("executor processing, no I/O", cpu_samples);
    executor.close().await;
    server.stop().await;
    Ok(())
}
