//! Ready conditions of the GitOps kinds (Chain, Agent, MCPServer,
//! LLMProvider), sans IO: an object is Ready when the namespace's
//! configuration validates for it (references resolve) and every Secret key
//! it references exists. Only Secret names and keys are looked at, never
//! values.

use std::collections::{BTreeMap, BTreeSet};

use tarsy_config::Config;
use tarsy_crds::{LLMProviderSpec, MCPServerSpec};

use crate::pod::referenced_secrets;

/// The Secret keys present in a namespace: Secret name → its keys.
pub type SecretKeys = BTreeMap<String, BTreeSet<String>>;

/// Readiness of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Ready or not.
    pub ready: bool,
    /// CamelCase reason.
    pub reason: &'static str,
    /// What is wrong (or "ok").
    pub message: String,
}

impl Readiness {
    fn ok() -> Self {
        Self {
            ready: true,
            reason: "Valid",
            message: "all references resolve".into(),
        }
    }
}

/// Readiness of object `kind`/`name` in `config` (the namespace's
/// configuration, built-ins included), given the Secrets that exist.
pub fn readiness(config: &Config, kind: &str, name: &str, secrets: &SecretKeys) -> Readiness {
    let problems: Vec<String> = config
        .validate()
        .into_iter()
        .filter(|e| {
            e.location
                .object
                .as_ref()
                .is_some_and(|o| o.kind == kind && o.name == name)
        })
        .map(|e| e.to_string())
        .collect();
    if !problems.is_empty() {
        return Readiness {
            ready: false,
            reason: "InvalidReference",
            message: problems.join("; "),
        };
    }
    let refs = secret_refs(config, kind, name);
    let missing: Vec<String> = refs
        .iter()
        .filter(|(secret, key)| !secrets.get(secret).is_some_and(|keys| keys.contains(key)))
        .map(|(secret, key)| format!("Secret {secret:?} has no key {key:?}"))
        .collect();
    if missing.is_empty() {
        Readiness::ok()
    } else {
        Readiness {
            ready: false,
            reason: "SecretMissing",
            message: missing.join("; "),
        }
    }
}

/// The Secret keys `(name, key)` object `kind`/`name` references: an
/// MCPServer's env and token Secrets, an LLMProvider's API key, and for a
/// Chain those of the MCP servers its stages use.
pub fn secret_refs(config: &Config, kind: &str, name: &str) -> BTreeSet<(String, String)> {
    match kind {
        "MCPServer" => config
            .mcp_server(name)
            .map(|s| referenced_secrets(&s.spec))
            .unwrap_or_default(),
        "LLMProvider" => config
            .llm_provider(name)
            .map(|p| provider_secrets(&p.spec))
            .unwrap_or_default(),
        "Chain" => chain_secrets(config, name),
        _ => BTreeSet::new(),
    }
}

fn provider_secrets(spec: &LLMProviderSpec) -> BTreeSet<(String, String)> {
    spec.api_key_secret_ref
        .iter()
        .map(|r| (r.name.clone(), r.key.clone()))
        .collect()
}

/// Secrets of the MCP servers a chain's agents would use (so that a chain
/// is not Ready when its investigation pods could not start).
fn chain_secrets(config: &Config, name: &str) -> BTreeSet<(String, String)> {
    let Some(chain) = config.chain(name) else {
        return BTreeSet::new();
    };
    config
        .aggregate_chain_mcp_servers(&chain.spec)
        .iter()
        .filter_map(|s| config.mcp_server(s))
        .flat_map(|s| referenced_secrets(&s.spec))
        .collect()
}

/// The MCP server specs an execution uses, by name; unknown names are
/// returned in `Err` (the caller fails the execution).
pub fn execution_servers(
    config: &Config,
    names: &[String],
) -> Result<BTreeMap<String, MCPServerSpec>, String> {
    names
        .iter()
        .map(|n| {
            config
                .mcp_server(n)
                .map(|s| (n.clone(), s.spec.clone()))
                .ok_or_else(|| format!("MCP server {n:?} not found"))
        })
        .collect()
}
