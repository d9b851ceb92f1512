//! Tool name routing: canonical `server.tool` names, the `server__tool` form
//! function-calling providers require, strict splitting and access checks
//! against the servers and tool filter of one execution.

use std::collections::BTreeSet;

use tarsy_core::ToolFilter;

/// Separator of canonical names.
pub const CANONICAL_SEPARATOR: char = '.';
/// Separator used in function names sent to providers that forbid dots.
pub const FUNCTION_SEPARATOR: &str = "__";

/// Why a tool name was refused. Shown to the model as the tool's result, so
/// the messages say what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The name does not have the `server.tool` form.
    #[error("invalid tool name '{0}': expected 'server.tool' (for example 'kubernetes.pods_list')")]
    InvalidName(String),
    /// The server is not one this execution may use.
    #[error("MCP server '{server}' is not available to this agent (available: {available})")]
    ServerNotAllowed {
        /// Requested server.
        server: String,
        /// Comma-separated allowed servers.
        available: String,
    },
    /// The tool filter does not include the tool.
    #[error(
        "tool '{tool}' of MCP server '{server}' is not allowed for this agent (allowed: {allowed})"
    )]
    ToolNotAllowed {
        /// Server.
        server: String,
        /// Requested tool.
        tool: String,
        /// Comma-separated allowed tools.
        allowed: String,
    },
}

/// Maps a function-calling name back to the canonical form: `server__tool` →
/// `server.tool`. Names that already have a dot are left alone.
pub fn normalize_tool_name(name: &str) -> String {
    let name = name.trim();
    if name.contains(CANONICAL_SEPARATOR) {
        return name.to_owned();
    }
    name.replacen(FUNCTION_SEPARATOR, ".", 1)
}

/// The function-calling form of a canonical name: `server.tool` →
/// `server__tool`.
pub fn to_function_name(canonical: &str) -> String {
    canonical.replacen(CANONICAL_SEPARATOR, FUNCTION_SEPARATOR, 1)
}

/// Builds the canonical name.
pub fn canonical_name(server: &str, tool: &str) -> String {
    format!("{server}{CANONICAL_SEPARATOR}{tool}")
}

fn valid_server(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !s.starts_with(['.', '-'])
        && !s.ends_with('.')
}

fn valid_tool(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 128
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

/// Splits a (normalized) name into server and tool. When a known server name
/// itself contains dots, the longest known server prefix wins; otherwise the
/// name splits at its first dot.
pub fn split_tool_name<'a>(
    name: &'a str,
    known_servers: impl IntoIterator<Item = &'a str>,
) -> Result<(&'a str, &'a str), RouteError> {
    let invalid = || RouteError::InvalidName(name.to_owned());
    let by_known = known_servers
        .into_iter()
        .filter(|s| {
            name.len() > s.len() + 1
                && name.starts_with(*s)
                && name[s.len()..].starts_with(CANONICAL_SEPARATOR)
        })
        .max_by_key(|s| s.len());
    let (server, tool) = match by_known {
        Some(server) => (server, &name[server.len() + 1..]),
        None => name.split_once(CANONICAL_SEPARATOR).ok_or_else(invalid)?,
    };
    if !valid_server(server) || !valid_tool(tool) {
        return Err(invalid());
    }
    Ok((server, tool))
}

/// The servers and tool filter one execution may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolAccess {
    servers: BTreeSet<String>,
    filter: ToolFilter,
}

impl ToolAccess {
    /// Access to `servers`, restricted per server by `filter` (a server absent
    /// from the filter, or with an empty list, exposes all its tools).
    pub fn new(servers: impl IntoIterator<Item = String>, filter: ToolFilter) -> Self {
        Self {
            servers: servers.into_iter().collect(),
            filter,
        }
    }

    /// Allowed servers, sorted.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.servers.iter().map(String::as_str)
    }

    /// Whether the server may be used.
    pub fn server_allowed(&self, server: &str) -> bool {
        self.servers.contains(server)
    }

    /// Whether the tool of an allowed server passes the filter.
    pub fn tool_allowed(&self, server: &str, tool: &str) -> bool {
        self.server_allowed(server)
            && match self.filter.get(server) {
                Some(tools) if !tools.is_empty() => tools.iter().any(|t| t == tool),
                _ => true,
            }
    }

    /// The tools the filter names for `server` that are not among `offered`
    /// (a misspelt or removed tool: the restriction would leave nothing).
    pub fn unknown_tools<'a>(
        &'a self,
        server: &str,
        offered: &'a [String],
    ) -> impl Iterator<Item = &'a str> + 'a {
        self.filter
            .get(server)
            .into_iter()
            .flatten()
            .filter(move |t| !offered.contains(t))
            .map(String::as_str)
    }

    /// Normalizes, splits and checks a tool name from the model; returns
    /// `(server, tool)`.
    pub fn resolve(&self, name: &str) -> Result<(String, String), RouteError> {
        let normalized = normalize_tool_name(name);
        let (server, tool) = split_tool_name(&normalized, self.servers())?;
        if !self.server_allowed(server) {
            return Err(RouteError::ServerNotAllowed {
                server: server.to_owned(),
                available: join_or_none(self.servers()),
            });
        }
        if !self.tool_allowed(server, tool) {
            let allowed = self
                .filter
                .get(server)
                .map(|t| join_or_none(t.iter().map(String::as_str)))
                .unwrap_or_default();
            return Err(RouteError::ToolNotAllowed {
                server: server.to_owned(),
                tool: tool.to_owned(),
                allowed,
            });
        }
        Ok((server.to_owned(), tool.to_owned()))
    }
}

fn join_or_none<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let joined = items.collect::<Vec<_>>().join(", ");
    if joined.is_empty() {
        "none".to_owned()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access() -> ToolAccess {
        let mut filter = ToolFilter::new();
        filter.insert(
            "kubernetes".into(),
            vec!["pods_list".into(), "pods_log".into()],
        );
        filter.insert("time".into(), vec![]);
        ToolAccess::new(
            ["kubernetes".into(), "time".into(), "my.server".into()],
            filter,
        )
    }

    #[test]
    fn normalization_round_trips() {
        assert_eq!(
            normalize_tool_name("kubernetes__pods_list"),
            "kubernetes.pods_list"
        );
        assert_eq!(
            normalize_tool_name("kubernetes.pods_list"),
            "kubernetes.pods_list"
        );
        // Only the first separator: tool names may contain double underscores.
        assert_eq!(normalize_tool_name("srv__get__all"), "srv.get__all");
        assert_eq!(normalize_tool_name(" time.now "), "time.now");
        assert_eq!(
            to_function_name("kubernetes.pods_list"),
            "kubernetes__pods_list"
        );
        assert_eq!(
            normalize_tool_name(&to_function_name("prom-1.query_range")),
            "prom-1.query_range"
        );
    }

    #[test]
    fn split_is_strict() {
        let none: [&str; 0] = [];
        assert_eq!(split_tool_name("a.b", none).unwrap(), ("a", "b"));
        assert_eq!(split_tool_name("a.b.c", none).unwrap(), ("a", "b.c"));
        for bad in [
            "",
            "nodot",
            ".tool",
            "server.",
            "ser ver.tool",
            "srv.to ol",
            "srv.tool;rm",
        ] {
            assert!(
                matches!(split_tool_name(bad, none), Err(RouteError::InvalidName(_))),
                "{bad:?} should be invalid"
            );
        }
    }

    #[test]
    fn known_dotted_servers_win() {
        assert_eq!(
            split_tool_name("my.server.tool", ["my", "my.server"]).unwrap(),
            ("my.server", "tool")
        );
    }

    #[test]
    fn resolve_enforces_servers_and_filters() {
        let a = access();
        assert_eq!(
            a.resolve("kubernetes__pods_list").unwrap(),
            ("kubernetes".to_owned(), "pods_list".to_owned())
        );
        assert_eq!(
            a.resolve("time.get_current_time").unwrap(),
            ("time".to_owned(), "get_current_time".to_owned())
        );
        assert_eq!(
            a.resolve("my.server.x").unwrap(),
            ("my.server".to_owned(), "x".to_owned())
        );
        let err = a.resolve("kubernetes.secrets_get").unwrap_err();
        assert_eq!(
            err.to_string(),
            "tool 'secrets_get' of MCP server 'kubernetes' is not allowed for this agent (allowed: pods_list, pods_log)"
        );
        let err = a.resolve("prometheus.query").unwrap_err();
        assert_eq!(
            err.to_string(),
            "MCP server 'prometheus' is not available to this agent (available: kubernetes, my.server, time)"
        );
        assert!(matches!(
            a.resolve("pods_list"),
            Err(RouteError::InvalidName(_))
        ));
    }
}
