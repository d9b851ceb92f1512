//! Built-in masking patterns and groups, as plain data.
//!
//! Other crates (configuration validation, documentation, the UI) read these
//! tables without compiling anything; [`crate::MaskingService`] compiles them
//! once at construction.
//!
//! `PATTERNS` is in **application order**: multi-line blocks (PEM keys and
//! certificates) and kubeconfig certificate fields first (so that the
//! generic base64-PEM branch of `private_key` cannot claim a certificate),
//! then prefixed tokens with a recognisable shape, then `key: value`
//! heuristics, then the generic base64 sweeps. Running the specific patterns
//! first means the generic ones see `[MASKED_X]` markers instead of half a
//! secret.
//!
//! Replacements use the `regex` crate's expansion syntax (`${1}` and so on):
//! most patterns keep the key and quotes and replace only the value, so that
//! the model still sees which field was there.

/// A built-in regex masking pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinPattern {
    /// Stable name used in configuration (`patterns: [api_key]`).
    pub name: &'static str,
    /// Regular expression (Rust `regex` syntax).
    pub regex: &'static str,
    /// Replacement in `regex` expansion syntax; always yields a `[MASKED_X]` marker.
    pub replacement: &'static str,
    /// One line for humans.
    pub description: &'static str,
}

/// Name of the structural Kubernetes Secret masker, usable in groups and in
/// a server's `patterns` list.
pub const KUBERNETES_SECRET: &str = "kubernetes_secret";

/// Code-based (structural) maskers. They run before every regex pattern.
pub static CODE_MASKERS: &[&str] = &[KUBERNETES_SECRET];

// The value half of a `key: value` / `key=value` pattern. It adds three
// capture groups right after the key-prefix group (2-4 when the prefix is
// group 1): opening `"`, opening `'`, opening `\"` (JSON embedded in a JSON
// string); the replacement re-emits whichever participated on both sides, so
// quoting survives. `$min`/`$rest` are the minimum value length and that
// minus one (for the unquoted branch, whose first character is special).
// Unquoted values may not start with `[` (an earlier `[MASKED_X]`), `<`
// (`kubectl describe` placeholders such as `<set to the key ...>`) or an
// opening bracket.
macro_rules! kv_value {
    ($min:literal, $rest:literal) => {
        concat!(
            r#"(?:(")(?:[^"\\\n]|\\.){"#,
            $min,
            r#",}"|(')[^'\n]{"#,
            $min,
            r#",}'|(\\")[^"\\\n]{"#,
            $min,
            r#",}\\"|[^\s"'\\<\[{}(),;&][^\s"',;{}&]{"#,
            $rest,
            // `kubectl describe secret` prints `password:  16 bytes`; the
            // suffix is consumed so the filter can recognise and keep it.
            r#",}(?:[ \t]bytes\b)?)"#
        )
    };
}

// Separator between a key and its value: optional closing quote of the key
// (possibly escaped), then `:` or `=` with spaces or tabs only, never a
// newline (an empty YAML key followed by the next line is not a value).
macro_rules! kv_sep {
    () => {
        r#"\\?["']?[ \t]*[:=][ \t]*"#
    };
}

macro_rules! kv_replacement {
    ($marker:literal) => {
        concat!("${1}${2}${3}${4}", $marker, "${2}${3}${4}")
    };
}

/// All built-in regex patterns, in application order.
pub static PATTERNS: &[BuiltinPattern] = &[
    BuiltinPattern {
        name: "certificate",
        regex: concat!(
            // The body is base64, whitespace or escaped newlines: a body of
            // "anything up to END" made every unterminated header scan the
            // rest of the text (quadratic on many of them).
            r"-----BEGIN [A-Z0-9 ]*CERTIFICATE[A-Z0-9 ]*-----(?:[A-Za-z0-9+/= \t\r\n]|\\+[nrt])*-----END [A-Z0-9 ]*CERTIFICATE[A-Z0-9 ]*-----",
            // base64 of "-----BEGIN CERTIFICATE-----" (certificates stored base64-encoded)
            r"|LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t[A-Za-z0-9+/]*={0,2}",
        ),
        replacement: "[MASKED_CERTIFICATE]",
        description: "PEM certificates, plain or base64-encoded",
    },
    BuiltinPattern {
        name: "certificate_authority_data",
        regex: r#"((?i:certificate-authority-data|client-certificate-data|cabundle)\\?["']?[ \t]*:[ \t]*\\?["']?)[A-Za-z0-9+/=]{16,}"#,
        replacement: "${1}[MASKED_CERTIFICATE_DATA]",
        description: "kubeconfig certificate-authority-data / client-certificate-data and webhook caBundle values",
    },
    BuiltinPattern {
        name: "private_key",
        regex: concat!(
            // The body: base64, whitespace, escaped newlines and the RFC 1421
            // headers of legacy encrypted keys. Not "anything up to END",
            // which made every unterminated header scan the rest of the text
            // (quadratic: minutes for 1 MiB of truncated keys).
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[A-Za-z0-9+/=: \t\r\n]|\\+[nrt]|(?:Proc-Type|DEK-Info):[ \t]*[A-Za-z0-9,-]*)*-----END [A-Z0-9 ]*PRIVATE KEY-----",
            // A key whose END line was cut off (truncated output): mask the body.
            r"|-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[A-Za-z0-9+/=:\r\n]|\\[nr])*",
            // Any other base64-encoded PEM block ("-----BEGIN").
            r"|LS0tLS1CRUdJTi[A-Za-z0-9+/]*={0,2}",
            // kubeconfig and similar: the key itself inline as base64.
            r#"|((?i:client-key-data|private[_-]?key[_-]?data)\\?["']?[ \t]*:[ \t]*\\?["']?)[A-Za-z0-9+/=]{16,}"#,
        ),
        replacement: "${1}[MASKED_PRIVATE_KEY]",
        description: "PEM private keys (RSA, EC, OpenSSH, PKCS#8, encrypted), base64-encoded PEM, kubeconfig client-key-data",
    },
    BuiltinPattern {
        name: "ssh_key",
        regex: r"(ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp(?:256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com)[ \t]+AAAA[A-Za-z0-9+/]+={0,3}",
        replacement: "${1} [MASKED_SSH_KEY]",
        description: "OpenSSH public keys (authorized_keys format)",
    },
    BuiltinPattern {
        name: "aws_access_key",
        regex: r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
        replacement: "[MASKED_AWS_ACCESS_KEY]",
        description: "AWS access key IDs (AKIA..., ASIA...); user and role IDs (AIDA, AROA) are not credentials and stay",
    },
    BuiltinPattern {
        name: "aws_secret_key",
        regex: concat!(
            r"((?i:aws[_-]?secret[_-]?(?:access[_-]?)?key|secret[_-]?access[_-]?key)",
            kv_sep!(),
            r#")(?:(")[A-Za-z0-9/+=]{40}"|(')[A-Za-z0-9/+=]{40}'|(\\")[A-Za-z0-9/+=]{40}\\"|[A-Za-z0-9/+=]{40})"#,
        ),
        replacement: kv_replacement!("[MASKED_AWS_SECRET_KEY]"),
        description: "AWS secret access keys next to their key name",
    },
    BuiltinPattern {
        name: "github_token",
        regex: r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
        replacement: "[MASKED_GITHUB_TOKEN]",
        description: "GitHub personal access, OAuth, app and refresh tokens",
    },
    BuiltinPattern {
        name: "gitlab_token",
        regex: r"\b(?:glpat|gldt|glrt|glptt|glsoat)-[A-Za-z0-9_-]{20,}",
        replacement: "[MASKED_GITLAB_TOKEN]",
        description: "GitLab personal, deploy, runner and trigger tokens",
    },
    BuiltinPattern {
        name: "gcp_service_account_key",
        regex: r#"((?i:private_key_id)\\?["']?[ \t]*:[ \t]*\\?["']?)[0-9a-f]{40}"#,
        replacement: "${1}[MASKED_GCP_KEY_ID]",
        description: "GCP service-account key ids (the key itself is a PEM private key)",
    },
    BuiltinPattern {
        name: "azure_connection_string",
        regex: r"((?i:AccountKey|SharedAccessKey|SharedAccessSignature|sig)=)[A-Za-z0-9+/%=_.-]{16,}",
        replacement: "${1}[MASKED_AZURE_KEY]",
        description: "Azure storage / service bus connection-string keys and SAS signatures",
    },
    BuiltinPattern {
        name: "slack_token",
        regex: r"\bxox[abposre]-[A-Za-z0-9-]{10,}|\bxapp-[0-9]-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]+",
        replacement: "[MASKED_SLACK_TOKEN]",
        description: "Slack bot/user/app tokens and incoming-webhook URLs",
    },
    BuiltinPattern {
        name: "token",
        regex: concat!(
            // JSON Web Tokens: header and payload both start with `{"` base64url-encoded.
            r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
            // Authorization headers (group 1 keeps the scheme).
            r"|((?i:bearer|authorization:[ \t]*basic|authorization:[ \t]*token)[ \t]+)[A-Za-z0-9._~+/-]{8,}=*",
            // key: value with a name containing "token" (group 2 keeps the key, 3-5 quotes).
            r"|((?i:token)",
            kv_sep!(),
            ")",
            kv_value!(8, 7),
        ),
        replacement: "${1}${2}${3}${4}${5}[MASKED_TOKEN]${3}${4}${5}",
        description: "JWTs, bearer/basic authorization values, and *token* fields (8+ characters)",
    },
    BuiltinPattern {
        name: "api_key",
        regex: concat!(
            r"\bsk-(?:proj-|ant-(?:api\d\d-)?)?[A-Za-z0-9_-]{20,}|\bAIza[0-9A-Za-z_-]{35}\b",
            r"|((?i:api[_-]?key|apikey|api[_-]?secret|api[_-]?token|x-api-key)",
            kv_sep!(),
            ")",
            kv_value!(1, 0),
        ),
        replacement: kv_replacement!("[MASKED_API_KEY]"),
        description: "api_key / apiKey / X-API-Key values, OpenAI/Anthropic (sk-...) and Google (AIza...) keys",
    },
    BuiltinPattern {
        name: "password",
        regex: concat!(
            r"((?i:password|passwd|passphrase|\bpwd)",
            kv_sep!(),
            ")",
            kv_value!(1, 0),
            // Credentials in URLs: scheme://user:PASSWORD@host (groups 5 and 6).
            r#"|(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@"'<>]*:)[^\s@/"'<>]+(@)"#,
        ),
        replacement: "${1}${5}${2}${3}${4}[MASKED_PASSWORD]${2}${3}${4}${6}",
        description: "password / passwd / pwd fields and user:password@ credentials in URLs",
    },
    BuiltinPattern {
        name: "secret_key",
        regex: concat!(
            r"((?i:secret(?:[_-]?(?:key|value))?|private[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key|access[_-]?key)",
            kv_sep!(),
            ")",
            kv_value!(4, 3),
        ),
        replacement: kv_replacement!("[MASKED_SECRET_KEY]"),
        description: "secret / client_secret / *_secret_key / private_key / signing_key fields (4+ characters)",
    },
    BuiltinPattern {
        name: "email",
        regex: r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
        replacement: "[MASKED_EMAIL]",
        description: "Email addresses",
    },
    BuiltinPattern {
        name: "base64_secret",
        regex: r"[A-Za-z0-9+/]{40,}={0,2}",
        replacement: "[MASKED_BASE64_SECRET]",
        description: "Long base64 runs (40+ characters) mixing upper case, lower case and digits; hex digests and paths are left alone",
    },
    BuiltinPattern {
        name: "base64_short",
        regex: r#"([:=][ \t]*\\?["']?)[A-Za-z0-9+/]{2,38}={1,2}"#,
        replacement: "${1}[MASKED_BASE64_VALUE]",
        description: "Short padded base64 values after `:` or `=` (e.g. Secret data shown outside a manifest)",
    },
];

/// Built-in groups: group name → pattern names (including code maskers).
pub static GROUPS: &[(&str, &[&str])] = &[
    ("basic", &["api_key", "password"]),
    (
        "secrets",
        &["api_key", "password", "token", "secret_key", "private_key"],
    ),
    (
        "security",
        &[
            // Alert data and chat questions (masked with this group by
            // default) may hold a pasted `kubectl get secret -o yaml`, whose
            // base64 values no regex recognises.
            KUBERNETES_SECRET,
            "api_key",
            "password",
            "token",
            "secret_key",
            "private_key",
            "ssh_key",
            "email",
            "aws_access_key",
            "aws_secret_key",
            "github_token",
            "gitlab_token",
            "slack_token",
            "gcp_service_account_key",
            "azure_connection_string",
        ],
    ),
    (
        "kubernetes",
        &[
            KUBERNETES_SECRET,
            "api_key",
            "password",
            "token",
            "secret_key",
            "private_key",
            "certificate_authority_data",
            // Cloud and forge credentials end up in pod env and logs too.
            "aws_access_key",
            "aws_secret_key",
            "github_token",
            "gitlab_token",
            "slack_token",
            "gcp_service_account_key",
            "azure_connection_string",
        ],
    ),
    (
        "cloud",
        &[
            "aws_access_key",
            "aws_secret_key",
            "gcp_service_account_key",
            "azure_connection_string",
            "api_key",
            "token",
            "secret_key",
            "private_key",
            "password",
        ],
    ),
    (
        "all",
        &[
            KUBERNETES_SECRET,
            "certificate",
            "certificate_authority_data",
            "private_key",
            "ssh_key",
            "aws_access_key",
            "aws_secret_key",
            "github_token",
            "gitlab_token",
            "slack_token",
            "gcp_service_account_key",
            "azure_connection_string",
            "token",
            "api_key",
            "password",
            "secret_key",
            "email",
            "base64_secret",
            "base64_short",
        ],
    ),
];

/// Looks up a built-in regex pattern by name.
pub fn pattern(name: &str) -> Option<&'static BuiltinPattern> {
    PATTERNS.iter().find(|p| p.name == name)
}

/// Looks up a built-in group by name; members may name code maskers.
pub fn group(name: &str) -> Option<&'static [&'static str]> {
    GROUPS.iter().find(|(g, _)| *g == name).map(|(_, m)| *m)
}

/// Whether `name` is a code (structural) masker.
pub fn is_code_masker(name: &str) -> bool {
    CODE_MASKERS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_compiles_and_never_matches_empty() {
        for p in PATTERNS {
            let re = regex::Regex::new(p.regex)
                .unwrap_or_else(|e| panic!("pattern {} does not compile: {e}", p.name));
            assert!(!re.is_match(""), "pattern {} matches empty input", p.name);
            assert!(
                p.replacement.contains("[MASKED_"),
                "pattern {} replacement is not a [MASKED_X] marker",
                p.name
            );
        }
    }

    #[test]
    fn group_members_all_exist_and_all_covers_everything() {
        for (g, members) in GROUPS {
            for m in *members {
                assert!(
                    pattern(m).is_some() || is_code_masker(m),
                    "group {g} names unknown pattern {m}"
                );
            }
        }
        let all = group("all").unwrap();
        for p in PATTERNS {
            assert!(all.contains(&p.name), "group all misses {}", p.name);
        }
        for c in CODE_MASKERS {
            assert!(all.contains(c), "group all misses {c}");
        }
        assert_eq!(PATTERNS.len(), 18);
        assert!(group("nope").is_none());
        assert!(pattern("nope").is_none());
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = PATTERNS.iter().map(|p| p.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PATTERNS.len());
    }
}
