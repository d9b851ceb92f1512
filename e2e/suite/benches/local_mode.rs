//! Local-mode figures (printed, not asserted; the benchmarks are listed in
//! the README, `README.md#what-is-built`), measured with a zero-latency
//! in-process LLM and the project's test MCP server over local HTTP, so what
//! is measured is TARSy's own cost:
//!
//! - orchestration overhead per agent iteration, durable writes included
//!   (median);
//! - three-stage sessions per minute (SQLite and Postgres);
//! - LLM chunk → WebSocket client latency p50/p99 (in process on SQLite,
//!   through Postgres NOTIFY to a second API replica);
//! - peak RSS of the process.
//!
//! Run: `cargo bench -p tarsy-e2e --bench local_mode` (Postgres from
//! `TARSY_TEST_DATABASE_URL`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use tarsy_api::{Api, ApiConfig, NewAlert};
use tarsy_core::{ConversationMessage, MessageRole, ToolCall};
use tarsy_e2e::harness::{
    TestApp, WsClient, config_for, is_terminal_session_event, local_options, with_postgres,
    with_sqlite,
};
use tarsy_engine::llm::{Chunk, ChunkStream, GenerateInput, LlmClient, LlmError};
use tarsy_events::EventHub;
use tokio::time::Instant;

/// Tool-calling iterations of the overhead agent before it answers.
const ITERATIONS: usize = 20;
/// Sessions of the overhead measurement.
const LOOP_SESSIONS: usize = 5;
/// Sessions submitted at once for the throughput measurement.
const THROUGHPUT_SESSIONS: usize = 60;
/// Chunks of the streaming answer and their spacing.
const CHUNKS: u64 = 200;
const CHUNK_SPACING: Duration = Duration::from_millis(5);

const CHAINS: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: streamer}
spec:
  displayName: Streamer
  mcpServers: [testmcp]
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: loop}
spec:
  alertTypes: [Loop]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: only
    agents: [{name: charlie, maxIterations: 30}]
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: three}
spec:
  alertTypes: [Three]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: one
    agent: alpha
  - name: two
    agent: bravo
  - name: three
    agent: delta
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: stream}
spec:
  alertTypes: [Stream]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: only
    agent: streamer
"#;

/// A zero-latency model: `Charlie` calls the echo tool `ITERATIONS` times,
/// `Streamer` streams numbered chunks (recording when each was emitted),
/// everything else answers at once. Every call's start is recorded.
#[derive(Default)]
struct ProbeLlm {
    calls: Mutex<Vec<(String, Instant)>>,
    emitted: Arc<Mutex<HashMap<u64, Instant>>>,
    next_marker: Arc<AtomicU64>,
}

#[async_trait]
impl LlmClient for ProbeLlm {
    async fn generate(&self, input: GenerateInput) -> Result<ChunkStream, LlmError> {
        self.calls
            .lock()
            .unwrap()
            .push((input.execution_id.clone(), Instant::now()));
        let system = input
            .messages
            .iter()
            .find(|m: &&ConversationMessage| m.role == MessageRole::System)
            .map(|m| m.content.as_str())
            .unwrap_or("");
        let tool_results = input
            .messages
            .iter()
            .filter(|m| m.role == MessageRole::Tool)
            .count();
        if system.contains("Charlie") && !input.tools.is_empty() && tool_results < ITERATIONS {
            let call = ToolCall {
                id: format!("c{tool_results}"),
                name: "testmcp__echo".into(),
                arguments: r#"{"text":"ok"}"#.into(),
            };
            return Ok(futures::stream::iter([Chunk::ToolCall(call)]).boxed());
        }
        if system.contains("Streamer") {
            let emitted = self.emitted.clone();
            let next = self.next_marker.clone();
            let stream = futures::stream::unfold(0u64, move |n| {
                let emitted = emitted.clone();
                let next = next.clone();
                async move {
                    if n == CHUNKS {
                        return None;
                    }
                    // Leave the client time to subscribe before the stream.
                    let pause = if n == 0 {
                        Duration::from_millis(300)
                    } else {
                        CHUNK_SPACING
                    };
                    tokio::time::sleep(pause).await;
                    let marker = next.fetch_add(1, Ordering::SeqCst);
                    emitted.lock().unwrap().insert(marker, Instant::now());
                    Some((Chunk::Text(format!("⟦{marker}⟧ ")), n + 1))
                }
            });
            return Ok(stream.boxed());
        }
        Ok(futures::stream::iter([Chunk::Text("Done.".into())]).boxed())
    }
}

fn alert(alert_type: &str) -> NewAlert {
    NewAlert {
        alert_type: alert_type.into(),
        data: "pod: web-1".into(),
        chain: None,
        runbook_url: None,
        mcp_selection: None,
        author: "bench".into(),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

#[derive(Debug, Default, Clone)]
struct Figures {
    iteration_cycle_ms: f64,
    mcp_call_ms: f64,
    sessions_per_minute: f64,
    chunk_p50_ms: f64,
    chunk_p99_ms: f64,
    chunk_samples: usize,
}

/// Latencies (ms) of the numbered chunks in `client`'s `stream.chunk`
/// events.
fn chunk_latencies(client: &WsClient, emitted: &HashMap<u64, Instant>) -> Vec<f64> {
    let marker = regex::Regex::new(r"⟦(\d+)⟧").unwrap();
    let mut out = Vec::new();
    for (e, at) in client.events.iter().zip(&client.arrivals) {
        if e["type"] != "stream.chunk" {
            continue;
        }
        let text = e.to_string();
        let Some(last) = marker
            .captures_iter(&text)
            .filter_map(|c| c[1].parse::<u64>().ok())
            .max()
        else {
            continue;
        };
        if let Some(sent) = emitted.get(&last) {
            out.push(at.duration_since(*sent).as_secs_f64() * 1000.0);
        }
    }
    out
}

async fn measure(db_url: String, mcp_url: String, postgres: bool) -> Figures {
    let probe = Arc::new(ProbeLlm::default());
    let mut options = local_options(config_for(&mcp_url, CHAINS), &db_url, "http://127.0.0.1:9");
    options.llm_service = Some(probe.clone());
    options.max_concurrent_sessions = Some(8);
    options.max_connections = 8;
    let app = TestApp::start(options).await;
    let control = app.app.control();
    let mut f = Figures::default();

    // 1. Iteration cycle: one LLM call start → the next, inside one
    // execution (tool call through MCP, durable writes, next prompt).
    let mut loop_ids = Vec::new();
    for _ in 0..LOOP_SESSIONS {
        let id = control
            .submit_alert(alert("Loop"))
            .await
            .unwrap()
            .session_id;
        app.app
            .wait_for_terminal(&id, Duration::from_secs(120))
            .await
            .unwrap();
        loop_ids.push(id);
    }
    let calls = probe.calls.lock().unwrap().clone();
    let mut by_exec: HashMap<String, Vec<Instant>> = HashMap::new();
    for (exec, at) in calls {
        by_exec.entry(exec).or_default().push(at);
    }
    let gaps: Vec<f64> = by_exec
        .values()
        .filter(|v| v.len() > ITERATIONS)
        .flat_map(|v| {
            v.windows(2)
                .map(|w| w[1].duration_since(w[0]).as_secs_f64() * 1000.0)
                .collect::<Vec<_>>()
        })
        .collect();
    f.iteration_cycle_ms = percentile(&sorted(gaps), 0.5);
    let mut mcp = Vec::new();
    for id in &loop_ids {
        let trace = app.get_ok(&format!("/api/v1/sessions/{id}/trace")).await;
        for st in trace["stages"].as_array().into_iter().flatten() {
            for e in st["executions"].as_array().into_iter().flatten() {
                for m in e["mcp_interactions"].as_array().into_iter().flatten() {
                    if m["interaction_type"] == "tool_call" {
                        mcp.push(m["duration_ms"].as_f64().unwrap_or(0.0));
                    }
                }
            }
        }
    }
    f.mcp_call_ms = percentile(&sorted(mcp), 0.5);

    // 2. Throughput: many three-stage sessions at once.
    let started = Instant::now();
    let mut ids = Vec::new();
    for _ in 0..THROUGHPUT_SESSIONS {
        ids.push(
            control
                .submit_alert(alert("Three"))
                .await
                .unwrap()
                .session_id,
        );
    }
    for id in &ids {
        let s = app
            .app
            .wait_for_terminal(id, Duration::from_secs(600))
            .await
            .unwrap();
        assert_eq!(s.status, tarsy_core::SessionStatus::Completed);
    }
    f.sessions_per_minute = THROUGHPUT_SESSIONS as f64 / started.elapsed().as_secs_f64() * 60.0;

    // 3. Chunk → WebSocket client: in process (this app's API) on SQLite;
    // through Postgres NOTIFY to a second API replica on Postgres.
    let (mut client, replica) = if postgres {
        let store = tarsy_store::Store::connect(&db_url).await.unwrap();
        let hub = EventHub::start(store.clone());
        let router = Api::new(hub.clone(), app.app.control(), ApiConfig::default()).router();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(axum::serve(listener, router).into_future());
        (WsClient::connect(&base).await, Some((server, store)))
    } else {
        (app.ws().await, None)
    };
    let id = control
        .submit_alert(alert("Stream"))
        .await
        .unwrap()
        .session_id;
    client.subscribe(&format!("session:{id}")).await;
    client
        .until("the streaming session's end", is_terminal_session_event)
        .await;
    let emitted = probe.emitted.lock().unwrap().clone();
    let lat = sorted(chunk_latencies(&client, &emitted));
    f.chunk_samples = lat.len();
    f.chunk_p50_ms = percentile(&lat, 0.5);
    f.chunk_p99_ms = percentile(&lat, 0.99);
    if let Some((server, store)) = replica {
        server.abort();
        store.close().await;
    }
    app.shutdown().await;
    f
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mcp = tarsy_test_mcp_server::spawn_http(([127, 0, 0, 1], 0).into())
            .await
            .unwrap();
        let url = mcp.url();
        let sqlite = Arc::new(Mutex::new(Figures::default()));
        let pg = Arc::new(Mutex::new(Figures::default()));
        {
            let (out, url) = (sqlite.clone(), url.clone());
            with_sqlite(|db| async move {
                *out.lock().unwrap() = measure(db, url, false).await;
            })
            .await;
        }
        {
            let (out, url) = (pg.clone(), url.clone());
            with_postgres(|db| async move {
                *out.lock().unwrap() = measure(db, url, true).await;
            })
            .await;
        }
        mcp.stop().await;
        let (s, p) = (sqlite.lock().unwrap().clone(), pg.lock().unwrap().clone());
        let profile = if cfg!(debug_assertions) {
            "DEBUG build"
        } else {
            "release build"
        };
        println!("TARSy local mode ({profile}, zero-latency in-process LLM, test MCP server over local HTTP)");
        for (name, f) in [("SQLite", &s), ("Postgres", &p)] {
            println!("[{name}]");
            println!(
                "  agent iteration cycle (LLM call → next LLM call: tool call over MCP + durable writes), median: {:.3} ms",
                f.iteration_cycle_ms
            );
            println!(
                "  of which the MCP echo call (trace, ms resolution), median: {:.0} ms → orchestration overhead ≈ {:.3} ms",
                f.mcp_call_ms,
                (f.iteration_cycle_ms - f.mcp_call_ms).max(0.0)
            );
            println!(
                "  three-stage sessions per minute ({THROUGHPUT_SESSIONS} at once, 8 concurrent): {:.0}",
                f.sessions_per_minute
            );
            let path = if name == "SQLite" {
                "in process"
            } else {
                "through Postgres NOTIFY to a second API replica"
            };
            println!(
                "  LLM chunk → WebSocket client ({path}, {} samples): p50 {:.2} ms, p99 {:.2} ms",
                f.chunk_samples, f.chunk_p50_ms, f.chunk_p99_ms
            );
        }
        match peak_rss_kib() {
            Some(k) => println!("peak RSS (VmHWM, whole bench process): {:.1} MiB", k as f64 / 1024.0),
            None => println!("peak RSS: /proc/self/status unavailable"),
        }
    });
}
