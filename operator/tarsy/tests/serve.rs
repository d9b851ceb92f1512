//! `tarsy serve` as a user runs it: the real binary on a free port, reached
//! over HTTP.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A running `tarsy serve`, killed when dropped.
struct Serve {
    child: Child,
    base: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `tarsy serve` on the shipped example configuration (scripted LLM,
/// replayed tools), an in-memory database and `extra` flags; returns once
/// `/health` answers.
async fn serve(extra: &[&str]) -> Serve {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_tarsy"))
        .arg("serve")
        .arg("--config")
        .arg(repo().join("examples/config"))
        .args(["--listen", "127.0.0.1", "--port", &port.to_string()])
        .args(["--database-url", "sqlite::memory:"])
        .args(extra)
        // A scripted provider must never need the LLM service.
        .env("TARSY_LLM_ADDR", "http://127.0.0.1:9")
        .env_remove("DATABASE_URL")
        .env_remove("TARSY_TRUST_FORWARDED_IDENTITY")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tarsy serve");
    let server = Serve {
        child,
        base: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = reqwest::get(format!("{}/health", server.base)).await
            && r.status().is_success()
        {
            return server;
        }
        assert!(Instant::now() < deadline, "tarsy serve did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Submits an alert as an authenticating proxy would forward it; returns the
/// author the session records.
async fn author_of_alert_from_proxy(s: &Serve) -> String {
    let http = reqwest::Client::new();
    let accepted: Value = http
        .post(format!("{}/api/v1/alerts", s.base))
        .header("X-Forwarded-User", "alice")
        .header("X-Forwarded-Email", "alice@example.com")
        .json(&json!({"alert_type": "PodCrashLooping", "data": "pod: web-0\nnamespace: shop"}))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = accepted["session_id"].as_str().unwrap();
    let session: Value = http
        .get(format!("{}/api/v1/sessions/{id}", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    session["author"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn proxy_identity_is_trusted_only_behind_the_flag() {
    let trusting = serve(&["--trust-forwarded-identity"]).await;
    assert_eq!(author_of_alert_from_proxy(&trusting).await, "alice");
    drop(trusting);

    let default = serve(&[]).await;
    assert_eq!(author_of_alert_from_proxy(&default).await, "api-client");
}

async fn get_json(http: &reqwest::Client, url: String) -> Value {
    http.get(&url)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .json()
        .await
        .unwrap()
}

/// Submits the example alert and waits until its session has ended.
async fn investigate_example(s: &Serve, http: &reqwest::Client) -> String {
    let alert = std::fs::read_to_string(repo().join("examples/alerts/pod-crashloop.yaml")).unwrap();
    let doc: serde_yaml::Value = serde_yaml::from_str(&alert).unwrap();
    let accepted: Value = http
        .post(format!("{}/api/v1/alerts", s.base))
        .json(&json!({
            "alert_type": doc["spec"]["alertType"].as_str().unwrap(),
            "data": doc["spec"]["data"].as_str().unwrap(),
        }))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = accepted["session_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let session = get_json(http, format!("{}/api/v1/sessions/{id}", s.base)).await;
        if session["status"] == "completed" {
            return id;
        }
        assert!(
            Instant::now() < deadline,
            "the example did not complete: {session}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The shop window of investigation memory: the example alert twice; the
/// second session's recorded prompt carries the lesson the first taught,
/// and the memories API lists it.
#[tokio::test]
async fn the_example_remembers_what_the_first_investigation_taught() {
    let s = serve(&[]).await;
    let http = reqwest::Client::new();
    let first = investigate_example(&s, &http).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let lesson = loop {
        let m = get_json(
            &http,
            format!("{}/api/v1/sessions/{first}/memories", s.base),
        )
        .await;
        if let Some(content) = m["learned"][0]["content"].as_str() {
            break content.to_string();
        }
        assert!(Instant::now() < deadline, "nothing was learned: {m}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(lesson.contains("CATALOG_PRELOAD"), "{lesson}");

    let second = investigate_example(&s, &http).await;
    let used = get_json(
        &http,
        format!("{}/api/v1/sessions/{second}/memories", s.base),
    )
    .await;
    assert_eq!(used["injected"][0]["content"], lesson.as_str(), "{used}");
    // The prompt the first agent was sent, as the trace records it.
    let trace = get_json(&http, format!("{}/api/v1/sessions/{second}/trace", s.base)).await;
    let call = trace["stages"][0]["executions"][0]["llm_interactions"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let detail = get_json(
        &http,
        format!("{}/api/v1/sessions/{second}/trace/llm/{call}", s.base),
    )
    .await;
    let prompt = detail["conversation"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        prompt.contains("## Lessons from past investigations"),
        "{prompt}"
    );
    assert!(
        prompt.contains(&lesson) && prompt.contains(&first),
        "{prompt}"
    );

    let listed = get_json(&http, format!("{}/api/v1/memories?scope=shop", s.base)).await;
    assert_eq!(listed["total"], 1, "learned twice, kept once: {listed}");
    assert_eq!(listed["memories"][0]["content"], lesson.as_str());
    assert!(
        listed["memories"][0]["seen_count"]
            .as_i64()
            .unwrap_or_default()
            >= 1,
        "{listed}"
    );
}
