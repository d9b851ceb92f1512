//! Standard `metav1.Condition` handling: a condition's transition time only
//! moves when its status changes, so re-applying the same status is a no-op.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// Condition `Ready`.
pub const READY: &str = "Ready";
/// Alert condition: a Chain was found for the alert.
pub const CHAIN_RESOLVED: &str = "ChainResolved";
/// Alert condition: the session was admitted under the concurrency limit.
pub const ADMITTED: &str = "Admitted";
/// Alert condition: an agent ran without some of its MCP servers.
pub const DEGRADED: &str = "Degraded";
/// Alert condition: the judge scored the investigation (false while it is
/// at work, or when its latest attempt failed).
pub const SCORED: &str = "Scored";
/// AgentExecution condition: its pod exists and runs.
pub const POD_READY: &str = "PodReady";

/// Sets condition `type_` in `conditions`, keeping the previous transition
/// time when the status did not change.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
    now: Timestamp,
) {
    let status = if status { "True" } else { "False" }.to_string();
    let message = tarsy_crds::clip(&message.into(), 4096);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = Time(now);
            }
            c.status = status;
            c.reason = reason.to_string();
            c.message = message;
            c.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message,
            observed_generation: generation,
            last_transition_time: Time(now),
        }),
    }
}

/// The status (`True`/`False`/`Unknown`) of condition `type_`, if present.
pub fn status_of<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a str> {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let t1 = Timestamp::from_second(2_000).unwrap();
        let t2 = Timestamp::from_second(3_000).unwrap();
        let mut cs = Vec::new();
        set(&mut cs, READY, false, "Pending", "waiting", Some(1), t0);
        set(
            &mut cs,
            READY,
            false,
            "Pending",
            "still waiting",
            Some(2),
            t1,
        );
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].last_transition_time, Time(t0));
        assert_eq!(cs[0].message, "still waiting");
        set(&mut cs, READY, true, "Done", "ok", Some(2), t2);
        assert_eq!(cs[0].last_transition_time, Time(t2));
        assert_eq!(status_of(&cs, READY), Some("True"));
    }
}
