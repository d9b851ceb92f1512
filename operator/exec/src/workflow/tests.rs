use tarsy_chain::{ChainPlan, decide};
use tarsy_config::{DefaultsSpec, Named, Origin, build_config, parse_config};
use tarsy_core::{SessionStatus, SuccessPolicy};

use super::*;
use crate::plan::chain_plan;

const CONFIG: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: p}
spec: {type: google, model: m, apiKeyEnv: K}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: a}
spec: {}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: b}
spec: {}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: c}
spec:
  alertTypes: [T]
  llmProvider: p
  stages:
  - name: look
    agents: [{name: a}, {name: b}]
  - name: conclude
    agent: a
"#;

/// The configuration, and chain `c` with agent `b` of its first stage
/// renamed to an agent that does not exist (a configuration that changed
/// under a running session) and the first stage's policy set.
fn setup(policy: SuccessPolicy) -> (Config, Named<ChainSpec>) {
    let objects = parse_config("t.yaml", CONFIG, &|_| None).unwrap();
    let config = build_config(objects, &DefaultsSpec::default()).unwrap();
    let mut spec = config.chain("c").unwrap().spec.clone();
    let stage = &mut spec.stages[0];
    stage.agents.as_mut().unwrap()[1].name = "ghost".into();
    stage.success_policy = Some(policy);
    (config, Named::new("c", spec, Origin::Builtin))
}

fn view() -> SessionView {
    SessionView {
        status: SessionStatus::InProgress,
        cancel_requested: false,
        deadline_passed: false,
        stages: Vec::new(),
        executive_summary: ExecutiveSummaryView::NotRequested,
        spent: None,
    }
}

/// Applies what the machine decides until it waits; every execution that
/// runs completes with `"{name} done"`. Returns every step.
fn drive(wf: &Workflow<'_>, plan: &ChainPlan, view: &mut SessionView) -> Vec<Step> {
    let mut steps = Vec::new();
    for _ in 0..32 {
        let actions = decide(plan, view);
        if actions.is_empty() {
            break;
        }
        for action in actions {
            let step = wf.apply(view, action);
            match &step.effect {
                Effect::StartStage(record) => {
                    for (e, _) in record.runnable() {
                        let text = format!("{} done", e.display_name);
                        execution_ended(
                            view,
                            record.db_index,
                            e.index,
                            ExecutionStatus::Completed,
                            None,
                            Some(text),
                        );
                    }
                }
                Effect::Summarize { .. } => summary_done(view, Ok("summary".into())),
                _ => {}
            }
            steps.push(step);
        }
    }
    steps
}

#[test]
fn an_execution_that_cannot_be_configured_fails_alone() {
    let (config, chain) = setup(SuccessPolicy::Any);
    let wf = Workflow {
        config: &config,
        chain: &chain.spec,
        session_id: "s",
        selection: None,
    };
    let plan = chain_plan(&config, &chain);
    let mut view = view();
    let start = decide(&plan, &view).remove(0);
    let step = wf.apply(&mut view, start);

    let Effect::StartStage(record) = &step.effect else {
        panic!("{step:?}")
    };
    assert_eq!(record.id, "s-s1");
    assert_eq!(record.runnable().count(), 1, "only a runs");
    let ghost = &record.executions[1];
    let error = ghost.config.as_ref().unwrap_err();
    assert!(
        error.starts_with(UNRESOLVED) && error.contains("ghost"),
        "{error}"
    );
    // Both rows exist; the unresolved one is failed with the reason, and
    // the session shows the stage as its current one.
    assert!(matches!(&step.store[0], StoreOp::CreateStage(s) if s.id.as_deref() == Some("s-s1")));
    assert_eq!(
        step.store[1],
        StoreOp::Progress {
            session_id: "s".into(),
            stage_index: 1,
            stage_id: "s-s1".into()
        }
    );
    let created: Vec<&str> = step
        .store
        .iter()
        .filter_map(|op| match op {
            StoreOp::CreateExecution(e) => e.id.as_deref(),
            _ => None,
        })
        .collect();
    assert_eq!(created, ["s-s1-e1", "s-s1-e2"]);
    assert!(step.store.contains(&StoreOp::FailExecution {
        execution_id: "s-s1-e2".into(),
        error: error.clone()
    }));
    let stage = &view.stages[0];
    assert_eq!(stage.executions[0].status, ExecutionStatus::Pending);
    assert_eq!(stage.executions[1].status, ExecutionStatus::Failed);
}

#[test]
fn the_stage_policy_decides_after_an_unresolved_execution() {
    // any: the other agent's success carries the stage; the session goes on.
    let (config, chain) = setup(SuccessPolicy::Any);
    let wf = Workflow {
        config: &config,
        chain: &chain.spec,
        session_id: "s",
        selection: None,
    };
    let plan = chain_plan(&config, &chain);
    let mut v = view();
    let steps = drive(&wf, &plan, &mut v);
    assert_eq!(v.status, SessionStatus::Completed);
    let Some(Effect::FinishSession {
        final_analysis,
        error,
        ..
    }) = steps.last().map(|s| &s.effect)
    else {
        panic!("{steps:?}")
    };
    assert_eq!(final_analysis.as_deref(), Some("a done"));
    assert_eq!(error, &None);
    // The summary reached the row's outcome.
    assert!(matches!(
        &steps.last().unwrap().store[0],
        StoreOp::FinishSession { outcome, .. } if outcome.executive_summary.as_deref() == Some("summary")
    ));

    // all: the stage fails, naming the agent and why; no later stage starts.
    let (config, chain) = setup(SuccessPolicy::All);
    let wf = Workflow {
        config: &config,
        chain: &chain.spec,
        session_id: "s",
        selection: None,
    };
    let plan = chain_plan(&config, &chain);
    let mut v = view();
    let steps = drive(&wf, &plan, &mut v);
    assert_eq!(v.status, SessionStatus::Failed);
    assert_eq!(v.stages.len(), 1, "{:?}", v.stages);
    let Some(Effect::FinishSession { error, .. }) = steps.last().map(|s| &s.effect) else {
        panic!("{steps:?}")
    };
    let error = error.as_deref().unwrap_or_default();
    assert!(
        error.contains("ghost") && error.contains(UNRESOLVED),
        "{error}"
    );
}

#[test]
fn stops_mark_the_executions_and_a_cancel_shows_as_cancelling() {
    let (config, chain) = setup(SuccessPolicy::Any);
    let wf = Workflow {
        config: &config,
        chain: &chain.spec,
        session_id: "s",
        selection: None,
    };
    let plan = chain_plan(&config, &chain);
    let mut v = view();
    let start = decide(&plan, &v).remove(0);
    wf.apply(&mut v, start);
    v.cancel_requested = true;
    let actions = decide(&plan, &v);
    let step = wf.apply(&mut v, actions[0].clone());
    assert_eq!(
        step.effect,
        Effect::Stop {
            reason: StopReason::Cancelled,
            executions: vec![(1, 1)]
        }
    );
    assert!(step.store.is_empty());
    assert!(v.stages[0].executions[0].stopping);
    assert_eq!(v.status, SessionStatus::Cancelling);
    // Asked once: the next decision waits for the execution to end.
    assert!(decide(&plan, &v).is_empty());
}

#[test]
fn a_stop_for_the_deadline_reads_as_timed_out() {
    assert_eq!(
        stopped_outcome(
            Some(StopReason::TimedOut),
            ExecutionStatus::Cancelled,
            Some("cancelled".into())
        ),
        (
            ExecutionStatus::TimedOut,
            Some("session timed out".to_string())
        )
    );
    assert_eq!(
        stopped_outcome(
            Some(StopReason::Cancelled),
            ExecutionStatus::Cancelled,
            Some("cancelled".into())
        ),
        (ExecutionStatus::Cancelled, Some("cancelled".to_string()))
    );
    assert_eq!(
        stopped_outcome(
            Some(StopReason::TimedOut),
            ExecutionStatus::Completed,
            Some("x".into())
        ),
        (ExecutionStatus::Completed, None)
    );
}
