//! Errors of the MCP client. Tool failures the model should see are not
//! errors: they come back as `ToolResult { is_error: true }`. These are the
//! infrastructure failures (a server that cannot be reached, a timeout, a bad
//! configuration) that the caller must handle.

use std::time::Duration;

use tarsy_core::SelectionError;

/// An MCP infrastructure failure.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server is not configured.
    #[error("unknown MCP server '{0}'")]
    UnknownServer(String),
    /// A per-alert selection override names servers that do not exist.
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// The server's configuration cannot be turned into a transport.
    #[error("invalid configuration of MCP server '{server}': {message}")]
    Config {
        /// Server name.
        server: String,
        /// What is wrong.
        message: String,
    },
    /// The server could not be initialised (spawn, connect or handshake).
    #[error("MCP server '{server}' failed to initialise: {message}")]
    Init {
        /// Server name.
        server: String,
        /// Cause.
        message: String,
    },
    /// The server failed to initialise for this execution earlier; calls to it
    /// are refused without trying again.
    #[error("MCP server '{server}' is unavailable: {reason}")]
    Unavailable {
        /// Server name.
        server: String,
        /// Why it failed.
        reason: String,
    },
    /// An operation did not finish in time.
    #[error("MCP server '{server}': {operation} timed out after {}s", timeout.as_secs_f64())]
    Timeout {
        /// Server name.
        server: String,
        /// `tools/call <tool>` or `tools/list`.
        operation: String,
        /// The limit that was hit.
        timeout: Duration,
    },
    /// The transport or protocol failed.
    #[error("MCP server '{server}': {operation} failed{}: {message}", if *retried { " (also after a retry on a new session)" } else { "" })]
    Operation {
        /// Server name.
        server: String,
        /// `tools/call <tool>` or `tools/list`.
        operation: String,
        /// Cause.
        message: String,
        /// Whether a retry on a fresh session was made (and failed).
        retried: bool,
    },
    /// The executor or client was closed.
    #[error("the MCP client is closed")]
    Closed,
}

impl McpError {
    /// The server this error is about, if any.
    pub fn server(&self) -> Option<&str> {
        match self {
            McpError::UnknownServer(s) => Some(s),
            McpError::Config { server, .. }
            | McpError::Init { server, .. }
            | McpError::Unavailable { server, .. }
            | McpError::Timeout { server, .. }
            | McpError::Operation { server, .. } => Some(server),
            McpError::Selection(_) | McpError::Closed => None,
        }
    }
}
