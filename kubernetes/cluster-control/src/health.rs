//! What `tarsy api`'s `/health` shows in cluster mode besides the database:
//! MCP server health as the operator recorded it (`MCPServer`
//! `status.lastHealth`), system warnings (servers that failed their last
//! check, LLM providers whose circuit breaker is open), and whether the
//! Kubernetes API answers. Checked in the background every few seconds, so
//! `/health` answers at once from the last snapshot and a slow API server
//! never makes the readiness probe time out.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use tarsy_api::{
    DependencyHealth, DependencyHealthSource, McpHealthSource, McpServerHealth, SystemWarning,
    SystemWarningsSource,
};
use tarsy_crds::MCPServer;
use tarsy_store::Store;

/// How long one check of the Kubernetes API may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// Name of the Kubernetes API in `/health`'s `dependencies`.
pub const KUBERNETES: &str = "kubernetes";

#[derive(Debug, Default)]
struct Snapshot {
    mcp: BTreeMap<String, McpServerHealth>,
    mcp_warnings: Vec<SystemWarning>,
    breaker_warnings: Vec<SystemWarning>,
    kubernetes: Option<DependencyHealth>,
}

/// The cluster's health as `/health` shows it; refresh it with
/// [`ClusterHealth::refresh`] or [`ClusterHealth::spawn`].
pub struct ClusterHealth {
    client: Client,
    store: Store,
    namespace: String,
    snapshot: RwLock<Snapshot>,
}

fn to_chrono(t: &Time) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(t.0.as_millisecond())
}

impl ClusterHealth {
    /// Health of `namespace`'s MCP servers and of the shared circuit
    /// breakers in `store`, read through `client`.
    pub fn new(client: Client, store: Store, namespace: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            client,
            store,
            namespace: namespace.into(),
            snapshot: RwLock::new(Snapshot::default()),
        })
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Snapshot> {
        self.snapshot.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Snapshot> {
        self.snapshot.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks everything once.
    pub async fn refresh(&self) {
        let now = Utc::now();
        let servers: Api<MCPServer> = Api::namespaced(self.client.clone(), &self.namespace);
        let listed =
            tokio::time::timeout(CHECK_TIMEOUT, servers.list(&ListParams::default())).await;
        let kubernetes = match listed {
            Ok(Ok(list)) => {
                let (mcp, warnings) = mcp_health(&list.items);
                let mut s = self.write();
                s.mcp = mcp;
                s.mcp_warnings = warnings;
                DependencyHealth {
                    status: "ok".into(),
                    checked_at: now,
                    error: None,
                }
            }
            // The last MCP health seen stays: the servers did not change
            // because the API server did not answer.
            Ok(Err(e)) => unreachable(now, e.to_string()),
            Err(_) => unreachable(
                now,
                format!("no answer within {}s", CHECK_TIMEOUT.as_secs()),
            ),
        };
        if !kubernetes.is_ok() {
            tracing::warn!(error = ?kubernetes.error, "the Kubernetes API is unreachable");
        }
        self.write().kubernetes = Some(kubernetes);
        match tarsy_exec::breakers::open_circuits(&self.store).await {
            Ok(open) => {
                let warnings = open
                    .iter()
                    .map(|c| SystemWarning {
                        id: format!("llm-breaker-{}-{}", c.scope, c.provider),
                        category: "llm_circuit_breaker".into(),
                        message: c.message(),
                        details: c.details(),
                        server_id: None,
                        created_at: now,
                    })
                    .collect();
                self.write().breaker_warnings = warnings;
            }
            // The database's own state is /health's `database` check.
            Err(e) => tracing::debug!(error = %e, "open circuit breakers not read"),
        }
    }

    /// Refreshes every `every` until the returned task is aborted.
    pub fn spawn(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                me.refresh().await;
                tokio::time::sleep(every).await;
            }
        })
    }
}

fn unreachable(now: DateTime<Utc>, error: String) -> DependencyHealth {
    DependencyHealth {
        status: "error".into(),
        checked_at: now,
        error: Some(error),
    }
}

/// MCP health from each server's `lastHealth` (servers never checked are
/// left out) and a warning per server whose last check failed.
fn mcp_health(servers: &[MCPServer]) -> (BTreeMap<String, McpServerHealth>, Vec<SystemWarning>) {
    let mut health = BTreeMap::new();
    let mut warnings = Vec::new();
    for s in servers {
        let Some(last) = s.status.as_ref().and_then(|st| st.last_health.as_ref()) else {
            continue;
        };
        let Some(checked_at) = last.checked_at.as_ref().and_then(to_chrono) else {
            continue;
        };
        let name = s.name_any();
        if !last.healthy {
            let details = last.message.clone().unwrap_or_default();
            warnings.push(SystemWarning {
                id: format!("mcp-health-{name}"),
                category: "mcp_health".into(),
                message: format!("MCP server {name} failed its last health check"),
                details,
                server_id: Some(name.clone()),
                created_at: checked_at,
            });
        }
        health.insert(
            name,
            McpServerHealth {
                healthy: last.healthy,
                checked_at,
                error: last.message.clone().filter(|_| !last.healthy),
            },
        );
    }
    (health, warnings)
}

impl McpHealthSource for ClusterHealth {
    fn statuses(&self) -> BTreeMap<String, McpServerHealth> {
        self.read().mcp.clone()
    }
}

impl SystemWarningsSource for ClusterHealth {
    fn warnings(&self) -> Vec<SystemWarning> {
        let s = self.read();
        let mut all = s.mcp_warnings.clone();
        all.extend(s.breaker_warnings.iter().cloned());
        if let Some(k) = s.kubernetes.as_ref().filter(|k| !k.is_ok()) {
            all.push(SystemWarning {
                id: "kubernetes-api".into(),
                category: "kubernetes".into(),
                message: "The Kubernetes API is unreachable: alerts, cancellation and chat fail"
                    .into(),
                details: k.error.clone().unwrap_or_default(),
                server_id: None,
                created_at: k.checked_at,
            });
        }
        all
    }
}

impl DependencyHealthSource for ClusterHealth {
    fn dependencies(&self) -> BTreeMap<String, DependencyHealth> {
        self.read()
            .kubernetes
            .clone()
            .map(|k| BTreeMap::from([(KUBERNETES.to_string(), k)]))
            .unwrap_or_default()
    }
}
