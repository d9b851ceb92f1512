//! A judge scoring a finished session through the launcher, on a real
//! store: the attempt, its stage and execution, what the judge reads, and
//! its answer read back — a usable score stored, an unusable one a failed
//! attempt that says why; an unfinished session is not scored.

mod common;

use std::sync::Arc;
use std::time::Duration;

use tarsy_core::{ExecutionStatus, ResolvedAgentConfig, SessionStatus, StageKind};
use tarsy_exec::scoring::Judgement;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer, ScriptedResponse};
use tarsy_store::{NewSession, ScoreStatus, Store};
use tokio_util::sync::CancellationToken;

const ASSESSMENT: &str = "## Outcome\nRight: the pod was OOMKilled.\n\nVERDICT: correct\n\
                          FAILURE TAGS: missed-available-tool\nSCORE: 77";
const REPORT: &str =
    "MISSING TOOLS:\n- node memory history: was the node short?\n\nHARD TO USE:\n- none";

fn judge() -> ResolvedAgentConfig {
    let yaml = r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: p}
spec: {type: google, model: m, apiKeyEnv: K}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: c}
spec:
  alertTypes: [T]
  llmProvider: p
  stages: [{name: one, agent: kubernetes-agent}]
"#;
    let objects = tarsy_config::parse_config("t.yaml", yaml, &|_| None).unwrap();
    let config =
        tarsy_config::build_config(objects, &tarsy_config::DefaultsSpec::default()).unwrap();
    let chain = &config.chain("c").unwrap().spec;
    config.resolve_scoring(chain).unwrap()
}

async fn finished_session(store: &Store, status: SessionStatus) -> tarsy_store::Session {
    store
        .create_session(NewSession {
            id: "s".into(),
            alert_data: "pod web-1 restarts".into(),
            alert_type: "PodCrashLooping".into(),
            chain_id: "c".into(),
            author: None,
            runbook_url: None,
            mcp_selection: None,
            memory_scope: None,
        })
        .await
        .unwrap();
    store.update_session_status("s", status).await.unwrap()
}

/// One whole attempt through the launcher; returns the
/// attempt and the live events published.
async fn judge_once(
    store: &Store,
    script: &ScriptedLlm,
) -> (tarsy_store::SessionScore, Vec<serde_json::Value>) {
    let llm = ScriptedLlmServer::start(script.clone()).await.unwrap();
    let mut launcher = common::launcher(store, &llm, &Default::default(), None);
    let published = Arc::new(tarsy_engine::memory::MemoryRecorder::new());
    launcher.publisher = published.clone();
    let judgement = Judgement::start(store, &launcher.publisher, "s", &judge(), None)
        .await
        .unwrap();
    let score = judgement
        .run(
            &launcher,
            judge(),
            tokio::time::Instant::now() + Duration::from_secs(60),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let events = published
        .published()
        .into_iter()
        .filter(|p| p.channel == "session:s")
        .map(|p| p.payload)
        .filter(|e| e["type"] == "session.score" || e["type"] == "stage.status")
        .collect();
    (score, events)
}

#[tokio::test]
async fn a_usable_answer_is_stored_as_the_sessions_score() {
    let store = Store::sqlite_in_memory().await.unwrap();
    finished_session(&store, SessionStatus::Completed).await;
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::text(ASSESSMENT));
    script.push(ScriptedResponse::text(REPORT));
    let (score, events) = judge_once(&store, &script).await;
    assert_eq!(score.status, ScoreStatus::Completed, "{score:?}");
    assert_eq!(score.score, Some(77));
    assert_eq!(score.outcome.as_deref(), Some("correct"));
    assert_eq!(score.failure_tags, ["missed-available-tool"]);
    assert_eq!(score.assessment.as_deref(), Some(ASSESSMENT));
    assert_eq!(score.tool_report.as_deref(), Some(REPORT));
    // Dashboards hear the attempt start, the judge's stage run, the score.
    let seen: Vec<(String, String)> = events
        .iter()
        .map(|e| (e["type"].to_string(), e["status"].to_string()))
        .collect();
    assert_eq!(
        seen,
        [
            ("\"session.score\"", "\"in_progress\""),
            ("\"stage.status\"", "\"started\""),
            ("\"stage.status\"", "\"completed\""),
            ("\"session.score\"", "\"completed\""),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert_eq!(events[3]["score"], 77);
    assert_eq!(events[3]["failure_tags"][0], "missed-available-tool");

    // The judge read the alert; its stage is a scoring stage after the
    // session's own, and the session's status is untouched.
    let first = script.requests()[0].last_message().to_string();
    assert!(first.contains("Alert type: PodCrashLooping"), "{first}");
    assert!(first.contains("pod web-1 restarts"), "{first}");
    let stages = store.list_stages("s").await.unwrap();
    let stage = stages.last().unwrap();
    assert_eq!(stage.kind, StageKind::Scoring);
    assert_eq!(stage.status, ExecutionStatus::Completed);
    assert_eq!(
        store.get_session("s").await.unwrap().status,
        SessionStatus::Completed
    );
    assert_eq!(
        store.latest_score("s").await.unwrap().unwrap().score,
        Some(77)
    );
}

#[tokio::test]
async fn an_answer_without_a_score_fails_the_attempt_and_says_why() {
    let store = Store::sqlite_in_memory().await.unwrap();
    finished_session(&store, SessionStatus::Failed).await;
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::text("It looks fine to me."));
    script.push(ScriptedResponse::text(REPORT));
    let (score, events) = judge_once(&store, &script).await;
    assert_eq!(score.status, ScoreStatus::Failed, "{score:?}");
    assert_eq!(events.last().unwrap()["status"], "failed");
    assert_eq!(score.score, None);
    assert_eq!(
        score.error.as_deref(),
        Some("the judge gave no score (expected a line `SCORE: <0-100>`)")
    );
    assert_eq!(store.latest_score("s").await.unwrap(), None);
    // A re-score is a new attempt.
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::text(ASSESSMENT));
    script.push(ScriptedResponse::text(REPORT));
    assert_eq!(judge_once(&store, &script).await.0.attempt, 2);
}

#[tokio::test]
async fn only_a_finished_session_is_scored() {
    let store = Store::sqlite_in_memory().await.unwrap();
    finished_session(&store, SessionStatus::InProgress).await;
    let publisher: Arc<dyn tarsy_core::EventPublisher> =
        Arc::new(tarsy_engine::memory::MemoryRecorder::new());
    let refused = Judgement::start(&store, &publisher, "s", &judge(), None)
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("only a finished session is scored"),
        "{refused}"
    );
    assert!(store.session_scores("s").await.unwrap().is_empty());
}
