//! Cluster-mode [`SessionControl`] for `tarsy api`: alerts, cancellation and
//! chat as Kubernetes resources (their path through the operator:
//! `docs/architecture.md#cluster-mode` and `#follow-up-chat`).
//!
//! - an alert becomes an `Alert` (generated name `api-…`); its UID is the
//!   session id. The operator writes the session row (masked) when it
//!   reconciles the Alert; the answer waits briefly for it, so the session
//!   can be read right after;
//! - cancel sets `spec.cancel` on a running Alert, or puts the operator's
//!   stop annotation on the finished Alert's running chat execution;
//! - a chat question's records are stored here and the Alert asks the
//!   operator for its `AgentExecution` of kind `chat`
//!   ([`tarsy_crds::contract::CHAT_ANNOTATION`]); the operator runs its pod,
//!   the runner answers;
//! - a re-score starts the attempt's records here and the Alert asks the
//!   operator for the judge's `AgentExecution` of kind `scoring`
//!   ([`tarsy_crds::contract::SCORE_ANNOTATION`]); a review's feedback
//!   starts the feedback reflector's records and asks for its
//!   `AgentExecution` of kind `memory`
//!   ([`tarsy_crds::contract::REFLECT_ANNOTATION`]).
//!
//! One writer per record: the operator writes the session row and every
//! AgentExecution; this crate writes Alerts, chat questions, the scoring
//! attempts and the feedback reflectors it starts.
//!
//! [`health::ClusterHealth`] is what `/health` reports besides the
//! database: MCP servers' `lastHealth`, warnings (failed servers, open
//! circuit breakers, an unreachable Kubernetes API) and the Kubernetes API's
//! reachability, checked in the background.
//!
//! The namespace's configuration (Chain, Agent, MCPServer, LLMProvider) is
//! listed on every request instead of being cached by watches: submissions
//! are rare, a list is cheap, and a Chain applied a moment before an alert is
//! always seen (every API replica agrees with the operator's view).

#![warn(missing_docs)]

mod chat;
pub mod health;
mod memory;
pub mod objects;
mod scoring;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use tarsy_api::{
    AlertAccepted, CancelError, CancelOutcome, ChatAccepted, ChatError, ChatSubmission, NewAlert,
    ScoreAccepted, ScoreError, SessionControl, SubmitError,
};
use tarsy_config::{Config, Defaults};
use tarsy_core::{EventPublisher, SessionStatus};
use tarsy_crds::contract::{executions_selector, owned_by};
use tarsy_crds::{
    Agent, AgentExecution, Alert, AlertPhase, AlertSource, AlertSpec, Chain, ExecutionKind,
    LLMProvider, MCPServer, McpSelectionSpec,
};
use tarsy_exec::intake::alert_masker;
use tarsy_store::{Store, StoreError};

/// How long an alert submission waits for the operator's session row.
const SESSION_ROW_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Prefix of the names of Alerts submitted through the API.
pub const ALERT_NAME_PREFIX: &str = "api-";
/// `spec.source.system` of Alerts submitted through the API.
pub const SOURCE_SYSTEM: &str = "api";

/// [`SessionControl`] on the Kubernetes API of one namespace and the
/// Postgres session store. Cheap to share behind an `Arc`.
pub struct KubeSessionControl {
    client: Client,
    store: Store,
    namespace: String,
    defaults: Defaults,
    /// Masks chat questions before they are stored, as alert data is
    /// (`None`: masking unavailable, stored unmasked — fail-open).
    alert_masker: Option<tarsy_masking::MaskingService>,
    /// Where `session.status` of new and cancelling sessions is published.
    publisher: Option<Arc<dyn EventPublisher>>,
}

impl KubeSessionControl {
    /// Control over `namespace`. `defaults` must be the operator's (the same
    /// `TARSY_DEFAULT_*` settings): they complete the configuration and
    /// decide how alert data is masked.
    pub fn new(
        client: Client,
        store: Store,
        namespace: impl Into<String>,
        defaults: Defaults,
    ) -> Self {
        let alert_masker = alert_masker(&defaults);
        Self {
            client,
            // The operator counts the scoring attempts this ends.
            store: store.without_score_metrics(),
            namespace: namespace.into(),
            defaults,
            alert_masker,
            publisher: None,
        }
    }

    /// Publishes `session.status` (cancelling on a cancel request) and
    /// accepted chat questions through `publisher`, as local mode does, so
    /// session lists and chats update live (the operator publishes the
    /// rest).
    pub fn with_publisher(mut self, publisher: Arc<dyn EventPublisher>) -> Self {
        self.publisher = Some(publisher);
        self
    }

    /// Where records this control writes are published: the publisher
    /// given, else straight to the store (the events table).
    fn record_publisher(&self) -> Arc<dyn EventPublisher> {
        match &self.publisher {
            Some(p) => p.clone(),
            None => Arc::new(tarsy_events::StorePublisher::new(self.store.clone(), None)),
        }
    }

    async fn publish_status(&self, session_id: &str, status: SessionStatus) {
        if let Some(publisher) = &self.publisher {
            tarsy_events::lifecycle::publish_session_status(publisher.as_ref(), session_id, status)
                .await;
        }
    }

    /// The namespace alerts are created in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Merge-patches `alert`: a cancel, or a request to the operator
    /// through an annotation (the operator alone writes AgentExecutions).
    async fn patch_alert(
        &self,
        alert: &Alert,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        self.api::<Alert>()
            .patch(
                &alert.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
            .map(|_| ())
    }

    /// The namespace's configuration, built as the operator builds it.
    async fn config(&self) -> Result<Config, kube::Error> {
        namespace_config(&self.client, &self.namespace, &self.defaults).await
    }

    /// The tools each MCPServer of the namespace last listed (runners
    /// report them; the operator keeps them in `status.lastHealth`). A
    /// server never used yet, or a built-in one, is absent: not checked.
    async fn offered_tools(&self) -> Result<BTreeMap<String, Vec<String>>, kube::Error> {
        let servers = self.api::<MCPServer>().list(&ListParams::default()).await?;
        Ok(tarsy_crds::config::offered_tools(&servers.items))
    }

    /// The Alert whose UID is `session_id`. Selectors cannot match UIDs, so
    /// the namespace's Alerts are listed — metadata only, since each Alert
    /// may carry up to 1 MiB of data — and the one found is read.
    async fn alert_by_uid(&self, session_id: &str) -> Result<Option<Alert>, kube::Error> {
        let api = self.api::<Alert>();
        let list = api.list_metadata(&ListParams::default()).await?;
        let Some(name) = list
            .items
            .into_iter()
            .find(|a| a.metadata.uid.as_deref() == Some(session_id))
            .and_then(|a| a.metadata.name)
        else {
            return Ok(None);
        };
        let alert = api.get_opt(&name).await?;
        // Deleted and re-created under the same name meanwhile: not ours.
        Ok(alert.filter(|a| a.metadata.uid.as_deref() == Some(session_id)))
    }

    /// The Alert's AgentExecutions (by the operator's label, then owner UID).
    async fn executions_of(&self, alert: &Alert) -> Result<Vec<AgentExecution>, kube::Error> {
        let uid = alert.metadata.uid.clone().unwrap_or_default();
        let list = self
            .api::<AgentExecution>()
            .list(&ListParams::default().labels(&executions_selector(&alert.name_any())))
            .await?;
        Ok(list
            .items
            .into_iter()
            .filter(|ae| owned_by(ae, &uid))
            .collect())
    }

    /// Waits (at most [`SESSION_ROW_WAIT`]) until the operator has written
    /// the session row of a just-created Alert.
    async fn wait_for_session_row(&self, session_id: &str) {
        let deadline = tokio::time::Instant::now() + SESSION_ROW_WAIT;
        while tokio::time::Instant::now() < deadline {
            if self.store.get_session(session_id).await.is_ok() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        tracing::info!(
            session_id,
            "the operator has not written the session row yet"
        );
    }
}

/// The configuration of `namespace` (its Chains, Agents, MCPServers and
/// LLMProviders over the built-ins), built as the operator builds it.
pub async fn namespace_config(
    client: &Client,
    namespace: &str,
    defaults: &Defaults,
) -> Result<Config, kube::Error> {
    let lp = ListParams::default();
    let (chains, agents, servers, providers) = (
        Api::<Chain>::namespaced(client.clone(), namespace),
        Api::<Agent>::namespaced(client.clone(), namespace),
        Api::<MCPServer>::namespaced(client.clone(), namespace),
        Api::<LLMProvider>::namespaced(client.clone(), namespace),
    );
    let (chains, agents, servers, providers) = futures::try_join!(
        chains.list(&lp),
        agents.list(&lp),
        servers.list(&lp),
        providers.list(&lp),
    )?;
    Ok(tarsy_crds::config::from_resources(
        defaults.clone(),
        &chains.items,
        &agents.items,
        &servers.items,
        &providers.items,
    ))
}

/// Whether a Kubernetes API failure may pass by itself (server trouble,
/// throttling, the connection) rather than being a refusal.
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code >= 500 || s.code == 429,
        _ => true,
    }
}

fn kube_message(what: &str, e: &kube::Error) -> String {
    format!("Kubernetes API: {what}: {e}")
}

fn submit_kube(what: &str, e: kube::Error) -> SubmitError {
    let msg = kube_message(what, &e);
    tracing::warn!(error = %e, "{what}");
    match &e {
        _ if transient(&e) => SubmitError::Unavailable(msg),
        // The API server's own validation (CEL rules, schema bounds).
        kube::Error::Api(s) if s.code == 422 || s.code == 400 => {
            SubmitError::Refused(format!("the Alert was refused: {}", s.message))
        }
        _ => SubmitError::Internal(msg),
    }
}

fn cancel_kube(what: &str, e: kube::Error) -> CancelError {
    tracing::warn!(error = %e, "{what}");
    CancelError::Internal(kube_message(what, &e))
}

#[async_trait]
impl SessionControl for KubeSessionControl {
    async fn submit_alert(&self, alert: NewAlert) -> Result<AlertAccepted, SubmitError> {
        let config = self
            .config()
            .await
            .map_err(|e| submit_kube("reading the configuration", e))?;
        let tools = match &alert.mcp_selection {
            Some(_) => self
                .offered_tools()
                .await
                .map_err(|e| submit_kube("reading the MCP servers", e))?,
            None => BTreeMap::new(),
        };
        let chain = config.check_alert(&alert, &tools)?;
        let object = Alert {
            metadata: ObjectMeta {
                generate_name: Some(ALERT_NAME_PREFIX.to_string()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: AlertSpec {
                alert_type: alert.alert_type,
                data: alert.data,
                chain_ref: alert.chain,
                runbook_url: alert.runbook_url,
                mcp_selection: alert.mcp_selection.as_ref().map(McpSelectionSpec::from),
                author: Some(alert.author),
                source: Some(AlertSource {
                    system: SOURCE_SYSTEM.to_string(),
                    fingerprint: None,
                }),
                cancel: None,
            }
            .into(),
            status: None,
        };
        let created = self
            .api::<Alert>()
            .create(&PostParams::default(), &object)
            .await
            .map_err(|e| submit_kube("creating the Alert", e))?;
        let uid = created
            .metadata
            .uid
            .clone()
            .ok_or_else(|| SubmitError::Internal("the created Alert has no uid".into()))?;
        // The operator writes the session row (masked) when it reconciles
        // the Alert, moments later: wait for it briefly, so that a client
        // reading the session right after this answer finds it.
        self.wait_for_session_row(&uid).await;
        tracing::info!(session_id = %uid, alert = %created.name_any(), chain = %chain.name, "alert submitted");
        Ok(AlertAccepted {
            session_id: uid,
            chain_id: chain.name.clone(),
            status: SessionStatus::Pending,
        })
    }

    async fn cancel(&self, session_id: &str) -> Result<CancelOutcome, CancelError> {
        let alert = self
            .alert_by_uid(session_id)
            .await
            .map_err(|e| cancel_kube("listing Alerts", e))?;
        let Some(alert) = alert else {
            // The Alert is gone (deleted): the row may remain, nothing runs.
            return match self.store.get_session(session_id).await {
                Ok(s) => Err(CancelError::NothingToCancel { status: s.status }),
                Err(StoreError::NotFound { .. }) => {
                    Err(CancelError::NotFound(session_id.to_string()))
                }
                Err(e) => Err(CancelError::Internal(e.to_string())),
            };
        };
        let phase = alert
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or(AlertPhase::Pending);
        if !phase.is_terminal() {
            if alert.spec.cancel != Some(true) {
                let patch = serde_json::json!({"spec": {"cancel": true}});
                match self.patch_alert(&alert, &patch).await {
                    Ok(()) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        return Err(CancelError::NotFound(session_id.to_string()));
                    }
                    Err(e) => return Err(cancel_kube("setting spec.cancel", e)),
                }
            }
            tracing::info!(session_id, alert = %alert.name_any(), "cancellation requested");
            // A Pending session runs nothing: the operator ends it at once.
            let status = if phase == AlertPhase::Pending {
                SessionStatus::Cancelled
            } else {
                self.publish_status(session_id, SessionStatus::Cancelling)
                    .await;
                SessionStatus::Cancelling
            };
            return Ok(CancelOutcome::Session { status });
        }
        let executions = self
            .executions_of(&alert)
            .await
            .map_err(|e| cancel_kube("listing AgentExecutions", e))?;
        let running = executions
            .into_iter()
            .filter(|ae| ae.spec.kind == ExecutionKind::Chat)
            .filter(|ae| {
                !ae.status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .is_some_and(|p| p.is_terminal())
            })
            .max_by_key(|ae| ae.spec.stage.index);
        if let Some(ae) = running {
            let patch = serde_json::json!({
                "metadata": {"annotations": {tarsy_crds::STOP_ANNOTATION: tarsy_crds::STOP_CANCELLED}}
            });
            match self
                .api::<AgentExecution>()
                .patch(
                    &ae.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {}
                // Gone meanwhile: it ended, nothing left to stop.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(cancel_kube("annotating the chat execution", e)),
            }
            tracing::info!(session_id, execution = %ae.name_any(), "chat answer cancellation requested");
            let stage_id = ae
                .spec
                .stage
                .id
                .clone()
                .unwrap_or_else(|| tarsy_exec::ids::stage_id(session_id, ae.spec.stage.index));
            return Ok(CancelOutcome::Chat {
                chat_id: ae.spec.chat.map(|c| c.chat_id).unwrap_or_default(),
                stage_id,
            });
        }
        Err(CancelError::NothingToCancel {
            status: phase.into(),
        })
    }

    async fn submit_chat_message(
        &self,
        submission: ChatSubmission,
    ) -> Result<ChatAccepted, ChatError> {
        chat::submit(self, submission).await
    }

    async fn rescore(&self, session_id: &str) -> Result<ScoreAccepted, ScoreError> {
        scoring::rescore(self, session_id).await
    }

    async fn learn_from_feedback(&self, session_id: &str) {
        memory::learn_from_feedback(self, session_id).await;
    }
}
