//! The provider-neutral conversation model shared by the engine, the store and
//! the LLM client (it mirrors `llm.v1.ConversationMessage` and friends).

use serde::{Deserialize, Serialize};

use crate::status::MessageRole;

/// A tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCall {
    /// Provider call id, echoed back in the tool result.
    pub id: String,
    /// Canonical `server.tool` name (or `server__tool` as function calling returns it).
    pub name: String,
    /// Arguments: a JSON string for function calling, free text for ReAct.
    pub arguments: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Canonical `server.tool` name.
    pub name: String,
    /// Human-readable description from the MCP server.
    pub description: String,
    /// JSON Schema of the parameters, as a JSON string.
    pub parameters_schema: String,
}

/// The outcome of one tool call, as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// Canonical `server.tool` name.
    pub name: String,
    /// Text content (already masked).
    pub content: String,
    /// The tool reported an error (the model sees it; not an infrastructure failure).
    pub is_error: bool,
    /// The tool server's session broke during the call and was opened
    /// again, and this is the second attempt's answer: what the first
    /// attempt failed with (shown on the tool call's timeline event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered: Option<String>,
}

/// One message of an LLM conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConversationMessage {
    /// Who speaks.
    pub role: MessageRole,
    /// Text content.
    pub content: String,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For tool messages: the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For tool messages: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

impl ConversationMessage {
    /// A message with only role and text.
    pub fn new(role: MessageRole, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(MessageRole::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(MessageRole::User, content)
    }

    /// An assistant message, optionally with tool calls.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls,
            ..Self::new(MessageRole::Assistant, content)
        }
    }

    /// A tool result message.
    pub fn tool(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            tool_name: Some(tool_name.into()),
            ..Self::new(MessageRole::Tool, content)
        }
    }
}

/// Token consumption, per call or accumulated over an execution.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenUsage {
    /// Prompt tokens.
    pub input_tokens: i64,
    /// Completion tokens.
    pub output_tokens: i64,
    /// Total as reported by the provider.
    pub total_tokens: i64,
    /// Native thinking tokens.
    pub thinking_tokens: i64,
    /// Prompt tokens read from the provider's cache (part of `input_tokens`).
    #[serde(default)]
    pub cached_input_tokens: i64,
}

impl TokenUsage {
    /// Adds another call's usage to this total.
    pub fn add(&mut self, other: &TokenUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        self.thinking_tokens += other.thinking_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
    }
}
