//! The embedder seam: text to vectors, for similarity between a memory and
//! an alert. Optional: without an embedder, retrieval is full text alone.

use async_trait::async_trait;

/// Why texts could not be embedded. Recall goes on with full text alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmbedError {
    /// The embedding service could not be reached or failed.
    #[error("embedding service unavailable: {0}")]
    Unavailable(String),
    /// The service answered something unusable (wrong count of vectors,
    /// vectors of different lengths).
    #[error("unusable embedding answer: {0}")]
    Invalid(String),
}

/// Turns texts into vectors, one per text, all of one length.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Vectors of `texts`, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}
