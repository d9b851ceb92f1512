//! Startup validation and the runtime health monitor.
//!
//! At startup every configured server must initialise, or readiness fails
//! ([`validate_servers`]). At runtime a [`HealthMonitor`] keeps its own
//! long-lived sessions (never shared with executions), lists each server's
//! tools every 15 s (so submissions can be checked against them), recreates
//! a session that stopped answering, and raises or clears a system warning
//! per server.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex as StdMutex};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tarsy_core::McpServerConfig;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::client::McpClient;
use crate::error::McpError;
use crate::timeouts::McpTimeouts;
use crate::transport;
use crate::warnings::{CATEGORY_MCP_HEALTH, SystemWarnings};

/// Checks that every server initialises and lists its tools (init timeout
/// each, all concurrently), then closes the sessions. Returns every failure,
/// as `(server, error)`, sorted by server.
pub async fn validate_servers(
    configs: &[McpServerConfig],
    timeouts: McpTimeouts,
) -> Result<(), Vec<(String, String)>> {
    let checks = configs.iter().map(|config| async move {
        let result = async {
            let mut session = transport::connect(config, timeouts.init).await?;
            let listed = tokio::time::timeout(timeouts.call, session.peer().list_all_tools()).await;
            let _ = session
                .close_with_timeout(std::time::Duration::from_secs(5))
                .await;
            match listed {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(McpError::Init {
                    server: config.name.clone(),
                    message: format!("tools/list failed: {}", transport::error_chain(&e)),
                }),
                Err(_) => Err(McpError::Timeout {
                    server: config.name.clone(),
                    operation: "tools/list".to_owned(),
                    timeout: timeouts.call,
                }),
            }
        }
        .await;
        (config.name.clone(), result)
    });
    let mut failures: Vec<(String, String)> = futures::future::join_all(checks)
        .await
        .into_iter()
        .filter_map(|(name, r)| r.err().map(|e| (name, e.to_string())))
        .collect();
    failures.sort();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures)
    }
}

/// Health of one server as last checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerHealth {
    /// The last check succeeded.
    pub healthy: bool,
    /// When it was checked.
    pub checked_at: DateTime<Utc>,
    /// Why it is unhealthy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The tools it listed at its last successful check.
    #[serde(skip)]
    pub tools: Option<Vec<String>>,
}

/// Background health checks of the configured servers.
pub struct HealthMonitor {
    client: Arc<McpClient>,
    warnings: Arc<SystemWarnings>,
    statuses: Arc<StdMutex<BTreeMap<String, ServerHealth>>>,
    cancel: CancellationToken,
    task: StdMutex<Option<JoinHandle<()>>>,
}

impl HealthMonitor {
    /// A monitor of `servers` that reports into `warnings`. Nothing runs
    /// until [`start`](Self::start) or [`check_once`](Self::check_once).
    pub fn new(
        servers: impl IntoIterator<Item = McpServerConfig>,
        warnings: Arc<SystemWarnings>,
        timeouts: McpTimeouts,
    ) -> Self {
        Self {
            client: Arc::new(McpClient::new(servers, timeouts)),
            warnings,
            statuses: Arc::new(StdMutex::new(BTreeMap::new())),
            cancel: CancellationToken::new(),
            task: StdMutex::new(None),
        }
    }

    /// Checks every server once, concurrently.
    pub async fn check_once(&self) {
        check_all(&self.client, &self.warnings, &self.statuses).await;
    }

    /// Starts the loop: a check now, then one per interval, until
    /// [`stop`](Self::stop). Calling it twice has no effect.
    pub fn start(&self) {
        let mut task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if task.is_some() {
            return;
        }
        let client = self.client.clone();
        let warnings = self.warnings.clone();
        let statuses = self.statuses.clone();
        let cancel = self.cancel.clone();
        let interval = client.timeouts().health_interval;
        *task = Some(tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = ticker.tick() => {}
                }
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = check_all(&client, &warnings, &statuses) => {}
                }
            }
        }));
    }

    /// Stops the loop and closes the monitor's sessions.
    pub async fn stop(&self) {
        self.cancel.cancel();
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
        self.client.close().await;
    }

    /// Last known status of each server (absent before its first check).
    pub fn statuses(&self) -> BTreeMap<String, ServerHealth> {
        self.statuses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The tools `server` listed at its last successful check (`None`: not
    /// monitored, or never listed).
    pub fn tool_names(&self, server: &str) -> Option<Vec<String>> {
        self.statuses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(server)
            .and_then(|s| s.tools.clone())
    }

    /// True when every server passed its last check.
    pub fn is_healthy(&self) -> bool {
        let statuses = self.statuses();
        self.client
            .servers()
            .all(|s| statuses.get(s).is_some_and(|st| st.healthy))
    }
}

async fn check_all(
    client: &McpClient,
    warnings: &SystemWarnings,
    statuses: &StdMutex<BTreeMap<String, ServerHealth>>,
) {
    let servers: Vec<String> = client.servers().map(str::to_owned).collect();
    let results = futures::future::join_all(servers.iter().map(|s| check_server(client, s))).await;
    for (server, result) in servers.into_iter().zip(results) {
        let mut statuses = statuses.lock().unwrap_or_else(|p| p.into_inner());
        // A failed check keeps the last known tools: a submission naming
        // them is still right when the server comes back.
        let known = statuses.get(&server).and_then(|s| s.tools.clone());
        let status = ServerHealth {
            healthy: result.is_ok(),
            checked_at: Utc::now(),
            error: result.as_ref().err().cloned(),
            tools: result.as_ref().ok().cloned().or(known),
        };
        tarsy_telemetry::global().mcp_health(&server, result.is_ok());
        match &result {
            Ok(_) => {
                if warnings.clear(CATEGORY_MCP_HEALTH, Some(&server)) {
                    tracing::info!(server = %server, "MCP server healthy again");
                }
            }
            Err(e) => {
                tracing::warn!(server = %server, error = %e, "MCP server unhealthy");
                warnings.add(
                    CATEGORY_MCP_HEALTH,
                    format!("MCP server '{server}' is not responding"),
                    e.clone(),
                    Some(&server),
                );
            }
        }
        statuses.insert(server, status);
    }
}

/// Lists the tools (a ping that also says what the server offers); when
/// that fails, recreates the session and lists again.
async fn check_server(client: &McpClient, server: &str) -> Result<Vec<String>, String> {
    let timeout = client.timeouts().health_ping;
    let first = match client.tool_names(server, timeout).await {
        Ok(tools) => return Ok(tools),
        Err(e) => e,
    };
    tracing::debug!(server, error = %first, "health check failed; recreating the session");
    client
        .recreate_session(server, None)
        .await
        .map_err(|e| e.to_string())?;
    client
        .tool_names(server, timeout)
        .await
        .map_err(|e| e.to_string())
}

/// What a per-alert MCP selection may name: the tools each server listed
/// at its last successful check.
impl tarsy_core::ToolCatalog for HealthMonitor {
    fn tool_names(&self, server: &str) -> Option<Vec<String>> {
        HealthMonitor::tool_names(self, server)
    }
}
