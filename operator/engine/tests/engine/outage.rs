//! The LLM service going away and coming back on the same address (a
//! rollout, a crash and restart): the call in flight waits it out on the
//! same provider instead of failing the iteration, the timeline says so, and
//! the gRPC channel connects again by itself.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tarsy_core::{
    Backend, ConversationMessage, ExecutionStatus, IterationStrategy, TimelineEvent,
    TimelineEventStatus, TimelineEventType as T,
};
use tarsy_engine::fallback::{BreakerConfig, CircuitBreakers};
use tarsy_engine::llm::{Chunk, GenerateInput};
use tarsy_engine::memory::MemoryRecorder;
use tarsy_engine::retry::ServiceRetry;
use tarsy_engine::{ExecutionContext, ExecutionResult, GrpcLlmClient, LlmClient, run_agent};
use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer, ScriptedResponse};

use crate::common::{Harness, config, default_tools, eventually, execution_context, provider};

/// A scripted LLM service in a runtime of its own, so that dropping it kills
/// it the way `kill -9` kills a process: the listener and every connection
/// close at once, streams in the middle of an answer included (a graceful
/// shutdown would wait for them).
struct Service {
    runtime: Option<tokio::runtime::Runtime>,
    server: Option<ScriptedLlmServer>,
}

impl Service {
    async fn start(script: &ScriptedLlm) -> Self {
        Self::start_on(free_addr(), script).await
    }

    /// Serves `script` on `addr`; the address of a service just killed may
    /// take a moment to be free again.
    async fn start_on(addr: SocketAddr, script: &ScriptedLlm) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the service");
        for _ in 0..100 {
            let started = runtime
                .spawn(ScriptedLlmServer::start_on(addr, script.clone()))
                .await
                .expect("the start task");
            match started {
                Ok(server) => {
                    return Self {
                        runtime: Some(runtime),
                        server: Some(server),
                    };
                }
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("cannot listen on {addr}: {e}"),
            }
        }
        panic!("{addr} stayed in use");
    }

    fn addr(&self) -> SocketAddr {
        self.server.as_ref().expect("a running service").addr()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // The runtime goes first: dropping the server handle while it runs
        // would start a graceful shutdown.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        self.server.take();
    }
}

fn endpoint(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

/// An address nothing listens on (yet), on a loopback address of its own
/// (one of 127.0.0.2 to .251, by test and process): while a test's service
/// is down its port is free, and a server of another test binding an
/// ephemeral port (the harness's, on 127.0.0.1) must not take it.
fn free_addr() -> SocketAddr {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let host = std::process::id().wrapping_mul(31).wrapping_add(n) % 250 + 2;
    let host = u8::try_from(host).expect("a host number below 252");
    let listener =
        std::net::TcpListener::bind((Ipv4Addr::new(127, 0, 0, host), 0)).expect("a free port");
    listener.local_addr().expect("its address")
}

/// Waits short enough for tests.
fn quick_retry() -> ServiceRetry {
    ServiceRetry::new(Duration::from_millis(20), Duration::from_millis(100))
}

/// Breakers that open on the first failure: a failure counted against a
/// provider shows.
fn touchy_breakers() -> Arc<CircuitBreakers> {
    Arc::new(CircuitBreakers::new(BreakerConfig {
        failure_threshold: 1,
        open_for: Duration::from_secs(60),
    }))
}

struct Outage {
    recorder: Arc<MemoryRecorder>,
    breakers: Arc<CircuitBreakers>,
}

impl Outage {
    fn new() -> Self {
        Self {
            recorder: Arc::new(MemoryRecorder::new()),
            breakers: touchy_breakers(),
        }
    }

    fn ctx(
        &self,
        cfg: tarsy_core::ResolvedAgentConfig,
        client: Arc<GrpcLlmClient>,
    ) -> ExecutionContext {
        let mut ctx = execution_context(
            cfg,
            client,
            Arc::new(default_tools()),
            self.recorder.clone(),
        );
        ctx.breakers = self.breakers.clone();
        ctx.service_retry = quick_retry();
        ctx
    }

    fn events_of(&self, t: T) -> Vec<TimelineEvent> {
        self.recorder
            .events()
            .into_iter()
            .filter(|e| e.event_type == t)
            .collect()
    }

    /// The retry markers.
    fn markers(&self) -> Vec<TimelineEvent> {
        self.events_of(T::Error)
            .into_iter()
            .filter(|e| e.metadata["kind"] == "llm_service_unavailable")
            .collect()
    }

    fn assert_nothing_streaming(&self) {
        for e in self.recorder.events() {
            assert_ne!(e.status, TimelineEventStatus::Streaming, "{e:?}");
        }
    }
}

async fn finish(run: tokio::task::JoinHandle<ExecutionResult>) -> ExecutionResult {
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the execution ends")
        .expect("the execution task")
}

#[tokio::test]
async fn a_service_killed_mid_stream_and_restarted_is_waited_out_on_the_same_provider() {
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::tool_call("c1", "k8s.pods_list", "{}"));
    script.push(
        ScriptedResponse::default()
            .then_thinking("Looking at ")
            .then_text("The pod is")
            .then_hang(),
    );
    script.push(
        ScriptedResponse::default()
            .then_thinking("Looking at the pod list.")
            .then_text("web-1 is crashlooping."),
    );
    let service = Service::start(&script).await;
    let addr = service.addr();
    let client = Arc::new(GrpcLlmClient::connect(&endpoint(addr)).await.unwrap());
    let o = Outage::new();
    let mut cfg = config(IterationStrategy::NativeThinking, 5);
    cfg.llm_provider.fallback = vec![provider("secondary")];
    let run = tokio::spawn(run_agent(o.ctx(cfg, client), None));

    let rec = o.recorder.clone();
    eventually(|| rec.events().iter().any(|e| e.event_type == T::LlmResponse)).await;
    drop(service);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _service = Service::start_on(addr, &script).await;
    let result = finish(run).await;

    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some("web-1 is crashlooping.")
    );
    assert_eq!(result.iterations, 2, "the outage used no iteration");

    // The same provider, asked the same thing again: no fallback, nothing
    // fed back to the model, no failure counted against the provider.
    let reqs = script.requests();
    assert_eq!(reqs.len(), 3);
    assert!(reqs.iter().all(|r| r.model() == "primary-model"));
    assert_eq!(reqs[2].request.messages, reqs[1].request.messages);
    assert!(o.events_of(T::ProviderFallback).is_empty());
    assert!(o.breakers.allows("primary"));

    // The timeline: the cut answer closed as it stood, one marker, the
    // answer streamed again in fresh events.
    o.assert_nothing_streaming();
    let types: Vec<T> = o.recorder.events().iter().map(|e| e.event_type).collect();
    assert_eq!(
        types,
        [
            T::LlmToolCall,
            T::LlmThinking,
            T::LlmResponse,
            T::Error,
            T::LlmThinking,
            T::LlmResponse,
            T::FinalAnalysis
        ]
    );
    let thinking = o.events_of(T::LlmThinking);
    let responses = o.events_of(T::LlmResponse);
    for (cut, partial) in [(&thinking[0], "Looking at "), (&responses[0], "The pod is")] {
        assert_eq!(cut.status, TimelineEventStatus::Failed);
        assert_eq!(cut.content, partial);
        assert_eq!(cut.metadata["interrupted"], true);
    }
    assert_eq!(thinking[1].status, TimelineEventStatus::Completed);
    assert_eq!(thinking[1].content, "Looking at the pod list.");
    assert_eq!(responses[1].status, TimelineEventStatus::Completed);
    assert_eq!(responses[1].content, "web-1 is crashlooping.");

    let markers = o.markers();
    assert_eq!(markers.len(), 1, "one marker for the outage");
    let marker = &markers[0];
    assert_eq!(marker.status, TimelineEventStatus::Completed);
    assert_eq!(marker.metadata["outcome"], "reached");
    assert_eq!(marker.metadata["provider"], "primary");
    let failed = marker.metadata["failed_attempts"].as_u64().unwrap();
    assert!(
        failed >= 2,
        "the cut stream and refused connections: {failed}"
    );
    assert!(
        marker.content.starts_with("LLM service unavailable for ")
            && marker
                .content
                .ends_with(&format!("reached again on attempt {}", failed + 1)),
        "{}",
        marker.content
    );
    // While it lasted, the marker said what was going on.
    let announced = o
        .recorder
        .published()
        .into_iter()
        .find(|p| {
            p.payload["type"] == "timeline_event.created"
                && p.payload["event_id"] == marker.id.as_str()
        })
        .expect("the marker was announced");
    let first = announced.payload["content"].as_str().unwrap();
    assert!(
        first.starts_with("LLM service unavailable, retrying (attempt 2) in 20 ms: "),
        "{first}"
    );
    assert_eq!(announced.payload["metadata"]["retry_in_ms"], 20);

    // Every attempt is in the record, the failed ones with the reason.
    let calls: Vec<_> = o
        .recorder
        .llm_interactions()
        .into_iter()
        .filter(|i| i.llm_request["iteration"] == 2)
        .collect();
    assert_eq!(calls.len() as u64, failed + 1);
    let (last, failures) = calls.split_last().unwrap();
    assert!(last.error_message.is_none());
    assert!(failures.iter().all(|i| {
        i.error_message
            .as_deref()
            .is_some_and(|m| m.contains("llm_service_unavailable"))
    }));
}

/// A service that says it is unavailable (shutting down, or a proxy with
/// nothing behind it) is waited out like one that cannot be reached.
#[tokio::test]
async fn unavailable_from_the_service_is_waited_out_too() {
    let h = Harness::new().await;
    h.script
        .push(ScriptedResponse::grpc_error(14, "server shutting down"));
    h.script.push(ScriptedResponse::text("All pods healthy."));
    let mut cfg = config(IterationStrategy::Langchain, 5);
    cfg.llm_provider.fallback = vec![provider("secondary")];
    let breakers = touchy_breakers();
    let mut ctx = h.ctx(cfg);
    ctx.breakers = breakers.clone();
    ctx.service_retry = quick_retry();
    let result = run_agent(ctx, None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(result.iterations, 1);
    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs.iter().all(|r| r.model() == "primary-model"));
    assert!(h.events_of(T::ProviderFallback).is_empty());
    assert!(breakers.allows("primary"));
    let errors = h.events_of(T::Error);
    assert_eq!(errors.len(), 1, "the marker only: {errors:?}");
    assert_eq!(errors[0].metadata["kind"], "llm_service_unavailable");
    assert_eq!(errors[0].metadata["outcome"], "reached");
    assert!(
        errors[0].content.contains("reached again on attempt 2"),
        "{}",
        errors[0].content
    );
}

/// Down for longer than the iteration timeout, with a fallback: the wait
/// stops at the deadline and the chain is walked as for any retryable
/// failure (counted against the provider); the fallback, with a fresh
/// iteration timeout, gets through once the service is back.
#[tokio::test]
async fn an_outage_longer_than_the_iteration_timeout_walks_the_fallback_chain() {
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::text("Answer after the outage."));
    let addr = free_addr();
    let client = Arc::new(GrpcLlmClient::connect_lazy(&endpoint(addr)).unwrap());
    let o = Outage::new();
    let mut cfg = config(IterationStrategy::NativeThinking, 5);
    cfg.iteration_timeout = Duration::from_secs(2);
    cfg.llm_provider.fallback = vec![provider("secondary")];
    let run = tokio::spawn(run_agent(o.ctx(cfg, client), None));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _service = Service::start_on(addr, &script).await;
    let result = finish(run).await;

    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some("Answer after the outage.")
    );
    assert_eq!(result.iterations, 1);
    let reqs = script.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].model(), "secondary-model");
    assert!(o.breakers.is_open("primary"), "counted at the deadline");

    o.assert_nothing_streaming();
    let types: Vec<T> = o.recorder.events().iter().map(|e| e.event_type).collect();
    assert_eq!(
        types,
        [
            T::Error,
            T::ProviderFallback,
            T::Error,
            T::LlmResponse,
            T::FinalAnalysis
        ]
    );
    let markers = o.markers();
    assert_eq!(markers[0].metadata["provider"], "primary");
    assert_eq!(markers[0].metadata["outcome"], "gave_up");
    assert!(
        markers[0]
            .content
            .contains("stopped retrying at the iteration deadline"),
        "{}",
        markers[0].content
    );
    assert_eq!(markers[1].metadata["provider"], "secondary");
    assert_eq!(markers[1].metadata["outcome"], "reached");
    let fallback = &o.events_of(T::ProviderFallback)[0];
    assert_eq!(fallback.metadata["from"], "primary");
    assert_eq!(fallback.metadata["to"], "secondary");
    assert!(
        fallback.content.contains("llm_service_unavailable"),
        "{}",
        fallback.content
    );
}

/// Down for longer than the iteration timeout, without a fallback: the
/// iteration fails as before (the error fed back to the model), and the
/// next one waits the rest of the outage out.
#[tokio::test]
async fn an_outage_longer_than_the_iteration_timeout_fails_the_iteration() {
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::text("Answer after the outage."));
    let addr = free_addr();
    let client = Arc::new(GrpcLlmClient::connect_lazy(&endpoint(addr)).unwrap());
    let o = Outage::new();
    let mut cfg = config(IterationStrategy::NativeThinking, 5);
    cfg.iteration_timeout = Duration::from_secs(2);
    let run = tokio::spawn(run_agent(o.ctx(cfg, client), None));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _service = Service::start_on(addr, &script).await;
    let result = finish(run).await;

    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(result.iterations, 2);
    o.assert_nothing_streaming();
    let errors = o.events_of(T::Error);
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert_eq!(errors[0].metadata["outcome"], "gave_up");
    // The iteration's time went into the wait: it timed out.
    assert_eq!(errors[1].metadata["kind"], "timeout");
    assert_eq!(errors[2].metadata["outcome"], "reached");
    let reqs = script.requests();
    assert_eq!(reqs.len(), 1);
    assert!(
        reqs[0].last_message().contains("timed out"),
        "the failure was fed back: {}",
        reqs[0].last_message()
    );
}

/// A service that stays away for two whole iterations ends the execution
/// as two hung iterations do, instead of every remaining iteration waiting
/// out its timeout in turn.
#[tokio::test]
async fn an_outage_of_two_iterations_fails_the_execution() {
    let addr = free_addr();
    let client = Arc::new(GrpcLlmClient::connect_lazy(&endpoint(addr)).unwrap());
    let o = Outage::new();
    let mut cfg = config(IterationStrategy::NativeThinking, 10);
    cfg.iteration_timeout = Duration::from_secs(1);
    let result = finish(tokio::spawn(run_agent(o.ctx(cfg, client), None))).await;

    assert_eq!(result.status, ExecutionStatus::Failed, "{result:?}");
    assert_eq!(result.iterations, 2, "{result:?}");
    o.assert_nothing_streaming();
    let gave_up = o
        .markers()
        .iter()
        .filter(|m| m.metadata["outcome"] == "gave_up")
        .count();
    assert_eq!(gave_up, 2);
}

/// Cancelling an execution that waits for the service stops the wait at
/// once; the marker says how the outage ended for it.
#[tokio::test]
async fn cancellation_stops_the_wait() {
    let addr = free_addr();
    let client = Arc::new(GrpcLlmClient::connect_lazy(&endpoint(addr)).unwrap());
    let o = Outage::new();
    let mut cfg = config(IterationStrategy::NativeThinking, 5);
    cfg.iteration_timeout = Duration::from_secs(600);
    let ctx = o.ctx(cfg, client);
    let token = ctx.cancel.clone();
    let run = tokio::spawn(run_agent(ctx, None));
    let rec = o.recorder.clone();
    eventually(|| {
        rec.events()
            .iter()
            .any(|e| e.metadata["kind"] == "llm_service_unavailable")
    })
    .await;
    token.cancel();
    let result = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("the wait gives way to the cancellation")
        .unwrap();
    assert_eq!(result.status, ExecutionStatus::Cancelled);
    o.assert_nothing_streaming();
    let markers = o.markers();
    assert_eq!(markers.len(), 1);
    assert_eq!(markers[0].metadata["outcome"], "stopped");
    assert!(
        markers[0].content.ends_with("stopped retrying: cancelled"),
        "{}",
        markers[0].content
    );
}

/// A provider failure the service reports (retryable) is the provider's:
/// the chain is walked at once, with no wait on the same provider.
#[tokio::test]
async fn a_provider_error_reported_by_the_service_walks_the_chain_at_once() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::error(
        "provider_error",
        "upstream returned 503",
        true,
    ));
    h.script
        .push(ScriptedResponse::text("Answer from the fallback."));
    let mut cfg = config(IterationStrategy::NativeThinking, 5);
    cfg.llm_provider.fallback = vec![provider("secondary")];
    let breakers = touchy_breakers();
    let mut ctx = h.ctx(cfg);
    ctx.breakers = breakers.clone();
    ctx.service_retry = quick_retry();
    let result = run_agent(ctx, None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some("Answer from the fallback.")
    );
    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].model(), "primary-model");
    assert_eq!(
        reqs[1].model(),
        "secondary-model",
        "no second try on the primary"
    );
    assert!(breakers.is_open("primary"), "the provider's failure counts");
    assert_eq!(h.events_of(T::ProviderFallback).len(), 1);
    assert!(
        h.events_of(T::Error).is_empty(),
        "no outage marker, no failed iteration"
    );
}

fn input() -> GenerateInput {
    GenerateInput {
        session_id: "session-1".into(),
        execution_id: "exec-1".into(),
        messages: vec![ConversationMessage::user("Why is web-1 crashlooping?")],
        provider: provider("primary"),
        native_tools_override: None,
        backend: Backend::GoogleNative,
        tools: vec![],
        clear_cache: false,
    }
}

/// One call's chunks.
async fn call(client: &GrpcLlmClient) -> Vec<Chunk> {
    match client.generate(input()).await {
        Ok(stream) => stream.collect().await,
        Err(e) => vec![Chunk::Error(e.into_info())],
    }
}

fn unreachable(chunks: &[Chunk]) -> bool {
    matches!(chunks, [Chunk::Error(e)] if e.is_service_unavailable())
}

#[tokio::test]
async fn a_channel_connected_before_a_restart_works_after_it() {
    let script = ScriptedLlm::new();
    for answer in ["before", "after"] {
        script.push(ScriptedResponse::text(answer));
    }
    let service = Service::start(&script).await;
    let addr = service.addr();
    let client = GrpcLlmClient::connect(&endpoint(addr)).await.unwrap();
    assert_eq!(call(&client).await, [Chunk::Text("before".into())]);
    drop(service);
    let down = call(&client).await;
    assert!(unreachable(&down), "{down:?}");
    let _service = Service::start_on(addr, &script).await;
    assert_eq!(call(&client).await, [Chunk::Text("after".into())]);
}

#[tokio::test]
async fn a_channel_made_while_the_service_is_down_connects_once_it_is_up() {
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::text("up"));
    let addr = free_addr();
    let client = GrpcLlmClient::connect_lazy(&endpoint(addr)).unwrap();
    let down = call(&client).await;
    assert!(unreachable(&down), "{down:?}");
    let _service = Service::start_on(addr, &script).await;
    assert_eq!(call(&client).await, [Chunk::Text("up".into())]);
}
