//! Admission rules, the same in every mode: what is checked before an alert
//! becomes a session (and how its row is built), and before a question
//! becomes a chat answer.

use std::time::Duration;

use tarsy_config::{Config, Defaults, Named, ResolveError, chat_enabled};
use tarsy_core::control::{ChatError, ChatSubmission, NewAlert, SubmitError};
use tarsy_core::{MAX_ALERT_DATA_BYTES, McpSelection, ResolvedAgentConfig, SessionStatus};
use tarsy_crds::ChainSpec;
use tarsy_masking::MaskingService;
use tarsy_store::{NewSession, Session, Store, StoreError};

/// The tools MCP servers are known to offer (local mode: as the health
/// monitor last listed them). A server whose tools are unknown is not
/// checked; an unknown tool then shows on the execution's timeline.
pub trait ToolCatalog: Send + Sync {
    /// The tool names of `server`, if known.
    fn tool_names(&self, server: &str) -> Option<Vec<String>>;
}

/// Knows no tools (nothing is checked).
pub struct NoToolCatalog;

impl ToolCatalog for NoToolCatalog {
    fn tool_names(&self, _: &str) -> Option<Vec<String>> {
        None
    }
}

/// Tool names by server (cluster mode: as MCPServers' `lastHealth` lists
/// them).
impl ToolCatalog for std::collections::BTreeMap<String, Vec<String>> {
    fn tool_names(&self, server: &str) -> Option<Vec<String>> {
        self.get(server).filter(|t| !t.is_empty()).cloned()
    }
}

impl ToolCatalog for tarsy_mcp::HealthMonitor {
    fn tool_names(&self, server: &str) -> Option<Vec<String>> {
        tarsy_mcp::HealthMonitor::tool_names(self, server)
    }
}

/// Checks `alert` against `config` and returns the chain that will run it:
/// a non-empty type, data within [`MAX_ALERT_DATA_BYTES`], a chain that
/// resolves (named, or the one for the type) and an MCP selection naming
/// only known servers, and only tools those servers are known to offer
/// (per `tools`).
pub fn check_alert<'c>(
    config: &'c Config,
    alert: &NewAlert,
    tools: &dyn ToolCatalog,
) -> Result<&'c Named<ChainSpec>, SubmitError> {
    if alert.alert_type.trim().is_empty() {
        return Err(SubmitError::Invalid("alert_type is empty".into()));
    }
    if alert.data.len() > MAX_ALERT_DATA_BYTES {
        return Err(SubmitError::Invalid(format!(
            "alert data is {} bytes; the limit is {MAX_ALERT_DATA_BYTES}",
            alert.data.len()
        )));
    }
    let chain = config
        .chain_for_alert(&alert.alert_type, alert.chain.as_deref())
        .map_err(submit_error)?;
    if let Some(selection) = &alert.mcp_selection {
        config.validate_mcp_selection(selection).map_err(|e| {
            match selection
                .servers
                .iter()
                .find(|s| config.mcp_server(&s.name).is_none())
            {
                Some(unknown) => SubmitError::UnknownMcpServer(unknown.name.clone()),
                None => SubmitError::Invalid(format!("mcp_selection: {e}")),
            }
        })?;
        check_selected_tools(selection, tools)?;
    }
    Ok(chain)
}

/// Refuses a selection naming tools its server is known not to offer,
/// naming them and the tools it does offer.
fn check_selected_tools(
    selection: &McpSelection,
    catalog: &dyn ToolCatalog,
) -> Result<(), SubmitError> {
    for (index, server) in selection.servers.iter().enumerate() {
        let Some(wanted) = server.tools.as_ref().filter(|t| !t.is_empty()) else {
            continue;
        };
        let Some(offered) = catalog.tool_names(&server.name) else {
            continue;
        };
        let unknown: Vec<&str> = wanted
            .iter()
            .filter(|t| !offered.contains(t))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            let mut offered = offered;
            offered.sort();
            return Err(SubmitError::Invalid(format!(
                "mcp_selection.servers[{index}].tools: MCP server {:?} has no tool {} (it offers: {})",
                server.name,
                unknown
                    .iter()
                    .map(|t| format!("{t:?}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                clip_list(&offered)
            )));
        }
    }
    Ok(())
}

/// A list for an error message, at most 20 names.
fn clip_list(names: &[String]) -> String {
    const MAX: usize = 20;
    let mut text = names
        .iter()
        .take(MAX)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > MAX {
        text.push_str(&format!(", … {} more", names.len() - MAX));
    }
    text
}

/// The submission refusal a chain resolution failure means.
pub fn submit_error(e: ResolveError) -> SubmitError {
    match e {
        ResolveError::NoChainForAlertType(t) => SubmitError::UnknownAlertType(t),
        ResolveError::AmbiguousAlertType { alert_type, chains } => {
            SubmitError::AmbiguousAlertType {
                alert_type,
                chains: chains.split(", ").map(str::to_string).collect(),
            }
        }
        ResolveError::ChainNotFound(c) => SubmitError::UnknownChain(c),
        other => SubmitError::Invalid(other.to_string()),
    }
}

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

/// The session row of `alert` (id `id`, running `chain`), its data masked
/// by `masker` — the one row every writer (local mode, the operator, the
/// cluster API) creates, so whichever comes first writes the same.
pub fn new_session(
    id: impl Into<String>,
    chain: &str,
    alert: &NewAlert,
    masker: Option<&MaskingService>,
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
