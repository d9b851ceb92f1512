//! A re-score in cluster mode: the rules and the attempt are
//! [`tarsy_exec::scoring`]'s; here the attempt's records are written and the
//! Alert asks the operator for the judge's AgentExecution
//! ([`tarsy_crds::contract::SCORE_ANNOTATION`]), as for a chat answer. The operator runs its pod,
//! the runner judges.

use tarsy_api::{ScoreAccepted, ScoreError};
use tarsy_exec::scoring::{self, Judgement};

use crate::{KubeSessionControl, kube_message, transient};

fn score_kube(what: &str, e: kube::Error) -> ScoreError {
    tracing::warn!(error = %e, "{what}");
    let msg = kube_message(what, &e);
    if transient(&e) {
        ScoreError::Unavailable(msg)
    } else {
        ScoreError::Internal(msg)
    }
}

/// Starts a new scoring attempt of a finished session and asks the
/// operator for its judge.
pub(crate) async fn rescore(
    ctl: &KubeSessionControl,
    session_id: &str,
) -> Result<ScoreAccepted, ScoreError> {
    let config = ctl
        .config()
        .await
        .map_err(|e| score_kube("reading the configuration", e))?;
    let (judge, _) = scoring::judge_for(&ctl.store, &config, session_id).await?;
    // The judge's AgentExecution is owned by the Alert: without it (deleted,
    // or expired after its TTL) nothing can run the judge.
    let alert = ctl
        .alert_by_uid(session_id)
        .await
        .map_err(|e| score_kube("finding the session's Alert", e))?
        .ok_or_else(|| {
            ScoreError::Invalid(format!(
                "the Alert of session {session_id:?} is gone (deleted or expired): there is no \
                 Alert to run its judge under"
            ))
        })?;
    let publisher = ctl.record_publisher();
    let judgement = Judgement::start(&ctl.store, &publisher, session_id, &judge, None)
        .await
        .map_err(|e| scoring::start_refused(session_id, e))?;
    let patch = tarsy_crds::contract::score_request_patch(&judgement.stage_id);
    if let Err(e) = ctl.patch_alert(&alert, &patch).await {
        judgement
            .abandon(&ctl.store, &publisher, "the judge could not be asked for")
            .await;
        return Err(score_kube("asking for the judge on the Alert", e));
    }
    tracing::info!(%session_id, stage_id = %judgement.stage_id, "scoring requested");
    Ok(ScoreAccepted {
        session_id: session_id.to_string(),
    })
}
