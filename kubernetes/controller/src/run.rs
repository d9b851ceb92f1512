//! Wiring: the settings, the watches and caches, leadership, and the
//! controllers (Alert, AgentExecution, configuration Ready conditions) with
//! the HTTP endpoints.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, future};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, Store as Reader};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tarsy_config::Defaults;
use tarsy_crds::{Agent, AgentExecution, Alert, Chain, LLMProvider, MCPServer};
use tarsy_events::StorePublisher;
use tarsy_exec::notify::{SlackNotifier, SlackSettings};
use tarsy_exec::retention::{self, Retention};
use tarsy_exec::{LlmRouter, Summarizer};
use tarsy_store::Store;
use tracing::{info, warn};

use crate::alert_io::{error_policy_alert, reconcile_alert_io};
use crate::config_ready::config_controller;
use crate::context::Context;
use crate::error::Error;
use crate::execution_io::{error_policy_execution, reconcile_execution_io};
use crate::metrics::{HttpState, Metrics};
use crate::pod::PodSettings;
use crate::status_apply::FIELD_MANAGER;
use crate::summaries::Summaries;

/// Alerts reconciled at once (one Alert is never reconciled twice at once;
/// executive summary calls run outside the reconciles).
pub const ALERT_CONCURRENCY: u16 = 16;
/// AgentExecution changes the execution controller may lag behind before
/// the shared watch waits for it.
const SHARED_WATCH_BUFFER: usize = 1024;
/// Leader election settings.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    /// Lease name.
    pub lease_name: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// This replica's identity (its pod name).
    pub identity: String,
    /// Lease duration in seconds.
    pub lease_seconds: u64,
}

/// Operator settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Investigation pod settings.
    pub pod: PodSettings,
    /// Configuration defaults (from flags/environment).
    pub defaults: Defaults,
    /// Sessions run at once; `None`: unlimited.
    pub max_concurrent_sessions: Option<usize>,
    /// How long a pod may fail to start before its execution fails.
    pub pod_start_timeout: Duration,
    /// Replacement pods an execution may get when its pod is lost before
    /// the runner records a result.
    pub pod_restart_limit: u32,
    /// Wait before the first replacement pod (doubled for each further one).
    pub pod_restart_backoff: Duration,
    /// Watch only this namespace (`None`: all namespaces).
    pub namespace: Option<String>,
    /// Address of `/metrics`, `/healthz`, `/readyz` (`None`: not served).
    pub http_addr: Option<SocketAddr>,
    /// Leader election (`None`: act immediately; only for one replica).
    pub leader_election: Option<LeaderElection>,
    /// Name of this controller in Events.
    pub reporter: String,
    /// Directory relative `scripted` LLMProvider scripts are read from (the
    /// executive summary call; other providers go to the LLM service at
    /// `pod.llm_service_addr`).
    pub script_dir: PathBuf,
    /// Limit of the executive summary call.
    pub summary_timeout: Duration,
    /// How long a finished Alert is kept (`None`: forever).
    pub alert_ttl: Option<Duration>,
    /// Retention sweeps of the store and their interval, run by the leader
    /// (`None`: none).
    pub retention: Option<(Retention, Duration)>,
    /// Slack notifications of sessions that end (`None`: none).
    pub slack: Option<SlackSettings>,
}

pub(crate) fn api_for<K>(client: &Client, ns: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Nothing reads managedFields, and it is often the larger part of an
/// object.
fn strip_managed_fields<K: Resource>(o: &mut K) {
    o.managed_fields_mut().clear();
}

fn reflect<K>(api: Api<K>) -> (Reader<K>, impl std::future::Future<Output = ()> + Send)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(strip_managed_fields)
        .reflect(writer)
        .applied_objects()
        .for_each(|r| {
            if let Err(e) = r {
                warn!(error = %e, "watch error");
            }
            future::ready(())
        });
    (reader, stream)
}

/// Runs the operator until it fails or loses leadership: waits for the
/// Lease (when configured), then runs the Alert, AgentExecution and
/// configuration controllers and the HTTP endpoints.
pub async fn run(client: Client, store: Store, mut settings: Settings) -> Result<(), Error> {
    // Scores are counted from the Alerts (`alert_io`), not where they are
    // written: most attempts end in a judge's pod.
    let store = store.without_score_metrics();
    // Runners complete their configuration with the operator's defaults.
    settings.pod.runner_defaults = settings
        .defaults
        .to_env()
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
    let metrics = Arc::new(Metrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    let ns = settings.namespace.clone();

    let (chains, chains_task) = reflect(api_for::<Chain>(&client, ns.as_deref()));
    let (agents, agents_task) = reflect(api_for::<Agent>(&client, ns.as_deref()));
    let (mcp_servers, mcp_task) = reflect(api_for::<MCPServer>(&client, ns.as_deref()));
    let (providers, providers_task) = reflect(api_for::<LLMProvider>(&client, ns.as_deref()));
    // Background tasks end with `run` (also when its future is dropped).
    let mut tasks = TaskGuard(vec![
        tokio::spawn(chains_task),
        tokio::spawn(agents_task),
        tokio::spawn(mcp_task),
        tokio::spawn(providers_task),
    ]);

    // The Alert and AgentExecution controllers keep their objects without
    // managedFields, and see investigation pods as metadata only: what
    // the operator holds grows with the number of Alerts, so it holds
    // only what it reads.
    let (alerts_reader, alerts_writer) = reflector::store();
    let alert_events = watcher(
        api_for::<Alert>(&client, ns.as_deref()),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(strip_managed_fields)
    .reflect(alerts_writer)
    .applied_objects();
    // One AgentExecution watch feeds the execution cache, the Alert
    // controller (its children) and the execution controller, in that
    // order: an Alert reconciled for a child's change reads a cache that
    // already has it (two watches would each be at their own point).
    let (executions, executions_writer) = reflector::store_shared(SHARED_WATCH_BUFFER);
    let execution_triggers = executions_writer
        .subscribe()
        .expect("a store_shared writer has subscribers");
    let execution_events = watcher(
        api_for::<AgentExecution>(&client, ns.as_deref()),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(strip_managed_fields)
    .reflect_shared(executions_writer)
    .touched_objects();
    let alert_controller = Controller::for_stream(alert_events, alerts_reader)
        .owns_stream(execution_events)
        .with_config(controller::Config::default().concurrency(ALERT_CONCURRENCY));
    let pod_events = watcher(
        api_for::<PartialObjectMeta<Pod>>(&client, ns.as_deref()),
        watcher::Config::default().labels(tarsy_crds::contract::LABEL_EXECUTION),
    )
    .default_backoff()
    .touched_objects();
    let ae_controller = Controller::for_shared_stream(execution_triggers, executions.clone())
        .owns_stream(pod_events);

    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: settings.reporter.clone(),
            instance: settings
                .leader_election
                .as_ref()
                .map(|l| l.identity.clone()),
        },
    );
    let store_for_summary = store.clone();
    let ctx = Arc::new(Context {
        client: client.clone(),
        store,
        metrics: metrics.clone(),
        recorder,
        chains: chains.clone(),
        agents: agents.clone(),
        mcp_servers: mcp_servers.clone(),
        providers: providers.clone(),
        alerts: alert_controller.store(),
        executions,
        admitted: tokio::sync::Mutex::new(HashSet::new()),
        failures: Mutex::new(HashMap::new()),
        alert_masker: tarsy_exec::intake::alert_masker(&settings.defaults),
        summaries: Arc::new(Summaries::new(
            summarizer(&store_for_summary, &settings),
            store_for_summary.clone(),
        )),
        publisher: Arc::new(StorePublisher::new(store_for_summary.clone(), None)),
        notifier: settings
            .slack
            .clone()
            .map(|s| SlackNotifier::new(s, store_for_summary.clone())),
        settings: settings.clone(),
    });

    if let Some(addr) = settings.http_addr {
        let refresh_ctx = ctx.clone();
        let state = HttpState {
            metrics: metrics.clone(),
            ready: ready.clone(),
            refresh: Arc::new(move || {
                refresh_ctx
                    .metrics
                    .refresh(&refresh_ctx.alerts.state(), &refresh_ctx.executions.state());
            }),
        };
        tasks.0.push(tokio::spawn(async move {
            if let Err(e) = crate::metrics::serve(addr, state).await {
                warn!(error = %e, "metrics server stopped");
            }
        }));
    }

    // Leadership first: a replica that is not the leader only serves probes.
    let mut leadership = None;
    if let Some(le) = &settings.leader_election {
        let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &le.lease_name)
            .with_namespace(&le.namespace)
            .with_identity(&le.identity)
            .with_duration(le.lease_seconds)
            .with_grace(le.lease_seconds / 3)
            .with_field_manager(FIELD_MANAGER)
            .build()
            .await?;
        let (mut rx, handle) = manager.watch().await;
        info!(identity = %le.identity, "waiting for leadership");
        while !*rx.borrow_and_update() {
            if rx.changed().await.is_err() {
                return Err(Error::LostLeadership);
            }
        }
        info!(identity = %le.identity, "acquired leadership");
        leadership = Some((rx, handle));
    }
    // Readers become ready once their first list completed.
    let _ = tokio::join!(
        chains.wait_until_ready(),
        agents.wait_until_ready(),
        mcp_servers.wait_until_ready(),
        providers.wait_until_ready()
    );
    ready.store(true, Ordering::Relaxed);

    let alerts = alert_controller
        .run(reconcile_alert_io, error_policy_alert, ctx.clone())
        .for_each(|r| log_result("alert", r));
    let executions = ae_controller
        .run(reconcile_execution_io, error_policy_execution, ctx.clone())
        .for_each(|r| log_result("agentexecution", r));
    let chain_ready = config_controller::<Chain>(&client, ns.as_deref(), ctx.clone());
    let agent_ready = config_controller::<Agent>(&client, ns.as_deref(), ctx.clone());
    let mcp_ready = config_controller::<MCPServer>(&client, ns.as_deref(), ctx.clone());
    let provider_ready = config_controller::<LLMProvider>(&client, ns.as_deref(), ctx.clone());
    // Retention runs with the controllers: on the leader only.
    let sweeps = async {
        if let Some((retention, interval)) = settings.retention {
            let stop = tokio_util::sync::CancellationToken::new();
            retention::run(ctx.store.clone(), retention, interval, stop).await;
        }
    };
    let all = async {
        tokio::join!(
            alerts,
            executions,
            chain_ready,
            agent_ready,
            mcp_ready,
            provider_ready,
            sweeps
        );
    };
    match leadership {
        None => {
            all.await;
            Ok(())
        }
        Some((mut rx, _handle)) => {
            let lost = async move {
                loop {
                    if rx.changed().await.is_err() || !*rx.borrow() {
                        return;
                    }
                }
            };
            tokio::select! {
                _ = all => Ok(()),
                _ = lost => {
                    ready.store(false, Ordering::Relaxed);
                    Err(Error::LostLeadership)
                }
            }
        }
    }
}

fn summarizer(store: &Store, settings: &Settings) -> Result<Summarizer, String> {
    let router = LlmRouter::new(&settings.pod.llm_service_addr, &settings.script_dir)
        .map_err(|e| format!("no LLM client for the executive summary: {e}"))?;
    Ok(Summarizer {
        llm: Arc::new(router),
        store: store.clone(),
        // Published through Postgres NOTIFY, like the runners' events.
        publisher: Arc::new(tarsy_events::StorePublisher::new(store.clone(), None)),
        timeout: settings.summary_timeout,
    })
}

/// Aborts the tasks it holds when dropped.
struct TaskGuard(Vec<tokio::task::JoinHandle<()>>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

pub(crate) fn log_result<T, R, Q>(
    what: &'static str,
    r: Result<T, controller::Error<R, Q>>,
) -> future::Ready<()>
where
    R: std::error::Error,
    Q: std::error::Error,
{
    match r {
        Ok(_) => {}
        // A change of an object deleted since: expected after every
        // deletion, nothing to do.
        Err(e @ controller::Error::ObjectNotFound(_)) => {
            tracing::debug!(controller = what, error = %e, "reconcile skipped");
        }
        Err(e) => warn!(controller = what, error = %e, "reconcile failed"),
    }
    future::ready(())
}
