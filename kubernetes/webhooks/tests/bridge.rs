//! The Alertmanager bridge over real HTTP, with payloads written in
//! Alertmanager's documented webhook format (version 4).

mod common;

use std::sync::Arc;

use common::{Resp, post, serve_http};
use kube::api::ObjectMeta;
use serde_json::Value;
use tarsy_core::SecretValue;
use tarsy_crds::{AlertPhase, Chain, ChainSpec, StageSpec};
use tarsy_webhooks::sink::{
    FINGERPRINT_LABEL, RESOLVED_AT_ANNOTATION, STARTS_AT_ANNOTATION, SinkError,
};
use tarsy_webhooks::{
    BridgeAuth, BridgeConfig, BridgeState, InMemoryAlertSink, InMemoryResources, app,
};

const TOKEN: &str = "am-token-0123456789";
const SINGLE: &str = include_str!("fixtures/single_firing.json");
const GROUPED: &str = include_str!("fixtures/grouped_mixed.json");
const RESOLVED: &str = include_str!("fixtures/resolved_only.json");
const TRUNCATED: &str = include_str!("fixtures/truncated.json");
const FP: &str = "3f6e8b1a2c4d5e6f";

struct Bridge {
    addr: std::net::SocketAddr,
    sink: InMemoryAlertSink,
    state: BridgeState,
}

async fn bridge_with(config: BridgeConfig, resources: Option<InMemoryResources>) -> Bridge {
    let sink = InMemoryAlertSink::new("tarsy");
    let mut state = BridgeState::new(
        config,
        BridgeAuth::Bearer(SecretValue::new(TOKEN)),
        Arc::new(sink.clone()),
    );
    if let Some(r) = resources {
        state = state.with_resources(Arc::new(r));
    }
    let addr = serve_http(app(Some(state.clone()), None)).await;
    Bridge { addr, sink, state }
}

async fn bridge() -> Bridge {
    bridge_with(BridgeConfig::new("tarsy"), None).await
}

async fn send(b: &Bridge, body: &str) -> Resp {
    post(
        b.addr,
        "/alertmanager",
        &[("authorization", &format!("Bearer {TOKEN}"))],
        body,
    )
    .await
}

fn with_starts_at(payload: &str, starts_at: &str) -> String {
    let mut v: Value = serde_json::from_str(payload).unwrap();
    v["alerts"][0]["startsAt"] = Value::String(starts_at.into());
    v.to_string()
}

#[tokio::test]
async fn single_firing_alert_becomes_one_alert_resource() {
    let b = bridge().await;
    let resp = send(&b, SINGLE).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    let report = resp.json();
    assert_eq!(report["created"], 1);
    assert_eq!(report["receiver"], "tarsy");
    assert_eq!(report["results"][0]["outcome"], "created");
    assert_eq!(report["results"][0]["alerts"][0], format!("am-{FP}"));

    let alerts = b.sink.alerts();
    assert_eq!(alerts.len(), 1);
    let alert = &alerts[0];
    assert_eq!(alert.metadata.name.as_deref(), Some("am-3f6e8b1a2c4d5e6f"));
    assert_eq!(alert.metadata.namespace.as_deref(), Some("tarsy"));
    assert_eq!(alert.spec.alert_type, "KubePodCrashLooping");
    assert_eq!(
        alert.spec.runbook_url.as_deref(),
        Some("https://runbooks.example.com/kubernetes/kubepodcrashlooping")
    );
    let source = alert.spec.source.as_ref().unwrap();
    assert_eq!(source.system, "alertmanager");
    assert_eq!(source.fingerprint.as_deref(), Some(FP));
    assert_eq!(alert.spec.cancel, None);
    let labels = alert.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[FINGERPRINT_LABEL], FP);
    let annotations = alert.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        annotations[STARTS_AT_ANNOTATION],
        "2025-06-02T08:14:30.512Z"
    );

    // The data is readable YAML with labels, annotations, times, generator URL.
    let data: serde_yaml::Value = serde_yaml::from_str(&alert.spec.data).unwrap();
    assert_eq!(data["status"], "firing");
    assert_eq!(data["labels"]["pod"], "payments-api-7d9c6b5f4-x2k8p");
    assert_eq!(data["annotations"]["summary"], "Pod is crash looping.");
    assert_eq!(data["startsAt"], "2025-06-02T08:14:30.512Z");
    assert!(
        data.get("endsAt").is_none(),
        "a firing alert has no end time: {}",
        alert.spec.data
    );
    assert!(
        data["generatorURL"]
            .as_str()
            .unwrap()
            .starts_with("http://prometheus.monitoring.svc:9090/graph")
    );
    assert_eq!(
        data["alertmanager"]["externalURL"],
        "http://alertmanager.monitoring.svc:9093"
    );
    assert!(
        alert
            .spec
            .data
            .contains("labels:\n  alertname: KubePodCrashLooping\n")
    );
}

#[tokio::test]
async fn repeat_notifications_never_start_a_second_investigation() {
    let b = bridge().await;
    assert_eq!(send(&b, SINGLE).await.json()["created"], 1);

    // Repeat while the investigation is running (Alertmanager repeat_interval).
    let again = send(&b, SINGLE).await;
    assert_eq!(again.status, 200);
    let r = again.json();
    assert_eq!(r["created"], 0);
    assert_eq!(r["duplicates"], 1);
    assert_eq!(r["results"][0]["alerts"][0], "am-3f6e8b1a2c4d5e6f");
    b.sink
        .set_phase("am-3f6e8b1a2c4d5e6f", AlertPhase::InProgress);
    assert_eq!(send(&b, SINGLE).await.json()["duplicates"], 1);
    assert_eq!(b.sink.len(), 1);

    // Investigation finished, alert still firing (same episode): no new one.
    b.sink
        .set_phase("am-3f6e8b1a2c4d5e6f", AlertPhase::Completed);
    let r = send(&b, SINGLE).await.json();
    assert_eq!(r["duplicates"], 1, "{r}");
    assert!(
        r["results"][0]["message"]
            .as_str()
            .unwrap()
            .contains("already investigated")
    );
    assert_eq!(b.sink.len(), 1);

    // The alert fires again later (new startsAt): a new investigation.
    let refire = with_starts_at(SINGLE, "2025-06-03T01:00:00Z");
    let r = send(&b, &refire).await.json();
    assert_eq!(r["created"], 1, "{r}");
    assert_eq!(r["results"][0]["alerts"][0], "am-3f6e8b1a2c4d5e6f-2");
    assert_eq!(b.sink.len(), 2);
    // ... which is itself deduplicated while active.
    assert_eq!(send(&b, &refire).await.json()["duplicates"], 1);
    assert_eq!(b.sink.len(), 2);

    assert_eq!(b.state.stats().created, 2);
    assert_eq!(b.state.stats().duplicates, 4);
}

#[tokio::test]
async fn concurrent_identical_notifications_create_one_alert() {
    let b = bridge().await;
    let sends = (0..8).map(|_| send(&b, SINGLE));
    let results = futures::future::join_all(sends).await;
    let created: u64 = results
        .iter()
        .map(|r| r.json()["created"].as_u64().unwrap())
        .sum();
    assert_eq!(created, 1);
    assert_eq!(b.sink.len(), 1);
}

#[tokio::test]
async fn grouped_notification_with_mixed_firing_and_resolved() {
    let b = bridge().await;
    // The resolved one (search) fired earlier and has an Alert.
    let mut earlier: Value = serde_json::from_str(GROUPED).unwrap();
    let search = earlier["alerts"][2].clone();
    let mut search_firing = search.clone();
    search_firing["status"] = "firing".into();
    search_firing["endsAt"] = "0001-01-01T00:00:00Z".into();
    earlier["alerts"] = Value::Array(vec![search_firing]);
    assert_eq!(send(&b, &earlier.to_string()).await.json()["created"], 1);

    let resp = send(&b, GROUPED).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    let r = resp.json();
    assert_eq!(r["created"], 2, "{r}");
    assert_eq!(r["resolved"], 1);
    let outcomes: Vec<&str> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["created", "created", "resolved"]);

    assert_eq!(b.sink.len(), 3);
    let checkout = b.sink.alert("am-a1b2c3d4e5f60718").unwrap();
    assert_eq!(checkout.spec.alert_type, "KubeDeploymentReplicasMismatch");
    assert!(checkout.spec.runbook_url.is_some());
    let cart = b.sink.alert("am-b2c3d4e5f6071829").unwrap();
    assert_eq!(cart.spec.runbook_url, None);
    let search = b.sink.alert("am-c3d4e5f607182930").unwrap();
    assert_eq!(
        search.metadata.annotations.unwrap()[RESOLVED_AT_ANNOTATION],
        "2025-06-02T09:02:00Z"
    );
    // Cancelling on resolve is off by default.
    assert_eq!(search.spec.cancel, None);
}

#[tokio::test]
async fn resolved_notification_annotates_and_optionally_cancels() {
    let mut config = BridgeConfig::new("tarsy");
    config.cancel_on_resolve = true;
    let b = bridge_with(config, None).await;

    // Resolved before anything fired: nothing to do, still 200.
    let r = send(&b, RESOLVED).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["results"][0]["outcome"], "unknown");
    assert!(b.sink.is_empty());

    send(&b, SINGLE).await;
    b.sink
        .set_phase("am-3f6e8b1a2c4d5e6f", AlertPhase::InProgress);
    let r = send(&b, RESOLVED).await.json();
    assert_eq!(r["resolved"], 1, "{r}");
    assert_eq!(r["results"][0]["cancelled"][0], "am-3f6e8b1a2c4d5e6f");
    let alert = b.sink.alert("am-3f6e8b1a2c4d5e6f").unwrap();
    assert_eq!(alert.spec.cancel, Some(true));
    assert_eq!(
        alert.metadata.annotations.as_ref().unwrap()[RESOLVED_AT_ANNOTATION],
        "2025-06-02T08:52:00.004Z"
    );

    // A repeated resolved notification changes nothing.
    let r = send(&b, RESOLVED).await.json();
    assert_eq!(r["results"][0]["message"], "already recorded as resolved");
    assert!(r["results"][0].get("cancelled").is_none());
}

#[tokio::test]
async fn resolved_after_completion_annotates_without_cancelling() {
    let mut config = BridgeConfig::new("tarsy");
    config.cancel_on_resolve = true;
    let b = bridge_with(config, None).await;
    send(&b, SINGLE).await;
    b.sink
        .set_phase("am-3f6e8b1a2c4d5e6f", AlertPhase::Completed);
    let r = send(&b, RESOLVED).await.json();
    assert_eq!(r["results"][0]["outcome"], "resolved");
    let alert = b.sink.alert("am-3f6e8b1a2c4d5e6f").unwrap();
    assert_eq!(alert.spec.cancel, None);
    assert!(
        alert
            .metadata
            .annotations
            .unwrap()
            .contains_key(RESOLVED_AT_ANNOTATION)
    );
}

#[tokio::test]
async fn truncated_notification_is_processed_and_reported() {
    let b = bridge().await;
    let r = send(&b, TRUNCATED).await;
    assert_eq!(r.status, 200);
    let r = r.json();
    assert_eq!(r["created"], 2);
    assert_eq!(r["truncatedAlerts"], 3);
    assert_eq!(b.sink.len(), 2);
}

#[tokio::test]
async fn requests_without_the_right_token_get_401() {
    let b = bridge().await;
    let none = post(b.addr, "/alertmanager", &[], SINGLE).await;
    assert_eq!(none.status, 401);
    assert!(
        none.json()["message"]
            .as_str()
            .unwrap()
            .contains("missing Authorization")
    );
    assert!(
        none.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    let wrong = post(
        b.addr,
        "/alertmanager",
        &[("authorization", "Bearer not-the-token")],
        SINGLE,
    )
    .await;
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.json()["message"], "invalid bearer token");
    let basic = post(
        b.addr,
        "/alertmanager",
        &[("authorization", "Basic dGFyc3k6dGFyc3k=")],
        SINGLE,
    )
    .await;
    assert_eq!(basic.status, 401);
    assert!(b.sink.is_empty());
}

#[tokio::test]
async fn oversized_bodies_and_too_many_alerts_get_413() {
    let mut config = BridgeConfig::new("tarsy");
    config.max_body_bytes = 4096;
    config.max_alerts_per_request = 2;
    let b = bridge_with(config, None).await;

    let mut big: Value = serde_json::from_str(SINGLE).unwrap();
    big["commonAnnotations"]["description"] = "x".repeat(5000).into();
    let r = send(&b, &big.to_string()).await;
    assert_eq!(r.status, 413);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("exceeds 4096 bytes")
    );

    // Same limit without a Content-Length (chunked upload).
    let body = big.to_string();
    let raw = format!(
        "POST /alertmanager HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(b.addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(raw.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");

    let mut many: Value = serde_json::from_str(TRUNCATED).unwrap();
    let extra = many["alerts"][0].clone();
    many["alerts"].as_array_mut().unwrap().push(extra);
    let r = send(&b, &many.to_string()).await;
    assert_eq!(r.status, 413);
    let msg = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains("3 alerts") && msg.contains("max_alerts: 2"),
        "{msg}"
    );
    assert!(b.sink.is_empty());
}

#[tokio::test]
async fn malformed_payloads_get_400_with_a_precise_message() {
    let b = bridge().await;
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            "{\"version\": \"4\",\n \"status\": \"firing\",\n \"alerts\": [ {\"status\": \"firing\",}".into(),
            vec!["`alerts[0]`", "trailing comma at line 3 column 34"],
        ),
        (
            SINGLE.replace("\"fingerprint\": \"3f6e8b1a2c4d5e6f\"", "\"fingerprint_\": \"x\""),
            vec!["`alerts[0]`", "missing field `fingerprint`"],
        ),
        (
            SINGLE.replace("\"startsAt\": \"2025-06-02T08:14:30.512Z\"", "\"startsAt\": \"June 2nd\""),
            vec!["`alerts[0].startsAt`", "line 20"],
        ),
        (
            SINGLE.replace("\"version\": \"4\"", "\"version\": \"3\""),
            vec!["unsupported Alertmanager payload version \"3\""],
        ),
        (
            SINGLE.replace("\"status\": \"firing\",\n  \"alerts\"", "\"status\": \"pending\",\n  \"alerts\""),
            vec!["`status`", "unknown variant `pending`", "`firing`"],
        ),
        ("[]".into(), vec!["expected a JSON object"]),
        ("".into(), vec!["body is empty"]),
    ];
    for (body, needles) in cases {
        let r = send(&b, &body).await;
        assert_eq!(r.status, 400, "{}", r.body);
        let msg = r.json()["message"].as_str().unwrap().to_string();
        for n in needles {
            assert!(msg.contains(n), "{n:?} not in {msg:?}");
        }
    }
    assert!(b.sink.is_empty());
}

#[tokio::test]
async fn alert_type_comes_from_the_configured_label() {
    let mut config = BridgeConfig::new("tarsy");
    config.alert_type_label = "severity".into();
    let b = bridge_with(config, None).await;
    send(&b, SINGLE).await;
    assert_eq!(b.sink.alerts()[0].spec.alert_type, "warning");

    let mut config = BridgeConfig::new("tarsy");
    config.alert_type_label = "tarsy_type".into();
    let b = bridge_with(config.clone(), None).await;
    let r = send(&b, SINGLE).await.json();
    assert_eq!(r["rejected"], 1);
    assert!(
        r["results"][0]["message"]
            .as_str()
            .unwrap()
            .contains("label `tarsy_type` is missing")
    );
    assert!(b.sink.is_empty());

    config.default_alert_type = Some("Generic".into());
    let b = bridge_with(config, None).await;
    send(&b, SINGLE).await;
    assert_eq!(b.sink.alerts()[0].spec.alert_type, "Generic");
}

fn chain(name: &str, types: &[&str]) -> Chain {
    Chain {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("tarsy".into()),
            ..ObjectMeta::default()
        },
        spec: ChainSpec {
            alert_types: types.iter().map(|s| s.to_string()).collect(),
            stages: vec![StageSpec {
                name: "investigate".into(),
                agents: None,
                agent: Some("KubernetesAgent".into()),
                replicas: None,
                success_policy: None,
                max_iterations: None,
                synthesis: None,
            }],
            llm_provider: None,
            iteration_strategy: None,
            max_iterations: None,
            iteration_timeout: None,
            mcp_servers: None,
            on_mcp_server_unavailable: None,
            slack_channel: None,
            executive_summary_provider: None,
            chat: None,
            scoring: None,
            session_timeout: None,
            budget: None,
            service_account_name: None,
        }
        .into(),
        status: None,
    }
}

#[tokio::test]
async fn unclaimed_alert_types_can_be_rejected() {
    let resources = InMemoryResources::new();
    resources.insert(chain("pods", &["KubePodCrashLooping"]));
    let mut config = BridgeConfig::new("tarsy");
    config.require_chain = true;
    let b = bridge_with(config, Some(resources)).await;

    assert_eq!(send(&b, SINGLE).await.json()["created"], 1);
    let r = send(&b, TRUNCATED).await.json();
    assert_eq!(r["rejected"], 2);
    assert_eq!(
        r["results"][1]["message"],
        "no chain handles alert type \"NodeFilesystemAlmostOutOfSpace\" (known alert types: KubePodCrashLooping); add it to a chain's alertTypes or name the chain to run"
    );
    assert_eq!(b.sink.len(), 1);
}

#[tokio::test]
async fn api_outage_returns_503_and_the_retry_is_safe() {
    let b = bridge().await;
    b.sink.fail_with(Some(SinkError::Unavailable {
        message: "connection refused".into(),
    }));
    let r = send(&b, GROUPED).await;
    assert_eq!(r.status, 503);
    let report = r.json();
    assert_eq!(report["failed"], 3);
    assert!(
        report["results"][0]["message"]
            .as_str()
            .unwrap()
            .contains("connection refused")
    );

    b.sink.fail_with(None);
    // Alertmanager retries the same notification.
    let r = send(&b, GROUPED).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["created"], 2);
    assert_eq!(send(&b, GROUPED).await.json()["duplicates"], 2);
    assert_eq!(b.sink.len(), 2);
}

#[tokio::test]
async fn api_rejections_are_reported_per_alert_with_200() {
    let b = bridge().await;
    b.sink.fail_with(Some(SinkError::Rejected {
        message: "admission webhook \"validate.tarsy.dev\" denied the request".into(),
    }));
    let r = send(&b, SINGLE).await;
    assert_eq!(
        r.status, 200,
        "a permanent refusal must not make Alertmanager retry"
    );
    let report = r.json();
    assert_eq!(report["rejected"], 1);
    assert!(
        report["results"][0]["message"]
            .as_str()
            .unwrap()
            .contains("denied the request")
    );
}
