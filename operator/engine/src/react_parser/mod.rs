//! The ReAct parser: turns a model's free-text response in the
//! Thought / Action / Action Input / Final Answer format into the
//! controller's next step, and writes the messages fed back to the model.
//!
//! # Using it from the ReAct controller
//!
//! ```
//! use tarsy_core::ToolDefinition;
//! use tarsy_engine::react_parser::{self, ReactStep};
//!
//! let tools = vec![ToolDefinition {
//!     name: "kubernetes.pods_list".into(),
//!     description: "List pods".into(),
//!     parameters_schema: "{}".into(),
//! }];
//! let response = "Thought: Check the pods.\nAction: kubernetes.pods_list\nAction Input: {\"namespace\": \"shop\"}";
//! let parsed = react_parser::parse(response);
//! // `parsed.thought` becomes the llm_thinking event (source "react").
//! assert_eq!(parsed.thought.as_deref(), Some("Check the pods."));
//! match parsed.step(&tools) {
//!     ReactStep::CallTool { name, input } => {
//!         assert_eq!(name, "kubernetes.pods_list");
//!         assert_eq!(input, "{\"namespace\": \"shop\"}"); // raw: the MCP executor parses it
//!     }
//!     // FinalAnswer(answer): final_analysis, done.
//!     // UnknownTool { observation, .. } / FormatError { feedback }: append as a
//!     // user message and continue the loop.
//!     other => panic!("unexpected {other:?}"),
//! }
//! ```
//!
//! After a tool ran, append [`format_observation`] (or
//! [`format_tool_error_observation`] when the executor failed) as a user
//! message; after a failed LLM call, [`format_error_observation`]. For a
//! forced conclusion, parse the response and use
//! [`forced_conclusion_answer`].
//!
//! # How parsing works (with its recovery rules)
//!
//! A line-by-line section state machine with three tiers of header
//! detection:
//! 1. a header at the start of a line — tolerant of case, Markdown bold or
//!    heading marks and a space before the colon (`**Action:**`,
//!    `final answer:`), plus a bare `Thought` line; inside a code block only
//!    the exact spelling counts, so `action: restart` in YAML stays content;
//! 2. `Final Answer:` in the middle of a line after the end of a sentence;
//! 3. `Action:` in the middle of a line after the end of a sentence, and
//!    `Action Input:` likewise once an Action was seen (or anywhere on the
//!    Action line itself).
//!
//! Other rules: the first Final Answer wins; a new Action discards an
//! earlier Action Input; thoughts accumulate; unlabelled text before the
//! first header becomes the thought when there is no `Thought:`. A line
//! starting with `Observation:` (or `[Based on`) means the model invented a
//! tool result: parsing stops there (echoes of TARSy's own continuation
//! prompts are exempt). An Action Input without an Action triggers
//! missing-Action recovery (a `server.tool` name after `Action` earlier in
//! the text). Section content keeps its relative indentation (YAML inputs
//! survive); an Action Input loses an enclosing code fence but is otherwise
//! kept raw. The action name loses Markdown, quotes and trailing
//! punctuation.
//!
//! Outcome precedence: an action with an Action Input (even alongside a
//! Final Answer) → a non-empty Final Answer → malformed. An action name
//! without a dot is reported as an invalid tool name ("server.tool"
//! format); whether a dotted name exists is decided by
//! [`ParsedReactResponse::step`] against the tool list.

mod feedback;
mod parser;
mod step;

pub use feedback::{
    ContinuationKind, continuation_prompt, error_continuation, forced_conclusion_answer,
    format_correction_reminder, format_error_feedback, format_error_observation,
    format_observation, format_tool_error_observation, format_unknown_tool_error,
};
pub use parser::{FoundSections, ParsedReactResponse, ReactOutcome, Section, parse};
pub use step::ReactStep;

#[cfg(test)]
mod tests;
