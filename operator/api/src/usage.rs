//! The usage page's data over REST: what the investigations of a window
//! cost, in total and by model, alert type, chain and scope, and the
//! sessions that cost most — one aggregate call.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use tarsy_store::{UsageFilter, UsageRank, UsageSummary};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};

/// The window without `from`: the last seven days.
const DEFAULT_DAYS: i64 = 7;
/// The longest window: a little over a year.
const MAX_DAYS: i64 = 366;

/// Query of `GET /api/v1/usage`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct UsageQuery {
    /// Sessions created at or after this instant (RFC 3339; default: seven
    /// days before `to`).
    #[param(value_type = Option<String>, format = DateTime)]
    from: Option<String>,
    /// Sessions created before this instant (RFC 3339; default: now). The
    /// window is at most 366 days.
    #[param(value_type = Option<String>, format = DateTime)]
    to: Option<String>,
    /// What the top sessions are ranked by: `cost` (default) or `tokens`.
    #[param(value_type = Option<String>)]
    rank: Option<String>,
}

/// Answer of `GET /api/v1/usage`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Usage {
    /// The window's first instant.
    from: DateTime<Utc>,
    /// The first instant after the window.
    to: DateTime<Utc>,
    #[serde(flatten)]
    summary: UsageSummary,
}

/// `GET /api/v1/usage`.
#[utoipa::path(
    get,
    path = "/api/v1/usage",
    tag = "sessions",
    summary = "What investigations cost",
    description = "Over the sessions created in the window (hidden ones included): sessions, \
        tokens and estimated cost, how complete the estimate is (calls without a price), the \
        cost by model, alert type, chain and scope, and the 20 sessions that cost most (or \
        used most tokens). Each call is priced when it is recorded, at the price of that day.",
    params(UsageQuery),
    responses(
        (status = 200, description = "The aggregates.", body = Usage),
        (status = 400, description = "An unknown parameter, an instant that is not RFC 3339, a \
            window that ends before it starts or is longer than 366 days, an unknown `rank`.",
            body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn usage(
    State(api): State<AppState>,
    query: Result<Query<UsageQuery>, QueryRejection>,
) -> ApiResult<Json<Usage>> {
    let Query(query) =
        query.map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
    let to = instant("to", query.to.as_deref())?.unwrap_or_else(Utc::now);
    let from = instant("from", query.from.as_deref())?
        .unwrap_or_else(|| to - Duration::days(DEFAULT_DAYS));
    if from >= to {
        return Err(ApiError::bad_request(format!(
            "from ({from}) must be before to ({to})"
        )));
    }
    if to - from > Duration::days(MAX_DAYS) {
        return Err(ApiError::bad_request(format!(
            "the window is at most {MAX_DAYS} days"
        )));
    }
    let rank = match query.rank.as_deref() {
        None | Some("cost") => UsageRank::Cost,
        Some("tokens") => UsageRank::Tokens,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "rank must be cost or tokens, got {other:?}"
            )));
        }
    };
    let summary = api
        .store
        .usage_summary(&UsageFilter { from, to, rank })
        .await?;
    Ok(Json(Usage { from, to, summary }))
}

/// An RFC 3339 instant parameter.
fn instant(name: &str, value: Option<&str>) -> ApiResult<Option<DateTime<Utc>>> {
    value
        .map(|v| {
            DateTime::parse_from_rfc3339(v)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| {
                    ApiError::bad_request(format!(
                        "{name} must be an RFC 3339 instant (e.g. 2026-11-01T00:00:00Z), \
                         got {v:?}: {e}"
                    ))
                })
        })
        .transpose()
}
