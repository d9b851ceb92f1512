//! Own overhead of an agent iteration, end to end, the way a user runs it
//! (budgets: ≤ 1 ms of `tarsy` per tool iteration on SQLite, ≤ 2 ms on
//! Postgres; ≤ 1 ms of the LLM service per call and ≤ 2 ms of its CPU;
//! ≤ 20 ms from start to the first provider request and from the last
//! answer to exit; measured figures in the README, `README.md#what-is-built`):
//! the real `tarsy investigate` (release build) and the real LLM service
//! (Python) against a zero-latency OpenAI-compatible fake endpoint that
//! streams tool calls, text and usage, and a real MCP server (the project's
//! test server) over streamable HTTP with a 2 KB tool result.
//!
//! Timestamps are taken outside both processes: the fake endpoint notes when
//! each provider request arrived and when its answer was written, an HTTP/2
//! relay between `tarsy` and the LLM service notes when each gRPC request was
//! complete and when its response ended, and the MCP server notes each
//! `tools/call`. From them, per tool iteration (the model's tool-call
//! answer → the next model request):
//!
//! - LLM service: provider answer written → gRPC response ended, plus gRPC
//!   request complete → provider request received;
//! - MCP server: `tools/call` received → answered;
//! - tarsy: gRPC response ended → next gRPC request complete, minus the MCP
//!   server's time (its MCP client, records and both relay hops included).
//!
//! Also: `tarsy` start → first gRPC request and first provider request, the
//! last provider answer → `tarsy` exit, CPU and peak RSS of both processes,
//! and the LLM service's start → ready time. Three modes: both servers set
//! `TCP_NODELAY` (as providers' servers and most MCP servers do), the
//! provider's server leaves Nagle on, the MCP server leaves Nagle on; and
//! the first again with the records in Postgres (`TARSY_TEST_DATABASE_URL`,
//! a scratch database; skipped when unreachable).
//!
//! Run (the `tarsy` binary must be a release build next to the bench):
//!
//! ```sh
//! bash llm-service/ci.sh          # the LLM service's virtualenv
//! cargo build --release -p tarsy
//! cargo bench -p tarsy-e2e --bench agent_overhead
//! ```
//!
//! `TARSY_BIN` names another `tarsy` binary; `TARSY_BENCH_RUNS` sets the
//! measured sessions per mode (default 8); `TARSY_BENCH_MODES` picks modes
//! by name, comma-separated (`sqlite`, `postgres`, `provider-nagle`,
//! `mcp-nagle`, `startup`; default all).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use tarsy_e2e::fake_openai::{FakeOptions, RequestTiming};
use tarsy_e2e::h2_tap::{H2Tap, StreamTiming};
use tarsy_e2e::{FakeOpenAi, FakeReply, LlmService};
use tokio_util::sync::CancellationToken;

/// Tool calls per session (each one iteration), then the answer and the
/// executive summary.
const TOOL_CALLS: usize = 5;
/// Size of each tool result.
const TOOL_RESULT_BYTES: usize = 2048;
/// Provider calls per session: the tool iterations, the final answer, the
/// executive summary.
const CALLS_PER_SESSION: usize = TOOL_CALLS + 2;
const KEY_ENV: &str = "TARSY_BENCH_OPENAI_KEY";
const MODEL: &str = "gpt-4o-mini";

// --- MCP server with timings -------------------------------------------------

/// One `tools/call` as the MCP server saw it.
#[derive(Debug, Clone, Copy)]
struct McpCall {
    received: Instant,
    answered: Option<Instant>,
}

#[derive(Default)]
struct McpTimes {
    calls: Mutex<Vec<McpCall>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Notes `tools/call` requests: arrival, and the first byte of the answer
/// (the streamable HTTP answer is an event stream that carries the result
/// in its first event).
async fn time_tool_calls(State(times): State<Arc<McpTimes>>, req: Request, next: Next) -> Response {
    let received = Instant::now();
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 16 * 1024 * 1024).await else {
        return Response::builder()
            .status(400)
            .body(Body::empty())
            .unwrap_or_default();
    };
    let is_call = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .is_some_and(|v| v["method"] == "tools/call");
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if !is_call {
        return response;
    }
    let slot = {
        let mut calls = lock(&times.calls);
        calls.push(McpCall {
            received,
            answered: None,
        });
        calls.len() - 1
    };
    let (parts, body) = response.into_parts();
    let mut first = true;
    let stream = body.into_data_stream().map(move |chunk| {
        if first {
            first = false;
            if let Some(c) = lock(&times.calls).get_mut(slot) {
                c.answered = Some(Instant::now());
            }
        }
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

struct McpServer {
    url: String,
    times: Arc<McpTimes>,
    cancel: CancellationToken,
}

impl McpServer {
    async fn start(nodelay: bool) -> Self {
        use axum::serve::ListenerExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind MCP server");
        let addr = listener.local_addr().expect("MCP server address");
        let times = Arc::new(McpTimes::default());
        let cancel = CancellationToken::new();
        let router = tarsy_test_mcp_server::http_router(cancel.child_token()).layer(
            axum::middleware::from_fn_with_state(times.clone(), time_tool_calls),
        );
        let listener = listener.tap_io(move |tcp| {
            let _ = tcp.set_nodelay(nodelay);
        });
        let stop = cancel.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        });
        Self {
            url: format!("http://{addr}/mcp"),
            times,
            cancel,
        }
    }

    fn take_calls(&self) -> Vec<McpCall> {
        std::mem::take(&mut *lock(&self.times.calls))
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

// --- configuration -------------------------------------------------------------

fn write_config(dir: &Path, base_url: &str, mcp_url: &str) -> PathBuf {
    let config = dir.join("config");
    std::fs::create_dir_all(&config).expect("config dir");
    let manifests = format!(
        r#"apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {{name: bench-openai}}
spec:
  type: openai
  model: {MODEL}
  apiKeyEnv: {KEY_ENV}
  baseUrl: {base_url}
---
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {{name: bench}}
spec:
  url: {mcp_url}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {{name: bench-agent}}
spec:
  displayName: BenchAgent
  description: Calls a tool a few times, then answers.
  mcpServers: [bench]
  maxIterations: 20
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {{name: bench}}
spec:
  alertTypes: [BenchAlert]
  llmProvider: bench-openai
  iterationStrategy: langchain
  stages:
  - name: investigation
    agent: bench-agent
"#
    );
    std::fs::write(config.join("bench.yaml"), manifests).expect("write config");
    let alert = dir.join("alert.yaml");
    std::fs::write(
        &alert,
        "apiVersion: tarsy.dev/v1alpha1\nkind: Alert\nmetadata: {name: bench}\nspec:\n  \
         alertType: BenchAlert\n  data: |\n    pod: web-1\n    namespace: shop\n    \
         reason: CrashLoopBackOff\n",
    )
    .expect("write alert");
    config
}

fn script_session(fake: &FakeOpenAi) {
    let args = json!({"bytes": TOOL_RESULT_BYTES}).to_string();
    for i in 0..TOOL_CALLS {
        fake.push(
            FakeReply::tool_call(&format!("call_{i}"), "bench__large_output", &args)
                .with_usage(900 + 600 * i as u64, 20),
        );
    }
    fake.push(
        FakeReply::text(&[
            "Root cause: ",
            "web-1 is OOMKilled; ",
            "raise its memory limit to 512Mi.",
        ])
        .with_usage(4200, 30),
    );
    fake.push(FakeReply::text(&["web-1 was OOMKilled; ", "raise its limit."]).with_usage(500, 12));
}

// --- process figures -----------------------------------------------------------

/// On-CPU time of every thread of a running process (ns precision).
fn process_cpu(pid: u32) -> Duration {
    let mut total = 0u64;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(task.path().join("schedstat"))
                && let Some(ns) = s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
            {
                total += ns;
            }
        }
    }
    Duration::from_nanos(total)
}

/// (VmRSS, VmHWM) in MiB.
fn process_rss(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Waits for the child `pid` to exit; returns its exit code (None when
/// killed), CPU time and peak RSS (KiB), as the kernel accounted them.
fn wait_child(pid: u32) -> (Option<i32>, Duration, i64) {
    let mut status = 0;
    // SAFETY: plain libc calls on a child this process spawned and nobody
    // else waits for; both out-parameters are owned locals.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    if rc != pid as libc::pid_t {
        return (None, Duration::ZERO, 0);
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (
        code,
        tv(usage.ru_utime) + tv(usage.ru_stime),
        usage.ru_maxrss,
    )
}

// --- one session ---------------------------------------------------------------

/// What one `tarsy investigate` run gave.
struct Session {
    spawned: Instant,
    exited: Instant,
    cpu: Duration,
    maxrss_kib: i64,
    grpc: Vec<StreamTiming>,
    provider: Vec<RequestTiming>,
    mcp: Vec<McpCall>,
}

fn tarsy_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("TARSY_BIN") {
        return PathBuf::from(bin);
    }
    // target/release/deps/agent_overhead-… → target/release/tarsy
    let exe = std::env::current_exe().expect("bench path");
    let release = exe
        .parent()
        .and_then(Path::parent)
        .expect("bench in target/<profile>/deps");
    release.join("tarsy")
}

async fn run_session(
    bin: &Path,
    dir: &Path,
    config: &Path,
    database_url: Option<&str>,
    tap: &H2Tap,
    fake: &FakeOpenAi,
    mcp: &McpServer,
) -> Session {
    let provider_before = fake.timings().len();
    tap.clear();
    mcp.take_calls();
    script_session(fake);
    let spawned = Instant::now();
    // std, not tokio, process: the bench reaps the child itself with
    // wait4(2), which reports its own CPU time and peak RSS.
    let mut command = std::process::Command::new(bin);
    command.arg("investigate");
    if let Some(url) = database_url {
        command.arg("--database-url").arg(url);
    }
    #[allow(clippy::zombie_processes)] // reaped by wait_child (wait4) below
    let mut child = command
        .arg(dir.join("alert.yaml"))
        .arg("--config")
        .arg(config)
        .arg("--llm-addr")
        .arg(format!("http://{}", tap.addr()))
        .arg("--json")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tarsy investigate");
    let pid = child.id();
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut s);
            }
            s
        })
    };
    let out = read(child.stdout.take().map(|p| Box::new(p) as _));
    let err = read(child.stderr.take().map(|p| Box::new(p) as _));
    let (code, cpu, maxrss) = tokio::task::spawn_blocking(move || wait_child(pid))
        .await
        .expect("wait for tarsy");
    let exited = Instant::now();
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    let report: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    assert!(
        code == Some(0) && report["status"] == "completed",
        "the investigation did not complete ({code:?}): {out}\n{err}"
    );
    assert_eq!(fake.unused_replies(), 0, "scripted replies left over");
    Session {
        spawned,
        exited,
        cpu,
        maxrss_kib: maxrss,
        grpc: tap.streams(),
        provider: fake.timings()[provider_before..].to_vec(),
        mcp: mcp.take_calls(),
    }
}

// --- figures -------------------------------------------------------------------

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn since(later: Option<Instant>, earlier: Option<Instant>) -> Option<f64> {
    Some(ms(later?.checked_duration_since(earlier?)?))
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn p90(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * 0.9).ceil() as usize).clamp(1, v.len()) - 1]
}

#[derive(Default)]
struct Figures {
    tarsy: Vec<f64>,
    service_after: Vec<f64>,
    service_before: Vec<f64>,
    mcp: Vec<f64>,
    iteration: Vec<f64>,
    start_to_grpc: Vec<f64>,
    start_to_provider: Vec<f64>,
    last_answer_to_exit: Vec<f64>,
    last_grpc_to_exit: Vec<f64>,
    tarsy_cpu: Vec<f64>,
    tarsy_rss: Vec<f64>,
}

impl Figures {
    fn add(&mut self, s: &Session) {
        let g = &s.grpc;
        let p = &s.provider;
        assert_eq!(g.len(), CALLS_PER_SESSION, "gRPC calls of a session");
        assert_eq!(p.len(), CALLS_PER_SESSION, "provider calls of a session");
        assert_eq!(s.mcp.len(), TOOL_CALLS, "tool calls of a session");
        for i in 0..TOOL_CALLS {
            let (Some(after), Some(before), Some(mcp), Some(gap), Some(whole)) = (
                since(g[i].last_response, p[i].answered),
                since(
                    Some(p[i + 1].received),
                    g[i + 1].request_sent.or(g[i + 1].request_complete),
                ),
                since(s.mcp[i].answered, Some(s.mcp[i].received)),
                since(
                    g[i + 1].request_sent.or(g[i + 1].request_complete),
                    g[i].last_response,
                ),
                since(Some(p[i + 1].received), p[i].answered),
            ) else {
                panic!(
                    "incomplete timings in iteration {i}: gRPC {:?} / {:?}, provider {:?} / {:?}, MCP {:?}",
                    g[i],
                    g[i + 1],
                    p[i],
                    p[i + 1],
                    s.mcp[i]
                );
            };
            self.service_after.push(after);
            self.service_before.push(before);
            self.mcp.push(mcp);
            self.tarsy.push(gap - mcp);
            self.iteration.push(whole);
        }
        self.start_to_grpc
            .push(since(Some(g[0].opened), Some(s.spawned)).unwrap_or(f64::NAN));
        self.start_to_provider
            .push(since(Some(p[0].received), Some(s.spawned)).unwrap_or(f64::NAN));
        let last = CALLS_PER_SESSION - 1;
        self.last_answer_to_exit
            .push(since(Some(s.exited), p[last].answered).unwrap_or(f64::NAN));
        self.last_grpc_to_exit
            .push(since(Some(s.exited), g[last].last_response).unwrap_or(f64::NAN));
        self.tarsy_cpu.push(ms(s.cpu));
        self.tarsy_rss.push(s.maxrss_kib as f64 / 1024.0);
    }
}

fn row(name: &str, v: &[f64], budget: &str) {
    println!(
        "  {name:<46} median {:>8.2} ms   p90 {:>8.2} ms   {budget}",
        median(v.to_vec()),
        p90(v.to_vec())
    );
}

/// Which servers set `TCP_NODELAY`.
#[derive(Debug, Clone, Copy)]
struct Mode {
    provider_nodelay: bool,
    mcp_nodelay: bool,
    /// Records in Postgres (`TARSY_TEST_DATABASE_URL`) instead of
    /// `investigate`'s private in-memory SQLite.
    postgres: bool,
}

async fn mode(m: Mode, runs: usize, bin: &Path) {
    let label = match (m.provider_nodelay, m.mcp_nodelay, m.postgres) {
        (true, true, false) => "both servers set TCP_NODELAY",
        (true, true, true) => "both servers set TCP_NODELAY, records in Postgres",
        (false, true, _) => "the provider's server leaves Nagle on",
        (true, false, _) => "the MCP server leaves Nagle on",
        (false, false, _) => "both servers leave Nagle on",
    };
    let database = if m.postgres {
        match tarsy_store::testing::TestDatabase::create("bench_overhead").await {
            Ok(db) => Some(db),
            Err(e) => {
                println!("\n== {label}: skipped, no Postgres ({e})");
                return;
            }
        }
    } else {
        None
    };
    let database_url = database.as_ref().map(|d| d.url().to_string());
    let fake = FakeOpenAi::start_with(FakeOptions {
        nodelay: m.provider_nodelay,
        write_each_event: true,
    })
    .await
    .expect("fake endpoint");
    let mcp = McpServer::start(m.mcp_nodelay).await;
    let dir = std::env::temp_dir().join(format!(
        "tarsy-agent-overhead-{}-{}-{}",
        std::process::id(),
        m.provider_nodelay,
        m.mcp_nodelay
    ));
    let config = write_config(&dir, &fake.base_url(), &mcp.url);

    let started = Instant::now();
    let service = LlmService::start(&[
        (KEY_ENV, "sk-bench-not-a-real-key"),
        // The workload's provider is loaded before the service reports ready.
        ("TARSY_LLM_PRELOAD", "openai"),
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let ready = started.elapsed();
    let pid = service.pid();
    let (rss_ready, _) = process_rss(pid);
    let upstream = service.address().parse().expect("service address");
    let tap = H2Tap::start(upstream).await.expect("h2 tap");

    // The first session pays for first calls (imports, connections): shown
    // apart, not in the medians.
    let cpu0 = process_cpu(pid);
    let first = run_session(
        bin,
        &dir,
        &config,
        database_url.as_deref(),
        &tap,
        &fake,
        &mcp,
    )
    .await;
    let first_cpu = process_cpu(pid).saturating_sub(cpu0);
    let mut warm = Figures::default();
    let mut cold = Figures::default();
    cold.add(&first);
    let first_call = since(first.grpc[0].last_response, first.grpc[0].request_sent);

    let cpu_before = process_cpu(pid);
    for _ in 0..runs {
        let s = run_session(
            bin,
            &dir,
            &config,
            database_url.as_deref(),
            &tap,
            &fake,
            &mcp,
        )
        .await;
        warm.add(&s);
    }
    let service_cpu = process_cpu(pid).saturating_sub(cpu_before);
    let calls = (runs * CALLS_PER_SESSION) as f64;
    let (rss, hwm) = process_rss(pid);

    println!("\n== {label}: {runs} sessions × {TOOL_CALLS} tool iterations (+ answer, summary)");
    println!("per tool iteration (model's tool call → next model request):");
    row(
        "tarsy (gRPC, records, MCP client, relay hops)",
        &warm.tarsy,
        "budget ≤ 1 ms",
    );
    let service: Vec<f64> = warm
        .service_after
        .iter()
        .zip(&warm.service_before)
        .map(|(a, b)| a + b)
        .collect();
    row("LLM service (after + before)", &service, "budget ≤ 1 ms");
    row("  after the provider's answer", &warm.service_after, "");
    row(
        "  before the next provider request",
        &warm.service_before,
        "",
    );
    row("MCP server (tools/call in → answer out)", &warm.mcp, "");
    row("whole iteration at the provider", &warm.iteration, "");
    println!("session:");
    row("tarsy start → first gRPC request", &warm.start_to_grpc, "");
    row(
        "tarsy start → first provider request",
        &warm.start_to_provider,
        "budget ≤ 20 ms",
    );
    row(
        "last provider answer → tarsy exit",
        &warm.last_answer_to_exit,
        "budget ≤ 20 ms",
    );
    row(
        "last gRPC response → tarsy exit",
        &warm.last_grpc_to_exit,
        "",
    );
    row("tarsy CPU per session", &warm.tarsy_cpu, "");
    println!(
        "  tarsy peak RSS                                 {:>8.1} MiB",
        median(warm.tarsy_rss.clone())
    );
    println!("LLM service (preloading openai):");
    println!(
        "  start → ready (listening)                      {:>8.0} ms   budget ≤ 1000 ms",
        ms(ready)
    );
    println!(
        "  CPU per call                                   {:>8.2} ms   budget ≤ 2 ms",
        ms(service_cpu) / calls
    );
    println!(
        "  RSS ready / now / peak                         {rss_ready:>6.1} / {rss:.1} / {hwm:.1} MiB   budget ≤ 80 MiB"
    );
    println!("first session (cold service):");
    println!(
        "  first call, gRPC request → response            {:>8.2} ms",
        first_call.unwrap_or(f64::NAN)
    );
    println!(
        "  LLM service CPU per call                       {:>8.2} ms",
        ms(first_cpu) / CALLS_PER_SESSION as f64
    );
    row("  tarsy per tool iteration", &cold.tarsy, "");
    let cold_service: Vec<f64> = cold
        .service_after
        .iter()
        .zip(&cold.service_before)
        .map(|(a, b)| a + b)
        .collect();
    row("  LLM service per tool iteration", &cold_service, "");
    drop(tap);
    drop(service);
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(db) = database {
        let _ = db.drop_database().await;
    }
}

/// Start-up of the LLM service alone, preloading every provider (its
/// default) or none: ready time and RSS when ready.
async fn service_startup() {
    println!("\n== LLM service start-up (alone)");
    for preload in ["all", "none"] {
        let started = Instant::now();
        let service = LlmService::start(&[("TARSY_LLM_PRELOAD", preload)])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let ready = started.elapsed();
        let (rss, _) = process_rss(service.pid());
        println!(
            "  TARSY_LLM_PRELOAD={preload:<5} start → ready {:>6.0} ms, RSS {rss:.1} MiB",
            ms(ready)
        );
    }
}

fn main() {
    let bin = tarsy_bin();
    assert!(
        bin.is_file(),
        "{} not found: build it with `cargo build --release -p tarsy` (or set TARSY_BIN)",
        bin.display()
    );
    let runs = std::env::var("TARSY_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(8usize)
        .max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "agent overhead: {} (tarsy), {runs} sessions per mode",
        bin.display()
    );
    let wanted = std::env::var("TARSY_BENCH_MODES").ok();
    let wanted = |name: &str| {
        wanted
            .as_deref()
            .is_none_or(|w| w.split(',').any(|m| m.trim() == name))
    };
    rt.block_on(async {
        for (name, m) in [
            (
                "sqlite",
                Mode {
                    provider_nodelay: true,
                    mcp_nodelay: true,
                    postgres: false,
                },
            ),
            (
                "postgres",
                Mode {
                    provider_nodelay: true,
                    mcp_nodelay: true,
                    postgres: true,
                },
            ),
            (
                "provider-nagle",
                Mode {
                    provider_nodelay: false,
                    mcp_nodelay: true,
                    postgres: false,
                },
            ),
            (
                "mcp-nagle",
                Mode {
                    provider_nodelay: true,
                    mcp_nodelay: false,
                    postgres: false,
                },
            ),
        ] {
            if wanted(name) {
                mode(m, runs, &bin).await;
            }
        }
        if wanted("startup") {
            service_startup().await;
        }
    });
}
