//! [`PromptBuilder`]: turns a [`PromptInput`] into the conversations and
//! one-off prompts the strategies send.

use serde_json::Value;
use tarsy_core::{
    ConversationMessage, IterationStrategy, McpServerConfig, MessageRole, ResolvedAgentConfig,
    ToolDefinition,
};

use super::template::{assets, render};

/// Instructions an MCP server contributes to the system prompt (tier 2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerInstructions {
    /// MCP server name.
    pub server: String,
    /// Its instructions text.
    pub instructions: String,
}

/// An MCP server that failed to start for this execution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailedServer {
    /// MCP server name.
    pub server: String,
    /// Why it failed (shown to the model, so keep secrets out of it).
    pub error: String,
}

/// Chat-specific prompt data: present only for chat executions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatInput {
    /// The session's formatted history
    /// ([`crate::context::format_chat_history`]).
    pub investigation_context: String,
    /// The user's question.
    pub question: String,
}

/// Everything a prompt is built from. Build it with struct update syntax
/// (`PromptInput { alert_data, ..Default::default() }`) and
/// [`PromptInput::with_config`] for the configuration-derived parts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptInput {
    /// Name the agent is addressed by; the first line of every system prompt
    /// names it (the scripted LLM routes parallel agents on it).
    pub agent_name: String,
    /// Alert type.
    pub alert_type: String,
    /// Alert payload (already masked), included verbatim.
    pub alert_data: String,
    /// Runbook text; `None` or empty leaves the runbook section out.
    pub runbook: Option<String>,
    /// Lessons recalled from past investigations, already rendered as a
    /// section (`tarsy_memory::inject`); `None` leaves it out.
    pub memories: Option<String>,
    /// Agent custom instructions (tier 3); empty leaves the tier out.
    pub custom_instructions: String,
    /// MCP server instructions (tier 2), in the agent's server order.
    pub server_instructions: Vec<ServerInstructions>,
    /// Tools the agent may call (listed in the prompt for ReAct only; function
    /// calling binds them instead).
    pub tools: Vec<ToolDefinition>,
    /// Servers that failed to start: the model is warned not to use them.
    pub failed_servers: Vec<FailedServer>,
    /// Chat data; `Some` turns investigation prompts into chat prompts.
    pub chat: Option<ChatInput>,
    /// The finished investigation a judge scores; `Some` makes the
    /// conversation the judge's, whatever the strategy.
    pub judged_investigation: Option<String>,
    /// A reflector's instructions and what it reflects on; `Some` makes
    /// the conversation the reflector's, whatever the strategy.
    pub reflection: Option<(String, String)>,
    /// Previous stages' context ([`crate::context::build_stage_context`]) for
    /// investigations, or the formatted parallel investigations
    /// ([`crate::context::format_investigation_for_synthesis`]) for synthesis.
    pub previous_stage_context: Option<String>,
}

impl PromptInput {
    /// Fills the agent name (display name, else definition name), the custom
    /// instructions and the MCP server instructions (in the order of
    /// `config.mcp_servers`; servers missing from `servers` or without
    /// instructions are skipped) from resolved configuration.
    pub fn with_config(
        mut self,
        config: &ResolvedAgentConfig,
        servers: &[McpServerConfig],
    ) -> Self {
        self.agent_name = if config.display_name.trim().is_empty() {
            config.agent_name.clone()
        } else {
            config.display_name.clone()
        };
        self.custom_instructions = config.custom_instructions.clone();
        self.server_instructions = config
            .mcp_servers
            .iter()
            .filter_map(|name| servers.iter().find(|s| &s.name == name))
            .filter(|s| !s.instructions.trim().is_empty())
            .map(|s| ServerInstructions {
                server: s.name.clone(),
                instructions: s.instructions.clone(),
            })
            .collect();
        self
    }
}

/// Builds TARSy's prompts from the text assets in `prompts/`. Stateless and
/// cheap to copy.
#[derive(Debug, Clone, Copy, Default)]
pub struct PromptBuilder;

impl PromptBuilder {
    /// A builder.
    pub fn new() -> Self {
        Self
    }

    /// The initial conversation for `strategy`: ReAct, function calling
    /// (`native-thinking`, `langchain`, `single-call`) or synthesis.
    pub fn messages_for(
        &self,
        strategy: IterationStrategy,
        input: &PromptInput,
    ) -> Vec<ConversationMessage> {
        if let Some(investigation) = &input.judged_investigation {
            return self.judge_messages(input, investigation);
        }
        if let Some((instructions, prompt)) = &input.reflection {
            return self.reflector_messages(input, instructions, prompt);
        }
        match strategy {
            IterationStrategy::React => self.react_messages(input),
            IterationStrategy::NativeThinking
            | IterationStrategy::Langchain
            | IterationStrategy::SingleCall => self.function_calling_messages(input),
            IterationStrategy::Synthesis | IterationStrategy::SynthesisNativeThinking => {
                self.synthesis_messages(input)
            }
        }
    }

    /// The three-tier instructions: general SRE (or chat) instructions → each
    /// MCP server's instructions → the agent's custom instructions, followed
    /// by a warning about servers that failed to start.
    pub fn compose_instructions(&self, input: &PromptInput) -> String {
        let general = if input.chat.is_some() {
            assets::GENERAL_CHAT
        } else {
            assets::GENERAL_SRE
        };
        let mut parts = vec![render(general, &[("agent_name", agent_name(input))])];
        for server in &input.server_instructions {
            if server.instructions.trim().is_empty() {
                continue;
            }
            parts.push(render(
                assets::MCP_SERVER_INSTRUCTIONS,
                &[
                    ("server_name", server.server.as_str()),
                    ("instructions", server.instructions.trim()),
                ],
            ));
        }
        if !input.custom_instructions.trim().is_empty() {
            parts.push(render(
                assets::CUSTOM_INSTRUCTIONS,
                &[("instructions", input.custom_instructions.trim())],
            ));
        }
        if let Some(warning) = self.failed_servers_warning(&input.failed_servers) {
            parts.push(warning);
        }
        join(parts)
    }

    /// The warning about MCP servers that failed to start, if any did.
    pub fn failed_servers_warning(&self, failed: &[FailedServer]) -> Option<String> {
        if failed.is_empty() {
            return None;
        }
        let list = failed
            .iter()
            .map(|f| {
                if f.error.trim().is_empty() {
                    format!("- {}", f.server)
                } else {
                    format!("- {}: {}", f.server, one_line(&f.error))
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        Some(render(
            assets::FAILED_SERVERS_WARNING,
            &[("servers", &list)],
        ))
    }

    /// System + user messages for function calling (`native-thinking`,
    /// `langchain`) and `single-call`. Tools are bound to the request by the
    /// strategy, so they are not listed here. With `input.chat` set this is
    /// the chat conversation.
    pub fn function_calling_messages(&self, input: &PromptInput) -> Vec<ConversationMessage> {
        let mut system = vec![self.compose_instructions(input)];
        if !input.tools.is_empty() {
            system.push(render(assets::FUNCTION_CALLING_FOCUS, &[]));
        }
        vec![
            ConversationMessage::system(join(system)),
            ConversationMessage::user(self.user_message(input)),
        ]
    }

    /// System + user messages for ReAct: the instructions, the ReAct format
    /// and the tool descriptions. With `input.chat` set this is the chat
    /// conversation.
    pub fn react_messages(&self, input: &PromptInput) -> Vec<ConversationMessage> {
        let system = join(vec![
            self.compose_instructions(input),
            self.react_format_instructions(&input.tools),
        ]);
        vec![
            ConversationMessage::system(system),
            ConversationMessage::user(self.user_message(input)),
        ]
    }

    /// System + user messages for synthesis: the synthesis instructions (plus
    /// the agent's custom instructions) and the alert with the parallel
    /// investigations taken from `input.previous_stage_context`.
    pub fn synthesis_messages(&self, input: &PromptInput) -> Vec<ConversationMessage> {
        let mut system = vec![render(
            assets::SYNTHESIS_SYSTEM,
            &[("agent_name", agent_name(input))],
        )];
        if !input.custom_instructions.trim().is_empty() {
            system.push(render(
                assets::CUSTOM_INSTRUCTIONS,
                &[("instructions", input.custom_instructions.trim())],
            ));
        }
        let investigations = input
            .previous_stage_context
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or("(no investigation results were provided)");
        let user = render(
            assets::SYNTHESIS_USER,
            &[
                ("alert_type", alert_type(input)),
                ("alert_data", alert_data(input)),
                ("investigations", investigations.trim()),
            ],
        );
        vec![
            ConversationMessage::system(join(system)),
            ConversationMessage::user(user),
        ]
    }

    /// System + user messages of a judge: who it is, how it judges (the
    /// scoring vocabulary's instructions, plus the agent's custom
    /// instructions) and the investigation with the answer's form.
    pub fn judge_messages(
        &self,
        input: &PromptInput,
        investigation: &str,
    ) -> Vec<ConversationMessage> {
        let mut system = vec![format!(
            "You are {}, the reviewer of TARSy's investigations.\n\n{}",
            agent_name(input),
            tarsy_scoring::judge_instructions().trim()
        )];
        if !input.custom_instructions.trim().is_empty() {
            system.push(render(
                assets::CUSTOM_INSTRUCTIONS,
                &[("instructions", input.custom_instructions.trim())],
            ));
        }
        vec![
            ConversationMessage::system(join(system)),
            ConversationMessage::user(tarsy_scoring::assessment_request(investigation)),
        ]
    }

    /// System + user messages of a reflector: who it is, how it learns
    /// (`instructions`, plus the agent's custom instructions) and what it
    /// reflects on.
    pub fn reflector_messages(
        &self,
        input: &PromptInput,
        instructions: &str,
        prompt: &str,
    ) -> Vec<ConversationMessage> {
        let mut system = vec![format!(
            "You are {}, who keeps TARSy's memory of past investigations.\n\n{}",
            agent_name(input),
            instructions.trim()
        )];
        if !input.custom_instructions.trim().is_empty() {
            system.push(render(
                assets::CUSTOM_INSTRUCTIONS,
                &[("instructions", input.custom_instructions.trim())],
            ));
        }
        vec![
            ConversationMessage::system(join(system)),
            ConversationMessage::user(prompt.trim()),
        ]
    }

    /// The first user message: the chat message when `input.chat` is set,
    /// otherwise the investigation message.
    pub fn user_message(&self, input: &PromptInput) -> String {
        match &input.chat {
            Some(chat) => self.chat_user_message(chat),
            None => self.investigation_user_message(input),
        }
    }

    /// The investigation message: alert type and data, the runbook, previous
    /// stages' results and the task.
    pub fn investigation_user_message(&self, input: &PromptInput) -> String {
        let mut parts = vec![render(
            assets::INVESTIGATION_USER,
            &[
                ("alert_type", alert_type(input)),
                ("alert_data", alert_data(input)),
            ],
        )];
        if let Some(runbook) = input.runbook.as_deref().filter(|r| !r.trim().is_empty()) {
            parts.push(render(
                assets::RUNBOOK_SECTION,
                &[("runbook", runbook.trim())],
            ));
        }
        if let Some(memories) = input.memories.as_deref().filter(|m| !m.trim().is_empty()) {
            parts.push(memories.trim().to_string());
        }
        if let Some(context) = input
            .previous_stage_context
            .as_deref()
            .filter(|c| !c.trim().is_empty())
        {
            parts.push(render(
                assets::PREVIOUS_STAGES_SECTION,
                &[("context", context.trim())],
            ));
        }
        parts.push(render(assets::INVESTIGATION_TASK, &[]));
        join(parts)
    }

    /// The chat message: the investigation history and the question.
    pub fn chat_user_message(&self, chat: &ChatInput) -> String {
        render(
            assets::CHAT_USER,
            &[
                ("investigation", chat.investigation_context.trim()),
                ("question", chat.question.trim()),
            ],
        )
    }

    /// The ReAct format instructions with the tool descriptions.
    pub fn react_format_instructions(&self, tools: &[ToolDefinition]) -> String {
        let tools_text = if tools.is_empty() {
            render(assets::REACT_NO_TOOLS, &[])
        } else {
            format_tool_descriptions(tools)
        };
        render(assets::REACT_FORMAT, &[("tools", &tools_text)])
    }

    /// The prompt appended when the iteration budget is spent: asks for a
    /// conclusion without tools (ReAct gets the Final Answer format).
    pub fn forced_conclusion_prompt(&self, iteration: u32, strategy: IterationStrategy) -> String {
        let limit =
            format!("You have used all {iteration} investigation iterations available to you");
        conclusion_prompt(&limit, strategy)
    }

    /// The user message of the forced conclusion once the session's budget
    /// is spent (`reason` says how).
    pub fn budget_conclusion_prompt(&self, reason: &str, strategy: IterationStrategy) -> String {
        let limit = format!("This investigation has reached what it may spend: {reason}");
        conclusion_prompt(&limit, strategy)
    }

    /// System prompt of a tool result summarization call.
    pub fn summarization_system_prompt(&self, server: &str, tool: &str, max_tokens: u64) -> String {
        render(
            assets::SUMMARIZATION_SYSTEM,
            &[
                ("server_name", server),
                ("tool_name", tool),
                ("max_tokens", &max_tokens.to_string()),
            ],
        )
    }

    /// User prompt of a tool result summarization call. `conversation` is
    /// the investigation so far (`conversation_context`).
    pub fn summarization_user_prompt(
        &self,
        conversation: &str,
        server: &str,
        tool: &str,
        result: &str,
    ) -> String {
        let conversation = if conversation.trim().is_empty() {
            "(no conversation yet)"
        } else {
            conversation.trim()
        };
        render(
            assets::SUMMARIZATION_USER,
            &[
                ("conversation", conversation),
                ("server_name", server),
                ("tool_name", tool),
                ("result", result),
            ],
        )
    }

    /// System prompt of the executive summary call.
    pub fn executive_summary_system_prompt(&self) -> String {
        render(assets::EXECUTIVE_SUMMARY_SYSTEM, &[])
    }

    /// User prompt of the executive summary call.
    pub fn executive_summary_user_prompt(&self, final_analysis: &str) -> String {
        render(
            assets::EXECUTIVE_SUMMARY_USER,
            &[("final_analysis", final_analysis.trim())],
        )
    }
}

/// Describes tools for a ReAct prompt: one numbered entry per tool with its
/// description and parameters (name, type, required, description) read from
/// its JSON Schema. A schema that is not JSON is shown as given.
pub(crate) fn format_tool_descriptions(tools: &[ToolDefinition]) -> String {
    let mut out = String::new();
    for (i, tool) in tools.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let description = one_line(&tool.description);
        if description.is_empty() {
            out.push_str(&format!("{}. {}\n", i + 1, tool.name));
        } else {
            out.push_str(&format!("{}. {}: {}\n", i + 1, tool.name, description));
        }
        out.push_str(&describe_parameters(&tool.parameters_schema));
    }
    out.trim_end().to_string()
}

/// The conversation as plain text for a summarization prompt: every message
/// except system messages, labelled by role.
pub(crate) fn conversation_context(messages: &[ConversationMessage]) -> String {
    let mut parts = Vec::new();
    for message in messages {
        let label = match message.role {
            MessageRole::System => continue,
            MessageRole::User => "User".to_string(),
            MessageRole::Assistant => "Assistant".to_string(),
            MessageRole::Tool => match &message.tool_name {
                Some(name) => format!("Tool result ({name})"),
                None => "Tool result".to_string(),
            },
        };
        let mut text = message.content.trim().to_string();
        for call in &message.tool_calls {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!("[tool call] {}({})", call.name, call.arguments));
        }
        parts.push(format!("{label}: {text}"));
    }
    parts.join("\n\n")
}

fn describe_parameters(schema: &str) -> String {
    if schema.trim().is_empty() {
        return "   Parameters: none\n".to_string();
    }
    let Ok(value) = serde_json::from_str::<Value>(schema) else {
        return format!("   Parameters schema: {}\n", one_line(schema));
    };
    let required: Vec<&str> = value
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = value.get("properties").and_then(Value::as_object) else {
        return "   Parameters: none\n".to_string();
    };
    if properties.is_empty() {
        return "   Parameters: none\n".to_string();
    }
    let mut out = String::from("   Parameters:\n");
    for (name, prop) in properties {
        let kind = param_type(prop);
        let mut line = format!("   - {name} ({kind}");
        if required.contains(&name.as_str()) {
            line.push_str(", required");
        }
        line.push(')');
        if let Some(desc) = prop.get("description").and_then(Value::as_str) {
            let desc = one_line(desc);
            if !desc.is_empty() {
                line.push_str(": ");
                line.push_str(&desc);
            }
        }
        if let Some(values) = prop.get("enum").and_then(Value::as_array) {
            let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            line.push_str(&format!(" [one of: {}]", values.join(", ")));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn param_type(prop: &Value) -> String {
    match prop.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ => "any".to_string(),
    }
}

fn agent_name(input: &PromptInput) -> &str {
    if input.agent_name.trim().is_empty() {
        "an SRE agent"
    } else {
        input.agent_name.trim()
    }
}

fn alert_type(input: &PromptInput) -> &str {
    if input.alert_type.trim().is_empty() {
        "(unspecified)"
    } else {
        input.alert_type.trim()
    }
}

fn alert_data(input: &PromptInput) -> &str {
    if input.alert_data.trim().is_empty() {
        "(no alert data)"
    } else {
        input.alert_data.trim()
    }
}

/// Collapses whitespace runs (newlines included) to single spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn join(parts: Vec<String>) -> String {
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The forced conclusion's message, for a limit said as a sentence.
fn conclusion_prompt(limit: &str, strategy: IterationStrategy) -> String {
    let template = if strategy == IterationStrategy::React {
        assets::FORCED_CONCLUSION_REACT
    } else {
        assets::FORCED_CONCLUSION
    };
    render(template, &[("limit", limit)])
}
