//! Prompt building: every message TARSy sends to a model, composed from the
//! Markdown text assets in the crate's `prompts/` directory.
//!
//! # Using it from a strategy
//!
//! ```
//! use tarsy_engine::prompt::{PromptBuilder, PromptInput};
//! use tarsy_core::IterationStrategy;
//!
//! let input = PromptInput {
//!     alert_type: "PodCrashLooping".into(),
//!     alert_data: r#"{"pod": "web-1", "namespace": "shop"}"#.into(),
//!     runbook: Some("Check the pod's last termination reason.".into()),
//!     ..Default::default()
//! };
//! // In the engine: `.with_config(&resolved_agent_config, &mcp_server_configs)`
//! // fills agent name, custom instructions and server instructions.
//! let builder = PromptBuilder::new();
//! let messages = builder.messages_for(IterationStrategy::React, &input);
//! assert_eq!(messages.len(), 2); // system + user
//! let nudge = builder.forced_conclusion_prompt(20, IterationStrategy::React);
//! assert!(nudge.contains("Final Answer:"));
//! ```
//!
//! * [`PromptInput`] holds everything a prompt is made of: agent name, alert
//!   type/data, runbook text, custom instructions (tier 3), MCP server
//!   instructions (tier 2), tools, failed MCP servers, chat data and the
//!   previous-stage context. [`PromptInput::with_config`] fills the
//!   configuration-derived parts from `tarsy_core::ResolvedAgentConfig` and
//!   `tarsy_core::McpServerConfig`.
//! * [`PromptBuilder::messages_for`] picks the conversation for a strategy:
//!   [`PromptBuilder::react_messages`] (instructions + ReAct format + tool
//!   descriptions), [`PromptBuilder::function_calling_messages`] (tools are
//!   bound by the caller, not listed) or [`PromptBuilder::synthesis_messages`]
//!   (the parallel investigations come in `previous_stage_context`).
//! * Chat is a prompt concern: set [`PromptInput::chat`] and the same
//!   methods produce the chat conversation (chat general instructions, the
//!   session history from [`crate::context::format_chat_history`]
//!   and the question).
//! * One-off prompts: [`PromptBuilder::forced_conclusion_prompt`],
//!   [`PromptBuilder::summarization_system_prompt`] /
//!   [`PromptBuilder::summarization_user_prompt`] (with the conversation so
//!   far), [`PromptBuilder::executive_summary_system_prompt`] /
//!   [`PromptBuilder::executive_summary_user_prompt`].
//!
//! # Instruction tiers
//!
//! The system prompt is: tier 1, the general SRE instructions (or the chat
//! variant), naming the agent in its first line → tier 2, each MCP server's
//! instructions in the agent's server order → tier 3, the agent's custom
//! instructions → a warning listing MCP servers that failed to start.
//!
//! # Templates
//!
//! Assets use `{{name}}` placeholders filled by `render` in a single pass,
//! so user-controlled text (alert data, tool output) is never re-expanded.

mod builder;
mod template;

pub(crate) use builder::conversation_context;
pub use builder::{ChatInput, FailedServer, PromptBuilder, PromptInput, ServerInstructions};
pub(crate) use template::{assets, render};

#[cfg(test)]
mod tests;
