//! Masking configuration, embeddable in other crates' configuration types.

use serde::{Deserialize, Serialize};

/// Per-MCP-server masking configuration.
///
/// ```yaml
/// dataMasking:
///   enabled: true
///   patternGroups: [kubernetes]
///   patterns: [email]
///   customPatterns:
///     - name: internal_ticket_token
///       regex: 'TT-[0-9a-f]{32}'
///       replacement: '[MASKED_TICKET_TOKEN]'
/// ```
///
/// Groups and patterns are unioned; code maskers named in either run first,
/// then custom patterns, then built-in patterns in their fixed order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MaskingConfig {
    /// Whether masking runs for this server. Defaults to `true` when the
    /// block is present but the field is omitted: writing a masking block
    /// and forgetting this line must not silently disable it.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Built-in group names (see [`crate::builtin::GROUPS`]).
    #[serde(default, alias = "pattern_groups")]
    pub pattern_groups: Vec<String>,
    /// Individual built-in pattern or code-masker names.
    #[serde(default)]
    pub patterns: Vec<String>,
    /// Additional regex patterns for this server.
    #[serde(default, alias = "custom_patterns")]
    pub custom_patterns: Vec<CustomPattern>,
}

impl Default for MaskingConfig {
    /// Enabled, with nothing selected (masks nothing until configured).
    fn default() -> Self {
        Self {
            enabled: true,
            pattern_groups: Vec::new(),
            patterns: Vec::new(),
            custom_patterns: Vec::new(),
        }
    }
}

impl MaskingConfig {
    /// Checks names and compiles custom regexes exactly as
    /// [`crate::MaskingService::new`] would, so configuration loading can
    /// reject a bad server block early with the same message.
    pub fn validate(&self, server: &str) -> Result<(), crate::MaskingError> {
        crate::service::resolve_server(server, self).map(|_| ())
    }
}

/// A user-defined regex masking pattern.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomPattern {
    /// Unique name within the server; must not reuse a built-in name.
    pub name: String,
    /// Regular expression (Rust `regex` syntax); must not match the empty string.
    pub regex: String,
    /// Replacement in `regex` expansion syntax (`${1}` keeps group 1).
    /// Empty means `[MASKED_<NAME>]` with the name upper-cased.
    #[serde(default)]
    pub replacement: String,
    /// Free text for humans.
    #[serde(default)]
    pub description: String,
}

/// Masking of alert payloads before they are stored (fail-open).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AlertMaskingConfig {
    /// Default `true`.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Built-in group applied to alert data; default `security`.
    #[serde(default = "default_alert_group", alias = "pattern_group")]
    pub pattern_group: String,
}

impl Default for AlertMaskingConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            pattern_group: default_alert_group(),
        }
    }
}

fn default_true() -> bool {
    true
}

fn default_alert_group() -> String {
    "security".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_and_defaults() {
        let cfg: MaskingConfig = serde_yaml::from_str(
            "patternGroups: [basic]\ncustomPatterns:\n  - name: x\n    regex: 'X-[0-9]+'\n",
        )
        .unwrap();
        assert!(cfg.enabled);
        assert_eq!(cfg.pattern_groups, ["basic"]);
        assert_eq!(cfg.custom_patterns[0].replacement, "");
        let json = serde_json::to_value(&cfg).unwrap();
        assert!(json.get("patternGroups").is_some());
        assert!(json.get("customPatterns").is_some());

        let alert: AlertMaskingConfig = serde_yaml::from_str("{}").unwrap();
        assert_eq!(alert, AlertMaskingConfig::default());
        assert_eq!(alert.pattern_group, "security");
    }

    #[test]
    fn typo_in_field_is_rejected() {
        let err = serde_yaml::from_str::<MaskingConfig>("patternGroup: [basic]\n").unwrap_err();
        assert!(err.to_string().contains("patternGroup"), "{err}");
    }
}
