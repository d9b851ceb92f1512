//! Turning a parsed response into the controller's next step.

use tarsy_core::ToolDefinition;

use super::feedback::{format_error_feedback, format_unknown_tool_error};
use super::parser::{ParsedReactResponse, ReactOutcome};

/// What the ReAct controller does with a parsed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReactStep {
    /// Execute this tool. `name` is the canonical name from the tool list.
    CallTool {
        /// Canonical `server.tool` name.
        name: String,
        /// Raw Action Input for the executor.
        input: String,
    },
    /// The model concluded: complete the execution with this analysis.
    FinalAnswer(String),
    /// The tool does not exist: send `observation` (reason, suggestions,
    /// available tools) as the next user message.
    UnknownTool {
        /// The name the model wrote.
        requested: String,
        /// The observation to send.
        observation: String,
    },
    /// Malformed response: send `feedback` as the next user message.
    FormatError {
        /// The feedback to send.
        feedback: String,
    },
}

impl ParsedReactResponse {
    /// Decides the next step against the tools the agent may call. A tool
    /// name matches exactly, or in its function-calling spelling
    /// (`server__tool` for `server.tool`).
    pub fn step(&self, tools: &[ToolDefinition]) -> ReactStep {
        match &self.outcome {
            ReactOutcome::FinalAnswer(answer) => ReactStep::FinalAnswer(answer.clone()),
            ReactOutcome::ToolCall { action, input } => match resolve_tool(action, tools) {
                Some(tool) => ReactStep::CallTool {
                    name: tool.name.clone(),
                    input: input.clone(),
                },
                None => ReactStep::UnknownTool {
                    requested: action.clone(),
                    observation: format_unknown_tool_error(
                        action,
                        &format!("Unknown tool '{action}'. It is not one of the available tools."),
                        tools,
                    ),
                },
            },
            ReactOutcome::InvalidToolName {
                action,
                input,
                message,
            } => match resolve_tool(action, tools) {
                // `server__tool` has no dot but may still name a real tool.
                Some(tool) => ReactStep::CallTool {
                    name: tool.name.clone(),
                    input: input.clone(),
                },
                None => ReactStep::UnknownTool {
                    requested: action.clone(),
                    observation: format_unknown_tool_error(action, message, tools),
                },
            },
            ReactOutcome::Malformed => ReactStep::FormatError {
                feedback: format_error_feedback(self),
            },
        }
    }
}

fn resolve_tool<'a>(name: &str, tools: &'a [ToolDefinition]) -> Option<&'a ToolDefinition> {
    tools.iter().find(|t| t.name == name).or_else(|| {
        let dotted = name.replacen("__", ".", 1);
        (dotted != name)
            .then(|| tools.iter().find(|t| t.name == dotted))
            .flatten()
    })
}
