//! `tarsy serve`: local mode — the REST/WebSocket API and the orchestration
//! in one process, SQLite by default (Postgres with `DATABASE_URL`).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use tarsy_exec::DEFAULT_LLM_ADDR;
use tarsy_local::{LocalApp, LocalOptions};

/// Arguments of `tarsy serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Configuration directory: Chain, Agent, MCPServer and LLMProvider
    /// manifests (`*.yaml`), with `${VAR}` environment interpolation.
    #[arg(long, env = "TARSY_CONFIG_DIR")]
    pub config: PathBuf,
    /// Port of the API.
    #[arg(long, env = "TARSY_PORT", default_value_t = 8080)]
    pub port: u16,
    /// Address to listen on: an IP (with --port) or IP:PORT.
    #[arg(long, env = "TARSY_LISTEN", default_value = "127.0.0.1")]
    pub listen: String,
    /// Database: `postgres://…`, `sqlite:PATH` or `sqlite::memory:`.
    /// Default: a SQLite file in --data-dir.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// Directory of the default SQLite database.
    #[arg(long, env = "TARSY_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The LLM service (gRPC) for every provider but `scripted` ones.
    #[arg(long, env = "TARSY_LLM_ADDR", default_value = DEFAULT_LLM_ADDR)]
    pub llm_addr: String,
    /// Owner id of the sessions this process runs; keep it stable across
    /// restarts so sessions left in progress are taken back.
    #[arg(long, env = "TARSY_POD_ID")]
    pub pod_id: Option<String>,
    /// Seconds a stop (SIGTERM, Ctrl-C) lets running executions go on
    /// before interrupting them; interrupted ones are resumed by the next
    /// start.
    #[arg(long, env = "TARSY_SHUTDOWN_GRACE", default_value_t = 10)]
    pub shutdown_grace: u64,
    /// Seconds one write of an investigation waits out an unavailable
    /// database (a Postgres failover, a full disk) before its execution is
    /// interrupted; it resumes once the database takes writes again.
    #[arg(long, env = "TARSY_STORE_PATIENCE_SECONDS", default_value_t = 120)]
    pub store_patience: u64,
    /// How long sessions and live events are kept.
    #[command(flatten)]
    pub retention: crate::retention::RetentionArgs,
    /// Slack notifications.
    #[command(flatten)]
    pub notify: crate::notify::NotifyArgs,
    /// Take the author of alerts and chat messages from X-Forwarded-User /
    /// X-Forwarded-Email, as `tarsy api` does. Only behind an authenticating
    /// proxy that sets them (and drops client-sent ones): otherwise any
    /// client could claim any name.
    #[arg(long, env = "TARSY_TRUST_FORWARDED_IDENTITY")]
    pub trust_forwarded_identity: bool,
    /// Browser origin besides this server's own allowed to send
    /// state-changing requests and to open the WebSocket (repeatable; `*`:
    /// any). Other origins get 403.
    #[arg(long = "allowed-origin")]
    pub allowed_origins: Vec<String>,
    /// Serve on an address other machines can reach without any
    /// authentication: whoever reaches it can submit, cancel, chat and
    /// review. Without it, such an address needs
    /// --trust-forwarded-identity (an authenticating proxy in front).
    #[arg(long, env = "TARSY_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,
}

/// `$XDG_DATA_HOME/tarsy`, else `$HOME/.local/share/tarsy`, else `.tarsy`.
pub(crate) fn default_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("tarsy");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h).join(".local/share/tarsy");
    }
    PathBuf::from(".tarsy")
}

fn listen_addr(listen: &str, port: u16) -> anyhow::Result<SocketAddr> {
    if let Ok(addr) = listen.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let ip: IpAddr = listen
        .parse()
        .with_context(|| format!("--listen {listen:?} is neither an IP address nor IP:PORT"))?;
    Ok(SocketAddr::new(ip, port))
}

/// Refuses an address other machines can reach unless something
/// authenticates its users (an authenticating proxy in front, trusted with
/// --trust-forwarded-identity) or the user says it need not
/// (--insecure-no-auth): the API can start investigations, stop them and
/// review them.
fn check_exposure(listen: SocketAddr, behind_proxy: bool, insecure: bool) -> anyhow::Result<()> {
    if listen.ip().is_loopback() || behind_proxy || insecure {
        return Ok(());
    }
    anyhow::bail!(
        "refusing to serve on {listen} without authentication: anyone who reaches that address \
         could submit, cancel, chat about and review investigations. Put TARSy behind an \
         authenticating proxy and pass --trust-forwarded-identity, listen on 127.0.0.1 (the \
         default), or pass --insecure-no-auth to accept the exposure"
    )
}

/// Loads a configuration directory, listing every problem found.
pub fn load_config(dir: &Path) -> anyhow::Result<tarsy_config::Config> {
    tarsy_config::load_dir(dir).map_err(|errors| {
        let list: Vec<String> = errors.0.iter().map(|e| format!("  - {e}")).collect();
        anyhow::anyhow!(
            "the configuration in {} is invalid:\n{}",
            dir.display(),
            list.join("\n")
        )
    })
}

/// The database `tarsy serve` uses: `url`, else the SQLite file in
/// `data_dir` (created), else in the default data directory.
pub(crate) fn database_url(
    url: Option<String>,
    data_dir: Option<PathBuf>,
) -> anyhow::Result<String> {
    match url {
        Some(url) => Ok(url),
        None => {
            let dir = data_dir.unwrap_or_else(default_data_dir);
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("creating the data directory {}", dir.display()))?;
            Ok(format!("sqlite:{}", dir.join("tarsy.db").display()))
        }
    }
}

/// Runs `tarsy serve` until Ctrl-C or SIGTERM.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let config = load_config(&args.config)?;
    tarsy_pricing::install_catalog(config.defaults.pricing.catalog_url.as_deref()).await;
    let database_url = database_url(args.database_url, args.data_dir)?;
    let view = tarsy_api::configuration_view(&config, "local", None);
    let retention = args.retention.retention(&config.defaults)?;
    let slack = args.notify.slack(&config.defaults.notifications)?;
    let mut options = LocalOptions::new(config, &args.config);
    options.api.dashboard = Some(crate::dashboard::dashboard());
    options.api.trust_forwarded_identity = args.trust_forwarded_identity;
    options.api.allowed_origins = args.allowed_origins.clone();
    options.api.configuration = Some(Arc::new(tarsy_api::StaticConfiguration(view)));
    options.database_url = database_url.clone();
    options.llm_addr = args.llm_addr;
    let listen = listen_addr(&args.listen, args.port)?;
    check_exposure(listen, args.trust_forwarded_identity, args.insecure_no_auth)?;
    options.listen = Some(listen);
    options.tarsy_exe = std::env::current_exe().ok();
    if let Some(pod_id) = args.pod_id {
        options.pod_id = pod_id;
    }
    options.settings.shutdown_grace = std::time::Duration::from_secs(args.shutdown_grace);
    options.settings.store_patience = std::time::Duration::from_secs(args.store_patience);
    options.retention = Some(retention);
    options.slack = slack;
    let app = LocalApp::start(options)
        .await
        .context("starting local mode")?;
    if let Some(addr) = app.api_addr() {
        tracing::info!(%addr, database = %redact(&database_url), "TARSy is serving (local mode)");
        eprintln!("TARSy API on http://{addr}  (WebSocket: ws://{addr}/api/v1/ws)");
        if crate::dashboard::dashboard().is_built() {
            eprintln!("Dashboard on http://{addr}/ui/");
        } else {
            eprintln!(
                "Dashboard not built into this binary: cd dashboard && npm ci && npm run build, then rebuild tarsy"
            );
        }
    }
    crate::process::stop_requested().await;
    eprintln!(
        "shutting down: running executions have {}s to finish; those still running then are resumed by the next start",
        args.shutdown_grace
    );
    app.shutdown().await;
    Ok(())
}

/// A database URL without its password, for logs.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_accepts_ip_or_socket_address() {
        assert_eq!(
            listen_addr("0.0.0.0", 9000).unwrap(),
            "0.0.0.0:9000".parse().unwrap()
        );
        assert_eq!(
            listen_addr("127.0.0.1:7000", 9000).unwrap(),
            "127.0.0.1:7000".parse().unwrap()
        );
        assert!(listen_addr("localhost", 1).is_err());
    }

    #[test]
    fn a_reachable_address_needs_authentication_or_consent() {
        let open: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let error = check_exposure(open, false, false).unwrap_err().to_string();
        assert!(
            error.starts_with("refusing to serve on 0.0.0.0:8080 without authentication"),
            "{error}"
        );
        assert!(
            error.contains("--trust-forwarded-identity") && error.contains("--insecure-no-auth")
        );
        assert!(check_exposure(open, true, false).is_ok());
        assert!(check_exposure(open, false, true).is_ok());
        for local in ["127.0.0.1:8080", "[::1]:8080"] {
            assert!(check_exposure(local.parse().unwrap(), false, false).is_ok());
        }
        assert!(check_exposure("[::]:8080".parse().unwrap(), false, false).is_err());
        assert!(check_exposure("10.1.2.3:8080".parse().unwrap(), false, false).is_err());
    }

    #[test]
    fn passwords_never_reach_the_log() {
        assert_eq!(
            redact("postgres://tarsy:secret@db:5432/tarsy"),
            "postgres://tarsy:***@db:5432/tarsy"
        );
        assert_eq!(redact("sqlite:/tmp/t.db"), "sqlite:/tmp/t.db");
    }
}
