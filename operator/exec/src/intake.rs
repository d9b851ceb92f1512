//! Intake, the same in every mode: how an accepted alert's session row is
//! built (the alert itself is checked by `tarsy_config`'s
//! [`Config::check_alert`], the rule set every entry point shares), and what
//! is checked before a question becomes a chat answer.

use std::time::Duration;

use tarsy_config::{Config, Defaults, chat_enabled};
use tarsy_core::control::{ChatError, ChatSubmission, NewAlert};
use tarsy_core::{McpSelection, ResolvedAgentConfig, SessionStatus};
use tarsy_masking::MaskingService;
use tarsy_store::{NewSession, Session, Store, StoreError};

/// The masking of alert data before it is stored, from the defaults'
/// alert masking settings. `None` when it cannot be built: alert data is
/// then stored unmasked (fail-open, logged).
pub fn alert_masker(defaults: &Defaults) -> Option<MaskingService> {
    match MaskingService::new([], defaults.alert_masking.clone()) {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!(error = %e, "alert data masking is unavailable; storing alert data unmasked");
            None
        }
    }
}

/// The session row of `alert` (id `id`, running `chain`, learning and
/// recalling memories in `memory_scope`), its data masked by `masker` —
/// the one row every writer (local mode, the operator, the cluster API)
/// creates, so whichever comes first writes the same.
pub fn new_session(
    id: impl Into<String>,
    chain: &str,
    alert: &NewAlert,
    masker: Option<&MaskingService>,
    memory_scope: Option<String>,
) -> NewSession {
    NewSession {
        id: id.into(),
        alert_data: masker.map_or_else(|| alert.data.clone(), |m| m.mask_alert_data(&alert.data)),
        alert_type: alert.alert_type.clone(),
        chain_id: chain.to_string(),
        author: Some(alert.author.clone()).filter(|a| !a.trim().is_empty()),
        // A credential in the URL (`?token=...`) is masked like alert data.
        runbook_url: alert
            .runbook_url
            .as_ref()
            .map(|url| masker.map_or_else(|| url.clone(), |m| m.mask_alert_data(url))),
        mcp_selection: alert
            .mcp_selection
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok()),
        memory_scope,
    }
}

/// Chat is for sessions whose investigation has ended, cancelled ones excepted.
pub fn chat_available(status: SessionStatus) -> bool {
    matches!(
        status,
        SessionStatus::Completed | SessionStatus::Failed | SessionStatus::TimedOut
    )
}

/// A question on `submission.session_id`: the question as it is stored
/// (trimmed, never empty, masked like alert data by `masker`) and the
/// session it is about.
pub async fn question_for(
    store: &Store,
    submission: &ChatSubmission,
    masker: Option<&MaskingService>,
) -> Result<(String, Session), ChatError> {
    let content = submission.content.trim();
    if content.is_empty() {
        return Err(ChatError::Invalid("the question is empty".into()));
    }
    let content = masker.map_or_else(|| content.to_string(), |m| m.mask_alert_data(content));
    match store.get_session(&submission.session_id).await {
        Ok(session) => Ok((content, session)),
        Err(StoreError::NotFound { .. }) => Err(ChatError::NotFound(submission.session_id.clone())),
        Err(e) => Err(ChatError::Internal(e.to_string())),
    }
}

/// Who answers a question, and for how long at most.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatAgent {
    /// The resolved chat agent.
    pub config: ResolvedAgentConfig,
    /// An answer gets the chain's whole session timeout from its own start
    /// (its session may have ended long ago).
    pub timeout: Duration,
}

/// The chat agent that answers questions about `session`: the session must
/// have ended (not cancelled), its chain must exist and allow chat; the
/// alert's MCP selection applies to the chat agent too.
pub fn chat_agent(config: &Config, session: &Session) -> Result<ChatAgent, ChatError> {
    if !chat_available(session.status) {
        return Err(ChatError::NotAvailable {
            status: session.status,
        });
    }
    let chain = config
        .chain(&session.chain_id)
        .ok_or_else(|| ChatError::Disabled(session.chain_id.clone()))?;
    if !chat_enabled(&chain.spec) {
        return Err(ChatError::Disabled(session.chain_id.clone()));
    }
    let selection: Option<McpSelection> = session
        .mcp_selection
        .as_ref()
        .map(|v| serde_json::from_value(v.clone()))
        .transpose()
        .map_err(|e| ChatError::Internal(format!("stored mcp_selection is unreadable: {e}")))?;
    let resolved = config
        .resolve_chat(&chain.name, &chain.spec, selection.as_ref())
        .map_err(|e| ChatError::Invalid(format!("cannot resolve the chat agent: {e}")))?;
    let timeout = config
        .session_timeout(&chain.spec)
        .map_err(|e| ChatError::Invalid(e.to_string()))?;
    Ok(ChatAgent {
        config: resolved,
        timeout,
    })
}
