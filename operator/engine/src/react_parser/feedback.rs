//! Messages fed back to the model: format error feedback, observations,
//! unknown-tool lists and continuation prompts.

use tarsy_core::{ToolDefinition, ToolResult};

use super::parser::{ParsedReactResponse, Section, usable_action_name};
use crate::prompt::{assets, render};

/// What a model that stopped without acting or concluding should produce
/// when it concludes (wording of [`continuation_prompt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContinuationKind {
    /// An investigation: the conclusion is a complete analysis.
    #[default]
    General,
    /// A data-gathering agent: the conclusion summarizes the data.
    DataCollection,
    /// An analysis agent: the conclusion is a complete analysis.
    Analysis,
}

/// Specific feedback for a response that was neither a usable action nor a
/// final answer: what was wrong, then the format reminder. Send it as the
/// next user message (the malformed response stays in the conversation).
pub fn format_error_feedback(parsed: &ParsedReactResponse) -> String {
    let found = parsed.found;
    let action_named = parsed
        .raw_action
        .as_deref()
        .and_then(usable_action_name)
        .is_some();
    let mut problem = if found.action && found.action_input && !action_named {
        "FORMAT ERROR: Your \"Action:\" line does not name a tool.\n\
         Write the tool name (server.tool) right after \"Action:\"."
            .to_string()
    } else if found.action && !found.action_input {
        "FORMAT ERROR: Your response has \"Action:\" but no \"Action Input:\".\n\
         Every \"Action:\" must be followed by \"Action Input:\" on its own line \
         (leave it empty for tools without parameters)."
            .to_string()
    } else if found.action_input && !found.action {
        "FORMAT ERROR: Your response has \"Action Input:\" but no \"Action:\".\n\
         Put \"Action:\" with the tool name (server.tool) on the line before \"Action Input:\"."
            .to_string()
    } else if found.final_answer {
        "FORMAT ERROR: Your \"Final Answer:\" is empty.\n\
         Write your complete analysis right after \"Final Answer:\"."
            .to_string()
    } else if found.thought {
        "FORMAT ERROR: Your response only contains \"Thought:\".\n\
         After reasoning you must either call a tool with \"Action:\" and \"Action Input:\", \
         or conclude with \"Final Answer:\"."
            .to_string()
    } else if !found.action && !found.action_input && !found.final_answer {
        "FORMAT ERROR: No ReAct sections were found in your response.\n\
         Use the section headers exactly: \"Thought:\", \"Action:\", \"Action Input:\", \"Final Answer:\"."
            .to_string()
    } else {
        let (present, missing): (Vec<Section>, Vec<Section>) =
            Section::ALL.iter().partition(|s| found.has(**s));
        let names = |v: &[Section]| {
            v.iter()
                .map(|s| s.header().trim_end_matches(':'))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "FORMAT ERROR: Incomplete ReAct format.\nFound: {}\nMissing: {}",
            names(&present),
            names(&missing)
        )
    };
    if parsed.hallucinated_observation {
        problem.push_str(
            "\nYou also wrote an \"Observation:\" yourself. Never do that: stop after \
             \"Action Input:\" and wait for the system to run the tool.",
        );
    }
    format!("{problem}\n\n{}", format_correction_reminder())
}

/// The general ReAct format reminder (part of every format feedback; also
/// usable on its own after an error while processing a response).
pub fn format_correction_reminder() -> String {
    render(assets::REACT_FORMAT_REMINDER, &[])
}

/// Asks a model that neither acted nor concluded to do one of the two.
pub fn continuation_prompt(kind: ContinuationKind) -> String {
    let goal = match kind {
        ContinuationKind::General | ContinuationKind::Analysis => "your complete analysis",
        ContinuationKind::DataCollection => "a summary of the data you collected",
    };
    render(assets::REACT_CONTINUATION, &[("goal", goal)])
}

/// Observation after an error while handling the model's reasoning (not a
/// tool failure).
pub fn error_continuation(message: &str) -> String {
    format!(
        "Observation: Error in reasoning: {}. Please try a different approach.",
        message.trim().trim_end_matches('.')
    )
}

/// A tool result as the model sees it.
pub fn format_observation(result: &ToolResult) -> String {
    if result.is_error {
        format!(
            "Observation: Error executing {}: {}",
            result.name, result.content
        )
    } else {
        format!("Observation: {}", result.content)
    }
}

/// Observation for a tool call that failed in the executor (transport
/// error, timeout) rather than returning an error result.
pub fn format_tool_error_observation(error: &str) -> String {
    format!(
        "Observation: Error - Tool execution failed: {}",
        error.trim()
    )
}

/// Observation for a failed LLM call, so the next attempt knows what
/// happened.
pub fn format_error_observation(error: &str) -> String {
    format!(
        "Observation: Error from previous attempt: {}. Please try again.",
        error.trim().trim_end_matches('.')
    )
}

/// Observation for an unknown or invalid tool: the reason, close matches
/// ("Did you mean ...?") and the list of available tools, so the model can
/// correct itself.
pub fn format_unknown_tool_error(
    requested: &str,
    message: &str,
    available: &[ToolDefinition],
) -> String {
    let mut out = format!("Observation: Error - {}", message.trim());
    let suggestions = suggest_tools(requested, available);
    if !suggestions.is_empty() {
        out.push_str(&format!("\nDid you mean: {}?", suggestions.join(", ")));
    }
    if available.is_empty() {
        out.push_str("\n\nNo tools are available.");
    } else {
        out.push_str("\n\nAvailable tools:");
        for tool in available {
            let description = tool
                .description
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            if description.is_empty() {
                out.push_str(&format!("\n  - {}", tool.name));
            } else {
                out.push_str(&format!("\n  - {}: {}", tool.name, description));
            }
        }
    }
    out
}

/// The answer of a forced conclusion: the Final Answer if the model used
/// the format, else its reasoning, else the whole response.
pub fn forced_conclusion_answer(parsed: &ParsedReactResponse, raw_response: &str) -> String {
    if let Some(answer) = parsed.final_answer() {
        return answer.to_string();
    }
    match parsed.thought.as_deref() {
        Some(thought) if !thought.trim().is_empty() => thought.to_string(),
        _ => raw_response.trim().to_string(),
    }
}

/// Tools the model probably meant: same tool on another server, the tool
/// without its server prefix, or a case-only difference.
fn suggest_tools(requested: &str, available: &[ToolDefinition]) -> Vec<String> {
    let requested = requested.trim();
    if requested.is_empty() {
        return Vec::new();
    }
    let tool_part = requested.rsplit('.').next().unwrap_or(requested);
    available
        .iter()
        .filter(|t| t.name != requested)
        .filter(|t| {
            let candidate_tool = t.name.rsplit('.').next().unwrap_or(&t.name);
            candidate_tool == tool_part || t.name.eq_ignore_ascii_case(requested)
        })
        .take(3)
        .map(|t| t.name.clone())
        .collect()
}
