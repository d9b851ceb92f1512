use tarsy_core::{
    ExecutionStatus, IterationStrategy, LlmInteractionType, MessageRole, TimelineEventStatus,
    TimelineEventType as T,
};
use tarsy_engine::run_agent;
use tarsy_scripted_llm::ScriptedResponse;

use crate::common::{Harness, POD_LIST, config};

#[tokio::test]
async fn react_happy_path_parses_thought_action_and_final_answer() {
    let h = Harness::new().await;
    h.script.push(
        ScriptedResponse::text("Thought: The pod restarts.\nI should ")
            .then_text("list the pods.\nAction: k8s.pods_list\n")
            .then_text("Action Input: {\"namespace\": \"shop\"}")
            .then_usage(10, 5),
    );
    h.script.push(ScriptedResponse::text(
        "Thought: Seven restarts with OOM.\nFinal Answer: web-1 is OOMKilled; raise its memory limit.",
    ));
    let result = run_agent(h.ctx(config(IterationStrategy::React, 5)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some("web-1 is OOMKilled; raise its memory limit.")
    );
    assert_eq!(result.usage.total_tokens, 15);

    // Each turn: the model's raw answer, then the thought the parser
    // extracted, then what the turn does (tool call or conclusion).
    assert_eq!(
        h.event_types(),
        vec![
            T::LlmResponse,
            T::LlmThinking,
            T::LlmToolCall,
            T::LlmResponse,
            T::LlmThinking,
            T::FinalAnalysis
        ]
    );
    let events = h.events();
    assert!(
        events
            .iter()
            .all(|e| e.status == TimelineEventStatus::Completed)
    );
    assert_eq!(
        events[0].content,
        "Thought: The pod restarts.\nI should list the pods.\nAction: k8s.pods_list\nAction Input: {\"namespace\": \"shop\"}"
    );
    assert_eq!(events[1].metadata["source"], "react");
    assert_eq!(
        events[1].content,
        "The pod restarts.\nI should list the pods."
    );
    assert_eq!(events[2].metadata["arguments"], "{\"namespace\": \"shop\"}");
    assert_eq!(events[2].content, POD_LIST);
    assert_eq!(
        events[3].content,
        "Thought: Seven restarts with OOM.\nFinal Answer: web-1 is OOMKilled; raise its memory limit."
    );
    assert_eq!(events[4].content, "Seven restarts with OOM.");
    assert_eq!(
        events[5].content,
        "web-1 is OOMKilled; raise its memory limit."
    );
    // The raw answer streams live; the parsed thought is announced once,
    // complete, after the parse.
    let published = h.recorder.published();
    let streamed: String = published
        .iter()
        .filter(|p| {
            p.payload["type"] == "stream.chunk" && p.payload["event_id"] == events[0].id.as_str()
        })
        .map(|p| p.payload["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(streamed, events[0].content);
    let thought_created = published
        .iter()
        .find(|p| {
            p.payload["type"] == "timeline_event.created"
                && p.payload["event_id"] == events[1].id.as_str()
        })
        .unwrap();
    assert_eq!(thought_created.payload["status"], "completed");
    assert!(
        !published
            .iter()
            .any(|p| p.payload["type"] == "stream.chunk"
                && p.payload["event_type"] != "llm_response"),
        "only the raw answer streams"
    );

    let calls = h.tools.calls();
    assert_eq!(calls[0].name, "k8s.pods_list");
    assert_eq!(
        calls[0].arguments, "{\"namespace\": \"shop\"}",
        "raw input for the executor"
    );

    let reqs = h.script.requests();
    assert!(reqs[0].request.tools.is_empty(), "ReAct binds no tools");
    assert!(
        reqs[0].system_prompt().contains("k8s.pods_list"),
        "tools described in the prompt"
    );
    assert!(reqs[0].system_prompt().contains("Action Input:"));
    assert_eq!(
        reqs[0].request.llm_config.as_ref().unwrap().backend,
        "langchain"
    );
    let obs = reqs[1].request.messages.last().unwrap();
    assert_eq!(obs.role, "user");
    assert_eq!(obs.content, format!("Observation: {POD_LIST}"));

    let roles: Vec<MessageRole> = h.recorder.messages().iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        vec![
            MessageRole::System,
            MessageRole::User,
            MessageRole::Assistant,
            MessageRole::User,
            MessageRole::Assistant
        ]
    );
    let types: Vec<_> = h
        .recorder
        .llm_interactions()
        .iter()
        .map(|i| i.interaction_type)
        .collect();
    assert_eq!(
        types,
        vec![
            LlmInteractionType::Iteration,
            LlmInteractionType::FinalAnalysis
        ]
    );
}

#[tokio::test]
async fn malformed_responses_and_unknown_tools_get_specific_feedback() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::text(
        "I think the pods are probably fine.",
    ));
    h.script.push(ScriptedResponse::text(
        "Thought: delete the node.\nAction: k8s.nodes_delete\nAction Input: {}",
    ));
    h.script.push(ScriptedResponse::text(
        "Thought: check pods.\nAction: k8s.pods_list\nAction Input: namespace: shop\nObservation: all pods healthy",
    ));
    h.script
        .push(ScriptedResponse::text("Final Answer: web-1 crashes."));
    let result = run_agent(h.ctx(config(IterationStrategy::React, 6)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(result.final_analysis.as_deref(), Some("web-1 crashes."));

    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 4);
    let feedback = reqs[1].last_message();
    assert!(feedback.contains("FORMAT ERROR"), "{feedback}");
    let unknown = reqs[2].last_message();
    assert!(unknown.contains("k8s.nodes_delete"), "{unknown}");
    assert!(unknown.contains("Available tools"), "{unknown}");
    assert!(unknown.contains("k8s.pods_list"), "{unknown}");
    // The invented observation was cut off: the real tool ran.
    let obs = reqs[3].last_message();
    assert_eq!(obs, format!("Observation: {POD_LIST}"));
    assert_eq!(h.tools.calls()[0].arguments, "namespace: shop");

    let errors = h.events_of(T::Error);
    let kinds: Vec<&str> = errors
        .iter()
        .map(|e| e.metadata["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["format_error", "unknown_tool"]);
    // The malformed response stays in the conversation before its feedback.
    assert_eq!(
        reqs[1].request.messages[2].content,
        "I think the pods are probably fine."
    );
}

#[tokio::test]
async fn react_forced_conclusion_uses_the_final_answer_format() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::text(
        "Thought: look.\nAction: k8s.pods_list\nAction Input: {}",
    ));
    h.script.push(ScriptedResponse::text(
        "Thought: Enough data.\nFinal Answer: Memory limit too low.",
    ));
    let result = run_agent(h.ctx(config(IterationStrategy::React, 1)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some("Memory limit too low.")
    );
    let reqs = h.script.requests();
    assert!(
        reqs[1].last_message().contains("Final Answer"),
        "{}",
        reqs[1].last_message()
    );
    let thinking = h.events_of(T::LlmThinking);
    assert_eq!(thinking.last().unwrap().content, "Enough data.");
    assert_eq!(
        h.events_of(T::FinalAnalysis)[0].content,
        "Memory limit too low."
    );
    // The conclusion's events say it was forced, after how many iterations.
    let events = h.events();
    let forced: Vec<_> = events[3..].iter().map(|e| e.event_type).collect();
    assert_eq!(
        forced,
        vec![T::LlmResponse, T::LlmThinking, T::FinalAnalysis]
    );
    for e in &events[3..] {
        assert_eq!(e.metadata["forced_conclusion"], true, "{e:?}");
        assert_eq!(e.metadata["iterations_used"], 1, "{e:?}");
        assert_eq!(e.metadata["max_iterations"], 1, "{e:?}");
    }
    assert_eq!(events[4].metadata["source"], "react");
    assert!(
        events[..3]
            .iter()
            .all(|e| e.metadata.get("forced_conclusion").is_none())
    );
    // The forced-conclusion request is the call after the last iteration.
    let rec = h.recorder.llm_interactions();
    assert_eq!(
        rec[1].interaction_type,
        LlmInteractionType::ForcedConclusion
    );
    assert_eq!(rec[0].llm_request["iteration"], 1);
    assert_eq!(rec[1].llm_request["iteration"], 2);
}

#[tokio::test]
async fn react_llm_errors_become_observations() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::error(
        "provider_error",
        "overloaded",
        false,
    ));
    h.script.push(ScriptedResponse::text("Final Answer: fine."));
    let result = run_agent(h.ctx(config(IterationStrategy::React, 3)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed);
    let last = h.script.requests()[1].last_message().to_string();
    assert!(
        last.starts_with("Observation: Error from previous attempt"),
        "{last}"
    );
    assert!(last.contains("overloaded"));
}
