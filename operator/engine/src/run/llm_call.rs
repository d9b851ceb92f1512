//! A model call as the strategies make it: streamed attempts on the provider
//! chain, switching to the next provider when one fails (circuit breakers
//! decide which are skipped), with one LLM interaction record per attempt.
//! An unreachable LLM service is waited out on the same provider first
//! (`crate::retry`).

use std::time::Duration;

use serde_json::{Value, json};
use tarsy_core::{
    Backend, ConversationMessage, LlmInteractionType, LlmProviderConfig, NewLlmInteraction,
    ProviderType, RecordError, TimelineEventStatus, TimelineEventType, ToolDefinition,
};
use tokio::time::Instant;

use super::{CallError, Interrupt, LlmResponse, Run, Stop, TextTarget};
use crate::fallback::ProviderSwitch;
use crate::llm::LLM_SERVICE_UNAVAILABLE;
use crate::retry::{Outage, OutageEnd};

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
    /// A tool-less answer of the current iteration, kept in the
    /// conversation: its text, or why there is none (a failed call, an
    /// empty answer), which the timeline says too.
    pub(crate) async fn tool_less_answer(
        &mut self,
        classify: Classify,
    ) -> Result<Result<String, String>, Stop> {
        let deadline = self.iteration_deadline();
        let resp = match self
            .call_conversation(self.turn(classify, &[], deadline))
            .await
        {
            Ok(r) => r,
            Err(e) => return Ok(Err(self.llm_failure(e).await?)),
        };
        if resp.text.trim().is_empty() {
            self.error_event(
                "The model returned an empty response",
                json!({"kind": "empty_response"}),
            )
            .await?;
            return Ok(Err("the model returned an empty response".into()));
        }
        self.push_message(
            ConversationMessage::assistant(resp.text.clone(), Vec::new()),
            false,
        )
        .await?;
        Ok(Ok(resp.text))
    }

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

    /// Says on the timeline, before a wait, that the LLM service is
    /// unreachable and when the next attempt comes: an `error` event (kind
    /// `llm_service_unavailable`) created at the outage's first wait and
    /// updated at each later one, so an outage is one event however many
    /// attempts it takes.
    async fn outage_marker(
        &mut self,
        outage: &mut Outage,
        provider: &str,
        wait: Duration,
    ) -> Result<(), RecordError> {
        let error = &outage.last_error;
        let attempt = outage.failed + 1;
        let content = format!(
            "LLM service unavailable, retrying (attempt {attempt}) in {}: {error}",
            seconds(wait)
        );
        let metadata = json!({
            "kind": LLM_SERVICE_UNAVAILABLE,
            "provider": provider,
            "attempt": attempt,
            "retry_in_ms": millis(wait),
            "error": error,
            "unavailable_for_ms": millis(outage.duration()),
        });
        match outage.marker.as_mut() {
            None => {
                tracing::warn!(
                    execution_id = %self.ctx.execution_id,
                    %provider, %error, retry_in_ms = millis(wait),
                    "LLM service unavailable; retrying on the same provider"
                );
                let marker = self
                    .rec
                    .create_completed(TimelineEventType::Error, &content, metadata)
                    .await?;
                outage.marker = Some(marker);
            }
            Some(marker) => {
                tracing::debug!(
                    execution_id = %self.ctx.execution_id,
                    %provider, %error, attempt, retry_in_ms = millis(wait),
                    "LLM service still unavailable"
                );
                self.rec
                    .complete(
                        marker,
                        &content,
                        TimelineEventStatus::Completed,
                        Some(metadata),
                    )
                    .await?;
            }
        }
        Ok(())
    }

    /// Gives the outage's marker its final text (none was made if the
    /// outage ended before a wait).
    async fn end_outage(&mut self, outage: &mut Outage, end: OutageEnd) -> Result<(), RecordError> {
        let Some(mut marker) = outage.marker.take() else {
            return Ok(());
        };
        let failed = outage.failed;
        let duration = outage.duration();
        let lasted = seconds(duration);
        let error = &outage.last_error;
        let (content, outcome) = match end {
            OutageEnd::Reached => {
                tracing::info!(
                    execution_id = %self.ctx.execution_id,
                    failed_attempts = failed, unavailable_for = %lasted,
                    "LLM service reachable again"
                );
                (
                    format!(
                        "LLM service unavailable for {lasted}; reached again on attempt {}",
                        failed + 1
                    ),
                    "reached",
                )
            }
            OutageEnd::GaveUp => {
                tracing::warn!(
                    execution_id = %self.ctx.execution_id,
                    failed_attempts = failed, unavailable_for = %lasted, %error,
                    "LLM service still unavailable at the iteration deadline"
                );
                (
                    format!(
                        "LLM service unavailable for {lasted} ({failed} attempts); stopped \
                         retrying at the iteration deadline: {error}"
                    ),
                    "gave_up",
                )
            }
            OutageEnd::Stopped(why) => (
                format!(
                    "LLM service unavailable for {lasted} ({failed} attempts); stopped \
                     retrying: {why}"
                ),
                "stopped",
            ),
        };
        self.rec
            .complete(
                &mut marker,
                &content,
                TimelineEventStatus::Completed,
                Some(json!({
                    "outcome": outcome,
                    "failed_attempts": failed,
                    "unavailable_for_ms": millis(duration),
                    "retry_in_ms": null,
                })),
            )
            .await
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
                cost_usd: provider.cost_of(usage.as_ref()),
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
    ///
    /// An LLM service that cannot be reached is not the provider's failure:
    /// the attempt is repeated on the same provider after a backoff
    /// (`ctx.service_retry`), without touching the breakers or the chain,
    /// until the next attempt would come too close to the deadline (see
    /// `Outage::failed_attempt`). Only then is the failure handled as any
    /// other (and a next provider gets a fresh iteration timeout, the wait
    /// having used this one's).
    pub async fn call(&mut self, req: &CallRequest<'_>) -> Result<LlmResponse, CallError> {
        let mut deadline = req.deadline;
        let mut outage: Option<Outage> = None;
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
            let mut waited_out = false;
            match &outcome {
                Err(CallError::Llm(e)) if e.is_service_unavailable() => {
                    let o = outage.get_or_insert_with(|| Outage::new(&self.ctx.service_retry));
                    if let Some(wait) = o.failed_attempt(e, deadline) {
                        self.outage_marker(o, &provider.name, wait).await?;
                        match self.guard(deadline, tokio::time::sleep(wait)).await {
                            Ok(()) => continue,
                            // The deadline came first after all (recording
                            // the marker took the rest): as if the wait had
                            // not fit.
                            Err(Interrupt::IterationTimeout) => {}
                            Err(i) => {
                                self.end_outage(o, OutageEnd::Stopped(i.describe())).await?;
                                return Err(i.into());
                            }
                        }
                    }
                    self.end_outage(o, OutageEnd::GaveUp).await?;
                    outage = None;
                    waited_out = true;
                }
                other => {
                    if let Some(mut o) = outage.take() {
                        self.end_outage(&mut o, outage_end(other)).await?;
                    }
                }
            }
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
                            if waited_out {
                                deadline = self.iteration_deadline();
                            }
                            continue;
                        }
                        // The iteration's time went into waiting for the
                        // service: it timed out, and two in a row end the
                        // execution as hung providers do, instead of every
                        // remaining iteration waiting in turn.
                        None if waited_out => return Err(CallError::IterationTimeout),
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

/// How an outage ended, from the attempt that ended it (one that did not
/// find the service unreachable).
fn outage_end(outcome: &Result<LlmResponse, CallError>) -> OutageEnd {
    match outcome {
        Ok(_) | Err(CallError::Llm(_)) => OutageEnd::Reached,
        Err(CallError::IterationTimeout) => OutageEnd::GaveUp,
        Err(CallError::Stop(Stop::Cancelled)) => OutageEnd::Stopped("cancelled"),
        Err(CallError::Stop(Stop::SessionTimeout)) => OutageEnd::Stopped("session timeout reached"),
        Err(CallError::Stop(Stop::Record(_) | Stop::Fatal(_))) => {
            OutageEnd::Stopped("the execution stopped")
        }
    }
}

/// `250 ms`, `1.3 s`.
fn seconds(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
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
            price: None,
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
