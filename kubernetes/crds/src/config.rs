//! Cluster mode's configuration: a namespace's resources as a
//! [`tarsy_config::Config`], and what their statuses tell about tools.

use std::collections::BTreeMap;

use tarsy_config::{Config, Defaults, Named, Origin};

use crate::{Agent, Chain, LLMProvider, MCPServer};

/// The built-ins (MCP servers in their cluster form) overridden by the
/// resources of one namespace. Call [`Config::validate`] to learn which
/// objects are broken.
pub fn from_resources(
    defaults: Defaults,
    chains: &[Chain],
    agents: &[Agent],
    mcp_servers: &[MCPServer],
    llm_providers: &[LLMProvider],
) -> Config {
    fn named<T: Clone>(name: &Option<String>, spec: &T) -> Named<T> {
        Named::new(
            name.clone().unwrap_or_default(),
            spec.clone(),
            Origin::Cluster,
        )
    }
    let mut config = Config::for_cluster(defaults);
    for c in chains {
        config.insert_chain(named(&c.metadata.name, &c.spec.0));
    }
    for a in agents {
        config.insert_agent(named(&a.metadata.name, &a.spec.0));
    }
    for m in mcp_servers {
        config.insert_mcp_server(named(&m.metadata.name, &m.spec.0));
    }
    for p in llm_providers {
        config.insert_llm_provider(named(&p.metadata.name, &p.spec.0));
    }
    config
}

/// The tools each MCPServer last listed (`status.lastHealth.tools`, as its
/// runners report them): cluster mode's [`tarsy_core::ToolCatalog`].
pub fn offered_tools(servers: &[MCPServer]) -> BTreeMap<String, Vec<String>> {
    servers
        .iter()
        .filter_map(|s| {
            let tools = s.status.as_ref()?.last_health.as_ref()?.tools.clone();
            Some((s.metadata.name.clone()?, tools))
        })
        .collect()
}
