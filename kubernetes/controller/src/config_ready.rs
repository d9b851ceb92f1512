//! Ready conditions of the configuration kinds (Chain, Agent, MCPServer,
//! LLMProvider): whether their references resolve and their Secrets exist.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tarsy_crds::{Agent, Chain, LLMProvider, MCPServer};

use crate::alert::EventNote;
use crate::conditions;
use crate::context::{Context, key_of};
use crate::error::Error;
use crate::resources::{SecretKeys, readiness, secret_refs};
use crate::run::{api_for, log_result};
use crate::status_apply::apply_status;

/// A GitOps kind with a Ready condition.
pub(crate) trait ConfigKind:
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

pub(crate) async fn config_controller<K: ConfigKind>(
    client: &Client,
    ns: Option<&str>,
    ctx: Arc<Context>,
) {
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
