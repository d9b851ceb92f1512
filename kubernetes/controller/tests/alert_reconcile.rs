//! The Alert reconcile, driven through whole sessions without a cluster:
//! each step applies the previous outcome the way the controller does
//! (status written, executions created) and flips execution phases the way
//! runners do.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;
use tarsy_chain::StopReason;
use tarsy_config::{Config, Defaults};
use tarsy_controller::alert::{
    AlertInputs, AlertOutcome, OpenReflector, STOP_ANNOTATION, ScoringState, StoreOp,
    SummaryProgress, SummaryRequest, reconcile_alert,
};
use tarsy_controller::conditions;
use tarsy_core::SessionStatus;
use tarsy_crds::{
    AgentExecution, AgentExecutionStatus, Alert, AlertPhase, AlertSpec, Chain, ExecutionPhase,
    McpServerOutcome,
};

const UID: &str = "11111111-2222-4333-8444-555555555555";

fn chain(name: &str, yaml: &str) -> Chain {
    let spec = serde_yaml::from_str(yaml).unwrap();
    let mut c = Chain::new(name, spec);
    c.metadata.namespace = Some("ns".into());
    c
}

fn config(chains: &[Chain]) -> Config {
    tarsy_crds::config::from_resources(Defaults::default(), chains, &[], &[], &[])
}

fn two_stage_chain() -> Chain {
    chain(
        "k8s",
        r#"
alertTypes: [PodCrash]
sessionTimeout: 15m
stages:
  - name: investigate
    agent: KubernetesAgent
  - name: deep dive
    agent: KubernetesAgent
    replicas: 2
"#,
    )
}

fn alert(alert_type: &str) -> Alert {
    let mut a = Alert::new(
        "crash",
        AlertSpec {
            alert_type: alert_type.into(),
            data: "pod x is crash looping".into(),
            chain_ref: None,
            runbook_url: None,
            mcp_selection: None,
            author: Some("alice".into()),
            source: None,
            cancel: None,
        }
        .into(),
    );
    a.metadata = ObjectMeta {
        name: Some("crash".into()),
        namespace: Some("ns".into()),
        uid: Some(UID.into()),
        generation: Some(1),
        ..ObjectMeta::default()
    };
    a
}

struct World {
    alert: Alert,
    config: Config,
    executions: BTreeMap<String, AgentExecution>,
    summary: SummaryProgress,
    scoring: ScoringState,
    reflectors: Vec<OpenReflector>,
    cost: Option<tarsy_core::Cost>,
    hold: Option<String>,
    now: Timestamp,
}

impl World {
    fn new(alert: Alert, chains: &[Chain]) -> Self {
        Self {
            alert,
            config: config(chains),
            executions: BTreeMap::new(),
            summary: SummaryProgress::Idle,
            scoring: ScoringState::default(),
            reflectors: Vec::new(),
            cost: None,
            hold: None,
            now: Timestamp::from_second(1_800_000_000).unwrap(),
        }
    }

    fn step(&mut self, admitted: bool) -> AlertOutcome {
        let out = reconcile_alert(&AlertInputs {
            alert: &self.alert,
            config: &self.config,
            executions: &self.executions,
            admitted,
            summary: &self.summary,
            alert_masker: None,
            alert_ttl: None,
            chat: None,
            scoring: &self.scoring,
            reflectors: &self.reflectors,
            cost: self.cost,
            hold: self.hold.as_deref(),
            now: self.now,
        });
        for ae in &out.create {
            let name = ae.metadata.name.clone().unwrap();
            self.executions.entry(name).or_insert_with(|| ae.clone());
        }
        for (name, reason) in &out.stop {
            let ae = self.executions.get_mut(name).unwrap();
            ae.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(
                    STOP_ANNOTATION.into(),
                    match reason {
                        StopReason::Cancelled => "cancelled".into(),
                        StopReason::TimedOut => "timed_out".into(),
                    },
                );
        }
        self.alert.status = Some(out.status.clone());
        out
    }

    fn finish(&mut self, name: &str, phase: ExecutionPhase, analysis: &str) {
        let ae = self
            .executions
            .get_mut(name)
            .unwrap_or_else(|| panic!("no execution {name}"));
        ae.status = Some(AgentExecutionStatus {
            phase: Some(phase),
            final_analysis: (!analysis.is_empty()).then(|| analysis.to_string()),
            error: (phase != ExecutionPhase::Completed).then(|| format!("{name} broke")),
            ..AgentExecutionStatus::default()
        });
    }

    fn phase(&self) -> AlertPhase {
        self.alert.status.as_ref().unwrap().phase.unwrap()
    }
}

#[test]
fn unknown_alert_type_fails_with_a_condition_and_an_event() {
    let mut w = World::new(alert("Nope"), &[two_stage_chain()]);
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::Failed);
    let cond = out
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::CHAIN_RESOLVED)
        .unwrap();
    assert_eq!(cond.status, "False");
    assert_eq!(cond.reason, "NoChainForAlertType");
    assert!(
        out.events
            .iter()
            .any(|e| e.warning && e.reason == "NoChainForAlertType")
    );
    assert!(out.create.is_empty());
    assert!(
        out.store.is_empty(),
        "no session row for an alert that never ran"
    );
    // Terminal: reconciling again does nothing new.
    let again = w.step(true);
    assert!(again.events.is_empty() && again.create.is_empty());
}

#[test]
fn ambiguous_alert_type_fails() {
    let a = two_stage_chain();
    let b = chain(
        "k8s-too",
        "alertTypes: [PodCrash]\nstages: [{name: s, agent: KubernetesAgent}]",
    );
    let mut w = World::new(alert("PodCrash"), &[a, b]);
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::Failed);
    assert!(out.status.error.unwrap().contains("k8s-too"));
}

#[test]
fn waits_pending_until_admitted() {
    let mut w = World::new(alert("PodCrash"), &[two_stage_chain()]);
    let out = w.step(false);
    assert_eq!(w.phase(), AlertPhase::Pending);
    assert!(out.create.is_empty());
    assert!(out.requeue.is_some());
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::InProgress);
    assert_eq!(out.create.len(), 1);
}

#[test]
fn the_status_carries_the_session_cost_once_there_is_one() {
    let mut w = World::new(alert("PodCrash"), &[two_stage_chain()]);
    w.step(true);
    assert_eq!(w.alert.status.as_ref().unwrap().cost, None);
    let mut cost = tarsy_core::Cost {
        usd: 0.012_345,
        calls: 3,
        ..tarsy_core::Cost::default()
    };
    cost.tokens.total_tokens = 4_200;
    w.cost = Some(cost);
    w.step(true);
    let status = w.alert.status.clone().unwrap().cost.unwrap();
    assert_eq!(
        (status.usd.as_str(), status.partial, status.tokens),
        ("0.0123", false, 4_200)
    );
    // A model without a price: a lower bound, said so.
    cost.unpriced_calls = 1;
    cost.partial = true;
    w.cost = Some(cost);
    w.step(true);
    assert!(
        w.alert
            .status
            .as_ref()
            .unwrap()
            .cost
            .as_ref()
            .unwrap()
            .partial
    );
}

#[test]
fn a_spent_daily_budget_holds_the_alert_pending_until_it_is_not() {
    let mut w = World::new(alert("PodCrash"), &[two_stage_chain()]);
    w.hold = Some("the budget of $5.0000/day of this scope is spent".into());
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::Pending);
    assert!(out.create.is_empty());
    let status = w.alert.status.clone().unwrap();
    let admitted = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Admitted")
        .unwrap();
    assert_eq!(
        (admitted.status.as_str(), admitted.reason.as_str()),
        ("False", "BudgetExhausted")
    );
    assert!(admitted.message.contains("$5.0000/day"));
    assert!(out.store.iter().any(|op| matches!(op,
        StoreOp::HoldSession { reason, .. } if reason.contains("$5.0000/day"))));
    assert!(
        out.requeue.is_some(),
        "looks again for a raised limit or the next day"
    );
    // The limit raised (or a new day): admitted, the condition says so.
    w.hold = None;
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::InProgress);
    assert_eq!(out.create.len(), 1);
    let status = w.alert.status.clone().unwrap();
    let admitted = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Admitted")
        .unwrap();
    assert_eq!(admitted.status, "True");
}

#[test]
fn a_spent_budget_skips_later_stages_and_says_so() {
    let capped = chain(
        "k8s",
        r#"
alertTypes: [PodCrash]
sessionTimeout: 15m
budget: {maxCostUsd: 0.05}
stages:
  - name: investigate
    agent: KubernetesAgent
  - name: deep dive
    agent: KubernetesAgent
"#,
    );
    let mut w = World::new(alert("PodCrash"), &[capped]);
    let out = w.step(true);
    // The budget goes to the pod with the agent's configuration.
    let budget = out.create[0].spec.resolved.budget.unwrap();
    assert_eq!(budget.max_cost_usd, Some(0.05));
    w.cost = Some(tarsy_core::Cost {
        usd: 0.07,
        calls: 4,
        ..tarsy_core::Cost::default()
    });
    w.finish(
        "crash-s1-kubernetesagent",
        ExecutionPhase::Completed,
        "OOM, partly checked",
    );
    let out = w.step(true);
    assert!(
        out.create.is_empty(),
        "deep dive never starts: {:?}",
        out.create
    );
    assert_eq!(
        out.summarize.as_ref().map(|s| s.final_analysis.as_str()),
        Some("OOM, partly checked")
    );
    w.summary = SummaryProgress::Done(Ok("OOM".into()));
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::Completed);
    let status = w.alert.status.clone().unwrap();
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "BudgetExhausted")
    );
    assert!(
        ready
            .message
            .contains("budget of $0.0500 is spent ($0.0700 so far)"),
        "{ready:?}"
    );
    assert!(
        out.events
            .iter()
            .any(|e| e.reason == "BudgetExhausted" && e.warning)
    );
    assert!(out.store.iter().any(|op| matches!(op,
        StoreOp::FinishSession { outcome, .. }
            if outcome.end_reason == Some(tarsy_core::SessionEndReason::BudgetExhausted))));
    assert_eq!(status.stages.len(), 1);
}

#[test]
fn runs_the_whole_chain_with_synthesis_and_is_idempotent() {
    let mut w = World::new(alert("PodCrash"), &[two_stage_chain()]);
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::InProgress);
    assert!(matches!(&out.store[0], StoreOp::CreateSession(s) if s.id == UID));
    assert!(out.store.iter().any(|op| matches!(op, StoreOp::CreateStage(s) if s.id.as_deref() == Some("11111111-2222-4333-8444-555555555555-s1"))));
    assert_eq!(out.create.len(), 1);
    let first = &out.create[0];
    assert_eq!(
        first.metadata.name.as_deref(),
        Some("crash-s1-kubernetesagent")
    );
    assert_eq!(
        first.metadata.owner_references.as_ref().unwrap()[0].uid,
        UID
    );
    assert_eq!(first.spec.session_id, UID);
    assert_eq!(first.spec.stage.index, 1);
    assert!(out.events.iter().any(|e| e.reason == "StageStarted"));

    // Nothing changed: nothing new to do, same status.
    let before = w.alert.status.clone();
    let again = w.step(true);
    assert!(again.events.is_empty(), "{:?}", again.events);
    assert_eq!(w.alert.status, before);

    // Stage 1 completes → stage 2 (two replicas).
    w.finish(
        "crash-s1-kubernetesagent",
        ExecutionPhase::Completed,
        "stage one says OOM",
    );
    let out = w.step(true);
    let names: Vec<_> = out
        .create
        .iter()
        .map(|a| a.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        ["crash-s2-kubernetesagent-1", "crash-s2-kubernetesagent-2"]
    );
    let status = w.alert.status.clone().unwrap();
    assert_eq!(status.stages[0].phase, ExecutionPhase::Completed);
    assert_eq!(status.current_stage.as_deref(), Some("deep dive"));

    // One replica fails, one completes: policy any → synthesis stage.
    w.finish("crash-s2-kubernetesagent-1", ExecutionPhase::Failed, "");
    w.finish(
        "crash-s2-kubernetesagent-2",
        ExecutionPhase::Completed,
        "replica two: OOM",
    );
    let out = w.step(true);
    assert_eq!(out.create.len(), 1);
    let synth = &out.create[0];
    assert_eq!(synth.spec.stage.name, "deep dive - Synthesis");
    assert_eq!(synth.spec.stage.index, 3);
    assert_eq!(synth.spec.kind, tarsy_crds::ExecutionKind::Synthesis);

    // Synthesis completes → the executive summary of its analysis is asked
    // for; the session is not finished yet.
    let synth_name = synth.metadata.name.clone().unwrap();
    w.finish(
        &synth_name,
        ExecutionPhase::Completed,
        "root cause: memory limit",
    );
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::InProgress);
    assert_eq!(
        out.summarize,
        Some(SummaryRequest {
            session_id: UID.into(),
            chain: "k8s".into(),
            final_analysis: "root cause: memory limit".into(),
        })
    );
    assert!(
        out.store
            .iter()
            .any(|op| matches!(op, StoreOp::FinishStage { .. }))
    );
    assert!(
        !out.store
            .iter()
            .any(|op| matches!(op, StoreOp::FinishSession { .. })),
        "the session waits for its summary: {:?}",
        out.store
    );
    assert!(out.requeue.is_some());
    // While the call runs (outside the reconcile) nothing is asked again.
    w.summary = SummaryProgress::Running;
    let waiting = w.step(true);
    assert_eq!(waiting.summarize, None);
    assert_eq!(w.phase(), AlertPhase::InProgress);
    // Nothing remembers the call (an operator restart): asked again.
    w.summary = SummaryProgress::Idle;
    let again = w.step(true);
    assert_eq!(again.summarize, out.summarize);
    assert_eq!(w.phase(), AlertPhase::InProgress);

    // The summary came back → into the status, Completed with both.
    w.summary = SummaryProgress::Done(Ok("OOM: raise the limit".into()));
    let out = w.step(true);
    assert_eq!(out.summarize, None);
    assert_eq!(w.phase(), AlertPhase::Completed);
    let status = w.alert.status.clone().unwrap();
    assert_eq!(
        status.final_analysis.as_deref(),
        Some("root cause: memory limit")
    );
    assert_eq!(
        status.executive_summary.as_deref(),
        Some("OOM: raise the limit")
    );
    assert_eq!(status.executive_summary_error, None);
    assert_eq!(
        conditions::status_of(&status.conditions, conditions::READY),
        Some("True")
    );
    assert!(out.store.iter().any(|op| matches!(
        op,
        StoreOp::FinishSession { outcome, .. }
            if outcome.status == SessionStatus::Completed
                && outcome.final_analysis.as_deref() == Some("root cause: memory limit")
                && outcome.executive_summary.as_deref() == Some("OOM: raise the limit")
                && outcome.executive_summary_error.is_none()
    )));
    assert_eq!(status.stages.len(), 3);
    // Terminal: nothing more is asked.
    let again = w.step(true);
    assert!(again.summarize.is_none() && again.store.is_empty());
}

#[test]
fn a_failed_summary_still_completes_the_session() {
    let c = chain(
        "one",
        "alertTypes: [PodCrash]\nstages: [{name: s, agent: KubernetesAgent}]",
    );
    let mut w = World::new(alert("PodCrash"), &[c]);
    w.step(true);
    w.finish(
        "crash-s1-kubernetesagent",
        ExecutionPhase::Completed,
        "disk full",
    );
    let out = w.step(true);
    assert_eq!(
        out.summarize.as_ref().map(|r| r.final_analysis.as_str()),
        Some("disk full")
    );
    w.summary = SummaryProgress::Done(Err("executive summary timed out after 120s".into()));
    let out = w.step(true);
    assert!(
        out.events
            .iter()
            .any(|e| e.warning && e.reason == "ExecutiveSummaryFailed"),
        "{:?}",
        out.events
    );
    assert_eq!(w.phase(), AlertPhase::Completed);
    let status = w.alert.status.clone().unwrap();
    assert_eq!(status.final_analysis.as_deref(), Some("disk full"));
    assert_eq!(status.executive_summary, None);
    assert_eq!(
        conditions::status_of(&status.conditions, conditions::READY),
        Some("True")
    );
    assert!(out.store.iter().any(|op| matches!(
        op,
        StoreOp::FinishSession { outcome, .. }
            if outcome.status == SessionStatus::Completed
                && outcome.executive_summary.is_none()
                && outcome.executive_summary_error.as_deref().is_some_and(|e| e.contains("timed out"))
    )));
    assert!(out.summarize.is_none());
}

#[test]
fn a_failed_session_asks_for_no_summary() {
    let mut w = World::new(alert("PodCrash"), &[two_stage_chain()]);
    w.step(true);
    w.finish("crash-s1-kubernetesagent", ExecutionPhase::Failed, "");
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::Failed);
    assert!(out.summarize.is_none());
}

#[test]
fn failed_stage_fails_the_session() {
    let mut w = World::new(alert("PodCrash"), &[two_stage_chain()]);
    w.step(true);
    w.finish("crash-s1-kubernetesagent", ExecutionPhase::Failed, "");
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::Failed);
    assert!(
        out.events
            .iter()
            .any(|e| e.warning && e.reason == "StageFailed")
    );
    assert!(
        out.status
            .error
            .unwrap()
            .contains("crash-s1-kubernetesagent broke")
    );
    assert!(out.create.is_empty());
}

#[test]
fn cancel_stops_running_executions_then_ends_cancelled() {
    let mut w = World::new(alert("PodCrash"), &[two_stage_chain()]);
    w.step(true);
    w.alert.spec.cancel = Some(true);
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::Cancelling);
    assert_eq!(
        out.stop,
        [(
            "crash-s1-kubernetesagent".to_string(),
            StopReason::Cancelled
        )]
    );
    // Asked once: the annotation marks it as stopping.
    let again = w.step(true);
    assert!(again.stop.is_empty());
    w.finish("crash-s1-kubernetesagent", ExecutionPhase::Cancelled, "");
    w.step(true);
    assert_eq!(w.phase(), AlertPhase::Cancelled);
}

#[test]
fn cancel_before_admission_needs_no_executions() {
    let mut a = alert("PodCrash");
    a.spec.cancel = Some(true);
    let mut w = World::new(a, &[two_stage_chain()]);
    let out = w.step(false);
    assert_eq!(w.phase(), AlertPhase::Cancelled);
    assert!(out.create.is_empty());
}

#[test]
fn session_timeout_stops_executions_and_ends_timed_out() {
    let mut w = World::new(alert("PodCrash"), &[two_stage_chain()]);
    let out = w.step(true);
    // The deadline is the next time to look.
    assert!(out.requeue.unwrap().as_secs() <= 15 * 60);
    w.now = Timestamp::from_second(1_800_000_000 + 16 * 60).unwrap();
    let out = w.step(true);
    assert_eq!(out.stop[0].1, StopReason::TimedOut);
    w.finish("crash-s1-kubernetesagent", ExecutionPhase::TimedOut, "");
    w.step(true);
    assert_eq!(w.phase(), AlertPhase::TimedOut);
}

#[test]
fn an_agent_that_cannot_be_resolved_fails_its_execution_and_the_stage_decides() {
    let c = chain(
        "bad",
        "alertTypes: [PodCrash]\nstages: [{name: s, agent: NoSuchAgent}]",
    );
    let mut w = World::new(alert("PodCrash"), &[c]);
    let out = w.step(true);
    // No pod for it: the stage lists it as not started, with the reason.
    assert!(out.create.is_empty());
    let stage = &out.status.stages[0];
    assert_eq!(stage.executions, ["crash-s1-nosuchagent"]);
    assert_eq!(stage.unstarted[0].display_name, "NoSuchAgent");
    assert!(
        stage.unstarted[0]
            .error
            .starts_with("cannot resolve the agent configuration"),
        "{:?}",
        stage.unstarted
    );
    assert!(out.store.iter().any(|op| matches!(
        op,
        StoreOp::FailExecution { execution_id, error }
            if execution_id.ends_with("-s1-e1") && error.contains("NoSuchAgent")
    )));
    // Its only execution failed, so the stage and the session fail, naming it.
    assert_eq!(w.phase(), AlertPhase::Failed);
    assert!(out.status.error.unwrap().contains("NoSuchAgent"));
    assert!(out.store.iter().any(|op| matches!(
        op,
        StoreOp::FinishSession { outcome, .. } if outcome.status == SessionStatus::Failed
    )));
    assert!(out.events.iter().any(|e| e.reason == "ExecutionNotStarted"));
}

#[test]
fn an_execution_without_some_mcp_servers_marks_the_alert_degraded() {
    let c = chain(
        "one",
        "alertTypes: [PodCrash]\nstages: [{name: s, agent: KubernetesAgent}]",
    );
    let mut w = World::new(alert("PodCrash"), &[c]);
    w.step(true);
    let name = "crash-s1-kubernetesagent";
    w.step(true);
    let degraded = |w: &World| {
        let status = w.alert.status.clone().unwrap();
        status
            .conditions
            .iter()
            .find(|c| c.type_ == conditions::DEGRADED)
            .cloned()
    };
    assert_eq!(degraded(&w), None, "nothing is degraded yet");

    // The runner reports a server it could not start, then completes.
    let outcome = |server: &str, healthy: bool| McpServerOutcome {
        name: server.into(),
        healthy,
        error: (!healthy).then(|| "spawn failed: no such file".to_string()),
        checked_at: Time(w.now),
        tools: Vec::new(),
    };
    let report = vec![
        outcome("kubernetes-server", false),
        outcome("prometheus", true),
    ];
    w.executions.get_mut(name).unwrap().status = Some(AgentExecutionStatus {
        phase: Some(ExecutionPhase::Active),
        mcp_servers: report.clone(),
        ..AgentExecutionStatus::default()
    });
    w.step(true);
    let cond = degraded(&w).expect("a Degraded condition");
    assert_eq!(cond.status, "True");
    assert_eq!(cond.reason, "McpServerUnavailable");
    assert!(
        cond.message
            .contains("kubernetes-server (crash-s1-kubernetesagent)")
            && cond.message.contains("no such file")
            && !cond.message.contains("prometheus"),
        "{}",
        cond.message
    );

    // It stays on the finished Alert: the answer was made without the server.
    w.finish(name, ExecutionPhase::Completed, "disk full");
    w.executions
        .get_mut(name)
        .unwrap()
        .status
        .as_mut()
        .unwrap()
        .mcp_servers = report;
    w.step(true);
    w.summary = SummaryProgress::Done(Ok("summary".into()));
    w.step(true);
    assert_eq!(w.phase(), AlertPhase::Completed);
    assert_eq!(degraded(&w).unwrap().status, "True");
}

#[test]
fn a_finished_alert_expires_after_its_ttl() {
    let c = chain(
        "one",
        "alertTypes: [PodCrash]\nstages: [{name: s, agent: KubernetesAgent}]",
    );
    let mut w = World::new(alert("PodCrash"), &[c]);
    w.step(true);
    w.finish(
        "crash-s1-kubernetesagent",
        ExecutionPhase::Completed,
        "disk full",
    );
    w.step(true);
    w.summary = SummaryProgress::Done(Ok("summary".into()));
    w.step(true);
    assert_eq!(w.phase(), AlertPhase::Completed);
    let finished = w.now;

    let at = |w: &World, now: Timestamp, ttl: Option<Duration>| {
        reconcile_alert(&AlertInputs {
            alert: &w.alert,
            config: &w.config,
            executions: &w.executions,
            admitted: true,
            summary: &w.summary,
            alert_masker: None,
            alert_ttl: ttl,
            chat: None,
            scoring: &Default::default(),
            reflectors: &[],
            cost: None,
            hold: None,
            now,
        })
    };
    let hour = Duration::from_secs(3600);
    // Before the TTL: kept, and looked at again when it will have passed.
    let out = at(
        &w,
        Timestamp::from_second(finished.as_second() + 600).unwrap(),
        Some(hour),
    );
    assert!(!out.expire);
    assert_eq!(out.requeue, Some(Duration::from_secs(3000)));
    // After it: expired.
    let out = at(
        &w,
        Timestamp::from_second(finished.as_second() + 3600).unwrap(),
        Some(hour),
    );
    assert!(out.expire);
    // Without a TTL: kept forever.
    let out = at(
        &w,
        Timestamp::from_second(finished.as_second() + 86_400 * 365).unwrap(),
        None,
    );
    assert!(!out.expire && out.requeue.is_none());
}

/// A chat question the API stored for a finished Alert: the operator (the
/// only writer of AgentExecutions) creates the AgentExecution answering it;
/// when chat is not allowed (any more), it closes the question's records
/// with the reason instead.
#[test]
fn a_chat_question_on_a_finished_alert_gets_its_execution_from_the_operator() {
    use tarsy_controller::alert::ChatRequest;
    let chat_chain = |enabled: bool| {
        chain(
            "k8s",
            &format!(
                "alertTypes: [PodCrash]\nchat: {{enabled: {enabled}}}\nstages: [{{name: s, agent: KubernetesAgent}}]"
            ),
        )
    };
    let mut a = alert("PodCrash");
    a.status = Some(tarsy_crds::AlertStatus {
        phase: Some(AlertPhase::Completed),
        ..Default::default()
    });
    let now = Timestamp::from_second(1_800_000_000).unwrap();
    let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    let request = ChatRequest {
        session: tarsy_store::Session {
            id: UID.into(),
            alert_data: "pod x".into(),
            alert_type: "PodCrash".into(),
            chain_id: "k8s".into(),
            status: SessionStatus::Completed,
            author: None,
            runbook_url: None,
            mcp_selection: None,
            final_analysis: Some("done".into()),
            executive_summary: None,
            executive_summary_error: None,
            error_message: None,
            end_reason: None,
            hold_reason: None,
            pod_id: None,
            current_stage_index: None,
            current_stage_id: None,
            created_at: at,
            started_at: Some(at),
            completed_at: Some(at),
            last_interaction_at: None,
            deleted_at: None,
            score: None,
            review: None,
        },
        stage: tarsy_store::Stage {
            id: format!("{UID}-s2"),
            session_id: UID.into(),
            stage_name: "Chat Response".into(),
            kind: tarsy_core::StageKind::Chat,
            stage_index: 2,
            expected_agent_count: 1,
            parallel_type: None,
            success_policy: None,
            status: tarsy_core::ExecutionStatus::Pending,
            error_message: None,
            chat_id: Some("chat-1".into()),
            chat_user_message_id: Some("msg-1".into()),
            created_at: at,
            started_at: None,
            completed_at: None,
        },
        message: tarsy_store::ChatUserMessage {
            id: "msg-1".into(),
            chat_id: "chat-1".into(),
            content: "Why did it crash?".into(),
            author: Some("bob".into()),
            created_at: at,
        },
    };
    let run = |config: &Config| {
        reconcile_alert(&AlertInputs {
            alert: &a,
            config,
            executions: &BTreeMap::new(),
            admitted: true,
            summary: &SummaryProgress::Idle,
            alert_masker: None,
            alert_ttl: None,
            chat: Some(&request),
            scoring: &Default::default(),
            reflectors: &[],
            cost: None,
            hold: None,
            now,
        })
    };

    let out = run(&config(&[chat_chain(true)]));
    assert_eq!(out.create.len(), 1, "{out:?}");
    let ae = &out.create[0];
    assert_eq!(ae.spec.kind, tarsy_crds::ExecutionKind::Chat);
    assert_eq!(ae.spec.stage.id.as_deref(), Some(request.stage.id.as_str()));
    let chat = ae.spec.chat.as_ref().unwrap();
    assert_eq!(
        (
            chat.message_id.as_str(),
            chat.question.as_str(),
            chat.author.as_deref()
        ),
        ("msg-1", "Why did it crash?", Some("bob"))
    );
    assert!(ae.spec.deadline.is_some());
    assert!(out.store.is_empty());

    let out = run(&config(&[chat_chain(false)]));
    assert!(out.create.is_empty());
    assert!(out.store.iter().any(|op| matches!(
        op,
        StoreOp::FinishStage { stage_id, status: tarsy_core::ExecutionStatus::Failed, error: Some(e) }
            if stage_id == &request.stage.id && e.contains("not enabled")
    )), "{:?}", out.store);
    assert!(out.events.iter().any(|e| e.reason == "ChatNotStarted"));
}

/// Runs a one-stage chain (`extra` added to its spec) to its end: the last
/// step's outcome.
fn run_to_completion(extra: &str) -> (World, AlertOutcome) {
    let c = chain(
        "one",
        &format!("alertTypes: [PodCrash]\nstages: [{{name: s, agent: KubernetesAgent}}]\n{extra}"),
    );
    let mut w = World::new(alert("PodCrash"), &[c]);
    w.step(true);
    w.finish(
        "crash-s1-kubernetesagent",
        ExecutionPhase::Completed,
        "disk full",
    );
    w.step(true);
    w.summary = SummaryProgress::Done(Ok("summary".into()));
    let out = w.step(true);
    assert_eq!(w.phase(), AlertPhase::Completed);
    (w, out)
}

fn judgement() -> tarsy_exec::scoring::Judgement {
    tarsy_exec::scoring::Judgement {
        session_id: UID.into(),
        attempt_id: "attempt-1".into(),
        stage_id: format!("{UID}-s2"),
        stage_index: 2,
        execution_id: format!("{UID}-s2-e1"),
    }
}

fn scored(w: &World) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    w.alert
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::SCORED)
}

#[test]
fn a_completed_session_of_a_scoring_chain_is_scored_by_a_judge_pod() {
    // Without scoring on, nothing is asked for.
    let (_, out) = run_to_completion("");
    assert_eq!(out.score, None);

    let (mut w, out) = run_to_completion("scoring: {enabled: true}");
    assert_eq!(
        out.score.as_deref(),
        Some(UID),
        "the IO layer starts the attempt"
    );
    // The attempt exists and the Alert asks for its judge: one
    // AgentExecution of kind scoring, in the judge's stage.
    w.scoring = ScoringState {
        badge: Some(tarsy_store::ScoreBadge {
            status: tarsy_core::ScoreStatus::InProgress,
            score: None,
            failure_tags: vec![],
        }),
        running: Some(judgement()),
        requested: true,
        ..ScoringState::default()
    };
    let out = w.step(true);
    assert_eq!(out.create.len(), 1, "{out:?}");
    let ae = &out.create[0];
    assert_eq!(ae.spec.kind, tarsy_crds::ExecutionKind::Scoring);
    assert_eq!(
        ae.spec.stage.id.as_deref(),
        Some(judgement().stage_id.as_str())
    );
    assert_eq!(ae.spec.stage.name, "Scoring");
    assert_eq!(ae.spec.display_name, "ScoringAgent");
    assert!(
        ae.spec.resolved.mcp_servers.is_empty(),
        "a judge is tool-less"
    );
    assert_eq!(w.phase(), AlertPhase::Completed, "the session is untouched");
    assert_eq!(scored(&w).unwrap().status, "False");
    assert_eq!(scored(&w).unwrap().reason, "Scoring");
    // Once it exists, it is not created again.
    w.scoring.requested = false;
    assert!(w.step(true).create.is_empty());

    // Scored: the score in the status, the tags in the condition.
    w.scoring = ScoringState {
        badge: Some(tarsy_store::ScoreBadge {
            status: tarsy_core::ScoreStatus::Completed,
            score: Some(88),
            failure_tags: vec!["missed-available-tool".into()],
        }),
        ended_attempts: 1,
        ..ScoringState::default()
    };
    w.step(true);
    assert_eq!(w.alert.status.as_ref().unwrap().score, Some(88));
    // The ends are counted: each new one is the IO layer's to count, reply
    // and learn from, once (also when a re-score ends just like the last).
    assert_eq!(
        w.alert.status.as_ref().unwrap().scoring_attempts_ended,
        Some(1)
    );
    let cond = scored(&w).unwrap();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("True", "Scored")
    );
    assert_eq!(cond.message, "88/100 · failure tags: missed-available-tool");

    // A failed re-score keeps the score and says why.
    w.scoring.badge.as_mut().unwrap().status = tarsy_core::ScoreStatus::Failed;
    w.scoring.last_error = Some("the judge gave no score".into());
    w.scoring.ended_attempts = 2;
    w.step(true);
    assert_eq!(w.alert.status.as_ref().unwrap().score, Some(88));
    assert_eq!(
        w.alert.status.as_ref().unwrap().scoring_attempts_ended,
        Some(2)
    );
    let cond = scored(&w).unwrap();
    assert_eq!(
        (
            cond.status.as_str(),
            cond.reason.as_str(),
            cond.message.as_str()
        ),
        ("False", "ScoringFailed", "the judge gave no score")
    );
}

#[test]
fn a_judge_whose_pod_died_does_not_keep_its_attempt_running() {
    let (mut w, _) = run_to_completion("scoring: {enabled: true}");
    w.scoring = ScoringState {
        running: Some(judgement()),
        requested: true,
        ..ScoringState::default()
    };
    let out = w.step(true);
    let name = out.create[0].metadata.name.clone().unwrap();
    w.scoring.requested = false;
    // The pod ended without the runner recording the judge's answer.
    w.finish(&name, ExecutionPhase::Failed, "");
    let out = w.step(true);
    let error = "the judge stopped before it recorded a score".to_string();
    assert!(
        out.store.contains(&StoreOp::FailScore {
            session_id: UID.into(),
            attempt_id: "attempt-1".into(),
            error: error.clone(),
        }),
        "{:?}",
        out.store
    );
    assert!(out.store.contains(&StoreOp::FinishStage {
        stage_id: judgement().stage_id,
        status: tarsy_core::ExecutionStatus::Failed,
        error: Some(error),
    }));
    assert!(
        out.events
            .iter()
            .any(|e| e.warning && e.reason == "ScoringFailed")
    );
    assert_eq!(w.phase(), AlertPhase::Completed);
}

fn reflector(feedback: bool) -> tarsy_exec::memory::Reflector {
    tarsy_exec::memory::Reflector {
        session_id: UID.into(),
        scope: "ns".into(),
        stage_id: format!("{UID}-s3"),
        stage_index: 3,
        execution_id: format!("{UID}-s3-e1"),
        feedback,
    }
}

#[test]
fn a_reflector_runs_in_its_own_pod_after_the_score() {
    let (mut w, _) = run_to_completion("scoring: {enabled: true}");
    // Asked for (its stage waits): one AgentExecution of kind memory, the
    // built-in reflector, tool-less, with its own deadline.
    w.reflectors = vec![OpenReflector {
        reflector: reflector(false),
        waiting: true,
    }];
    let out = w.step(true);
    assert_eq!(out.create.len(), 1, "{out:?}");
    let ae = &out.create[0];
    assert_eq!(ae.spec.kind, tarsy_crds::ExecutionKind::Memory);
    assert_eq!(
        ae.spec.stage.id.as_deref(),
        Some(reflector(false).stage_id.as_str())
    );
    assert_eq!(ae.spec.stage.name, "Memory");
    assert_eq!(ae.spec.display_name, "MemoryReflector");
    assert!(ae.spec.resolved.mcp_servers.is_empty());
    let deadline = ae.spec.deadline.as_ref().unwrap().0;
    assert_eq!(deadline.as_second() - w.now.as_second(), 300);
    assert!(out.events.iter().any(|e| e.reason == "MemoryLearning"));
    assert!(out.store.is_empty());
    assert_eq!(w.phase(), AlertPhase::Completed, "the session is untouched");
    let name = ae.metadata.name.clone().unwrap();
    // Created once.
    assert!(w.step(true).create.is_empty());
    // Running: nothing to do.
    w.reflectors[0].waiting = false;
    assert!(w.step(true).store.is_empty());
    // Its pod died before the runner recorded its end: closed, failed.
    w.finish(&name, ExecutionPhase::Failed, "");
    let out = w.step(true);
    let error = "the reflector stopped before it recorded its end".to_string();
    assert_eq!(
        out.store,
        vec![
            StoreOp::FailExecution {
                execution_id: reflector(false).execution_id,
                error: error.clone(),
            },
            StoreOp::FinishStage {
                stage_id: reflector(false).stage_id,
                status: tarsy_core::ExecutionStatus::Failed,
                error: Some(error),
            }
        ]
    );
    assert!(
        out.events
            .iter()
            .any(|e| e.warning && e.reason == "MemoryNotLearned")
    );
    assert_eq!(w.phase(), AlertPhase::Completed);
}

#[test]
fn a_feedback_reflector_is_named_for_it_and_one_that_cannot_start_is_closed() {
    let (mut w, _) = run_to_completion("");
    w.reflectors = vec![OpenReflector {
        reflector: reflector(true),
        waiting: true,
    }];
    let out = w.step(true);
    assert_eq!(out.create[0].spec.stage.name, "Memory (review feedback)");

    // The session's chain is gone: the reflector's records are closed.
    let (mut w, _) = run_to_completion("");
    w.config = config(&[]);
    w.reflectors = vec![OpenReflector {
        reflector: reflector(true),
        waiting: true,
    }];
    let out = w.step(true);
    assert!(out.create.is_empty());
    assert!(
        out.store.iter().any(|op| matches!(
            op,
            StoreOp::FinishStage { status: tarsy_core::ExecutionStatus::Failed, error: Some(e), .. }
                if e.contains("the reflector could not start") && e.contains("is gone")
        )),
        "{:?}",
        out.store
    );
}
