//! A session's budget inside an execution: once the session has spent it
//! (the gauge says so before an iteration), the agent makes no more tool
//! calls and concludes with one tool-less call, its events saying why; an
//! unreadable spend changes nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use tarsy_core::{
    Budget, Cost, ExecutionStatus, IterationStrategy, LlmInteractionType, SpendGauge,
    TimelineEventType as T,
};
use tarsy_engine::run_agent;
use tarsy_scripted_llm::ScriptedResponse;

use crate::common::{Harness, config};

/// Spends `per_read` dollars more at each read (as if each iteration's call
/// had cost that), or cannot be read at all.
struct Gauge {
    reads: AtomicUsize,
    per_read: Option<f64>,
}

#[async_trait]
impl SpendGauge for Gauge {
    async fn spent(&self) -> Option<Cost> {
        let n = self.reads.fetch_add(1, Ordering::SeqCst);
        self.per_read.map(|usd| Cost {
            usd: usd * n as f64,
            ..Cost::default()
        })
    }
}

fn budget() -> Option<Budget> {
    Some(Budget {
        max_cost_usd: Some(0.05),
        max_tokens: None,
    })
}

/// `calls` tool-calling answers, then the conclusion.
async fn run(
    strategy: IterationStrategy,
    per_read: Option<f64>,
    calls: usize,
) -> (Harness, tarsy_engine::ExecutionResult) {
    let h = Harness::new().await;
    let call = match strategy {
        IterationStrategy::React => ScriptedResponse::text(
            "Thought: list the pods.\nAction: k8s.pods_list\nAction Input: {}",
        ),
        _ => ScriptedResponse::tool_call("1", "k8s.pods_list", "{}"),
    };
    for _ in 0..calls {
        h.script.push(call.clone());
    }
    let conclusion = match strategy {
        IterationStrategy::React => {
            "Thought: enough.\nFinal Answer: memory pressure, partly checked."
        }
        _ => "memory pressure, partly checked.",
    };
    h.script.push(ScriptedResponse::text(conclusion));
    let mut cfg = config(strategy, 10);
    cfg.budget = budget();
    let mut ctx = h.ctx(cfg);
    ctx.spend = Some(Arc::new(Gauge {
        reads: AtomicUsize::new(0),
        per_read,
    }));
    let result = run_agent(ctx, None).await;
    (h, result)
}

#[tokio::test]
async fn a_spent_budget_ends_the_tool_calls_with_a_forced_conclusion() {
    for strategy in [IterationStrategy::NativeThinking, IterationStrategy::React] {
        // $0.00, $0.03 before the first two iterations; $0.06 before the third.
        let (h, result) = run(strategy, Some(0.03), 2).await;
        assert_eq!(
            result.status,
            ExecutionStatus::Completed,
            "{strategy}: {result:?}"
        );
        assert_eq!(
            result.final_analysis.as_deref(),
            Some("memory pressure, partly checked."),
            "{strategy}"
        );
        let reqs = h.script.requests();
        assert_eq!(
            reqs.len(),
            3,
            "{strategy}: two iterations, then the conclusion"
        );
        assert!(reqs[2].request.tools.is_empty(), "{strategy}: no tools");
        let prompt = reqs[2].last_message();
        assert!(
            prompt.contains("budget of $0.0500 is spent"),
            "{strategy}: {prompt}"
        );
        assert!(
            prompt.contains("cannot call any more tools"),
            "{strategy}: {prompt}"
        );
        let finals = h.events_of(T::FinalAnalysis);
        assert_eq!(finals.len(), 1, "{strategy}");
        assert_eq!(finals[0].metadata["forced_conclusion"], true);
        assert_eq!(finals[0].metadata["budget_exhausted"], true);
        assert!(
            finals[0].metadata["reason"]
                .as_str()
                .unwrap()
                .contains("$0.0600 so far"),
            "{:?}",
            finals[0].metadata
        );
        let rec = h.recorder.llm_interactions();
        assert_eq!(
            rec[2].interaction_type,
            LlmInteractionType::ForcedConclusion
        );
    }
}

#[tokio::test]
async fn an_unreadable_spend_changes_nothing() {
    let (h, result) = run(IterationStrategy::NativeThinking, None, 3).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    // Three tool iterations, then the answer: no forced conclusion.
    assert_eq!(h.script.request_count(), 4);
    assert!(
        h.events_of(T::FinalAnalysis)[0]
            .metadata
            .get("forced_conclusion")
            .is_none()
    );
}
