//! What a valid alert is, in the words every entry point uses: the limits,
//! the typed refusal ([`InvalidAlert`]) whose messages the REST API, the
//! admission webhook and the Alertmanager bridge all return, and the rules of
//! a per-alert MCP selection (the MCP client checks a selection again when an
//! execution starts, so they live with the selection type).
//!
//! The rules needing the configuration (chain resolution, which MCP servers
//! exist) are `tarsy_config::alert`'s, which applies all of them.
//!
//! Messages name no entry point's spelling of a field (`alert_type`,
//! `spec.alertType`): the same refusal reads the same everywhere.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::{McpSelection, NATIVE_TOOL_NAMES};

/// Largest alert payload, in bytes (1 MiB). Larger alerts are refused
/// (HTTP 413 by the API), never truncated.
pub const MAX_ALERT_DATA_BYTES: usize = 1024 * 1024;

/// Longest alert type or chain name, in characters: the bound of a
/// Kubernetes name, which the Alert resource's fields share.
pub const MAX_NAME_CHARS: usize = 253;

/// Longest runbook URL, in characters (the Alert resource's bound).
pub const MAX_RUNBOOK_URL_CHARS: usize = 2048;

/// How many names a message lists before it only counts the rest.
const LISTED_NAMES: usize = 20;

/// Why an alert is not valid. The first rule it breaks, in this order:
/// alert type, chain name, data, runbook URL, chain resolution, MCP
/// selection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidAlert {
    /// The alert type is empty or blank.
    #[error("alert type must not be empty")]
    EmptyAlertType,
    /// The alert type is longer than [`MAX_NAME_CHARS`].
    #[error("alert type is {chars} characters long; at most {MAX_NAME_CHARS} are allowed")]
    AlertTypeTooLong {
        /// Its length in characters.
        chars: usize,
    },
    /// The chain name is longer than [`MAX_NAME_CHARS`] (it is not quoted
    /// back).
    #[error("chain name is {chars} characters long; at most {MAX_NAME_CHARS} are allowed")]
    ChainNameTooLong {
        /// Its length in characters.
        chars: usize,
    },
    /// The data is empty or blank: the agents would have nothing to work on.
    #[error("alert data must not be empty")]
    EmptyData,
    /// The data is larger than [`MAX_ALERT_DATA_BYTES`] (the API answers 413).
    #[error("alert data is {bytes} bytes; the limit is {MAX_ALERT_DATA_BYTES} bytes")]
    DataTooLarge {
        /// Its size in bytes.
        bytes: usize,
    },
    /// The runbook URL is not `http://` or `https://` (it is not quoted
    /// back: it may carry a credential).
    #[error("runbook URL must be an http:// or https:// URL")]
    RunbookUrlScheme,
    /// The runbook URL is longer than [`MAX_RUNBOOK_URL_CHARS`].
    #[error("runbook URL is {chars} characters long; at most {MAX_RUNBOOK_URL_CHARS} are allowed")]
    RunbookUrlTooLong {
        /// Its length in characters.
        chars: usize,
    },
    /// The named chain does not exist.
    #[error("unknown chain {name:?} (known: {known})")]
    UnknownChain {
        /// The name given.
        name: String,
        /// The chains that exist, as a list for the message.
        known: String,
    },
    /// No chain was named and none handles the alert type.
    #[error(
        "no chain handles alert type {alert_type:?} (known alert types: {known}); add it to a chain's alertTypes or name the chain to run"
    )]
    NoChainForAlertType {
        /// The alert type.
        alert_type: String,
        /// The alert types some chain handles, as a list for the message.
        known: String,
    },
    /// No chain was named and several handle the alert type.
    #[error("alert type {alert_type:?} is handled by several chains ({}); name the chain to run", chains.join(", "))]
    AmbiguousAlertType {
        /// The alert type.
        alert_type: String,
        /// The chains handling it, sorted.
        chains: Vec<String>,
    },
    /// The MCP selection breaks a rule.
    #[error(transparent)]
    McpSelection(#[from] SelectionError),
}

/// Why a per-alert MCP selection cannot be used. Field paths are relative to
/// the selection, whose `servers` and `tools` every entry point spells alike.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectionError {
    /// The selection lists no server.
    #[error("MCP selection: servers: at least one MCP server is required")]
    Empty,
    /// A server entry has an empty or blank name.
    #[error("MCP selection: servers[{index}].name: must not be empty")]
    EmptyName {
        /// 0-based position.
        index: usize,
    },
    /// A server does not exist.
    #[error("MCP selection: servers[{index}].name: unknown MCP server {name:?} (known: {known})")]
    UnknownServer {
        /// 0-based position.
        index: usize,
        /// The name.
        name: String,
        /// The servers that exist, as a list for the message.
        known: String,
    },
    /// A server is listed twice.
    #[error("MCP selection: servers[{index}].name: MCP server {name:?} is listed twice")]
    Duplicate {
        /// 0-based position of the second occurrence.
        index: usize,
        /// The name.
        name: String,
    },
    /// An empty or blank tool name.
    #[error("MCP selection: servers[{index}].tools[{tool}]: tool names must not be empty")]
    EmptyTool {
        /// Server position.
        index: usize,
        /// Tool position.
        tool: usize,
    },
    /// Tools the server is known not to offer (see [`ToolCatalog`]).
    #[error(
        "MCP selection: servers[{index}].tools: MCP server {name:?} has no tool {} (it offers: {offered})",
        quoted(unknown)
    )]
    UnknownTool {
        /// Server position.
        index: usize,
        /// The server.
        name: String,
        /// The tools it does not offer, in the selection's order.
        unknown: Vec<String>,
        /// The tools it offers, as a list for the message.
        offered: String,
    },
    /// An unknown native tool.
    #[error("MCP selection: unknown native tool {name:?} (known: {})", NATIVE_TOOL_NAMES.join(", "))]
    UnknownNativeTool {
        /// The name.
        name: String,
    },
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `names` as a message lists them: comma-separated, at most 20 and then a
/// count of the rest, `none` when there are none.
pub fn name_list<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> String {
    let names: Vec<S> = names.into_iter().collect();
    if names.is_empty() {
        return "none".into();
    }
    let mut text = names
        .iter()
        .take(LISTED_NAMES)
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > LISTED_NAMES {
        text.push_str(&format!(", … {} more", names.len() - LISTED_NAMES));
    }
    text
}

/// The tools MCP servers are known to offer (local mode: as the health
/// monitor last listed them; cluster mode: as MCPServers' `lastHealth` lists
/// them). A server whose tools are unknown is not checked; an unknown tool
/// then shows on the execution's timeline.
pub trait ToolCatalog: Send + Sync {
    /// The tool names of `server`, if known.
    fn tool_names(&self, server: &str) -> Option<Vec<String>>;
}

/// Knows no tools (nothing is checked).
pub struct NoToolCatalog;

impl ToolCatalog for NoToolCatalog {
    fn tool_names(&self, _: &str) -> Option<Vec<String>> {
        None
    }
}

/// Tool names by server; an empty list counts as unknown (a server that
/// never listed its tools).
impl ToolCatalog for BTreeMap<String, Vec<String>> {
    fn tool_names(&self, server: &str) -> Option<Vec<String>> {
        self.get(server).filter(|t| !t.is_empty()).cloned()
    }
}

impl McpSelection {
    /// Checks the selection against the MCP servers that exist (`known`): at
    /// least one server, each named, known and listed once, no empty tool
    /// name, known native tools. Returns the first problem.
    pub fn validate<'a>(
        &self,
        known: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), SelectionError> {
        if self.servers.is_empty() {
            return Err(SelectionError::Empty);
        }
        let known: BTreeSet<&str> = known.into_iter().collect();
        let mut seen = BTreeSet::new();
        for (index, server) in self.servers.iter().enumerate() {
            if server.name.trim().is_empty() {
                return Err(SelectionError::EmptyName { index });
            }
            if !known.contains(server.name.as_str()) {
                return Err(SelectionError::UnknownServer {
                    index,
                    name: server.name.clone(),
                    known: name_list(&known),
                });
            }
            if !seen.insert(server.name.as_str()) {
                return Err(SelectionError::Duplicate {
                    index,
                    name: server.name.clone(),
                });
            }
            if let Some(tool) = server
                .tools
                .iter()
                .flatten()
                .position(|t| t.trim().is_empty())
            {
                return Err(SelectionError::EmptyTool { index, tool });
            }
        }
        if let Some(name) = self
            .native_tools
            .iter()
            .flat_map(BTreeMap::keys)
            .find(|k| !NATIVE_TOOL_NAMES.contains(&k.as_str()))
        {
            return Err(SelectionError::UnknownNativeTool { name: name.clone() });
        }
        Ok(())
    }

    /// Refuses tools a server is known not to offer (per `catalog`), naming
    /// them and what the server offers.
    pub fn check_tools(&self, catalog: &dyn ToolCatalog) -> Result<(), SelectionError> {
        for (index, server) in self.servers.iter().enumerate() {
            let Some(wanted) = server.tools.as_ref().filter(|t| !t.is_empty()) else {
                continue;
            };
            let Some(mut offered) = catalog.tool_names(&server.name) else {
                continue;
            };
            let unknown: Vec<String> = wanted
                .iter()
                .filter(|t| !offered.contains(t))
                .cloned()
                .collect();
            if !unknown.is_empty() {
                offered.sort();
                return Err(SelectionError::UnknownTool {
                    index,
                    name: server.name.clone(),
                    unknown,
                    offered: name_list(&offered),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection(json: &str) -> McpSelection {
        serde_json::from_str(json).expect("a selection")
    }

    #[test]
    fn selection_rules_report_the_first_problem_precisely() {
        let known = ["kubernetes", "prometheus"];
        let cases = [
            (
                r#"{"servers": []}"#,
                "MCP selection: servers: at least one MCP server is required",
            ),
            (
                r#"{"servers": [{"name": "kubernetes"}, {"name": " "}]}"#,
                "MCP selection: servers[1].name: must not be empty",
            ),
            (
                r#"{"servers": [{"name": "kubernetes"}, {"name": "grafana"}]}"#,
                "MCP selection: servers[1].name: unknown MCP server \"grafana\" (known: kubernetes, prometheus)",
            ),
            (
                r#"{"servers": [{"name": "prometheus"}, {"name": "prometheus"}]}"#,
                "MCP selection: servers[1].name: MCP server \"prometheus\" is listed twice",
            ),
            (
                r#"{"servers": [{"name": "prometheus", "tools": ["query", ""]}]}"#,
                "MCP selection: servers[0].tools[1]: tool names must not be empty",
            ),
            (
                r#"{"servers": [{"name": "prometheus"}], "native_tools": {"web": true}}"#,
                "MCP selection: unknown native tool \"web\" (known: google_search, code_execution, url_context)",
            ),
        ];
        for (json, message) in cases {
            let err = selection(json).validate(known).unwrap_err();
            assert_eq!(err.to_string(), message, "{json}");
        }
        let ok = selection(
            r#"{"servers": [{"name": "kubernetes", "tools": ["pods_list"]}], "native_tools": {"google_search": false}}"#,
        );
        assert_eq!(ok.validate(known), Ok(()));
    }

    #[test]
    fn tools_are_checked_only_where_known() {
        let catalog = BTreeMap::from([
            (
                "prometheus".to_string(),
                vec!["query_range".into(), "query".into()],
            ),
            ("silent".to_string(), Vec::new()),
        ]);
        let typo =
            selection(r#"{"servers": [{"name": "prometheus", "tools": ["query", "query_rang"]}]}"#);
        assert_eq!(
            typo.check_tools(&catalog).unwrap_err().to_string(),
            "MCP selection: servers[0].tools: MCP server \"prometheus\" has no tool \"query_rang\" (it offers: query, query_range)"
        );
        assert_eq!(typo.check_tools(&NoToolCatalog), Ok(()));
        let unlisted = selection(r#"{"servers": [{"name": "silent", "tools": ["anything"]}]}"#);
        assert_eq!(unlisted.check_tools(&catalog), Ok(()));
    }

    #[test]
    fn name_lists_are_bounded() {
        assert_eq!(name_list(Vec::<String>::new()), "none");
        assert_eq!(name_list(["a", "b"]), "a, b");
        let many: Vec<String> = (0..25).map(|i| format!("n{i}")).collect();
        assert!(
            name_list(&many).ends_with("n19, … 5 more"),
            "{}",
            name_list(&many)
        );
    }
}
