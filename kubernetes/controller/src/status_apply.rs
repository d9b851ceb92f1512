//! Status writes: server-side apply under one field manager per writer.

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::Error;

/// The field manager of every status the operator writes, except MCPServer
/// `status.lastHealth` ([`HEALTH_FIELD_MANAGER`]).
pub const FIELD_MANAGER: &str = "tarsy-operator";
/// Field manager of MCPServer `status.lastHealth`. Separate from
/// [`FIELD_MANAGER`] so that the Ready-condition apply (which leaves
/// `lastHealth` out) and the health apply (which leaves the conditions out)
/// never remove each other's fields, without a read-modify-write race.
pub const HEALTH_FIELD_MANAGER: &str = "tarsy-operator-health";
/// Writes `status` of `K` `name` with server-side apply under
/// [`FIELD_MANAGER`] (forced: the operator is the authority for the fields
/// it sets).
pub(crate) async fn apply_status<K, S>(
    client: &Client,
    ns: &str,
    name: &str,
    status: &S,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    S: Serialize,
{
    apply_status_as::<K, S>(client, FIELD_MANAGER, ns, name, status).await
}

/// [`apply_status`] under field manager `manager`.
pub(crate) async fn apply_status_as<K, S>(
    client: &Client,
    manager: &str,
    ns: &str,
    name: &str,
    status: &S,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
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
