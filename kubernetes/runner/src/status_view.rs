//! Pure parts of the runner: what its AgentExecution status says (phase,
//! bounded recent timeline, tokens, clipped texts) and the command-line and
//! environment formats it reads.

use std::collections::BTreeMap;

use tarsy_core::{ExecutionStatus, TimelineEvent, TokenUsage};
use tarsy_crds::{
    AgentExecutionStatus, CallCountsStatus, ExecutionPhase, MAX_MCP_OUTCOME_ERROR_CHARS,
    MAX_MCP_OUTCOMES, MAX_RECENT_TIMELINE, MAX_SNIPPET_CHARS, MAX_STATUS_TEXT_CHARS,
    McpServerOutcome, TimelineSnippet, TokenUsageStatus, clip,
};
use tarsy_engine::prompt::FailedServer;

use crate::error::RunnerError;

/// Longest `type` / `status` of a snippet the CRD schema accepts.
const MAX_LABEL_CHARS: usize = 63;
/// Most tool names an MCP server outcome lists (the CRD's bound).
const MAX_OUTCOME_TOOLS: usize = 256;

/// The phase recorded for an execution status.
pub fn phase_of(status: ExecutionStatus) -> ExecutionPhase {
    status.into()
}

/// The last [`MAX_RECENT_TIMELINE`] events of `events` (in sequence order),
/// each clipped to [`MAX_SNIPPET_CHARS`] so the status stays bounded.
pub fn recent_timeline(events: &[TimelineEvent]) -> Vec<TimelineSnippet> {
    let mut sorted: Vec<&TimelineEvent> = events.iter().collect();
    sorted.sort_by_key(|e| e.sequence_number);
    let skip = sorted.len().saturating_sub(MAX_RECENT_TIMELINE);
    sorted
        .into_iter()
        .skip(skip)
        .map(|e| TimelineSnippet {
            seq: u64::try_from(e.sequence_number).unwrap_or(0),
            event_type: label(e.event_type.as_str()),
            status: label(e.status.as_str()),
            snippet: clip(e.content.trim(), MAX_SNIPPET_CHARS),
        })
        .collect()
}

fn label(s: &str) -> String {
    let s: String = s.chars().take(MAX_LABEL_CHARS).collect();
    if s.is_empty() { "unknown".into() } else { s }
}

/// Token usage as the status reports it (negative counts read as zero).
pub fn tokens_of(usage: &TokenUsage) -> TokenUsageStatus {
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    TokenUsageStatus {
        input: n(usage.input_tokens),
        output: n(usage.output_tokens),
        thinking: n(usage.thinking_tokens),
        total: n(usage.total_tokens),
    }
}

/// Progress of a running execution: phase Active with the iteration and
/// the recent timeline. `started_at` is kept from the first report.
pub fn progress_status(
    execution_id: &str,
    iteration: u32,
    events: &[TimelineEvent],
    started_at: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> AgentExecutionStatus {
    AgentExecutionStatus {
        phase: Some(ExecutionPhase::Active),
        execution_id: Some(execution_id.to_string()),
        iteration: (iteration > 0).then_some(iteration),
        recent_timeline: recent_timeline(events),
        started_at: Some(started_at.clone()),
        ..AgentExecutionStatus::default()
    }
}

/// What the runner records at the end: terminal phase, iterations, tokens,
/// recent timeline, final analysis and error clipped to
/// [`MAX_STATUS_TEXT_CHARS`].
pub struct TerminalOutcome<'a> {
    /// Terminal status.
    pub status: ExecutionStatus,
    /// Iterations run.
    pub iterations: u32,
    /// Tokens used.
    pub usage: &'a TokenUsage,
    /// The agent's conclusion (completed executions).
    pub final_analysis: Option<&'a str>,
    /// Why it did not complete.
    pub error: Option<&'a str>,
}

/// The calls of this process: one runner pod runs one execution.
fn calls_of(t: tarsy_telemetry::CallTotals) -> CallCountsStatus {
    CallCountsStatus {
        llm: t.llm_calls,
        llm_errors: t.llm_errors,
        tools: t.tool_calls,
        tool_errors: t.tool_errors,
    }
}

/// The terminal status for `outcome` (see [`TerminalOutcome`]).
pub fn terminal_status(
    execution_id: &str,
    outcome: &TerminalOutcome<'_>,
    events: &[TimelineEvent],
    started_at: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    completed_at: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> AgentExecutionStatus {
    let mut status = progress_status(execution_id, outcome.iterations, events, started_at);
    status.phase = Some(phase_of(outcome.status));
    status.tokens = Some(tokens_of(outcome.usage));
    status.calls = Some(calls_of(tarsy_telemetry::global().call_totals()));
    status.final_analysis = outcome
        .final_analysis
        .filter(|a| !a.trim().is_empty())
        .map(|a| clip(a, MAX_STATUS_TEXT_CHARS));
    status.error = outcome
        .error
        .filter(|e| !e.trim().is_empty())
        .map(|e| clip(e, MAX_STATUS_TEXT_CHARS));
    status.completed_at = Some(completed_at.clone());
    status
}

/// The connection outcome of each of `servers` (in order, at most
/// [`MAX_MCP_OUTCOMES`]): healthy unless listed in `failed`, whose error is
/// clipped to [`MAX_MCP_OUTCOME_ERROR_CHARS`].
pub fn mcp_outcomes(
    servers: &[String],
    failed: &[FailedServer],
    offered: &std::collections::BTreeMap<String, Vec<String>>,
    checked_at: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Vec<McpServerOutcome> {
    let mut seen = std::collections::BTreeSet::new();
    servers
        .iter()
        .filter(|s| seen.insert(s.as_str()))
        .take(MAX_MCP_OUTCOMES)
        .map(|name| {
            let error = failed.iter().find(|f| &f.server == name).map(|f| {
                let e = f.error.trim();
                clip(
                    if e.is_empty() { "unavailable" } else { e },
                    MAX_MCP_OUTCOME_ERROR_CHARS,
                )
            });
            McpServerOutcome {
                name: name.clone(),
                healthy: error.is_none(),
                error,
                checked_at: checked_at.clone(),
                tools: offered
                    .get(name)
                    .map(|t| {
                        t.iter()
                            .take(MAX_OUTCOME_TOOLS)
                            .map(|n| clip(n, 128))
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// Parses `NAMESPACE/NAME`.
pub fn parse_execution_ref(s: &str) -> Result<(String, String), RunnerError> {
    match s.trim().split_once('/') {
        Some((ns, name))
            if !ns.is_empty() && !name.is_empty() && !name.contains('/') && !ns.contains(' ') =>
        {
            Ok((ns.to_string(), name.to_string()))
        }
        _ => Err(RunnerError::Invalid(format!(
            "--execution must be NAMESPACE/NAME, got {s:?}"
        ))),
    }
}

/// Parses `name=value,name=value` (the MCP endpoint and bridge port lists
/// of the pod builder). Empty input is an empty map.
pub fn parse_pairs(what: &str, s: &str) -> Result<BTreeMap<String, String>, RunnerError> {
    let mut out = BTreeMap::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
                out.insert(k.trim().to_string(), v.trim().to_string());
            }
            _ => {
                return Err(RunnerError::Invalid(format!(
                    "{what}: expected name=value, got {item:?}"
                )));
            }
        }
    }
    Ok(out)
}

/// Parses the bridge ports list (`name=port,...`).
pub fn parse_ports(s: &str) -> Result<BTreeMap<String, u16>, RunnerError> {
    parse_pairs("bridge ports", s)?
        .into_iter()
        .map(|(k, v)| {
            v.parse::<u16>()
                .map(|p| (k.clone(), p))
                .map_err(|_| RunnerError::Invalid(format!("bridge port of {k:?}: {v:?}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use tarsy_core::{RecordScope, TimelineEventStatus, TimelineEventType};

    fn event(seq: i64, t: TimelineEventType, content: &str) -> TimelineEvent {
        TimelineEvent {
            id: format!("ev{seq}"),
            scope: RecordScope {
                session_id: "s".into(),
                stage_id: Some("st".into()),
                execution_id: Some("x".into()),
            },
            sequence_number: seq,
            event_type: t,
            status: TimelineEventStatus::Completed,
            content: content.into(),
            metadata: serde_json::json!({}),
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    #[test]
    fn recent_timeline_keeps_the_last_twenty_in_order_and_clips_content() {
        let mut events: Vec<_> = (1..=45)
            .map(|i| event(i, TimelineEventType::LlmResponse, &format!("r{i}")))
            .collect();
        events.reverse();
        events.push(event(
            46,
            TimelineEventType::FinalAnalysis,
            &"x".repeat(5000),
        ));
        let t = recent_timeline(&events);
        assert_eq!(t.len(), MAX_RECENT_TIMELINE);
        assert_eq!(t.first().unwrap().seq, 27);
        assert_eq!(t.last().unwrap().seq, 46);
        assert!(t.windows(2).all(|w| w[0].seq < w[1].seq));
        assert_eq!(t.last().unwrap().event_type, "final_analysis");
        assert_eq!(t.last().unwrap().status, "completed");
        assert!(t.last().unwrap().snippet.chars().count() <= MAX_SNIPPET_CHARS);
        assert!(t.last().unwrap().snippet.starts_with("xxx"));
        assert_eq!(t[0].snippet, "r27");
    }

    #[test]
    fn terminal_status_maps_phase_and_bounds_texts() {
        let usage = TokenUsage {
            input_tokens: 10,
            output_tokens: 5,
            total_tokens: 15,
            thinking_tokens: -1,
            cached_input_tokens: 0,
        };
        let long = "a".repeat(MAX_STATUS_TEXT_CHARS * 2);
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let s = terminal_status(
            "x",
            &TerminalOutcome {
                status: ExecutionStatus::Completed,
                iterations: 3,
                usage: &usage,
                final_analysis: Some(&long),
                error: Some("  "),
            },
            &[event(1, TimelineEventType::FinalAnalysis, "done")],
            &now,
            &now,
        );
        assert_eq!(s.phase, Some(ExecutionPhase::Completed));
        assert_eq!(s.iteration, Some(3));
        assert_eq!(
            s.tokens,
            Some(TokenUsageStatus {
                input: 10,
                output: 5,
                thinking: 0,
                total: 15
            })
        );
        let fa = s.final_analysis.unwrap();
        assert!(fa.chars().count() <= MAX_STATUS_TEXT_CHARS && fa.len() > 1000);
        assert_eq!(s.error, None, "a blank error is not reported");
        assert_eq!(s.recent_timeline.len(), 1);
        assert!(s.completed_at.is_some());

        for (status, phase) in [
            (ExecutionStatus::Cancelled, ExecutionPhase::Cancelled),
            (ExecutionStatus::TimedOut, ExecutionPhase::TimedOut),
            (ExecutionStatus::Failed, ExecutionPhase::Failed),
        ] {
            assert_eq!(phase_of(status), phase);
            assert!(phase.is_terminal());
        }
        assert!(!phase_of(ExecutionStatus::Active).is_terminal());
    }

    #[test]
    fn command_line_formats_parse_and_reject_garbage() {
        assert_eq!(
            parse_execution_ref("sre/alert-1-s0-a").unwrap(),
            ("sre".to_string(), "alert-1-s0-a".to_string())
        );
        for bad in ["", "sre", "/x", "sre/", "a/b/c"] {
            assert!(parse_execution_ref(bad).is_err(), "{bad:?}");
        }
        let m = parse_pairs(
            "endpoints",
            "k8s=http://127.0.0.1:8080/mcp, gh=http://127.0.0.1:9000/mcp,",
        )
        .unwrap();
        assert_eq!(m["gh"], "http://127.0.0.1:9000/mcp");
        assert_eq!(m.len(), 2);
        assert!(parse_pairs("endpoints", "k8s").is_err());
        assert!(parse_pairs("endpoints", "").unwrap().is_empty());
        assert_eq!(parse_ports("fs=9101").unwrap()["fs"], 9101);
        assert!(parse_ports("fs=99999").is_err());
    }

    #[test]
    fn mcp_outcomes_mark_failed_servers_and_stay_bounded() {
        let at = Time(k8s_openapi::jiff::Timestamp::now());
        let servers: Vec<String> = ["k8s", "gh", "k8s"].iter().map(|s| s.to_string()).collect();
        let failed = vec![FailedServer {
            server: "gh".into(),
            error: "e".repeat(5000),
        }];
        let offered = BTreeMap::from([(
            "k8s".to_string(),
            (0..300).map(|i| format!("tool_{i}")).collect::<Vec<_>>(),
        )]);
        let o = mcp_outcomes(&servers, &failed, &offered, &at);
        assert_eq!(o.len(), 2, "duplicates are listed once: {o:?}");
        assert_eq!(
            o[0].tools.len(),
            MAX_OUTCOME_TOOLS,
            "tool lists stay bounded"
        );
        assert_eq!(o[0].tools[0], "tool_0");
        assert!(o[1].tools.is_empty());
        assert_eq!((o[0].name.as_str(), o[0].healthy), ("k8s", true));
        assert_eq!(o[0].error, None);
        assert_eq!((o[1].name.as_str(), o[1].healthy), ("gh", false));
        let err = o[1].error.as_deref().unwrap();
        assert!(err.chars().count() <= MAX_MCP_OUTCOME_ERROR_CHARS && err.starts_with("eee"));
        assert_eq!(o[1].checked_at, at);

        let many: Vec<String> = (0..50).map(|i| format!("s{i}")).collect();
        let o = mcp_outcomes(&many, &[], &BTreeMap::new(), &at);
        assert_eq!(o.len(), MAX_MCP_OUTCOMES);
        assert!(o.iter().all(|x| x.healthy));
        assert!(mcp_outcomes(&[], &failed, &BTreeMap::new(), &at).is_empty());
    }
}
