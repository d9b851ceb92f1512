//! Calls with the conversation: old tool results are pruned to fit the
//! context window first, and a context overflow compacts the older part of
//! the conversation into a summary and retries once.

use serde_json::json;
use tarsy_core::{ConversationMessage, LlmInteractionType};
use tokio::time::Instant;

use super::{CallError, CallRequest, LlmResponse, Run, TextTarget};
use crate::llm::LlmErrorInfo;
use crate::prompt::render;
use crate::tokens::truncate_for_summarization;
use crate::window::transcript;

const COMPACTION_SYSTEM: &str = include_str!("../assets/compaction_system.md");
const COMPACTION_USER: &str = include_str!("../assets/compaction_user.md");

impl Run<'_> {
    /// A call with the conversation (`req.messages` is ignored): prunes old
    /// tool results first, and on a context overflow compacts the
    /// conversation and retries once. Build `req` with [`Run::turn`].
    pub(crate) async fn call_conversation(
        &mut self,
        req: CallRequest<'_>,
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
            messages: None,
            ..req
        };
        match self.call(&req).await {
            Err(CallError::Llm(e)) if e.is_context_overflow() => {
                let Some(range) = self.conv.compaction_range() else {
                    return Err(CallError::Llm(e));
                };
                match self.compact(range, req.deadline, req.iteration).await {
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
        iteration: u32,
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
                iteration,
                event_metadata: json!({}),
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
}
