//! Scenario tests: a tiny in-memory driver applies the machine's actions and
//! scripts execution outcomes, so each test reads like a session's life.

use tarsy_core::{
    Budget, Cost, ExecutionKind, ExecutionStatus, ParallelType, SessionEndReason, SessionStatus,
    StageKind, SuccessPolicy,
};

use crate::*;

fn agent(name: &str) -> ExecutionPlan {
    ExecutionPlan {
        agent_name: name.into(),
        display_name: name.into(),
    }
}

fn stage(name: &str, policy: SuccessPolicy, agents: &[&str]) -> StagePlan {
    StagePlan {
        name: name.into(),
        success_policy: policy,
        parallel_type: (agents.len() > 1).then_some(ParallelType::MultiAgent),
        executions: agents.iter().map(|a| agent(a)).collect(),
        synthesis: ExecutionPlan {
            agent_name: "synthesis-agent".into(),
            display_name: "SynthesisAgent".into(),
        },
    }
}

fn replicas(name: &str, base: &str, n: u32) -> StagePlan {
    StagePlan {
        name: name.into(),
        success_policy: SuccessPolicy::Any,
        parallel_type: Some(ParallelType::Replica),
        executions: (1..=n)
            .map(|i| ExecutionPlan {
                agent_name: base.into(),
                display_name: format!("{base}-{i}"),
            })
            .collect(),
        synthesis: ExecutionPlan {
            agent_name: "synthesis-agent".into(),
            display_name: "SynthesisAgent".into(),
        },
    }
}

struct Sim {
    plan: ChainPlan,
    view: SessionView,
    started: Vec<StageStart>,
    finished: Option<(SessionStatus, Option<String>, Option<String>)>,
    end_reason: Option<SessionEndReason>,
    summaries_requested: Vec<String>,
}

impl Sim {
    fn new(stages: Vec<StagePlan>) -> Self {
        Self {
            plan: ChainPlan {
                chain: "test-chain".into(),
                stages,
                budget: None,
            },
            view: SessionView {
                status: SessionStatus::InProgress,
                cancel_requested: false,
                deadline_passed: false,
                stages: Vec::new(),
                executive_summary: ExecutiveSummaryView::NotRequested,
                spent: None,
            },
            started: Vec::new(),
            finished: None,
            end_reason: None,
            summaries_requested: Vec::new(),
        }
    }

    /// Applies actions until the machine has nothing more to do.
    fn settle(&mut self) {
        for _ in 0..100 {
            let actions = decide(&self.plan, &self.view);
            if actions.is_empty() {
                return;
            }
            // Level-triggered: deciding again before applying gives the same answer.
            assert_eq!(actions, decide(&self.plan, &self.view));
            for action in actions {
                self.apply(action);
            }
        }
        panic!("machine did not settle");
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::StartStage(start) => {
                assert_eq!(start.db_index as usize, self.view.stages.len() + 1);
                self.view.stages.push(StageView {
                    db_index: start.db_index,
                    config_index: start.config_index,
                    kind: start.kind,
                    name: start.name.clone(),
                    status: ExecutionStatus::Active,
                    executions: start
                        .executions
                        .iter()
                        .map(|e| ExecutionView {
                            index: e.index,
                            display_name: e.display_name.clone(),
                            status: ExecutionStatus::Active,
                            final_analysis: None,
                            error: None,
                            stopping: false,
                        })
                        .collect(),
                });
                self.started.push(start);
            }
            Action::FinishStage {
                db_index, status, ..
            } => {
                self.view.stages[db_index as usize - 1].status = status;
            }
            Action::StopExecutions { reason, executions } => {
                if reason == StopReason::Cancelled {
                    self.view.status = SessionStatus::Cancelling;
                }
                // The driver only asks; the executions end asynchronously.
                for (stage, index) in executions {
                    let e =
                        &mut self.view.stages[stage as usize - 1].executions[index as usize - 1];
                    assert!(!e.status.is_terminal() && !e.stopping);
                    e.stopping = true;
                }
            }
            Action::GenerateExecutiveSummary { final_analysis } => {
                self.view.executive_summary = ExecutiveSummaryView::Requested;
                self.summaries_requested.push(final_analysis);
            }
            Action::FinishSession {
                status,
                final_analysis,
                error,
                end_reason,
            } => {
                self.view.status = status;
                self.finished = Some((status, final_analysis, error));
                self.end_reason = end_reason;
            }
        }
    }

    fn end(&mut self, db_index: u32, index: u32, status: ExecutionStatus, text: &str) {
        let e = &mut self.view.stages[db_index as usize - 1].executions[index as usize - 1];
        e.status = status;
        if status == ExecutionStatus::Completed {
            e.final_analysis = Some(text.into());
            e.error = None;
        } else {
            e.error = Some(text.into());
        }
        self.settle();
    }

    fn summary(&mut self, result: Result<&str, &str>) {
        self.view.executive_summary = match result {
            Ok(t) => ExecutiveSummaryView::Generated(t.into()),
            Err(e) => ExecutiveSummaryView::Failed(e.into()),
        };
        self.settle();
    }

    fn status(&self) -> SessionStatus {
        self.finished
            .as_ref()
            .map(|f| f.0)
            .unwrap_or(self.view.status)
    }
}

#[test]
fn single_stage_single_agent_completes_with_summary() {
    let mut sim = Sim::new(vec![stage(
        "investigation",
        SuccessPolicy::Any,
        &["KubernetesAgent"],
    )]);
    sim.settle();
    assert_eq!(sim.started.len(), 1);
    let s = &sim.started[0];
    assert_eq!(
        (s.db_index, s.kind, s.name.as_str()),
        (1, StageKind::Investigation, "investigation")
    );
    assert_eq!(s.executions.len(), 1);
    assert!(s.previous_stages.is_empty());
    assert_eq!(s.parallel_type, None);

    sim.end(1, 1, ExecutionStatus::Completed, "root cause: OOM");
    assert_eq!(sim.view.stages[0].status, ExecutionStatus::Completed);
    assert_eq!(sim.summaries_requested, vec!["root cause: OOM"]);
    assert_eq!(sim.finished, None, "waits for the executive summary");

    sim.summary(Ok("Pod OOMKilled"));
    assert_eq!(
        sim.finished,
        Some((
            SessionStatus::Completed,
            Some("root cause: OOM".into()),
            None
        ))
    );
}

#[test]
fn executive_summary_failure_still_completes() {
    let mut sim = Sim::new(vec![stage("s", SuccessPolicy::Any, &["A"])]);
    sim.settle();
    sim.end(1, 1, ExecutionStatus::Completed, "analysis");
    sim.summary(Err("LLM unavailable"));
    assert_eq!(sim.status(), SessionStatus::Completed);
    assert_eq!(sim.finished.unwrap().1.as_deref(), Some("analysis"));
}

#[test]
fn stages_run_in_order_with_previous_results_as_context() {
    let mut sim = Sim::new(vec![
        stage("collect", SuccessPolicy::Any, &["A"]),
        stage("diagnose", SuccessPolicy::Any, &["B"]),
        stage("recommend", SuccessPolicy::Any, &["C"]),
    ]);
    sim.settle();
    assert_eq!(sim.started.len(), 1, "one stage at a time");
    sim.end(1, 1, ExecutionStatus::Completed, "facts");
    assert_eq!(sim.started.len(), 2);
    assert_eq!(sim.started[1].name, "diagnose");
    assert_eq!(
        sim.started[1].previous_stages,
        vec![StageResult {
            stage_name: "collect".into(),
            final_analysis: "facts".into()
        }]
    );
    sim.end(2, 1, ExecutionStatus::Completed, "diagnosis");
    assert_eq!(sim.started[2].previous_stages.len(), 2);
    assert_eq!(
        sim.started[2].previous_stages[1].final_analysis,
        "diagnosis"
    );
    sim.end(3, 1, ExecutionStatus::Completed, "recommendation");
    assert_eq!(sim.summaries_requested, vec!["recommendation"]);
    sim.summary(Ok("summary"));
    assert_eq!(sim.status(), SessionStatus::Completed);
}

#[test]
fn a_spent_budget_starts_no_further_stage_but_still_summarizes() {
    let mut sim = Sim::new(vec![
        stage("collect", SuccessPolicy::Any, &["A"]),
        stage("diagnose", SuccessPolicy::Any, &["B", "C"]),
        stage("recommend", SuccessPolicy::Any, &["D"]),
    ]);
    sim.plan.budget = Some(Budget {
        max_cost_usd: Some(0.05),
        max_tokens: None,
    });
    let spent = |usd: f64| Cost {
        usd,
        ..Cost::default()
    };
    sim.view.spent = Some(spent(0.01));
    sim.settle();
    sim.end(1, 1, ExecutionStatus::Completed, "facts");
    assert_eq!(sim.started.len(), 2, "under the budget the chain goes on");
    // The parallel stage spends the rest: it is still synthesized (its
    // conclusion), but the next stage does not start.
    sim.view.spent = Some(spent(0.06));
    sim.end(2, 1, ExecutionStatus::Completed, "b");
    sim.end(2, 2, ExecutionStatus::Completed, "c");
    assert_eq!(sim.started.len(), 3);
    assert_eq!(sim.started[2].kind, StageKind::Synthesis);
    sim.end(3, 1, ExecutionStatus::Completed, "synthesized");
    assert_eq!(sim.started.len(), 3, "recommend never starts");
    assert_eq!(sim.summaries_requested, vec!["synthesized"]);
    sim.summary(Ok("summary"));
    assert_eq!(sim.status(), SessionStatus::Completed);
    assert_eq!(sim.end_reason, Some(SessionEndReason::BudgetExhausted));
    assert_eq!(sim.finished.unwrap().1.as_deref(), Some("synthesized"));

    // A budget not reached, or not known: no reason.
    let mut sim = Sim::new(vec![stage("only", SuccessPolicy::Any, &["A"])]);
    sim.plan.budget = Some(Budget {
        max_cost_usd: Some(0.05),
        max_tokens: None,
    });
    sim.settle();
    sim.end(1, 1, ExecutionStatus::Completed, "done");
    sim.summary(Ok("summary"));
    assert_eq!(sim.end_reason, None);
}

#[test]
fn multi_agent_stage_waits_for_all_then_synthesizes() {
    let mut sim = Sim::new(vec![
        stage(
            "validation",
            SuccessPolicy::Any,
            &["config-validator", "metrics-validator"],
        ),
        stage("report", SuccessPolicy::Any, &["Reporter"]),
    ]);
    sim.settle();
    assert_eq!(sim.started[0].parallel_type, Some(ParallelType::MultiAgent));
    assert_eq!(sim.started[0].executions.len(), 2);

    sim.end(1, 2, ExecutionStatus::Failed, "LLM error");
    assert_eq!(
        sim.started.len(),
        1,
        "waits for every execution, even under policy any"
    );
    assert_eq!(sim.view.stages[0].status, ExecutionStatus::Active);

    sim.end(1, 1, ExecutionStatus::Completed, "config ok");
    assert_eq!(sim.view.stages[0].status, ExecutionStatus::Completed);
    let synth = &sim.started[1];
    assert_eq!(synth.kind, StageKind::Synthesis);
    assert_eq!(synth.name, "validation - Synthesis");
    assert_eq!(synth.db_index, 2);
    assert_eq!(synth.synthesis_of, Some(1));
    assert_eq!(synth.executions[0].kind, ExecutionKind::Synthesis);
    assert_eq!(synth.executions[0].agent_name, "synthesis-agent");
    assert_eq!(synth.executions[0].display_name, "SynthesisAgent");

    sim.end(2, 1, ExecutionStatus::Completed, "synthesized");
    let report = &sim.started[2];
    assert_eq!((report.db_index, report.config_index), (3, 1));
    assert_eq!(
        report.previous_stages,
        vec![StageResult {
            stage_name: "validation - Synthesis".into(),
            final_analysis: "synthesized".into()
        }],
        "synthesis replaces the parallel results"
    );
}

#[test]
fn replicas_are_one_stage_of_n_and_synthesized() {
    let mut sim = Sim::new(vec![replicas("scaling-review", "scaling-reviewer", 3)]);
    sim.settle();
    let names: Vec<_> = sim.started[0]
        .executions
        .iter()
        .map(|e| (e.index, e.display_name.as_str(), e.agent_name.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            (1, "scaling-reviewer-1", "scaling-reviewer"),
            (2, "scaling-reviewer-2", "scaling-reviewer"),
            (3, "scaling-reviewer-3", "scaling-reviewer")
        ]
    );
    for i in 1..=3 {
        sim.end(1, i, ExecutionStatus::Completed, &format!("r{i}"));
    }
    assert_eq!(sim.started[1].kind, StageKind::Synthesis);
    sim.end(2, 1, ExecutionStatus::Completed, "combined");
    assert_eq!(sim.summaries_requested, vec!["combined"]);
}

#[test]
fn policy_all_failure_fails_fast() {
    let mut sim = Sim::new(vec![
        stage("validation", SuccessPolicy::All, &["A", "B"]),
        stage("never", SuccessPolicy::Any, &["C"]),
    ]);
    sim.settle();
    sim.end(1, 1, ExecutionStatus::Completed, "fine");
    sim.end(1, 2, ExecutionStatus::Failed, "tool crashed");
    assert_eq!(sim.view.stages[0].status, ExecutionStatus::Failed);
    let (status, _, error) = sim.finished.clone().unwrap();
    assert_eq!(status, SessionStatus::Failed);
    let error = error.unwrap();
    assert!(error.contains("validation"), "{error}");
    assert!(error.contains("B (failed: tool crashed)"), "{error}");
    assert_eq!(sim.started.len(), 1, "no synthesis, no later stage");
    assert!(
        sim.summaries_requested.is_empty(),
        "no executive summary for a failed session"
    );
}

#[test]
fn policy_any_all_failed_fails() {
    let mut sim = Sim::new(vec![stage("s", SuccessPolicy::Any, &["A", "B"])]);
    sim.settle();
    sim.end(1, 1, ExecutionStatus::Failed, "x");
    sim.end(1, 2, ExecutionStatus::Failed, "y");
    assert_eq!(sim.status(), SessionStatus::Failed);
}

#[test]
fn synthesis_failure_is_fatal() {
    let mut sim = Sim::new(vec![
        stage("s", SuccessPolicy::Any, &["A", "B"]),
        stage("later", SuccessPolicy::Any, &["C"]),
    ]);
    sim.settle();
    sim.end(1, 1, ExecutionStatus::Completed, "a");
    sim.end(1, 2, ExecutionStatus::Completed, "b");
    sim.end(2, 1, ExecutionStatus::Failed, "synthesis LLM error");
    let (status, final_analysis, error) = sim.finished.clone().unwrap();
    assert_eq!(status, SessionStatus::Failed);
    assert!(error.unwrap().contains("s - Synthesis"));
    assert_eq!(final_analysis, None, "no stage result survived");
    assert_eq!(sim.started.len(), 2);
}

#[test]
fn failed_later_stage_keeps_earlier_analysis() {
    let mut sim = Sim::new(vec![
        stage("one", SuccessPolicy::Any, &["A"]),
        stage("two", SuccessPolicy::Any, &["B"]),
    ]);
    sim.settle();
    sim.end(1, 1, ExecutionStatus::Completed, "first");
    sim.end(2, 1, ExecutionStatus::Failed, "boom");
    let (status, final_analysis, _) = sim.finished.clone().unwrap();
    assert_eq!(status, SessionStatus::Failed);
    assert_eq!(final_analysis.as_deref(), Some("first"));
}

#[test]
fn cancellation_stops_executions_then_ends_cancelled() {
    let mut sim = Sim::new(vec![stage("s", SuccessPolicy::Any, &["A", "B"])]);
    sim.settle();
    sim.view.cancel_requested = true;
    sim.settle();
    assert_eq!(sim.view.status, SessionStatus::Cancelling);
    assert_eq!(sim.finished, None, "waits for executions to stop");
    sim.end(1, 1, ExecutionStatus::Cancelled, "cancelled");
    assert_eq!(sim.finished, None);
    sim.end(1, 2, ExecutionStatus::Cancelled, "cancelled");
    assert_eq!(sim.view.stages[0].status, ExecutionStatus::Cancelled);
    assert_eq!(sim.status(), SessionStatus::Cancelled);
    assert!(sim.started.len() == 1, "no synthesis after cancel");
}

#[test]
fn timeout_maps_to_timed_out_not_cancelled() {
    let mut sim = Sim::new(vec![stage("s", SuccessPolicy::Any, &["A"])]);
    sim.settle();
    sim.view.deadline_passed = true;
    sim.settle();
    assert_eq!(
        sim.view.status,
        SessionStatus::InProgress,
        "timeout does not show cancelling"
    );
    sim.end(1, 1, ExecutionStatus::TimedOut, "deadline");
    assert_eq!(sim.view.stages[0].status, ExecutionStatus::TimedOut);
    let (status, _, error) = sim.finished.clone().unwrap();
    assert_eq!(status, SessionStatus::TimedOut);
    assert_eq!(error.as_deref(), Some("session timed out"));
}

#[test]
fn cancel_during_executive_summary_ends_cancelled() {
    let mut sim = Sim::new(vec![stage("s", SuccessPolicy::Any, &["A"])]);
    sim.settle();
    sim.end(1, 1, ExecutionStatus::Completed, "done");
    assert_eq!(sim.view.executive_summary, ExecutiveSummaryView::Requested);
    sim.view.cancel_requested = true;
    sim.settle();
    let (status, final_analysis, _) = sim.finished.clone().unwrap();
    assert_eq!(status, SessionStatus::Cancelled);
    assert_eq!(final_analysis.as_deref(), Some("done"));
}

#[test]
fn executions_timing_out_on_their_own_time_out_the_stage() {
    let mut sim = Sim::new(vec![stage("s", SuccessPolicy::Any, &["A", "B"])]);
    sim.settle();
    sim.end(
        1,
        1,
        ExecutionStatus::TimedOut,
        "2 consecutive iteration timeouts",
    );
    sim.end(
        1,
        2,
        ExecutionStatus::TimedOut,
        "2 consecutive iteration timeouts",
    );
    assert_eq!(sim.view.stages[0].status, ExecutionStatus::TimedOut);
    assert_eq!(sim.status(), SessionStatus::TimedOut);
}

#[test]
fn nothing_to_do_for_pending_or_terminal_sessions() {
    let mut sim = Sim::new(vec![stage("s", SuccessPolicy::Any, &["A"])]);
    sim.view.status = SessionStatus::Pending;
    assert!(decide(&sim.plan, &sim.view).is_empty());
    for status in [
        SessionStatus::Completed,
        SessionStatus::Failed,
        SessionStatus::Cancelled,
        SessionStatus::TimedOut,
    ] {
        sim.view.status = status;
        sim.view.cancel_requested = true;
        assert!(decide(&sim.plan, &sim.view).is_empty(), "{status}");
    }
}

#[test]
fn restart_mid_session_resumes_from_the_view() {
    // A fresh process sees stage 1 done and stage 2 running: it waits, then continues.
    let mut sim = Sim::new(vec![
        stage("one", SuccessPolicy::Any, &["A"]),
        stage("two", SuccessPolicy::Any, &["B"]),
    ]);
    sim.settle();
    sim.end(1, 1, ExecutionStatus::Completed, "first");
    let snapshot = sim.view.clone();
    let mut restarted = Sim::new(sim.plan.stages.clone());
    restarted.view = snapshot;
    assert!(
        decide(&restarted.plan, &restarted.view).is_empty(),
        "nothing duplicated"
    );
    restarted.end(2, 1, ExecutionStatus::Completed, "second");
    assert_eq!(restarted.summaries_requested, vec!["second"]);
}

#[test]
fn aggregation_table() {
    use ExecutionStatus::*;
    let cases: &[(SuccessPolicy, &[ExecutionStatus], ExecutionStatus)] = &[
        (SuccessPolicy::Any, &[Completed], Completed),
        (SuccessPolicy::Any, &[Failed], Failed),
        (SuccessPolicy::Any, &[Completed, Failed], Completed),
        (
            SuccessPolicy::Any,
            &[Failed, Completed, TimedOut],
            Completed,
        ),
        (SuccessPolicy::Any, &[Failed, Failed], Failed),
        (SuccessPolicy::Any, &[TimedOut, TimedOut], TimedOut),
        (SuccessPolicy::Any, &[Cancelled, Cancelled], Cancelled),
        (SuccessPolicy::Any, &[TimedOut, Cancelled], Failed),
        (SuccessPolicy::Any, &[TimedOut, Failed], Failed),
        (SuccessPolicy::All, &[Completed], Completed),
        (SuccessPolicy::All, &[Completed, Completed], Completed),
        (SuccessPolicy::All, &[Completed, Failed], Failed),
        (SuccessPolicy::All, &[Completed, TimedOut], TimedOut),
        (SuccessPolicy::All, &[Completed, Cancelled], Cancelled),
        (SuccessPolicy::All, &[Failed, TimedOut], Failed),
    ];
    for (policy, statuses, expected) in cases {
        let execs: Vec<ExecutionView> = statuses
            .iter()
            .zip(1u32..)
            .map(|(s, i)| ExecutionView {
                index: i,
                display_name: format!("agent{i}"),
                status: *s,
                final_analysis: None,
                error: (*s != Completed).then(|| "why".to_string()),
                stopping: false,
            })
            .collect();
        let (status, error) = aggregate_stage(*policy, &execs);
        assert_eq!(status, *expected, "{policy} {statuses:?}");
        assert_eq!(
            error.is_none(),
            status == Completed,
            "{policy} {statuses:?}"
        );
    }
}

#[test]
fn single_execution_error_is_its_own() {
    let execs = [ExecutionView {
        index: 1,
        display_name: "A".into(),
        status: ExecutionStatus::Failed,
        final_analysis: None,
        error: Some("max iterations reached and last call failed".into()),
        stopping: false,
    }];
    let (_, error) = aggregate_stage(SuccessPolicy::Any, &execs);
    assert_eq!(
        error.as_deref(),
        Some("max iterations reached and last call failed")
    );
}

#[test]
fn admission_respects_limit_and_creation_order() {
    let pending = vec![
        PendingSession {
            id: "c".into(),
            created: 3,
        },
        PendingSession {
            id: "a".into(),
            created: 1,
        },
        PendingSession {
            id: "b2".into(),
            created: 2,
        },
        PendingSession {
            id: "b1".into(),
            created: 2,
        },
    ];
    assert_eq!(admit(&pending, 0, Some(2)), vec!["a", "b1"]);
    assert_eq!(admit(&pending, 1, Some(2)), vec!["a"]);
    assert!(admit(&pending, 2, Some(2)).is_empty());
    assert!(admit(&pending, 5, Some(2)).is_empty());
    assert_eq!(admit(&pending, 0, None), vec!["a", "b1", "b2", "c"]);
}
