//! `tarsy runner`: the Kubernetes edge of ONE AgentExecution, inside its
//! investigation pod.
//!
//! [`run`] loads the execution, rebuilds its agent configuration from
//! `spec.resolved` plus the namespace's `LLMProvider`s and `MCPServer`s,
//! and hands the rest to the mode-neutral execution layer (`tarsy_exec`):
//! the context (earlier stages, the investigations a synthesis reads, or a
//! chat answer's history), the launch (MCP servers on localhost, masking,
//! runbook, circuit breakers, the deadline in `spec.deadline`, the engine),
//! every record written to Postgres as it happens. What is left here is
//! Kubernetes: the status of its own AgentExecution (`status`), and the
//! operator's stop annotation. Cancelling the token given to [`run`]
//! (SIGTERM in the binary) stops the engine; the execution is recorded
//! Cancelled (TimedOut when the operator stopped it at the deadline), or,
//! when nobody asked for the stop (eviction, drain), left running for the
//! replacement pod the operator starts, which resumes it.
//!
//! | module | what |
//! |---|---|
//! | [`status_view`] | pure: status from timeline events, clipping, phase mapping, input formats |
//! | `prepare` | the configuration rebuilt in the pod (resources, defaults, Secret values) |
//! | `status` | status writes, the progress reporter, recording the end |
//! | [`error`] | [`RunnerError`] |

#![warn(missing_docs)]

pub mod error;
mod prepare;
mod status;
pub mod status_view;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use tarsy_core::{EventPublisher, ExecutionKind, ExecutionStatus, StageKind, TokenUsage};
use tarsy_crds::{AgentExecution, ExecutionPhase, LLMProvider, MCPServer};
use tarsy_engine::ExecutionResult;
use tarsy_exec::chat::Answer;
use tarsy_exec::memory::{KnownMemories, MemoryService, Reflector};
use tarsy_exec::runbook::runbook_source;
use tarsy_exec::scoring::Judgement;
use tarsy_exec::{AgentInput, Assignment, Launcher, LlmRouter, context, ids};
use tarsy_mcp::McpClientFactory;
use tarsy_store::Store;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use error::RunnerError;
use prepare::{connect_store, prepare};
use status::{Ending, NotifyingPublisher, Progress, Reporter, StatusWriter, now};

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
    /// How long one write waits out an unavailable Postgres (a failover)
    /// before the execution is interrupted; it resumes once Postgres is
    /// back ([`tarsy_exec::Launcher::run`]).
    pub store_patience: Duration,
    /// How often progress is written to the status at most.
    pub status_interval: Duration,
    /// When the process started: the origin of
    /// [`RunReport::first_llm_request`] (the binary sets it first thing;
    /// [`RunnerOptions::new`] takes the time it is called).
    pub started: Instant,
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
            store_patience: tarsy_store::DEFAULT_PATIENCE,
            status_interval: Duration::from_millis(500),
            started: Instant::now(),
        }
    }
}

/// What a finished run reports.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// The terminal phase recorded.
    pub phase: ExecutionPhase,
    /// Time from the process start ([`RunnerOptions::started`]) to the
    /// first LLM request, MCP initialisation excluded (none when no LLM call
    /// was made).
    pub first_llm_request: Option<Duration>,
    /// Time spent opening MCP sessions.
    pub mcp_init: Duration,
}

/// Runs the AgentExecution `options` names to a terminal phase and records
/// it (Postgres and status); an execution that ran before (its pod was
/// lost) continues from its stored conversation. Cancelling `cancel` stops
/// it as the operator's stop request says (Cancelled, TimedOut), or, with
/// no request, leaves it for a replacement pod ([`RunnerError::Interrupted`]).
/// An error means no terminal phase was recorded in Postgres.
pub async fn run(
    client: kube::Client,
    options: RunnerOptions,
    cancel: CancellationToken,
) -> Result<RunReport, RunnerError> {
    let t0 = options.started;
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
        .unwrap_or_else(|| ids::stage_id(&spec.session_id, spec.stage.index));
    let execution_id = ids::execution_id(&spec.session_id, spec.stage.index, spec.agent_index);
    let started_at = prior.started_at.clone().unwrap_or_else(now);
    let end = Ending {
        writer: &writer,
        execution_id: &execution_id,
        started_at: &started_at,
    };

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
        Ok(s) => s.patient(options.store_patience),
        Err(e) => {
            end.unrecorded(&cancel, &e).await;
            return Err(e);
        }
    };
    let providers = providers.map_err(|e| RunnerError::kube("listing LLMProviders", e))?;
    let servers = servers.map_err(|e| RunnerError::kube("listing MCPServers", e))?;

    let changed = Arc::new(Notify::new());
    let publisher: Arc<dyn EventPublisher> = Arc::new(NotifyingPublisher {
        inner: Arc::new(tarsy_events::StorePublisher::new(store.clone(), None)),
        changed: changed.clone(),
    });
    let answer = chat_of(&ae).map(|c| Answer::new(&spec.session_id, &c.chat_id, spec.stage.index));
    // A judge's attempt, found by its execution (the operator or the API
    // started it); none means there is nothing to score any more.
    let judgement = match spec.kind {
        ExecutionKind::Scoring => {
            Judgement::of_execution(&store, &spec.session_id, spec.stage.index, &execution_id)
                .await
                .map(Some)
        }
        _ => Ok(None),
    };

    // A reflector's records, found by its stage (the operator or the API
    // started it).
    let reflector = match spec.kind {
        ExecutionKind::Memory => match store.get_stage(&stage_id).await {
            Ok(stage) => Reflector::of_stage(&store, &stage).await.map(Some),
            Err(e) => Err(e.into()),
        },
        _ => Ok(None),
    };
    let (judgement, reflector) = match (judgement, reflector) {
        (Ok(j), Ok(r)) => (j, r),
        (Err(e), _) | (_, Err(e)) => {
            let result = failed(format!("cannot find the execution's records: {e}"));
            return end
                .finish(
                    &store,
                    &publisher,
                    Closes::default(),
                    result,
                    None,
                    Duration::ZERO,
                    Vec::new(),
                )
                .await;
        }
    };
    let no_memories = KnownMemories::default();
    let mut closes = Closes {
        answer: answer.as_ref(),
        judgement: judgement.as_ref(),
        reflection: reflector.as_ref().map(|reflector| Reflection {
            reflector,
            memory: None,
            known: &no_memories,
        }),
    };
    // The operator hands its pricing settings down: calls are priced here.
    tarsy_pricing::install_catalog(
        std::env::var(tarsy_config::defaults::env::PRICE_CATALOG_URL)
            .ok()
            .filter(|url| !url.trim().is_empty())
            .as_deref(),
    )
    .await;
    let prepared = match prepare(&options, &ae, &providers.items, &servers.items) {
        Ok(p) => p,
        Err(e) => {
            let result = failed(format!("cannot rebuild the agent configuration: {e}"));
            return end
                .finish(
                    &store,
                    &publisher,
                    closes,
                    result,
                    None,
                    Duration::ZERO,
                    Vec::new(),
                )
                .await;
        }
    };
    let llm = Arc::new(
        LlmRouter::new(&options.llm_addr, &options.script_dir)
            .map_err(|e| RunnerError::Config(e.to_string()))?,
    );
    let progress = Arc::new(Progress::default());
    let reporter = Reporter::start(
        store.clone(),
        writer.clone(),
        execution_id.clone(),
        started_at.clone(),
        llm.subscribe_calls(),
        progress.clone(),
        changed.clone(),
        options.status_interval,
        t0,
    );

    let launcher = Launcher {
        store: store.clone(),
        llm: llm.clone(),
        mcp: Arc::new(McpClientFactory::new(
            prepared.mcp_configs.values().cloned(),
            prepared.masking.clone(),
        )),
        mcp_configs: prepared.mcp_configs,
        publisher: publisher.clone(),
        // Shared with every other pod calling the namespace's providers:
        // failures earlier executions saw open the circuit for this one.
        breakers: tarsy_exec::breakers::shared_breakers(
            &store,
            &options.namespace,
            &prepared.defaults,
        ),
        runbooks: Arc::new(runbook_source(
            &prepared.defaults,
            tarsy_exec::runbook::token_from_env(),
        )),
        memory: prepared.memory,
    };
    if let Some(reflection) = closes.reflection.as_mut() {
        reflection.memory = launcher.memory.as_deref();
    }
    let deadline = deadline_of(spec.deadline.as_ref(), prepared.defaults.session_timeout);
    let mut known = KnownMemories::default();
    let launched = match input(&store, &publisher, &ae, closes).await {
        Ok((session, input, shown)) => {
            known = shown;
            let assignment = Assignment::new(
                &session,
                stage_id.clone(),
                execution_id.clone(),
                prepared.config,
                input,
                deadline,
                cancel.clone(),
            );
            let progress_for_tools = progress.clone();
            let mcp_servers = ae.spec.resolved.mcp_servers.clone();
            let on_tools: tarsy_exec::launch::ToolsReady = Arc::new(
                move |failed: &[tarsy_engine::prompt::FailedServer],
                      offered: &std::collections::BTreeMap<String, Vec<String>>| {
                    let outcomes = status_view::mcp_outcomes(&mcp_servers, failed, offered, &now());
                    if !outcomes.is_empty() {
                        progress_for_tools.set_mcp(outcomes);
                    }
                },
            );
            launcher.run(assignment, Some(on_tools)).await
        }
        Err(e) => tarsy_exec::Launched {
            result: failed(format!("cannot build the context: {e}")),
            failed_servers: Vec::new(),
            mcp_init: Duration::ZERO,
        },
    };
    let mut result = launched.result;
    if result.status == ExecutionStatus::Cancelled {
        // The operator stops executions (SIGTERM) for a cancel or at the
        // session deadline, and says which in an annotation; without one,
        // the pod itself is going away (eviction, drain): the execution is
        // left running for the replacement pod to resume. Should the
        // annotation be unreadable, not recording is safe too: the operator
        // records a stop whose pod ended without a result.
        match stop_request(&api, &options.name).await.as_deref() {
            Some(tarsy_crds::STOP_TIMED_OUT) => {
                result.status = ExecutionStatus::TimedOut;
                result.error = Some("session timed out".into());
            }
            Some(_) => {}
            None => {
                reporter.stop().await;
                return Err(RunnerError::Interrupted);
            }
        }
    }
    reporter.stop().await;
    if let Some(reflection) = closes.reflection.as_mut() {
        reflection.known = &known;
    }
    let first = progress
        .first_call()
        .map(|d| d.saturating_sub(launched.mcp_init));
    end.finish(
        &store,
        &publisher,
        closes,
        result,
        first,
        launched.mcp_init,
        progress.mcp(),
    )
    .await
}

fn failed(why: String) -> ExecutionResult {
    ExecutionResult::ended(ExecutionStatus::Failed, why, TokenUsage::default(), 0)
}

/// The session row and what the agent works on: a chat answer's history
/// (its question recorded first), a judge's or a reflector's reading, a
/// synthesis's investigations, or the earlier stages' results; with the
/// memories a reflector is shown.
async fn input(
    store: &Store,
    publisher: &Arc<dyn EventPublisher>,
    ae: &AgentExecution,
    closes: Closes<'_>,
) -> Result<(tarsy_store::Session, AgentInput, KnownMemories), tarsy_exec::ExecError> {
    let spec = &ae.spec;
    let session = store.get_session(&spec.session_id).await?;
    let mut known = KnownMemories::default();
    let input = match (spec.kind, closes.answer, &spec.chat) {
        (ExecutionKind::Chat, Some(answer), Some(chat)) => {
            answer
                .begin(
                    store,
                    publisher,
                    ae.metadata.name.as_deref(),
                    &chat.question,
                )
                .await?
        }
        (ExecutionKind::Chat, _, _) => {
            return Err(tarsy_exec::ExecError::Invalid(
                "a chat execution without spec.chat".into(),
            ));
        }
        (ExecutionKind::Scoring, _, _) => match closes.judgement {
            Some(judgement) => judgement.begin(store, publisher).await?,
            None => {
                return Err(tarsy_exec::ExecError::Invalid(
                    "a scoring execution without its attempt".into(),
                ));
            }
        },
        (ExecutionKind::Memory, _, _) => match closes.reflection {
            Some(Reflection {
                reflector,
                memory: Some(memory),
                ..
            }) => {
                let (input, shown) = reflector.begin(store, publisher, memory).await?;
                known = shown;
                input
            }
            Some(_) => {
                return Err(tarsy_exec::ExecError::Invalid(
                    "investigation memory is off: the reflector has nothing to do".into(),
                ));
            }
            None => {
                return Err(tarsy_exec::ExecError::Invalid(
                    "a reflector execution without its records".into(),
                ));
            }
        },
        (ExecutionKind::Synthesis, _, _) => {
            context::stage_input(
                store,
                &spec.session_id,
                StageKind::Synthesis,
                spec.stage.index,
            )
            .await?
        }
        (ExecutionKind::Investigation, _, _) => {
            context::stage_input(
                store,
                &spec.session_id,
                StageKind::Investigation,
                spec.stage.index,
            )
            .await?
        }
    };
    Ok((session, input, known))
}

/// `deadline` as an instant of this process; without one (an object written
/// by an older operator), the session timeout from now.
fn deadline_of(deadline: Option<&Time>, fallback: Duration) -> tokio::time::Instant {
    let left = match deadline {
        Some(t) => Duration::try_from(t.0.duration_since(k8s_openapi::jiff::Timestamp::now()))
            .unwrap_or(Duration::ZERO),
        None => fallback,
    };
    tokio::time::Instant::now() + left
}

/// The operator's stop request on the execution (`cancelled` or
/// `timed_out`), if any.
async fn stop_request(api: &Api<AgentExecution>, name: &str) -> Option<String> {
    match api.get(name).await {
        Ok(ae) => ae.annotations().get(tarsy_crds::STOP_ANNOTATION).cloned(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read why the execution was stopped");
            None
        }
    }
}

/// What an execution's end also ends, besides the execution: a chat
/// answer's stage, a judge's stage and attempt, a reflector's stage (with
/// what it learned).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Closes<'a> {
    /// The chat answer this execution gives.
    pub(crate) answer: Option<&'a Answer>,
    /// The scoring attempt this execution judges.
    pub(crate) judgement: Option<&'a Judgement>,
    /// The reflector this execution runs.
    pub(crate) reflection: Option<Reflection<'a>>,
}

/// A reflector's run in this pod: its records, memory (none before the
/// configuration is read, or when switched off) and the memories it was
/// shown.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reflection<'a> {
    pub(crate) reflector: &'a Reflector,
    pub(crate) memory: Option<&'a MemoryService>,
    pub(crate) known: &'a KnownMemories,
}

/// The chat request of a chat execution.
fn chat_of(ae: &AgentExecution) -> Option<&tarsy_crds::ChatRequestSpec> {
    ae.spec
        .chat
        .as_ref()
        .filter(|_| ae.spec.kind == ExecutionKind::Chat)
}
