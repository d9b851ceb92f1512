//! Alertmanager bridge: turns webhook notifications (payload version 4) into
//! `Alert` resources.
//!
//! - one Alert per **firing** alert, named `am-<fingerprint>` (DNS-1123 safe);
//!   while an Alert for a fingerprint is active (not terminal) a repeat
//!   notification creates nothing. A terminal Alert with the same `startsAt`
//!   (same firing episode) also counts as a duplicate; a new episode gets
//!   `am-<fingerprint>-2`, `-3`, ...;
//! - alert type from a configurable label (default `alertname`); the
//!   operator picks the Chain through its `alertTypes`;
//! - `data` = labels, annotations, times, generator URL and fingerprint as
//!   YAML; `runbookUrl` from the `runbook_url` annotation; `source` =
//!   `alertmanager` + fingerprint;
//! - **resolved** alerts annotate their Alerts with
//!   `tarsy.dev/resolved-at` and, if configured, set `spec.cancel: true`;
//! - before creating an Alert, the rule set every entry point applies
//!   (`tarsy_config::Config::check_alert`; chain resolution only with
//!   [`BridgeConfig::require_chain`]): a refused alert is reported with the
//!   message the REST API and the admission webhook give;
//! - bearer-token auth (401), body and alert-count limits (413), precise 400s
//!   for malformed payloads;
//! - 200 with a per-alert report; 503 when the Kubernetes API failed for some
//!   alert, so Alertmanager retries (deduplication makes retries safe).

pub mod payload;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::{DateTime, SecondsFormat, Utc};
use futures::StreamExt;
use serde::Serialize;
use tarsy_config::{Config, Defaults, check_runbook_url};
use tarsy_core::{InvalidAlert, NoToolCatalog};
use tarsy_crds::{AlertSource, AlertSpec};
use tarsy_telemetry::BridgeOutcome;
use tokio::sync::OnceCell;

use crate::auth::BridgeAuth;
use crate::error::error;
use crate::resources::{ReadError, ResourceReader};
use crate::sink::{
    AlertRecord, AlertSink, CreateOutcome, DesiredAlert, FINGERPRINT_LABEL, RESOLVED_AT_ANNOTATION,
    SOURCE_LABEL, STARTS_AT_ANNOTATION, SinkError,
};
pub use payload::{AmAlert, AmStatus, PayloadError, WebhookPayload, parse_payload};

/// Path of the bridge endpoint.
pub const ALERTMANAGER_PATH: &str = "/alertmanager";

/// Bridge settings.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// Namespace the Alerts are created in.
    pub namespace: String,
    /// Label whose value is the alert type (default `alertname`).
    pub alert_type_label: String,
    /// Alert type for alerts without that label (default: none, the alert
    /// is rejected).
    pub default_alert_type: Option<String>,
    /// Annotation holding the runbook URL (default `runbook_url`).
    pub runbook_annotation: String,
    /// Set `spec.cancel: true` on a still-running Alert when Alertmanager
    /// reports it resolved (default false: the investigation completes).
    pub cancel_on_resolve: bool,
    /// Refuse alerts that do not resolve to exactly one Chain of the
    /// namespace (needs a [`ResourceReader`]; default false: the operator
    /// marks such Alerts Failed, and the admission webhook may deny them).
    pub require_chain: bool,
    /// Largest accepted body, in bytes (default 4 MiB) → 413.
    pub max_body_bytes: usize,
    /// Most alerts accepted in one notification (default 1000) → 413.
    /// Set Alertmanager's `max_alerts` at or below it.
    pub max_alerts_per_request: usize,
    /// Alerts of one notification processed concurrently (default 16).
    pub concurrency: usize,
}

impl BridgeConfig {
    /// Defaults for `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            alert_type_label: "alertname".into(),
            default_alert_type: None,
            runbook_annotation: "runbook_url".into(),
            cancel_on_resolve: false,
            require_chain: false,
            max_body_bytes: 4 * 1024 * 1024,
            max_alerts_per_request: 1000,
            concurrency: 16,
        }
    }
}

/// Counters since start.
#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    created: AtomicU64,
    duplicates: AtomicU64,
    resolved: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
}

/// A snapshot of the bridge's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BridgeStats {
    /// Notifications that passed authentication and parsing.
    pub requests: u64,
    /// Alerts created.
    pub created: u64,
    /// Firing alerts that matched an existing investigation.
    pub duplicates: u64,
    /// Resolved alerts processed.
    pub resolved: u64,
    /// Alerts refused for good (no type, no chain, API validation).
    pub rejected: u64,
    /// Alerts not processed because the API was unavailable.
    pub failed: u64,
}

/// Shared state of the bridge handler.
#[derive(Clone)]
pub struct BridgeState {
    config: Arc<BridgeConfig>,
    auth: Arc<BridgeAuth>,
    sink: Arc<dyn AlertSink>,
    resources: Option<Arc<dyn ResourceReader>>,
    counters: Arc<Counters>,
}

impl BridgeState {
    /// State writing to `sink`.
    pub fn new(config: BridgeConfig, auth: BridgeAuth, sink: Arc<dyn AlertSink>) -> Self {
        Self {
            config: Arc::new(config),
            auth: Arc::new(auth),
            sink,
            resources: None,
            counters: Arc::default(),
        }
    }

    /// Adds the reader of the namespace's Chains, used with
    /// [`BridgeConfig::require_chain`].
    pub fn with_resources(mut self, resources: Arc<dyn ResourceReader>) -> Self {
        self.resources = Some(resources);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &BridgeConfig {
        &self.config
    }

    /// Counters since start.
    pub fn stats(&self) -> BridgeStats {
        let c = &self.counters;
        BridgeStats {
            requests: c.requests.load(Ordering::Relaxed),
            created: c.created.load(Ordering::Relaxed),
            duplicates: c.duplicates.load(Ordering::Relaxed),
            resolved: c.resolved.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
        }
    }
}

/// The bridge's routes: `POST /alertmanager`.
pub fn router(state: BridgeState) -> Router {
    Router::new()
        .route(ALERTMANAGER_PATH, post(receive))
        .with_state(state)
}

/// What happened to one alert of a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NoticeOutcome {
    /// A new Alert was created.
    Created,
    /// An Alert for this firing episode exists already; nothing was created.
    Duplicate,
    /// Resolution recorded on the fingerprint's Alerts.
    Resolved,
    /// Resolved, but no Alert exists for the fingerprint.
    Unknown,
    /// Refused for good (see `message`).
    Rejected,
    /// Not processed: the Kubernetes API failed (the response is 503).
    Failed,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertResult {
    /// The Alertmanager fingerprint.
    pub fingerprint: String,
    /// `firing` or `resolved`.
    pub status: AmStatus,
    /// The alert type, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alert_type: Option<String>,
    /// What happened.
    pub outcome: NoticeOutcome,
    /// Alerts concerned (created, duplicate-of, annotated).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<String>,
    /// Alerts whose investigation was cancelled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cancelled: Vec<String>,
    /// Why (rejections, failures, duplicates, warnings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The response body of an accepted notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BridgeReport {
    /// Receiver of the notification.
    pub receiver: String,
    /// Group key of the notification.
    pub group_key: String,
    /// Alerts created.
    pub created: usize,
    /// Firing alerts already under investigation.
    pub duplicates: usize,
    /// Resolved alerts processed.
    pub resolved: usize,
    /// Alerts refused.
    pub rejected: usize,
    /// Alerts not processed (API failure).
    pub failed: usize,
    /// Alerts Alertmanager left out (`max_alerts`); they were not seen.
    pub truncated_alerts: u64,
    /// Per-alert results, in payload order.
    pub results: Vec<AlertResult>,
}

async fn receive(State(state): State<BridgeState>, headers: HeaderMap, body: Body) -> Response {
    if let Err(failure) = state.auth.check(&headers) {
        let mut resp = error(StatusCode::UNAUTHORIZED, failure.to_string());
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"tarsy-alertmanager\""),
        );
        return resp;
    }
    let max = state.config.max_body_bytes;
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "request body exceeds {max} bytes; lower max_alerts in the Alertmanager webhook receiver"
            ),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > max as u64) {
        return too_large();
    }
    let bytes = match axum::body::to_bytes(body, max).await {
        Ok(b) => b,
        Err(e) => {
            let inner = e.into_inner();
            if inner
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                return too_large();
            }
            return error(
                StatusCode::BAD_REQUEST,
                format!("cannot read request body: {inner}"),
            );
        }
    };
    let payload = match parse_payload(&bytes) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let limit = state.config.max_alerts_per_request;
    if payload.alerts.len() > limit {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "notification has {} alerts; at most {limit} are accepted per request (set max_alerts: {limit} in the Alertmanager webhook receiver)",
                payload.alerts.len()
            ),
        );
    }
    state.counters.requests.fetch_add(1, Ordering::Relaxed);
    let report = process(&state, &payload).await;
    let status = if report.failed > 0 {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (status, Json(report)).into_response()
}

/// Processes a parsed notification against the state's sink and returns the
/// report (also what the HTTP handler sends back).
pub async fn process(state: &BridgeState, payload: &WebhookPayload) -> BridgeReport {
    if payload.truncated_alerts > 0 {
        tracing::warn!(
            receiver = %payload.receiver,
            truncated = payload.truncated_alerts,
            "Alertmanager truncated this notification (max_alerts); the left-out alerts were not seen"
        );
    }
    let config = OnceCell::new();
    let ctx = Ctx {
        state,
        payload,
        config: &config,
    };
    // Futures collected first: a stream mapping borrowed alerts through a
    // closure trips a higher-ranked lifetime limitation of async fns.
    let pending: Vec<_> = payload.alerts.iter().map(|a| ctx.process_one(a)).collect();
    let results: Vec<AlertResult> = futures::stream::iter(pending)
        .buffered(state.config.concurrency.max(1))
        .collect()
        .await;
    let count = |o: NoticeOutcome| results.iter().filter(|r| r.outcome == o).count();
    let report = BridgeReport {
        receiver: payload.receiver.clone(),
        group_key: payload.group_key.clone(),
        created: count(NoticeOutcome::Created),
        duplicates: count(NoticeOutcome::Duplicate),
        resolved: count(NoticeOutcome::Resolved) + count(NoticeOutcome::Unknown),
        rejected: count(NoticeOutcome::Rejected),
        failed: count(NoticeOutcome::Failed),
        truncated_alerts: payload.truncated_alerts,
        results,
    };
    let c = &state.counters;
    c.created
        .fetch_add(report.created as u64, Ordering::Relaxed);
    c.duplicates
        .fetch_add(report.duplicates as u64, Ordering::Relaxed);
    c.resolved
        .fetch_add(report.resolved as u64, Ordering::Relaxed);
    c.rejected
        .fetch_add(report.rejected as u64, Ordering::Relaxed);
    c.failed.fetch_add(report.failed as u64, Ordering::Relaxed);
    let metrics = tarsy_telemetry::global();
    for r in &report.results {
        metrics.webhook_alert(match r.outcome {
            NoticeOutcome::Created => BridgeOutcome::Created,
            NoticeOutcome::Duplicate => BridgeOutcome::Duplicate,
            NoticeOutcome::Resolved | NoticeOutcome::Unknown => BridgeOutcome::Resolved,
            NoticeOutcome::Rejected => BridgeOutcome::Rejected,
            NoticeOutcome::Failed => BridgeOutcome::Failed,
        });
    }
    report
}

struct Ctx<'a> {
    state: &'a BridgeState,
    payload: &'a WebhookPayload,
    /// The namespace's Chains, read once per notification (`require_chain`).
    config: &'a OnceCell<Result<Config, ReadError>>,
}

impl Ctx<'_> {
    async fn process_one(&self, alert: &AmAlert) -> AlertResult {
        let mut result = AlertResult {
            fingerprint: alert.fingerprint.clone(),
            status: alert.status,
            alert_type: None,
            outcome: NoticeOutcome::Rejected,
            alerts: Vec::new(),
            cancelled: Vec::new(),
            message: None,
        };
        let Some(token) = fingerprint_token(&alert.fingerprint) else {
            result.message = Some("fingerprint is empty".into());
            return result;
        };
        let outcome = match alert.status {
            AmStatus::Firing => self.firing(alert, &token, &mut result).await,
            AmStatus::Resolved => self.resolved(alert, &token, &mut result).await,
        };
        if let Err(e) = outcome {
            result.outcome = if e.is_transient() {
                NoticeOutcome::Failed
            } else {
                NoticeOutcome::Rejected
            };
            result.message = Some(e.to_string());
            tracing::warn!(fingerprint = %alert.fingerprint, error = %e, "alert not processed");
        }
        result
    }

    async fn firing(
        &self,
        alert: &AmAlert,
        token: &str,
        result: &mut AlertResult,
    ) -> Result<(), SinkError> {
        let cfg = &self.state.config;
        let alert_type = alert
            .labels
            .get(&cfg.alert_type_label)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .or_else(|| cfg.default_alert_type.clone());
        let Some(alert_type) = alert_type else {
            refuse(
                result,
                alert,
                format!(
                    "{} (label `{}` is missing or empty and no default alert type is configured)",
                    InvalidAlert::EmptyAlertType,
                    cfg.alert_type_label
                ),
            );
            return Ok(());
        };
        result.alert_type = Some(alert_type.clone());
        let mut warnings = Vec::new();
        let spec = match build_spec(cfg, self.payload, alert, &alert_type, &mut warnings) {
            Ok(spec) => spec,
            Err(message) => {
                refuse(result, alert, message);
                return Ok(());
            }
        };
        if let Some(invalid) = self.invalid(&spec).await? {
            refuse(result, alert, invalid.to_string());
            return Ok(());
        }

        let base = format!("am-{token}");
        let starts_at = rfc3339(alert.starts_at);
        let existing = self.state.sink.find_by_fingerprint(token).await?;
        if let Some(active) = existing.iter().find(|r| r.is_active()) {
            result.outcome = NoticeOutcome::Duplicate;
            result.alerts = vec![active.name.clone()];
            result.message = Some("an investigation of this alert is still active".into());
            return Ok(());
        }
        if let Some(latest) = latest_episode(&existing, &base)
            && latest.annotations.get(STARTS_AT_ANNOTATION) == Some(&starts_at)
        {
            result.outcome = NoticeOutcome::Duplicate;
            result.alerts = vec![latest.name.clone()];
            result.message = Some(format!(
                "this firing episode (startsAt {starts_at}) was already investigated"
            ));
            return Ok(());
        }
        let name = next_name(&existing, &base);
        let new = DesiredAlert {
            name: name.clone(),
            labels: [
                (SOURCE_LABEL.to_string(), "alertmanager".to_string()),
                (FINGERPRINT_LABEL.to_string(), token.to_string()),
            ]
            .into(),
            annotations: [(STARTS_AT_ANNOTATION.to_string(), starts_at)].into(),
            spec,
        };
        result.alerts = vec![name];
        match self.state.sink.create_if_absent(&new).await? {
            CreateOutcome::Created => {
                result.outcome = NoticeOutcome::Created;
                if !warnings.is_empty() {
                    result.message = Some(warnings.join("; "));
                }
            }
            CreateOutcome::AlreadyExists => {
                // Another notification (or bridge replica) won the race.
                result.outcome = NoticeOutcome::Duplicate;
                result.message = Some("created concurrently by another notification".into());
            }
        }
        Ok(())
    }

    async fn resolved(
        &self,
        alert: &AmAlert,
        token: &str,
        result: &mut AlertResult,
    ) -> Result<(), SinkError> {
        let existing = self.state.sink.find_by_fingerprint(token).await?;
        if existing.is_empty() {
            result.outcome = NoticeOutcome::Unknown;
            result.message = Some("no Alert exists for this fingerprint".into());
            return Ok(());
        }
        let resolved_at = rfc3339(alert.ends_at().unwrap_or_else(Utc::now));
        for record in existing
            .iter()
            .filter(|r| !r.annotations.contains_key(RESOLVED_AT_ANNOTATION))
        {
            self.state
                .sink
                .annotate(&record.name, RESOLVED_AT_ANNOTATION, &resolved_at)
                .await?;
            result.alerts.push(record.name.clone());
            if self.state.config.cancel_on_resolve && record.is_active() && !record.cancel {
                self.state.sink.cancel(&record.name).await?;
                result.cancelled.push(record.name.clone());
            }
        }
        result.outcome = NoticeOutcome::Resolved;
        if result.alerts.is_empty() {
            result.message = Some("already recorded as resolved".into());
        }
        Ok(())
    }

    /// The rule of a valid alert `spec` breaks, if any: the rule set every
    /// entry point applies (the admission webhook would deny the Alert with
    /// the same message). Chain resolution needs the namespace's Chains, so
    /// it is checked only with [`BridgeConfig::require_chain`]; otherwise
    /// such an Alert is created and fails with a condition (or is denied).
    async fn invalid(&self, spec: &AlertSpec) -> Result<Option<InvalidAlert>, SinkError> {
        let submission = spec.submission("");
        let reader = match &self.state.resources {
            Some(reader) if self.state.config.require_chain => reader,
            _ => return Ok(tarsy_config::check_alert_fields(&submission).err()),
        };
        let ns = &self.state.config.namespace;
        let config = self
            .config
            .get_or_init(|| async {
                reader.chains(ns).await.map(|chains| {
                    tarsy_crds::config::from_resources(Defaults::default(), &chains, &[], &[], &[])
                })
            })
            .await;
        match config {
            Ok(config) => Ok(config.check_alert(&submission, &NoToolCatalog).err()),
            Err(e) => Err(SinkError::Unavailable {
                message: e.to_string(),
            }),
        }
    }
}

/// The DNS-1123 and label-value safe form of a fingerprint: the fingerprint
/// itself when it is lowercase hex of at most 40 characters (Alertmanager's
/// are 16), else `h` + a stable 64-bit hash. None when empty.
pub fn fingerprint_token(fingerprint: &str) -> Option<String> {
    let fp = fingerprint.trim();
    if fp.is_empty() {
        return None;
    }
    let lower = fp.to_ascii_lowercase();
    if lower.len() <= 40 && lower.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Some(lower);
    }
    // FNV-1a: stable across Rust versions and processes, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in fp.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    Some(format!("h{h:016x}"))
}

/// Episode number of an Alert name: `base` → 1, `base-N` → N.
fn episode(name: &str, base: &str) -> Option<u32> {
    if name == base {
        return Some(1);
    }
    name.strip_prefix(base)?.strip_prefix('-')?.parse().ok()
}

fn latest_episode<'a>(existing: &'a [AlertRecord], base: &str) -> Option<&'a AlertRecord> {
    existing
        .iter()
        .filter_map(|r| episode(&r.name, base).map(|n| (n, r)))
        .max_by_key(|(n, _)| *n)
        .map(|(_, r)| r)
}

fn next_name(existing: &[AlertRecord], base: &str) -> String {
    let taken: BTreeSet<u32> = existing
        .iter()
        .filter_map(|r| episode(&r.name, base))
        .collect();
    match (1u32..).find(|n| !taken.contains(n)) {
        Some(1) | None => base.to_string(),
        Some(n) => format!("{base}-{n}"),
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// The readable YAML document stored in `spec.data`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AlertData<'a> {
    status: &'static str,
    labels: &'a std::collections::BTreeMap<String, String>,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    annotations: &'a std::collections::BTreeMap<String, String>,
    starts_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ends_at: Option<String>,
    #[serde(rename = "generatorURL", skip_serializing_if = "str::is_empty")]
    generator_url: &'a str,
    fingerprint: &'a str,
    alertmanager: AmContext<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AmContext<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    receiver: &'a str,
    #[serde(rename = "externalURL", skip_serializing_if = "str::is_empty")]
    external_url: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    group_key: &'a str,
}

/// Builds the Alert spec (checked by [`Ctx::invalid`] afterwards); `Err` is
/// a rejection message. Soft problems go to `warnings`.
fn build_spec(
    cfg: &BridgeConfig,
    payload: &WebhookPayload,
    alert: &AmAlert,
    alert_type: &str,
    warnings: &mut Vec<String>,
) -> Result<AlertSpec, String> {
    let doc = AlertData {
        status: alert.status.as_str(),
        labels: &alert.labels,
        annotations: &alert.annotations,
        starts_at: rfc3339(alert.starts_at),
        ends_at: alert.ends_at().map(rfc3339),
        generator_url: &alert.generator_url,
        fingerprint: &alert.fingerprint,
        alertmanager: AmContext {
            receiver: &payload.receiver,
            external_url: &payload.external_url,
            group_key: &payload.group_key,
        },
    };
    let data = serde_yaml::to_string(&doc).map_err(|e| format!("cannot render alert data: {e}"))?;
    // A bad runbook annotation costs the alert its runbook, not its
    // investigation: dropped, with the rule's message as a warning.
    let runbook_url = alert
        .annotations
        .get(&cfg.runbook_annotation)
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .and_then(|url| match check_runbook_url(url) {
            Ok(()) => Some(url.to_string()),
            Err(e) => {
                warnings.push(format!(
                    "{e}; annotation `{}` ignored",
                    cfg.runbook_annotation
                ));
                None
            }
        });
    let fingerprint = alert.fingerprint.trim();
    Ok(AlertSpec {
        alert_type: alert_type.to_string(),
        data,
        chain_ref: None,
        runbook_url,
        mcp_selection: None,
        author: Some("alertmanager".into()),
        source: Some(AlertSource {
            system: "alertmanager".into(),
            fingerprint: (fingerprint.chars().count() <= 253).then(|| fingerprint.to_string()),
        }),
        cancel: None,
    })
}

/// Records why a firing alert was not turned into an Alert, and says so in
/// the log (the response alone is only seen by Alertmanager).
fn refuse(result: &mut AlertResult, alert: &AmAlert, message: String) {
    tracing::warn!(fingerprint = %alert.fingerprint, reason = %message, "alert refused");
    result.message = Some(message);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str) -> AlertRecord {
        AlertRecord {
            name: name.into(),
            phase: None,
            annotations: Default::default(),
            cancel: false,
        }
    }

    #[test]
    fn fingerprint_tokens_are_dns_safe_and_stable() {
        assert_eq!(fingerprint_token("0AbC12").as_deref(), Some("0abc12"));
        assert_eq!(fingerprint_token("  "), None);
        let odd = fingerprint_token("Some/Weird Fingerprint").unwrap();
        assert_eq!(odd, fingerprint_token("Some/Weird Fingerprint").unwrap());
        assert!(odd.starts_with('h') && odd.len() == 17, "{odd}");
        assert!(
            odd.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        );
        assert_ne!(odd, fingerprint_token("Some/Weird Fingerprint2").unwrap());
    }

    #[test]
    fn episodes_are_numbered_after_the_base_name() {
        let base = "am-ab";
        assert_eq!(next_name(&[], base), "am-ab");
        assert_eq!(next_name(&[rec("am-ab")], base), "am-ab-2");
        assert_eq!(
            next_name(&[rec("am-ab"), rec("am-ab-2"), rec("am-abc")], base),
            "am-ab-3"
        );
        let all = [rec("am-ab-3"), rec("am-ab"), rec("am-ab-2")];
        assert_eq!(latest_episode(&all, base).unwrap().name, "am-ab-3");
    }
}
