//! One rule set, three entry points. The same invalid alerts, fed to the
//! REST API (its real router), to the admission webhook's Alert review and to
//! the Alertmanager bridge, are refused with the same message by each: the
//! message of `tarsy_config::Config::check_alert`. Only the envelope differs
//! (a 400 or 413 body, an AdmissionReview denial, a line of the bridge's
//! report). An entry point that checks a rule its own way, or words a
//! refusal its own way, fails here.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use common::{Resp, post, serve_http};
use serde_json::{Map, Value, json};
use tarsy_api::{
    AlertAccepted, Api, ApiConfig, CancelError, CancelOutcome, ChatAccepted, ChatError,
    ChatSubmission, NewAlert, ScoreAccepted, ScoreError, SessionControl, SubmitError,
};
use tarsy_config::{Config, Defaults};
use tarsy_core::{MAX_ALERT_DATA_BYTES, SecretValue, SessionStatus};
use tarsy_crds::config::offered_tools;
use tarsy_crds::{Chain, MCPServer};
use tarsy_events::EventHub;
use tarsy_store::testing::TempSqlite;
use tarsy_store::{ConnectOptions, Store};
use tarsy_webhooks::{
    AdmissionConfig, AdmissionState, BridgeAuth, BridgeConfig, BridgeState, InMemoryAlertSink,
    InMemoryResources, app,
};

const NS: &str = "team-a";
const TOKEN: &str = "am-token-0123456789";
/// Name of the Alert resource under review.
const ALERT_NAME: &str = "checked";

/// The namespace every entry point checks against: chain `pods`, two chains
/// claiming `NodeNotReady`, and MCP server `loki`, whose runners last listed
/// two tools (besides the built-in `kubernetes-server`).
const CHAINS: &str = r#"
- metadata: {name: pods, namespace: team-a}
  spec: {alertTypes: [KubePodCrashLooping], stages: [{name: investigate, agent: KubernetesAgent}]}
- metadata: {name: nodes-a, namespace: team-a}
  spec: {alertTypes: [NodeNotReady], stages: [{name: investigate, agent: KubernetesAgent}]}
- metadata: {name: nodes-b, namespace: team-a}
  spec: {alertTypes: [NodeNotReady], stages: [{name: investigate, agent: KubernetesAgent}]}
"#;
const SERVERS: &str = r#"
- metadata: {name: loki, namespace: team-a}
  spec: {url: "http://loki-mcp.observability.svc:8080/mcp"}
  status: {lastHealth: {healthy: true, checkedAt: "2025-06-02T08:00:00Z", toolCount: 2, tools: [query_range, query]}}
"#;

// ---------------------------------------------------------------- the alerts

/// An alert as a submitter means it, before an entry point spells it.
#[derive(Debug, Clone)]
struct Submitted {
    alert_type: String,
    data: String,
    chain: Option<String>,
    runbook_url: Option<String>,
    /// `{"servers": [...]}`, spelt alike by the API and the Alert resource.
    mcp_selection: Option<Value>,
}

fn submitted(alert_type: &str) -> Submitted {
    Submitted {
        alert_type: alert_type.into(),
        data: "pod: api-0\nreason: CrashLoopBackOff\n".into(),
        chain: None,
        runbook_url: None,
        mcp_selection: None,
    }
}

/// How the bridge reports a refused alert.
#[derive(Debug, Clone, Copy)]
enum AtBridge {
    /// Rejected with exactly the rule's message.
    Rejected,
    /// Rejected with the rule's message, then where the bridge looked.
    RejectedNaming(&'static str),
    /// Created without its runbook; the rule's message is the warning.
    RunbookDropped,
    /// An Alertmanager alert cannot carry this (a chain, an MCP selection,
    /// data of its own): not sent.
    Inexpressible,
}

struct Case {
    what: &'static str,
    alert: Submitted,
    /// The rule set's message, which every entry point must give.
    message: String,
    /// 400, or 413 for data over the limit.
    api_status: u16,
    bridge: AtBridge,
}

fn cases() -> Vec<Case> {
    let pods = || submitted("KubePodCrashLooping");
    let with_selection = |selection: Value| Submitted {
        mcp_selection: Some(selection),
        ..pods()
    };
    let case = |what, alert, message: &str, bridge| Case {
        what,
        alert,
        message: message.to_string(),
        api_status: 400,
        bridge,
    };
    vec![
        case(
            "empty alert type",
            submitted("  "),
            "alert type must not be empty",
            AtBridge::RejectedNaming(
                "label `alertname` is missing or empty and no default alert type is configured",
            ),
        ),
        case(
            "alert type over 253 characters",
            submitted(&"T".repeat(254)),
            "alert type is 254 characters long; at most 253 are allowed",
            AtBridge::Rejected,
        ),
        case(
            "empty data",
            Submitted {
                data: " \n".into(),
                ..pods()
            },
            "alert data must not be empty",
            AtBridge::Inexpressible,
        ),
        Case {
            api_status: 413,
            ..case(
                "data over 1 MiB",
                Submitted {
                    data: "x".repeat(MAX_ALERT_DATA_BYTES + 1),
                    ..pods()
                },
                "alert data is 1048577 bytes; the limit is 1048576 bytes",
                AtBridge::Rejected,
            )
        },
        case(
            "runbook URL that is not http(s)",
            Submitted {
                runbook_url: Some("ftp://runbooks.example.com/pods.md".into()),
                ..pods()
            },
            "runbook URL must be an http:// or https:// URL",
            AtBridge::RunbookDropped,
        ),
        case(
            "runbook URL over 2048 characters",
            Submitted {
                runbook_url: Some(format!("https://runbooks.example.com/{}", "p".repeat(2030))),
                ..pods()
            },
            "runbook URL is 2059 characters long; at most 2048 are allowed",
            AtBridge::RunbookDropped,
        ),
        case(
            "unknown MCP server",
            with_selection(json!({"servers": [{"name": "loki"}, {"name": "tempo"}]})),
            "MCP selection: servers[1].name: unknown MCP server \"tempo\" (known: kubernetes-server, loki)",
            AtBridge::Inexpressible,
        ),
        case(
            "MCP server listed twice",
            with_selection(json!({"servers": [{"name": "loki"}, {"name": "loki"}]})),
            "MCP selection: servers[1].name: MCP server \"loki\" is listed twice",
            AtBridge::Inexpressible,
        ),
        case(
            "empty tool name",
            with_selection(json!({"servers": [{"name": "loki", "tools": ["query", " "]}]})),
            "MCP selection: servers[0].tools[1]: tool names must not be empty",
            AtBridge::Inexpressible,
        ),
        case(
            "a tool the server does not offer",
            with_selection(json!({"servers": [{"name": "loki", "tools": ["query_rang"]}]})),
            "MCP selection: servers[0].tools: MCP server \"loki\" has no tool \"query_rang\" (it offers: query, query_range)",
            AtBridge::Inexpressible,
        ),
        case(
            "unknown chain",
            Submitted {
                chain: Some("nodes-c".into()),
                ..pods()
            },
            "unknown chain \"nodes-c\" (known: nodes-a, nodes-b, pods)",
            AtBridge::Inexpressible,
        ),
        case(
            "no chain for the alert type",
            submitted("KubeJobFailed"),
            "no chain handles alert type \"KubeJobFailed\" (known alert types: KubePodCrashLooping, NodeNotReady); add it to a chain's alertTypes or name the chain to run",
            AtBridge::Rejected,
        ),
        case(
            "several chains for the alert type",
            submitted("NodeNotReady"),
            "alert type \"NodeNotReady\" is handled by several chains (nodes-a, nodes-b); name the chain to run",
            AtBridge::Rejected,
        ),
    ]
}

// ---------------------------------------------------------------- entry points

/// What the local and cluster controls do before creating anything: check
/// the alert with the rule set (cluster mode: against the namespace's
/// objects, with the tools its MCPServers last listed).
struct CheckingControl {
    config: Config,
    tools: BTreeMap<String, Vec<String>>,
}

#[async_trait]
impl SessionControl for CheckingControl {
    async fn submit_alert(&self, alert: NewAlert) -> Result<AlertAccepted, SubmitError> {
        let chain = self.config.check_alert(&alert, &self.tools)?;
        Ok(AlertAccepted {
            session_id: "accepted".into(),
            chain_id: chain.name.clone(),
            status: SessionStatus::Pending,
        })
    }

    async fn cancel(&self, _: &str) -> Result<CancelOutcome, CancelError> {
        Err(CancelError::Internal("not part of this test".into()))
    }

    async fn submit_chat_message(&self, _: ChatSubmission) -> Result<ChatAccepted, ChatError> {
        Err(ChatError::Internal("not part of this test".into()))
    }

    async fn rescore(&self, _: &str) -> Result<ScoreAccepted, ScoreError> {
        Err(ScoreError::Internal("not part of this test".into()))
    }
}

struct EntryPoints {
    api: SocketAddr,
    webhooks: SocketAddr,
    sink: InMemoryAlertSink,
    store: Store,
    _db: TempSqlite,
    fingerprints: AtomicU64,
}

impl EntryPoints {
    async fn start() -> Self {
        let chains: Vec<Chain> = serde_yaml::from_str(CHAINS).unwrap();
        let servers: Vec<MCPServer> = serde_yaml::from_str(SERVERS).unwrap();
        let resources = InMemoryResources::new();
        for c in &chains {
            resources.insert(c.clone());
        }
        for s in &servers {
            resources.insert(s.clone());
        }

        let db = TempSqlite::new("tarsy_alert_rules");
        let store = Store::connect_with(&db.url(), ConnectOptions::default())
            .await
            .unwrap();
        let control = CheckingControl {
            config: tarsy_crds::config::from_resources(
                Defaults::default(),
                &chains,
                &[],
                &servers,
                &[],
            ),
            tools: offered_tools(&servers),
        };
        let api = Api::new(
            EventHub::start(store.clone()),
            Arc::new(control),
            ApiConfig::default(),
        );

        let sink = InMemoryAlertSink::new(NS);
        let mut bridge = BridgeConfig::new(NS);
        // Chain resolution needs the namespace's Chains: checked on request.
        bridge.require_chain = true;
        let bridge = BridgeState::new(
            bridge,
            BridgeAuth::Bearer(SecretValue::new(TOKEN)),
            Arc::new(sink.clone()),
        )
        .with_resources(Arc::new(resources.clone()));
        let admission = AdmissionState::new(AdmissionConfig::default(), Arc::new(resources));
        Self {
            api: serve_http(api.router()).await,
            webhooks: serve_http(app(Some(bridge), Some(admission))).await,
            sink,
            store,
            _db: db,
            fingerprints: AtomicU64::new(1),
        }
    }

    /// `POST /api/v1/alerts`: the status and the body.
    async fn rest(&self, alert: &Submitted) -> (u16, Value) {
        let mut body = Map::new();
        body.insert("alert_type".into(), json!(alert.alert_type));
        body.insert("data".into(), json!(alert.data));
        put(&mut body, "chain", alert.chain.clone().map(Value::from));
        put(
            &mut body,
            "runbook_url",
            alert.runbook_url.clone().map(Value::from),
        );
        put(&mut body, "mcp_selection", alert.mcp_selection.clone());
        let resp = post(
            self.api,
            "/api/v1/alerts",
            &[],
            Value::Object(body).to_string(),
        )
        .await;
        (resp.status.as_u16(), resp.json())
    }

    /// The admission webhook's answer to creating the Alert resource.
    async fn admission(&self, alert: &Submitted) -> Value {
        let mut spec = Map::new();
        spec.insert("alertType".into(), json!(alert.alert_type));
        spec.insert("data".into(), json!(alert.data));
        put(&mut spec, "chainRef", alert.chain.clone().map(Value::from));
        put(
            &mut spec,
            "runbookUrl",
            alert.runbook_url.clone().map(Value::from),
        );
        put(&mut spec, "mcpSelection", alert.mcp_selection.clone());
        let object = json!({
            "apiVersion": "tarsy.dev/v1alpha1", "kind": "Alert",
            "metadata": {"name": ALERT_NAME, "namespace": NS, "uid": "5d3c1f0e-8a4b-4c55-9a61-0f1e2d3c4b5a"},
            "spec": spec,
        });
        let gvk = json!({"group": "tarsy.dev", "version": "v1alpha1", "kind": "Alert"});
        let gvr = json!({"group": "tarsy.dev", "version": "v1alpha1", "resource": "alerts"});
        let review = json!({
            "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
            "request": {
                "uid": "0c9a8d74-9cb7-44dd-b98e-000000000001",
                "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
                "name": ALERT_NAME, "namespace": NS, "operation": "CREATE",
                "userInfo": {"username": "kubernetes-admin", "groups": ["system:authenticated"]},
                "object": object, "oldObject": null, "dryRun": false,
            },
        });
        let resp = post(self.webhooks, "/validate", &[], review.to_string()).await;
        assert_eq!(resp.status, 200, "{}", resp.body);
        resp.json()["response"].clone()
    }

    /// The bridge's report line for `alert` as one firing Alertmanager alert:
    /// its type in `alertname`, its runbook in `runbook_url`; data longer
    /// than the bridge renders by itself is matched byte for byte with a
    /// padding annotation (the bridge writes its own data).
    async fn bridge(&self, alert: &Submitted) -> Value {
        let mut annotations = BTreeMap::new();
        if let Some(url) = &alert.runbook_url {
            annotations.insert("runbook_url".to_string(), url.clone());
        }
        if alert.data.len() > 4096 {
            annotations.insert("padding".to_string(), "p".into());
            let rendered = self.rendered_size(&alert.alert_type, &annotations).await;
            let padding = 1 + alert.data.len() - rendered;
            annotations.insert("padding".to_string(), "p".repeat(padding));
        }
        self.notify(&alert.alert_type, &annotations).await
    }

    /// The size of the data the bridge renders for such an alert (it must be
    /// valid: the Alert is created and read back).
    async fn rendered_size(
        &self,
        alert_type: &str,
        annotations: &BTreeMap<String, String>,
    ) -> usize {
        let line = self.notify(alert_type, annotations).await;
        assert_eq!(line["outcome"], "created", "{line}");
        let name = line["alerts"][0].as_str().unwrap();
        self.sink.alert(name).unwrap().spec.data.len()
    }

    async fn notify(&self, alert_type: &str, annotations: &BTreeMap<String, String>) -> Value {
        // A new fingerprint (same length) per alert: no duplicates.
        let fingerprint = format!("{:016x}", self.fingerprints.fetch_add(1, Ordering::Relaxed));
        let payload = json!({
            "version": "4", "status": "firing", "receiver": "tarsy",
            "groupKey": "{}:{alertname=\"x\"}", "externalURL": "http://alertmanager.monitoring.svc:9093",
            "truncatedAlerts": 0,
            "alerts": [{
                "status": "firing",
                "labels": {"alertname": alert_type, "pod": "api-0"},
                "annotations": annotations,
                "startsAt": "2025-06-02T08:14:30.512Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "fingerprint": fingerprint,
            }],
        });
        let auth = format!("Bearer {TOKEN}");
        let resp: Resp = post(
            self.webhooks,
            "/alertmanager",
            &[("authorization", &auth)],
            payload.to_string(),
        )
        .await;
        assert_eq!(resp.status, 200, "{}", resp.body);
        resp.json()["results"][0].clone()
    }
}

fn put(object: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value {
        object.insert(key.to_string(), v);
    }
}

// ---------------------------------------------------------------- the test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_entry_point_refuses_an_invalid_alert_with_the_same_message() {
    let entry = EntryPoints::start().await;

    // A valid alert passes everywhere: the refusals below are the rules'.
    let valid = Submitted {
        runbook_url: Some("https://runbooks.example.com/pods.md".into()),
        mcp_selection: Some(json!({"servers": [{"name": "loki", "tools": ["query"]}]})),
        ..submitted("KubePodCrashLooping")
    };
    let (status, body) = entry.rest(&valid).await;
    assert_eq!((status, &body["chain_id"]), (202, &json!("pods")), "{body}");
    let review = entry.admission(&valid).await;
    assert_eq!(review["allowed"], true, "{review}");
    let line = entry.bridge(&valid).await;
    assert_eq!(line["outcome"], "created", "{line}");

    for case in cases() {
        let what = case.what;
        let message = &case.message;

        let (status, body) = entry.rest(&case.alert).await;
        assert_eq!(status, case.api_status, "REST API, {what}: {body}");
        assert_eq!(&body["message"], message, "REST API, {what}");

        let review = entry.admission(&case.alert).await;
        assert_eq!(review["allowed"], false, "admission, {what}: {review}");
        assert_eq!(review["status"]["code"], 403, "admission, {what}");
        assert_eq!(
            review["status"]["message"],
            format!("Alert {NS}/{ALERT_NAME} has 1 problem: {message}"),
            "admission, {what}"
        );

        let expected = match case.bridge {
            AtBridge::Inexpressible => continue,
            AtBridge::Rejected => ("rejected", message.clone()),
            AtBridge::RejectedNaming(source) => ("rejected", format!("{message} ({source})")),
            AtBridge::RunbookDropped => (
                "created",
                format!("{message}; annotation `runbook_url` ignored"),
            ),
        };
        let line = entry.bridge(&case.alert).await;
        assert_eq!(line["outcome"], expected.0, "bridge, {what}: {line}");
        assert_eq!(line["message"], expected.1, "bridge, {what}");
        if let AtBridge::RunbookDropped = case.bridge {
            let name = line["alerts"][0].as_str().unwrap();
            assert_eq!(entry.sink.alert(name).unwrap().spec.runbook_url, None);
        }
    }
    entry.store.close().await;
}
