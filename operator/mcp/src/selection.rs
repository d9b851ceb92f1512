//! Per-alert MCP selection overrides (an alert's `mcp_selection`): the
//! override *replaces* the agent's servers (never merges),
//! may restrict tools per server, and may override native tools. It is
//! validated when the alert is submitted (so the user gets a precise 400) and
//! again when the execution starts (configuration may have changed since).

use std::collections::BTreeSet;

use tarsy_core::{McpSelection, ToolFilter};

/// Native (provider-side) tools an override may switch on or off.
pub const NATIVE_TOOLS: [&str; 3] = ["google_search", "code_execution", "url_context"];

/// Why a selection override is invalid. The messages are meant for the API
/// user, as a 400 response body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// No server at all.
    #[error("mcp_selection.servers must list at least one MCP server")]
    Empty,
    /// A server entry without a name.
    #[error("mcp_selection.servers[{index}].name must not be empty")]
    EmptyName {
        /// Position in the list.
        index: usize,
    },
    /// Servers that are not configured.
    #[error(
        "mcp_selection references unknown MCP server{}: {} (available: {})",
        if unknown.len() > 1 { "s" } else { "" },
        quote_list(unknown),
        if known.is_empty() { "none".to_owned() } else { known.join(", ") }
    )]
    UnknownServers {
        /// The unknown names.
        unknown: Vec<String>,
        /// Configured servers.
        known: Vec<String>,
    },
    /// A server listed twice.
    #[error("mcp_selection lists MCP server '{0}' more than once")]
    Duplicate(String),
    /// An empty tool name in a server's tool list.
    #[error("mcp_selection.servers[{index}].tools must not contain empty names")]
    EmptyTool {
        /// Position of the server in the list.
        index: usize,
    },
    /// Unknown native tools.
    #[error(
        "mcp_selection.native_tools has unknown tool{}: {} (known: {})",
        if unknown.len() > 1 { "s" } else { "" },
        quote_list(unknown),
        NATIVE_TOOLS.join(", ")
    )]
    UnknownNativeTools {
        /// The unknown names.
        unknown: Vec<String>,
    },
}

fn quote_list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("'{i}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks an override against the configured servers.
pub fn validate_selection<'a>(
    selection: &McpSelection,
    known_servers: impl IntoIterator<Item = &'a str>,
) -> Result<(), SelectionError> {
    if selection.servers.is_empty() {
        return Err(SelectionError::Empty);
    }
    let known: BTreeSet<&str> = known_servers.into_iter().collect();
    let mut seen = BTreeSet::new();
    let mut unknown = Vec::new();
    for (index, server) in selection.servers.iter().enumerate() {
        let name = server.name.trim();
        if name.is_empty() {
            return Err(SelectionError::EmptyName { index });
        }
        if !seen.insert(name) {
            return Err(SelectionError::Duplicate(name.to_owned()));
        }
        if !known.contains(name) {
            unknown.push(name.to_owned());
        }
        if let Some(tools) = &server.tools
            && tools.iter().any(|t| t.trim().is_empty())
        {
            return Err(SelectionError::EmptyTool { index });
        }
    }
    if !unknown.is_empty() {
        return Err(SelectionError::UnknownServers {
            unknown,
            known: known.iter().map(|s| (*s).to_owned()).collect(),
        });
    }
    if let Some(native) = &selection.native_tools {
        let unknown: Vec<String> = native
            .keys()
            .filter(|k| !NATIVE_TOOLS.contains(&k.as_str()))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(SelectionError::UnknownNativeTools { unknown });
        }
    }
    Ok(())
}

/// The servers and tool filter an execution uses: the override's when there
/// is one (replace, not merge), otherwise the agent's own.
pub fn resolve_servers(
    selection: Option<&McpSelection>,
    agent_servers: &[String],
    agent_filter: &ToolFilter,
) -> (Vec<String>, ToolFilter) {
    match selection {
        Some(sel) => (
            sel.servers
                .iter()
                .map(|s| s.name.trim().to_owned())
                .collect(),
            sel.tool_filter(),
        ),
        None => (agent_servers.to_vec(), agent_filter.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tarsy_core::McpServerSelection;

    fn sel(json: &str) -> McpSelection {
        serde_json::from_str(json).unwrap()
    }

    const KNOWN: [&str; 3] = ["kubernetes", "prometheus", "time"];

    #[test]
    fn accepts_known_servers() {
        let s = sel(
            r#"{"servers":[{"name":"kubernetes","tools":["pods_list"]},{"name":"time"}],"native_tools":{"google_search":false}}"#,
        );
        assert_eq!(validate_selection(&s, KNOWN), Ok(()));
    }

    #[test]
    fn precise_messages() {
        let cases = [
            (
                r#"{"servers":[]}"#,
                "mcp_selection.servers must list at least one MCP server",
            ),
            (
                r#"{"servers":[{"name":"kubernetes"},{"name":"grafana"}]}"#,
                "mcp_selection references unknown MCP server: 'grafana' (available: kubernetes, prometheus, time)",
            ),
            (
                r#"{"servers":[{"name":"a"},{"name":"b"}]}"#,
                "mcp_selection references unknown MCP servers: 'a', 'b' (available: kubernetes, prometheus, time)",
            ),
            (
                r#"{"servers":[{"name":"time"},{"name":"time"}]}"#,
                "mcp_selection lists MCP server 'time' more than once",
            ),
            (
                r#"{"servers":[{"name":" "}]}"#,
                "mcp_selection.servers[0].name must not be empty",
            ),
            (
                r#"{"servers":[{"name":"time","tools":["x",""]}]}"#,
                "mcp_selection.servers[0].tools must not contain empty names",
            ),
            (
                r#"{"servers":[{"name":"time"}],"native_tools":{"web":true}}"#,
                "mcp_selection.native_tools has unknown tool: 'web' (known: google_search, code_execution, url_context)",
            ),
        ];
        for (json, message) in cases {
            let err = validate_selection(&sel(json), KNOWN).unwrap_err();
            assert_eq!(err.to_string(), message, "{json}");
        }
    }

    #[test]
    fn override_replaces_agent_servers() {
        let mut agent_filter = ToolFilter::new();
        agent_filter.insert("prometheus".into(), vec!["query".into()]);
        let agent = vec!["kubernetes".to_owned(), "prometheus".to_owned()];
        let s = McpSelection {
            servers: vec![McpServerSelection {
                name: "time".into(),
                tools: Some(vec!["get_current_time".into()]),
            }],
            native_tools: None,
        };
        let (servers, filter) = resolve_servers(Some(&s), &agent, &agent_filter);
        assert_eq!(servers, vec!["time"]);
        assert_eq!(filter.len(), 1);
        assert_eq!(filter["time"], vec!["get_current_time"]);
        let (servers, filter) = resolve_servers(None, &agent, &agent_filter);
        assert_eq!(servers, agent);
        assert_eq!(filter, agent_filter);
    }
}
