//! The lifecycle events every driver publishes the same way — local mode,
//! the operator, the runner and the cluster-mode API: `session.status` (on
//! the session's channel and the session list), `stage.status`, and an
//! accepted chat question (`chat.created`, `chat.user_message`). Delivery
//! is best effort: the records are stored already, a failure is logged.

use chrono::Utc;
use serde_json::{Value, json};
use tarsy_core::control::{ChatAccepted, ChatSubmission};
use tarsy_core::recorder::{SESSIONS_CHANNEL, session_channel};
use tarsy_core::{EventPublisher, SessionStatus};

/// A stage as `stage.status` names it.
#[derive(Debug, Clone, Copy)]
pub struct StageRef<'a> {
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
    let payload = json!({
        "type": "session.status",
        "session_id": session_id,
        "status": status.as_str(),
        "timestamp": Utc::now().to_rfc3339(),
    });
    publish(
        publisher,
        session_id,
        &session_channel(session_id),
        payload.clone(),
    )
    .await;
    publish(publisher, session_id, SESSIONS_CHANNEL, payload).await;
}

/// Publishes `stage.status` (`started`, `completed`, `failed`, `timed_out`,
/// `cancelled`) on the session's channel.
pub async fn publish_stage_status(
    publisher: &dyn EventPublisher,
    session_id: &str,
    stage: StageRef<'_>,
    status: &str,
) {
    let payload = json!({
        "type": "stage.status",
        "session_id": session_id,
        "stage_id": stage.id,
        "stage_name": stage.name,
        "stage_index": stage.index,
        "status": status,
        "timestamp": Utc::now().to_rfc3339(),
    });
    publish(publisher, session_id, &session_channel(session_id), payload).await;
}

async fn publish(publisher: &dyn EventPublisher, session_id: &str, channel: &str, payload: Value) {
    if let Err(e) = publisher.publish(session_id, channel, payload).await {
        tracing::warn!(%session_id, %channel, error = %e, "event not published");
    }
}

/// Publishes an accepted question on its session's channel: `chat.created`
/// when it opened the chat, then `chat.user_message`. Live delivery is best
/// effort (the records are stored already): a failure is logged.
pub async fn publish_chat_accepted(
    publisher: &dyn EventPublisher,
    submission: &ChatSubmission,
    accepted: &ChatAccepted,
) {
    let session_id = submission.session_id.as_str();
    let channel = session_channel(session_id);
    let now = chrono::Utc::now().to_rfc3339();
    let mut events = Vec::with_capacity(2);
    if accepted.chat_created {
        events.push(serde_json::json!({
            "type": "chat.created",
            "session_id": session_id,
            "chat_id": accepted.chat_id,
            "created_by": submission.author,
            "timestamp": now,
        }));
    }
    events.push(serde_json::json!({
        "type": "chat.user_message",
        "session_id": session_id,
        "chat_id": accepted.chat_id,
        "message_id": accepted.message_id,
        "stage_id": accepted.stage_id,
        "content": submission.content.trim(),
        "author": submission.author,
        "timestamp": now,
    }));
    for event in events {
        if let Err(e) = publisher.publish(session_id, &channel, event).await {
            tracing::warn!(%session_id, error = %e, "chat event not published");
        }
    }
}
