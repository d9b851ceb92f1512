//! People's reviews of finished sessions. A session enters review when it
//! ends (`needs_review`; a cancelled one is reviewed by TARSy at once), is
//! claimed (`in_progress`, with an assignee), and is reviewed — rated
//! (accurate, partially accurate, inaccurate) or acknowledged without a
//! rating — with optional notes, editable afterwards. Each change is one
//! conditional update, so of two concurrent claims one wins and the other
//! is a conflict that says where the review stands; each change is logged
//! with its actor and time (`review_events`) in the same transaction.

use chrono::{DateTime, Utc};
use serde::Serialize;
use tarsy_core::{ReviewAction, ReviewRating, ReviewStatus};

use crate::Store;
use crate::db::{Sql, new_id, now};
use crate::error::{Result, StoreError};

const REVIEW: &str = "session review";

/// The actor of the steps TARSy takes itself.
pub const TARSY_ACTOR: &str = "tarsy";

/// Where a session's review stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Review {
    /// The session.
    pub session_id: String,
    /// Its review status.
    pub status: ReviewStatus,
    /// Who has it (claimed or reassigned), or who reviewed it.
    pub assignee: Option<String>,
    /// The verdict (`None` when acknowledged without a rating, or not
    /// reviewed yet).
    pub rating: Option<ReviewRating>,
    /// What was done about the alert.
    pub action_taken: Option<String>,
    /// Feedback on the investigation.
    pub feedback: Option<String>,
    /// When it was reviewed.
    pub reviewed_at: Option<DateTime<Utc>>,
}

/// One step of a review, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewEvent {
    /// Event id.
    pub id: String,
    /// The session.
    pub session_id: String,
    /// Who did it (`tarsy` for TARSy itself).
    pub actor: String,
    /// What was done.
    pub action: ReviewAction,
    /// The status before.
    pub from_status: Option<ReviewStatus>,
    /// The status after.
    pub to_status: ReviewStatus,
    /// The assignee after.
    pub assignee: Option<String>,
    /// The rating after.
    pub rating: Option<ReviewRating>,
    /// The action taken after.
    pub action_taken: Option<String>,
    /// The feedback after.
    pub feedback: Option<String>,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// A change to a session's review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewChange {
    /// Take it for review: `needs_review` → `in_progress`, assigned to the
    /// actor.
    Claim,
    /// Give it back: `in_progress` → `needs_review`.
    Unclaim,
    /// Hand it to `assignee`: `needs_review` or `in_progress` →
    /// `in_progress`.
    Reassign {
        /// The new reviewer.
        assignee: String,
    },
    /// Review it with a rating: `needs_review` or `in_progress` →
    /// `reviewed`.
    Complete {
        /// The verdict.
        rating: ReviewRating,
        /// What was done about the alert.
        action_taken: Option<String>,
        /// Feedback on the investigation.
        feedback: Option<String>,
    },
    /// Review it without a rating: `needs_review` or `in_progress` →
    /// `reviewed`.
    Acknowledge {
        /// What was done about the alert.
        action_taken: Option<String>,
        /// Feedback on the investigation.
        feedback: Option<String>,
    },
    /// Edit a finished review (`reviewed` → `reviewed`); `None` keeps a
    /// field as it is.
    Update {
        /// A new verdict.
        rating: Option<ReviewRating>,
        /// New notes on what was done.
        action_taken: Option<String>,
        /// New feedback.
        feedback: Option<String>,
    },
}

impl ReviewChange {
    /// The audit log's word for it.
    pub fn action(&self) -> ReviewAction {
        match self {
            ReviewChange::Claim => ReviewAction::Claim,
            ReviewChange::Unclaim => ReviewAction::Unclaim,
            ReviewChange::Reassign { .. } => ReviewAction::Reassign,
            ReviewChange::Complete { .. } => ReviewAction::Complete,
            ReviewChange::Acknowledge { .. } => ReviewAction::Acknowledge,
            ReviewChange::Update { .. } => ReviewAction::Update,
        }
    }

    /// The statuses it may start from.
    fn from(&self) -> &'static [ReviewStatus] {
        use ReviewStatus::*;
        match self {
            ReviewChange::Claim => &[NeedsReview],
            ReviewChange::Unclaim => &[InProgress],
            ReviewChange::Reassign { .. }
            | ReviewChange::Complete { .. }
            | ReviewChange::Acknowledge { .. } => &[NeedsReview, InProgress],
            ReviewChange::Update { .. } => &[Reviewed],
        }
    }
}

/// The SQL assignments of a change: `$1` is the session, `$2` the time,
/// `values` bind from `$3`.
struct Assignments {
    set: &'static str,
    values: Vec<Option<String>>,
}

fn assignments(change: &ReviewChange, actor: &str) -> Assignments {
    let text = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(String::from)
    };
    let (set, values) = match change {
        ReviewChange::Claim => (
            "review_status = 'in_progress', review_assignee = $3",
            vec![Some(actor.to_string())],
        ),
        ReviewChange::Unclaim => (
            "review_status = 'needs_review', review_assignee = NULL",
            vec![],
        ),
        ReviewChange::Reassign { assignee } => (
            "review_status = 'in_progress', review_assignee = $3",
            vec![Some(assignee.trim().to_string())],
        ),
        ReviewChange::Complete {
            rating,
            action_taken,
            feedback,
        } => (
            "review_status = 'reviewed', review_assignee = $3, review_rating = $4, \
             review_action_taken = $5, review_feedback = $6, reviewed_at = $2",
            vec![
                Some(actor.to_string()),
                Some(rating.as_str().to_string()),
                text(action_taken),
                text(feedback),
            ],
        ),
        ReviewChange::Acknowledge {
            action_taken,
            feedback,
        } => (
            "review_status = 'reviewed', review_assignee = $3, review_rating = NULL, \
             review_action_taken = $4, review_feedback = $5, reviewed_at = $2",
            vec![Some(actor.to_string()), text(action_taken), text(feedback)],
        ),
        ReviewChange::Update {
            rating,
            action_taken,
            feedback,
        } => (
            "review_rating = COALESCE($3, review_rating), \
             review_action_taken = COALESCE($4, review_action_taken), \
             review_feedback = COALESCE($5, review_feedback)",
            vec![
                rating.map(|r| r.as_str().to_string()),
                text(action_taken),
                text(feedback),
            ],
        ),
    };
    Assignments { set, values }
}

/// A session row's review columns (`status` is `None` while the session is
/// being investigated).
struct ReviewRow(Option<Review>);

fn wire<T: std::str::FromStr<Err = tarsy_core::UnknownValue>>(
    value: String,
) -> std::result::Result<T, sqlx::Error> {
    value
        .parse()
        .map_err(|e: tarsy_core::UnknownValue| sqlx::Error::Decode(e.into()))
}

macro_rules! review_from_row {
    ($row_ty:ty) => {
        impl<'r> sqlx::FromRow<'r, $row_ty> for ReviewRow {
            fn from_row(row: &'r $row_ty) -> std::result::Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                let Some(status) = row.try_get::<Option<String>, _>("review_status")? else {
                    return Ok(ReviewRow(None));
                };
                let rating: Option<String> = row.try_get("review_rating")?;
                Ok(ReviewRow(Some(Review {
                    session_id: row.try_get("id")?,
                    status: wire(status)?,
                    assignee: row.try_get("review_assignee")?,
                    rating: rating.map(wire).transpose()?,
                    action_taken: row.try_get("review_action_taken")?,
                    feedback: row.try_get("review_feedback")?,
                    reviewed_at: row.try_get("reviewed_at")?,
                })))
            }
        }

        impl<'r> sqlx::FromRow<'r, $row_ty> for ReviewEvent {
            fn from_row(row: &'r $row_ty) -> std::result::Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                let from: Option<String> = row.try_get("from_status")?;
                let rating: Option<String> = row.try_get("rating")?;
                Ok(ReviewEvent {
                    id: row.try_get("id")?,
                    session_id: row.try_get("session_id")?,
                    actor: row.try_get("actor")?,
                    action: wire(row.try_get("action")?)?,
                    from_status: from.map(wire).transpose()?,
                    to_status: wire(row.try_get("to_status")?)?,
                    assignee: row.try_get("assignee")?,
                    rating: rating.map(wire).transpose()?,
                    action_taken: row.try_get("action_taken")?,
                    feedback: row.try_get("feedback")?,
                    created_at: row.try_get("created_at")?,
                })
            }
        }
    };
}
review_from_row!(sqlx::postgres::PgRow);
review_from_row!(sqlx::sqlite::SqliteRow);

const REVIEW_COLUMNS: &str = "id, review_status, review_assignee, review_rating, \
                              review_action_taken, review_feedback, reviewed_at";

impl Store {
    /// A session's review; `None` while it is still being investigated.
    /// Not found for an unknown session.
    pub async fn review(&self, session_id: &str) -> Result<Option<Review>> {
        let row: Option<ReviewRow> = self
            .db
            .fetch_optional(
                Sql::dynamic(format!(
                    "SELECT {REVIEW_COLUMNS} FROM alert_sessions WHERE id = $1"
                ))
                .bind(session_id),
            )
            .await?;
        match row {
            None => Err(StoreError::not_found("session", session_id)),
            Some(ReviewRow(review)) => Ok(review),
        }
    }

    /// Changes a session's review on behalf of `actor`, logging the step.
    /// A change the review's status does not allow (a claim of a review
    /// someone else has, a completion of a reviewed session, anything on a
    /// session still being investigated) is a conflict that names the
    /// current state; a rating-less completion or an empty reassignment is
    /// invalid input.
    pub async fn change_review(
        &self,
        session_id: &str,
        actor: &str,
        change: &ReviewChange,
    ) -> Result<Review> {
        let actor = actor.trim();
        if actor.is_empty() {
            return Err(StoreError::InvalidInput(
                "a review change needs an actor".into(),
            ));
        }
        if let ReviewChange::Reassign { assignee } = change
            && assignee.trim().is_empty()
        {
            return Err(StoreError::InvalidInput(
                "reassign needs an assignee".into(),
            ));
        }
        let before = self.review(session_id).await?;
        let at = now();
        let Assignments { set, values } = assignments(change, actor);
        let from = change.from();
        let first = 3 + values.len();
        let placeholders: Vec<String> =
            (0..from.len()).map(|i| format!("${}", first + i)).collect();
        let update = format!(
            "UPDATE alert_sessions SET {set} WHERE id = $1 AND $2 IS NOT NULL \
             AND review_status IN ({})",
            placeholders.join(", ")
        );
        // The log row copies the review as the update left it, in the same
        // transaction: a change is logged exactly when it happened.
        let log = Sql::new(
            "INSERT INTO review_events (id, session_id, actor, action, from_status, to_status, \
             assignee, rating, action_taken, feedback, created_at) \
             SELECT $1, id, $2, $3, $4, review_status, review_assignee, review_rating, \
             review_action_taken, review_feedback, $5 FROM alert_sessions WHERE id = $6",
        );
        let from_status = before.as_ref().map(|r| r.status.as_str());
        let changed = self
            .db
            .run("review", || {
                let (update, values, log) = (update.clone(), values.clone(), log.clone());
                async move {
                    let mut tx = self.db.begin().await?;
                    let mut sql = Sql::dynamic(update).bind(session_id).bind(at);
                    for v in values {
                        sql = sql.bind(v);
                    }
                    for s in from {
                        sql = sql.bind(s.as_str());
                    }
                    if tx.execute(sql).await? != 1 {
                        tx.rollback().await?;
                        return Ok(false);
                    }
                    tx.execute(
                        log.bind(new_id())
                            .bind(actor)
                            .bind(change.action().as_str())
                            .bind(from_status)
                            .bind(at)
                            .bind(session_id),
                    )
                    .await?;
                    tx.commit().await?;
                    Ok(true)
                }
            })
            .await?;
        let review = self.review(session_id).await?;
        if !changed {
            return Err(conflict(session_id, change, review.as_ref()));
        }
        let review = review.ok_or_else(|| StoreError::not_found(REVIEW, session_id))?;
        if matches!(
            change,
            ReviewChange::Complete { .. } | ReviewChange::Acknowledge { .. }
        ) {
            // Counted where every mode writes a review.
            self.count_review(&review, at).await;
        }
        Ok(review)
    }

    /// Counts a review by its rating (`acknowledged` without one) and
    /// observes how long after the session's end it came. The review is
    /// stored already: a failed read of the end time only skips that.
    async fn count_review(&self, review: &Review, at: DateTime<Utc>) {
        let rating = review.rating.map_or("acknowledged", |r| r.as_str());
        let finished = self
            .db
            .fetch_optional::<(Option<DateTime<Utc>>,)>(
                Sql::new("SELECT completed_at FROM alert_sessions WHERE id = $1")
                    .bind(review.session_id.as_str()),
            )
            .await;
        let finished = match finished {
            Ok(row) => row.and_then(|(t,)| t),
            Err(e) => {
                tracing::warn!(session_id = %review.session_id, error = %e,
                    "cannot read the reviewed session's end");
                None
            }
        };
        let reviewed = review.reviewed_at.unwrap_or(at);
        let after = finished.and_then(|f| (reviewed - f).to_std().ok());
        tarsy_telemetry::global().session_reviewed(rating, after);
    }

    /// Logs that TARSy reviewed a cancelled session itself (once; a session
    /// whose review a person changed already is left alone).
    pub(crate) async fn auto_acknowledge(&self, session_id: &str, at: DateTime<Utc>) -> Result<()> {
        self.db
            .execute(
                Sql::new(
                    "INSERT INTO review_events (id, session_id, actor, action, from_status, \
                     to_status, created_at) \
                     SELECT $1, id, $2, $3, NULL, review_status, $4 FROM alert_sessions \
                     WHERE id = $5 AND review_status = $6 \
                     AND NOT EXISTS (SELECT 1 FROM review_events WHERE session_id = $5)",
                )
                .bind(new_id())
                .bind(TARSY_ACTOR)
                .bind(ReviewAction::AutoAcknowledge.as_str())
                .bind(at)
                .bind(session_id)
                .bind(ReviewStatus::Reviewed.as_str()),
            )
            .await?;
        Ok(())
    }

    /// A session's review steps, oldest first.
    pub async fn review_events(&self, session_id: &str) -> Result<Vec<ReviewEvent>> {
        self.db
            .fetch_all(
                Sql::new(
                    "SELECT id, session_id, actor, action, from_status, to_status, assignee, \
                     rating, action_taken, feedback, created_at FROM review_events \
                     WHERE session_id = $1 ORDER BY created_at, id",
                )
                .bind(session_id),
            )
            .await
    }
}

/// The conflict of a change the review's status does not allow, naming
/// where it stands.
fn conflict(session_id: &str, change: &ReviewChange, review: Option<&Review>) -> StoreError {
    let action = change.action();
    let message = match review {
        None => format!(
            "session {session_id:?} is still being investigated: it can be reviewed once it has finished"
        ),
        Some(r) => {
            let who = match (&r.assignee, r.status) {
                (Some(a), ReviewStatus::InProgress) => format!(" (claimed by {a})"),
                (Some(a), ReviewStatus::Reviewed) => format!(" (by {a})"),
                _ => String::new(),
            };
            format!("the review is {}{who}: cannot {action} it", r.status)
        }
    };
    StoreError::Conflict {
        kind: REVIEW,
        message,
    }
}
