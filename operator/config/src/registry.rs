//! The configuration registries: agents, chains, MCP servers and LLM
//! providers by name, built-ins included, plus the system defaults.

use std::collections::BTreeMap;

use crate::model::{AgentSpec, ChainSpec, LLMProviderSpec, MCPServerSpec};

use crate::builtin;
use crate::defaults::Defaults;
use crate::error::{Location, ObjectRef};

/// Where a definition came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Shipped with TARSy.
    Builtin,
    /// A local manifest file (as named to the loader).
    File(String),
    /// A resource read from the cluster.
    Cluster,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Builtin => f.write_str("built-in"),
            Origin::File(file) => f.write_str(file),
            Origin::Cluster => f.write_str("cluster"),
        }
    }
}

/// A named definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Named<T> {
    /// `metadata.name` (or the built-in name).
    pub name: String,
    /// The definition.
    pub spec: T,
    /// Where it came from.
    pub origin: Origin,
}

impl<T> Named<T> {
    /// A definition named `name`.
    pub fn new(name: impl Into<String>, spec: T, origin: Origin) -> Self {
        Self {
            name: name.into(),
            spec,
            origin,
        }
    }

    /// Error location of this object (`file: Kind "name"`).
    pub fn location(&self, kind: &str) -> Location {
        let file = match &self.origin {
            Origin::File(f) => Some(f.clone()),
            _ => None,
        };
        Location {
            file,
            object: Some(ObjectRef::new(kind, &self.name)),
            field: None,
        }
    }
}

/// The whole configuration: defaults and the four registries.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// System defaults.
    pub defaults: Defaults,
    pub(crate) agents: BTreeMap<String, Named<AgentSpec>>,
    pub(crate) chains: BTreeMap<String, Named<ChainSpec>>,
    pub(crate) mcp_servers: BTreeMap<String, Named<MCPServerSpec>>,
    pub(crate) llm_providers: BTreeMap<String, Named<LLMProviderSpec>>,
}

impl Config {
    /// Only the built-in definitions, with `defaults`.
    pub fn builtin(defaults: Defaults) -> Self {
        fn named<T>(m: BTreeMap<String, T>) -> BTreeMap<String, Named<T>> {
            m.into_iter()
                .map(|(k, v)| (k.clone(), Named::new(k, v, Origin::Builtin)))
                .collect()
        }
        Self {
            defaults,
            agents: named(builtin::agents()),
            chains: BTreeMap::new(),
            mcp_servers: named(builtin::mcp_servers()),
            llm_providers: named(builtin::llm_providers()),
        }
    }

    /// Cluster mode's starting point: the built-ins, with the MCP servers in
    /// their cluster form ([`builtin::cluster_mcp_servers`]). The
    /// namespace's resources are inserted over it (`tarsy-crds`).
    pub fn for_cluster(defaults: Defaults) -> Self {
        let mut config = Self::builtin(defaults);
        for (name, spec) in builtin::cluster_mcp_servers(&config.defaults.kubernetes_mcp_image) {
            config.insert_mcp_server(Named::new(name, spec, Origin::Builtin));
        }
        config
    }

    /// Adds or replaces (a built-in, say) an agent; returns the replaced one.
    pub fn insert_agent(&mut self, agent: Named<AgentSpec>) -> Option<Named<AgentSpec>> {
        self.agents.insert(agent.name.clone(), agent)
    }

    /// Adds or replaces a chain; returns the replaced one.
    pub fn insert_chain(&mut self, chain: Named<ChainSpec>) -> Option<Named<ChainSpec>> {
        self.chains.insert(chain.name.clone(), chain)
    }

    /// Adds or replaces an MCP server; returns the replaced one.
    pub fn insert_mcp_server(
        &mut self,
        server: Named<MCPServerSpec>,
    ) -> Option<Named<MCPServerSpec>> {
        self.mcp_servers.insert(server.name.clone(), server)
    }

    /// Adds or replaces an LLM provider; returns the replaced one.
    pub fn insert_llm_provider(
        &mut self,
        provider: Named<LLMProviderSpec>,
    ) -> Option<Named<LLMProviderSpec>> {
        self.llm_providers.insert(provider.name.clone(), provider)
    }

    /// An agent definition by name (or by a built-in's alias,
    /// [`builtin::AGENT_ALIASES`]).
    pub fn agent(&self, name: &str) -> Option<&Named<AgentSpec>> {
        self.agents.get(name).or_else(|| {
            let (_, canonical) = builtin::AGENT_ALIASES
                .iter()
                .find(|(alias, _)| *alias == name)?;
            self.agents.get(*canonical)
        })
    }

    /// How the agent `reference` names is called in prompts, records and the
    /// dashboard: its `displayName`, else its name; the reference itself
    /// when no agent has that name (the execution then fails to resolve,
    /// under that label).
    pub fn agent_label(&self, reference: &str) -> String {
        match self.agent(reference) {
            Some(agent) => agent
                .spec
                .display_name
                .clone()
                .unwrap_or_else(|| agent.name.clone()),
            None => reference.to_string(),
        }
    }

    /// A chain by name.
    pub fn chain(&self, name: &str) -> Option<&Named<ChainSpec>> {
        self.chains.get(name)
    }

    /// An MCP server definition by name.
    pub fn mcp_server(&self, name: &str) -> Option<&Named<MCPServerSpec>> {
        self.mcp_servers.get(name)
    }

    /// An LLM provider definition by name.
    pub fn llm_provider(&self, name: &str) -> Option<&Named<LLMProviderSpec>> {
        self.llm_providers.get(name)
    }

    /// Every agent, by name.
    pub fn agents(&self) -> impl Iterator<Item = &Named<AgentSpec>> {
        self.agents.values()
    }

    /// Every chain, by name.
    pub fn chains(&self) -> impl Iterator<Item = &Named<ChainSpec>> {
        self.chains.values()
    }

    /// Every MCP server, by name.
    pub fn mcp_servers(&self) -> impl Iterator<Item = &Named<MCPServerSpec>> {
        self.mcp_servers.values()
    }

    /// Every LLM provider, by name.
    pub fn llm_providers(&self) -> impl Iterator<Item = &Named<LLMProviderSpec>> {
        self.llm_providers.values()
    }

    pub(crate) fn known_agents(&self) -> String {
        self.agents.keys().cloned().collect::<Vec<_>>().join(", ")
    }

    pub(crate) fn known_mcp_servers(&self) -> String {
        self.mcp_servers
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub(crate) fn known_llm_providers(&self) -> String {
        self.llm_providers
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }
}
