//! Names that count as present even without a resource: the agents, MCP
//! servers and LLM providers that ship with TARSy (a resource of the same
//! name overrides one), as `tarsy-config` defines them
//! (`operator/config/src/builtin.rs`).

use std::collections::BTreeSet;

/// Names resolvable without a resource in the namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Builtins {
    /// Built-in agents (KubernetesAgent, ChatAgent, SynthesisAgent).
    pub agents: BTreeSet<String>,
    /// Built-in MCP servers (kubernetes-server).
    pub mcp_servers: BTreeSet<String>,
    /// Built-in LLM providers (google-default, ...).
    pub llm_providers: BTreeSet<String>,
}

impl Default for Builtins {
    /// `tarsy-config`'s built-ins.
    fn default() -> Self {
        use tarsy_config::builtin;
        Self {
            agents: builtin::agents().into_keys().collect(),
            mcp_servers: builtin::mcp_servers().into_keys().collect(),
            llm_providers: builtin::llm_providers().into_keys().collect(),
        }
    }
}
