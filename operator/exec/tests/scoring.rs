//! A judge scoring a finished session through the launcher, on a real
//! store: the attempt, its stage and execution, what the judge reads, and
//! its answer read back — a usable score stored, an unusable one a failed
//! attempt that says why; an unfinished session is not scored.

mod common;

use std::time::Duration;

use tarsy_core::{ExecutionStatus, ResolvedAgentConfig, SessionStatus, StageKind};
use tarsy_exec::Assignment;
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
    let mut judge = config.resolve_synthesis(chain, &chain.stages[0]).unwrap();
    judge.display_name = "ScoringAgent".into();
    judge
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
        })
        .await
        .unwrap();
    store.update_session_status("s", status).await.unwrap()
}

/// Starts an attempt, runs the judge through the launcher, ends it.
async fn judge_once(store: &Store, script: &ScriptedLlm) -> tarsy_store::SessionScore {
    let llm = ScriptedLlmServer::start(script.clone()).await.unwrap();
    let session = store.get_session("s").await.unwrap();
    let judgement = Judgement::start(store, "s", &judge()).await.unwrap();
    let input = judgement.input(store).await.unwrap();
    let launched = common::launcher(store, &llm, &Default::default(), None)
        .run(
            Assignment::new(
                &session,
                &judgement.stage_id,
                &judgement.execution_id,
                judge(),
                input,
                tokio::time::Instant::now() + Duration::from_secs(60),
                CancellationToken::new(),
            ),
            None,
        )
        .await;
    judgement.end(store, &launched.result).await.unwrap()
}

#[tokio::test]
async fn a_usable_answer_is_stored_as_the_sessions_score() {
    let store = Store::sqlite_in_memory().await.unwrap();
    finished_session(&store, SessionStatus::Completed).await;
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::text(ASSESSMENT));
    script.push(ScriptedResponse::text(REPORT));
    let score = judge_once(&store, &script).await;
    assert_eq!(score.status, ScoreStatus::Completed, "{score:?}");
    assert_eq!(score.score, Some(77));
    assert_eq!(score.outcome.as_deref(), Some("correct"));
    assert_eq!(score.failure_tags, ["missed-available-tool"]);
    assert_eq!(score.assessment.as_deref(), Some(ASSESSMENT));
    assert_eq!(score.tool_report.as_deref(), Some(REPORT));

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
    let score = judge_once(&store, &script).await;
    assert_eq!(score.status, ScoreStatus::Failed, "{score:?}");
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
    assert_eq!(judge_once(&store, &script).await.attempt, 2);
}

#[tokio::test]
async fn only_a_finished_session_is_scored() {
    let store = Store::sqlite_in_memory().await.unwrap();
    finished_session(&store, SessionStatus::InProgress).await;
    let refused = Judgement::start(&store, "s", &judge()).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("only a finished session is scored"),
        "{refused}"
    );
    assert!(store.session_scores("s").await.unwrap().is_empty());
}
