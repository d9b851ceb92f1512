//! Running one tool call for the model: the `llm_tool_call` event, the
//! executor under the iteration deadline, summarization of large results
//! (fail-open) and capping to the context budget.

use serde_json::json;
use tarsy_core::{
    ConversationMessage, LlmInteractionType, TimelineEventStatus, TimelineEventType, ToolCall,
};
use tokio::time::Instant;

use super::{CallError, CallRequest, Run, TextTarget, merged};
use crate::prompt::{conversation_context, render};
use crate::tokens::{estimate_tokens, truncate_for_storage, truncate_for_summarization};
use crate::tools::normalize_tool_name;
use crate::window::{cap_tool_result, tool_result_budget};

const SUMMARIZED_RESULT: &str = include_str!("../assets/summarized_result.md");

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

impl Run<'_> {
    /// Runs one tool call: `llm_tool_call` event (streaming → completed with
    /// the storage-truncated raw result), executor, summarization over the
    /// server's threshold, cap to the context budget.
    pub async fn execute_tool(
        &mut self,
        call: ToolCall,
        deadline: Instant,
    ) -> Result<ToolOutcome, CallError> {
        self.run_tool(call, deadline, json!({})).await
    }

    /// [`Run::execute_tool`] with `extra` merged into the event's metadata.
    pub(super) async fn run_tool(
        &mut self,
        call: ToolCall,
        deadline: Instant,
        extra: serde_json::Value,
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
                merged(
                    json!({
                        "server_name": server,
                        "tool_name": tool,
                        "arguments": call.arguments,
                        "call_id": call.id,
                    }),
                    &extra,
                ),
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
                let mut meta = json!({"is_error": result.is_error});
                if let Some(first) = &result.recovered {
                    // The server's session broke and was opened again: the
                    // timeline says this answer is the second attempt's.
                    meta["recovered"] = json!(first);
                }
                self.rec
                    .complete(
                        &mut ev,
                        &truncate_for_storage(&result.content),
                        TimelineEventStatus::Completed,
                        Some(meta),
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
                original_tokens: tokens,
            },
            deadline,
            iteration: self.state.current_iteration,
            event_metadata: json!({}),
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
