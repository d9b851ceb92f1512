//! Transports: turns an [`McpServerConfig`] into a running rmcp client
//! session over stdio (child process), streamable HTTP or legacy HTTP+SSE.

pub mod http;
pub mod sse;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::common::client_side_sse::SseRetryPolicy;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use tarsy_core::{McpServerConfig, McpTransport};
use tokio::io::AsyncBufReadExt;

use crate::error::McpError;

/// A live MCP session with one server.
pub type ClientSession = RunningService<RoleClient, ClientConfig>;

/// How TARSy introduces itself to MCP servers. It opens sessions with the
/// `initialize` handshake, so it offers the newest version that has one;
/// servers answer with the version they speak.
pub fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("tarsy", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

/// Connects and performs the MCP handshake, within `timeout`.
pub async fn connect(
    config: &McpServerConfig,
    timeout: Duration,
) -> Result<ClientSession, McpError> {
    let server = config.name.as_str();
    let init_error = |message: String| McpError::Init {
        server: server.to_owned(),
        message,
    };
    let connecting = async {
        match &config.transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                // The child inherits our environment; the configured variables
                // are added on top.
                cmd.args(args).envs(env);
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| init_error(format!("cannot start '{command}': {e}")))?;
                if let Some(stderr) = stderr {
                    forward_stderr(server.to_owned(), stderr);
                }
                client_info()
                    .serve(transport)
                    .await
                    .map_err(|e| init_error(e.to_string()))
            }
            McpTransport::Http(http) => {
                let client = http::build_client(server, http)?;
                let mut cfg = StreamableHttpClientTransportConfig::with_uri(http.url.as_str())
                    .custom_headers(http::custom_headers(server, http)?);
                if let Some(token) = &http.bearer_token {
                    cfg = cfg.auth_header(token.expose());
                }
                cfg.retry_config = Arc::new(BoundedReconnect::default());
                let transport = StreamableHttpClientTransport::with_client(client, cfg);
                client_info()
                    .serve(transport)
                    .await
                    .map_err(|e| init_error(e.to_string()))
            }
            McpTransport::Sse(http) => {
                let client = http::build_client(server, http)?;
                let headers = http::all_headers(server, http)?;
                let transport =
                    sse::SseClientTransport::connect(client, &http.url, headers, http.timeout)
                        .await
                        .map_err(|e| init_error(error_chain(&e)))?;
                client_info()
                    .serve(transport)
                    .await
                    .map_err(|e| init_error(e.to_string()))
            }
        }
    };
    match tokio::time::timeout(timeout, connecting).await {
        Ok(result) => result,
        Err(_) => Err(init_error(format!(
            "initialisation timed out after {}s",
            timeout.as_secs_f64()
        ))),
    }
}

/// How often an interrupted event stream is reopened before the pending
/// requests fail. rmcp's default retries forever with growing delays, which
/// turns a crashed server into a call that hangs until its deadline; failing
/// fast hands the failure to our own recovery (a fresh session).
#[derive(Debug, Clone, Copy)]
pub struct BoundedReconnect {
    /// Attempts.
    pub max_attempts: usize,
    /// Delay before each attempt.
    pub delay: Duration,
}

impl Default for BoundedReconnect {
    fn default() -> Self {
        Self {
            max_attempts: 2,
            delay: Duration::from_millis(200),
        }
    }
}

impl SseRetryPolicy for BoundedReconnect {
    fn retry(&self, current_times: usize) -> Option<Duration> {
        (current_times < self.max_attempts).then_some(self.delay)
    }
}

/// A server's stderr goes to our logs (at debug level: servers are chatty),
/// masked (a server may print what it read), never to the model.
fn forward_stderr(server: String, stderr: tokio::process::ChildStderr) {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tracing::enabled!(tracing::Level::DEBUG) {
                let line = tarsy_masking::mask_log_line(&line);
                tracing::debug!(server = %server, "mcp server stderr: {line}");
            }
        }
    });
}

/// An error and its causes on one line.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let s = e.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        source = e.source();
    }
    text
}
