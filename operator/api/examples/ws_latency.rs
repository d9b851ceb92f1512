//! Publish → WebSocket client latency, in process (SQLite, local mode) and
//! through Postgres NOTIFY/LISTEN.
//!
//! ```text
//! cargo run -p tarsy-api --example ws_latency [--release] [-- ROUNDS]
//! ```
//!
//! Postgres is reached at `TARSY_TEST_DATABASE_URL` (default: the test
//! server of `scripts/postgres.sh`); a scratch database is created and
//! dropped. Each round publishes one event and waits for the client to
//! receive it, so the figures are latencies, not throughput.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tarsy_api::{
    AlertAccepted, Api, ApiConfig, CancelError, CancelOutcome, ChatAccepted, ChatError,
    ChatSubmission, NewAlert, ScoreAccepted, ScoreError, SessionControl, SubmitError,
};
use tarsy_core::stream::timestamp;
use tarsy_core::{EventPublisher, StreamEvent, TimelineEventType};
use tarsy_events::EventHub;
use tarsy_store::Store;
use tokio_tungstenite::tungstenite::Message;

/// The bench only streams events; it never submits anything.
struct NoControl;

#[async_trait]
impl SessionControl for NoControl {
    async fn submit_alert(&self, _: NewAlert) -> Result<AlertAccepted, SubmitError> {
        Err(SubmitError::Unavailable("benchmark".into()))
    }
    async fn cancel(&self, _: &str) -> Result<CancelOutcome, CancelError> {
        Err(CancelError::Internal("benchmark".into()))
    }
    async fn submit_chat_message(&self, _: ChatSubmission) -> Result<ChatAccepted, ChatError> {
        Err(ChatError::Unavailable("benchmark".into()))
    }
    async fn rescore(&self, _: &str) -> Result<ScoreAccepted, ScoreError> {
        Err(ScoreError::Unavailable("benchmark".into()))
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn measure(label: &str, store: Store, rounds: usize) {
    let hub = EventHub::start(store.clone());
    let publisher = hub.publisher();
    let app = Api::new(hub, Arc::new(NoControl), ApiConfig::default()).router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/api/v1/ws"))
        .await
        .expect("connect");
    let next = async |ws: &mut tokio_tungstenite::WebSocketStream<_>| -> Value {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).expect("json"),
                Some(Ok(_)) => continue,
                other => panic!("websocket ended: {other:?}"),
            }
        }
    };
    next(&mut ws).await; // connection.established
    ws.send(Message::Text(
        json!({"action": "subscribe", "channel": "session:bench"})
            .to_string()
            .into(),
    ))
    .await
    .expect("subscribe");
    next(&mut ws).await; // subscription.confirmed

    for (kind, persistent) in [
        ("stream.chunk (transient)", false),
        ("timeline event (persistent)", true),
    ] {
        let mut samples = Vec::with_capacity(rounds);
        for i in 0..rounds + rounds / 10 {
            let event = StreamEvent::StreamChunk {
                event_id: format!("te-{i}"),
                session_id: "bench".into(),
                execution_id: None,
                event_type: TimelineEventType::LlmResponse,
                delta: "token ".into(),
                timestamp: timestamp(),
            };
            let start = Instant::now();
            if persistent {
                publisher
                    .publish("session:bench", &event)
                    .await
                    .expect("publish");
            } else {
                publisher.publish_transient("session:bench", &event).await;
            }
            let got = next(&mut ws).await;
            let elapsed = start.elapsed();
            assert_eq!(got["seq"], i, "events out of order");
            if i >= rounds / 10 {
                samples.push(elapsed); // the first tenth warms up
            }
        }
        samples.sort();
        println!(
            "{label:<28} {kind:<28} n={:<6} p50={:>8.3} ms  p99={:>8.3} ms  max={:>8.3} ms",
            samples.len(),
            percentile(&samples, 0.50).as_secs_f64() * 1e3,
            percentile(&samples, 0.99).as_secs_f64() * 1e3,
            samples.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        );
    }
    let _ = ws.close(None).await;
    server.abort();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);

    let path = std::env::temp_dir().join(format!(
        "tarsy_ws_bench_{}.db",
        uuid::Uuid::new_v4().simple()
    ));
    let store = Store::connect(&format!("sqlite:{}", path.display()))
        .await
        .expect("open SQLite");
    measure("in-process (SQLite)", store.clone(), rounds).await;
    store.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }

    let db = match tarsy_store::testing::TestDatabase::create("tarsy_ws_bench").await {
        Ok(db) => db,
        Err(e) => {
            println!("Postgres NOTIFY: skipped ({e})");
            return;
        }
    };
    let store = Store::connect_with(
        db.url(),
        tarsy_store::ConnectOptions {
            max_connections: 6,
            ..tarsy_store::ConnectOptions::default()
        },
    )
    .await
    .expect("connect and migrate the scratch database");
    measure("Postgres NOTIFY/LISTEN", store.clone(), rounds).await;
    store.close().await;
    let _ = db.drop_database().await;
}
