//! The validating admission webhook over real HTTPS (rustls client trusting
//! an rcgen-generated CA), with AdmissionReview bodies shaped like the ones
//! the API server sends.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{Resp, post_tls, tls_connector};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::{Value, json};
use tarsy_webhooks::server::serve_https;
use tarsy_webhooks::tls::{ReloadingCert, TlsFiles, server_config};
use tarsy_webhooks::{AdmissionConfig, AdmissionState, InMemoryResources, ReferencePolicy, app};
use tokio::net::TcpListener;

const HOST: &str = "tarsy-webhooks.tarsy.svc";
const NS: &str = "team-a";

// ---------------------------------------------------------------- certificates

struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).unwrap();
    Ca {
        pem: cert.pem(),
        issuer: Issuer::new(params, key),
    }
}

/// A serving certificate for `HOST` signed by `ca`: (cert PEM, key PEM).
fn leaf(ca: &Ca) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec![HOST.to_string()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, HOST);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn temp_dir() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tarsy-webhooks-admission-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---------------------------------------------------------------- server

struct Webhook {
    addr: std::net::SocketAddr,
    connector: tokio_rustls::TlsConnector,
    resources: InMemoryResources,
    files: TlsFiles,
    cert: Arc<ReloadingCert>,
}

async fn start(policy: ReferencePolicy) -> Webhook {
    let dir = temp_dir();
    let files = TlsFiles::in_dir(&dir);
    let authority = ca("tarsy test CA");
    let (cert_pem, key_pem) = leaf(&authority);
    std::fs::write(&files.cert, cert_pem).unwrap();
    std::fs::write(&files.key, key_pem).unwrap();
    let cert = ReloadingCert::load(files.clone()).unwrap();
    let tls = server_config(cert.clone()).unwrap();

    let resources = InMemoryResources::new();
    for doc in WORLD.split("\n---\n") {
        insert_yaml(&resources, doc);
    }
    let state = AdmissionState::new(
        AdmissionConfig {
            reference_policy: policy,
            ..AdmissionConfig::default()
        },
        Arc::new(resources.clone()),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_https(
        listener,
        app(None, Some(state)),
        tls,
        std::future::pending(),
    ));
    Webhook {
        addr,
        connector: tls_connector(&authority.pem),
        resources,
        files,
        cert,
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        if let Some(dir) = self.files.cert.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Webhook {
    async fn post(&self, body: impl Into<Vec<u8>>) -> Resp {
        post_tls(&self.connector, HOST, self.addr, "/validate", body)
            .await
            .unwrap()
    }

    /// Sends a review and returns its `response`.
    async fn review(&self, review: Value) -> Value {
        let resp = self.post(review.to_string()).await;
        assert_eq!(resp.status, 200, "{}", resp.body);
        let body = resp.json();
        assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(body["kind"], "AdmissionReview");
        assert_eq!(body["response"]["uid"], review["request"]["uid"]);
        body["response"].clone()
    }
}

// ---------------------------------------------------------------- objects

/// The namespace's existing objects, as GitOps would have applied them.
const WORLD: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: gemini-pro, namespace: team-a}
spec: {type: google, model: gemini-2.5-pro, apiKeySecretRef: {name: llm-keys, key: GOOGLE_API_KEY}, fallback: [gpt]}
---
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: gpt, namespace: team-a}
spec: {type: openai, model: gpt-5, apiKeySecretRef: {name: llm-keys, key: OPENAI_API_KEY}}
---
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: loki, namespace: team-a}
spec: {url: "http://loki-mcp.observability.svc:8080/mcp"}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: log-reader, namespace: team-a}
spec: {description: Reads logs, mcpServers: [loki]}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: pods, namespace: team-a}
spec:
  alertTypes: [KubePodCrashLooping, KubePodNotReady]
  stages:
    - name: investigate
      agent: KubernetesAgent
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: nodes-a, namespace: team-a}
spec:
  alertTypes: [NodeNotReady]
  stages: [{name: investigate, agent: KubernetesAgent}]
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: other-team-chain, namespace: team-b}
spec:
  alertTypes: [DiskFull]
  stages: [{name: investigate, agent: KubernetesAgent}]
"#;

fn yaml(doc: &str) -> Value {
    serde_yaml::from_str(doc).unwrap()
}

fn insert_yaml(resources: &InMemoryResources, doc: &str) {
    let v = yaml(doc);
    match v["kind"].as_str().unwrap() {
        "Chain" => resources.insert(serde_json::from_value::<tarsy_crds::Chain>(v).unwrap()),
        "Agent" => resources.insert(serde_json::from_value::<tarsy_crds::Agent>(v).unwrap()),
        "MCPServer" => {
            resources.insert(serde_json::from_value::<tarsy_crds::MCPServer>(v).unwrap())
        }
        "LLMProvider" => {
            resources.insert(serde_json::from_value::<tarsy_crds::LLMProvider>(v).unwrap())
        }
        k => panic!("unexpected kind {k}"),
    }
}

fn plural(kind: &str) -> &'static str {
    match kind {
        "Chain" => "chains",
        "Agent" => "agents",
        "MCPServer" => "mcpservers",
        "LLMProvider" => "llmproviders",
        "Alert" => "alerts",
        _ => panic!("{kind}"),
    }
}

static UID: AtomicU32 = AtomicU32::new(1);

/// An AdmissionReview as kube-apiserver sends it for `kubectl apply`.
fn review(operation: &str, object: Value, old: Option<Value>) -> Value {
    let kind = object["kind"].as_str().unwrap().to_string();
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let mut object = object;
    // What the API server adds before admission.
    let meta = object["metadata"].as_object_mut().unwrap();
    meta.insert("uid".into(), json!("5d3c1f0e-8a4b-4c55-9a61-0f1e2d3c4b5a"));
    meta.insert("generation".into(), json!(1));
    meta.insert("creationTimestamp".into(), json!("2025-06-02T08:15:00Z"));
    meta.insert(
        "managedFields".into(),
        json!([{
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "tarsy.dev/v1alpha1",
            "time": "2025-06-02T08:15:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {".": {}}}
        }]),
    );
    let gvk = json!({"group": "tarsy.dev", "version": "v1alpha1", "kind": kind});
    let gvr = json!({"group": "tarsy.dev", "version": "v1alpha1", "resource": plural(&kind)});
    let uid = format!(
        "0c9a8d74-9cb7-44dd-b98e-{:012x}",
        UID.fetch_add(1, Ordering::Relaxed)
    );
    json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": name,
            "namespace": NS,
            "operation": operation,
            "userInfo": {
                "username": "kubernetes-admin",
                "groups": ["kubeadm:cluster-admins", "system:authenticated"]
            },
            "object": object,
            "oldObject": old,
            "dryRun": false,
            "options": {
                "kind": if operation == "CREATE" { "CreateOptions" } else { "UpdateOptions" },
                "apiVersion": "meta.k8s.io/v1",
                "fieldManager": "kubectl-client-side-apply",
                "fieldValidation": "Strict"
            }
        }
    })
}

fn create(doc: &str) -> Value {
    review("CREATE", yaml(doc), None)
}

fn message(response: &Value) -> String {
    response["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn warnings(response: &Value) -> Vec<String> {
    response["warnings"]
        .as_array()
        .map(|w| w.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn valid_chain_is_allowed() {
    let w = start(ReferencePolicy::Deny).await;
    let r = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: deployments, namespace: team-a}
spec:
  alertTypes: [KubeDeploymentReplicasMismatch]
  llmProvider: gemini-pro
  executiveSummaryProvider: gpt
  stages:
    - name: investigate
      agents:
        - name: KubernetesAgent
        - name: log-reader
          llmProvider: gpt
          iterationStrategy: langchain
          mcpServers: [loki, kubernetes-server]
      synthesis: {agent: SynthesisAgent, llmProvider: gemini-pro}
  chat: {agent: ChatAgent, mcpServers: [loki]}
"#,
        ))
        .await;
    assert_eq!(r["allowed"], true, "{r}");
    assert!(warnings(&r).is_empty(), "{r}");
}

#[tokio::test]
async fn chain_with_broken_references_is_denied_with_every_problem() {
    let w = start(ReferencePolicy::Deny).await;
    let r = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: crashes, namespace: team-a}
spec:
  alertTypes: [KubePodCrashLooping, DiskFull]
  llmProvider: gemini-flash
  stages:
    - name: investigate
      agents:
        - name: KubernetesAgent
        - name: log-raeder
          mcpServers: [lokki]
"#,
        ))
        .await;
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], 403);
    let msg = message(&r);
    assert!(
        msg.starts_with("Chain team-a/crashes has 4 problems: "),
        "{msg}"
    );
    for needle in [
        "spec.alertTypes[0]: alert type \"KubePodCrashLooping\" is already handled by Chain \"pods\"",
        "spec.llmProvider: unknown LLM provider \"gemini-flash\" (known: anthropic-default, gemini-pro, google-default, gpt, openai-default, xai-default)",
        "spec.stages[0].agents[1].name: unknown agent \"log-raeder\" (known: chat-agent, kubernetes-agent, log-reader, memory-reflector, scoring-agent, synthesis-agent)",
        "spec.stages[0].agents[1].mcpServers[0]: unknown MCP server \"lokki\" (known: kubernetes-server, loki)",
    ] {
        assert!(msg.contains(needle), "{needle:?} not in {msg:?}");
    }
    // DiskFull belongs to a Chain of another namespace: no conflict.
    assert!(!msg.contains("DiskFull"), "{msg}");
}

#[tokio::test]
async fn chain_strategies_must_fit_their_provider_backend() {
    // tarsy-config's rules, the same local mode applies.
    let w = start(ReferencePolicy::Warn).await;
    let r = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: openai-only, namespace: team-a}
spec:
  alertTypes: [KubeJobFailed]
  llmProvider: gpt
  stages: [{name: investigate, agent: KubernetesAgent}]
"#,
        ))
        .await;
    assert_eq!(
        r["allowed"], false,
        "not a reference problem: denied even with Warn"
    );
    assert_eq!(
        message(&r),
        "Chain team-a/openai-only has 2 problems: spec.stages[0].agent: strategy native-thinking runs on the google-native backend, which needs a google or vertexai provider, but LLM provider \"gpt\" is openai; spec.chat: strategy native-thinking runs on the google-native backend, which needs a google or vertexai provider, but LLM provider \"gpt\" is openai"
    );
}

#[tokio::test]
async fn updating_a_chain_does_not_conflict_with_itself() {
    let w = start(ReferencePolicy::Deny).await;
    let old = yaml(
        r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: pods, namespace: team-a}
spec:
  alertTypes: [KubePodCrashLooping, KubePodNotReady]
  stages: [{name: investigate, agent: KubernetesAgent}]
"#,
    );
    let new = yaml(
        r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: pods, namespace: team-a}
spec:
  alertTypes: [KubePodCrashLooping, KubePodNotReady, KubePodOOMKilled]
  stages:
    - name: investigate
      agent: KubernetesAgent
      replicas: 1
      synthesis: {agent: SynthesisAgent}
"#,
    );
    let r = w.review(review("UPDATE", new, Some(old))).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(
        warnings(&r),
        [
            "spec.stages[0].synthesis: stage \"investigate\" runs a single execution, so its synthesis never runs"
        ]
    );
}

#[tokio::test]
async fn warn_policy_turns_missing_references_into_warnings() {
    let w = start(ReferencePolicy::Warn).await;
    let r = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: gitops, namespace: team-a}
spec:
  alertTypes: [KubeJobFailed]
  stages: [{name: investigate, agent: job-inspector}]
"#,
        ))
        .await;
    assert_eq!(r["allowed"], true, "{r}");
    let w = warnings(&r);
    assert_eq!(w.len(), 1);
    assert!(
        w[0].starts_with("spec.stages[0].agent: unknown agent \"job-inspector\""),
        "{w:?}"
    );

    // Ownership conflicts still deny: they would make alerts ambiguous.
    let r = w_conflict(ReferencePolicy::Warn).await;
    assert_eq!(r["allowed"], false);
}

async fn w_conflict(policy: ReferencePolicy) -> Value {
    let w = start(policy).await;
    w.review(create(
        r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: nodes-b, namespace: team-a}
spec:
  alertTypes: [NodeNotReady]
  stages: [{name: investigate, agent: KubernetesAgent}]
"#,
    ))
    .await
}

#[tokio::test]
async fn agent_references_mcp_servers() {
    let w = start(ReferencePolicy::Deny).await;
    let ok = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: combined, namespace: team-a}
spec: {mcpServers: [loki, kubernetes-server]}
"#,
        ))
        .await;
    assert_eq!(ok["allowed"], true, "{ok}");

    let bad = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: prom, namespace: team-a}
spec: {mcpServers: [prometheus]}
"#,
        ))
        .await;
    assert_eq!(bad["allowed"], false);
    assert_eq!(
        message(&bad),
        "Agent team-a/prom has 1 problem: spec.mcpServers[0]: unknown MCP server \"prometheus\" (known: kubernetes-server, loki)"
    );

    // Overriding a built-in is allowed, and said.
    let over = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: kubernetes-agent, namespace: team-a}
spec: {customInstructions: Be brief.}
"#,
        ))
        .await;
    assert_eq!(over["allowed"], true);
    assert!(warnings(&over)[0].contains("replaces the built-in agent"));
}

#[tokio::test]
async fn mcp_server_masking_is_checked_like_the_masking_service_does() {
    let w = start(ReferencePolicy::Deny).await;
    let ok = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: vault, namespace: team-a}
spec:
  url: https://vault-mcp.example/mcp
  tls: {insecureSkipVerify: true}
  dataMasking:
    patternGroups: [secrets]
    customPatterns:
      - {name: ticket, regex: 'TT-[0-9a-f]{8}'}
"#,
        ))
        .await;
    assert_eq!(ok["allowed"], true, "{ok}");
    assert_eq!(
        warnings(&ok),
        ["spec.tls.insecureSkipVerify is true: the server's certificate is not verified"]
    );

    let bad = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: vault, namespace: team-a}
spec:
  url: https://vault-mcp.example/mcp
  dataMasking:
    customPatterns:
      - {name: ticket, regex: 'TT-[0-9a-f{8}'}
"#,
        ))
        .await;
    assert_eq!(bad["allowed"], false);
    let msg = message(&bad);
    assert!(
        msg.contains(
            "spec.dataMasking.customPatterns[0].regex: custom pattern \"ticket\" has an invalid regex"
        ),
        "{msg}"
    );

    let unknown = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: vault, namespace: team-a}
spec:
  url: https://vault-mcp.example/mcp
  dataMasking: {patternGroups: [secretz]}
"#,
        ))
        .await;
    assert_eq!(unknown["allowed"], false);
    assert!(
        message(&unknown).contains(
            "spec.dataMasking.patternGroups[0]: unknown pattern group \"secretz\" (known: basic, secrets"
        ),
        "{unknown}"
    );
}

#[tokio::test]
async fn llm_provider_fallbacks_must_exist_and_do_not_nest() {
    let w = start(ReferencePolicy::Deny).await;
    let r = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: claude, namespace: team-a}
spec: {type: anthropic, model: claude-sonnet-4, apiKeySecretRef: {name: llm-keys, key: ANTHROPIC_API_KEY}, fallback: [gemini-pro, grok]}
"#,
        ))
        .await;
    assert_eq!(r["allowed"], false);
    assert!(
        message(&r).contains(
            "spec.fallback[1]: unknown LLM provider \"grok\" (known: anthropic-default, claude, gemini-pro, google-default, gpt, openai-default, xai-default)"
        ),
        "{r}"
    );
    assert!(
        warnings(&r)
            .iter()
            .any(|w| w
                .starts_with("spec.fallback[0]: LLMProvider \"gemini-pro\" has its own fallbacks")),
        "{r}"
    );

    let ok = w
        .review(create(
            r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: claude, namespace: team-a}
spec: {type: anthropic, model: claude-sonnet-4, apiKeyEnv: ANTHROPIC_API_KEY, fallback: [gpt]}
"#,
        ))
        .await;
    assert_eq!(ok["allowed"], true, "{ok}");
    assert!(warnings(&ok).iter().any(|w| w.contains("apiKeyEnv")));
}

fn alert(alert_type: &str, extra: &str) -> Value {
    yaml(&format!(
        r#"
apiVersion: tarsy.dev/v1alpha1
kind: Alert
metadata: {{name: am-3f6e8b1a2c4d5e6f, namespace: team-a}}
spec:
  alertType: {alert_type}
  data: "labels:\n  pod: api-0\n"
{extra}
"#
    ))
}

#[tokio::test]
async fn alerts_must_resolve_to_exactly_one_chain() {
    let w = start(ReferencePolicy::Deny).await;
    let ok = w
        .review(review("CREATE", alert("KubePodCrashLooping", ""), None))
        .await;
    assert_eq!(ok["allowed"], true, "{ok}");

    let none = w
        .review(review("CREATE", alert("KubeJobFailed", ""), None))
        .await;
    assert_eq!(none["allowed"], false);
    assert_eq!(
        message(&none),
        "Alert team-a/am-3f6e8b1a2c4d5e6f has 1 problem: no chain handles alert type \"KubeJobFailed\" (known alert types: KubePodCrashLooping, KubePodNotReady, NodeNotReady); add it to a chain's alertTypes or name the chain to run"
    );

    // Two chains claiming the same type (created while the webhook was down).
    insert_yaml(
        &w.resources,
        r#"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: nodes-b, namespace: team-a}
spec:
  alertTypes: [NodeNotReady]
  stages: [{name: investigate, agent: KubernetesAgent}]
"#,
    );
    let two = w
        .review(review("CREATE", alert("NodeNotReady", ""), None))
        .await;
    assert_eq!(two["allowed"], false);
    assert!(
        message(&two)
            .contains("is handled by several chains (nodes-a, nodes-b); name the chain to run"),
        "{two}"
    );
    let pinned = w
        .review(review(
            "CREATE",
            alert("NodeNotReady", "  chainRef: nodes-b"),
            None,
        ))
        .await;
    assert_eq!(pinned["allowed"], true, "{pinned}");

    let missing = w
        .review(review(
            "CREATE",
            alert("Anything", "  chainRef: nodes-c"),
            None,
        ))
        .await;
    assert_eq!(missing["allowed"], false);
    assert!(
        message(&missing).contains("unknown chain \"nodes-c\" (known: "),
        "{missing}"
    );
}

#[tokio::test]
async fn alert_mcp_selection_names_existing_servers() {
    let w = start(ReferencePolicy::Deny).await;
    let sel = "  mcpSelection:\n    servers:\n      - name: kubernetes-server\n      - name: loki\n        tools: [query]\n      - name: tempo";
    let r = w
        .review(review("CREATE", alert("KubePodCrashLooping", sel), None))
        .await;
    assert_eq!(r["allowed"], false);
    assert!(
        message(&r).ends_with(
            "MCP selection: servers[2].name: unknown MCP server \"tempo\" (known: kubernetes-server, loki)"
        ),
        "{r}"
    );
    assert!(!message(&r).contains("servers[1]"), "{r}");
}

#[tokio::test]
async fn alert_updates_are_not_blocked_by_a_vanished_chain() {
    let w = start(ReferencePolicy::Deny).await;
    let old = alert("GoneType", "");
    let new = alert("GoneType", "  cancel: true");
    let r = w.review(review("UPDATE", new, Some(old))).await;
    assert_eq!(r["allowed"], true, "{r}");
    // Deletes carry no object and are never checked.
    let mut del = review("DELETE", alert("GoneType", ""), None);
    del["request"]["oldObject"] = del["request"]["object"].take();
    let r = w.review(del).await;
    assert_eq!(r["allowed"], true, "{r}");
}

#[tokio::test]
async fn malformed_reviews_get_400() {
    let w = start(ReferencePolicy::Deny).await;
    let r = w.post("{\"kind\": \"AdmissionReview\",").await;
    assert_eq!(r.status, 400);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("malformed AdmissionReview")
    );

    let r = w
        .post(json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}).to_string())
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["message"], "the AdmissionReview has no request");

    let mut v1beta1 = create(
        "apiVersion: tarsy.dev/v1alpha1\nkind: Agent\nmetadata: {name: a, namespace: team-a}\nspec: {}",
    );
    v1beta1["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let r = w.post(v1beta1.to_string()).await;
    assert_eq!(r.status, 400);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("admission.k8s.io/v1"),
        "{}",
        r.body
    );

    let mut no_uid = create(
        "apiVersion: tarsy.dev/v1alpha1\nkind: Agent\nmetadata: {name: a, namespace: team-a}\nspec: {}",
    );
    no_uid["request"].as_object_mut().unwrap().remove("uid");
    let r = w.post(no_uid.to_string()).await;
    assert_eq!(r.status, 400);
    let msg = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains("`request`") && msg.contains("missing field `uid`"),
        "{msg}"
    );
}

#[tokio::test]
async fn unreadable_namespace_returns_500_so_the_failure_policy_applies() {
    let w = start(ReferencePolicy::Deny).await;
    w.resources.set_unavailable(true);
    let r = w
        .post(create(
            "apiVersion: tarsy.dev/v1alpha1\nkind: Agent\nmetadata: {name: a, namespace: team-a}\nspec: {mcpServers: [loki]}",
        )
        .to_string())
        .await;
    assert_eq!(r.status, 500);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("cannot read Chain objects")
    );
}

#[tokio::test]
async fn untrusted_clients_cannot_complete_the_handshake() {
    let w = start(ReferencePolicy::Deny).await;
    let stranger = tls_connector(&ca("another CA").pem);
    let err = post_tls(&stranger, HOST, w.addr, "/validate", "{}")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[tokio::test]
async fn renewed_certificates_are_served_without_restart() {
    let w = start(ReferencePolicy::Deny).await;
    let renewed = ca("renewed CA");
    let (cert, key) = leaf(&renewed);
    let reloader = w.cert.spawn_reloader(Duration::from_millis(50));
    // A Secret update swaps both files; write the key first so that a poll
    // in between sees a mismatched pair and keeps the old certificate.
    std::fs::write(&w.files.key, key).unwrap();
    std::fs::write(&w.files.cert, cert).unwrap();

    let client = tls_connector(&renewed.pem);
    let body = create(
        "apiVersion: tarsy.dev/v1alpha1\nkind: Agent\nmetadata: {name: a, namespace: team-a}\nspec: {}",
    )
    .to_string();
    let mut served = false;
    for _ in 0..100 {
        if let Ok(r) = post_tls(&client, HOST, w.addr, "/validate", body.clone()).await {
            assert_eq!(r.status, 200);
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    reloader.abort();
    assert!(served, "the renewed certificate was never served");
    // The old CA no longer verifies the server.
    assert!(
        post_tls(&w.connector, HOST, w.addr, "/validate", body)
            .await
            .is_err()
    );
}
