//! The timeline each agent of the reference implementation's pipeline
//! scenario records, replayed through the engine: per execution, the same
//! event types in the same order, the same status at creation (streamed or
//! recorded whole) and the metadata that scenario checks. Stage orchestration
//! (stage order, `user_question`, the executive summary) is outside the
//! engine; the agents' own events are all here. The model answers are this
//! test's own.

use serde_json::{Value, json};
use tarsy_core::{
    IterationStrategy, McpServerConfig, McpTransport, SummarizationConfig, TimelineEventType as T,
    ToolResult,
};
use tarsy_engine::{ChatContext, ExecutionContext, InMemoryToolExecutor, run_agent};
use tarsy_scripted_llm::{ScriptedChunk, ScriptedResponse};

use crate::common::{Harness, config};

/// How an event was announced when created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Born {
    /// `streaming`, completed later.
    Streamed,
    /// Recorded whole (`completed` at creation).
    Whole,
}
use Born::{Streamed, Whole};

fn server(name: &str) -> McpServerConfig {
    McpServerConfig {
        name: name.into(),
        transport: McpTransport::Stdio {
            command: "true".into(),
            args: vec![],
            env: Default::default(),
            cwd: None,
        },
        instructions: String::new(),
        // The scenario summarizes results over 100 tokens.
        summarization: SummarizationConfig {
            enabled: true,
            size_threshold_tokens: 100,
            summary_max_token_limit: 200,
        },
    }
}

fn static_result(
    content: String,
) -> impl Fn(&tarsy_core::ToolCall) -> Result<ToolResult, tarsy_engine::ToolError> {
    move |call| {
        Ok(ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: content.clone(),
            is_error: false,
            recovered: None,
        })
    }
}

/// The two MCP servers of the scenario: small results and two large ones
/// (over the summarization threshold).
fn tools() -> InMemoryToolExecutor {
    let large = |what: &str| format!("[{}]", vec![format!("{{\"{what}\":\"x\"}}"); 60].join(","));
    InMemoryToolExecutor::new()
        .with_static_tool("test-mcp.get_nodes", "Nodes", r#"[{"name":"node-a"}]"#)
        .with_tool("test-mcp.get_pods", "Pods", static_result(large("pod")))
        .with_static_tool("test-mcp.get_pod_logs", "Logs", r#"{"logs":"OOMKilled"}"#)
        .with_static_tool(
            "test-mcp.get_resource_config",
            "Limits",
            r#"{"memory":"512Mi"}"#,
        )
        .with_static_tool(
            "prometheus-mcp.query_metrics",
            "Metrics",
            r#"[{"value":"1"}]"#,
        )
        .with_tool(
            "prometheus-mcp.query_alerts",
            "Alerts",
            static_result(large("alert")),
        )
        .with_static_tool(
            "prometheus-mcp.query_slo",
            "SLOs",
            r#"[{"slo":"availability"}]"#,
        )
}

async fn harness() -> Harness {
    Harness::with_tools(tools()).await
}

fn ctx(
    h: &Harness,
    name: &str,
    strategy: IterationStrategy,
    max_iterations: u32,
) -> ExecutionContext {
    let mut cfg = config(strategy, max_iterations);
    cfg.display_name = name.into();
    cfg.mcp_servers = vec!["test-mcp".into(), "prometheus-mcp".into()];
    let mut ctx = h.ctx(cfg);
    ctx.mcp_servers = vec![server("test-mcp"), server("prometheus-mcp")];
    ctx
}

/// The execution's events as (type, how it was announced), in order.
fn timeline(h: &Harness) -> Vec<(T, Born)> {
    let published = h.recorder.published();
    h.events()
        .iter()
        .map(|e| {
            let created = published
                .iter()
                .find(|p| {
                    p.payload["type"] == "timeline_event.created"
                        && p.payload["event_id"] == e.id.as_str()
                })
                .unwrap_or_else(|| panic!("{:?} was never announced", e.event_type));
            let born = if created.payload["status"] == "streaming" {
                Streamed
            } else {
                Whole
            };
            (e.event_type, born)
        })
        .collect()
}

fn metadata_of(h: &Harness, t: T) -> Vec<Value> {
    h.events_of(t).into_iter().map(|e| e.metadata).collect()
}

#[tokio::test]
async fn native_thinking_investigation_with_two_servers_and_a_summary() {
    let h = harness().await;
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("Nodes and pods first.")
            .then_text("Looking at nodes and pods.")
            .then_tool_call("n", "test-mcp__get_nodes", "{}")
            .then_tool_call("p", "test-mcp__get_pods", r#"{"namespace":"default"}"#),
    );
    h.script
        .push(ScriptedResponse::text("Sixty pods, one OOMKilled."));
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("Memory next.")
            .then_text("Querying memory.")
            .then_tool_call("m", "prometheus-mcp__query_metrics", "{}"),
    );
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("It is OOM.")
            .then_text("One pod is OOMKilled."),
    );
    run_agent(
        ctx(&h, "DataCollector", IterationStrategy::NativeThinking, 3),
        None,
    )
    .await;
    assert_eq!(
        timeline(&h),
        vec![
            (T::LlmThinking, Streamed),
            (T::LlmResponse, Streamed),
            (T::LlmToolCall, Streamed),
            (T::LlmToolCall, Streamed),
            (T::McpToolSummary, Streamed),
            (T::LlmThinking, Streamed),
            (T::LlmResponse, Streamed),
            (T::LlmToolCall, Streamed),
            (T::LlmThinking, Streamed),
            (T::LlmResponse, Streamed),
            (T::FinalAnalysis, Whole),
        ]
    );
    let summary = &metadata_of(&h, T::McpToolSummary)[0];
    assert_eq!(summary["server_name"], "test-mcp");
    assert_eq!(summary["tool_name"], "get_pods");
    assert!(summary["original_tokens"].as_u64().unwrap() > 100);
    assert_eq!(summary["summarization_model"], "primary-model");
    let calls = metadata_of(&h, T::LlmToolCall);
    assert_eq!(calls[1]["server_name"], "test-mcp");
    assert_eq!(calls[1]["tool_name"], "get_pods");
    assert_eq!(calls[1]["arguments"], r#"{"namespace":"default"}"#);
}

#[tokio::test]
async fn react_investigation_records_raw_answer_thought_and_action() {
    let h = harness().await;
    h.script.push(ScriptedResponse::text(
        "Thought: Logs first.\nAction: test-mcp.get_pod_logs\nAction Input: {\"pod\":\"p1\"}",
    ));
    h.script.push(ScriptedResponse::text(
        "Thought: Alert history next.\nAction: prometheus-mcp.query_alerts\nAction Input: {}",
    ));
    h.script
        .push(ScriptedResponse::text("Three OOM alerts in an hour."));
    h.script.push(ScriptedResponse::text(
        "Thought: Repeated OOM kills.\nFinal Answer: Raise the memory limit.",
    ));
    run_agent(ctx(&h, "Remediator", IterationStrategy::React, 3), None).await;
    assert_eq!(
        timeline(&h),
        vec![
            (T::LlmResponse, Streamed),
            (T::LlmThinking, Whole),
            (T::LlmToolCall, Streamed),
            (T::LlmResponse, Streamed),
            (T::LlmThinking, Whole),
            (T::LlmToolCall, Streamed),
            (T::McpToolSummary, Streamed),
            (T::LlmResponse, Streamed),
            (T::LlmThinking, Whole),
            (T::FinalAnalysis, Whole),
        ]
    );
    assert!(
        metadata_of(&h, T::LlmThinking)
            .iter()
            .all(|m| m["source"] == "react")
    );
    assert_eq!(
        h.events_of(T::FinalAnalysis)[0].content,
        "Raise the memory limit."
    );
}

#[tokio::test]
async fn forced_conclusion_after_one_iteration() {
    let h = harness().await;
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("SLOs.")
            .then_text("Checking SLOs.")
            .then_tool_call("s", "prometheus-mcp__query_slo", r#"{"pod":"p1"}"#),
    );
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("Violated.")
            .then_text("The availability SLO is violated."),
    );
    run_agent(
        ctx(&h, "MetricsValidator", IterationStrategy::NativeThinking, 1),
        None,
    )
    .await;
    assert_eq!(
        timeline(&h),
        vec![
            (T::LlmThinking, Streamed),
            (T::LlmResponse, Streamed),
            (T::LlmToolCall, Streamed),
            (T::LlmThinking, Streamed),
            (T::LlmResponse, Streamed),
            (T::FinalAnalysis, Whole),
        ]
    );
    let forced = json!({"forced_conclusion": true, "iterations_used": 1, "max_iterations": 1});
    for e in &h.events()[3..] {
        for (k, v) in forced.as_object().unwrap() {
            assert_eq!(&e.metadata[k], v, "{:?}", e.event_type);
        }
    }
}

#[tokio::test]
async fn synthesis_with_thinking_and_google_search() {
    let h = harness().await;
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("Both validators agree.")
            .then_text("The limit is right; the SLO is violated.")
            .then(ScriptedChunk::GoogleSearch {
                queries: vec!["pod memory limits".into()],
                sources: vec![("https://example.org/limits".into(), "Limits".into())],
            }),
    );
    run_agent(
        ctx(
            &h,
            "SynthesisAgent",
            IterationStrategy::SynthesisNativeThinking,
            1,
        ),
        Some("investigations".into()),
    )
    .await;
    assert_eq!(
        timeline(&h),
        vec![
            (T::LlmThinking, Streamed),
            (T::LlmResponse, Streamed),
            (T::GoogleSearchResult, Whole),
            (T::FinalAnalysis, Whole),
        ]
    );
    let search = &h.events_of(T::GoogleSearchResult)[0];
    assert_eq!(
        search.content,
        "Google Search: 'pod memory limits' → Sources: Limits (https://example.org/limits)"
    );
    assert_eq!(search.metadata["source"], "gemini");
    assert_eq!(search.metadata["queries"][0], "pod memory limits");
    assert_eq!(
        search.metadata["sources"][0]["uri"],
        "https://example.org/limits"
    );
}

#[tokio::test]
async fn replica_and_plain_synthesis() {
    let h = harness().await;
    h.script.push(
        ScriptedResponse::default()
            .then_thinking("Scaling.")
            .then_text("Two to five replicas."),
    );
    run_agent(
        ctx(
            &h,
            "ScalingReviewer-1",
            IterationStrategy::NativeThinking,
            3,
        ),
        None,
    )
    .await;
    assert_eq!(
        timeline(&h),
        vec![
            (T::LlmThinking, Streamed),
            (T::LlmResponse, Streamed),
            (T::FinalAnalysis, Whole),
        ]
    );

    let h = harness().await;
    h.script
        .push(ScriptedResponse::text("Both replicas: two to five."));
    run_agent(
        ctx(&h, "SynthesisAgent", IterationStrategy::Synthesis, 1),
        Some("replicas".into()),
    )
    .await;
    assert_eq!(
        timeline(&h),
        vec![(T::LlmResponse, Streamed), (T::FinalAnalysis, Whole)]
    );
}

#[tokio::test]
async fn chat_turns_with_tools() {
    for (tool, args, large) in [
        ("test-mcp__get_pods", r#"{"namespace":"default"}"#, true),
        ("prometheus-mcp__query_slo", r#"{"pod":"p1"}"#, false),
    ] {
        let h = harness().await;
        h.script.push(
            ScriptedResponse::default()
                .then_thinking("Look it up.")
                .then_text("Checking.")
                .then_tool_call("c", tool, args),
        );
        if large {
            h.script
                .push(ScriptedResponse::text("One pod is OOMKilled."));
        }
        h.script.push(
            ScriptedResponse::default()
                .then_thinking("Answer.")
                .then_text("Here is the answer."),
        );
        let mut c = ctx(&h, "ChatAgent", IterationStrategy::NativeThinking, 5);
        c.chat = Some(ChatContext {
            question: "What happened?".into(),
            investigation_context: "history".into(),
        });
        run_agent(c, None).await;
        let mut expected = vec![
            (T::LlmThinking, Streamed),
            (T::LlmResponse, Streamed),
            (T::LlmToolCall, Streamed),
        ];
        if large {
            expected.push((T::McpToolSummary, Streamed));
        }
        expected.extend([
            (T::LlmThinking, Streamed),
            (T::LlmResponse, Streamed),
            (T::FinalAnalysis, Whole),
        ]);
        assert_eq!(timeline(&h), expected, "{tool}");
    }
}
