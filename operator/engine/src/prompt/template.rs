//! The prompt text assets and the tiny `{{name}}` substitution that fills them.
//!
//! Every prompt TARSy sends lives as a Markdown file in the crate's `prompts/`
//! directory, compiled in with `include_str!`, so prompt wording can be
//! reviewed and changed without touching code.

/// Prompt assets, compiled into the binary.
pub(crate) mod assets {
    /// Tier 1 of an investigation system prompt (`agent_name`).
    pub const GENERAL_SRE: &str = include_str!("../../prompts/general_sre.md");
    /// Tier 1 of a chat system prompt (`agent_name`).
    pub const GENERAL_CHAT: &str = include_str!("../../prompts/general_chat.md");
    /// Tier 2: one MCP server's instructions (`server_name`, `instructions`).
    pub const MCP_SERVER_INSTRUCTIONS: &str =
        include_str!("../../prompts/mcp_server_instructions.md");
    /// Tier 3: the agent's custom instructions (`instructions`).
    pub const CUSTOM_INSTRUCTIONS: &str = include_str!("../../prompts/custom_instructions.md");
    /// Warning about MCP servers that failed to start (`servers`).
    pub const FAILED_SERVERS_WARNING: &str =
        include_str!("../../prompts/failed_servers_warning.md");
    /// How to use tools with function calling.
    pub const FUNCTION_CALLING_FOCUS: &str =
        include_str!("../../prompts/function_calling_focus.md");
    /// ReAct format instructions and tool list (`tools`).
    pub const REACT_FORMAT: &str = include_str!("../../prompts/react_format.md");
    /// Replaces the tool list when a ReAct agent has no tools.
    pub const REACT_NO_TOOLS: &str = include_str!("../../prompts/react_no_tools.md");
    /// Alert section of the investigation user message (`alert_type`, `alert_data`).
    pub const INVESTIGATION_USER: &str = include_str!("../../prompts/investigation_user.md");
    /// Runbook section (`runbook`).
    pub const RUNBOOK_SECTION: &str = include_str!("../../prompts/runbook_section.md");
    /// Previous-stage context section (`context`).
    pub const PREVIOUS_STAGES_SECTION: &str =
        include_str!("../../prompts/previous_stages_section.md");
    /// Closing task of the investigation user message.
    pub const INVESTIGATION_TASK: &str = include_str!("../../prompts/investigation_task.md");
    /// Chat user message (`investigation`, `question`).
    pub const CHAT_USER: &str = include_str!("../../prompts/chat_user.md");
    /// Synthesis system prompt (`agent_name`).
    pub const SYNTHESIS_SYSTEM: &str = include_str!("../../prompts/synthesis_system.md");
    /// Synthesis user message (`alert_type`, `alert_data`, `investigations`).
    pub const SYNTHESIS_USER: &str = include_str!("../../prompts/synthesis_user.md");
    /// Forced conclusion for function calling (`limit`).
    pub const FORCED_CONCLUSION: &str = include_str!("../../prompts/forced_conclusion.md");
    /// Forced conclusion for ReAct (`limit`).
    pub const FORCED_CONCLUSION_REACT: &str =
        include_str!("../../prompts/forced_conclusion_react.md");
    /// Tool result summarization system prompt (`server_name`, `tool_name`, `max_tokens`).
    pub const SUMMARIZATION_SYSTEM: &str = include_str!("../../prompts/summarization_system.md");
    /// Tool result summarization user prompt (`conversation`, `server_name`, `tool_name`, `result`).
    pub const SUMMARIZATION_USER: &str = include_str!("../../prompts/summarization_user.md");
    /// Executive summary system prompt.
    pub const EXECUTIVE_SUMMARY_SYSTEM: &str =
        include_str!("../../prompts/executive_summary_system.md");
    /// Executive summary user prompt (`final_analysis`).
    pub const EXECUTIVE_SUMMARY_USER: &str =
        include_str!("../../prompts/executive_summary_user.md");
    /// ReAct format reminder appended to format error feedback.
    pub const REACT_FORMAT_REMINDER: &str = include_str!("../../prompts/react_format_reminder.md");
    /// ReAct continuation prompt (`goal`).
    pub const REACT_CONTINUATION: &str = include_str!("../../prompts/react_continuation.md");
    /// Runbook used when an alert has none, or fetching it failed.
    pub const DEFAULT_RUNBOOK: &str = include_str!("../../prompts/default_runbook.md");

    /// Every asset with its file name (tests check them all).
    #[cfg(test)]
    pub const ALL: &[(&str, &str)] = &[
        ("general_sre.md", GENERAL_SRE),
        ("general_chat.md", GENERAL_CHAT),
        ("mcp_server_instructions.md", MCP_SERVER_INSTRUCTIONS),
        ("custom_instructions.md", CUSTOM_INSTRUCTIONS),
        ("failed_servers_warning.md", FAILED_SERVERS_WARNING),
        ("function_calling_focus.md", FUNCTION_CALLING_FOCUS),
        ("react_format.md", REACT_FORMAT),
        ("react_no_tools.md", REACT_NO_TOOLS),
        ("investigation_user.md", INVESTIGATION_USER),
        ("runbook_section.md", RUNBOOK_SECTION),
        ("previous_stages_section.md", PREVIOUS_STAGES_SECTION),
        ("investigation_task.md", INVESTIGATION_TASK),
        ("chat_user.md", CHAT_USER),
        ("synthesis_system.md", SYNTHESIS_SYSTEM),
        ("synthesis_user.md", SYNTHESIS_USER),
        ("forced_conclusion.md", FORCED_CONCLUSION),
        ("forced_conclusion_react.md", FORCED_CONCLUSION_REACT),
        ("summarization_system.md", SUMMARIZATION_SYSTEM),
        ("summarization_user.md", SUMMARIZATION_USER),
        ("executive_summary_system.md", EXECUTIVE_SUMMARY_SYSTEM),
        ("executive_summary_user.md", EXECUTIVE_SUMMARY_USER),
        ("react_format_reminder.md", REACT_FORMAT_REMINDER),
        ("react_continuation.md", REACT_CONTINUATION),
        ("default_runbook.md", DEFAULT_RUNBOOK),
    ];
}

/// Fills `{{name}}` placeholders of `template` from `vars` and trims the
/// result.
///
/// Substitution is a single left-to-right pass: text that comes *from* a
/// variable is never scanned again, so alert data or tool output containing
/// `{{...}}` is passed through untouched instead of being expanded.
/// Placeholders with no matching variable are kept verbatim (a test checks
/// that every asset's placeholders are supplied by its caller).
pub(crate) fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out =
        String::with_capacity(template.len() + vars.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after_open = &rest[start + 2..];
        match after_open.find("}}") {
            Some(end) => {
                let name = after_open[..end].trim();
                match vars.iter().find(|(k, _)| *k == name) {
                    Some((_, value)) => out.push_str(value),
                    None => out.push_str(&rest[start..start + 2 + end + 2]),
                }
                rest = &after_open[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out.trim().to_string()
}

/// Names of the `{{name}}` placeholders a template uses, in order of first use.
#[cfg(test)]
fn placeholders(template: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after_open = &rest[start + 2..];
        let Some(end) = after_open.find("}}") else {
            break;
        };
        let name = after_open[..end].trim().to_string();
        if !names.contains(&name) {
            names.push(name);
        }
        rest = &after_open[end + 2..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_placeholders_with_and_without_inner_spaces() {
        assert_eq!(
            render("a {{x}} b {{ y }} c", &[("x", "1"), ("y", "2")]),
            "a 1 b 2 c"
        );
    }

    #[test]
    fn substituted_text_is_not_expanded_again() {
        let out = render(
            "data: {{data}}",
            &[("data", "{{data}} and {{other}}"), ("other", "X")],
        );
        assert_eq!(out, "data: {{data}} and {{other}}");
    }

    #[test]
    fn unknown_and_unterminated_placeholders_are_kept() {
        assert_eq!(
            render("{{missing}} {{x}} {{open", &[("x", "1")]),
            "{{missing}} 1 {{open"
        );
    }

    #[test]
    fn lists_placeholders_once_in_order() {
        assert_eq!(placeholders("{{b}} {{a}} {{ b }}"), vec!["b", "a"]);
    }

    #[test]
    fn every_asset_is_non_empty_and_has_well_formed_placeholders() {
        for (name, text) in assets::ALL {
            assert!(!text.trim().is_empty(), "{name} is empty");
            for p in placeholders(text) {
                assert!(
                    !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                    "{name} has a malformed placeholder {p:?}"
                );
            }
        }
    }
}
