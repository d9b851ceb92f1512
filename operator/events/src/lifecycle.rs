//! The lifecycle events every driver publishes the same way — local mode,
//! the operator, the runner and the cluster-mode API: `session.status` (on
//! the session's channel and the session list), `stage.status`, and an
//! accepted chat question (`chat.created`, `chat.user_message`), and a
//! scoring attempt's start and end (`session.score`), and a change of a
//! session's review (`session.review`). Delivery
//! is best effort: the records are stored already, a failure is logged.

use tarsy_core::control::{ChatAccepted, ChatSubmission};
use tarsy_core::recorder::{SESSIONS_CHANNEL, session_channel};
use tarsy_core::stream::timestamp;
use tarsy_core::{
    EventPublisher, ExecutionStatus, ReviewAction, ReviewRating, ReviewStatus, ScoreStatus,
    SessionStatus, StreamEvent,
};

/// A stage as `stage.status` names it.
#[derive(Debug, Clone, Copy)]
pub struct PublishedStage<'a> {
    /// Stage row id.
    pub id: &'a str,
    /// Stage name.
    pub name: &'a str,
    /// Stage index within the session.
    pub index: i64,
}

/// Publishes `session.status` on the session's channel and on `sessions`.
pub async fn publish_session_status(
    publisher: &dyn EventPublisher,
    session_id: &str,
    status: SessionStatus,
) {
    let event = StreamEvent::SessionStatus {
        session_id: session_id.to_string(),
        status,
        timestamp: timestamp(),
    };
    publish(publisher, &session_channel(session_id), &event).await;
    publish(publisher, SESSIONS_CHANNEL, &event).await;
}

/// Publishes `session.score` on the session's channel and on `sessions`
/// (lists show scores).
pub async fn publish_session_score(
    publisher: &dyn EventPublisher,
    session_id: &str,
    attempt_id: &str,
    status: ScoreStatus,
    score: Option<u8>,
    failure_tags: &[String],
) {
    let event = StreamEvent::SessionScore {
        session_id: session_id.to_string(),
        attempt_id: attempt_id.to_string(),
        status,
        score,
        failure_tags: failure_tags.to_vec(),
        timestamp: timestamp(),
    };
    publish(publisher, &session_channel(session_id), &event).await;
    publish(publisher, SESSIONS_CHANNEL, &event).await;
}

/// Publishes `session.review` on the session's channel and on `sessions`
/// (the triage view lists reviews).
pub async fn publish_session_review(
    publisher: &dyn EventPublisher,
    actor: &str,
    action: ReviewAction,
    review: &ReviewState<'_>,
) {
    let event = StreamEvent::SessionReview {
        session_id: review.session_id.to_string(),
        action,
        actor: actor.to_string(),
        status: review.status,
        assignee: review.assignee.map(str::to_string),
        rating: review.rating,
        timestamp: timestamp(),
    };
    publish(publisher, &session_channel(review.session_id), &event).await;
    publish(publisher, SESSIONS_CHANNEL, &event).await;
}

/// A review as `session.review` names it.
#[derive(Debug, Clone, Copy)]
pub struct ReviewState<'a> {
    /// The session.
    pub session_id: &'a str,
    /// Where its review stands.
    pub status: ReviewStatus,
    /// Who has it, or who reviewed it.
    pub assignee: Option<&'a str>,
    /// The rating, once rated.
    pub rating: Option<ReviewRating>,
}

/// Publishes `stage.status` on the session's channel: `started` for a
/// pending or active stage, else its outcome.
pub async fn publish_stage_status(
    publisher: &dyn EventPublisher,
    session_id: &str,
    stage: PublishedStage<'_>,
    status: ExecutionStatus,
) {
    let event = StreamEvent::StageStatus {
        session_id: session_id.to_string(),
        stage_id: stage.id.to_string(),
        stage_name: stage.name.to_string(),
        stage_index: stage.index,
        status: status.into(),
        timestamp: timestamp(),
    };
    publish(publisher, &session_channel(session_id), &event).await;
}

async fn publish(publisher: &dyn EventPublisher, channel: &str, event: &StreamEvent) {
    if let Err(e) = publisher.publish(channel, event).await {
        tracing::warn!(session_id = %event.session_id(), %channel, error = %e, "event not published");
    }
}

/// Publishes an accepted question on its session's channel: `chat.created`
/// when it opened the chat, then `chat.user_message` with the question as
/// stored (`question`: trimmed and masked). Live delivery is best effort
/// (the records are stored already): a failure is logged.
pub async fn publish_chat_accepted(
    publisher: &dyn EventPublisher,
    submission: &ChatSubmission,
    accepted: &ChatAccepted,
    question: &str,
) {
    let session_id = submission.session_id.as_str();
    let channel = session_channel(session_id);
    let now = timestamp();
    if accepted.chat_created {
        let created = StreamEvent::ChatCreated {
            session_id: session_id.to_string(),
            chat_id: accepted.chat_id.clone(),
            created_by: submission.author.clone(),
            timestamp: now.clone(),
        };
        publish(publisher, &channel, &created).await;
    }
    let message = StreamEvent::ChatUserMessage {
        session_id: session_id.to_string(),
        chat_id: accepted.chat_id.clone(),
        message_id: accepted.message_id.clone(),
        stage_id: accepted.stage_id.clone(),
        content: question.to_string(),
        author: submission.author.clone(),
        timestamp: now,
    };
    publish(publisher, &channel, &message).await;
}
