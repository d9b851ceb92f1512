//! The executive summary of a session's final analysis: one tool-less LLM
//! call, recorded as a session-level LLM interaction and, on success, as a
//! session-level `executive_summary` timeline event.
//!
//! Local mode and the Kubernetes operator both call [`Summarizer::generate`]. It is
//! fail-open by contract: an error is returned for the caller to record
//! (`executive_summary_error`), and the session still completes.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use tarsy_config::Config;
use tarsy_config::model::ChainSpec;
use tarsy_core::{
    ConversationMessage, EventPublisher, ExecutionRecorder, LlmInteractionType, NewLlmInteraction,
    RecordScope, TimelineEventType,
};
use tarsy_engine::LlmClient;
use tarsy_engine::llm::{Chunk, GenerateInput};
use tarsy_engine::prompt::PromptBuilder;
use tarsy_engine::recording::Recorder;
use tarsy_store::Store;

/// Default limit of the summary call.
pub const DEFAULT_SUMMARY_TIMEOUT: Duration = Duration::from_secs(120);

/// Why no executive summary was produced (the text goes to
/// `executive_summary_error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryError {
    /// The chain's summary provider does not resolve.
    #[error("cannot resolve the executive summary provider: {0}")]
    Provider(String),
    /// The LLM call failed.
    #[error("{0}")]
    Llm(String),
    /// The model answered with nothing.
    #[error("the model returned an empty executive summary")]
    Empty,
    /// The call did not end in time.
    #[error("executive summary timed out after {0}s")]
    TimedOut(u64),
}

/// What the summary call needs from its process.
#[derive(Clone)]
pub struct Summarizer {
    /// Where the call goes (local mode and the operator pass an
    /// [`crate::LlmRouter`]).
    pub llm: Arc<dyn LlmClient>,
    /// Where the interaction and the timeline event are recorded.
    pub store: Store,
    /// Where the timeline event is published (best effort).
    pub publisher: Arc<dyn EventPublisher>,
    /// Limit of the call.
    pub timeout: Duration,
}

impl Summarizer {
    /// Summarizes `final_analysis` of session `session_id` with the chain's
    /// summary provider (chain `executiveSummaryProvider` → chain provider →
    /// default).
    pub async fn generate(
        &self,
        config: &Config,
        session_id: &str,
        chain: &ChainSpec,
        final_analysis: &str,
    ) -> Result<String, SummaryError> {
        let resolved = config
            .resolve_executive_summary(chain)
            .map_err(|e| SummaryError::Provider(e.to_string()))?;
        let prompts = PromptBuilder::new();
        let messages = vec![
            ConversationMessage::system(prompts.executive_summary_system_prompt()),
            ConversationMessage::user(prompts.executive_summary_user_prompt(final_analysis)),
        ];
        let input = GenerateInput {
            session_id: session_id.to_string(),
            execution_id: String::new(),
            messages: messages.clone(),
            provider: resolved.llm_provider.clone(),
            native_tools_override: None,
            backend: resolved.backend,
            tools: Vec::new(),
            clear_cache: false,
        };
        let started = std::time::Instant::now();
        let call = async {
            let mut stream = self
                .llm
                .generate(input)
                .await
                .map_err(|e| SummaryError::Llm(e.to_string()))?;
            let mut text = String::new();
            let mut usage = None;
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Chunk::Text(t) => text.push_str(&t),
                    Chunk::Usage(u) => usage = Some(u),
                    Chunk::Error(e) => return Err(SummaryError::Llm(e.to_string())),
                    _ => {}
                }
            }
            Ok((text, usage))
        };
        let outcome = match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok((text, _))) if text.trim().is_empty() => Err(SummaryError::Empty),
            Ok(o) => o,
            Err(_) => Err(SummaryError::TimedOut(self.timeout.as_secs())),
        };
        let scope = RecordScope {
            session_id: session_id.to_string(),
            stage_id: None,
            execution_id: None,
        };
        let (text, usage, error) = match &outcome {
            Ok((text, usage)) => (text.trim().to_string(), *usage, None),
            Err(e) => (String::new(), None, Some(e.clone())),
        };
        let interaction = NewLlmInteraction {
            scope: scope.clone(),
            interaction_type: LlmInteractionType::ExecutiveSummary,
            provider: resolved.llm_provider.name.clone(),
            model: resolved.llm_provider.model.clone(),
            last_message_id: None,
            llm_request: json!({
                "messages": messages,
                "messages_count": messages.len(),
                "tools": [],
                "backend": resolved.backend.as_str(),
            }),
            llm_response: json!({"text_length": text.len()}),
            thinking_content: None,
            response_text: text.clone(),
            usage,
            cost_usd: resolved.llm_provider.cost_of(usage.as_ref()),
            duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
            error_message: error.as_ref().map(ToString::to_string),
        };
        // Recording is best effort: the summary itself is what the caller stores.
        if let Err(e) = self.store.create_llm_interaction(interaction).await {
            tracing::warn!(%session_id, error = %e, "cannot record the executive summary call");
        }
        if let Some(e) = error {
            return Err(e);
        }
        let recorder: Arc<dyn ExecutionRecorder> = Arc::new(self.store.clone());
        let mut recorder = Recorder::new(scope, recorder, self.publisher.clone());
        if let Err(e) = recorder
            .create_completed(TimelineEventType::ExecutiveSummary, &text, json!({}))
            .await
        {
            tracing::warn!(%session_id, error = %e, "cannot record the executive summary event");
        }
        Ok(text)
    }
}
