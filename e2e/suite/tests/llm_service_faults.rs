//! "Dependencies blink, investigations don't": the LLM service goes away in
//! the middle of an investigation and comes back on the same address, and
//! the investigation completes as if nothing had happened, apart from one
//! timeline marker saying the service was unreachable for a while.
//!
//! Real local mode (REST API, driver, store) → gRPC → the real Python
//! `tarsy-llm-service` → HTTP → a scripted OpenAI-compatible endpoint whose
//! slow ("paced") answer keeps a call in flight while the test acts:
//!
//! - `kill_mid_stream`: SIGKILL while the final answer is streaming (a
//!   crash, an OOM kill), a new process on the same address 5 s later;
//! - `terminate_mid_stream`: SIGTERM while a tool-call answer is streaming
//!   (a rollout): the draining service finishes that call, exits, and a new
//!   process takes its address right after.
//!
//! Both depend on the engine waiting out the unreachable service on the
//! same provider: without it, each failed call consumes an iteration and the
//! next ones fail at once too (connection refused), so the execution spends
//! its iterations in well under the time a restart takes, fails, and leaves
//! no "reached again" marker.
//!
//! Needs the service's virtualenv (`bash llm-service/ci.sh`) and, for the
//! Postgres variants, `TARSY_TEST_DATABASE_URL`.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use tarsy_e2e::harness::{TestApp, config_for, local_options};
use tarsy_e2e::{FakeOpenAi, FakeReply, LlmService, on_both_backends};
use tarsy_store::Store;

/// The variable the service reads the provider key from.
const KEY_ENV: &str = "TARSY_E2E_FAULT_OPENAI_KEY";
/// Environment of every service process: the key, and only the OpenAI
/// libraries loaded before it listens (a faster restart).
const SERVICE_ENV: &[(&str, &str)] = &[
    (KEY_ENV, "sk-e2e-not-a-real-key"),
    ("TARSY_LLM_PRELOAD", "openai"),
];
const TOOL_ARGS: &str = r#"{"text":"restarts: 7"}"#;
/// The cut answer's text: none of it may end up in the result.
const PARTIAL: &[&str] = &[
    "PARTIAL: web-1 ",
    "PARTIAL: restarted ",
    "PARTIAL: seven ",
    "PARTIAL: times ",
    "PARTIAL: because ",
    "PARTIAL: of ",
    "PARTIAL: memory ",
    "PARTIAL: pressure ",
    "PARTIAL: on ",
    "PARTIAL: the ",
    "PARTIAL: node. ",
    "PARTIAL: Raise ",
];
const FINAL: &str = "Root cause: web-1 is OOMKilled; raise its memory limit to 512Mi.";
const SUMMARY: &str = "web-1 was OOMKilled; raise its limit.";
/// Model answers the investigation needs: the tool call, the final answer.
const SCRIPTED_ITERATIONS: u64 = 2;
/// How long the test waits for anything that should happen (correctness,
/// not speed: generous for a loaded machine).
const PATIENCE: Duration = Duration::from_secs(30);

fn manifests(base_url: &str) -> String {
    format!(
        r#"apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {{name: fake-openai}}
spec:
  type: openai
  model: gpt-4o-mini
  apiKeyEnv: {KEY_ENV}
  baseUrl: {base_url}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {{name: responder}}
spec:
  displayName: Responder
  mcpServers: [testmcp]
  maxIterations: 4
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {{name: blink}}
spec:
  alertTypes: [ServiceBlink]
  llmProvider: fake-openai
  iterationStrategy: langchain
  stages:
  - name: investigation
    agent: responder
"#
    )
}

/// A free loopback port below the kernel's ephemeral range: while the
/// service is down nobody listens on its port, and an outgoing connection
/// of any process on this machine could otherwise be given it as its local
/// port, making the restart's bind fail.
fn fixed_port() -> u16 {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let span = low.saturating_sub(20000).max(1000);
    // Different tests (and test processes) start at different ports.
    let seed = std::process::id() as u64 * 7919
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64)
            .unwrap_or(0);
    (0..200u64)
        .map(|i| 20000 + ((seed + i * 37) % span as u64) as u16)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("no free port below the ephemeral range")
}

/// Local mode with the real LLM service between it and the fake provider.
struct Rig {
    fake: FakeOpenAi,
    _mcp: tarsy_test_mcp_server::HttpServer,
    service: LlmService,
    /// Logs of the service processes that are gone.
    earlier_logs: Vec<String>,
    app: TestApp,
    db_url: String,
}

impl Rig {
    async fn start(db_url: String, replies: Vec<FakeReply>) -> Self {
        let fake = FakeOpenAi::start().await.expect("fake OpenAI endpoint");
        for r in replies {
            fake.push(r);
        }
        let mcp = tarsy_test_mcp_server::spawn_http(([127, 0, 0, 1], 0).into())
            .await
            .expect("test MCP server");
        let listen = format!("127.0.0.1:{}", fixed_port());
        let service = LlmService::start_on(&listen, SERVICE_ENV)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let config = config_for(&mcp.url(), &manifests(&fake.base_url()));
        let app = TestApp::start(local_options(config, &db_url, &service.endpoint())).await;
        Self {
            fake,
            _mcp: mcp,
            service,
            earlier_logs: Vec::new(),
            app,
            db_url,
        }
    }

    /// Waits until provider request `n` (from 0) is being answered: the
    /// fake has sent part of the answer and not the end. The LLM service is
    /// then in the middle of the call's stream.
    async fn wait_in_flight(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let written = self.fake.events_written().get(n).copied().unwrap_or(0);
            if written >= 2 {
                self.assert_in_flight(n);
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "provider request {n} never streamed ({} requests so far); logs:\n{}",
                self.fake.requests().len(),
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The answer to provider request `n` has not been fully written.
    fn assert_in_flight(&self, n: usize) {
        let timing = self.fake.timings()[n];
        assert!(
            timing.answered.is_none(),
            "provider request {n} was answered before the fault could hit it; \
             the paced answer is too short for this machine"
        );
    }

    /// A new service process on the address the app uses.
    async fn restart(&mut self) {
        let listen = self.service.address().to_string();
        let next = LlmService::start_on(&listen, SERVICE_ENV)
            .await
            .unwrap_or_else(|e| panic!("restart on {listen}: {e}"));
        let gone = std::mem::replace(&mut self.service, next);
        self.earlier_logs.push(gone.log_lines().join("\n"));
    }

    /// Every service process's log, for failure messages.
    fn logs(&self) -> String {
        let mut all = self.earlier_logs.clone();
        all.push(self.service.log_lines().join("\n"));
        all.join("\n--- restarted ---\n")
    }

    async fn timeline(&self, id: &str) -> Vec<Value> {
        let t = self
            .app
            .get_ok(&format!("/api/v1/sessions/{id}/timeline"))
            .await;
        t.as_array().cloned().unwrap_or_default()
    }
}

/// What the test reads back after the session ended.
struct Outcome {
    session: Value,
    timeline: Vec<Value>,
    /// The investigation's LLM interaction details, in order.
    llm: Vec<Value>,
    /// The investigation's MCP tool calls.
    tool_calls: usize,
}

/// Waits for the session to end and checks what every fault must leave
/// behind: the session completed with the scripted answer, every execution
/// terminal, one outage marker that says the service was reached again,
/// nothing left streaming, the scripted iterations and no more, exactly one
/// successful LLM record per scripted answer, a conversation without
/// duplicates.
async fn assert_recovered(rig: &Rig, id: &str) -> Outcome {
    let session = rig.app.finish(id).await;
    let logs = rig.logs();
    assert_eq!(
        session["status"], "completed",
        "session: {session:#}\nservice logs:\n{logs}"
    );
    assert_eq!(session["final_analysis"], FINAL, "{session:#}");
    assert_eq!(session["executive_summary"], SUMMARY, "{session:#}");

    // No stage or execution left behind in a non-terminal state.
    let stages = session["stages"].as_array().cloned().unwrap_or_default();
    assert_eq!(stages.len(), 1, "{session:#}");
    let executions = stages[0]["executions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(executions.len(), 1, "{session:#}");
    assert_eq!(stages[0]["status"], "completed", "{session:#}");
    assert_eq!(executions[0]["status"], "completed", "{session:#}");
    let exec_id = executions[0]["id"].as_str().unwrap().to_string();

    let timeline = rig.timeline(id).await;
    let streaming: Vec<_> = timeline
        .iter()
        .filter(|e| e["status"] == "streaming")
        .collect();
    assert!(
        streaming.is_empty(),
        "events left streaming: {streaming:#?}"
    );

    // One marker for the outage, closed with "reached again".
    let markers: Vec<&Value> = timeline
        .iter()
        .filter(|e| e["metadata"]["kind"] == "llm_service_unavailable")
        .collect();
    assert_eq!(markers.len(), 1, "timeline: {timeline:#?}");
    let marker = markers[0];
    assert_eq!(marker["event_type"], "error", "{marker:#}");
    assert_eq!(marker["status"], "completed", "{marker:#}");
    assert_eq!(marker["metadata"]["outcome"], "reached", "{marker:#}");
    let text = marker["content"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("LLM service unavailable for ")
            && text.contains("; reached again on attempt "),
        "{text}"
    );

    let finals: Vec<&Value> = timeline
        .iter()
        .filter(|e| e["event_type"] == "final_analysis")
        .collect();
    assert_eq!(finals.len(), 1, "timeline: {timeline:#?}");
    assert_eq!(finals[0]["content"], FINAL);
    assert_eq!(finals[0]["status"], "completed");

    // LLM records: the failed attempts are the outage's (all in the
    // interrupted iteration); one successful record per scripted answer.
    let trace = rig
        .app
        .get_ok(&format!("/api/v1/sessions/{id}/trace"))
        .await;
    let exec_trace = &trace["stages"][0]["executions"][0];
    assert_eq!(exec_trace["execution_id"], exec_id.as_str(), "{trace:#}");
    let mut llm = Vec::new();
    for i in exec_trace["llm_interactions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let iid = i["id"].as_str().unwrap();
        llm.push(
            rig.app
                .get_ok(&format!("/api/v1/sessions/{id}/trace/llm/{iid}"))
                .await,
        );
    }
    let (ok, failed): (Vec<&Value>, Vec<&Value>) =
        llm.iter().partition(|i| i["error_message"].is_null());
    let ok_iterations: Vec<u64> = ok
        .iter()
        .map(|i| i["llm_request"]["iteration"].as_u64().unwrap())
        .collect();
    assert_eq!(
        ok_iterations,
        (1..=SCRIPTED_ITERATIONS).collect::<Vec<_>>(),
        "successful LLM records: {ok:#?}"
    );
    assert_eq!(
        ok.iter()
            .map(|i| i["interaction_type"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["iteration", "final_analysis"]
    );
    // Each failed attempt recorded once: as many as the marker counted.
    assert!(!failed.is_empty(), "no failed attempt recorded: {llm:#?}");
    assert_eq!(
        marker["metadata"]["failed_attempts"],
        failed.len(),
        "{marker:#}\n{failed:#?}"
    );
    for f in &failed {
        let error = f["error_message"].as_str().unwrap();
        assert!(
            error.ends_with("(llm_service_unavailable)"),
            "a failure other than the outage: {error}"
        );
        // Waiting out repeats the interrupted iteration's call; it never
        // moves on to another iteration.
        assert_eq!(f["llm_request"]["iteration"], SCRIPTED_ITERATIONS, "{f:#}");
    }
    let used = llm
        .iter()
        .filter_map(|i| i["llm_request"]["iteration"].as_u64())
        .max();
    assert_eq!(used, Some(SCRIPTED_ITERATIONS), "iterations used");

    // One session-level record: the executive summary, asked once.
    let summaries = trace["session_interactions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(summaries.len(), 1, "{trace:#}");
    assert!(summaries[0]["error_message"].is_null(), "{trace:#}");

    let tool_calls = exec_trace["mcp_interactions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["interaction_type"] == "tool_call")
        .count();

    // The stored conversation: each turn once, in order.
    let store = Store::connect(&rig.db_url).await.expect("store");
    let messages: Vec<Value> = store
        .list_messages(&exec_id)
        .await
        .expect("messages")
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .collect();
    let sequence: Vec<i64> = messages
        .iter()
        .map(|m| m["sequence_number"].as_i64().unwrap())
        .collect();
    let distinct: BTreeSet<i64> = sequence.iter().copied().collect();
    assert_eq!(distinct.len(), sequence.len(), "duplicate sequence numbers");
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant"],
        "{messages:#?}"
    );
    assert_eq!(messages[4]["content"], FINAL);

    assert_eq!(rig.fake.unused_replies(), 0, "scripted replies left over");
    Outcome {
        session,
        timeline,
        llm,
        tool_calls,
    }
}

/// SIGKILL while the final answer streams; a new process 5 s later. The
/// cut call is repeated once the service is back, and its half-streamed
/// text leaves nothing but a failed, interrupted event.
async fn kill_mid_stream(db_url: String) {
    let mut rig = Rig::start(
        db_url,
        vec![
            FakeReply::tool_call("call_1", "testmcp__echo", TOOL_ARGS),
            // ~5 s of streaming: the kill comes well before its end.
            FakeReply::text(PARTIAL).paced(Duration::from_millis(400)),
            FakeReply::text(&[
                "Root cause: web-1 is OOMKilled; ",
                "raise its memory limit to 512Mi.",
            ]),
            FakeReply::text(&[SUMMARY]),
        ],
    )
    .await;
    let id = rig.app.submit("ServiceBlink", "pod: web-1").await;

    rig.wait_in_flight(1).await;
    // The engine shows the answer streaming when the service dies.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !rig
        .timeline(&id)
        .await
        .iter()
        .any(|e| e["event_type"] == "llm_response" && e["status"] == "streaming")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the answer never showed as streaming"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    rig.assert_in_flight(1);
    rig.service.kill().expect("SIGKILL the LLM service");
    tokio::time::sleep(Duration::from_secs(5)).await;
    rig.restart().await;

    let out = assert_recovered(&rig, &id).await;
    assert_eq!(out.tool_calls, 1);

    // The cut stream's event is closed as failed and marked interrupted;
    // its text reaches nothing else.
    let cut: Vec<&Value> = out
        .timeline
        .iter()
        .filter(|e| e["content"].as_str().unwrap_or("").contains("PARTIAL"))
        .collect();
    assert_eq!(cut.len(), 1, "{:#?}", out.timeline);
    assert_eq!(cut[0]["event_type"], "llm_response");
    assert_eq!(cut[0]["status"], "failed");
    assert_eq!(cut[0]["metadata"]["interrupted"], true);
    assert!(
        !out.session.to_string().contains("PARTIAL"),
        "{:#}",
        out.session
    );

    // The provider saw the cut call once and its repetition once, with the
    // same conversation: nothing of the cut answer was kept or sent twice.
    let requests = rig.fake.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    assert_eq!(requests[2].messages(), requests[1].messages());
    assert_eq!(requests[1].roles(), ["system", "user", "assistant", "tool"]);
    // The cut attempt and at least one refused while nothing listened.
    let failed = out
        .llm
        .iter()
        .filter(|i| !i["error_message"].is_null())
        .count();
    assert!(failed >= 2, "{:#?}", out.llm);

    rig.app.shutdown().await;
}

/// SIGTERM while a tool-call answer streams (a rollout): the draining
/// service lets that call finish and exits; a new process takes the
/// address right after. The finished call is not repeated; the next one
/// waits for the new process.
async fn terminate_mid_stream(db_url: String) {
    let mut rig = Rig::start(
        db_url,
        vec![
            // Six events, ~3 s: SIGTERM comes while they stream.
            FakeReply::tool_call("call_1", "testmcp__echo", TOOL_ARGS)
                .paced(Duration::from_millis(600)),
            FakeReply::text(&[
                "Root cause: web-1 is OOMKilled; ",
                "raise its memory limit to 512Mi.",
            ]),
            FakeReply::text(&[SUMMARY]),
        ],
    )
    .await;
    let id = rig.app.submit("ServiceBlink", "pod: web-1").await;

    rig.wait_in_flight(0).await;
    rig.service.terminate().expect("SIGTERM the LLM service");
    let status = rig
        .service
        .wait_exit(PATIENCE)
        .await
        .unwrap_or_else(|| panic!("the service did not exit; its log:\n{}", rig.logs()));
    // Exit 0: the drain ended with no call left to cut.
    assert!(status.success(), "{status}; log:\n{}", rig.logs());
    // The service itself saw the call running when the signal came.
    let stopping = rig
        .service
        .log_records()
        .into_iter()
        .find(|r| r["msg"] == "shutting down");
    assert_eq!(
        stopping.as_ref().map(|r| r["calls"].clone()),
        Some(1.into()),
        "log:\n{}",
        rig.logs()
    );
    let drained = rig.logs();
    rig.restart().await;

    let out = assert_recovered(&rig, &id).await;

    // The call in flight at SIGTERM finished: the provider's whole answer
    // went out, the service did not end it, its record is a success and its
    // tool call ran once.
    assert!(rig.fake.timings()[0].answered.is_some());
    assert!(
        !drained.contains("ending running calls"),
        "the drain cut the call:\n{drained}"
    );
    let first = &out.llm[0];
    assert!(first["error_message"].is_null(), "{first:#}");
    assert_eq!(first["llm_request"]["iteration"], 1);
    assert_eq!(first["llm_response"]["tool_calls"][0]["id"], "call_1");
    assert_eq!(out.tool_calls, 1);
    // Not repeated: tool turn, final answer, summary.
    assert_eq!(rig.fake.requests().len(), 3, "{:#?}", rig.fake.requests());

    rig.app.shutdown().await;
}

on_both_backends!(kill_mid_stream, terminate_mid_stream);
