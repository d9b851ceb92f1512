//! Cluster-mode API end to end: the real axum router over HTTP, the
//! project's Kubernetes API emulator (`e2e/kube`), real Postgres, and for
//! the chat answer the real runner with the scripted LLM service.
//!
//! Needs the emulator's Python: run `eval "$(e2e/kube/install.sh)"` (it
//! exports `TARSY_KUBE_PYTHON`; the default venv location is also tried).
//! Without it these tests FAIL with that instruction. Postgres:
//! `TARSY_TEST_DATABASE_URL` (default: the server `scripts/postgres.sh` starts).

use std::future::IntoFuture;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tarsy_api::ApiConfig;
use tarsy_cluster_control::KubeSessionControl;
use tarsy_cluster_control::health::ClusterHealth;
use tarsy_config::Defaults;
use tarsy_core::{ExecutionKind, ExecutionStatus, SessionStatus};
use tarsy_crds::{AgentExecution, Alert, ExecutionPhase};
use tarsy_kube_harness::{Emulator, EmulatorOptions};
use tarsy_store::testing::TestDatabase;
use tarsy_store::{SessionOutcome, Store};

const NS: &str = "default";

/// The API served over HTTP on cluster-mode control, with the namespace's
/// configuration in the emulator.
struct Env {
    health: Arc<ClusterHealth>,
    _emu: Emulator,
    _dir: PathBuf,
    db: TestDatabase,
    client: Client,
    store: Store,
    base: String,
    http: reqwest::Client,
    server: tokio::task::JoinHandle<()>,
    operator: tokio::task::JoinHandle<()>,
}

impl Env {
    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    fn alerts(&self) -> Api<Alert> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn executions(&self) -> Api<AgentExecution> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// The AgentExecution of chat stage `stage_id`, once the operator made it.
    async fn chat_execution(&self, stage_id: &str) -> AgentExecution {
        for _ in 0..200 {
            let found = self
                .executions()
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|ae| ae.spec.stage.id.as_deref() == Some(stage_id));
            if let Some(ae) = found {
                return ae;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no AgentExecution for chat stage {stage_id}")
    }

    async fn alert(&self, session_id: &str) -> Alert {
        self.alerts()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|a| a.uid().as_deref() == Some(session_id))
            .unwrap_or_else(|| panic!("no Alert with uid {session_id}"))
    }

    async fn submit(&self, body: Value) -> String {
        let (status, out) = self.post("/api/v1/alerts", body).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{out}");
        out["session_id"].as_str().unwrap().to_string()
    }

    /// What the operator does when an investigation ends: the Alert's phase
    /// and the session row.
    async fn finish(&self, session_id: &str, phase: &str, status: SessionStatus) {
        let name = self.alert(session_id).await.name_any();
        self.alerts()
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": phase}})),
            )
            .await
            .unwrap();
        self.store
            .finish_session(
                session_id,
                SessionOutcome {
                    status,
                    final_analysis: Some("the pod is OOMKilled".into()),
                    executive_summary: None,
                    executive_summary_error: None,
                    error_message: None,
                    end_reason: None,
                },
            )
            .await
            .unwrap();
    }

    async fn shutdown(self) {
        self.server.abort();
        self.operator.abort();
        self.store.close().await;
        self.db.drop_database().await.unwrap();
    }
}

async fn create<K>(client: &Client, manifest: Value)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(manifest).unwrap();
    Api::<K>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

async fn env() -> Env {
    let dir = std::env::temp_dir().join(format!(
        "tarsy-cluster-control-{}-{}",
        std::process::id(),
        next_dir()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let emu = Emulator::start(EmulatorOptions::new(&dir)).unwrap_or_else(|e| panic!("{e}"));
    let client = emu.client().await.unwrap_or_else(|e| panic!("{e}"));
    let db = TestDatabase::create("tarsy_cluster_control")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let store = Store::connect(db.url()).await.unwrap();

    create::<tarsy_crds::LLMProvider>(
        &client,
        json!({"apiVersion": "tarsy.dev/v1alpha1", "kind": "LLMProvider",
               "metadata": {"name": "test-llm"},
               "spec": {"type": "google", "model": "test-model"}}),
    )
    .await;
    // An agent without MCP servers: chat answers then need no MCP server.
    create::<tarsy_crds::Agent>(
        &client,
        json!({"apiVersion": "tarsy.dev/v1alpha1", "kind": "Agent",
               "metadata": {"name": "quiet"},
               "spec": {"description": "test agent", "customInstructions": "Investigate."}}),
    )
    .await;
    create::<tarsy_crds::Chain>(
        &client,
        json!({"apiVersion": "tarsy.dev/v1alpha1", "kind": "Chain",
               "metadata": {"name": "crash"},
               "spec": {"alertTypes": ["PodCrashLooping"], "llmProvider": "test-llm",
                        "iterationStrategy": "langchain",
                        "stages": [{"name": "investigate", "agents": [{"name": "quiet"}]}]}}),
    )
    .await;
    create::<tarsy_crds::Chain>(
        &client,
        json!({"apiVersion": "tarsy.dev/v1alpha1", "kind": "Chain",
               "metadata": {"name": "silent"},
               "spec": {"alertTypes": ["DiskFull"], "llmProvider": "test-llm",
                        "stages": [{"name": "investigate", "agents": [{"name": "quiet"}]}],
                        "chat": {"enabled": false}}}),
    )
    .await;

    let hub = tarsy_events::EventHub::start(store.clone());
    let control = KubeSessionControl::new(client.clone(), store.clone(), NS, Defaults::default())
        .with_publisher(hub.publisher());
    // `/health` as `tarsy api` serves it.
    let health = ClusterHealth::new(client.clone(), store.clone(), NS);
    health.refresh().await;
    let router = tarsy_api::Api::new(hub, Arc::new(control), ApiConfig::default())
        .with_mcp_health(health.clone())
        .with_warnings(health.clone())
        .with_dependencies(health.clone())
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).into_future().await;
    });
    let operator = tokio::spawn(operator_part(client.clone(), store.clone()));
    Env {
        health,
        _emu: emu,
        _dir: dir,
        db,
        client,
        store,
        base: format!("http://{addr}"),
        http: reqwest::Client::new(),
        server,
        operator,
    }
}

/// The operator's part in these tests, done by its own code (there is no
/// operator here, and the tests move sessions along by hand): the session
/// row of a new Alert, and the AgentExecution a finished Alert's chat
/// question asks for.
async fn operator_part(client: Client, store: Store) {
    use tarsy_controller::alert::{AlertInputs, StoreOp, SummaryProgress, reconcile_alert};
    let publisher = tarsy_events::StorePublisher::new(store.clone(), None);
    let defaults = Defaults::default();
    let masker = tarsy_exec::intake::alert_masker(&defaults);
    let alerts: Api<Alert> = Api::namespaced(client.clone(), NS);
    let executions: Api<AgentExecution> = Api::namespaced(client.clone(), NS);
    loop {
        let config = tarsy_cluster_control::namespace_config(&client, NS, &defaults).await;
        let listed = alerts.list(&ListParams::default()).await;
        let owned = executions.list(&ListParams::default()).await;
        if let (Ok(config), Ok(listed), Ok(owned)) = (config, listed, owned) {
            for alert in listed.items {
                let uid = alert.uid().unwrap_or_default();
                let mine = owned
                    .items
                    .iter()
                    .filter(|ae| tarsy_crds::contract::owned_by(ae, &uid))
                    .map(|ae| (ae.name_any(), ae.clone()))
                    .collect();
                let chat = tarsy_controller::chat_request(&store, &alert, &mine)
                    .await
                    .ok()
                    .flatten();
                let scoring = tarsy_controller::scoring_state(&store, &alert)
                    .await
                    .unwrap_or_default();
                let out = reconcile_alert(&AlertInputs {
                    alert: &alert,
                    config: &config,
                    executions: &mine,
                    admitted: true,
                    summary: &SummaryProgress::Idle,
                    alert_masker: masker.as_ref(),
                    alert_ttl: None,
                    chat: chat.as_ref(),
                    scoring: &scoring,
                    reflectors: &[],
                    cost: None,
                    hold: None,
                    now: k8s_openapi::jiff::Timestamp::now(),
                });
                let finished = alert
                    .status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .is_some_and(|p| p.is_terminal());
                for op in &out.store {
                    // Of a new Alert only its row: the tests run sessions by hand.
                    if finished || matches!(op, StoreOp::CreateSession(_)) {
                        let _ = tarsy_exec::workflow::perform(&store, &publisher, op).await;
                    }
                }
                if finished {
                    for ae in &out.create {
                        let _ = executions.create(&PostParams::default(), ae).await;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn next_dir() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[tokio::test]
async fn submitted_alert_is_an_alert_resource_and_a_readable_session() {
    let env = env().await;
    let data = "pod web-1 restarts; DB password: hunter2hunter2; token=ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let (status, out) = env
        .post(
            "/api/v1/alerts",
            json!({"alert_type": "PodCrashLooping", "data": data,
                   "runbook_url": "https://runbooks.example/crash",
                   "mcp_selection": {"servers": [{"name": "kubernetes-server", "tools": ["pods_list"]}],
                                     "native_tools": {"google_search": false}}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    assert_eq!(out["chain_id"], "crash");
    assert_eq!(out["status"], "pending");
    let id = out["session_id"].as_str().unwrap().to_string();

    // The session id is the Alert's UID; the spec carries the submission.
    let alert = env.alert(&id).await;
    assert!(alert.name_any().starts_with("api-"), "{}", alert.name_any());
    assert_eq!(alert.spec.alert_type, "PodCrashLooping");
    assert_eq!(alert.spec.data, data);
    assert_eq!(alert.spec.chain_ref, None);
    assert_eq!(
        alert.spec.runbook_url.as_deref(),
        Some("https://runbooks.example/crash")
    );
    assert_eq!(alert.spec.author.as_deref(), Some("api-client"));
    assert_eq!(alert.spec.source.as_ref().unwrap().system, "api");
    let selection = alert.spec.mcp_selection.clone().unwrap();
    assert_eq!(selection.servers[0].name, "kubernetes-server");
    assert_eq!(
        selection.servers[0].tools.as_deref(),
        Some(&["pods_list".to_string()][..])
    );

    // Readable at once, masked as the operator masks it.
    let (status, session) = env.get(&format!("/api/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{session}");
    assert_eq!(session["status"], "pending");
    assert_eq!(session["chain_id"], "crash");
    assert_eq!(session["author"], "api-client");
    let masker = tarsy_masking::MaskingService::new([], Defaults::default().alert_masking).unwrap();
    let masked = masker.mask_alert_data(data);
    assert_ne!(masked, data, "the default alert masking masks this data");
    assert_eq!(session["alert_data"], masked.as_str());
    assert!(!session["alert_data"].as_str().unwrap().contains("hunter2"));
    // The selection as submitted (the same form local mode stores), not
    // the resource's camelCase form.
    assert_eq!(
        session["mcp_selection"],
        json!({"servers": [{"name": "kubernetes-server", "tools": ["pods_list"]}],
               "native_tools": {"google_search": false}})
    );
    // The same form the operator writes for this Alert.
    let row = env.store.get_session(&id).await.unwrap();
    assert_eq!(
        row.mcp_selection,
        Some(serde_json::to_value(tarsy_core::McpSelection::from(&selection)).unwrap())
    );

    // Session lists hear of it.
    let events = env.store.events_since("sessions", 0, 10).await.unwrap();
    assert!(
        events.iter().any(|e| e.payload["type"] == "session.status"
            && e.payload["session_id"] == id.as_str()
            && e.payload["status"] == "pending"),
        "{events:?}"
    );

    // An explicit chain overrides resolution by type.
    let (status, out) = env
        .post(
            "/api/v1/alerts",
            json!({"alert_type": "SomethingElse", "data": "x", "chain": "crash"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    let other = env.alert(out["session_id"].as_str().unwrap()).await;
    assert_eq!(other.spec.chain_ref.as_deref(), Some("crash"));
    env.shutdown().await;
}

#[tokio::test]
async fn refused_alerts_say_why_and_create_nothing() {
    let env = env().await;
    // An MCP server whose tools a runner reported (the operator keeps them
    // in its lastHealth).
    create::<tarsy_crds::MCPServer>(
        &env.client,
        json!({"apiVersion": "tarsy.dev/v1alpha1", "kind": "MCPServer",
               "metadata": {"name": "prometheus"},
               "spec": {"url": "http://prometheus-mcp:8080/mcp"}}),
    )
    .await;
    Api::<tarsy_crds::MCPServer>::namespaced(env.client.clone(), NS)
        .patch_status(
            "prometheus",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {"lastHealth": {
                "healthy": true, "checkedAt": "2026-11-26T10:00:00Z",
                "toolCount": 2, "tools": ["query", "query_range"]}}})),
        )
        .await
        .unwrap();
    let cases = [
        (
            json!({"alert_type": "NoSuchType", "data": "x"}),
            "NoSuchType",
        ),
        (
            json!({"alert_type": "PodCrashLooping", "data": "x", "chain": "nope"}),
            "nope",
        ),
        (
            json!({"alert_type": "PodCrashLooping", "data": "x",
                   "mcp_selection": {"servers": [{"name": "ghost-server"}]}}),
            "ghost-server",
        ),
        (
            json!({"alert_type": "PodCrashLooping", "data": "x",
                   "mcp_selection": {"servers": [{"name": "prometheus", "tools": ["query_rang"]}]}}),
            r#"MCP server "prometheus" has no tool "query_rang" (it offers: query, query_range)"#,
        ),
    ];
    for (body, named) in cases {
        let (status, out) = env.post("/api/v1/alerts", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} -> {out}");
        assert_eq!(out["error"], "bad_request");
        assert!(
            out["message"].as_str().unwrap().contains(named),
            "{body} -> {out}"
        );
    }
    let alerts = env.alerts().list(&ListParams::default()).await.unwrap();
    assert!(alerts.items.is_empty(), "{:?}", alerts.items);
    // A tool the server offers is accepted.
    let (status, out) = env
        .post(
            "/api/v1/alerts",
            json!({"alert_type": "PodCrashLooping", "data": "x",
                   "mcp_selection": {"servers": [{"name": "prometheus", "tools": ["query_range"]}]}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    env.shutdown().await;
}

#[tokio::test]
async fn cancel_sets_spec_cancel_or_refuses() {
    let env = env().await;
    let body = json!({"alert_type": "PodCrashLooping", "data": "x"});

    // Not started yet: nothing runs, it ends at once.
    let pending = env.submit(body.clone()).await;
    let (status, out) = env
        .post(&format!("/api/v1/sessions/{pending}/cancel"), json!(null))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["cancelled"], "session");
    assert_eq!(out["status"], "cancelled");
    assert_eq!(env.alert(&pending).await.spec.cancel, Some(true));

    // Running (the operator set InProgress): cancelling.
    let running = env.submit(body.clone()).await;
    let name = env.alert(&running).await.name_any();
    env.alerts()
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "InProgress"}})),
        )
        .await
        .unwrap();
    let (status, out) = env
        .post(&format!("/api/v1/sessions/{running}/cancel"), json!(null))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["status"], "cancelling");
    assert_eq!(env.alert(&running).await.spec.cancel, Some(true));

    // Finished, no chat answer running: nothing to cancel.
    let done = env.submit(body).await;
    env.finish(&done, "Completed", SessionStatus::Completed)
        .await;
    let (status, out) = env
        .post(&format!("/api/v1/sessions/{done}/cancel"), json!(null))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{out}");
    assert!(
        out["message"].as_str().unwrap().contains("completed"),
        "{out}"
    );
    assert_eq!(env.alert(&done).await.spec.cancel, None);

    let (status, out) = env
        .post("/api/v1/sessions/no-such-session/cancel", json!(null))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    env.shutdown().await;
}

#[tokio::test]
async fn chat_creates_an_owned_chat_execution_one_at_a_time() {
    let env = env().await;
    let id = env
        .submit(json!({"alert_type": "PodCrashLooping", "data": "pod web-1 restarts"}))
        .await;
    let chat_path = format!("/api/v1/sessions/{id}/chat/messages");

    // Not finished yet: no chat.
    let (status, out) = env.post(&chat_path, json!({"content": "why?"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{out}");

    env.finish(&id, "Completed", SessionStatus::Completed).await;
    let (status, out) = env
        .post(&chat_path, json!({"content": "  why did it crash?  "}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    let chat_id = out["chat_id"].as_str().unwrap().to_string();
    let message_id = out["message_id"].as_str().unwrap().to_string();
    let stage_id = out["stage_id"].as_str().unwrap().to_string();
    assert_eq!(stage_id, format!("{id}-s1"));

    let alert = env.alert(&id).await;
    // The API asked the operator for it through the Alert.
    assert_eq!(
        alert
            .annotations()
            .get(tarsy_crds::contract::CHAT_ANNOTATION)
            .map(String::as_str),
        Some(stage_id.as_str())
    );
    let ae = &env.chat_execution(&stage_id).await;
    let executions = env.executions().list(&ListParams::default()).await.unwrap();
    assert_eq!(executions.items.len(), 1, "{:?}", executions.items);
    assert_eq!(ae.spec.kind, tarsy_crds::ExecutionKind::Chat);
    assert_eq!(ae.spec.session_id, id);
    assert_eq!(ae.spec.alert_name, alert.name_any());
    assert_eq!(ae.spec.chain, "crash");
    assert_eq!(ae.spec.stage.id.as_deref(), Some(stage_id.as_str()));
    assert_eq!(ae.spec.stage.name, "Chat Response");
    assert_eq!(ae.spec.agent_name, "chat-agent");
    assert_eq!(ae.spec.display_name, "ChatAgent");
    assert_eq!(ae.spec.resolved.llm_provider, "test-llm");
    let chat = ae.spec.chat.as_ref().unwrap();
    assert_eq!(chat.chat_id, chat_id);
    assert_eq!(chat.message_id, message_id);
    assert_eq!(chat.question, "why did it crash?");
    assert_eq!(chat.author.as_deref(), Some("api-client"));
    let owner = &ae.owner_references()[0];
    assert_eq!(owner.uid, id);
    assert_eq!(owner.kind, "Alert");
    assert_eq!(owner.controller, Some(true));
    assert_eq!(
        ae.labels().get("tarsy.dev/alert").map(String::as_str),
        Some(alert.name_any().as_str())
    );
    assert_eq!(
        ae.name_any(),
        tarsy_crds::contract::execution_name(&alert.name_any(), 1, "ChatAgent")
    );
    // The Postgres rows use the operator's ids.
    let row = env
        .store
        .get_agent_execution(&format!("{stage_id}-e1"))
        .await
        .unwrap();
    assert_eq!(row.kind, ExecutionKind::Chat);
    let stage = env.store.get_stage(&stage_id).await.unwrap();
    assert_eq!(
        stage.chat_user_message_id.as_deref(),
        Some(message_id.as_str())
    );

    // One answer at a time; the refused question is not kept.
    let (status, out) = env.post(&chat_path, json!({"content": "and now?"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{out}");
    assert_eq!(
        env.store
            .list_chat_user_messages(&chat_id)
            .await
            .unwrap()
            .len(),
        1
    );

    // Cancel reaches the running answer through the stop annotation.
    let (status, out) = env
        .post(&format!("/api/v1/sessions/{id}/cancel"), json!(null))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["cancelled"], "chat");
    assert_eq!(out["chat_id"], chat_id.as_str());
    assert_eq!(out["stage_id"], stage_id.as_str());
    let ae = env.executions().get(&ae.name_any()).await.unwrap();
    assert_eq!(
        ae.annotations().get("tarsy.dev/stop").map(String::as_str),
        Some("cancelled")
    );

    // Once the execution ended (here: the operator recorded Cancelled
    // after deleting a pod that never ran), the next question is taken.
    env.executions()
        .patch_status(
            &ae.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Cancelled", "error": "cancelled by user"}})),
        )
        .await
        .unwrap();
    let (status, out) = env.post(&chat_path, json!({"content": "and now?"})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    assert_eq!(out["stage_id"], format!("{id}-s2"));
    let closed = env.store.get_stage(&stage_id).await.unwrap();
    assert_eq!(closed.status, ExecutionStatus::Cancelled);
    env.shutdown().await;
}

#[tokio::test]
async fn chat_refusals() {
    let env = env().await;
    let silent = env
        .submit(json!({"alert_type": "DiskFull", "data": "disk at 99%"}))
        .await;
    env.finish(&silent, "Completed", SessionStatus::Completed)
        .await;
    let (status, out) = env
        .post(
            &format!("/api/v1/sessions/{silent}/chat/messages"),
            json!({"content": "why?"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert!(out["message"].as_str().unwrap().contains("silent"), "{out}");

    let cancelled = env
        .submit(json!({"alert_type": "PodCrashLooping", "data": "x"}))
        .await;
    env.finish(&cancelled, "Cancelled", SessionStatus::Cancelled)
        .await;
    let (status, out) = env
        .post(
            &format!("/api/v1/sessions/{cancelled}/chat/messages"),
            json!({"content": "why?"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{out}");

    let (status, _) = env
        .post(
            "/api/v1/sessions/no-such-session/chat/messages",
            json!({"content": "why?"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let executions = env.executions().list(&ListParams::default()).await.unwrap();
    assert!(executions.items.is_empty());
    env.shutdown().await;
}

/// The runner answers the chat execution the API created and closes its
/// stage, so the chat takes the next question.
#[tokio::test]
async fn runner_answers_the_chat_and_frees_the_chat() {
    use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer, ScriptedResponse};
    let env = env().await;
    let id = env
        .submit(json!({"alert_type": "PodCrashLooping", "data": "pod web-1 restarts"}))
        .await;
    env.finish(&id, "Completed", SessionStatus::Completed).await;
    let chat_path = format!("/api/v1/sessions/{id}/chat/messages");
    let (status, out) = env
        .post(&chat_path, json!({"content": "why did it crash?"}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    let stage_id = out["stage_id"].as_str().unwrap().to_string();
    let chat_id = out["chat_id"].as_str().unwrap().to_string();
    let name = env.chat_execution(&stage_id).await.name_any();

    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::text(
        "It ran out of memory: raise the limit.",
    ));
    let llm = ScriptedLlmServer::start(script).await.unwrap();
    let mut options = tarsy_runner::RunnerOptions::new(NS, &name, env.db.url(), llm.endpoint());
    options.database_retry = Duration::from_secs(5);
    let report = tarsy_runner::run(
        env.client.clone(),
        options,
        tokio_util::sync::CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(report.phase, ExecutionPhase::Completed);

    let stage = env.store.get_stage(&stage_id).await.unwrap();
    assert_eq!(stage.status, ExecutionStatus::Completed);
    assert!(stage.completed_at.is_some());
    let chat = env.store.get_chat(&chat_id).await.unwrap();
    assert!(chat.last_interaction_at.is_some());
    let timeline = env.store.session_timeline(&id).await.unwrap();
    assert!(
        timeline
            .iter()
            .any(|e| e.content.contains("raise the limit")),
        "{timeline:#?}"
    );

    let (status, out) = env.post(&chat_path, json!({"content": "and now?"})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    env.shutdown().await;
}

/// `/health` in cluster mode: MCP servers' health as the operator recorded
/// it in `MCPServer.status.lastHealth`, a warning for a server that failed
/// and for an LLM provider whose shared circuit breaker is open, and the
/// Kubernetes API's reachability.
#[tokio::test]
async fn health_shows_mcp_servers_open_breakers_and_the_kubernetes_api() {
    let env = env().await;
    let (status, body) = env.get("/health").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "healthy", "{body}");
    assert_eq!(body["dependencies"]["kubernetes"]["status"], "ok", "{body}");

    let servers: Api<tarsy_crds::MCPServer> = Api::namespaced(env.client.clone(), NS);
    for (name, healthy, message) in [
        ("prometheus", false, Some("connection refused")),
        ("grafana", true, None),
    ] {
        create::<tarsy_crds::MCPServer>(
            &env.client,
            json!({"apiVersion": "tarsy.dev/v1alpha1", "kind": "MCPServer",
                   "metadata": {"name": name},
                   "spec": {"url": format!("http://{name}.example:8080/mcp")}}),
        )
        .await;
        servers
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"lastHealth": {
                    "healthy": healthy, "checkedAt": "2026-11-22T01:00:00Z", "message": message}}})),
            )
            .await
            .unwrap();
    }
    // Three failures in a row in some runner pod of namespace "team-a".
    for _ in 0..3 {
        env.store
            .record_breaker_failure("team-a", "gemini", 3, Duration::from_secs(60))
            .await
            .unwrap();
    }
    env.health.refresh().await;

    let (status, body) = env.get("/health").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "degraded", "{body}");
    assert_eq!(body["mcp"]["healthy"], false);
    assert_eq!(body["mcp"]["servers"]["grafana"]["healthy"], true);
    assert_eq!(body["mcp"]["servers"]["prometheus"]["healthy"], false);
    assert_eq!(
        body["mcp"]["servers"]["prometheus"]["error"],
        "connection refused"
    );
    let warnings = body["warnings"].as_array().unwrap();
    let by_category =
        |c: &str| -> Vec<&Value> { warnings.iter().filter(|w| w["category"] == c).collect() };
    let mcp = by_category("mcp_health");
    assert_eq!(mcp.len(), 1, "{warnings:?}");
    assert_eq!(mcp[0]["server_id"], "prometheus");
    assert_eq!(mcp[0]["details"], "connection refused");
    let breakers = by_category("llm_circuit_breaker");
    assert_eq!(breakers.len(), 1, "{warnings:?}");
    let message = breakers[0]["message"].as_str().unwrap();
    assert!(message.contains("gemini"), "{message}");

    // An API server that does not answer: reported, not fatal.
    let dead = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let unreachable = ClusterHealth::new(Client::try_from(dead).unwrap(), env.store.clone(), NS);
    unreachable.refresh().await;
    use tarsy_api::{DependencyHealthSource, SystemWarningsSource};
    let deps = unreachable.dependencies();
    assert_eq!(deps["kubernetes"].status, "error");
    assert!(deps["kubernetes"].error.is_some());
    assert!(
        unreachable
            .warnings()
            .iter()
            .any(|w| w.category == "kubernetes"),
        "{:?}",
        unreachable.warnings()
    );
    env.shutdown().await;
}
