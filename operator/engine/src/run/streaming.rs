//! One streamed attempt on the current provider: timeline events are created
//! on the first chunk of their kind, streamed into, and completed (or closed
//! with the interruption's status) when the stream ends.

use futures::StreamExt;
use serde_json::{Value, json};
use tarsy_core::{
    ConversationMessage, RecordError, TimelineEventStatus, TimelineEventType, TokenUsage, ToolCall,
    ToolDefinition,
};
use tokio::time::Instant;

use super::llm_call::backend_for;
use super::{CallError, Interrupt, Run, sleep_opt};
use crate::llm::{Chunk, GenerateInput, Grounding};
use crate::recording::EventHandle;
use crate::tools::normalize_tool_name;

/// Where streamed answer text goes on the timeline.
#[derive(Debug, Clone)]
pub(crate) enum TextTarget {
    /// `llm_response` (function calling: text that may come with tool calls).
    Response,
    /// `final_analysis` (tool-less calls: the text is the conclusion).
    Final,
    /// ReAct: the Thought part streams into `llm_thinking` (source react);
    /// the event is left open for the strategy to complete after parsing.
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

impl Run<'_> {
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
    pub(super) async fn stream_once(
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
}
