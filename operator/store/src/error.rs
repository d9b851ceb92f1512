//! Typed errors of the store.

use tarsy_core::RecordError;

/// What can go wrong in a store call.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The id names no record of this kind (or a referenced parent is missing).
    #[error("{kind} {id:?} not found")]
    NotFound {
        /// Record kind, e.g. "session" or "timeline event".
        kind: &'static str,
        /// The id that was looked up.
        id: String,
    },
    /// The write would break a uniqueness rule or a state rule (e.g. appending
    /// to a timeline event that is no longer streaming).
    #[error("conflict on {kind}: {message}")]
    Conflict {
        /// Record kind, e.g. "stage".
        kind: &'static str,
        /// What collided.
        message: String,
    },
    /// The caller passed a value the store cannot accept.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The connection URL names no supported backend.
    #[error("unsupported database URL {0:?}: expected postgres://, postgresql:// or sqlite:")]
    UnsupportedUrl(String),
    /// Applying the schema migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The database did not answer within the time this handle allows
    /// (see [`crate::Store::fail_fast`]).
    #[error("the database did not answer within {0:?}")]
    TimedOut(std::time::Duration),
    /// Any other database failure (connection, I/O, unexpected stored data).
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

impl StoreError {
    /// Shorthand for [`StoreError::NotFound`].
    pub fn not_found(kind: &'static str, id: impl Into<String>) -> Self {
        Self::NotFound {
            kind,
            id: id.into(),
        }
    }

    /// True for [`StoreError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// True for [`StoreError::Conflict`].
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict { .. })
    }

    /// The database could not be reached or could not take the write now,
    /// and the same call may well succeed later: the server is down or
    /// restarting (a failover), the connection was lost, no pooled
    /// connection came in time, the transaction lost a serialization race,
    /// SQLite is busy, or the disk is full. Errors about the call itself
    /// (a constraint, bad data) are not.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::TimedOut(_) => true,
            Self::Database(e) => transient_sqlx(e),
            Self::Migrate(sqlx::migrate::MigrateError::Execute(e)) => transient_sqlx(e),
            _ => false,
        }
    }

    /// What a client is told when the call may succeed later: the disk is
    /// full, or the database is unavailable; `None` for any other error.
    pub fn unavailable_message(&self) -> Option<String> {
        if self.is_disk_full() {
            Some(format!(
                "the database's disk is full; nothing can be stored until space is freed ({self})"
            ))
        } else if self.is_transient() {
            Some(format!(
                "the database is unavailable; try again shortly ({self})"
            ))
        } else {
            None
        }
    }

    /// The write failed because the disk (or the database's quota) is full.
    pub fn is_disk_full(&self) -> bool {
        let db = match self {
            Self::Database(sqlx::Error::Database(db)) => db,
            Self::Migrate(sqlx::migrate::MigrateError::Execute(sqlx::Error::Database(db))) => db,
            _ => return false,
        };
        let code = db.code();
        let code = code.as_deref().unwrap_or_default();
        if db
            .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
            .is_some()
        {
            code == "53100" // disk_full
        } else {
            sqlite_primary(code) == Some(SQLITE_FULL)
        }
    }
}

/// SQLite result codes that clear by themselves.
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;
const SQLITE_IOERR: i64 = 10;
const SQLITE_FULL: i64 = 13;

/// The primary SQLite result code of a (possibly extended) code.
fn sqlite_primary(code: &str) -> Option<i64> {
    code.parse::<i64>().ok().map(|c| c & 0xff)
}

fn transient_sqlx(e: &sqlx::Error) -> bool {
    match e {
        // The connection or the pool: nothing the call did wrong.
        sqlx::Error::PoolTimedOut
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            let code = db.code();
            let code = code.as_deref().unwrap_or_default();
            if db
                .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                .is_some()
            {
                postgres_transient(code)
            } else {
                sqlite_transient(code)
            }
        }
        _ => false,
    }
}

/// Postgres SQLSTATEs of a server going away or a race worth repeating.
fn postgres_transient(code: &str) -> bool {
    code.starts_with("08") // connection exception
        || matches!(
            code,
            "57P01" // admin_shutdown (a failover, `pg_ctl stop -m fast`)
                | "57P02" // crash_shutdown
                | "57P03" // cannot_connect_now (starting up, recovering)
                | "40001" // serialization_failure
                | "40P01" // deadlock_detected
                | "53300" // too_many_connections
                | "53100" // disk_full
                | "53200" // out_of_memory
        )
}

fn sqlite_transient(code: &str) -> bool {
    matches!(
        sqlite_primary(code),
        Some(SQLITE_BUSY | SQLITE_LOCKED | SQLITE_IOERR | SQLITE_FULL)
    )
}

impl From<StoreError> for RecordError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { kind, id } => RecordError::NotFound { kind, id },
            other if other.is_transient() => RecordError::Unavailable(other.to_string()),
            other => RecordError::Storage(other.to_string()),
        }
    }
}

/// Result alias of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// How a failed insert should be reported: unique violations become
/// [`StoreError::Conflict`]; everything else stays a database error. Foreign
/// key violations are resolved by the caller (it knows which parent to name).
pub(crate) fn classify_insert(kind: &'static str, err: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &err
        && db.is_unique_violation()
    {
        return StoreError::Conflict {
            kind,
            message: db.message().to_string(),
        };
    }
    StoreError::Database(err)
}

/// True when the error is a unique violation (the row collides with another).
pub(crate) fn is_unique_violation(err: &StoreError) -> bool {
    matches!(err, StoreError::Database(sqlx::Error::Database(db)) if db.is_unique_violation())
}

/// True when the error is a foreign key violation (a referenced parent row is missing).
pub(crate) fn is_foreign_key_violation(err: &StoreError) -> bool {
    matches!(err, StoreError::Database(sqlx::Error::Database(db)) if db.is_foreign_key_violation())
}
