//! Stage outcome from its executions, by success policy.

use tarsy_core::{ExecutionStatus, SuccessPolicy};

use crate::machine::ExecutionView;

/// The status and error of a stage whose executions have all ended.
///
/// `any`: completed when at least one execution completed. `all`: completed
/// only when every execution completed. Otherwise the stage takes the status
/// its executions share when all unsuccessful ones were timed out (or all
/// cancelled), and `failed` in every other case; the error names each
/// unsuccessful execution.
pub fn aggregate_stage(
    policy: SuccessPolicy,
    executions: &[ExecutionView],
) -> (ExecutionStatus, Option<String>) {
    let completed = executions
        .iter()
        .filter(|e| e.status == ExecutionStatus::Completed)
        .count();
    let success = match policy {
        SuccessPolicy::Any => completed > 0,
        SuccessPolicy::All => completed == executions.len() && !executions.is_empty(),
    };
    if success {
        return (ExecutionStatus::Completed, None);
    }

    let unsuccessful: Vec<&ExecutionView> = executions
        .iter()
        .filter(|e| e.status != ExecutionStatus::Completed)
        .collect();
    let shared = unsuccessful.first().map(|e| e.status).filter(|first| {
        matches!(
            first,
            ExecutionStatus::TimedOut | ExecutionStatus::Cancelled
        ) && unsuccessful.iter().all(|e| e.status == *first)
    });
    let status = shared.unwrap_or(ExecutionStatus::Failed);

    let error = if executions.len() == 1 {
        let e = &executions[0];
        e.error
            .clone()
            .unwrap_or_else(|| format!("agent {} ended {}", e.display_name, e.status))
    } else {
        let details: Vec<String> = unsuccessful
            .iter()
            .map(|e| match &e.error {
                Some(err) => format!("{} ({}: {})", e.display_name, e.status, err),
                None => format!("{} ({})", e.display_name, e.status),
            })
            .collect();
        let policy_note = match policy {
            SuccessPolicy::All => "policy all requires every agent to complete",
            SuccessPolicy::Any => "policy any requires at least one agent to complete",
        };
        format!(
            "{}/{} agents did not complete ({policy_note}): {}",
            unsuccessful.len(),
            executions.len(),
            details.join("; ")
        )
    };
    (status, Some(error))
}
