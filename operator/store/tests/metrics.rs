//! The judge's scores and people's reviews are counted where the store
//! writes them (unless it is told the scores are counted elsewhere): scores by chain and alert
//! type, failure tags, scoring attempts by outcome, reviews by rating and
//! the time from a session's end to its review.
//!
//! The registry is the process's: series carry labels only this test (and
//! backend) uses, the others are compared before and after, and the
//! backends take turns (`cargo test` runs them in one process).

mod common;

use std::time::Duration;

use tarsy_core::{ReviewRating, SessionStatus};
use tarsy_store::{BackendKind, NewSession, ReviewChange, ScoreResult, SessionOutcome, Store};

on_both_backends!(scores_and_reviews_written_through_the_store_are_counted);

/// One backend's test at a time: they read the same registry.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const ALERT_TYPE: &str = "MetricsTestAlert";

/// A chain name only this backend's test uses.
fn chain(store: &Store) -> String {
    match store.backend() {
        BackendKind::Postgres => "metrics-test-postgres".into(),
        BackendKind::Sqlite => "metrics-test-sqlite".into(),
    }
}

/// The value of the sample `series` (name and labels as exposed), if any.
fn sample(series: &str) -> Option<f64> {
    let text = tarsy_telemetry::global().encode("");
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        Some(value.parse().expect("a sample value"))
    })
}

fn value(series: &str) -> f64 {
    sample(series).unwrap_or(0.0)
}

async fn finished_session(store: &Store, id: &str) {
    store
        .create_session(NewSession {
            id: id.into(),
            alert_data: "{}".into(),
            alert_type: ALERT_TYPE.into(),
            chain_id: chain(store),
            author: None,
            runbook_url: None,
            mcp_selection: None,
            memory_scope: None,
        })
        .await
        .unwrap();
    store
        .finish_session(
            id,
            SessionOutcome {
                status: SessionStatus::Completed,
                final_analysis: Some("done".into()),
                executive_summary: None,
                executive_summary_error: None,
                error_message: None,
                end_reason: None,
            },
        )
        .await
        .unwrap();
}

fn result(score: u8, tags: &[&str]) -> ScoreResult {
    ScoreResult {
        score,
        outcome: "correct".into(),
        failure_tags: tags.iter().map(|t| t.to_string()).collect(),
        assessment: "ok".into(),
        tool_report: None,
    }
}

async fn scores_and_reviews_written_through_the_store_are_counted(store: Store) {
    let _turn = TURN.lock().await;
    let chain = chain(&store);
    let labels = format!("chain=\"{chain}\",alert_type=\"{ALERT_TYPE}\"");
    let tag_a = format!("{chain}-tag-a");
    let tag_b = format!("{chain}-tag-b");
    let completed = "tarsy_scoring_attempts_total{outcome=\"completed\"}";
    let failed = "tarsy_scoring_attempts_total{outcome=\"failed\"}";
    let (completed_before, failed_before) = (value(completed), value(failed));

    finished_session(&store, "m1").await;
    finished_session(&store, "m2").await;
    let first = store.start_score_attempt("m1", None, None).await.unwrap();
    store
        .complete_score(&first.id, &result(35, &[&tag_a, &tag_b]))
        .await
        .unwrap();
    let second = store.start_score_attempt("m2", None, None).await.unwrap();
    store
        .complete_score(&second.id, &result(90, &[&tag_a]))
        .await
        .unwrap();
    // An attempt that has ended already is a conflict, and not counted again.
    assert!(
        store
            .complete_score(&second.id, &result(10, &[&tag_b]))
            .await
            .is_err()
    );
    let third = store.start_score_attempt("m2", None, None).await.unwrap();
    store.fail_score(&third.id, "no score").await.unwrap();

    assert_eq!(
        sample(&format!("tarsy_session_score_count{{{labels}}}")),
        Some(2.0)
    );
    assert_eq!(
        sample(&format!("tarsy_session_score_sum{{{labels}}}")),
        Some(125.0)
    );
    assert_eq!(
        sample(&format!(
            "tarsy_session_score_bucket{{le=\"40.0\",{labels}}}"
        )),
        Some(1.0)
    );
    assert_eq!(
        sample(&format!(
            "tarsy_session_score_bucket{{le=\"90.0\",{labels}}}"
        )),
        Some(2.0)
    );
    assert_eq!(
        sample(&format!(
            "tarsy_score_failure_tags_total{{tag=\"{tag_a}\"}}"
        )),
        Some(2.0)
    );
    assert_eq!(
        sample(&format!(
            "tarsy_score_failure_tags_total{{tag=\"{tag_b}\"}}"
        )),
        Some(1.0)
    );
    assert_eq!(value(completed) - completed_before, 2.0);
    assert_eq!(value(failed) - failed_before, 1.0);

    // A store told that the ends it writes are counted elsewhere (a
    // cluster's operator counts them from the Alerts) counts none.
    let uncounted = store.without_score_metrics();
    let fourth = uncounted
        .start_score_attempt("m1", None, None)
        .await
        .unwrap();
    uncounted
        .complete_score(&fourth.id, &result(70, &[&tag_a]))
        .await
        .unwrap();
    let fifth = uncounted
        .start_score_attempt("m1", None, None)
        .await
        .unwrap();
    uncounted.fail_score(&fifth.id, "no score").await.unwrap();
    assert_eq!(value(completed) - completed_before, 2.0);
    assert_eq!(value(failed) - failed_before, 1.0);
    assert_eq!(
        sample(&format!("tarsy_session_score_count{{{labels}}}")),
        Some(2.0)
    );

    // Reviews: a claim is not a review; a completion counts its rating, an
    // acknowledgement counts as `acknowledged`; each observes the time since
    // the session ended.
    let accurate = "tarsy_reviews_total{rating=\"partially_accurate\"}";
    let acknowledged = "tarsy_reviews_total{rating=\"acknowledged\"}";
    let delays = "tarsy_time_to_review_seconds_count";
    let delay_sum = "tarsy_time_to_review_seconds_sum";
    let before = (
        value(accurate),
        value(acknowledged),
        value(delays),
        value(delay_sum),
    );
    store
        .change_review("m1", "alice", &ReviewChange::Claim)
        .await
        .unwrap();
    assert_eq!(value(delays), before.2, "a claim is not a review");
    store
        .change_review(
            "m1",
            "alice",
            &ReviewChange::Complete {
                rating: ReviewRating::PartiallyAccurate,
                action_taken: None,
                feedback: None,
            },
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    store
        .change_review(
            "m2",
            "bob",
            &ReviewChange::Acknowledge {
                action_taken: None,
                feedback: None,
            },
        )
        .await
        .unwrap();
    // A second completion is a conflict: not counted.
    assert!(
        store
            .change_review(
                "m2",
                "bob",
                &ReviewChange::Acknowledge {
                    action_taken: None,
                    feedback: None,
                },
            )
            .await
            .is_err()
    );
    assert_eq!(value(accurate) - before.0, 1.0);
    assert_eq!(value(acknowledged) - before.1, 1.0);
    assert_eq!(value(delays) - before.2, 2.0);
    // Both reviews came right after the sessions ended, the second one at
    // least 20 ms after.
    let waited = value(delay_sum) - before.3;
    assert!((0.02..60.0).contains(&waited), "{waited}");
}
