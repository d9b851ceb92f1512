//! What an execution needs before it runs: the store (Postgres, retried
//! while it restarts) and its configuration, rebuilt inside its pod: its resolved
//! spec, the namespace's LLMProviders and MCPServers, the operator's
//! defaults (passed in the environment) and the Secret values the pod
//! builder passed ([`secret_env_name`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tarsy_config::convert::{EnvSecretResolver, Placement, SecretResolver};
use tarsy_config::{Defaults, DefaultsSpec};
use tarsy_core::config::HttpTransport;
use tarsy_core::{McpServerConfig, McpTransport, ResolvedAgentConfig, SecretValue};
use tarsy_crds::contract::secret_env_name;
use tarsy_crds::{AgentExecution, LLMProvider, MCPServer, SecretKeyRef};
use tarsy_exec::memory::{MemoryService, embedder_for};
use tarsy_masking::MaskingService;
use tarsy_store::{ConnectOptions, Store};
use tokio_util::sync::CancellationToken;

use crate::{RunnerError, RunnerOptions};

/// Reads the Secret values the pod builder passed in the environment
/// ([`secret_env_name`]); local names as a fallback.
struct PodSecrets;

impl SecretResolver for PodSecrets {
    fn secret(&self, r: &SecretKeyRef) -> Result<SecretValue, tarsy_config::SecretError> {
        match std::env::var(secret_env_name(r)) {
            Ok(v) => Ok(SecretValue::new(v)),
            Err(_) => EnvSecretResolver.secret(r),
        }
    }
}

/// The configuration an execution runs with, rebuilt in its pod.
pub(crate) struct Prepared {
    pub(crate) config: ResolvedAgentConfig,
    pub(crate) mcp_configs: BTreeMap<String, McpServerConfig>,
    pub(crate) masking: Arc<MaskingService>,
    pub(crate) defaults: Defaults,
    /// Investigation memory (none: off), with the embedder configured.
    pub(crate) memory: Option<Arc<MemoryService>>,
}

/// The agent configuration, MCP server configurations and masking of the
/// execution, from its spec, the namespace's resources and the operator's
/// defaults (passed in the environment).
pub(crate) fn prepare(
    options: &RunnerOptions,
    ae: &AgentExecution,
    providers: &[LLMProvider],
    servers: &[MCPServer],
) -> Result<Prepared, RunnerError> {
    let mut defaults = Defaults::default();
    match DefaultsSpec::from_env(&|n| std::env::var(n).ok()) {
        Ok(spec) => {
            if let Err(problems) = defaults.apply(&spec) {
                tracing::warn!(?problems, "ignoring invalid TARSY_DEFAULT_* settings");
            }
        }
        Err(problems) => tracing::warn!(?problems, "ignoring invalid TARSY_DEFAULT_* settings"),
    }
    let config = tarsy_crds::config::from_resources(defaults.clone(), &[], &[], servers, providers);
    let resolved = ae
        .spec
        .resolved
        .resolve(&config, &ae.spec.agent_name, &ae.spec.display_name)
        .map_err(|e| RunnerError::Config(e.to_string()))?;
    let placement = Placement::Pod {
        bridge_ports: options.bridge_ports.clone(),
    };
    let mut mcp = BTreeMap::new();
    for name in &resolved.mcp_servers {
        let endpoint = options.mcp_endpoints.get(name);
        let built = config.mcp_server_config(name, &PodSecrets, &placement);
        let cfg = match (built, endpoint) {
            (Ok(mut c), Some(url)) => {
                c.transport = local_http(url, c.transport);
                c
            }
            (Ok(c), None) => c,
            (Err(_), Some(url)) => McpServerConfig {
                name: name.clone(),
                transport: local_http(
                    url,
                    McpTransport::Stdio {
                        command: String::new(),
                        args: Vec::new(),
                        env: BTreeMap::new(),
                        cwd: None,
                    },
                ),
                instructions: String::new(),
                summarization: Default::default(),
            },
            (Err(e), None) => {
                // The agent runs without it and is told it is unavailable.
                tracing::warn!(server = %name, error = %e, "MCP server not usable");
                continue;
            }
        };
        mcp.insert(name.clone(), cfg);
    }
    let masking = MaskingService::new(
        config.masking_configs(),
        config.defaults.alert_masking.clone(),
    )
    .map_err(|e| RunnerError::Config(format!("masking: {e}")))?;
    Ok(Prepared {
        config: resolved,
        mcp_configs: mcp,
        masking: Arc::new(masking),
        memory: MemoryService::new(&defaults.memory, embedder_for(&config, &options.llm_addr)),
        defaults,
    })
}

/// Streamable HTTP at `url`, keeping the HTTP options of `previous`.
fn local_http(url: &str, previous: McpTransport) -> McpTransport {
    let mut http = match previous {
        McpTransport::Http(h) | McpTransport::Sse(h) => h,
        McpTransport::Stdio { .. } => HttpTransport {
            url: String::new(),
            bearer_token: None,
            headers: BTreeMap::new(),
            tls: Default::default(),
            timeout: None,
        },
    };
    http.url = url.to_string();
    McpTransport::Http(http)
}

/// Connects to Postgres, retrying with backoff for at most `budget`
/// (a database restarting while pods start is normal). Stops early when
/// `cancel` fires.
pub(crate) async fn connect_store(
    url: &str,
    budget: Duration,
    cancel: &CancellationToken,
) -> Result<Store, RunnerError> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(250);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let options = ConnectOptions {
            run_migrations: false,
            max_connections: tarsy_store::ONE_EXECUTION_POOL,
            acquire_timeout: Duration::from_secs(5),
            ..ConnectOptions::default()
        };
        let err = match Store::connect_with(url, options).await {
            Ok(store) => return Ok(store),
            Err(e @ tarsy_store::StoreError::UnsupportedUrl(_)) => return Err(e.into()),
            Err(e) => e,
        };
        let elapsed = started.elapsed();
        if elapsed + delay > budget || cancel.is_cancelled() {
            return Err(RunnerError::DatabaseUnreachable {
                attempts,
                waited_secs: elapsed.as_secs(),
                last: err.to_string(),
            });
        }
        tracing::warn!(attempt = attempts, error = %err, retry_in_ms = delay.as_millis() as u64, "Postgres unreachable; retrying");
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = cancel.cancelled() => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}
