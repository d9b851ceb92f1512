//! TARSy storage: the five-layer data model on Postgres and SQLite.
//!
//! One [`Store`] handle serves either backend: Postgres in cluster mode,
//! SQLite in local mode and tests. It holds sessions → stages → agent
//! executions → timeline events, messages, LLM and MCP interactions, plus the
//! WebSocket catch-up events and follow-up chats. Progressive writes are one
//! statement each (an insert, an append, an update by id); the engine reaches
//! them through [`tarsy_core::ExecutionRecorder`], which `Store` implements.
//!
//! ```no_run
//! # async fn demo() -> Result<(), tarsy_store::StoreError> {
//! let store = tarsy_store::Store::connect("sqlite:tarsy.db").await?;
//! let pending = store.count_sessions_with_status(&[tarsy_core::SessionStatus::Pending]).await?;
//! # let _ = pending; Ok(()) }
//! ```

#![warn(missing_docs)]

mod batch;
mod breakers;
mod chats;
mod closing;
mod costs;
mod db;
mod error;
mod events;
mod interactions;
mod memories;
mod model;
mod notifications;
mod quality;
mod recorder;
mod reviews;
mod scores;
mod sessions;
mod stages;
#[cfg(feature = "testing")]
pub mod testing;
mod timeline;
mod usage;
mod warnings;

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, PgPool, SqlitePool};

pub use breakers::BreakerState;
pub use closing::{Closed, OpenRecord};
pub use costs::CostTotal;
pub use db::{BackendKind, REPLACEMENT, storable_json, storable_text};
pub use error::{Result, StoreError};
pub use events::{EventNotification, NOTIFY_PAYLOAD_LIMIT, StoreTx};
pub use memories::{
    DEFAULT_MIN_LEXICAL, DEFAULT_MIN_SIMILARITY, EXCERPT_CHARS, MAX_EMBEDDING_DIMENSIONS,
    MAX_MEMORY_CHARS, MAX_PAST_SESSIONS, MAX_RECALL, Memory, MemoryChange, MemoryFilter, NewMemory,
    PastSession, RecallQuery, Recalled, SessionSearch,
};
pub use model::{
    AgentExecution, Chat, ChatUserMessage, Created, LlmInteraction, LlmInteractionSummary,
    McpInteraction, McpInteractionSummary, Message, NewAgentExecution, NewSession, NewStage,
    ScoreBadge, Session, SessionFilter, SessionOutcome, SessionPage, SessionSort, SessionSortKey,
    SessionSummary, SessionTrace, Stage, StoredEvent, TraceExecution, TraceStage,
};
pub use quality::{Disagreement, QualityFilter, RatingBand, ScoreDay, TagCount, ToolReportRow};
pub use reviews::{Review, ReviewChange, ReviewEvent, TARSY_ACTOR};
pub use scores::{ScoreResult, ScoreStatus, SessionScore, count_ended_score};
pub use usage::{TOP_SESSIONS, UsageFilter, UsageGroup, UsageRank, UsageSession, UsageSummary};
pub use warnings::StoredWarning;

use db::{Db, Pool};

static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("migrations/postgres");
static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("migrations/sqlite");

/// A pooled Postgres connection idle this long is pinged before it is used
/// again; one in use moments ago is not (the iteration step's writes follow
/// each other within milliseconds).
const PING_WHEN_IDLE: Duration = Duration::from_secs(1);

/// Size the SQLite WAL is truncated back to at a checkpoint (4 MiB).
const WAL_SIZE_LIMIT: u64 = 4 * 1024 * 1024;

/// How long the writers of an investigation wait out an unavailable
/// database by default ([`Store::patient`]).
pub const DEFAULT_PATIENCE: Duration = Duration::from_secs(120);

/// How long an API call waits for a database connection before it
/// answers that the database is unavailable ([`Store::fail_fast`]).
pub const FAIL_FAST_LIMIT: Duration = Duration::from_secs(2);

/// Pool size for a process that runs one execution (`tarsy investigate`, a
/// runner): it writes one record at a time, its event publisher (or the
/// Postgres event listener of local mode) alongside.
/// sqlx hands out pooled connections in turn and each prepares its
/// statements anew, so a small pool reuses them sooner; it also opens fewer
/// connections at start-up.
pub const ONE_EXECUTION_POOL: u32 = 2;

/// How [`Store::connect_with`] opens the database.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Apply pending schema migrations after connecting (default true).
    pub run_migrations: bool,
    /// Pool size (default 10; an in-memory SQLite database always uses 1,
    /// because each connection would otherwise see its own empty database).
    pub max_connections: u32,
    /// How long to wait for a pooled connection (default 10 s).
    pub acquire_timeout: Duration,
    /// SQLite only: how long a writer waits for the lock (default 5 s).
    pub busy_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            run_migrations: true,
            max_connections: 10,
            acquire_timeout: Duration::from_secs(10),
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// The storage handle. Cheap to clone (it wraps a connection pool).
#[derive(Debug, Clone)]
pub struct Store {
    db: Db,
    /// Whether ended scoring attempts are counted in this process's
    /// metrics (see [`Store::without_score_metrics`]).
    count_scores: bool,
}

impl Store {
    /// Connects to `postgres://…` / `postgresql://…` or `sqlite:…` and applies
    /// the schema migrations.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, ConnectOptions::default()).await
    }

    /// Connects with explicit options.
    pub async fn connect_with(url: &str, options: ConnectOptions) -> Result<Self> {
        let store = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let connect = PgConnectOptions::from_str(url)?;
            let pool = PgPoolOptions::new()
                .max_connections(options.max_connections.max(1))
                .acquire_timeout(options.acquire_timeout)
                // sqlx pings every connection it hands out by default: a
                // second round trip to the server for each statement. Only
                // a connection that sat idle can have lost its server.
                .test_before_acquire(false)
                .before_acquire(|conn, meta| {
                    Box::pin(async move {
                        if meta.idle_for >= PING_WHEN_IDLE {
                            conn.ping().await?;
                        }
                        Ok(true)
                    })
                })
                .connect_with(connect)
                .await?;
            Store {
                db: Db::new(Pool::Postgres(pool)),
                count_scores: true,
            }
        } else if url.starts_with("sqlite:") {
            let in_memory = url.contains(":memory:") || url.contains("mode=memory");
            let connect = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .foreign_keys(true)
                .busy_timeout(options.busy_timeout);
            let connect = if in_memory {
                connect
            } else {
                // WAL lets readers run while one writer writes; NORMAL sync is
                // durable across application crashes, which is what local mode needs.
                connect
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Normal)
                    // A checkpoint truncates the WAL back to this size: the
                    // space a burst of writes took (or a full disk's
                    // failed ones) is given back instead of kept.
                    .pragma("journal_size_limit", WAL_SIZE_LIMIT.to_string())
            };
            // A ping would only check the connection's own worker thread
            // (no server to lose), at the cost of one more hop per statement.
            let mut pool = SqlitePoolOptions::new()
                .acquire_timeout(options.acquire_timeout)
                .test_before_acquire(false);
            pool = if in_memory {
                // The database lives as long as its only connection.
                pool.max_connections(1)
                    .min_connections(1)
                    .idle_timeout(None)
                    .max_lifetime(None)
            } else {
                pool.max_connections(options.max_connections.max(1))
            };
            Store {
                db: Db::new(Pool::Sqlite(pool.connect_with(connect).await?)),
                count_scores: true,
            }
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_string()));
        };
        if options.run_migrations {
            store.migrate().await?;
        }
        Ok(store)
    }

    /// A fresh, migrated, private in-memory SQLite database (tests, demos).
    pub async fn sqlite_in_memory() -> Result<Self> {
        Self::connect("sqlite::memory:").await
    }

    /// Wraps an existing Postgres pool (migrations are not run; see [`Store::migrate`]).
    pub fn from_postgres_pool(pool: PgPool) -> Self {
        Store {
            db: Db::new(Pool::Postgres(pool)),
            count_scores: true,
        }
    }

    /// Wraps an existing SQLite pool (migrations are not run; see [`Store::migrate`]).
    pub fn from_sqlite_pool(pool: SqlitePool) -> Self {
        Store {
            db: Db::new(Pool::Sqlite(pool)),
            count_scores: true,
        }
    }

    /// Applies pending schema migrations of this backend.
    pub async fn migrate(&self) -> Result<()> {
        match &self.db.pool {
            Pool::Postgres(pool) => POSTGRES_MIGRATIONS.run(pool).await?,
            Pool::Sqlite(pool) => SQLITE_MIGRATIONS.run(pool).await?,
        }
        Ok(())
    }

    /// Which backend this store uses.
    pub fn backend(&self) -> BackendKind {
        self.db.kind()
    }

    /// The Postgres pool, e.g. to build a `PgListener` for event fan-out.
    pub fn postgres_pool(&self) -> Option<&PgPool> {
        match &self.db.pool {
            Pool::Postgres(pool) => Some(pool),
            Pool::Sqlite(_) => None,
        }
    }

    /// Closes every pooled connection; later calls fail.
    pub async fn close(&self) {
        match &self.db.pool {
            Pool::Postgres(pool) => pool.close().await,
            Pool::Sqlite(pool) => pool.close().await,
        }
    }

    /// This store, with calls that wait out an unavailable database: a call
    /// that fails transiently ([`StoreError::is_transient`]: the server
    /// restarting or failing over, a lost connection, SQLite busy, a full
    /// disk) is made again with backoff for up to `bound` (each attempt
    /// cut at what is left of it, though given at least a second), then
    /// fails with the last error. For the writers of an investigation,
    /// which must not fail over a blip; every write is idempotent, so
    /// nothing is stored twice.
    pub fn patient(&self, bound: Duration) -> Store {
        let mut store = self.clone();
        store.db.patience = Some(bound).filter(|b| !b.is_zero());
        store
    }

    /// This store, with calls that fail when no connection comes within
    /// `limit` ([`StoreError::TimedOut`]) and are never made again: for the
    /// API, which answers 503 at once rather than after the pool's acquire
    /// timeout while the database is down.
    pub fn fail_fast(&self, limit: Duration) -> Store {
        let mut store = self.clone();
        store.db.patience = None;
        store.db.limit = Some(limit);
        store
    }

    /// This store, without counting the scoring attempts it ends in this
    /// process's metrics. A cluster counts them in the operator, from what
    /// its Alerts show (most attempts end in a judge's pod, which nobody
    /// scrapes): its operator and API use this so that no attempt is
    /// counted twice.
    pub fn without_score_metrics(&self) -> Store {
        let mut store = self.clone();
        store.count_scores = false;
        store
    }

    /// Whether the database takes a write now: one row of its own,
    /// written and committed (a read would not notice a full disk).
    pub async fn probe_write(&self) -> Result<()> {
        self.db
            .execute(
                db::Sql::new(
                    "INSERT INTO store_probe (id, written_at) VALUES (1, $1) \
                     ON CONFLICT (id) DO UPDATE SET written_at = excluded.written_at",
                )
                .bind(db::now()),
            )
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod metric_labels {
    //! The label values the metrics start at 0 are the ones the store
    //! counts.

    #[test]
    fn session_statuses_and_review_ratings_are_the_known_ones() {
        let ends: Vec<&str> = tarsy_core::SessionStatus::ALL
            .iter()
            .filter(|s| s.is_terminal())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(ends, tarsy_telemetry::SESSION_END_STATUSES);
        let mut ratings: Vec<&str> = tarsy_core::ReviewRating::ALL
            .iter()
            .map(|r| r.as_str())
            .collect();
        ratings.push("acknowledged");
        assert_eq!(ratings, tarsy_telemetry::REVIEW_RATINGS);
    }
}
