//! The AgentExecution reconcile, sans IO: from the execution and its pod
//! (if any) decide whether to create or delete the pod and which status
//! fields the operator sets. The runner owns the execution's progress
//! (phase Active → terminal, iteration, tokens, timeline); the operator
//! only records what the runner cannot: its pod's name and readiness, and
//! the loss of a pod that ended without the runner recording a terminal
//! phase (OOMKilled, eviction, node loss, deletion) — replaced, within a
//! budget and after a backoff, by a pod whose runner resumes the execution
//! from its stored conversation, else the execution fails with the cause —
//! a pod that cannot start (image pull failure), or the end of an execution
//! that was stopped (cancel, session timeout) before its runner could
//! record it.

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
    /// How many lost pods are replaced before the execution fails.
    pub pod_restart_limit: u32,
    /// Wait before the first replacement; doubled for each further one.
    pub pod_restart_backoff: Duration,
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
        pod_restarts: observed.pod_restarts,
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
            match lost_since(&observed) {
                // The loss is recorded (the pod was deleted for it): replace
                // the pod once the backoff is over.
                Some(lost_at) => {
                    let restarts = observed.pod_restarts.unwrap_or(0);
                    let wait = backoff(inputs, restarts);
                    let waited = now.as_second().saturating_sub(lost_at);
                    let wait_secs = i64::try_from(wait.as_secs()).unwrap_or(i64::MAX);
                    if waited < wait_secs {
                        out.requeue = Some(Duration::from_secs(
                            u64::try_from(wait_secs - waited).unwrap_or(1).max(1),
                        ));
                        out.status = Some(status);
                        return out;
                    }
                    let msg = format!(
                        "replacement pod {} of {} created; the runner resumes the execution",
                        restarts + 1,
                        inputs.pod_restart_limit
                    );
                    status.pod_restarts = Some(restarts + 1);
                    conditions::set(
                        &mut status.conditions,
                        conditions::POD_READY,
                        false,
                        "PodReplaced",
                        &msg,
                        generation,
                        now,
                    );
                    out.event = Some(EventNote {
                        warning: false,
                        reason: "PodReplaced".into(),
                        note: msg,
                    });
                    out.pod = PodAction::Create;
                    out.requeue = Some(inputs.pod_start_timeout);
                    out.status = Some(status);
                    return out;
                }
                None => {
                    let msg =
                        "the investigation pod was deleted before the runner recorded a result";
                    return lose_pod(inputs, &observed, status, msg, "PodDeleted", false);
                }
            }
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
        if let Some(reason) = stop {
            end(&mut status, stop_phase(reason), stop_message(reason), now);
            out.status = Some(status);
            return out;
        }
        let msg = pod_failure_reason(pod);
        return lose_pod(inputs, &observed, status, &msg, "PodFailed", !terminating);
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
        return lose_pod(inputs, &observed, status, msg, "PodTerminating", false);
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

/// Reason of the `PodReady` condition while a lost pod awaits its
/// replacement.
const POD_LOST: &str = "PodLost";

/// Longest wait before a replacement pod.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The wait before replacement `restarts + 1`.
fn backoff(inputs: &ExecutionInputs<'_>, restarts: u32) -> Duration {
    inputs
        .pod_restart_backoff
        .saturating_mul(2u32.saturating_pow(restarts.min(16)))
        .min(MAX_BACKOFF)
}

/// When the pod was recorded lost, if its replacement is awaited.
fn lost_since(observed: &AgentExecutionStatus) -> Option<i64> {
    observed
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::POD_READY && c.reason == POD_LOST)
        .map(|c| c.last_transition_time.0.as_second())
}

/// A pod lost before its runner recorded a result: within the budget, the
/// loss is recorded (the pod deleted when `delete`) and a replacement
/// follows after the backoff; beyond it, the execution fails with the
/// cause.
fn lose_pod(
    inputs: &ExecutionInputs<'_>,
    observed: &AgentExecutionStatus,
    mut status: AgentExecutionStatus,
    cause: &str,
    event_reason: &str,
    delete: bool,
) -> ExecutionOutcome {
    let restarts = observed.pod_restarts.unwrap_or(0);
    let generation = inputs.execution.metadata.generation;
    let mut out = ExecutionOutcome {
        status: None,
        pod: PodAction::None,
        event: None,
        requeue: None,
    };
    if restarts >= inputs.pod_restart_limit {
        let msg = if restarts == 0 {
            cause.to_string()
        } else {
            format!("{cause} (after {restarts} replacement pods)")
        };
        end(&mut status, ExecutionPhase::Failed, &msg, inputs.now);
        out.event = Some(warning(event_reason, &msg));
        out.status = Some(status);
        return out;
    }
    let already = lost_since(observed).is_some();
    // The transition time marks the loss (the backoff counts from it):
    // a pod lost while still starting moves from False to False.
    status
        .conditions
        .retain(|c| c.type_ != conditions::POD_READY || already);
    conditions::set(
        &mut status.conditions,
        conditions::POD_READY,
        false,
        POD_LOST,
        cause,
        generation,
        inputs.now,
    );
    if !already {
        out.event = Some(warning(
            event_reason,
            &format!(
                "{cause}; a replacement pod resumes the execution (restart {} of {})",
                restarts + 1,
                inputs.pod_restart_limit
            ),
        ));
    }
    if delete {
        out.pod = PodAction::Delete;
    }
    out.requeue = Some(backoff(inputs, restarts).max(Duration::from_secs(1)));
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
