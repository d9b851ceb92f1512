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
}

impl From<StoreError> for RecordError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { kind, id } => RecordError::NotFound { kind, id },
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

/// True when the error is a foreign key violation (a referenced parent row is missing).
pub(crate) fn is_foreign_key_violation(err: &StoreError) -> bool {
    matches!(err, StoreError::Database(sqlx::Error::Database(db)) if db.is_foreign_key_violation())
}
