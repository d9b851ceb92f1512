//! TARSy's process-wide Prometheus metrics.
//!
//! One set per process ([`global`]): the engine records its LLM calls, the
//! MCP client its tool calls, the API its requests and WebSocket
//! connections, local mode and the operator the sessions they finish; each
//! long-running subcommand serves [`Telemetry::encode`] at `/metrics`.
//!
//! LLM metrics carry the OpenTelemetry GenAI semantic conventions' names in
//! Prometheus form (`gen_ai.client.operation.duration` →
//! `gen_ai_client_operation_duration_seconds`, `gen_ai.client.token.usage`
//! → `gen_ai_client_token_usage`, attributes as labels with `_` for `.`),
//! so existing GenAI dashboards work; the rest are `tarsy_*`.
//!
//! Recording never fails and never blocks on IO: a metric is a few atomic
//! operations.

#![warn(missing_docs)]

use std::fmt::Write as _;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Labels of an LLM call (GenAI attributes, plus the configured provider).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LlmLabels {
    /// Always `chat`: every call is a chat completion.
    gen_ai_operation_name: &'static str,
    /// The provider type (`openai`, `google`, …).
    gen_ai_provider_name: String,
    /// The requested model.
    gen_ai_request_model: String,
    /// The LLMProvider resource's name.
    tarsy_llm_provider: String,
    /// Empty on success (Prometheus reads an empty label as absent), else
    /// the error's code, `timeout`, or `cancelled`.
    error_type: String,
}

/// Labels of token usage.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    gen_ai_operation_name: &'static str,
    gen_ai_provider_name: String,
    gen_ai_request_model: String,
    tarsy_llm_provider: String,
    /// `input` or `output`.
    gen_ai_token_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FallbackLabels {
    from: String,
    to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct McpCallLabels {
    server: String,
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabels {
    provider: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NotificationLabels {
    channel: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScoreLabels {
    chain: String,
    alert_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TagLabels {
    tag: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RatingLabels {
    rating: String,
}

/// Terminal statuses a session ends in (`tarsy_sessions_finished` starts
/// each at 0).
pub const SESSION_END_STATUSES: [&str; 4] = ["completed", "failed", "cancelled", "timed_out"];

/// Ratings of a review (`acknowledged`: a review without one;
/// `tarsy_reviews` starts each at 0).
pub const REVIEW_RATINGS: [&str; 4] = [
    "accurate",
    "partially_accurate",
    "inaccurate",
    "acknowledged",
];

/// The recall tools agents get (`tarsy_memory_tool_calls` starts each, with
/// each outcome, at 0).
pub const MEMORY_TOOLS: [&str; 2] = ["recall_past_investigations", "search_past_sessions"];

/// What the Alertmanager bridge did with one alert of a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BridgeOutcome {
    /// An Alert was created.
    Created,
    /// An Alert for this firing already exists.
    Duplicate,
    /// A resolved (or unknown-status) alert: nothing to investigate.
    Resolved,
    /// Refused (invalid, or no chain for it).
    Rejected,
    /// The Alert could not be created.
    Failed,
}

impl BridgeOutcome {
    /// Every outcome.
    pub const ALL: [BridgeOutcome; 5] = [
        Self::Created,
        Self::Duplicate,
        Self::Resolved,
        Self::Rejected,
        Self::Failed,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Duplicate => "duplicate",
            Self::Resolved => "resolved",
            Self::Rejected => "rejected",
            Self::Failed => "failed",
        }
    }
}

/// How a scoring attempt of a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScoringOutcome {
    /// The judge gave a score.
    Completed,
    /// The attempt ended without a score.
    Failed,
}

impl ScoringOutcome {
    const ALL: [ScoringOutcome; 2] = [Self::Completed, Self::Failed];

    fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }
}

/// A judge's score of a finished session (see [`Telemetry::session_scored`]).
#[derive(Debug, Clone, Copy)]
pub struct SessionScored<'a> {
    /// The session's chain.
    pub chain: &'a str,
    /// The session's alert type.
    pub alert_type: &'a str,
    /// 0–100.
    pub score: u8,
    /// The failure tags the judge gave.
    pub failure_tags: &'a [String],
}

/// How an MCP tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpOutcome {
    /// The tool answered.
    Ok,
    /// The tool answered with an error result (`isError`).
    ToolError,
    /// The call failed (transport, protocol, server error).
    Error,
    /// No answer in time.
    Timeout,
}

impl McpOutcome {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::Error => "error",
            Self::Timeout => "timeout",
        }
    }
}

/// One LLM call attempt, as the engine saw it.
#[derive(Debug, Clone, Copy)]
pub struct LlmCall<'a> {
    /// Provider type (`openai`, `google`, …).
    pub provider_type: &'a str,
    /// The LLMProvider's name.
    pub provider: &'a str,
    /// The model.
    pub model: &'a str,
    /// From request to the end of the stream.
    pub elapsed: Duration,
    /// `None` on success, else what went wrong (an error code, `timeout`…).
    pub error: Option<&'a str>,
    /// Input and output tokens, when the provider reported them.
    pub tokens: Option<(u64, u64)>,
}

/// Every metric of the process.
pub struct Telemetry {
    registry: Registry,
    llm_duration: Family<LlmLabels, Histogram, fn() -> Histogram>,
    llm_tokens: Family<TokenLabels, Histogram, fn() -> Histogram>,
    llm_fallbacks: Family<FallbackLabels, Counter>,
    llm_circuit_open: Family<ProviderLabels, Gauge>,
    mcp_calls: Family<McpCallLabels, Counter>,
    mcp_duration: Family<ServerLabels, Histogram, fn() -> Histogram>,
    mcp_healthy: Family<ServerLabels, Gauge>,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: Family<RouteLabels, Histogram, fn() -> Histogram>,
    ws_connections: Gauge,
    sessions_finished: Family<StatusLabels, Counter>,
    session_duration: Family<StatusLabels, Histogram, fn() -> Histogram>,
    stage_duration: Family<StatusLabels, Histogram, fn() -> Histogram>,
    webhook_alerts: Family<OutcomeLabels, Counter>,
    notifications: Family<NotificationLabels, Counter>,
    session_scores: Family<ScoreLabels, Histogram, fn() -> Histogram>,
    score_failure_tags: Family<TagLabels, Counter>,
    scoring_attempts: Family<OutcomeLabels, Counter>,
    reviews: Family<RatingLabels, Counter>,
    time_to_review: Histogram,
    memories_injected: Counter,
    memory_tool_calls: Family<MemoryToolLabels, Counter>,
    reflections_failed: Counter,
    totals: Totals,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemoryToolLabels {
    tool: String,
    outcome: &'static str,
}

/// Process totals a runner pod reports in its AgentExecution status (it is
/// gone before anything could scrape it).
#[derive(Debug, Default)]
struct Totals {
    llm_calls: AtomicU64,
    llm_errors: AtomicU64,
    tool_calls: AtomicU64,
    tool_errors: AtomicU64,
}

/// This process's LLM and tool call totals (see [`Telemetry::call_totals`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallTotals {
    /// LLM call attempts.
    pub llm_calls: u64,
    /// Of which failed.
    pub llm_errors: u64,
    /// MCP tool calls.
    pub tool_calls: u64,
    /// Of which failed or timed out (tool-reported errors are answers).
    pub tool_errors: u64,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

/// Buckets of `gen_ai.client.operation.duration` (the convention's advice).
fn llm_seconds() -> Histogram {
    Histogram::new([
        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
    ])
}

/// Buckets of `gen_ai.client.token.usage` (the convention's advice).
fn token_counts() -> Histogram {
    Histogram::new([
        1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
        4194304.0, 16777216.0, 67108864.0,
    ])
}

/// Tool calls and API requests: milliseconds to a minute.
fn short_seconds() -> Histogram {
    Histogram::new([
        0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    ])
}

/// Judge scores: 0–100 in tens.
fn score_points() -> Histogram {
    Histogram::new([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0])
}

/// From a session's end to its review: a minute to a month.
fn review_seconds() -> Histogram {
    Histogram::new([
        60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0, 172800.0, 604800.0,
        2592000.0,
    ])
}

/// Sessions and stages: seconds to an hour.
fn long_seconds() -> Histogram {
    Histogram::new([
        1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0,
    ])
}

impl Telemetry {
    fn new() -> Self {
        let mut registry = Registry::default();
        let llm_duration = Family::new_with_constructor(llm_seconds as fn() -> Histogram);
        registry.register_with_unit(
            "gen_ai_client_operation_duration",
            "GenAI operation duration: one LLM call attempt, request to end of stream",
            Unit::Seconds,
            llm_duration.clone(),
        );
        let llm_tokens = Family::new_with_constructor(token_counts as fn() -> Histogram);
        registry.register(
            "gen_ai_client_token_usage",
            "Number of input and output tokens used per LLM call",
            llm_tokens.clone(),
        );
        let llm_fallbacks = Family::default();
        registry.register(
            "tarsy_llm_fallbacks",
            "Switches from a failing LLM provider to a fallback provider",
            llm_fallbacks.clone(),
        );
        let llm_circuit_open = Family::default();
        registry.register(
            "tarsy_llm_circuit_open",
            "1 while an LLM provider's circuit breaker is open in this process's view",
            llm_circuit_open.clone(),
        );
        let mcp_calls = Family::default();
        registry.register(
            "tarsy_mcp_tool_calls",
            "MCP tool calls by server, tool and outcome",
            mcp_calls.clone(),
        );
        let mcp_duration = Family::new_with_constructor(short_seconds as fn() -> Histogram);
        registry.register_with_unit(
            "tarsy_mcp_tool_call_duration",
            "MCP tool call latency by server",
            Unit::Seconds,
            mcp_duration.clone(),
        );
        let mcp_healthy = Family::default();
        registry.register(
            "tarsy_mcp_server_healthy",
            "1 when the MCP server passed its last health check, 0 when it failed",
            mcp_healthy.clone(),
        );
        let http_requests = Family::default();
        registry.register(
            "tarsy_http_requests",
            "API requests by method, route and status",
            http_requests.clone(),
        );
        let http_duration = Family::new_with_constructor(short_seconds as fn() -> Histogram);
        registry.register_with_unit(
            "tarsy_http_request_duration",
            "API request latency by method and route",
            Unit::Seconds,
            http_duration.clone(),
        );
        let ws_connections = Gauge::default();
        registry.register(
            "tarsy_websocket_connections",
            "Open WebSocket connections",
            ws_connections.clone(),
        );
        let sessions_finished = Family::default();
        registry.register(
            "tarsy_sessions_finished",
            "Sessions this process finished, by terminal status",
            sessions_finished.clone(),
        );
        let session_duration = Family::new_with_constructor(long_seconds as fn() -> Histogram);
        registry.register_with_unit(
            "tarsy_session_duration",
            "Session duration, start to terminal status",
            Unit::Seconds,
            session_duration.clone(),
        );
        let stage_duration = Family::new_with_constructor(long_seconds as fn() -> Histogram);
        registry.register_with_unit(
            "tarsy_stage_duration",
            "Stage duration, by terminal status",
            Unit::Seconds,
            stage_duration.clone(),
        );
        let webhook_alerts = Family::default();
        registry.register(
            "tarsy_webhook_alerts",
            "Alertmanager alerts received by the bridge, by outcome",
            webhook_alerts.clone(),
        );
        let notifications = Family::default();
        registry.register(
            "tarsy_notifications",
            "Notifications by channel (slack) and outcome (sent, failed)",
            notifications.clone(),
        );
        let session_scores = Family::new_with_constructor(score_points as fn() -> Histogram);
        registry.register(
            "tarsy_session_score",
            "The judge's scores (0-100) of finished sessions, by chain and alert type",
            session_scores.clone(),
        );
        let score_failure_tags = Family::default();
        registry.register(
            "tarsy_score_failure_tags",
            "Failure tags the judge gave finished sessions, by tag",
            score_failure_tags.clone(),
        );
        let scoring_attempts = Family::default();
        registry.register(
            "tarsy_scoring_attempts",
            "Scoring attempts that ended, by outcome (completed, failed)",
            scoring_attempts.clone(),
        );
        let reviews = Family::default();
        registry.register(
            "tarsy_reviews",
            "Sessions people reviewed, by rating (accurate, partially_accurate, inaccurate, \
             acknowledged without a rating)",
            reviews.clone(),
        );
        let time_to_review = review_seconds();
        registry.register_with_unit(
            "tarsy_time_to_review",
            "Time from a session's end to a person's review of it",
            Unit::Seconds,
            time_to_review.clone(),
        );
        let memories_injected = Counter::default();
        registry.register(
            "tarsy_memories_injected",
            "Memories put into investigations' prompts",
            memories_injected.clone(),
        );
        let memory_tool_calls = Family::default();
        registry.register(
            "tarsy_memory_tool_calls",
            "Calls of the recall tools by agents, by tool and outcome (ok, error)",
            memory_tool_calls.clone(),
        );
        let reflections_failed = Counter::default();
        registry.register(
            "tarsy_memory_reflections_failed",
            "Reflector runs that learned nothing: no answer, or an unreadable one",
            reflections_failed.clone(),
        );
        // Counters whose label values are known start at 0, so that
        // `increase()` sees the first event after every start.
        for status in SESSION_END_STATUSES {
            let _ = sessions_finished.get_or_create(&StatusLabels {
                status: status.to_string(),
            });
        }
        for outcome in BridgeOutcome::ALL {
            let _ = webhook_alerts.get_or_create(&OutcomeLabels {
                outcome: outcome.as_str(),
            });
        }
        for outcome in [NOTIFICATION_SENT, NOTIFICATION_FAILED] {
            let _ = notifications.get_or_create(&NotificationLabels {
                channel: SLACK,
                outcome,
            });
        }
        for outcome in ScoringOutcome::ALL {
            let _ = scoring_attempts.get_or_create(&OutcomeLabels {
                outcome: outcome.as_str(),
            });
        }
        for rating in REVIEW_RATINGS {
            let _ = reviews.get_or_create(&RatingLabels {
                rating: rating.to_string(),
            });
        }
        for tool in MEMORY_TOOLS {
            for outcome in ["ok", "error"] {
                let _ = memory_tool_calls.get_or_create(&MemoryToolLabels {
                    tool: tool.to_string(),
                    outcome,
                });
            }
        }
        Self {
            registry,
            memories_injected,
            memory_tool_calls,
            reflections_failed,
            notifications,
            session_scores,
            score_failure_tags,
            scoring_attempts,
            reviews,
            time_to_review,
            totals: Totals::default(),
            llm_duration,
            llm_tokens,
            llm_fallbacks,
            llm_circuit_open,
            mcp_calls,
            mcp_duration,
            mcp_healthy,
            http_requests,
            http_duration,
            ws_connections,
            sessions_finished,
            session_duration,
            stage_duration,
            webhook_alerts,
        }
    }

    /// This process's LLM and tool call totals.
    pub fn call_totals(&self) -> CallTotals {
        let t = &self.totals;
        CallTotals {
            llm_calls: t.llm_calls.load(Ordering::Relaxed),
            llm_errors: t.llm_errors.load(Ordering::Relaxed),
            tool_calls: t.tool_calls.load(Ordering::Relaxed),
            tool_errors: t.tool_errors.load(Ordering::Relaxed),
        }
    }

    /// Records one LLM call attempt.
    pub fn llm_call(&self, call: LlmCall<'_>) {
        self.totals.llm_calls.fetch_add(1, Ordering::Relaxed);
        if call.error.is_some() {
            self.totals.llm_errors.fetch_add(1, Ordering::Relaxed);
        }
        let labels = LlmLabels {
            gen_ai_operation_name: "chat",
            gen_ai_provider_name: call.provider_type.to_string(),
            gen_ai_request_model: call.model.to_string(),
            tarsy_llm_provider: call.provider.to_string(),
            error_type: call.error.unwrap_or_default().to_string(),
        };
        self.llm_duration
            .get_or_create(&labels)
            .observe(call.elapsed.as_secs_f64());
        if let Some((input, output)) = call.tokens {
            for (kind, n) in [("input", input), ("output", output)] {
                let labels = TokenLabels {
                    gen_ai_operation_name: "chat",
                    gen_ai_provider_name: call.provider_type.to_string(),
                    gen_ai_request_model: call.model.to_string(),
                    tarsy_llm_provider: call.provider.to_string(),
                    gen_ai_token_type: kind,
                };
                #[allow(clippy::cast_precision_loss)]
                self.llm_tokens.get_or_create(&labels).observe(n as f64);
            }
        }
    }

    /// Records a switch to a fallback provider.
    pub fn llm_fallback(&self, from: &str, to: &str) {
        self.llm_fallbacks
            .get_or_create(&FallbackLabels {
                from: from.to_string(),
                to: to.to_string(),
            })
            .inc();
    }

    /// Sets whether `provider`'s circuit breaker is open.
    pub fn llm_circuit(&self, provider: &str, open: bool) {
        self.llm_circuit_open
            .get_or_create(&ProviderLabels {
                provider: provider.to_string(),
            })
            .set(i64::from(open));
    }

    /// Records one MCP tool call.
    pub fn mcp_call(&self, server: &str, tool: &str, elapsed: Duration, outcome: McpOutcome) {
        self.totals.tool_calls.fetch_add(1, Ordering::Relaxed);
        if matches!(outcome, McpOutcome::Error | McpOutcome::Timeout) {
            self.totals.tool_errors.fetch_add(1, Ordering::Relaxed);
        }
        self.mcp_calls
            .get_or_create(&McpCallLabels {
                server: server.to_string(),
                tool: tool.to_string(),
                outcome: outcome.as_str(),
            })
            .inc();
        self.mcp_duration
            .get_or_create(&ServerLabels {
                server: server.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Records an MCP server's health check.
    pub fn mcp_health(&self, server: &str, healthy: bool) {
        self.mcp_healthy
            .get_or_create(&ServerLabels {
                server: server.to_string(),
            })
            .set(i64::from(healthy));
    }

    /// Records one API request; `route` is the matched route pattern (never
    /// the raw path, which would carry ids).
    pub fn http_request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        self.http_requests
            .get_or_create(&HttpLabels {
                method: method.to_string(),
                route: route.to_string(),
                status,
            })
            .inc();
        self.http_duration
            .get_or_create(&RouteLabels {
                method: method.to_string(),
                route: route.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts an open WebSocket connection until the guard is dropped.
    pub fn ws_connection(&'static self) -> WsConnection {
        self.ws_connections.inc();
        WsConnection(self)
    }

    /// Records a session that reached terminal `status` after `elapsed`.
    pub fn session_finished(&self, status: &str, elapsed: Option<Duration>) {
        let labels = StatusLabels {
            status: status.to_string(),
        };
        self.sessions_finished.get_or_create(&labels).inc();
        if let Some(d) = elapsed {
            self.session_duration
                .get_or_create(&labels)
                .observe(d.as_secs_f64());
        }
    }

    /// Records a stage that reached terminal `status` after `elapsed`.
    pub fn stage_finished(&self, status: &str, elapsed: Duration) {
        self.stage_duration
            .get_or_create(&StatusLabels {
                status: status.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Records an alert the Alertmanager bridge received.
    pub fn webhook_alert(&self, outcome: BridgeOutcome) {
        self.webhook_alerts
            .get_or_create(&OutcomeLabels {
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// Records a Slack notification, sent or not.
    pub fn slack_notification(&self, sent: bool) {
        let outcome = if sent {
            NOTIFICATION_SENT
        } else {
            NOTIFICATION_FAILED
        };
        self.notifications
            .get_or_create(&NotificationLabels {
                channel: SLACK,
                outcome,
            })
            .inc();
    }

    /// Records a completed scoring attempt: its score and failure tags.
    pub fn session_scored(&self, scored: SessionScored<'_>) {
        self.scoring_attempts
            .get_or_create(&OutcomeLabels {
                outcome: ScoringOutcome::Completed.as_str(),
            })
            .inc();
        self.session_scores
            .get_or_create(&ScoreLabels {
                chain: scored.chain.to_string(),
                alert_type: scored.alert_type.to_string(),
            })
            .observe(f64::from(scored.score));
        for tag in scored.failure_tags {
            self.score_failure_tags
                .get_or_create(&TagLabels { tag: tag.clone() })
                .inc();
        }
    }

    /// Records `n` memories put into an investigation's prompt.
    pub fn memories_injected(&self, n: usize) {
        self.memories_injected.inc_by(n as u64);
    }

    /// Records an agent's call of a recall tool.
    pub fn memory_tool_call(&self, tool: &str, failed: bool) {
        self.memory_tool_calls
            .get_or_create(&MemoryToolLabels {
                tool: tool.to_string(),
                outcome: if failed { "error" } else { "ok" },
            })
            .inc();
    }

    /// Records a reflector run that learned nothing.
    pub fn reflection_failed(&self) {
        self.reflections_failed.inc();
    }

    /// Records a scoring attempt that ended without a score.
    pub fn scoring_failed(&self) {
        self.scoring_attempts
            .get_or_create(&OutcomeLabels {
                outcome: ScoringOutcome::Failed.as_str(),
            })
            .inc();
    }

    /// Records a person's review of a session: `rating` (`accurate`,
    /// `partially_accurate`, `inaccurate`, or `acknowledged` for a review
    /// without one) and how long after the session's end it came, when
    /// known.
    pub fn session_reviewed(&self, rating: &str, after_finish: Option<Duration>) {
        self.reviews
            .get_or_create(&RatingLabels {
                rating: rating.to_string(),
            })
            .inc();
        if let Some(d) = after_finish {
            self.time_to_review.observe(d.as_secs_f64());
        }
    }

    /// The text exposition of every metric, followed by `extra` (metrics a
    /// caller computes at scrape time, already in text format, without the
    /// final `# EOF`).
    pub fn encode(&self, extra: &str) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            // Writing into a String cannot fail; keep the page valid anyway.
            out.clear();
            out.push_str("# EOF\n");
        }
        if !extra.is_empty() {
            // The registry's text ends with "# EOF": put `extra` before it.
            let body = out.strip_suffix("# EOF\n").unwrap_or(&out).to_string();
            out = body;
            out.push_str(extra);
            if !extra.ends_with('\n') {
                out.push('\n');
            }
            let _ = writeln!(out, "# EOF");
        }
        out
    }
}

/// An open WebSocket connection (see [`Telemetry::ws_connection`]).
#[derive(Debug)]
pub struct WsConnection(&'static Telemetry);

impl Drop for WsConnection {
    fn drop(&mut self) {
        self.0.ws_connections.dec();
    }
}

static GLOBAL: LazyLock<Telemetry> = LazyLock::new(Telemetry::new);

/// The process's metrics.
pub fn global() -> &'static Telemetry {
    &GLOBAL
}

/// The media type of [`Telemetry::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The media type of the classic text format ([`classic_text`]).
pub const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The notification channel of `tarsy_notifications`.
const SLACK: &str = "slack";
const NOTIFICATION_SENT: &str = "sent";
const NOTIFICATION_FAILED: &str = "failed";

/// A label value escaped for the text format.
pub fn label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// An OpenMetrics `page` as the scraper asks for it (its `Accept` header):
/// as it is, unless the scraper asks for the classic text format and not
/// for OpenMetrics (older tools, e.g. promtool 2.x, read only the classic
/// one). The content type and the page.
pub fn negotiate(accept: Option<&str>, page: String) -> (&'static str, String) {
    let accept = accept.unwrap_or_default().to_ascii_lowercase();
    if accept.contains("text/plain") && !accept.contains("application/openmetrics-text") {
        (CLASSIC_CONTENT_TYPE, classic_text(&page))
    } else {
        (CONTENT_TYPE, page)
    }
}

/// An OpenMetrics page in the classic (0.0.4) text format: a counter's
/// `HELP` and `TYPE` name its `_total` samples, no `UNIT` lines, no `# EOF`.
pub fn classic_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label_value(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(label_value("x\ny"), "x\\ny");
    }

    #[test]
    fn llm_calls_use_the_genai_names_and_labels() {
        let t = Telemetry::new();
        t.llm_call(LlmCall {
            provider_type: "openai",
            provider: "gpt",
            model: "gpt-5",
            elapsed: Duration::from_millis(300),
            error: None,
            tokens: Some((1200, 40)),
        });
        t.llm_call(LlmCall {
            provider_type: "openai",
            provider: "gpt",
            model: "gpt-5",
            elapsed: Duration::from_secs(2),
            error: Some("rate_limited"),
            tokens: None,
        });
        let text = t.encode("");
        assert!(text.contains(
            "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"gpt-5\",tarsy_llm_provider=\"gpt\",error_type=\"\"} 1"
        ), "{text}");
        assert!(text.contains("error_type=\"rate_limited\"} 1"), "{text}");
        assert!(text.contains(
            "gen_ai_client_token_usage_sum{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"gpt-5\",tarsy_llm_provider=\"gpt\",gen_ai_token_type=\"input\"} 1200.0"
        ), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn scores_and_reviews_are_counted() {
        let t = Telemetry::new();
        let tags = [
            "premature-conclusion".to_string(),
            "wrong-conclusion".to_string(),
        ];
        for score in [35, 95] {
            t.session_scored(SessionScored {
                chain: "k8s",
                alert_type: "PodCrashLooping",
                score,
                failure_tags: &tags[..1],
            });
        }
        t.session_scored(SessionScored {
            chain: "k8s",
            alert_type: "PodCrashLooping",
            score: 10,
            failure_tags: &tags,
        });
        t.scoring_failed();
        t.session_reviewed("accurate", Some(Duration::from_secs(90)));
        t.session_reviewed("acknowledged", None);
        let text = t.encode("");
        let labels = "chain=\"k8s\",alert_type=\"PodCrashLooping\"";
        for line in [
            format!("tarsy_session_score_count{{{labels}}} 3"),
            format!("tarsy_session_score_sum{{{labels}}} 140.0"),
            // The bucket bounds are inclusive: 10 is in le=10.
            format!("tarsy_session_score_bucket{{le=\"10.0\",{labels}}} 1"),
            format!("tarsy_session_score_bucket{{le=\"40.0\",{labels}}} 2"),
            format!("tarsy_session_score_bucket{{le=\"90.0\",{labels}}} 2"),
            format!("tarsy_session_score_bucket{{le=\"100.0\",{labels}}} 3"),
            "tarsy_score_failure_tags_total{tag=\"premature-conclusion\"} 3".into(),
            "tarsy_score_failure_tags_total{tag=\"wrong-conclusion\"} 1".into(),
            "tarsy_scoring_attempts_total{outcome=\"completed\"} 3".into(),
            "tarsy_scoring_attempts_total{outcome=\"failed\"} 1".into(),
            "tarsy_reviews_total{rating=\"accurate\"} 1".into(),
            "tarsy_reviews_total{rating=\"acknowledged\"} 1".into(),
            "tarsy_time_to_review_seconds_count 1".into(),
            "tarsy_time_to_review_seconds_sum 90.0".into(),
            "tarsy_time_to_review_seconds_bucket{le=\"60.0\"} 0".into(),
            "tarsy_time_to_review_seconds_bucket{le=\"300.0\"} 1".into(),
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
        }
    }

    #[test]
    fn extra_text_goes_before_the_end_marker() {
        let t = Telemetry::new();
        t.mcp_call(
            "kubernetes",
            "pods_list",
            Duration::from_millis(5),
            McpOutcome::Ok,
        );
        let text = t.encode("# TYPE tarsy_sessions gauge\ntarsy_sessions{status=\"pending\"} 2");
        assert!(text.contains("tarsy_mcp_tool_calls_total{server=\"kubernetes\",tool=\"pods_list\",outcome=\"ok\"} 1"), "{text}");
        assert!(
            text.ends_with("tarsy_sessions{status=\"pending\"} 2\n# EOF\n"),
            "{text}"
        );
        assert_eq!(text.matches("# EOF").count(), 1);
    }

    #[test]
    fn counters_with_known_labels_start_at_zero() {
        let text = Telemetry::new().encode("");
        for line in [
            "tarsy_sessions_finished_total{status=\"completed\"} 0",
            "tarsy_sessions_finished_total{status=\"timed_out\"} 0",
            "tarsy_webhook_alerts_total{outcome=\"resolved\"} 0",
            "tarsy_webhook_alerts_total{outcome=\"created\"} 0",
            "tarsy_notifications_total{channel=\"slack\",outcome=\"failed\"} 0",
            "tarsy_scoring_attempts_total{outcome=\"completed\"} 0",
            "tarsy_reviews_total{rating=\"acknowledged\"} 0",
            "tarsy_memory_tool_calls_total{tool=\"search_past_sessions\",outcome=\"error\"} 0",
            "tarsy_memories_injected_total 0",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
        }
    }

    #[test]
    fn the_classic_format_on_request() {
        let t = Telemetry::new();
        t.session_finished("completed", Some(Duration::from_secs(3)));
        let page = t.encode("# HELP tarsy_sessions Sessions.\n# TYPE tarsy_sessions gauge\ntarsy_sessions{status=\"pending\"} 2\n");
        // Prometheus asks for OpenMetrics first: it gets it; so does a
        // scraper that says nothing.
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        for accept in [Some(prometheus), None, Some("*/*")] {
            let (content_type, text) = negotiate(accept, page.clone());
            assert_eq!(content_type, CONTENT_TYPE, "{accept:?}");
            assert_eq!(text, page);
        }
        let (content_type, text) = negotiate(Some("text/plain;version=0.0.4"), page.clone());
        assert_eq!(content_type, CLASSIC_CONTENT_TYPE);
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
        for line in [
            "# HELP tarsy_sessions_finished_total Sessions this process finished, by terminal status.",
            "# TYPE tarsy_sessions_finished_total counter",
            "tarsy_sessions_finished_total{status=\"completed\"} 1",
            "# TYPE tarsy_session_duration_seconds histogram",
            "# TYPE tarsy_sessions gauge",
            "tarsy_sessions{status=\"pending\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
        }
    }
}
