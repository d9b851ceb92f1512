//! Investigation memory's scenario, shared by the local-mode e2e test and
//! the cluster-mode one: one alert type, three sessions. The first is
//! scored and the reflector learns two memories from it (one with a planted
//! secret); the second gets the lesson in its prompt and recalls it with
//! the tool; a person rates the first inaccurate with feedback
//! ([`review`]): its memories are deprecated and the feedback reflector
//! learns from the masked words; the third gets no memory. Scripted
//! answers are routed by agent (`Alpha`, the judge, the reflector); the
//! executive summaries take the unrouted queue.

use std::time::Duration;

use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};
use tarsy_store::{Memory, Store};

/// The chain: agent `alpha` on provider `test-llm`, scored.
pub const CHAIN: &str = r##"
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

/// The alert data of every session.
pub const ALERT: &str =
    "service: payments-db\nreason: connection pool exhausted (50/50) during the nightly batch";

/// What the first reflector learns: one lesson, one with a planted secret.
pub const REFLECTION: &str = r#"Here is what I learned.
```json
{"create": [
  {"content": "payments-db connection pool exhausted during the nightly batch: check the batch job's connections first", "category": "procedure", "valence": "helped", "confidence": 0.7},
  {"content": "payments-db admin password: hunter2-very-secret and key AKIAIOSFODNN7EXAMPLE were in the batch env", "category": "fact", "valence": "neutral", "confidence": 0.5}
]}
```"#;

/// The lesson's words.
pub const LESSON: &str = "check the batch job's connections first";

/// What the feedback reflector learns (words the alert does not share:
/// it is never recalled for it).
pub const FEEDBACK_LESSON: &str = "The staging DNS resolver times out under load";

/// The review of the first session: inaccurate, with feedback carrying a
/// planted secret.
pub fn review() -> serde_json::Value {
    serde_json::json!({
        "action": "complete",
        "rating": "inaccurate",
        "feedback": "Wrong cause: the staging DNS resolver timed out (resolver password=hunter2-very-secret)."
    })
}

/// The script of three sessions and a review: the first learns, the
/// second recalls (its memory injected and the recall tool called), the
/// review's feedback teaches one memory, the third learns nothing and
/// recalls nothing.
pub fn script() -> ScriptedLlm {
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
    // The review of the first: the feedback reflector.
    script.push_route(
        "MemoryReflector",
        ScriptedResponse::text(format!(
            r#"{{"create": [{{"content": "{FEEDBACK_LESSON}", "category": "fact", "valence": "neutral", "confidence": 0.8}}]}}"#
        )),
    );
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

/// Waits (at most `within`) until the session's reflector stage has
/// ended; panics otherwise.
pub async fn reflected(store: &Store, session_id: &str, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let stages = store.list_stages(session_id).await.unwrap_or_default();
        if stages
            .iter()
            .any(|s| s.kind == tarsy_core::StageKind::Memory && s.status.is_terminal())
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reflector of session {session_id} did not end within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The first user message the investigating agent of `session_id` got.
pub async fn investigation_prompt(store: &Store, session_id: &str) -> String {
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

/// Checks what the reflector learned from the first session, in `scope`:
/// two memories, the lesson a procedure, the planted secret stored
/// masked. Returns the lesson.
pub async fn assert_learned(store: &Store, first: &str, scope: &str) -> Memory {
    let learned = store.learned_memories(first).await.unwrap();
    assert_eq!(learned.len(), 2, "{learned:?}");
    assert!(learned.iter().all(|m| m.scope == scope), "{learned:?}");
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
    lesson.clone()
}

/// Checks that the second session recalled `lesson` (learned from
/// `first`): in its prompt with its provenance, recorded as injected, and
/// found by the recall tool, whose call is recorded like an MCP call and
/// shown on the timeline.
pub async fn assert_recalled(store: &Store, second: &str, first: &str, lesson: &Memory) {
    let prompt = investigation_prompt(store, second).await;
    assert!(
        prompt.contains("## Lessons from past investigations"),
        "{prompt}"
    );
    assert!(prompt.contains(LESSON), "{prompt}");
    assert!(prompt.contains(first), "provenance: {prompt}");
    let injected = store.injected_memories(second).await.unwrap();
    assert!(injected.iter().any(|m| m.id == lesson.id), "{injected:?}");
    let calls = store.session_mcp_interactions(second).await.unwrap();
    let recall = calls
        .iter()
        .find(|c| c.server_name == "tarsy" && c.tool_name == "recall_past_investigations")
        .expect("the recall tool call, recorded like an MCP call");
    let answer = recall.tool_result["content"].as_str().unwrap_or_default();
    assert!(answer.contains(LESSON), "{answer}");
    let timeline = store.session_timeline(second).await.unwrap();
    assert!(
        timeline.iter().any(|e| {
            e.event_type == tarsy_core::TimelineEventType::LlmToolCall && e.content.contains(LESSON)
        }),
        "the tool call is on the timeline with its result"
    );
}

/// Checks what the review of the first session did, once its feedback
/// reflector ended (waited for at most `within`): the memories it had
/// taught deprecated, one new memory from the feedback, whose words the
/// model read masked.
pub async fn assert_corrected(store: &Store, script: &ScriptedLlm, first: &str, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let stages = store.list_stages(first).await.unwrap_or_default();
        if let Some(stage) = stages
            .iter()
            .find(|s| s.stage_name == tarsy_exec::memory::FEEDBACK_STAGE_NAME)
            .filter(|s| s.status.is_terminal())
        {
            assert_eq!(
                stage.status,
                tarsy_core::ExecutionStatus::Completed,
                "{stage:?}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the feedback reflector did not end within {within:?}: {stages:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let learned = store.learned_memories(first).await.unwrap();
    let (fresh, old): (Vec<_>, Vec<_>) = learned
        .iter()
        .partition(|m| m.content.contains(FEEDBACK_LESSON));
    assert_eq!((fresh.len(), old.len()), (1, 2), "{learned:?}");
    assert!(!fresh[0].deprecated, "{learned:?}");
    assert!(old.iter().all(|m| m.deprecated), "{learned:?}");
    let asked: Vec<String> = script
        .requests()
        .into_iter()
        .filter(|r| r.system_prompt().contains("A person has reviewed"))
        .map(|r| r.last_message().to_string())
        .collect();
    assert_eq!(asked.len(), 1, "one feedback reflection");
    assert!(asked[0].contains("staging DNS resolver"), "{}", asked[0]);
    assert!(!asked[0].contains("hunter2"), "{}", asked[0]);
}
