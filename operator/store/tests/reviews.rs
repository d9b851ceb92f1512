//! People's reviews on both backends: a finished session enters review (a
//! cancelled one is reviewed by TARSy), claims, reassignment, completion
//! with a rating or without, edits afterwards; concurrent claims (one
//! wins); changes the review's status does not allow are conflicts that
//! say where it stands; every step in the audit log.

mod common;

use common::session;
use tarsy_core::{ReviewAction, ReviewRating, ReviewStatus, SessionStatus};
use tarsy_store::{ReviewChange, SessionOutcome, Store, StoreError};

on_both_backends!(
    a_finished_session_is_claimed_reviewed_and_edited,
    one_of_two_concurrent_claims_wins,
    changes_the_status_does_not_allow_are_conflicts,
    a_cancelled_session_is_reviewed_by_tarsy,
);

async fn finished(store: &Store, id: &str, status: SessionStatus) {
    store.create_session(session(id)).await.unwrap();
    store
        .finish_session(
            id,
            SessionOutcome {
                status,
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

fn conflict_message(e: StoreError) -> String {
    match e {
        StoreError::Conflict { message, .. } => message,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

async fn a_finished_session_is_claimed_reviewed_and_edited(store: Store) {
    store.create_session(session("s1")).await.unwrap();
    assert_eq!(
        store.review("s1").await.unwrap(),
        None,
        "not finished: not in review"
    );
    store
        .finish_session(
            "s1",
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
    let review = store.review("s1").await.unwrap().unwrap();
    assert_eq!(
        (review.status, review.assignee.as_deref()),
        (ReviewStatus::NeedsReview, None)
    );

    let claimed = store
        .change_review("s1", "alice", &ReviewChange::Claim)
        .await
        .unwrap();
    assert_eq!(
        (claimed.status, claimed.assignee.as_deref()),
        (ReviewStatus::InProgress, Some("alice"))
    );
    let handed = store
        .change_review(
            "s1",
            "alice",
            &ReviewChange::Reassign {
                assignee: "bob".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(handed.assignee.as_deref(), Some("bob"));
    let done = store
        .change_review(
            "s1",
            "bob",
            &ReviewChange::Complete {
                rating: ReviewRating::PartiallyAccurate,
                action_taken: Some("rolled back".into()),
                feedback: Some("  missed the node  ".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(done.status, ReviewStatus::Reviewed);
    assert_eq!(done.rating, Some(ReviewRating::PartiallyAccurate));
    assert_eq!(done.feedback.as_deref(), Some("missed the node"));
    assert!(done.reviewed_at.is_some());
    // Editable afterwards; what is not given is kept.
    let edited = store
        .change_review(
            "s1",
            "carol",
            &ReviewChange::Update {
                rating: Some(ReviewRating::Accurate),
                action_taken: None,
                feedback: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(edited.rating, Some(ReviewRating::Accurate));
    assert_eq!(edited.action_taken.as_deref(), Some("rolled back"));
    // Lists show it.
    let listed = store.get_session("s1").await.unwrap().review.unwrap();
    assert_eq!(
        (listed.status, listed.assignee.as_deref(), listed.rating),
        (
            ReviewStatus::Reviewed,
            Some("bob"),
            Some(ReviewRating::Accurate)
        )
    );

    let log: Vec<(String, ReviewAction, Option<ReviewStatus>, ReviewStatus)> = store
        .review_events("s1")
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.actor, e.action, e.from_status, e.to_status))
        .collect();
    use ReviewStatus::*;
    assert_eq!(
        log,
        [
            (
                "alice".to_string(),
                ReviewAction::Claim,
                Some(NeedsReview),
                InProgress
            ),
            (
                "alice".to_string(),
                ReviewAction::Reassign,
                Some(InProgress),
                InProgress
            ),
            (
                "bob".to_string(),
                ReviewAction::Complete,
                Some(InProgress),
                Reviewed
            ),
            (
                "carol".to_string(),
                ReviewAction::Update,
                Some(Reviewed),
                Reviewed
            ),
        ]
    );
}

async fn one_of_two_concurrent_claims_wins(store: Store) {
    for n in 0..5 {
        let id = format!("s{n}");
        finished(&store, &id, SessionStatus::Failed).await;
        let (a, b) = tokio::join!(
            store.change_review(&id, "alice", &ReviewChange::Claim),
            store.change_review(&id, "bob", &ReviewChange::Claim),
        );
        let (winner, loser) = match (a, b) {
            (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
            other => panic!("exactly one claim must win: {other:?}"),
        };
        let message = conflict_message(loser);
        let who = winner.assignee.unwrap();
        assert_eq!(
            message,
            format!("the review is in_progress (claimed by {who}): cannot claim it")
        );
        assert_eq!(
            store.review_events(&id).await.unwrap().len(),
            1,
            "one claim logged"
        );
    }
}

async fn changes_the_status_does_not_allow_are_conflicts(store: Store) {
    store.create_session(session("running")).await.unwrap();
    let early = store
        .change_review("running", "alice", &ReviewChange::Claim)
        .await
        .unwrap_err();
    assert!(conflict_message(early).contains("is still being investigated"));

    finished(&store, "s1", SessionStatus::Completed).await;
    let unclaim = store
        .change_review("s1", "alice", &ReviewChange::Unclaim)
        .await
        .unwrap_err();
    assert_eq!(
        conflict_message(unclaim),
        "the review is needs_review: cannot unclaim it"
    );
    let update = store
        .change_review(
            "s1",
            "alice",
            &ReviewChange::Update {
                rating: None,
                action_taken: None,
                feedback: Some("x".into()),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(
        conflict_message(update),
        "the review is needs_review: cannot update it"
    );
    store
        .change_review(
            "s1",
            "alice",
            &ReviewChange::Acknowledge {
                action_taken: None,
                feedback: None,
            },
        )
        .await
        .unwrap();
    let again = store
        .change_review("s1", "bob", &ReviewChange::Claim)
        .await
        .unwrap_err();
    assert_eq!(
        conflict_message(again),
        "the review is reviewed (by alice): cannot claim it"
    );
    let nobody = store
        .change_review("s1", "  ", &ReviewChange::Claim)
        .await
        .unwrap_err();
    assert!(matches!(nobody, StoreError::InvalidInput(_)), "{nobody}");
    let missing = store
        .change_review("nope", "alice", &ReviewChange::Claim)
        .await
        .unwrap_err();
    assert!(matches!(missing, StoreError::NotFound { .. }), "{missing}");
    // Refused changes are not logged.
    assert_eq!(store.review_events("s1").await.unwrap().len(), 1);
}

async fn a_cancelled_session_is_reviewed_by_tarsy(store: Store) {
    finished(&store, "c1", SessionStatus::Cancelled).await;
    let review = store.review("c1").await.unwrap().unwrap();
    assert_eq!(
        (review.status, review.rating),
        (ReviewStatus::Reviewed, None)
    );
    let log = store.review_events("c1").await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(
        (log[0].actor.as_str(), log[0].action),
        ("tarsy", ReviewAction::AutoAcknowledge)
    );
}
