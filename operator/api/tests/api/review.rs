//! Reviews over REST: the actor is the trusted forwarded identity, a claim
//! taken by someone else is a 409 that says so, complete needs a rating,
//! bulk changes succeed or fail per session, the triage groups count, the
//! session list filters by review and score, and every change reaches open
//! WebSocket clients.

use serde_json::{Value, json};
use tarsy_api::ApiConfig;
use tarsy_core::{ScoreStatus, SessionStatus};
use tarsy_store::{ScoreResult, SessionOutcome, Store};

use crate::common::{TestApp, ws_connect, ws_next, ws_subscribe};
use crate::on_both_backends;

on_both_backends!(
    review_flow_by_the_forwarded_user,
    bulk_triage_and_filters,
    quality_digests_tool_reports
);

async fn trusting(store: &Store) -> TestApp {
    TestApp::start_with(
        store.clone(),
        ApiConfig {
            trust_forwarded_identity: true,
            ..ApiConfig::default()
        },
        |api| api,
    )
    .await
}

async fn finish(store: &Store, id: &str, status: SessionStatus) {
    store
        .finish_session(
            id,
            SessionOutcome {
                status,
                final_analysis: Some("the pod ran out of memory".into()),
                executive_summary: None,
                executive_summary_error: None,
                error_message: None,
                end_reason: None,
            },
        )
        .await
        .unwrap();
}

/// POSTs `body` to `path` as `user`.
async fn post_as(app: &TestApp, user: &str, path: &str, body: Value) -> (u16, Value) {
    let r = app
        .http
        .post(app.url(path))
        .header("content-type", "application/json")
        .header("x-forwarded-user", user)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn review_flow_by_the_forwarded_user(store: Store) {
    let app = trusting(&store).await;
    let id = app.submit().await;
    let path = format!("/api/v1/sessions/{id}/review");
    // Still being investigated: nothing to review yet.
    let (status, body) = post_as(&app, "alice", &path, json!({"action": "claim"})).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("still being investigated")
    );
    finish(&store, &id, SessionStatus::Completed).await;

    let mut ws = ws_connect(&app.ws_url).await;
    ws_subscribe(&mut ws, &format!("session:{id}")).await;

    let (status, body) = post_as(&app, "alice", &path, json!({"action": "claim"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["status"].as_str(), body["assignee"].as_str()),
        (Some("in_progress"), Some("alice"))
    );
    // Catch-up replays the session's stored events first.
    let event = loop {
        let event = ws_next(&mut ws).await;
        if event["type"] == "session.review" {
            break event;
        }
    };
    assert_eq!(
        (
            event["action"].as_str(),
            event["actor"].as_str(),
            event["status"].as_str()
        ),
        (Some("claim"), Some("alice"), Some("in_progress"))
    );

    // Someone else's claim: 409 naming the holder.
    let (status, body) = post_as(&app, "bob", &path, json!({"action": "claim"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body["message"],
        "conflict on session review: the review is in_progress (claimed by alice): cannot claim it"
    );
    // Precise 400s.
    for (request, message) in [
        (json!({"action": "complete"}), "complete needs a rating"),
        (json!({"action": "reassign"}), "reassign needs an assignee"),
        (
            json!({"action": "claim", "rating": "accurate"}),
            "rating does not apply to claim",
        ),
        (
            json!({"action": "auto_acknowledge"}),
            "auto_acknowledge is TARSy's own step",
        ),
        (json!({"action": "approve"}), "unknown variant"),
        (json!({"action": "claim", "extra": 1}), "unknown field"),
        (
            json!({"action": "acknowledge", "feedback": "é".repeat(16_385)}),
            "feedback is longer than 16384 characters",
        ),
    ] {
        let (status, body) = post_as(&app, "alice", &path, request.clone()).await;
        assert_eq!(status, 400, "{request}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains(message),
            "{request}: {body}"
        );
    }
    let (status, body) = post_as(
        &app,
        "alice",
        &path,
        json!({"action": "complete", "rating": "inaccurate", "feedback": "wrong pod"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rating"], "inaccurate");
    let (status, body) = post_as(
        &app,
        "carol",
        &path,
        json!({"action": "update", "rating": "accurate"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let (status, detail) = app.get(&path).await;
    assert_eq!(status, 200);
    assert_eq!(detail["review"]["rating"], "accurate");
    assert_eq!(detail["review"]["feedback"], "wrong pod");
    let steps: Vec<(&str, &str)> = detail["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["actor"].as_str().unwrap(), e["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        steps,
        [
            ("alice", "claim"),
            ("alice", "complete"),
            ("carol", "update")
        ]
    );
    let (_, session) = app.get(&format!("/api/v1/sessions/{id}")).await;
    assert_eq!(
        session["review"],
        json!({"status": "reviewed", "assignee": "alice", "rating": "accurate"})
    );
    let (status, _) = app.get("/api/v1/sessions/nope/review").await;
    assert_eq!(status, 404);
}

async fn bulk_triage_and_filters(store: Store) {
    let app = trusting(&store).await;
    let running = app.submit().await;
    let a = app.submit().await;
    let b = app.submit().await;
    let c = app.submit().await;
    for id in [&a, &b, &c] {
        finish(&store, id, SessionStatus::Completed).await;
    }
    // Scores for the score filters.
    for (id, score, tag) in [
        (&a, 80, "incomplete-evidence"),
        (&b, 30, "wrong-conclusion"),
    ] {
        let attempt = store.start_score_attempt(id, None, None).await.unwrap();
        assert_eq!(attempt.status, ScoreStatus::InProgress);
        store
            .complete_score(
                &attempt.id,
                &ScoreResult {
                    score,
                    outcome: "correct".into(),
                    failure_tags: vec![tag.into()],
                    assessment: "SCORE".into(),
                    tool_report: None,
                },
            )
            .await
            .unwrap();
    }
    post_as(
        &app,
        "alice",
        &format!("/api/v1/sessions/{c}/review"),
        json!({"action": "claim"}),
    )
    .await;

    let (status, triage) = app.get("/api/v1/triage").await;
    assert_eq!(status, 200, "{triage}");
    let counts: Vec<i64> = ["investigating", "needs_review", "in_progress", "reviewed"]
        .iter()
        .map(|g| triage[g]["count"].as_i64().unwrap())
        .collect();
    assert_eq!(counts, [1, 2, 1, 0], "{triage:#}");
    assert_eq!(
        triage["investigating"]["sessions"][0]["id"],
        running.as_str()
    );

    // Bulk: each session on its own (the running one cannot be reviewed).
    let (status, body) = post_as(
        &app,
        "bob",
        "/api/v1/reviews",
        json!({"session_ids": [a, b, running], "action": "acknowledge", "feedback": "noise"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let results = body["results"].as_array().unwrap();
    assert_eq!(results[0]["review"]["status"], "reviewed");
    assert_eq!(results[1]["review"]["assignee"], "bob");
    assert_eq!(results[2]["error"]["error"], "conflict");
    let (status, body) = post_as(
        &app,
        "bob",
        "/api/v1/reviews",
        json!({"session_ids": [a], "action": "claim"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = post_as(
        &app,
        "bob",
        "/api/v1/reviews",
        json!({"session_ids": [], "action": "acknowledge"}),
    )
    .await;
    assert_eq!(status, 400);

    // The list filters by review and by score.
    let ids = |body: &Value| -> Vec<String> {
        body["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, body) = app
        .get("/api/v1/sessions?review_status=reviewed&assignee=bob")
        .await;
    let mut reviewed = ids(&body);
    reviewed.sort();
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(reviewed, expected);
    let (_, body) = app.get("/api/v1/sessions?review_status=in_progress").await;
    assert_eq!(ids(&body), [c]);
    let (_, body) = app.get("/api/v1/sessions?score_min=50").await;
    assert_eq!(ids(&body), [a]);
    let (_, body) = app
        .get("/api/v1/sessions?score_max=50&failure_tag=wrong-conclusion")
        .await;
    assert_eq!(ids(&body), [b]);
    let (_, body) = app
        .get("/api/v1/sessions?failure_tag=premature-conclusion")
        .await;
    assert!(ids(&body).is_empty());
    for bad in [
        "review_status=done",
        "rating=great",
        "score_min=101",
        "score_max=-1",
    ] {
        let (status, body) = app.get(&format!("/api/v1/sessions?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
}

async fn quality_digests_tool_reports(store: Store) {
    let app = trusting(&store).await;
    for (n, report) in [
        "MISSING TOOLS:\n- Node memory: was the node short?\n\nHARD TO USE:\n- prometheus.query_range: absolute times",
        "MISSING TOOLS:\n- node memory: history\n- rollout diff: two revisions at once",
    ]
    .iter()
    .enumerate()
    {
        let id = app.submit().await;
        finish(&store, &id, SessionStatus::Completed).await;
        let attempt = store.start_score_attempt(&id, None, None).await.unwrap();
        store
            .complete_score(
                &attempt.id,
                &ScoreResult {
                    score: 40 + 30 * n as u8,
                    outcome: "partial".into(),
                    failure_tags: vec!["incomplete-evidence".into()],
                    assessment: "SCORE".into(),
                    tool_report: Some(report.to_string()),
                },
            )
            .await
            .unwrap();
    }
    let (status, q) = app.get("/api/v1/quality?days=7").await;
    assert_eq!(status, 200, "{q}");
    assert_eq!(
        q["failure_tags"],
        json!([{"tag": "incomplete-evidence", "count": 2}])
    );
    let missing: Vec<(String, u64)> = q["missing_tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["tool"].as_str().unwrap().to_string(),
                m["count"].as_u64().unwrap(),
            )
        })
        .collect();
    // Named as the newest report names it.
    assert_eq!(
        missing,
        [
            ("node memory".to_string(), 2),
            ("rollout diff".to_string(), 1)
        ]
    );
    assert_eq!(q["hard_to_use"][0]["tool"], "prometheus.query_range");
    let scored: u64 = q["score_days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["scored"].as_u64().unwrap())
        .sum();
    assert_eq!(scored, 2);
    for bad in ["days=0", "days=400", "since=3"] {
        let (status, body) = app.get(&format!("/api/v1/quality?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
}
