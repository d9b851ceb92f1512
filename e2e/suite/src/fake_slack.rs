//! A local fake of the Slack Web API's `chat.postMessage`: it records every
//! message (with the bearer token it came with), answers with increasing
//! `ts` values, and can answer 429 with `Retry-After` or refuse.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One message the fake received.
#[derive(Debug, Clone)]
pub struct Posted {
    /// The `Authorization` header.
    pub authorization: String,
    /// `channel`.
    pub channel: String,
    /// `text`.
    pub text: String,
    /// `thread_ts`, when it replies in a thread.
    pub thread_ts: Option<String>,
    /// The `ts` it was answered with.
    pub ts: String,
}

/// What the fake answers the next request with, instead of success.
#[derive(Debug, Clone)]
pub enum Trouble {
    /// 429 with `Retry-After: seconds`.
    RateLimited(u64),
    /// `{"ok": false, "error": …}`.
    Refuse(&'static str),
}

#[derive(Default)]
struct Inner {
    posted: Vec<Posted>,
    trouble: VecDeque<Trouble>,
    next: u64,
}

/// The running fake.
pub struct FakeSlack {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeSlack {
    /// Starts on a free port.
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new()
            .route("/api/chat.postMessage", post(post_message))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind the fake Slack");
        let addr = listener.local_addr().expect("its address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, inner, task }
    }

    /// The Web API base URL (`…/api`).
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    /// Answers the next request with `trouble`.
    pub fn push_trouble(&self, trouble: Trouble) {
        self.lock().trouble.push_back(trouble);
    }

    /// Every message received, in order.
    pub fn posted(&self) -> Vec<Posted> {
        self.lock().posted.clone()
    }

    /// Waits until `n` messages were received (at most 20 s).
    pub async fn wait_for(&self, n: usize) -> Vec<Posted> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let posted = self.posted();
            if posted.len() >= n {
                return posted;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the fake Slack got {} messages, not {n}: {posted:?}",
                posted.len()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn post_message(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
    match inner.trouble.pop_front() {
        Some(Trouble::RateLimited(secs)) => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", secs.to_string())],
                Json(json!({"ok": false, "error": "ratelimited"})),
            )
                .into_response();
        }
        Some(Trouble::Refuse(error)) => {
            return Json(json!({"ok": false, "error": error})).into_response();
        }
        None => {}
    }
    inner.next += 1;
    let ts = format!("1700000000.{:06}", inner.next);
    let text = |k: &str| body[k].as_str().map(String::from);
    inner.posted.push(Posted {
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string(),
        channel: text("channel").unwrap_or_default(),
        text: text("text").unwrap_or_default(),
        thread_ts: text("thread_ts"),
        ts: ts.clone(),
    });
    Json(json!({"ok": true, "channel": body["channel"], "ts": ts})).into_response()
}
