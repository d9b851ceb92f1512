//! An MCP server for TARSy's tests, speaking stdio or streamable HTTP, whose
//! tools misbehave on demand: large output, tool errors, JSON-RPC errors,
//! slow answers, a Kubernetes Secret full of planted secrets, environment
//! echo, and crashing the whole process in the middle of a call.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// Largest output `large_output` produces (bytes).
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024 * 1024;

/// Secret values planted in [`KUBERNETES_SECRET_YAML`]: none may survive
/// masking. The base64 ones decode to the plain ones.
pub const PLANTED_SECRETS: &[&str] = &[
    "c3VwZXJzZWNyZXRwYXNzd29yZA==",
    "supersecretpassword",
    "QUtJQVRFU1RFWEFNUExFMDAwMQ==",
    "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
    "ghp_T3stT0kenF0rTarsyMaskingC0rpus12345",
];

/// A Secret as `kubectl get secret -o yaml` prints it, with secrets in
/// `data`, `stringData` and the last-applied annotation.
pub const KUBERNETES_SECRET_YAML: &str = r#"apiVersion: v1
kind: Secret
metadata:
  name: payments-db
  namespace: payments
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Secret","metadata":{"name":"payments-db","namespace":"payments"},"stringData":{"api-token":"sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"}}
type: Opaque
data:
  password: c3VwZXJzZWNyZXRwYXNzd29yZA==
  aws-key: QUtJQVRFU1RFWEFNUExFMDAwMQ==
stringData:
  github-token: ghp_T3stT0kenF0rTarsyMaskingC0rpus12345
"#;

/// Input of `echo`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EchoInput {
    /// Text to return.
    pub text: String,
}

/// Input of `large_output`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct LargeOutputInput {
    /// Size of the output in bytes.
    pub bytes: usize,
}

/// Input of `fail`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FailInput {
    /// Error text.
    pub message: String,
}

/// Input of `slow`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SlowInput {
    /// Milliseconds to sleep before answering.
    pub ms: u64,
}

/// Input of `crash`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CrashInput {
    /// When set: crash only if this file does not exist yet (and create it),
    /// otherwise answer normally. Lets a test see one crash, then recovery.
    #[serde(default)]
    pub once_marker: Option<String>,
    /// Exit code (default 3).
    #[serde(default)]
    pub exit_code: Option<i32>,
}

/// Input of `env`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EnvInput {
    /// Variable name.
    pub name: String,
}

/// The test server.
#[derive(Debug, Clone)]
pub struct TestServer {
    tool_router: ToolRouter<Self>,
}

impl Default for TestServer {
    fn default() -> Self {
        Self::new()
    }
}

fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}

#[tool_router]
impl TestServer {
    /// A server with all tools.
    pub fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Returns its input text unchanged")]
    async fn echo(
        &self,
        Parameters(input): Parameters<EchoInput>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(text(input.text))
    }

    #[tool(description = "Returns numbered lines totalling the requested number of bytes")]
    async fn large_output(
        &self,
        Parameters(input): Parameters<LargeOutputInput>,
    ) -> Result<CallToolResult, ErrorData> {
        if input.bytes > MAX_OUTPUT_BYTES {
            return Err(ErrorData::invalid_params(
                format!("bytes must be at most {MAX_OUTPUT_BYTES}"),
                None,
            ));
        }
        Ok(text(large_text(input.bytes)))
    }

    #[tool(description = "Reports a tool error (isError) with the given message")]
    async fn fail(
        &self,
        Parameters(input): Parameters<FailInput>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::error(vec![ContentBlock::text(
            input.message,
        )]))
    }

    #[tool(description = "Answers with a JSON-RPC invalid-params error")]
    async fn reject(&self) -> Result<CallToolResult, ErrorData> {
        Err(ErrorData::invalid_params(
            "this tool always rejects its parameters",
            None,
        ))
    }

    #[tool(description = "Sleeps for the given milliseconds, then answers")]
    async fn slow(
        &self,
        Parameters(input): Parameters<SlowInput>,
    ) -> Result<CallToolResult, ErrorData> {
        tokio::time::sleep(Duration::from_millis(input.ms)).await;
        Ok(text(format!("slept {} ms", input.ms)))
    }

    #[tool(description = "Returns a Kubernetes Secret manifest (YAML) with planted secrets")]
    async fn get_secret(&self) -> Result<CallToolResult, ErrorData> {
        Ok(text(KUBERNETES_SECRET_YAML))
    }

    #[tool(description = "Returns the value of an environment variable of the server process")]
    async fn env(
        &self,
        Parameters(input): Parameters<EnvInput>,
    ) -> Result<CallToolResult, ErrorData> {
        match std::env::var(&input.name) {
            Ok(v) => Ok(text(v)),
            Err(_) => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "{} is not set",
                input.name
            ))])),
        }
    }

    #[tool(description = "Exits the server process in the middle of the call")]
    async fn crash(
        &self,
        Parameters(input): Parameters<CrashInput>,
    ) -> Result<CallToolResult, ErrorData> {
        if let Some(marker) = &input.once_marker {
            if std::path::Path::new(marker).exists() {
                return Ok(text("survived: already crashed once"));
            }
            if let Err(e) = std::fs::write(marker, b"crashed") {
                return Err(ErrorData::internal_error(
                    format!("cannot write marker: {e}"),
                    None,
                ));
            }
        }
        std::process::exit(input.exit_code.unwrap_or(3));
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions("TARSy test server: tools that misbehave on demand.")
    }
}

/// Deterministic text of exactly `bytes` bytes: numbered lines.
pub fn large_text(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 64);
    let mut n = 0u64;
    while out.len() < bytes {
        n += 1;
        out.push_str(&format!(
            "line {n:08}: the quick brown fox jumps over the lazy dog\n"
        ));
    }
    out.truncate(bytes);
    out
}

/// Serves over stdin/stdout until the client closes stdin.
pub async fn serve_stdio() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let service = TestServer::new().serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}

/// The streamable HTTP endpoint (`/mcp`) as an axum router; `cancel` ends
/// its sessions.
pub fn http_router(cancel: CancellationToken) -> axum::Router {
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(TestServer::new()),
            Arc::default(),
            StreamableHttpServerConfig::default().with_cancellation_token(cancel),
        );
    axum::Router::new().nest_service("/mcp", service)
}

/// A streamable HTTP server running in the background.
pub struct HttpServer {
    /// Bound address.
    pub addr: SocketAddr,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    /// The MCP endpoint URL.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Stops serving and waits.
    pub async fn stop(self) {
        self.cancel.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}

/// Serves streamable HTTP on `addr` (port 0 picks one) in the background.
pub async fn spawn_http(addr: SocketAddr) -> std::io::Result<HttpServer> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let cancel = CancellationToken::new();
    let router = http_router(cancel.child_token());
    let shutdown = cancel.clone();
    // As MCP servers written in Go, Python or Node do: small answers leave
    // without waiting for the client's ACK of the previous write.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
    });
    Ok(HttpServer { addr, cancel, task })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_text_has_the_exact_size() {
        for n in [0, 1, 57, 58, 59, 100_000] {
            assert_eq!(large_text(n).len(), n);
        }
        assert!(large_text(200).starts_with("line 00000001: "));
    }

    #[test]
    fn planted_secrets_are_in_the_manifest() {
        for s in PLANTED_SECRETS.iter().filter(|s| !s.starts_with("super")) {
            assert!(KUBERNETES_SECRET_YAML.contains(s), "{s}");
        }
    }
}
