//! [`EventPublisher`] backed by the store.

use async_trait::async_trait;
use serde_json::{Map, Value};
use tarsy_core::{EventPublisher, RecordError, StreamEvent};
use tarsy_store::{BackendKind, NOTIFY_PAYLOAD_LIMIT, Store};

use crate::bus::{Delivery, EventBus};

/// Bytes the notification wrapper (`{"payload":…}`) adds around a payload.
const WRAPPER_BYTES: usize = 16;
/// Longest string value kept in a routing envelope.
const ENVELOPE_STRING_MAX: usize = 256;

/// Publishes through the store: persistent events are stored (Postgres:
/// insert + `pg_notify` in one transaction); transient events are a bare
/// `NOTIFY` on Postgres. On SQLite there is no NOTIFY, so both kinds are
/// dispatched to the in-process bus given at construction.
pub struct StorePublisher {
    store: Store,
    local: Option<EventBus>,
}

impl StorePublisher {
    /// A publisher on `store`. `local` is the bus to dispatch to on SQLite
    /// (ignored on Postgres, where the LISTEN task delivers — also to this
    /// process — so dispatching here too would duplicate every event).
    pub fn new(store: Store, local: Option<EventBus>) -> Self {
        let local = match store.backend() {
            BackendKind::Sqlite => local,
            BackendKind::Postgres => None,
        };
        Self { store, local }
    }
}

#[async_trait]
impl EventPublisher for StorePublisher {
    async fn publish(&self, channel: &str, event: &StreamEvent) -> Result<i64, RecordError> {
        let session_id = event.session_id();
        // What subscribers of this process see is what is stored.
        let mut payload = event.to_value();
        tarsy_store::storable_json(&mut payload);
        match &self.local {
            Some(bus) => {
                let id = self
                    .store
                    .insert_event(session_id, channel, payload.clone())
                    .await?;
                bus.dispatch(Delivery {
                    channel: channel.to_string(),
                    event_id: Some(id),
                    payload,
                });
                Ok(id)
            }
            None => Ok(self
                .store
                .insert_event(session_id, channel, payload)
                .await?),
        }
    }

    async fn publish_transient(&self, channel: &str, event: &StreamEvent) {
        let mut payload = event.to_value();
        tarsy_store::storable_json(&mut payload);
        if let Some(bus) = &self.local {
            bus.dispatch(Delivery {
                channel: channel.to_string(),
                event_id: None,
                payload,
            });
            return;
        }
        if self.store.backend() == BackendKind::Sqlite {
            // Local mode without a bus: nobody to deliver to.
            return;
        }
        let payload = fit_transient(payload);
        if let Err(e) = self.store.notify(channel, &payload).await {
            // Streaming is best effort: the content reaches storage anyway.
            tracing::warn!(%channel, error = %e, "transient event not delivered");
        }
    }
}

/// A transient payload that fits in one NOTIFY: the payload itself when it
/// fits, else a routing envelope — its small top-level fields (type, ids,
/// event type) plus `"truncated": true` — telling the client to read the
/// full content over REST (a transient event is not stored, so there is
/// nothing to load by id).
pub fn fit_transient(payload: Value) -> Value {
    let size = serde_json::to_string(&payload)
        .map(|s| s.len())
        .unwrap_or(usize::MAX);
    if size.saturating_add(WRAPPER_BYTES) <= NOTIFY_PAYLOAD_LIMIT {
        return payload;
    }
    let Value::Object(fields) = payload else {
        return serde_json::json!({ "truncated": true });
    };
    let mut envelope: Map<String, Value> = fields
        .into_iter()
        .filter(|(_, v)| match v {
            Value::String(s) => s.len() <= ENVELOPE_STRING_MAX,
            Value::Bool(_) | Value::Number(_) | Value::Null => true,
            Value::Array(_) | Value::Object(_) => false,
        })
        .collect();
    envelope.insert("truncated".into(), Value::Bool(true));
    let envelope = Value::Object(envelope);
    let size = serde_json::to_string(&envelope)
        .map(|s| s.len())
        .unwrap_or(usize::MAX);
    if size.saturating_add(WRAPPER_BYTES) <= NOTIFY_PAYLOAD_LIMIT {
        return envelope;
    }
    // Hundreds of small fields: keep only what routes the event.
    let mut minimal = Map::new();
    if let Value::Object(fields) = envelope {
        for key in [
            "type",
            "session_id",
            "event_id",
            "execution_id",
            "event_type",
        ] {
            if let Some(v) = fields.get(key) {
                minimal.insert(key.into(), v.clone());
            }
        }
    }
    minimal.insert("truncated".into(), Value::Bool(true));
    Value::Object(minimal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn small_payloads_are_untouched() {
        let p = json!({"type": "stream.chunk", "delta": "hello"});
        assert_eq!(fit_transient(p.clone()), p);
    }

    #[test]
    fn large_payloads_become_routing_envelopes() {
        let p = json!({
            "type": "stream.chunk",
            "event_id": "ev-1",
            "session_id": "s-1",
            "sequence": 4,
            "delta": "x".repeat(NOTIFY_PAYLOAD_LIMIT),
            "metadata": {"a": 1},
        });
        let e = fit_transient(p);
        assert_eq!(
            e,
            json!({"type": "stream.chunk", "event_id": "ev-1", "session_id": "s-1", "sequence": 4, "truncated": true})
        );
    }
}
