//! Persistent WebSocket events: stored for catch-up and, on Postgres,
//! announced with NOTIFY in the same transaction, so a listener that hears
//! of an event can always read it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Store;
use crate::db::{BackendKind, Pool, Sql, Tx, normalize_time, now};
use crate::error::{Result, StoreError};
use crate::model::StoredEvent;

/// Largest NOTIFY payload sent, in bytes (Postgres refuses 8000 and more).
/// A larger notification carries only the event id; listeners load the event.
pub const NOTIFY_PAYLOAD_LIMIT: usize = 7900;

/// The body of a Postgres notification on an event channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventNotification {
    /// The stored event's id; absent for transient events (`stream.chunk`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<i64>,
    /// The event as sent to clients; absent when it did not fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// True when the payload was left out for size: read it with
    /// [`Store::get_event`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl EventNotification {
    /// Parses the text a listener received.
    pub fn parse(text: &str) -> Result<Self> {
        serde_json::from_str(text)
            .map_err(|e| StoreError::InvalidInput(format!("not an event notification: {e}")))
    }

    /// The NOTIFY body of a stored event in two pieces, to be joined around
    /// its id (decimal): the same text [`EventNotification::encode`] makes.
    /// Room is kept for the longest id, so a payload within 20 bytes of the
    /// limit is announced by id only.
    fn encode_around_id(payload: &Value) -> Result<(String, String)> {
        const HEAD: &str = r#"{"event_id":"#;
        const LONGEST_ID: usize = 20;
        let body = serde_json::to_string(payload)
            .map_err(|e| StoreError::InvalidInput(format!("event payload: {e}")))?;
        let tail = format!(r#","payload":{body}}}"#);
        if HEAD.len() + LONGEST_ID + tail.len() <= NOTIFY_PAYLOAD_LIMIT {
            Ok((HEAD.to_string(), tail))
        } else {
            Ok((HEAD.to_string(), r#","truncated":true}"#.to_string()))
        }
    }

    /// Serialises for NOTIFY, dropping the payload if it would not fit.
    fn encode(event_id: Option<i64>, payload: &Value) -> Result<Option<String>> {
        let full = Self {
            event_id,
            payload: Some(payload.clone()),
            truncated: false,
        };
        let text = serde_json::to_string(&full)
            .map_err(|e| StoreError::InvalidInput(format!("event payload: {e}")))?;
        if text.len() <= NOTIFY_PAYLOAD_LIMIT {
            return Ok(Some(text));
        }
        if event_id.is_none() {
            // A transient event too large to notify has nothing to fall back to.
            return Ok(None);
        }
        let short = Self {
            event_id,
            payload: None,
            truncated: true,
        };
        serde_json::to_string(&short)
            .map(Some)
            .map_err(|e| StoreError::InvalidInput(format!("event payload: {e}")))
    }
}

/// Inserts one event inside `tx` and, on Postgres, queues its NOTIFY there
/// too (delivered at commit, dropped at rollback).
async fn insert_event_in(
    tx: &mut Tx,
    session_id: &str,
    channel: &str,
    mut payload: Value,
) -> Result<i64> {
    crate::db::storable_json(&mut payload);
    if channel.is_empty() {
        return Err(StoreError::InvalidInput("event channel is empty".into()));
    }
    let id = tx
        .fetch_i64(
            Sql::new(
                "INSERT INTO events (session_id, channel, payload, created_at) \
                 VALUES ($1, $2, $3, $4) RETURNING id",
            )
            .bind(session_id)
            .bind(channel)
            .bind(payload.clone())
            .bind(now()),
        )
        .await?;
    if tx.kind() == BackendKind::Postgres
        && let Some(body) = EventNotification::encode(Some(id), &payload)?
    {
        tx.execute(
            Sql::new("SELECT pg_notify($1, $2)")
                .bind(channel)
                .bind(body),
        )
        .await?;
    }
    Ok(id)
}

/// A store transaction for writes that must land together, e.g. several
/// events, or an event whose NOTIFY must only be heard once it is committed.
/// Dropping it without [`StoreTx::commit`] rolls it back.
pub struct StoreTx {
    tx: Tx,
}

impl StoreTx {
    /// Stores an event (and, on Postgres, queues its NOTIFY until commit).
    pub async fn insert_event(
        &mut self,
        session_id: &str,
        channel: &str,
        payload: Value,
    ) -> Result<i64> {
        insert_event_in(&mut self.tx, session_id, channel, payload).await
    }

    /// Makes the writes visible and delivers queued notifications.
    pub async fn commit(self) -> Result<()> {
        self.tx.commit().await
    }

    /// Discards the writes and their notifications.
    pub async fn rollback(self) -> Result<()> {
        self.tx.rollback().await
    }
}

impl Store {
    /// Opens a transaction (see [`StoreTx`]). On SQLite it holds the write
    /// lock until it ends: keep it short.
    pub async fn begin(&self) -> Result<StoreTx> {
        Ok(StoreTx {
            tx: self.db.begin().await?,
        })
    }

    /// Stores a persistent event and returns its id. On Postgres the insert
    /// and its `pg_notify(channel, …)` commit in one transaction.
    pub async fn insert_event(
        &self,
        session_id: &str,
        channel: &str,
        mut payload: Value,
    ) -> Result<i64> {
        // The live event and the stored one must read the same.
        crate::db::storable_json(&mut payload);
        match &self.db.pool {
            // One statement (one round trip, atomic like a transaction):
            // the insert and its NOTIFY, whose body needs the new id, so the
            // body is sent in two pieces that Postgres joins around it.
            Pool::Postgres(_) => {
                if channel.is_empty() {
                    return Err(StoreError::InvalidInput("event channel is empty".into()));
                }
                let (head, tail) = EventNotification::encode_around_id(&payload)?;
                self.db
                    .fetch_i64(
                        Sql::new(
                            "WITH ins AS (INSERT INTO events (session_id, channel, payload, created_at) \
                             VALUES ($1, $2, $3, $4) RETURNING id) \
                             SELECT ins.id FROM ins CROSS JOIN LATERAL \
                             (SELECT pg_notify($2, $5 || ins.id::text || $6)) AS notified",
                        )
                        .bind(session_id)
                        .bind(channel)
                        .bind(payload)
                        .bind(now())
                        .bind(head)
                        .bind(tail),
                    )
                    .await
            }
            // No notification to pair with: a single autocommit insert.
            Pool::Sqlite(_) => {
                if channel.is_empty() {
                    return Err(StoreError::InvalidInput("event channel is empty".into()));
                }
                self.db
                    .fetch_i64(
                        Sql::new(
                            "INSERT INTO events (session_id, channel, payload, created_at) \
                             VALUES ($1, $2, $3, $4) RETURNING id",
                        )
                        .bind(session_id)
                        .bind(channel)
                        .bind(payload)
                        .bind(now()),
                    )
                    .await
            }
        }
    }

    /// Sends a transient notification (not stored) on Postgres and returns
    /// true; on SQLite there is no NOTIFY and it returns false (local mode
    /// fans out in process). Payloads too large for NOTIFY are an error.
    pub async fn notify(&self, channel: &str, payload: &Value) -> Result<bool> {
        if self.backend() == BackendKind::Sqlite {
            return Ok(false);
        }
        let mut payload = payload.clone();
        crate::db::storable_json(&mut payload);
        let Some(body) = EventNotification::encode(None, &payload)? else {
            return Err(StoreError::InvalidInput(format!(
                "transient payload exceeds the {NOTIFY_PAYLOAD_LIMIT}-byte NOTIFY limit"
            )));
        };
        self.db
            .execute(
                Sql::new("SELECT pg_notify($1, $2)")
                    .bind(channel)
                    .bind(body),
            )
            .await?;
        Ok(true)
    }

    /// Events of a channel with id greater than `after_id`, oldest first, at
    /// most `limit` (catch-up; ask for one more than you will send to detect
    /// overflow).
    pub async fn events_since(
        &self,
        channel: &str,
        after_id: i64,
        limit: i64,
    ) -> Result<Vec<StoredEvent>> {
        if limit < 1 {
            return Err(StoreError::InvalidInput(format!(
                "limit {limit} must be at least 1"
            )));
        }
        self.db
            .fetch_all(
                Sql::new(
                    "SELECT * FROM events WHERE channel = $1 AND id > $2 ORDER BY id LIMIT $3",
                )
                .bind(channel)
                .bind(after_id)
                .bind(limit),
            )
            .await
    }

    /// One stored event (for truncated notifications).
    pub async fn get_event(&self, id: i64) -> Result<StoredEvent> {
        self.db
            .fetch_optional(Sql::new("SELECT * FROM events WHERE id = $1").bind(id))
            .await?
            .ok_or_else(|| StoreError::not_found("event", id.to_string()))
    }

    /// Deletes a session's events (after its final status has been seen).
    pub async fn delete_session_events(&self, session_id: &str) -> Result<u64> {
        self.db
            .execute(Sql::new("DELETE FROM events WHERE session_id = $1").bind(session_id))
            .await
    }

    /// Deletes events stored before `cutoff` (event time-to-live).
    pub async fn delete_events_before(&self, cutoff: DateTime<Utc>) -> Result<u64> {
        self.db
            .execute(
                Sql::new("DELETE FROM events WHERE created_at < $1").bind(normalize_time(cutoff)),
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notification_pieces_join_into_the_encoded_body() {
        let payload = serde_json::json!({"type": "x", "n": 1});
        let (head, tail) = EventNotification::encode_around_id(&payload).unwrap();
        let joined = format!("{head}42{tail}");
        assert_eq!(
            Some(joined),
            EventNotification::encode(Some(42), &payload).unwrap()
        );
        let big = serde_json::json!({"content": "x".repeat(NOTIFY_PAYLOAD_LIMIT)});
        let (head, tail) = EventNotification::encode_around_id(&big).unwrap();
        let parsed = EventNotification::parse(&format!("{head}7{tail}")).unwrap();
        assert_eq!(
            (parsed.event_id, parsed.truncated, parsed.payload),
            (Some(7), true, None)
        );
    }

    #[test]
    fn small_payloads_travel_whole() {
        let body = EventNotification::encode(Some(7), &serde_json::json!({"type": "x"}))
            .unwrap()
            .unwrap();
        let n = EventNotification::parse(&body).unwrap();
        assert_eq!(n.event_id, Some(7));
        assert_eq!(n.payload, Some(serde_json::json!({"type": "x"})));
        assert!(!n.truncated);
    }

    #[test]
    fn large_payloads_are_replaced_by_the_id() {
        let big = serde_json::json!({"content": "x".repeat(NOTIFY_PAYLOAD_LIMIT)});
        let body = EventNotification::encode(Some(9), &big).unwrap().unwrap();
        assert!(body.len() <= NOTIFY_PAYLOAD_LIMIT);
        let n = EventNotification::parse(&body).unwrap();
        assert_eq!((n.event_id, n.payload, n.truncated), (Some(9), None, true));
        // A transient event has no id to fall back to.
        assert_eq!(EventNotification::encode(None, &big).unwrap(), None);
    }
}
