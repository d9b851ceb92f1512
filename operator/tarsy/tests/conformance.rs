//! One investigation flow: the same scenario through local mode (the
//! in-process app) and through cluster mode (the real `tarsy controller`,
//! real `tarsy runner` pods on the Kubernetes API emulator, or a real
//! cluster with `KUBECONFIG`), compared record by record in Postgres.
//!
//! The scenario covers what the reference's own pipeline scenario does:
//! parallel agents (native thinking with a summarized tool result; ReAct
//! forced to conclude at its iteration limit) with a `synthesis`, replicas
//! (written `agents: [{name: X}]` + `replicas: N`) with a
//! `synthesis-native-thinking`, a final agent with Google Search grounding,
//! the executive summary, the judge's score, two chat turns (the second
//! calls a tool), then a re-score whose judge gives no score (a failed
//! attempt) while a second re-score is refused. The alert names a runbook
//! served by a local HTTP server.
//!
//! Both modes must produce the same stage list with kinds, the same per-agent
//! timeline event types in the same order, the same LLM and MCP interaction
//! counts, the same chat prompts, and the runbook in the investigators'
//! prompts. Ids and times aside, nothing may differ.
//!
//! Each mode gets its own scripted LLM service (one server per mode, so the
//! answers are handed out the same way whichever process asks) and shares
//! one test MCP server. On a real cluster (`KUBECONFIG`, see
//! `cluster_e2e.rs` for the variables) pods must reach this machine: set
//! `TARSY_E2E_HOST` to its address as pods see it.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use common::{ClusterScene, apply_yaml, poll};
use kube::api::Api;
use serde_json::{Value, json};
use tarsy_core::ScoreStatus;
use tarsy_core::control::{ChatSubmission, NewAlert, ScoreError, SessionControl};
use tarsy_crds::{Alert, AlertPhase};
use tarsy_e2e::fake_slack::FakeSlack;
use tarsy_scripted_llm::{ScriptedChunk, ScriptedLlm, ScriptedLlmServer, ScriptedResponse};
use tarsy_store::Store;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const RUNBOOK: &str =
    "# OOM runbook\nCompare the container's memory limit with its working set first.";
const ALERT_DATA: &str = "pod: web-1\nnamespace: shop\nreason: OOMKilled";
const QUESTIONS: [&str; 2] = ["Why did it crash?", "What limit should I set?"];

/// Agents, the chain and its MCP server and provider, as both modes read
/// them (`{MCP_URL}` is the test MCP server).
const MANIFESTS: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: conformance-llm}
spec: {type: google, model: conformance-model, apiKeyEnv: TEST_KEY}
---
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: testmcp}
spec:
  url: "{MCP_URL}"
  instructions: Test tools for the conformance scenario.
  summarization: {sizeThresholdTokens: 300, summaryMaxTokenLimit: 200}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: alpha}
spec: {mcpServers: [testmcp], customInstructions: "You are Alpha. Read the logs."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: bravo}
spec: {mcpServers: [testmcp], customInstructions: "You are Bravo. Read the events."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: charlie}
spec: {mcpServers: [testmcp], customInstructions: "You are Charlie."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: delta}
spec: {mcpServers: [testmcp], customInstructions: "You are Delta. Conclude."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: synth-one}
spec: {customInstructions: "You are SynthOne."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: synth-two}
spec: {customInstructions: "You are SynthTwo."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: conformance}
spec:
  alertTypes: [Conformance]
  llmProvider: conformance-llm
  iterationStrategy: native-thinking
  mcpServers: [testmcp]
  stages:
  - name: parallel
    agents: [{name: alpha}, {name: bravo, iterationStrategy: react, maxIterations: 1}]
    synthesis: {agent: synth-one, iterationStrategy: synthesis}
  - name: replicas
    agents: [{name: charlie}]
    replicas: 2
    synthesis: {agent: synth-two, iterationStrategy: synthesis-native-thinking}
  - name: final
    agent: delta
  scoring: {enabled: true}
"#;

/// The judge's first answer (a score) and its tool report.
const ASSESSMENT: &str = "## Outcome\nCorrect: the 256Mi limit explains the OOM kills.\n\n\
                          VERDICT: correct\nFAILURE TAGS: incomplete-evidence\nSCORE: 81";
const TOOL_REPORT: &str = "MISSING TOOLS:\n- memory history: how the working set grew\n\n\
                           HARD TO USE:\n- none";

/// Routing keys: each agent's instructions name it; the summarization and
/// executive-summary prompts open with these words.
const SUMMARIZER: &str = "You condense the output of a tool";
const EXEC_SUMMARY: &str = "You write executive summaries";

fn script() -> ScriptedLlm {
    let s = ScriptedLlm::new();
    s.push_route(
        "You are Alpha",
        ScriptedResponse::default()
            .then_thinking("The pod logs are big; fetch them.")
            .then_tool_call("a1", "testmcp__large_output", r#"{"bytes":6000}"#)
            .then_usage(120, 30),
    )
    .push_route(
        SUMMARIZER,
        ScriptedResponse::text("SUMMARY: 6000 bytes of filler, no errors.").then_usage(400, 12),
    )
    .push_route(
        "You are Alpha",
        ScriptedResponse::text("Alpha: logs are clean; OOM kills come from the limit."),
    )
    .push_route(
        "You are Bravo",
        ScriptedResponse::text(
            "Thought: The events will show the kills.\nAction: testmcp.echo\nAction Input: {\"text\": \"OOMKilled x5\"}",
        ),
    )
    // Iteration limit reached: the forced conclusion.
    .push_route(
        "You are Bravo",
        ScriptedResponse::text(
            "Thought: Enough evidence.\nFinal Answer: Bravo: five OOM kills, limit 256Mi.",
        ),
    )
    .push_route(
        "You are SynthOne",
        ScriptedResponse::text("SYNTH-1: OOM kills caused by a 256Mi limit."),
    )
    .push_route(
        "You are Charlie",
        ScriptedResponse::text("Charlie: raise the limit."),
    )
    .push_route(
        "You are Charlie",
        ScriptedResponse::text("Charlie: raise the limit."),
    )
    .push_route(
        "You are SynthTwo",
        ScriptedResponse::default()
            .then_thinking("Both replicas agree.")
            .then_text("SYNTH-2: raise the limit to 512Mi."),
    )
    .push_route(
        "You are Delta",
        ScriptedResponse::default()
            .then_thinking("Combine both syntheses.")
            .then(ScriptedChunk::GoogleSearch {
                queries: vec!["kubernetes OOMKilled memory limit".into()],
                sources: vec![(
                    "https://kubernetes.io/docs/tasks/configure-pod-container/assign-memory-resource/"
                        .into(),
                    "Assign Memory Resources".into(),
                )],
            })
            .then_text("FINAL: raise the memory limit to 512Mi."),
    )
    .push_route(
        EXEC_SUMMARY,
        ScriptedResponse::text("EXEC: OOM kills; raise the limit."),
    )
    .push_route(
        "ChatAgent",
        ScriptedResponse::text("CHAT-1: the limit is 256Mi."),
    )
    .push_route(
        "ChatAgent",
        ScriptedResponse::default().then_tool_call(
            "c1",
            "testmcp__echo",
            r#"{"text":"limit 256Mi"}"#,
        ),
    )
    .push_route(
        "ChatAgent",
        ScriptedResponse::text("CHAT-2: set it to 512Mi."),
    )
    .push_route("ScoringAgent", ScriptedResponse::text(ASSESSMENT))
    .push_route("ScoringAgent", ScriptedResponse::text(TOOL_REPORT))
    // The re-score: an answer without a score, slow enough for a second
    // request to find it running.
    .push_route(
        "ScoringAgent",
        ScriptedResponse::text("It all looks reasonable.")
            .with_chunk_delay(Duration::from_millis(500)),
    )
    .push_route("ScoringAgent", ScriptedResponse::text(TOOL_REPORT));
    s
}

/// Waits until the session has `attempts` scoring attempts, all ended.
async fn scored(store: &Store, session_id: &str, attempts: usize, secs: u64) {
    poll(secs, async || {
        let all = store.session_scores(session_id).await.ok()?;
        (all.len() == attempts && all.iter().all(|a| a.status != ScoreStatus::InProgress))
            .then_some(())
    })
    .await
    .unwrap_or_else(|()| panic!("scoring attempt {attempts} did not end within {secs}s"));
}

/// A re-score is accepted, and a second one refused while the judge works;
/// then waits for it.
async fn rescore(control: &dyn SessionControl, store: &Store, session_id: &str, secs: u64) {
    control
        .rescore(session_id)
        .await
        .unwrap_or_else(|e| panic!("re-score: {e}"));
    let busy = control.rescore(session_id).await;
    assert!(
        matches!(busy, Err(ScoreError::Busy { .. })),
        "a second re-score while the judge works: {busy:?}"
    );
    scored(store, session_id, 2, secs).await;
}

/// Serves the runbook over HTTP on `addr` until the test ends.
async fn serve_runbook(addr: SocketAddr) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let bound = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/markdown\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{RUNBOOK}",
                    RUNBOOK.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            });
        }
    });
    bound
}

/// What both modes share: the MCP server, the runbook, the host pods reach.
struct World {
    host: String,
    bind: std::net::IpAddr,
    mcp: tarsy_test_mcp_server::HttpServer,
    runbook_url: String,
}

impl World {
    async fn start() -> Self {
        let cluster = std::env::var("KUBECONFIG").is_ok_and(|v| !v.is_empty());
        let host = std::env::var("TARSY_E2E_HOST")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "127.0.0.1".into());
        // On a real cluster pods connect from elsewhere.
        let bind: std::net::IpAddr = if cluster && host != "127.0.0.1" {
            [0, 0, 0, 0].into()
        } else {
            [127, 0, 0, 1].into()
        };
        let mcp = tarsy_test_mcp_server::spawn_http((bind, 0).into())
            .await
            .unwrap();
        let runbook = serve_runbook((bind, 0).into()).await;
        Self {
            runbook_url: format!("http://{host}:{}/oom.md", runbook.port()),
            mcp,
            host,
            bind,
        }
    }

    fn mcp_url(&self) -> String {
        self.mcp.url().replace("127.0.0.1", &self.host)
    }

    fn manifests(&self) -> String {
        MANIFESTS.replace("{MCP_URL}", &self.mcp_url())
    }

    async fn llm(&self) -> ScriptedLlmServer {
        ScriptedLlmServer::start_on((self.bind, 0).into(), script())
            .await
            .unwrap()
    }

    fn llm_addr(&self, llm: &ScriptedLlmServer) -> String {
        format!("http://{}:{}", self.host, llm.addr().port())
    }

    fn alert(&self) -> NewAlert {
        NewAlert {
            alert_type: "Conformance".into(),
            data: ALERT_DATA.into(),
            chain: None,
            runbook_url: Some(self.runbook_url.clone()),
            mcp_selection: None,
            author: "conformance".into(),
        }
    }
}

/// Waits for chat stage `stage_id` to end.
async fn chat_ended(store: &Store, stage_id: &str, secs: u64) {
    poll(secs, async || {
        let stage = store.get_stage(stage_id).await.ok()?;
        stage.status.is_terminal().then_some(())
    })
    .await
    .unwrap_or_else(|()| panic!("chat stage {stage_id} did not end within {secs}s"));
}

/// Asks both questions, one after the other.
async fn chat(control: &dyn SessionControl, store: &Store, session_id: &str, secs: u64) {
    for question in QUESTIONS {
        let accepted = control
            .submit_chat_message(ChatSubmission {
                session_id: session_id.into(),
                content: question.into(),
                author: "conformance".into(),
            })
            .await
            .unwrap_or_else(|e| panic!("chat {question:?}: {e}"));
        chat_ended(store, &accepted.stage_id, secs).await;
    }
}

/// The session as the comparison sees it: no ids, no times.
struct Shape {
    document: Value,
    /// Every prompt (system + user), by the agent's display name.
    prompts: BTreeMap<String, Vec<String>>,
}

async fn shape(store: &Store, session_id: &str) -> Shape {
    let session = store.get_session(session_id).await.unwrap();
    let trace = store.session_trace(session_id).await.unwrap();
    let timeline = store.session_timeline(session_id).await.unwrap();
    let mut prompts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut stages = Vec::new();
    for stage in store.list_stages(session_id).await.unwrap() {
        let mut executions = Vec::new();
        for e in store.list_agent_executions(&stage.id).await.unwrap() {
            let mut events: Vec<_> = timeline
                .iter()
                .filter(|t| t.scope.execution_id.as_deref() == Some(e.id.as_str()))
                .collect();
            events.sort_by_key(|t| t.sequence_number);
            let traced = trace
                .stages
                .iter()
                .flat_map(|s| &s.executions)
                .find(|t| t.execution_id == e.id);
            let mut llm = Vec::new();
            let mut mcp = Vec::new();
            if let Some(t) = traced {
                for i in &t.llm_interactions {
                    llm.push(i.interaction_type.as_str().to_string());
                    // What the call was sent: the conversation up to its
                    // last message (the summarization calls carry theirs).
                    let full = store.get_llm_interaction(&i.id).await.unwrap();
                    let text: Vec<String> = match &full.last_message_id {
                        Some(last) => store
                            .list_messages_up_to(last)
                            .await
                            .unwrap()
                            .into_iter()
                            .map(|m| m.content)
                            .collect(),
                        None => full.llm_request["messages"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|m| m["content"].as_str().map(str::to_string))
                            .collect(),
                    };
                    assert!(
                        !text.is_empty(),
                        "{}: a call without a prompt",
                        e.agent_name
                    );
                    prompts
                        .entry(format!("{} #{}", e.agent_name, stage.stage_index))
                        .or_default()
                        .push(text.join("\n---\n"));
                }
                for i in &t.mcp_interactions {
                    mcp.push(format!(
                        "{} {}.{}",
                        i.interaction_type.as_str(),
                        i.server_name,
                        i.tool_name
                    ));
                }
            }
            executions.push(json!({
                "agent": e.agent_name,
                "index": e.agent_index,
                "kind": e.kind.as_str(),
                "strategy": e.iteration_strategy.as_str(),
                "status": e.status.as_str(),
                "events": events
                    .iter()
                    .map(|t| format!("{} ({})", t.event_type.as_str(), t.status.as_str()))
                    .collect::<Vec<_>>(),
                "forced_conclusion": events.iter().any(|t| t.metadata["forced_conclusion"] == true),
                "llm_interactions": llm,
                "mcp_interactions": mcp,
            }));
        }
        stages.push(json!({
            "index": stage.stage_index,
            "name": stage.stage_name,
            "kind": stage.kind.as_str(),
            "status": stage.status.as_str(),
            "executions": executions,
        }));
    }
    let scores: Vec<Value> = store
        .session_scores(session_id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| {
            json!({
                "attempt": a.attempt,
                "status": a.status.as_str(),
                "score": a.score,
                "outcome": a.outcome,
                "failure_tags": a.failure_tags,
                "tool_report": a.tool_report,
                "error": a.error,
            })
        })
        .collect();
    let session_events: Vec<String> = timeline
        .iter()
        .filter(|t| t.scope.execution_id.is_none())
        .map(|t| t.event_type.as_str().to_string())
        .collect();
    Shape {
        document: json!({
            "status": session.status.as_str(),
            "final_analysis": session.final_analysis,
            "executive_summary": session.executive_summary,
            "stages": stages,
            "session_events": session_events,
            "scores": scores,
            "score": session.score,
            "session_llm_interactions": trace
                .session_interactions
                .iter()
                .map(|i| i.interaction_type.as_str())
                .collect::<Vec<_>>(),
        }),
        prompts,
    }
}

/// The Slack bot token both modes post with (to the fake).
const SLACK_TOKEN: &str = "xoxb-conformance-0000";

/// The judge's verdicts as replied in the session's Slack thread, oldest
/// first: the two attempts' ends (a score, then the failed re-score).
async fn slack_score_replies(slack: &FakeSlack) -> Vec<String> {
    let replies = || {
        slack
            .posted()
            .into_iter()
            .filter(|p| p.thread_ts.is_some() && p.text.contains("The judge"))
            .map(|p| p.text)
            .collect::<Vec<_>>()
    };
    poll(30, async || Some(replies()).filter(|r| r.len() >= 2))
        .await
        .unwrap_or_else(|()| {
            panic!(
                "the score replies did not reach Slack: {:?}",
                slack.posted()
            )
        })
}

/// The sample `series` of a metrics page (0 when absent).
fn sample(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// The scoring attempts counted on a metrics page, by outcome.
fn scoring_attempts(page: &str) -> [f64; 2] {
    ["completed", "failed"].map(|o| {
        sample(
            page,
            &format!("tarsy_scoring_attempts_total{{outcome=\"{o}\"}}"),
        )
    })
}

/// Local mode: the in-process app on its own database.
async fn local_run(world: &World) -> Shape {
    let db = common::test_database("tarsy_conformance_local").await;
    let llm = world.llm().await;
    let objects = tarsy_config::parse_config("conformance.yaml", &world.manifests(), &|_| None)
        .unwrap_or_else(|e| panic!("{e}"));
    let defaults = tarsy_config::DefaultsSpec {
        runbook_domains: Some(vec![world.host.clone()]),
        ..Default::default()
    };
    let config = tarsy_config::build_config(objects, &defaults).unwrap_or_else(|e| panic!("{e}"));
    let mut options = tarsy_local::LocalOptions::new(config, std::env::temp_dir());
    options.database_url = db.url().to_string();
    options.llm_addr = world.llm_addr(&llm);
    options.pod_id = "conformance".into();
    let slack = FakeSlack::start().await;
    options.slack = Some(tarsy_exec::notify::SlackSettings {
        token: tarsy_core::SecretValue::new(SLACK_TOKEN),
        channel: "#conformance".into(),
        api_url: slack.api_url(),
        dashboard_url: None,
        notify_start: false,
        timeout: Duration::from_secs(5),
    });
    // This process's registry: counted before and after.
    let counted_before = scoring_attempts(&tarsy_telemetry::global().encode(""));
    let app = tarsy_local::LocalApp::start(options).await.unwrap();
    let control = app.control();
    let accepted = control.submit_alert(world.alert()).await.unwrap();
    let session = app
        .wait_for_terminal(&accepted.session_id, Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(session.status.as_str(), "completed", "{session:?}");
    scored(app.store(), &session.id, 1, 60).await;
    chat(control.as_ref(), app.store(), &session.id, 120).await;
    rescore(control.as_ref(), app.store(), &session.id, 60).await;
    let mut shape = shape(app.store(), &session.id).await;
    shape.document["slack_score_replies"] = json!(slack_score_replies(&slack).await);
    let counted = poll(30, async || {
        let now = scoring_attempts(&tarsy_telemetry::global().encode(""));
        let counted = [now[0] - counted_before[0], now[1] - counted_before[1]];
        (counted[0] + counted[1] >= 2.0).then_some(counted)
    })
    .await
    .unwrap_or_else(|()| panic!("local mode did not count the two scoring attempts"));
    shape.document["scoring_attempts_counted"] = json!(counted);
    assert_eq!(
        llm.script().remaining(),
        0,
        "local mode used every scripted answer"
    );
    app.shutdown().await;
    let _ = db.drop_database().await;
    shape
}

/// Cluster mode: the real operator and runner pods, the cluster API's
/// session control for alerts and chat.
async fn cluster_run(world: &World) -> Shape {
    let scene = ClusterScene::start("conformance").await;
    let (client, ns, store) = (scene.client.clone(), scene.ns.clone(), scene.store.clone());
    let llm = world.llm().await;
    let slack = FakeSlack::start().await;
    apply_yaml(&client, &ns, &world.manifests()).await;
    let controller = scene.controller(
        vec![
            ("TARSY_RUNBOOK_DOMAINS".into(), world.host.clone()),
            ("TARSY_SLACK_BOT_TOKEN".into(), SLACK_TOKEN.into()),
            ("TARSY_SLACK_CHANNEL".into(), "#conformance".into()),
            ("TARSY_SLACK_API_URL".into(), slack.api_url()),
        ],
        world.llm_addr(&llm),
    );

    let control = tarsy_cluster_control::KubeSessionControl::new(
        client.clone(),
        store.clone(),
        ns.clone(),
        tarsy_config::Defaults::default(),
    );
    let accepted = control.submit_alert(world.alert()).await.unwrap();
    let alerts: Api<Alert> = Api::namespaced(client.clone(), &ns);
    let session_id = accepted.session_id.clone();
    let phase = poll(180, async || {
        let alert = alerts
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|a| a.metadata.uid.as_deref() == Some(session_id.as_str()))?;
        let phase = alert.status.as_ref()?.phase?;
        phase.is_terminal().then_some(phase)
    })
    .await
    .unwrap_or_else(|()| {
        panic!(
            "the Alert did not end within 180s; operator log:\n{}",
            common::tail(&controller.log, 40)
        )
    });
    assert_eq!(
        phase,
        AlertPhase::Completed,
        "operator log:\n{}",
        common::tail(&controller.log, 40)
    );
    // The operator records the end in Postgres right after the status.
    poll(30, async || {
        store
            .get_session(&session_id)
            .await
            .ok()
            .filter(|s| s.status.is_terminal())
    })
    .await
    .unwrap_or_else(|()| panic!("the session row did not end"));
    scored(&store, &session_id, 1, 180).await;
    chat(&control, &store, &session_id, 180).await;
    rescore(&control, &store, &session_id, 180).await;
    let mut shape = shape(&store, &session_id).await;
    shape.document["slack_score_replies"] = json!(slack_score_replies(&slack).await);
    // The operator counts what the judge's pods ended, from the Alert.
    let port = controller.metrics_port;
    let counted = poll(30, async || {
        let page = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        let counted = scoring_attempts(&page);
        (counted[0] + counted[1] >= 2.0).then_some(counted)
    })
    .await
    .unwrap_or_else(|()| panic!("the operator did not count the two scoring attempts"));
    shape.document["scoring_attempts_counted"] = json!(counted);
    assert_eq!(
        llm.script().remaining(),
        0,
        "cluster mode used every scripted answer"
    );
    scene.finish(controller).await;
    shape
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_and_cluster_mode_run_the_same_investigation() {
    let world = World::start().await;
    let local = local_run(&world).await;
    let cluster = cluster_run(&world).await;

    // The scenario is what it says it is.
    let doc = &local.document;
    assert_eq!(doc["status"], "completed");
    let kinds: Vec<(&str, &str)> = doc["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("parallel", "investigation"),
            ("parallel - Synthesis", "synthesis"),
            ("replicas", "investigation"),
            ("replicas - Synthesis", "synthesis"),
            ("final", "investigation"),
            ("Scoring", "scoring"),
            ("Chat Response", "chat"),
            ("Chat Response", "chat"),
            ("Scoring", "scoring"),
        ],
        "{doc:#}"
    );
    // The judge scored the investigation; the re-score's answer had no
    // score: a failed attempt that says why, the first score kept.
    assert_eq!(
        doc["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (
                a["attempt"].as_u64().unwrap(),
                a["status"].as_str().unwrap()
            ))
            .collect::<Vec<_>>(),
        [(2, "failed"), (1, "completed")],
        "{doc:#}"
    );
    assert_eq!(doc["scores"][1]["score"], 81);
    assert_eq!(
        doc["scores"][1]["failure_tags"],
        json!(["incomplete-evidence"])
    );
    assert_eq!(doc["scores"][1]["tool_report"], TOOL_REPORT);
    assert_eq!(
        doc["scores"][0]["error"],
        "the judge gave no score (expected a line `SCORE: <0-100>`)"
    );
    assert_eq!(
        doc["score"],
        json!({"status": "failed", "score": 81, "failure_tags": ["incomplete-evidence"]})
    );
    let bravo = &doc["stages"][0]["executions"][1];
    assert_eq!(bravo["strategy"], "react");
    assert_eq!(bravo["forced_conclusion"], true, "{bravo:#}");
    assert_eq!(doc["session_events"], json!(["executive_summary"]));
    // Each attempt's end is replied in the session's Slack thread and
    // counted in the metrics of the process a user scrapes.
    let replies: Vec<&str> = doc["slack_score_replies"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(replies.len(), 2, "{doc:#}");
    assert!(
        replies[0].starts_with(
            ":bar_chart: The judge scored this investigation *81/100* (incomplete-evidence)"
        ),
        "{doc:#}"
    );
    assert!(
        replies[1].starts_with(
            ":grey_question: The judge could not score this investigation: the judge gave no score"
        ),
        "{doc:#}"
    );
    assert_eq!(doc["scoring_attempts_counted"], json!([1.0, 1.0]));

    // Both modes: the same records, ids and times aside.
    assert_eq!(
        local.document, cluster.document,
        "local:\n{:#}\ncluster:\n{:#}",
        local.document, cluster.document
    );
    // The same prompts, chat turns included.
    assert_eq!(local.prompts.len(), cluster.prompts.len());
    for (agent, prompts) in &local.prompts {
        assert_eq!(
            Some(prompts),
            cluster.prompts.get(agent),
            "prompts of {agent} differ between the modes"
        );
    }
    // The runbook reached every investigator in both modes; a chat answer
    // works from the history instead.
    for shape in [&local, &cluster] {
        for (agent, prompts) in &shape.prompts {
            let has_runbook = prompts[0].contains("Compare the container's memory limit");
            let investigator = ["alpha", "bravo", "charlie", "delta"]
                .iter()
                .any(|a| agent.starts_with(a));
            if investigator {
                assert!(
                    has_runbook,
                    "{agent}'s prompt has no runbook:\n{}",
                    prompts[0]
                );
            }
        }
    }
    let chat_prompts: Vec<&String> = local
        .prompts
        .iter()
        .filter(|(agent, _)| agent.starts_with("ChatAgent"))
        .map(|(_, p)| &p[0])
        .collect();
    assert_eq!(chat_prompts.len(), 2);
    // The second turn's history holds the first exchange; its question is
    // asked once.
    assert!(chat_prompts[1].contains("**Q1:** Why did it crash?"));
    assert_eq!(chat_prompts[1].matches(QUESTIONS[1]).count(), 1);
}

// ------------------------------------------------------------ failure paths

/// The failure paths, one chain each, run one after the other in each mode:
/// an agent whose configuration does not resolve (its Agent does not exist)
/// beside one that works, under policy `any` (the stage goes on) and `all`
/// (the session fails); an agent whose provider refuses it; a session that
/// times out; a session cancelled while its second stage runs.
const FAILURE_MANIFESTS: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: conformance-llm}
spec: {type: google, model: conformance-model, apiKeyEnv: TEST_KEY}
---
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: testmcp}
spec:
  url: "{MCP_URL}"
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: echo}
spec: {mcpServers: [testmcp], customInstructions: "You are Echo."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: refused}
spec: {customInstructions: "You are Refused."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: slow}
spec: {customInstructions: "You are Slow."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: merger}
spec: {customInstructions: "You are Merger."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: unresolved-any}
spec:
  alertTypes: [UnresolvedAny]
  llmProvider: conformance-llm
  stages:
  - name: look
    successPolicy: any
    agents: [{name: echo}, {name: ghost}]
    synthesis: {agent: merger, iterationStrategy: synthesis}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: unresolved-all}
spec:
  alertTypes: [UnresolvedAll]
  llmProvider: conformance-llm
  stages:
  - name: look
    successPolicy: all
    agents: [{name: echo}, {name: ghost}]
  - name: never
    agent: echo
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: failing-agent}
spec:
  alertTypes: [FailingAgent]
  llmProvider: conformance-llm
  stages:
  - name: look
    successPolicy: any
    agents: [{name: echo}, {name: refused}]
    synthesis: {agent: merger, iterationStrategy: synthesis}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: times-out}
spec:
  alertTypes: [TimesOut]
  llmProvider: conformance-llm
  sessionTimeout: 6s
  stages:
  - name: wait
    agent: slow
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: cancelled}
spec:
  alertTypes: [Cancelled]
  llmProvider: conformance-llm
  stages:
  - name: first
    agent: echo
  - name: second
    agent: slow
---
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: priced-llm}
spec:
  type: google
  model: priced-model
  apiKeyEnv: TEST_KEY
  pricing: {inputPerMillion: 2.0, outputPerMillion: 10.0}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: budget-spent}
spec:
  alertTypes: [BudgetSpent]
  llmProvider: priced-llm
  budget: {maxCostUsd: 0.01}
  stages:
  - name: look
    agent: echo
  - name: never
    agent: echo
"#;

/// A failure-path scenario: its alert type and how its session ends.
struct FailureCase {
    alert_type: &'static str,
    status: &'static str,
    /// Cancel once this stage record is active and this many model calls
    /// of the case were made (the last one hangs).
    cancel_at_stage: Option<(i64, usize)>,
}

const FAILURE_CASES: [FailureCase; 6] = [
    FailureCase {
        alert_type: "UnresolvedAny",
        status: "completed",
        cancel_at_stage: None,
    },
    FailureCase {
        alert_type: "UnresolvedAll",
        status: "failed",
        cancel_at_stage: None,
    },
    FailureCase {
        alert_type: "FailingAgent",
        status: "completed",
        cancel_at_stage: None,
    },
    FailureCase {
        alert_type: "TimesOut",
        status: "timed_out",
        cancel_at_stage: None,
    },
    FailureCase {
        alert_type: "Cancelled",
        status: "cancelled",
        cancel_at_stage: Some((2, 2)),
    },
    // The first call spends the budget: the agent concludes without more
    // tools, the second stage never starts, the summary is written.
    FailureCase {
        alert_type: "BudgetSpent",
        status: "completed",
        cancel_at_stage: None,
    },
];

/// The answers of every failure case, in the order the cases run.
fn failure_script() -> ScriptedLlm {
    let s = ScriptedLlm::new();
    // UnresolvedAny: Echo answers, the merger synthesizes.
    s.push_route("You are Echo", ScriptedResponse::text("ECHO-1: fine."))
        .push_route("You are Merger", ScriptedResponse::text("MERGED-1."))
        .push_route(EXEC_SUMMARY, ScriptedResponse::text("EXEC-1."))
        // UnresolvedAll: Echo answers; the stage fails for the ghost.
        .push_route("You are Echo", ScriptedResponse::text("ECHO-2: fine."))
        // FailingAgent: Echo calls a tool then answers; Refused's provider
        // refuses it for good.
        .push_route(
            "You are Echo",
            ScriptedResponse::default().then_tool_call("e1", "testmcp__echo", r#"{"text":"hi"}"#),
        )
        .push_route("You are Echo", ScriptedResponse::text("ECHO-3: fine."))
        .push_route(
            "You are Refused",
            ScriptedResponse::error("credentials", "the API key was rejected", false),
        )
        .push_route("You are Merger", ScriptedResponse::text("MERGED-3."))
        .push_route(EXEC_SUMMARY, ScriptedResponse::text("EXEC-3."))
        // TimesOut: Slow never answers.
        .push_route("You are Slow", ScriptedResponse::hang())
        // Cancelled: Echo answers stage 1; Slow never answers stage 2.
        .push_route("You are Echo", ScriptedResponse::text("ECHO-5: fine."))
        .push_route("You are Slow", ScriptedResponse::hang())
        // BudgetSpent: $0.04 at the first call, past the chain's $0.01.
        .push_route(
            "You are Echo",
            ScriptedResponse::default()
                .then_tool_call("b1", "testmcp__echo", r#"{"text":"hi"}"#)
                .then_usage(20_000, 0),
        )
        .push_route(
            "You are Echo",
            ScriptedResponse::text("ECHO-6: partly checked."),
        )
        .push_route(EXEC_SUMMARY, ScriptedResponse::text("EXEC-6."));
    s
}

fn failure_alert(alert_type: &str) -> NewAlert {
    NewAlert {
        alert_type: alert_type.into(),
        data: ALERT_DATA.into(),
        chain: None,
        runbook_url: None,
        mcp_selection: None,
        author: "conformance".into(),
    }
}

/// Runs every failure case through `control`, one after the other; returns
/// each session's shape.
async fn run_failure_cases(
    control: &dyn SessionControl,
    store: &Store,
    llm: &ScriptedLlm,
    wait: impl AsyncFn(&str) -> String,
) -> Vec<Value> {
    let mut shapes = Vec::new();
    for case in &FAILURE_CASES {
        let calls_before = llm.request_count();
        let accepted = control
            .submit_alert(failure_alert(case.alert_type))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.alert_type));
        let id = accepted.session_id;
        if let Some((stage, calls)) = case.cancel_at_stage {
            poll(120, async || {
                let stages = store.list_stages(&id).await.ok()?;
                let active = stages
                    .iter()
                    .any(|s| s.stage_index == stage && s.status.as_str() == "active");
                (active && llm.request_count() >= calls_before + calls).then_some(())
            })
            .await
            .unwrap_or_else(|()| panic!("{}: stage {stage} never ran", case.alert_type));
            control.cancel(&id).await.unwrap();
        }
        let status = wait(&id).await;
        assert_eq!(status, case.status, "{}", case.alert_type);
        let mut doc = shape(store, &id).await.document;
        let session = store.get_session(&id).await.unwrap();
        doc["error"] = json!(session.error_message);
        doc["end_reason"] = json!(session.end_reason);
        for (stage, record) in doc["stages"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .zip(store.list_stages(&id).await.unwrap())
        {
            stage["error"] = json!(record.error_message);
            let executions = store.list_agent_executions(&record.id).await.unwrap();
            for (e, row) in stage["executions"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .zip(executions)
            {
                e["error"] = json!(row.error_message);
            }
        }
        shapes.push(doc);
    }
    shapes
}

/// The failure cases' configuration as both modes read it from resources:
/// unvalidated, so a Chain may name an Agent that does not exist (as in a
/// cluster where it was deleted).
fn failure_config(world: &World) -> tarsy_config::Config {
    let text = FAILURE_MANIFESTS.replace("{MCP_URL}", &world.mcp_url());
    let objects = tarsy_config::parse_config("failures.yaml", &text, &|_| None)
        .unwrap_or_else(|e| panic!("{e}"));
    let (mut chains, mut agents, mut servers, mut providers) = (vec![], vec![], vec![], vec![]);
    for o in objects {
        match o {
            tarsy_config::ConfigObject::Chain(c) => {
                chains.push(tarsy_crds::Chain::new(&c.name, c.spec.into()))
            }
            tarsy_config::ConfigObject::Agent(a) => {
                agents.push(tarsy_crds::Agent::new(&a.name, a.spec.into()))
            }
            tarsy_config::ConfigObject::McpServer(m) => {
                servers.push(tarsy_crds::MCPServer::new(&m.name, m.spec.into()))
            }
            tarsy_config::ConfigObject::LlmProvider(p) => {
                providers.push(tarsy_crds::LLMProvider::new(&p.name, p.spec.into()))
            }
            tarsy_config::ConfigObject::Defaults(_) => {}
        }
    }
    tarsy_crds::config::from_resources(
        tarsy_config::Defaults::default(),
        &chains,
        &agents,
        &servers,
        &providers,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_and_cluster_mode_fail_the_same_way() {
    let world = World::start().await;

    // Local mode.
    let db = common::test_database("tarsy_conformance_failures_local").await;
    let llm = ScriptedLlmServer::start_on((world.bind, 0).into(), failure_script())
        .await
        .unwrap();
    let mut options = tarsy_local::LocalOptions::new(failure_config(&world), std::env::temp_dir());
    options.database_url = db.url().to_string();
    options.llm_addr = world.llm_addr(&llm);
    options.pod_id = "conformance".into();
    let app = tarsy_local::LocalApp::start(options).await.unwrap();
    let control = app.control();
    let local = run_failure_cases(control.as_ref(), app.store(), llm.script(), async |id| {
        app.wait_for_terminal(id, Duration::from_secs(120))
            .await
            .unwrap()
            .status
            .as_str()
            .to_string()
    })
    .await;
    assert_eq!(llm.script().remaining(), 0, "local mode used every answer");
    app.shutdown().await;
    let _ = db.drop_database().await;

    // Cluster mode.
    let scene = ClusterScene::start("conformance-failures").await;
    let (client, ns, store) = (scene.client.clone(), scene.ns.clone(), scene.store.clone());
    let llm = ScriptedLlmServer::start_on((world.bind, 0).into(), failure_script())
        .await
        .unwrap();
    apply_yaml(
        &client,
        &ns,
        &FAILURE_MANIFESTS.replace("{MCP_URL}", &world.mcp_url()),
    )
    .await;
    let controller = scene.controller(Vec::new(), world.llm_addr(&llm));

    let control = tarsy_cluster_control::KubeSessionControl::new(
        client.clone(),
        store.clone(),
        ns.clone(),
        tarsy_config::Defaults::default(),
    );
    let log = controller.log.clone();
    let cluster = run_failure_cases(&control, &store, llm.script(), async |id| {
        poll(180, async || {
            store
                .get_session(id)
                .await
                .ok()
                .filter(|s| s.status.is_terminal())
                .map(|s| s.status.as_str().to_string())
        })
        .await
        .unwrap_or_else(|()| {
            panic!(
                "session {id} did not end; operator log:\n{}",
                common::tail(&log, 40)
            )
        })
    })
    .await;
    assert_eq!(
        llm.script().remaining(),
        0,
        "cluster mode used every answer"
    );
    scene.finish(controller).await;

    // What each case is.
    let unresolved = &local[0]["stages"][0]["executions"][1];
    assert_eq!(unresolved["agent"], "ghost");
    assert_eq!(unresolved["status"], "failed");
    assert!(
        unresolved["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("cannot resolve the agent configuration"),
        "{unresolved:#}"
    );
    assert_eq!(
        local[1]["stages"].as_array().unwrap().len(),
        1,
        "{:#}",
        local[1]
    );
    assert_eq!(local[2]["stages"][0]["executions"][1]["status"], "failed");
    assert_eq!(local[4]["stages"][1]["status"], "cancelled");
    let spent = &local[5];
    assert_eq!(spent["end_reason"], "budget_exhausted", "{spent:#}");
    assert_eq!(spent["stages"].as_array().unwrap().len(), 1, "{spent:#}");
    // Both modes: the same records and the same reasons.
    for (i, (l, c)) in local.iter().zip(&cluster).enumerate() {
        assert_eq!(
            l, c,
            "{}: local:\n{l:#}\ncluster:\n{c:#}",
            FAILURE_CASES[i].alert_type
        );
    }
}
