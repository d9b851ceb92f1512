//! Prometheus metrics of the operator and the `/metrics`, `/healthz`,
//! `/readyz` endpoints.
//!
//! Sessions by phase and token totals are gauges recomputed from the
//! watched objects at every scrape, so they are right after a restart and
//! never double count; reconcile and error counters and the execution
//! duration histogram count what this process saw.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tarsy_crds::{AgentExecution, Alert, AlertPhase};

type Labels = Vec<(String, String)>;

/// Most finished executions remembered (so that each is observed once);
/// the oldest are forgotten first. An execution is reconciled again long
/// after it finished only when its AgentExecution changes, which a
/// finished one no longer does.
const MAX_SEEN_FINISHED: usize = 10_000;

/// The finished executions already observed, bounded.
#[derive(Default)]
struct SeenFinished {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl SeenFinished {
    /// True the first time `uid` is inserted.
    fn insert(&mut self, uid: &str) -> bool {
        if !self.set.insert(uid.to_string()) {
            return false;
        }
        self.order.push_back(uid.to_string());
        while self.order.len() > MAX_SEEN_FINISHED {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        true
    }
}

/// The operator's metrics.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    sessions: Family<Labels, Gauge>,
    tokens: Family<Labels, Gauge>,
    calls: Family<Labels, Gauge>,
    execution_seconds: Histogram,
    seen_finished: Mutex<SeenFinished>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

const PHASES: [AlertPhase; 7] = [
    AlertPhase::Pending,
    AlertPhase::InProgress,
    AlertPhase::Cancelling,
    AlertPhase::Completed,
    AlertPhase::Failed,
    AlertPhase::Cancelled,
    AlertPhase::TimedOut,
];

impl Metrics {
    /// A registry with every TARSy operator metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tarsy_operator");
        let reconciles = Family::<Labels, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        let sessions = Family::<Labels, Gauge>::default();
        let calls = Family::<Labels, Gauge>::default();
        registry.register(
            "execution_calls",
            "LLM and tool calls the runners of the AgentExecutions that exist made, by kind and outcome",
            calls.clone(),
        );
        let tokens = Family::<Labels, Gauge>::default();
        let execution_seconds = Histogram::new(exponential_buckets(1.0, 2.0, 14));
        registry.register(
            "reconciles",
            "Reconciles run, by controller",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by controller and error kind",
            errors.clone(),
        );
        registry.register("sessions", "Alerts by session phase", sessions.clone());
        registry.register(
            "llm_tokens",
            "LLM tokens used by the AgentExecutions that exist, by kind",
            tokens.clone(),
        );
        registry.register(
            "execution_duration_seconds",
            "Duration of finished agent executions",
            execution_seconds.clone(),
        );
        // Each controller's reconciles start at 0 (`increase()` sees the
        // first one after a start).
        for controller in ["alert", "agentexecution"] {
            let _ = reconciles.get_or_create(&vec![("controller".into(), controller.into())]);
        }
        Self {
            registry,
            reconciles,
            errors,
            sessions,
            tokens,
            calls,
            execution_seconds,
            seen_finished: Mutex::new(SeenFinished::default()),
        }
    }

    /// Counts a reconcile of `controller`.
    pub fn reconciled(&self, controller: &str) {
        self.reconciles
            .get_or_create(&vec![("controller".into(), controller.into())])
            .inc();
    }

    /// Counts a failed reconcile.
    pub fn failed(&self, controller: &str, kind: &str) {
        self.errors
            .get_or_create(&vec![
                ("controller".into(), controller.into()),
                ("error".into(), kind.into()),
            ])
            .inc();
    }

    /// Records a finished execution's duration once per execution (by uid).
    pub fn execution_finished(&self, ae: &AgentExecution) {
        let Some(uid) = ae.metadata.uid.clone() else {
            return;
        };
        let Some(status) = ae.status.as_ref() else {
            return;
        };
        let (Some(start), Some(end)) = (&status.started_at, &status.completed_at) else {
            return;
        };
        let Ok(mut seen) = self.seen_finished.lock() else {
            return;
        };
        if seen.insert(&uid) {
            let secs = (end.0.as_millisecond() - start.0.as_millisecond()) as f64 / 1000.0;
            self.execution_seconds.observe(secs.max(0.0));
        }
    }

    /// Recomputes the gauges from the watched objects.
    pub fn refresh(&self, alerts: &[Arc<Alert>], executions: &[Arc<AgentExecution>]) {
        for phase in PHASES {
            let n = alerts
                .iter()
                .filter(|a| {
                    a.status
                        .as_ref()
                        .and_then(|s| s.phase)
                        .unwrap_or(AlertPhase::Pending)
                        == phase
                })
                .count();
            self.sessions
                .get_or_create(&vec![("phase".into(), format!("{phase:?}"))])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        let mut sums = [0u64; 4];
        for ae in executions {
            if let Some(t) = ae.status.as_ref().and_then(|s| s.tokens.as_ref()) {
                sums[0] += t.input;
                sums[1] += t.output;
                sums[2] += t.thinking;
                sums[3] += t.total;
            }
        }
        for (kind, v) in ["input", "output", "thinking", "total"].iter().zip(sums) {
            self.tokens
                .get_or_create(&vec![("kind".into(), (*kind).into())])
                .set(i64::try_from(v).unwrap_or(i64::MAX));
        }
        let mut calls = [0u64; 4];
        for c in executions
            .iter()
            .filter_map(|ae| ae.status.as_ref().and_then(|s| s.calls.as_ref()))
        {
            calls[0] += c.llm.saturating_sub(c.llm_errors);
            calls[1] += c.llm_errors;
            calls[2] += c.tools.saturating_sub(c.tool_errors);
            calls[3] += c.tool_errors;
        }
        let labels = [
            ("llm", "ok"),
            ("llm", "error"),
            ("tool", "ok"),
            ("tool", "error"),
        ];
        for ((kind, outcome), v) in labels.iter().zip(calls) {
            self.calls
                .get_or_create(&vec![
                    ("kind".into(), (*kind).into()),
                    ("outcome".into(), (*outcome).into()),
                ])
                .set(i64::try_from(v).unwrap_or(i64::MAX));
        }
    }

    /// The operator's metrics, then the process-wide ones (its executive
    /// summary LLM calls, sessions and stages it finished), in one page.
    pub fn render(&self) -> String {
        let mut own = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut own, &self.registry);
        let own = own.strip_suffix("# EOF\n").unwrap_or(&own);
        tarsy_telemetry::global().encode(own)
    }
}

/// Shared state of the HTTP endpoints.
#[derive(Clone)]
pub struct HttpState {
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// Set once the caches are synced and (if enabled) leadership is known.
    pub ready: Arc<AtomicBool>,
    /// Refreshes the gauges before a scrape.
    pub refresh: Arc<dyn Fn() + Send + Sync>,
}

/// The router of `/metrics`, `/healthz` and `/readyz`.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn metrics_handler(
    State(state): State<HttpState>,
    headers: axum::http::HeaderMap,
) -> impl IntoResponse {
    (state.refresh)();
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (content_type, page) = tarsy_telemetry::negotiate(accept, state.metrics.render());
    ([(header::CONTENT_TYPE, content_type)], page)
}

async fn readyz(State(state): State<HttpState>) -> impl IntoResponse {
    if state.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

/// Serves the router on `addr` until the process ends.
pub async fn serve(addr: SocketAddr, state: HttpState) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, router(state)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_executions_are_observed_once_and_memory_stays_bounded() {
        let mut seen = SeenFinished::default();
        assert!(seen.insert("a"));
        assert!(!seen.insert("a"), "observed twice");
        for i in 0..(MAX_SEEN_FINISHED * 3) {
            seen.insert(&format!("uid-{i}"));
        }
        assert_eq!(seen.set.len(), MAX_SEEN_FINISHED);
        assert_eq!(seen.order.len(), MAX_SEEN_FINISHED);
        // The newest are still known; the oldest were forgotten.
        assert!(!seen.insert(&format!("uid-{}", MAX_SEEN_FINISHED * 3 - 1)));
        assert!(seen.insert("a"));
    }
}
