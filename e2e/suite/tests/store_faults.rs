//! "Dependencies blink, investigations don't": the database goes away in
//! the middle of investigations and comes back, and they complete as a
//! fault-free run would, with nothing stored twice and nothing left open.
//!
//! Real local mode (REST/WebSocket API, driver, store) with a slow model
//! over gRPC that answers from the conversation it is sent
//! ([`tarsy_e2e::paced_llm`]: an execution that asks again is answered the
//! same) and the test MCP server. Each test has a database of its own that
//! it can break (`tarsy_store::testing::faults`):
//!
//! - `postgres_stopped_mid_stream`: Postgres stopped for 15 s while three
//!   investigations stream; their writes wait it out;
//! - `api_answers_at_once_during_an_outage`: meanwhile the API answers 503
//!   with `Retry-After` within its 2 s, `/health` says unhealthy;
//! - `patience_exhausted_interrupts_and_resumes`: writes that wait only 2 s
//!   give up during an 8 s outage; the executions are interrupted and
//!   resumed from their stored records once the database is back;
//! - `full_sqlite_disk`: the disk under a SQLite database fills up mid-way:
//!   nothing is reported finished that is not stored, the API says the disk
//!   is full, and the investigation completes once space is freed.
//!
//! Needs root and Debian's PostgreSQL server binaries (what
//! `scripts/postgres.sh` installs).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tarsy_e2e::harness::{
    TestApp, assert_no_open_records, config_for, is_terminal_session_event, local_options,
};
use tarsy_e2e::paced_llm::{PacedLlm, SUMMARY, final_answer};
use tarsy_store::Store;
use tarsy_store::testing::faults::{PrivatePostgres, SmallDisk};

/// Tool calls of each investigation before its final answer.
const TOOL_TURNS: usize = 3;
/// Model calls of a session that nothing made ask again: the tool turns,
/// the final answer, the executive summary.
const FAULT_FREE_CALLS: usize = TOOL_TURNS + 2;
/// The API's contract is 2 s; the margin is for a loaded machine.
const API_BOUND: Duration = Duration::from_millis(2500);

const CHAIN: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: responder}
spec:
  displayName: Responder
  mcpServers: [testmcp]
  maxIterations: 8
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: store-blink}
spec:
  alertTypes: [StoreBlink]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: investigation
    agent: responder
"#;

/// The app's log on the test's output, as `RUST_LOG` asks (none without).
fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Local mode on the test's database, with the paced model.
struct Rig {
    llm: PacedLlm,
    _mcp: tarsy_test_mcp_server::HttpServer,
    app: TestApp,
    db_url: String,
}

impl Rig {
    /// `patience`: how long one investigation write waits out the store;
    /// `gap`: the model's pause before each streamed chunk.
    async fn start(db_url: &str, patience: Duration, gap: Duration) -> Self {
        logs();
        let llm = PacedLlm::start(TOOL_TURNS, gap).await;
        let mcp = tarsy_test_mcp_server::spawn_http(([127, 0, 0, 1], 0).into())
            .await
            .expect("test MCP server");
        let mut options = local_options(config_for(&mcp.url(), CHAIN), db_url, &llm.endpoint());
        options.settings.store_patience = patience;
        // Three investigations at once, the API and the event listener.
        options.max_connections = 8;
        options.max_concurrent_sessions = Some(3);
        let app = TestApp::start(options).await;
        Self {
            llm,
            _mcp: mcp,
            app,
            db_url: db_url.to_string(),
        }
    }

    async fn submit(&self) -> String {
        self.app.submit("StoreBlink", "pod: web-1").await
    }

    /// Waits until each session's model has been asked `n` times: its
    /// investigation is in the middle of its turns, its answers streaming.
    async fn wait_calls(&self, ids: &[String], n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ids.iter().all(|id| self.llm.calls(id) >= n) {
            assert!(
                Instant::now() < deadline,
                "the investigations never reached model call {n}: {:?}",
                ids.iter().map(|id| self.llm.calls(id)).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// `pg_ctl` blocks: run it off the runtime's workers.
async fn on_server(pg: &Arc<PrivatePostgres>, what: fn(&PrivatePostgres)) {
    let pg = pg.clone();
    tokio::task::spawn_blocking(move || what(&pg))
        .await
        .expect("pg_ctl");
}

/// A request's status, `Retry-After`, JSON body and how long it took.
struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: Value,
    took: Duration,
}

async fn request(app: &TestApp, method: &str, path: &str, body: Option<Value>) -> Answer {
    let url = format!("{}{path}", app.base);
    let mut req = match method {
        "GET" => app.http.get(&url),
        _ => app.http.post(&url),
    };
    if let Some(body) = body {
        req = req.json(&body);
    }
    let asked = Instant::now();
    let r = req
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = r.status().as_u16();
    let retry_after = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = r.json().await.unwrap_or(Value::Null);
    Answer {
        status,
        retry_after,
        body,
        took: asked.elapsed(),
    }
}

fn alert() -> Value {
    json!({"alert_type": "StoreBlink", "data": "pod: web-2"})
}

/// What an investigation left in the store.
struct Stored {
    /// Timeline events of the execution as `type:status`, in order,
    /// leaving out those an interruption cut (closed `failed`, marked
    /// `interrupted`).
    events: Vec<String>,
    /// Failed LLM interactions of the execution.
    failed_llm: usize,
    /// Timeline events an interruption closed (`metadata.interrupted`).
    interrupted_events: usize,
    /// Tool calls run again because an interruption cut them
    /// (`metadata.retried`).
    retried_calls: usize,
}

/// Checks what every fault must leave behind for session `id`: completed
/// with the model's answer and summary; one stage and one execution, both
/// completed; each timeline event, message and interaction once (no
/// sequence number twice, the conversation of a fault-free run, one
/// successful LLM record per iteration, one tool record per call);
/// nothing left streaming, nothing closed by the session's end.
async fn assert_intact(store: &Store, app: &TestApp, id: &str) -> Stored {
    let session = app.session(id).await;
    assert_eq!(session["status"], "completed", "{session:#}");
    assert_eq!(
        session["final_analysis"],
        final_answer(TOOL_TURNS),
        "{session:#}"
    );
    assert_eq!(session["executive_summary"], SUMMARY, "{session:#}");
    let stages = session["stages"].as_array().cloned().unwrap_or_default();
    assert_eq!(stages.len(), 1, "{session:#}");
    assert_eq!(stages[0]["status"], "completed", "{session:#}");
    let executions = stages[0]["executions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(executions.len(), 1, "{session:#}");
    assert_eq!(executions[0]["status"], "completed", "{session:#}");
    let exec_id = executions[0]["id"].as_str().unwrap().to_string();

    // Timeline: each sequence number once, nothing streaming, nothing the
    // session's end had to close (that would be a write lost on the way).
    let timeline = store.session_timeline(id).await.expect("timeline");
    let mut seen = BTreeSet::new();
    for e in timeline.iter().filter(|e| e.scope.execution_id.is_some()) {
        assert!(
            seen.insert((e.scope.execution_id.clone(), e.sequence_number)),
            "sequence number {} twice: {timeline:#?}",
            e.sequence_number
        );
    }
    assert!(
        timeline
            .iter()
            .all(|e| e.status != tarsy_core::TimelineEventStatus::Streaming),
        "events left streaming: {timeline:#?}"
    );
    assert!(
        !timeline
            .iter()
            .any(|e| e.metadata["kind"] == "closed_at_session_end"),
        "the session's end closed what the execution left open: {timeline:#?}"
    );
    let interrupted_events = timeline
        .iter()
        .filter(|e| e.metadata["interrupted"] == true)
        .count();
    let retried_calls = timeline
        .iter()
        .filter(|e| e.metadata["retried"] == true)
        .count();
    let events: Vec<String> = timeline
        .iter()
        .filter(|e| e.scope.execution_id.as_deref() == Some(exec_id.as_str()))
        .filter(|e| e.metadata["interrupted"] != true)
        .map(|e| format!("{}:{}", e.event_type.as_str(), e.status.as_str()))
        .collect();

    // The conversation: each turn once, in order.
    let messages = store.list_messages(&exec_id).await.expect("messages");
    let seqs: BTreeSet<i64> = messages.iter().map(|m| m.sequence_number).collect();
    assert_eq!(seqs.len(), messages.len(), "a sequence number twice");
    let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
    let mut expected = vec!["system", "user"];
    for _ in 0..TOOL_TURNS {
        expected.extend(["assistant", "tool"]);
    }
    expected.push("assistant");
    assert_eq!(roles, expected, "{messages:#?}");

    // Interactions: one successful LLM record per iteration, one tool call
    // record per call (and per run again, see `retried_calls`), one
    // executive summary.
    let trace = store.session_trace(id).await.expect("trace");
    let exec_trace = &trace.stages[0].executions[0];
    let mut ok_iterations = Vec::new();
    let mut failed_llm = 0;
    for i in &exec_trace.llm_interactions {
        if i.error_message.is_some() {
            failed_llm += 1;
            continue;
        }
        let full = store.get_llm_interaction(&i.id).await.expect("llm record");
        ok_iterations.push(full.llm_request["iteration"].as_u64().unwrap_or(0));
    }
    ok_iterations.sort_unstable();
    assert_eq!(
        ok_iterations,
        (1..=TOOL_TURNS as u64 + 1).collect::<Vec<_>>(),
        "successful LLM records by iteration: {:#?}",
        exec_trace.llm_interactions
    );
    let mut calls: BTreeMap<String, usize> = BTreeMap::new();
    for m in exec_trace
        .mcp_interactions
        .iter()
        .filter(|m| m.interaction_type.as_str() == "tool_call")
    {
        let full = store.get_mcp_interaction(&m.id).await.expect("mcp record");
        *calls
            .entry(
                full.tool_arguments["text"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string(),
            )
            .or_default() += 1;
    }
    let checks: Vec<String> = (1..=TOOL_TURNS).map(|n| format!("check {n}")).collect();
    assert_eq!(
        calls.keys().cloned().collect::<Vec<_>>(),
        checks,
        "tool call records: {calls:?}"
    );
    assert_eq!(
        calls.values().sum::<usize>(),
        TOOL_TURNS + retried_calls,
        "tool call records: {calls:?}"
    );
    let summaries: Vec<_> = trace
        .session_interactions
        .iter()
        .filter(|i| i.error_message.is_none())
        .collect();
    assert_eq!(summaries.len(), 1, "{:#?}", trace.session_interactions);

    Stored {
        events,
        failed_llm,
        interrupted_events,
        retried_calls,
    }
}

/// Now, as the store's timestamps count it.
fn unix_millis() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970");
    i64::try_from(since.as_millis()).expect("a clock before 292 million AD")
}

/// The timeline a fault-free run of the paced model gives.
fn fault_free_events() -> Vec<String> {
    let mut e = Vec::new();
    for _ in 0..TOOL_TURNS {
        e.extend(["llm_response:completed", "llm_tool_call:completed"]);
    }
    e.extend(["llm_response:completed", "final_analysis:completed"]);
    e.into_iter().map(str::to_string).collect()
}

/// Postgres stopped (as a failover stops it) for 15 s while three
/// investigations stream, then started again: their writes wait it out
/// (patience 120 s), and each completes exactly as a fault-free run would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stopped_mid_stream() {
    let pg = Arc::new(PrivatePostgres::start());
    let rig = Rig::start(
        &pg.url(),
        tarsy_store::DEFAULT_PATIENCE,
        Duration::from_millis(300),
    )
    .await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(rig.submit().await);
    }
    // Each in its second turn: streamed text is being written.
    rig.wait_calls(&ids, 2).await;
    on_server(&pg, PrivatePostgres::stop).await;
    let stopped = unix_millis();
    tokio::time::sleep(Duration::from_secs(15)).await;
    on_server(&pg, PrivatePostgres::resume).await;

    let store = Store::connect(&rig.db_url).await.expect("the database");
    for id in &ids {
        rig.app
            .app
            .wait_for_terminal(id, Duration::from_secs(45))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let stored = assert_intact(&store, &rig.app, id).await;
        assert_eq!(stored.events, fault_free_events(), "session {id}");
        assert_eq!(stored.failed_llm, 0, "session {id}");
        assert_eq!(stored.interrupted_events, 0, "session {id}");
        assert_eq!(stored.retried_calls, 0, "session {id}");
        // The outage hit the investigation: it ended after the stop…
        let s = store.get_session(id).await.unwrap();
        assert!(
            s.completed_at
                .is_some_and(|at| at.timestamp_millis() > stopped),
            "session {id} ended before the outage"
        );
        // …and it waited: nothing was asked of the model twice.
        assert_eq!(rig.llm.calls(id), FAULT_FREE_CALLS, "model calls of {id}");
    }
    store.close().await;
    rig.app.shutdown().await;
    assert_no_open_records(&rig.db_url).await;
}

/// While Postgres is stopped the API answers at once: 503
/// `{error: unavailable}` with `Retry-After` for reads and submissions,
/// `unhealthy` on `/health`; once it is back, everything answers again and
/// an alert submitted then is investigated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_answers_at_once_during_an_outage() {
    let pg = Arc::new(PrivatePostgres::start());
    let rig = Rig::start(
        &pg.url(),
        tarsy_store::DEFAULT_PATIENCE,
        Duration::from_millis(10),
    )
    .await;
    let id = rig.submit().await;
    rig.app.finish(&id).await;

    on_server(&pg, PrivatePostgres::stop).await;
    let session_path = format!("/api/v1/sessions/{id}");
    let requests = [
        ("GET", "/api/v1/sessions", None),
        ("GET", session_path.as_str(), None),
        ("POST", "/api/v1/alerts", Some(alert())),
    ];
    // Right after the stop a request meets a pooled connection the server
    // closed (it fails at once); a moment later the pool has none left and
    // each request waits for a connection that cannot come (the 2 s bound).
    let rounds = [Duration::ZERO, Duration::from_millis(1500)];
    let asked = rounds.iter().flat_map(|pause| {
        requests
            .iter()
            .enumerate()
            .map(move |(i, r)| (if i == 0 { *pause } else { Duration::ZERO }, r.clone()))
    });
    for (pause, (method, path, body)) in asked {
        tokio::time::sleep(pause).await;
        let a = request(&rig.app, method, path, body).await;
        assert_eq!(a.status, 503, "{method} {path}: {}", a.body);
        assert_eq!(a.body["error"], "unavailable", "{method} {path}");
        let message = a.body["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("database is unavailable"),
            "{method} {path}: {message}"
        );
        let retry_after = a.retry_after.as_deref().and_then(|v| v.parse::<u64>().ok());
        assert!(
            retry_after.is_some_and(|secs| secs > 0),
            "{method} {path}: Retry-After {:?}",
            a.retry_after
        );
        assert!(a.took < API_BOUND, "{method} {path} took {:?}", a.took);
    }
    let health = request(&rig.app, "GET", "/health", None).await;
    assert_eq!(health.status, 503, "{}", health.body);
    assert_eq!(health.body["status"], "unhealthy", "{}", health.body);

    on_server(&pg, PrivatePostgres::resume).await;
    let health = request(&rig.app, "GET", "/health", None).await;
    assert_eq!(health.status, 200, "{}", health.body);
    let list = request(&rig.app, "GET", "/api/v1/sessions", None).await;
    assert_eq!(list.status, 200, "{}", list.body);
    let one = request(&rig.app, "GET", &session_path, None).await;
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(one.body["status"], "completed");
    let submitted = request(&rig.app, "POST", "/api/v1/alerts", Some(alert())).await;
    assert_eq!(submitted.status, 202, "{}", submitted.body);
    let next = submitted.body["session_id"].as_str().unwrap().to_string();
    let s = rig.app.finish(&next).await;
    assert_eq!(s["status"], "completed", "{s:#}");
    // The alert refused during the outage was not stored after all.
    let listed = request(&rig.app, "GET", "/api/v1/sessions", None).await;
    assert_eq!(
        listed.body["sessions"].as_array().map(Vec::len),
        Some(2),
        "{}",
        listed.body
    );
    rig.app.shutdown().await;
    assert_no_open_records(&rig.db_url).await;
}

/// Writes that wait only 2 s give up during an 8 s outage: the executions
/// are interrupted — not failed — and go on from their stored records once
/// the database takes writes again; the sessions complete, nothing stored
/// twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patience_exhausted_interrupts_and_resumes() {
    let pg = Arc::new(PrivatePostgres::start());
    let rig = Rig::start(
        &pg.url(),
        Duration::from_secs(2),
        Duration::from_millis(300),
    )
    .await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(rig.submit().await);
    }
    rig.wait_calls(&ids, 2).await;
    on_server(&pg, PrivatePostgres::stop).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    on_server(&pg, PrivatePostgres::resume).await;

    let store = Store::connect(&rig.db_url).await.expect("the database");
    // Right after the restart: the executions are still running (resumed
    // or about to be), none was recorded as failed.
    for id in &ids {
        for e in store.list_session_executions(id).await.unwrap() {
            assert!(!e.status.is_terminal(), "{e:#?}");
        }
    }
    for id in &ids {
        rig.app
            .app
            .wait_for_terminal(id, Duration::from_secs(45))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let stored = assert_intact(&store, &rig.app, id).await;
        assert_eq!(stored.events, fault_free_events(), "session {id}");
        // Each was streaming when the writes stopped going through, for
        // longer than they wait: each was interrupted and resumed, and
        // did again what it could not record — asked the model again, or
        // ran a cut tool call again, or closed a cut answer.
        assert!(
            rig.llm.calls(id) > FAULT_FREE_CALLS
                || stored.retried_calls > 0
                || stored.interrupted_events > 0,
            "session {id} shows no interruption: {} model calls",
            rig.llm.calls(id)
        );
    }
    store.close().await;
    rig.app.shutdown().await;
    assert_no_open_records(&rig.db_url).await;
}

/// The disk under a SQLite database fills up mid-investigation: no session
/// is reported finished that is not stored so, `/health` and submissions
/// say the disk is full; once space is freed the investigation completes
/// and is stored completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_sqlite_disk() {
    let disk = SmallDisk::mount(8 * 1024 * 1024);
    let db_url = format!("sqlite:{}", disk.path().join("tarsy.db").display());
    let rig = Rig::start(
        &db_url,
        tarsy_store::DEFAULT_PATIENCE,
        Duration::from_millis(250),
    )
    .await;
    let mut ws = rig.app.ws().await;
    let id = rig.submit().await;
    ws.subscribe(&format!("session:{id}")).await;
    rig.wait_calls(std::slice::from_ref(&id), 2).await;
    disk.fill();
    let filled = Instant::now();

    let health = request(&rig.app, "GET", "/health", None).await;
    assert_eq!(health.status, 503, "{}", health.body);
    assert_eq!(health.body["status"], "unhealthy", "{}", health.body);
    let error = health.body["database"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("disk is full"), "{}", health.body);
    let refused = request(&rig.app, "POST", "/api/v1/alerts", Some(alert())).await;
    assert!(
        matches!(refused.status, 503 | 507),
        "{}: {}",
        refused.status,
        refused.body
    );
    let message = refused.body["message"].as_str().unwrap_or_default();
    assert!(message.contains("disk is full"), "{message}");
    assert!(refused.retry_after.is_some());

    // Longer than the rest of the investigation takes when its writes go
    // through: had a failed write been taken for done, it would end now.
    ws.collect_for(Duration::from_secs(8).saturating_sub(filled.elapsed()))
        .await;
    let reported: Vec<&Value> = ws
        .events
        .iter()
        .filter(|e| is_terminal_session_event(e))
        .collect();
    assert!(
        reported.is_empty(),
        "reported finished while nothing could be stored: {reported:#?}"
    );
    let (status, s) = rig.app.get(&format!("/api/v1/sessions/{id}")).await;
    if status == 200 {
        assert_eq!(s["status"], "in_progress", "{s:#}");
    }

    disk.free();
    let end = ws
        .until("the session's end", is_terminal_session_event)
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    rig.app
        .app
        .wait_for_terminal(&id, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let health = request(&rig.app, "GET", "/health", None).await;
    assert_eq!(health.status, 200, "{}", health.body);
    let store = Store::connect(&rig.db_url).await.expect("the database");
    let stored = assert_intact(&store, &rig.app, &id).await;
    assert_eq!(stored.events, fault_free_events());
    // Every end the WebSocket reported is the stored one.
    for e in ws.events.iter().filter(|e| is_terminal_session_event(e)) {
        assert_eq!(e["status"], "completed", "{e}");
    }
    store.close().await;
    rig.app.shutdown().await;
    assert_no_open_records(&rig.db_url).await;
    drop(disk);
}
