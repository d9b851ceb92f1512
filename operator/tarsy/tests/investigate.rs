//! `tarsy investigate` as a user runs it: the shipped example (offline:
//! scripted provider, the real `mcp-server-time` installed by
//! `e2e/install-mcp-peers.sh`), its JSON output, its progress and its exit
//! codes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn investigate(config: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tarsy"))
        .arg("investigate")
        .arg(repo().join("examples/alerts/pod-crashloop.yaml"))
        .arg("--config")
        .arg(config)
        .args(extra)
        // A scripted provider must never need the LLM service.
        .env("TARSY_LLM_ADDR", "http://127.0.0.1:9")
        .env_remove("RUST_LOG")
        .output()
        .expect("run tarsy")
}

#[test]
fn example_investigation_prints_json_and_progress() {
    let out = investigate(&repo().join("examples/config"), &["--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}\n{stderr}", out.status);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object: {e}"));
    assert_eq!(report["status"], "completed");
    assert!(report["session_id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(
        report["final_analysis"]
            .as_str()
            .unwrap()
            .contains("Root cause")
    );
    assert!(
        report["executive_summary"]
            .as_str()
            .unwrap()
            .contains("checkout-api")
    );
    assert_eq!(report["stages"].as_array().unwrap().len(), 2);
    // --json keeps stderr free of progress; the text mode shows it.
    let out = investigate(&repo().join("examples/config"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stderr}");
    for expected in [
        "stage 1: triage",
        "TriageAgent · iteration 1",
        "calls time.get_current_time",
        "stage 2: root-cause",
        "session completed",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    assert!(stdout.contains("## Executive summary") && stdout.contains("## Final analysis"));
}

#[test]
fn failed_investigation_exits_non_zero() {
    // The example configuration with a script that has no answers: every
    // model call fails, so the first stage and the session fail.
    let dir = std::env::temp_dir().join(format!("tarsy-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["agents.yaml", "chain.yaml", "mcp-servers.yaml"] {
        std::fs::copy(repo().join("examples/config").join(file), dir.join(file)).unwrap();
    }
    std::fs::write(dir.join("empty-script.json"), "{}").unwrap();
    std::fs::write(
        dir.join("llm-providers.yaml"),
        "apiVersion: tarsy.dev/v1alpha1\nkind: LLMProvider\nmetadata: {name: demo-scripted}\n\
         spec: {type: scripted, model: none, script: empty-script.json}\n",
    )
    .unwrap();
    let out = investigate(&dir, &["--json"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["status"], "failed");
    assert!(report["error"].as_str().unwrap().contains("triage"));
}
