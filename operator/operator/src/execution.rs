//! The AgentExecution reconcile, sans IO: from the execution and its pod
//! (if any) decide whether to create or delete the pod and which status
//! fields the operator sets. The runner owns the execution's progress
//! (phase Active → terminal, iteration, tokens, timeline); the operator
//! only records what the runner cannot: its pod's name and readiness, and
//! the failure of a pod that ended without the runner recording a terminal
//! phase (OOMKilled, image pull failure, eviction, deletion), or the end of
//! an execution that was stopped (cancel, session timeout) before its runner
//! could record it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tarsy_chain::StopReason;
use tarsy_crds::{
    AgentExecution, AgentExecutionStatus, ExecutionPhase, MAX_STATUS_TEXT_CHARS, clip,
};

use crate::alert::{EventNote, stop_requested};
use crate::conditions;
use crate::pod::RUNNER_CONTAINER;

/// Container waiting reasons that will not heal by themselves.
const STUCK_REASONS: [&str; 6] = [
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
];

/// What is observed about one execution.
#[derive(Debug, Clone, Copy)]
pub struct ExecutionInputs<'a> {
    /// The execution.
    pub execution: &'a AgentExecution,
    /// Its pod, when it exists.
    pub pod: Option<&'a Pod>,
    /// How long a pod may stay unable to start (image pull, bad config)
    /// before the execution fails.
    pub pod_start_timeout: Duration,
    /// The clock.
    pub now: Timestamp,
}

/// What to do with the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodAction {
    /// Nothing.
    None,
    /// Create it (the caller builds it with [`crate::pod::build_pod`]).
    Create,
    /// Delete it (gracefully: the runner gets SIGTERM).
    Delete,
}

/// The decision of one reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionOutcome {
    /// The status fields the operator sets (applied with its field manager),
    /// or `None` when it has nothing to say.
    pub status: Option<AgentExecutionStatus>,
    /// Pod action.
    pub pod: PodAction,
    /// Event about the execution.
    pub event: Option<EventNote>,
    /// Look again after this long even without a change.
    pub requeue: Option<Duration>,
}

/// Runs one reconcile of an AgentExecution.
pub fn reconcile_execution(inputs: &ExecutionInputs<'_>) -> ExecutionOutcome {
    let ae = inputs.execution;
    let observed = ae.status.clone().unwrap_or_default();
    let phase = observed.phase.unwrap_or(ExecutionPhase::Pending);
    let name = ae.metadata.name.clone().unwrap_or_default();
    let generation = ae.metadata.generation;
    let now = inputs.now;
    let mut out = ExecutionOutcome {
        status: None,
        pod: PodAction::None,
        event: None,
        requeue: None,
    };
    if phase.is_terminal() {
        return out;
    }

    // The operator's view of status: only the fields it owns.
    let mut status = AgentExecutionStatus {
        pod_name: Some(name.clone()),
        conditions: observed.conditions.clone(),
        observed_generation: generation,
        ..AgentExecutionStatus::default()
    };
    let stop = stop_requested(ae);

    let Some(pod) = inputs.pod else {
        if let Some(reason) = stop {
            end(&mut status, stop_phase(reason), stop_message(reason), now);
            out.status = Some(status);
            return out;
        }
        if observed.pod_name.is_some() && pod_was_started(&observed) {
            let msg = "the investigation pod was deleted before the runner recorded a result";
            end(&mut status, ExecutionPhase::Failed, msg, now);
            out.event = Some(warning("PodDeleted", msg));
            out.status = Some(status);
            return out;
        }
        conditions::set(
            &mut status.conditions,
            conditions::POD_READY,
            false,
            "PodCreated",
            "investigation pod created",
            generation,
            now,
        );
        out.pod = PodAction::Create;
        out.status = Some(status);
        out.requeue = Some(inputs.pod_start_timeout);
        return out;
    };

    let pod_phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    let terminating = pod.metadata.deletion_timestamp.is_some();

    // The pod ended but the runner left no terminal phase.
    if matches!(pod_phase, "Succeeded" | "Failed") {
        let (phase, msg) = match stop {
            Some(reason) => (stop_phase(reason), stop_message(reason).to_string()),
            None => (ExecutionPhase::Failed, pod_failure_reason(pod)),
        };
        end(&mut status, phase, &msg, now);
        if stop.is_none() {
            out.event = Some(warning("PodFailed", &msg));
        }
        out.status = Some(status);
        return out;
    }

    if stop.is_some() {
        if !terminating {
            out.pod = PodAction::Delete;
        }
        // The runner records the stop on SIGTERM; if the pod vanishes
        // first, the next reconcile (no pod) records it.
        out.requeue = Some(Duration::from_secs(5));
        out.status = Some(status);
        return out;
    }

    if terminating {
        let msg = "the investigation pod is being deleted (eviction or node loss)";
        out.event = Some(warning("PodTerminating", msg));
        end(&mut status, ExecutionPhase::Failed, msg, now);
        out.status = Some(status);
        return out;
    }

    if let Some(reason) = stuck_reason(pod) {
        let since = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now.as_second(), |t| t.0.as_second());
        let waited = now.as_second().saturating_sub(since);
        let limit = i64::try_from(inputs.pod_start_timeout.as_secs()).unwrap_or(i64::MAX);
        if waited >= limit {
            let msg = format!("the investigation pod could not start: {reason}");
            end(&mut status, ExecutionPhase::Failed, &msg, now);
            out.event = Some(warning("PodStartFailed", &msg));
            out.pod = PodAction::Delete;
            out.status = Some(status);
            return out;
        }
        out.requeue = Some(Duration::from_secs(
            u64::try_from(limit - waited).unwrap_or(1).max(1),
        ));
    }

    let ready = pod_phase == "Running";
    conditions::set(
        &mut status.conditions,
        conditions::POD_READY,
        ready,
        if ready { "PodRunning" } else { "PodPending" },
        format!("pod phase {pod_phase}"),
        generation,
        now,
    );
    out.status = Some(status);
    out
}

fn pod_was_started(observed: &AgentExecutionStatus) -> bool {
    conditions::status_of(&observed.conditions, conditions::POD_READY).is_some()
}

fn stop_phase(reason: StopReason) -> ExecutionPhase {
    match reason {
        StopReason::Cancelled => ExecutionPhase::Cancelled,
        StopReason::TimedOut => ExecutionPhase::TimedOut,
    }
}

fn stop_message(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Cancelled => "cancelled by user",
        StopReason::TimedOut => "session timed out",
    }
}

fn end(status: &mut AgentExecutionStatus, phase: ExecutionPhase, msg: &str, now: Timestamp) {
    status.phase = Some(phase);
    status.error = Some(clip(msg, MAX_STATUS_TEXT_CHARS));
    status.completed_at = Some(Time(now));
}

fn warning(reason: &str, note: &str) -> EventNote {
    EventNote {
        warning: true,
        reason: reason.to_string(),
        note: note.to_string(),
    }
}

/// Why a pod that ended failed, in words a user can act on.
pub fn pod_failure_reason(pod: &Pod) -> String {
    let Some(status) = pod.status.as_ref() else {
        return "the investigation pod ended without a status".into();
    };
    let runner = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == RUNNER_CONTAINER)
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    if let Some(t) = runner {
        let reason = t.reason.clone().unwrap_or_else(|| "Error".into());
        let detail = t
            .message
            .as_deref()
            .map(|m| format!(": {}", clip(m, 512)))
            .unwrap_or_default();
        return format!(
            "runner container terminated ({reason}, exit code {}) without recording a result{detail}",
            t.exit_code
        );
    }
    match (&status.reason, &status.message) {
        (Some(r), Some(m)) => format!("investigation pod {r}: {}", clip(m, 512)),
        (Some(r), None) => format!("investigation pod {r}"),
        (None, Some(m)) => format!("investigation pod failed: {}", clip(m, 512)),
        (None, None) => "the investigation pod ended without the runner recording a result".into(),
    }
}

fn stuck_reason(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
        .find_map(|c| {
            let waiting = c.state.as_ref()?.waiting.as_ref()?;
            let reason = waiting.reason.as_deref()?;
            STUCK_REASONS
                .contains(&reason)
                .then(|| match waiting.message.as_deref() {
                    Some(m) => format!("container {} {reason}: {}", c.name, clip(m, 512)),
                    None => format!("container {} {reason}", c.name),
                })
        })
}
