//! A reflector's run: one tool-less turn, whatever the configured strategy;
//! its answer (the memory actions) is the conclusion; no answer fails it.

use tarsy_core::{ExecutionStatus, IterationStrategy, LlmInteractionType, TimelineEventType as T};
use tarsy_engine::{ReflectionContext, run_agent};
use tarsy_scripted_llm::ScriptedResponse;

use crate::common::{Harness, config};

const ANSWER: &str = r#"{"create": [{"content": "web's pool fills up during batch runs", "category": "fact", "valence": "helped", "confidence": 0.8}]}"#;

fn reflector_ctx(h: &Harness) -> tarsy_engine::ExecutionContext {
    let mut cfg = config(IterationStrategy::NativeThinking, 3);
    cfg.display_name = "MemoryReflector".into();
    let mut ctx = h.ctx(cfg);
    ctx.reflection = Some(ReflectionContext {
        instructions: "Answer with the JSON object.".into(),
        prompt: "## Alert\nType: PoolExhausted".into(),
    });
    ctx
}

#[tokio::test]
async fn a_reflector_answers_once_without_tools() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::text(ANSWER));
    let result = run_agent(reflector_ctx(&h), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(result.final_analysis.as_deref(), Some(ANSWER));
    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].request.tools.is_empty());
    assert!(h.tools.calls().is_empty());
    let system = reqs[0].system_prompt();
    assert!(system.starts_with("You are MemoryReflector"), "{system}");
    assert!(system.contains("Answer with the JSON object."));
    assert_eq!(reqs[0].last_message(), "## Alert\nType: PoolExhausted");
    let types: Vec<_> = h
        .recorder
        .llm_interactions()
        .iter()
        .map(|i| i.interaction_type)
        .collect();
    assert_eq!(types, [LlmInteractionType::Reflection]);
    assert_eq!(h.event_types().last(), Some(&T::FinalAnalysis));
}

#[tokio::test]
async fn a_reflector_without_an_answer_fails() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::text("   "));
    let result = run_agent(reflector_ctx(&h), None).await;
    assert_eq!(result.status, ExecutionStatus::Failed, "{result:?}");
    assert!(
        result
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("the reflector gave no answer")),
        "{result:?}"
    );
}
