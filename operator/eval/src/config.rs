//! The configuration cases run with: a directory of manifests (chains,
//! agents, LLM providers) whose agents name MCP servers that only the cases
//! provide. Those servers are declared here as placeholders so that the
//! configuration validates; each case replaces them with replay servers of
//! its own fixture.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::json;
use tarsy_config::loader::{manifest_files, process_env};
use tarsy_config::{Config, ConfigObject, DefaultsSpec, Named, Origin, build_config, parse_config};

use crate::case::Case;
use crate::error::EvalError;

/// Where a placeholder server points: nothing listens there, and no case
/// runs with a placeholder left (see [`placeholder_servers`]).
pub const PLACEHOLDER_URL: &str = "http://127.0.0.1:9/mcp";

/// The origin label of the placeholders.
pub const PLACEHOLDER_ORIGIN: &str = "(recorded by the evaluation cases)";

/// Loads the manifests of `dir` (with `${VAR}` interpolation and the
/// `TARSY_*` default overrides, as local mode does), adding a placeholder
/// for every MCP server the cases' fixtures record that the directory does
/// not define.
pub fn load_config(dir: &Path, cases: &[Case]) -> Result<Config, EvalError> {
    let invalid = |errors: tarsy_config::ConfigErrors| {
        let list: Vec<String> = errors.0.iter().map(|e| format!("  - {e}")).collect();
        EvalError::Config(format!(
            "the configuration in {} is invalid:\n{}",
            dir.display(),
            list.join("\n")
        ))
    };
    let mut objects = Vec::new();
    for path in manifest_files(dir).map_err(invalid)? {
        let label = path
            .strip_prefix(dir)
            .unwrap_or(&path)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&path).map_err(|source| EvalError::Io {
            path: path.clone(),
            source,
        })?;
        objects.extend(parse_config(&label, &text, &process_env).map_err(invalid)?);
    }
    let defined: BTreeSet<String> = objects
        .iter()
        .filter_map(|o| match o {
            ConfigObject::McpServer(s) => Some(s.name.clone()),
            _ => None,
        })
        .collect();
    let recorded: BTreeSet<&String> = cases
        .iter()
        .flat_map(|c| c.fixture.servers.keys())
        .collect();
    for name in recorded {
        if defined.contains(name) {
            continue;
        }
        let spec = serde_json::from_value(json!({ "url": PLACEHOLDER_URL }))
            .map_err(|e| EvalError::Config(format!("placeholder MCP server {name:?}: {e}")))?;
        objects.push(ConfigObject::McpServer(Box::new(Named::new(
            name.clone(),
            spec,
            Origin::File(PLACEHOLDER_ORIGIN.into()),
        ))));
    }
    let overrides = DefaultsSpec::from_env(&process_env).map_err(|errors| {
        let list: Vec<String> = errors.iter().map(|(at, p)| format!("{at}: {p}")).collect();
        EvalError::Config(format!(
            "invalid defaults in the environment: {}",
            list.join("; ")
        ))
    })?;
    build_config(objects, &overrides).map_err(invalid)
}

/// The placeholder servers still in `config` that some chain uses: a case
/// whose fixture does not record them cannot run.
pub fn placeholder_servers(config: &Config) -> Vec<String> {
    let used: BTreeSet<String> = config
        .chains()
        .flat_map(|c| {
            let mut names = config.aggregate_chain_mcp_servers(&c.spec);
            names.extend(c.spec.mcp_servers.iter().flatten().cloned());
            names
        })
        .collect();
    config
        .mcp_servers()
        .filter(|s| matches!(&s.origin, Origin::File(f) if f == PLACEHOLDER_ORIGIN))
        .filter(|s| used.contains(&s.name))
        .map(|s| s.name.clone())
        .collect()
}
