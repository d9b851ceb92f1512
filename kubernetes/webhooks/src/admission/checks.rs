//! The admission checks themselves: pure functions of the object and a
//! snapshot of its namespace, so they need no IO to test.
//!
//! Only what CEL cannot check lives here. For the GitOps kinds the
//! cross-object rules are `tarsy-config`'s ([`config_findings`]: the same
//! validation local mode runs — references, strategies against provider
//! backends, masking, durations), so the cluster and local mode agree. On top
//! of it: alert-type ownership judged from the reviewed object's side and
//! warnings for soft issues. Alerts get the rule set the REST API and the
//! Alertmanager bridge apply too (`tarsy_config::Config::check_alert`).

use tarsy_config::{Defaults, ObjectRef, Problem};
use tarsy_crds::{Agent, Alert, Chain, LLMProvider, MCPServer};

use crate::builtins::Builtins;

/// What to do when a GitOps object names an object that does not exist (yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReferencePolicy {
    /// Deny the request (default): a typo never reaches the cluster.
    #[default]
    Deny,
    /// Allow with a warning: for GitOps tools that apply every object of a
    /// sync at once in an order they choose (the Chain's `Ready` condition
    /// still reports the missing reference).
    Warn,
}

impl std::str::FromStr for ReferencePolicy {
    type Err = String;

    /// `deny` or `warn` (case-insensitive), as the chart's
    /// `webhooks.admission.referencePolicy` writes it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "deny" => Ok(Self::Deny),
            "warn" => Ok(Self::Warn),
            other => Err(format!(
                "unknown reference policy {other:?}: expected deny or warn"
            )),
        }
    }
}

/// Result of checking one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// Reasons to deny, each `field.path: what is wrong`.
    pub errors: Vec<String>,
    /// Soft issues, returned as admission warnings.
    pub warnings: Vec<String>,
}

/// The objects of the namespace the checked object lives in.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Chains (for alert-type ownership and Alert resolution).
    pub chains: Vec<Chain>,
    /// Agents.
    pub agents: Vec<Agent>,
    /// MCPServers.
    pub mcp_servers: Vec<MCPServer>,
    /// LLMProviders.
    pub llm_providers: Vec<LLMProvider>,
}

/// One object under review, of any validated kind.
#[derive(Debug, Clone)]
pub enum Reviewed<'a> {
    /// A Chain.
    Chain(&'a Chain),
    /// An Agent.
    Agent(&'a Agent),
    /// An MCPServer.
    McpServer(&'a MCPServer),
    /// An LLMProvider.
    LlmProvider(&'a LLMProvider),
}

fn replace<K: kube::Resource + Clone>(list: &[K], obj: &K, name: &str) -> Vec<K> {
    list.iter()
        .filter(|o| o.meta().name.as_deref() != Some(name))
        .cloned()
        .chain(std::iter::once(obj.clone()))
        .collect()
}

/// Validates the namespace as it would be with `object` admitted, with
/// `tarsy-config`'s cross-object rules, and keeps the problems located in
/// `object` (a broken neighbour never blocks an unrelated change).
///
/// Unknown agents, MCP servers and LLM providers follow `policy`; every
/// other problem denies. Alert-type conflicts are left to [`check_chain`],
/// which reports them on the Chain being admitted whatever the names' order.
pub fn config_findings(
    object: Reviewed<'_>,
    name: &str,
    snap: &Snapshot,
    defaults: &Defaults,
    policy: ReferencePolicy,
) -> Findings {
    let mut chains = snap.chains.clone();
    let mut agents = snap.agents.clone();
    let mut servers = snap.mcp_servers.clone();
    let mut providers = snap.llm_providers.clone();
    let kind = match object {
        Reviewed::Chain(o) => {
            chains = replace(&chains, o, name);
            "Chain"
        }
        Reviewed::Agent(o) => {
            agents = replace(&agents, o, name);
            "Agent"
        }
        Reviewed::McpServer(o) => {
            servers = replace(&servers, o, name);
            "MCPServer"
        }
        Reviewed::LlmProvider(o) => {
            providers = replace(&providers, o, name);
            "LLMProvider"
        }
    };
    let config = tarsy_crds::config::from_resources(
        defaults.clone(),
        &chains,
        &agents,
        &servers,
        &providers,
    );
    let me = ObjectRef::new(kind, name);
    let mut findings = Findings::default();
    for e in config.validate() {
        if e.location.object.as_ref() != Some(&me) {
            continue;
        }
        let text = match &e.location.field {
            Some(field) => format!("{field}: {}", e.problem),
            None => e.problem.to_string(),
        };
        match e.problem {
            Problem::AlertTypeClaimed { .. } => {}
            Problem::UnknownAgent { .. }
            | Problem::UnknownMcpServer { .. }
            | Problem::UnknownLlmProvider { .. }
                if policy == ReferencePolicy::Warn =>
            {
                findings.warnings.push(text)
            }
            _ => findings.errors.push(text),
        }
    }
    findings
}

impl Findings {
    /// Appends `other`'s errors and warnings.
    pub fn extend(&mut self, other: Findings) {
        self.errors.extend(other.errors);
        self.warnings.extend(other.warnings);
    }
}

/// Ownership of alert types and soft issues of a Chain named `name` (the
/// references are [`config_findings`]'s).
pub fn check_chain(chain: &Chain, name: &str, snap: &Snapshot) -> Findings {
    let spec = &chain.spec;
    let mut f = Findings::default();
    for (i, alert_type) in spec.alert_types.iter().enumerate() {
        let owners: Vec<&str> = snap
            .chains
            .iter()
            .filter(|other| other.metadata.name.as_deref() != Some(name))
            .filter(|other| other.spec.alert_types.contains(alert_type))
            .filter_map(|other| other.metadata.name.as_deref())
            .collect();
        if !owners.is_empty() {
            f.errors.push(format!(
                "spec.alertTypes[{i}]: alert type {alert_type:?} is already handled by Chain {:?}; an alert type may belong to only one Chain per namespace",
                owners.join("\", \"")
            ));
        }
    }
    if spec.alert_types.is_empty() {
        f.warnings.push(
            "spec.alertTypes is empty: this Chain runs only for Alerts that name it in chainRef"
                .into(),
        );
    }
    for (i, stage) in spec.stages.iter().enumerate() {
        let executions = stage.execution_count();
        if stage.synthesis.is_some() && executions == 1 {
            f.warnings.push(format!(
                "spec.stages[{i}].synthesis: stage {:?} runs a single execution, so its synthesis never runs",
                stage.name
            ));
        }
        if stage.success_policy.is_some() && executions == 1 {
            f.warnings.push(format!(
                "spec.stages[{i}].successPolicy: stage {:?} runs a single execution; the policy has no effect",
                stage.name
            ));
        }
    }
    f
}

/// Soft issues of an Agent named `name`.
pub fn check_agent(_agent: &Agent, name: &str, builtins: &Builtins) -> Findings {
    let mut f = Findings::default();
    if builtins.agents.contains(name) {
        f.warnings.push(format!(
            "Agent {name:?} replaces the built-in agent of the same name in this namespace"
        ));
    }
    f
}

/// Soft issues of an MCPServer named `name` (its masking block is checked by
/// [`config_findings`], exactly as the masking service will compile it).
pub fn check_mcp_server(server: &MCPServer, name: &str, builtins: &Builtins) -> Findings {
    let mut f = Findings::default();
    let spec = &server.spec;
    if spec
        .data_masking
        .as_ref()
        .is_some_and(|m| m.enabled == Some(false))
    {
        f.warnings.push(
            "spec.dataMasking.enabled is false: this server's tool results reach the LLM unmasked"
                .into(),
        );
    }
    if spec
        .tls
        .as_ref()
        .and_then(|t| t.insecure_skip_verify)
        .unwrap_or(false)
    {
        f.warnings.push(
            "spec.tls.insecureSkipVerify is true: the server's certificate is not verified".into(),
        );
    }
    if builtins.mcp_servers.contains(name) {
        f.warnings.push(format!(
            "MCPServer {name:?} replaces the built-in server of the same name in this namespace"
        ));
    }
    f
}

/// Soft issues of an LLMProvider named `name`: fallback chains that would
/// nest (they do not), credentials meant for local mode.
pub fn check_llm_provider(provider: &LLMProvider, name: &str, snap: &Snapshot) -> Findings {
    let mut f = Findings::default();
    let fallback = provider.spec.fallback.clone().unwrap_or_default();
    for (i, fb) in fallback.iter().enumerate() {
        let nested = snap
            .llm_providers
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(fb.as_str()))
            .and_then(|p| p.spec.fallback.as_ref())
            .is_some_and(|list| !list.is_empty());
        if nested {
            f.warnings.push(format!(
                "spec.fallback[{i}]: LLMProvider {fb:?} has its own fallbacks, which are ignored when it serves as a fallback (fallback chains do not nest)"
            ));
        }
    }
    if !fallback.is_empty() {
        let users: Vec<&str> = snap
            .llm_providers
            .iter()
            .filter(|p| p.metadata.name.as_deref() != Some(name))
            .filter(|p| {
                p.spec
                    .fallback
                    .as_ref()
                    .is_some_and(|l| l.iter().any(|fb| fb == name))
            })
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        if !users.is_empty() {
            f.warnings.push(format!(
                "spec.fallback: {name:?} is itself a fallback of {}; when used as a fallback its own fallbacks are ignored",
                users.join(", ")
            ));
        }
    }
    if provider.spec.api_key_env.is_some() {
        f.warnings.push(
            "spec.apiKeyEnv is meant for local mode; in a cluster reference a Secret with apiKeySecretRef"
                .into(),
        );
    }
    f
}

/// Checks a new Alert with the rule set every entry point applies
/// ([`tarsy_config::Config::check_alert`]: alert type, data, runbook URL, exactly one
/// Chain, MCP selection naming existing or built-in servers and tools they
/// last listed), against the namespace's Chains and MCPServers. Alerts are
/// not GitOps objects: a problem always denies.
pub fn check_alert(alert: &Alert, snap: &Snapshot, defaults: &Defaults) -> Findings {
    let config = tarsy_crds::config::from_resources(
        defaults.clone(),
        &snap.chains,
        &[],
        &snap.mcp_servers,
        &[],
    );
    let tools = tarsy_crds::config::offered_tools(&snap.mcp_servers);
    let mut f = Findings::default();
    if let Err(e) = config.check_alert(&alert.spec.submission(""), &tools) {
        f.errors.push(e.to_string());
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_policy_parses() {
        assert_eq!("deny".parse(), Ok(ReferencePolicy::Deny));
        assert_eq!("Warn".parse(), Ok(ReferencePolicy::Warn));
        assert!(
            "ignore"
                .parse::<ReferencePolicy>()
                .unwrap_err()
                .contains("deny or warn")
        );
    }
}
