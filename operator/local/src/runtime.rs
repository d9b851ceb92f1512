//! What every session and chat task of the process shares: the store, the
//! configuration, the launcher, events, the executive summary.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tarsy_config::Config;
use tarsy_config::model::ChainSpec;
use tarsy_core::{EventPublisher, ExecutionStatus, SessionStatus};
use tarsy_exec::notify::{Notice, SlackNotifier};
use tarsy_exec::{Launcher, LlmRouter, Summarizer};
use tarsy_masking::MaskingService;
use tarsy_store::Store;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Timing knobs of the driver (tests shorten them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverSettings {
    /// How often the admission loop looks for pending sessions even when
    /// nobody woke it (sessions created by another process).
    pub poll_interval: Duration,
    /// How often a running session records that its owner is alive.
    pub heartbeat_interval: Duration,
    /// A session in progress whose owner showed no sign of life for this
    /// long is taken over (its owner died) at start-up.
    pub orphan_timeout: Duration,
    /// Limit of the executive summary call.
    pub summary_timeout: Duration,
    /// How long shutdown lets running executions and chat answers go on
    /// before interrupting them (an interrupted execution is resumed by the
    /// next start).
    pub shutdown_grace: Duration,
    /// How long one write of an investigation waits out an unavailable
    /// store before its execution is interrupted (it resumes once the
    /// store is back); the session itself waits as long as it takes.
    pub store_patience: Duration,
}

impl Default for DriverSettings {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(2),
            heartbeat_interval: Duration::from_secs(30),
            orphan_timeout: Duration::from_secs(5 * 60),
            summary_timeout: tarsy_exec::DEFAULT_SUMMARY_TIMEOUT,
            shutdown_grace: Duration::from_secs(10),
            store_patience: tarsy_store::DEFAULT_PATIENCE,
        }
    }
}

/// Why a chat answer that was still running is recorded as failed.
pub(crate) const INTERRUPTED_BY_SHUTDOWN: &str =
    "interrupted: TARSy shut down before the answer finished";

/// A session being driven by this process.
pub(crate) struct RunningSession {
    /// Wakes the session's loop (a cancel request arrived).
    pub(crate) wake: Arc<Notify>,
}

/// A chat answer being produced.
pub(crate) struct ActiveChat {
    /// The session the chat belongs to.
    pub(crate) session_id: String,
    /// The stage answering the message (empty while it is being created).
    pub(crate) stage_id: String,
    /// Cancels the answer.
    pub(crate) cancel: CancellationToken,
}

/// The shared state of the local driver.
pub(crate) struct Runtime {
    /// The store as investigations write it: calls wait out an outage
    /// ([`Store::patient`]).
    pub(crate) store: Store,
    /// The store as requests read and write it: an outage fails a call at
    /// once ([`Store::fail_fast`]), for a 503 instead of a hung request.
    pub(crate) api_store: Store,
    pub(crate) config: Arc<Config>,
    pub(crate) llm: Arc<LlmRouter>,
    /// Runs executions (MCP tools, runbook, breakers, engine).
    pub(crate) launcher: Launcher,
    pub(crate) masking: Arc<MaskingService>,
    pub(crate) publisher: Arc<dyn EventPublisher>,
    pub(crate) pod_id: String,
    pub(crate) max_concurrent: usize,
    pub(crate) settings: DriverSettings,
    pub(crate) running: Mutex<HashMap<String, RunningSession>>,
    pub(crate) chats: Mutex<HashMap<String, ActiveChat>>,
    /// Wakes the admission loop (a session was submitted or ended).
    pub(crate) admission: Notify,
    /// Held while a submission creates its session and publishes `pending`,
    /// and while admission claims: a session is never seen `in_progress`
    /// before it was seen `pending`.
    pub(crate) submitting: tokio::sync::Mutex<()>,
    /// Wakes everyone waiting for a session to be let go of (its loop ended).
    pub(crate) released: Notify,
    /// Shutting down: nothing new is admitted or started.
    pub(crate) shutdown: CancellationToken,
    /// The shutdown grace is over: what still runs is interrupted.
    pub(crate) interrupt: CancellationToken,
    pub(crate) tasks: TaskTracker,
    /// Slack notifications, when configured.
    pub(crate) notifier: Option<SlackNotifier>,
}

/// Locks a mutex, surviving a poisoned one (the maps stay usable).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Runtime {
    /// `session.status` on the session's channel and on the session list.
    pub(crate) async fn publish_session_status(&self, session_id: &str, status: SessionStatus) {
        tarsy_events::lifecycle::publish_session_status(
            self.publisher.as_ref(),
            session_id,
            status,
        )
        .await;
        if status.is_terminal() {
            self.notify(session_id).await;
        }
    }

    /// Sends the session's Slack notice as it is now stored (in the
    /// background; fail-open).
    pub(crate) async fn notify(&self, session_id: &str) {
        self.notify_with(session_id, None).await;
    }

    /// Replies the judge's ended attempt in the session's Slack thread (in
    /// the background; fail-open).
    pub(crate) async fn notify_score(&self, attempt: tarsy_store::SessionScore) {
        let session_id = attempt.session_id.clone();
        self.notify_with(&session_id, Some(attempt)).await;
    }

    async fn notify_with(&self, session_id: &str, score: Option<tarsy_store::SessionScore>) {
        let Some(notifier) = &self.notifier else {
            return;
        };
        match self.store.get_session(session_id).await {
            Ok(session) => notifier.send(Notice {
                channel: self
                    .config
                    .chain(&session.chain_id)
                    .and_then(|c| c.spec.slack_channel.clone()),
                thread_key: None,
                session,
                score,
            }),
            Err(e) => {
                tracing::warn!(session_id, error = %e, "no Slack notice: the session is unreadable")
            }
        }
    }

    /// `stage.status` (started, completed, failed, timed_out, cancelled).
    pub(crate) async fn publish_stage_status(
        &self,
        session_id: &str,
        stage_id: &str,
        stage_name: &str,
        stage_index: i64,
        status: ExecutionStatus,
    ) {
        let stage = tarsy_events::lifecycle::PublishedStage {
            id: stage_id,
            name: stage_name,
            index: stage_index,
        };
        tarsy_events::lifecycle::publish_stage_status(
            self.publisher.as_ref(),
            session_id,
            stage,
            status,
        )
        .await;
    }

    /// The executive summary of a final analysis
    /// ([`tarsy_exec::Summarizer::generate`]; fail-open: the
    /// caller records the error and completes the session).
    pub(crate) async fn executive_summary(
        &self,
        session_id: &str,
        chain: &ChainSpec,
        final_analysis: &str,
    ) -> Result<String, String> {
        Summarizer {
            llm: self.llm.clone(),
            store: self.store.clone(),
            publisher: self.publisher.clone(),
            timeout: self.settings.summary_timeout,
        }
        .generate(&self.config, session_id, chain, final_analysis)
        .await
        .map_err(|e| e.to_string())
    }
}
