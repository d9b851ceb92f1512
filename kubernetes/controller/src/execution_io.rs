//! The AgentExecution reconcile's IO: reads the execution and its pod,
//! calls the pure [`crate::execution::reconcile_execution`], creates or
//! deletes the pod, records failures the runner could not, and copies its
//! MCP server outcomes into the MCPServers' `lastHealth`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use tarsy_crds::{AgentExecution, AgentExecutionStatus, MCPServer};
use tarsy_store::StoreError;

use crate::alert::EventNote;
use crate::conditions;
use crate::context::{Context, key_of};
use crate::error::Error;
use crate::execution::{ExecutionInputs, PodAction, reconcile_execution};
use crate::pod::{PodInputs, build_pod};
use crate::resources::execution_servers;
use crate::status_apply::{HEALTH_FIELD_MANAGER, apply_status, apply_status_as};

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

pub(crate) fn error_policy_execution(
    ae: Arc<AgentExecution>,
    err: &Error,
    ctx: Arc<Context>,
) -> Action {
    ctx.metrics.failed("agentexecution", err.kind());
    ctx.backoff(&key_of(ae.as_ref()), err)
}

pub(crate) async fn reconcile_execution_io(
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
        pod_restart_limit: ctx.settings.pod_restart_limit,
        pod_restart_backoff: ctx.settings.pod_restart_backoff,
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
    // The execution's own deadline when it has one (a judge, a reflector,
    // a chat answer run after the session ended); else (an object of an
    // older operator) the session's.
    let deadline = match &ae.spec.deadline {
        Some(d) => d.0.as_second(),
        None => {
            let timeout = chain
                .and_then(|c| config.session_timeout(&c.spec).ok())
                .unwrap_or(ctx.settings.defaults.session_timeout);
            let started = if ae.spec.kind == tarsy_crds::ExecutionKind::Chat {
                ae.metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or(now.as_second(), |t| t.0.as_second())
            } else {
                ctx.alerts
                    .state()
                    .iter()
                    .find(|a| {
                        a.namespace().as_deref() == Some(ns) && a.name_any() == ae.spec.alert_name
                    })
                    .and_then(|a| a.status.as_ref().and_then(|s| s.started_at.clone()))
                    .map_or(now.as_second(), |t| t.0.as_second())
            };
            started.saturating_add(i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX))
        }
    };
    // The operator stops executions at the deadline itself (recorded as
    // TimedOut); the pod's own deadline is a backstop that fires later.
    let left = deadline
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
