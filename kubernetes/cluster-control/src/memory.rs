//! Investigation memory learning from a person's review feedback in
//! cluster mode: the reflector is [`tarsy_exec::memory`]'s; here its records
//! are written and the Alert asks the operator for its AgentExecution
//! ([`tarsy_crds::contract::REFLECT_ANNOTATION`]), as for a re-score. The
//! operator runs its pod, the runner reflects. Fail-open: the review
//! stands whatever happens here (logged).

use tarsy_exec::memory::Reflector;

use crate::KubeSessionControl;

/// Starts the feedback reflector of a finished session.
pub(crate) async fn learn_from_feedback(ctl: &KubeSessionControl, session_id: &str) {
    let config = match ctl.config().await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%session_id, error = %e, "nothing learned from the review: the configuration is unreadable");
            return;
        }
    };
    let reflector = match Reflector::start_for(&ctl.store, &config, session_id, true).await {
        Ok(Some((reflector, _))) => reflector,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(%session_id, error = %e, "nothing learned from the review: the reflector could not start");
            return;
        }
    };
    let asked = async {
        // The AgentExecution is owned by the Alert: without it (deleted, or
        // expired after its TTL) nothing can run the reflector.
        let alert = ctl
            .alert_by_uid(session_id)
            .await
            .map_err(|e| format!("finding the session's Alert: {e}"))?
            .ok_or("the session's Alert is gone (deleted or expired)")?;
        let patch = tarsy_crds::contract::reflect_request_patch(&reflector.stage_id);
        ctl.patch_alert(&alert, &patch)
            .await
            .map_err(|e| format!("asking for the reflector on the Alert: {e}"))?;
        Ok::<_, String>(())
    }
    .await;
    if let Err(why) = asked {
        tracing::warn!(%session_id, error = %why, "nothing learned from the review");
        let publisher = ctl.record_publisher();
        reflector
            .close(
                &ctl.store,
                &publisher,
                &format!("the reflector could not run: {why}"),
            )
            .await;
    } else {
        tracing::info!(%session_id, stage_id = %reflector.stage_id, "feedback reflector requested");
    }
}
