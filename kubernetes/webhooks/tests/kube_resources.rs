//! `KubeResources` (watch caches) against a fake API server that serves
//! lists and keeps watches open.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tarsy_webhooks::resources::{KubeResources, ReadError, ResourceReader};

#[derive(Clone)]
struct Fake {
    broken: Arc<AtomicBool>,
}

fn item(kind: &str, ns: &str, name: &str) -> Value {
    let spec = match kind {
        "Chain" => {
            json!({"alertTypes": [format!("{name}-type")], "stages": [{"name": "s", "agent": "KubernetesAgent"}]})
        }
        "Agent" => json!({"mcpServers": ["kubernetes-server"]}),
        "MCPServer" => json!({"url": "http://mcp.example/mcp"}),
        _ => json!({"type": "openai", "model": "gpt-5"}),
    };
    json!({
        "apiVersion": "tarsy.dev/v1alpha1", "kind": kind,
        "metadata": {"name": name, "namespace": ns, "resourceVersion": "5", "uid": format!("{ns}-{name}")},
        "spec": spec
    })
}

async fn list(
    State(fake): State<Fake>,
    Path(plural): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    if fake.broken.load(Ordering::Relaxed) {
        return (StatusCode::INTERNAL_SERVER_ERROR, "down").into_response();
    }
    if q.contains_key("watch") {
        // A watch that stays open without events.
        return Body::from_stream(futures::stream::pending::<Result<Vec<u8>, std::io::Error>>())
            .into_response();
    }
    let kind = match plural.as_str() {
        "chains" => "Chain",
        "agents" => "Agent",
        "mcpservers" => "MCPServer",
        _ => "LLMProvider",
    };
    let items = vec![
        item(kind, "team-a", "one"),
        item(kind, "team-a", "two"),
        item(kind, "team-b", "three"),
    ];
    Json(json!({
        "apiVersion": "tarsy.dev/v1alpha1", "kind": format!("{kind}List"),
        "metadata": {"resourceVersion": "5"}, "items": items
    }))
    .into_response()
}

async fn start(broken: bool) -> KubeResources {
    let fake = Fake {
        broken: Arc::new(AtomicBool::new(broken)),
    };
    let router = Router::new()
        .route("/apis/tarsy.dev/v1alpha1/{plural}", get(list))
        .with_state(fake);
    let addr = common::serve_http(router).await;
    let client =
        kube::Client::try_from(kube::Config::new(format!("http://{addr}").parse().unwrap()))
            .unwrap();
    let (reader, run) = KubeResources::start(client, None);
    tokio::spawn(run);
    reader.with_ready_timeout(Duration::from_millis(500))
}

fn names<K: kube::Resource>(v: &[K]) -> Vec<String> {
    let mut n: Vec<String> = v.iter().filter_map(|o| o.meta().name.clone()).collect();
    n.sort();
    n
}

#[tokio::test]
async fn reads_come_from_the_watch_caches_per_namespace() {
    let reader = start(false).await;
    let chains = reader.chains("team-a").await.unwrap();
    assert_eq!(names(&chains), ["one", "two"]);
    assert_eq!(chains[0].spec.alert_types.len(), 1);
    assert_eq!(
        names(&reader.agents("team-a").await.unwrap()),
        ["one", "two"]
    );
    assert_eq!(
        names(&reader.mcp_servers("team-b").await.unwrap()),
        ["three"]
    );
    assert_eq!(
        names(&reader.llm_providers("team-a").await.unwrap()),
        ["one", "two"]
    );
    assert!(reader.chains("team-c").await.unwrap().is_empty());
}

#[tokio::test]
async fn unsynced_caches_are_an_error_not_an_empty_namespace() {
    let reader = start(true).await;
    let err = reader.chains("team-a").await.unwrap_err();
    assert!(
        matches!(err, ReadError::NotReady { kind: "Chain" }),
        "{err}"
    );
}
