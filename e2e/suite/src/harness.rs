//! Local mode booted in process for one test: a fresh database (SQLite file
//! or a Postgres database made for the test), the scripted LLM served over
//! real gRPC, the project's test MCP server over real streamable HTTP, and
//! the REST/WebSocket API on a free port, reached with real HTTP and
//! WebSocket clients.
//!
//! Helpers panic with a message on failure: they only run inside tests.

use std::future::Future;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tarsy_config::{Config, DefaultsSpec, build_config, parse_config};
use tarsy_local::{DriverSettings, LocalApp, LocalOptions};
use tarsy_mcp::McpTimeouts;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer};
use tarsy_store::Store;
use tarsy_store::testing::{TempSqlite, TestDatabase};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Runs `test` with the URL of a new SQLite file database, then deletes it.
pub async fn with_sqlite<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    // A panicking test drops `db` while unwinding, which removes the file.
    let db = TempSqlite::new("tarsy_e2e");
    test(db.url()).await;
    assert_no_open_records(&db.url()).await;
}

/// Runs `test` with the URL of a new Postgres database made for it, then
/// drops it. Fails (never skips) when Postgres is unreachable.
pub async fn with_postgres<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let db = TestDatabase::create("tarsy_e2e")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // A panicking test drops `db` while unwinding, which drops the database.
    test(db.url().to_string()).await;
    assert_no_open_records(db.url()).await;
    db.drop_database().await.unwrap_or_else(|e| panic!("{e}"));
}

/// The invariant every test ends with: no ended session shows anything
/// still running (a `streaming` event, a pending or active execution or
/// stage) — a user would see a finished investigation still "working".
/// The backend wrappers check it after each test; tests with a database of
/// their own call it themselves.
pub async fn assert_no_open_records(db_url: &str) {
    let store = Store::connect(db_url)
        .await
        .unwrap_or_else(|e| panic!("the test's database: {e}"));
    let open = store
        .open_records_in_terminal_sessions()
        .await
        .unwrap_or_else(|e| panic!("reading open records: {e}"));
    store.close().await;
    assert!(
        open.is_empty(),
        "ended sessions left records open:\n{}",
        open.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Declares each `async fn name(db_url: String)` as the tests
/// `name::sqlite` and `name::postgres`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    $crate::harness::with_sqlite(super::$name).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    $crate::harness::with_postgres(super::$name).await
                }
            }
        )*
    };
}

/// Declares each `async fn name(db_url: String)` as the test
/// `name::postgres`.
#[macro_export]
macro_rules! on_postgres {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    $crate::harness::with_postgres(super::$name).await
                }
            }
        )*
    };
}

/// The real peers of a test: the scripted LLM over gRPC and the test MCP
/// server over streamable HTTP.
pub struct Peers {
    /// Scripted `LLMService` server.
    pub llm: ScriptedLlmServer,
    /// Test MCP server.
    pub mcp: tarsy_test_mcp_server::HttpServer,
}

impl Peers {
    /// Starts both on free ports.
    pub async fn start(script: ScriptedLlm) -> Self {
        let llm = ScriptedLlmServer::start(script)
            .await
            .unwrap_or_else(|e| panic!("scripted LLM server: {e}"));
        let mcp = tarsy_test_mcp_server::spawn_http(([127, 0, 0, 1], 0).into())
            .await
            .unwrap_or_else(|e| panic!("test MCP server: {e}"));
        Self { llm, mcp }
    }

    /// The script (and the record of requests).
    pub fn script(&self) -> &ScriptedLlm {
        self.llm.script()
    }

    /// A configuration: `testdata/base.yaml` (MCP server `testmcp` at this
    /// test's URL, an LLM provider of a real type served by the scripted
    /// LLM, agents) plus `extra` (chains).
    pub fn config(&self, extra: &str) -> Config {
        config_for(&self.mcp.url(), extra)
    }

    /// Local-mode options for a test: fast timings, the API on a free port,
    /// the given database.
    pub fn options(&self, config: Config, db_url: &str) -> LocalOptions {
        local_options(config, db_url, &self.llm.endpoint())
    }
}

/// `testdata/base.yaml` with the test MCP server at `mcp_url`, plus `extra`
/// (chains, more agents).
pub fn config_for(mcp_url: &str, extra: &str) -> Config {
    let base = std::fs::read_to_string(testdata("base.yaml"))
        .unwrap_or_else(|e| panic!("testdata/base.yaml: {e}"))
        .replace("${MCP_URL}", mcp_url);
    let text = format!("{base}\n---\n{extra}");
    let objects = parse_config("e2e.yaml", &text, &|_| None).unwrap_or_else(|e| panic!("{e}"));
    build_config(objects, &DefaultsSpec::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Local-mode options for a test: fast timings, the API on a free port, the
/// given database, the LLM service at `llm_addr`.
pub fn local_options(config: Config, db_url: &str, llm_addr: &str) -> LocalOptions {
    let mut o = LocalOptions::new(config, std::env::temp_dir());
    o.database_url = db_url.to_string();
    o.llm_addr = llm_addr.to_string();
    o.pod_id = "e2e-pod".into();
    o.max_connections = 4;
    o.listen = Some(([127, 0, 0, 1], 0).into());
    o.settings = DriverSettings {
        poll_interval: Duration::from_millis(100),
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

/// A file under `testdata/`.
pub fn testdata(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(rel)
}

/// A running local app and the HTTP client that talks to its API.
pub struct TestApp {
    /// The app.
    pub app: LocalApp,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Real HTTP client.
    pub http: reqwest::Client,
}

impl TestApp {
    /// Boots local mode with `options` (which must ask for the API).
    pub async fn start(options: LocalOptions) -> Self {
        let app = LocalApp::start(options)
            .await
            .unwrap_or_else(|e| panic!("local app did not start: {e}"));
        let addr = app.api_addr().expect("the options ask for the API");
        Self {
            app,
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
        }
    }

    /// `GET path` → (status, JSON body).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// `GET path`, which must answer 200.
    pub async fn get_ok(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// `POST path` with a JSON body → (status, JSON body).
    pub async fn post(&self, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.http.post(format!("{}{path}", self.base));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let r = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Submits an alert over REST; returns the session id.
    pub async fn submit(&self, alert_type: &str, data: &str) -> String {
        let (status, body) = self
            .post(
                "/api/v1/alerts",
                Some(json!({"alert_type": alert_type, "data": data})),
            )
            .await;
        assert_eq!(status, 202, "alert submission: {body}");
        body["session_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no session_id in {body}"))
            .to_string()
    }

    /// Asks a chat question over REST; returns the 202 body.
    pub async fn chat(&self, session_id: &str, content: &str) -> Value {
        let (status, body) = self
            .post(
                &format!("/api/v1/sessions/{session_id}/chat/messages"),
                Some(json!({"content": content})),
            )
            .await;
        assert_eq!(status, 202, "chat message: {body}");
        body
    }

    /// The session detail over REST.
    pub async fn session(&self, id: &str) -> Value {
        self.get_ok(&format!("/api/v1/sessions/{id}")).await
    }

    /// Polls the session over REST until `check` holds on its detail.
    pub async fn wait_session(
        &self,
        id: &str,
        what: &str,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let s = self.session(id).await;
            if check(&s) {
                return s;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}: {s}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits (REST) until the session is terminal and no longer driven;
    /// it must then show nothing still running (see
    /// [`assert_no_open_records`]).
    pub async fn finish(&self, id: &str) -> Value {
        self.app
            .wait_for_terminal(id, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let open: Vec<String> = self
            .app
            .store()
            .open_records_in_terminal_sessions()
            .await
            .unwrap_or_else(|e| panic!("reading open records: {e}"))
            .iter()
            .filter(|r| r.session_id == id)
            .map(ToString::to_string)
            .collect();
        assert!(
            open.is_empty(),
            "the ended session left records open:\n{}",
            open.join("\n")
        );
        self.session(id).await
    }

    /// Waits until the chat answer running in `stage_id` ends.
    pub async fn finish_chat(&self, session_id: &str, stage_id: &str) -> Value {
        self.wait_session(session_id, "the chat answer", |s| {
            s["stages"].as_array().is_some_and(|stages| {
                stages.iter().any(|st| {
                    st["id"] == stage_id
                        && !matches!(st["status"].as_str(), Some("pending" | "active"))
                })
            }) && s["chat"]["active_stage_id"].is_null()
        })
        .await
    }

    /// A WebSocket client on this app's API.
    pub async fn ws(&self) -> WsClient {
        WsClient::connect(&self.base).await
    }

    /// Stops the app.
    pub async fn shutdown(self) {
        self.app.shutdown().await;
    }
}

/// A real WebSocket client on `/api/v1/ws`.
pub struct WsClient {
    stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// Every event received (frames that are not protocol answers), in
    /// arrival order.
    pub events: Vec<Value>,
    /// When each of `events` arrived.
    pub arrivals: Vec<tokio::time::Instant>,
}

impl WsClient {
    /// Connects to the API at `base` (`http://…`) and reads the greeting.
    pub async fn connect(base: &str) -> Self {
        let url = format!("{}/api/v1/ws", base.replacen("http", "ws", 1));
        let (stream, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .unwrap_or_else(|e| panic!("WebSocket {url}: {e}"));
        let mut c = Self {
            stream,
            events: Vec::new(),
            arrivals: Vec::new(),
        };
        let hello = c.next_frame(Duration::from_secs(10)).await;
        assert_eq!(hello["type"], "connection.established", "{hello}");
        c
    }

    async fn next_frame(&mut self, timeout: Duration) -> Value {
        loop {
            let msg = tokio::time::timeout(timeout, self.stream.next())
                .await
                .unwrap_or_else(|_| panic!("no WebSocket frame within {timeout:?}"))
                .unwrap_or_else(|| panic!("WebSocket closed"))
                .unwrap_or_else(|e| panic!("WebSocket error: {e}"));
            if let Message::Text(t) = msg {
                return serde_json::from_str(t.as_str())
                    .unwrap_or_else(|e| panic!("frame is not JSON ({e}): {t}"));
            }
        }
    }

    /// Subscribes to `channel` and waits for the confirmation (events that
    /// arrive before it are kept).
    pub async fn subscribe(&mut self, channel: &str) {
        self.send(json!({"action": "subscribe", "channel": channel}))
            .await;
        loop {
            let f = self.next_frame(Duration::from_secs(10)).await;
            if f["type"] == "subscription.confirmed" && f["channel"] == channel {
                return;
            }
            self.keep(f);
        }
    }

    /// Sends one client message.
    pub async fn send(&mut self, msg: Value) {
        self.stream
            .send(Message::text(msg.to_string()))
            .await
            .unwrap_or_else(|e| panic!("WebSocket send: {e}"));
    }

    fn keep(&mut self, f: Value) {
        let t = f["type"].as_str().unwrap_or("");
        if !matches!(
            t,
            "subscription.confirmed" | "unsubscription.confirmed" | "pong"
        ) {
            self.events.push(f);
            self.arrivals.push(tokio::time::Instant::now());
        }
    }

    /// Keeps every event that arrives within `period` (none may be
    /// missed: the assertions of a quiet period read them all).
    pub async fn collect_for(&mut self, period: Duration) {
        let until = tokio::time::Instant::now() + period;
        loop {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return;
            }
            match tokio::time::timeout(left, self.next_frame(left + Duration::from_secs(1))).await {
                Ok(f) => self.keep(f),
                Err(_) => return,
            }
        }
    }

    /// Reads events until one satisfies `stop` (it is kept too); panics
    /// after 60 s.
    pub async fn until(&mut self, what: &str, stop: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            assert!(!left.is_zero(), "WebSocket: timed out waiting for {what}");
            let f = tokio::time::timeout(left, self.next_frame(left))
                .await
                .unwrap_or_else(|_| panic!("WebSocket: timed out waiting for {what}"));
            let done = stop(&f);
            self.keep(f.clone());
            if done {
                return f;
            }
        }
    }
}

/// True for a `session.status` event with a terminal status.
pub fn is_terminal_session_event(e: &Value) -> bool {
    e["type"] == "session.status"
        && matches!(
            e["status"].as_str(),
            Some("completed" | "failed" | "cancelled" | "timed_out")
        )
}
