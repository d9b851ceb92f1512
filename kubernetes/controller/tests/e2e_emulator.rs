//! The operator end to end against the project's Kubernetes API emulator
//! (`e2e/kube`, kmock-based, with a kubelet that runs pod containers as
//! processes) and real Postgres. Investigation pods run
//! `tests/fixtures/fake_runner.py` in place of `tarsy runner`: it follows
//! the runner contract (patches its own AgentExecution status), so what is
//! tested is the operator: chain progression, children, status, Events,
//! Postgres rows, cancellation, pod failure, bad input and metrics.
//!
//! Needs the emulator's Python (`eval "$(e2e/kube/install.sh)"` exports
//! `TARSY_KUBE_PYTHON`; the default venv location is also tried) and
//! Postgres (`TARSY_TEST_DATABASE_URL`). Without the emulator the tests fail
//! with the install command. (The same scenarios with the real runner, and
//! against a real cluster, are in `operator/tarsy/tests/cluster_e2e.rs`.)

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use tarsy_config::Defaults;
use tarsy_controller::{LeaderElection, PodSettings, Settings};
use tarsy_crds::{
    Agent, AgentExecution, Alert, AlertPhase, AlertSpec, Chain, ExecutionPhase, LLMProvider,
    SecretKeyRef,
};
use tarsy_kube_harness::{Emulator, EmulatorOptions};
use tarsy_store::testing::TestDatabase;

const NS: &str = "e2e";

/// The emulator with its kubelet; `fake-tarsy` images run the fake runner.
fn start_emulator(dir: &Path) -> Emulator {
    let runner = dir.join("fake_runner.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_runner.py"),
        &runner,
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runner, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Emulator::start(
        EmulatorOptions::new(dir)
            .with_kubelet()
            .with_image("fake-tarsy:*", &runner),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn client(kubeconfig: &Path) -> Client {
    tarsy_kube_harness::client_for(kubeconfig)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn apply_yaml<K>(client: &Client, yaml: &str) -> K
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let obj: K = serde_yaml::from_str(yaml).unwrap();
    let api: Api<K> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &obj).await.unwrap()
}

/// Polls `f` until it gives a value; each poll is bounded too, so a stuck
/// API call fails the test with `what` instead of hanging it.
async fn wait_for<T>(what: &str, secs: u64, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left.max(Duration::from_millis(100)), f()).await {
            Ok(Some(v)) => return v,
            Ok(None) => {}
            Err(_) => panic!("timed out waiting for {what} (a poll did not return)"),
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Awaits `f` for at most `secs` (a hang becomes a failure naming `what`).
async fn within<T>(what: &str, secs: u64, f: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(secs), f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {secs}s: {what}"),
    }
}

async fn alert_in_phase(api: &Api<Alert>, name: &str, phase: AlertPhase, secs: u64) -> Alert {
    wait_for(&format!("alert {name} {phase:?}"), secs, async || {
        let a = api.get(name).await.ok()?;
        (a.status.as_ref()?.phase? == phase).then_some(a)
    })
    .await
}

fn alert(name: &str, alert_type: &str) -> Alert {
    Alert::new(
        name,
        AlertSpec {
            alert_type: alert_type.into(),
            data: format!("alert {name}: something is wrong; password: hunter2-secret"),
            chain_ref: None,
            runbook_url: None,
            mcp_selection: None,
            author: Some("e2e".into()),
            source: None,
            cancel: None,
        }
        .into(),
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    // Never hang the test on a stuck server.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

async fn events_for(client: &Client, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

async fn setup_namespace(client: &Client) {
    // Namespace, the runners' database Secret, configuration.
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(serde_json::json!({"metadata": {"name": NS}})).unwrap(),
    )
    .await
    .unwrap();
    apply_yaml::<Secret>(
        client,
        "metadata: {name: tarsy-database}\nstringData: {url: 'postgres://runner@db/tarsy'}",
    )
    .await;
    apply_yaml::<Agent>(
        client,
        "apiVersion: tarsy.dev/v1alpha1\nkind: Agent\nmetadata: {name: echo-agent}\nspec: {description: echoes}",
    )
    .await;
    apply_yaml::<LLMProvider>(
        client,
        r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: summary-llm}
spec: {type: scripted, model: scripted-summary, script: summary.yaml}
"#,
    )
    .await;
    apply_yaml::<Chain>(
        client,
        r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: e2e-chain}
spec:
  alertTypes: [E2E]
  sessionTimeout: 10m
  executiveSummaryProvider: summary-llm
  stages:
    - name: triage
      agent: echo-agent
    - name: deep dive
      agent: echo-agent
      replicas: 2
"#,
    )
    .await;
    apply_yaml::<Chain>(
        client,
        r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: broken-chain}
spec:
  alertTypes: [Broken]
  stages:
    - name: s
      agent: NoSuchAgent
"#,
    )
    .await;
}

/// What the `scripted` summary provider answers.
const SUMMARY: &str = "Memory limit too low: raise it.";

/// The script of the `scripted` LLMProvider the chain's executive summary
/// uses (the operator's own LLM call), written into `dir`.
fn write_summary_script(dir: &Path) {
    std::fs::write(
        dir.join("summary.yaml"),
        format!("sequential:\n- chunks: [{{kind: text, content: '{SUMMARY}'}}]\n"),
    )
    .unwrap();
}

fn settings(metrics_port: u16, leader: Option<LeaderElection>, script_dir: &Path) -> Settings {
    let mut pod = PodSettings::new("fake-tarsy:e2e");
    pod.database_url_secret = SecretKeyRef {
        name: "tarsy-database".into(),
        key: "url".into(),
    };
    Settings {
        pod,
        defaults: Defaults::default(),
        max_concurrent_sessions: Some(5),
        pod_start_timeout: Duration::from_secs(30),
        pod_restart_limit: 2,
        pod_restart_backoff: Duration::from_secs(1),
        namespace: Some(NS.into()),
        http_addr: Some(([127, 0, 0, 1], metrics_port).into()),
        leader_election: leader,
        reporter: "tarsy-operator-e2e".into(),
        script_dir: script_dir.to_path_buf(),
        summary_timeout: Duration::from_secs(30),
        alert_ttl: None,
        retention: None,
        slack: None,
    }
}

async fn get_async(port: u16, path: &'static str) -> String {
    tokio::task::spawn_blocking(move || http_get(port, path))
        .await
        .unwrap()
}

/// A throw-away Postgres database (dropped with the handle) and its store.
async fn store() -> (TestDatabase, tarsy_store::Store) {
    let db = TestDatabase::create("tarsy_operator_e2e")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let store = tarsy_store::Store::connect(db.url())
        .await
        .expect("connect to the test database and migrate it");
    (db, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_runs_alerts_end_to_end_on_the_emulator() {
    let (_db, store) = store().await;

    let dir = std::env::temp_dir().join(format!("tarsy-operator-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let emu = start_emulator(&dir);
    let client = client(emu.kubeconfig()).await;

    setup_namespace(&client).await;

    let metrics_port = free_port();
    write_summary_script(&dir);
    let first = settings(metrics_port, None, &dir);
    let operator = tokio::spawn(tarsy_controller::run(client.clone(), store.clone(), first));

    let alerts: Api<Alert> = Api::namespaced(client.clone(), NS);
    let executions: Api<AgentExecution> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    // 1. A whole chain: triage, two replicas, their synthesis, Completed.
    alerts
        .create(&PostParams::default(), &alert("happy", "E2E"))
        .await
        .unwrap();
    let done = alert_in_phase(&alerts, "happy", AlertPhase::Completed, 90).await;
    let status = done.status.clone().unwrap();
    assert_eq!(status.chain.as_deref(), Some("e2e-chain"));
    assert_eq!(status.session_id, done.uid());
    let names: Vec<&str> = status.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["triage", "deep dive", "deep dive - Synthesis"]);
    assert!(
        status
            .stages
            .iter()
            .all(|s| s.phase == ExecutionPhase::Completed)
    );
    assert_eq!(
        status.final_analysis.as_deref(),
        Some("analysis by SynthesisAgent of deep dive - Synthesis")
    );
    assert_eq!(status.observed_generation, done.metadata.generation);
    assert!(done.finalizers().iter().any(|f| f == "tarsy.dev/session"));
    let children = executions
        .list(&ListParams::default().labels("tarsy.dev/alert=happy"))
        .await
        .unwrap()
        .items;
    assert_eq!(children.len(), 4);
    for ae in &children {
        assert_eq!(ae.owner_references()[0].uid, done.uid().unwrap());
        assert_eq!(
            ae.status.as_ref().unwrap().pod_name.as_deref(),
            Some(ae.name_any().as_str())
        );
        let p = pods.get(&ae.name_any()).await.unwrap();
        assert_eq!(p.labels()["tarsy.dev/execution"], ae.name_any());
        assert_eq!(p.labels()["tarsy.dev/alert"], "happy");
    }
    // The executive summary: the operator's own call to the chain's
    // summary provider, in the status, the session row and the timeline.
    assert_eq!(status.executive_summary.as_deref(), Some(SUMMARY));
    assert_eq!(status.executive_summary_error, None);
    let session = store.get_session(&done.uid().unwrap()).await.unwrap();
    assert_eq!(session.status, tarsy_core::SessionStatus::Completed);
    assert_eq!(session.executive_summary.as_deref(), Some(SUMMARY));
    assert_eq!(session.executive_summary_error, None);
    assert_eq!(
        session.final_analysis.as_deref(),
        Some("analysis by SynthesisAgent of deep dive - Synthesis")
    );
    let timeline = store.session_timeline(&done.uid().unwrap()).await.unwrap();
    assert!(
        timeline.iter().any(
            |e| e.event_type == tarsy_core::TimelineEventType::ExecutiveSummary
                && e.content == SUMMARY
        ),
        "{timeline:?}"
    );
    assert!(
        !session.alert_data.contains("hunter2-secret")
            && session.alert_data.contains("something is wrong"),
        "alert data must be stored masked: {}",
        session.alert_data
    );
    let stages = store.list_stages(&done.uid().unwrap()).await.unwrap();
    assert_eq!(stages.len(), 3);
    let reasons: Vec<String> = events_for(&client, "happy")
        .await
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(reasons.iter().any(|r| r == "StageStarted"), "{reasons:?}");
    assert!(
        reasons.iter().any(|r| r == "SessionCompleted"),
        "{reasons:?}"
    );

    // 2. Bad input: no chain for the type → Failed, condition, Event.
    alerts
        .create(&PostParams::default(), &alert("lost", "Unknown"))
        .await
        .unwrap();
    let lost = alert_in_phase(&alerts, "lost", AlertPhase::Failed, 30).await;
    let cond = lost
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "ChainResolved")
        .unwrap();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "NoChainForAlertType")
    );
    wait_for("NoChainForAlertType event", 10, async || {
        events_for(&client, "lost")
            .await
            .iter()
            .any(|e| e.reason.as_deref() == Some("NoChainForAlertType"))
            .then_some(())
    })
    .await;

    // 3. A chain naming a missing agent: its Ready condition says so, and
    //    an alert for it fails with the reason.
    let chains: Api<Chain> = Api::namespaced(client.clone(), NS);
    wait_for("broken chain not Ready", 30, async || {
        let c = chains.get("broken-chain").await.ok()?;
        let ready = c
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (ready.status == "False" && ready.message.contains("NoSuchAgent")).then_some(())
    })
    .await;
    wait_for("good chain Ready", 30, async || {
        let c = chains.get("e2e-chain").await.ok()?;
        let ready = c
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (ready.status == "True").then_some(())
    })
    .await;
    alerts
        .create(&PostParams::default(), &alert("broken", "Broken"))
        .await
        .unwrap();
    let broken = alert_in_phase(&alerts, "broken", AlertPhase::Failed, 30).await;
    assert!(
        broken
            .status
            .unwrap()
            .error
            .unwrap()
            .contains("NoSuchAgent")
    );

    // 4. A runner that dies without recording a result fails its execution
    //    with the reason, and the session with it.
    alerts
        .create(&PostParams::default(), &alert("crashy", "E2E"))
        .await
        .unwrap();
    let crashy = alert_in_phase(&alerts, "crashy", AlertPhase::Failed, 60).await;
    let ae = executions.get("crashy-s1-echo-agent").await.unwrap();
    let err = ae.status.unwrap().error.unwrap();
    assert!(err.contains("exit code 3"), "{err}");
    assert!(
        crashy
            .status
            .clone()
            .unwrap()
            .error
            .unwrap()
            .contains("exit code 3")
    );
    let row = store
        .get_agent_execution(&tarsy_exec::ids::execution_id(&crashy.uid().unwrap(), 1, 1))
        .await
        .unwrap();
    assert_eq!(row.status, tarsy_core::ExecutionStatus::Failed);

    // 5. Cancellation: the running pod is stopped, the runner records
    //    Cancelled, the session ends Cancelled.
    alerts
        .create(&PostParams::default(), &alert("sleepy", "E2E"))
        .await
        .unwrap();
    wait_for("sleepy execution active", 60, async || {
        let ae = executions.get("sleepy-s1-echo-agent").await.ok()?;
        (ae.status?.phase? == ExecutionPhase::Active).then_some(())
    })
    .await;
    alerts
        .patch(
            "sleepy",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"cancel": true}})),
        )
        .await
        .unwrap();
    alert_in_phase(&alerts, "sleepy", AlertPhase::Cancelled, 60).await;
    let ae = executions.get("sleepy-s1-echo-agent").await.unwrap();
    assert_eq!(ae.status.unwrap().phase, Some(ExecutionPhase::Cancelled));

    // 6. Deleting an Alert soft-deletes its session (finalizer).
    let uid = done.uid().unwrap();
    alerts.delete("happy", &Default::default()).await.unwrap();
    wait_for("happy deleted", 30, async || {
        alerts.get_opt("happy").await.ok()?.is_none().then_some(())
    })
    .await;
    let session = store.get_session(&uid).await.unwrap();
    assert!(
        session.deleted_at.is_some(),
        "session must be kept, soft-deleted"
    );

    // 7. Metrics and probes.
    let metrics = tokio::task::spawn_blocking(move || http_get(metrics_port, "/metrics"))
        .await
        .unwrap();
    assert!(
        metrics.contains("tarsy_operator_reconciles_total"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tarsy_operator_sessions{phase=\"Cancelled\"} 1"),
        "{metrics}"
    );
    let ready = tokio::task::spawn_blocking(move || http_get(metrics_port, "/readyz"))
        .await
        .unwrap();
    assert!(
        ready.starts_with("HTTP/1.0 200") || ready.starts_with("HTTP/1.1 200"),
        "{ready}"
    );

    operator.abort();
    let _ = operator.await;

    // 8. An operator with an Alert TTL deletes finished Alerts once it has
    //    passed, and their sessions stay listed (not soft-deleted).
    let crashy_uid = crashy.uid().unwrap();
    let mut with_ttl = settings(free_port(), None, &dir);
    with_ttl.alert_ttl = Some(Duration::from_secs(1));
    let operator = tokio::spawn(tarsy_controller::run(
        client.clone(),
        store.clone(),
        with_ttl,
    ));
    wait_for("finished alerts expired", 60, async || {
        let left = alerts.list(&ListParams::default()).await.ok()?.items;
        left.is_empty().then_some(())
    })
    .await;
    let session = store.get_session(&crashy_uid).await.unwrap();
    assert!(
        session.deleted_at.is_none(),
        "an expired Alert's session stays listed"
    );
    operator.abort();
    let _ = operator.await;
    drop(emu);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two replicas with leader election: only the Lease holder acts (the other
/// is not ready and reconciles nothing); when the leader goes, the other
/// takes over and resumes from resources + Postgres without duplicating.
/// (It once hung a full-suite run while the emulator's shutdown waited for
/// open watches; the emulator now closes them, the harness kills it after a
/// bounded wait, and every await here is bounded.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_acts_and_a_successor_resumes() {
    let (_db, store) = within("connecting to Postgres", 30, store()).await;
    let dir = std::env::temp_dir().join(format!("tarsy-operator-le-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let emu = start_emulator(&dir);
    let client = within("the emulator's client", 30, client(emu.kubeconfig())).await;
    within("namespace setup", 30, setup_namespace(&client)).await;
    write_summary_script(&dir);
    let leader = |id: &str| LeaderElection {
        lease_name: "tarsy-operator".into(),
        namespace: NS.into(),
        identity: id.into(),
        lease_seconds: 3,
    };
    let (port_a, port_b) = (free_port(), free_port());
    let a = tokio::spawn(tarsy_controller::run(
        client.clone(),
        store.clone(),
        settings(port_a, Some(leader("replica-a")), &dir),
    ));
    wait_for("replica a ready", 30, async || {
        let r = tokio::task::spawn_blocking(move || {
            std::net::TcpStream::connect(("127.0.0.1", port_a))
                .ok()
                .map(|_| http_get(port_a, "/readyz"))
        })
        .await
        .unwrap()?;
        r.contains(" 200 ").then_some(())
    })
    .await;
    let b = tokio::spawn(tarsy_controller::run(
        client.clone(),
        store.clone(),
        settings(port_b, Some(leader("replica-b")), &dir),
    ));
    let alerts: Api<Alert> = Api::namespaced(client.clone(), NS);
    let executions: Api<AgentExecution> = Api::namespaced(client.clone(), NS);
    within(
        "creating alert first",
        30,
        alerts.create(&PostParams::default(), &alert("first", "E2E")),
    )
    .await
    .unwrap();
    alert_in_phase(&alerts, "first", AlertPhase::Completed, 60).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let b_ready = within("replica b /readyz", 30, get_async(port_b, "/readyz")).await;
    assert!(
        b_ready.contains(" 503 "),
        "the follower must not be ready: {b_ready}"
    );
    let b_metrics = within("replica b /metrics", 30, get_async(port_b, "/metrics")).await;
    // Its reconcile counters are there (from its start), at 0.
    for controller in ["alert", "agentexecution"] {
        let zero = format!("tarsy_operator_reconciles_total{{controller=\"{controller}\"}} 0");
        assert!(
            b_metrics.lines().any(|l| l == zero),
            "the follower must not reconcile: {b_metrics}"
        );
    }

    // The leader goes away (its Lease is released); the follower takes over.
    a.abort();
    let _ = within("replica a to stop", 30, a).await;
    wait_for("replica b ready", 30, async || {
        get_async(port_b, "/readyz")
            .await
            .contains(" 200 ")
            .then_some(())
    })
    .await;
    within(
        "creating alert second",
        30,
        alerts.create(&PostParams::default(), &alert("second", "E2E")),
    )
    .await
    .unwrap();
    alert_in_phase(&alerts, "second", AlertPhase::Completed, 60).await;
    // The first session was re-reconciled by b without duplicating anything.
    let first = within(
        "listing first's executions",
        30,
        executions.list(&ListParams::default().labels("tarsy.dev/alert=first")),
    )
    .await
    .unwrap()
    .items;
    assert_eq!(first.len(), 4);
    let first_alert = within("reading alert first", 30, alerts.get("first"))
        .await
        .unwrap();
    assert_eq!(first_alert.status.unwrap().stages.len(), 3);

    b.abort();
    let _ = within("replica b to stop", 30, b).await;
    drop(emu);
    let _ = std::fs::remove_dir_all(&dir);
}
