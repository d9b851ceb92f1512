//! Errors of the local driver.

/// What can stop the local app from starting or a session step from being
/// applied.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The configuration cannot be used (a script file that does not parse,
    /// a masking pattern that does not compile, ...).
    #[error("configuration: {0}")]
    Config(String),
    /// A storage call failed.
    #[error(transparent)]
    Store(#[from] tarsy_store::StoreError),
    /// The database cannot be opened because its disk is full.
    #[error("cannot open the database: its disk is full; free some space and start again ({0})")]
    DiskFull(tarsy_store::StoreError),
    /// A step of the execution layer failed.
    #[error(transparent)]
    Exec(#[from] tarsy_exec::ExecError),
    /// Hierarchy resolution failed (unknown agent, provider, ...).
    #[error(transparent)]
    Resolve(#[from] tarsy_config::ResolveError),
    /// The API listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// A stdio MCP server a chain uses names a command that does not exist.
    #[error(transparent)]
    MissingCommand(#[from] crate::stdio::MissingCommand),
    /// A session references something that no longer exists.
    #[error("{0}")]
    Invalid(String),
}

impl SessionError {
    /// The store could not be reached (or could not take a write): the same
    /// step may well succeed later.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Store(e) | Self::Exec(tarsy_exec::ExecError::Store(e)) => e.is_transient(),
            _ => false,
        }
    }
}

/// Results of this crate.
pub type Result<T, E = SessionError> = std::result::Result<T, E>;
