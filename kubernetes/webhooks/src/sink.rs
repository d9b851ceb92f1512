//! Where the bridge puts Alerts: the [`AlertSink`] trait, its Kubernetes
//! implementation ([`KubeAlertSink`]) and, with the `testing` feature, an
//! in-memory one for tests and benchmarks (`InMemoryAlertSink`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tarsy_crds::{Alert, AlertPhase, AlertSpec};

/// Field manager of every write the bridge makes.
pub const FIELD_MANAGER: &str = "tarsy-webhooks";
/// Label naming the system that created an Alert.
pub const SOURCE_LABEL: &str = "tarsy.dev/source";
/// Label holding the (DNS-safe form of the) Alertmanager fingerprint.
pub const FINGERPRINT_LABEL: &str = "tarsy.dev/alertmanager-fingerprint";
/// Annotation: when the firing episode began (Alertmanager `startsAt`).
pub const STARTS_AT_ANNOTATION: &str = "tarsy.dev/starts-at";
/// Annotation: when Alertmanager reported the alert resolved (`endsAt`).
pub const RESOLVED_AT_ANNOTATION: &str = "tarsy.dev/resolved-at";

/// An Alert the bridge wants to exist.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredAlert {
    /// Object name (deterministic, DNS-1123).
    pub name: String,
    /// Labels (source, fingerprint).
    pub labels: BTreeMap<String, String>,
    /// Annotations (starts-at).
    pub annotations: BTreeMap<String, String>,
    /// The spec.
    pub spec: AlertSpec,
}

impl DesiredAlert {
    /// The resource to create in `namespace`.
    pub fn to_resource(&self, namespace: &str) -> Alert {
        Alert {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(namespace.to_string()),
                labels: Some(self.labels.clone()),
                annotations: Some(self.annotations.clone()),
                ..ObjectMeta::default()
            },
            spec: self.spec.clone().into(),
            status: None,
        }
    }
}

/// What the bridge needs to know about an existing Alert.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertRecord {
    /// Object name.
    pub name: String,
    /// Phase, if the operator has set one (none yet = just created).
    pub phase: Option<AlertPhase>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// Whether `spec.cancel` is set.
    pub cancel: bool,
}

impl AlertRecord {
    /// Reads the record from a resource.
    pub fn from_alert(alert: &Alert) -> Self {
        Self {
            name: alert.metadata.name.clone().unwrap_or_default(),
            phase: alert.status.as_ref().and_then(|s| s.phase),
            annotations: alert.metadata.annotations.clone().unwrap_or_default(),
            cancel: alert.spec.cancel.unwrap_or(false),
        }
    }

    /// True until the investigation reached a terminal phase.
    pub fn is_active(&self) -> bool {
        !self.phase.is_some_and(AlertPhase::is_terminal)
    }
}

/// Result of [`AlertSink::create_if_absent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    /// The Alert was created.
    Created,
    /// An object of that name already existed; nothing was written.
    AlreadyExists,
}

/// A sink operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SinkError {
    /// The API refused the object (admission webhook denial, schema or CEL
    /// validation): retrying the same request cannot succeed.
    #[error("rejected: {message}")]
    Rejected {
        /// The API's message.
        message: String,
    },
    /// The named Alert does not exist.
    #[error("Alert {name:?} not found")]
    NotFound {
        /// Name looked up.
        name: String,
    },
    /// The API could not be reached or failed; a retry may succeed.
    #[error("Kubernetes API unavailable: {message}")]
    Unavailable {
        /// Why.
        message: String,
    },
}

impl SinkError {
    /// True when retrying the whole notification later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}

/// Storage of Alert resources, as the bridge uses it.
#[async_trait]
pub trait AlertSink: Send + Sync + 'static {
    /// Creates the Alert unless an object with its name exists (atomic: two
    /// concurrent calls create it once).
    async fn create_if_absent(&self, alert: &DesiredAlert) -> Result<CreateOutcome, SinkError>;
    /// The Alert named `name`, if any.
    async fn get(&self, name: &str) -> Result<Option<AlertRecord>, SinkError>;
    /// Every Alert labelled with this fingerprint ([`FINGERPRINT_LABEL`]).
    async fn find_by_fingerprint(&self, fingerprint: &str) -> Result<Vec<AlertRecord>, SinkError>;
    /// Sets one annotation, leaving the others alone.
    async fn annotate(&self, name: &str, key: &str, value: &str) -> Result<(), SinkError>;
    /// Sets `spec.cancel: true`.
    async fn cancel(&self, name: &str) -> Result<(), SinkError>;
}

#[cfg(feature = "testing")]
pub use in_memory::InMemoryAlertSink;

/// The in-memory sink (feature `testing`: tests and benchmarks only).
#[cfg(feature = "testing")]
mod in_memory {
    use std::collections::{BTreeMap, HashMap};
    use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

    use async_trait::async_trait;
    use tarsy_crds::{Alert, AlertPhase, AlertStatus};

    use super::{
        AlertRecord, AlertSink, CreateOutcome, DesiredAlert, FINGERPRINT_LABEL, SinkError,
    };

    #[derive(Default)]
    struct Store {
        alerts: BTreeMap<String, Alert>,
        by_fingerprint: HashMap<String, Vec<String>>,
        fail_with: Option<SinkError>,
    }

    /// In-memory [`AlertSink`] for tests and benchmarks. `set_phase` plays the
    /// operator's part.
    #[derive(Clone)]
    pub struct InMemoryAlertSink {
        namespace: String,
        inner: Arc<Mutex<Store>>,
    }

    impl InMemoryAlertSink {
        /// An empty sink whose Alerts live in `namespace`.
        pub fn new(namespace: impl Into<String>) -> Self {
            Self {
                namespace: namespace.into(),
                inner: Arc::default(),
            }
        }

        fn lock(&self) -> MutexGuard<'_, Store> {
            self.inner.lock().unwrap_or_else(PoisonError::into_inner)
        }

        fn guard(&self) -> Result<MutexGuard<'_, Store>, SinkError> {
            let g = self.lock();
            match &g.fail_with {
                Some(e) => Err(e.clone()),
                None => Ok(g),
            }
        }

        /// Every stored Alert, by name.
        pub fn alerts(&self) -> Vec<Alert> {
            self.lock().alerts.values().cloned().collect()
        }

        /// The stored Alert named `name`.
        pub fn alert(&self, name: &str) -> Option<Alert> {
            self.lock().alerts.get(name).cloned()
        }

        /// Number of stored Alerts.
        pub fn len(&self) -> usize {
            self.lock().alerts.len()
        }

        /// True when no Alert is stored.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// Sets an Alert's `status.phase`, as the operator would.
        pub fn set_phase(&self, name: &str, phase: AlertPhase) {
            if let Some(a) = self.lock().alerts.get_mut(name) {
                a.status.get_or_insert_with(AlertStatus::default).phase = Some(phase);
            }
        }

        /// Makes every operation fail with `error` (None restores service).
        pub fn fail_with(&self, error: Option<SinkError>) {
            self.lock().fail_with = error;
        }
    }

    #[async_trait]
    impl AlertSink for InMemoryAlertSink {
        async fn create_if_absent(&self, alert: &DesiredAlert) -> Result<CreateOutcome, SinkError> {
            let mut g = self.guard()?;
            if g.alerts.contains_key(&alert.name) {
                return Ok(CreateOutcome::AlreadyExists);
            }
            if let Some(fp) = alert.labels.get(FINGERPRINT_LABEL) {
                g.by_fingerprint
                    .entry(fp.clone())
                    .or_default()
                    .push(alert.name.clone());
            }
            g.alerts
                .insert(alert.name.clone(), alert.to_resource(&self.namespace));
            Ok(CreateOutcome::Created)
        }

        async fn get(&self, name: &str) -> Result<Option<AlertRecord>, SinkError> {
            Ok(self.guard()?.alerts.get(name).map(AlertRecord::from_alert))
        }

        async fn find_by_fingerprint(
            &self,
            fingerprint: &str,
        ) -> Result<Vec<AlertRecord>, SinkError> {
            let g = self.guard()?;
            Ok(g.by_fingerprint
                .get(fingerprint)
                .into_iter()
                .flatten()
                .filter_map(|n| g.alerts.get(n))
                .map(AlertRecord::from_alert)
                .collect())
        }

        async fn annotate(&self, name: &str, key: &str, value: &str) -> Result<(), SinkError> {
            let mut g = self.guard()?;
            let alert = g.alerts.get_mut(name).ok_or_else(|| SinkError::NotFound {
                name: name.to_string(),
            })?;
            alert
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(key.to_string(), value.to_string());
            Ok(())
        }

        async fn cancel(&self, name: &str) -> Result<(), SinkError> {
            let mut g = self.guard()?;
            let alert = g.alerts.get_mut(name).ok_or_else(|| SinkError::NotFound {
                name: name.to_string(),
            })?;
            alert.spec.cancel = Some(true);
            Ok(())
        }
    }
}

/// [`AlertSink`] writing Alert resources through the Kubernetes API.
///
/// - create: `POST` (create semantics are what make create-if-absent atomic;
///   an apply would silently update an existing object), field manager
///   [`FIELD_MANAGER`];
/// - annotate: JSON merge patch of one annotation (field manager set): an
///   apply would drop the manager's other annotations;
/// - cancel: server-side apply of `spec.cancel: true` under [`FIELD_MANAGER`]
///   (forced: the field only ever goes from unset to true).
///
/// RBAC: `create`, `get`, `list` and `patch` on `alerts` in the namespace.
#[derive(Clone)]
pub struct KubeAlertSink {
    api: Api<Alert>,
    namespace: String,
}

impl KubeAlertSink {
    /// A sink creating Alerts in `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
        }
    }
}

fn map_kube_error(e: kube::Error, name: &str) -> SinkError {
    match e {
        kube::Error::Api(s) if s.code == 404 => SinkError::NotFound {
            name: name.to_string(),
        },
        // 400 Bad Request, 403 Forbidden by admission, 422 Invalid (schema, CEL).
        // 403 can also be RBAC; both are permanent until someone fixes configuration.
        kube::Error::Api(s) if matches!(s.code, 400 | 403 | 422) => SinkError::Rejected {
            message: s.message.clone(),
        },
        other => SinkError::Unavailable {
            message: other.to_string(),
        },
    }
}

#[async_trait]
impl AlertSink for KubeAlertSink {
    async fn create_if_absent(&self, alert: &DesiredAlert) -> Result<CreateOutcome, SinkError> {
        let pp = PostParams {
            dry_run: false,
            field_manager: Some(FIELD_MANAGER.to_string()),
        };
        let obj = alert.to_resource(&self.namespace);
        match self.api.create(&pp, &obj).await {
            Ok(_) => Ok(CreateOutcome::Created),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(CreateOutcome::AlreadyExists),
            Err(e) => Err(map_kube_error(e, &alert.name)),
        }
    }

    async fn get(&self, name: &str) -> Result<Option<AlertRecord>, SinkError> {
        match self.api.get_opt(name).await {
            Ok(a) => Ok(a.as_ref().map(AlertRecord::from_alert)),
            Err(e) => Err(map_kube_error(e, name)),
        }
    }

    async fn find_by_fingerprint(&self, fingerprint: &str) -> Result<Vec<AlertRecord>, SinkError> {
        let lp = ListParams::default().labels(&format!("{FINGERPRINT_LABEL}={fingerprint}"));
        match self.api.list(&lp).await {
            Ok(list) => Ok(list.items.iter().map(AlertRecord::from_alert).collect()),
            Err(e) => Err(map_kube_error(e, fingerprint)),
        }
    }

    async fn annotate(&self, name: &str, key: &str, value: &str) -> Result<(), SinkError> {
        let patch = json!({ "metadata": { "annotations": { key: value } } });
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        self.api
            .patch(name, &pp, &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| map_kube_error(e, name))
    }

    async fn cancel(&self, name: &str) -> Result<(), SinkError> {
        let patch = json!({
            "apiVersion": tarsy_crds::API_VERSION,
            "kind": "Alert",
            "metadata": { "name": name },
            "spec": { "cancel": true },
        });
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        self.api
            .patch(name, &pp, &Patch::Apply(&patch))
            .await
            .map(|_| ())
            .map_err(|e| map_kube_error(e, name))
    }
}
