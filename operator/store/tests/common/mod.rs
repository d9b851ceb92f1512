//! Runs one test body against a fresh SQLite database and a fresh Postgres
//! database, and builds the records the tests share.

#![allow(dead_code)]

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use serde_json::json;
use tarsy_core::{
    ExecutionKind, IterationStrategy, NewTimelineEvent, RecordScope, TimelineEventStatus,
    TimelineEventType,
};
use tarsy_store::testing::{TempSqlite, TestDatabase};
use tarsy_store::{ConnectOptions, NewAgentExecution, NewSession, NewStage, Store};

/// Runs `test` against a new SQLite file database (several pooled
/// connections, WAL, as local mode uses it), then deletes it.
pub async fn with_sqlite<F, Fut>(test: F)
where
    F: FnOnce(Store) -> Fut,
    Fut: Future<Output = ()>,
{
    // A panicking test drops `db` while unwinding, which removes the file.
    let db = TempSqlite::new("tarsy_store_test");
    let store = Store::connect_with(
        &db.url(),
        ConnectOptions {
            max_connections: 4,
            ..ConnectOptions::default()
        },
    )
    .await
    .expect("open SQLite test database");
    test(store.clone()).await;
    store.close().await;
}

/// Runs `test` against a new Postgres database created for it (so tests run
/// in parallel without sharing rows), then drops that database. Fails — never
/// skips — when the server is unreachable.
pub async fn with_postgres<F, Fut>(test: F)
where
    F: FnOnce(Store) -> Fut,
    Fut: Future<Output = ()>,
{
    let db = TestDatabase::create("tarsy_test")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let store = Store::connect_with(
        db.url(),
        ConnectOptions {
            max_connections: 6,
            ..ConnectOptions::default()
        },
    )
    .await
    .expect("connect to the test database and migrate it");
    let outcome = AssertUnwindSafe(test(store.clone())).catch_unwind().await;
    store.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    db.drop_database().await.unwrap_or_else(|e| panic!("{e}"));
}

/// Declares each listed `async fn name(store: Store)` as two tests,
/// `name::sqlite` and `name::postgres`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    $crate::common::with_sqlite(super::$name).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    $crate::common::with_postgres(super::$name).await
                }
            }
        )*
    };
}

/// Declares each listed `async fn name(store: Store)` as a Postgres-only test
/// (features SQLite does not have: NOTIFY, row locks).
#[macro_export]
macro_rules! on_postgres {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    $crate::common::with_postgres(super::$name).await
                }
            }
        )*
    };
}

// ------------------------------------------------------------ builders

/// A session with an id, type and chain.
pub fn session(id: &str) -> NewSession {
    NewSession {
        id: id.to_string(),
        alert_data: format!("{{\"alert\": \"{id}\", \"pod\": \"api-7\"}}"),
        alert_type: "PodCrashLooping".into(),
        chain_id: "k8s-chain".into(),
        author: Some("alice".into()),
        runbook_url: None,
        mcp_selection: None,
        memory_scope: None,
    }
}

/// A single-agent stage at `index`.
pub fn stage(session_id: &str, index: i64) -> NewStage {
    NewStage {
        id: None,
        session_id: session_id.to_string(),
        stage_name: format!("stage {index}"),
        kind: tarsy_core::StageKind::Investigation,
        stage_index: index,
        expected_agent_count: 1,
        parallel_type: None,
        success_policy: None,
        chat_id: None,
        chat_user_message_id: None,
    }
}

/// An investigation execution at `index`.
pub fn execution(session_id: &str, stage_id: &str, name: &str, index: i64) -> NewAgentExecution {
    NewAgentExecution {
        id: None,
        stage_id: stage_id.to_string(),
        session_id: session_id.to_string(),
        agent_name: name.to_string(),
        agent_index: index,
        kind: ExecutionKind::Investigation,
        iteration_strategy: IterationStrategy::NativeThinking,
        llm_provider: Some("gemini-2.5-pro".into()),
    }
}

/// A scope naming all three levels.
pub fn scope(session_id: &str, stage_id: &str, execution_id: &str) -> RecordScope {
    RecordScope {
        session_id: session_id.to_string(),
        stage_id: Some(stage_id.to_string()),
        execution_id: Some(execution_id.to_string()),
    }
}

/// A streaming LLM response event with empty content.
pub fn streaming_event(scope: RecordScope, seq: i64) -> NewTimelineEvent {
    NewTimelineEvent {
        scope,
        sequence_number: seq,
        event_type: TimelineEventType::LlmResponse,
        status: TimelineEventStatus::Streaming,
        content: String::new(),
        metadata: json!({}),
    }
}

/// A session with one stage and one execution; returns (stage id, execution id).
pub async fn seeded(store: &Store, session_id: &str) -> (String, String) {
    store.create_session(session(session_id)).await.unwrap();
    let st = store.create_stage(stage(session_id, 0)).await.unwrap();
    let ex = store
        .create_agent_execution(execution(session_id, &st.id, "KubernetesAgent", 1))
        .await
        .unwrap();
    (st.id, ex.id)
}
