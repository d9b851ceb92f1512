//! Errors of the execution layer.

/// What can stop a step of the flow: a configuration that cannot be used, a
/// storage call, a reference that no longer resolves.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The configuration cannot be used (a script file that does not parse,
    /// a masking pattern that does not compile, ...).
    #[error("configuration: {0}")]
    Config(String),
    /// A storage call failed.
    #[error(transparent)]
    Store(#[from] tarsy_store::StoreError),
    /// Hierarchy resolution failed (unknown agent, provider, ...).
    #[error(transparent)]
    Resolve(#[from] tarsy_config::ResolveError),
    /// A session or execution references something that no longer exists.
    #[error("{0}")]
    Invalid(String),
}

/// Results of this crate.
pub type Result<T, E = ExecError> = std::result::Result<T, E>;
