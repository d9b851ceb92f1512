use tarsy_core::{ExecutionStatus, IterationStrategy, LlmInteractionType, TimelineEventType as T};
use tarsy_engine::run_agent;
use tarsy_scripted_llm::{ScriptedChunk, ScriptedResponse};

use crate::common::{Harness, config};

#[tokio::test]
async fn synthesis_combines_previous_results_in_one_tool_less_call() {
    let h = Harness::new().await;
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("Both agree on OOM.")
            .then_text("Combined: ")
            .then_text("web-1 is OOMKilled."),
    );
    let mut cfg = config(IterationStrategy::Synthesis, 1);
    cfg.display_name = "SynthesisAgent".into();
    let prev = "### KubernetesAgent-1\nOOMKilled\n### KubernetesAgent-2\nmemory limit 128Mi";
    let result = run_agent(h.ctx(cfg), Some(prev.into())).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some("Combined: web-1 is OOMKilled.")
    );

    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].request.tools.is_empty());
    assert_eq!(
        reqs[0].request.llm_config.as_ref().unwrap().backend,
        "langchain"
    );
    assert!(reqs[0].last_message().contains("memory limit 128Mi"));
    assert!(h.tools.calls().is_empty());
    // Like a native-thinking final answer: the answer streams as
    // llm_response, then the conclusion is recorded whole.
    assert_eq!(
        h.event_types(),
        vec![T::LlmThinking, T::LlmResponse, T::FinalAnalysis]
    );
    let events = h.events();
    assert_eq!(events[1].content, "Combined: web-1 is OOMKilled.");
    assert_eq!(events[2].content, "Combined: web-1 is OOMKilled.");
    let published = h.recorder.published();
    assert!(
        published
            .iter()
            .any(|p| p.payload["type"] == "stream.chunk"
                && p.payload["event_type"] == "llm_response")
    );
    assert!(
        !published
            .iter()
            .any(|p| p.payload["type"] == "stream.chunk"
                && p.payload["event_type"] == "final_analysis"),
        "final_analysis is not streamed"
    );
    let final_created = published
        .iter()
        .find(|p| {
            p.payload["type"] == "timeline_event.created"
                && p.payload["event_type"] == "final_analysis"
        })
        .unwrap();
    assert_eq!(final_created.payload["status"], "completed");
    assert_eq!(
        h.recorder.llm_interactions()[0].interaction_type,
        LlmInteractionType::Synthesis
    );
}

#[tokio::test]
async fn synthesis_native_thinking_uses_the_google_backend() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::text("ok"));
    let result = run_agent(
        h.ctx(config(IterationStrategy::SynthesisNativeThinking, 1)),
        Some("x".into()),
    )
    .await;
    assert_eq!(result.status, ExecutionStatus::Completed);
    assert_eq!(
        h.script.requests()[0]
            .request
            .llm_config
            .as_ref()
            .unwrap()
            .backend,
        "google-native"
    );
}

#[tokio::test]
async fn single_call_records_native_tool_output() {
    let h = Harness::new().await;
    h.script.push(
        ScriptedResponse::default()
            .then(ScriptedChunk::CodeExecution {
                code: "print(2+2)".into(),
                result: "4".into(),
            })
            .then(ScriptedChunk::GoogleSearch {
                queries: vec!["oomkilled exit code".into()],
                sources: vec![("https://k8s.io/oom".into(), "OOM docs".into())],
            })
            .then(ScriptedChunk::UrlContext {
                urls: vec![("https://k8s.io/oom".into(), "success".into())],
            })
            .then_text("Exit code 137 means OOM."),
    );
    let result = run_agent(h.ctx(config(IterationStrategy::SingleCall, 1)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed);
    // Native tool results are recorded once the answer is complete, before
    // the conclusion.
    assert_eq!(
        h.event_types(),
        vec![
            T::LlmResponse,
            T::CodeExecution,
            T::GoogleSearchResult,
            T::UrlContextResult,
            T::FinalAnalysis
        ]
    );
    let code = &h.events_of(T::CodeExecution)[0];
    assert_eq!(code.metadata["code"], "print(2+2)");
    assert!(code.content.contains("Output:\n4"));
    let search = &h.events_of(T::GoogleSearchResult)[0];
    assert_eq!(search.metadata["queries"][0], "oomkilled exit code");
    assert!(search.content.contains("OOM docs (https://k8s.io/oom)"));
    assert_eq!(
        h.events_of(T::UrlContextResult)[0].metadata["urls"][0]["status"],
        "success"
    );
    let llm = &h.recorder.llm_interactions()[0];
    assert_eq!(llm.interaction_type, LlmInteractionType::FinalAnalysis);
    assert_eq!(llm.llm_response["code_executions"][0]["result"], "4");
}

#[tokio::test]
async fn single_call_failure_is_a_failed_execution_with_the_reason() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::error(
        "credentials",
        "API key invalid",
        false,
    ));
    let result = run_agent(h.ctx(config(IterationStrategy::SingleCall, 1)), None).await;
    assert_eq!(result.status, ExecutionStatus::Failed);
    assert!(result.error.unwrap().contains("API key invalid"));
    assert_eq!(h.events_of(T::Error).len(), 1);
}

#[tokio::test]
async fn chat_executions_use_the_chat_prompt() {
    let h = Harness::new().await;
    h.script
        .push(ScriptedResponse::text("Because of the memory limit."));
    let mut ctx = h.ctx(config(IterationStrategy::SingleCall, 1));
    ctx.chat = Some(tarsy_engine::ChatContext {
        question: "Why did web-1 crash?".into(),
        investigation_context: "Earlier: web-1 OOMKilled".into(),
    });
    let result = run_agent(ctx, None).await;
    assert_eq!(result.status, ExecutionStatus::Completed);
    let req = &h.script.requests()[0];
    assert!(req.last_message().contains("Why did web-1 crash?"));
    assert!(req.last_message().contains("Earlier: web-1 OOMKilled"));
}
