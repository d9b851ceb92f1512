//! `tarsy serve` killed with SIGKILL in the middle of stage 2 of a
//! two-stage chain, then started again on the same database (SQLite and
//! Postgres): the session completes, stage 1 is not run again, the answer
//! that was cut off is closed as interrupted and asked again, and no event
//! is duplicated or numbered twice.

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tarsy_core::{SessionStatus, TimelineEventStatus, TimelineEventType};
use tarsy_store::Store;

use common::{free_port, http, scratch_dir, tail, tarsy_bin, test_database};

const CONFIG: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: canned}
spec: {type: scripted, model: canned, script: ../script.yaml}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: first-agent}
spec: {displayName: FirstAgent, description: First look., mcpServers: []}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: second-agent}
spec: {displayName: SecondAgent, description: Root cause., mcpServers: []}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: two-stages}
spec:
  alertTypes: [PodCrashLooping]
  llmProvider: canned
  iterationStrategy: native-thinking
  stages:
  - {name: triage, agent: first-agent}
  - {name: root-cause, agent: second-agent}
"#;

/// Stage 2 streams its answer slowly (20 chunks, 250 ms apart): the kill
/// lands in the middle of it.
fn script() -> String {
    let chunks: String = (1..=20)
        .map(|i| format!("    - {{kind: text, content: \"part {i}. \"}}\n"))
        .collect();
    format!(
        "routes:\n  FirstAgent:\n  - chunks:\n    - {{kind: text, content: \"Stage one: OOMKilled.\"}}\n  \
         SecondAgent:\n  - chunk_delay_ms: 250\n    chunks:\n{chunks}\
         sequential:\n- chunks:\n  - {{kind: text, content: \"Summary: OOMKilled.\"}}\n"
    )
}

/// One `tarsy serve` process, killed on drop.
struct Serve {
    child: Child,
    port: u16,
}

impl Serve {
    fn start(dir: &Path, database_url: &str, port: u16) -> Serve {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("serve.log"))
            .unwrap();
        let child = Command::new(tarsy_bin())
            .arg("serve")
            .arg("--config")
            .arg(dir.join("config"))
            .args(["--database-url", database_url])
            .args(["--port", &port.to_string()])
            .args(["--pod-id", "restart-test"])
            .env("TARSY_LLM_ADDR", "http://127.0.0.1:9")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start tarsy serve");
        let mut serve = Serve { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !serve
            .get("/health")
            .is_some_and(|r| r.starts_with("HTTP/1.1 200"))
        {
            if let Some(status) = serve.child.try_wait().unwrap() {
                panic!(
                    "tarsy serve exited ({status}):\n{}",
                    tail(&dir.join("serve.log"), 40)
                );
            }
            assert!(
                Instant::now() < deadline,
                "tarsy serve did not become healthy"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        serve
    }

    fn get(&self, path: &str) -> Option<String> {
        http("127.0.0.1", self.port, "GET", path, None).ok()
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn body(reply: &str) -> Value {
    let json = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(json).unwrap_or(Value::Null)
}

async fn killed_during_stage_two_then_restarted(database_url: &str) {
    let dir = scratch_dir("restart");
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(dir.join("config/tarsy.yaml"), CONFIG).unwrap();
    std::fs::write(dir.join("script.yaml"), script()).unwrap();
    let port = free_port();

    let first = Serve::start(&dir, database_url, port);
    let accepted = http(
        "127.0.0.1",
        port,
        "POST",
        "/api/v1/alerts",
        Some(r#"{"alert_type": "PodCrashLooping", "data": "pod: web-1"}"#),
    )
    .unwrap();
    let id = body(&accepted)["session_id"].as_str().unwrap().to_string();

    // Kill once part of stage 2's answer is stored.
    let store = Store::connect(database_url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let timeline = store.session_timeline(&id).await.unwrap();
        let streaming = timeline.iter().any(|e| {
            e.event_type == TimelineEventType::LlmResponse
                && e.status == TimelineEventStatus::Streaming
                && e.content.contains("part 2.")
        });
        if streaming {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "stage 2 never streamed: {timeline:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.kill();

    let second = Serve::start(&dir, database_url, port);
    let deadline = Instant::now() + Duration::from_secs(60);
    let session = loop {
        let session = body(
            &second
                .get(&format!("/api/v1/sessions/{id}"))
                .unwrap_or_default(),
        );
        if session["status"] == "completed" || session["status"] == "failed" {
            break session;
        }
        assert!(
            Instant::now() < deadline,
            "the session did not end after the restart: {session}\n{}",
            tail(&dir.join("serve.log"), 40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(session["status"], "completed", "{session}");
    let full: String = (1..=20).map(|i| format!("part {i}. ")).collect();
    assert_eq!(
        session["final_analysis"].as_str().map(str::trim),
        Some(full.trim()),
        "{session}"
    );
    assert_eq!(session["executive_summary"], "Summary: OOMKilled.");

    let stored = store.get_session(&id).await.unwrap();
    assert_eq!(stored.status, SessionStatus::Completed);
    let timeline = store.session_timeline(&id).await.unwrap();
    let mut numbered = HashSet::new();
    for e in &timeline {
        assert!(
            numbered.insert((e.scope.execution_id.clone(), e.sequence_number)),
            "numbered twice: {e:?}"
        );
        assert_ne!(e.status, TimelineEventStatus::Streaming, "{e:?}");
    }
    let finals: Vec<&str> = timeline
        .iter()
        .filter(|e| e.event_type == TimelineEventType::FinalAnalysis)
        .map(|e| e.content.trim())
        .collect();
    assert_eq!(
        finals,
        ["Stage one: OOMKilled.", full.trim()],
        "stage 1 ran once"
    );
    let interrupted: Vec<_> = timeline
        .iter()
        .filter(|e| e.metadata["interrupted"] == true)
        .collect();
    assert_eq!(interrupted.len(), 1, "{timeline:#?}");
    assert!(interrupted[0].content.starts_with("part 1. part 2."));
    store.close().await;
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let db = tarsy_store::testing::TempSqlite::new("restart");
    killed_during_stage_two_then_restarted(&db.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let db = test_database("restart").await;
    killed_during_stage_two_then_restarted(db.url()).await;
}
