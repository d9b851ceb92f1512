//! What every reconcile shares: the client, the store, the watched
//! configuration, metrics, Events, admission bookkeeping, the backoff.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tarsy_exec::notify::SlackNotifier;

use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder};
use kube::runtime::reflector::Store as Reader;
use kube::{Client, Resource};
use tarsy_config::Config;
use tarsy_core::EventPublisher;
use tarsy_crds::{Agent, AgentExecution, Alert, Chain, LLMProvider, MCPServer};
use tarsy_masking::MaskingService;
use tarsy_store::Store;
use tracing::warn;

use crate::alert::EventNote;
use crate::error::Error;
use crate::metrics::Metrics;
use crate::run::Settings;
use crate::summaries::Summaries;

/// State shared by every reconcile.
pub struct Context {
    pub(crate) client: Client,
    pub(crate) store: Store,
    pub(crate) settings: Settings,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) recorder: Recorder,
    pub(crate) chains: Reader<Chain>,
    pub(crate) agents: Reader<Agent>,
    pub(crate) mcp_servers: Reader<MCPServer>,
    pub(crate) providers: Reader<LLMProvider>,
    pub(crate) alerts: Reader<Alert>,
    pub(crate) executions: Reader<AgentExecution>,
    /// Sessions this process admitted that the Alert cache may not show yet
    /// (so that concurrent reconciles never over-admit).
    pub(crate) admitted: tokio::sync::Mutex<HashSet<String>>,
    /// Consecutive failures per object, for the error backoff.
    pub(crate) failures: Mutex<HashMap<String, u32>>,
    /// Masks alert data before it is stored (`None`: masking unavailable).
    pub(crate) alert_masker: Option<MaskingService>,
    /// Executive summaries being made, outside the reconciles.
    pub(crate) summaries: Arc<Summaries>,
    /// Publishes session and stage lifecycle events (stored and NOTIFY-ed)
    /// for the API's WebSocket clients.
    pub(crate) publisher: Arc<dyn EventPublisher>,
    /// Slack notifications, when configured.
    pub(crate) notifier: Option<SlackNotifier>,
}

impl Context {
    pub(crate) fn config_for(&self, namespace: &str) -> Config {
        fn in_ns<K: Resource<DynamicType = ()> + Clone>(r: &Reader<K>, ns: &str) -> Vec<K> {
            r.state()
                .iter()
                .filter(|o| o.meta().namespace.as_deref() == Some(ns))
                .map(|o| (**o).clone())
                .collect()
        }
        tarsy_crds::config::from_resources(
            self.settings.defaults.clone(),
            &in_ns(&self.chains, namespace),
            &in_ns(&self.agents, namespace),
            &in_ns(&self.mcp_servers, namespace),
            &in_ns(&self.providers, namespace),
        )
    }

    pub(crate) async fn publish(&self, obj: &impl Resource<DynamicType = ()>, note: &EventNote) {
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

    pub(crate) fn backoff(&self, key: &str, err: &Error) -> Action {
        let n = self
            .failures
            .lock()
            .map(|mut f| {
                // Objects deleted while failing never succeed again: forget
                // everything rather than grow (counts only tune the delay).
                if f.len() >= MAX_FAILING_OBJECTS && !f.contains_key(key) {
                    f.clear();
                }
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

    pub(crate) fn succeeded(&self, key: &str) {
        if let Ok(mut f) = self.failures.lock() {
            f.remove(key);
        }
    }
}

/// Failing objects whose failure counts are remembered.
const MAX_FAILING_OBJECTS: usize = 4096;

pub(crate) fn key_of(obj: &impl Resource) -> String {
    format!(
        "{}/{}",
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default()
    )
}
