//! One execution's shared machinery. A [`Run`] holds the conversation, the
//! recorder, the provider chain and the loop state; the iteration strategies
//! (`crate::strategy`) drive it. Split by concern:
//!
//! | module | what |
//! |---|---|
//! | this one | preparing a run, deadlines, messages, error / final events |
//! | [`failure`] | why calls fail and runs stop; recording a failed call |
//! | [`streaming`] | one streamed attempt: timeline events as chunks arrive |
//! | [`llm_call`] | a call with provider fallback and its LLM interaction records |
//! | [`compaction`] | calls with the conversation: pruning and compaction on overflow |
//! | [`tool_call`] | running a tool call: events, summarization, capping |
//! | [`resume`] | continuing an execution a dead process left running |

mod compaction;
mod failure;
mod llm_call;
mod resume;
mod streaming;
mod tool_call;

use std::future::Future;

use serde_json::{Value, json};
use tarsy_core::{
    ConversationMessage, RecordError, RecordScope, TimelineEventType, TokenUsage, ToolDefinition,
};
use tokio::time::Instant;

use crate::execution::ExecutionContext;
use crate::fallback::ProviderChain;
use crate::iteration::IterationState;
use crate::prompt::{ChatInput, FailedServer, PromptBuilder, PromptInput, render};
use crate::recording::Recorder;
use crate::window::Conversation;

use failure::Interrupt;
pub(crate) use failure::{CallError, Stop};
pub(crate) use llm_call::CallRequest;
pub(crate) use streaming::{LlmResponse, TextTarget, merged};

const LLM_ERROR_FEEDBACK: &str = include_str!("../assets/llm_error_feedback.md");
/// Metadata `kind` of the event saying a server cannot be used.
const UNAVAILABLE_KIND: &str = tarsy_core::error_kind::MCP_SERVER_UNAVAILABLE;
const EMPTY_RESPONSE_FEEDBACK: &str = include_str!("../assets/empty_response_feedback.md");

/// The shared state of one execution.
pub(crate) struct Run<'a> {
    /// What the execution was given.
    pub ctx: &'a ExecutionContext,
    /// Where its events, messages and interactions go.
    pub rec: Recorder,
    /// Prompt texts.
    pub prompts: PromptBuilder,
    /// The conversation sent to the model (pruned and compacted as needed).
    pub conv: Conversation,
    /// The provider in use and its fallbacks.
    pub chain: ProviderChain,
    /// Iteration count and failure tracking.
    pub state: IterationState,
    /// Tokens used so far (every call, summaries included).
    pub usage: TokenUsage,
    /// Tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Set when the run continues an interrupted execution.
    resumed: Option<resume::Resumed>,
}

async fn sleep_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

impl<'a> Run<'a> {
    /// Prepares a run: lists tools (for tool strategies), picks the provider
    /// (skipping open circuits), builds and stores the initial conversation.
    pub async fn start(
        ctx: &'a ExecutionContext,
        prev_stage_context: Option<&str>,
    ) -> Result<Run<'a>, (Run<'a>, Stop)> {
        let scope = RecordScope {
            session_id: ctx.session_id.clone(),
            stage_id: Some(ctx.stage_id.clone()),
            execution_id: Some(ctx.execution_id.clone()),
        };
        let mut run = Run {
            ctx,
            rec: Recorder::pipelined(scope, ctx.recorder.clone(), ctx.publisher.clone()),
            prompts: PromptBuilder::new(),
            conv: Conversation::default(),
            chain: ProviderChain::new(&ctx.config.llm_provider),
            state: IterationState::new(ctx.config.max_iterations),
            usage: TokenUsage::default(),
            tools: Vec::new(),
            resumed: None,
        };
        // An execution with a stored conversation was interrupted (its
        // process died or was stopped): it continues where it was.
        let prepared = async {
            let stored = ctx.recorder.execution_messages(&ctx.execution_id).await?;
            let earlier = run.close_earlier_attempt(&stored).await?;
            if stored.is_empty() {
                run.prepare(prev_stage_context).await
            } else {
                run.resume(stored, earlier).await
            }
        }
        .await;
        match prepared {
            Ok(()) => Ok(run),
            Err(stop) => Err((run, stop)),
        }
    }

    async fn prepare(&mut self, prev_stage_context: Option<&str>) -> Result<(), Stop> {
        // Problems met while preparing the run (a runbook that could not be
        // fetched) come first. Only here: a resumed run goes on from the
        // conversation its first attempt built, runbook and all.
        for w in &self.ctx.warnings {
            self.error_event(&w.message, json!({"kind": w.kind}))
                .await?;
        }
        let unavailable = self.list_tools().await?;
        for f in &unavailable {
            self.unavailable_event(f).await?;
        }
        if self.ctx.config.fail_on_unavailable_server && !unavailable.is_empty() {
            let names: Vec<&str> = unavailable.iter().map(|f| f.server.as_str()).collect();
            return Err(Stop::Fatal(format!(
                "MCP servers unavailable: {} (the chain fails executions whose servers cannot \
                 all be used: onMcpServerUnavailable: fail)",
                names.join(", ")
            )));
        }
        if let Some(switch) = self.chain.skip_open(&self.ctx.breakers).await {
            self.fallback_event(&switch).await?;
        }
        let strategy = self.ctx.config.iteration_strategy;
        let input = PromptInput {
            alert_type: self.ctx.alert_type.clone(),
            alert_data: self.ctx.alert_data.clone(),
            runbook: self.ctx.runbook_content.clone(),
            memories: self.ctx.memories.clone(),
            tools: self.tools.clone(),
            failed_servers: unavailable,
            chat: self.ctx.chat.as_ref().map(|c| ChatInput {
                investigation_context: c.investigation_context.clone(),
                question: c.question.clone(),
            }),
            judged_investigation: self.ctx.scoring.as_ref().map(|s| s.investigation.clone()),
            reflection: self
                .ctx
                .reflection
                .as_ref()
                .map(|r| (r.instructions.clone(), r.prompt.clone())),
            previous_stage_context: prev_stage_context.map(str::to_string),
            ..PromptInput::default()
        }
        .with_config(&self.ctx.config, &self.ctx.mcp_servers);
        let messages = self.prompts.messages_for(strategy, &input);
        for m in &messages {
            self.rec.store_message(m).await?;
        }
        self.conv = Conversation::new(messages);
        Ok(())
    }

    /// Lists the tools (for tool strategies) and returns every server the
    /// agent cannot use, whether it failed to start or to list its tools.
    async fn list_tools(&mut self) -> Result<Vec<FailedServer>, Stop> {
        // A judge reads the investigation; it calls no tools.
        if self.ctx.config.iteration_strategy.uses_tools()
            && self.ctx.scoring.is_none()
            && self.ctx.reflection.is_none()
        {
            let deadline = self.iteration_deadline();
            let tools = self.ctx.tools.clone();
            match self.guard(deadline, tools.list_tools()).await {
                Ok(Ok(list)) => self.tools = list,
                Ok(Err(e)) => {
                    // Investigate without tools rather than not at all.
                    self.error_event(
                        &format!("Listing the available tools failed: {e}"),
                        json!({"kind": tarsy_core::error_kind::TOOL_LIST_ERROR}),
                    )
                    .await?;
                }
                Err(Interrupt::Cancelled) => return Err(Stop::Cancelled),
                Err(Interrupt::SessionTimeout) => return Err(Stop::SessionTimeout),
                Err(Interrupt::IterationTimeout) => {
                    self.error_event(
                        "Listing the available tools timed out",
                        json!({"kind": tarsy_core::error_kind::TOOL_LIST_ERROR}),
                    )
                    .await?;
                }
            }
        }
        let mut unavailable = self.ctx.failed_servers.clone();
        for f in self.ctx.tools.unavailable_servers() {
            if !unavailable.iter().any(|u| u.server == f.server) {
                unavailable.push(f);
            }
        }
        Ok(unavailable)
    }

    /// Says, on the timeline, that the agent cannot use a server.
    async fn unavailable_event(&mut self, f: &FailedServer) -> Result<(), RecordError> {
        self.error_event(
            &format!("MCP server {} unavailable: {}", f.server, f.error),
            json!({"kind": UNAVAILABLE_KIND, "server": f.server}),
        )
        .await
    }

    /// How the session's budget is spent, when it is: the execution then
    /// concludes without more tools. Unknown spend goes on (fail-open).
    pub(crate) async fn budget_exhausted(&self) -> Option<String> {
        let budget = self.ctx.config.budget?;
        let spent = self.ctx.spend.as_ref()?.spent().await?;
        let why = budget.exhausted_by(&spent)?;
        tracing::info!(
            session_id = %self.ctx.session_id,
            execution_id = %self.ctx.execution_id,
            reason = %why,
            "budget spent; the agent concludes"
        );
        Some(why)
    }

    /// A deadline one iteration timeout from now.
    pub fn iteration_deadline(&self) -> Instant {
        Instant::now() + self.ctx.config.iteration_timeout
    }

    /// Runs `fut` unless cancellation, the session deadline or `deadline`
    /// comes first.
    async fn guard<F: Future>(&self, deadline: Instant, fut: F) -> Result<F::Output, Interrupt> {
        tokio::select! {
            biased;
            _ = self.ctx.cancel.cancelled() => Err(Interrupt::Cancelled),
            _ = sleep_opt(self.ctx.deadline) => Err(Interrupt::SessionTimeout),
            _ = tokio::time::sleep_until(deadline) => Err(Interrupt::IterationTimeout),
            v = fut => Ok(v),
        }
    }

    /// Stores a message and adds it to the conversation.
    pub async fn push_message(
        &mut self,
        m: ConversationMessage,
        is_tool_result: bool,
    ) -> Result<(), RecordError> {
        self.rec.store_message(&m).await?;
        if is_tool_result {
            self.conv.push_tool_result(m);
        } else {
            self.conv.push(m);
        }
        Ok(())
    }

    /// An `error` timeline event.
    pub async fn error_event(&mut self, message: &str, metadata: Value) -> Result<(), RecordError> {
        self.rec
            .create_completed(TimelineEventType::Error, message, metadata)
            .await
            .map(|_| ())
    }

    /// A `final_analysis` timeline event with final content.
    pub async fn final_event(&mut self, content: &str, metadata: Value) -> Result<(), RecordError> {
        self.rec
            .create_completed(TimelineEventType::FinalAnalysis, content, metadata)
            .await
            .map(|_| ())
    }

    /// Text fed back to a function-calling model after a failed call.
    pub fn llm_error_feedback(&self, error: &str) -> String {
        render(
            LLM_ERROR_FEEDBACK.trim_end(),
            &[("error", error.trim().trim_end_matches('.'))],
        )
    }

    /// Text fed back after an empty response.
    pub fn empty_response_feedback(&self) -> String {
        EMPTY_RESPONSE_FEEDBACK.trim_end().to_string()
    }
}
