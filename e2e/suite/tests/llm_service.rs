//! The engine against the real Python LLM service: Rust engine → gRPC →
//! `tarsy-llm-service` (LangChain, OpenAI provider) → HTTP → a fake
//! OpenAI-compatible endpoint, and back.
//!
//! Needs the service's virtualenv: run `bash llm-service/ci.sh` first (see
//! `tarsy_e2e::llm_service` for where the console script is looked up).
//! Without it these tests fail; they never skip.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tarsy_core::{
    ExecutionStatus, IterationStrategy, LlmProviderConfig, McpServerConfig, McpTransport,
    ProviderType, ResolvedAgentConfig, SummarizationConfig, TimelineEventStatus,
    TimelineEventType as T, ToolResult,
};
use tarsy_e2e::{FakeOpenAi, FakeReply, LlmService};
use tarsy_engine::memory::MemoryRecorder;
use tarsy_engine::{ExecutionContext, ExecutionResult, GrpcLlmClient, InMemoryToolExecutor};

/// The variable the service reads the key from; set only in the child's
/// environment, so it proves the key travelled by name, not by value.
const KEY_ENV: &str = "TARSY_E2E_OPENAI_KEY";
const KEY: &str = "sk-e2e-not-a-real-key";
const MODEL: &str = "gpt-4o-mini";
const POD_LIST: &str = "NAME READY STATUS RESTARTS\nweb-1 0/1 CrashLoopBackOff 7";
const FINAL: &str = "Root cause: web-1 is OOMKilled; raise its memory limit to 512Mi.";

fn provider(base_url: String) -> LlmProviderConfig {
    LlmProviderConfig {
        name: "openai-compatible".into(),
        provider_type: ProviderType::Openai,
        model: MODEL.into(),
        api_key_env: Some(KEY_ENV.into()),
        credentials_env: None,
        base_url: Some(base_url),
        project: None,
        location: None,
        native_tools: Default::default(),
        max_tool_result_tokens: None,
        context_window_tokens: None,
        script: None,
        fallback: vec![],
        price: None,
    }
}

fn config(base_url: String, max_iterations: u32) -> ResolvedAgentConfig {
    let strategy = IterationStrategy::Langchain;
    ResolvedAgentConfig {
        agent_name: "KubernetesAgent".into(),
        display_name: "KubernetesAgent".into(),
        iteration_strategy: strategy,
        backend: strategy.backend(),
        llm_provider: provider(base_url),
        max_iterations,
        iteration_timeout: Duration::from_secs(30),
        mcp_servers: vec!["kubernetes".into()],
        tool_filter: Default::default(),
        custom_instructions: String::new(),
        native_tools_override: None,
        fail_on_unavailable_server: false,
        budget: None,
    }
}

struct Setup {
    fake: FakeOpenAi,
    service: Arc<LlmService>,
    tools: Arc<InMemoryToolExecutor>,
    recorder: Arc<MemoryRecorder>,
}

impl Setup {
    async fn new() -> Self {
        let fake = FakeOpenAi::start().await.unwrap();
        // One service process for both tests: Python start-up is the slow
        // part, and each request names its own fake endpoint.
        let service = LlmService::shared(&[(KEY_ENV, KEY)])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let tools = InMemoryToolExecutor::new().with_tool(
            "kubernetes.pods_list",
            "List the pods of a namespace",
            |call| {
                Ok(ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: POD_LIST.into(),
                    is_error: false,
                    recovered: None,
                })
            },
        );
        Self {
            fake,
            service,
            tools: Arc::new(tools),
            recorder: Arc::new(MemoryRecorder::new()),
        }
    }

    async fn run(&self, max_iterations: u32) -> ExecutionResult {
        let client = GrpcLlmClient::connect(&self.service.endpoint())
            .await
            .unwrap();
        let mut ctx = ExecutionContext::new(
            "session-e2e",
            "stage-1",
            "exec-e2e",
            "PodCrashLooping",
            r#"{"pod":"web-1","namespace":"shop"}"#,
            config(self.fake.base_url(), max_iterations),
            Arc::new(client),
            self.tools.clone(),
            self.recorder.clone(),
            self.recorder.clone(),
        )
        .with_timeout(Duration::from_secs(60));
        ctx.mcp_servers = vec![McpServerConfig {
            name: "kubernetes".into(),
            transport: McpTransport::Stdio {
                command: "true".into(),
                args: vec![],
                env: Default::default(),
                cwd: None,
            },
            instructions: "Read-only cluster access.".into(),
            summarization: SummarizationConfig::default(),
        }];
        tarsy_engine::run_agent(ctx, None).await
    }
}

fn args(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("arguments {s:?} are not JSON: {e}"))
}

#[tokio::test]
async fn multi_turn_tool_calling_round_trips_through_the_real_service() {
    let s = Setup::new().await;
    s.fake.push(
        FakeReply::tool_call(
            "call_pods_1",
            "kubernetes__pods_list",
            r#"{"namespace":"shop"}"#,
        )
        .with_usage(120, 18),
    );
    s.fake.push(
        FakeReply::text(&[
            "Root cause: web-1 is OOMKilled; ",
            "raise its memory limit to 512Mi.",
        ])
        .with_usage(210, 25),
    );

    let result = s.run(5).await;

    // What the user gets: the model's second-turn answer.
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(result.final_analysis.as_deref(), Some(FINAL));
    assert_eq!(result.iterations, 2);
    assert_eq!(result.usage.input_tokens, 330, "{:?}", result.usage);
    assert_eq!(result.usage.output_tokens, 43);
    assert_eq!(result.usage.total_tokens, 373);

    // The tool ran once, with the arguments the model streamed in pieces.
    let calls = s.tools.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].name, "kubernetes.pods_list");
    assert_eq!(calls[0].id, "call_pods_1");
    assert_eq!(args(&calls[0].arguments), json!({"namespace": "shop"}));

    // What went over the wire to the provider.
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    for r in &reqs {
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.body["model"], MODEL);
        assert_eq!(r.body["stream"], true);
        assert_eq!(r.authorization.as_deref(), Some(&*format!("Bearer {KEY}")));
        assert_eq!(r.tool_names(), vec!["kubernetes__pods_list"]);
    }
    assert_eq!(reqs[0].roles(), vec!["system", "user"]);
    let first = reqs[0].messages();
    assert!(
        first[1]["content"].as_str().unwrap().contains("web-1"),
        "the alert reaches the model: {}",
        first[1]
    );

    // Turn 2 carries the assistant's tool call and the tool's result.
    assert_eq!(reqs[1].roles(), vec!["system", "user", "assistant", "tool"]);
    let second = reqs[1].messages();
    assert_eq!(second[0], first[0], "same system prompt");
    let call = &second[2]["tool_calls"][0];
    assert_eq!(call["id"], "call_pods_1");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "kubernetes__pods_list");
    assert_eq!(
        args(call["function"]["arguments"].as_str().unwrap()),
        json!({"namespace": "shop"})
    );
    assert_eq!(second[3]["tool_call_id"], "call_pods_1");
    assert_eq!(second[3]["content"], POD_LIST);

    // The timeline the dashboard shows.
    let events = s.recorder.events();
    let types: Vec<T> = events.iter().map(|e| e.event_type).collect();
    assert_eq!(
        types.iter().filter(|t| **t == T::LlmToolCall).count(),
        1,
        "{types:?}"
    );
    assert_eq!(types.last(), Some(&T::FinalAnalysis), "{types:?}");
    let tool = events
        .iter()
        .find(|e| e.event_type == T::LlmToolCall)
        .unwrap();
    assert_eq!(tool.status, TimelineEventStatus::Completed);
    assert_eq!(tool.metadata["server_name"], "kubernetes");
    assert_eq!(tool.metadata["tool_name"], "pods_list");
    assert_eq!(
        args(tool.metadata["arguments"].as_str().unwrap()),
        json!({"namespace": "shop"})
    );
    assert_eq!(tool.content, POD_LIST);
    let last = events.last().unwrap();
    assert_eq!(last.status, TimelineEventStatus::Completed);
    assert_eq!(last.content, FINAL);
    assert!(
        events.iter().all(|e| e.event_type != T::Error),
        "{events:#?}"
    );

    // Per-call records carry the provider's usage.
    let llm = s.recorder.llm_interactions();
    assert_eq!(llm.len(), 2);
    let usage: Vec<(i64, i64)> = llm
        .iter()
        .map(|i| {
            let u = i.usage.unwrap();
            (u.input_tokens, u.output_tokens)
        })
        .collect();
    assert_eq!(usage, vec![(120, 18), (210, 25)]);

    // The service logged the calls but neither the key nor message bodies.
    let log = s.service.log_lines().join("\n");
    assert!(!log.contains(KEY), "API key in the service log:\n{log}");
    assert!(
        !log.contains("CrashLoopBackOff"),
        "message body in the service log:\n{log}"
    );
    assert_eq!(s.fake.unused_replies(), 0);
}

#[tokio::test]
async fn rejected_credentials_fail_the_execution_without_retries() {
    let s = Setup::new().await;
    s.fake.push(FakeReply::error(
        401,
        "Incorrect API key provided.",
        "invalid_request_error",
        "invalid_api_key",
    ));
    // A retry would find no scripted reply and be recorded as a request.
    // One iteration: the engine makes exactly one call, so every extra HTTP
    // request would be the service retrying.

    let started = Instant::now();
    let result = s.run(1).await;
    let took = started.elapsed();

    assert_eq!(result.status, ExecutionStatus::Failed, "{result:?}");
    let error = result.error.as_deref().unwrap_or_default();
    assert!(error.contains("credentials"), "{error}");
    assert_eq!(result.final_analysis, None);

    assert_eq!(
        s.fake.requests().len(),
        1,
        "the service must not retry a 401: {:#?}",
        s.fake.requests()
    );
    assert_eq!(s.recorder.llm_interactions().len(), 1);
    // Retry backoffs start at 1 s; a non-retryable error returns at once.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(s.tools.calls().is_empty());

    let errors: Vec<_> = s
        .recorder
        .events()
        .into_iter()
        .filter(|e| e.event_type == T::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].metadata["code"], "credentials");
    assert_eq!(errors[0].metadata["retryable"], false);
    assert!(
        s.recorder
            .events()
            .iter()
            .all(|e| e.event_type != T::FinalAnalysis)
    );
}
