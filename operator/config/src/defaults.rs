//! System defaults: the lowest level of the resolution hierarchy.
//!
//! Three layers, later wins:
//! 1. built-in values ([`Defaults::default`]);
//! 2. local mode only: a `kind: Defaults` document in the configuration
//!    directory (see [`DefaultsSpec`]);
//! 3. environment variables (cluster mode: the operator's Deployment, or its
//!    command-line flags, which the binary maps onto the same names):
//!
//! | variable | field | built-in |
//! |---|---|---|
//! | `TARSY_DEFAULT_LLM_PROVIDER` | `llmProvider` | `google-default` |
//! | `TARSY_DEFAULT_ITERATION_STRATEGY` | `iterationStrategy` | `native-thinking` |
//! | `TARSY_DEFAULT_MAX_ITERATIONS` | `maxIterations` | 20 |
//! | `TARSY_DEFAULT_ITERATION_TIMEOUT` | `iterationTimeout` | `120s` |
//! | `TARSY_DEFAULT_SUCCESS_POLICY` | `successPolicy` | unset (→ `any`) |
//! | `TARSY_DEFAULT_SESSION_TIMEOUT` | `sessionTimeout` | `15m` |
//! | `TARSY_ALERT_MASKING_ENABLED` | `alertMasking.enabled` | `true` |
//! | `TARSY_ALERT_MASKING_GROUP` | `alertMasking.patternGroup` | `security` |
//! | `TARSY_MAX_CONCURRENT_SESSIONS` | `maxConcurrentSessions` | 5 |
//! | `TARSY_RUNBOOK_DOMAINS` | `runbookDomains` (comma-separated) | `github.com,raw.githubusercontent.com` |
//! | `TARSY_RUNBOOK_TOKEN_DOMAINS` | `runbookTokenDomains` (comma-separated) | `github.com,raw.githubusercontent.com` |
//! | `TARSY_CIRCUIT_BREAKER_THRESHOLD` | `circuitBreaker.failureThreshold` | 3 |
//! | `TARSY_CIRCUIT_BREAKER_OPEN_FOR` | `circuitBreaker.openFor` | `60s` |
//! | `TARSY_KUBERNETES_MCP_IMAGE` | `kubernetesMcpImage` (cluster mode) | [`DEFAULT_KUBERNETES_MCP_IMAGE`] |
//! | `TARSY_RETENTION_HIDE_AFTER` | `retention.hideAfter` (`0`: never) | `2160h` |
//! | `TARSY_RETENTION_PURGE_AFTER` | `retention.purgeAfter` (`0`: never) | `720h` |
//! | `TARSY_EVENT_TTL` | `retention.eventTtl` (`0`: never) | `24h` |
//! | `TARSY_RETENTION_INTERVAL` | `retention.interval` | `1h` |
//! | `TARSY_SLACK_CHANNEL` | `notifications.slack.channel` | unset (no notifications) |
//! | `TARSY_SLACK_NOTIFY_START` | `notifications.slack.notifyStart` | `false` |
//! | `TARSY_SLACK_API_URL` | `notifications.slack.apiUrl` | [`DEFAULT_SLACK_API_URL`] |
//! | `TARSY_DASHBOARD_URL` | `notifications.dashboardUrl` | unset |
//! | `TARSY_SCORING_ENABLED` | `scoring.enabled` (chains may say otherwise) | `false` |
//! | `TARSY_MEMORY_ENABLED` | `memory.enabled` | `false` |
//! | `TARSY_MEMORY_MAX_INJECTED` | `memory.maxInjected` (0–5) | 5 |
//! | `TARSY_MEMORY_SIMILARITY_FLOOR` | `memory.similarityFloor` (0–1) | 0.75 |
//! | `TARSY_MEMORY_TEXT_FLOOR` | `memory.textFloor` (0–1) | 0.25 |
//! | `TARSY_MEMORY_REQUIRE_REVIEW` | `memory.requireReview` | `false` |
//! | `TARSY_MEMORY_PROJECT` | `memory.project` (local mode's scope) | `default` |
//! | `TARSY_MEMORY_EMBEDDING_PROVIDER` | `memory.embedding.llmProvider` | unset (full text only) |
//! | `TARSY_MEMORY_EMBEDDING_MODEL` | `memory.embedding.model` | unset |
//! | `TARSY_COST_ESTIMATES` | `pricing.enabled` | `true` |
//! | `TARSY_SESSION_MAX_COST_USD` | `budget.maxCostUsd` (chains may say otherwise) | unset (no limit) |
//! | `TARSY_SESSION_MAX_TOKENS` | `budget.maxTokens` (chains may say otherwise) | unset (no limit) |
//! | `TARSY_SCOPE_MAX_COST_USD_PER_DAY` | `maxCostUsdPerDay` (each namespace; local: the project) | unset (no limit) |
//! | `TARSY_PRICE_CATALOG_URL` | `pricing.catalogUrl` | unset (the bundled price book) |
//!
//! The Slack bot token is never part of the defaults: it is read from
//! `TARSY_SLACK_BOT_TOKEN` only, where the process starts.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tarsy_core::config::{
    DEFAULT_ITERATION_TIMEOUT, DEFAULT_MAX_ITERATIONS, DEFAULT_SESSION_TIMEOUT,
};
use tarsy_core::{Budget, IterationStrategy, ModelPrice, SuccessPolicy};
use tarsy_masking::AlertMaskingConfig;

use crate::error::{Location, Problem};

/// Name of the built-in default LLM provider.
pub const DEFAULT_LLM_PROVIDER: &str = "google-default";
/// Default number of sessions investigated at once.
pub const DEFAULT_MAX_CONCURRENT_SESSIONS: u32 = 5;

/// Resolved system defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    /// LLM provider used when neither chain nor stage agent names one.
    pub llm_provider: String,
    /// Strategy used when neither agent, chain nor stage agent names one.
    pub iteration_strategy: IterationStrategy,
    /// Iterations before a forced conclusion.
    pub max_iterations: u32,
    /// Timeout of one iteration.
    pub iteration_timeout: Duration,
    /// Stage success policy when a stage sets none (`None` → `any`).
    pub success_policy: Option<SuccessPolicy>,
    /// Whole-session timeout.
    pub session_timeout: Duration,
    /// Masking of alert payloads (fail-open).
    pub alert_masking: AlertMaskingConfig,
    /// Sessions investigated at once; later alerts wait Pending.
    pub max_concurrent_sessions: u32,
    /// Hosts runbooks may be fetched from (exact names or `*.domain`).
    pub runbook_domains: Vec<String>,
    /// Hosts the runbook token (`TARSY_RUNBOOK_GITHUB_TOKEN`, never part of
    /// these defaults) is sent to; private GitHub repositories by default,
    /// a GitHub Enterprise host when set.
    pub runbook_token_domains: Vec<String>,
    /// LLM provider circuit breakers: failures in a row (across every
    /// process sharing the store) that open a provider's circuit.
    pub breaker_failure_threshold: u32,
    /// How long an open circuit sends executions to the fallback providers
    /// before one trial call.
    pub breaker_open_for: Duration,
    /// Cluster mode: the image of the built-in `kubernetes-server`, which
    /// runs as a sidecar of the investigation pods that use it (local mode
    /// runs it over stdio and ignores this).
    pub kubernetes_mcp_image: String,
    /// How long finished sessions and live events are kept.
    pub retention: Retention,
    /// Time between two retention sweeps.
    pub retention_interval: Duration,
    /// Who hears about investigations.
    pub notifications: Notifications,
    /// Whether completed sessions are scored by a judge when their chain
    /// does not say.
    pub scoring_enabled: bool,
    /// Investigation memory: learning after scoring, recall before an
    /// investigation.
    pub memory: MemorySettings,
    /// Cost estimates of LLM calls.
    pub pricing: PricingSettings,
    /// What a session may spend when its chain does not say.
    pub budget: Budget,
    /// What the sessions of one scope (a namespace; local mode's project)
    /// created on one day (UTC) may spend; past it new ones wait Pending.
    pub max_cost_usd_per_day: Option<f64>,
}

/// Where LLM calls' prices come from. A provider's `spec.pricing` comes
/// first, then `models` by model name, then the price book.
#[derive(Debug, Clone, PartialEq)]
pub struct PricingSettings {
    /// Whether calls get a cost estimate (off: none, and costs read partial).
    pub enabled: bool,
    /// Prices by model name, over the price book's.
    pub models: BTreeMap<String, ModelPrice>,
    /// A catalog in LiteLLM's price map format to refresh the bundled price
    /// book from at start (cached; the bundled book when unreachable).
    pub catalog_url: Option<String>,
}

impl Default for PricingSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            models: BTreeMap::new(),
            catalog_url: None,
        }
    }
}

/// Investigation memory's switches.
#[derive(Debug, Clone, PartialEq)]
pub struct MemorySettings {
    /// Whether scored sessions teach memories and investigations recall
    /// them (off: neither; stored memories stay).
    pub enabled: bool,
    /// Most memories put into an investigation's prompt (0: none, the
    /// recall tools only).
    pub max_injected: u32,
    /// Least cosine similarity between an alert and a memory for the
    /// memory to count as relevant (with an embedding provider).
    pub similarity_floor: f64,
    /// Least share of a memory's words found in the alert for it to count
    /// as relevant by full text.
    pub text_floor: f64,
    /// Only memories of sessions a person rated accurate are injected.
    pub require_review: bool,
    /// Local mode's memory scope (a cluster's is the Alert's namespace and
    /// its `tarsy.dev/project` label).
    pub project: String,
    /// Where vectors come from; none: full text alone.
    pub embedding: Option<EmbeddingSettings>,
}

/// The embedding provider of investigation memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingSettings {
    /// An LLMProvider of type `google` or `openai` (its key and base URL).
    pub llm_provider: String,
    /// The embedding model.
    pub model: String,
}

/// Default: most memories injected into one prompt.
pub const DEFAULT_MEMORY_MAX_INJECTED: u32 = 5;
/// Default: the cosine similarity floor.
pub const DEFAULT_MEMORY_SIMILARITY_FLOOR: f64 = 0.75;
/// Default: the full-text floor.
pub const DEFAULT_MEMORY_TEXT_FLOOR: f64 = 0.25;
/// Default: local mode's memory scope.
pub const DEFAULT_MEMORY_PROJECT: &str = "default";

impl Default for MemorySettings {
    fn default() -> Self {
        Self {
            enabled: false,
            max_injected: DEFAULT_MEMORY_MAX_INJECTED,
            similarity_floor: DEFAULT_MEMORY_SIMILARITY_FLOOR,
            text_floor: DEFAULT_MEMORY_TEXT_FLOOR,
            require_review: false,
            project: DEFAULT_MEMORY_PROJECT.to_string(),
            embedding: None,
        }
    }
}

/// What is kept how long; `None` keeps forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// A finished session is hidden (soft-deleted) this long after it
    /// finished; hidden sessions are still served by id.
    pub hide_after: Option<Duration>,
    /// A hidden session, with everything below it, is removed this long
    /// after it was hidden.
    pub purge_after: Option<Duration>,
    /// Live events older than this are deleted.
    pub event_ttl: Option<Duration>,
}

/// Default: finished sessions stay listed 90 days (the reference's
/// retention).
pub const DEFAULT_HIDE_AFTER: Duration = Duration::from_secs(90 * 24 * 3600);
/// Default: hidden sessions are removed 30 days after they were hidden.
pub const DEFAULT_PURGE_AFTER: Duration = Duration::from_secs(30 * 24 * 3600);
/// Default: live events are kept one day (longer than any session runs).
pub const DEFAULT_EVENT_TTL: Duration = Duration::from_secs(24 * 3600);
/// Default: one retention sweep an hour.
pub const DEFAULT_RETENTION_INTERVAL: Duration = Duration::from_secs(3600);

impl Default for Retention {
    fn default() -> Self {
        Self {
            hide_after: Some(DEFAULT_HIDE_AFTER),
            purge_after: Some(DEFAULT_PURGE_AFTER),
            event_ttl: Some(DEFAULT_EVENT_TTL),
        }
    }
}

/// The Slack Web API.
pub const DEFAULT_SLACK_API_URL: &str = "https://slack.com/api";

/// Notifications of investigations (the bot token is not here: see the
/// module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notifications {
    /// Slack channel told when investigations end (chains may name their
    /// own); `None`: no notifications.
    pub slack_channel: Option<String>,
    /// Also tell when an investigation starts.
    pub slack_notify_start: bool,
    /// Base URL of the Slack Web API.
    pub slack_api_url: String,
    /// The dashboard's external URL, linked from notifications.
    pub dashboard_url: Option<String>,
}

impl Default for Notifications {
    fn default() -> Self {
        Self {
            slack_channel: None,
            slack_notify_start: false,
            slack_api_url: DEFAULT_SLACK_API_URL.to_string(),
            dashboard_url: None,
        }
    }
}

/// Failures in a row that open a provider's circuit unless configured.
pub const DEFAULT_BREAKER_FAILURE_THRESHOLD: u32 = 3;
/// How long a circuit stays open unless configured.
pub const DEFAULT_BREAKER_OPEN_FOR: Duration = Duration::from_secs(60);

/// The upstream kubernetes-mcp-server image, the same release as the npm
/// package local mode runs ([`crate::builtin::KUBERNETES_MCP_SERVER_PACKAGE`]).
pub const DEFAULT_KUBERNETES_MCP_IMAGE: &str = "quay.io/containers/kubernetes_mcp_server:v0.0.67";

/// Hosts runbooks come from unless configured otherwise.
pub const DEFAULT_RUNBOOK_DOMAINS: [&str; 2] = ["github.com", "raw.githubusercontent.com"];

impl Default for Defaults {
    fn default() -> Self {
        Self {
            llm_provider: DEFAULT_LLM_PROVIDER.to_string(),
            iteration_strategy: IterationStrategy::NativeThinking,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            iteration_timeout: DEFAULT_ITERATION_TIMEOUT,
            success_policy: None,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            alert_masking: AlertMaskingConfig::default(),
            max_concurrent_sessions: DEFAULT_MAX_CONCURRENT_SESSIONS,
            runbook_domains: DEFAULT_RUNBOOK_DOMAINS.map(String::from).to_vec(),
            runbook_token_domains: DEFAULT_RUNBOOK_DOMAINS.map(String::from).to_vec(),
            breaker_failure_threshold: DEFAULT_BREAKER_FAILURE_THRESHOLD,
            breaker_open_for: DEFAULT_BREAKER_OPEN_FOR,
            kubernetes_mcp_image: DEFAULT_KUBERNETES_MCP_IMAGE.to_string(),
            retention: Retention::default(),
            retention_interval: DEFAULT_RETENTION_INTERVAL,
            notifications: Notifications::default(),
            scoring_enabled: false,
            memory: MemorySettings::default(),
            pricing: PricingSettings::default(),
            budget: Budget::default(),
            max_cost_usd_per_day: None,
        }
    }
}

/// Overrides of the defaults, every field optional: the `spec` of a local
/// `kind: Defaults` document, or what [`DefaultsSpec::from_env`] reads.
///
/// ```yaml
/// apiVersion: tarsy.dev/v1alpha1
/// kind: Defaults
/// metadata: {name: defaults}
/// spec:
///   llmProvider: gemini-pro
///   iterationStrategy: native-thinking
///   maxIterations: 25
///   iterationTimeout: 180s
///   successPolicy: any
///   sessionTimeout: 30m
///   alertMasking: {enabled: true, patternGroup: security}
///   maxConcurrentSessions: 10
///   runbookDomains: [github.com, raw.githubusercontent.com, wiki.example.com]
///   circuitBreaker: {failureThreshold: 3, openFor: 60s}
///   kubernetesMcpImage: registry.example.com/kubernetes-mcp-server:v0.0.67
///   retention: {hideAfter: 2160h, purgeAfter: 720h, eventTtl: 24h, interval: 1h}
///   notifications:
///     dashboardUrl: https://tarsy.example.com
///     slack: {channel: "#sre-incidents", notifyStart: false}
///   scoring: {enabled: true}
///   memory:
///     enabled: true
///     maxInjected: 5
///     similarityFloor: 0.75
///     textFloor: 0.25
///     requireReview: false
///     project: payments
///     embedding: {llmProvider: gemini-pro, model: text-embedding-004}
///   pricing:
///     enabled: true
///     models: {my-model: {inputPerMillion: 1.0, outputPerMillion: 4.0}}
///     catalogUrl: https://prices.example.com/model_prices.json
///   budget: {maxCostUsd: 2.5, maxTokens: 2000000}
///   maxCostUsdPerDay: 50
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultsSpec {
    /// Default LLM provider name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_provider: Option<String>,
    /// Default iteration strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_strategy: Option<IterationStrategy>,
    /// Default max iterations (≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// Default iteration timeout, Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_timeout: Option<String>,
    /// Default stage success policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<SuccessPolicy>,
    /// Default session timeout, Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_timeout: Option<String>,
    /// Alert payload masking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_masking: Option<AlertMaskingSpec>,
    /// Sessions investigated at once (≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_sessions: Option<u32>,
    /// Hosts runbooks may be fetched from (replaces the built-in list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runbook_domains: Option<Vec<String>>,
    /// Hosts the runbook token is sent to (replaces the built-in list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runbook_token_domains: Option<Vec<String>>,
    /// LLM provider circuit breakers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit_breaker: Option<CircuitBreakerSpec>,
    /// Image of the built-in Kubernetes MCP server's sidecar (cluster mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_mcp_image: Option<String>,
    /// How long sessions and live events are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<RetentionSpec>,
    /// Who hears about investigations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<NotificationsSpec>,
    /// Scoring of completed sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoring: Option<ScoringDefaultsSpec>,
    /// Investigation memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemorySpec>,
    /// Cost estimates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<PricingSpec>,
    /// What a session may spend when its chain does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// What the sessions of one scope created on one day (UTC) may spend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd_per_day: Option<f64>,
}

/// Cost estimate overrides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PricingSpec {
    /// Whether LLM calls get a cost estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Prices by model name (US dollars per million tokens), over the price
    /// book's; an LLMProvider's `spec.pricing` still comes first.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, ModelPrice>,
    /// A catalog in LiteLLM's price map format to refresh the price book from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_url: Option<String>,
}

/// Investigation memory overrides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemorySpec {
    /// Learning and recall on or off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Most memories injected into a prompt (0–5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_injected: Option<u32>,
    /// Cosine similarity floor (0–1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity_floor: Option<f64>,
    /// Full-text floor: share of a memory's words in the alert (0–1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_floor: Option<f64>,
    /// Inject only memories of sessions a person rated accurate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_review: Option<bool>,
    /// Local mode's memory scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The embedding provider (none: full text alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<EmbeddingSpec>,
}

/// The embedding provider.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmbeddingSpec {
    /// An LLMProvider of type google or openai.
    pub llm_provider: String,
    /// The embedding model, e.g. `text-embedding-004`.
    pub model: String,
}

/// Scoring overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoringDefaultsSpec {
    /// Whether completed sessions are scored unless their chain says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Retention overrides, Go durations (`0` keeps forever, except `interval`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetentionSpec {
    /// Finished sessions are hidden from lists this long after they finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hide_after: Option<String>,
    /// Hidden sessions are removed this long after they were hidden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_after: Option<String>,
    /// Live events (WebSocket catch-up) are deleted after this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_ttl: Option<String>,
    /// Time between two sweeps (positive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

/// Notification overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotificationsSpec {
    /// The dashboard's external URL, linked from notifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dashboard_url: Option<String>,
    /// Slack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<SlackSpec>,
}

/// Slack overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlackSpec {
    /// Default channel (chains may name their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Also notify when an investigation starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_start: Option<bool>,
    /// Base URL of the Slack Web API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
}

/// Circuit breaker overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CircuitBreakerSpec {
    /// Failures in a row that open a provider's circuit (≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<u32>,
    /// How long the circuit stays open, Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_for: Option<String>,
}

/// Alert masking overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AlertMaskingSpec {
    /// Whether alert data is masked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Built-in masking group applied to alert data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern_group: Option<String>,
}

/// The environment variable holding the token sent with runbook downloads
/// to `runbookTokenDomains`. A secret, so never a field of the Defaults
/// document: each mode's process reads it (cluster mode from a Secret).
pub const RUNBOOK_TOKEN_ENV: &str = "TARSY_RUNBOOK_GITHUB_TOKEN";

/// Environment variable names read by [`DefaultsSpec::from_env`].
pub mod env {
    /// Default LLM provider.
    pub const LLM_PROVIDER: &str = "TARSY_DEFAULT_LLM_PROVIDER";
    /// Default iteration strategy.
    pub const ITERATION_STRATEGY: &str = "TARSY_DEFAULT_ITERATION_STRATEGY";
    /// Default max iterations.
    pub const MAX_ITERATIONS: &str = "TARSY_DEFAULT_MAX_ITERATIONS";
    /// Default iteration timeout.
    pub const ITERATION_TIMEOUT: &str = "TARSY_DEFAULT_ITERATION_TIMEOUT";
    /// Default success policy.
    pub const SUCCESS_POLICY: &str = "TARSY_DEFAULT_SUCCESS_POLICY";
    /// Default session timeout.
    pub const SESSION_TIMEOUT: &str = "TARSY_DEFAULT_SESSION_TIMEOUT";
    /// Alert masking on/off.
    pub const ALERT_MASKING_ENABLED: &str = "TARSY_ALERT_MASKING_ENABLED";
    /// Alert masking group.
    pub const ALERT_MASKING_GROUP: &str = "TARSY_ALERT_MASKING_GROUP";
    /// Concurrency limit.
    pub const MAX_CONCURRENT_SESSIONS: &str = "TARSY_MAX_CONCURRENT_SESSIONS";
    /// Runbook hosts, comma-separated.
    pub const RUNBOOK_DOMAINS: &str = "TARSY_RUNBOOK_DOMAINS";
    /// Hosts the runbook token goes to, comma-separated.
    pub const RUNBOOK_TOKEN_DOMAINS: &str = "TARSY_RUNBOOK_TOKEN_DOMAINS";
    /// Circuit breaker threshold.
    pub const CIRCUIT_BREAKER_THRESHOLD: &str = "TARSY_CIRCUIT_BREAKER_THRESHOLD";
    /// Circuit breaker open period.
    pub const CIRCUIT_BREAKER_OPEN_FOR: &str = "TARSY_CIRCUIT_BREAKER_OPEN_FOR";
    /// Image of the built-in Kubernetes MCP server's sidecar.
    pub const KUBERNETES_MCP_IMAGE: &str = "TARSY_KUBERNETES_MCP_IMAGE";
    /// Finished sessions hidden after.
    pub const RETENTION_HIDE_AFTER: &str = "TARSY_RETENTION_HIDE_AFTER";
    /// Hidden sessions purged after.
    pub const RETENTION_PURGE_AFTER: &str = "TARSY_RETENTION_PURGE_AFTER";
    /// Live events deleted after.
    pub const EVENT_TTL: &str = "TARSY_EVENT_TTL";
    /// Time between retention sweeps.
    pub const RETENTION_INTERVAL: &str = "TARSY_RETENTION_INTERVAL";
    /// Default Slack channel.
    pub const SLACK_CHANNEL: &str = "TARSY_SLACK_CHANNEL";
    /// Notify at starts too.
    pub const SLACK_NOTIFY_START: &str = "TARSY_SLACK_NOTIFY_START";
    /// Slack Web API base URL.
    pub const SLACK_API_URL: &str = "TARSY_SLACK_API_URL";
    /// The dashboard's external URL.
    pub const DASHBOARD_URL: &str = "TARSY_DASHBOARD_URL";
    /// Scoring on/off unless a chain says.
    pub const SCORING_ENABLED: &str = "TARSY_SCORING_ENABLED";
    /// Investigation memory on/off.
    pub const MEMORY_ENABLED: &str = "TARSY_MEMORY_ENABLED";
    /// Most memories injected.
    pub const MEMORY_MAX_INJECTED: &str = "TARSY_MEMORY_MAX_INJECTED";
    /// Cosine similarity floor.
    pub const MEMORY_SIMILARITY_FLOOR: &str = "TARSY_MEMORY_SIMILARITY_FLOOR";
    /// Full-text floor.
    pub const MEMORY_TEXT_FLOOR: &str = "TARSY_MEMORY_TEXT_FLOOR";
    /// Only reviewed-accurate memories injected.
    pub const MEMORY_REQUIRE_REVIEW: &str = "TARSY_MEMORY_REQUIRE_REVIEW";
    /// Local mode's memory scope.
    pub const MEMORY_PROJECT: &str = "TARSY_MEMORY_PROJECT";
    /// Embedding provider (an LLMProvider name).
    pub const MEMORY_EMBEDDING_PROVIDER: &str = "TARSY_MEMORY_EMBEDDING_PROVIDER";
    /// Embedding model.
    pub const MEMORY_EMBEDDING_MODEL: &str = "TARSY_MEMORY_EMBEDDING_MODEL";
    /// Cost estimates on or off.
    pub const COST_ESTIMATES: &str = "TARSY_COST_ESTIMATES";
    /// Price catalog to refresh the price book from.
    pub const PRICE_CATALOG_URL: &str = "TARSY_PRICE_CATALOG_URL";
    /// A session's cost limit.
    pub const SESSION_MAX_COST_USD: &str = "TARSY_SESSION_MAX_COST_USD";
    /// A session's token limit.
    pub const SESSION_MAX_TOKENS: &str = "TARSY_SESSION_MAX_TOKENS";
    /// A scope's daily cost limit.
    pub const SCOPE_MAX_COST_USD_PER_DAY: &str = "TARSY_SCOPE_MAX_COST_USD_PER_DAY";
}

fn comma_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(String::from)
        .collect()
}

impl DefaultsSpec {
    /// Reads the `TARSY_*` variables (see the module docs) through `lookup`.
    /// Errors name the variable.
    pub fn from_env(
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, Vec<(Location, Problem)>> {
        let mut errors = Vec::new();
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        fn parse<T: std::str::FromStr>(
            name: &str,
            value: Option<String>,
            errors: &mut Vec<(Location, Problem)>,
        ) -> Option<T>
        where
            T::Err: std::fmt::Display,
        {
            let value = value?;
            match value.trim().parse::<T>() {
                Ok(v) => Some(v),
                Err(e) => {
                    errors.push((
                        Location::default().field(name),
                        Problem::Invalid(format!("invalid value {value:?}: {e}")),
                    ));
                    None
                }
            }
        }
        let spec = DefaultsSpec {
            llm_provider: get(env::LLM_PROVIDER),
            iteration_strategy: parse(
                env::ITERATION_STRATEGY,
                get(env::ITERATION_STRATEGY),
                &mut errors,
            ),
            max_iterations: parse(env::MAX_ITERATIONS, get(env::MAX_ITERATIONS), &mut errors),
            iteration_timeout: get(env::ITERATION_TIMEOUT),
            success_policy: parse(env::SUCCESS_POLICY, get(env::SUCCESS_POLICY), &mut errors),
            session_timeout: get(env::SESSION_TIMEOUT),
            alert_masking: {
                let enabled = parse(
                    env::ALERT_MASKING_ENABLED,
                    get(env::ALERT_MASKING_ENABLED),
                    &mut errors,
                );
                let group = get(env::ALERT_MASKING_GROUP);
                (enabled.is_some() || group.is_some()).then_some(AlertMaskingSpec {
                    enabled,
                    pattern_group: group,
                })
            },
            max_concurrent_sessions: parse(
                env::MAX_CONCURRENT_SESSIONS,
                get(env::MAX_CONCURRENT_SESSIONS),
                &mut errors,
            ),
            runbook_domains: get(env::RUNBOOK_DOMAINS).map(|v| comma_list(&v)),
            runbook_token_domains: get(env::RUNBOOK_TOKEN_DOMAINS).map(|v| comma_list(&v)),
            circuit_breaker: {
                let failure_threshold = parse(
                    env::CIRCUIT_BREAKER_THRESHOLD,
                    get(env::CIRCUIT_BREAKER_THRESHOLD),
                    &mut errors,
                );
                let open_for = get(env::CIRCUIT_BREAKER_OPEN_FOR);
                (failure_threshold.is_some() || open_for.is_some()).then_some(CircuitBreakerSpec {
                    failure_threshold,
                    open_for,
                })
            },
            kubernetes_mcp_image: get(env::KUBERNETES_MCP_IMAGE).map(|v| v.trim().to_string()),
            retention: {
                let r = RetentionSpec {
                    hide_after: get(env::RETENTION_HIDE_AFTER),
                    purge_after: get(env::RETENTION_PURGE_AFTER),
                    event_ttl: get(env::EVENT_TTL),
                    interval: get(env::RETENTION_INTERVAL),
                };
                (r != RetentionSpec::default()).then_some(r)
            },
            notifications: {
                let slack = SlackSpec {
                    channel: get(env::SLACK_CHANNEL).map(|v| v.trim().to_string()),
                    notify_start: parse(
                        env::SLACK_NOTIFY_START,
                        get(env::SLACK_NOTIFY_START),
                        &mut errors,
                    ),
                    api_url: get(env::SLACK_API_URL).map(|v| v.trim().to_string()),
                };
                let n = NotificationsSpec {
                    dashboard_url: get(env::DASHBOARD_URL).map(|v| v.trim().to_string()),
                    slack: (slack != SlackSpec::default()).then_some(slack),
                };
                (n != NotificationsSpec::default()).then_some(n)
            },
            scoring: parse(env::SCORING_ENABLED, get(env::SCORING_ENABLED), &mut errors).map(
                |enabled| ScoringDefaultsSpec {
                    enabled: Some(enabled),
                },
            ),
            memory: {
                let provider = get(env::MEMORY_EMBEDDING_PROVIDER).map(|v| v.trim().to_string());
                let model = get(env::MEMORY_EMBEDDING_MODEL).map(|v| v.trim().to_string());
                let embedding = match (provider, model) {
                    (Some(llm_provider), Some(model)) => Some(EmbeddingSpec {
                        llm_provider,
                        model,
                    }),
                    (None, None) => None,
                    (Some(_), None) | (None, Some(_)) => {
                        errors.push((
                            Location::default().field(env::MEMORY_EMBEDDING_PROVIDER),
                            Problem::Invalid(format!(
                                "set both {} and {}, or neither",
                                env::MEMORY_EMBEDDING_PROVIDER,
                                env::MEMORY_EMBEDDING_MODEL
                            )),
                        ));
                        None
                    }
                };
                let m = MemorySpec {
                    enabled: parse(env::MEMORY_ENABLED, get(env::MEMORY_ENABLED), &mut errors),
                    max_injected: parse(
                        env::MEMORY_MAX_INJECTED,
                        get(env::MEMORY_MAX_INJECTED),
                        &mut errors,
                    ),
                    similarity_floor: parse(
                        env::MEMORY_SIMILARITY_FLOOR,
                        get(env::MEMORY_SIMILARITY_FLOOR),
                        &mut errors,
                    ),
                    text_floor: parse(
                        env::MEMORY_TEXT_FLOOR,
                        get(env::MEMORY_TEXT_FLOOR),
                        &mut errors,
                    ),
                    require_review: parse(
                        env::MEMORY_REQUIRE_REVIEW,
                        get(env::MEMORY_REQUIRE_REVIEW),
                        &mut errors,
                    ),
                    project: get(env::MEMORY_PROJECT).map(|v| v.trim().to_string()),
                    embedding,
                };
                (m != MemorySpec::default()).then_some(m)
            },
            pricing: {
                let p = PricingSpec {
                    enabled: parse(env::COST_ESTIMATES, get(env::COST_ESTIMATES), &mut errors),
                    models: BTreeMap::new(),
                    catalog_url: get(env::PRICE_CATALOG_URL).map(|v| v.trim().to_string()),
                };
                (p != PricingSpec::default()).then_some(p)
            },
            budget: {
                let b = Budget {
                    max_cost_usd: parse(
                        env::SESSION_MAX_COST_USD,
                        get(env::SESSION_MAX_COST_USD),
                        &mut errors,
                    ),
                    max_tokens: parse(
                        env::SESSION_MAX_TOKENS,
                        get(env::SESSION_MAX_TOKENS),
                        &mut errors,
                    ),
                };
                (!b.is_unlimited()).then_some(b)
            },
            max_cost_usd_per_day: parse(
                env::SCOPE_MAX_COST_USD_PER_DAY,
                get(env::SCOPE_MAX_COST_USD_PER_DAY),
                &mut errors,
            ),
        };
        // Durations are checked here so the error names the variable.
        let breaker_open_for = spec
            .circuit_breaker
            .as_ref()
            .and_then(|b| b.open_for.clone());
        let r = spec.retention.clone().unwrap_or_default();
        for (name, value) in [
            (env::ITERATION_TIMEOUT, &spec.iteration_timeout),
            (env::SESSION_TIMEOUT, &spec.session_timeout),
            (env::CIRCUIT_BREAKER_OPEN_FOR, &breaker_open_for),
            (env::RETENTION_HIDE_AFTER, &r.hide_after),
            (env::RETENTION_PURGE_AFTER, &r.purge_after),
            (env::EVENT_TTL, &r.event_ttl),
            (env::RETENTION_INTERVAL, &r.interval),
        ] {
            if let Some(v) = value
                && let Err(e) = crate::model::parse_duration(v)
            {
                errors.push((Location::default().field(name), Problem::Duration(e)));
            }
        }
        if errors.is_empty() {
            Ok(spec)
        } else {
            Err(errors)
        }
    }
}

impl Defaults {
    /// These defaults as the environment [`DefaultsSpec::from_env`] reads:
    /// how the operator hands its defaults to the runners it starts.
    /// Retention and notifications are left out: runners neither sweep the
    /// store nor notify.
    pub fn to_env(&self) -> Vec<(&'static str, String)> {
        let mut vars = vec![
            (env::LLM_PROVIDER, self.llm_provider.clone()),
            (env::ITERATION_STRATEGY, self.iteration_strategy.to_string()),
            (env::MAX_ITERATIONS, self.max_iterations.to_string()),
            (
                env::ITERATION_TIMEOUT,
                crate::model::format_duration(self.iteration_timeout),
            ),
            (
                env::SESSION_TIMEOUT,
                crate::model::format_duration(self.session_timeout),
            ),
            (
                env::ALERT_MASKING_ENABLED,
                self.alert_masking.enabled.to_string(),
            ),
            (
                env::ALERT_MASKING_GROUP,
                self.alert_masking.pattern_group.clone(),
            ),
            (
                env::MAX_CONCURRENT_SESSIONS,
                self.max_concurrent_sessions.to_string(),
            ),
            (env::RUNBOOK_DOMAINS, self.runbook_domains.join(",")),
            (
                env::RUNBOOK_TOKEN_DOMAINS,
                self.runbook_token_domains.join(","),
            ),
            (
                env::CIRCUIT_BREAKER_THRESHOLD,
                self.breaker_failure_threshold.to_string(),
            ),
            (
                env::CIRCUIT_BREAKER_OPEN_FOR,
                crate::model::format_duration(self.breaker_open_for),
            ),
            (env::KUBERNETES_MCP_IMAGE, self.kubernetes_mcp_image.clone()),
        ];
        if let Some(p) = self.success_policy {
            vars.push((env::SUCCESS_POLICY, p.to_string()));
        }
        // Runners recall memories and run the reflector.
        let m = &self.memory;
        vars.extend([
            (env::MEMORY_ENABLED, m.enabled.to_string()),
            (env::MEMORY_MAX_INJECTED, m.max_injected.to_string()),
            (env::MEMORY_SIMILARITY_FLOOR, m.similarity_floor.to_string()),
            (env::MEMORY_TEXT_FLOOR, m.text_floor.to_string()),
            (env::MEMORY_REQUIRE_REVIEW, m.require_review.to_string()),
            (env::MEMORY_PROJECT, m.project.clone()),
        ]);
        if let Some(e) = &m.embedding {
            vars.push((env::MEMORY_EMBEDDING_PROVIDER, e.llm_provider.clone()));
            vars.push((env::MEMORY_EMBEDDING_MODEL, e.model.clone()));
        }
        // Runners estimate their calls' costs.
        vars.push((env::COST_ESTIMATES, self.pricing.enabled.to_string()));
        if let Some(url) = &self.pricing.catalog_url {
            vars.push((env::PRICE_CATALOG_URL, url.clone()));
        }
        vars
    }

    /// Applies `spec` on top of these defaults. Problems carry the field path
    /// (`spec.maxIterations`, ...) relative to the spec.
    pub fn apply(&mut self, spec: &DefaultsSpec) -> Result<(), Vec<(String, Problem)>> {
        let mut errors = Vec::new();
        if let Some(p) = &spec.llm_provider {
            self.llm_provider = p.clone();
        }
        if let Some(s) = spec.iteration_strategy {
            self.iteration_strategy = s;
        }
        if let Some(n) = spec.max_iterations {
            if n == 0 {
                errors.push((
                    "maxIterations".to_string(),
                    Problem::Invalid("must be at least 1".into()),
                ));
            } else {
                self.max_iterations = n;
            }
        }
        for (field, value, target) in [
            (
                "iterationTimeout",
                &spec.iteration_timeout,
                &mut self.iteration_timeout,
            ),
            (
                "sessionTimeout",
                &spec.session_timeout,
                &mut self.session_timeout,
            ),
        ] {
            if let Some(d) = value
                .as_deref()
                .and_then(|v| positive(field, v, &mut errors))
            {
                *target = d;
            }
        }
        if let Some(p) = spec.success_policy {
            self.success_policy = Some(p);
        }
        if let Some(m) = &spec.alert_masking {
            if let Some(e) = m.enabled {
                self.alert_masking.enabled = e;
            }
            if let Some(g) = &m.pattern_group {
                self.alert_masking.pattern_group = g.clone();
            }
        }
        if let Some(n) = spec.max_concurrent_sessions {
            if n == 0 {
                errors.push((
                    "maxConcurrentSessions".to_string(),
                    Problem::Invalid("must be at least 1".into()),
                ));
            } else {
                self.max_concurrent_sessions = n;
            }
        }
        if let Some(domains) = &spec.runbook_domains {
            self.runbook_domains = domains.clone();
        }
        if let Some(domains) = &spec.runbook_token_domains {
            self.runbook_token_domains = domains.clone();
        }
        if let Some(b) = &spec.circuit_breaker {
            match b.failure_threshold {
                Some(0) => errors.push((
                    "circuitBreaker.failureThreshold".to_string(),
                    Problem::Invalid("must be at least 1".into()),
                )),
                Some(n) => self.breaker_failure_threshold = n,
                None => {}
            }
            if let Some(d) = b
                .open_for
                .as_deref()
                .and_then(|v| positive("circuitBreaker.openFor", v, &mut errors))
            {
                self.breaker_open_for = d;
            }
        }
        if let Some(image) = &spec.kubernetes_mcp_image {
            if image.trim().is_empty() {
                errors.push((
                    "kubernetesMcpImage".to_string(),
                    Problem::Invalid("must not be empty".into()),
                ));
            } else {
                self.kubernetes_mcp_image = image.trim().to_string();
            }
        }
        if let Some(r) = &spec.retention {
            self.apply_retention(r, &mut errors);
        }
        if let Some(n) = &spec.notifications {
            self.apply_notifications(n, &mut errors);
        }
        if let Some(enabled) = spec.scoring.as_ref().and_then(|s| s.enabled) {
            self.scoring_enabled = enabled;
        }
        if let Some(m) = &spec.memory {
            self.apply_memory(m, &mut errors);
        }
        if let Some(p) = &spec.pricing {
            self.apply_pricing(p, &mut errors);
        }
        if let Some(b) = spec.budget {
            match (b.max_cost_usd, b.max_tokens) {
                (Some(usd), _) if !usd.is_finite() || usd < 0.0 => errors.push((
                    "budget.maxCostUsd".to_string(),
                    Problem::Invalid("must be a number of US dollars, 0 or more".into()),
                )),
                (_, Some(tokens)) if tokens < 1 => errors.push((
                    "budget.maxTokens".to_string(),
                    Problem::Invalid("must be at least 1".into()),
                )),
                _ => self.budget = b,
            }
        }
        match spec.max_cost_usd_per_day {
            Some(usd) if !usd.is_finite() || usd < 0.0 => errors.push((
                "maxCostUsdPerDay".to_string(),
                Problem::Invalid("must be a number of US dollars, 0 or more".into()),
            )),
            Some(usd) => self.max_cost_usd_per_day = Some(usd),
            None => {}
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    fn apply_memory(&mut self, spec: &MemorySpec, errors: &mut Vec<(String, Problem)>) {
        let m = &mut self.memory;
        if let Some(enabled) = spec.enabled {
            m.enabled = enabled;
        }
        if let Some(n) = spec.max_injected {
            if n > DEFAULT_MEMORY_MAX_INJECTED {
                errors.push((
                    "memory.maxInjected".to_string(),
                    Problem::Invalid(format!(
                        "must be between 0 and {DEFAULT_MEMORY_MAX_INJECTED}"
                    )),
                ));
            } else {
                m.max_injected = n;
            }
        }
        for (field, value, target) in [
            (
                "memory.similarityFloor",
                spec.similarity_floor,
                &mut m.similarity_floor,
            ),
            ("memory.textFloor", spec.text_floor, &mut m.text_floor),
        ] {
            match value {
                Some(v) if (0.0..=1.0).contains(&v) => *target = v,
                Some(_) => errors.push((
                    field.to_string(),
                    Problem::Invalid("must be between 0 and 1".into()),
                )),
                None => {}
            }
        }
        if let Some(r) = spec.require_review {
            m.require_review = r;
        }
        if let Some(p) = &spec.project {
            if p.trim().is_empty() {
                errors.push((
                    "memory.project".to_string(),
                    Problem::Invalid("must not be empty".into()),
                ));
            } else {
                m.project = p.trim().to_string();
            }
        }
        if let Some(e) = &spec.embedding {
            if e.llm_provider.trim().is_empty() || e.model.trim().is_empty() {
                errors.push((
                    "memory.embedding".to_string(),
                    Problem::Invalid("needs both llmProvider and model".into()),
                ));
            } else {
                m.embedding = Some(EmbeddingSettings {
                    llm_provider: e.llm_provider.trim().to_string(),
                    model: e.model.trim().to_string(),
                });
            }
        }
    }

    fn apply_pricing(&mut self, spec: &PricingSpec, errors: &mut Vec<(String, Problem)>) {
        if let Some(enabled) = spec.enabled {
            self.pricing.enabled = enabled;
        }
        for (model, price) in &spec.models {
            match price.problem() {
                Some(problem) => errors.push((
                    format!("pricing.models[{model:?}]"),
                    Problem::Invalid(problem),
                )),
                None => {
                    self.pricing.models.insert(model.clone(), price.clone());
                }
            }
        }
        if let Some(url) = &spec.catalog_url {
            if url.starts_with("https://") || url.starts_with("http://") {
                self.pricing.catalog_url = Some(url.clone());
            } else {
                errors.push((
                    "pricing.catalogUrl".to_string(),
                    Problem::Invalid("must be an http(s) URL".into()),
                ));
            }
        }
    }

    fn apply_retention(&mut self, spec: &RetentionSpec, errors: &mut Vec<(String, Problem)>) {
        for (field, value, target) in [
            (
                "retention.hideAfter",
                &spec.hide_after,
                &mut self.retention.hide_after,
            ),
            (
                "retention.purgeAfter",
                &spec.purge_after,
                &mut self.retention.purge_after,
            ),
            (
                "retention.eventTtl",
                &spec.event_ttl,
                &mut self.retention.event_ttl,
            ),
        ] {
            if let Some(v) = value {
                match crate::model::parse_duration(v) {
                    Ok(d) => *target = (!d.is_zero()).then_some(d),
                    Err(e) => errors.push((field.to_string(), Problem::Duration(e))),
                }
            }
        }
        if let Some(d) = spec
            .interval
            .as_deref()
            .and_then(|v| positive("retention.interval", v, errors))
        {
            self.retention_interval = d;
        }
    }

    fn apply_notifications(
        &mut self,
        spec: &NotificationsSpec,
        errors: &mut Vec<(String, Problem)>,
    ) {
        let n = &mut self.notifications;
        let mut url = |field: &str, value: &str| -> Option<String> {
            let value = value.trim().trim_end_matches('/');
            if value.starts_with("http://") || value.starts_with("https://") {
                Some(value.to_string())
            } else {
                errors.push((
                    field.to_string(),
                    Problem::Invalid(format!("{value:?} is not an http(s) URL")),
                ));
                None
            }
        };
        if let Some(v) = &spec.dashboard_url {
            n.dashboard_url = url("notifications.dashboardUrl", v);
        }
        if let Some(slack) = &spec.slack {
            if let Some(c) = &slack.channel {
                // An empty channel switches notifications off.
                n.slack_channel = Some(c.trim().to_string()).filter(|c| !c.is_empty());
            }
            if let Some(start) = slack.notify_start {
                n.slack_notify_start = start;
            }
            if let Some(v) = &slack.api_url
                && let Some(u) = url("notifications.slack.apiUrl", v)
            {
                n.slack_api_url = u;
            }
        }
    }
}

/// `value` as a positive Go duration, else a problem of `field`.
fn positive(field: &str, value: &str, errors: &mut Vec<(String, Problem)>) -> Option<Duration> {
    match crate::model::parse_duration(value) {
        Ok(d) if !d.is_zero() => Some(d),
        Ok(_) => {
            errors.push((
                field.to_string(),
                Problem::Invalid("must be positive".into()),
            ));
            None
        }
        Err(e) => {
            errors.push((field.to_string(), Problem::Duration(e)));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_defaults_match_the_seed() {
        let d = Defaults::default();
        assert_eq!(d.max_iterations, 20);
        assert_eq!(d.iteration_timeout, Duration::from_secs(120));
        assert_eq!(d.session_timeout, Duration::from_secs(900));
        assert_eq!(d.success_policy, None);
        assert!(d.alert_masking.enabled);
        assert_eq!(d.alert_masking.pattern_group, "security");
    }

    #[test]
    fn memory_switches_from_the_document_and_the_environment() {
        let spec: DefaultsSpec = serde_yaml::from_str(
            "memory: {enabled: true, maxInjected: 3, similarityFloor: 0.8, requireReview: true, \
             project: payments, embedding: {llmProvider: gemini, model: text-embedding-004}}",
        )
        .unwrap();
        let mut d = Defaults::default();
        d.apply(&spec).unwrap();
        assert!(d.memory.enabled && d.memory.require_review);
        assert_eq!(d.memory.max_injected, 3);
        assert_eq!(d.memory.similarity_floor, 0.8);
        assert_eq!(d.memory.project, "payments");
        // Runners get the same switches.
        let env: std::collections::BTreeMap<_, _> = d.to_env().into_iter().collect();
        let back = DefaultsSpec::from_env(&|n| env.get(n).cloned()).unwrap();
        let mut again = Defaults::default();
        again.apply(&back).unwrap();
        assert_eq!(again.memory, d.memory);

        // Out of range: precise errors, nothing applied.
        let bad: DefaultsSpec =
            serde_yaml::from_str("memory: {maxInjected: 9, similarityFloor: 1.5, project: \" \"}")
                .unwrap();
        let errors = Defaults::default().apply(&bad).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "memory.maxInjected",
                "memory.similarityFloor",
                "memory.project"
            ]
        );
        // Half an embedding provider is refused where it is read.
        let half = DefaultsSpec::from_env(&|n| {
            (n == env::MEMORY_EMBEDDING_PROVIDER).then(|| "gemini".to_string())
        });
        assert!(half.is_err());
    }

    #[test]
    fn env_overrides_every_field() {
        let lookup = |name: &str| -> Option<String> {
            Some(
                match name {
                    env::LLM_PROVIDER => "openai-default",
                    env::ITERATION_STRATEGY => "react",
                    env::MAX_ITERATIONS => "7",
                    env::ITERATION_TIMEOUT => "90s",
                    env::SUCCESS_POLICY => "all",
                    env::SESSION_TIMEOUT => "1h",
                    env::ALERT_MASKING_ENABLED => "false",
                    env::ALERT_MASKING_GROUP => "basic",
                    env::MAX_CONCURRENT_SESSIONS => "3",
                    env::RUNBOOK_DOMAINS => "wiki.example.com, *.docs.example.com",
                    env::RUNBOOK_TOKEN_DOMAINS => "github.example.com",
                    env::KUBERNETES_MCP_IMAGE => "registry.example.com/k8s-mcp:1",
                    env::CIRCUIT_BREAKER_THRESHOLD => "1",
                    env::CIRCUIT_BREAKER_OPEN_FOR => "5m",
                    _ => return None,
                }
                .to_string(),
            )
        };
        let spec = DefaultsSpec::from_env(&lookup).unwrap();
        let mut d = Defaults::default();
        d.apply(&spec).unwrap();
        assert_eq!(d.llm_provider, "openai-default");
        assert_eq!(d.iteration_strategy, IterationStrategy::React);
        assert_eq!(d.max_iterations, 7);
        assert_eq!(d.iteration_timeout, Duration::from_secs(90));
        assert_eq!(d.success_policy, Some(SuccessPolicy::All));
        assert_eq!(d.session_timeout, Duration::from_secs(3600));
        assert!(!d.alert_masking.enabled);
        assert_eq!(d.alert_masking.pattern_group, "basic");
        assert_eq!(d.max_concurrent_sessions, 3);
        assert_eq!(
            d.runbook_domains,
            ["wiki.example.com", "*.docs.example.com"]
        );
        assert_eq!(d.kubernetes_mcp_image, "registry.example.com/k8s-mcp:1");
        assert_eq!(d.runbook_token_domains, ["github.example.com"]);
        assert_eq!(d.breaker_failure_threshold, 1);
        assert_eq!(d.breaker_open_for, Duration::from_secs(300));
    }

    #[test]
    fn defaults_survive_the_trip_through_the_environment() {
        let mut d = Defaults::default();
        d.apply(&DefaultsSpec {
            max_iterations: Some(7),
            success_policy: Some(SuccessPolicy::All),
            session_timeout: Some("1h30m".into()),
            runbook_domains: Some(vec!["wiki.example.com".into()]),
            kubernetes_mcp_image: Some("mirror.example.com/k8s-mcp:2".into()),
            circuit_breaker: Some(CircuitBreakerSpec {
                failure_threshold: Some(2),
                open_for: Some("90s".into()),
            }),
            ..Default::default()
        })
        .unwrap();
        let vars = d.to_env();
        let lookup = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        };
        let mut back = Defaults::default();
        back.apply(&DefaultsSpec::from_env(&lookup).unwrap())
            .unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn bad_env_values_name_the_variable() {
        let lookup = |name: &str| -> Option<String> {
            match name {
                env::MAX_ITERATIONS => Some("many".into()),
                env::ITERATION_STRATEGY => Some("reactive".into()),
                env::SESSION_TIMEOUT => Some("15 minutes".into()),
                _ => None,
            }
        };
        let errors = DefaultsSpec::from_env(&lookup).unwrap_err();
        let text: Vec<String> = errors.iter().map(|(l, p)| format!("{l}: {p}")).collect();
        assert_eq!(text.len(), 3, "{text:?}");
        assert!(
            text.iter().any(|t| t.starts_with(env::MAX_ITERATIONS)),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.starts_with(env::ITERATION_STRATEGY) && t.contains("reactive"))
        );
        assert!(text.iter().any(|t| t.starts_with(env::SESSION_TIMEOUT)));
    }

    #[test]
    fn zero_limits_are_rejected() {
        let mut d = Defaults::default();
        let spec = DefaultsSpec {
            max_iterations: Some(0),
            max_concurrent_sessions: Some(0),
            iteration_timeout: Some("0s".into()),
            ..Default::default()
        };
        let errors = d.apply(&spec).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            ["maxIterations", "iterationTimeout", "maxConcurrentSessions"]
        );
        assert_eq!(d, Defaults::default());
    }
}
