//! What every controller shares: one [`Run`] per execution holds the
//! conversation, the recorder, the provider chain and the loop state, and
//! knows how to make a streamed LLM call, run a tool and stop cleanly.

use std::future::Future;

use futures::StreamExt;
use serde_json::{Value, json};
use tarsy_core::{
    Backend, ConversationMessage, LlmInteractionType, LlmProviderConfig, NewLlmInteraction,
    ProviderType, RecordError, RecordScope, TimelineEventStatus, TimelineEventType, TokenUsage,
    ToolCall, ToolDefinition,
};
use tokio::time::Instant;

use crate::execution::ExecutionContext;
use crate::fallback::{ProviderChain, ProviderSwitch};
use crate::iteration::IterationState;
use crate::llm::{Chunk, GenerateInput, Grounding, LlmErrorInfo};
use crate::prompt::{ChatInput, PromptBuilder, PromptInput, conversation_context, render};
use crate::recording::{EventHandle, Recorder};
use crate::tokens::{estimate_tokens, truncate_for_storage, truncate_for_summarization};
use crate::tools::normalize_tool_name;
use crate::window::{Conversation, cap_tool_result, tool_result_budget, transcript};

const COMPACTION_SYSTEM: &str = include_str!("../assets/compaction_system.md");
const COMPACTION_USER: &str = include_str!("../assets/compaction_user.md");
const LLM_ERROR_FEEDBACK: &str = include_str!("../assets/llm_error_feedback.md");
const EMPTY_RESPONSE_FEEDBACK: &str = include_str!("../assets/empty_response_feedback.md");
const SUMMARIZED_RESULT: &str = include_str!("../assets/summarized_result.md");

/// Why a run stops before a controller decides the outcome.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The cancellation token fired.
    Cancelled,
    /// The session deadline passed.
    SessionTimeout,
    /// Storage failed (infrastructure).
    Record(RecordError),
    /// The LLM service rejected the configuration itself (bad credentials,
    /// unknown backend): no feedback to the model can fix it, so the run fails
    /// at once instead of spending every remaining iteration on it.
    Fatal(String),
}

/// LLM service error codes that mean the configuration is wrong.
const FATAL_LLM_CODES: &[&str] = &["credentials", "invalid_backend"];

impl From<RecordError> for Stop {
    fn from(e: RecordError) -> Self {
        Stop::Record(e)
    }
}

/// Why a call (LLM or tool) did not produce a result.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The model or service failed.
    Llm(LlmErrorInfo),
    /// The iteration's time ran out.
    IterationTimeout,
    /// The whole run must stop.
    Stop(Stop),
}

impl From<RecordError> for CallError {
    fn from(e: RecordError) -> Self {
        CallError::Stop(Stop::Record(e))
    }
}

impl From<Stop> for CallError {
    fn from(s: Stop) -> Self {
        CallError::Stop(s)
    }
}

#[derive(Debug, Clone, Copy)]
enum Interrupt {
    Cancelled,
    SessionTimeout,
    IterationTimeout,
}

impl Interrupt {
    fn status(self) -> TimelineEventStatus {
        match self {
            Interrupt::Cancelled => TimelineEventStatus::Cancelled,
            Interrupt::SessionTimeout | Interrupt::IterationTimeout => {
                TimelineEventStatus::TimedOut
            }
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Interrupt::Cancelled => "cancelled",
            Interrupt::SessionTimeout => "session timeout reached",
            Interrupt::IterationTimeout => "iteration timed out",
        }
    }
}

impl From<Interrupt> for CallError {
    fn from(i: Interrupt) -> Self {
        match i {
            Interrupt::Cancelled => CallError::Stop(Stop::Cancelled),
            Interrupt::SessionTimeout => CallError::Stop(Stop::SessionTimeout),
            Interrupt::IterationTimeout => CallError::IterationTimeout,
        }
    }
}

/// Where streamed answer text goes on the timeline.
#[derive(Debug, Clone)]
pub(crate) enum TextTarget {
    /// `llm_response` (function calling: text that may come with tool calls).
    Response,
    /// `final_analysis` (tool-less calls: the text is the conclusion).
    Final,
    /// ReAct: the Thought part streams into `llm_thinking` (source react);
    /// the event is left open for the controller to complete after parsing.
    ReactThought,
    /// `mcp_tool_summary` of a tool result.
    Summary {
        /// MCP server.
        server: String,
        /// Tool (without server).
        tool: String,
    },
    /// Nowhere (compaction).
    Hidden,
}

/// One collected model turn.
#[derive(Debug, Default)]
pub(crate) struct LlmResponse {
    pub text: String,
    pub thinking: String,
    pub tool_calls: Vec<ToolCall>,
    pub code_executions: Vec<(String, String)>,
    pub groundings: Vec<Grounding>,
    pub usage: Option<TokenUsage>,
    /// ReAct: the open thought event, if one was streamed.
    pub thought_event: Option<EventHandle>,
}

/// Decides the interaction type of a successful call from its response.
pub(crate) type Classify = fn(&LlmResponse) -> LlmInteractionType;

/// One LLM call as a controller asks for it.
pub(crate) struct CallRequest<'r> {
    /// Record type (decided from the response).
    pub classify: Classify,
    /// Self-contained messages (summarization, compaction); `None` sends the
    /// conversation.
    pub messages: Option<Vec<ConversationMessage>>,
    /// Tools bound to the request.
    pub tools: &'r [ToolDefinition],
    /// Where text goes.
    pub target: TextTarget,
    /// The iteration deadline.
    pub deadline: Instant,
}

/// The outcome of one tool call, as the model will see it.
#[derive(Debug)]
pub(crate) struct ToolOutcome {
    /// Canonical tool name.
    pub name: String,
    /// Content for the conversation (summarized / capped).
    pub content: String,
    /// Error result (tool error, unknown tool or executor failure).
    pub is_error: bool,
    /// The executor failed (infrastructure), as opposed to the tool
    /// reporting an error.
    pub failed: bool,
}

/// The shared state of one execution.
pub(crate) struct Run<'a> {
    pub ctx: &'a ExecutionContext,
    pub rec: Recorder,
    pub prompts: PromptBuilder,
    pub conv: Conversation,
    pub chain: ProviderChain,
    pub state: IterationState,
    pub usage: TokenUsage,
    pub tools: Vec<ToolDefinition>,
    last_message_id: Option<String>,
}

async fn sleep_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// The backend for a provider: the strategy's, except that a fallback
/// provider Google's SDK cannot serve goes through LangChain.
fn backend_for(strategy_backend: Backend, provider: &LlmProviderConfig) -> Backend {
    match (strategy_backend, provider.provider_type) {
        (
            Backend::GoogleNative,
            ProviderType::Openai | ProviderType::Anthropic | ProviderType::Xai,
        ) => Backend::Langchain,
        (b, _) => b,
    }
}

/// Streams the Thought part of a ReAct response while it arrives: whole
/// lines up to the first Action / Action Input / Final Answer /
/// Observation header. The parser decides the final thought text.
#[derive(Default)]
struct ThoughtSplitter {
    pending: String,
    started: bool,
    done: bool,
}

fn header_of(line: &str) -> String {
    line.trim_start()
        .trim_start_matches(['*', '#', '_', ' '])
        .to_ascii_lowercase()
}

impl ThoughtSplitter {
    fn feed(&mut self, delta: &str) -> String {
        if self.done {
            return String::new();
        }
        self.pending.push_str(delta);
        let mut out = String::new();
        while let Some(pos) = self.pending.find('\n') {
            let line: String = self.pending.drain(..=pos).collect();
            let h = header_of(&line);
            if ["action:", "action input:", "final answer:", "observation:"]
                .iter()
                .any(|m| h.starts_with(m))
            {
                self.done = true;
                self.pending.clear();
                break;
            }
            if !self.started {
                if line.trim().is_empty() {
                    continue;
                }
                self.started = true;
                if h.starts_with("thought:") {
                    let idx = line.to_ascii_lowercase().find("thought:").unwrap_or(0) + 8;
                    let rest = line[idx..].trim_start_matches('*').trim_start();
                    out.push_str(rest);
                    continue;
                }
            }
            out.push_str(&line);
        }
        out
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
            rec: Recorder::new(scope, ctx.recorder.clone(), ctx.publisher.clone()),
            prompts: PromptBuilder::new(),
            conv: Conversation::default(),
            chain: ProviderChain::new(&ctx.config.llm_provider),
            state: IterationState::new(ctx.config.max_iterations),
            usage: TokenUsage::default(),
            tools: Vec::new(),
            last_message_id: None,
        };
        match run.prepare(prev_stage_context).await {
            Ok(()) => Ok(run),
            Err(stop) => Err((run, stop)),
        }
    }

    async fn prepare(&mut self, prev_stage_context: Option<&str>) -> Result<(), Stop> {
        let strategy = self.ctx.config.iteration_strategy;
        if strategy.uses_tools() {
            let deadline = self.iteration_deadline();
            let tools = self.ctx.tools.clone();
            match self.guard(deadline, tools.list_tools()).await {
                Ok(Ok(list)) => self.tools = list,
                Ok(Err(e)) => {
                    // Investigate without tools rather than not at all.
                    self.error_event(
                        &format!("Listing the available tools failed: {e}"),
                        json!({"kind": "tool_list_error"}),
                    )
                    .await?;
                }
                Err(Interrupt::Cancelled) => return Err(Stop::Cancelled),
                Err(Interrupt::SessionTimeout) => return Err(Stop::SessionTimeout),
                Err(Interrupt::IterationTimeout) => {
                    self.error_event(
                        "Listing the available tools timed out",
                        json!({"kind": "tool_list_error"}),
                    )
                    .await?;
                }
            }
        }
        if let Some(switch) = self.chain.skip_open(&self.ctx.breakers) {
            self.fallback_event(&switch).await?;
        }
        let input = PromptInput {
            alert_type: self.ctx.alert_type.clone(),
            alert_data: self.ctx.alert_data.clone(),
            runbook: self.ctx.runbook_content.clone(),
            tools: self.tools.clone(),
            failed_servers: self.ctx.failed_servers.clone(),
            chat: self.ctx.chat.as_ref().map(|c| ChatInput {
                investigation_context: c.investigation_context.clone(),
                question: c.question.clone(),
            }),
            previous_stage_context: prev_stage_context.map(str::to_string),
            ..PromptInput::default()
        }
        .with_config(&self.ctx.config, &self.ctx.mcp_servers);
        let messages = self.prompts.messages_for(strategy, &input);
        for m in &messages {
            self.last_message_id = Some(self.rec.store_message(m).await?);
        }
        self.conv = Conversation::new(messages);
        Ok(())
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
        self.last_message_id = Some(self.rec.store_message(&m).await?);
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
    pub async fn final_event(&mut self, content: &str) -> Result<(), RecordError> {
        self.rec
            .create_completed(TimelineEventType::FinalAnalysis, content, json!({}))
            .await
            .map(|_| ())
    }

    async fn fallback_event(&mut self, s: &ProviderSwitch) -> Result<(), RecordError> {
        tracing::warn!(
            execution_id = %self.ctx.execution_id,
            from = %s.from, to = %s.to, reason = %s.reason,
            "switching LLM provider"
        );
        self.rec
            .create_completed(
                TimelineEventType::ProviderFallback,
                &format!(
                    "Switched LLM provider from {} to {}: {}",
                    s.from, s.to, s.reason
                ),
                json!({"from": s.from, "to": s.to, "reason": s.reason}),
            )
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

    /// Records a failed LLM call of the loop: `error` event, failure in the
    /// iteration state. Returns the error text for the feedback message; a
    /// stop passes through as `Err`.
    pub async fn llm_failure(&mut self, err: CallError) -> Result<String, Stop> {
        let (message, is_timeout, meta) = match err {
            CallError::Llm(e) => (
                format!("LLM call failed: {} ({})", e.message, e.code),
                false,
                json!({"kind": "llm_error", "code": e.code, "retryable": e.retryable}),
            ),
            CallError::IterationTimeout => (
                format!(
                    "Iteration {} timed out after {}s",
                    self.state.current_iteration,
                    self.ctx.config.iteration_timeout.as_secs()
                ),
                true,
                json!({"kind": "timeout"}),
            ),
            CallError::Stop(stop) => return Err(stop),
        };
        let fatal = meta
            .get("code")
            .and_then(|c| c.as_str())
            .is_some_and(|c| FATAL_LLM_CODES.contains(&c))
            && meta.get("retryable").and_then(|r| r.as_bool()) == Some(false);
        self.error_event(&message, meta).await?;
        if fatal {
            return Err(Stop::Fatal(message));
        }
        self.state.record_failure(message.clone(), is_timeout);
        Ok(message)
    }

    /// The aborted-after-timeouts result message.
    pub fn timeout_abort_message(&self) -> String {
        format!(
            "aborted after {} consecutive iteration timeouts: {}",
            self.state.consecutive_timeout_failures, self.state.last_error_message
        )
    }

    async fn close_open(
        &mut self,
        events: &mut [&mut Option<EventHandle>],
        status: TimelineEventStatus,
    ) {
        for slot in events.iter_mut() {
            if let Some(ev) = slot.as_mut() {
                let content = ev.content.clone();
                if let Err(e) = self.rec.complete(ev, &content, status, None).await {
                    tracing::warn!(error = %e, "closing a streaming event failed");
                }
            }
            **slot = None;
        }
    }

    async fn stream_delta(
        &mut self,
        slot: &mut Option<EventHandle>,
        event_type: TimelineEventType,
        metadata: Value,
        delta: &str,
    ) -> Result<(), RecordError> {
        if delta.is_empty() {
            return Ok(());
        }
        if slot.is_none() {
            *slot = Some(
                self.rec
                    .create_event(event_type, TimelineEventStatus::Streaming, "", metadata)
                    .await?,
            );
        }
        if let Some(ev) = slot.as_mut() {
            self.rec.append(ev, delta).await?;
        }
        Ok(())
    }

    async fn native_tool_events(&mut self, chunk: &Chunk) -> Result<(), RecordError> {
        match chunk {
            Chunk::CodeExecution { code, result } => {
                let mut content = String::new();
                if !code.is_empty() {
                    content.push_str(&format!("```\n{code}\n```"));
                }
                if !result.is_empty() {
                    if !content.is_empty() {
                        content.push_str("\n\n");
                    }
                    content.push_str(&format!("Output:\n{result}"));
                }
                self.rec
                    .create_completed(
                        TimelineEventType::CodeExecution,
                        &content,
                        json!({"code": code, "result": result}),
                    )
                    .await?;
            }
            Chunk::Grounding(g) => {
                if !g.web_search_queries.is_empty() || !g.sources.is_empty() {
                    let mut content = String::new();
                    if !g.web_search_queries.is_empty() {
                        content
                            .push_str(&format!("Searched: {}\n", g.web_search_queries.join("; ")));
                    }
                    for s in &g.sources {
                        content.push_str(&format!("- {} ({})\n", s.title, s.uri));
                    }
                    self.rec
                        .create_completed(
                            TimelineEventType::GoogleSearchResult,
                            content.trim_end(),
                            json!({"queries": g.web_search_queries, "sources": g.sources}),
                        )
                        .await?;
                }
                if !g.url_context.is_empty() {
                    let content = g
                        .url_context
                        .iter()
                        .map(|u| format!("- {} ({})", u.url, u.status))
                        .collect::<Vec<_>>()
                        .join("\n");
                    self.rec
                        .create_completed(
                            TimelineEventType::UrlContextResult,
                            &content,
                            json!({"urls": g.url_context}),
                        )
                        .await?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// One attempt on the current provider, streaming events as chunks come.
    async fn stream_once(
        &mut self,
        messages: Vec<ConversationMessage>,
        tools: Vec<ToolDefinition>,
        target: &TextTarget,
        deadline: Instant,
    ) -> Result<LlmResponse, CallError> {
        let provider = self.chain.current().clone();
        let backend = backend_for(self.ctx.config.backend, &provider);
        let input = GenerateInput {
            session_id: self.ctx.session_id.clone(),
            execution_id: self.ctx.execution_id.clone(),
            messages,
            provider,
            native_tools_override: self.ctx.config.native_tools_override.clone(),
            backend,
            tools,
            clear_cache: false,
        };
        let llm = self.ctx.llm.clone();
        let mut stream = match self.guard(deadline, llm.generate(input)).await {
            Err(i) => return Err(i.into()),
            Ok(Err(e)) => return Err(CallError::Llm(e.into_info())),
            Ok(Ok(s)) => s,
        };
        let mut resp = LlmResponse::default();
        let mut thinking_ev: Option<EventHandle> = None;
        let mut text_ev: Option<EventHandle> = None;
        let mut splitter = ThoughtSplitter::default();
        let hidden = matches!(target, TextTarget::Hidden);
        let cancel = self.ctx.cancel.clone();
        let session = sleep_opt(self.ctx.deadline);
        tokio::pin!(session);
        let iteration = tokio::time::sleep_until(deadline);
        tokio::pin!(iteration);
        loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(Interrupt::Cancelled),
                _ = &mut session => Err(Interrupt::SessionTimeout),
                _ = &mut iteration => Err(Interrupt::IterationTimeout),
                c = stream.next() => Ok(c),
            };
            let chunk = match next {
                Err(i) => {
                    // Dropping the stream cancels the RPC before the records
                    // are closed.
                    drop(stream);
                    self.close_open(&mut [&mut thinking_ev, &mut text_ev], i.status())
                        .await;
                    return Err(i.into());
                }
                Ok(None) => break,
                Ok(Some(c)) => c,
            };
            match chunk {
                Chunk::Thinking(d) => {
                    resp.thinking.push_str(&d);
                    if !hidden {
                        self.stream_delta(
                            &mut thinking_ev,
                            TimelineEventType::LlmThinking,
                            json!({"source": "native"}),
                            &d,
                        )
                        .await?;
                    }
                }
                Chunk::Text(d) => {
                    resp.text.push_str(&d);
                    match target {
                        TextTarget::Response => {
                            self.stream_delta(
                                &mut text_ev,
                                TimelineEventType::LlmResponse,
                                json!({}),
                                &d,
                            )
                            .await?
                        }
                        TextTarget::Final => {
                            self.stream_delta(
                                &mut text_ev,
                                TimelineEventType::FinalAnalysis,
                                json!({}),
                                &d,
                            )
                            .await?
                        }
                        TextTarget::Summary { server, tool } => {
                            self.stream_delta(
                                &mut text_ev,
                                TimelineEventType::McpToolSummary,
                                json!({"server_name": server, "tool_name": tool}),
                                &d,
                            )
                            .await?
                        }
                        TextTarget::ReactThought => {
                            let thought = splitter.feed(&d);
                            self.stream_delta(
                                &mut text_ev,
                                TimelineEventType::LlmThinking,
                                json!({"source": "react"}),
                                &thought,
                            )
                            .await?
                        }
                        TextTarget::Hidden => {}
                    }
                }
                Chunk::ToolCall(mut c) => {
                    c.name = normalize_tool_name(&c.name);
                    resp.tool_calls.push(c);
                }
                Chunk::Usage(u) => {
                    let total = resp.usage.get_or_insert_with(TokenUsage::default);
                    total.add(&u);
                }
                Chunk::Error(e) => {
                    drop(stream);
                    self.close_open(
                        &mut [&mut thinking_ev, &mut text_ev],
                        TimelineEventStatus::Failed,
                    )
                    .await;
                    return Err(CallError::Llm(e));
                }
                c @ (Chunk::CodeExecution { .. } | Chunk::Grounding(_)) => {
                    if !hidden {
                        self.native_tool_events(&c).await?;
                    }
                    match c {
                        Chunk::CodeExecution { code, result } => {
                            resp.code_executions.push((code, result))
                        }
                        Chunk::Grounding(g) => resp.groundings.push(g),
                        _ => {}
                    }
                }
            }
        }
        if let Some(ev) = thinking_ev.as_mut() {
            let content = ev.content.clone();
            self.rec
                .complete(ev, &content, TimelineEventStatus::Completed, None)
                .await?;
        }
        if matches!(target, TextTarget::ReactThought) {
            resp.thought_event = text_ev;
        } else if let Some(ev) = text_ev.as_mut() {
            let content = ev.content.clone();
            self.rec
                .complete(ev, &content, TimelineEventStatus::Completed, None)
                .await?;
        }
        Ok(resp)
    }

    async fn record_interaction(
        &mut self,
        req: &CallRequest<'_>,
        provider: &LlmProviderConfig,
        messages_for_record: Option<&[ConversationMessage]>,
        messages_count: usize,
        outcome: &Result<LlmResponse, CallError>,
        started: std::time::Instant,
    ) -> Result<(), RecordError> {
        let mut request = json!({
            "iteration": self.state.current_iteration,
            "messages_count": messages_count,
            "tools": req.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            "backend": backend_for(self.ctx.config.backend, provider).as_str(),
        });
        if let Some(m) = messages_for_record {
            request["messages"] = serde_json::to_value(m).unwrap_or(Value::Null);
        }
        let duration_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let (interaction_type, response, thinking, text, usage, error) = match outcome {
            Ok(r) => (
                (req.classify)(r),
                json!({
                    "text_length": r.text.len(),
                    "tool_calls": r.tool_calls,
                    "code_executions": r.code_executions.iter()
                        .map(|(c, o)| json!({"code": c, "result": o})).collect::<Vec<_>>(),
                    "groundings": r.groundings,
                }),
                (!r.thinking.is_empty()).then(|| r.thinking.clone()),
                r.text.clone(),
                r.usage,
                None,
            ),
            Err(e) => {
                let msg = match e {
                    CallError::Llm(e) => format!("{} ({})", e.message, e.code),
                    CallError::IterationTimeout => "iteration timed out".to_string(),
                    CallError::Stop(Stop::Cancelled) => "cancelled".to_string(),
                    CallError::Stop(Stop::SessionTimeout) => "session timeout reached".to_string(),
                    CallError::Stop(Stop::Record(r)) => format!("recording failed: {r}"),
                    CallError::Stop(Stop::Fatal(m)) => m.clone(),
                };
                (
                    (req.classify)(&LlmResponse::default()),
                    json!({}),
                    None,
                    String::new(),
                    None,
                    Some(msg),
                )
            }
        };
        self.rec
            .llm_interaction(NewLlmInteraction {
                scope: self.rec.scope().clone(),
                interaction_type,
                provider: provider.name.clone(),
                model: provider.model.clone(),
                last_message_id: if req.messages.is_some() {
                    None
                } else {
                    self.last_message_id.clone()
                },
                llm_request: request,
                llm_response: response,
                thinking_content: thinking,
                response_text: text,
                usage,
                duration_ms,
                error_message: error,
            })
            .await
            .map(|_| ())
    }

    /// One LLM call with provider fallback; every attempt is recorded.
    pub async fn call(&mut self, req: &CallRequest<'_>) -> Result<LlmResponse, CallError> {
        loop {
            let provider = self.chain.current().clone();
            let messages = match &req.messages {
                Some(m) => m.clone(),
                None => self.conv.messages().to_vec(),
            };
            let count = messages.len();
            let for_record = req.messages.is_some().then(|| messages.clone());
            let started = std::time::Instant::now();
            let outcome = self
                .stream_once(messages, req.tools.to_vec(), &req.target, req.deadline)
                .await;
            self.record_interaction(
                req,
                &provider,
                for_record.as_deref(),
                count,
                &outcome,
                started,
            )
            .await?;
            match outcome {
                Ok(resp) => {
                    self.chain.on_success(&self.ctx.breakers);
                    if let Some(u) = &resp.usage {
                        self.usage.add(u);
                    }
                    return Ok(resp);
                }
                Err(CallError::Llm(e)) => match self.chain.on_failure(&e, &self.ctx.breakers) {
                    Some(switch) => {
                        self.fallback_event(&switch).await?;
                        continue;
                    }
                    None => return Err(CallError::Llm(e)),
                },
                Err(other) => return Err(other),
            }
        }
    }

    /// A call with the conversation: prunes old tool results first, and on
    /// a context overflow compacts the conversation and retries once.
    pub async fn call_conversation(
        &mut self,
        classify: Classify,
        tools: &[ToolDefinition],
        target: TextTarget,
        deadline: Instant,
    ) -> Result<LlmResponse, CallError> {
        let report = self.conv.prune(self.chain.current().context_window_tokens);
        if report.soft_trimmed + report.cleared > 0 {
            tracing::info!(
                execution_id = %self.ctx.execution_id,
                soft_trimmed = report.soft_trimmed,
                cleared = report.cleared,
                "pruned old tool results to fit the context window"
            );
        }
        let req = CallRequest {
            classify,
            messages: None,
            tools,
            target,
            deadline,
        };
        match self.call(&req).await {
            Err(CallError::Llm(e)) if e.is_context_overflow() => {
                let Some(range) = self.conv.compaction_range() else {
                    return Err(CallError::Llm(e));
                };
                match self.compact(range, deadline).await {
                    Ok(()) => self.call(&req).await,
                    Err(CallError::Llm(ce)) => {
                        tracing::warn!(error = %ce, "compaction failed");
                        Err(CallError::Llm(e))
                    }
                    Err(other) => Err(other),
                }
            }
            other => other,
        }
    }

    async fn compact(
        &mut self,
        range: std::ops::Range<usize>,
        deadline: Instant,
    ) -> Result<(), CallError> {
        let text = transcript(&self.conv.messages()[range.clone()]);
        let text = truncate_for_summarization(&text);
        let messages = vec![
            ConversationMessage::system(COMPACTION_SYSTEM.trim_end()),
            ConversationMessage::user(render(COMPACTION_USER.trim_end(), &[("transcript", &text)])),
        ];
        let resp = self
            .call(&CallRequest {
                classify: |_| LlmInteractionType::Compaction,
                messages: Some(messages),
                tools: &[],
                target: TextTarget::Hidden,
                deadline,
            })
            .await?;
        if resp.text.trim().is_empty() {
            return Err(CallError::Llm(LlmErrorInfo {
                message: "compaction produced an empty summary".into(),
                code: "internal".into(),
                retryable: false,
            }));
        }
        tracing::info!(
            execution_id = %self.ctx.execution_id,
            summarized_messages = range.len(),
            "compacted the conversation after a context overflow"
        );
        self.conv.apply_compaction(range, resp.text.trim());
        Ok(())
    }

    /// Runs one tool call: `llm_tool_call` event (streaming → completed with
    /// the storage-truncated raw result), executor, summarization over the
    /// server's threshold, cap to the context budget.
    pub async fn execute_tool(
        &mut self,
        call: ToolCall,
        deadline: Instant,
    ) -> Result<ToolOutcome, CallError> {
        let name = normalize_tool_name(&call.name);
        let (server, tool) = match name.split_once('.') {
            Some((s, t)) => (s.to_string(), t.to_string()),
            None => (String::new(), name.clone()),
        };
        let mut ev = self
            .rec
            .create_event(
                TimelineEventType::LlmToolCall,
                TimelineEventStatus::Streaming,
                "",
                json!({
                    "server_name": server,
                    "tool_name": tool,
                    "arguments": call.arguments,
                    "call_id": call.id,
                }),
            )
            .await?;
        if !self.tools.iter().any(|t| t.name == name) {
            let available = self
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            let msg = if available.is_empty() {
                format!("Error: unknown tool '{name}'. No tools are available.")
            } else {
                format!("Error: unknown tool '{name}'. Available tools: {available}")
            };
            self.rec
                .complete(
                    &mut ev,
                    &msg,
                    TimelineEventStatus::Failed,
                    Some(json!({"is_error": true})),
                )
                .await?;
            return Ok(ToolOutcome {
                name,
                content: msg,
                is_error: true,
                failed: false,
            });
        }
        let exec_call = ToolCall {
            name: name.clone(),
            ..call
        };
        let executor = self.ctx.tools.clone();
        match self.guard(deadline, executor.execute(&exec_call)).await {
            Err(i) => {
                let msg = format!("Tool call interrupted: {}", i.describe());
                if let Err(e) = self
                    .rec
                    .complete(&mut ev, &msg, i.status(), Some(json!({"is_error": true})))
                    .await
                {
                    tracing::warn!(error = %e, "closing a tool call event failed");
                }
                Err(i.into())
            }
            Ok(Err(e)) => {
                let msg = format!("Error: {e}");
                self.state.record_failure(msg.clone(), e.is_timeout());
                self.rec
                    .complete(
                        &mut ev,
                        &msg,
                        TimelineEventStatus::Failed,
                        Some(json!({"is_error": true})),
                    )
                    .await?;
                Ok(ToolOutcome {
                    name,
                    content: e.to_string(),
                    is_error: true,
                    failed: true,
                })
            }
            Ok(Ok(result)) => {
                self.rec
                    .complete(
                        &mut ev,
                        &truncate_for_storage(&result.content),
                        TimelineEventStatus::Completed,
                        Some(json!({"is_error": result.is_error})),
                    )
                    .await?;
                let content = if result.is_error {
                    result.content
                } else {
                    match self
                        .maybe_summarize(&server, &tool, &name, &result.content, deadline)
                        .await?
                    {
                        Some(summary) => summary,
                        None => result.content,
                    }
                };
                let budget = tool_result_budget(self.chain.current());
                Ok(ToolOutcome {
                    name,
                    content: cap_tool_result(&content, budget).into_owned(),
                    is_error: result.is_error,
                    failed: false,
                })
            }
        }
    }

    /// Summarizes a large tool result (fail-open: `None` means use the raw
    /// result).
    async fn maybe_summarize(
        &mut self,
        server: &str,
        tool: &str,
        full_name: &str,
        raw: &str,
        deadline: Instant,
    ) -> Result<Option<String>, CallError> {
        let Some(cfg) = self
            .ctx
            .mcp_servers
            .iter()
            .find(|s| s.name == server)
            .map(|s| s.summarization)
        else {
            return Ok(None);
        };
        let tokens = estimate_tokens(raw);
        if !cfg.enabled || tokens <= cfg.size_threshold_tokens {
            return Ok(None);
        }
        let input = truncate_for_summarization(raw);
        let system =
            self.prompts
                .summarization_system_prompt(server, tool, cfg.summary_max_token_limit);
        let user = self.prompts.summarization_user_prompt(
            &conversation_context(self.conv.messages()),
            server,
            tool,
            &input,
        );
        let req = CallRequest {
            classify: |_| LlmInteractionType::Summarization,
            messages: Some(vec![
                ConversationMessage::system(system),
                ConversationMessage::user(user),
            ]),
            tools: &[],
            target: TextTarget::Summary {
                server: server.to_string(),
                tool: tool.to_string(),
            },
            deadline,
        };
        match self.call(&req).await {
            Ok(resp) if !resp.text.trim().is_empty() => Ok(Some(render(
                SUMMARIZED_RESULT.trim_end(),
                &[
                    ("tool", full_name),
                    ("tokens", &tokens.to_string()),
                    ("summary", resp.text.trim()),
                ],
            ))),
            Ok(_) => {
                tracing::warn!(tool = %full_name, "summarization returned nothing; using the raw result");
                Ok(None)
            }
            Err(CallError::Llm(e)) => {
                tracing::warn!(tool = %full_name, error = %e, "summarization failed; using the raw result");
                Ok(None)
            }
            Err(other) => Err(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thought_splitter_streams_only_the_thought() {
        let mut s = ThoughtSplitter::default();
        let mut out = String::new();
        for piece in [
            "Thou",
            "ght: pods are ",
            "crashing\nbecause of",
            " OOM\nAction: k8s.pods\n",
            "Action Input: {}\n",
        ] {
            out.push_str(&s.feed(piece));
        }
        assert_eq!(out, "pods are crashing\nbecause of OOM\n");
        let mut s = ThoughtSplitter::default();
        assert_eq!(s.feed("\n**Final Answer:** done\nmore\n"), "");
    }

    #[test]
    fn fallback_to_non_google_provider_uses_langchain() {
        let mut p = LlmProviderConfig {
            name: "x".into(),
            provider_type: ProviderType::Openai,
            model: "m".into(),
            api_key_env: None,
            credentials_env: None,
            base_url: None,
            project: None,
            location: None,
            native_tools: Default::default(),
            max_tool_result_tokens: None,
            context_window_tokens: None,
            script: None,
            fallback: vec![],
        };
        assert_eq!(backend_for(Backend::GoogleNative, &p), Backend::Langchain);
        p.provider_type = ProviderType::Vertexai;
        assert_eq!(
            backend_for(Backend::GoogleNative, &p),
            Backend::GoogleNative
        );
        assert_eq!(backend_for(Backend::Langchain, &p), Backend::Langchain);
    }
}
