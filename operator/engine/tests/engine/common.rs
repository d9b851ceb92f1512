//! Shared harness: a scripted LLM server reached through the real gRPC
//! client, in-memory tools and an in-memory recorder.

use std::sync::Arc;
use std::time::Duration;

use tarsy_core::{
    IterationStrategy, LlmProviderConfig, McpServerConfig, McpTransport, ProviderType,
    ResolvedAgentConfig, SummarizationConfig, TimelineEvent, TimelineEventType,
};
use tarsy_engine::memory::MemoryRecorder;
use tarsy_engine::{ExecutionContext, GrpcLlmClient, InMemoryToolExecutor, LlmClient};
use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer};

pub const POD_LIST: &str = "NAME READY STATUS RESTARTS\nweb-1 0/1 CrashLoopBackOff 7";

pub fn provider(name: &str) -> LlmProviderConfig {
    LlmProviderConfig {
        name: name.into(),
        provider_type: ProviderType::Google,
        model: format!("{name}-model"),
        api_key_env: Some("GOOGLE_API_KEY".into()),
        credentials_env: None,
        base_url: None,
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

pub fn config(strategy: IterationStrategy, max_iterations: u32) -> ResolvedAgentConfig {
    ResolvedAgentConfig {
        agent_name: "KubernetesAgent".into(),
        display_name: "KubernetesAgent".into(),
        iteration_strategy: strategy,
        backend: strategy.backend(),
        llm_provider: provider("primary"),
        max_iterations,
        iteration_timeout: Duration::from_secs(10),
        mcp_servers: vec!["k8s".into()],
        tool_filter: Default::default(),
        custom_instructions: String::new(),
        native_tools_override: None,
        fail_on_unavailable_server: false,
        budget: None,
    }
}

pub fn k8s_server(summarization: SummarizationConfig) -> McpServerConfig {
    McpServerConfig {
        name: "k8s".into(),
        transport: McpTransport::Stdio {
            command: "true".into(),
            args: vec![],
            env: Default::default(),
            cwd: None,
        },
        instructions: "Use kubectl-style tools read-only.".into(),
        summarization,
    }
}

pub fn default_tools() -> InMemoryToolExecutor {
    InMemoryToolExecutor::new()
        .with_static_tool("k8s.pods_list", "List pods in a namespace", POD_LIST)
        .with_tool("k8s.pod_logs", "Logs of a pod", |call| {
            Ok(tarsy_core::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: format!("logs for {}: OOMKilled", call.arguments),
                is_error: false,
                recovered: None,
            })
        })
}

/// The context every harness gives an execution, with `llm` as its model.
pub fn execution_context(
    config: ResolvedAgentConfig,
    llm: Arc<dyn LlmClient>,
    tools: Arc<InMemoryToolExecutor>,
    recorder: Arc<MemoryRecorder>,
) -> ExecutionContext {
    let mut ctx = ExecutionContext::new(
        "session-1",
        "stage-1",
        format!("exec-{}", config.display_name),
        "PodCrashLooping",
        r#"{"pod":"web-1","namespace":"shop"}"#,
        config,
        llm,
        tools,
        recorder.clone(),
        recorder,
    );
    ctx.mcp_servers = vec![k8s_server(SummarizationConfig::default())];
    ctx
}

pub struct Harness {
    /// Keeps the server running for the test's lifetime.
    _server: ScriptedLlmServer,
    pub script: ScriptedLlm,
    pub client: Arc<GrpcLlmClient>,
    pub recorder: Arc<MemoryRecorder>,
    pub tools: Arc<InMemoryToolExecutor>,
}

impl Harness {
    pub async fn new() -> Self {
        Self::with_tools(default_tools()).await
    }

    pub async fn with_tools(tools: InMemoryToolExecutor) -> Self {
        let script = ScriptedLlm::new();
        let server = ScriptedLlmServer::start(script.clone()).await.unwrap();
        let client = Arc::new(GrpcLlmClient::connect(&server.endpoint()).await.unwrap());
        Self {
            _server: server,
            script,
            client,
            recorder: Arc::new(MemoryRecorder::new()),
            tools: Arc::new(tools),
        }
    }

    pub fn ctx(&self, config: ResolvedAgentConfig) -> ExecutionContext {
        execution_context(
            config,
            self.client.clone(),
            self.tools.clone(),
            self.recorder.clone(),
        )
    }

    pub fn events(&self) -> Vec<TimelineEvent> {
        self.recorder.events()
    }

    pub fn events_of(&self, t: TimelineEventType) -> Vec<TimelineEvent> {
        self.events()
            .into_iter()
            .filter(|e| e.event_type == t)
            .collect()
    }

    pub fn event_types(&self) -> Vec<TimelineEventType> {
        self.events().iter().map(|e| e.event_type).collect()
    }
}

/// Polls until `f` holds (or panics after 5 s).
pub async fn eventually(mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached in 5 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
