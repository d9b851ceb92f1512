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

/// One stage of a session as the chat agent sees it: its agents and, for a
/// parallel stage, its synthesis result.
#[derive(Debug, Clone, PartialEq)]
pub struct StageInvestigation {
    /// Stage name.
    pub stage_name: String,
    /// Its executions, by index.
    pub agents: Vec<AgentInvestigation>,
    /// The final analysis of the stage's synthesis, when it had one.
    pub synthesis_result: Option<String>,
}

/// An earlier follow-up question and its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatExchange {
    /// The question.
    pub question: String,
    /// The answer, when one was given.
    pub answer: Option<String>,
}

/// Everything a follow-up chat answer knows about its session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatHistory {
    /// Investigation stages in order (syntheses folded into their stage).
    pub stages: Vec<StageInvestigation>,
    /// The session's executive summary.
    pub executive_summary: Option<String>,
    /// Earlier questions and answers, oldest first (the current question
    /// is not one of them: the prompt carries it once).
    pub previous_chats: Vec<ChatExchange>,
}

/// Formats a stage's parallel investigations for the synthesis prompt:
/// a header with the success count, then per agent its metadata (name,
/// strategy, provider, status, error) and its formatted timeline, inside
/// the stage context markers.
pub fn format_investigation_for_synthesis(
    agents: &[AgentInvestigation],
    stage_name: &str,
) -> String {
    let mut out = format!("{STAGE_CONTEXT_START}\n\n");
    push_parallel_agents(&mut out, agents, stage_name, 2);
    out.push_str(STAGE_CONTEXT_END);
    out
}

/// Formats a session's history for a follow-up chat, inside the
/// investigation history markers: each investigation stage under its own
/// heading (a single agent labelled with strategy, provider and status;
/// parallel agents in the synthesis layout, followed by the synthesis
/// result), the executive summary, then earlier questions and answers.
pub fn format_chat_history(history: &ChatHistory) -> String {
    let mut out = format!("{INVESTIGATION_HISTORY_START}\n\n# Investigation history\n\n");
    if history.stages.is_empty() {
        out.push_str("(No investigation history available)\n\n");
    }
    for (i, stage) in history.stages.iter().enumerate() {
        out.push_str(&format!(
            "## Stage {}: {}\n\n",
            i + 1,
            escape_comment_markers(stage.stage_name.trim())
        ));
        match stage.agents.as_slice() {
            [] => out.push_str("(No investigation history available)\n\n"),
            [agent] => {
                out.push_str(&format!(
                    "**Agent:** {} ({}{})\n",
                    escape_comment_markers(agent.agent_name.trim()),
                    agent.strategy,
                    provider_suffix(agent)
                ));
                out.push_str(&format!("**Status:** {}\n", agent.status));
                push_error(&mut out, agent, "**Error:**");
                out.push('\n');
                push_timeline(&mut out, agent);
            }
            agents => push_parallel_agents(&mut out, agents, &stage.stage_name, 3),
        }
        if let Some(result) = stage
            .synthesis_result
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
        {
            out.push_str("### Synthesis result\n\n");
            out.push_str(&escape_comment_markers(result));
            out.push_str("\n\n");
        }
    }
    if let Some(summary) = history
        .executive_summary
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        out.push_str("## Executive summary\n\n");
        out.push_str(&escape_comment_markers(summary));
        out.push_str("\n\n");
    }
    if !history.previous_chats.is_empty() {
        out.push_str("## Previous chat messages\n\n");
        for (i, qa) in history.previous_chats.iter().enumerate() {
            out.push_str(&format!(
                "**Q{}:** {}\n\n",
                i + 1,
                escape_comment_markers(qa.question.trim())
            ));
            if let Some(answer) = qa.answer.as_deref().filter(|a| !a.trim().is_empty()) {
                out.push_str(&format!(
                    "**A{}:** {}\n\n",
                    i + 1,
                    escape_comment_markers(answer.trim())
                ));
            }
        }
    }
    out.push_str(INVESTIGATION_HISTORY_END);
    out
}

/// `, provider` when the provider is known.
fn provider_suffix(agent: &AgentInvestigation) -> String {
    match agent.llm_provider.trim() {
        "" => String::new(),
        p => format!(", {}", escape_comment_markers(p)),
    }
}

/// The error line of an agent that did not complete.
fn push_error(out: &mut String, agent: &AgentInvestigation, label: &str) {
    if agent.status != ExecutionStatus::Completed
        && let Some(error) = agent
            .error_message
            .as_deref()
            .filter(|e| !e.trim().is_empty())
    {
        out.push_str(&format!(
            "{label} {}\n",
            escape_comment_markers(error.trim())
        ));
    }
}

fn push_timeline(out: &mut String, agent: &AgentInvestigation) {
    let timeline = format_timeline_events(&agent.events);
    if timeline.is_empty() {
        out.push_str("(No investigation history available)\n\n");
    } else {
        out.push_str(&timeline);
        out.push_str("\n\n");
    }
}

/// Parallel agents of one stage: a heading at `level` with the success
/// count, then one sub-heading per agent with its metadata and timeline.
fn push_parallel_agents(
    out: &mut String,
    agents: &[AgentInvestigation],
    stage_name: &str,
    level: usize,
) {
    let completed = agents
        .iter()
        .filter(|a| a.status == ExecutionStatus::Completed)
        .count();
    let heading = "#".repeat(level);
    out.push_str(&format!(
        "{heading} Parallel investigation \"{}\": {completed}/{} agents completed\n\n",
        escape_comment_markers(stage_name.trim()),
        agents.len()
    ));
    for agent in agents {
        out.push_str(&format!(
            "{heading}# Agent {}: {}\n\n",
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
        push_error(out, agent, "- Error:");
        out.push('\n');
        push_timeline(out, agent);
    }
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
