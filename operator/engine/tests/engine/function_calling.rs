use serde_json::json;
use tarsy_core::{
    ExecutionStatus, IterationStrategy, LlmInteractionType, MessageRole, TimelineEventStatus,
    TimelineEventType as T,
};
use tarsy_engine::run_agent;
use tarsy_scripted_llm::ScriptedResponse;

use crate::common::{Harness, POD_LIST, config};

#[tokio::test]
async fn native_thinking_happy_path_streams_records_and_concludes() {
    let h = Harness::new().await;
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("The pod restarts; ")
            .then_thinking("list pods first.")
            .then_text("Checking the pods.")
            .then_tool_call("c1", "k8s.pods_list", r#"{"namespace":"shop"}"#)
            .then_usage(100, 20),
    );
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("Restart count 7 and OOM.")
            .then_text("Root cause: web-1 is ")
            .then_text("OOMKilled.")
            .then_usage(150, 30),
    );
    let result = run_agent(h.ctx(config(IterationStrategy::NativeThinking, 5)), None).await;

    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some("Root cause: web-1 is OOMKilled.")
    );
    assert_eq!(result.usage.input_tokens, 250);
    assert_eq!(result.usage.output_tokens, 50);
    assert_eq!(result.iterations, 2);

    assert_eq!(
        h.event_types(),
        vec![
            T::LlmThinking,
            T::LlmResponse,
            T::LlmToolCall,
            T::LlmThinking,
            T::LlmResponse,
            T::FinalAnalysis
        ]
    );
    let events = h.events();
    assert!(
        events
            .iter()
            .all(|e| e.status == TimelineEventStatus::Completed)
    );
    assert_eq!(events[0].content, "The pod restarts; list pods first.");
    assert_eq!(events[0].metadata["source"], "native");
    assert_eq!(events[1].content, "Checking the pods.");
    let tool = &events[2];
    assert_eq!(tool.metadata["server_name"], "k8s");
    assert_eq!(tool.metadata["tool_name"], "pods_list");
    assert_eq!(tool.metadata["arguments"], r#"{"namespace":"shop"}"#);
    assert_eq!(tool.metadata["is_error"], false);
    assert_eq!(tool.content, POD_LIST);
    assert_eq!(events[5].content, "Root cause: web-1 is OOMKilled.");
    let seqs: Vec<i64> = events.iter().map(|e| e.sequence_number).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5, 6]);

    // Messages: the linear conversation, tool result answering its call.
    let msgs = h.recorder.messages();
    let roles: Vec<MessageRole> = msgs.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        vec![
            MessageRole::System,
            MessageRole::User,
            MessageRole::Assistant,
            MessageRole::Tool,
            MessageRole::Assistant
        ]
    );
    assert_eq!(msgs[2].tool_calls[0].name, "k8s.pods_list");
    assert_eq!(msgs[3].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(msgs[3].content, POD_LIST);
    assert!(
        msgs[1].content.contains("web-1"),
        "alert data in the user message"
    );
    assert!(msgs[0].content.contains("KubernetesAgent"));
    assert!(
        msgs[0]
            .content
            .contains("Use kubectl-style tools read-only."),
        "tier 2"
    );

    // What the LLM service received.
    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].tool_names(), vec!["k8s.pod_logs", "k8s.pods_list"]);
    let cfg = reqs[0].request.llm_config.as_ref().unwrap();
    assert_eq!(cfg.backend, "google-native");
    assert_eq!(cfg.provider, "google");
    assert_eq!(cfg.model, "primary-model");
    assert_eq!(cfg.api_key_env, "GOOGLE_API_KEY");
    assert_eq!(reqs[0].request.execution_id, "exec-KubernetesAgent");
    let second = &reqs[1].request.messages;
    assert_eq!(second.len(), 4);
    assert_eq!(second[2].tool_calls[0].id, "c1");
    assert_eq!(second[3].role, "tool");
    assert_eq!(second[3].tool_call_id, "c1");
    assert_eq!(second[3].tool_name, "k8s.pods_list");

    // LLM interaction records, one per call, typed by outcome.
    let llm = h.recorder.llm_interactions();
    assert_eq!(llm.len(), 2);
    assert_eq!(llm[0].interaction_type, LlmInteractionType::Iteration);
    assert_eq!(llm[1].interaction_type, LlmInteractionType::FinalAnalysis);
    assert_eq!(
        llm[0].thinking_content.as_deref(),
        Some("The pod restarts; list pods first.")
    );
    assert_eq!(llm[0].usage.unwrap().input_tokens, 100);
    assert_eq!(llm[0].provider, "primary");
    assert_eq!(
        llm[0].llm_response["tool_calls"][0]["name"],
        "k8s.pods_list"
    );
    let ids: Vec<String> = h
        .recorder
        .messages_with_ids()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        llm[0].last_message_id.as_ref(),
        Some(&ids[1]),
        "sent up to the user message"
    );
    assert_eq!(
        llm[1].last_message_id.as_ref(),
        Some(&ids[3]),
        "sent up to the tool result"
    );
}

#[tokio::test]
async fn stream_payloads_announce_stream_and_complete_every_event() {
    let h = Harness::new().await;
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("think")
            .then_text("The answer ")
            .then_text("is 42."),
    );
    let result = run_agent(h.ctx(config(IterationStrategy::Langchain, 3)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed);
    let published = h.recorder.published();
    assert!(published.iter().all(|p| p.channel == "session:session-1"));

    let created: Vec<_> = published
        .iter()
        .filter(|p| p.payload["type"] == "timeline_event.created")
        .collect();
    assert_eq!(
        created.len(),
        3,
        "thinking, response, final analysis: {created:?}"
    );
    let first = &created[0].payload;
    assert!(created[0].persistent);
    for key in [
        "event_id",
        "session_id",
        "stage_id",
        "execution_id",
        "sequence_number",
        "event_type",
        "status",
        "content",
        "metadata",
        "timestamp",
    ] {
        assert!(
            first.get(key).is_some(),
            "created payload lacks {key}: {first}"
        );
    }
    assert_eq!(first["event_type"], "llm_thinking");
    assert_eq!(first["status"], "streaming");

    let chunks: Vec<_> = published
        .iter()
        .filter(|p| p.payload["type"] == "stream.chunk")
        .collect();
    assert!(chunks.iter().all(|c| !c.persistent));
    let text_chunks: Vec<&str> = chunks
        .iter()
        .filter(|c| c.payload["event_type"] == "llm_response")
        .map(|c| c.payload["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text_chunks, vec!["The answer ", "is 42."]);
    let response_id = &created[1].payload["event_id"];
    assert!(
        chunks
            .iter()
            .filter(|c| c.payload["event_type"] == "llm_response")
            .all(|c| &c.payload["event_id"] == response_id)
    );

    let completed: Vec<_> = published
        .iter()
        .filter(|p| p.payload["type"] == "timeline_event.completed")
        .collect();
    let response_done = completed
        .iter()
        .find(|c| &c.payload["event_id"] == response_id)
        .unwrap();
    assert_eq!(response_done.payload["content"], "The answer is 42.");
    assert_eq!(response_done.payload["status"], "completed");
    assert_eq!(response_done.payload["event_type"], "llm_response");
    // Created before its chunks, completed after them.
    let pos = |pred: &dyn Fn(&serde_json::Value) -> bool| {
        published.iter().position(|p| pred(&p.payload)).unwrap()
    };
    let c = pos(&|p| p["type"] == "timeline_event.created" && &p["event_id"] == response_id);
    let k = pos(&|p| p["type"] == "stream.chunk" && &p["event_id"] == response_id);
    let d = pos(&|p| p["type"] == "timeline_event.completed" && &p["event_id"] == response_id);
    assert!(c < k && k < d);
    assert_eq!(
        h.events_of(T::FinalAnalysis)[0].content,
        "The answer is 42."
    );
}

#[tokio::test]
async fn several_tool_calls_in_one_turn_run_in_order_with_canonical_names() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::tool_calls([
        ("a", "k8s.pods_list", r#"{"namespace":"shop"}"#),
        ("b", "k8s__pod_logs", r#"{"pod":"web-1"}"#),
    ]));
    h.script
        .push(ScriptedResponse::text("web-1 was OOMKilled."));
    let result = run_agent(h.ctx(config(IterationStrategy::Langchain, 5)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");

    let calls = h.tools.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].name, "k8s.pods_list");
    assert_eq!(calls[1].name, "k8s.pod_logs");
    assert_eq!(calls[1].arguments, r#"{"pod":"web-1"}"#);

    let second = &h.script.requests()[1].request.messages;
    let tools: Vec<(&str, &str)> = second
        .iter()
        .filter(|m| m.role == "tool")
        .map(|m| (m.tool_call_id.as_str(), m.tool_name.as_str()))
        .collect();
    assert_eq!(tools, vec![("a", "k8s.pods_list"), ("b", "k8s.pod_logs")]);
    assert!(
        second
            .last()
            .unwrap()
            .content
            .contains(r#"logs for {"pod":"web-1"}: OOMKilled"#)
    );
    let tool_events = h.events_of(T::LlmToolCall);
    assert_eq!(tool_events.len(), 2);
    assert_eq!(tool_events[1].metadata["tool_name"], "pod_logs");
    assert_eq!(
        h.script.requests()[0]
            .request
            .llm_config
            .as_ref()
            .unwrap()
            .backend,
        "langchain"
    );
}

#[tokio::test]
async fn unknown_tool_is_answered_with_the_available_tools() {
    let h = Harness::new().await;
    h.script
        .push(ScriptedResponse::tool_call("x", "k8s.nodes_delete", "{}"));
    h.script
        .push(ScriptedResponse::text("Could not delete; pods look fine."));
    let result = run_agent(h.ctx(config(IterationStrategy::NativeThinking, 5)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed);
    assert!(
        h.tools.calls().is_empty(),
        "unknown tools never reach the executor"
    );

    let ev = &h.events_of(T::LlmToolCall)[0];
    assert_eq!(ev.status, TimelineEventStatus::Failed);
    assert_eq!(ev.metadata["is_error"], true);
    let answer = h.script.requests()[1]
        .request
        .messages
        .last()
        .unwrap()
        .clone();
    assert_eq!(answer.role, "tool");
    assert_eq!(answer.tool_call_id, "x");
    assert!(
        answer.content.contains("unknown tool 'k8s.nodes_delete'"),
        "{}",
        answer.content
    );
    assert!(
        answer.content.contains("k8s.pods_list"),
        "{}",
        answer.content
    );
}

#[tokio::test]
async fn tool_errors_and_executor_failures_reach_the_model() {
    let tools = tarsy_engine::InMemoryToolExecutor::new()
        .with_tool("k8s.pods_list", "List pods", |call| {
            Ok(tarsy_core::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: "namespace shop not found".into(),
                is_error: true,
                recovered: None,
            })
        })
        .with_tool("k8s.pod_logs", "Logs", |_| {
            Err(tarsy_engine::ToolError::Unavailable(
                "connection refused".into(),
            ))
        });
    let h = Harness::with_tools(tools).await;
    h.script.push(ScriptedResponse::tool_calls([
        ("a", "k8s.pods_list", "{}"),
        ("b", "k8s.pod_logs", "{}"),
    ]));
    h.script
        .push(ScriptedResponse::text("The namespace is missing."));
    let result = run_agent(h.ctx(config(IterationStrategy::Langchain, 5)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed);
    let msgs = &h.script.requests()[1].request.messages;
    let tool_msgs: Vec<&str> = msgs
        .iter()
        .filter(|m| m.role == "tool")
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(tool_msgs[0], "namespace shop not found");
    assert!(
        tool_msgs[1].contains("connection refused"),
        "{}",
        tool_msgs[1]
    );
    let events = h.events_of(T::LlmToolCall);
    assert_eq!(events[0].status, TimelineEventStatus::Completed);
    assert_eq!(events[0].metadata["is_error"], true);
    assert_eq!(events[1].status, TimelineEventStatus::Failed);
}

#[tokio::test]
async fn llm_errors_become_error_events_and_feedback() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::error(
        "provider_error",
        "upstream 500",
        false,
    ));
    h.script.push(ScriptedResponse::text("Recovered answer."));
    let result = run_agent(h.ctx(config(IterationStrategy::NativeThinking, 5)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed);
    let errors = h.events_of(T::Error);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].content.contains("upstream 500"));
    assert_eq!(errors[0].metadata["code"], "provider_error");
    let last = h.script.requests()[1].last_message().to_string();
    assert!(
        last.contains("Error from previous attempt") && last.contains("upstream 500"),
        "{last}"
    );
    let llm = h.recorder.llm_interactions();
    assert!(
        llm[0]
            .error_message
            .as_deref()
            .unwrap()
            .contains("upstream 500")
    );
}

#[tokio::test]
async fn empty_turns_are_feedback_not_a_final_answer() {
    let h = Harness::new().await;
    h.script
        .push(ScriptedResponse::default().then_thinking("hmm"));
    h.script.push(ScriptedResponse::text("Final."));
    let result = run_agent(h.ctx(config(IterationStrategy::NativeThinking, 5)), None).await;
    assert_eq!(result.final_analysis.as_deref(), Some("Final."));
    assert_eq!(
        h.events_of(T::Error)[0].metadata,
        json!({"kind": "empty_response"})
    );
}

#[tokio::test]
async fn forced_conclusion_at_max_iterations_calls_without_tools() {
    let h = Harness::new().await;
    h.script
        .push(ScriptedResponse::tool_call("1", "k8s.pods_list", "{}"));
    h.script
        .push(ScriptedResponse::tool_call("2", "k8s.pods_list", "{}"));
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("Two listings, same picture.")
            .then_text("Best conclusion: ")
            .then_text("memory pressure."),
    );
    let result = run_agent(h.ctx(config(IterationStrategy::NativeThinking, 2)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some("Best conclusion: memory pressure.")
    );
    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 3);
    assert!(
        reqs[2].request.tools.is_empty(),
        "no tools at the forced conclusion"
    );
    assert!(
        reqs[2]
            .last_message()
            .contains("2 investigation iterations"),
        "{}",
        reqs[2].last_message()
    );
    let finals = h.events_of(T::FinalAnalysis);
    assert_eq!(finals.len(), 1);
    assert_eq!(finals[0].content, "Best conclusion: memory pressure.");
    // Like any final answer: the thinking and the streamed response, then
    // the conclusion; all three say the conclusion was forced.
    let events = h.events();
    let forced = &events[events.len() - 3..];
    assert_eq!(
        forced.iter().map(|e| e.event_type).collect::<Vec<_>>(),
        vec![T::LlmThinking, T::LlmResponse, T::FinalAnalysis]
    );
    assert_eq!(forced[1].content, "Best conclusion: memory pressure.");
    for e in forced {
        assert_eq!(e.metadata["forced_conclusion"], true, "{e:?}");
        assert_eq!(e.metadata["iterations_used"], 2, "{e:?}");
        assert_eq!(e.metadata["max_iterations"], 2, "{e:?}");
    }
    assert_eq!(forced[0].metadata["source"], "native");
    assert!(
        events[..events.len() - 3]
            .iter()
            .all(|e| e.metadata.get("forced_conclusion").is_none())
    );
    // The forced flag is on the streaming events from their creation.
    let published = h.recorder.published();
    let created = published
        .iter()
        .find(|p| {
            p.payload["type"] == "timeline_event.created"
                && p.payload["event_id"] == forced[1].id.as_str()
        })
        .unwrap();
    assert_eq!(created.payload["status"], "streaming");
    assert_eq!(created.payload["metadata"]["forced_conclusion"], true);
    let rec = h.recorder.llm_interactions();
    assert_eq!(
        rec[2].interaction_type,
        LlmInteractionType::ForcedConclusion
    );
    assert_eq!(rec[1].llm_request["iteration"], 2);
    assert_eq!(
        rec[2].llm_request["iteration"], 3,
        "the forced conclusion is the call after the last iteration"
    );
    assert_eq!(result.iterations, 2);
}

#[tokio::test]
async fn forced_conclusion_fails_when_the_last_interaction_failed() {
    let h = Harness::new().await;
    h.script
        .push(ScriptedResponse::tool_call("1", "k8s.pods_list", "{}"));
    h.script.push(ScriptedResponse::error(
        "invalid_request",
        "bad schema",
        false,
    ));
    let result = run_agent(h.ctx(config(IterationStrategy::Langchain, 2)), None).await;
    assert_eq!(result.status, ExecutionStatus::Failed);
    let err = result.error.unwrap();
    assert!(
        err.contains("max iterations (2) reached with last interaction failed"),
        "{err}"
    );
    assert!(err.contains("bad schema"), "{err}");
    assert_eq!(h.script.request_count(), 2, "no forced conclusion call");
}
