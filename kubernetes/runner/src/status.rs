//! The runner's Kubernetes side: its AgentExecution's status, written with
//! server-side apply under [`crate::FIELD_MANAGER`] — progress while it
//! runs (phase Active, iteration, bounded recent timeline, MCP server
//! outcomes), the terminal phase at the end.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tarsy_core::{EventPublisher, RecordError, StreamEvent};
use tarsy_crds::{
    API_VERSION, AgentExecution, AgentExecutionStatus, ExecutionPhase, McpServerOutcome,
};
use tarsy_exec::LlmCallNotice;
use tarsy_store::Store;
use tokio::sync::{Notify, broadcast};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use tarsy_core::ExecutionStatus;
use tarsy_engine::ExecutionResult;
use tarsy_exec::context;

use crate::RunReport;
use crate::error::RunnerError;
use crate::status_view::{self, TerminalOutcome};

/// Now, as Kubernetes writes times.
pub(crate) fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Writes the execution's status (server-side apply, forced: the runner is
/// the authority for the fields it sets).
#[derive(Clone)]
pub(crate) struct StatusWriter {
    pub(crate) api: Api<AgentExecution>,
    pub(crate) name: String,
}

impl StatusWriter {
    pub(crate) async fn write(&self, status: &AgentExecutionStatus) -> Result<(), RunnerError> {
        let body = json!({
            "apiVersion": API_VERSION,
            "kind": "AgentExecution",
            "status": status,
        });
        self.api
            .patch_status(
                &self.name,
                &PatchParams::apply(crate::FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map(|_| ())
            .map_err(|e| RunnerError::kube(format!("writing the status of {}", self.name), e))
    }

    /// Retries a terminal write a few times: it is what the operator waits for.
    pub(crate) async fn write_terminal(
        &self,
        status: &AgentExecutionStatus,
    ) -> Result<(), RunnerError> {
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

/// Forwards events to the store publisher and wakes the progress reporter.
pub(crate) struct NotifyingPublisher {
    pub(crate) inner: Arc<dyn EventPublisher>,
    pub(crate) changed: Arc<Notify>,
}

#[async_trait]
impl EventPublisher for NotifyingPublisher {
    async fn publish(&self, channel: &str, event: &StreamEvent) -> Result<i64, RecordError> {
        let out = self.inner.publish(channel, event).await;
        self.changed.notify_one();
        out
    }

    async fn publish_transient(&self, channel: &str, event: &StreamEvent) {
        self.inner.publish_transient(channel, event).await;
    }
}

/// What the progress reporter shares with the run.
#[derive(Default)]
pub(crate) struct Progress {
    /// LLM calls started by this execution.
    iterations: AtomicU32,
    /// Time from the runner's start to its first LLM call.
    first_call: Mutex<Option<Duration>>,
    /// Whether each MCP server could be connected to.
    mcp: Mutex<Vec<McpServerOutcome>>,
}

impl Progress {
    pub(crate) fn set_mcp(&self, outcomes: Vec<McpServerOutcome>) {
        *self.mcp.lock().unwrap_or_else(|e| e.into_inner()) = outcomes;
    }

    pub(crate) fn mcp(&self) -> Vec<McpServerOutcome> {
        self.mcp.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn first_call(&self) -> Option<Duration> {
        *self.first_call.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Writes progress while the execution runs: at most every `interval`,
/// whenever an event was published or an LLM call started.
pub(crate) struct Reporter {
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Reporter {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        store: Store,
        writer: StatusWriter,
        execution_id: String,
        started_at: Time,
        mut calls: broadcast::Receiver<LlmCallNotice>,
        progress: Arc<Progress>,
        changed: Arc<Notify>,
        interval: Duration,
        t0: Instant,
    ) -> Self {
        let stop = CancellationToken::new();
        // LLM calls are counted by their own task, as they start: the
        // reporter may be busy writing or waiting out `interval`, and a quick
        // run would otherwise end before it saw them.
        let watcher = {
            let (stop, progress, changed) = (stop.clone(), progress.clone(), changed.clone());
            let execution_id = execution_id.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        // Calls already sent are counted before stopping.
                        biased;
                        call = calls.recv() => match call {
                            Ok(c) if c.execution_id == execution_id => {
                                let mut first = progress.first_call.lock().unwrap_or_else(|e| e.into_inner());
                                first.get_or_insert(t0.elapsed());
                                progress.iterations.fetch_add(1, Ordering::Relaxed);
                                changed.notify_one();
                            }
                            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                            Err(broadcast::error::RecvError::Closed) => return,
                        },
                        _ = stop.cancelled() => return,
                    }
                }
            })
        };
        let reporter = {
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut last: Option<AgentExecutionStatus> = None;
                loop {
                    let events = store
                        .execution_timeline(&execution_id)
                        .await
                        .unwrap_or_default();
                    let mut status = status_view::progress_status(
                        &execution_id,
                        progress.iterations.load(Ordering::Relaxed),
                        &events,
                        &started_at,
                    );
                    // Every write carries the outcomes: server-side apply drops
                    // fields this manager owned but left out.
                    status.mcp_servers = progress.mcp();
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
        Self {
            stop,
            tasks: vec![watcher, reporter],
        }
    }

    /// Stops reporting (before the terminal write).
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Records the end of the execution: Postgres first, then the status.
pub(crate) struct Ending<'a> {
    pub(crate) writer: &'a StatusWriter,
    pub(crate) execution_id: &'a str,
    pub(crate) started_at: &'a Time,
}

impl Ending<'_> {
    /// Nothing could run because Postgres is unreachable: the status says so.
    pub(crate) async fn unrecorded(&self, cancel: &CancellationToken, e: &RunnerError) {
        let phase = if cancel.is_cancelled() {
            ExecutionPhase::Cancelled
        } else {
            ExecutionPhase::Failed
        };
        let status = AgentExecutionStatus {
            phase: Some(phase),
            execution_id: Some(self.execution_id.to_string()),
            error: Some(tarsy_crds::clip(
                &format!("runner could not reach Postgres: {e}"),
                tarsy_crds::MAX_STATUS_TEXT_CHARS,
            )),
            started_at: Some(self.started_at.clone()),
            completed_at: Some(now()),
            ..AgentExecutionStatus::default()
        };
        if let Err(w) = self.writer.write_terminal(&status).await {
            tracing::error!(error = %w, "cannot record the failure in the status either");
        }
    }

    /// Records `result` in Postgres (retried), then in the status; a chat
    /// answer's stage ends with it, and a judge's attempt and a
    /// reflector's stage (before the status: an execution shown ended
    /// with its attempt or stage still open means its pod died, and the
    /// operator closes it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn finish(
        &self,
        store: &Store,
        publisher: &Arc<dyn EventPublisher>,
        closes: crate::Closes<'_>,
        result: ExecutionResult,
        first_llm_request: Option<Duration>,
        mcp_init: Duration,
        mcp_servers: Vec<tarsy_crds::McpServerOutcome>,
    ) -> Result<RunReport, RunnerError> {
        let execution_id = self.execution_id;
        let events = store
            .execution_timeline(execution_id)
            .await
            .unwrap_or_default();
        let final_analysis = result
            .final_analysis
            .clone()
            .or_else(|| context::final_analysis_of(&events))
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
        if let Some(judgement) = closes.judgement {
            let mut judged = result.clone();
            judged.final_analysis = final_analysis.clone();
            if let Err(e) = judgement.end(store, publisher, &judged).await {
                tracing::warn!(error = %e, "cannot record the judge's answer");
            }
        }
        if let Some(reflection) = closes.reflection {
            let mut answered = result.clone();
            answered.final_analysis = final_analysis.clone();
            match reflection
                .reflector
                .end(
                    store,
                    publisher,
                    reflection.memory,
                    &answered,
                    reflection.known,
                )
                .await
            {
                Ok(learned) => tracing::info!(
                    created = learned.created.len(),
                    reinforced = learned.reinforced,
                    deprecated = learned.deprecated,
                    "memories learned"
                ),
                Err(e) => tracing::warn!(error = %e, "nothing learned from the session"),
            }
        }
        let mut status = status_view::terminal_status(
            execution_id,
            &TerminalOutcome {
                status: result.status,
                iterations: result.iterations,
                usage: &result.usage,
                final_analysis: final_analysis.as_deref(),
                error: result.error.as_deref(),
            },
            &events,
            self.started_at,
            &now(),
        );
        status.mcp_servers = mcp_servers;
        let written = self.writer.write_terminal(&status).await;
        if let Some(answer) = closes.answer {
            answer
                .end(store, publisher, result.status, result.error.as_deref())
                .await;
        }
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
            phase: status_view::phase_of(result.status),
            first_llm_request,
            mcp_init,
        })
    }
}
