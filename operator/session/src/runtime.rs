//! What every session and chat task of the process shares, and the steps
//! they have in common: events, tools, one agent execution, the executive
//! summary.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tarsy_config::Config;
use tarsy_core::{
    EventPublisher, ExecutionRecorder, ExecutionStatus, McpServerConfig, RecordScope,
    ResolvedAgentConfig, SessionStatus,
};
use tarsy_crds::ChainSpec;
use tarsy_engine::fallback::CircuitBreakers;
use tarsy_engine::prompt::FailedServer;
use tarsy_engine::runbook::{CachingRunbookSource, RunbookError, RunbookFetcher, RunbookSettings};
use tarsy_engine::{
    ChatContext, ExecutionContext, ExecutionResult, InMemoryToolExecutor, LlmClient, ToolExecutor,
    run_agent,
};
use tarsy_masking::MaskingService;
use tarsy_mcp::{ExecutorRequest, McpClientFactory};
use tarsy_store::Store;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::executive_summary::Summarizer;
use crate::llm::LlmRouter;
use crate::tools::McpTools;

/// Timing knobs of the driver (tests shorten them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverSettings {
    /// How often the admission loop looks for pending sessions even when
    /// nobody woke it (sessions created by another process).
    pub poll_interval: Duration,
    /// How often a running session records that its owner is alive.
    pub heartbeat_interval: Duration,
    /// A session in progress whose owner showed no sign of life for this
    /// long is taken over (its owner died) at start-up.
    pub orphan_timeout: Duration,
    /// Limit of the executive summary call.
    pub summary_timeout: Duration,
    /// How long shutdown waits for running executions to record their end.
    pub shutdown_grace: Duration,
}

impl Default for DriverSettings {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(2),
            heartbeat_interval: Duration::from_secs(30),
            orphan_timeout: Duration::from_secs(5 * 60),
            summary_timeout: crate::executive_summary::DEFAULT_SUMMARY_TIMEOUT,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Why an execution that was still running is recorded as failed.
pub(crate) const INTERRUPTED_BY_SHUTDOWN: &str =
    "interrupted: TARSy shut down before the execution finished";

/// A session being driven by this process.
pub(crate) struct RunningSession {
    /// Wakes the session's loop (a cancel request arrived).
    pub(crate) wake: Arc<Notify>,
}

/// A chat answer being produced.
pub(crate) struct ActiveChat {
    /// The session the chat belongs to.
    pub(crate) session_id: String,
    /// The stage answering the message (empty while it is being created).
    pub(crate) stage_id: String,
    /// Cancels the answer.
    pub(crate) cancel: CancellationToken,
}

/// Downloads runbooks over HTTP(S).
pub(crate) struct HttpRunbookFetcher {
    client: reqwest::Client,
}

impl HttpRunbookFetcher {
    pub(crate) fn new() -> Self {
        Self {
            client: reqwest::Client::new(),
        }
    }
}

#[async_trait]
impl RunbookFetcher for HttpRunbookFetcher {
    async fn fetch(&self, url: &str) -> Result<String, RunbookError> {
        let response = self
            .client
            .get(url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| RunbookError::fetch(url, e.to_string()))?;
        response
            .text()
            .await
            .map_err(|e| RunbookError::fetch(url, e.to_string()))
    }
}

/// The shared state of the local driver.
pub(crate) struct Runtime {
    pub(crate) store: Store,
    pub(crate) config: Arc<Config>,
    pub(crate) llm: Arc<LlmRouter>,
    pub(crate) mcp: Arc<McpClientFactory>,
    pub(crate) mcp_configs: BTreeMap<String, McpServerConfig>,
    pub(crate) masking: Arc<MaskingService>,
    pub(crate) publisher: Arc<dyn EventPublisher>,
    pub(crate) breakers: Arc<CircuitBreakers>,
    pub(crate) runbooks: CachingRunbookSource<HttpRunbookFetcher>,
    pub(crate) pod_id: String,
    pub(crate) max_concurrent: usize,
    pub(crate) settings: DriverSettings,
    pub(crate) running: Mutex<HashMap<String, RunningSession>>,
    pub(crate) chats: Mutex<HashMap<String, ActiveChat>>,
    /// Wakes the admission loop (a session was submitted or ended).
    pub(crate) admission: Notify,
    pub(crate) shutdown: CancellationToken,
    pub(crate) tasks: TaskTracker,
}

/// Locks a mutex, surviving a poisoned one (the maps stay usable).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One agent execution to run.
pub(crate) struct ExecutionRequest {
    pub(crate) session_id: String,
    pub(crate) stage_id: String,
    pub(crate) execution_id: String,
    pub(crate) alert_type: String,
    pub(crate) alert_data: String,
    pub(crate) runbook: Option<String>,
    pub(crate) config: ResolvedAgentConfig,
    pub(crate) prev_context: Option<String>,
    pub(crate) chat: Option<ChatContext>,
    pub(crate) cancel: CancellationToken,
    pub(crate) deadline: Instant,
}

impl Runtime {
    pub(crate) fn recorder(&self) -> Arc<dyn ExecutionRecorder> {
        Arc::new(self.store.clone())
    }

    /// `session.status` on the session's channel and on the session list.
    pub(crate) async fn publish_session_status(&self, session_id: &str, status: SessionStatus) {
        tarsy_events::lifecycle::publish_session_status(
            self.publisher.as_ref(),
            session_id,
            status,
        )
        .await;
    }

    /// `stage.status` (started, completed, failed, timed_out, cancelled).
    pub(crate) async fn publish_stage_status(
        &self,
        session_id: &str,
        stage_id: &str,
        stage_name: &str,
        stage_index: i64,
        status: &str,
    ) {
        let stage = tarsy_events::lifecycle::StageRef {
            id: stage_id,
            name: stage_name,
            index: stage_index,
        };
        tarsy_events::lifecycle::publish_stage_status(
            self.publisher.as_ref(),
            session_id,
            stage,
            status,
        )
        .await;
    }

    /// Configurations of the servers an agent uses (prompt instructions).
    fn server_configs(&self, names: &[String]) -> Vec<McpServerConfig> {
        names
            .iter()
            .filter_map(|n| self.mcp_configs.get(n).cloned())
            .collect()
    }

    /// Runs one execution to its end: marks it active, opens its MCP
    /// sessions (child processes for stdio servers), runs the engine, closes
    /// the sessions. The caller records the terminal status.
    pub(crate) async fn run_execution(&self, req: ExecutionRequest) -> ExecutionResult {
        if let Err(e) = self
            .store
            .update_agent_execution_status(&req.execution_id, ExecutionStatus::Active, None)
            .await
        {
            tracing::warn!(execution_id = %req.execution_id, error = %e, "cannot mark execution active");
        }
        let scope = RecordScope {
            session_id: req.session_id.clone(),
            stage_id: Some(req.stage_id.clone()),
            execution_id: Some(req.execution_id.clone()),
        };
        let (tools, mcp_tools, failed): (Arc<dyn ToolExecutor>, _, Vec<FailedServer>) = if req
            .config
            .mcp_servers
            .is_empty()
        {
            (Arc::new(InMemoryToolExecutor::new()), None, Vec::new())
        } else {
            let request = ExecutorRequest::new(
                req.config.mcp_servers.clone(),
                req.config.tool_filter.clone(),
            )
            .with_recorder(self.recorder(), scope);
            let created = tokio::select! {
                created = self.mcp.create_executor(request) => created,
                _ = req.cancel.cancelled() => {
                    return ExecutionResult::ended(ExecutionStatus::Cancelled, "cancelled before the MCP servers started", Default::default(), 0);
                }
                _ = tokio::time::sleep_until(req.deadline) => {
                    return ExecutionResult::ended(ExecutionStatus::TimedOut, "session timed out while the MCP servers started", Default::default(), 0);
                }
            };
            match created {
                Ok(executor) => {
                    let tools = Arc::new(McpTools::new(executor));
                    let failed = tools.failed_servers();
                    (tools.clone() as Arc<dyn ToolExecutor>, Some(tools), failed)
                }
                Err(e) => {
                    return ExecutionResult::ended(
                        ExecutionStatus::Failed,
                        format!("cannot set up MCP tools: {e}"),
                        Default::default(),
                        0,
                    );
                }
            }
        };
        for f in &failed {
            tracing::warn!(session_id = %req.session_id, server = %f.server, error = %f.error, "MCP server unavailable for this execution");
        }
        let mut ctx = ExecutionContext::new(
            req.session_id,
            req.stage_id,
            req.execution_id,
            req.alert_type,
            req.alert_data,
            req.config.clone(),
            self.llm.clone() as Arc<dyn LlmClient>,
            tools.clone(),
            self.recorder(),
            self.publisher.clone(),
        );
        ctx.runbook_content = req.runbook;
        ctx.mcp_servers = self.server_configs(&req.config.mcp_servers);
        ctx.failed_servers = failed;
        ctx.chat = req.chat;
        ctx.breakers = self.breakers.clone();
        ctx.cancel = req.cancel;
        ctx.deadline = Some(req.deadline);
        let result = run_agent(ctx, req.prev_context).await;
        if let Some(t) = mcp_tools {
            // Stdio servers are child processes: they exit here.
            let _ = t.close().await;
        }
        result
    }

    /// The executive summary of a final analysis
    /// ([`crate::executive_summary::Summarizer::generate`]; fail-open: the
    /// caller records the error and completes the session).
    pub(crate) async fn executive_summary(
        &self,
        session_id: &str,
        chain: &ChainSpec,
        final_analysis: &str,
    ) -> Result<String, String> {
        Summarizer {
            llm: self.llm.clone(),
            store: self.store.clone(),
            publisher: self.publisher.clone(),
            timeout: self.settings.summary_timeout,
        }
        .generate(&self.config, session_id, chain, final_analysis)
        .await
        .map_err(|e| e.to_string())
    }
}

/// The runbook source of the process.
pub(crate) fn runbook_source() -> CachingRunbookSource<HttpRunbookFetcher> {
    CachingRunbookSource::new(HttpRunbookFetcher::new(), RunbookSettings::default())
}
