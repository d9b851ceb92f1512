//! The agent execution entry point: [`run_agent`] with its
//! [`ExecutionContext`] and [`ExecutionResult`].

use std::sync::Arc;
use std::time::Duration;

use tarsy_core::{
    EventPublisher, ExecutionRecorder, ExecutionStatus, McpServerConfig, ResolvedAgentConfig,
    SpendGauge, TokenUsage,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::fallback::CircuitBreakers;
use crate::llm::LlmClient;
use crate::prompt::FailedServer;
use crate::retry::ServiceRetry;
use crate::strategy::{Judge, Reflect, Strategy, strategy_for};
use crate::tools::ToolExecutor;

/// Chat data: present only when the execution answers a follow-up question.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatContext {
    /// The user's question.
    pub question: String,
    /// The session's formatted timeline (investigation and earlier chat),
    /// from [`crate::context`]'s investigation formatter.
    pub investigation_context: String,
}

/// Scoring-specific data: present only for a judge's execution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScoringContext {
    /// The finished session's formatted timeline, from [`crate::context`]'s
    /// investigation formatter.
    pub investigation: String,
}

/// Reflection-specific data: present only for a reflector's execution
/// (kind `memory`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReflectionContext {
    /// How the reflector works and answers (its system instructions).
    pub instructions: String,
    /// What it reflects on: the investigation and the memories it may
    /// reinforce or deprecate.
    pub prompt: String,
}

/// Something found before the run started that the timeline shows (as an
/// `error` event whose `metadata.kind` is `kind`), e.g. a runbook that could
/// not be fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionWarning {
    /// Machine-readable kind (one of `tarsy_core::error_kind`), e.g.
    /// `runbook_unavailable`.
    pub kind: String,
    /// What happened, for the user.
    pub message: String,
}

/// Everything one agent execution needs. Build it with [`ExecutionContext::new`]
/// and set the optional fields directly.
pub struct ExecutionContext {
    /// Session (alert) id.
    pub session_id: String,
    /// Stage id.
    pub stage_id: String,
    /// Agent execution id.
    pub execution_id: String,
    /// Alert type.
    pub alert_type: String,
    /// Alert payload (already masked), passed to the model verbatim.
    pub alert_data: String,
    /// Runbook text, already fetched (`None`: no runbook section).
    pub runbook_content: Option<String>,
    /// Memories recalled for this investigation, rendered as a prompt
    /// section (`None`: none).
    pub memories: Option<String>,
    /// Problems met while preparing the run, recorded on the timeline first.
    pub warnings: Vec<ExecutionWarning>,
    /// Resolved agent configuration: strategy, provider (with fallbacks),
    /// iteration budget and timeout, servers, custom instructions.
    pub config: ResolvedAgentConfig,
    /// Configurations of the MCP servers (instructions for the prompt,
    /// summarization thresholds). Servers the agent does not use are ignored.
    pub mcp_servers: Vec<McpServerConfig>,
    /// Servers that failed to start for this execution: the model is told.
    pub failed_servers: Vec<FailedServer>,
    /// Chat data for chat executions.
    pub chat: Option<ChatContext>,
    /// The investigation to judge, for scoring executions: the run is then
    /// the judge's two turns, whatever the configured strategy.
    pub scoring: Option<ScoringContext>,
    /// The investigation to learn from, for a reflector's execution: the
    /// run is then one tool-less turn, whatever the configured strategy.
    pub reflection: Option<ReflectionContext>,
    /// The model.
    pub llm: Arc<dyn LlmClient>,
    /// The tools (the caller owns it and closes it after the run).
    pub tools: Arc<dyn ToolExecutor>,
    /// Where records go.
    pub recorder: Arc<dyn ExecutionRecorder>,
    /// Where live events go.
    pub publisher: Arc<dyn EventPublisher>,
    /// Provider circuit breakers (share one instance per process).
    pub breakers: Arc<CircuitBreakers>,
    /// Waits between attempts while the LLM service is unreachable (within
    /// each iteration's timeout).
    pub service_retry: ServiceRetry,
    /// Cancelling it stops the execution with status `cancelled`.
    pub cancel: CancellationToken,
    /// The session deadline: reaching it stops the execution with status
    /// `timed_out`.
    pub deadline: Option<Instant>,
    /// What the session has spent, read before each iteration when the
    /// configuration has a budget (`None`: the budget is not checked).
    pub spend: Option<Arc<dyn SpendGauge>>,
}

impl ExecutionContext {
    /// A context with the required parts; optional parts are empty, the
    /// breakers are private to this execution, the service retry has its
    /// defaults, no deadline, a fresh token.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        session_id: impl Into<String>,
        stage_id: impl Into<String>,
        execution_id: impl Into<String>,
        alert_type: impl Into<String>,
        alert_data: impl Into<String>,
        config: ResolvedAgentConfig,
        llm: Arc<dyn LlmClient>,
        tools: Arc<dyn ToolExecutor>,
        recorder: Arc<dyn ExecutionRecorder>,
        publisher: Arc<dyn EventPublisher>,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            stage_id: stage_id.into(),
            execution_id: execution_id.into(),
            alert_type: alert_type.into(),
            alert_data: alert_data.into(),
            runbook_content: None,
            memories: None,
            warnings: Vec::new(),
            config,
            mcp_servers: Vec::new(),
            failed_servers: Vec::new(),
            chat: None,
            scoring: None,
            reflection: None,
            llm,
            tools,
            recorder,
            publisher,
            breakers: Arc::new(CircuitBreakers::default()),
            service_retry: ServiceRetry::default(),
            cancel: CancellationToken::new(),
            deadline: None,
            spend: None,
        }
    }

    /// Sets the session deadline `timeout` from now.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.deadline = Some(Instant::now() + timeout);
        self
    }
}

/// How an execution ended. Everything it produced on the way is recorded
/// already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionResult {
    /// Terminal status: completed, failed, timed_out or cancelled.
    pub status: ExecutionStatus,
    /// The agent's conclusion (completed executions).
    pub final_analysis: Option<String>,
    /// Why it did not complete.
    pub error: Option<String>,
    /// Tokens used by every call of the execution (summaries included).
    pub usage: TokenUsage,
    /// Iterations started.
    pub iterations: u32,
    /// The store could not take the execution's records for longer than
    /// its writes wait (an outage, a full disk): the execution stopped
    /// without an outcome of its own, and goes on from its stored records
    /// once the store is back ([`ExecutionResult::interrupted`]). `status`
    /// is then not the execution's end and must not be recorded as such.
    pub interrupted: Option<String>,
}

impl ExecutionResult {
    /// A completed result.
    pub fn completed(final_analysis: String, usage: TokenUsage, iterations: u32) -> Self {
        Self {
            status: ExecutionStatus::Completed,
            final_analysis: Some(final_analysis),
            error: None,
            usage,
            iterations,
            interrupted: None,
        }
    }

    /// A non-completed result.
    pub fn ended(
        status: ExecutionStatus,
        error: impl Into<String>,
        usage: TokenUsage,
        iterations: u32,
    ) -> Self {
        Self {
            status,
            final_analysis: None,
            error: Some(error.into()),
            usage,
            iterations,
            interrupted: None,
        }
    }

    /// A result of an execution the store could not record for too long
    /// (see [`ExecutionResult::interrupted`]).
    pub fn interrupted(why: impl Into<String>, usage: TokenUsage, iterations: u32) -> Self {
        let why = why.into();
        Self {
            status: ExecutionStatus::Failed,
            final_analysis: None,
            error: Some(why.clone()),
            usage,
            iterations,
            interrupted: Some(why),
        }
    }

    /// Whether the execution stopped without an outcome of its own (see
    /// [`ExecutionResult::interrupted`]).
    pub fn is_interrupted(&self) -> bool {
        self.interrupted.is_some()
    }
}

/// Runs one agent execution to a terminal status.
///
/// The strategy is chosen by `ctx.config.iteration_strategy`:
/// `native-thinking` / `langchain` → function calling, `react` → ReAct,
/// `synthesis` / `synthesis-native-thinking` → synthesis, `single-call` →
/// one tool-less call. `prev_stage_context` is the previous stages' context
/// (investigations) or the formatted parallel investigations (synthesis).
///
/// Everything is recorded while it happens: timeline events (streamed),
/// messages, LLM interaction records. The function never panics on model
/// output and never returns an error: failures are a `failed` result with a
/// reason. Stop it with `ctx.cancel` (→ `cancelled`) or `ctx.deadline`
/// (→ `timed_out`); both close in-flight events properly. Dropping the
/// future also stops it (the LLM call is cancelled), but leaves streaming
/// events open. The caller closes `ctx.tools` afterwards.
pub async fn run_agent(
    ctx: ExecutionContext,
    prev_stage_context: Option<String>,
) -> ExecutionResult {
    let strategy: Box<dyn Strategy> = if ctx.scoring.is_some() {
        Box::new(Judge)
    } else if ctx.reflection.is_some() {
        Box::new(Reflect)
    } else {
        strategy_for(ctx.config.iteration_strategy)
    };
    let result = strategy.run(&ctx, prev_stage_context.as_deref()).await;
    tracing::info!(
        session_id = %ctx.session_id,
        execution_id = %ctx.execution_id,
        agent = %ctx.config.display_name,
        status = %result.status,
        iterations = result.iterations,
        "agent execution finished"
    );
    result
}
