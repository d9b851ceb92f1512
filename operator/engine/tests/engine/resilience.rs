use std::sync::Arc;
use std::time::Duration;

use tarsy_core::{
    ExecutionStatus, IterationStrategy, LlmInteractionType, SummarizationConfig,
    TimelineEventStatus, TimelineEventType as T,
};
use tarsy_engine::fallback::{BreakerConfig, CircuitBreakers};
use tarsy_engine::{InMemoryToolExecutor, run_agent};
use tarsy_scripted_llm::ScriptedResponse;

use crate::common::{Harness, POD_LIST, config, default_tools, eventually, k8s_server, provider};

#[tokio::test]
async fn two_consecutive_timeouts_abort_and_cancel_the_rpcs() {
    let h = Harness::new().await;
    h.script
        .push(ScriptedResponse::text("Thinking...").then_hang());
    h.script.push(ScriptedResponse::hang());
    h.script.push(ScriptedResponse::text("never used"));
    let mut cfg = config(IterationStrategy::NativeThinking, 10);
    cfg.iteration_timeout = Duration::from_millis(300);
    let result = run_agent(h.ctx(cfg), None).await;
    assert_eq!(result.status, ExecutionStatus::Failed, "{result:?}");
    assert!(
        result
            .error
            .as_deref()
            .unwrap()
            .contains("2 consecutive iteration timeouts")
    );
    assert_eq!(h.script.request_count(), 2);
    assert!(
        h.script
            .wait_for_cancellations(2, Duration::from_secs(5))
            .await,
        "server saw the RPCs cancelled"
    );
    let errors = h.events_of(T::Error);
    assert_eq!(errors.len(), 2);
    assert!(errors.iter().all(|e| e.metadata["kind"] == "timeout"));
    let partial = &h.events_of(T::LlmResponse)[0];
    assert_eq!(partial.status, TimelineEventStatus::TimedOut);
    assert_eq!(partial.content, "Thinking...");
    assert!(
        h.recorder
            .llm_interactions()
            .iter()
            .all(|i| i.error_message.as_deref() == Some("iteration timed out"))
    );
}

#[tokio::test]
async fn a_timeout_followed_by_success_resets_the_streak() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::hang());
    h.script
        .push(ScriptedResponse::tool_call("1", "k8s.pods_list", "{}"));
    h.script.push(ScriptedResponse::hang());
    h.script.push(ScriptedResponse::text("Done."));
    let mut cfg = config(IterationStrategy::Langchain, 10);
    cfg.iteration_timeout = Duration::from_millis(300);
    let result = run_agent(h.ctx(cfg), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(result.iterations, 4);
}

/// A hung provider with a fallback: the call moves to the fallback when the
/// iteration timeout passes, instead of failing the execution after two
/// timeouts without ever trying it.
#[tokio::test]
async fn a_hung_provider_falls_back_on_the_iteration_timeout() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::hang());
    h.script
        .push(ScriptedResponse::text("Answer from the fallback."));
    let mut cfg = config(IterationStrategy::NativeThinking, 5);
    cfg.iteration_timeout = Duration::from_millis(300);
    cfg.llm_provider.fallback = vec![provider("secondary")];
    let breakers = Arc::new(CircuitBreakers::new(BreakerConfig {
        failure_threshold: 1,
        open_for: Duration::from_secs(60),
    }));
    let mut ctx = h.ctx(cfg);
    ctx.breakers = breakers.clone();
    let result = run_agent(ctx, None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some("Answer from the fallback.")
    );
    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].model(), "primary-model");
    assert_eq!(reqs[1].model(), "secondary-model");
    let fb = &h.events_of(T::ProviderFallback)[0];
    assert_eq!(fb.metadata["from"], "primary");
    assert_eq!(fb.metadata["to"], "secondary");
    assert!(fb.content.contains("iteration timeout"), "{}", fb.content);
    assert!(
        h.events_of(T::Error).is_empty(),
        "the iteration succeeded on the fallback"
    );
    assert!(breakers.is_open("primary"), "the hang counts as a failure");
}

#[tokio::test]
async fn slow_tools_time_out_the_iteration() {
    let tools = default_tools().with_delay("k8s.pods_list", Duration::from_secs(30));
    let h = Harness::with_tools(tools).await;
    h.script.push(ScriptedResponse::tool_calls([
        ("a", "k8s.pods_list", "{}"),
        ("b", "k8s.pod_logs", "{}"),
    ]));
    h.script
        .push(ScriptedResponse::text("Tools were slow; partial answer."));
    let mut cfg = config(IterationStrategy::NativeThinking, 5);
    cfg.iteration_timeout = Duration::from_millis(300);
    let result = run_agent(h.ctx(cfg), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    let ev = &h.events_of(T::LlmToolCall)[0];
    assert_eq!(ev.status, TimelineEventStatus::TimedOut);
    // Both calls are answered, so the next request is valid for providers.
    let msgs = &h.script.requests()[1].request.messages;
    let answered: Vec<&str> = msgs
        .iter()
        .filter(|m| m.role == "tool")
        .map(|m| m.tool_call_id.as_str())
        .collect();
    assert_eq!(answered, vec!["a", "b"]);
    assert!(
        msgs.iter()
            .any(|m| m.role == "tool" && m.content.contains("timed out"))
    );
}

#[tokio::test]
async fn cancellation_mid_stream_stops_the_execution_and_the_rpc() {
    let h = Harness::new().await;
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("Looking at ")
            .then_text("Partial")
            .then_hang(),
    );
    let ctx = h.ctx(config(IterationStrategy::NativeThinking, 5));
    let token = ctx.cancel.clone();
    let task = tokio::spawn(run_agent(ctx, None));
    let rec = h.recorder.clone();
    eventually(|| rec.events().iter().any(|e| e.event_type == T::LlmResponse)).await;
    token.cancel();
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.status, ExecutionStatus::Cancelled);
    assert!(
        h.script
            .wait_for_cancellations(1, Duration::from_secs(5))
            .await
    );
    for e in h.events() {
        assert_eq!(e.status, TimelineEventStatus::Cancelled, "{e:?}");
    }
    assert_eq!(h.events_of(T::LlmResponse)[0].content, "Partial");
    assert!(h.events_of(T::FinalAnalysis).is_empty());
}

#[tokio::test]
async fn session_deadline_is_timed_out_not_cancelled() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::hang());
    let ctx = h
        .ctx(config(IterationStrategy::React, 5))
        .with_timeout(Duration::from_millis(300));
    let result = run_agent(ctx, None).await;
    assert_eq!(result.status, ExecutionStatus::TimedOut);
    assert!(
        h.script
            .wait_for_cancellations(1, Duration::from_secs(5))
            .await
    );
}

#[tokio::test]
async fn cancellation_during_a_tool_call_closes_its_event() {
    let tools = default_tools().with_delay("k8s.pods_list", Duration::from_secs(30));
    let h = Harness::with_tools(tools).await;
    h.script
        .push(ScriptedResponse::tool_call("a", "k8s.pods_list", "{}"));
    let ctx = h.ctx(config(IterationStrategy::NativeThinking, 5));
    let token = ctx.cancel.clone();
    let task = tokio::spawn(run_agent(ctx, None));
    let tools = h.tools.clone();
    eventually(|| !tools.calls().is_empty()).await;
    token.cancel();
    let result = task.await.unwrap();
    assert_eq!(result.status, ExecutionStatus::Cancelled);
    assert_eq!(
        h.events_of(T::LlmToolCall)[0].status,
        TimelineEventStatus::Cancelled
    );
}

fn big_pod_list() -> String {
    (0..60)
        .map(|i| format!("web-{i} 1/1 Running 0 3d\n"))
        .collect()
}

#[tokio::test]
async fn large_results_are_summarized_streamed_and_recorded() {
    let big = big_pod_list();
    let tools = InMemoryToolExecutor::new().with_static_tool("k8s.pods_list", "List pods", &big);
    let h = Harness::with_tools(tools).await;
    h.script
        .push(ScriptedResponse::tool_call("a", "k8s.pods_list", "{}"));
    h.script.push(
        ScriptedResponse::text("60 pods, ")
            .then_text("all running.")
            .then_usage(40, 8),
    );
    h.script
        .push(ScriptedResponse::text("Nothing is crashing."));
    let mut ctx = h.ctx(config(IterationStrategy::NativeThinking, 5));
    ctx.mcp_servers = vec![k8s_server(SummarizationConfig {
        enabled: true,
        size_threshold_tokens: 100,
        summary_max_token_limit: 50,
    })];
    let result = run_agent(ctx, None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(result.usage.input_tokens, 40, "summary tokens are counted");

    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 3);
    let summary_req = &reqs[1];
    assert!(summary_req.request.tools.is_empty());
    assert!(
        summary_req.last_message().contains("web-59"),
        "raw result goes to the summarizer"
    );
    assert!(
        summary_req.system_prompt().contains("50"),
        "summary token limit in the prompt"
    );
    let tool_msg = reqs[2]
        .request
        .messages
        .iter()
        .find(|m| m.role == "tool")
        .unwrap();
    assert!(
        tool_msg.content.contains("60 pods, all running."),
        "{}",
        tool_msg.content
    );
    assert!(
        !tool_msg.content.contains("web-59"),
        "the model sees the summary, not the raw result"
    );

    assert_eq!(
        h.event_types(),
        vec![T::LlmToolCall, T::McpToolSummary, T::FinalAnalysis]
            .into_iter()
            .fold(Vec::new(), |mut v, t| {
                if t == T::FinalAnalysis {
                    v.push(T::LlmResponse);
                }
                v.push(t);
                v
            })
    );
    assert_eq!(
        h.events_of(T::LlmToolCall)[0].content,
        big,
        "the raw result is on the tool event"
    );
    let summary = &h.events_of(T::McpToolSummary)[0];
    assert_eq!(summary.content, "60 pods, all running.");
    assert_eq!(summary.metadata["server_name"], "k8s");
    assert_eq!(summary.metadata["tool_name"], "pods_list");
    // How big the result was (estimated tokens) and which model condensed it.
    assert_eq!(
        summary.metadata["original_tokens"],
        big.len().div_ceil(4) as u64
    );
    assert_eq!(summary.metadata["summarization_model"], "primary-model");
    assert_eq!(summary.status, TimelineEventStatus::Completed);
    let rec = h.recorder.llm_interactions();
    assert_eq!(rec[1].interaction_type, LlmInteractionType::Summarization);
    assert!(
        rec[1].llm_request["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("web-59")
    );
    assert!(rec[1].last_message_id.is_none(), "self-contained call");
}

#[tokio::test]
async fn summarization_failure_falls_back_to_the_raw_result() {
    let big = big_pod_list();
    let tools = InMemoryToolExecutor::new().with_static_tool("k8s.pods_list", "List pods", &big);
    let h = Harness::with_tools(tools).await;
    h.script
        .push(ScriptedResponse::tool_call("a", "k8s.pods_list", "{}"));
    h.script.push(ScriptedResponse::text("60 pods").then(
        tarsy_scripted_llm::ScriptedChunk::Error {
            message: "stream broke".into(),
            code: "partial_stream_error".into(),
            retryable: false,
        },
    ));
    h.script
        .push(ScriptedResponse::text("Nothing is crashing."));
    let mut ctx = h.ctx(config(IterationStrategy::Langchain, 5));
    ctx.mcp_servers = vec![k8s_server(SummarizationConfig {
        enabled: true,
        size_threshold_tokens: 100,
        summary_max_token_limit: 50,
    })];
    let result = run_agent(ctx, None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    let tool_msg = h.script.requests()[2]
        .request
        .messages
        .iter()
        .find(|m| m.role == "tool")
        .unwrap()
        .clone();
    assert_eq!(tool_msg.content, big, "fail-open: raw result");
    let summary = &h.events_of(T::McpToolSummary)[0];
    assert_eq!(summary.status, TimelineEventStatus::Failed);
    let rec = &h.recorder.llm_interactions()[1];
    assert_eq!(rec.interaction_type, LlmInteractionType::Summarization);
    assert!(
        rec.error_message
            .as_deref()
            .unwrap()
            .contains("stream broke")
    );
    assert!(
        h.events_of(T::Error).is_empty(),
        "a failed summary is not an agent error"
    );
}

#[tokio::test]
async fn small_results_and_servers_without_summarization_are_not_summarized() {
    let h = Harness::new().await;
    h.script
        .push(ScriptedResponse::tool_call("a", "k8s.pods_list", "{}"));
    h.script.push(ScriptedResponse::text("ok"));
    let mut ctx = h.ctx(config(IterationStrategy::Langchain, 5));
    ctx.mcp_servers = vec![k8s_server(SummarizationConfig {
        enabled: false,
        size_threshold_tokens: 1,
        summary_max_token_limit: 50,
    })];
    let result = run_agent(ctx, None).await;
    assert_eq!(result.status, ExecutionStatus::Completed);
    assert_eq!(h.script.request_count(), 2);
    assert!(h.events_of(T::McpToolSummary).is_empty());
}

#[tokio::test]
async fn old_tool_results_are_pruned_but_reasoning_is_kept() {
    let big = "x".repeat(3000);
    let tools = InMemoryToolExecutor::new().with_static_tool("k8s.pods_list", "List pods", &big);
    let h = Harness::with_tools(tools).await;
    for i in 0..4 {
        h.script.push(
            ScriptedResponse::text(format!("Reasoning about step {i}.")).then_tool_call(
                format!("c{i}"),
                "k8s.pods_list",
                "{}",
            ),
        );
    }
    h.script.push(ScriptedResponse::text("Concluded."));
    let mut cfg = config(IterationStrategy::NativeThinking, 10);
    cfg.llm_provider.context_window_tokens = Some(4000);
    let result = run_agent(h.ctx(cfg), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");

    let last = &h.script.requests()[4].request.messages;
    let tool_contents: Vec<&str> = last
        .iter()
        .filter(|m| m.role == "tool")
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(tool_contents.len(), 4);
    assert_ne!(tool_contents[0], big, "oldest result pruned");
    assert!(
        tool_contents[0].contains("trimmed")
            || tool_contents[0].contains("removed to save context"),
        "{}",
        tool_contents[0]
    );
    assert_eq!(tool_contents[3], big, "newest result intact");
    let reasoning: Vec<&str> = last
        .iter()
        .filter(|m| m.role == "assistant")
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        reasoning,
        vec![
            "Reasoning about step 0.",
            "Reasoning about step 1.",
            "Reasoning about step 2.",
            "Reasoning about step 3."
        ]
    );
    // The message table keeps the full record.
    let stored: Vec<_> = h
        .recorder
        .messages()
        .into_iter()
        .filter(|m| m.role == tarsy_core::MessageRole::Tool)
        .collect();
    assert!(stored.iter().all(|m| m.content == big));
}

#[tokio::test]
async fn single_results_are_capped_to_the_window_share() {
    let big = "y".repeat(10_000);
    let tools = InMemoryToolExecutor::new().with_static_tool("k8s.pods_list", "List pods", &big);
    let h = Harness::with_tools(tools).await;
    h.script
        .push(ScriptedResponse::tool_call("a", "k8s.pods_list", "{}"));
    h.script.push(ScriptedResponse::text("ok"));
    let mut cfg = config(IterationStrategy::Langchain, 5);
    cfg.llm_provider.context_window_tokens = Some(5000); // 30 % = 1500 tokens = 6000 chars
    run_agent(h.ctx(cfg), None).await;
    let tool_msg = h.script.requests()[1]
        .request
        .messages
        .iter()
        .find(|m| m.role == "tool")
        .unwrap()
        .content
        .clone();
    assert!(tool_msg.starts_with(&"y".repeat(6000)));
    assert!(!tool_msg.starts_with(&"y".repeat(6001)));
    assert!(tool_msg.contains("6000 of 10000"), "{}", &tool_msg[6000..]);
}

#[tokio::test]
async fn context_overflow_compacts_the_conversation_and_retries_once() {
    let h = Harness::new().await;
    for i in 0..3 {
        h.script
            .push(ScriptedResponse::text(format!("Step {i}.")).then_tool_call(
                format!("c{i}"),
                "k8s.pods_list",
                "{}",
            ));
    }
    h.script.push(ScriptedResponse::error(
        "context_overflow",
        "prompt is too long",
        false,
    ));
    h.script.push(ScriptedResponse::text(
        "Pods listed three times; web-1 crashlooping.",
    ));
    h.script
        .push(ScriptedResponse::text("web-1 is crashlooping."));
    let result = run_agent(h.ctx(config(IterationStrategy::NativeThinking, 10)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some("web-1 is crashlooping.")
    );

    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 6);
    let compaction = &reqs[4];
    assert!(
        compaction.system_prompt().contains("condense"),
        "{}",
        compaction.system_prompt()
    );
    assert!(compaction.last_message().contains("Step 0."));
    assert!(
        !compaction.last_message().contains("Step 2."),
        "recent exchanges are kept, not summarized"
    );
    let retry = &reqs[5].request.messages;
    assert_eq!(retry[0].role, "system");
    assert!(retry[1].content.contains("web-1"), "the task is pinned");
    assert!(retry[2].content.contains("Pods listed three times"));
    assert!(
        !retry.iter().any(|m| m.content == "Step 0."),
        "old exchange replaced"
    );
    assert!(retry.iter().any(|m| m.content == "Step 1."));
    assert!(retry.iter().any(|m| m.content == "Step 2."));
    let types: Vec<_> = h
        .recorder
        .llm_interactions()
        .iter()
        .map(|i| i.interaction_type)
        .collect();
    assert!(types.contains(&LlmInteractionType::Compaction));
    assert!(
        h.events_of(T::Error).is_empty(),
        "recovered overflow is not an error"
    );
    assert!(h.events().iter().all(|e| e.event_type != T::McpToolSummary));
    let _ = POD_LIST;
}

#[tokio::test]
async fn retryable_failures_move_to_the_fallback_provider() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::error(
        "max_retries",
        "rate limited after 3 retries",
        true,
    ));
    h.script
        .push(ScriptedResponse::text("Answer from the fallback."));
    let mut cfg = config(IterationStrategy::NativeThinking, 5);
    let mut secondary = provider("secondary");
    secondary.provider_type = tarsy_core::ProviderType::Anthropic;
    cfg.llm_provider.fallback = vec![secondary];
    let result = run_agent(h.ctx(cfg), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    let reqs = h.script.requests();
    assert_eq!(reqs[0].model(), "primary-model");
    assert_eq!(reqs[1].model(), "secondary-model");
    assert_eq!(reqs[1].provider(), "anthropic");
    assert_eq!(
        reqs[1].request.llm_config.as_ref().unwrap().backend,
        "langchain"
    );
    let fb = &h.events_of(T::ProviderFallback)[0];
    assert_eq!(fb.metadata["from"], "primary");
    assert_eq!(fb.metadata["to"], "secondary");
    assert!(fb.content.contains("rate limited"));
    assert!(
        h.events_of(T::Error).is_empty(),
        "the same iteration succeeded on the fallback"
    );
    let recs = h.recorder.llm_interactions();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].provider, "primary");
    assert!(recs[0].error_message.is_some());
    assert_eq!(recs[1].provider, "secondary");
}

#[tokio::test]
async fn open_circuits_are_skipped_by_later_executions() {
    let h = Harness::new().await;
    let breakers = Arc::new(CircuitBreakers::new(BreakerConfig {
        failure_threshold: 1,
        open_for: Duration::from_secs(60),
    }));
    let mut cfg = config(IterationStrategy::Langchain, 5);
    cfg.llm_provider.fallback = vec![provider("secondary")];
    h.script.push(ScriptedResponse::error(
        "max_retries",
        "rate limited after 3 retries",
        true,
    ));
    h.script.push(ScriptedResponse::text("first"));
    h.script.push(ScriptedResponse::text("second"));
    let mut ctx = h.ctx(cfg.clone());
    ctx.breakers = breakers.clone();
    assert_eq!(
        run_agent(ctx, None).await.status,
        ExecutionStatus::Completed
    );
    assert!(breakers.is_open("primary"));

    let mut ctx = h.ctx(cfg);
    ctx.execution_id = "a-later-execution".into();
    ctx.breakers = breakers.clone();
    let result = run_agent(ctx, None).await;
    assert_eq!(result.final_analysis.as_deref(), Some("second"));
    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 3, "no call to the open provider");
    assert_eq!(reqs[2].model(), "secondary-model");
    let fallbacks = h.events_of(T::ProviderFallback);
    assert_eq!(fallbacks.len(), 2);
    assert!(fallbacks[1].content.contains("circuit breaker open"));
}

/// A retryable failure without a fallback is fed back to the model, whether
/// the provider reported it or the RPC failed in a way other than an
/// unreachable service (an overloaded one here).
#[tokio::test]
async fn without_a_fallback_retryable_errors_are_fed_back() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::error(
        "max_retries",
        "rate limited after 3 retries",
        true,
    ));
    h.script
        .push(ScriptedResponse::grpc_error(8, "too many requests"));
    h.script.push(ScriptedResponse::text("ok"));
    let result = run_agent(h.ctx(config(IterationStrategy::Langchain, 5)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed);
    assert_eq!(result.iterations, 3);
    let errors = h.events_of(T::Error);
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[0].metadata["code"], "max_retries");
    assert_eq!(errors[1].metadata["code"], "transport");
    assert_eq!(h.script.request_count(), 3, "no attempt repeated");
}

#[tokio::test]
async fn rejected_credentials_fail_at_once_instead_of_looping() {
    for strategy in [IterationStrategy::Langchain, IterationStrategy::React] {
        let h = Harness::new().await;
        h.script.push(ScriptedResponse::error(
            "credentials",
            "API key invalid",
            false,
        ));
        // Would answer if the engine (wrongly) tried again.
        h.script
            .push(ScriptedResponse::text("should never be requested"));
        let result = run_agent(h.ctx(config(strategy, 5)), None).await;
        assert_eq!(result.status, ExecutionStatus::Failed, "{strategy}");
        let error = result.error.unwrap();
        assert!(
            error.contains("API key invalid") && error.contains("credentials"),
            "{error}"
        );
        assert_eq!(
            h.script.requests().len(),
            1,
            "{strategy}: no second provider call"
        );
        assert_eq!(h.events_of(T::Error).len(), 1);
        assert!(h.events_of(T::FinalAnalysis).is_empty());
    }
}

#[tokio::test]
async fn storage_failure_fails_the_execution_with_the_reason() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::text("x"));
    h.recorder.fail_writes(true);
    let result = run_agent(h.ctx(config(IterationStrategy::React, 5)), None).await;
    assert_eq!(result.status, ExecutionStatus::Failed);
    assert!(
        result
            .error
            .unwrap()
            .contains("recording the execution failed")
    );
}

#[tokio::test]
async fn parallel_agents_get_their_routed_scripts() {
    let h = Harness::new().await;
    h.script.push_route(
        "KubernetesAgent-1",
        ScriptedResponse::text("Final Answer: from one"),
    );
    h.script.push_route(
        "KubernetesAgent-2",
        ScriptedResponse::text("Final Answer: from two"),
    );
    let mut a = config(IterationStrategy::React, 3);
    a.display_name = "KubernetesAgent-1".into();
    let mut b = config(IterationStrategy::React, 3);
    b.display_name = "KubernetesAgent-2".into();
    let (ra, rb) = tokio::join!(run_agent(h.ctx(a), None), run_agent(h.ctx(b), None));
    assert_eq!(ra.final_analysis.as_deref(), Some("from one"));
    assert_eq!(rb.final_analysis.as_deref(), Some("from two"));
    let routes: Vec<_> = h.script.requests().into_iter().map(|r| r.route).collect();
    assert!(routes.contains(&Some("KubernetesAgent-1".into())));
    assert!(routes.contains(&Some("KubernetesAgent-2".into())));
}

#[tokio::test]
async fn an_exhausted_script_is_a_clear_error_not_a_hang() {
    let h = Harness::new().await;
    let result = run_agent(h.ctx(config(IterationStrategy::SingleCall, 1)), None).await;
    assert_eq!(result.status, ExecutionStatus::Failed);
    assert!(result.error.unwrap().contains("no response left"));
    assert!(!h.script.requests()[0].scripted);
}
