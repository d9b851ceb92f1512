//! `tarsy investigate` as a user runs it, with the real binary: the shipped
//! example on a fresh machine (nothing installed, an empty home, the tools
//! served by `tarsy mcp-replay` from a recorded snapshot), its progress,
//! JSON and exit codes, a missing MCP server command, and a session
//! exported with `tarsy export-fixture` and replayed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use tarsy_replay::{FixtureSet, ReplayServer};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tarsy() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tarsy"));
    // A scripted provider must never need the LLM service.
    cmd.env("TARSY_LLM_ADDR", "http://127.0.0.1:9")
        .env_remove("RUST_LOG")
        .env_remove("DATABASE_URL");
    cmd
}

fn investigate(config: &Path, extra: &[&str]) -> Output {
    tarsy()
        .arg("investigate")
        .arg(repo().join("examples/alerts/pod-crashloop.yaml"))
        .arg("--config")
        .arg(config)
        .args(extra)
        .output()
        .expect("run tarsy")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tarsy-{name}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json_report(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}\nstderr:\n{}",
        out.status,
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object: {e}\n{}", text(&out.stdout)))
}

/// Every tool call of a JSON report, asserting each one succeeded.
fn successful_tool_calls(report: &Value) -> Vec<String> {
    let calls = report["tool_calls"].as_array().expect("tool_calls");
    calls
        .iter()
        .map(|c| {
            assert_eq!(c["is_error"], false, "a tool call failed: {c}");
            format!(
                "{}.{}",
                c["server"].as_str().unwrap(),
                c["tool"].as_str().unwrap()
            )
        })
        .collect()
}

/// README's first command on a fresh machine: no PATH beyond the system's,
/// an empty home (no ~/.cache), no peers. Every tool call succeeds, the
/// progress and the report are on stdout, and stderr stays empty: no
/// warning, no log line, no colour code.
#[test]
fn the_first_run_works_on_a_fresh_machine() {
    let home = scratch("fresh-home");
    let run = |extra: &[&str]| {
        tarsy()
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &home)
            .env("TARSY_LLM_ADDR", "http://127.0.0.1:9")
            .current_dir(repo())
            .args([
                "investigate",
                "examples/alerts/pod-crashloop.yaml",
                "--config",
                "examples/config",
            ])
            .args(extra)
            .output()
            .expect("run tarsy")
    };
    let started = Instant::now();
    let out = run(&[]);
    let elapsed = started.elapsed();
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "exit {:?}\n{stderr}", out.status);
    assert_eq!(
        stderr, "",
        "nothing may be logged on a successful first run"
    );
    assert!(
        !stdout.contains('\u{1b}'),
        "no terminal codes in a pipe:\n{stdout}"
    );
    // Progress first, each tool call with a result, then the report.
    let mut at = 0;
    for expected in [
        "▶ stage 1: triage",
        "⚙ TriageAgent calls kubernetes.pods_describe",
        "→ Name: checkout-api-7d9f8b6c5-x2kqp",
        "⚙ TriageAgent calls prometheus.query_range",
        "▶ stage 2: root-cause",
        "⚙ RootCauseAgent calls kubernetes.resources_get",
        "■ session completed",
        "▶ stage 3: Scoring",
        "★ score 88/100 · failure tags: missed-available-tool",
        // The scripted provider is priced like a real model in the example.
        "**Cost:** $0.0",
        "## Executive summary",
        "## Final analysis",
        "CATALOG_PRELOAD=full",
        "## Score",
        "**88/100** (correct) · failure tags: missed-available-tool",
        "MISSING TOOLS:",
    ] {
        match stdout[at..].find(expected) {
            Some(i) => at += i,
            None => panic!("{expected:?} missing (or out of order) in:\n{stdout}"),
        }
    }
    assert!(!stdout.contains("Error"), "a tool call failed:\n{stdout}");
    // Every tool call's result comes right after the call, before the
    // agent's next iteration starts.
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("⚙ ") {
            assert!(
                lines.get(i + 1).is_some_and(|next| next.starts_with("→ ")),
                "the result of {line:?} is not the next line:\n{stdout}"
            );
        }
    }
    assert!(elapsed < Duration::from_secs(60), "took {elapsed:?}");

    // --json: one object on stdout; every tool call of the chain succeeded.
    let out = run(&["--json"]);
    assert_eq!(text(&out.stderr), "");
    let report = json_report(&out);
    assert_eq!(report["status"], "completed");
    assert_eq!(
        successful_tool_calls(&report),
        [
            "kubernetes.pods_describe",
            "kubernetes.events_list",
            "kubernetes.pods_log",
            "prometheus.query_range",
            "kubernetes.resources_list",
            "kubernetes.resources_get",
            "kubernetes.resources_get",
        ]
    );
    assert!(
        report["final_analysis"]
            .as_str()
            .unwrap()
            .contains("## Root cause")
    );
    assert!(
        report["executive_summary"]
            .as_str()
            .unwrap()
            .contains("checkout-api")
    );
    // The chain scores its sessions: the judge's stage follows the two
    // investigation stages, and the report waits for its score.
    let stages: Vec<&str> = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["triage", "root-cause", "Scoring"]);
    // What it cost: every call priced (investigation, summary, judge).
    let cost = &report["cost"];
    assert_eq!(cost["partial"], false, "{cost}");
    let usd = cost["usd"].as_f64().unwrap();
    assert!(usd > 0.01 && usd < 1.0, "{cost}");
    assert!(cost["calls"].as_i64().unwrap() >= 9, "{cost}");
    assert_eq!(report["score"]["status"], "completed", "{report:#}");
    assert_eq!(report["score"]["score"], 88);
    assert_eq!(report["score"]["outcome"], "correct");
    assert_eq!(
        report["score"]["failure_tags"],
        serde_json::json!(["missed-available-tool"])
    );
    assert!(
        report["score"]["tool_report"]
            .as_str()
            .unwrap()
            .starts_with("MISSING TOOLS:"),
        "{report:#}"
    );

    // --quiet: the report alone.
    let out = run(&["--quiet"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success());
    assert!(stdout.starts_with("# Investigation "), "{stdout}");
    assert!(!stdout.contains("▶ stage"));
    let _ = std::fs::remove_dir_all(&home);
}

/// The scripted answers say what the snapshot shows: every figure and name
/// the final analysis cites is in some recorded tool result.
#[test]
fn the_example_answers_cite_the_recorded_data() {
    let fixtures =
        FixtureSet::load(&repo().join("examples/fixtures/checkout-api-crashloop")).unwrap();
    let recorded: String = fixtures
        .servers
        .values()
        .flat_map(|f| f.tools.iter())
        .flat_map(|t| t.calls.iter().map(|c| c.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    let script =
        std::fs::read_to_string(repo().join("examples/scripts/pod-crashloop.yaml")).unwrap();
    for fact in [
        "2.15.0",
        "2.14.3",
        "CATALOG_PRELOAD",
        "full",
        "lazy",
        "182344",
        "160000",
        "243 MiB",
        "251 MiB",
        "247.9",
        "249.2",
        "256Mi",
        "137",
        "OOMKilled",
        "ProgressDeadlineExceeded",
        "worker-3",
        "Memory cgroup out of memory",
        "09:56:05",
        "09:58:12",
        "checkout-api-5c8b9d7f4",
        "preload the full catalog at start",
    ] {
        assert!(script.contains(fact), "the script does not use {fact:?}");
        assert!(
            recorded.contains(fact),
            "{fact:?} is not in the recorded data"
        );
    }
}

#[test]
fn a_failed_investigation_exits_non_zero() {
    // The example configuration with a script that has no answers: every
    // model call fails, so the first stage and the session fail.
    let dir = scratch("cli-failed");
    copy_example(&dir);
    std::fs::write(dir.join("config/empty-script.json"), "{}").unwrap();
    std::fs::write(
        dir.join("config/llm-providers.yaml"),
        "apiVersion: tarsy.dev/v1alpha1\nkind: LLMProvider\nmetadata: {name: demo-scripted}\n\
         spec: {type: scripted, model: none, script: empty-script.json}\n",
    )
    .unwrap();
    let out = investigate(&dir.join("config"), &["--json"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["status"], "failed");
    assert!(report["error"].as_str().unwrap().contains("triage"));
}

/// A stdio MCP server whose command does not exist stops the run before it
/// starts, with one line naming the server, the command and the way out.
#[test]
fn a_missing_mcp_server_command_fails_fast_in_one_line() {
    let dir = scratch("cli-missing");
    copy_example(&dir);
    std::fs::write(
        dir.join("config/mcp-servers.yaml"),
        "apiVersion: tarsy.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: kubernetes}\n\
         spec: {stdio: {command: kubernetes-mcp-server-not-installed, args: [--read-only]}}\n\
         ---\napiVersion: tarsy.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: prometheus}\n\
         spec: {stdio: {command: tarsy, args: [mcp-replay, ../fixtures/checkout-api-crashloop]}}\n",
    )
    .unwrap();
    let started = Instant::now();
    let out = investigate(&dir.join("config"), &[]);
    let elapsed = started.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(text(&out.stdout), "", "nothing ran");
    assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
    assert!(
        stderr.contains(
            "MCP server \"kubernetes\" cannot start: command \"kubernetes-mcp-server-not-installed\" is not on PATH; install it (see "
        ) && stderr.contains("or remove \"kubernetes\" from chain \"pod-crashloop\""),
        "{stderr}"
    );
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
}

/// A copy of the example (configuration, script, fixtures) in `dir`, laid
/// out as in the repository so relative paths keep working.
fn copy_example(dir: &Path) {
    for sub in ["config", "scripts", "fixtures/checkout-api-crashloop"] {
        let from = repo().join("examples").join(sub);
        let to = dir.join(sub);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

fn export(session: &str, db: &Path, out: &Path) {
    let result = tarsy()
        .args(["export-fixture", session, "--database-url"])
        .arg(format!("sqlite:{}", db.display()))
        .arg("--out")
        .arg(out)
        .output()
        .expect("run tarsy export-fixture");
    assert!(result.status.success(), "{}", text(&result.stderr));
    let written = text(&result.stdout);
    assert_eq!(
        written.lines().count(),
        2,
        "one file per server:\n{written}"
    );
}

/// The example session exported with `export-fixture`, then the chain run
/// again against `mcp-replay` of that export: the second session's tool
/// results are the first one's, which are the snapshot's.
#[test]
fn an_exported_session_replays_with_the_same_tool_results() {
    let dir = scratch("cli-export");
    let db = dir.join("first.db");
    let report = json_report(&investigate(
        &repo().join("examples/config"),
        &[
            "--json",
            "--database-url",
            &format!("sqlite:{}", db.display()),
        ],
    ));
    let first_calls = successful_tool_calls(&report);
    export(
        report["session_id"].as_str().unwrap(),
        &db,
        &dir.join("exported"),
    );

    // The same chain, its servers replaced by the exported fixture.
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    for file in ["agents.yaml", "chain.yaml"] {
        std::fs::copy(repo().join("examples/config").join(file), config.join(file)).unwrap();
    }
    std::fs::write(
        config.join("llm-providers.yaml"),
        format!(
            "apiVersion: tarsy.dev/v1alpha1\nkind: LLMProvider\nmetadata: {{name: demo-scripted}}\n\
             spec: {{type: scripted, model: demo, script: {}}}\n",
            repo().join("examples/scripts/pod-crashloop.yaml").display()
        ),
    )
    .unwrap();
    let servers: Vec<String> = ["kubernetes", "prometheus"]
        .iter()
        .map(|s| {
            format!(
                "apiVersion: tarsy.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: {s}}}\n\
                 spec: {{stdio: {{command: tarsy, args: [mcp-replay, ../exported, --server, {s}]}}}}\n"
            )
        })
        .collect();
    std::fs::write(config.join("mcp-servers.yaml"), servers.join("---\n")).unwrap();
    let db2 = dir.join("second.db");
    let replayed = json_report(&investigate(
        &config,
        &[
            "--json",
            "--database-url",
            &format!("sqlite:{}", db2.display()),
        ],
    ));
    assert_eq!(replayed["status"], "completed");
    assert_eq!(successful_tool_calls(&replayed), first_calls);
    export(
        replayed["session_id"].as_str().unwrap(),
        &db2,
        &dir.join("re-exported"),
    );

    let first = FixtureSet::load(&dir.join("exported")).unwrap();
    let second = FixtureSet::load(&dir.join("re-exported")).unwrap();
    let snapshot =
        FixtureSet::load(&repo().join("examples/fixtures/checkout-api-crashloop")).unwrap();
    assert_eq!(first.server_names(), ["kubernetes", "prometheus"]);
    for (name, a) in &first.servers {
        let b = &second.servers[name];
        assert_eq!(a.tools, b.tools, "server {name}: tools or results differ");
        // Tools as the snapshot defines them, results as it answers.
        let original = ReplayServer::new(snapshot.servers[name].clone());
        for (tool, recorded) in a.tools.iter().zip(&snapshot.servers[name].tools) {
            assert_eq!(tool.name, recorded.name);
            assert_eq!(tool.description, recorded.description);
            assert_eq!(tool.input_schema, recorded.input_schema);
            for call in &tool.calls {
                let answer = original.answer(&tool.name, &call.arguments).unwrap();
                let expected = answer.content[0].as_text().unwrap().text.clone();
                assert_eq!(call.text, expected, "{name}.{}", tool.name);
            }
        }
    }
    let calls: usize = first
        .servers
        .values()
        .flat_map(|f| &f.tools)
        .map(|t| t.calls.len())
        .sum();
    assert_eq!(calls, first_calls.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mcp-replay --port`: streamable HTTP, the URL on stdout, driven by
/// TARSy's MCP client; a fixture with a mistake is refused by name.
#[tokio::test]
async fn mcp_replay_serves_streamable_http_and_refuses_bad_fixtures() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use tarsy_core::config::{HttpTransport, TlsOptions};
    use tarsy_core::{McpServerConfig, McpTransport, SummarizationConfig};

    let mut child = tarsy()
        .arg("mcp-replay")
        .arg(repo().join("examples/fixtures/checkout-api-crashloop"))
        .args(["--server", "prometheus", "--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start mcp-replay");
    let mut url = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim().to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let client = tarsy_mcp::McpClient::new(
        [McpServerConfig {
            name: "prometheus".into(),
            transport: McpTransport::Http(HttpTransport {
                url,
                bearer_token: None,
                headers: Default::default(),
                tls: TlsOptions::default(),
                timeout: None,
            }),
            instructions: String::new(),
            summarization: SummarizationConfig::default(),
        }],
        tarsy_mcp::McpTimeouts::default(),
    );
    let tools = client.list_tools("prometheus").await.unwrap();
    assert_eq!(
        tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(),
        ["query", "query_range"]
    );
    let args = serde_json::json!({"query": "kube_pod_container_status_last_terminated_reason{namespace=\"shop\",container=\"checkout-api\"}"});
    match client
        .call_tool("prometheus", "query", args.as_object().unwrap().clone())
        .await
        .unwrap()
    {
        tarsy_mcp::client::CallOutcome::Completed { result: r, .. } => {
            assert_eq!(r.is_error, Some(false));
            assert!(r.content[0].as_text().unwrap().text.contains("OOMKilled"));
        }
        other => panic!("{other:?}"),
    }
    client.close().await;
    let _ = child.kill();
    let _ = child.wait();

    // Mistakes are named: the file, the place, the problem.
    let dir = scratch("bad-fixture");
    std::fs::write(
        dir.join("k8s.yaml"),
        "version: 1\nserver: k8s\ntools:\n- name: pods_get\n  calls:\n  - arguments: {name: a}\n    txt: oops\n",
    )
    .unwrap();
    let out = tarsy()
        .arg("mcp-replay")
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.starts_with(&format!(
            "error: {}: tools[0].calls[0]: unknown field `txt`",
            dir.join("k8s.yaml").display()
        )),
        "{stderr}"
    );
    let out = tarsy()
        .arg("mcp-replay")
        .arg(repo().join("examples/fixtures/checkout-api-crashloop"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        text(&out.stderr).contains(
            "records several MCP servers (kubernetes, prometheus): name one with --server"
        ),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
