//! Timeline formatting for synthesis and chat context.

use serde_json::Value;
use tarsy_core::{
    ExecutionStatus, IterationStrategy, TimelineEvent, TimelineEventStatus, TimelineEventType,
};

use super::stage::{
    INVESTIGATION_HISTORY_END, INVESTIGATION_HISTORY_START, STAGE_CONTEXT_END, STAGE_CONTEXT_START,
    escape_comment_markers,
};

/// One parallel execution of a stage, as the synthesis agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInvestigation {
    /// Agent name (display name for replicas).
    pub agent_name: String,
    /// Position in the stage, from 1.
    pub agent_index: u32,
    /// Strategy it ran with.
    pub strategy: IterationStrategy,
    /// LLM provider name (may be empty when unknown).
    pub llm_provider: String,
    /// Terminal status.
    pub status: ExecutionStatus,
    /// Why it did not complete, if it did not.
    pub error_message: Option<String>,
    /// Its timeline, in order.
    pub events: Vec<TimelineEvent>,
}

/// Formats a stage's parallel investigations for the synthesis prompt:
/// a header with the success count, then per agent its metadata (name,
/// strategy, provider, status, error) and its formatted timeline, inside
/// the stage context markers.
pub fn format_investigation_for_synthesis(
    agents: &[AgentInvestigation],
    stage_name: &str,
) -> String {
    let completed = agents
        .iter()
        .filter(|a| a.status == ExecutionStatus::Completed)
        .count();
    let mut out = format!("{STAGE_CONTEXT_START}\n\n");
    out.push_str(&format!(
        "## Parallel investigation \"{}\": {completed}/{} agents completed\n\n",
        escape_comment_markers(stage_name.trim()),
        agents.len()
    ));
    for agent in agents {
        out.push_str(&format!(
            "### Agent {}: {}\n\n",
            agent.agent_index,
            escape_comment_markers(agent.agent_name.trim())
        ));
        out.push_str(&format!("- Strategy: {}\n", agent.strategy));
        if !agent.llm_provider.trim().is_empty() {
            out.push_str(&format!(
                "- LLM provider: {}\n",
                escape_comment_markers(agent.llm_provider.trim())
            ));
        }
        out.push_str(&format!("- Status: {}\n", agent.status));
        if agent.status != ExecutionStatus::Completed
            && let Some(error) = agent
                .error_message
                .as_deref()
                .filter(|e| !e.trim().is_empty())
        {
            out.push_str(&format!(
                "- Error: {}\n",
                escape_comment_markers(error.trim())
            ));
        }
        out.push('\n');
        let timeline = format_timeline_events(&agent.events);
        if timeline.is_empty() {
            out.push_str("(No investigation history available)\n\n");
        } else {
            out.push_str(&timeline);
            out.push_str("\n\n");
        }
    }
    out.push_str(STAGE_CONTEXT_END);
    out
}

/// Formats a session's whole timeline (every stage, earlier chat questions
/// and answers, the executive summary) for a follow-up chat, inside the
/// investigation history markers. A `---` line separates stages.
pub fn format_investigation_context(events: &[TimelineEvent]) -> String {
    let mut body = String::new();
    let mut previous_stage: Option<&Option<String>> = None;
    let mut start = 0;
    // Format stage by stage so tool call / summary pairing never crosses a
    // stage boundary.
    for i in 0..=events.len() {
        let boundary =
            i == events.len() || previous_stage.is_some_and(|s| *s != events[i].scope.stage_id);
        if boundary && i > start {
            let chunk = format_timeline_events(&events[start..i]);
            if !chunk.is_empty() {
                if !body.is_empty() {
                    body.push_str("\n\n---\n\n");
                }
                body.push_str(&chunk);
            }
            start = i;
        }
        if i < events.len() {
            previous_stage = Some(&events[i].scope.stage_id);
        }
    }
    if body.is_empty() {
        body.push_str("(No investigation history available)");
    }
    format!(
        "{INVESTIGATION_HISTORY_START}\n\n# Investigation history\n\n{body}\n\n{INVESTIGATION_HISTORY_END}"
    )
}

/// Formats timeline events, in the order given, as Markdown sections. An
/// `llm_tool_call` immediately followed by an `mcp_tool_summary` is shown as
/// the tool header with the summary instead of the raw result; a
/// `final_analysis` equal to the preceding `llm_response` is skipped; events
/// without content are skipped (tool calls excepted).
pub fn format_timeline_events(events: &[TimelineEvent]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut last_response: Option<&str> = None;
    let mut i = 0;
    while i < events.len() {
        let event = &events[i];
        let content = event.content.trim();
        match event.event_type {
            TimelineEventType::LlmToolCall => {
                last_response = None;
                let mut part = tool_call_header(event);
                let summary = events
                    .get(i + 1)
                    .filter(|next| next.event_type == TimelineEventType::McpToolSummary);
                if let Some(summary) = summary {
                    part.push_str("\n\n**Result (summarized):**\n\n");
                    part.push_str(&escape_comment_markers(summary.content.trim()));
                    i += 1;
                } else if !content.is_empty() {
                    let label = if is_failed_tool_call(event) {
                        "**Result (error):**"
                    } else {
                        "**Result:**"
                    };
                    part.push_str(&format!(
                        "\n\n{label}\n\n{}",
                        escape_comment_markers(content)
                    ));
                } else if event.status != TimelineEventStatus::Completed {
                    part.push_str(&format!("\n\n(no result: {})", event.status));
                }
                parts.push(part);
            }
            _ if content.is_empty() => {}
            TimelineEventType::FinalAnalysis if last_response == Some(content) => {}
            event_type => {
                if event_type == TimelineEventType::LlmResponse {
                    last_response = Some(content);
                }
                parts.push(format!(
                    "**{}:**\n\n{}",
                    event_label(event_type),
                    escape_comment_markers(content)
                ));
            }
        }
        i += 1;
    }
    parts.join("\n\n")
}

fn event_label(event_type: TimelineEventType) -> &'static str {
    match event_type {
        TimelineEventType::LlmThinking => "Reasoning",
        TimelineEventType::LlmResponse => "Agent response",
        TimelineEventType::LlmToolCall => "Tool call",
        TimelineEventType::McpToolSummary => "Tool result summary",
        TimelineEventType::Error => "Error",
        TimelineEventType::UserQuestion => "User question",
        TimelineEventType::ExecutiveSummary => "Executive summary",
        TimelineEventType::FinalAnalysis => "Final analysis",
        TimelineEventType::CodeExecution => "Code execution",
        TimelineEventType::GoogleSearchResult => "Google Search result",
        TimelineEventType::UrlContextResult => "URL context result",
        TimelineEventType::ProviderFallback => "LLM provider fallback",
    }
}

/// `**Tool call:** server.tool(arguments)` from the event metadata.
fn tool_call_header(event: &TimelineEvent) -> String {
    let meta = &event.metadata;
    let text = |key: &str| {
        meta.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    let name = match (
        text("server_name"),
        text("tool_name").or_else(|| text("name")),
    ) {
        (Some(server), Some(tool)) if !tool.starts_with(&format!("{server}.")) => {
            format!("{server}.{tool}")
        }
        (_, Some(tool)) => tool.to_string(),
        (Some(server), None) => format!("{server}.(unknown tool)"),
        (None, None) => "(unknown tool)".to_string(),
    };
    let arguments = match meta.get("arguments") {
        Some(Value::String(s)) => s.trim().to_string(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    escape_comment_markers(&format!("**Tool call:** {name}({arguments})"))
}

fn is_failed_tool_call(event: &TimelineEvent) -> bool {
    event.status == TimelineEventStatus::Failed
        || event.metadata.get("is_error").and_then(Value::as_bool) == Some(true)
}
