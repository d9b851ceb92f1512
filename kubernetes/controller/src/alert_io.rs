//! The Alert reconcile's IO: reads the Alert (fresh) and its
//! AgentExecutions (from the cache), decides admission, calls the pure
//! [`crate::alert::reconcile_alert`] and carries out its outcome —
//! Postgres writes, child creation and stop annotations, Events, the status
//! (server-side apply), and the executive summary, started in the
//! background.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::{Resource, ResourceExt};
use tarsy_chain::{PendingSession, admit};
use tarsy_config::Config;
use tarsy_core::ScoreStatus;
use tarsy_crds::contract::{
    CHAT_ANNOTATION, EXPIRED_ANNOTATION, SCORE_ANNOTATION, owned_by, reflect_request_patch,
};
use tarsy_crds::{AgentExecution, Alert, AlertPhase, AlertStatus};
use tarsy_exec::memory::Reflector;
use tarsy_exec::notify::Notice;
use tarsy_exec::scoring::Judgement;
use tarsy_exec::workflow::perform;
use tarsy_store::StoreError;

use crate::alert::{
    AlertInputs, ChatRequest, OpenReflector, ScoringState, StoreOp, SummaryProgress,
    reconcile_alert, stop_value,
};
use crate::context::{Context, key_of};
use crate::error::Error;
use crate::status_apply::apply_status;

/// Finalizer on Alerts: the session row is soft-deleted before the Alert goes.
pub const ALERT_FINALIZER: &str = "tarsy.dev/session";
/// How often an Alert waiting for its executive summary looks again.
const SUMMARY_POLL: Duration = Duration::from_secs(2);

pub(crate) async fn reconcile_alert_io(
    alert: Arc<Alert>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
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

pub(crate) fn error_policy_alert(alert: Arc<Alert>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.failed("alert", err.kind());
    ctx.backoff(&key_of(alert.as_ref()), err)
}

/// How long a reconcile waits for the caches' first lists (after a start)
/// before it looks again instead.
const CACHE_WAIT: Duration = Duration::from_secs(2);

async fn cleanup_alert(alert: Arc<Alert>, ctx: &Context) -> Result<Action, Error> {
    let uid = alert.uid().ok_or(Error::MissingField("uid"))?;
    // A user deleting an Alert hides its session; an Alert that expired
    // after its TTL leaves its session listed (retention hides it later).
    let expired = alert.annotations().contains_key(EXPIRED_ANNOTATION);
    if !expired {
        match ctx.store.soft_delete_session(&uid).await {
            Ok(()) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
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
    // Admission counts the running sessions in the Alert cache, and the
    // children come from the execution cache: until their first lists are
    // in (just after a start), a finished child would read as Pending and
    // nothing would wake this Alert again — wait, or look again shortly.
    let caches = async {
        let _ = tokio::join!(
            ctx.alerts.wait_until_ready(),
            ctx.executions.wait_until_ready()
        );
    };
    if tokio::time::timeout(CACHE_WAIT, caches).await.is_err() {
        tracing::debug!(alert = %name, "caches not ready yet; looking again shortly");
        return Ok(Action::requeue(CACHE_WAIT));
    }
    // The execution cache is written by the same watch that wakes this
    // controller for its children, before it does: a child's change that
    // started this reconcile is in it. One just created and not seen yet
    // reads as Pending, and its creation is repeated harmlessly.
    let executions: BTreeMap<String, AgentExecution> = ctx
        .executions
        .state()
        .iter()
        .filter(|ae| ae.meta().namespace.as_deref() == Some(ns.as_str()) && owned_by(ae, &uid))
        .map(|ae| (ae.name_any(), (**ae).clone()))
        .collect();
    let summary = ctx.summaries.progress(&uid);
    let chat = chat_request(&ctx.store, &alert, &executions).await?;
    let scoring = scoring_state(&ctx.store, &alert).await?;
    let reflectors = open_reflectors(&ctx.store, &alert).await?;
    let cost = ctx.store.session_cost(&uid).await?;
    let hold = match alert.status.as_ref().and_then(|s| s.phase) {
        None | Some(AlertPhase::Pending) => {
            tarsy_exec::budget::daily_hold(
                &ctx.store,
                &ns,
                config.defaults.max_cost_usd_per_day,
                chrono::Utc::now(),
            )
            .await?
        }
        Some(_) => None,
    };

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
        summary: &summary,
        alert_masker: ctx.alert_masker.as_ref(),
        alert_ttl: ctx.settings.alert_ttl,
        chat: chat.as_ref(),
        scoring: &scoring,
        reflectors: &reflectors,
        cost,
        hold: hold.as_deref(),
        now: Timestamp::now(),
    });
    if out.expire {
        expire(&api, &name).await?;
        return Ok(Action::await_change());
    }

    for op in &out.store {
        perform(&ctx.store, ctx.publisher.as_ref(), op).await?;
    }
    notify(ctx, &alert, &config, &out.store).await;
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
        score_ended(ctx, &alert, &config, &out.status).await;
    }
    let summary_recorded =
        out.status.executive_summary.is_some() || out.status.executive_summary_error.is_some();
    if summary_recorded || out.status.phase.is_some_and(|p| p.is_terminal()) {
        ctx.summaries.forget(&uid);
    }
    if let Some(request) = out.summarize {
        ctx.summaries.start(config.clone(), request);
    }
    if let Some(session_id) = &out.score {
        let chain = out.status.chain.as_deref().unwrap_or_default();
        request_scoring(ctx, &api, &name, &config, chain, session_id).await;
    }
    if out.status.phase.is_some_and(|p| p.is_terminal()) {
        ctx.admitted.lock().await.remove(&uid);
    }
    // While its summary is being made, nothing about the Alert changes:
    // look again soon to pick it up.
    let waiting = matches!(
        ctx.summaries.progress(&uid),
        SummaryProgress::Running | SummaryProgress::Done(_)
    );
    Ok(match out.requeue {
        _ if waiting => Action::requeue(SUMMARY_POLL),
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    })
}

/// The chat question the API asked for on this Alert
/// ([`CHAT_ANNOTATION`]) when its AgentExecution does not exist yet and its
/// stage has not started: read from Postgres, where the API stored it.
pub async fn chat_request(
    store: &tarsy_store::Store,
    alert: &Alert,
    executions: &BTreeMap<String, AgentExecution>,
) -> Result<Option<ChatRequest>, StoreError> {
    let Some(stage_id) = alert.annotations().get(CHAT_ANNOTATION) else {
        return Ok(None);
    };
    if executions
        .values()
        .any(|ae| ae.spec.stage.id.as_deref() == Some(stage_id.as_str()))
    {
        return Ok(None);
    }
    let stage = match store.get_stage(stage_id).await {
        Ok(stage) => stage,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(message_id) = stage
        .chat_user_message_id
        .clone()
        .filter(|_| stage.status == tarsy_core::ExecutionStatus::Pending)
    else {
        return Ok(None);
    };
    let message = match store.get_chat_user_message(&message_id).await {
        Ok(m) => m,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let session = store.get_session(&stage.session_id).await?;
    Ok(Some(ChatRequest {
        session,
        stage,
        message,
    }))
}

/// The session id of a finished Alert (`None` while it runs).
fn finished_session(alert: &Alert) -> Option<String> {
    let terminal = alert
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .is_some_and(|p| p.is_terminal());
    alert.uid().filter(|_| terminal)
}

/// The session's scoring, for a finished Alert: its score, the attempt in
/// progress (with its records), whether the Alert asks for that attempt's
/// judge ([`SCORE_ANNOTATION`]) while its stage has not started, and why
/// the latest attempt failed.
pub async fn scoring_state(
    store: &tarsy_store::Store,
    alert: &Alert,
) -> Result<ScoringState, StoreError> {
    let Some(uid) = finished_session(alert) else {
        return Ok(ScoringState::default());
    };
    let badge = match store.get_session(&uid).await {
        Ok(session) => session.score,
        Err(StoreError::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    let Some(badge) = badge else {
        return Ok(ScoringState::default());
    };
    let mut state = ScoringState {
        badge: Some(badge.clone()),
        ..ScoringState::default()
    };
    let attempts = store.session_scores(&uid).await?;
    state.ended_attempts = u32::try_from(
        attempts
            .iter()
            .filter(|a| a.status != ScoreStatus::InProgress)
            .count(),
    )
    .unwrap_or(u32::MAX);
    if badge.status == ScoreStatus::Failed {
        state.last_error = attempts.into_iter().next().and_then(|a| a.error);
    }
    if let Some(attempt) = store.running_score(&uid).await? {
        match Judgement::of_attempt(store, &attempt).await {
            Ok(judgement) => {
                let asked = alert.annotations().get(SCORE_ANNOTATION) == Some(&judgement.stage_id);
                state.requested = asked
                    && store
                        .get_stage(&judgement.stage_id)
                        .await
                        .is_ok_and(|s| s.status == tarsy_core::ExecutionStatus::Pending);
                state.running = Some(judgement);
            }
            Err(e) => {
                tracing::warn!(session_id = %uid, error = %e, "a running scoring attempt's records are unreadable")
            }
        }
    }
    Ok(state)
}

/// The session's reflectors that have not ended, for a finished Alert:
/// every memory stage of the session still open, and whether it waits for
/// its AgentExecution.
pub async fn open_reflectors(
    store: &tarsy_store::Store,
    alert: &Alert,
) -> Result<Vec<OpenReflector>, StoreError> {
    let Some(uid) = finished_session(alert) else {
        return Ok(Vec::new());
    };
    let stages = match store.list_stages(&uid).await {
        Ok(stages) => stages,
        Err(StoreError::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut open = Vec::new();
    for stage in stages
        .iter()
        .filter(|s| s.kind == tarsy_core::StageKind::Memory && !s.status.is_terminal())
    {
        match Reflector::of_stage(store, stage).await {
            Ok(reflector) => open.push(OpenReflector {
                reflector,
                waiting: stage.status == tarsy_core::ExecutionStatus::Pending,
            }),
            Err(e) => {
                tracing::warn!(session_id = %uid, stage_id = %stage.id, error = %e, "a reflector's records are unreadable")
            }
        }
    }
    Ok(open)
}

/// Starts the reflector of a session whose score just arrived (memory on,
/// a scope): its records, then the Alert asks for it
/// ([`tarsy_crds::contract::REFLECT_ANNOTATION`]; the next reconcile creates
/// the AgentExecution). Fail-open: a failure is logged (and the records
/// closed), the session and its score are untouched.
async fn request_reflector(ctx: &Context, alert: &Alert, config: &Config, session_id: &str) {
    let started = match Reflector::start_for(&ctx.store, config, session_id, false).await {
        Ok(Some((reflector, _))) => reflector,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(%session_id, error = %e, "the reflector could not start: nothing is learned from this session");
            return;
        }
    };
    let Some(ns) = alert.namespace() else { return };
    let api: Api<Alert> = Api::namespaced(ctx.client.clone(), &ns);
    let patch = reflect_request_patch(&started.stage_id);
    if let Err(e) = api
        .patch(
            &alert.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        let why = format!("the reflector could not be asked for on the Alert: {e}");
        tracing::warn!(%session_id, error = %e, "the reflector could not be asked for");
        started.close(&ctx.store, &ctx.publisher, &why).await;
    }
}

/// Starts the scoring of a session that just completed: the attempt and its
/// records, then the Alert asks for its judge ([`SCORE_ANNOTATION`]; the
/// next reconcile creates the AgentExecution). An attempt already running
/// (this was asked before and the annotation was not written) is asked for
/// again. Fail-open: a failure is logged, the session is untouched.
async fn request_scoring(
    ctx: &Context,
    api: &Api<Alert>,
    alert_name: &str,
    config: &Config,
    chain: &str,
    session_id: &str,
) {
    let started = async {
        let (judge, _) =
            tarsy_exec::scoring::judge_of_chain(config, chain).map_err(|e| e.to_string())?;
        let judgement =
            match Judgement::start(&ctx.store, &ctx.publisher, session_id, &judge, None).await {
                Ok(j) => j,
                Err(tarsy_exec::ExecError::Store(StoreError::Conflict { .. })) => {
                    let attempt = ctx
                        .store
                        .running_score(session_id)
                        .await
                        .map_err(|e| e.to_string())?
                        .ok_or("the running attempt ended meanwhile")?;
                    Judgement::of_attempt(&ctx.store, &attempt)
                        .await
                        .map_err(|e| e.to_string())?
                }
                Err(e) => return Err(e.to_string()),
            };
        let patch = tarsy_crds::contract::score_request_patch(&judgement.stage_id);
        api.patch(alert_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("asking for the judge on the Alert: {e}"))?;
        Ok::<_, String>(())
    }
    .await;
    if let Err(e) = started {
        tracing::warn!(%session_id, error = %e, "the session is not scored");
    }
}

/// Sends the Slack notice of a session that ended (or started, when
/// wanted) in this reconcile: fail-open, in the background; threaded by the
/// Alertmanager fingerprint when the Alert has one.
async fn notify(ctx: &Context, alert: &Alert, config: &Config, ops: &[StoreOp]) {
    let Some(notifier) = &ctx.notifier else {
        return;
    };
    for op in ops {
        let session_id = match op {
            StoreOp::FinishSession { session_id, .. } => session_id,
            StoreOp::StartSession { session_id } if notifier.notifies_start() => session_id,
            _ => continue,
        };
        let session = match ctx.store.get_session(session_id).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(session_id, error = %e, "no Slack notice: the session is unreadable");
                continue;
            }
        };
        notifier.send(notice(alert, config, session, None));
    }
}

/// The Slack notice of `session` (its chain's channel, threaded by the
/// Alertmanager fingerprint when the Alert has one).
fn notice(
    alert: &Alert,
    config: &Config,
    session: tarsy_store::Session,
    score: Option<tarsy_store::SessionScore>,
) -> Notice {
    Notice {
        channel: config
            .chain(&session.chain_id)
            .and_then(|c| c.spec.slack_channel.clone()),
        thread_key: alert
            .spec
            .source
            .as_ref()
            .and_then(|s| s.fingerprint.clone()),
        session,
        score,
    }
}

/// A scoring attempt whose end arrived in this reconcile (the status
/// counts one more ended attempt): counted in the operator's metrics (the
/// judge's pod that wrote it is not scraped; the status is kept, so a
/// restart does not count it again), replied in the session's Slack
/// thread, and, once scored, learned from (the reflector). Fail-open.
async fn score_ended(ctx: &Context, alert: &Alert, config: &Config, after: &AlertStatus) {
    let before = alert.status.as_ref();
    let new_end = match (
        before.and_then(|s| s.scoring_attempts_ended),
        after.scoring_attempts_ended,
    ) {
        (_, None) => false,
        (Some(before), Some(now)) => now > before,
        // An Alert scored by an operator that did not count the ends: its
        // `Scored` condition says whether this reconcile saw one.
        (None, Some(_)) => {
            let scored = |s: Option<&AlertStatus>| {
                s.and_then(|s| {
                    s.conditions
                        .iter()
                        .find(|c| c.type_ == crate::conditions::SCORED)
                })
                .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
            };
            let now = scored(Some(after));
            now != scored(before)
                && now
                    .as_ref()
                    .is_some_and(|(_, reason, _)| reason != "Scoring")
        }
    };
    if !new_end {
        return;
    }
    let Some(uid) = alert.uid() else { return };
    let (session, attempts) = match tokio::try_join!(
        ctx.store.get_session(&uid),
        ctx.store.session_scores(&uid)
    ) {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(session_id = %uid, error = %e, "an ended scoring attempt is not counted or replied: the session is unreadable");
            return;
        }
    };
    let Some(attempt) = attempts.into_iter().next() else {
        return;
    };
    tarsy_store::count_ended_score(&session.chain_id, &session.alert_type, &attempt);
    let completed = attempt.status == ScoreStatus::Completed;
    if let Some(notifier) = &ctx.notifier {
        notifier.send(notice(alert, config, session, Some(attempt)));
    }
    if completed {
        request_reflector(ctx, alert, config, &uid).await;
    }
}

/// Deletes an Alert whose TTL passed, marked so that its session stays
/// listed.
async fn expire(api: &Api<Alert>, name: &str) -> Result<(), Error> {
    let patch = serde_json::json!({"metadata": {"annotations": {EXPIRED_ANNOTATION: "true"}}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
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
