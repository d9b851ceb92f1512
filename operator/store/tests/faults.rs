//! The store when its database blinks: a Postgres restarted as a failover
//! restarts it, and a SQLite disk that fills up. Each test runs a database
//! of its own (`tarsy_store::testing::faults`), never the shared test
//! server.

mod common;

use std::time::{Duration, Instant};

use common::{scope, seeded, streaming_event};
use tarsy_core::{ExecutionStatus, SessionStatus, TimelineEventStatus};
use tarsy_store::testing::faults::{PrivatePostgres, SmallDisk};
use tarsy_store::{FAIL_FAST_LIMIT, SessionOutcome, Store};

fn outcome(status: SessionStatus) -> SessionOutcome {
    SessionOutcome {
        status,
        final_analysis: Some("done".into()),
        executive_summary: None,
        executive_summary_error: None,
        error_message: None,
        end_reason: None,
    }
}

/// Writes through a patient handle wait out a Postgres that is stopped
/// (`pg_ctl stop -m fast`) and started again 3 s later: every write lands,
/// once; meanwhile a fail-fast handle answers within its limit, with an
/// error that says the database is unavailable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_wait_out_a_postgres_restart_and_requests_fail_fast() {
    let pg = PrivatePostgres::start();
    let base = Store::connect(&pg.url()).await.expect("the private server");
    let patient = base.patient(Duration::from_secs(60));
    let api = base.fail_fast(FAIL_FAST_LIMIT);
    let (stage, execution) = seeded(&base, "s1").await;

    const EVENTS: i64 = 60;
    let writer = {
        let store = patient.clone();
        let scope = scope("s1", &stage, &execution);
        tokio::spawn(async move {
            for seq in 1..=EVENTS {
                let event = store
                    .create_timeline_event(streaming_event(scope.clone(), seq))
                    .await?;
                store
                    .complete_timeline_event(
                        &event.id,
                        &format!("answer {seq}"),
                        TimelineEventStatus::Completed,
                        None,
                    )
                    .await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok::<_, tarsy_store::StoreError>(())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pg = tokio::task::spawn_blocking(move || {
        pg.stop();
        pg
    })
    .await
    .unwrap();

    let asked = Instant::now();
    let refused = api.get_session("s1").await.expect_err("the server is down");
    let waited = asked.elapsed();
    assert!(refused.is_transient(), "{refused}");
    assert!(refused.unavailable_message().is_some(), "{refused}");
    assert!(
        waited < Duration::from_millis(2500),
        "answered after {waited:?}"
    );

    tokio::time::sleep(Duration::from_secs(3)).await;
    let pg = tokio::task::spawn_blocking(move || {
        pg.resume();
        pg
    })
    .await
    .unwrap();
    writer
        .await
        .unwrap()
        .expect("every write waited the outage out");

    let timeline = base.execution_timeline(&execution).await.unwrap();
    assert_eq!(timeline.len(), EVENTS as usize, "each event stored once");
    let mut seqs: Vec<i64> = timeline.iter().map(|e| e.sequence_number).collect();
    seqs.dedup();
    assert_eq!(seqs.len(), EVENTS as usize);
    assert!(
        timeline
            .iter()
            .all(|e| e.status == TimelineEventStatus::Completed),
        "nothing left streaming"
    );
    base.finish_session("s1", outcome(SessionStatus::Completed))
        .await
        .unwrap();
    drop(pg);
}

/// A write that cannot be committed because the disk is full is reported
/// as failed — never as done while nothing was stored — and succeeds once
/// space is freed. Also what the health check's write probe sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sqlite_disk_fails_writes_visibly_and_recovers() {
    let disk = SmallDisk::mount(4 * 1024 * 1024);
    let url = format!("sqlite:{}", disk.path().join("tarsy.db").display());
    let store = Store::connect(&url).await.expect("a fresh database");
    let (_, execution) = seeded(&store, "s1").await;
    store.probe_write().await.expect("writes go through");

    disk.fill();
    let probe = store.probe_write().await.expect_err("the disk is full");
    assert!(probe.is_disk_full(), "{probe}");
    let finish = store
        .finish_session("s1", outcome(SessionStatus::Failed))
        .await;
    let execution_status = store
        .update_agent_execution_status(&execution, ExecutionStatus::Failed, Some("x"))
        .await;
    // The writes failed, or they are stored: a success that did not store
    // is the silent loss this test is about.
    let stored = store.get_session("s1").await.map(|s| s.status);
    match &finish {
        Ok(_) => assert_eq!(stored.ok(), Some(SessionStatus::Failed)),
        Err(e) => assert!(e.is_disk_full(), "{e}"),
    }
    assert!(
        finish.is_err() || execution_status.is_err(),
        "a full disk took every write"
    );

    disk.free();
    store.probe_write().await.expect("writes go through again");
    store
        .finish_session("s1", outcome(SessionStatus::Completed))
        .await
        .expect("stored once space is back");
    store.close().await;
    let reopened = Store::connect(&url).await.unwrap();
    assert_eq!(
        reopened.get_session("s1").await.unwrap().status,
        SessionStatus::Completed
    );
    reopened.close().await;
}
