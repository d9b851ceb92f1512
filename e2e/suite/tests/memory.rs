//! Investigation memory end to end in local mode, with scripted answers:
//! an investigation is scored, the reflector learns from it (a planted
//! secret stored masked), the next alert of the same type gets the memory
//! in its prompt and recalls it with the tool, an inaccurate review
//! deprecates it, and a third alert gets none. Scopes never mix.

use std::time::Duration;

use serde_json::json;
use tarsy_e2e::harness::{Peers, TestApp};
use tarsy_e2e::on_both_backends;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};
use tarsy_store::{MemoryFilter, Store};

const CHAIN: &str = r##"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: pool}
spec:
  alertTypes: [PoolExhausted]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  scoring: {enabled: true}
  stages:
  - name: look
    agent: alpha
"##;

const ALERT: &str =
    "service: payments-db\nreason: connection pool exhausted (50/50) during the nightly batch";

/// What the reflector learns: one lesson, one with a planted secret.
const REFLECTION: &str = r#"Here is what I learned.
```json
{"create": [
  {"content": "payments-db connection pool exhausted during the nightly batch: check the batch job's connections first", "category": "procedure", "valence": "helped", "confidence": 0.7},
  {"content": "payments-db admin password: hunter2-very-secret and key AKIAIOSFODNN7EXAMPLE were in the batch env", "category": "fact", "valence": "neutral", "confidence": 0.5}
]}
```"#;

const LESSON: &str = "check the batch job's connections first";

/// The script of three sessions: the first learns, the second recalls
/// (its memory injected and the recall tool called), the third learns
/// nothing and recalls nothing.
fn script() -> ScriptedLlm {
    let script = ScriptedLlm::new();
    let score = || {
        [
            ScriptedResponse::text("VERDICT: correct\nFAILURE TAGS: none\nSCORE: 90"),
            ScriptedResponse::text("MISSING TOOLS:\n- none"),
        ]
    };
    // 1.
    script
        .push_route(
            "Alpha",
            ScriptedResponse::text("The batch exhausted the pool."),
        )
        .push(ScriptedResponse::text(
            "The nightly batch exhausted the pool.",
        ));
    for r in score() {
        script.push_route("ScoringAgent", r);
    }
    script.push_route("MemoryReflector", ScriptedResponse::text(REFLECTION));
    // 2.
    script
        .push_route(
            "Alpha",
            ScriptedResponse::tool_call(
                "recall-1",
                "tarsy__recall_past_investigations",
                r#"{"query": "payments-db connection pool batch"}"#,
            ),
        )
        .push_route(
            "Alpha",
            ScriptedResponse::text("As before: the batch exhausted the pool."),
        )
        .push(ScriptedResponse::text("The batch again."));
    for r in score() {
        script.push_route("ScoringAgent", r);
    }
    script.push_route("MemoryReflector", ScriptedResponse::text("{}"));
    // 3.
    script
        .push_route("Alpha", ScriptedResponse::text("The pool is exhausted."))
        .push(ScriptedResponse::text("Pool exhausted."));
    for r in score() {
        script.push_route("ScoringAgent", r);
    }
    script.push_route("MemoryReflector", ScriptedResponse::text("{}"));
    script
}

/// Polls `check` until it gives something (30 s).
async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the session's reflector stage has ended.
async fn reflected(store: &Store, session_id: &str) {
    eventually("the reflector", async || {
        let stages = store.list_stages(session_id).await.ok()?;
        stages
            .iter()
            .any(|s| s.kind == tarsy_core::StageKind::Memory && s.status.is_terminal())
            .then_some(())
    })
    .await;
}

/// The first user message the investigating agent of `session_id` got.
async fn investigation_prompt(store: &Store, session_id: &str) -> String {
    let stage = store
        .list_stages(session_id)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.kind == tarsy_core::StageKind::Investigation)
        .unwrap();
    let execution = store
        .list_agent_executions(&stage.id)
        .await
        .unwrap()
        .remove(0);
    store
        .list_messages(&execution.id)
        .await
        .unwrap()
        .into_iter()
        .find(|m| m.role == tarsy_core::MessageRole::User)
        .map(|m| m.content)
        .unwrap_or_default()
}

async fn learn_recall_and_forget(db_url: String) {
    scenario(db_url, false).await;
}

/// The same with an embedding provider: vectors from the LLM service's
/// `Embed` (the scripted server's embedder, over gRPC) fused with full text.
async fn learn_recall_and_forget_with_embeddings(db_url: String) {
    scenario(db_url, true).await;
}

async fn scenario(db_url: String, embeddings: bool) {
    let peers = Peers::start(script()).await;
    let mut config = peers.config(CHAIN);
    config.defaults.memory.enabled = true;
    config.defaults.memory.project = "payments".into();
    if embeddings {
        config.defaults.memory.embedding = Some(tarsy_config::EmbeddingSettings {
            llm_provider: "test-llm".into(),
            model: "test-embedding".into(),
        });
    }
    let app = TestApp::start(peers.options(config, &db_url)).await;
    let store = app.app.store().clone();

    // 1. An investigation, scored, learned from.
    let first = app.submit("PoolExhausted", ALERT).await;
    assert_eq!(app.finish(&first).await["status"], "completed");
    reflected(&store, &first).await;
    let learned = store.learned_memories(&first).await.unwrap();
    assert_eq!(learned.len(), 2, "{learned:?}");
    assert!(learned.iter().all(|m| m.scope == "payments"));
    // With an embedding provider, every text recall read was embedded by
    // the LLM service, with the configured model.
    let embedded = peers.script().embed_requests();
    assert_eq!(!embedded.is_empty(), embeddings, "{embedded:?}");
    assert!(embedded.iter().all(|r| {
        r.llm_config
            .as_ref()
            .is_some_and(|c| c.model == "test-embedding")
    }));
    let lesson = learned
        .iter()
        .find(|m| m.content.contains(LESSON))
        .expect("the lesson");
    assert_eq!(lesson.category, tarsy_core::MemoryCategory::Procedure);
    // The planted secret never reached the store.
    let secret = learned
        .iter()
        .find(|m| m.content.contains("admin password"))
        .expect("the memory with the secret");
    assert!(!secret.content.contains("hunter2"), "{}", secret.content);
    assert!(
        !secret.content.contains("AKIAIOSFODNN7EXAMPLE"),
        "{}",
        secret.content
    );
    // Nothing was injected into the first: there was nothing to recall.
    assert!(
        !investigation_prompt(&store, &first)
            .await
            .contains("Lessons from past investigations")
    );

    // 2. The same alert again: the lesson is in the prompt, with its
    //    provenance, recorded as injected, and the recall tool finds it.
    let second = app.submit("PoolExhausted", ALERT).await;
    assert_eq!(app.finish(&second).await["status"], "completed");
    let prompt = investigation_prompt(&store, &second).await;
    assert!(
        prompt.contains("## Lessons from past investigations"),
        "{prompt}"
    );
    assert!(prompt.contains(LESSON), "{prompt}");
    assert!(prompt.contains(&first), "provenance: {prompt}");
    let injected = store.injected_memories(&second).await.unwrap();
    assert!(injected.iter().any(|m| m.id == lesson.id), "{injected:?}");
    let calls = store.session_mcp_interactions(&second).await.unwrap();
    let recall = calls
        .iter()
        .find(|c| c.server_name == "tarsy" && c.tool_name == "recall_past_investigations")
        .expect("the recall tool call, recorded like an MCP call");
    let answer = recall.tool_result["content"].as_str().unwrap_or_default();
    assert!(answer.contains(LESSON), "{answer}");
    let timeline = store.session_timeline(&second).await.unwrap();
    assert!(
        timeline.iter().any(|e| {
            e.event_type == tarsy_core::TimelineEventType::LlmToolCall && e.content.contains(LESSON)
        }),
        "the tool call is on the timeline with its result"
    );
    reflected(&store, &second).await;
    assert!(store.learned_memories(&second).await.unwrap().is_empty());

    // 3. A person rates the first investigation inaccurate: what it taught
    //    is deprecated, and the next alert gets nothing.
    let (status, body) = app
        .post(
            &format!("/api/v1/sessions/{first}/review"),
            Some(json!({"action": "complete", "rating": "inaccurate"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let after = store.learned_memories(&first).await.unwrap();
    assert!(after.iter().all(|m| m.deprecated), "{after:?}");
    let third = app.submit("PoolExhausted", ALERT).await;
    assert_eq!(app.finish(&third).await["status"], "completed");
    assert!(
        !investigation_prompt(&store, &third)
            .await
            .contains("Lessons from past investigations")
    );
    assert!(store.injected_memories(&third).await.unwrap().is_empty());
    reflected(&store, &third).await;

    // No memory of this project is visible from another.
    let (elsewhere, total) = store
        .list_memories(&MemoryFilter {
            scope: "other-project".into(),
            ..MemoryFilter::default()
        })
        .await
        .unwrap();
    assert!(elsewhere.is_empty() && total == 0);
    app.shutdown().await;
}

/// A reviewer's feedback runs the feedback reflector: the reviewer is
/// right, and what the feedback teaches becomes a memory (its text masked
/// before the model sees it).
async fn feedback_teaches_too(db_url: String) {
    let script = ScriptedLlm::new();
    script
        .push_route("Alpha", ScriptedResponse::text("The batch exhausted the pool."))
        .push(ScriptedResponse::text("The batch exhausted the pool."))
        .push_route(
            "ScoringAgent",
            ScriptedResponse::text("VERDICT: correct\nFAILURE TAGS: none\nSCORE: 80"),
        )
        .push_route("ScoringAgent", ScriptedResponse::text("MISSING TOOLS:\n- none"))
        .push_route("MemoryReflector", ScriptedResponse::text("{}"))
        .push_route(
            "MemoryReflector",
            ScriptedResponse::text(
                r#"{"create": [{"content": "payments-db pool alerts during the nightly batch were DNS timeouts, not a full pool", "category": "fact", "valence": "neutral", "confidence": 0.9}]}"#,
            ),
        );
    let peers = Peers::start(script).await;
    let mut config = peers.config(CHAIN);
    config.defaults.memory.enabled = true;
    let app = TestApp::start(peers.options(config, &db_url)).await;
    let store = app.app.store().clone();
    let id = app.submit("PoolExhausted", ALERT).await;
    assert_eq!(app.finish(&id).await["status"], "completed");
    reflected(&store, &id).await;
    assert!(store.learned_memories(&id).await.unwrap().is_empty());

    let (status, body) = app
        .post(
            &format!("/api/v1/sessions/{id}/review"),
            Some(json!({
                "action": "complete",
                "rating": "partially_accurate",
                "feedback": "Wrong cause: the DNS resolver timed out (resolver password=hunter2-very-secret)."
            })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let learned = eventually("the feedback reflector", async || {
        Some(store.learned_memories(&id).await.ok()?).filter(|l| !l.is_empty())
    })
    .await;
    assert!(learned[0].content.contains("DNS timeouts"), "{learned:?}");
    let asked = peers
        .script()
        .requests()
        .into_iter()
        .filter(|r| r.system_prompt().contains("A person has reviewed"))
        .map(|r| r.last_message().to_string())
        .collect::<Vec<_>>();
    assert_eq!(asked.len(), 1, "one feedback reflection");
    assert!(
        asked[0].contains("the DNS resolver timed out"),
        "{}",
        asked[0]
    );
    assert!(
        !asked[0].contains("hunter2"),
        "the model never sees the secret: {}",
        asked[0]
    );
    app.shutdown().await;
}

on_both_backends!(
    learn_recall_and_forget,
    learn_recall_and_forget_with_embeddings,
    feedback_teaches_too
);
