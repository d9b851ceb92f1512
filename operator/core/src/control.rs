//! The contract between the API and whichever mode runs sessions: what an
//! alert submission, a cancel request, a chat question and a scoring
//! request are, what they
//! answer and why they are refused. The API checks the shape of requests
//! and reads records straight from the store; it never runs a session. Local mode
//! implements [`SessionControl`] in process; cluster mode by creating and
//! patching `Alert` resources.

use async_trait::async_trait;

use crate::{InvalidAlert, McpSelection, SessionStatus};

/// An alert submitted to TARSy (through the API, as an Alert resource or by
/// the Alertmanager bridge), ready to be checked
/// (`tarsy_config::Config::check_alert`) and to become a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAlert {
    /// The alert type (selects the chain unless `chain` is given).
    pub alert_type: String,
    /// The alert payload as text (at most [`crate::MAX_ALERT_DATA_BYTES`]).
    pub data: String,
    /// An explicit chain, overriding resolution by alert type.
    pub chain: Option<String>,
    /// Runbook to include in prompts.
    pub runbook_url: Option<String>,
    /// Per-alert MCP server override (replace, not merge).
    pub mcp_selection: Option<McpSelection>,
    /// Who submitted it (`X-Forwarded-User`, `X-Forwarded-Email` or `api-client`).
    pub author: String,
}

/// The session created for an alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertAccepted {
    /// The new session's id.
    pub session_id: String,
    /// The chain it will run.
    pub chain_id: String,
    /// Its status now (normally pending).
    pub status: SessionStatus,
}

/// Why an alert was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The alert breaks a rule of a valid alert (HTTP 400; 413 for data over
    /// the limit).
    #[error(transparent)]
    Invalid(#[from] InvalidAlert),
    /// Refused by the system that records it for a reason of its own: the
    /// Kubernetes API server's validation, the store's (HTTP 400).
    #[error("{0}")]
    Refused(String),
    /// The system cannot take alerts now, e.g. shutting down (HTTP 503).
    #[error("{0}")]
    Unavailable(String),
    /// An unexpected failure (HTTP 500).
    #[error("{0}")]
    Internal(String),
}

/// What a cancel request stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The session's investigation is being cancelled.
    Session {
        /// Its status after the request (cancelling, or cancelled when
        /// nothing was running yet).
        status: SessionStatus,
    },
    /// The session's active chat answer is being cancelled.
    Chat {
        /// The chat.
        chat_id: String,
        /// The stage answering the message.
        stage_id: String,
    },
}

/// Why a cancel request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CancelError {
    /// No such session (HTTP 404).
    #[error("session {0:?} not found")]
    NotFound(String),
    /// The session is terminal and no chat answer is running (HTTP 409).
    #[error("session is {status}: nothing to cancel")]
    NothingToCancel {
        /// The session's status.
        status: SessionStatus,
    },
    /// Cannot cancel now, e.g. the database is unavailable (HTTP 503).
    #[error("{0}")]
    Unavailable(String),
    /// An unexpected failure (HTTP 500).
    #[error("{0}")]
    Internal(String),
}

/// A chat question accepted by the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatSubmission {
    /// The session the chat extends.
    pub session_id: String,
    /// The question (trimmed, non-empty).
    pub content: String,
    /// Who asks.
    pub author: String,
}

/// A chat question that will be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatAccepted {
    /// The session's chat.
    pub chat_id: String,
    /// The stored question.
    pub message_id: String,
    /// The stage that answers it.
    pub stage_id: String,
    /// True when this message opened the chat (the API then publishes
    /// `chat.created` before `chat.user_message`).
    pub chat_created: bool,
}

/// Why a chat question was refused. The implementation deletes the question
/// it stored when it refuses after storing it (no orphan messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// No such session (HTTP 404).
    #[error("session {0:?} not found")]
    NotFound(String),
    /// Chat is only for completed, failed and timed-out sessions (HTTP 409).
    #[error(
        "session is {status}: chat is available once the investigation has completed, failed or timed out"
    )]
    NotAvailable {
        /// The session's status.
        status: SessionStatus,
    },
    /// Another message of this chat is still being answered (HTTP 409).
    #[error("chat {chat_id} is still answering a previous message; wait for it or cancel it")]
    Busy {
        /// The chat.
        chat_id: String,
    },
    /// The session's chain has chat disabled (HTTP 400).
    #[error("chat is not enabled for chain {0:?}")]
    Disabled(String),
    /// Anything else wrong with the question (HTTP 400).
    #[error("{0}")]
    Invalid(String),
    /// Cannot take questions now, e.g. shutting down (HTTP 503).
    #[error("{0}")]
    Unavailable(String),
    /// An unexpected failure (HTTP 500).
    #[error("{0}")]
    Internal(String),
}

/// A scoring request accepted: a judge will score the session (the attempt
/// and its score arrive as `session.score` events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreAccepted {
    /// The session to be scored.
    pub session_id: String,
}

/// Why a scoring request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScoreError {
    /// No such session (HTTP 404).
    #[error("session {0:?} not found")]
    NotFound(String),
    /// Only a finished session is scored (HTTP 400).
    #[error("session is {status}: only a finished investigation is scored")]
    NotFinished {
        /// The session's status.
        status: SessionStatus,
    },
    /// A judge is scoring the session already (HTTP 409).
    #[error("session {session_id:?} is being scored already; wait for the score")]
    Busy {
        /// The session.
        session_id: String,
    },
    /// The judge cannot be resolved, e.g. the chain is gone (HTTP 400).
    #[error("{0}")]
    Invalid(String),
    /// Cannot score now, e.g. shutting down (HTTP 503).
    #[error("{0}")]
    Unavailable(String),
    /// An unexpected failure (HTTP 500).
    #[error("{0}")]
    Internal(String),
}

/// Session orchestration as the API needs it.
#[async_trait]
pub trait SessionControl: Send + Sync {
    /// Checks the alert against the rules of a valid alert
    /// (`tarsy_config::Config::check_alert`: the API itself checks only the
    /// request's shape) and creates the session (pending). Cluster mode
    /// creates an `Alert` resource whose UID becomes the session id.
    async fn submit_alert(&self, alert: NewAlert) -> Result<AlertAccepted, SubmitError>;

    /// Cancels the session's investigation if it is still running, otherwise
    /// its active chat answer.
    async fn cancel(&self, session_id: &str) -> Result<CancelOutcome, CancelError>;

    /// Opens the chat if needed, stores the question, creates its stage and
    /// starts answering it; returns at once (the answer streams as events).
    /// Before the answer can emit anything, the implementation publishes the
    /// question (`tarsy_events::lifecycle::publish_chat_accepted`), so that
    /// subscribers always see `chat.created` / `chat.user_message` before
    /// the answer's stage.
    async fn submit_chat_message(
        &self,
        submission: ChatSubmission,
    ) -> Result<ChatAccepted, ChatError>;

    /// Has a judge score the finished session again (a new attempt; the
    /// earlier ones are kept). Returns once the attempt is on its way.
    async fn rescore(&self, session_id: &str) -> Result<ScoreAccepted, ScoreError>;

    /// Lets investigation memory learn from the feedback text of the
    /// finished session's review, just stored (the feedback reflector
    /// reads it there), in the background. Fail-open; a mode without
    /// memory does nothing (the default).
    async fn learn_from_feedback(&self, _session_id: &str) {}
}
