//! People's reviews of finished sessions over REST: one session's review
//! and its audit log, a change (claim, unclaim, reassign, complete,
//! acknowledge, update) by the request's author, the same change for many
//! sessions at once, and the triage view (the sessions by where their
//! review stands, with counts, in one call). Every change is published
//! (`session.review`) so that every open dashboard updates.

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use tarsy_core::{ReviewAction, ReviewRating, SessionStatus};
use tarsy_events::lifecycle::{ReviewState, publish_session_review};
use tarsy_store::{Review, ReviewChange, ReviewEvent, SessionFilter, SessionSummary};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ApiPath, ApiResult, ErrorBody};
use crate::handlers::{parse_body, read_body};
use crate::{AppState, author};

/// Largest review request body (notes included).
const REVIEW_BODY_LIMIT: usize = 256 * 1024;
/// Longest note (action taken, feedback), in characters (the schema's
/// `maxLength`).
const MAX_NOTE_CHARS: usize = 16 * 1024;
/// Most sessions one bulk request changes.
const MAX_BULK: usize = 500;

/// Answer of `GET /api/v1/sessions/{id}/review`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ReviewDetail {
    /// Where the review stands; null while the session is being
    /// investigated.
    #[schema(required)]
    review: Option<Review>,
    /// Every step, oldest first.
    events: Vec<ReviewEvent>,
}

/// `GET /api/v1/sessions/{id}/review`.
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}/review",
    tag = "review",
    summary = "A session's review and its audit log",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The review and its steps.", body = ReviewDetail),
        (status = 400, description = "An undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn get_review(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ReviewDetail>> {
    let review = api.store.review(&id).await?;
    let events = api.store.review_events(&id).await?;
    Ok(Json(ReviewDetail { review, events }))
}

/// Body of a review change. Unknown fields are refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReviewRequest {
    /// `claim`, `unclaim`, `reassign`, `complete`, `acknowledge` or `update`.
    action: ReviewAction,
    /// The new reviewer (`reassign`).
    #[serde(default)]
    assignee: Option<String>,
    /// The verdict (`complete`: required; `update`: optional).
    #[serde(default)]
    rating: Option<ReviewRating>,
    /// What was done about the alert (`complete`, `acknowledge`, `update`).
    #[serde(default)]
    #[schema(max_length = 16384)]
    action_taken: Option<String>,
    /// Feedback on the investigation (`complete`, `acknowledge`, `update`).
    #[serde(default)]
    #[schema(max_length = 16384)]
    feedback: Option<String>,
}

impl ReviewRequest {
    /// The change it asks for, or a 400 naming what is missing or not
    /// allowed.
    fn change(self) -> ApiResult<ReviewChange> {
        for (name, note) in [
            ("action_taken", &self.action_taken),
            ("feedback", &self.feedback),
        ] {
            if note
                .as_ref()
                .is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS)
            {
                return Err(ApiError::bad_request(format!(
                    "{name} is longer than {MAX_NOTE_CHARS} characters"
                )));
            }
        }
        let unused = |field: &str, set: bool| -> ApiResult<()> {
            if set {
                Err(ApiError::bad_request(format!(
                    "{field} does not apply to {}",
                    self.action
                )))
            } else {
                Ok(())
            }
        };
        let notes = self.action_taken.is_some() || self.feedback.is_some();
        Ok(match self.action {
            ReviewAction::Claim | ReviewAction::Unclaim => {
                unused("assignee", self.assignee.is_some())?;
                unused("rating", self.rating.is_some())?;
                unused("a note", notes)?;
                if self.action == ReviewAction::Claim {
                    ReviewChange::Claim
                } else {
                    ReviewChange::Unclaim
                }
            }
            ReviewAction::Reassign => {
                unused("rating", self.rating.is_some())?;
                unused("a note", notes)?;
                let assignee = self
                    .assignee
                    .map(|a| a.trim().to_string())
                    .filter(|a| !a.is_empty())
                    .ok_or_else(|| ApiError::bad_request("reassign needs an assignee"))?;
                ReviewChange::Reassign { assignee }
            }
            ReviewAction::Complete => {
                unused("assignee", self.assignee.is_some())?;
                let rating = self.rating.ok_or_else(|| {
                    ApiError::bad_request(
                        "complete needs a rating: accurate, partially_accurate or inaccurate \
                         (or acknowledge without one)",
                    )
                })?;
                ReviewChange::Complete {
                    rating,
                    action_taken: self.action_taken,
                    feedback: self.feedback,
                }
            }
            ReviewAction::Acknowledge => {
                unused("assignee", self.assignee.is_some())?;
                unused("rating", self.rating.is_some())?;
                ReviewChange::Acknowledge {
                    action_taken: self.action_taken,
                    feedback: self.feedback,
                }
            }
            ReviewAction::Update => {
                unused("assignee", self.assignee.is_some())?;
                ReviewChange::Update {
                    rating: self.rating,
                    action_taken: self.action_taken,
                    feedback: self.feedback,
                }
            }
            ReviewAction::AutoAcknowledge => {
                return Err(ApiError::bad_request(
                    "auto_acknowledge is TARSy's own step; use acknowledge",
                ));
            }
        })
    }
}

/// Applies a change by `actor` and publishes it.
async fn apply(api: &AppState, id: &str, actor: &str, change: &ReviewChange) -> ApiResult<Review> {
    let review = api.store.change_review(id, actor, change).await?;
    let rated = match change {
        ReviewChange::Complete { rating, .. } => Some(*rating),
        ReviewChange::Update { rating, .. } => *rating,
        _ => None,
    };
    if let Some(rating) = rated {
        correct_memories(api, id, rating).await;
    }
    let feedback = match change {
        ReviewChange::Complete { feedback, .. }
        | ReviewChange::Acknowledge { feedback, .. }
        | ReviewChange::Update { feedback, .. } => feedback.as_deref(),
        _ => None,
    };
    if feedback.is_some_and(|f| !f.trim().is_empty()) {
        api.control.learn_from_feedback(id).await;
    }
    publish_session_review(
        api.hub.publisher().as_ref(),
        actor,
        change.action(),
        &ReviewState {
            session_id: &review.session_id,
            status: review.status,
            assignee: review.assignee.as_deref(),
            rating: review.rating,
        },
    )
    .await;
    Ok(review)
}

/// What a rating does to the memories learned from the session
/// (`tarsy_memory::review_effect`). Fail-open: the review stands if the
/// memories cannot be changed (logged).
async fn correct_memories(api: &AppState, id: &str, rating: tarsy_core::ReviewRating) {
    let changed = match tarsy_memory::review_effect(rating) {
        tarsy_memory::ReviewEffect::Confidence(delta) => {
            api.store
                .adjust_session_memories_confidence(id, delta)
                .await
        }
        tarsy_memory::ReviewEffect::Deprecate => api.store.deprecate_session_memories(id).await,
    };
    if let Err(e) = changed {
        tracing::warn!(session_id = id, error = %e, "the review did not reach the session's memories");
    }
}

/// `POST /api/v1/sessions/{id}/review`.
#[utoipa::path(
    post,
    path = "/api/v1/sessions/{id}/review",
    tag = "review",
    summary = "Change a session's review",
    description = "Claims, unclaims, reassigns, completes (with a rating), acknowledges \
        (without one) or edits the review of a finished session, as the request's author. \
        A change the review's status does not allow is a 409 that says where it stands.",
    params(("id" = String, Path, description = "Session id")),
    request_body(content = ReviewRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The review after the change.", body = Review),
        (status = 400, description = "Malformed JSON, an unknown field or action, a field \
            that does not apply to the action, complete without a rating, reassign without \
            an assignee, a note over 16,384 characters, an undecodable path.", body = ErrorBody),
        (status = 404, description = "No such session.", body = ErrorBody),
        (status = 409, description = "The review's status does not allow the change (claimed \
            by someone else, reviewed already, still being investigated); the message says \
            where it stands.", body = ErrorBody),
        (status = 413, description = "The body over its limit.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn change_review(
    State(api): State<AppState>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Review>> {
    let body = read_body(&headers, body, REVIEW_BODY_LIMIT).await?;
    let change = parse_body::<ReviewRequest>(&body, "review change")?.change()?;
    let actor = author(&headers, api.config.trust_forwarded_identity);
    Ok(Json(apply(&api, &id, &actor, &change).await?))
}

/// Body of `POST /api/v1/reviews`: one change for many sessions.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BulkReviewRequest {
    /// The sessions (at most 500).
    session_ids: Vec<String>,
    /// `complete` or `acknowledge`.
    action: ReviewAction,
    /// The verdict (`complete`).
    #[serde(default)]
    rating: Option<ReviewRating>,
    /// What was done about the alerts.
    #[serde(default)]
    action_taken: Option<String>,
    /// Feedback on the investigations.
    #[serde(default)]
    feedback: Option<String>,
}

/// How the change went for one session of a bulk request.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BulkReviewResult {
    /// The session.
    session_id: String,
    /// The review after the change, when it was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    review: Option<Review>,
    /// Why it was not made (`{error, message}` as a single request would
    /// have answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorBody>,
}

/// Answer of `POST /api/v1/reviews`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BulkReviewResponse {
    /// One result per session, in request order.
    results: Vec<BulkReviewResult>,
}

/// `POST /api/v1/reviews`.
#[utoipa::path(
    post,
    path = "/api/v1/reviews",
    tag = "review",
    summary = "Complete or acknowledge many reviews",
    description = "Applies one `complete` or `acknowledge` to each session, as the \
        request's author; each session succeeds or fails on its own.",
    request_body(content = BulkReviewRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "One result per session.", body = BulkReviewResponse),
        (status = 400, description = "Malformed JSON, an unknown field, an action other than \
            complete or acknowledge, complete without a rating, a note over 16,384 characters, \
            no session or more than 500.", body = ErrorBody),
        (status = 413, description = "The body over its limit.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
    )
)]
pub(crate) async fn bulk_review(
    State(api): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<BulkReviewResponse>> {
    let body = read_body(&headers, body, REVIEW_BODY_LIMIT).await?;
    let request: BulkReviewRequest = parse_body(&body, "bulk review")?;
    if !matches!(
        request.action,
        ReviewAction::Complete | ReviewAction::Acknowledge
    ) {
        return Err(ApiError::bad_request(format!(
            "a bulk review completes or acknowledges, not {}",
            request.action
        )));
    }
    if request.session_ids.is_empty() || request.session_ids.len() > MAX_BULK {
        return Err(ApiError::bad_request(format!(
            "session_ids must name 1 to {MAX_BULK} sessions, got {}",
            request.session_ids.len()
        )));
    }
    let change = ReviewRequest {
        action: request.action,
        assignee: None,
        rating: request.rating,
        action_taken: request.action_taken,
        feedback: request.feedback,
    }
    .change()?;
    let actor = author(&headers, api.config.trust_forwarded_identity);
    let mut results = Vec::with_capacity(request.session_ids.len());
    for session_id in request.session_ids {
        let (review, error) = match apply(&api, &session_id, &actor, &change).await {
            Ok(review) => (Some(review), None),
            Err(e) => (
                None,
                Some(ErrorBody {
                    error: e.code,
                    message: e.message,
                }),
            ),
        };
        results.push(BulkReviewResult {
            session_id,
            review,
            error,
        });
    }
    Ok(Json(BulkReviewResponse { results }))
}

/// Query of `GET /api/v1/triage`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct TriageQuery {
    /// Sessions listed per group, newest first (default 50, at most 200).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 200)]
    limit: Option<String>,
}

/// One group of the triage view.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TriageGroup {
    /// Sessions in the group, in all.
    count: i64,
    /// The newest of them.
    sessions: Vec<SessionSummary>,
}

/// Answer of `GET /api/v1/triage`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Triage {
    /// Sessions still being investigated.
    investigating: TriageGroup,
    /// Finished sessions nobody has claimed.
    needs_review: TriageGroup,
    /// Sessions someone is reviewing.
    in_progress: TriageGroup,
    /// Reviewed sessions.
    reviewed: TriageGroup,
}

/// `GET /api/v1/triage`.
#[utoipa::path(
    get,
    path = "/api/v1/triage",
    tag = "review",
    summary = "Sessions by where their review stands",
    description = "Four groups — investigating, needs review, in progress, reviewed — each \
        with its count and its newest sessions, in one call. Hidden sessions are left out.",
    params(TriageQuery),
    responses(
        (status = 200, description = "The groups.", body = Triage),
        (status = 400, description = "An unknown parameter or a limit out of range.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn triage(
    State(api): State<AppState>,
    query: Result<Query<TriageQuery>, QueryRejection>,
) -> ApiResult<Json<Triage>> {
    let Query(query) =
        query.map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
    let limit = crate::handlers::parse_positive("limit", query.limit.as_deref(), 50, 200)?;
    let group = |filter: SessionFilter| {
        let store = api.store.clone();
        async move {
            let page = store
                .list_sessions(&SessionFilter {
                    limit: Some(limit),
                    ..filter
                })
                .await?;
            Ok::<_, ApiError>(TriageGroup {
                count: page.total,
                sessions: page.sessions,
            })
        }
    };
    let (investigating, needs_review, in_progress, reviewed) = tokio::try_join!(
        group(SessionFilter {
            statuses: vec![
                SessionStatus::Pending,
                SessionStatus::InProgress,
                SessionStatus::Cancelling,
            ],
            ..SessionFilter::default()
        }),
        group(SessionFilter {
            review_status: Some(tarsy_core::ReviewStatus::NeedsReview),
            ..SessionFilter::default()
        }),
        group(SessionFilter {
            review_status: Some(tarsy_core::ReviewStatus::InProgress),
            ..SessionFilter::default()
        }),
        group(SessionFilter {
            review_status: Some(tarsy_core::ReviewStatus::Reviewed),
            ..SessionFilter::default()
        }),
    )?;
    Ok(Json(Triage {
        investigating,
        needs_review,
        in_progress,
        reviewed,
    }))
}
