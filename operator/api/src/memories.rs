//! Investigation memories over REST: the short lessons TARSy learned from
//! scored investigations and puts into later investigations' prompts. A
//! person lists and searches them, reads, edits, deprecates and deletes
//! one, and sees which memories a session was given and which it taught.
//!
//! Every memory belongs to one scope and no request crosses it: the API
//! has its own scope ([`crate::ApiConfig::memory_scope`]: the project in
//! local mode, the namespace in cluster mode), a request may name it or
//! one of its projects (`<scope>/<project>`), nothing else (403); a memory
//! of another scope is not found. Text a person writes is masked with
//! every built-in pattern before it is stored (fail-closed): a memory never
//! carries a secret.

use std::fmt::Write as _;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use tarsy_core::{MemoryCategory, MemoryValence, UnknownValue};
use tarsy_store::{Memory, MemoryChange, MemoryFilter};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ApiPath, ApiResult, ErrorBody, ErrorCode};
use crate::handlers::{parse_body, parse_positive, read_body};
use crate::{Api, AppState};

/// Largest body of a memory change.
const MEMORY_BODY_LIMIT: usize = 64 * 1024;
/// Longest content a person writes, in characters (the schema's
/// `maxLength`).
const MAX_CONTENT_CHARS: usize = 2_000;
/// Longest search text, in characters.
const MAX_QUERY_CHARS: usize = 1_000;
/// Default and largest page of the memory list.
const DEFAULT_PAGE: i64 = 50;
const MAX_PAGE: i64 = 200;
/// How long `/metrics` waits for the memory counts.
const COUNTS_TIMEOUT: Duration = Duration::from_secs(5);

// ------------------------------------------------------------ scope

/// Whether `scope` is `own` or one of its projects (`own/<project>`).
fn within(scope: &str, own: &str) -> bool {
    scope == own
        || scope
            .strip_prefix(own)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|project| !project.is_empty())
}

/// The API's own memory scope, when it has one.
fn own_scope(api: &Api) -> Option<&str> {
    api.config
        .memory_scope
        .as_deref()
        .filter(|s| !s.trim().is_empty())
}

/// The scope a request works in: the `scope` it names, else the API's own.
/// A named scope must be the API's own or one of its projects (403
/// otherwise); an API without a scope of its own serves any scope named,
/// and needs one (400).
fn request_scope(api: &Api, asked: Option<String>) -> ApiResult<String> {
    match (asked, own_scope(api)) {
        (None, Some(own)) => Ok(own.to_string()),
        (None, None) => Err(ApiError::bad_request(
            "scope is required: this API has no memory scope of its own",
        )),
        (Some(asked), _) if asked.trim().is_empty() => {
            Err(ApiError::bad_request("scope cannot be empty"))
        }
        (Some(asked), None) => Ok(asked),
        (Some(asked), Some(own)) if within(&asked, own) => Ok(asked),
        (Some(asked), Some(own)) => Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "scope {asked:?} is outside this API's memory scope {own:?}: \
                 ask for {own:?} or one of its projects, {:?}",
                format!("{own}/<project>")
            ),
        )),
    }
}

/// Whether a memory may be shown by this API: any memory when it has no
/// scope of its own, else one of its scope or of one of its projects.
fn visible(api: &Api, memory: &Memory) -> bool {
    own_scope(api).is_none_or(|own| within(&memory.scope, own))
}

// ------------------------------------------------------------ queries

/// Query of the requests on one memory.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ScopeQuery {
    /// The memory scope (default: this API's own — the project in local
    /// mode, the namespace in cluster mode). Only this API's own scope or
    /// one of its projects (`<scope>/<project>`) is allowed.
    #[param(min_length = 1)]
    scope: Option<String>,
}

/// Query of `GET /api/v1/memories`; unknown parameters are refused.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct MemoryListQuery {
    /// The memory scope (default: this API's own — the project in local
    /// mode, the namespace in cluster mode). Only this API's own scope or
    /// one of its projects (`<scope>/<project>`) is allowed.
    #[param(min_length = 1)]
    scope: Option<String>,
    /// Only this category.
    #[param(value_type = Option<MemoryCategory>, inline)]
    category: Option<String>,
    /// Only this valence.
    #[param(value_type = Option<MemoryValence>, inline)]
    valence: Option<String>,
    /// Only deprecated memories (`true`) or only live ones (`false`);
    /// both without it.
    #[param(value_type = Option<bool>)]
    deprecated: Option<String>,
    /// Full-text search: only memories with every word of it (its first 32
    /// runs of letters and digits of 2–64 characters, case-insensitive,
    /// common English words ignored; without such a word it filters
    /// nothing).
    #[param(max_length = 1000)]
    q: Option<String>,
    /// Memories per page (default 50).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 200)]
    limit: Option<String>,
    /// Memories to skip (default 0).
    #[param(value_type = Option<i64>, minimum = 0)]
    offset: Option<String>,
}

/// A closed-vocabulary parameter (`category`, `valence`).
fn parse_word<T: std::str::FromStr<Err = UnknownValue>>(
    name: &str,
    value: Option<String>,
) -> ApiResult<Option<T>> {
    value
        .map(|v| {
            v.parse()
                .map_err(|e: UnknownValue| ApiError::bad_request(format!("{name}: {e}")))
        })
        .transpose()
}

/// `true` or `false`; `None` when absent.
fn parse_flag(name: &str, value: Option<&str>) -> ApiResult<Option<bool>> {
    match value {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(other) => Err(ApiError::bad_request(format!(
            "{name} must be true or false, got {other:?}"
        ))),
    }
}

/// A non-negative integer (default 0).
fn parse_offset(value: Option<&str>) -> ApiResult<i64> {
    let Some(value) = value else { return Ok(0) };
    match value.parse::<i64>() {
        Ok(n) if (0..=i64::from(i32::MAX)).contains(&n) => Ok(n),
        _ => Err(ApiError::bad_request(format!(
            "offset must be an integer from 0 to {}, got {value:?}",
            i32::MAX
        ))),
    }
}

// ------------------------------------------------------------ answers

/// Answer of `GET /api/v1/memories`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct MemoryList {
    /// This page, most recently reinforced first (ties by id).
    memories: Vec<Memory>,
    /// Memories matching the filters, in all pages.
    total: i64,
}

/// Answer of `GET /api/v1/sessions/{id}/memories`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionMemories {
    /// The memories put into the session's prompts, in their order there
    /// (deleted ones are gone).
    injected: Vec<Memory>,
    /// The memories learned from the session, oldest first.
    learned: Vec<Memory>,
}

// ------------------------------------------------------------ handlers

/// `GET /api/v1/memories`.
#[utoipa::path(
    get,
    path = "/api/v1/memories",
    tag = "memory",
    summary = "List and search memories",
    description = "One page of the memories of a scope, most recently reinforced (learned \
        again) first, optionally only of a category or valence, only deprecated or only live \
        ones, or only those with every word of `q`.",
    params(MemoryListQuery),
    responses(
        (status = 200, description = "The page.", body = MemoryList),
        (status = 400, description = "An unknown parameter; an unknown category or valence; \
            `deprecated` other than true or false; a limit or offset out of range or not a \
            number; `q` over 1,000 characters; an empty scope, or none when the API has no \
            scope of its own.", body = ErrorBody),
        (status = 403, description = "A scope outside the API's own.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn list_memories(
    State(api): State<AppState>,
    query: Result<Query<MemoryListQuery>, QueryRejection>,
) -> ApiResult<Json<MemoryList>> {
    let Query(query) =
        query.map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
    let scope = request_scope(&api, query.scope)?;
    let category = parse_word("category", query.category)?;
    let valence = parse_word("valence", query.valence)?;
    let deprecated = parse_flag("deprecated", query.deprecated.as_deref())?;
    let limit = parse_positive("limit", query.limit.as_deref(), DEFAULT_PAGE, MAX_PAGE)?;
    let offset = parse_offset(query.offset.as_deref())?;
    let text = query.q.filter(|q| !q.trim().is_empty());
    if let Some(q) = &text {
        let chars = q.chars().count();
        if chars > MAX_QUERY_CHARS {
            return Err(ApiError::bad_request(format!(
                "q of {chars} characters is longer than {MAX_QUERY_CHARS}"
            )));
        }
    }
    let (memories, total) = api
        .store
        .list_memories(&MemoryFilter {
            scope,
            category,
            valence,
            deprecated,
            text,
            limit: Some(limit),
            offset: Some(offset),
        })
        .await?;
    Ok(Json(MemoryList { memories, total }))
}

/// `GET /api/v1/memories/{id}`.
#[utoipa::path(
    get,
    path = "/api/v1/memories/{id}",
    tag = "memory",
    summary = "One memory",
    params(("id" = String, Path, description = "Memory id"), ScopeQuery),
    responses(
        (status = 200, description = "The memory.", body = Memory),
        (status = 400, description = "An unknown parameter, an undecodable path, an empty \
            scope, or none when the API has no scope of its own.", body = ErrorBody),
        (status = 403, description = "A scope outside the API's own.", body = ErrorBody),
        (status = 404, description = "No such memory in the scope.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn get_memory(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<ScopeQuery>, QueryRejection>,
) -> ApiResult<Json<Memory>> {
    let scope = scope_of(&api, query)?;
    Ok(Json(api.store.get_memory(&scope, &id).await?))
}

/// The scope of a request on one memory.
fn scope_of(api: &Api, query: Result<Query<ScopeQuery>, QueryRejection>) -> ApiResult<String> {
    let Query(query) =
        query.map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
    request_scope(api, query.scope)
}

/// Body of `PATCH /api/v1/memories/{id}`: the fields to change (at least
/// one); an absent or null field is kept. Unknown fields are refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MemoryPatch {
    /// The new lesson: trimmed, not empty, at most 2,000 characters,
    /// masked before it is stored (secrets become `[MASKED_…]` markers).
    /// A content that differs from the stored one drops the memory's
    /// embedding: it is then recalled by its words only.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 2000)]
    content: Option<String>,
    /// Fact, experience or procedure.
    #[serde(default)]
    category: Option<MemoryCategory>,
    /// Whether following it helped or misled.
    #[serde(default)]
    valence: Option<MemoryValence>,
    /// 0–1.
    #[serde(default)]
    #[schema(minimum = 0.0, maximum = 1.0)]
    confidence: Option<f64>,
    /// Deprecate (`true`: kept, never recalled) or restore (`false`).
    #[serde(default)]
    deprecated: Option<bool>,
}

impl MemoryPatch {
    /// The change it asks for, its content masked, or a 400 saying what is
    /// wrong.
    fn change(self) -> ApiResult<MemoryChange> {
        let content = self.content.map(|c| masked_content(&c)).transpose()?;
        if let Some(c) = self.confidence
            && !(0.0..=1.0).contains(&c)
        {
            return Err(ApiError::bad_request(format!(
                "confidence must be between 0 and 1, got {c}"
            )));
        }
        let change = MemoryChange {
            content,
            category: self.category,
            valence: self.valence,
            confidence: self.confidence,
            deprecated: self.deprecated,
            // The store drops the old embedding of a new content.
            embedding: None,
        };
        if change == MemoryChange::default() {
            return Err(ApiError::bad_request(
                "nothing to change: give at least one of content, category, valence, \
                 confidence, deprecated",
            ));
        }
        Ok(change)
    }
}

/// A content a person wrote, trimmed and masked; a 400 when it is empty,
/// too long, or cannot be masked (it is then not stored).
fn masked_content(content: &str) -> ApiResult<String> {
    let content = content.trim();
    if content.is_empty() {
        return Err(ApiError::bad_request("content cannot be empty"));
    }
    let chars = content.chars().count();
    if chars > MAX_CONTENT_CHARS {
        return Err(ApiError::bad_request(format!(
            "content of {chars} characters is longer than {MAX_CONTENT_CHARS}"
        )));
    }
    tarsy_masking::mask_memory_text(content).ok_or_else(|| {
        ApiError::bad_request(
            "content could not be checked for secrets (masking failed), so it was not stored; \
             nothing was changed",
        )
    })
}

/// `PATCH /api/v1/memories/{id}`.
#[utoipa::path(
    patch,
    path = "/api/v1/memories/{id}",
    tag = "memory",
    summary = "Edit a memory",
    description = "Changes the fields given (at least one); the others are kept. The content \
        is trimmed and masked (every built-in pattern) before it is stored, and a changed \
        content drops the memory's embedding (it described the old text): the memory is then \
        recalled by its words only.",
    params(("id" = String, Path, description = "Memory id"), ScopeQuery),
    request_body(content = MemoryPatch, content_type = "application/json"),
    responses(
        (status = 200, description = "The memory after the change.", body = Memory),
        (status = 400, description = "Malformed JSON, an unknown or mistyped field, no field \
            to change, an empty content or one over 2,000 characters, a content that could \
            not be masked, a confidence outside 0–1, an unknown parameter, an undecodable \
            path, an empty scope, or none when the API has no scope of its own.", body = ErrorBody),
        (status = 403, description = "A scope outside the API's own.", body = ErrorBody),
        (status = 404, description = "No such memory in the scope.", body = ErrorBody),
        (status = 413, description = "The body over 65,536 bytes.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn update_memory(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<ScopeQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Memory>> {
    let scope = scope_of(&api, query)?;
    let body = read_body(&headers, body, MEMORY_BODY_LIMIT).await?;
    // serde reads a struct from an array too: only an object is a change.
    if body.trim_ascii_start().first().is_some_and(|b| *b != b'{') {
        parse_body::<serde_json::Map<String, serde_json::Value>>(&body, "memory change")?;
    }
    let change = parse_body::<MemoryPatch>(&body, "memory change")?.change()?;
    Ok(Json(api.store.update_memory(&scope, &id, &change).await?))
}

/// `POST /api/v1/memories/{id}/deprecate`.
#[utoipa::path(
    post,
    path = "/api/v1/memories/{id}/deprecate",
    tag = "memory",
    summary = "Deprecate a memory",
    description = "Keeps the memory but never recalls it again (restore it with `PATCH` \
        `{\"deprecated\": false}`). Idempotent: a deprecated memory is answered as it is. \
        No body.",
    params(("id" = String, Path, description = "Memory id"), ScopeQuery),
    responses(
        (status = 200, description = "The memory, deprecated.", body = Memory),
        (status = 400, description = "An unknown parameter, an undecodable path, an empty \
            scope, or none when the API has no scope of its own.", body = ErrorBody),
        (status = 403, description = "A scope outside the API's own.", body = ErrorBody),
        (status = 404, description = "No such memory in the scope.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn deprecate_memory(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<ScopeQuery>, QueryRejection>,
) -> ApiResult<Json<Memory>> {
    let scope = scope_of(&api, query)?;
    api.store.deprecate_memories(&scope, &[id.as_str()]).await?;
    Ok(Json(api.store.get_memory(&scope, &id).await?))
}

/// `DELETE /api/v1/memories/{id}`.
#[utoipa::path(
    delete,
    path = "/api/v1/memories/{id}",
    tag = "memory",
    summary = "Delete a memory",
    description = "Deletes the memory and the records of the sessions it was put into.",
    params(("id" = String, Path, description = "Memory id"), ScopeQuery),
    responses(
        (status = 204, description = "Deleted."),
        (status = 400, description = "An unknown parameter, an undecodable path, an empty \
            scope, or none when the API has no scope of its own.", body = ErrorBody),
        (status = 403, description = "A scope outside the API's own.", body = ErrorBody),
        (status = 404, description = "No such memory in the scope.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn delete_memory(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<ScopeQuery>, QueryRejection>,
) -> ApiResult<StatusCode> {
    let scope = scope_of(&api, query)?;
    api.store.delete_memory(&scope, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/v1/sessions/{id}/memories`.
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}/memories",
    tag = "memory",
    summary = "A session's memories",
    description = "The memories put into the session's prompts, in their order there, and \
        those learned from it, oldest first; only memories of the API's own scope or its \
        projects.",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The memories.", body = SessionMemories),
        (status = 400, description = "An undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn session_memories(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<SessionMemories>> {
    // Not found for an unknown session.
    api.store.session_memory_scope(&id).await?;
    let (mut injected, mut learned) = tokio::try_join!(
        api.store.injected_memories(&id),
        api.store.learned_memories(&id),
    )?;
    injected.retain(|m| visible(&api, m));
    learned.retain(|m| visible(&api, m));
    Ok(Json(SessionMemories { injected, learned }))
}

// ------------------------------------------------------------ metrics

/// The `tarsy_memories{scope,category}` gauge (live memories of the API's
/// scope and its projects, or of every scope without one), in the text
/// format; `None` when the store does not answer in time (fail-open).
pub(crate) async fn gauge(api: &Api) -> Option<String> {
    let counts = tokio::time::timeout(COUNTS_TIMEOUT, api.store.memory_counts())
        .await
        .ok()?
        .ok()?;
    let mut out = String::from(
        "# HELP tarsy_memories Live (not deprecated) investigation memories by scope and category.\n\
         # TYPE tarsy_memories gauge\n",
    );
    for (scope, category, n) in counts {
        if own_scope(api).is_some_and(|own| !within(&scope, own)) {
            continue;
        }
        let _ = writeln!(
            out,
            "tarsy_memories{{scope=\"{}\",category=\"{}\"}} {n}",
            tarsy_telemetry::label_value(&scope),
            category.as_str()
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_is_within_its_own_and_its_projects_only() {
        assert!(within("team-a", "team-a"));
        assert!(within("team-a/payments", "team-a"));
        assert!(!within("team-a/", "team-a"));
        assert!(!within("team-ab", "team-a"));
        assert!(!within("team-b/team-a", "team-a"));
        assert!(!within("team", "team-a"));
    }

    #[test]
    fn content_is_trimmed_bounded_and_masked() {
        assert_eq!(
            masked_content("  check the pool  ").unwrap(),
            "check the pool"
        );
        assert!(masked_content("   ").is_err());
        assert!(masked_content(&"é".repeat(MAX_CONTENT_CHARS)).is_ok());
        let err = masked_content(&"é".repeat(MAX_CONTENT_CHARS + 1)).unwrap_err();
        assert!(err.message.contains("2001 characters"), "{}", err.message);
        let masked = masked_content("the key is AKIAIOSFODNN7EXAMPLE").unwrap();
        assert!(!masked.contains("AKIAIOSFODNN7EXAMPLE"), "{masked}");
    }
}
