//! Test harness: a fresh database per test (SQLite file, or a Postgres
//! database created for the test), the scripted LLM served over real gRPC,
//! the project's test MCP server over real streamable HTTP, and a local app
//! booted in process on them.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use tarsy_api::NewAlert;
use tarsy_config::{Config, DefaultsSpec, build_config, parse_config};
use tarsy_core::{ExecutionStatus, SessionStatus};
use tarsy_local::{DriverSettings, LocalApp, LocalOptions};
use tarsy_mcp::McpTimeouts;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer};
use tarsy_store::testing::{TempSqlite, TestDatabase};
use tarsy_store::{AgentExecution, Session, Stage, Store};

/// Runs `test` with the URL of a new SQLite file database, then deletes it.
pub async fn with_sqlite<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    // A panicking test drops `db` while unwinding, which removes the file.
    let db = TempSqlite::new("tarsy_local_test");
    test(db.url()).await;
}

/// Runs `test` with the URL of a new Postgres database made for it, then
/// drops it. Fails (never skips) when Postgres is unreachable.
pub async fn with_postgres<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let db = TestDatabase::create("tarsy_local_test")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // A panicking test drops `db` while unwinding, which drops the database.
    test(db.url().to_string()).await;
    db.drop_database().await.unwrap_or_else(|e| panic!("{e}"));
}

/// Declares each `async fn name(db_url: String)` as `name::sqlite` and
/// `name::postgres`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    $crate::common::with_sqlite(super::$name).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    $crate::common::with_postgres(super::$name).await
                }
            }
        )*
    };
}

// ------------------------------------------------------------ environment

/// The real peers of a test: scripted LLM over gRPC, test MCP server over
/// streamable HTTP.
pub struct Peers {
    pub llm: ScriptedLlmServer,
    pub mcp: tarsy_test_mcp_server::HttpServer,
}

impl Peers {
    pub async fn start(script: ScriptedLlm) -> Self {
        let llm = ScriptedLlmServer::start(script).await.unwrap();
        let mcp = tarsy_test_mcp_server::spawn_http("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        Self { llm, mcp }
    }

    pub fn script(&self) -> &ScriptedLlm {
        self.llm.script()
    }

    /// Shared manifests: the test MCP server (`testmcp`), a provider of a
    /// real type (sent to the scripted LLM service over gRPC) and agents.
    pub fn base_manifests(&self) -> String {
        format!(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {{name: testmcp}}
spec:
  url: {url}
  instructions: Test tools.
---
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {{name: test-llm}}
spec:
  type: google
  model: test-model
  apiKeyEnv: TEST_KEY
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {{name: alpha}}
spec:
  displayName: Alpha
  mcpServers: [testmcp]
  customInstructions: Investigate.
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {{name: bravo}}
spec:
  displayName: Bravo
  mcpServers: [testmcp]
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {{name: charlie}}
spec:
  displayName: Charlie
  mcpServers: [testmcp]
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {{name: delta}}
spec:
  displayName: Delta
  mcpServers: [testmcp]
"#,
            url = self.mcp.url()
        )
    }
}

/// A configuration from the base manifests plus `extra` (chains).
pub fn config(peers: &Peers, extra: &str) -> Config {
    let text = format!("{}\n---\n{extra}", peers.base_manifests());
    let objects = parse_config("test.yaml", &text, &|_| None).unwrap_or_else(|e| panic!("{e}"));
    build_config(objects, &DefaultsSpec::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Options for a test app: fast timings, the given database.
pub fn options(config: Config, peers: &Peers, db_url: &str) -> LocalOptions {
    let mut o = LocalOptions::new(config, std::env::temp_dir());
    o.database_url = db_url.to_string();
    o.llm_addr = peers.llm.endpoint();
    o.pod_id = "test-pod".into();
    o.max_connections = 4;
    o.settings = DriverSettings {
        poll_interval: Duration::from_millis(200),
        heartbeat_interval: Duration::from_secs(5),
        orphan_timeout: Duration::from_secs(300),
        summary_timeout: Duration::from_secs(20),
        shutdown_grace: Duration::from_secs(10),
        ..DriverSettings::default()
    };
    o.mcp_timeouts = McpTimeouts {
        init: Duration::from_secs(10),
        call: Duration::from_secs(10),
        ..McpTimeouts::default()
    };
    o
}

pub async fn start(config: Config, peers: &Peers, db_url: &str) -> LocalApp {
    LocalApp::start(options(config, peers, db_url))
        .await
        .unwrap_or_else(|e| panic!("local app did not start: {e}"))
}

pub fn alert(alert_type: &str) -> NewAlert {
    NewAlert {
        alert_type: alert_type.into(),
        data: "pod: web-1\nnamespace: shop\nreason: CrashLoopBackOff".into(),
        chain: None,
        runbook_url: None,
        mcp_selection: None,
        author: "tester".into(),
    }
}

pub async fn submit(app: &LocalApp, alert_type: &str) -> String {
    app.control()
        .submit_alert(alert(alert_type))
        .await
        .unwrap()
        .session_id
}

pub async fn finish(app: &LocalApp, id: &str) -> Session {
    app.wait_for_terminal(id, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Investigation stages (chat stages excluded) with their executions.
pub async fn stages(store: &Store, session_id: &str) -> Vec<(Stage, Vec<AgentExecution>)> {
    let mut out = Vec::new();
    for s in store.list_stages(session_id).await.unwrap() {
        let e = store.list_agent_executions(&s.id).await.unwrap();
        out.push((s, e));
    }
    out
}

/// Waits until `check` holds (polling), or panics with `what`.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits until some execution of the session is active.
pub async fn wait_active_execution(store: &Store, session_id: &str) {
    eventually("an active execution", || async {
        store
            .list_session_executions(session_id)
            .await
            .map(|l| l.iter().any(|e| e.status == ExecutionStatus::Active))
            .unwrap_or(false)
    })
    .await;
}

pub async fn wait_status(store: &Store, session_id: &str, status: SessionStatus) {
    eventually(&format!("session {status}"), || async {
        store
            .get_session(session_id)
            .await
            .map(|s| s.status == status)
            .unwrap_or(false)
    })
    .await;
}
