//! Where notifications thread: the Slack thread of a key (an Alertmanager
//! fingerprint, or a session id) in a channel.

use crate::Store;
use chrono::{DateTime, Utc};

use crate::db::{Sql, normalize_time, now};
use crate::error::Result;

impl Store {
    /// The thread `key` opened in `channel`, if any.
    pub async fn slack_thread(&self, key: &str, channel: &str) -> Result<Option<String>> {
        Ok(self
            .db
            .fetch_optional::<(String,)>(
                Sql::new("SELECT ts FROM slack_threads WHERE thread_key = $1 AND channel = $2")
                    .bind(key)
                    .bind(channel),
            )
            .await?
            .map(|(ts,)| ts))
    }

    /// Records that message `ts` opened `key`'s thread in `channel`, unless
    /// another message did first; returns the thread's opening message.
    pub async fn open_slack_thread(&self, key: &str, channel: &str, ts: &str) -> Result<String> {
        self.db
            .execute(
                Sql::new(
                    "INSERT INTO slack_threads (thread_key, channel, ts, created_at) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (thread_key, channel) DO NOTHING",
                )
                .bind(key)
                .bind(channel)
                .bind(ts)
                .bind(now()),
            )
            .await?;
        Ok(self
            .slack_thread(key, channel)
            .await?
            .unwrap_or_else(|| ts.to_string()))
    }

    /// Forgets threads opened before `cutoff` (retention): the next notice
    /// of such a key opens a new thread. Returns how many were forgotten.
    pub async fn forget_slack_threads_before(&self, cutoff: DateTime<Utc>) -> Result<u64> {
        self.db
            .execute(
                Sql::new("DELETE FROM slack_threads WHERE created_at < $1")
                    .bind(normalize_time(cutoff)),
            )
            .await
    }
}
