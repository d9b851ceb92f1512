//! Investigation memories over REST: listing and searching a scope's
//! memories, editing (the content masked: a planted secret is never
//! stored), deprecating and deleting one, the memories a session was given
//! and taught, the scope boundary (a memory of another scope is not found,
//! a foreign scope is refused), precise 400s, and the metrics gauge.

use serde_json::{Value, json};
use tarsy_api::ApiConfig;
use tarsy_core::{MemoryCategory, MemoryValence};
use tarsy_store::{Memory, NewMemory, Store};

use crate::common::TestApp;
use crate::on_both_backends;

on_both_backends!(
    list_filters_and_searches_a_scope,
    edit_deprecate_and_delete,
    a_planted_secret_is_stored_masked,
    bad_input_is_refused_precisely,
    scopes_do_not_cross,
    a_sessions_memories,
    metrics_count_live_memories,
);

/// The API's own scope in these tests (cluster style: a namespace).
const OWN: &str = "team-a";

async fn app_with_scope(store: &Store, scope: Option<&str>) -> TestApp {
    TestApp::start_with(
        store.clone(),
        ApiConfig {
            memory_scope: scope.map(str::to_string),
            ..ApiConfig::default()
        },
        |api| api,
    )
    .await
}

async fn app(store: &Store) -> TestApp {
    app_with_scope(store, Some(OWN)).await
}

fn new_memory(scope: &str, content: &str) -> NewMemory {
    NewMemory {
        scope: scope.into(),
        content: content.into(),
        category: MemoryCategory::Fact,
        valence: MemoryValence::Helped,
        confidence: 0.6,
        alert_type: Some("PodCrashLooping".into()),
        chain_id: Some("k8s-chain".into()),
        source_session_id: None,
        embedding: None,
    }
}

async fn seed(store: &Store, new: NewMemory) -> Memory {
    store.create_memory(new).await.unwrap()
}

async fn send(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    body: Option<String>,
) -> (u16, Value) {
    let mut request = app.http.request(method, app.url(path));
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body);
    }
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn patch(app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    send(app, reqwest::Method::PATCH, path, Some(body.to_string())).await
}

async fn delete(app: &TestApp, path: &str) -> (u16, Value) {
    send(app, reqwest::Method::DELETE, path, None).await
}

async fn post(app: &TestApp, path: &str) -> (u16, Value) {
    send(app, reqwest::Method::POST, path, None).await
}

/// The ids of a list's memories.
fn ids(body: &Value) -> Vec<String> {
    body["memories"]
        .as_array()
        .unwrap_or_else(|| panic!("no memories in {body}"))
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

async fn list_filters_and_searches_a_scope(store: Store) {
    let app = app(&store).await;
    let pool = seed(
        &store,
        NewMemory {
            category: MemoryCategory::Procedure,
            ..new_memory(
                OWN,
                "Check the connection pool first when the API times out",
            )
        },
    )
    .await;
    let misled = seed(
        &store,
        NewMemory {
            category: MemoryCategory::Experience,
            valence: MemoryValence::Misled,
            ..new_memory(OWN, "The node pool metric does not exist in this cluster")
        },
    )
    .await;
    let old = seed(&store, new_memory(OWN, "Batch jobs run at midnight")).await;
    store.deprecate_memories(OWN, &[&old.id]).await.unwrap();
    let project = seed(
        &store,
        new_memory("team-a/payments", "Payments retries twice"),
    )
    .await;
    seed(
        &store,
        new_memory("team-b", "Another team's connection pool"),
    )
    .await;

    // The API's own scope by default: deprecated ones too, nothing of
    // another scope or of a project.
    let (status, body) = app.get("/api/v1/memories").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total"], 3);
    assert_eq!(
        sorted(ids(&body)),
        sorted(vec![pool.id.clone(), misled.id.clone(), old.id.clone()])
    );
    // Most recently reinforced first.
    let times: Vec<&str> = body["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["last_reinforced_at"].as_str().unwrap())
        .collect();
    let parsed: Vec<chrono::DateTime<chrono::Utc>> =
        times.iter().map(|t| t.parse().unwrap()).collect();
    assert!(parsed.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    // Every field of a memory (its embedding never).
    let first = body["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == pool.id.as_str())
        .unwrap()
        .clone();
    let mut keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "alert_type",
            "category",
            "chain_id",
            "confidence",
            "content",
            "created_at",
            "deprecated",
            "id",
            "last_reinforced_at",
            "scope",
            "seen_count",
            "source_session_id",
            "updated_at",
            "valence"
        ]
    );
    assert_eq!(first["scope"], OWN);
    assert_eq!(first["category"], "procedure");
    assert_eq!(first["valence"], "helped");
    assert_eq!(first["confidence"], 0.6);
    assert_eq!(first["seen_count"], 1);
    assert_eq!(first["deprecated"], false);

    for (query, expected) in [
        ("category=procedure", vec![pool.id.clone()]),
        ("valence=misled", vec![misled.id.clone()]),
        ("deprecated=true", vec![old.id.clone()]),
        ("deprecated=false", vec![pool.id.clone(), misled.id.clone()]),
        // Every word of `q`.
        ("q=connection%20pool", vec![pool.id.clone()]),
        ("q=pool", vec![pool.id.clone(), misled.id.clone()]),
        ("q=POOL&category=experience", vec![misled.id.clone()]),
        ("q=kafka", vec![]),
        ("scope=team-a/payments", vec![project.id.clone()]),
        (
            "scope=team-a",
            vec![pool.id.clone(), misled.id.clone(), old.id.clone()],
        ),
    ] {
        let (status, body) = app.get(&format!("/api/v1/memories?{query}")).await;
        assert_eq!(status, 200, "{query}: {body}");
        assert_eq!(
            sorted(ids(&body)),
            sorted(expected.clone()),
            "{query}: {body}"
        );
        assert_eq!(body["total"], expected.len(), "{query}");
    }

    // Pages: the total counts every page.
    let (_, all) = app.get("/api/v1/memories").await;
    let (status, body) = app.get("/api/v1/memories?limit=1&offset=1").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(ids(&body), vec![ids(&all)[1].clone()]);
    assert_eq!(body["total"], 3);
    let (_, body) = app.get("/api/v1/memories?offset=3").await;
    assert_eq!((ids(&body).len(), body["total"].as_i64()), (0, Some(3)));
    let (status, _) = app.get("/api/v1/memories?limit=200").await;
    assert_eq!(status, 200);
}

async fn edit_deprecate_and_delete(store: Store) {
    let app = app(&store).await;
    let memory = seed(
        &store,
        NewMemory {
            embedding: Some(vec![0.5, 0.25, 1.0]),
            ..new_memory(OWN, "Check the connection pool first")
        },
    )
    .await;
    let path = format!("/api/v1/memories/{}", memory.id);
    let embedding = |store: Store| async move {
        store
            .all_memories(OWN)
            .await
            .unwrap()
            .into_iter()
            .next()
            .unwrap()
            .1
    };

    let (status, body) = app.get(&path).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["content"], "Check the connection pool first");
    assert_eq!(body["id"], memory.id.as_str());

    // Category, valence, confidence: the embedding stays.
    let (status, body) = patch(
        &app,
        &path,
        json!({"category": "procedure", "valence": "misled", "confidence": 0.25}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["category"].as_str(),
            body["valence"].as_str(),
            body["confidence"].as_f64(),
            body["content"].as_str()
        ),
        (
            Some("procedure"),
            Some("misled"),
            Some(0.25),
            Some("Check the connection pool first")
        )
    );
    assert!(embedding(store.clone()).await.is_some());
    // The edge confidences are allowed.
    for c in [0.0, 1.0] {
        let (status, body) = patch(&app, &path, json!({"confidence": c})).await;
        assert_eq!(
            (status, body["confidence"].as_f64()),
            (200, Some(c)),
            "{body}"
        );
    }

    // A new content, trimmed; its old embedding is gone.
    let (status, body) = patch(
        &app,
        &path,
        json!({"content": "  Check the pool of the payments database first \n"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["content"],
        "Check the pool of the payments database first"
    );
    assert!(embedding(store.clone()).await.is_none());
    let (_, read) = app.get(&path).await;
    assert_eq!(read, body);
    // Found by its new words.
    let (_, found) = app.get("/api/v1/memories?q=payments%20database").await;
    assert_eq!(ids(&found), vec![memory.id.clone()]);

    // Deprecate: idempotent.
    for _ in 0..2 {
        let (status, body) = post(&app, &format!("{path}/deprecate")).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["deprecated"], true);
        assert_eq!(body["id"], memory.id.as_str());
    }
    let (_, live) = app.get("/api/v1/memories?deprecated=false").await;
    assert_eq!(live["total"], 0);
    // Restored by an edit.
    let (status, body) = patch(&app, &path, json!({"deprecated": false})).await;
    assert_eq!((status, body["deprecated"].as_bool()), (200, Some(false)));

    // Delete: gone, and a second delete is a 404.
    let (status, body) = delete(&app, &path).await;
    assert_eq!((status, body), (204, Value::Null));
    let (status, body) = app.get(&path).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"], "not_found");
    let (status, _) = delete(&app, &path).await;
    assert_eq!(status, 404);
    let (_, all) = app.get("/api/v1/memories").await;
    assert_eq!(all["total"], 0);
}

async fn a_planted_secret_is_stored_masked(store: Store) {
    let app = app(&store).await;
    let memory = seed(&store, new_memory(OWN, "The database needs a restart")).await;
    let path = format!("/api/v1/memories/{}", memory.id);
    let secret_key = "AKIAIOSFODNN7EXAMPLE";
    let password = "hunter2-Very-Secret";
    let (status, body) = patch(
        &app,
        &path,
        json!({"content": format!(
            "Log in with key {secret_key} and password={password} to restart the database"
        )}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let content = body["content"].as_str().unwrap();
    assert!(content.contains("[MASKED_AWS_ACCESS_KEY]"), "{content}");
    assert!(content.contains("[MASKED_PASSWORD]"), "{content}");
    assert!(content.contains("to restart the database"), "{content}");
    // Neither the answer nor the store has the secrets.
    let stored = store.get_memory(OWN, &memory.id).await.unwrap();
    assert_eq!(stored.content, content);
    for text in [content, stored.content.as_str()] {
        assert!(
            !text.contains(secret_key) && !text.contains(password),
            "{text}"
        );
    }
}

async fn bad_input_is_refused_precisely(store: Store) {
    let app = app(&store).await;
    let memory = seed(&store, new_memory(OWN, "Check the connection pool first")).await;
    let path = format!("/api/v1/memories/{}", memory.id);

    for (body, message) in [
        (json!({}), "nothing to change"),
        (json!({"content": null}), "nothing to change"),
        (
            json!({"content": "x", "embedding": [1.0]}),
            "unknown field `embedding`",
        ),
        (
            json!({"confidence": 1.5}),
            "confidence must be between 0 and 1, got 1.5",
        ),
        (
            json!({"confidence": -0.1}),
            "confidence must be between 0 and 1",
        ),
        (json!({"confidence": "high"}), "invalid memory change"),
        (json!({"content": "   "}), "content cannot be empty"),
        (
            json!({"content": "é".repeat(2_001)}),
            "content of 2001 characters is longer than 2000",
        ),
        (json!({"category": "rumour"}), "unknown variant `rumour`"),
        (json!({"valence": "great"}), "unknown variant `great`"),
        (json!({"deprecated": "yes"}), "invalid memory change"),
        (
            json!(["content"]),
            "must be a JSON object (a memory change), not an array",
        ),
        (
            json!("content"),
            "must be a JSON object (a memory change), not a string",
        ),
    ] {
        let (status, answer) = patch(&app, &path, body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["error"], "bad_request", "{body}");
        assert!(
            answer["message"].as_str().unwrap().contains(message),
            "{body}: {answer}"
        );
    }
    // An empty body, malformed JSON.
    for (raw, message) in [("", "the request body is empty"), ("{", "invalid JSON")] {
        let (status, answer) =
            send(&app, reqwest::Method::PATCH, &path, Some(raw.to_string())).await;
        assert_eq!(status, 400, "{raw:?}: {answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(message),
            "{answer}"
        );
    }
    // A body over its limit.
    let (status, answer) = app.declare_huge_body("PATCH", &path, 70_000).await;
    assert_eq!(status, 413, "{answer}");
    // Nothing was changed.
    let unchanged = store.get_memory(OWN, &memory.id).await.unwrap();
    assert_eq!(unchanged, memory);

    // Unknown ids.
    let missing = "/api/v1/memories/no-such-memory";
    for (status, answer) in [
        app.get(missing).await,
        patch(&app, missing, json!({"confidence": 0.5})).await,
        post(&app, &format!("{missing}/deprecate")).await,
        delete(&app, missing).await,
    ] {
        assert_eq!(status, 404, "{answer}");
        assert_eq!(answer["message"], "memory \"no-such-memory\" not found");
    }
    let (status, answer) = app.get("/api/v1/sessions/no-such-session/memories").await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(answer["message"], "session \"no-such-session\" not found");

    // Bad parameters.
    for (query, message) in [
        ("category=rumour", "category: "),
        ("valence=great", "valence: "),
        ("deprecated=yes", "deprecated must be true or false"),
        ("limit=0", "limit must be an integer from 1 to 200"),
        ("limit=201", "limit must be an integer from 1 to 200"),
        ("offset=-1", "offset must be an integer from 0"),
        ("page=2", "unknown field `page`"),
        ("scope=", "scope cannot be empty"),
    ] {
        let (status, answer) = app.get(&format!("/api/v1/memories?{query}")).await;
        assert_eq!(status, 400, "{query}: {answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(message),
            "{query}: {answer}"
        );
    }
    let (status, answer) = app.get(&format!("{path}?limit=1")).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `limit`")
    );
    let q = "a".repeat(1_001);
    let (status, answer) = app.get(&format!("/api/v1/memories?q={q}")).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("longer than 1000")
    );
}

async fn scopes_do_not_cross(store: Store) {
    let app = app(&store).await;
    let mine = seed(&store, new_memory(OWN, "Check the connection pool first")).await;
    let theirs = seed(&store, new_memory("team-b", "Team B's connection pool")).await;
    let path = format!("/api/v1/memories/{}", theirs.id);

    // Another scope's memory is not found in this one: not read, listed,
    // changed, deprecated or deleted.
    let (status, body) = app.get(&path).await;
    assert_eq!(status, 404, "{body}");
    let (_, list) = app.get("/api/v1/memories?q=connection").await;
    assert_eq!(ids(&list), vec![mine.id.clone()]);
    let (status, _) = patch(&app, &path, json!({"content": "mine now"})).await;
    assert_eq!(status, 404);
    let (status, _) = post(&app, &format!("{path}/deprecate")).await;
    assert_eq!(status, 404);
    let (status, _) = delete(&app, &path).await;
    assert_eq!(status, 404);
    assert_eq!(
        store.get_memory("team-b", &theirs.id).await.unwrap(),
        theirs
    );
    // Nor through one of this scope's projects.
    let (status, _) = app.get(&format!("{path}?scope=team-a/x")).await;
    assert_eq!(status, 404);

    // Naming a scope outside the API's own: 403 naming both.
    for scope in ["team-b", "team-ab", "team", "team-b/team-a", "team-a/"] {
        for (status, body) in [
            app.get(&format!("/api/v1/memories?scope={scope}")).await,
            app.get(&format!("{path}?scope={scope}")).await,
            patch(
                &app,
                &format!("{path}?scope={scope}"),
                json!({"confidence": 0.1}),
            )
            .await,
            post(&app, &format!("{path}/deprecate?scope={scope}")).await,
            delete(&app, &format!("{path}?scope={scope}")).await,
        ] {
            assert_eq!(status, 403, "{scope}: {body}");
            assert_eq!(body["error"], "forbidden");
            let message = body["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("{scope:?}")) && message.contains("\"team-a\""),
                "{message}"
            );
        }
    }
    assert_eq!(
        store.get_memory("team-b", &theirs.id).await.unwrap(),
        theirs
    );
    let (_, body) = app.get("/api/v1/memories?scope=team-b").await;
    assert_eq!(
        body["message"],
        "scope \"team-b\" is outside this API's memory scope \"team-a\": ask for \"team-a\" \
         or one of its projects, \"team-a/<project>\""
    );

    // An API without a scope of its own needs one named, and serves it.
    let open = app_with_scope(&store, None).await;
    let (status, body) = open.get("/api/v1/memories").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("scope is required")
    );
    let (status, body) = open.get(&format!("{path}?scope=team-b")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scope"], "team-b");
    let (status, _) = open.get(&path).await;
    assert_eq!(status, 400);
}

async fn a_sessions_memories(store: Store) {
    let app = app(&store).await;
    let session = app.submit().await;
    let other = app.submit().await;
    let first = seed(&store, new_memory(OWN, "Check the connection pool first")).await;
    let second = seed(
        &store,
        new_memory("team-a/payments", "Payments retries twice"),
    )
    .await;
    let foreign = seed(&store, new_memory("team-b", "Team B's lesson")).await;
    store
        .record_injections(&session, &[&second.id, &first.id, &foreign.id])
        .await
        .unwrap();
    store.record_injections(&other, &[&first.id]).await.unwrap();
    let learned_one = seed(
        &store,
        NewMemory {
            source_session_id: Some(session.clone()),
            ..new_memory(OWN, "The node pool metric does not exist here")
        },
    )
    .await;
    let learned_two = seed(
        &store,
        NewMemory {
            source_session_id: Some(session.clone()),
            ..new_memory(OWN, "Restarting the pod did not help")
        },
    )
    .await;
    seed(
        &store,
        NewMemory {
            source_session_id: Some(session.clone()),
            ..new_memory("team-b", "Team B learned this from the session")
        },
    )
    .await;

    let (status, body) = app
        .get(&format!("/api/v1/sessions/{session}/memories"))
        .await;
    assert_eq!(status, 200, "{body}");
    let of = |key: &str| -> Vec<String> {
        body[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_string())
            .collect()
    };
    // In their order in the prompt; another scope's left out.
    assert_eq!(of("injected"), vec![second.id.clone(), first.id.clone()]);
    assert_eq!(
        sorted(of("learned")),
        sorted(vec![learned_one.id.clone(), learned_two.id.clone()])
    );
    assert_eq!(
        body["injected"][1]["content"],
        "Check the connection pool first"
    );

    // A deleted memory is gone from the sessions it was put into.
    let (status, _) = delete(&app, &format!("/api/v1/memories/{}", first.id)).await;
    assert_eq!(status, 204);
    let (_, body) = app.get(&format!("/api/v1/sessions/{other}/memories")).await;
    assert_eq!(body, json!({"injected": [], "learned": []}));
}

async fn metrics_count_live_memories(store: Store) {
    let app = app(&store).await;
    for content in ["one", "two"] {
        seed(&store, new_memory(OWN, content)).await;
    }
    seed(
        &store,
        NewMemory {
            category: MemoryCategory::Procedure,
            ..new_memory("team-a/pay\"ments", "three")
        },
    )
    .await;
    let old = seed(&store, new_memory(OWN, "deprecated")).await;
    store.deprecate_memories(OWN, &[&old.id]).await.unwrap();
    seed(&store, new_memory("team-b", "someone else's")).await;

    let r = app.http.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("# TYPE tarsy_memories gauge\n"), "{text}");
    assert!(
        text.contains("tarsy_memories{scope=\"team-a\",category=\"fact\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("tarsy_memories{scope=\"team-a/pay\\\"ments\",category=\"procedure\"} 1\n"),
        "{text}"
    );
    // Only this API's scope and its projects.
    assert!(!text.contains("team-b"), "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
}
