//! The bridge with the Kubernetes sink, end to end over HTTP: Alertmanager →
//! bridge → kube client → a small fake of the Kubernetes API for Alerts that
//! records every request (method, content type, field manager).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use common::{post, serve_http};
use serde_json::{Value, json};
use tarsy_core::SecretValue;
use tarsy_webhooks::sink::{AlertSink, FINGERPRINT_LABEL, KubeAlertSink, RESOLVED_AT_ANNOTATION};
use tarsy_webhooks::{BridgeAuth, BridgeConfig, BridgeState, app};

const TOKEN: &str = "t0ken";
const SINGLE: &str = include_str!("fixtures/single_firing.json");
const RESOLVED: &str = include_str!("fixtures/resolved_only.json");
const PREFIX: &str = "/apis/tarsy.dev/v1alpha1/namespaces/{ns}/alerts";

#[derive(Debug, Clone)]
struct Call {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    content_type: String,
}

#[derive(Default)]
struct Fake {
    objects: BTreeMap<String, Value>,
    calls: Vec<Call>,
    /// Every request fails with 500 while set.
    broken: bool,
}

type Shared = Arc<Mutex<Fake>>;

fn status(code: u16, reason: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(code).unwrap(),
        Json(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason, "code": code
        })),
    )
        .into_response()
}

fn record(
    fake: &mut Fake,
    method: &str,
    path: String,
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
) {
    fake.calls.push(Call {
        method: method.into(),
        path,
        query: query.clone(),
        content_type: headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .into(),
    });
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

async fn create(
    State(s): State<Shared>,
    Path(ns): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    Json(mut obj): Json<Value>,
) -> Response {
    let mut f = s.lock().unwrap();
    record(
        &mut f,
        "POST",
        format!("/namespaces/{ns}/alerts"),
        &q,
        &headers,
    );
    if f.broken {
        return status(500, "InternalError", "etcdserver: request timed out");
    }
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if obj["spec"]["alertType"] == "Denied" {
        return status(
            403,
            "Forbidden",
            "admission webhook \"validate.tarsy.dev\" denied the request: no Chain handles alert type \"Denied\"",
        );
    }
    if f.objects.contains_key(&name) {
        return status(
            409,
            "AlreadyExists",
            &format!("alerts.tarsy.dev \"{name}\" already exists"),
        );
    }
    obj["metadata"]["namespace"] = json!(ns);
    obj["metadata"]["uid"] = json!(format!("uid-{}", f.objects.len()));
    obj["metadata"]["resourceVersion"] = json!("1");
    f.objects.insert(name, obj.clone());
    (StatusCode::CREATED, Json(obj)).into_response()
}

async fn list(
    State(s): State<Shared>,
    Path(ns): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let mut f = s.lock().unwrap();
    record(
        &mut f,
        "GET",
        format!("/namespaces/{ns}/alerts"),
        &q,
        &headers,
    );
    if f.broken {
        return status(500, "InternalError", "etcdserver: request timed out");
    }
    let selector = q.get("labelSelector").cloned().unwrap_or_default();
    let items: Vec<Value> = f
        .objects
        .values()
        .filter(|o| {
            selector.split(',').filter(|s| !s.is_empty()).all(|term| {
                let (k, v) = term.split_once('=').unwrap();
                o["metadata"]["labels"][k] == v
            })
        })
        .cloned()
        .collect();
    Json(json!({
        "apiVersion": "tarsy.dev/v1alpha1", "kind": "AlertList",
        "metadata": {"resourceVersion": "7"}, "items": items
    }))
    .into_response()
}

async fn get_one(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let mut f = s.lock().unwrap();
    record(
        &mut f,
        "GET",
        format!("/namespaces/{ns}/alerts/{name}"),
        &q,
        &headers,
    );
    match f.objects.get(&name) {
        Some(o) => Json(o.clone()).into_response(),
        None => status(
            404,
            "NotFound",
            &format!("alerts.tarsy.dev \"{name}\" not found"),
        ),
    }
}

async fn patch(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut f = s.lock().unwrap();
    record(
        &mut f,
        "PATCH",
        format!("/namespaces/{ns}/alerts/{name}"),
        &q,
        &headers,
    );
    // Apply patches may be YAML; kube sends JSON, which YAML parsers accept.
    let patch: Value = serde_yaml::from_slice(&body).unwrap();
    let Some(obj) = f.objects.get_mut(&name) else {
        return status(
            404,
            "NotFound",
            &format!("alerts.tarsy.dev \"{name}\" not found"),
        );
    };
    merge(obj, &patch);
    Json(obj.clone()).into_response()
}

async fn fake_api() -> (std::net::SocketAddr, Shared) {
    let shared: Shared = Arc::default();
    let router = Router::new()
        .route(PREFIX, get(list).post(create))
        .route(&format!("{PREFIX}/{{name}}"), get(get_one).patch(patch))
        .with_state(shared.clone());
    (serve_http(router).await, shared)
}

async fn kube_sink(api: std::net::SocketAddr) -> KubeAlertSink {
    let config = kube::Config::new(format!("http://{api}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    KubeAlertSink::new(client, "tarsy")
}

async fn bridge(sink: KubeAlertSink, cancel_on_resolve: bool) -> std::net::SocketAddr {
    let mut config = BridgeConfig::new("tarsy");
    config.cancel_on_resolve = cancel_on_resolve;
    let state = BridgeState::new(
        config,
        BridgeAuth::Bearer(SecretValue::new(TOKEN)),
        Arc::new(sink),
    );
    serve_http(app(Some(state), None)).await
}

async fn send(addr: std::net::SocketAddr, body: &str) -> common::Resp {
    post(
        addr,
        "/alertmanager",
        &[("authorization", &format!("Bearer {TOKEN}"))],
        body,
    )
    .await
}

#[tokio::test]
async fn bridge_creates_deduplicates_resolves_and_cancels_through_the_api() {
    let (api, fake) = fake_api().await;
    let addr = bridge(kube_sink(api).await, true).await;

    let r = send(addr, SINGLE).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["created"], 1);
    {
        let f = fake.lock().unwrap();
        let obj = &f.objects["am-3f6e8b1a2c4d5e6f"];
        assert_eq!(obj["metadata"]["namespace"], "tarsy");
        assert_eq!(obj["spec"]["alertType"], "KubePodCrashLooping");
        assert_eq!(
            obj["metadata"]["labels"][FINGERPRINT_LABEL],
            "3f6e8b1a2c4d5e6f"
        );
        let calls: Vec<_> = f
            .calls
            .iter()
            .map(|c| (c.method.as_str(), c.path.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("GET", "/namespaces/tarsy/alerts"),
                ("POST", "/namespaces/tarsy/alerts")
            ]
        );
        assert_eq!(
            f.calls[0].query["labelSelector"],
            format!("{FINGERPRINT_LABEL}=3f6e8b1a2c4d5e6f")
        );
        assert_eq!(f.calls[1].query["fieldManager"], "tarsy-webhooks");
    }

    // A repeat notification finds the active Alert and writes nothing.
    let r = send(addr, SINGLE).await;
    assert_eq!(r.json()["duplicates"], 1);
    assert_eq!(fake.lock().unwrap().calls.last().unwrap().method, "GET");

    // Resolved: annotation by merge patch, cancel by server-side apply.
    let r = send(addr, RESOLVED).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let f = fake.lock().unwrap();
    let obj = &f.objects["am-3f6e8b1a2c4d5e6f"];
    assert_eq!(
        obj["metadata"]["annotations"][RESOLVED_AT_ANNOTATION],
        "2025-06-02T08:52:00.004Z"
    );
    assert_eq!(obj["spec"]["cancel"], true);
    assert!(
        !obj["spec"]["data"].as_str().unwrap().is_empty(),
        "apply kept the spec"
    );
    let patches: Vec<&Call> = f.calls.iter().filter(|c| c.method == "PATCH").collect();
    assert_eq!(patches.len(), 2);
    assert_eq!(patches[0].content_type, "application/merge-patch+json");
    assert_eq!(patches[0].query["fieldManager"], "tarsy-webhooks");
    assert_eq!(patches[1].content_type, "application/apply-patch+yaml");
    assert_eq!(patches[1].query["fieldManager"], "tarsy-webhooks");
    assert_eq!(patches[1].query["force"], "true");
}

#[tokio::test]
async fn api_errors_map_to_rejections_and_retryable_failures() {
    let (api, fake) = fake_api().await;
    let sink = kube_sink(api).await;
    let addr = bridge(sink.clone(), false).await;

    // Admission denial: reported, not retried.
    let denied = SINGLE.replace(
        "\"alertname\": \"KubePodCrashLooping\",\n        \"container\"",
        "\"alertname\": \"Denied\",\n        \"container\"",
    );
    let r = send(addr, &denied).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let report = r.json();
    assert_eq!(report["rejected"], 1, "{report}");
    assert!(
        report["results"][0]["message"]
            .as_str()
            .unwrap()
            .contains("denied the request")
    );

    // API outage: 503, so Alertmanager retries.
    fake.lock().unwrap().broken = true;
    let r = send(addr, SINGLE).await;
    assert_eq!(r.status, 503, "{}", r.body);
    fake.lock().unwrap().broken = false;
    assert_eq!(send(addr, SINGLE).await.json()["created"], 1);

    // get / annotate of a missing Alert.
    assert!(sink.get("am-nothing").await.unwrap().is_none());
    assert!(sink.get("am-3f6e8b1a2c4d5e6f").await.unwrap().is_some());
    let e = sink.annotate("am-nothing", "k", "v").await.unwrap_err();
    assert!(
        matches!(e, tarsy_webhooks::sink::SinkError::NotFound { .. }),
        "{e}"
    );
}
