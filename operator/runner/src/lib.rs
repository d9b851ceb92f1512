//! `tarsy runner`: runs ONE AgentExecution inside its investigation pod.
//!
//! [`run`] loads the execution through the Kubernetes API, rebuilds its
//! agent configuration from `spec.resolved` plus the namespace's
//! `LLMProvider`s and `MCPServer`s, builds its context from Postgres
//! (earlier stages' results, the investigations a synthesis reads, or the
//! whole session timeline for a chat answer), connects to its MCP servers on
//! localhost, runs the engine (every timeline event, message and interaction
//! is written to Postgres as it happens and published as a stream event),
//! and reports progress in its own AgentExecution's `status` (server-side
//! apply, field manager [`FIELD_MANAGER`]): phase Active → terminal,
//! iteration, tokens, a bounded recent timeline, the clipped final analysis
//! and error, and whether each MCP server could be connected to (which the
//! operator turns into the MCPServer's `status.lastHealth`). Cancelling the token given to [`run`] (SIGTERM in the binary)
//! stops the engine; the execution is recorded Cancelled.
//!
//! | module | what |
//! |---|---|
//! | [`summary`] | pure: status from timeline events, clipping, phase mapping, input formats, prior-stage rule |
//! | [`error`] | [`RunnerError`] |

#![warn(missing_docs)]

pub mod error;
pub mod summary;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use tarsy_config::convert::{EnvSecretResolver, Placement, SecretResolver, env_name_for_key};
use tarsy_config::{Config, Defaults, DefaultsSpec};
use tarsy_core::config::HttpTransport;
use tarsy_core::{
    EventPublisher, ExecutionKind, ExecutionRecorder, ExecutionStatus, McpServerConfig,
    McpTransport, RecordError, RecordScope, ResolvedAgentConfig, SecretValue, TimelineEventType,
    TokenUsage,
};
use tarsy_crds::McpServerOutcome;
use tarsy_crds::{
    API_VERSION, AgentExecution, AgentExecutionStatus, ExecutionPhase, LLMProvider, MCPServer,
    SecretKeyRef,
};
use tarsy_engine::context::{
    AgentInvestigation, build_stage_context, format_investigation_context,
    format_investigation_for_synthesis,
};
use tarsy_engine::prompt::FailedServer;
use tarsy_engine::recording::Recorder;
use tarsy_engine::{
    ChatContext, ExecutionContext, ExecutionResult, InMemoryToolExecutor, LlmClient, ToolExecutor,
    run_agent,
};
use tarsy_masking::MaskingService;
use tarsy_mcp::{ExecutorRequest, McpClientFactory};
use tarsy_session::LlmRouter;
use tarsy_session::tools::McpTools;
use tarsy_store::{ConnectOptions, Store};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use error::RunnerError;
use summary::{Outcome, PriorExecution, PriorStage};

/// Field manager of every status write of the runner.
pub const FIELD_MANAGER: &str = "tarsy-runner";

/// What the runner needs besides its AgentExecution.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Namespace of the AgentExecution.
    pub namespace: String,
    /// Name of the AgentExecution.
    pub name: String,
    /// Postgres URL.
    pub database_url: String,
    /// Address of the LLM service (`http://host:port`).
    pub llm_addr: String,
    /// MCP endpoint of each server on localhost (`name → URL`); overrides
    /// the address derived from the MCPServer.
    pub mcp_endpoints: BTreeMap<String, String>,
    /// Bridge port of each stdio server.
    pub bridge_ports: BTreeMap<String, u16>,
    /// Directory relative `scripted` provider scripts are read from.
    pub script_dir: PathBuf,
    /// How long to keep trying to reach Postgres at start.
    pub database_retry: Duration,
    /// How often progress is written to the status at most.
    pub status_interval: Duration,
}

impl RunnerOptions {
    /// Options with the defaults for everything but the execution and the
    /// service addresses.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        database_url: impl Into<String>,
        llm_addr: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            database_url: database_url.into(),
            llm_addr: llm_addr.into(),
            mcp_endpoints: BTreeMap::new(),
            bridge_ports: BTreeMap::new(),
            script_dir: PathBuf::from("."),
            database_retry: Duration::from_secs(30),
            status_interval: Duration::from_millis(500),
        }
    }
}

/// What a finished run reports.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// The terminal phase recorded.
    pub phase: ExecutionPhase,
    /// Time from the start of [`run`] to the first LLM request, MCP
    /// initialisation excluded (none when no LLM call was made).
    pub first_llm_request: Option<Duration>,
    /// Time spent opening MCP sessions.
    pub mcp_init: Duration,
}

/// Reads secrets the pod builder passed as `TARSY_SECRET_{NAME}__{KEY}`.
struct PodSecrets;

impl SecretResolver for PodSecrets {
    fn secret(&self, r: &SecretKeyRef) -> Result<SecretValue, tarsy_config::SecretError> {
        let var = format!(
            "TARSY_SECRET_{}__{}",
            env_name_for_key(&r.name),
            env_name_for_key(&r.key)
        );
        match std::env::var(&var) {
            Ok(v) => Ok(SecretValue::new(v)),
            Err(_) => EnvSecretResolver.secret(r),
        }
    }
}

/// Forwards events to the store publisher and wakes the status reporter.
struct NotifyingPublisher {
    inner: Arc<dyn EventPublisher>,
    changed: Arc<Notify>,
}

#[async_trait]
impl EventPublisher for NotifyingPublisher {
    async fn publish(
        &self,
        session_id: &str,
        channel: &str,
        payload: Value,
    ) -> Result<i64, RecordError> {
        let out = self.inner.publish(session_id, channel, payload).await;
        self.changed.notify_one();
        out
    }

    async fn publish_transient(&self, channel: &str, payload: Value) {
        self.inner.publish_transient(channel, payload).await;
    }
}

/// Writes the execution's status (server-side apply, forced: the runner is
/// the authority for the fields it sets).
#[derive(Clone)]
struct StatusWriter {
    api: Api<AgentExecution>,
    name: String,
}

impl StatusWriter {
    async fn write(&self, status: &AgentExecutionStatus) -> Result<(), RunnerError> {
        let body = json!({
            "apiVersion": API_VERSION,
            "kind": "AgentExecution",
            "status": status,
        });
        self.api
            .patch_status(
                &self.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map(|_| ())
            .map_err(|e| RunnerError::kube(format!("writing the status of {}", self.name), e))
    }

    /// Retries a terminal write a few times: it is what the operator waits for.
    async fn write_terminal(&self, status: &AgentExecutionStatus) -> Result<(), RunnerError> {
        let mut last = None;
        for attempt in 0..5u32 {
            match self.write(status).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(attempt, error = %e, "terminal status not written; retrying");
                    last = Some(e);
                    tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
                }
            }
        }
        Err(last.unwrap_or_else(|| RunnerError::Invalid("no attempt made".into())))
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Connects to Postgres, retrying with backoff for at most `budget`
/// (a database restarting while pods start is normal). Stops early when
/// `cancel` fires.
pub async fn connect_store(
    url: &str,
    budget: Duration,
    cancel: &CancellationToken,
) -> Result<Store, RunnerError> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(250);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let options = ConnectOptions {
            run_migrations: false,
            max_connections: 4,
            acquire_timeout: Duration::from_secs(5),
            ..ConnectOptions::default()
        };
        let err = match Store::connect_with(url, options).await {
            Ok(store) => return Ok(store),
            Err(e @ tarsy_store::StoreError::UnsupportedUrl(_)) => return Err(e.into()),
            Err(e) => e,
        };
        let elapsed = started.elapsed();
        if elapsed + delay > budget || cancel.is_cancelled() {
            return Err(RunnerError::DatabaseUnreachable {
                attempts,
                waited_secs: elapsed.as_secs(),
                last: err.to_string(),
            });
        }
        tracing::warn!(attempt = attempts, error = %err, retry_in_ms = delay.as_millis() as u64, "Postgres unreachable; retrying");
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = cancel.cancelled() => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Runs the AgentExecution `options` names to a terminal phase and records
/// it (Postgres and status). Cancelling `cancel` stops it as Cancelled.
/// An error means no terminal phase could be recorded in Postgres.
pub async fn run(
    client: kube::Client,
    options: RunnerOptions,
    cancel: CancellationToken,
) -> Result<RunReport, RunnerError> {
    let t0 = Instant::now();
    let api: Api<AgentExecution> = Api::namespaced(client.clone(), &options.namespace);
    let writer = StatusWriter {
        api: api.clone(),
        name: options.name.clone(),
    };
    let ae = api.get(&options.name).await.map_err(|e| {
        RunnerError::kube(
            format!(
                "reading AgentExecution {}/{}",
                options.namespace, options.name
            ),
            e,
        )
    })?;
    let prior = ae.status.clone().unwrap_or_default();
    if let Some(phase) = prior.phase.filter(|p| p.is_terminal()) {
        tracing::info!(%options.name, ?phase, "execution already ended; nothing to run");
        return Ok(RunReport {
            phase,
            first_llm_request: None,
            mcp_init: Duration::ZERO,
        });
    }
    let spec = &ae.spec;
    let stage_id = spec
        .stage
        .id
        .clone()
        .unwrap_or_else(|| format!("{}-s{}", spec.session_id, spec.stage.index));
    let execution_id = prior
        .execution_id
        .clone()
        .unwrap_or_else(|| format!("{stage_id}-e{}", spec.agent_index));
    let started_at = prior.started_at.clone().unwrap_or_else(now);

    // Kubernetes reads and the database connection in parallel: both are
    // on the path to the first LLM request.
    let providers: Api<LLMProvider> = Api::namespaced(client.clone(), &options.namespace);
    let servers: Api<MCPServer> = Api::namespaced(client.clone(), &options.namespace);
    let list = ListParams::default();
    let (providers, servers, store) = tokio::join!(
        providers.list(&list),
        servers.list(&list),
        connect_store(&options.database_url, options.database_retry, &cancel),
    );
    let store = match store {
        Ok(s) => s,
        Err(e) => {
            let phase = if cancel.is_cancelled() {
                ExecutionPhase::Cancelled
            } else {
                ExecutionPhase::Failed
            };
            let status = AgentExecutionStatus {
                phase: Some(phase),
                execution_id: Some(execution_id.clone()),
                error: Some(tarsy_crds::clip(
                    &format!("runner could not reach Postgres: {e}"),
                    tarsy_crds::MAX_STATUS_TEXT_CHARS,
                )),
                started_at: Some(started_at.clone()),
                completed_at: Some(now()),
                ..AgentExecutionStatus::default()
            };
            if let Err(w) = writer.write_terminal(&status).await {
                tracing::error!(error = %w, "cannot record the failure in the status either");
            }
            return Err(e);
        }
    };
    let providers = providers.map_err(|e| RunnerError::kube("listing LLMProviders", e))?;
    let servers = servers.map_err(|e| RunnerError::kube("listing MCPServers", e))?;

    let prepared = prepare(&options, &ae, &providers.items, &servers.items);
    let (config, mcp_configs, masking) = match prepared {
        Ok(p) => p,
        Err(e) => {
            let result = ExecutionResult::ended(
                ExecutionStatus::Failed,
                format!("cannot rebuild the agent configuration: {e}"),
                TokenUsage::default(),
                0,
            );
            let end = (result.status, result.error.clone());
            let report = finish(
                &store,
                &writer,
                &execution_id,
                &started_at,
                result,
                None,
                Duration::ZERO,
                Vec::new(),
            )
            .await;
            finish_chat_stage(&store, &ae, &stage_id, end.0, end.1.as_deref()).await;
            return report;
        }
    };

    let llm = Arc::new(
        LlmRouter::new(&options.llm_addr, &options.script_dir)
            .map_err(|e| RunnerError::Config(e.to_string()))?,
    );
    let mut calls = llm.subscribe_calls();
    let changed = Arc::new(Notify::new());
    let publisher: Arc<dyn EventPublisher> = Arc::new(NotifyingPublisher {
        inner: Arc::new(tarsy_events::StorePublisher::new(store.clone(), None)),
        changed: changed.clone(),
    });

    // Progress reporter: phase Active now, then iteration and timeline as
    // they change (at most every `status_interval`).
    let iterations = Arc::new(AtomicU32::new(0));
    let first_call: Arc<std::sync::Mutex<Option<Duration>>> = Arc::default();
    let reporter_stop = CancellationToken::new();
    let mcp_outcomes: SharedOutcomes = Arc::default();
    // LLM calls are counted by their own task, as they start: the reporter
    // may be busy writing or waiting out `status_interval`, and a quick run
    // would otherwise end before it saw them.
    let call_watcher = {
        let changed = changed.clone();
        let execution_id = execution_id.clone();
        let iterations = iterations.clone();
        let first_call = first_call.clone();
        let stop = reporter_stop.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    // Calls already sent are counted before stopping.
                    biased;
                    call = calls.recv() => match call {
                        Ok(c) if c.execution_id == execution_id => {
                            let mut f = first_call.lock().unwrap_or_else(|e| e.into_inner());
                            if f.is_none() {
                                *f = Some(t0.elapsed());
                            }
                            iterations.fetch_add(1, Ordering::Relaxed);
                            changed.notify_one();
                        }
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    },
                    _ = stop.cancelled() => return,
                }
            }
        })
    };
    let reporter = {
        let mcp_outcomes = mcp_outcomes.clone();
        let changed = changed.clone();
        let store = store.clone();
        let writer = writer.clone();
        let execution_id = execution_id.clone();
        let started_at = started_at.clone();
        let iterations = iterations.clone();
        let stop = reporter_stop.clone();
        let interval = options.status_interval;
        tokio::spawn(async move {
            let mut last: Option<AgentExecutionStatus> = None;
            loop {
                let events = store
                    .execution_timeline(&execution_id)
                    .await
                    .unwrap_or_default();
                let mut status = summary::progress_status(
                    &execution_id,
                    iterations.load(Ordering::Relaxed),
                    &events,
                    &started_at,
                );
                // Every write carries the outcomes: server-side apply drops
                // fields this manager owned but left out.
                status.mcp_servers = outcomes_of(&mcp_outcomes);
                if last.as_ref() != Some(&status) {
                    match writer.write(&status).await {
                        Ok(()) => last = Some(status),
                        Err(e) => tracing::warn!(error = %e, "progress not written"),
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = changed.notified() => {}
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(interval) => {}
                }
            }
        })
    };

    let run = Execution {
        store: store.clone(),
        ae: &ae,
        stage_id: stage_id.clone(),
        execution_id: execution_id.clone(),
        config,
        mcp_configs,
        masking,
        llm,
        publisher,
        cancel: cancel.clone(),
        mcp_outcomes: mcp_outcomes.clone(),
        changed,
    };
    let (mut result, mcp_init) = run.run().await;
    if result.status == ExecutionStatus::Cancelled && stopped_for_timeout(&api, &options.name).await
    {
        // The operator stops executions at the session deadline the same way
        // it stops cancelled ones (SIGTERM): its annotation tells them apart.
        result.status = ExecutionStatus::TimedOut;
        result.error = Some("session timed out".into());
    }
    reporter_stop.cancel();
    let _ = reporter.await;
    let _ = call_watcher.await;
    let first = *first_call.lock().unwrap_or_else(|e| e.into_inner());
    let end = (result.status, result.error.clone());
    let report = finish(
        &store,
        &writer,
        &execution_id,
        &started_at,
        result,
        first.map(|d| d.saturating_sub(mcp_init)),
        mcp_init,
        outcomes_of(&mcp_outcomes),
    )
    .await;
    finish_chat_stage(&store, &ae, &stage_id, end.0, end.1.as_deref()).await;
    report
}

/// Whether the execution was stopped because its session timed out (the
/// stop annotation says `timed_out`). Unknown (unreadable) counts as no.
async fn stopped_for_timeout(api: &Api<AgentExecution>, name: &str) -> bool {
    match api.get(name).await {
        Ok(ae) => ae
            .annotations()
            .get(tarsy_crds::STOP_ANNOTATION)
            .is_some_and(|v| v == tarsy_crds::STOP_TIMED_OUT),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read why the execution was stopped");
            false
        }
    }
}

/// A chat answer is its own stage record: it ends with the execution (as in
/// local mode), otherwise the chat would refuse every later question as busy.
/// Best effort: the API also closes a chat stage whose execution ended.
async fn finish_chat_stage(
    store: &Store,
    ae: &AgentExecution,
    stage_id: &str,
    status: ExecutionStatus,
    error: Option<&str>,
) {
    let Some(chat) = chat_of(ae) else { return };
    if let Err(e) = store.update_stage_status(stage_id, status, error).await {
        tracing::warn!(stage_id, error = %e, "cannot record the chat stage's end");
    }
    if let Err(e) = store.touch_chat(&chat.chat_id, None).await {
        tracing::warn!(chat_id = %chat.chat_id, error = %e, "cannot record the chat's last interaction");
    }
    publish_chat_stage(store, ae, stage_id, status.as_str()).await;
}

/// The chat request of a chat execution.
fn chat_of(ae: &AgentExecution) -> Option<&tarsy_crds::ChatRequestSpec> {
    let kind: ExecutionKind = ae.spec.kind.into();
    ae.spec
        .chat
        .as_ref()
        .filter(|_| kind == ExecutionKind::Chat)
}

/// `stage.status` of a chat stage, as local mode publishes it.
async fn publish_chat_stage(store: &Store, ae: &AgentExecution, stage_id: &str, status: &str) {
    let publisher = tarsy_events::StorePublisher::new(store.clone(), None);
    let stage = tarsy_events::lifecycle::StageRef {
        id: stage_id,
        name: &ae.spec.stage.name,
        index: i64::from(ae.spec.stage.index),
    };
    tarsy_events::lifecycle::publish_stage_status(&publisher, &ae.spec.session_id, stage, status)
        .await;
}

type Prepared = (
    ResolvedAgentConfig,
    BTreeMap<String, McpServerConfig>,
    Arc<MaskingService>,
);

/// The agent configuration, MCP server configurations and masking of the
/// execution, from its spec and the namespace's resources.
fn prepare(
    options: &RunnerOptions,
    ae: &AgentExecution,
    providers: &[LLMProvider],
    servers: &[MCPServer],
) -> Result<Prepared, RunnerError> {
    let mut defaults = Defaults::default();
    match DefaultsSpec::from_env(&|n| std::env::var(n).ok()) {
        Ok(spec) => {
            if let Err(problems) = defaults.apply(&spec) {
                tracing::warn!(?problems, "ignoring invalid TARSY_DEFAULT_* settings");
            }
        }
        Err(problems) => tracing::warn!(?problems, "ignoring invalid TARSY_DEFAULT_* settings"),
    }
    let config = Config::from_resources(defaults, &[], &[], servers, providers);
    let resolved = config
        .resolved_from_spec(
            &ae.spec.agent_name,
            &ae.spec.display_name,
            &ae.spec.resolved,
        )
        .map_err(|e| RunnerError::Config(e.to_string()))?;
    let placement = Placement::Pod {
        bridge_ports: options.bridge_ports.clone(),
    };
    let mut mcp = BTreeMap::new();
    for name in &resolved.mcp_servers {
        let endpoint = options.mcp_endpoints.get(name);
        let built = config.mcp_server_config(name, &PodSecrets, &placement);
        let cfg = match (built, endpoint) {
            (Ok(mut c), Some(url)) => {
                c.transport = local_http(url, c.transport);
                c
            }
            (Ok(c), None) => c,
            (Err(_), Some(url)) => McpServerConfig {
                name: name.clone(),
                transport: local_http(
                    url,
                    McpTransport::Stdio {
                        command: String::new(),
                        args: Vec::new(),
                        env: BTreeMap::new(),
                    },
                ),
                instructions: String::new(),
                summarization: Default::default(),
            },
            (Err(e), None) => {
                // The agent runs without it and is told it is unavailable.
                tracing::warn!(server = %name, error = %e, "MCP server not usable");
                continue;
            }
        };
        mcp.insert(name.clone(), cfg);
    }
    let masking = MaskingService::new(
        config.masking_configs(),
        config.defaults.alert_masking.clone(),
    )
    .map_err(|e| RunnerError::Config(format!("masking: {e}")))?;
    Ok((resolved, mcp, Arc::new(masking)))
}

/// Streamable HTTP at `url`, keeping the HTTP options of `previous`.
fn local_http(url: &str, previous: McpTransport) -> McpTransport {
    let mut http = match previous {
        McpTransport::Http(h) | McpTransport::Sse(h) => h,
        McpTransport::Stdio { .. } => HttpTransport {
            url: String::new(),
            bearer_token: None,
            headers: BTreeMap::new(),
            tls: Default::default(),
            timeout: None,
        },
    };
    http.url = url.to_string();
    McpTransport::Http(http)
}

/// MCP server outcomes shared between the execution (which connects) and
/// the status writes.
type SharedOutcomes = Arc<std::sync::Mutex<Vec<McpServerOutcome>>>;

fn outcomes_of(shared: &SharedOutcomes) -> Vec<McpServerOutcome> {
    shared.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Records the end in Postgres, then in the status.
#[allow(clippy::too_many_arguments)]
async fn finish(
    store: &Store,
    writer: &StatusWriter,
    execution_id: &str,
    started_at: &Time,
    result: ExecutionResult,
    first_llm_request: Option<Duration>,
    mcp_init: Duration,
    mcp_servers: Vec<McpServerOutcome>,
) -> Result<RunReport, RunnerError> {
    let events = store
        .execution_timeline(execution_id)
        .await
        .unwrap_or_default();
    let final_analysis = result
        .final_analysis
        .clone()
        .or_else(|| summary::last_final_analysis(&events))
        .filter(|_| result.status == ExecutionStatus::Completed);
    let mut recorded = None;
    for attempt in 0..5u32 {
        match store
            .update_agent_execution_status(execution_id, result.status, result.error.as_deref())
            .await
        {
            Ok(_) => {
                recorded = None;
                break;
            }
            Err(e) => {
                tracing::warn!(attempt, error = %e, "cannot record the execution's end; retrying");
                recorded = Some(e);
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
        }
    }
    let mut status = summary::terminal_status(
        execution_id,
        &Outcome {
            status: result.status,
            iterations: result.iterations,
            usage: &result.usage,
            final_analysis: final_analysis.as_deref(),
            error: result.error.as_deref(),
        },
        &events,
        started_at,
        &now(),
    );
    status.mcp_servers = mcp_servers;
    let written = writer.write_terminal(&status).await;
    if let Some(e) = recorded {
        return Err(e.into());
    }
    if let Err(e) = written {
        tracing::error!(error = %e, "terminal phase recorded in Postgres but not in the status");
    }
    tracing::info!(
        execution_id,
        phase = ?status.phase,
        first_llm_request_ms = first_llm_request.map(|d| d.as_secs_f64() * 1000.0),
        mcp_init_ms = mcp_init.as_secs_f64() * 1000.0,
        "execution finished"
    );
    Ok(RunReport {
        phase: summary::phase_of(result.status),
        first_llm_request,
        mcp_init,
    })
}

/// One execution being run.
struct Execution<'a> {
    store: Store,
    ae: &'a AgentExecution,
    stage_id: String,
    execution_id: String,
    config: ResolvedAgentConfig,
    mcp_configs: BTreeMap<String, McpServerConfig>,
    masking: Arc<MaskingService>,
    llm: Arc<LlmRouter>,
    publisher: Arc<dyn EventPublisher>,
    cancel: CancellationToken,
    /// Filled once the MCP servers were connected to.
    mcp_outcomes: SharedOutcomes,
    /// Wakes the progress reporter.
    changed: Arc<Notify>,
}

impl Execution<'_> {
    fn recorder(&self) -> Arc<dyn ExecutionRecorder> {
        Arc::new(self.store.clone())
    }

    fn scope(&self) -> RecordScope {
        RecordScope {
            session_id: self.ae.spec.session_id.clone(),
            stage_id: Some(self.stage_id.clone()),
            execution_id: Some(self.execution_id.clone()),
        }
    }

    fn failed(msg: String) -> ExecutionResult {
        ExecutionResult::ended(ExecutionStatus::Failed, msg, TokenUsage::default(), 0)
    }

    /// Runs the engine; returns its result and the MCP set-up time.
    async fn run(&self) -> (ExecutionResult, Duration) {
        if let Err(e) = self
            .store
            .update_agent_execution_status(&self.execution_id, ExecutionStatus::Active, None)
            .await
        {
            tracing::warn!(error = %e, "cannot mark the execution active");
        }
        if let Some(chat) = chat_of(self.ae) {
            if let Err(e) = self
                .store
                .update_stage_status(&self.stage_id, ExecutionStatus::Active, None)
                .await
            {
                tracing::warn!(error = %e, "cannot mark the chat stage active");
            }
            let pod = self.ae.metadata.name.as_deref();
            if let Err(e) = self.store.touch_chat(&chat.chat_id, pod).await {
                tracing::warn!(error = %e, "chat heartbeat failed");
            }
            publish_chat_stage(&self.store, self.ae, &self.stage_id, "started").await;
        }
        let session = match self.store.get_session(&self.ae.spec.session_id).await {
            Ok(s) => s,
            Err(e) => {
                return (
                    Self::failed(format!("cannot read the session: {e}")),
                    Duration::ZERO,
                );
            }
        };
        let (prev_context, chat) = match self.context().await {
            Ok(c) => c,
            Err(e) => {
                return (
                    Self::failed(format!("cannot build the context: {e}")),
                    Duration::ZERO,
                );
            }
        };

        let mcp_started = Instant::now();
        let (tools, mcp_tools, failed): (Arc<dyn ToolExecutor>, _, Vec<FailedServer>) = if self
            .config
            .mcp_servers
            .is_empty()
        {
            (Arc::new(InMemoryToolExecutor::new()), None, Vec::new())
        } else {
            let factory =
                McpClientFactory::new(self.mcp_configs.values().cloned(), self.masking.clone());
            let request = ExecutorRequest::new(
                self.config.mcp_servers.clone(),
                self.config.tool_filter.clone(),
            )
            .with_recorder(self.recorder(), self.scope());
            let created = tokio::select! {
                c = factory.create_executor(request) => c,
                _ = self.cancel.cancelled() => {
                    return (ExecutionResult::ended(ExecutionStatus::Cancelled, "cancelled before the MCP servers were connected", TokenUsage::default(), 0), mcp_started.elapsed());
                }
            };
            match created {
                Ok(executor) => {
                    let tools = Arc::new(McpTools::new(executor));
                    let failed = tools.failed_servers();
                    (tools.clone() as Arc<dyn ToolExecutor>, Some(tools), failed)
                }
                Err(e) => {
                    return (
                        Self::failed(format!("cannot set up MCP tools: {e}")),
                        mcp_started.elapsed(),
                    );
                }
            }
        };
        let mcp_init = mcp_started.elapsed();
        for f in &failed {
            tracing::warn!(server = %f.server, error = %f.error, "MCP server unavailable for this execution");
        }
        let outcomes = summary::mcp_outcomes(&self.config.mcp_servers, &failed, &now());
        if !outcomes.is_empty() {
            *self.mcp_outcomes.lock().unwrap_or_else(|e| e.into_inner()) = outcomes;
            self.changed.notify_one();
        }
        let mut ctx = ExecutionContext::new(
            self.ae.spec.session_id.clone(),
            self.stage_id.clone(),
            self.execution_id.clone(),
            session.alert_type.clone(),
            session.alert_data.clone(),
            self.config.clone(),
            self.llm.clone() as Arc<dyn LlmClient>,
            tools,
            self.recorder(),
            self.publisher.clone(),
        );
        ctx.mcp_servers = self
            .config
            .mcp_servers
            .iter()
            .filter_map(|n| self.mcp_configs.get(n).cloned())
            .collect();
        ctx.failed_servers = failed;
        ctx.chat = chat;
        ctx.cancel = self.cancel.clone();
        let result = run_agent(ctx, prev_context).await;
        if let Some(t) = mcp_tools {
            let _ = t.close().await;
        }
        (result, mcp_init)
    }

    /// The previous-stage context, or the chat context, from Postgres.
    async fn context(&self) -> Result<(Option<String>, Option<ChatContext>), RunnerError> {
        let spec = &self.ae.spec;
        let kind: ExecutionKind = spec.kind.into();
        if kind == ExecutionKind::Chat {
            let Some(chat) = &spec.chat else {
                return Err(RunnerError::Invalid(
                    "a chat execution without spec.chat".into(),
                ));
            };
            let mut recorder = Recorder::new(self.scope(), self.recorder(), self.publisher.clone());
            if let Err(e) = recorder
                .create_completed(TimelineEventType::UserQuestion, &chat.question, json!({}))
                .await
            {
                tracing::warn!(error = %e, "cannot record the user question");
            }
            let events = self.store.session_timeline(&spec.session_id).await?;
            return Ok((
                None,
                Some(ChatContext {
                    question: chat.question.clone(),
                    investigation_context: format_investigation_context(&events),
                }),
            ));
        }
        if spec.stage.index == 0 {
            return Ok((None, None));
        }
        let stages = self.prior_stages(spec.stage.index).await?;
        if kind == ExecutionKind::Synthesis {
            let target = summary::synthesis_target(&stages, spec.stage.index).ok_or_else(|| {
                RunnerError::Invalid("no investigation stage precedes this synthesis".into())
            })?;
            let stage_id = format!("{}-s{}", spec.session_id, target.index);
            let mut agents = Vec::new();
            for e in self.store.list_agent_executions(&stage_id).await? {
                let events = self.store.execution_timeline(&e.id).await?;
                agents.push(AgentInvestigation {
                    agent_name: e.agent_name,
                    agent_index: u32::try_from(e.agent_index).unwrap_or(0),
                    strategy: e.iteration_strategy,
                    llm_provider: e.llm_provider.unwrap_or_default(),
                    status: e.status,
                    error_message: e.error_message,
                    events,
                });
            }
            return Ok((
                Some(format_investigation_for_synthesis(&agents, &target.name)),
                None,
            ));
        }
        let results = summary::previous_stage_results(&stages, spec.stage.index);
        Ok((
            Some(build_stage_context(&results)).filter(|c| !c.is_empty()),
            None,
        ))
    }

    /// The session's stage records before `index`, with their executions.
    async fn prior_stages(&self, index: u32) -> Result<Vec<PriorStage>, RunnerError> {
        let mut out = Vec::new();
        for s in self.store.list_stages(&self.ae.spec.session_id).await? {
            let Ok(i) = u32::try_from(s.stage_index) else {
                continue;
            };
            if i >= index {
                continue;
            }
            let mut executions = Vec::new();
            for e in self.store.list_agent_executions(&s.id).await? {
                let final_analysis = if e.status == ExecutionStatus::Completed {
                    summary::last_final_analysis(&self.store.execution_timeline(&e.id).await?)
                } else {
                    None
                };
                executions.push(PriorExecution {
                    kind: e.kind,
                    status: e.status,
                    final_analysis,
                });
            }
            out.push(PriorStage {
                index: i,
                name: s.stage_name,
                status: s.status,
                chat: s.chat_id.is_some(),
                executions,
            });
        }
        Ok(out)
    }
}
