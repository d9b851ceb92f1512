//! Context formatting: what one agent's prompt learns about other work.
//!
//! * [`build_stage_context`] — the final analyses of completed stages for
//!   the next stage's prompt (`PromptInput::previous_stage_context`),
//!   wrapped in `<!-- CHAIN_CONTEXT_START -->` / `<!-- CHAIN_CONTEXT_END -->`.
//! * [`format_investigation_for_synthesis`] — the full timelines of a
//!   stage's parallel executions with per-agent metadata (name, strategy,
//!   provider, status, error) for the synthesis prompt, wrapped in
//!   `<!-- STAGE_CONTEXT_START -->` / `<!-- STAGE_CONTEXT_END -->`.
//! * [`format_chat_history`] — a session's history for a follow-up chat
//!   (`ChatInput::investigation_context`): stage by stage, each agent
//!   labelled, syntheses headed as such, the executive summary, earlier
//!   questions and answers; wrapped in `<!-- INVESTIGATION_HISTORY_START -->`
//!   / `<!-- INVESTIGATION_HISTORY_END -->`.
//! * [`format_timeline_events`] — the shared event formatter behind the two
//!   above.
//!
//! Any `<!--` or `-->` inside formatted content is escaped
//! ([`escape_comment_markers`]) so a model's text or a tool's output can
//! never close or fake a context block.
//!
//! # Tool calls and summaries
//!
//! An `llm_tool_call` event is shown as a header built from its metadata —
//! `server_name` + `tool_name` (or a `tool_name`/`name` already in
//! `server.tool` form) and `arguments` (a JSON string or any JSON value) —
//! followed by its result (the event content). When the next event is an
//! `mcp_tool_summary`, the summary replaces the raw result and the summary
//! event is not shown again. A `final_analysis` identical to the preceding
//! `llm_response` is not repeated.

mod investigation;
mod stage;

pub use investigation::{
    AgentInvestigation, ChatExchange, ChatHistory, StageInvestigation, format_chat_history,
    format_investigation_for_synthesis, format_timeline_events,
};
pub use stage::{
    CHAIN_CONTEXT_END, CHAIN_CONTEXT_START, INVESTIGATION_HISTORY_END, INVESTIGATION_HISTORY_START,
    STAGE_CONTEXT_END, STAGE_CONTEXT_START, StageResult, build_stage_context,
    escape_comment_markers,
};

#[cfg(test)]
mod tests;
