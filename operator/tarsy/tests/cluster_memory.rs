//! Investigation memory in cluster mode, end to end: the real
//! `tarsy controller`, real `tarsy runner` pods on the Kubernetes API
//! emulator (or a real cluster with `KUBECONFIG`, see `conformance.rs` for
//! the variables), the API on cluster-mode control, real Postgres and one
//! scripted LLM service all pods call.
//!
//! The scenario local mode's e2e test runs (`tarsy_e2e::memory_scenario`):
//! an investigation is scored and a reflector pod learns from it (a planted
//! secret stored masked, in the Alert namespace's scope); the next alert's
//! pod gets the lesson in its prompt and recalls it with the tool; a
//! person rates the first investigation inaccurate with feedback: its
//! memories are deprecated and a feedback reflector pod learns from the
//! (masked) feedback; the third alert gets nothing.

mod common;

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use common::{ClusterScene, Controller, apply_yaml, poll};
use serde_json::{Value, json};
use tarsy_e2e::memory_scenario::{
    ALERT, CHAIN, assert_corrected, assert_learned, assert_recalled, investigation_prompt,
    reflected, review, script,
};
use tarsy_scripted_llm::ScriptedLlmServer;
use tarsy_store::Store;

/// The provider and agent [`CHAIN`] uses.
const MANIFESTS: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: test-llm}
spec: {type: google, model: test-model, apiKeyEnv: TEST_KEY}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: alpha}
spec: {customInstructions: "You are Alpha. Find the cause."}
"#;
/// How long one session, or one reflector, may take through pods.
const WITHIN: Duration = Duration::from_secs(180);

struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Submits the scenario's alert and waits for its session to complete.
    async fn investigate(&self, store: &Store, controller: &Controller) -> String {
        let (status, body) = self
            .post(
                "/api/v1/alerts",
                json!({"alert_type": "PoolExhausted", "data": ALERT}),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        let id = body["session_id"].as_str().unwrap().to_string();
        let session = poll(WITHIN.as_secs(), async || {
            store
                .get_session(&id)
                .await
                .ok()
                .filter(|s| s.status.is_terminal())
        })
        .await
        .unwrap_or_else(|()| {
            panic!(
                "session {id} did not end; operator log:\n{}",
                common::tail(&controller.log, 40)
            )
        });
        assert_eq!(session.status.as_str(), "completed", "{session:?}");
        id
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_mode_learns_recalls_and_forgets() {
    scenario(false).await;
}

/// The same with an embedding provider: the pods embed through the LLM
/// service's `Embed`, with the configured model.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_mode_learns_recalls_and_forgets_with_embeddings() {
    scenario(true).await;
}

async fn scenario(embeddings: bool) {
    let scene = ClusterScene::start(if embeddings {
        "cluster-memory-embeddings"
    } else {
        "cluster-memory"
    })
    .await;
    let (client, ns, store) = (&scene.client, &scene.ns, &scene.store);
    let real_cluster = std::env::var("KUBECONFIG").is_ok_and(|v| !v.is_empty());
    let host = std::env::var("TARSY_E2E_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "127.0.0.1".into());
    let bind: std::net::IpAddr = if real_cluster && host != "127.0.0.1" {
        [0, 0, 0, 0].into()
    } else {
        [127, 0, 0, 1].into()
    };
    let llm = ScriptedLlmServer::start_on((bind, 0).into(), script())
        .await
        .unwrap();
    apply_yaml(client, ns, &format!("{MANIFESTS}---{CHAIN}")).await;
    let mut controller_env = vec![("TARSY_MEMORY_ENABLED".to_string(), "true".to_string())];
    if embeddings {
        controller_env.push(("TARSY_MEMORY_EMBEDDING_PROVIDER".into(), "test-llm".into()));
        controller_env.push((
            "TARSY_MEMORY_EMBEDDING_MODEL".into(),
            "test-embedding".into(),
        ));
    }
    let controller = scene.controller(
        controller_env,
        format!("http://{host}:{}", llm.addr().port()),
    );

    // The API as `tarsy api` serves it in the namespace (its memory scope),
    // with the same switches as the operator (the chart gives both).
    let hub = tarsy_events::EventHub::start(store.clone());
    let mut defaults = tarsy_config::Defaults::default();
    defaults.memory.enabled = true;
    let control =
        tarsy_cluster_control::KubeSessionControl::new(client.clone(), store.clone(), ns, defaults)
            .with_publisher(hub.publisher());
    let router = tarsy_api::Api::new(
        hub,
        Arc::new(control),
        tarsy_api::ApiConfig {
            memory_scope: Some(ns.to_string()),
            ..tarsy_api::ApiConfig::default()
        },
    )
    .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).into_future().await;
    });
    let api = Api {
        base,
        http: reqwest::Client::new(),
    };

    // 1. Scored, then learned from by a reflector pod, in the namespace's
    //    scope; the planted secret stored masked.
    let first = api.investigate(store, &controller).await;
    reflected(store, &first, WITHIN).await;
    let lesson = assert_learned(store, &first, ns).await;
    // With an embedding provider, the pods embedded every text they
    // recalled by and every memory they stored, with its model.
    let embedded = llm.script().embed_requests();
    assert_eq!(!embedded.is_empty(), embeddings, "{embedded:?}");
    assert!(embedded.iter().all(|r| {
        r.llm_config
            .as_ref()
            .is_some_and(|c| c.model == "test-embedding")
    }));

    // 2. The next investigation's pod recalls it.
    let second = api.investigate(store, &controller).await;
    assert_recalled(store, &second, &first, &lesson).await;
    reflected(store, &second, WITHIN).await;
    assert!(store.learned_memories(&second).await.unwrap().is_empty());

    // 3. Rated inaccurate, with feedback: what the first taught is
    //    deprecated, and a feedback reflector pod learns from the words
    //    (masked before the model reads them).
    let (status, body) = api
        .post(&format!("/api/v1/sessions/{first}/review"), review())
        .await;
    assert_eq!(status, 200, "{body}");
    assert_corrected(store, llm.script(), &first, WITHIN).await;

    // 4. The third investigation gets nothing.
    let third = api.investigate(store, &controller).await;
    assert!(
        !investigation_prompt(store, &third)
            .await
            .contains("Lessons from past investigations")
    );
    assert!(store.injected_memories(&third).await.unwrap().is_empty());
    reflected(store, &third, WITHIN).await;
    assert_eq!(
        llm.script().remaining(),
        0,
        "every scripted answer was used"
    );

    server.abort();
    scene.finish(controller).await;
}
