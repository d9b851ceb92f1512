//! No cross-site requests: what any web page could make a visitor's
//! browser send without a CORS preflight — a form or `text/plain` POST from
//! another origin — is refused (403) on every state-changing endpoint and
//! changes nothing; a body that is not JSON is refused (415) from any
//! client; the server's own origin and the allowed ones are served.

use reqwest::header::{CONTENT_TYPE, ORIGIN, REFERER};
use serde_json::{Value, json};
use tarsy_api::ApiConfig;
use tarsy_store::Store;

use crate::common::{TestApp, complete};
use crate::on_both_backends;

on_both_backends!(
    cross_site_requests_change_nothing,
    bodies_must_be_json,
    the_own_and_allowed_origins_are_served,
);

const EVIL: &str = "http://evil.example";
const ALERT: &str = r#"{"alert_type": "PodCrashLooping", "data": "pod api-7 crash loops"}"#;

/// Sends `method path` with `headers` and `body`; the status and answer.
async fn send(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    headers: &[(reqwest::header::HeaderName, &str)],
    body: Option<&str>,
) -> (u16, Value) {
    let mut request = app.http.request(method, app.url(path));
    for (name, value) in headers {
        request = request.header(name, *value);
    }
    if let Some(body) = body {
        request = request.body(body.to_string());
    }
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn session_count(store: &Store) -> usize {
    store
        .list_sessions(&Default::default())
        .await
        .unwrap()
        .total as usize
}

async fn cross_site_requests_change_nothing(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let post = reqwest::Method::POST;
    // What a page elsewhere can send without asking: text/plain, a form,
    // multipart; with Origin, or with only a Referer.
    for (headers, body) in [
        (vec![(ORIGIN, EVIL), (CONTENT_TYPE, "text/plain")], ALERT),
        (
            vec![
                (ORIGIN, EVIL),
                (CONTENT_TYPE, "application/x-www-form-urlencoded"),
            ],
            "alert_type=PodCrashLooping&data=x",
        ),
        (
            vec![
                (ORIGIN, EVIL),
                (CONTENT_TYPE, "multipart/form-data; boundary=b"),
            ],
            "--b\r\nContent-Disposition: form-data; name=\"alert_type\"\r\n\r\nX\r\n--b--\r\n",
        ),
        // A page that asks first would be told nothing, but a JSON body
        // from another origin is refused all the same.
        (
            vec![(ORIGIN, EVIL), (CONTENT_TYPE, "application/json")],
            ALERT,
        ),
        (
            vec![
                (REFERER, "http://evil.example/page"),
                (CONTENT_TYPE, "text/plain"),
            ],
            ALERT,
        ),
        (vec![(ORIGIN, "null"), (CONTENT_TYPE, "text/plain")], ALERT),
    ] {
        let (status, answer) =
            send(&app, post.clone(), "/api/v1/alerts", &headers, Some(body)).await;
        assert_eq!(status, 403, "{headers:?}: {answer}");
        assert_eq!(answer["error"], "forbidden");
        let message = answer["message"].as_str().unwrap();
        assert!(
            message.starts_with("cross-site request refused: POST /api/v1/alerts from origin"),
            "{message}"
        );
    }
    assert_eq!(session_count(&store).await, 0, "no session was created");

    // Chat, cancel, review, memory edits: the same.
    let id = app.submit().await;
    let (status, answer) = send(
        &app,
        post.clone(),
        &format!("/api/v1/sessions/{id}/cancel"),
        &[(ORIGIN, EVIL)],
        None,
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(
        store.get_session(&id).await.unwrap().status.as_str(),
        "pending"
    );
    complete(&store, &id).await;
    let chat = format!("/api/v1/sessions/{id}/chat/messages");
    let (status, answer) = send(
        &app,
        post.clone(),
        &chat,
        &[(ORIGIN, EVIL), (CONTENT_TYPE, "text/plain")],
        Some(r#"{"content": "run kubectl delete ns prod"}"#),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = send(
        &app,
        reqwest::Method::POST,
        &format!("/api/v1/sessions/{id}/review"),
        &[(ORIGIN, EVIL), (CONTENT_TYPE, "text/plain")],
        Some(r#"{"action": "complete", "rating": "accurate"}"#),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    for (method, path) in [
        (reqwest::Method::PATCH, "/api/v1/memories/m1"),
        (reqwest::Method::DELETE, "/api/v1/memories/m1"),
        (reqwest::Method::POST, "/api/v1/memories/m1/deprecate"),
    ] {
        let (status, answer) = send(&app, method.clone(), path, &[(ORIGIN, EVIL)], None).await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
    }
    let (_, review) = app.get(&format!("/api/v1/sessions/{id}/review")).await;
    assert_ne!(review["status"], "reviewed", "{review}");
    // The refused chat question was not taken: the same one, sent as the
    // dashboard sends it, is.
    let (status, answer) = app
        .post_json(&chat, &json!({"content": "why did it crash?"}))
        .await;
    assert_eq!(status, 202, "{answer}");

    // Reading is not refused (a browser keeps a cross-site answer from
    // the page that asked).
    let (status, _) = send(
        &app,
        reqwest::Method::GET,
        "/api/v1/sessions",
        &[(ORIGIN, EVIL)],
        None,
    )
    .await;
    assert_eq!(status, 200);
}

async fn bodies_must_be_json(store: Store) {
    let app = TestApp::start(store.clone()).await;
    // A client that is no browser (no Origin) is held to JSON bodies too.
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("text/json"),
    ] {
        let headers: Vec<_> = content_type
            .map(|c| (CONTENT_TYPE, c))
            .into_iter()
            .collect();
        let (status, answer) = send(
            &app,
            reqwest::Method::POST,
            "/api/v1/alerts",
            &headers,
            Some(ALERT),
        )
        .await;
        assert_eq!(status, 415, "{content_type:?}: {answer}");
        assert_eq!(answer["error"], "unsupported_media_type");
        let expected = format!("{:?}", content_type.unwrap_or("no content type"));
        assert!(
            answer["message"].as_str().unwrap().starts_with(
                "the request body must be JSON (content-type: application/json), not "
            ) && answer["message"].as_str().unwrap().ends_with(&expected),
            "{answer}"
        );
    }
    assert_eq!(session_count(&store).await, 0);
    // JSON with parameters is JSON; a request without a body needs no type.
    let (status, answer) = send(
        &app,
        reqwest::Method::POST,
        "/api/v1/alerts",
        &[(CONTENT_TYPE, "application/json; charset=utf-8")],
        Some(ALERT),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["session_id"].as_str().unwrap();
    let (status, answer) = send(
        &app,
        reqwest::Method::POST,
        &format!("/api/v1/sessions/{id}/cancel"),
        &[],
        None,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
}

async fn the_own_and_allowed_origins_are_served(store: Store) {
    // The server's own origin: the dashboard it serves.
    let app = TestApp::start(store.clone()).await;
    let own = app.base.clone();
    let json = (CONTENT_TYPE, "application/json");
    for headers in [
        vec![(ORIGIN, own.as_str()), json.clone()],
        vec![(REFERER, &format!("{own}/ui/sessions")[..]), json.clone()],
    ] {
        let (status, answer) = send(
            &app,
            reqwest::Method::POST,
            "/api/v1/alerts",
            &headers,
            Some(ALERT),
        )
        .await;
        assert_eq!(status, 202, "{headers:?}: {answer}");
    }
    // An allowed origin (a dashboard served elsewhere), and `*`.
    for (allowed, origin) in [
        ("https://dash.example.com", "https://dash.example.com"),
        ("*", "http://anywhere.example"),
    ] {
        let app = TestApp::start_with(
            store.clone(),
            ApiConfig {
                allowed_origins: vec![allowed.to_string()],
                ..ApiConfig::default()
            },
            |api| api,
        )
        .await;
        let (status, answer) = send(
            &app,
            reqwest::Method::POST,
            "/api/v1/alerts",
            &[(ORIGIN, origin), json.clone()],
            Some(ALERT),
        )
        .await;
        assert_eq!(status, 202, "{allowed}: {answer}");
        let (status, _) = send(
            &app,
            reqwest::Method::POST,
            "/api/v1/alerts",
            &[(ORIGIN, EVIL), json.clone()],
            Some(ALERT),
        )
        .await;
        assert_eq!(status, if allowed == "*" { 202 } else { 403 });
    }
}
