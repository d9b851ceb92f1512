//! The IO edge: kube-runtime Controllers that observe, call the sans-IO
//! reconciles ([`crate::alert`], [`crate::execution`], [`crate::resources`])
//! and carry out their decisions: Postgres writes, child creation, status
//! through server-side apply under one field manager, Events.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, future};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{self, Action};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::reflector::{self, Store as Reader};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tarsy_chain::{PendingSession, admit};
use tarsy_config::{Config, Defaults};
use tarsy_core::{EventPublisher, ExecutionStatus, SessionStatus};
use tarsy_crds::{
    Agent, AgentExecution, AgentExecutionStatus, Alert, AlertPhase, Chain, LLMProvider,
    MAX_STATUS_TEXT_CHARS, MCPServer, clip,
};
use tarsy_events::{StorePublisher, lifecycle};
use tarsy_exec::{LlmRouter, Summarizer};
use tarsy_store::{SessionOutcome, Store, StoreError};
use tracing::{info, warn};

use crate::alert::{AlertInputs, EventNote, StoreOp, SummaryRequest, reconcile_alert, stop_value};
use crate::conditions;
use crate::execution::{ExecutionInputs, PodAction, reconcile_execution};
use crate::metrics::{HttpState, Metrics};
use crate::pod::{PodInputs, PodSettings, build_pod};
use crate::resources::{SecretKeys, execution_servers, readiness, secret_refs};

/// The field manager of every status the operator writes, except MCPServer
/// `status.lastHealth` ([`HEALTH_FIELD_MANAGER`]).
pub const FIELD_MANAGER: &str = "tarsy-operator";
/// Field manager of MCPServer `status.lastHealth`. Separate from
/// [`FIELD_MANAGER`] so that the Ready-condition apply (which leaves
/// `lastHealth` out) and the health apply (which leaves the conditions out)
/// never remove each other's fields, without a read-modify-write race.
pub const HEALTH_FIELD_MANAGER: &str = "tarsy-operator-health";
/// Finalizer on Alerts: the session row is soft-deleted before the Alert goes.
pub const ALERT_FINALIZER: &str = "tarsy.dev/session";
/// Alerts reconciled at once. A reconcile may wait on an executive summary
/// call (up to its timeout), so this must be well above one: other Alerts
/// keep progressing meanwhile (one Alert is never reconciled twice at once).
pub const ALERT_CONCURRENCY: u16 = 16;
/// How soon an Alert whose summary was just written is looked at again (its
/// status change normally triggers that reconcile first).
const AFTER_SUMMARY: Duration = Duration::from_secs(1);

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
}

/// Errors of the operator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Kubernetes API failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Postgres failed.
    #[error("storage: {0}")]
    Store(#[from] StoreError),
    /// The finalizer helper failed.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    /// An object lacks a field the API server always sets.
    #[error("object has no {0}")]
    MissingField(&'static str),
    /// Serializing a patch failed.
    #[error("serialization: {0}")]
    Json(#[from] serde_json::Error),
    /// Leader election failed.
    #[error("leader election: {0}")]
    Lease(#[from] kube_lease_manager::LeaseManagerError),
    /// This replica lost its Lease: it stops so that two replicas never both act.
    #[error("lost leadership")]
    LostLeadership,
    /// Serving metrics failed.
    #[error("HTTP server: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// Short kind for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Kube(_) => "kube",
            Self::Store(_) => "store",
            Self::Finalizer(_) => "finalizer",
            Self::MissingField(_) => "missing_field",
            Self::Json(_) => "json",
            Self::Lease(_) => "lease",
            Self::LostLeadership => "lost_leadership",
            Self::Io(_) => "io",
        }
    }
}

/// State shared by every reconcile.
pub struct Context {
    client: Client,
    store: Store,
    settings: Settings,
    metrics: Arc<Metrics>,
    recorder: Recorder,
    chains: Reader<Chain>,
    agents: Reader<Agent>,
    mcp_servers: Reader<MCPServer>,
    providers: Reader<LLMProvider>,
    alerts: Reader<Alert>,
    executions: Reader<AgentExecution>,
    /// Sessions this process admitted that the Alert cache may not show yet
    /// (so that concurrent reconciles never over-admit).
    admitted: tokio::sync::Mutex<HashSet<String>>,
    /// Consecutive failures per object, for the error backoff.
    failures: Mutex<HashMap<String, u32>>,
    /// Masks alert data before it is stored (`None`: masking unavailable).
    alert_masker: Option<tarsy_masking::MaskingService>,
    /// Makes executive summary calls (`Err`: why it cannot; each summary then
    /// fails with that reason, fail-open).
    summarizer: Result<Summarizer, String>,
    /// Publishes session and stage lifecycle events (stored and NOTIFY-ed)
    /// for the API's WebSocket clients.
    publisher: Arc<dyn EventPublisher>,
}

impl Context {
    fn config_for(&self, namespace: &str) -> Config {
        fn in_ns<K: Resource<DynamicType = ()> + Clone>(r: &Reader<K>, ns: &str) -> Vec<K> {
            r.state()
                .iter()
                .filter(|o| o.meta().namespace.as_deref() == Some(ns))
                .map(|o| (**o).clone())
                .collect()
        }
        Config::from_resources(
            self.settings.defaults.clone(),
            &in_ns(&self.chains, namespace),
            &in_ns(&self.agents, namespace),
            &in_ns(&self.mcp_servers, namespace),
            &in_ns(&self.providers, namespace),
        )
    }

    async fn publish(&self, obj: &impl Resource<DynamicType = ()>, note: &EventNote) {
        let event = KubeEvent {
            type_: if note.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: note.reason.clone(),
            note: Some(tarsy_crds::clip(&note.note, 1024)),
            action: "Reconcile".into(),
            secondary: None,
        };
        // Events are best effort: a lost Event must not fail a reconcile.
        if let Err(e) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            warn!(error = %e, "publishing an Event failed");
        }
    }

    fn backoff(&self, key: &str, err: &Error) -> Action {
        let n = self
            .failures
            .lock()
            .map(|mut f| {
                let n = f.entry(key.to_string()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            })
            .unwrap_or(1);
        let base: u64 = match err {
            // Nothing will fix a malformed object soon: look rarely.
            Error::MissingField(_) | Error::Json(_) => 300,
            _ => 2,
        };
        let secs = base.saturating_mul(1u64 << n.min(8)).min(300);
        Action::requeue(Duration::from_secs(secs))
    }

    fn succeeded(&self, key: &str) {
        if let Ok(mut f) = self.failures.lock() {
            f.remove(key);
        }
    }
}

fn key_of(obj: &impl Resource) -> String {
    format!(
        "{}/{}",
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default()
    )
}

fn api_for<K>(client: &Client, ns: Option<&str>) -> Api<K>
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

fn reflect<K>(api: Api<K>) -> (Reader<K>, impl std::future::Future<Output = ()> + Send)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
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

    let alert_api = api_for::<Alert>(&client, ns.as_deref());
    let ae_api = api_for::<AgentExecution>(&client, ns.as_deref());
    let alert_controller = Controller::new(alert_api, watcher::Config::default())
        .owns(ae_api.clone(), watcher::Config::default())
        .with_config(controller::Config::default().concurrency(ALERT_CONCURRENCY));
    let ae_controller = Controller::new(ae_api, watcher::Config::default()).owns(
        api_for::<Pod>(&client, ns.as_deref()),
        watcher::Config::default().labels(tarsy_crds::contract::LABEL_EXECUTION),
    );

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
        executions: ae_controller.store(),
        admitted: tokio::sync::Mutex::new(HashSet::new()),
        failures: Mutex::new(HashMap::new()),
        alert_masker: alert_masker(&settings.defaults),
        summarizer: summarizer(&store_for_summary, &settings),
        publisher: Arc::new(StorePublisher::new(store_for_summary.clone(), None)),
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
    let all = async {
        tokio::join!(
            alerts,
            executions,
            chain_ready,
            agent_ready,
            mcp_ready,
            provider_ready
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

fn alert_masker(defaults: &Defaults) -> Option<tarsy_masking::MaskingService> {
    match tarsy_masking::MaskingService::new([], defaults.alert_masking.clone()) {
        Ok(m) => Some(m),
        Err(e) => {
            // Fail-open, as for alert data masking errors.
            warn!(error = %e, "alert data masking is unavailable; storing alert data unmasked");
            None
        }
    }
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

fn log_result<T, E: std::fmt::Display>(what: &'static str, r: Result<T, E>) -> future::Ready<()> {
    if let Err(e) = r {
        warn!(controller = what, error = %e, "reconcile failed");
    }
    future::ready(())
}

// ------------------------------------------------------------------ Alert

async fn reconcile_alert_io(alert: Arc<Alert>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.metrics.reconciled("alert");
    let ns = alert.namespace().ok_or(Error::MissingField("namespace"))?;
    let api: Api<Alert> = Api::namespaced(ctx.client.clone(), &ns);
    let key = key_of(alert.as_ref());
    let result = finalizer(&api, ALERT_FINALIZER, alert, |event| async {
        match event {
            FinalizerEvent::Apply(a) => apply_alert(a, &ctx).await,
            FinalizerEvent::Cleanup(a) => cleanup_alert(a, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)));
    if result.is_ok() {
        ctx.succeeded(&key);
    }
    result
}

fn error_policy_alert(alert: Arc<Alert>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.failed("alert", err.kind());
    ctx.backoff(&key_of(alert.as_ref()), err)
}

async fn cleanup_alert(alert: Arc<Alert>, ctx: &Context) -> Result<Action, Error> {
    let uid = alert.uid().ok_or(Error::MissingField("uid"))?;
    match ctx.store.soft_delete_session(&uid).await {
        Ok(()) | Err(StoreError::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    ctx.admitted.lock().await.remove(&uid);
    Ok(Action::await_change())
}

async fn apply_alert(cached: Arc<Alert>, ctx: &Context) -> Result<Action, Error> {
    let ns = cached.namespace().ok_or(Error::MissingField("namespace"))?;
    let name = cached.name_any();
    // Decide on the latest object, not a cache that may predate our own
    // last status write.
    let api: Api<Alert> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(alert) = api.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    let uid = alert.uid().ok_or(Error::MissingField("uid"))?;
    let config = ctx.config_for(&ns);

    let ae_api: Api<AgentExecution> = Api::namespaced(ctx.client.clone(), &ns);
    let listed = ae_api
        .list(&ListParams::default().labels(&tarsy_crds::contract::executions_selector(&name)))
        .await?;
    let executions: BTreeMap<String, AgentExecution> = listed
        .items
        .into_iter()
        .filter(|ae| {
            ae.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.kind == "Alert")
        })
        .map(|ae| (ae.name_any(), ae))
        .collect();

    // Only a Pending alert competes for a slot: its admission decision and
    // the writes that start it hold the lock so that concurrent reconciles
    // see each other. Every other reconcile runs without it.
    let phase = alert
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or(AlertPhase::Pending);
    let mut admission = match phase {
        AlertPhase::Pending => Some(ctx.admitted.lock().await),
        _ => None,
    };
    let admitted = admission
        .as_ref()
        .is_none_or(|guard| is_admitted(ctx, &alert, guard));

    let out = reconcile_alert(&AlertInputs {
        alert: &alert,
        config: &config,
        executions: &executions,
        admitted,
        now: Timestamp::now(),
    });

    for op in &out.store {
        match op {
            // Agents and records only ever see masked alert data (fail-open).
            StoreOp::CreateSession(new) => {
                let mut new = new.clone();
                if let Some(m) = &ctx.alert_masker {
                    new.alert_data = m.mask_alert_data(&new.alert_data);
                }
                perform(
                    &ctx.store,
                    ctx.publisher.as_ref(),
                    &StoreOp::CreateSession(new),
                )
                .await?;
            }
            op => perform(&ctx.store, ctx.publisher.as_ref(), op).await?,
        }
    }
    if let Some(guard) = admission.as_mut()
        && out.status.phase == Some(AlertPhase::InProgress)
    {
        guard.insert(uid.clone());
    }
    drop(admission);

    for ae in &out.create {
        match ae_api.create(&PostParams::default(), ae).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    for (name, reason) in &out.stop {
        let patch = serde_json::json!({
            "metadata": {"annotations": {tarsy_crds::STOP_ANNOTATION: stop_value(*reason)}}
        });
        match ae_api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    for note in &out.events {
        ctx.publish(&alert, note).await;
    }
    if Some(&out.status) != alert.status.as_ref() {
        apply_status::<Alert, _>(&ctx.client, &ns, &name, &out.status).await?;
    }
    if let Some(request) = &out.summarize {
        let mut status = out.status.clone();
        summarize(ctx, &config, &alert, request, &mut status).await?;
        apply_status::<Alert, _>(&ctx.client, &ns, &name, &status).await?;
        return Ok(Action::requeue(AFTER_SUMMARY));
    }
    if out.status.phase.is_some_and(|p| p.is_terminal()) {
        ctx.admitted.lock().await.remove(&uid);
    }
    Ok(match out.requeue {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    })
}

/// Makes the executive summary call the reconcile asked for (fail-open) and
/// records its result in the session row, `status` and, on failure, an
/// Event. Only a failing Postgres write is an error (the reconcile is then
/// retried and the call made again).
async fn summarize(
    ctx: &Context,
    config: &Config,
    alert: &Alert,
    request: &SummaryRequest,
    status: &mut tarsy_crds::AlertStatus,
) -> Result<(), Error> {
    let outcome = match (&ctx.summarizer, config.chain(&request.chain)) {
        (Err(e), _) => Err(e.clone()),
        (Ok(_), None) => Err(format!("chain {:?} no longer exists", request.chain)),
        (Ok(s), Some(chain)) => s
            .generate(
                config,
                &request.session_id,
                &chain.spec,
                &request.final_analysis,
            )
            .await
            .map_err(|e| e.to_string()),
    };
    let written = match &outcome {
        Ok(text) => {
            ctx.store
                .set_executive_summary(&request.session_id, Some(text), None)
                .await
        }
        Err(e) => {
            ctx.store
                .set_executive_summary(&request.session_id, None, Some(e))
                .await
        }
    };
    match written {
        Ok(()) | Err(StoreError::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    match outcome {
        Ok(text) => {
            info!(session_id = %request.session_id, "executive summary generated");
            status.executive_summary = Some(clip(&text, MAX_STATUS_TEXT_CHARS));
            status.executive_summary_error = None;
        }
        Err(e) => {
            warn!(session_id = %request.session_id, error = %e, "executive summary failed (the session still completes)");
            status.executive_summary = None;
            status.executive_summary_error = Some(clip(&e, MAX_STATUS_TEXT_CHARS));
            ctx.publish(
                alert,
                &EventNote {
                    warning: true,
                    reason: "ExecutiveSummaryFailed".into(),
                    note: e,
                },
            )
            .await;
        }
    }
    Ok(())
}

/// Whether `alert` (Pending) may start: `admit` over every Pending alert in
/// creation order against the running ones (cache + admitted just now).
fn is_admitted(ctx: &Context, alert: &Alert, recently: &HashSet<String>) -> bool {
    let Some(limit) = ctx.settings.max_concurrent_sessions else {
        return true;
    };
    let all = ctx.alerts.state();
    let mut running: HashSet<String> = recently.clone();
    let mut pending = Vec::new();
    for a in &all {
        let Some(uid) = a.uid() else { continue };
        let phase = a
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or(AlertPhase::Pending);
        match phase {
            AlertPhase::InProgress | AlertPhase::Cancelling => {
                running.insert(uid);
            }
            AlertPhase::Pending if !running.contains(&uid) && a.spec.cancel != Some(true) => {
                pending.push(PendingSession {
                    id: uid,
                    created: a.creation_timestamp().map(|t| t.0),
                });
            }
            _ => {}
        }
    }
    pending.retain(|p| !running.contains(&p.id));
    let Some(uid) = alert.uid() else { return false };
    if !pending.iter().any(|p| p.id == uid) {
        pending.push(PendingSession {
            id: uid.clone(),
            created: alert.creation_timestamp().map(|t| t.0),
        });
    }
    admit(&pending, running.len(), Some(limit)).contains(&uid)
}

/// Performs one Postgres write and publishes the lifecycle event it implies
/// (`session.status`, `stage.status`) for WebSocket clients, once: only
/// when the write changed something.
async fn perform(store: &Store, publisher: &dyn EventPublisher, op: &StoreOp) -> Result<(), Error> {
    match op {
        StoreOp::CreateSession(new) => {
            store.create_session(new.clone()).await?;
        }
        StoreOp::StartSession { session_id } => {
            let started = store
                .transition_session_status(
                    session_id,
                    &[SessionStatus::Pending],
                    SessionStatus::InProgress,
                )
                .await?;
            if started {
                lifecycle::publish_session_status(publisher, session_id, SessionStatus::InProgress)
                    .await;
            }
        }
        StoreOp::CreateStage(new) => {
            let stage = store.create_stage(new.clone()).await?;
            if stage.status == ExecutionStatus::Pending {
                store
                    .update_stage_status(&stage.id, ExecutionStatus::Active, None)
                    .await?;
                let stage_ref = lifecycle::StageRef {
                    id: &stage.id,
                    name: &stage.stage_name,
                    index: stage.stage_index,
                };
                lifecycle::publish_stage_status(publisher, &stage.session_id, stage_ref, "started")
                    .await;
            }
        }
        StoreOp::CreateExecution(new) => {
            store.create_agent_execution(new.clone()).await?;
        }
        StoreOp::FinishStage {
            stage_id,
            status,
            error,
        } => match store
            .update_stage_status(stage_id, *status, error.as_deref())
            .await
        {
            Ok(stage) => {
                let stage_ref = lifecycle::StageRef {
                    id: &stage.id,
                    name: &stage.stage_name,
                    index: stage.stage_index,
                };
                lifecycle::publish_stage_status(
                    publisher,
                    &stage.session_id,
                    stage_ref,
                    status.as_str(),
                )
                .await;
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        },
        StoreOp::FinishSession {
            session_id,
            status,
            final_analysis,
            executive_summary,
            executive_summary_error,
            error,
        } => match store
            .finish_session(
                session_id,
                SessionOutcome {
                    status: *status,
                    final_analysis: final_analysis.clone(),
                    executive_summary: full_summary(store, session_id, executive_summary).await,
                    executive_summary_error: executive_summary_error.clone(),
                    error_message: error.clone(),
                },
            )
            .await
        {
            Ok(_) => lifecycle::publish_session_status(publisher, session_id, *status).await,
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        },
    }
    Ok(())
}

/// The summary to store at the end: the status holds it clipped, the row
/// (written when it was generated) in full; the row's text is kept when the
/// status's is its clipped form.
async fn full_summary(store: &Store, session_id: &str, clipped: &Option<String>) -> Option<String> {
    let clipped = clipped.as_ref()?;
    let stored = store
        .get_session(session_id)
        .await
        .ok()
        .and_then(|row| row.executive_summary);
    match stored {
        Some(full) if clip(&full, MAX_STATUS_TEXT_CHARS) == *clipped => Some(full),
        _ => Some(clipped.clone()),
    }
}

/// Writes `status` of `K` `name` with server-side apply under
/// [`FIELD_MANAGER`] (forced: the operator is the authority for the fields
/// it sets).
async fn apply_status<K, S>(client: &Client, ns: &str, name: &str, status: &S) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    S: Serialize,
{
    apply_status_as::<K, S>(client, FIELD_MANAGER, ns, name, status).await
}

/// [`apply_status`] under field manager `manager`.
async fn apply_status_as<K, S>(
    client: &Client,
    manager: &str,
    ns: &str,
    name: &str,
    status: &S,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    S: Serialize,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// Copies the MCP server outcomes `ae`'s runner reported into the
/// `status.lastHealth` of the namespace's MCPServers where they are newer
/// ([`crate::health::health_updates`]). Best effort: a failed write is
/// logged, never fails the execution's reconcile (the next status change of
/// any execution using the server retries it).
async fn report_health(ctx: &Context, ns: &str, ae: &AgentExecution) {
    let outcomes = ae.status.as_ref().map_or(&[][..], |s| &s.mcp_servers[..]);
    if outcomes.is_empty() {
        return;
    }
    let known: BTreeMap<String, Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>> = ctx
        .mcp_servers
        .state()
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(ns))
        .filter_map(|s| {
            let checked = s
                .status
                .as_ref()
                .and_then(|st| st.last_health.as_ref())
                .and_then(|h| h.checked_at.clone());
            s.metadata.name.clone().map(|n| (n, checked))
        })
        .collect();
    for (name, health) in crate::health::health_updates(outcomes, &known) {
        let status = serde_json::json!({ "lastHealth": health });
        if let Err(e) =
            apply_status_as::<MCPServer, _>(&ctx.client, HEALTH_FIELD_MANAGER, ns, &name, &status)
                .await
        {
            tracing::warn!(server = %name, error = %e, "MCPServer lastHealth not written");
        }
    }
}

// --------------------------------------------------------- AgentExecution

fn error_policy_execution(ae: Arc<AgentExecution>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.failed("agentexecution", err.kind());
    ctx.backoff(&key_of(ae.as_ref()), err)
}

async fn reconcile_execution_io(
    ae: Arc<AgentExecution>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    ctx.metrics.reconciled("agentexecution");
    let key = key_of(ae.as_ref());
    let result = execution_io(&ae, &ctx).await;
    if result.is_ok() {
        ctx.succeeded(&key);
    }
    result
}

async fn execution_io(cached: &AgentExecution, ctx: &Context) -> Result<Action, Error> {
    let ns = cached.namespace().ok_or(Error::MissingField("namespace"))?;
    let name = cached.name_any();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let pod = pods.get_opt(&name).await?;
    // Read the execution after the pod: a runner records its terminal phase
    // before its pod ends, so this order never mistakes a finished runner
    // for a failed pod.
    let api: Api<AgentExecution> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(ae) = api.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    let ae = &ae;
    report_health(ctx, &ns, ae).await;
    let now = Timestamp::now();
    let mut out = reconcile_execution(&ExecutionInputs {
        execution: ae,
        pod: pod.as_ref(),
        pod_start_timeout: ctx.settings.pod_start_timeout,
        now,
    });

    match out.pod {
        PodAction::None => {}
        PodAction::Delete => match pods.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        },
        PodAction::Create => match desired_pod(ae, ctx, &ns, now) {
            Ok(p) => match pods.create(&PostParams::default(), &p).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            },
            Err(msg) => {
                // Bad input (a missing server, clashing ports): fail the
                // execution once, clearly, instead of retrying forever.
                let mut status = out.status.take().unwrap_or_default();
                status.phase = Some(tarsy_crds::ExecutionPhase::Failed);
                status.error = Some(tarsy_crds::clip(&msg, 4096));
                status.completed_at =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
                conditions::set(
                    &mut status.conditions,
                    conditions::POD_READY,
                    false,
                    "InvalidPod",
                    msg.clone(),
                    ae.metadata.generation,
                    now,
                );
                out.status = Some(status);
                out.event = Some(EventNote {
                    warning: true,
                    reason: "InvalidPod".into(),
                    note: msg,
                });
            }
        },
    }
    // A failure the runner could not record goes to Postgres too.
    if let Some((phase, status)) = out
        .status
        .as_ref()
        .and_then(|s| s.phase.map(|p| (p, s)))
        .filter(|(p, _)| p.is_terminal())
    {
        let id = tarsy_exec::ids::execution_id(
            &ae.spec.session_id,
            ae.spec.stage.index,
            ae.spec.agent_index,
        );
        match ctx
            .store
            .update_agent_execution_status(&id, phase.into(), status.error.as_deref())
            .await
        {
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(note) = &out.event {
        ctx.publish(ae, note).await;
    }
    if let Some(status) = out
        .status
        .as_ref()
        .filter(|s| status_changes(ae.status.as_ref(), s))
    {
        apply_status::<AgentExecution, _>(&ctx.client, &ns, &name, status).await?;
    }
    if ae
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .is_some_and(|p| p.is_terminal())
    {
        ctx.metrics.execution_finished(ae);
    }
    Ok(match out.requeue {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    })
}

/// Whether applying `ours` would change what is observed (only the fields
/// the operator sets are compared).
fn status_changes(observed: Option<&AgentExecutionStatus>, ours: &AgentExecutionStatus) -> bool {
    let Some(o) = observed else { return true };
    o.pod_name != ours.pod_name
        || o.conditions != ours.conditions
        || o.observed_generation != ours.observed_generation
        || (ours.phase.is_some() && o.phase != ours.phase)
        || (ours.error.is_some() && o.error != ours.error)
}

/// How long after the session deadline a pod's `activeDeadlineSeconds`
/// ends it, should the operator's own stop not have.
const POD_DEADLINE_GRACE_SECS: i64 = 30;

fn desired_pod(
    ae: &AgentExecution,
    ctx: &Context,
    ns: &str,
    now: Timestamp,
) -> Result<Pod, String> {
    let config = ctx.config_for(ns);
    let servers = execution_servers(&config, &ae.spec.resolved.mcp_servers)?;
    let chain = config.chain(&ae.spec.chain);
    let service_account = chain.and_then(|c| c.spec.service_account_name.clone());
    let timeout = chain
        .and_then(|c| config.session_timeout(&c.spec).ok())
        .unwrap_or(ctx.settings.defaults.session_timeout);
    let started = if ae.spec.kind == tarsy_crds::ExecutionKind::Chat {
        // A chat answer gets the whole session timeout from its own creation
        // (its session may have ended long ago).
        ae.metadata
            .creation_timestamp
            .as_ref()
            .map_or(now.as_second(), |t| t.0.as_second())
    } else {
        ctx.alerts
            .state()
            .iter()
            .find(|a| a.namespace().as_deref() == Some(ns) && a.name_any() == ae.spec.alert_name)
            .and_then(|a| a.status.as_ref().and_then(|s| s.started_at.clone()))
            .map_or(now.as_second(), |t| t.0.as_second())
    };
    let timeout_secs = i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX);
    // The operator stops executions at the deadline itself (recorded as
    // TimedOut); the pod's own deadline is a backstop that fires later.
    let left = started
        .saturating_add(timeout_secs)
        .saturating_sub(now.as_second())
        .max(1)
        .saturating_add(POD_DEADLINE_GRACE_SECS);
    build_pod(
        &PodInputs {
            execution: ae,
            alert_name: &ae.spec.alert_name,
            servers: &servers,
            service_account: service_account.as_deref(),
            deadline_seconds: left,
        },
        &ctx.settings.pod,
    )
    .map_err(|e| e.to_string())
}

// ---------------------------------------------------- configuration kinds

/// A GitOps kind with a Ready condition.
trait ConfigKind:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Serialize
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    const KIND: &'static str;
    fn conditions(&self) -> &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition];
    fn observed_generation(&self) -> Option<i64>;
}

macro_rules! config_kind {
    ($t:ty, $kind:literal) => {
        impl ConfigKind for $t {
            const KIND: &'static str = $kind;
            fn conditions(&self) -> &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition] {
                self.status
                    .as_ref()
                    .map_or(&[], |s| s.conditions.as_slice())
            }
            fn observed_generation(&self) -> Option<i64> {
                self.status.as_ref().and_then(|s| s.observed_generation)
            }
        }
    };
}
config_kind!(Chain, "Chain");
config_kind!(Agent, "Agent");
config_kind!(MCPServer, "MCPServer");
config_kind!(LLMProvider, "LLMProvider");

/// How often Ready conditions are re-checked (they depend on other objects
/// and on Secrets, which are not watched).
const CONFIG_RECHECK: Duration = Duration::from_secs(60);

async fn config_controller<K: ConfigKind>(client: &Client, ns: Option<&str>, ctx: Arc<Context>) {
    Controller::new(api_for::<K>(client, ns), watcher::Config::default())
        .run(reconcile_config::<K>, error_policy_config::<K>, ctx)
        .for_each(|r| log_result(K::KIND, r))
        .await;
}

fn error_policy_config<K: ConfigKind>(obj: Arc<K>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.failed(K::KIND, err.kind());
    ctx.backoff(&key_of(obj.as_ref()), err)
}

async fn reconcile_config<K: ConfigKind>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.metrics.reconciled(K::KIND);
    let ns = obj
        .meta()
        .namespace
        .clone()
        .ok_or(Error::MissingField("namespace"))?;
    let name = obj.meta().name.clone().ok_or(Error::MissingField("name"))?;
    let config = ctx.config_for(&ns);
    let secrets = secret_keys(&ctx.client, &ns, &secret_refs(&config, K::KIND, &name)).await?;
    let r = readiness(&config, K::KIND, &name, &secrets);
    let mut conds = obj.conditions().to_vec();
    let was = conditions::status_of(&conds, conditions::READY).map(str::to_string);
    let generation = obj.meta().generation;
    conditions::set(
        &mut conds,
        conditions::READY,
        r.ready,
        r.reason,
        r.message.clone(),
        generation,
        Timestamp::now(),
    );
    let unchanged = obj.conditions() == conds.as_slice() && obj.observed_generation() == generation;
    if !unchanged {
        let status = serde_json::json!({
            "conditions": conds,
            "observedGeneration": generation,
        });
        apply_status::<K, _>(&ctx.client, &ns, &name, &status).await?;
        let now_ready = if r.ready { "True" } else { "False" };
        if !r.ready && was.as_deref() != Some(now_ready) {
            ctx.publish(
                obj.as_ref(),
                &EventNote {
                    warning: true,
                    reason: r.reason.to_string(),
                    note: r.message,
                },
            )
            .await;
        }
    }
    ctx.succeeded(&key_of(obj.as_ref()));
    Ok(Action::requeue(CONFIG_RECHECK))
}

/// The keys (never the values) of the named Secrets that exist.
async fn secret_keys(
    client: &Client,
    ns: &str,
    refs: &BTreeSet<(String, String)>,
) -> Result<SecretKeys, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let mut out = SecretKeys::new();
    let names: BTreeSet<&String> = refs.iter().map(|(n, _)| n).collect();
    for name in names {
        if let Some(secret) = api.get_opt(name).await? {
            let keys = secret
                .data
                .iter()
                .flat_map(|d| d.keys().cloned())
                .chain(secret.string_data.iter().flat_map(|d| d.keys().cloned()))
                .collect();
            out.insert(name.clone(), keys);
        }
    }
    Ok(out)
}
