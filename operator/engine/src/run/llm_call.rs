//! A model call as the strategies make it: streamed attempts on the provider
//! chain, switching to the next provider when one fails (circuit breakers
//! decide which are skipped), with one LLM interaction record per attempt.

use serde_json::{Value, json};
use tarsy_core::{
    Backend, ConversationMessage, LlmInteractionType, LlmProviderConfig, NewLlmInteraction,
    ProviderType, RecordError, TimelineEventType, ToolDefinition,
};
use tokio::time::Instant;

use super::{CallError, LlmResponse, Run, Stop, TextTarget};
use crate::fallback::ProviderSwitch;

/// Decides the interaction type of a successful call from its response.
pub(crate) type Classify = fn(&LlmResponse) -> LlmInteractionType;

/// One LLM call as a strategy asks for it.
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
    /// The iteration the call belongs to, as its LLM interaction record
    /// reports it.
    pub iteration: u32,
    /// Merged into the metadata of the thinking and response events the
    /// call streams.
    pub event_metadata: Value,
}

/// The backend for a provider: the strategy's, except that a fallback
/// provider Google's SDK cannot serve goes through LangChain.
pub(super) fn backend_for(strategy_backend: Backend, provider: &LlmProviderConfig) -> Backend {
    match (strategy_backend, provider.provider_type) {
        (
            Backend::GoogleNative,
            ProviderType::Openai | ProviderType::Anthropic | ProviderType::Xai,
        ) => Backend::Langchain,
        (b, _) => b,
    }
}

impl Run<'_> {
    /// A model turn of the current iteration: the conversation, `tools`
    /// bound, the answer streamed as `llm_response`.
    pub(crate) fn turn<'r>(
        &self,
        classify: Classify,
        tools: &'r [ToolDefinition],
        deadline: Instant,
    ) -> CallRequest<'r> {
        CallRequest {
            classify,
            messages: None,
            tools,
            target: TextTarget::Response,
            deadline,
            iteration: self.state.current_iteration,
            event_metadata: json!({}),
        }
    }

    /// A `provider_fallback` event (and a warning in the log).
    pub(super) async fn fallback_event(&mut self, s: &ProviderSwitch) -> Result<(), RecordError> {
        tarsy_telemetry::global().llm_fallback(&s.from, &s.to);
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
            "iteration": req.iteration,
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
                    self.rec.last_message_id()
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

    /// One LLM call with provider fallback; every attempt is recorded. A
    /// provider that fails with a retryable error, or gives no answer within
    /// the iteration timeout, hands the call to the next provider of the
    /// chain (after a timeout with a fresh iteration timeout: the hung
    /// provider used all of it).
    pub async fn call(&mut self, req: &CallRequest<'_>) -> Result<LlmResponse, CallError> {
        let mut deadline = req.deadline;
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
                .stream_once(
                    messages,
                    req.tools.to_vec(),
                    &req.target,
                    &req.event_metadata,
                    deadline,
                )
                .await;
            observe(&provider, started.elapsed(), &outcome);
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
                    self.chain.on_success(&self.ctx.breakers).await;
                    if let Some(u) = &resp.usage {
                        self.usage.add(u);
                    }
                    return Ok(resp);
                }
                Err(CallError::Llm(e)) => {
                    match self.chain.on_failure(&e, &self.ctx.breakers).await {
                        Some(switch) => {
                            self.fallback_event(&switch).await?;
                            continue;
                        }
                        None => return Err(CallError::Llm(e)),
                    }
                }
                Err(CallError::IterationTimeout) => {
                    let timeout = self.ctx.config.iteration_timeout;
                    match self.chain.on_timeout(timeout, &self.ctx.breakers).await {
                        Some(switch) => {
                            self.fallback_event(&switch).await?;
                            deadline = self.iteration_deadline();
                            continue;
                        }
                        None => return Err(CallError::IterationTimeout),
                    }
                }
                Err(other) => return Err(other),
            }
        }
    }
}

/// Counts one call attempt in the process's metrics.
fn observe(
    provider: &LlmProviderConfig,
    elapsed: std::time::Duration,
    outcome: &Result<LlmResponse, CallError>,
) {
    let error = match outcome {
        Ok(_) => None,
        Err(CallError::Llm(e)) => Some(e.code.as_str()),
        Err(CallError::IterationTimeout | CallError::Stop(Stop::SessionTimeout)) => Some("timeout"),
        Err(CallError::Stop(Stop::Cancelled)) => Some("cancelled"),
        Err(CallError::Stop(Stop::Record(_))) => Some("record"),
        Err(CallError::Stop(Stop::Fatal(_))) => Some("fatal"),
    };
    let tokens = match outcome {
        Ok(r) => r.usage.as_ref().map(|u| {
            (
                u64::try_from(u.input_tokens).unwrap_or(0),
                u64::try_from(u.output_tokens).unwrap_or(0),
            )
        }),
        Err(_) => None,
    };
    tarsy_telemetry::global().llm_call(tarsy_telemetry::LlmCall {
        provider_type: provider.provider_type.as_str(),
        provider: &provider.name,
        model: &provider.model,
        elapsed,
        error,
        tokens,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

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
