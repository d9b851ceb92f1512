//! REST handlers.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::header::CONTENT_LENGTH;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tarsy_core::{
    ConversationMessage, Cost, InvalidAlert, McpSelection, SessionStatus, TimelineEvent,
};
use tarsy_store::{
    AgentExecution, LlmInteraction, McpInteraction, Session, SessionFilter, SessionScore,
    SessionSort, SessionSortKey, SessionSummary, SessionTrace, Stage, StoreError,
};
use utoipa::{IntoParams, ToSchema};

use crate::control::{
    CancelError, CancelOutcome, ChatError, ChatSubmission, DependencyHealth, McpServerHealth,
    NewAlert, ScoreError, SubmitError, SystemWarning,
};
use crate::error::{ApiError, ApiPath, ApiResult, ErrorBody};
use crate::system::{AlertObject, ExecutionObject, SessionObjects, SystemConfiguration};
use crate::{AppState, author};

/// Default and largest page sizes of the session list.
const DEFAULT_PAGE_SIZE: i64 = 20;
const MAX_PAGE_SIZE: i64 = 100;
/// How long `/health` waits for the database.
const HEALTH_DB_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a session read waits for its Kubernetes objects (cluster mode)
/// before answering without them.
const CLUSTER_OBJECTS_TIMEOUT: Duration = Duration::from_secs(3);

// ------------------------------------------------------------ helpers

/// Parses a JSON body, turning serde's error into a precise 400 (syntax
/// errors with line and column; missing, unknown or mistyped fields by name).
pub(crate) fn parse_body<T: DeserializeOwned>(body: &[u8], what: &str) -> ApiResult<T> {
    serde_json::from_slice(body).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Eof if body.iter().all(u8::is_ascii_whitespace) => {
                ApiError::bad_request(format!("the request body is empty; expected a JSON {what}"))
            }
            Category::Syntax | Category::Eof | Category::Io => {
                ApiError::bad_request(format!("invalid JSON: {e}"))
            }
            // Valid JSON of the wrong shape: say which shape is expected.
            Category::Data if body.trim_ascii_start().first() != Some(&b'{') => {
                ApiError::bad_request(format!(
                    "the request body must be a JSON object (a {what}), not {}",
                    json_kind(body)
                ))
            }
            Category::Data => ApiError::bad_request(format!("invalid {what}: {e}")),
        }
    })
}

/// What a JSON document is, for messages ("an array", "a string", ...).
fn json_kind(body: &[u8]) -> &'static str {
    match body.trim_ascii_start().first() {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// Reads a request body of at most `limit` bytes: 413 at once when the
/// declared length is larger (nothing is read), 413 when a body without a
/// declared length grows past it, 400 when it cannot be read.
pub(crate) async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> ApiResult<Bytes> {
    let too_large = || ApiError::too_large(format!("request body exceeds the {limit}-byte limit"));
    if let Some(declared) = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        && declared > limit as u64
    {
        return Err(too_large());
    }
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(err) = source {
            if err.is::<http_body_util::LengthLimitError>() {
                return too_large();
            }
            source = err.source();
        }
        ApiError::bad_request(format!("cannot read the request body: {e}"))
    })
}

/// Chat is for sessions whose investigation has finished (not cancelled).
fn chat_available(status: SessionStatus) -> bool {
    matches!(
        status,
        SessionStatus::Completed | SessionStatus::Failed | SessionStatus::TimedOut
    )
}

/// Unknown routes answer JSON too.
pub(crate) async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!("no route for {}", uri.path()))
}

/// A route that exists, asked with a method it does not serve.
pub(crate) async fn method_not_allowed(method: axum::http::Method, uri: Uri) -> ApiError {
    ApiError::method_not_allowed(format!("{method} is not allowed on {}", uri.path()))
}

// ------------------------------------------------------------ health

/// Overall state of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum HealthStatus {
    /// Everything answers.
    Healthy,
    /// The database answers, but there are system warnings, or an MCP server
    /// or a dependency failed its last check.
    Degraded,
    /// The database does not answer (HTTP 503).
    Unhealthy,
}

/// Whether the database answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DatabaseStatus {
    /// It answered.
    Ok,
    /// It failed or did not answer in time.
    Error,
}

/// The database backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DatabaseBackend {
    /// PostgreSQL.
    Postgres,
    /// SQLite (local mode).
    Sqlite,
}

/// The database part of `/health`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DatabaseHealth {
    /// Whether it answered.
    status: DatabaseStatus,
    /// Which database.
    backend: DatabaseBackend,
    /// Sessions in progress (when it answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    sessions_in_progress: Option<i64>,
    /// Why it did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The MCP part of `/health`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct McpHealth {
    /// Every MCP server passed its last check.
    healthy: bool,
    /// Last check of each MCP server, by name.
    servers: BTreeMap<String, McpServerHealth>,
}

/// Live WebSocket use.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WebSocketStats {
    /// Open connections to this process.
    connections: usize,
    /// Channel subscriptions of this process.
    subscriptions: usize,
}

/// Body of `GET /health`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Health {
    /// Overall state.
    status: HealthStatus,
    /// The server's version.
    version: &'static str,
    /// The database.
    database: DatabaseHealth,
    /// Services the API depends on besides its database (cluster mode:
    /// `kubernetes`), by name.
    dependencies: BTreeMap<String, DependencyHealth>,
    /// MCP servers.
    mcp: McpHealth,
    /// Operational warnings.
    warnings: Vec<SystemWarning>,
    /// WebSocket use.
    websocket: WebSocketStats,
}

/// `GET /health`.
#[utoipa::path(
    get,
    path = "/health",
    tag = "system",
    summary = "Health of the service",
    responses(
        (status = 200, description = "The database answers: `healthy`, or `degraded` \
            (system warnings, or an MCP server or dependency failing its last check).", body = Health),
        (status = 503, description = "The database does not answer, or does not take a write (a full disk): `unhealthy`.", body = Health),
    )
)]
pub(crate) async fn health(State(api): State<AppState>) -> Response {
    let db = tokio::time::timeout(HEALTH_DB_TIMEOUT, api.store.count_in_progress()).await;
    let backend = match api.store.backend() {
        tarsy_store::BackendKind::Postgres => DatabaseBackend::Postgres,
        tarsy_store::BackendKind::Sqlite => DatabaseBackend::Sqlite,
    };
    let (sessions_in_progress, mut error) = match db {
        Ok(Ok(in_progress)) => (Some(in_progress), None),
        Ok(Err(e)) => (None, Some(e.to_string())),
        Err(_) => (None, Some("no answer within 5 s".to_string())),
    };
    // A database that answers reads may still refuse writes (a full disk):
    // investigations would stall, so it is as unhealthy as one that is down.
    if error.is_none() {
        error = match tokio::time::timeout(HEALTH_DB_TIMEOUT, api.store.probe_write()).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) if e.is_disk_full() => Some(format!("the disk is full: {e}")),
            Ok(Err(e)) => Some(format!("writes fail: {e}")),
            Err(_) => Some("a write got no answer within 5 s".to_string()),
        };
    }
    let db_ok = error.is_none();
    let database = DatabaseHealth {
        status: if db_ok {
            DatabaseStatus::Ok
        } else {
            DatabaseStatus::Error
        },
        backend,
        sessions_in_progress,
        error,
    };
    let mut warnings = api
        .warnings
        .as_ref()
        .map(|w| w.warnings())
        .unwrap_or_default();
    // Warnings any process raised through the store (a runner pod that could
    // not fetch a runbook, say); a database problem is `database`'s to report.
    if db_ok
        && let Ok(Ok(stored)) = tokio::time::timeout(
            HEALTH_DB_TIMEOUT,
            api.store.active_system_warnings(chrono::Utc::now()),
        )
        .await
    {
        warnings.extend(stored.into_iter().map(|w| SystemWarning {
            id: w.id,
            category: w.category,
            message: w.message,
            details: w.details,
            server_id: None,
            created_at: w.updated_at,
        }));
    }
    let servers = api
        .mcp_health
        .as_ref()
        .map(|h| h.statuses())
        .unwrap_or_default();
    let mcp_healthy = servers.values().all(|s| s.healthy);
    let dependencies = api
        .dependencies
        .as_ref()
        .map(|d| d.dependencies())
        .unwrap_or_default();
    let dependencies_ok = dependencies.values().all(|d| d.is_ok());
    // Only the database makes the API unusable (503, out of the Service);
    // the rest is degraded service worth a look.
    let status = if !db_ok {
        HealthStatus::Unhealthy
    } else if !warnings.is_empty() || !mcp_healthy || !dependencies_ok {
        HealthStatus::Degraded
    } else {
        HealthStatus::Healthy
    };
    let body = Health {
        status,
        version: env!("CARGO_PKG_VERSION"),
        database,
        dependencies,
        mcp: McpHealth {
            healthy: mcp_healthy,
            servers,
        },
        warnings,
        websocket: WebSocketStats {
            connections: api.ws_connections.load(Ordering::Relaxed),
            subscriptions: api.hub.bus().subscription_count(),
        },
    };
    let code = if db_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body)).into_response()
}

// ------------------------------------------------------------ alerts

/// The JSON Schema `pattern` of a text that is not blank, as the
/// `#[schema(pattern)]` below spell it (utoipa takes only a literal): a
/// character that is not whitespace as `str::trim` sees it, listed, for
/// regex engines disagree on `\s`.
#[cfg(test)]
const NOT_BLANK: &str =
    "[^\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]";

/// Body of `POST /api/v1/alerts`. Unknown fields are refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "alert_type": "PodCrashLooping",
    "data": {"namespace": "shop", "pod": "checkout-api-7d9f", "reason": "CrashLoopBackOff"}
}))]
pub(crate) struct AlertRequest {
    /// Selects the chain: the one whose alert types contain it (trimmed;
    /// at most 253 characters).
    #[schema(
        min_length = 1,
        max_length = 253,
        pattern = "[^\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]"
    )]
    alert_type: String,
    /// The alert payload: a string, or any other JSON value (stored as its
    /// JSON text). Not null, not empty; at most 1 MiB.
    data: Value,
    /// Run this chain instead of the one the alert type selects.
    #[serde(default)]
    #[schema(max_length = 253)]
    chain: Option<String>,
    /// An `http://` or `https://` runbook included in prompts (at most 2048
    /// characters).
    #[serde(default)]
    #[schema(max_length = 2048)]
    runbook_url: Option<String>,
    /// Replaces the chain's MCP servers for this alert.
    #[serde(default)]
    mcp_selection: Option<McpSelection>,
}

/// Answer of `POST /api/v1/alerts`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AlertResponse {
    /// The new session.
    session_id: String,
    /// The chain that will run it.
    chain_id: String,
    /// Its status (`pending`).
    status: SessionStatus,
    /// Where to follow it.
    message: &'static str,
}

/// `POST /api/v1/alerts`.
#[utoipa::path(
    post,
    path = "/api/v1/alerts",
    tag = "alerts",
    summary = "Submit an alert",
    description = "Creates a pending session that investigates the alert.",
    request_body(content = AlertRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "Accepted: the session is created.", body = AlertResponse),
        (status = 400, description = "Malformed JSON; a missing, unknown or mistyped field; \
            `data: null`; an alert breaking a rule of a valid alert, with the message the \
            admission webhook and the Alertmanager bridge give: an empty or over-long \
            `alert_type`, an over-long `chain`, empty `data`, a bad `runbook_url` or \
            `mcp_selection`, an unknown alert type, chain, MCP server or tool, several chains \
            for the type.", body = ErrorBody),
        (status = 413, description = "`data` over 1 MiB, or the body over its limit.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
        (status = 503, description = "The orchestrator cannot take work now, or the database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
    )
)]
pub(crate) async fn submit_alert(
    State(api): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<AlertResponse>)> {
    let body = read_body(&headers, body, api.alert_body_limit()).await?;
    let request: AlertRequest = parse_body(&body, "alert")?;
    // Only the request's shape is checked here; whether the alert is valid
    // is the rule set's call (`tarsy_config::Config::check_alert`), which the
    // control applies in either mode, as the admission webhook and the
    // Alertmanager bridge do.
    let data = match request.data {
        Value::String(s) => s,
        Value::Null => return Err(ApiError::bad_request("data must not be null")),
        other => other.to_string(),
    };
    let accepted = api
        .control
        .submit_alert(NewAlert {
            alert_type: request.alert_type.trim().to_string(),
            data,
            chain: non_empty(request.chain),
            runbook_url: non_empty(request.runbook_url),
            mcp_selection: request.mcp_selection,
            author: author(&headers, api.config.trust_forwarded_identity),
        })
        .await
        .map_err(|e| match e {
            SubmitError::Invalid(InvalidAlert::DataTooLarge { .. }) => {
                ApiError::too_large(e.to_string())
            }
            SubmitError::Invalid(_) | SubmitError::Refused(_) => {
                ApiError::bad_request(e.to_string())
            }
            SubmitError::Unavailable(m) => ApiError::unavailable(m),
            SubmitError::Internal(m) => ApiError::internal(m),
        })?;
    Ok((
        StatusCode::ACCEPTED,
        Json(AlertResponse {
            session_id: accepted.session_id,
            chain_id: accepted.chain_id,
            status: accepted.status,
            message: "alert accepted; follow the session over /api/v1/ws or GET /api/v1/sessions/{id}",
        }),
    ))
}

/// A trimmed text, `None` when absent or blank.
fn non_empty(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

// ------------------------------------------------------------ sessions

/// Query of `GET /api/v1/sessions`; unknown parameters are refused. Every
/// value is read as text so that a bad one gets a message naming the
/// parameter; `value_type` says what is accepted.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Only sessions of these statuses (comma-separated).
    #[param(value_type = Option<Vec<SessionStatus>>, inline, style = Form, explode = false)]
    status: Option<String>,
    /// Exact alert type.
    alert_type: Option<String>,
    /// Exact chain.
    chain_id: Option<String>,
    /// Exact author.
    author: Option<String>,
    /// Case-insensitive substring of the id, alert type, alert data, final
    /// analysis or executive summary.
    q: Option<String>,
    /// Page, from 1 (default 1).
    #[param(value_type = Option<i32>, minimum = 1)]
    page: Option<String>,
    /// Sessions per page (default 20).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100)]
    page_size: Option<String>,
    /// Include soft-deleted sessions.
    #[param(value_type = Option<bool>)]
    include_deleted: Option<String>,
    /// Only failed and timed-out sessions, and completed ones in which an
    /// investigation agent failed or timed out or the executive summary
    /// could not be written.
    #[param(value_type = Option<bool>)]
    needs_attention: Option<String>,
    /// Order by this column (default `created_at`); ties by id; missing
    /// values last.
    #[param(value_type = Option<SessionSortKey>, inline)]
    sort: Option<String>,
    /// Direction (default `desc`).
    #[param(value_type = Option<SortOrder>, inline)]
    order: Option<String>,
    /// Review status: `needs_review`, `in_progress` or `reviewed`.
    #[param(value_type = Option<tarsy_core::ReviewStatus>, inline)]
    review_status: Option<String>,
    /// Exact review assignee (who has it, or who reviewed it).
    assignee: Option<String>,
    /// Review rating: `accurate`, `partially_accurate` or `inaccurate`.
    #[param(value_type = Option<tarsy_core::ReviewRating>, inline)]
    rating: Option<String>,
    /// Lowest judge's score, inclusive (unscored sessions are left out).
    #[param(value_type = Option<u8>, minimum = 0, maximum = 100)]
    score_min: Option<String>,
    /// Highest judge's score, inclusive (unscored sessions are left out).
    #[param(value_type = Option<u8>, minimum = 0, maximum = 100)]
    score_max: Option<String>,
    /// A failure tag the judge's score carries.
    failure_tag: Option<String>,
}

/// A closed-vocabulary parameter (`review_status`, `rating`).
fn parse_word<T: std::str::FromStr<Err = tarsy_core::UnknownValue>>(
    name: &str,
    value: Option<String>,
) -> ApiResult<Option<T>> {
    value
        .map(|v| {
            v.parse().map_err(|e: tarsy_core::UnknownValue| {
                ApiError::bad_request(format!("{name}: {e}"))
            })
        })
        .transpose()
}

/// A score bound: an integer from 0 to 100.
fn parse_score(name: &str, value: Option<&str>) -> ApiResult<Option<u8>> {
    let Some(value) = value else { return Ok(None) };
    match value.parse::<u8>() {
        Ok(n) if n <= 100 => Ok(Some(n)),
        _ => Err(ApiError::bad_request(format!(
            "{name} must be an integer from 0 to 100, got {value:?}"
        ))),
    }
}

/// Direction of the session list's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum SortOrder {
    /// Smallest first.
    Asc,
    /// Largest first.
    Desc,
}

/// Where a page sits in the whole list.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Pagination {
    /// This page, from 1.
    page: i64,
    /// Sessions per page.
    page_size: i64,
    /// Sessions matching the filters, in all pages.
    total_items: i64,
    /// Pages in all.
    total_pages: i64,
}

/// Answer of `GET /api/v1/sessions`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionList {
    /// This page's sessions, without their large text fields.
    sessions: Vec<SessionSummary>,
    /// Where the page sits.
    pagination: Pagination,
}

// The parameters below are read exactly as the OpenAPI document types them:
// a present but empty or padded value is refused, not taken for the default.

pub(crate) fn parse_positive(
    name: &str,
    value: Option<&str>,
    default: i64,
    max: i64,
) -> ApiResult<i64> {
    let Some(value) = value else {
        return Ok(default);
    };
    match value.parse::<i64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(ApiError::bad_request(format!(
            "{name} must be an integer from 1 to {max}, got {value:?}"
        ))),
    }
}

fn parse_bool(name: &str, value: Option<&str>) -> ApiResult<bool> {
    match value {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "{name} must be true or false, got {other:?}"
        ))),
    }
}

/// `sort` (a column, default `created_at`) and `order` (`asc`/`desc`,
/// default `desc`).
fn parse_sort(sort: Option<&str>, order: Option<&str>) -> ApiResult<SessionSort> {
    let key = match sort {
        None => SessionSortKey::CreatedAt,
        Some(name) => SessionSortKey::parse(name).ok_or_else(|| {
            let keys: Vec<&str> = SessionSortKey::ALL.iter().map(|k| k.as_str()).collect();
            ApiError::bad_request(format!(
                "sort must be one of {}, got {name:?}",
                keys.join(", ")
            ))
        })?,
    };
    let order = match order {
        None | Some("desc") => SortOrder::Desc,
        Some("asc") => SortOrder::Asc,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "order must be asc or desc, got {other:?}"
            )));
        }
    };
    Ok(SessionSort {
        key,
        descending: order == SortOrder::Desc,
    })
}

/// `GET /api/v1/sessions`.
#[utoipa::path(
    get,
    path = "/api/v1/sessions",
    tag = "sessions",
    summary = "List sessions",
    description = "One page of sessions, newest first unless `sort` says otherwise.",
    params(ListQuery),
    responses(
        (status = 200, description = "The page.", body = SessionList),
        (status = 400, description = "An unknown parameter or status; a page or page size \
            out of range or not a number; an unknown `sort` or `order`; a boolean that is \
            not `true` or `false`.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn list_sessions(
    State(api): State<AppState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> ApiResult<Json<SessionList>> {
    let Query(query) =
        query.map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
    let page = parse_positive("page", query.page.as_deref(), 1, i64::from(i32::MAX))?;
    let page_size = parse_positive(
        "page_size",
        query.page_size.as_deref(),
        DEFAULT_PAGE_SIZE,
        MAX_PAGE_SIZE,
    )?;
    // Comma-separated. No parameter is every status; `status=` names the
    // empty status, which does not exist.
    let statuses = match query.status.as_deref() {
        None => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|part| {
                part.parse::<SessionStatus>()
                    .map_err(|e| ApiError::bad_request(e.to_string()))
            })
            .collect::<ApiResult<Vec<_>>>()?,
    };
    let include_deleted = parse_bool("include_deleted", query.include_deleted.as_deref())?;
    let needs_attention = parse_bool("needs_attention", query.needs_attention.as_deref())?;
    let sort = parse_sort(query.sort.as_deref(), query.order.as_deref())?;
    let filter = SessionFilter {
        statuses,
        alert_type: non_empty(query.alert_type),
        chain_id: non_empty(query.chain_id),
        author: non_empty(query.author),
        search: non_empty(query.q),
        include_deleted,
        needs_attention,
        review_status: parse_word("review_status", query.review_status)?,
        assignee: non_empty(query.assignee),
        rating: parse_word("rating", query.rating)?,
        score_min: parse_score("score_min", query.score_min.as_deref())?,
        score_max: parse_score("score_max", query.score_max.as_deref())?,
        failure_tag: non_empty(query.failure_tag),
        sort,
        limit: Some(page_size),
        offset: Some((page - 1).saturating_mul(page_size)),
    };
    let result = api.store.list_sessions(&filter).await?;
    let total_pages = (result.total + page_size - 1) / page_size;
    Ok(Json(SessionList {
        sessions: result.sessions,
        pagination: Pagination {
            page,
            page_size,
            total_items: result.total,
            total_pages,
        },
    }))
}

/// A stage of a session, with its executions.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StageDetail {
    #[serde(flatten)]
    stage: Stage,
    /// Its agent executions, in launch order.
    executions: Vec<ExecutionDetail>,
    /// What its executions' LLM calls cost (null before the first call).
    #[schema(required)]
    cost: Option<Cost>,
}

/// An agent execution of a stage.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ExecutionDetail {
    #[serde(flatten)]
    execution: AgentExecution,
    /// What its LLM calls cost (null before the first call).
    #[schema(required)]
    cost: Option<Cost>,
    /// Cluster mode: the AgentExecution and its pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<ExecutionObject>,
}

/// The follow-up chat of a session.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ChatInfo {
    /// Chat id.
    chat_id: String,
    /// Who opened it.
    #[schema(required)]
    created_by: Option<String>,
    /// Opened.
    created_at: chrono::DateTime<Utc>,
    /// Questions asked.
    message_count: usize,
    /// The stage answering a question now, if any.
    #[schema(required)]
    active_stage_id: Option<String>,
}

/// Something that made the investigation run with less than it was
/// configured with (an MCP server it could not use, say): the answer may be
/// incomplete.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionWarning {
    /// The error event's `metadata.kind`: `mcp_server_unavailable`,
    /// `tool_list_error`, `runbook_unavailable`, `runbook_truncated`.
    kind: String,
    /// What happened, as the timeline says it.
    message: String,
    /// The MCP server concerned, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    /// The stage concerned.
    #[schema(required)]
    stage_id: Option<String>,
    /// The execution concerned.
    #[schema(required)]
    execution_id: Option<String>,
    /// The timeline event saying it.
    event_id: String,
}

impl SessionWarning {
    /// The warning an error event carries, if it is one.
    fn from_event(event: TimelineEvent) -> Option<Self> {
        let kind = event.metadata.get("kind")?.as_str()?;
        if !tarsy_core::error_kind::DEGRADED.contains(&kind) {
            return None;
        }
        Some(Self {
            kind: kind.to_string(),
            server: event
                .metadata
                .get("server")
                .and_then(Value::as_str)
                .map(String::from),
            message: event.content,
            stage_id: event.scope.stage_id,
            execution_id: event.scope.execution_id,
            event_id: event.id,
        })
    }
}

/// Answer of `GET /api/v1/sessions/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionDetail {
    #[serde(flatten)]
    session: Session,
    /// Follow-up chat is possible: the session completed, failed or timed out.
    chat_available: bool,
    /// The chat, once opened (null until the first question).
    #[schema(required)]
    chat: Option<ChatInfo>,
    /// Stages in order.
    stages: Vec<StageDetail>,
    /// What degraded the investigation (empty: nothing).
    warnings: Vec<SessionWarning>,
    /// What its LLM calls cost: its stages', scoring's, memory's and the
    /// executive summary's (null before the first call).
    #[schema(required)]
    cost: Option<Cost>,
    /// Cluster mode: the Alert behind the session.
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<AlertObject>,
}

/// The session's Kubernetes objects, or none when there is no source, it
/// fails or it is slow (logged: the stored records are the answer).
async fn session_objects(api: &AppState, id: &str) -> SessionObjects {
    let Some(source) = &api.config.cluster_objects else {
        return SessionObjects::default();
    };
    match tokio::time::timeout(CLUSTER_OBJECTS_TIMEOUT, source.session_objects(id)).await {
        Ok(Ok(objects)) => objects,
        Ok(Err(e)) => {
            tracing::warn!(session_id = %id, error = %e, "cluster objects unavailable");
            SessionObjects::default()
        }
        Err(_) => {
            tracing::warn!(session_id = %id, "cluster objects lookup timed out");
            SessionObjects::default()
        }
    }
}

/// `GET /api/v1/sessions/{id}`.
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}",
    tag = "sessions",
    summary = "One session",
    description = "The session with its stages (in order), their agent executions (in launch \
        order), its chat and what degraded it.",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The session.", body = SessionDetail),
        (status = 400, description = "An undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn get_session(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<SessionDetail>> {
    let session = api.store.get_session(&id).await?;
    let stages = api.store.list_stages(&id).await?;
    let executions = api.store.list_session_executions(&id).await?;
    let mut objects = session_objects(&api, &id).await;
    let mut costs = api.store.execution_costs(&id).await?;
    let mut by_stage: BTreeMap<String, Vec<AgentExecution>> = BTreeMap::new();
    for execution in executions {
        by_stage
            .entry(execution.stage_id.clone())
            .or_default()
            .push(execution);
    }
    let stages = stages
        .into_iter()
        .map(|stage| {
            let mut executions = by_stage.remove(&stage.id).unwrap_or_default();
            executions.sort_by_key(|e| e.agent_index);
            let executions: Vec<ExecutionDetail> = executions
                .into_iter()
                .map(|execution| ExecutionDetail {
                    cluster: objects.executions.remove(&execution.id),
                    cost: costs.remove(&execution.id),
                    execution,
                })
                .collect();
            let cost = executions
                .iter()
                .filter_map(|e| e.cost)
                .reduce(|mut total, c| {
                    total.add(&c);
                    total
                });
            StageDetail {
                stage,
                executions,
                cost,
            }
        })
        .collect();
    let chat = match api.store.chat_for_session(&id).await? {
        Some(chat) => {
            let messages = api.store.list_chat_user_messages(&chat.id).await?;
            let active = api.store.active_stage_for_chat(&chat.id).await?;
            Some(ChatInfo {
                chat_id: chat.id,
                created_by: chat.created_by,
                created_at: chat.created_at,
                message_count: messages.len(),
                active_stage_id: active.map(|s| s.id),
            })
        }
        None => None,
    };
    let warnings = api
        .store
        .session_errors(&id)
        .await?
        .into_iter()
        .filter_map(SessionWarning::from_event)
        .collect();
    let cost = api.store.session_cost(&id).await?;
    Ok(Json(SessionDetail {
        cost,
        chat_available: chat_available(session.status),
        session,
        chat,
        stages,
        warnings,
        cluster: objects.alert,
    }))
}

/// `GET /metrics`: the process's metrics, plus sessions by status and live
/// memories by scope and category counted in the store (so every replica
/// reports the same, right after a restart).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "system",
    summary = "Prometheus metrics",
    responses(
        (status = 200, description = "The metrics, in the OpenMetrics text format, or in the \
            classic text format (0.0.4) when `Accept` asks for `text/plain` and not for OpenMetrics.",
            content(
                (String = "application/openmetrics-text; version=1.0.0; charset=utf-8"),
                (String = "text/plain; version=0.0.4; charset=utf-8"),
            )),
    )
)]
pub(crate) async fn metrics(State(api): State<AppState>, headers: HeaderMap) -> Response {
    let mut extra = String::new();
    if let Ok(Ok(counts)) =
        tokio::time::timeout(HEALTH_DB_TIMEOUT, api.store.count_sessions_by_status()).await
    {
        extra.push_str(
            "# HELP tarsy_sessions Sessions in the store by status (hidden ones excluded).\n",
        );
        extra.push_str("# TYPE tarsy_sessions gauge\n");
        for (status, n) in counts {
            extra.push_str(&format!(
                "tarsy_sessions{{status=\"{}\"}} {n}\n",
                status.as_str()
            ));
        }
    }
    if let Ok(Ok(totals)) = tokio::time::timeout(HEALTH_DB_TIMEOUT, api.store.cost_totals()).await {
        extra.push_str(
            "# HELP tarsy_llm_cost_usd Estimated cost of LLM calls in US dollars by LLMProvider, \
             model and chain, since the first call (calls without a price add nothing).\n\
             # TYPE tarsy_llm_cost_usd counter\n",
        );
        for t in totals {
            extra.push_str(&format!(
                "tarsy_llm_cost_usd_total{{provider=\"{}\",model=\"{}\",chain=\"{}\"}} {}\n",
                tarsy_telemetry::label_value(&t.provider),
                tarsy_telemetry::label_value(&t.model),
                tarsy_telemetry::label_value(&t.chain_id),
                t.usd
            ));
        }
    }
    // Fail-open: left out when the store does not answer.
    if let Some(gauge) = crate::memories::gauge(&api).await {
        extra.push_str(&gauge);
    }
    let accept = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let (content_type, page) =
        tarsy_telemetry::negotiate(accept, tarsy_telemetry::global().encode(&extra));
    ([(axum::http::header::CONTENT_TYPE, content_type)], page).into_response()
}

/// `GET /api/v1/sessions/{id}/timeline`.
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}/timeline",
    tag = "sessions",
    summary = "A session's timeline",
    description = "Its timeline events (investigation, chat, executive summary) in the order \
        they happened.",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The events.", body = Vec<TimelineEvent>),
        (status = 400, description = "An undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn timeline(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Vec<TimelineEvent>>> {
    Ok(Json(api.store.session_timeline(&id).await?))
}

/// Answer of `POST /api/v1/sessions/{id}/cancel`: what is being cancelled.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "cancelled", rename_all = "snake_case")]
pub(crate) enum CancelResponse {
    /// The session's investigation.
    Session {
        /// The session.
        session_id: String,
        /// Its status now: `cancelling`, or `cancelled` when nothing was
        /// running yet.
        status: SessionStatus,
        /// What happens next.
        message: &'static str,
    },
    /// The running answer of its chat.
    Chat {
        /// The session.
        session_id: String,
        /// Its chat.
        chat_id: String,
        /// The stage answering.
        stage_id: String,
        /// What happens next.
        message: &'static str,
    },
}

/// `POST /api/v1/sessions/{id}/cancel`.
#[utoipa::path(
    post,
    path = "/api/v1/sessions/{id}/cancel",
    tag = "sessions",
    summary = "Cancel a session or its chat answer",
    description = "Cancels the investigation while it runs (pending, in progress); once it \
        has finished, cancels its running chat answer. No body.",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "Cancellation requested.", body = CancelResponse),
        (status = 400, description = "An undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 409, description = "A finished session with no chat answer running: \
            nothing to cancel.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn cancel_session(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<CancelResponse>> {
    api.store.get_session(&id).await?;
    let outcome = api.control.cancel(&id).await.map_err(|e| match e {
        CancelError::NotFound(_) => ApiError::not_found(e.to_string()),
        CancelError::NothingToCancel { .. } => ApiError::conflict(e.to_string()),
        CancelError::Unavailable(m) => ApiError::unavailable(m),
        CancelError::Internal(m) => ApiError::internal(m),
    })?;
    Ok(Json(match outcome {
        CancelOutcome::Session { status } => CancelResponse::Session {
            session_id: id,
            status,
            message: "cancellation requested",
        },
        CancelOutcome::Chat { chat_id, stage_id } => CancelResponse::Chat {
            session_id: id,
            chat_id,
            stage_id,
            message: "cancellation of the chat answer requested",
        },
    }))
}

// ------------------------------------------------------------ scoring

/// Answer of `POST /api/v1/sessions/{id}/score`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ScoreResponse {
    /// The session to be scored.
    session_id: String,
    /// What happens next.
    message: &'static str,
}

/// `POST /api/v1/sessions/{id}/score`.
#[utoipa::path(
    post,
    path = "/api/v1/sessions/{id}/score",
    tag = "scoring",
    summary = "Score a finished session again",
    description = "Has the chain's judge score the finished investigation: a new attempt, \
        earlier ones are kept. The attempt and its score arrive as `session.score` events \
        and in `GET /api/v1/sessions/{id}/scores`. No body.",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 202, description = "Accepted: a judge is scoring the session.", body = ScoreResponse),
        (status = 400, description = "The session has not finished, its chain no longer \
            resolves a judge, or an undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 409, description = "A judge is scoring the session already.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The orchestrator cannot take work now, or the database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn rescore_session(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<(StatusCode, Json<ScoreResponse>)> {
    api.store.get_session(&id).await?;
    let accepted = api.control.rescore(&id).await.map_err(|e| match e {
        ScoreError::NotFound(_) => ApiError::not_found(e.to_string()),
        ScoreError::NotFinished { .. } | ScoreError::Invalid(_) => {
            ApiError::bad_request(e.to_string())
        }
        ScoreError::Busy { .. } => ApiError::conflict(e.to_string()),
        ScoreError::Unavailable(m) => ApiError::unavailable(m),
        ScoreError::Internal(m) => ApiError::internal(m),
    })?;
    Ok((
        StatusCode::ACCEPTED,
        Json(ScoreResponse {
            session_id: accepted.session_id,
            message: "scoring requested",
        }),
    ))
}

/// Answer of `GET /api/v1/sessions/{id}/scores`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ScoreHistory {
    /// Every scoring attempt, newest first.
    attempts: Vec<SessionScore>,
}

/// `GET /api/v1/sessions/{id}/scores`.
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}/scores",
    tag = "scoring",
    summary = "A session's scoring attempts",
    description = "Every attempt of the judge, newest first: score, verdict, failure tags, \
        the assessment by dimension, the tool report, or why the attempt failed.",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The attempts.", body = ScoreHistory),
        (status = 400, description = "An undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn session_scores(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ScoreHistory>> {
    api.store.get_session(&id).await?;
    Ok(Json(ScoreHistory {
        attempts: api.store.session_scores(&id).await?,
    }))
}

// ------------------------------------------------------------ chat

/// Body of `POST /api/v1/sessions/{id}/chat/messages`. Unknown fields are
/// refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChatRequest {
    /// The question (trimmed; not empty; at most 100,000 bytes).
    #[schema(
        min_length = 1,
        pattern = "[^\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]",
        example = "why did the pod crash?"
    )]
    content: String,
}

/// Answer of `POST /api/v1/sessions/{id}/chat/messages`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ChatResponse {
    /// The session's chat (opened by its first question).
    chat_id: String,
    /// The question.
    message_id: String,
    /// The stage answering it; the answer streams over the WebSocket.
    stage_id: String,
}

/// `POST /api/v1/sessions/{id}/chat/messages`.
#[utoipa::path(
    post,
    path = "/api/v1/sessions/{id}/chat/messages",
    tag = "chat",
    summary = "Ask a follow-up question",
    description = "Asks about a finished investigation. The first question opens the \
        session's chat; the answer streams over the WebSocket like a stage.",
    params(("id" = String, Path, description = "Session id")),
    request_body(content = ChatRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "Accepted: a stage is answering.", body = ChatResponse),
        (status = 400, description = "Malformed JSON, an unknown field, empty content, chat \
            disabled for the chain, an undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 409, description = "The session has not finished (or was cancelled), or a \
            previous question is still being answered.", body = ErrorBody),
        (status = 413, description = "The message or the body over its limit.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
        (status = 503, description = "The orchestrator cannot take work now, or the database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
    )
)]
pub(crate) async fn send_chat_message(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<ChatResponse>)> {
    let body = read_body(&headers, body, api.chat_body_limit()).await?;
    let request: ChatRequest = parse_body(&body, "chat message")?;
    let content = request.content.trim().to_string();
    if content.is_empty() {
        return Err(ApiError::bad_request("content must not be empty"));
    }
    if content.len() > api.config.max_chat_message_bytes {
        return Err(ApiError::too_large(format!(
            "chat message is {} bytes; the limit is {} bytes",
            content.len(),
            api.config.max_chat_message_bytes
        )));
    }
    let session = api.store.get_session(&id).await?;
    if !chat_available(session.status) {
        return Err(ApiError::conflict(
            ChatError::NotAvailable {
                status: session.status,
            }
            .to_string(),
        ));
    }
    let author = author(&headers, api.config.trust_forwarded_identity);
    let accepted = api
        .control
        .submit_chat_message(ChatSubmission {
            session_id: id,
            content,
            author,
        })
        .await
        .map_err(|e| match e {
            ChatError::NotFound(_) => ApiError::not_found(e.to_string()),
            ChatError::NotAvailable { .. } | ChatError::Busy { .. } => {
                ApiError::conflict(e.to_string())
            }
            ChatError::Disabled(_) | ChatError::Invalid(_) => ApiError::bad_request(e.to_string()),
            ChatError::Unavailable(m) => ApiError::unavailable(m),
            ChatError::Internal(m) => ApiError::internal(m),
        })?;
    Ok((
        StatusCode::ACCEPTED,
        Json(ChatResponse {
            chat_id: accepted.chat_id,
            message_id: accepted.message_id,
            stage_id: accepted.stage_id,
        }),
    ))
}

// ------------------------------------------------------------ system

/// `GET /api/v1/system/configuration`.
#[utoipa::path(
    get,
    path = "/api/v1/system/configuration",
    tag = "system",
    summary = "The configuration",
    description = "Chains, agents, LLM providers and MCP servers as the dashboard shows them; \
        never a secret.",
    responses(
        (status = 200, description = "The configuration.", body = SystemConfiguration),
        (status = 404, description = "The API was started without a configuration view.", body = ErrorBody),
        (status = 503, description = "The configuration cannot be read now.", body = ErrorBody),
    )
)]
pub(crate) async fn system_configuration(
    State(api): State<AppState>,
) -> ApiResult<Json<SystemConfiguration>> {
    let Some(source) = &api.config.configuration else {
        return Err(ApiError::not_found(
            "this API was started without a configuration view",
        ));
    };
    source.configuration().await.map(Json).map_err(|e| {
        tracing::warn!(error = %e, "configuration view unavailable");
        ApiError::unavailable(format!("the configuration cannot be read now: {e}"))
    })
}

// ------------------------------------------------------------ trace

/// `GET /api/v1/sessions/{id}/trace`.
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}/trace",
    tag = "trace",
    summary = "A session's LLM and MCP calls",
    description = "Trace level 1: the LLM and MCP interactions grouped stage → execution, and \
        the session-level LLM interactions (executive summary).",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The trace.", body = SessionTrace),
        (status = 400, description = "An undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn trace(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<SessionTrace>> {
    Ok(Json(api.store.session_trace(&id).await?))
}

/// Where the conversation of an LLM call's detail came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ConversationSource {
    /// The execution's stored messages up to `last_message_id`.
    Messages,
    /// The request itself (self-contained calls: summarization, executive
    /// summary).
    Inline,
    /// Neither is available.
    None,
}

/// Answer of `GET /api/v1/sessions/{id}/trace/llm/{interaction_id}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LlmDetail {
    #[serde(flatten)]
    interaction: LlmInteraction,
    /// Where `conversation` came from.
    conversation_source: ConversationSource,
    /// The messages sent with the call.
    conversation: Vec<ConversationMessage>,
}

fn interaction_not_found(kind: &str, interaction_id: &str, session_id: &str) -> ApiError {
    ApiError::not_found(format!(
        "{kind} interaction {interaction_id:?} not found in session {session_id:?}"
    ))
}

/// `GET /api/v1/sessions/{id}/trace/llm/{interaction_id}`.
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}/trace/llm/{interaction_id}",
    tag = "trace",
    summary = "One LLM call",
    description = "Trace level 2: one LLM call with the conversation it was sent.",
    params(
        ("id" = String, Path, description = "Session id"),
        ("interaction_id" = String, Path, description = "LLM interaction id"),
    ),
    responses(
        (status = 200, description = "The call.", body = LlmDetail),
        (status = 400, description = "An undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session, or no such interaction in it.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn llm_interaction(
    State(api): State<AppState>,
    ApiPath((id, interaction_id)): ApiPath<(String, String)>,
) -> ApiResult<Json<LlmDetail>> {
    api.store.get_session(&id).await?;
    let interaction = match api.store.get_llm_interaction(&interaction_id).await {
        Ok(i) if i.scope.session_id == id => i,
        Ok(_) | Err(StoreError::NotFound { .. }) => {
            return Err(interaction_not_found("LLM", &interaction_id, &id));
        }
        Err(e) => return Err(e.into()),
    };
    let (conversation_source, conversation) = match &interaction.last_message_id {
        Some(last) => match api.store.list_messages_up_to(last).await {
            Ok(messages) => (
                ConversationSource::Messages,
                messages
                    .into_iter()
                    .map(|m| ConversationMessage {
                        role: m.role,
                        content: m.content,
                        tool_calls: m.tool_calls,
                        tool_call_id: m.tool_call_id,
                        tool_name: m.tool_name,
                    })
                    .collect(),
            ),
            Err(StoreError::NotFound { .. }) => (ConversationSource::None, Vec::new()),
            Err(e) => return Err(e.into()),
        },
        None => match interaction.llm_request.get("messages") {
            Some(inline) => {
                match serde_json::from_value::<Vec<ConversationMessage>>(inline.clone()) {
                    Ok(messages) => (ConversationSource::Inline, messages),
                    Err(e) => {
                        tracing::warn!(%interaction_id, error = %e, "inline conversation unreadable");
                        (ConversationSource::None, Vec::new())
                    }
                }
            }
            None => (ConversationSource::None, Vec::new()),
        },
    };
    Ok(Json(LlmDetail {
        interaction,
        conversation_source,
        conversation,
    }))
}

/// `GET /api/v1/sessions/{id}/trace/mcp/{interaction_id}`.
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}/trace/mcp/{interaction_id}",
    tag = "trace",
    summary = "One MCP call",
    description = "Trace level 2: one MCP call with its arguments and result.",
    params(
        ("id" = String, Path, description = "Session id"),
        ("interaction_id" = String, Path, description = "MCP interaction id"),
    ),
    responses(
        (status = 200, description = "The call.", body = McpInteraction),
        (status = 400, description = "An undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session, or no such interaction in it.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn mcp_interaction(
    State(api): State<AppState>,
    ApiPath((id, interaction_id)): ApiPath<(String, String)>,
) -> ApiResult<Json<McpInteraction>> {
    api.store.get_session(&id).await?;
    match api.store.get_mcp_interaction(&interaction_id).await {
        Ok(i) if i.scope.session_id == id => Ok(Json(i)),
        Ok(_) | Err(StoreError::NotFound { .. }) => {
            Err(interaction_not_found("MCP", &interaction_id, &id))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The characters of `NOT_BLANK`'s class, its escapes and ranges decoded.
    fn not_blank_class() -> Vec<char> {
        let class = NOT_BLANK
            .strip_prefix("[^")
            .and_then(|c| c.strip_suffix(']'))
            .unwrap();
        let mut chars = Vec::new();
        let mut rest = class;
        while !rest.is_empty() {
            let (c, tail) = match rest.strip_prefix('\\') {
                None => (rest.chars().next().unwrap(), &rest[1..]),
                Some(esc) => match esc.as_bytes()[0] {
                    b't' => ('\t', &esc[1..]),
                    b'n' => ('\n', &esc[1..]),
                    b'f' => ('\u{c}', &esc[1..]),
                    b'r' => ('\r', &esc[1..]),
                    b'x' => (hex(&esc[1..3]), &esc[3..]),
                    b'u' => (hex(&esc[1..5]), &esc[5..]),
                    other => panic!("unexpected escape {}", other as char),
                },
            };
            match chars.last() {
                Some('-') if chars.len() >= 2 => {
                    chars.pop();
                    let from = chars.pop().unwrap();
                    chars.extend(from..=c);
                }
                _ => chars.push(c),
            }
            rest = tail;
        }
        chars
    }

    fn hex(digits: &str) -> char {
        char::from_u32(u32::from_str_radix(digits, 16).unwrap()).unwrap()
    }

    #[test]
    fn not_blank_pattern_lists_exactly_what_trim_removes() {
        let mut listed = not_blank_class();
        listed.sort();
        let whitespace: Vec<char> = (char::MIN..=char::MAX)
            .filter(|c| c.is_whitespace())
            .collect();
        assert_eq!(listed, whitespace);

        let doc = serde_json::to_value(crate::openapi()).unwrap();
        let schemas = &doc["components"]["schemas"];
        for pattern in [
            &schemas["AlertRequest"]["properties"]["alert_type"]["pattern"],
            &schemas["ChatRequest"]["properties"]["content"]["pattern"],
        ] {
            assert_eq!(pattern, NOT_BLANK);
        }
    }
}
