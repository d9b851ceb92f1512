//! The masking service: the single chokepoint for tool results and alert data.

use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use regex::Regex;

use crate::builtin::{self, KUBERNETES_SECRET};
use crate::config::{AlertMaskingConfig, MaskingConfig};
use crate::error::MaskingError;
use crate::kubernetes::KubernetesSecretMasker;
use crate::pattern::{CompiledPattern, builtin_filter};

/// Masks MCP tool results (fail-closed) and alert data (fail-open).
///
/// Built once at startup from every server's [`MaskingConfig`]; all regexes
/// are compiled by then (built-ins once per process), none on the hot path. Cheap to share (`Arc`), thread
/// safe, and holds no state besides the compiled patterns.
#[derive(Debug)]
pub struct MaskingService {
    servers: HashMap<String, Plan>,
    alert: Option<Plan>,
}

/// What to run for one server (or for alerts), in order.
#[derive(Debug, Clone)]
struct Plan {
    kubernetes: Option<Arc<KubernetesSecretMasker>>,
    patterns: Vec<Arc<CompiledPattern>>,
}

/// A server's validated selection, before sharing compiled built-ins.
pub(crate) struct Selection {
    kubernetes: bool,
    builtins: HashSet<&'static str>,
    customs: Vec<CompiledPattern>,
}

/// Why a plan could not mask a text.
#[derive(Debug, thiserror::Error)]
enum ApplyError {
    #[error("kubernetes_secret masker: {0}")]
    Kubernetes(#[from] crate::kubernetes::SecretMaskError),
    #[error("masker panicked")]
    Panic,
}

/// The built-in maskers, compiled once per process.
struct Builtins {
    kubernetes: Arc<KubernetesSecretMasker>,
    patterns: Vec<(&'static str, Arc<CompiledPattern>)>,
}

/// Compiles the built-in maskers on first use and keeps them: compiling
/// them takes milliseconds (the largest part of `tarsy investigate`'s
/// start-up), and they never change.
fn builtins() -> Result<&'static Builtins, MaskingError> {
    static BUILTINS: OnceLock<Result<Builtins, (String, regex::Error)>> = OnceLock::new();
    let compiled = BUILTINS.get_or_init(|| {
        let kubernetes =
            KubernetesSecretMasker::new().map_err(|e| (KUBERNETES_SECRET.to_owned(), e))?;
        let mut patterns = Vec::with_capacity(builtin::PATTERNS.len());
        for p in builtin::PATTERNS {
            let regex = Regex::new(p.regex).map_err(|e| (p.name.to_owned(), e))?;
            patterns.push((
                p.name,
                Arc::new(CompiledPattern::new(
                    p.name,
                    regex,
                    p.replacement,
                    builtin_filter(p.name),
                )),
            ));
        }
        Ok(Builtins {
            kubernetes: Arc::new(kubernetes),
            patterns,
        })
    });
    compiled
        .as_ref()
        .map_err(|(name, source)| MaskingError::Builtin {
            name: name.clone(),
            source: source.clone(),
        })
}

/// Starts compiling the built-in maskers on a background thread, so that a
/// [`MaskingService`] built later (after the configuration is loaded) finds
/// them ready. Optional: without it the first `MaskingService::new`
/// compiles them.
pub fn precompile_builtins() {
    let spawned = std::thread::Builder::new()
        .name("masking-compile".into())
        .spawn(|| {
            let _ = builtins();
        });
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "cannot compile masking patterns ahead; compiled on first use");
    }
}

impl MaskingService {
    /// Compiles each server's selection (the built-in patterns are compiled
    /// once per process and shared).
    ///
    /// Servers absent from `servers`, or present with `enabled: false`, get
    /// no masking. Fails on the first unknown group or pattern name or
    /// invalid custom pattern, naming the server and field.
    pub fn new(
        servers: impl IntoIterator<Item = (String, MaskingConfig)>,
        alert: AlertMaskingConfig,
    ) -> Result<Self, MaskingError> {
        let builtins = builtins()?;
        let kubernetes = &builtins.kubernetes;
        let compiled = &builtins.patterns;
        let plan_for = |sel: Selection| Plan {
            kubernetes: sel.kubernetes.then(|| Arc::clone(kubernetes)),
            // Custom patterns first: they are the operator's precise
            // knowledge and must see the text before generic sweeps.
            patterns: sel
                .customs
                .into_iter()
                .map(Arc::new)
                .chain(
                    compiled
                        .iter()
                        .filter(|(name, _)| sel.builtins.contains(name))
                        .map(|(_, p)| Arc::clone(p)),
                )
                .collect(),
        };

        let mut plans = HashMap::new();
        for (server, cfg) in servers {
            let sel = resolve_server(&server, &cfg)?;
            if cfg.enabled {
                plans.insert(server, plan_for(sel));
            }
        }
        let alert_plan = if alert.enabled {
            let members = builtin::group(&alert.pattern_group).ok_or_else(|| {
                MaskingError::UnknownAlertGroup {
                    name: alert.pattern_group.clone(),
                    known: known_groups(),
                }
            })?;
            let mut sel = Selection {
                kubernetes: false,
                builtins: HashSet::new(),
                customs: Vec::new(),
            };
            for m in members {
                add_member(&mut sel, m);
            }
            Some(plan_for(sel))
        } else {
            None
        };
        Ok(Self {
            servers: plans,
            alert: alert_plan,
        })
    }

    /// Masks a tool result from `server`. **Fail-closed**: if any masker
    /// fails or panics, the whole content is replaced by a redaction notice.
    /// Content from servers without (enabled) masking is returned unchanged.
    pub fn mask_tool_result(&self, server: &str, content: &str) -> String {
        let Some(plan) = self.servers.get(server) else {
            return content.to_owned();
        };
        match catch_unwind(AssertUnwindSafe(|| plan.apply(content, false)))
            .unwrap_or(Err(ApplyError::Panic))
        {
            Ok(masked) => masked,
            Err(err) => {
                tracing::error!(
                    server,
                    error = %err,
                    bytes = content.len(),
                    "masking failed; tool result withheld"
                );
                redaction_notice(server, content.len())
            }
        }
    }

    /// Masks alert data before it is stored. **Fail-open**: a failing
    /// structural masker is skipped, and if the regex sweep itself fails the
    /// data is returned unmasked (availability over secrecy for
    /// user-submitted data). Returns the input when alert masking is off.
    pub fn mask_alert_data(&self, data: &str) -> String {
        let Some(plan) = &self.alert else {
            return data.to_owned();
        };
        match catch_unwind(AssertUnwindSafe(|| plan.apply(data, true)))
            .unwrap_or(Err(ApplyError::Panic))
        {
            Ok(masked) => masked,
            Err(err) => {
                tracing::warn!(error = %err, "alert data masking failed; storing unmasked");
                data.to_owned()
            }
        }
    }

    /// Whether tool results from `server` are masked.
    pub fn masks_server(&self, server: &str) -> bool {
        self.servers.contains_key(server)
    }
}

impl Plan {
    /// Code maskers first, then regex patterns in order. `lenient` (alert
    /// data and chat questions, which people write) skips a failing code
    /// masker instead of failing, and masks Secrets in place so the text
    /// around them stays as typed.
    fn apply(&self, content: &str, lenient: bool) -> Result<String, ApplyError> {
        let mut current: Option<String> = None;
        if let Some(k8s) = &self.kubernetes
            && k8s.applies_to(content)
        {
            let masked = if lenient {
                k8s.mask_in_place(content)
            } else {
                k8s.mask(content)
            };
            match masked {
                Ok(std::borrow::Cow::Owned(masked)) => current = Some(masked),
                Ok(std::borrow::Cow::Borrowed(_)) => {}
                Err(err) if lenient => {
                    tracing::warn!(error = %err, "structural masker failed; continuing with regex patterns");
                }
                Err(err) => return Err(err.into()),
            }
        }
        for p in &self.patterns {
            let text = current.as_deref().unwrap_or(content);
            if let Some(masked) = p.apply(text) {
                tracing::trace!(pattern = %p.name, "pattern matched");
                current = Some(masked);
            }
        }
        Ok(current.unwrap_or_else(|| content.to_owned()))
    }
}

/// The text that replaces a tool result that could not be masked.
/// How a redaction notice starts.
const REDACTION_PREFIX: &str = "[MASKED_TOOL_RESULT:";

fn redaction_notice(server: &str, bytes: usize) -> String {
    format!(
        "[MASKED_TOOL_RESULT: the result from MCP server '{server}' ({bytes} bytes) was withheld because data masking failed; it may contain secrets. Proceed without it.]"
    )
}

fn known_groups() -> String {
    builtin::GROUPS
        .iter()
        .map(|(g, _)| *g)
        .collect::<Vec<_>>()
        .join(", ")
}

fn known_patterns() -> String {
    builtin::CODE_MASKERS
        .iter()
        .copied()
        .chain(builtin::PATTERNS.iter().map(|p| p.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn add_member(sel: &mut Selection, name: &str) -> bool {
    if name == KUBERNETES_SECRET {
        sel.kubernetes = true;
        return true;
    }
    match builtin::pattern(name) {
        Some(p) => {
            sel.builtins.insert(p.name);
            true
        }
        None => false,
    }
}

/// Validates one server's configuration and resolves its selection.
pub(crate) fn resolve_server(server: &str, cfg: &MaskingConfig) -> Result<Selection, MaskingError> {
    let mut sel = Selection {
        kubernetes: false,
        builtins: HashSet::new(),
        customs: Vec::new(),
    };
    for (i, g) in cfg.pattern_groups.iter().enumerate() {
        let members = builtin::group(g).ok_or_else(|| MaskingError::UnknownGroup {
            server: server.to_owned(),
            field: format!("patternGroups[{i}]"),
            name: g.clone(),
            known: known_groups(),
        })?;
        for m in members {
            add_member(&mut sel, m);
        }
    }
    for (i, name) in cfg.patterns.iter().enumerate() {
        if !add_member(&mut sel, name) {
            return Err(MaskingError::UnknownPattern {
                server: server.to_owned(),
                field: format!("patterns[{i}]"),
                name: name.clone(),
                known: known_patterns(),
            });
        }
    }
    let mut seen = HashSet::new();
    for (i, custom) in cfg.custom_patterns.iter().enumerate() {
        let invalid = |field: &str, reason: String| MaskingError::InvalidCustomPattern {
            server: server.to_owned(),
            field: format!("customPatterns[{i}].{field}"),
            reason,
        };
        let name = custom.name.trim();
        if name.is_empty() {
            return Err(invalid(
                "name",
                "custom pattern name must not be empty".into(),
            ));
        }
        if builtin::pattern(name).is_some() || builtin::is_code_masker(name) {
            return Err(invalid(
                "name",
                format!("custom pattern '{name}' reuses a built-in pattern name"),
            ));
        }
        if !seen.insert(name.to_owned()) {
            return Err(invalid(
                "name",
                format!("custom pattern '{name}' is defined twice"),
            ));
        }
        let regex = Regex::new(&custom.regex).map_err(|source| MaskingError::InvalidRegex {
            server: server.to_owned(),
            field: format!("customPatterns[{i}].regex"),
            name: name.to_owned(),
            source,
        })?;
        if regex.is_match("") {
            return Err(invalid(
                "regex",
                format!("custom pattern '{name}' matches the empty string"),
            ));
        }
        let replacement = if custom.replacement.is_empty() {
            format!("[MASKED_{}]", name.to_ascii_uppercase())
        } else {
            custom.replacement.clone()
        };
        sel.customs
            .push(CompiledPattern::new(name, regex, &replacement, None));
    }
    Ok(sel)
}

/// Masks a line a child process wrote (an MCP server's stderr) before it is
/// logged, with the `kubernetes` and `security` groups whatever the
/// server's own configuration: a log line is read by more people than a
/// tool result. **Fail-closed**: a line that cannot be masked is withheld.
pub fn mask_log_line(line: &str) -> String {
    static LOG_MASKING: std::sync::LazyLock<Option<MaskingService>> =
        std::sync::LazyLock::new(|| {
            let cfg = MaskingConfig {
                pattern_groups: vec!["kubernetes".into(), "security".into()],
                ..MaskingConfig::default()
            };
            MaskingService::new(
                [(LOG_SERVER.to_string(), cfg)],
                AlertMaskingConfig::default(),
            )
            .ok()
        });
    match &*LOG_MASKING {
        Some(m) => {
            let masked = m.mask_tool_result(LOG_SERVER, line);
            if masked.starts_with(REDACTION_PREFIX) {
                WITHHELD_LINE.to_string()
            } else {
                masked
            }
        }
        None => WITHHELD_LINE.to_string(),
    }
}

/// Masks the text of an investigation memory before it is stored, with
/// every built-in pattern: a memory is put into later prompts and shown to
/// people, so it never carries a secret. **Fail-closed**: `None` when the
/// text cannot be masked (it is then not stored).
pub fn mask_memory_text(text: &str) -> Option<String> {
    static MEMORY_MASKING: std::sync::LazyLock<Option<MaskingService>> =
        std::sync::LazyLock::new(|| {
            let cfg = MaskingConfig {
                pattern_groups: vec!["all".into()],
                ..MaskingConfig::default()
            };
            MaskingService::new(
                [(MEMORY_SERVER.to_string(), cfg)],
                AlertMaskingConfig::default(),
            )
            .ok()
        });
    let masker = MEMORY_MASKING.as_ref()?;
    let masked = masker.mask_tool_result(MEMORY_SERVER, text);
    (!masked.starts_with(REDACTION_PREFIX)).then_some(masked)
}

/// The pseudo-server name of [`mask_memory_text`]'s selection.
const MEMORY_SERVER: &str = "memory";

/// The pseudo-server name of [`mask_log_line`]'s selection.
const LOG_SERVER: &str = "log";

/// What replaces a log line that could not be masked.
const WITHHELD_LINE: &str = "[line withheld: masking failed]";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CustomPattern;

    fn cfg(groups: &[&str], patterns: &[&str]) -> MaskingConfig {
        MaskingConfig {
            enabled: true,
            pattern_groups: groups.iter().map(|s| s.to_string()).collect(),
            patterns: patterns.iter().map(|s| s.to_string()).collect(),
            custom_patterns: vec![],
        }
    }

    fn custom(name: &str, regex: &str) -> CustomPattern {
        CustomPattern {
            name: name.into(),
            regex: regex.into(),
            replacement: String::new(),
            description: String::new(),
        }
    }

    #[test]
    fn service_is_shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<MaskingService>();
    }

    #[test]
    fn unknown_group_names_server_and_field() {
        let err = MaskingService::new(
            [("k8s".to_string(), cfg(&["basic", "kubernets"], &[]))],
            AlertMaskingConfig::default(),
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("MCP server 'k8s'"), "{msg}");
        assert!(msg.contains("patternGroups[1]"), "{msg}");
        assert!(msg.contains("'kubernets'"), "{msg}");
    }

    #[test]
    fn unknown_pattern_names_server_and_field() {
        let err = cfg(&[], &["email", "emails"]).validate("gh").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("MCP server 'gh': patterns[1]: unknown pattern 'emails'"),
            "{msg}"
        );
        // Code masker names are valid patterns.
        cfg(&[], &["kubernetes_secret"]).validate("gh").unwrap();
    }

    #[test]
    fn invalid_custom_regex_and_empty_match_rejected() {
        let mut c = cfg(&[], &[]);
        c.custom_patterns = vec![custom("ok", "X-[0-9]+"), custom("bad", "(unclosed")];
        let msg = c.validate("srv").unwrap_err().to_string();
        assert!(msg.contains("customPatterns[1].regex"), "{msg}");
        assert!(msg.contains("'bad'"), "{msg}");

        c.custom_patterns = vec![custom("empty", "a*")];
        let msg = c.validate("srv").unwrap_err().to_string();
        assert!(msg.contains("customPatterns[0].regex"), "{msg}");
        assert!(msg.contains("empty string"), "{msg}");

        c.custom_patterns = vec![custom("email", "x+")];
        assert!(
            c.validate("srv")
                .unwrap_err()
                .to_string()
                .contains("built-in")
        );
        c.custom_patterns = vec![custom("d", "x+"), custom("d", "y+")];
        assert!(c.validate("srv").unwrap_err().to_string().contains("twice"));
    }

    #[test]
    fn unknown_alert_group_rejected() {
        let err = MaskingService::new(
            [],
            AlertMaskingConfig {
                enabled: true,
                pattern_group: "secure".into(),
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("'secure'"), "{err}");
    }

    #[test]
    fn unconfigured_and_disabled_servers_pass_through() {
        let mut off = cfg(&["all"], &[]);
        off.enabled = false;
        let svc = MaskingService::new(
            [
                ("off".to_string(), off),
                ("on".to_string(), cfg(&["basic"], &[])),
            ],
            AlertMaskingConfig::default(),
        )
        .unwrap();
        let text = "password=hunter2";
        assert_eq!(svc.mask_tool_result("off", text), text);
        assert_eq!(svc.mask_tool_result("unknown", text), text);
        assert_eq!(
            svc.mask_tool_result("on", text),
            "password=[MASKED_PASSWORD]"
        );
        assert!(svc.masks_server("on"));
        assert!(!svc.masks_server("off"));
    }

    #[test]
    fn custom_patterns_apply_with_default_replacement() {
        let mut c = cfg(&[], &[]);
        c.custom_patterns = vec![custom("ticket_token", r"TT-[0-9a-f]{8}")];
        let svc =
            MaskingService::new([("s".to_string(), c)], AlertMaskingConfig::default()).unwrap();
        assert_eq!(
            svc.mask_tool_result("s", "use TT-deadbeef now"),
            "use [MASKED_TICKET_TOKEN] now"
        );
    }

    #[test]
    fn panicking_masker_fails_closed() {
        let svc = MaskingService::new([], AlertMaskingConfig::default()).unwrap();
        let mut plan = svc.alert.clone().unwrap();
        let boom: fn(&str) -> bool = |_| panic!("masker bug");
        plan.patterns.insert(
            0,
            Arc::new(CompiledPattern::new(
                "boom",
                Regex::new("SECRET").unwrap(),
                "[MASKED_BOOM]",
                Some(boom),
            )),
        );
        let svc = MaskingService {
            servers: HashMap::from([("s".to_string(), plan.clone())]),
            alert: Some(plan),
        };
        let out = svc.mask_tool_result("s", "the SECRET is hunter2");
        assert!(!out.contains("hunter2"), "{out}");
        assert!(out.contains("withheld"), "{out}");
        assert!(out.contains("'s'"), "{out}");
        // Alert masking fails open.
        assert_eq!(svc.mask_alert_data("the SECRET x"), "the SECRET x");
    }

    #[test]
    fn serialization_failure_fails_closed() {
        // A Secret inside a JSON-looking document whose mapping has a
        // non-string key cannot be written back as JSON.
        let svc = MaskingService::new(
            [("k".to_string(), cfg(&["kubernetes"], &[]))],
            AlertMaskingConfig::default(),
        )
        .unwrap();
        let input = "{? [a, b] : c, kind: Secret, data: {x: c2VjcmV0dmFsdWU=}}";
        let out = svc.mask_tool_result("k", input);
        assert!(!out.contains("c2VjcmV0dmFsdWU="), "{out}");
        assert!(out.starts_with("[MASKED_TOOL_RESULT"), "{out}");
    }

    #[test]
    fn structural_markers_survive_the_regex_layer() {
        let svc = MaskingService::new(
            [("k".to_string(), cfg(&["kubernetes"], &[]))],
            AlertMaskingConfig::default(),
        )
        .unwrap();
        let input = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: aHVudGVyMg==\n";
        let out = svc.mask_tool_result("k", input);
        assert!(out.contains("password: '[MASKED_SECRET_DATA]'"), "{out}");
        assert!(out.ends_with('\n'), "trailing newline kept: {out:?}");
        assert!(!out.contains("aHVudGVyMg=="), "{out}");
    }

    #[test]
    fn alert_data_masked_with_security_group() {
        let svc = MaskingService::new([], AlertMaskingConfig::default()).unwrap();
        let out = svc.mask_alert_data(
            r#"{"alert":"DBDown","annotations":{"runbook":"x","db_password":"hunter2"},"owner":"oncall@example.com"}"#,
        );
        assert!(!out.contains("hunter2"), "{out}");
        assert!(!out.contains("oncall@example.com"), "{out}");
        assert!(out.contains("DBDown"), "{out}");
        let off = MaskingService::new(
            [],
            AlertMaskingConfig {
                enabled: false,
                pattern_group: "security".into(),
            },
        )
        .unwrap();
        assert_eq!(off.mask_alert_data("password=x"), "password=x");
    }
}
