//! Retention as an SRE sees it over months, with the clock moved by the
//! test: finished sessions leave the list after the retention period but
//! stay readable by id, are removed for good after the purge period, a
//! running session is never touched, old live events expire, and Slack
//! threads are forgotten with the sessions. On both backends.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use tarsy_core::SessionStatus;
use tarsy_exec::retention::{Retention, sweep};
use tarsy_store::testing::TestDatabase;
use tarsy_store::{NewSession, SessionFilter, SessionOutcome, Store};

const DAY: Duration = Duration::from_secs(24 * 3600);

fn days(n: i64) -> chrono::Duration {
    chrono::Duration::days(n)
}

fn session(id: &str) -> NewSession {
    NewSession {
        id: id.into(),
        alert_data: "pod: web-0".into(),
        alert_type: "PodCrash".into(),
        chain_id: "c".into(),
        author: None,
        runbook_url: None,
        mcp_selection: None,
        memory_scope: None,
    }
}

async fn listed(store: &Store) -> Vec<String> {
    let mut ids: Vec<String> = store
        .list_sessions(&SessionFilter::default())
        .await
        .unwrap()
        .sessions
        .into_iter()
        .map(|s| s.id)
        .collect();
    ids.sort();
    ids
}

async fn retention_over_months(store: Store) {
    let policy = Retention {
        hide_after: Some(90 * DAY),
        purge_after: Some(30 * DAY),
        event_ttl: Some(DAY),
    };
    store.create_session(session("done")).await.unwrap();
    store
        .update_session_status("done", SessionStatus::InProgress)
        .await
        .unwrap();
    store
        .finish_session(
            "done",
            SessionOutcome {
                status: SessionStatus::Completed,
                final_analysis: Some("disk full".into()),
                executive_summary: None,
                executive_summary_error: None,
                error_message: None,
                end_reason: None,
            },
        )
        .await
        .unwrap();
    store.create_session(session("running")).await.unwrap();
    store
        .update_session_status("running", SessionStatus::InProgress)
        .await
        .unwrap();
    store
        .insert_event("done", "session:done", json!({"type": "session.status"}))
        .await
        .unwrap();
    store
        .open_slack_thread("fingerprint-1", "#sre", "1700000000.000100")
        .await
        .unwrap();
    let start: DateTime<Utc> = Utc::now();

    // Within the retention period nothing changes, but old events expire.
    let s = sweep(&policy, &store, start + days(89)).await.unwrap();
    assert_eq!((s.hidden, s.purged, s.events, s.threads), (0, 0, 1, 0));
    assert_eq!(listed(&store).await, ["done", "running"]);
    assert!(
        store
            .slack_thread("fingerprint-1", "#sre")
            .await
            .unwrap()
            .is_some()
    );

    // After it, the finished session leaves the list, still readable by id.
    let hidden_at = start + days(91);
    let s = sweep(&policy, &store, hidden_at).await.unwrap();
    assert_eq!((s.hidden, s.purged, s.threads), (1, 0, 1));
    assert_eq!(listed(&store).await, ["running"]);
    // Its Slack thread is forgotten with it: a new episode opens a new one.
    assert_eq!(
        store.slack_thread("fingerprint-1", "#sre").await.unwrap(),
        None
    );
    let done = store.get_session("done").await.unwrap();
    assert_eq!(done.final_analysis.as_deref(), Some("disk full"));

    // Removed only once the purge period after hiding has passed.
    let s = sweep(&policy, &store, hidden_at + days(29)).await.unwrap();
    assert_eq!(s.purged, 0);
    assert!(store.get_session("done").await.is_ok());
    let s = sweep(&policy, &store, hidden_at + days(31)).await.unwrap();
    assert_eq!(s.purged, 1);
    assert!(store.get_session("done").await.unwrap_err().is_not_found());

    // The running session is never touched, however late.
    let s = sweep(&policy, &store, start + days(3650)).await.unwrap();
    assert_eq!((s.hidden, s.purged), (0, 0));
    assert_eq!(listed(&store).await, ["running"]);

    // `None` keeps forever.
    let keep = Retention {
        hide_after: None,
        purge_after: None,
        event_ttl: None,
    };
    let s = sweep(&keep, &store, start + days(36500)).await.unwrap();
    assert_eq!((s.hidden, s.purged, s.events), (0, 0, 0));
}

#[tokio::test]
async fn retention_over_months_sqlite() {
    retention_over_months(Store::sqlite_in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn retention_over_months_postgres() {
    let db = TestDatabase::create("tarsy_exec_retention")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let store = Store::connect(db.url()).await.unwrap();
    retention_over_months(store.clone()).await;
    store.close().await;
    db.drop_database().await.unwrap();
}
