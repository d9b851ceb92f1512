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
    /// `llm_response`: the model's answer as it arrives, whatever the
    /// strategy makes of it afterwards (tool calls, a parsed ReAct step, the
    /// final analysis).
    Response,
    /// `mcp_tool_summary` of a tool result.
    Summary {
        /// MCP server.
        server: String,
        /// Tool (without server).
        tool: String,
        /// Estimated size of the raw result, in tokens.
        original_tokens: u64,
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
}

/// One line saying what was searched and what was found:
/// `Google Search: 'q1', 'q2' → Sources: Title (uri), ...` (the reference's
/// wording).
fn search_content(g: &Grounding) -> String {
    let mut out = String::from("Google Search");
    if !g.web_search_queries.is_empty() {
        let queries: Vec<String> = g
            .web_search_queries
            .iter()
            .map(|q| format!("'{q}'"))
            .collect();
        out.push_str(": ");
        out.push_str(&queries.join(", "));
    }
    if !g.sources.is_empty() {
        let sources: Vec<String> = g
            .sources
            .iter()
            .map(|s| {
                if s.title.is_empty() {
                    s.uri.clone()
                } else {
                    format!("{} ({})", s.title, s.uri)
                }
            })
            .collect();
        out.push_str(" → Sources: ");
        out.push_str(&sources.join(", "));
    }
    out
}

/// `extra` merged into `base` (both objects; `extra` wins).
pub(crate) fn merged(mut base: Value, extra: &Value) -> Value {
    if let (Value::Object(b), Value::Object(e)) = (&mut base, extra) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    base
}

impl Run<'_> {
    /// Closes the events still streaming with `status`, their partial
    /// content kept; `metadata` is merged into theirs.
    async fn close_open(
        &mut self,
        events: &mut [&mut Option<EventHandle>],
        status: TimelineEventStatus,
        metadata: Option<Value>,
    ) {
        for slot in events.iter_mut() {
            if let Some(ev) = slot.as_mut() {
                let content = ev.content.clone();
                if let Err(e) = self
                    .rec
                    .complete(ev, &content, status, metadata.clone())
                    .await
                {
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

    /// The timeline event of a native tool result.
    async fn native_tool_event(&mut self, chunk: &Chunk) -> Result<(), RecordError> {
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
                    self.rec
                        .create_completed(
                            TimelineEventType::GoogleSearchResult,
                            &search_content(g),
                            json!({
                                "source": "gemini",
                                "queries": g.web_search_queries,
                                "sources": g.sources,
                            }),
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
    /// `event_metadata` is merged into the thinking and response events
    /// (e.g. the forced-conclusion flags). Native tool results (code
    /// execution, grounding) are recorded once the stream is complete.
    pub(super) async fn stream_once(
        &mut self,
        messages: Vec<ConversationMessage>,
        tools: Vec<ToolDefinition>,
        target: &TextTarget,
        event_metadata: &Value,
        deadline: Instant,
    ) -> Result<LlmResponse, CallError> {
        let provider = self.chain.current().clone();
        let backend = backend_for(self.ctx.config.backend, &provider);
        let text_event = match target {
            TextTarget::Response => Some((
                TimelineEventType::LlmResponse,
                merged(json!({}), event_metadata),
            )),
            TextTarget::Summary {
                server,
                tool,
                original_tokens,
            } => Some((
                TimelineEventType::McpToolSummary,
                json!({
                    "server_name": server,
                    "tool_name": tool,
                    "original_tokens": original_tokens,
                    "summarization_model": provider.model,
                }),
            )),
            TextTarget::Hidden => None,
        };
        let hidden = text_event.is_none();
        let thinking_metadata = merged(json!({"source": "native"}), event_metadata);
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
        // The step's held records are stored before the model sees it.
        self.rec.flush_writes().await?;
        let llm = self.ctx.llm.clone();
        let mut stream = match self.guard(deadline, llm.generate(input)).await {
            Err(i) => return Err(i.into()),
            Ok(Err(e)) => return Err(CallError::Llm(e.into_info())),
            Ok(Ok(s)) => s,
        };
        let mut resp = LlmResponse::default();
        let mut thinking_ev: Option<EventHandle> = None;
        let mut text_ev: Option<EventHandle> = None;
        let mut native: Vec<Chunk> = Vec::new();
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
                    self.close_open(&mut [&mut thinking_ev, &mut text_ev], i.status(), None)
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
                            thinking_metadata.clone(),
                            &d,
                        )
                        .await?;
                    }
                }
                Chunk::Text(d) => {
                    resp.text.push_str(&d);
                    if let Some((event_type, metadata)) = &text_event {
                        self.stream_delta(&mut text_ev, *event_type, metadata.clone(), &d)
                            .await?;
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
                    // A stream the LLM service's outage cut off: its events
                    // end here, partial, and a retried call streams fresh
                    // ones (as for a stream a dead process left open).
                    let cut = e
                        .is_service_unavailable()
                        .then(|| json!({"interrupted": true}));
                    self.close_open(
                        &mut [&mut thinking_ev, &mut text_ev],
                        TimelineEventStatus::Failed,
                        cut,
                    )
                    .await;
                    return Err(CallError::Llm(e));
                }
                Chunk::CodeExecution { code, result } => {
                    resp.code_executions.push((code.clone(), result.clone()));
                    native.push(Chunk::CodeExecution { code, result });
                }
                Chunk::Grounding(g) => {
                    resp.groundings.push(g.clone());
                    native.push(Chunk::Grounding(g));
                }
            }
        }
        for ev in [thinking_ev.as_mut(), text_ev.as_mut()]
            .into_iter()
            .flatten()
        {
            let content = ev.content.clone();
            self.rec
                .complete(ev, &content, TimelineEventStatus::Completed, None)
                .await?;
        }
        if !hidden {
            for chunk in &native {
                self.native_tool_event(chunk).await?;
            }
        }
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_metadata_keeps_the_base_and_lets_extra_win() {
        let base = json!({"source": "native", "a": 1});
        let extra = json!({"a": 2, "forced_conclusion": true});
        assert_eq!(
            merged(base.clone(), &extra),
            json!({"source": "native", "a": 2, "forced_conclusion": true})
        );
        assert_eq!(merged(base.clone(), &json!({})), base);
    }

    #[test]
    fn search_results_read_as_one_line() {
        let source = |uri: &str, title: &str| crate::llm::GroundingSource {
            uri: uri.into(),
            title: title.into(),
        };
        let g = Grounding {
            web_search_queries: vec!["oom limits".into(), "hpa".into()],
            sources: vec![
                source("https://a.example", "A"),
                source("https://b.example", ""),
            ],
            url_context: vec![],
        };
        assert_eq!(
            search_content(&g),
            "Google Search: 'oom limits', 'hpa' → Sources: A (https://a.example), https://b.example"
        );
        let only_query = Grounding {
            web_search_queries: vec!["q".into()],
            ..Grounding::default()
        };
        assert_eq!(search_content(&only_query), "Google Search: 'q'");
    }
}
