//! What the web dashboard needs beyond the session, timeline, trace and
//! chat endpoints (`operator/api/API.md`): list order and the "needs
//! attention" view, the configuration view, the cluster objects of a
//! session, and the UI routes themselves (files, fallback, cache, CSP).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use tarsy_api::{
    AlertObject, ApiConfig, Asset, ChainView, ClusterObjectsSource, Dashboard, ExecutionObject,
    SessionObjects, SystemConfiguration, SystemConfigurationSource,
};
use tarsy_core::{
    ExecutionKind, ExecutionStatus, IterationStrategy, ParallelType, SessionStatus, StageKind,
    SuccessPolicy,
};
use tarsy_store::{NewAgentExecution, NewStage, SessionOutcome, Store};

use crate::common::{TestApp, with_sqlite};
use crate::on_both_backends;

fn ids(page: &Value) -> Vec<String> {
    page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

async fn finish(store: &Store, id: &str, status: SessionStatus, summary_error: Option<&str>) {
    store
        .finish_session(
            id,
            SessionOutcome {
                status,
                final_analysis: Some("analysis".into()),
                executive_summary: None,
                executive_summary_error: summary_error.map(str::to_string),
                error_message: None,
                end_reason: None,
            },
        )
        .await
        .unwrap();
}

async fn failed_execution(store: &Store, session_id: &str, kind: ExecutionKind) -> String {
    let stage = store
        .create_stage(NewStage {
            id: None,
            session_id: session_id.into(),
            stage_name: "investigate".into(),
            kind: StageKind::Investigation,
            stage_index: 0,
            expected_agent_count: 2,
            parallel_type: Some(ParallelType::Replica),
            success_policy: Some(SuccessPolicy::Any),
            chat_id: None,
            chat_user_message_id: None,
        })
        .await
        .unwrap();
    let execution = store
        .create_agent_execution(NewAgentExecution {
            id: None,
            stage_id: stage.id,
            session_id: session_id.into(),
            agent_name: "KubernetesAgent-2".into(),
            agent_index: 2,
            kind,
            iteration_strategy: IterationStrategy::NativeThinking,
            llm_provider: None,
        })
        .await
        .unwrap()
        .id;
    store
        .update_agent_execution_status(&execution, ExecutionStatus::Failed, Some("boom"))
        .await
        .unwrap();
    execution
}

async fn list_sorts_and_finds_sessions_needing_attention(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let mut sessions = Vec::new();
    for kind in [
        "PodCrashLooping",
        "HighLatency",
        "PodCrashLooping",
        "PodCrashLooping",
        "HighLatency",
    ] {
        let (_, body) = app
            .post_json("/api/v1/alerts", &json!({"alert_type": kind, "data": "x"}))
            .await;
        sessions.push(body["session_id"].as_str().unwrap().to_string());
    }
    // 0: failed; 1: completed but an agent failed (policy any); 2: completed
    // cleanly; 3: completed without an executive summary; 4: timed out.
    finish(&store, &sessions[0], SessionStatus::Failed, None).await;
    failed_execution(&store, &sessions[1], ExecutionKind::Investigation).await;
    finish(&store, &sessions[1], SessionStatus::Completed, None).await;
    // A failed chat answer does not make an investigation need attention.
    failed_execution(&store, &sessions[2], ExecutionKind::Chat).await;
    finish(&store, &sessions[2], SessionStatus::Completed, None).await;
    finish(
        &store,
        &sessions[3],
        SessionStatus::Completed,
        Some("LLM down"),
    )
    .await;
    finish(&store, &sessions[4], SessionStatus::TimedOut, None).await;

    let (status, attention) = app.get("/api/v1/sessions?needs_attention=true").await;
    assert_eq!(status, 200, "{attention}");
    let mut got = ids(&attention);
    got.sort();
    let mut want = vec![
        sessions[0].clone(),
        sessions[1].clone(),
        sessions[3].clone(),
        sessions[4].clone(),
    ];
    want.sort();
    assert_eq!(got, want);
    assert_eq!(attention["pagination"]["total_items"], 4);

    // Combined with another filter.
    let (_, both) = app
        .get("/api/v1/sessions?needs_attention=true&alert_type=HighLatency")
        .await;
    assert_eq!(both["pagination"]["total_items"], 2);

    // Default order: newest first; `order=asc` reverses it.
    let (_, newest) = app.get("/api/v1/sessions").await;
    let (_, oldest) = app.get("/api/v1/sessions?sort=created_at&order=asc").await;
    let mut reversed = ids(&newest);
    reversed.reverse();
    assert_eq!(ids(&oldest), reversed);
    // By alert type, ascending, ties by id.
    let (_, by_type) = app.get("/api/v1/sessions?sort=alert_type&order=asc").await;
    let types: Vec<&str> = by_type["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["alert_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "HighLatency",
            "HighLatency",
            "PodCrashLooping",
            "PodCrashLooping",
            "PodCrashLooping"
        ]
    );
}

struct FixedConfiguration;

#[async_trait]
impl SystemConfigurationSource for FixedConfiguration {
    async fn configuration(&self) -> Result<SystemConfiguration, String> {
        Ok(SystemConfiguration {
            mode: "local".into(),
            chains: vec![ChainView {
                name: "k8s".into(),
                alert_types: vec!["PodCrashLooping".into()],
                chat_enabled: true,
                origin: "chains.yaml".into(),
                ..ChainView::default()
            }],
            ..SystemConfiguration::default()
        })
    }
}

struct BrokenConfiguration;

#[async_trait]
impl SystemConfigurationSource for BrokenConfiguration {
    async fn configuration(&self) -> Result<SystemConfiguration, String> {
        Err("the Kubernetes API is unreachable".into())
    }
}

/// Cluster objects for one known session; fails for the id "broken".
struct FakeCluster {
    session: String,
    execution: String,
}

#[async_trait]
impl ClusterObjectsSource for FakeCluster {
    async fn session_objects(&self, session_id: &str) -> Result<SessionObjects, String> {
        if session_id == "broken" || session_id != self.session {
            return Err(format!("no objects for {session_id}"));
        }
        let mut objects = SessionObjects {
            alert: Some(AlertObject {
                namespace: "sre".into(),
                name: "api-x7k2".into(),
                phase: Some("InProgress".into()),
            }),
            ..SessionObjects::default()
        };
        objects.executions.insert(
            self.execution.clone(),
            ExecutionObject {
                namespace: "sre".into(),
                name: "api-x7k2-s0-a1".into(),
                phase: Some("Active".into()),
                pod_name: Some("api-x7k2-s0-a1-pod".into()),
            },
        );
        Ok(objects)
    }
}

async fn configuration_view_and_cluster_objects(store: Store) {
    // Without sources: the endpoint is a 404 and no cluster field appears.
    let plain = TestApp::start(store.clone()).await;
    let (status, body) = plain.get("/api/v1/system/configuration").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"], "not_found");
    let id = plain.submit().await;
    let execution = failed_execution(&store, &id, ExecutionKind::Investigation).await;
    let (_, detail) = plain.get(&format!("/api/v1/sessions/{id}")).await;
    assert!(detail.get("cluster").is_none(), "{detail}");
    assert!(
        detail["stages"][0]["executions"][0]
            .get("cluster")
            .is_none(),
        "{detail}"
    );

    let wired = TestApp::start_with(
        store.clone(),
        ApiConfig {
            configuration: Some(Arc::new(FixedConfiguration)),
            cluster_objects: Some(Arc::new(FakeCluster {
                session: id.clone(),
                execution: execution.clone(),
            })),
            ..ApiConfig::default()
        },
        |api| api,
    )
    .await;
    let (status, config) = wired.get("/api/v1/system/configuration").await;
    assert_eq!(status, 200, "{config}");
    assert_eq!(config["mode"], "local");
    assert_eq!(
        config["chains"][0]["alert_types"],
        json!(["PodCrashLooping"])
    );

    let (_, detail) = wired.get(&format!("/api/v1/sessions/{id}")).await;
    assert_eq!(
        detail["cluster"],
        json!({"namespace": "sre", "name": "api-x7k2", "phase": "InProgress"})
    );
    assert_eq!(
        detail["stages"][0]["executions"][0]["cluster"],
        json!({"namespace": "sre", "name": "api-x7k2-s0-a1", "phase": "Active",
               "pod_name": "api-x7k2-s0-a1-pod"})
    );
    // A source that fails leaves the session readable, without the fields.
    let other = wired.submit().await;
    let (status, detail) = wired.get(&format!("/api/v1/sessions/{other}")).await;
    assert_eq!(status, 200, "{detail}");
    assert!(detail.get("cluster").is_none());

    let broken = TestApp::start_with(
        store.clone(),
        ApiConfig {
            configuration: Some(Arc::new(BrokenConfiguration)),
            ..ApiConfig::default()
        },
        |api| api,
    )
    .await;
    let (status, body) = broken.get("/api/v1/system/configuration").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("the Kubernetes API is unreachable"),
        "{body}"
    );
}

on_both_backends!(
    list_sorts_and_finds_sessions_needing_attention,
    configuration_view_and_cluster_objects,
);

static BUILT: &[Asset] = &[
    Asset {
        path: "index.html",
        bytes: b"<!doctype html><div id=\"root\"></div>",
    },
    Asset {
        path: "assets/index-abc123.js",
        bytes: b"console.log('app')",
    },
    Asset {
        path: "favicon.svg",
        bytes: b"<svg/>",
    },
];

async fn get_raw(app: &TestApp, path: &str) -> reqwest::Response {
    // No redirects followed: the test checks them.
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(app.url(path))
        .send()
        .await
        .unwrap()
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_routes_serve_files_fallback_and_policy() {
    with_sqlite(|store| async move {
        let app = TestApp::start_with(
            store,
            ApiConfig {
                dashboard: Some(Dashboard::new(BUILT)),
                ..ApiConfig::default()
            },
            |api| api,
        )
        .await;

        let root = get_raw(&app, "/").await;
        assert_eq!(root.status(), 307);
        assert_eq!(header(&root, "location"), "/ui/");

        // The app, and every client-side route, answer index.html, revalidated.
        for path in [
            "/ui/",
            "/ui/sessions/42",
            "/ui/sessions/42/trace",
            "/ui/system",
        ] {
            let r = get_raw(&app, path).await;
            assert_eq!(r.status(), 200, "{path}");
            assert_eq!(header(&r, "cache-control"), "no-cache", "{path}");
            assert!(header(&r, "content-type").starts_with("text/html"));
            let csp = header(&r, "content-security-policy").to_string();
            assert!(csp.contains("script-src 'self'"), "{csp}");
            assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
            assert!(!csp.contains("unsafe-inline"), "{csp}");
            assert!(r.text().await.unwrap().contains("id=\"root\""));
        }

        // Hashed assets are immutable; a missing one is a 404, not the app.
        let js = get_raw(&app, "/ui/assets/index-abc123.js").await;
        assert_eq!(js.status(), 200);
        assert_eq!(
            header(&js, "cache-control"),
            "public, max-age=31536000, immutable"
        );
        assert!(header(&js, "content-type").starts_with("text/javascript"));
        let stale = get_raw(&app, "/ui/assets/index-old.js").await;
        assert_eq!(stale.status(), 404);
        let icon = get_raw(&app, "/ui/favicon.svg").await;
        assert_eq!(header(&icon, "content-type"), "image/svg+xml");
        assert_eq!(header(&icon, "cache-control"), "no-cache");

        // The API keeps its own routes and its JSON 404s.
        let (status, body) = app.get("/api/v1/sessions").await;
        assert_eq!(status, 200, "{body}");
        let (status, body) = app.get("/api/v1/ui/nothing").await;
        assert_eq!(status, 404);
        assert_eq!(body["error"], "not_found");
        let (status, _) = app.get("/health").await;
        assert_eq!(status, 200);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_not_built_says_how_to_build_it() {
    with_sqlite(|store| async move {
        let app = TestApp::start_with(
            store,
            ApiConfig {
                dashboard: Some(Dashboard::default()),
                ..ApiConfig::default()
            },
            |api| api,
        )
        .await;
        for path in ["/", "/ui/", "/ui/sessions/1"] {
            let r = get_raw(&app, path).await;
            assert_eq!(r.status(), 200, "{path}");
            assert!(header(&r, "content-security-policy").contains("default-src 'none'"));
            let text = r.text().await.unwrap();
            assert!(text.contains("npm ci &amp;&amp; npm run build"), "{text}");
            assert!(text.contains("cargo build -p tarsy"), "{text}");
        }
        // Without a dashboard at all, `/` is an ordinary JSON 404.
        let plain = TestApp::start(app.store.clone()).await;
        let (status, body) = plain.get("/").await;
        assert_eq!(status, 404);
        assert_eq!(body["error"], "not_found");
    })
    .await;
}
