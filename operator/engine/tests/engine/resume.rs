//! An execution killed mid-way (its task dropped, nothing more recorded, as
//! with kill -9) and run again under the same id continues from its stored
//! conversation: the cut-off events are closed as interrupted, the tool
//! call that was in flight runs once more (marked retried), finished calls
//! are not repeated, and nothing is numbered twice.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tarsy_core::{
    ExecutionStatus, IterationStrategy, TimelineEvent, TimelineEventStatus, TimelineEventType as T,
};
use tarsy_engine::{ExecutionWarning, run_agent};
use tarsy_scripted_llm::ScriptedResponse;

use crate::common::{Harness, config, default_tools, eventually};

fn assert_numbered_once(events: &[TimelineEvent]) {
    let mut seen = HashSet::new();
    for e in events {
        assert!(
            seen.insert(e.sequence_number),
            "sequence number {} used twice: {events:#?}",
            e.sequence_number
        );
    }
}

/// Runs the execution until `cut` holds, then drops it mid-flight.
async fn kill_when(h: &Harness, strategy: IterationStrategy, cut: impl Fn(&Harness) -> bool) {
    let task = tokio::spawn(run_agent(h.ctx(config(strategy, 5)), None));
    eventually(|| cut(h)).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
}

#[tokio::test]
async fn a_tool_call_in_flight_is_reissued_once_and_finished_calls_are_not() {
    let slow = default_tools().with_delay("k8s.pod_logs", Duration::from_secs(60));
    let h = Harness::with_tools(slow).await;
    h.script.push(ScriptedResponse::tool_calls([
        ("a", "k8s.pods_list", "{}"),
        ("b", "k8s.pod_logs", "{}"),
    ]));
    h.script.push(ScriptedResponse::text("Done after restart."));
    kill_when(&h, IterationStrategy::NativeThinking, |h| {
        h.events_of(T::LlmToolCall)
            .iter()
            .any(|e| e.metadata["tool_name"] == "pod_logs")
    })
    .await;

    let tools = Arc::new(default_tools());
    let mut ctx = h.ctx(config(IterationStrategy::NativeThinking, 5));
    ctx.tools = tools.clone();
    let result = run_agent(ctx, None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some("Done after restart.")
    );
    assert_eq!(result.iterations, 2);

    let names: Vec<String> = tools.calls().into_iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        ["k8s.pod_logs"],
        "only the call in flight runs again"
    );
    let calls = h.events_of(T::LlmToolCall);
    assert_eq!(calls.len(), 3, "{calls:#?}");
    let (cut, retried) = (&calls[1], &calls[2]);
    assert_eq!(cut.status, TimelineEventStatus::Failed);
    assert_eq!(cut.metadata["interrupted"], true);
    assert_eq!(retried.metadata["call_id"], "b");
    assert_eq!(retried.metadata["retried"], true);
    assert_eq!(retried.status, TimelineEventStatus::Completed);
    assert_eq!(h.events_of(T::FinalAnalysis).len(), 1);
    assert_numbered_once(&h.events());

    // The model sees both results, once each.
    let requests = h.script.requests();
    assert_eq!(requests.len(), 2);
    let tool_results: Vec<&str> = requests[1]
        .request
        .messages
        .iter()
        .filter(|m| m.role == "tool")
        .map(|m| m.tool_call_id.as_str())
        .collect();
    assert_eq!(tool_results, ["a", "b"]);
}

#[tokio::test]
async fn an_answer_cut_off_mid_stream_is_closed_and_asked_again() {
    let h = Harness::new().await;
    h.script
        .push(ScriptedResponse::tool_call("a", "k8s.pods_list", "{}"));
    h.script
        .push(ScriptedResponse::text("The pod is OOMK").then_hang());
    h.script
        .push(ScriptedResponse::text("The pod is OOMKilled."));
    kill_when(&h, IterationStrategy::NativeThinking, |h| {
        h.events_of(T::LlmResponse)
            .iter()
            .any(|e| e.status == TimelineEventStatus::Streaming)
    })
    .await;

    let result = run_agent(h.ctx(config(IterationStrategy::NativeThinking, 5)), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    // What was stored of the partial answer is kept (streamed text is
    // stored in batches: a kill loses at most the last one).
    let responses = h.events_of(T::LlmResponse);
    assert_eq!(responses.len(), 2, "{responses:#?}");
    let cut = &responses[0];
    assert_eq!(cut.status, TimelineEventStatus::Failed);
    assert_eq!(cut.metadata["interrupted"], true);
    assert!(
        h.events()
            .iter()
            .all(|e| e.status != TimelineEventStatus::Streaming)
    );
    assert_eq!(
        h.events_of(T::LlmToolCall).len(),
        1,
        "the finished call is not repeated"
    );
    assert_numbered_once(&h.events());
    // The repeated call carries the same conversation as the cut-off one.
    let requests = h.script.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1].request.messages, requests[2].request.messages);
}

#[tokio::test]
async fn a_react_action_in_flight_is_reissued() {
    let slow = default_tools().with_delay("k8s.pod_logs", Duration::from_secs(60));
    let h = Harness::with_tools(slow).await;
    h.script.push(ScriptedResponse::text(
        "Thought: check the logs\nAction: k8s.pod_logs\nAction Input: {\"pod\": \"web-1\"}",
    ));
    h.script.push(ScriptedResponse::text(
        "Thought: done\nFinal Answer: OOMKilled.",
    ));
    kill_when(&h, IterationStrategy::React, |h| {
        !h.events_of(T::LlmToolCall).is_empty()
    })
    .await;

    let tools = Arc::new(default_tools());
    let mut ctx = h.ctx(config(IterationStrategy::React, 5));
    ctx.tools = tools.clone();
    let result = run_agent(ctx, None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(result.final_analysis.as_deref(), Some("OOMKilled."));
    assert_eq!(tools.calls().len(), 1);
    let calls = h.events_of(T::LlmToolCall);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].metadata["retried"], true);
    assert_eq!(h.events_of(T::FinalAnalysis).len(), 1);
    assert_numbered_once(&h.events());
}

/// Problems met before the run (a runbook that could not be fetched) are
/// recorded first, as `error` events of their kind; a resumed run goes on
/// from the conversation its first attempt built and does not say them
/// again.
#[tokio::test]
async fn warnings_are_recorded_once_and_not_again_on_resume() {
    let h = Harness::new().await;
    h.script
        .push(ScriptedResponse::tool_call("a", "k8s.pods_list", "{}"));
    h.script
        .push(ScriptedResponse::text("The pod is OOMK").then_hang());
    h.script
        .push(ScriptedResponse::text("The pod is OOMKilled."));
    let warned = || {
        let mut ctx = h.ctx(config(IterationStrategy::NativeThinking, 5));
        ctx.warnings = vec![ExecutionWarning {
            kind: "runbook_unavailable".into(),
            message: "Runbook unavailable, using the default runbook: 404".into(),
        }];
        ctx
    };
    let task = tokio::spawn(run_agent(warned(), None));
    eventually(|| {
        h.events_of(T::LlmResponse)
            .iter()
            .any(|e| e.status == TimelineEventStatus::Streaming)
    })
    .await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    let first = h.events();
    assert_eq!(first[0].event_type, T::Error, "{first:#?}");
    assert_eq!(first[0].metadata["kind"], "runbook_unavailable");

    let result = run_agent(warned(), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    let said: Vec<_> = h
        .events_of(T::Error)
        .into_iter()
        .filter(|e| e.metadata["kind"] == "runbook_unavailable")
        .collect();
    assert_eq!(said.len(), 1, "{said:#?}");
    assert_numbered_once(&h.events());
}
