//! Errors of the operator.

use kube_lease_manager::LeaseManagerError;
use tarsy_store::StoreError;

/// Errors of the operator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Kubernetes API failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Postgres failed.
    #[error("storage: {0}")]
    Store(#[from] StoreError),
    /// The finalizer helper failed.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    /// An object lacks a field the API server always sets.
    #[error("object has no {0}")]
    MissingField(&'static str),
    /// Serializing a patch failed.
    #[error("serialization: {0}")]
    Json(#[from] serde_json::Error),
    /// Leader election failed.
    #[error("leader election: {0}")]
    Lease(#[from] LeaseManagerError),
    /// This replica lost its Lease: it stops so that two replicas never both act.
    #[error("lost leadership")]
    LostLeadership,
    /// Serving metrics failed.
    #[error("HTTP server: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// Short kind for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Kube(_) => "kube",
            Self::Store(_) => "store",
            Self::Finalizer(_) => "finalizer",
            Self::MissingField(_) => "missing_field",
            Self::Json(_) => "json",
            Self::Lease(_) => "lease",
            Self::LostLeadership => "lost_leadership",
            Self::Io(_) => "io",
        }
    }
}
