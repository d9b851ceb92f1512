//! Launching one execution, the same way in every mode: mark it active,
//! open its MCP sessions (masked tool results, its tool filter), fetch its
//! runbook, run the engine with the process's circuit breakers until the
//! deadline or a cancel, close the MCP sessions.
//!
//! An [`Assignment`] cannot be built without a deadline, and it takes the
//! runbook URL from the session row itself, so no caller can forget either.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use tarsy_core::{
    EventPublisher, ExecutionRecorder, ExecutionStatus, McpServerConfig, RecordScope,
    ResolvedAgentConfig, TokenUsage,
};
use tarsy_engine::fallback::CircuitBreakers;
use tarsy_engine::prompt::FailedServer;
use tarsy_engine::{
    ChatContext, DeferringRecorder, ExecutionContext, ExecutionResult, InMemoryToolExecutor,
    LlmClient, ReflectionContext, ScoringContext, ToolExecutor, run_agent,
};
use tarsy_mcp::{ExecutorRequest, McpClientFactory};
use tarsy_store::{Session, Store};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::runbook::Runbooks;
use crate::tools::McpTools;

/// What the agent is asked to work on besides the alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentInput {
    /// An investigation, with the earlier stages' results (if any).
    Investigation {
        /// Formatted previous-stage context ([`crate::context`]).
        previous_stages: Option<String>,
    },
    /// The synthesis of a stage's parallel investigations.
    Synthesis {
        /// The formatted investigations ([`crate::context`]).
        investigations: String,
    },
    /// A follow-up chat answer.
    Chat(ChatContext),
    /// A judge scoring the finished investigation ([`crate::scoring`]).
    Scoring(ScoringContext),
    /// The reflector learning from a scored investigation
    /// ([`crate::memory`]).
    Reflection(ReflectionContext),
}

impl AgentInput {
    /// Investigations and syntheses read the alert's runbook; a chat answer
    /// works from the investigation history instead.
    fn uses_runbook(&self) -> bool {
        !matches!(self, Self::Chat(_) | Self::Reflection(_))
    }

    /// Investigations recall memories and get the recall tools.
    fn recalls(&self) -> bool {
        matches!(self, Self::Investigation { .. })
    }
}

/// One execution to run: who it is, what it works on, its limits.
#[derive(Clone)]
pub struct Assignment {
    scope: RecordScope,
    alert_type: String,
    alert_data: String,
    runbook_url: Option<String>,
    config: ResolvedAgentConfig,
    input: AgentInput,
    deadline: Instant,
    cancel: CancellationToken,
}

impl Assignment {
    /// Execution `execution_id` of stage `stage_id` of `session`, running
    /// `config` on `input`, stopped at `deadline` or when `cancel` fires.
    /// The alert and its runbook URL come from the session row.
    pub fn new(
        session: &Session,
        stage_id: impl Into<String>,
        execution_id: impl Into<String>,
        config: ResolvedAgentConfig,
        input: AgentInput,
        deadline: Instant,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            scope: RecordScope {
                session_id: session.id.clone(),
                stage_id: Some(stage_id.into()),
                execution_id: Some(execution_id.into()),
            },
            alert_type: session.alert_type.clone(),
            alert_data: session.alert_data.clone(),
            runbook_url: session.runbook_url.clone(),
            config,
            input,
            deadline,
            cancel,
        }
    }

    fn execution_id(&self) -> &str {
        self.scope.execution_id.as_deref().unwrap_or_default()
    }
}

/// How a launched execution went.
#[derive(Debug, Clone, PartialEq)]
pub struct Launched {
    /// The engine's result (or why it could not run).
    pub result: ExecutionResult,
    /// MCP servers of the agent that could not be used.
    pub failed_servers: Vec<FailedServer>,
    /// Time spent opening MCP sessions.
    pub mcp_init: Duration,
}

/// Told when the MCP sessions are open, with the servers that failed and
/// the tools each other server offers (the runner reports them in its
/// status before the engine starts).
pub type ToolsReady = Arc<dyn Fn(&[FailedServer], &BTreeMap<String, Vec<String>>) + Send + Sync>;

/// What every execution of a process shares.
#[derive(Clone)]
pub struct Launcher {
    /// Records and execution status.
    pub store: Store,
    /// The model (an [`crate::LlmRouter`] in both modes).
    pub llm: Arc<dyn LlmClient>,
    /// Opens MCP sessions (stdio children, streamable HTTP, SSE), masking
    /// every result.
    pub mcp: Arc<McpClientFactory>,
    /// Configurations of the usable MCP servers (prompt instructions).
    pub mcp_configs: BTreeMap<String, McpServerConfig>,
    /// Live events.
    pub publisher: Arc<dyn EventPublisher>,
    /// Provider circuit breakers of the process.
    pub breakers: Arc<CircuitBreakers>,
    /// Runbook downloads and their cache.
    pub runbooks: Arc<Runbooks>,
    /// Investigation memory (`None`: off).
    pub memory: Option<Arc<crate::memory::MemoryService>>,
}

/// How often an execution the store interrupted checks whether it is back.
const STORE_RECHECK: std::time::Duration = std::time::Duration::from_secs(2);

fn ended(status: ExecutionStatus, why: impl Into<String>) -> ExecutionResult {
    ExecutionResult::ended(status, why, TokenUsage::default(), 0)
}

impl Launcher {
    fn recorder(&self) -> Arc<dyn ExecutionRecorder> {
        Arc::new(self.store.clone())
    }

    /// Runs `a` to its end. The caller records the terminal status (it knows
    /// why a cancelled execution was stopped).
    ///
    /// An execution the store interrupted (its records could not be written
    /// for longer than the store's writes wait) is run again from its stored
    /// records once the store takes a write again: an outage of the
    /// database costs an investigation time, not its outcome. Should it be
    /// cancelled or reach its deadline meanwhile, it ends so.
    pub async fn run(&self, a: Assignment, on_tools: Option<ToolsReady>) -> Launched {
        loop {
            let launched = self.run_once(a.clone(), on_tools.clone()).await;
            let Some(why) = launched.result.interrupted.clone() else {
                return launched;
            };
            tracing::warn!(execution_id = %a.execution_id(), reason = %why, "execution interrupted by the store; it resumes once the store is back");
            if let Err(end) = self.wait_for_store(&a).await {
                return Launched {
                    result: ended(end.0, end.1),
                    ..launched
                };
            }
            tracing::info!(execution_id = %a.execution_id(), "the store is back; resuming the execution from its stored records");
        }
    }

    /// Waits until the store takes a write, or `a` is cancelled or reaches
    /// its deadline (`Err` with the end that makes).
    async fn wait_for_store(&self, a: &Assignment) -> Result<(), (ExecutionStatus, String)> {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(STORE_RECHECK) => {}
                _ = a.cancel.cancelled() => {
                    return Err((ExecutionStatus::Cancelled, "cancelled while waiting for the store".into()));
                }
                _ = tokio::time::sleep_until(a.deadline) => {
                    return Err((ExecutionStatus::TimedOut, "session timed out while waiting for the store".into()));
                }
            }
            match self.store.probe_write().await {
                Ok(()) => return Ok(()),
                Err(e) => tracing::debug!(error = %e, "the store is still unavailable"),
            }
        }
    }

    async fn run_once(&self, a: Assignment, on_tools: Option<ToolsReady>) -> Launched {
        let execution_id = a.execution_id().to_string();
        if let Err(e) = self
            .store
            .update_agent_execution_status(&execution_id, ExecutionStatus::Active, None)
            .await
        {
            tracing::warn!(%execution_id, error = %e, "cannot mark the execution active");
        }
        let mut warnings = Vec::new();
        let runbook = if a.input.uses_runbook() {
            let resolved = self.runbooks.resolve(a.runbook_url.as_deref()).await;
            if let Some(w) = &resolved.warning {
                tracing::warn!(session_id = %a.scope.session_id, warning = %w, "runbook not (fully) used");
            }
            warnings.extend(
                crate::runbook::report(&self.store, a.runbook_url.as_deref(), &resolved).await,
            );
            Some(resolved.content)
        } else {
            None
        };

        // The tool executor's MCP records join the engine's next write.
        let recorder = Arc::new(DeferringRecorder::new(self.recorder()));
        let mcp_started = StdInstant::now();
        let opened = self.open_tools(&a, recorder.clone()).await;
        let mcp_init = mcp_started.elapsed();
        tracing::debug!(
            mcp_init_ms = mcp_init.as_secs_f64() * 1000.0,
            "MCP sessions open"
        );
        let (tools, mcp_tools, failed) = match opened {
            Ok(t) => t,
            Err(result) => {
                flush_deferred(&recorder).await;
                return Launched {
                    result,
                    failed_servers: Vec::new(),
                    mcp_init,
                };
            }
        };
        for f in &failed {
            tracing::warn!(session_id = %a.scope.session_id, server = %f.server, error = %f.error, "MCP server unavailable for this execution");
        }
        if let Some(on_tools) = on_tools {
            let offered = match &mcp_tools {
                Some(t) => t.server_tools().await,
                None => BTreeMap::new(),
            };
            on_tools(&failed, &offered);
        }

        let (memories, tools) = self.recall(&a, tools, recorder.clone()).await;
        let scope = a.scope;
        let mut ctx = ExecutionContext::new(
            scope.session_id,
            scope.stage_id.unwrap_or_default(),
            execution_id,
            a.alert_type,
            a.alert_data,
            a.config.clone(),
            self.llm.clone(),
            tools,
            recorder.clone(),
            self.publisher.clone(),
        );
        ctx.runbook_content = runbook;
        ctx.memories = memories;
        ctx.warnings = warnings;
        ctx.mcp_servers = a
            .config
            .mcp_servers
            .iter()
            .filter_map(|n| self.mcp_configs.get(n).cloned())
            .collect();
        ctx.failed_servers = failed.clone();
        ctx.breakers = self.breakers.clone();
        ctx.cancel = a.cancel;
        ctx.deadline = Some(a.deadline);
        if a.config.budget.is_some() {
            ctx.spend = Some(Arc::new(crate::budget::StoreSpend::new(
                self.store.clone(),
                ctx.session_id.clone(),
            )));
        }
        let previous = match a.input {
            AgentInput::Investigation { previous_stages } => previous_stages,
            AgentInput::Synthesis { investigations } => Some(investigations),
            AgentInput::Chat(chat) => {
                ctx.chat = Some(chat);
                None
            }
            AgentInput::Scoring(scoring) => {
                ctx.scoring = Some(scoring);
                None
            }
            AgentInput::Reflection(reflection) => {
                ctx.reflection = Some(reflection);
                None
            }
        };
        let result = run_agent(ctx, previous).await;
        flush_deferred(&recorder).await;
        if let Some(t) = mcp_tools {
            // Stdio servers are child processes: they exit here.
            let _ = t.close().await;
        }
        Launched {
            result,
            failed_servers: failed,
            mcp_init,
        }
    }

    /// An investigation's memories (the prompt section) and its tools with
    /// the recall tools added, when memory is on and the session has a
    /// scope; otherwise nothing and `tools` as they are.
    async fn recall(
        &self,
        a: &Assignment,
        tools: Arc<dyn ToolExecutor>,
        recorder: Arc<DeferringRecorder>,
    ) -> (Option<String>, Arc<dyn ToolExecutor>) {
        let Some(memory) = self.memory.as_ref().filter(|_| a.input.recalls()) else {
            return (None, tools);
        };
        let session_id = &a.scope.session_id;
        let scope = match self.store.session_memory_scope(session_id).await {
            Ok(Some(scope)) => scope,
            Ok(None) => return (None, tools),
            Err(e) => {
                tracing::warn!(%session_id, error = %e, "no memory for this execution: the session is unreadable");
                return (None, tools);
            }
        };
        let memories = memory
            .inject(
                &self.store,
                session_id,
                (&a.alert_type, &a.alert_data),
                &scope,
            )
            .await;
        let tools = memory.tools(tools, self.store.clone(), scope, a.scope.clone(), recorder);
        (memories, tools)
    }

    /// The agent's tools: none, or its MCP servers (those that fail to
    /// start are listed for the prompt). Stops early on cancel or deadline.
    #[allow(clippy::type_complexity)]
    async fn open_tools(
        &self,
        a: &Assignment,
        recorder: Arc<DeferringRecorder>,
    ) -> Result<
        (
            Arc<dyn ToolExecutor>,
            Option<Arc<McpTools>>,
            Vec<FailedServer>,
        ),
        ExecutionResult,
    > {
        if a.config.mcp_servers.is_empty() {
            return Ok((Arc::new(InMemoryToolExecutor::new()), None, Vec::new()));
        }
        let request =
            ExecutorRequest::new(a.config.mcp_servers.clone(), a.config.tool_filter.clone())
                .with_recorder(recorder, a.scope.clone());
        let created = tokio::select! {
            created = self.mcp.create_executor(request) => created,
            _ = a.cancel.cancelled() => {
                return Err(ended(ExecutionStatus::Cancelled, "cancelled before the MCP servers started"));
            }
            _ = tokio::time::sleep_until(a.deadline) => {
                return Err(ended(ExecutionStatus::TimedOut, "session timed out while the MCP servers started"));
            }
        };
        match created {
            Ok(executor) => {
                let tools = Arc::new(McpTools::new(executor));
                let failed = tools.failed_servers();
                Ok((tools.clone(), Some(tools), failed))
            }
            Err(e) => Err(ended(
                ExecutionStatus::Failed,
                format!("cannot set up MCP tools: {e}"),
            )),
        }
    }
}

/// Writes the MCP records no later write took along (an execution that
/// ended before writing anything after its last tool call).
async fn flush_deferred(recorder: &DeferringRecorder) {
    if let Err(e) = recorder.flush().await {
        tracing::warn!(error = %e, "recording MCP interactions failed");
    }
}
