//! The quality page's aggregates on both backends: scores by day, chain
//! and alert type; failure tags by frequency; ratings against scores with
//! the disagreements; the latest tool reports; the filters.

mod common;

use common::session;
use tarsy_core::{ReviewRating, SessionStatus};
use tarsy_store::{NewSession, QualityFilter, ReviewChange, ScoreResult, SessionOutcome, Store};

on_both_backends!(aggregates_scores_tags_ratings_and_tool_reports);

async fn scored(store: &Store, id: &str, alert_type: &str, score: u8, tags: &[&str], report: &str) {
    store
        .create_session(NewSession {
            alert_type: alert_type.into(),
            ..session(id)
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
    let attempt = store.start_score_attempt(id, None, None).await.unwrap();
    store
        .complete_score(
            &attempt.id,
            &ScoreResult {
                score,
                outcome: "correct".into(),
                failure_tags: tags.iter().map(|t| t.to_string()).collect(),
                assessment: "SCORE".into(),
                tool_report: Some(report.into()),
            },
        )
        .await
        .unwrap();
}

async fn rate(store: &Store, id: &str, rating: ReviewRating) {
    store
        .change_review(
            id,
            "alice",
            &ReviewChange::Complete {
                rating,
                action_taken: None,
                feedback: None,
            },
        )
        .await
        .unwrap();
}

async fn aggregates_scores_tags_ratings_and_tool_reports(store: Store) {
    scored(
        &store,
        "a",
        "OOM",
        90,
        &["missed-available-tool"],
        "MISSING TOOLS:\n- node memory: x",
    )
    .await;
    scored(
        &store,
        "b",
        "OOM",
        20,
        &["missed-available-tool", "wrong-conclusion"],
        "MISSING TOOLS:\n- node memory: y",
    )
    .await;
    scored(&store, "c", "Disk", 50, &[], "MISSING TOOLS:\n- none").await;
    rate(&store, "a", ReviewRating::Inaccurate).await; // scored good, rated inaccurate
    rate(&store, "b", ReviewRating::Inaccurate).await; // they agree

    let all = QualityFilter::default();
    let days = store.score_days(&all).await.unwrap();
    let rows: Vec<(&str, i64, f64, i64, i64, i64)> = days
        .iter()
        .map(|d| {
            (
                d.alert_type.as_str(),
                d.scored,
                d.average,
                d.good,
                d.partial,
                d.poor,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [("Disk", 1, 50.0, 0, 1, 0), ("OOM", 2, 55.0, 1, 0, 1)]
    );
    assert_eq!(days[0].day.len(), 10, "a YYYY-MM-DD day: {}", days[0].day);

    let tags: Vec<(String, i64)> = store
        .failure_tag_counts(&all)
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.tag, t.count))
        .collect();
    assert_eq!(
        tags,
        [
            ("missed-available-tool".to_string(), 2),
            ("wrong-conclusion".to_string(), 1)
        ]
    );

    let (matrix, disagreements) = store.ratings_against_scores(&all, 10).await.unwrap();
    let matrix: Vec<(&str, &str, i64)> = matrix
        .iter()
        .map(|m| (m.rating.as_str(), m.band.as_str(), m.count))
        .collect();
    assert_eq!(
        matrix,
        [("inaccurate", "good", 1), ("inaccurate", "poor", 1)]
    );
    assert_eq!(
        disagreements
            .iter()
            .map(|d| d.session_id.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );

    let reports = store.tool_reports(&all, 10).await.unwrap();
    assert_eq!(reports.len(), 3);

    // The filters narrow every aggregate.
    let oom = QualityFilter {
        alert_type: Some("OOM".into()),
        since: Some(chrono::Utc::now() - chrono::Duration::hours(1)),
        ..QualityFilter::default()
    };
    assert_eq!(store.score_days(&oom).await.unwrap().len(), 1);
    assert_eq!(store.tool_reports(&oom, 10).await.unwrap().len(), 2);
    let later = QualityFilter {
        since: Some(chrono::Utc::now() + chrono::Duration::hours(1)),
        ..QualityFilter::default()
    };
    assert!(store.failure_tag_counts(&later).await.unwrap().is_empty());
}
