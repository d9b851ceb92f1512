//! MCPServer `status.lastHealth` from the connection outcomes runners
//! report in their AgentExecution status, sans IO: the newest outcome of a
//! server wins; outcomes no newer than what the MCPServer shows, and
//! servers without an MCPServer object (built-ins), are ignored.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tarsy_crds::{HealthStatus, McpServerOutcome};

/// The `lastHealth` to write per MCPServer name, given an execution's
/// `outcomes` and `known`: the MCPServer objects of its namespace, each with
/// the `checkedAt` of its current `lastHealth` (`None`: never checked).
pub fn health_updates(
    outcomes: &[McpServerOutcome],
    known: &BTreeMap<String, Option<Time>>,
) -> BTreeMap<String, HealthStatus> {
    let mut out: BTreeMap<String, HealthStatus> = BTreeMap::new();
    for o in outcomes {
        let Some(current) = known.get(&o.name) else {
            continue;
        };
        let newer_than_current = current.as_ref().is_none_or(|c| o.checked_at.0 > c.0);
        let newer_than_batch = out
            .get(&o.name)
            .and_then(|h| h.checked_at.as_ref())
            .is_none_or(|c| o.checked_at.0 > c.0);
        if newer_than_current && newer_than_batch {
            out.insert(
                o.name.clone(),
                HealthStatus {
                    healthy: o.healthy,
                    checked_at: Some(o.checked_at.clone()),
                    tool_count: (!o.tools.is_empty())
                        .then(|| u32::try_from(o.tools.len()).unwrap_or(u32::MAX)),
                    tools: o.tools.clone(),
                    message: o.error.clone(),
                },
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    fn at(secs: i64) -> Time {
        Time(Timestamp::UNIX_EPOCH + SignedDuration::from_secs(1_700_000_000 + secs))
    }

    fn outcome(name: &str, healthy: bool, secs: i64) -> McpServerOutcome {
        McpServerOutcome {
            tools: Vec::new(),
            name: name.into(),
            healthy,
            error: (!healthy).then(|| "connection refused".into()),
            checked_at: at(secs),
        }
    }

    #[test]
    fn newer_outcomes_win_older_and_unknown_are_ignored() {
        let known = BTreeMap::from([
            ("fresh".to_string(), None),
            ("stale".to_string(), Some(at(10))),
            ("current".to_string(), Some(at(10))),
            ("ahead".to_string(), Some(at(20))),
        ]);
        let mut with_tools = outcome("fresh", true, 5);
        with_tools.tools = vec!["query".into(), "query_range".into()];
        let outcomes = [
            with_tools,
            outcome("stale", false, 15),
            outcome("current", true, 10),
            outcome("ahead", false, 15),
            outcome("built-in-kubernetes", true, 30),
        ];
        let u = health_updates(&outcomes, &known);
        assert_eq!(
            u.keys().map(String::as_str).collect::<Vec<_>>(),
            ["fresh", "stale"],
            "{u:?}"
        );
        assert!(u["fresh"].healthy);
        assert_eq!(u["fresh"].checked_at, Some(at(5)));
        assert_eq!(u["fresh"].message, None);
        // The tools a runner listed are kept for the cluster API's checks.
        assert_eq!(u["fresh"].tools, ["query", "query_range"]);
        assert_eq!(u["fresh"].tool_count, Some(2));
        assert!(!u["stale"].healthy);
        assert_eq!(u["stale"].message.as_deref(), Some("connection refused"));
        assert_eq!(u["stale"].checked_at, Some(at(15)));
    }

    #[test]
    fn the_newest_of_duplicate_outcomes_wins() {
        let known = BTreeMap::from([("gh".to_string(), Some(at(0)))]);
        let u = health_updates(
            &[
                outcome("gh", true, 7),
                outcome("gh", false, 9),
                outcome("gh", true, 8),
            ],
            &known,
        );
        assert!(!u["gh"].healthy, "{u:?}");
        assert_eq!(u["gh"].checked_at, Some(at(9)));
        assert!(health_updates(&[], &known).is_empty());
    }
}
