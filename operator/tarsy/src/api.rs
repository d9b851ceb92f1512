//! `tarsy api`: the REST/WebSocket API in cluster mode. Sessions are read
//! from Postgres; alerts, cancellation and chat become Kubernetes resources
//! of one namespace (`tarsy-cluster-control`); live events arrive from every
//! writer (operator, runners in their pods) through Postgres LISTEN/NOTIFY.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tarsy_api::{Api, ApiConfig};
use tarsy_cluster_control::KubeSessionControl;
use tarsy_cluster_control::health::ClusterHealth;

/// How often `/health`'s cluster checks (Kubernetes API, MCP servers'
/// health, open circuit breakers) run.
const HEALTH_INTERVAL: Duration = Duration::from_secs(15);

/// Where a pod finds its own namespace.
const IN_CLUSTER_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// How long open connections (WebSockets) may delay the exit after SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Flags of `tarsy api` (each also read from its environment variable).
#[derive(Debug, Args)]
pub struct ApiArgs {
    /// Address to listen on.
    #[arg(long, env = "TARSY_LISTEN", default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
    /// Namespace alerts are created in and configuration is read from
    /// (default: the pod's namespace, else `default`).
    #[arg(long, env = "TARSY_NAMESPACE")]
    namespace: Option<String>,
    /// Take the author from X-Forwarded-User / X-Forwarded-Email (only
    /// behind an authenticating proxy that sets them).
    #[arg(long, env = "TARSY_TRUST_FORWARDED_IDENTITY")]
    trust_forwarded_identity: bool,
    /// Browser origin besides the API's own allowed to send state-changing
    /// requests and to open the WebSocket (repeatable; `*`: any).
    #[arg(long = "allowed-origin", alias = "allowed-ws-origin")]
    allowed_origins: Vec<String>,
    /// Postgres URL of the session store.
    #[arg(long, env = "TARSY_DATABASE_URL", hide_env_values = true)]
    database_url: String,
}

/// The namespace to use: the flag, else the pod's own, else `default`.
fn namespace(flag: Option<String>) -> String {
    flag.filter(|n| !n.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string(IN_CLUSTER_NAMESPACE_FILE)
                .ok()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| "default".to_string())
}

/// Serves the API until SIGTERM or Ctrl-C.
pub async fn run(args: ApiArgs) -> anyhow::Result<()> {
    let defaults = crate::process::defaults_from_env()?;
    let namespace = namespace(args.namespace);
    // Migrations as `tarsy controller` runs them (idempotent, serialised by
    // the migrator's lock), so whichever starts first prepares the schema.
    let store = tarsy_store::Store::connect(&args.database_url)
        .await
        .context("connecting to the session store")?
        // A request answers 503 at once while the database is down.
        .fail_fast(tarsy_store::FAIL_FAST_LIMIT);
    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API")?;
    let hub = tarsy_events::EventHub::start(store.clone());
    let health = ClusterHealth::new(client.clone(), store.clone(), namespace.clone());
    // The first snapshot before serving: the first probe sees real values.
    health.refresh().await;
    let health_task = health.spawn(HEALTH_INTERVAL);
    let view = tarsy_cluster_control::objects::ClusterView::new(
        client.clone(),
        namespace.clone(),
        defaults.clone(),
    );
    let control = Arc::new(
        KubeSessionControl::new(client, store.clone(), namespace.clone(), defaults)
            .with_publisher(hub.publisher()),
    );
    let config = ApiConfig {
        trust_forwarded_identity: args.trust_forwarded_identity,
        allowed_origins: args.allowed_origins,
        dashboard: Some(crate::dashboard::dashboard()),
        configuration: Some(view.clone()),
        cluster_objects: Some(view),
        // Memories of this namespace and its projects only.
        memory_scope: Some(namespace.clone()),
        ..ApiConfig::default()
    };
    let router = Api::new(hub, control, config)
        .with_mcp_health(health.clone())
        .with_warnings(health.clone())
        .with_dependencies(health)
        .router();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    tracing::info!(addr = %args.listen, %namespace, "TARSy API is serving (cluster mode)");

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = stop_rx.await;
            })
            .into_future(),
    );
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => {
            r.context("the API server task failed")?.context("the API server stopped")?;
            return Ok(());
        }
        _ = crate::process::stop_requested() => {}
    }
    tracing::info!("shutting down: finishing open requests");
    let _ = stop_tx.send(());
    match tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await {
        Ok(r) => r
            .context("the API server task failed")?
            .context("the API server stopped")?,
        // Long-lived WebSockets: clients reconnect to another replica.
        Err(_) => {
            tracing::info!("open connections remain after the grace period; closing them");
            server.abort();
        }
    }
    health_task.abort();
    // Not `store.close()`: it would wait for the event hub's LISTEN
    // connection, which lives as long as the process.
    tracing::info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_flag_wins_and_blank_falls_back() {
        assert_eq!(namespace(Some("sre".into())), "sre");
        let fallback = namespace(Some("  ".into()));
        assert!(!fallback.is_empty());
    }
}
