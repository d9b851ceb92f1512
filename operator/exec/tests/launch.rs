//! Launching one execution: the runbook named by the session reaches the
//! prompt (a private one with the runbook token; a failed fetch is on the
//! timeline and a system warning), and the deadline stops the execution as
//! timed out — whoever launches it (local mode and the runner both go
//! through the launcher).

mod common;

use std::sync::Arc;
use std::time::Duration;

use tarsy_chain::{ExecutionStart, StageStart};
use tarsy_core::{ExecutionStatus, ResolvedAgentConfig};
use tarsy_exec::{AgentInput, Assignment, Launcher, records};
use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer, ScriptedResponse};
use tarsy_store::{NewSession, Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// Serves `body` to every HTTP request on 127.0.0.1; returns its port.
async fn serve(body: &'static str) -> u16 {
    serve_private(body, None).await
}

/// Serves `body` on 127.0.0.1 like a private repository: with `token`, only
/// to requests carrying it as a bearer token (404 otherwise, as GitHub
/// answers for private content). Returns its port.
async fn serve_private(body: &'static str, token: Option<&'static str>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let n = socket.read(&mut buf).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
            let allowed = token.is_none_or(|t| {
                request.contains(&format!("authorization: bearer {}", t.to_ascii_lowercase()))
            });
            let response = if allowed {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/markdown\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    .to_string()
            };
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    port
}

fn agent() -> ResolvedAgentConfig {
    let yaml = r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: p}
spec: {type: google, model: m, apiKeyEnv: K}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: solo}
spec: {displayName: Solo, mcpServers: [], customInstructions: "Investigate."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: c}
spec:
  alertTypes: [T]
  llmProvider: p
  stages: [{name: one, agent: solo}]
"#;
    let objects = tarsy_config::parse_config("t.yaml", yaml, &|_| None).unwrap();
    let config =
        tarsy_config::build_config(objects, &tarsy_config::DefaultsSpec::default()).unwrap();
    let chain = config.chain("c").unwrap();
    tarsy_exec::plan::resolve_execution(
        &config,
        &chain.spec,
        0,
        tarsy_core::StageKind::Investigation,
        1,
        None,
    )
    .unwrap()
}

async fn launcher(store: &Store, llm: &ScriptedLlmServer, domains: &[String]) -> Launcher {
    launcher_with_token(store, llm, domains, None, &[]).await
}

/// A launcher fetching runbooks from `domains` whose runbook token (if any)
/// goes to `token_domains`.
async fn launcher_with_token(
    store: &Store,
    llm: &ScriptedLlmServer,
    domains: &[String],
    token: Option<&str>,
    token_domains: &[&str],
) -> Launcher {
    let defaults = tarsy_config::Defaults {
        runbook_domains: domains.to_vec(),
        runbook_token_domains: token_domains.iter().map(|d| d.to_string()).collect(),
        ..Default::default()
    };
    common::launcher(store, llm, &defaults, token)
}

/// A session with one stage of one execution (`s-s1`, `s-s1-e1`).
async fn session(store: &Store, runbook_url: Option<String>) -> tarsy_store::Session {
    let session = store
        .create_session(NewSession {
            id: "s".into(),
            alert_data: "pod: web-1".into(),
            alert_type: "T".into(),
            chain_id: "c".into(),
            author: None,
            runbook_url,
            mcp_selection: None,
            memory_scope: None,
        })
        .await
        .unwrap()
        .record;
    let start = StageStart {
        db_index: 1,
        config_index: 0,
        kind: tarsy_core::StageKind::Investigation,
        name: "one".into(),
        success_policy: None,
        parallel_type: None,
        executions: vec![ExecutionStart {
            index: 1,
            agent_name: "Solo".into(),
            display_name: "Solo".into(),
            kind: tarsy_core::ExecutionKind::Investigation,
        }],
        previous_stages: Vec::new(),
        synthesis_of: None,
    };
    store
        .create_stage(records::stage_row("s", &start))
        .await
        .unwrap();
    store
        .create_agent_execution(records::execution_row("s", 1, &start.executions[0], None))
        .await
        .unwrap();
    session
}

#[tokio::test]
async fn the_sessions_runbook_reaches_the_prompt() {
    let port = serve("# Runbook\nCheck the memory limit of web-1 first.").await;
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::text("Done: the limit is too low."));
    let llm = ScriptedLlmServer::start(script.clone()).await.unwrap();
    let store = Store::sqlite_in_memory().await.unwrap();
    let session = session(&store, Some(format!("http://127.0.0.1:{port}/oom.md"))).await;
    let launcher = launcher(&store, &llm, &["127.0.0.1".into()]).await;
    let launched = launcher
        .run(
            Assignment::new(
                &session,
                "s-s1",
                "s-s1-e1",
                agent(),
                AgentInput::Investigation {
                    previous_stages: None,
                },
                tokio::time::Instant::now() + Duration::from_secs(60),
                CancellationToken::new(),
            ),
            None,
        )
        .await;
    assert_eq!(
        launched.result.status,
        ExecutionStatus::Completed,
        "{:?}",
        launched.result
    );
    let requests = script.requests();
    let prompt: String = requests[0]
        .request
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert!(
        prompt.contains("Check the memory limit of web-1 first."),
        "the runbook is not in the prompt:\n{prompt}"
    );
}

#[tokio::test]
async fn the_deadline_ends_the_execution_timed_out() {
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::text("too late").with_chunk_delay(Duration::from_secs(30)));
    let llm = ScriptedLlmServer::start(script.clone()).await.unwrap();
    let store = Store::sqlite_in_memory().await.unwrap();
    let session = session(&store, None).await;
    let launcher = launcher(&store, &llm, &[]).await;
    let launched = launcher
        .run(
            Assignment::new(
                &session,
                "s-s1",
                "s-s1-e1",
                agent(),
                AgentInput::Investigation {
                    previous_stages: None,
                },
                tokio::time::Instant::now() + Duration::from_millis(300),
                CancellationToken::new(),
            ),
            None,
        )
        .await;
    assert_eq!(
        launched.result.status,
        ExecutionStatus::TimedOut,
        "{:?}",
        launched.result
    );
}

fn investigation(session: &tarsy_store::Session) -> Assignment {
    Assignment::new(
        session,
        "s-s1",
        "s-s1-e1",
        agent(),
        AgentInput::Investigation {
            previous_stages: None,
        },
        tokio::time::Instant::now() + Duration::from_secs(60),
        CancellationToken::new(),
    )
}

fn prompt_of(script: &ScriptedLlm, call: usize) -> String {
    script.requests()[call]
        .request
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect()
}

/// Every log line of the test's thread, at every level and from every
/// crate (reqwest and hyper included).
#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Everything the store holds about session `s` that a user or the model
/// sees: timeline events, system warnings, the conversation.
async fn visible_text(store: &Store) -> String {
    let mut text = String::new();
    for e in store.session_timeline("s").await.unwrap() {
        text.push_str(&format!("{} {}\n", e.content, e.metadata));
    }
    for w in store
        .active_system_warnings(chrono::Utc::now())
        .await
        .unwrap()
    {
        text.push_str(&format!("{w:?}\n"));
    }
    for m in store.list_messages("s-s1-e1").await.unwrap() {
        text.push_str(&format!("{m:?}\n"));
    }
    text
}

/// A runbook in a private repository: fetched with the runbook token, which
/// goes only to the token's hosts. Without it the fetch fails: the
/// investigation still runs on the default runbook, and the failure is on
/// its timeline and a system warning (never showing the URL's query string
/// or a token); a later successful fetch clears the warning.
#[tokio::test]
async fn private_runbooks_need_the_token_and_a_failed_fetch_is_visible() {
    // The test runs on one thread (tokio's current-thread runtime): its
    // subscriber sees every task the test starts.
    let logs = Logs::default();
    let writer = logs.clone();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish(),
    );
    let port = serve_private("# Private runbook\nDrain node-7 first.", Some("ghp_right")).await;
    let url = format!("http://127.0.0.1:{port}/private.md?ref=main");
    let script = ScriptedLlm::new();
    for _ in 0..3 {
        script.push(ScriptedResponse::text("Done."));
    }
    let llm = ScriptedLlmServer::start(script.clone()).await.unwrap();
    let domains = ["127.0.0.1".to_string()];

    // A token the server refuses: 404, and the token is nowhere to be seen.
    let store = Store::sqlite_in_memory().await.unwrap();
    let session_1 = session(&store, Some(url.clone())).await;
    let launched = launcher_with_token(&store, &llm, &domains, Some("ghp_wrong"), &["127.0.0.1"])
        .await
        .run(investigation(&session_1), None)
        .await;
    assert_eq!(launched.result.status, ExecutionStatus::Completed);
    assert!(!prompt_of(&script, 0).contains("Drain node-7 first."));
    let timeline = store.session_timeline("s").await.unwrap();
    let problem = timeline
        .iter()
        .find(|e| e.metadata["kind"] == "runbook_unavailable")
        .unwrap_or_else(|| panic!("no runbook event on the timeline: {timeline:#?}"));
    assert_eq!(problem.event_type, tarsy_core::TimelineEventType::Error);
    assert!(problem.content.contains("404"), "{}", problem.content);
    assert!(!problem.content.contains("ref=main"), "{}", problem.content);
    let warnings = store
        .active_system_warnings(chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].category, "runbook");
    assert!(
        warnings[0]
            .message
            .contains(&format!("127.0.0.1:{port}/private.md"))
    );
    let seen = visible_text(&store).await + &prompt_of(&script, 0);
    assert!(!seen.contains("ref=main"), "{seen}");
    assert!(!seen.contains("ghp_wrong"), "{seen}");

    // The right token, but the host is not one of the token's: not sent.
    let store_2 = Store::sqlite_in_memory().await.unwrap();
    let session_2 = session(&store_2, Some(url.clone())).await;
    launcher_with_token(&store_2, &llm, &domains, Some("ghp_right"), &["github.com"])
        .await
        .run(investigation(&session_2), None)
        .await;
    assert!(!prompt_of(&script, 1).contains("Drain node-7 first."));
    assert!(
        store_2
            .session_timeline("s")
            .await
            .unwrap()
            .iter()
            .any(|e| e.metadata["kind"] == "runbook_unavailable")
    );

    // The right token to its host: the runbook reaches the prompt and the
    // warning (raised by an earlier fetch) goes.
    let store_3 = Store::sqlite_in_memory().await.unwrap();
    let session_3 = session(&store_3, Some(url.clone())).await;
    store_3
        .raise_system_warning(
            &warnings[0].id,
            "runbook",
            &warnings[0].message,
            "",
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let launched = launcher_with_token(&store_3, &llm, &domains, Some("ghp_right"), &["127.0.0.1"])
        .await
        .run(investigation(&session_3), None)
        .await;
    assert_eq!(launched.result.status, ExecutionStatus::Completed);
    assert!(
        prompt_of(&script, 2).contains("Drain node-7 first."),
        "the private runbook is not in the prompt"
    );
    assert!(
        store_3
            .active_system_warnings(chrono::Utc::now())
            .await
            .unwrap()
            .is_empty()
    );
    let seen = visible_text(&store_3).await + &prompt_of(&script, 2);
    assert!(!seen.contains("runbook_unavailable"), "{seen}");
    assert!(!seen.contains("ghp_right"), "{seen}");

    // The failures were logged, without a token.
    let logged = logs.text();
    assert!(logged.contains("runbook not (fully) used"), "{logged}");
    assert!(!logged.contains("ghp_"), "{logged}");
}
