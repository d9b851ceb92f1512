//! Errors of the runner.

/// Why the runner could not run (or record) its execution.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// Bad command line or environment.
    #[error("invalid runner input: {0}")]
    Invalid(String),
    /// The Kubernetes API refused or failed a request.
    #[error("kubernetes API: {context}: {source}")]
    Kube {
        /// What was being done.
        context: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Postgres could not be reached within the retry budget.
    #[error("Postgres unreachable after {attempts} attempts over {waited_secs}s: {last}")]
    DatabaseUnreachable {
        /// Attempts made.
        attempts: u32,
        /// Seconds spent trying.
        waited_secs: u64,
        /// Last error.
        last: String,
    },
    /// A store operation failed.
    #[error("store: {0}")]
    Store(#[from] tarsy_store::StoreError),
    /// The execution's configuration cannot be rebuilt.
    #[error("configuration: {0}")]
    Config(String),
    /// The pod was stopped without a stop request (eviction, node drain):
    /// nothing is recorded, a replacement pod resumes the execution.
    #[error("interrupted without a stop request; a replacement pod resumes the execution")]
    Interrupted,
}

impl RunnerError {
    pub(crate) fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            context: context.into(),
            source,
        }
    }
}
