//! Shared test harness: fresh databases (SQLite file, Postgres database per
//! test), a real HTTP server on 127.0.0.1:0, a real WebSocket client, and a
//! fake `SessionControl` that writes to the real store.

#![allow(dead_code)]

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::{FutureExt, SinkExt, StreamExt};
use serde_json::{Value, json};
use tarsy_api::{
    AlertAccepted, Api, ApiConfig, CancelError, CancelOutcome, ChatAccepted, ChatError,
    ChatSubmission, NewAlert, ScoreAccepted, ScoreError, SessionControl, SubmitError,
};
use tarsy_config::{Config, Defaults, Named, Origin, chat_enabled};
use tarsy_core::{ExecutionStatus, NoToolCatalog, SessionStatus};
use tarsy_events::{EventHub, StorePublisher};
use tarsy_store::testing::{TempSqlite, TestDatabase};
use tarsy_store::{ConnectOptions, NewSession, NewStage, SessionOutcome, Store};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

// ------------------------------------------------------------ databases

/// Runs `test` against a new SQLite file database, then deletes it.
pub async fn with_sqlite<F, Fut>(test: F)
where
    F: FnOnce(Store) -> Fut,
    Fut: Future<Output = ()>,
{
    // A panicking test drops `db` while unwinding, which removes the file.
    let db = TempSqlite::new("tarsy_api_test");
    let store = Store::connect_with(
        &db.url(),
        ConnectOptions {
            max_connections: 4,
            ..ConnectOptions::default()
        },
    )
    .await
    .expect("open SQLite test database");
    test(store.clone()).await;
    store.close().await;
}

/// Runs `test` with the URL of a new, migrated Postgres database made for
/// it, then drops the database. Fails (never skips) when Postgres is down.
pub async fn with_postgres_url<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let db = TestDatabase::create("tarsy_api_test")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Migrate once, up front, so that several stores can share the database.
    Store::connect(db.url())
        .await
        .expect("migrate the test database")
        .close()
        .await;
    // A panicking test drops `db` while unwinding, which drops the database.
    test(db.url().to_string()).await;
    db.drop_database().await.unwrap_or_else(|e| panic!("{e}"));
}

/// Opens a store on an already migrated Postgres database.
pub async fn open_postgres(url: &str) -> Store {
    Store::connect_with(
        url,
        ConnectOptions {
            max_connections: 6,
            run_migrations: false,
            ..ConnectOptions::default()
        },
    )
    .await
    .expect("connect to the test database")
}

/// Runs `test` against a new Postgres database.
pub async fn with_postgres<F, Fut>(test: F)
where
    F: FnOnce(Store) -> Fut,
    Fut: Future<Output = ()>,
{
    with_postgres_url(|url| async move {
        let store = open_postgres(&url).await;
        let outcome = AssertUnwindSafe(test(store.clone())).catch_unwind().await;
        store.close().await;
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    })
    .await
}

/// Declares each `async fn name(store: Store)` as `name::sqlite` and `name::postgres`.
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

// ------------------------------------------------------------ fake control

/// A `SessionControl` for tests that writes straight to the store. The real
/// implementations are the local-mode driver (in process) and the operator
/// (cluster mode, through `Alert` resources); this one only creates the
/// records they would, so the API can be tested on its own. Like them, it
/// checks alerts with the one rule set (`Config::check_alert`).
pub struct FakeControl {
    store: Store,
    publisher: Arc<dyn tarsy_core::EventPublisher>,
    /// Chains `k8s-chain` (PodCrashLooping), `latency-chain` (HighLatency),
    /// `quiet-chain` (NoChat, chat disabled); MCP servers `kubernetes` and
    /// `prometheus` besides the built-in ones.
    pub config: Config,
}

impl FakeControl {
    pub fn new(store: Store, publisher: Arc<dyn tarsy_core::EventPublisher>) -> Self {
        let mut config = Config::builtin(Defaults::default());
        for (name, alert_type, chat) in [
            ("k8s-chain", "PodCrashLooping", true),
            ("latency-chain", "HighLatency", true),
            ("quiet-chain", "NoChat", false),
        ] {
            let spec = serde_json::from_value(json!({
                "alertTypes": [alert_type],
                "stages": [{"name": "investigate", "agent": "KubernetesAgent"}],
                "chat": {"enabled": chat},
            }))
            .expect("a chain spec");
            config.insert_chain(Named::new(name, spec, Origin::Builtin));
        }
        for name in ["kubernetes", "prometheus"] {
            let spec =
                serde_json::from_value(json!({"url": format!("https://{name}.example/mcp")}))
                    .expect("an MCP server spec");
            config.insert_mcp_server(Named::new(name, spec, Origin::Builtin));
        }
        Self {
            store,
            publisher,
            config,
        }
    }
}

#[async_trait]
impl SessionControl for FakeControl {
    async fn submit_alert(&self, alert: NewAlert) -> Result<AlertAccepted, SubmitError> {
        let chain_id = self
            .config
            .check_alert(&alert, &NoToolCatalog)?
            .name
            .clone();
        let id = uuid::Uuid::new_v4().to_string();
        self.store
            .create_session(NewSession {
                id: id.clone(),
                alert_data: alert.data,
                alert_type: alert.alert_type,
                chain_id: chain_id.clone(),
                author: Some(alert.author),
                runbook_url: alert.runbook_url,
                mcp_selection: alert
                    .mcp_selection
                    .map(|s| serde_json::to_value(s).expect("selection serialises")),
                memory_scope: None,
            })
            .await
            .map_err(|e| SubmitError::Internal(e.to_string()))?;
        Ok(AlertAccepted {
            session_id: id,
            chain_id,
            status: SessionStatus::Pending,
        })
    }

    async fn cancel(&self, session_id: &str) -> Result<CancelOutcome, CancelError> {
        let session = self.store.get_session(session_id).await.map_err(|e| {
            if e.is_not_found() {
                CancelError::NotFound(session_id.to_string())
            } else {
                CancelError::Internal(e.to_string())
            }
        })?;
        if !session.status.is_terminal() {
            self.store
                .update_session_status(session_id, SessionStatus::Cancelling)
                .await
                .map_err(|e| CancelError::Internal(e.to_string()))?;
            return Ok(CancelOutcome::Session {
                status: SessionStatus::Cancelling,
            });
        }
        let internal = |e: tarsy_store::StoreError| CancelError::Internal(e.to_string());
        if let Some(chat) = self
            .store
            .chat_for_session(session_id)
            .await
            .map_err(internal)?
            && let Some(stage) = self
                .store
                .active_stage_for_chat(&chat.id)
                .await
                .map_err(internal)?
        {
            self.store
                .update_stage_status(&stage.id, ExecutionStatus::Cancelled, Some("cancelled"))
                .await
                .map_err(internal)?;
            return Ok(CancelOutcome::Chat {
                chat_id: chat.id,
                stage_id: stage.id,
            });
        }
        Err(CancelError::NothingToCancel {
            status: session.status,
        })
    }

    async fn submit_chat_message(
        &self,
        submission: ChatSubmission,
    ) -> Result<ChatAccepted, ChatError> {
        let internal = |e: tarsy_store::StoreError| ChatError::Internal(e.to_string());
        let session = self
            .store
            .get_session(&submission.session_id)
            .await
            .map_err(internal)?;
        if self
            .config
            .chain(&session.chain_id)
            .is_some_and(|c| !chat_enabled(&c.spec))
        {
            return Err(ChatError::Disabled(session.chain_id));
        }
        let chat = self
            .store
            .get_or_create_chat(&session.id, Some(&submission.author))
            .await
            .map_err(internal)?;
        let message = self
            .store
            .create_chat_user_message(
                &chat.record.id,
                &submission.content,
                Some(&submission.author),
            )
            .await
            .map_err(internal)?;
        if self
            .store
            .active_stage_for_chat(&chat.record.id)
            .await
            .map_err(internal)?
            .is_some()
        {
            // As in `tarsy_exec::chat`: a refused question leaves no orphan
            // message behind.
            self.store
                .delete_chat_user_message(&message.id)
                .await
                .map_err(internal)?;
            return Err(ChatError::Busy {
                chat_id: chat.record.id,
            });
        }
        let index = self
            .store
            .max_stage_index(&session.id)
            .await
            .map_err(internal)?
            .map_or(0, |i| i + 1);
        let stage = self
            .store
            .create_stage(NewStage {
                id: None,
                session_id: session.id.clone(),
                stage_name: "Chat Response".into(),
                kind: tarsy_core::StageKind::Chat,
                stage_index: index,
                expected_agent_count: 1,
                parallel_type: None,
                success_policy: None,
                chat_id: Some(chat.record.id.clone()),
                chat_user_message_id: Some(message.id.clone()),
            })
            .await
            .map_err(internal)?;
        let accepted = ChatAccepted {
            chat_id: chat.record.id,
            message_id: message.id,
            stage_id: stage.id,
            chat_created: chat.created,
        };
        tarsy_api::publish_chat_accepted(
            self.publisher.as_ref(),
            &submission,
            &accepted,
            submission.content.trim(),
        )
        .await;
        Ok(accepted)
    }

    /// A judge that never ends: the attempt stays in progress, as while a
    /// real judge works.
    async fn rescore(&self, session_id: &str) -> Result<ScoreAccepted, ScoreError> {
        let session = self.store.get_session(session_id).await.map_err(|e| {
            if e.is_not_found() {
                ScoreError::NotFound(session_id.to_string())
            } else {
                ScoreError::Internal(e.to_string())
            }
        })?;
        if !session.status.is_terminal() {
            return Err(ScoreError::NotFinished {
                status: session.status,
            });
        }
        match self.store.start_score_attempt(session_id, None, None).await {
            Ok(_) => Ok(ScoreAccepted {
                session_id: session_id.to_string(),
            }),
            Err(tarsy_store::StoreError::Conflict { .. }) => Err(ScoreError::Busy {
                session_id: session_id.to_string(),
            }),
            Err(e) => Err(ScoreError::Internal(e.to_string())),
        }
    }
}

// ------------------------------------------------------------ server

/// One API instance served on 127.0.0.1:0.
pub struct TestApp {
    pub base: String,
    pub ws_url: String,
    pub store: Store,
    pub hub: EventHub,
    pub publisher: Arc<StorePublisher>,
    pub http: reqwest::Client,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl TestApp {
    /// Serves an API on `store` with the fake control.
    pub async fn start(store: Store) -> Self {
        Self::start_with(store, ApiConfig::default(), |api| api).await
    }

    /// Serves an API with explicit settings and extra wiring.
    pub async fn start_with(
        store: Store,
        config: ApiConfig,
        wire: impl FnOnce(Api) -> Api,
    ) -> Self {
        let hub = EventHub::start(store.clone());
        let control = Arc::new(FakeControl::new(store.clone(), hub.publisher()));
        let app = wire(Api::new(hub.clone(), control, config)).router();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            base: format!("http://{addr}"),
            ws_url: format!("ws://{addr}/api/v1/ws"),
            publisher: hub.publisher(),
            hub,
            store,
            http: reqwest::Client::new(),
            server,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(self.url(path)).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_raw(path, body.to_string()).await
    }

    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let r = self
            .http
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Declares a body of `length` bytes but sends none of it, and reads the
    /// answer: a body over a limit is refused on its declared length, and a
    /// client still writing it could see a broken pipe instead of the 413.
    pub async fn declare_huge_body(&self, method: &str, path: &str, length: usize) -> (u16, Value) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.base.trim_start_matches("http://");
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {length}\r\nConnection: close\r\n\r\n"
        );
        tcp.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            tcp.read_to_end(&mut answer),
        )
        .await
        .expect("no answer within 10 s")
        .unwrap();
        let answer = String::from_utf8(answer).unwrap();
        let status: u16 = answer[9..12].parse().unwrap();
        let body = answer.split_once("\r\n\r\n").unwrap().1;
        (status, serde_json::from_str(body).unwrap())
    }

    /// Submits a PodCrashLooping alert; returns the session id.
    pub async fn submit(&self) -> String {
        let (status, body) = self
            .post_json(
                "/api/v1/alerts",
                &json!({"alert_type": "PodCrashLooping", "data": {"pod": "api-7"}}),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        body["session_id"].as_str().unwrap().to_string()
    }
}

/// Marks a session completed, as an investigation would.
pub async fn complete(store: &Store, session_id: &str) {
    store
        .finish_session(
            session_id,
            SessionOutcome {
                status: SessionStatus::Completed,
                final_analysis: Some("the pod ran out of memory".into()),
                executive_summary: Some("OOM".into()),
                executive_summary_error: None,
                error_message: None,
                end_reason: None,
            },
        )
        .await
        .unwrap();
}

// ------------------------------------------------------------ WebSocket client

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Connects and reads the welcome message.
pub async fn ws_connect(url: &str) -> Ws {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let hello = ws_next(&mut ws).await;
    assert_eq!(hello["type"], "connection.established", "{hello}");
    ws
}

pub async fn ws_send(ws: &mut Ws, message: Value) {
    ws.send(Message::Text(message.to_string().into()))
        .await
        .unwrap();
}

/// The next JSON message (fails after 10 s).
pub async fn ws_next(ws: &mut Ws) -> Value {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("no WebSocket message within 10 s")
            .expect("WebSocket closed")
            .expect("WebSocket error");
        if let Message::Text(text) = frame {
            return serde_json::from_str(&text).unwrap();
        }
    }
}

/// Asserts that nothing arrives for `ms` milliseconds.
pub async fn ws_quiet(ws: &mut Ws, ms: u64) {
    if let Ok(Some(Ok(Message::Text(text)))) =
        tokio::time::timeout(Duration::from_millis(ms), ws.next()).await
    {
        panic!("unexpected WebSocket message: {text}");
    }
}

/// Subscribes and returns the confirmation.
pub async fn ws_subscribe(ws: &mut Ws, channel: &str) {
    ws_send(ws, json!({"action": "subscribe", "channel": channel})).await;
    let confirmed = ws_next(ws).await;
    assert_eq!(confirmed["type"], "subscription.confirmed", "{confirmed}");
    assert_eq!(confirmed["channel"], channel);
}
