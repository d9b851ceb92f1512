//! Scoring attempts on both backends: every attempt kept, one running at a
//! time (concurrent starts: one wins), ended attempts stay ended.

mod common;

use common::session;
use tarsy_core::{ExecutionStatus, SessionStatus, StageKind};
use tarsy_store::{NewStage, ScoreBadge, ScoreResult, ScoreStatus, Store, StoreError};

on_both_backends!(
    attempts_are_kept_and_the_latest_completed_one_is_the_score,
    one_attempt_runs_at_a_time_even_when_two_start_at_once,
    ended_attempts_and_unknown_ids,
    a_judge_at_work_is_not_an_open_record_of_its_ended_session,
);

fn result(score: u8) -> ScoreResult {
    ScoreResult {
        score,
        outcome: "correct".into(),
        failure_tags: vec!["missed-available-tool".into()],
        assessment: "## Outcome\nRight.\nSCORE: 72".into(),
        tool_report: Some("MISSING TOOLS:\n- none".into()),
    }
}

async fn attempts_are_kept_and_the_latest_completed_one_is_the_score(store: Store) {
    store.create_session(session("s1")).await.unwrap();
    assert_eq!(store.latest_score("s1").await.unwrap(), None);
    assert_eq!(store.get_session("s1").await.unwrap().score, None);

    let first = store.start_score_attempt("s1", None, None).await.unwrap();
    assert_eq!((first.attempt, first.status), (1, ScoreStatus::InProgress));
    store
        .set_score_execution(&first.id, "exec-1")
        .await
        .unwrap();
    let done = store.complete_score(&first.id, &result(72)).await.unwrap();
    assert_eq!(done.status, ScoreStatus::Completed);
    assert_eq!(done.score, Some(72));
    assert_eq!(done.execution_id.as_deref(), Some("exec-1"));
    assert_eq!(done.failure_tags, ["missed-available-tool"]);
    assert!(done.completed_at.is_some());
    let badge = |status, score: Option<u8>| {
        Some(ScoreBadge {
            status,
            score,
            failure_tags: score
                .map(|_| vec!["missed-available-tool".to_string()])
                .unwrap_or_default(),
        })
    };
    assert_eq!(
        store.get_session("s1").await.unwrap().score,
        badge(ScoreStatus::Completed, Some(72))
    );

    // A re-score that fails keeps the previous score as the session's.
    let second = store
        .start_score_attempt("s1", Some("exec-2"), Some("pod-a"))
        .await
        .unwrap();
    assert_eq!(second.attempt, 2);
    assert_eq!(second.owner.as_deref(), Some("pod-a"));
    assert_eq!(
        store.running_score("s1").await.unwrap().map(|a| a.id),
        Some(second.id.clone())
    );
    assert_eq!(
        store.running_scores().await.unwrap(),
        std::slice::from_ref(&second)
    );
    // Lists show the re-score running, and the score it may replace.
    let listed = store.list_sessions(&Default::default()).await.unwrap();
    assert_eq!(
        listed.sessions[0].score,
        badge(ScoreStatus::InProgress, Some(72))
    );
    let failed = store
        .fail_score(&second.id, "the judge gave no score")
        .await
        .unwrap();
    assert_eq!(failed.status, ScoreStatus::Failed);
    assert_eq!(failed.score, None);
    assert_eq!(failed.error.as_deref(), Some("the judge gave no score"));
    assert_eq!(store.running_score("s1").await.unwrap(), None);
    assert!(store.running_scores().await.unwrap().is_empty());
    assert_eq!(
        store.get_session("s1").await.unwrap().score,
        badge(ScoreStatus::Failed, Some(72))
    );
    assert_eq!(
        store.latest_score("s1").await.unwrap().unwrap().id,
        first.id
    );

    let third = store.start_score_attempt("s1", None, None).await.unwrap();
    store.complete_score(&third.id, &result(40)).await.unwrap();
    assert_eq!(
        store.latest_score("s1").await.unwrap().unwrap().score,
        Some(40)
    );
    let all = store.session_scores("s1").await.unwrap();
    assert_eq!(
        all.iter().map(|a| a.attempt).collect::<Vec<_>>(),
        [3, 2, 1],
        "newest first"
    );

    // Deleting the session deletes its scores.
    store.create_session(session("s2")).await.unwrap();
    store.start_score_attempt("s2", None, None).await.unwrap();
    assert_eq!(store.session_scores("s2").await.unwrap().len(), 1);
}

async fn one_attempt_runs_at_a_time_even_when_two_start_at_once(store: Store) {
    store.create_session(session("s1")).await.unwrap();
    let running = store.start_score_attempt("s1", None, None).await.unwrap();
    let again = store
        .start_score_attempt("s1", None, None)
        .await
        .unwrap_err();
    assert!(matches!(again, StoreError::Conflict { .. }), "{again}");
    assert!(
        again.to_string().contains("being scored already"),
        "{again}"
    );
    store.fail_score(&running.id, "stopped").await.unwrap();

    // Racing starts: exactly one wins, the others are conflicts.
    let (a, b, c) = tokio::join!(
        store.start_score_attempt("s1", None, None),
        store.start_score_attempt("s1", None, None),
        store.start_score_attempt("s1", None, None),
    );
    let results = [a, b, c];
    let won = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(won, 1, "{results:?}");
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(|e| matches!(e, StoreError::Conflict { .. })),
        "{results:?}"
    );
}

async fn ended_attempts_and_unknown_ids(store: Store) {
    let missing = store
        .start_score_attempt("nope", None, None)
        .await
        .unwrap_err();
    assert!(matches!(missing, StoreError::NotFound { .. }), "{missing}");
    store.create_session(session("s1")).await.unwrap();
    let a = store.start_score_attempt("s1", None, None).await.unwrap();
    store.complete_score(&a.id, &result(90)).await.unwrap();
    let twice = store.fail_score(&a.id, "late").await.unwrap_err();
    assert!(matches!(twice, StoreError::Conflict { .. }), "{twice}");
    assert_eq!(store.score_attempt(&a.id).await.unwrap().score, Some(90));
    let bad = store.complete_score("x", &result(101)).await.unwrap_err();
    assert!(matches!(bad, StoreError::InvalidInput(_)), "{bad}");
    let unknown = store.complete_score("x", &result(1)).await.unwrap_err();
    assert!(matches!(unknown, StoreError::NotFound { .. }), "{unknown}");
}

async fn a_judge_at_work_is_not_an_open_record_of_its_ended_session(store: Store) {
    store.create_session(session("s1")).await.unwrap();
    store
        .update_session_status("s1", SessionStatus::Completed)
        .await
        .unwrap();
    let stage = store
        .create_stage(NewStage {
            id: Some("s1-s2".into()),
            session_id: "s1".into(),
            stage_name: "Scoring".into(),
            kind: StageKind::Scoring,
            stage_index: 2,
            expected_agent_count: 1,
            parallel_type: None,
            success_policy: None,
            chat_id: None,
            chat_user_message_id: None,
        })
        .await
        .unwrap();
    store
        .update_stage_status(&stage.id, ExecutionStatus::Active, None)
        .await
        .unwrap();
    let attempt = store.start_score_attempt("s1", None, None).await.unwrap();
    assert_eq!(store.open_records_in_terminal_sessions().await.unwrap(), []);
    // Once the attempt is over, a judge's stage left active is open.
    store.fail_score(&attempt.id, "stopped").await.unwrap();
    let open = store.open_records_in_terminal_sessions().await.unwrap();
    assert_eq!(
        open.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["s1-s2"]
    );
}
