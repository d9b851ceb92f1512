//! [`LocalApp`]: local mode in one process — store, events, the driver and
//! (optionally) the REST/WebSocket API.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tarsy_api::{
    Api, ApiConfig, McpHealthSource, McpServerHealth, SessionControl, SystemWarning,
    SystemWarningsSource,
};
use tarsy_config::{Config, EnvSecretResolver, Placement};
use tarsy_core::{EventPublisher, McpServerConfig, NoToolCatalog};
use tarsy_engine::LlmClient;
use tarsy_events::EventHub;
use tarsy_exec::notify::{SlackNotifier, SlackSettings};
use tarsy_exec::retention::{self, Retention};
use tarsy_exec::runbook::runbook_source;
use tarsy_exec::{DEFAULT_LLM_ADDR, Launcher, LlmCallNotice, LlmRouter};
use tarsy_masking::MaskingService;
use tarsy_mcp::{HealthMonitor, McpClientFactory, McpTimeouts, SystemWarnings};
use tarsy_store::{ConnectOptions, Session, Store};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admission;
use crate::control::LocalControl;
use crate::error::{Result, SessionError};
use crate::runtime::{DriverSettings, Runtime};
use crate::stdio;

/// How often [`LocalApp::wait_for_terminal`] reads a session that this
/// process does not drive (nothing here wakes it when another process ends it).
const OTHER_PROCESS_RECHECK: Duration = Duration::from_millis(250);
/// How long shutdown waits for interrupted work to record that it stopped.
const INTERRUPT_WAIT: Duration = Duration::from_secs(5);

/// How to start local mode.
pub struct LocalOptions {
    /// The configuration (see `tarsy_config::load_dir`).
    pub config: Config,
    /// Directory relative script paths of `scripted` providers start from
    /// (the configuration directory).
    pub config_dir: PathBuf,
    /// `sqlite:PATH`, `sqlite::memory:` or `postgres://…`.
    pub database_url: String,
    /// Address of the LLM service for every provider but `scripted`.
    pub llm_addr: String,
    /// Replaces the gRPC client to the LLM service (tests).
    pub llm_service: Option<Arc<dyn LlmClient>>,
    /// Serve the API on this address (`None`: no API).
    pub listen: Option<SocketAddr>,
    /// This process's owner id for the sessions it claims: keep it stable
    /// across restarts so the sessions it left in progress are taken back.
    pub pod_id: String,
    /// Overrides `maxConcurrentSessions` of the configuration's defaults.
    pub max_concurrent_sessions: Option<usize>,
    /// Timing knobs.
    pub settings: DriverSettings,
    /// MCP timeouts.
    pub mcp_timeouts: McpTimeouts,
    /// API settings.
    pub api: ApiConfig,
    /// Database pool size.
    pub max_connections: u32,
    /// Take back sessions a previous run left in progress (off for a
    /// one-shot `investigate` that must drive only its own alert).
    pub recover: bool,
    /// What a stdio MCP server whose command is `tarsy` runs: the running
    /// TARSy executable (`None`: `tarsy` is looked up on PATH).
    pub tarsy_exe: Option<PathBuf>,
    /// Retention sweeps and their interval (`None`: none, e.g. a one-shot
    /// `investigate`).
    pub retention: Option<(Retention, Duration)>,
    /// Slack notifications (`None`: none).
    pub slack: Option<SlackSettings>,
}

impl LocalOptions {
    /// Defaults for `config`: in-memory SQLite, the LLM service at
    /// [`DEFAULT_LLM_ADDR`], no API, pod id [`default_pod_id`].
    pub fn new(config: Config, config_dir: impl Into<PathBuf>) -> Self {
        Self {
            config,
            config_dir: config_dir.into(),
            database_url: "sqlite::memory:".into(),
            llm_addr: DEFAULT_LLM_ADDR.into(),
            llm_service: None,
            listen: None,
            pod_id: default_pod_id(),
            max_concurrent_sessions: None,
            settings: DriverSettings::default(),
            mcp_timeouts: McpTimeouts::default(),
            api: ApiConfig::default(),
            max_connections: 10,
            recover: true,
            tarsy_exe: None,
            retention: None,
            slack: None,
        }
    }
}

/// `local-{hostname}`: stable across restarts of the same machine.
pub fn default_pod_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "localhost".into());
    format!("local-{host}")
}

/// The MCP servers that can run in local mode, stdio ones set up by
/// [`stdio::localize`]. Servers that cannot (a container-only server, a
/// missing secret) are left out with a warning: agents that use them are
/// told the server is unavailable.
fn local_mcp_servers(
    config: &Config,
    config_dir: &std::path::Path,
    tarsy_exe: Option<&std::path::Path>,
) -> (BTreeMap<String, McpServerConfig>, Vec<String>) {
    let mut servers = BTreeMap::new();
    let mut problems = Vec::new();
    for s in config.mcp_servers() {
        match config.mcp_server_config(&s.name, &EnvSecretResolver, &Placement::Local) {
            Ok(c) => {
                servers.insert(s.name.clone(), stdio::localize(c, config_dir, tarsy_exe));
            }
            Err(e) => problems.push(format!("MCP server {:?}: {e}", s.name)),
        }
    }
    (servers, problems)
}

/// The servers some chain uses (chain, stage agents, chat): the ones worth
/// health-checking (a built-in server nobody uses is not started).
fn used_mcp_servers(config: &Config) -> Vec<String> {
    let mut used = std::collections::BTreeSet::new();
    for chain in config.chains() {
        used.extend(chain.spec.mcp_servers.iter().flatten().cloned());
        used.extend(config.aggregate_chain_mcp_servers(&chain.spec));
        if let Some(chat) = &chain.spec.chat {
            used.extend(chat.mcp_servers.iter().flatten().cloned());
        }
    }
    used.into_iter().collect()
}

/// `/health`'s view of the MCP health monitor.
struct McpHealth(Arc<HealthMonitor>);

impl McpHealthSource for McpHealth {
    fn statuses(&self) -> std::collections::BTreeMap<String, McpServerHealth> {
        self.0
            .statuses()
            .into_iter()
            .map(|(name, s)| {
                (
                    name,
                    McpServerHealth {
                        healthy: s.healthy,
                        checked_at: s.checked_at,
                        error: s.error,
                    },
                )
            })
            .collect()
    }
}

/// `/health`'s warnings: the MCP health monitor's, the configuration
/// problems found at start, and the LLM providers whose circuit is open.
struct Warnings {
    monitor: Arc<SystemWarnings>,
    startup: Vec<SystemWarning>,
    breakers: Arc<tarsy_engine::fallback::CircuitBreakers>,
}

impl SystemWarningsSource for Warnings {
    fn warnings(&self) -> Vec<SystemWarning> {
        let mut all = self.startup.clone();
        all.extend(self.monitor.list().into_iter().map(|w| SystemWarning {
            id: w.id,
            category: w.category,
            message: w.message,
            details: w.details,
            server_id: w.server_id,
            created_at: w.created_at,
        }));
        let scope = tarsy_exec::breakers::LOCAL_SCOPE;
        all.extend(
            tarsy_exec::breakers::open_in_process(&self.breakers, scope)
                .into_iter()
                .map(|c| SystemWarning {
                    id: format!("llm-breaker-{}", c.provider),
                    category: "llm_circuit_breaker".into(),
                    message: c.message(),
                    details: c.details(),
                    server_id: None,
                    created_at: chrono::Utc::now(),
                }),
        );
        all
    }
}

/// A running local mode. Stop it with [`LocalApp::shutdown`].
pub struct LocalApp {
    rt: Arc<Runtime>,
    hub: EventHub,
    control: LocalControl,
    api_addr: Option<SocketAddr>,
    api_stop: CancellationToken,
    background: TaskTracker,
    warnings: Vec<String>,
    health: Option<Arc<HealthMonitor>>,
}

impl LocalApp {
    /// Checks that the stdio MCP servers the chains use can be started and
    /// the scripted providers' scripts, opens the database (migrating it),
    /// takes back sessions a previous run left in progress, starts admitting
    /// pending sessions and, when asked, serves the API.
    pub async fn start(options: LocalOptions) -> Result<Self> {
        let (mcp_configs, mut warnings) = local_mcp_servers(
            &options.config,
            &options.config_dir,
            options.tarsy_exe.as_deref(),
        );
        // Masking is on unless a server opts out: an opt-out is never silent.
        warnings.extend(options.config.unmasked_mcp_servers().into_iter().map(|s| {
            format!(
                "MCP server {s:?} opted out of data masking (dataMasking.enabled: false): \
                 its tool results reach the model and the records unmasked"
            )
        }));
        // Before anything runs: a missing command would otherwise surface as
        // a tool failure in the middle of an investigation.
        let used = used_mcp_servers(&options.config);
        if let Some(missing) =
            stdio::missing_commands(&options.config, &options.config_dir, &mcp_configs, &used)
                .into_iter()
                .next()
        {
            return Err(SessionError::MissingCommand(missing));
        }
        let opened = Store::connect_with(
            &options.database_url,
            ConnectOptions {
                max_connections: options.max_connections,
                ..ConnectOptions::default()
            },
        )
        .await
        .map_err(|e| {
            if e.is_disk_full() {
                SessionError::DiskFull(e)
            } else {
                e.into()
            }
        })?;
        let store = opened.patient(options.settings.store_patience);
        let api_store = opened.fail_fast(tarsy_store::FAIL_FAST_LIMIT);
        let config = Arc::new(options.config);
        let llm = match options.llm_service {
            Some(service) => LlmRouter::with_service(service, &options.config_dir),
            None => LlmRouter::new(&options.llm_addr, &options.config_dir)?,
        };
        llm.check_scripts(&config)?;
        let masking = Arc::new(
            MaskingService::new(
                config.masking_configs(),
                config.defaults.alert_masking.clone(),
            )
            .map_err(|e| SessionError::Config(format!("masking: {e}")))?,
        );
        for w in &warnings {
            tracing::warn!("{w}");
        }
        let mcp = McpClientFactory::new(mcp_configs.values().cloned(), masking.clone())
            .with_timeouts(options.mcp_timeouts);
        let hub = EventHub::start(api_store.clone());
        let publisher: Arc<dyn EventPublisher> = hub.publisher();
        let max_concurrent = options
            .max_concurrent_sessions
            .unwrap_or(config.defaults.max_concurrent_sessions as usize)
            .max(1);
        let llm = Arc::new(llm);
        let launcher = Launcher {
            store: store.clone(),
            llm: llm.clone(),
            mcp: Arc::new(mcp),
            mcp_configs,
            publisher: publisher.clone(),
            breakers: tarsy_exec::breakers::shared_breakers(
                &store,
                tarsy_exec::breakers::LOCAL_SCOPE,
                &config.defaults,
            ),
            runbooks: Arc::new(runbook_source(
                &config.defaults,
                tarsy_exec::runbook::token_from_env(),
            )),
            memory: tarsy_exec::memory::MemoryService::new(
                &config.defaults.memory,
                tarsy_exec::memory::embedder_for(&config, &options.llm_addr),
            ),
        };
        let rt = Arc::new(Runtime {
            store: store.clone(),
            api_store,
            config,
            llm,
            launcher,
            masking,
            publisher: publisher.clone(),
            pod_id: options.pod_id,
            max_concurrent,
            settings: options.settings,
            running: Mutex::new(HashMap::new()),
            chats: Mutex::new(HashMap::new()),
            admission: Notify::new(),
            submitting: tokio::sync::Mutex::new(()),
            released: Notify::new(),
            shutdown: CancellationToken::new(),
            interrupt: CancellationToken::new(),
            tasks: TaskTracker::new(),
            notifier: options.slack.map(|s| SlackNotifier::new(s, opened.clone())),
        });
        // The MCP health monitor runs with the API (it backs `/health`), and
        // its tool lists check the MCP selections of submitted alerts.
        let system_warnings = Arc::new(SystemWarnings::new());
        let monitor = options.listen.map(|_| {
            Arc::new(HealthMonitor::new(
                rt.launcher
                    .mcp_configs
                    .values()
                    .filter(|c| used.contains(&c.name))
                    .cloned(),
                system_warnings.clone(),
                options.mcp_timeouts,
            ))
        });
        let control = LocalControl {
            rt: rt.clone(),
            tools: match &monitor {
                Some(m) => m.clone(),
                None => Arc::new(NoToolCatalog),
            },
        };

        if options.recover {
            let recovered = admission::recover(&rt).await?;
            if recovered > 0 {
                tracing::info!(sessions = recovered, "took back sessions left in progress");
            }
            crate::chat::close_orphaned_answers(&rt).await?;
            crate::scoring::close_orphaned_attempts(&rt).await?;
        }
        let background = TaskTracker::new();
        background.spawn(admission::admission_loop(rt.clone(), options.recover));
        if let Some((retention, interval)) = options.retention {
            background.spawn(retention::run(
                rt.store.clone(),
                retention,
                interval,
                rt.shutdown.clone(),
            ));
        }

        let api_stop = CancellationToken::new();
        let mut health = None;
        let api_addr = match (options.listen, monitor) {
            (Some(addr), Some(monitor)) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| SessionError::Listen {
                        addr: addr.to_string(),
                        source,
                    })?;
                let bound = listener
                    .local_addr()
                    .map_err(|source| SessionError::Listen {
                        addr: addr.to_string(),
                        source,
                    })?;
                monitor.start();
                health = Some(monitor.clone());
                let startup = warnings
                    .iter()
                    .enumerate()
                    .map(|(i, w)| SystemWarning {
                        id: format!("config-{}", i + 1),
                        category: "configuration".into(),
                        message: w.clone(),
                        details: String::new(),
                        server_id: None,
                        created_at: chrono::Utc::now(),
                    })
                    .collect();
                let mut api_config = options.api;
                // Local mode's memory scope: the configured project.
                api_config
                    .memory_scope
                    .get_or_insert_with(|| rt.config.defaults.memory.project.clone());
                let router = Api::new(
                    hub.clone(),
                    Arc::new(control.clone()) as Arc<dyn SessionControl>,
                    api_config,
                )
                .with_mcp_health(Arc::new(McpHealth(monitor)))
                .with_warnings(Arc::new(Warnings {
                    monitor: system_warnings,
                    startup,
                    breakers: rt.launcher.breakers.clone(),
                }))
                .router();
                let stop = api_stop.clone();
                background.spawn(async move {
                    if let Err(e) = axum::serve(listener, router)
                        .with_graceful_shutdown(stop.cancelled_owned())
                        .await
                    {
                        tracing::error!(error = %e, "API server stopped");
                    }
                });
                Some(bound)
            }
            _ => None,
        };
        Ok(Self {
            rt,
            hub,
            control,
            api_addr,
            api_stop,
            background,
            warnings,
            health,
        })
    }

    /// Where the API listens, when it was asked for.
    pub fn api_addr(&self) -> Option<SocketAddr> {
        self.api_addr
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.rt.store
    }

    /// The event hub (WebSocket protocol, live subscriptions).
    pub fn hub(&self) -> &EventHub {
        &self.hub
    }

    /// Submit, cancel, chat — what the API calls.
    pub fn control(&self) -> Arc<dyn SessionControl> {
        Arc::new(self.control.clone())
    }

    /// Configuration problems found at start (servers left out).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// A notice for every LLM call that starts (progress display).
    pub fn llm_calls(&self) -> broadcast::Receiver<LlmCallNotice> {
        self.rt.llm.subscribe_calls()
    }

    /// Waits until the session is terminal and no longer driven by this
    /// process (or `timeout` passes) and returns it as stored. Woken when a
    /// session's loop lets go of it, so it returns as soon as that happens.
    pub async fn wait_for_terminal(&self, session_id: &str, timeout: Duration) -> Result<Session> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // Registered before the check: a release between the check and
            // the wait is not missed.
            let released = self.rt.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let session = self.rt.store.get_session(session_id).await?;
            if session.status.is_terminal() && !self.rt.is_driving(session_id) {
                return Ok(session);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(SessionError::Invalid(format!(
                    "session {session_id} is still {} after {}s",
                    session.status,
                    timeout.as_secs()
                )));
            }
            // A session driven by another process is never released here:
            // it is read again now and then.
            let recheck = (tokio::time::Instant::now() + OTHER_PROCESS_RECHECK).min(deadline);
            tokio::select! {
                _ = released => {}
                _ = tokio::time::sleep_until(recheck) => {}
            }
        }
    }

    /// Stops admitting and stops the API; lets running executions and chat
    /// answers go on for the shutdown grace, then interrupts them (an
    /// interrupted execution stays running in the store, its session in
    /// progress: the next start resumes it from its conversation; an
    /// interrupted chat answer is recorded as failed); closes the store.
    pub async fn shutdown(self) {
        self.rt.shutdown.cancel();
        self.api_stop.cancel();
        self.rt.tasks.close();
        if tokio::time::timeout(self.rt.settings.shutdown_grace, self.rt.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "interrupting what still runs after the shutdown grace; the next start resumes it"
            );
            self.rt.interrupt.cancel();
            for chat in crate::runtime::lock(&self.rt.chats).values() {
                chat.cancel.cancel();
            }
            if tokio::time::timeout(INTERRUPT_WAIT, self.rt.tasks.wait())
                .await
                .is_err()
            {
                tracing::warn!("executions did not stop after being interrupted");
            }
        }
        if let Some(monitor) = &self.health {
            monitor.stop().await;
        }
        self.background.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.background.wait()).await;
        self.rt.llm.stop();
        self.rt.store.close().await;
    }
}

impl Runtime {
    /// True while this process drives the session.
    pub(crate) fn is_driving(&self, session_id: &str) -> bool {
        crate::runtime::lock(&self.running).contains_key(session_id)
    }
}
