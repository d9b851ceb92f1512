//! The MCP client: one session per server, created on demand, recreated after
//! transport failures (once per failure, however many callers noticed it), a
//! tool cache that lives as long as the client. One client serves one agent
//! execution and is closed with it (the health monitor keeps its own).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, JsonObject, Tool};
use rmcp::service::ServiceError;
use rmcp::{ErrorData, Peer, RoleClient};
use tarsy_core::McpServerConfig;
use tokio::sync::{Mutex, OnceCell};

use crate::error::McpError;
use crate::recovery::{Recovery, classify, jittered_backoff};
use crate::timeouts::McpTimeouts;
use crate::transport::{self, ClientSession};

/// How long closing waits for a server to shut down before killing it.
const CLOSE_GRACE: Duration = Duration::from_secs(8);

/// The answer to a tools/call: the tool's result (which may itself be an
/// error the tool reported), or a JSON-RPC error from the server (unknown
/// tool, invalid arguments, ...).
#[derive(Debug, Clone)]
pub enum CallOutcome {
    /// The server ran the tool. `recovered`: the session broke during the
    /// call and was opened again, and this is the second attempt's answer;
    /// what the first attempt failed with.
    Completed {
        /// The tool's result.
        result: rmcp::model::CallToolResult,
        /// Why the call was made a second time, if it was.
        recovered: Option<String>,
    },
    /// The server refused the request.
    Rejected(ErrorData),
}

struct Session {
    peer: Peer<RoleClient>,
    running: Mutex<Option<ClientSession>>,
    generation: u64,
}

impl Session {
    async fn shutdown(&self) {
        let running = self.running.lock().await.take();
        if let Some(mut running) = running {
            // Dropping after the grace period kills a child that ignored us.
            let _ = running.close_with_timeout(CLOSE_GRACE).await;
        }
    }
}

#[derive(Default)]
struct SlotState {
    session: Option<Arc<Session>>,
    generation: u64,
    /// Why the last (re)initialisation failed; cleared by a success.
    failed: Option<String>,
}

struct Slot {
    config: McpServerConfig,
    /// Held while a session is created: concurrent callers wait for that one
    /// creation instead of each starting their own.
    state: Mutex<SlotState>,
    tools: OnceCell<Arc<Vec<Tool>>>,
    failed: StdMutex<Option<String>>,
}

/// Sessions with a set of MCP servers.
pub struct McpClient {
    slots: BTreeMap<String, Arc<Slot>>,
    timeouts: McpTimeouts,
    closed: AtomicBool,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("servers", &self.slots.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// A client for these servers; nothing is started until
    /// [`initialize`](Self::initialize) or the first use.
    pub fn new(servers: impl IntoIterator<Item = McpServerConfig>, timeouts: McpTimeouts) -> Self {
        let slots = servers
            .into_iter()
            .map(|config| {
                (
                    config.name.clone(),
                    Arc::new(Slot {
                        config,
                        state: Mutex::new(SlotState::default()),
                        tools: OnceCell::new(),
                        failed: StdMutex::new(None),
                    }),
                )
            })
            .collect();
        Self {
            slots,
            timeouts,
            closed: AtomicBool::new(false),
        }
    }

    /// The timeouts in force.
    pub fn timeouts(&self) -> &McpTimeouts {
        &self.timeouts
    }

    /// Configured server names.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.slots.keys().map(String::as_str)
    }

    /// The configuration of a server.
    pub fn server_config(&self, server: &str) -> Option<&McpServerConfig> {
        self.slots.get(server).map(|s| &s.config)
    }

    fn slot(&self, server: &str) -> Result<&Arc<Slot>, McpError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(McpError::Closed);
        }
        self.slots
            .get(server)
            .ok_or_else(|| McpError::UnknownServer(server.to_owned()))
    }

    /// Initialises every server concurrently. Failures do not fail the call:
    /// they are kept in [`failed_servers`](Self::failed_servers) (the prompt
    /// tells the model those servers are unavailable).
    pub async fn initialize(&self) {
        let inits = self.slots.keys().map(|s| self.initialize_server(s));
        for result in futures::future::join_all(inits).await {
            if let Err(e) = result {
                tracing::warn!(error = %e, "MCP server initialisation failed");
            }
        }
    }

    /// Initialises one server (no-op when it has a session).
    pub async fn initialize_server(&self, server: &str) -> Result<(), McpError> {
        self.session(server).await.map(|_| ())
    }

    /// Servers whose initialisation failed, with the reason.
    pub fn failed_servers(&self) -> BTreeMap<String, String> {
        self.slots
            .iter()
            .filter_map(|(name, slot)| {
                let failed = slot.failed.lock().unwrap_or_else(|p| p.into_inner());
                failed.clone().map(|reason| (name.clone(), reason))
            })
            .collect()
    }

    /// Whether the server has a live session.
    pub async fn has_session(&self, server: &str) -> bool {
        match self.slots.get(server) {
            Some(slot) => slot.state.lock().await.session.is_some(),
            None => false,
        }
    }

    fn set_failed(slot: &Slot, reason: Option<String>) {
        *slot.failed.lock().unwrap_or_else(|p| p.into_inner()) = reason;
    }

    /// The current session, created on first use. A server that failed to
    /// initialise stays unavailable for this client (use
    /// [`recreate_session`](Self::recreate_session) to try again).
    async fn session(&self, server: &str) -> Result<Arc<Session>, McpError> {
        let slot = self.slot(server)?;
        let mut state = slot.state.lock().await;
        if let Some(s) = &state.session {
            return Ok(s.clone());
        }
        if let Some(reason) = &state.failed {
            return Err(McpError::Unavailable {
                server: server.to_owned(),
                reason: reason.clone(),
            });
        }
        self.connect_locked(slot, &mut state, self.timeouts.init)
            .await
    }

    async fn connect_locked(
        &self,
        slot: &Slot,
        state: &mut SlotState,
        timeout: Duration,
    ) -> Result<Arc<Session>, McpError> {
        match transport::connect(&slot.config, timeout).await {
            Ok(running) => {
                state.generation += 1;
                let session = Arc::new(Session {
                    peer: running.peer().clone(),
                    running: Mutex::new(Some(running)),
                    generation: state.generation,
                });
                state.session = Some(session.clone());
                state.failed = None;
                Self::set_failed(slot, None);
                Ok(session)
            }
            Err(e) => {
                let reason = match &e {
                    McpError::Init { message, .. } | McpError::Config { message, .. } => {
                        message.clone()
                    }
                    other => other.to_string(),
                };
                state.failed = Some(reason.clone());
                Self::set_failed(slot, Some(reason));
                Err(e)
            }
        }
    }

    /// Replaces the server's session with a new one (reinit timeout). When
    /// `failed_generation` is given and another caller already replaced that
    /// session, the newer session is reused instead of creating another.
    pub async fn recreate_session(
        &self,
        server: &str,
        failed_generation: Option<u64>,
    ) -> Result<(), McpError> {
        self.recreate(server, failed_generation).await.map(|_| ())
    }

    async fn recreate(
        &self,
        server: &str,
        failed_generation: Option<u64>,
    ) -> Result<Arc<Session>, McpError> {
        let slot = self.slot(server)?;
        let mut state = slot.state.lock().await;
        if let (Some(current), Some(failed)) = (&state.session, failed_generation)
            && current.generation != failed
        {
            return Ok(current.clone());
        }
        if let Some(old) = state.session.take() {
            // The old session is broken; let it wind down on its own.
            tokio::spawn(async move { old.shutdown().await });
        }
        self.connect_locked(slot, &mut state, self.timeouts.reinit)
            .await
    }

    /// The operation deadline of a server: its HTTP `timeout` when configured,
    /// else the call timeout.
    fn operation_timeout(&self, server: &str) -> Duration {
        match self.slots.get(server).map(|s| &s.config.transport) {
            Some(tarsy_core::McpTransport::Http(h) | tarsy_core::McpTransport::Sse(h)) => {
                h.timeout.unwrap_or(self.timeouts.call)
            }
            _ => self.timeouts.call,
        }
    }

    /// Runs an operation with the deadline and the recovery policy: a
    /// transport failure recreates the session and retries once after a
    /// jittered backoff; anything else is returned as is. With the answer
    /// comes what a first attempt failed with, when the answer is the
    /// retry's.
    async fn with_recovery<T, F, Fut>(
        &self,
        server: &str,
        operation: &str,
        run: F,
    ) -> Result<(Result<T, ErrorData>, Option<String>), McpError>
    where
        F: Fn(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let timeout = self.operation_timeout(server);
        let mut session = self.session(server).await?;
        let mut first_failure: Option<String> = None;
        loop {
            let result = tokio::time::timeout(timeout, run(session.peer.clone())).await;
            let error = match result {
                Ok(Ok(value)) => return Ok((Ok(value), first_failure)),
                Ok(Err(ServiceError::McpError(data))) => return Ok((Err(data), first_failure)),
                Ok(Err(e)) => e,
                Err(_) => {
                    return Err(McpError::Timeout {
                        server: server.to_owned(),
                        operation: operation.to_owned(),
                        timeout,
                    });
                }
            };
            let message = transport::error_chain(&error);
            if let Some(first) = first_failure {
                return Err(McpError::Operation {
                    server: server.to_owned(),
                    operation: operation.to_owned(),
                    message: format!("{message} (first attempt: {first})"),
                    retried: true,
                });
            }
            if classify(&error) == Recovery::NoRetry {
                return Err(McpError::Operation {
                    server: server.to_owned(),
                    operation: operation.to_owned(),
                    message,
                    retried: false,
                });
            }
            tracing::info!(server, operation, error = %message, "MCP transport failure; retrying once on a new session");
            tokio::time::sleep(jittered_backoff(
                self.timeouts.retry_backoff_min,
                self.timeouts.retry_backoff_max,
            ))
            .await;
            session = match self.recreate(server, Some(session.generation)).await {
                Ok(s) => s,
                Err(e) => {
                    return Err(McpError::Operation {
                        server: server.to_owned(),
                        operation: operation.to_owned(),
                        message: format!("{message}; recreating the session failed: {e}"),
                        retried: true,
                    });
                }
            };
            first_failure = Some(message);
        }
    }

    /// The server's tools, fetched once per client (never invalidated: a
    /// client lives for one execution).
    pub async fn list_tools(&self, server: &str) -> Result<Arc<Vec<Tool>>, McpError> {
        let slot = self.slot(server)?;
        slot.tools
            .get_or_try_init(|| async {
                match self
                    .with_recovery(server, "tools/list", |peer| async move {
                        peer.list_all_tools().await
                    })
                    .await?
                    .0
                {
                    Ok(tools) => Ok(Arc::new(tools)),
                    Err(data) => Err(McpError::Operation {
                        server: server.to_owned(),
                        operation: "tools/list".to_owned(),
                        message: format!("server error {}: {}", data.code.0, data.message),
                        retried: false,
                    }),
                }
            })
            .await
            .cloned()
    }

    /// Calls a tool.
    pub async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallOutcome, McpError> {
        let operation = format!("tools/call '{tool}'");
        let (outcome, recovered) = self
            .with_recovery(server, &operation, |peer| {
                let params =
                    CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments.clone());
                async move { peer.call_tool(params).await }
            })
            .await?;
        Ok(match outcome {
            Ok(result) => CallOutcome::Completed { result, recovered },
            Err(data) => CallOutcome::Rejected(data),
        })
    }

    /// The names of the server's tools as it lists them now (not cached),
    /// without recovery, within `timeout`: the health check (it also tells
    /// what a selection may name).
    pub async fn tool_names(
        &self,
        server: &str,
        timeout: Duration,
    ) -> Result<Vec<String>, McpError> {
        let session = self.session(server).await?;
        match tokio::time::timeout(timeout, session.peer.list_all_tools()).await {
            Ok(Ok(tools)) => Ok(tools.into_iter().map(|t| t.name.into_owned()).collect()),
            Ok(Err(e)) => Err(McpError::Operation {
                server: server.to_owned(),
                operation: "tools/list".to_owned(),
                message: transport::error_chain(&e),
                retried: false,
            }),
            Err(_) => Err(McpError::Timeout {
                server: server.to_owned(),
                operation: "tools/list".to_owned(),
                timeout,
            }),
        }
    }

    /// Closes every session (stdio servers are asked to exit, then killed)
    /// and refuses further use.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let mut sessions = Vec::new();
        for slot in self.slots.values() {
            if let Some(s) = slot.state.lock().await.session.take() {
                sessions.push(s);
            }
        }
        futures::future::join_all(sessions.iter().map(|s| s.shutdown())).await;
    }
}
