//! kube-rs 5 against the emulator: a `Controller` for a custom resource that `owns`
//! ConfigMaps, uses a finalizer, server-side apply (objects and `/status`) and relies on
//! owner-reference garbage collection. Exits 0 and prints `SMOKE OK` when every step
//! was observed; any failure exits non-zero with the step that failed.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::{
    api::core::v1::ConfigMap,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, Resource, ResourceExt},
    runtime::{
        controller::{Action, Controller},
        finalizer::{finalizer, Event as FinalizerEvent},
        watcher,
    },
    Client, CustomResource, CustomResourceExt,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const NS: &str = "default";
const MANAGER: &str = "kubeemu-smoke";
const FINALIZER: &str = "smoke.kubeemu.dev/cleanup";

/// The custom resource the controller reconciles.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "smoke.kubeemu.dev",
    version = "v1",
    kind = "Widget",
    namespaced
)]
#[kube(status = "WidgetStatus")]
pub struct WidgetSpec {
    size: u32,
}

/// Status written by the controller with server-side apply.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    observed_generation: Option<i64>,
    config_map: Option<String>,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(String),
}

struct Ctx {
    client: Client,
    reconciles: AtomicUsize,
    cleanups: AtomicUsize,
}

async fn reconcile(widget: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    ctx.reconciles.fetch_add(1, Ordering::SeqCst);
    let api: Api<Widget> = Api::namespaced(ctx.client.clone(), NS);
    let result = finalizer(&api, FINALIZER, widget, |event| async {
        match event {
            FinalizerEvent::Apply(w) => apply(&w, &ctx).await,
            FinalizerEvent::Cleanup(_) => {
                ctx.cleanups.fetch_add(1, Ordering::SeqCst);
                Ok(Action::await_change())
            }
        }
    })
    .await;
    result.map_err(|e| Error::Finalizer(e.to_string()))
}

async fn apply(w: &Widget, ctx: &Ctx) -> Result<Action, Error> {
    let name = w.name_any();
    let cm_name = format!("{name}-cm");
    let owner = w
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Finalizer("widget without uid".into()))?;
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(cm_name.clone()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "size".to_string(),
            w.spec.size.to_string(),
        )])),
        ..Default::default()
    };
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), NS);
    let pp = PatchParams::apply(MANAGER).force();
    cms.patch(&cm_name, &pp, &Patch::Apply(&cm)).await?;
    // A missing object is `None`, not an error: needs the standard NotFound reason.
    assert!(cms.get_opt("does-not-exist").await?.is_none());
    let status = serde_json::json!({
        "apiVersion": "smoke.kubeemu.dev/v1",
        "kind": "Widget",
        "status": { "observedGeneration": w.metadata.generation, "configMap": cm_name },
    });
    let widgets: Api<Widget> = Api::namespaced(ctx.client.clone(), NS);
    widgets
        .patch_status(&w.name_any(), &pp, &Patch::Apply(&status))
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_w: Arc<Widget>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    eprintln!("reconcile error: {err}");
    Action::requeue(Duration::from_millis(500))
}

async fn wait_for<F, Fut>(what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if check().await? {
            println!("ok: {what}");
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let client = Client::try_default().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        Widget::crd_name(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(Widget::crd()),
    )
    .await?;
    wait_for("CRD established", || async {
        let crd = crds.get(Widget::crd_name()).await?;
        Ok(crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True"))
    })
    .await?;

    // API discovery as kube-rs does it (/api, /apis, /apis/GROUP/VERSION).
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await?;
    let gvk = kube::api::GroupVersionKind::gvk("smoke.kubeemu.dev", "v1", "Widget");
    let (resource, caps) = discovery
        .resolve_gvk(&gvk)
        .ok_or_else(|| anyhow::anyhow!("discovery did not find {gvk:?}"))?;
    anyhow::ensure!(
        resource.plural == "widgets" && caps.scope == kube::discovery::Scope::Namespaced
    );
    anyhow::ensure!(
        discovery.has_group("coordination.k8s.io") && discovery.has_group("events.k8s.io")
    );
    println!("ok: discovery resolves Widget, leases and events groups");

    let widgets: Api<Widget> = Api::namespaced(client.clone(), NS);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        reconciles: AtomicUsize::new(0),
        cleanups: AtomicUsize::new(0),
    });
    let controller = Controller::new(widgets.clone(), watcher::Config::default())
        .owns(cms.clone(), watcher::Config::default())
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|res| async move {
            if let Err(e) = res {
                eprintln!("controller: {e}");
            }
        });
    let handle = tokio::spawn(controller);

    let w = Widget::new("w1", WidgetSpec { size: 1 });
    widgets.create(&PostParams::default(), &w).await?;
    wait_for(
        "status observedGeneration=1 and ConfigMap size=1",
        || async {
            let w = widgets.get("w1").await?;
            let cm = cms.get_opt("w1-cm").await?;
            Ok(w.status.and_then(|s| s.observed_generation) == Some(1)
                && cm.and_then(|c| c.data).and_then(|d| d.get("size").cloned()) == Some("1".into()))
        },
    )
    .await?;
    let w = widgets.get("w1").await?;
    assert_eq!(w.finalizers(), &[FINALIZER.to_string()]);

    // Idle: a status apply that changes nothing must not trigger more reconciles.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let idle_before = ctx.reconciles.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let idle_after = ctx.reconciles.load(Ordering::SeqCst);
    anyhow::ensure!(
        idle_after == idle_before,
        "controller kept reconciling while idle: {idle_before} -> {idle_after}"
    );
    println!("ok: no reconcile loop while idle ({idle_after} reconciles so far)");

    widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"size": 2}})),
        )
        .await?;
    wait_for("generation 2 observed and ConfigMap size=2", || async {
        let w = widgets.get("w1").await?;
        let cm = cms.get_opt("w1-cm").await?;
        Ok(w.metadata.generation == Some(2)
            && w.status.and_then(|s| s.observed_generation) == Some(2)
            && cm.and_then(|c| c.data).and_then(|d| d.get("size").cloned()) == Some("2".into()))
    })
    .await?;

    cms.delete("w1-cm", &DeleteParams::default()).await?;
    wait_for("owned ConfigMap recreated after deletion", || async {
        Ok(cms.get_opt("w1-cm").await?.is_some())
    })
    .await?;

    widgets.delete("w1", &DeleteParams::default()).await?;
    wait_for("finalizer cleanup ran and the widget is gone", || async {
        Ok(ctx.cleanups.load(Ordering::SeqCst) >= 1 && widgets.get_opt("w1").await?.is_none())
    })
    .await?;
    wait_for("owned ConfigMap garbage-collected", || async {
        Ok(cms.get_opt("w1-cm").await?.is_none())
    })
    .await?;

    handle.abort();
    println!(
        "SMOKE OK ({} reconciles, {:.1}s)",
        ctx.reconciles.load(Ordering::SeqCst),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
