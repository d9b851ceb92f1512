//! `GET /api/v1/ws`: the WebSocket transport around
//! [`tarsy_events::Connection`], which holds the protocol.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::AppState;
use crate::error::ApiError;

/// Client frames waiting to be handled; a client flooding faster than that
/// is simply read more slowly (TCP backpressure).
const INBOX: usize = 64;

/// What the reader task forwards.
enum Incoming {
    Text(String),
    Binary,
}

/// Checks the origin, then upgrades.
pub(crate) async fn upgrade(
    State(api): State<AppState>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if !crate::cross_site::upgrade_allowed(&headers, &api.config.allowed_origins) {
        return ApiError::forbidden("this origin may not open the WebSocket").into_response();
    }
    ws.on_upgrade(move |socket| serve(api, socket))
}

async fn serve(api: AppState, socket: WebSocket) {
    api.ws_connections.fetch_add(1, Ordering::Relaxed);
    let _open = tarsy_telemetry::global().ws_connection();
    let mut conn = api.hub.connection();
    let (mut sink, mut stream) = socket.split();
    // Reading runs in its own task so that the loop below only ever waits
    // on cancel-safe channel receives, and handles each message to the end.
    let (inbox_tx, mut inbox) = mpsc::channel(INBOX);
    let reader = tokio::spawn(async move {
        while let Some(Ok(frame)) = stream.next().await {
            let incoming = match frame {
                Message::Text(text) => Incoming::Text(text.to_string()),
                Message::Binary(_) => Incoming::Binary,
                Message::Close(_) => break,
                // Pings are answered by the WebSocket layer itself.
                Message::Ping(_) | Message::Pong(_) => continue,
            };
            if inbox_tx.send(incoming).await.is_err() {
                break;
            }
        }
    });
    let welcome = conn.welcome();
    if send(&mut sink, welcome).await {
        loop {
            let out = tokio::select! {
                incoming = inbox.recv() => match incoming {
                    None => break,
                    Some(Incoming::Text(text)) => conn.handle_client_text(&text).await,
                    Some(Incoming::Binary) => vec![json!({
                        "type": "error",
                        "message": "binary frames are not supported; send JSON text",
                    })],
                },
                item = conn.recv_bus() => match item {
                    None => break,
                    Some(item) => conn.handle_bus(item).await,
                },
            };
            let mut open = true;
            for message in out {
                if !send(&mut sink, message).await {
                    open = false;
                    break;
                }
            }
            if !open {
                break;
            }
        }
    }
    reader.abort();
    let _ = sink.close().await;
    api.ws_connections.fetch_sub(1, Ordering::Relaxed);
}

/// Sends one JSON message; false when the client is gone.
async fn send<S>(sink: &mut S, message: Value) -> bool
where
    S: futures::Sink<Message> + Unpin,
{
    sink.send(Message::Text(message.to_string().into()))
        .await
        .is_ok()
}
