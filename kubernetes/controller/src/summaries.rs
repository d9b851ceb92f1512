//! Executive summaries, outside the reconcile path: a reconcile asks for
//! one ([`crate::alert::SummaryRequest`]), a background task makes the call
//! and records the result in the session row, and a later reconcile takes
//! it from here ([`crate::alert::SummaryProgress`]) into the status. A slow
//! provider never holds a reconcile worker.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tarsy_config::Config;
use tarsy_exec::Summarizer;
use tarsy_store::{Store, StoreError};
use tracing::{info, warn};

use crate::alert::{SummaryProgress, SummaryRequest};

/// The summaries of this operator process, by session id.
pub struct Summaries {
    /// Makes the calls (`Err`: why it cannot; every summary then fails with
    /// that reason, fail-open).
    summarizer: Result<Summarizer, String>,
    store: Store,
    progress: Mutex<HashMap<String, SummaryProgress>>,
}

impl Summaries {
    /// Summaries made by `summarizer`, recorded in `store`.
    pub fn new(summarizer: Result<Summarizer, String>, store: Store) -> Self {
        Self {
            summarizer,
            store,
            progress: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SummaryProgress>> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where the summary of `session_id` stands.
    pub fn progress(&self, session_id: &str) -> SummaryProgress {
        self.lock().get(session_id).cloned().unwrap_or_default()
    }

    /// The status now holds the summary of `session_id` (or the session is
    /// gone): nothing to remember.
    pub fn forget(&self, session_id: &str) {
        self.lock().remove(session_id);
    }

    /// Starts `request` in the background unless it is running or done.
    pub fn start(self: &Arc<Self>, config: Config, request: SummaryRequest) {
        {
            let mut progress = self.lock();
            if progress.contains_key(&request.session_id) {
                return;
            }
            progress.insert(request.session_id.clone(), SummaryProgress::Running);
        }
        let this = self.clone();
        tokio::spawn(async move {
            let result = this.make(&config, &request).await;
            this.lock()
                .insert(request.session_id, SummaryProgress::Done(result));
        });
    }

    /// The summary: the one already in the session row (made before an
    /// operator restart), or a new call recorded there. Fail-open: an error
    /// is the reason, for the status.
    async fn make(&self, config: &Config, request: &SummaryRequest) -> Result<String, String> {
        let session_id = &request.session_id;
        match self.store.get_session(session_id).await {
            Ok(row) => match (row.executive_summary, row.executive_summary_error) {
                (Some(text), _) => return Ok(text),
                (None, Some(e)) => return Err(e),
                (None, None) => {}
            },
            Err(e) => warn!(%session_id, error = %e, "cannot read the session before its summary"),
        }
        // The analysis in full, from the records (the status holds it clipped).
        let analysis =
            match tarsy_exec::context::session_final_analysis(&self.store, session_id).await {
                Ok(Some(full)) => full,
                _ => request.final_analysis.clone(),
            };
        let outcome = match (&self.summarizer, config.chain(&request.chain)) {
            (Err(e), _) => Err(e.clone()),
            (Ok(_), None) => Err(format!("chain {:?} no longer exists", request.chain)),
            (Ok(s), Some(chain)) => s
                .generate(config, session_id, &chain.spec, &analysis)
                .await
                .map_err(|e| e.to_string()),
        };
        let (text, error) = match &outcome {
            Ok(text) => (Some(text.as_str()), None),
            Err(e) => (None, Some(e.as_str())),
        };
        match self
            .store
            .set_executive_summary(session_id, text, error)
            .await
        {
            Ok(()) | Err(StoreError::NotFound { .. }) => {}
            // The status still gets it; the session row keeps the clipped
            // form then.
            Err(e) => warn!(%session_id, error = %e, "cannot record the executive summary"),
        }
        match &outcome {
            Ok(_) => info!(%session_id, "executive summary generated"),
            Err(e) => {
                warn!(%session_id, error = %e, "executive summary failed (the session still completes)")
            }
        }
        outcome
    }
}
