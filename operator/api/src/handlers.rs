//! REST handlers.

use std::collections::{BTreeMap, HashSet};
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
use serde_json::{Value, json};
use tarsy_core::{ConversationMessage, McpSelection, SessionStatus, TimelineEvent};
use tarsy_store::{
    AgentExecution, LlmInteraction, McpInteraction, Session, SessionFilter, SessionSort,
    SessionSortKey, SessionSummary, SessionTrace, Stage, StoreError,
};

use crate::control::{
    CancelError, CancelOutcome, ChatError, ChatSubmission, NewAlert, SubmitError, SystemWarning,
};
use crate::error::{ApiError, ApiPath, ApiResult};
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
fn parse_body<T: DeserializeOwned>(body: &[u8], what: &str) -> ApiResult<T> {
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
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> ApiResult<Bytes> {
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

/// `GET /health`.
pub(crate) async fn health(State(api): State<AppState>) -> Response {
    let db = tokio::time::timeout(HEALTH_DB_TIMEOUT, api.store.count_in_progress()).await;
    let (db_ok, database) = match db {
        Ok(Ok(in_progress)) => (
            true,
            json!({"status": "ok", "backend": backend_name(&api), "sessions_in_progress": in_progress}),
        ),
        Ok(Err(e)) => (
            false,
            json!({"status": "error", "backend": backend_name(&api), "error": e.to_string()}),
        ),
        Err(_) => (
            false,
            json!({"status": "error", "backend": backend_name(&api), "error": "no answer within 5 s"}),
        ),
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
        "unhealthy"
    } else if !warnings.is_empty() || !mcp_healthy || !dependencies_ok {
        "degraded"
    } else {
        "healthy"
    };
    let body = json!({
        "status": status,
        "version": env!("CARGO_PKG_VERSION"),
        "database": database,
        "dependencies": dependencies,
        "mcp": {"healthy": mcp_healthy, "servers": servers},
        "warnings": warnings,
        "websocket": {
            "connections": api.ws_connections.load(Ordering::Relaxed),
            "subscriptions": api.hub.bus().subscription_count(),
        },
    });
    let code = if db_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body)).into_response()
}

fn backend_name(api: &AppState) -> &'static str {
    match api.store.backend() {
        tarsy_store::BackendKind::Postgres => "postgres",
        tarsy_store::BackendKind::Sqlite => "sqlite",
    }
}

// ------------------------------------------------------------ alerts

/// Body of `POST /api/v1/alerts`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AlertRequest {
    alert_type: String,
    data: Value,
    #[serde(default)]
    chain: Option<String>,
    #[serde(default)]
    runbook_url: Option<String>,
    #[serde(default)]
    mcp_selection: Option<McpSelection>,
}

#[derive(Debug, Serialize)]
pub(crate) struct AlertResponse {
    session_id: String,
    chain_id: String,
    status: SessionStatus,
    message: &'static str,
}

/// `POST /api/v1/alerts`.
pub(crate) async fn submit_alert(
    State(api): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<AlertResponse>)> {
    let body = read_body(&headers, body, api.alert_body_limit()).await?;
    let request: AlertRequest = parse_body(&body, "alert")?;
    let alert_type = request.alert_type.trim().to_string();
    if alert_type.is_empty() {
        return Err(ApiError::bad_request("alert_type must not be empty"));
    }
    check_name_length("alert_type", &alert_type)?;
    if let Some(chain) = &request.chain {
        check_name_length("chain", chain.trim())?;
    }
    let data = match request.data {
        Value::String(s) => s,
        Value::Null => return Err(ApiError::bad_request("data must not be null")),
        other => other.to_string(),
    };
    if data.trim().is_empty() {
        return Err(ApiError::bad_request("data must not be empty"));
    }
    if data.len() > api.config.max_alert_bytes {
        return Err(ApiError::too_large(format!(
            "alert data is {} bytes; the limit is {} bytes",
            data.len(),
            api.config.max_alert_bytes
        )));
    }
    let chain = non_empty(request.chain);
    let runbook_url = non_empty(request.runbook_url);
    if let Some(url) = &runbook_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(ApiError::bad_request(format!(
            "runbook_url {url:?} must be an http:// or https:// URL"
        )));
    }
    if let Some(selection) = &request.mcp_selection {
        validate_selection(selection)?;
    }
    let accepted = api
        .control
        .submit_alert(NewAlert {
            alert_type,
            data,
            chain,
            runbook_url,
            mcp_selection: request.mcp_selection,
            author: author(&headers, api.config.trust_forwarded_identity),
        })
        .await
        .map_err(|e| match e {
            SubmitError::UnknownAlertType(_)
            | SubmitError::AmbiguousAlertType { .. }
            | SubmitError::UnknownChain(_)
            | SubmitError::UnknownMcpServer(_)
            | SubmitError::Invalid(_) => ApiError::bad_request(e.to_string()),
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

/// Longest alert type or chain name (a Kubernetes name's bound; the Alert
/// resource has the same).
const MAX_NAME_CHARS: usize = 253;

/// Refuses an over-long name without quoting it back.
fn check_name_length(field: &str, value: &str) -> ApiResult<()> {
    let n = value.chars().count();
    if n > MAX_NAME_CHARS {
        return Err(ApiError::bad_request(format!(
            "{field} is {n} characters long; at most {MAX_NAME_CHARS} are allowed"
        )));
    }
    Ok(())
}

fn non_empty(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Shape checks of an MCP selection; whether the servers exist is the
/// control's call (it knows the configuration).
fn validate_selection(selection: &McpSelection) -> ApiResult<()> {
    if selection.servers.is_empty() {
        return Err(ApiError::bad_request(
            "mcp_selection.servers must name at least one MCP server",
        ));
    }
    let mut seen = HashSet::new();
    for (i, server) in selection.servers.iter().enumerate() {
        if server.name.trim().is_empty() {
            return Err(ApiError::bad_request(format!(
                "mcp_selection.servers[{i}].name must not be empty"
            )));
        }
        if !seen.insert(server.name.as_str()) {
            return Err(ApiError::bad_request(format!(
                "mcp_selection names MCP server {:?} twice",
                server.name
            )));
        }
        if let Some(tools) = &server.tools
            && tools.iter().any(|t| t.trim().is_empty())
        {
            return Err(ApiError::bad_request(format!(
                "mcp_selection.servers[{i}].tools contains an empty tool name"
            )));
        }
    }
    Ok(())
}

// ------------------------------------------------------------ sessions

/// Query of `GET /api/v1/sessions`. Numbers are read as text so that a bad
/// value gets a message naming the parameter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    status: Option<String>,
    alert_type: Option<String>,
    chain_id: Option<String>,
    author: Option<String>,
    q: Option<String>,
    page: Option<String>,
    page_size: Option<String>,
    include_deleted: Option<String>,
    needs_attention: Option<String>,
    sort: Option<String>,
    order: Option<String>,
}

#[derive(Debug, Serialize)]
struct Pagination {
    page: i64,
    page_size: i64,
    total_items: i64,
    total_pages: i64,
}

#[derive(Debug, Serialize)]
struct SessionList {
    sessions: Vec<SessionSummary>,
    pagination: Pagination,
}

fn parse_positive(name: &str, value: Option<&str>, default: i64, max: i64) -> ApiResult<i64> {
    let Some(value) = value else {
        return Ok(default);
    };
    match value.trim().parse::<i64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(ApiError::bad_request(format!(
            "{name} must be an integer from 1 to {max}, got {value:?}"
        ))),
    }
}

fn parse_bool(name: &str, value: Option<&str>) -> ApiResult<bool> {
    match value.map(str::trim) {
        None | Some("") | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "{name} must be true or false, got {other:?}"
        ))),
    }
}

/// `sort` (a column, default `created_at`) and `order` (`asc`/`desc`,
/// default `desc`).
fn parse_sort(sort: Option<&str>, order: Option<&str>) -> ApiResult<SessionSort> {
    let key = match sort.map(str::trim).filter(|s| !s.is_empty()) {
        None => SessionSortKey::CreatedAt,
        Some(name) => SessionSortKey::parse(name).ok_or_else(|| {
            let keys: Vec<&str> = SessionSortKey::ALL.iter().map(|k| k.as_str()).collect();
            ApiError::bad_request(format!(
                "sort must be one of {}, got {name:?}",
                keys.join(", ")
            ))
        })?,
    };
    let descending = match order.map(str::trim).filter(|s| !s.is_empty()) {
        None | Some("desc") => true,
        Some("asc") => false,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "order must be asc or desc, got {other:?}"
            )));
        }
    };
    Ok(SessionSort { key, descending })
}

/// `GET /api/v1/sessions`.
pub(crate) async fn list_sessions(
    State(api): State<AppState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(query) =
        query.map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
    let page = parse_positive("page", query.page.as_deref(), 1, i64::from(i32::MAX))?;
    let page_size = parse_positive(
        "page_size",
        query.page_size.as_deref(),
        DEFAULT_PAGE_SIZE,
        MAX_PAGE_SIZE,
    )?;
    let mut statuses = Vec::new();
    for part in query.status.as_deref().unwrap_or("").split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        statuses.push(
            part.parse::<SessionStatus>()
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
        );
    }
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
        sort,
        limit: Some(page_size),
        offset: Some((page - 1).saturating_mul(page_size)),
    };
    let result = api.store.list_sessions(&filter).await?;
    let total_pages = (result.total + page_size - 1) / page_size;
    Ok(Json(json!(SessionList {
        sessions: result.sessions,
        pagination: Pagination {
            page,
            page_size,
            total_items: result.total,
            total_pages,
        },
    })))
}

#[derive(Debug, Serialize)]
struct StageDetail {
    #[serde(flatten)]
    stage: Stage,
    executions: Vec<ExecutionDetail>,
}

#[derive(Debug, Serialize)]
struct ExecutionDetail {
    #[serde(flatten)]
    execution: AgentExecution,
    /// Cluster mode: the AgentExecution and its pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<ExecutionObject>,
}

#[derive(Debug, Serialize)]
struct ChatInfo {
    chat_id: String,
    created_by: Option<String>,
    created_at: chrono::DateTime<Utc>,
    message_count: usize,
    active_stage_id: Option<String>,
}

/// Something that made the investigation run with less than it was
/// configured with (an MCP server it could not use, say): the answer may be
/// incomplete.
#[derive(Debug, Serialize)]
struct SessionWarning {
    /// The error event's `metadata.kind` (see `tarsy_core::error_kind`).
    kind: String,
    /// What happened, as the timeline says it.
    message: String,
    /// The MCP server concerned, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    stage_id: Option<String>,
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

#[derive(Debug, Serialize)]
struct SessionDetail {
    #[serde(flatten)]
    session: Session,
    chat_available: bool,
    chat: Option<ChatInfo>,
    stages: Vec<StageDetail>,
    /// What degraded the investigation (empty: nothing).
    warnings: Vec<SessionWarning>,
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
pub(crate) async fn get_session(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Value>> {
    let session = api.store.get_session(&id).await?;
    let stages = api.store.list_stages(&id).await?;
    let executions = api.store.list_session_executions(&id).await?;
    let mut objects = session_objects(&api, &id).await;
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
            let executions = executions
                .into_iter()
                .map(|execution| ExecutionDetail {
                    cluster: objects.executions.remove(&execution.id),
                    execution,
                })
                .collect();
            StageDetail { stage, executions }
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
    Ok(Json(json!(SessionDetail {
        chat_available: chat_available(session.status),
        session,
        chat,
        stages,
        warnings,
        cluster: objects.alert,
    })))
}

/// `GET /metrics`: the process's metrics, plus sessions by status counted
/// in the store (so every replica reports the same, right after a restart).
pub(crate) async fn metrics(State(api): State<AppState>) -> Response {
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
    (
        [(
            axum::http::header::CONTENT_TYPE,
            tarsy_telemetry::CONTENT_TYPE,
        )],
        tarsy_telemetry::global().encode(&extra),
    )
        .into_response()
}

/// `GET /api/v1/sessions/{id}/timeline`.
pub(crate) async fn timeline(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Vec<TimelineEvent>>> {
    Ok(Json(api.store.session_timeline(&id).await?))
}

/// `POST /api/v1/sessions/{id}/cancel`.
pub(crate) async fn cancel_session(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Value>> {
    api.store.get_session(&id).await?;
    let outcome = api.control.cancel(&id).await.map_err(|e| match e {
        CancelError::NotFound(_) => ApiError::not_found(e.to_string()),
        CancelError::NothingToCancel { .. } => ApiError::conflict(e.to_string()),
        CancelError::Internal(m) => ApiError::internal(m),
    })?;
    Ok(Json(match outcome {
        CancelOutcome::Session { status } => json!({
            "session_id": id,
            "cancelled": "session",
            "status": status,
            "message": "cancellation requested",
        }),
        CancelOutcome::Chat { chat_id, stage_id } => json!({
            "session_id": id,
            "cancelled": "chat",
            "chat_id": chat_id,
            "stage_id": stage_id,
            "message": "cancellation of the chat answer requested",
        }),
    }))
}

// ------------------------------------------------------------ chat

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatRequest {
    content: String,
}

/// `POST /api/v1/sessions/{id}/chat/messages`.
pub(crate) async fn send_chat_message(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<Value>)> {
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
        Json(json!({
            "chat_id": accepted.chat_id,
            "message_id": accepted.message_id,
            "stage_id": accepted.stage_id,
        })),
    ))
}

// ------------------------------------------------------------ system

/// `GET /api/v1/system/configuration`.
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
pub(crate) async fn trace(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<SessionTrace>> {
    Ok(Json(api.store.session_trace(&id).await?))
}

#[derive(Debug, Serialize)]
struct LlmDetail {
    #[serde(flatten)]
    interaction: LlmInteraction,
    /// Where `conversation` came from: `messages` (the message table up to
    /// `last_message_id`), `inline` (the request itself) or `none`.
    conversation_source: &'static str,
    conversation: Vec<ConversationMessage>,
}

fn interaction_not_found(kind: &str, interaction_id: &str, session_id: &str) -> ApiError {
    ApiError::not_found(format!(
        "{kind} interaction {interaction_id:?} not found in session {session_id:?}"
    ))
}

/// `GET /api/v1/sessions/{id}/trace/llm/{interaction_id}`.
pub(crate) async fn llm_interaction(
    State(api): State<AppState>,
    ApiPath((id, interaction_id)): ApiPath<(String, String)>,
) -> ApiResult<Json<Value>> {
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
                "messages",
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
            Err(StoreError::NotFound { .. }) => ("none", Vec::new()),
            Err(e) => return Err(e.into()),
        },
        None => match interaction.llm_request.get("messages") {
            Some(inline) => {
                match serde_json::from_value::<Vec<ConversationMessage>>(inline.clone()) {
                    Ok(messages) => ("inline", messages),
                    Err(e) => {
                        tracing::warn!(%interaction_id, error = %e, "inline conversation unreadable");
                        ("none", Vec::new())
                    }
                }
            }
            None => ("none", Vec::new()),
        },
    };
    Ok(Json(json!(LlmDetail {
        interaction,
        conversation_source,
        conversation,
    })))
}

/// `GET /api/v1/sessions/{id}/trace/mcp/{interaction_id}`.
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
