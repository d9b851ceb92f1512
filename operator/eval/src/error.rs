//! Errors of the eval runner.

use std::path::PathBuf;

/// Why cases could not be found, loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A case is malformed or cannot run; names the case.
    #[error("case {case}: {problem}")]
    Case {
        /// Case name (or directory).
        case: String,
        /// What is wrong.
        problem: String,
    },
    /// No case directory (one with a `case.yaml`) was found.
    #[error("no evaluation case (a directory with case.yaml) in {}", .0.display())]
    NoCases(PathBuf),
    /// A directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration cannot be used.
    #[error("configuration: {0}")]
    Config(String),
    /// Local mode failed.
    #[error(transparent)]
    Local(#[from] tarsy_local::SessionError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] tarsy_store::StoreError),
}
