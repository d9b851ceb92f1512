//! Resource specs → the runtime types of `tarsy-core` (LLM providers, MCP
//! servers) and `tarsy-masking` (masking blocks).

use std::collections::BTreeMap;
use std::time::Duration;

use tarsy_core::config::{HttpTransport, TlsOptions};
use tarsy_core::{
    LlmProviderConfig, McpServerConfig, McpTransport, ModelPrice, SecretValue, SummarizationConfig,
};
use tarsy_masking::{CustomPattern, MaskingConfig};

use crate::defaults::PricingSettings;
use crate::error::{ResolveError, SecretError};
use crate::model::{
    DataMaskingSpec, EnvVarSpec, HttpTransportKind, LLMProviderSpec, MCPServerSpec, SecretKeyRef,
    SummarizationSpec,
};
use crate::registry::Config;

/// Supplies secret values. The configuration crate never talks to
/// Kubernetes: the caller (operator, runner, local mode) decides where
/// secrets come from.
pub trait SecretResolver {
    /// The value of a Secret key.
    fn secret(&self, reference: &SecretKeyRef) -> Result<SecretValue, SecretError>;

    /// The value of an environment variable holding a secret (fields named
    /// `...Env`). Reads the process environment unless overridden.
    fn env(&self, name: &str) -> Result<SecretValue, SecretError> {
        std::env::var(name)
            .map(SecretValue::new)
            .map_err(|_| SecretError::EnvUnset(name.to_string()))
    }
}

/// Local-mode resolver: a Secret key is read from the environment variable
/// named like the key (upper-cased, other characters → `_`), e.g.
/// `{name: prometheus-mcp, key: token}` → `TOKEN`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvSecretResolver;

/// The environment variable [`EnvSecretResolver`] reads for `key`.
pub fn env_name_for_key(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

impl SecretResolver for EnvSecretResolver {
    fn secret(&self, reference: &SecretKeyRef) -> Result<SecretValue, SecretError> {
        self.env(&env_name_for_key(&reference.key))
    }
}

/// A resolver over values the caller already has (Secrets it fetched, or
/// test fixtures). Environment lookups go to `env`, never to the process.
#[derive(Debug, Clone, Default)]
pub struct MapSecretResolver {
    /// `(secret name, key)` → value.
    pub secrets: BTreeMap<(String, String), String>,
    /// Variable → value.
    pub env: BTreeMap<String, String>,
}

impl MapSecretResolver {
    /// Adds a Secret key.
    pub fn with_secret(mut self, name: &str, key: &str, value: &str) -> Self {
        self.secrets
            .insert((name.to_string(), key.to_string()), value.to_string());
        self
    }

    /// Adds an environment variable.
    pub fn with_env(mut self, name: &str, value: &str) -> Self {
        self.env.insert(name.to_string(), value.to_string());
        self
    }
}

impl SecretResolver for MapSecretResolver {
    fn secret(&self, reference: &SecretKeyRef) -> Result<SecretValue, SecretError> {
        self.secrets
            .get(&(reference.name.clone(), reference.key.clone()))
            .map(|v| SecretValue::new(v.clone()))
            .ok_or_else(|| SecretError::NotFound {
                name: reference.name.clone(),
                key: reference.key.clone(),
            })
    }

    fn env(&self, name: &str) -> Result<SecretValue, SecretError> {
        self.env
            .get(name)
            .map(|v| SecretValue::new(v.clone()))
            .ok_or_else(|| SecretError::EnvUnset(name.to_string()))
    }
}

/// Where the MCP client runs, which decides how each server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Local mode: stdio servers are child processes; container servers
    /// cannot run (give them a `url` or `stdio` locally).
    Local,
    /// Inside an investigation pod: container servers are sidecars on
    /// localhost; stdio servers run behind `tarsy mcp-bridge` on the port
    /// the pod builder assigned them.
    Pod {
        /// Bridge port of each stdio server.
        bridge_ports: BTreeMap<String, u16>,
    },
}

/// Directory where the pod builder mounts `tls.caSecretRef` keys: the CA
/// file of server `S`, key `K` is `{POD_CA_DIR}/S/K`.
pub const POD_CA_DIR: &str = "/var/run/tarsy/mcp-ca";

/// Default path of a sidecar's MCP endpoint.
pub const DEFAULT_MCP_PATH: &str = "/mcp";

/// Converts a summarization block; an absent block means no summarization.
pub fn summarization_config(spec: Option<&SummarizationSpec>) -> SummarizationConfig {
    let defaults = SummarizationConfig::default();
    match spec {
        None => SummarizationConfig {
            enabled: false,
            ..defaults
        },
        Some(s) => SummarizationConfig {
            enabled: s.enabled.unwrap_or(true),
            size_threshold_tokens: s
                .size_threshold_tokens
                .unwrap_or(defaults.size_threshold_tokens),
            summary_max_token_limit: s
                .summary_max_token_limit
                .unwrap_or(defaults.summary_max_token_limit),
        },
    }
}

/// Converts a masking block into `tarsy-masking`'s configuration.
/// Groups every MCP server's results are masked with unless the server opts
/// out (`dataMasking: {enabled: false}`): masking is on by default.
pub const DEFAULT_MASKING_GROUPS: [&str; 2] = ["kubernetes", "security"];

/// The masking of a server without a `dataMasking` block.
pub fn default_masking_config() -> MaskingConfig {
    MaskingConfig {
        enabled: true,
        pattern_groups: DEFAULT_MASKING_GROUPS.map(String::from).to_vec(),
        patterns: Vec::new(),
        custom_patterns: Vec::new(),
    }
}

/// A server's masking: the default groups plus whatever its `dataMasking`
/// adds, unless it opts out.
pub fn masking_config(spec: &DataMaskingSpec) -> MaskingConfig {
    let mut config = written_masking_config(spec);
    let mut groups = DEFAULT_MASKING_GROUPS.map(String::from).to_vec();
    for g in config.pattern_groups.drain(..) {
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    config.pattern_groups = groups;
    config
}

/// A `dataMasking` block as written (what validation reports on, with the
/// user's own indexes).
pub fn written_masking_config(spec: &DataMaskingSpec) -> MaskingConfig {
    MaskingConfig {
        enabled: spec.enabled.unwrap_or(true),
        pattern_groups: spec.pattern_groups.clone(),
        patterns: spec.patterns.clone(),
        custom_patterns: spec
            .custom_patterns
            .iter()
            .map(|p| CustomPattern {
                name: p.name.clone(),
                regex: p.regex.clone(),
                replacement: p.replacement.clone().unwrap_or_default(),
                description: p.description.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

/// Converts one LLM provider spec; `fallback` holds the already converted
/// fallback providers, `pricing` says where its price comes from.
pub fn llm_provider_config(
    name: &str,
    spec: &LLMProviderSpec,
    fallback: Vec<LlmProviderConfig>,
    pricing: &PricingSettings,
) -> LlmProviderConfig {
    LlmProviderConfig {
        name: name.to_string(),
        provider_type: spec.provider_type,
        model: spec.model.clone(),
        // The LLM service reads the key from a variable named like the
        // Secret key (the chart loads the Secret with envFrom).
        api_key_env: spec
            .api_key_env
            .clone()
            .or_else(|| spec.api_key_secret_ref.as_ref().map(|r| r.key.clone())),
        credentials_env: spec.credentials_env.clone(),
        base_url: spec.base_url.clone(),
        project: spec.project.clone(),
        location: spec.location.clone(),
        native_tools: spec.native_tools.clone().unwrap_or_default(),
        max_tool_result_tokens: spec.max_tool_result_tokens,
        context_window_tokens: spec.context_window_tokens,
        script: spec.script.clone(),
        fallback,
        price: price_for(spec, pricing),
    }
}

/// The price of a provider's model: its own `pricing`, else the defaults'
/// price of the model, else the price book's; none with estimates off.
fn price_for(spec: &LLMProviderSpec, pricing: &PricingSettings) -> Option<ModelPrice> {
    if !pricing.enabled {
        return None;
    }
    spec.pricing
        .clone()
        .or_else(|| pricing.models.get(&spec.model).cloned())
        .or_else(|| {
            tarsy_pricing::current()
                .price(spec.provider_type, &spec.model)
                .cloned()
        })
}

fn parse_field_duration(field: &str, value: &str) -> Result<Duration, ResolveError> {
    crate::model::parse_duration(value).map_err(|source| ResolveError::Duration {
        field: field.to_string(),
        source,
    })
}

impl Config {
    /// The runtime configuration of LLM provider `name`, with its fallback
    /// providers (one level: a fallback's own fallbacks are not followed).
    pub fn llm_provider_config(&self, name: &str) -> Result<LlmProviderConfig, ResolveError> {
        let provider = self
            .llm_provider(name)
            .ok_or_else(|| ResolveError::ProviderNotFound(name.to_string()))?;
        let fallback = provider
            .spec
            .fallback
            .iter()
            .flatten()
            .map(|fb| {
                let spec = self
                    .llm_provider(fb)
                    .ok_or_else(|| ResolveError::ProviderNotFound(fb.clone()))?;
                Ok(llm_provider_config(
                    fb,
                    &spec.spec,
                    Vec::new(),
                    &self.defaults.pricing,
                ))
            })
            .collect::<Result<Vec<_>, ResolveError>>()?;
        Ok(llm_provider_config(
            name,
            &provider.spec,
            fallback,
            &self.defaults.pricing,
        ))
    }

    /// The masking configuration of MCP server `name`, if it has a masking block.
    pub fn masking_config(&self, name: &str) -> Option<MaskingConfig> {
        let server = self.mcp_server(name)?;
        Some(
            server
                .spec
                .data_masking
                .as_ref()
                .map_or_else(default_masking_config, masking_config),
        )
    }

    /// The masking configuration of every MCP server (what
    /// `tarsy_masking::MaskingService::new` takes): on by default.
    pub fn masking_configs(&self) -> BTreeMap<String, MaskingConfig> {
        self.mcp_servers()
            .filter_map(|s| Some((s.name.clone(), self.masking_config(&s.name)?)))
            .collect()
    }

    /// MCP servers whose results are NOT masked (`dataMasking: {enabled:
    /// false}`): said at start-up, as a system warning and by admission.
    pub fn unmasked_mcp_servers(&self) -> Vec<String> {
        self.mcp_servers()
            .filter(|s| {
                s.spec
                    .data_masking
                    .as_ref()
                    .is_some_and(|m| m.enabled == Some(false))
            })
            .map(|s| s.name.clone())
            .collect()
    }

    /// The runtime configuration of MCP server `name` as reached from
    /// `placement`, with secrets supplied by `secrets`.
    pub fn mcp_server_config(
        &self,
        name: &str,
        secrets: &dyn SecretResolver,
        placement: &Placement,
    ) -> Result<McpServerConfig, ResolveError> {
        let server = self
            .mcp_server(name)
            .ok_or_else(|| ResolveError::McpServerNotFound(name.to_string()))?;
        let spec = &server.spec;
        let transport = transport(name, spec, secrets, placement)?;
        Ok(McpServerConfig {
            name: name.to_string(),
            transport,
            instructions: spec.instructions.clone().unwrap_or_default(),
            summarization: summarization_config(spec.summarization.as_ref()),
        })
    }
}

fn local_http(url: String) -> McpTransport {
    McpTransport::Http(HttpTransport {
        url,
        bearer_token: None,
        headers: BTreeMap::new(),
        tls: TlsOptions::default(),
        timeout: None,
    })
}

fn transport(
    name: &str,
    spec: &MCPServerSpec,
    secrets: &dyn SecretResolver,
    placement: &Placement,
) -> Result<McpTransport, ResolveError> {
    let placement_err = |reason: &str| ResolveError::Placement {
        server: name.to_string(),
        reason: reason.to_string(),
    };
    if let Some(url) = &spec.url {
        let secret_err = |field: &str, source| ResolveError::Secret {
            server: name.to_string(),
            field: field.to_string(),
            source,
        };
        let bearer_token = match (&spec.bearer_token_secret_ref, &spec.bearer_token_env) {
            (Some(r), _) => Some(
                secrets
                    .secret(r)
                    .map_err(|e| secret_err("spec.bearerTokenSecretRef", e))?,
            ),
            (None, Some(var)) => Some(
                secrets
                    .env(var)
                    .map_err(|e| secret_err("spec.bearerTokenEnv", e))?,
            ),
            (None, None) => None,
        };
        let tls = match &spec.tls {
            None => TlsOptions::default(),
            Some(t) => TlsOptions {
                insecure_skip_verify: t.insecure_skip_verify.unwrap_or(false),
                ca_file: match (&t.ca_file, &t.ca_secret_ref, placement) {
                    (Some(f), _, _) => Some(f.clone()),
                    (None, Some(r), Placement::Pod { .. }) => {
                        Some(format!("{POD_CA_DIR}/{name}/{}", r.key))
                    }
                    (None, Some(_), Placement::Local) => {
                        return Err(placement_err(
                            "tls.caSecretRef needs cluster mode; use tls.caFile locally",
                        ));
                    }
                    (None, None, _) => None,
                },
            },
        };
        let timeout = spec
            .timeout
            .as_deref()
            .map(|t| parse_field_duration("spec.timeout", t))
            .transpose()?;
        let http = HttpTransport {
            url: url.clone(),
            bearer_token,
            headers: spec.headers.clone().unwrap_or_default(),
            tls,
            timeout,
        };
        return Ok(match spec.transport {
            Some(HttpTransportKind::Sse) => McpTransport::Sse(http),
            Some(HttpTransportKind::StreamableHttp) | None => McpTransport::Http(http),
        });
    }
    if let Some(container) = &spec.container {
        return match placement {
            Placement::Pod { .. } => Ok(local_http(format!(
                "http://127.0.0.1:{}{}",
                container.port,
                container.path.as_deref().unwrap_or(DEFAULT_MCP_PATH)
            ))),
            Placement::Local => Err(placement_err(
                "a container MCP server runs only as a sidecar in a cluster; in local mode give it a url or a stdio command",
            )),
        };
    }
    if let Some(stdio) = &spec.stdio {
        return match placement {
            Placement::Local => Ok(McpTransport::Stdio {
                command: stdio.command.clone(),
                args: stdio.args.clone(),
                env: resolve_env(name, "spec.stdio.env", &stdio.env, secrets)?,
                cwd: None,
            }),
            Placement::Pod { bridge_ports } => match bridge_ports.get(name) {
                Some(port) => Ok(local_http(format!(
                    "http://127.0.0.1:{port}{DEFAULT_MCP_PATH}"
                ))),
                None => Err(placement_err(
                    "no mcp-bridge port was assigned to this stdio server",
                )),
            },
        };
    }
    Err(placement_err(
        "no transport: set one of container, stdio or url",
    ))
}

fn resolve_env(
    server: &str,
    field: &str,
    env: &[EnvVarSpec],
    secrets: &dyn SecretResolver,
) -> Result<BTreeMap<String, String>, ResolveError> {
    env.iter()
        .enumerate()
        .map(|(i, var)| {
            let value = match (&var.value, &var.value_from) {
                (Some(v), _) => v.clone(),
                (None, Some(from)) => secrets
                    .secret(&from.secret_key_ref)
                    .map_err(|source| ResolveError::Secret {
                        server: server.to_string(),
                        field: format!("{field}[{i}].valueFrom.secretKeyRef"),
                        source,
                    })?
                    .expose()
                    .to_string(),
                (None, None) => String::new(),
            };
            Ok((var.name.clone(), value))
        })
        .collect()
}
