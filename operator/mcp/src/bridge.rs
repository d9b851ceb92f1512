//! `tarsy mcp-bridge`: serves a stdio MCP server over streamable HTTP, so an
//! investigation pod reaches stdio-only servers the same way it reaches
//! container sidecars (`http://127.0.0.1:PORT/mcp`).
//!
//! The bridge starts the command, performs the MCP handshake with it, then
//! answers HTTP clients by forwarding their requests (tools, resources,
//! prompts, completions) to the child over its single stdio session. Many
//! HTTP sessions share that child. Server-initiated notifications (list
//! changes, logging) are not forwarded.
//!
//! Lifecycle: the child's exit ends the bridge, which reports the child's
//! exit status; SIGTERM or SIGINT to the bridge sends SIGTERM to the child,
//! waits for it ([`CHILD_GRACE`], then kills it) and stops serving.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerConfig,
};
use rmcp::service::{RequestContext, RunningService, ServiceError};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleClient, RoleServer, ServerHandler, ServiceExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::transport::client_info;

/// Default listen address: loopback, since the runner shares the pod's
/// network namespace.
pub const DEFAULT_LISTEN: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// Path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";
/// How long the child gets to exit after SIGTERM before it is killed.
pub const CHILD_GRACE: Duration = Duration::from_secs(10);
/// How long the child gets to complete the MCP handshake.
pub const INIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Errors that stop the bridge before the child runs normally.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The command could not be started.
    #[error("cannot start '{command}': {source}")]
    Spawn {
        /// The command.
        command: String,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// The child did not complete the MCP handshake.
    #[error("the MCP server did not initialise: {0}")]
    Init(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for the child failed.
    #[error("waiting for the MCP server process failed: {0}")]
    Wait(#[source] std::io::Error),
    /// Installing signal handlers failed.
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] std::io::Error),
}

/// What to bridge.
#[derive(Debug, Clone)]
pub struct StdioBridgeConfig {
    /// Listen address (default 127.0.0.1).
    pub listen: IpAddr,
    /// Port; 0 picks a free one (tests).
    pub port: u16,
    /// Executable of the stdio MCP server.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Handshake timeout.
    pub init_timeout: Duration,
}

impl StdioBridgeConfig {
    /// Bridge `command args` on `127.0.0.1:port`.
    pub fn new(port: u16, command: impl Into<String>, args: Vec<String>) -> Self {
        Self {
            listen: DEFAULT_LISTEN,
            port,
            command: command.into(),
            args,
            init_timeout: INIT_TIMEOUT,
        }
    }
}

/// Serves `command args` (a stdio MCP server) at `http://listen:port/mcp`
/// until the child exits or the bridge receives SIGTERM/SIGINT; returns the
/// child's exit status (the CLI exits with it).
pub async fn run(
    listen: IpAddr,
    port: u16,
    command: &str,
    args: &[String],
) -> Result<ExitStatus, BridgeError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(BridgeError::Signals)?;
    let mut int = signal(SignalKind::interrupt()).map_err(BridgeError::Signals)?;
    let config = StdioBridgeConfig {
        listen,
        ..StdioBridgeConfig::new(port, command, args.to_vec())
    };
    let bridge = start(config).await?;
    tracing::info!(url = %bridge.url(), command, "MCP bridge serving");
    let stop = bridge.stopper();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::info!("MCP bridge stopping on signal");
        stop.cancel();
    });
    bridge.wait().await
}

/// A started bridge.
#[derive(Debug)]
pub struct RunningBridge {
    addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<Result<ExitStatus, BridgeError>>,
}

impl RunningBridge {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint URL.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    /// Asks the bridge to stop (SIGTERM to the child, then stop serving).
    pub fn stop(&self) {
        self.stop.cancel();
    }

    fn stopper(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Waits for the bridge to end; returns the child's exit status.
    pub async fn wait(self) -> Result<ExitStatus, BridgeError> {
        match self.task.await {
            Ok(result) => result,
            Err(e) => Err(BridgeError::Wait(std::io::Error::other(e))),
        }
    }
}

/// Starts the child, completes the handshake, binds the listener and serves
/// in the background.
pub async fn start(config: StdioBridgeConfig) -> Result<RunningBridge, BridgeError> {
    let mut child = Command::new(&config.command)
        .args(&config.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| BridgeError::Spawn {
            command: config.command.clone(),
            source,
        })?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(BridgeError::Init("child stdio unavailable".to_owned()));
    };
    let handshake = tokio::time::timeout(config.init_timeout, client_info().serve((stdout, stdin)));
    let upstream = match handshake.await {
        Ok(Ok(service)) => service,
        Ok(Err(e)) => {
            let status = stop_child(&mut child).await;
            return Err(BridgeError::Init(format!("{e} (server exit: {status})")));
        }
        Err(_) => {
            stop_child(&mut child).await;
            return Err(BridgeError::Init(format!(
                "handshake timed out after {}s",
                config.init_timeout.as_secs_f64()
            )));
        }
    };
    let proxy = Proxy::new(&upstream);

    let addr = SocketAddr::new(config.listen, config.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| BridgeError::Bind { addr, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| BridgeError::Bind { addr, source })?;

    let serving = CancellationToken::new();
    let mut http_config =
        StreamableHttpServerConfig::default().with_cancellation_token(serving.child_token());
    if !config.listen.is_loopback() {
        // Host checks guard desktop servers against DNS rebinding from a
        // browser; a pod-local bridge reached by IP must accept its address.
        http_config = http_config.disable_allowed_hosts();
    }
    let service: StreamableHttpService<Proxy, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(proxy.clone()), Arc::default(), http_config);
    let router = axum::Router::new().nest_service(MCP_PATH, service);
    // Small answers leave at once instead of waiting for the client's ACK of
    // the previous write (the client keeps its connections alive).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let server = {
        let serving = serving.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(serving.cancelled_owned())
                .await;
        })
    };

    let stop = CancellationToken::new();
    let task = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let status = tokio::select! {
                status = child.wait() => status.map_err(BridgeError::Wait),
                _ = stop.cancelled() => Ok(stop_child(&mut child).await),
            };
            serving.cancel();
            // Open event streams can hold a graceful shutdown forever.
            if tokio::time::timeout(Duration::from_secs(5), server)
                .await
                .is_err()
            {
                tracing::warn!("MCP bridge HTTP server did not stop in time");
            }
            drop(upstream);
            status
        })
    };
    Ok(RunningBridge { addr, stop, task })
}

/// SIGTERM, then SIGKILL after [`CHILD_GRACE`]; returns the exit status.
async fn stop_child(child: &mut Child) -> ExitStatus {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) on our own child's pid has no memory effects.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        if let Ok(Ok(status)) = tokio::time::timeout(CHILD_GRACE, child.wait()).await {
            return status;
        }
    }
    let _ = child.kill().await;
    match child.wait().await {
        Ok(status) => status,
        // Reaped already: report a kill.
        Err(_) => std::os::unix::process::ExitStatusExt::from_raw(libc::SIGKILL),
    }
}

fn upstream_error(e: ServiceError) -> ErrorData {
    match e {
        ServiceError::McpError(data) => data,
        other => ErrorData::internal_error(format!("upstream MCP server: {other}"), None),
    }
}

/// Forwards requests to the child's session.
#[derive(Clone)]
struct Proxy {
    peer: Peer<RoleClient>,
    info: ServerConfig,
}

impl Proxy {
    fn new(upstream: &RunningService<RoleClient, rmcp::model::ClientConfig>) -> Self {
        let peer = upstream.peer().clone();
        let info = match peer.peer_info() {
            Some(p) => {
                let mut info = ServerConfig::new(p.capabilities.clone()).with_server_info(
                    p.server_info.clone().unwrap_or_else(|| {
                        Implementation::new("tarsy-mcp-bridge", env!("CARGO_PKG_VERSION"))
                    }),
                );
                info.instructions = p.instructions.clone();
                info
            }
            None => ServerConfig::new(Default::default()),
        };
        Self { peer, info }
    }
}

impl ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        self.info.clone()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.peer.list_tools(request).await.map_err(upstream_error)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.peer
            .call_tool_once(request)
            .await
            .map_err(upstream_error)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.peer
            .list_resources(request)
            .await
            .map_err(upstream_error)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.peer
            .list_resource_templates(request)
            .await
            .map_err(upstream_error)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.peer
            .read_resource_once(request)
            .await
            .map_err(upstream_error)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.peer
            .list_prompts(request)
            .await
            .map_err(upstream_error)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.peer
            .get_prompt_once(request)
            .await
            .map_err(upstream_error)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.peer.complete(request).await.map_err(upstream_error)
    }
}
