//! The LLM client: one streamed model turn per call.
//!
//! [`LlmClient::generate`] returns a stream of [`Chunk`]s. Dropping the stream
//! abandons the call (the gRPC implementation cancels the RPC, which reaches
//! the provider through the LLM service), so cancellation and timeouts are
//! the caller's `select!`/drop, nothing more.
//!
//! Implementations: [`GrpcLlmClient`] reaches the LLM service;
//! [`ScriptedLlmClient`] replays a script file in process (the `scripted`
//! provider type). [`GrpcEmbedder`] embeds texts for investigation memory
//! through the same service (`Embed`), on the same connection.

mod embed;
mod grpc;
mod scripted;

use std::collections::BTreeMap;
use std::pin::Pin;

use async_trait::async_trait;
use futures::Stream;
use serde::{Deserialize, Serialize};
use tarsy_core::{
    Backend, ConversationMessage, LlmProviderConfig, TokenUsage, ToolCall, ToolDefinition,
};

pub use embed::{DEFAULT_EMBED_TIMEOUT, EMBED_BATCH, GrpcEmbedder};
pub use grpc::GrpcLlmClient;
pub use scripted::ScriptedLlmClient;

/// Everything one model call needs.
#[derive(Debug, Clone)]
pub struct GenerateInput {
    /// Session id (logging and tracing in the service).
    pub session_id: String,
    /// Execution id (the service's thought-signature cache key).
    pub execution_id: String,
    /// The full conversation, oldest first.
    pub messages: Vec<ConversationMessage>,
    /// Provider and model.
    pub provider: LlmProviderConfig,
    /// Native tools override for this alert (replaces the provider's map).
    pub native_tools_override: Option<BTreeMap<String, bool>>,
    /// Service backend (from the iteration strategy).
    pub backend: Backend,
    /// Tools bound for function calling; empty = none.
    pub tools: Vec<ToolDefinition>,
    /// Ask the service to drop provider state cached for the execution.
    pub clear_cache: bool,
}

/// Native tool grounding returned by Gemini.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grounding {
    /// Google Search queries the model issued.
    pub web_search_queries: Vec<String>,
    /// Sources as (uri, title).
    pub sources: Vec<GroundingSource>,
    /// URLs fetched through url_context.
    pub url_context: Vec<UrlContext>,
}

/// One grounding source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroundingSource {
    /// Page URI.
    pub uri: String,
    /// Page title.
    pub title: String,
}

/// One url_context retrieval.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlContext {
    /// The URL.
    pub url: String,
    /// Retrieval status.
    pub status: String,
}

/// The code of a call that failed because the LLM service itself could not
/// be reached, or the connection to it broke mid-stream (see
/// [`LlmErrorInfo::is_service_unavailable`]). The engine waits such failures
/// out on the same provider instead of treating them as the provider's.
pub const LLM_SERVICE_UNAVAILABLE: &str = "llm_service_unavailable";

/// A failure reported inside the stream (by the provider, the service or the
/// transport).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("LLM error [{code}]: {message}")]
pub struct LlmErrorInfo {
    /// Error text.
    pub message: String,
    /// Code: credentials, invalid_request, max_retries, partial_stream_error,
    /// provider_error, invalid_backend, internal, context_overflow (all
    /// reported by the LLM service, in the stream), [`LLM_SERVICE_UNAVAILABLE`]
    /// when the service could not be reached, or `transport` for the other
    /// gRPC failures.
    pub code: String,
    /// True when another attempt (possibly on a fallback provider) may succeed.
    pub retryable: bool,
}

impl LlmErrorInfo {
    /// An unreachable LLM service (retryable).
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: LLM_SERVICE_UNAVAILABLE.into(),
            retryable: true,
        }
    }

    /// The provider rejected the request because the conversation is too long.
    pub fn is_context_overflow(&self) -> bool {
        self.code == "context_overflow"
    }

    /// The LLM service could not be reached (or went away mid-stream): the
    /// provider behind it was not asked, or its answer was cut off. Errors
    /// the service reports itself (a provider's 429 or 500 included) never
    /// have this code.
    pub fn is_service_unavailable(&self) -> bool {
        self.code == LLM_SERVICE_UNAVAILABLE
    }
}

/// One streamed piece of a model turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    /// Answer text delta.
    Text(String),
    /// Native thinking delta.
    Thinking(String),
    /// A complete tool call.
    ToolCall(ToolCall),
    /// Gemini code execution: code, output, or both.
    CodeExecution {
        /// Generated code.
        code: String,
        /// Output.
        result: String,
    },
    /// Search / URL-context grounding.
    Grounding(Grounding),
    /// Token usage of the call.
    Usage(TokenUsage),
    /// The call failed; nothing useful follows.
    Error(LlmErrorInfo),
}

/// A stream of chunks; it ends after the final chunk or an error.
pub type ChunkStream = Pin<Box<dyn Stream<Item = Chunk> + Send>>;

/// Failure to start a call at all.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The service could not be reached or refused the call.
    #[error("LLM service unavailable: {0}")]
    Unavailable(String),
    /// The request was rejected before streaming started.
    #[error("LLM request rejected: {0}")]
    Rejected(String),
}

impl LlmError {
    /// The error as an in-stream error, so callers handle one shape.
    pub fn into_info(self) -> LlmErrorInfo {
        match self {
            LlmError::Unavailable(m) => LlmErrorInfo {
                message: m,
                code: "transport".into(),
                retryable: true,
            },
            LlmError::Rejected(m) => LlmErrorInfo {
                message: m,
                code: "invalid_request".into(),
                retryable: false,
            },
        }
    }
}

/// A model, reached through the LLM service (or a test double).
#[async_trait]
pub trait LlmClient: Send + Sync {
    /// Starts one model turn. The returned stream is cancelled by dropping it.
    async fn generate(&self, input: GenerateInput) -> Result<ChunkStream, LlmError>;
}
