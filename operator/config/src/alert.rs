//! The rules of a valid alert: one set, which every entry point applies —
//! the REST API (through the mode's `SessionControl`, local or cluster), the
//! admission webhook for Alert resources, and the Alertmanager bridge before
//! it creates an Alert. Each reports the same [`InvalidAlert`] message; only
//! the envelope differs (a 400 or 413 body, an AdmissionReview denial, a
//! line of the bridge's report).
//!
//! | rule | refused when |
//! |---|---|
//! | alert type | empty or blank; over [`MAX_NAME_CHARS`] characters |
//! | chain name | over [`MAX_NAME_CHARS`] characters |
//! | data | empty or blank; over [`MAX_ALERT_DATA_BYTES`] bytes |
//! | runbook URL | not `http://` or `https://`; over [`MAX_RUNBOOK_URL_CHARS`] characters |
//! | chain | the named chain does not exist; unnamed, no chain or several chains handle the type |
//! | MCP selection | see [`McpSelection::validate`](tarsy_core::McpSelection::validate); tools a server is known not to offer |
//!
//! [`check_alert_fields`] applies the rules that need no configuration;
//! [`Config::check_alert`] applies them all.

use crate::model::ChainSpec;
use tarsy_core::alert::name_list;
use tarsy_core::control::NewAlert;
use tarsy_core::{
    InvalidAlert, MAX_ALERT_DATA_BYTES, MAX_NAME_CHARS, MAX_RUNBOOK_URL_CHARS, ToolCatalog,
};

use crate::registry::{Config, Named};

/// The rules needing no configuration: alert type, chain name, data and
/// runbook URL.
pub fn check_alert_fields(alert: &NewAlert) -> Result<(), InvalidAlert> {
    check_alert_type(&alert.alert_type)?;
    if let Some(chain) = &alert.chain {
        let chars = chain.chars().count();
        if chars > MAX_NAME_CHARS {
            return Err(InvalidAlert::ChainNameTooLong { chars });
        }
    }
    check_alert_data(&alert.data)?;
    if let Some(url) = &alert.runbook_url {
        check_runbook_url(url)?;
    }
    Ok(())
}

/// Not empty or blank, at most [`MAX_NAME_CHARS`] characters.
fn check_alert_type(alert_type: &str) -> Result<(), InvalidAlert> {
    if alert_type.trim().is_empty() {
        return Err(InvalidAlert::EmptyAlertType);
    }
    let chars = alert_type.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(InvalidAlert::AlertTypeTooLong { chars });
    }
    Ok(())
}

/// Not empty or blank, at most [`MAX_ALERT_DATA_BYTES`] bytes.
fn check_alert_data(data: &str) -> Result<(), InvalidAlert> {
    if data.len() > MAX_ALERT_DATA_BYTES {
        return Err(InvalidAlert::DataTooLarge { bytes: data.len() });
    }
    if data.trim().is_empty() {
        return Err(InvalidAlert::EmptyData);
    }
    Ok(())
}

/// `http://` or `https://` (as the Alert resource's CEL rule has it), at
/// most [`MAX_RUNBOOK_URL_CHARS`] characters. Whether it can be fetched is
/// found out when the investigation starts (a warning then, not a refusal).
pub fn check_runbook_url(url: &str) -> Result<(), InvalidAlert> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(InvalidAlert::RunbookUrlScheme);
    }
    let chars = url.chars().count();
    if chars > MAX_RUNBOOK_URL_CHARS {
        return Err(InvalidAlert::RunbookUrlTooLong { chars });
    }
    Ok(())
}

/// Why no chain was found for an alert; each caller words it in its own
/// error type.
pub(crate) enum ChainMiss {
    /// The named chain does not exist.
    NotFound(String),
    /// No chain handles the alert type.
    NoneForType,
    /// Several chains (sorted) handle the alert type.
    Ambiguous(Vec<String>),
}

impl Config {
    /// Checks `alert` against every rule (see [`crate::alert`]) and
    /// returns the chain that will run it. `tools` tells which tools the
    /// MCP servers offer ([`tarsy_core::NoToolCatalog`] when unknown).
    pub fn check_alert(
        &self,
        alert: &NewAlert,
        tools: &dyn ToolCatalog,
    ) -> Result<&Named<ChainSpec>, InvalidAlert> {
        check_alert_fields(alert)?;
        let chain = self
            .find_alert_chain(&alert.alert_type, alert.chain.as_deref())
            .map_err(|miss| match miss {
                ChainMiss::NotFound(name) => InvalidAlert::UnknownChain {
                    name,
                    known: name_list(self.chains.keys()),
                },
                ChainMiss::NoneForType => InvalidAlert::NoChainForAlertType {
                    alert_type: alert.alert_type.clone(),
                    known: name_list(self.alert_types()),
                },
                ChainMiss::Ambiguous(chains) => InvalidAlert::AmbiguousAlertType {
                    alert_type: alert.alert_type.clone(),
                    chains,
                },
            })?;
        if let Some(selection) = &alert.mcp_selection {
            self.validate_mcp_selection(selection)?;
            selection.check_tools(tools)?;
        }
        Ok(chain)
    }

    /// The chain for an alert: `chain_ref` if given, else the one chain
    /// whose alertTypes contain `alert_type`.
    pub(crate) fn find_alert_chain(
        &self,
        alert_type: &str,
        chain_ref: Option<&str>,
    ) -> Result<&Named<ChainSpec>, ChainMiss> {
        if let Some(name) = chain_ref {
            return self
                .chain(name)
                .ok_or_else(|| ChainMiss::NotFound(name.to_string()));
        }
        let matching: Vec<&Named<ChainSpec>> = self
            .chains()
            .filter(|c| c.spec.alert_types.iter().any(|t| t == alert_type))
            .collect();
        match matching.as_slice() {
            [one] => Ok(one),
            [] => Err(ChainMiss::NoneForType),
            many => Err(ChainMiss::Ambiguous(
                many.iter().map(|c| c.name.clone()).collect(),
            )),
        }
    }
}
