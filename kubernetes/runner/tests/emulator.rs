//! The runner end to end: a real Kubernetes API (the project's emulator in
//! `e2e/kube`), real Postgres, the scripted LLM service over gRPC and a real
//! MCP server over streamable HTTP.
//!
//! Needs the emulator's Python: run `e2e/kube/install.sh` (it prints
//! `TARSY_KUBE_PYTHON`; the default venv location is also tried). Without it
//! these tests FAIL with that instruction. Postgres: `TARSY_TEST_DATABASE_URL`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tarsy_core::{ExecutionKind, ExecutionStatus, IterationStrategy, TimelineEventType};
use tarsy_crds::{
    AgentExecution, AgentExecutionSpec, Backend, ExecutionPhase, LLMProvider, MAX_RECENT_TIMELINE,
    MCPServer, ResolvedConfigSpec, StageRef,
};
use tarsy_kube_harness::{Emulator, EmulatorOptions};
use tarsy_runner::{RunnerOptions, run};
use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer, ScriptedResponse};
use tarsy_store::testing::TestDatabase;
use tarsy_store::{NewAgentExecution, NewSession, NewStage, Store};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";

/// A fresh, migrated Postgres database, dropped with the returned handle.
async fn fresh_database() -> (TestDatabase, Store) {
    let db = TestDatabase::create("tarsy_runner")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let store = Store::connect(db.url()).await.unwrap();
    (db, store)
}

struct Setup {
    _emu: Emulator,
    _dir: PathBuf,
    client: Client,
    store: Store,
    db_url: String,
    _db: TestDatabase,
    llm: ScriptedLlmServer,
    mcp: tarsy_test_mcp_server::HttpServer,
    execution_id: String,
}

/// Everything a runner needs: objects in the API, session rows in Postgres.
async fn setup(name: &str, script: ScriptedLlm) -> Setup {
    let dir = std::env::temp_dir().join(format!("tarsy-runner-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let emu = Emulator::start(EmulatorOptions::new(&dir)).unwrap_or_else(|e| panic!("{e}"));
    let client = emu.client().await.unwrap_or_else(|e| panic!("{e}"));
    let (db, store) = fresh_database().await;
    let db_url = db.url().to_string();
    let llm = ScriptedLlmServer::start(script).await.unwrap();
    let mcp = tarsy_test_mcp_server::spawn_http("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();

    let session_id = uuid::Uuid::new_v4().to_string();
    store
        .create_session(NewSession {
            id: session_id.clone(),
            alert_data: "pod web-1 restarts".into(),
            alert_type: "PodCrashLooping".into(),
            chain_id: "crash".into(),
            author: None,
            runbook_url: None,
            mcp_selection: None,
            memory_scope: None,
        })
        .await
        .unwrap();
    let stage_id = format!("{session_id}-s0");
    store
        .create_stage(NewStage {
            id: Some(stage_id.clone()),
            session_id: session_id.clone(),
            stage_name: "investigate".into(),
            kind: tarsy_core::StageKind::Investigation,
            stage_index: 0,
            expected_agent_count: 1,
            parallel_type: None,
            success_policy: None,
            chat_id: None,
            chat_user_message_id: None,
        })
        .await
        .unwrap();
    let execution_id = format!("{stage_id}-e1");
    store
        .create_agent_execution(NewAgentExecution {
            id: Some(execution_id.clone()),
            stage_id: stage_id.clone(),
            session_id: session_id.clone(),
            agent_name: "Alpha".into(),
            agent_index: 1,
            kind: ExecutionKind::Investigation,
            iteration_strategy: IterationStrategy::Langchain,
            llm_provider: Some("test-llm".into()),
        })
        .await
        .unwrap();

    let providers: Api<LLMProvider> = Api::namespaced(client.clone(), NS);
    let provider: LLMProvider = serde_json::from_value(serde_json::json!({
        "apiVersion": "tarsy.dev/v1alpha1", "kind": "LLMProvider",
        "metadata": {"name": "test-llm"},
        "spec": {"type": "google", "model": "test-model"},
    }))
    .unwrap();
    providers
        .create(&PostParams::default(), &provider)
        .await
        .unwrap();
    let servers: Api<MCPServer> = Api::namespaced(client.clone(), NS);
    let server: MCPServer = serde_json::from_value(serde_json::json!({
        "apiVersion": "tarsy.dev/v1alpha1", "kind": "MCPServer",
        "metadata": {"name": "testmcp"},
        // The pod's endpoint list overrides this address (see RunnerOptions).
        "spec": {"url": "http://127.0.0.1:1/mcp", "instructions": "Test tools."},
    }))
    .unwrap();
    servers
        .create(&PostParams::default(), &server)
        .await
        .unwrap();

    let ae = AgentExecution::new(
        name,
        AgentExecutionSpec {
            session_id: session_id.clone(),
            alert_name: "a1".into(),
            chain: "crash".into(),
            stage: StageRef {
                index: 0,
                name: "investigate".into(),
                id: Some(stage_id),
            },
            agent_name: "Alpha".into(),
            display_name: "Alpha".into(),
            agent_index: 1,
            kind: tarsy_crds::ExecutionKind::Investigation,
            resolved: ResolvedConfigSpec {
                iteration_strategy: tarsy_crds::IterationStrategy::Langchain,
                backend: Backend::Langchain,
                llm_provider: "test-llm".into(),
                max_iterations: 5,
                iteration_timeout: "30s".into(),
                mcp_servers: vec!["testmcp".into()],
                tool_filter: Default::default(),
                custom_instructions: "Investigate.".into(),
                native_tools_override: None,
                fail_on_unavailable_server: false,
                budget: None,
            },
            chat: None,
            deadline: None,
        },
    );
    let api: Api<AgentExecution> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &ae).await.unwrap();
    Setup {
        _emu: emu,
        _dir: dir,
        client,
        store,
        db_url,
        _db: db,
        llm,
        mcp,
        execution_id,
    }
}

fn options(s: &Setup, name: &str) -> RunnerOptions {
    let mut o = RunnerOptions::new(NS, name, &s.db_url, s.llm.endpoint());
    o.mcp_endpoints.insert("testmcp".into(), s.mcp.url());
    o.database_retry = Duration::from_secs(5);
    o.status_interval = Duration::from_millis(100);
    o
}

#[tokio::test]
async fn runs_an_execution_to_completed_with_status_and_rows() {
    let script = ScriptedLlm::new();
    script
        .push(
            ScriptedResponse::default()
                .then_thinking("Checking the pod with the echo tool.")
                .then_tool_call("c1", "testmcp__echo", r#"{"text":"evidence: OOMKilled"}"#)
                .then_usage(100, 20),
        )
        .push(
            ScriptedResponse::text("Final: the pod is OOMKilled; raise its memory limit.")
                .then_usage(150, 30),
        );
    let s = setup("a1-s0-alpha", script).await;
    let report = run(
        s.client.clone(),
        options(&s, "a1-s0-alpha"),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(report.phase, ExecutionPhase::Completed);
    let first = report.first_llm_request.expect("an LLM request was made");
    println!(
        "runner start -> first LLM request: {:.1} ms (MCP init {:.1} ms excluded)",
        first.as_secs_f64() * 1000.0,
        report.mcp_init.as_secs_f64() * 1000.0
    );

    let api: Api<AgentExecution> = Api::namespaced(s.client.clone(), NS);
    let status = api.get("a1-s0-alpha").await.unwrap().status.unwrap();
    assert_eq!(status.phase, Some(ExecutionPhase::Completed));
    assert_eq!(
        status.execution_id.as_deref(),
        Some(s.execution_id.as_str())
    );
    assert!(status.iteration.unwrap_or(0) >= 2, "{status:?}");
    let tokens = status.tokens.clone().expect("tokens reported");
    assert!(tokens.input >= 250 && tokens.output >= 50, "{tokens:?}");
    assert!(!status.recent_timeline.is_empty());
    assert!(status.recent_timeline.len() <= MAX_RECENT_TIMELINE);
    assert!(
        status
            .recent_timeline
            .iter()
            .any(|t| t.event_type == "final_analysis"),
        "{:?}",
        status.recent_timeline
    );
    assert!(
        status
            .final_analysis
            .as_deref()
            .unwrap_or_default()
            .contains("OOMKilled"),
        "{status:?}"
    );
    assert!(status.error.is_none());
    assert!(status.started_at.is_some() && status.completed_at.is_some());

    let row = s.store.get_agent_execution(&s.execution_id).await.unwrap();
    assert_eq!(row.status, ExecutionStatus::Completed);
    let events = s.store.execution_timeline(&s.execution_id).await.unwrap();
    assert!(events.iter().any(
        |e| e.event_type == TimelineEventType::FinalAnalysis && e.content.contains("OOMKilled")
    ));
    // The tool really ran against the MCP server.
    assert!(
        events
            .iter()
            .any(|e| e.content.contains("evidence: OOMKilled")
                && e.event_type != TimelineEventType::LlmThinking),
        "{events:#?}"
    );
    assert_eq!(s.llm.script().request_count(), 2);
    s.mcp.stop().await;
}

/// Runs execution `name` (its LLM call hangs) until it is Active, asks
/// for a stop with the operator's annotation `stop` (none: the pod is just
/// going away), cancels it as SIGTERM would, and returns what `run` gave.
async fn stop_while_active(
    s: &Setup,
    name: &str,
    stop: Option<&str>,
) -> Result<tarsy_runner::RunReport, tarsy_runner::RunnerError> {
    let cancel = CancellationToken::new();
    let task = tokio::spawn(run(s.client.clone(), options(s, name), cancel.clone()));
    let api: Api<AgentExecution> = Api::namespaced(s.client.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let phase = api.get(name).await.unwrap().status.and_then(|st| st.phase);
        if phase == Some(ExecutionPhase::Active) && s.llm.script().request_count() > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "never became Active: {phase:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if let Some(stop) = stop {
        let patch = serde_json::json!({
            "metadata": {"annotations": {tarsy_crds::STOP_ANNOTATION: stop}}
        });
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("the runner stops promptly")
        .unwrap()
}

#[tokio::test]
async fn cancellation_records_cancelled_and_returns_ok() {
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::hang());
    let s = setup("a1-s0-hang", script).await;
    let report = stop_while_active(&s, "a1-s0-hang", Some("cancelled"))
        .await
        .unwrap();
    assert_eq!(report.phase, ExecutionPhase::Cancelled);
    let api: Api<AgentExecution> = Api::namespaced(s.client.clone(), NS);
    let status = api.get("a1-s0-hang").await.unwrap().status.unwrap();
    assert_eq!(status.phase, Some(ExecutionPhase::Cancelled));
    let row = s.store.get_agent_execution(&s.execution_id).await.unwrap();
    assert_eq!(row.status, ExecutionStatus::Cancelled);
    s.mcp.stop().await;
}

/// SIGTERM without a stop request (eviction, drain): nothing terminal is
/// recorded, the execution stays Active for the replacement pod.
#[tokio::test]
async fn a_stop_nobody_asked_for_leaves_the_execution_to_a_replacement() {
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::hang());
    let s = setup("a1-s0-evicted", script).await;
    let err = stop_while_active(&s, "a1-s0-evicted", None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, tarsy_runner::RunnerError::Interrupted),
        "{err}"
    );
    let api: Api<AgentExecution> = Api::namespaced(s.client.clone(), NS);
    let status = api.get("a1-s0-evicted").await.unwrap().status.unwrap();
    assert_eq!(status.phase, Some(ExecutionPhase::Active));
    let row = s.store.get_agent_execution(&s.execution_id).await.unwrap();
    assert!(!row.status.is_terminal(), "{row:?}");
    s.mcp.stop().await;
}

#[tokio::test]
async fn unreachable_postgres_fails_clearly_after_bounded_retries() {
    let s = setup("a1-s0-nodb", ScriptedLlm::new()).await;
    let mut o = options(&s, "a1-s0-nodb");
    // Nothing listens on port 1.
    o.database_url = "postgres://tarsy:tarsy@127.0.0.1:1/tarsy".into();
    o.database_retry = Duration::from_secs(2);
    let started = Instant::now();
    let err = run(s.client.clone(), o, CancellationToken::new())
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(err.to_string().contains("Postgres unreachable"), "{err}");
    let api: Api<AgentExecution> = Api::namespaced(s.client.clone(), NS);
    let status = api.get("a1-s0-nodb").await.unwrap().status.unwrap();
    assert_eq!(status.phase, Some(ExecutionPhase::Failed));
    assert!(status.error.unwrap().contains("Postgres"));
    s.mcp.stop().await;
}
