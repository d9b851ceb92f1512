//! The masking corpus, end to end through the real `tarsy serve` (local
//! mode) on SQLite and on Postgres, with `RUST_LOG=trace`.
//!
//! Planted secrets — Kubernetes Secrets (YAML and JSON, `data` and
//! `stringData`, the last-applied annotation), log lines with passwords and
//! tokens, PEM private keys, JWTs, AWS key pairs, a GCP service-account
//! key, Azure connection strings, GitHub/GitLab/Slack tokens, basic-auth
//! URLs — reach TARSy three ways: tool results of an MCP server (a replay
//! server in this process, default masking), the alert (data and runbook
//! URL) and a chat question. Look-alikes travel with them: ConfigMap values,
//! a public certificate, `secretName:` references, "secret: connection
//! refused" prose, an image digest, `kubectl describe` placeholders.
//!
//! Not one secret may appear, and every look-alike must appear unmasked, in:
//! the REST API (session, list, timeline, trace, every LLM and MCP
//! interaction), the WebSocket stream, every column of every table, the
//! requests the LLM received (a scripted LLM service in this process), and
//! the process's own logs at trace level.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{free_port, http, scratch_dir, tail, tarsy_bin};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tarsy_replay::{RecordedResult, ServerFixture, ToolFixture};
use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer, ScriptedResponse};
use tokio_tungstenite::tungstenite::Message;

// ------------------------------------------------------------ the corpus

// Secret values, each distinctive so that finding it anywhere is a leak.
const SECRET_B64_PASSWORD: &str = "UGF5bWVudHNEYlB3ZC05NDcxIQ=="; // PaymentsDbPwd-9471!
const SECRET_B64_URI: &str = "cG9zdGdyZXM6Ly9hcHA6U3RyMG5nUGFzc0BkYi5zaG9wOjU0MzIvcGF5bWVudHM=";
const SECRET_STRINGDATA: &str = "st-live-8c1d5e2f7a9b4c3d";
const SECRET_JSON_TLS_KEY: &str = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUV2Z0lCQURBTkJna3Fo";
const SECRET_JSON_PASSWORD: &str = "c3VwZXItc2VjcmV0LWpzb24tcHc=";
const LOG_PASSWORD: &str = "Log-Pass-77aa21";
const LOG_BEARER: &str = "lg-4f3e2d1c0b9a8f7e6d5c4b3a";
const LOG_JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJwYXltZW50cy1hcGkiLCJpYXQiOjE3MTYyMzkwMjJ9.Q2hLm1Zb3F4cW9zYk1uQkZyQWdxM0hYa0Vqa1lS";
const LOG_AWS_KEY_ID: &str = "AKIAZ7LOGEXAMPLE4Q9X";
const LOG_AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYLOGKEY0042";
const LOG_GITHUB: &str = "ghp_L0gT0kenF0rTarsyMask1ngCorpus9876";
const LOG_GITLAB: &str = "glpat-LogGitLab0123456789ab";
const LOG_SLACK: &str = "xoxb-203948571234-998877665544-LogSlackBotTokenValue00";
const LOG_SLACK_WEBHOOK: &str = "T0LOG1234/B0LOG5678/LogWebhookSecret0123456789";
const LOG_BASIC_AUTH_PW: &str = "Grafana-Basic-Pw-19";
const LOG_AZURE_ACCOUNT_KEY: &str = "Lg7AzureAccountKeyQ0FCREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3OA";
const LOG_AZURE_SAS: &str = "LgSbSharedAccessKeyR2hpamtsbW5vcHFyc3R1dnd4eXo";
const LOG_API_KEY: &str = "ak-live-3c2b1a09f8e7";
const FILE_GCP_KEY_ID: &str = "7f3e9a1c5b2d8e4f6a0c1b3d5e7f9a2c4b6d8e0f";
const FILE_GCP_KEY_BODY: &str =
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCgcpGcpSaMaskCorpus";
const FILE_RSA_KEY_BODY: &str =
    "MIIEowIBAAKCAQEAuLt0KLuoqeRmUickK8FileRsaKeyBodyForTheMaskCorpus01";
const FILE_CLIENT_SECRET: &str = "cs-9a8b7c6d5e4f3a2b1c0d";
const ALERT_PG_PASSWORD: &str = "Alert-Pg-Pass-5521";
const ALERT_BEARER: &str = "alrt-9f8e7d6c5b4a39281706";
const ALERT_AWS_KEY_ID: &str = "AKIAALERTEXAMPLE7Q2Z";
const ALERT_AWS_SECRET: &str = "aLeRtSeCrEtAcCeSsKeY/0123456789+abcdefgh";
const ALERT_GITHUB: &str = "ghp_AlertT0kenF0rTarsyMask1ngCorpus012";
const ALERT_JWT: &str =
    "eyJhbGciOiJSUzI1NiJ9.eyJhbGVydCI6InBheW1lbnRzIn0.YWxlcnQtand0LXNpZ25hdHVyZS0wMTIzNDU2";
const ALERT_RUNBOOK_TOKEN: &str = "rb-tok-6a5b4c3d2e1f";
const ALERT_RSA_KEY_BODY: &str = "MIIEpAIBAAKCAQEA0AlertRsaKeyBodyForTheMaskCorpusZXhhbXBsZS1rZXk0";
const CHAT_PASSWORD: &str = "Chat-Rotated-Pw-3318";
const CHAT_SLACK: &str = "xoxb-112233445566-665544332211-ChatSlackBotTokenVal00";
const CHAT_GITLAB: &str = "glpat-ChatGitLab9876543210zy";
const CHAT_SECRET_B64: &str = "Q2hhdFNlY3JldFZhbHVlLTc3MjEtcm90YXRlZA==";

const SECRETS: &[&str] = &[
    SECRET_B64_PASSWORD,
    SECRET_B64_URI,
    SECRET_STRINGDATA,
    SECRET_JSON_TLS_KEY,
    SECRET_JSON_PASSWORD,
    LOG_PASSWORD,
    LOG_BEARER,
    LOG_JWT,
    LOG_AWS_KEY_ID,
    LOG_AWS_SECRET,
    LOG_GITHUB,
    LOG_GITLAB,
    LOG_SLACK,
    LOG_SLACK_WEBHOOK,
    LOG_BASIC_AUTH_PW,
    LOG_AZURE_ACCOUNT_KEY,
    LOG_AZURE_SAS,
    LOG_API_KEY,
    FILE_GCP_KEY_ID,
    FILE_GCP_KEY_BODY,
    FILE_RSA_KEY_BODY,
    FILE_CLIENT_SECRET,
    ALERT_PG_PASSWORD,
    ALERT_BEARER,
    ALERT_AWS_KEY_ID,
    ALERT_AWS_SECRET,
    ALERT_GITHUB,
    ALERT_JWT,
    ALERT_RUNBOOK_TOKEN,
    ALERT_RSA_KEY_BODY,
    CHAT_PASSWORD,
    CHAT_SLACK,
    CHAT_GITLAB,
    CHAT_SECRET_B64,
];

// Look-alikes: they must reach the timeline, the trace, the database and
// the model exactly as written.
const LOOK_CONFIGMAP_HOST: &str = "DATABASE_HOST: pg-primary.shop.svc";
const LOOK_CONFIGMAP_FLAGS: &str = "FEATURE_FLAGS: checkout,search,recommendations";
const LOOK_CONFIGMAP_ENDPOINT: &str = "api-endpoint: https://api.shop.example.com/v2";
const LOOK_CERT_BODY: &str = "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ";
const LOOK_CERT_HEADER: &str = "-----BEGIN CERTIFICATE-----";
const LOOK_SECRET_NAME: &str = "secretName: payments-db";
const LOOK_PROSE: &str = "secret: connection refused";
const LOOK_IMAGE: &str = "image: ghcr.io/shop/payments-api@sha256:9b2f6c1e0d4a8b7c3e5f1a2d6b8c0e4f7a9b1c3d5e7f9a0b2c4d6e8f0a1b3c5d";
const LOOK_DESCRIBE: &str = "password:  19 bytes";
const LOOK_DESCRIBE_REF: &str = "DB_PASSWORD:  <set to the key 'password' in secret 'payments-db'>";
const LOOK_ROLE_ID: &str = "AROAZ7LOGEXAMPLE4Q9X";
const LOOK_TOKENS: &str = "prompt_tokens: 512";
const LOOK_SECRET_KEYS: &str = "connection-uri:";
const LOOK_ALERT_PROSE: &str = "error: secret: connection refused while reading payments-db";
const LOOK_CHAT_PROSE: &str = "is the connection refused error related to secretName: payments-db";

/// Look-alikes of the tool results, of the alert, of the chat question.
const TOOL_LOOKALIKES: &[&str] = &[
    LOOK_CONFIGMAP_HOST,
    LOOK_CONFIGMAP_FLAGS,
    LOOK_CONFIGMAP_ENDPOINT,
    LOOK_CERT_BODY,
    LOOK_CERT_HEADER,
    LOOK_SECRET_NAME,
    LOOK_PROSE,
    LOOK_IMAGE,
    LOOK_DESCRIBE,
    LOOK_DESCRIBE_REF,
    LOOK_ROLE_ID,
    LOOK_TOKENS,
    LOOK_SECRET_KEYS,
];
const ALERT_LOOKALIKES: &[&str] = &[LOOK_ALERT_PROSE, LOOK_IMAGE, LOOK_SECRET_NAME];
const CHAT_LOOKALIKES: &[&str] = &[LOOK_CHAT_PROSE];

/// `kubectl get secret -o yaml`: one YAML document (the parsing path).
fn tool_secret_yaml() -> String {
    format!(
        r#"apiVersion: v1
kind: Secret
metadata:
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"payments-db","namespace":"shop"}},"stringData":{{"api-token":"{SECRET_STRINGDATA}"}}}}
  name: payments-db
  namespace: shop
type: Opaque
data:
  password: {SECRET_B64_PASSWORD}
  connection-uri: {SECRET_B64_URI}
stringData:
  api-token: {SECRET_STRINGDATA}
"#
    )
}

/// `kubectl get secret -o json`.
fn tool_secret_json() -> String {
    serde_json::to_string_pretty(&json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "payments-tls", "namespace": "shop"},
        "type": "kubernetes.io/tls",
        "data": {"tls.key": SECRET_JSON_TLS_KEY, "db-password": SECRET_JSON_PASSWORD},
    }))
    .unwrap()
}

/// Application logs and `kubectl describe` output.
fn tool_logs() -> String {
    format!(
        "2025-06-02T08:14:30Z INFO payments-api starting (connection pool size 20)\n\
         2025-06-02T08:14:31Z ERROR db login failed: password={LOG_PASSWORD} user=app\n\
         2025-06-02T08:14:31Z DEBUG outgoing request Authorization: Bearer {LOG_BEARER}\n\
         2025-06-02T08:14:32Z DEBUG session cookie jwt={LOG_JWT}\n\
         2025-06-02T08:14:32Z WARN AWS_ACCESS_KEY_ID={LOG_AWS_KEY_ID} aws_secret_access_key={LOG_AWS_SECRET}\n\
         2025-06-02T08:14:33Z INFO assumed role {LOOK_ROLE_ID} for s3 uploads\n\
         2025-06-02T08:14:33Z DEBUG git clone with {LOG_GITHUB} and {LOG_GITLAB}\n\
         2025-06-02T08:14:34Z DEBUG slack notifier token {LOG_SLACK} webhook https://hooks.slack.com/services/{LOG_SLACK_WEBHOOK}\n\
         2025-06-02T08:14:34Z DEBUG grafana at https://deploy:{LOG_BASIC_AUTH_PW}@grafana.shop.example.com/api/health\n\
         2025-06-02T08:14:35Z DEBUG blob store DefaultEndpointsProtocol=https;AccountName=shopblobs;AccountKey={LOG_AZURE_ACCOUNT_KEY}==;EndpointSuffix=core.windows.net\n\
         2025-06-02T08:14:35Z DEBUG bus Endpoint=sb://shop.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={LOG_AZURE_SAS}=\n\
         2025-06-02T08:14:36Z DEBUG recommendations api_key: {LOG_API_KEY}\n\
         2025-06-02T08:14:36Z ERROR {LOOK_PROSE} (retrying in 5s)\n\
         2025-06-02T08:14:37Z INFO llm usage {LOOK_TOKENS}, completion_tokens: 48\n\
         \n\
         $ kubectl describe secret payments-db -n shop\n\
         Name:         payments-db\n\
         Type:  Opaque\n\
         Data\n\
         ====\n\
         {LOOK_DESCRIBE}\n\
         connection-uri:  62 bytes\n\
         \n\
         $ kubectl describe pod payments-api-7d9c6b5f4-x2k8p -n shop\n\
         Containers:\n\
           api:\n\
             Image:  ghcr.io/shop/payments-api@sha256:9b2f6c1e0d4a8b7c3e5f1a2d6b8c0e4f7a9b1c3d5e7f9a0b2c4d6e8f0a1b3c5d\n\
             Environment:\n\
               {LOOK_DESCRIBE_REF}\n"
    )
}

/// Files an agent reads: a service-account key, a TLS key and its public
/// certificate, a ConfigMap, a deployment excerpt.
fn tool_files() -> String {
    let sa = serde_json::to_string_pretty(&json!({
        "type": "service_account",
        "project_id": "shop-prod",
        "private_key_id": FILE_GCP_KEY_ID,
        "private_key": format!("-----BEGIN PRIVATE KEY-----\n{FILE_GCP_KEY_BODY}\nAbCdEf0123==\n-----END PRIVATE KEY-----\n"),
        "client_email": "payments@shop-prod.iam.gserviceaccount.com",
        "client_id": "104857600000000000001",
    }))
    .unwrap();
    format!(
        "==> /var/run/secrets/gcp/key.json <==\n{sa}\n\n\
         ==> /etc/tls/tls.key <==\n\
         -----BEGIN RSA PRIVATE KEY-----\n{FILE_RSA_KEY_BODY}\nQUJDREVGR0hJSktMTU5PUA==\n-----END RSA PRIVATE KEY-----\n\n\
         ==> /etc/tls/tls.crt <==\n\
         {LOOK_CERT_HEADER}\n{LOOK_CERT_BODY}\nVVMxEzARBgNVBAgMClNvbWUtU3RhdGUxITAfBgNVBAoMGEludGVybmV0IFdpZGdp\n-----END CERTIFICATE-----\n\n\
         ==> /etc/oauth/client.env <==\n\
         client_id=payments-web\n\
         client_secret={FILE_CLIENT_SECRET}\n\n\
         $ kubectl get configmap payments-config -n shop -o yaml\n\
         apiVersion: v1\n\
         kind: ConfigMap\n\
         metadata:\n  name: payments-config\n  namespace: shop\n\
         data:\n\
         \x20 {LOOK_CONFIGMAP_HOST}\n\
         \x20 {LOOK_CONFIGMAP_FLAGS}\n\
         \x20 {LOOK_CONFIGMAP_ENDPOINT}\n\
         \x20 LOG_LEVEL: debug\n\n\
         $ kubectl get deploy payments-api -n shop -o yaml | grep -A3 containers\n\
         \x20     containers:\n\
         \x20     - {LOOK_IMAGE}\n\
         \x20       volumes: [{{name: db, {LOOK_SECRET_NAME}}}]\n"
    )
}

fn alert_data() -> String {
    format!(
        "alertname: PaymentsDbAuthFailures\n\
         namespace: shop\n\
         summary: payments-api cannot log in to Postgres\n\
         description: |\n\
         \x20 dsn postgres://payments:{ALERT_PG_PASSWORD}@pg-primary.shop.svc:5432/payments\n\
         \x20 last request carried Authorization: Bearer {ALERT_BEARER}\n\
         \x20 AWS_ACCESS_KEY_ID={ALERT_AWS_KEY_ID} AWS_SECRET_ACCESS_KEY={ALERT_AWS_SECRET}\n\
         \x20 deploy token {ALERT_GITHUB}, session {ALERT_JWT}\n\
         \x20 -----BEGIN RSA PRIVATE KEY-----\n\
         \x20 {ALERT_RSA_KEY_BODY}\n\
         \x20 -----END RSA PRIVATE KEY-----\n\
         \x20 {LOOK_ALERT_PROSE}\n\
         {LOOK_IMAGE}\n\
         volume: {{{LOOK_SECRET_NAME}}}\n"
    )
}

fn chat_question() -> String {
    format!(
        "We rotated it: password={CHAT_PASSWORD}, and the Slack bot now uses {CHAT_SLACK} \
         (CI uses {CHAT_GITLAB}). Here is the new Secret:\n\
         apiVersion: v1\nkind: Secret\nmetadata:\n  name: payments-db\ndata:\n  rotated: {CHAT_SECRET_B64}\n\
         So {LOOK_CHAT_PROSE}?"
    )
}

fn corpus_fixture() -> ServerFixture {
    let mut fixture = ServerFixture::new("corpus");
    for (name, description, text) in [
        (
            "get_secret",
            "kubectl get secret -o yaml",
            tool_secret_yaml(),
        ),
        (
            "get_secret_json",
            "kubectl get secret -o json",
            tool_secret_json(),
        ),
        ("logs", "Application logs and kubectl describe", tool_logs()),
        ("files", "Reads files", tool_files()),
    ] {
        fixture.tools.push(ToolFixture {
            name: name.into(),
            description: description.into(),
            input_schema: tarsy_replay::fixture::any_object_schema(),
            calls: Vec::new(),
            default: Some(RecordedResult {
                text,
                is_error: false,
            }),
        });
    }
    fixture
}

// ------------------------------------------------------------ the run

const CONFIG: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: masking-llm}
spec: {type: google, model: masking-model, apiKeyEnv: TEST_KEY}
---
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: corpus}
spec:
  url: "{MCP_URL}"
  instructions: Reads the cluster and the pod's files.
  summarization: {enabled: false}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: investigator}
spec: {mcpServers: [corpus], customInstructions: "You are the Investigator."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: masking}
spec:
  alertTypes: [PaymentsDbAuthFailures]
  llmProvider: masking-llm
  iterationStrategy: native-thinking
  mcpServers: [corpus]
  stages:
  - name: investigate
    agent: investigator
"#;

const EXEC_SUMMARY: &str = "You write executive summaries";

fn script() -> ScriptedLlm {
    let s = ScriptedLlm::new();
    s.push_route(
        "You are the Investigator",
        ScriptedResponse::default()
            .then_thinking("Read the Secret, the logs and the files.")
            .then_tool_call("t1", "corpus__get_secret", "{}")
            .then_tool_call("t2", "corpus__get_secret_json", "{}")
            .then_tool_call("t3", "corpus__logs", "{}")
            .then_tool_call("t4", "corpus__files", "{}"),
    )
    .push_route(
        "You are the Investigator",
        ScriptedResponse::text("FINAL: the payments-db credentials were rotated under the pod."),
    )
    .push_route(
        EXEC_SUMMARY,
        ScriptedResponse::text("EXEC: rotated database credentials."),
    )
    .push_route(
        "ChatAgent",
        ScriptedResponse::default().then_tool_call("c1", "corpus__logs", "{}"),
    )
    .push_route(
        "ChatAgent",
        ScriptedResponse::text("CHAT: yes, the rotation explains the refused logins."),
    );
    s
}

/// `tarsy serve` as a child process, its stdout and stderr in `log`.
struct Serve {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl Serve {
    fn start(dir: &Path, database_url: &str, llm_addr: &str) -> Serve {
        let port = free_port();
        let log = dir.join("serve.log");
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(tarsy_bin())
            .arg("serve")
            .arg("--config")
            .arg(dir.join("config"))
            .args(["--database-url", database_url])
            .args(["--port", &port.to_string()])
            .args(["--pod-id", "masking-e2e"])
            .env("TARSY_LLM_ADDR", llm_addr)
            .env("TEST_KEY", "not-a-real-key")
            // Everything the process logs, at every level.
            .env("RUST_LOG", "trace")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .expect("start tarsy serve");
        let serve = Serve { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !http("127.0.0.1", port, "GET", "/health", None)
            .is_ok_and(|r| r.starts_with("HTTP/1.1 200"))
        {
            assert!(
                Instant::now() < deadline,
                "tarsy serve did not become healthy:\n{}",
                tail(&serve.log, 40)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        serve
    }

    /// `METHOD path` → (status, JSON body).
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let body = body.map(Value::to_string);
        let reply = http("127.0.0.1", self.port, method, path, body.as_deref())
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = reply.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        let json = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (status, serde_json::from_str(json).unwrap_or(Value::Null))
    }

    fn get(&self, path: &str) -> Value {
        let (status, body) = self.call("GET", path, None);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// Polls the session until `done` holds.
    fn wait(&self, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let s = self.get(&format!("/api/v1/sessions/{id}"));
            if done(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {s}\n{}",
                tail(&self.log, 30)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every WebSocket frame of the session's channel, collected in the
/// background.
async fn watch(port: u16, id: &str) -> (Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
    let url = format!("ws://127.0.0.1:{port}/api/v1/ws");
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .unwrap_or_else(|e| panic!("WebSocket {url}: {e}"));
    ws.send(Message::text(
        json!({"action": "subscribe", "channel": format!("session:{id}")}).to_string(),
    ))
    .await
    .unwrap();
    let frames = Arc::new(Mutex::new(Vec::new()));
    let sink = frames.clone();
    let task = tokio::spawn(async move {
        while let Some(Ok(msg)) = ws.next().await {
            if let Message::Text(t) = msg {
                sink.lock().unwrap().push(t.to_string());
            }
        }
    });
    (frames, task)
}

/// Every REST view of the session: detail, list, timeline, trace, and the
/// detail of every LLM and MCP interaction.
fn rest_views(serve: &Serve, id: &str) -> Vec<(String, Value)> {
    let mut views = vec![
        (
            "session".to_string(),
            serve.get(&format!("/api/v1/sessions/{id}")),
        ),
        ("session list".to_string(), serve.get("/api/v1/sessions")),
        (
            "timeline".to_string(),
            serve.get(&format!("/api/v1/sessions/{id}/timeline")),
        ),
    ];
    let trace = serve.get(&format!("/api/v1/sessions/{id}/trace"));
    let mut llm = Vec::new();
    let mut mcp = Vec::new();
    for stage in trace["stages"].as_array().into_iter().flatten() {
        for e in stage["executions"].as_array().into_iter().flatten() {
            for l in e["llm_interactions"].as_array().into_iter().flatten() {
                llm.push(l["id"].as_str().unwrap().to_string());
            }
            for m in e["mcp_interactions"].as_array().into_iter().flatten() {
                mcp.push(m["id"].as_str().unwrap().to_string());
            }
        }
    }
    for l in trace["session_interactions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        llm.push(l["id"].as_str().unwrap().to_string());
    }
    views.push(("trace".to_string(), trace));
    for i in llm {
        let v = serve.get(&format!("/api/v1/sessions/{id}/trace/llm/{i}"));
        views.push((format!("trace/llm/{i}"), v));
    }
    for i in mcp {
        let v = serve.get(&format!("/api/v1/sessions/{id}/trace/mcp/{i}"));
        views.push((format!("trace/mcp/{i}"), v));
    }
    views
}

/// Every column of every table, as text (table and column names come from
/// the database's own catalogue).
async fn database_text(url: &str) -> String {
    let mut out = String::new();
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let columns: Vec<(String, String)> = sqlx::query_as(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() ORDER BY 1, 2",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        for (table, column) in &columns {
            let values: Vec<Option<String>> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT \"{column}\"::text FROM \"{table}\""
            )))
            .fetch_all(&pool)
            .await
            .unwrap();
            out.extend(values.into_iter().flatten().map(|v| v + "\n"));
        }
        assert!(columns.len() > 20, "{columns:?}");
        pool.close().await;
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let columns: Vec<(String, String)> = sqlx::query_as(
            "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p \
             WHERE m.type = 'table' ORDER BY 1, 2",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        for (table, column) in &columns {
            // Bytes, not text: a column may hold anything.
            let values: Vec<Option<Vec<u8>>> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT CAST(\"{column}\" AS BLOB) FROM \"{table}\""
            )))
            .fetch_all(&pool)
            .await
            .unwrap();
            out.extend(
                values
                    .into_iter()
                    .flatten()
                    .map(|v| String::from_utf8_lossy(&v).into_owned() + "\n"),
            );
        }
        assert!(columns.len() > 20, "{columns:?}");
        pool.close().await;
        // Bytes at rest too (freed pages, the write-ahead log).
        let path = url.trim_start_matches("sqlite:");
        for suffix in ["", "-wal"] {
            if let Ok(bytes) = std::fs::read(format!("{path}{suffix}")) {
                out.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    out
}

/// Secrets found in `text`.
fn leaks(text: &str) -> Vec<&'static str> {
    SECRETS
        .iter()
        .copied()
        .filter(|s| text.contains(s))
        .collect()
}

/// Look-alikes missing from `text`.
fn missing<'a>(text: &str, lookalikes: &[&'a str]) -> Vec<&'a str> {
    lookalikes
        .iter()
        .copied()
        .filter(|l| !text.contains(l))
        .collect()
}

async fn corpus_end_to_end(database_url: &str) {
    let dir = scratch_dir("masking-e2e");
    let replay = tarsy_replay::spawn_http(corpus_fixture(), ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let llm = ScriptedLlmServer::start(script()).await.unwrap();
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(
        dir.join("config/tarsy.yaml"),
        CONFIG.replace("{MCP_URL}", &replay.url()),
    )
    .unwrap();
    let serve = tokio::task::block_in_place(|| Serve::start(&dir, database_url, &llm.endpoint()));

    // The alert, with a credential in the runbook URL too.
    let (status, accepted) = serve.call(
        "POST",
        "/api/v1/alerts",
        Some(&json!({
            "alert_type": "PaymentsDbAuthFailures",
            "data": alert_data(),
            "runbook_url": format!("https://runbooks.example.com/payments-db.md?token={ALERT_RUNBOOK_TOKEN}"),
        })),
    );
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["session_id"].as_str().unwrap().to_string();
    let (frames, ws_task) = watch(serve.port, &id).await;
    let done = tokio::task::block_in_place(|| {
        serve.wait(&id, "the investigation", |s| {
            matches!(
                s["status"].as_str(),
                Some("completed" | "failed" | "timed_out" | "cancelled")
            )
        })
    });
    assert_eq!(
        done["status"],
        "completed",
        "{done}\n{}",
        tail(&serve.log, 40)
    );

    // A chat question with credentials and a Secret manifest in it.
    let (status, chat) = serve.call(
        "POST",
        &format!("/api/v1/sessions/{id}/chat/messages"),
        Some(&json!({"content": chat_question()})),
    );
    assert_eq!(status, 202, "{chat}");
    let stage_id = chat["stage_id"].as_str().unwrap().to_string();
    tokio::task::block_in_place(|| {
        serve.wait(&id, "the chat answer", |s| {
            s["chat"]["active_stage_id"].is_null()
                && s["stages"].as_array().is_some_and(|stages| {
                    stages.iter().any(|st| {
                        st["id"] == stage_id.as_str()
                            && matches!(st["status"].as_str(), Some("completed"))
                    })
                })
        })
    });
    assert_eq!(
        llm.script().remaining(),
        0,
        "every scripted answer was used"
    );
    // Let the last events reach the WebSocket.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut failures: Vec<String> = Vec::new();
    let mut check = |sink: &str, text: &str, must_keep: &[&[&str]]| {
        for s in leaks(text) {
            failures.push(format!("{sink}: LEAKED {s}"));
        }
        for group in must_keep {
            for l in missing(text, group) {
                failures.push(format!("{sink}: look-alike masked or missing: {l:?}"));
            }
        }
    };

    // REST: every view; the timeline, the tool results and the
    // conversations carry the look-alikes unmasked.
    let views = tokio::task::block_in_place(|| rest_views(&serve, &id));
    for (name, view) in &views {
        check(&format!("REST {name}"), &view.to_string(), &[]);
    }
    let timeline = &views.iter().find(|(n, _)| n == "timeline").unwrap().1;
    let session = &views.iter().find(|(n, _)| n == "session").unwrap().1;
    check(
        "REST timeline",
        &timeline.to_string(),
        &[TOOL_LOOKALIKES, CHAT_LOOKALIKES],
    );
    check("REST session", &session.to_string(), &[ALERT_LOOKALIKES]);
    let alert_data_shown = session["alert_data"].as_str().unwrap();
    assert!(
        alert_data_shown.contains("[MASKED_"),
        "the alert was masked: {alert_data_shown}"
    );
    assert!(
        session["runbook_url"]
            .as_str()
            .is_some_and(|u| u.contains("token=[MASKED_TOKEN]")),
        "{session}"
    );
    let tool_calls: Vec<_> = views
        .iter()
        .filter(|(n, v)| n.starts_with("trace/mcp/") && v["interaction_type"] == "tool_call")
        .collect();
    assert_eq!(tool_calls.len(), 5, "4 tool calls and the chat's");
    let mut results = String::new();
    for (name, view) in tool_calls {
        let text = view.to_string();
        assert!(
            text.contains("[MASKED_"),
            "{name}: no masking marker: {text}"
        );
        results.push_str(&text);
    }
    check("REST trace/mcp", &results, &[TOOL_LOOKALIKES]);

    // WebSocket.
    let ws_text = frames.lock().unwrap().join("\n");
    assert!(
        ws_text.contains("session.status"),
        "the WebSocket saw the session: {ws_text}"
    );
    check("WebSocket", &ws_text, &[]);
    ws_task.abort();

    // The model saw only masked text, and all of the look-alikes.
    let requests = llm.script().requests();
    let prompts: String = requests
        .iter()
        .map(|r| format!("{:?}\n", r.request))
        .collect();
    check(
        "LLM requests",
        &prompts,
        &[TOOL_LOOKALIKES, ALERT_LOOKALIKES, CHAT_LOOKALIKES],
    );

    // The database, every column of every table (and SQLite's bytes).
    let db = database_text(database_url).await;
    check(
        "database",
        &db,
        &[TOOL_LOOKALIKES, ALERT_LOOKALIKES, CHAT_LOOKALIKES],
    );

    // The process's logs at trace level: stopped first so they are complete.
    drop(serve);
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    assert!(
        log.contains("TRACE") && log.contains(&id),
        "trace logs of this session were captured: {} bytes",
        log.len()
    );
    eprintln!(
        "{} log lines, {} at TRACE",
        log.lines().count(),
        log.lines().filter(|l| l.contains("TRACE")).count()
    );
    check("logs (RUST_LOG=trace)", &log, &[]);

    replay.stop().await;
    llm.shutdown().await;
    assert!(
        failures.is_empty(),
        "{} problem(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The corpus is what it claims: each secret has the shape its pattern
/// expects (a typo would make a leak check vacuous), and each is planted.
#[test]
fn the_corpus_is_well_formed() {
    let shapes: BTreeMap<&str, usize> = BTreeMap::from([
        (LOG_AWS_KEY_ID, 20),
        (ALERT_AWS_KEY_ID, 20),
        (LOG_AWS_SECRET, 40),
        (ALERT_AWS_SECRET, 40),
        (FILE_GCP_KEY_ID, 40),
    ]);
    for (secret, len) in shapes {
        assert_eq!(secret.len(), len, "{secret}");
    }
    for token in [LOG_GITHUB, ALERT_GITHUB] {
        assert!(
            token.starts_with("ghp_") && token.len() >= 4 + 30,
            "{token}"
        );
    }
    let everything = [
        tool_secret_yaml(),
        tool_secret_json(),
        tool_logs(),
        tool_files(),
        alert_data(),
        chat_question(),
        ALERT_RUNBOOK_TOKEN.to_string(),
    ]
    .concat();
    for s in SECRETS {
        assert!(everything.contains(s), "not planted: {s}");
    }
    for l in TOOL_LOOKALIKES
        .iter()
        .chain(ALERT_LOOKALIKES)
        .chain(CHAT_LOOKALIKES)
    {
        assert!(everything.contains(l), "not planted: {l}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masking_corpus_sqlite() {
    let db = tarsy_store::testing::TempSqlite::new("tarsy_masking_e2e");
    corpus_end_to_end(&db.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masking_corpus_postgres() {
    let db = common::test_database("tarsy_masking_e2e").await;
    corpus_end_to_end(db.url()).await;
    db.drop_database().await.unwrap();
}
