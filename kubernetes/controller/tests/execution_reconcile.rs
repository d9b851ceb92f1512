//! The AgentExecution reconcile: pod creation, stop requests, and pods lost
//! before the runner recorded a terminal phase — replaced within the
//! budget, after a backoff, then the execution fails with the cause.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, Pod,
    PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;
use tarsy_controller::alert::STOP_ANNOTATION;
use tarsy_controller::execution::{ExecutionInputs, PodAction, reconcile_execution};
use tarsy_crds::{
    AgentExecution, AgentExecutionSpec, AgentExecutionStatus, Backend, ExecutionKind,
    ExecutionPhase, IterationStrategy, ResolvedConfigSpec, StageRef,
};

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn execution() -> AgentExecution {
    let mut ae = AgentExecution::new(
        "crash-s1-kubernetesagent",
        AgentExecutionSpec {
            session_id: "uid-1".into(),
            alert_name: "crash".into(),
            chain: "k8s".into(),
            stage: StageRef {
                index: 1,
                name: "s".into(),
                id: None,
            },
            agent_name: "KubernetesAgent".into(),
            display_name: "KubernetesAgent".into(),
            agent_index: 1,
            kind: ExecutionKind::Investigation,
            resolved: ResolvedConfigSpec {
                iteration_strategy: IterationStrategy::NativeThinking,
                backend: Backend::GoogleNative,
                llm_provider: "google-default".into(),
                max_iterations: 20,
                iteration_timeout: "120s".into(),
                mcp_servers: vec![],
                tool_filter: BTreeMap::new(),
                custom_instructions: String::new(),
                native_tools_override: None,
                fail_on_unavailable_server: false,
                budget: None,
            },
            chat: None,
            deadline: None,
        },
    );
    ae.metadata = ObjectMeta {
        name: Some("crash-s1-kubernetesagent".into()),
        namespace: Some("ns".into()),
        uid: Some("ae-uid".into()),
        generation: Some(1),
        ..ObjectMeta::default()
    };
    ae
}

/// Without replacement pods: a lost pod fails the execution.
fn run(ae: &AgentExecution, pod: Option<&Pod>) -> tarsy_controller::execution::ExecutionOutcome {
    run_at(ae, pod, 0, now())
}

fn run_at(
    ae: &AgentExecution,
    pod: Option<&Pod>,
    pod_restart_limit: u32,
    now: Timestamp,
) -> tarsy_controller::execution::ExecutionOutcome {
    reconcile_execution(&ExecutionInputs {
        execution: ae,
        pod,
        pod_start_timeout: Duration::from_secs(300),
        pod_restart_limit,
        pod_restart_backoff: Duration::from_secs(10),
        now,
    })
}

fn oom_killed() -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: 137,
            reason: Some("OOMKilled".into()),
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}

fn pod(phase: &str, runner: Option<ContainerState>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("crash-s1-kubernetesagent".into()),
            creation_timestamp: Some(Time(Timestamp::from_second(1_800_000_000 - 600).unwrap())),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some(phase.into()),
            container_statuses: runner.map(|state| {
                vec![ContainerStatus {
                    name: "runner".into(),
                    state: Some(state),
                    ..ContainerStatus::default()
                }]
            }),
            ..PodStatus::default()
        }),
    }
}

/// The execution after the operator applied `out.status` (as SSA would merge it).
fn applied(
    mut ae: AgentExecution,
    out: &tarsy_controller::execution::ExecutionOutcome,
) -> AgentExecution {
    ae.status = out.status.clone();
    ae
}

#[test]
fn a_new_execution_gets_a_pod() {
    let ae = execution();
    let out = run(&ae, None);
    assert_eq!(out.pod, PodAction::Create);
    let status = out.status.unwrap();
    assert_eq!(status.pod_name.as_deref(), Some("crash-s1-kubernetesagent"));
    assert_eq!(status.phase, None, "the runner owns the phase");
}

#[test]
fn oom_killed_runner_fails_the_execution_with_the_reason() {
    let ae = execution();
    let out = run(&ae, Some(&pod("Failed", Some(oom_killed()))));
    let status = out.status.unwrap();
    assert_eq!(status.phase, Some(ExecutionPhase::Failed));
    let err = status.error.unwrap();
    assert!(err.contains("OOMKilled") && err.contains("137"), "{err}");
    assert_eq!(out.event.unwrap().reason, "PodFailed");
}

#[test]
fn evicted_pod_fails_the_execution() {
    let ae = execution();
    let mut p = pod("Failed", None);
    p.status.as_mut().unwrap().reason = Some("Evicted".into());
    p.status.as_mut().unwrap().message = Some("node was low on memory".into());
    let status = run(&ae, Some(&p)).status.unwrap();
    assert_eq!(status.phase, Some(ExecutionPhase::Failed));
    assert!(status.error.unwrap().contains("Evicted"));
}

#[test]
fn image_pull_backoff_fails_only_after_the_start_timeout() {
    let ae = execution();
    let waiting = ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some("ImagePullBackOff".into()),
            message: Some("Back-off pulling image".into()),
        }),
        ..ContainerState::default()
    };
    // Created 600 s ago, timeout 300 s → fail and delete.
    let out = run(&ae, Some(&pod("Pending", Some(waiting.clone()))));
    assert_eq!(out.pod, PodAction::Delete);
    assert!(
        out.status
            .unwrap()
            .error
            .unwrap()
            .contains("ImagePullBackOff")
    );
    // Created just now → wait, look again later.
    let mut fresh = pod("Pending", Some(waiting));
    fresh.metadata.creation_timestamp = Some(Time(now()));
    let out = run(&ae, Some(&fresh));
    assert_eq!(out.pod, PodAction::None);
    assert_eq!(out.status.unwrap().phase, None);
    assert_eq!(out.requeue, Some(Duration::from_secs(300)));
}

#[test]
fn deleted_pod_fails_a_started_execution() {
    let ae = execution();
    let created = run(&ae, None);
    let ae = applied(ae, &created);
    let out = run(&ae, None);
    let status = out.status.unwrap();
    assert_eq!(status.phase, Some(ExecutionPhase::Failed));
    assert_eq!(out.event.unwrap().reason, "PodDeleted");
}

#[test]
fn stop_request_deletes_the_pod_then_records_the_stop() {
    let mut ae = execution();
    ae.metadata.annotations = Some(BTreeMap::from([(
        STOP_ANNOTATION.to_string(),
        "cancelled".to_string(),
    )]));
    let out = run(&ae, Some(&pod("Running", None)));
    assert_eq!(out.pod, PodAction::Delete);
    assert_eq!(out.status.unwrap().phase, None);
    // The pod is gone and the runner recorded nothing: the operator does.
    let out = run(&ae, None);
    let status = out.status.unwrap();
    assert_eq!(status.phase, Some(ExecutionPhase::Cancelled));
    assert!(out.event.is_none());
}

#[test]
fn terminal_executions_are_left_alone() {
    let mut ae = execution();
    ae.status = Some(AgentExecutionStatus {
        phase: Some(ExecutionPhase::Completed),
        ..AgentExecutionStatus::default()
    });
    let out = run(&ae, None);
    assert_eq!(out.pod, PodAction::None);
    assert!(out.status.is_none());
}

#[test]
fn running_pod_sets_pod_ready() {
    let ae = execution();
    let status = run(&ae, Some(&pod("Running", None))).status.unwrap();
    assert_eq!(
        tarsy_controller::conditions::status_of(&status.conditions, "PodReady"),
        Some("True")
    );
}

/// An OOM-killed runner within the budget: the loss is recorded with its
/// cause and the pod deleted; after the backoff (10 s, then 20 s) a
/// replacement pod is created; beyond the budget the execution fails with
/// the cause and the count.
#[test]
fn lost_pods_are_replaced_within_the_budget_then_the_execution_fails() {
    let t0 = now();
    let at = |secs: i64| Timestamp::from_second(t0.as_second() + secs).unwrap();
    let mut ae = applied(execution(), &run_at(&execution(), None, 2, t0));
    let running = run_at(&ae, Some(&pod("Running", None)), 2, t0);
    ae = applied(ae, &running);

    let mut clock = 0;
    for restart in 1..=2u32 {
        let lost = run_at(&ae, Some(&pod("Failed", Some(oom_killed()))), 2, at(clock));
        assert_eq!(lost.pod, PodAction::Delete);
        let event = lost.event.clone().unwrap();
        assert_eq!(event.reason, "PodFailed");
        assert!(event.note.contains("OOMKilled"), "{}", event.note);
        assert!(
            event.note.contains(&format!("restart {restart} of 2")),
            "{}",
            event.note
        );
        let status = lost.status.clone().unwrap();
        assert_eq!(status.phase, None, "not failed: replaced");
        ae = applied(ae, &lost);

        // Gone, but the backoff is not over: wait.
        let backoff = 10 * 2i64.pow(restart - 1);
        let early = run_at(&ae, None, 2, at(clock + backoff - 1));
        assert_eq!(early.pod, PodAction::None);
        assert_eq!(early.requeue, Some(Duration::from_secs(1)));
        // Then the replacement.
        let replaced = run_at(&ae, None, 2, at(clock + backoff));
        assert_eq!(replaced.pod, PodAction::Create);
        assert_eq!(replaced.event.clone().unwrap().reason, "PodReplaced");
        assert_eq!(replaced.status.clone().unwrap().pod_restarts, Some(restart));
        ae = applied(ae, &replaced);
        clock += backoff + 5;
        ae = applied(
            ae.clone(),
            &run_at(&ae, Some(&pod("Running", None)), 2, at(clock)),
        );
    }

    let last = run_at(
        &ae,
        Some(&pod("Failed", Some(oom_killed()))),
        2,
        at(clock + 60),
    );
    let status = last.status.unwrap();
    assert_eq!(status.phase, Some(ExecutionPhase::Failed));
    let err = status.error.unwrap();
    assert!(
        err.contains("OOMKilled") && err.contains("after 2 replacement pods"),
        "{err}"
    );
}

/// An evicted pod (being deleted) is not deleted again; once gone it is
/// replaced.
#[test]
fn an_evicted_pod_is_replaced_once_gone() {
    let ae = applied(execution(), &run_at(&execution(), None, 1, now()));
    let ae = applied(
        ae.clone(),
        &run_at(&ae, Some(&pod("Running", None)), 1, now()),
    );
    let mut terminating = pod("Running", None);
    terminating.metadata.deletion_timestamp = Some(Time(now()));
    let lost = run_at(&ae, Some(&terminating), 1, now());
    assert_eq!(lost.pod, PodAction::None);
    assert_eq!(lost.event.clone().unwrap().reason, "PodTerminating");
    let ae = applied(ae, &lost);
    // Still terminating: nothing new is said.
    let again = run_at(&ae, Some(&terminating), 1, now());
    assert!(again.event.is_none());
    let later = Timestamp::from_second(now().as_second() + 10).unwrap();
    assert_eq!(run_at(&ae, None, 1, later).pod, PodAction::Create);
}
