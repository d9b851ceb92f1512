//! Engine cost per iteration: a zero-latency scripted LLM behind the real
//! gRPC client, an in-memory tool and the in-memory recorder, so what is
//! measured is the engine's own work (prompting, streaming events, records,
//! tool path) plus the local gRPC round trip.
//!
//! `cargo run -p tarsy-engine --example bench_engine --release [-- RUNS]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use tarsy_core::{
    ExecutionStatus, IterationStrategy, LlmProviderConfig, ProviderType, ResolvedAgentConfig,
};
use tarsy_engine::memory::MemoryRecorder;
use tarsy_engine::{ExecutionContext, GrpcLlmClient, InMemoryToolExecutor, run_agent};
use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer, ScriptedResponse};

const TOOL_ITERATIONS: u32 = 5;

fn config(strategy: IterationStrategy) -> ResolvedAgentConfig {
    ResolvedAgentConfig {
        agent_name: "KubernetesAgent".into(),
        display_name: "KubernetesAgent".into(),
        iteration_strategy: strategy,
        backend: strategy.backend(),
        llm_provider: LlmProviderConfig {
            name: "bench".into(),
            provider_type: ProviderType::Google,
            model: "bench-model".into(),
            api_key_env: None,
            credentials_env: None,
            base_url: None,
            project: None,
            location: None,
            native_tools: Default::default(),
            max_tool_result_tokens: None,
            context_window_tokens: Some(1_000_000),
            script: None,
            fallback: vec![],
            price: None,
        },
        max_iterations: 20,
        iteration_timeout: Duration::from_secs(120),
        mcp_servers: vec!["k8s".into()],
        tool_filter: Default::default(),
        custom_instructions: String::new(),
        native_tools_override: None,
        fail_on_unavailable_server: false,
        budget: None,
    }
}

fn queue(script: &ScriptedLlm, strategy: IterationStrategy) {
    for i in 0..TOOL_ITERATIONS {
        let r = match strategy {
            IterationStrategy::React => ScriptedResponse::text(format!(
                "Thought: step {i}, check the pods.\nAction: k8s.pods_list\nAction Input: {{\"namespace\": \"shop\"}}"
            )),
            _ => ScriptedResponse::default()
                .then_thinking(format!("step {i}: the pods need a look"))
                .then_text("Checking pods.")
                .then_tool_call(format!("c{i}"), "k8s.pods_list", r#"{"namespace":"shop"}"#),
        }
        .then_usage(1000, 50);
        script.push(r);
    }
    let last = match strategy {
        IterationStrategy::React => {
            ScriptedResponse::text("Thought: enough.\nFinal Answer: web-1 is OOMKilled.")
        }
        _ => ScriptedResponse::default()
            .then_thinking("enough data")
            .then_text("web-1 is OOMKilled."),
    };
    script.push(last.then_usage(1200, 80));
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

async fn bench(
    strategy: IterationStrategy,
    runs: usize,
    script: &ScriptedLlm,
    client: Arc<GrpcLlmClient>,
) -> Vec<f64> {
    let tools = Arc::new(InMemoryToolExecutor::new().with_static_tool(
        "k8s.pods_list",
        "List pods",
        "NAME READY STATUS RESTARTS\nweb-1 0/1 CrashLoopBackOff 7\nweb-2 1/1 Running 0",
    ));
    let recorder = Arc::new(MemoryRecorder::new());
    let mut per_iteration = Vec::with_capacity(runs);
    for run in 0..runs + 20 {
        queue(script, strategy);
        recorder.clear();
        let ctx = ExecutionContext::new(
            "session-bench",
            "stage-bench",
            format!("exec-{run}"),
            "PodCrashLooping",
            r#"{"pod":"web-1","namespace":"shop","reason":"CrashLoopBackOff"}"#,
            config(strategy),
            client.clone(),
            tools.clone(),
            recorder.clone(),
            recorder.clone(),
        );
        let start = Instant::now();
        let result = run_agent(ctx, None).await;
        let elapsed = start.elapsed();
        assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
        assert_eq!(result.iterations, TOOL_ITERATIONS + 1);
        if run >= 20 {
            // The first runs warm up connections and allocators.
            per_iteration.push(elapsed.as_secs_f64() * 1000.0 / f64::from(result.iterations));
        }
    }
    per_iteration.sort_by(|a, b| a.total_cmp(b));
    per_iteration
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let script = ScriptedLlm::new();
    let server = ScriptedLlmServer::start(script.clone())
        .await
        .expect("start scripted LLM server");
    let client = Arc::new(
        GrpcLlmClient::connect(&server.endpoint())
            .await
            .expect("connect to scripted LLM server"),
    );
    println!(
        "engine cost per iteration ({runs} runs × {} iterations, zero-latency scripted LLM over gRPC, in-memory tool and recorder)",
        TOOL_ITERATIONS + 1
    );
    for strategy in [IterationStrategy::NativeThinking, IterationStrategy::React] {
        let v = bench(strategy, runs, &script, client.clone()).await;
        println!(
            "  {:<16} median {:.3} ms   p90 {:.3} ms   p99 {:.3} ms   (target ≤ 1 ms median)",
            strategy.as_str(),
            pct(&v, 0.5),
            pct(&v, 0.9),
            pct(&v, 0.99)
        );
    }
    server.shutdown().await;
}
