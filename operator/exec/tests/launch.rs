//! Launching one execution: the runbook named by the session reaches the
//! prompt, and the deadline stops the execution as timed out — whoever
//! launches it (local mode and the runner both go through the launcher).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tarsy_chain::{ExecutionStart, StageStart};
use tarsy_core::{ExecutionStatus, ResolvedAgentConfig};
use tarsy_engine::fallback::CircuitBreakers;
use tarsy_exec::runbook::runbook_source;
use tarsy_exec::{AgentInput, Assignment, Launcher, LlmRouter, records};
use tarsy_masking::MaskingService;
use tarsy_mcp::McpClientFactory;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer, ScriptedResponse};
use tarsy_store::{NewSession, Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// Serves `body` to every HTTP request on 127.0.0.1; returns its port.
async fn serve(body: &'static str) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = socket.read(&mut buf).await;
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/markdown\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
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
metadata: {name: Solo}
spec: {mcpServers: [], customInstructions: "Investigate."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: c}
spec:
  alertTypes: [T]
  llmProvider: p
  stages: [{name: one, agent: Solo}]
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
    let router = LlmRouter::new(&llm.endpoint(), ".").unwrap();
    let masking = Arc::new(MaskingService::new([], Default::default()).unwrap());
    Launcher {
        store: store.clone(),
        llm: Arc::new(router),
        mcp: Arc::new(McpClientFactory::new(Vec::new(), masking)),
        mcp_configs: BTreeMap::new(),
        publisher: Arc::new(tarsy_engine::memory::MemoryRecorder::new()),
        breakers: Arc::new(CircuitBreakers::default()),
        runbooks: Arc::new(runbook_source(domains)),
    }
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
