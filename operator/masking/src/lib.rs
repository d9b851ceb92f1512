//! TARSy data masking: the single chokepoint between MCP tool results (and
//! submitted alert data) and everything that stores or reads them.
//!
//! - [`MaskingService::mask_tool_result`] is **fail-closed**: if masking
//!   fails, the whole result is replaced by a redaction notice.
//! - [`MaskingService::mask_alert_data`] is fail-open.
//! - Structural maskers ([`KubernetesSecretMasker`]) run first, then the
//!   regex patterns selected per server ([`MaskingConfig`]): built-ins
//!   ([`builtin::PATTERNS`], grouped in [`builtin::GROUPS`]) and custom ones.
//! - Every replacement is a `[MASKED_X]` marker; originals are never kept.
//!
//! ```
//! use tarsy_masking::{AlertMaskingConfig, MaskingConfig, MaskingService};
//!
//! let k8s: MaskingConfig = serde_json::from_str(r#"{"patternGroups": ["kubernetes"]}"#)?;
//! let masking = MaskingService::new(
//!     [("kubernetes-server".to_string(), k8s)],
//!     AlertMaskingConfig::default(),
//! )?;
//!
//! let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: aHVudGVyMg==\n";
//! let seen_by_llm = masking.mask_tool_result("kubernetes-server", secret);
//! assert!(seen_by_llm.contains("password: '[MASKED_SECRET_DATA]'"));
//! assert!(seen_by_llm.contains("name: db"));
//!
//! // Servers without masking configuration pass through unchanged.
//! assert_eq!(masking.mask_tool_result("time-server", "12:00"), "12:00");
//!
//! // Alert payloads use the `security` group by default.
//! let alert = masking.mask_alert_data(r#"{"owner": "oncall@example.com"}"#);
//! assert_eq!(alert, r#"{"owner": "[MASKED_EMAIL]"}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod builtin;
mod config;
mod error;
mod kubernetes;
mod pattern;
mod service;

pub use config::{AlertMaskingConfig, CustomPattern, MaskingConfig};
pub use error::MaskingError;
pub use kubernetes::{KubernetesSecretMasker, MASKED_SECRET_DATA, SecretMaskError};
pub use service::{MaskingService, mask_log_line, mask_memory_text, precompile_builtins};
