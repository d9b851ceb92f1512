//! What the dashboard shows of a namespace in cluster mode: its
//! configuration (the Chain, Agent, MCPServer and LLMProvider resources over
//! the built-ins, listed on each request) and the Alert and AgentExecutions
//! behind a session.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use tarsy_api::{
    AlertObject, ClusterObjectsSource, ExecutionObject, SessionObjects, SystemConfiguration,
    SystemConfigurationSource, configuration_view,
};
use tarsy_config::Defaults;
use tarsy_crds::contract::{LABEL_SESSION, label_value};
use tarsy_crds::{AgentExecution, Alert};

/// The wire name of a serde enum (`"Active"`, ...).
fn wire<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// Cluster mode: the namespace's Chain, Agent, MCPServer and LLMProvider
/// resources over the built-ins, listed on each request (as alert
/// submission does), and the Alert and AgentExecutions behind sessions.
pub struct ClusterView {
    client: Client,
    namespace: String,
    defaults: Defaults,
}

impl ClusterView {
    /// A view of one namespace.
    pub fn new(client: Client, namespace: String, defaults: Defaults) -> Arc<Self> {
        Arc::new(Self {
            client,
            namespace,
            defaults,
        })
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }
}

#[async_trait]
impl SystemConfigurationSource for ClusterView {
    async fn configuration(&self) -> Result<SystemConfiguration, String> {
        let config = crate::namespace_config(&self.client, &self.namespace, &self.defaults)
            .await
            .map_err(|e| e.to_string())?;
        Ok(configuration_view(
            &config,
            "cluster",
            Some(self.namespace.clone()),
        ))
    }
}

#[async_trait]
impl ClusterObjectsSource for ClusterView {
    async fn session_objects(&self, session_id: &str) -> Result<SessionObjects, String> {
        // The operator labels executions with the session id as a label value.
        let selector = format!("{LABEL_SESSION}={}", label_value(session_id));
        let executions = self
            .api::<AgentExecution>()
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| e.to_string())?;
        let mut by_id = BTreeMap::new();
        let mut alert_name = None;
        for ae in &executions.items {
            alert_name.get_or_insert_with(|| ae.spec.alert_name.clone());
            let status = ae.status.as_ref();
            let id = tarsy_exec::ids::execution_id(
                &ae.spec.session_id,
                ae.spec.stage.index,
                ae.spec.agent_index,
            );
            by_id.insert(
                id,
                ExecutionObject {
                    namespace: self.namespace.clone(),
                    name: ae.name_any(),
                    phase: status.and_then(|s| s.phase.as_ref()).map(wire),
                    pod_name: status.and_then(|s| s.pod_name.clone()),
                },
            );
        }
        let alerts = self.api::<Alert>();
        // Selectors cannot match UIDs: without an execution naming it, the
        // Alert is found among the namespace's Alerts' metadata.
        if alert_name.is_none() {
            let list = alerts
                .list_metadata(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            alert_name = list
                .items
                .into_iter()
                .find(|a| a.metadata.uid.as_deref() == Some(session_id))
                .and_then(|a| a.metadata.name);
        }
        let alert = match alert_name {
            Some(name) => alerts
                .get_opt(&name)
                .await
                .map_err(|e| e.to_string())?
                .filter(|a| a.metadata.uid.as_deref() == Some(session_id))
                .map(|a| AlertObject {
                    namespace: self.namespace.clone(),
                    phase: a.status.as_ref().and_then(|s| s.phase.as_ref()).map(wire),
                    name,
                }),
            None => None,
        };
        Ok(SessionObjects {
            alert,
            executions: by_id,
        })
    }
}
