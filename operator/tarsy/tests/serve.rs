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
        // Flags in `extra` may name another address.
        .env("TARSY_LISTEN", "127.0.0.1")
        .args(["--port", &port.to_string()])
        .args(["--database-url", "sqlite::memory:"])
        .args(extra)
        // A scripted provider must never need the LLM service.
        .env("TARSY_LLM_ADDR", "http://127.0.0.1:9")
        .env_remove("DATABASE_URL")
        .env_remove("TARSY_TRUST_FORWARDED_IDENTITY")
        .env_remove("TARSY_INSECURE_NO_AUTH")
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

/// `/metrics` in the classic text format, as promtool 2.x asks for it.
async fn classic_metrics(s: &Serve, http: &reqwest::Client) -> String {
    let r = http
        .get(format!("{}/metrics", s.base))
        .header("accept", "text/plain;version=0.0.4")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    r.text().await.unwrap()
}

/// Runs `promtool check metrics` on `page` (`TARSY_PROMTOOL`, else
/// `promtool` on PATH; `scripts/promtool.sh` provides one): no error, no
/// lint finding.
fn promtool_accepts(page: &str) {
    use std::io::Write;
    let promtool = std::env::var("TARSY_PROMTOOL")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "promtool".into());
    let mut child = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run {promtool} ({e}): export TARSY_PROMTOOL=\"$(scripts/promtool.sh)\"")
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}\n{}{}\n--- page:\n{page}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Counters whose label values are known are there at 0 from the start,
/// so that Prometheus's `increase()` sees the first event after every
/// (re)start; promtool reads the page without a finding, before and after
/// an investigation.
#[tokio::test]
async fn metrics_start_at_zero_and_promtool_reads_them() {
    let http = reqwest::Client::new();
    let zero = [
        "tarsy_sessions_finished_total{status=\"completed\"} 0",
        "tarsy_scoring_attempts_total{outcome=\"completed\"} 0",
        "tarsy_reviews_total{rating=\"accurate\"} 0",
        "tarsy_notifications_total{channel=\"slack\",outcome=\"sent\"} 0",
    ];
    let s = serve(&[]).await;
    let page = classic_metrics(&s, &http).await;
    for line in zero {
        assert!(page.lines().any(|l| l == line), "no {line:?} in:\n{page}");
    }
    promtool_accepts(&page);

    investigate_example(&s, &http).await;
    let page = classic_metrics(&s, &http).await;
    assert!(
        page.lines()
            .any(|l| l == "tarsy_sessions_finished_total{status=\"completed\"} 1"),
        "{page}"
    );
    promtool_accepts(&page);

    // A restart starts every one of them at 0 again.
    drop(s);
    let s = serve(&[]).await;
    let page = classic_metrics(&s, &http).await;
    for line in zero {
        assert!(page.lines().any(|l| l == line), "no {line:?} in:\n{page}");
    }
}

/// On an address other machines reach, `tarsy serve` refuses to start
/// without authentication, saying why and what to do; it starts when told
/// the exposure is accepted.
#[tokio::test]
async fn an_open_address_needs_authentication() {
    let out = Command::new(env!("CARGO_BIN_EXE_tarsy"))
        .arg("serve")
        .arg("--config")
        .arg(repo().join("examples/config"))
        .args(["--listen", "0.0.0.0", "--port", &free_port().to_string()])
        .args(["--database-url", "sqlite::memory:"])
        .env_remove("TARSY_TRUST_FORWARDED_IDENTITY")
        .env_remove("TARSY_INSECURE_NO_AUTH")
        .output()
        .expect("run tarsy serve");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to serve on 0.0.0.0:")
            && stderr.contains("--trust-forwarded-identity")
            && stderr.contains("--insecure-no-auth"),
        "{stderr}"
    );
    let s = serve(&["--listen", "0.0.0.0", "--insecure-no-auth"]).await;
    let health = reqwest::get(format!("{}/health", s.base)).await.unwrap();
    assert!(health.status().is_success());
}
