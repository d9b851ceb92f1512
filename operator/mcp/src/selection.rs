//! Per-alert MCP selection overrides (an alert's `mcp_selection`): the
//! override *replaces* the agent's servers (never merges),
//! may restrict tools per server, and may override native tools. It is
//! validated ([`McpSelection::validate`]) when the alert is submitted (so the
//! submitter gets a precise refusal) and again when the execution starts
//! (configuration may have changed since).

use tarsy_core::{McpSelection, ToolFilter};

/// The servers and tool filter an execution uses: the override's when there
/// is one (replace, not merge), otherwise the agent's own.
pub fn resolve_servers(
    selection: Option<&McpSelection>,
    agent_servers: &[String],
    agent_filter: &ToolFilter,
) -> (Vec<String>, ToolFilter) {
    match selection {
        Some(sel) => (sel.server_names(), sel.tool_filter()),
        None => (agent_servers.to_vec(), agent_filter.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tarsy_core::McpServerSelection;

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
