//! The WebSocket protocol of `/api/v1/ws`, independent of the HTTP server.
//!
//! Client → server (JSON text frames, `action` tagged):
//! `{"action":"subscribe","channel":"session:ID","last_event_id":N?}`,
//! `{"action":"unsubscribe","channel":…}`,
//! `{"action":"catchup","channel":…,"last_event_id":N}`, `{"action":"ping"}`.
//!
//! Server → client: event payloads as published, with `channel` added and,
//! for stored events, `db_event_id` (the catch-up cursor); and control
//! messages `connection.established`, `subscription.confirmed`,
//! `unsubscription.confirmed`, `catchup.overflow`, `pong`, `error`.

use std::collections::{BTreeSet, HashMap};

use serde::Deserialize;
use serde_json::Value;
use tarsy_core::recorder::SESSIONS_CHANNEL;
use tarsy_store::{Store, StoredEvent};

use crate::EventsError;
use crate::bus::{BusItem, Delivery, Subscriber};

/// Most events one catch-up replays; beyond it the client gets
/// `catchup.overflow` and reloads over REST.
pub const CATCHUP_LIMIT: usize = 200;

/// Longest channel name: Postgres channel names are identifiers (63 bytes).
const MAX_CHANNEL_BYTES: usize = 63;

/// Most channels one connection may subscribe to (each costs a LISTEN).
pub const MAX_SUBSCRIPTIONS: usize = 256;

/// Delivered ids remembered per channel to drop duplicates (an event can
/// arrive both live and in a catch-up read).
const SEEN_IDS_KEPT: usize = 4096;

/// A message a client sends.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientMessage {
    /// Start receiving a channel; replays its stored events after
    /// `last_event_id` (all of them when absent) first.
    Subscribe {
        /// `session:{id}` or `sessions`.
        channel: String,
        /// Replay only events after this `db_event_id`.
        #[serde(default)]
        last_event_id: Option<i64>,
    },
    /// Stop receiving a channel.
    Unsubscribe {
        /// The channel.
        channel: String,
    },
    /// Replay the stored events of a subscribed channel after `last_event_id`.
    Catchup {
        /// The channel.
        channel: String,
        /// The last `db_event_id` the client has.
        last_event_id: i64,
    },
    /// Liveness check; answered with `{"type":"pong"}`.
    Ping,
}

/// Checks that `channel` is `sessions` or `session:{id}` with a plausible id.
pub fn validate_channel(channel: &str) -> Result<(), EventsError> {
    let invalid = |reason: &str| EventsError::InvalidChannel {
        channel: channel.to_string(),
        reason: reason.to_string(),
    };
    if channel == SESSIONS_CHANNEL {
        return Ok(());
    }
    let Some(id) = channel.strip_prefix("session:") else {
        return Err(invalid("expected \"sessions\" or \"session:{id}\""));
    };
    if id.is_empty() {
        return Err(invalid("the session id is empty"));
    }
    if channel.len() > MAX_CHANNEL_BYTES {
        return Err(invalid("longer than 63 bytes"));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(invalid(
            "the session id may hold only letters, digits, '-', '_' and '.'",
        ));
    }
    Ok(())
}

#[derive(Default)]
struct ChannelState {
    /// Highest stored event id delivered (lag recovery starts here).
    cursor: i64,
    /// Recently delivered stored event ids.
    seen: BTreeSet<i64>,
}

impl ChannelState {
    /// Records a delivery; false when the id was delivered already.
    fn mark(&mut self, id: i64) -> bool {
        if !self.seen.insert(id) {
            return false;
        }
        if self.seen.len() > SEEN_IDS_KEPT {
            self.seen.pop_first();
        }
        self.cursor = self.cursor.max(id);
        true
    }
}

/// One client's protocol state: its subscriptions, cursors and duplicate
/// filter. The transport feeds it client text ([`Connection::handle_client_text`])
/// and bus items ([`Connection::recv_bus`] then [`Connection::handle_bus`]) and
/// sends back whatever they return, in order.
pub struct Connection {
    store: Store,
    sub: Subscriber,
    channels: HashMap<String, ChannelState>,
}

impl Connection {
    /// A connection reading catch-up from `store` and live events from `sub`.
    pub fn new(store: Store, sub: Subscriber) -> Self {
        Self {
            store,
            sub,
            channels: HashMap::new(),
        }
    }

    /// The first message sent to a client.
    pub fn welcome(&self) -> Value {
        ServerMessage::ConnectionEstablished {
            catchup_limit: CATCHUP_LIMIT,
        }
        .into()
    }

    /// The next bus item (cancel-safe: use it in `select!`).
    pub async fn recv_bus(&mut self) -> Option<BusItem> {
        self.sub.recv().await
    }

    /// What to send for a bus item: the event (unless it is a duplicate or
    /// its channel was unsubscribed meanwhile), or a catch-up after a resync.
    pub async fn handle_bus(&mut self, item: BusItem) -> Vec<Value> {
        match item {
            BusItem::Event(delivery) => {
                let Some(state) = self.channels.get_mut(&delivery.channel) else {
                    return Vec::new();
                };
                if let Some(id) = delivery.event_id
                    && !state.mark(id)
                {
                    return Vec::new();
                }
                vec![render(&delivery)]
            }
            BusItem::Resync => {
                let mut out = Vec::new();
                let channels: Vec<(String, i64)> = self
                    .channels
                    .iter()
                    .map(|(c, s)| (c.clone(), s.cursor))
                    .collect();
                for (channel, cursor) in channels {
                    out.extend(self.catch_up(&channel, cursor).await);
                }
                out
            }
        }
    }

    /// What to send in answer to a client's text frame.
    pub async fn handle_client_text(&mut self, text: &str) -> Vec<Value> {
        match serde_json::from_str::<ClientMessage>(text) {
            Ok(message) => self.handle_client(message).await,
            Err(e) => vec![error_message(format!("invalid message: {e}"))],
        }
    }

    /// What to send in answer to a client's message.
    pub async fn handle_client(&mut self, message: ClientMessage) -> Vec<Value> {
        match message {
            ClientMessage::Ping => vec![ServerMessage::Pong.into()],
            ClientMessage::Subscribe {
                channel,
                last_event_id,
            } => {
                if let Err(e) = validate_channel(&channel) {
                    return vec![error_message(e.to_string())];
                }
                if self.channels.contains_key(&channel) {
                    let mut out = vec![
                        ServerMessage::SubscriptionConfirmed {
                            channel: channel.clone(),
                        }
                        .into(),
                    ];
                    if let Some(after) = last_event_id {
                        out.extend(self.catch_up(&channel, after).await);
                    }
                    return out;
                }
                if self.channels.len() >= MAX_SUBSCRIPTIONS {
                    return vec![error_message(format!(
                        "at most {MAX_SUBSCRIPTIONS} subscriptions per connection; unsubscribe first"
                    ))];
                }
                // Subscribe first, read second: an event committed between
                // the two is then delivered live (and deduplicated if the
                // read saw it too) instead of being lost.
                if let Err(e) = self.sub.subscribe(&channel).await {
                    return vec![error_message(e.to_string())];
                }
                self.channels
                    .insert(channel.clone(), ChannelState::default());
                let mut out = vec![
                    ServerMessage::SubscriptionConfirmed {
                        channel: channel.clone(),
                    }
                    .into(),
                ];
                out.extend(self.catch_up(&channel, last_event_id.unwrap_or(0)).await);
                out
            }
            ClientMessage::Unsubscribe { channel } => {
                self.sub.unsubscribe(&channel);
                self.channels.remove(&channel);
                vec![ServerMessage::UnsubscriptionConfirmed { channel }.into()]
            }
            ClientMessage::Catchup {
                channel,
                last_event_id,
            } => {
                if !self.channels.contains_key(&channel) {
                    return vec![error_message(format!(
                        "not subscribed to {channel:?}: subscribe first (subscribe also accepts last_event_id)"
                    ))];
                }
                self.catch_up(&channel, last_event_id).await
            }
        }
    }

    /// Stored events of `channel` after `after`, or `catchup.overflow` when
    /// there are more than [`CATCHUP_LIMIT`].
    async fn catch_up(&mut self, channel: &str, after: i64) -> Vec<Value> {
        let events = match self
            .store
            .events_since(channel, after, CATCHUP_LIMIT as i64 + 1)
            .await
        {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(%channel, error = %e, "catch-up read failed");
                return vec![error_message(format!("catch-up of {channel} failed: {e}"))];
            }
        };
        if events.len() > CATCHUP_LIMIT {
            return vec![
                ServerMessage::CatchupOverflow {
                    channel: channel.to_string(),
                    last_event_id: after,
                    limit: CATCHUP_LIMIT,
                }
                .into(),
            ];
        }
        let Some(state) = self.channels.get_mut(channel) else {
            return Vec::new();
        };
        events
            .into_iter()
            .filter(|e| state.mark(e.id))
            .map(|e| render_stored(&e))
            .collect()
    }
}

/// What the server says about the connection itself (the events it
/// delivers are [`tarsy_core::StreamEvent`]s).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "type")]
enum ServerMessage {
    /// The first message: the protocol's limits.
    #[serde(rename = "connection.established")]
    ConnectionEstablished { catchup_limit: usize },
    /// The answer to `ping`.
    #[serde(rename = "pong")]
    Pong,
    /// A subscription is active (events committed from now on arrive).
    #[serde(rename = "subscription.confirmed")]
    SubscriptionConfirmed { channel: String },
    /// A subscription ended.
    #[serde(rename = "unsubscription.confirmed")]
    UnsubscriptionConfirmed { channel: String },
    /// More than `limit` events to catch up: read the records over REST.
    #[serde(rename = "catchup.overflow")]
    CatchupOverflow {
        channel: String,
        last_event_id: i64,
        limit: usize,
    },
    /// A request could not be served.
    #[serde(rename = "error")]
    Error { message: String },
}

impl From<ServerMessage> for Value {
    fn from(m: ServerMessage) -> Self {
        // Strings and numbers only: serialization cannot fail.
        serde_json::to_value(m).unwrap_or(Value::Null)
    }
}

fn error_message(message: String) -> Value {
    ServerMessage::Error { message }.into()
}

/// The client form of an event: its payload plus `channel` and, for stored
/// events, `db_event_id`. A non-object payload is wrapped.
fn with_routing(payload: &Value, channel: &str, event_id: Option<i64>) -> Value {
    let mut object = match payload {
        Value::Object(map) => map.clone(),
        other => {
            let mut map = serde_json::Map::new();
            map.insert("type".into(), Value::String("event".into()));
            map.insert("payload".into(), other.clone());
            map
        }
    };
    object.insert("channel".into(), Value::String(channel.to_string()));
    if let Some(id) = event_id {
        object.insert("db_event_id".into(), Value::from(id));
    }
    Value::Object(object)
}

fn render(delivery: &Delivery) -> Value {
    with_routing(&delivery.payload, &delivery.channel, delivery.event_id)
}

fn render_stored(event: &StoredEvent) -> Value {
    with_routing(&event.payload, &event.channel, Some(event.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_names_are_checked() {
        assert!(validate_channel("sessions").is_ok());
        assert!(validate_channel("session:0b7c-aa_1.x").is_ok());
        assert!(validate_channel("session:").is_err());
        assert!(validate_channel("session:a b").is_err());
        assert!(validate_channel("other").is_err());
        assert!(validate_channel(&format!("session:{}", "a".repeat(60))).is_err());
    }

    #[test]
    fn client_messages_parse() {
        let m: ClientMessage =
            serde_json::from_str(r#"{"action":"catchup","channel":"sessions","last_event_id":4}"#)
                .unwrap();
        assert_eq!(
            m,
            ClientMessage::Catchup {
                channel: "sessions".into(),
                last_event_id: 4
            }
        );
        assert!(serde_json::from_str::<ClientMessage>(r#"{"action":"dance"}"#).is_err());
    }

    #[tokio::test]
    async fn subscriptions_are_capped() {
        let store = Store::sqlite_in_memory().await.unwrap();
        let bus = crate::EventBus::new();
        let mut conn = Connection::new(store, bus.subscriber());
        for i in 0..MAX_SUBSCRIPTIONS {
            let out = conn
                .handle_client(ClientMessage::Subscribe {
                    channel: format!("session:s{i}"),
                    last_event_id: None,
                })
                .await;
            assert_eq!(out[0]["type"], "subscription.confirmed", "{out:?}");
        }
        let out = conn
            .handle_client(ClientMessage::Subscribe {
                channel: "session:one-more".into(),
                last_event_id: None,
            })
            .await;
        assert_eq!(out[0]["type"], "error");
        assert_eq!(bus.subscription_count(), MAX_SUBSCRIPTIONS);
    }

    #[test]
    fn duplicates_are_dropped() {
        let mut s = ChannelState::default();
        assert!(s.mark(5));
        assert!(!s.mark(5));
        assert!(s.mark(3));
        assert_eq!(s.cursor, 5);
    }
}
