//! Investigation memory, the same in every mode: recall before an
//! investigation (the best memories of its scope put into its prompt, the
//! two recall tools), learning after a score (the reflector's stage and
//! execution, its answer turned into memories), and what a person's
//! review does to a session's memories.
//!
//! Memories never cross their scope (a cluster's Alert namespace and
//! project label, local mode's project), which the session row carries
//! from intake. Their text is masked like a tool result before it is
//! stored, so a memory never carries a secret to a later prompt. Memory is
//! fail-open: nothing here fails or delays an investigation or its score.

use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use async_trait::async_trait;
use chrono::Utc;
use serde_json::{Value, json};
use tarsy_config::{Config, MemorySettings};
use tarsy_core::{
    EventPublisher, ExecutionKind, ExecutionRecorder, ExecutionStatus, McpInteractionType,
    NewMcpInteraction, NewTimelineEvent, ProviderType, RecordScope, ResolvedAgentConfig, StageKind,
    TimelineEventStatus, TimelineEventType, ToolCall, ToolDefinition, ToolResult,
};
use tarsy_engine::llm::GrpcEmbedder;
use tarsy_engine::prompt::FailedServer;
use tarsy_engine::{ExecutionResult, ReflectionContext, ToolError, ToolExecutor};
use tarsy_events::lifecycle::PublishedStage;
use tarsy_memory::reflect::{
    FEEDBACK_INSTRUCTIONS, KnownMemory, REFLECTOR_INSTRUCTIONS, ReflectionInput, ToolCallSummary,
};
use tarsy_memory::tools::{BuiltinTool, PastSessionHit};
use tarsy_memory::{Embedder, ShownMemory};
use tarsy_store::{
    Memory, NewAgentExecution, NewMemory, NewStage, RecallQuery, Session, SessionSearch, Store,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{ExecError, Result};
use crate::ids::{execution_id, stage_id};
use crate::launch::{AgentInput, Assignment, Launcher};

/// Name of the reflector's stage.
pub const MEMORY_STAGE_NAME: &str = "Memory";

/// Name of the feedback reflector's stage (it learns from a review's text).
pub const FEEDBACK_STAGE_NAME: &str = "Memory (review feedback)";

/// How long a reflector may run: one tool-less answer.
pub const REFLECTOR_TIMEOUT: Duration = Duration::from_secs(300);

/// What a process needs for investigation memory: the switches and the
/// embedder (optional).
pub struct MemoryService {
    settings: MemorySettings,
    embedder: Option<Arc<dyn Embedder>>,
}

impl std::fmt::Debug for MemoryService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryService")
            .field("settings", &self.settings)
            .field("embedder", &self.embedder.is_some())
            .finish_non_exhaustive()
    }
}

impl MemoryService {
    /// Memory with `settings`, or `None` when it is off.
    pub fn new(
        settings: &MemorySettings,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Option<Arc<MemoryService>> {
        settings.enabled.then(|| {
            Arc::new(MemoryService {
                settings: settings.clone(),
                embedder,
            })
        })
    }

    /// The vector of `text`, when an embedder is configured and answers
    /// (fail-open: full text alone otherwise).
    async fn vector_of(&self, text: &str) -> Option<Vec<f32>> {
        let embedder = self.embedder.as_ref()?;
        match embedder.embed(&[text.to_string()]).await {
            Ok(mut vectors) => vectors.pop(),
            Err(e) => {
                tracing::warn!(error = %e, "no embedding: recall uses full text alone");
                None
            }
        }
    }

    /// The best memories of `scope` for the alert of session
    /// `session_id`, recorded as injected into the session and rendered as
    /// a prompt section; `None` when there are none (the usual case:
    /// precision over recall).
    pub async fn inject(
        &self,
        store: &Store,
        session_id: &str,
        (alert_type, alert_data): (&str, &str),
        scope: &str,
    ) -> Option<String> {
        if self.settings.max_injected == 0 {
            return None;
        }
        let text = alert_text(alert_type, alert_data);
        let query = RecallQuery {
            vector: self.vector_of(&text).await,
            limit: self.settings.max_injected as usize,
            min_similarity: self.settings.similarity_floor,
            min_lexical: self.settings.text_floor,
            reviewed_only: self.settings.require_review,
            alert_type: Some(alert_type.to_string()),
            ..RecallQuery::new(scope, text)
        };
        let recalled = match store.recall_memories(&query).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(%session_id, error = %e, "memories not recalled: the investigation goes on without them");
                return None;
            }
        };
        if recalled.is_empty() {
            return None;
        }
        let ids: Vec<&str> = recalled.iter().map(|r| r.memory.id.as_str()).collect();
        if let Err(e) = store.record_injections(session_id, &ids).await {
            tracing::warn!(%session_id, error = %e, "cannot record the injected memories");
        }
        tarsy_telemetry::global().memories_injected(recalled.len());
        let shown: Vec<ShownMemory> = recalled.iter().map(|r| shown(&r.memory)).collect();
        tarsy_memory::memory_section(&shown)
    }

    /// `inner` with the two recall tools of `scope` added, their calls
    /// recorded like MCP calls under `record`.
    pub fn tools(
        self: &Arc<Self>,
        inner: Arc<dyn ToolExecutor>,
        store: Store,
        scope: String,
        record: RecordScope,
        recorder: Arc<dyn ExecutionRecorder>,
    ) -> Arc<dyn ToolExecutor> {
        Arc::new(RecallTools {
            inner,
            memory: self.clone(),
            store,
            scope,
            record,
            recorder,
        })
    }
}

/// The embedder memory's settings name, if any: the scripted embedder for
/// a `scripted` provider (offline runs and tests: deterministic vectors),
/// else the LLM service's `Embed` at `llm_addr`. `None` (full text alone,
/// logged) when the provider is unknown or the address unusable.
pub fn embedder_for(config: &Config, llm_addr: &str) -> Option<Arc<dyn Embedder>> {
    let settings = config.defaults.memory.embedding.as_ref()?;
    let provider = match config.llm_provider_config(&settings.llm_provider) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "memory embedding provider unusable: recall uses full text alone");
            return None;
        }
    };
    if provider.provider_type == ProviderType::Scripted {
        return Some(Arc::new(tarsy_scripted_llm::ScriptedEmbedder::new()));
    }
    match tonic::transport::Endpoint::from_shared(llm_addr.to_string()) {
        Ok(endpoint) => Some(Arc::new(GrpcEmbedder::from_channel(
            endpoint.connect_lazy(),
            GrpcEmbedder::embedding_config(&provider, &settings.model),
        ))),
        Err(e) => {
            tracing::warn!(error = %e, "memory embeddings: bad LLM service address; recall uses full text alone");
            None
        }
    }
}

/// The alert as recall reads it.
fn alert_text(alert_type: &str, alert_data: &str) -> String {
    format!("{alert_type}\n{alert_data}")
}

/// A stored memory as an agent sees it.
fn shown(m: &Memory) -> ShownMemory {
    let age = Utc::now().signed_duration_since(m.created_at).num_days();
    ShownMemory {
        id: m.id.clone(),
        content: m.content.clone(),
        category: m.category,
        valence: m.valence,
        confidence: m.confidence,
        source_session_id: m.source_session_id.clone(),
        age_days: u32::try_from(age.max(0)).unwrap_or(u32::MAX),
    }
}

/// An investigation's tools plus `tarsy.recall_past_investigations` and
/// `tarsy.search_past_sessions`.
struct RecallTools {
    inner: Arc<dyn ToolExecutor>,
    memory: Arc<MemoryService>,
    store: Store,
    scope: String,
    record: RecordScope,
    recorder: Arc<dyn ExecutionRecorder>,
}

impl RecallTools {
    /// Runs a built-in tool: its text for the model, and whether it failed.
    async fn run(&self, tool: BuiltinTool, arguments: &str) -> (String, bool) {
        match tool {
            BuiltinTool::RecallPastInvestigations => {
                let args = match tarsy_memory::tools::parse_recall_args(arguments) {
                    Ok(a) => a,
                    Err(e) => return (format!("Error: {e}"), true),
                };
                let query = RecallQuery {
                    vector: self.memory.vector_of(&args.query).await,
                    limit: args.limit as usize,
                    min_similarity: self.memory.settings.similarity_floor,
                    min_lexical: self.memory.settings.text_floor,
                    reviewed_only: self.memory.settings.require_review,
                    ..RecallQuery::new(self.scope.clone(), args.query)
                };
                match self.store.recall_memories(&query).await {
                    Ok(found) => {
                        let shown: Vec<ShownMemory> =
                            found.iter().map(|r| shown(&r.memory)).collect();
                        (tarsy_memory::tools::render_recalled(&shown), false)
                    }
                    Err(e) => (
                        format!("Error: past investigations are unavailable: {e}"),
                        true,
                    ),
                }
            }
            BuiltinTool::SearchPastSessions => {
                let args = match tarsy_memory::tools::parse_search_args(arguments) {
                    Ok(a) => a,
                    Err(e) => return (format!("Error: {e}"), true),
                };
                let search = SessionSearch {
                    scope: self.scope.clone(),
                    text: args.query,
                    alert_type: args.alert_type,
                    days_back: Some(args.days_back),
                    limit: args.limit as usize,
                };
                match self.store.search_past_sessions(&search).await {
                    Ok(found) => {
                        // The session investigating now is not a past one.
                        let hits: Vec<PastSessionHit> = found
                            .into_iter()
                            .filter(|s| s.session_id != self.record.session_id)
                            .map(|s| PastSessionHit {
                                age_days: u32::try_from(
                                    Utc::now()
                                        .signed_duration_since(s.created_at)
                                        .num_days()
                                        .max(0),
                                )
                                .unwrap_or(u32::MAX),
                                session_id: s.session_id,
                                alert_type: s.alert_type,
                                status: s.status,
                                score: s.score,
                                excerpt: s.final_analysis.unwrap_or_default(),
                            })
                            .collect();
                        (tarsy_memory::tools::render_past_sessions(&hits), false)
                    }
                    Err(e) => (format!("Error: past sessions are unavailable: {e}"), true),
                }
            }
        }
    }
}

#[async_trait]
impl ToolExecutor for RecallTools {
    async fn execute(&self, call: &ToolCall) -> std::result::Result<ToolResult, ToolError> {
        let Some(tool) = BuiltinTool::from_name(&call.name) else {
            return self.inner.execute(call).await;
        };
        let started = StdInstant::now();
        let (content, is_error) = self.run(tool, &call.arguments).await;
        let arguments = serde_json::from_str::<Value>(&call.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({"raw": call.arguments}));
        let tool_name = short_name(tool);
        tarsy_telemetry::global().memory_tool_call(tool_name, is_error);
        let interaction = NewMcpInteraction {
            scope: self.record.clone(),
            interaction_type: McpInteractionType::ToolCall,
            server_name: tarsy_memory::tools::SERVER.to_string(),
            tool_name: tool_name.to_string(),
            tool_arguments: arguments,
            tool_result: json!({"content": content, "is_error": is_error}),
            available_tools: Value::Null,
            duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
            error_message: None,
        };
        // A recording failure must not fail the investigation.
        if let Err(e) = self.recorder.create_mcp_interaction(interaction).await {
            tracing::warn!(tool = tool.name(), error = %e, "recording a recall tool call failed");
        }
        Ok(ToolResult {
            call_id: call.id.clone(),
            name: tool.name().to_string(),
            content,
            is_error,
            recovered: None,
        })
    }

    async fn list_tools(&self) -> std::result::Result<Vec<ToolDefinition>, ToolError> {
        let mut tools = self.inner.list_tools().await?;
        tools.extend(tarsy_memory::tools::definitions());
        Ok(tools)
    }

    fn unavailable_servers(&self) -> Vec<FailedServer> {
        self.inner.unavailable_servers()
    }

    async fn close(&self) -> std::result::Result<(), ToolError> {
        self.inner.close().await
    }
}

/// What a reflector run changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Learned {
    /// The memories it created.
    pub created: Vec<Memory>,
    /// How many existing memories it reinforced.
    pub reinforced: u64,
    /// How many it deprecated.
    pub deprecated: u64,
}

/// Why a reflector learned nothing: its records, its run or its answer.
#[derive(Debug, thiserror::Error)]
pub enum ReflectionFailed {
    /// The execution did not complete.
    #[error("the reflector did not complete: {0}")]
    Run(String),
    /// Its answer could not be read; nothing was stored.
    #[error("the reflector's answer could not be read: {0}")]
    Answer(String),
    /// The records could not be read or written.
    #[error(transparent)]
    Exec(#[from] ExecError),
}

/// One reflector run over a scored session: where its records are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reflector {
    /// The session reflected on.
    pub session_id: String,
    /// The memory scope it learns in.
    pub scope: String,
    /// The reflector's stage.
    pub stage_id: String,
    /// Its index among the session's stages.
    pub stage_index: u32,
    /// The reflector's execution.
    pub execution_id: String,
    /// A feedback reflector: it learns from a person's review text.
    pub feedback: bool,
}

/// The memories a reflector was shown (id, text): the only ones it may
/// reinforce or deprecate, and those a new memory must not duplicate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KnownMemories(Vec<(String, String)>);

impl Reflector {
    /// Starts the reflector of a finished session (`feedback`: the
    /// feedback reflector, after a person's review text) when memory is on
    /// and the session has a scope: its records, and the agent to run.
    /// `None`: nothing to learn (memory off, or a session with no scope).
    pub async fn start_for(
        store: &Store,
        config: &Config,
        session_id: &str,
        feedback: bool,
    ) -> Result<Option<(Reflector, ResolvedAgentConfig)>> {
        if !config.defaults.memory.enabled {
            return Ok(None);
        }
        let Some(scope) = store.session_memory_scope(session_id).await? else {
            return Ok(None);
        };
        let session = store.get_session(session_id).await?;
        let chain = config.chain(&session.chain_id).ok_or_else(|| {
            ExecError::Invalid(format!(
                "the session's chain {:?} is gone: no reflector",
                session.chain_id
            ))
        })?;
        let agent = config
            .resolve_reflector(&chain.spec)
            .map_err(|e| ExecError::Invalid(format!("no reflector: {e}")))?;
        let reflector = Reflector::start(store, session_id, &scope, &agent, feedback).await?;
        Ok(Some((reflector, agent)))
    }

    /// Creates the reflector's stage (kind `memory`) and execution of a
    /// finished session in `scope`.
    async fn start(
        store: &Store,
        session_id: &str,
        scope: &str,
        agent: &ResolvedAgentConfig,
        feedback: bool,
    ) -> Result<Reflector> {
        let stage_index = crate::records::next_stage_index(store, session_id).await?;
        let reflector = Reflector {
            session_id: session_id.to_string(),
            scope: scope.to_string(),
            stage_id: stage_id(session_id, stage_index),
            stage_index,
            execution_id: execution_id(session_id, stage_index, 1),
            feedback,
        };
        store
            .create_stage(NewStage {
                id: Some(reflector.stage_id.clone()),
                session_id: session_id.to_string(),
                stage_name: reflector.stage_name().to_string(),
                kind: StageKind::Memory,
                stage_index: i64::from(stage_index),
                expected_agent_count: 1,
                parallel_type: None,
                success_policy: None,
                chat_id: None,
                chat_user_message_id: None,
            })
            .await?;
        store
            .create_agent_execution(NewAgentExecution {
                id: Some(reflector.execution_id.clone()),
                stage_id: reflector.stage_id.clone(),
                session_id: session_id.to_string(),
                agent_name: agent.display_name.clone(),
                agent_index: 1,
                kind: ExecutionKind::Memory,
                iteration_strategy: agent.iteration_strategy,
                llm_provider: Some(agent.llm_provider.name.clone()),
            })
            .await?;
        Ok(reflector)
    }

    /// The reflector whose stage is `stage` (kind `memory`), from its
    /// records: how another process (an investigation pod, the operator)
    /// finds a reflector started elsewhere.
    pub async fn of_stage(store: &Store, stage: &tarsy_store::Stage) -> Result<Reflector> {
        if stage.kind != StageKind::Memory {
            return Err(ExecError::Invalid(format!(
                "stage {} is not a reflector's",
                stage.id
            )));
        }
        let scope = store
            .session_memory_scope(&stage.session_id)
            .await?
            .ok_or_else(|| {
                ExecError::Invalid(format!("session {} has no memory scope", stage.session_id))
            })?;
        let stage_index = u32::try_from(stage.stage_index).unwrap_or_default();
        Ok(Reflector {
            session_id: stage.session_id.clone(),
            scope,
            stage_id: stage.id.clone(),
            stage_index,
            execution_id: execution_id(&stage.session_id, stage_index, 1),
            feedback: stage.stage_name == FEEDBACK_STAGE_NAME,
        })
    }

    /// The name of the reflector's stage.
    pub fn stage_name(&self) -> &'static str {
        if self.feedback {
            FEEDBACK_STAGE_NAME
        } else {
            MEMORY_STAGE_NAME
        }
    }

    fn stage_ref(&self) -> PublishedStage<'_> {
        PublishedStage {
            id: &self.stage_id,
            name: self.stage_name(),
            index: i64::from(self.stage_index),
        }
    }

    /// What the reflector reads (the investigation, its score and review,
    /// the similar memories of its scope) and those memories.
    async fn input(
        &self,
        store: &Store,
        memory: &MemoryService,
    ) -> Result<(AgentInput, KnownMemories)> {
        let session = store.get_session(&self.session_id).await?;
        let text = format!(
            "{}\n{}",
            alert_text(&session.alert_type, &session.alert_data),
            session.final_analysis.as_deref().unwrap_or_default()
        );
        let query = RecallQuery {
            vector: memory.vector_of(&text).await,
            limit: tarsy_memory::reflect::MAX_EXISTING,
            min_similarity: memory.settings.similarity_floor,
            min_lexical: 0.0,
            ..RecallQuery::new(self.scope.clone(), text)
        };
        let existing = store.recall_memories(&query).await?;
        let known = KnownMemories(
            existing
                .iter()
                .map(|r| (r.memory.id.clone(), r.memory.content.clone()))
                .collect(),
        );
        let attempt = store
            .session_scores(&self.session_id)
            .await?
            .into_iter()
            .find(|a| a.status == tarsy_core::ScoreStatus::Completed);
        let review = store.review(&self.session_id).await.ok().flatten();
        let input = ReflectionInput {
            alert_type: session.alert_type.clone(),
            alert_data: session.alert_data.clone(),
            final_analysis: session.final_analysis.clone().unwrap_or_default(),
            executive_summary: session.executive_summary.clone(),
            tool_calls: tool_calls(store, &self.session_id).await,
            score: attempt.as_ref().and_then(|a| a.score),
            failure_tags: attempt
                .as_ref()
                .map(|a| a.failure_tags.clone())
                .unwrap_or_default(),
            tool_report: attempt.and_then(|a| a.tool_report),
            review_rating: review.as_ref().and_then(|r| r.rating),
            // A person's words reach the model masked, or not at all.
            review_feedback: review
                .and_then(|r| r.feedback)
                .and_then(|f| tarsy_masking::mask_memory_text(&f)),
            existing: existing
                .iter()
                .map(|r| KnownMemory {
                    id: r.memory.id.clone(),
                    content: r.memory.content.clone(),
                    category: r.memory.category,
                    valence: r.memory.valence,
                    confidence: r.memory.confidence,
                })
                .collect(),
        };
        let instructions = if self.feedback {
            FEEDBACK_INSTRUCTIONS
        } else {
            REFLECTOR_INSTRUCTIONS
        };
        Ok((
            AgentInput::Reflection(ReflectionContext {
                instructions: instructions.to_string(),
                prompt: tarsy_memory::reflection_prompt(&input),
            }),
            known,
        ))
    }

    /// Marks the stage active and builds what the reflector reads, with
    /// the memories it is shown (for [`Reflector::end`]).
    pub async fn begin(
        &self,
        store: &Store,
        publisher: &Arc<dyn EventPublisher>,
        memory: &MemoryService,
    ) -> Result<(AgentInput, KnownMemories)> {
        crate::records::stage_status(
            store,
            publisher.as_ref(),
            &self.session_id,
            self.stage_ref(),
            ExecutionStatus::Active,
            None,
        )
        .await;
        self.input(store, memory).await
    }

    /// Applies the reflector's answer (the memories it creates, masked;
    /// those it reinforces and deprecates among `known`), then ends the
    /// stage with the execution's outcome, published (the caller records
    /// the execution's own status first). What it learned is stored before
    /// its end is announced: whoever sees the stage end finds the
    /// memories. An unreadable answer stores nothing and shows as an error
    /// event on the execution. Without `memory` (switched off meanwhile)
    /// nothing is learned.
    pub async fn end(
        &self,
        store: &Store,
        publisher: &Arc<dyn EventPublisher>,
        memory: Option<&MemoryService>,
        result: &ExecutionResult,
        known: &KnownMemories,
    ) -> std::result::Result<Learned, ReflectionFailed> {
        let learned = match (memory, store.get_session(&self.session_id).await) {
            (Some(memory), Ok(session)) => self.apply(store, memory, &session, result, known).await,
            (None, _) => Err(ReflectionFailed::Run("investigation memory is off".into())),
            (_, Err(e)) => Err(ExecError::from(e).into()),
        };
        crate::records::stage_status(
            store,
            publisher.as_ref(),
            &self.session_id,
            self.stage_ref(),
            result.status,
            result.error.as_deref(),
        )
        .await;
        learned
    }

    /// Runs the reflector in this process: [`Reflector::begin`], the
    /// agent, the execution's end, [`Reflector::end`].
    pub async fn run(
        &self,
        launcher: &Launcher,
        memory: &MemoryService,
        agent: ResolvedAgentConfig,
        deadline: Instant,
        cancel: CancellationToken,
    ) -> std::result::Result<Learned, ReflectionFailed> {
        let store = &launcher.store;
        let publisher = &launcher.publisher;
        let prepared = async {
            let (input, known) = self.begin(store, publisher, memory).await?;
            Ok::<_, ExecError>((store.get_session(&self.session_id).await?, input, known))
        }
        .await;
        let (session, input, known) = match prepared {
            Ok(p) => p,
            Err(e) => {
                let why = format!("cannot build what the reflector reads: {e}");
                self.close(store, publisher, &why).await;
                return Err(e.into());
            }
        };
        let assignment = Assignment::new(
            &session,
            self.stage_id.clone(),
            self.execution_id.clone(),
            agent,
            input,
            deadline,
            cancel,
        );
        let result = launcher.run(assignment, None).await.result;
        if let Err(e) = store
            .update_agent_execution_status(
                &self.execution_id,
                result.status,
                result.error.as_deref(),
            )
            .await
        {
            tracing::warn!(execution_id = %self.execution_id, error = %e, "cannot record the reflector's execution status");
        }
        self.end(store, publisher, Some(memory), &result, &known)
            .await
    }

    /// Fails the execution and the stage with `why`, published: a
    /// reflector that cannot run.
    pub async fn close(&self, store: &Store, publisher: &Arc<dyn EventPublisher>, why: &str) {
        if let Err(e) = store
            .update_agent_execution_status(&self.execution_id, ExecutionStatus::Failed, Some(why))
            .await
        {
            tracing::warn!(execution_id = %self.execution_id, error = %e, "cannot record the reflector's execution status");
        }
        crate::records::stage_status(
            store,
            publisher.as_ref(),
            &self.session_id,
            self.stage_ref(),
            ExecutionStatus::Failed,
            Some(why),
        )
        .await;
    }

    /// The reflector's answer into the store.
    async fn apply(
        &self,
        store: &Store,
        memory: &MemoryService,
        session: &Session,
        result: &ExecutionResult,
        known: &KnownMemories,
    ) -> std::result::Result<Learned, ReflectionFailed> {
        let answer = match (&result.status, &result.final_analysis) {
            (ExecutionStatus::Completed, Some(text)) => text,
            _ => {
                tarsy_telemetry::global().reflection_failed();
                return Err(ReflectionFailed::Run(result.error.clone().unwrap_or_else(
                    || format!("the reflector's execution ended {}", result.status),
                )));
            }
        };
        let mut reflection = match tarsy_memory::parse_reflection(answer) {
            Ok(r) => r,
            Err(e) => {
                tarsy_telemetry::global().reflection_failed();
                self.warn(
                    store,
                    &format!("The reflector's answer could not be read; no memory was stored: {e}"),
                )
                .await;
                return Err(ReflectionFailed::Answer(e.to_string()));
            }
        };
        reflection.retain_known(known.0.iter().map(|(id, _)| id.as_str()));
        for w in &reflection.warnings {
            tracing::info!(session_id = %self.session_id, warning = %w, "reflector answer repaired");
        }
        let mut learned = Learned::default();
        for draft in reflection.create {
            // Fail-closed: a memory that cannot be masked is not stored.
            let Some(content) = tarsy_masking::mask_memory_text(&draft.content) else {
                tracing::warn!(session_id = %self.session_id, "a memory that could not be masked was dropped");
                continue;
            };
            // Learning what is known already confirms it: no duplicate.
            if let Some((id, _)) = known.0.iter().find(|(_, c)| same_text(c, &content)) {
                if !reflection.reinforce.contains(id) && !reflection.deprecate.contains(id) {
                    reflection.reinforce.push(id.clone());
                }
                continue;
            }
            let new = NewMemory {
                scope: self.scope.clone(),
                embedding: memory.vector_of(&content).await,
                content,
                category: draft.category,
                valence: draft.valence,
                confidence: draft.confidence,
                alert_type: Some(session.alert_type.clone()),
                chain_id: Some(session.chain_id.clone()),
                source_session_id: Some(self.session_id.clone()),
            };
            learned
                .created
                .push(store.create_memory(new).await.map_err(ExecError::from)?);
        }
        learned.reinforced = store
            .reinforce_memories(&self.scope, &reflection.reinforce)
            .await
            .map_err(ExecError::from)?;
        learned.deprecated = store
            .deprecate_memories(&self.scope, &reflection.deprecate)
            .await
            .map_err(ExecError::from)?;
        Ok(learned)
    }

    /// An `error` event on the reflector's execution.
    async fn warn(&self, store: &Store, message: &str) {
        let last = store
            .execution_timeline(&self.execution_id)
            .await
            .ok()
            .and_then(|t| t.iter().map(|e| e.sequence_number).max())
            .unwrap_or(0);
        let event = NewTimelineEvent {
            scope: RecordScope {
                session_id: self.session_id.clone(),
                stage_id: Some(self.stage_id.clone()),
                execution_id: Some(self.execution_id.clone()),
            },
            sequence_number: last + 1,
            event_type: TimelineEventType::Error,
            status: TimelineEventStatus::Completed,
            content: message.to_string(),
            metadata: json!({"kind": "memory_answer_unreadable"}),
        };
        if let Err(e) = store.create_timeline_event(event).await {
            tracing::warn!(execution_id = %self.execution_id, error = %e, "cannot record the reflector's warning");
        }
    }
}

/// The investigation's tool calls, oldest first (the reflector's prompt
/// bounds how many and how much of each it shows).
async fn tool_calls(store: &Store, session_id: &str) -> Vec<ToolCallSummary> {
    let calls = match store.session_mcp_interactions(session_id).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(session_id, error = %e, "the reflector sees no tool calls: the trace is unreadable");
            return Vec::new();
        }
    };
    calls
        .into_iter()
        .filter(|i| i.interaction_type == McpInteractionType::ToolCall)
        .map(|i| ToolCallSummary {
            name: format!("{}.{}", i.server_name, i.tool_name),
            arguments: i.tool_arguments.to_string(),
            result: i
                .tool_result
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        })
        .collect()
}

/// A recall tool's name without the `tarsy.` server prefix, as recorded and counted.
fn short_name(tool: BuiltinTool) -> &'static str {
    tool.name().split_once('.').map_or(tool.name(), |(_, t)| t)
}

/// Whether two memory texts say the same, case and spacing aside.
fn same_text(a: &str, b: &str) -> bool {
    let words = |t: &str| {
        t.split_whitespace()
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
    };
    words(a) == words(b)
}

#[cfg(test)]
mod tests {
    /// The tools the metrics start at 0 are the recall tools.
    #[test]
    fn the_metrics_know_the_recall_tools() {
        let names = tarsy_memory::tools::BuiltinTool::ALL.map(super::short_name);
        assert_eq!(names, tarsy_telemetry::MEMORY_TOOLS);
    }
}
