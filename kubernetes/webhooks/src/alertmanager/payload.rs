//! Alertmanager's webhook payload, version 4, and its strict parser.
//!
//! Alertmanager always sends every field; this parser requires the ones the
//! bridge cannot work without (`version`, `status`, `alerts`, and per alert
//! `status`, `labels`, `startsAt`, `fingerprint`) and defaults the rest, so a
//! hand-written `curl` test payload needs only those. Unknown fields are
//! ignored (forward compatibility).

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};

/// The only payload version this bridge accepts.
pub const SUPPORTED_VERSION: &str = "4";

/// Whether a notification (or one alert of it) is firing or resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AmStatus {
    /// The alert is firing.
    Firing,
    /// The alert has resolved.
    Resolved,
}

impl AmStatus {
    /// `firing` or `resolved`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Firing => "firing",
            Self::Resolved => "resolved",
        }
    }
}

/// One notification from an Alertmanager webhook receiver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookPayload {
    /// Payload format version; must be `"4"`.
    pub version: String,
    /// Key identifying the alert group.
    #[serde(default)]
    pub group_key: String,
    /// Alerts left out because the receiver's `max_alerts` was exceeded.
    #[serde(default)]
    pub truncated_alerts: u64,
    /// `resolved` only when every alert of the group is resolved.
    pub status: AmStatus,
    /// Name of the receiver that sent this.
    #[serde(default)]
    pub receiver: String,
    /// Labels the group is grouped by.
    #[serde(default)]
    pub group_labels: BTreeMap<String, String>,
    /// Labels common to every alert.
    #[serde(default)]
    pub common_labels: BTreeMap<String, String>,
    /// Annotations common to every alert.
    #[serde(default)]
    pub common_annotations: BTreeMap<String, String>,
    /// Backlink to the Alertmanager.
    #[serde(default, rename = "externalURL")]
    pub external_url: String,
    /// The alerts.
    pub alerts: Vec<AmAlert>,
}

/// One alert of a notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmAlert {
    /// `firing` or `resolved`.
    pub status: AmStatus,
    /// Identifying labels (`alertname`, ...).
    pub labels: BTreeMap<String, String>,
    /// Annotations (`summary`, `description`, `runbook_url`, ...).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// When the alert started firing (RFC 3339).
    pub starts_at: DateTime<Utc>,
    /// When it resolved; Alertmanager sends `0001-01-01T00:00:00Z` while it fires.
    #[serde(default)]
    pub ends_at: Option<DateTime<Utc>>,
    /// Link to the rule's expression in the generator (Prometheus).
    #[serde(default, rename = "generatorURL")]
    pub generator_url: String,
    /// Stable identity of the label set.
    pub fingerprint: String,
}

impl AmAlert {
    /// `endsAt`, unless it is Go's zero time (still firing).
    pub fn ends_at(&self) -> Option<DateTime<Utc>> {
        self.ends_at.filter(|t| t.year() > 1)
    }
}

/// Why a payload was refused (the 400 body).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// The body is not valid JSON or does not match the schema.
    #[error("malformed Alertmanager payload at `{path}`: {message}")]
    Malformed {
        /// Field path (`alerts[1].startsAt`, `.` for the document).
        path: String,
        /// serde's message, with line and column.
        message: String,
    },
    /// Wrong `version`.
    #[error("unsupported Alertmanager payload version {0:?}: this bridge accepts version \"4\"")]
    UnsupportedVersion(String),
}

/// serde_path_to_error marks a segment it could not name (a syntax error
/// inside an element) with `?`; drop it rather than show it.
pub(crate) fn clean_path(path: &str) -> String {
    let cleaned = path.trim_end_matches(".?").trim_end_matches('?');
    if cleaned.is_empty() {
        ".".into()
    } else {
        cleaned.to_string()
    }
}

/// Parses and checks a payload.
pub fn parse_payload(body: &[u8]) -> Result<WebhookPayload, PayloadError> {
    // serde would accept a struct written as an array and then complain
    // about its length; say what is expected instead.
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        Some(_) => {
            return Err(PayloadError::Malformed {
                path: ".".into(),
                message: "expected a JSON object (Alertmanager webhook payload)".into(),
            });
        }
        None => {
            return Err(PayloadError::Malformed {
                path: ".".into(),
                message: "the request body is empty".into(),
            });
        }
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let payload: WebhookPayload = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = clean_path(&e.path().to_string());
        PayloadError::Malformed {
            path,
            message: e.into_inner().to_string(),
        }
    })?;
    de.end().map_err(|e| PayloadError::Malformed {
        path: ".".into(),
        message: e.to_string(),
    })?;
    if payload.version != SUPPORTED_VERSION {
        return Err(PayloadError::UnsupportedVersion(payload.version));
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_payload_parses_and_zero_end_time_means_firing() {
        let p = parse_payload(
            br#"{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"X"},
            "startsAt":"2025-03-01T10:00:00.123Z","endsAt":"0001-01-01T00:00:00Z","fingerprint":"ab12"}]}"#,
        )
        .unwrap();
        assert_eq!(p.alerts[0].ends_at(), None);
        assert_eq!(p.truncated_alerts, 0);
    }

    #[test]
    fn errors_name_the_field_and_position() {
        let e = parse_payload(
            b"{\"version\":\"4\",\"status\":\"firing\",\n\"alerts\":[{\"status\":\"firing\",\"labels\":{},\"startsAt\":\"yesterday\",\"fingerprint\":\"a\"}]}",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`alerts[0].startsAt`"), "{e}");
        assert!(e.contains("line 2"), "{e}");

        let e = parse_payload(br#"{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{},"startsAt":"2025-03-01T10:00:00Z"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `fingerprint`"), "{e}");
        assert!(e.contains("`alerts[0]`"), "{e}");

        let e = parse_payload(br#"{"version":"4","status":"burning","alerts":[]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`status`") && e.contains("burning"), "{e}");

        let e = parse_payload(br#"{"version":"3","status":"firing","alerts":[]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unsupported") && e.contains("\"3\""), "{e}");

        let e = parse_payload(br#"{"version":"4","status":"firing","alerts":[]} x"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("trailing characters"), "{e}");
    }
}
