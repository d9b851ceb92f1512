//! `/api/v1/ws`: protocol, catch-up, overflow, transient events, and
//! cross-replica delivery through Postgres NOTIFY.

use std::time::Duration;

use serde_json::{Value, json};
use tarsy_api::ApiConfig;
use tarsy_core::stream::timestamp;
use tarsy_core::{
    EventPublisher, SessionStatus, StreamEvent, TimelineEventStatus, TimelineEventType,
};
use tarsy_store::{NOTIFY_PAYLOAD_LIMIT, Store};

use crate::common::{
    TestApp, open_postgres, with_postgres, with_postgres_url, ws_connect, ws_next, ws_quiet,
    ws_send, ws_subscribe,
};
use crate::on_both_backends;

/// The `n`-th timeline event of `session` (its `sequence_number` is `n`).
fn created(session: &str, n: usize) -> StreamEvent {
    StreamEvent::TimelineEventCreated {
        event_id: format!("te-{n}"),
        session_id: session.into(),
        stage_id: None,
        execution_id: None,
        sequence_number: n as i64,
        event_type: TimelineEventType::LlmResponse,
        status: TimelineEventStatus::Completed,
        content: format!("event {n}"),
        metadata: json!({}),
        timestamp: timestamp(),
    }
}

fn chunk(session: &str, event_id: &str, delta: &str) -> StreamEvent {
    StreamEvent::StreamChunk {
        event_id: event_id.into(),
        session_id: session.into(),
        execution_id: None,
        event_type: TimelineEventType::LlmResponse,
        delta: delta.into(),
        timestamp: timestamp(),
    }
}

fn session_status(session: &str, status: SessionStatus) -> StreamEvent {
    StreamEvent::SessionStatus {
        session_id: session.into(),
        status,
        timestamp: timestamp(),
    }
}

async fn publish_n(app: &TestApp, session: &str, from: usize, to: usize) -> Vec<i64> {
    let channel = format!("session:{session}");
    let mut ids = Vec::new();
    for n in from..to {
        ids.push(
            app.publisher
                .publish(&channel, &created(session, n))
                .await
                .unwrap(),
        );
    }
    ids
}

async fn protocol_basics(store: Store) {
    let app = TestApp::start(store).await;
    let mut ws = ws_connect(&app.ws_url).await;
    ws_send(&mut ws, json!({"action": "ping"})).await;
    assert_eq!(ws_next(&mut ws).await, json!({"type": "pong"}));
    ws_send(&mut ws, json!({"action": "dance"})).await;
    let err = ws_next(&mut ws).await;
    assert_eq!(err["type"], "error");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("unknown variant `dance`"),
        "{err}"
    );
    {
        use futures::SinkExt;
        ws.send(tokio_tungstenite::tungstenite::Message::Text(
            "not json".into(),
        ))
        .await
        .unwrap();
    }
    assert_eq!(ws_next(&mut ws).await["type"], "error");
    for bad in ["everything", "session:", "session:a b", "session:x;DROP"] {
        ws_send(&mut ws, json!({"action": "subscribe", "channel": bad})).await;
        let err = ws_next(&mut ws).await;
        assert_eq!(err["type"], "error", "{bad}: {err}");
        assert!(
            err["message"].as_str().unwrap().contains("invalid channel"),
            "{err}"
        );
    }
    ws_send(
        &mut ws,
        json!({"action": "catchup", "channel": "sessions", "last_event_id": 0}),
    )
    .await;
    let err = ws_next(&mut ws).await;
    assert!(
        err["message"].as_str().unwrap().contains("subscribe first"),
        "{err}"
    );
    ws_subscribe(&mut ws, "sessions").await;
    ws_send(
        &mut ws,
        json!({"action": "unsubscribe", "channel": "sessions"}),
    )
    .await;
    assert_eq!(
        ws_next(&mut ws).await,
        json!({"type": "unsubscription.confirmed", "channel": "sessions"})
    );
    app.publisher
        .publish("sessions", &session_status("s", SessionStatus::Completed))
        .await
        .unwrap();
    ws_quiet(&mut ws, 300).await;
}

async fn auto_catchup_then_live_without_duplicates(store: Store) {
    let app = TestApp::start(store).await;
    let before = publish_n(&app, "s1", 0, 3).await;
    let mut ws = ws_connect(&app.ws_url).await;
    ws_subscribe(&mut ws, "session:s1").await;
    for (n, id) in before.iter().enumerate() {
        let event = ws_next(&mut ws).await;
        assert_eq!(event["sequence_number"], n, "{event}");
        assert_eq!(event["db_event_id"], *id);
        assert_eq!(event["channel"], "session:s1");
        assert_eq!(event["type"], "timeline_event.created");
    }
    let live = publish_n(&app, "s1", 3, 4).await;
    let event = ws_next(&mut ws).await;
    assert_eq!(
        (
            event["sequence_number"].clone(),
            event["db_event_id"].clone()
        ),
        (json!(3), json!(live[0]))
    );
    // Other sessions' events do not leak in.
    publish_n(&app, "s2", 0, 1).await;
    ws_quiet(&mut ws, 300).await;
}

async fn catchup_after_reconnect(store: Store) {
    let app = TestApp::start(store).await;
    let mut ws = ws_connect(&app.ws_url).await;
    ws_subscribe(&mut ws, "session:s1").await;
    publish_n(&app, "s1", 0, 2).await;
    ws_next(&mut ws).await;
    let last_seen = ws_next(&mut ws).await["db_event_id"].as_i64().unwrap();
    ws.close(None).await.unwrap();
    drop(ws);

    // Missed while disconnected.
    let missed = publish_n(&app, "s1", 2, 5).await;
    let mut ws = ws_connect(&app.ws_url).await;
    ws_send(
        &mut ws,
        json!({"action": "subscribe", "channel": "session:s1", "last_event_id": last_seen}),
    )
    .await;
    assert_eq!(ws_next(&mut ws).await["type"], "subscription.confirmed");
    for id in &missed {
        assert_eq!(ws_next(&mut ws).await["db_event_id"], *id);
    }
    ws_quiet(&mut ws, 200).await;

    // An explicit catch-up replays from any point, skipping nothing...
    ws_send(
        &mut ws,
        json!({"action": "catchup", "channel": "session:s1", "last_event_id": 0}),
    )
    .await;
    // ...but never sends an event this connection already delivered.
    let first_two = ws_next(&mut ws).await;
    assert!(
        first_two["db_event_id"].as_i64().unwrap() <= last_seen,
        "{first_two}"
    );
    let second = ws_next(&mut ws).await;
    assert_eq!(second["db_event_id"], last_seen);
    ws_quiet(&mut ws, 200).await;
}

async fn catchup_overflow_at_200(store: Store) {
    let app = TestApp::start(store).await;
    publish_n(&app, "full", 0, 200).await;
    publish_n(&app, "over", 0, 201).await;
    let mut ws = ws_connect(&app.ws_url).await;
    ws_subscribe(&mut ws, "session:full").await;
    for n in 0..200 {
        assert_eq!(ws_next(&mut ws).await["sequence_number"], n);
    }
    ws_subscribe(&mut ws, "session:over").await;
    let overflow = ws_next(&mut ws).await;
    assert_eq!(
        overflow,
        json!({"type": "catchup.overflow", "channel": "session:over", "last_event_id": 0, "limit": 200})
    );
    // The subscription stands: live events keep coming after the overflow.
    publish_n(&app, "over", 201, 202).await;
    assert_eq!(ws_next(&mut ws).await["sequence_number"], 201);
    // A catch-up from a recent point fits again.
    ws_send(
        &mut ws,
        json!({"action": "catchup", "channel": "session:over", "last_event_id": 1}),
    )
    .await;
    assert_eq!(ws_next(&mut ws).await["type"], "catchup.overflow");
}

async fn transient_chunks_are_delivered_not_stored(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let mut ws = ws_connect(&app.ws_url).await;
    ws_subscribe(&mut ws, "session:s1").await;
    for delta in ["The pod ", "was OOM", "Killed."] {
        app.publisher
            .publish_transient("session:s1", &chunk("s1", "te-1", delta))
            .await;
    }
    let mut text = String::new();
    for _ in 0..3 {
        let chunk = ws_next(&mut ws).await;
        assert_eq!(chunk["type"], "stream.chunk");
        assert!(chunk.get("db_event_id").is_none(), "{chunk}");
        text.push_str(chunk["delta"].as_str().unwrap());
    }
    assert_eq!(text, "The pod was OOMKilled.");
    assert!(
        store
            .events_since("session:s1", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn chat_events_reach_subscribers(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let id = app.submit().await;
    store
        .finish_session(
            &id,
            tarsy_store::SessionOutcome {
                status: tarsy_core::SessionStatus::Failed,
                final_analysis: None,
                executive_summary: None,
                executive_summary_error: None,
                error_message: Some("stage failed".into()),
                end_reason: None,
            },
        )
        .await
        .unwrap();
    let mut ws = ws_connect(&app.ws_url).await;
    ws_subscribe(&mut ws, &format!("session:{id}")).await;
    let (status, accepted) = app
        .post_json(
            &format!("/api/v1/sessions/{id}/chat/messages"),
            &json!({"content": "what failed?"}),
        )
        .await;
    assert_eq!(status, 202);
    let created = ws_next(&mut ws).await;
    assert_eq!(created["type"], "chat.created");
    assert_eq!(created["chat_id"], accepted["chat_id"]);
    let message = ws_next(&mut ws).await;
    assert_eq!(message["type"], "chat.user_message");
    assert_eq!(message["content"], "what failed?");
    assert_eq!(message["message_id"], accepted["message_id"]);
}

async fn websocket_origins_are_enforced(store: Store) {
    let app = TestApp::start_with(
        store,
        ApiConfig {
            allowed_origins: vec!["https://dashboard.example.com".into()],
            ..ApiConfig::default()
        },
        |api| api,
    )
    .await;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = app.ws_url.as_str().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", "https://evil.example.com".parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 403)
        }
        other => panic!("a foreign origin was let in: {:?}", other.map(|_| ())),
    }
    let mut request = app.ws_url.as_str().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", "https://dashboard.example.com".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(ws_next(&mut ws).await["type"], "connection.established");
}

on_both_backends!(
    protocol_basics,
    auto_catchup_then_live_without_duplicates,
    catchup_after_reconnect,
    catchup_overflow_at_200,
    transient_chunks_are_delivered_not_stored,
    chat_events_reach_subscribers,
    websocket_origins_are_enforced,
);

// ------------------------------------------------------------ Postgres only

/// Two API replicas on one database: what one publishes, the other's
/// clients receive (NOTIFY → LISTEN), persistent and transient alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_cross_replicas_through_notify() {
    with_postgres_url(|url| async move {
        let a_store = open_postgres(&url).await;
        let b_store = open_postgres(&url).await;
        let a = TestApp::start(a_store.clone()).await;
        let b = TestApp::start(b_store.clone()).await;
        let mut on_a = ws_connect(&a.ws_url).await;
        let mut on_b = ws_connect(&b.ws_url).await;
        ws_subscribe(&mut on_a, "session:x").await;
        ws_subscribe(&mut on_b, "session:x").await;
        ws_subscribe(&mut on_b, "sessions").await;

        let ids = publish_n(&a, "x", 0, 3).await;
        for (n, id) in ids.iter().enumerate() {
            for ws in [&mut on_a, &mut on_b] {
                let event = ws_next(ws).await;
                assert_eq!(
                    (
                        event["sequence_number"].clone(),
                        event["db_event_id"].clone()
                    ),
                    (json!(n), json!(*id))
                );
            }
        }
        b.publisher
            .publish("sessions", &session_status("x", SessionStatus::Completed))
            .await
            .unwrap();
        assert_eq!(ws_next(&mut on_b).await["type"], "session.status");
        a.publisher
            .publish_transient("session:x", &chunk("x", "te-1", "tok"))
            .await;
        for ws in [&mut on_a, &mut on_b] {
            let chunk = ws_next(ws).await;
            assert_eq!(
                (chunk["type"].clone(), chunk["delta"].clone()),
                (json!("stream.chunk"), json!("tok"))
            );
        }
        // Each replica delivers each event once (its own publish arrives via
        // LISTEN only, never also in-process).
        ws_quiet(&mut on_a, 300).await;
        ws_quiet(&mut on_b, 100).await;
        drop((on_a, on_b, a, b));
        a_store.close().await;
        b_store.close().await;
    })
    .await
}

/// Payloads over the NOTIFY limit: persistent ones arrive whole (the
/// listener loads them by id), transient ones as a routing envelope.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_payloads_take_the_envelope_path() {
    with_postgres_url(|url| async move {
        let a_store = open_postgres(&url).await;
        let b_store = open_postgres(&url).await;
        let a = TestApp::start(a_store.clone()).await;
        let b = TestApp::start(b_store.clone()).await;
        let mut ws = ws_connect(&b.ws_url).await;
        ws_subscribe(&mut ws, "session:big").await;
        let content = "log line\n".repeat(NOTIFY_PAYLOAD_LIMIT / 4);
        assert!(content.len() > NOTIFY_PAYLOAD_LIMIT);
        let id = a
            .publisher
            .publish(
                "session:big",
                &StreamEvent::TimelineEventCompleted {
                    event_id: "te-9".into(),
                    session_id: "big".into(),
                    stage_id: None,
                    execution_id: None,
                    event_type: TimelineEventType::LlmResponse,
                    status: TimelineEventStatus::Completed,
                    content: content.clone(),
                    metadata: json!({}),
                    timestamp: timestamp(),
                },
            )
            .await
            .unwrap();
        let event = ws_next(&mut ws).await;
        assert_eq!(event["db_event_id"], id);
        assert_eq!(event["content"].as_str().unwrap().len(), content.len());
        assert_eq!(event["content"], Value::String(content.clone()));

        a.publisher
            .publish_transient("session:big", &chunk("big", "te-9", &content))
            .await;
        let envelope = ws_next(&mut ws).await;
        // The routing fields arrive, the content does not.
        for (key, value) in [
            ("type", json!("stream.chunk")),
            ("event_id", json!("te-9")),
            ("session_id", json!("big")),
            ("truncated", json!(true)),
            ("channel", json!("session:big")),
        ] {
            assert_eq!(envelope[key], value, "{key} in {envelope}");
        }
        assert!(envelope.get("delta").is_none(), "{envelope}");
        drop((ws, a, b));
        a_store.close().await;
        b_store.close().await;
    })
    .await
}

/// A subscription made on one replica sees events committed right after it
/// (LISTEN is active before the subscribe is confirmed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_is_listening_when_confirmed() {
    with_postgres(|store| async move {
        let app = TestApp::start(store.clone()).await;
        for round in 0..5 {
            let channel = format!("session:r{round}");
            let mut ws = ws_connect(&app.ws_url).await;
            ws_subscribe(&mut ws, &channel).await;
            app.publisher
                .publish(&channel, &created(&format!("r{round}"), round))
                .await
                .unwrap();
            let event = tokio::time::timeout(Duration::from_secs(5), ws_next(&mut ws))
                .await
                .unwrap();
            assert_eq!(event["sequence_number"], round);
        }
    })
    .await
}

/// The listening connection is killed: the replica reconnects, re-LISTENs
/// and catches its subscribers up, so no event is lost or repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listener_recovers_from_a_lost_connection() {
    with_postgres(|store| async move {
        let app = TestApp::start(store.clone()).await;
        let mut ws = ws_connect(&app.ws_url).await;
        ws_subscribe(&mut ws, "session:z").await;
        publish_n(&app, "z", 0, 1).await;
        assert_eq!(ws_next(&mut ws).await["sequence_number"], 0);

        let pool = store.postgres_pool().unwrap();
        let killed: Vec<(bool,)> = sqlx::query_as(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(killed, vec![(true,)], "exactly one listening connection");
        // Published while the listener is down or reconnecting.
        publish_n(&app, "z", 1, 3).await;
        for n in 1..3 {
            assert_eq!(ws_next(&mut ws).await["sequence_number"], n);
        }
        // And listening again afterwards.
        tokio::time::sleep(Duration::from_millis(300)).await;
        publish_n(&app, "z", 3, 4).await;
        assert_eq!(ws_next(&mut ws).await["sequence_number"], 3);
        ws_quiet(&mut ws, 300).await;
    })
    .await
}
